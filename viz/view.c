/* view.c: the view registry (see dtv_view.h): the views' names, the view
 * state covering a whole trace, and the dispatch from a view id to its
 * drawing function. It is the only file that knows every view; the views
 * know only the shared helpers (view_axis.c, draw.c), never this file or
 * one another.
 *
 * Invariants: the names are in dtv_view_id order; an unknown id draws
 * nothing. */
#include <stdint.h>
#include <string.h>

#include "dtv_view.h"

static const char *const dtv__view_names[DTV_N_VIEWS] = {"timeline",  "ring", "scale", "memory",
                                                         "breakdown", "cp",   "fp8"};

const char *dtv_view_name(dtv_view_id v) { return v < DTV_N_VIEWS ? dtv__view_names[v] : "?"; }

int dtv_view_parse(const char *s, dtv_view_id *out)
{
    for (int i = 0; i < DTV_N_VIEWS; i++)
        if (!strcmp(s, dtv__view_names[i])) {
            *out = (dtv_view_id)i;
            return 0;
        }
    return -1;
}

void dtv_view_all(dtv_view *v, const dtv_trace *t)
{
    const int64_t span = t->t_max > t->t_min ? t->t_max - t->t_min : 1;
    v->t0 = t->t_min;
    v->t1 = t->t_min + span;
    v->now = INT64_MAX;
    v->first_row = 0;
    v->fit_first = v->fit_count = 0;
    v->fp8_tensor = 0;
}

void dtv_draw_view(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v)
{
    switch (v->id) {
    case DTV_VIEW_TIMELINE: dtv_draw_timeline(c, area, t, v); break;
    case DTV_VIEW_RING: dtv_draw_ring(c, area, t, v); break;
    case DTV_VIEW_SCALE: dtv_draw_scale(c, area, t, v); break;
    case DTV_VIEW_MEMORY: dtv_draw_memory(c, area, t, v); break;
    case DTV_VIEW_BREAKDOWN: dtv_draw_breakdown(c, area, t, v); break;
    case DTV_VIEW_CP: dtv_draw_cp(c, area, t, v); break;
    case DTV_VIEW_FP8: dtv_draw_fp8(c, area, t, v); break;
    default: break;
    }
}
