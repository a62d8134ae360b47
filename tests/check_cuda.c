/* check_cuda.c: every op of the CUDA backend against the CPU backend (the
 * reference, itself checked against double precision in check_ops.c) on
 * random inputs. Built with CUDA only; exits 77 (skipped) when no CUDA
 * device is usable, printing why.
 *
 * The suite runs without fork (CK_NOFORK): CUDA cannot be used in a child
 * forked after the parent touched it, and main() must ask for a device
 * before deciding to skip.
 *
 * Tolerances (u = 6e-8, float's unit roundoff), per kind of op:
 *  - EXACT (bit for bit): memory ops, residual, ReLU, scale, unscale_check,
 *    every cast (same integer conversion code), the embedding (same
 *    summation order by construction);
 *  - ELEM, |a - b| <= 1e-6 + 1e-5 |b|: elementwise math with the same
 *    formulas (GELU, optimizers, axpy), where nvcc's fused multiply-adds
 *    round differently from GCC's in a few ulps and the optimizers'
 *    divisions by sqrt(v) + eps amplify that on small v;
 *  - SUM, |a - b| <= 1e-4 + 1e-4 |b|: GEMMs and row reductions whose
 *    summation order differs (cuBLAS tiles vs OpenBLAS, warp trees vs
 *    sequential loops). Inputs are N(0,1), sums have K <= 128 terms: each
 *    side's error is about sqrt(K) u |sum of |terms|| <= 1e-5 here, and
 *    check_ops.c holds the CPU within 1e-5 + 1e-4 |ref| of exact, so twice
 *    that bounds their difference;
 *  - double sums (sumsq, BatchNorm's statistics): 1e-12 relative for
 *    sumsq; BatchNorm outputs within ELEM (double sums round to the same
 *    float but the normalisation's FMAs may not). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_backend.h"
#include "dt_cuda.h"
#include "dt_half.h"
#include "testutil.h"

static dt_backend *cpu, *gpu;

#define ELEM_ATOL 1e-6
#define ELEM_RTOL 1e-5
#define SUM_ATOL 1e-4
#define SUM_RTOL 1e-4

static void fill(float *x, size_t n, uint64_t seed, float scale)
{
    dt_rng r;
    dt_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)dt_rng_normal(&r) * scale;
}

static float *hmalloc(size_t n)
{
    float *p = malloc(n * sizeof(float) + 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* A device copy of host data (bytes). */
static void *up(const void *h, size_t bytes)
{
    void *d;
    ck_dt(gpu->alloc(gpu, bytes, &d));
    if (bytes) ck_dt(gpu->copy(gpu, d, h, bytes, DT_COPY_H2D));
    return d;
}

static void down(void *h, const void *d, size_t bytes) { ck_dt(gpu->copy(gpu, h, d, bytes, DT_COPY_D2H)); }

static void gfree(void *d) { gpu->free(gpu, d); }

/* Download n floats of d and compare with ref. */
static void expect_close(const float *d, const float *ref, size_t n, double atol, double rtol, const char *what)
{
    float *h = hmalloc(n);
    down(h, d, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(dt_test_close(h[i], ref[i], atol, rtol), "%s[%zu]: gpu %.9g cpu %.9g", what, i, (double)h[i],
                      (double)ref[i]);
    free(h);
}

static void expect_bits(const void *d, const void *ref, size_t bytes, const char *what)
{
    unsigned char *h = malloc(bytes + 1);
    down(h, d, bytes);
    const unsigned char *r = ref;
    for (size_t i = 0; i < bytes; i++) ck_assert_msg(h[i] == r[i], "%s: byte %zu differs", what, i);
    free(h);
}

/* ---- memory ------------------------------------------------------------------------------- */

START_TEST(test_memory)
{
    const size_t n = 1000;
    float *z = calloc(n, sizeof(float)), *x = hmalloc(n), *y = hmalloc(n);
    fill(x, n, 1, 1);
    void *d;
    ck_dt(gpu->alloc(gpu, n * sizeof(float), &d));
    ck_assert_uint_eq((uintptr_t)d % 64, 0);
    expect_bits(d, z, n * sizeof(float), "alloc zeroed");
    ck_dt(gpu->copy(gpu, d, x, n * sizeof(float), DT_COPY_H2D));
    void *e;
    ck_dt(gpu->alloc(gpu, n * sizeof(float), &e));
    ck_dt(gpu->copy(gpu, e, d, n * sizeof(float), DT_COPY_D2D));
    expect_bits(e, x, n * sizeof(float), "copy D2D");
    /* overlapping D2D: memmove semantics */
    ck_dt(gpu->copy(gpu, (float *)e + 10, e, (n - 10) * sizeof(float), DT_COPY_D2D));
    memcpy(y, x, n * sizeof(float));
    memmove(y + 10, y, (n - 10) * sizeof(float));
    expect_bits(e, y, n * sizeof(float), "overlapping copy");
    ck_dt(gpu->memset_zero(gpu, d, n * sizeof(float)));
    ck_dt(gpu->synchronize(gpu));
    expect_bits(d, z, n * sizeof(float), "memset_zero");
    gfree(d), gfree(e);
    ck_dt(gpu->alloc(gpu, 0, &d)); /* zero bytes: a valid pointer */
    ck_assert_ptr_nonnull(d);
    gfree(d);
    free(z), free(x), free(y);
}
END_TEST

/* ---- GEMM and linear layers ------------------------------------------------------------------ */

static const int gemm_shapes[][3] = {{37, 29, 23}, {128, 96, 128}, {5, 301, 64}};

START_TEST(test_gemm)
{
    const int M = gemm_shapes[_i][0], N = gemm_shapes[_i][1], K = gemm_shapes[_i][2], pad = 3;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
            size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
            float *A = hmalloc(na), *B = hmalloc(nb), *C = hmalloc(nc);
            fill(A, na, 2, 1), fill(B, nb, 3, 1), fill(C, nc, 4, 1);
            float *dA = up(A, na * 4), *dB = up(B, nb * 4), *dC = up(C, nc * 4);
            ck_dt(cpu->gemm(cpu, ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 0.25f, C, ldc));
            ck_dt(gpu->gemm(gpu, ta, tb, M, N, K, 0.5f, dA, lda, dB, ldb, 0.25f, dC, ldc));
            expect_close(dC, C, nc, SUM_ATOL, SUM_RTOL, "gemm"); /* includes the untouched padding */
            gfree(dA), gfree(dB), gfree(dC);
            free(A), free(B), free(C);
        }
    /* K = 0 scales C by beta (0 clears it), M = 0 does nothing, negative sizes fail */
    float c[4] = {1, 2, 3, 4}, c0[4] = {0.5f, 1, 1.5f, 2};
    float *dc = up(c, sizeof c);
    ck_dt(gpu->gemm(gpu, 0, 0, 2, 2, 0, 1.0f, dc, 1, dc, 2, 0.5f, dc, 2));
    expect_bits(dc, c0, sizeof c0, "gemm K = 0");
    ck_dt(gpu->gemm(gpu, 0, 0, 0, 2, 2, 1.0f, dc, 2, dc, 2, 0.0f, dc, 2));
    ck_assert_int_ne(gpu->gemm(gpu, 0, 0, -1, 2, 2, 1.0f, dc, 2, dc, 2, 0.0f, dc, 2), DT_OK);
    gfree(dc);
}
END_TEST

/* Mixed precision: with set_gemm_inputs(F16 or BF16) and inputs that are
 * exactly 16-bit values, GEMMs run on tensor cores and match the CPU's FP32
 * GEMM within the same tolerance: the products are exact, only the
 * summation order differs. (Attention rounds its own probabilities: see
 * test_attention_half.) */
static void round_to(float *x, size_t n, dt_dtype t)
{
    for (size_t i = 0; i < n; i++)
        x[i] = t == DT_F16 ? dt_f16_to_float(dt_f16_from_float(x[i])) : dt_bf16_to_float(dt_bf16_from_float(x[i]));
}

START_TEST(test_gemm_half)
{
    const dt_dtype t = _i ? DT_BF16 : DT_F16;
    ck_dt(gpu->set_gemm_inputs(gpu, t));
    const int M = 67, N = 45, K = 130;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 5, ldc = N + 1;
            size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
            float *A = hmalloc(na), *B = hmalloc(nb), *C = hmalloc(nc);
            fill(A, na, 40, 1), fill(B, nb, 41, 1), fill(C, nc, 42, 1);
            round_to(A, na, t), round_to(B, nb, t);
            float *dA = up(A, na * 4), *dB = up(B, nb * 4), *dC = up(C, nc * 4);
            ck_dt(cpu->gemm(cpu, ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 0.25f, C, ldc));
            ck_dt(gpu->gemm(gpu, ta, tb, M, N, K, 0.5f, dA, lda, dB, ldb, 0.25f, dC, ldc));
            expect_close(dC, C, nc, SUM_ATOL, SUM_RTOL, "gemm with 16-bit inputs");
            gfree(dA), gfree(dB), gfree(dC);
            free(A), free(B), free(C);
        }
    ck_dt(gpu->set_gemm_inputs(gpu, DT_F32));
}
END_TEST

/* set_gemm_shadow: an operand lying inside a registered range is read from
 * its 16-bit copy instead of being cast from the FP32 values. To see which
 * one a GEMM reads, the copy here holds 2 * the FP32 values (exact in both
 * formats), which a model would never register: C doubles exactly where
 * the copy is read. Not read: an operand that leaves the range, another
 * GEMM input type, a forgotten range. */
START_TEST(test_gemm_shadow)
{
    const dt_dtype t = _i ? DT_BF16 : DT_F16, other = _i ? DT_F16 : DT_BF16;
    const int M = 33, N = 40, K = 64;
    const size_t nw = 96 + (size_t)N * K + 64, nr = nw - 32, off = 96, tail = nw - (size_t)N * K;
    float *A = hmalloc((size_t)M * K), *W = hmalloc(nw), *W2 = hmalloc(nw);
    float *C = hmalloc((size_t)M * N), *C2 = hmalloc((size_t)M * N), *Ct = hmalloc((size_t)M * N);
    uint16_t *h = malloc(nw * sizeof *h);
    ck_assert_ptr_nonnull(h);
    fill(A, (size_t)M * K, 50, 1), fill(W, nw, 51, 1);
    round_to(A, (size_t)M * K, t), round_to(W, nw, t);
    for (size_t i = 0; i < nw; i++) {
        W2[i] = 2 * W[i];
        h[i] = t == DT_F16 ? dt_f16_from_float(W2[i]) : dt_bf16_from_float(W2[i]);
    }
    /* C = A W[off..]^T, C2 = A W2[off..]^T = 2 C, Ct = A W[tail..]^T */
    ck_dt(cpu->gemm(cpu, 0, 1, M, N, K, 1.0f, A, K, W + off, K, 0.0f, C, N));
    ck_dt(cpu->gemm(cpu, 0, 1, M, N, K, 1.0f, A, K, W2 + off, K, 0.0f, C2, N));
    ck_dt(cpu->gemm(cpu, 0, 1, M, N, K, 1.0f, A, K, W + tail, K, 0.0f, Ct, N));
    float *dA = up(A, (size_t)M * K * 4), *dW = up(W, nw * 4), *dC = up(C, (size_t)M * N * 4);
    void *dh = up(h, nw * sizeof *h);
    ck_dt(gpu->set_gemm_inputs(gpu, t));
    ck_dt(gpu->set_gemm_shadow(gpu, dW, nr, dh, t));
    ck_dt(gpu->gemm(gpu, 0, 1, M, N, K, 1.0f, dA, K, dW + off, K, 0.0f, dC, N));
    expect_close(dC, C2, (size_t)M * N, SUM_ATOL, SUM_RTOL, "gemm through the 16-bit copy");
    ck_dt(gpu->gemm(gpu, 0, 1, M, N, K, 1.0f, dA, K, dW + tail, K, 0.0f, dC, N)); /* ends past nr: cast */
    expect_close(dC, Ct, (size_t)M * N, SUM_ATOL, SUM_RTOL, "gemm on an operand leaving the range");
    ck_dt(gpu->set_gemm_inputs(gpu, other)); /* W is exact in t only: compare with a cast of W in other */
    ck_dt(gpu->gemm(gpu, 0, 1, M, N, K, 1.0f, dA, K, dW + off, K, 0.0f, dC, N));
    float *hc = hmalloc((size_t)M * N);
    down(hc, dC, (size_t)M * N * 4);
    for (size_t i = 0; i < (size_t)M * N; i++) /* not 2 C: the copy in t is ignored under other */
        ck_assert_msg(!dt_test_close(hc[i], C2[i], 1e-3, 1e-3) || dt_test_close(C[i], C2[i], 1e-3, 1e-3),
                      "gemm under another input type read the copy: [%zu] %.9g", i, (double)hc[i]);
    ck_dt(gpu->set_gemm_inputs(gpu, t));
    ck_dt(gpu->set_gemm_shadow(gpu, dW, 0, NULL, DT_F32));
    ck_dt(gpu->gemm(gpu, 0, 1, M, N, K, 1.0f, dA, K, dW + off, K, 0.0f, dC, N));
    expect_close(dC, C, (size_t)M * N, SUM_ATOL, SUM_RTOL, "gemm after the copy is forgotten");
    ck_assert_int_eq(gpu->set_gemm_shadow(gpu, dW, nr, dh, DT_F32), DT_ERR_INVALID);
    ck_dt(gpu->set_gemm_inputs(gpu, DT_F32));
    gfree(dA), gfree(dW), gfree(dC), gfree(dh);
    free(A), free(W), free(W2), free(C), free(C2), free(Ct), free(h), free(hc);
}
END_TEST

