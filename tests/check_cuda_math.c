/* check_cuda_math.c: the CUDA kernels' per-element math (lib/core/dt_math_hd.h,
 * compiled here by the C compiler as plain C, scalar) against the CPU
 * backend's ops, and dt_backend_create("cuda") without a usable device.
 * Runs in every build, with or without CUDA and a GPU.
 *
 * Tolerances: the kernels and the CPU backend share the header's formulas,
 * so the only differences are where the compiler fuses a multiply and an
 * add differently (the CPU loops are vectorized, these calls are scalar):
 * a few units in the last place. Values are compared with
 * |a - b| <= 1e-7 + 4e-7 |b| (about 4 ulp of float, whose unit roundoff is
 * 6e-8); ReLU, the conversions and the non-finite test have no rounding
 * at all and must match bit for bit. The launch-shape choices of
 * cuda/cuda_plan.h are checked for coverage and their stated limits. */
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "cpu_backend.h"
#include "cuda_plan.h"
#include "dt_half.h"
#include "dt_math_hd.h"
#include "testutil.h"

#define ATOL 1e-7
#define RTOL 4e-7

static dt_backend *be;

static void setup(void) { ck_dt(dt_backend_cpu_create(1, &be)); }
static void teardown(void) { dt_backend_destroy(be); }

static void fill(float *x, size_t n, uint64_t seed, float scale)
{
    dt_rng r;
    dt_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)dt_rng_normal(&r) * scale;
}

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#define ASSERT_NEAR(a, b, what, i)                                                                                    \
    ck_assert_msg(dt_test_close((a), (b), ATOL, RTOL), "%s[%zu]: header %.9g, cpu backend %.9g", (what), (size_t)(i), \
                  (double)(a), (double)(b))

/* ---- dt_backend_create("cuda") with no usable device -------------------------------- */

START_TEST(test_cuda_create_message)
{
    dt_backend *g = NULL;
    dt_status st = dt_backend_create("cuda", 1, &g);
    if (st == DT_OK) { /* a GPU is present: tests/check_cuda covers it */
        ck_assert_ptr_nonnull(g);
        ck_assert_str_eq(g->name, "cuda");
        dt_backend_destroy(g);
        return;
    }
    const char *msg = dt_last_error();
    ck_assert_ptr_null(g);
    ck_assert_int_eq(st, DT_ERR_UNSUPPORTED);
    ck_assert_msg(strncmp(msg, "--device cuda: ", 15) == 0, "message: %s", msg);
    ck_assert_msg(strchr(msg, '\n') == NULL, "message is not one line: %s", msg);
#ifdef DT_HAVE_CUDA
    ck_assert_msg(strstr(msg, "no CUDA device (cudaGetDeviceCount: ") != NULL, "message: %s", msg);
#else
    ck_assert_msg(strstr(msg, "built without CUDA") != NULL, "message: %s", msg);
#endif
}
END_TEST

/* ---- exp, tanh, GELU, ReLU ---------------------------------------------------------- */

/* The kernels call exp and tanh one element per thread; the CPU backend
 * calls the same code in `#pragma omp simd` loops, which GCC vectorizes
 * (and may contract differently): scalar calls against such a loop. */
START_TEST(test_exp_tanh)
{
    enum { NX = 11000 }; /* -90 .. 90 in steps of 0.0173: about 10405 */
    static float xs[NX], ex[NX], th[NX];
    size_t nx = 0;
    for (float x = -90.0f; x <= 90.0f && nx < NX; x += 0.0173f) xs[nx++] = x;
    ck_assert_uint_lt(nx, NX);
#pragma omp simd
    for (size_t i = 0; i < nx; i++) {
        ex[i] = dt__expf(xs[i]);
        th[i] = dt__tanhf(xs[i]);
    }
    for (size_t i = 0; i < nx; i++) {
        ASSERT_NEAR(dt__expf(xs[i]), ex[i], "expf", i);
        ASSERT_NEAR(dt__tanhf(xs[i]), th[i], "tanhf", i);
    }
    ck_assert_float_eq(dt__expf(-200.0f), 0.0f);
    ck_assert_float_eq(dt__expf(0.0f), 1.0f);
}
END_TEST

START_TEST(test_gelu)
{
    const size_t n = 4001;
    float *x = malloc(sizeof(float) * n), *dy = malloc(sizeof(float) * n);
    float *y = malloc(sizeof(float) * n), *dx = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = -12.0f + 24.0f * (float)i / (float)(n - 1);
    fill(dy, n, 1, 1);
    ck_dt(be->gelu_forward(be, y, x, n));
    ck_dt(be->gelu_backward(be, dx, NULL, x, dy, n));
    for (size_t i = 0; i < n; i++) {
        ASSERT_NEAR(dt__gelu(x[i]), y[i], "gelu", i);
        ASSERT_NEAR(dt__gelu_grad(x[i]) * dy[i], dx[i], "gelu backward", i);
    }
    free(x), free(dy), free(y), free(dx);
}
END_TEST

