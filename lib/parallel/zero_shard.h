/* zero_shard.h: ZeRO stages 2 and 3 for any layer runner
 * (lib/parallel/zero_shard.c), never installed. The whole GPT
 * (lib/parallel/zero_gpt.c) and a pipeline rank's stages
 * (lib/parallel/stage.c, pipeline.c) shard with it; docs/zero.md.
 *
 * Its owner gives a flat buffer's layout cut into layers: n ranges in
 * ascending order covering [0, numel), range i one layer's tensors (the
 * owner knows which). The sharder cuts the ranges into units (stage 3:
 * every range; stage 2: consecutive ranges from the top, closed once they
 * hold bucket_bytes, as data parallelism's buckets) and shards each unit
 * over the data-parallel group (dt__zero_create_units): the FP32 masters,
 * the optimizer's state and the summed gradients of this rank's segments.
 *
 * The owner's runner hooks call it:
 *   - before a layer computes (stage 3): dt__zs_weights, the buffer that
 *     holds the layer's weights, all-gathered from the segments (rounded
 *     to the compute precision), the next layer's gather started behind
 *     it with prefetch;
 *   - before a layer's parameter gradients: dt__zs_grads_open, the unit's
 *     gradient buffer (zeroed when the layer opens its unit, its highest);
 *   - after them: dt__zs_grads_done, which, when the layer closes its unit
 *     (its lowest), rounds the unit's gradients (mixed precision), ring
 *     reduce-scatters them and adds this rank's segment into the shard.
 * A range kept apart (dt__zs_keep: the tied embedding's matrix of a
 * pipeline's end stages) is added into the owner's accumulator instead
 * and zeroed before the reduce-scatter; the owner sums it over its group
 * and hands this rank's part back with dt__zs_add_whole.
 *
 * Invariants: every rank of dp calls every function but the accessors in
 * the same order (collective); at most one unit's gradient buffer and
 * one layer's gathered weights (two with prefetch) exist; the shard's
 * gradients are the sum over ranks and micro-batches since zero_grad; no
 * collective is in flight between two calls of the owner's passes (a
 * prefetch is waited for inside the pass that needs it). */
#ifndef DT_ZERO_SHARD_H
#define DT_ZERO_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "dt_comm.h"
#include "dt_optim.h"
#include "zero.h"

struct dt__rounder;
typedef struct dt__zs dt__zs;

typedef struct dt__zs_config {
    int stage;                 /* 2 or 3 */
    size_t bucket_bytes;       /* stage 2: close a unit once it holds this many bytes */
    int prefetch;              /* stage 3: gather the next layer on a communication thread */
    dt_dtype precision;        /* what the layers compute in */
    const dt_optim_config *optim;
    const dt_paramset *layout; /* the owner's flat buffer (kept by pointer) */
    int n_ranges;              /* the layers: ascending, covering [0, layout->numel) */
    const size_t *range_off, *range_len;
    const int *range_group; /* (n_ranges) a unit holds ranges of one group (a pipeline rank's chunk); NULL: one */
} dt__zs_config;

/* Communication counted since create, per rank: calls and floats of each
 * kind (a ring collective over n ranks of S floats moves (n-1)/n S per rank). */
typedef struct dt__zs_traffic {
    int64_t gathers, gather_floats;    /* stage 3: a layer's weights before it computes */
    int64_t scatters, scatter_floats;  /* reduce-scatters of a unit's gradients */
    int64_t refreshes, refresh_floats; /* stage 2: all-gathers of the updated weights after a step */
} dt__zs_traffic;

/* Collective over dp. */
dt_status dt__zs_create(const dt__zs_config *c, dt_comm *dp, dt_backend *be, dt__zs **out);
void dt__zs_free(dt__zs *s);
void dt__zs_set_coll(dt__zs *s, const dt_collective_opts *coll);
/* fn(ctx) under the communication thread's lock (its spans are written meanwhile). */
void dt__zs_locked(dt__zs *s, void (*fn)(void *ctx), void *ctx);
/* Keep this rank's shard of the whole initial weights (backend memory,
 * numel floats, read once) as its FP32 masters. */
