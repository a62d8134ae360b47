/* cpu_attention.c: multi-head attention on the CPU (flash-attention style:
 * tiles, online softmax, only the log-sum-exp kept): the fused causal op
 * (dt_backend.h's attention_forward/_backward) and the chunk op it is a
 * case of (attention_chunk_forward/_backward: a chunk of queries against a
 * chunk of keys and values, context parallelism's blocks), and the strided
 * copy (copy2d) that packs context parallelism's exchanges.
 *
 * q, k, v rows are ldq and ldkv floats apart (the fused op: one qkv
 * (B, T, 3C) = [q | k | v] per position, both strides 3C), head h owning
 * channels h*hs .. h*hs+hs-1 (hs = C/NH); every tile GEMM reads the heads
 * in place through the strides: no transposed copies. Per (b, h), with
 * query tiles Q_i and key tiles K_j, V_j of DT__CHK_TILE rows, and only
 * j <= i visited when causal (the tiles above the diagonal are never
 * computed: half the square's FLOPs):
 *   forward:  S = Q_i K_j^T / sqrt(hs); running max m and sum l per row
 *             (online softmax); O_i = sum_j exp(S - m) V_j / l;
 *             lse(t) = m + log l is all that is saved for the backward.
 *             A chunk's result merges into the one already there by
 *             log-sum-exp: M = max(lse1, lse2), w_i = exp(lse_i - M),
 *             out = (w1 out1 + w2 out2) / (w1 + w2), lse = M + log(w1 + w2)
 *             (Milakov and Gimelshein 2018; ring attention merges so).
 *   backward: D(t) = dO(t) . O(t) of the final output; per tile pair
 *             P = exp(S - lse) again (lse the final one: each chunk pair's
 *             share of the whole softmax), dP = dO_i V_j^T,
 *             dS = P * (dP - D) / sqrt(hs); dV_j += P^T dO_i, dK_j += dS^T
 *             Q_i, dQ_i += dS K_j.
 * The fused op is the chunk op on one qkv, causal, not merged; its
 * backward the chunk backward into a zeroed dqkv (the same additions in the
 * same order as overwriting at each tile's first visit: 0 + x = x). No
 * (T, T) array exists: a thread holds two tile-by-tile buffers and one
 * (tile, hs) accumulator. The result equals the unfused softmax(QK^T)V up
 * to FP32 summation order (tests/check_ops.c holds it to a double
 * reference, and the chunk op to the fused one).
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

#define DT__CHK_TILE 64 /* query and key rows per tile */

/* The keys row r of query tile i0 sees in key tile j0 (nc wide). */
static inline int dt__chk_cols(int causal, int i0, int r, int j0, int nc)
{
    if (!causal) return nc;
    const int n = i0 + r - j0 + 1;
    return n < nc ? (n > 0 ? n : 0) : nc;
}

static void dt__chk_head_forward(float *y, float *lse, const float *q, int ldq, const float *k, const float *v,
                                 int ldkv, int T, int hs, int C, float scale, int causal, int merge, float *S, float *O,
                                 float *m, float *l)
{
    for (int i0 = 0; i0 < T; i0 += DT__CHK_TILE) {
        const int nr = T - i0 < DT__CHK_TILE ? T - i0 : DT__CHK_TILE;
        const int jend = causal ? i0 + 1 : T;
        for (int j0 = 0; j0 < jend; j0 += DT__CHK_TILE) {
            const int nc = T - j0 < DT__CHK_TILE ? T - j0 : DT__CHK_TILE, first = j0 == 0;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, scale, q + (size_t)i0 * ldq, ldq,
                        k + (size_t)j0 * ldkv, ldkv, 0.0f, S, DT__CHK_TILE);
            for (int r = 0; r < nr; r++) {
                float *s = S + (size_t)r * DT__CHK_TILE;
                const int w = dt__chk_cols(causal, i0, r, j0, nc);
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, nc, 1.0f, S, DT__CHK_TILE,
                        v + (size_t)j0 * ldkv, ldkv, first ? 0.0f : 1.0f, O, hs);
        }
        for (int r = 0; r < nr; r++) {
            const float inv = 1.0f / l[r], L2 = m[r] + logf(l[r]);
            const float *o = O + (size_t)r * hs;
            float *yr = y + (size_t)(i0 + r) * C;
            if (!merge) {
#pragma omp simd
                for (int d = 0; d < hs; d++) yr[d] = o[d] * inv;
                lse[i0 + r] = L2;
                continue;
            }
            const float L1 = lse[i0 + r], M = L1 > L2 ? L1 : L2;
            const float w1 = dt__expf(L1 - M), w2 = dt__expf(L2 - M), s = w1 + w2;
            const float a1 = w1 / s, a2 = w2 / s * inv;
#pragma omp simd
            for (int d = 0; d < hs; d++) yr[d] = yr[d] * a1 + o[d] * a2;
            lse[i0 + r] = M + logf(s);
        }
    }
}

dt_status dt__cpu_attention_chunk_forward(dt_backend *be, float *out, float *lse, const float *q, int ldq,
                                          const float *k, const float *v, int ldkv, int B, int T, int C, int NH,
                                          int causal, int merge)
{
    (void)be;
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        float *buf = malloc(sizeof(float) * ((size_t)DT__CHK_TILE * DT__CHK_TILE + (size_t)DT__CHK_TILE * hs +
                                             2 * DT__CHK_TILE));
        if (!buf) failed = 1;
#pragma omp for schedule(static)
        for (int bh = 0; bh < B * NH; bh++) {
            if (!buf) continue;
            const int b = bh / NH, h = bh % NH;
            float *S = buf, *O = S + DT__CHK_TILE * DT__CHK_TILE, *m = O + (size_t)DT__CHK_TILE * hs;
            dt__chk_head_forward(out + (size_t)b * T * C + h * hs, lse + (size_t)bh * T,
                                 q + (size_t)b * T * ldq + h * hs, ldq, k + (size_t)b * T * ldkv + h * hs,
                                 v + (size_t)b * T * ldkv + h * hs, ldkv, T, hs, C, scale, causal, merge, S, O, m,
                                 m + DT__CHK_TILE);
        }
        free(buf);
    }
    if (failed)
        return DT_FAIL(DT_ERR_NOMEM, "chunk attention: out of memory for a thread's tiles (%d x %d)", DT__CHK_TILE, hs);
    return DT_OK;
}

