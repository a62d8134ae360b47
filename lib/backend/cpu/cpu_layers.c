/* cpu_layers.c: the CPU backend's elementwise and row-wise layer ops:
 * embedding, LayerNorm, GELU, residual add, fused softmax cross-entropy.
 *
 * Threads: rows (or channel slices) are split statically across OpenMP
 * threads; every reduction over rows (parameter gradients) is done as
 * partial sums, one per backend thread (be->threads) over the rows that
 * thread would get, combined in order: results are bit-identical run to
 * run for a given be->threads, however many workers run them. Statistics (mean,
 * variance, softmax sums) accumulate in float over at most C or V terms in
 * a fixed order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_backend.h"
#include "dt_math_hd.h"

#define DT__LN_EPS 1e-5f

dt_status dt__cpu_encoder_forward(dt_backend *be, float *out, const int32_t *tokens, const float *wte, const float *wpe,
                                  int B, int T, int C)
{
    (void)be;
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        float *o = out + (size_t)bt * C;
        const float *pe = wpe ? wpe + (size_t)(bt % T) * C : NULL;
        if (tokens[bt] == DT_TOKEN_MASKED) { /* a row another vocabulary-parallel rank holds */
            if (pe) memcpy(o, pe, (size_t)C * sizeof *o);
            else memset(o, 0, (size_t)C * sizeof *o);
            continue;
        }
        const float *te = wte + (size_t)tokens[bt] * C;
        if (!pe) {
            memcpy(o, te, (size_t)C * sizeof *o);
            continue;
        }
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
    }
    return DT_OK;
}

dt_status dt__cpu_encoder_backward(dt_backend *be, float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                                   int B, int T, int C)
{
    (void)be;
    /* Channel slices per thread: each (token, channel) cell has one writer,
     * and positions are visited in order, so the sums are deterministic. */
    const int slice = 16;
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += slice) {
        int c1 = c0 + slice < C ? c0 + slice : C;
        for (int bt = 0; bt < B * T; bt++) {
            const float *d = dout + (size_t)bt * C;
            if (tokens[bt] != DT_TOKEN_MASKED) {
                float *gte = dwte + (size_t)tokens[bt] * C;
                for (int c = c0; c < c1; c++) gte[c] += d[c];
            }
            if (dwpe) {
                float *gpe = dwpe + (size_t)(bt % T) * C;
                for (int c = c0; c < c1; c++) gpe[c] += d[c];
            }
        }
    }
    return DT_OK;
}

dt_status dt__cpu_layernorm_forward(dt_backend *be, float *out, float *mean, float *rstd, const float *inp,
                                    const float *w, const float *b, int N, int C)
{
    (void)be;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float *o = out + (size_t)i * C;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < C; c++) s += x[c];
        float m = s / C;
        float v = 0.0f;
#pragma omp simd reduction(+ : v)
        for (int c = 0; c < C; c++) {
            float d = x[c] - m;
            v += d * d;
        }
        float r = 1.0f / sqrtf(v / C + DT__LN_EPS);
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * r * w[c] + b[c];
        mean[i] = m;
        rstd[i] = r;
    }
    return DT_OK;
}

dt_status dt__cpu_layernorm_backward(dt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                     const float *inp, const float *w, const float *mean, const float *rstd, int N,
                                     int C)
{
    /* Two independent parts, either of which may be skipped (the
     * zero-bubble split runs dinp in B and dw, db in W): each element is
     * computed by the same expression whether the other part runs or not. */
    if (dinp) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < N; i++) {
            const float *x = inp + (size_t)i * C;
            const float *d = dout + (size_t)i * C;
            float *dx = dinp + (size_t)i * C;
            float m = mean[i], rs = rstd[i];
            float s_d = 0.0f, s_dn = 0.0f; /* sum of dnorm, sum of dnorm * norm */
#pragma omp simd reduction(+ : s_d, s_dn)
            for (int c = 0; c < C; c++) {
                float n = (x[c] - m) * rs;
                float dn = w[c] * d[c];
                s_d += dn;
                s_dn += dn * n;
            }
            s_d /= C;
            s_dn /= C;
#pragma omp simd
            for (int c = 0; c < C; c++) {
                float n = (x[c] - m) * rs;
                float dn = w[c] * d[c];
                dx[c] += rs * (dn - s_d - n * s_dn);
            }
        }
    }
    if (!dw) return DT_OK;
    /* One partial of dw and db per backend thread, over the rows OpenMP's
     * static schedule would give that thread (the first N % nt get one
     * more), whatever the number of workers that run them. */
    const int nt = be->threads > 0 ? be->threads : 1;
    float *part = calloc((size_t)nt * 2 * C, sizeof *part);
    if (!part) return DT_FAIL(DT_ERR_NOMEM, "layernorm backward: out of memory");
    const int q = N / nt, r = N % nt;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < nt; p++) {
        float *pdw = part + (size_t)p * 2 * C;
        float *pdb = pdw + C;
        const int lo = q * p + (p < r ? p : r), hi = lo + q + (p < r);
        for (int i = lo; i < hi; i++) {
            const float *x = inp + (size_t)i * C;
            const float *d = dout + (size_t)i * C;
            float m = mean[i], rs = rstd[i];
#pragma omp simd
            for (int c = 0; c < C; c++) {
                float n = (x[c] - m) * rs;
                pdb[c] += d[c];
                pdw[c] += n * d[c];
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        const float *pdw = part + (size_t)t * 2 * C;
        const float *pdb = pdw + C;
        for (int c = 0; c < C; c++) {
            dw[c] += pdw[c];
            db[c] += pdb[c];
        }
    }
    free(part);
    return DT_OK;
}

/* GELU's loops with full-width vectors (dt_math_hd.h); the other ops'
 * reductions keep the default width, and so their summation order. */
DT__VEC512_BEGIN
dt_status dt__cpu_gelu_forward(dt_backend *be, float *out, const float *inp, size_t n)
{
    (void)be;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = dt__gelu(inp[i]);
    return DT_OK;
}

dt_status dt__cpu_gelu_backward(dt_backend *be, float *dinp, float *out, const float *inp, const float *dout, size_t n)
{
    (void)be;
    if (out) { /* the forward's value too: the same inline dt__gelu, its tanh shared */
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) {
            const float x = inp[i];
            dinp[i] = dt__gelu_grad(x) * dout[i];
            out[i] = dt__gelu(x);
        }
        return DT_OK;
    }
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) dinp[i] = dt__gelu_grad(inp[i]) * dout[i];
    return DT_OK;
}

