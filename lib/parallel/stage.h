/* stage.h: one pipeline stage of the GPT (lib/parallel/stage.c), never installed:
 * the embedding on the first stage, blocks l0..l1-1, the final LayerNorm,
 * LM head and loss on the last.
 *
 * Its parameters and gradients are one flat buffer laid out like the same
 * tensors of the whole model's buffer, rebased: whole-model element
 * offset(stage) + i is stage element i. So a stage's weights are one range
 * of the whole model's, and it is initialised with the whole model's values
 * (each tensor's RNG stream is seeded by its whole-model index).
 *
 * Several micro-batches may be in flight: each uses a slot, which keeps its
 * input and its saved activations from its forward until its backward.
 * Forward and backward take the weights to use (the stage's own params, or a
 * stashed copy laid out the same way); gradients always accumulate into the
 * stage's gradient buffer.
 *
 * Mixed precision (dt__stage_set_precision) works as in lib/model/gpt.c:
 * every op computes in FP32 and stores its output rounded to the 16-bit
 * format, the GEMMs read the weights rounded, and each micro-batch's
 * parameter gradients are rounded before they accumulate into the FP32
 * gradient buffer; so a stage computes exactly what the same layers of one
 * process compute. Saved activations stay in FP32 buffers (holding 16-bit
 * values): a stage does not halve its activation memory.
 *
 * Recomputation (dt__stage_set_recompute) works as in lib/model/gpt.c, on
 * the stage's own blocks: selective keeps no attention log-sum-exp and
 * recomputes each block's from its kept qkv before its backward; full with
 * K keeps only the output of each group of K of the stage's blocks (K at
 * most its block count) and runs a group's forward again before its
 * backward. The recomputed values are the forward's, bit for bit. A slot's
 * arena holds only what is kept; the transient activations (a group being
 * recomputed, one block's attention lse) live in one work arena of the
 * stage, and the peak counts them.
 *
 * Zero-bubble schedules split a micro-batch's backward into B, the input
 * gradient, and W, the parameter gradients (dt__stage_set_split,
 * dt__stage_backward_b and _w; lib/model/runner_backward.c): between the two the slot
 * keeps the gradient at each layer's output, and under full recomputation
 * the recomputed activations, for W. B then W gives the whole backward's
 * gradients bit for bit (tests/check_bw.c). */
#ifndef DT_STAGE_H
#define DT_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "dt_backend.h"
#include "dt_gpt.h"
#include "dt_tensor.h"

typedef struct dt__stage dt__stage;

/* dt__stage_split, the blocks of each stage: dt_rules.h (the simulator uses it). */
#include "dt_rules.h"

/* cfg: the whole model (vocab_size set); slots >= 1; B, T: micro-batch
 * shape; tp: tensor parallelism of the blocks (lib/parallel/tp.h; not owned), or
 * NULL. With t > 1 the blocks hold this rank's shards (the embedding, final
 * LayerNorm and LM head stay whole: replicated), and the layout is no
 * longer a range of the whole model's (dt__stage_offset means nothing). */
/* cp: context parallelism (lib/parallel/cp.h; not owned), or NULL: the
 * stage holds the rank's chunks of each sequence (T is the whole
 * sequence's) and its attention runs through cp's exchange. */
struct dt__tp;
struct dt__cp;
dt_status dt__stage_create(const dt_gpt_config *cfg, dt_backend *be, int l0, int l1, int first, int last, int slots,
                           int B, int T, struct dt__tp *tp, struct dt__cp *cp, dt__stage **out);
/* This rank's terms of the weights fingerprint (dt__probe_u): its tensors'
 * elements weighted by their indexes in the whole model's buffer; the
 * replicated tensors counted by tensor rank 0 only, so the sum over the
 * stages and the tensor ranks is the whole model's fingerprint. */
dt_status dt__stage_probe(dt__stage *st, double *out);
/* The same of other weights in the stage's layout (backend memory): the
 * FP32 masters when a ZeRO-1 optimizer holds them (lib/parallel/pipeline.c). */
dt_status dt__stage_probe_of(dt__stage *st, const float *weights, double *out);
/* Squared gradient norm of the elements [lo, hi) of the flat buffer (0,
 * numel: the stage's; a ZeRO-1 segment), split into the tensors this rank
 * holds a shard of (sum them over the tensor-parallel group) and the
 * replicated ones (the same on every rank of the group). */
