/* check_trace_breakdown.c: a rank's step time by category
 * (dt_trace_breakdown.h) on hand-made events with known answers, in exact
 * nanoseconds:
 *   - a data-parallel rank: gradient buckets allreduced during the
 *     backward (overlapped), the rest after it (exposed), an all-gather
 *     inside the optimizer (overlapped), a recomputation nested in a
 *     backward (counted once), a gap before the forward (idle), an
 *     evaluation after the last step (not a step);
 *   - two 1f1b pipeline stages (p = 2, m = 4, forward 1, backward 2): the
 *     receives are waiting, the stages' grad norm allreduce exposed
 *     communication, and window - busy of dt_bubble_stats is waiting plus
 *     that allreduce plus the grad norm, step by step;
 *   - every rank at once (dt_breakdown_all) on the shuffled events of both
 *     stages and a rank with metadata only; skip 0; the step time equals
 *     dt_trace_phase_times_events'; errors, and steps out of time order. */
#include <string.h>

#include "testutil.h"

#define U 1000 /* the hand-made traces count in microseconds */

static dt_trace_event *span(dt_trace_event *ev, size_t *n, const char *name, const char *cat, int pid, int tid,
                            int64_t t0, int64_t t1, int64_t iter)
{
    dt_trace_event *e = &ev[(*n)++];
    dt_trace_event_init(e, DT_TRACE_COMPLETE, name, cat, pid, tid, t0 * U, (t1 - t0) * U);
    e->iter = iter;
    return e;
}

/* One data-parallel step of pid from time o (units of U). */
static void dp_step(dt_trace_event *ev, size_t *n, int pid, int64_t o, int64_t iter)
{
    span(ev, n, "forward", "compute", pid, DT_LANE_COMPUTE, o + 5, o + 15, iter);
    span(ev, n, "backward", "compute", pid, DT_LANE_COMPUTE, o + 15, o + 35, iter);
    span(ev, n, "recompute", "compute", pid, DT_LANE_COMPUTE, o + 17, o + 21, iter); /* nested in the backward */
    dt_trace_event *b = &ev[(*n)++];
    dt_trace_event_init(b, DT_TRACE_INSTANT, "bucket launch", "comm", pid, DT_LANE_COMM, (o + 25) * U, 0);
    b->iter = iter;
    span(ev, n, "reduce-scatter", "comm", pid, DT_LANE_COMM, o + 25, o + 40, iter); /* 10 under the backward */
    span(ev, n, "all-gather", "comm", pid, DT_LANE_COMM, o + 40, o + 43, iter);
    span(ev, n, "optimizer", "optim", pid, DT_LANE_OPTIM, o + 43, o + 55, iter);
    span(ev, n, "all-gather", "comm", pid, DT_LANE_COMM, o + 50, o + 53, iter); /* inside the optimizer */
    dt_trace_event *c = &ev[(*n)++];
    dt_trace_event_init(c, DT_TRACE_COUNTER, "loss", "counter", pid, DT_LANE_COMPUTE, (o + 55) * U, 0);
    c->value = 3.0;
}

