/* trace_stats.c: figures computed from trace events (dt_trace_stats.h).
 *
 * The step and phase times of one rank: one pass for the last step (events
 * inside "evaluate" spans left out), one for the ends of steps skip-1 and
 * last (the range, shared with trace_breakdown.c through
 * trace_internal.h), one that adds each event to its phase.
 *
 * The pipeline bubble of one rank's stage, per step and on average; the
 * definition is in dt_trace_stats.h and docs/trace-format.md. Two passes
 * over the events: the distinct steps of the selected pid's pipeline
 * instructions (sorted, so steps may be sparse or unordered in the file),
 * then each event is added to its step's window and busy time.
 *
 * Flow events: sorted by (id, phase, time), each id's group is judged. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "dt_trace_stats.h"
#include "trace_internal.h"

/* A pipeline instruction: a complete event of cat "pipeline" with a step. */
static int dt__is_instr(const dt_trace_event *e)
{
    return e->ph == DT_TRACE_COMPLETE && strcmp(e->cat, "pipeline") == 0 && e->iter != DT_TRACE_NONE;
}

/* The "stage" extra (-1 when absent) in *out, or -1 when it is not an int >= 0 (the format gives
 * extras no range: a cast of 1e308 to int is undefined). */
static int dt__event_stage(const dt_trace_event *e, int *out)
{
    const double s = dt_trace_event_arg(e, "stage", -1);
    if (s == -1) return *out = -1, 0;
    if (!(s >= 0 && s <= INT_MAX)) return -1;
    *out = (int)s;
    return 0;
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
        if (it[mid] < iter) lo = mid + 1;
        else hi = mid;
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
    out->mean = out->mean_fb = out->mean_window_ns = out->run_fb = out->run = NAN;
    if (!ev && n > 0) return DT_FAIL(DT_ERR_INVALID, "pipeline bubble: no events");
    if (skip < 0) return DT_FAIL(DT_ERR_INVALID, "pipeline bubble: skip %d: expected >= 0", skip);

    /* the pid (pid < 0: the only one), and how many of its events are instructions */
    const int any = pid < 0;
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!dt__is_instr(&ev[i])) continue;
        if (pid < 0) pid = ev[i].pid;
        if (ev[i].pid == pid) count++;
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
        int s;
        if (dt__event_stage(&ev[i], &s) != 0) {
            free(it);
            return DT_FAIL(DT_ERR_INVALID,
                           "pipeline bubble: rank %d's \"%s\" event: \"args.stage\" is %.17g; expected 0..%d", pid,
                           ev[i].name, dt_trace_event_arg(&ev[i], "stage", -1), INT_MAX);
        }
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
        } else if (strcmp(e->name, "backward") == 0 || strcmp(e->name, "backward_b") == 0) {
            b->fb_ns += e->dur_ns, b->busy_ns += e->dur_ns, b->n_backward++;
        } else if (strcmp(e->name, "backward_w") == 0) { /* the weight-gradient half of a split backward */
            b->fb_ns += e->dur_ns, b->busy_ns += e->dur_ns;
        } else if (strcmp(e->name, "optim_step") == 0) {
            b->busy_ns += e->dur_ns, b->n_optim++;
        }
    }
    free(it);

    double sum = 0.0, sum_fb = 0.0, sum_w = 0.0, run_fb = 0.0, run_busy = 0.0;
    int64_t run_start = INT64_MAX, run_end = INT64_MIN;
    for (int s = 0; s < ns; s++) {
        dt_bubble_step *b = &st[s];
        const double w = (double)(b->end_ns - b->start_ns);
        b->bubble = w > 0 ? 1.0 - (double)b->busy_ns / w : 0.0;
        b->bubble_fb = w > 0 ? 1.0 - (double)b->fb_ns / w : 0.0;
        if (b->iter < skip) continue;
        out->n_mean++;
        run_fb += (double)b->fb_ns;
        run_busy += (double)b->busy_ns;
        if (b->start_ns < run_start) run_start = b->start_ns;
        if (b->end_ns > run_end) run_end = b->end_ns;
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
        if (strcmp(e->name, "backward") == 0 || strcmp(e->name, "backward_b") == 0 ||
            strcmp(e->name, "backward_w") == 0)
            out->backward_ns += e->dur_ns;
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
        out->run_fb = run_end > run_start ? 1.0 - run_fb / (double)(run_end - run_start) : 0.0;
        out->run = run_end > run_start ? 1.0 - run_busy / (double)(run_end - run_start) : 0.0;
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

/* ---- step and phase times ------------------------------------------------ */

static int dt__is(const char *a, const char *b) { return strcmp(a, b) == 0; }

void dt__find_evals(const dt_trace_event *ev, size_t n, int pid, dt__evals *out)
{
    out->n = 0;
    for (size_t i = 0; i < n && out->n < 64; i++)
        if (ev[i].pid == pid && ev[i].ph == DT_TRACE_COMPLETE && dt__is(ev[i].name, "evaluate")) {
            out->t0[out->n] = ev[i].ts_ns;
            out->t1[out->n++] = ev[i].ts_ns + ev[i].dur_ns;
        }
}

int dt__in_step(const dt_trace_event *e, int pid, const dt__evals *evals)
{
    if (e->pid != pid || e->iter == DT_TRACE_NONE || e->iter < 0) return 0;
    for (int i = 0; i < evals->n; i++)
        if (e->ts_ns >= evals->t0[i] && e->ts_ns <= evals->t1[i]) return 0;
    return 1;
}

/* The end of an event (a span's end saturates at INT64_MAX). */
static int64_t dt__event_end(const dt_trace_event *e)
{
    const int64_t dur = e->ph == DT_TRACE_COMPLETE ? e->dur_ns : 0;
    return dur > 0 && e->ts_ns > INT64_MAX - dur ? INT64_MAX : e->ts_ns + dur;
}

dt_status dt__trace_step_range(const dt_trace_event *ev, size_t n, int pid, int skip, const dt__evals *evals,
                               int64_t *start, int64_t *end, int64_t *steps, int64_t *last)
{
    int64_t max_iter = -1;
    for (size_t i = 0; i < n; i++)
        if (dt__in_step(&ev[i], pid, evals) && ev[i].iter > max_iter) max_iter = ev[i].iter;
    if (max_iter < 0) return DT_FAIL(DT_ERR_INVALID, "trace: rank %d has no events with an iteration", pid);
    /* Only the ends of steps skip-1 and max_iter are needed: no array indexed
     * by iter, whose value comes from the file. */
    int64_t end_base = INT64_MIN, last_end = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        const dt_trace_event *e = &ev[i];
        if (!dt__in_step(e, pid, evals)) continue;
        const int64_t t1 = dt__event_end(e);
        if (e->iter == skip - 1 && t1 > end_base) end_base = t1;
        if (e->iter == max_iter && t1 > last_end) last_end = t1;
    }
    /* from the end of step skip-1 to the end of the last step */
    const int64_t base = skip > 0 && skip - 1 <= max_iter ? end_base : 0;
    const int64_t counted = max_iter - (skip > 0 ? skip - 1 : -1);
    if (counted < 1 || base == INT64_MIN || (skip > 0 && skip > max_iter))
        return DT_FAIL(DT_ERR_INVALID, "trace: rank %d has %lld steps; at least %d needed (the first %d are warm-up)",
                       pid, (long long)max_iter + 1, skip + 1, skip);
    /* a later step that ends before an earlier one (iterations swapped, or a span running to the largest
     * time in step skip-1) would make the step time negative: the trace is refused, not averaged */
    if (last_end < base)
        return DT_FAIL(DT_ERR_FORMAT,
                       "trace: rank %d: step %" PRId64 " ends at %" PRId64 " ns, before step %" PRId64
                       " (the range's start) ends at %" PRId64 " ns; expected the steps in time order",
                       pid, max_iter, last_end, (int64_t)skip - 1, base);
    *start = base;
    *end = last_end;
    *steps = counted;
    *last = max_iter;
    return DT_OK;
}

