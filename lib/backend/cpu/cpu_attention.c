/* cpu_attention.c: causal multi-head self-attention on the CPU.
 *
 * qkv is (B, T, 3C) = [q | k | v] per position, head h owning channels
 * h*hs .. h*hs+hs-1 of each part (hs = C/NH). Every GEMM reads the heads in
 * place through leading dimensions (lda = 3C or C), so no transposed copies
 * are made. Per (b, h):
 *   forward:  S = Q K^T / sqrt(hs); P = causal_softmax(S) -> att; Y = P V
 *   backward: dP = dY V^T; dV = P^T dY; dS = P * (dP - rowsum(P * dP));
 *             dQ = dS K / sqrt(hs); dK = dS^T Q / sqrt(hs)
 * P is stored with zeros above the diagonal, so the full-width GEMMs give
 * the causal result.
 *
 * Threads: the (b, h) pairs are split statically across OpenMP threads and
 * each runs BLAS (single-threaded, see cpu_gemm.c) on its own head, which
 * keeps that head's T x T block in cache and the result independent of
 * timing. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "cpu_backend.h"
#include "dt_math_hd.h"

dt_status dt__cpu_attention_forward(dt_backend *be, float *out, float *att, const float *qkv, int B, int T, int C,
                                    int NH)
{
    (void)be;
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        const float *q = qkv + (size_t)b * T * C3 + h * hs;
        const float *k = q + C;
        const float *v = q + 2 * C;
        float *P = att + (size_t)bh * T * T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3, 0.0f, P, T);
        for (int t = 0; t < T; t++) {
            float *row = P + (size_t)t * T;
            float mx = row[0];
            for (int j = 1; j <= t; j++) mx = row[j] > mx ? row[j] : mx;
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int j = 0; j <= t; j++) {
                float e = dt__expf(row[j] - mx);
                row[j] = e;
                s += e;
            }
            float inv = 1.0f / s;
#pragma omp simd
            for (int j = 0; j <= t; j++) row[j] *= inv;
            if (t + 1 < T) memset(row + t + 1, 0, (size_t)(T - t - 1) * sizeof(float));
        }
        float *y = out + (size_t)b * T * C + h * hs;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, v, C3, 0.0f, y, C);
    }
    return DT_OK;
}

dt_status dt__cpu_attention_backward(dt_backend *be, float *dqkv, float *scratch, const float *dout, const float *qkv,
                                     const float *att, int B, int T, int C, int NH)
{
    (void)be;
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        size_t base = (size_t)b * T * C3 + h * hs;
        const float *q = qkv + base, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + base, *dk = dq + C, *dv = dq + 2 * C;
        const float *P = att + (size_t)bh * T * T;
        float *dS = scratch + (size_t)bh * T * T;
        const float *dy = dout + (size_t)b * T * C + h * hs;
        /* dP = dY V^T (only the causal part is used) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, C3, 0.0f, dS, T);
        /* dV = P^T dY */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, dy, C, 0.0f, dv, C3);
        for (int t = 0; t < T; t++) {
            const float *p = P + (size_t)t * T;
            float *d = dS + (size_t)t * T;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int j = 0; j <= t; j++) dot += p[j] * d[j];
#pragma omp simd
            for (int j = 0; j <= t; j++) d[j] = scale * p[j] * (d[j] - dot);
            if (t + 1 < T) memset(d + t + 1, 0, (size_t)(T - t - 1) * sizeof(float));
        }
        /* dQ = dS K, dK = dS^T Q (scale already folded into dS) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, dS, T, k, C3, 0.0f, dq, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, dS, T, q, C3, 0.0f, dk, C3);
    }
    return DT_OK;
}
