/* run_internal.h: the executor's shared state (sim/run*.c only; the
 * public side is dts_run.h). It holds the simulated ranks ("units"), the
 * collective and sync instances that join them, the parameter servers and
 * the run-wide state, and declares what the executor's files call on one
 * another.
 *
 * The files, each calling only those listed before it:
 *   run_unit.c  scheduling, recording events and memory, compute on a core
 *               of its own or on a node's shared cores
 *   run_coll.c  collective instances (dts_coll) and analytic syncs
 *   run_cp.c    the context group's exchanges of a block's pass and
 *               their prices
 *   run_tp.c    the tensor and context groups' collectives of each pass,
 *               their prices and spans
 *   run_step.c  the step boundary (host overhead, the next step)
 *   run_ps.c    the parameter server and its workers' push/pull
 *   run_dp.c    the data-parallel step (lib/train/step_dp.c)
 *   run_pipe.c  the pipeline step (lib/parallel/pipeline.c)
 *   run.c       setup, the run and its summary
 * A file reaches one listed after it only through a function pointer set
 * at setup (a sync's done, a collective's resume, the sim's begin_step),
 * so no two files call each other directly.
 *
 * Invariants: events are recorded in the order they end, per unit; each
 * unit runs one compute operation at a time; nothing here reads a clock or
 * iterates an unordered container, so a run is deterministic. */
#ifndef DTS_RUN_INTERNAL_H
#define DTS_RUN_INTERNAL_H

#include <math.h>
#include <stdint.h>

#include "dts_coll.h"
#include "dts_engine.h"
#include "dts_net.h"
#include "dts_run.h"

/* ---- events ------------------------------------------------------------- */

typedef struct dts__evbuf {
    dt_trace_event *v;
    size_t n, cap;
} dts__evbuf;

/* ---- units -------------------------------------------------------------- */

enum { DTS__W_NONE = 0, DTS__W_ACT, DTS__W_GRAD };

typedef struct dts__sim dts__sim;

/* Arrival times of the messages from one neighbour stage, by sequence
 * number, in a ring of cap slots: slot seq % cap holds message seq from
 * its arrival until it is received (-1: free). The messages in flight are
 * seq in [received, sent); the ring doubles when they outgrow it, so a
 * unit holds its largest backlog, not every message of the run. */
typedef struct dts__mbox {
    int64_t *t; /* (cap) */
    int cap;
} dts__mbox;

/* What a split backward holds beyond the forward's saved bytes, per
 * micro-batch of a virtual stage: keep from its BACKWARD_B to the end of its
 * BACKWARD_W, the most during BACKWARD_B (keep included), the most during
 * BACKWARD_W on top of keep (run_pipe.c, lib/model/runner_backward.c). */
typedef struct dts__split_mem {
    int64_t keep, b, w;
} dts__split_mem;

/* The tensor and context groups' collectives (run_tp.c, run_cp.c): one,
 * with its trace name and category ("tp" the tensor group's, "cp" the
 * context group's exchanges), its price (what it adds to the pass: the
 * wait for the slowest rank included; a ring step overlapped with the
 * attention only what the attention does not hide), its span's duration
 * in the trace (ns, or for a ring step the attention it overlaps and ns,
 * as the runtime's span holds both), the bytes the rank sends ("cp" only,
 * as the runtime traces them) and whether the runtime traces it as
 * forward, run rep times in a row (a ring's steps: step .. step + rep - 1;
 * step -1 for the others); a pass's, those before its blocks, each
 * block's (run nb times) and those after, in the order it runs them, ns
 * their sum and ns_cp the context group's part of it; the passes of a
 * virtual stage. */
typedef struct dts__tpc {
    const char *name, *cat;
    int64_t ns, span, bytes;
    int fwd, rep, step;
} dts__tpc;

typedef struct dts__tp_pass {
    dts__tpc pre[2], each[16], post[2];
    int n_pre, n_each, n_post, nb;
    int64_t ns, ns_cp, span; /* span: the spans' durations (ns and what the ring steps overlap) */
} dts__tp_pass;