/* Attention under set_gemm_inputs(F16/BF16), against the CPU's FP32
 * attention on the same 16-bit-exact q, k, v and dY. The GPU rounds its
 * probabilities P (forward, P V) and score gradients dS (backward, dS K and
 * dS^T Q) to the 16-bit type for its GEMMs; the CPU does not. Rounding to
 * nearest changes each such value x by at most u |x| + a (u = 2^-8 bf16,
 * 2^-11 f16: half an ulp relative; a = 2^-25, half the f16 subnormal
 * spacing, for values below f16's normal range; 0 for bf16, whose range is
 * float's), and the products and sums after it are exact or FP32. So per
 * element, summing over the T terms of the GEMM:
 *   Y_id:  u sum_j P_ij |V_jd| + a sum_j |V_jd|
 *   dQ_id: u sum_j |dS_ij| |K_jd| + a sum_j |K_jd|
 *   dK_jd: u sum_i |dS_ij| |Q_id| + a sum_i |Q_id|
 *   dV_jd: u sum_i P_ij |dY_id| + a sum_i |dY_id|
 * with P and dS the exact values (computed here in double; the GPU makes P
 * again from lse in its backward and rounds it for P^T dY). The GPU's own
 * P and dS differ from those by FP32 summation order (~1e-6 relative),
 * which can move a value across a rounding boundary: the bound is taken
 * 1.25 times, plus the SUM tolerance of the FP32 test for the rest. Sums
 * are over at most T = 37 terms, so these bounds stay small (~4e-3 for
 * bf16's Y with N(0,1) inputs) yet hold for any inputs. */
static double half_u(dt_dtype t) { return t == DT_F16 ? 0x1p-11 : 0x1p-8; }
static double half_a(dt_dtype t) { return t == DT_F16 ? 0x1p-25 : 0.0; }

static void expect_within(const float *d, const float *ref, const double *bound, size_t n, const char *what)
{
    float *h = hmalloc(n);
    down(h, d, n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        const double tol = 1.25 * bound[i] + SUM_ATOL + SUM_RTOL * fabs((double)ref[i]);
        ck_assert_msg(fabs((double)h[i] - (double)ref[i]) <= tol, "%s[%zu]: gpu %.9g cpu %.9g, bound %.3g", what, i,
                      (double)h[i], (double)ref[i], tol);
    }
    free(h);
}

START_TEST(test_attention_half)
{
    const dt_dtype t = _i ? DT_BF16 : DT_F16;
    const double u = half_u(t), a = half_a(t);
    const int B = 2, T = 37, C = 48, NH = 3, hs = C / NH, C3 = 3 * C;
    const double scale = 1.0 / sqrt((double)hs);
    const size_t nqkv = (size_t)B * T * C3, nout = (size_t)B * T * C, nlse = (size_t)B * NH * T;
    float *qkv = hmalloc(nqkv), *out = hmalloc(nout), *lse = hmalloc(nlse), *dout = hmalloc(nout);
    float *dqkv = hmalloc(nqkv);
    double *by = calloc(nout, sizeof *by), *bd = calloc(nqkv, sizeof *bd), *dS = calloc((size_t)T * T, sizeof *dS);
    double *P = calloc((size_t)T * T, sizeof *P);
    ck_assert(by && bd && dS && P);
    fill(qkv, nqkv, 60, 1), fill(dout, nout, 61, 1);
    round_to(qkv, nqkv, t), round_to(dout, nout, t);
    float *d_qkv = up(qkv, nqkv * 4), *d_out = up(out, nout * 4), *d_lse = up(lse, nlse * 4);
    float *d_dout = up(dout, nout * 4), *d_dqkv = up(dqkv, nqkv * 4);
    ck_dt(gpu->set_gemm_inputs(gpu, t));
    ck_dt(cpu->attention_forward(cpu, out, lse, qkv, B, T, C, NH));
    ck_dt(gpu->attention_forward(gpu, d_out, d_lse, d_qkv, B, T, C, NH));
    expect_close(d_lse, lse, nlse, SUM_ATOL, SUM_RTOL, "16-bit attention lse"); /* exact products, FP32 softmax */
    ck_dt(cpu->attention_backward(cpu, dqkv, dout, qkv, out, lse, B, T, C, NH));
    float *d_out_cpu = up(out, nout * 4), *d_lse_cpu = up(lse, nlse * 4);
    ck_dt(gpu->attention_backward(gpu, d_dqkv, d_dout, d_qkv, d_out_cpu, d_lse_cpu, B, T, C, NH));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *Q = qkv + (size_t)b * T * C3 + h * hs, *K = Q + C, *V = Q + 2 * C;
            const float *dY = dout + (size_t)b * T * C + h * hs;
            /* P and dS in double, from the 16-bit-exact inputs */
            for (int i = 0; i < T; i++) {
                double mx = -1e300, z = 0, dot = 0;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = 0; d < hs; d++) s += (double)Q[(size_t)i * C3 + d] * K[(size_t)j * C3 + d];
                    P[(size_t)i * T + j] = s * scale;
                    if (s * scale > mx) mx = s * scale;
                }
                for (int j = 0; j <= i; j++) z += (P[(size_t)i * T + j] = exp(P[(size_t)i * T + j] - mx));
                for (int j = 0; j <= i; j++) {
                    double dp = 0;
                    P[(size_t)i * T + j] /= z;
                    for (int d = 0; d < hs; d++) dp += (double)dY[(size_t)i * C + d] * V[(size_t)j * C3 + d];
                    dS[(size_t)i * T + j] = dp;
                    dot += P[(size_t)i * T + j] * dp;
                }
                for (int j = 0; j <= i; j++)
                    dS[(size_t)i * T + j] = scale * P[(size_t)i * T + j] * (dS[(size_t)i * T + j] - dot);
            }
            for (int i = 0; i < T; i++)
                for (int d = 0; d < hs; d++) {
                    double y = 0, q = 0;
                    for (int j = 0; j <= i; j++) {
                        y += (u * P[(size_t)i * T + j] + a) * fabs(V[(size_t)j * C3 + d]);
                        q += (u * fabs(dS[(size_t)i * T + j]) + a) * fabs(K[(size_t)j * C3 + d]);
                    }
                    by[((size_t)b * T + i) * C + h * hs + d] = y;
                    bd[((size_t)b * T + i) * C3 + h * hs + d] = q;
                }
            for (int j = 0; j < T; j++)
                for (int d = 0; d < hs; d++) {
                    double k = 0, v = 0;
                    for (int i = j; i < T; i++) {
                        k += (u * fabs(dS[(size_t)i * T + j]) + a) * fabs(Q[(size_t)i * C3 + d]);
                        v += (u * P[(size_t)i * T + j] + a) * fabs(dY[(size_t)i * C + d]);
                    }
                    bd[((size_t)b * T + j) * C3 + C + h * hs + d] = k;
                    bd[((size_t)b * T + j) * C3 + 2 * C + h * hs + d] = v;
                }
        }
    expect_within(d_out, out, by, nout, "16-bit attention out");
    expect_within(d_dqkv, dqkv, bd, nqkv, "16-bit attention dqkv");
    ck_dt(gpu->set_gemm_inputs(gpu, DT_F32));
    gfree(d_qkv), gfree(d_out), gfree(d_lse), gfree(d_dout), gfree(d_dqkv), gfree(d_out_cpu), gfree(d_lse_cpu);
    free(qkv), free(out), free(lse), free(dout), free(dqkv), free(by), free(bd), free(dS), free(P);
}
END_TEST

START_TEST(test_matmul)
{
    const int N = 67, C = 48, OC = 40;
    float *inp = hmalloc(N * C), *w = hmalloc(OC * C), *bias = hmalloc(OC), *out = hmalloc(N * OC);
    float *dout = hmalloc(N * OC), *dinp = hmalloc(N * C), *dw = hmalloc(OC * C), *db = hmalloc(OC);
    fill(inp, N * C, 5, 1), fill(w, OC * C, 6, 1), fill(bias, OC, 7, 1), fill(dout, N * OC, 8, 1);
    fill(dw, OC * C, 9, 1), fill(db, OC, 10, 1); /* gradients accumulate */
    float *d_inp = up(inp, N * C * 4), *d_w = up(w, OC * C * 4), *d_bias = up(bias, OC * 4);
    float *d_out = up(out, N * OC * 4), *d_dout = up(dout, N * OC * 4), *d_dinp = up(dinp, N * C * 4);
    float *d_dw = up(dw, OC * C * 4), *d_db = up(db, OC * 4);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        ck_dt(cpu->matmul_forward(cpu, out, inp, w, with_bias ? bias : NULL, N, C, OC));
        ck_dt(gpu->matmul_forward(gpu, d_out, d_inp, d_w, with_bias ? d_bias : NULL, N, C, OC));
        expect_close(d_out, out, N * OC, SUM_ATOL, SUM_RTOL, "matmul out");
        ck_dt(cpu->matmul_backward(cpu, with_bias ? dinp : NULL, dw, with_bias ? db : NULL, dout, inp, w, N, C, OC));
        ck_dt(gpu->matmul_backward(gpu, with_bias ? d_dinp : NULL, d_dw, with_bias ? d_db : NULL, d_dout, d_inp, d_w, N,
                                   C, OC));
        if (with_bias) expect_close(d_dinp, dinp, N * C, SUM_ATOL, SUM_RTOL, "matmul dinp");
        expect_close(d_dw, dw, OC * C, SUM_ATOL, SUM_RTOL, "matmul dw");
        expect_close(d_db, db, OC, SUM_ATOL, SUM_RTOL, "matmul dbias");
    }
    /* dw NULL: the input gradient alone (a zero-bubble B), the same bits; dw and dbias untouched */
    float *i1 = hmalloc(N * C), *i2 = hmalloc(N * C), *w1 = hmalloc(OC * C), *w2 = hmalloc(OC * C);
    ck_dt(gpu->matmul_backward(gpu, d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC));
    down(i1, d_dinp, N * C * 4), down(w1, d_dw, OC * C * 4);
    ck_dt(gpu->memset_zero(gpu, d_dinp, N * C * 4));
    ck_dt(gpu->matmul_backward(gpu, d_dinp, NULL, NULL, d_dout, d_inp, d_w, N, C, OC));
    down(i2, d_dinp, N * C * 4), down(w2, d_dw, OC * C * 4);
    ck_assert(memcmp(i1, i2, N * C * 4) == 0 && memcmp(w1, w2, OC * C * 4) == 0);
    free(i1), free(i2), free(w1), free(w2);
    gfree(d_inp), gfree(d_w), gfree(d_bias), gfree(d_out), gfree(d_dout), gfree(d_dinp), gfree(d_dw), gfree(d_db);
    free(inp), free(w), free(bias), free(out), free(dout), free(dinp), free(dw), free(db);
}
END_TEST

/* ---- layers ------------------------------------------------------------------------------------ */

/* {B, T, C, V}: V small so tokens repeat within and across rows; B*T = 1;
 * C not a multiple of 32; a long run of one token (V = 1). */
