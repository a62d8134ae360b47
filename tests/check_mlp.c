/* check_mlp.c: BatchNorm and ReLU ops, the mlp-bn model, the blobs task,
 * and what gradient accumulation does with and without BatchNorm.
 *
 * References are written here from the equations, in double:
 *  - BatchNorm forward (biased variance normalises, unbiased variance
 *    enters running_var, PyTorch's momentum convention) and the whole
 *    model's mean cross-entropy;
 *  - gradients are central finite differences of those references, taken
 *    in double (step 1e-5 for the model, 1e-4 for the smooth BatchNorm
 *    projection: truncation ~h^2 ~ 1e-8..1e-10, roundoff ~1e-16/h), so the
 *    finite differences are exact at float precision and the tolerances
 *    below measure only the float32 forward/backward.
 *
 * Tolerances, from a bound on the float32 error, with the worst error
 * measured here in brackets:
 *  - BatchNorm forward: out, mean, rstd, running statistics to atol 1e-5 +
 *    rtol 1e-5. The statistics accumulate in double, so the error is float
 *    rounding of x - mean (|x| up to ~12: ulp ~1e-6) times rstd * w (up to
 *    ~5), plus rounding of the stored results [1e-7];
 *  - BatchNorm backward: atol 1e-5 + rtol 1e-4. dx = rstd * w * (dout -
 *    mean(dout) - xhat * mean(dout * xhat)) is a difference of O(1) float
 *    terms, each off by a few ulp, scaled by rstd * w [7e-7 absolute];
 *  - whole model: loss rtol 1e-5 [1e-7]; gradients atol 2e-5 + rtol 2e-3,
 *    as for the GPT (float32 through two hidden layers) [<1e-3 of it];
 *  - accumulation without BatchNorm: N micro-batches with loss scale 1/N
 *    against one batch of N*b rows differ only in float32 summation order
 *    (the GEMM sums b rows N times into grads instead of N*b rows at once;
 *    each row's logit gradient gets the same weight, (1/N)/b = 1/(N*b)
 *    exactly, powers of two here), so every entry agrees to 1e-6 * (max |g| of
 *    its tensor) + rtol 1e-5: a float sum of n terms is off by at most
 *    ~n * 6e-8 of the sum of |terms|, n = 32 [0.03 of it; the whole
 *    gradient differs by 9e-8 relative, against 0.39 with BatchNorm]. */
#include <string.h>

#include "testutil.h"

static dt_backend *be;

static void setup(void) { ck_dt(dt_backend_cpu_create(2, &be)); }
static void teardown(void) { dt_backend_destroy(be); }

/* ---- BatchNorm reference ------------------------------------------------- */

/* Training-mode BatchNorm over (N,C) in double; mean/var (C) (biased var). */
static void ref_bn(const double *x, const double *w, const double *b, double *out, double *mean, double *var, int N,
                   int C)
{
    for (int c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int i = 0; i < N; i++) m += x[i * C + c];
        m /= N;
        for (int i = 0; i < N; i++) v += (x[i * C + c] - m) * (x[i * C + c] - m);
        v /= N;
        double r = 1.0 / sqrt(v + 1e-5);
        for (int i = 0; i < N; i++) out[i * C + c] = (x[i * C + c] - m) * r * w[c] + b[c];
        if (mean) mean[c] = m;
        if (var) var[c] = v;
    }
}

/* sum R * BN(x): its gradient is the backward with dout = R. */
static double ref_bn_proj(const double *x, const double *w, const double *b, const double *R, double *tmp, int N, int C)
{
    ref_bn(x, w, b, tmp, NULL, NULL, N, C);
    double s = 0;
    for (int i = 0; i < N * C; i++) s += R[i] * tmp[i];
    return s;
}

enum { BN_N = 37, BN_C = 21 }; /* C > one 16-channel slice, with a tail of 5 */

/* Inputs with channel offsets in [-3, 3] and scales in [0.3, 3]. */
static void bn_inputs(uint64_t seed, float *x, float *w, float *b, int N, int C)
{
    dt_rng r;
    dt_rng_seed(&r, seed);
    for (int c = 0; c < C; c++) {
        double off = 6.0 * dt_rng_uniform(&r) - 3.0, sc = 0.3 + 2.7 * dt_rng_uniform(&r);
        for (int i = 0; i < N; i++) x[i * C + c] = (float)(off + sc * dt_rng_normal(&r));
        if (w) w[c] = (float)(0.5 + dt_rng_uniform(&r));
        if (b) b[c] = (float)(dt_rng_normal(&r) * 0.5);
    }
}

START_TEST(test_bn_forward_reference)
{
    const int N = BN_N, C = BN_C;
    float x[BN_N * BN_C], w[BN_C], b[BN_C], out[BN_N * BN_C], mean[BN_C], rstd[BN_C], rm[BN_C], rv[BN_C];
    double xd[BN_N * BN_C], wd[BN_C], bd[BN_C], od[BN_N * BN_C], md[BN_C], vd[BN_C];
    bn_inputs(11, x, w, b, N, C);
    for (int i = 0; i < N * C; i++) xd[i] = x[i];
    for (int c = 0; c < C; c++) {
        wd[c] = w[c], bd[c] = b[c];
        rm[c] = 0.1f * c, rv[c] = 1.0f + 0.05f * c;
    }
    const float mom = 0.3f;
    ck_dt(be->batchnorm_forward(be, out, mean, rstd, rm, rv, x, w, b, N, C, mom, 1e-5f, 1));
    ref_bn(xd, wd, bd, od, md, vd, N, C);
    for (int i = 0; i < N * C; i++)
        ck_assert_msg(dt_test_close(out[i], od[i], 1e-5, 1e-5), "out[%d] %.8g vs %.8g", i, out[i], od[i]);
    for (int c = 0; c < C; c++) {
        double erm = (1 - mom) * (0.1f * c) + mom * md[c];
        double erv = (1 - mom) * (1.0f + 0.05f * c) + mom * vd[c] * N / (N - 1);
        ck_assert(dt_test_close(mean[c], md[c], 1e-5, 1e-5));
        ck_assert(dt_test_close(rstd[c], 1 / sqrt(vd[c] + 1e-5), 1e-5, 1e-5));
        ck_assert_msg(dt_test_close(rm[c], erm, 1e-5, 1e-5), "running_mean[%d] %.8g vs %.8g", c, rm[c], erm);
        ck_assert_msg(dt_test_close(rv[c], erv, 1e-5, 1e-5), "running_var[%d] %.8g vs %.8g", c, rv[c], erv);
    }
    /* NULL running statistics: normalise with batch statistics, track nothing */
    float out2[BN_N * BN_C];
    ck_dt(be->batchnorm_forward(be, out2, mean, rstd, NULL, NULL, x, w, b, N, C, mom, 1e-5f, 1));
    ck_assert_mem_eq(out, out2, sizeof out);
}
END_TEST

