/* trace_fp8.c: the FP8 index of a trace (see dtv_trace.h), built by
 * dtv_fp8_index at the end of loading (trace_model.c) and drawn by
 * view_fp8.c: each tensor's `fp8 <tensor>` events (docs/trace-format.md)
 * as one series of steps, the run's sums, the tensors ordered by their
 * saturated values, and the window of values a step's scale represents.
 *
 * The window of a step with scale s (include/dt_fp8.h): a value x converts
 * to a finite non-zero FP8 value when min_subnormal / (2 s) < |x| <= max / s;
 * above the top it saturates to +-max, at or below the bottom it flushes
 * to 0. Delayed scaling's s is the event's `scale` (the one the step used,
 * from the amax history before it); tensorwise and blockwise scales follow
 * the step's own amax, and so does delayed scaling's first step, whose
 * event has no `scale` (no history yet): their window is computed from it
 * with the library's rule (dt_fp8_scale_from_amax: the top is amax x 2^margin;
 * blockwise rounds the scale down to a power of two, which is the window
 * of the tile that holds the amax).
 *
 * Invariants: t->fp8 is NULL exactly when the trace has no `fp8 <tensor>`
 * event; a tensor has at least one step, its steps by iteration with no
 * iteration twice; every count is finite and >= 0 (the index refuses the
 * trace otherwise, naming the event). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_fp8.h"
#include "dtv_trace.h"

static int dtv__is_fp8(const dt_trace_event *e)
{
    return e->ph == DT_TRACE_INSTANT && !strncmp(e->name, "fp8 ", 4) && e->name[4] != '\0';
}

/* qsort context: the events (qsort has none of its own) */
static const dt_trace_event *dtv__fp8_ev;

/* events by (name, iter, time) */
static int dtv__cmp_ev(const void *a, const void *b)
{
    const dt_trace_event *x = &dtv__fp8_ev[*(const size_t *)a], *y = &dtv__fp8_ev[*(const size_t *)b];
    const int c = strcmp(x->name, y->name);
    if (c) return c;
    if (x->iter != y->iter) return (x->iter > y->iter) - (x->iter < y->iter);
    if (x->ts_ns != y->ts_ns) return (x->ts_ns > y->ts_ns) - (x->ts_ns < y->ts_ns);
    return (*(const size_t *)a > *(const size_t *)b) - (*(const size_t *)a < *(const size_t *)b);
}

/* tensors in the model's order: block, index in the block, name */
static int dtv__cmp_natural(const dtv_fp8_tensor *x, const dtv_fp8_tensor *y)
{
    if (x->layer != y->layer) return (x->layer > y->layer) - (x->layer < y->layer);
    if (x->tensor != y->tensor) return (x->tensor > y->tensor) - (x->tensor < y->tensor);
    return strcmp(x->name, y->name);
}

static int dtv__cmp_tensor(const void *a, const void *b) { return dtv__cmp_natural(a, b); }

static const dtv_fp8_tensor *dtv__fp8_x; /* qsort context of dtv__cmp_order */

/* most saturated values first, then most saturated steps, most flushed, the model's order */
static int dtv__cmp_order(const void *a, const void *b)
{
    const dtv_fp8_tensor *x = &dtv__fp8_x[*(const int *)a], *y = &dtv__fp8_x[*(const int *)b];
    if (x->saturated != y->saturated) return x->saturated < y->saturated ? 1 : -1;
    if (x->steps_saturated != y->steps_saturated) return x->steps_saturated < y->steps_saturated ? 1 : -1;
    if (x->flushed != y->flushed) return x->flushed < y->flushed ? 1 : -1;
    return dtv__cmp_natural(x, y);
}

/* The recipe and formats from the configuration (the keys FP8 runs write),
 * else from the events: a `scale` extra means delayed scaling. */
