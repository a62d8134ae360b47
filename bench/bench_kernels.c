/* bench_kernels.c: the compute-kernel benchmarks: `dtbench gemm` (the
 * cblas_sgemm peak on the CPU; cuBLAS FP32, TF32, bf16 and fp16 peaks
 * through the backend with --device cuda, and cuBLASLt's e4m3 peak through
 * be->fp8_gemm beside them) and `dtbench gelu` (the FP32
 * and half2 GELU kernels against the D2D copy bandwidth). The GEMM peaks
 * are also the reference of `dtbench train`'s MFU. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "dtbench.h"

/* Best GFLOP/s of cblas_sgemm over square sizes with OpenBLAS's own
 * threading at `threads` threads (the backend keeps OpenBLAS single-threaded
 * and splits GEMMs itself, so the count is set here and restored). */
double dtbench_sgemm_peak(int threads, int verbose)
{
    /* the threads it starts must find room for their buffers (dt_backend.h) */
    if (dt_backend_cpu_blas_room(threads - 1, "OpenBLAS's threads of the sgemm peak") != DT_OK)
        dtbench_die("sgemm peak");
    openblas_set_num_threads(threads);
    static const int sizes[] = {1024, 1536, 2048};
    double best = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n),
              *c = malloc(sizeof(float) * n * n);
        if (!a || !b || !c) {
            fprintf(stderr, "dtbench: out of memory for the %d x %d sgemm peak\n", n, n);
            dt_args_exit_failed(1);
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

/* GFLOP/s of be->gemm at one shape (C = A B^T for transb, as a linear
 * layer's forward; A B otherwise), best of 3 timed rounds of ~0.3 s each,
 * with FP32 or bf16 inputs (be->set_gemm_inputs). Values are bf16, so both
 * precisions multiply the same numbers. */
double dtbench_cpu_gemm_rate(dt_backend *be, int M, int N, int K, int transb, dt_dtype inputs)
{
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N), *c = malloc(sizeof(float) * M * N);
    if (!a || !b || !c) {
        fprintf(stderr, "dtbench: out of memory for a %d x %d x %d gemm\n", M, N, K);
        dt_args_exit_failed(1);
    }
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(int)(i % 17 - 8) * 0.125f;
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(int)(i % 13 - 6) * 0.25f;
    if (be->set_gemm_inputs(be, inputs) != DT_OK) dtbench_die("set_gemm_inputs");
    const int ldb = transb ? K : N;
    if (be->gemm(be, 0, transb, M, N, K, 1.0f, a, K, b, ldb, 0.0f, c, N) != DT_OK) dtbench_die("gemm");
    const double flops = 2.0 * M * N * K;
    int reps = (int)(3e9 / flops) + 1;
    double best = 0;
    for (int r = 0; r < 3; r++) {
        const int64_t t0 = dt_time_ns();
        for (int k = 0; k < reps; k++)
            if (be->gemm(be, 0, transb, M, N, K, 1.0f, a, K, b, ldb, 0.0f, c, N) != DT_OK) dtbench_die("gemm");
        const double g = flops * reps / ((double)(dt_time_ns() - t0) * 1e-9) / 1e9;
        if (g > best) best = g;
    }
    if (be->set_gemm_inputs(be, DT_F32) != DT_OK) dtbench_die("set_gemm_inputs");
    free(a), free(b), free(c);
    return best;
}

/* Best GFLOP/s of the CPU backend's own be->gemm with bf16 inputs (oneDNN
 * where it has a kernel) on square sizes: the bf16 peak a bf16 run's MFU is
 * taken against. */
double dtbench_cpu_bf16_peak(dt_backend *be, int verbose)
{
    static const int sizes[] = {1024, 2048};
    double best = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int n = sizes[s];
        const double g = dtbench_cpu_gemm_rate(be, n, n, n, 1, DT_BF16);
        if (verbose) printf("  be->gemm bf16 %5d x %5d x %5d   %8.1f GFLOP/s\n", n, n, n, g);
        if (g > best) best = g;
    }
    return best;
}