static const int encoder_shapes[][4] = {{3, 11, 40, 7}, {4, 257, 70, 50}, {1, 1, 1, 1}, {2, 600, 33, 1}};

START_TEST(test_encoder)
{
    const int B = encoder_shapes[_i][0], T = encoder_shapes[_i][1], C = encoder_shapes[_i][2];
    const int V = encoder_shapes[_i][3];
    const size_t BT = (size_t)B * T;
    int32_t *tok = malloc(BT * sizeof *tok);
    dt_rng r;
    dt_rng_seed(&r, 11);
    for (size_t i = 0; i < BT; i++) tok[i] = (int32_t)dt_rng_below(&r, V);
    float *wte = hmalloc(V * C), *wpe = hmalloc(T * C), *out = hmalloc(BT * C), *dout = hmalloc(BT * C);
    float *dwte = hmalloc(V * C), *dwpe = hmalloc(T * C);
    fill(wte, V * C, 12, 1), fill(wpe, T * C, 13, 1), fill(dout, BT * C, 14, 1);
    fill(dwte, V * C, 15, 1), fill(dwpe, T * C, 16, 1);
    int32_t *d_tok = up(tok, BT * sizeof *tok);
    float *d_wte = up(wte, V * C * 4), *d_wpe = up(wpe, T * C * 4), *d_out = up(out, BT * C * 4);
    float *d_dout = up(dout, BT * C * 4), *d_dwte = up(dwte, V * C * 4), *d_dwpe = up(dwpe, T * C * 4);
    ck_dt(cpu->encoder_forward(cpu, out, tok, wte, wpe, B, T, C));
    ck_dt(gpu->encoder_forward(gpu, d_out, d_tok, d_wte, d_wpe, B, T, C));
    expect_bits(d_out, out, BT * C * 4, "encoder out");
    ck_dt(cpu->encoder_backward(cpu, dwte, dwpe, dout, tok, B, T, C));
    ck_dt(gpu->encoder_backward(gpu, d_dwte, d_dwpe, d_dout, d_tok, B, T, C));
    expect_bits(d_dwte, dwte, (size_t)V * C * 4, "encoder dwte");
    expect_bits(d_dwpe, dwpe, (size_t)T * C * 4, "encoder dwpe");
    /* A negative token: reported at the next synchronisation, naming the
     * lowest such position; the other tokens' rows are still added. */
    if (BT >= 3) {
        const size_t p1 = BT - 1, p2 = BT / 2;
        const int32_t t1 = tok[p1], t2 = tok[p2];
        tok[p1] = -3, tok[p2] = -2; /* -1 is DT_TOKEN_MASKED: skipped, not an error */
        ck_dt(gpu->copy(gpu, d_tok, tok, BT * sizeof *tok, DT_COPY_H2D));
        ck_dt(gpu->encoder_backward(gpu, d_dwte, d_dwpe, d_dout, d_tok, B, T, C));
        ck_assert_int_eq(gpu->synchronize(gpu), DT_ERR_INVALID);
        char want[96];
        snprintf(want, sizeof want, "encoder backward: token -2 at position %zu is negative", p2);
        ck_assert_msg(strstr(dt_last_error(), want) != NULL, "%s", dt_last_error());
        ck_dt(gpu->synchronize(gpu));
        /* dwte: the CPU's per-element order (positions ascending), without the two positions */
        tok[p1] = t1, tok[p2] = t2;
        for (size_t i = 0; i < BT; i++)
            if (i != p1 && i != p2)
                for (int c = 0; c < C; c++) dwte[(size_t)tok[i] * C + c] += dout[i * C + c];
        expect_bits(d_dwte, dwte, (size_t)V * C * 4, "encoder dwte without the negative tokens");
    }
    gfree(d_tok), gfree(d_wte), gfree(d_wpe), gfree(d_out), gfree(d_dout), gfree(d_dwte), gfree(d_dwpe);
    free(tok), free(wte), free(wpe), free(out), free(dout), free(dwte), free(dwpe);
}
END_TEST

START_TEST(test_layernorm)
{
    const int N = 37, C = 72;
    float *x = hmalloc(N * C), *w = hmalloc(C), *b = hmalloc(C), *out = hmalloc(N * C), *dout = hmalloc(N * C);
    float *mean = hmalloc(N), *rstd = hmalloc(N), *dx = hmalloc(N * C), *dw = hmalloc(C), *db = hmalloc(C);
    fill(x, N * C, 17, 2), fill(w, C, 18, 1), fill(b, C, 19, 1), fill(dout, N * C, 20, 1);
    fill(dx, N * C, 21, 1), fill(dw, C, 22, 1), fill(db, C, 23, 1);
    for (int i = 0; i < N * C; i++) x[i] += 3.0f;
    float *d_x = up(x, N * C * 4), *d_w = up(w, C * 4), *d_b = up(b, C * 4), *d_out = up(out, N * C * 4);
    float *d_dout = up(dout, N * C * 4), *d_mean = up(mean, N * 4), *d_rstd = up(rstd, N * 4);
    float *d_dx = up(dx, N * C * 4), *d_dw = up(dw, C * 4), *d_db = up(db, C * 4);
    ck_dt(cpu->layernorm_forward(cpu, out, mean, rstd, x, w, b, N, C));
    ck_dt(gpu->layernorm_forward(gpu, d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C));
    expect_close(d_out, out, N * C, SUM_ATOL, SUM_RTOL, "layernorm out");
    expect_close(d_mean, mean, N, SUM_ATOL, SUM_RTOL, "layernorm mean");
    expect_close(d_rstd, rstd, N, SUM_ATOL, SUM_RTOL, "layernorm rstd");
    /* backward from the CPU's statistics on both sides */
    float *d_mean2 = up(mean, N * 4), *d_rstd2 = up(rstd, N * 4);
    ck_dt(cpu->layernorm_backward(cpu, dx, dw, db, dout, x, w, mean, rstd, N, C));
    ck_dt(gpu->layernorm_backward(gpu, d_dx, d_dw, d_db, d_dout, d_x, d_w, d_mean2, d_rstd2, N, C));
    expect_close(d_dx, dx, N * C, SUM_ATOL, SUM_RTOL, "layernorm dinp (accumulated)");
    expect_close(d_dw, dw, C, SUM_ATOL, SUM_RTOL, "layernorm dw");
    expect_close(d_db, db, C, SUM_ATOL, SUM_RTOL, "layernorm db");
    /* determinism: the same backward twice gives the same bits */
    float *g1 = hmalloc(C), *g2 = hmalloc(C);
    ck_dt(gpu->memset_zero(gpu, d_dw, C * 4));
    ck_dt(gpu->layernorm_backward(gpu, d_dx, d_dw, d_db, d_dout, d_x, d_w, d_mean2, d_rstd2, N, C));
    down(g1, d_dw, C * 4);
    ck_dt(gpu->memset_zero(gpu, d_dw, C * 4));
    ck_dt(gpu->layernorm_backward(gpu, d_dx, d_dw, d_db, d_dout, d_x, d_w, d_mean2, d_rstd2, N, C));
    down(g2, d_dw, C * 4);
    ck_assert(memcmp(g1, g2, C * 4) == 0);
    /* either part alone (the zero-bubble split): the same bits as both at once */
    float *x1 = hmalloc(N * C), *x2 = hmalloc(N * C), *b1 = hmalloc(C), *b2 = hmalloc(C);
    ck_dt(gpu->memset_zero(gpu, d_dx, N * C * 4));
    ck_dt(gpu->memset_zero(gpu, d_dw, C * 4));
    ck_dt(gpu->memset_zero(gpu, d_db, C * 4));
    ck_dt(gpu->layernorm_backward(gpu, d_dx, d_dw, d_db, d_dout, d_x, d_w, d_mean2, d_rstd2, N, C));
    down(x1, d_dx, N * C * 4), down(g1, d_dw, C * 4), down(b1, d_db, C * 4);
    ck_dt(gpu->memset_zero(gpu, d_dx, N * C * 4));
    ck_dt(gpu->memset_zero(gpu, d_dw, C * 4));
    ck_dt(gpu->memset_zero(gpu, d_db, C * 4));
    ck_dt(gpu->layernorm_backward(gpu, d_dx, NULL, NULL, d_dout, d_x, d_w, d_mean2, d_rstd2, N, C));
    ck_dt(gpu->layernorm_backward(gpu, NULL, d_dw, d_db, d_dout, d_x, d_w, d_mean2, d_rstd2, N, C));
    down(x2, d_dx, N * C * 4), down(g2, d_dw, C * 4), down(b2, d_db, C * 4);
    ck_assert(memcmp(x1, x2, N * C * 4) == 0 && memcmp(g1, g2, C * 4) == 0 && memcmp(b1, b2, C * 4) == 0);
    free(x1), free(x2), free(b1), free(b2);
    gfree(d_x), gfree(d_w), gfree(d_b), gfree(d_out), gfree(d_dout), gfree(d_mean), gfree(d_rstd), gfree(d_dx);
    gfree(d_dw), gfree(d_db), gfree(d_mean2), gfree(d_rstd2);
    free(x), free(w), free(b), free(out), free(dout), free(mean), free(rstd), free(dx), free(dw), free(db);
    free(g1), free(g2);
}
END_TEST

/* Column sums (the bias and LayerNorm weight gradients) on shapes that
 * exercise the row-chunk split of cuda_plan.h: N = 1, N not a multiple of
 * a chunk, C not a multiple of 32, and one large C. Accumulating (+=) into
 * random gradients; the same call twice gives the same bits. */
static const int colsum_shapes[][2] = {{1, 45}, {300, 33}, {1000, 768}, {4099, 70}, {257, 1}};

START_TEST(test_colsums)
{
    const int N = colsum_shapes[_i][0], C = colsum_shapes[_i][1];
    const size_t nc = (size_t)N * C;
    float *x = hmalloc(nc), *dout = hmalloc(nc), *w = hmalloc(C), *mean = hmalloc(N), *rstd = hmalloc(N);
    float *dx = hmalloc(nc), *dw = hmalloc(C), *db = hmalloc(C), *g1 = hmalloc(C), *g2 = hmalloc(C);
    float *wmm = hmalloc((size_t)C * C), *dwmm = hmalloc((size_t)C * C);
    fill(x, nc, 70, 1), fill(dout, nc, 71, 1), fill(w, C, 72, 1), fill(dx, nc, 73, 1), fill(dw, C, 74, 1);
    fill(db, C, 75, 1), fill(mean, N, 76, 0.1f), fill(rstd, N, 77, 0.1f);
    for (int i = 0; i < N; i++) rstd[i] = 1.0f + fabsf(rstd[i]);
    float *d_x = up(x, nc * 4), *d_dout = up(dout, nc * 4), *d_w = up(w, C * 4), *d_mean = up(mean, N * 4);
    float *d_rstd = up(rstd, N * 4), *d_dx = up(dx, nc * 4), *d_dw = up(dw, C * 4), *d_db = up(db, C * 4);
    /* bias gradient: matmul backward with OC = C, no dinp */
    memset(wmm, 0, (size_t)C * C * 4), memset(dwmm, 0, (size_t)C * C * 4);
    float *d_wmm = up(wmm, (size_t)C * C * 4), *d_dwmm = up(dwmm, (size_t)C * C * 4);
    ck_dt(cpu->matmul_backward(cpu, NULL, dwmm, db, dout, x, wmm, N, C, C));
    ck_dt(gpu->matmul_backward(gpu, NULL, d_dwmm, d_db, d_dout, d_x, d_wmm, N, C, C));
    expect_close(d_db, db, C, SUM_ATOL, SUM_RTOL, "bias gradient (accumulated)");
    for (int rep = 0; rep < 2; rep++) {
        ck_dt(gpu->memset_zero(gpu, d_db, C * 4));
        ck_dt(gpu->matmul_backward(gpu, NULL, d_dwmm, d_db, d_dout, d_x, d_wmm, N, C, C));
        down(rep ? g2 : g1, d_db, C * 4);
    }
    ck_assert_msg(memcmp(g1, g2, C * 4) == 0, "bias gradient not deterministic");
    /* LayerNorm dw, db (+ dinp) */
    fill(db, C, 75, 1);
    ck_dt(gpu->copy(gpu, d_db, db, C * 4, DT_COPY_H2D));
    ck_dt(cpu->layernorm_backward(cpu, dx, dw, db, dout, x, w, mean, rstd, N, C));
    ck_dt(gpu->layernorm_backward(gpu, d_dx, d_dw, d_db, d_dout, d_x, d_w, d_mean, d_rstd, N, C));
    expect_close(d_dw, dw, C, SUM_ATOL, SUM_RTOL, "layernorm dw (accumulated)");
    expect_close(d_db, db, C, SUM_ATOL, SUM_RTOL, "layernorm db (accumulated)");
    expect_close(d_dx, dx, nc, SUM_ATOL, SUM_RTOL, "layernorm dinp (accumulated)");
    for (int rep = 0; rep < 2; rep++) {
        ck_dt(gpu->memset_zero(gpu, d_dw, C * 4));
        ck_dt(gpu->layernorm_backward(gpu, d_dx, d_dw, d_db, d_dout, d_x, d_w, d_mean, d_rstd, N, C));
        down(rep ? g2 : g1, d_dw, C * 4);
    }
    ck_assert_msg(memcmp(g1, g2, C * 4) == 0, "layernorm dw not deterministic");
    gfree(d_x), gfree(d_dout), gfree(d_w), gfree(d_mean), gfree(d_rstd), gfree(d_dx), gfree(d_dw), gfree(d_db);
    gfree(d_wmm), gfree(d_dwmm);
    free(x), free(dout), free(w), free(mean), free(rstd), free(dx), free(dw), free(db), free(g1), free(g2);
    free(wmm), free(dwmm);
}
END_TEST

