/* runner.h: the one loop over the GPT's layers (lib/model/runner.c and
 * runner_backward.c), never installed. The whole model (gpt.c), a
 * pipeline stage (lib/parallel/stage.c) and the ZeRO-2/3 model
 * (lib/parallel/zero_gpt.c) run their layers through it.
 *
 * A runner runs blocks l0..l1-1 of the model, with the embedding before
 * them (first) and the final LayerNorm, LM head and loss after them
 * (last), forward and backward, the backward whole or split into B and W
 * (gpt_layers.h's zero-bubble split). It owns the activations: recompute
 * (none, selective, full in groups of K blocks) and the 16-bit packing of
 * saved tensors live here and in block.c only. Its owner says three
 * things, and nothing else differs between the three models:
 *   - the weights and gradients of layer l: views the owner fills
 *     (dt__runner_w, dt__runner_g), once (a flat buffer) or per layer from
 *     the bind hook (a ZeRO-3 gather, a ZeRO-2 unit's gradient buffer);
 *   - what follows layer l's backward: the done hook (a ZeRO
 *     reduce-scatter), called once its parameter gradients are complete;
 *   - which block runs: a dt__block_ops table (block.c's plain block, or
 *     lib/parallel/tp.c's tensor-parallel shard), with its context.
 *
 * Layers in hooks are whole-model positions: -1 the embedding, 0..L-1 the
 * blocks, L the head.
 *
 * Memory: several micro-batches may be in flight, one per slot; a slot
 * keeps its input, tokens, targets and saved activations from its forward
 * until its backward (its W when split). Two disciplines:
 *   - shared (one slot, a whole model): one arena holds the saved and the
 *     transient activations; a backward releases each layer's as it goes,
 *     so the peak is lib/model/gpt.c's formula (dt__runner_shared_floats);
 *   - stage (a pipeline stage): each slot's arena holds what it keeps, one
 *     work arena the transients of the op running (a group recomputed,
 *     one block's attention lse or FP32 working set); the peak counts the
 *     busy slots, the growing one and the work arena.
 * Invariant: a slot is busy (_FORWARD or _B) from its forward until its
 * backward (its W when split). */
#ifndef DT_RUNNER_H
#define DT_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include "gpt_layers.h"

/* ---- the block's ops: a plain block or a tensor-parallel shard ---------- */
typedef struct dt__block_ops {
    /* floats of extra backward scratch the ops want (xs below); NULL: none */
    size_t (*scratch_floats)(const dt_gpt_config *cfg, int t, int B, int T);
    dt_status (*forward)(void *ctx, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                         dt__block_acts *a, const float *x, int B, int T, const dt__rounder *r);
    /* B (gpt_layers.h): dres in/out, what W needs into k */
    dt_status (*backward_b)(void *ctx, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                            const dt__block_acts *a, const dt__block_scratch *s, float *xs, const float *x,
                            float *dres, const dt__block_keep *k, int B, int T, const dt__rounder *r);
    /* W (gpt_layers.h): the parameter gradients from acts, x and k; NULL:
     * block.c's dt__block_backward_w with the runner's t */
    dt_status (*backward_w)(void *ctx, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                            const dt__block_params *g, const dt__block_acts *a, const float *x,
                            const dt__block_keep *k, int B, int T, const dt__rounder *r);
    /* the keep of a backward that runs W at once, in s or xs (its gelu NULL) */
    dt__block_keep (*whole_keep)(const dt_gpt_config *cfg, int t, int B, int T, const dt__block_scratch *s,
                                 float *xs);
} dt__block_ops;

/* block.c's whole block (t = 1). */
extern const dt__block_ops dt__block_ops_plain;

/* ---- views of the weights and gradients ---------------------------------- */
typedef struct dt__runner_views {
    float *wte, *wpe;         /* (V,C), (maxT,C) first */
    dt__block_params *blocks; /* (nb) */
    dt__head_params head;     /* last */
} dt__runner_views;

/* Point v's fields for one layer (-1 the embedding, 0..L-1 block, L the
 * head; v->blocks[0] is block l0's) at its n tensors info[0..n), in the
 * layer table's order (gpt_layers.h), in a buffer whose element 0 is
 * element origin of their layout. A head of two tensors (tied
 * embeddings) multiplies by v->wte. */
