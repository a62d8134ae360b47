/* draw.c: the canvas, fonts, palette and primitives, and a canvas
 * encoded as PNG in memory (see dtv_draw.h). */
#include "dtv_draw.h"

#include <SDL_image.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_file.h"

/* A light theme: figures go into docs printed on white. */
const SDL_Color DTV_BG = {255, 255, 255, 255};
const SDL_Color DTV_PANEL = {244, 245, 247, 255};
const SDL_Color DTV_FG = {30, 32, 36, 255};
const SDL_Color DTV_DIM = {110, 114, 122, 255};
const SDL_Color DTV_GRID = {218, 221, 226, 255};
const SDL_Color DTV_ACCENT = {200, 40, 40, 255};
const SDL_Color DTV_WARN = {230, 120, 0, 255};

/* Colour-blind-safe hues (Okabe-Ito and Tol's), one per kind. */
static const SDL_Color dtv__kind_colors[DTV_N_KINDS] = {
    {0, 114, 178, 255},   /* forward: blue */
    {0, 158, 115, 255},   /* backward: green */
    {136, 34, 85, 255},   /* weight gradients: wine (Tol's) */
    {86, 180, 233, 255},  /* recompute: sky */
    {230, 159, 0, 255},   /* optimizer: orange */
    {150, 150, 150, 255}, /* send: grey */
    {204, 204, 204, 255}, /* receive (waiting): light grey */
    {204, 121, 167, 255}, /* reduce-scatter: purple-pink */
    {120, 94, 160, 255},  /* all-gather: violet */
    {213, 94, 0, 255},    /* tp allreduce: vermillion */
    {68, 170, 153, 255},  /* sp all-gather: teal (Tol's) */
    {204, 102, 119, 255}, /* sp reduce-scatter: rose (Tol's) */
    {221, 204, 119, 255}, /* sp layernorm grad allreduce: sand (Tol's) */
    {51, 34, 136, 255},   /* cp ring step: indigo (Tol's) */
    {187, 204, 51, 255},  /* cp kv all-gather: pear (Tol's) */
    {102, 51, 0, 255},    /* cp dkv reduce-scatter: dark brown */
    {0, 0, 110, 255},     /* cp all-to-all: navy */
    {240, 228, 66, 255},  /* push/pull: yellow */
    {17, 119, 51, 255},   /* allreduce between stages: dark green */
    {68, 68, 68, 255},    /* stash/drop: dark grey */
    {170, 170, 120, 255}, /* evaluate: olive */
    {180, 180, 180, 255}, /* other */
};

SDL_Color dtv_kind_color(dtv_kind k) { return k < DTV_N_KINDS ? dtv__kind_colors[k] : dtv__kind_colors[DTV_OTHER]; }

int dtv_color_eq(SDL_Color a, SDL_Color b) { return a.r == b.r && a.g == b.g && a.b == b.b; }

static int dtv__sdl_video, dtv__sdl_base;

/* The video drivers SDL may try for a window. With SDL_VIDEODRIVER set,
 * that choice; otherwise only x11 and wayland, and only where DISPLAY or
 * WAYLAND_DISPLAY names a display. Left to itself SDL (2.26) probes every
 * driver and, with no display, settles on "offscreen", which opens no
 * window: dtviz then waited for keys that could never come, silently (and
 * libwayland printed a line of its own while being probed). Returns 0 and
 * fills `why` when there is nothing to try. */
