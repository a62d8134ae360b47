/* cpu_attention.c: fused causal multi-head self-attention on the CPU
 * (flash-attention style: tiles, online softmax, only the log-sum-exp kept).
 *
 * qkv is (B, T, 3C) = [q | k | v] per position, head h owning channels
 * h*hs .. h*hs+hs-1 of each part (hs = C/NH). Every tile GEMM reads the
 * heads in place through leading dimensions (3C or C): no transposed copies.
 * Per (b, h), with query tiles Q_i and key tiles K_j, V_j of DT__ATT_TILE
 * rows, and only j <= i visited (the tiles above the diagonal are never
 * computed: half the square's FLOPs):
 *   forward:  S = Q_i K_j^T / sqrt(hs); running max m and sum l per row
 *             (online softmax); O_i = sum_j exp(S - m) V_j / l;
 *             lse(t) = m + log l is all that is saved for the backward.
 *   backward: D(t) = dO(t) . O(t); per tile pair P = exp(S - lse) again,
 *             dP = dO_i V_j^T, dS = P * (dP - D) / sqrt(hs);
 *             dV_j += P^T dO_i, dK_j += dS^T Q_i, dQ_i += dS K_j.
 * No (T, T) array exists: a thread holds two tile-by-tile buffers and one
 * (tile, hs) accumulator. The result equals the unfused softmax(QK^T)V up to
 * FP32 summation order (tests/check_ops.c holds it to a double reference).
 *
 * Threads: the (b, h) pairs are split statically across OpenMP threads, each
 * visiting its tiles in one fixed order with single-threaded BLAS, so the
 * result does not depend on timing or on the number of workers. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_backend.h"
#include "dt_math_hd.h"

#define DT__ATT_TILE 64 /* query and key rows per tile */

/* Rows i0.. of a tile pair: the causal column limit of row r in key tile
 * j0.. is min(nc, t - j0 + 1), t = i0 + r. */
static inline int dt__att_cols(int i0, int r, int j0, int nc)
{
    int n = i0 + r - j0 + 1;
    return n < nc ? n : nc;
}

static void dt__att_head_forward(float *y, float *lse, const float *q, const float *k, const float *v, int T, int hs,
                                int C, int C3, float scale, float *S, float *O, float *m, float *l)
{
    for (int i0 = 0; i0 < T; i0 += DT__ATT_TILE) {
        const int nr = T - i0 < DT__ATT_TILE ? T - i0 : DT__ATT_TILE;
        for (int j0 = 0; j0 <= i0; j0 += DT__ATT_TILE) {
            const int nc = T - j0 < DT__ATT_TILE ? T - j0 : DT__ATT_TILE, first = j0 == 0;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, scale, q + (size_t)i0 * C3, C3,
                        k + (size_t)j0 * C3, C3, 0.0f, S, DT__ATT_TILE);
            for (int r = 0; r < nr; r++) {
                float *s = S + (size_t)r * DT__ATT_TILE;
                const int w = dt__att_cols(i0, r, j0, nc);
                float mx = s[0];
                for (int j = 1; j < w; j++) mx = s[j] > mx ? s[j] : mx;
                const float mnew = first || mx > m[r] ? mx : m[r];
                const float alpha = first ? 0.0f : dt__expf(m[r] - mnew);
                float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                for (int j = 0; j < w; j++) {
                    float e = dt__expf(s[j] - mnew);
                    s[j] = e;
                    sum += e;
                }
                for (int j = w; j < nc; j++) s[j] = 0.0f;
                l[r] = first ? sum : l[r] * alpha + sum;
                m[r] = mnew;
                if (!first) {
                    float *o = O + (size_t)r * hs;
#pragma omp simd
                    for (int d = 0; d < hs; d++) o[d] *= alpha;
                }
            }
            /* O += P V_j (the first tile overwrites) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, nc, 1.0f, S, DT__ATT_TILE,
                        v + (size_t)j0 * C3, C3, first ? 0.0f : 1.0f, O, hs);
        }
        for (int r = 0; r < nr; r++) {
            const float inv = 1.0f / l[r];
            const float *o = O + (size_t)r * hs;
            float *yr = y + (size_t)(i0 + r) * C;
#pragma omp simd
            for (int d = 0; d < hs; d++) yr[d] = o[d] * inv;
            lse[i0 + r] = m[r] + logf(l[r]);
        }
    }
}

dt_status dt__cpu_attention_forward(dt_backend *be, float *out, float *lse, const float *qkv, int B, int T, int C,
                                    int NH)
{
    (void)be;
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        /* S (tile, tile), O (tile, hs), m and l (tile) */
        float *buf = malloc(sizeof(float) * ((size_t)DT__ATT_TILE * DT__ATT_TILE + (size_t)DT__ATT_TILE * hs +
                                             2 * DT__ATT_TILE));
        if (!buf) failed = 1;
#pragma omp for schedule(static)
        for (int bh = 0; bh < B * NH; bh++) {
            if (!buf) continue;
            const int b = bh / NH, h = bh % NH;
            const float *q = qkv + (size_t)b * T * C3 + h * hs;
            float *S = buf, *O = S + DT__ATT_TILE * DT__ATT_TILE, *m = O + (size_t)DT__ATT_TILE * hs;
            dt__att_head_forward(out + (size_t)b * T * C + h * hs, lse + (size_t)bh * T, q, q + C, q + 2 * C, T, hs,
                                 C, C3, scale, S, O, m, m + DT__ATT_TILE);
        }
        free(buf);
    }
    if (failed) return DT_FAIL(DT_ERR_NOMEM, "attention: out of memory for a thread's tiles (%d x %d)", DT__ATT_TILE, hs);
    return DT_OK;
}

