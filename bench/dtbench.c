/* dtbench.c: benchmarks that print a figure and its ratio to a reference
 * measured in the same run.
 *
 *   dtbench gemm  [--threads N]   cblas_sgemm peak (GFLOP/s) on square sizes
 *   dtbench gemm  --device cuda   cuBLAS peak through be->gemm on 4096^3 and
 *       8192^3: exact FP32, TF32 allowed, and bf16 / fp16 inputs with FP32
 *       accumulation (be->set_gemm_inputs) (GFLOP/s)
 *   dtbench gelu  [--device cuda] [--n N] [--iters R]
 *       FP32 GELU (the table op) against the f16 / bf16 half2 kernel
 *       (dt__cuda_gelu_forward_half) on N elements: elements/s, GB/s (bytes
 *       read + written), half / FP32 in elements/s (goal >= 1.8) and each
 *       kernel as a fraction of the D2D copy bandwidth (be->copy of the same
 *       bytes) measured in the same run (goal >= 0.80 for the half kernels)
 *   dtbench pipeline [--pipeline-model-parallel-size P] [--num-layers L]
 *                 [--hidden-size C] [--pipeline-split N,N] [--steps S]
 *                 [--micro-batch-size B] [--seq-length T] [--trace-dir DIR]
 *       under mpirun: every pipeline schedule for m = 2, 4, 8, 16; step
 *       time, measured bubble per stage (dt_trace_stats.h) against
 *       (p-1)/(m+p-1), peak activation bytes and weight versions per stage
 *   dtbench simval, dtbench simspeed: the simulator's validation matrix and
 *       speed (bench/simval.c)
 *   dtbench bubbles [--skip N] TRACE...
 *       one line per dtrain trace file: its stage's mean bubble and more
 *   dtbench train [--threads N] [--model small] [--micro-batch-size 16]
 *                 [--seq-length T] [--steps S] [--warmup W]
 *                 [--device cpu|cuda] [--bf16|--fp16]
 *       trains the model (forward, backward, AdamW step) on random tokens and
 *       prints tokens/s, model FLOPs per token (6N + 12LCT), achieved
 *       GFLOP/s, the GEMM peak measured in the same run (sgemm at the same
 *       thread count on the CPU; on the GPU cuBLAS through be->gemm in the
 *       mode the run's GEMMs use: FP32, or bf16 / fp16 inputs with
 *       --bf16 / --fp16), and their ratio (MFU against this machine's peak).
 *
 * The GPU commands go through the dt_backend table and cuda/dt_cuda.h only
 * (no #ifdef): without CUDA or without a device they print one line naming
 * the problem and exit 1, or 77 with --skip-no-device (for scripts). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "dt_cuda.h"
#include "dtrain.h"
#include "../programs/args.h"

int dt_bench_simval(int argc, char **argv);   /* bench/simval.c */
int dt_bench_simspeed(int argc, char **argv); /* bench/simval.c */
int dt_bench_viz(int argc, char **argv);      /* bench/vizbench.c (vizbench_none.c without SDL2) */

static void die(const char *what)
{
    const char *why = dt_last_error();
    if (why[0]) fprintf(stderr, "dtbench: %s: %s\n", what, why);
    else fprintf(stderr, "dtbench: %s\n", what); /* a failed malloc here: no library message */
    exit(1);
}

/* Best GFLOP/s of cblas_sgemm over square sizes with OpenBLAS's own
 * threading at `threads` threads (the backend keeps OpenBLAS single-threaded
 * and splits GEMMs itself, so the count is set here and restored). */
static double sgemm_peak(int threads, int verbose)
{
    openblas_set_num_threads(threads);
    static const int sizes[] = {1024, 1536, 2048};
    double best = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
        if (!a || !b || !c) {
            fprintf(stderr, "dtbench: out of memory for the %d x %d sgemm peak\n", n, n);
            exit(1);
        }
        for (long i = 0; i < (long)n * n; i++) a[i] = (float)(i % 17) * 0.01f, b[i] = (float)(i % 13) * 0.01f;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double flops = 2.0 * n * n * n;
        int reps = (int)(3e10 / flops) + 1;
        double sbest = 0;
        for (int r = 0; r < 3; r++) {
            int64_t t0 = dt_time_ns();
            for (int k = 0; k < reps; k++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            double g = flops * reps / ((dt_time_ns() - t0) * 1e-9) / 1e9;
            if (g > sbest) sbest = g;
        }
        if (verbose) printf("  sgemm %5d x %5d x %5d   %8.1f GFLOP/s\n", n, n, n, sbest);
        if (sbest > best) best = sbest;
        free(a), free(b), free(c);
    }
    openblas_set_num_threads(1);
    return best;
}

static int cmd_gemm(int threads)
{
    dt_backend *be;
    if (dt_backend_create("cpu", threads, &be) != DT_OK) die("--threads");
    printf("# dtbench gemm: cblas_sgemm (OpenBLAS), %d thread(s)\n", be->threads);
    double peak = sgemm_peak(be->threads, 1);
    printf("peak_gflops %.1f\n", peak);
    dt_backend_destroy(be);
    return 0;
}

/* ---- the GPU (dt_backend "cuda" and cuda/dt_cuda.h) ------------------------ */

/* Exit status when CUDA or a device is missing: 1, or 77 (skipped) with
 * --skip-no-device. */
static int no_device_status = 1;

/* The CUDA backend, or one line naming the problem and exit: 1 (77 with
 * --skip-no-device) when the build has no CUDA or no device is usable
 * (DT_ERR_UNSUPPORTED), 1 on any other failure. */
static dt_backend *gpu_backend(const char *cmd)
{
    dt_backend *be;
    dt_status st = dt_backend_create("cuda", 0, &be);
    if (st != DT_OK) {
        fprintf(stderr, "dtbench %s: %s\n", cmd, dt_last_error());
        exit(st == DT_ERR_UNSUPPORTED ? no_device_status : 1);
    }
    return be;
}

static void check(dt_status st, const char *what)
{
    if (st != DT_OK) die(what);
}

/* A figure against its goal, on one line ending in PASS or BELOW (what
 * tests/gpu/device-check.sh collects). */
static void goal_line(const char *key, double value, double goal, const char *note)
{
    printf("%-28s %8.3f   goal >= %-5g %-5s%s%s\n", key, value, goal, value >= goal ? "PASS" : "BELOW",
           note ? "  " : "", note ? note : "");
}

typedef dt_status (*gpu_op)(dt_backend *be, void *ctx);

/* Seconds per call: `warm` untimed calls, then the best of 3 trials of
 * *reps calls, each trial bracketed by be->synchronize (ops are
 * asynchronous on the GPU). *reps <= 0: chosen from one timed call so that
 * a trial takes about 0.1 s (5 to 2000 calls). */
static double gpu_time(dt_backend *be, gpu_op op, void *ctx, int warm, int *reps, const char *what)
{
    for (int i = 0; i < warm; i++) check(op(be, ctx), what);
    check(be->synchronize(be), "synchronize");
    if (*reps <= 0) {
        int64_t t0 = dt_time_ns();
        check(op(be, ctx), what);
        check(be->synchronize(be), "synchronize");
        double one = (dt_time_ns() - t0) * 1e-9, r = 0.1 / (one > 1e-7 ? one : 1e-7);
        *reps = r < 5 ? 5 : r > 2000 ? 2000 : (int)r;
    }
    double best = 1e30;
    for (int t = 0; t < 3; t++) {
        int64_t t0 = dt_time_ns();
        for (int i = 0; i < *reps; i++) check(op(be, ctx), what);
        check(be->synchronize(be), "synchronize");
        double sec = (dt_time_ns() - t0) * 1e-9 / *reps;
        if (sec < best) best = sec;
    }
    return best;
}

/* Deterministic inputs in [lo, hi) without a host RNG per element. */
static float bench_value(size_t i, float lo, float hi)
{
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(i >> 32) * 40503u;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    return lo + (hi - lo) * (float)(h >> 8) * 0x1p-24f;
}

typedef struct gemm_ctx {
    int n;
    const float *a, *b;
    float *c;
} gemm_ctx;

static dt_status op_gemm(dt_backend *be, void *p)
{
    gemm_ctx *g = p;
    return be->gemm(be, 0, 0, g->n, g->n, g->n, 1.0f, g->a, g->n, g->b, g->n, 0.0f, g->c, g->n);
}

static const int gpu_gemm_sizes[] = {4096, 8192};

/* How the GPU runs a GEMM: exact FP32, FP32 with TF32 allowed
 * (dt__cuda_set_tf32), or 16-bit inputs with FP32 accumulation
 * (be->set_gemm_inputs: the backend casts A and B, then tensor cores). */
typedef enum gemm_kind { GEMM_FP32 = 0, GEMM_TF32, GEMM_BF16, GEMM_FP16 } gemm_kind;
static const char *const gemm_kind_name[] = {"fp32", "tf32", "bf16", "fp16"};

/* Put the backend in that GEMM mode (0), or 1 when it has no
 * set_gemm_inputs for the 16-bit kinds. */
static int gpu_gemm_mode(dt_backend *be, gemm_kind k)
{
    if ((k == GEMM_BF16 || k == GEMM_FP16) && !be->set_gemm_inputs) return 1;
    check(dt__cuda_set_tf32(be, k == GEMM_TF32), "TF32 setting");
    if (be->set_gemm_inputs)
        check(be->set_gemm_inputs(be, k == GEMM_BF16 ? DT_BF16 : k == GEMM_FP16 ? DT_F16 : DT_F32), "GEMM inputs");
    return 0;
}

/* Best GFLOP/s of be->gemm (cuBLAS) on the square sizes in mode k (the
 * backend is left in that mode); 0 when the backend lacks the mode. The
 * operands are multiples of 1/64 in [-1, 1): exact in every mode, so the
 * 16-bit modes' promise holds (their casts are counted in the time). */
