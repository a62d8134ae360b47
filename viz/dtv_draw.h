/* dtv_draw.h: the viewer's canvas (viz/draw.c): an SDL renderer on a
 * window or, headless, on a memory surface (no display needed: SDL's
 * software renderer draws into an SDL_Surface that SDL2_image saves as
 * PNG), the DejaVu fonts through SDL2_ttf, the palette and a few drawing
 * primitives every view uses.
 *
 * Fonts: $DTV_FONT_DIR or /usr/share/fonts/truetype/dejavu (Debian's
 * fonts-dejavu-core); a missing font is an error naming the file.
 *
 * Invariants: all drawing goes through the canvas's renderer; text is
 * clipped to the canvas; colours are the palette's (one colour per kind of
 * span, the same in every view and in the legend). */
#ifndef DTV_DRAW_H
#define DTV_DRAW_H

#include <SDL.h>
#include <SDL_ttf.h>

#include "dt_status.h"
#include "dtv_trace.h"

typedef struct dtv_canvas {
    SDL_Window *win;      /* NULL headless */
    SDL_Surface *surface; /* headless target, NULL with a window */
    SDL_Renderer *r;
    TTF_Font *font, *small, *bold;
    int w, h;
} dtv_canvas;

enum { DTV_LEFT = 0, DTV_CENTER, DTV_RIGHT };
enum { DTV_FONT_NORMAL = 0, DTV_FONT_SMALL, DTV_FONT_BOLD };

/* SDL and SDL_ttf started once (idempotent); headless also works with
 * SDL_VIDEODRIVER unset on a machine without a display. with_video (for a
 * window): SDL_VIDEODRIVER's driver, or else x11 / wayland where DISPLAY /
 * WAYLAND_DISPLAY is set; none of them set, or no driver starting, is
 * DT_ERR_BACKEND with one line that suggests --png and --frames. */
dt_status dtv_sdl_init(int with_video);
/* After dtv_sdl_init(1): 1 when the driver opens no visible window
 * (SDL_VIDEODRIVER=dummy or offscreen), else 0. */
int dtv_sdl_windowless(void);
dt_status dtv_canvas_headless(int w, int h, dtv_canvas *out);
dt_status dtv_canvas_window(int w, int h, const char *title, dtv_canvas *out);
/* After a window resize: the new size. */
void dtv_canvas_resized(dtv_canvas *c);
void dtv_canvas_free(dtv_canvas *c);
/* Save what was drawn (headless: the surface; window: read back) as a PNG
 * file, whole or not at all (dt_file_write_whole; `what`, e.g. "--png",
 * starts its messages). */
dt_status dtv_canvas_png(dtv_canvas *c, const char *path, const char *what);
/* What was drawn as PNG bytes in memory (*png malloc'd, the caller frees). */
dt_status dtv_canvas_encode_png(dtv_canvas *c, void **png, size_t *n);
/* The pixel at (x, y) (headless only; tests). */
SDL_Color dtv_canvas_pixel(const dtv_canvas *c, int x, int y);

extern const SDL_Color DTV_BG, DTV_PANEL, DTV_FG, DTV_DIM, DTV_GRID, DTV_ACCENT, DTV_WARN;
SDL_Color dtv_kind_color(dtv_kind k);
int dtv_color_eq(SDL_Color a, SDL_Color b);

void dtv_clear(dtv_canvas *c, SDL_Color col);
void dtv_fill(dtv_canvas *c, int x, int y, int w, int h, SDL_Color col);
void dtv_frame(dtv_canvas *c, int x, int y, int w, int h, SDL_Color col);
void dtv_line(dtv_canvas *c, int x0, int y0, int x1, int y1, SDL_Color col);
void dtv_disc(dtv_canvas *c, int cx, int cy, int radius, SDL_Color col);
/* Text at (x, y) (top), aligned left/center/right of x; returns its width. */
int dtv_text(dtv_canvas *c, int x, int y, int font, int align, SDL_Color col, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
int dtv_text_height(const dtv_canvas *c, int font);
/* A time in ns as "12.3 ms" / "450 us" / "2.01 s". */
void dtv_fmt_time(char *buf, size_t n, double ns);
/* An axis tick: the unit of ns, with enough decimals to tell ticks `step` ns apart */
void dtv_fmt_time_tick(char *buf, size_t n, double ns, double step);
/* A byte count as "3.2 MiB". */
void dtv_fmt_bytes(char *buf, size_t n, double bytes);

#endif
