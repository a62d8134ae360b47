/* backend.c: creates backends by name, and the checked front of every
 * backend (the members of dt_backend; the pattern of ggml's backend calls
 * and NCCL's collectives: check once, then dispatch).
 *
 * Owns: dt_backend_create(_with) / dt_backend_destroy; dt__backend_new, which
 * gives each instance the front; and the argument checks that every
 * backend makes alike, each written once here with the status and message
 * every backend returns. "cuda" is the .cu files of cuda/, or
 * cuda/cuda_none.c (which says the build has no CUDA) in a build without it.
 *
 * Invariants: a front member checks, then calls be->ops with the same
 * arguments and returns its status unchanged (an op with nothing to check
 * is the backend's function itself); it never touches the data
 * (device pointers need not be host-readable). What only one backend
 * rejects (device-side data checks, its own limits) stays in that backend. */
#include <stdlib.h>
#include <string.h>

#include "dt_backend.h"

dt_status dt_backend_create(const char *name, int threads, dt_backend **out)
{
    const dt_backend_options opts = {threads, -1};
    return dt_backend_create_with(name, &opts, out);
}

dt_status dt_backend_create_with(const char *name, const dt_backend_options *opts, dt_backend **out)
{
    *out = NULL;
    const dt_backend_options def = {0, -1};
    if (opts == NULL) opts = &def;
    if (name == NULL || strcmp(name, "cpu") == 0) return dt_backend_cpu_create(opts->threads, out);
    if (strcmp(name, "cuda") == 0) return dt_backend_cuda_create_with(opts, out);
    return DT_FAIL(DT_ERR_INVALID, "--device '%s': unknown backend (expected cpu or cuda)", name);
}

void dt_backend_destroy(dt_backend *be)
{
    if (be && be->destroy) be->destroy(be);
}

/* ---- checks shared by several ops ----------------------------------------- */

static int dt__is_float_type(dt_dtype t) { return t == DT_F32 || t == DT_F16 || t == DT_BF16; }

static dt_status dt__check_heads(int C, int NH)
{
    if (NH <= 0 || C % NH != 0)
        return DT_FAIL(DT_ERR_INVALID, "attention: hidden size %d not divisible by %d heads", C, NH);
    return DT_OK;
}

/* bc = 1 - beta^t: 0 at step 0, a caller bug. */
static dt_status dt__check_bias_corrections(const char *op, float bc1, float bc2)
{
    if (!(bc1 > 0.0f) || !(bc2 > 0.0f))
        return DT_FAIL(DT_ERR_INVALID, "%s: bias corrections %g, %g (expected > 0: step count >= 1)", op, (double)bc1,
                       (double)bc2);
    return DT_OK;
}

/* ---- the front: one member per op, in dt_backend_ops' order ---------------- */

static dt_status dt__front_set_threads(dt_backend *be, int n)
{
    if (n > 1024) return DT_FAIL(DT_ERR_INVALID, "--threads %d: expected 1..1024", n);
    DT_CHECK(be->ops->set_threads(be, n));
    be->workers = be->threads;
    return DT_OK;
}

static dt_status dt__front_set_workers(dt_backend *be, int n)
{
    if (n < 1 || n > be->threads)
        return DT_FAIL(DT_ERR_INVALID, "set_workers %d: expected 1..%d (the backend's threads)", n, be->threads);
    if (be->ops->set_workers) DT_CHECK(be->ops->set_workers(be, n));
    else n = be->threads;
    be->workers = n;
    return DT_OK;
}

