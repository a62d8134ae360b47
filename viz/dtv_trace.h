/* dtv_trace.h: a trace as the viewer sees it (viz/trace_model.c, and
 * viz/trace_coll.c for the ring index, viz/trace_cp.c for the
 * context-parallel one, viz/trace_fp8.c for FP8 scaling's): the events of one real run or one
 * simulation, indexed for drawing, plus the series the views plot. No SDL
 * here, so it is tested without a display.
 *
 * Loading: a file written by dtsim (every rank in one file), a real run's
 * merged file (dtrain under mpirun: every rank on one clock), a real rank's
 * file, or a real run's name: "run.json" when it does not exist but
 * run.rank0.json does loads run.rank0.json, run.rank1.json, ... Each real
 * rank counts time from its own start, so their clocks are aligned as
 * their merged file would be (dt_trace_align, dt_trace_merge.h): by the
 * clocks in their headers, or, for files written before those, on the end
 * of step 0, which ends with a world allreduce under a pipeline (the
 * ranks leave it together) and with the loss allreduce under data
 * parallelism; without such a step the ranks keep their own clocks (the
 * viewer says so in the status line). Flow events are not drawn.
 *
 * Rows: one per (rank, lane) that has spans, ordered by rank then lane;
 * each row's spans are sorted by start, with the running maximum of their
 * ends, so the spans visible in [t0, t1] are found by binary search.
 *
 * Invariants: every span lies in [t_min, t_max]; rows are non-empty;
 * series are sorted by time. */
#ifndef DTV_TRACE_H
#define DTV_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"
#include "dt_trace.h"
#include "dt_trace_breakdown.h"

#define DTV_MAX_RANKS 4096
#define DTV_MAX_STAGES 1024

/* What a span is, for its colour. */
typedef enum dtv_kind {
    DTV_FORWARD = 0,
    DTV_BACKWARD, /* backward; zero-bubble schedules' backward_b (the input gradient) */
    DTV_WGRAD,    /* zero-bubble schedules' backward_w: the weight gradients, off the critical path */
    DTV_RECOMPUTE,
    DTV_OPTIM,    /* optimizer, optim_step, apply, grad norm */
    DTV_SEND,     /* send_act, send_grad */
    DTV_RECV,     /* recv_act, recv_grad: waiting for data */
    DTV_RS,       /* reduce-scatter and reduce steps */
    DTV_AG,       /* all-gather and broadcast steps */
    DTV_TP,       /* tensor parallelism: tp allreduce f/g, tp vocab allreduce, tp vocab gather */
    DTV_SP_AG,    /* sequence parallelism: tp all-gather (the sequence's rows before a column-parallel GEMM) */
    DTV_SP_RS,    /* sequence parallelism: tp reduce-scatter (after a row-parallel GEMM) */
    DTV_SP_LN,    /* sequence parallelism: tp layernorm grad allreduce */
    DTV_CP_RING,  /* context parallelism, p2p: cp ring step (a key/value block passed on, its attention beside it) */
    DTV_CP_AG,    /* context parallelism, allgather: cp kv all-gather */
    DTV_CP_RS,    /* context parallelism, allgather: cp dkv reduce-scatter */
    DTV_CP_A2A,   /* context parallelism, a2a: cp all-to-all */
    DTV_PUSHPULL, /* parameter server push/pull */
    DTV_SYNC,     /* the ranks agreeing inside an optimizer step: grad norm / overflow / tied embedding allreduce */
    DTV_STASH,    /* stash, drop */
    DTV_EVAL,     /* evaluate */
    DTV_OTHER,
    DTV_N_KINDS
} dtv_kind;

const char *dtv_kind_name(dtv_kind k);
dtv_kind dtv_kind_of(const dt_trace_event *e);

typedef struct dtv_span {
    int64_t t0, t1;
    int ev; /* index into dtv_trace.ev */
    unsigned char kind;
} dtv_span;

typedef struct dtv_row {
    int pid, lane;
    char label[64]; /* "rank 1 compute", "rank 0 (p 1) comm" */
    int n;
    dtv_span *s;      /* (n) sorted by t0 */
    int64_t *max_end; /* (n) max of s[0..i].t1 */
} dtv_row;

/* A value over time (loss scale, memory). */
typedef struct dtv_point {
    int64_t t;
    double v;
    int64_t iter;
    double a, b, c; /* memory: static, activations, stash; loss scale: unused */
} dtv_point;