static double gpu_gemm_peak(dt_backend *be, gemm_kind k, int verbose)
{
    if (gpu_gemm_mode(be, k)) {
        if (verbose) printf("  cublas %-4s n/a: this backend has no set_gemm_inputs\n", gemm_kind_name[k]);
        return 0;
    }
    const int nmax = gpu_gemm_sizes[sizeof gpu_gemm_sizes / sizeof gpu_gemm_sizes[0] - 1];
    const size_t nn = (size_t)nmax * nmax;
    float *h = malloc(nn * sizeof(float));
    if (!h) die("out of memory");
    for (size_t i = 0; i < nn; i++) h[i] = floorf(bench_value(i, -64.0f, 64.0f)) / 64.0f;
    void *a, *b, *c;
    check(be->alloc(be, nn * sizeof(float), &a), "alloc");
    check(be->alloc(be, nn * sizeof(float), &b), "alloc");
    check(be->alloc(be, nn * sizeof(float), &c), "alloc");
    check(be->copy(be, a, h, nn * sizeof(float), DT_COPY_H2D), "copy");
    check(be->copy(be, b, h, nn * sizeof(float), DT_COPY_H2D), "copy");
    free(h);
    double best = 0;
    for (size_t s = 0; s < sizeof gpu_gemm_sizes / sizeof gpu_gemm_sizes[0]; s++) {
        gemm_ctx g = {gpu_gemm_sizes[s], a, b, c};
        int reps = 0;
        double sec = gpu_time(be, op_gemm, &g, 2, &reps, "gemm");
        double gf = 2.0 * g.n * g.n * g.n / sec / 1e9;
        if (verbose)
            printf("  cublas %-4s %5d x %5d x %5d   %9.1f GFLOP/s   (%d calls per trial)\n", gemm_kind_name[k], g.n,
                   g.n, g.n, gf, reps);
        if (gf > best) best = gf;
    }
    be->free(be, a), be->free(be, b), be->free(be, c);
    return best;
}

static int cmd_gemm_gpu(void)
{
    dt_backend *be = gpu_backend("gemm");
    printf("# dtbench gemm --device cuda: cuBLAS through be->gemm (cublasGemmEx, FP32 buffers in and out), C = A B "
           "on square sizes; best of 3 trials after 2 warm-up calls\n");
    printf("# fp32: CUBLAS_COMPUTE_32F (exact FP32, the backend's default); tf32: CUBLAS_COMPUTE_32F_FAST_TF32 "
           "(dt__cuda_set_tf32); bf16/fp16: be->set_gemm_inputs, the backend casts A and B to 16 bits (counted) and "
           "accumulates in FP32 on tensor cores (the --bf16/--fp16 training path)\n");
    double p[4];
    for (int k = 0; k < 4; k++) p[k] = gpu_gemm_peak(be, (gemm_kind)k, 1);
    gpu_gemm_mode(be, GEMM_FP32);
    for (int k = 0; k < 4; k++)
        if (p[k] > 0) printf("peak_gflops_%s %.1f\n", gemm_kind_name[k], p[k]);
    printf("tf32_vs_fp32 %.2f\n", p[GEMM_TF32] / p[GEMM_FP32]);
    if (p[GEMM_BF16] > 0) printf("bf16_vs_fp32 %.2f\n", p[GEMM_BF16] / p[GEMM_FP32]);
    dt_backend_destroy(be);
    return 0;
}

typedef struct gelu_ctx {
    void *out;
    const void *in;
    size_t n, bytes;
    dt_dtype dtype;
} gelu_ctx;

static dt_status op_copy(dt_backend *be, void *p)
{
    gelu_ctx *g = p;
    return be->copy(be, g->out, g->in, g->bytes, DT_COPY_D2D);
}

static dt_status op_gelu_f32(dt_backend *be, void *p)
{
    gelu_ctx *g = p;
    return be->gelu_forward(be, g->out, g->in, g->n);
}

static dt_status op_gelu_half(dt_backend *be, void *p)
{
    gelu_ctx *g = p;
    return dt__cuda_gelu_forward_half(be, g->out, g->in, g->dtype, g->n);
}

/* Elements of got[] outside |got - want| <= atol + rtol_x |x| + rtol |want|;
 * *maxerr = the largest |got - want|. */
static size_t count_wrong(const float *got, const float *want, const float *x, size_t n, double atol, double rtol_x,
                          double rtol, double *maxerr)
{
    size_t bad = 0;
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= atol + rtol_x * fabs(x[i]) + rtol * fabs(want[i]))) bad++; /* NaN counts */
        if (e > m || e != e) m = e;
    }
    *maxerr = m;
    return bad;
}

static void gelu_row(const char *name, int reps, double sec, size_t n, size_t bytes_moved, double copy_gbs)
{
    double gbs = bytes_moved / sec / 1e9;
    printf("%-12s %8d %10.1f %10.2f %9.1f", name, reps, sec * 1e6, n / sec / 1e9, gbs);
    if (copy_gbs > 0) printf(" %8.3f", gbs / copy_gbs);
    printf("\n");
}

/* FP32 GELU (the table op) against dt__cuda_gelu_forward_half in f16 and
 * bf16 on n elements, each against a D2D copy of the bytes it reads. The
 * results are checked: the FP32 GPU GELU against the CPU backend's (1e-6 +
 * 1e-5 relative, check_cuda's tolerance), the half outputs against the FP32
 * GPU GELU within what rounding the input and the output to the half
 * format allows, 2u(|x| + |y|) + 1e-6 with u = 2^-11 (f16) or 2^-8 (bf16)
 * (GELU's slope is at most 1.13). Exit 1 if any element is outside. */
static int cmd_gelu(int64_t n64, int iters)
{
    dt_backend *be = gpu_backend("gelu");
    const size_t n = (size_t)n64;
    float *hx = malloc(n * sizeof(float)), *hy = malloc(n * sizeof(float)), *hr = malloc(n * sizeof(float));
    if (!hx || !hy || !hr) die("out of memory");
    for (size_t i = 0; i < n; i++) hx[i] = bench_value(i, -6.0f, 6.0f);
    void *x32, *y32, *x16, *y16;
    check(be->alloc(be, n * 4, &x32), "alloc");
    check(be->alloc(be, n * 4, &y32), "alloc");
    check(be->alloc(be, n * 2, &x16), "alloc");
    check(be->alloc(be, n * 2, &y16), "alloc");
    check(be->copy(be, x32, hx, n * 4, DT_COPY_H2D), "copy");

    const int warm = 3;
    printf("# dtbench gelu --device cuda: GELU (tanh approximation) on n = %zu elements in [-6, 6)\n", n);
    printf("# per kernel: %d warm-up launches, then the best of 3 trials of R launches, each bracketed by "
           "be->synchronize\n", warm);
    printf("# GB/s = (bytes read + bytes written) / time: 8 bytes per element in FP32, 4 in f16/bf16; copy = "
           "be->copy DT_COPY_D2D of the same bytes, counted the same way\n");
    printf("%-12s %8s %10s %10s %9s %8s\n", "kernel", "R", "us/launch", "Gelem/s", "GB/s", "of_copy");

    gelu_ctx g = {y32, x32, n, n * 4, DT_F32};
    int r_c32 = iters, r_g32 = iters, r_c16 = iters, r_h[2] = {iters, iters};
    double t_c32 = gpu_time(be, op_copy, &g, warm, &r_c32, "D2D copy");
    double t_g32 = gpu_time(be, op_gelu_f32, &g, warm, &r_g32, "FP32 GELU");
    check(be->copy(be, hy, y32, n * 4, DT_COPY_D2H), "copy");
    g = (gelu_ctx){y16, x16, n, n * 2, DT_F16};
    double t_c16 = gpu_time(be, op_copy, &g, warm, &r_c16, "D2D copy");
    const double c32 = 2.0 * n * 4 / t_c32 / 1e9, c16 = 2.0 * n * 2 / t_c16 / 1e9;

    static const dt_dtype types[2] = {DT_F16, DT_BF16};
    static const char *const tname[2] = {"gelu_f16", "gelu_bf16"};
    double t_h[2];
    size_t wrong[2];
    double maxerr[2];
    for (int k = 0; k < 2; k++) {
        check(be->cast(be, x16, types[k], x32, DT_F32, n), "cast");
        g = (gelu_ctx){y16, x16, n, n * 2, types[k]};
        t_h[k] = gpu_time(be, op_gelu_half, &g, warm, &r_h[k], tname[k]);
        /* widen the half result into y32 (the FP32 result is on the host already) and bring it back */
        check(be->cast(be, y32, DT_F32, y16, types[k], n), "cast");
        check(be->copy(be, hr, y32, n * 4, DT_COPY_D2H), "copy");
        double u = types[k] == DT_F16 ? 0x1p-11 : 0x1p-8;
        wrong[k] = count_wrong(hr, hy, hx, n, 1e-6, 2 * u, 2 * u, &maxerr[k]);
    }

    gelu_row("copy_f32", r_c32, t_c32, n, n * 8, 0);
    gelu_row("gelu_f32", r_g32, t_g32, n, n * 8, c32);
    gelu_row("copy_16bit", r_c16, t_c16, n, n * 4, 0);
    for (int k = 0; k < 2; k++) gelu_row(tname[k], r_h[k], t_h[k], n, n * 4, c16);

    /* correctness: the FP32 GPU GELU against the CPU backend */
    dt_backend *cpu;
    check(dt_backend_create("cpu", 0, &cpu), "cpu backend");
    check(cpu->gelu_forward(cpu, hr, hx, n), "cpu GELU");
    dt_backend_destroy(cpu);
    double e32;
    size_t w32 = count_wrong(hy, hr, hx, n, 1e-6, 0, 1e-5, &e32);
    printf("# check gelu_f32 against the CPU backend: %zu of %zu outside 1e-6 + 1e-5|y| (max error %.3g)\n", w32, n,
           e32);
    for (int k = 0; k < 2; k++)
        printf("# check %s against gelu_f32: %zu of %zu outside 1e-6 + 2u(|x| + |y|), u = 2^-%d (max error %.3g)\n",
               tname[k], wrong[k], n, types[k] == DT_F16 ? 11 : 8, maxerr[k]);

    printf("copy_f32_gbs %.1f\ncopy_16bit_gbs %.1f\n", c32, c16);
    printf("gelu_f32_gelems %.2f\n", n / t_g32 / 1e9);
    printf("gelu_f32_of_copy %.3f\n", (2.0 * n * 4 / t_g32 / 1e9) / c32);
    for (int k = 0; k < 2; k++) {
        char key[48];
        snprintf(key, sizeof key, "%s_vs_f32_elements", tname[k]);
        goal_line(key, t_g32 / t_h[k], 1.8, "(elements/s, half / FP32)");
    }
    for (int k = 0; k < 2; k++) {
        char key[48];
        snprintf(key, sizeof key, "%s_of_copy", tname[k]);
        goal_line(key, (2.0 * n * 2 / t_h[k] / 1e9) / c16, 0.8, "(GB/s / D2D copy GB/s of the same bytes)");
    }
    be->free(be, x32), be->free(be, y32), be->free(be, x16), be->free(be, y16);
    dt_backend_destroy(be);
    free(hx), free(hy), free(hr);
    int bad = w32 || wrong[0] || wrong[1];
    if (bad) fprintf(stderr, "dtbench gelu: wrong results (see the check lines)\n");
    return bad ? 1 : 0;
}

