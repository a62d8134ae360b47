/* check_trace_stats.c: the pipeline bubble of a trace (dt_trace_stats.h) on
 * hand-made events with known answers:
 *   - 1f1b, p = 2, m = 4 with unit costs (forward 1, backward 2, messages
 *     0): the timeline laid out by hand, two steps. Stage 0's bubble is
 *     3/15 = (p-1)/(m+p-1) exactly; stage 1's optim_step spans its wait
 *     for stage 0 (as the runtime's gradient-norm allreduce does), so its
 *     bubble is 1/15 while bubble_fb, which does not count the optimizer
 *     step, is 3/15;
 *   - per-step windows, busy times, counts, skip and the means on a small
 *     trace in shuffled order with unrelated events (counters, compute
 *     events, another rank) mixed in;
 *   - sparse and out-of-order steps, a zero window, overlapping steps
 *     (pipedream), the stage and pid checks, errors;
 *   - a trace written to a file and read back gives the same figures;
 *   - a zero-bubble schedule's backward_b and backward_w count as work;
 *   - the step and phase times (dt_trace_phase_times_events) of three
 *     hand-made data-parallel steps with an evaluation and another rank's
 *     events mixed in, and their errors; iterations up to INT64_MAX (issue
 *     20, F1) cost no memory. */
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define MS 1000000LL /* the hand-made traces count in milliseconds */

typedef struct spec {
    const char *name;
    int mb;         /* -1: none */
    int64_t t0, t1; /* ms */
} spec;

/* Append the events of one stage's step: pipeline instructions on the lanes
 * the trainer uses, with iter, stage, version and phase args. */
static void add(dt_trace_event *ev, size_t *n, int pid, int stage, int64_t iter, const spec *s, int count)
{
    for (int i = 0; i < count; i++) {
        dt_trace_event *e = &ev[(*n)++];
        const int compute = strcmp(s[i].name, "forward") == 0 || strcmp(s[i].name, "backward") == 0;
        const int optim = strcmp(s[i].name, "optim_step") == 0;
        dt_trace_event_init(e, DT_TRACE_COMPLETE, s[i].name, "pipeline", pid,
                            compute ? DT_LANE_COMPUTE
                            : optim ? DT_LANE_OPTIM
                                    : DT_LANE_COMM,
                            s[i].t0 * MS, (s[i].t1 - s[i].t0) * MS);
        e->iter = iter;
        if (s[i].mb >= 0) e->micro_batch = s[i].mb;
        ck_dt(dt_trace_event_add_arg(e, "stage", stage));
        ck_dt(dt_trace_event_add_arg(e, "version", (double)iter));
        ck_dt(dt_trace_event_add_arg(e, "phase", 1));
    }
}

/* 1f1b, p = 2, m = 4, forward 1, backward 2, sends and receives take no
 * time beyond waiting. Stage 0: F0 F1 | B0 F2 | B1 F3 | B2 | B3 then OPT;
 * stage 1: F0 B0 F1 B1 F2 B2 F3 B3 then OPT, which waits for stage 0's last
 * backward (13 -> 15). Step 1 is step 0 shifted by `off` ms. */
