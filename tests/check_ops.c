/* check_ops.c: every CPU backend op against a naive double-precision
 * reference, and every backward against central finite differences of that
 * reference.
 *
 * Tolerances: the ops compute in float32 (unit roundoff u = 6e-8) over sums
 * of at most a few hundred terms, so forward values are compared with
 * atol 1e-5 + rtol 1e-4 (about 100 u times the term count's square root,
 * with margin). Finite differences are taken in double on the double
 * reference with step 1e-6 (truncation error ~1e-12, roundoff ~1e-10), so
 * they are exact to far below float precision; gradients are compared with
 * atol 1e-4 + rtol 1e-3, again the float32 accumulation error with margin. */
#include <string.h>

#include "cpu_backend.h"
#include "testutil.h"
#include "dt_math_hd.h"

static dt_backend *be;

static void setup(void) { ck_dt(dt_backend_cpu_create(2, &be)); }
static void teardown(void) { dt_backend_destroy(be); }

static void fill(float *x, size_t n, uint64_t seed, float scale)
{
    dt_rng r;
    dt_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)dt_rng_normal(&r) * scale;
}

static double *to_d(const float *x, size_t n)
{
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

#define ASSERT_CLOSE(a, b, atol, rtol, what, i)                                                                    \
    ck_assert_msg(dt_test_close((a), (b), (atol), (rtol)), "%s[%zu]: got %.9g expected %.9g", (what), (size_t)(i), \
                  (double)(a), (double)(b))

/* ---- vmath ----------------------------------------------------------------- */

START_TEST(test_vmath_exp_tanh)
{
    double max_rel = 0, max_abs_t = 0;
    for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
        double ref = exp((double)x);
        double rel = fabs(dt__expf(x) - ref) / ref;
        if (rel > max_rel) max_rel = rel;
    }
    for (float x = -12.0f; x <= 12.0f; x += 0.00091f) {
        double e = fabs(dt__tanhf(x) - tanh((double)x));
        if (e > max_abs_t) max_abs_t = e;
    }
    ck_assert_msg(max_rel < 3e-7, "expf max relative error %g", max_rel);
    ck_assert_msg(max_abs_t < 3e-7, "tanhf max absolute error %g", max_abs_t);
    ck_assert_float_eq(dt__expf(-200.0f), 0.0f);
    ck_assert(isfinite(dt__expf(200.0f)));
    ck_assert_float_eq(dt__expf(0.0f), 1.0f);
}
END_TEST

/* ---- GEMM -------------------------------------------------------------------- */

/* Small shapes run as one BLAS call; the larger ones are split across
 * threads by rows (M >= N) or by columns (N > M). */
static const int gemm_shapes[][3] = {{37, 29, 23}, {301, 40, 50}, {40, 301, 50}};

START_TEST(test_gemm_all_transposes)
{
    const int M = gemm_shapes[_i][0], N = gemm_shapes[_i][1], K = gemm_shapes[_i][2], pad = 5;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
            float *A = malloc(sizeof(float) * (ta ? K : M) * lda), *Bm = malloc(sizeof(float) * (tb ? N : K) * ldb);
            float *Cm = malloc(sizeof(float) * M * ldc);
            fill(A, (size_t)(ta ? K : M) * lda, 1, 1), fill(Bm, (size_t)(tb ? N : K) * ldb, 2, 1);
            fill(Cm, (size_t)M * ldc, 3, 1);
            float *C0 = malloc(sizeof(float) * M * ldc);
            memcpy(C0, Cm, sizeof(float) * M * ldc);
            ck_dt(be->gemm(be, ta, tb, M, N, K, 0.5f, A, lda, Bm, ldb, 0.25f, Cm, ldc));
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 0;
                    for (int k = 0; k < K; k++) {
                        double a = ta ? A[k * lda + i] : A[i * lda + k];
                        double b = tb ? Bm[j * ldb + k] : Bm[k * ldb + j];
                        s += a * b;
                    }
                    double ref = 0.5 * s + 0.25 * C0[i * ldc + j];
                    ASSERT_CLOSE(Cm[i * ldc + j], ref, 1e-5, 1e-4, "gemm", i * N + j);
                }
            for (int i = 0; i < M; i++) /* padding columns untouched */
                for (int j = N; j < ldc; j++) ck_assert_float_eq(Cm[i * ldc + j], C0[i * ldc + j]);
            free(A), free(Bm), free(Cm), free(C0);
        }
    /* K = 0 scales C by beta, M = 0 is a no-op */
    float c[4] = {1, 2, 3, 4};
    ck_dt(be->gemm(be, 0, 0, 2, 2, 0, 1.0f, c, 1, c, 2, 0.5f, c, 2));
    ck_assert_float_eq(c[3], 2.0f);
    ck_dt(be->gemm(be, 0, 0, 0, 2, 2, 1.0f, c, 2, c, 2, 0.0f, c, 2));
    ck_assert_int_ne(be->gemm(be, 0, 0, -1, 2, 2, 1.0f, c, 2, c, 2, 0.0f, c, 2), DT_OK);
}
END_TEST

