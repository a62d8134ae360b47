/* dt_half.h: 16-bit floating-point storage types and their conversions to
 * and from float.
 *
 *   type     sign exp mantissa  max finite   smallest normal  smallest subnormal
 *   dt_f16   1    5   10        65504        2^-14 ~ 6.1e-5   2^-24 ~ 5.96e-8
 *   dt_bf16  1    8   7         ~3.39e38     2^-126           2^-133
 *
 * Both are plain uint16_t bit patterns: the library stores and moves them,
 * and computes in float (FP32 master weights, FP32 accumulation).
 *
 * Rules, identical for every function here (scalar and array):
 *  - float -> 16 bit rounds to nearest, ties to even, with subnormal
 *    results; magnitudes that round past the largest finite value become
 *    inf (for f16: |x| >= 65520, the halfway point between 65504 and 2^16);
 *    magnitudes at or below half the smallest subnormal become a zero of
 *    the same sign;
 *  - 16 bit -> float is exact (every f16 and bf16 value is a float);
 *  - NaN stays NaN and comes out quiet: the sign and the top payload bits
 *    are kept and the quiet bit (the mantissa's top bit) is set, as the x86
 *    conversion instructions do; inf stays inf.
 *
 * The scalar functions are the reference, written in integer arithmetic
 * and portable. The array functions are the fast path (F16C / AVX-512 when
 * the library is compiled for them) and give bit-identical results, which
 * tests/check_half.c checks. */
#ifndef DT_HALF_H
#define DT_HALF_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t dt_f16;  /* IEEE 754 binary16 bit pattern */
typedef uint16_t dt_bf16; /* bfloat16 bit pattern: the top half of a float */

/* ---- scalar reference conversions ----------------------------------------- */
DT_API dt_f16 dt_f16_from_float(float x);
DT_API float dt_f16_to_float(dt_f16 h);
DT_API dt_bf16 dt_bf16_from_float(float x);
DT_API float dt_bf16_to_float(dt_bf16 h);

/* ---- array conversions: dst(n) from src(n) --------------------------------
 * Same results as the scalar functions, element by element. Single-threaded
 * (callers split large arrays; the CPU backend's cast op does); dst and src
 * must not overlap. */
DT_API void dt_f16_from_float_array(dt_f16 *dst, const float *src, size_t n);
DT_API void dt_f16_to_float_array(float *dst, const dt_f16 *src, size_t n);
DT_API void dt_bf16_from_float_array(dt_bf16 *dst, const float *src, size_t n);
DT_API void dt_bf16_to_float_array(float *dst, const dt_bf16 *src, size_t n);
/* x(n) rounded to the format and widened back, in place: the same bits as
 * the two array conversions above, in one pass. */
DT_API void dt_bf16_round_array(float *x, size_t n);
DT_API void dt_f16_round_array(float *x, size_t n);

/* The instruction set the array conversions were compiled for:
 * "avx512f", "f16c" or "portable" (for logs and benchmark tables). */
DT_API const char *dt_half_simd(void);

#ifdef __cplusplus
}
#endif
#endif