static size_t one_f_one_b(dt_trace_event *ev, int64_t off, size_t n, int64_t iter)
{
    const int64_t o = off;
    const spec s0[] = {
        {"forward", 0, o + 0, o + 1},     {"send_act", 0, o + 1, o + 1},      {"forward", 1, o + 1, o + 2},
        {"send_act", 1, o + 2, o + 2},    {"recv_grad", 0, o + 2, o + 4},     {"backward", 0, o + 4, o + 6},
        {"forward", 2, o + 6, o + 7},     {"send_act", 2, o + 7, o + 7},      {"recv_grad", 1, o + 7, o + 7},
        {"backward", 1, o + 7, o + 9},    {"forward", 3, o + 9, o + 10},      {"send_act", 3, o + 10, o + 10},
        {"recv_grad", 2, o + 10, o + 10}, {"backward", 2, o + 10, o + 12},    {"recv_grad", 3, o + 12, o + 13},
        {"backward", 3, o + 13, o + 15},  {"optim_step", -1, o + 15, o + 15},
    };
    const spec s1[] = {
        {"recv_act", 0, o + 0, o + 1},    {"forward", 0, o + 1, o + 2},       {"backward", 0, o + 2, o + 4},
        {"send_grad", 0, o + 4, o + 4},   {"recv_act", 1, o + 4, o + 4},      {"forward", 1, o + 4, o + 5},
        {"backward", 1, o + 5, o + 7},    {"send_grad", 1, o + 7, o + 7},     {"recv_act", 2, o + 7, o + 7},
        {"forward", 2, o + 7, o + 8},     {"backward", 2, o + 8, o + 10},     {"send_grad", 2, o + 10, o + 10},
        {"recv_act", 3, o + 10, o + 10},  {"forward", 3, o + 10, o + 11},     {"backward", 3, o + 11, o + 13},
        {"send_grad", 3, o + 13, o + 13}, {"optim_step", -1, o + 13, o + 15},
    };
    add(ev, &n, 0, 0, iter, s0, (int)(sizeof s0 / sizeof s0[0]));
    add(ev, &n, 1, 1, iter, s1, (int)(sizeof s1 / sizeof s1[0]));
    return n;
}

START_TEST(test_known_1f1b)
{
    dt_trace_event ev[80];
    size_t n = one_f_one_b(ev, 0, 0, 0);
    n = one_f_one_b(ev, 20, n, 1); /* 5 ms between steps (the step's end, the next start) */
    const double formula = dt_schedule_bubble_formula(2, 4);
    ck_assert_double_eq_tol(formula, 3.0 / 15.0, 1e-15);

    dt_bubble_stats b;
    ck_dt(dt_bubble_stats_events(ev, n, 0, 0, &b));
    ck_assert_int_eq(b.pid, 0);
    ck_assert_int_eq(b.stage, 0);
    ck_assert_int_eq(b.n_steps, 2);
    ck_assert_int_eq(b.n_mean, 2);
    for (int t = 0; t < 2; t++) {
        ck_assert_int_eq(b.steps[t].iter, t);
        ck_assert_int_eq(b.steps[t].start_ns, 20 * t * MS);
        ck_assert_int_eq(b.steps[t].end_ns, (20 * t + 15) * MS);
        ck_assert_int_eq(b.steps[t].busy_ns, 12 * MS);
        ck_assert_int_eq(b.steps[t].fb_ns, 12 * MS);
        ck_assert_int_eq(b.steps[t].n_events, 17);
        ck_assert_int_eq(b.steps[t].n_forward, 4);
        ck_assert_int_eq(b.steps[t].n_backward, 4);
        ck_assert_int_eq(b.steps[t].n_optim, 1);
        ck_assert_double_eq_tol(b.steps[t].bubble, formula, 1e-12);
    }
    ck_assert_double_eq_tol(b.mean, formula, 1e-12);
    ck_assert_double_eq_tol(b.mean_fb, formula, 1e-12);
    ck_assert_double_eq_tol(b.mean_window_ns, 15.0 * MS, 1e-3);
    ck_assert_int_eq(b.n_forward, 8);
    ck_assert_int_eq(b.n_backward, 8);
    ck_assert_int_eq(b.n_optim, 2);
    ck_assert_int_eq(b.forward_ns, 8 * MS);
    ck_assert_int_eq(b.backward_ns, 16 * MS);
    ck_assert_int_eq(b.optim_ns, 0);
    /* over the whole run: 24 ms of forward and backward in 0 .. 35 ms, the 5 ms gap included */
    ck_assert_double_eq_tol(b.run_fb, 1.0 - 24.0 / 35.0, 1e-12);
    ck_assert_double_eq_tol(b.run, 1.0 - 24.0 / 35.0, 1e-12);
    dt_bubble_stats_free(&b);
    ck_assert_ptr_null(b.steps);

    /* stage 1: its optim_step holds the 2 ms wait for stage 0 */
    ck_dt(dt_bubble_stats_events(ev, n, 1, 1, &b));
    ck_assert_int_eq(b.stage, 1);
    ck_assert_int_eq(b.n_steps, 2);
    ck_assert_int_eq(b.n_mean, 1);
    ck_assert_int_eq(b.steps[1].busy_ns, 14 * MS);
    ck_assert_double_eq_tol(b.mean, 1.0 / 15.0, 1e-12);
    ck_assert_double_eq_tol(b.mean_fb, formula, 1e-12);
    ck_assert_int_eq(b.optim_ns, 2 * MS);
    /* step 1 alone (skip 1): 12 ms of forward and backward, 14 busy, in 20 .. 35 ms */
    ck_assert_double_eq_tol(b.run_fb, 1.0 - 12.0 / 15.0, 1e-12);
    ck_assert_double_eq_tol(b.run, 1.0 - 14.0 / 15.0, 1e-12);
    dt_bubble_stats_free(&b);

    /* both ranks in one set of events: pid -1 is ambiguous */
    ck_assert_int_eq(dt_bubble_stats_events(ev, n, -1, 0, &b), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "ranks 0 and 1"));
    ck_assert_ptr_null(b.steps);
}
END_TEST

