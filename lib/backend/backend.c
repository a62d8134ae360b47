/* backend.c: creates backends by name, and the checked front of every
 * backend (the members of dt_backend; the pattern of ggml's backend calls
 * and NCCL's collectives: check once, then dispatch).
 *
 * Owns: dt_backend_create / dt_backend_destroy; dt__backend_new, which
 * gives each instance the front; and the argument checks that every
 * backend makes alike, each written once here with the status and message
 * every backend returns. "cuda" is the .cu files of cuda/, or
 * cuda/cuda_none.c (which says the build has no CUDA) in a build without it.
 *
 * Invariants: a front member checks, then calls be->ops with the same
 * arguments and returns its status unchanged; it never touches the data
 * (device pointers need not be host-readable). What only one backend
 * rejects (device-side data checks, its own limits) stays in that backend. */
#include <stdlib.h>
#include <string.h>

#include "dt_backend.h"

dt_status dt_backend_create(const char *name, int threads, dt_backend **out)
{
    *out = NULL;
    if (name == NULL || strcmp(name, "cpu") == 0) return dt_backend_cpu_create(threads, out);
    if (strcmp(name, "cuda") == 0) return dt_backend_cuda_create(threads, out);
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

static void dt__front_destroy(dt_backend *be) { be->ops->destroy(be); }

static dt_status dt__front_set_threads(dt_backend *be, int n)
{
    if (n > 1024) return DT_FAIL(DT_ERR_INVALID, "--threads %d: expected 1..1024", n);
    return be->ops->set_threads(be, n);
}

static dt_status dt__front_alloc(dt_backend *be, size_t bytes, void **out) { return be->ops->alloc(be, bytes, out); }

static void dt__front_free(dt_backend *be, void *p) { be->ops->free(be, p); }

static dt_status dt__front_memset_zero(dt_backend *be, void *p, size_t bytes)
{
    return be->ops->memset_zero(be, p, bytes);
}

static dt_status dt__front_copy(dt_backend *be, void *dst, const void *src, size_t bytes, dt_copy_kind kind)
{
    return be->ops->copy(be, dst, src, bytes, kind);
}

static dt_status dt__front_synchronize(dt_backend *be) { return be->ops->synchronize(be); }

static dt_status dt__front_set_gemm_inputs(dt_backend *be, dt_dtype dtype)
{
    return be->ops->set_gemm_inputs(be, dtype);
}

static dt_status dt__front_gemm(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha,
                                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M < 0 || N < 0 || K < 0) return DT_FAIL(DT_ERR_INVALID, "gemm: negative size %dx%dx%d", M, N, K);
    return be->ops->gemm(be, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static dt_status dt__front_encoder_forward(dt_backend *be, float *out, const int32_t *tokens, const float *wte,
                                           const float *wpe, int B, int T, int C)
{
    return be->ops->encoder_forward(be, out, tokens, wte, wpe, B, T, C);
}

static dt_status dt__front_encoder_backward(dt_backend *be, float *dwte, float *dwpe, const float *dout,
                                            const int32_t *tokens, int B, int T, int C)
{
    return be->ops->encoder_backward(be, dwte, dwpe, dout, tokens, B, T, C);
}

static dt_status dt__front_layernorm_forward(dt_backend *be, float *out, float *mean, float *rstd, const float *inp,
                                             const float *w, const float *b, int N, int C)
{
    return be->ops->layernorm_forward(be, out, mean, rstd, inp, w, b, N, C);
}

static dt_status dt__front_layernorm_backward(dt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                              const float *inp, const float *w, const float *mean, const float *rstd,
                                              int N, int C)
{
    return be->ops->layernorm_backward(be, dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}

static dt_status dt__front_matmul_forward(dt_backend *be, float *out, const float *inp, const float *w,
                                          const float *bias, int N, int C, int OC)
{
    return be->ops->matmul_forward(be, out, inp, w, bias, N, C, OC);
}

static dt_status dt__front_matmul_backward(dt_backend *be, float *dinp, float *dw, float *dbias, const float *dout,
                                           const float *inp, const float *w, int N, int C, int OC)
{
    return be->ops->matmul_backward(be, dinp, dw, dbias, dout, inp, w, N, C, OC);
}

static dt_status dt__front_attention_forward(dt_backend *be, float *out, float *att, const float *qkv, int B, int T,
                                             int C, int NH)
{
    DT_CHECK(dt__check_heads(C, NH));
    return be->ops->attention_forward(be, out, att, qkv, B, T, C, NH);
}

static dt_status dt__front_attention_backward(dt_backend *be, float *dqkv, float *scratch, const float *dout,
                                              const float *qkv, const float *att, int B, int T, int C, int NH)
{
    DT_CHECK(dt__check_heads(C, NH));
    return be->ops->attention_backward(be, dqkv, scratch, dout, qkv, att, B, T, C, NH);
}

static dt_status dt__front_gelu_forward(dt_backend *be, float *out, const float *inp, size_t n)
{
    return be->ops->gelu_forward(be, out, inp, n);
}

static dt_status dt__front_gelu_backward(dt_backend *be, float *dinp, const float *inp, const float *dout, size_t n)
{
    return be->ops->gelu_backward(be, dinp, inp, dout, n);
}

static dt_status dt__front_residual_forward(dt_backend *be, float *out, const float *a, const float *b, size_t n)
{
    return be->ops->residual_forward(be, out, a, b, n);
}

static dt_status dt__front_crossentropy_forward_backward(dt_backend *be, float *losses, uint8_t *correct,
                                                         float *dlogits, const float *logits, const int32_t *targets,
                                                         int N, int V, float dloss)
{
    return be->ops->crossentropy_forward_backward(be, losses, correct, dlogits, logits, targets, N, V, dloss);
}

static dt_status dt__front_sumsq(dt_backend *be, const float *x, size_t n, double *out)
{
    return be->ops->sumsq(be, x, n, out);
}

static dt_status dt__front_scale(dt_backend *be, float *x, float s, size_t n) { return be->ops->scale(be, x, s, n); }

static dt_status dt__front_adamw_update(dt_backend *be, float *p, const float *g, float *m, float *v, size_t n,
                                        float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
                                        float grad_scale)
{
    DT_CHECK(dt__check_bias_corrections("adamw", bc1, bc2));
    return be->ops->adamw_update(be, p, g, m, v, n, lr, beta1, beta2, eps, wd, bc1, bc2, grad_scale);
}

static dt_status dt__front_sgd_update(dt_backend *be, float *p, const float *g, float *buf, size_t n, float lr,
                                      float momentum, float wd, float grad_scale, int nesterov, int first)
{
    return be->ops->sgd_update(be, p, g, buf, n, lr, momentum, wd, grad_scale, nesterov, first);
}

static dt_status dt__front_lars_update(dt_backend *be, float *p, const float *g, float *buf, size_t n, float lr,
                                       float trust, float momentum, float wd, float grad_scale)
{
    return be->ops->lars_update(be, p, g, buf, n, lr, trust, momentum, wd, grad_scale);
}

static dt_status dt__front_lamb_direction(dt_backend *be, float *u, const float *p, const float *g, float *m, float *v,
                                          size_t n, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
                                          float grad_scale)
{
    DT_CHECK(dt__check_bias_corrections("lamb", bc1, bc2));
    return be->ops->lamb_direction(be, u, p, g, m, v, n, beta1, beta2, eps, wd, bc1, bc2, grad_scale);
}

static dt_status dt__front_axpy(dt_backend *be, float *y, float a, const float *x, size_t n)
{
    return be->ops->axpy(be, y, a, x, n);
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

static dt_status dt__front_relu_forward(dt_backend *be, float *out, const float *inp, size_t n)
{
    return be->ops->relu_forward(be, out, inp, n);
}

static dt_status dt__front_relu_backward(dt_backend *be, float *dinp, const float *inp, const float *dout, size_t n)
{
    return be->ops->relu_backward(be, dinp, inp, dout, n);
}

/* Every instance starts as this copy; see dt_backend in dt_backend.h. */
static const dt_backend dt__front = {
    .destroy = dt__front_destroy,
    .set_threads = dt__front_set_threads,
    .alloc = dt__front_alloc,
    .free = dt__front_free,
    .memset_zero = dt__front_memset_zero,
    .copy = dt__front_copy,
    .synchronize = dt__front_synchronize,
    .set_gemm_inputs = dt__front_set_gemm_inputs,
    .gemm = dt__front_gemm,
    .encoder_forward = dt__front_encoder_forward,
    .encoder_backward = dt__front_encoder_backward,
    .layernorm_forward = dt__front_layernorm_forward,
    .layernorm_backward = dt__front_layernorm_backward,
    .matmul_forward = dt__front_matmul_forward,
    .matmul_backward = dt__front_matmul_backward,
    .attention_forward = dt__front_attention_forward,
    .attention_backward = dt__front_attention_backward,
    .gelu_forward = dt__front_gelu_forward,
    .gelu_backward = dt__front_gelu_backward,
    .residual_forward = dt__front_residual_forward,
    .crossentropy_forward_backward = dt__front_crossentropy_forward_backward,
    .sumsq = dt__front_sumsq,
    .scale = dt__front_scale,
    .adamw_update = dt__front_adamw_update,
    .sgd_update = dt__front_sgd_update,
    .lars_update = dt__front_lars_update,
    .lamb_direction = dt__front_lamb_direction,
    .axpy = dt__front_axpy,
    .cast = dt__front_cast,
    .unscale_check = dt__front_unscale_check,
    .batchnorm_forward = dt__front_batchnorm_forward,
    .batchnorm_backward = dt__front_batchnorm_backward,
    .relu_forward = dt__front_relu_forward,
    .relu_backward = dt__front_relu_backward,
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
    if (!ops->set_gemm_inputs) be->set_gemm_inputs = NULL;
    *out = be;
    return DT_OK;
}
