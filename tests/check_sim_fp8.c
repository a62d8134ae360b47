/* check_sim_fp8.c: the simulator's FP8 numerics model (sim/fp8.c)
 * against hand computations, and its reading of a real FP8 run.
 *
 *  - by hand: the count within u binades of the amax for a uniform
 *    distribution over 16 cells (log-uniform cells, the top cell's u^beta,
 *    the amax itself); the histogram's deconvolution (a known p, each
 *    step's amax a quarter into its binade); delayed scaling's next-step
 *    semantics on an amax sequence with a spike (the spike step saturates
 *    the top cell's share, the steps after it none and flush with the
 *    spike's scale), tensorwise (never saturates) and
 *    blockwise (power-of-two scales) with a margin, hybrid's E5M2
 *    gradients; beta's fit to a saturated count;
 *  - the settings and the scenario's fp8_* keys read, checked, written;
 *  - a real run (in process): its delayed scales recomputed from its
 *    amaxes equal those it used, bit for bit; its counts read back; a
 *    trace without FP8 refused. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "dt_trace.h"
#include "dts_fp8.h"
#include "dts_scenario.h"
#include "testutil.h"

static const dts_fp8_settings E4_DELAYED = {
    .mode = DT_FP8_MODE_E4M3, .recipe = DT_FP8_DELAYED, .algo = DT_FP8_AMAX_MAX, .margin = 0, .history_len = 16};

/* ---- by hand ------------------------------------------------------------ */

START_TEST(test_names)
{
    char buf[40];
    for (int i = 0; i < 5 * DTS_FP8_PER_BLOCK; i++)
        ck_assert_int_eq(dts_fp8_tensor_index(dts_fp8_tensor_name(i, buf, sizeof buf)), i);
    ck_assert_str_eq(dts_fp8_tensor_name(14, buf, sizeof buf), "h.1.qkv.dy");
    ck_assert_str_eq(dts_fp8_tensor_name(9, buf, sizeof buf), "h.0.fcproj.x");
    ck_assert_int_eq(dts_fp8_tensor_index("h.0.fc.z"), -1);
    ck_assert_int_eq(dts_fp8_tensor_index("h.-1.fc.x"), -1);
    ck_assert_int_eq(dts_fp8_tensor_index("h.0.fcx"), -1);
    ck_assert_int_eq(dts_fp8_tensor_index("wte"), -1);
}
END_TEST

/* p uniform over cells 0..15 */
static void uniform16(dts_fp8_tensor *t, double beta)
{
    memset(t->p, 0, sizeof t->p);
    for (int i = 0; i < 16; i++) t->p[i] = 1.0 / 16;
    t->nonzero = 1.0;
    t->beta = beta;
}

START_TEST(test_count_within_by_hand)
{
    dts_fp8_tensor t;
    memset(&t, 0, sizeof t);
    uniform16(&t, 1.0);
    const double c = 1600; /* 100 a cell */
    ck_assert_double_eq(dts_fp8_count_within(&t, c, 0.0), 0.0);
    ck_assert_double_eq(dts_fp8_count_within(&t, c, -1.0), 0.0);
    ck_assert_double_eq(dts_fp8_count_within(&t, c, 1e-9), 1.0); /* the amax itself */
    ck_assert_double_eq_tol(dts_fp8_count_within(&t, c, 0.5), 50.0, 1e-9);
    ck_assert_double_eq_tol(dts_fp8_count_within(&t, c, 2.5), 250.0, 1e-9);
    ck_assert_double_eq_tol(dts_fp8_count_within(&t, c, 16.0), 1600.0, 1e-9);
    ck_assert_double_eq_tol(dts_fp8_count_within(&t, c, 100.0), 1600.0, 1e-9);
    t.beta = 2.0; /* the top cell only */
    ck_assert_double_eq_tol(dts_fp8_count_within(&t, c, 0.5), 25.0, 1e-9);
    ck_assert_double_eq_tol(dts_fp8_count_within(&t, c, 2.5), 250.0, 1e-9);
}
END_TEST