/* A small step by hand: window 100, forward 20 + backward 30 + optim 10. */
START_TEST(test_mixed_and_shuffled)
{
    dt_trace_event ev[32];
    size_t n = 0;
    const spec st3[] = {{"recv_act", 0, 1000, 1010}, {"forward", 0, 1010, 1030},   {"recv_grad", 0, 1030, 1060},
                        {"backward", 0, 1060, 1090}, {"send_grad", 0, 1090, 1091}, {"optim_step", -1, 1090, 1100}};
    const spec st1[] = {
        {"recv_act", 0, 0, 50}, {"forward", 0, 50, 60}, {"backward", 0, 60, 80}, {"optim_step", -1, 80, 100}};
    add(ev, &n, 3, 2, 3, st3, 6);
    add(ev, &n, 3, 2, 1, st1, 4);
    /* not pipeline instructions: ignored */
    dt_trace_event_init(&ev[n++], DT_TRACE_COMPLETE, "forward", "compute", 3, DT_LANE_COMPUTE, 0, 5000 * MS);
    dt_trace_event_init(&ev[n], DT_TRACE_COUNTER, "loss", "counter", 3, DT_LANE_COMPUTE, 2000 * MS, 0);
    ev[n++].value = 1.5;
    dt_trace_event_init(&ev[n++], DT_TRACE_INSTANT, "forward", "pipeline", 3, DT_LANE_COMPUTE, 0, 0); /* no iter */
    dt_trace_event_init(&ev[n++], DT_TRACE_COMPLETE, "forward", "pipeline", 3, DT_LANE_COMPUTE, 0, 9000 * MS);
    /* reverse the order */
    for (size_t i = 0; i < n / 2; i++) {
        dt_trace_event x = ev[i];
        ev[i] = ev[n - 1 - i];
        ev[n - 1 - i] = x;
    }
    dt_bubble_stats b;
    ck_dt(dt_bubble_stats_events(ev, n, -1, 0, &b));
    ck_assert_int_eq(b.pid, 3);
    ck_assert_int_eq(b.stage, 2);
    ck_assert_int_eq(b.n_steps, 2); /* steps 1 and 3 */
    ck_assert_int_eq(b.steps[0].iter, 1);
    ck_assert_int_eq(b.steps[1].iter, 3);
    ck_assert_double_eq_tol(b.steps[0].bubble, 1.0 - 50.0 / 100.0, 1e-12);
    ck_assert_double_eq_tol(b.steps[0].bubble_fb, 1.0 - 30.0 / 100.0, 1e-12);
    ck_assert_int_eq(b.steps[1].start_ns, 1000 * MS);
    ck_assert_int_eq(b.steps[1].end_ns, 1100 * MS);
    ck_assert_int_eq(b.steps[1].n_events, 6);
    ck_assert_double_eq_tol(b.steps[1].bubble, 1.0 - 60.0 / 100.0, 1e-12);
    ck_assert_double_eq_tol(b.steps[1].bubble_fb, 1.0 - 50.0 / 100.0, 1e-12);
    ck_assert_double_eq_tol(b.mean, (0.5 + 0.4) / 2, 1e-12);
    ck_assert_double_eq_tol(b.mean_fb, (0.7 + 0.5) / 2, 1e-12);
    ck_assert_int_eq(b.forward_ns, 30 * MS);
    ck_assert_int_eq(b.backward_ns, 50 * MS);
    ck_assert_int_eq(b.optim_ns, 30 * MS);
    dt_bubble_stats_free(&b);

    /* skip 2 leaves step 3 only; skip 4 leaves none: NAN means */
    ck_dt(dt_bubble_stats_events(ev, n, 3, 2, &b));
    ck_assert_int_eq(b.n_mean, 1);
    ck_assert_double_eq_tol(b.mean, 0.4, 1e-12);
    ck_assert_int_eq(b.n_forward, 1);
    dt_bubble_stats_free(&b);
    ck_dt(dt_bubble_stats_events(ev, n, 3, 4, &b));
    ck_assert_int_eq(b.n_steps, 2);
    ck_assert_int_eq(b.n_mean, 0);
    ck_assert(isnan(b.mean) && isnan(b.mean_fb) && isnan(b.mean_window_ns));
    ck_assert_int_eq(b.n_forward, 0);
    dt_bubble_stats_free(&b);
}
END_TEST