START_TEST(test_attention)
{
    const int B = 2, T = 37, C = 48, NH = 3; /* T > 32: rows span more than one warp stride */
    const size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, nlse = (size_t)B * NH * T;
    float *qkv = hmalloc(nqkv), *out = hmalloc(nout), *lse = hmalloc(nlse), *dout = hmalloc(nout);
    float *dqkv = hmalloc(nqkv);
    fill(qkv, nqkv, 24, 1), fill(dout, nout, 25, 1);
    float *d_qkv = up(qkv, nqkv * 4), *d_out = up(out, nout * 4), *d_lse = up(lse, nlse * 4);
    float *d_dout = up(dout, nout * 4), *d_dqkv = up(dqkv, nqkv * 4);
    ck_dt(cpu->attention_forward(cpu, out, lse, qkv, B, T, C, NH));
    ck_dt(gpu->attention_forward(gpu, d_out, d_lse, d_qkv, B, T, C, NH));
    expect_close(d_out, out, nout, SUM_ATOL, SUM_RTOL, "attention out");
    expect_close(d_lse, lse, nlse, SUM_ATOL, SUM_RTOL, "attention lse");
    ck_dt(cpu->attention_backward(cpu, dqkv, dout, qkv, out, lse, B, T, C, NH));
    /* backward from the same forward state: the CPU's out and lse */
    float *d_out_cpu = up(out, nout * 4), *d_lse_cpu = up(lse, nlse * 4);
    ck_dt(gpu->attention_backward(gpu, d_dqkv, d_dout, d_qkv, d_out_cpu, d_lse_cpu, B, T, C, NH));
    expect_close(d_dqkv, dqkv, nqkv, SUM_ATOL, SUM_RTOL, "attention dqkv");
    ck_assert_int_ne(gpu->attention_forward(gpu, d_out, d_lse, d_qkv, B, T, C, 5), DT_OK);
    gfree(d_qkv), gfree(d_out), gfree(d_lse), gfree(d_dout), gfree(d_dqkv), gfree(d_out_cpu), gfree(d_lse_cpu);
    free(qkv), free(out), free(lse), free(dout), free(dqkv);
}
END_TEST

START_TEST(test_elementwise)
{
    const size_t n = 100003; /* not a multiple of any block size */
    float *x = hmalloc(n), *y = hmalloc(n), *o = hmalloc(n), *o2 = hmalloc(n);
    fill(x, n, 26, 3), fill(y, n, 27, 1);
    float *dx = up(x, n * 4), *dy = up(y, n * 4), *dout = up(o, n * 4);
    ck_dt(cpu->gelu_forward(cpu, o, x, n));
    ck_dt(gpu->gelu_forward(gpu, dout, dx, n));
    expect_close(dout, o, n, ELEM_ATOL, ELEM_RTOL, "gelu");
    ck_dt(cpu->gelu_backward(cpu, o, NULL, x, y, n));
    ck_dt(gpu->gelu_backward(gpu, dout, NULL, dx, dy, n));
    expect_close(dout, o, n, ELEM_ATOL, ELEM_RTOL, "gelu backward");
    { /* the forward's value from the backward's pass: the same bits as the GPU's gelu_forward */
        float *dfw = up(o, n * 4), *dgelu = up(o, n * 4);
        ck_dt(gpu->gelu_forward(gpu, dgelu, dx, n));
        ck_dt(gpu->copy(gpu, dfw, dy, n * 4, DT_COPY_D2D));
        ck_dt(gpu->gelu_backward(gpu, dfw, dout, dx, dfw, n)); /* in place, and out */
        ck_dt(gpu->copy(gpu, o2, dgelu, n * 4, DT_COPY_D2H));
        expect_bits(dout, o2, n * 4, "gelu backward's forward value");
        gfree(dfw), gfree(dgelu);
    }
    ck_dt(cpu->residual_forward(cpu, o, x, y, n));
    ck_dt(gpu->residual_forward(gpu, dout, dx, dy, n));
    expect_bits(dout, o, n * 4, "residual");
    ck_dt(cpu->relu_forward(cpu, o, x, n));
    ck_dt(gpu->relu_forward(gpu, dout, dx, n));
    expect_bits(dout, o, n * 4, "relu");
    ck_dt(cpu->relu_backward(cpu, o, x, y, n));
    ck_dt(gpu->relu_backward(gpu, dout, dx, dy, n));
    expect_bits(dout, o, n * 4, "relu backward");
    memcpy(o, x, n * 4);
    ck_dt(cpu->scale(cpu, o, 0.37f, n));
    ck_dt(gpu->copy(gpu, dout, dx, n * 4, DT_COPY_D2D));
    ck_dt(gpu->scale(gpu, dout, 0.37f, n));
    expect_bits(dout, o, n * 4, "scale");
    memcpy(o2, y, n * 4);
    ck_dt(cpu->axpy(cpu, o2, -1.5f, x, n));
    ck_dt(gpu->copy(gpu, dout, dy, n * 4, DT_COPY_D2D));
    ck_dt(gpu->axpy(gpu, dout, -1.5f, dx, n));
    expect_close(dout, o2, n, ELEM_ATOL, ELEM_RTOL, "axpy");
    gfree(dx), gfree(dy), gfree(dout);
    free(x), free(y), free(o), free(o2);
}
END_TEST

START_TEST(test_crossentropy)
{
    const int N = 9, V = 1000; /* V > the block size: rows span several strides */
    float *z = hmalloc((size_t)N * V), *dz = hmalloc((size_t)N * V), *loss = hmalloc(N);
    int32_t tgt[9] = {3, -1, 999, 0, 500, -1, 7, 7, 128};
    uint8_t corr[9], gcorr[9];
    fill(z, (size_t)N * V, 28, 2);
    z[(size_t)3 * V + 0] = 40.0f;                        /* row 3: argmax at its target */
    z[(size_t)6 * V + 5] = z[(size_t)6 * V + 9] = 40.0f; /* row 6: a tie, lowest index wins */
    int32_t *d_t = up(tgt, sizeof tgt);
    float *d_z = up(z, (size_t)N * V * 4), *d_dz = up(dz, (size_t)N * V * 4), *d_loss = up(loss, N * 4);
    uint8_t *d_c = up(corr, sizeof corr);
    ck_dt(cpu->crossentropy_forward_backward(cpu, loss, corr, dz, z, tgt, N, V, V, 0.125f));
    ck_dt(gpu->crossentropy_forward_backward(gpu, d_loss, d_c, d_dz, d_z, d_t, N, V, V, 0.125f));
    expect_close(d_loss, loss, N, ELEM_ATOL, ELEM_RTOL, "cross-entropy loss");
    expect_close(d_dz, dz, (size_t)N * V, ELEM_ATOL, ELEM_RTOL, "cross-entropy dlogits");
    down(gcorr, d_c, sizeof gcorr);
    for (int i = 0; i < N; i++) ck_assert_int_eq(gcorr[i], corr[i]);
    /* dlogits aliasing logits, correct NULL */
    ck_dt(gpu->crossentropy_forward_backward(gpu, d_loss, NULL, d_z, d_z, d_t, N, V, V, 0.125f));
    expect_close(d_loss, loss, N, ELEM_ATOL, ELEM_RTOL, "cross-entropy loss (aliased)");
    expect_close(d_z, dz, (size_t)N * V, ELEM_ATOL, ELEM_RTOL, "cross-entropy dlogits (aliased)");
    /* A target outside the vocabulary: the call itself returns at once and
     * the next host synchronisation fails, naming the lowest bad row of
     * the first bad call (as the CPU names it); reported once. The bad
     * rows' losses are NaN, their gradients zero, the others as usual. */
    tgt[4] = V;
    tgt[7] = V + 5;
    ck_dt(gpu->copy(gpu, d_t, tgt, sizeof tgt, DT_COPY_H2D));
    ck_assert_int_eq(cpu->crossentropy_forward_backward(cpu, loss, NULL, NULL, z, tgt, N, V, V, 1.0f), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "target 1000 at row 4") != NULL, "%s", dt_last_error());
    fill(z, (size_t)N * V, 28, 2);
    ck_dt(gpu->copy(gpu, d_z, z, (size_t)N * V * 4, DT_COPY_H2D));
    int32_t tgt2[9];
    memcpy(tgt2, tgt, sizeof tgt2);
    tgt2[4] = 11; /* a second bad call (row 7 only) before the report: the first one's error is kept */
    int32_t *d_t2 = up(tgt2, sizeof tgt2); /* uploaded first: a host copy is a synchronisation point */
    ck_dt(gpu->crossentropy_forward_backward(gpu, d_loss, NULL, d_dz, d_z, d_t, N, V, V, 1.0f));
    ck_dt(gpu->crossentropy_forward_backward(gpu, d_loss, NULL, d_dz, d_z, d_t2, N, V, V, 1.0f));
    memcpy(tgt, tgt2, sizeof tgt);
    ck_assert_int_eq(gpu->synchronize(gpu), DT_ERR_INVALID);
    gfree(d_t2);
    ck_assert_msg(strstr(dt_last_error(), "cross-entropy: target 1000 at row 4 outside the vocabulary of 1000") != NULL,
                  "%s", dt_last_error());
    ck_dt(gpu->synchronize(gpu)); /* reported once */
    float gl[9], *gdz = hmalloc((size_t)N * V);
    down(gl, d_loss, sizeof gl);
    down(gdz, d_dz, (size_t)N * V * 4);
    ck_assert(isnan(gl[7]));
    for (int v = 0; v < V; v++) ck_assert(gdz[(size_t)7 * V + v] == 0.0f);
    tgt[7] = 7; /* the good rows match the CPU's */
    ck_dt(cpu->crossentropy_forward_backward(cpu, loss, NULL, dz, z, tgt, N, V, V, 1.0f));
    for (int i = 0; i < N; i++)
        if (i != 7) ck_assert_msg(dt_test_close(gl[i], loss[i], ELEM_ATOL, ELEM_RTOL), "loss row %d", i);
    tgt[7] = V + 5;
    /* a bad call is also reported by a copy to the host */
    tgt[2] = V;
    ck_dt(gpu->copy(gpu, d_t, tgt, sizeof tgt, DT_COPY_H2D));
    ck_dt(gpu->crossentropy_forward_backward(gpu, d_loss, NULL, NULL, d_z, d_t, N, V, V, 1.0f));
    ck_assert_int_eq(gpu->copy(gpu, gl, d_loss, sizeof gl, DT_COPY_D2H), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "target 1000 at row 2") != NULL, "%s", dt_last_error());
    ck_dt(gpu->synchronize(gpu));
    free(gdz);
    gfree(d_t), gfree(d_z), gfree(d_dz), gfree(d_loss), gfree(d_c);
    free(z), free(dz), free(loss);
}
END_TEST

/* Rows ld = 1024 apart (the logits' padded stride on CUDA, V rounded up
 * to 64): the CPU's unpadded results within ELEM, in place too, and the
 * padding (NaN) neither read (results finite) nor written (bits kept). */