START_TEST(test_deconvolve_by_hand)
{
    /* cells 0..3 hold 0.1, 0.4, 0.3, 0.2 of the values; every step's amax
     * is 2^0.25, so a = 0.25: bucket j = 0.25 p[j] + 0.75 p[j - 1] */
    dts_fp8_run r;
    ck_dt(dts_fp8_run_init(&r, 1, 4, &E4_DELAYED));
    dts_fp8_tensor *t = &r.t[0];
    for (int k = 0; k < 4; k++) {
        t->amax[k] = 1.18920712f; /* 2^0.25 */
        t->values[k] = 1000;
    }
    const double h[5] = {100, 700, 1500, 1100, 600}; /* 4000 x (0.025, 0.175, 0.375, 0.275, 0.15) */
    for (int j = 0; j < 5; j++) t->hist[j] = h[j];
    ck_dt(dts_fp8_fit(&r));
    ck_assert_double_eq_tol(t->a_mean, 0.25, 1e-6);
    ck_assert_double_eq_tol(t->nonzero, 1.0, 1e-12);
    const double want[5] = {0.1, 0.4, 0.3, 0.2, 0.0};
    for (int i = 0; i < 5; i++)
        ck_assert_msg(fabs(t->p[i] - want[i]) < 1e-4, "p[%d] = %g, expected %g", i, t->p[i], want[i]);
    dts_fp8_run_free(&r);
}
END_TEST

/* One block; tensor `idx` with amax a[k] and 1000 values a step, p uniform over 16 cells (set by hand). */
static void spike_run(dts_fp8_run *r, const float *a, int steps, int idx, double beta)
{
    ck_dt(dts_fp8_run_init(r, 1, steps, &E4_DELAYED));
    dts_fp8_tensor *t = &r->t[idx];
    t->present = 1;
    for (int k = 0; k < steps; k++) {
        t->amax[k] = a[k];
        t->values[k] = 1000;
    }
    uniform16(t, beta);
}

START_TEST(test_delayed_spike_by_hand)
{
    /* E4M3, max 448, margin 0: step 0 scales from its own amax (dtrain's first step: no history), 448 / 1;
     * steps 1-3 from the history, 448 / 1; nothing is flushed (2^-10 / 448 is 18.8 binades below 1, below
     * the 16 cells); the spike of step 3 (amax 4) is over 448 / 448 = 1 by u = 2 >= 1: the top cell,
     * 1000 / 16 = 62.5 values; steps 4-5 at 448 / 4 (the spike in the history): nothing saturates */
    const float a[6] = {1, 1, 1, 4, 1, 1};
    dts_fp8_run r;
    spike_run(&r, a, 6, 0, 1.0);
    dts_fp8_prediction p;
    ck_dt(dts_fp8_predict(&r, &E4_DELAYED, &p));
    ck_assert_double_eq_tol(p.t[0].saturated, 62.5, 1e-9);
    ck_assert_double_eq(p.t[0].flushed, 0.0);
    ck_assert_double_eq(p.t[0].values, 6000.0);
    ck_assert_int_eq(p.steps_saturated, 1);
    ck_assert_double_eq(p.t[1].saturated + p.t[1].flushed + p.t[1].values, 0.0); /* not run */
    dts_fp8_prediction_free(&p);

    /* most_recent with H = 1: step 4 runs at 448 / 4 (step 3's amax), step 5 at 448 again: the same counts */
    dts_fp8_settings s = E4_DELAYED;
    s.algo = DT_FP8_AMAX_MOST_RECENT;
    s.history_len = 1;
    ck_dt(dts_fp8_predict(&r, &s, &p));
    ck_assert_double_eq_tol(p.t[0].saturated, 62.5, 1e-9);
    dts_fp8_prediction_free(&p);

    /* margin 2: 448 / 4 at steps 0-3, the spike's 4 x 112 = 448 is not above 448: nothing saturates; steps
     * 4-5 at 448 / 16 flush u >= log2(28 x 2^10) = 14.8, the rest of the 16 cells */
    s = E4_DELAYED;
    s.margin = 2;
    ck_dt(dts_fp8_predict(&r, &s, &p));
    ck_assert_double_eq(p.t[0].saturated, 0.0);
    ck_assert_double_eq_tol(p.t[0].flushed, 2 * 1000.0 * (1.0 - log2(28.0 * 1024) / 16), 1e-9);
    dts_fp8_prediction_free(&p);

    /* tensorwise: never saturates; margin 10: a s = 448 / 1024 at every step, flushing u >= log2(448): 1000 (1
     * - log2(448) / 16) a step */
    s = E4_DELAYED;
    s.recipe = DT_FP8_TENSORWISE;
    ck_dt(dts_fp8_predict(&r, &s, &p));
    ck_assert_double_eq(p.t[0].saturated, 0.0);
    ck_assert_double_eq(p.t[0].flushed, 0.0);
    dts_fp8_prediction_free(&p);
    s.margin = 10;
    ck_dt(dts_fp8_predict(&r, &s, &p));
    ck_assert_double_eq(p.t[0].saturated, 0.0);
    ck_assert_double_eq_tol(p.t[0].flushed, 6 * 1000.0 * (1.0 - log2(448.0) / 16), 1e-6);
    dts_fp8_prediction_free(&p);
    /* blockwise, margin 10: the power of two below 448 / 1024 / amax, so a s = 1/4: u >= 8 flushed, 500 a step */
    s.recipe = DT_FP8_BLOCKWISE;
    ck_dt(dts_fp8_predict(&r, &s, &p));
    ck_assert_double_eq(p.t[0].saturated, 0.0);
    ck_assert_double_eq_tol(p.t[0].flushed, 3000.0, 1e-6);
    dts_fp8_prediction_free(&p);
    dts_fp8_run_free(&r);
}
END_TEST