void dt__runner_views_bind(dt__runner_views *v, const dt_gpt_config *cfg, int l0, int layer, const dt_param_info *info,
                           int n, float *base, size_t origin);

/* ---- hooks ------------------------------------------------------------- */
typedef struct dt__runner_hooks {
    /* Before layer's forward ('F'), its forward again under full
     * recomputation ('R'), its whole backward ('B') or its split B ('b'),
     * each before any recomputation of its attention, or its W ('W'): may
     * point the views at the layer's weights (and, 'B'/'W', the gradients
     * it writes; a split B writes none). NULL: the views stay. */
    dt_status (*bind)(void *ctx, int layer, char pass);
    /* After layer's parameter gradients are complete (its whole backward,
     * or its W). NULL: nothing. */
    dt_status (*done)(void *ctx, int layer);
    /* The span of layer's work that began at t0 (dt_time_ns): 'F'
     * forward, 'R' recomputation, 'B' backward, 'b' and 'W' its B and W
     * (dt__runner_set_trace_split); called after the layer's memory is
     * released, so the owner's accounting shows what is still held. NULL: none. */
    void (*span)(void *ctx, int layer, char pass, int64_t t0);
} dt__runner_hooks;

typedef struct dt__runner_config {
    const dt_gpt_config *cfg; /* the whole model */
    dt_backend *be;
    int l0, l1;       /* blocks l0..l1-1 (l1 > l0, or both 0 for none) */
    int first, last;  /* the embedding before, the head after */
    int slots;        /* micro-batches in flight, >= 1 (1 when shared) */
    int B, T;         /* the largest micro-batch */
    int shared;       /* the shared memory discipline (see the top) */
    int t;            /* the block shard: 1 whole, else a tensor-parallel rank's */
    /* sequence parallelism (t > 1, t dividing every micro-batch's B*T):
     * the per-token regions hold the rank's rows (gpt_layers.h's
     * dt__shard): the range's input and output, dres, the blocks'
     * residuals and statistics; the ops must be lib/parallel/sp.c's */
    int sp;
    /* context parallelism (lib/parallel/cp.c): this rank's chunks of each
     * sequence (gpt_layers.h's dt__cpos; {0, 0} or c 1: the whole). T
     * above is the whole sequence's, a multiple of 2c; the forward takes
     * whole sequences and keeps the rank's rows. attn: the exchange the
     * blocks' attention runs through (copied), needed with c > 1. */
    dt__cpos cp;
    const dt__attn *attn;
    const dt__block_ops *ops; /* NULL: dt__block_ops_plain */
    void *ops_ctx;
    /* the embedding's and the head's rows of the vocabulary on this
     * tensor-parallel rank (gpt_layers.h; copied), or NULL: whole */
    const dt__vocab *vocab;
    /* the settings to start with (dt__runner_set_precision and
     * _set_recompute change them later; zeros: FP32, none) */
    dt_dtype precision;
    size_t round_min;
    dt_recompute recompute;
    int recompute_k;
} dt__runner_config;

/* The whole model on one runner in the shared discipline (gpt.c, the
 * ZeRO-2/3 model): every layer, one slot, whole blocks, micro-batches up
 * to (B, T), starting in precision with round_min and recompute (K). */
dt__runner_config dt__runner_whole(const dt_gpt_config *cfg, dt_backend *be, int B, int T, dt_dtype precision,
                                   size_t round_min, dt_recompute recompute, int recompute_k);

typedef struct dt__runner dt__runner;

dt_status dt__runner_create(const dt__runner_config *c, dt__runner **out);
void dt__runner_free(dt__runner *r);
void dt__runner_set_hooks(dt__runner *r, const dt__runner_hooks *h, void *ctx);
/* DT_F32, DT_F16 or DT_BF16: the storage rounding and, without full
 * recomputation, the packing; the rounding scratch holds round_min
 * elements at least (the owner's gradient rounding). No slot may be busy. */
