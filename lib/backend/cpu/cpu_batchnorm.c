/* cpu_batchnorm.c: the CPU backend's BatchNorm (over the rows of an (N, C)
 * matrix, one statistic per channel) and ReLU; semantics in dt_backend.h,
 * running statistics as PyTorch's BatchNorm1d.
 *
 * Threads: the channels are cut into slices of DT__BN_SLICE (16 floats,
 * one cache line of a row); one thread owns a slice and walks all N rows
 * for it, so every per-channel sum has a single writer and a fixed order
 * (rows ascending). Results are therefore bit-identical for ANY thread
 * count, not only a fixed one, and no partials need combining.
 *
 * Precision: the sums over rows (mean, centred sum of squares in forward;
 * sum of dout and of dout * xhat in backward) accumulate in double. N is
 * the batch size, and in the accumulation experiments one large batch of
 * N*b rows is compared with N micro-batches: a float sum of N terms in a
 * fixed order is off by up to ~N * 6e-8 of the sum of |terms| (2.5e-4 at
 * N = 4096), which would blur exactly the small differences between
 * running statistics those experiments measure; double makes the error
 * the final rounding to float, and costs nothing measurable here (the op
 * is memory-bound: C*N floats read per pass). Pairwise summation in float
 * would also do, but per channel slice it needs a stack of partials where
 * double needs one accumulator. The variance is the two-pass centred sum,
 * so it has no E[x^2] - E[x]^2 cancellation when |mean| >> std. Everything
 * stored (out, mean, rstd, running statistics) is float.
 *
 * Contract beyond dt_backend.h (what this reference implements; the
 * front, backend.c, rejects calls outside it before they reach the op):
 *  - training mode needs N >= 2 (PyTorch refuses it too: the unbiased
 *    variance of one row is 0/0); 0 <= momentum <= 1; eps > 0;
 *  - training mode with running_mean == running_var == NULL normalises
 *    with batch statistics and tracks nothing (track_running_stats=False);
 *  - eval mode writes mean(C) and rstd(C), if not NULL, with the running
 *    statistics it used, so out = (inp - mean) * rstd * w + b in both modes;
 *  - batchnorm_backward's dinp must not alias dout or inp.
 * ReLU (dt_math_hd.h) propagates NaN (x < 0 ? 0 : x), so the trainer's
 * non-finite checks still see it after an activation. */
#include <math.h>

#include "cpu_backend.h"
#include "dt_math_hd.h"

#define DT__BN_SLICE 16
/* Below this many elements one thread does the whole op: the fork costs more. */
#define DT__BN_PAR_MIN 16384
#define DT__RELU_PAR_MIN ((size_t)1 << 15)

dt_status dt__cpu_batchnorm_forward(dt_backend *be, float *out, float *mean, float *rstd, float *running_mean,
                                    float *running_var, const float *inp, const float *w, const float *b, int N, int C,
                                    float momentum, float eps, int training)
{
    (void)be;
    const int nslices = (C + DT__BN_SLICE - 1) / DT__BN_SLICE;
    const double unbias = N > 1 ? (double)N / (N - 1) : 1.0;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= DT__BN_PAR_MIN)
    for (int s = 0; s < nslices; s++) {
        const int c0 = s * DT__BN_SLICE, nc = C - c0 < DT__BN_SLICE ? C - c0 : DT__BN_SLICE;
        float m[DT__BN_SLICE], r[DT__BN_SLICE];
        if (training) {
            double sum[DT__BN_SLICE] = {0}, ssq[DT__BN_SLICE] = {0};
            for (int i = 0; i < N; i++) {
                const float *x = inp + (size_t)i * C + c0;
                for (int k = 0; k < nc; k++) sum[k] += x[k];
            }
            double md[DT__BN_SLICE];
            for (int k = 0; k < nc; k++) md[k] = sum[k] / N;
            for (int i = 0; i < N; i++) {
                const float *x = inp + (size_t)i * C + c0;
                for (int k = 0; k < nc; k++) {
                    double d = x[k] - md[k];
                    ssq[k] += d * d;
                }
            }
            for (int k = 0; k < nc; k++) {
                double var = ssq[k] / N; /* biased: what normalises */
                m[k] = (float)md[k];
                r[k] = (float)(1.0 / sqrt(var + eps));
                mean[c0 + k] = m[k];
                rstd[c0 + k] = r[k];
                if (running_mean) {
                    running_mean[c0 + k] = (float)((1.0 - momentum) * running_mean[c0 + k] + momentum * md[k]);
                    running_var[c0 + k] = (float)((1.0 - momentum) * running_var[c0 + k] + momentum * var * unbias);
                }
            }
        } else {
            for (int k = 0; k < nc; k++) {
                m[k] = running_mean[c0 + k];
                r[k] = (float)(1.0 / sqrt((double)running_var[c0 + k] + eps));
                if (mean) mean[c0 + k] = m[k];
                if (rstd) rstd[c0 + k] = r[k];
            }
        }
        for (int i = 0; i < N; i++) {
            const float *x = inp + (size_t)i * C + c0;
            float *o = out + (size_t)i * C + c0;
            for (int k = 0; k < nc; k++) o[k] = (x[k] - m[k]) * r[k] * w[c0 + k] + b[c0 + k];
        }
    }
    return DT_OK;
}

