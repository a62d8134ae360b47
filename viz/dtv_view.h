/* dtv_view.h: the views (one file each: view_timeline.c, view_ring.c,
 * view_scale.c, view_memory.c, view_breakdown.c, view_cp.c, view_fp8.c; the two circle
 * views share ring_draw.c) and what they share: the visible time
 * window, the playback time and the layout helpers. The registry (names,
 * dispatch) is view.c, the time axis and legend view_axis.c, a picture's
 * default window view_fit.c: the views use those helpers and the registry
 * uses the views, never the other way.
 *
 * A view draws one trace into a rectangle of the canvas. It draws only
 * what is visible (spans found by binary search, at most one box per pixel
 * column and row) and what has happened by the playback time `now` (spans
 * after it are not drawn, a span across it is cut there), so an animation
 * is a sequence of frames with growing `now`.
 *
 * Invariants: views never change the trace; they draw inside their
 * rectangle only; the same state gives the same pixels. */
#ifndef DTV_VIEW_H
#define DTV_VIEW_H

#include <stdint.h>

#include "dtv_draw.h"
#include "dtv_trace.h"

typedef enum dtv_view_id {
    DTV_VIEW_TIMELINE = 0,
    DTV_VIEW_RING,
    DTV_VIEW_SCALE,
    DTV_VIEW_MEMORY,
    DTV_VIEW_BREAKDOWN,
    DTV_VIEW_CP,
    DTV_VIEW_FP8,
    DTV_N_VIEWS
} dtv_view_id;

/* view.c: the registry. */
const char *dtv_view_name(dtv_view_id v); /* "timeline", "ring", "scale", "memory", "breakdown", "cp", "fp8" */
int dtv_view_parse(const char *s, dtv_view_id *out);

typedef struct dtv_view {
    dtv_view_id id;
    int64_t t0, t1;     /* visible window of trace time (t0 < t1) */
    int64_t now;        /* playback time: nothing after it is drawn (INT64_MAX: everything) */
    int first_row;      /* timeline: first row shown (vertical scroll) */
    double bd_scale_ns; /* breakdown: at least this step is drawn full width (two panes share it; 0: none) */
    int64_t fit_first;  /* dtv_view_fit cut the window to steps fit_first .. + fit_count - 1 (0: not cut) */
    int64_t fit_count;
    int fp8_tensor; /* fp8: 1 + the index in t->fp8->x of the tensor shown; 0: the default (t->fp8->dflt) */
} dtv_view;

/* The whole trace visible, everything played. */
void dtv_view_all(dtv_view *v, const dtv_trace *t);

/* view_fit.c: the default window of a picture. When the whole trace would
 * draw its median step narrower than DTV_FIT_STEP_PX in width_px pixels,
 * cut v's window to the last k complete steps (those up to v->now when it
 * is set; k = width_px / DTV_FIT_STEP_READ_PX, 1..DTV_FIT_MAX_STEPS) with a
 * small margin, and say so in fit_first/fit_count; returns 1 when cut. */
enum { DTV_FIT_STEP_PX = 40, DTV_FIT_STEP_READ_PX = 200, DTV_FIT_MAX_STEPS = 5 };
int dtv_view_fit(dtv_view *v, const dtv_trace *t, int width_px);
/* A cut window widened to `span` ns (two panes show one span), leftwards,
 * and its steps counted again; nothing for a window not cut. */
void dtv_view_fit_span(dtv_view *v, const dtv_trace *t, int64_t span);
/* "showing steps 195–199 of 200 (--zoom 0:1 for all)", or "" when not cut. */
void dtv_fit_note(char *buf, size_t n, const dtv_trace *t, const dtv_view *v);

/* x of trace time `ns` in an area [x, x + w) showing [v->t0, v->t1]. */
static inline double dtv_x_of(const dtv_view *v, int x, int w, int64_t ns)
{
    return x + (double)(ns - v->t0) * (double)w / (double)(v->t1 - v->t0);
}

/* view_axis.c: a time axis with ticks and units along [x, x + w) at y (labels below). */
void dtv_time_axis(dtv_canvas *c, int x, int y, int w, const dtv_view *v);
/* One legend entry per kind present in the trace, wrapped in the area's width; returns the height used. */
int dtv_legend(dtv_canvas *c, SDL_Rect area, const dtv_trace *t);

/* The views. */
void dtv_draw_timeline(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);
void dtv_draw_ring(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);
void dtv_draw_scale(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);
void dtv_draw_memory(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);
void dtv_draw_breakdown(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);
void dtv_draw_cp(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);
void dtv_draw_fp8(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);
/* view.c: dispatch on v->id. */
void dtv_draw_view(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);