dt_status dt__zs_take_shard(dt__zs *s, const float *whole);
/* The traffic counted from now (the run's, not the creation's). */
void dt__zs_traffic_reset(dt__zs *s);
/* Between passes: a scratch of the largest unit's floats (the unit
 * gradient buffer, free then). */
float *dt__zs_scratch(dt__zs *s);

/* Stage 3: range i's weights, into a layer buffer: *base holds flat
 * element range_off[i] at [0]. next (-1: none) is gathered behind it with
 * prefetch. Stage 2 has no layer buffers: the owner keeps the whole weights. */
dt_status dt__zs_weights(dt__zs *s, int i, int next, float **base);
/* Range i's weights gathered into buf (range_len[i] floats) and waited
 * for, outside the layer buffers (a buffer the owner keeps longer). */
dt_status dt__zs_gather_range(dt__zs *s, int i, float *buf);
/* With prefetch: start gathering range next (-1: none) unless a layer
 * buffer holds it. */
dt_status dt__zs_prefetch(dt__zs *s, int next);
/* Unit u's weights, all of it, into buf (unit-relative) and waited for:
 * stage 2's refresh of the whole weights, an export. */
dt_status dt__zs_gather_unit(dt__zs *s, int u, float *buf, int refresh);
/* The layer buffers hold nothing any more (the shard changed). */
void dt__zs_forget(dt__zs *s);

/* Before range i's parameter gradients: *base holds flat element
 * *origin at [0] (the unit's buffer). */
dt_status dt__zs_grads_open(dt__zs *s, int i, float **base, size_t *origin);
/* After them (rnd: the owner's rounder under mixed precision, else NULL). */
dt_status dt__zs_grads_done(dt__zs *s, int i, const struct dt__rounder *rnd);
/* The flat range [off, off + n) (inside one range) goes to acc (n floats,
 * added) instead of the reduce-scatter. */
void dt__zs_keep(dt__zs *s, size_t off, size_t n, float *acc);
/* shard += src at the shard's elements of the flat range [off, off + n). */
dt_status dt__zs_add_whole(dt__zs *s, size_t off, size_t n, const float *src);
/* A micro-batch's gradients are in (the next one adds to the shard). */
void dt__zs_accumulated(dt__zs *s);
dt_status dt__zs_zero_grad(dt__zs *s);
/* dt__zero_update of the shard; the layer buffers are forgotten. */
dt_status dt__zs_update(dt__zs *s, const dt__zero_step_args *a, dt__update_result *r);
/* The FP32 masters of every unit gathered into whole (numel floats,
 * backend memory; collective). */
dt_status dt__zs_gather_masters(dt__zs *s, float *whole);

int dt__zs_units(const dt__zs *s);
void dt__zs_unit_range(const dt__zs *s, int u, size_t *off, size_t *len);
int dt__zs_unit_of(const dt__zs *s, int i);
size_t dt__zs_largest_unit(const dt__zs *s);
int dt__zs_stage(const dt__zs *s);
dt__zero *dt__zs_zero(dt__zs *s);
float *dt__zs_grad(dt__zs *s); /* the shard's summed gradients */
/* fn(ctx, g, a, b) for each of this rank's segments: the shard's summed
 * gradients of flat elements [a, b) are at g (a gradient norm's terms). */
dt_status dt__zs_each_segment(dt__zs *s, dt_status (*fn)(void *ctx, const float *g, size_t a, size_t b), void *ctx);
void dt__zs_traffic_of(const dt__zs *s, dt__zs_traffic *t);
/* Bytes: the shard's gradients; the working buffers (one unit's
 * gradients, the layer buffers). */
size_t dt__zs_grad_bytes(const dt__zs *s);
size_t dt__zs_working_bytes(const dt__zs *s);

#endif