/* The benchmark model: a preset on random tokens (B, T); T <= 0 means the
 * preset's context. Exits with 2 on a bad --seq-length. */
typedef struct bench_setup {
    dt_backend *be;
    dt_gpt_config cfg;
    dt_gpt *m;
    int T;
    int32_t *tok, *tgt; /* (B, T) */
} bench_setup;

static void bench_setup_init(bench_setup *b, const char *device, int threads, const char *model, int B, int T)
{
    if (strcmp(device, "cuda") == 0)
        b->be = gpu_backend("train");
    else if (dt_backend_create("cpu", threads, &b->be) != DT_OK)
        die("--threads");
    if (dt_gpt_config_preset(model, &b->cfg) != DT_OK) die("--model");
    if (T <= 0) T = b->cfg.seq_len;
    if (T > b->cfg.seq_len) {
        fprintf(stderr, "dtbench: --seq-length %d exceeds --model %s's context %d\n", T, model, b->cfg.seq_len);
        exit(2);
    }
    if ((int64_t)B * T > (int64_t)1 << 30) { /* as dtrain: the token loops and indices are int */
        fprintf(stderr, "dtbench: --micro-batch-size %d x --seq-length %d: too many tokens per micro-batch (at most "
                        "2^30)\n", B, T);
        exit(2);
    }
    b->T = T;
    if (dt_gpt_create(&b->cfg, b->be, &b->m) != DT_OK) die("model");
    if (dt_gpt_init_weights(b->m, 1) != DT_OK) die("model init");
    b->tok = malloc(sizeof(int32_t) * B * T);
    b->tgt = malloc(sizeof(int32_t) * B * T);
    if (!b->tok || !b->tgt) die("out of memory");
    dt_rng r;
    dt_rng_seed(&r, 5);
    for (int i = 0; i < B * T; i++) b->tok[i] = (int32_t)dt_rng_below(&r, b->cfg.vocab_size);
    for (int i = 0; i < B * T; i++) b->tgt[i] = (int32_t)dt_rng_below(&r, b->cfg.vocab_size);
}

static void bench_setup_free(bench_setup *b)
{
    dt_gpt_free(b->m);
    free(b->tok), free(b->tgt);
    dt_backend_destroy(b->be);
}

/* precision: DT_F32, or DT_F16 / DT_BF16 mixed precision (dt_gpt_set_precision).
 * On the GPU the MFU is against the peak of the GEMM path the run takes:
 * FP32 runs keep exact FP32 GEMMs (the FP32 peak); in mixed precision every
 * GEMM input is a 16-bit value and dt_gpt_set_precision tells the backend
 * so (be->set_gemm_inputs), which then multiplies in that type with FP32
 * accumulation: the bf16 / fp16 peak of be->gemm in the same mode. A backend
 * without set_gemm_inputs gets TF32 instead (exact on 16-bit values) and the
 * TF32 peak. */
static int cmd_train(const char *device, int threads, const char *model, int B, int T, int steps, int warmup,
                     dt_dtype precision)
{
    const int gpu = strcmp(device, "cuda") == 0;
    bench_setup bs;
    bench_setup_init(&bs, device, threads, model, B, T);
    dt_backend *be = bs.be;
    dt_gpt *m = bs.m;
    const dt_gpt_config cfg = bs.cfg;
    const int32_t *tok = bs.tok, *tgt = bs.tgt;
    T = bs.T;
    dt_optim_config oc;
    dt_optim_config_default(&oc, DT_OPTIM_ADAMW);
    dt_optim opt;
    if (dt_optim_init(&opt, &oc, be, dt_gpt_layout(m)) != DT_OK) die("optimizer");
    if (precision != DT_F32 && dt_gpt_set_precision(m, precision) != DT_OK) die("precision");
    gemm_kind gk = GEMM_FP32;
    if (gpu && precision != DT_F32) {
        gk = !be->set_gemm_inputs ? GEMM_TF32 : precision == DT_BF16 ? GEMM_BF16 : GEMM_FP16;
        if (gk == GEMM_TF32) check(dt__cuda_set_tf32(be, 1), "TF32 setting");
    }
    /* fp16: a static loss scale keeps small gradients from flushing to zero;
     * AdamW unscales them (grad_scale). 1 otherwise. */
    const float loss_scale = precision == DT_F16 ? 1024.0f : 1.0f;

    double fpt = dt_gpt_config_flops_per_token(&cfg, T);
    char where[32];
    if (gpu)
        snprintf(where, sizeof where, "device cuda");
    else
        snprintf(where, sizeof where, "%d thread(s)", be->threads);
    printf("# dtbench train: --model %s (L=%d, NH=%d, C=%d, V=%d, N=%zu params), B=%d, T=%d, %s%s\n", model,
           cfg.num_layers, cfg.num_heads, cfg.hidden_size, cfg.vocab_size, dt_gpt_config_num_params(&cfg), B, T,
           where, precision == DT_F16 ? ", --fp16" : precision == DT_BF16 ? ", --bf16" : "");
    printf("# step = forward + backward + AdamW on random tokens; %d warm-up + %d timed steps\n", warmup, steps);
    if (precision != DT_F32)
        printf("# mixed precision: %s activations and compute weights, FP32 masters and statistics%s\n",
               precision == DT_F16 ? "f16" : "bf16",
               precision == DT_F16 ? "; static loss scale 1024, unscaled in the AdamW step" : "");
    static const char *const gemm_text[] = {
        "exact FP32 (CUBLAS_COMPUTE_32F)", "TF32 allowed (dt__cuda_set_tf32; the 16-bit-rounded inputs are exact in TF32)",
        "bf16 inputs, FP32 accumulation (be->set_gemm_inputs, tensor cores)",
        "fp16 inputs, FP32 accumulation (be->set_gemm_inputs, tensor cores)"};
    if (gpu) printf("# GEMMs: %s\n", gemm_text[gk]);
    int64_t t_total = 0, t_fwd = 0, t_bwd = 0, t_opt = 0;
    float loss = 0;
    for (int s = 0; s < warmup + steps; s++) {
        int64_t t0 = dt_time_ns();
        if (dt_gpt_zero_grad(m) != DT_OK) die("zero_grad");
        if (dt_gpt_forward(m, tok, tgt, B, T, &loss) != DT_OK) die("forward");
        int64_t t1 = dt_time_ns();
        if (dt_gpt_backward(m, loss_scale) != DT_OK) die("backward");
        if (be->synchronize(be) != DT_OK) die("synchronize"); /* GPU ops are asynchronous */
        int64_t t2 = dt_time_ns();
        if (dt_optim_step(&opt, dt_gpt_params(m), dt_gpt_grads(m), 1e-4f, 1.0f / loss_scale) != DT_OK)
            die("optimizer step");
        if (be->synchronize(be) != DT_OK) die("synchronize");
        int64_t t3 = dt_time_ns();
        if (s >= warmup) {
            t_total += t3 - t0, t_fwd += t1 - t0, t_bwd += t2 - t1, t_opt += t3 - t2;
            printf("  step %2d  %8.1f ms  loss %.4f\n", s - warmup, (t3 - t0) * 1e-6, loss);
        }
    }
    double sec = t_total * 1e-9;
    double tps = (double)B * T * steps / sec;
    double gflops = tps * fpt / 1e9;
    printf("  time split: forward %.1f%%  backward %.1f%%  optimizer %.1f%%\n", 100.0 * t_fwd / t_total,
           100.0 * t_bwd / t_total, 100.0 * t_opt / t_total);
    double peak;
    if (gpu) {
        printf("# reference: cuBLAS %s GEMM peak through be->gemm (4096^3, 8192^3) in the mode this run's GEMMs "
               "use, measured now\n", gemm_kind_name[gk]);
        peak = gpu_gemm_peak(be, gk, 1);
    } else {
        printf("# reference: cblas_sgemm peak at %d thread(s), measured now\n", be->threads);
        peak = sgemm_peak(be->threads, 1);
    }
    printf("tokens_per_second %.1f\n", tps);
    printf("flops_per_token %.4g\n", fpt);
    printf("achieved_gflops %.1f\n", gflops);
    if (gpu) printf("peak_kind %s\n", gemm_kind_name[gk]);
    printf("peak_gflops %.1f\n", peak);
    char note[64];
    snprintf(note, sizeof note, "(against the cuBLAS %s peak)", gemm_kind_name[gk]);
    if (gpu && strcmp(model, "gpt2-124m") == 0)
        goal_line("mfu", gflops / peak, 0.4, note);
    else
        printf("mfu %.3f\n", gflops / peak);
    printf("peak_activation_bytes %zu\n", dt_gpt_peak_activation_bytes(m));
    dt_optim_free(&opt);
    bench_setup_free(&bs);
    return 0;
}

/* Activation recomputation: peak activation bytes and step time per
 * granularity / K, each relative to no recomputation in the same run. */
static int cmd_recompute(int threads, const char *model, int B, int T, int steps, int warmup)
{
    bench_setup bs;
    bench_setup_init(&bs, "cpu", threads, model, B, T);
    dt_backend *be = bs.be;
    dt_gpt *m = bs.m;
    const dt_gpt_config cfg = bs.cfg;
    const int32_t *tok = bs.tok, *tgt = bs.tgt;
    T = bs.T;
    int sq = 1;
    while ((sq + 1) * (sq + 1) <= cfg.num_layers) sq++;
    struct run { dt_recompute mode; int k; const char *name; } runs[8];
    int n = 0;
    runs[n++] = (struct run){DT_RECOMPUTE_NONE, 0, "none"};
    runs[n++] = (struct run){DT_RECOMPUTE_SELECTIVE, 0, "selective"};
    runs[n++] = (struct run){DT_RECOMPUTE_FULL, 1, "full"};
    if (sq > 1) runs[n++] = (struct run){DT_RECOMPUTE_FULL, sq, "full"};
    if (cfg.num_layers > sq) runs[n++] = (struct run){DT_RECOMPUTE_FULL, cfg.num_layers, "full"};
    printf("# dtbench recompute: --model %s (L=%d, C=%d), B=%d, T=%d, %d thread(s); forward + backward, %d warm-up + "
           "%d timed steps\n", model, cfg.num_layers, cfg.hidden_size, B, T, be->threads, warmup, steps);
    printf("# K = blocks per checkpointed group (full); sqrt(L) rounds down to %d\n", sq);
    printf("%-10s %3s %16s %8s %10s %8s\n", "granularity", "K", "peak_act_bytes", "ratio", "step_ms", "ratio");
    double base_bytes = 0, base_ms = 0;
    for (int i = 0; i < n; i++) {
        if (dt_gpt_set_recompute(m, runs[i].mode, runs[i].k) != DT_OK) die("recompute");
        int64_t t_total = 0;
        for (int s = 0; s < warmup + steps; s++) {
            int64_t t0 = dt_time_ns();
            if (dt_gpt_forward(m, tok, tgt, B, T, NULL) != DT_OK) die("forward");
            if (dt_gpt_backward(m, 1.0f) != DT_OK) die("backward");
            if (s >= warmup) t_total += dt_time_ns() - t0;
        }
        if (dt_gpt_zero_grad(m) != DT_OK) die("zero_grad");
        double bytes = (double)dt_gpt_peak_activation_bytes(m), ms = t_total * 1e-6 / steps;
        if (i == 0) base_bytes = bytes, base_ms = ms;
        char k[8] = "-";
        if (runs[i].mode == DT_RECOMPUTE_FULL) snprintf(k, sizeof k, "%d", runs[i].k);
        printf("%-10s %3s %16.0f %8.3f %10.1f %8.3f\n", runs[i].name, k, bytes, bytes / base_bytes, ms, ms / base_ms);
    }
    bench_setup_free(&bs);
    return 0;
}