enum { DTS__TP_F = 0, DTS__TP_B, DTS__TP_W, DTS__TP_PASSES }; /* forward, B (input gradient), W */

/* The prices on the tensor group of rank 0 (run_tp.c): an allreduce, an
 * all-gather (or reduce-scatter) of a (B,T,C) FP32 activation, the
 * allreduce of a LayerNorm's 2C gradients, the all-gather of the head's
 * per-row statistics; the expected waits for the slowest rank after a
 * segment of a forward, of B, of W. */
typedef struct dts__tp_price {
    int64_t ar, ag, ln, stats;
    int64_t skew_f, skew_b, skew_w;
} dts__tp_price;

/* Context parallelism's prices on the context group of rank 0 (run_cp.c),
 * per block and micro-batch of one rank (Nl = B T / c rows, C' = C / t):
 * a key/value block's bytes (Nl 2C' FP32) and its trip to the next rank
 * of the ring, a ring step's attention in the forward and in B (the
 * block's attention over t c c: two chunk pairs of the rank's 2c), the
 * all-gather of c blocks (the reduce-scatter of their gradients the
 * same), an all-to-all of a rank's (Nl, 3C') and of its (Nl, C'). */
typedef struct dts__cp_price {
    int64_t kv_bytes, msg, attn_f, attn_b, gather, a2a3, a2a1;
} dts__cp_price;

/* One chunk's messages on a unit: activations into it from the virtual
 * stage before, gradients into it from the one after, and the counts of
 * what it received and sent (the sequence numbers of its links: one link
 * per pair of neighbouring virtual stages and direction). */
typedef struct dts__link {
    dts__mbox act, grad;
    int n_act_recv, n_grad_recv, n_act_sent, n_grad_sent;
} dts__link;

typedef struct dts__unit {
    dts__sim *sim;
    int idx;
    int rank; /* representative world rank (t_i = 0) */
    int stage, dpi;
    int record; /* keep this unit's events */
    /* pipeline */
    int pc, end;
    int64_t step;
    int wait, wait_chunk; /* what a blocked receive waits for: DTS__W_*, and into which chunk */
    int64_t wait_t0;
    dts__link *link; /* (v) per chunk of the device */
    int opt_phase;
    int64_t opt_t0;    /* OPTIM_STEP: when it, or its wait in the gradient-norm allreduce, began */
    int64_t loss_wait; /* pipedream, stage 0: the step whose loss it waits for (-1: none) */
    /* data parallel / parameter server worker */
    int mb, layer, dir; /* dir 0 forward, 1 backward */
    int next_bucket, buckets_ready, buckets_done, comm_busy, bwd_done;
    int zg_have;     /* ZeRO-3: the layer about to run has its weights gathered */
    int zg_wl[2];    /* the layer each layer buffer holds (-2 none; the second with --zero-prefetch), as zero_gpt.c's */
    int zg_cur;      /* the buffer the running layer reads */
    int zg_pf_buf;   /* --zero-prefetch: the buffer of the gather ahead, */
    int zg_pf_state; /* 1 while it is on the wire */
    int zg_wait_pf;  /* the op waits for that gather */
    int64_t zg_rs_pending; /* a reduce-scatter's bytes, queued behind that gather */
    int zg_refresh;        /* ZeRO-2: the unit whose updated weights are being all-gathered */
    int64_t exch_t0;
    int replies;
    int64_t *pulled; /* (K) server versions at this worker's last pull */
    int max_stale;
    /* memory */
    int64_t mem_static, mem_act, mem_stash, mem_peak;
    int stash_now, stash_max;
    /* phase accounting (per run) */
    int64_t ns_dp, ns_pp, ns_tp, ns_ps;
    int finished;
} dts__unit;

/* What a unit resumes with when its part of a collective is done (kind:
 * the instance's DTS__C_*). */
typedef void (*dts__resume_fn)(dts__sim *s, dts__unit *u, int kind);

/* A collective instance with its members' units. */
typedef struct dts__cinst {
    dts__sim *sim;
    dts_coll *c;
    dts__unit **members;
    int n, kind;           /* kind: what to resume when done (DTS__C_*) */
    dts__resume_fn resume; /* called with kind when a member is done */
    int arrived;           /* members that arrived: the instance takes no more once all have */
} dts__cinst;

