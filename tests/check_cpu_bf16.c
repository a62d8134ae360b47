/* check_cpu_bf16.c: the CPU backend's bf16 GEMMs (cpu_gemm.c, cpu_dnnl.c)
 * against a double-precision reference, and their invariants.
 *
 * With set_gemm_inputs(DT_BF16) and bf16 values in A and B, every product
 * is exact in FP32 (8-bit mantissas multiply into 16 bits), so the only
 * error is FP32 summation of K products, the alpha scaling and the beta
 * add. Higham's bound for a sum of n terms in any order is
 * gamma_n * sum |term|, gamma_n = n u / (1 - n u), u = 2^-24; two more
 * roundings (alpha, then + beta C) give
 *   |C - ref| <= gamma_{K+2} (|alpha| sum_k |a_ik b_kj| + |beta| |C0_ij|),
 * which the test asserts element by element, for whatever summation order
 * the library at hand uses (oneDNN's AMX or AVX512-BF16 kernels, or
 * OpenBLAS's FP32 GEMM where oneDNN has no real bf16 kernel). Shapes:
 * square, tall, wide, K = 1 and odd sizes, all four transposes, leading
 * dimensions above the width, alpha != 1, beta 0 and 1, a split into
 * blocks (2 threads) and one block. Invariants: the result is bit-identical
 * for 1 and 2 workers (the split follows --threads only), and reading B
 * from a registered bf16 shadow gives the same bits as casting it.
 * The fused passes (round_bf16, gelu_forward_bf16, gelu_backward_bf16)
 * equal the unfused ops they replace (round, gelu, round, cast) bit for bit, which
 * they must: the models use either, and their runs must agree exactly. */
#include <math.h>
#include <string.h>

#include "cpu_backend.h"
#include "dt_half.h"
#include "testutil.h"

static dt_backend *be;

static void setup(void) { ck_dt(dt_backend_cpu_create(2, &be)); }
static void teardown(void) { dt_backend_destroy(be); }

/* n bf16 values (as floats) of scale ~1, from seed. */
static void fill_bf16(float *x, size_t n, uint64_t seed)
{
    dt_rng r;
    dt_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = dt_bf16_to_float(dt_bf16_from_float((float)dt_rng_normal(&r)));
}

typedef struct shape {
    int M, N, K, ta, tb, pad;
    float alpha, beta;
} shape;

/* C = alpha op(A) op(B) + beta C on the backend, checked against double. */
static void check_shape(const shape *s, int shadow)
{
    const int M = s->M, N = s->N, K = s->K;
    const int lda = (s->ta ? M : K) + s->pad, ldb = (s->tb ? K : N) + s->pad, ldc = N + s->pad;
    const size_t na = (size_t)(s->ta ? K : M) * lda, nb = (size_t)(s->tb ? N : K) * ldb, nc = (size_t)M * ldc;
    float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *C = malloc(nc * sizeof *C);
    float *C0 = malloc(nc * sizeof *C0), *C2 = malloc(nc * sizeof *C2);
    uint16_t *B16 = malloc(nb * sizeof *B16);
    fill_bf16(A, na, 11 + (uint64_t)M), fill_bf16(B, nb, 29 + (uint64_t)N), fill_bf16(C0, nc, 47);
    dt_bf16_from_float_array(B16, B, nb);
    ck_dt(be->set_gemm_inputs(be, DT_BF16));
    if (shadow) ck_dt(be->set_gemm_shadow(be, B, nb, B16, DT_BF16));
    memcpy(C, C0, nc * sizeof *C);
    ck_dt(be->gemm(be, s->ta, s->tb, M, N, K, s->alpha, A, lda, B, ldb, s->beta, C, ldc));
    /* the same with one worker: the same bits */
    memcpy(C2, C0, nc * sizeof *C2);
    ck_dt(be->set_workers(be, 1));
    ck_dt(be->gemm(be, s->ta, s->tb, M, N, K, s->alpha, A, lda, B, ldb, s->beta, C2, ldc));
    ck_dt(be->set_workers(be, 2));
    if (shadow) ck_dt(be->set_gemm_shadow(be, B, 0, NULL, DT_F32));
    ck_dt(be->set_gemm_inputs(be, DT_F32));
    const double u = ldexp(1.0, -24), n = K + 2, gamma = n * u / (1 - n * u);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const double a = s->ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                const double b = s->tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                ref += a * b;
                mag += fabs(a * b);
            }
            const double c0 = C0[(size_t)i * ldc + j];
            ref = s->alpha * ref + s->beta * c0;
            const double bound = gamma * (fabs(s->alpha) * mag + fabs(s->beta) * fabs(c0));
            const double got = C[(size_t)i * ldc + j];
            ck_assert_msg(fabs(got - ref) <= bound, "%dx%dx%d ta %d tb %d: C[%d,%d] = %.9g, ref %.9g, bound %.3g", M, N,
                          K, s->ta, s->tb, i, j, got, ref, bound);
            ck_assert_msg(memcmp(&C[(size_t)i * ldc + j], &C2[(size_t)i * ldc + j], sizeof(float)) == 0,
                          "%dx%dx%d: C[%d,%d] differs between 2 workers and 1", M, N, K, i, j);
        }
    free(A), free(B), free(C), free(C0), free(C2), free(B16);
}