dt_status dt__runner_set_precision(dt__runner *r, dt_dtype dtype, size_t round_min);
/* none, selective, or full with num_layers blocks per group (at most the
 * runner's count; the caller checks the range); no slot may be busy. */
dt_status dt__runner_set_recompute(dt__runner *r, dt_recompute mode, int num_layers);
/* The slots keep what W needs from B until W; no slot may be busy. */
dt_status dt__runner_set_split(dt__runner *r, int on);
/* FP8 training (fp8.h; the owner's state, kept by the owner; NULL: off):
 * the blocks' linear layers run under f, in the bf16 storage rounding
 * that must be set too; the runner tells f each block and pass. */
void dt__runner_set_fp8(dt__runner *r, dt__fp8 *f);
/* A whole backward shows each block's and the head's B and W as spans
 * 'b' and 'W' (W recomputing GELU, as a deferred W does). */
void dt__runner_set_trace_split(dt__runner *r, int on);

dt__runner_views *dt__runner_w(dt__runner *r);
dt__runner_views *dt__runner_g(dt__runner *r);
const dt__rounder *dt__runner_rnd(const dt__runner *r); /* NULL in FP32 */
size_t dt__runner_round_bytes(const dt__runner *r);   /* its scratch's */

/* Forward of a micro-batch (B <= the largest, T <= its T) in slot; the
 * first range reads tokens (host, B*T), the others the slot's input. The
 * last, given targets (host; -1 not counted), gives the mean loss over the
 * counted ones and their count; the others their output in *out (valid
 * until the slot's backward). Validates tokens and targets. */
dt_status dt__runner_forward(dt__runner *r, int slot, const int32_t *tokens, const int32_t *targets, int B, int T,
                             const float **out, float *loss, int *n_counted);
/* As the forward, also looking at each layer's output: *pos the first
 * holding a NaN or inf (0 the embedding, 1 + l block l, L + 1 the head), or -1. */
dt_status dt__runner_forward_check(dt__runner *r, int slot, const int32_t *tokens, const int32_t *targets, int B,
                                   int T, const float **out, int *pos);
/* Whole backward: the last range from its loss with per-target gradient
 * dloss, the others from dt__runner_dout; *dx (not first) the input's
 * gradient, valid until the next backward. Frees the slot. */
dt_status dt__runner_backward(dt__runner *r, int slot, float dloss, const float **dx);
/* Its B (dt__runner_set_split first): the slot stays busy until its W. */
dt_status dt__runner_backward_b(dt__runner *r, int slot, float dloss, const float **dx);
dt_status dt__runner_backward_w(dt__runner *r, int slot);
/* Free a slot after a forward that has no backward (evaluation). */
dt_status dt__runner_release(dt__runner *r, int slot);

float *dt__runner_input(dt__runner *r, int slot); /* (B,T,C) not first */
float *dt__runner_dout(dt__runner *r);            /* (B,T,C) not last */
const float *dt__runner_dres(const dt__runner *r);
dt_status dt__runner_output(dt__runner *r, int slot, const float **out);
/* The last forward of slot (last range): its head's activations, per-position
 * losses and correct flags (device), the sizes it ran with; 0 if none. */
int dt__runner_has_forward(const dt__runner *r, int slot);
const dt__head_acts *dt__runner_head(const dt__runner *r, int slot);
dt_status dt__runner_position_stats(dt__runner *r, int slot, float *losses, uint8_t *correct);
void dt__runner_batch(const dt__runner *r, int slot, int *B, int *T, int *has_targets);
int dt__runner_n_counted(const dt__runner *r, int slot);

/* Activation bytes in use and the peak (what the slots keep plus, while an
 * op runs, its transients); the peak starts again from now on reset. */
size_t dt__runner_activation_bytes(const dt__runner *r);
size_t dt__runner_peak_activation_bytes(const dt__runner *r);
void dt__runner_reset_peak(dt__runner *r);
/* The shared discipline's peak activation floats for a micro-batch (B,
 * T) of a whole model under (dtype, mode, K): lib/model/gpt.c's formula. */
size_t dt__runner_shared_floats(const dt_backend *be, const dt_gpt_config *cfg, dt_dtype dtype, dt_recompute mode,
                                int K, int B, int T);

#endif
