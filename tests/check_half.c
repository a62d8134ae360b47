/* check_half.c: f16/bf16 conversions (scalar reference against independent
 * references computed here, fast array path against the scalar reference),
 * the CPU backend's cast, round and unscale_check ops (round: the same bits
 * as the two casts it fuses, on every 97th float pattern, the specials and
 * the rounding boundaries included), and the loss scaler's state
 * machine (step-by-step traces against expected sequences, validation).
 *
 * The independent references never use the library's bit tricks: values
 * come from the bit fields with ldexp, and rounding picks the nearer of the
 * two neighbouring representable values found by binary search in a table
 * of all of them (ties to the even pattern). Large loops count mismatches
 * and assert once, keeping the first one for the message (Check's asserts
 * cost a call each, too slow for millions). */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "testutil.h"

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

/* ---- independent references -------------------------------------------- */

/* Value of a non-NaN, non-inf f16 from its fields. */
static double ref_f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double ref_bf16_value(uint16_t h)
{
    int e = (h >> 7) & 0xff, m = h & 0x7f;
    double v = e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
    return (h & 0x8000) ? -v : v;
}

/* A format's non-negative finite values in pattern order, vals[0..inf_pat),
 * plus vals[inf_pat] = the value the next pattern would have with an
 * unbounded exponent (2^16 for f16, 2^128 for bf16): the overflow point is
 * the midpoint between the largest finite value and that one. */
typedef struct ref_table {
    double *vals;
    uint32_t inf_pat; /* 0x7c00 or 0x7f80: also the count of finite patterns */
} ref_table;

static ref_table f16_table, bf16_table;

static void ref_tables_init(void)
{
    if (f16_table.vals) return;
    f16_table.inf_pat = 0x7c00;
    f16_table.vals = malloc((0x7c00 + 1) * sizeof(double));
    for (uint32_t h = 0; h < 0x7c00; h++) f16_table.vals[h] = ref_f16_value((uint16_t)h);
    f16_table.vals[0x7c00] = ldexp(1, 16);
    bf16_table.inf_pat = 0x7f80;
    bf16_table.vals = malloc((0x7f80 + 1) * sizeof(double));
    for (uint32_t h = 0; h < 0x7f80; h++) bf16_table.vals[h] = ref_bf16_value((uint16_t)h);
    bf16_table.vals[0x7f80] = ldexp(1, 128);
}

/* Round a non-NaN float to the format: nearest value, ties to the even
 * pattern, past the overflow point to inf. 2a and v0 + v1 are exact in
 * double (a has 24 significant bits, adjacent values at most 12). */
static uint16_t ref_round(const ref_table *t, float x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (a >= t->vals[t->inf_pat]) return sign | (uint16_t)t->inf_pat;
    uint32_t lo = 0, hi = t->inf_pat; /* vals[lo] <= a < vals[hi] */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (t->vals[mid] <= a) lo = mid;
        else hi = mid;
    }
    double twice = 2 * a, sum = t->vals[lo] + t->vals[hi];
    uint32_t r = twice < sum ? lo : twice > sum ? hi : (lo & 1 ? hi : lo);
    return sign | (uint16_t)r; /* hi == inf_pat is the inf pattern */
}

/* NaN rule of dt_half.h, from the fields: sign, quiet bit, top payload. */
static uint16_t ref_f16_nan(uint32_t u) { return (uint16_t)(((u >> 16) & 0x8000) | 0x7e00 | ((u >> 13) & 0x3ff)); }
static uint16_t ref_bf16_nan(uint32_t u) { return (uint16_t)((u >> 16) | 0x40); }

static uint16_t ref_f16_from_float(float x) { return isnan(x) ? ref_f16_nan(bits_of(x)) : ref_round(&f16_table, x); }
static uint16_t ref_bf16_from_float(float x) { return isnan(x) ? ref_bf16_nan(bits_of(x)) : ref_round(&bf16_table, x); }

/* Special float inputs every conversion test includes. */
static const uint32_t special_bits[] = {
    0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x7f800000, 0xff800000, /* 0, -0, 1, -1, inf, -inf */
    0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345, 0x7fbfffff, 0x7fffffff, /* NaNs, quiet and signalling */
    0x00000001, 0x80000001, 0x00400000, 0x007fffff, 0x00800000, 0x80800000, /* float subnormals, min normal */
    0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff, 0x7f7f8001,             /* FLT_MAX, bf16 overflow point */
    0x477fe000, 0x477ff000, 0x477fefff, 0x477ff001, 0xc77ff000, 0x47800000, /* 65504, 65520 +-1 ulp, 2^16 */
    0x33800000, 0x33000000, 0x33000001, 0x32ffffff, 0x32800000, 0xb3000000, /* 2^-24, 2^-25 +-, 2^-26 */
    0x38800000, 0x387fc000, 0x387fe000, 0x387ff000, 0x38000000,             /* f16 min normal, max subnormal */
    0x3f801000, 0x3f803000, 0x3f800fff, 0x3f801001, 0x3f808000, 0x3f818000, /* f16 and bf16 ties at 1 */
};
#define N_SPECIAL (sizeof special_bits / sizeof special_bits[0])

/* ---- f16 scalar ------------------------------------------------------------ */

