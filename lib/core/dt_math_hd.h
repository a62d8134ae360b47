/* dt_math_hd.h: the per-element math of every backend, written once.
 *
 * Owns: exp and tanh (a branch-free polynomial), GELU and its derivative,
 * ReLU, the optimizer steps (Adam's direction, AdamW, SGD, LARS), the
 * non-finite test, and the f16/bf16 scalar conversions. The CPU backend
 * (lib/cpu_*.c, lib/core/half.c) calls these in its `#pragma omp simd` loops,
 * the CUDA kernels (the .cu files of cuda/) call them per thread, so both
 * devices compute the same function. Private to the library, never
 * installed.
 *
 * Compilers: plain C11 under gcc, where DT_HD makes every function
 * always_inline (a call would block the loop's vectorization; libm's scalar
 * exp/tanh would too, and dominate GELU and softmax); `__host__ __device__`
 * under nvcc, so the same code runs in kernels and in the CPU-side test
 * tests/check_cuda_math.c.
 *
 * Invariants:
 *  - no function touches memory other than its arguments;
 *  - the CPU backend's float operations are exactly these, in this order,
 *    so its results are bit-identical to what they were when each file had
 *    its own copy. The GPU can still differ in the last bit where nvcc
 *    fuses a multiply and an add (it does by default), which the
 *    cross-backend tests allow for;
 *  - the conversions are integer code on the bit patterns (rules in
 *    dt_half.h: round to nearest even, subnormals, overflow to inf, quiet
 *    NaN keeping the top payload bits), so a cast gives the same bits on
 *    both devices whatever the FPU modes (FTZ/DAZ, rounding mode);
 *  - dt__expf maps NaN to NaN without converting NaN to an integer (that
 *    conversion is undefined behaviour in C and C++), and has no branch
 *    and no float-to-int conversion, so loops over it vectorize (GELU,
 *    softmax, attention).
 *
 * Accuracy (checked against libm in tests/check_ops.c): dt__expf relative
 * error < 2e-7 for x in [-87, 88] (degree-6 Taylor polynomial on
 * |r| <= ln2/2, remainder < 1.2e-7, plus rounding); inputs below -87.3
 * return 0 and above 88.7 saturate near FLT_MAX. dt__tanhf absolute error
 * < 3e-7; it is used where absolute error is what matters (GELU). */
#ifndef DT_MATH_HD_H
#define DT_MATH_HD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define DT_HD __host__ __device__
#else
#define DT_HD __attribute__((always_inline))
#endif

#define DT__GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define DT__GELU_A 0.044715f

/* ---- bit patterns ------------------------------------------------------------ */

static inline DT_HD uint32_t dt__float_bits(float x)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
#endif
}

static inline DT_HD float dt__bits_float(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
#endif
}

/* 1 if x is inf or NaN (exponent all ones), tested on the bits so that no
 * fast-math setting (-ffinite-math-only) can fold it away; vectorizes to
 * integer compares. */
static inline DT_HD int dt__float_nonfinite(float x) { return (dt__float_bits(x) & 0x7f800000u) == 0x7f800000u; }

/* ---- exp, tanh ------------------------------------------------------------------ */

static inline DT_HD float dt__expf(float x)
{
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f; /* exact in few bits, so n*ln2_hi is exact */
    const float ln2_lo = -2.12194440e-4f;
    /* 1.5 * 2^23: x * log2e + shifter rounds to an integer held in the low
     * mantissa bits, so n comes from the bits (integer code, no float to
     * int conversion: branch-free, vectorizable, and a NaN x gives some n
     * and a NaN p, so a NaN result, without undefined behaviour). */
    const float shifter = 12582912.0f;
    const float under = x <= -87.3f ? 0.0f : 1.0f;
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.7f ? 88.7f : x;
    const float t = x * log2e + shifter;
    const float fn = t - shifter;
    float r = x - fn * ln2_hi;
    r = r - fn * ln2_lo;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n for n in [-126, 128]: split as 2^n1 * 2^n2, n1 = floor(n/2) by an
     * arithmetic shift of the unsigned difference's two's complement, so
     * both halves are normal. */
    const uint32_t nu = dt__float_bits(t) - dt__float_bits(shifter);
    const uint32_t n1 = (nu >> 1) | (nu & 0x80000000u); /* floor(n / 2), two's complement */
    const uint32_t n2 = nu - n1;
    const float s1 = dt__bits_float((n1 + 127u) << 23);
    const float s2 = dt__bits_float((n2 + 127u) << 23);
    return p * s1 * s2 * under;
}

