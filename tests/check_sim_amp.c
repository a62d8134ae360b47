/* check_sim_amp.c: the simulator's mixed-precision model (sim/amp.c)
 * against hand computations and against real fp16 runs of the trainer
 * (in-process, the tiny GPT on 3-digit addition, CPU).
 *
 *  - recording: a traced fp16 run writes one grad_amax per layer slot per
 *    step, S * amax <= 65504 on clean steps, and its weights are
 *    bit-identical to the same run without a trace;
 *  - exact: sigma = 0 and constant amax give the hand-computed trajectory
 *    (backoffs until S * amax < 65520, then growth every window); a seed
 *    gives one trajectory;
 *  - the rule: one step's recorded amax predicts, at every static scale,
 *    whether that step overflows and which slots hold inf/NaN;
 *  - prediction: a model fitted on one run predicts another run (another
 *    seed and initial scale): skipped steps and final scale within the
 *    tolerances given at PREDICT_*;
 *  - a trace without grad_amax is refused, naming the file. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>
#include <unistd.h>

#include "dt_trace.h"
#include "dts_amp.h"
#include "testutil.h"

static void tmp_path(char *buf, size_t n, const char *what)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, n, "%s/check_sim_amp_%ld_%s", dir && dir[0] ? dir : "/tmp", (long)getpid(), what);
}

/* The tiny GPT, seq 32, batch 8, 3-digit addition, fp16 with loss scaling. */
static void fp16_cfg(dt_train_config *c, uint64_t seed, int64_t iters)
{
    dt_train_config_default(c);
    c->seq_length = 32;
    c->data.digits = 3;
    c->micro_batch_size = 8;
    c->global_batch_size = 8;
    c->train_iters = iters;
    c->lr.warmup_iters = 2;
    c->lr.decay_iters = iters;
    c->threads = 2;
    c->eval_iters = 2;
    c->seed = seed;
    c->precision = DT_F16;
    c->use_loss_scaling = 1;
}

/* Train c for its train_iters steps (writing c->trace_path if set): the
 * real scaler's skipped steps, and the final weights into *w (malloc'd)
 * when w is not NULL. */
static void run(const dt_train_config *c, int64_t *skipped, float **w, size_t *n_w)
{
    dt_trainer *tr;
    ck_dt(dt_trainer_create(c, &tr));
    dt_train_stats st;
    for (int64_t i = 0; i < c->train_iters; i++) ck_dt(dt_trainer_step(tr, &st));
    ck_dt(dt_trainer_finish(tr));
    if (skipped) *skipped = st.skipped_steps;
    if (w) {
        dt_gpt *m = dt_trainer_model(tr);
        *n_w = dt_gpt_layout(m)->numel;
        *w = malloc(*n_w * sizeof **w);
        ck_assert_ptr_nonnull(*w);
        memcpy(*w, dt_gpt_params(m), *n_w * sizeof **w);
    }
    dt_trainer_free(tr);
}

static double extra(const dt_trace_event *e, const char *key, double dflt)
{
    for (int i = 0; i < e->n_extra; i++)
        if (!strcmp(e->extra[i].key, key)) return e->extra[i].value;
    return dflt;
}

/* ---- recording ---------------------------------------------------------- */