static void dt__att_head_backward(float *dq, float *dk, float *dv, const float *dy, const float *y, const float *lse,
                                  const float *q, const float *k, const float *v, int T, int hs, int C, int C3,
                                  float scale, float *P, float *dS, float *D)
{
    for (int t = 0; t < T; t++) {
        const float *a = dy + (size_t)t * C, *o = y + (size_t)t * C;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int d = 0; d < hs; d++) s += a[d] * o[d];
        D[t] = s;
    }
    for (int i0 = 0; i0 < T; i0 += DT__ATT_TILE) {
        const int nr = T - i0 < DT__ATT_TILE ? T - i0 : DT__ATT_TILE;
        for (int j0 = 0; j0 <= i0; j0 += DT__ATT_TILE) {
            const int nc = T - j0 < DT__ATT_TILE ? T - j0 : DT__ATT_TILE;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, scale, q + (size_t)i0 * C3, C3,
                        k + (size_t)j0 * C3, C3, 0.0f, P, DT__ATT_TILE);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, 1.0f, dy + (size_t)i0 * C, C,
                        v + (size_t)j0 * C3, C3, 0.0f, dS, DT__ATT_TILE);
            for (int r = 0; r < nr; r++) {
                float *p = P + (size_t)r * DT__ATT_TILE, *d = dS + (size_t)r * DT__ATT_TILE;
                const int w = dt__att_cols(i0, r, j0, nc);
                const float L = lse[i0 + r], Dr = D[i0 + r];
#pragma omp simd
                for (int j = 0; j < w; j++) {
                    float e = dt__expf(p[j] - L);
                    p[j] = e;
                    d[j] = scale * e * (d[j] - Dr);
                }
                for (int j = w; j < nc; j++) p[j] = d[j] = 0.0f;
            }
            /* key tile j is first reached from query tile i = j: overwrite there */
            const float bkv = j0 == i0 ? 0.0f : 1.0f;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nr, 1.0f, P, DT__ATT_TILE,
                        dy + (size_t)i0 * C, C, bkv, dv + (size_t)j0 * C3, C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nr, 1.0f, dS, DT__ATT_TILE,
                        q + (size_t)i0 * C3, C3, bkv, dk + (size_t)j0 * C3, C3);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, nc, 1.0f, dS, DT__ATT_TILE,
                        k + (size_t)j0 * C3, C3, j0 == 0 ? 0.0f : 1.0f, dq + (size_t)i0 * C3, C3);
        }
    }
}

dt_status dt__cpu_attention_backward(dt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                     const float *out, const float *lse, int B, int T, int C, int NH)
{
    (void)be;
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        /* P and dS (tile, tile), D (T) */
        float *buf = malloc(sizeof(float) * (2 * (size_t)DT__ATT_TILE * DT__ATT_TILE + (size_t)T));
        if (!buf) failed = 1;
#pragma omp for schedule(static)
        for (int bh = 0; bh < B * NH; bh++) {
            if (!buf) continue;
            const int b = bh / NH, h = bh % NH;
            const size_t base = (size_t)b * T * C3 + h * hs, yo = (size_t)b * T * C + h * hs;
            const float *q = qkv + base;
            float *dq = dqkv + base;
            dt__att_head_backward(dq, dq + C, dq + 2 * C, dout + yo, out + yo, lse + (size_t)bh * T, q, q + C,
                                  q + 2 * C, T, hs, C, C3, scale, buf, buf + DT__ATT_TILE * DT__ATT_TILE,
                                  buf + 2 * DT__ATT_TILE * DT__ATT_TILE);
        }
        free(buf);
    }
    if (failed) return DT_FAIL(DT_ERR_NOMEM, "attention backward: out of memory for a thread's tiles (T = %d)", T);
    return DT_OK;
}
