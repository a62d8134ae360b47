/* coll_internal.h: the two collective models behind dts_coll.h (sim/coll*.c
 * only). A dts_coll is the header every model's instance starts with: a
 * table of the model's operations; dts_coll_create (sim/coll.c) picks the
 * model from the hardware's "collectives" (dts_hw_coll_analytic) and the
 * front functions of dts_coll.h dispatch through the table, so the
 * executor never asks which model runs.
 *
 *   sim/coll.c           the front, and the message-level model
 *   sim/coll_analytic.c  the analytic model
 *
 * Invariants: both models take the same arguments and call done and the
 * step hook with the same meanings (dts_coll.h); an instance's memory is
 * what dts_coll_bytes says, counted by the model that allocated it. */
#ifndef DTS_COLL_INTERNAL_H
#define DTS_COLL_INTERNAL_H

#include <stddef.h>

#include "dts_coll.h"

typedef struct dts__coll_ops {
    const char *name;                        /* "messages", "analytic" */
    void (*arrive)(dts_coll *c, int member); /* member reaches the collective now */
    void (*free)(dts_coll *c);
    size_t (*bytes)(const dts_coll *c); /* heap bytes the instance holds */
} dts__coll_ops;

/* The first member of every model's instance. */
struct dts_coll {
    const dts__coll_ops *ops;
    int n;      /* members */
    int steps;  /* steps of the algorithm in a member's list (dts_coll_steps) */
    int n_done; /* members done so far */
};

/* What dts_coll_create was given, passed on to the model. */
typedef struct dts__coll_args {
    dts_engine *e;
    dts_net *net;
    dts_coll_kind kind;
    int n;
    const int *ranks;
    int64_t bytes, chunk_bytes;
    dts_coll_done_fn done;
    dts_coll_step_fn step_hook;
    void *ctx;
} dts__coll_args;

/* Shared by both models: the phase names of the step hook, the segment
 * sizes of a ring, the step count of each algorithm, and the chunks per
 * ring segment. */
enum { DTS__PH_RS = 0, DTS__PH_AG, DTS__PH_REDUCE, DTS__PH_BCAST };
extern const char *const dts__coll_phase_names[4];
/* segment s of n near-equal pieces of `bytes`, counted in 4-byte floats
 * (the first count % n are one longer) */
int64_t dts__coll_seg(int64_t bytes, int n, int s);
/* ceil(log2 p) */
int dts__coll_lg(int p);
/* the largest power of two <= n */
int dts__coll_pow2(int n);
int dts__coll_is_ring(dts_coll_kind kind);
/* steps in a member's list: ring 2(n-1) (n-1 for a half), tree 2 lg P + 2,
 * naive n - 1 + lg n, 0 for one member */
int dts__coll_steps(dts_coll_kind kind, int n);
/* chunks each ring segment moves as (1 without chunking or for other kinds) */
int dts__coll_chunks(dts_coll_kind kind, int n, int64_t bytes, int64_t chunk_bytes);

dt_status dts__coll_msg_create(const dts__coll_args *a, dts_coll **out);
dt_status dts__coll_ana_create(const dts__coll_args *a, dts_coll **out);

#endif