START_TEST(test_relu)
{
    const float xs[] = {-2.0f, -0.0f, 0.0f, 1e-30f, 3.5f, -INFINITY, INFINITY, NAN};
    const size_t n = sizeof xs / sizeof xs[0];
    float y[8], dx[8], dy[8];
    for (size_t i = 0; i < n; i++) dy[i] = (float)i + 0.5f;
    ck_dt(be->relu_forward(be, y, xs, n));
    ck_dt(be->relu_backward(be, dx, xs, dy, n));
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(bits(dt__relu(xs[i])), bits(y[i]));
        ck_assert_uint_eq(bits(dt__relu_grad(xs[i], dy[i])), bits(dx[i]));
    }
}
END_TEST

/* ---- optimizers ---------------------------------------------------------------------- */

#define NOPT 1000

START_TEST(test_adamw_lamb)
{
    float p[NOPT], g[NOPT], m[NOPT], v[NOPT], u[NOPT];
    fill(p, NOPT, 2, 1), fill(g, NOPT, 3, 1), fill(m, NOPT, 4, 0.1f), fill(v, NOPT, 5, 0.1f);
    for (int i = 0; i < NOPT; i++) v[i] = fabsf(v[i]);
    float p1[NOPT], m1[NOPT], v1[NOPT], m2[NOPT], v2[NOPT];
    memcpy(p1, p, sizeof p), memcpy(m1, m, sizeof m), memcpy(v1, v, sizeof v);
    memcpy(m2, m, sizeof m), memcpy(v2, v, sizeof v);
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, bc1 = 0.19f, bc2 = 0.0975f, gs = 0.5f;
    ck_dt(be->adamw_update(be, p1, g, m1, v1, NOPT, lr, b1, b2, eps, wd, bc1, bc2, gs));
    ck_dt(be->lamb_direction(be, u, p, g, m2, v2, NOPT, b1, b2, eps, wd, bc1, bc2, gs));
    for (int i = 0; i < NOPT; i++) {
        float mi = m[i], vi = v[i];
        float pi =
            dt__adamw(p[i], g[i] * gs, &mi, &vi, lr, b1, b2, 1.0f - b1, 1.0f - b2, 1.0f / bc1, 1.0f / bc2, eps, wd);
        ASSERT_NEAR(pi, p1[i], "adamw p", i);
        ASSERT_NEAR(mi, m1[i], "adamw m", i);
        ASSERT_NEAR(vi, v1[i], "adamw v", i);
        mi = m[i], vi = v[i];
        float ui = dt__adam_direction(g[i] * gs, &mi, &vi, b1, b2, 1.0f - b1, 1.0f - b2, 1.0f / bc1, 1.0f / bc2, eps) +
                   wd * p[i];
        ASSERT_NEAR(ui, u[i], "lamb u", i);
        ASSERT_NEAR(mi, m2[i], "lamb m", i);
    }
}
END_TEST

/* SGD in its three forms (momentum 0, first step, later steps) x nesterov. */
START_TEST(test_sgd)
{
    const float momentum = _i == 0 ? 0.0f : 0.9f;
    const int first = _i == 1;
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        float p[NOPT], g[NOPT], buf[NOPT], p1[NOPT], b1[NOPT];
        fill(p, NOPT, 6, 1), fill(g, NOPT, 7, 1), fill(buf, NOPT, 8, 1);
        memcpy(p1, p, sizeof p), memcpy(b1, buf, sizeof buf);
        ck_dt(be->sgd_update(be, p1, g, b1, NOPT, 0.05f, momentum, 1e-2f, 0.25f, nesterov, first));
        for (int i = 0; i < NOPT; i++) {
            float bi = buf[i];
            float pi = dt__sgd(p[i], g[i] * 0.25f, &bi, 0.05f, momentum, 1e-2f, nesterov, first);
            ASSERT_NEAR(pi, p1[i], "sgd p", i);
            ASSERT_NEAR(bi, b1[i], "sgd buf", i);
        }
    }
}
END_TEST

START_TEST(test_lars)
{
    float p[NOPT], g[NOPT], buf[NOPT], p1[NOPT], b1[NOPT];
    fill(p, NOPT, 9, 1), fill(g, NOPT, 10, 1), fill(buf, NOPT, 11, 1);
    memcpy(p1, p, sizeof p), memcpy(b1, buf, sizeof buf);
    const float lr = 0.1f, trust = 0.37f, momentum = 0.9f, wd = 5e-4f, gs = 2.0f;
    ck_dt(be->lars_update(be, p1, g, b1, NOPT, lr, trust, momentum, wd, gs));
    for (int i = 0; i < NOPT; i++) {
        float bi = buf[i];
        float pi = dt__lars(p[i], g[i] * gs, &bi, lr * trust, momentum, wd);
        ASSERT_NEAR(pi, p1[i], "lars p", i);
        ASSERT_NEAR(bi, b1[i], "lars buf", i);
    }
}
END_TEST