START_TEST(test_matmul_forward_backward)
{
    const int N = 19, C = 13, OC = 11;
    float *inp = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * OC * C), *bias = malloc(sizeof(float) * OC);
    float *out = malloc(sizeof(float) * N * OC), *dout = malloc(sizeof(float) * N * OC);
    float *dinp = malloc(sizeof(float) * N * C), *dw = malloc(sizeof(float) * OC * C), *db = malloc(sizeof(float) * OC);
    fill(inp, N * C, 4, 1), fill(w, OC * C, 5, 1), fill(bias, OC, 6, 1), fill(dout, N * OC, 7, 1);
    fill(dw, OC * C, 8, 1), fill(db, OC, 9, 1);
    float *dw0 = malloc(sizeof(float) * OC * C), *db0 = malloc(sizeof(float) * OC);
    memcpy(dw0, dw, sizeof(float) * OC * C), memcpy(db0, db, sizeof(float) * OC);
    ck_dt(be->matmul_forward(be, out, inp, w, bias, N, C, OC));
    ck_dt(be->matmul_backward(be, dinp, dw, db, dout, inp, w, N, C, OC));
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double s = bias[o];
            for (int c = 0; c < C; c++) s += (double)inp[i * C + c] * w[o * C + c];
            ASSERT_CLOSE(out[i * OC + o], s, 1e-5, 1e-4, "matmul out", i * OC + o);
        }
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int o = 0; o < OC; o++) s += (double)dout[i * OC + o] * w[o * C + c];
            ASSERT_CLOSE(dinp[i * C + c], s, 1e-5, 1e-4, "matmul dinp", i * C + c);
        }
    for (int o = 0; o < OC; o++) {
        double sb = db0[o];
        for (int i = 0; i < N; i++) sb += dout[i * OC + o];
        ASSERT_CLOSE(db[o], sb, 1e-5, 1e-4, "matmul dbias (accumulated)", o);
        for (int c = 0; c < C; c++) {
            double s = dw0[o * C + c];
            for (int i = 0; i < N; i++) s += (double)dout[i * OC + o] * inp[i * C + c];
            ASSERT_CLOSE(dw[o * C + c], s, 1e-5, 1e-4, "matmul dw (accumulated)", o * C + c);
        }
    }
    free(inp), free(w), free(bias), free(out), free(dout), free(dinp), free(dw), free(db), free(dw0), free(db0);
}
END_TEST

/* ---- LayerNorm ---------------------------------------------------------------- */

static double ln_ref_loss(const double *x, const double *w, const double *b, const double *R, int N, int C, double *out)
{
    double L = 0;
    for (int i = 0; i < N; i++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[i * C + c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[i * C + c] - m) * (x[i * C + c] - m);
        v /= C;
        double r = 1.0 / sqrt(v + 1e-5);
        for (int c = 0; c < C; c++) {
            double o = (x[i * C + c] - m) * r * w[c] + b[c];
            if (out) out[i * C + c] = o;
            L += o * R[i * C + c];
        }
    }
    return L;
}

START_TEST(test_layernorm)
{
    const int N = 7, C = 24;
    float *x = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * C), *b = malloc(sizeof(float) * C);
    float *R = malloc(sizeof(float) * N * C), *out = malloc(sizeof(float) * N * C);
    float mean[7], rstd[7];
    fill(x, N * C, 10, 2), fill(w, C, 11, 1), fill(b, C, 12, 1), fill(R, N * C, 13, 1);
    for (int i = 0; i < N * C; i++) x[i] += 3.0f; /* non-zero mean */
    ck_dt(be->layernorm_forward(be, out, mean, rstd, x, w, b, N, C));
    double *xd = to_d(x, N * C), *wd = to_d(w, C), *bd = to_d(b, C), *Rd = to_d(R, N * C);
    double *ref = malloc(sizeof(double) * N * C);
    ln_ref_loss(xd, wd, bd, Rd, N, C, ref);
    for (int i = 0; i < N * C; i++) ASSERT_CLOSE(out[i], ref[i], 1e-5, 1e-4, "layernorm out", i);
    float *dx = calloc(N * C, sizeof(float)), *dw = calloc(C, sizeof(float)), *db = calloc(C, sizeof(float));
    ck_dt(be->layernorm_backward(be, dx, dw, db, R, x, w, mean, rstd, N, C));
    const double h = 1e-6;
    for (int i = 0; i < N * C; i++) {
        double s = xd[i];
        xd[i] = s + h;
        double lp = ln_ref_loss(xd, wd, bd, Rd, N, C, NULL);
        xd[i] = s - h;
        double lm = ln_ref_loss(xd, wd, bd, Rd, N, C, NULL);
        xd[i] = s;
        ASSERT_CLOSE(dx[i], (lp - lm) / (2 * h), 1e-4, 1e-3, "layernorm dx", i);
    }
    for (int c = 0; c < C; c++) {
        double s = wd[c];
        wd[c] = s + h;
        double lp = ln_ref_loss(xd, wd, bd, Rd, N, C, NULL);
        wd[c] = s - h;
        double lm = ln_ref_loss(xd, wd, bd, Rd, N, C, NULL);
        wd[c] = s;
        ASSERT_CLOSE(dw[c], (lp - lm) / (2 * h), 1e-4, 1e-3, "layernorm dw", c);
        s = bd[c];
        bd[c] = s + h;
        lp = ln_ref_loss(xd, wd, bd, Rd, N, C, NULL);
        bd[c] = s - h;
        lm = ln_ref_loss(xd, wd, bd, Rd, N, C, NULL);
        bd[c] = s;
        ASSERT_CLOSE(db[c], (lp - lm) / (2 * h), 1e-4, 1e-3, "layernorm db", c);
    }
    /* accumulation: a second backward doubles every gradient */
    float *dx2 = malloc(sizeof(float) * N * C);
    memcpy(dx2, dx, sizeof(float) * N * C);
    ck_dt(be->layernorm_backward(be, dx, dw, db, R, x, w, mean, rstd, N, C));
    for (int i = 0; i < N * C; i++) ASSERT_CLOSE(dx[i], 2.0 * dx2[i], 1e-6, 1e-5, "layernorm dx accumulate", i);
    /* either part alone (the zero-bubble split): the same bits as both at once */
    float *ex = calloc(N * C, sizeof(float)), *ew = calloc(C, sizeof(float)), *eb = calloc(C, sizeof(float));
    memset(dx, 0, sizeof(float) * N * C), memset(dw, 0, sizeof(float) * C), memset(db, 0, sizeof(float) * C);
    ck_dt(be->layernorm_backward(be, dx, dw, db, R, x, w, mean, rstd, N, C));
    ck_dt(be->layernorm_backward(be, ex, NULL, NULL, R, x, w, mean, rstd, N, C));
    ck_dt(be->layernorm_backward(be, NULL, ew, eb, R, x, w, mean, rstd, N, C));
    ck_assert(memcmp(dx, ex, sizeof(float) * N * C) == 0);
    ck_assert(memcmp(dw, ew, sizeof(float) * C) == 0 && memcmp(db, eb, sizeof(float) * C) == 0);
    free(x), free(w), free(b), free(R), free(out), free(xd), free(wd), free(bd), free(Rd), free(ref);
    free(dx), free(dw), free(db), free(dx2), free(ex), free(ew), free(eb);
}
END_TEST