static void dt__chk_head_backward(float *dq, float *dk, float *dv, const float *dy, const float *y, const float *lse,
                                  const float *q, int ldq, const float *k, const float *v, int ldkv, int T, int hs,
                                  int C, float scale, int causal, float *P, float *dS, float *D)
{
    for (int t = 0; t < T; t++) {
        const float *a = dy + (size_t)t * C, *o = y + (size_t)t * C;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int d = 0; d < hs; d++) s += a[d] * o[d];
        D[t] = s;
    }
    for (int i0 = 0; i0 < T; i0 += DT__CHK_TILE) {
        const int nr = T - i0 < DT__CHK_TILE ? T - i0 : DT__CHK_TILE;
        const int jend = causal ? i0 + 1 : T;
        for (int j0 = 0; j0 < jend; j0 += DT__CHK_TILE) {
            const int nc = T - j0 < DT__CHK_TILE ? T - j0 : DT__CHK_TILE;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, scale, q + (size_t)i0 * ldq, ldq,
                        k + (size_t)j0 * ldkv, ldkv, 0.0f, P, DT__CHK_TILE);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, 1.0f, dy + (size_t)i0 * C, C,
                        v + (size_t)j0 * ldkv, ldkv, 0.0f, dS, DT__CHK_TILE);
            for (int r = 0; r < nr; r++) {
                float *p = P + (size_t)r * DT__CHK_TILE, *d = dS + (size_t)r * DT__CHK_TILE;
                const int w = dt__chk_cols(causal, i0, r, j0, nc);
                const float L = lse[i0 + r], Dr = D[i0 + r];
#pragma omp simd
                for (int j = 0; j < w; j++) {
                    float e = dt__expf(p[j] - L);
                    p[j] = e;
                    d[j] = scale * e * (d[j] - Dr);
                }
                for (int j = w; j < nc; j++) p[j] = d[j] = 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nr, 1.0f, P, DT__CHK_TILE,
                        dy + (size_t)i0 * C, C, 1.0f, dv + (size_t)j0 * ldkv, ldkv);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nr, 1.0f, dS, DT__CHK_TILE,
                        q + (size_t)i0 * ldq, ldq, 1.0f, dk + (size_t)j0 * ldkv, ldkv);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, nc, 1.0f, dS, DT__CHK_TILE,
                        k + (size_t)j0 * ldkv, ldkv, 1.0f, dq + (size_t)i0 * ldq, ldq);
        }
    }
}

dt_status dt__cpu_attention_chunk_backward(dt_backend *be, float *dq, float *dk, float *dv, const float *dout,
                                           const float *out, const float *lse, const float *q, int ldq, const float *k,
                                           const float *v, int ldkv, int B, int T, int C, int NH, int causal)
{
    (void)be;
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        float *buf = malloc(sizeof(float) * (2 * (size_t)DT__CHK_TILE * DT__CHK_TILE + (size_t)T));
        if (!buf) failed = 1;
#pragma omp for schedule(static)
        for (int bh = 0; bh < B * NH; bh++) {
            if (!buf) continue;
            const int b = bh / NH, h = bh % NH;
            const size_t qo = (size_t)b * T * ldq + h * hs, ko = (size_t)b * T * ldkv + h * hs,
                         yo = (size_t)b * T * C + h * hs;
            dt__chk_head_backward(dq + qo, dk + ko, dv + ko, dout + yo, out + yo, lse + (size_t)bh * T, q + qo, ldq,
                                  k + ko, v + ko, ldkv, T, hs, C, scale, causal, buf, buf + DT__CHK_TILE * DT__CHK_TILE,
                                  buf + 2 * DT__CHK_TILE * DT__CHK_TILE);
        }
        free(buf);
    }
    if (failed) return DT_FAIL(DT_ERR_NOMEM, "chunk attention backward: out of memory for a thread's tiles (T = %d)", T);
    return DT_OK;
}

dt_status dt__cpu_attention_forward(dt_backend *be, float *out, float *lse, const float *qkv, int B, int T, int C,
                                    int NH)
{
    return dt__cpu_attention_chunk_forward(be, out, lse, qkv, 3 * C, qkv + C, qkv + 2 * C, 3 * C, B, T, C, NH, 1, 0);
}

dt_status dt__cpu_attention_backward(dt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                     const float *out, const float *lse, int B, int T, int C, int NH)
{
    memset(dqkv, 0, (size_t)B * T * 3 * C * sizeof(float));
    return dt__cpu_attention_chunk_backward(be, dqkv, dqkv + C, dqkv + 2 * C, dout, out, lse, qkv, 3 * C, qkv + C,
                                            qkv + 2 * C, 3 * C, B, T, C, NH, 1);
}

dt_status dt__cpu_copy2d(dt_backend *be, float *dst, size_t ldd, const float *src, size_t lds, size_t rows,
                         size_t cols)
{
    (void)be;
    for (size_t r = 0; r < rows; r++) memcpy(dst + r * ldd, src + r * lds, cols * sizeof(float));
    return DT_OK;
}
