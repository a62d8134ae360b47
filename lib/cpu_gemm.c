/* cpu_gemm.c: GEMM and linear layers on the CPU through OpenBLAS.
 *
 * Row-major throughout. A linear layer stores w as (OC, C) like PyTorch and
 * llm.c, so forward is out = inp @ w^T and the weight gradient is
 * dw += dout^T @ inp. The bias is broadcast into out before the GEMM
 * (beta = 1), which costs one pass over out instead of two. */
#include <cblas.h>

#include "cpu_backend.h"

dt_status dt__cpu_gemm(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    (void)be;
    if (M < 0 || N < 0 || K < 0) return DT_FAIL(DT_ERR_INVALID, "gemm: negative size %dx%dx%d", M, N, K);
    if (M == 0 || N == 0) return DT_OK;
    if (K == 0) {
        /* BLAS would leave C untouched only for beta == 1; make K = 0 mean C *= beta. */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return DT_OK;
    }
    cblas_sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
    return DT_OK;
}

dt_status dt__cpu_matmul_forward(dt_backend *be, float *out, const float *inp, const float *w, const float *bias,
                                 int N, int C, int OC)
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
    return dt__cpu_gemm(be, 0, 1, N, OC, C, 1.0f, inp, C, w, C, beta, out, OC);
}

dt_status dt__cpu_matmul_backward(dt_backend *be, float *dinp, float *dw, float *dbias, const float *dout,
                                  const float *inp, const float *w, int N, int C, int OC)
{
    if (dinp) DT_CHECK(dt__cpu_gemm(be, 0, 0, N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C));
    DT_CHECK(dt__cpu_gemm(be, 1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, C));
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