static dt_status dt__front_gemm(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha,
                                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M < 0 || N < 0 || K < 0) return DT_FAIL(DT_ERR_INVALID, "gemm: negative size %dx%dx%d", M, N, K);
    return be->ops->gemm(be, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static dt_status dt__front_attention_forward(dt_backend *be, float *out, float *lse, const float *qkv, int B, int T,
                                             int C, int NH)
{
    DT_CHECK(dt__check_heads(C, NH));
    return be->ops->attention_forward(be, out, lse, qkv, B, T, C, NH);
}

static dt_status dt__front_attention_backward(dt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                              const float *out, const float *lse, int B, int T, int C, int NH)
{
    DT_CHECK(dt__check_heads(C, NH));
    return be->ops->attention_backward(be, dqkv, dout, qkv, out, lse, B, T, C, NH);
}

static dt_status dt__front_adamw_update(dt_backend *be, float *p, const float *g, float *m, float *v, size_t n,
                                        float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
                                        float grad_scale)
{
    DT_CHECK(dt__check_bias_corrections("adamw", bc1, bc2));
    return be->ops->adamw_update(be, p, g, m, v, n, lr, beta1, beta2, eps, wd, bc1, bc2, grad_scale);
}

static dt_status dt__front_lamb_direction(dt_backend *be, float *u, const float *p, const float *g, float *m, float *v,
                                          size_t n, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
                                          float grad_scale)
{
    DT_CHECK(dt__check_bias_corrections("lamb", bc1, bc2));
    return be->ops->lamb_direction(be, u, p, g, m, v, n, beta1, beta2, eps, wd, bc1, bc2, grad_scale);
}

static dt_status dt__front_cast(dt_backend *be, void *dst, dt_dtype dst_type, const void *src, dt_dtype src_type,
                                size_t n)
{
    if (!dt__is_float_type(src_type) || !dt__is_float_type(dst_type))
        return DT_FAIL(DT_ERR_INVALID,
                       "cast: %s (%d) -> %s (%d) is not supported; expected f32, f16 or bf16 on both sides",
                       dt_dtype_name(src_type), (int)src_type, dt_dtype_name(dst_type), (int)dst_type);
    if (n == 0) return DT_OK;
    if (!dst || !src) return DT_FAIL(DT_ERR_INVALID, "cast: NULL %s pointer with n = %zu", dst ? "src" : "dst", n);
    return be->ops->cast(be, dst, dst_type, src, src_type, n);
}

static dt_status dt__front_unscale_check(dt_backend *be, float *x, float s, size_t n, int *nonfinite)
{
    if (!nonfinite) return DT_FAIL(DT_ERR_INVALID, "unscale_check: nonfinite must not be NULL");
    if (n == 0) return DT_OK;
    if (!x) return DT_FAIL(DT_ERR_INVALID, "unscale_check: NULL x with n = %zu", n);
    return be->ops->unscale_check(be, x, s, n, nonfinite);
}

static dt_status dt__front_span_stats(dt_backend *be, float *x, const dt_span *spans, int count, float s,
                                     int *nonfinite, double *sumsq)
{
    if (count < 0) return DT_FAIL(DT_ERR_INVALID, "span_stats: count %d (expected >= 0)", count);
    if (count == 0 || (!nonfinite && !sumsq)) return DT_OK;
    if (!spans) return DT_FAIL(DT_ERR_INVALID, "span_stats: NULL spans with count = %d", count);
    for (int i = 0; i < count; i++)
        if (spans[i].n && !x) return DT_FAIL(DT_ERR_INVALID, "span_stats: NULL x with span %d of %zu", i, spans[i].n);
    if (be->ops->span_stats) return be->ops->span_stats(be, x, spans, count, s, nonfinite, sumsq);
    /* the reference: one tensor at a time, with the backend's own ops */
    for (int i = 0; i < count; i++) {
        float *p = spans[i].n ? x + spans[i].offset : x;
        if (nonfinite) {
            nonfinite[i] = 0;
            if (spans[i].n) DT_CHECK(be->ops->unscale_check(be, p, s, spans[i].n, &nonfinite[i]));
        }
        if (sumsq) {
            sumsq[i] = 0.0;
            if (spans[i].n) DT_CHECK(be->ops->sumsq(be, p, spans[i].n, &sumsq[i]));
        }
    }
    return DT_OK;
}

static dt_status dt__front_batchnorm_forward(dt_backend *be, float *out, float *mean, float *rstd, float *running_mean,
                                             float *running_var, const float *inp, const float *w, const float *b,
                                             int N, int C, float momentum, float eps, int training)
{
    if (N < 1 || C < 1) return DT_FAIL(DT_ERR_INVALID, "batchnorm: %d rows of %d channels (expected >= 1 each)", N, C);
    if (!(eps > 0.0f)) return DT_FAIL(DT_ERR_INVALID, "batchnorm: eps %g (expected > 0)", (double)eps);
    if (training) {
        if (N < 2)
            return DT_FAIL(DT_ERR_INVALID,
                           "batchnorm: %d row in training mode (expected >= 2: the variance of one row is undefined)",
                           N);
        if (!(momentum >= 0.0f && momentum <= 1.0f))
            return DT_FAIL(DT_ERR_INVALID, "batchnorm: momentum %g (expected 0..1)", (double)momentum);
        if (!mean || !rstd) return DT_FAIL(DT_ERR_INVALID, "batchnorm: training mode needs mean and rstd outputs");
        if (!running_mean != !running_var)
            return DT_FAIL(DT_ERR_INVALID, "batchnorm: running_mean and running_var must both be given or both NULL");
    } else if (!running_mean || !running_var) {
        return DT_FAIL(DT_ERR_INVALID, "batchnorm: eval mode needs the running statistics");
    }
    return be->ops->batchnorm_forward(be, out, mean, rstd, running_mean, running_var, inp, w, b, N, C, momentum, eps,
                                      training);
}

static dt_status dt__front_batchnorm_backward(dt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                              const float *inp, const float *w, const float *mean, const float *rstd,
                                              int N, int C)
{
    if (N < 1 || C < 1) return DT_FAIL(DT_ERR_INVALID, "batchnorm backward: %d rows of %d channels", N, C);
    return be->ops->batchnorm_backward(be, dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}

static dt_status dt__front_crossentropy(dt_backend *be, float *losses, uint8_t *correct, float *dlogits,
                                        const float *logits, const int32_t *targets, int N, int V, int ld, float dloss)
{
    if (ld < V) return DT_FAIL(DT_ERR_INVALID, "cross-entropy: row stride %d below the vocabulary of %d", ld, V);
    return be->ops->crossentropy_forward_backward(be, losses, correct, dlogits, logits, targets, N, V, ld, dloss);
}

static dt_status dt__front_crossentropy_part(dt_backend *be, float *stats, float *dlogits, const float *ms,
                                             const float *logits, const int32_t *targets, int N, int V, int ld,
                                             int v0, float dloss)
{
    if (V < 1 || ld < V)
        return DT_FAIL(DT_ERR_INVALID, "cross-entropy part: %d columns, row stride %d (expected 1 <= columns <= stride)",
                       V, ld);
    if (v0 < 0) return DT_FAIL(DT_ERR_INVALID, "cross-entropy part: first column %d (expected >= 0)", v0);
    if (!stats == !dlogits || (dlogits && !ms))
        return DT_FAIL(DT_ERR_INVALID, "cross-entropy part: expected either stats or dlogits with the merged ms");
    return be->ops->crossentropy_part(be, stats, dlogits, ms, logits, targets, N, V, ld, v0, dloss);
}

static dt_status dt__check_chunk(const char *what, int ldq, int ldkv, int B, int T, int C, int NH)
{
    DT_CHECK(dt__check_heads(C, NH));
    if (B < 1 || T < 1 || ldq < C || ldkv < C)
        return DT_FAIL(DT_ERR_INVALID, "%s: B %d, T %d, C %d, row strides %d and %d (expected B, T >= 1, strides >= C)",
                       what, B, T, C, ldq, ldkv);
    return DT_OK;
}

static dt_status dt__front_attention_chunk_forward(dt_backend *be, float *out, float *lse, const float *q, int ldq,
                                                   const float *k, const float *v, int ldkv, int B, int T, int C,
                                                   int NH, int causal, int merge)
{
    DT_CHECK(dt__check_chunk("chunk attention", ldq, ldkv, B, T, C, NH));
    return be->ops->attention_chunk_forward(be, out, lse, q, ldq, k, v, ldkv, B, T, C, NH, causal, merge);
}

static dt_status dt__front_attention_chunk_backward(dt_backend *be, float *dq, float *dk, float *dv, const float *dout,
                                                    const float *out, const float *lse, const float *q, int ldq,
                                                    const float *k, const float *v, int ldkv, int B, int T, int C,
                                                    int NH, int causal)
{
    DT_CHECK(dt__check_chunk("chunk attention backward", ldq, ldkv, B, T, C, NH));
    return be->ops->attention_chunk_backward(be, dq, dk, dv, dout, out, lse, q, ldq, k, v, ldkv, B, T, C, NH, causal);
}

static dt_status dt__front_copy2d(dt_backend *be, float *dst, size_t ldd, const float *src, size_t lds, size_t rows,
                                  size_t cols)
{
    if ((rows > 1 && (ldd < cols || lds < cols)))
        return DT_FAIL(DT_ERR_INVALID, "copy2d: %zu columns in rows %zu and %zu apart", cols, ldd, lds);
    return be->ops->copy2d(be, dst, ldd, src, lds, rows, cols);
}

static dt_status dt__front_fp8_quantize(dt_backend *be, void *q, const float *x, int rows, int cols,
                                        const dt_fp8_quant *spec, dt_fp8_qstats *stats)
{
    if (!q || !x || !spec || !stats || rows <= 0 || cols <= 0)
        return DT_FAIL(DT_ERR_INVALID, "fp8_quantize: %d x %d (rows and columns must be positive, pointers set)", rows,
                       cols);
    if ((spec->tile_rows > 0 || spec->tile_cols > 0) && (spec->tile_rows <= 0 || spec->tile_cols <= 0 || !spec->dequant))
        return DT_FAIL(DT_ERR_INVALID, "fp8_quantize: tiles %d x %d (both positive, and dequantized)", spec->tile_rows,
                       spec->tile_cols);
    if (spec->format != DT_FP8_E4M3 && spec->format != DT_FP8_E5M2)
        return DT_FAIL(DT_ERR_INVALID, "fp8_quantize: format %d is not e4m3 or e5m2", (int)spec->format);
    if (!(spec->scale >= 0.0f) || spec->margin < 0)
        return DT_FAIL(DT_ERR_INVALID, "fp8_quantize: scale %g, margin %d (expected >= 0)", (double)spec->scale,
                       spec->margin);
    return be->ops->fp8_quantize(be, q, x, rows, cols, spec, stats);
}

static dt_status dt__front_fp8_gemm(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha,
                                    const void *A, dt_fp8_format fa, int lda, const void *B, dt_fp8_format fb, int ldb,
                                    float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0 || K <= 0 || !A || !B || !C || ldc < N || lda < (transa ? M : K) || ldb < (transb ? K : N))
        return DT_FAIL(DT_ERR_INVALID, "fp8_gemm: M %d N %d K %d with lda %d ldb %d ldc %d", M, N, K, lda, ldb, ldc);
    return be->ops->fp8_gemm(be, transa, transb, M, N, K, alpha, A, fa, lda, B, fb, ldb, beta, C, ldc);
}

/* Every instance starts as this copy (the checked ops); dt__backend_new
 * fills the others with the backend's functions. See dt_backend in dt_backend.h. */
static const dt_backend dt__front = {
    .set_threads = dt__front_set_threads,
    .set_workers = dt__front_set_workers,
    .gemm = dt__front_gemm,
    .attention_forward = dt__front_attention_forward,
    .attention_backward = dt__front_attention_backward,
    .adamw_update = dt__front_adamw_update,
    .lamb_direction = dt__front_lamb_direction,
    .crossentropy_forward_backward = dt__front_crossentropy,
    .crossentropy_part = dt__front_crossentropy_part,
    .cast = dt__front_cast,
    .unscale_check = dt__front_unscale_check,
    .span_stats = dt__front_span_stats,
    .batchnorm_forward = dt__front_batchnorm_forward,
    .batchnorm_backward = dt__front_batchnorm_backward,
};

dt_status dt__backend_new(const dt_backend_ops *ops, const char *name, dt_device device, void *impl, dt_backend **out)
{
    *out = NULL;
    dt_backend *be = malloc(sizeof *be);
    if (!be) return DT_FAIL(DT_ERR_NOMEM, "%s backend: out of memory", name);
    *be = dt__front;
    be->ops = ops;
    be->name = name;
    be->device = device;
    be->impl = impl;
    be->row_align = 1;
    /* the ops without a check are the backend's own functions, no extra call */
    be->destroy = ops->destroy;
    be->alloc = ops->alloc;
    be->free = ops->free;
    be->memset_zero = ops->memset_zero;
    be->synchronize = ops->synchronize;
    be->set_gemm_inputs = ops->set_gemm_inputs;
    be->set_gemm_shadow = ops->set_gemm_shadow;
    be->round = ops->round;
    be->round_bf16 = ops->round_bf16;
    be->gelu_forward_bf16 = ops->gelu_forward_bf16;
    be->gelu_backward_bf16 = ops->gelu_backward_bf16;
    be->scale = ops->scale;
    be->copy = ops->copy;
    be->encoder_forward = ops->encoder_forward;
    be->encoder_backward = ops->encoder_backward;
    be->layernorm_forward = ops->layernorm_forward;
    be->layernorm_backward = ops->layernorm_backward;
    be->matmul_forward = ops->matmul_forward;
    be->matmul_backward = ops->matmul_backward;
    be->gelu_forward = ops->gelu_forward;
    be->gelu_backward = ops->gelu_backward;
    be->residual_forward = ops->residual_forward;
    be->sumsq = ops->sumsq;
    be->sgd_update = ops->sgd_update;
    be->lars_update = ops->lars_update;
    be->axpy = ops->axpy;
    be->relu_forward = ops->relu_forward;
    be->relu_backward = ops->relu_backward;
    const int chunks = ops->attention_chunk_forward && ops->attention_chunk_backward && ops->copy2d;
    be->attention_chunk_forward = chunks ? dt__front_attention_chunk_forward : NULL;
    be->attention_chunk_backward = chunks ? dt__front_attention_chunk_backward : NULL;
    be->copy2d = chunks ? dt__front_copy2d : NULL;
    const int fp8 = ops->fp8_quantize && ops->fp8_gemm;
    be->fp8_quantize = fp8 ? dt__front_fp8_quantize : NULL;
    be->fp8_gemm = fp8 ? dt__front_fp8_gemm : NULL;
    *out = be;
    return DT_OK;
}
