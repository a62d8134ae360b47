/* elementwise.cu: GELU, residual add and ReLU on the GPU, plus GELU on
 * 16-bit storage (dt__cuda_gelu_forward_half, dt_cuda.h).
 *
 * Every FP32 kernel is a grid-stride loop over n elements (n may exceed
 * 2^32) applying the per-element math of lib/core/dt_math_hd.h, the same code
 * the CPU backend runs. Each element is read and
 * written by one thread, so outputs may alias inputs where dt_backend.h
 * allows it (gelu_backward's and relu_backward's dinp may be dout,
 * residual's out may be a or b).
 *
 * The 16-bit GELU reads and writes pairs (half2 / __nv_bfloat162) four at a
 * time through 16-byte loads and stores when both pointers are 16-byte
 * aligned, widens each pair to float2, applies the FP32 GELU and rounds back
 * with CUDA's round-to-nearest-even intrinsics; misaligned pointers and the
 * last n % 8 elements take a scalar kernel. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_internal.h"

__global__ void dt__k_gelu_forward(float *out, const float *inp, size_t n)
{
    DT__CUDA_FOR(i, n) out[i] = dt__gelu(inp[i]);
}

__global__ void dt__k_gelu_backward(float *dinp, float *out, const float *inp, const float *dout, size_t n)
{
    DT__CUDA_FOR(i, n)
    {
        const float x = inp[i];
        dinp[i] = dt__gelu_grad(x) * dout[i];
        if (out) out[i] = dt__gelu(x);
    }
}

__global__ void dt__k_residual(float *out, const float *a, const float *b, size_t n)
{
    DT__CUDA_FOR(i, n) out[i] = a[i] + b[i];
}

__global__ void dt__k_relu_forward(float *out, const float *inp, size_t n)
{
    DT__CUDA_FOR(i, n) out[i] = dt__relu(inp[i]);
}

__global__ void dt__k_relu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    DT__CUDA_FOR(i, n) dinp[i] = dt__relu_grad(inp[i], dout[i]);
}

#define DT__GRID(n) dt__cuda_blocks((n), DT__CUDA_THREADS), DT__CUDA_THREADS, 0, DT__CUDA_STREAM(be)

dt_status dt__cuda_gelu_forward(dt_backend *be, float *out, const float *inp, size_t n)
{
    if (n == 0) return DT_OK;
    dt__k_gelu_forward<<<DT__GRID(n)>>>(out, inp, n);
    DT_CUDA_LAUNCHED("gelu forward");
    return DT_OK;
}

dt_status dt__cuda_gelu_backward(dt_backend *be, float *dinp, float *out, const float *inp, const float *dout,
                                 size_t n)
{
    if (n == 0) return DT_OK;
    dt__k_gelu_backward<<<DT__GRID(n)>>>(dinp, out, inp, dout, n);
    DT_CUDA_LAUNCHED("gelu backward");
    return DT_OK;
}

dt_status dt__cuda_residual_forward(dt_backend *be, float *out, const float *a, const float *b, size_t n)
{
    if (n == 0) return DT_OK;
    dt__k_residual<<<DT__GRID(n)>>>(out, a, b, n);
    DT_CUDA_LAUNCHED("residual forward");
    return DT_OK;
}

dt_status dt__cuda_relu_forward(dt_backend *be, float *out, const float *inp, size_t n)
{
    if (n == 0) return DT_OK;
    dt__k_relu_forward<<<DT__GRID(n)>>>(out, inp, n);
    DT_CUDA_LAUNCHED("relu forward");
    return DT_OK;
}

dt_status dt__cuda_relu_backward(dt_backend *be, float *dinp, const float *inp, const float *dout, size_t n)
{
    if (n == 0) return DT_OK;
    dt__k_relu_backward<<<DT__GRID(n)>>>(dinp, inp, dout, n);
    DT_CUDA_LAUNCHED("relu backward");
    return DT_OK;
}

/* ---- GELU on 16-bit storage --------------------------------------------------- */