typedef struct dtv_series {
    int n, cap;
    dtv_point *p;
} dtv_series;

/* An fp16 overflow: where the scale backed off. */
typedef struct dtv_overflow {
    int64_t t, iter;
    double scale; /* the scale that overflowed */
    int layer;    /* trace layer (-1 embedding .. L head); DT_TRACE_NONE unknown */
    int skipped;
} dtv_overflow;

typedef struct dtv_trace {
    char name[512];     /* what was loaded (file or run name) */
    char tool[32];      /* "dtrain" or "dtsim" */
    char *config_json;  /* otherData.config of the first file (owned), or NULL */
    int aligned;        /* real ranks' clocks aligned on step 0 (1), or not needed (dtsim: 1), or left (0) */
    dt_trace_event *ev; /* (n_ev) owned */
    size_t n_ev;
    int64_t t_min, t_max;
    int n_rows;
    dtv_row *rows;
    int n_ranks;
    int pids[DTV_MAX_RANKS];
    char pname[DTV_MAX_RANKS][48]; /* process_name label per rank index */
    /* pipeline */
    int p, m;                      /* stages (1 without), micro-batches per step (from the config; 0 unknown) */
    int stage_pid[DTV_MAX_STAGES]; /* a rank of each stage (the lowest) */
    double bubble[DTV_MAX_STAGES], bubble_fb[DTV_MAX_STAGES]; /* dt_bubble_stats means (NAN: none) */
    int max_versions[DTV_MAX_STAGES]; /* most distinct weight versions in flight per stage (from the events) */
    int chunks;                       /* model chunks per stage: 1 + the largest `chunk` extra (1 without) */
    double formula;                   /* the schedule's ideal bubble (dt_schedule_bubble_ideal_chunks with
                                         `chunks`, F = B = W; the pipedream kinds and an unknown schedule:
                                         (p-1)/(m+p-1), a step's upper bound), NAN when m unknown */
    const char *formula_text;         /* its formula (dt_schedule_bubble_formula_text) */
    int64_t n_steps;                  /* iterations seen */
    /* collectives: the comm-lane step spans of data parallelism, by rank (see dtv_row) */
    int has_ring;
    /* parameter server */
    int64_t stale_hist[16];
    int64_t pushes;
    /* numerics and memory */
    dtv_series loss_scale; /* loss_scale counter of the lowest rank */
    int n_overflow;
    dtv_overflow *overflow;
    dtv_series *memory; /* (n_ranks) memory counters, or activation counters of real runs */
    double mem_max;
    int mem_live; /* real runs: memory holds live_activation_bytes (per layer), else activation_bytes (per step) */
    struct dtv_coll *coll; /* ring and parameter-server index (appended; see the end of this file) */
    /* each rank's step by category (appended for view_breakdown.c): lib's
     * dt_breakdown_all at load, the steps from bd_skip on */
    int bd_skip;             /* 1 when the trace has more than 2 steps (the warm-up left out), else 0 */
    int n_breakdown;         /* ranks with steps */
    dt_breakdown *breakdown; /* (n_breakdown) by pid; NULL when none: bd_why says why */
    char bd_why[200];
    struct dtv_cp *cp;   /* context-parallel index (appended; see the end of this file), NULL without cp exchanges */
    struct dtv_fp8 *fp8; /* FP8 index (appended; see the end of this file), NULL without fp8 events */
} dtv_trace;

/* Load a file or a real run's rank files (see above). Refuses a trace with
 * no spans, or with more than DTV_MAX_RANKS ranks, naming the file. */
dt_status dtv_trace_load(const char *path, dtv_trace *out);
/* From events in memory (a simulation just run); takes ownership of ev. */
dt_status dtv_trace_from_events(dt_trace_event *ev, size_t n, const char *name, const char *tool,
                                const char *config_json, dtv_trace *out);
void dtv_trace_free(dtv_trace *t);

/* The first span index of row r whose end is >= t0 (r->n when none). */
int dtv_row_first(const dtv_row *r, int64_t t0);
/* Of the spans r->s[idx[0..n-1]] (a subset of the row, by start), the
 * index into idx of the last that started by `now` (-1: none). */
int dtv_row_last_started(const dtv_row *r, const int *idx, int n, int64_t now);
/* The rank index of a pid (-1 when absent). */
int dtv_rank_index(const dtv_trace *t, int pid);