static void dtv__fp8_config(const dtv_trace *t, dtv_fp8 *f, int any_scale)
{
    char s[32];
    dtv_trace_config_string(t, "fp8_format", s, sizeof s);
    f->mode = !strcmp(s, "hybrid") ? DT_FP8_MODE_HYBRID : !strcmp(s, "e4m3") ? DT_FP8_MODE_E4M3 : DT_FP8_OFF;
    dtv_trace_config_string(t, "fp8_recipe", s, sizeof s);
    f->recipe_known = 1;
    if (!strcmp(s, "delayed")) f->recipe = DT_FP8_DELAYED;
    else if (!strcmp(s, "tensorwise")) f->recipe = DT_FP8_TENSORWISE;
    else if (!strcmp(s, "blockwise")) f->recipe = DT_FP8_BLOCKWISE;
    else {
        f->recipe_known = 0;
        f->recipe = any_scale ? DT_FP8_DELAYED : DT_FP8_TENSORWISE;
    }
    dtv_trace_config_string(t, "fp8_amax_compute_algo", s, sizeof s);
    f->algo = !strcmp(s, "most_recent") ? DT_FP8_AMAX_MOST_RECENT : DT_FP8_AMAX_MAX;
    const double m = dtv_trace_config_number(t, "fp8_margin", 0);
    f->margin = m >= -64 && m <= 64 ? (int)m : 0;
    const double h = dtv_trace_config_number(t, "fp8_amax_history_len", 0);
    f->history_len = h >= 1 && h < 1e9 ? (int)h : 0;
}

dt_status dtv_fp8_index(dtv_trace *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n_ev; i++) n += dtv__is_fp8(&t->ev[i]);
    if (n == 0) return DT_OK;
    size_t *ix = malloc(n * sizeof *ix);
    dtv_fp8 *f = calloc(1, sizeof *f);
    if (!ix || !f) {
        free(ix);
        free(f);
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %zu FP8 events", t->name, n);
    }
    t->fp8 = f;
    n = 0;
    int any_scale = 0;
    for (size_t i = 0; i < t->n_ev; i++) {
        const dt_trace_event *e = &t->ev[i];
        if (!dtv__is_fp8(e)) continue;
        ix[n++] = i;
        /* counts index nothing but are summed and divided: refuse what no run writes */
        static const char *const counts[] = {"saturated", "flushed", "values"};
        for (int k = 0; k < 3; k++) {
            const double v = dt_trace_event_arg(e, counts[k], 0);
            if (!(v >= 0 && isfinite(v))) {
                free(ix);
                return DT_FAIL(DT_ERR_FORMAT,
                               "%s: event \"%s\" of rank %d: \"args.%s\" is %.17g; expected a count >= 0", t->name,
                               e->name, e->pid, counts[k], v);
            }
        }
        any_scale |= dt_trace_event_find_arg(e, "scale") != NULL;
    }
    dtv__fp8_ev = t->ev;
    qsort(ix, n, sizeof *ix, dtv__cmp_ev);
    for (size_t i = 0; i < n; i++) f->n += i == 0 || strcmp(t->ev[ix[i]].name, t->ev[ix[i - 1]].name) != 0;
    f->x = calloc((size_t)f->n, sizeof *f->x);
    f->order = malloc((size_t)f->n * sizeof *f->order);
    if (!f->x || !f->order) {
        free(ix);
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %d FP8 tensors", t->name, f->n);
    }
    dtv__fp8_config(t, f, any_scale);
    int k = -1;
    for (size_t i = 0; i < n; i++) {
        const dt_trace_event *e = &t->ev[ix[i]];
        if (i == 0 || strcmp(e->name, t->ev[ix[i - 1]].name) != 0) { /* a new tensor: its events are ix[i..] */
            dtv_fp8_tensor *x = &f->x[++k];
            snprintf(x->name, sizeof x->name, "%s", e->name + 4);
            x->layer = e->layer;
            const double ti = dt_trace_event_arg(e, "tensor", -1);
            x->tensor = ti >= 0 && ti < 1e6 ? (int)ti : -1;
            x->format = x->tensor >= 0 ? (int)dt_fp8_role_format((dt_fp8_mode)f->mode, x->tensor % 3) : DT_FP8_E4M3;
            size_t m = 0;
            while (i + m < n && !strcmp(t->ev[ix[i + m]].name, e->name)) m++;
            x->s = calloc(m, sizeof *x->s);
            if (!x->s) {
                free(ix);
                return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %zu FP8 steps", t->name, m);
            }
        }
        dtv_fp8_tensor *x = &f->x[k];
        if (x->n > 0 && x->s[x->n - 1].iter == e->iter) continue; /* one event per step: the first */
        dtv_fp8_step *s = &x->s[x->n++];
        s->t = e->ts_ns;
        s->iter = e->iter != DT_TRACE_NONE ? e->iter : x->n - 1;
        s->amax = dt_trace_event_arg(e, "amax", NAN);
        s->scale = dt_trace_event_arg(e, "scale", NAN);
        s->saturated = dt_trace_event_arg(e, "saturated", 0);
        s->flushed = dt_trace_event_arg(e, "flushed", 0);
        s->values = dt_trace_event_arg(e, "values", 0);
        x->saturated += s->saturated;
        x->flushed += s->flushed;
        x->values += s->values;
        x->steps_saturated += s->saturated > 0;
    }
    free(ix);
    /* the model's order (the events came sorted by name: "h.10" before "h.2") */
    qsort(f->x, (size_t)f->n, sizeof *f->x, dtv__cmp_tensor);
    for (int i = 0; i < f->n; i++) f->order[i] = i;
    dtv__fp8_x = f->x;
    qsort(f->order, (size_t)f->n, sizeof *f->order, dtv__cmp_order);
    f->dflt = f->order[0];
    return DT_OK;
}