START_TEST(test_bn_running_stats_by_hand)
{
    /* column 0: 1 2 3 6 -> mean 3, biased var 3.5, unbiased 14/3;
     * column 1: -1 -1 1 1 -> mean 0, biased var 1, unbiased 4/3. */
    const float x[8] = {1, -1, 2, -1, 3, 1, 6, 1};
    const float w[2] = {1, 2}, b[2] = {0, 0.5f};
    float out[8], mean[2], rstd[2], rm[2] = {0.5f, -2.0f}, rv[2] = {2.0f, 0.5f};
    ck_dt(be->batchnorm_forward(be, out, mean, rstd, rm, rv, x, w, b, 4, 2, 0.1f, 1e-5f, 1));
    ck_assert(dt_test_close(rm[0], 0.75, 1e-7, 1e-6));      /* 0.9 * 0.5 + 0.1 * 3 */
    ck_assert(dt_test_close(rv[0], 2.2666667, 1e-7, 1e-6)); /* 0.9 * 2 + 0.1 * 14/3 */
    ck_assert(dt_test_close(rm[1], -1.8, 1e-7, 1e-6));      /* 0.9 * -2 + 0.1 * 0 */
    ck_assert(dt_test_close(rv[1], 0.5833333, 1e-7, 1e-6)); /* 0.9 * 0.5 + 0.1 * 4/3 */
    ck_assert(dt_test_close(mean[0], 3, 0, 1e-7));
    ck_assert(dt_test_close(rstd[0], 1 / sqrt(3.5 + 1e-5), 0, 1e-6));
    ck_assert(dt_test_close(out[1], 0.5 - 2 / sqrt(1 + 1e-5), 1e-6, 1e-6));
    ck_assert(dt_test_close(out[7], 0.5 + 2 / sqrt(1 + 1e-5), 1e-6, 1e-6));
    /* momentum 0: running statistics stay; momentum 1: they become the batch's */
    float rm0[2] = {0.5f, -2.0f}, rv0[2] = {2.0f, 0.5f};
    ck_dt(be->batchnorm_forward(be, out, mean, rstd, rm0, rv0, x, w, b, 4, 2, 0.0f, 1e-5f, 1));
    ck_assert(rm0[0] == 0.5f && rm0[1] == -2.0f && rv0[0] == 2.0f && rv0[1] == 0.5f);
    ck_dt(be->batchnorm_forward(be, out, mean, rstd, rm0, rv0, x, w, b, 4, 2, 1.0f, 1e-5f, 1));
    ck_assert(dt_test_close(rm0[0], 3, 0, 1e-7) && dt_test_close(rm0[1], 0, 1e-7, 0));
    ck_assert(dt_test_close(rv0[0], 14.0 / 3, 0, 1e-6) && dt_test_close(rv0[1], 4.0 / 3, 0, 1e-6));
    /* limits */
    ck_assert_int_eq(be->batchnorm_forward(be, out, mean, rstd, rm, rv, x, w, b, 1, 2, 0.1f, 1e-5f, 1), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), ">= 2"));
    ck_assert_int_eq(be->batchnorm_forward(be, out, mean, rstd, rm, rv, x, w, b, 4, 2, 1.5f, 1e-5f, 1), DT_ERR_INVALID);
    ck_assert_int_eq(be->batchnorm_forward(be, out, mean, rstd, NULL, NULL, x, w, b, 4, 2, 0.1f, 1e-5f, 0),
                     DT_ERR_INVALID);
}
END_TEST

START_TEST(test_bn_eval_uses_running_stats)
{
    const int N = BN_N, C = BN_C;
    float x[BN_N * BN_C], w[BN_C], b[BN_C], out[BN_N * BN_C], mean[BN_C], rstd[BN_C], rm[BN_C], rv[BN_C];
    bn_inputs(12, x, w, b, N, C);
    for (int c = 0; c < C; c++) rm[c] = 0.3f * c - 2.0f, rv[c] = 0.5f + 0.2f * c;
    float rm0[BN_C], rv0[BN_C];
    memcpy(rm0, rm, sizeof rm);
    memcpy(rv0, rv, sizeof rv);
    ck_dt(be->batchnorm_forward(be, out, mean, rstd, rm, rv, x, w, b, N, C, 0.1f, 1e-5f, 0));
    ck_assert_mem_eq(rm, rm0, sizeof rm); /* nothing moves in eval mode */
    ck_assert_mem_eq(rv, rv0, sizeof rv);
    for (int c = 0; c < C; c++) {
        double r = 1.0 / sqrt((double)rv[c] + 1e-5);
        ck_assert_float_eq(mean[c], rm[c]);
        ck_assert(dt_test_close(rstd[c], r, 0, 1e-6));
        for (int i = 0; i < N; i++) {
            double e = (x[i * C + c] - (double)rm[c]) * r * w[c] + b[c];
            ck_assert_msg(dt_test_close(out[i * C + c], e, 1e-5, 1e-5), "eval out[%d,%d] %.8g vs %.8g", i, c,
                          out[i * C + c], e);
        }
    }
    /* one row is fine in eval mode */
    ck_dt(be->batchnorm_forward(be, out, NULL, NULL, rm, rv, x, w, b, 1, C, 0.1f, 1e-5f, 0));
}
END_TEST