/* ---- conversions and the non-finite test: bit for bit ------------------------------------- */

START_TEST(test_half_to_float_all)
{
    for (uint32_t h = 0; h < 65536; h++) {
        ck_assert_msg(bits(dt__f16_to_float((uint16_t)h)) == bits(dt_f16_to_float((dt_f16)h)), "f16 %04x", h);
        ck_assert_msg(bits(dt__bf16_to_float((uint16_t)h)) == bits(dt_bf16_to_float((dt_bf16)h)), "bf16 %04x", h);
    }
}
END_TEST

/* Every upper half of a float's bits (sign, exponent, top of the mantissa)
 * with low halves that sit on and around each rounding boundary of f16
 * (bit 12 of the float mantissa for normals, higher bits for subnormals,
 * which the upper halves enumerate) and of bf16 (bit 15), plus random
 * patterns. */
START_TEST(test_float_to_half)
{
    static const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff,
                                    0x2000, 0x3000, 0x7fff, 0x8000, 0x8001, 0xffff};
    for (uint32_t hi = 0; hi < 65536; hi++)
        for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++) {
            float x = from_bits(hi << 16 | lows[k]);
            ck_assert_msg(dt__f16_from_float(x) == dt_f16_from_float(x), "f16 from %08x", hi << 16 | lows[k]);
            ck_assert_msg(dt__bf16_from_float(x) == dt_bf16_from_float(x), "bf16 from %08x", hi << 16 | lows[k]);
        }
    dt_rng r;
    dt_rng_seed(&r, 12);
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)dt_rng_u64(&r);
        float x = from_bits(u);
        ck_assert_msg(dt__f16_from_float(x) == dt_f16_from_float(x), "f16 from %08x", u);
        ck_assert_msg(dt__bf16_from_float(x) == dt_bf16_from_float(x), "bf16 from %08x", u);
    }
}
END_TEST

START_TEST(test_nonfinite)
{
    const float xs[] = {0.0f, -0.0f, 1.0f, -3e38f, 1e-45f, INFINITY, -INFINITY, NAN, -NAN};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        float x = xs[i];
        int nf = 0;
        ck_dt(be->unscale_check(be, &x, 1.0f, 1, &nf));
        ck_assert_int_eq(dt__float_nonfinite(xs[i]), nf);
    }
}
END_TEST

/* ---- launch shapes (cuda_plan.h) ------------------------------------------------------- */

/* Every row in exactly one non-empty chunk, the chunk count within its
 * limits, one chunk for small N, enough blocks for the SMs; issue 19's
 * shape. (That the two passes add the right numbers is the GPU's
 * test_colsums, against the CPU.) */
START_TEST(test_colsum_plan)
{
    const int Ns[] = {0, 1, 2, 31, 127, 128, 129, 1000, 4099, 8192, 65536, 1 << 20, 2147483647};
    const int Cs[] = {1, 31, 32, 33, 70, 768, 3072, 50257};
    const int sms[] = {0, 1, 24, 108, 132};
    for (size_t a = 0; a < sizeof Ns / sizeof Ns[0]; a++)
        for (size_t b = 0; b < sizeof Cs / sizeof Cs[0]; b++)
            for (size_t k = 0; k < sizeof sms / sizeof sms[0]; k++) {
                const int N = Ns[a], C = Cs[b];
                dt__colsum_plan p = dt__colsum_plan_for(N, C, sms[k]);
                ck_assert_int_ge(p.chunks, 1);
                ck_assert_int_le(p.chunks, DT__COLSUM_MAX_CHUNKS);
                if (N <= 0) continue;
                ck_assert_int_ge(p.rows, 1);
                ck_assert((long long)p.chunks * p.rows >= N);      /* covers every row */
                ck_assert((long long)(p.chunks - 1) * p.rows < N); /* no empty chunk */
                if (N < 2 * DT__COLSUM_MIN_ROWS) ck_assert_int_eq(p.chunks, 1);
                if (p.chunks > 1) ck_assert_int_ge(p.rows, DT__COLSUM_MIN_ROWS);
                /* enough blocks for the SMs when there are rows enough */
                long long blocks = (long long)((C + 31) / 32) * p.chunks, want = 2LL * (sms[k] > 0 ? sms[k] : 1);
                if ((long long)N >= want * DT__COLSUM_MIN_ROWS && want <= DT__COLSUM_MAX_CHUNKS)
                    ck_assert_msg(blocks >= want, "N %d C %d sms %d: %lld blocks", N, C, sms[k], blocks);
            }
    /* issue 19's case: C = 768 on 132 SMs, N = B*T = 8192 */
    dt__colsum_plan p = dt__colsum_plan_for(8192, 768, 132);
    ck_assert_int_eq(p.chunks, 11);
    ck_assert_int_eq(p.rows, 745);
}
END_TEST

