/* check_nonfinite.c: a NaN/inf in FP32 training (docs/faults.md).
 *
 *  - a NaN (or inf) put into one weight of layer k through the library API
 *    stops the next step with DT_ERR_NUMERIC and a message naming the
 *    iteration and layer k, the first layer whose forward output went bad;
 *  - with skip_nonfinite (--skip-nonfinite) the step is skipped instead:
 *    no weight changes, the step is counted (stats and the summary's
 *    nonfinite_skipped_steps) and, once the weight is repaired, training
 *    goes on;
 *  - fp16 with loss scaling: the same NaN makes the loss non-finite, which
 *    is an overflow (as PyTorch's GradScaler and Megatron treat it): the
 *    step is skipped, no weight changes, the scaler absorbs then backs
 *    off, the stats name the forward's layer h.1; once repaired, training
 *    goes on; at the minimum scale, min_patience overflowing steps in a
 *    row stop the run with one message; skip_nonfinite is rejected. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static void quick_cfg(dt_train_config *c)
{
    dt_train_config_default(c);
    c->seq_length = 32;
    c->data.digits = 3;
    c->micro_batch_size = 8;
    c->global_batch_size = 16; /* 2 micro-batches */
    c->train_iters = 6;
    c->lr.warmup_iters = 2;
    c->lr.decay_iters = 6;
    c->threads = 2;
    c->eval_iters = 1;
}

/* The address of element i of the named tensor of the model's weights. */
static float *weight(dt_trainer *tr, const char *name, size_t i)
{
    dt_gpt *m = dt_trainer_model(tr);
    const dt_paramset *L = dt_gpt_layout(m);
    for (int t = 0; t < L->count; t++)
        if (!strcmp(L->info[t].name, name)) return dt_gpt_params(m) + L->info[t].offset + i;
    ck_abort_msg("no tensor %s", name);
    return NULL;
}

static void expect_stop(float bad, const char *tensor, int good_steps, const char *want_iter, const char *want_layer)
{
    dt_train_config c;
    quick_cfg(&c);
    dt_trainer *tr;
    ck_dt(dt_trainer_create(&c, &tr));
    for (int i = 0; i < good_steps; i++) ck_dt(dt_trainer_step(tr, NULL));
    *weight(tr, tensor, 3) = bad;
    dt_train_stats st;
    ck_assert_int_eq(dt_trainer_step(tr, &st), DT_ERR_NUMERIC);
    const char *msg = dt_last_error();
    ck_assert_msg(strstr(msg, want_iter) && strstr(msg, want_layer), "message '%s' lacks '%s' or '%s'", msg, want_iter,
                  want_layer);
    ck_assert_ptr_nonnull(strstr(msg, "--skip-nonfinite"));
    dt_trainer_free(tr);
}

START_TEST(test_nan_weight_names_layer)
{
    expect_stop(NAN, "h.1.fc.w", 0, "iteration 1: training loss is nan", "forward: the output of layer h.1 ");
    expect_stop(NAN, "h.0.qkv.w", 2, "iteration 3: training loss is nan", "forward: the output of layer h.0 ");
    expect_stop(INFINITY, "wpe", 1, "iteration 2:", "forward: the output of layer embedding"); /* position 0 */
    expect_stop(NAN, "lm_head.w", 0, "iteration 1:", "forward: the output of layer head");
}
END_TEST

START_TEST(test_skip_nonfinite)
{
    dt_train_config c;
    quick_cfg(&c);
    c.skip_nonfinite = 1;
    dt_trainer *tr;
    ck_dt(dt_trainer_create(&c, &tr));
    dt_train_stats st;
    ck_dt(dt_trainer_step(tr, &st));
    ck_assert_int_eq(st.nonfinite, 0);
    float *w = weight(tr, "h.1.attproj.w", 5);
    const float saved = *w;
    *w = NAN;
    dt_gpt *m = dt_trainer_model(tr);
    const size_t n = dt_gpt_layout(m)->numel;
    float *before = malloc(n * sizeof *before);
    memcpy(before, dt_gpt_params(m), n * sizeof *before);
    ck_dt(dt_trainer_step(tr, &st));
    ck_assert_int_eq(st.nonfinite, 1);
    ck_assert_int_eq(st.nonfinite_skipped, 1);
    ck_assert_int_eq(st.iter, 2);
    ck_assert_ptr_nonnull(st.nonfinite_where);
    ck_assert_msg(strstr(st.nonfinite_where, "layer h.1 "), "where: %s", st.nonfinite_where);
    ck_assert_mem_eq(dt_gpt_params(m), before, n * sizeof *before); /* no update */
    *w = saved;                                                     /* repaired: training goes on */
    for (int i = 0; i < 2; i++) {
        ck_dt(dt_trainer_step(tr, &st));
        ck_assert_int_eq(st.nonfinite, 0);
        ck_assert(isfinite(st.loss));
    }
    ck_assert_int_eq(st.nonfinite_skipped, 1);
    ck_assert_int_eq(st.iter, 4);
    char path[256];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/check_nonfinite_%ld.json", dir && dir[0] ? dir : "/tmp", (long)getpid());
    ck_dt(dt_trainer_write_summary(tr, path, &st, NULL));
    json_error_t err;
    json_t *o = json_load_file(path, 0, &err);
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "nonfinite_skipped_steps")), 1);
    ck_assert(json_is_true(json_object_get(json_object_get(o, "config"), "skip_nonfinite")));
    json_decref(o);
    unlink(path);
    free(before);
    dt_trainer_free(tr);
}
END_TEST

