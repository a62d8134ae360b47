/* cpu_half.c: the CPU backend's mixed-precision ops, cast, round,
 * unscale_check, round_bf16 and the fused bf16 GELU passes (semantics in
 * dt_backend.h).
 *
 * Invariants: both ops are elementwise, so results never depend on the
 * thread count: cast converts fixed blocks with the array conversions of
 * half.c (bit-identical to the scalar reference), and unscale_check's only
 * reduction is a logical OR of per-element flags, which is exact in any
 * order. Small inputs run on one thread: the OpenMP fork costs more than
 * the work below DT__HALF_PAR_MIN elements.
 * cast: dst and src must not overlap when the types differ; with equal
 * types it is a memmove (dst == src is a no-op). The front (backend.c)
 * has already rejected NULL pointers with n > 0 and non-float dtypes, and
 * answered n == 0. */
#include <stdint.h>
#include <string.h>

#include "cpu_backend.h"
#include "dt_half.h"
#include "dt_math_hd.h"

/* Full-width vectors for this file's loops (dt_math_hd.h): its one
 * reduction, unscale_check's OR, is exact in any order. */
DT__VEC512_BEGIN

#define DT__HALF_PAR_MIN ((size_t)1 << 15)
/* Elements per parallel work item of cast. */
#define DT__CAST_BLOCK ((size_t)1 << 14)
/* Floats staged on the stack when converting f16 <-> bf16 through float. */
#define DT__CAST_TILE 1024

/* Convert n elements of a block; types differ and are both float types.
 * f16 <-> bf16 goes through float, which is exact for the widening step, so
 * the result is the reference rounding of the source value. */
static void dt__cast_block(void *dst, dt_dtype dt, const void *src, dt_dtype st, size_t n)
{
    if (st == DT_F32) {
        if (dt == DT_F16) dt_f16_from_float_array(dst, src, n);
        else dt_bf16_from_float_array(dst, src, n);
        return;
    }
    if (dt == DT_F32) {
        if (st == DT_F16) dt_f16_to_float_array(dst, src, n);
        else dt_bf16_to_float_array(dst, src, n);
        return;
    }
    float tmp[DT__CAST_TILE];
    const uint16_t *s16 = src;
    uint16_t *d16 = dst;
    for (size_t i = 0; i < n; i += DT__CAST_TILE) {
        size_t m = n - i < DT__CAST_TILE ? n - i : DT__CAST_TILE;
        if (st == DT_F16) {
            dt_f16_to_float_array(tmp, s16 + i, m);
            dt_bf16_from_float_array(d16 + i, tmp, m);
        } else {
            dt_bf16_to_float_array(tmp, s16 + i, m);
            dt_f16_from_float_array(d16 + i, tmp, m);
        }
    }
}

dt_status dt__cpu_cast(dt_backend *be, void *dst, dt_dtype dst_type, const void *src, dt_dtype src_type, size_t n)
{
    (void)be;
    if (src_type == dst_type) {
        if (dst != src) memmove(dst, src, n * dt_dtype_size(src_type));
        return DT_OK;
    }
    size_t ds = dt_dtype_size(dst_type), ss = dt_dtype_size(src_type);
    long nblocks = (long)((n + DT__CAST_BLOCK - 1) / DT__CAST_BLOCK);
#pragma omp parallel for schedule(static) if (n >= DT__HALF_PAR_MIN)
    for (long b = 0; b < nblocks; b++) {
        size_t lo = (size_t)b * DT__CAST_BLOCK;
        size_t m = n - lo < DT__CAST_BLOCK ? n - lo : DT__CAST_BLOCK;
        dt__cast_block((char *)dst + lo * ds, dst_type, (const char *)src + lo * ss, src_type, m);
    }
    return DT_OK;
}

dt_status dt__cpu_round(dt_backend *be, float *x, dt_dtype dtype, size_t n)
{
    (void)be;
    if (dtype != DT_F16 && dtype != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "round: dtype %s is not f16 or bf16", dt_dtype_name(dtype));
    long nblocks = (long)((n + DT__CAST_BLOCK - 1) / DT__CAST_BLOCK);
#pragma omp parallel for schedule(static) if (n >= DT__HALF_PAR_MIN)
    for (long b = 0; b < nblocks; b++) {
        size_t lo = (size_t)b * DT__CAST_BLOCK;
        size_t m = n - lo < DT__CAST_BLOCK ? n - lo : DT__CAST_BLOCK;
        if (dtype == DT_BF16) dt_bf16_round_array(x + lo, m);
        else dt_f16_round_array(x + lo, m);
    }
    return DT_OK;
}