/* Cross-entropy's arg-max: the kernel's reduction (256 threads striding
 * over the row, xor butterflies within each warp, warps in order), run
 * here with dt__argmax_better, finds the index the CPU backend's scan
 * finds (its `correct` flag is 1 exactly for that target) on rows with
 * ties, infinities, and NaNs at index 0, elsewhere or everywhere. */
static int emulate_argmax(const float *z, int V)
{
    enum { THREADS = 256, WARPS = THREADS / 32 };
    float mx[THREADS], wm[WARPS];
    int arg[THREADS], wa[WARPS];
    for (int t = 0; t < THREADS; t++) {
        mx[t] = -INFINITY, arg[t] = -1;
        for (int v = t; v < V; v += THREADS)
            if (dt__argmax_offered(z[v], v) && dt__argmax_better(z[v], v, mx[t], arg[t])) mx[t] = z[v], arg[t] = v;
    }
    for (int o = 16; o > 0; o >>= 1) {
        float nm[THREADS];
        int na[THREADS];
        for (int t = 0; t < THREADS; t++) {
            int p = t ^ o;
            int take = dt__argmax_better(mx[p], arg[p], mx[t], arg[t]);
            nm[t] = take ? mx[p] : mx[t], na[t] = take ? arg[p] : arg[t];
        }
        memcpy(mx, nm, sizeof mx), memcpy(arg, na, sizeof arg);
    }
    for (int w = 0; w < WARPS; w++) {
        for (int l = 1; l < 32; l++) /* every lane agrees */
            ck_assert(arg[32 * w + l] == arg[32 * w] && bits(mx[32 * w + l]) == bits(mx[32 * w]));
        wm[w] = mx[32 * w], wa[w] = arg[32 * w];
    }
    float m = wm[0];
    int a = wa[0];
    for (int w = 1; w < WARPS; w++)
        if (dt__argmax_better(wm[w], wa[w], m, a)) m = wm[w], a = wa[w];
    return a;
}

START_TEST(test_argmax_rule)
{
    enum { N = 64, V = 1000 };
    float *z = malloc(sizeof(float) * N * V), *loss = malloc(sizeof(float) * N);
    int32_t tgt[N];
    uint8_t corr[N];
    dt_rng r;
    dt_rng_seed(&r, 90);
    for (int i = 0; i < N; i++) {
        float *row = z + (size_t)i * V;
        fill(row, V, 91 + i, 1);
        const int kind = i % 8;
        const int a = (int)dt_rng_below(&r, V), b = (int)dt_rng_below(&r, V);
        if (kind == 1) row[a] = row[b] = 9.0f;          /* a tie */
        if (kind == 2) row[0] = NAN;                    /* NaN at index 0 wins */
        if (kind == 3) row[a] = NAN, row[b] = 9.0f;     /* a NaN elsewhere is skipped */
        if (kind == 4) row[a] = INFINITY, row[b] = NAN; /* +inf */
        if (kind == 5)                                  /* all NaN */
            for (int v = 0; v < V; v++) row[v] = NAN;
        if (kind == 6) /* all NaN but one */
            for (int v = 1; v < V; v++) row[v] = v == a ? -1.0f : NAN;
        if (kind == 7) row[0] = -INFINITY, row[a] = -NAN, row[b] = -INFINITY; /* -inf ties, NaN */
        tgt[i] = emulate_argmax(row, V);
    }
    ck_dt(be->crossentropy_forward_backward(be, loss, corr, NULL, z, tgt, N, V, V, 1.0f));
    for (int i = 0; i < N; i++) ck_assert_msg(corr[i] == 1, "row %d (kind %d): emulated arg-max %d", i, i % 8, tgt[i]);
    free(z), free(loss);
}
END_TEST

static Suite *cuda_math_suite(void)
{
    Suite *s = suite_create("cuda_math");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_cuda_create_message);
    tcase_add_test(tc, test_exp_tanh);
    tcase_add_test(tc, test_gelu);
    tcase_add_test(tc, test_relu);
    tcase_add_test(tc, test_adamw_lamb);
    tcase_add_loop_test(tc, test_sgd, 0, 3);
    tcase_add_test(tc, test_lars);
    tcase_add_test(tc, test_half_to_float_all);
    tcase_add_test(tc, test_float_to_half);
    tcase_add_test(tc, test_nonfinite);
    tcase_add_test(tc, test_colsum_plan);
    tcase_add_test(tc, test_argmax_rule);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(cuda_math_suite()); }