START_TEST(test_edge_cases)
{
    dt_trace_event ev[16];
    size_t n = 0;
    dt_bubble_stats b;
    /* a zero window: bubble 0 */
    const spec z[] = {{"stash", -1, 5, 5}, {"drop", -1, 5, 5}};
    add(ev, &n, 0, 0, 0, z, 2);
    ck_dt(dt_bubble_stats_events(ev, n, 0, 0, &b));
    ck_assert_int_eq(b.n_steps, 1);
    ck_assert_double_eq(b.steps[0].bubble, 0.0);
    ck_assert_double_eq(b.mean, 0.0);
    dt_bubble_stats_free(&b);

    /* pipedream: step 1's forward runs inside step 0's window and is not
     * counted in step 0's busy time */
    n = 0;
    const spec p0[] = {{"forward", 0, 0, 10}, {"backward", 0, 20, 40}, {"optim_step", -1, 40, 40}};
    const spec p1[] = {{"forward", 1, 10, 20}, {"backward", 1, 40, 60}, {"optim_step", -1, 60, 60}};
    add(ev, &n, 0, 0, 0, p0, 3);
    add(ev, &n, 0, 0, 1, p1, 3);
    ck_dt(dt_bubble_stats_events(ev, n, 0, 0, &b));
    ck_assert_double_eq_tol(b.steps[0].bubble, 1.0 - 30.0 / 40.0, 1e-12);
    ck_assert_int_eq(b.steps[1].start_ns, 10 * MS);
    ck_assert_double_eq_tol(b.steps[1].bubble, 1.0 - 30.0 / 50.0, 1e-12);
    dt_bubble_stats_free(&b);

    /* no "stage" extra: stage -1 */
    n = 0;
    dt_trace_event_init(&ev[n], DT_TRACE_COMPLETE, "forward", "pipeline", 0, DT_LANE_COMPUTE, 0, 10 * MS);
    ev[n++].iter = 0;
    ck_dt(dt_bubble_stats_events(ev, n, -1, 0, &b));
    ck_assert_int_eq(b.stage, -1);
    ck_assert_double_eq(b.mean, 0.0);
    dt_bubble_stats_free(&b);

    /* stages that disagree within a rank */
    n = 0;
    add(ev, &n, 0, 0, 0, p0, 1);
    add(ev, &n, 0, 1, 0, p0 + 1, 1);
    ck_assert_int_eq(dt_bubble_stats_events(ev, n, 0, 0, &b), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "stages 0 and 1"));

    /* nothing to measure */
    ck_assert_int_eq(dt_bubble_stats_events(ev, n, 7, 0, &b), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "no pipeline instructions of rank 7"));
    ck_assert_int_eq(dt_bubble_stats_events(ev, 0, -1, 0, &b), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--pipeline-model-parallel-size"));
    ck_assert_int_eq(dt_bubble_stats_events(ev, n, 0, -1, &b), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "skip -1"));
    ck_assert_int_eq(dt_bubble_stats_events(NULL, 3, 0, 0, &b), DT_ERR_INVALID);
    ck_assert_int_eq(dt_bubble_stats_events(ev, n, 0, 0, NULL), DT_ERR_INVALID);
    ck_assert_int_eq(dt_bubble_stats_trace(NULL, -1, 0, &b), DT_ERR_INVALID);
    dt_bubble_stats_free(NULL);
    dt_bubble_stats_free(&b);
}
END_TEST