START_TEST(test_bn_backward_finite_differences)
{
    const int N = BN_N, C = BN_C, NC = BN_N * BN_C;
    float x[BN_N * BN_C], w[BN_C], b[BN_C], out[BN_N * BN_C], mean[BN_C], rstd[BN_C];
    float dout[BN_N * BN_C], dx[BN_N * BN_C], dw[BN_C], db[BN_C];
    double xd[BN_N * BN_C], wd[BN_C], bd[BN_C], R[BN_N * BN_C], tmp[BN_N * BN_C];
    bn_inputs(13, x, w, b, N, C);
    dt_rng r;
    dt_rng_seed(&r, 14);
    for (int i = 0; i < NC; i++) {
        xd[i] = x[i];
        dout[i] = (float)dt_rng_normal(&r);
        R[i] = dout[i];
        dx[i] = 1e6f; /* overwritten */
    }
    for (int c = 0; c < C; c++) {
        wd[c] = w[c], bd[c] = b[c];
        dw[c] = 0.25f, db[c] = -0.5f; /* accumulated into */
    }
    ck_dt(be->batchnorm_forward(be, out, mean, rstd, NULL, NULL, x, w, b, N, C, 0.1f, 1e-5f, 1));
    ck_dt(be->batchnorm_backward(be, dx, dw, db, dout, x, w, mean, rstd, N, C));
    const double h = 1e-4;
    double max_err = 0;
    for (int i = 0; i < NC; i++) {
        double s = xd[i];
        xd[i] = s + h;
        double lp = ref_bn_proj(xd, wd, bd, R, tmp, N, C);
        xd[i] = s - h;
        double lm = ref_bn_proj(xd, wd, bd, R, tmp, N, C);
        xd[i] = s;
        double fd = (lp - lm) / (2 * h);
        ck_assert_msg(dt_test_close(dx[i], fd, 1e-5, 1e-4), "dx[%d]: %.8g vs finite difference %.8g", i, dx[i], fd);
        max_err = fmax(max_err, fabs(dx[i] - fd));
    }
    for (int c = 0; c < C; c++) {
        double *pv[2] = {wd, bd};
        float got[2] = {dw[c] - 0.25f, db[c] + 0.5f};
        for (int k = 0; k < 2; k++) {
            double s = pv[k][c];
            pv[k][c] = s + h;
            double lp = ref_bn_proj(xd, wd, bd, R, tmp, N, C);
            pv[k][c] = s - h;
            double lm = ref_bn_proj(xd, wd, bd, R, tmp, N, C);
            pv[k][c] = s;
            double fd = (lp - lm) / (2 * h);
            ck_assert_msg(dt_test_close(got[k], fd, 1e-5, 1e-4), "d%s[%d]: %.8g vs finite difference %.8g",
                          k ? "b" : "w", c, got[k], fd);
        }
    }
    printf("batchnorm backward: max |dx - finite difference| = %.3g\n", max_err);
}
END_TEST

START_TEST(test_bn_deterministic_any_threads)
{
    enum { N = 513, C = 100 }; /* N*C above the parallel threshold */
    float *x = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * C), *b = malloc(sizeof(float) * C);
    float *o[2], *dx[2], st[2][4][C];
    bn_inputs(15, x, w, b, N, C);
    int threads[2] = {1, 3};
    for (int t = 0; t < 2; t++) {
        ck_dt(be->set_threads(be, threads[t]));
        o[t] = malloc(sizeof(float) * N * C);
        dx[t] = malloc(sizeof(float) * N * C);
        for (int c = 0; c < C; c++) st[t][2][c] = 0, st[t][3][c] = 1;
        ck_dt(be->batchnorm_forward(be, o[t], st[t][0], st[t][1], st[t][2], st[t][3], x, w, b, N, C, 0.1f, 1e-5f, 1));
        float dw[C], db[C];
        memset(dw, 0, sizeof dw);
        memset(db, 0, sizeof db);
        ck_dt(be->batchnorm_backward(be, dx[t], dw, db, x /* any dout */, x, w, st[t][0], st[t][1], N, C));
    }
    ck_assert_mem_eq(o[0], o[1], sizeof(float) * N * C);
    ck_assert_mem_eq(dx[0], dx[1], sizeof(float) * N * C);
    ck_assert_mem_eq(st[0], st[1], sizeof st[0]);
    for (int t = 0; t < 2; t++) free(o[t]), free(dx[t]);
    free(x), free(w), free(b);
}
END_TEST

/* ---- ReLU ------------------------------------------------------------------ */

START_TEST(test_relu)
{
    const float in[8] = {-2.0f, -0.0f, 0.0f, 1e-30f, 3.0f, NAN, -INFINITY, INFINITY};
    float out[8], d[8];
    ck_dt(be->relu_forward(be, out, in, 8));
    const float fw[8] = {0, 0, 0, 1e-30f, 3, 0, 0, INFINITY};
    for (int i = 0; i < 8; i++)
        if (i == 5) ck_assert(isnan(out[i])); /* NaN propagates */
        else ck_assert_float_eq(out[i], fw[i]);
    for (int i = 0; i < 8; i++) d[i] = 5.0f + i;
    ck_dt(be->relu_backward(be, d, in, d, 8)); /* dinp aliasing dout */
    const float bw[8] = {0, 0, 0, 8, 9, 0, 0, 12};
    for (int i = 0; i < 8; i++) ck_assert_float_eq(d[i], bw[i]);
    /* a size that runs threaded, against the scalar definition */
    enum { M = 100003 };
    float *x = malloc(sizeof(float) * M), *y = malloc(sizeof(float) * M), *g = malloc(sizeof(float) * M);
    dt_rng r;
    dt_rng_seed(&r, 5);
    for (int i = 0; i < M; i++) x[i] = (float)dt_rng_normal(&r);
    ck_dt(be->relu_forward(be, y, x, M));
    ck_dt(be->relu_backward(be, g, x, x, M));
    for (int i = 0; i < M; i++) {
        ck_assert(y[i] == (x[i] > 0 ? x[i] : 0.0f));
        ck_assert(g[i] == (x[i] > 0 ? x[i] : 0.0f));
    }
    free(x), free(y), free(g);
}
END_TEST

/* ---- the model against a double reference ---------------------------------- */

static const double *P(const dt_paramset *ps, const double *w, const char *fmt, int l)
{
    char name[64];
    snprintf(name, sizeof name, fmt, l);
    int i = dt_paramset_find(ps, name);
    ck_assert_msg(i >= 0, "no tensor %s", name);
    return w + ps->info[i].offset;
}

/* Mean cross-entropy of mlp-bn in double. Training mode: batch statistics;
 * if stats is not NULL it receives, per BatchNorm layer l, the batch mean
 * at stats[l*2H] and the unbiased batch variance at stats[l*2H + H]. Eval
 * mode: the running statistics in `state` (state layout sps). logits (B,K)
 * may be NULL. */
