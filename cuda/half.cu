/* half.cu: the cast between f32, f16 and bf16 on the GPU (semantics in
 * dt_backend.h); unscale_check is span_stats of one span (stats.cu).
 *
 * cast converts with the integer conversions of lib/core/dt_math_hd.h, the
 * code of lib/core/half.c's reference, so every element gets the same bits as on the CPU
 * (round to nearest even, subnormals, overflow to inf, quiet NaN keeping
 * the top payload bits), whatever the GPU's own conversion instructions do
 * with NaN payloads. f16 <-> bf16 goes through float, which is exact for the
 * widening step. Equal types copy with memmove semantics (overlap allowed);
 * different types must not overlap. One thread per element. */
#include "cuda_internal.h"

template <dt_dtype D, dt_dtype S> __global__ void dt__k_cast(void *dst, const void *src, size_t n)
{
    DT__CUDA_FOR(i, n)
    {
        float f;
        if (S == DT_F32) f = ((const float *)src)[i];
        else if (S == DT_F16) f = dt__f16_to_float(((const uint16_t *)src)[i]);
        else f = dt__bf16_to_float(((const uint16_t *)src)[i]);
        if (D == DT_F32) ((float *)dst)[i] = f;
        else if (D == DT_F16) ((uint16_t *)dst)[i] = dt__f16_from_float(f);
        else ((uint16_t *)dst)[i] = dt__bf16_from_float(f);
    }
}

#define DT__GRID(n) dt__cuda_blocks((n), DT__CUDA_THREADS), DT__CUDA_THREADS, 0, DT__CUDA_STREAM(be)

dt_status dt__cuda_cast(dt_backend *be, void *dst, dt_dtype dst_type, const void *src, dt_dtype src_type, size_t n)
{
    /* Types, NULL pointers and n == 0 are the front's (lib/backend/backend.c);
     * gemm.cu calls this directly with f32 sources and n > 0. */
    if (src_type == dst_type) return be->copy(be, dst, src, n * dt_dtype_size(src_type), DT_COPY_D2D);
#define DT__CAST_CASE(D, S)                             \
    if (dst_type == D && src_type == S) {               \
        dt__k_cast<D, S><<<DT__GRID(n)>>>(dst, src, n); \
        DT_CUDA_LAUNCHED("cast " #S " -> " #D);         \
        return DT_OK;                                   \
    }
    DT__CAST_CASE(DT_F16, DT_F32)
    DT__CAST_CASE(DT_BF16, DT_F32)
    DT__CAST_CASE(DT_F32, DT_F16)
    DT__CAST_CASE(DT_F32, DT_BF16)
    DT__CAST_CASE(DT_BF16, DT_F16)
    DT__CAST_CASE(DT_F16, DT_BF16)
#undef DT__CAST_CASE
    return DT_FAIL(DT_ERR_INVALID, "cast: %s -> %s", dt_dtype_name(src_type), dt_dtype_name(dst_type));
}
