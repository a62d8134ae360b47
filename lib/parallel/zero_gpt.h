/* zero_gpt.h: the GPT under ZeRO stages 2 and 3 (lib/parallel/zero_gpt.c),
 * never installed; the trainer drives it for --zero-stage 2 and 3
 * (lib/train/step_zero.c). Design, data flow and measured bytes:
 * docs/zero.md.
 *
 * The model's flat buffer (lib/model/gpt.c's layout) is cut into units,
 * each sharded over the n data-parallel ranks on its own (dt__zero_create_units):
 *   stage 2: the units are data parallelism's gradient buckets (layers in
 *     backward order, cut at bucket_bytes: lib/train/step_dp.c's buckets,
 *     from dt__gpt_buckets); every rank keeps the whole weights;
 *   stage 3: every layer (embedding, each block, head) is a unit; a rank
 *     keeps only its segment of each, and all-gathers a layer's weights
 *     into one working buffer before the layer's forward and again before
 *     its backward.
 * Each micro-batch's backward writes a unit's parameter gradients into one
 * unit-sized buffer; when the unit's lowest layer is done, the buffer is
 * ring reduce-scattered over the ranks and this rank adds its segment into
 * its shard of the gradients. So no rank holds more than one unit's
 * gradient at a time, and the sums over ranks are data parallelism's
 * bucketed allreduce's, element by element (its reduce-scatter half).
 *
 * The layers run on the layer runner (lib/model/runner.h), as gpt.c's do,
 * in the same activation arena (packed 2-byte stores under --fp16/--bf16,
 * selective or full recomputation): its bind hook points the views at a
 * layer's weights (the gather, again for a block recomputed) and gradient
 * buffer, its done hook reduce-scatters a finished unit. Tied embeddings:
 * the embedding's weights stay gathered (or widened) from its forward
 * through the head's backward, and the head's wte gradient is kept apart
 * until the embedding's backward adds to it, before the embedding's unit
 * is reduce-scattered (dt__zg_weights_tied, dt__zg_grads_open).
 *
 * Prefetch (stage 3, FSDP's forward and backward prefetch): a
 * communication thread runs the collectives in issue order
 * (lib/parallel/zero_queue.c), and the gather of the next layer starts
 * into a second layer buffer before the current layer computes, within a
 * forward or a backward (never across: the update and the trainer's
 * trace writes meet no collective in flight). The same collectives in the
 * same order: the same numbers as without it.
 *
 * Invariants: every rank calls every function but the accessors in the
 * same order (they are collective); after dt__zgpt_update every rank's
 * weights are the same (stage 2: the whole copy; stage 3: the segments
 * form one model); at most one unit's gradient buffer and one layer's
 * gathered weights (two with prefetch) exist at a time. */
#ifndef DT_ZERO_GPT_H
#define DT_ZERO_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "dt_comm.h"
#include "dt_gpt.h"
#include "dt_optim.h"
#include "zero.h"
#include "zero_shard.h"

typedef struct dt__zgpt dt__zgpt;

typedef struct dt__zgpt_config {
    const dt_gpt_config *model; /* vocab_size set */
    int stage;                  /* 2 or 3 */
    dt_dtype precision;         /* DT_F32, DT_F16 or DT_BF16 */
    dt_recompute recompute;     /* none, selective or full */
    int recompute_k;            /* full: blocks per group (1..num_layers) */
    size_t bucket_bytes;        /* stage 2: the gradient buckets (as data parallelism's) */
    int prefetch;               /* stage 3: gather the next layer while one computes (a communication thread) */
    dt_gpt_init init;           /* the initial weights (dt_gpt.h) */
    const dt_optim_config *optim;
} dt__zgpt_config;

/* Per-rank bytes kept between steps, and the working buffers. docs/zero.md
 * gives the formulas the tests hold them to. */
typedef struct dt__zgpt_bytes {
    size_t weights;   /* stage 2: the whole weights (FP32, or 16-bit under mixed precision); stage 3: 0 */
    size_t gradients; /* the shard's summed gradients, FP32 */
    size_t optimizer; /* the shard's FP32 weights (masters) and the optimizer's moments */
    size_t working;   /* one unit's gradient buffer, one layer's FP32 weights, rounding scratch */
} dt__zgpt_bytes;

/* Communication counted since create, per rank (zero_shard.h). */
typedef dt__zs_traffic dt__zgpt_traffic;

/* Collective over dp: the layout, the units, the shard of the initial
 * weights (the whole model is initialised once, then dropped at stage 3),
 * the optimizer over the shard. */
dt_status dt__zgpt_create(const dt__zgpt_config *c, dt_comm *dp, dt_backend *be, dt__zgpt **out);
void dt__zgpt_free(dt__zgpt *z);
struct dt__fp8;
/* FP8 training: the blocks under f (lib/model/fp8.h; NULL: off). */
void dt__zgpt_set_fp8(dt__zgpt *z, struct dt__fp8 *f);
/* The reduce-scatters' and all-gathers' chunking and trace hook (NULL: defaults). */
void dt__zgpt_set_coll(dt__zgpt *z, const dt_collective_opts *coll);
/* Called after each layer's forward ('F'), recomputation ('R') or
 * backward ('B'), as dt_gpt_set_layer_hook's. */
void dt__zgpt_set_layer_hook(dt__zgpt *z, dt_gpt_layer_hook hook, void *ctx);

/* As dt_gpt_forward and dt_gpt_backward; the backward's gradients
 * accumulate into this rank's shard, summed over the ranks (collective). */
dt_status dt__zgpt_forward(dt__zgpt *z, const int32_t *tokens, const int32_t *targets, int B, int T, float *loss);
dt_status dt__zgpt_backward(dt__zgpt *z, float loss_scale);
dt_status dt__zgpt_zero_grad(dt__zgpt *z);
/* The update of the shard (dt__zero_update) and, at stage 2, the whole
 * weights all-gathered unit by unit (none when the step was skipped). */
dt_status dt__zgpt_update(dt__zgpt *z, const dt__zero_step_args *a, dt__update_result *r);
/* After a checkpoint restored the shard's masters: the whole weights again (stage 2; collective). */
dt_status dt__zgpt_restored(dt__zgpt *z);
/* As dt_gpt_position_stats, of the last forward. */
dt_status dt__zgpt_position_stats(dt__zgpt *z, float *losses, uint8_t *correct);

const dt_paramset *dt__zgpt_layout(const dt__zgpt *z);
dt__zero *dt__zgpt_zero(dt__zgpt *z);
size_t dt__zgpt_activation_bytes(const dt__zgpt *z);
size_t dt__zgpt_peak_activation_bytes(const dt__zgpt *z);
void dt__zgpt_bytes_of(const dt__zgpt *z, dt__zgpt_bytes *b);
void dt__zgpt_traffic_of(const dt__zgpt *z, dt__zgpt_traffic *t);
/* The whole model's weights as the model computes with them (rounded
 * under mixed precision), into host memory (numel floats) on every rank.
 * Collective (an all-gather per unit at stage 3). */
dt_status dt__zgpt_weights(dt__zgpt *z, float *host);

#endif
