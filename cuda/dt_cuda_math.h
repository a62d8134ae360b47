/* dt_cuda_math.h: the per-element math of the CUDA kernels, written once as
 * `__host__ __device__` inline functions so the same code runs in the
 * kernels and in a CPU-side test (tests/check_cuda_math.c) that compares it
 * with the CPU backend. DT_HD is empty when a plain C compiler includes this
 * file, which is then ordinary C11.
 *
 * What lives here: exp/tanh (the CPU backend's polynomial of lib/vmath.h,
 * so GELU and softmax see the same function on both devices), GELU and its
 * derivative, ReLU, the optimizer steps (AdamW, SGD, LARS, LAMB's
 * direction), the non-finite test, and the f16/bf16 conversions.
 *
 * Invariants: the conversions are integer code on the bit patterns, a copy
 * of lib/half.c's reference (round to nearest even, subnormals, overflow to
 * inf, quiet NaN keeping the top payload bits), so a cast gives the same
 * bits on the GPU as on the CPU whatever the FPU modes. The float formulas
 * are the CPU backend's, term for term; they can still differ from it in
 * the last bit where a compiler fuses a multiply and an add (nvcc does by
 * default), which the cross-backend tests allow for. No function touches
 * memory other than its arguments. */
#ifndef DT_CUDA_MATH_H
#define DT_CUDA_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define DT_HD __host__ __device__
#else
#define DT_HD
#endif

#define DT__HD_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define DT__HD_GELU_A 0.044715f

/* ---- bit patterns ----------------------------------------------------------- */

static inline DT_HD uint32_t dt__hd_float_bits(float x)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
#endif
}

static inline DT_HD float dt__hd_bits_float(uint32_t u)
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
 * fast-math setting can fold it away. */
static inline DT_HD int dt__hd_nonfinite(float x) { return (dt__hd_float_bits(x) & 0x7f800000u) == 0x7f800000u; }

/* ---- exp, tanh (lib/vmath.h's algorithm) ------------------------------------ */

/* Relative error < 2e-7 on [-87, 88]; 0 below -87.3, saturates above 88.7. */
static inline DT_HD float dt__hd_expf(float x)
{
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f;
    const float ln2_lo = -2.12194440e-4f;
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.7f ? 88.7f : x;
    float fn = floorf(x * log2e + 0.5f);
    float r = x - fn * ln2_hi;
    r = r - fn * ln2_lo;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t n = (int32_t)fn;
    int32_t n1 = n / 2;
    int32_t n2 = n - n1;
    float s1 = dt__hd_bits_float((uint32_t)(n1 + 127) << 23);
    float s2 = dt__hd_bits_float((uint32_t)(n2 + 127) << 23);
    float y = p * s1 * s2;
    return x <= -87.3f ? 0.0f : y;
}

/* Absolute error < 3e-7. */
static inline DT_HD float dt__hd_tanhf(float x)
{
    x = x < -10.0f ? -10.0f : x;
    x = x > 10.0f ? 10.0f : x;
    float e = dt__hd_expf(2.0f * x);
    return (e - 1.0f) / (e + 1.0f);
}

/* ---- activations -------------------------------------------------------------- */

/* GELU, tanh approximation: 0.5 x (1 + tanh(k (x + a x^3))). */
static inline DT_HD float dt__hd_gelu(float x)
{
    float u = DT__HD_GELU_K * (x + DT__HD_GELU_A * x * x * x);
    return 0.5f * x * (1.0f + dt__hd_tanhf(u));
}

