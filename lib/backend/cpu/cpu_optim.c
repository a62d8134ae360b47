/* cpu_optim.c: the CPU backend's reductions and optimizer updates on flat
 * float buffers (sumsq, scale, AdamW, SGD, LARS, LAMB's direction, axpy);
 * semantics in dt_backend.h, per-element math in dt_math_hd.h (inlined
 * into the vectorized loops, shared with the CUDA kernels).
 *
 * Invariants: every op is elementwise except sumsq, so results never depend
 * on the thread count. sumsq splits x into at most DT__SUMSQ_MAX_CHUNKS
 * chunks whose bounds depend only on n; each chunk is summed in double by a
 * fixed unrolled loop and the partials are added in chunk order, so the
 * result is bit-identical for any thread count (no `reduction` clause,
 * whose combine order is unspecified). Small inputs run on one thread: the
 * OpenMP fork costs more than the work below DT__OPT_PAR_MIN elements. */
#include "cpu_backend.h"
#include "dt_math_hd.h"

#define DT__OPT_PAR_MIN ((size_t)1 << 15)
#define DT__SUMSQ_MAX_CHUNKS 256
#define DT__SUMSQ_MIN_CHUNK ((size_t)8192)

/* Sum of squares of x[0..n) in double: 8 independent lanes (which GCC maps
 * to one AVX-512 register, or two AVX2 ones) combined in a fixed order. */
static double dt__sumsq_chunk(const float *x, size_t n)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            double v = (double)x[i + k];
            acc[k] += v * v;
        }
    for (; i < n; i++) {
        double v = (double)x[i];
        acc[0] += v * v;
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

dt_status dt__cpu_sumsq(dt_backend *be, const float *x, size_t n, double *out)
{
    (void)be;
    size_t nchunks = (n + DT__SUMSQ_MIN_CHUNK - 1) / DT__SUMSQ_MIN_CHUNK;
    if (nchunks > DT__SUMSQ_MAX_CHUNKS) nchunks = DT__SUMSQ_MAX_CHUNKS;
    if (nchunks <= 1) {
        *out = n ? dt__sumsq_chunk(x, n) : 0.0;
        return DT_OK;
    }
    /* Chunk c covers [c*len, min(n, (c+1)*len)); len a multiple of 16 floats
     * so every chunk but the last starts 64-byte aligned relative to x. */
    size_t len = (n + nchunks - 1) / nchunks;
    len = (len + 15) & ~(size_t)15;
    double partial[DT__SUMSQ_MAX_CHUNKS];
    long nc = (long)nchunks;
#pragma omp parallel for schedule(static) if (n >= DT__OPT_PAR_MIN)
    for (long c = 0; c < nc; c++) {
        size_t lo = (size_t)c * len;
        size_t hi = lo + len < n ? lo + len : n;
        partial[c] = lo < hi ? dt__sumsq_chunk(x + lo, hi - lo) : 0.0;
    }
    double s = 0.0;
    for (long c = 0; c < nc; c++) s += partial[c];
    *out = s;
    return DT_OK;
}

dt_status dt__cpu_scale(dt_backend *be, float *x, float s, size_t n)
{
    (void)be;
    if (s == 1.0f) return DT_OK;
#pragma omp parallel for simd schedule(static) if (n >= DT__OPT_PAR_MIN)
    for (size_t i = 0; i < n; i++) x[i] *= s;
    return DT_OK;
}

/* The loop vectorizes only under -fno-math-errno: with errno semantics GCC
 * guards each sqrtf with a branch (the argument is never negative here, so
 * errno could never be set). It is memory-bound either way: 28 bytes of
 * traffic per element. */
dt_status dt__cpu_adamw_update(dt_backend *be, float *p, const float *g, float *m, float *v, size_t n, float lr,
                               float beta1, float beta2, float eps, float wd, float bc1, float bc2, float grad_scale)
{
    (void)be;
    const float a1 = 1.0f - beta1, a2 = 1.0f - beta2;
    const float ibc1 = 1.0f / bc1, ibc2 = 1.0f / bc2;
#pragma omp parallel for simd schedule(static) if (n >= DT__OPT_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        p[i] = dt__adamw(p[i], g[i] * grad_scale, &m[i], &v[i], lr, beta1, beta2, a1, a2, ibc1, ibc2, eps, wd);
    return DT_OK;
}

dt_status dt__cpu_sgd_update(dt_backend *be, float *p, const float *g, float *buf, size_t n, float lr, float momentum,
                             float wd, float grad_scale, int nesterov, int first)
{
    (void)be;
    if (momentum == 0.0f) {
#pragma omp parallel for simd schedule(static) if (n >= DT__OPT_PAR_MIN)
        for (size_t i = 0; i < n; i++) p[i] = dt__sgd_plain(p[i], g[i] * grad_scale, &buf[i], lr, wd);
        return DT_OK;
    }
    /* first is a constant in each loop, so each inlines to its own branch. */
    if (first) {
#pragma omp parallel for simd schedule(static) if (n >= DT__OPT_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            p[i] = dt__sgd_momentum(p[i], g[i] * grad_scale, &buf[i], lr, momentum, wd, nesterov, 1);
        return DT_OK;
    }
#pragma omp parallel for simd schedule(static) if (n >= DT__OPT_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        p[i] = dt__sgd_momentum(p[i], g[i] * grad_scale, &buf[i], lr, momentum, wd, nesterov, 0);
    return DT_OK;
}

/* LARS on one tensor; the trust ratio comes from the caller. 20 bytes of
 * traffic per element (p, buf read and written, g read). */
dt_status dt__cpu_lars_update(dt_backend *be, float *p, const float *g, float *buf, size_t n, float lr, float trust,
                              float momentum, float wd, float grad_scale)
{
    (void)be;
    const float a = lr * trust;
#pragma omp parallel for simd schedule(static) if (n >= DT__OPT_PAR_MIN)
    for (size_t i = 0; i < n; i++) p[i] = dt__lars(p[i], g[i] * grad_scale, &buf[i], a, momentum, wd);
    return DT_OK;
}

/* LAMB's first half: the same moments as AdamW, but the normalised step
 * plus decay goes to u instead of p (the caller scales it by the trust
 * ratio, which needs ||u||, a second pass). */
dt_status dt__cpu_lamb_direction(dt_backend *be, float *u, const float *p, const float *g, float *m, float *v, size_t n,
                                 float beta1, float beta2, float eps, float wd, float bc1, float bc2, float grad_scale)
{
    (void)be;
    const float a1 = 1.0f - beta1, a2 = 1.0f - beta2;
    const float ibc1 = 1.0f / bc1, ibc2 = 1.0f / bc2;
#pragma omp parallel for simd schedule(static) if (n >= DT__OPT_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        u[i] = dt__adam_direction(g[i] * grad_scale, &m[i], &v[i], beta1, beta2, a1, a2, ibc1, ibc2, eps) + wd * p[i];
    return DT_OK;
}

dt_status dt__cpu_axpy(dt_backend *be, float *y, float a, const float *x, size_t n)
{
    (void)be;
#pragma omp parallel for simd schedule(static) if (n >= DT__OPT_PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
    return DT_OK;
}