/* Large-batch training: the same number of samples at the base batch and at
 * 8x the batch, with linear-scaled AdamW, LARS and LAMB. */
static int cmd_largebatch(int threads, int base_iters, int base_batch)
{
    struct lb_run {
        const char *name;
        dt_optim_kind kind;
        int mult;                /* batch multiple */
        float lr;                /* LR at the base batch */
        dt_lr_scaling scaling;   /* to the run's batch */
    } runs[] = {
        {"adamw", DT_OPTIM_ADAMW, 1, 3e-3f, DT_LR_SCALING_NONE},
        {"adamw", DT_OPTIM_ADAMW, 8, 3e-3f, DT_LR_SCALING_LINEAR},
        {"adamw", DT_OPTIM_ADAMW, 8, 3e-3f, DT_LR_SCALING_SQRT},
        {"lars", DT_OPTIM_LARS, 8, 2.0f, DT_LR_SCALING_LINEAR},
        {"lamb", DT_OPTIM_LAMB, 8, 3e-3f, DT_LR_SCALING_LINEAR},
        {"lamb", DT_OPTIM_LAMB, 8, 3e-3f, DT_LR_SCALING_SQRT},
    };
    const int n = (int)(sizeof runs / sizeof runs[0]);
    printf("# dtbench largebatch: tiny GPT on 2-digit addition (the dtrain defaults), %d samples per run;\n"
           "# base batch %d for %d iterations, 8x batch for %d iterations (warm-up 10%%, cosine decay)\n",
           base_iters * base_batch, base_batch, base_iters, base_iters / 8);
    printf("%-6s %6s %6s %-7s %10s %9s %9s %8s\n", "optim", "batch", "iters", "scaling", "peak_lr", "val_loss",
           "accuracy", "seconds");
    for (int i = 0; i < n; i++) {
        dt_train_config c;
        dt_train_config_default(&c);
        c.threads = threads;
        c.global_batch_size = base_batch * runs[i].mult;
        c.micro_batch_size = base_batch;
        c.train_iters = base_iters / runs[i].mult;
        c.lr.decay_iters = c.train_iters;
        c.lr.warmup_iters = c.train_iters / 10;
        dt_optim_config_default(&c.optim, runs[i].kind);
        c.optim.weight_decay = 0.1f;
        c.lr.max_lr = runs[i].lr;
        c.lr.min_lr = runs[i].lr / 30;
        c.lr_scaling = runs[i].scaling;
        c.base_batch_size = base_batch;
        dt_trainer *tr;
        if (dt_trainer_create(&c, &tr) != DT_OK) die("trainer");
        int64_t t0 = dt_time_ns();
        dt_train_stats st;
        for (int64_t it = 0; it < c.train_iters; it++)
            if (dt_trainer_step(tr, &st) != DT_OK) die("step");
        dt_eval_result ev;
        if (dt_trainer_evaluate(tr, &ev) != DT_OK) die("evaluate");
        static const char *const sc[] = {"none", "linear", "sqrt"};
        printf("%-6s %6d %6lld %-7s %10.4g %9.4f %8.2f%% %8.1f\n", runs[i].name, c.global_batch_size,
               (long long)c.train_iters, sc[runs[i].scaling], (double)dt_trainer_lr_schedule(tr)->max_lr,
               (double)ev.loss, 100.0 * ev.accuracy, (dt_time_ns() - t0) * 1e-9);
        fflush(stdout);
        dt_trainer_free(tr);
    }
    return 0;
}

/* Mixed precision: how many gradient values underflow to zero in fp16
 * without loss scaling and with it, on one micro-batch of the dtrain task
 * (2-digit addition), against the FP32 gradients of the same batch, at
 * initialisation and after `trained` FP32 steps of the dtrain defaults
 * (gradients shrink as the loss falls). bf16 for comparison. */
static void amp_measure(dt_gpt *m, const int32_t *tok, const int32_t *tgt, int B, int T, const char *when)
{
    const size_t n = dt_gpt_layout(m)->numel;
    float *g32 = malloc(n * sizeof(float));
    if (!g32) die("out of memory");
    if (dt_gpt_set_precision(m, DT_F32) != DT_OK || dt_gpt_zero_grad(m) != DT_OK ||
        dt_gpt_forward(m, tok, tgt, B, T, NULL) != DT_OK || dt_gpt_backward(m, 1.0f) != DT_OK)
        die("fp32 pass");
    memcpy(g32, dt_gpt_grads(m), n * sizeof(float));
    size_t nonzero = 0, tiny = 0;
    double norm32 = 0;
    for (size_t i = 0; i < n; i++) {
        nonzero += g32[i] != 0.0f;
        tiny += g32[i] != 0.0f && fabsf(g32[i]) < 0x1p-25f;
        norm32 += (double)g32[i] * g32[i];
    }
    printf("# %s: %zu parameter gradients non-zero in FP32, %zu (%.3f%%) below 2^-25 (round to 0 in fp16)\n", when,
           nonzero, tiny, 100.0 * tiny / nonzero);
    struct { dt_dtype prec; float scale; } runs[] = {{DT_F16, 1.0f}, {DT_F16, 256.0f}, {DT_F16, 65536.0f},
                                                    {DT_BF16, 1.0f}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        if (dt_gpt_set_precision(m, runs[r].prec) != DT_OK || dt_gpt_zero_grad(m) != DT_OK ||
            dt_gpt_forward(m, tok, tgt, B, T, NULL) != DT_OK || dt_gpt_backward(m, runs[r].scale) != DT_OK)
            die("half pass");
        const float *gh = dt_gpt_grads(m);
        size_t under = 0;
        double err = 0;
        int inf = 0;
        for (size_t i = 0; i < n; i++) {
            float v = gh[i] / runs[r].scale;
            inf |= !isfinite(v);
            under += g32[i] != 0.0f && v == 0.0f;
            err += ((double)v - g32[i]) * ((double)v - g32[i]);
        }
        printf("%-12s %-6s %10g %12zu %11.4f%% %14.3g%s\n", when, runs[r].prec == DT_F16 ? "fp16" : "bf16",
               (double)runs[r].scale, under, 100.0 * under / nonzero, sqrt(err / norm32),
               inf ? "  (overflow: inf/NaN)" : "");
    }
    if (dt_gpt_set_precision(m, DT_F32) != DT_OK) die("precision");
    free(g32);
}

static int cmd_amp(int threads, int trained)
{
    dt_train_config c;
    dt_train_config_default(&c);
    c.threads = threads;
    c.train_iters = trained;
    c.lr.decay_iters = trained > 0 ? trained : 1;
    c.lr.warmup_iters = trained / 10;
    dt_trainer *tr;
    if (dt_trainer_create(&c, &tr) != DT_OK) die("trainer");
    dt_gpt *m = dt_trainer_model(tr);
    const int B = c.micro_batch_size, T = c.seq_length;
    int32_t *tok = malloc(sizeof(int32_t) * B * T), *tgt = malloc(sizeof(int32_t) * B * T);
    if (dt_data_batch(dt_trainer_data(tr), DT_SPLIT_VAL, 0, B, T, tok, tgt, NULL, NULL) != DT_OK) die("data");
    printf("# dtbench amp: tiny GPT, one micro-batch of %d x %d tokens of 2-digit addition (the dtrain defaults), "
           "%d thread(s)\n", B, T, dt_trainer_config(tr)->threads);
    printf("%-12s %-6s %10s %12s %12s %14s\n", "weights", "format", "loss_scale", "underflowed", "fraction",
           "rel_l2_error");
    amp_measure(m, tok, tgt, B, T, "initial");
    for (int i = 0; i < trained; i++)
        if (dt_trainer_step(tr, NULL) != DT_OK) die("step");
    char when[32];
    snprintf(when, sizeof when, "step%d", trained);
    amp_measure(m, tok, tgt, B, T, when);
    printf("# underflowed = non-zero in FP32, zero in the half run after unscaling; rel_l2_error = "
           "||g_half - g_fp32|| / ||g_fp32||\n");
    free(tok), free(tgt);
    dt_trainer_free(tr);
    return 0;
}

/* Allreduce: the nccl-tests table (size, count, type, then time, algbw,
 * busbw and #wrong) for the ring, tree, naive and mpi algorithms side by
 * side, float32 sums from --min-bytes to --max-bytes doubling, run under
 * mpirun. Per size and algorithm: warm-up calls, a barrier, `iters` timed
 * calls; time = the largest over ranks of the mean per-call time; algbw =
 * bytes / time (1e9 B/s), busbw = algbw * 2(n-1)/n. #wrong = elements (over
 * all ranks) that differ from the exact sum after one more call on freshly
 * filled buffers (rank-dependent small integers, so every order of addition
 * gives the exact sum). Timed calls reuse the buffer in place: its values
 * grow n-fold per call and saturate at +inf (all positive: never NaN), which
 * costs the same as finite values on this CPU. */
enum { AR_TAG = 7 }; /* bench's own gather of timings to rank 0 (outside the collectives' tags) */

static float ar_value(size_t i, int rank) { return (float)(1 + (i * 7 + (size_t)rank * 13) % 61); }

