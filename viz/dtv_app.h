/* dtv_app.h: what dtviz does with its traces (viz/app.c): one or two
 * panes (a real run and its simulation, aligned on their own starts, with
 * the difference in step time), rendered once (headless PNG), as numbered
 * frames, or interactively in a window.
 *
 * Invariants: a frame depends only on the traces and the views (the same
 * state gives the same pixels); the interactive loop only changes views
 * (and, for what-if, replaces a simulated trace by a new simulation). */
#ifndef DTV_APP_H
#define DTV_APP_H

#include "dtv_view.h"

typedef struct dtv_app {
    int n; /* traces: 1 or 2 */
    dtv_trace tr[2];
    double step_ns[2]; /* mean step period of each trace's lowest rank (NAN: unknown) */
    dtv_view view[2];
    const char *profile; /* what-if: a profile for the simulator's costs (NULL: roofline) */
    const char *hw;      /* what-if: a hardware file (NULL: the trace's) */
    /* interactive state (viz/interactive.c); zero after dtv_app_open */
    int playing;           /* playback running (view[].now advances in dtv_app_tick) */
    double speed;          /* playback speed (0: 1); the whole trace plays in DTV_PLAY_SECONDS at 1 */
    double play_frac;      /* sub-nanosecond remainder of the playback advance */
    int help;              /* help overlay shown */
    char status[320];      /* one-line status message ("" none) */
    int status_error;      /* the message is an error */
    int dragging, drag_x;  /* left button held since x = drag_x */
    int64_t drag_t0;       /* view[0].t0 when the drag started */
    double bw_scale;       /* what-if: link bandwidth factor of tr[0] (0: 1) */
    int whatif_runs;       /* what-if re-simulations done */
    char whatif_base[512]; /* tr[0]'s name before the first what-if */
    char whatif[160];      /* the last what-if's settings and step time (the status line keeps showing it) */
    long frames;           /* frames drawn by the last dtv_app_interactive */
} dtv_app;

/* Interactive state changes (viz/interactive.c), without a display. */
#define DTV_PLAY_SECONDS 20.0 /* wall seconds the whole trace takes at speed 1 */
#define DTV_WHATIF_STEPS 4    /* what-if re-runs simulate at most this many steps */
/* A key (SDL keycode and modifiers: shift makes p, m, b upper case);
 * returns 1 when it asks to quit (q, Escape without the help shown), else 0. */
int dtv_app_key(dtv_app *a, SDL_Keycode key, Uint16 mod);
/* The mouse on canvas c (its size and the timeline's layout map x to
 * time; NULL: 1400x800, the whole width): a press / move / release of the
 * left button at (x, y) (a drag pans; a press on a tensor in the fp8
 * view's list shows that tensor instead), or a wheel turn of `wheel`
 * notches at (x, y) (> 0 zooms in around the time under the pointer). */
enum { DTV_MOUSE_DOWN = 0, DTV_MOUSE_MOVE, DTV_MOUSE_UP, DTV_MOUSE_WHEEL };
void dtv_app_mouse(dtv_app *a, const dtv_canvas *c, int kind, int x, int y, int wheel);
/* Playback: advance view[].now by speed x wall_seconds (trace time scaled
 * so that the whole trace takes DTV_PLAY_SECONDS); nothing when paused. */
void dtv_app_tick(dtv_app *a, double wall_seconds);
/* The help overlay's lines (every key), NULL-terminated. */
const char *const *dtv_app_help_lines(void);
/* A window's frame: dtv_app_render above a status line DTV_STATUS_H pixels
 * high (view, playback, speed, the message), and the help overlay on top
 * when shown. */
#define DTV_STATUS_H 22
void dtv_app_render_window(dtv_app *a, dtv_canvas *c);

/* Load one or two traces and set whole-trace views. */
dt_status dtv_app_open(dtv_app *a, const char *const *paths, int n);
void dtv_app_close(dtv_app *a);
/* Set every pane's view id; playback time `frac` of each trace's span
 * (0..1, or >1: everything). */
void dtv_app_set(dtv_app *a, dtv_view_id id, double frac);
/* Show the part [f0, f1] of each trace (fractions of its span, 0 <= f0 < f1 <= 1). */
void dtv_app_zoom(dtv_app *a, double f0, double f1);
/* The default window of a picture w x h (not for the window, which opens on
 * the whole trace and zooms): the timeline and memory views cut to their
 * last few complete steps where the whole trace would make steps slivers
 * (dtv_view_fit), two panes to one span; returns 1 when cut. Call after
 * dtv_app_set, and instead of dtv_app_zoom. */
int dtv_app_fit(dtv_app *a, int w, int h);
/* The height a timeline picture needs for its rows at full row height
 * (two panes: the taller, twice, and the comparison line), within
 * DTV_FIT_MIN_H..DTV_FIT_MAX_H. */
enum { DTV_FIT_MIN_H = 120, DTV_FIT_MAX_H = 800 };
int dtv_app_fit_height(const dtv_app *a);
/* Draw the panes into the whole canvas. */
void dtv_app_render(dtv_app *a, dtv_canvas *c);
/* Headless: one PNG. */
dt_status dtv_app_png(dtv_app *a, int w, int h, const char *path);
/* Headless: `frames` PNGs DIR/frame_00000.png ... with the playback time
 * going from the start to the end of each pane's window (the whole trace
 * unless zoomed or cut). */
dt_status dtv_app_frames(dtv_app *a, int w, int h, const char *dir, int frames);
/* A window until closed (keys in dtv_app_help_lines). */
dt_status dtv_app_interactive(dtv_app *a, int w, int h);

#endif
