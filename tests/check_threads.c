/* check_threads.c: the automatic CPU thread count. Its decision logic
 * (lib/train/thread_tune.c) is fed synthetic step times: it must pick the
 * faster count, pay a bounded price for looking on a quiet machine, and
 * react to a process that starts beside it. Then the property it relies
 * on, with the real backend: fewer workers than be->threads give
 * bit-identical gradients (same split, fewer threads), and a trainer
 * with --threads 0 ends with the same weights as one with the fixed count. */
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "testutil.h"
#include "thread_tune.h"

/* a step's time in ns at `workers`, for a machine where `fast` runs fastest */
static int64_t step_ns(int workers, int fast) { return workers == fast ? 5000000 : 9000000; }

/* Runs n steps; returns the steps run on a count other than `fast`. */
static int run_steps(dt__tune *t, int n, int fast)
{
    int off = 0;
    for (int i = 0; i < n; i++) {
        int w = dt__tune_next(t);
        off += w != fast;
        dt__tune_record(t, step_ns(w, fast));
    }
    return off;
}

START_TEST(test_candidates)
{
    dt__tune t;
    dt__tune_init(&t, 6, 1);
    ck_assert_int_eq(t.ncand, 3);
    ck_assert_int_eq(t.cand[0], 6);
    ck_assert_int_eq(t.cand[1], 3);
    ck_assert_int_eq(t.cand[2], 1);
    dt__tune_init(&t, 1, 1);
    ck_assert_int_eq(t.on, 0); /* one thread: nothing to choose */
    ck_assert_int_eq(dt__tune_next(&t), 1);
    dt__tune_init(&t, 4, 0);
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(dt__tune_next(&t), 4); /* off: always the backend's threads */
        dt__tune_record(&t, step_ns(4, 1));
    }
}
END_TEST

START_TEST(test_picks_fewer_under_contention)
{
    dt__tune t;
    dt__tune_init(&t, 2, 1);
    /* step 0 is not recorded, 1-3 measure 2 workers, 4-6 one */
    int off = run_steps(&t, 7, 1);
    ck_assert_int_eq(dt__tune_best(&t), 1);
    ck_assert_int_le(off, 4);
    /* and keeps it: over 2000 more steps, only the explorations' probes of 2 */
    off = run_steps(&t, 2000, 1);
    ck_assert_int_eq(dt__tune_best(&t), 1);
    ck_assert_int_le(off, 5); /* the slower count's first step ends its probe: one per exploration */
}
END_TEST

START_TEST(test_quiet_costs_little)
{
    dt__tune t;
    dt__tune_init(&t, 4, 1);
    /* 4 workers fastest: the probes of 2 and 1 end after one step each */
    int off = run_steps(&t, 200, 4);
    ck_assert_int_eq(dt__tune_best(&t), 4);
    ck_assert_int_le(off, 4); /* two explorations in 200 steps, two short probes each */
    off = run_steps(&t, 5000, 4);
    ck_assert_int_le(off, 2 * 8); /* at most one exploration per 1024 steps once settled */
    ck_assert_int_eq(t.switches, 0);
}
END_TEST

START_TEST(test_reacts_to_a_new_process)
{
    dt__tune t;
    dt__tune_init(&t, 2, 1);
    run_steps(&t, 300, 2);
    ck_assert_int_eq(dt__tune_best(&t), 2);
    /* a busy process starts: two workers now run at 20 ms, one at 9 */
    int i = 0;
    for (; i < 40 && dt__tune_best(&t) != 1; i++) {
        int w = dt__tune_next(&t);
        dt__tune_record(&t, w == 2 ? 20000000 : 9000000);
    }
    ck_assert_int_eq(dt__tune_best(&t), 1);
    ck_assert_int_le(i, 4 + 3 + 3); /* four slow steps, then the exploration */
}
END_TEST

START_TEST(test_noise_does_not_switch)
{
    dt__tune t;
    dt__tune_init(&t, 2, 1);
    dt_rng r;
    dt_rng_seed(&r, 3);
    /* 2 workers at 5 ms, 1 at 5.1 ms, each +-2%: within DT__TUNE_BETTER, so no switch */
    for (int i = 0; i < 3000; i++) {
        int w = dt__tune_next(&t);
        double base = w == 2 ? 5.0e6 : 5.1e6;
        dt__tune_record(&t, (int64_t)(base * (0.98 + 0.04 * dt_rng_uniform(&r))));
    }
    ck_assert_int_eq(dt__tune_best(&t), 2);
    ck_assert_int_eq(t.switches, 0);
}
END_TEST