/* Rank 0 gets v[0] = max over ranks of v[0] and v[1] = the sum of v[1]. */
static void ar_gather(dt_comm *c, double v[2])
{
    dt_comm_request *q;
    if (c->rank != 0) {
        if (c->ops->isend(c, v, 2 * sizeof(double), 0, AR_TAG, &q) != DT_OK || c->ops->wait(c, q) != DT_OK)
            die("gather timings");
        return;
    }
    for (int i = 1; i < c->size; i++) {
        double w[2];
        if (c->ops->irecv(c, w, sizeof w, i, AR_TAG, &q) != DT_OK || c->ops->wait(c, q) != DT_OK)
            die("gather timings");
        v[0] = w[0] > v[0] ? w[0] : v[0];
        v[1] += w[1];
    }
}

/* --json FILE: rank 0's table as {"format":"dtbench-allreduce","version":1,
 * "ranks":n,"communicator":...,"chunk_bytes":...,"rows":[{"algo","bytes",
 * "time_us","algbw","busbw","wrong"}, ...]} (one row per size and algorithm
 * that ran; sim/fit.c reads it for the simulator's link calibration). */
static int cmd_allreduce(int64_t chunk_bytes, int64_t min_bytes, int64_t max_bytes, int iters_flag,
                         const char *json_path)
{
    dt_comm *c;
    if (dt_comm_mpi_world(&c) != DT_OK) die("allreduce");
    const int n = c->size, r = c->rank;
    enum { NALGO = 4 };
    const dt_allreduce_algo algos[NALGO] = {DT_ALLREDUCE_RING, DT_ALLREDUCE_TREE, DT_ALLREDUCE_NAIVE,
                                            DT_ALLREDUCE_MPI};
    const size_t max_count = (size_t)max_bytes / sizeof(float);
    float *buf = malloc((max_count ? max_count : 1) * sizeof(float));
    if (!buf) die("out of memory");
    const double bus = 2.0 * (n - 1) / n;
    json_t *rows = r == 0 && json_path ? json_array() : NULL;
    if (r == 0 && json_path && !rows) die("out of memory");
    if (r == 0) {
        printf("# dtbench allreduce: %d rank(s), '%s' communicator, float32 sum in place; ring chunk %lld bytes; "
               "%s\n", n, c->ops->name, (long long)chunk_bytes,
               iters_flag ? "--iters timed calls per size" : "timed calls per size: 1 GiB / size, 10 to 5000");
        printf("# time = max over ranks of the mean per call; algbw = bytes / time; busbw = algbw * 2(n-1)/n\n");
        printf("#%31s", "");
        for (int a = 0; a < NALGO; a++) printf("  %-33s", dt_allreduce_algo_name(algos[a]));
        printf("\n#%11s %12s %6s", "size", "count", "type");
        for (int a = 0; a < NALGO; a++) printf("  %10s %7s %7s %6s", "time", "algbw", "busbw", "#wrong");
        printf("\n#%11s %12s %6s", "(B)", "(elements)", "");
        for (int a = 0; a < NALGO; a++) printf("  %10s %7s %7s %6s", "(us)", "(GB/s)", "(GB/s)", "");
        printf("\n");
        fflush(stdout);
    }
    double ratio_size[64], ratio[64];
    int nratio = 0;
    for (size_t count = (size_t)min_bytes / sizeof(float); count <= max_count && count > 0; count *= 2) {
        const size_t bytes = count * sizeof(float);
        const size_t auto_iters = ((size_t)1 << 30) / bytes;
        const int iters = iters_flag ? iters_flag : auto_iters < 10 ? 10 : auto_iters > 5000 ? 5000 : (int)auto_iters;
        const int warm = iters / 10 > 2 ? iters / 10 : 2;
        double busbw[NALGO] = {0};
        if (r == 0) printf("%12zu %12zu %6s", bytes, count, "float");
        for (int a = 0; a < NALGO; a++) {
            dt_collective_opts o = {.chunk_bytes = algos[a] == DT_ALLREDUCE_RING ? (size_t)chunk_bytes : 0};
            for (size_t i = 0; i < count; i++) buf[i] = ar_value(i, r);
            dt_status st = dt_comm_allreduce(c, buf, count, algos[a], &o);
            if (st == DT_ERR_UNSUPPORTED) { /* the same answer on every rank: no native allreduce */
                if (r == 0) printf("  %10s %7s %7s %6s", "n/a", "", "", "");
                continue;
            }
            if (st != DT_OK) die(dt_allreduce_algo_name(algos[a]));
            for (int it = 1; it < warm; it++)
                if (dt_comm_allreduce(c, buf, count, algos[a], &o) != DT_OK) die(dt_allreduce_algo_name(algos[a]));
            if (c->ops->barrier(c) != DT_OK) die("barrier");
            int64_t t0 = dt_time_ns();
            for (int it = 0; it < iters; it++)
                if (dt_comm_allreduce(c, buf, count, algos[a], &o) != DT_OK) die(dt_allreduce_algo_name(algos[a]));
            double v[2] = {(dt_time_ns() - t0) * 1e-9 / iters, 0};
            // the check: one more call on fresh values, compared with the exact sum
            for (size_t i = 0; i < count; i++) buf[i] = ar_value(i, r);
            if (dt_comm_allreduce(c, buf, count, algos[a], &o) != DT_OK) die(dt_allreduce_algo_name(algos[a]));
            for (size_t i = 0; i < count; i++) {
                float want = 0;
                for (int q = 0; q < n; q++) want += ar_value(i, q);
                v[1] += buf[i] != want;
            }
            ar_gather(c, v);
            double algbw = bytes / v[0] / 1e9;
            busbw[a] = algbw * bus;
            if (r == 0) printf("  %10.2f %7.2f %7.2f %6.0f", v[0] * 1e6, algbw, busbw[a], v[1]);
            if (rows &&
                json_array_append_new(rows, json_pack("{s:s, s:I, s:f, s:f, s:f, s:I}", "algo",
                                                      dt_allreduce_algo_name(algos[a]), "bytes", (json_int_t)bytes,
                                                      "time_us", v[0] * 1e6, "algbw", algbw, "busbw", busbw[a],
                                                      "wrong", (json_int_t)v[1])) != 0)
                die("out of memory");
        }
        if (r == 0) printf("\n"), fflush(stdout);
        if (bytes >= 256 * 1024 && busbw[3] > 0 && nratio < 64)
            ratio_size[nratio] = (double)bytes, ratio[nratio++] = busbw[0] / busbw[3];
    }
    if (r == 0 && nratio > 0) {
        printf("# ring busbw / mpi busbw, sizes >= 256 KiB (goal: >= 0.9, above 1 at 64 MiB)\n");
        for (int i = 0; i < nratio; i++) printf("%12.0f %6.3f\n", ratio_size[i], ratio[i]);
    }
    int rc = 0;
    if (rows) { /* the header on one line, then one row per line */
        json_t *head = json_pack("{s:s, s:i, s:i, s:s, s:I}", "format", "dtbench-allreduce", "version", 1, "ranks", n,
                                 "communicator", c->ops->name, "chunk_bytes", (json_int_t)chunk_bytes);
        char *h = head ? json_dumps(head, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        FILE *fp = h ? fopen(json_path, "w") : NULL;
        int bad = !fp;
        if (fp) {
            h[strlen(h) - 1] = '\0'; /* drop the closing brace: "rows" follows */
            bad |= fprintf(fp, "%s,\"rows\":[\n", h) < 0;
            for (size_t i = 0; i < json_array_size(rows); i++) {
                char *row = json_dumps(json_array_get(rows, i), JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
                bad |= !row || fprintf(fp, "%s%s\n", row, i + 1 < json_array_size(rows) ? "," : "") < 0;
                free(row);
            }
            bad |= fprintf(fp, "]}\n") < 0;
            bad |= fclose(fp) != 0;
        }
        if (bad) {
            fprintf(stderr, "dtbench allreduce: --json %s: cannot write the file\n", json_path);
            rc = 1;
        }
        free(h);
        json_decref(head);
        json_decref(rows);
    }
    free(buf);
    dt_comm_free(c);
    if (dt_comm_finalize() != DT_OK) die("finalize");
    return rc;
}

/* ---- pipeline bubbles (dt_trace_stats.h) ------------------------------------ */

/* One line per trace file: the bubble of its rank's stage (dt_bubble_stats_trace)
 * as key=value pairs: mean over the steps >= skip of bubble (forward, backward
 * and optim_step are busy) and bubble_fb (forward and backward only), the mean
 * window, and forward / backward / optimizer milliseconds per event on the
 * stage (how balanced the stages are). Exit 1 when a file cannot be used. */
static int dbl_cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* How disturbed a run's timing was: over the forward (then backward)
 * instructions of pid's steps >= skip, the time above the median duration
 * of their kind as a fraction of their total, (sum (d - median)+) / sum d.
 * Every micro-batch does the same work, so a quiet machine gives a few
 * percent; another process taking the core shows up here. -1 when there is
 * nothing to measure. */
static double trace_noise(const dt_trace *t, int pid, int skip)
{
    static const char *const kinds[2] = {"forward", "backward"};
    double excess = 0, total = 0;
    double *d = malloc((t->n_events ? t->n_events : 1) * sizeof *d);
    if (!d) die("out of memory");
    for (int k = 0; k < 2; k++) {
        size_t n = 0;
        for (size_t i = 0; i < t->n_events; i++) {
            const dt_trace_event *e = &t->events[i];
            if (e->ph == DT_TRACE_COMPLETE && strcmp(e->cat, "pipeline") == 0 && strcmp(e->name, kinds[k]) == 0 &&
                e->iter != DT_TRACE_NONE && e->iter >= skip && (pid < 0 || e->pid == pid))
                d[n++] = (double)e->dur_ns;
        }
        if (n == 0) continue;
        qsort(d, n, sizeof *d, dbl_cmp);
        const double med = d[n / 2];
        for (size_t i = 0; i < n; i++) total += d[i], excess += d[i] > med ? d[i] - med : 0;
    }
    free(d);
    return total > 0 ? excess / total : -1;
}

static int cmd_bubbles(int argc, char **argv)
{
    int skip = 1, n_files = 0, bad = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--skip") == 0) {
            int64_t v;
            if (i + 1 >= argc) {
                fprintf(stderr, "dtbench bubbles: --skip: expected a value\n");
                return 2;
            }
            if (dt_args_parse_int64("dtbench", "--skip", argv[++i], DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 0, 1e9, &v) !=
                DT_ARGS_OK)
                return 2;
            skip = (int)v;
        } else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "dtbench bubbles: '%s': unknown flag (expected --skip N and trace files)\n", argv[i]);
            return 2;
        } else {
            n_files++;
        }
    }
    if (n_files == 0) {
        fprintf(stderr, "dtbench bubbles: expected trace files (run.rank0.json run.rank1.json ...)\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--skip") == 0) {
            i++;
            continue;
        }
        dt_trace *t = NULL;
        dt_bubble_stats b;
        if (dt_trace_read(argv[i], &t) != DT_OK || dt_bubble_stats_trace(t, -1, skip, &b) != DT_OK) {
            const char *why = dt_last_error(); /* the reader's messages mostly name the file already */
            if (strncmp(why, argv[i], strlen(argv[i])) == 0) fprintf(stderr, "dtbench bubbles: %s\n", why);
            else fprintf(stderr, "dtbench bubbles: %s: %s\n", argv[i], why);
            dt_trace_free(t);
            bad = 1;
            continue;
        }
        printf("%s stage=%d steps=%d mean_steps=%d bubble=%.4f bubble_fb=%.4f window_ms=%.3f forward_ms=%.3f "
               "backward_ms=%.3f optim_ms=%.3f noise=%.4f\n",
               argv[i], b.stage, b.n_steps, b.n_mean, b.mean, b.mean_fb, b.mean_window_ns * 1e-6,
               b.n_forward ? b.forward_ns * 1e-6 / b.n_forward : NAN,
               b.n_backward ? b.backward_ns * 1e-6 / b.n_backward : NAN, b.n_optim ? b.optim_ns * 1e-6 / b.n_optim : NAN,
               trace_noise(t, b.pid, skip));
        dt_bubble_stats_free(&b);
        dt_trace_free(t);
    }
    return bad;
}