START_TEST(test_f16_to_float_all_patterns)
{
    long bad = 0;
    uint32_t first = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dt_f16_to_float((dt_f16)h);
        uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
        int ok;
        if (e == 31 && m != 0) /* quiet NaN, same sign, payload kept */
            ok = isnan(f) && bits_of(f) == (((h & 0x8000u) << 16) | 0x7fc00000u | (m << 13));
        else if (e == 31) ok = isinf(f) && !signbit(f) == !(h & 0x8000);
        else ok = (double)f == ref_f16_value((uint16_t)h) && !signbit(f) == !(h & 0x8000);
        if (!ok && bad++ == 0) first = h;
    }
    ck_assert_msg(bad == 0, "%ld f16 patterns decode wrongly, first 0x%04x -> 0x%08x", bad, first,
                  bits_of(dt_f16_to_float((dt_f16)first)));
    ck_assert_float_eq(dt_f16_to_float(0x7bff), 65504.0f);
    ck_assert_float_eq(dt_f16_to_float(0x0001), ldexpf(1, -24));
    ck_assert_float_eq(dt_f16_to_float(0x0400), ldexpf(1, -14));
    ck_assert_uint_eq(bits_of(dt_f16_to_float(0x8000)), 0x80000000u);
}
END_TEST

START_TEST(test_f16_round_trip)
{
    long bad = 0;
    uint32_t first = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        int nan = ((h >> 10) & 0x1f) == 31 && (h & 0x3ff);
        uint16_t expect = nan ? (uint16_t)(h | 0x200) : (uint16_t)h; /* NaNs come back quiet */
        if (dt_f16_from_float(dt_f16_to_float((dt_f16)h)) != expect && bad++ == 0) first = h;
    }
    ck_assert_msg(bad == 0, "%ld f16 patterns do not survive f16 -> f32 -> f16, first 0x%04x", bad, first);
}
END_TEST

/* Every pair of adjacent finite f16 values (and 65504 with the overflow
 * point 2^16): the midpoint goes to the even pattern, one float ulp above
 * it to the upper value, one below to the lower; both signs. */
static void check_midpoints(const ref_table *t, dt_f16 (*conv)(float), const char *what)
{
    long bad = 0;
    uint32_t first = 0;
    for (uint32_t h = 0; h < t->inf_pat; h++) {
        float mid = (float)((t->vals[h] + t->vals[h + 1]) / 2);
        if ((double)mid != (t->vals[h] + t->vals[h + 1]) / 2 && bad++ == 0) first = h; /* must be exact */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        for (int neg = 0; neg < 2; neg++) {
            float sgn = neg ? -1.0f : 1.0f;
            uint16_t sb = neg ? 0x8000 : 0;
            int ok = conv(sgn * mid) == (sb | even) && conv(sgn * nextafterf(mid, INFINITY)) == (sb | (h + 1)) &&
                     conv(sgn * nextafterf(mid, 0)) == (sb | h);
            if (!ok && bad++ == 0) first = h;
        }
    }
    ck_assert_msg(bad == 0, "%s: %ld midpoint checks fail, first between patterns 0x%04x and 0x%04x", what, bad, first,
                  first + 1);
}

START_TEST(test_f16_rounding_midpoints)
{
    ref_tables_init();
    check_midpoints(&f16_table, dt_f16_from_float, "f16");
}
END_TEST

START_TEST(test_f16_rounding_named)
{
    struct {
        float x;
        uint16_t h;
    } cases[] = {
        {1.0f, 0x3c00},
        {1.0f + 0x1p-11f, 0x3c00},            /* tie, even down */
        {1.0f + 3 * 0x1p-11f, 0x3c02},        /* tie, even up */
        {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01}, /* just above a tie */
        {65504.0f, 0x7bff},                   /* max */
        {65519.99609375f, 0x7bff},            /* one float ulp below the overflow threshold */
        {65520.0f, 0x7c00},                   /* halfway to 2^16: ties to even -> inf */
        {-65520.0f, 0xfc00},
        {1e6f, 0x7c00},
        {FLT_MAX, 0x7c00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0x1p-24f, 0x0001},        /* smallest subnormal */
        {0x1p-25f, 0x0000},        /* half of it: tie to even 0 */
        {0x1.000002p-25f, 0x0001}, /* just above half */
        {0x1.8p-25f, 0x0001},
        {0x1p-26f, 0x0000},
        {FLT_TRUE_MIN, 0x0000},
        {-FLT_TRUE_MIN, 0x8000},
        {-0.0f, 0x8000},
        {0.0f, 0x0000},
        {0x1p-14f, 0x0400},     /* smallest normal */
        {0x1.ff8p-15f, 0x03ff}, /* largest subnormal */
        {0x1.ffcp-15f, 0x0400}, /* tie between 0x03ff and 0x0400: even is 0x0400 */
        {3 * 0x1p-25f, 0x0002}, /* tie between 1 and 2 ulps: even 2 */
        {5 * 0x1p-25f, 0x0002}, /* tie between 2 and 3 ulps: even 2 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(dt_f16_from_float(cases[i].x) == cases[i].h, "f16(%a) = 0x%04x, expected 0x%04x", cases[i].x,
                      dt_f16_from_float(cases[i].x), cases[i].h);
    /* NaN stays NaN, quiet, sign and top payload kept */
    ck_assert_uint_eq(dt_f16_from_float(float_of(0x7fc00000)), 0x7e00);
    ck_assert_uint_eq(dt_f16_from_float(float_of(0xffc00000)), 0xfe00);
    ck_assert_uint_eq(dt_f16_from_float(float_of(0x7f800001)), 0x7e00); /* signalling, payload below f16's */
    ck_assert_uint_eq(dt_f16_from_float(float_of(0x7fbfe000)), 0x7fff);
    ck_assert_uint_eq(dt_f16_to_float(0x7c01) != dt_f16_to_float(0x7c01), 1); /* NaN */
}
END_TEST

/* Random floats (raw bit patterns, and values spread over the f16 range)
 * against the independent rounding reference. */
START_TEST(test_f16_random_vs_reference)
{
    ref_tables_init();
    long bad = 0;
    uint32_t first = 0;
    for (long i = 0; i < 600000; i++) {
        uint32_t u = rnd32();
        if (i & 1) u = (u & 0x807fffffu) | ((100u + u % 46u) << 23); /* exponent near f16's range */
        float x = float_of(u);
        if (dt_f16_from_float(x) != ref_f16_from_float(x) && bad++ == 0) first = u;
    }
    for (size_t i = 0; i < N_SPECIAL; i++) {
        float x = float_of(special_bits[i]);
        if (dt_f16_from_float(x) != ref_f16_from_float(x) && bad++ == 0) first = special_bits[i];
    }
    ck_assert_msg(bad == 0, "%ld f32 -> f16 mismatches, first 0x%08x -> 0x%04x, expected 0x%04x", bad, first,
                  dt_f16_from_float(float_of(first)), ref_f16_from_float(float_of(first)));
}
END_TEST

/* ---- bf16 scalar ----------------------------------------------------------- */

START_TEST(test_bf16_to_float_all_patterns)
{
    long bad = 0;
    uint32_t first = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dt_bf16_to_float((dt_bf16)h);
        uint32_t e = (h >> 7) & 0xff, m = h & 0x7f;
        int ok;
        if (e == 255 && m != 0) ok = isnan(f) && bits_of(f) == ((h << 16) | 0x00400000u);
        else if (e == 255) ok = isinf(f) && !signbit(f) == !(h & 0x8000);
        else ok = (double)f == ref_bf16_value((uint16_t)h) && !signbit(f) == !(h & 0x8000);
        if (!ok && bad++ == 0) first = h;
    }
    ck_assert_msg(bad == 0, "%ld bf16 patterns decode wrongly, first 0x%04x", bad, first);
    ck_assert_float_eq(dt_bf16_to_float(0x3f80), 1.0f);
    ck_assert_float_eq(dt_bf16_to_float(0x0001), ldexpf(1, -133));
}
END_TEST