/* With xhat = (x - mean) * rstd and y = w * xhat + b, per channel over the
 * N rows: db = sum dout, dw = sum dout * xhat, and
 *   dx = w * rstd * (dout - db / N - xhat * dw / N),
 * the usual BatchNorm gradient (the batch mean and variance depend on x). */
dt_status dt__cpu_batchnorm_backward(dt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                     const float *inp, const float *w, const float *mean, const float *rstd, int N,
                                     int C)
{
    (void)be;
    const int nslices = (C + DT__BN_SLICE - 1) / DT__BN_SLICE;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= DT__BN_PAR_MIN)
    for (int s = 0; s < nslices; s++) {
        const int c0 = s * DT__BN_SLICE, nc = C - c0 < DT__BN_SLICE ? C - c0 : DT__BN_SLICE;
        double sd[DT__BN_SLICE] = {0}, sdx[DT__BN_SLICE] = {0};
        for (int i = 0; i < N; i++) {
            const float *x = inp + (size_t)i * C + c0, *d = dout + (size_t)i * C + c0;
            for (int k = 0; k < nc; k++) {
                float xh = (x[k] - mean[c0 + k]) * rstd[c0 + k];
                sd[k] += d[k];
                sdx[k] += (double)d[k] * xh;
            }
        }
        float a[DT__BN_SLICE], mb[DT__BN_SLICE], mw[DT__BN_SLICE];
        for (int k = 0; k < nc; k++) {
            db[c0 + k] += (float)sd[k];
            dw[c0 + k] += (float)sdx[k];
            a[k] = w[c0 + k] * rstd[c0 + k];
            mb[k] = (float)(sd[k] / N);
            mw[k] = (float)(sdx[k] / N);
        }
        for (int i = 0; i < N; i++) {
            const float *x = inp + (size_t)i * C + c0, *d = dout + (size_t)i * C + c0;
            float *dx = dinp + (size_t)i * C + c0;
            for (int k = 0; k < nc; k++) {
                float xh = (x[k] - mean[c0 + k]) * rstd[c0 + k];
                dx[k] = a[k] * (d[k] - mb[k] - xh * mw[k]);
            }
        }
    }
    return DT_OK;
}

dt_status dt__cpu_relu_forward(dt_backend *be, float *out, const float *inp, size_t n)
{
    (void)be;
#pragma omp parallel for simd schedule(static) if (n >= DT__RELU_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = dt__relu(inp[i]);
    return DT_OK;
}

dt_status dt__cpu_relu_backward(dt_backend *be, float *dinp, const float *inp, const float *dout, size_t n)
{
    (void)be;
#pragma omp parallel for simd schedule(static) if (n >= DT__RELU_PAR_MIN)
    for (size_t i = 0; i < n; i++) dinp[i] = dt__relu_grad(inp[i], dout[i]);
    return DT_OK;
}