START_TEST(test_grad_amax_recorded)
{
    enum { ITERS = 12 };
    dt_train_config c;
    fp16_cfg(&c, 3, ITERS);
    c.loss_scaler.initial_scale = 16777216.0f; /* 2^24: the first steps overflow */
    char path[256];
    tmp_path(path, sizeof path, "rec.json");
    c.trace_path = path;
    float *w_traced, *w_plain;
    size_t n1, n2;
    int64_t skipped;
    run(&c, &skipped, &w_traced, &n1);
    c.trace_path = NULL;
    run(&c, NULL, &w_plain, &n2);
    ck_assert(skipped > 0);
    ck_assert_int_eq(n1, n2);
    ck_assert_msg(!memcmp(w_traced, w_plain, n1 * sizeof *w_plain), "recording grad_amax changed the weights");
    free(w_traced);
    free(w_plain);

    dt_trace *t;
    ck_dt(dt_trace_read(path, &t));
    const int L = 2;
    int count[ITERS][4], bad_steps = 0;
    memset(count, 0, sizeof count);
    int bad[ITERS];
    memset(bad, 0, sizeof bad);
    for (size_t i = 0; i < t->n_events; i++) {
        const dt_trace_event *e = &t->events[i];
        if (strcmp(e->name, "grad_amax")) continue;
        ck_assert_int_eq(e->ph, DT_TRACE_INSTANT);
        ck_assert_str_eq(e->cat, "optim");
        ck_assert_int_eq(e->tid, DT_LANE_OPTIM);
        ck_assert(e->iter >= 0 && e->iter < ITERS);
        ck_assert(e->layer >= -1 && e->layer <= L);
        count[e->iter][e->layer + 1]++;
        const double S = extra(e, "loss_scale", 0), amax = extra(e, "amax", -1), nf = extra(e, "nonfinite", -1);
        ck_assert(S >= 1);
        ck_assert(nf >= 0);
        if (nf > 0) bad[e->iter] = 1;
        else /* clean: the rounded half gradient is at most the largest half */
            ck_assert_msg(amax >= 0 && S * amax <= 65504.0, "iter %lld layer %d: S %g amax %g", (long long)e->iter,
                          e->layer, S, amax);
    }
    for (int k = 0; k < ITERS; k++) {
        for (int s = 0; s < L + 2; s++) ck_assert_int_eq(count[k][s], 1);
        bad_steps += bad[k];
    }
    ck_assert_int_eq(bad_steps, skipped); /* every skipped step shows its inf/NaN, and only those */
    dt_trace_free(t);
    unlink(path);
}
END_TEST

START_TEST(test_fit_refuses_trace_without_amax)
{
    dt_train_config c;
    fp16_cfg(&c, 3, 2);
    c.precision = DT_F32;
    c.use_loss_scaling = 0;
    char path[256];
    tmp_path(path, sizeof path, "f32.json");
    c.trace_path = path;
    run(&c, NULL, NULL, NULL);
    dt_trace *t;
    ck_dt(dt_trace_read(path, &t));
    dts_grad_model gm;
    dt_clear_error();
    ck_assert_int_eq(dts_grad_model_fit(t, path, &gm), DT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), path));
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--fp16 --trace"));
    dt_trace_free(t);
    unlink(path);
}
END_TEST

/* ---- exact -------------------------------------------------------------- */

/* Four slots with constant amax 2^-4 (block 0), 2^-5 (block 1), 2^-7 (head)
 * and 2^-6 (embedding); window 5, hysteresis 2, from S = 2^24. Slot s
 * overflows while S * 2^mu_s >= 65520, i.e. log2 S + mu_s >= 16: the head
 * up to S = 2^23, block 1 at 2^22 and 2^21, block 0 at 2^20. By hand:
 *   step 0: 2^24 overflow, hysteresis 2 -> 1 (absorbed); step 1: backoff;
 *   steps 2..5: backoff each (h stays 1) down to 2^19;
 *   steps 6..10 clean at 2^19, growth at step 10 to 2^20 (h = 2);
 *   step 11 overflow absorbed, step 12 backoff; steps 13..17 clean, growth;
 *   steps 18, 19 as 11, 12. */
