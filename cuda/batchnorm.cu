/* batchnorm.cu: BatchNorm over the rows of an (N, C) matrix on the GPU
 * (semantics in dt_backend.h, contract and precision of cpu_batchnorm.c).
 *
 * Shapes: inp, out, dout, dinp (N, C); w, b, dw, db, mean, rstd,
 * running_mean, running_var (C).
 * One block of (32, 32) threads per slice of 32 channels: threadIdx.x is the
 * channel (a warp reads 128 contiguous bytes of a row), threadIdx.y a row
 * lane that visits rows y, y+32, ... in order. Per-channel sums (mean,
 * centred sum of squares; sum of dout and of dout * xhat) accumulate in
 * double, lane by lane, and the 32 lane sums are added in lane order, so
 * results are bit-identical run to run and match the CPU's double sums to
 * double rounding (then both round to the same float almost always). The
 * same block then writes out (or dinp) for its slice, so nothing goes
 * through global memory in between and there are no atomics.
 * Arguments arrive checked by the front (lib/backend/backend.c), the same checks
 * for both backends. */
#include "cuda_internal.h"

/* Training-mode forward for one slice of 32 channels. */
__global__ void dt__k_bn_forward_train(float *out, float *mean, float *rstd, float *running_mean, float *running_var,
                                       const float *inp, const float *w, const float *b, int N, int C, float momentum,
                                       float eps, double unbias)
{
    __shared__ double part[32][33];
    __shared__ double s_mean[32];
    __shared__ float s_m[32], s_r[32];
    const int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * 32 + tx;
    const bool ok = c < C;
    double acc = 0.0;
    if (ok)
        for (int i = ty; i < N; i += 32) acc += inp[(size_t)i * C + c];
    part[ty][tx] = acc;
    __syncthreads();
    if (ty == 0) {
        double t = 0.0;
        for (int k = 0; k < 32; k++) t += part[k][tx];
        s_mean[tx] = t / N;
    }
    __syncthreads();
    const double md = s_mean[tx];
    acc = 0.0;
    if (ok)
        for (int i = ty; i < N; i += 32) {
            double d = inp[(size_t)i * C + c] - md;
            acc += d * d;
        }
    __syncthreads(); /* every read of part (the sum) is done */
    part[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && ok) {
        double t = 0.0;
        for (int k = 0; k < 32; k++) t += part[k][tx];
        double var = t / N; /* biased: what normalises */
        float m = (float)md, r = (float)(1.0 / sqrt(var + eps));
        mean[c] = m;
        rstd[c] = r;
        if (running_mean) {
            running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * md);
            running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * var * unbias);
        }
        s_m[tx] = m;
        s_r[tx] = r;
    }
    __syncthreads();
    if (ok) {
        const float m = s_m[tx], r = s_r[tx], wc = w[c], bc = b[c];
        for (int i = ty; i < N; i += 32) out[(size_t)i * C + c] = (inp[(size_t)i * C + c] - m) * r * wc + bc;
    }
}

/* Eval-mode forward: running statistics normalise; mean/rstd (may be NULL)
 * receive what was used. */
__global__ void dt__k_bn_forward_eval(float *out, float *mean, float *rstd, const float *running_mean,
                                      const float *running_var, const float *inp, const float *w, const float *b, int N,
                                      int C, float eps)
{
    const int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * 32 + tx;
    if (c >= C) return;
    const float m = running_mean[c];
    const float r = (float)(1.0 / sqrt((double)running_var[c] + eps));
    if (ty == 0) {
        if (mean) mean[c] = m;
        if (rstd) rstd[c] = r;
    }
    const float wc = w[c], bc = b[c];
    for (int i = ty; i < N; i += 32) out[(size_t)i * C + c] = (inp[(size_t)i * C + c] - m) * r * wc + bc;
}

dt_status dt__cuda_batchnorm_forward(dt_backend *be, float *out, float *mean, float *rstd, float *running_mean,
                                     float *running_var, const float *inp, const float *w, const float *b, int N, int C,
                                     float momentum, float eps, int training)
{
    const double unbias = (double)N / (N - 1 > 0 ? N - 1 : 1);
    const unsigned slices = (unsigned)((C + 31) / 32);
    if (training)
        dt__k_bn_forward_train<<<slices, dim3(32, 32), 0, DT__CUDA_STREAM(be)>>>(
            out, mean, rstd, running_mean, running_var, inp, w, b, N, C, momentum, eps, unbias);
    else
        dt__k_bn_forward_eval<<<slices, dim3(32, 32), 0, DT__CUDA_STREAM(be)>>>(out, mean, rstd, running_mean,
                                                                                running_var, inp, w, b, N, C, eps);
    DT_CUDA_LAUNCHED("batchnorm forward");
    return DT_OK;
}

/* With xhat = (x - mean) * rstd, per channel over the N rows:
 * db += sum dout, dw += sum dout * xhat,
 * dx = w * rstd * (dout - sum dout / N - xhat * sum(dout * xhat) / N). */
__global__ void dt__k_bn_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                                  const float *w, const float *mean, const float *rstd, int N, int C)
{
    __shared__ double pd[32][33], pdx[32][33];
    __shared__ float s_a[32], s_mb[32], s_mw[32];
    const int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * 32 + tx;
    const bool ok = c < C;
    const float m = ok ? mean[c] : 0.0f, r = ok ? rstd[c] : 0.0f;
    double sd = 0.0, sdx = 0.0;
    if (ok)
        for (int i = ty; i < N; i += 32) {
            float xh = (inp[(size_t)i * C + c] - m) * r;
            float d = dout[(size_t)i * C + c];
            sd += d;
            sdx += (double)d * xh;
        }
    pd[ty][tx] = sd;
    pdx[ty][tx] = sdx;
    __syncthreads();
    if (ty == 0 && ok) {
        double t = 0.0, tx2 = 0.0;
        for (int k = 0; k < 32; k++) {
            t += pd[k][tx];
            tx2 += pdx[k][tx];
        }
        db[c] += (float)t;
        dw[c] += (float)tx2;
        s_a[tx] = w[c] * r;
        s_mb[tx] = (float)(t / N);
        s_mw[tx] = (float)(tx2 / N);
    }
    __syncthreads();
    if (ok) {
        const float a = s_a[tx], mb = s_mb[tx], mw = s_mw[tx];
        for (int i = ty; i < N; i += 32) {
            float xh = (inp[(size_t)i * C + c] - m) * r;
            dinp[(size_t)i * C + c] = a * (dout[(size_t)i * C + c] - mb - xh * mw);
        }
    }
}

dt_status dt__cuda_batchnorm_backward(dt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                      const float *inp, const float *w, const float *mean, const float *rstd, int N,
                                      int C)
{
    dt__k_bn_backward<<<(unsigned)((C + 31) / 32), dim3(32, 32), 0, DT__CUDA_STREAM(be)>>>(dinp, dw, db, dout, inp, w,
                                                                                           mean, rstd, N, C);
    DT_CUDA_LAUNCHED("batchnorm backward");
    return DT_OK;
}