START_TEST(test_bf16_gemm)
{
    static const shape shapes[] = {
        {64, 64, 64, 0, 1, 0, 1.0f, 0.0f},   {256, 96, 384, 0, 1, 0, 1.0f, 1.0f},
        {96, 256, 128, 0, 0, 3, 1.0f, 0.0f}, {130, 70, 33, 1, 0, 5, 0.5f, 1.0f},
        {70, 130, 1, 1, 1, 0, 1.0f, 0.0f},   {1, 300, 64, 0, 1, 1, 1.0f, 1.0f},
        {300, 1, 64, 0, 0, 0, 2.0f, 0.0f},   {512, 384, 384, 1, 0, 0, 1.0f, 1.0f},
        {17, 19, 23, 1, 1, 2, -1.0f, 1.0f},  {1024, 128, 96, 0, 1, 0, 0.125f, 0.0f},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        check_shape(&shapes[i], 0);
        check_shape(&shapes[i], 1);
    }
    printf("check_cpu_bf16: bf16 GEMMs ran on %s\n", dt__cpu_dnnl_probe() ? dt__cpu_dnnl_impl() : "OpenBLAS (FP32)");
}
END_TEST

/* The shadow gives the same bits as the cast. */
START_TEST(test_shadow_same_bits)
{
    const int M = 200, N = 150, K = 96;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K);
    float *C1 = calloc((size_t)M * N, sizeof(float)), *C2 = calloc((size_t)M * N, sizeof(float));
    uint16_t *B16 = malloc(sizeof(uint16_t) * N * K);
    fill_bf16(A, (size_t)M * K, 3), fill_bf16(B, (size_t)N * K, 5);
    dt_bf16_from_float_array(B16, B, (size_t)N * K);
    ck_dt(be->set_gemm_inputs(be, DT_BF16));
    ck_dt(be->gemm(be, 0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C1, N));
    ck_dt(be->set_gemm_shadow(be, B, (size_t)N * K, B16, DT_BF16));
    ck_dt(be->gemm(be, 0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C2, N));
    ck_dt(be->set_gemm_shadow(be, B, 0, NULL, DT_F32));
    ck_dt(be->set_gemm_inputs(be, DT_F32));
    ck_assert_int_eq(memcmp(C1, C2, sizeof(float) * M * N), 0);
    free(A), free(B), free(C1), free(C2), free(B16);
}
END_TEST

/* n values spanning GELU's regions (|x| up to ~12: tanh's clamp at 10 is
 * crossed), not bf16 yet, so the fused input rounding is exercised; a few
 * special values at the front. */
static void fill_gelu_inputs(float *x, size_t n, uint64_t seed)
{
    dt_rng r;
    dt_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)(4.0 * dt_rng_normal(&r));
    const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 12.0f, -12.0f, 3.0e38f, -3.0e38f, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof special / sizeof special[0] && i < n; i++) x[i] = special[i];
}