static double ref_mlp(const dt_mlp_config *c, const dt_paramset *ps, const double *w, const float *x, const int32_t *y,
                      int B, int training, const dt_paramset *sps, const float *state, double *stats, double *logits)
{
    const int D = c->input_dim, H = c->hidden_size, K = c->num_classes;
    const int W = D > H ? D : H;
    double *cur = malloc(sizeof(double) * B * W), *pre = malloc(sizeof(double) * B * H);
    double *z = malloc(sizeof(double) * B * K);
    for (int i = 0; i < B * D; i++) cur[i] = x[i];
    int in = D;
    for (int l = 0; l < c->num_layers; l++) {
        const double *fw = P(ps, w, "h.%d.fc.w", l), *fb = c->batchnorm ? NULL : P(ps, w, "h.%d.fc.b", l);
        for (int i = 0; i < B; i++)
            for (int k = 0; k < H; k++) {
                double s = fb ? fb[k] : 0;
                for (int j = 0; j < in; j++) s += fw[k * in + j] * cur[i * in + j];
                pre[i * H + k] = s;
            }
        if (c->batchnorm) {
            const double *g = P(ps, w, "h.%d.bn.w", l), *bb = P(ps, w, "h.%d.bn.b", l);
            for (int k = 0; k < H; k++) {
                double m = 0, v = 0;
                if (training) {
                    for (int i = 0; i < B; i++) m += pre[i * H + k];
                    m /= B;
                    for (int i = 0; i < B; i++) v += (pre[i * H + k] - m) * (pre[i * H + k] - m);
                    if (stats) stats[l * 2 * H + k] = m, stats[l * 2 * H + H + k] = v / (B - 1);
                    v /= B;
                } else {
                    char name[64];
                    snprintf(name, sizeof name, "h.%d.bn.running_mean", l);
                    m = state[sps->info[dt_paramset_find(sps, name)].offset + k];
                    snprintf(name, sizeof name, "h.%d.bn.running_var", l);
                    v = state[sps->info[dt_paramset_find(sps, name)].offset + k];
                }
                double r = 1 / sqrt(v + 1e-5);
                for (int i = 0; i < B; i++) pre[i * H + k] = (pre[i * H + k] - m) * r * g[k] + bb[k];
            }
        }
        for (int i = 0; i < B * H; i++) cur[i] = pre[i] > 0 ? pre[i] : 0;
        in = H;
    }
    const double *ow = P(ps, w, "out.w", 0), *ob = P(ps, w, "out.b", 0);
    double L = 0;
    for (int i = 0; i < B; i++) {
        double mx = -1e300, s = 0;
        for (int k = 0; k < K; k++) {
            double t = ob[k];
            for (int j = 0; j < in; j++) t += ow[k * in + j] * cur[i * in + j];
            z[i * K + k] = t;
            mx = t > mx ? t : mx;
        }
        for (int k = 0; k < K; k++) s += exp(z[i * K + k] - mx);
        L += mx + log(s) - z[i * K + y[i]];
    }
    if (logits) memcpy(logits, z, sizeof(double) * B * K);
    free(cur), free(pre), free(z);
    return L / B;
}

enum { MB = 6 };
static dt_mlp_config small_cfg(int bn)
{
    dt_mlp_config c;
    dt_mlp_config_default(&c);
    c.input_dim = 5, c.num_classes = 3, c.hidden_size = 7, c.num_layers = 2, c.batchnorm = bn;
    return c;
}

/* A model with every parameter perturbed (gains around 1, biases non-zero)
 * and a batch of MB rows with offset, unequal features. */
static dt_mlp *small_model(int bn, float *x, int32_t *y)
{
    dt_mlp_config c = small_cfg(bn);
    dt_mlp *m;
    ck_dt(dt_mlp_create(&c, be, &m));
    ck_dt(dt_mlp_init_weights(m, 3));
    dt_rng r;
    dt_rng_seed(&r, 77);
    const dt_paramset *ps = dt_mlp_layout(m);
    float *w = dt_mlp_params(m);
    for (int i = 0; i < ps->count; i++)
        for (size_t j = 0; j < ps->info[i].numel; j++) w[ps->info[i].offset + j] += 0.3f * (float)dt_rng_normal(&r);
    for (int i = 0; i < MB * c.input_dim; i++) x[i] = (float)(1.0 + (i % c.input_dim) * dt_rng_normal(&r));
    for (int i = 0; i < MB; i++) y[i] = (int32_t)dt_rng_below(&r, (uint64_t)c.num_classes);
    return m;
}

static double *params_double(dt_mlp *m)
{
    const dt_paramset *ps = dt_mlp_layout(m);
    double *w = malloc(sizeof(double) * ps->numel);
    for (size_t i = 0; i < ps->numel; i++) w[i] = dt_mlp_params(m)[i];
    return w;
}

START_TEST(test_mlp_layout)
{
    for (int bn = 0; bn <= 1; bn++) {
        dt_mlp_config c = small_cfg(bn);
        dt_mlp *m;
        ck_dt(dt_mlp_create(&c, be, &m));
        const dt_paramset *ps = dt_mlp_layout(m), *ss = dt_mlp_state_layout(m);
        size_t n = 0;
        for (int i = 0; i < ps->count; i++) {
            n += ps->info[i].numel;
            ck_assert_int_eq(ps->info[i].offset % 16, 0);
            ck_assert_int_eq(ps->info[i].decay, ps->info[i].ndim == 2); /* no decay on biases and BN */
        }
        ck_assert_uint_eq(n, dt_mlp_config_num_params(&c));
        ck_assert_int_eq(ps->count, c.num_layers * (bn ? 3 : 2) + 2); /* fc.w + (bn.w, bn.b | fc.b); out.w, out.b */
        ck_assert_int_eq(dt_paramset_find(ps, "h.1.fc.b") >= 0, !bn);
        ck_assert_int_eq(dt_paramset_find(ps, "h.1.bn.w") >= 0, bn);
        ck_assert_int_eq(ps->info[dt_paramset_find(ps, "h.1.fc.w")].shape[1], c.hidden_size);
        ck_assert_int_eq(ps->info[dt_paramset_find(ps, "out.w")].shape[0], c.num_classes);
        ck_assert_int_eq(ss->count, bn ? 2 * c.num_layers : 0);
        ck_assert(bn ? dt_mlp_state(m) != NULL : dt_mlp_state(m) == NULL);
        if (bn) { /* PyTorch's initial running statistics */
            const float *s = dt_mlp_state(m);
            ck_assert_float_eq(s[ss->info[dt_paramset_find(ss, "h.1.bn.running_mean")].offset + 3], 0.0f);
            ck_assert_float_eq(s[ss->info[dt_paramset_find(ss, "h.1.bn.running_var")].offset + 3], 1.0f);
        }
        ck_dt(dt_mlp_init_weights(m, 5));
        const float *w = dt_mlp_params(m);
        const dt_param_info *fc = &ps->info[dt_paramset_find(ps, "h.0.fc.w")];
        float bound = sqrtf(6.0f / c.input_dim), mx = 0;
        for (size_t j = 0; j < fc->numel; j++) mx = fmaxf(mx, fabsf(w[fc->offset + j]));
        ck_assert(mx <= bound && mx > 0.5f * bound); /* Kaiming-uniform for ReLU */
        if (bn) ck_assert_float_eq(w[ps->info[dt_paramset_find(ps, "h.0.bn.w")].offset], 1.0f);
        dt_mlp_free(m);
    }
}
END_TEST