/* A vocabulary-parallel part (columns 400..999 of 1000, rows ld = 1024
 * apart): statistics and, from merged (max, sum), the gradient, against
 * the CPU's within the element tolerance; the argmax index exactly. */
START_TEST(test_crossentropy_part)
{
    const int N = 7, V = 600, ld = 1024, v0 = 400;
    float *z = hmalloc((size_t)N * ld), *st = hmalloc((size_t)N * 4), *gst = hmalloc((size_t)N * 4);
    float *dz = hmalloc((size_t)N * ld), ms[14];
    int32_t tgt[7] = {3, -1, 999, 400, 512, 7, 450};
    fill(z, (size_t)N * ld, 31, 2);
    z[(size_t)4 * ld + 112] = 40.0f; /* row 4: argmax at its target (512 = 400 + 112) */
    int32_t *d_t = up(tgt, sizeof tgt);
    float *d_z = up(z, (size_t)N * ld * 4), *d_st = up(st, (size_t)N * 16), *d_dz = up(z, (size_t)N * ld * 4);
    ck_dt(cpu->crossentropy_part(cpu, st, NULL, NULL, z, tgt, N, V, ld, v0, 0.0f));
    ck_dt(gpu->crossentropy_part(gpu, d_st, NULL, NULL, d_z, d_t, N, V, ld, v0, 0.0f));
    down(gst, d_st, (size_t)N * 16);
    for (int i = 0; i < N; i++) {
        ck_assert_float_eq(gst[4 * i + 3], st[4 * i + 3]);
        ck_assert_float_eq(gst[4 * i], st[4 * i]);
        ck_assert_float_eq(gst[4 * i + 2], st[4 * i + 2]);
        ms[2 * i] = st[4 * i] + 0.5f, ms[2 * i + 1] = st[4 * i + 1] * 1.5f; /* as if merged with other parts */
    }
    expect_close(d_st, st, (size_t)N * 4, ELEM_ATOL, ELEM_RTOL, "cross-entropy part stats");
    float *d_ms = up(ms, sizeof ms);
    ck_dt(cpu->crossentropy_part(cpu, NULL, dz, ms, z, tgt, N, V, ld, v0, 0.25f));
    ck_dt(gpu->crossentropy_part(gpu, NULL, d_dz, d_ms, d_z, d_t, N, V, ld, v0, 0.25f));
    float *gdz = hmalloc((size_t)N * ld);
    down(gdz, d_dz, (size_t)N * ld * 4);
    for (int i = 0; i < N; i++)
        for (int v = 0; v < V; v++)
            ck_assert_msg(dt_test_close(gdz[(size_t)i * ld + v], dz[(size_t)i * ld + v], ELEM_ATOL, ELEM_RTOL),
                          "part dlogits [%d,%d]: %g vs %g", i, v, gdz[(size_t)i * ld + v], dz[(size_t)i * ld + v]);
    gfree(d_t), gfree(d_z), gfree(d_st), gfree(d_dz), gfree(d_ms);
    free(z), free(st), free(gst), free(dz), free(gdz);
}
END_TEST

START_TEST(test_crossentropy_padded)
{
    const int N = 5, V = 1000, ld = 1024;
    float *z = hmalloc((size_t)N * V), *dz = hmalloc((size_t)N * V), *loss = hmalloc(N);
    float *zp = hmalloc((size_t)N * ld), *gp = hmalloc((size_t)N * ld);
    int32_t tgt[5] = {3, -1, 999, 0, 512};
    fill(z, (size_t)N * V, 29, 2);
    for (size_t i = 0; i < (size_t)N * ld; i++) zp[i] = NAN;
    for (int i = 0; i < N; i++) memcpy(zp + (size_t)i * ld, z + (size_t)i * V, (size_t)V * 4);
    ck_dt(cpu->crossentropy_forward_backward(cpu, loss, NULL, dz, z, tgt, N, V, V, 0.25f));
    int32_t *d_t = up(tgt, sizeof tgt);
    float *d_z = up(zp, (size_t)N * ld * 4), *d_dz = up(zp, (size_t)N * ld * 4), *d_loss = up(loss, N * 4);
    for (int pass = 0; pass < 2; pass++) { /* 0: separate dlogits, 1: in place */
        float *dd = pass ? d_z : d_dz;
        ck_dt(gpu->crossentropy_forward_backward(gpu, d_loss, NULL, dd, d_z, d_t, N, V, ld, 0.25f));
        expect_close(d_loss, loss, N, ELEM_ATOL, ELEM_RTOL, "padded cross-entropy loss");
        down(gp, dd, (size_t)N * ld * 4);
        for (int i = 0; i < N; i++) {
            for (int v = 0; v < V; v++)
                ck_assert_msg(dt_test_close(gp[(size_t)i * ld + v], dz[(size_t)i * V + v], ELEM_ATOL, ELEM_RTOL),
                              "padded dlogits[%d][%d]: gpu %.9g cpu %.9g", i, v, (double)gp[(size_t)i * ld + v],
                              (double)dz[(size_t)i * V + v]);
            for (int v = V; v < ld; v++) ck_assert(isnan(gp[(size_t)i * ld + v]));
        }
    }
    gfree(d_t), gfree(d_z), gfree(d_dz), gfree(d_loss);
    free(z), free(dz), free(loss), free(zp), free(gp);
}
END_TEST

/* NaN logits: the arg-max follows the CPU's rule (a NaN wins only at
 * index 0; elsewhere it is skipped), so `correct` matches the CPU's on
 * every row; both losses are NaN on rows with a NaN. */
START_TEST(test_crossentropy_nan)
{
    enum { N = 6, V = 700 };
    float *z = hmalloc((size_t)N * V), *loss = hmalloc(N), *gloss = hmalloc(N);
    int32_t tgt[N] = {0, 5, 9, 0, 3, 0};
    uint8_t corr[N], gcorr[N];
    fill(z, (size_t)N * V, 80, 1);
    z[0 * V + 0] = NAN, z[0 * V + 400] = 50.0f;     /* NaN at 0 wins: correct for target 0 */
    z[1 * V + 300] = NAN, z[1 * V + 5] = 50.0f;     /* a NaN elsewhere is skipped: 5 */
    z[2 * V + 9] = 50.0f, z[2 * V + 600] = NAN;     /* the same across block strides */
    for (int v = 0; v < V; v++) z[3 * V + v] = NAN; /* all NaN: 0 */
    z[4 * V + 3] = 50.0f, z[4 * V + 260] = 50.0f;   /* a tie across threads: lowest index */
    z[5 * V + 0] = -INFINITY, z[5 * V + 1] = NAN;   /* z[0] = -inf and NaNs */
    for (int v = 2; v < V; v++) z[5 * V + v] = -INFINITY;
    int32_t *d_t = up(tgt, sizeof tgt);
    float *d_z = up(z, (size_t)N * V * 4), *d_loss = up(loss, N * 4);
    uint8_t *d_c = up(corr, sizeof corr);
    ck_dt(cpu->crossentropy_forward_backward(cpu, loss, corr, NULL, z, tgt, N, V, V, 1.0f));
    ck_dt(gpu->crossentropy_forward_backward(gpu, d_loss, d_c, NULL, d_z, d_t, N, V, V, 1.0f));
    down(gcorr, d_c, sizeof gcorr);
    down(gloss, d_loss, N * 4);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(gcorr[i] == corr[i], "row %d: gpu correct %d, cpu %d", i, gcorr[i], corr[i]);
        ck_assert_msg(isnan(gloss[i]) == isnan(loss[i]), "row %d: gpu loss %g, cpu %g", i, gloss[i], loss[i]);
    }
    for (int i = 0; i < N; i++) ck_assert_msg(corr[i] == 1, "row %d: the cpu's arg-max is not %d", i, tgt[i]);
    gfree(d_t), gfree(d_z), gfree(d_loss), gfree(d_c);
    free(z), free(loss), free(gloss);
}
END_TEST

/* DT_CUDA_SYNC=1, read at creation: every launch runs to completion, so
 * a deferred device-data error comes back from the op that met it. A
 * backend made without it keeps deferring. */
START_TEST(test_sync_switch)
{
    enum { N = 3, V = 50 };
    float z[N * V], loss[N];
    int32_t tgt[N] = {1, V, 2};
    fill(z, N * V, 85, 1);
    ck_assert_int_eq(setenv("DT_CUDA_SYNC", "1", 1), 0);
    dt_backend *g2 = NULL;
    dt_status st = dt_backend_cuda_create(0, &g2);
    unsetenv("DT_CUDA_SYNC");
    ck_dt(st);
    void *d_z, *d_t, *d_l;
    ck_dt(g2->alloc(g2, sizeof z, &d_z));
    ck_dt(g2->alloc(g2, sizeof tgt, &d_t));
    ck_dt(g2->alloc(g2, sizeof loss, &d_l));
    ck_dt(g2->copy(g2, d_z, z, sizeof z, DT_COPY_H2D));
    ck_dt(g2->copy(g2, d_t, tgt, sizeof tgt, DT_COPY_H2D));
    ck_assert_int_eq(g2->crossentropy_forward_backward(g2, d_l, NULL, NULL, d_z, d_t, N, V, V, 1.0f), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "target 50 at row 1") != NULL, "%s", dt_last_error());
    ck_dt(g2->synchronize(g2)); /* reported once */
    g2->free(g2, d_z), g2->free(g2, d_t), g2->free(g2, d_l);
    dt_backend_destroy(g2);
    /* the suite's backend (made without the switch) defers */
    int32_t *d_t1 = up(tgt, sizeof tgt);
    float *d_z1 = up(z, sizeof z), *d_l1 = up(loss, sizeof loss);
    ck_dt(gpu->crossentropy_forward_backward(gpu, d_l1, NULL, NULL, d_z1, d_t1, N, V, V, 1.0f));
    ck_assert_int_eq(gpu->synchronize(gpu), DT_ERR_INVALID);
    gfree(d_t1), gfree(d_z1), gfree(d_l1);
}
END_TEST

/* ---- reductions and optimizers --------------------------------------------------------------------- */

START_TEST(test_sumsq)
{
    const size_t sizes[] = {0, 1, 255, 1000, 1000003};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        float *x = hmalloc(n + 1);
        fill(x, n, 29 + k, 1);
        float *dx = up(x, n * 4);
        double c, g1, g2;
        ck_dt(cpu->sumsq(cpu, x, n, &c));
        ck_dt(gpu->sumsq(gpu, dx, n, &g1));
        ck_dt(gpu->sumsq(gpu, dx, n, &g2));
        ck_assert_msg(fabs(g1 - c) <= 1e-12 * c, "sumsq n=%zu: gpu %.17g cpu %.17g", n, g1, c);
        ck_assert_msg(memcmp(&g1, &g2, sizeof g1) == 0, "sumsq not deterministic");
        gfree(dx);
        free(x);
    }
}
END_TEST