static inline DT_HD float dt__tanhf(float x)
{
    x = x < -10.0f ? -10.0f : x;
    x = x > 10.0f ? 10.0f : x;
    float e = dt__expf(2.0f * x);
    return (e - 1.0f) / (e + 1.0f);
}

/* ---- vector width (host) ------------------------------------------------------- */

/* DT__VEC512_BEGIN ... DT__VEC512_END around functions whose loops are
 * elementwise (no reduction): where the build targets AVX-512, GCC prefers
 * 256-bit vectors (-march=native on recent Intel CPUs), which halves the
 * throughput of compute-bound loops (GELU's exp and division); these ask
 * for 512-bit ones. The width changes no element's arithmetic, so the same
 * bits; a reduction's summation order would change, so none goes inside. */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define DT__VEC512_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"prefer-vector-width=512\")")
#define DT__VEC512_END _Pragma("GCC pop_options")
#else
#define DT__VEC512_BEGIN
#define DT__VEC512_END
#endif

/* ---- activations ------------------------------------------------------------------ */

/* GELU, tanh approximation: 0.5 x (1 + tanh(k (x + a x^3))). */
static inline DT_HD float dt__gelu(float x)
{
    float u = DT__GELU_K * (x + DT__GELU_A * x * x * x);
    return 0.5f * x * (1.0f + dt__tanhf(u));
}

