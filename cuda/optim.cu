/* optim.cu: updates on flat float buffers on the GPU (scale, AdamW, SGD,
 * LARS, LAMB's direction, axpy); semantics in dt_backend.h, per-element
 * math in lib/core/dt_math_hd.h (the CPU backend's own code). sumsq is
 * span_stats of one span (stats.cu).
 *
 * Invariants: every op here is elementwise (one thread per element), so
 * results do not depend on the launch shape. */
#include "cuda_internal.h"

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
