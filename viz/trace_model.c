/* trace_model.c: loading and indexing traces for the viewer (see
 * dtv_trace.h). It owns the merged event array, the rows and the series;
 * the figures it shows (bubbles) come from lib/'s trace statistics, the
 * same code the simulator and dtbench use, and so do the step breakdowns
 * (dt_breakdown_all, as `dtsim analyze`). */
#define _POSIX_C_SOURCE 200809L
#include "dtv_trace.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dt_schedule.h"
#include "dt_trace_merge.h"
#include "dt_trace_stats.h"

static int dtv__is(const char *a, const char *b) { return strcmp(a, b) == 0; }

static const char *const dtv__kind_names[DTV_N_KINDS] = {"forward",
                                                         "backward",
                                                         "weight gradients (W)",
                                                         "recompute",
                                                         "optimizer",
                                                         "send",
                                                         "receive (waiting)",
                                                         "reduce-scatter / reduce",
                                                         "all-gather / broadcast",
                                                         "tensor-parallel allreduce / vocab gather",
                                                         "sequence-parallel all-gather",
                                                         "sequence-parallel reduce-scatter",
                                                         "sequence-parallel LayerNorm grad allreduce",
                                                         "context-parallel ring step (K/V)",
                                                         "context-parallel K/V all-gather",
                                                         "context-parallel dK/dV reduce-scatter",
                                                         "context-parallel all-to-all",
                                                         "push/pull",
                                                         "allreduce between stages (waiting)",
                                                         "stash / drop",
                                                         "evaluate",
                                                         "other"};

const char *dtv_kind_name(dtv_kind k) { return k < DTV_N_KINDS ? dtv__kind_names[k] : "?"; }

dtv_kind dtv_kind_of(const dt_trace_event *e)
{
    const char *n = e->name;
    if (dtv__is(n, "forward")) return DTV_FORWARD;
    if (dtv__is(n, "backward") || dtv__is(n, "backward_b")) return DTV_BACKWARD;
    if (dtv__is(n, "backward_w")) return DTV_WGRAD;
    if (dtv__is(n, "recompute")) return DTV_RECOMPUTE;
    if (dtv__is(n, "optimizer") || dtv__is(n, "optim_step") || dtv__is(n, "apply") || dtv__is(n, "grad norm"))
        return DTV_OPTIM;
    if (dtv__is(n, "grad norm allreduce") || dtv__is(n, "overflow allreduce") || dtv__is(n, "tied embedding allreduce"))
        return DTV_SYNC;
    if (dtv__is(n, "send_act") || dtv__is(n, "send_grad")) return DTV_SEND;
    if (dtv__is(n, "recv_act") || dtv__is(n, "recv_grad")) return DTV_RECV;
    if (dtv__is(n, "reduce-scatter") || dtv__is(n, "reduce") || dtv__is(n, "allreduce")) return DTV_RS;
    if (dtv__is(n, "all-gather") || dtv__is(n, "broadcast")) return DTV_AG;
    if (!strncmp(n, "tp allreduce", 12) || dtv__is(n, "tp vocab allreduce") || dtv__is(n, "tp vocab gather"))
        return DTV_TP;
    if (dtv__is(n, "tp all-gather")) return DTV_SP_AG;
    if (dtv__is(n, "tp reduce-scatter")) return DTV_SP_RS;
    if (dtv__is(n, "tp layernorm grad allreduce")) return DTV_SP_LN;
    if (dtv__is(n, "cp ring step")) return DTV_CP_RING;
    if (dtv__is(n, "cp kv all-gather")) return DTV_CP_AG;
    if (dtv__is(n, "cp dkv reduce-scatter")) return DTV_CP_RS;
    if (dtv__is(n, "cp all-to-all")) return DTV_CP_A2A;
    if (dtv__is(n, "push/pull")) return DTV_PUSHPULL;
    if (dtv__is(n, "stash") || dtv__is(n, "drop")) return DTV_STASH;
    if (dtv__is(n, "evaluate")) return DTV_EVAL;
    return DTV_OTHER;
}

