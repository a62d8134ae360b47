/* vmath.h: branch-free exp and tanh that GCC vectorizes inside
 * `#pragma omp simd` loops (libm's scalar calls would block vectorization
 * and dominate GELU and softmax).
 *
 * Accuracy (checked against libm in tests/check_ops.c): dt__expf relative
 * error < 2e-7 for x in [-87, 88] (degree-6 Taylor polynomial on
 * |r| <= ln2/2, remainder < 1.2e-7, plus rounding); inputs below -87.3
 * return 0 and above 88.7 saturate near FLT_MAX. dt__tanhf absolute error
 * < 3e-7; it is used where absolute error is what matters (GELU).
 * Private to the library; __host__ __device__-friendly plain C. */
#ifndef DT_VMATH_H
#define DT_VMATH_H

#include <stdint.h>
#include <string.h>

static inline __attribute__((always_inline)) float dt__expf(float x)
{
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f; /* exact in few bits, so n*ln2_hi is exact */
    const float ln2_lo = -2.12194440e-4f;
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.7f ? 88.7f : x;
    float fn = __builtin_floorf(x * log2e + 0.5f);
    float r = x - fn * ln2_hi;
    r = r - fn * ln2_lo;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n for n in [-126, 128]: split as 2^(n/2) * 2^(n - n/2) so both halves are normal. */
    /* A NaN x makes fn NaN, whose conversion to int is undefined (and gave
     * INT_MIN, then a left shift of a negative value): take n = 0, p is NaN
     * and so is the result. */
    fn = fn == fn ? fn : 0.0f;
    int32_t n = (int32_t)fn;
    int32_t n1 = n / 2;
    int32_t n2 = n - n1;
    uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    float y = p * s1 * s2;
    return x <= -87.3f ? 0.0f : y;
}

static inline __attribute__((always_inline)) float dt__tanhf(float x)
{
    x = x < -10.0f ? -10.0f : x;
    x = x > 10.0f ? 10.0f : x;
    float e = dt__expf(2.0f * x);
    return (e - 1.0f) / (e + 1.0f);
}

#endif
