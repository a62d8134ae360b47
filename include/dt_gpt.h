/* dt_gpt.h: a GPT-2 style decoder-only transformer (pre-LayerNorm) with
 * forward and backward written by hand per layer.
 *
 * Legend: B = batch (micro-batch) size, T = sequence length (<= seq_len),
 * C = hidden size, NH = heads, hs = C/NH, L = layers, V = vocabulary.
 *
 * Layers, in order: embedding (wte + wpe), L blocks
 * [ln1, attention (qkv, causal softmax, proj), residual, ln2, MLP (fc, GELU,
 * proj), residual], final LayerNorm, LM head (untied from wte so pipeline
 * stages own disjoint parameters), softmax cross-entropy.
 *
 * Invariants: all parameters live in one flat buffer (params), their
 * gradients in another with the same layout (grads); backward accumulates
 * into grads (zero them with dt_gpt_zero_grad); activations for a given
 * (B, T) come from one arena whose current and peak bytes are tracked. */
#ifndef DT_GPT_H
#define DT_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "dt_backend.h"
#include "dt_status.h"
#include "dt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_gpt_config {
    int vocab_size;  /* V */
    int seq_len;     /* maximum T (positions in wpe) */
    int num_layers;  /* L */
    int num_heads;   /* NH */
    int hidden_size; /* C */
    /* 1: the LM head is the token embedding wte, transposed (GPT-2's and
     * Megatron's default; one (V, C) matrix, its gradient the sum of both
     * uses); 0: a separate lm_head.w (--untie-embeddings-and-output-weights) */
    int tie_embeddings;
} dt_gpt_config;

/* Fill cfg from a preset: "tiny", "small", "gpt2-124m" (GPT-2: vocabulary
 * 50257, LM head tied to wte; the byte-level tiny and small: 256, untied). */
DT_API dt_status dt_gpt_config_preset(const char *name, dt_gpt_config *cfg);
/* Check sizes (positive, C divisible by NH, ...); message names the flag. */
DT_API dt_status dt_gpt_config_validate(const dt_gpt_config *cfg);
/* Number of parameters (sum of tensor sizes, no padding). */
DT_API size_t dt_gpt_config_num_params(const dt_gpt_config *cfg);
/* Elements of the flat parameter buffer (the parameters plus the alignment
 * padding between tensors); 0 if cfg is invalid. */
DT_API size_t dt_gpt_config_layout_numel(const dt_gpt_config *cfg);
/* Model FLOPs per token of one training step, 6*N + 12*L*C*T (PaLM/nanoGPT). */
DT_API double dt_gpt_config_flops_per_token(const dt_gpt_config *cfg, int T);

typedef struct dt_gpt dt_gpt;

DT_API dt_status dt_gpt_create(const dt_gpt_config *cfg, dt_backend *be, dt_gpt **out);
DT_API void dt_gpt_free(dt_gpt *m);
/* GPT-2 initialisation from a seed: weights N(0, 0.02), residual output
 * projections N(0, 0.02/sqrt(2L)), biases 0, LayerNorm gains 1. */
DT_API dt_status dt_gpt_init_weights(dt_gpt *m, uint64_t seed);
/* Where a model's initial weights come from: GPT-2's initialisation from
 * seed (read NULL), or a source of whole-model tensors (read set: a Hugging
 * Face checkpoint, dt_safetensors.h's dt_hf_init). read(ctx, p, index, w)
 * fills w with tensor p, index its place in the whole model's layout (a
 * pipeline stage's tied copy of wte asks for wte). Every layout (one
 * process, pipeline stages, tensor-parallel slices, ZeRO shards) initialises
 * whole tensors through this and then keeps its part, so every layout
 * starts from exactly the whole model's values. */
typedef struct dt_gpt_init {
    uint64_t seed;
    dt_status (*read)(void *ctx, const dt_param_info *p, int index, float *w);
    void *ctx;
} dt_gpt_init;
DT_API dt_status dt_gpt_init_weights_from(dt_gpt *m, const dt_gpt_init *init);

DT_API const dt_gpt_config *dt_gpt_config_of(const dt_gpt *m);
DT_API const dt_paramset *dt_gpt_layout(const dt_gpt *m);
DT_API float *dt_gpt_params(dt_gpt *m); /* flat, backend memory */
DT_API float *dt_gpt_grads(dt_gpt *m);  /* flat, backend memory */
DT_API dt_backend *dt_gpt_backend(dt_gpt *m);

/* Forward pass on host tokens(B,T) and targets(B,T) (target < 0: ignored;
 * targets may be NULL for inference). Keeps the activations for backward.
 * *loss (may be NULL) = mean cross-entropy over counted targets. */
DT_API dt_status dt_gpt_forward(dt_gpt *m, const int32_t *tokens, const int32_t *targets, int B, int T, float *loss);
/* Backward of the last forward; accumulates into grads. The loss is the mean
 * over counted targets times loss_scale (1 for plain training). */
DT_API dt_status dt_gpt_backward(dt_gpt *m, float loss_scale);
DT_API dt_status dt_gpt_zero_grad(dt_gpt *m);

