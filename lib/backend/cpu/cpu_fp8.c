/* cpu_fp8.c: the CPU backend's FP8 ops, fp8_quantize and fp8_gemm
 * (dt_backend.h, dt_fp8.h).
 *
 * The CPU has no FP8 arithmetic; what it has is a bf16 GEMM with FP32
 * accumulation (oneDNN on AMX or AVX512-BF16, cpu_gemm.c), and every FP8
 * value is exactly a bf16. So the FP8 storage here is a float per element
 * holding the FP8 value fp8(x s) itself, and fp8_gemm is the ordinary
 * gemm on those floats: with the model's bf16 promise in force
 * (set_gemm_inputs(DT_BF16), which FP8 training implies) it runs on the
 * bf16 units, products of FP8 values exact, FP32 accumulation, then alpha
 * (the inputs' descales) applied to the FP32 result, which is what an FP8
 * tensor-core GEMM computes up to summation order. Blockwise tiles are
 * dequantized (power-of-two scales: exact in bf16) for the same GEMM.
 *
 * The element rounding is a bit-level form of dt_fp8.h's reference:
 * normal FP8 results round the float's mantissa to the format's bits
 * (nearest even, by the carry trick); FP8 subnormals by adding and
 * subtracting 2^(emin - mbits + 23), which leaves the quantum's multiples
 * (the FPU rounds to nearest even). tests/check_fp8.c checks it against
 * dt_fp8_round on every midpoint and on random inputs.
 *
 * Invariants: elementwise but for amax (a max) and the counts (integer
 * sums), so results are the same for any thread count. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_backend.h"
#include "dt_fp8.h"

#define DT__FP8_PAR_MIN ((size_t)1 << 15)

typedef struct dt__q8 {
    float max, minnorm, magic;
    int shift; /* 23 - mbits */
} dt__q8;

static dt__q8 dt__q8_of(dt_fp8_format f)
{
    const int mbits = f == DT_FP8_E5M2 ? 2 : 3, emin = f == DT_FP8_E5M2 ? -14 : -6;
    return (dt__q8){dt_fp8_max(f), ldexpf(1.0f, emin), ldexpf(1.0f, emin - mbits + 23), 23 - mbits};
}

static inline void dt__hist_add(uint32_t *h, float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if (u & 0x7fffffffu) h[(u >> 23) & 0xffu]++;
}

/* max |x| over rows [r0, r1) x cols [c0, c1) of x (ld cols) */
static float dt__amax(const float *x, size_t ld, size_t r0, size_t r1, size_t c0, size_t c1)
{
    float m = 0.0f;
    for (size_t i = r0; i < r1; i++) {
        const float *row = x + i * ld;
#pragma omp simd reduction(max : m)
        for (size_t j = c0; j < c1; j++) {
            const float a = fabsf(row[j]);
            m = a > m ? a : m; /* NaN compares false */
        }
    }
    return m;
}

typedef struct dt__acc {
    uint64_t sat, fl;
    float amax;
    float *col; /* 128 x 1 tiles: the columns' amaxes, then scales */
    uint32_t hist[DT_FP8_HIST];
} dt__acc;

/* rows [r0, r1) x cols [c0, c1) into q with scale s; dequant: q = r / s
 * (s a power of two: the product by 1/s is exact). Branch-free so that
 * the compiler vectorizes it: every path computed, the right one picked. */