static int dtv__video_drivers(char *why, size_t n)
{
    const char *chosen = SDL_GetHint(SDL_HINT_VIDEODRIVER); /* the hint or $SDL_VIDEODRIVER */
    if (chosen && chosen[0]) return 1;
    const char *x11 = SDL_getenv("DISPLAY"), *wl = SDL_getenv("WAYLAND_DISPLAY");
    const char *xdg = SDL_getenv("XDG_RUNTIME_DIR");
    const int has_x11 = x11 && x11[0];
    /* a relative WAYLAND_DISPLAY is a socket in XDG_RUNTIME_DIR */
    const int has_wl = wl && wl[0] && (wl[0] == '/' || (xdg && xdg[0]));
    if (!has_x11 && !has_wl) {
        if (wl && wl[0]) snprintf(why, n, "DISPLAY is unset and WAYLAND_DISPLAY=%.60s needs XDG_RUNTIME_DIR, unset", wl);
        else snprintf(why, n, "DISPLAY and WAYLAND_DISPLAY are unset");
        return 0;
    }
#if SDL_VERSION_ATLEAST(2, 0, 22) /* a comma-separated list of drivers */
    SDL_SetHint(SDL_HINT_VIDEODRIVER, has_x11 && has_wl ? "x11,wayland" : has_x11 ? "x11" : "wayland");
#else
    SDL_SetHint(SDL_HINT_VIDEODRIVER, has_x11 ? "x11" : "wayland");
#endif
    return 1;
}

dt_status dtv_sdl_init(int with_video)
{
    if (!dtv__sdl_base) {
        if (SDL_Init(0) != 0) return DT_FAIL(DT_ERR_BACKEND, "SDL_Init: %s", SDL_GetError());
        if (TTF_Init() != 0) return DT_FAIL(DT_ERR_BACKEND, "TTF_Init: %s", TTF_GetError());
        dtv__sdl_base = 1;
    }
    if (with_video && !dtv__sdl_video) {
        char why[128];
        if (!dtv__video_drivers(why, sizeof why))
            return DT_FAIL(DT_ERR_BACKEND, "no display for the window (%s); use --png FILE or --frames DIR, which need none",
                           why);
        if (SDL_InitSubSystem(SDL_INIT_VIDEO) != 0) {
            const char *d = SDL_getenv("DISPLAY"), *wl = SDL_getenv("WAYLAND_DISPLAY");
            return DT_FAIL(DT_ERR_BACKEND,
                           "no display for the window (DISPLAY=%s WAYLAND_DISPLAY=%s: %s); use --png FILE or --frames "
                           "DIR, which need none",
                           d ? d : "(unset)", wl ? wl : "(unset)", SDL_GetError());
        }
        dtv__sdl_video = 1;
    }
    return DT_OK;
}

int dtv_sdl_windowless(void)
{
    const char *d = dtv__sdl_video ? SDL_GetCurrentVideoDriver() : NULL;
    return d && (strcmp(d, "offscreen") == 0 || strcmp(d, "dummy") == 0);
}

static dt_status dtv__fonts(dtv_canvas *c)
{
    const char *dir = getenv("DTV_FONT_DIR");
    if (!dir || !dir[0]) dir = "/usr/share/fonts/truetype/dejavu";
    char path[1024];
    snprintf(path, sizeof path, "%s/DejaVuSans.ttf", dir);
    c->font = TTF_OpenFont(path, 13);
    c->small = TTF_OpenFont(path, 10);
    snprintf(path, sizeof path, "%s/DejaVuSans-Bold.ttf", dir);
    c->bold = TTF_OpenFont(path, 14);
    if (!c->font || !c->small || !c->bold)
        return DT_FAIL(DT_ERR_IO,
                       "%s: cannot open the DejaVu fonts (%s; install fonts-dejavu-core or set DTV_FONT_DIR)", path,
                       TTF_GetError());
    return DT_OK;
}

dt_status dtv_canvas_headless(int w, int h, dtv_canvas *out)
{
    memset(out, 0, sizeof *out);
    if (w < 64 || h < 64 || w > 16384 || h > 16384)
        return DT_FAIL(DT_ERR_INVALID, "--size %dx%d: expected 64..16384 pixels each way", w, h);
    DT_CHECK(dtv_sdl_init(0));
    out->surface = SDL_CreateRGBSurfaceWithFormat(0, w, h, 32, SDL_PIXELFORMAT_RGBA32);
    if (!out->surface) return DT_FAIL(DT_ERR_NOMEM, "SDL surface %dx%d: %s", w, h, SDL_GetError());
    out->r = SDL_CreateSoftwareRenderer(out->surface);
    if (!out->r) {
        dtv_canvas_free(out);
        return DT_FAIL(DT_ERR_BACKEND, "SDL software renderer: %s", SDL_GetError());
    }
    out->w = w;
    out->h = h;
    dt_status st = dtv__fonts(out);
    if (st != DT_OK) dtv_canvas_free(out);
    return st;
}

