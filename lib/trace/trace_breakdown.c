/* trace_breakdown.c: a rank's step time by category (dt_trace_breakdown.h,
 * docs/breakdown.md).
 *
 * One sweep over the rank's span edges: every span of the range is clipped
 * to it and becomes two edges (+1 at its start, -1 at its end) of its
 * class (compute, optimizer, communication, pipeline window); between two
 * consecutive edge times the classes covering the segment are known from
 * their counts, and the segment goes to the first of them in precedence
 * order (idle when none). Nested or overlapping spans of one class count
 * once, and the categories sum to the range exactly. O(k log k) for the
 * rank's k spans.
 *
 * The step range and what counts as a step's event are trace_stats.c's
 * (trace_internal.h), the pipeline windows come from
 * dt_bubble_stats_events, so the step time agrees with
 * dt_trace_phase_times_events and the windows with `dtbench bubbles`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "dt_trace_breakdown.h"
#include "dt_trace_stats.h"
#include "trace_internal.h"

/* The classes of spans, in order of precedence. */
enum { DT__BD_COMPUTE = 0, DT__BD_OPTIM, DT__BD_COMM, DT__BD_WINDOW, DT__BD_N };

typedef struct dt__bd_edge {
    int64_t t;
    int cls;   /* DT__BD_* */
    int delta; /* +1 a span starts, -1 it ends */
} dt__bd_edge;

static const char *const dt__bd_names[DT_BREAKDOWN_N_CATS] = {"compute", "optimizer", "comm exposed", "waiting",
                                                              "idle"};

const char *dt_breakdown_cat_name(dt_breakdown_cat c)
{
    return (unsigned)c < DT_BREAKDOWN_N_CATS ? dt__bd_names[c] : "?";
}

double dt_breakdown_per_step(const dt_breakdown *b, dt_breakdown_cat c)
{
    if (!b || (unsigned)c >= DT_BREAKDOWN_N_CATS || b->steps < 1) return NAN;
    return (double)b->cat_ns[c] / (double)b->steps;
}

static int dt__is(const char *a, const char *b) { return strcmp(a, b) == 0; }

/* The class of a span of a step, or -1 for none (pipeline sends and
 * receives: they fall in their stage's window). */
static int dt__bd_class(const dt_trace_event *e)
{
    const char *n = e->name;
    if ((dt__is(e->cat, "compute") || dt__is(e->cat, "pipeline") || dt__is(e->cat, "stage")) &&
        (dt__is(n, "forward") || dt__is(n, "backward") || dt__is(n, "backward_b") || dt__is(n, "backward_w") ||
         dt__is(n, "recompute")))
        return DT__BD_COMPUTE;
    if (dt__is(n, "optimizer") || dt__is(n, "optim_step") || dt__is(n, "apply") || dt__is(n, "grad norm") ||
        dt__is(n, "stash") || dt__is(n, "drop"))
        return DT__BD_OPTIM;
    /* cp: context parallelism's exchanges (a ring step's span holds the attention it overlaps: the sweep
     * gives that part to compute) */
    if (dt__is(e->cat, "comm") || dt__is(e->cat, "tp") || dt__is(e->cat, "cp") || dt__is(n, "push/pull"))
        return DT__BD_COMM;
    return -1;
}

static int dt__bd_cmp_edge(const void *a, const void *b)
{
    const int64_t x = ((const dt__bd_edge *)a)->t, y = ((const dt__bd_edge *)b)->t;
    return (x > y) - (x < y);
}

/* Append [t0, t1) clipped to [lo, hi) as two edges (nothing when empty). */
static void dt__bd_add(dt__bd_edge *e, size_t *k, int cls, int64_t t0, int64_t t1, int64_t lo, int64_t hi)
{
    if (t0 < lo) t0 = lo;
    if (t1 > hi) t1 = hi;
    if (t1 <= t0) return;
    e[(*k)++] = (dt__bd_edge){t0, cls, +1};
    e[(*k)++] = (dt__bd_edge){t1, cls, -1};
}

/* A pipeline instruction of pid (trace_stats.c's definition). */
static int dt__bd_is_instr(const dt_trace_event *e, int pid)
{
    return e->pid == pid && e->ph == DT_TRACE_COMPLETE && dt__is(e->cat, "pipeline") && e->iter != DT_TRACE_NONE;
}