START_TEST(test_mlp_finite_differences)
{
    const int bn = _i;
    float x[MB * 5];
    int32_t y[MB];
    dt_mlp *m = small_model(bn, x, y);
    const dt_mlp_config *c = dt_mlp_config_of(m);
    const dt_paramset *ps = dt_mlp_layout(m), *ss = dt_mlp_state_layout(m);
    float loss;
    ck_dt(dt_mlp_zero_grad(m));
    ck_dt(dt_mlp_forward(m, x, y, MB, &loss));
    ck_dt(dt_mlp_backward(m, 1.0f));
    double *w = params_double(m);
    double stats[2 * 2 * 7];
    double ref = ref_mlp(c, ps, w, x, y, MB, 1, NULL, NULL, stats, NULL);
    ck_assert_msg(dt_test_close(loss, ref, 1e-6, 1e-5), "loss %.9g vs reference %.9g", loss, ref);
    if (bn) /* one training forward moved the running statistics from (0, 1) by momentum 0.1 */
        for (int l = 0; l < c->num_layers; l++)
            for (int k = 0; k < c->hidden_size; k++) {
                const float *s = dt_mlp_state(m);
                double em = 0.1 * stats[l * 14 + k], ev = 0.9 + 0.1 * stats[l * 14 + 7 + k];
                ck_assert(dt_test_close(s[ss->info[2 * l].offset + k], em, 1e-5, 1e-5));
                ck_assert(dt_test_close(s[ss->info[2 * l + 1].offset + k], ev, 1e-5, 1e-5));
            }
    const float *g = dt_mlp_grads(m);
    const double h = 1e-5;
    double max_g = 0;
    int checked = 0;
    for (int t = 0; t < ps->count; t++)
        for (size_t j = 0; j < ps->info[t].numel; j++) {
            size_t k = ps->info[t].offset + j;
            double s = w[k];
            w[k] = s + h;
            double lp = ref_mlp(c, ps, w, x, y, MB, 1, NULL, NULL, NULL, NULL);
            w[k] = s - h;
            double lm = ref_mlp(c, ps, w, x, y, MB, 1, NULL, NULL, NULL, NULL);
            w[k] = s;
            double fd = (lp - lm) / (2 * h);
            ck_assert_msg(dt_test_close(g[k], fd, 2e-5, 2e-3), "%s[%zu]: backward %.8g finite difference %.8g",
                          ps->info[t].name, j, g[k], fd);
            max_g = fmax(max_g, fabs(fd));
            checked++;
        }
    ck_assert_int_eq(checked, (int)dt_mlp_config_num_params(c));
    ck_assert(max_g > 1e-2); /* real signal, not zeros */
    /* accuracy counts argmax == label on the forward's logits */
    double z[MB * 3];
    ref_mlp(c, ps, w, x, y, MB, 1, NULL, NULL, NULL, z);
    int expect = 0, got;
    for (int i = 0; i < MB; i++) {
        int a = 0;
        for (int k = 1; k < 3; k++) a = z[i * 3 + k] > z[i * 3 + a] ? k : a;
        expect += a == y[i];
    }
    ck_dt(dt_mlp_accuracy(m, &got));
    ck_assert_int_eq(got, expect);
    free(w);
    dt_mlp_free(m);
}
END_TEST

START_TEST(test_mlp_eval_mode)
{
    float x[MB * 5];
    int32_t y[MB];
    dt_mlp *m = small_model(1, x, y);
    const dt_mlp_config *c = dt_mlp_config_of(m);
    const dt_paramset *ps = dt_mlp_layout(m), *ss = dt_mlp_state_layout(m);
    float *s = dt_mlp_state(m);
    for (size_t i = 0; i < ss->numel; i++) s[i] = 0.5f + 0.01f * (float)i; /* running statistics to use */
    float *s0 = malloc(sizeof(float) * ss->numel);
    memcpy(s0, s, sizeof(float) * ss->numel);
    dt_mlp_set_training(m, 0);
    ck_assert_int_eq(dt_mlp_is_training(m), 0);
    float loss, logits[MB * 3];
    ck_dt(dt_mlp_forward(m, x, y, MB, &loss));
    ck_assert_mem_eq(s, s0, sizeof(float) * ss->numel); /* nothing moves */
    ck_dt(dt_mlp_logits(m, logits));
    double *w = params_double(m), z[MB * 3];
    double ref = ref_mlp(c, ps, w, x, y, MB, 0, ss, s, NULL, z);
    ck_assert(dt_test_close(loss, ref, 1e-6, 1e-5));
    for (int i = 0; i < MB * 3; i++) ck_assert(dt_test_close(logits[i], z[i], 1e-5, 1e-5));
    /* eval mode gives every row its own output: one row alone is fine */
    float l1[3];
    ck_dt(dt_mlp_forward(m, x + 2 * 5, NULL, 1, NULL));
    ck_dt(dt_mlp_logits(m, l1));
    for (int k = 0; k < 3; k++) ck_assert(dt_test_close(l1[k], logits[2 * 3 + k], 1e-6, 1e-6));
    ck_assert_int_eq(dt_mlp_backward(m, 1.0f), DT_ERR_INVALID); /* no labels */
    ck_dt(dt_mlp_forward(m, x, y, MB, NULL));
    ck_assert_int_eq(dt_mlp_backward(m, 1.0f), DT_ERR_INVALID); /* eval-mode forward */
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "eval mode"));
    dt_mlp_set_training(m, 1);
    ck_assert_int_eq(dt_mlp_forward(m, x, y, 1, NULL), DT_ERR_INVALID); /* one row cannot train BatchNorm */
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--micro-batch-size"));
    free(w), free(s0);
    dt_mlp_free(m);
}
END_TEST