/* After a forward with targets: per-position loss and argmax==target flags
 * (host copies, (B,T)); positions with target < 0 hold 0. */
DT_API dt_status dt_gpt_position_stats(dt_gpt *m, float *losses, uint8_t *correct);
/* Logits of the last forward, (B,T,V), copied to host. */
DT_API dt_status dt_gpt_logits(dt_gpt *m, float *out);
/* Logits of one position (b, t) of the last forward, (V), copied to host
 * (generation reads only the last position's: dt_sample.h). */
DT_API dt_status dt_gpt_logits_row(dt_gpt *m, int b, int t, float *out);

/* Activation memory: bytes currently held in the arena and the peak. */
DT_API size_t dt_gpt_activation_bytes(const dt_gpt *m);
DT_API size_t dt_gpt_peak_activation_bytes(const dt_gpt *m);

/* Activation recomputation ("gradient checkpointing"):
 *   DT_RECOMPUTE_FULL, K: keep only the input of every K-th block (groups of
 *     K blocks); backward recomputes a group's forward from its input, then
 *     runs its backward.
 *   DT_RECOMPUTE_SELECTIVE: keep everything but the attention probabilities
 *     (B,NH,T,T), recomputed from the kept qkv in backward (Megatron-LM's
 *     selective recomputation of the attention core).
 * Gradients are bit-identical to no recomputation. */
typedef enum dt_recompute { DT_RECOMPUTE_NONE = 0, DT_RECOMPUTE_FULL, DT_RECOMPUTE_SELECTIVE } dt_recompute;
/* "full" or "selective" ("none" is accepted too). */
DT_API dt_status dt_recompute_parse(const char *s, dt_recompute *out);
/* num_layers is K for DT_RECOMPUTE_FULL (1..L); ignored otherwise. */
DT_API dt_status dt_gpt_set_recompute(dt_gpt *m, dt_recompute mode, int num_layers);
/* The activation bytes the arena is sized for at (B, T) in the current mode
 * (equal to the measured peak after a forward and backward). */
DT_API size_t dt_gpt_predicted_activation_bytes(const dt_gpt *m, int B, int T);

/* Mixed precision: DT_F16 or DT_BF16 keeps the FP32 parameters and
 * gradients as masters and runs with a half compute copy of the weights
 * (refreshed from the masters at every forward), every activation and
 * activation gradient rounded to the half format after the op that makes
 * it, and each micro-batch's parameter gradients rounded to half before
 * they accumulate into the FP32 gradients. Rounding goes through real IEEE
 * half buffers (round to nearest even, overflow to inf, underflow to
 * subnormals or zero). Statistics (LayerNorm, softmax, loss) and GEMM
 * accumulation stay FP32: the products of two half values are exact in
 * FP32, so the FP32 GEMM equals a half-input GEMM with FP32 accumulation.
 * Each block runs in an FP32 working set; what it saves for backward is
 * then packed into 2-byte storage (statistics stay FP32, and so does the
 * last block's output, read by the head), and unpacked for its backward:
 * peak activation memory shrinks. With full recomputation the group
 * checkpoints stay FP32. DT_F32 turns it all off. */
DT_API dt_status dt_gpt_set_precision(dt_gpt *m, dt_dtype dtype);
DT_API dt_dtype dt_gpt_precision(const dt_gpt *m);
/* Mixed precision with the FP32 masters kept elsewhere (ZeRO-1 shards them
 * over the data-parallel ranks): from now on the parameter buffer holds the
 * weights already rounded to the half format, and the model computes with
 * them directly, dropping its half and FP32 compute copies (the masters'
 * rounding is done by whoever updates them). Until the next
 * dt_gpt_set_precision. */
DT_API dt_status dt_gpt_set_weights_rounded(dt_gpt *m);

/* Per-layer trace hook: called after each layer forward/backward with the
 * layer index (-1 embedding, 0..L-1 blocks, L head+loss), the pass
 * ('F' forward, 'B' backward, 'R' recomputation of a forward; 'b' and 'W'
 * below), and
 * start/end times from dt_time_ns(). The end is read after the backend's
 * synchronize, so on a GPU a span covers its kernels, not only their
 * launch (a traced GPU run waits for the device after every layer). */
typedef void (*dt_gpt_layer_hook)(void *ctx, int layer, char pass, int64_t t0_ns, int64_t t1_ns);
DT_API void dt_gpt_set_layer_hook(dt_gpt *m, dt_gpt_layer_hook hook, void *ctx);
/* With on, the hook sees each block's and the head's backward as two
 * spans, in this order: 'b', B (the input gradient), then 'W', W (the
 * parameter gradients) -- the split of the zero-bubble schedules
 * (dt_schedule.h), computed as the whole backward computes them, bit for
 * bit; the embedding's backward (all W) stays 'B'. A serial profile made
 * so gives the simulator the measured cost of W (sim/cost.c). */
DT_API void dt_gpt_set_split_backward(dt_gpt *m, int on);

#ifdef __cplusplus
}
#endif
#endif
