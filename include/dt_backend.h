/* dt_backend.h: compute backends: the ops every backend implements (one
 * static const dt_backend_ops table per backend) and the instance,
 * dt_backend, whose members are the checked front that callers use.
 *
 * Core code (model, optimizers, trainer) calls only through be->op(be, ...)
 * and never tests which backend it has; the CPU backend is always built
 * and is the reference every other backend is tested against.
 *
 * Conventions for all ops:
 *  - pointers are device pointers of this backend; sizes are element counts;
 *  - matrices are row-major; B = batch, T = sequence length, C = channels,
 *    NH = heads, V = vocabulary, N = rows (usually B*T), OC = output channels;
 *  - "+=" in a comment means the op accumulates into that output (parameter
 *    gradients always accumulate, so gradient accumulation is free);
 *    otherwise the output is overwritten;
 *  - ops are deterministic for a fixed thread count. */
#ifndef DT_BACKEND_H
#define DT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "dt_fp8.h"
#include "dt_status.h"
#include "dt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_copy_kind { DT_COPY_H2D = 0, DT_COPY_D2H, DT_COPY_D2D } dt_copy_kind;

typedef struct dt_backend dt_backend;

/* ---- the ops: signature and semantics, one typedef each -------------- */

typedef void dt_backend_destroy_fn(dt_backend *be);
typedef dt_status dt_backend_set_threads_fn(dt_backend *be, int n);
/* How many of the be->threads threads run the ops from now on (1..threads).
 * The ops split their work by be->threads, never by this count, so results
 * are bit-identical for any n: the trainer's automatic thread count
 * (lib/train/thread_tune.c) lowers it when other processes want the cores. */
typedef dt_status dt_backend_set_workers_fn(dt_backend *be, int n);

/* ---- memory: alloc returns zeroed, 64-byte aligned memory ---------- */
typedef dt_status dt_backend_alloc_fn(dt_backend *be, size_t bytes, void **out);
typedef void dt_backend_free_fn(dt_backend *be, void *p);
typedef dt_status dt_backend_memset_zero_fn(dt_backend *be, void *p, size_t bytes);
typedef dt_status dt_backend_copy_fn(dt_backend *be, void *dst, const void *src, size_t bytes, dt_copy_kind kind);
typedef dt_status dt_backend_synchronize_fn(dt_backend *be);
/* Mixed-precision hint (may be NULL: ignored): from now on the inputs
 * of every GEMM (gemm's A and B; matmul's inp, w and dout; attention's
 * qkv and dout) hold values exactly representable in dtype (DT_F16
 * or DT_BF16; DT_F32 withdraws the promise). A backend may then multiply
 * in that type with FP32 accumulation (tensor cores): products of such
 * values are exact in FP32, so results differ from FP32 GEMMs only by
 * summation order. Inside attention, the probabilities that the forward
 * multiplies by v and the score gradients of the backward are the op's
 * own FP32 values: a backend may round them to dtype for its GEMMs (as
 * PyTorch's autocast does), which the CPU does not. */
typedef dt_status dt_backend_set_gemm_inputs_fn(dt_backend *be, dt_dtype dtype);
/* Mixed-precision hint (may be NULL: ignored): the n floats at f32 have an
 * exact copy in dtype (DT_F16 or DT_BF16) at half, which the caller keeps
 * equal to them whenever a GEMM reads them (the models write both in one
 * place: their weights' compute copy, made again after each optimizer
 * step). While set_gemm_inputs(dtype) holds, a GEMM operand lying inside
 * [f32, f32 + n) may be read from half instead of being cast again. The
 * values are the same, so results do not change. half == NULL forgets the
 * range registered at f32 (a no-op if there is none); the caller forgets
 * it before either buffer is freed. */
typedef dt_status dt_backend_set_gemm_shadow_fn(dt_backend *be, const float *f32, size_t n, const void *half,
                                                dt_dtype dtype);

