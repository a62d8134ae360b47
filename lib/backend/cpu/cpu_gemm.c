/* cpu_gemm.c: GEMM and linear layers on the CPU through OpenBLAS.
 *
 * Row-major throughout. A linear layer stores w as (OC, C) like PyTorch and
 * llm.c, so forward is out = inp @ w^T and the weight gradient is
 * dw += dout^T @ inp. The bias is broadcast into out before the GEMM
 * (beta = 1), which costs one pass over out instead of two.
 *
 * Threads: OpenBLAS always runs single-threaded (set once by the backend);
 * dt__cpu_gemm splits the output into one block of rows (or columns) per
 * backend thread (be->threads) and calls cblas_sgemm on each, on as many
 * OpenMP threads as be->workers. One thread pool, OpenMP's,
 * then serves GEMMs and elementwise ops alike. With OpenBLAS's own pool next
 * to OpenMP's, each pool's workers spin after their work and steal the
 * cores the other needs: `dtbench train --threads 2` ran at 1977 tokens/s
 * that way against 2539 with one pool. Each output element is
 * computed by one thread in BLAS's own order, so results do not depend on
 * timing, nor on how many threads run the blocks. The linear layers' GEMMs go through the checked front
 * (be->gemm), which rejects negative sizes for them too.
 *
 * Mixed precision (set_gemm_inputs(DT_BF16)): the model promises that every
 * GEMM input is a bf16 value, so when oneDNN has a real bf16 kernel here
 * (dt__cpu_dnnl_probe: AMX or AVX512-BF16) each operand is cast to bf16
 * (exact: the values are bf16 already) into the backend's scratch, or read
 * from the 16-bit copy registered by set_gemm_shadow (the weights), and
 * each block of the same split runs oneDNN's bf16 matmul on its one
 * thread (cpu_dnnl.c): exact products, FP32 sums, so results differ from
 * the FP32 GEMMs by summation order only, and still not with timing or the
 * worker count. fp16 and CPUs without such a kernel keep the FP32 GEMMs on
 * the same (exact) values. */
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <stdlib.h>
#include <string.h>

#include "cpu_backend.h"
#include "dt_half.h"

/* Below this many multiply-adds per thread a split costs more than it saves. */
#define DT__GEMM_SPLIT_MIN (1 << 18)

/* The blocks of a GEMM's split: nt blocks of chunk rows (by_rows) or
 * columns, from be->threads and the shape only (OpenBLAS's and oneDNN's
 * sums depend on the block's shape, so the split must not follow the
 * threads that happen to run it: see set_workers). Inside a parallel
 * region, of any team size, one block. */
static int dt__gemm_split(const dt_backend *be, int M, int N, int K, int *by_rows, int *chunk)
{
    int nt = be->threads;
#ifdef _OPENMP
    if (omp_get_level() > 0) nt = 1;
#endif
    double work = (double)M * N * K;
    if (nt > 1 && work / nt < DT__GEMM_SPLIT_MIN) {
        nt = (int)(work / DT__GEMM_SPLIT_MIN);
        if (nt < 1) nt = 1;
    }
    /* Split the longer output side into nt blocks, multiples of 16 where possible. */
    *by_rows = M >= N;
    const int len = *by_rows ? M : N;
    int c = (len + nt - 1) / nt;
    if (c > 16) c = (c + 15) & ~15;
    *chunk = c;
    return nt;
}

/* The bf16 copy of the floats [p, p + n): the registered shadow holding
 * all of them, or NULL. */
static const uint16_t *dt__gemm_shadow_of(const dt__cpu_impl *im, const float *p, size_t n)
{
    const uintptr_t lo = (uintptr_t)p, hi = lo + n * sizeof(float);
    for (int i = 0; i < DT__CPU_SHADOWS; i++) {
        const dt__cpu_shadow *s = &im->shadow[i];
        if (!s->f32 || s->dtype != DT_BF16) continue;
        const uintptr_t b = (uintptr_t)s->f32;
        if (lo >= b && hi <= b + s->n * sizeof(float)) return (const uint16_t *)s->half + (lo - b) / sizeof(float);
    }
    return NULL;
}

/* Elements an operand of rows x cols (stored transposed when trans) with
 * leading dimension ld spans. */
