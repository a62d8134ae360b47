/* trace_coll.c: the ring and parameter-server index of a trace (see
 * dtv_trace.h), built by dtv_coll_index at the end of loading
 * (trace_model.c) and drawn by view_ring.c. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtv_trace.h"

static int dtv__is(const char *a, const char *b) { return strcmp(a, b) == 0; }

static double dtv__extra(const dt_trace_event *e, const char *key, double dflt)
{
    return dt_trace_event_arg(e, key, dflt);
}

/* ---- ring and parameter-server index (view_ring.c; see dtv_trace.h) ----
 * Built once per trace by dtv_coll_index, at the end of dtv__index: the
 * collective step spans of each rank's comm row (steps that neither send,
 * last nor name a peer are left out: the simulator writes such placeholders
 * for the unused fold/unfold steps of a power-of-two tree), with their
 * running byte sums; the push/pull spans of workers and the apply spans of
 * servers; the pushes by end time for the staleness histogram so far. */

static const char *const dtv__coll_step_names[DTV_N_STEP_NAMES] = {"reduce-scatter", "all-gather", "reduce",
                                                                   "broadcast", "allreduce"};

int dtv_coll_step_name(const char *name)
{
    for (int k = 0; k < DTV_N_STEP_NAMES; k++)
        if (dtv__is(name, dtv__coll_step_names[k])) return k;
    return -1;
}

double dtv_coll_extra(const dt_trace_event *e, const char *key, double dflt) { return dtv__extra(e, key, dflt); }

/* A collective step span worth showing (see above). */
static int dtv__coll_step(const dtv_trace *t, const dtv_span *s)
{
    if (s->kind != DTV_RS && s->kind != DTV_AG) return 0;
    const dt_trace_event *e = &t->ev[s->ev];
    if (!dtv__is(e->cat, "comm") || dtv_coll_step_name(e->name) < 0) return 0;
    return !(e->dur_ns == 0 && e->bytes <= 0 && dtv__extra(e, "peer", -1) < 0);
}

static int dtv__cmp_push(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* (end, staleness) pairs */
    if (x[0] != y[0]) return (x[0] > y[0]) - (x[0] < y[0]);
    return (x[1] > y[1]) - (x[1] < y[1]);
}

/* S of rank k (see view_ring.c): its bucket launches of the first
 * iteration that has some, else a rule of the algorithm over its steps of
 * its first iteration with steps. */
static double dtv__coll_buffer(const dtv_trace *t, const dtv_coll *c, int k, const int64_t *bucket_iter,
                               const double *bucket_bytes)
{
    if (bucket_iter[k] != INT64_MIN) return bucket_bytes[k];
    const dtv_coll_rank *cr = &c->rank[k];
    if (cr->n == 0) return 0;
    const dtv_row *row = &t->rows[cr->row];
    const int64_t it = t->ev[row->s[cr->idx[0]].ev].iter;
    double rs = 0, rs0 = 0, ag0 = 0, red = 0, bc0 = 0, all = 0;
    for (int i = 0; i < cr->n; i++) {
        const dt_trace_event *e = &t->ev[row->s[cr->idx[i]].ev];
        if (e->iter != it) break;
        const int nm = dtv_coll_step_name(e->name);
        const double b = e->bytes > 0 ? (double)e->bytes : 0;
        const int local = (int)dtv__extra(e, "step", 0) - c->step_base[nm];
        const int peer = (int)dtv__extra(e, "peer", -1);
        if (nm == DTV_STEP_RS) rs += b, rs0 += local == 0 ? b : 0;
        if (nm == DTV_STEP_AG && local == 0) ag0 += b;
        if (nm == DTV_STEP_REDUCE && peer >= 0) red += b;
        if (nm == DTV_STEP_BCAST && local == 0) bc0 += b;
        if (nm == DTV_STEP_ALLREDUCE) all += b;
    }
    switch (c->algo) {
    case DTV_ALGO_RING: return rs + ag0; /* the n-1 reduce-scatter segments miss only the one all-gather step 0 sends */
    case DTV_ALGO_TREE:
        return rs0 > 0 ? 2 * rs0 : red;              /* the first halving sends half; a folded rank its whole buffer */
    case DTV_ALGO_NAIVE: return red > 0 ? red : bc0; /* a whole buffer to rank 0; rank 0 broadcasts it in round 0 */
    case DTV_ALGO_MPI: return all;
    default: return 0;
    }
}