dt_status dtv_canvas_window(int w, int h, const char *title, dtv_canvas *out)
{
    memset(out, 0, sizeof *out);
    DT_CHECK(dtv_sdl_init(1));
    out->win = SDL_CreateWindow(title, SDL_WINDOWPOS_UNDEFINED, SDL_WINDOWPOS_UNDEFINED, w, h,
                                SDL_WINDOW_RESIZABLE | SDL_WINDOW_ALLOW_HIGHDPI);
    if (!out->win) return DT_FAIL(DT_ERR_BACKEND, "SDL window: %s", SDL_GetError());
    out->r = SDL_CreateRenderer(out->win, -1, SDL_RENDERER_PRESENTVSYNC);
    if (!out->r) out->r = SDL_CreateRenderer(out->win, -1, SDL_RENDERER_SOFTWARE);
    if (!out->r) {
        dtv_canvas_free(out);
        return DT_FAIL(DT_ERR_BACKEND, "SDL renderer: %s", SDL_GetError());
    }
    dtv_canvas_resized(out);
    dt_status st = dtv__fonts(out);
    if (st != DT_OK) dtv_canvas_free(out);
    return st;
}

void dtv_canvas_resized(dtv_canvas *c)
{
    if (c->win && SDL_GetRendererOutputSize(c->r, &c->w, &c->h) != 0) SDL_GetWindowSize(c->win, &c->w, &c->h);
}

void dtv_canvas_free(dtv_canvas *c)
{
    if (!c) return;
    if (c->font) TTF_CloseFont(c->font);
    if (c->small) TTF_CloseFont(c->small);
    if (c->bold) TTF_CloseFont(c->bold);
    if (c->r) SDL_DestroyRenderer(c->r);
    if (c->surface) SDL_FreeSurface(c->surface);
    if (c->win) SDL_DestroyWindow(c->win);
    memset(c, 0, sizeof *c);
}

/* A growing memory buffer behind an SDL_RWops, for IMG_SavePNG_RW: the
 * PNG is encoded in memory and written by dt_file_write_whole, which checks every
 * step. (IMG_SavePNG wrote through stdio and did not check the final
 * fclose, so a full disk gave a truncated PNG and exit status 0.) */
typedef struct dtv__membuf {
    unsigned char *p;
    size_t n, cap, pos;
} dtv__membuf;

static size_t dtv__mem_write(SDL_RWops *rw, const void *src, size_t size, size_t num)
{
    dtv__membuf *m = rw->hidden.unknown.data1;
    if (size == 0 || num == 0) return 0;
    if (num > SIZE_MAX / size || m->pos > SIZE_MAX - size * num) return 0;
    const size_t bytes = size * num, end = m->pos + bytes;
    if (end > m->cap) {
        size_t cap = m->cap ? m->cap : 1 << 16;
        while (cap < end) cap = cap > SIZE_MAX / 2 ? end : cap * 2;
        unsigned char *p = realloc(m->p, cap);
        if (!p) return 0;
        m->p = p;
        m->cap = cap;
    }
    if (m->pos > m->n) memset(m->p + m->n, 0, m->pos - m->n);
    memcpy(m->p + m->pos, src, bytes);
    m->pos = end;
    if (end > m->n) m->n = end;
    return num;
}

static Sint64 dtv__mem_seek(SDL_RWops *rw, Sint64 off, int whence)
{
    dtv__membuf *m = rw->hidden.unknown.data1;
    const Sint64 base = whence == RW_SEEK_SET ? 0 : whence == RW_SEEK_CUR ? (Sint64)m->pos : (Sint64)m->n;
    if (base + off < 0) return SDL_SetError("seek before the start of the PNG");
    m->pos = (size_t)(base + off);
    return (Sint64)m->pos;
}

