/* cpu_backend.c: the CPU backend's table: memory (64-byte aligned, zeroed),
 * threads (one OpenMP pool; OpenBLAS single-threaded inside it), and the ops from the
 * cpu_*.c files. It is the reference every other backend is tested against. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_backend.h"

static void dt__cpu_destroy(dt_backend *be) { free(be); }

static dt_status dt__cpu_set_threads(dt_backend *be, int n)
{
    if (n <= 0) {
#ifdef _OPENMP
        n = omp_get_num_procs();
#else
        n = 1;
#endif
    }
    if (n > 1024) return DT_FAIL(DT_ERR_INVALID, "--threads %d: expected 1..1024", n);
    /* OpenBLAS stays single-threaded: GEMMs are split across OpenMP's
     * threads instead (cpu_gemm.c), so one pool serves every op. */
    openblas_set_num_threads(1);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    be->threads = n;
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

dt_status dt_backend_cpu_create(int threads, dt_backend **out)
{
    *out = NULL;
    dt_backend *be = calloc(1, sizeof *be);
    if (!be) return DT_FAIL(DT_ERR_NOMEM, "cpu backend: out of memory");
    be->name = "cpu";
    be->device = DT_DEVICE_CPU;
    be->destroy = dt__cpu_destroy;
    be->set_threads = dt__cpu_set_threads;
    be->alloc = dt__cpu_alloc;
    be->free = dt__cpu_free;
    be->memset_zero = dt__cpu_memset_zero;
    be->copy = dt__cpu_copy;
    be->synchronize = dt__cpu_synchronize;
    be->gemm = dt__cpu_gemm;
    be->encoder_forward = dt__cpu_encoder_forward;
    be->encoder_backward = dt__cpu_encoder_backward;
    be->layernorm_forward = dt__cpu_layernorm_forward;
    be->layernorm_backward = dt__cpu_layernorm_backward;
    be->matmul_forward = dt__cpu_matmul_forward;
    be->matmul_backward = dt__cpu_matmul_backward;
    be->attention_forward = dt__cpu_attention_forward;
    be->attention_backward = dt__cpu_attention_backward;
    be->gelu_forward = dt__cpu_gelu_forward;
    be->gelu_backward = dt__cpu_gelu_backward;
    be->residual_forward = dt__cpu_residual_forward;
    be->crossentropy_forward_backward = dt__cpu_crossentropy_forward_backward;
    be->sumsq = dt__cpu_sumsq;
    be->scale = dt__cpu_scale;
    be->adamw_update = dt__cpu_adamw_update;
    be->sgd_update = dt__cpu_sgd_update;
    be->lars_update = dt__cpu_lars_update;
    be->lamb_direction = dt__cpu_lamb_direction;
    be->axpy = dt__cpu_axpy;
    be->cast = dt__cpu_cast;
    be->unscale_check = dt__cpu_unscale_check;
    be->batchnorm_forward = dt__cpu_batchnorm_forward;
    be->batchnorm_backward = dt__cpu_batchnorm_backward;
    be->relu_forward = dt__cpu_relu_forward;
    be->relu_backward = dt__cpu_relu_backward;
    dt_status st = dt__cpu_set_threads(be, threads);
    if (st != DT_OK) {
        free(be);
        return st;
    }
    *out = be;
    return DT_OK;
}