static size_t dt__gemm_span(int rows, int cols, int ld, int trans)
{
    const int outer = trans ? cols : rows, inner = trans ? rows : cols;
    return (size_t)(outer - 1) * (size_t)ld + (size_t)inner;
}

/* The bf16 path (the caller holds im->mu): operands to bf16, then one
 * oneDNN matmul per block. */
static dt_status dt__gemm_bf16(dt_backend *be, dt__cpu_impl *im, int transa, int transb, int M, int N, int K,
                               float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                               int ldc)
{
    const size_t na = dt__gemm_span(M, K, lda, transa), nb = dt__gemm_span(K, N, ldb, transb);
    const uint16_t *a16 = dt__gemm_shadow_of(im, A, na), *b16 = dt__gemm_shadow_of(im, B, nb);
    const size_t need = (a16 ? 0 : na) + (b16 ? 0 : nb);
    if (need > im->cap) {
        free(im->scratch);
        im->scratch = aligned_alloc(64, (need * sizeof(uint16_t) + 63) & ~(size_t)63);
        im->cap = im->scratch ? need : 0;
        if (!im->scratch)
            return DT_FAIL(DT_ERR_NOMEM, "cpu backend: out of memory: cannot allocate %zu bytes for bf16 operands",
                           need * sizeof(uint16_t));
    }
    uint16_t *next = im->scratch;
    if (!a16) { /* exact: the model promised bf16 values */
        DT_CHECK(dt__cpu_cast(be, next, DT_BF16, A, DT_F32, na));
        a16 = next;
        next += na;
    }
    if (!b16) {
        DT_CHECK(dt__cpu_cast(be, next, DT_BF16, B, DT_F32, nb));
        b16 = next;
    }
    int by_rows, chunk;
    const int nt = dt__gemm_split(be, M, N, K, &by_rows, &chunk);
    if (nt <= 1) return dt__cpu_dnnl_gemm_bf16(transa, transb, M, N, K, alpha, a16, lda, b16, ldb, beta, C, ldc);
    const int len = by_rows ? M : N;
    int failed = 0;
#pragma omp parallel for schedule(static) num_threads(nt < be->workers ? nt : be->workers) reduction(| : failed)
    for (int p = 0; p < nt; p++) {
        int lo = p * chunk, hi = lo + chunk < len ? lo + chunk : len;
        if (lo >= hi) continue;
        dt_status st;
        if (by_rows) {
            const uint16_t *Ap = transa ? a16 + lo : a16 + (size_t)lo * lda;
            st = dt__cpu_dnnl_gemm_bf16(transa, transb, hi - lo, N, K, alpha, Ap, lda, b16, ldb, beta,
                                        C + (size_t)lo * ldc, ldc);
        } else {
            const uint16_t *Bp = transb ? b16 + (size_t)lo * ldb : b16 + lo;
            st = dt__cpu_dnnl_gemm_bf16(transa, transb, M, hi - lo, K, alpha, a16, lda, Bp, ldb, beta, C + lo, ldc);
        }
        failed |= st != DT_OK;
    }
    if (failed) return DT_FAIL(DT_ERR_BACKEND, "cpu backend: a bf16 GEMM block failed (%s)", dt_last_error());
    return DT_OK;
}

dt_status dt__cpu_gemm(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M == 0 || N == 0) return DT_OK;
    if (K == 0) {
        /* BLAS would leave C untouched only for beta == 1; make K = 0 mean C *= beta. */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return DT_OK;
    }
    dt__cpu_impl *im = be->impl;
    if (im && im->bf16_gemm && im->gemm_inputs == DT_BF16) {
        pthread_mutex_lock(&im->mu);
        const dt_status st = dt__gemm_bf16(be, im, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        pthread_mutex_unlock(&im->mu);
        return st;
    }
    const enum CBLAS_TRANSPOSE ta = transa ? CblasTrans : CblasNoTrans, tb = transb ? CblasTrans : CblasNoTrans;
    int by_rows, chunk;
    const int nt = dt__gemm_split(be, M, N, K, &by_rows, &chunk);
    if (nt <= 1) {
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return DT_OK;
    }
    const int len = by_rows ? M : N;
#pragma omp parallel for schedule(static) num_threads(nt < be->workers ? nt : be->workers)
    for (int p = 0; p < nt; p++) {
        int lo = p * chunk, hi = lo + chunk < len ? lo + chunk : len;
        if (lo >= hi) continue;
        if (by_rows) {
            const float *Ap = transa ? A + lo : A + (size_t)lo * lda;
            cblas_sgemm(CblasRowMajor, ta, tb, hi - lo, N, K, alpha, Ap, lda, B, ldb, beta, C + (size_t)lo * ldc, ldc);
        } else {
            const float *Bp = transb ? B + (size_t)lo * ldb : B + lo;
            cblas_sgemm(CblasRowMajor, ta, tb, M, hi - lo, K, alpha, A, lda, Bp, ldb, beta, C + lo, ldc);
        }
    }
    return DT_OK;
}