START_TEST(test_small_spike_and_beta_by_hand)
{
    /* a spike of 1.5 over the history's 1: u = log2 1.5 inside the top cell: 62.5 u^beta values */
    const float a[4] = {1, 1, 1.5f, 1};
    const double u = log2(1.5);
    for (int b = 1; b <= 2; b++) {
        dts_fp8_run r;
        spike_run(&r, a, 4, 0, b);
        dts_fp8_prediction p;
        ck_dt(dts_fp8_predict(&r, &E4_DELAYED, &p));
        ck_assert_double_eq_tol(p.t[0].saturated, 62.5 * pow(u, b), 1e-9);
        dts_fp8_prediction_free(&p);
        dts_fp8_run_free(&r);
    }
}
END_TEST

START_TEST(test_hybrid_gradients_e5m2)
{
    /* qkv.dy (index 2), tensorwise with margin 10: E4M3 a s = 448 / 1024 flushes u >= log2(448), 1000 (1 -
     * log2(448) / 16) a step; E5M2 (hybrid's gradients) a s = 57344 / 1024 = 56, u >= log2(56 x 2^17) =
     * 22.8: none of the 16 cells */
    const float a[2] = {1, 1};
    dts_fp8_run r;
    spike_run(&r, a, 2, 2, 1.0);
    dts_fp8_settings s = E4_DELAYED;
    s.recipe = DT_FP8_TENSORWISE;
    s.margin = 10;
    dts_fp8_prediction p;
    ck_dt(dts_fp8_predict(&r, &s, &p));
    ck_assert_double_eq_tol(p.t[2].flushed, 2 * 1000.0 * (1.0 - log2(448.0) / 16), 1e-6);
    dts_fp8_prediction_free(&p);
    s.mode = DT_FP8_MODE_HYBRID;
    ck_dt(dts_fp8_predict(&r, &s, &p));
    ck_assert_double_eq(p.t[2].flushed, 0.0);
    dts_fp8_prediction_free(&p);
    dts_fp8_run_free(&r);
}
END_TEST