/* Timeline geometry (tests probe pixels with it): the rows' area inside
 * `area` and the height of one row. */
typedef struct dtv_timeline_layout {
    int x, y, w, h; /* where spans are drawn */
    int row_h;      /* pixels per row (the box is row_h - 2 high, from y + 1) */
    int rows_shown;
} dtv_timeline_layout;
void dtv_timeline_layout_of(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v,
                            dtv_timeline_layout *out);
/* The height of an area that shows every row of t at the full row height. */
int dtv_timeline_height_for(const dtv_trace *t);

/* Loss-scale view geometry (view_scale.c; tests probe pixels with it).
 * x is the iteration when every step left one loss_scale counter (the
 * k-th counter ends step k), else trace time; y is log2 of the scale. */
typedef struct dtv_scale_layout {
    int x, y, w, h; /* the plot */
    int by_iter;    /* x: iterations [x_lo, x_hi) (1) or trace time in ns (0) */
    double x_lo, x_hi;
    double l2_lo, l2_hi; /* y: log2(scale) from the bottom to the top */
} dtv_scale_layout;
void dtv_scale_layout_of(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v,
                         dtv_scale_layout *out);
/* x of the middle of step `iter` (where its overflow marker is; by_iter
 * only, else -1); x of a trace time; y of a scale. */
int dtv_scale_x_of_iter(const dtv_scale_layout *L, int64_t iter);
int dtv_scale_x_of_time(const dtv_scale_layout *L, int64_t ns);
int dtv_scale_y_of(const dtv_scale_layout *L, double scale);

/* Memory view geometry (view_memory.c): one panel per rank with memory
 * counters (the first DTV_MEMORY_PANELS of them), a shared y axis. */
enum { DTV_MEMORY_PANELS = 16 };
typedef struct dtv_memory_layout {
    int n_panels;                     /* panels drawn */
    int omitted;                      /* ranks with memory counters not shown */
    int rank[DTV_MEMORY_PANELS];      /* rank index (into dtv_trace.pids) of each panel */
    SDL_Rect plot[DTV_MEMORY_PANELS]; /* where each panel's areas are drawn */
    double y_max, y_tick;             /* bytes at the top of every plot, between grid lines */
    int full;                         /* static / activations / stash recorded (dtsim), or activations only */
} dtv_memory_layout;
void dtv_memory_layout_of(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v,
                          dtv_memory_layout *out);
/* y of a byte count in panel `panel`; x of a time is dtv_x_of on the plot. */
int dtv_memory_y_of(const dtv_memory_layout *L, int panel, double bytes);

/* Ring view geometry and figures (view_ring.c; appended; tests probe them).
 * The ranks with collective steps (or the workers of a parameter server)
 * sit on a circle in slots 0..n-1 (by pid, slot 0 at the top, clockwise). */
void dtv_ring_point(SDL_Rect area, int n, int i, int *x, int *y);
/* The centre of a chunk box `frac` (0..1) of the way along the lane of the
 * directed link from slot `from` to slot `to`. */
void dtv_ring_chunk_pos(SDL_Rect area, int n, int from, int to, double frac, int *x, int *y);
/* What rank index ri shows at playback time `now`. */
typedef struct dtv_ring_state {
    int span;         /* the step shown: index into its comm row's spans (-1: none started yet) */
    int active;       /* 1: now is inside it; 0: it is the last that ended */
    double frac;      /* (now - t0) / (t1 - t0), 1 when ended */
    int64_t iter;     /* its iteration */
    int peer;         /* its `peer` extra (-1: receive only) */
    int step_name;    /* DTV_STEP_* */
    int step, steps;  /* 0-based step within its phase, and the phase's steps */
    int first, ended; /* the rank's steps of this iteration: [first, ended) have ended by now (t->coll indices) */
    int64_t sent;     /* bytes those steps sent */
    double buffer;    /* S (0: unknown) */
} dtv_ring_state;
void dtv_ring_state_of(const dtv_trace *t, int ri, int64_t now, dtv_ring_state *out);
/* Bytes rank index ri sent to pid `to_pid` in its current iteration by `now`. */
int64_t dtv_ring_link_bytes(const dtv_trace *t, int ri, int64_t now, int to_pid);
/* The staleness histogram's plot rectangle (bars: 16 equal columns, from
 * the bottom), and the height in pixels of bar k for histogram `hist`. */
void dtv_ps_hist_plot(SDL_Rect area, SDL_Rect *plot);
int dtv_ps_bar_height(SDL_Rect area, const int64_t hist[DTV_N_STALE], int k);

