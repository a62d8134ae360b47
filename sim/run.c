/* run.c: the executor (see dts_run.h). It owns the simulated ranks
 * ("units"), their step state machines, the collectives they start, the
 * memory accounting and the events they record.
 *
 * Three shapes, as in the real runtime:
 *   pipeline (p > 1 or t > 1): lib/pipeline.c. One unit per (d_i, p_i)
 *     stands for its t tensor-parallel ranks (they do the same work in
 *     lockstep, joined by their per-block allreduces, which are costed with
 *     the ring formula over the t ranks' links). The unit walks its stage's
 *     instruction list from dt_schedule_make: FORWARD/BACKWARD take the
 *     stage's summed layer costs, SEND posts a message on the link to the
 *     neighbour stage (non-blocking), RECV waits for the matching message
 *     (sends and receives between two stages come in the same order on both
 *     sides, so the k-th receive takes the k-th message), OPTIM_STEP runs
 *     the stage's data-parallel allreduce (step level, dts_coll), the
 *     gradient-norm allreduce over the pipeline (gpipe/1f1b) and the
 *     update, STASH copies the weights. Each step ends with the world
 *     allreduce of the loss (lib/pipeline.c dt__pipe_step), then the host's
 *     per-step overhead.
 *   data parallel (p = t = 1): lib/train.c. Forward and backward per layer
 *     and micro-batch; during the last micro-batch's backward each gradient
 *     bucket (25 MiB, head first) is handed to the unit's communication
 *     lane when its lowest layer is done (FP32 only; with --fp16/--bf16 the
 *     whole buffer after the backward); the lane allreduces the buckets in
 *     order; then the loss allreduce and the optimizer. ZeRO-1: reduce-
 *     scatter, the update of 1/d of the parameters, all-gather.
 *   parameter server: lib/ps.c. Workers compute, then push each server its
 *     shard's gradient and wait for every server's reply; ps-sync servers
 *     wait for every worker's push of the step, sum, apply once and reply
 *     to all; ps-async servers apply each push on arrival (in arrival order)
 *     and reply to its worker. Staleness = updates the server applied
 *     between that worker's previous pull and this push (largest over the
 *     servers), as the real servers count it.
 *
 * Invariants: events are recorded in the order they end, per unit; each
 * unit runs one compute operation at a time; a run with the same scenario
 * gives the same events (no clocks, no unordered containers). */
#include "dts_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dt_trace_stats.h"
#include "dts_amp.h"
#include "dts_coll.h"
#include "dts_engine.h"
#include "dts_net.h"
#include "ps.h"

/* ---- events ------------------------------------------------------------- */

typedef struct dts__evbuf {
    dt_trace_event *v;
    size_t n, cap;
} dts__evbuf;

static int dts__push(dts__evbuf *b, const dt_trace_event *e)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        dt_trace_event *v = realloc(b->v, cap * sizeof *v);
        if (!v) return -1;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = *e;
    return 0;
}

/* ---- units -------------------------------------------------------------- */

enum { DTS__W_NONE = 0, DTS__W_ACT, DTS__W_GRAD };

typedef struct dts__sim dts__sim;

typedef struct dts__unit {
    dts__sim *sim;
    int idx;
    int rank;          /* representative world rank (t_i = 0) */
    int stage, dpi;
    int record;        /* keep this unit's events */
    /* pipeline */
    int pc, end;
    int64_t step;
    int wait;
    int64_t wait_t0;
    int64_t *act_arr, *grad_arr; /* arrival times by message sequence (-1: not sent yet) */
    int n_act_recv, n_grad_recv, n_act_sent, n_grad_sent;
    int opt_phase;
    int64_t opt_t0;
    /* data parallel / parameter server worker */
    int mb, layer, dir; /* dir 0 forward, 1 backward */
    int next_bucket, buckets_ready, buckets_done, comm_busy, bwd_done;
    int64_t exch_t0;
    int replies;
    int64_t *pulled;   /* (K) server versions at this worker's last pull */
    int max_stale;
    /* memory */
    int64_t mem_static, mem_act, mem_stash, mem_peak;
    int stash_now, stash_max;
    /* phase accounting (per run) */
    int64_t ns_dp, ns_pp, ns_tp, ns_ps;
    int finished;
} dts__unit;

/* A collective instance with its members' units. */
typedef struct dts__cinst {
    dts__sim *sim;
    dts_coll *c;
    dts__unit **members;
    int n, kind;       /* kind: what to resume when done (DTS__C_*) */
    int arrived;       /* members that arrived: the instance takes no more once all have */
} dts__cinst;

enum { DTS__C_OPT_DP = 0, DTS__C_BUCKET, DTS__C_ZERO_RS, DTS__C_ZERO_AG };

/* An analytic sync (world loss allreduce, pipeline norm allreduce). */
typedef struct dts__sync {
    int n, arrived;
    int64_t last, cost;
    dts__unit **members;
    int kind;
} dts__sync;

enum { DTS__S_WORLD = 0, DTS__S_NORM, DTS__S_LOSS };

/* A parameter server (lib/ps.c). It waits for pushes by polling: a test of
 * every pending receive, then a sleep of 20 us doubling up to 500 us (each
 * sleep waking sleep_overshoot_ns late), so it notices a message at its
 * first poll after the arrival; each wait call starts the ladder again.
 * A push's gradient (a large message) moves only once the server has
 * posted its receive, after noticing the push's header. */
typedef struct dts__server {
    dts__sim *sim;
    int idx, rank;
    int64_t params;     /* elements of its shard */
    int64_t version;
    int state;          /* DTS__SV_IDLE (polling since idle_since), _WAKE (a wake is scheduled), _BUSY */
    int64_t idle_since;
    int64_t *hdr_at;    /* (W) arrival of worker w's pending push header, -1 none */
    int n_noticed;      /* ps-sync: headers of this step noticed so far */
    int *noticed;       /* (W) ps-sync */
    int record;
} dts__server;

enum { DTS__SV_IDLE = 0, DTS__SV_WAKE, DTS__SV_BUSY };

struct dts__sim {
    const dts_scenario *sc;
    dts_engine *e;
    dts_net net;
    dt_schedule *sched;
    int sched_borrowed;
    int n_units, world;
    dts__unit *u;
    /* per stage */
    int64_t *fwd_ns, *bwd_ns, *opt_ns, *stash_ns, *params, *act; /* (p) per stage, one rank's share (blocks / t) */
    int64_t msg_bytes;
    int64_t tp_ar_ns;    /* one tensor-parallel allreduce of a block's activation */
    int n_tp_blocks_max;
    int *tp_blocks;      /* (p) blocks per stage */
    dts__cinst **dp_open; /* (p) the open data-parallel collective of each stage (pipeline) */
    int *dp_open_seq;
    dts__sync *norm;      /* (d) per pipeline */
    dts__sync world_sync;
    /* data parallel buckets */
    int n_buckets;
    int64_t *bucket_bytes;
    int *bucket_low;
    dts__cinst **bucket_open; /* (n_buckets) */
    dts__cinst *zero_open[2];
    dts__sync loss_sync;
    /* parameter server */
    int W, K;
    dts__server *srv;
    int64_t pushes, stale_sum;
    int stale_max;
    int64_t stale_hist[16];
    /* cores shared per node (hw.cores_per_node > 0): one job per unit */
    struct dts__job *job; /* (n_units) */
    int *cpu_active;      /* (nodes) jobs computing on the node */
    int64_t *cpu_last;    /* (nodes) when their progress was last brought up to date */
    int n_nodes;
    dts__evbuf ev;
    int keep_all;
    dt_status st;
};

/* A compute op of a unit under shared cores: work left in single-core ns,
 * and what to call when it is done. gen invalidates the finish events of
 * earlier rates. */
typedef struct dts__job {
    dts__unit *u;
    double left;
    int64_t gen;
    int live;
    dts_fn fn;
    int64_t a, b;
} dts__job;

/* Nanoseconds of a computed duration; absurd ones saturate below 2^62 (the
 * engine refuses events past that) rather than overflow int64. */
static int64_t dts__ns(double x) { return x < 4.0e18 ? (int64_t)llround(x) : (int64_t)4000000000000000000LL; }

static void dts__fail(dts__sim *s, dt_status st)
{
    if (s->st == DT_OK) s->st = st;
    dts_engine_fail(s->e, st);
}

static void dts__at(dts__sim *s, int64_t t, dts_fn fn, void *ctx, int64_t a, int64_t b)
{
    dt_status st = dts_engine_at(s->e, t, fn, ctx, a, b);
    if (st != DT_OK) dts__fail(s, st);
}