START_TEST(test_data_parallel)
{
    dt_trace_event ev[64];
    size_t n = 0;
    dp_step(ev, &n, 0, 0, 0);  /* warm-up: ends at 55 */
    dp_step(ev, &n, 0, 55, 1); /* [55, 110) */
    dp_step(ev, &n, 0, 110, 2);
    dp_step(ev, &n, 1, 3, 1); /* another rank */
    span(ev, &n, "evaluate", "compute", 0, DT_LANE_COMPUTE, 170, 200, 3);
    span(ev, &n, "forward", "compute", 0, DT_LANE_COMPUTE, 171, 180, 3); /* inside the evaluation */
    dt_breakdown b;
    ck_dt(dt_breakdown_events(ev, n, 0, 1, &b));
    ck_assert_int_eq(b.pid, 0);
    ck_assert_int_eq(b.first_iter, 1);
    ck_assert_int_eq(b.last_iter, 2);
    ck_assert_int_eq(b.steps, 2);
    ck_assert_int_eq(b.start_ns, 55 * U);
    ck_assert_int_eq(b.end_ns, 165 * U);
    /* per step: compute [5, 35) = 30; optimizer [43, 55) = 12; comm exposed
     * [35, 43) = 8; idle [0, 5) = 5; overlapped [25, 35) + [50, 53) = 13 */
    ck_assert_int_eq(b.cat_ns[DT_BREAKDOWN_COMPUTE], 2 * 30 * U);
    ck_assert_int_eq(b.cat_ns[DT_BREAKDOWN_OPTIM], 2 * 12 * U);
    ck_assert_int_eq(b.cat_ns[DT_BREAKDOWN_COMM_EXPOSED], 2 * 8 * U);
    ck_assert_int_eq(b.cat_ns[DT_BREAKDOWN_WAITING], 0);
    ck_assert_int_eq(b.cat_ns[DT_BREAKDOWN_IDLE], 2 * 5 * U);
    ck_assert_int_eq(b.comm_overlapped_ns, 2 * 13 * U);
    ck_assert(b.step_ns == 55.0 * U);
    ck_assert(dt_breakdown_per_step(&b, DT_BREAKDOWN_COMPUTE) == 30.0 * U);
    ck_assert_int_eq(b.pipeline, 0);
    ck_assert(isnan(b.bubble) && isnan(b.bubble_ns));
    dt_trace_phase_times pt;
    ck_dt(dt_trace_phase_times_events(ev, n, 0, 1, &pt));
    ck_assert(pt.step_ns == b.step_ns);
    /* skip 0: the range starts at 0, so the first step's gap is idle too */
    ck_dt(dt_breakdown_events(ev, n, 0, 0, &b));
    ck_assert_int_eq(b.steps, 3);
    ck_assert_int_eq(b.start_ns, 0);
    ck_assert_int_eq(b.cat_ns[DT_BREAKDOWN_IDLE], 3 * 5 * U);
    ck_assert_int_eq(b.comm_overlapped_ns, 3 * 13 * U);
}
END_TEST

typedef struct ispec {
    const char *name;
    int64_t t0, t1;
} ispec;

/* One 1f1b step of both stages from time o: p = 2, m = 4, forward 1,
 * backward 2; then grad norm (1), the stages' grad norm allreduce (stage 0
 * 1, stage 1 3: it waits for stage 0's last backward) and optim_step (1).
 * A window of 18 on both stages. */
static void pipe_step(dt_trace_event *ev, size_t *n, int64_t o, int64_t iter)
{
    static const ispec s0[] = {
        {"forward", 0, 1},      {"send_act", 1, 1},    {"forward", 1, 2},
        {"send_act", 2, 2},     {"recv_grad", 2, 4},   {"backward", 4, 6},
        {"forward", 6, 7},      {"send_act", 7, 7},    {"recv_grad", 7, 7},
        {"backward", 7, 9},     {"forward", 9, 10},    {"send_act", 10, 10},
        {"recv_grad", 10, 10},  {"backward", 10, 12},  {"recv_grad", 12, 13},
        {"backward", 13, 15},   {"grad norm", 15, 16}, {"grad norm allreduce", 16, 17},
        {"optim_step", 17, 18},
    };
    static const ispec s1[] = {
        {"recv_act", 0, 1},     {"forward", 1, 2},     {"backward", 2, 4},
        {"send_grad", 4, 4},    {"recv_act", 4, 4},    {"forward", 4, 5},
        {"backward", 5, 7},     {"send_grad", 7, 7},   {"recv_act", 7, 7},
        {"forward", 7, 8},      {"backward", 8, 10},   {"send_grad", 10, 10},
        {"recv_act", 10, 10},   {"forward", 10, 11},   {"backward", 11, 13},
        {"send_grad", 13, 13},  {"grad norm", 13, 14}, {"grad norm allreduce", 14, 17},
        {"optim_step", 17, 18},
    };
    for (int st = 0; st < 2; st++) {
        const ispec *s = st == 0 ? s0 : s1;
        for (int i = 0; i < 19; i++) {
            const char *nm = s[i].name;
            const int fb = !strcmp(nm, "forward") || !strcmp(nm, "backward");
            const char *cat = !strcmp(nm, "grad norm")             ? "optim"
                              : !strcmp(nm, "grad norm allreduce") ? "comm"
                                                                   : "pipeline";
            const int optim = !strcmp(nm, "grad norm") || !strcmp(nm, "optim_step");
            const int lane = fb ? DT_LANE_COMPUTE : optim ? DT_LANE_OPTIM : DT_LANE_COMM;
            dt_trace_event *e = span(ev, n, nm, cat, st, lane, o + s[i].t0, o + s[i].t1, iter);
            ck_dt(dt_trace_event_add_arg(e, "stage", st));
        }
    }
    /* stage 1 recomputes inside its last backward (own cat, nested) */
    dt_trace_event *r = span(ev, n, "recompute", "stage", 1, DT_LANE_COMPUTE, o + 11, o + 12, iter);
    ck_dt(dt_trace_event_add_arg(r, "stage", 1));
}

