/* fp8.c: the FP8 formats' conversions and the recipes' scale rules
 * (include/dt_fp8.h). Scalar and portable: the reference the backends'
 * kernels are checked against (tests/check_fp8.c walks every code of both
 * formats and every midpoint between neighbours).
 *
 * Invariant: dt_fp8_round(x) == dt_fp8_to_float(dt_fp8_from_float(x)) for
 * every float x, with the same saturate/flush flags. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "dt_fp8.h"

typedef struct dt__fp8_fmt {
    int mbits; /* mantissa bits */
    int emin;  /* exponent of the smallest normal */
    int bias;
    float max;
} dt__fp8_fmt;

static const dt__fp8_fmt dt__fmt[2] = {
    {3, -6, 7, 448.0f},     /* E4M3 (FN): 1.110 * 2^8 */
    {2, -14, 15, 57344.0f}, /* E5M2: 1.11 * 2^15 */
};

float dt_fp8_max(dt_fp8_format f) { return dt__fmt[f].max; }
float dt_fp8_min_subnormal(dt_fp8_format f) { return ldexpf(1.0f, dt__fmt[f].emin - dt__fmt[f].mbits); }
const char *dt_fp8_format_name(dt_fp8_format f) { return f == DT_FP8_E5M2 ? "e5m2" : "e4m3"; }

/* |x| (finite, 0 < a <= max) rounded to the format, nearest even */
static float dt__fp8_round_mag(float a, const dt__fp8_fmt *p)
{
    int e;
    (void)frexpf(a, &e); /* a = m 2^e, m in [0.5, 1): floor(log2 a) = e - 1 */
    int ex = e - 1;
    if (ex < p->emin) ex = p->emin; /* subnormal: the fixed quantum */
    const float quantum = ldexpf(1.0f, ex - p->mbits);
    /* a / quantum is exact (a power of two); rintf rounds to nearest even
     * in the default rounding mode, which the library never changes */
    return rintf(a / quantum) * quantum;
}

float dt_fp8_round(float x, dt_fp8_format f, int *sat, int *flush)
{
    const dt__fp8_fmt *p = &dt__fmt[f];
    if (isnan(x)) return x;
    float a = fabsf(x);
    if (a > p->max) {
        if (sat) *sat = 1;
        a = p->max;
    } else if (a != 0.0f) {
        a = dt__fp8_round_mag(a, p);
        if (a == 0.0f && flush) *flush = 1;
    }
    return signbit(x) ? -a : a;
}

uint8_t dt_fp8_from_float(float x, dt_fp8_format f, int *sat, int *flush)
{
    const dt__fp8_fmt *p = &dt__fmt[f];
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x)) return (uint8_t)(sign | (f == DT_FP8_E4M3 ? 0x7f : 0x7e));
    const float a = fabsf(dt_fp8_round(x, f, sat, flush));
    if (a == 0.0f) return sign;
    int e;
    (void)frexpf(a, &e);
    const int ex = e - 1;
    if (ex < p->emin) /* subnormal: the mantissa counts quanta of 2^(emin - mbits) */
        return (uint8_t)(sign | (int)ldexpf(a, p->mbits - p->emin));
    const int mant = (int)ldexpf(a, p->mbits - ex) - (1 << p->mbits);
    return (uint8_t)(sign | ((ex + p->bias) << p->mbits) | mant);
}

float dt_fp8_to_float(uint8_t v, dt_fp8_format f)
{
    const dt__fp8_fmt *p = &dt__fmt[f];
    const int neg = v & 0x80;
    const int ebits = 7 - p->mbits;
    const int exp = (v >> p->mbits) & ((1 << ebits) - 1);
    const int mant = v & ((1 << p->mbits) - 1);
    float a;
    if (f == DT_FP8_E4M3 && (v & 0x7f) == 0x7f) a = NAN;
    else if (f == DT_FP8_E5M2 && exp == 31) a = mant ? NAN : INFINITY;
    else if (exp == 0) a = ldexpf((float)mant, p->emin - p->mbits);
    else a = ldexpf((float)((1 << p->mbits) + mant), exp - p->bias - p->mbits);
    return neg ? -a : a;
}

float dt_fp8_scale_from_amax(float amax, dt_fp8_format f, int margin, int pow2)
{
    const float max = dt__fmt[f].max;
    if (!(amax > 0.0f) || !isfinite(amax)) return 0.0f;
    float s = ldexpf(max / amax, -margin);
    if (!isfinite(s) || s <= 0.0f) return 0.0f; /* amax too small (or margin too large) for a float scale */
    if (pow2) {
        int e;
        (void)frexpf(s, &e);
        s = ldexpf(1.0f, e - 1); /* the largest power of two <= s */
    }
    while (amax * s > max) s = nextafterf(s, 0.0f); /* so that amax itself never saturates */
    return s;
}

float dt_fp8_history_amax(const float *hist, int n, float latest, dt_fp8_amax_algo algo)
{
    if (algo == DT_FP8_AMAX_MOST_RECENT) return latest;
    float m = 0.0f;
    for (int i = 0; i < n; i++)
        if (hist[i] > m) m = hist[i]; /* NaN compares false: skipped */
    return m;
}

dt_status dt_fp8_mode_parse(const char *s, dt_fp8_mode *out)
{
    if (s && !strcmp(s, "e4m3")) *out = DT_FP8_MODE_E4M3;
    else if (s && !strcmp(s, "hybrid")) *out = DT_FP8_MODE_HYBRID;
    else return DT_FAIL(DT_ERR_INVALID, "--fp8-format %s: expected e4m3 or hybrid", s ? s : "(null)");
    return DT_OK;
}

const char *dt_fp8_mode_name(dt_fp8_mode m)
{
    return m == DT_FP8_MODE_E4M3 ? "e4m3" : m == DT_FP8_MODE_HYBRID ? "hybrid" : "off";
}

dt_status dt_fp8_recipe_parse(const char *s, dt_fp8_recipe *out)
{
    if (s && !strcmp(s, "delayed")) *out = DT_FP8_DELAYED;
    else if (s && !strcmp(s, "tensorwise")) *out = DT_FP8_TENSORWISE;
    else if (s && !strcmp(s, "blockwise")) *out = DT_FP8_BLOCKWISE;
    else return DT_FAIL(DT_ERR_INVALID, "--fp8-recipe %s: expected delayed, tensorwise or blockwise", s ? s : "(null)");
    return DT_OK;
}

const char *dt_fp8_recipe_name(dt_fp8_recipe r)
{
    return r == DT_FP8_TENSORWISE ? "tensorwise" : r == DT_FP8_BLOCKWISE ? "blockwise" : "delayed";
}

dt_status dt_fp8_amax_algo_parse(const char *s, dt_fp8_amax_algo *out)
{
    if (s && !strcmp(s, "max")) *out = DT_FP8_AMAX_MAX;
    else if (s && !strcmp(s, "most_recent")) *out = DT_FP8_AMAX_MOST_RECENT;
    else return DT_FAIL(DT_ERR_INVALID, "--fp8-amax-compute-algo %s: expected max or most_recent", s ? s : "(null)");
    return DT_OK;
}

const char *dt_fp8_amax_algo_name(dt_fp8_amax_algo a) { return a == DT_FP8_AMAX_MOST_RECENT ? "most_recent" : "max"; }