/* The tiny GPT's gradients at be->threads = 4 run by 4, 2 and 1 workers. */
START_TEST(test_workers_same_gradients)
{
    dt_gpt_config c;
    ck_assert_int_eq(dt_gpt_config_preset("tiny", &c), DT_OK);
    c.vocab_size = 16;
    enum { Bm = 64, Tm = 16 };
    static int32_t tok[Bm * Tm], tgt[Bm * Tm];
    for (int i = 0; i < Bm * Tm; i++) tok[i] = (i * 7 + 3) % 16, tgt[i] = (i * 5 + 1) % 16;
    const size_t n = dt_gpt_config_layout_numel(&c);
    float *ref = malloc(n * sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    const int workers[3] = {4, 2, 1};
    for (int k = 0; k < 3; k++) {
        dt_backend *be;
        ck_assert_int_eq(dt_backend_create("cpu", 4, &be), DT_OK);
        ck_assert_int_eq(be->set_workers(be, workers[k]), DT_OK);
        ck_assert_int_eq(be->workers, workers[k]);
        dt_gpt *m;
        ck_assert_int_eq(dt_gpt_create(&c, be, &m), DT_OK);
        ck_assert_int_eq(dt_gpt_init_weights(m, 1), DT_OK);
        float loss;
        ck_assert_int_eq(dt_gpt_zero_grad(m), DT_OK);
        ck_assert_int_eq(dt_gpt_forward(m, tok, tgt, Bm, Tm, &loss), DT_OK);
        ck_assert_int_eq(dt_gpt_backward(m, 1.0f), DT_OK);
        if (k == 0) memcpy(ref, dt_gpt_grads(m), n * sizeof *ref);
        else
            ck_assert_msg(memcmp(ref, dt_gpt_grads(m), n * sizeof *ref) == 0, "%d workers: other gradients",
                          workers[k]);
        dt_gpt_free(m);
        dt_backend_destroy(be);
    }
    free(ref);
}
END_TEST

START_TEST(test_set_workers_range)
{
    dt_backend *be;
    ck_assert_int_eq(dt_backend_create("cpu", 2, &be), DT_OK);
    ck_assert_int_eq(be->workers, 2);
    ck_assert_int_eq(be->set_workers(be, 3), DT_ERR_INVALID);
    ck_assert_int_eq(be->set_workers(be, 0), DT_ERR_INVALID);
    ck_assert_int_eq(be->set_workers(be, 1), DT_OK);
    ck_assert_int_eq(be->set_threads(be, 3), DT_OK); /* a new split: every thread works */
    ck_assert_int_eq(be->workers, 3);
    dt_backend_destroy(be);
}
END_TEST

/* --threads 0 against the count it tunes under: the same weights. */
static void train(int threads, int steps, float *out, size_t cap, size_t *n, int *workers)
{
    dt_train_config cfg;
    dt_train_config_default(&cfg);
    cfg.train_iters = steps;
    cfg.micro_batch_size = cfg.global_batch_size = 32;
    cfg.threads = threads;
    dt_trainer *tr;
    ck_assert_int_eq(dt_trainer_create(&cfg, &tr), DT_OK);
    for (int i = 0; i < steps; i++) ck_assert_int_eq(dt_trainer_step(tr, NULL), DT_OK);
    dt_gpt *m = dt_trainer_model(tr);
    *n = dt_gpt_config_layout_numel(dt_gpt_config_of(m));
    ck_assert_uint_le(*n, cap);
    memcpy(out, dt_gpt_params(m), *n * sizeof *out);
    *workers = dt_trainer_workers(tr);
    dt_trainer_free(tr);
}

START_TEST(test_trainer_auto_same_weights)
{
    int procs = 1;
#ifdef _OPENMP
    procs = omp_get_num_procs();
#endif
    if (procs < 2) return; /* one core: nothing is tuned */
    enum { CAP = 1 << 20 };
    static float a[CAP], b[CAP];
    size_t na, nb;
    int wa, wb;
    train(0, 20, a, CAP, &na, &wa);
    train(procs, 20, b, CAP, &nb, &wb);
    ck_assert_uint_eq(na, nb);
    ck_assert_int_ge(wa, 1);
    ck_assert_int_le(wa, procs);
    ck_assert_int_eq(wb, procs);
    ck_assert_msg(memcmp(a, b, na * sizeof *a) == 0, "--threads 0 and --threads %d: other weights", procs);
}
END_TEST

static Suite *threads_suite(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("tune");
    tcase_add_test(tc, test_candidates);
    tcase_add_test(tc, test_picks_fewer_under_contention);
    tcase_add_test(tc, test_quiet_costs_little);
    tcase_add_test(tc, test_reacts_to_a_new_process);
    tcase_add_test(tc, test_noise_does_not_switch);
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("backend");
    tcase_set_timeout(tb, 120);
    tcase_add_test(tb, test_workers_same_gradients);
    tcase_add_test(tb, test_set_workers_range);
    tcase_add_test(tb, test_trainer_auto_same_weights);
    suite_add_tcase(s, tb);
    return s;
}

int main(void) { return dt_test_run(threads_suite()); }