static size_t pipe_trace(dt_trace_event *ev)
{
    size_t n = 0;
    pipe_step(ev, &n, 0, 0);  /* ends at 18 */
    pipe_step(ev, &n, 20, 1); /* 2 of idle (data loading) before it: [18, 38) */
    pipe_step(ev, &n, 40, 2); /* [38, 58) */
    dt_trace_event *m = &ev[n++];
    dt_trace_event_init(m, DT_TRACE_METADATA, "process_name", "meta", 5, DT_LANE_COMPUTE, 0, 0);
    strcpy(m->label, "dtrain rank 5");
    return n;
}

/* Per step and stage: compute 4 x 1 + 4 x 2 = 12; optimizer grad norm 1 +
 * optim_step 1 = 2; comm exposed the allreduce (1 or 3); waiting the rest
 * of the window of 18 (the receives: 3 or 1); idle 2. */
static void check_stage(const dt_breakdown *b, int stage)
{
    const int64_t comm = stage == 0 ? 1 : 3, wait = 18 - 12 - 2 - comm;
    ck_assert_int_eq(b->pid, stage);
    ck_assert_int_eq(b->steps, 2);
    ck_assert_int_eq(b->start_ns, 18 * U);
    ck_assert_int_eq(b->end_ns, 58 * U);
    ck_assert_int_eq(b->cat_ns[DT_BREAKDOWN_COMPUTE], 2 * 12 * U);
    ck_assert_int_eq(b->cat_ns[DT_BREAKDOWN_OPTIM], 2 * 2 * U);
    ck_assert_int_eq(b->cat_ns[DT_BREAKDOWN_COMM_EXPOSED], 2 * comm * U);
    ck_assert_int_eq(b->cat_ns[DT_BREAKDOWN_WAITING], 2 * wait * U);
    ck_assert_int_eq(b->cat_ns[DT_BREAKDOWN_IDLE], 2 * 2 * U);
    ck_assert_int_eq(b->comm_overlapped_ns, 0);
    int64_t sum = 0;
    for (int c = 0; c < DT_BREAKDOWN_N_CATS; c++) sum += b->cat_ns[c];
    ck_assert_int_eq(sum, b->end_ns - b->start_ns);
    /* the bubble: window 18 - busy (forward, backward, optim_step) 13 = 5
     * = waiting + the allreduce + the grad norm */
    ck_assert_int_eq(b->pipeline, 1);
    ck_assert(b->bubble_ns == 5.0 * U);
    ck_assert(b->bubble_ns == (double)(b->cat_ns[DT_BREAKDOWN_WAITING] / 2 + comm * U + 1 * U));
    ck_assert(dt_test_close(b->bubble, 5.0 / 18.0, 1e-12, 0));
}

START_TEST(test_pipeline)
{
    dt_trace_event ev[160];
    const size_t n = pipe_trace(ev);
    dt_breakdown b;
    for (int st = 0; st < 2; st++) {
        ck_dt(dt_breakdown_events(ev, n, st, 1, &b));
        check_stage(&b, st);
        dt_bubble_stats bs;
        ck_dt(dt_bubble_stats_events(ev, n, st, 1, &bs));
        ck_assert(bs.mean == b.bubble); /* `dtbench bubbles`' figure */
        dt_bubble_stats_free(&bs);
    }
}
END_TEST

START_TEST(test_all_ranks)
{
    dt_trace_event ev[160], sh[160];
    const size_t n = pipe_trace(ev);
    /* shuffled: each rank's events in another order, the ranks interleaved */
    for (size_t i = 0; i < n; i++) sh[i] = ev[(i * 37) % n];
    ck_assert_int_eq(n % 37 != 0, 1);
    dt_breakdown *all = NULL;
    int n_all = 0;
    ck_dt(dt_breakdown_all(sh, n, 1, &all, &n_all));
    ck_assert_int_eq(n_all, 2); /* rank 5 has no steps: left out */
    check_stage(&all[0], 0);
    check_stage(&all[1], 1);
    free(all);
    /* one rank's file */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (ev[i].pid == 1) sh[k++] = ev[i];
    ck_dt(dt_breakdown_all(sh, k, 1, &all, &n_all));
    ck_assert_int_eq(n_all, 1);
    check_stage(&all[0], 1);
    free(all);
}
END_TEST

