/* check_optim_group.c: LARS and LAMB over pieces of tensors
 * (dt_optim_set_group_norms, include/dt_optim.h), as ZeRO's shards use them.
 *
 * A layout of whole tensors and a layout that cuts each tensor into two
 * 1-D pieces (what two ranks' shards hold between them) take the same
 * steps from the same values, on one process: the group's sum is then the
 * identity (a group of one rank holding every piece). The trust ratios
 * must come from the whole tensors' norms: the two runs' parameters agree
 * to 1e-6 relative after 3 steps, and each piece reports its tensor's
 * ratio to 1e-6. Why not bit for bit: the pieces' sums of squares are
 * added in double, where the whole tensor's is one sum; the norms differ
 * in the last double bits (~1e-16), which can move a float32 trust ratio
 * by one ulp (6e-8) and a parameter by about lr * 6e-8. Why the check can
 * fail: a piece taking its own norm (what the API is for avoiding) gives
 * trust ratios 5% (LARS) and 0.05% (LAMB) off the whole tensor's here,
 * far beyond 1e-6 (measured by leaving the call out). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

static dt_backend *be;

static void setup(void) { ck_dt(dt_backend_cpu_create(1, &be)); }
static void teardown(void) { dt_backend_destroy(be); }

/* the group of one rank: the sum is what this rank holds */
static dt_status sum_self(void *ctx, double *v, size_t n)
{
    (void)v, (void)n;
    ++*(int *)ctx;
    return DT_OK;
}

/* Whole: "a" (6, 8) decay, "b" (10) no decay, "c" (40) decay. Pieces: each
 * cut in two at an uneven point (with the layout's alignment padding
 * between pieces, which the optimizer never reads as parameters). */
static const int64_t SIZES[3] = {48, 10, 40};
static const int DECAY[3] = {1, 0, 1};
static const int64_t CUT[3] = {19, 4, 27};

static void run_kind(dt_optim_kind kind)
{
    dt_paramset whole, pieces;
    dt_paramset_init(&whole);
    dt_paramset_init(&pieces);
    for (int t = 0; t < 3; t++) ck_dt(dt_paramset_add(&whole, t == 0 ? "a" : t == 1 ? "b" : "c", 1, &SIZES[t], DECAY[t]));
    /* pieces: entries written directly, contiguous */
    int tensor[6];
    for (int t = 0, k = 0; t < 3; t++)
        for (int h = 0; h < 2; h++, k++) {
            const int64_t n = h ? SIZES[t] - CUT[t] : CUT[t];
            char name[8];
            snprintf(name, sizeof name, "p%d", k);
            ck_dt(dt_paramset_add(&pieces, name, 1, &n, DECAY[t]));
            tensor[k] = t;
        }
    /* the values, the same in both layouts element by element */
    float wa[256], wb[256], ga[256], gb[256];
    for (int i = 0; i < 256; i++) wa[i] = wb[i] = ga[i] = gb[i] = 0.0f;
    dt_optim_config cfg;
    dt_optim_config_default(&cfg, kind);
    cfg.weight_decay = 0.01f;
    if (kind == DT_OPTIM_LARS) cfg.lars_eta = 0.02f;
    dt_optim oa, ob;
    ck_dt(dt_optim_init(&oa, &cfg, be, &whole));
    ck_dt(dt_optim_init(&ob, &cfg, be, &pieces));
    int calls = 0;
    ck_dt(dt_optim_set_group_norms(&ob, tensor, 3, sum_self, &calls));
    for (int step = 0; step < 3; step++) {
        for (int t = 0, k = 0; t < 3; t++) {
            for (int64_t j = 0; j < SIZES[t]; j++) {
                const int h = j >= CUT[t];
                const size_t ia = whole.info[t].offset + (size_t)j,
                             ib = pieces.info[k + h].offset + (size_t)(h ? j - CUT[t] : j);
                if (step == 0) wa[ia] = wb[ib] = 0.5f - 0.07f * (float)((j * 5 + t) % 13);
                ga[ia] = gb[ib] = (float)((j + step + t) % 3 == 0 ? -1 : 1) * (0.2f + 0.05f * (float)(j % 7));
            }
            k += 2;
        }
        ck_dt(dt_optim_step(&oa, wa, ga, 0.05f, 1.0f));
        ck_dt(dt_optim_step(&ob, wb, gb, 0.05f, 1.0f));
    }
    ck_assert_int_eq(calls, 3); /* one sum per step */
    const float *ta = dt_optim_trust_ratios(&oa), *tb = dt_optim_trust_ratios(&ob);
    for (int t = 0, k = 0; t < 3; t++, k += 2) {
        for (int h = 0; h < 2; h++)
            ck_assert_msg(fabs((double)tb[k + h] - (double)ta[t]) <= 1e-6 * fabs((double)ta[t]),
                          "%s tensor %d piece %d: trust %.9g, whole %.9g", dt_optim_kind_name(kind), t, h,
                          (double)tb[k + h], (double)ta[t]);
        if (DECAY[t]) ck_assert_msg(fabs((double)ta[t] - 1.0) > 1e-3, "tensor %d: trust 1 tests nothing", t);
        for (int64_t j = 0; j < SIZES[t]; j++) {
            const int h = j >= CUT[t];
            const float a = wa[whole.info[t].offset + (size_t)j],
                        b = wb[pieces.info[k + h].offset + (size_t)(h ? j - CUT[t] : j)];
            ck_assert_msg(fabsf(a - b) <= 1e-6f * fmaxf(1.0f, fabsf(a)), "%s tensor %d element %lld: %.9g vs %.9g",
                          dt_optim_kind_name(kind), t, (long long)j, (double)a, (double)b);
        }
    }
    dt_optim_free(&oa);
    dt_optim_free(&ob);
    dt_paramset_free(&whole);
    dt_paramset_free(&pieces);
}

START_TEST(test_lars_pieces) { run_kind(DT_OPTIM_LARS); }
END_TEST

START_TEST(test_lamb_pieces) { run_kind(DT_OPTIM_LAMB); }
END_TEST

START_TEST(test_bad_map)
{
    dt_paramset ps;
    dt_paramset_init(&ps);
    const int64_t n = 4;
    ck_dt(dt_paramset_add(&ps, "p", 1, &n, 1));
    dt_optim_config cfg;
    dt_optim_config_default(&cfg, DT_OPTIM_LAMB);
    dt_optim o;
    ck_dt(dt_optim_init(&o, &cfg, be, &ps));
    int calls = 0, bad[1] = {3};
    ck_assert_int_eq(dt_optim_set_group_norms(&o, bad, 2, sum_self, &calls), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "names tensor 3 of 2"));
    dt_optim_free(&o);
    dt_paramset_free(&ps);
}
END_TEST

static Suite *group_suite(void)
{
    Suite *s = suite_create("optim group norms");
    TCase *tc = tcase_create("pieces");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_lars_pieces);
    tcase_add_test(tc, test_lamb_pieces);
    tcase_add_test(tc, test_bad_map);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(group_suite()); }
