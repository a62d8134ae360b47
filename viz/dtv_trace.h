/* dtv_trace.h: a trace as the viewer sees it (viz/trace_model.c): the
 * events of one real run or one simulation, indexed for drawing, plus the
 * series the views plot. No SDL here, so it is tested without a display.
 *
 * Loading: a file written by dtsim (every rank in one file), a real rank's
 * file, or a real run's name: "run.json" when it does not exist but
 * run.rank0.json does loads run.rank0.json, run.rank1.json, ... Each real
 * rank counts time from its own start, so their clocks are aligned on the
 * end of step 0, which ends with a world allreduce under a pipeline (the
 * ranks leave it together) and with the loss allreduce under data
 * parallelism; without such a step the ranks keep their own clocks (the
 * viewer says so in the status line).
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

#define DTV_MAX_RANKS 4096
#define DTV_MAX_STAGES 1024

/* What a span is, for its colour. */
typedef enum dtv_kind {
    DTV_FORWARD = 0,
    DTV_BACKWARD,
    DTV_RECOMPUTE,
    DTV_OPTIM,       /* optimizer, optim_step, apply */
    DTV_SEND,        /* send_act, send_grad */
    DTV_RECV,        /* recv_act, recv_grad: waiting for data */
    DTV_RS,          /* reduce-scatter and reduce steps */
    DTV_AG,          /* all-gather and broadcast steps */
    DTV_TP,          /* tp allreduce f/g */
    DTV_PUSHPULL,    /* parameter server push/pull */
    DTV_STASH,       /* stash, drop */
    DTV_EVAL,        /* evaluate */
    DTV_OTHER,
    DTV_N_KINDS
} dtv_kind;

const char *dtv_kind_name(dtv_kind k);
dtv_kind dtv_kind_of(const dt_trace_event *e);

typedef struct dtv_span {
    int64_t t0, t1;
    int ev;          /* index into dtv_trace.ev */
    unsigned char kind;
} dtv_span;

typedef struct dtv_row {
    int pid, lane;
    char label[64];  /* "rank 1 compute", "rank 0 (p 1) comm" */
    int n;
    dtv_span *s;     /* (n) sorted by t0 */
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
    double scale;   /* the scale that overflowed */
    int layer;      /* trace layer (-1 embedding .. L head); DT_TRACE_NONE unknown */
    int skipped;
} dtv_overflow;

typedef struct dtv_trace {
    char name[512];       /* what was loaded (file or run name) */
    char tool[32];        /* "dtrain" or "dtsim" */
    char *config_json;    /* otherData.config of the first file (owned), or NULL */
    int aligned;          /* real ranks' clocks aligned on step 0 (1), or not needed (dtsim: 1), or left (0) */
    dt_trace_event *ev;   /* (n_ev) owned */
    size_t n_ev;
    int64_t t_min, t_max;
    int n_rows;
    dtv_row *rows;
    int n_ranks;
    int pids[DTV_MAX_RANKS];
    char pname[DTV_MAX_RANKS][48]; /* process_name label per rank index */
    /* pipeline */
    int p, m;                       /* stages (1 without), micro-batches per step (from the config; 0 unknown) */
    int stage_pid[DTV_MAX_STAGES];  /* a rank of each stage (the lowest) */
    double bubble[DTV_MAX_STAGES], bubble_fb[DTV_MAX_STAGES]; /* dt_bubble_stats means (NAN: none) */
    int max_versions[DTV_MAX_STAGES]; /* most distinct weight versions in flight per stage (from the events) */
    double formula;                 /* (p-1)/(m+p-1), NAN when m unknown */
    int64_t n_steps;                /* iterations seen */
    /* collectives: the comm-lane step spans of data parallelism, by rank (see dtv_row) */
    int has_ring;
    /* parameter server */
    int64_t stale_hist[16];
    int64_t pushes;
    /* numerics and memory */
    dtv_series loss_scale;          /* loss_scale counter of the lowest rank */
    int n_overflow;
    dtv_overflow *overflow;
    dtv_series *memory;             /* (n_ranks) memory counters, or activation counters of real runs */
    double mem_max;
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
/* The rank index of a pid (-1 when absent). */
int dtv_rank_index(const dtv_trace *t, int pid);

#endif