START_TEST(test_gelu_fused_same_bits)
{
    const size_t sizes[] = {1, 15, 17, 1000, 40000, 100003}; /* tails, one thread, two threads */
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const size_t n = sizes[si];
        float *x1 = malloc(n * sizeof(float)), *x2 = malloc(n * sizeof(float));
        float *y1 = malloc(n * sizeof(float)), *y2 = malloc(n * sizeof(float));
        float *d1 = malloc(n * sizeof(float)), *d2 = malloc(n * sizeof(float));
        uint16_t *h1 = malloc(n * sizeof(uint16_t)), *h2 = malloc(n * sizeof(uint16_t));
        fill_gelu_inputs(x1, n, 7 + n);
        fill_gelu_inputs(d1, n, 9 + n);
        memcpy(x2, x1, n * sizeof(float));
        memcpy(d2, d1, n * sizeof(float));
        /* round_bf16 against round then cast */
        memcpy(y1, x1, n * sizeof(float));
        memcpy(y2, x1, n * sizeof(float));
        ck_dt(be->round(be, y1, DT_BF16, n));
        ck_dt(be->cast(be, h1, DT_BF16, y1, DT_F32, n));
        ck_dt(be->round_bf16(be, y2, h2, n));
        ck_assert_msg(memcmp(y1, y2, n * sizeof(float)) == 0 && memcmp(h1, h2, n * sizeof(uint16_t)) == 0,
                      "n %zu: round_bf16 differs from round and cast", n);
        for (int round_in = 0; round_in <= 1; round_in++) {
            /* unfused: round(x) when round_in, y = gelu(x), round(y), cast(y) */
            if (round_in) ck_dt(be->round(be, x1, DT_BF16, n));
            ck_dt(be->gelu_forward(be, y1, x1, n));
            ck_dt(be->round(be, y1, DT_BF16, n));
            ck_dt(be->cast(be, h1, DT_BF16, y1, DT_F32, n));
            ck_dt(be->gelu_forward_bf16(be, y2, h2, x2, round_in, n));
            ck_assert_msg(memcmp(x1, x2, n * sizeof(float)) == 0, "n %zu: the rounded inputs differ", n);
            ck_assert_msg(memcmp(y1, y2, n * sizeof(float)) == 0, "n %zu round_in %d: outputs differ", n, round_in);
            ck_assert_msg(memcmp(h1, h2, n * sizeof(uint16_t)) == 0, "n %zu: bf16 copies differ", n);
            memset(y2, 0, n * sizeof(float));
            ck_dt(be->gelu_forward_bf16(be, y2, NULL, x2, round_in, n)); /* without the copy */
            ck_assert(memcmp(y1, y2, n * sizeof(float)) == 0);
        }
        /* unfused backward: round(d), d = gelu'(x) * d, round(d), cast(d) */
        ck_dt(be->round(be, d1, DT_BF16, n));
        ck_dt(be->gelu_backward(be, d1, NULL, x1, d1, n));
        ck_dt(be->round(be, d1, DT_BF16, n));
        ck_dt(be->cast(be, h1, DT_BF16, d1, DT_F32, n));
        float *d3 = malloc(n * sizeof(float)), *d4 = malloc(n * sizeof(float)), *y3 = malloc(n * sizeof(float));
        memcpy(d3, d2, n * sizeof(float));
        memcpy(d4, d2, n * sizeof(float));
        ck_dt(be->gelu_backward_bf16(be, d2, h2, NULL, x2, n));
        ck_dt(be->gelu_backward_bf16(be, d3, NULL, NULL, x2, n));
        ck_assert_msg(memcmp(d1, d2, n * sizeof(float)) == 0, "n %zu: backward outputs differ", n);
        ck_assert_msg(memcmp(h1, h2, n * sizeof(uint16_t)) == 0, "n %zu: backward bf16 copies differ", n);
        ck_assert(memcmp(d1, d3, n * sizeof(float)) == 0);
        /* with the forward's rounded output from the same pass (y1: round(gelu(x)) above) */
        ck_dt(be->gelu_backward_bf16(be, d4, h2, y3, x2, n));
        ck_assert(memcmp(d1, d4, n * sizeof(float)) == 0 && memcmp(h1, h2, n * sizeof(uint16_t)) == 0);
        ck_assert_msg(memcmp(y1, y3, n * sizeof(float)) == 0, "n %zu: the backward's forward value differs", n);
        free(x1), free(x2), free(y1), free(y2), free(y3), free(d1), free(d2), free(d3), free(d4), free(h1), free(h2);
    }
}
END_TEST

static Suite *bf16_suite(void)
{
    Suite *s = suite_create("cpu_bf16");
    TCase *tc = tcase_create("gemm");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bf16_gemm);
    tcase_add_test(tc, test_shadow_same_bits);
    tcase_add_test(tc, test_gelu_fused_same_bits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(bf16_suite()); }
