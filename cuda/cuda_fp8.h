/* cuda_fp8.h: the FP8 element conversion and current scaling's scale rule
 * as the GPU's kernels compute them (cuda/fp8.cu), in plain C that nvcc
 * compiles for the device and a C compiler for the host (DT_HD of
 * lib/core/dt_math_hd.h), so they can be checked on a machine without a
 * GPU against include/dt_fp8.h's reference (lib/core/fp8.c). Never
 * installed.
 *
 * Invariants:
 *  - dt__f8_round gives dt_fp8_round's value and dt_fp8_from_float's code,
 *    with the same saturate and flush flags, for every float: it is integer
 *    code on the bit patterns (the rounding to nearest even of a normal
 *    result by the carry trick, of a subnormal one by a shift with its
 *    remainder), so FTZ/DAZ or the rounding mode cannot change it;
 *  - dt__f8_scale is dt_fp8_scale_from_amax bit for bit: one correctly
 *    rounded division (max / amax), ldexpf as one rounding through double,
 *    frexpf/nextafterf as bit operations, one correctly rounded product
 *    per test. In device code the division and the product are
 *    __fdiv_rn / __fmul_rn (IEEE; nvcc never contracts them). */
#ifndef DT_CUDA_FP8_H
#define DT_CUDA_FP8_H

#include <stdint.h>
#include <string.h>

#include "dt_fp8.h"
#include "dt_math_hd.h"

/* A format's constants (dt_fp8.h's table) as the kernels use them. */
typedef struct dt__f8 {
    uint32_t max_bits;     /* the largest finite value, as float bits */
    uint32_t minnorm_bits; /* the smallest normal, 2^emin, as float bits */
    int mbits, emin, bias;
    uint32_t max_code, nan_code; /* positive codes of max and of the NaN a NaN becomes */
} dt__f8;

static inline DT_HD dt__f8 dt__f8_of(int format)
{
    dt__f8 p;
    if (format == DT_FP8_E5M2) {
        p.max_bits = 0x47600000u; /* 57344 = 1.75 * 2^15 */
        p.minnorm_bits = (uint32_t)(127 - 14) << 23;
        p.mbits = 2, p.emin = -14, p.bias = 15;
        p.max_code = 0x7bu, p.nan_code = 0x7eu;
    } else {
        p.max_bits = 0x43e00000u; /* 448 = 1.75 * 2^8 */
        p.minnorm_bits = (uint32_t)(127 - 6) << 23;
        p.mbits = 3, p.emin = -6, p.bias = 7;
        p.max_code = 0x7eu, p.nan_code = 0x7fu;
    }
    return p;
}

/* v (already multiplied by its scale) rounded to the format: returns the
 * value as a float (the sign kept, NaN as v), *code its FP8 code; *sat /
 * *flush are set to 1 when v saturated / was flushed to zero (else left). */
static inline DT_HD float dt__f8_round(const dt__f8 *p, float v, uint32_t *code, int *sat, int *flush)
{
    const uint32_t u = dt__float_bits(v), sign = u & 0x80000000u, a = u & 0x7fffffffu;
    const uint32_t csign = sign >> 24;
    if (a > 0x7f800000u) { /* NaN stays NaN */
        *code = csign | p->nan_code;
        return v;
    }
    if (a > p->max_bits) { /* inf included */
        *sat = 1;
        *code = csign | p->max_code;
        return dt__bits_float(sign | p->max_bits);
    }
    const int shift = 23 - p->mbits;
    if (a >= p->minnorm_bits) { /* a normal result: round the mantissa to mbits, nearest even */
        uint32_t r = a + ((1u << (shift - 1)) - 1u) + ((a >> shift) & 1u);
        r &= ~((1u << shift) - 1u);
        const int e = (int)(r >> 23) - 127; /* <= the format's top exponent: a <= max */
        *code = csign | ((uint32_t)(e + p->bias) << p->mbits) | ((r >> shift) & ((1u << p->mbits) - 1u));
        return dt__bits_float(sign | r);
    }
    /* a subnormal result: k = a / 2^(emin - mbits) rounded to nearest even
     * (0 .. 2^mbits; 2^mbits is the smallest normal, whose code is k too) */
    const int E = (int)(a >> 23);
    const uint64_t sig = E ? (uint64_t)((a & 0x7fffffu) | 0x800000u) : (uint64_t)a;
    const int sh = (p->emin - p->mbits) - ((E ? E : 1) - 150); /* >= 24 - mbits */
    uint32_t k = 0;
    if (sh < 40) {
        const uint64_t half = (uint64_t)1 << (sh - 1), rem = sig & ((half << 1) - 1u);
        k = (uint32_t)(sig >> sh);
        if (rem > half || (rem == half && (k & 1u))) k++;
    } /* else below 2^-15 of the quantum: 0 */
    if (k == 0 && a != 0) *flush = 1;
    *code = csign | k;
    /* k * 2^(emin - mbits): k <= 2^mbits, so the float is exact and normal */
    if (k == 0) return dt__bits_float(sign);
    int ek = 0;
    while ((2u << ek) <= k) ek++; /* the top bit of k */
    const uint32_t m = (k << (23 - ek)) & 0x7fffffu;
    return dt__bits_float(sign | ((uint32_t)(ek + p->emin - p->mbits + 127) << 23) | m);
}

/* 2^e as a double, e in [-1022, 1023] */
static inline DT_HD double dt__f8_pow2d(int e)
{
    const uint64_t b = (uint64_t)(1023 + e) << 52;
#ifdef __CUDA_ARCH__
    return __longlong_as_double((long long)b);
#else
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
#endif
}

/* dt_fp8_scale_from_amax(amax, format, margin, pow2): (max / amax) /
 * 2^margin, rounded down to a power of two with pow2, lowered by float
 * ulps until amax * s <= max; 0 when amax is not positive and finite or
 * the scale is not a positive finite float. */
static inline DT_HD float dt__f8_scale(const dt__f8 *p, float amax, int margin, int pow2)
{
    const uint32_t ab = dt__float_bits(amax);
    if (ab == 0u || ab >= 0x7f800000u) return 0.0f; /* 0, negative, inf, NaN */
    const float max = dt__bits_float(p->max_bits);
#ifdef __CUDA_ARCH__
    float s = __fdiv_rn(max, amax);
#else
    float s = max / amax;
#endif
    if (margin > 0) {
        /* ldexpf(s, -margin): exact in double, one rounding to float */
        const double f = margin > 1022 ? 0.0 : (double)s * dt__f8_pow2d(-margin);
        s = (float)f;
    }
    uint32_t sb = dt__float_bits(s);
    if (sb == 0u || sb >= 0x7f800000u) return 0.0f; /* not finite or <= 0 */
    if (pow2) {
        if (sb >= 0x00800000u) {
            sb &= 0x7f800000u; /* a normal: its exponent alone */
        } else {
            uint32_t t = 1u; /* a subnormal: its top mantissa bit */
            while ((t << 1) <= sb) t <<= 1;
            sb = t;
        }
        s = dt__bits_float(sb);
    }
    for (;;) {
#ifdef __CUDA_ARCH__
        const float prod = __fmul_rn(amax, s);
#else
        const float prod = amax * s;
#endif
        if (!(prod > max)) break;
        sb = dt__float_bits(s) - 1u; /* nextafterf(s, 0) for a positive s */
        s = dt__bits_float(sb);
    }
    return s;
}

#endif