/* ---- GELU ---------------------------------------------------------------------- */

static double gelu_ref(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

START_TEST(test_gelu)
{
    const size_t n = 1001;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *dy = malloc(sizeof(float) * n);
    float *dx = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = -8.0f + 16.0f * i / (n - 1);
    fill(dy, n, 14, 1);
    ck_dt(be->gelu_forward(be, y, x, n));
    ck_dt(be->gelu_backward(be, dx, NULL, x, dy, n));
    const double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        ASSERT_CLOSE(y[i], gelu_ref(x[i]), 1e-6, 1e-5, "gelu", i);
        double fd = (gelu_ref(x[i] + h) - gelu_ref(x[i] - h)) / (2 * h);
        ASSERT_CLOSE(dx[i], fd * dy[i], 1e-5, 1e-4, "gelu backward", i);
    }
    /* in place: dinp aliasing dout */
    memcpy(dx, dy, sizeof(float) * n);
    float *y2 = malloc(sizeof(float) * n), *dx2 = malloc(sizeof(float) * n);
    memcpy(dx2, dx, sizeof(float) * n);
    ck_dt(be->gelu_backward(be, dx, NULL, x, dx, n));
    for (size_t i = 0; i < n; i++) {
        double fd = (gelu_ref(x[i] + h) - gelu_ref(x[i] - h)) / (2 * h);
        ASSERT_CLOSE(dx[i], fd * dy[i], 1e-5, 1e-4, "gelu backward in place", i);
    }
    /* with the forward's value from the same pass: both bit-identical to the ops alone */
    ck_dt(be->gelu_backward(be, dx2, y2, x, dx2, n));
    ck_assert(memcmp(dx2, dx, sizeof(float) * n) == 0);
    ck_assert(memcmp(y2, y, sizeof(float) * n) == 0);
    free(y2), free(dx2);
    free(x), free(y), free(dy), free(dx);
}
END_TEST

/* ---- attention --------------------------------------------------------------------- */

static double attn_ref_loss(const double *qkv, const double *R, int B, int T, int C, int NH, double *out)
{
    int hs = C / NH;
    double L = 0, sc = 1.0 / sqrt((double)hs);
    double *p = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                double mx = -1e300;
                for (int j = 0; j <= t; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * 3 * C + C + h * hs;
                    double s = 0;
                    for (int d = 0; d < hs; d++) s += q[d] * k[d];
                    p[j] = s * sc;
                    if (p[j] > mx) mx = p[j];
                }
                double z = 0;
                for (int j = 0; j <= t; j++) z += (p[j] = exp(p[j] - mx));
                for (int d = 0; d < hs; d++) {
                    double y = 0;
                    for (int j = 0; j <= t; j++) y += p[j] / z * qkv[((size_t)b * T + j) * 3 * C + 2 * C + h * hs + d];
                    size_t o = ((size_t)b * T + t) * C + h * hs + d;
                    if (out) out[o] = y;
                    L += y * R[o];
                }
            }
    free(p);
    return L;
}

/* Double reference of the whole op, forward and backward, with running
 * magnitudes: mag_out = sum_j p_j |v_j|, mag_dqkv the same sums of absolute
 * terms for dQ, dK, dV (dS's magnitude taken as p (|dP| + |D|) with |dP|
 * and |D| sums of absolute products). *delta receives the largest score
 * rounding error of an hs-term FP32 dot product, gamma_hs * scale *
 * sum_d |q_d k_d|. */