/* Written with the trace writer, read back, the same figures. */
START_TEST(test_file_round_trip)
{
    dt_trace_event ev[80];
    size_t n = one_f_one_b(ev, 0, 0, 0);
    n = one_f_one_b(ev, 1000, n, 1);
    char path[] = "/tmp/check_trace_stats.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    dt_trace_writer *w;
    ck_dt(dt_trace_writer_open(path, "dtrain", NULL, &w));
    for (size_t i = 0; i < n; i++)
        if (ev[i].pid == 1) ck_dt(dt_trace_write(w, &ev[i])); /* one rank's file */
    ck_dt(dt_trace_writer_close(w));
    dt_trace *t;
    ck_dt(dt_trace_read(path, &t));
    dt_bubble_stats a, b;
    ck_dt(dt_bubble_stats_trace(t, -1, 1, &a));
    ck_dt(dt_bubble_stats_events(ev, n, 1, 1, &b));
    ck_assert_int_eq(a.stage, 1);
    ck_assert_int_eq(a.n_steps, b.n_steps);
    ck_assert_double_eq(a.mean, b.mean);
    ck_assert_double_eq(a.mean_fb, b.mean_fb);
    ck_assert_double_eq_tol(a.mean_fb, dt_schedule_bubble_formula(2, 4), 1e-12);
    dt_bubble_stats_free(&a);
    dt_bubble_stats_free(&b);
    dt_trace_free(t);
    unlink(path);
}
END_TEST

/* Three steps of 10 ms on rank 0: forward 0-2, backward 2-5, an allreduce
 * step 5-6, the optimizer 6-7 (ms after the step's start); an evaluation
 * after step 1 whose events carry iter 3 (left out), rank 1's events
 * (ignored). skip 1: the period runs from step 0's end to step 2's. */
START_TEST(test_phase_times)
{
    dt_trace_event ev[32];
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        const int64_t o = 10 * i;
        const struct {
            const char *name, *cat;
            int64_t t0, t1;
        } sp[] = {{"forward", "compute", 0, 2},
                  {"backward", "compute", 2, 5},
                  {"allreduce", "comm", 5, 6},
                  {"optimizer", "optim", 6, 7}};
        for (int k = 0; k < 4; k++)
            for (int pid = 0; pid < 2; pid++) {
                dt_trace_event *e = &ev[n++];
                dt_trace_event_init(e, DT_TRACE_COMPLETE, sp[k].name, sp[k].cat, pid, DT_LANE_COMPUTE,
                                    (o + sp[k].t0 + pid) * MS, (sp[k].t1 - sp[k].t0) * MS);
                e->iter = i;
            }
    }
    dt_trace_event_init(&ev[n++], DT_TRACE_COMPLETE, "evaluate", "eval", 0, DT_LANE_COMPUTE, 17 * MS, 2 * MS);
    dt_trace_event_init(&ev[n], DT_TRACE_COMPLETE, "forward", "compute", 0, DT_LANE_COMPUTE, 17 * MS, 1 * MS);
    ev[n++].iter = 3;
    dt_trace_phase_times pt;
    ck_dt(dt_trace_phase_times_events(ev, n, 0, 1, &pt));
    ck_assert_int_eq(pt.steps, 2);
    ck_assert_double_eq_tol(pt.step_ns, 10.0 * MS, 1e-6);
    ck_assert_double_eq_tol(pt.compute_ns, 5.0 * MS, 1e-6);
    ck_assert_double_eq_tol(pt.comm_ns, 1.0 * MS, 1e-6);
    ck_assert_double_eq_tol(pt.optim_ns, 1.0 * MS, 1e-6);
    /* skip 0: three steps from time 0 */
    ck_dt(dt_trace_phase_times_events(ev, n, 0, 0, &pt));
    ck_assert_int_eq(pt.steps, 3);
    ck_assert_double_eq_tol(pt.step_ns, 27.0 * MS / 3, 1e-6);
    /* no events of rank 2; more warm-up steps than steps */
    ck_assert_int_eq(dt_trace_phase_times_events(ev, n, 2, 1, &pt), DT_ERR_INVALID);
    ck_assert_int_eq(dt_trace_phase_times_events(ev, n, 0, 3, &pt), DT_ERR_INVALID);
    dt_clear_error();
}
END_TEST