START_TEST(test_optimizers)
{
    const size_t n = 5003;
    float *p = hmalloc(n), *g = hmalloc(n), *m = hmalloc(n), *v = hmalloc(n), *u = hmalloc(n);
    fill(p, n, 40, 1), fill(g, n, 41, 1), fill(m, n, 42, 0.1f), fill(v, n, 43, 0.1f);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    float *dp = up(p, n * 4), *dg = up(g, n * 4), *dm = up(m, n * 4), *dv = up(v, n * 4), *du = up(u, n * 4);
    /* AdamW, then LAMB's direction from the updated state */
    ck_dt(cpu->adamw_update(cpu, p, g, m, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.19f, 0.0975f, 0.5f));
    ck_dt(gpu->adamw_update(gpu, dp, dg, dm, dv, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.19f, 0.0975f, 0.5f));
    expect_close(dp, p, n, ELEM_ATOL, ELEM_RTOL, "adamw p");
    expect_close(dm, m, n, ELEM_ATOL, ELEM_RTOL, "adamw m");
    expect_close(dv, v, n, ELEM_ATOL, ELEM_RTOL, "adamw v");
    ck_dt(cpu->lamb_direction(cpu, u, p, g, m, v, n, 0.9f, 0.999f, 1e-6f, 0.01f, 0.271f, 0.002997f, 1.0f));
    ck_dt(gpu->lamb_direction(gpu, du, dp, dg, dm, dv, n, 0.9f, 0.999f, 1e-6f, 0.01f, 0.271f, 0.002997f, 1.0f));
    expect_close(du, u, n, ELEM_ATOL, ELEM_RTOL, "lamb u");
    ck_assert_int_eq(gpu->adamw_update(gpu, dp, dg, dm, dv, n, 1, 0.9f, 0.9f, 1e-8f, 0, 0, 1, 1), DT_ERR_INVALID);
    /* SGD in every form; m serves as the momentum buffer */
    for (int form = 0; form < 6; form++) {
        float mom = form < 2 ? 0.0f : 0.9f;
        int first = form >= 2 && form < 4, nest = form % 2;
        ck_dt(cpu->sgd_update(cpu, p, g, m, n, 0.05f, mom, 1e-2f, 0.25f, nest, first));
        ck_dt(gpu->sgd_update(gpu, dp, dg, dm, n, 0.05f, mom, 1e-2f, 0.25f, nest, first));
        expect_close(dp, p, n, ELEM_ATOL, ELEM_RTOL, "sgd p");
        expect_close(dm, m, n, ELEM_ATOL, ELEM_RTOL, "sgd buf");
    }
    ck_dt(cpu->lars_update(cpu, p, g, m, n, 0.1f, 0.37f, 0.9f, 5e-4f, 2.0f));
    ck_dt(gpu->lars_update(gpu, dp, dg, dm, n, 0.1f, 0.37f, 0.9f, 5e-4f, 2.0f));
    expect_close(dp, p, n, ELEM_ATOL, ELEM_RTOL, "lars p");
    expect_close(dm, m, n, ELEM_ATOL, ELEM_RTOL, "lars buf");
    gfree(dp), gfree(dg), gfree(dm), gfree(dv), gfree(du);
    free(p), free(g), free(m), free(v), free(u);
}
END_TEST

/* ---- mixed precision ------------------------------------------------------------------------------- */

START_TEST(test_cast)
{
    /* Every f16 and bf16 pattern widened, and floats around every rounding
     * boundary (the widened patterns, their neighbours and midpoints,
     * specials) narrowed. */
    const size_t nh = 65536;
    uint16_t *h = malloc(nh * 2), *h2 = malloc(nh * 2);
    for (size_t i = 0; i < nh; i++) h[i] = (uint16_t)i;
    float *f = hmalloc(4 * nh), *fw = hmalloc(nh);
    const dt_dtype half_types[2] = {DT_F16, DT_BF16};
    uint16_t *dh = up(h, nh * 2);
    float *df = up(f, nh * 4 * 4);
    uint16_t *dh2 = up(h2, nh * 2 * 4);
    for (int t = 0; t < 2; t++) {
        dt_dtype ht = half_types[t];
        ck_dt(cpu->cast(cpu, fw, DT_F32, h, ht, nh));
        ck_dt(gpu->cast(gpu, df, DT_F32, dh, ht, nh));
        expect_bits(df, fw, nh * 4, ht == DT_F16 ? "f16 -> f32" : "bf16 -> f32");
        for (size_t i = 0; i < nh; i++) {
            uint32_t u;
            memcpy(&u, &fw[i], 4);
            uint32_t us[4] = {u, u + 1, u - 1, u + (ht == DT_F16 ? 0x1000u : 0x8000u)};
            for (int k = 0; k < 4; k++) memcpy(&f[4 * i + k], &us[k], 4);
        }
        for (int s = 0; s < 2; s++) {
            dt_dtype dt = half_types[s];
            uint16_t *ref = malloc(nh * 2 * 4);
            ck_dt(cpu->cast(cpu, ref, dt, f, DT_F32, 4 * nh));
            ck_dt(gpu->copy(gpu, df, f, 4 * nh * 4, DT_COPY_H2D));
            ck_dt(gpu->cast(gpu, dh2, dt, df, DT_F32, 4 * nh));
            expect_bits(dh2, ref, 4 * nh * 2, "f32 -> 16-bit");
            if (s != t) { /* f16 <-> bf16 */
                ck_dt(cpu->cast(cpu, ref, dt, h, ht, nh));
                ck_dt(gpu->cast(gpu, dh2, dt, dh, ht, nh));
                expect_bits(dh2, ref, nh * 2, "16-bit -> 16-bit");
            }
            free(ref);
        }
    }
    ck_assert_int_eq(gpu->cast(gpu, df, DT_I32, dh, DT_F16, 1), DT_ERR_INVALID);
    gfree(dh), gfree(df), gfree(dh2);
    free(h), free(h2), free(f), free(fw);
}
END_TEST

START_TEST(test_unscale_check)
{
    const size_t n = 70001;
    float *x = hmalloc(n);
    fill(x, n, 50, 100);
    float *dx = up(x, n * 4);
    int cnf = 0, gnf = 0;
    ck_dt(cpu->unscale_check(cpu, x, 1.0f / 1024, n, &cnf));
    ck_dt(gpu->unscale_check(gpu, dx, 1.0f / 1024, n, &gnf));
    ck_assert_int_eq(cnf, 0);
    ck_assert_int_eq(gnf, 0);
    expect_bits(dx, x, n * 4, "unscale");
    float bad = INFINITY;
    ck_dt(gpu->copy(gpu, dx + n - 1, &bad, 4, DT_COPY_H2D));
    ck_dt(gpu->unscale_check(gpu, dx, 0.5f, n, &gnf));
    ck_assert_int_eq(gnf, 1);
    gnf = 0;
    bad = NAN;
    ck_dt(gpu->copy(gpu, dx + n - 1, &bad, 4, DT_COPY_H2D));
    ck_dt(gpu->unscale_check(gpu, dx, 1.0f, n, &gnf));
    ck_assert_int_eq(gnf, 1);
    x[0] = 3e38f; /* overflow by the multiplication itself */
    ck_dt(gpu->copy(gpu, dx, x, 4, DT_COPY_H2D));
    gnf = 0;
    ck_dt(gpu->unscale_check(gpu, dx, 4.0f, 1, &gnf));
    ck_assert_int_eq(gnf, 1);
    gfree(dx);
    free(x);
}
END_TEST

/* span_stats: the per-tensor unscale, flags and sums of squares of a flat
 * buffer in one call, against the CPU (the front's per-span reference):
 * the scaled buffer and the flags bit for bit, the sums within 1e-12
 * relative (double sums in another order, as sumsq), bit-identical on a
 * repeat. Spans of 0, 1, 255 and 300001 elements (more than one block per
 * span), one of them with an inf, one overflowing by the multiplication. */
START_TEST(test_span_stats)
{
    const dt_span spans[] = {{0, 255}, {256, 0}, {256, 1}, {272, 300001}, {300288, 4097}, {304400, 70000}};
    const int count = (int)(sizeof spans / sizeof spans[0]);
    const size_t n = 374400;
    float *x = hmalloc(n);
    fill(x, n, 61, 100);
    x[300288 + 17] = INFINITY; /* span 4 */
    x[304400 + 69999] = 3e38f; /* span 5: inf once multiplied by 4 */
    float *dx = up(x, n * 4);
    int cnf[6], gnf[6];
    double csq[6], gsq[6], gsq2[6];
    ck_dt(cpu->span_stats(cpu, x, spans, count, 4.0f, cnf, csq));
    ck_dt(gpu->span_stats(gpu, dx, spans, count, 4.0f, gnf, gsq));
    expect_bits(dx, x, n * 4, "span_stats: scaled buffer");
    for (int i = 0; i < count; i++) {
        ck_assert_msg(gnf[i] == cnf[i], "span %d: flag gpu %d cpu %d", i, gnf[i], cnf[i]);
        if (isfinite(csq[i]))
            ck_assert_msg(fabs(gsq[i] - csq[i]) <= 1e-12 * csq[i], "span %d: sumsq gpu %.17g cpu %.17g", i, gsq[i],
                          csq[i]);
        else ck_assert_msg(!isfinite(gsq[i]), "span %d: sumsq gpu %g, cpu not finite", i, gsq[i]);
    }
    ck_assert_int_eq(cnf[4] + cnf[5], 2);
    ck_assert_int_eq(cnf[0] + cnf[1] + cnf[2] + cnf[3], 0);
    /* sums only (no scaling, x read only), twice: the same bits */
    ck_dt(gpu->span_stats(gpu, dx, spans, 4, 1.0f, NULL, gsq));
    ck_dt(gpu->span_stats(gpu, dx, spans, 4, 1.0f, NULL, gsq2));
    ck_dt(cpu->span_stats(cpu, x, spans, 4, 1.0f, NULL, csq));
    ck_assert_msg(memcmp(gsq, gsq2, 4 * sizeof(double)) == 0, "span_stats not deterministic");
    /* a span alone gets the bits it gets beside a longer one (its blocks depend on its own length) */
    ck_dt(gpu->span_stats(gpu, dx, spans + 3, 1, 1.0f, NULL, gsq2));
    ck_assert_msg(memcmp(&gsq2[0], &gsq[3], sizeof(double)) == 0, "span 3 alone: %.17g, with others %.17g", gsq2[0],
                  gsq[3]);
    ck_dt(gpu->span_stats(gpu, dx, spans, 1, 1.0f, NULL, gsq2));
    ck_assert_msg(memcmp(&gsq2[0], &gsq[0], sizeof(double)) == 0, "span 0 alone: %.17g, with others %.17g", gsq2[0],
                  gsq[0]);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(fabs(gsq[i] - csq[i]) <= 1e-12 * csq[i], "span %d (sums only): gpu %.17g cpu %.17g", i, gsq[i],
                      csq[i]);
    expect_bits(dx, x, n * 4, "span_stats: sums only leaves x");
    gfree(dx);
    free(x);
}
END_TEST

/* 16-bit GELU against the CPU: widen, FP32 GELU, round. The GPU's FP32
 * GELU may differ from the CPU's by a few ulps of float, which can move
 * the rounding to 16 bits by one unit: allowed, 1 ulp of the 16-bit type
 * (2^-10 relative for f16, 2^-7 for bf16) plus a tiny absolute slack near 0.
 * Aligned (vectorized) and misaligned (scalar) pointers, with a tail. */
START_TEST(test_gelu_half)
{
    const size_t n = 4099;
    const dt_dtype types[2] = {DT_F16, DT_BF16};
    float *x = hmalloc(n), *y = hmalloc(n), *got = hmalloc(n);
    uint16_t *h = malloc(n * 2), *hy = malloc(n * 2);
    for (size_t i = 0; i < n; i++) x[i] = -8.0f + 16.0f * (float)i / (float)(n - 1);
    for (int t = 0; t < 2; t++) {
        double rel = types[t] == DT_F16 ? 1.0 / 1024 : 1.0 / 128;
        ck_dt(cpu->cast(cpu, h, types[t], x, DT_F32, n));
        for (int off = 0; off < 2; off++) {
            size_t m = n - off;
            ck_dt(cpu->cast(cpu, y, DT_F32, h + off, types[t], m));
            ck_dt(cpu->gelu_forward(cpu, y, y, m));
            uint16_t *d_in = up(h, n * 2), *d_out = up(h, n * 2);
            ck_dt(dt__cuda_gelu_forward_half(gpu, d_out + off, d_in + off, types[t], m));
            down(hy, d_out + off, m * 2);
            ck_dt(cpu->cast(cpu, got, DT_F32, hy, types[t], m));
            for (size_t i = 0; i < m; i++)
                ck_assert_msg(dt_test_close(got[i], y[i], 1e-6, rel), "gelu %s[%zu] (offset %d): gpu %.9g cpu %.9g",
                              dt_dtype_name(types[t]), i, off, (double)got[i], (double)y[i]);
            gfree(d_in), gfree(d_out);
        }
    }
    ck_assert_int_eq(dt__cuda_gelu_forward_half(gpu, got, x, DT_F32, 1), DT_ERR_INVALID);
    ck_assert_int_eq(dt__cuda_gelu_forward_half(cpu, got, x, DT_F16, 1), DT_ERR_INVALID);
    free(x), free(y), free(got), free(h), free(hy);
}
END_TEST

/* ---- BatchNorm ---------------------------------------------------------------------------------------- */