dt_status dt__stage_grad_sumsq(dt__stage *st, size_t lo, size_t hi, double *sharded, double *replicated);
/* The same of gradients g holding the stage's elements [lo, hi) (a ZeRO
 * shard's segment). */
dt_status dt__stage_grad_sumsq_of(dt__stage *st, const float *g, size_t lo, size_t hi, double *sharded,
                                  double *replicated);
/* The stage's layers (the embedding on the first, its blocks, the head on
 * the last), each one range of its layout: count, and layer k's range. */
int dt__stage_layer_count(const dt__stage *st);
void dt__stage_layer_range(const dt__stage *st, int k, size_t *off, size_t *len);
/* ZeRO-2/3 (lib/parallel/zero_shard.h): the stage's layers are the
 * sharder's ranges first.. on, its element 0 the sharder's flat element
 * origin. From then on the stage has no gradient buffer (each layer's
 * gradients go to its unit's buffer, reduce-scattered into the shard) and
 * at stage 3 no weights (each layer's are gathered before it computes; a
 * forward or backward's w is then not read). After dt__stage_set_precision;
 * not undone. */
struct dt__zs;
dt_status dt__stage_set_sharder(dt__stage *st, struct dt__zs *zs, int first, size_t origin);
void dt__stage_free(dt__stage *st);
/* Any weights a forward or backward may be given (the stage's params, a
 * stash) were written: under mixed precision their rounded copy is made
 * again at the next call. The pipeline calls it after every update and
 * stash and at the start of every step and evaluation (which covers
 * checkpoint loads and ZeRO's gathers between steps). */
void dt__stage_weights_changed(dt__stage *st);
dt_status dt__stage_init_weights(dt__stage *st, const dt_gpt_init *init);

const dt_paramset *dt__stage_layout(const dt__stage *st);
float *dt__stage_params(dt__stage *st); /* (numel) backend memory */
float *dt__stage_grads(dt__stage *st);
size_t dt__stage_offset(const dt__stage *st); /* of element 0 in the whole model's buffer */
/* The whole model's layout (names and shapes). */
const dt_paramset *dt__stage_whole_layout(const dt__stage *st);
/* (layout.count) each tensor's index in the whole model's layout: first
 * tensor + i, except the tied copy (index 0, wte). */
const int *dt__stage_whole_index(const dt__stage *st);
/* Tied embeddings (cfg.tie_embeddings) on a pipeline of more than one
 * stage: the first stage holds wte and the last a copy of it as its LM
 * head ("lm_head.w", the last tensor of its layout, initialised as wte);
 * the pipeline sums the two gradients before each update so the copies
 * stay equal. 1 on the last stage of such a pipeline. */
int dt__stage_has_tied_copy(const dt__stage *st);
/* Where the tied matrix lies in the stage's params and grads (wte on the
 * first stage, the copy on the last): offset and numel, 0 and 0 where
 * there is none to sum. */
void dt__stage_tied_range(const dt__stage *st, size_t *offset, size_t *n);
dt_status dt__stage_zero_grad(dt__stage *st);
/* Keep the parameters and gradients in the caller's backend memory
 * (layout.numel floats each, not owned; the current values are copied
 * there): a pipeline rank's model chunks share one flat buffer. */
dt_status dt__stage_bind_buffers(dt__stage *st, float *params, float *grads);
/* DT_F32 (the default), DT_F16 or DT_BF16; no micro-batch may be in flight. */
dt_status dt__stage_set_precision(dt__stage *st, dt_dtype dtype);
struct dt__fp8;
/* FP8 training: the stage's blocks under f (lib/model/fp8.h; NULL: off). */
void dt__stage_set_fp8(dt__stage *st, struct dt__fp8 *f);
/* DT_RECOMPUTE_NONE (the default), _SELECTIVE, or _FULL with num_layers
 * blocks per group; reallocates the slots, so no micro-batch may be in flight. */
dt_status dt__stage_set_recompute(dt__stage *st, dt_recompute mode, int num_layers);
/* Called after each recomputation inside a backward (a block's forward run
 * again under full recomputation, its attention log-sum-exp under
 * selective) with the block's whole-model index and its start and end
 * (dt_time_ns); fn NULL: none. */