static double dtv__extra(const dt_trace_event *e, const char *key, double dflt)
{
    return dt_trace_event_arg(e, key, dflt);
}

static int dtv__series_add(dtv_series *s, dtv_point p)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        dtv_point *q = realloc(s->p, (size_t)cap * sizeof *q);
        if (!q) return -1;
        s->p = q;
        s->cap = cap;
    }
    s->p[s->n++] = p;
    return 0;
}

static int dtv__cmp_point(const void *a, const void *b)
{
    const dtv_point *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

static int dtv__cmp_span(const void *a, const void *b)
{
    const dtv_span *x = a, *y = b;
    if (x->t0 != y->t0) return (x->t0 > y->t0) - (x->t0 < y->t0);
    return (x->ev > y->ev) - (x->ev < y->ev);
}

int dtv_rank_index(const dtv_trace *t, int pid)
{
    int lo = 0, hi = t->n_ranks - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (t->pids[mid] == pid) return mid;
        if (t->pids[mid] < pid) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int dtv_row_first(const dtv_row *r, int64_t t0)
{
    int lo = 0, hi = r->n; /* first i with max_end[i] >= t0 (max_end is non-decreasing) */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (r->max_end[mid] >= t0) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

int dtv_row_last_started(const dtv_row *r, const int *idx, int n, int64_t now)
{
    int lo = 0, hi = n; /* first i whose span starts after now (starts are non-decreasing along idx) */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (r->s[idx[mid]].t0 <= now) lo = mid + 1;
        else hi = mid;
    }
    return lo - 1;
}

static int dtv__cmp_int(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* p and m from the configuration (dtrain's or dtsim's keys). */
static void dtv__config(dtv_trace *t)
{
    t->p = 1;
    t->m = 0;
    if (!t->config_json) return;
    json_t *c = json_loads(t->config_json, 0, NULL);
    if (!c) return;
    json_t *v = json_object_get(c, "pipeline_model_parallel_size");
    if (json_is_integer(v) && json_integer_value(v) >= 1) t->p = (int)json_integer_value(v);
    v = json_object_get(c, "micro_batches");
    if (json_is_integer(v) && json_integer_value(v) >= 1) {
        t->m = (int)json_integer_value(v);
    } else {
        json_t *g = json_object_get(c, "global_batch_size"), *b = json_object_get(c, "micro_batch_size"),
               *d = json_object_get(c, "data_parallel_size");
        const long long gb = json_is_integer(g) ? json_integer_value(g) : 0,
                        mb = json_is_integer(b) ? json_integer_value(b) : 0,
                        dp = json_is_integer(d) && json_integer_value(d) > 0 ? json_integer_value(d) : 1;
        if (gb > 0 && mb > 0 && gb % (mb * dp) == 0) t->m = (int)(gb / (mb * dp));
    }
    json_decref(c);
}

/* Most distinct weight versions held by micro-batches in flight on one rank. */
static int dtv__max_versions(const dtv_trace *t, int pid)
{
    enum { CAP = 256 };
    int mb[CAP], ver[CAP], n = 0, best = 0;
    /* events are in time order per row after sorting; walk the compute row of pid */
    for (int r = 0; r < t->n_rows; r++) {
        const dtv_row *row = &t->rows[r];
        if (row->pid != pid || row->lane != DT_LANE_COMPUTE) continue;
        for (int i = 0; i < row->n; i++) {
            const dt_trace_event *e = &t->ev[row->s[i].ev];
            if (!dtv__is(e->cat, "pipeline") || e->micro_batch == DT_TRACE_NONE) continue;
            const int v = (int)dtv__extra(e, "version", -1);
            if (row->s[i].kind == DTV_FORWARD && n < CAP) {
                mb[n] = e->micro_batch;
                ver[n++] = v;
            } else if (row->s[i].kind == DTV_BACKWARD) {
                for (int k = 0; k < n; k++)
                    if (mb[k] == e->micro_batch) {
                        mb[k] = mb[n - 1];
                        ver[k] = ver[--n];
                        break;
                    }
            }
            int distinct = 0;
            for (int k = 0; k < n; k++) {
                int seen = 0;
                for (int j = 0; j < k; j++) seen |= ver[j] == ver[k];
                distinct += !seen;
            }
            if (distinct > best) best = distinct;
        }
    }
    return best;
}

/* The extras the viewer turns into integers: a stage, a version, a
 * collective's step and peer, a push's worker and staleness, an overflow's
 * layer slot and skipped flag, a pipeline instruction's model chunk, a
 * context-parallel ring step's `from`. The trace format gives extras no range
 * (docs/trace-format.md "Ranges": a consumer that indexes with one checks
 * it), so the viewer refuses one outside these, naming the event, rather
 * than casting it out of range (undefined) or indexing with it. steps stay
 * below INT_MAX / 2 so that a span of steps (max - min + 1) fits an int. */
static dt_status dtv__check_extras(const dtv_trace *t)
{
    static const struct {
        const char *key;
        double lo, hi;
    } ranges[] = {{"stage", 0, INT_MAX},   {"version", -1, INT_MAX},  {"step", 0, INT_MAX / 2},   {"peer", -1, INT_MAX},
                  {"worker", -1, INT_MAX}, {"staleness", 0, INT_MAX}, {"layer_slot", 0, INT_MAX}, {"skipped", 0, 1},
                  {"chunk", 0, INT_MAX},   {"from", 0, INT_MAX}};
    for (size_t i = 0; i < t->n_ev; i++) {
        const dt_trace_event *e = &t->ev[i];
        if (e->n_extra == 0) continue;
        for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
            const double v = dt_trace_event_arg(e, ranges[k].key, ranges[k].lo);
            if (!(v >= ranges[k].lo && v <= ranges[k].hi))
                return DT_FAIL(DT_ERR_FORMAT, "%s: event \"%s\" of rank %d: \"args.%s\" is %.17g; expected %.0f..%.0f",
                               t->name, e->name, e->pid, ranges[k].key, v, ranges[k].lo, ranges[k].hi);
        }
    }
    return DT_OK;
}

/* Build rows, ranks and series from t->ev (already merged and aligned). */
static dt_status dtv__index(dtv_trace *t)
{
    DT_CHECK(dtv__check_extras(t));
    t->t_min = INT64_MAX;
    t->t_max = INT64_MIN;
    /* ranks */
    int *pids = malloc((t->n_ev + 1) * sizeof *pids);
    if (!pids) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", t->name);
    size_t np = 0;
    for (size_t i = 0; i < t->n_ev; i++) pids[np++] = t->ev[i].pid;
    qsort(pids, np, sizeof *pids, dtv__cmp_int);
    t->n_ranks = 0;
    for (size_t i = 0; i < np; i++) {
        if (t->n_ranks && t->pids[t->n_ranks - 1] == pids[i]) continue;
        if (t->n_ranks == DTV_MAX_RANKS) {
            free(pids);
            return DT_FAIL(DT_ERR_INVALID, "%s: more than %d ranks (the viewer's limit)", t->name, DTV_MAX_RANKS);
        }
        t->pids[t->n_ranks] = pids[i];
        snprintf(t->pname[t->n_ranks], sizeof t->pname[0], "rank %d", pids[i]);
        t->n_ranks++;
    }
    free(pids);
    /* rows: count spans per (rank, lane) with lane in 0..3 */
    enum { LANES = 4 };
    int *count = calloc((size_t)t->n_ranks * LANES, sizeof *count);
    if (!count) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", t->name);
    size_t n_spans = 0;
    for (size_t i = 0; i < t->n_ev; i++) {
        const dt_trace_event *e = &t->ev[i];
        const int ri = dtv_rank_index(t, e->pid);
        if (e->ph == DT_TRACE_METADATA && dtv__is(e->name, "process_name") && e->label[0])
            snprintf(t->pname[ri], sizeof t->pname[0], "%s", e->label);
        if (e->ph == DT_TRACE_METADATA) continue;
        const int64_t end = e->ts_ns + (e->ph == DT_TRACE_COMPLETE ? e->dur_ns : 0);
        if (e->ts_ns < t->t_min) t->t_min = e->ts_ns;
        if (end > t->t_max) t->t_max = end;
        if (e->ph != DT_TRACE_COMPLETE || e->tid < 0 || e->tid >= LANES) continue;
        count[ri * LANES + e->tid]++;
        n_spans++;
    }
    if (n_spans == 0) {
        free(count);
        return DT_FAIL(DT_ERR_FORMAT, "%s: the trace has no spans (complete events) to show", t->name);
    }
    for (int k = 0; k < t->n_ranks * LANES; k++) t->n_rows += count[k] > 0;
    t->rows = calloc((size_t)t->n_rows, sizeof *t->rows);
    int *row_of = malloc((size_t)t->n_ranks * LANES * sizeof *row_of);
    if (!t->rows || !row_of) {
        free(count);
        free(row_of);
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %d rows", t->name, t->n_rows);
    }
    static const char *const lane_names[LANES] = {"compute", "comm", "optimizer", "data"};
    int r = 0;
    for (int k = 0; k < t->n_ranks * LANES; k++) {
        row_of[k] = -1;
        if (!count[k]) continue;
        dtv_row *row = &t->rows[r];
        row->pid = t->pids[k / LANES];
        row->lane = k % LANES;
        snprintf(row->label, sizeof row->label, "rank %d %s", row->pid, lane_names[row->lane]);
        row->s = malloc((size_t)count[k] * sizeof *row->s);
        row->max_end = malloc((size_t)count[k] * sizeof *row->max_end);
        if (!row->s || !row->max_end) {
            const dt_status st = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %d spans", t->name, count[k]);
            free(count); /* after the message, which reads count[k] */
            free(row_of);
            return st;
        }
        row_of[k] = r++;
    }
    free(count);
    for (size_t i = 0; i < t->n_ev; i++) {
        const dt_trace_event *e = &t->ev[i];
        if (e->ph != DT_TRACE_COMPLETE || e->tid < 0 || e->tid >= LANES) continue;
        dtv_row *row = &t->rows[row_of[dtv_rank_index(t, e->pid) * LANES + e->tid]];
        row->s[row->n++] = (dtv_span){e->ts_ns, e->ts_ns + e->dur_ns, (int)i, (unsigned char)dtv_kind_of(e)};
    }
    free(row_of);
    for (int k = 0; k < t->n_rows; k++) {
        dtv_row *row = &t->rows[k];
        if (row->n > 1) qsort(row->s, (size_t)row->n, sizeof *row->s, dtv__cmp_span);
        int64_t mx = INT64_MIN;
        for (int i = 0; i < row->n; i++) {
            if (row->s[i].t1 > mx) mx = row->s[i].t1;
            row->max_end[i] = mx;
        }
    }
    /* pipeline: stages, bubbles, versions */
    dtv__config(t);
    for (int s = 0; s < DTV_MAX_STAGES; s++) {
        t->stage_pid[s] = -1;
        t->bubble[s] = t->bubble_fb[s] = NAN;
    }
    int max_stage = -1;
    t->chunks = 1;
    /* the evaluations: they carry the next step's number, and so do the
     * spans inside them (a tensor-parallel forward's allreduces), which
     * are not a step */
    size_t n_eval = 0;
    for (size_t i = 0; i < t->n_ev; i++) n_eval += dtv__is(t->ev[i].name, "evaluate");
    size_t *eval = n_eval ? malloc(n_eval * sizeof *eval) : NULL;
    if (n_eval && !eval) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", t->name);
    n_eval = 0;
    for (size_t i = 0; i < t->n_ev; i++)
        if (dtv__is(t->ev[i].name, "evaluate")) eval[n_eval++] = i;
    for (size_t i = 0; i < t->n_ev; i++) {
        const dt_trace_event *e = &t->ev[i];
        if (e->iter != DT_TRACE_NONE && e->iter + 1 > t->n_steps) {
            int in_eval = 0;
            for (size_t k = 0; k < n_eval && !in_eval; k++) {
                const dt_trace_event *v = &t->ev[eval[k]];
                in_eval = v->pid == e->pid && v->iter == e->iter && e->ts_ns >= v->ts_ns &&
                          e->ts_ns <= v->ts_ns + v->dur_ns;
            }
            if (!in_eval) t->n_steps = e->iter + 1;
        }
        if (!dtv__is(e->cat, "pipeline")) continue;
        const double ch = dtv__extra(e, "chunk", 0);
        if (ch + 1 > t->chunks) t->chunks = ch + 1 > INT_MAX ? INT_MAX : (int)ch + 1;
        const int s = (int)dtv__extra(e, "stage", -1);
        if (s < 0 || s >= DTV_MAX_STAGES) continue;
        if (t->stage_pid[s] < 0 || e->pid < t->stage_pid[s]) t->stage_pid[s] = e->pid;
        if (s > max_stage) max_stage = s;
    }
    free(eval);
    if (max_stage + 1 > t->p) t->p = max_stage + 1;
    /* the per-step ideal of the schedule; pipedream's steps overlap, so 1f1b's flushed step stands for them */
    char sched[32] = "";
    dt_sched_kind kind = DT_SCHED_1F1B;
    dtv_trace_config_string(t, "pipeline_schedule", sched, sizeof sched);
    if (!sched[0] || dt_sched_kind_parse(sched, &kind) != DT_OK || kind == DT_SCHED_PIPEDREAM ||
        kind == DT_SCHED_PIPEDREAM_VSYNC)
        kind = DT_SCHED_1F1B;
    t->formula = t->m > 0 ? dt_schedule_bubble_ideal_chunks(kind, t->p, t->chunks, t->m, 1) : NAN;
    t->formula_text = dt_schedule_bubble_formula_text(kind);
    /* one stage (tensor parallelism alone runs on the pipeline runtime
     * with p = 1) has no pipeline bubble to show */
    for (int s = 0; s <= max_stage && t->p > 1; s++) {
        if (t->stage_pid[s] < 0) continue;
        dt_bubble_stats bs;
        if (dt_bubble_stats_events(t->ev, t->n_ev, t->stage_pid[s], t->n_steps > 1 ? 1 : 0, &bs) == DT_OK) {
            t->bubble[s] = bs.mean;
            t->bubble_fb[s] = bs.mean_fb;
            dt_bubble_stats_free(&bs);
        }
        t->max_versions[s] = dtv__max_versions(t, t->stage_pid[s]);
    }
    /* collectives, parameter server, numerics, memory */
    t->memory = calloc((size_t)t->n_ranks, sizeof *t->memory);
    if (!t->memory) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", t->name);
    const int low = t->pids[0];
    /* a real run's activations: the per-layer samples when it has them (issue 23), else one per step */
    for (size_t i = 0; i < t->n_ev && !t->mem_live; i++)
        t->mem_live = t->ev[i].ph == DT_TRACE_COUNTER && dtv__is(t->ev[i].name, "live_activation_bytes");
    const char *act_counter = t->mem_live ? "live_activation_bytes" : "activation_bytes";
    for (size_t i = 0; i < t->n_ev; i++) {
        const dt_trace_event *e = &t->ev[i];
        const dtv_kind k = e->ph == DT_TRACE_COMPLETE ? dtv_kind_of(e) : DTV_OTHER;
        if ((k == DTV_RS || k == DTV_AG) && dtv__is(e->cat, "comm")) t->has_ring = 1;
        if (k == DTV_PUSHPULL) {
            const double st = dtv__extra(e, "staleness", 0);
            t->stale_hist[st < 15 ? (int)st : 15]++;
            t->pushes++;
        }
        int bad = 0;
        if (e->ph == DT_TRACE_COUNTER && dtv__is(e->name, "loss_scale") && e->pid == low)
            bad = dtv__series_add(&t->loss_scale, (dtv_point){.t = e->ts_ns, .v = e->value, .iter = DT_TRACE_NONE});
        if (e->ph == DT_TRACE_COUNTER && dtv__is(e->name, "memory"))
            bad =
                dtv__series_add(&t->memory[dtv_rank_index(t, e->pid)], (dtv_point){.t = e->ts_ns,
                                                                                   .v = e->value,
                                                                                   .iter = DT_TRACE_NONE,
                                                                                   .a = dtv__extra(e, "static", 0),
                                                                                   .b = dtv__extra(e, "activations", 0),
                                                                                   .c = dtv__extra(e, "stash", 0)});
        if (e->ph == DT_TRACE_COUNTER && dtv__is(e->name, act_counter)) /* real runs: activations only */
            bad = dtv__series_add(&t->memory[dtv_rank_index(t, e->pid)],
                                  (dtv_point){.t = e->ts_ns, .v = e->value, .iter = DT_TRACE_NONE, .b = e->value});
        if (e->ph == DT_TRACE_INSTANT && !strncmp(e->name, "overflow", 8) && e->pid == low) {
            dtv_overflow *o = realloc(t->overflow, (size_t)(t->n_overflow + 1) * sizeof *o);
            if (!o) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", t->name);
            t->overflow = o;
            const double slot = dtv__extra(e, "layer_slot", NAN);
            o[t->n_overflow++] = (dtv_overflow){.t = e->ts_ns,
                                                .iter = e->iter,
                                                .scale = dtv__extra(e, "loss_scale", NAN),
                                                .layer = isnan(slot) ? DT_TRACE_NONE : (int)slot - 1,
                                                .skipped = (int)dtv__extra(e, "skipped", 1)};
        }
        if (bad) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", t->name);
    }
    /* a real run's overflow names no layer: take the highest layer (first in backward) with a non-finite gradient */
    for (int o = 0; o < t->n_overflow; o++) {
        if (t->overflow[o].layer != DT_TRACE_NONE) continue;
        int best = DT_TRACE_NONE;
        for (size_t i = 0; i < t->n_ev; i++) {
            const dt_trace_event *e = &t->ev[i];
            if (e->ph == DT_TRACE_INSTANT && dtv__is(e->name, "grad_amax") && e->iter == t->overflow[o].iter &&
                e->pid == low && dtv__extra(e, "nonfinite", 0) > 0 && e->layer != DT_TRACE_NONE &&
                (best == DT_TRACE_NONE || e->layer > best))
                best = e->layer;
        }
        t->overflow[o].layer = best;
    }
    /* an empty series has p == NULL: qsort(NULL, 0, ...) is undefined */
    if (t->loss_scale.n > 1) qsort(t->loss_scale.p, (size_t)t->loss_scale.n, sizeof(dtv_point), dtv__cmp_point);
    for (int k = 0; k < t->n_ranks; k++) {
        if (t->memory[k].n > 1) qsort(t->memory[k].p, (size_t)t->memory[k].n, sizeof(dtv_point), dtv__cmp_point);
        for (int i = 0; i < t->memory[k].n; i++)
            if (t->memory[k].p[i].v > t->mem_max) t->mem_max = t->memory[k].p[i].v;
    }
    DT_CHECK(dtv_coll_index(t));
    DT_CHECK(dtv_cp_index(t));
    DT_CHECK(dtv_fp8_index(t));
    /* the breakdown view's figures; a trace without enough steps shows why instead */
    t->bd_skip = t->n_steps > 2 ? 1 : 0;
    const dt_status bst = dt_breakdown_all(t->ev, t->n_ev, t->bd_skip, &t->breakdown, &t->n_breakdown);
    if (bst == DT_ERR_NOMEM) return bst;
    if (bst != DT_OK) {
        snprintf(t->bd_why, sizeof t->bd_why, "%s", dt_last_error());
        dt_clear_error();
    }
    return DT_OK;
}

dt_status dtv_trace_from_events(dt_trace_event *ev, size_t n, const char *name, const char *tool,
                                const char *config_json, dtv_trace *out)
{
    memset(out, 0, sizeof *out);
    out->ev = ev;
    out->n_ev = n;
    out->aligned = 1;
    snprintf(out->name, sizeof out->name, "%s", name ? name : "(simulation)");
    snprintf(out->tool, sizeof out->tool, "%s", tool ? tool : "dtsim");
    if (config_json && !(out->config_json = strdup(config_json))) {
        dtv_trace_free(out);
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", out->name);
    }
    dt_status st = dtv__index(out);
    if (st != DT_OK) dtv_trace_free(out);
    return st;
}

dt_status dtv_trace_load(const char *path, dtv_trace *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", path);
    struct stat sb;
    char base[512] = "";
    int ranks = 0;
    if (stat(path, &sb) != 0) { /* a real run's name: run.json -> run.rank<r>.json */
        const size_t len = strlen(path);
        if (len > 5 && !strcmp(path + len - 5, ".json") && len - 5 < sizeof base) {
            memcpy(base, path, len - 5);
            base[len - 5] = '\0';
            char f[600];
            for (;; ranks++) {
                snprintf(f, sizeof f, "%s.rank%d.json", base, ranks);
                if (stat(f, &sb) != 0) break;
            }
        }
        if (!ranks)
            return DT_FAIL(DT_ERR_IO, "%s: no such trace (nor %s.rank0.json, a real run's rank files)", path,
                           base[0] ? base : path);
    }
    const int n_files = ranks ? ranks : 1;
    dt_trace **tr = calloc((size_t)n_files, sizeof *tr);
    if (!tr) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
    dt_status st = DT_OK;
    size_t total = 0;
    for (int i = 0; i < n_files && st == DT_OK; i++) {
        char f[600];
        if (ranks) snprintf(f, sizeof f, "%s.rank%d.json", base, i);
        else snprintf(f, sizeof f, "%s", path);
        st = dt_trace_read(f, &tr[i]);
        if (st == DT_OK) total += tr[i]->n_events;
    }
    if (st == DT_OK && total == 0) st = DT_FAIL(DT_ERR_FORMAT, "%s: the trace has no events", path);
    if (st == DT_OK) {
        out->ev = malloc(total * sizeof *out->ev);
        if (!out->ev) st = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %zu events", path, total);
    }
    if (st == DT_OK) {
        snprintf(out->tool, sizeof out->tool, "%s", tr[0]->tool);
        if (tr[0]->config_json && !(out->config_json = strdup(tr[0]->config_json)))
            st = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
        /* rank files: on one clock as their merged file would be (dt_trace_align: their clocks, else the ends
         * of step 0, else as they are) */
        dt_trace_merge_file *al = calloc((size_t)n_files, sizeof *al);
        const char **names = calloc((size_t)n_files, sizeof *names);
        char(*fn)[600] = calloc((size_t)n_files, sizeof *fn);
        char method[16] = "none";
        if (st == DT_OK && (!al || !names || !fn)) st = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
        for (int i = 0; st == DT_OK && ranks && i < n_files; i++) {
            snprintf(fn[i], sizeof fn[i], "%s.rank%d.json", base, i);
            names[i] = fn[i];
        }
        if (st == DT_OK && ranks) st = dt_trace_align((const dt_trace *const *)tr, names, n_files, al, method);
        out->aligned = !ranks || strcmp(method, "none") != 0;
        for (int i = 0; i < n_files && st == DT_OK; i++) {
            const int64_t shift = ranks ? al[i].offset_ns : 0;
            for (size_t k = 0; k < tr[i]->n_events; k++) {
                dt_trace_event e = tr[i]->events[k];
                e.ts_ns += shift;
                out->ev[out->n_ev++] = e;
            }
        }
        free(al);
        free(names);
        free(fn);
    }
    for (int i = 0; i < n_files; i++) dt_trace_free(tr[i]);
    free(tr);
    if (st == DT_OK) st = dtv__index(out);
    if (st != DT_OK) dtv_trace_free(out);
    return st;
}

void dtv_trace_free(dtv_trace *t)
{
    if (!t) return;
    dtv_coll_free(t);
    dtv_cp_free(t);
    dtv_fp8_free(t);
    for (int r = 0; r < t->n_rows; r++) {
        free(t->rows[r].s);
        free(t->rows[r].max_end);
    }
    free(t->rows);
    if (t->memory)
        for (int k = 0; k < t->n_ranks; k++) free(t->memory[k].p);
    free(t->memory);
    free(t->loss_scale.p);
    free(t->overflow);
    free(t->breakdown);
    free(t->ev);
    free(t->config_json);
    memset(t, 0, sizeof *t);
}

/* ---- helpers of the numerics and memory views (see dtv_trace.h) ---- */

double dtv_trace_config_number(const dtv_trace *t, const char *key, double dflt)
{
    if (!t->config_json) return dflt;
    json_t *c = json_loads(t->config_json, 0, NULL);
    if (!c) return dflt;
    json_t *v = json_object_get(c, key);
    const double r = json_is_number(v) ? json_number_value(v) : dflt;
    json_decref(c);
    return r;
}

const char *dtv_trace_config_string(const dtv_trace *t, const char *key, char *buf, size_t n)
{
    if (n) buf[0] = '\0';
    if (!t->config_json || !n) return buf;
    json_t *c = json_loads(t->config_json, 0, NULL);
    if (!c) return buf;
    json_t *v = json_object_get(c, key);
    if (json_is_string(v)) snprintf(buf, n, "%s", json_string_value(v));
    json_decref(c);
    return buf;
}

int dtv_trace_num_layers(const dtv_trace *t)
{
    const double L = dtv_trace_config_number(t, "num_layers", -1);
    if (L >= 1 && L < 1e6) return (int)L;
    int best = -1;
    for (size_t i = 0; i < t->n_ev; i++)
        if (t->ev[i].layer != DT_TRACE_NONE && t->ev[i].layer > best) best = t->ev[i].layer;
    return best; /* the head's layer is L */
}

void dtv_layer_name(char *buf, size_t n, int layer, int num_layers)
{
    if (layer == DT_TRACE_NONE) snprintf(buf, n, "%s", "");
    else if (layer < 0) snprintf(buf, n, "embedding");
    else if (num_layers >= 0 && layer >= num_layers) snprintf(buf, n, "head");
    else snprintf(buf, n, "layer %d", layer);
}

static int dtv__cmp_point_stable(const void *a, const void *b)
{
    const dtv_point *x = a, *y = b;
    if (x->t != y->t) return (x->t > y->t) - (x->t < y->t);
    return (x->iter > y->iter) - (x->iter < y->iter);
}

dt_status dtv_trace_counter_series(const dtv_trace *t, const char *name, dtv_series *out)
{
    memset(out, 0, (size_t)t->n_ranks * sizeof *out);
    for (size_t i = 0; i < t->n_ev; i++) {
        const dt_trace_event *e = &t->ev[i];
        if (e->ph != DT_TRACE_COUNTER || !dtv__is(e->name, name)) continue;
        const int ri = dtv_rank_index(t, e->pid);
        if (ri < 0) continue;
        if (dtv__series_add(&out[ri], (dtv_point){.t = e->ts_ns, .v = e->value, .iter = (int64_t)i}) != 0) {
            for (int k = 0; k < t->n_ranks; k++) free(out[k].p);
            memset(out, 0, (size_t)t->n_ranks * sizeof *out);
            return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for the %s counters", t->name, name);
        }
    }
    for (int k = 0; k < t->n_ranks; k++) { /* by time, then file order (iter holds the event index meanwhile) */
        if (out[k].n > 1) qsort(out[k].p, (size_t)out[k].n, sizeof(dtv_point), dtv__cmp_point_stable);
        for (int i = 0; i < out[k].n; i++) out[k].p[i].iter = DT_TRACE_NONE;
    }
    return DT_OK;
}

int dtv_series_at(const dtv_series *s, int64_t ns)
{
    int lo = 0, hi = s->n; /* first point after ns */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (s->p[mid].t <= ns) lo = mid + 1;
        else hi = mid;
    }
    return lo - 1;
}
