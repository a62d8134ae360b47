/* update.h: one optimizer update of a flat parameter buffer or of a shard
 * of it (lib/optim/update.c), never installed. The trainer applies it to the whole
 * model; a parameter server (lib/parallel/ps.c) applies it to its shard and sums the
 * overflow flag and the squared gradient norm over the servers through
 * `reduce`; a pipeline stage or tensor-parallel rank makes them the whole
 * model's through `agree` and `norm`; so all follow exactly one rule:
 *
 *   loss scaling: unscale by 1/S tensor by tensor, noting the first tensor
 *     in backward order with an inf/NaN (a non-finite loss, force_overflow,
 *     is an overflow too); the scaler decides skip or not;
 *   norm = ||g|| (or the caller's given_norm); clip = min(1, max/(norm+1e-6));
 *   lr = schedule(position - steps skipped before this one);
 *   optimizer step with grad_scale = clip, unless skipped.
 *
 * With a->amax (tracing only) the unscaled gradients are also read back,
 * never written, to record each tensor's max |g|.
 *
 * The unscaling, the overflow flags and (when the norm is the layout's own)
 * the sums of squares are one span_stats call: one wait for a GPU a step.
 *
 * Invariants: grads are unscaled in place (when loss scaling) and otherwise
 * untouched; params change only when the step is not skipped. */
#ifndef DT_UPDATE_H
#define DT_UPDATE_H

#include <stdint.h>

#include "dt_loss_scaler.h"
#include "dt_optim.h"

/* Sums v(n) over every owner of a shard, in place (NULL: one owner). */
typedef dt_status (*dt__update_reduce)(void *ctx, float *v, int n);

typedef struct dt__update_args {
    dt_backend *be;
    const dt_paramset *layout; /* of params/grads (a shard's own layout on a server) */
    float *params, *grads;
    dt_optim *opt;
    dt_loss_scaler *scaler; /* NULL: no loss scaling */
    float loss_scale;       /* S the gradients carry (with scaler) */
    const dt_lr_schedule *lr;
    int64_t position;  /* updates attempted before this one (the iteration) */
    float clip_grad;   /* <= 0: no clipping */
    double given_norm; /* >= 0: the gradient norm, already known (the layout's own otherwise) */
    int first_tensor;  /* index of layout tensor 0 in the whole model (reported in first_bad) */
    /* NULL, or (layout->count): layout tensor i is tensor first_tensor +
     * tensor_map[i] of the whole model (a ZeRO shard's pieces, lib/parallel/zero.c) */
    const int *tensor_map;
    dt__update_reduce reduce;
    void *reduce_ctx;
    /* A model whose tensors are spread over ranks that update together
     * (pipeline stages, tensor-parallel shards; lib/parallel/pipeline.c).
     * agree (with loss scaling): after unscaling, makes this rank's
     * overflow flag and first overflowing tensor (whole-model index, -1
     * none) the whole model's on every rank: any overflow, and the first in
     * backward order (the highest index). norm (without an overflow): the
     * whole model's gradient norm, from the unscaled gradients; it replaces
     * given_norm and the layout's own. NULL: not spread. */
    dt_status (*agree)(void *ctx, int *overflow, int *first_bad);
    dt_status (*norm)(void *ctx, double *norm);
    void *group_ctx;
    /* NULL (normal), or (layout->count) floats: with loss scaling, each
     * tensor's max |g| after unscaling (the unscaled gradient's amax), or
     * -1 for a tensor holding an inf/NaN. Computed on the host, read-only,
     * so the update is unchanged; the trainer passes it only when writing a
     * trace (the grad_amax events of docs/trace-format.md). */
    float *amax;
    /* 1: a non-finite gradient norm is not an error: the result says so
     * (nonfinite) and nothing is updated, for the caller to report (the
     * trainer names the first bad layer). */
    int allow_nonfinite;
    /* 1 (with loss scaling): the step's loss was inf/NaN, an overflow
     * whatever the gradients hold (before agree and reduce, so every rank
     * that shares the step skips it). */
    int force_overflow;
} dt__update_args;

typedef struct dt__update_result {
    int skipped;             /* overflow: no update applied */
    int first_bad;           /* model index of the first overflowing tensor (backward order), or -1 */
    double norm;             /* gradient norm (0 when skipped) */
    float clip;              /* clip factor applied */
    float lr;                /* learning rate of this update */
    dt_loss_scaler_event ev; /* zeroed without loss scaling */
    int nonfinite;           /* allow_nonfinite: the norm (in norm) was NaN/inf, no update applied */
} dt__update_result;

dt_status dt__update_apply(const dt__update_args *a, dt__update_result *r);

/* The tensors of layout as spans of its flat buffer, for the backend's
 * span_stats: *out (layout->count, malloc'd; the caller frees it). */
dt_status dt__layout_spans(const dt_paramset *layout, dt_span **out);

#endif