double dtbench_cpu_bf16_pass_ns(dt_backend *be)
{
    /* 1M floats, 4 MiB: the size of one (B, T, C) activation of the runs
     * dtsim predicts (small, B = 16, T = 256: 1.5M), so the passes see the
     * caches the model's loops see, not main memory alone */
    const size_t n = (size_t)1 << 20;
    float *x = malloc(n * sizeof(float));
    uint16_t *h = malloc(n * sizeof(uint16_t));
    if (!x || !h) dtbench_die("out of memory for the bf16 pass");
    for (size_t i = 0; i < n; i++) x[i] = (float)(int)(i % 2001 - 1000) * 0.003f;
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        const int64_t t0 = dt_time_ns();
        for (int k = 0; k < 16; k++) {
            if (be->round(be, x, DT_BF16, n) != DT_OK) dtbench_die("round");
            if (be->cast(be, h, DT_BF16, x, DT_F32, n) != DT_OK) dtbench_die("cast");
        }
        const double ns = (double)(dt_time_ns() - t0) / (32.0 * (double)n);
        if (ns < best) best = ns;
    }
    free(x), free(h);
    return best;
}

int dtbench_cmd_gemm(int threads)
{
    dt_backend *be;
    if (dt_backend_create("cpu", threads, &be) != DT_OK) dtbench_die("cpu backend");
    printf("# dtbench gemm: cblas_sgemm (OpenBLAS), %d thread(s)\n", be->threads);
    double peak = dtbench_sgemm_peak(be->threads, 1);
    printf("peak_gflops %.1f\n", peak);
    /* the backend's own GEMMs at the `small` preset's shapes (B*T = 4096 rows, C = 384): FP32 through
     * OpenBLAS, bf16 through oneDNN where it has a real kernel (else the same FP32 GEMM) */
    const char *engine = dt_backend_cpu_bf16_engine();
    printf("# be->gemm at dtrain's shapes: fp32 = OpenBLAS; bf16 = %s\n",
           engine ? engine : "none: this build or CPU has no oneDNN bf16 kernel, so FP32 OpenBLAS again");
    printf("  %-26s %10s %10s %7s\n", "shape M x N x K", "fp32", "bf16", "ratio");
    static const struct {
        const char *what;
        int M, N, K, transb;
    } shapes[] = {{"qkv", 4096, 1152, 384, 1},       {"attn proj", 4096, 384, 384, 1}, {"fc", 4096, 1536, 384, 1},
                  {"fc proj", 4096, 384, 1536, 1},   {"fc dinp", 4096, 384, 1536, 0},  {"square 1024", 1024, 1024, 1024, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const double f32 = dtbench_cpu_gemm_rate(be, shapes[i].M, shapes[i].N, shapes[i].K, shapes[i].transb, DT_F32);
        const double b16 = dtbench_cpu_gemm_rate(be, shapes[i].M, shapes[i].N, shapes[i].K, shapes[i].transb, DT_BF16);
        char name[64];
        snprintf(name, sizeof name, "%s %dx%dx%d", shapes[i].what, shapes[i].M, shapes[i].N, shapes[i].K);
        printf("  %-26s %10.1f %10.1f %6.2fx\n", name, f32, b16, b16 / f32);
    }
    printf("bf16_engine %s\n", engine ? engine : "none");
    /* the rate a dtsim hardware file's peak_flops_bf16 takes (sim/dts_hw.h) */
    printf("bf16_peak_gflops %.1f\n", dtbench_cpu_bf16_peak(be, 1));
    /* and its bf16_pass_ns: a rounding (be->round) and a cast to bf16
     * (be->cast) of 1M floats, the mean ns per element, best of 3 */
    printf("bf16_pass_ns %.4f\n", dtbench_cpu_bf16_pass_ns(be));
    dt_backend_destroy(be);
    return 0;
}

typedef dt_status (*gpu_op)(dt_backend *be, void *ctx);

/* Seconds per call: `warm` untimed calls, then the best of 3 trials of
 * *reps calls, each trial bracketed by be->synchronize (ops are
 * asynchronous on the GPU). *reps <= 0: chosen from one timed call so that
 * a trial takes about 0.1 s (5 to 2000 calls). */
static double gpu_time(dt_backend *be, gpu_op op, void *ctx, int warm, int *reps, const char *what)
{
    for (int i = 0; i < warm; i++) dtbench_check(op(be, ctx), what);
    dtbench_check(be->synchronize(be), "synchronize");
    if (*reps <= 0) {
        int64_t t0 = dt_time_ns();
        dtbench_check(op(be, ctx), what);
        dtbench_check(be->synchronize(be), "synchronize");
        double one = (dt_time_ns() - t0) * 1e-9, r = 0.1 / (one > 1e-7 ? one : 1e-7);
        *reps = r < 5 ? 5 : r > 2000 ? 2000 : (int)r;
    }
    double best = 1e30;
    for (int t = 0; t < 3; t++) {
        int64_t t0 = dt_time_ns();
        for (int i = 0; i < *reps; i++) dtbench_check(op(be, ctx), what);
        dtbench_check(be->synchronize(be), "synchronize");
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
const char *const dtbench_gemm_kind_name[] = {"fp32", "tf32", "bf16", "fp16"};

/* Put the backend in that GEMM mode (0), or 1 when it has no
 * set_gemm_inputs for the 16-bit kinds. */
static int gpu_gemm_mode(dt_backend *be, dtbench_gemm_kind k)
{
    if ((k == GEMM_BF16 || k == GEMM_FP16) && !be->set_gemm_inputs) return 1;
    dtbench_check(dt__cuda_set_tf32(be, k == GEMM_TF32), "TF32 setting");
    if (be->set_gemm_inputs)
        dtbench_check(be->set_gemm_inputs(be, k == GEMM_BF16   ? DT_BF16
                                              : k == GEMM_FP16 ? DT_F16
                                                               : DT_F32),
                      "GEMM inputs");
    return 0;
}

/* Best GFLOP/s of be->gemm (cuBLAS) on the square sizes in mode k (the
 * backend is left in that mode); 0 when the backend lacks the mode. The
 * operands are multiples of 1/64 in [-1, 1): exact in every mode, so the
 * 16-bit modes' promise holds (their casts are counted in the time). */
double dtbench_gpu_gemm_peak(dt_backend *be, dtbench_gemm_kind k, int verbose)
{
    if (gpu_gemm_mode(be, k)) {
        if (verbose) printf("  cublas %-4s n/a: this backend has no set_gemm_inputs\n", dtbench_gemm_kind_name[k]);
        return 0;
    }
    const int nmax = gpu_gemm_sizes[sizeof gpu_gemm_sizes / sizeof gpu_gemm_sizes[0] - 1];
    const size_t nn = (size_t)nmax * nmax;
    float *h = malloc(nn * sizeof(float));
    if (!h) dtbench_die("out of memory");
    for (size_t i = 0; i < nn; i++) h[i] = floorf(bench_value(i, -64.0f, 64.0f)) / 64.0f;
    void *a, *b, *c;
    dtbench_check(be->alloc(be, nn * sizeof(float), &a), "alloc");
    dtbench_check(be->alloc(be, nn * sizeof(float), &b), "alloc");
    dtbench_check(be->alloc(be, nn * sizeof(float), &c), "alloc");
    dtbench_check(be->copy(be, a, h, nn * sizeof(float), DT_COPY_H2D), "copy");
    dtbench_check(be->copy(be, b, h, nn * sizeof(float), DT_COPY_H2D), "copy");
    free(h);
    double best = 0;
    for (size_t s = 0; s < sizeof gpu_gemm_sizes / sizeof gpu_gemm_sizes[0]; s++) {
        gemm_ctx g = {gpu_gemm_sizes[s], a, b, c};
        int reps = 0;
        double sec = gpu_time(be, op_gemm, &g, 2, &reps, "gemm");
        double gf = 2.0 * g.n * g.n * g.n / sec / 1e9;
        if (verbose)
            printf("  cublas %-4s %5d x %5d x %5d   %9.1f GFLOP/s   (%d calls per trial)\n", dtbench_gemm_kind_name[k],
                   g.n, g.n, g.n, gf, reps);
        if (gf > best) best = gf;
    }
    be->free(be, a), be->free(be, b), be->free(be, c);
    return best;
}

typedef struct fp8_ctx {
    int n;
    const float *x; /* n x n floats */
    void *qa, *qb;  /* their e4m3 storage (fp8_quantize) */
    float *c;
    int quantize; /* 1: each call converts both operands first */
} fp8_ctx;

static dt_status op_fp8_gemm(dt_backend *be, void *p)
{
    fp8_ctx *g = p;
    if (g->quantize) {
        const dt_fp8_quant spec = {.format = DT_FP8_E4M3, .scale = 1.0f}; /* a delayed scale: one pass each */
        dt_fp8_qstats st = {0};
        DT_CHECK(be->fp8_quantize(be, g->qa, g->x, g->n, g->n, &spec, &st));
        DT_CHECK(be->fp8_quantize(be, g->qb, g->x, g->n, g->n, &spec, &st));
    }
    /* C = A B^T: both operands K-contiguous, cuBLASLt's FP8 "TN" layout read in place */
    return be->fp8_gemm(be, 0, 1, g->n, g->n, g->n, 1.0f, g->qa, DT_FP8_E4M3, g->n, g->qb, DT_FP8_E4M3, g->n, 0.0f,
                        g->c, g->n);
}

/* Best GFLOP/s of be->fp8_gemm (cuBLASLt, e4m3 x e4m3, FP32 out) on the
 * square sizes; *with_q: the same counting the two fp8_quantize calls a
 * training GEMM makes (each synchronizes: it returns its statistics).
 * 0 with a line saying why when the backend or the GPU has no FP8 GEMM. */
static double gpu_fp8_peak(dt_backend *be, double *with_q)
{
    *with_q = 0;
    if (!be->fp8_gemm) {
        printf("  cublaslt fp8  n/a: this backend has no fp8_gemm\n");
        return 0;
    }
    const int nmax = gpu_gemm_sizes[sizeof gpu_gemm_sizes / sizeof gpu_gemm_sizes[0] - 1];
    const size_t nn = (size_t)nmax * nmax;
    float *h = malloc(nn * sizeof(float));
    if (!h) dtbench_die("out of memory");
    for (size_t i = 0; i < nn; i++) h[i] = floorf(bench_value(i, -64.0f, 64.0f)) / 64.0f;
    void *x, *qa, *qb, *c;
    dtbench_check(be->alloc(be, nn * sizeof(float), &x), "alloc");
    dtbench_check(be->alloc(be, nn * sizeof(float), &qa), "alloc"); /* fp8_quantize: room for floats */
    dtbench_check(be->alloc(be, nn * sizeof(float), &qb), "alloc");
    dtbench_check(be->alloc(be, nn * sizeof(float), &c), "alloc");
    dtbench_check(be->copy(be, x, h, nn * sizeof(float), DT_COPY_H2D), "copy");
    free(h);
    double best = 0;
    for (size_t s = 0; s < sizeof gpu_gemm_sizes / sizeof gpu_gemm_sizes[0]; s++) {
        fp8_ctx g = {gpu_gemm_sizes[s], x, qa, qb, c, 0};
        const dt_fp8_quant spec = {.format = DT_FP8_E4M3, .scale = 1.0f};
        dt_fp8_qstats qs = {0};
        dtbench_check(be->fp8_quantize(be, qa, x, g.n, g.n, &spec, &qs), "fp8_quantize"); /* the operands, once */
        dtbench_check(be->fp8_quantize(be, qb, x, g.n, g.n, &spec, &qs), "fp8_quantize");
        const dt_status st =
            be->fp8_gemm(be, 0, 1, g.n, g.n, g.n, 1.0f, qa, DT_FP8_E4M3, g.n, qb, DT_FP8_E4M3, g.n, 0.0f, c, g.n);
        if (st != DT_OK) {
            printf("  cublaslt fp8  n/a: %s\n", dt_last_error());
            break;
        }
        for (g.quantize = 0; g.quantize < 2; g.quantize++) {
            int reps = 0;
            double sec = gpu_time(be, op_fp8_gemm, &g, 2, &reps, "fp8 gemm");
            double gf = 2.0 * g.n * g.n * g.n / sec / 1e9;
            printf("  cublaslt fp8 %s %5d x %5d x %5d   %9.1f GFLOP/s   (%d calls per trial)\n",
                   g.quantize ? "+quantize" : "e4m3     ", g.n, g.n, g.n, gf, reps);
            double *slot = g.quantize ? with_q : &best;
            if (gf > *slot) *slot = gf;
        }
    }
    be->free(be, x), be->free(be, qa), be->free(be, qb), be->free(be, c);
    return best;
}

int dtbench_cmd_gemm_gpu(void)
{
    dt_backend *be = dtbench_gpu_backend("gemm");
    printf("# dtbench gemm --device cuda: cuBLAS through be->gemm (cublasGemmEx, FP32 buffers in and out), C = A B "
           "on square sizes; best of 3 trials after 2 warm-up calls\n");
    printf("# fp32: CUBLAS_COMPUTE_32F (exact FP32, the backend's default); tf32: CUBLAS_COMPUTE_32F_FAST_TF32 "
           "(dt__cuda_set_tf32); bf16/fp16: be->set_gemm_inputs, the backend casts A and B to 16 bits (counted) and "
           "accumulates in FP32 on tensor cores (the --bf16/--fp16 training path)\n");
    double p[4];
    for (int k = 0; k < 4; k++) p[k] = dtbench_gpu_gemm_peak(be, (dtbench_gemm_kind)k, 1);
    gpu_gemm_mode(be, GEMM_FP32);
    for (int k = 0; k < 4; k++)
        if (p[k] > 0) printf("peak_gflops_%s %.1f\n", dtbench_gemm_kind_name[k], p[k]);
    printf("tf32_vs_fp32 %.2f\n", p[GEMM_TF32] / p[GEMM_FP32]);
    if (p[GEMM_BF16] > 0) printf("bf16_vs_fp32 %.2f\n", p[GEMM_BF16] / p[GEMM_FP32]);
    printf("# fp8: be->fp8_gemm, cuBLASLt e4m3 x e4m3 -> FP32 on operands fp8_quantize made (alone, then with "
           "both operands converted per call, as a training GEMM does); compute capability 8.9+\n");
    double q8, p8 = gpu_fp8_peak(be, &q8);
    if (p8 > 0) {
        printf("peak_gflops_fp8 %.1f\n", p8);
        printf("fp8_with_quantize_gflops %.1f\n", q8);
        if (p[GEMM_BF16] > 0) printf("fp8_vs_bf16 %.2f\n", p8 / p[GEMM_BF16]);
    }
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
int dtbench_cmd_gelu(int64_t n64, int iters)
{
    dt_backend *be = dtbench_gpu_backend("gelu");
    const size_t n = (size_t)n64;
    float *hx = malloc(n * sizeof(float)), *hy = malloc(n * sizeof(float)), *hr = malloc(n * sizeof(float));
    if (!hx || !hy || !hr) dtbench_die("out of memory");
    for (size_t i = 0; i < n; i++) hx[i] = bench_value(i, -6.0f, 6.0f);
    void *x32, *y32, *x16, *y16;
    dtbench_check(be->alloc(be, n * 4, &x32), "alloc");
    dtbench_check(be->alloc(be, n * 4, &y32), "alloc");
    dtbench_check(be->alloc(be, n * 2, &x16), "alloc");
    dtbench_check(be->alloc(be, n * 2, &y16), "alloc");
    dtbench_check(be->copy(be, x32, hx, n * 4, DT_COPY_H2D), "copy");

    const int warm = 3;
    printf("# dtbench gelu --device cuda: GELU (tanh approximation) on n = %zu elements in [-6, 6)\n", n);
    printf("# per kernel: %d warm-up launches, then the best of 3 trials of R launches, each bracketed by "
           "be->synchronize\n",
           warm);
    printf("# GB/s = (bytes read + bytes written) / time: 8 bytes per element in FP32, 4 in f16/bf16; copy = "
           "be->copy DT_COPY_D2D of the same bytes, counted the same way\n");
    printf("%-12s %8s %10s %10s %9s %8s\n", "kernel", "R", "us/launch", "Gelem/s", "GB/s", "of_copy");

    gelu_ctx g = {y32, x32, n, n * 4, DT_F32};
    int r_c32 = iters, r_g32 = iters, r_c16 = iters, r_h[2] = {iters, iters};
    double t_c32 = gpu_time(be, op_copy, &g, warm, &r_c32, "D2D copy");
    double t_g32 = gpu_time(be, op_gelu_f32, &g, warm, &r_g32, "FP32 GELU");
    dtbench_check(be->copy(be, hy, y32, n * 4, DT_COPY_D2H), "copy");
    g = (gelu_ctx){y16, x16, n, n * 2, DT_F16};
    double t_c16 = gpu_time(be, op_copy, &g, warm, &r_c16, "D2D copy");
    const double c32 = 2.0 * n * 4 / t_c32 / 1e9, c16 = 2.0 * n * 2 / t_c16 / 1e9;

    static const dt_dtype types[2] = {DT_F16, DT_BF16};
    static const char *const tname[2] = {"gelu_f16", "gelu_bf16"};
    double t_h[2];
    size_t wrong[2];
    double maxerr[2];
    for (int k = 0; k < 2; k++) {
        dtbench_check(be->cast(be, x16, types[k], x32, DT_F32, n), "cast");
        g = (gelu_ctx){y16, x16, n, n * 2, types[k]};
        t_h[k] = gpu_time(be, op_gelu_half, &g, warm, &r_h[k], tname[k]);
        /* widen the half result into y32 (the FP32 result is on the host already) and bring it back */
        dtbench_check(be->cast(be, y32, DT_F32, y16, types[k], n), "cast");
        dtbench_check(be->copy(be, hr, y32, n * 4, DT_COPY_D2H), "copy");
        double u = types[k] == DT_F16 ? 0x1p-11 : 0x1p-8;
        wrong[k] = count_wrong(hr, hy, hx, n, 1e-6, 2 * u, 2 * u, &maxerr[k]);
    }

    gelu_row("copy_f32", r_c32, t_c32, n, n * 8, 0);
    gelu_row("gelu_f32", r_g32, t_g32, n, n * 8, c32);
    gelu_row("copy_16bit", r_c16, t_c16, n, n * 4, 0);
    for (int k = 0; k < 2; k++) gelu_row(tname[k], r_h[k], t_h[k], n, n * 4, c16);

    /* correctness: the FP32 GPU GELU against the CPU backend */
    dt_backend *cpu;
    dtbench_check(dt_backend_create("cpu", 0, &cpu), "cpu backend");
    dtbench_check(cpu->gelu_forward(cpu, hr, hx, n), "cpu GELU");
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
        dtbench_goal_line(key, t_g32 / t_h[k], 1.8, "(elements/s, half / FP32)");
    }
    for (int k = 0; k < 2; k++) {
        char key[48];
        snprintf(key, sizeof key, "%s_of_copy", tname[k]);
        dtbench_goal_line(key, (2.0 * n * 2 / t_h[k] / 1e9) / c16, 0.8, "(GB/s / D2D copy GB/s of the same bytes)");
    }
    be->free(be, x32), be->free(be, y32), be->free(be, x16), be->free(be, y16);
    dt_backend_destroy(be);
    free(hx), free(hy), free(hr);
    int bad = w32 || wrong[0] || wrong[1];
    if (bad) fprintf(stderr, "dtbench gelu: wrong results (see the check lines)\n");
    return bad ? 1 : 0;
}
