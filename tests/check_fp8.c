/* check_fp8.c: the FP8 formats (include/dt_fp8.h) against a table built
 * here from the formats' definitions (every code of E4M3 and E5M2), the
 * rounding of every midpoint between neighbouring values and of the
 * floats next to it, saturation and flushing at both ends, the recipes'
 * scale rules, and the CPU backend's quantize op against the scalar
 * reference (per tensor, given and current scales, blockwise tiles).
 *
 * The table never calls the library: value = (-1)^s 2^(e - bias) (1 + m /
 * 2^mbits) for e > 0, 2^(1 - bias) m / 2^mbits for e = 0, with E4M3's
 * S.1111.111 NaN and E5M2's exponent 31 inf/NaN, in double. */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "dt_fp8.h"
#include "testutil.h"

typedef struct fmt_def {
    dt_fp8_format f;
    int ebits, mbits, bias;
    double max, min_sub;
    int finite_pos; /* positive finite codes, zero included */
} fmt_def;

static const fmt_def defs[2] = {
    {DT_FP8_E4M3, 4, 3, 7, 448.0, 1.0 / 512, 127},        /* 0x00..0x7e */
    {DT_FP8_E5M2, 5, 2, 15, 57344.0, 1.0 / 65536, 124}, /* 0x00..0x7b */
};

/* the table's value of code v; *kind 0 finite, 1 inf, 2 NaN */
static double table_value(const fmt_def *d, int v, int *kind)
{
    const int s = v >> 7, e = (v >> d->mbits) & ((1 << d->ebits) - 1), m = v & ((1 << d->mbits) - 1);
    *kind = 0;
    if (d->f == DT_FP8_E4M3 && e == 15 && m == 7) *kind = 2;
    if (d->f == DT_FP8_E5M2 && e == 31) *kind = m ? 2 : 1;
    double a = e ? ldexp(1.0 + m / (double)(1 << d->mbits), e - d->bias) : ldexp(m / (double)(1 << d->mbits), 1 - d->bias);
    return s ? -a : a;
}

START_TEST(test_every_code)
{
    for (int k = 0; k < 2; k++) {
        const fmt_def *d = &defs[k];
        int finite = 0, bad = 0, first = -1;
        for (int v = 0; v < 256; v++) {
            int kind;
            const double want = table_value(d, v, &kind);
            const float got = dt_fp8_to_float((uint8_t)v, d->f);
            int ok;
            if (kind == 2) ok = isnan(got);
            else if (kind == 1) ok = isinf(got) && (got < 0) == (v >= 128);
            else ok = (double)got == want && !!signbit(got) == (v >= 128);
            if (kind == 0 && v < 128) finite++;
            /* back: every non-NaN code comes back as itself (inf saturates to max, so not inf) */
            if (ok && kind == 0) {
                int sat = 0, fl = 0;
                ok = dt_fp8_from_float(got, d->f, &sat, &fl) == v && !sat && !fl;
            }
            if (!ok && !bad++) first = v;
        }
        ck_assert_msg(!bad, "%s: %d codes disagree with the table, first 0x%02x", dt_fp8_format_name(d->f), bad, first);
        ck_assert_int_eq(finite, d->finite_pos);
        ck_assert(dt_fp8_max(d->f) == (float)d->max);
        ck_assert(dt_fp8_min_subnormal(d->f) == (float)d->min_sub);
    }
}
END_TEST

/* Every midpoint between neighbouring non-negative values rounds to the
 * even code; the floats just below and above it to the lower and upper
 * value; all of it mirrored for negatives. */
START_TEST(test_midpoints)
{
    for (int k = 0; k < 2; k++) {
        const fmt_def *d = &defs[k];
        int bad = 0;
        double first = 0;
        for (int v = 0; v + 1 < d->finite_pos; v++) {
            int kind;
            const double lo = table_value(d, v, &kind), hi = table_value(d, v + 1, &kind);
            const float mid = (float)((lo + hi) / 2); /* exact: 3 or 4 significant bits */
            ck_assert((double)mid == (lo + hi) / 2);
            const int even = (v % 2 == 0) ? v : v + 1;
            const float below = nextafterf(mid, 0.0f), above = nextafterf(mid, INFINITY);
            for (int sgn = 0; sgn < 2; sgn++) {
                const float m = sgn ? -mid : mid, b = sgn ? -below : below, a = sgn ? -above : above;
                const int off = sgn ? 0x80 : 0;
                int sat = 0, fl = 0;
                if (dt_fp8_from_float(m, d->f, &sat, &fl) != (even | off) && !bad++) first = m;
                if (dt_fp8_from_float(b, d->f, &sat, &fl) != (v | off) && !bad++) first = b;
                if (dt_fp8_from_float(a, d->f, &sat, &fl) != ((v + 1) | off) && !bad++) first = a;
                if (sat && !bad++) first = m;
                /* round agrees with the conversion */
                if (dt_fp8_round(m, d->f, NULL, NULL) != dt_fp8_to_float((uint8_t)(even | off), d->f) && !bad++)
                    first = m;
                /* flushed: only the values at or below half the smallest subnormal */
                if (fl != (v == 0) && !bad++) first = m;
            }
        }
        ck_assert_msg(!bad, "%s: %d midpoint roundings wrong, first at %.9g", dt_fp8_format_name(d->f), bad, first);
    }
}
END_TEST

