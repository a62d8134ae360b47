/* half.c: f16 and bf16 conversions (rules in dt_half.h).
 *
 * Owns the scalar reference conversions, written in integer arithmetic on
 * the bit patterns so they are portable and independent of the FPU's modes
 * (FTZ/DAZ, rounding mode), and the array conversions that the CPU backend's
 * cast op uses.
 *
 * Fast paths and why they are bit-identical to the reference:
 *  - f16: AVX-512F (16 lanes) or F16C (8 lanes) vcvtps2ph/vcvtph2ps with an
 *    explicit round-to-nearest-even immediate, so MXCSR's rounding mode does
 *    not matter. They round exactly as IEEE requires, produce subnormals
 *    (FTZ does not apply to them), and quiet NaNs keeping the top payload
 *    bits, which is the NaN rule the reference was written to follow. The
 *    tails (n not a multiple of the lane count) use the reference.
 *  - bf16: conversion is rounding the float's bit pattern at bit 16, which
 *    the branchless dt__bf16_round below does in four integer operations;
 *    the compiler vectorizes the array loop (to AVX-512 under
 *    -march=native), and the scalar function calls the same inline code.
 *    AVX512_BF16's vcvtneps2bf16 is deliberately not used: it flushes
 *    float subnormal inputs to zero, so it would not match the reference,
 *    and the conversion is memory-bound either way. */
#include <string.h>

#include "dt_half.h"

#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

static inline uint32_t dt__float_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float dt__bits_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- f16 reference -------------------------------------------------------- */

dt_f16 dt_f16_from_float(float x)
{
    uint32_t u = dt__float_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu; /* |x| */

    if (a > 0x7f800000u) /* NaN: quiet, keep the top 9 payload bits */
        return (dt_f16)(sign | 0x7e00u | ((a >> 13) & 0x03ffu));
    if (a >= 0x477ff000u) /* |x| >= 65520 (halfway 65504..2^16; ties to even go up) or inf */
        return (dt_f16)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal f16 range, |x| >= 2^-14 */
        /* Rebias the exponent (127 -> 15) and keep 10 of 23 mantissa bits;
         * a carry out of the mantissa correctly bumps the exponent, and
         * cannot reach inf because a < 65520. */
        uint32_t h = (a - 0x38000000u) >> 13;
        uint32_t rem = a & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
        return (dt_f16)(sign | h);
    }
    if (a <= 0x33000000u) /* |x| <= 2^-25: half the smallest subnormal, ties to even give 0 */
        return (dt_f16)sign;
    /* Subnormal f16: |x| = m * 2^(e - 150) with the implicit bit in m, and
     * the result counts units of 2^-24, so it is m >> (126 - e), rounded. */
    uint32_t e = a >> 23;                       /* 102..112 */
    uint32_t m = (a & 0x007fffffu) | 0x00800000u;
    uint32_t shift = 126u - e;                  /* 14..24 */
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++; /* 0x3ff + 1 = smallest normal: right */
    return (dt_f16)(sign | h);
}

float dt_f16_to_float(dt_f16 h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t m = (uint32_t)h & 0x03ffu;

    if (e == 0x1fu) /* inf, or NaN made quiet */
        return dt__bits_float(sign | 0x7f800000u | (m ? 0x00400000u | (m << 13) : 0u));
    if (e != 0) /* normal: rebias 15 -> 127 */
        return dt__bits_float(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0) return dt__bits_float(sign);
    /* Subnormal m * 2^-24: normalise so the leading 1 of m is at bit 10. */
    uint32_t k = 0; /* bit index of m's leading 1 */
    while ((m >> (k + 1)) != 0) k++;
    /* value = 2^(k - 24) * (m / 2^k): float exponent field k + 103 */
    uint32_t mant = (m << (23u - k)) & 0x007fffffu;
    return dt__bits_float(sign | ((k + 103u) << 23) | mant);
}

/* ---- bf16 reference ------------------------------------------------------- */

/* Round a float's bit pattern to its top 16 bits, nearest even. Adding
 * 0x7fff plus the lowest kept bit carries into bit 16 exactly when the
 * dropped half is above 0x8000, or equal to it with the kept part odd; a
 * carry out of the mantissa bumps the exponent, up to inf. NaNs are
 * selected separately (they must not round into inf). */
static inline dt_bf16 dt__bf16_round(uint32_t u)
{
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x0040u;
    return (dt_bf16)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

static inline uint32_t dt__bf16_widen(dt_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    return (u & 0x7fffffffu) > 0x7f800000u ? u | 0x00400000u : u;
}

dt_bf16 dt_bf16_from_float(float x) { return dt__bf16_round(dt__float_bits(x)); }

float dt_bf16_to_float(dt_bf16 h) { return dt__bits_float(dt__bf16_widen(h)); }

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
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
#endif
    for (; i < n; i++) dst[i] = dt_f16_to_float(src[i]);
}

/* Element access through memcpy (not a uint32_t * cast, which would break
 * strict aliasing); GCC still vectorizes both loops. */
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