enum {
    DTS__C_OPT_DP = 0,
    DTS__C_BUCKET,
    DTS__C_ZERO_RS,
    DTS__C_ZERO_AG,
    DTS__C_ZG_RS,
    DTS__C_ZG_AG,
    DTS__C_ZG_REFRESH
};

/* An analytic sync (world loss allreduce, pipeline norm allreduce). */
typedef struct dts__sync {
    int n, arrived;
    int64_t last, cost;
    dts__unit **members;
    void (*done)(dts__sim *s, dts__unit *u); /* each member's, once all have arrived and the cost is paid */
} dts__sync;

/* A parameter server (lib/parallel/ps.c). It waits for pushes by polling: a test of
 * every pending receive, then a sleep of 20 us doubling up to 500 us (each
 * sleep waking sleep_overshoot_ns late), so it notices a message at its
 * first poll after the arrival; each wait call starts the ladder again.
 * A push's gradient (a large message) moves only once the server has
 * posted its receive, after noticing the push's header. */
typedef struct dts__server {
    dts__sim *sim;
    int idx, rank;
    int64_t params; /* elements of its shard */
    int64_t version;
    int state; /* DTS__SV_IDLE (polling since idle_since), _WAKE (a wake is scheduled), _BUSY */
    int64_t idle_since;
    int64_t *hdr_at; /* (W) arrival of worker w's pending push header, -1 none */
    int n_noticed;   /* ps-sync: headers of this step noticed so far */
    int *noticed;    /* (W) ps-sync */
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
    int D;        /* units per stage: the c x d ranks of a (tensor, stage) position (the grid's ZERO group) */
    dt_grid grid; /* the ranks (dts_scenario_grid): a unit is the tensor group of (data, stage) */
    dts__unit *u;
    /* per virtual stage (Q = p*v of them; v = 1: the stages), one rank's share (blocks / t) */
    int V, Q;                     /* chunks per device, virtual stages */
    int *q_dev, *q_chunk;         /* (Q) the device and chunk of each virtual stage */
    int64_t *fwd_ns, *bwd_ns;     /* (Q) FORWARD, BACKWARD */
    int64_t *bwd_b_ns, *bwd_w_ns; /* (Q) BACKWARD_B (input gradient, recomputation, tp allreduces), BACKWARD_W */
    int64_t *act;    /* (Q) activation bytes a micro-batch keeps from its FORWARD to its BACKWARD (or BACKWARD_W) */
    int64_t *act_re;  /* (Q) recomputation: what a backward rebuilds (full: a group), held on top of act */
    int64_t *act_fwd; /* (Q) full recomputation: the most a FORWARD holds beyond act (a group's blocks) */
    dts__split_mem *split; /* (Q) a split backward's B and W: beyond act (dts__split_mem_of) */
    /* per device (p) */
    int64_t *opt_ns, *stash_ns, *params; /* the update, a stash, the parameters of all its chunks */
    /* a pipeline send's bytes on one tensor rank's link (1/t of the tensor when scattered; the rank's rows
     * under sequence parallelism) */
    int64_t msg_bytes;
    int64_t sg_ns;      /* scattered sends: the receiving tensor group's all-gather of the t pieces (0: whole) */
    dts__tp_price tpp;  /* the tensor group's collectives (t > 1) */
    dts__cp_price cpp;  /* the context group's exchanges (c > 1) */
    dts__tp_pass *tp;   /* (Q * DTS__TP_PASSES) each virtual stage's, by pass */
    dts__cinst **dp_open; /* (p) the open data-parallel collective of each stage (pipeline) */
    int *dp_open_seq;
    dts__sync *norm; /* (d) per pipeline */
    dts__sync world_sync;
    /* pipedream (p > 1): no world allreduce at a step's end; the last stage
     * sends each step's loss to stage 0 of its pipeline, which takes step
     * t-1's at the end of step t (lib/parallel/pipeline.c dt__pipe_report_loss) */
    int async_report;
    int64_t *loss_at;     /* (d * steps) arrival at stage 0 of pipeline i of step k's loss, -1: not sent yet */
    dts__sync loss0_sync; /* stage 0's d ranks add their pipelines' losses */
    /* data parallel buckets */
    int n_buckets;
    int64_t *bucket_bytes;
    int *bucket_low;
    dts__cinst **bucket_open; /* (n_buckets) */
    dts__cinst *zero_open[2];
    /* ZeRO-2/3 (lib/parallel/zero_gpt.c): the units, ascending in the flat
     * buffer (stage 2 the buckets, stage 3 the layers); a unit's gradient
     * is reduce-scattered after its lowest layer's backward, every
     * micro-batch; stage 3 all-gathers a layer's weights before its
     * forward and before a block's backward */
    int zg_n;
    int64_t *zg_bytes;      /* (zg_n) FP32 bytes of each unit */
    int64_t *zg_rs_at;      /* (L+2) the bytes reduce-scattered after layer slot's backward, 0 none */
    dts__cinst *zg_open[3]; /* the open reduce-scatter, gather, refresh */
    int64_t zg_static;      /* a rank's bytes of model state and working buffers */
    dts__sync loss_sync;
    /* parameter server */
    int W, K;
    dts__server *srv;
    int64_t pushes, stale_sum;
    int stale_max;
    int64_t stale_hist[16];
    /* cores shared per node (hw.cores_per_node > 0): one job per unit */
    struct dts__job *job; /* (n_units) */
    int *cpu_active;      /* (nodes) ranks computing on the node (t per computing unit) */
    int64_t *cpu_last;    /* (nodes) when their progress was last brought up to date */
    int *node_ranks;      /* (nodes) ranks of the node that compute (t per unit): the ones sharing its cores */
    int n_nodes;
    void (*begin_step)(dts__sim *s, dts__unit *u); /* the shape's step (pipeline or data parallel) */
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

/* Nanoseconds of a computed duration; absurd ones saturate just past the
 * engine's horizon (dts_ns_sat), which refuses them, rather than overflow. */
static inline int64_t dts__ns(double x) { return dts_ns_sat(x); }

/* the runtime's stage path (lib/parallel/pipeline.c) runs pipeline, tensor and context parallelism */
static inline int dts__is_pipe(const dts_scenario *sc) { return sc->p > 1 || sc->t > 1 || sc->c > 1; }
static inline int dts__is_ps(const dts_scenario *sc)
{
    return sc->exchange == DTS_EX_PS_SYNC || sc->exchange == DTS_EX_PS_ASYNC;
}

/* A unit's index dpi = context + c * data (0 .. D-1): the unit of the ZERO
 * group's member dpi at a stage. */
static inline dts__unit *dts__unit_at(dts__sim *s, int dpi, int stage) { return &s->u[dpi + s->D * stage]; }

/* The positions of a sequence a rank holds: T, or T/c under context
 * parallelism (chunks i and 2c-1-i of 2c; dts_scenario_check asks 2c | T).
 * Every per-token tensor of the rank has B times that many rows. */
static inline int64_t dts__Tl(const dts_scenario *sc) { return sc->c > 1 ? sc->T / sc->c : sc->T; }

/* Rows of a per-token tensor of a micro-batch (a block's input, output,
 * residual and LayerNorm statistics, the embedding's output, a pipeline
 * message) on one of t tensor ranks: all B*Tl, or the rank's B*Tl/t under
 * sequence parallelism (lib/parallel/sp.c; dts_scenario_check asks t | Tl). */
static inline int64_t dts__tok_rows(const dts_scenario *sc, int t)
{
    const int64_t BT = (int64_t)sc->B * dts__Tl(sc);
    return t > 1 && sc->sequence_parallel ? BT / t : BT;
}

/* run_pipe.c: the split-backward memory of a virtual stage of nb blocks, the
 * first (embedding) and last (head) or not, on one of t tensor ranks */
dts__split_mem dts__split_mem_of(const dts_scenario *sc, int t, int nb, int first, int last);

/* run_dp.c: activation bytes one of t tensor ranks keeps per micro-batch
 * for one block under `recompute` (0 none, 1 full, 2 selective) */
int64_t dts__block_act(const dts_scenario *sc, int t, int recompute);
/* run_dp.c: full recomputation's groups over nb blocks: block i is the
 * j-th of a group of kg (either may be NULL); returns the group size K */
int dts__rc_group(const dts_scenario *sc, int nb, int i, int *j, int *kg);
int dts__packs(const dts_scenario *sc);
int64_t dts__block_act_packed(const dts_scenario *sc, int t, int recompute, int last);

/* run_unit.c */
void dts__fail(dts__sim *s, dt_status st);
/* The mailbox of the receives (above): init with cap slots (>= 1), free;
 * put message seq (first: the receiver's next) arriving at t, growing the
 * ring as needed (DT_ERR_NOMEM when it cannot); its arrival (-1: not yet);
 * take it (the slot is free again). */
dt_status dts__mbox_init(dts__mbox *b, int cap);
void dts__mbox_free(dts__mbox *b);
dt_status dts__mbox_put(dts__mbox *b, int seq, int first, int64_t t);
int64_t dts__mbox_get(const dts__mbox *b, int seq);
void dts__mbox_take(dts__mbox *b, int seq);
void dts__at(dts__sim *s, int64_t t, dts_fn fn, void *ctx, int64_t a, int64_t b);
void dts__rec(dts__sim *s, int record, const dt_trace_event *e);
void dts__span(dts__sim *s, dts__unit *u, const char *name, const char *cat, int lane, int64_t t0, int64_t t1,
               int64_t iter, int mb, int layer, int64_t bytes);
void dts__memory(dts__sim *s, dts__unit *u);
/* Run `dur` ns of u's compute, then fn(u, a, b): at once on a core of its
 * own, or sharing its node's cores with the node's other computing units. */
void dts__compute(dts__sim *s, dts__unit *u, int64_t dur, dts_fn fn, int64_t a, int64_t b);

/* run_coll.c */
dts__cinst *dts__cinst_new(dts__sim *s, dts_coll_kind kind, dts__unit **members, int n, int64_t bytes, int what,
                           dts__resume_fn resume);
void dts__cinst_free(dts__cinst *ci);
dts_coll_kind dts__ar_kind(const dts_scenario *sc);
void dts__sync_arrive(dts__sim *s, dts__sync *y, dts__unit *u);

/* run_cp.c: the prices (s->cpp) for the scenario; the exchanges a block
 * runs in pass k (DTS__TP_F the forward, DTS__TP_B B; recompute: the
 * attention's forward run again in B) into out (at most 4), their number */
void dts__cp_setup(dts__sim *s);
int dts__cp_block(const dts__sim *s, int k, int recompute, dts__tpc *out);

/* run_tp.c: the prices (s->tpp) for the scenario; virtual stage q's
 * passes (s->tp) for its nb blocks, with the embedding (first) and the
 * head (last); the spans of the passes in the mask `passes` (bit k: pass
 * k) at the end of a compute span [t0, t1] */
void dts__tp_setup(dts__sim *s);
void dts__tp_stage(dts__sim *s, int q, int nb, int first, int last);
void dts__tp_spans(dts__sim *s, dts__unit *u, int q, unsigned passes, int64_t t0, int64_t t1, int64_t iter);

/* run_step.c */
void dts__step_end(dts__sim *s, dts__unit *u);
/* The world sync that ends a pipelined step is done (its dts__sync.done). */
void dts__step_synced(dts__sim *s, dts__unit *u);

/* run_ps.c */
void dts__ps_push(dts__sim *s, dts__unit *u);

/* run_dp.c */
void dts__dp_begin_step(dts__sim *s, dts__unit *u);
/* The loss allreduce is done (the loss sync's dts__sync.done). */
void dts__dp_after_sync(dts__sim *s, dts__unit *u);

/* run_pipe.c */
void dts__pipe_begin_step(dts__sim *s, dts__unit *u);
/* The gradient-norm allreduce over the pipeline is done (the norm syncs' dts__sync.done). */
void dts__pipe_norm_done(dts__sim *s, dts__unit *u);

#endif