static void dts__rec(dts__sim *s, int record, const dt_trace_event *e)
{
    if (!record) return;
    if (dts__push(&s->ev, e) != 0) dts__fail(s, DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for %zu events", s->ev.n));
}

static void dts__span(dts__sim *s, dts__unit *u, const char *name, const char *cat, int lane, int64_t t0, int64_t t1,
                      int64_t iter, int mb, int layer, int64_t bytes)
{
    if (!u->record) return;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, name, cat, u->rank, lane, t0, t1 - t0);
    e.iter = iter;
    e.micro_batch = mb;
    e.layer = layer;
    e.bytes = bytes;
    dts__rec(s, 1, &e);
}

static void dts__memory(dts__sim *s, dts__unit *u)
{
    const int64_t total = u->mem_static + u->mem_act + u->mem_stash;
    if (total > u->mem_peak) u->mem_peak = total;
    if (!u->record) return;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COUNTER, "memory", "counter", u->rank, DT_LANE_COMPUTE, dts_engine_now(s->e), 0);
    e.value = (double)total;
    dt_trace_event_add_arg(&e, "static", (double)u->mem_static);
    dt_trace_event_add_arg(&e, "activations", (double)u->mem_act);
    dt_trace_event_add_arg(&e, "stash", (double)u->mem_stash);
    dts__rec(s, 1, &e);
}

/* ---- pipeline ----------------------------------------------------------- */

static void dts__pipe_advance(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__step_end(dts__sim *s, dts__unit *u);

/* ---- compute, on a core of its own or on shared cores -------------------- */

static int dts__node_of(const dts__sim *s, const dts__unit *u)
{
    return u->rank / (s->sc->hw.devices_per_node > 0 ? s->sc->hw.devices_per_node : 1);
}

/* Bring the node's jobs' work left up to now at the rate they had. */
static void dts__cpu_advance(dts__sim *s, int node, int64_t now)
{
    const int k = s->cpu_active[node];
    const double rate = k > s->sc->hw.cores_per_node ? (double)s->sc->hw.cores_per_node / k : 1.0;
    const double done = (double)(now - s->cpu_last[node]) * rate;
    for (int i = 0; k > 0 && i < s->n_units; i++)
        if (s->job[i].live && dts__node_of(s, &s->u[i]) == node) s->job[i].left -= done;
    s->cpu_last[node] = now;
}

static void dts__cpu_done(dts_engine *e, void *ctx, int64_t a, int64_t b);

/* The node's computing jobs at their new rate: a new finish event each. */
static void dts__cpu_resched(dts__sim *s, int node, int64_t now)
{
    const int k = s->cpu_active[node];
    const double rate = k > s->sc->hw.cores_per_node ? (double)s->sc->hw.cores_per_node / k : 1.0;
    for (int i = 0; i < s->n_units; i++) {
        dts__job *j = &s->job[i];
        if (!j->live || dts__node_of(s, &s->u[i]) != node) continue;
        j->gen++;
        const double left = j->left > 0 ? j->left : 0;
        dts__at(s, now + (int64_t)ceil(left / rate), dts__cpu_done, j, j->gen, 0);
    }
}

static void dts__cpu_done(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)b;
    dts__job *j = ctx;
    if (!j->live || a != j->gen) return; /* a finish time of an earlier rate */
    dts__sim *s = j->u->sim;
    const int node = dts__node_of(s, j->u);
    const int64_t now = dts_engine_now(e);
    dts__cpu_advance(s, node, now);
    j->live = 0;
    s->cpu_active[node]--;
    dts__cpu_resched(s, node, now);
    j->fn(e, j->u, j->a, j->b);
}

/* Run `dur` ns of u's compute, then fn(u, a, b): at once on a core of its
 * own, or sharing its node's cores with the node's other computing units. */
static void dts__compute(dts__sim *s, dts__unit *u, int64_t dur, dts_fn fn, int64_t a, int64_t b)
{
    const int64_t now = dts_engine_now(s->e);
    if (s->sc->hw.cores_per_node <= 0) {
        dts__at(s, now + dur, fn, u, a, b);
        return;
    }
    const int node = dts__node_of(s, u);
    dts__cpu_advance(s, node, now);
    dts__job *j = &s->job[u->idx];
    *j = (dts__job){.u = u, .left = (double)dur, .gen = j->gen, .live = 1, .fn = fn, .a = a, .b = b};
    s->cpu_active[node]++;
    dts__cpu_resched(s, node, now);
}

/* Activation bytes a layer keeps from its forward to its backward, as
 * lib/'s arena does (dt_gpt_predicted_activation_bytes): everything without
 * recomputation; under selective recomputation a block drops its attention
 * probabilities, (B, NH, T, T); under full recomputation (one block per
 * group, K = 1) it keeps only its input, (B, T, C). */
static int64_t dts__saved_act(const dts_scenario *sc, int slot)
{
    const int64_t all = sc->cost.act_bytes[slot];
    if (slot < 1 || slot > sc->model.num_layers) return all; /* the embedding and the head */
    const int64_t BT = (int64_t)sc->B * sc->T;
    if (sc->recompute == 1) return BT * sc->model.hidden_size * (int64_t)sizeof(float);
    if (sc->recompute == 2) return all - BT * sc->model.num_heads * sc->T * (int64_t)sizeof(float);
    return all;
}

static void dts__pipe_event(dts__sim *s, dts__unit *u, const dt_sched_instr *in, int64_t t0, int64_t t1)
{
    if (!u->record) return;
    static const int lanes[] = {DT_LANE_COMM, DT_LANE_COMPUTE, DT_LANE_COMM, DT_LANE_COMM, DT_LANE_COMPUTE,
                                DT_LANE_COMM, DT_LANE_OPTIM, DT_LANE_OPTIM, DT_LANE_OPTIM};
    dt_trace_event ev;
    dt_trace_event_init(&ev, DT_TRACE_COMPLETE, dt_sched_op_name(in->op), "pipeline", u->rank, lanes[in->op], t0,
                        t1 - t0);
    ev.iter = in->op == DT_SCHED_OPTIM_STEP || in->op == DT_SCHED_STASH || in->op == DT_SCHED_DROP ? u->step : in->step;
    if (in->mb >= 0) ev.micro_batch = in->mb;
    dt_trace_event_add_arg(&ev, "stage", u->stage);
    if (in->version >= 0) dt_trace_event_add_arg(&ev, "version", in->version);
    dt_trace_event_add_arg(&ev, "phase", in->phase);
    dts__rec(s, 1, &ev);
}

static void dts__tp_spans(dts__sim *s, dts__unit *u, int64_t t0, int64_t t1, int forward, int64_t iter)
{
    /* the block's allreduces sit at the end of the compute span, two per block */
    const int n = 2 * s->tp_blocks[u->stage];
    if (!u->record || n == 0 || s->sc->t == 1) return;
    int64_t at = t1 - n * s->tp_ar_ns;
    if (at < t0) at = t0;
    for (int i = 0; i < n; i++, at += s->tp_ar_ns) {
        dt_trace_event ev;
        dt_trace_event_init(&ev, DT_TRACE_COMPLETE, forward ? "tp allreduce g" : "tp allreduce f", "tp", u->rank,
                            DT_LANE_COMM, at, s->tp_ar_ns);
        ev.iter = iter;
        dt_trace_event_add_arg(&ev, "forward", forward);
        dts__rec(s, 1, &ev);
    }
}

static dts__unit *dts__unit_at(dts__sim *s, int dpi, int stage) { return &s->u[dpi + s->sc->d * stage]; }

/* The message arrives at `to` at time t: wake it if it waits for exactly this one. */
static void dts__deliver(dts__sim *s, dts__unit *to, int grad, int seq, int64_t t)
{
    if (grad) to->grad_arr[seq] = t;
    else to->act_arr[seq] = t;
    const int want = grad ? DTS__W_GRAD : DTS__W_ACT;
    const int next = grad ? to->n_grad_recv : to->n_act_recv;
    if (to->wait == want && next == seq) {
        to->wait = DTS__W_NONE;
        dts__at(s, t, dts__pipe_advance, to, 1, 0); /* b = 0: resume the waiting receive */
    }
}

static void dts__dp_done(dts_engine *e, void *ctx, int member);
static void dts__dp_coll_done(dts__sim *s, dts__unit *u, int kind);
static void dts__coll_step(void *ctx, int member, const char *phase, int step, int peer, int64_t bytes, int64_t t0,
                           int64_t t1);