/* Helpers of the numerics and memory views (appended; computed on demand,
 * they scan the configuration or the events and change nothing). */
/* A number of the configuration (otherData.config), or dflt when the trace
 * has none, the key is missing or not a number. */
double dtv_trace_config_number(const dtv_trace *t, const char *key, double dflt);
/* A string of the configuration into buf ("" when absent); returns buf. */
const char *dtv_trace_config_string(const dtv_trace *t, const char *key, char *buf, size_t n);
/* L, the transformer blocks (the head is trace layer L): the config's
 * num_layers, else the largest layer seen in the events; -1 unknown. */
int dtv_trace_num_layers(const dtv_trace *t);
/* A trace layer's name: "embedding" (-1), "layer 3", "head" (L), "" (unknown). */
void dtv_layer_name(char *buf, size_t n, int layer, int num_layers);
/* The counter `name` of every rank (out: n_ranks series, sorted by time;
 * free each .p). */
dt_status dtv_trace_counter_series(const dtv_trace *t, const char *name, dtv_series *out);
/* The index of the last point at or before `ns` (-1 when none). */
int dtv_series_at(const dtv_series *s, int64_t ns);

/* ---- Ring and parameter-server index (appended for view_ring.c) ----
 * dtv_coll_index builds t->coll at load time (the end of dtv__index) and
 * dtv_coll_free frees it (dtv_trace_free). Per rank: the spans the ring
 * view animates, found without a scan at draw time. */
enum { DTV_ALGO_NONE = 0, DTV_ALGO_RING, DTV_ALGO_TREE, DTV_ALGO_NAIVE, DTV_ALGO_MPI };
/* Collective step names, in this order: reduce-scatter, all-gather, reduce, broadcast, allreduce. */
enum { DTV_STEP_RS = 0, DTV_STEP_AG, DTV_STEP_REDUCE, DTV_STEP_BCAST, DTV_STEP_ALLREDUCE, DTV_N_STEP_NAMES };
enum { DTV_N_STALE = 16 };    /* staleness histogram: 0..14 and 15+ */
enum { DTV_PUSH_CKPT = 256 }; /* pushes between histogram checkpoints */

typedef struct dtv_coll_rank {
    int row;        /* the row of the spans below: the comm row, or a server's optim row (-1: none) */
    int n;          /* collective steps (ring), push/pull spans (worker) or apply spans (server) */
    int *idx;       /* (n) indices into rows[row].s, by start */
    int64_t *cum;   /* (n + 1) cum[i]: bytes sent by the first i collective steps */
    double buffer;  /* S: gradient bytes this rank allreduces per iteration (0: unknown; see view_ring.c) */
    int steps;      /* 1: has collective steps */
    int worker;     /* 1: has push/pull spans */
    int server;     /* 1: process_name says "parameter server" */
    int slot;       /* place on the view's circle (ring ranks; workers; servers apart), -1 none */
    int first_peer; /* (index building) */
} dtv_coll_rank;

typedef struct dtv_coll {
    int algo;                         /* DTV_ALGO_*: the config's allreduce, else from the steps */
    int n;                            /* ranks with collective steps */
    int group;                        /* ranks per allreduce: data_parallel_size when it divides n, else n */
    int step_base[DTV_N_STEP_NAMES];  /* smallest `step` extra per name (the simulator numbers a whole plan) */
    int step_count[DTV_N_STEP_NAMES]; /* largest - smallest + 1 (0: none) */
    int buffer_from_buckets;          /* 1: every S from bucket launch events */
    dtv_coll_rank *rank;              /* (n_ranks) */
    int n_workers, n_servers;
    size_t n_push; /* push/pull spans by end time */
    int64_t *push_end;
    int *push_stale;
    int64_t (*ckpt)[DTV_N_STALE + 2]; /* before push i*DTV_PUSH_CKPT: histogram, sum, max */
} dtv_coll;

dt_status dtv_coll_index(dtv_trace *t);
void dtv_coll_free(dtv_trace *t);
/* DTV_STEP_* of a step's name, -1 when it is none. */
int dtv_coll_step_name(const char *name);
/* An extra arg of an event (dflt when absent). */
double dtv_coll_extra(const dt_trace_event *e, const char *key, double dflt);
/* The staleness histogram of the pushes ended by `now`, their count, sum and max. */
void dtv_coll_hist_at(const dtv_trace *t, int64_t now, int64_t hist[DTV_N_STALE], int64_t *count, int64_t *sum,
                      int64_t *max);

