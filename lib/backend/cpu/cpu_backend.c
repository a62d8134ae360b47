/* cpu_backend.c: the CPU backend's static const table of ops: memory
 * (64-byte aligned, zeroed), threads (one OpenMP pool; OpenBLAS
 * single-threaded inside it; ops whose split shapes their sums split by
 * be->threads, so set_workers can run them on fewer threads with the same
 * results), and the ops of the cpu_*.c files. It is the
 * reference every other backend is tested against. Arguments reach the
 * ops already checked by the front (backend.c). */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_backend.h"

static void dt__cpu_destroy(dt_backend *be) { free(be); }

/* n <= 0: one thread per core, which goes back through the front so it
 * meets the same limit as an explicit count. */
static dt_status dt__cpu_set_threads(dt_backend *be, int n)
{
    if (n <= 0) {
#ifdef _OPENMP
        return be->set_threads(be, omp_get_num_procs());
#else
        return be->set_threads(be, 1);
#endif
    }
    /* OpenBLAS stays single-threaded: GEMMs are split across OpenMP's
     * threads instead (cpu_gemm.c), so one pool serves every op. */
    openblas_set_num_threads(1);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    be->threads = n;
    return DT_OK;
}

/* Fewer threads run the same split (cpu_gemm.c, cpu_layers.c): each op
 * divides its work by be->threads and OpenMP hands the parts to n threads. */
static dt_status dt__cpu_set_workers(dt_backend *be, int n)
{
    (void)be;
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
    return DT_OK;
}

static dt_status dt__cpu_alloc(dt_backend *be, size_t bytes, void **out)
{
    (void)be;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) return DT_FAIL(DT_ERR_NOMEM, "cpu backend: cannot allocate %zu bytes", bytes);
    memset(p, 0, rounded);
    *out = p;
    return DT_OK;
}

static void dt__cpu_free(dt_backend *be, void *p)
{
    (void)be;
    free(p);
}

static dt_status dt__cpu_memset_zero(dt_backend *be, void *p, size_t bytes)
{
    (void)be;
    if (bytes) memset(p, 0, bytes);
    return DT_OK;
}

static dt_status dt__cpu_copy(dt_backend *be, void *dst, const void *src, size_t bytes, dt_copy_kind kind)
{
    (void)be;
    (void)kind; /* host and device memory are the same on the CPU */
    if (bytes && dst != src) memmove(dst, src, bytes);
    return DT_OK;
}

static dt_status dt__cpu_synchronize(dt_backend *be)
{
    (void)be;
    return DT_OK;
}

static const dt_backend_ops dt__cpu_ops = {
    .destroy = dt__cpu_destroy,                       /* free(be): no impl */
    .set_threads = dt__cpu_set_threads,               /* OpenMP pool; OpenBLAS single-threaded */
    .set_workers = dt__cpu_set_workers,               /* OpenMP's count; the ops split by be->threads */
    .alloc = dt__cpu_alloc,                           /* aligned_alloc(64), zeroed */
    .free = dt__cpu_free,                             /* free() */
    .memset_zero = dt__cpu_memset_zero,               /* memset */
    .copy = dt__cpu_copy,                             /* memmove: host and device memory are one */
    .synchronize = dt__cpu_synchronize,               /* nothing is queued: no-op */
    .set_gemm_inputs = NULL,                          /* none: FP32 GEMMs only */
    .set_gemm_shadow = NULL,                          /* none: nothing to cast */
    .gemm = dt__cpu_gemm,                             /* cpu_gemm.c: OpenBLAS per block of rows */
    .encoder_forward = dt__cpu_encoder_forward,       /* cpu_layers.c */
    .encoder_backward = dt__cpu_encoder_backward,     /* cpu_layers.c: channel slices */
    .layernorm_forward = dt__cpu_layernorm_forward,   /* cpu_layers.c */
    .layernorm_backward = dt__cpu_layernorm_backward, /* cpu_layers.c: per-thread partials */
    .matmul_forward = dt__cpu_matmul_forward,         /* cpu_gemm.c: bias, then gemm */
    .matmul_backward = dt__cpu_matmul_backward,       /* cpu_gemm.c */
    .attention_forward = dt__cpu_attention_forward,   /* cpu_attention.c: one (b, h) per task */
    .attention_backward = dt__cpu_attention_backward, /* cpu_attention.c */
    .gelu_forward = dt__cpu_gelu_forward,             /* cpu_layers.c */
    .gelu_backward = dt__cpu_gelu_backward,           /* cpu_layers.c */
    .residual_forward = dt__cpu_residual_forward,     /* cpu_layers.c */
    .crossentropy_forward_backward = dt__cpu_crossentropy_forward_backward, /* cpu_layers.c: checks the targets */
    .sumsq = dt__cpu_sumsq,                                                 /* cpu_optim.c: fixed chunks in double */
    .scale = dt__cpu_scale,                                                 /* cpu_optim.c */
    .adamw_update = dt__cpu_adamw_update,                                   /* cpu_optim.c */
    .sgd_update = dt__cpu_sgd_update,                                       /* cpu_optim.c */
    .lars_update = dt__cpu_lars_update,                                     /* cpu_optim.c */
    .lamb_direction = dt__cpu_lamb_direction,                               /* cpu_optim.c */
    .axpy = dt__cpu_axpy,                                                   /* cpu_optim.c */
    .cast = dt__cpu_cast,                                                   /* cpu_half.c: half.c array conversions */
    .unscale_check = dt__cpu_unscale_check,                                 /* cpu_half.c */
    .batchnorm_forward = dt__cpu_batchnorm_forward,                         /* cpu_batchnorm.c: double sums */
    .batchnorm_backward = dt__cpu_batchnorm_backward,                       /* cpu_batchnorm.c */
    .relu_forward = dt__cpu_relu_forward,                                   /* cpu_batchnorm.c */
    .relu_backward = dt__cpu_relu_backward,                                 /* cpu_batchnorm.c */
};

dt_status dt_backend_cpu_create(int threads, dt_backend **out)
{
    *out = NULL;
    dt_backend *be;
    DT_CHECK(dt__backend_new(&dt__cpu_ops, "cpu", DT_DEVICE_CPU, NULL, &be));
    dt_status st = be->set_threads(be, threads);
    if (st != DT_OK) {
        free(be);
        return st;
    }
    *out = be;
    return DT_OK;
}