dt_status dt_breakdown_events(const dt_trace_event *ev, size_t n, int pid, int skip, dt_breakdown *out)
{
    if (!out) return DT_FAIL(DT_ERR_INVALID, "breakdown: no output");
    memset(out, 0, sizeof *out);
    out->bubble = out->bubble_ns = NAN;
    if (!ev && n > 0) return DT_FAIL(DT_ERR_INVALID, "breakdown: no events");
    if (skip < 0) return DT_FAIL(DT_ERR_INVALID, "breakdown: skip %d: expected >= 0", skip);
    dt__evals evals;
    dt__find_evals(ev, n, pid, &evals);
    int64_t start, end, steps, last;
    DT_CHECK(dt__trace_step_range(ev, n, pid, skip, &evals, &start, &end, &steps, &last));
    out->pid = pid;
    out->first_iter = last - steps + 1;
    out->last_iter = last;
    out->steps = steps;
    out->start_ns = start;
    out->end_ns = end;
    out->step_ns = (double)(end - start) / (double)steps;

    /* the stage's step windows, when pid is a pipeline stage */
    dt_bubble_stats bs;
    memset(&bs, 0, sizeof bs);
    size_t n_instr = 0;
    for (size_t i = 0; i < n; i++) n_instr += dt__bd_is_instr(&ev[i], pid);
    if (n_instr > 0) {
        DT_CHECK(dt_bubble_stats_events(ev, n, pid, skip, &bs));
        out->pipeline = 1;
        out->bubble = bs.mean;
        double idle = 0;
        int counted = 0;
        for (int s = 0; s < bs.n_steps; s++)
            if (bs.steps[s].iter >= skip) {
                idle += (double)(bs.steps[s].end_ns - bs.steps[s].start_ns - bs.steps[s].busy_ns);
                counted++;
            }
        out->bubble_ns = counted > 0 ? idle / counted : NAN;
    }

    /* the edges of every span in the range */
    size_t n_spans = (size_t)bs.n_steps;
    for (size_t i = 0; i < n; i++)
        if (ev[i].ph == DT_TRACE_COMPLETE && ev[i].dur_ns > 0 && dt__in_step(&ev[i], pid, &evals)) n_spans++;
    dt__bd_edge *edge = malloc((2 * n_spans + 1) * sizeof *edge);
    if (!edge) {
        dt_bubble_stats_free(&bs);
        return DT_FAIL(DT_ERR_NOMEM, "breakdown: out of memory for rank %d's %zu spans", pid, n_spans);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const dt_trace_event *e = &ev[i];
        if (e->ph != DT_TRACE_COMPLETE || e->dur_ns <= 0 || !dt__in_step(e, pid, &evals)) continue;
        const int cls = dt__bd_class(e);
        if (cls < 0) continue;
        const int64_t t1 = e->ts_ns > INT64_MAX - e->dur_ns ? INT64_MAX : e->ts_ns + e->dur_ns;
        dt__bd_add(edge, &k, cls, e->ts_ns, t1, start, end);
    }
    for (int s = 0; s < bs.n_steps; s++)
        dt__bd_add(edge, &k, DT__BD_WINDOW, bs.steps[s].start_ns, bs.steps[s].end_ns, start, end);
    dt_bubble_stats_free(&bs);
    qsort(edge, k, sizeof *edge, dt__bd_cmp_edge);

    /* the sweep: each segment between edge times to the first class covering it */
    int64_t cover[DT__BD_N] = {0};
    int64_t prev = start;
    for (size_t i = 0; i <= k;) {
        const int64_t t = i < k ? edge[i].t : end;
        const int64_t seg = t - prev;
        if (seg > 0) {
            dt_breakdown_cat c = DT_BREAKDOWN_IDLE;
            if (cover[DT__BD_COMPUTE] > 0) c = DT_BREAKDOWN_COMPUTE;
            else if (cover[DT__BD_OPTIM] > 0) c = DT_BREAKDOWN_OPTIM;
            else if (cover[DT__BD_COMM] > 0) c = DT_BREAKDOWN_COMM_EXPOSED;
            else if (cover[DT__BD_WINDOW] > 0) c = DT_BREAKDOWN_WAITING;
            out->cat_ns[c] += seg;
            if (cover[DT__BD_COMM] > 0 && c != DT_BREAKDOWN_COMM_EXPOSED) out->comm_overlapped_ns += seg;
        }
        prev = t;
        if (i == k) break;
        for (; i < k && edge[i].t == t; i++) cover[edge[i].cls] += edge[i].delta;
    }
    free(edge);
    return DT_OK;
}