dt_status dtv_coll_index(dtv_trace *t)
{
    dtv_coll *c = calloc(1, sizeof *c);
    if (!c) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", t->name);
    t->coll = c;
    c->rank = calloc((size_t)t->n_ranks, sizeof *c->rank);
    int64_t *bucket_iter = malloc((size_t)t->n_ranks * sizeof *bucket_iter);
    double *bucket_bytes = calloc((size_t)t->n_ranks, sizeof *bucket_bytes);
    if (!c->rank || !bucket_iter || !bucket_bytes) {
        free(bucket_iter);
        free(bucket_bytes);
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", t->name);
    }
    int smin[DTV_N_STEP_NAMES], smax[DTV_N_STEP_NAMES], has_tree_names = 0, ring_peers = 1;
    for (int k = 0; k < DTV_N_STEP_NAMES; k++) smin[k] = INT32_MAX, smax[k] = INT32_MIN;
    for (int k = 0; k < t->n_ranks; k++) {
        dtv_coll_rank *cr = &c->rank[k];
        cr->row = cr->slot = -1;
        cr->first_peer = INT32_MIN;
        cr->server = strstr(t->pname[k], "parameter server") != NULL;
        bucket_iter[k] = INT64_MIN;
    }
    /* the spans of each rank: collective steps / push/pull on its comm row, apply on a server's optim row */
    dt_status st = DT_OK;
    for (int r = 0; r < t->n_rows && st == DT_OK; r++) {
        const dtv_row *row = &t->rows[r];
        const int k = dtv_rank_index(t, row->pid);
        dtv_coll_rank *cr = &c->rank[k];
        const int want_apply = cr->server && row->lane == DT_LANE_OPTIM;
        if (row->lane != DT_LANE_COMM && !want_apply) continue;
        int n = 0;
        for (int i = 0; i < row->n; i++)
            n += want_apply ? dtv__is(t->ev[row->s[i].ev].name, "apply")
                            : dtv__coll_step(t, &row->s[i]) || row->s[i].kind == DTV_PUSHPULL;
        if (n == 0) continue;
        cr->row = r;
        cr->idx = malloc((size_t)n * sizeof *cr->idx);
        cr->cum = malloc((size_t)(n + 1) * sizeof *cr->cum);
        if (!cr->idx || !cr->cum) {
            st = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %d spans", t->name, n);
            break;
        }
        cr->cum[0] = 0;
        for (int i = 0; i < row->n; i++) {
            const dtv_span *s = &row->s[i];
            const dt_trace_event *e = &t->ev[s->ev];
            if (want_apply ? !dtv__is(e->name, "apply") : !(dtv__coll_step(t, s) || s->kind == DTV_PUSHPULL)) continue;
            cr->idx[cr->n] = i;
            const int64_t b = s->kind != DTV_PUSHPULL && !want_apply && e->bytes > 0 ? e->bytes : 0;
            if (b > INT64_MAX - cr->cum[cr->n]) { /* the running sums (and every sum of a part of them) fit */
                st = DT_FAIL(DT_ERR_FORMAT,
                             "%s: event \"%s\" of rank %d: \"args.bytes\" is %" PRId64 "; the rank's collective "
                             "steps would send more than %" PRId64 " bytes in all",
                             t->name, e->name, e->pid, e->bytes, INT64_MAX);
                break;
            }
            cr->cum[cr->n + 1] = cr->cum[cr->n] + b;
            cr->n++;
            if (s->kind == DTV_PUSHPULL) {
                cr->worker = 1;
                continue;
            }
            if (want_apply) continue;
            cr->steps = 1;
            const int nm = dtv_coll_step_name(e->name), step = (int)dtv__extra(e, "step", 0),
                      peer = (int)dtv__extra(e, "peer", -1);
            if (step < smin[nm]) smin[nm] = step;
            if (step > smax[nm]) smax[nm] = step;
            if (nm != DTV_STEP_RS && nm != DTV_STEP_AG) has_tree_names = 1;
            if (peer >= 0) { /* a ring sends every step to the same rank, the next one */
                if (cr->first_peer == INT32_MIN) cr->first_peer = peer;
                else if (peer != cr->first_peer) ring_peers = 0;
            }
        }
    }
    /* bucket launches: S of the first iteration that has them, per rank */
    for (size_t i = 0; i < t->n_ev && st == DT_OK; i++) {
        const dt_trace_event *e = &t->ev[i];
        if (e->ph != DT_TRACE_INSTANT || !dtv__is(e->name, "bucket launch") || e->bytes <= 0) continue;
        const int k = dtv_rank_index(t, e->pid);
        if (bucket_iter[k] == INT64_MIN || e->iter < bucket_iter[k]) bucket_iter[k] = e->iter, bucket_bytes[k] = 0;
        if (e->iter == bucket_iter[k]) bucket_bytes[k] += (double)e->bytes;
    }
    /* the algorithm: the configuration's, else from the step names and peers */
    char algo[32] = "";
    double dp = 0;
    json_t *cfg = t->config_json ? json_loads(t->config_json, 0, NULL) : NULL;
    if (cfg) {
        json_t *v = json_object_get(cfg, "allreduce");
        if (json_is_string(v)) snprintf(algo, sizeof algo, "%s", json_string_value(v));
        v = json_object_get(cfg, "data_parallel_size");
        if (json_is_integer(v)) dp = (double)json_integer_value(v);
        json_decref(cfg);
    }
    if (dtv__is(algo, "ring")) c->algo = DTV_ALGO_RING;
    else if (dtv__is(algo, "tree")) c->algo = DTV_ALGO_TREE;
    else if (dtv__is(algo, "naive")) c->algo = DTV_ALGO_NAIVE;
    else if (dtv__is(algo, "mpi") || dtv__is(algo, "nccl")) c->algo = DTV_ALGO_MPI;
    for (int k = 0; k < DTV_N_STEP_NAMES; k++) {
        c->step_base[k] = smin[k] <= smax[k] ? smin[k] : 0;
        c->step_count[k] = smin[k] <= smax[k] ? smax[k] - smin[k] + 1 : 0;
    }
    int any = 0;
    for (int k = 0; k < t->n_ranks; k++) any |= c->rank[k].steps;
    if (c->algo == DTV_ALGO_NONE && any) {
        if (c->step_count[DTV_STEP_ALLREDUCE]) c->algo = DTV_ALGO_MPI;
        else if (!c->step_count[DTV_STEP_RS] && !c->step_count[DTV_STEP_AG]) c->algo = DTV_ALGO_NAIVE;
        else c->algo = !has_tree_names && ring_peers ? DTV_ALGO_RING : DTV_ALGO_TREE;
    }
    if (!any) c->algo = DTV_ALGO_NONE;
    /* slots on the circle: ranks with steps (ring), else workers and servers apart */
    for (int k = 0; k < t->n_ranks; k++) {
        dtv_coll_rank *cr = &c->rank[k];
        if (any) {
            if (cr->steps) cr->slot = c->n++;
        } else if (cr->server) {
            cr->slot = c->n_servers++;
        } else if (cr->worker) {
            cr->slot = c->n_workers++;
        }
    }
    c->group = dp >= 2 && c->n > 0 && c->n % (int)dp == 0 ? (int)dp : c->n;
    c->buffer_from_buckets = 1;
    for (int k = 0; k < t->n_ranks; k++) {
        if (!c->rank[k].steps) continue;
        if (bucket_iter[k] == INT64_MIN) c->buffer_from_buckets = 0;
        c->rank[k].buffer = dtv__coll_buffer(t, c, k, bucket_iter, bucket_bytes);
    }
    free(bucket_iter);
    free(bucket_bytes);
    /* pushes by end, with checkpoints of the histogram every DTV_PUSH_CKPT */
    size_t np = 0;
    for (int k = 0; k < t->n_ranks; k++)
        if (c->rank[k].worker) np += (size_t)c->rank[k].n;
    if (st == DT_OK && np) {
        int64_t *pairs = malloc(2 * np * sizeof *pairs);
        c->push_end = malloc(np * sizeof *c->push_end);
        c->push_stale = malloc(np * sizeof *c->push_stale);
        c->ckpt = calloc(np / DTV_PUSH_CKPT + 1, sizeof *c->ckpt);
        if (!pairs || !c->push_end || !c->push_stale || !c->ckpt) {
            free(pairs);
            st = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %zu pushes", t->name, np);
        } else {
            size_t j = 0;
            for (int k = 0; k < t->n_ranks; k++) {
                const dtv_coll_rank *cr = &c->rank[k];
                if (!cr->worker) continue;
                for (int i = 0; i < cr->n; i++) {
                    const dtv_span *s = &t->rows[cr->row].s[cr->idx[i]];
                    if (s->kind != DTV_PUSHPULL) continue;
                    const double sv = dtv__extra(&t->ev[s->ev], "staleness", 0);
                    pairs[2 * j] = s->t1;
                    pairs[2 * j + 1] = sv > 0 ? (int64_t)sv : 0;
                    j++;
                }
            }
            qsort(pairs, j, 2 * sizeof *pairs, dtv__cmp_push);
            int64_t acc[DTV_N_STALE + 2] = {0};
            for (size_t i = 0; i < j; i++) {
                if (i % DTV_PUSH_CKPT == 0) memcpy(c->ckpt[i / DTV_PUSH_CKPT], acc, sizeof acc);
                c->push_end[i] = pairs[2 * i];
                c->push_stale[i] = (int)pairs[2 * i + 1];
                acc[pairs[2 * i + 1] < DTV_N_STALE - 1 ? pairs[2 * i + 1] : DTV_N_STALE - 1]++;
                acc[DTV_N_STALE] += pairs[2 * i + 1];
                if (pairs[2 * i + 1] > acc[DTV_N_STALE + 1]) acc[DTV_N_STALE + 1] = pairs[2 * i + 1];
            }
            c->n_push = j;
            free(pairs);
        }
    }
    return st;
}