START_TEST(test_beta_fit_by_hand)
{
    /* a delayed run whose step 2 ran at scale 448 with amax 1.5 and saturated 10 values: beta solves
     * c p0 u^beta = 10, u = log2 1.5, whatever the deconvolution made p0; a tensor without saturation takes
     * the pooled beta (this one step) */
    dts_fp8_run r;
    ck_dt(dts_fp8_run_init(&r, 1, 4, &E4_DELAYED));
    for (int i = 0; i < 2; i++) {
        dts_fp8_tensor *t = &r.t[i];
        const float a[4] = {1, 1, 1.5f, 1};
        for (int k = 0; k < 4; k++) {
            t->amax[k] = i == 0 ? a[k] : 1.0f;
            t->values[k] = 1000;
            t->scale[k] = k == 0 ? 0.0f : 448.0f; /* the first step records none */
        }
        t->hist[0] = 500;
        t->hist[1] = 3500;
    }
    r.t[0].saturated[2] = 10;
    ck_dt(dts_fp8_fit(&r));
    const double c0 = 1000 * r.t[0].p[0];
    const double want = log(10.0 / c0) / log(log2(1.5));
    ck_assert_msg(c0 * log2(1.5) > 10, "the case needs beta > 1 (c p0 u = %g)", c0 * log2(1.5));
    ck_assert_double_eq_tol(r.t[0].beta, want, 1e-6);
    ck_assert_int_eq(r.t[0].beta_steps, 1);
    ck_assert_double_eq_tol(r.beta_pooled, want, 1e-6);
    ck_assert_double_eq_tol(r.t[1].beta, want, 1e-6);
    ck_assert_int_eq(r.t[1].beta_steps, 0);
    /* the fitted shape reproduces the run's own count */
    dts_fp8_prediction p;
    ck_dt(dts_fp8_predict(&r, &E4_DELAYED, &p));
    ck_assert_double_eq_tol(p.t[0].saturated, 10.0, 1e-6);
    /* the recorded scales: all 448 after step 0, but tensor 0's step 3 runs at 448 / 1.5 (the spike in its
     * history): 5 of 6 agree */
    ck_assert_int_eq(p.scales_compared, 6);
    ck_assert_int_eq(p.scales_equal, 5);
    dts_fp8_prediction_free(&p);
    ck_dt(dts_fp8_set_beta(&r, 1.0));
    ck_assert_double_eq(r.t[0].beta, 1.0);
    ck_assert_int_eq(dts_fp8_set_beta(&r, 0.5), DT_ERR_INVALID);
    dts_fp8_run_free(&r);
}
END_TEST

/* ---- settings and the scenario's keys ------------------------------------- */

START_TEST(test_settings_from_config)
{
    dts_fp8_settings s;
    ck_dt(dts_fp8_settings_from_config("{\"otherData\":{\"config\":{\"fp8_format\":\"e4m3\",\"fp8_recipe\":"
                                       "\"tensorwise\",\"fp8_margin\":3,\"fp8_amax_history_len\":8,"
                                       "\"fp8_amax_compute_algo\":\"most_recent\"}}}",
                                       "t.json", &s));
    ck_assert_int_eq(s.mode, DT_FP8_MODE_E4M3);
    ck_assert_int_eq(s.recipe, DT_FP8_TENSORWISE);
    ck_assert_int_eq(s.algo, DT_FP8_AMAX_MOST_RECENT);
    ck_assert_int_eq(s.margin, 3);
    ck_assert_int_eq(s.history_len, 8);
    char buf[128];
    ck_assert_str_eq(dts_fp8_settings_text(&s, buf, sizeof buf), "e4m3 tensorwise, margin 3");
    ck_dt(dts_fp8_settings_from_config("{\"config\":{\"fp8_format\":\"hybrid\"}}", "s.json", &s)); /* a summary */
    ck_assert_int_eq(s.history_len, 1024);
    ck_assert_str_eq(dts_fp8_settings_text(&s, buf, sizeof buf), "hybrid delayed, margin 0, history 1024, max");
    ck_assert_int_eq(dts_fp8_settings_from_config("{\"config\":{\"precision\":\"bf16\"}}", "s.json", &s),
                     DT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "not an FP8 run"));
    ck_assert_int_eq(dts_fp8_settings_from_config("{\"fp8_format\":\"hybrid\",\"fp8_margin\":40}", "c.json", &s),
                     DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "\"fp8_margin\""));
    ck_assert_int_eq(dts_fp8_settings_from_config("{\"fp8_format\":\"e5m2\"}", "c.json", &s), DT_ERR_INVALID);
}
END_TEST