static dts__cinst *dts__cinst_new(dts__sim *s, dts_coll_kind kind, dts__unit **members, int n, int64_t bytes, int what)
{
    dts__cinst *ci = calloc(1, sizeof *ci);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    if (ci) ci->members = malloc((size_t)n * sizeof *ci->members);
    if (!ci || !ranks || !ci->members) {
        if (ci) free(ci->members);
        free(ci);
        free(ranks);
        dts__fail(s, DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for a collective"));
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        ci->members[i] = members[i];
        ranks[i] = members[i]->rank;
    }
    ci->sim = s;
    ci->n = n;
    ci->kind = what;
    dt_status st = dts_coll_create(s->e, &s->net, kind, n, ranks, bytes, s->sc->chunk_bytes, dts__dp_done,
                                   dts__coll_step, ci, &ci->c);
    free(ranks);
    if (st != DT_OK) {
        free(ci->members);
        free(ci);
        dts__fail(s, st);
        return NULL;
    }
    return ci;
}

static void dts__cinst_free(dts__cinst *ci)
{
    if (!ci) return;
    dts_coll_free(ci->c);
    free(ci->members);
    free(ci);
}

static dts_coll_kind dts__ar_kind(const dts_scenario *sc)
{
    return sc->exchange == DTS_EX_TREE    ? DTS_COLL_TREE_ALLREDUCE
           : sc->exchange == DTS_EX_NAIVE ? DTS_COLL_NAIVE_ALLREDUCE
                                          : DTS_COLL_RING_ALLREDUCE;
}

static void dts__coll_step(void *ctx, int member, const char *phase, int step, int peer, int64_t bytes, int64_t t0,
                           int64_t t1)
{
    dts__cinst *ci = ctx;
    dts__unit *u = ci->members[member];
    u->ns_dp += t1 - t0;
    if (!u->record) return;
    dt_trace_event ev;
    dt_trace_event_init(&ev, DT_TRACE_COMPLETE, phase, "comm", u->rank, DT_LANE_COMM, t0, t1 - t0);
    ev.iter = u->step;
    ev.bytes = bytes;
    dt_trace_event_add_arg(&ev, "step", step);
    dt_trace_event_add_arg(&ev, "peer", peer);
    dts__rec(ci->sim, 1, &ev);
}

/* Syncs: analytic allreduces of a few floats. */
static void dts__sync_done(dts_engine *e, void *ctx, int64_t a, int64_t b);

static void dts__sync_arrive(dts__sim *s, dts__sync *y, dts__unit *u)
{
    (void)u;
    const int64_t now = dts_engine_now(s->e);
    if (now > y->last) y->last = now;
    if (++y->arrived < y->n) return;
    y->arrived = 0;
    const int64_t t = y->last + y->cost;
    y->last = 0;
    for (int i = 0; i < y->n; i++) dts__at(s, t, dts__sync_done, y, i, 0);
}

static void dts__opt_continue(dts__sim *s, dts__unit *u);
static void dts__dp_after_sync(dts__sim *s, dts__unit *u);
static void dts__step_next(dts_engine *e, void *ctx, int64_t a, int64_t b);

static void dts__sync_done(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)e;
    (void)b;
    dts__sync *y = ctx;
    dts__unit *u = y->members[a];
    dts__sim *s = u->sim;
    switch (y->kind) {
    case DTS__S_NORM: u->opt_phase = 2; dts__opt_continue(s, u); break;
    case DTS__S_WORLD: dts__at(s, dts_engine_now(s->e) + s->sc->cost.step_overhead_ns, dts__step_next, u, 0, 0); break;
    case DTS__S_LOSS: dts__dp_after_sync(s, u); break;
    }
}

/* OPTIM_STEP in phases: 0 data-parallel allreduce, 1 norm over the pipeline, 2 update. */
static void dts__opt_continue(dts__sim *s, dts__unit *u)
{
    const dts_scenario *sc = s->sc;
    const int async = sc->schedule == DT_SCHED_PIPEDREAM || sc->schedule == DT_SCHED_PIPEDREAM_VSYNC;
    const int64_t now = dts_engine_now(s->e);
    if (u->opt_phase == 0) {
        u->opt_phase = 1;
        if (sc->d > 1) {
            dts__cinst *ci = s->dp_open[u->stage];
            if (!ci) {
                dts__unit **m = malloc((size_t)sc->d * sizeof *m);
                if (!m) return dts__fail(s, DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory"));
                for (int i = 0; i < sc->d; i++) m[i] = dts__unit_at(s, i, u->stage);
                ci = dts__cinst_new(s, dts__ar_kind(sc), m, sc->d, s->params[u->stage] * 4, DTS__C_OPT_DP);
                free(m);
                if (!ci) return;
                s->dp_open[u->stage] = ci;
            }
            if (++ci->arrived == sc->d) s->dp_open[u->stage] = NULL;
            dts_coll_arrive(ci->c, u->dpi);
            return;
        }
    }
    if (u->opt_phase == 1) {
        if (!async && sc->p > 1) {
            dts__sync_arrive(s, &s->norm[u->dpi], u);
            return;
        }
        u->opt_phase = 2;
    }
    /* the update (plus the tensor-parallel norm allreduce) */
    const int64_t t1 = now + s->opt_ns[u->stage];
    u->opt_phase = 3;
    dts__at(s, t1, dts__pipe_advance, u, 2, 0);
}

static void dts__dp_done(dts_engine *e, void *ctx, int member)
{
    dts__cinst *ci = ctx;
    dts__sim *s = ci->sim;
    dts__unit *u = ci->members[member];
    (void)e;
    if (dts_coll_done_count(ci->c) == ci->n) {
        /* the last member's done: every member arrived, so nothing refers to the instance */
        const int kind = ci->kind;
        dts__cinst_free(ci);
        if (kind == DTS__C_OPT_DP) dts__opt_continue(s, u);
        else dts__dp_coll_done(s, u, kind);
        return;
    }
    if (ci->kind == DTS__C_OPT_DP) dts__opt_continue(s, u);
    else dts__dp_coll_done(s, u, ci->kind);
}

/* b: 0 run from pc, 1 a receive's message has arrived (finish it), 2 a timed op finished */
static void dts__pipe_advance(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)b;
    dts__unit *u = ctx;
    dts__sim *s = u->sim;
    const int st = u->stage;
    const dt_sched_instr *list = s->sched->instr[st];
    const int64_t now = dts_engine_now(e);
    if (a == 2) { /* the timed instruction at pc is done */
        const dt_sched_instr *in = &list[u->pc];
        dts__pipe_event(s, u, in, u->wait_t0, now);
        if (in->op == DT_SCHED_BACKWARD) {
            u->mem_act -= s->act[st];
            dts__memory(s, u);
        }
        if (in->op == DT_SCHED_FORWARD || in->op == DT_SCHED_BACKWARD)
            dts__tp_spans(s, u, u->wait_t0, now, in->op == DT_SCHED_FORWARD, in->step);
        if (in->op == DT_SCHED_OPTIM_STEP) u->opt_phase = 0;
        u->pc++;
    } else if (a == 1) { /* the receive at pc has its message */
        const dt_sched_instr *in = &list[u->pc];
        dts__pipe_event(s, u, in, u->wait_t0, now);
        u->ns_pp += now - u->wait_t0;
        if (in->op == DT_SCHED_RECV_ACT) u->n_act_recv++;
        else u->n_grad_recv++;
        u->pc++;
    }
    while (u->pc < u->end) {
        const dt_sched_instr *in = &list[u->pc];
        u->wait_t0 = now;
        switch (in->op) {
        case DT_SCHED_FORWARD:
            u->mem_act += s->act[st];
            dts__memory(s, u);
            dts__compute(s, u, s->fwd_ns[st], dts__pipe_advance, 2, 0);
            return;
        case DT_SCHED_BACKWARD: dts__compute(s, u, s->bwd_ns[st], dts__pipe_advance, 2, 0); return;
        case DT_SCHED_STASH:
            u->stash_now++;
            if (u->stash_now > u->stash_max) u->stash_max = u->stash_now;
            u->mem_stash += s->params[st] * 4;
            dts__memory(s, u);
            dts__at(s, now + s->stash_ns[st], dts__pipe_advance, u, 2, 0);
            return;
        case DT_SCHED_DROP:
            u->stash_now--;
            u->mem_stash -= s->params[st] * 4;
            dts__memory(s, u);
            dts__pipe_event(s, u, in, now, now);
            u->pc++;
            continue;
        case DT_SCHED_SEND_ACT:
        case DT_SCHED_SEND_GRAD: {
            const int grad = in->op == DT_SCHED_SEND_GRAD;
            dts__unit *to = dts__unit_at(s, u->dpi, st + (grad ? -1 : 1));
            const int seq = grad ? u->n_grad_sent++ : u->n_act_sent++;
            const int64_t at = dts_net_send(&s->net, u->rank, to->rank, s->msg_bytes, now, NULL);
            dts__deliver(s, to, grad, seq, at);
            dts__pipe_event(s, u, in, now, now);
            u->pc++;
            continue;
        }
        case DT_SCHED_RECV_ACT:
        case DT_SCHED_RECV_GRAD: {
            const int grad = in->op == DT_SCHED_RECV_GRAD;
            const int seq = grad ? u->n_grad_recv : u->n_act_recv;
            const int64_t t = grad ? u->grad_arr[seq] : u->act_arr[seq];
            if (t < 0) { /* not sent yet: the sender wakes us */
                u->wait = grad ? DTS__W_GRAD : DTS__W_ACT;
                return;
            }
            if (t > now) {
                dts__at(s, t, dts__pipe_advance, u, 1, 0);
                return;
            }
            dts__pipe_event(s, u, in, now, now);
            if (grad) u->n_grad_recv++;
            else u->n_act_recv++;
            u->pc++;
            continue;
        }
        case DT_SCHED_OPTIM_STEP:
            if (u->opt_phase == 0) u->opt_t0 = now;
            u->wait_t0 = u->opt_t0;
            dts__opt_continue(s, u);
            return;
        }
    }
    dts__step_end(s, u);
}