START_TEST(test_errors)
{
    dt_trace_event ev[160];
    const size_t n = pipe_trace(ev);
    dt_breakdown b, *all = (dt_breakdown *)1;
    int n_all = 7;
    ck_assert_int_eq(dt_breakdown_events(ev, n, 0, 3, &b), DT_ERR_INVALID); /* 3 steps: skip 3 leaves none */
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "rank 0 has 3 steps"));
    ck_assert_int_eq(dt_breakdown_events(ev, n, 4, 1, &b), DT_ERR_INVALID); /* no such rank */
    ck_assert_int_eq(dt_breakdown_events(ev, n, 0, -1, &b), DT_ERR_INVALID);
    ck_assert_int_eq(dt_breakdown_events(NULL, 3, 0, 1, &b), DT_ERR_INVALID);
    ck_assert_int_eq(dt_breakdown_events(ev, n, 0, 1, NULL), DT_ERR_INVALID);
    ck_assert_int_eq(dt_breakdown_all(ev, n, 3, &all, &n_all), DT_ERR_INVALID);
    ck_assert_ptr_null(all);
    ck_assert_int_eq(n_all, 0);
    ck_assert_int_eq(dt_breakdown_all(ev + n - 1, 1, 0, &all, &n_all), DT_ERR_INVALID); /* metadata only */
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "no rank"));
    ck_assert_int_eq(dt_breakdown_all(ev, 0, 0, &all, &n_all), DT_ERR_INVALID);
    /* two stages named by one rank's instructions */
    ev[0].extra[0].value = 1;
    ck_assert_int_eq(dt_breakdown_events(ev, n, 0, 1, &b), DT_ERR_INVALID);
    ck_assert_str_eq(dt_breakdown_cat_name(DT_BREAKDOWN_COMM_EXPOSED), "comm exposed");
    ck_assert_str_eq(dt_breakdown_cat_name(DT_BREAKDOWN_N_CATS), "?");
    ck_assert(isnan(dt_breakdown_per_step(NULL, DT_BREAKDOWN_IDLE)));
}
END_TEST

/* issue 34 D7: steps out of time order (iterations swapped; a span of step 0 to the largest time) are
 * refused, naming the rank, the steps and their ends, not averaged into a negative step time */
START_TEST(test_steps_out_of_order)
{
    dt_trace_event ev[64];
    size_t n = 0;
    dp_step(ev, &n, 0, 0, 1); /* iteration 1 first, then 0: swapped */
    dp_step(ev, &n, 0, 60, 0);
    dt_breakdown b;
    dt_trace_phase_times pt;
    ck_assert_int_eq(dt_breakdown_events(ev, n, 0, 1, &b), DT_ERR_FORMAT);
    ck_assert_msg(strstr(dt_last_error(), "rank 0: step 1 ends at 55000 ns, before step 0") &&
                      strstr(dt_last_error(), "ends at 115000 ns"),
                  "%s", dt_last_error());
    ck_assert_int_eq(dt_trace_phase_times_events(ev, n, 0, 1, &pt), DT_ERR_FORMAT);
    ck_assert_int_eq(dt_breakdown_events(ev, n, 0, 0, &b), DT_OK); /* skip 0: from time 0, no order needed */
    ck_assert(b.step_ns > 0);
    n = 0;
    dp_step(ev, &n, 0, 0, 0);
    dp_step(ev, &n, 0, 60, 1);
    ev[0].ts_ns = INT64_MAX - 1; /* step 0's forward ends at the largest time */
    ev[0].dur_ns = 1;
    ck_assert_int_eq(dt_breakdown_events(ev, n, 0, 1, &b), DT_ERR_FORMAT);
    ck_assert_msg(strstr(dt_last_error(), "ends at 9223372036854775807 ns"), "%s", dt_last_error());
}
END_TEST

static Suite *trace_breakdown_suite(void)
{
    Suite *s = suite_create("trace_breakdown");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_data_parallel);
    tcase_add_test(tc, test_pipeline);
    tcase_add_test(tc, test_all_ranks);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_steps_out_of_order);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(trace_breakdown_suite()); }