START_TEST(test_bf16_round_trip)
{
    long bad = 0;
    uint32_t first = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        int nan = ((h >> 7) & 0xff) == 255 && (h & 0x7f);
        uint16_t expect = nan ? (uint16_t)(h | 0x40) : (uint16_t)h;
        if (dt_bf16_from_float(dt_bf16_to_float((dt_bf16)h)) != expect && bad++ == 0) first = h;
    }
    ck_assert_msg(bad == 0, "%ld bf16 patterns do not survive bf16 -> f32 -> bf16, first 0x%04x", bad, first);
}
END_TEST

START_TEST(test_bf16_rounding)
{
    ref_tables_init();
    check_midpoints(&bf16_table, dt_bf16_from_float, "bf16");
    ck_assert_uint_eq(dt_bf16_from_float(float_of(0x3f808000)), 0x3f80); /* tie, even down */
    ck_assert_uint_eq(dt_bf16_from_float(float_of(0x3f818000)), 0x3f82); /* tie, even up */
    ck_assert_uint_eq(dt_bf16_from_float(float_of(0x3f808001)), 0x3f81);
    ck_assert_uint_eq(dt_bf16_from_float(FLT_MAX), 0x7f80); /* rounds past the max: inf */
    ck_assert_uint_eq(dt_bf16_from_float(float_of(0x7f7f7fff)), 0x7f7f);
    ck_assert_uint_eq(dt_bf16_from_float(-INFINITY), 0xff80);
    ck_assert_uint_eq(dt_bf16_from_float(float_of(0x00400000)), 0x0040); /* float subnormal kept */
    ck_assert_uint_eq(dt_bf16_from_float(float_of(0x00008000)), 0x0000); /* tie to even zero */
    ck_assert_uint_eq(dt_bf16_from_float(float_of(0x00018000)), 0x0002);
    ck_assert_uint_eq(dt_bf16_from_float(-0.0f), 0x8000);
    ck_assert_uint_eq(dt_bf16_from_float(float_of(0x7f800001)), 0x7fc0); /* signalling NaN -> quiet */
    ck_assert_uint_eq(dt_bf16_from_float(float_of(0xffffffff)), 0xffff);
    long bad = 0;
    uint32_t first = 0;
    for (long i = 0; i < 600000; i++) {
        uint32_t u = i < (long)N_SPECIAL ? special_bits[i] : rnd32();
        float x = float_of(u);
        if (dt_bf16_from_float(x) != ref_bf16_from_float(x) && bad++ == 0) first = u;
    }
    ck_assert_msg(bad == 0, "%ld f32 -> bf16 mismatches, first 0x%08x", bad, first);
}
END_TEST

/* ---- fast array path == scalar reference ------------------------------------ */

#define N_FAST ((size_t)3 << 20)

static float *fast_inputs(size_t n)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = rnd32();
        switch (i % 4) {
        case 0: break;                                                      /* any pattern */
        case 1: u = (u & 0x807fffffu) | ((100u + u % 46u) << 23); break;    /* f16 range */
        case 2: u = (u & 0xffff0000u) | (u & 1 ? 0x8000u : 0x7fffu); break; /* bf16 ties and near-ties */
        case 3: u = (u & 0xffffe000u) | 0x1000u; break;                     /* f16-range ties for normals */
        }
        x[i] = float_of(u);
    }
    for (size_t i = 0; i < N_SPECIAL; i++) x[i * 7] = float_of(special_bits[i]);
    return x;
}