START_TEST(test_batchnorm)
{
    const int N = 70, C = 45; /* C not a multiple of the 32-channel slices */
    float *x = hmalloc(N * C), *w = hmalloc(C), *b = hmalloc(C), *out = hmalloc(N * C), *dout = hmalloc(N * C);
    float *mean = hmalloc(C), *rstd = hmalloc(C), *rm = hmalloc(C), *rv = hmalloc(C);
    float *dx = hmalloc(N * C), *dw = hmalloc(C), *db = hmalloc(C);
    fill(x, N * C, 60, 2), fill(w, C, 61, 1), fill(b, C, 62, 1), fill(dout, N * C, 63, 1);
    fill(rm, C, 64, 1), fill(rv, C, 65, 1), fill(dw, C, 66, 1), fill(db, C, 67, 1);
    for (int i = 0; i < N * C; i++) x[i] += 5.0f;
    for (int c = 0; c < C; c++) rv[c] = fabsf(rv[c]) + 0.5f;
    float *d_x = up(x, N * C * 4), *d_w = up(w, C * 4), *d_b = up(b, C * 4), *d_out = up(out, N * C * 4);
    float *d_dout = up(dout, N * C * 4), *d_mean = up(mean, C * 4), *d_rstd = up(rstd, C * 4);
    float *d_rm = up(rm, C * 4), *d_rv = up(rv, C * 4), *d_dx = up(dx, N * C * 4), *d_dw = up(dw, C * 4);
    float *d_db = up(db, C * 4);
    for (int training = 1; training >= 0; training--) {
        ck_dt(cpu->batchnorm_forward(cpu, out, mean, rstd, rm, rv, x, w, b, N, C, 0.1f, 1e-5f, training));
        ck_dt(
            gpu->batchnorm_forward(gpu, d_out, d_mean, d_rstd, d_rm, d_rv, d_x, d_w, d_b, N, C, 0.1f, 1e-5f, training));
        expect_close(d_out, out, N * C, ELEM_ATOL, ELEM_RTOL, "batchnorm out");
        expect_close(d_mean, mean, C, ELEM_ATOL, ELEM_RTOL, "batchnorm mean");
        expect_close(d_rstd, rstd, C, ELEM_ATOL, ELEM_RTOL, "batchnorm rstd");
        expect_close(d_rm, rm, C, ELEM_ATOL, ELEM_RTOL, "batchnorm running mean");
        expect_close(d_rv, rv, C, ELEM_ATOL, ELEM_RTOL, "batchnorm running var");
    }
    ck_dt(cpu->batchnorm_forward(cpu, out, mean, rstd, NULL, NULL, x, w, b, N, C, 0.1f, 1e-5f, 1));
    float *d_mean2 = up(mean, C * 4), *d_rstd2 = up(rstd, C * 4);
    ck_dt(cpu->batchnorm_backward(cpu, dx, dw, db, dout, x, w, mean, rstd, N, C));
    ck_dt(gpu->batchnorm_backward(gpu, d_dx, d_dw, d_db, d_dout, d_x, d_w, d_mean2, d_rstd2, N, C));
    expect_close(d_dx, dx, N * C, ELEM_ATOL, ELEM_RTOL, "batchnorm dinp");
    expect_close(d_dw, dw, C, ELEM_ATOL, ELEM_RTOL, "batchnorm dw");
    expect_close(d_db, db, C, ELEM_ATOL, ELEM_RTOL, "batchnorm db");
    ck_assert_int_eq(
        gpu->batchnorm_forward(gpu, d_out, d_mean, d_rstd, d_rm, d_rv, d_x, d_w, d_b, 1, C, 0.1f, 1e-5f, 1),
        DT_ERR_INVALID);
    gfree(d_x), gfree(d_w), gfree(d_b), gfree(d_out), gfree(d_dout), gfree(d_mean), gfree(d_rstd), gfree(d_rm);
    gfree(d_rv), gfree(d_dx), gfree(d_dw), gfree(d_db), gfree(d_mean2), gfree(d_rstd2);
    free(x), free(w), free(b), free(out), free(dout), free(mean), free(rstd), free(rm), free(rv), free(dx);
    free(dw), free(db);
}
END_TEST

/* ---- FP8 (dt_fp8.h): fp8_quantize and fp8_gemm ------------------------------------------------------ */

/* Values over 2^-30 .. 2^20 (every path of the conversion: saturation,
 * normals, subnormals, flushing) with zeros of both signs and, where
 * `special`, NaN, infinities and a float subnormal among them. */
static void fp8_fill(float *x, size_t n, uint64_t seed, int special)
{
    uint64_t r = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        r ^= r >> 12, r ^= r << 25, r ^= r >> 27;
        const uint64_t h = r * 0x2545f4914f6cdd1dull;
        float v = ldexpf(1.0f + (float)(h >> 40) / 16777216.0f, (int)((h >> 8) % 51) - 30);
        if ((h & 0xff) == 7) v = 0.0f;
        x[i] = (h & 1) ? -v : v;
    }
    if (special && n > 8) {
        const float sp[6] = {NAN, INFINITY, -INFINITY, 1e-40f, -0.0f, 3e38f};
        for (int k = 0; k < 6; k++) x[(size_t)(k + 1) * (n / 7)] = sp[k];
    }
}

/* the same value, a NaN matching any NaN (the GPU's float operations
 * return its canonical NaN, not the CPU's payload) */
static int fp8_same(float a, float b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0; }

/* One conversion on both backends; q compared value for value (the GPU's
 * FP8 bytes decoded with dt_fp8_to_float where dequant is 0; the CPU's
 * storage is a float per element), and every statistic exactly. offset:
 * x (and, for bytes, q) that many elements past an aligned address, so the
 * scalar path runs. */
static void fp8_quant_case(int rows, int cols, const dt_fp8_quant *spec, int special, int with_hist, int offset,
                           const char *what)
{
    const size_t n = (size_t)rows * cols;
    float *x = hmalloc(n + offset), *qc = hmalloc(n), *qg = hmalloc(n);
    uint8_t *qb = malloc(n + 1);
    fp8_fill(x + offset, n, (uint64_t)rows * 7919 + cols, special);
    uint32_t *hc = calloc(DT_FP8_HIST, sizeof *hc), *hg = calloc(DT_FP8_HIST, sizeof *hg);
    ck_assert(qb && hc && hg);
    dt_fp8_qstats sc = {.hist = with_hist ? hc : NULL}, sg = {.hist = with_hist ? hg : NULL};
    ck_dt(cpu->fp8_quantize(cpu, qc, x + offset, rows, cols, spec, &sc));
    float *dx = up(x, (n + offset) * sizeof(float));
    char *dq;
    ck_dt(gpu->alloc(gpu, (n + offset) * sizeof(float), (void **)&dq));
    void *q = spec->dequant ? (void *)((float *)dq + offset) : (void *)(dq + offset);
    ck_dt(gpu->fp8_quantize(gpu, q, dx + offset, rows, cols, spec, &sg));
    if (spec->dequant) down(qg, q, n * sizeof(float));
    else {
        down(qb, q, n);
        for (size_t i = 0; i < n; i++) qg[i] = dt_fp8_to_float(qb[i], spec->format);
    }
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!fp8_same(qg[i], qc[i]) && !bad++) first = i;
    ck_assert_msg(bad == 0, "%s (%s): %zu of %zu values differ, first [%zu]: x %.9g gpu %.9g cpu %.9g", what,
                  dt_fp8_format_name(spec->format), bad, n, first, (double)x[offset + first], (double)qg[first],
                  (double)qc[first]);
    ck_assert_msg(sg.saturated == sc.saturated && sg.flushed == sc.flushed,
                  "%s: saturated %llu flushed %llu on the gpu, %llu %llu on the cpu", what,
                  (unsigned long long)sg.saturated, (unsigned long long)sg.flushed, (unsigned long long)sc.saturated,
                  (unsigned long long)sc.flushed);
    ck_assert_msg(fp8_same(sg.amax, sc.amax) && fp8_same(sg.scale, sc.scale), "%s: amax %.9g scale %.9g, cpu %.9g %.9g",
                  what, (double)sg.amax, (double)sg.scale, (double)sc.amax, (double)sc.scale);
    if (with_hist) ck_assert_msg(!memcmp(hg, hc, DT_FP8_HIST * sizeof *hg), "%s: the histograms differ", what);
    gfree(dx), gfree(dq);
    free(x), free(qc), free(qg), free(qb), free(hc), free(hg);
}

/* fp8_quantize against the CPU, bit for bit: one scale given (delayed
 * scaling) and computed from the tensor (tensorwise), codes and
 * dequantized floats; blockwise tiles 1 x 128, 128 x 128 and 128 x 1 with
 * ragged edges, and odd tiles for both of the kernel's layouts. */
START_TEST(test_fp8_quantize)
{
    for (int f = 0; f < 2; f++) {
        const dt_fp8_format fmt = (dt_fp8_format)f;
        dt_fp8_quant given = {.format = fmt, .scale = fmt == DT_FP8_E4M3 ? 0.01f : 0.5f};
        fp8_quant_case(300, 257, &given, 1, 1, 0, "given scale");
        fp8_quant_case(37, 41, &given, 1, 0, 1, "given scale, misaligned, no histogram");
        dt_fp8_quant own = {.format = fmt, .margin = 1};
        fp8_quant_case(64, 129, &own, 0, 1, 0, "tensorwise");
        fp8_quant_case(1024, 1536, &own, 0, 1, 0, "tensorwise, many blocks");
        dt_fp8_quant deq = {.format = fmt, .scale = 0.25f, .dequant = 1};
        fp8_quant_case(33, 100, &deq, 1, 1, 0, "given scale, dequantized");
        fp8_quant_case(33, 100, &deq, 1, 1, 3, "given scale, dequantized, misaligned");
        dt_fp8_quant row = {.format = fmt, .tile_rows = 1, .tile_cols = DT_FP8_TILE, .dequant = 1};
        fp8_quant_case(70, 300, &row, 1, 1, 0, "1 x 128 tiles");
        dt_fp8_quant blk = {.format = fmt, .tile_rows = DT_FP8_TILE, .tile_cols = DT_FP8_TILE, .dequant = 1};
        fp8_quant_case(200, 260, &blk, 1, 1, 0, "128 x 128 tiles");
        dt_fp8_quant col = {.format = fmt, .tile_rows = DT_FP8_TILE, .tile_cols = 1, .dequant = 1};
        fp8_quant_case(300, 70, &col, 1, 1, 0, "128 x 1 tiles");
        dt_fp8_quant odd = {.format = fmt, .tile_rows = 3, .tile_cols = 40, .dequant = 1, .margin = 2};
        fp8_quant_case(50, 90, &odd, 1, 1, 1, "3 x 40 tiles");
        dt_fp8_quant narrow = {.format = fmt, .tile_rows = 5, .tile_cols = 5, .dequant = 1};
        fp8_quant_case(23, 77, &narrow, 1, 1, 0, "5 x 5 tiles");
    }
}
END_TEST

/* 1 if this GPU runs FP8 GEMMs; else checks the one-line refusal (compute
 * capability below 8.9) and returns 0 */
static int fp8_gemm_runs(void)
{
    void *d;
    float *c;
    ck_dt(gpu->alloc(gpu, 16 * 16 * sizeof(float), &d));
    ck_dt(gpu->alloc(gpu, 16 * 16 * sizeof(float), (void **)&c));
    const dt_status st =
        gpu->fp8_gemm(gpu, 0, 1, 16, 16, 16, 1.0f, d, DT_FP8_E4M3, 16, d, DT_FP8_E4M3, 16, 0.0f, c, 16);
    gfree(d), gfree(c);
    if (st == DT_OK) return 1;
    ck_assert_msg(st == DT_ERR_UNSUPPORTED && strstr(dt_last_error(), "compute capability") &&
                      strstr(dt_last_error(), "8.9"),
                  "fp8_gemm: %s: %s", dt_status_str(st), dt_last_error());
    printf("check_cuda: FP8 GEMMs not run: %s\n", dt_last_error());
    return 0;
}

/* Quantize host x (rows x cols) on both backends with spec: the CPU's
 * floats into *qc, the GPU's storage into a new device buffer (returned);
 * both must hold the same values (test_fp8_quantize's check, here on the
 * GEMM's operands). *scale: the scale used. */