/* Issue 20, F1: the steps' ends were kept in an array of max_iter + 1 (a
 * value from the file): an iter of 2^62 wrapped its size (a heap overflow),
 * 2^31 - 1 asked for 16 GiB. Now only the two ends needed are kept: sparse
 * steps up to INT64_MAX cost nothing (under ASan a large malloc would fail
 * the test), and a span ending past INT64_MAX does not overflow. */
START_TEST(test_phase_times_huge_iters)
{
    static const int64_t iters[] = {(int64_t)1 << 62, INT_MAX, INT64_MAX};
    for (size_t i = 0; i < sizeof iters / sizeof iters[0]; i++) {
        dt_trace_event ev[3];
        dt_trace_event_init(&ev[0], DT_TRACE_COMPLETE, "forward", "compute", 0, 0, 1 * MS, 1 * MS);
        ev[0].iter = 0;
        dt_trace_event_init(&ev[1], DT_TRACE_COMPLETE, "forward", "compute", 0, 0, 5 * MS, 1 * MS);
        ev[1].iter = iters[i] - 1;
        dt_trace_event_init(&ev[2], DT_TRACE_COMPLETE, "backward", "compute", 0, 0, 8 * MS, INT64_MAX);
        ev[2].iter = iters[i];
        dt_trace_phase_times pt;
        ck_dt(dt_trace_phase_times_events(ev, 3, 0, 1, &pt));
        ck_assert(pt.step_ns > 0);
    }
}
END_TEST

/* A pipeline stage's OPTIM_STEP as the runtime writes it since issue 21
 * (steps of 10 ms): forward 0-2, backward 2-5, then inside OPTIM_STEP the
 * stage's own squares ("grad norm", 5-5.5), the wait for the other stage
 * in "grad norm allreduce" (5.5-9, comm) and the update (optim_step,
 * 9-10). The phases add up to the step: the wait is communication, the
 * optimizer 1.5 ms; the bubble counts the wait as idle (busy 6 of 10). */
START_TEST(test_phase_times_pipeline_sync)
{
    dt_trace_event ev[16];
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        const struct {
            const char *name, *cat;
            int lane;
            double t0, t1;
        } sp[] = {{"forward", "pipeline", DT_LANE_COMPUTE, 0, 2},
                  {"backward", "pipeline", DT_LANE_COMPUTE, 2, 5},
                  {"grad norm", "optim", DT_LANE_OPTIM, 5, 5.5},
                  {"grad norm allreduce", "comm", DT_LANE_COMM, 5.5, 9},
                  {"optim_step", "pipeline", DT_LANE_OPTIM, 9, 10}};
        for (int k = 0; k < 5; k++) {
            dt_trace_event *e = &ev[n++];
            dt_trace_event_init(e, DT_TRACE_COMPLETE, sp[k].name, sp[k].cat, 1, sp[k].lane,
                                (int64_t)((10 * i + sp[k].t0) * MS), (int64_t)((sp[k].t1 - sp[k].t0) * MS));
            e->iter = i;
            ck_dt(dt_trace_event_add_arg(e, "stage", 1));
        }
    }
    dt_trace_phase_times pt;
    ck_dt(dt_trace_phase_times_events(ev, n, 1, 1, &pt));
    ck_assert_double_eq_tol(pt.step_ns, 10.0 * MS, 1e-6);
    ck_assert_double_eq_tol(pt.compute_ns, 5.0 * MS, 1e-6);
    ck_assert_double_eq_tol(pt.comm_ns, 3.5 * MS, 1e-6);
    ck_assert_double_eq_tol(pt.optim_ns, 1.5 * MS, 1e-6);
    ck_assert_double_eq_tol(pt.compute_ns + pt.comm_ns + pt.optim_ns, pt.step_ns, 1e-6);
    dt_bubble_stats b;
    ck_dt(dt_bubble_stats_events(ev, n, 1, 1, &b));
    ck_assert_int_eq(b.n_optim, 2);
    ck_assert_double_eq_tol(b.mean, 0.4, 1e-9);    /* 1 - (2 + 3 + 1) / 10 */
    ck_assert_double_eq_tol(b.mean_fb, 0.5, 1e-9); /* 1 - (2 + 3) / 10 */
    dt_bubble_stats_free(&b);
}
END_TEST