START_TEST(test_fast_from_float)
{
    const size_t n = N_FAST;
    float *x = fast_inputs(n);
    uint16_t *h = malloc((n + 1) * sizeof *h);
    /* whole array, then an odd length from an odd offset (unaligned, tails) */
    size_t offs[2] = {0, 1}, lens[2] = {n, n - 38};
    for (int k = 0; k < 2; k++) {
        const float *src = x + offs[k];
        size_t len = lens[k];
        long bad16 = 0, badbf = 0;
        size_t f16_first = 0, bf_first = 0;
        dt_f16_from_float_array(h + offs[k], src, len);
        for (size_t i = 0; i < len; i++)
            if (h[offs[k] + i] != dt_f16_from_float(src[i]) && bad16++ == 0) f16_first = i;
        dt_bf16_from_float_array(h + offs[k], src, len);
        for (size_t i = 0; i < len; i++)
            if (h[offs[k] + i] != dt_bf16_from_float(src[i]) && badbf++ == 0) bf_first = i;
        ck_assert_msg(bad16 == 0, "f16 array (%s) != scalar on %ld of %zu, first x = 0x%08x", dt_half_simd(), bad16,
                      len, bits_of(src[f16_first]));
        ck_assert_msg(badbf == 0, "bf16 array != scalar on %ld of %zu, first x = 0x%08x", badbf, len,
                      bits_of(src[bf_first]));
    }
    free(x);
    free(h);
}
END_TEST

START_TEST(test_fast_to_float)
{
    /* every pattern, twice, the second time shifted by 3 (tails) */
    const size_t n = 2 * 65536 + 3;
    uint16_t *h = malloc(n * sizeof *h);
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++) h[i] = (uint16_t)(i < 65536 ? i : i - 65536 - 3);
    dt_f16_to_float_array(f, h, n);
    long bad = 0;
    for (size_t i = 0; i < n; i++) bad += bits_of(f[i]) != bits_of(dt_f16_to_float(h[i]));
    ck_assert_msg(bad == 0, "f16 -> f32 array (%s) != scalar on %ld patterns", dt_half_simd(), bad);
    dt_bf16_to_float_array(f + 1, h, n - 1);
    bad = 0;
    for (size_t i = 0; i + 1 < n; i++) bad += bits_of(f[i + 1]) != bits_of(dt_bf16_to_float(h[i]));
    ck_assert_msg(bad == 0, "bf16 -> f32 array != scalar on %ld patterns", bad);
    for (size_t len = 0; len < 40; len++) { /* short lengths: only tails, or one vector and a tail */
        for (size_t i = 0; i < len + 1; i++) f[i] = -7.0f;
        dt_f16_to_float_array(f, h + 0x3c00, len);
        for (size_t i = 0; i < len; i++) ck_assert_float_eq(f[i], dt_f16_to_float((dt_f16)(0x3c00 + i)));
        ck_assert_float_eq(f[len], -7.0f); /* nothing written past n */
    }
    free(h);
    free(f);
}
END_TEST

/* ---- backend ops ------------------------------------------------------------ */

static const dt_dtype float_types[3] = {DT_F32, DT_F16, DT_BF16};

/* Reference for one element: widen to float (exact), then round. */
static void ref_cast_elem(void *dst, dt_dtype dt, size_t i, const void *src, dt_dtype st)
{
    float v = st == DT_F32   ? ((const float *)src)[i]
              : st == DT_F16 ? dt_f16_to_float(((const uint16_t *)src)[i])
                             : dt_bf16_to_float(((const uint16_t *)src)[i]);
    if (dt == DT_F32) {
        if (st == DT_F32) memcpy((float *)dst + i, (const float *)src + i, 4);
        else ((float *)dst)[i] = v;
    } else if (st == dt) {
        ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i];
    } else {
        ((uint16_t *)dst)[i] = dt == DT_F16 ? dt_f16_from_float(v) : dt_bf16_from_float(v);
    }
}

START_TEST(test_cast_all_pairs)
{
    dt_backend *be;
    ck_dt(dt_backend_cpu_create(2, &be));
    const size_t n = 100003; /* several parallel blocks and a ragged one */
    float *src32 = fast_inputs(n);
    uint16_t *src16 = malloc(n * sizeof *src16);
    for (size_t i = 0; i < n; i++) src16[i] = (uint16_t)(i * 40503u); /* every pattern, scrambled */
    void *got = malloc(n * 4 + 4), *want = malloc(n * 4);             /* +4: a guard byte past n */
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            dt_dtype st = float_types[a], dt = float_types[b];
            const void *src = st == DT_F32 ? (const void *)src32 : (const void *)src16;
            memset(got, 0xab, n * 4 + 4);
            ck_dt(be->cast(be, got, dt, src, st, n));
            for (size_t i = 0; i < n; i++) ref_cast_elem(want, dt, i, src, st);
            ck_assert_msg(memcmp(got, want, n * dt_dtype_size(dt)) == 0, "cast %s -> %s differs from the reference",
                          dt_dtype_name(st), dt_dtype_name(dt));
            ck_assert_msg(((unsigned char *)got)[n * dt_dtype_size(dt)] == 0xab, "cast %s -> %s wrote past n",
                          dt_dtype_name(st), dt_dtype_name(dt));
            ck_dt(be->cast(be, got, dt, src, st, 0)); /* n = 0 is a no-op */
        }
    /* identity in place */
    ck_dt(be->cast(be, src16, DT_F16, src16, DT_F16, n));
    ck_assert_uint_eq(src16[1], 40503u);
    /* non-float types */
    int32_t i32[4] = {0};
    dt_clear_error();
    ck_assert_int_eq(be->cast(be, i32, DT_I32, src32, DT_F32, 4), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "i32"));
    ck_assert_int_eq(be->cast(be, src32, DT_F32, i32, DT_I32, 4), DT_ERR_INVALID);
    ck_assert_int_eq(be->cast(be, i32, DT_I32, i32, DT_I32, 4), DT_ERR_INVALID);
    ck_assert_int_eq(be->cast(be, got, DT_F16, src32, (dt_dtype)42, 4), DT_ERR_INVALID);
    free(src32);
    free(src16);
    free(got);
    free(want);
    dt_backend_destroy(be);
}
END_TEST