static void dt__quant_rect(const dt__q8 *p, float *q, const float *x, size_t ld, size_t r0, size_t r1, size_t c0,
                           size_t c1, float s, const float *scol, int dequant, dt__acc *acc, int hist)
{
    const float max = p->max, minnorm = p->minnorm, magic = p->magic;
    const uint32_t half = (1u << (p->shift - 1)) - 1u, mask = ~((1u << p->shift) - 1u);
    const int shift = p->shift;
    uint64_t sat = 0, fl = 0;
    float amax = acc->amax;
    for (size_t i = r0; i < r1; i++) {
        const float *xr = x + i * ld;
        float *qr = q + i * ld;
#pragma omp simd reduction(+ : sat, fl) reduction(max : amax)
        for (size_t j = c0; j < c1; j++) {
            const float v = xr[j];
            const float xa = fabsf(v);
            amax = xa > amax ? xa : amax;
            const float sj = scol ? scol[j] : s; /* scol: a power of two per column (128 x 1 tiles) */
            const float inv = dequant ? 1.0f / sj : 1.0f;
            const float a = fabsf(v * sj);
            uint32_t u;
            memcpy(&u, &a, sizeof u);
            u = (u + half + ((u >> shift) & 1u)) & mask; /* mantissa to mbits, nearest even */
            float rn;
            memcpy(&rn, &u, sizeof rn);
            const float rs = (a + magic) - magic; /* the subnormal quantum's multiples */
            float r = a >= minnorm ? rn : rs;
            const int over = a > max;
            r = over ? max : r;
            sat += (uint64_t)over;
            fl += (uint64_t)(r == 0.0f && a != 0.0f);
            r = a != a ? a : r; /* NaN stays NaN */
            qr[j] = copysignf(r, v) * inv;
        }
        if (hist)
            for (size_t j = c0; j < c1; j++) dt__hist_add(acc->hist, xr[j]);
    }
    acc->sat += sat;
    acc->fl += fl;
    acc->amax = amax;
}

dt_status dt__cpu_fp8_quantize(dt_backend *be, void *qv, const float *x, int rows, int cols, const dt_fp8_quant *spec,
                               dt_fp8_qstats *st)
{
    (void)be;
    float *q = qv;
    const dt__q8 p = dt__q8_of(spec->format);
    const size_t R = (size_t)rows, Cn = (size_t)cols, n = R * Cn;
    const int tiles = spec->tile_rows > 0;
    float s = spec->scale;
    if (!tiles && s == 0.0f) { /* tensorwise: the tensor's own amax first */
        float m = 0.0f;
#pragma omp parallel for schedule(static) reduction(max : m) if (n >= DT__FP8_PAR_MIN)
        for (size_t i = 0; i < R; i++) {
            const float a = dt__amax(x, Cn, i, i + 1, 0, Cn);
            m = a > m ? a : m;
        }
        s = dt_fp8_scale_from_amax(m, spec->format, spec->margin, 0);
        if (s == 0.0f) s = 1.0f;
    }
    const size_t tr = tiles ? (size_t)spec->tile_rows : R, tc = tiles ? (size_t)spec->tile_cols : Cn;
    const size_t nbr = (R + tr - 1) / tr, nbc = (Cn + tc - 1) / tc, nb = nbr * nbc;
    const int hist = st->hist != NULL;
    /* one work item per tile (per row without tiles), each thread its own counts */
    const size_t items = tiles ? (tc == 1 ? nbr : nb) : R;
    dt_status status = DT_OK;
    uint64_t sat = 0, fl = 0;
    float amax = 0.0f;
#pragma omp parallel if (n >= DT__FP8_PAR_MIN)
    {
        dt__acc accv; /* on the thread's stack: no allocation per call */
        memset(&accv, 0, sizeof accv);
        dt__acc *acc = &accv;
        {
#pragma omp for schedule(static)
            for (size_t it = 0; it < items; it++) {
                if (tiles && tc == 1) { /* 128 x 1: a block of rows, a scale per column */
                    const size_t r0 = it * tr, r1 = r0 + tr < R ? r0 + tr : R;
                    if (!acc->col) acc->col = malloc(Cn * sizeof *acc->col);
                    if (!acc->col) {
#pragma omp atomic write
                        status = DT_ERR_NOMEM;
                        continue;
                    }
                    for (size_t j = 0; j < Cn; j++) acc->col[j] = 0.0f;
                    for (size_t i = r0; i < r1; i++) {
                        const float *xr = x + i * Cn;
                        float *cm = acc->col;
#pragma omp simd
                        for (size_t j = 0; j < Cn; j++) {
                            const float a = fabsf(xr[j]);
                            cm[j] = a > cm[j] ? a : cm[j];
                        }
                    }
                    for (size_t j = 0; j < Cn; j++) {
                        const float ts = dt_fp8_scale_from_amax(acc->col[j], spec->format, spec->margin, 1);
                        acc->col[j] = ts == 0.0f ? 1.0f : ts;
                    }
                    dt__quant_rect(&p, q, x, Cn, r0, r1, 0, Cn, 1.0f, acc->col, 1, acc, hist);
                } else if (tiles) {
                    const size_t bi = it / nbc, bj = it % nbc;
                    const size_t r0 = bi * tr, r1 = r0 + tr < R ? r0 + tr : R;
                    const size_t c0 = bj * tc, c1 = c0 + tc < Cn ? c0 + tc : Cn;
                    float ts = dt_fp8_scale_from_amax(dt__amax(x, Cn, r0, r1, c0, c1), spec->format, spec->margin, 1);
                    if (ts == 0.0f) ts = 1.0f;
                    dt__quant_rect(&p, q, x, Cn, r0, r1, c0, c1, ts, NULL, 1, acc, hist);
                } else {
                    dt__quant_rect(&p, q, x, Cn, it, it + 1, 0, Cn, s, NULL, spec->dequant, acc, hist);
                }
            }
#pragma omp critical(dt__fp8_merge)
            {
                sat += acc->sat;
                fl += acc->fl;
                if (acc->amax > amax) amax = acc->amax;
                if (hist)
                    for (int b = 0; b < DT_FP8_HIST; b++) st->hist[b] += acc->hist[b];
            }
            free(acc->col);
        }
    }
    if (status != DT_OK) return DT_FAIL(status, "cpu backend: fp8_quantize: out of memory for its counts");
    st->amax = amax;
    st->scale = tiles ? 1.0f : s;
    st->saturated = sat;
    st->flushed = fl;
    return DT_OK;
}

