/* half.c: f16 and bf16 conversions (rules in dt_half.h).
 *
 * Owns the public scalar reference conversions, which are the integer code
 * on the bit patterns of dt_math_hd.h (portable and independent of the
 * FPU's modes: FTZ/DAZ, rounding mode; the CUDA kernels run the same code),
 * and the array conversions that the CPU backend's cast op uses.
 *
 * Fast paths and why they are bit-identical to the reference:
 *  - f16: AVX-512F (16 lanes) or F16C (8 lanes) vcvtps2ph/vcvtph2ps with an
 *    explicit round-to-nearest-even immediate, so MXCSR's rounding mode does
 *    not matter. They round exactly as IEEE requires, produce subnormals
 *    (FTZ does not apply to them), and quiet NaNs keeping the top payload
 *    bits, which is the NaN rule the reference was written to follow. The
 *    tails (n not a multiple of the lane count) use the reference.
 *  - bf16: conversion is rounding the float's bit pattern at bit 16, which
 *    the branchless dt__bf16_round of dt_math_hd.h does in four integer operations;
 *    the compiler vectorizes the array loop (to AVX-512 under
 *    -march=native), and the scalar function calls the same inline code.
 *    AVX512_BF16's vcvtneps2bf16 is deliberately not used: it flushes
 *    float subnormal inputs to zero, so it would not match the reference,
 *    and the conversion is memory-bound either way. */
#include <string.h>

#include "dt_half.h"
#include "dt_math_hd.h"

#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

/* ---- scalar reference: the shared integer code of dt_math_hd.h ------------- */

dt_f16 dt_f16_from_float(float x) { return dt__f16_from_float(x); }

float dt_f16_to_float(dt_f16 h) { return dt__f16_to_float(h); }

dt_bf16 dt_bf16_from_float(float x) { return dt__bf16_from_float(x); }

float dt_bf16_to_float(dt_bf16 h) { return dt__bf16_to_float(h); }

/* ---- array conversions ---------------------------------------------------- */

void dt_f16_from_float_array(dt_f16 *dst, const float *src, size_t n)
{
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256((__m256i *)(dst + i), h);
    }
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
#endif
    for (; i < n; i++) dst[i] = dt_f16_from_float(src[i]);
}

void dt_f16_to_float_array(float *dst, const dt_f16 *src, size_t n)
{
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
#endif
    for (; i < n; i++) dst[i] = dt_f16_to_float(src[i]);
}

/* Element access through memcpy (not a uint32_t * cast, which would break
 * strict aliasing); GCC still vectorizes both loops, with full-width
 * vectors where the build targets AVX-512 (DT__VEC512_BEGIN). */
DT__VEC512_BEGIN
void dt_bf16_from_float_array(dt_bf16 *restrict dst, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, src + i, sizeof u);
        dst[i] = dt__bf16_round(u);
    }
}

void dt_bf16_to_float_array(float *restrict dst, const dt_bf16 *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = dt__bf16_widen(src[i]);
        memcpy(dst + i, &u, sizeof u);
    }
}

/* x = bf16(x) widened back, in place: the two loops above fused, so the
 * bits are theirs (the same inline code) and memory is crossed once. */
void dt_bf16_round_array(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        u = dt__bf16_widen(dt__bf16_round(u));
        memcpy(x + i, &u, sizeof u);
    }
}

DT__VEC512_END

/* x = f16(x) widened back, in place, through a small stack tile with the
 * array conversions above (their fast paths, their bits). */
void dt_f16_round_array(float *x, size_t n)
{
    dt_f16 tile[512];
    for (size_t i = 0; i < n; i += 512) {
        const size_t m = n - i < 512 ? n - i : 512;
        dt_f16_from_float_array(tile, x + i, m);
        dt_f16_to_float_array(x + i, tile, m);
    }
}

const char *dt_half_simd(void)
{
#if defined(__AVX512F__)
    return "avx512f";
#elif defined(__F16C__)
    return "f16c";
#else
    return "portable";
#endif
}