/* round = cast to the format and back, bit for bit: every 97th pattern of
 * the 2^32 (44 million, all exponents, NaNs and infinities among them) and
 * the library's fast inputs, through the array functions and the backend. */
START_TEST(test_round_fused)
{
    dt_backend *be;
    ck_dt(dt_backend_cpu_create(2, &be));
    const size_t chunk = (size_t)1 << 20;
    float *x = malloc(chunk * sizeof *x), *y = malloc(chunk * sizeof *y), *z = malloc(chunk * sizeof *z);
    uint16_t *h = malloc(chunk * sizeof *h);
    uint64_t bad = 0, first = 0;
    for (int f = 0; f < 2; f++) {
        const dt_dtype dt = f ? DT_F16 : DT_BF16;
        for (uint64_t u0 = 0; u0 < ((uint64_t)1 << 32); u0 += (uint64_t)97 * chunk) {
            size_t m = 0;
            for (uint64_t u = u0; m < chunk && u < ((uint64_t)1 << 32); u += 97) x[m++] = float_of((uint32_t)u);
            memcpy(y, x, m * sizeof *y);
            memcpy(z, x, m * sizeof *z);
            if (f) {
                dt_f16_from_float_array(h, x, m);
                dt_f16_to_float_array(x, h, m);
                dt_f16_round_array(y, m);
            } else {
                dt_bf16_from_float_array(h, x, m);
                dt_bf16_to_float_array(x, h, m);
                dt_bf16_round_array(y, m);
            }
            ck_dt(be->round(be, z, dt, m));
            for (size_t i = 0; i < m; i++)
                if (bits_of(x[i]) != bits_of(y[i]) || bits_of(x[i]) != bits_of(z[i])) {
                    if (!bad) first = u0 + (uint64_t)97 * i;
                    bad++;
                }
        }
    }
    ck_assert_msg(bad == 0, "%llu patterns round differently from the two casts, first 0x%08llx",
                  (unsigned long long)bad, (unsigned long long)first);
    ck_assert_int_eq(be->round(be, x, DT_F32, 4), DT_ERR_INVALID);
    free(x), free(y), free(z), free(h);
    dt_backend_destroy(be);
}
END_TEST

START_TEST(test_unscale_check)
{
    dt_backend *be;
    ck_dt(dt_backend_cpu_create(2, &be));
    const size_t sizes[2] = {1000, 200003}; /* one thread; several */
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        float *x = malloc(n * sizeof *x), *orig = malloc(n * sizeof *orig);
        for (size_t i = 0; i < n; i++) orig[i] = (float)((int)(rnd32() % 2000001) - 1000000) * 0.37f;
        orig[n - 1] = -FLT_MAX;

        /* all finite: values scaled exactly, flag left alone (0 stays 0, 1 stays 1) */
        memcpy(x, orig, n * sizeof *x);
        int flag = 0;
        ck_dt(be->unscale_check(be, x, 0x1p-10f, n, &flag));
        ck_assert_int_eq(flag, 0);
        long bad = 0;
        for (size_t i = 0; i < n; i++) bad += x[i] != orig[i] * 0x1p-10f;
        ck_assert_int_eq(bad, 0);
        flag = 1;
        ck_dt(be->unscale_check(be, x, 1.0f, n, &flag));
        ck_assert_int_eq(flag, 1);

        struct {
            size_t at;
            float v, s;
        } poison[] = {
            {n / 2 + 1, INFINITY, 0.5f}, {n - 1, -INFINITY, 0.5f}, {0, NAN, 0.5f},
            {n - 1, -NAN, 1.0f},         {n / 3, FLT_MAX, 4.0f}, /* finite input, the product overflows */
        };
        for (size_t p = 0; p < sizeof poison / sizeof poison[0]; p++) {
            memcpy(x, orig, n * sizeof *x);
            x[poison[p].at] = poison[p].v;
            flag = 0;
            ck_dt(be->unscale_check(be, x, poison[p].s, n, &flag));
            ck_assert_msg(flag == 1, "n = %zu: %g at %zu with s = %g not flagged", n, (double)poison[p].v, poison[p].at,
                          (double)poison[p].s);
        }
        free(x);
        free(orig);
    }
    int flag = 0;
    ck_dt(be->unscale_check(be, NULL, 2.0f, 0, &flag));
    ck_assert_int_eq(flag, 0);
    dt_backend_destroy(be);
}
END_TEST

/* span_stats through the front, on the CPU (which has no slot of its own):
 * per span, exactly unscale_check then sumsq, with flags set to 0 or 1
 * (not left alone), empty spans giving 0 and 0, x left alone without
 * flags, and bad arguments refused with one message. */