START_TEST(test_saturate_flush)
{
    for (int k = 0; k < 2; k++) {
        const fmt_def *d = &defs[k];
        const float max = (float)d->max;
        const uint8_t maxcode = (uint8_t)(d->finite_pos - 1);
        int sat = 0, fl = 0;
        ck_assert_int_eq(dt_fp8_from_float(max, d->f, &sat, &fl), maxcode);
        ck_assert(!sat);
        ck_assert_int_eq(dt_fp8_from_float(nextafterf(max, INFINITY), d->f, &sat, &fl), maxcode);
        ck_assert(sat);
        sat = 0;
        ck_assert_int_eq(dt_fp8_from_float(-INFINITY, d->f, &sat, &fl), 0x80 | maxcode);
        ck_assert(sat);
        sat = 0;
        ck_assert_int_eq(dt_fp8_from_float(1e30f, d->f, &sat, NULL), maxcode);
        ck_assert(sat);
        /* half the smallest subnormal flushes (a tie, to the even zero), just above it does not */
        const float h = (float)(d->min_sub / 2);
        fl = 0;
        ck_assert_int_eq(dt_fp8_from_float(h, d->f, NULL, &fl), 0);
        ck_assert(fl);
        fl = 0;
        ck_assert_int_eq(dt_fp8_from_float(-nextafterf(h, INFINITY), d->f, NULL, &fl), 0x81);
        ck_assert(!fl);
        ck_assert_int_eq(dt_fp8_from_float(-FLT_MIN, d->f, NULL, &fl), 0x80);
        fl = 0;
        ck_assert_int_eq(dt_fp8_from_float(0.0f, d->f, NULL, &fl), 0); /* zero is not flushed */
        ck_assert(!fl);
        ck_assert(isnan(dt_fp8_to_float(dt_fp8_from_float(NAN, d->f, NULL, NULL), d->f)));
    }
}
END_TEST

START_TEST(test_scales)
{
    /* (448 / 3.5) / 2^0 = 128 exactly; margin 2 quarters it */
    ck_assert(dt_fp8_scale_from_amax(3.5f, DT_FP8_E4M3, 0, 0) == 128.0f);
    ck_assert(dt_fp8_scale_from_amax(3.5f, DT_FP8_E4M3, 2, 0) == 32.0f);
    /* amax 3: 149.33..., rounded down to 128 as a power of two */
    ck_assert(dt_fp8_scale_from_amax(3.0f, DT_FP8_E4M3, 0, 1) == 128.0f);
    ck_assert(dt_fp8_scale_from_amax(0.0f, DT_FP8_E4M3, 0, 0) == 0.0f);
    ck_assert(dt_fp8_scale_from_amax(INFINITY, DT_FP8_E5M2, 0, 0) == 0.0f);
    /* the amax itself never saturates, over many amaxes */
    int bad = 0;
    for (int i = 1; i < 20000; i++) {
        const float amax = ldexpf(1.0f + (float)i / 20000.0f, (i % 60) - 30);
        for (int f = 0; f < 2; f++) {
            const float s = dt_fp8_scale_from_amax(amax, (dt_fp8_format)f, 0, 0);
            int sat = 0;
            (void)dt_fp8_from_float(amax * s, (dt_fp8_format)f, &sat, NULL);
            bad += sat || amax * s < dt_fp8_max((dt_fp8_format)f) * 0.9999f;
        }
    }
    ck_assert_int_eq(bad, 0);
    const float h[4] = {1.0f, 4.0f, 2.0f, NAN};
    ck_assert(dt_fp8_history_amax(h, 4, 2.0f, DT_FP8_AMAX_MAX) == 4.0f);
    ck_assert(dt_fp8_history_amax(h, 4, 2.0f, DT_FP8_AMAX_MOST_RECENT) == 2.0f);
    dt_fp8_mode m;
    dt_fp8_recipe r;
    dt_fp8_amax_algo a;
    ck_assert_int_eq(dt_fp8_mode_parse("hybrid", &m), DT_OK);
    ck_assert_int_eq(m, DT_FP8_MODE_HYBRID);
    ck_assert_int_ne(dt_fp8_mode_parse("e5m2", &m), DT_OK);
    ck_assert_int_eq(dt_fp8_recipe_parse("blockwise", &r), DT_OK);
    ck_assert_int_ne(dt_fp8_recipe_parse("mxfp8", &r), DT_OK);
    ck_assert_int_eq(dt_fp8_amax_algo_parse("most_recent", &a), DT_OK);
    ck_assert_int_ne(dt_fp8_amax_algo_parse("mean", &a), DT_OK);
}
END_TEST

#include "fp8_op_tests.h"

static Suite *fp8_suite(void)
{
    Suite *s = suite_create("fp8");
    TCase *tc = tcase_create("formats");
    tcase_add_test(tc, test_every_code);
    tcase_add_test(tc, test_midpoints);
    tcase_add_test(tc, test_saturate_flush);
    tcase_add_test(tc, test_scales);
    suite_add_tcase(s, tc);
    tc = tcase_create("backend");
    tcase_set_timeout(tc, 60);
    fp8_add_op_tests(tc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(fp8_suite()); }