dt_status dt__cpu_round_bf16(dt_backend *be, float *x, uint16_t *x16, size_t n)
{
    (void)be;
#pragma omp parallel for simd schedule(static) if (n >= DT__HALF_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        const uint16_t h = dt__bf16_from_float(x[i]);
        x[i] = dt__bf16_to_float(h);
        x16[i] = h;
    }
    return DT_OK;
}

/* One loop of the fused GELU forward; X is the input element's expression,
 * SAVE stores what the input became (or nothing), STORE16 the bits. */
#define DT__GELU16_LOOP(X, SAVE, STORE16)                                                                       \
    _Pragma("omp parallel for simd schedule(static) if (n >= DT__HALF_PAR_MIN)") for (size_t i = 0; i < n; i++) \
    {                                                                                                           \
        const float x = X;                                                                                      \
        SAVE;                                                                                                   \
        const uint16_t h = dt__bf16_from_float(dt__gelu(x));                                                    \
        out[i] = dt__bf16_to_float(h);                                                                          \
        STORE16;                                                                                                \
    }

/* The GELU passes fused (dt_backend.h): the same inline dt__gelu,
 * dt__gelu_grad and rounding as the unfused ops, per element, so the
 * same bits (a bf16 value's bits are the top half of its widened float,
 * so out16 is what cast would make of out); elementwise, so results do
 * not depend on the thread count. */
dt_status dt__cpu_gelu_forward_bf16(dt_backend *be, float *out, uint16_t *out16, float *inp, int round_inp, size_t n)
{
    (void)be;
    if (round_inp && out16) DT__GELU16_LOOP(dt__bf16_to_float(dt__bf16_from_float(inp[i])), inp[i] = x, out16[i] = h)
    else if (round_inp) DT__GELU16_LOOP(dt__bf16_to_float(dt__bf16_from_float(inp[i])), inp[i] = x, (void)0)
    else if (out16) DT__GELU16_LOOP(inp[i], (void)0, out16[i] = h)
    else DT__GELU16_LOOP(inp[i], (void)0, (void)0)
    return DT_OK;
}

/* One loop of the fused GELU backward; OUT stores the forward's value
 * (or nothing), STORE16 the gradient's bits. */
#define DT__GELU16_BACK_LOOP(OUT, STORE16)                                                                       \
    _Pragma("omp parallel for simd schedule(static) if (n >= DT__HALF_PAR_MIN)") for (size_t i = 0; i < n; i++)  \
    {                                                                                                            \
        const float x = inp[i];                                                                                  \
        const uint16_t h = dt__bf16_from_float(dt__gelu_grad(x) * dt__bf16_to_float(dt__bf16_from_float(d[i]))); \
        d[i] = dt__bf16_to_float(h);                                                                             \
        STORE16;                                                                                                 \
        OUT;                                                                                                     \
    }

dt_status dt__cpu_gelu_backward_bf16(dt_backend *be, float *d, uint16_t *d16, float *out, const float *inp, size_t n)
{
    (void)be;
    if (d16 && out) DT__GELU16_BACK_LOOP(out[i] = dt__bf16_to_float(dt__bf16_from_float(dt__gelu(x))), d16[i] = h)
    else if (d16) DT__GELU16_BACK_LOOP((void)0, d16[i] = h)
    else if (out) DT__GELU16_BACK_LOOP(out[i] = dt__bf16_to_float(dt__bf16_from_float(dt__gelu(x))), (void)0)
    else DT__GELU16_BACK_LOOP((void)0, (void)0)
    return DT_OK;
}

dt_status dt__cpu_unscale_check(dt_backend *be, float *x, float s, size_t n, int *nonfinite)
{
    (void)be;
    int bad = 0;
#pragma omp parallel for simd schedule(static) reduction(| : bad) if (n >= DT__HALF_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * s;
        x[i] = v;
        bad |= dt__float_nonfinite(v);
    }
    if (bad) *nonfinite = 1;
    return DT_OK;
}

DT__VEC512_END