START_TEST(test_span_stats)
{
    dt_backend *be;
    ck_dt(dt_backend_cpu_create(2, &be));
    const size_t n = 5000;
    float *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(rnd32() % 2001) - 1000) * 0.37f;
    x[3000] = FLT_MAX; /* span 2 overflows once multiplied by 4 */
    memcpy(ref, x, n * sizeof *x);
    const dt_span spans[] = {{0, 1000}, {1000, 0}, {2000, 1500}, {3500, 1500}};
    int nf[4] = {7, 7, 7, 7};
    double sq[4];
    ck_dt(be->span_stats(be, x, spans, 4, 4.0f, nf, sq));
    for (int i = 0; i < 4; i++) {
        int f = 0;
        double s = 0.0;
        if (spans[i].n) {
            ck_dt(be->unscale_check(be, ref + spans[i].offset, 4.0f, spans[i].n, &f));
            ck_dt(be->sumsq(be, ref + spans[i].offset, spans[i].n, &s));
        }
        ck_assert_msg(nf[i] == f, "span %d: flag %d, unscale_check %d", i, nf[i], f);
        ck_assert_msg(memcmp(&sq[i], &s, sizeof s) == 0, "span %d: sumsq %.17g, per tensor %.17g", i, sq[i], s);
    }
    ck_assert_int_eq(nf[2], 1);
    ck_assert_int_eq(nf[0] + nf[1] + nf[3], 0);
    ck_assert_msg(memcmp(x, ref, n * sizeof *x) == 0, "span_stats scaled differently from unscale_check");
    /* sums only: x is not touched */
    ck_dt(be->span_stats(be, x, spans, 2, 0.5f, NULL, sq));
    ck_assert_msg(memcmp(x, ref, n * sizeof *x) == 0, "span_stats changed x without flags");
    ck_assert_int_eq(be->span_stats(be, x, spans, -1, 1.0f, NULL, sq), DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(), "span_stats: count -1 (expected >= 0)");
    ck_assert_int_eq(be->span_stats(be, x, NULL, 2, 1.0f, NULL, sq), DT_ERR_INVALID);
    ck_assert_int_eq(be->span_stats(be, NULL, spans, 2, 1.0f, NULL, sq), DT_ERR_INVALID);
    ck_dt(be->span_stats(be, NULL, spans + 1, 1, 1.0f, nf, sq)); /* only an empty span: no data needed */
    ck_assert_int_eq(nf[0], 0);
    free(x);
    free(ref);
    dt_backend_destroy(be);
}
END_TEST

/* ---- loss scaler -------------------------------------------------------------- */

/* One expected step: input, then the event flags as a string ("skip",
 * "grew", "backed_off", "absorbed", "at_min", "first", space-separated,
 * "" for a plain clean step), the scale and hysteresis afterwards. */
typedef struct trace_step {
    int overflow;
    const char *event;
    float scale;
    int hysteresis;
} trace_step;

static void event_str(const dt_loss_scaler_event *ev, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s%s%s%s", ev->skip ? "skip " : "", ev->grew ? "grew " : "",
             ev->backed_off ? "backed_off " : "", ev->absorbed ? "absorbed " : "", ev->at_min ? "at_min " : "",
             ev->at_min_first ? "first " : "");
    size_t len = strlen(buf);
    if (len) buf[len - 1] = '\0';
}

static void run_trace(dt_loss_scaler *s, const trace_step *steps, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        float before = dt_loss_scaler_scale(s);
        dt_loss_scaler_event ev;
        int skip = dt_loss_scaler_update(s, steps[i].overflow, &ev);
        char got[96];
        event_str(&ev, got, sizeof got);
        ck_assert_msg(strcmp(got, steps[i].event) == 0, "%s step %d: event \"%s\", expected \"%s\"", name, i + 1, got,
                      steps[i].event);
        ck_assert_msg(skip == ev.skip, "%s step %d: return value %d != ev.skip %d", name, i + 1, skip, ev.skip);
        ck_assert_msg(ev.scale_before == before && ev.scale_after == dt_loss_scaler_scale(s),
                      "%s step %d: scale_before/after inconsistent", name, i + 1);
        ck_assert_msg(dt_loss_scaler_scale(s) == steps[i].scale, "%s step %d: scale %g, expected %g", name, i + 1,
                      (double)dt_loss_scaler_scale(s), (double)steps[i].scale);
        ck_assert_msg(s->hysteresis == steps[i].hysteresis, "%s step %d: hysteresis %d, expected %d", name, i + 1,
                      s->hysteresis, steps[i].hysteresis);
    }
}

START_TEST(test_scaler_defaults)
{
    dt_loss_scaler_config c;
    dt_loss_scaler_config_default(&c);
    ck_assert_float_eq(c.initial_scale, 65536.0f);
    ck_assert_float_eq(c.growth_factor, 2.0f);
    ck_assert_float_eq(c.backoff_factor, 0.5f);
    ck_assert_int_eq(c.window, 1000);
    ck_assert_int_eq(c.hysteresis, 2);
    ck_assert_int_eq(c.consecutive_hysteresis, 0);
    ck_assert_float_eq(c.min_scale, 1.0f);
    ck_assert_float_eq(c.static_scale, 0.0f);
    dt_loss_scaler s;
    ck_dt(dt_loss_scaler_init(&s, NULL));
    ck_assert_float_eq(dt_loss_scaler_scale(&s), 65536.0f);
    ck_assert_int_eq(dt_loss_scaler_is_static(&s), 0);
    ck_assert_int_eq(s.hysteresis, 2);
    for (int i = 0; i < 999; i++) ck_assert_int_eq(dt_loss_scaler_update(&s, 0, NULL), 0);
    ck_assert_float_eq(dt_loss_scaler_scale(&s), 65536.0f);
    dt_loss_scaler_update(&s, 0, NULL); /* the 1000th clean step */
    ck_assert_float_eq(dt_loss_scaler_scale(&s), 131072.0f);
    ck_assert_int_eq(s.steps, 1000);
    ck_assert_int_eq(s.growths, 1);
}
END_TEST