static void dts__pipe_begin_step(dts__sim *s, dts__unit *u)
{
    const int st = u->stage, n = s->sched->count[st];
    const dt_sched_instr *list = s->sched->instr[st];
    int end = u->pc;
    for (int i = u->pc; i < n; i++)
        if (list[i].step <= u->step) end = i + 1;
    u->end = end;
    dts__at(s, dts_engine_now(s->e), dts__pipe_advance, u, 0, 0);
}

/* ---- data parallel (lib/train.c) --------------------------------------- */

static void dts__dp_op(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__dp_launch(dts__sim *s, dts__unit *u, int b);
static void dts__dp_exchange(dts__sim *s, dts__unit *u);
static void dts__ps_push(dts__sim *s, dts__unit *u);

static void dts__dp_begin_step(dts__sim *s, dts__unit *u)
{
    u->mb = 0;
    u->layer = -1;
    u->dir = 0;
    u->next_bucket = u->buckets_ready = u->buckets_done = u->comm_busy = u->bwd_done = 0;
    dts__at(s, dts_engine_now(s->e), dts__dp_op, u, 0, 0);
}

/* a = 0: start the op at (mb, layer, dir); a = 1: it finished (t0 in b); a = 2: a straggler's sleep ended */
static void dts__dp_op(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    dts__unit *u = ctx;
    dts__sim *s = u->sim;
    const dts_scenario *sc = s->sc;
    const int64_t now = dts_engine_now(e);
    const int L = sc->model.num_layers;
    const int ps = sc->exchange == DTS_EX_PS_SYNC || sc->exchange == DTS_EX_PS_ASYNC;
    if (a == 2) { /* the straggler's sleep is over */
        if (ps) dts__ps_push(s, u);
        else dts__dp_exchange(s, u);
        return;
    }
    if (a == 0) {
        const int slot = u->layer + 1;
        int64_t dur = u->dir ? sc->cost.bwd_ns[slot] : sc->cost.fwd_ns[slot];
        if (u->dir && sc->recompute == 1 && u->layer >= 0 && u->layer < L) {
            dur += sc->cost.fwd_ns[slot];
            /* the recomputed forward rebuilds the block's activations for its backward */
            u->mem_act += sc->cost.act_bytes[slot] - dts__saved_act(sc, slot);
            dts__memory(s, u);
        }
        dts__compute(s, u, dur, dts__dp_op, 1, now);
        return;
    }
    const int slot = u->layer + 1;
    const int full = sc->recompute == 1 && u->layer >= 0 && u->layer < L;
    dts__span(s, u, u->dir ? "backward" : "forward", "compute", DT_LANE_COMPUTE, b, now, u->step, u->mb, u->layer, DT_TRACE_NONE);
    if (!u->dir) {
        u->mem_act += dts__saved_act(sc, slot);
        if (u->layer == L) dts__memory(s, u);
        if (u->layer < L) u->layer++;
        else u->dir = 1;
    } else {
        /* full recomputation: the block's activations, rebuilt at its backward's start, go with its input */
        u->mem_act -= full ? sc->cost.act_bytes[slot] : dts__saved_act(sc, slot);
        /* the last micro-batch's backward completes this layer's gradient */
        if (!ps && sc->d > 1 && !sc->zero && u->mb == sc->m - 1 && !strcmp(sc->precision, "fp32"))
            for (int k = 0; k < s->n_buckets; k++)
                if (s->bucket_low[k] == u->layer) dts__dp_launch(s, u, k);
        if (u->layer > -1) {
            u->layer--;
        } else if (u->mb + 1 < sc->m) {
            dts__memory(s, u);
            u->mb++;
            u->layer = -1;
            u->dir = 0;
        } else { /* backward done */
            dts__memory(s, u);
            u->bwd_done = 1;
            const int64_t slow = u->rank == sc->slow_rank ? sc->slow_ns : 0;
            u->exch_t0 = now + slow;
            if (slow) {
                dts__at(s, now + slow, dts__dp_op, u, 2, 0);
                return;
            }
            if (ps) dts__ps_push(s, u);
            else dts__dp_exchange(s, u);
            return;
        }
    }
    dts__at(s, now, dts__dp_op, u, 0, 0);
}

/* Hand bucket b to the communication lane (in order). */
static void dts__dp_start_bucket(dts__sim *s, dts__unit *u)
{
    if (u->comm_busy || u->next_bucket >= u->buckets_ready) return;
    const int b = u->next_bucket;
    dts__cinst *ci = s->bucket_open[b];
    if (!ci) {
        dts__unit **m = malloc((size_t)s->sc->d * sizeof *m);
        if (!m) return dts__fail(s, DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory"));
        for (int i = 0; i < s->sc->d; i++) m[i] = &s->u[i];
        ci = dts__cinst_new(s, dts__ar_kind(s->sc), m, s->sc->d, s->bucket_bytes[b], DTS__C_BUCKET);
        free(m);
        if (!ci) return;
        s->bucket_open[b] = ci;
    }
    if (++ci->arrived == ci->n) s->bucket_open[b] = NULL;
    u->comm_busy = 1;
    u->next_bucket++;
    dts_coll_arrive(ci->c, u->dpi);
}

static void dts__dp_launch(dts__sim *s, dts__unit *u, int b)
{
    (void)b;
    if (u->record) {
        dt_trace_event ev;
        dt_trace_event_init(&ev, DT_TRACE_INSTANT, "bucket launch", "comm", u->rank, DT_LANE_COMM,
                            dts_engine_now(s->e), 0);
        ev.iter = u->step;
        ev.bytes = s->bucket_bytes[b];
        dt_trace_event_add_arg(&ev, "bucket", b);
        dts__rec(s, 1, &ev);
    }
    u->buckets_ready++;
    dts__dp_start_bucket(s, u);
}

static void dts__dp_optimizer(dts__sim *s, dts__unit *u);

/* After the backward (and the straggler's sleep): the gradient exchange. */
static void dts__dp_exchange(dts__sim *s, dts__unit *u)
{
    const dts_scenario *sc = s->sc;
    if (sc->d == 1) {
        dts__dp_optimizer(s, u);
        return;
    }
    if (sc->zero) { /* the loss first, then reduce-scatter / update / all-gather */
        dts__sync_arrive(s, &s->loss_sync, u);
        return;
    }
    if (strcmp(sc->precision, "fp32") != 0)
        for (int b = 0; b < s->n_buckets; b++) dts__dp_launch(s, u, b);
    if (u->buckets_done == s->n_buckets) dts__sync_arrive(s, &s->loss_sync, u);
}

static void dts__zero_coll(dts__sim *s, dts__unit *u, int which)
{
    dts__cinst *ci = s->zero_open[which];
    if (!ci) {
        dts__unit **m = malloc((size_t)s->sc->d * sizeof *m);
        if (!m) return dts__fail(s, DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory"));
        for (int i = 0; i < s->sc->d; i++) m[i] = &s->u[i];
        ci = dts__cinst_new(s, which ? DTS_COLL_ALL_GATHER : DTS_COLL_REDUCE_SCATTER, m, s->sc->d,
                            s->params[0] * 4, which ? DTS__C_ZERO_AG : DTS__C_ZERO_RS);
        free(m);
        if (!ci) return;
        s->zero_open[which] = ci;
    }
    if (++ci->arrived == ci->n) s->zero_open[which] = NULL;
    dts_coll_arrive(ci->c, u->dpi);
}

static void dts__dp_opt_done(dts_engine *e, void *ctx, int64_t a, int64_t b);

/* The loss allreduce is done. */
static void dts__dp_after_sync(dts__sim *s, dts__unit *u)
{
    u->opt_t0 = dts_engine_now(s->e);
    if (s->sc->zero) dts__zero_coll(s, u, 0);
    else dts__dp_optimizer(s, u);
}

static void dts__dp_coll_done(dts__sim *s, dts__unit *u, int kind)
{
    const int64_t now = dts_engine_now(s->e);
    switch (kind) {
    case DTS__C_BUCKET:
        u->comm_busy = 0;
        u->buckets_done++;
        dts__dp_start_bucket(s, u);
        if (u->bwd_done && u->buckets_done == s->n_buckets && now >= u->exch_t0) dts__sync_arrive(s, &s->loss_sync, u);
        break;
    case DTS__C_ZERO_RS: /* update this rank's 1/d of the parameters */
        dts__at(s, now + dts__ns((double)s->params[0] / s->sc->d * s->sc->cost.optim_ns_per_param), dts__dp_opt_done,
                u, 1, 0);
        break;
    case DTS__C_ZERO_AG: dts__dp_opt_done(s->e, u, 2, 0); break;
    }
}

static void dts__dp_optimizer(dts__sim *s, dts__unit *u)
{
    const int64_t now = dts_engine_now(s->e);
    if (s->sc->d == 1) u->opt_t0 = now;
    dts__at(s, now + dts__ns((double)s->params[0] * s->sc->cost.optim_ns_per_param), dts__dp_opt_done, u, 2, 0);
}

/* a = 1: ZeRO's update done (all-gather next); a = 2: the optimizer is done */
static void dts__dp_opt_done(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)b;
    dts__unit *u = ctx;
    dts__sim *s = u->sim;
    if (a == 1) {
        dts__zero_coll(s, u, 1);
        return;
    }
    dts__span(s, u, "optimizer", "optim", DT_LANE_OPTIM, u->opt_t0, dts_engine_now(e), u->step, DT_TRACE_NONE,
              DT_TRACE_NONE, DT_TRACE_NONE);
    dts__step_end(s, u);
}

/* ---- parameter server (lib/ps.c) ---------------------------------------- */

static void dts__ps_hdr(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__ps_wake(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__ps_apply(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__ps_applied(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__ps_reply(dts_engine *e, void *ctx, int64_t a, int64_t b);

/* lib/ps.c dt__ps_idle_waitany: test at once, then sleep 20 us, 40 us, ...
 * 500 us, 500 us, ... between tests. When a message arriving at `arrival`
 * is noticed by a wait that started at t0. */
static int64_t dts__poll_notice(const dts__sim *s, int64_t t0, int64_t arrival)
{
    int64_t t = t0, sleep = DT_PS_POLL_FIRST_NS;
    const int64_t over = s->sc->hw.sleep_overshoot_ns;
    while (arrival > t) {
        t += sleep + over;
        if (sleep < DT_PS_POLL_MAX_NS) sleep = sleep * 2 < DT_PS_POLL_MAX_NS ? sleep * 2 : DT_PS_POLL_MAX_NS;
    }
    return t;
}

static void dts__ps_push(dts__sim *s, dts__unit *u)
{
    const int64_t now = dts_engine_now(s->e);
    u->exch_t0 = now;
    u->replies = 0;
    u->max_stale = 0;
    for (int k = 0; k < s->K; k++) {
        const int64_t at = dts_net_send(&s->net, u->rank, s->srv[k].rank, DT_PS_MSG_HEADER_BYTES, now, NULL);
        dts__at(s, at, dts__ps_hdr, &s->srv[k], u->idx, 0);
    }
}

/* The server is free at `now`: notice what has arrived, or go back to polling. */
static void dts__ps_idle(dts__sim *s, dts__server *v)
{
    const int64_t now = dts_engine_now(s->e);
    int64_t first = -1;
    for (int w = 0; w < s->W; w++)
        if (v->hdr_at[w] >= 0 && (s->sc->exchange != DTS_EX_PS_SYNC || !v->noticed[w]) &&
            (first < 0 || v->hdr_at[w] < first))
            first = v->hdr_at[w];
    v->idle_since = now;
    if (first < 0) {
        v->state = DTS__SV_IDLE;
        return;
    }
    v->state = DTS__SV_WAKE;
    dts__at(s, dts__poll_notice(s, now, first), dts__ps_wake, v, 0, 0);
}

/* a push header from worker a arrives */
static void dts__ps_hdr(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)b;
    dts__server *v = ctx;
    dts__sim *s = v->sim;
    v->hdr_at[a] = dts_engine_now(e);
    if (v->state != DTS__SV_IDLE) return;
    v->state = DTS__SV_WAKE;
    dts__at(s, dts__poll_notice(s, v->idle_since, dts_engine_now(e)), dts__ps_wake, v, 0, 0);
}

/* the server's poll finds a header (the lowest worker index among those arrived, as its test loop) */
static void dts__ps_wake(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)a;
    (void)b;
    dts__server *v = ctx;
    dts__sim *s = v->sim;
    const int64_t now = dts_engine_now(e);
    const int sync = s->sc->exchange == DTS_EX_PS_SYNC;
    int w = -1;
    for (int i = 0; i < s->W && w < 0; i++)
        if (v->hdr_at[i] >= 0 && v->hdr_at[i] <= now && (!sync || !v->noticed[i])) w = i;
    if (w < 0) return dts__fail(s, DT_FAIL(DT_ERR_INVALID, "dtsim: parameter server %d woke with nothing", v->idx));
    const int64_t bytes = v->params * 4;
    if (!sync) { /* receive the gradient (a blocking wait: noticed on arrival), then apply */
        v->state = DTS__SV_BUSY;
        v->hdr_at[w] = -1;
        const int64_t at = dts_net_send(&s->net, s->u[w].rank, v->rank, bytes, now, NULL);
        dts__at(s, at, dts__ps_apply, v, w, 0);
        return;
    }
    v->noticed[w] = 1;
    if (++v->n_noticed < s->W) { /* the next wait call: a new ladder from now */
        dts__ps_idle(s, v);
        return;
    }
    /* every header in: post the gradients' receives, wait for them all (polling again) */
    v->state = DTS__SV_BUSY;
    int64_t t = now;
    for (int i = 0; i < s->W; i++) {
        const int64_t at = dts_net_send(&s->net, s->u[i].rank, v->rank, bytes, now, NULL);
        t = dts__poll_notice(s, t, at);
    }
    dts__at(s, t, dts__ps_apply, v, -1, 0);
}

/* a: the worker whose gradient is applied (-1: ps-sync, the sum of every worker's) */
static void dts__ps_apply(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)b;
    dts__server *v = ctx;
    dts__sim *s = v->sim;
    const dts_scenario *sc = s->sc;
    const int64_t now = dts_engine_now(e);
    double dur = (double)v->params * sc->cost.optim_ns_per_param;
    if (a < 0) /* copy the first gradient, add the others (read 2, write 1 each) */
        dur += (double)(3 * s->W - 1) * (double)v->params * 4.0 / (sc->hw.mem_bytes_per_s * 1e-9);
    dts__at(s, now + dts__ns(dur), dts__ps_applied, v, a, now);
}

static void dts__ps_send_reply(dts__sim *s, dts__server *v, int w, int64_t staleness, int64_t *done)
{
    dts__unit *u = &s->u[w];
    if (staleness > u->max_stale) u->max_stale = (int)staleness;
    const int64_t now = dts_engine_now(s->e);
    int64_t sd = 0;
    dts_net_send(&s->net, v->rank, u->rank, DT_PS_MSG_HEADER_BYTES, now, NULL);
    const int64_t at = dts_net_send(&s->net, v->rank, u->rank, v->params * 4, now, &sd);
    if (sd > *done) *done = sd;
    dts__at(s, at, dts__ps_reply, u, v->idx, v->version);
}

static void dts__ps_free(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)e;
    (void)a;
    (void)b;
    dts__server *v = ctx;
    dts__ps_idle(v->sim, v);
}

/* the update is done (b: when it started): reply, then wait for the sends and poll again */
static void dts__ps_applied(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    dts__server *v = ctx;
    dts__sim *s = v->sim;
    const int64_t now = dts_engine_now(e);
    int64_t stale = 0;
    if (a >= 0) stale = v->version - s->u[a].pulled[v->idx];
    v->version++;
    if (v->record) {
        dt_trace_event ev;
        dt_trace_event_init(&ev, DT_TRACE_COMPLETE, "apply", "optim", v->rank, DT_LANE_OPTIM, b, now - b);
        ev.iter = v->version - 1;
        dt_trace_event_add_arg(&ev, "worker", (double)a);
        dt_trace_event_add_arg(&ev, "staleness", (double)stale);
        dt_trace_event_add_arg(&ev, "version", (double)v->version);
        dts__rec(s, 1, &ev);
    }
    int64_t done = now;
    if (a >= 0) {
        dts__ps_send_reply(s, v, (int)a, stale, &done);
    } else {
        for (int w = 0; w < s->W; w++) {
            dts__ps_send_reply(s, v, w, 0, &done);
            v->hdr_at[w] = -1;
            v->noticed[w] = 0;
        }
        v->n_noticed = 0;
    }
    dts__at(s, done, dts__ps_free, v, 0, 0);
}

static void dts__ps_reply(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    dts__unit *u = ctx;
    dts__sim *s = u->sim;
    const int64_t now = dts_engine_now(e);
    u->pulled[a] = b;
    if (++u->replies < s->K) return;
    u->ns_ps += now - u->exch_t0;
    s->pushes++;
    s->stale_sum += u->max_stale;
    if (u->max_stale > s->stale_max) s->stale_max = u->max_stale;
    s->stale_hist[u->max_stale < 15 ? u->max_stale : 15]++;
    if (u->record) {
        int64_t version = 0;
        for (int k = 0; k < s->K; k++)
            if (s->srv[k].version > version) version = s->srv[k].version;
        dt_trace_event ev;
        dt_trace_event_init(&ev, DT_TRACE_COMPLETE, "push/pull", "comm", u->rank, DT_LANE_COMM, u->exch_t0,
                            now - u->exch_t0);
        ev.iter = u->step;
        ev.bytes = s->params[0] * 4;
        dt_trace_event_add_arg(&ev, "staleness", u->max_stale);
        dt_trace_event_add_arg(&ev, "version", (double)version);
        dts__rec(s, 1, &ev);
        if (s->sc->exchange == DTS_EX_PS_ASYNC) {
            dt_trace_event c;
            dt_trace_event_init(&c, DT_TRACE_COUNTER, "staleness", "counter", u->rank, DT_LANE_COMPUTE, now, 0);
            c.value = u->max_stale;
            dts__rec(s, 1, &c);
        }
    }
    dts__step_end(s, u);
}

/* ---- steps -------------------------------------------------------------- */

static int dts__is_pipe(const dts_scenario *sc) { return sc->p > 1 || sc->t > 1; }
static int dts__is_ps(const dts_scenario *sc)
{
    return sc->exchange == DTS_EX_PS_SYNC || sc->exchange == DTS_EX_PS_ASYNC;
}

static void dts__step_end(dts__sim *s, dts__unit *u)
{
    if (dts__is_pipe(s->sc)) { /* lib/pipeline.c: the loss and norm allreduce over the world */
        dts__sync_arrive(s, &s->world_sync, u);
        return;
    }
    dts__at(s, dts_engine_now(s->e) + s->sc->cost.step_overhead_ns, dts__step_next, u, 0, 0);
}

static void dts__step_next(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)e;
    (void)a;
    (void)b;
    dts__unit *u = ctx;
    dts__sim *s = u->sim;
    u->step++;
    if (u->step >= s->sc->steps) {
        u->finished = 1;
        return;
    }
    if (dts__is_pipe(s->sc)) dts__pipe_begin_step(s, u);
    else dts__dp_begin_step(s, u);
}

/* ---- setup -------------------------------------------------------------- */

static int64_t dts__mem_ns(const dts_scenario *sc, double bytes)
{
    return dts__ns(bytes / (sc->hw.mem_bytes_per_s * 1e-9));
}

static dt_status dts__setup(dts__sim *s, const dts_scenario *sc, const dts_run_opts *o, double bw_scale)
{
    const int L = sc->model.num_layers, P = dts__is_pipe(sc) ? sc->p : 1;
    s->sc = sc;
    s->keep_all = o && (o->trace_path || o->keep_events);
    s->K = dts__is_ps(sc) ? sc->num_ps_servers : 0;
    s->W = sc->d;
    s->world = dts_scenario_world(sc);
    DT_CHECK(dts_engine_create(&s->e));
    DT_CHECK(dts_net_init(&s->net, s->world, &sc->hw, bw_scale));
    s->fwd_ns = calloc((size_t)P, sizeof *s->fwd_ns);
    s->bwd_ns = calloc((size_t)P, sizeof *s->bwd_ns);
    s->opt_ns = calloc((size_t)P, sizeof *s->opt_ns);
    s->stash_ns = calloc((size_t)P, sizeof *s->stash_ns);
    s->params = calloc((size_t)P, sizeof *s->params);
    s->act = calloc((size_t)P, sizeof *s->act);
    s->tp_blocks = calloc((size_t)P, sizeof *s->tp_blocks);
    s->dp_open = calloc((size_t)P, sizeof *s->dp_open);
    if (!s->fwd_ns || !s->bwd_ns || !s->opt_ns || !s->stash_ns || !s->params || !s->act || !s->tp_blocks || !s->dp_open)
        return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for %d stages", P);
    const int64_t act_msg = (int64_t)sc->B * sc->T * sc->model.hidden_size * 4;
    s->msg_bytes = act_msg;
    s->tp_ar_ns = sc->t > 1 ? dts_net_ring_allreduce_ns(&s->net, 0, 1, sc->t, act_msg) : 0;
    for (int st = 0; st < P; st++) {
        int first = -1, last = L;
        if (P > 1) DT_CHECK(dts_scenario_stage_layers(sc, st, &first, &last));
        double f = 0, b = 0;
        int64_t prm = 0, act = 0;
        int blocks = 0;
        for (int l = first; l <= last; l++) {
            const int slot = l + 1, block = l >= 0 && l < L;
            const int div = block ? sc->t : 1;
            f += (double)sc->cost.fwd_ns[slot] / div;
            b += (double)sc->cost.bwd_ns[slot] / div;
            if (block && sc->recompute == 1) b += (double)sc->cost.fwd_ns[slot] / div;
            prm += sc->cost.params[slot] / div;
            act += sc->cost.act_bytes[slot] / div;
            blocks += block;
        }
        if (sc->t > 1) {
            s->tp_blocks[st] = blocks;
            f += 2.0 * blocks * s->tp_ar_ns;
            b += 2.0 * blocks * s->tp_ar_ns;
        }
        s->fwd_ns[st] = dts__ns(f);
        s->bwd_ns[st] = dts__ns(b);
        s->params[st] = prm;
        s->act[st] = act;
        s->opt_ns[st] = dts__ns((double)prm * sc->cost.optim_ns_per_param) +
                        (sc->t > 1 ? dts_net_ring_allreduce_ns(&s->net, 0, 1, sc->t, 4) : 0);
        s->stash_ns[st] = dts__mem_ns(sc, 2.0 * (double)prm * 4);
    }
    if (dts__is_pipe(sc)) {
        if (o && o->schedule) {
            if (o->schedule->p != sc->p || o->schedule->m != sc->m || o->schedule->steps != sc->steps)
                return DT_FAIL(DT_ERR_INVALID, "dtsim: the given schedule is for p %d, m %d, %d steps; the scenario has "
                                               "p %d, m %d, %lld steps",
                               o->schedule->p, o->schedule->m, o->schedule->steps, sc->p, sc->m, (long long)sc->steps);
            s->sched = (dt_schedule *)o->schedule;
            s->sched_borrowed = 1;
        } else {
            DT_CHECK(dt_schedule_make(sc->schedule, sc->p, sc->m, (int)sc->steps, &s->sched));
        }
        s->n_units = sc->p * sc->d;
    } else {
        s->n_units = sc->d;
    }
    s->u = calloc((size_t)s->n_units, sizeof *s->u);
    if (!s->u) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for %d ranks", s->n_units);
    if (sc->hw.cores_per_node > 0) {
        if (sc->t > 1)
            return DT_FAIL(DT_ERR_UNSUPPORTED, "dtsim: --cores-per-node with --tensor-model-parallel-size %d: not "
                                               "supported (shared cores model pipeline and data-parallel ranks)",
                           sc->t);
        const int dpn = sc->hw.devices_per_node > 0 ? sc->hw.devices_per_node : 1;
        s->n_nodes = (s->world + dpn - 1) / dpn;
        s->job = calloc((size_t)s->n_units, sizeof *s->job);
        s->cpu_active = calloc((size_t)s->n_nodes, sizeof *s->cpu_active);
        s->cpu_last = calloc((size_t)s->n_nodes, sizeof *s->cpu_last);
        if (!s->job || !s->cpu_active || !s->cpu_last)
            return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for %d nodes", s->n_nodes);
    }
    const int states = sc->optimizer_states;
    for (int i = 0; i < s->n_units; i++) {
        dts__unit *u = &s->u[i];
        u->sim = s;
        u->idx = i;
        u->dpi = i % sc->d;
        u->stage = dts__is_pipe(sc) ? i / sc->d : 0;
        u->rank = dts__is_pipe(sc) ? sc->t * i : i;
        u->record = s->keep_all || u->dpi == 0;
        const int64_t prm = s->params[u->stage];
        if (s->K) u->mem_static = prm * 8; /* weights + gradients; the servers keep the optimizer state */
        else if (sc->zero) u->mem_static = prm * 8 + prm * 4 * states / sc->d;
        else u->mem_static = prm * (8 + 4 * (int64_t)states);
        if (s->sched) {
            int na = 0, ng = 0;
            for (int k = 0; k < s->sched->count[u->stage]; k++) {
                na += s->sched->instr[u->stage][k].op == DT_SCHED_RECV_ACT;
                ng += s->sched->instr[u->stage][k].op == DT_SCHED_RECV_GRAD;
            }
            u->act_arr = malloc((size_t)(na + 1) * sizeof *u->act_arr);
            u->grad_arr = malloc((size_t)(ng + 1) * sizeof *u->grad_arr);
            if (!u->act_arr || !u->grad_arr) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for messages");
            for (int k = 0; k <= na; k++) u->act_arr[k] = -1;
            for (int k = 0; k <= ng; k++) u->grad_arr[k] = -1;
        }
        if (s->K) {
            u->pulled = calloc((size_t)s->K, sizeof *u->pulled);
            if (!u->pulled) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
        }
    }
    /* syncs */
    s->world_sync = (dts__sync){.n = s->n_units, .cost = dts_net_ring_allreduce_ns(&s->net, 0, 1, s->world, 8),
                                .kind = DTS__S_WORLD};
    s->world_sync.members = malloc((size_t)s->n_units * sizeof *s->world_sync.members);
    s->loss_sync = (dts__sync){.n = s->n_units, .cost = dts_net_ring_allreduce_ns(&s->net, 0, 1, sc->d, 4),
                               .kind = DTS__S_LOSS, .members = s->world_sync.members};
    if (!s->world_sync.members) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
    for (int i = 0; i < s->n_units; i++) s->world_sync.members[i] = &s->u[i];
    if (dts__is_pipe(sc)) {
        s->norm = calloc((size_t)sc->d, sizeof *s->norm);
        if (!s->norm) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
        for (int d = 0; d < sc->d; d++) {
            s->norm[d] = (dts__sync){.n = sc->p, .kind = DTS__S_NORM,
                                     .cost = dts_net_ring_allreduce_ns(&s->net, sc->t * d, sc->t * sc->d, sc->p, 4)};
            s->norm[d].members = malloc((size_t)sc->p * sizeof *s->norm[d].members);
            if (!s->norm[d].members) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
            for (int st = 0; st < sc->p; st++) s->norm[d].members[st] = dts__unit_at(s, d, st);
        }
    } else if (!s->K && sc->d > 1 && !sc->zero) {
        /* lib/train.c's buckets: layers in backward order, cut at bucket_bytes; one bucket with --fp16/--bf16 */
        s->bucket_bytes = calloc((size_t)L + 2, sizeof *s->bucket_bytes);
        s->bucket_low = calloc((size_t)L + 2, sizeof *s->bucket_low);
        s->bucket_open = calloc((size_t)L + 2, sizeof *s->bucket_open);
        if (!s->bucket_bytes || !s->bucket_low || !s->bucket_open) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
        const int fp32 = !strcmp(sc->precision, "fp32");
        int64_t acc = 0;
        for (int l = L; l >= -1; l--) {
            acc += sc->cost.params[l + 1] * 4;
            if ((fp32 && acc >= sc->bucket_bytes) || l == -1) {
                s->bucket_bytes[s->n_buckets] = acc;
                s->bucket_low[s->n_buckets++] = l;
                acc = 0;
            }
        }
    }
    if (s->K) {
        s->srv = calloc((size_t)s->K, sizeof *s->srv);
        if (!s->srv) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
        /* contiguous runs of whole layers, cut where the running size first reaches k/K of the model */
        const int64_t total = s->params[0];
        int64_t run = 0, prev = 0;
        int k = 0;
        for (int l = -1; l <= L; l++) {
            run += sc->cost.params[l + 1];
            if (k < s->K - 1 && run * s->K >= (int64_t)(k + 1) * total && L - l >= s->K - 1 - k) {
                s->srv[k++].params = run - prev;
                prev = run;
            }
        }
        s->srv[s->K - 1].params += run - prev;
        for (int j = 0; j < s->K; j++) {
            dts__server *v = &s->srv[j];
            v->sim = s;
            v->idx = j;
            v->rank = s->W + j;
            v->record = s->keep_all;
            v->hdr_at = malloc((size_t)s->W * sizeof *v->hdr_at);
            v->noticed = calloc((size_t)s->W, sizeof *v->noticed);
            if (!v->hdr_at || !v->noticed) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
            for (int w = 0; w < s->W; w++) v->hdr_at[w] = -1;
        }
    }
    return DT_OK;
}

static void dts__teardown(dts__sim *s)
{
    free(s->job);
    free(s->cpu_active);
    free(s->cpu_last);
    if (s->u)
        for (int i = 0; i < s->n_units; i++) {
            free(s->u[i].act_arr);
            free(s->u[i].grad_arr);
            free(s->u[i].pulled);
        }
    if (s->norm)
        for (int d = 0; d < s->sc->d; d++) free(s->norm[d].members);
    if (s->srv)
        for (int j = 0; j < s->K; j++) {
            free(s->srv[j].hdr_at);
            free(s->srv[j].noticed);
        }
    if (s->dp_open)
        for (int st = 0; st < (dts__is_pipe(s->sc) ? s->sc->p : 1); st++) dts__cinst_free(s->dp_open[st]);
    if (s->bucket_open)
        for (int b = 0; b < s->n_buckets; b++) dts__cinst_free(s->bucket_open[b]);
    for (int k = 0; k < 2; k++) dts__cinst_free(s->zero_open[k]);
    free(s->norm);
    free(s->srv);
    free(s->world_sync.members);
    free(s->u);
    free(s->fwd_ns);
    free(s->bwd_ns);
    free(s->opt_ns);
    free(s->stash_ns);
    free(s->params);
    free(s->act);
    free(s->tp_blocks);
    free(s->dp_open);
    free(s->bucket_bytes);
    free(s->bucket_low);
    free(s->bucket_open);
    free(s->ev.v);
    if (!s->sched_borrowed) dt_schedule_free(s->sched);
    dts_net_free(&s->net);
    dts_engine_free(s->e);
}

/* ---- numerics ----------------------------------------------------------- */

/* fp16 with a gradient model: the loss scaler's trajectory (sim/amp.c), put
 * on rank 0's timeline at its step ends. */
static dt_status dts__numerics(dts__sim *s, dts_summary *out)
{
    const dts_scenario *sc = s->sc;
    out->final_loss_scale = NAN;
    if (!sc->use_loss_scaling || !sc->grad_trace[0]) return DT_OK;
    dt_trace *t = NULL;
    DT_CHECK(dt_trace_read(sc->grad_trace, &t));
    dts_grad_model gm;
    dt_status st = dts_grad_model_fit(t, sc->grad_trace, &gm);
    dt_trace_free(t);
    DT_CHECK(st);
    dts_amp_result r;
    DT_CHECK(dts_amp_simulate(&gm, &sc->scaler, sc->steps, sc->seed, &r));
    out->skipped_steps = r.skipped;
    out->overflows = r.overflows;
    out->final_loss_scale = r.final_scale;
    for (int64_t i = 0; i < r.steps && i < out->steps; i++) {
        const int64_t at = out->step_end_ns[i];
        dt_trace_event e;
        if (r.trace[i].overflow) {
            dt_trace_event_init(&e, DT_TRACE_INSTANT, "overflow", "optim", 0, DT_LANE_OPTIM, at, 0);
            e.iter = i;
            dt_trace_event_add_arg(&e, "loss_scale", r.trace[i].scale);
            dt_trace_event_add_arg(&e, "layer_slot", r.trace[i].layer);
            dt_trace_event_add_arg(&e, "skipped", r.trace[i].skipped);
            dts__rec(s, 1, &e);
        }
        dt_trace_event_init(&e, DT_TRACE_COUNTER, "loss_scale", "counter", 0, DT_LANE_COMPUTE, at, 0);
        e.value = i + 1 < r.steps ? r.trace[i + 1].scale : r.final_scale;
        dts__rec(s, 1, &e);
    }
    dts_amp_result_free(&r);
    return s->st;
}

/* ---- the run ------------------------------------------------------------ */

static dt_status dts__write_trace(const dts__sim *s, const char *path)
{
    const dts_scenario *sc = s->sc;
    char *cfg = dts_scenario_json(sc);
    if (!cfg) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for the trace's config");
    dt_trace_writer *w = NULL;
    dt_status st = dt_trace_writer_open(path, "dtsim", cfg, &w);
    free(cfg);
    DT_CHECK(st);
    static const char *const lanes[] = {"compute", "comm", "optimizer"};
    for (int r = 0; r < s->world && st == DT_OK; r++) {
        char label[96];
        dt_trace_event e;
        if (dts__is_ps(sc) && r >= s->W)
            snprintf(label, sizeof label, "dtsim rank %d (parameter server %d)", r, r - s->W);
        else if (dts__is_pipe(sc))
            snprintf(label, sizeof label, "dtsim rank %d (t %d, d %d, p %d)", r, r % sc->t, (r / sc->t) % sc->d,
                     r / (sc->t * sc->d));
        else
            snprintf(label, sizeof label, "dtsim rank %d", r);
        dt_trace_event_init(&e, DT_TRACE_METADATA, "process_name", "meta", r, 0, 0, 0);
        snprintf(e.label, sizeof e.label, "%.*s", (int)sizeof e.label - 1, label);
        st = dt_trace_write(w, &e);
        for (int l = 0; l < 3 && st == DT_OK; l++) {
            dt_trace_event_init(&e, DT_TRACE_METADATA, "thread_name", "meta", r, l, 0, 0);
            snprintf(e.label, sizeof e.label, "%s", lanes[l]);
            st = dt_trace_write(w, &e);
        }
    }
    /* a unit's events stand for its t tensor-parallel ranks */
    const int tp = dts__is_pipe(sc) ? sc->t : 1;
    for (size_t i = 0; i < s->ev.n && st == DT_OK; i++)
        for (int k = 0; k < tp && st == DT_OK; k++) {
            dt_trace_event e = s->ev.v[i];
            e.pid += k;
            st = dt_trace_write(w, &e);
        }
    if (st != DT_OK) { /* leave no partial trace */
        dt_trace_writer_abort(w);
        return st;
    }
    return dt_trace_writer_close(w);
}

/* The events a run would take, roughly (every rank's forward and backward
 * per layer and micro-batch, a few per step, and the ring's chunk messages),
 * to refuse up front what would run for hours rather than seem to hang. */
#define DTS__MAX_EVENTS 1e10
static double dts__events_estimate(const dts_scenario *sc)
{
    const double world = dts_scenario_world(sc);
    double per_step = world * ((double)sc->m * (2.0 * sc->model.num_layers + 8) + 16);
    if (sc->d > 1 && sc->chunk_bytes > 0)
        per_step += world * 2.0 * (sc->d - 1) *
                    ceil(4.0 * (double)dts_cost_total_params(&sc->cost) / sc->d / (double)sc->chunk_bytes);
    return per_step * (double)sc->steps;
}

dt_status dts_run(const dts_scenario *sc, const dts_run_opts *opts, dts_summary *out)
{
    memset(out, 0, sizeof *out);
    DT_CHECK(dts_scenario_check(sc));
    if (!sc->have_cost) return DT_FAIL(DT_ERR_INVALID, "dtsim: the scenario has no cost model (a profile or the roofline)");
    const double n_events = dts__events_estimate(sc);
    if (!(n_events <= DTS__MAX_EVENTS))
        return DT_FAIL(DT_ERR_INVALID,
                       "dtsim: the scenario needs about %.3g events (%d ranks, %lld steps of %d micro-batches, %d "
                       "layers), more than the %.0e the simulator runs: fewer --train-iters or --micro-batches, "
                       "fewer ranks, or a larger --allreduce-chunk-bytes",
                       n_events, dts_scenario_world(sc), (long long)sc->steps, sc->m, sc->model.num_layers,
                       DTS__MAX_EVENTS);
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    dts__sim s;
    memset(&s, 0, sizeof s);
    dt_status st = dts__setup(&s, sc, opts, opts && opts->bw_scale > 0 ? opts->bw_scale : 1.0);
    if (st != DT_OK) goto done;
    for (int i = 0; i < s.n_units; i++) {
        dts__unit *u = &s.u[i];
        dts__memory(&s, u);
        if (dts__is_pipe(sc)) dts__pipe_begin_step(&s, u);
        else dts__dp_begin_step(&s, u);
    }
    st = dts_engine_run(s.e);
    if (st == DT_OK) st = s.st;
    if (st != DT_OK) goto done;
    for (int i = 0; i < s.n_units; i++) {
        const dts__unit *u = &s.u[i];
        if (u->finished) continue;
        if (s.sched) {
            const dt_sched_instr *in = &s.sched->instr[u->stage][u->pc < s.sched->count[u->stage] ? u->pc : 0];
            st = DT_FAIL(DT_ERR_INVALID,
                         "dtsim: deadlock: stage %d (rank %d) waits at instruction %d (%s of micro-batch %d) of step %lld "
                         "and nothing can happen any more",
                         u->stage, u->rank, u->pc, dt_sched_op_name(in->op), in->mb, (long long)u->step);
        } else {
            st = DT_FAIL(DT_ERR_INVALID, "dtsim: deadlock: rank %d stopped in step %lld", u->rank, (long long)u->step);
        }
        goto done;
    }
    out->steps = sc->steps;
    out->events = dts_engine_events(s.e);
    out->total_ns = dts_engine_now(s.e);
    out->p = dts__is_pipe(sc) ? sc->p : 1;
    out->n_ranks = s.world;
    out->step_end_ns = calloc((size_t)sc->steps, sizeof *out->step_end_ns);
    out->bubble = calloc((size_t)out->p, sizeof *out->bubble);
    out->bubble_fb = calloc((size_t)out->p, sizeof *out->bubble_fb);
    out->max_stash = calloc((size_t)out->p, sizeof *out->max_stash);
    out->peak_mem = calloc((size_t)s.world, sizeof *out->peak_mem);
    if (!out->step_end_ns || !out->bubble || !out->bubble_fb || !out->max_stash || !out->peak_mem) {
        st = DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for the summary");
        goto done;
    }
    /* rank 0's step ends and phases, as the validation reads real traces */
    for (size_t i = 0; i < s.ev.n; i++) {
        const dt_trace_event *e = &s.ev.v[i];
        if (e->pid != 0 || e->iter == DT_TRACE_NONE || e->iter < 0 || e->iter >= sc->steps) continue;
        const int64_t end = e->ts_ns + (e->ph == DT_TRACE_COMPLETE ? e->dur_ns : 0);
        if (end > out->step_end_ns[e->iter]) out->step_end_ns[e->iter] = end;
    }
    const int skip = sc->steps > 1 ? 1 : 0;
    st = dt_trace_phase_times_events(s.ev.v, s.ev.n, 0, skip, &out->rank0);
    if (st != DT_OK) goto done;
    out->step_ns = out->rank0.step_ns;
    out->bubble_formula = dt_schedule_bubble_formula(out->p, sc->m);
    for (int p = 0; p < out->p; p++) {
        out->bubble[p] = out->bubble_fb[p] = NAN;
        if (!s.sched) continue;
        dt_bubble_stats bs;
        if (dt_bubble_stats_events(s.ev.v, s.ev.n, dts__unit_at(&s, 0, p)->rank, skip, &bs) == DT_OK) {
            out->bubble[p] = bs.mean;
            out->bubble_fb[p] = bs.mean_fb;
            dt_bubble_stats_free(&bs);
        }
        for (int d = 0; d < sc->d; d++)
            if (dts__unit_at(&s, d, p)->stash_max > out->max_stash[p]) out->max_stash[p] = dts__unit_at(&s, d, p)->stash_max;
    }
    for (int i = 0; i < s.n_units; i++)
        for (int k = 0; k < (dts__is_pipe(sc) ? sc->t : 1); k++) out->peak_mem[s.u[i].rank + k] = s.u[i].mem_peak;
    for (int j = 0; j < s.K; j++)
        out->peak_mem[s.srv[j].rank] = s.srv[j].params * (4 + 4 * (int64_t)sc->optimizer_states) +
                                       s.srv[j].params * 4 * (int64_t)s.W;
    const double n_steps = (double)sc->steps;
    out->comm_ns_dp = s.u[0].ns_dp / n_steps;
    out->comm_ns_pp = s.u[0].ns_pp / n_steps;
    out->comm_ns_tp = dts__is_pipe(sc) && sc->t > 1 ? 4.0 * s.tp_blocks[0] * sc->m * s.tp_ar_ns : 0.0;
    out->comm_ns_ps = s.u[0].ns_ps / n_steps;
    out->world_sync_ns = dts__is_pipe(sc) ? (double)s.world_sync.cost : 0.0;
    out->pushes = s.pushes;
    out->staleness_mean = s.pushes ? (double)s.stale_sum / (double)s.pushes : 0.0;
    out->staleness_max = s.stale_max;
    memcpy(out->staleness_hist, s.stale_hist, sizeof out->staleness_hist);
    st = dts__numerics(&s, out);
    if (st != DT_OK) goto done;
    if (opts && opts->trace_path) st = dts__write_trace(&s, opts->trace_path);
    if (st != DT_OK) goto done;
    if (opts && opts->keep_events) {
        out->ev = s.ev.v;
        out->n_ev = s.ev.n;
        s.ev.v = NULL;
    }
done:
    dts__teardown(&s);
    clock_gettime(CLOCK_MONOTONIC, &w1);
    out->wall_seconds = (double)(w1.tv_sec - w0.tv_sec) + 1e-9 * (double)(w1.tv_nsec - w0.tv_nsec);
    if (st != DT_OK) dts_summary_free(out);
    return st;
}

void dts_summary_free(dts_summary *s)
{
    if (!s) return;
    free(s->step_end_ns);
    free(s->bubble);
    free(s->bubble_fb);
    free(s->max_stash);
    free(s->peak_mem);
    free(s->ev);
    memset(s, 0, sizeof *s);
}