/* ---- GEMM: C(M,N) = alpha * op(A) op(B) + beta * C, row-major ------ */
typedef dt_status dt_backend_gemm_fn(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha,
                                     const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* ---- layers ---------------------------------------------------------- */
/* out(B,T,C) = wte[tokens] + wpe[t]. A token of -1 (DT_TOKEN_MASKED)
 * adds no row of wte, and wpe NULL no position: a vocabulary-parallel rank
 * looks up only the rows it holds (lib/model/embedding.c). */
#define DT_TOKEN_MASKED (-1)
typedef dt_status dt_backend_encoder_forward_fn(dt_backend *be, float *out, const int32_t *tokens, const float *wte,
                                                const float *wpe, int B, int T, int C);
/* dwte(V,C) +=, dwpe(T,C) += from dout(B,T,C); a token of -1
 * (DT_TOKEN_MASKED) adds to no row of dwte; dwpe NULL: skipped */
typedef dt_status dt_backend_encoder_backward_fn(dt_backend *be, float *dwte, float *dwpe, const float *dout,
                                                 const int32_t *tokens, int B, int T, int C);
/* out(N,C), mean(N), rstd(N) from inp(N,C), w(C), b(C); eps = 1e-5 */
typedef dt_status dt_backend_layernorm_forward_fn(dt_backend *be, float *out, float *mean, float *rstd,
                                                  const float *inp, const float *w, const float *b, int N, int C);
/* dinp(N,C) +=, dw(C) +=, db(C) +=. Either part may be skipped: dinp NULL
 * (the parameter gradients alone), or dw and db both NULL (the input
 * gradient alone); each computes the same values as when both run. */
typedef dt_status dt_backend_layernorm_backward_fn(dt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                                   const float *inp, const float *w, const float *mean,
                                                   const float *rstd, int N, int C);
/* out(N,OC) = inp(N,C) @ w(OC,C)^T + bias(OC) (bias may be NULL) */
typedef dt_status dt_backend_matmul_forward_fn(dt_backend *be, float *out, const float *inp, const float *w,
                                               const float *bias, int N, int C, int OC);
/* dinp(N,C) = dout @ w (overwritten; skipped if dinp is NULL), dw(OC,C) +=, dbias(OC) += (may be NULL);
 * dw NULL skips dw and dbias (the input gradient alone) */
typedef dt_status dt_backend_matmul_backward_fn(dt_backend *be, float *dinp, float *dw, float *dbias, const float *dout,
                                                const float *inp, const float *w, int N, int C, int OC);
/* Causal multi-head attention, fused: qkv(B,T,3C) laid out [q | k | v],
 * each split into NH heads of C/NH; out(B,T,C) = softmax(Q K^T / sqrt(C/NH),
 * keys 0..t for query t) V per head; lse(B,NH,T) receives each row's
 * log-sum-exp of its scaled scores, all the backward needs besides qkv and
 * out (no (T, T) probabilities are kept: a backend recomputes them from
 * lse, in tiles or in a workspace of its own). */
typedef dt_status dt_backend_attention_forward_fn(dt_backend *be, float *out, float *lse, const float *qkv, int B,
                                                  int T, int C, int NH);
/* dqkv(B,T,3C) overwritten, from dout(B,T,C) and the forward's qkv, out
 * and lse (out may hold out's values rounded to a 16-bit type: it only
 * enters D = rowsum(dout * out)). */
typedef dt_status dt_backend_attention_backward_fn(dt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                                   const float *out, const float *lse, int B, int T, int C, int NH);
/* Attention of a chunk of queries against a chunk of keys and values:
 * context parallelism's blocks (lib/parallel/cp.c). The T queries of each
 * of B rows are at q, row b*T + t, rows ldq floats apart, head h at
 * channels h*C/NH ..; the T keys and values at k and v, rows ldkv apart,
 * the same layout. causal 1: query t sees keys 0..t (a chunk against
 * itself, at the same positions); 0: all T. out(B,T,C) and lse(B,NH,T) as
 * attention_forward's; merge 1: they hold the result over other keys
 * already, and the two are combined by their log-sum-exps (the online
 * softmax), so chunk pairs taken in any order end as the softmax over all
 * of them. */
typedef dt_status dt_backend_attention_chunk_forward_fn(dt_backend *be, float *out, float *lse, const float *q,
                                                        int ldq, const float *k, const float *v, int ldkv, int B,
                                                        int T, int C, int NH, int causal, int merge);
/* Its backward, from the final out and lse (over every chunk) and dout:
 * the chunk pair's share accumulated (+=) into dq (rows ldq apart), dk
 * and dv (rows ldkv apart). */
typedef dt_status dt_backend_attention_chunk_backward_fn(dt_backend *be, float *dq, float *dk, float *dv,
                                                         const float *dout, const float *out, const float *lse,
                                                         const float *q, int ldq, const float *k, const float *v,
                                                         int ldkv, int B, int T, int C, int NH, int causal);
/* rows of cols floats: dst rows ldd apart = src rows lds apart (no overlap) */
typedef dt_status dt_backend_copy2d_fn(dt_backend *be, float *dst, size_t ldd, const float *src, size_t lds,
                                       size_t rows, size_t cols);
/* ---- FP8 GEMMs (include/dt_fp8.h), optional: both or neither -------- */
/* How fp8_quantize scales and stores x. */
typedef struct dt_fp8_quant {
    dt_fp8_format format;
    /* 0, 0: one scale for the tensor; else tiles of tile_rows x tile_cols
     * (blockwise; edge tiles smaller), each scaled from its own amax by a
     * power of two (dt_fp8_scale_from_amax with pow2) */
    int tile_rows, tile_cols;
    /* one scale: > 0 the scale to use (delayed); 0 from the tensor's own
     * amax (tensorwise). A computed scale of 0 (amax 0) means 1. */
    float scale;
    int margin; /* computed scales: (max / amax) / 2^margin */
    /* 1 (required with tiles): q receives floats, fp8(x s) / s, exact in
     * bf16 (power-of-two s), for the ordinary gemm with bf16 inputs; 0:
     * q receives the backend's FP8 storage of fp8(x s), for fp8_gemm */
    int dequant;
} dt_fp8_quant;
/* What fp8_quantize saw (host memory). */
typedef struct dt_fp8_qstats {
    float amax;         /* max |x| over the tensor (NaN ignored) */
    float scale;        /* one scale: the scale used (the GEMM divides by it); tiles: 1 */
    uint64_t saturated; /* values with |x s| > max, set to +-max */
    uint64_t flushed;   /* non-zero values with fp8(x s) == 0 */
    uint32_t *hist;     /* (DT_FP8_HIST) += non-zero |x| by float binade; NULL: not counted */
} dt_fp8_qstats;
/* q = x(rows, cols) converted to FP8 as spec says (dt_fp8.h's rounding,
 * saturation and flushing, bit for bit); q has room for rows * cols
 * floats. stats (host) are overwritten (hist added to). */
typedef dt_status dt_backend_fp8_quantize_fn(dt_backend *be, void *q, const float *x, int rows, int cols,
                                             const dt_fp8_quant *spec, dt_fp8_qstats *stats);
/* C(M,N) = alpha op(A) op(B) + beta C, row-major, A and B what
 * fp8_quantize wrote with dequant 0 (formats fa, fb), lda, ldb in
 * elements: products exact, FP32 accumulation (on the GPU cuBLASLt's FP8
 * GEMM, alpha the product of the two inputs' 1/scale). */
typedef dt_status dt_backend_fp8_gemm_fn(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha,
                                         const void *A, dt_fp8_format fa, int lda, const void *B, dt_fp8_format fb,
                                         int ldb, float beta, float *C, int ldc);
/* GELU, tanh approximation: out(n) = gelu(inp) */
typedef dt_status dt_backend_gelu_forward_fn(dt_backend *be, float *out, const float *inp, size_t n);
/* dinp(n) = gelu'(inp) * dout (overwritten; dinp may alias dout) and,
 * where out is not NULL, out(n) = gelu(inp), the forward's value, from the
 * same pass (bit-identical to gelu_forward; out aliases nothing): a
 * backward that needs GELU's output again need not run the forward. */
typedef dt_status dt_backend_gelu_backward_fn(dt_backend *be, float *dinp, float *out, const float *inp,
                                              const float *dout, size_t n);
/* out(n) = a + b (out may alias a or b) */
typedef dt_status dt_backend_residual_forward_fn(dt_backend *be, float *out, const float *a, const float *b, size_t n);
/* Fused softmax cross-entropy over logits(N,V) with targets(N); a target
 * < 0 is ignored. Rows of logits and dlogits are ld >= V floats apart;
 * columns V..ld-1 are neither read nor written. losses(N) = -log
 * p[target] (0 where ignored); correct(N) (may be NULL) = 1 if argmax ==
 * target (ties: lowest index; a NaN logit wins at index 0 and is skipped
 * elsewhere); dlogits(N,V) (may be NULL, may alias logits) = dloss * (p -
 * onehot) on counted rows, 0 on ignored rows. A target >= V is
 * DT_ERR_INVALID naming the lowest such row: the CPU returns it before
 * writing; the CUDA backend (targets in device memory) at its next host
 * synchronisation (synchronize, a host copy, sumsq, unscale_check,
 * span_stats), the bad rows having loss NaN, correct 0 and zero gradients. */
typedef dt_status dt_backend_crossentropy_forward_backward_fn(dt_backend *be, float *losses, uint8_t *correct,
                                                              float *dlogits, const float *logits,
                                                              const int32_t *targets, int N, int V, int ld,
                                                              float dloss);
/* One vocabulary-parallel rank's part of that cross-entropy (Megatron's
 * vocab-parallel cross-entropy): logits(N,V) hold columns v0..v0+V-1 of
 * the whole vocabulary, rows ld >= V apart; targets(N) are whole-vocabulary
 * indexes (< 0 ignored; those outside the part are held elsewhere).
 *  - stats (N,4) not NULL: per counted row, m the largest logit here
 *    (the argmax rule above: ties to the lowest index, a NaN wins only at
 *    column 0), s = sum exp(z - m) over the part, zt the target's logit if
 *    the part holds it (else 0), and v0 + the argmax column (as a float,
 *    exact below 2^24); ignored rows get 0, 1, 0, -1.
 *  - dlogits not NULL (may alias logits): from ms(N,2), each row's whole
 *    maximum and sum of exp(z - maximum) (the ranks' stats merged),
 *    dlogits = dloss * exp(z - max) / sum, minus dloss at the target if
 *    the part holds it, as the fused op computes them; 0 on ignored rows.
 * Exactly one of stats and dlogits is given. */
typedef dt_status dt_backend_crossentropy_part_fn(dt_backend *be, float *stats, float *dlogits, const float *ms,
                                                  const float *logits, const int32_t *targets, int N, int V, int ld,
                                                  int v0, float dloss);

/* ---- reductions and optimizers on flat buffers ------------------------ */
/* *out = sum x[i]^2, accumulated in double, in a fixed order */
typedef dt_status dt_backend_sumsq_fn(dt_backend *be, const float *x, size_t n, double *out);
/* x *= s */
typedef dt_status dt_backend_scale_fn(dt_backend *be, float *x, float s, size_t n);
/* AdamW on one tensor: g' = g * grad_scale; m,v moments; bias
 * corrections bc1 = 1 - beta1^t, bc2 = 1 - beta2^t; decoupled decay:
 * p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p) */
typedef dt_status dt_backend_adamw_update_fn(dt_backend *be, float *p, const float *g, float *m, float *v, size_t n,
                                             float lr, float beta1, float beta2, float eps, float wd, float bc1,
                                             float bc2, float grad_scale);
/* SGD with momentum (PyTorch form): g' = g * grad_scale + wd * p;
 * buf = momentum * buf + g' (buf = g' on the first step when first != 0);
 * p -= lr * (nesterov ? g' + momentum * buf : buf) */
typedef dt_status dt_backend_sgd_update_fn(dt_backend *be, float *p, const float *g, float *buf, size_t n, float lr,
                                           float momentum, float wd, float grad_scale, int nesterov, int first);
/* LARS on one tensor (You et al., LARS, arXiv 1708.03888, 2017; see
 * dt_optim.h): g' = g * grad_scale;
 * buf = momentum * buf + lr * trust * (g' + wd * p); p -= buf. The
 * caller computes trust = eta * ||p|| / (||g'|| + wd * ||p||) from
 * sumsq (1 for tensors without LARS, e.g. biases and norms). */
typedef dt_status dt_backend_lars_update_fn(dt_backend *be, float *p, const float *g, float *buf, size_t n, float lr,
                                            float trust, float momentum, float wd, float grad_scale);
/* LAMB, first half, on one tensor: g' = g * grad_scale; Adam moments m,
 * v; u(n) = mhat / (sqrt(vhat) + eps) + wd * p (bc1, bc2 as for AdamW).
 * The caller then takes ||p|| and ||u|| with sumsq and applies
 * p += (-lr * phi(||p||) / ||u||) * u with axpy. */
typedef dt_status dt_backend_lamb_direction_fn(dt_backend *be, float *u, const float *p, const float *g, float *m,
                                               float *v, size_t n, float beta1, float beta2, float eps, float wd,
                                               float bc1, float bc2, float grad_scale);
/* y(n) += a * x(n) */
typedef dt_status dt_backend_axpy_fn(dt_backend *be, float *y, float a, const float *x, size_t n);

/* ---- mixed precision ------------------------------------------------- */
/* dst(n) = src(n) converted between DT_F32, DT_F16 and DT_BF16 (IEEE
 * round to nearest even; NaN becomes the quiet NaN with the same sign
 * and top payload bits, as x86's conversions do; overflow becomes inf).
 * dst and src must not overlap unless the types are equal; another
 * dtype gives DT_ERR_INVALID. */
/* x(n) rounded to dtype (DT_F16 or DT_BF16) and widened back, in place:
 * bit-identical to cast(scratch <- x) then cast(x <- scratch), in one pass
 * and without the scratch (may be NULL: callers then make the two casts). */
typedef dt_status dt_backend_round_fn(dt_backend *be, float *x, dt_dtype dtype, size_t n);
/* Mixed precision's GELU passes fused, bf16 only (may be NULL: callers
 * then run round, gelu_forward or gelu_backward, round and cast apart).
 * With r(v) = v rounded to bf16 and widened back, in one pass:
 *  forward: when round_inp, inp = r(inp) in place; out(n) = r(gelu(inp))
 *  and, where out16 is not NULL, its bf16 bits in out16(n);
 *  backward: d(n) = r(gelu'(inp) * r(d)) in place and, where d16 is not
 *  NULL, its bf16 bits in d16(n); where out is not NULL, out(n) =
 *  r(gelu(inp)), the forward's output, as gelu_backward's out.
 * Bit-identical to the unfused ops (the same inline arithmetic). */
/* round_bf16 (may be NULL): x(n) rounded to bf16 in place, as round
 * does, and the bf16 bits into x16(n), in one pass. */
typedef dt_status dt_backend_round_bf16_fn(dt_backend *be, float *x, uint16_t *x16, size_t n);
typedef dt_status dt_backend_gelu_forward_bf16_fn(dt_backend *be, float *out, uint16_t *out16, float *inp,
                                                  int round_inp, size_t n);
typedef dt_status dt_backend_gelu_backward_bf16_fn(dt_backend *be, float *d, uint16_t *d16, float *out,
                                                   const float *inp, size_t n);
typedef dt_status dt_backend_cast_fn(dt_backend *be, void *dst, dt_dtype dst_type, const void *src, dt_dtype src_type,
                                     size_t n);
/* x(n) *= s; *nonfinite is set to 1 if any result is inf or NaN (left
 * unchanged otherwise, so one flag can collect many tensors). */
typedef dt_status dt_backend_unscale_check_fn(dt_backend *be, float *x, float s, size_t n, int *nonfinite);

/* ---- per-tensor statistics of a flat buffer, one wait for the device --- */
/* One tensor of a flat buffer: its elements x[offset, offset + n). */
typedef struct dt_span {
    size_t offset, n;
} dt_span;
/* For each of count spans of x (the tensors of a gradient buffer):
 *  - nonfinite != NULL: the span is multiplied by s in place (as
 *    unscale_check) and nonfinite[i] = 1 if a result is inf or NaN, else 0;
 *  - sumsq != NULL: sumsq[i] = the sum of the span's squares in double
 *    (after the multiplication), as sumsq computes it.
 * x is only read when nonfinite is NULL. One host synchronisation for all
 * spans: the loss scaler's check and the gradient norm of a step cost one
 * round trip instead of one per tensor. An optional slot: where a backend
 * has none (the CPU's), the front runs unscale_check and sumsq per span,
 * in span order, which is the reference. */
typedef dt_status dt_backend_span_stats_fn(dt_backend *be, float *x, const dt_span *spans, int count, float s,
                                           int *nonfinite, double *sumsq);

/* ---- BatchNorm and ReLU (the mlp-bn model) ---------------------------- */
/* BatchNorm over N rows of C features. training != 0: batch statistics
 * (biased variance) normalise; mean(C) and rstd(C) are saved; the
 * running statistics become (1 - momentum) * running + momentum * batch
 * (unbiased variance for running_var, as PyTorch). training == 0: the
 * running statistics normalise and nothing is updated. */
typedef dt_status dt_backend_batchnorm_forward_fn(dt_backend *be, float *out, float *mean, float *rstd,
                                                  float *running_mean, float *running_var, const float *inp,
                                                  const float *w, const float *b, int N, int C, float momentum,
                                                  float eps, int training);
/* dinp(N,C) overwritten, dw(C) +=, db(C) += (training-mode statistics) */
typedef dt_status dt_backend_batchnorm_backward_fn(dt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                                   const float *inp, const float *w, const float *mean,
                                                   const float *rstd, int N, int C);
/* out(n) = max(x, 0) */
typedef dt_status dt_backend_relu_forward_fn(dt_backend *be, float *out, const float *inp, size_t n);
/* dinp(n) = dout where inp > 0, else 0 (dinp may alias dout) */
typedef dt_status dt_backend_relu_backward_fn(dt_backend *be, float *dinp, const float *inp, const float *dout,
                                              size_t n);

/* A backend's table of ops: one `static const` table per backend
 * (cpu_backend.c, cuda/backend.cu), filled with designated initializers,
 * shared by all its instances. Every slot is required except
 * set_workers, set_gemm_inputs, set_gemm_shadow, span_stats and those
 * marked "NULL:" below. The ops are called
 * only by the front below, after it has checked the arguments that every
 * backend rejects alike, so an op checks only what is its own (device
 * data, its own limits). */
typedef struct dt_backend_ops {
    dt_backend_destroy_fn *destroy;                                             /* frees be, its impl and all it owns */
    dt_backend_set_threads_fn *set_threads;                                     /* n <= 0: the backend's default */
    dt_backend_set_workers_fn *set_workers;                                     /* NULL: the threads always run */
    dt_backend_alloc_fn *alloc;                                                 /* zeroed, 64-byte aligned */
    dt_backend_free_fn *free;                                                   /* p may be NULL */
    dt_backend_memset_zero_fn *memset_zero;                                     /* bytes of p set to 0 */
    dt_backend_copy_fn *copy;                                                   /* memmove semantics */
    dt_backend_synchronize_fn *synchronize;                                     /* waits for all queued work */
    dt_backend_set_gemm_inputs_fn *set_gemm_inputs;                             /* NULL: no 16-bit GEMMs */
    dt_backend_set_gemm_shadow_fn *set_gemm_shadow;                             /* NULL: GEMMs cast every operand */
    dt_backend_gemm_fn *gemm;                                                   /* row-major */
    dt_backend_encoder_forward_fn *encoder_forward;                             /* token + position embeddings */
    dt_backend_encoder_backward_fn *encoder_backward;                           /* accumulates dwte, dwpe */
    dt_backend_layernorm_forward_fn *layernorm_forward;                         /* eps 1e-5 */
    dt_backend_layernorm_backward_fn *layernorm_backward;                       /* accumulates dinp, dw, db */
    dt_backend_matmul_forward_fn *matmul_forward;                               /* linear layer */
    dt_backend_matmul_backward_fn *matmul_backward;                             /* accumulates dw, dbias */
    dt_backend_attention_forward_fn *attention_forward;                         /* causal, multi-head */
    dt_backend_attention_backward_fn *attention_backward;                       /* dqkv overwritten */
    dt_backend_gelu_forward_fn *gelu_forward;                                   /* tanh approximation */
    dt_backend_gelu_backward_fn *gelu_backward;                                 /* dinp may alias dout */
    dt_backend_residual_forward_fn *residual_forward;                           /* out may alias a or b */
    dt_backend_crossentropy_forward_backward_fn *crossentropy_forward_backward; /* fused softmax cross-entropy */
    dt_backend_crossentropy_part_fn *crossentropy_part;                         /* a vocabulary-parallel part */
    dt_backend_sumsq_fn *sumsq;                                                 /* double, fixed order */
    dt_backend_scale_fn *scale;                                                 /* x *= s */
    dt_backend_adamw_update_fn *adamw_update;                                   /* one tensor */
    dt_backend_sgd_update_fn *sgd_update;                                       /* PyTorch form */
    dt_backend_lars_update_fn *lars_update;                                     /* trust from the caller */
    dt_backend_lamb_direction_fn *lamb_direction;                               /* LAMB's first half */
    dt_backend_axpy_fn *axpy;                                                   /* y += a * x */
    dt_backend_cast_fn *cast;                                                   /* f32, f16, bf16 */
    dt_backend_round_fn *round;                                                 /* NULL: two casts instead */
    dt_backend_round_bf16_fn *round_bf16;                                       /* NULL: round, then cast */
    dt_backend_gelu_forward_bf16_fn *gelu_forward_bf16;                         /* NULL: round, gelu, cast apart */
    dt_backend_gelu_backward_bf16_fn *gelu_backward_bf16;                       /* NULL: the same */
    dt_backend_unscale_check_fn *unscale_check;                                 /* raises *nonfinite */
    dt_backend_span_stats_fn *span_stats;                                       /* NULL: per span, by the front */
    dt_backend_batchnorm_forward_fn *batchnorm_forward;                         /* training or eval */
    dt_backend_batchnorm_backward_fn *batchnorm_backward;                       /* training-mode statistics */
    dt_backend_relu_forward_fn *relu_forward;                                   /* propagates NaN */
    dt_backend_relu_backward_fn *relu_backward;                                 /* dinp may alias dout */
    /* NULL: no context parallelism on this backend (all three or none) */
    dt_backend_attention_chunk_forward_fn *attention_chunk_forward;
    dt_backend_attention_chunk_backward_fn *attention_chunk_backward;
    dt_backend_copy2d_fn *copy2d;
    /* NULL: no FP8 on this backend (both or neither) */
    dt_backend_fp8_quantize_fn *fp8_quantize;
    dt_backend_fp8_gemm_fn *fp8_gemm;
} dt_backend_ops;

struct dt_backend {
    const char *name;
    dt_device device;
    void *impl;                /* backend-private state */
    int threads;               /* what the ops split their work by (set_threads) */
    int workers;               /* the threads that run it now, 1..threads (set_workers) */
    const dt_backend_ops *ops; /* the backend's table, called through the front */
    /* Row stride, in floats, that the backend wants for wide activations
     * whose width is the model's choice (the LM head's logits, V columns):
     * callers round such a stride up to a multiple of it (1: none, the
     * CPU's; 64 on CUDA, so that FP32 and 16-bit rows start 256 and 128
     * bytes apart, as tensor-core GEMMs want). Set by the creator. */
    int row_align;

    /* The checked front (backend.c), the same for every backend: callers
     * call be->gemm(be, ...) and so on; each member checks the arguments,
     * with the same status and message for every backend, then calls
     * be->ops. set_gemm_inputs and set_gemm_shadow are NULL where the
     * backend has none. */
    dt_backend_destroy_fn *destroy;
    dt_backend_set_threads_fn *set_threads;
    dt_backend_set_workers_fn *set_workers;
    dt_backend_alloc_fn *alloc;
    dt_backend_free_fn *free;
    dt_backend_memset_zero_fn *memset_zero;
    dt_backend_copy_fn *copy;
    dt_backend_synchronize_fn *synchronize;
    dt_backend_set_gemm_inputs_fn *set_gemm_inputs;
    dt_backend_set_gemm_shadow_fn *set_gemm_shadow;
    dt_backend_gemm_fn *gemm;
    dt_backend_encoder_forward_fn *encoder_forward;
    dt_backend_encoder_backward_fn *encoder_backward;
    dt_backend_layernorm_forward_fn *layernorm_forward;
    dt_backend_layernorm_backward_fn *layernorm_backward;
    dt_backend_matmul_forward_fn *matmul_forward;
    dt_backend_matmul_backward_fn *matmul_backward;
    dt_backend_attention_forward_fn *attention_forward;
    dt_backend_attention_backward_fn *attention_backward;
    dt_backend_gelu_forward_fn *gelu_forward;
    dt_backend_gelu_backward_fn *gelu_backward;
    dt_backend_residual_forward_fn *residual_forward;
    dt_backend_crossentropy_forward_backward_fn *crossentropy_forward_backward;
    dt_backend_crossentropy_part_fn *crossentropy_part;
    dt_backend_sumsq_fn *sumsq;
    dt_backend_scale_fn *scale;
    dt_backend_adamw_update_fn *adamw_update;
    dt_backend_sgd_update_fn *sgd_update;
    dt_backend_lars_update_fn *lars_update;
    dt_backend_lamb_direction_fn *lamb_direction;
    dt_backend_axpy_fn *axpy;
    dt_backend_cast_fn *cast;
    dt_backend_round_fn *round;                           /* NULL where the backend has none */
    dt_backend_round_bf16_fn *round_bf16;                 /* NULL where the backend has none */
    dt_backend_gelu_forward_bf16_fn *gelu_forward_bf16;   /* NULL where the backend has none */
    dt_backend_gelu_backward_bf16_fn *gelu_backward_bf16; /* NULL where the backend has none */
    dt_backend_unscale_check_fn *unscale_check;
    dt_backend_span_stats_fn *span_stats;
    dt_backend_batchnorm_forward_fn *batchnorm_forward;
    dt_backend_batchnorm_backward_fn *batchnorm_backward;
    dt_backend_relu_forward_fn *relu_forward;
    dt_backend_relu_backward_fn *relu_backward;
    /* NULL where the backend has none (checked when the op is there) */
    dt_backend_attention_chunk_forward_fn *attention_chunk_forward;
    dt_backend_attention_chunk_backward_fn *attention_chunk_backward;
    dt_backend_copy2d_fn *copy2d;
    dt_backend_fp8_quantize_fn *fp8_quantize; /* NULL where the backend has no FP8 */
    dt_backend_fp8_gemm_fn *fp8_gemm;
};

/* Create a backend by name ("cpu" or "cuda"). threads <= 0: default. */
DT_API dt_status dt_backend_create(const char *name, int threads, dt_backend **out);
/* What a backend may be told at creation beyond its name. */
typedef struct dt_backend_options {
    int threads; /* CPU threads; <= 0: the default */
    /* This process's index among the job's processes on its node (a
     * communicator's local_rank, include/dt_comm.h), from which the CUDA
     * backend takes GPU local_rank mod the device count; -1: unknown, the
     * launcher's variables decide (docs/cuda.md). The CPU ignores it. */
    int local_rank;
} dt_backend_options;
/* dt_backend_create with options (opts NULL: threads 0, local_rank -1). */
DT_API dt_status dt_backend_create_with(const char *name, const dt_backend_options *opts, dt_backend **out);
DT_API void dt_backend_destroy(dt_backend *be);
/* The CPU backend (always built). It checks the room for its threads'
 * OpenBLAS work buffers and maps them before anything else
 * (dt_backend_cpu_blas_room): DT_ERR_NOMEM when they do not fit. */
DT_API dt_status dt_backend_cpu_create(int threads, dt_backend **out);
/* OpenBLAS retries a failed allocation of a thread's work buffer for ever
 * (the thread spins, and exit() waits for it), so a program checks the
 * room before a thread first needs one. DT_OK when the address space has
 * room for `threads` more threads calling OpenBLAS (a buffer, a stack and
 * a malloc arena each); else DT_ERR_NOMEM, one line naming `whose`
 * threads. Call it before openblas_set_num_threads starts OpenBLAS's own
 * threads. */
DT_API dt_status dt_backend_cpu_blas_room(int threads, const char *whose);
/* What runs the CPU backend's GEMMs under set_gemm_inputs(DT_BF16): the
 * name of oneDNN's implementation ("brg:avx512_core_amx_bf16", ...) when
 * this build has oneDNN and it has a real bf16 kernel on this CPU, or NULL
 * (the GEMMs stay FP32 through OpenBLAS, on the same exact values). */
DT_API const char *dt_backend_cpu_bf16_engine(void);
/* The same for the threads OpenBLAS started when it loaded (its thread
 * count less one, which map their buffers as they begin): first thing in
 * the main of a program that links OpenBLAS. */
DT_API dt_status dt_backend_cpu_blas_startup(void);
/* The CUDA backend (cuda/; docs/cuda.md) on the GPU of the launcher's
 * local rank mod the device count, else the current CUDA device.
 * threads is accepted and ignored. Fails with DT_ERR_UNSUPPORTED and a
 * one-line message when no CUDA device is usable or the build has no CUDA. */
DT_API dt_status dt_backend_cuda_create(int threads, dt_backend **out);
/* The same with options: local_rank >= 0 picks GPU local_rank mod the
 * device count; -1 the launcher's local rank variables, else the current
 * device. */
DT_API dt_status dt_backend_cuda_create_with(const dt_backend_options *opts, dt_backend **out);

/* For backend implementations (backend.c): a new instance of ops with its
 * checked front, name, device and impl; threads is left 0 (the creator
 * calls be->set_threads). Free it with free() before ops->destroy could
 * run, through be->destroy after. */
dt_status dt__backend_new(const dt_backend_ops *ops, const char *name, dt_device device, void *impl, dt_backend **out);

#ifdef __cplusplus
}
#endif
#endif