START_TEST(test_scenario_keys)
{
    dts_scenario *sc = malloc(sizeof *sc);
    ck_assert_ptr_nonnull(sc);
    dts_scenario_default(sc);
    ck_assert_int_eq(sc->fp8, DT_FP8_OFF);
    char *json = dts_scenario_json(sc);
    ck_assert_ptr_null(strstr(json, "fp8_")); /* written only with FP8, as dtrain */
    free(json);
    /* a dtsim config: every key known; FP8 implies bf16 */
    ck_dt(dts_scenario_from_config(sc,
                                   "{\"num_layers\": 2, \"fp8_format\": \"e4m3\", \"fp8_recipe\": "
                                   "\"blockwise\", \"fp8_margin\": 2, \"fp8_amax_history_len\": 4, "
                                   "\"fp8_amax_compute_algo\": \"most_recent\"}",
                                   "c.json"));
    ck_assert_int_eq(sc->fp8, DT_FP8_MODE_E4M3);
    ck_assert_int_eq(sc->fp8_recipe, DT_FP8_BLOCKWISE);
    ck_assert_int_eq(sc->fp8_margin, 2);
    ck_assert_int_eq(sc->fp8_amax_history_len, 4);
    ck_assert_int_eq(sc->fp8_amax_algo, DT_FP8_AMAX_MOST_RECENT);
    ck_assert_str_eq(sc->precision, "bf16");
    json = dts_scenario_json(sc);
    dts_scenario *back = malloc(sizeof *back);
    ck_assert_ptr_nonnull(back);
    dts_scenario_default(back);
    ck_dt(dts_scenario_from_config(back, json, "written"));
    ck_assert_int_eq(back->fp8, sc->fp8);
    ck_assert_int_eq(back->fp8_recipe, sc->fp8_recipe);
    ck_assert_int_eq(back->fp8_margin, sc->fp8_margin);
    ck_assert_int_eq(back->fp8_amax_history_len, sc->fp8_amax_history_len);
    ck_assert_int_eq(back->fp8_amax_algo, sc->fp8_amax_algo);
    free(json);
    char buf[512];
    ck_assert_int_eq(dts_scenario_unmodelled(sc, 0, buf, sizeof buf), 1);
    ck_assert_ptr_nonnull(strstr(buf, "FP8 GEMMs (e4m3 blockwise)"));
    /* dtrain's configuration without the keys: no FP8 */
    ck_dt(dts_scenario_from_config(sc, "{\"task\": \"add\", \"num_layers\": 2, \"precision\": \"bf16\"}", "t.json"));
    ck_assert_int_eq(sc->fp8, DT_FP8_OFF);
    /* refused, naming the key */
    ck_assert_int_eq(dts_scenario_from_config(sc, "{\"fp8_format\": \"e5m2\"}", "c.json"), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "\"fp8_format\""));
    ck_assert_int_eq(dts_scenario_from_config(sc, "{\"fp8_format\": \"hybrid\", \"precision\": \"fp16\"}", "c.json"),
                     DT_ERR_INVALID);
    ck_assert_int_eq(dts_scenario_from_config(sc, "{\"fp8_amax_history_len\": 0}", "c.json"), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "\"fp8_amax_history_len\""));
    free(back);
    free(sc);
}
END_TEST

/* ---- a real run ----------------------------------------------------------- */

static void tmp_path(char *buf, size_t n, const char *what)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, n, "%s/check_sim_fp8_%ld_%s", dir && dir[0] ? dir : "/tmp", (long)getpid(), what);
}

/* The tiny GPT (2 blocks), T 16, batch 8, 10 steps, 2-digit addition; FP8 as given (DT_FP8_OFF: bf16). */
static void train(const char *trace, dt_fp8_mode mode, int history)
{
    dt_train_config c;
    dt_train_config_default(&c);
    c.seq_length = 16;
    c.data.digits = 2;
    c.micro_batch_size = 8;
    c.global_batch_size = 8;
    c.train_iters = 10;
    c.lr.warmup_iters = 1;
    c.lr.decay_iters = 10;
    c.threads = 1;
    c.eval_iters = 1;
    c.precision = DT_BF16;
    c.fp8 = mode;
    c.fp8_amax_history_len = history;
    c.trace_path = trace;
    dt_trainer *tr;
    ck_dt(dt_trainer_create(&c, &tr));
    dt_train_stats st;
    for (int64_t i = 0; i < c.train_iters; i++) ck_dt(dt_trainer_step(tr, &st));
    ck_dt(dt_trainer_finish(tr));
    dt_trainer_free(tr);
}