static void attn_ref(const double *qkv, const double *dy, int B, int T, int C, int NH, double *out, double *mag_out,
                     double *lse, double *dqkv, double *mag, double *delta)
{
    const int hs = C / NH, C3 = 3 * C;
    const double sc = 1.0 / sqrt((double)hs), u = ldexp(1.0, -24), ghs = hs * u / (1 - hs * u);
    double *P = malloc(sizeof(double) * T * T), *dS = malloc(sizeof(double) * T * T), *dSm = malloc(sizeof(double) * T * T);
    *delta = 0;
    memset(dqkv, 0, sizeof(double) * B * T * C3), memset(mag, 0, sizeof(double) * B * T * C3);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
#define Q(t, d) qkv[((size_t)b * T + (t)) * C3 + h * hs + (d)]
#define K(t, d) qkv[((size_t)b * T + (t)) * C3 + C + h * hs + (d)]
#define V(t, d) qkv[((size_t)b * T + (t)) * C3 + 2 * C + h * hs + (d)]
#define DY(t, d) dy[((size_t)b * T + (t)) * C + h * hs + (d)]
#define G(a, t, d) a[((size_t)b * T + (t)) * C3 + h * hs + (d)]
            for (int t = 0; t < T; t++) {
                double mx = -1e300, z = 0;
                for (int j = 0; j <= t; j++) {
                    double s = 0, m = 0;
                    for (int d = 0; d < hs; d++) s += Q(t, d) * K(j, d), m += fabs(Q(t, d) * K(j, d));
                    P[t * T + j] = s * sc;
                    if (ghs * sc * m > *delta) *delta = ghs * sc * m;
                    if (s * sc > mx) mx = s * sc;
                }
                for (int j = 0; j <= t; j++) z += (P[t * T + j] = exp(P[t * T + j] - mx));
                for (int j = 0; j <= t; j++) P[t * T + j] /= z;
                lse[((size_t)b * NH + h) * T + t] = mx + log(z);
                for (int d = 0; d < hs; d++) {
                    double y = 0, m = 0;
                    for (int j = 0; j <= t; j++) y += P[t * T + j] * V(j, d), m += P[t * T + j] * fabs(V(j, d));
                    out[((size_t)b * T + t) * C + h * hs + d] = y;
                    mag_out[((size_t)b * T + t) * C + h * hs + d] = m;
                }
            }
            for (int t = 0; t < T; t++) {
                double D = 0, Dm = 0;
                for (int d = 0; d < hs; d++)
                    D += DY(t, d) * out[((size_t)b * T + t) * C + h * hs + d],
                        Dm += fabs(DY(t, d)) * mag_out[((size_t)b * T + t) * C + h * hs + d];
                for (int j = 0; j <= t; j++) {
                    double dp = 0, dpm = 0;
                    for (int d = 0; d < hs; d++) dp += DY(t, d) * V(j, d), dpm += fabs(DY(t, d) * V(j, d));
                    dS[t * T + j] = sc * P[t * T + j] * (dp - D);
                    dSm[t * T + j] = sc * P[t * T + j] * (dpm + Dm);
                }
            }
            for (int t = 0; t < T; t++)
                for (int j = 0; j <= t; j++)
                    for (int d = 0; d < hs; d++) {
                        G(dqkv, t, d) += dS[t * T + j] * K(j, d), G(mag, t, d) += dSm[t * T + j] * fabs(K(j, d));
                        G(dqkv, j, C + d) += dS[t * T + j] * Q(t, d), G(mag, j, C + d) += dSm[t * T + j] * fabs(Q(t, d));
                        G(dqkv, j, 2 * C + d) += P[t * T + j] * DY(t, d);
                        G(mag, j, 2 * C + d) += P[t * T + j] * fabs(DY(t, d));
                    }
#undef Q
#undef K
#undef V
#undef DY
#undef G
        }
    free(P), free(dS), free(dSm);
}

/* The fused op (tiles of 64, online softmax, only lse kept) against
 * attn_ref, at lengths inside one tile, on a tile's edge and across three
 * tiles. Tolerance, derived: a score carries at most delta (above) of
 * rounding, which moves each probability by a relative 2 delta (numerator
 * and normaliser); exp adds 5u (check_ops' vmath test: < 3e-7), each of at
 * most T/64 online rescalings one exp and one product, the normalising sum
 * and the (tile-summed) GEMMs gamma_T and gamma_hs. So every value is within
 * (2 delta + (T + hs + 16 + 12 T/64) u) times its magnitude, and the
 * backward, whose terms are products of those, within twice that. lse is
 * within delta + (T + 8) u of the reference (|lse| ~ its scores). */
START_TEST(test_attention_fused)
{
    static const int Ts[] = {9, 64, 65, 150};
    const int B = 2, C = 16, NH = 2, hs = C / NH, T = Ts[_i];
    const size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = malloc(sizeof(float) * nq), *out = malloc(sizeof(float) * no), *lse = malloc(sizeof(float) * nl);
    float *dy = malloc(sizeof(float) * no), *dqkv = malloc(sizeof(float) * nq);
    fill(qkv, nq, 15 + T, 1.5f), fill(dy, no, 16 + T, 1);
    ck_dt(be->attention_forward(be, out, lse, qkv, B, T, C, NH));
    ck_dt(be->attention_backward(be, dqkv, dy, qkv, out, lse, B, T, C, NH));
    double *qd = to_d(qkv, nq), *dyd = to_d(dy, no), *ro = malloc(sizeof(double) * no), *mo = malloc(sizeof(double) * no);
    double *rl = malloc(sizeof(double) * nl), *rg = malloc(sizeof(double) * nq), *mg = malloc(sizeof(double) * nq), delta;
    attn_ref(qd, dyd, B, T, C, NH, ro, mo, rl, rg, mg, &delta);
    const double u = ldexp(1.0, -24), rel = 2 * delta + (T + hs + 16 + 12.0 * T / 64) * u;
    for (size_t i = 0; i < no; i++)
        ck_assert_msg(fabs(out[i] - ro[i]) <= rel * mo[i] + 1e-30, "T=%d out[%zu]: got %.9g expected %.9g (bound %.3g)",
                      T, i, out[i], ro[i], rel * mo[i]);
    for (size_t i = 0; i < nl; i++)
        ck_assert_msg(fabs(lse[i] - rl[i]) <= delta + (T + 8) * u * (1 + fabs(rl[i])),
                      "T=%d lse[%zu]: got %.9g expected %.9g", T, i, lse[i], rl[i]);
    for (size_t i = 0; i < nq; i++)
        ck_assert_msg(fabs(dqkv[i] - rg[i]) <= 2 * rel * mg[i] + 1e-30,
                      "T=%d dqkv[%zu]: got %.9g expected %.9g (bound %.3g)", T, i, dqkv[i], rg[i], 2 * rel * mg[i]);
    free(qkv), free(out), free(lse), free(dy), free(dqkv), free(qd), free(dyd), free(ro), free(mo), free(rl), free(rg),
        free(mg);
}
END_TEST

