/* trace_stats.c: figures computed from trace events (dt_trace_stats.h).
 *
 * The pipeline bubble of one rank's stage, per step and on average; the
 * definition is in dt_trace_stats.h and docs/trace-format.md. Two passes
 * over the events: the distinct steps of the selected pid's pipeline
 * instructions (sorted, so steps may be sparse or unordered in the file),
 * then each event is added to its step's window and busy time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "dt_trace_stats.h"

/* A pipeline instruction: a complete event of cat "pipeline" with a step. */
static int dt__is_instr(const dt_trace_event *e)
{
    return e->ph == DT_TRACE_COMPLETE && strcmp(e->cat, "pipeline") == 0 && e->iter != DT_TRACE_NONE;
}

/* The "stage" extra, or -1. */
static int dt__event_stage(const dt_trace_event *e)
{
    return (int)dt_trace_event_arg(e, "stage", -1);
}

static int dt__cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Index of iter in the sorted unique array it[0..n-1] (present). */
static int dt__find_step(const int64_t *it, int n, int64_t iter)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (it[mid] < iter)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void dt_bubble_stats_free(dt_bubble_stats *out)
{
    if (!out) return;
    free(out->steps);
    memset(out, 0, sizeof *out);
}

dt_status dt_bubble_stats_events(const dt_trace_event *ev, size_t n, int pid, int skip, dt_bubble_stats *out)
{
    if (!out) return DT_FAIL(DT_ERR_INVALID, "pipeline bubble: no output");
    memset(out, 0, sizeof *out);
    out->mean = out->mean_fb = out->mean_window_ns = NAN;
    if (!ev && n > 0) return DT_FAIL(DT_ERR_INVALID, "pipeline bubble: no events");
    if (skip < 0) return DT_FAIL(DT_ERR_INVALID, "pipeline bubble: skip %d: expected >= 0", skip);

    /* the pid (pid < 0: the only one), and how many of its events are instructions */
    const int any = pid < 0;
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!dt__is_instr(&ev[i])) continue;
        if (pid < 0) pid = ev[i].pid;
        if (ev[i].pid == pid)
            count++;
        else if (any)
            return DT_FAIL(DT_ERR_INVALID, "pipeline bubble: events of ranks %d and %d: choose one (pid)", pid,
                           ev[i].pid);
    }
    if (count == 0) {
        if (any)
            return DT_FAIL(DT_ERR_INVALID, "pipeline bubble: no pipeline instructions (complete events of cat "
                                           "\"pipeline\" with an iter): was the run pipelined "
                                           "(--pipeline-model-parallel-size > 1)?");
        return DT_FAIL(DT_ERR_INVALID, "pipeline bubble: no pipeline instructions of rank %d", pid);
    }
    if (count > (size_t)INT32_MAX) return DT_FAIL(DT_ERR_INVALID, "pipeline bubble: too many events (%zu)", count);

    /* the distinct steps, and the stage */
    int64_t *it = malloc(count * sizeof *it);
    if (!it) return DT_FAIL(DT_ERR_NOMEM, "pipeline bubble: out of memory");
    size_t k = 0;
    int stage = -2;
    for (size_t i = 0; i < n; i++) {
        if (!dt__is_instr(&ev[i]) || ev[i].pid != pid) continue;
        it[k++] = ev[i].iter;
        const int s = dt__event_stage(&ev[i]);
        if (stage == -2) stage = s;
        if (s != stage) {
            free(it);
            return DT_FAIL(DT_ERR_INVALID, "pipeline bubble: rank %d's events name stages %d and %d", pid, stage, s);
        }
    }
    qsort(it, count, sizeof *it, dt__cmp_i64);
    int ns = 0;
    for (size_t i = 0; i < count; i++)
        if (ns == 0 || it[i] != it[ns - 1]) it[ns++] = it[i];
    dt_bubble_step *st = calloc((size_t)ns, sizeof *st);
    if (!st) {
        free(it);
        return DT_FAIL(DT_ERR_NOMEM, "pipeline bubble: out of memory");
    }
    for (int s = 0; s < ns; s++) {
        st[s].iter = it[s];
        st[s].start_ns = INT64_MAX;
        st[s].end_ns = INT64_MIN;
    }

    /* windows and busy times */
    for (size_t i = 0; i < n; i++) {
        const dt_trace_event *e = &ev[i];
        if (!dt__is_instr(e) || e->pid != pid) continue;
        dt_bubble_step *b = &st[dt__find_step(it, ns, e->iter)];
        const int64_t end = e->ts_ns + e->dur_ns;
        if (e->ts_ns < b->start_ns) b->start_ns = e->ts_ns;
        if (end > b->end_ns) b->end_ns = end;
        b->n_events++;
        if (strcmp(e->name, "forward") == 0) {
            b->fb_ns += e->dur_ns, b->busy_ns += e->dur_ns, b->n_forward++;
        } else if (strcmp(e->name, "backward") == 0) {
            b->fb_ns += e->dur_ns, b->busy_ns += e->dur_ns, b->n_backward++;
        } else if (strcmp(e->name, "optim_step") == 0) {
            b->busy_ns += e->dur_ns, b->n_optim++;
        }
    }
    free(it);

    double sum = 0.0, sum_fb = 0.0, sum_w = 0.0;
    for (int s = 0; s < ns; s++) {
        dt_bubble_step *b = &st[s];
        const double w = (double)(b->end_ns - b->start_ns);
        b->bubble = w > 0 ? 1.0 - (double)b->busy_ns / w : 0.0;
        b->bubble_fb = w > 0 ? 1.0 - (double)b->fb_ns / w : 0.0;
        if (b->iter < skip) continue;
        out->n_mean++;
        sum += b->bubble, sum_fb += b->bubble_fb, sum_w += w;
        out->n_forward += b->n_forward, out->n_backward += b->n_backward, out->n_optim += b->n_optim;
        /* per-kind time: busy_ns - fb_ns is the optimizer's */
        out->optim_ns += b->busy_ns - b->fb_ns;
    }
    /* forward and backward time apart (the step records only their sum) */
    for (size_t i = 0; out->n_mean > 0 && i < n; i++) {
        const dt_trace_event *e = &ev[i];
        if (!dt__is_instr(e) || e->pid != pid || e->iter < skip) continue;
        if (strcmp(e->name, "forward") == 0) out->forward_ns += e->dur_ns;
        if (strcmp(e->name, "backward") == 0) out->backward_ns += e->dur_ns;
    }
    out->pid = pid;
    out->stage = stage;
    out->skip = skip;
    out->n_steps = ns;
    out->steps = st;
    if (out->n_mean > 0) {
        out->mean = sum / out->n_mean;
        out->mean_fb = sum_fb / out->n_mean;
        out->mean_window_ns = sum_w / out->n_mean;
    }
    return DT_OK;
}

dt_status dt_bubble_stats_trace(const dt_trace *t, int pid, int skip, dt_bubble_stats *out)
{
    if (!t) {
        if (out) memset(out, 0, sizeof *out);
        return DT_FAIL(DT_ERR_INVALID, "pipeline bubble: no trace");
    }
    return dt_bubble_stats_events(t->events, t->n_events, pid, skip, out);
}