/* DeepSpeed semantics: window 3, hysteresis 2, min 1, from 8. */
START_TEST(test_scaler_trace_hysteresis)
{
    dt_loss_scaler_config c;
    dt_loss_scaler_config_default(&c);
    c.initial_scale = 8;
    c.window = 3;
    dt_loss_scaler s;
    ck_dt(dt_loss_scaler_init(&s, &c));
    static const trace_step steps[] = {
        {0, "", 8, 2},
        {0, "", 8, 2},
        {0, "grew", 16, 2},           /* 3 clean steps */
        {1, "skip absorbed", 16, 1},  /* first overflow tolerated */
        {0, "", 16, 1},               /* a clean step does not refill h */
        {1, "skip backed_off", 8, 1}, /* the second overflow backs off */
        {1, "skip backed_off", 4, 1}, /* h stays exhausted: every overflow now backs off */
        {0, "", 4, 1},
        {0, "", 4, 1},
        {0, "grew", 8, 2}, /* window counted from the last overflow; refills h */
        {1, "skip absorbed", 8, 1},
        {1, "skip backed_off", 4, 1},
        {0, "", 4, 1},
        {0, "", 4, 1},
        {1, "skip backed_off", 2, 1}, /* overflow resets the window count */
        {0, "", 2, 1},
        {1, "skip backed_off", 1, 1},
        {1, "skip at_min first", 1, 1}, /* at min and still overflowing: reported once */
        {1, "skip at_min", 1, 1},
        {0, "", 1, 1},
        {0, "", 1, 1},
        {0, "grew", 2, 2},
        {1, "skip absorbed", 2, 1},
        {1, "skip backed_off", 1, 1},
        {1, "skip at_min", 1, 1}, /* never "first" again */
    };
    int n = (int)(sizeof steps / sizeof steps[0]);
    run_trace(&s, steps, n, "hysteresis");
    ck_assert_int_eq(s.steps, n);
    ck_assert_int_eq(s.overflows, 12);
    ck_assert_int_eq(s.skipped, 12);
    ck_assert_int_eq(s.growths, 3);
    ck_assert_int_eq(s.backoffs, 6);
    ck_assert_int_eq(s.min_overflows, 3);
    ck_assert_int_eq(s.good_steps, 0);
}
END_TEST

/* PyTorch GradScaler behaviour is hysteresis 1; a non-power-of-two scale
 * shows the clamp to min_scale. */
START_TEST(test_scaler_trace_no_hysteresis_clamp)
{
    dt_loss_scaler_config c;
    dt_loss_scaler_config_default(&c);
    c.initial_scale = 3;
    c.window = 2;
    c.hysteresis = 1;
    c.min_scale = 1;
    dt_loss_scaler s;
    ck_dt(dt_loss_scaler_init(&s, &c));
    static const trace_step steps[] = {
        {1, "skip backed_off", 1.5f, 1},
        {1, "skip backed_off", 1, 1}, /* 0.75 clamped to min */
        {1, "skip at_min first", 1, 1},
        {0, "", 1, 1},
        {0, "grew", 2, 1},
        {0, "", 2, 1},
        {0, "grew", 4, 1},
        {1, "skip backed_off", 2, 1},
        {0, "", 2, 1},
        {1, "skip backed_off", 1, 1},
        {1, "skip at_min", 1, 1},
    };
    run_trace(&s, steps, (int)(sizeof steps / sizeof steps[0]), "no-hysteresis");
    ck_assert_int_eq(s.min_overflows, 2);
}
END_TEST

START_TEST(test_scaler_trace_consecutive_hysteresis)
{
    dt_loss_scaler_config c;
    dt_loss_scaler_config_default(&c);
    c.initial_scale = 64;
    c.window = 100;
    c.hysteresis = 3;
    c.consecutive_hysteresis = 1;
    dt_loss_scaler s;
    ck_dt(dt_loss_scaler_init(&s, &c));
    static const trace_step steps[] = {
        {1, "skip absorbed", 64, 2},
        {1, "skip absorbed", 64, 1},
        {0, "", 64, 3}, /* any clean step refills h */
        {1, "skip absorbed", 64, 2},
        {0, "", 64, 3},
        {1, "skip absorbed", 64, 2},
        {1, "skip absorbed", 64, 1},
        {1, "skip backed_off", 32, 1},
        {1, "skip backed_off", 16, 1},
    };
    run_trace(&s, steps, (int)(sizeof steps / sizeof steps[0]), "consecutive");
}
END_TEST

START_TEST(test_scaler_trace_static)
{
    dt_loss_scaler_config c;
    dt_loss_scaler_config_default(&c);
    c.static_scale = 1; /* even at 1 (== min) no at_min: the scale is fixed by choice */
    c.window = 2;
    dt_loss_scaler s;
    ck_dt(dt_loss_scaler_init(&s, &c));
    ck_assert_int_eq(dt_loss_scaler_is_static(&s), 1);
    static const trace_step steps[] = {
        {0, "", 1, 2},     {0, "", 1, 2},     {0, "", 1, 2}, {1, "skip", 1, 2},
        {1, "skip", 1, 2}, {1, "skip", 1, 2}, {0, "", 1, 2},
    };
    run_trace(&s, steps, (int)(sizeof steps / sizeof steps[0]), "static");
    ck_assert_int_eq(s.overflows, 3);
    ck_assert_int_eq(s.skipped, 3);
    ck_assert_int_eq(s.growths + s.backoffs + s.min_overflows, 0);

    c.static_scale = 128;
    ck_dt(dt_loss_scaler_init(&s, &c));
    ck_assert_float_eq(dt_loss_scaler_scale(&s), 128.0f);
    for (int i = 0; i < 10; i++) ck_assert_int_eq(dt_loss_scaler_update(&s, i % 3 == 0, NULL), i % 3 == 0);
    ck_assert_float_eq(dt_loss_scaler_scale(&s), 128.0f);
    c.static_scale = 0.5f; /* below --min-loss-scale is fine when static */
    ck_dt(dt_loss_scaler_init(&s, &c));
}
END_TEST