/* Pipeline: every schedule and m in {2, 4, 8, 16} on p = the world size
 * stages (or --pipeline-model-parallel-size p with p x d ranks), run under
 * mpirun. Per (schedule, m): `steps` training steps of the equal-cost GPT
 * (--num-layers blocks split evenly, or --pipeline-split) with a trace to a
 * temporary file; each rank reads its trace back and computes its stage's
 * bubble (dt_bubble_stats_trace, steps after the first), rank 0 gathers
 * them (averaged over the d pipelines; every rank gets every figure, so all
 * agree to repeat a run whose compute times show another process took a
 * core, at most 3 runs, unless there are more ranks than cores) and prints the step time (mean of
 * steps after the first), the bubble per stage and its mean (optim_step
 * counted as busy, and forward/backward only), (p-1)/(m+p-1), their ratio
 * for gpipe and 1f1b, and the trainer's per-stage peak activation bytes and
 * weight versions alive at once (from its summary). Activations cross
 * stages as MPI messages of B*T*C*4 bytes: unless the environment says
 * otherwise, Open MPI's shared-memory eager limit is raised above that, so
 * a send completes without the sender entering MPI again (see
 * bench/README.md). */
enum { PIPE_NV = 6, PIPE_ATTEMPTS = 3 };
#define PIPE_NOISE_MAX 0.05 /* a run noisier than this is repeated (at most PIPE_ATTEMPTS runs) */