/* Chunk attention (context parallelism's blocks) against the fused causal
 * op over the whole sequence: the sequence cut in two chunks of Tc, laid
 * out chunk-major (2, B, Tc, 3C) as lib/parallel/cp.c lays a rank's rows;
 * chunk 0 against itself (causal), chunk 1 against chunk 0 (all keys) and
 * against itself (causal), merged in both orders; the backward's three
 * pairs accumulated. Both sides are FP32 with other summation orders: an
 * output is a convex combination of value rows, each side off by at most
 * about (T + hs + 16) u max|v| (attn_ref's bound above), here
 * (140 + 8 + 16) 6e-8 x 6 = 6e-5 each way; the gradients about twice that
 * times their magnitude (~1): atol 2e-4, rtol 1e-4. */
START_TEST(test_attention_chunk)
{
    static const int Tcs[] = {5, 70};
    const int B = 2, C = 16, NH = 2, Tc = Tcs[_i], T = 2 * Tc, C3 = 3 * C;
    const size_t nq = (size_t)B * T * C3, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = malloc(sizeof(float) * nq), *out = malloc(sizeof(float) * no), *lse = malloc(sizeof(float) * nl);
    float *dy = malloc(sizeof(float) * no), *dqkv = malloc(sizeof(float) * nq);
    fill(qkv, nq, 25 + Tc, 1.5f), fill(dy, no, 26 + Tc, 1);
    ck_dt(be->attention_forward(be, out, lse, qkv, B, T, C, NH));
    ck_dt(be->attention_backward(be, dqkv, dy, qkv, out, lse, B, T, C, NH));
    /* chunk-major copies: part p, row b holds positions p*Tc .. */
    float *cq = malloc(sizeof(float) * nq), *cdy = malloc(sizeof(float) * no), *cg = calloc(nq, sizeof(float));
    for (int p = 0; p < 2; p++)
        for (int b = 0; b < B; b++) {
            ck_dt(be->copy2d(be, cq + ((size_t)p * B + b) * Tc * C3, C3, qkv + ((size_t)b * T + p * Tc) * C3, C3, Tc, C3));
            memcpy(cdy + ((size_t)p * B + b) * Tc * C, dy + ((size_t)b * T + p * Tc) * C, sizeof(float) * Tc * C);
        }
    const size_t pq = (size_t)B * Tc * C3, po = (size_t)B * Tc * C, pl = (size_t)B * NH * Tc;
    for (int order = 0; order < 2; order++) {
        float *co = malloc(sizeof(float) * no), *cl = malloc(sizeof(float) * nl);
        ck_dt(be->attention_chunk_forward(be, co, cl, cq, C3, cq + C, cq + 2 * C, C3, B, Tc, C, NH, 1, 0));
        const float *q1 = cq + pq;
        if (!order) {
            ck_dt(be->attention_chunk_forward(be, co + po, cl + pl, q1, C3, cq + C, cq + 2 * C, C3, B, Tc, C, NH, 0, 0));
            ck_dt(be->attention_chunk_forward(be, co + po, cl + pl, q1, C3, q1 + C, q1 + 2 * C, C3, B, Tc, C, NH, 1, 1));
        } else {
            ck_dt(be->attention_chunk_forward(be, co + po, cl + pl, q1, C3, q1 + C, q1 + 2 * C, C3, B, Tc, C, NH, 1, 0));
            ck_dt(be->attention_chunk_forward(be, co + po, cl + pl, q1, C3, cq + C, cq + 2 * C, C3, B, Tc, C, NH, 0, 1));
        }
        for (int p = 0; p < 2; p++)
            for (int b = 0; b < B; b++) {
                for (int t = 0; t < Tc; t++)
                    for (int c = 0; c < C; c++) {
                        const size_t i = ((size_t)b * T + p * Tc + t) * C + c, j = (((size_t)p * B + b) * Tc + t) * C + c;
                        ASSERT_CLOSE(co[j], out[i], 1e-4, 1e-4, "chunk out", i);
                    }
                for (int h = 0; h < NH; h++)
                    for (int t = 0; t < Tc; t++) {
                        const size_t i = ((size_t)b * NH + h) * T + p * Tc + t, j = p * pl + ((size_t)b * NH + h) * Tc + t;
                        ASSERT_CLOSE(cl[j], lse[i], 1e-4, 1e-4, "chunk lse", i);
                    }
            }
        if (!order) { /* the three pairs' backward, from the final out and lse */
            float *q0 = cq, *g0 = cg, *g1 = cg + pq;
            ck_dt(be->attention_chunk_backward(be, g0, g0 + C, g0 + 2 * C, cdy, co, cl, q0, C3, q0 + C, q0 + 2 * C, C3,
                                               B, Tc, C, NH, 1));
            ck_dt(be->attention_chunk_backward(be, g1, g0 + C, g0 + 2 * C, cdy + po, co + po, cl + pl, q1, C3, q0 + C,
                                               q0 + 2 * C, C3, B, Tc, C, NH, 0));
            ck_dt(be->attention_chunk_backward(be, g1, g1 + C, g1 + 2 * C, cdy + po, co + po, cl + pl, q1, C3, q1 + C,
                                               q1 + 2 * C, C3, B, Tc, C, NH, 1));
            for (int p = 0; p < 2; p++)
                for (int b = 0; b < B; b++)
                    for (int t = 0; t < Tc; t++)
                        for (int c = 0; c < C3; c++) {
                            const size_t i = ((size_t)b * T + p * Tc + t) * C3 + c,
                                         j = (((size_t)p * B + b) * Tc + t) * C3 + c;
                            ASSERT_CLOSE(cg[j], dqkv[i], 2e-4, 1e-4, "chunk dqkv", i);
                        }
        }
        free(co), free(cl);
    }
    free(qkv), free(out), free(lse), free(dy), free(dqkv), free(cq), free(cdy), free(cg);
}
END_TEST

