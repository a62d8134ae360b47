/* dts_cost.h: per-operation durations of one device (sim/cost.c), from a
 * roofline of the model on a dts_hw, or from a real single-rank profile.
 *
 * Layer slots, index = layer + 1 (the trace's layer numbering shifted by
 * one): [0] the embedding (wte + wpe), [1..L] the transformer blocks,
 * [L+1] the final LayerNorm, the LM head (untied from wte) and the loss.
 *
 * Invariants of a filled dts_cost: 1 <= n_layer <= DTS_MAX_LAYERS; for
 * every slot 0..n_layer+1: fwd_ns, bwd_ns, params, act_bytes >= 0,
 * 0 <= bwd_w_ns <= bwd_ns (and
 * params sum to dt_gpt_config_num_params of the model); optim_ns_per_param
 * >= 0; step_overhead_ns >= 0; slots above n_layer+1 are 0. */
#ifndef DTS_COST_H
#define DTS_COST_H

#include <stdint.h>

#include "dt_gpt.h"
#include "dt_status.h"
#include "dt_trace.h"
#include "dts_hw.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DTS_MAX_LAYERS 4096

typedef struct dts_cost {
    int n_layer;                          /* L blocks */
    int64_t fwd_ns[DTS_MAX_LAYERS + 2];   /* forward of one micro-batch through that layer (whole layer, t = 1) */
    int64_t bwd_ns[DTS_MAX_LAYERS + 2];   /* backward of the same */
    int64_t bwd_w_ns[DTS_MAX_LAYERS + 2]; /* the weight-gradient part (W) of bwd_ns; the rest is B, the input
                                             gradient (the zb schedules run them apart); 0..bwd_ns */
    int64_t params[DTS_MAX_LAYERS + 2];   /* parameters of that layer (elements) */
    int64_t act_bytes[DTS_MAX_LAYERS +
                      2];      /* activation bytes saved for backward per micro-batch (fp32, no recomputation) */
    double optim_ns_per_param; /* optimizer update time per parameter (the whole update: unscale/norm/clip/step) */
    /* a block's forward and backward of one micro-batch vary from one run of
     * it to the next: their standard deviations (ns; a profile's, pooled
     * over its blocks, robust: 1.4826 x the median absolute deviation; 0 for
     * a roofline). Tensor-parallel ranks wait for the slowest at each
     * allreduce (run.c prices the expected wait). */
    double block_fwd_sd_ns, block_bwd_sd_ns;
    int64_t step_overhead_ns; /* fixed per-step host cost outside forward/backward/optimizer (loss counters, logging) */
    char source[256];         /* "profile FILE" or "roofline HW" */
    char precision[8];        /* the profile run's "fp32", "bf16" or "fp16"; "" for a roofline */
} dts_cost;

/* Parameters (elements) of layer slot `slot` (0 embedding, 1..L blocks,
 * L+1 head) of the real model: embedding V*C + P*C (P = cfg->seq_len
 * positions), block 12C^2 + 13C, head 2C + V*C (lm_head has no bias and is
 * not tied to wte). -1 for a slot out of range. */
int64_t dts_layer_params(const dt_gpt_config *cfg, int slot);
/* Activation bytes that slot saves for backward per micro-batch of B x T
 * in FP32 without recomputation: embedding B*T*C floats (its output);
 * block 10*B*T*C + 4*B*T + NH*B*T (qkv 3, atty, res2, fch 4, out, 4
 * LayerNorm statistics, the fused attention's log-sum-exp per row: no
 * (T, T) probabilities are kept; the LayerNorm and GELU outputs are
 * recomputed by the backward, not saved);
 * head B*T*C + 2*B*T + B*T*V (lnf, its statistics, the logits). Written
 * out from the layer definitions (not from lib's *_act_floats, which add
 * 64-byte alignment padding), and checked against a real run. */
int64_t dts_layer_act_bytes(const dt_gpt_config *cfg, int slot, int B, int T);
/* Forward FLOPs of slot at B x T: 2 * (matrix parameters) * B*T for the
 * GEMMs (block 12C^2, head V*C, embedding 0: a gather) plus, per block,
 * the attention's Q K^T and att V: 4*B*T*T*C, the whole square, as MFU
 * conventions (Megatron-LM's) count it. Causal attention needs only half:
 * the CPU's fused tiles (lib/backend/cpu/cpu_attention.c) compute (n+1)/2n
 * of it for n tiles of 64 rows, CUDA's unfused kernels all of it; the
 * profile a prediction starts from measures what the backend really does.
 * Backward = 2x. */
double dts_layer_fwd_flops(const dt_gpt_config *cfg, int slot, int B, int T);
/* Bytes the forward of slot moves through device memory at B x T (FP32):
 * weights read once plus each op's activation reads and writes. */
double dts_layer_fwd_bytes(const dt_gpt_config *cfg, int slot, int B, int T);
/* The share of slot's backward that computes weight gradients (W), the
 * rest being the input gradient (B), by FLOPs: a linear layer's dX and dW
 * GEMMs cost the same, so a block's W is its 12C^2 weights' dW GEMMs,
 * 24*C^2*B*T of the backward's 48*C^2*B*T + 8*B*T*T*C (attention's score
 * and context GEMMs and the elementwise ops belong to B): 3C / (6C + T);
 * the head's W is its LM-head dW GEMM, 1/2; the embedding's backward only
 * makes the gradients of wte and wpe: 1. */