/* ---- Context-parallel index (appended for view_cp.c; viz/trace_cp.c) ----
 * dtv_cp_index builds t->cp at load time (after dtv_coll_index) when the
 * trace has context-parallel exchanges (cat "cp" on the comm lane:
 * `cp ring step`, `cp kv all-gather`, `cp dkv reduce-scatter`, `cp
 * all-to-all`; docs/trace-format.md), and dtv_cp_free frees it. The view
 * shows one context group: the c ranks base + t*i (i = 0..c-1, rank =
 * t_i + t*(c_i + c*(d_i + d*p_i)), include/dt_grid.h) of the lowest rank
 * with exchanges. c is the config's context_parallel_size (else 1 + the
 * largest `from` or backward `step`, else the ranks with exchanges over t),
 * t its tensor_model_parallel_size (else 1). A ring step's `step` and
 * `from` outside 0..c-1 refuse the trace, naming the event.
 *
 * The ring (p2p, lib/parallel/cp.c): at step s context rank i computes its
 * queries against the key/value block of rank (i - s) mod c while it sends
 * that block on to rank i + 1 and receives the block of rank `from` =
 * (i - s - 1) mod c from rank i - 1; the span runs from the send's posting
 * to the wait's end. The forward has steps 0..c-2 (its step c-1 computes
 * with the last block arrived, without a transfer), the backward 0..c-1
 * (the block travels with the gradient the ranks before added; at step c-1
 * only the gradient, which arrives home). */
enum { DTV_CP_TYPE_P2P = 0, DTV_CP_TYPE_ALLGATHER, DTV_CP_TYPE_A2A };

typedef struct dtv_cp_member {
    int pid;  /* its rank: base + t*i */
    int ri;   /* its rank index (-1: not in the trace) */
    int row;  /* its comm row (-1: no exchanges) */
    int n;    /* its exchanges */
    int *idx; /* (n) indices into rows[row].s, by start */
    int *enc; /* (n) the compute-lane span around it on that rank (index into its compute row's spans; -1 none) */
    int *nth; /* (n) which attention of that span (and pass) it belongs to, from 0 (-1: unknown; a2a) */
    int *of;  /* (n) how many attentions that span has in that pass (0: unknown) */
    int compute_row; /* the rank's compute row (-1: none) */
} dtv_cp_member;

typedef struct dtv_cp {
    int c, t;          /* context and tensor parallel sizes */
    int type;          /* DTV_CP_TYPE_*: the config's cp_comm_type, else from the event names */
    int base;          /* the rank of context rank 0 in the group shown */
    int groups;        /* context groups with exchanges in the trace */
    int num_layers, p; /* the config's (0 unknown) and t->p: an attention count is a block number when p = 1 */
    dtv_cp_member *m;  /* (c) by context rank */
} dtv_cp;

dt_status dtv_cp_index(dtv_trace *t);
void dtv_cp_free(dtv_trace *t);

/* What context rank i of the group shows at playback time `now`: the
 * exchange in progress, or else the last that ended. */
typedef struct dtv_cp_state {
    int x;            /* the exchange shown: index into m[i].idx (-1: none started yet) */
    int active;       /* 1: now is inside it */
    double frac;      /* (now - t0) / (t1 - t0), 1 when ended */
    int kind;         /* DTV_CP_RING, DTV_CP_AG, DTV_CP_RS or DTV_CP_A2A */
    int64_t iter;     /* its iteration */
    int forward;      /* 1: a forward's (or a recomputation's) exchange, 0: a backward's */
    int step, steps;  /* ring: its step and the pass's steps with a transfer (c-1 forward, c backward) */
    int holds;        /* ring: the context rank whose key/value block it computes with (-1: none) */
    int arriving;     /* ring, active: the block on its way to it (`from`), else -1 */
    int grad;         /* ring, active, backward: 1 the block carries its dK/dV, 2 only dK/dV (the last step) */
    int all;          /* allgather: it holds every rank's block (after the all-gather, during the reduce-scatter) */
    int all_arriving; /* allgather / a2a, active: every other rank's block (a2a: rows) is on its way */
    int enc_kind;     /* the dtv_kind of the compute span around it (-1: none) */
    int mb;           /* that span's micro-batch (-1) */
    int nth, of;      /* its attention within that span and pass (see dtv_cp_member) */
    int64_t bytes;
} dtv_cp_state;
void dtv_cp_state_of(const dtv_trace *t, int i, int64_t now, dtv_cp_state *out);
/* What the state says of block j (the key/value block of context rank j;
 * a2a: rank j's rows) at context rank i: held, on its way, or neither. */