/* ---- every rank ---------------------------------------------------------- */

/* An event's place, ordered by pid, then by position (so each rank's events keep their order). */
typedef struct dt__bd_key {
    int pid;
    size_t i;
} dt__bd_key;

static int dt__bd_cmp_key(const void *a, const void *b)
{
    const dt__bd_key *x = a, *y = b;
    if (x->pid != y->pid) return (x->pid > y->pid) - (x->pid < y->pid);
    return (x->i > y->i) - (x->i < y->i);
}

/* Whether pid has an event of a step among ev[0..n-1]. */
static int dt__bd_has_steps(const dt_trace_event *ev, size_t n, int pid)
{
    dt__evals evals;
    dt__find_evals(ev, n, pid, &evals);
    for (size_t i = 0; i < n; i++)
        if (dt__in_step(&ev[i], pid, &evals)) return 1;
    return 0;
}

/* Append pid's breakdown from its events ev[0..n-1] to *out when it has steps. */
static dt_status dt__bd_group(const dt_trace_event *ev, size_t n, int pid, int skip, dt_breakdown *out, int *n_out)
{
    if (!dt__bd_has_steps(ev, n, pid)) return DT_OK;
    DT_CHECK(dt_breakdown_events(ev, n, pid, skip, &out[*n_out]));
    (*n_out)++;
    return DT_OK;
}

dt_status dt_breakdown_all(const dt_trace_event *ev, size_t n, int skip, dt_breakdown **out, int *n_out)
{
    if (!out || !n_out) return DT_FAIL(DT_ERR_INVALID, "breakdown: no output");
    *out = NULL;
    *n_out = 0;
    if (!ev && n > 0) return DT_FAIL(DT_ERR_INVALID, "breakdown: no events");
    size_t n_pids = n > 0 ? 1 : 0;
    int one_pid = 1;
    for (size_t i = 1; i < n && one_pid; i++) one_pid = ev[i].pid == ev[0].pid;
    dt__bd_key *key = NULL;
    if (!one_pid) { /* (a file with one rank, a dtrain rank file, needs no reordering) */
        key = malloc(n * sizeof *key);
        if (!key) return DT_FAIL(DT_ERR_NOMEM, "breakdown: out of memory for %zu events", n);
        for (size_t i = 0; i < n; i++) key[i] = (dt__bd_key){ev[i].pid, i};
        qsort(key, n, sizeof *key, dt__bd_cmp_key);
        n_pids = 1;
        for (size_t i = 1; i < n; i++) n_pids += key[i].pid != key[i - 1].pid;
    }
    if (n_pids > (size_t)INT32_MAX) n_pids = (size_t)INT32_MAX;
    dt_breakdown *res = calloc(n_pids > 0 ? n_pids : 1, sizeof *res);
    if (!res) {
        free(key);
        return DT_FAIL(DT_ERR_NOMEM, "breakdown: out of memory for %zu ranks", n_pids);
    }
    int got = 0;
    dt_status st = DT_OK;
    if (one_pid) {
        if (n > 0) st = dt__bd_group(ev, n, ev[0].pid, skip, res, &got);
    } else {
        /* each rank's events gathered into one buffer, the largest rank's size */
        size_t most = 0;
        for (size_t a = 0, b; a < n; a = b) {
            for (b = a + 1; b < n && key[b].pid == key[a].pid; b++) {}
            most = DT_MAX(most, b - a);
        }
        dt_trace_event *buf = malloc(most * sizeof *buf);
        if (!buf) st = DT_FAIL(DT_ERR_NOMEM, "breakdown: out of memory for a rank's %zu events", most);
        for (size_t a = 0, b; st == DT_OK && a < n; a = b) {
            for (b = a; b < n && key[b].pid == key[a].pid; b++) buf[b - a] = ev[key[b].i];
            st = dt__bd_group(buf, b - a, key[a].pid, skip, res, &got);
        }
        free(buf);
    }
    free(key);
    if (st == DT_OK && got == 0)
        st = DT_FAIL(DT_ERR_INVALID, "breakdown: no rank has events with an iteration (a training step)");
    if (st != DT_OK) {
        free(res);
        return st;
    }
    *out = res;
    *n_out = got;
    return DT_OK;
}