DT__VEC512_END

dt_status dt__cpu_residual_forward(dt_backend *be, float *out, const float *a, const float *b, size_t n)
{
    (void)be;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
    return DT_OK;
}

/* A row z(V) of logits: its max and first argmax (a strict `>` scan from
 * z[0]) and s = sum exp(z - max), in a fixed order. */
static inline void dt__cpu_ce_row(const float *z, int V, float *mx_out, int *arg_out, float *s_out)
{
    float mx = z[0];
    int arg = 0;
    for (int v = 1; v < V; v++)
        if (z[v] > mx) {
            mx = z[v];
            arg = v;
        }
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int v = 0; v < V; v++) s += dt__expf(z[v] - mx);
    *mx_out = mx, *arg_out = arg, *s_out = s;
}

dt_status dt__cpu_crossentropy_forward_backward(dt_backend *be, float *losses, uint8_t *correct, float *dlogits,
                                                const float *logits, const int32_t *targets, int N, int V, int ld,
                                                float dloss)
{
    (void)be;
    for (int i = 0; i < N; i++)
        if (targets[i] >= V)
            return DT_FAIL(DT_ERR_INVALID, "cross-entropy: target %d at row %d outside the vocabulary of %d",
                           targets[i], i, V);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *z = logits + (size_t)i * ld;
        int tgt = targets[i];
        if (tgt < 0) {
            losses[i] = 0.0f;
            if (correct) correct[i] = 0;
            if (dlogits) memset(dlogits + (size_t)i * ld, 0, (size_t)V * sizeof(float));
            continue;
        }
        float mx, s;
        int arg;
        dt__cpu_ce_row(z, V, &mx, &arg, &s);
        float lse = mx + logf(s);
        float zt = z[tgt];
        losses[i] = lse - zt;
        if (correct) correct[i] = (uint8_t)(arg == tgt);
        if (dlogits) {
            float *d = dlogits + (size_t)i * ld; /* may alias z: read-before-write per element */
            float inv = 1.0f / s;
#pragma omp simd
            for (int v = 0; v < V; v++) d[v] = dloss * dt__expf(z[v] - mx) * inv;
            d[tgt] -= dloss;
        }
    }
    return DT_OK;
}

dt_status dt__cpu_crossentropy_part(dt_backend *be, float *stats, float *dlogits, const float *ms, const float *logits,
                                    const int32_t *targets, int N, int V, int ld, int v0, float dloss)
{
    (void)be;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *z = logits + (size_t)i * ld;
        const int tgt = targets[i], here = tgt >= v0 && tgt - v0 < V ? tgt - v0 : -1;
        if (stats) {
            float *o = stats + (size_t)i * 4;
            if (tgt < 0) {
                o[0] = 0.0f, o[1] = 1.0f, o[2] = 0.0f, o[3] = -1.0f;
                continue;
            }
            float mx, s; /* the fused op's scan and sum, over the part's columns */
            int arg;
            dt__cpu_ce_row(z, V, &mx, &arg, &s);
            o[0] = mx, o[1] = s, o[2] = here >= 0 ? z[here] : 0.0f, o[3] = (float)(v0 + arg);
            continue;
        }
        float *d = dlogits + (size_t)i * ld; /* may alias z: read-before-write per element */
        if (tgt < 0) {
            memset(d, 0, (size_t)V * sizeof(float));
            continue;
        }
        const float mx = ms[2 * (size_t)i], inv = 1.0f / ms[2 * (size_t)i + 1];
#pragma omp simd
        for (int v = 0; v < V; v++) d[v] = dloss * dt__expf(z[v] - mx) * inv;
        if (here >= 0) d[here] -= dloss;
    }
    return DT_OK;
}