/* attn_ref's gradient itself, against central differences of the loss
 * sum(out * R) (see the file's head for the step and tolerances). */
START_TEST(test_attention)
{
    const int B = 2, T = 9, C = 12, NH = 3;
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = malloc(sizeof(float) * nq), *out = malloc(sizeof(float) * no), *lse = malloc(sizeof(float) * nl);
    float *R = malloc(sizeof(float) * no), *dqkv = malloc(sizeof(float) * nq);
    fill(qkv, nq, 15, 1), fill(R, no, 16, 1);
    ck_dt(be->attention_forward(be, out, lse, qkv, B, T, C, NH));
    double *qd = to_d(qkv, nq), *Rd = to_d(R, no), *ref = malloc(sizeof(double) * no);
    attn_ref_loss(qd, Rd, B, T, C, NH, ref);
    for (size_t i = 0; i < no; i++) ASSERT_CLOSE(out[i], ref[i], 1e-5, 1e-4, "attention out", i);
    ck_dt(be->attention_backward(be, dqkv, R, qkv, out, lse, B, T, C, NH));
    double *mo = malloc(sizeof(double) * no), *rl = malloc(sizeof(double) * nl), *rg = malloc(sizeof(double) * nq);
    double *mg = malloc(sizeof(double) * nq), delta;
    attn_ref(qd, Rd, B, T, C, NH, ref, mo, rl, rg, mg, &delta);
    const double h = 1e-6;
    for (size_t i = 0; i < nq; i++) {
        double s = qd[i];
        qd[i] = s + h;
        double lp = attn_ref_loss(qd, Rd, B, T, C, NH, NULL);
        qd[i] = s - h;
        double lm = attn_ref_loss(qd, Rd, B, T, C, NH, NULL);
        qd[i] = s;
        ASSERT_CLOSE(rg[i], (lp - lm) / (2 * h), 1e-7, 1e-6, "attn_ref dqkv", i); /* double against double */
        ASSERT_CLOSE(dqkv[i], (lp - lm) / (2 * h), 1e-4, 1e-3, "attention dqkv", i);
    }
    ck_assert_int_ne(be->attention_forward(be, out, lse, qkv, B, T, C, 5), DT_OK);
    free(qkv), free(out), free(lse), free(R), free(dqkv), free(qd), free(Rd), free(ref), free(mo), free(rl), free(rg),
        free(mg);
}
END_TEST

/* ---- embedding ----------------------------------------------------------------------- */

START_TEST(test_encoder)
{
    const int B = 3, T = 5, C = 20, V = 7;
    int32_t tok[15];
    for (int i = 0; i < B * T; i++) tok[i] = (i * 5 + 1) % V;
    float *wte = malloc(sizeof(float) * V * C), *wpe = malloc(sizeof(float) * T * C),
          *out = malloc(sizeof(float) * B * T * C);
    float *dout = malloc(sizeof(float) * B * T * C), *dwte = calloc(V * C, sizeof(float)),
          *dwpe = calloc(T * C, sizeof(float));
    fill(wte, V * C, 17, 1), fill(wpe, T * C, 18, 1), fill(dout, B * T * C, 19, 1);
    ck_dt(be->encoder_forward(be, out, tok, wte, wpe, B, T, C));
    ck_dt(be->encoder_backward(be, dwte, dwpe, dout, tok, B, T, C));
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++) ck_assert_float_eq(out[bt * C + c], wte[tok[bt] * C + c] + wpe[(bt % T) * C + c]);
    for (int v = 0; v < V; v++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int bt = 0; bt < B * T; bt++) s += tok[bt] == v ? dout[bt * C + c] : 0;
            ASSERT_CLOSE(dwte[v * C + c], s, 1e-6, 1e-5, "dwte", v * C + c);
        }
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int b = 0; b < B; b++) s += dout[(b * T + t) * C + c];
            ASSERT_CLOSE(dwpe[t * C + c], s, 1e-6, 1e-5, "dwpe", t * C + c);
        }
    free(wte), free(wpe), free(out), free(dout), free(dwte), free(dwpe);
}
END_TEST

/* ---- cross-entropy --------------------------------------------------------------------- */