dt_status dt__cpu_set_gemm_inputs(dt_backend *be, dt_dtype dtype)
{
    if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "set_gemm_inputs: dtype %d is not f32, f16 or bf16", (int)dtype);
    dt__cpu_impl *im = be->impl;
    im->gemm_inputs = dtype;
    return DT_OK;
}

/* The table under im->mu, as the GEMMs read it: the model registers and
 * forgets ranges around single GEMMs (lib/model/block.c), so a GEMM on
 * another thread must never see a half-written entry. */
static dt_status dt__gemm_shadow_set(dt__cpu_impl *im, const float *f32, size_t n, const void *half, dt_dtype dtype)
{
    int at = -1;
    for (int i = 0; i < DT__CPU_SHADOWS; i++) {
        if (im->shadow[i].f32 == f32) {
            at = i;
            break;
        }
        if (!im->shadow[i].f32 && at < 0) at = i;
    }
    if (!half) {
        if (at >= 0 && im->shadow[at].f32 == f32) im->shadow[at] = (dt__cpu_shadow){0};
        return DT_OK;
    }
    if (at < 0)
        return DT_FAIL(DT_ERR_INVALID, "set_gemm_shadow: %d ranges registered already (the most)", DT__CPU_SHADOWS);
    im->shadow[at] = (dt__cpu_shadow){.f32 = f32, .n = n, .half = half, .dtype = dtype};
    return DT_OK;
}

dt_status dt__cpu_set_gemm_shadow(dt_backend *be, const float *f32, size_t n, const void *half, dt_dtype dtype)
{
    dt__cpu_impl *im = be->impl;
    if (!f32) return DT_FAIL(DT_ERR_INVALID, "set_gemm_shadow: no FP32 range");
    if (half && dtype != DT_F16 && dtype != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "set_gemm_shadow: dtype %s is not f16 or bf16", dt_dtype_name(dtype));
    pthread_mutex_lock(&im->mu);
    const dt_status st = dt__gemm_shadow_set(im, f32, n, half, dtype);
    pthread_mutex_unlock(&im->mu);
    return st;
}

dt_status dt__cpu_matmul_forward(dt_backend *be, float *out, const float *inp, const float *w, const float *bias, int N,
                                 int C, int OC)
{
    float beta = 0.0f;
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < N; i++) {
            float *o = out + (size_t)i * OC;
            for (int j = 0; j < OC; j++) o[j] = bias[j];
        }
        beta = 1.0f;
    }
    return be->gemm(be, 0, 1, N, OC, C, 1.0f, inp, C, w, C, beta, out, OC);
}

dt_status dt__cpu_matmul_backward(dt_backend *be, float *dinp, float *dw, float *dbias, const float *dout,
                                  const float *inp, const float *w, int N, int C, int OC)
{
    if (dinp) DT_CHECK(be->gemm(be, 0, 0, N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C));
    if (!dw) return DT_OK; /* the input gradient alone (a zero-bubble B) */
    DT_CHECK(be->gemm(be, 1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, C));
    if (dbias) {
        /* Columns split across threads; each sums its rows in a fixed order (deterministic). */
#pragma omp parallel for schedule(static)
        for (int j0 = 0; j0 < OC; j0 += 64) {
            int j1 = j0 + 64 < OC ? j0 + 64 : OC;
            float acc[64] = {0};
            for (int i = 0; i < N; i++) {
                const float *d = dout + (size_t)i * OC;
                for (int j = j0; j < j1; j++) acc[j - j0] += d[j];
            }
            for (int j = j0; j < j1; j++) dbias[j] += acc[j - j0];
        }
    }
    return DT_OK;
}