static void *fp8_operand(const float *x, int rows, int cols, const dt_fp8_quant *spec, float **qc, float *scale)
{
    const size_t n = (size_t)rows * cols;
    *qc = hmalloc(n);
    dt_fp8_qstats sc = {0}, sg = {0};
    ck_dt(cpu->fp8_quantize(cpu, *qc, x, rows, cols, spec, &sc));
    float *dx = up(x, n * sizeof(float));
    void *q;
    ck_dt(gpu->alloc(gpu, n * sizeof(float), &q));
    ck_dt(gpu->fp8_quantize(gpu, q, dx, rows, cols, spec, &sg));
    uint8_t *b = malloc(n + 1);
    down(b, q, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fp8_same(dt_fp8_to_float(b[i], spec->format), (*qc)[i]), "operand [%zu] differs", i);
    ck_assert(sg.scale == sc.scale);
    *scale = sc.scale;
    free(b);
    gfree(dx);
    return q;
}

static const int fp8_gemm_shapes[][3] = {{64, 48, 128}, {33, 20, 50}, {5, 17, 7}, {96, 80, 256}};

/* fp8_gemm against the CPU's on the same FP8 operands, every transpose
 * pair (the model calls (0, 1), (0, 0) and (1, 0)), e4m3 x e4m3 and
 * e5m2 x e4m3, aligned shapes (cuBLASLt's TN layout read in place for
 * (0, 1)) and shapes that need the packing (K, N not multiples of 16;
 * padded leading dimensions, ldc not a multiple of 4).
 *  1. exact: integers in [-4, 4] (exact in both formats at scale 1), K <=
 *     256: every product and partial sum is an integer of magnitude at
 *     most 2^12, exact in FP32 and in the tensor cores' narrower
 *     accumulation (14 bits, below) alike, and
 *     alpha = 0.5, beta = 0.25 on integer C keep C exact: GPU == CPU bit
 *     for bit, C's padding untouched;
 *  2. rounding: N(0,1) values quantized with the tensors' own scales,
 *     alpha = 1 / (sa sb), beta = 0.5. The products are exact; each side
 *     sums K of them in FP32 in its own order, within gamma_K sum|p| of
 *     the exact sum (Higham's bound for any order, gamma_K = K u / (1 - K
 *     u), u = 2^-24), so the two differ by at most 2 gamma_K |alpha|
 *     sum|p|, plus 2u |C| for alpha's and beta's roundings. On top, the FP8
 *     tensor cores align an MMA's products to a narrower accumulator before
 *     cuBLASLt promotes the partial sums to FP32 (FAST_ACCUM off; about 14
 *     bits on H800, DeepSeek-V3's report section 3.3.2): up to 2^-13 of
 *     the terms' magnitude per group and promotion, 2^-10 of |alpha|
 *     sum|p| allowed for it. A wrong transpose or format is off by the
 *     whole size of C. */
START_TEST(test_fp8_gemm)
{
    if (!fp8_gemm_runs()) return;
    const int M = fp8_gemm_shapes[_i][0], N = fp8_gemm_shapes[_i][1], K = fp8_gemm_shapes[_i][2];
    const int pad = _i == 1 ? 3 : 0;
    static const dt_fp8_format pairs[2][2] = {{DT_FP8_E4M3, DT_FP8_E4M3}, {DT_FP8_E5M2, DT_FP8_E4M3}};
    for (int exact = 1; exact >= 0; exact--)
        for (int pr = 0; pr < 2; pr++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                    const dt_fp8_format fa = pairs[pr][0], fb = pairs[pr][1];
                    const int ra = ta ? K : M, ca = ta ? M : K, rb = tb ? N : K, cb = tb ? K : N;
                    const int lda = ca + pad, ldb = cb + pad, ldc = N + pad;
                    float *A = hmalloc((size_t)ra * lda), *B = hmalloc((size_t)rb * ldb);
                    float *C = hmalloc((size_t)M * ldc), *C0 = hmalloc((size_t)M * ldc);
                    if (exact) {
                        for (size_t i = 0; i < (size_t)ra * lda; i++) A[i] = (float)((int)(i * 7 % 9) - 4);
                        for (size_t i = 0; i < (size_t)rb * ldb; i++) B[i] = (float)((int)(i * 5 % 9) - 4);
                        for (size_t i = 0; i < (size_t)M * ldc; i++) C[i] = (float)((int)(i % 11) - 5);
                    } else {
                        fill(A, (size_t)ra * lda, 80 + _i, 1), fill(B, (size_t)rb * ldb, 81 + _i, 1);
                        fill(C, (size_t)M * ldc, 82 + _i, 1);
                    }
                    memcpy(C0, C, (size_t)M * ldc * sizeof(float));
                    /* the whole stored matrices, padding included, are the tensors quantized */
                    dt_fp8_quant qa = {.format = fa, .scale = exact ? 1.0f : 0.0f};
                    dt_fp8_quant qb = {.format = fb, .scale = exact ? 1.0f : 0.0f};
                    float *hA, *hB, sa, sb;
                    void *dA = fp8_operand(A, ra, lda, &qa, &hA, &sa), *dB = fp8_operand(B, rb, ldb, &qb, &hB, &sb);
                    const float alpha = exact ? 0.5f : (1.0f / sa) / sb, beta = exact ? 0.25f : 0.5f;
                    float *dC = up(C, (size_t)M * ldc * sizeof(float));
                    ck_dt(cpu->fp8_gemm(cpu, ta, tb, M, N, K, alpha, hA, fa, lda, hB, fb, ldb, beta, C, ldc));
                    ck_dt(gpu->fp8_gemm(gpu, ta, tb, M, N, K, alpha, dA, fa, lda, dB, fb, ldb, beta, dC, ldc));
                    float *got = hmalloc((size_t)M * ldc);
                    down(got, dC, (size_t)M * ldc * sizeof(float));
                    const double u = ldexp(1.0, -24), gk = K * u / (1 - K * u);
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < ldc; j++) {
                            const size_t at = (size_t)i * ldc + j;
                            if (j >= N) { /* padding: never written */
                                ck_assert_msg(got[at] == C0[at], "padding C[%d,%d] changed", i, j);
                                continue;
                            }
                            double mag = 0;
                            for (int k = 0; k < K; k++) {
                                const float a = ta ? hA[(size_t)k * lda + i] : hA[(size_t)i * lda + k];
                                const float b = tb ? hB[(size_t)j * ldb + k] : hB[(size_t)k * ldb + j];
                                mag += fabs((double)a * b);
                            }
                            const double tol = exact ? 0.0
                                                     : fabs(alpha) * mag * (2 * gk + ldexp(1.0, -10)) +
                                                           2 * u * (fabs(C[at]) + fabs(beta * C0[at]));
                            ck_assert_msg(fabs((double)got[at] - C[at]) <= tol,
                                          "%s %s x %s, transa %d transb %d, %d x %d x %d: C[%d,%d] gpu %.9g cpu "
                                          "%.9g (tolerance %.3g)",
                                          exact ? "exact" : "rounded", dt_fp8_format_name(fa), dt_fp8_format_name(fb),
                                          ta, tb, M, N, K, i, j, (double)got[at], (double)C[at], tol);
                        }
                    gfree(dA), gfree(dB), gfree(dC);
                    free(A), free(B), free(C), free(C0), free(hA), free(hB), free(got);
                }
}
END_TEST

/* fp8_gemm's edges: beta 0 never reads C (NaN there stays out of the
 * result), e5m2 x e5m2 is refused in one line. */
START_TEST(test_fp8_gemm_edges)
{
    if (!fp8_gemm_runs()) return;
    const int n = 32;
    float *x = hmalloc((size_t)n * n), *c = hmalloc((size_t)n * n);
    for (int i = 0; i < n * n; i++) x[i] = 1.0f, c[i] = NAN;
    dt_fp8_quant one = {.format = DT_FP8_E4M3, .scale = 1.0f};
    float *hq, s;
    void *q = fp8_operand(x, n, n, &one, &hq, &s);
    for (int pass = 0; pass < 2; pass++) { /* C aligned (read in place), then through the scratch (ldc odd) */
        const int ldc = pass ? n + 1 : n;
        float *h = hmalloc((size_t)n * ldc);
        for (int i = 0; i < n * ldc; i++) h[i] = NAN;
        float *dc = up(h, (size_t)n * ldc * sizeof(float));
        ck_dt(gpu->fp8_gemm(gpu, 0, 1, n, n, n, 1.0f, q, DT_FP8_E4M3, n, q, DT_FP8_E4M3, n, 0.0f, dc, ldc));
        down(h, dc, (size_t)n * ldc * sizeof(float));
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                ck_assert_msg(h[(size_t)i * ldc + j] == (float)n, "beta 0, ldc %d: C[%d,%d] = %g, want %d", ldc, i, j,
                              (double)h[(size_t)i * ldc + j], n);
        gfree(dc);
        free(h);
    }
    float *dc = up(c, (size_t)n * n * sizeof(float));
    ck_assert_int_eq(gpu->fp8_gemm(gpu, 0, 1, n, n, n, 1.0f, q, DT_FP8_E5M2, n, q, DT_FP8_E5M2, n, 0.0f, dc, n),
                     DT_ERR_UNSUPPORTED);
    ck_assert(strstr(dt_last_error(), "e5m2 x e5m2") != NULL);
    gfree(q), gfree(dc);
    free(x), free(c), free(hq);
}
END_TEST

/* Before each test: FP32 GEMM inputs, exact FP32 compute, no deferred
 * error left over, so a test that failed half-way (test_gemm_half resets
 * the mode only at its end) does not change the next ones. */
static void reset_gpu(void)
{
    ck_dt(gpu->set_gemm_inputs(gpu, DT_F32));
    ck_dt(dt__cuda_set_tf32(gpu, 0));
    (void)gpu->synchronize(gpu); /* reports (and so clears) a pending error */
}

static Suite *cuda_suite(void)
{
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("ops");
    tcase_add_checked_fixture(tc, reset_gpu, NULL);
    tcase_add_test(tc, test_memory);
    tcase_add_loop_test(tc, test_gemm, 0, 3);
    tcase_add_loop_test(tc, test_gemm_half, 0, 2);
    tcase_add_loop_test(tc, test_gemm_shadow, 0, 2);
    tcase_add_test(tc, test_matmul);
    tcase_add_loop_test(tc, test_encoder, 0, sizeof encoder_shapes / sizeof encoder_shapes[0]);
    tcase_add_test(tc, test_layernorm);
    tcase_add_loop_test(tc, test_colsums, 0, sizeof colsum_shapes / sizeof colsum_shapes[0]);
    tcase_add_test(tc, test_attention);
    tcase_add_loop_test(tc, test_attention_half, 0, 2);
    tcase_add_test(tc, test_elementwise);
    tcase_add_test(tc, test_crossentropy);
    tcase_add_test(tc, test_crossentropy_padded);
    tcase_add_test(tc, test_crossentropy_part);
    tcase_add_test(tc, test_crossentropy_nan);
    tcase_add_test(tc, test_sync_switch);
    tcase_add_test(tc, test_sumsq);
    tcase_add_test(tc, test_optimizers);
    tcase_add_test(tc, test_cast);
    tcase_add_test(tc, test_unscale_check);
    tcase_add_test(tc, test_span_stats);
    tcase_add_test(tc, test_gelu_half);
    tcase_add_test(tc, test_batchnorm);
    tcase_add_test(tc, test_fp8_quantize);
    tcase_add_loop_test(tc, test_fp8_gemm, 0, sizeof fp8_gemm_shapes / sizeof fp8_gemm_shapes[0]);
    tcase_add_test(tc, test_fp8_gemm_edges);
    suite_add_tcase(s, tc);
    return s;
}

/* `check_cuda --probe` only says whether a device is usable (exit 0) or
 * not (77), for tests/cuda.sh. */
int main(int argc, char **argv)
{
    if (dt_backend_cuda_create(0, &gpu) != DT_OK) {
        printf("check_cuda: skipped: %s\n", dt_last_error());
        return 77;
    }
    if (argc > 1 && strcmp(argv[1], "--probe") == 0) {
        printf("CUDA backend created\n");
        dt_backend_destroy(gpu);
        return 0;
    }
    if (dt_backend_cpu_create(2, &cpu) != DT_OK) {
        fprintf(stderr, "check_cuda: %s\n", dt_last_error());
        return 1;
    }
    SRunner *sr = srunner_create(cuda_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    dt_backend_destroy(gpu);
    dt_backend_destroy(cpu);
    return failed == 0 ? 0 : 1;
}