static double xent_ref(const double *z, int tgt, int V)
{
    double mx = z[0];
    for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
    double s = 0;
    for (int v = 0; v < V; v++) s += exp(z[v] - mx);
    return mx + log(s) - z[tgt];
}

/* One vocabulary-parallel part (dt_backend.h's crossentropy_part): with the
 * whole row as one part, its statistics and gradient are the fused op's bit
 * for bit (the same scan and sums); with the row cut into three uneven
 * parts at v0 = 0, 11, 20, the statistics merged as lib/model/head.c does
 * (max, sum of s_r exp(m_r - M), the target's part) give the fused loss
 * within 1e-6 relative (three float sums of at most 33 terms re-associated:
 * a few ulps), the argmax index exactly, and each part's gradient from the
 * merged (M, sum) the fused gradient's columns within 1e-6 absolute. */
START_TEST(test_crossentropy_part)
{
    const int N = 6, V = 33, cut[4] = {0, 11, 20, 33};
    float *z = malloc(sizeof(float) * N * V), *d = malloc(sizeof(float) * N * V), losses[6];
    float stats[3][6 * 4], ms[6 * 2], *dpart = malloc(sizeof(float) * N * V);
    uint8_t correct[6];
    int32_t tgt[6] = {0, 32, -1, 5, 7, 12};
    fill(z, N * V, 20, 3);
    z[5 * V + 7] = 100.0f; /* row 5: the argmax in the first part, the target in the second */
    ck_dt(be->crossentropy_forward_backward(be, losses, correct, d, z, tgt, N, V, V, 0.5f));
    /* one part: the fused op's values */
    ck_dt(be->crossentropy_part(be, stats[0], NULL, NULL, z, tgt, N, V, V, 0, 0.0f));
    for (int i = 0; i < N; i++) {
        const float *o = stats[0] + 4 * i;
        if (tgt[i] < 0) {
            ck_assert(o[0] == 0.0f && o[1] == 1.0f && o[2] == 0.0f && o[3] == -1.0f);
            ms[2 * i] = 0.0f, ms[2 * i + 1] = 1.0f;
            continue;
        }
        ck_assert_float_eq(o[0] + logf(o[1]) - o[2], losses[i]);
        ck_assert_int_eq((int)o[3] == tgt[i], correct[i]);
        ms[2 * i] = o[0], ms[2 * i + 1] = o[1];
    }
    ck_dt(be->crossentropy_part(be, NULL, dpart, ms, z, tgt, N, V, V, 0, 0.5f));
    ck_assert_mem_eq(dpart, d, sizeof(float) * N * V);
    /* three parts, each on its own columns (rows V apart: ld = V) */
    for (int k = 0; k < 3; k++)
        ck_dt(be->crossentropy_part(be, stats[k], NULL, NULL, z + cut[k], tgt, N, cut[k + 1] - cut[k], V, cut[k],
                                    0.0f));
    for (int i = 0; i < N; i++) {
        if (tgt[i] < 0) continue;
        float M = stats[0][4 * i], zt = 0.0f, s = 0.0f;
        int arg = (int)stats[0][4 * i + 3];
        for (int k = 1; k < 3; k++)
            if (stats[k][4 * i] > M) M = stats[k][4 * i], arg = (int)stats[k][4 * i + 3];
        for (int k = 0; k < 3; k++) {
            s += stats[k][4 * i + 1] * expf(stats[k][4 * i] - M);
            if (tgt[i] >= cut[k] && tgt[i] < cut[k + 1]) zt = stats[k][4 * i + 2];
        }
        ASSERT_CLOSE(M + logf(s) - zt, losses[i], 1e-6, 1e-6, "merged loss", i);
        ck_assert_int_eq(arg == tgt[i], correct[i]);
        ms[2 * i] = M, ms[2 * i + 1] = s;
    }
    for (int k = 0; k < 3; k++)
        ck_dt(be->crossentropy_part(be, NULL, dpart + cut[k], ms, z + cut[k], tgt, N, cut[k + 1] - cut[k], V, cut[k],
                                    0.5f));
    for (int i = 0; i < N * V; i++) ASSERT_CLOSE(dpart[i], d[i], 1e-6, 0.0, "part dlogits", i);
    ck_assert_int_eq(be->crossentropy_part(be, stats[0], dpart, ms, z, tgt, N, V, V, 0, 0.5f), DT_ERR_INVALID);
    free(z), free(d), free(dpart);
}
END_TEST