double dts_layer_bwd_w_share(const dt_gpt_config *cfg, int slot, int T);
/* Backend ops (kernels) in slot's forward / backward. */
int dts_layer_ops(const dt_gpt_config *cfg, int slot, int backward);

/* Roofline from the model and a hardware description, per slot:
 * time = max(flops / (peak_flops * efficiency), bytes / mem_bytes_per_s)
 *        + kernel_overhead_ns * ops,
 * backward with 2x the forward's FLOPs and bytes, its W part by
 * dts_layer_bwd_w_share. The optimizer reads
 * parameter, gradient and two moments and writes three of them, plus a
 * gradient-norm pass and the zeroing of the gradients: 36 bytes per
 * parameter at mem_bytes_per_s. Step overhead: one kernel_overhead_ns per
 * parameter tensor and pass (norm, update, zero), the optimizer's launches. */
dt_status dts_cost_roofline(const dt_gpt_config *model, int B, int T, const dts_hw *hw, dts_cost *out);
/* The same, each GEMM's efficiency taken at its size on one of t_blocks
 * tensor ranks (a block's) or t_head (the LM head's: the vocabulary split's
 * t, else 1), from hw's "gemm_efficiency" (dts_hw.h); the times stay the
 * whole layer's (the executor divides them by t). Without a table it is
 * dts_cost_roofline. */
dt_status dts_cost_roofline_sharded(const dt_gpt_config *model, int B, int T, int t_blocks, int t_head,
                                    const dts_hw *hw, dts_cost *out);

/* From a single-rank profile (dt_trace_read of `dtrain --trace` without
 * pipeline, tensor or data parallelism): the mean per-layer forward and
 * backward durations (name "forward"/"backward", cat "compute"; layer -1
 * or absent = the embedding, 0..Lp-1 blocks, Lp the head); the backward's
 * W part from "backward_b"/"backward_w" spans of the layer kind when the
 * profile has both (their share of the two, applied to "backward", or
 * their sum when it has no "backward" spans), else by
 * dts_layer_bwd_w_share; the blocks of
 * the profile are pooled into one mean that every block of `model` gets;
 * the optimizer span divided by the profile model's parameter count; the
 * step overhead = mean step period (end of a step's last span to the end
 * of the next one's) minus that step's spans (and any evaluation in
 * between); the blocks' forward and backward standard deviations, pooled
 * and robust (1.4826 x the median absolute deviation), their variance
 * scaled linearly in B. Iteration 0 (warm-up) is skipped: at least 2 iterations are
 * needed. The profile's config must match `model` in hidden_size,
 * num_attention_heads, vocab_size and T (seq_length); num_layers may
 * differ; another micro_batch_size is scaled linearly in B. Mismatches and
 * parallel profiles give DT_ERR_INVALID naming profile_name and the field. */
dt_status dts_cost_from_profile(const dt_trace *profile, const char *profile_name, const dt_gpt_config *model, int B,
                                int T, dts_cost *out);

/* A cost table measured at c->precision (a profile's), adjusted to a run
 * at `precision`: from an FP32 profile to bf16, on hardware whose file
 * gives a bf16 GEMM rate (hw->peak_flops_bf16 > 0), each block's and the
 * head's forward and backward keep their non-GEMM time and run their GEMM
 * FLOPs (the linear layers' 2*12C^2*B*T per block and 2*V*C*B*T for the
 * head forward, twice that backward; attention's tiles stay FP32 on the
 * CPU) peak_flops / peak_flops_bf16 times faster. The GEMM time in the
 * profile is taken as those FLOPs at peak_flops (at most 95% of the
 * layer's time), so a GEMM that ran below peak leaves more time outside
 * the GEMMs: the prediction errs high. bf16's own passes over the
 * activations are added at hw->bf16_pass_ns an element (0: left out, the
 * prediction errs low): per token of a block, forward 18C (8C rounded
 * after the ops that make them, the 10C saved packed to 2 bytes), backward
 * 35C (8C rounded, 2C rounded again where W recomputes the LayerNorm
 * outputs, 15C cast, 10C unpacked), as lib/model/block.c and
 * lib/backend/cpu/cpu_gemm.c do them without recomputation. A GEMM input
 * rounded just before its GEMM is rounded and copied to bf16 in one pass
 * (round_bf16), which the GEMM reads instead of casting, and the MLP's
 * GELU passes round their input and output and write that copy in the
 * GELU's own pass (gelu_forward_bf16, gelu_backward_bf16), so neither
 * counts a cast; what is still cast: the output gradients that W's
 * weight gradients read (9C), the one fcproj's input gradient reads (C),
 * and GELU's output and the attention output as W's inputs (5C). W keeps its
 * share of the backward. Anything else (same precision, no bf16
 * rate, a bf16 profile) is left as it is; *changed says whether it
 * changed (may be NULL). */
dt_status dts_cost_to_precision(dts_cost *c, const dt_gpt_config *m, int B, int T, const dts_hw *hw,
                                const char *precision, int *changed);

/* Sums over the slots 0..n_layer+1. */
int64_t dts_cost_total_params(const dts_cost *c);
int64_t dts_cost_total_act_bytes(const dts_cost *c);

#ifdef __cplusplus
}
#endif
#endif
