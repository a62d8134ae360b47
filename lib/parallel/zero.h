/* zero.h: ZeRO's sharded optimizer over the data-parallel group
 * (lib/parallel/zero.c), never installed; the trainer drives it for
 * --use-distributed-optimizer (stage 1), and lib/parallel/zero_gpt.c for
 * --zero-stage 2 and 3 through units. Design, data flow and limits:
 * docs/zero.md.
 *
 * Of the n ranks of the data-parallel communicator, rank r owns segment r
 * of the flat parameter buffer, [lo, lo + len) = dt_comm_segment(numel, n,
 * r): exactly the segment the ring reduce-scatter leaves summed on rank r.
 * Its optimizer (a dt_optim over the shard's own layout: the pieces of the
 * model's tensors that fall inside the segment) keeps momentum / Adam
 * moments for those len elements only, so optimizer state per rank falls
 * by n. One step:
 *
 *   reduce-scatter the gradients (ring, in place): segment r summed on r;
 *   dt__update_apply on the shard (params + lo, grads + lo), with the
 *     [overflow, squared norm] pair summed over the group, so clipping and
 *     loss scaling see the whole gradient and every rank skips together;
 *   all-gather the parameters (ring): every rank has the whole new model.
 *
 * In FP32 the parameters stay whole on every rank: they are the model's
 * working weights. Under mixed precision (dt__zero_keep_masters) the FP32
 * masters are sharded as well, and the whole buffer holds their 16-bit
 * values, which the model computes with.
 *
 * Stages 2 and 3 cut the buffer into units (dt__zero_create_units), each
 * sharded on its own, and always keep the shard's FP32 weights here (the
 * masters, also in FP32 training); lib/parallel/zero_shard.c moves the
 * gradients and weights unit by unit and calls dt__zero_update.
 *
 * Invariants: every rank of dp calls create, step and free in the same
 * order (they are collective); the layout's segments cover [0, numel) once;
 * the shard's pieces keep the model tensors' order, decay flags and
 * relative offsets, so each element takes exactly the arithmetic a
 * dt_optim over the whole layout would give it; after a step every rank
 * holds the same parameters. LARS and LAMB take their trust ratios from
 * whole-tensor norms, each piece's squares summed over dp
 * (dt_optim_set_group_norms).
 *
 * Pipeline and tensor parallelism: each stage (tensor shard) has its own
 * flat buffer and its own dt__zero over the stage's data-parallel group,
 * as Megatron-LM shards the optimizer over each model shard's dp group;
 * the step's agree and norm callbacks then reach the other stages. */
#ifndef DT_ZERO_H
#define DT_ZERO_H

#include <stddef.h>
#include <stdint.h>

#include "dt_comm.h"
#include "dt_optim.h"
#include "update.h"

typedef struct dt__zero dt__zero;

typedef struct dt__zero_step_args {
    dt_loss_scaler *scaler; /* NULL: no loss scaling (the same state machine on every rank) */
    float loss_scale;       /* S the gradients carry (with scaler) */
    const dt_lr_schedule *lr;
    int64_t position;               /* updates attempted before this one (the iteration) */
    float clip_grad;                /* <= 0: no clipping */
    const dt_collective_opts *coll; /* chunking and trace hook of the reduce-scatter and all-gather (NULL: defaults) */
    /* The communicator for the few host floats of the step (overflow flag,
     * squared norm, first overflowing tensor): the same ranks as dp in the
     * same order, on host memory. NULL: dp itself, which must then take
     * host memory (self, mpi; not nccl). */
    dt_comm *scalar_comm;
    /* A model spread over more ranks than dp (pipeline stages, tensor
     * shards; lib/parallel/pipeline.c): update.h's agree and norm, which
     * then make the overflow decision and the gradient norm the whole
     * model's, this shard's and the rest of dp's included (norm reads the
     * shard: dt__zero_shard). first_tensor: the model index of the layout's
     * tensor 0, when the layout's tensors are one run of the model's; else
     * tensor_map (layout->count) gives each layout tensor's model index (a
     * pipeline rank's chunks: lib/parallel/pipeline.c's tensor_map) and
     * first_tensor is not read. NULL agree and norm: the model is dp's
     * alone, and the [overflow, squared norm] pair is summed over
     * scalar_comm. */
    dt_status (*agree)(void *ctx, int *overflow, int *first_bad);
    dt_status (*norm)(void *ctx, double *norm);
    void *group_ctx;
    int first_tensor;
    const int *tensor_map;
    int force_overflow; /* update.h's: the step's loss was inf/NaN (with scaler) */
} dt__zero_step_args;

/* Collective over dp. layout is the whole model's, or a stage's (kept by
 * pointer: it must outlive z); optim its optimizer (any kind: LARS and
 * LAMB sum their norms over dp). be holds the state and runs the update. */