/* Breakdown view geometry (view_breakdown.c; appended; tests probe it):
 * one bar per rank (the first DTV_BREAKDOWN_ROWS with steps), its length
 * the rank's step to the scale of the longest, split into the categories
 * of dt_breakdown in their order; under it a thin strip as long as the
 * communication overlapped with compute or the optimizer. It summarises
 * the whole trace: playback does not change it. */
enum { DTV_BREAKDOWN_ROWS = 32 };
typedef struct dtv_breakdown_layout {
    int n_rows;                /* bars drawn */
    int omitted;               /* ranks with steps not shown */
    int x, w;                  /* a step of step_max ns is [x, x + w) */
    double step_max;           /* ns per step drawn full width: the longest step shown, or v->bd_scale_ns if longer */
    int bar_h, strip_h;        /* the bar's height; the strip's, starting 1 px under the bar */
    int y[DTV_BREAKDOWN_ROWS]; /* each bar's top */
    int seg[DTV_BREAKDOWN_ROWS][DT_BREAKDOWN_N_CATS + 1]; /* category c covers x in [seg[c], seg[c + 1]) */
    int strip_x1[DTV_BREAKDOWN_ROWS];                     /* the strip covers [x, strip_x1) */
} dtv_breakdown_layout;
void dtv_breakdown_layout_of(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v,
                             dtv_breakdown_layout *out);
/* A category's colour (DT_BREAKDOWN_N_CATS: the overlapped strip's); idle is the background. */
SDL_Color dtv_breakdown_color(int cat);

/* Context-parallel view geometry (view_cp.c; appended; tests probe it):
 * the c context ranks of t->cp's group in the ring view's slots
 * (dtv_ring_point with n = c, context rank i in slot i; a ring step's block
 * travels dtv_ring_chunk_pos's lane i -> i + 1), and in the panel a matrix
 * of c x c cells: row i a context rank, column j the key/value block of
 * rank j (a2a: rank j's rows), filled in the pass's colour (the forward's
 * or the backward's) where held, framed in the exchange's colour where on
 * its way (dtv_cp_cell). Cell (i, j) is *out (its inside: 2 pixels in);
 * w = 0 when c is too large for a matrix (over DTV_CP_MATRIX_MAX). */
enum { DTV_CP_MATRIX_MAX = 64 };
void dtv_cp_cell_rect(SDL_Rect area, int c, int i, int j, SDL_Rect *out);

/* FP8 view geometry (view_fp8.c; appended; tests probe it): one tensor of
 * t->fp8 over the steps, x the iteration (the steps whose span, from the
 * previous step's event to their own, overlaps the visible window), y
 * log2 of a magnitude |x|; beside the plot the tensors, most saturated
 * first (a click on one shows it). */
enum { DTV_FP8_LIST_ROWS = 64 };
typedef struct dtv_fp8_layout {
    int tensor;          /* the tensor shown (index into t->fp8->x; -1: the trace has no FP8 events) */
    int x, y, w, h;      /* the plot */
    int k0, k1;          /* its steps shown: [k0, k1) of the tensor's */
    double x_lo, x_hi;   /* x: iterations [x_lo, x_hi) */
    double l2_lo, l2_hi; /* y: log2 |x| from the bottom to the top */
    SDL_Rect list;       /* the tensors' list */
    int row_h, n_rows;   /* its rows: row i at list.y + i * row_h, tensor row_tensor[i] */
    int row_tensor[DTV_FP8_LIST_ROWS];
} dtv_fp8_layout;
void dtv_fp8_layout_of(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v, dtv_fp8_layout *out);
/* x of the middle of iteration `iter` (where its amax and its marker are). */
int dtv_fp8_x_of_iter(const dtv_fp8_layout *L, int64_t iter);
/* y of a magnitude (> 0). */
int dtv_fp8_y_of(const dtv_fp8_layout *L, double mag);
/* The radius of a saturated step's marker for its count (> 0): it grows with log10 of the count. */
int dtv_fp8_marker_radius(double saturated);
/* The band's colour (the window of values a step's scale converts). */
SDL_Color dtv_fp8_band_color(void);
/* The tensor v shows (index into t->fp8->x; -1 without FP8 events). */
int dtv_fp8_tensor_of(const dtv_trace *t, const dtv_view *v);
/* Show the next (dir > 0) or previous tensor of the list's order (most
 * saturated first), wrapping around; returns the tensor now shown. */
int dtv_fp8_cycle(const dtv_trace *t, dtv_view *v, int dir);
/* The tensor under (px, py) in the list (-1: none). */
int dtv_fp8_hit(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v, int px, int py);

#endif