static Sint64 dtv__mem_size(SDL_RWops *rw) { return (Sint64)((dtv__membuf *)rw->hidden.unknown.data1)->n; }

static size_t dtv__mem_read(SDL_RWops *rw, void *dst, size_t size, size_t num)
{
    (void)rw, (void)dst, (void)size, (void)num;
    return 0;
}

static int dtv__mem_close(SDL_RWops *rw)
{
    SDL_FreeRW(rw);
    return 0;
}

dt_status dtv_canvas_encode_png(dtv_canvas *c, void **png, size_t *n)
{
    *png = NULL;
    *n = 0;
    SDL_Surface *s = c->surface;
    SDL_Surface *tmp = NULL;
    if (!s) {
        tmp = SDL_CreateRGBSurfaceWithFormat(0, c->w, c->h, 32, SDL_PIXELFORMAT_RGBA32);
        if (!tmp) return DT_FAIL(DT_ERR_NOMEM, "PNG of %dx%d: %s", c->w, c->h, SDL_GetError());
        if (SDL_RenderReadPixels(c->r, NULL, SDL_PIXELFORMAT_RGBA32, tmp->pixels, tmp->pitch) != 0) {
            SDL_FreeSurface(tmp);
            return DT_FAIL(DT_ERR_BACKEND, "reading the window back: %s", SDL_GetError());
        }
        s = tmp;
    } else {
        SDL_RenderFlush(c->r);
    }
    dtv__membuf m = {0};
    SDL_RWops *rw = SDL_AllocRW();
    int rc = -1;
    if (rw) {
        rw->type = SDL_RWOPS_UNKNOWN;
        rw->hidden.unknown.data1 = &m;
        rw->size = dtv__mem_size;
        rw->seek = dtv__mem_seek;
        rw->read = dtv__mem_read;
        rw->write = dtv__mem_write;
        rw->close = dtv__mem_close;
        rc = IMG_SavePNG_RW(s, rw, 1);
    }
    if (tmp) SDL_FreeSurface(tmp);
    if (rc != 0 || m.n == 0) {
        free(m.p);
        return DT_FAIL(DT_ERR_NOMEM, "encoding a %dx%d PNG: %s", c->w, c->h, rw ? IMG_GetError() : SDL_GetError());
    }
    *png = m.p;
    *n = m.n;
    return DT_OK;
}

dt_status dtv_canvas_png(dtv_canvas *c, const char *path, const char *what)
{
    void *png;
    size_t n;
    DT_CHECK(dtv_canvas_encode_png(c, &png, &n));
    const dt_status st = dt_file_write_whole(path, what, png, n);
    free(png);
    return st;
}

SDL_Color dtv_canvas_pixel(const dtv_canvas *c, int x, int y)
{
    SDL_Color col = {0, 0, 0, 0};
    if (!c->surface || x < 0 || y < 0 || x >= c->w || y >= c->h) return col;
    SDL_RenderFlush(c->r);
    const Uint8 *p = (const Uint8 *)c->surface->pixels + (size_t)y * c->surface->pitch + (size_t)x * 4;
    Uint32 v;
    memcpy(&v, p, 4);
    SDL_GetRGBA(v, c->surface->format, &col.r, &col.g, &col.b, &col.a);
    return col;
}

static void dtv__set(dtv_canvas *c, SDL_Color col) { SDL_SetRenderDrawColor(c->r, col.r, col.g, col.b, col.a); }

void dtv_clear(dtv_canvas *c, SDL_Color col)
{
    dtv__set(c, col);
    SDL_RenderClear(c->r);
}

void dtv_fill(dtv_canvas *c, int x, int y, int w, int h, SDL_Color col)
{
    if (w <= 0 || h <= 0) return;
    dtv__set(c, col);
    SDL_Rect r = {x, y, w, h};
    SDL_RenderFillRect(c->r, &r);
}