START_TEST(test_constant_model_by_hand)
{
    dts_grad_model gm;
    ck_dt(dts_grad_model_constant(4, -6.0, &gm));
    gm.mu[1] = -4.0, gm.mu[2] = -5.0, gm.mu[3] = -7.0;
    dt_loss_scaler_config cfg;
    dt_loss_scaler_config_default(&cfg);
    cfg.initial_scale = 16777216.0f;
    cfg.window = 5;
    cfg.hysteresis = 2;
    dts_amp_result r;
    ck_dt(dts_amp_simulate(&gm, &cfg, 20, 42, &r));
    static const int log2s[20] = {24, 24, 23, 22, 21, 20, 19, 19, 19, 19, 19, 20, 20, 19, 19, 19, 19, 19, 20, 20};
    static const int layer[20] = {3, 3, 3, 2, 2, 1, -1, -1, -1, -1, -1, 1, 1, -1, -1, -1, -1, -1, 1, 1};
    for (int k = 0; k < 20; k++) {
        ck_assert_int_eq(r.trace[k].step, k);
        ck_assert_msg(r.trace[k].scale == ldexpf(1.0f, log2s[k]), "step %d: scale %g", k, r.trace[k].scale);
        ck_assert_msg(r.trace[k].layer == layer[k], "step %d: layer %d", k, r.trace[k].layer);
        ck_assert_int_eq(r.trace[k].overflow, layer[k] >= 0);
        ck_assert_int_eq(r.trace[k].skipped, layer[k] >= 0);
    }
    ck_assert_int_eq(r.steps, 20);
    ck_assert_int_eq(r.overflows, 10);
    ck_assert_int_eq(r.skipped, 10);
    ck_assert_int_eq(r.backoffs, 7); /* steps 1..5, 12, 19 */
    ck_assert_int_eq(r.growths, 2);  /* steps 10, 17 */
    ck_assert(r.final_scale == ldexpf(1.0f, 19));
    dts_amp_result_free(&r);

    /* a static scale: every step at 2^20 overflows (block 0) and is skipped */
    cfg.static_scale = 1048576.0f;
    ck_dt(dts_amp_simulate(&gm, &cfg, 7, 1, &r));
    ck_assert_int_eq(r.skipped, 7);
    ck_assert_int_eq(r.backoffs, 0);
    ck_assert(r.final_scale == 1048576.0f);
    dts_amp_result_free(&r);
    /* the scaler's own validation */
    cfg.static_scale = 0;
    cfg.hysteresis = 0;
    dt_clear_error();
    ck_assert_int_eq(dts_amp_simulate(&gm, &cfg, 7, 1, &r), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--hysteresis"));
}
END_TEST

START_TEST(test_same_seed_same_trajectory)
{
    dts_grad_model gm;
    ck_dt(dts_grad_model_constant(6, -3.0, &gm));
    for (int s = 0; s < 6; s++) gm.sigma[s] = 1.0, gm.slope[s] = -0.01;
    gm.t_hi = 100;
    dt_loss_scaler_config cfg;
    dt_loss_scaler_config_default(&cfg);
    cfg.window = 20;
    dts_amp_result a, b, c;
    ck_dt(dts_amp_simulate(&gm, &cfg, 500, 7, &a));
    ck_dt(dts_amp_simulate(&gm, &cfg, 500, 7, &b));
    ck_dt(dts_amp_simulate(&gm, &cfg, 500, 8, &c));
    ck_assert_mem_eq(a.trace, b.trace, 500 * sizeof *a.trace);
    ck_assert_int_eq(a.skipped, b.skipped);
    ck_assert(a.final_scale == b.final_scale);
    ck_assert(a.overflows > 0 && a.growths > 0);
    ck_assert(memcmp(a.trace, c.trace, 500 * sizeof *a.trace) != 0);
    dts_amp_result_free(&a);
    dts_amp_result_free(&b);
    dts_amp_result_free(&c);
}
END_TEST

/* ---- the rule against the real rounding --------------------------------- */

/* One step from the same initial weights and batch at static scales 2^K0
 * .. 2^K1: powers of two scale every rounded value exactly, so the step's
 * unscaled amax is the same at every scale, and the rule must tell from
 * the amax recorded at 2^K0 (no overflow there) which scales overflow and
 * which slots hold an inf/NaN. Slots within RULE_MARGIN (log2) of the
 * limit are not judged: the f16 rounding of the amax itself moves it by up
 * to 2^-11 relative. */
#define RULE_K0 10
#define RULE_K1 22
#define RULE_MARGIN 0.01

static void one_step(uint64_t seed, int k, const char *path, double amax[4], int nonfinite[4], int *overflow)
{
    dt_train_config c;
    fp16_cfg(&c, seed, 1);
    c.lr.warmup_iters = 0;
    c.loss_scaler.static_scale = ldexpf(1.0f, k);
    c.trace_path = path;
    dt_trainer *tr;
    ck_dt(dt_trainer_create(&c, &tr));
    dt_train_stats st;
    ck_dt(dt_trainer_step(tr, &st));
    ck_dt(dt_trainer_finish(tr));
    *overflow = st.overflow;
    dt_trainer_free(tr);
    dt_trace *t;
    ck_dt(dt_trace_read(path, &t));
    for (size_t i = 0; i < t->n_events; i++) {
        const dt_trace_event *e = &t->events[i];
        if (strcmp(e->name, "grad_amax")) continue;
        amax[e->layer + 1] = extra(e, "amax", -1);
        nonfinite[e->layer + 1] = extra(e, "nonfinite", 0) > 0;
    }
    dt_trace_free(t);
}

START_TEST(test_rule_matches_real)
{
    char path[256];
    tmp_path(path, sizeof path, "rule.json");
    dts_grad_model gm;
    ck_dt(dts_grad_model_constant(4, 0.0, &gm));
    int runs = 0, judged = 0, over = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        double a0[4], x[4];
        int nf[4], ovf;
        one_step(seed, RULE_K0, path, a0, nf, &ovf);
        ck_assert_int_eq(ovf, 0);
        for (int s = 0; s < 4; s++) ck_assert(a0[s] > 0), x[s] = log2(a0[s]);
        for (int k = RULE_K0; k <= RULE_K1; k++) {
            double a[4];
            one_step(seed, k, path, a, nf, &ovf);
            int near = 0, top = -1;
            for (int s = 0; s < 4; s++) {
                const double margin = k + x[s] - log2(DTS_AMP_F16_LIMIT);
                if (fabs(margin) < RULE_MARGIN) {
                    near = 1;
                    continue;
                }
                judged++;
                ck_assert_msg(nf[s] == (margin >= 0),
                              "seed %d scale 2^%d slot %d: log2(S amax / 65520) = %.3f, real %s", (int)seed, k, s,
                              margin, nf[s] ? "inf/NaN" : "finite");
                if (nf[s]) top = s;
            }
            const int pred = dts_amp_first_overflow(&gm, ldexpf(1.0f, k), x);
            if (!near) {
                ck_assert_int_eq(pred >= 0, ovf);
                ck_assert_int_eq(pred, top);
            }
            runs++;
            over += ovf;
        }
    }
    fprintf(stderr, "check_sim_amp: rule: %d one-step runs (%d overflowed), %d slot flags judged, all as predicted\n",
            runs, over, judged);
    unlink(path);
}
END_TEST