/* Conversions of one 16-bit type: its scalar and pair types and CUDA's
 * round-to-nearest-even conversions to and from float. */
struct dt__f16_ops {
    typedef __half T;
    typedef __half2 T2;
    static __device__ __forceinline__ float2 widen2(T2 v) { return __half22float2(v); }
    static __device__ __forceinline__ T2 narrow2(float2 f) { return __float22half2_rn(f); }
    static __device__ __forceinline__ float widen(T v) { return __half2float(v); }
    static __device__ __forceinline__ T narrow(float f) { return __float2half_rn(f); }
};

struct dt__bf16_ops {
    typedef __nv_bfloat16 T;
    typedef __nv_bfloat162 T2;
    static __device__ __forceinline__ float2 widen2(T2 v) { return __bfloat1622float2(v); }
    static __device__ __forceinline__ T2 narrow2(float2 f) { return __float22bfloat162_rn(f); }
    static __device__ __forceinline__ float widen(T v) { return __bfloat162float(v); }
    static __device__ __forceinline__ T narrow(float f) { return __float2bfloat16_rn(f); }
};

/* n8 groups of 8 elements: one 16-byte load (4 pairs) per group. */
template <class Ops> __global__ void dt__k_gelu_half_vec(uint4 *out, const uint4 *in, size_t n8)
{
    DT__CUDA_FOR(i, n8)
    {
        uint4 raw = in[i];
        typename Ops::T2 h[4];
        memcpy(h, &raw, sizeof raw);
        for (int k = 0; k < 4; k++) {
            float2 f = Ops::widen2(h[k]);
            f.x = dt__gelu(f.x);
            f.y = dt__gelu(f.y);
            h[k] = Ops::narrow2(f);
        }
        memcpy(&raw, h, sizeof raw);
        out[i] = raw;
    }
}

template <class Ops> __global__ void dt__k_gelu_half_scalar(typename Ops::T *out, const typename Ops::T *in, size_t n)
{
    DT__CUDA_FOR(i, n) out[i] = Ops::narrow(dt__gelu(Ops::widen(in[i])));
}

template <class Ops> static dt_status dt__gelu_half(dt_backend *be, void *out, const void *in, size_t n)
{
    typedef typename Ops::T T;
    size_t n8 = 0;
    if ((((uintptr_t)out | (uintptr_t)in) & 15u) == 0) {
        n8 = n / 8;
        if (n8) {
            dt__k_gelu_half_vec<Ops><<<DT__GRID(n8)>>>((uint4 *)out, (const uint4 *)in, n8);
            DT_CUDA_LAUNCHED("gelu forward (16-bit, vectorized)");
        }
    }
    size_t done = n8 * 8;
    if (done < n) {
        dt__k_gelu_half_scalar<Ops><<<DT__GRID(n - done)>>>((T *)out + done, (const T *)in + done, n - done);
        DT_CUDA_LAUNCHED("gelu forward (16-bit)");
    }
    return DT_OK;
}

dt_status dt__cuda_gelu_forward_half(dt_backend *be, void *out, const void *in, dt_dtype dtype, size_t n)
{
    if (!dt__cuda_is_cuda(be)) return DT_FAIL(DT_ERR_INVALID, "gelu (16-bit): the backend is not CUDA");
    if (n == 0) return DT_OK;
    if (!out || !in) return DT_FAIL(DT_ERR_INVALID, "gelu (16-bit): NULL pointer with n = %zu", n);
    if (dtype == DT_F16) return dt__gelu_half<dt__f16_ops>(be, out, in, n);
    if (dtype == DT_BF16) return dt__gelu_half<dt__bf16_ops>(be, out, in, n);
    return DT_FAIL(DT_ERR_INVALID, "gelu (16-bit): dtype %s (%d): expected f16 or bf16", dt_dtype_name(dtype),
                   (int)dtype);
}
