/* optim.cu: reductions and optimizer updates on flat float buffers on the
 * GPU (sumsq, scale, AdamW, SGD, LARS, LAMB's direction, axpy); semantics
 * in dt_backend.h, per-element math in lib/core/dt_math_hd.h (the CPU
 * backend's own code).
 *
 * Invariants: every op but sumsq is elementwise (one thread per element),
 * so results do not depend on the launch shape. sumsq accumulates squares
 * in double in two kernels: a fixed grid of DT__SUMSQ_BLOCKS blocks (fewer
 * for small n, a function of n only) whose threads sum a grid-stride slice
 * and whose shared-memory tree combines them in a fixed pattern, then one
 * block that combines the block partials the same way. The order depends
 * only on n, so the result is bit-identical run to run (it differs from the
 * CPU's order only by double rounding, ~1e-16 relative). The result is
 * read back to the host, so sumsq waits for the stream. */
#include "cuda_internal.h"

#define DT__SUMSQ_THREADS 256
#define DT__SUMSQ_BLOCKS 512 /* a power of two: the final tree assumes it */

__global__ void dt__k_sumsq_partial(double *part, const float *x, size_t n)
{
    __shared__ double sh[DT__SUMSQ_THREADS];
    double acc = 0.0;
    DT__CUDA_FOR(i, n)
    {
        double v = (double)x[i];
        acc += v * v;
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = DT__SUMSQ_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

/* One block of DT__SUMSQ_BLOCKS threads; partials beyond nparts count 0. */
__global__ void dt__k_sumsq_final(double *out, const double *part, int nparts)
{
    __shared__ double sh[DT__SUMSQ_BLOCKS];
    sh[threadIdx.x] = (int)threadIdx.x < nparts ? part[threadIdx.x] : 0.0;
    __syncthreads();
    for (int s = DT__SUMSQ_BLOCKS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = sh[0];
}

dt_status dt__cuda_sumsq(dt_backend *be, const float *x, size_t n, double *out)
{
    if (n == 0) {
        *out = 0.0;
        return DT_OK;
    }
    cudaStream_t s = DT__CUDA_STREAM(be);
    size_t nb = (n + DT__SUMSQ_THREADS - 1) / DT__SUMSQ_THREADS;
    int blocks = nb < DT__SUMSQ_BLOCKS ? (int)nb : DT__SUMSQ_BLOCKS;
    double *work;
    DT_CHECK(dt__cuda_workspace(be, sizeof(double) * (DT__SUMSQ_BLOCKS + 1), (void **)&work));
    dt__k_sumsq_partial<<<blocks, DT__SUMSQ_THREADS, 0, s>>>(work + 1, x, n);
    DT_CUDA_LAUNCHED("sumsq (partials)");
    dt__k_sumsq_final<<<1, DT__SUMSQ_BLOCKS, 0, s>>>(work, work + 1, blocks);
    DT_CUDA_LAUNCHED("sumsq (total)");
    double *h;
    DT_CHECK(dt__cuda_host_workspace(be, sizeof(double), (void **)&h));
    DT_CUDA_CHECK(cudaMemcpyAsync(h, work, sizeof(double), cudaMemcpyDeviceToHost, s));
    DT_CUDA_CHECK(cudaStreamSynchronize(s));
    *out = *h;
    return dt__cuda_pending_error(be); /* a host synchronisation: report what kernels found */
}

__global__ void dt__k_scale(float *x, float s, size_t n) { DT__CUDA_FOR(i, n) x[i] *= s; }

__global__ void dt__k_axpy(float *y, float a, const float *x, size_t n) { DT__CUDA_FOR(i, n) y[i] += a * x[i]; }

__global__ void dt__k_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                            float a1, float a2, float ibc1, float ibc2, float eps, float wd, float grad_scale)
{
    DT__CUDA_FOR(i, n)
    {
        float mi = m[i], vi = v[i];
        p[i] = dt__adamw(p[i], g[i] * grad_scale, &mi, &vi, lr, beta1, beta2, a1, a2, ibc1, ibc2, eps, wd);
        m[i] = mi;
        v[i] = vi;
    }
}

__global__ void dt__k_sgd(float *p, const float *g, float *buf, size_t n, float lr, float momentum, float wd,
                          float grad_scale, int nesterov, int first)
{
    DT__CUDA_FOR(i, n)
    {
        float b = buf[i];
        p[i] = dt__sgd(p[i], g[i] * grad_scale, &b, lr, momentum, wd, nesterov, first);
        buf[i] = b;
    }
}

__global__ void dt__k_lars(float *p, const float *g, float *buf, size_t n, float a, float momentum, float wd,
                           float grad_scale)
{
    DT__CUDA_FOR(i, n)
    {
        float b = buf[i];
        p[i] = dt__lars(p[i], g[i] * grad_scale, &b, a, momentum, wd);
        buf[i] = b;
    }
}

__global__ void dt__k_lamb_direction(float *u, const float *p, const float *g, float *m, float *v, size_t n,
                                     float beta1, float beta2, float a1, float a2, float ibc1, float ibc2, float eps,
                                     float wd, float grad_scale)
{
    DT__CUDA_FOR(i, n)
    {
        float mi = m[i], vi = v[i];
        u[i] = dt__adam_direction(g[i] * grad_scale, &mi, &vi, beta1, beta2, a1, a2, ibc1, ibc2, eps) + wd * p[i];
        m[i] = mi;
        v[i] = vi;
    }
}

#define DT__GRID(n) dt__cuda_blocks((n), DT__CUDA_THREADS), DT__CUDA_THREADS, 0, DT__CUDA_STREAM(be)

dt_status dt__cuda_scale(dt_backend *be, float *x, float s, size_t n)
{
    if (n == 0 || s == 1.0f) return DT_OK;
    dt__k_scale<<<DT__GRID(n)>>>(x, s, n);
    DT_CUDA_LAUNCHED("scale");
    return DT_OK;
}

dt_status dt__cuda_axpy(dt_backend *be, float *y, float a, const float *x, size_t n)
{
    if (n == 0) return DT_OK;
    dt__k_axpy<<<DT__GRID(n)>>>(y, a, x, n);
    DT_CUDA_LAUNCHED("axpy");
    return DT_OK;
}

dt_status dt__cuda_adamw_update(dt_backend *be, float *p, const float *g, float *m, float *v, size_t n, float lr,
                                float beta1, float beta2, float eps, float wd, float bc1, float bc2, float grad_scale)
{
    if (n == 0) return DT_OK;
    dt__k_adamw<<<DT__GRID(n)>>>(p, g, m, v, n, lr, beta1, beta2, 1.0f - beta1, 1.0f - beta2, 1.0f / bc1, 1.0f / bc2,
                                 eps, wd, grad_scale);
    DT_CUDA_LAUNCHED("adamw");
    return DT_OK;
}

dt_status dt__cuda_sgd_update(dt_backend *be, float *p, const float *g, float *buf, size_t n, float lr, float momentum,
                              float wd, float grad_scale, int nesterov, int first)
{
    if (n == 0) return DT_OK;
    dt__k_sgd<<<DT__GRID(n)>>>(p, g, buf, n, lr, momentum, wd, grad_scale, nesterov, first);
    DT_CUDA_LAUNCHED("sgd");
    return DT_OK;
}

dt_status dt__cuda_lars_update(dt_backend *be, float *p, const float *g, float *buf, size_t n, float lr, float trust,
                               float momentum, float wd, float grad_scale)
{
    if (n == 0) return DT_OK;
    dt__k_lars<<<DT__GRID(n)>>>(p, g, buf, n, lr * trust, momentum, wd, grad_scale);
    DT_CUDA_LAUNCHED("lars");
    return DT_OK;
}

dt_status dt__cuda_lamb_direction(dt_backend *be, float *u, const float *p, const float *g, float *m, float *v,
                                  size_t n, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
                                  float grad_scale)
{
    if (n == 0) return DT_OK;
    dt__k_lamb_direction<<<DT__GRID(n)>>>(u, p, g, m, v, n, beta1, beta2, 1.0f - beta1, 1.0f - beta2, 1.0f / bc1,
                                          1.0f / bc2, eps, wd, grad_scale);
    DT_CUDA_LAUNCHED("lamb direction");
    return DT_OK;
}