START_TEST(test_crossentropy)
{
    const int N = 6, V = 33;
    float *z = malloc(sizeof(float) * N * V), *d = malloc(sizeof(float) * N * V), losses[6];
    uint8_t correct[6];
    int32_t tgt[6] = {0, 32, -1, 5, 7, 7};
    fill(z, N * V, 20, 3);
    z[5 * V + 7] = 100.0f; /* row 5: target is the argmax */
    ck_dt(be->crossentropy_forward_backward(be, losses, correct, d, z, tgt, N, V, V, 0.5f));
    double *zd = to_d(z, N * V);
    const double h = 1e-6;
    for (int i = 0; i < N; i++) {
        if (tgt[i] < 0) {
            ck_assert_float_eq(losses[i], 0.0f);
            for (int v = 0; v < V; v++) ck_assert_float_eq(d[i * V + v], 0.0f);
            continue;
        }
        ASSERT_CLOSE(losses[i], xent_ref(zd + i * V, tgt[i], V), 1e-5, 1e-5, "loss", i);
        int arg = 0;
        for (int v = 1; v < V; v++)
            if (z[i * V + v] > z[i * V + arg]) arg = v;
        ck_assert_int_eq(correct[i], arg == tgt[i]);
        for (int v = 0; v < V; v++) {
            double s = zd[i * V + v];
            zd[i * V + v] = s + h;
            double lp = xent_ref(zd + i * V, tgt[i], V);
            zd[i * V + v] = s - h;
            double lm = xent_ref(zd + i * V, tgt[i], V);
            zd[i * V + v] = s;
            ASSERT_CLOSE(d[i * V + v], 0.5 * (lp - lm) / (2 * h), 1e-5, 1e-4, "dlogits", i * V + v);
        }
    }
    ck_assert_int_eq(correct[5], 1);
    /* in place (dlogits aliasing logits) gives the same gradient */
    ck_dt(be->crossentropy_forward_backward(be, losses, NULL, z, z, tgt, N, V, V, 0.5f));
    ck_assert_mem_eq(z, d, sizeof(float) * N * V);
    int32_t bad[6] = {0, 33, 0, 0, 0, 0};
    ck_assert_int_eq(be->crossentropy_forward_backward(be, losses, NULL, NULL, z, bad, N, V, V, 1.0f), DT_ERR_INVALID);
    /* rows ld = 40 apart: the same results, in place too; the padding
     * (NaN here) is neither read nor written */
    const int ld = 40;
    float *zp = malloc(sizeof(float) * N * ld), *dp = malloc(sizeof(float) * N * ld), lp[6];
    uint8_t cp[6];
    fill(z, N * V, 20, 3);
    z[5 * V + 7] = 100.0f;
    for (int i = 0; i < N * ld; i++) zp[i] = dp[i] = NAN;
    for (int i = 0; i < N; i++) memcpy(zp + i * ld, z + i * V, sizeof(float) * V);
    ck_dt(be->crossentropy_forward_backward(be, lp, cp, dp, zp, tgt, N, V, ld, 0.5f));
    ck_assert_mem_eq(lp, losses, sizeof lp);
    ck_assert_mem_eq(cp, correct, sizeof cp);
    for (int i = 0; i < N; i++) {
        ck_assert_mem_eq(dp + i * ld, d + i * V, sizeof(float) * V);
        for (int v = V; v < ld; v++) ck_assert(isnan(dp[i * ld + v]));
    }
    ck_dt(be->crossentropy_forward_backward(be, lp, NULL, zp, zp, tgt, N, V, ld, 0.5f));
    for (int i = 0; i < N; i++) {
        ck_assert_mem_eq(zp + i * ld, d + i * V, sizeof(float) * V);
        for (int v = V; v < ld; v++) ck_assert(isnan(zp[i * ld + v]));
    }
    ck_assert_int_eq(be->crossentropy_forward_backward(be, lp, NULL, NULL, zp, tgt, N, V, V - 1, 1.0f), DT_ERR_INVALID);
    free(zp), free(dp);
    free(z), free(d), free(zd);
}
END_TEST

START_TEST(test_residual)
{
    float a[37], b[37], o[37];
    fill(a, 37, 21, 1), fill(b, 37, 22, 1);
    ck_dt(be->residual_forward(be, o, a, b, 37));
    for (int i = 0; i < 37; i++) ck_assert_float_eq(o[i], a[i] + b[i]);
    ck_dt(be->residual_forward(be, a, a, b, 37));
    ck_assert_mem_eq(a, o, sizeof o);
}
END_TEST

/* Same inputs, same thread count: bit-identical outputs, including the
 * reductions over rows. */
START_TEST(test_determinism)
{
    const int N = 512, C = 64;
    float *x = malloc(sizeof(float) * N * C), *dy = malloc(sizeof(float) * N * C), w[64], b[64];
    float mean[512], rstd[512], *y = malloc(sizeof(float) * N * C);
    fill(x, N * C, 23, 1), fill(dy, N * C, 24, 1), fill(w, C, 25, 1), fill(b, C, 26, 1);
    ck_dt(be->layernorm_forward(be, y, mean, rstd, x, w, b, N, C));
    float dw[2][64], db[2][64];
    for (int r = 0; r < 2; r++) {
        float *dx = calloc(N * C, sizeof(float));
        memset(dw[r], 0, sizeof dw[r]), memset(db[r], 0, sizeof db[r]);
        ck_dt(be->layernorm_backward(be, dx, dw[r], db[r], dy, x, w, mean, rstd, N, C));
        free(dx);
    }
    ck_assert_mem_eq(dw[0], dw[1], sizeof dw[0]);
    ck_assert_mem_eq(db[0], db[1], sizeof db[0]);
    free(x), free(dy), free(y);
}
END_TEST

static Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("cpu");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_vmath_exp_tanh);
    tcase_add_loop_test(tc, test_gemm_all_transposes, 0, 3);
    tcase_add_test(tc, test_matmul_forward_backward);
    tcase_add_test(tc, test_layernorm);
    tcase_add_test(tc, test_gelu);
    tcase_add_test(tc, test_attention);
    tcase_add_loop_test(tc, test_attention_fused, 0, 4);
    tcase_add_test(tc, test_encoder);
    tcase_add_loop_test(tc, test_attention_chunk, 0, 2);
    tcase_add_test(tc, test_crossentropy);
    tcase_add_test(tc, test_crossentropy_part);
    tcase_add_test(tc, test_residual);
    tcase_add_test(tc, test_determinism);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(ops_suite()); }