START_TEST(test_real_run_replayed)
{
    char path[256];
    tmp_path(path, sizeof path, "a.json");
    train(path, DT_FP8_MODE_HYBRID, 4);
    dt_trace *t;
    ck_dt(dt_trace_read(path, &t));
    dts_fp8_run r;
    ck_dt(dts_fp8_run_read(t, path, &r));
    ck_assert_int_eq(r.layers, 2);
    ck_assert_int_eq(r.n, 24);
    ck_assert_int_eq(r.steps, 10);
    ck_assert_int_eq(r.first_iter, 0);
    ck_assert_int_eq(r.set.mode, DT_FP8_MODE_HYBRID);
    ck_assert_int_eq(r.set.history_len, 4);
    /* the delayed scales, recomputed from the recorded amaxes, are those the run used: every tensor, every
     * step after the first (which scales from its own amaxes and records none) */
    dts_fp8_prediction p;
    ck_dt(dts_fp8_predict(&r, &r.set, &p));
    ck_assert_int_eq(p.scales_compared, 24 * 9);
    ck_assert_int_eq(p.scales_equal, p.scales_compared);
    dts_fp8_prediction_free(&p);
    /* every tensor has a distribution; tensorwise never saturates */
    for (int i = 0; i < r.n; i++) {
        double s = 0;
        for (int j = 0; j < DTS_FP8_REL; j++) s += r.t[i].p[j];
        ck_assert_msg(r.t[i].present && fabs(s - 1.0) < 1e-9, "tensor %d: p sums to %g", i, s);
    }
    dts_fp8_settings tw = r.set;
    tw.recipe = DT_FP8_TENSORWISE;
    ck_dt(dts_fp8_predict(&r, &tw, &p));
    ck_assert_double_eq(p.total.saturated, 0.0);
    dts_fp8_prediction_free(&p);
    /* its counts read back from the file equal the run's own sums */
    dts_fp8_measured m, own;
    ck_dt(dts_fp8_measured_read(path, &m));
    ck_dt(dts_fp8_measured_of_run(&r, &own));
    ck_assert_int_eq(m.n, own.n);
    ck_assert_double_eq(m.total.values, own.total.values);
    ck_assert_double_eq(m.total.flushed, own.total.flushed);
    ck_assert(own.total.values > 0);
    dts_fp8_measured_free(&m);
    dts_fp8_measured_free(&own);
    dts_fp8_run_free(&r);
    dt_trace_free(t);
    unlink(path);

    /* a run without FP8 is refused, naming the file */
    tmp_path(path, sizeof path, "bf16.json");
    train(path, DT_FP8_OFF, 1);
    ck_dt(dt_trace_read(path, &t));
    ck_assert_int_eq(dts_fp8_run_read(t, path, &r), DT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "not an FP8 run"));
    ck_assert_ptr_nonnull(strstr(dt_last_error(), path));
    dt_trace_free(t);
    unlink(path);
}
END_TEST

static Suite *fp8_suite(void)
{
    Suite *s = suite_create("sim_fp8");
    TCase *tc = tcase_create("by hand");
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_count_within_by_hand);
    tcase_add_test(tc, test_deconvolve_by_hand);
    tcase_add_test(tc, test_delayed_spike_by_hand);
    tcase_add_test(tc, test_small_spike_and_beta_by_hand);
    tcase_add_test(tc, test_hybrid_gradients_e5m2);
    tcase_add_test(tc, test_beta_fit_by_hand);
    suite_add_tcase(s, tc);
    tc = tcase_create("config");
    tcase_add_test(tc, test_settings_from_config);
    tcase_add_test(tc, test_scenario_keys);
    suite_add_tcase(s, tc);
    tc = tcase_create("real");
    tcase_add_test(tc, test_real_run_replayed);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(fp8_suite()); }