/* Zero-bubble schedules (issue 22): a split backward's backward_b and
 * backward_w spans are both work, and a micro-batch's W is counted with its
 * B: steps of 10 ms with forward 0-2, backward_b 2-4, a gap, backward_w
 * 5-6, optim_step 6-7: busy 6, forward and backward 5, one backward. */
START_TEST(test_split_backward_is_work)
{
    dt_trace_event ev[16];
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        const struct {
            const char *name;
            int lane;
            double t0, t1;
        } sp[] = {{"forward", DT_LANE_COMPUTE, 0, 2},
                  {"backward_b", DT_LANE_COMPUTE, 2, 4},
                  {"backward_w", DT_LANE_COMPUTE, 5, 6},
                  {"optim_step", DT_LANE_OPTIM, 6, 10}};
        for (int k = 0; k < 4; k++) {
            dt_trace_event *e = &ev[n++];
            dt_trace_event_init(e, DT_TRACE_COMPLETE, sp[k].name, "pipeline", 0, sp[k].lane,
                                (int64_t)((10 * i + sp[k].t0) * MS), (int64_t)((sp[k].t1 - sp[k].t0) * MS));
            e->iter = i;
            if (k < 3) e->micro_batch = i;
            ck_dt(dt_trace_event_add_arg(e, "stage", 0));
        }
    }
    dt_bubble_stats b;
    ck_dt(dt_bubble_stats_events(ev, n, 0, 1, &b));
    ck_assert_int_eq((int)b.n_forward, 2);
    ck_assert_int_eq((int)b.n_backward, 2);
    ck_assert_int_eq((int)b.backward_ns, (int)(6 * MS));
    ck_assert_double_eq_tol(b.mean_fb, 0.5, 1e-9); /* 1 - (2 + 2 + 1) / 10 */
    ck_assert_double_eq_tol(b.mean, 0.1, 1e-9);    /* 1 - (5 + 4) / 10 */
    dt_bubble_stats_free(&b);
    dt_trace_phase_times pt;
    ck_dt(dt_trace_phase_times_events(ev, n, 0, 1, &pt));
    ck_assert_double_eq_tol(pt.compute_ns, 5.0 * MS, 1e-6);
}
END_TEST

static Suite *trace_stats_suite(void)
{
    Suite *s = suite_create("trace_stats");
    TCase *tc = tcase_create("bubble");
    tcase_add_test(tc, test_known_1f1b);
    tcase_add_test(tc, test_mixed_and_shuffled);
    tcase_add_test(tc, test_edge_cases);
    tcase_add_test(tc, test_file_round_trip);
    tcase_add_test(tc, test_split_backward_is_work);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("phase_times");
    tcase_add_test(tp, test_phase_times);
    tcase_add_test(tp, test_phase_times_pipeline_sync);
    tcase_add_test(tp, test_phase_times_huge_iters);
    suite_add_tcase(s, tp);
    return s;
}

int main(void) { return dt_test_run(trace_stats_suite()); }
