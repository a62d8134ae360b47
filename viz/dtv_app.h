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
    int n;               /* traces: 1 or 2 */
    dtv_trace tr[2];
    double step_ns[2];   /* mean step period of each trace's lowest rank (NAN: unknown) */
    dtv_view view[2];
    const char *profile; /* what-if: a profile for the simulator's costs (NULL: roofline) */
    const char *hw;      /* what-if: a hardware file (NULL: the trace's) */
} dtv_app;

/* Load one or two traces and set whole-trace views. */
dt_status dtv_app_open(dtv_app *a, const char *const *paths, int n);
void dtv_app_close(dtv_app *a);
/* Set every pane's view id; playback time `frac` of each trace's span
 * (0..1, or >1: everything). */
void dtv_app_set(dtv_app *a, dtv_view_id id, double frac);
/* Draw the panes into the whole canvas. */
void dtv_app_render(dtv_app *a, dtv_canvas *c);
/* Headless: one PNG. */
dt_status dtv_app_png(dtv_app *a, int w, int h, const char *path);
/* Headless: `frames` PNGs DIR/frame_00000.png ... with the playback time
 * going from the start to the end of the traces. */
dt_status dtv_app_frames(dtv_app *a, int w, int h, const char *dir, int frames);
/* A window until closed (keys in dtv_app_help_lines). */
dt_status dtv_app_interactive(dtv_app *a, int w, int h);

#endif