dt_status dt_trace_phase_times_events(const dt_trace_event *ev, size_t n, int pid, int skip, dt_trace_phase_times *out)
{
    memset(out, 0, sizeof *out);
    dt__evals evals;
    dt__find_evals(ev, n, pid, &evals);
    int64_t start, end, counted, last;
    DT_CHECK(dt__trace_step_range(ev, n, pid, skip, &evals, &start, &end, &counted, &last));
    double compute = 0, optim = 0, comm = 0;
    for (size_t i = 0; i < n; i++) {
        const dt_trace_event *e = &ev[i];
        if (!dt__in_step(e, pid, &evals)) continue;
        if (e->ph != DT_TRACE_COMPLETE || e->iter < skip) continue;
        const int pipe = dt__is(e->cat, "pipeline");
        if ((dt__is(e->cat, "compute") || pipe) &&
            (dt__is(e->name, "forward") || dt__is(e->name, "backward") || dt__is(e->name, "recompute") ||
             dt__is(e->name, "backward_b") || dt__is(e->name, "backward_w")))
            compute += (double)e->dur_ns;
        else if (dt__is(e->name, "optimizer") || dt__is(e->name, "optim_step") || dt__is(e->name, "apply") ||
                 dt__is(e->name, "grad norm"))
            optim += (double)e->dur_ns;
        else if (dt__is(e->cat, "comm") || dt__is(e->cat, "tp") || dt__is(e->cat, "cp") ||
                 (pipe && (dt__is(e->name, "recv_act") || dt__is(e->name, "recv_grad"))))
            comm += (double)e->dur_ns;
    }
    out->steps = (int)counted;
    out->step_ns = (double)(end - start) / (double)counted;
    out->compute_ns = compute / (double)counted;
    out->optim_ns = optim / (double)counted;
    out->comm_ns = comm / (double)counted;
    return DT_OK;
}