START_TEST(test_fp16_loss_overflow)
{
    dt_train_config c;
    quick_cfg(&c);
    c.precision = DT_F16;
    c.use_loss_scaling = 1; /* defaults: scale 65536, hysteresis 2 */
    dt_trainer *tr;
    ck_dt(dt_trainer_create(&c, &tr));
    dt_train_stats st;
    float *w = weight(tr, "h.1.fc.w", 3);
    const float saved = *w;
    *w = NAN;
    dt_gpt *m = dt_trainer_model(tr);
    const size_t n = dt_gpt_layout(m)->numel;
    float *before = malloc(n * sizeof *before);
    memcpy(before, dt_gpt_params(m), n * sizeof *before);
    /* two overflows: the first absorbed by hysteresis, the second halves the scale */
    const float want_scale[2] = {65536.0f, 65536.0f};
    for (int i = 0; i < 2; i++) {
        ck_dt(dt_trainer_step(tr, &st));
        ck_assert_int_eq(st.overflow, 1);
        ck_assert(!isfinite(st.loss));
        ck_assert_float_eq(st.loss_scale, want_scale[i]);
        ck_assert_int_eq(st.skipped_steps, i + 1);
        ck_assert_ptr_nonnull(st.overflow_where);
        ck_assert_msg(strstr(st.overflow_where, "forward: the output of layer h.1 "), "where: %s", st.overflow_where);
        ck_assert_mem_eq(dt_gpt_params(m), before, n * sizeof *before); /* skipped: no update */
    }
    *w = saved; /* repaired: training goes on at the halved scale */
    ck_dt(dt_trainer_step(tr, &st));
    ck_assert_int_eq(st.overflow, 0);
    ck_assert_ptr_null(st.overflow_where);
    ck_assert(isfinite(st.loss));
    ck_assert_float_eq(st.loss_scale, 32768.0f);
    dt_trainer_free(tr);
    free(before);

    /* stuck at the minimum: min_patience overflowing steps in a row, then the next step stops */
    quick_cfg(&c);
    c.precision = DT_F16;
    c.use_loss_scaling = 1;
    c.train_iters = 10;
    c.loss_scaler.initial_scale = 4.0f;
    c.loss_scaler.hysteresis = 1;
    c.loss_scaler.min_patience = 3;
    ck_dt(dt_trainer_create(&c, &tr));
    *weight(tr, "wpe", 3) = INFINITY; /* position 0: in every sequence */
    const float scales[5] = {4.0f, 2.0f, 1.0f, 1.0f, 1.0f}; /* back off twice, then 3 at the minimum */
    for (int i = 0; i < 5; i++) {
        ck_dt(dt_trainer_step(tr, &st));
        ck_assert_int_eq(st.overflow, 1);
        ck_assert_float_eq(st.loss_scale, scales[i]);
        ck_assert_int_eq(st.scale_at_min, i >= 2);
    }
    ck_assert_int_eq(dt_trainer_step(tr, &st), DT_ERR_NUMERIC);
    ck_assert_str_eq(dt_last_error(),
                     "iteration 5: the loss scale sat at its minimum (1) for the last 3 steps and every one "
                     "overflowed: fp16 cannot hold this run's values; stopping (lower --lr, check the data, or use "
                     "--bf16; --min-loss-scale-patience 0 never stops)");
    dt_trainer_free(tr);

    quick_cfg(&c);
    c.precision = DT_F16;
    c.use_loss_scaling = 1;
    c.skip_nonfinite = 1;
    ck_assert_int_eq(dt_trainer_create(&c, &tr), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--skip-nonfinite applies to FP32"));
}
END_TEST

/* bf16 has no loss scaler: a non-finite loss stays a divergence */
START_TEST(test_bf16_still_fails)
{
    dt_train_config c;
    quick_cfg(&c);
    c.precision = DT_BF16;
    dt_trainer *tr;
    ck_dt(dt_trainer_create(&c, &tr));
    *weight(tr, "h.1.fc.w", 3) = NAN;
    ck_assert_int_eq(dt_trainer_step(tr, NULL), DT_ERR_NUMERIC);
    ck_assert_str_eq(dt_last_error(), "iteration 1: training loss is nan (diverged; try a lower --lr or --clip-grad)");
    dt_trainer_free(tr);
}
END_TEST

static Suite *nonfinite_suite(void)
{
    Suite *s = suite_create("nonfinite");
    TCase *tc = tcase_create("fp32");
    tcase_add_test(tc, test_nan_weight_names_layer);
    tcase_add_test(tc, test_skip_nonfinite);
    tcase_add_test(tc, test_fp16_loss_overflow);
    tcase_add_test(tc, test_bf16_still_fails);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(nonfinite_suite()); }