/* d gelu / dx, so that dinp = dt__hd_gelu_grad(x) * dout. */
static inline DT_HD float dt__hd_gelu_grad(float x)
{
    float u = DT__HD_GELU_K * (x + DT__HD_GELU_A * x * x * x);
    float t = dt__hd_tanhf(u);
    float du = DT__HD_GELU_K * (1.0f + 3.0f * DT__HD_GELU_A * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

/* ReLU propagates NaN (x < 0 ? 0 : x), as the CPU backend. */
static inline DT_HD float dt__hd_relu(float x) { return x < 0.0f ? 0.0f : x; }
static inline DT_HD float dt__hd_relu_grad(float x, float dout) { return x > 0.0f ? dout : 0.0f; }

/* ---- optimizers (semantics in lib/dt_backend.h) --------------------------------- */

/* Adam's moments for one element and the direction mhat / (sqrt(vhat) + eps).
 * a1 = 1 - beta1, a2 = 1 - beta2, ibc = 1 / bias correction. */
static inline DT_HD float dt__hd_adam_direction(float g, float *m, float *v, float beta1, float beta2, float a1,
                                                float a2, float ibc1, float ibc2, float eps)
{
    float mi = beta1 * *m + a1 * g;
    float vi = beta2 * *v + a2 * g * g;
    *m = mi;
    *v = vi;
    return (mi * ibc1) / (sqrtf(vi * ibc2) + eps);
}

/* AdamW: the new parameter value. */
static inline DT_HD float dt__hd_adamw(float p, float g, float *m, float *v, float lr, float beta1, float beta2,
                                       float a1, float a2, float ibc1, float ibc2, float eps, float wd)
{
    return p - lr * (dt__hd_adam_direction(g, m, v, beta1, beta2, a1, a2, ibc1, ibc2, eps) + wd * p);
}

/* SGD with momentum (PyTorch form), one element: updates *buf, returns the
 * new parameter. g is already scaled; first != 0 starts buf at g'. */
static inline DT_HD float dt__hd_sgd(float p, float g, float *buf, float lr, float momentum, float wd, int nesterov,
                                     int first)
{
    float gi = g + wd * p;
    if (momentum == 0.0f) {
        *buf = gi;
        return p - lr * gi;
    }
    float b = first ? gi : momentum * *buf + gi;
    *buf = b;
    return p - lr * (nesterov ? gi + momentum * b : b);
}

/* LARS, one element: a = lr * trust; updates *buf, returns the new p. */
static inline DT_HD float dt__hd_lars(float p, float g, float *buf, float a, float momentum, float wd)
{
    float b = momentum * *buf + a * (g + wd * p);
    *buf = b;
    return p - b;
}

/* ---- f16 / bf16 (lib/half.c's reference, bit for bit) ----------------------------- */

static inline DT_HD uint16_t dt__hd_f16_from_float(float x)
{
    uint32_t u = dt__hd_float_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x03ffu)); /* quiet NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                         /* >= 65520: inf */
    if (a >= 0x38800000u) {                                                          /* normal */
        uint32_t h = (a - 0x38000000u) >> 13;
        uint32_t rem = a & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    if (a <= 0x33000000u) return (uint16_t)sign; /* <= 2^-25: zero */
    uint32_t e = a >> 23;                        /* subnormal: 102..112 */
    uint32_t m = (a & 0x007fffffu) | 0x00800000u;
    uint32_t shift = 126u - e;
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

static inline DT_HD float dt__hd_f16_to_float(uint16_t hv)
{
    uint32_t h = hv;
    uint32_t sign = (h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x03ffu;
    if (e == 0x1fu) return dt__hd_bits_float(sign | 0x7f800000u | (m ? 0x00400000u | (m << 13) : 0u));
    if (e != 0) return dt__hd_bits_float(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0) return dt__hd_bits_float(sign);
    uint32_t k = 0; /* bit index of m's leading 1 (0..9) */
    while ((m >> (k + 1)) != 0) k++;
    uint32_t mant = (m << (23u - k)) & 0x007fffffu;
    return dt__hd_bits_float(sign | ((k + 103u) << 23) | mant);
}

static inline DT_HD uint16_t dt__hd_bf16_from_float(float x)
{
    uint32_t u = dt__hd_float_bits(x);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x0040u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

static inline DT_HD float dt__hd_bf16_to_float(uint16_t hv)
{
    uint32_t u = (uint32_t)hv << 16;
    return dt__hd_bits_float((u & 0x7fffffffu) > 0x7f800000u ? u | 0x00400000u : u);
}

#endif