/* ---- prediction of another run ------------------------------------------ */

/* Fit on run A (seed 11, S0 = 2^24), predict run B (seed 12, S0 = 2^20),
 * both PREDICT_ITERS steps, with the default window (1000: the scale only
 * backs off, so the skipped steps are the descent from S0 plus the later
 * excursions) and with window PREDICT_WINDOW (the scale also grows back
 * into overflows every few dozen steps). The prediction is the median over
 * PREDICT_SEEDS simulations.
 *
 * Runs A and B are real fp16 runs: their overflows depend on the rounding
 * of every step, and another machine or build may take them along other
 * trajectories, as another seed does. So the tolerances cover the model's
 * error over a population of pairs, not this pair's figures. The model
 * errs on one side: a target run with a gradient spike (log2 amax some 6
 * above its neighbours) that the fit's normal tail makes too rare skips
 * one more step and (the hysteresis spent after the descent) halves its
 * scale once more than predicted. Over 78 pairs (fit seeds 11..13 x
 * targets 20..23 at S0 2^18, 2^20, 2^22 and 12 at 2^20 x both windows),
 * the same in the native and --disable-native builds on the developers'
 * Xeon: real - predicted skipped steps in [-1, +3], log2 of real /
 * predicted final scale in [-3, +1] (7 pairs, all with window 1000 and
 * targets 21 and 23, beyond the former 2 skipped and one halving).
 * Allowed: one spike more on either side, [-2, +4] skipped
 * steps (PREDICT_SKIP_UNDER, PREDICT_SKIP_OVER) and [-4, +2] halvings. A
 * model that predicts no overflow (0 skipped against this pair's real 5
 * and 11 here) or twice the real ones falls outside. (The rule and the
 * scaler are checked exactly above; this checks the fit.) */