enum { DTV_CP_CELL_NONE = 0, DTV_CP_CELL_HELD, DTV_CP_CELL_ARRIVING };
int dtv_cp_cell(const dtv_cp_state *s, int i, int j);

/* ---- FP8 index (appended for view_fp8.c; viz/trace_fp8.c) ----
 * dtv_fp8_index builds t->fp8 at load time (after dtv_cp_index) when the
 * trace has `fp8 <tensor>` events (FP8 training, rank 0, one per tensor
 * and step at the step's end; docs/trace-format.md), and dtv_fp8_free
 * frees it. A count (saturated, flushed, values) that is negative or not
 * finite refuses the trace, naming the event. */
typedef struct dtv_fp8_step {
    int64_t t;        /* the event's time: the end of the step */
    int64_t iter;     /* its iteration (the event's `iter`; without one, its place in the tensor's events) */
    double amax;      /* the step's largest |x|, before scaling (NAN: absent) */
    double scale;     /* delayed scaling: the scale the step used (NAN: absent, as on the first step) */
    double saturated; /* values with |x s| above the format's max */
    double flushed;   /* non-zero values that became 0 */
    double values;    /* values converted */
} dtv_fp8_step;

typedef struct dtv_fp8_tensor {
    char name[DT_TRACE_NAME_MAX];      /* "h.1.fcproj.x": block 1, LIN fcproj, ROLE x (the event's name after "fp8 ") */
    int layer;                         /* the block (the event's `layer`) */
    int tensor;                        /* index in the block, 3 lin + role (-1: absent) */
    int format;                        /* dt_fp8_format of its role under the run's --fp8-format */
    int n;                             /* steps */
    dtv_fp8_step *s;                   /* (n) by iteration */
    double saturated, flushed, values; /* the run's sums */
    int steps_saturated;               /* steps with a saturated value */
} dtv_fp8_tensor;

typedef struct dtv_fp8 {
    int mode;         /* dt_fp8_mode of the config's fp8_format (DT_FP8_OFF: absent, E4M3 assumed) */
    int recipe;       /* dt_fp8_recipe: the config's fp8_recipe, else delayed where events have a `scale` */
    int recipe_known; /* 1: from the config */
    int algo, margin, history_len; /* the config's (history_len 0: unknown) */
    int n;                         /* tensors */
    dtv_fp8_tensor *x;             /* (n) in the model's order: block, then index in the block */
    int *order;                    /* (n) indices into x: most saturated values first (then most saturated
                                      steps, most flushed, the model's order) */
    int dflt;                      /* the tensor shown by default: order[0] */
} dtv_fp8;

dt_status dtv_fp8_index(dtv_trace *t);
void dtv_fp8_free(dtv_trace *t);
/* The index of the tensor called `name` (-1: none). */
int dtv_fp8_find(const dtv_fp8 *f, const char *name);
/* The values step k of tensor x converts without saturating or flushing:
 * lo < |v| <= hi, with lo = min_subnormal / (2 s) and hi = max / s for the
 * step's scale s (delayed: its `scale`; tensorwise, blockwise and a
 * delayed step without `scale` (the first): from its amax,
 * dt_fp8_scale_from_amax with the run's margin, blockwise a power of two).
 * Returns 0 when the step has no scale (no `scale`, no positive finite amax). */
int dtv_fp8_window(const dtv_fp8 *f, const dtv_fp8_tensor *x, int k, double *lo, double *hi);
/* The steps of x whose event was written by `now` (a prefix of x->s). */
int dtv_fp8_steps_by(const dtv_fp8_tensor *x, int64_t now);
/* The sums of x's first `steps` steps. */
typedef struct dtv_fp8_sum {
    double saturated, flushed, values;
    int steps, steps_saturated;
    int worst; /* the step with the most saturated values (-1: none) */
} dtv_fp8_sum;
void dtv_fp8_sums(const dtv_fp8_tensor *x, int steps, dtv_fp8_sum *out);

#endif