static const char *pipe_path(char *buf, size_t n, const char *dir, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

/* The summary's pipeline arrays, into peak[p] and versions[p]. */
static void pipe_summary_figures(const char *path, int p, double *peak, double *versions)
{
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    json_t *pl = root ? json_object_get(root, "pipeline") : NULL;
    json_t *a = pl ? json_object_get(pl, "stage_peak_activation_bytes") : NULL;
    json_t *v = pl ? json_object_get(pl, "stage_weight_versions") : NULL;
    if (!json_is_array(a) || !json_is_array(v) || (int)json_array_size(a) != p || (int)json_array_size(v) != p) {
        fprintf(stderr, "dtbench pipeline: %s: no pipeline figures for %d stages in the summary\n", path, p);
        exit(1);
    }
    for (int s = 0; s < p; s++) {
        peak[s] = json_number_value(json_array_get(a, s));
        versions[s] = json_number_value(json_array_get(v, s));
    }
    json_decref(root);
}

/* A custom GPT (L blocks, width C, 4 heads, context T) trained on micro-batches
 * of B with the given global batch for `steps` steps over comm: the runs of
 * dtbench pipeline and tp. */
static void bench_split_config(dt_train_config *cfg, int L, int C, int T, int B, int global, int steps, int threads,
                               dt_comm *comm)
{
    dt_train_config_default(cfg);
    snprintf(cfg->model_name, sizeof cfg->model_name, "custom");
    cfg->model.num_layers = L;
    cfg->model.hidden_size = C;
    cfg->model.num_heads = 4;
    cfg->model.seq_len = T;
    cfg->seq_length = T;
    cfg->micro_batch_size = B;
    cfg->global_batch_size = global;
    cfg->train_iters = steps;
    cfg->lr.warmup_iters = 1;
    cfg->lr.decay_iters = steps;
    cfg->eval_iters = 1;
    cfg->threads = threads;
    cfg->comm = comm;
}

/* dtbench tp: Megatron tensor parallelism for t = 1, 2, 4 (each dividing
 * the ranks; d = ranks / t data-parallel replicas): per step and rank, the
 * f/g allreduces counted in the trace and the bytes they send against the
 * formula 4 L m allreduces of B*T*C floats, each a ring sending 2(t-1)/t of
 * it; their time; the step time. */
static int cmd_tp(int threads, int B, int T, int L, int C, int steps)
{
    dt_comm *c;
    if (dt_comm_mpi_world(&c) != DT_OK) die("tp");
    const int n = c->size, r = c->rank, m = 2;
    char tmpl[64] = "/tmp/dtbench-tp.XXXXXX"; /* 16 floats' worth, for the broadcast */
    if (r == 0 && !mkdtemp(tmpl)) {
        fprintf(stderr, "dtbench tp: cannot create a temporary directory in /tmp\n");
        exit(1);
    }
    /* every rank writes its trace into rank 0's directory: send its name */
    if (dt_comm_broadcast(c, (float *)tmpl, sizeof tmpl / sizeof(float), 0, NULL) != DT_OK) die("tp");
    if (r == 0) {
        printf("# dtbench tp: %d rank(s), GPT %d blocks, width %d, 4 heads, T = %d, micro-batch %d, %d micro-batches per "
               "step and replica, %d steps (figures over steps 2..%d)\n", n, L, C, T, B, m, steps, steps);
        printf("# per step and rank: allreduces of f and g (2 forward + 2 backward per block and micro-batch: 4 L m), "
               "bytes each rank sends in them (ring: 2(t-1)/t of B*T*C*4 each), their share of the step time\n");
        printf("# %2s %2s %11s %11s %14s %14s %8s %10s %10s\n", "t", "d", "allreduces", "formula", "bytes_sent",
               "formula_bytes", "tp_time", "step_ms", "tokens/s");
    }
    for (int t = 1; t <= 4; t *= 2) {
        if (n % t) continue;
        dt_train_config cfg;
        bench_split_config(&cfg, L, C, T, B, B * m * (n / t), steps, threads, c);
        cfg.tensor_size = t;
        char path[256];
        snprintf(path, sizeof path, "%s/t%d.json", tmpl, t);
        cfg.trace_path = path;
        dt_trainer *tr;
        if (dt_trainer_create(&cfg, &tr) != DT_OK) die("tp: trainer");
        double secs = 0;
        for (int k = 0; k < steps; k++) {
            dt_train_stats st;
            if (dt_trainer_step(tr, &st) != DT_OK) die("tp: step");
            if (k > 0) secs += st.step_seconds;
        }
        if (dt_trainer_finish(tr) != DT_OK) die("tp: trace");
        dt_trainer_free(tr);
        if (c->ops->barrier(c) != DT_OK) die("tp: barrier");
        if (r != 0) continue;
        /* rank 0's trace: run.json became run.rank0.json with several ranks */
        char rpath[300];
        if (n > 1) snprintf(rpath, sizeof rpath, "%s/t%d.rank0.json", tmpl, t);
        else snprintf(rpath, sizeof rpath, "%s", path);
        dt_trace *tc;
        if (dt_trace_read(rpath, &tc) != DT_OK) die("tp: reading the trace");
        long long count = 0;
        double busy = 0;
        for (size_t i = 0; i < tc->n_events; i++) {
            const dt_trace_event *e = &tc->events[i];
            if (strncmp(e->name, "tp allreduce", 12) != 0 || e->iter < 1 || e->iter >= steps) continue;
            count++;
            busy += (double)e->dur_ns * 1e-9;
        }
        dt_trace_free(tc);
        const double per = (double)B * T * C * 4, frac = t > 1 ? 2.0 * (t - 1) / t : 0.0;
        const double meas = (double)count / (steps - 1), want = t > 1 ? 4.0 * L * m : 0.0;
        const double tokens = (double)B * T * m * (n / t) * (steps - 1); /* the global batch grows with d */
        printf("  %2d %2d %11.0f %11.0f %14.0f %14.0f %7.1f%% %10.2f %10.0f\n", t, n / t, meas, want, meas * per * frac,
               want * per * frac, secs > 0 ? 100.0 * busy / secs : 0.0, 1e3 * secs / (steps - 1),
               secs > 0 ? tokens / secs : 0.0);
        fflush(stdout);
    }
    dt_comm_free(c);
    dt_comm_finalize();
    return 0;
}

static int cmd_pipeline(int p, int threads, int B, int T, int L, int C, const int *split, int steps, const char *keep)
{
    dt_comm *c;
    char eager[32];
    /* activation messages: B*T*C floats plus the transport's header */
    const long long msg = (long long)B * T * C * 4;
    snprintf(eager, sizeof eager, "%lld", msg + 4096);
    setenv("OMPI_MCA_btl_vader_eager_limit", eager, 0); /* read by MPI_Init; the caller's setting wins */
    /* room for 16 (the largest m) eager messages in flight, with margin */
    long long seg = 4 << 20;
    while (seg < 8 * 16 * (msg + 4096)) seg *= 2;
    char segment[32];
    snprintf(segment, sizeof segment, "%lld", seg);
    setenv("OMPI_MCA_btl_vader_segment_size", segment, 0);
    if (dt_comm_mpi_world(&c) != DT_OK) die("pipeline");
    const int n = c->size, r = c->rank;
    if (p <= 0) p = n;
    if (p < 2 || n % p != 0) {
        if (r == 0)
            fprintf(stderr, "dtbench pipeline: %d rank(s) for --pipeline-model-parallel-size %d: run under mpirun "
                            "with p x d ranks, p >= 2 (mpirun -np 2 ./dtbench pipeline)\n", n, p);
        dt_comm_free(c);
        dt_comm_finalize();
        return 2;
    }
    const int d = n / p;
    /* more ranks than cores: every run is "disturbed" by the others, repeating is useless */
    const int attempts = n > sysconf(_SC_NPROCESSORS_ONLN) ? 1 : PIPE_ATTEMPTS;
    char dir[512] = "", path[640], summary[640], name[64];
    if (keep) {
        snprintf(dir, sizeof dir, "%s", keep);
    } else {
        char tmpl[] = "/tmp/dtbench-pipeline.XXXXXX";
        if (!mkdtemp(tmpl)) {
            fprintf(stderr, "dtbench pipeline: cannot create a temporary directory in /tmp\n");
            exit(1);
        }
        snprintf(dir, sizeof dir, "%s", tmpl);
    }
    static const dt_sched_kind kinds[4] = {DT_SCHED_GPIPE, DT_SCHED_1F1B, DT_SCHED_PIPEDREAM, DT_SCHED_PIPEDREAM_VSYNC};
    static const int ms[4] = {2, 4, 8, 16};
    float *allf = calloc((size_t)n * PIPE_NV, sizeof *allf);
    double *all = calloc((size_t)n * PIPE_NV, sizeof *all), *peak = calloc((size_t)p, sizeof *peak),
           *vers = calloc((size_t)p, sizeof *vers), *bub = calloc((size_t)p, sizeof *bub),
           *bfb = calloc((size_t)p, sizeof *bfb), *fw = calloc((size_t)p, sizeof *fw), *bw = calloc((size_t)p, sizeof *bw);
    if (!allf || !all || !peak || !vers || !bub || !bfb || !fw || !bw) die("out of memory");
    int n_fb = 0; /* gpipe/1f1b runs in fw/bw */
    if (r == 0) {
        printf("# dtbench pipeline: p = %d stages x d = %d pipeline(s), %d rank(s), %d thread(s) per rank; GPT %d "
               "blocks, width %d, T = %d, micro-batch %d; split ", p, d, n, threads, L, C, T, B);
        for (int s = 0; s < p; s++) printf("%s%d", s ? "," : "", split[0] ? split[s] : L / p + (s < L % p));
        printf("\n# %d steps per run, figures over steps 2..%d; activation message %lld bytes, "
               "OMPI_MCA_btl_vader_eager_limit=%s, OMPI_MCA_btl_vader_segment_size=%s\n", steps, steps, msg,
               getenv("OMPI_MCA_btl_vader_eager_limit"), getenv("OMPI_MCA_btl_vader_segment_size"));
        printf("# bubble(t) = 1 - (forward + backward + optim_step) / window(t) per stage (dt_trace_stats.h); "
               "fb: forward + backward only; formula (p-1)/(m+p-1)\n# noise: compute time above the median "
               "forward/backward duration, worst stage (a few %% when quiet; above 0.05 another process took a core)\n");
        printf("# %-15s %3s %9s  %-*s %6s  %-*s %6s %7s %6s %6s  %-*s %-14s %s\n", "schedule", "m", "step_ms", 7 * p,
               "bubble/stage", "mean", 7 * p, "fb/stage", "fb", "formula", "ratio", "r_fb", 11 * p,
               "peak_act_bytes/stage", "versions/stage", "noise");
        fflush(stdout);
    }
    for (int k = 0; k < 4; k++) {
        for (int mi = 0; mi < 4; mi++) {
            const int m = ms[mi];
            double noise = 0, secs = 0;
            for (int attempt = 0; attempt < attempts; attempt++) {
                dt_train_config cfg;
                bench_split_config(&cfg, L, C, T, B, B * m * d, steps, threads, c);
                cfg.pipeline_size = p;
                cfg.pipeline_schedule = kinds[k];
                for (int s = 0; s < p && split[0]; s++) cfg.pipeline_split[s] = split[s];
                snprintf(name, sizeof name, "%s-m%d.json", dt_sched_kind_name(kinds[k]), m);
                cfg.trace_path = pipe_path(path, sizeof path, dir, name);
                dt_trainer *tr;
                if (dt_trainer_create(&cfg, &tr) != DT_OK) die("pipeline: trainer");
                secs = 0;
                for (int t = 0; t < steps; t++) {
                    dt_train_stats st;
                    if (dt_trainer_step(tr, &st) != DT_OK) die("pipeline: step");
                    if (t > 0 || steps == 1) secs += st.step_seconds;
                }
                secs /= steps > 1 ? steps - 1 : 1;
                if (dt_trainer_finish(tr) != DT_OK) die("pipeline: trace");
                if (r == 0) {
                    if (dt_trainer_write_summary(tr, pipe_path(summary, sizeof summary, dir, "summary.json"), NULL, NULL) !=
                        DT_OK)
                        die("pipeline: summary");
                    pipe_summary_figures(summary, p, peak, vers);
                    remove(summary);
                }
                dt_trainer_free(tr);
                /* this rank's stage from its own trace */
                char mine[720];
                snprintf(mine, sizeof mine, "%s/%s-m%d.rank%d.json", dir, dt_sched_kind_name(kinds[k]), m, r);
                dt_trace *tt;
                dt_bubble_stats b;
                if (dt_trace_read(mine, &tt) != DT_OK || dt_bubble_stats_trace(tt, -1, 1, &b) != DT_OK)
                    die("pipeline: bubble");
                double v[PIPE_NV] = {b.stage, b.mean, b.mean_fb, b.n_forward ? b.forward_ns * 1e-6 / b.n_forward : 0,
                                     b.n_backward ? b.backward_ns * 1e-6 / b.n_backward : 0, trace_noise(tt, b.pid, 1)};
                dt_bubble_stats_free(&b);
                dt_trace_free(tt);
                if (!keep) remove(mine);
                /* every rank's figures on every rank (floats are enough), so all agree on a repeat */
                for (size_t i = 0; i < (size_t)n * PIPE_NV; i++) allf[i] = 0;
                for (int i = 0; i < PIPE_NV; i++) allf[(size_t)r * PIPE_NV + i] = (float)v[i];
                if (dt_comm_allreduce(c, allf, (size_t)n * PIPE_NV, DT_ALLREDUCE_RING, NULL) != DT_OK)
                    die("pipeline: gather");
                for (size_t i = 0; i < (size_t)n * PIPE_NV; i++) all[i] = allf[i];
                noise = 0;
                for (int i = 0; i < n; i++)
                    if (all[(size_t)i * PIPE_NV + 5] > noise) noise = all[(size_t)i * PIPE_NV + 5];
                if (noise <= PIPE_NOISE_MAX || attempt == attempts - 1) break;
                if (r == 0) printf("  (%s m=%d: disturbed, noise %.3f: repeated)\n", dt_sched_kind_name(kinds[k]), m, noise);
            }
            if (r != 0) continue;
            for (int s = 0; s < p; s++) bub[s] = bfb[s] = 0;
            for (int i = 0; i < n; i++) {
                const int s = (int)all[(size_t)i * PIPE_NV];
                if (s < 0 || s >= p) {
                    fprintf(stderr, "dtbench pipeline: rank %d's trace names stage %d\n", i, s);
                    exit(1);
                }
                bub[s] += all[(size_t)i * PIPE_NV + 1] / d;
                bfb[s] += all[(size_t)i * PIPE_NV + 2] / d;
                if (k < 2 && noise <= PIPE_NOISE_MAX)
                    fw[s] += all[(size_t)i * PIPE_NV + 3] / d, bw[s] += all[(size_t)i * PIPE_NV + 4] / d;
            }
            n_fb += k < 2 && noise <= PIPE_NOISE_MAX;
            double mean = 0, mean_fb = 0;
            for (int s = 0; s < p; s++) mean += bub[s] / p, mean_fb += bfb[s] / p;
            const double f = dt_schedule_bubble_formula(p, m);
            char cell[64];
            printf("  %-15s %3d %9.2f  ", dt_sched_kind_name(kinds[k]), m, secs * 1e3);
            for (int s = 0; s < p; s++) printf("%6.3f ", bub[s]);
            printf("%6.3f  ", mean);
            for (int s = 0; s < p; s++) printf("%6.3f ", bfb[s]);
            printf("%6.3f %7.3f ", mean_fb, f);
            if (k < 2)
                printf("%6.2f %6.2f  ", mean / f, mean_fb / f);
            else
                printf("%6s %6s  ", "-", "-");
            for (int s = 0; s < p; s++) {
                snprintf(cell, sizeof cell, "%.0f", peak[s]);
                printf("%10s ", cell);
            }
            for (int s = 0; s < p; s++) printf("%s%.0f", s ? "," : " ", vers[s]);
            printf("%*s%6.3f\n", 14 - 2 * p, "", noise);
            fflush(stdout);
        }
    }
    if (r == 0 && n_fb > 0) {
        printf("# balance (gpipe and 1f1b runs, steps 2..%d): ms per micro-batch on each stage\n", steps);
        for (int s = 0; s < p; s++)
            printf("#   stage %d: forward %.3f backward %.3f total %.3f\n", s, fw[s] / n_fb, bw[s] / n_fb,
                   (fw[s] + bw[s]) / n_fb);
    }
    free(allf), free(all), free(peak), free(vers), free(bub), free(bfb), free(fw), free(bw);
    if (!keep) rmdir(dir);
    dt_comm_free(c);
    if (dt_comm_finalize() != DT_OK) die("finalize");
    return 0;
}

int main(int argc, char **argv)
{
    int threads = 1, B = 16, T = 0, steps = 5, warmup = 1, help = 0, ar_iters = 0;
    int fp16 = 0, bf16 = 0, skip_no_device = 0;
    int pp_size = 0, pp_layers = 8, pp_hidden = 128;
    const char *pp_split = NULL, *pp_keep = NULL, *ar_json = NULL;
    int64_t ar_chunk = 1024 * 1024, ar_min = 4 * 1024, ar_max = 64 * 1024 * 1024, gelu_n = (int64_t)64 << 20;
    const char *model = "small", *device = NULL;
    dt_arg args[] = {
        {"--device", DT_ARG_CHOICE, &device, 0, 0, 0, "cpu|cuda", NULL,
         "gemm, train: backend (gelu runs on cuda only)", "cpu; gelu: cuda", 0},
        {"--skip-no-device", DT_ARG_FLAG, &skip_no_device, 0, 0, 0, NULL, NULL,
         "exit 77 instead of 1 when CUDA or a CUDA device is missing (for scripts)", "exit 1", 0},
        {"--threads", DT_ARG_INT, &threads, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 1024, NULL, NULL,
         "CPU threads (the sgemm peak is measured at the same count)", NULL, 0},
        {"--model", DT_ARG_CHOICE, &model, 0, 0, 0, "tiny|small|gpt2-124m", NULL, "train: model preset", NULL, 0},
        {"--micro-batch-size", DT_ARG_INT, &B, DT_ARG_HAS_MIN, 1, 0, NULL, NULL, "train: sequences per step", NULL, 0},
        {"--seq-length", DT_ARG_INT, &T, DT_ARG_HAS_MIN, 0, 0, NULL, NULL, "train: sequence length (0: the model's context)",
         NULL, 0},
        {"--steps", DT_ARG_INT, &steps, DT_ARG_HAS_MIN, 1, 0, NULL, NULL, "train: timed steps", NULL, 0},
        {"--warmup", DT_ARG_INT, &warmup, DT_ARG_HAS_MIN, 0, 0, NULL, NULL, "train: untimed warm-up steps", NULL, 0},
        {"--fp16", DT_ARG_FLAG, &fp16, 0, 0, 0, NULL, NULL,
         "train: fp16 mixed precision (static loss scale 1024; on cuda: MFU against the fp16-input GEMM peak)",
         "FP32", 0},
        {"--bf16", DT_ARG_FLAG, &bf16, 0, 0, 0, NULL, NULL,
         "train: bf16 mixed precision (on cuda: MFU against the bf16-input GEMM peak)", "FP32", 0},
        {"--n", DT_ARG_INT64, &gelu_n, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, (double)((int64_t)1 << 32), NULL, NULL,
         "gelu: elements", NULL, 0},
        {"--allreduce-chunk-bytes", DT_ARG_INT64, &ar_chunk, DT_ARG_HAS_MIN, 0, 0, NULL, NULL,
         "allreduce: ring chunk size in bytes (0: one message per segment; 1 MiB measured best at -np 2)", NULL, 0},
        {"--min-bytes", DT_ARG_INT64, &ar_min, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 4, 1 << 30, NULL, NULL,
         "allreduce: smallest buffer", NULL, 0},
        {"--max-bytes", DT_ARG_INT64, &ar_max, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 4, 1 << 30, NULL, NULL,
         "allreduce: largest buffer (sizes double from --min-bytes)", NULL, 0},
        {"--json", DT_ARG_STRING, &ar_json, 0, 0, 0, NULL, "FILE",
         "allreduce: also write rank 0's table to FILE as JSON (format dtbench-allreduce, for the simulator's fit)",
         "none", 0},
        {"--iters", DT_ARG_INT, &ar_iters, DT_ARG_HAS_MIN, 0, 0, NULL, NULL,
         "allreduce: timed calls per size and algorithm (0: 1 GiB / size, 10 to 5000); gelu: launches per trial "
         "(0: about 0.1 s)", NULL, 0},
        {"--pipeline-model-parallel-size", DT_ARG_INT, &pp_size, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 0, 64, NULL, NULL,
         "pipeline: stages p (0: every rank is a stage)", NULL, 0},
        {"--num-layers", DT_ARG_INT, &pp_layers, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 1024, NULL, NULL,
         "pipeline: transformer blocks", NULL, 0},
        {"--hidden-size", DT_ARG_INT, &pp_hidden, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 4, 65536, NULL, NULL,
         "pipeline: model width (4 heads)", NULL, 0},
        {"--pipeline-split", DT_ARG_STRING, &pp_split, 0, 0, 0, NULL, "N,N,...", "pipeline: blocks per stage",
         "even", 0},
        {"--trace-dir", DT_ARG_STRING, &pp_keep, 0, 0, 0, NULL, "DIR",
         "pipeline: keep each run's traces in DIR (SCHEDULE-mM.rankR.json, for Perfetto)", "temporary, removed", 0},
        {"--help", DT_ARG_FLAG, &help, 0, 0, 0, NULL, NULL, "print this help and exit", NULL, 0},
    };
    const int n_args = (int)(sizeof args / sizeof args[0]);
    const char *usage = "dtbench gemm|gelu|train|recompute|largebatch|amp|allreduce|pipeline [--flag value]...\n"
                        "       dtbench bubbles [--skip N] TRACE...\n"
                        "  gemm       cblas_sgemm peak (GFLOP/s) at --threads; --device cuda: cuBLAS FP32, TF32, bf16 and "
                        "fp16 peaks through the backend\n"
                        "  gelu       GPU: FP32 GELU vs the f16/bf16 half2 kernel, elements/s, GB/s and fraction of the "
                        "D2D copy bandwidth (goals: half >= 1.8x FP32, >= 80% of copy)\n"
                        "  train      tokens/s, achieved GFLOP/s and MFU against the GEMM peak measured in the same run "
                        "(--device cuda, --bf16, --fp16)\n"
                        "  recompute  peak activation bytes and step time per recomputation granularity / K\n"
                        "  largebatch base batch vs 8x batch with linear-scaled AdamW, LARS and LAMB (--steps: base "
                        "iterations)\n"
                        "  amp        fraction of gradients that underflow in fp16 with and without loss scaling "
                        "(--steps: FP32 training steps before the second measurement)\n"
                        "  allreduce  nccl-tests table of ring, tree, naive and mpi allreduce (run under mpirun)\n"
                        "  pipeline   every pipeline schedule for m = 2, 4, 8, 16 (run under mpirun -np p): step time, "
                        "bubble per stage against (p-1)/(m+p-1), peak activation bytes and weight versions per stage "
                        "(--steps: steps per run, default 6; --micro-batch-size default 4, --seq-length 64)\n"
                        "  tp         tensor parallelism for t = 1, 2, 4 (run under mpirun -np 4): f/g allreduces and "
                        "their bytes per step against the formula, their time, the step time\n"
                        "  simval     the simulator's validation matrix: real 2-rank runs predicted from a single-rank "
                        "profile and the links' fit (goal: mean |error| < 5%, none over 10%)\n"
                        "  simspeed   simulator events/s and the wall time of a 1024-device job (goals: > 10 M/s, < 10 s)\n"
                        "  viz        ms per frame of dtviz's timeline, headless 1400x800, on a ~100k-event simulated "
                        "trace (--events N, --frames K; goal: 60 frames/s)\n"
                        "  bubbles    one line per trace file (dtrain --trace under a pipeline): its stage's mean "
                        "bubble over the steps >= --skip (default 1)";
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        dt_args_print_help(argc < 2 ? stderr : stdout, usage, args, n_args);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "bubbles") == 0) return cmd_bubbles(argc, argv); /* file arguments: its own parser */
    if (strcmp(cmd, "simval") == 0) return dt_bench_simval(argc - 1, argv + 1);     /* bench/simval.c */
    if (strcmp(cmd, "simspeed") == 0) return dt_bench_simspeed(argc - 1, argv + 1); /* bench/simval.c */
    if (strcmp(cmd, "viz") == 0) return dt_bench_viz(argc - 1, argv + 1);           /* bench/vizbench.c */
    if (dt_args_parse("dtbench", args, n_args, argc - 1, argv + 1) != DT_ARGS_OK) return 2;
    if (help) {
        dt_args_print_help(stdout, usage, args, n_args);
        return 0;
    }
    if (skip_no_device) no_device_status = 77;
    if (fp16 && bf16) {
        fprintf(stderr, "dtbench: --fp16 and --bf16: choose one\n");
        return 2;
    }
    const int on_gpu = device && strcmp(device, "cuda") == 0;
    if (on_gpu && strcmp(cmd, "gemm") != 0 && strcmp(cmd, "gelu") != 0 && strcmp(cmd, "train") != 0) {
        fprintf(stderr, "dtbench: --device cuda: '%s' runs on the CPU only (the GPU commands are gemm, gelu and "
                        "train)\n", cmd);
        return 2;
    }
    if ((fp16 || bf16) && strcmp(cmd, "train") != 0) {
        fprintf(stderr, "dtbench: --%s: only train takes a precision\n", fp16 ? "fp16" : "bf16");
        return 2;
    }
    if (strcmp(cmd, "gelu") == 0) {
        if (device && !on_gpu) {
            fprintf(stderr, "dtbench: gelu --device cpu: the half2 GELU kernel exists on cuda only\n");
            return 2;
        }
        return cmd_gelu(gelu_n, ar_iters);
    }
    if (strcmp(cmd, "gemm") == 0) return on_gpu ? cmd_gemm_gpu() : cmd_gemm(threads);
    if (strcmp(cmd, "train") == 0)
        return cmd_train(on_gpu ? "cuda" : "cpu", threads, model, B, T, steps, warmup,
                         fp16 ? DT_F16 : bf16 ? DT_BF16 : DT_F32);
    if (strcmp(cmd, "recompute") == 0) return cmd_recompute(threads, model, B, T, steps, warmup);
    if (strcmp(cmd, "amp") == 0)
        return cmd_amp(threads, dt_args_given(args, n_args, "--steps") ? steps : 1000);
    if (strcmp(cmd, "largebatch") == 0)
        return cmd_largebatch(threads, dt_args_given(args, n_args, "--steps") ? steps : 1600,
                              dt_args_given(args, n_args, "--micro-batch-size") ? B : 64);
    if (strcmp(cmd, "allreduce") == 0) return cmd_allreduce(ar_chunk, ar_min, ar_max, ar_iters, ar_json);
    if (strcmp(cmd, "tp") == 0)
        return cmd_tp(threads, dt_args_given(args, n_args, "--micro-batch-size") ? B : 4,
                      dt_args_given(args, n_args, "--seq-length") && T > 0 ? T : 64, 4, 128,
                      dt_args_given(args, n_args, "--steps") ? steps : 5);
    if (strcmp(cmd, "pipeline") == 0) {
        int split[64] = {0};
        if (pp_split) {
            int64_t v[64];
            int count = 0;
            if (dt_args_parse_int_list("dtbench", "--pipeline-split", pp_split, DT_ARG_HAS_MIN, 1, 0, v, 64, &count) !=
                DT_ARGS_OK)
                return 2;
            for (int i = 0; i < count; i++) split[i] = (int)v[i];
        }
        return cmd_pipeline(pp_size, threads, dt_args_given(args, n_args, "--micro-batch-size") ? B : 4,
                            dt_args_given(args, n_args, "--seq-length") && T > 0 ? T : 64, pp_layers, pp_hidden, split,
                            dt_args_given(args, n_args, "--steps") ? steps : 6, pp_keep);
    }
    fprintf(stderr,
            "dtbench: '%s': unknown command (expected gemm, gelu, train, recompute, largebatch, amp, allreduce, "
            "pipeline, tp or bubbles)\n",
            cmd);
    return 2;
}