void dtv_coll_hist_at(const dtv_trace *t, int64_t now, int64_t hist[DTV_N_STALE], int64_t *count, int64_t *sum,
                      int64_t *max)
{
    int64_t acc[DTV_N_STALE + 2] = {0};
    size_t n = 0;
    const dtv_coll *c = t->coll;
    if (c && c->n_push) {
        size_t lo = 0, hi = c->n_push; /* pushes ended by now: push_end <= now */
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if (c->push_end[mid] <= now) lo = mid + 1;
            else hi = mid;
        }
        n = lo;
        if (n) {
            const size_t base = (n - 1) / DTV_PUSH_CKPT;
            memcpy(acc, c->ckpt[base], sizeof acc);
            for (size_t i = base * DTV_PUSH_CKPT; i < n; i++) {
                const int s = c->push_stale[i];
                acc[s < DTV_N_STALE - 1 ? s : DTV_N_STALE - 1]++;
                acc[DTV_N_STALE] += s;
                if (s > acc[DTV_N_STALE + 1]) acc[DTV_N_STALE + 1] = s;
            }
        }
    }
    memcpy(hist, acc, DTV_N_STALE * sizeof *hist);
    if (count) *count = (int64_t)n;
    if (sum) *sum = acc[DTV_N_STALE];
    if (max) *max = acc[DTV_N_STALE + 1];
}

void dtv_coll_free(dtv_trace *t)
{
    dtv_coll *c = t->coll;
    if (!c) return;
    if (c->rank)
        for (int k = 0; k < t->n_ranks; k++) {
            free(c->rank[k].idx);
            free(c->rank[k].cum);
        }
    free(c->rank);
    free(c->push_end);
    free(c->push_stale);
    free(c->ckpt);
    free(c);
    t->coll = NULL;
}