dt_status dt__cpu_fp8_gemm(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha, const void *A,
                           dt_fp8_format fa, int lda, const void *B, dt_fp8_format fb, int ldb, float beta, float *C,
                           int ldc)
{
    (void)fa, (void)fb; /* the storage holds the values themselves */
    /* alpha (the descales, new every step or call) is applied here, not
     * by the GEMM: oneDNN bakes alpha into its cached primitives
     * (cpu_dnnl.c), and a new alpha per call would compile a new kernel
     * per call (tensorwise scaling ran 2.4x slower so) */
    if (alpha == 1.0f) return dt__cpu_gemm(be, transa, transb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    const size_t rows = (size_t)M, cols = (size_t)N;
    if (beta == 0.0f) {
        DT_CHECK(dt__cpu_gemm(be, transa, transb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc));
#pragma omp parallel for schedule(static) if (rows * cols >= DT__FP8_PAR_MIN)
        for (size_t i = 0; i < rows; i++) {
            float *c = C + i * (size_t)ldc;
#pragma omp simd
            for (size_t j = 0; j < cols; j++) c[j] *= alpha;
        }
        return DT_OK;
    }
    dt__cpu_impl *im = be->impl;
    if (im->fp8_cap < rows * cols) {
        float *p = realloc(im->fp8_acc, rows * cols * sizeof *p);
        if (!p) return DT_FAIL(DT_ERR_NOMEM, "cpu backend: fp8_gemm: out of memory for a %d x %d result", M, N);
        im->fp8_acc = p;
        im->fp8_cap = rows * cols;
    }
    float *acc = im->fp8_acc;
    DT_CHECK(dt__cpu_gemm(be, transa, transb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, acc, N));
#pragma omp parallel for schedule(static) if (rows * cols >= DT__FP8_PAR_MIN)
    for (size_t i = 0; i < rows; i++) {
        float *c = C + i * (size_t)ldc;
        const float *a = acc + i * cols;
#pragma omp simd
        for (size_t j = 0; j < cols; j++) c[j] = alpha * a[j] + beta * c[j];
    }
    return DT_OK;
}
