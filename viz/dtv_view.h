/* dtv_view.h: the views (one file each: view_timeline.c, view_ring.c,
 * view_scale.c, view_memory.c) and what they share: the visible time
 * window, the playback time and the layout helpers.
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

typedef enum dtv_view_id { DTV_VIEW_TIMELINE = 0, DTV_VIEW_RING, DTV_VIEW_SCALE, DTV_VIEW_MEMORY, DTV_N_VIEWS } dtv_view_id;

const char *dtv_view_name(dtv_view_id v); /* "timeline", "ring", "scale", "memory" */
int dtv_view_parse(const char *s, dtv_view_id *out);

typedef struct dtv_view {
    dtv_view_id id;
    int64_t t0, t1;  /* visible window of trace time (t0 < t1) */
    int64_t now;     /* playback time: nothing after it is drawn (INT64_MAX: everything) */
    int first_row;   /* timeline: first row shown (vertical scroll) */
} dtv_view;

/* The whole trace visible, everything played. */
void dtv_view_all(dtv_view *v, const dtv_trace *t);

/* x of trace time `ns` in an area [x, x + w) showing [v->t0, v->t1]. */
static inline double dtv_x_of(const dtv_view *v, int x, int w, int64_t ns)
{
    return x + (double)(ns - v->t0) * (double)w / (double)(v->t1 - v->t0);
}

/* A time axis with ticks and units along [x, x + w) at y (labels below). */
void dtv_time_axis(dtv_canvas *c, int x, int y, int w, const dtv_view *v);
/* One legend entry per kind present in the trace, wrapped in the area's width; returns the height used. */
int dtv_legend(dtv_canvas *c, SDL_Rect area, const dtv_trace *t);

/* The views. */
void dtv_draw_timeline(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);
void dtv_draw_ring(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);
void dtv_draw_scale(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);
void dtv_draw_memory(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);
/* Dispatch on v->id. */
void dtv_draw_view(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v);

/* Timeline geometry (tests probe pixels with it): the rows' area inside
 * `area` and the height of one row. */
typedef struct dtv_timeline_layout {
    int x, y, w, h;   /* where spans are drawn */
    int row_h;        /* pixels per row (the box is row_h - 2 high, from y + 1) */
    int rows_shown;
} dtv_timeline_layout;
void dtv_timeline_layout_of(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v,
                            dtv_timeline_layout *out);

#endif