typedef void (*dt__stage_recompute_fn)(void *ctx, int layer, int64_t t0_ns, int64_t t1_ns);
void dt__stage_set_recompute_hook(dt__stage *st, dt__stage_recompute_fn fn, void *ctx);

/* Where a slot's input activation (B,T,C) goes, for stages after the first. */
float *dt__stage_input(dt__stage *st, int slot);
/* Where the gradient of the stage's output (B,T,C) goes before a backward
 * (stages before the last). */
float *dt__stage_dout(dt__stage *st);

/* Forward of a micro-batch in slot with weights w (NULL: the stage's own).
 * The first stage reads tokens (host, B*T), the others their slot's input.
 * The last stage, given targets (host, B*T; -1 not counted), returns the
 * mean loss over counted targets and their count; the others return their
 * output (B,T,C) in *out, valid until the slot's backward. */
dt_status dt__stage_forward(dt__stage *st, int slot, const float *w, const int32_t *tokens, const int32_t *targets,
                            const float **out, float *loss, int *n_counted);
/* dt__stage_forward with the stage's own weights (FP32: the failure path
 * of a non-finite step, lib/parallel/pipeline.c), also looking at each
 * layer's output in order: *pos is the first holding a NaN or inf, in
 * whole-model layer positions (0 the embedding, 1 + l block l, num_layers
 * + 1 the head's logits or losses), or -1. The slot is busy after it, as
 * after a forward (dt__stage_release frees it). */
dt_status dt__stage_forward_check(dt__stage *st, int slot, const int32_t *tokens, const int32_t *targets,
                                  const float **out, int *pos);
/* Backward of the micro-batch in slot with weights w. The last stage starts
 * from its loss with per-target gradient dloss; the others from
 * dt__stage_dout. *dx (stages after the first) is the gradient of the
 * slot's input, valid until the next backward (or B). Frees the slot. It
 * is B then W at once (lib/model/runner_backward.c). */
dt_status dt__stage_backward(dt__stage *st, int slot, const float *w, float dloss, const float **dx);
/* The zero-bubble split of the backward (gpt_layers.h, arXiv 2401.10241):
 * on = 1 sizes the slots to keep what W needs from B until W (counted in
 * the activation accounting; lib/model/runner_backward.c says how much); no
 * micro-batch may be in flight. */
dt_status dt__stage_set_split(dt__stage *st, int on);
/* B of the micro-batch in slot: as dt__stage_backward (dloss, *dx) but no
 * parameter gradient; the slot stays busy until its W. */
dt_status dt__stage_backward_b(dt__stage *st, int slot, const float *w, float dloss, const float **dx);
/* W of the micro-batch in slot, after its B: its parameter gradients
 * accumulate, exactly as dt__stage_backward's would; frees the slot. Run
 * the W of several micro-batches in their order to accumulate as whole
 * backwards in that order do. */
dt_status dt__stage_backward_w(dt__stage *st, int slot, const float *w);
/* The output (B,T,C) of the busy slot (stages before the last). */
dt_status dt__stage_output(dt__stage *st, int slot, const float **out);
/* The gradient of the input left by the last backward (stages after the first). */
const float *dt__stage_dres(const dt__stage *st);
/* Free a slot after a forward that has no backward (evaluation). */
dt_status dt__stage_release(dt__stage *st, int slot);
/* Last stage, after a forward with targets: per-position losses and
 * argmax == target flags (host, B*T each; either may be NULL). */
dt_status dt__stage_position_stats(dt__stage *st, int slot, float *losses, uint8_t *correct);

/* Saved activation bytes now in use over all slots, and the most so far. */
size_t dt__stage_activation_bytes(const dt__stage *st);
/* Bytes the stage holds beside the flat buffers it is given: the weights
 * it computes with under mixed precision (rounded, FP32 and 16-bit), one
 * micro-batch's gradients (mixed precision, unsharded), and working
 * buffers (a sharded stage's tied pair, the rounding scratch). */
void dt__stage_bytes(const dt__stage *st, size_t *compute, size_t *mb_grads, size_t *working);
size_t dt__stage_peak_activation_bytes(const dt__stage *st);
/* The peak starts again from what is in use now (a caller that adds
 * several stages' figures measures each op's own peak). */
void dt__stage_reset_peak(dt__stage *st);

#endif