dt_status dt__zero_create(dt_comm *dp, dt_backend *be, const dt_paramset *layout, const dt_optim_config *optim,
                          dt__zero **out);
void dt__zero_free(dt__zero *z);
/* The same over n_units consecutive ranges of the flat buffer (covering it
 * in order, none cutting a tensor), each sharded over dp on its own: rank r
 * owns dt_comm_segment(unit_len[u], n, r) of unit u, and its shard is
 * those segments one after the other (stages 2 and 3: the units are
 * gradient buckets or layers). dt__zero_create is one unit, the whole
 * buffer. */
dt_status dt__zero_create_units(dt_comm *dp, dt_backend *be, const dt_paramset *layout, const dt_optim_config *optim,
                                int n_units, const size_t *unit_off, const size_t *unit_len, dt__zero **out);
int dt__zero_units(const dt__zero *z);
/* Unit u's segment on this rank: [*seg_lo, *seg_lo + *seg_len) from the
 * unit's start, at *shard_off in the shard. */
void dt__zero_unit(const dt__zero *z, int u, size_t *seg_lo, size_t *seg_len, size_t *shard_off);
/* The flat-buffer index of shard element i (numel past the shard). */
size_t dt__zero_shard_index(const dt__zero *z, size_t i);
/* Units: keep this rank's shard of the whole initial weights (backend
 * memory, numel floats; read once) as the FP32 masters; compute is the
 * precision the model computes in (dt__zero_unit_weights rounds to it).
 * Not collective. */
dt_status dt__zero_take_shard(dt__zero *z, const float *whole, dt_dtype compute);
/* Units: unit_buf[seg_lo, seg_lo + seg_len) = this rank's segment of unit
 * u's weights in the compute precision (as FP32), for an all-gather of the
 * unit or a copy into the whole weights. */
dt_status dt__zero_unit_weights(dt__zero *z, int u, float *unit_buf);
/* The update alone (stages 2 and 3): params and grads are the shard's
 * (len floats each; params ignored when the shard holds masters), grads
 * summed over dp already; as dt__zero_step's step 2, with the same
 * agreement on overflow, norm and first_bad. Collective. */
dt_status dt__zero_update(dt__zero *z, float *params, float *grads, const dt__zero_step_args *a, dt__update_result *r);

/* One update (collective). params (numel) and grads (numel) are the whole
 * flat buffers in be's memory; grads hold this rank's contribution,
 * pre-weighted so that their sum over ranks is the step's gradient. On
 * return params hold the new weights on every rank (unchanged everywhere
 * when the step was skipped); grads are consumed: segment r holds the
 * summed (unscaled) gradient, the rest partial sums, so zero them before
 * the next accumulation. r as dt__update_apply's, the same on every rank:
 * first_bad is the model index of the first overflowing tensor (backward
 * order) over all shards. */
dt_status dt__zero_step(dt__zero *z, float *params, float *grads, const dt__zero_step_args *a, dt__update_result *r);

/* Mixed precision: keep the segment's FP32 master weights here (copied from
 * params) and from now on hold in params only their values rounded to dtype
 * (F16 or BF16), which is all the model computes with: each step updates
 * the masters and all-gathers the rounded segments. The masters are then
 * sharded too (len floats per rank instead of the whole model's). Collective. */
dt_status dt__zero_keep_masters(dt__zero *z, float *params, dt_dtype dtype);
/* Bytes of master weights this rank holds (0 without dt__zero_keep_masters),
 * and the masters themselves (the segment [lo, lo+len); NULL without). */
size_t dt__zero_master_bytes(const dt__zero *z);
const float *dt__zero_master(const dt__zero *z);
/* This rank's optimizer state in bytes (its segment's share of the whole). */
size_t dt__zero_state_bytes(const dt__zero *z);
/* This rank's segment of the flat buffer: [*lo, *lo + *len) (one unit;
 * with units: *lo 0 and *len the shard's numel). */
void dt__zero_shard(const dt__zero *z, size_t *lo, size_t *len);
/* The shard's own layout (pieces of the model's tensors, offsets from lo). */
const dt_paramset *dt__zero_layout(const dt__zero *z);

/* Checkpoints (lib/train.c): the shard's optimizer, and its FP32 master
 * weights for writing (NULL without dt__zero_keep_masters). */
dt_optim *dt__zero_optimizer(dt__zero *z);
float *dt__zero_master_data(dt__zero *z);
/* After a checkpoint restored this rank's segment (the masters under mixed
 * precision, else params[lo, lo+len)): round it (mixed precision) and
 * all-gather the segments so every rank holds the whole model again.
 * Collective over dp. */
dt_status dt__zero_restored(dt__zero *z, float *params);

#endif