START_TEST(test_mlp_errors_and_momentum_helper)
{
    float x[MB * 5];
    int32_t y[MB];
    dt_mlp *m = small_model(0, x, y);
    ck_dt(dt_mlp_forward(m, x, y, 1, NULL)); /* no BatchNorm: one row trains */
    ck_dt(dt_mlp_backward(m, 1.0f));
    ck_assert_int_eq(dt_mlp_backward(m, 1.0f), DT_ERR_INVALID); /* spent */
    int32_t bad[MB];
    memcpy(bad, y, sizeof bad);
    bad[2] = 3;
    ck_assert_int_eq(dt_mlp_forward(m, x, bad, MB, NULL), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "label 3"));
    ck_assert_int_eq(dt_mlp_set_bn_momentum(m, 1.5f), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--bn-momentum"));
    ck_dt(dt_mlp_set_bn_momentum(m, 0.25f));
    ck_assert_float_eq(dt_mlp_bn_momentum(m), 0.25f);
    dt_mlp_free(m);

    dt_mlp_config c = small_cfg(1);
    c.hidden_size = 0;
    ck_assert_int_eq(dt_mlp_create(&c, be, &m), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--hidden-size"));
    c = small_cfg(1);
    c.bn_momentum = -0.1f;
    ck_assert_int_eq(dt_mlp_config_validate(&c), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--bn-momentum"));
    c = small_cfg(1);
    c.num_layers = 65;
    ck_assert_int_eq(dt_mlp_config_validate(&c), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--num-layers"));

    /* 1 - (1 - m)^(1/N): N updates with m' leave (1 - m) of the old value */
    ck_assert_float_eq(dt_bn_momentum_per_micro(0.1f, 1), 0.1f);
    for (int n = 2; n <= 64; n *= 2) {
        double mp = dt_bn_momentum_per_micro(0.1f, n);
        ck_assert(dt_test_close(pow(1 - mp, n), 1 - (double)0.1f, 1e-7, 0));
        ck_assert(mp < 0.1 / n * 1.06 && mp > 0.1 / n); /* slightly above m/N */
    }
    ck_assert(dt_test_close(dt_bn_momentum_per_micro(0.1f, 4), 0.025996253, 1e-9, 1e-6));
    ck_assert_float_eq(dt_bn_momentum_per_micro(1.0f, 8), 1.0f);
    ck_assert_float_eq(dt_bn_momentum_per_micro(0.0f, 8), 0.0f);
    ck_assert(dt_bn_momentum_per_micro(1e-7f, 1000) > 0.0f); /* no cancellation for small m */
    ck_assert(isnan(dt_bn_momentum_per_micro(-0.5f, 4)));
}
END_TEST

/* ---- gradient accumulation ------------------------------------------------------ */

static dt_mlp *blob_model(dt_blobs *ds, int bn, int H, float momentum, uint64_t seed)
{
    dt_mlp_config c;
    dt_mlp_config_default(&c);
    c.input_dim = dt_blobs_dims(ds), c.num_classes = dt_blobs_classes(ds);
    c.hidden_size = H, c.batchnorm = bn, c.bn_momentum = momentum;
    dt_mlp *m;
    ck_dt(dt_mlp_create(&c, be, &m));
    ck_dt(dt_mlp_init_weights(m, seed));
    return m;
}

static dt_blobs *default_blobs(uint64_t seed)
{
    dt_blobs_config bc;
    dt_blobs_config_default(&bc);
    bc.seed = seed;
    dt_blobs *ds;
    ck_dt(dt_blobs_open(&bc, &ds));
    return ds;
}

/* Gradients of one batch of N*b rows, and of N micro-batches of b with
 * loss scale 1/N, on the same examples. Returns the worst entry's |diff| /
 * tolerance (tolerance as described at the top); *rel receives the
 * relative difference of the whole gradient, ||g_acc - g|| / ||g||. */
static double accumulate_compare(int bn, double *rel)
{
    enum { N = 4, b = 8 };
    dt_blobs *ds = default_blobs(1);
    dt_mlp *m = blob_model(ds, bn, 16, 0.1f, 9);
    const int D = dt_blobs_dims(ds);
    float x[N * b * 8];
    int32_t y[N * b];
    ck_assert_int_le(D, 8);
    ck_dt(dt_blobs_batch(ds, DT_SPLIT_TRAIN, 0, N * b, x, y));
    const dt_paramset *ps = dt_mlp_layout(m);
    float big_loss, micro_loss = 0, l;
    ck_dt(dt_mlp_zero_grad(m));
    ck_dt(dt_mlp_forward(m, x, y, N * b, &big_loss));
    ck_dt(dt_mlp_backward(m, 1.0f));
    float *g = malloc(sizeof(float) * ps->numel);
    memcpy(g, dt_mlp_grads(m), sizeof(float) * ps->numel);
    ck_dt(dt_mlp_zero_grad(m));
    for (int k = 0; k < N; k++) {
        ck_dt(dt_mlp_forward(m, x + k * b * D, y + k * b, b, &l));
        ck_dt(dt_mlp_backward(m, 1.0f / N));
        micro_loss += l / N;
    }
    if (!bn) ck_assert(dt_test_close(micro_loss, big_loss, 1e-7, 1e-6));
    const float *ga = dt_mlp_grads(m);
    double worst = 0, dd = 0, gg = 0;
    for (int t = 0; t < ps->count; t++) {
        const dt_param_info *p = &ps->info[t];
        double gmax = 0;
        for (size_t j = 0; j < p->numel; j++) gmax = fmax(gmax, fabs(g[p->offset + j]));
        ck_assert(gmax > 0);
        for (size_t j = 0; j < p->numel; j++) {
            double d = fabs((double)ga[p->offset + j] - g[p->offset + j]);
            worst = fmax(worst, d / (1e-6 * gmax + 1e-5 * fabs(g[p->offset + j])));
            dd += d * d;
            gg += (double)g[p->offset + j] * g[p->offset + j];
        }
    }
    *rel = sqrt(dd / gg);
    free(g);
    dt_mlp_free(m);
    dt_blobs_close(ds);
    return worst;
}

START_TEST(test_accumulation_equivalence_without_bn)
{
    double rel_plain, rel_bn;
    double worst = accumulate_compare(0, &rel_plain);
    accumulate_compare(1, &rel_bn);
    printf("accumulation, 4 micro-batches of 8 vs one batch of 32: ||g_acc - g|| / ||g|| = %.3g for the plain MLP "
           "(worst entry at %.2f of its tolerance), %.3g with BatchNorm\n",
           rel_plain, worst, rel_bn);
    ck_assert_msg(worst <= 1.0, "plain MLP: accumulated gradients off by %.3g of the tolerance", worst);
    /* the contrast the model exists to teach: with BatchNorm each micro-batch
     * normalises with its own statistics, so the gradients differ for real */
    ck_assert_msg(rel_bn > 1e-2, "with BatchNorm the gradients should differ, rel. diff %.3g", rel_bn);
}
END_TEST

/* Distances between two models' running statistics over all channels of
 * all BatchNorm layers, each channel in its own units: the mean difference
 * in standard deviations of the reference's running_var, the variance
 * difference relative to the reference's. RMS over channels. */
static void stats_distance(dt_mlp *a, dt_mlp *ref, double *dmean, double *dvar)
{
    const dt_paramset *ss = dt_mlp_state_layout(ref);
    const float *sa = dt_mlp_state(a), *sr = dt_mlp_state(ref);
    double em = 0, ev = 0;
    int n = 0;
    for (int t = 0; t < ss->count; t += 2) {
        const dt_param_info *pm = &ss->info[t], *pv = &ss->info[t + 1];
        for (size_t j = 0; j < pm->numel; j++) {
            double vr = sr[pv->offset + j];
            double dm = (sa[pm->offset + j] - (double)sr[pm->offset + j]) / sqrt(vr);
            double dv = (sa[pv->offset + j] - vr) / vr;
            em += dm * dm, ev += dv * dv, n++;
        }
    }
    *dmean = sqrt(em / n), *dvar = sqrt(ev / n);
}

/* One optimizer step's worth of BatchNorm updates three ways, from the same
 * weights and running statistics: the reference, one batch of N*b rows with
 * momentum m; N micro-batches of b with the adjusted 1-(1-m)^(1/N); and N
 * micro-batches with m unadjusted. "Closer" is measured per channel in the
 * channel's own units (stats_distance), over 2 layers x 32 channels, so no
 * single channel or layer dominates. Two starting points: cold (the
 * initial 0/1 statistics, far from the data's: the step's main effect is
 * how much of the old value survives, (1-m) for the reference and the
 * adjusted momentum, (1-m)^N for the unadjusted one) and warm (statistics
 * already converged by 30 earlier large batches: what remains is that the
 * unadjusted momentum overweights the noisy micro-batch statistics). */
START_TEST(test_bn_momentum_adjust_running_stats)
{
    const float mom = 0.1f;
    const int cases[][2] = {{4, 16}, {8, 8}}; /* N, b */
    for (int ci = 0; ci < 2; ci++)
        for (uint64_t seed = 1; seed <= 3; seed++)
            for (int warm = 0; warm <= 1; warm++) {
                const int N = cases[ci][0], b = cases[ci][1];
                dt_blobs *ds = default_blobs(seed);
                const int D = dt_blobs_dims(ds);
                dt_mlp *ref = blob_model(ds, 1, 32, mom, seed);
                dt_mlp *adj = blob_model(ds, 1, 32, dt_bn_momentum_per_micro(mom, N), seed);
                dt_mlp *raw = blob_model(ds, 1, 32, mom, seed);
                float *x = malloc(sizeof(float) * N * b * D);
                int32_t *y = malloc(sizeof(int32_t) * N * b);
                const size_t sbytes = dt_mlp_state_layout(ref)->numel * sizeof(float);
                if (warm) {
                    for (int s = 0; s < 30; s++) {
                        ck_dt(dt_blobs_batch(ds, DT_SPLIT_TRAIN, 1000 + s, N * b, x, y));
                        ck_dt(dt_mlp_forward(ref, x, y, N * b, NULL));
                    }
                    ck_dt(be->copy(be, dt_mlp_state(adj), dt_mlp_state(ref), sbytes, DT_COPY_D2D));
                    ck_dt(be->copy(be, dt_mlp_state(raw), dt_mlp_state(ref), sbytes, DT_COPY_D2D));
                }
                ck_dt(dt_blobs_batch(ds, DT_SPLIT_TRAIN, 0, N * b, x, y));
                ck_dt(dt_mlp_forward(ref, x, y, N * b, NULL));
                for (int k = 0; k < N; k++) {
                    ck_dt(dt_mlp_forward(adj, x + (size_t)k * b * D, y + k * b, b, NULL));
                    ck_dt(dt_mlp_forward(raw, x + (size_t)k * b * D, y + k * b, b, NULL));
                }
                double am, av, rm, rv;
                stats_distance(adj, ref, &am, &av);
                stats_distance(raw, ref, &rm, &rv);
                printf("running stats, %s, N=%d b=%d seed %d: distance to one batch of %d (mean, var): "
                       "adjusted %.4f %.4f, unadjusted %.4f %.4f\n",
                       warm ? "warm" : "cold", N, b, (int)seed, N * b, am, av, rm, rv);
                ck_assert_msg(am < 0.5 * rm && av < 0.5 * rv,
                              "adjusted momentum not closer: mean %.4g vs %.4g, var %.4g vs %.4g", am, rm, av, rv);
                free(x), free(y);
                dt_mlp_free(ref), dt_mlp_free(adj), dt_mlp_free(raw);
                dt_blobs_close(ds);
            }
}
END_TEST

/* The whole thing learns: SGD by hand (p -= lr * g) on blobs, then eval
 * mode (running statistics) on validation examples. */
START_TEST(test_mlp_learns_blobs)
{
    enum { B = 32, STEPS = 150, NV = 1000 };
    dt_blobs *ds = default_blobs(4);
    dt_mlp *m = blob_model(ds, 1, 32, 0.1f, 4);
    const int D = dt_blobs_dims(ds), K = dt_blobs_classes(ds);
    float x[B * 8], *xv = malloc(sizeof(float) * NV * D);
    int32_t y[B], yv[NV];
    const dt_paramset *ps = dt_mlp_layout(m);
    float first = 0, loss = 0;
    for (int s = 0; s < STEPS; s++) {
        ck_dt(dt_blobs_batch(ds, DT_SPLIT_TRAIN, (uint64_t)s, B, x, y));
        ck_dt(dt_mlp_zero_grad(m));
        ck_dt(dt_mlp_forward(m, x, y, B, &loss));
        ck_dt(dt_mlp_backward(m, 1.0f));
        if (s == 0) first = loss;
        ck_dt(be->axpy(be, dt_mlp_params(m), -0.1f, dt_mlp_grads(m), ps->numel));
    }
    ck_dt(dt_blobs_examples(ds, DT_SPLIT_VAL, 0, NV, xv, yv));
    dt_mlp_set_training(m, 0);
    float vloss;
    int ok;
    ck_dt(dt_mlp_forward(m, xv, yv, NV, &vloss));
    ck_dt(dt_mlp_accuracy(m, &ok));
    /* nearest center, the Bayes rule for equal unit covariances */
    const float *mu = dt_blobs_centers(ds);
    int bayes = 0;
    for (int i = 0; i < NV; i++) {
        int best = 0;
        double bd = 1e300;
        for (int k = 0; k < K; k++) {
            double d2 = 0;
            for (int d = 0; d < D; d++) d2 += (xv[i * D + d] - mu[k * D + d]) * (xv[i * D + d] - mu[k * D + d]);
            if (d2 < bd) bd = d2, best = k;
        }
        bayes += best == yv[i];
    }
    printf("mlp-bn on blobs: train loss %.3f -> %.3f, val loss %.3f, val accuracy %.3f (nearest center %.3f)\n", first,
           loss, vloss, (double)ok / NV, (double)bayes / NV);
    ck_assert(loss < 0.6f * first);
    ck_assert_int_ge(ok, bayes - NV / 20); /* within 5 points of the Bayes rule */
    free(xv);
    dt_mlp_free(m);
    dt_blobs_close(ds);
}
END_TEST

/* ---- blobs ------------------------------------------------------------------ */

START_TEST(test_blobs)
{
    enum { n = 4000 };
    dt_blobs_config bc;
    dt_blobs_config_default(&bc);
    ck_assert_int_eq(bc.classes, 4);
    ck_assert_int_eq(bc.dims, 8);
    bc.seed = 42;
    dt_blobs *a, *b2, *c;
    ck_dt(dt_blobs_open(&bc, &a));
    ck_dt(dt_blobs_open(&bc, &b2));
    bc.seed = 43;
    ck_dt(dt_blobs_open(&bc, &c));
    const int D = dt_blobs_dims(a), K = dt_blobs_classes(a);
    ck_assert_int_eq(D, 8);
    ck_assert_int_eq(K, 4);
    float *x1 = malloc(sizeof(float) * n * D), *x2 = malloc(sizeof(float) * n * D);
    int32_t *y1 = malloc(sizeof(int32_t) * n), *y2 = malloc(sizeof(int32_t) * n);
    /* determinism per seed */
    ck_dt(dt_blobs_batch(a, DT_SPLIT_TRAIN, 3, n, x1, y1));
    ck_dt(dt_blobs_batch(b2, DT_SPLIT_TRAIN, 3, n, x2, y2));
    ck_assert_mem_eq(x1, x2, sizeof(float) * n * D);
    ck_assert_mem_eq(y1, y2, sizeof(int32_t) * n);
    /* labels in range, roughly balanced (binomial std ~27 on 1000) */
    int count[4] = {0};
    for (int i = 0; i < n; i++) {
        ck_assert(y1[i] >= 0 && y1[i] < K);
        count[y1[i]]++;
    }
    for (int k = 0; k < K; k++) ck_assert_msg(abs(count[k] - n / K) < n / K / 10, "class %d: %d of %d", k, count[k], n);
    /* points scatter around their class center with unit noise */
    const float *mu = dt_blobs_centers(a);
    double ss = 0;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < D; d++) {
            ck_assert(isfinite(x1[i * D + d]));
            double e = x1[i * D + d] - mu[y1[i] * D + d];
            ss += e * e;
        }
    ck_assert(dt_test_close(ss / (n * D), 1.0, 0.05, 0));
    /* batches are slices of one numbered stream: 4 batches of 8 = batch 0 of 32 */
    ck_dt(dt_blobs_batch(a, DT_SPLIT_TRAIN, 0, 32, x1, y1));
    for (int k = 0; k < 4; k++) {
        ck_dt(dt_blobs_batch(a, DT_SPLIT_TRAIN, (uint64_t)k, 8, x2, y2));
        ck_assert_mem_eq(x2, x1 + k * 8 * D, sizeof(float) * 8 * D);
        ck_assert_mem_eq(y2, y1 + k * 8, sizeof(int32_t) * 8);
    }
    /* train and validation differ; another seed changes the points, not the task */
    ck_dt(dt_blobs_batch(a, DT_SPLIT_VAL, 0, 32, x2, y2));
    ck_assert(memcmp(x1, x2, sizeof(float) * 32 * D) != 0);
    ck_dt(dt_blobs_batch(c, DT_SPLIT_TRAIN, 0, 32, x2, y2));
    ck_assert(memcmp(x1, x2, sizeof(float) * 32 * D) != 0);
    ck_assert_mem_eq(dt_blobs_centers(a), dt_blobs_centers(c), sizeof(float) * K * D);
    /* configuration errors name the flag */
    dt_blobs *bad;
    dt_blobs_config_default(&bc);
    bc.classes = 1;
    ck_assert_int_eq(dt_blobs_open(&bc, &bad), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--blobs-classes"));
    dt_blobs_config_default(&bc);
    bc.dims = 0;
    ck_assert_int_eq(dt_blobs_config_validate(&bc), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--blobs-dims"));
    dt_blobs_config_default(&bc);
    bc.separation = NAN;
    ck_assert_int_eq(dt_blobs_config_validate(&bc), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--blobs-separation"));
    ck_assert_int_eq(dt_blobs_batch(a, DT_SPLIT_TRAIN, 0, 0, x1, y1), DT_ERR_INVALID);
    ck_assert_int_eq(dt_blobs_batch(a, DT_SPLIT_TRAIN, UINT64_MAX / 2, 4, x1, y1), DT_ERR_INVALID);
    free(x1), free(x2), free(y1), free(y2);
    dt_blobs_close(a), dt_blobs_close(b2), dt_blobs_close(c);
}
END_TEST

static Suite *mlp_suite(void)
{
    Suite *s = suite_create("mlp");
    TCase *ops = tcase_create("ops");
    tcase_add_checked_fixture(ops, setup, teardown);
    tcase_add_test(ops, test_bn_forward_reference);
    tcase_add_test(ops, test_bn_running_stats_by_hand);
    tcase_add_test(ops, test_bn_eval_uses_running_stats);
    tcase_add_test(ops, test_bn_backward_finite_differences);
    tcase_add_test(ops, test_bn_deterministic_any_threads);
    tcase_add_test(ops, test_relu);
    suite_add_tcase(s, ops);
    TCase *model = tcase_create("model");
    tcase_add_checked_fixture(model, setup, teardown);
    tcase_set_timeout(model, 60);
    tcase_add_test(model, test_mlp_layout);
    tcase_add_loop_test(model, test_mlp_finite_differences, 0, 2); /* without, with BatchNorm */
    tcase_add_test(model, test_mlp_eval_mode);
    tcase_add_test(model, test_mlp_errors_and_momentum_helper);
    tcase_add_test(model, test_mlp_learns_blobs);
    suite_add_tcase(s, model);
    TCase *acc = tcase_create("accumulation");
    tcase_add_checked_fixture(acc, setup, teardown);
    tcase_add_test(acc, test_accumulation_equivalence_without_bn);
    tcase_add_test(acc, test_bn_momentum_adjust_running_stats);
    suite_add_tcase(s, acc);
    TCase *data = tcase_create("blobs");
    tcase_add_test(data, test_blobs);
    suite_add_tcase(s, data);
    return s;
}

int main(void) { return dt_test_run(mlp_suite()); }