void dtv_fp8_free(dtv_trace *t)
{
    dtv_fp8 *f = t->fp8;
    if (!f) return;
    for (int i = 0; f->x && i < f->n; i++) free(f->x[i].s);
    free(f->x);
    free(f->order);
    free(f);
    t->fp8 = NULL;
}

int dtv_fp8_find(const dtv_fp8 *f, const char *name)
{
    for (int i = 0; f && i < f->n; i++)
        if (!strcmp(f->x[i].name, name)) return i;
    return -1;
}

int dtv_fp8_window(const dtv_fp8 *f, const dtv_fp8_tensor *x, int k, double *lo, double *hi)
{
    const dtv_fp8_step *s = &x->s[k];
    const dt_fp8_format fmt = (dt_fp8_format)x->format;
    double sc = 0;
    if (f->recipe == DT_FP8_DELAYED && s->scale > 0 && isfinite(s->scale)) sc = s->scale;
    else if (s->amax > 0 && isfinite(s->amax)) /* delayed scaling's first step too: no history yet */
        sc = dt_fp8_scale_from_amax((float)s->amax, fmt, f->margin, f->recipe == DT_FP8_BLOCKWISE);
    if (!(sc > 0 && isfinite(sc))) return 0;
    *hi = (double)dt_fp8_max(fmt) / sc;
    *lo = (double)dt_fp8_min_subnormal(fmt) / (2.0 * sc);
    return 1;
}

int dtv_fp8_steps_by(const dtv_fp8_tensor *x, int64_t now)
{
    int lo = 0, hi = x->n; /* the steps' times rise with their iterations: the first after now */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (x->s[mid].t <= now) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

void dtv_fp8_sums(const dtv_fp8_tensor *x, int steps, dtv_fp8_sum *out)
{
    memset(out, 0, sizeof *out);
    out->worst = -1;
    for (int k = 0; k < steps && k < x->n; k++) {
        const dtv_fp8_step *s = &x->s[k];
        out->saturated += s->saturated;
        out->flushed += s->flushed;
        out->values += s->values;
        out->steps++;
        if (s->saturated > 0) {
            out->steps_saturated++;
            if (out->worst < 0 || s->saturated > x->s[out->worst].saturated) out->worst = k;
        }
    }
}
