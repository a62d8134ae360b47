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
 * (be->gemm), which rejects negative sizes for them too. */
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_backend.h"

/* Below this many multiply-adds per thread a split costs more than it saves. */
#define DT__GEMM_SPLIT_MIN (1 << 18)

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
    const enum CBLAS_TRANSPOSE ta = transa ? CblasTrans : CblasNoTrans, tb = transb ? CblasTrans : CblasNoTrans;
    /* nt: the blocks, from be->threads and the shape only (OpenBLAS's sums
     * depend on the block's shape, so the split must not follow the
     * threads that happen to run it: see set_workers). Inside a parallel
     * region, of any team size, one call. */
    int nt = be->threads;
#ifdef _OPENMP
    if (omp_get_level() > 0) nt = 1;
#endif
    double work = (double)M * N * K;
    if (nt > 1 && work / nt < DT__GEMM_SPLIT_MIN) {
        nt = (int)(work / DT__GEMM_SPLIT_MIN);
        if (nt < 1) nt = 1;
    }
    if (nt <= 1) {
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return DT_OK;
    }
    /* Split the longer output side into nt blocks, multiples of 16 where possible. */
    const int by_rows = M >= N;
    const int len = by_rows ? M : N;
    int chunk = (len + nt - 1) / nt;
    if (chunk > 16) chunk = (chunk + 15) & ~15;
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