/* d gelu / dx, so that dinp = dt__gelu_grad(x) * dout. */
static inline DT_HD float dt__gelu_grad(float x)
{
    float u = DT__GELU_K * (x + DT__GELU_A * x * x * x);
    float t = dt__tanhf(u);
    float du = DT__GELU_K * (1.0f + 3.0f * DT__GELU_A * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

/* ReLU propagates NaN (x < 0 ? 0 : x), so the trainer's non-finite checks
 * still see it after an activation. */
static inline DT_HD float dt__relu(float x) { return x < 0.0f ? 0.0f : x; }
static inline DT_HD float dt__relu_grad(float x, float dout) { return x > 0.0f ? dout : 0.0f; }

/* ---- optimizers (semantics in dt_backend.h) ---------------------------------------- */

/* Adam's moments for one element and the direction mhat / (sqrt(vhat) + eps),
 * shared by AdamW and LAMB. a1 = 1 - beta1, a2 = 1 - beta2, ibc = 1 / bias
 * correction. */
static inline DT_HD float dt__adam_direction(float g, float *m, float *v, float beta1, float beta2, float a1, float a2,
                                             float ibc1, float ibc2, float eps)
{
    float mi = beta1 * *m + a1 * g;
    float vi = beta2 * *v + a2 * g * g;
    *m = mi;
    *v = vi;
    return (mi * ibc1) / (sqrtf(vi * ibc2) + eps);
}

/* AdamW: the new parameter value (decoupled decay). */
static inline DT_HD float dt__adamw(float p, float g, float *m, float *v, float lr, float beta1, float beta2, float a1,
                                    float a2, float ibc1, float ibc2, float eps, float wd)
{
    return p - lr * (dt__adam_direction(g, m, v, beta1, beta2, a1, a2, ibc1, ibc2, eps) + wd * p);
}

/* SGD (PyTorch form), one element; g is already scaled, g' = g + wd * p.
 * Without momentum buf = g' exactly, so nesterov and plain both step
 * along g'; buf is still written so the state means the same for every
 * momentum. Returns the new parameter. */
static inline DT_HD float dt__sgd_plain(float p, float g, float *buf, float lr, float wd)
{
    float gi = g + wd * p;
    *buf = gi;
    return p - lr * gi;
}

/* With momentum: first != 0 starts buf at g'. */
static inline DT_HD float dt__sgd_momentum(float p, float g, float *buf, float lr, float momentum, float wd,
                                           int nesterov, int first)
{
    float gi = g + wd * p;
    float b = first ? gi : momentum * *buf + gi;
    *buf = b;
    return p - lr * (nesterov ? gi + momentum * b : b);
}

static inline DT_HD float dt__sgd(float p, float g, float *buf, float lr, float momentum, float wd, int nesterov,
                                  int first)
{
    if (momentum == 0.0f) return dt__sgd_plain(p, g, buf, lr, wd);
    return dt__sgd_momentum(p, g, buf, lr, momentum, wd, nesterov, first);
}

/* LARS, one element: a = lr * trust; updates *buf, returns the new p. */
static inline DT_HD float dt__lars(float p, float g, float *buf, float a, float momentum, float wd)
{
    float b = momentum * *buf + a * (g + wd * p);
    *buf = b;
    return p - b;
}

/* ---- f16 / bf16 scalar conversions (the reference; rules in dt_half.h) ------------- */

static inline DT_HD uint16_t dt__f16_from_float(float x)
{
    uint32_t u = dt__float_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu; /* |x| */

    if (a > 0x7f800000u) /* NaN: quiet, keep the top 9 payload bits */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x03ffu));
    if (a >= 0x477ff000u) /* |x| >= 65520 (halfway 65504..2^16; ties to even go up) or inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal f16 range, |x| >= 2^-14 */
        /* Rebias the exponent (127 -> 15) and keep 10 of 23 mantissa bits;
         * a carry out of the mantissa correctly bumps the exponent, and
         * cannot reach inf because a < 65520. */
        uint32_t h = (a - 0x38000000u) >> 13;
        uint32_t rem = a & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    if (a <= 0x33000000u) /* |x| <= 2^-25: half the smallest subnormal, ties to even give 0 */
        return (uint16_t)sign;
    /* Subnormal f16: |x| = m * 2^(e - 150) with the implicit bit in m, and
     * the result counts units of 2^-24, so it is m >> (126 - e), rounded. */
    uint32_t e = a >> 23; /* 102..112 */
    uint32_t m = (a & 0x007fffffu) | 0x00800000u;
    uint32_t shift = 126u - e; /* 14..24 */
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++; /* 0x3ff + 1 = smallest normal: right */
    return (uint16_t)(sign | h);
}

static inline DT_HD float dt__f16_to_float(uint16_t h)
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
    uint32_t k = 0; /* bit index of m's leading 1 (0..9) */
    while ((m >> (k + 1)) != 0) k++;
    /* value = 2^(k - 24) * (m / 2^k): float exponent field k + 103 */
    uint32_t mant = (m << (23u - k)) & 0x007fffffu;
    return dt__bits_float(sign | ((k + 103u) << 23) | mant);
}

/* Round a float's bit pattern to its top 16 bits, nearest even. Adding
 * 0x7fff plus the lowest kept bit carries into bit 16 exactly when the
 * dropped half is above 0x8000, or equal to it with the kept part odd; a
 * carry out of the mantissa bumps the exponent, up to inf. NaNs are
 * selected separately (they must not round into inf). Branchless, so the
 * CPU's array loop vectorizes. */
static inline DT_HD uint16_t dt__bf16_round(uint32_t u)
{
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x0040u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

/* The float bit pattern of a bf16 (NaN made quiet). */
static inline DT_HD uint32_t dt__bf16_widen(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    return (u & 0x7fffffffu) > 0x7f800000u ? u | 0x00400000u : u;
}

static inline DT_HD uint16_t dt__bf16_from_float(float x) { return dt__bf16_round(dt__float_bits(x)); }

static inline DT_HD float dt__bf16_to_float(uint16_t h) { return dt__bits_float(dt__bf16_widen(h)); }

#endif