/* ---- flow events ----------------------------------------------------------- */

typedef struct dt__flow {
    int64_t id, ts;
    int pid;
    char ph;
} dt__flow;

static int dt__cmp_flow(const void *a, const void *b)
{
    const dt__flow *x = a, *y = b;
    if (x->id != y->id) return (x->id > y->id) - (x->id < y->id);
    if (x->ph != y->ph) return x->ph == DT_TRACE_FLOW_START ? -1 : 1;
    return (x->ts > y->ts) - (x->ts < y->ts);
}

/* Rank pid's clock error in a merged file (0 when the file is not merged, -1 unknown). */
static int64_t dt__pid_error(const dt_trace *t, int pid)
{
    const dt_trace_merge_info *m = &t->merge;
    if (!m->method[0]) return 0;
    for (int i = 0; i < m->n; i++)
        if (m->pid[i] == pid) return m->error_ns[i];
    return -1;
}

dt_status dt_trace_flow_stats_trace(const dt_trace *t, dt_trace_flow_stats *out)
{
    if (!out) return DT_FAIL(DT_ERR_INVALID, "flow stats: no output");
    memset(out, 0, sizeof *out);
    if (!t) return DT_FAIL(DT_ERR_INVALID, "flow stats: no trace");
    size_t n = 0;
    for (size_t i = 0; i < t->n_events; i++)
        n += t->events[i].ph == DT_TRACE_FLOW_START || t->events[i].ph == DT_TRACE_FLOW_END;
    if (n == 0) return DT_OK;
    dt__flow *f = malloc(n * sizeof *f);
    if (!f) return DT_FAIL(DT_ERR_NOMEM, "flow stats: out of memory for %zu flow events", n);
    size_t k = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        const dt_trace_event *e = &t->events[i];
        if (e->ph != DT_TRACE_FLOW_START && e->ph != DT_TRACE_FLOW_END) continue;
        f[k++] = (dt__flow){e->flow_id, e->ts_ns, e->pid, e->ph};
        if (e->ph == DT_TRACE_FLOW_START) out->starts++;
        else out->ends++;
    }
    qsort(f, n, sizeof *f, dt__cmp_flow);
    int have_lag = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && f[j].id == f[i].id) j++;
        const dt__flow *s = &f[i], *e = &f[i + 1];
        if (j - i != 2 || s->ph != DT_TRACE_FLOW_START || e->ph != DT_TRACE_FLOW_END || s->pid == e->pid) {
            out->unpaired++;
        } else {
            out->pairs++;
            const int64_t lag = e->ts - s->ts; /* both >= 0: no overflow */
            if (!have_lag || lag < out->min_lag_ns) out->min_lag_ns = lag;
            have_lag = 1;
            const int64_t es = dt__pid_error(t, s->pid), ee = dt__pid_error(t, e->pid);
            if (es >= 0 && ee >= 0) {
                const int64_t tol = es > INT64_MAX - ee ? INT64_MAX : es + ee;
                out->judged++;
                if (tol > out->max_tol_ns) out->max_tol_ns = tol;
                if (lag < 0 && -lag > tol) out->early++;
            }
        }
        i = j;
    }
    free(f);
    return DT_OK;
}