void dtv_frame(dtv_canvas *c, int x, int y, int w, int h, SDL_Color col)
{
    dtv__set(c, col);
    SDL_Rect r = {x, y, w, h};
    SDL_RenderDrawRect(c->r, &r);
}

void dtv_line(dtv_canvas *c, int x0, int y0, int x1, int y1, SDL_Color col)
{
    dtv__set(c, col);
    SDL_RenderDrawLine(c->r, x0, y0, x1, y1);
}

void dtv_disc(dtv_canvas *c, int cx, int cy, int radius, SDL_Color col)
{
    dtv__set(c, col);
    for (int dy = -radius; dy <= radius; dy++) {
        int dx = 0;
        while ((dx + 1) * (dx + 1) + dy * dy <= radius * radius) dx++;
        SDL_RenderDrawLine(c->r, cx - dx, cy + dy, cx + dx, cy + dy);
    }
}

static TTF_Font *dtv__font(const dtv_canvas *c, int font)
{
    return font == DTV_FONT_SMALL ? c->small : font == DTV_FONT_BOLD ? c->bold : c->font;
}

int dtv_text_height(const dtv_canvas *c, int font) { return TTF_FontLineSkip(dtv__font(c, font)); }

int dtv_text(dtv_canvas *c, int x, int y, int font, int align, SDL_Color col, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!buf[0]) return 0;
    SDL_Surface *s = TTF_RenderUTF8_Blended(dtv__font(c, font), buf, col);
    if (!s) return 0;
    SDL_Texture *tx = SDL_CreateTextureFromSurface(c->r, s);
    const int w = s->w, h = s->h;
    SDL_FreeSurface(s);
    if (!tx) return 0;
    SDL_Rect dst = {align == DTV_CENTER ? x - w / 2 : align == DTV_RIGHT ? x - w : x, y, w, h};
    SDL_RenderCopy(c->r, tx, NULL, &dst);
    SDL_DestroyTexture(tx);
    return w;
}

void dtv_fmt_time(char *buf, size_t n, double ns)
{
    const double a = ns < 0 ? -ns : ns;
    if (a < 0.5) { /* no "-0 ns" on an axis that starts a hair below 0 */
        snprintf(buf, n, "0 ns");
        return;
    }
    if (a >= 1e9) snprintf(buf, n, "%.3g s", ns * 1e-9);
    else if (a >= 1e6) snprintf(buf, n, "%.3g ms", ns * 1e-6);
    else if (a >= 1e3) snprintf(buf, n, "%.3g us", ns * 1e-3);
    else snprintf(buf, n, "%.0f ns", ns);
}

void dtv_fmt_time_tick(char *buf, size_t n, double ns, double step)
{
    const double a = ns < 0 ? -ns : ns;
    if (a < 0.5 || !(step > 0)) {
        dtv_fmt_time(buf, n, ns);
        return;
    }
    const double unit = a >= 1e9 ? 1e9 : a >= 1e6 ? 1e6 : a >= 1e3 ? 1e3 : 1;
    const char *name = unit == 1e9 ? "s" : unit == 1e6 ? "ms" : unit == 1e3 ? "us" : "ns";
    /* enough decimals that ticks `step` apart never print the same */
    int dec = step / unit >= 1 ? 0 : (int)ceil(-log10(step / unit) - 1e-9);
    if (dec > 6) dec = 6;
    snprintf(buf, n, "%.*f %s", dec, ns / unit, name);
}

void dtv_fmt_bytes(char *buf, size_t n, double bytes)
{
    if (bytes >= 1024.0 * 1024 * 1024) snprintf(buf, n, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else if (bytes >= 1024.0 * 1024) snprintf(buf, n, "%.2f MiB", bytes / (1024.0 * 1024));
    else if (bytes >= 1024.0) snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
    else snprintf(buf, n, "%.0f B", bytes);
}