#define PREDICT_ITERS 80
#define PREDICT_WINDOW 10
#define PREDICT_SEEDS 25
#define PREDICT_SKIP_UNDER 4 /* real - predicted, at most */
#define PREDICT_SKIP_OVER 2  /* predicted - real, at most */

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}
static int cmp_f(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void real_run(uint64_t seed, float s0, int window, const char *path, dts_amp_result *obs, dt_trace **tout)
{
    dt_train_config c;
    fp16_cfg(&c, seed, PREDICT_ITERS);
    c.loss_scaler.initial_scale = s0;
    c.loss_scaler.window = window;
    c.trace_path = path;
    int64_t skipped;
    run(&c, &skipped, NULL, NULL);
    dt_trace *t;
    ck_dt(dt_trace_read(path, &t));
    ck_dt(dts_amp_observe(t, path, obs));
    ck_assert_int_eq(obs->steps, PREDICT_ITERS);
    ck_assert_int_eq(obs->skipped, skipped);
    *tout = t;
}

static void predict(int window, float s0_a, float s0_b)
{
    char pa[256], pb[256];
    tmp_path(pa, sizeof pa, "run_a.json");
    tmp_path(pb, sizeof pb, "run_b.json");
    dts_amp_result ra, rb;
    dt_trace *ta, *tb;
    real_run(11, s0_a, window, pa, &ra, &ta);
    real_run(12, s0_b, window, pb, &rb, &tb);
    dts_grad_model gm;
    ck_dt(dts_grad_model_fit(ta, pa, &gm));
    ck_assert_int_eq(gm.n_slots, 4);
    for (int s = 0; s < gm.n_slots; s++)
        fprintf(stderr, "check_sim_amp: fit slot %d: mu %.2f slope %.4f sigma %.2f (%d obs, %d censored)\n", s,
                gm.mu[s], gm.slope[s], gm.sigma[s], gm.n_obs[s], gm.n_censored[s]);
    dt_loss_scaler_config cfg;
    dt_loss_scaler_config_default(&cfg);
    cfg.initial_scale = s0_b;
    cfg.window = window;
    int64_t sk[PREDICT_SEEDS];
    float fs[PREDICT_SEEDS];
    for (int i = 0; i < PREDICT_SEEDS; i++) {
        dts_amp_result p;
        ck_dt(dts_amp_simulate(&gm, &cfg, PREDICT_ITERS, (uint64_t)i, &p));
        sk[i] = p.skipped;
        fs[i] = p.final_scale;
        dts_amp_result_free(&p);
    }
    qsort(sk, PREDICT_SEEDS, sizeof *sk, cmp_i64);
    qsort(fs, PREDICT_SEEDS, sizeof *fs, cmp_f);
    const int64_t sk_med = sk[PREDICT_SEEDS / 2];
    const float fs_med = fs[PREDICT_SEEDS / 2];
    fprintf(stderr,
            "check_sim_amp: window %d, fit on S0 2^%.0f (real: %lld skipped, final 2^%.0f), predict S0 2^%.0f: "
            "real %lld skipped, %lld backoffs, %lld growths, final 2^%.0f; predicted median %lld skipped "
            "(range %lld..%lld), final 2^%.0f (range 2^%.0f..2^%.0f)\n",
            window, log2(s0_a), (long long)ra.skipped, log2(ra.final_scale), log2(s0_b), (long long)rb.skipped,
            (long long)rb.backoffs, (long long)rb.growths, log2(rb.final_scale), (long long)sk_med, (long long)sk[0],
            (long long)sk[PREDICT_SEEDS - 1], log2(fs_med), log2(fs[0]), log2(fs[PREDICT_SEEDS - 1]));
    ck_assert_msg(rb.skipped - sk_med <= PREDICT_SKIP_UNDER && sk_med - rb.skipped <= PREDICT_SKIP_OVER,
                  "skipped: predicted %lld, real %lld (allowed: real - predicted in [-%d, +%d])", (long long)sk_med,
                  (long long)rb.skipped, PREDICT_SKIP_OVER, PREDICT_SKIP_UNDER);
    const double halvings = log2(fs_med) - log2(rb.final_scale); /* real's extra halvings */
    ck_assert_msg(halvings <= PREDICT_SKIP_UNDER && -halvings <= PREDICT_SKIP_OVER,
                  "final scale: predicted %g, real %g (allowed: 2^-%d .. 2^%d of the prediction)", fs_med,
                  rb.final_scale, PREDICT_SKIP_UNDER, PREDICT_SKIP_OVER);
    dts_amp_result_free(&ra);
    dts_amp_result_free(&rb);
    dt_trace_free(ta);
    dt_trace_free(tb);
    unlink(pa);
    unlink(pb);
}

START_TEST(test_predicts_other_run_default_window) { predict(1000, 16777216.0f, 1048576.0f); }
END_TEST

START_TEST(test_predicts_other_run_short_window) { predict(PREDICT_WINDOW, 16777216.0f, 1048576.0f); }
END_TEST

static Suite *amp_suite(void)
{
    Suite *s = suite_create("sim_amp");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, test_constant_model_by_hand);
    tcase_add_test(tc, test_same_seed_same_trajectory);
    suite_add_tcase(s, tc);
    tc = tcase_create("real");
    tcase_add_test(tc, test_grad_amax_recorded);
    tcase_add_test(tc, test_fit_refuses_trace_without_amax);
    tcase_add_test(tc, test_rule_matches_real);
    tcase_add_test(tc, test_predicts_other_run_default_window);
    tcase_add_test(tc, test_predicts_other_run_short_window);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(amp_suite()); }
