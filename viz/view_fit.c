/* view_fit.c: the default window of the time views (timeline, memory) in
 * a picture (see dtv_view.h). A PNG cannot be zoomed afterwards, so when
 * the whole trace would draw a step narrower than DTV_FIT_STEP_PX pixels
 * (200 steps of a real run become slivers), the window is cut to the last
 * few complete steps, as a profiler's trace usually holds a few steady
 * steps after the warm-up (PyTorch's profiler schedule, Nsight's capture
 * range); the views say which steps they show. --zoom, a window's keys and
 * dtv_view_all still show any part.
 *
 * A step is the time from the earliest start to the latest end of the spans
 * of its iteration over every rank (evaluation left out); it is complete
 * when a later step exists or it has an optimizer span (a trace cut short
 * ends with a partial step, which is not shown as a whole one).
 *
 * Invariants: the trace is not changed; a window that is not cut is left
 * as it was. */
#include <stdio.h>
#include <stdlib.h>

#include "dtv_view.h"

typedef struct dtv__step {
    int64_t t0, t1;
    int done; /* has an optimizer span */
} dtv__step;

static int dtv__cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Each iteration's extent (t0 > t1 when it has no span); NULL when none or out of memory. */
static dtv__step *dtv__steps(const dtv_trace *t, int64_t *n_out)
{
    const int64_t n = t->n_steps;
    *n_out = 0;
    if (n < 1 || n > 100000000) return NULL;
    dtv__step *s = malloc((size_t)n * sizeof *s);
    if (!s) return NULL;
    for (int64_t i = 0; i < n; i++) s[i] = (dtv__step){INT64_MAX, INT64_MIN, 0};
    for (int r = 0; r < t->n_rows; r++)
        for (int i = 0; i < t->rows[r].n; i++) {
            const dtv_span *sp = &t->rows[r].s[i];
            const int64_t it = t->ev[sp->ev].iter;
            if (it == DT_TRACE_NONE || it < 0 || it >= n || sp->kind == DTV_EVAL) continue;
            if (sp->t0 < s[it].t0) s[it].t0 = sp->t0;
            if (sp->t1 > s[it].t1) s[it].t1 = sp->t1;
            if (sp->kind == DTV_OPTIM) s[it].done = 1;
        }
    *n_out = n;
    return s;
}

void dtv_fit_note(char *buf, size_t n, const dtv_trace *t, const dtv_view *v)
{
    if (n) buf[0] = '\0';
    if (v->fit_count <= 0 || !n) return;
    if (v->fit_count == 1)
        snprintf(buf, n, "showing step %lld of %lld (--zoom 0:1 for all)", (long long)v->fit_first,
                 (long long)t->n_steps);
    else
        snprintf(buf, n, "showing steps %lld\xe2\x80\x93%lld of %lld (--zoom 0:1 for all)", (long long)v->fit_first,
                 (long long)(v->fit_first + v->fit_count - 1), (long long)t->n_steps);
}

/* The steps lying whole inside v's window: fit_count from fit_first (at least 1: the window was cut). */
static void dtv__fit_label(dtv_view *v, const dtv__step *s, int64_t n)
{
    int64_t first = -1, last = -1;
    for (int64_t i = 0; i < n; i++) {
        if (s[i].t0 > s[i].t1 || s[i].t0 < v->t0 || s[i].t1 > v->t1) continue;
        if (first < 0) first = i;
        last = i;
    }
    v->fit_first = first < 0 ? 0 : first;
    v->fit_count = first < 0 ? 1 : last - first + 1;
}

int dtv_view_fit(dtv_view *v, const dtv_trace *t, int width_px)
{
    v->fit_first = v->fit_count = 0;
    int64_t n = 0;
    dtv__step *s = dtv__steps(t, &n);
    if (!s) return 0;
    /* the steps with spans, in order, and the median duration */
    int64_t *idx = malloc((size_t)n * sizeof *idx), *dur = malloc((size_t)n * sizeof *dur);
    int64_t m = 0;
    int any_done = 0;
    for (int64_t i = 0; idx && dur && i < n; i++) {
        if (s[i].t0 > s[i].t1) continue;
        dur[m] = s[i].t1 - s[i].t0;
        idx[m++] = i;
        any_done |= s[i].done;
    }
    int cut = 0;
    if (idx && dur && m > 0 && width_px > 0) {
        /* complete steps: all but a last one without an optimizer span (when the trace has any) */
        const int64_t complete = any_done && !s[idx[m - 1]].done ? m - 1 : m;
        int k = width_px / DTV_FIT_STEP_READ_PX;
        k = k < 1 ? 1 : k > DTV_FIT_MAX_STEPS ? DTV_FIT_MAX_STEPS : k;
        qsort(dur, (size_t)m, sizeof *dur, dtv__cmp_i64);
        const double whole = (double)(t->t_max - t->t_min), median = (double)dur[m / 2];
        if (complete > k && whole > 0 && median * width_px / whole < DTV_FIT_STEP_PX) {
            /* the last k complete steps, or those up to the playback time */
            int64_t e = complete - 1;
            if (v->now != INT64_MAX)
                while (e > 0 && s[idx[e]].t0 > v->now) e--;
            if (e < k - 1) e = k - 1;
            const int64_t b = e - (k - 1);
            int64_t t0 = s[idx[b]].t0, t1 = s[idx[e]].t1;
            for (int64_t j = b; j <= e; j++) { /* overlapping steps (PipeDream) */
                if (s[idx[j]].t0 < t0) t0 = s[idx[j]].t0;
                if (s[idx[j]].t1 > t1) t1 = s[idx[j]].t1;
            }
            if (v->now != INT64_MAX && v->now > t1) t1 = v->now; /* the playback time in a gap after step e */
            const int64_t pad = (t1 - t0) / 64;                  /* the gaps around the steps */
            v->t0 = t0 - pad > t->t_min ? t0 - pad : t->t_min;
            v->t1 = t1 + pad < t->t_max ? t1 + pad : t->t_max;
            if (v->t1 <= v->t0) v->t1 = v->t0 + 1;
            cut = 1;
        }
    }
    if (cut) dtv__fit_label(v, s, n);
    free(idx);
    free(dur);
    free(s);
    return cut;
}

void dtv_view_fit_span(dtv_view *v, const dtv_trace *t, int64_t span)
{
    if (v->fit_count <= 0 || v->t1 - v->t0 >= span) return;
    /* widen to the left, so the pane still ends with its last step shown */
    v->t0 = v->t1 - span;
    if (v->t0 < t->t_min) {
        v->t0 = t->t_min;
        v->t1 = v->t0 + span;
    }
    int64_t n = 0;
    dtv__step *s = dtv__steps(t, &n);
    if (s) dtv__fit_label(v, s, n);
    free(s);
}