START_TEST(test_scaler_growth_stays_finite)
{
    dt_loss_scaler_config c;
    dt_loss_scaler_config_default(&c);
    c.initial_scale = 0x1p126f;
    c.window = 1;
    dt_loss_scaler s;
    ck_dt(dt_loss_scaler_init(&s, &c));
    static const trace_step steps[] = {
        {0, "grew", 0x1p127f, 2},
        {0, "", 0x1p127f, 2}, /* 2^128 is not a float */
        {1, "skip absorbed", 0x1p127f, 1},
        {0, "", 0x1p127f, 2}, /* window completed: h refilled even without growth */
    };
    run_trace(&s, steps, (int)(sizeof steps / sizeof steps[0]), "cap");
}
END_TEST

static void expect_invalid(const dt_loss_scaler_config *c, const char *flag, const char *flag2)
{
    dt_loss_scaler s;
    memset(&s, 0x5a, sizeof s);
    dt_clear_error();
    ck_assert_int_eq(dt_loss_scaler_init(&s, c), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), flag) != NULL, "message \"%s\" does not name %s", dt_last_error(), flag);
    if (flag2)
        ck_assert_msg(strstr(dt_last_error(), flag2) != NULL, "message \"%s\" does not name %s", dt_last_error(),
                      flag2);
    unsigned char *p = (unsigned char *)&s;
    for (size_t i = 0; i < sizeof s; i++) ck_assert_msg(p[i] == 0x5a, "init touched the scaler on failure");
}

START_TEST(test_scaler_validation)
{
    dt_loss_scaler_config d, c;
    dt_loss_scaler_config_default(&d);
    c = d, c.initial_scale = 0;
    expect_invalid(&c, "--initial-loss-scale", NULL);
    c = d, c.initial_scale = INFINITY;
    expect_invalid(&c, "--initial-loss-scale", NULL);
    c = d, c.initial_scale = NAN;
    expect_invalid(&c, "--initial-loss-scale", NULL);
    c = d, c.initial_scale = 0.5f;
    expect_invalid(&c, "--initial-loss-scale", "--min-loss-scale");
    c = d, c.window = 0;
    expect_invalid(&c, "--loss-scale-window", NULL);
    c = d, c.hysteresis = 0;
    expect_invalid(&c, "--hysteresis", NULL);
    c = d, c.min_scale = 0;
    expect_invalid(&c, "--min-loss-scale", NULL);
    c = d, c.min_scale = -1;
    expect_invalid(&c, "--min-loss-scale", NULL);
    c = d, c.static_scale = -1;
    expect_invalid(&c, "--loss-scale ", NULL);
    c = d, c.static_scale = NAN;
    expect_invalid(&c, "--loss-scale ", NULL);
    c = d, c.static_scale = INFINITY;
    expect_invalid(&c, "--loss-scale ", NULL);
    c = d, c.growth_factor = 1;
    expect_invalid(&c, "growth_factor", NULL);
    c = d, c.backoff_factor = 1;
    expect_invalid(&c, "backoff_factor", NULL);
    c = d, c.backoff_factor = 0;
    expect_invalid(&c, "backoff_factor", NULL);
    c = d, c.consecutive_hysteresis = 2;
    expect_invalid(&c, "consecutive_hysteresis", NULL);
    dt_loss_scaler s;
    c = d, c.initial_scale = 1, c.window = 1, c.hysteresis = 1;
    ck_dt(dt_loss_scaler_init(&s, &c)); /* the limits themselves are valid */
}
END_TEST

static Suite *half_suite(void)
{
    Suite *s = suite_create("half");
    TCase *tc = tcase_create("f16");
    tcase_add_test(tc, test_f16_to_float_all_patterns);
    tcase_add_test(tc, test_f16_round_trip);
    tcase_add_test(tc, test_f16_rounding_midpoints);
    tcase_add_test(tc, test_f16_rounding_named);
    tcase_add_test(tc, test_f16_random_vs_reference);
    suite_add_tcase(s, tc);
    tc = tcase_create("bf16");
    tcase_add_test(tc, test_bf16_to_float_all_patterns);
    tcase_add_test(tc, test_bf16_round_trip);
    tcase_add_test(tc, test_bf16_rounding);
    suite_add_tcase(s, tc);
    tc = tcase_create("fast_path");
    tcase_add_test(tc, test_fast_from_float);
    tcase_add_test(tc, test_fast_to_float);
    suite_add_tcase(s, tc);
    tc = tcase_create("backend");
    tcase_add_test(tc, test_cast_all_pairs);
    tcase_add_test(tc, test_round_fused);
    tcase_add_test(tc, test_unscale_check);
    tcase_add_test(tc, test_span_stats);
    suite_add_tcase(s, tc);
    tc = tcase_create("loss_scaler");
    tcase_add_test(tc, test_scaler_defaults);
    tcase_add_test(tc, test_scaler_trace_hysteresis);
    tcase_add_test(tc, test_scaler_trace_no_hysteresis_clamp);
    tcase_add_test(tc, test_scaler_trace_consecutive_hysteresis);
    tcase_add_test(tc, test_scaler_trace_static);
    tcase_add_test(tc, test_scaler_growth_stays_finite);
    tcase_add_test(tc, test_scaler_validation);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(half_suite()); }
