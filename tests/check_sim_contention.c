/* check_sim_contention.c: ranks sharing a node's compute (the hardware's
 * "contention" list, dts_hw_compute_rate, the executor's shared cores and
 * dts_fit_contention).
 *
 * Costs are fixed integers (ns) and the links free, so the expected step
 * times are exact up to one nanosecond of rounding per operation. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dt_trace.h"
#include "dts_fit.h"
#include "dts_hw.h"
#include "dts_run.h"
#include "dts_scenario.h"
#include "simtest.h"
#include "testutil.h"

/* ---- the hardware key ----------------------------------------------------- */

static json_t *hw_json_with(const char *contention_json)
{
    dts_hw hw;
    dts_hw_default(&hw);
    json_t *o = dts_hw_to_json(&hw);
    ck_assert_ptr_nonnull(o);
    if (contention_json) {
        json_error_t err;
        json_t *v = json_loads(contention_json, JSON_DECODE_ANY, &err);
        ck_assert_msg(v != NULL, "test JSON %s: %s", contention_json, err.text);
        ck_assert_int_eq(json_object_set_new(o, "contention", v), 0);
    }
    return o;
}

START_TEST(test_hw_contention_key)
{
    /* absent: [1], processor sharing alone; not written back */
    json_t *o = hw_json_with(NULL);
    dts_hw hw;
    ck_assert_int_eq(dts_hw_from_json(o, "t.json", &hw), DT_OK);
    ck_assert_int_eq(hw.n_contention, 1);
    ck_assert(hw.contention[0] == 1.0);
    json_decref(o);
    /* a measured list reads, saves and loads back bit for bit */
    o = hw_json_with("[1, 1.0625, 2.1, 3.3]");
    ck_assert_int_eq(dts_hw_from_json(o, "t.json", &hw), DT_OK);
    json_decref(o);
    ck_assert_int_eq(hw.n_contention, 4);
    ck_assert(hw.contention[1] == 1.0625 && hw.contention[3] == 3.3);
    char path[] = "/tmp/dt_check_contention_XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_msg(dts_hw_save(path, &hw) == DT_OK, "%s", dt_last_error());
    dts_hw back;
    ck_assert_msg(dts_hw_load(path, &back) == DT_OK, "%s", dt_last_error());
    ck_assert(dts_hw_equal(&hw, &back));
    unlink(path);
    /* refused, each naming the key */
    static const char *const bad[] = {"[]",  "[2]",        "[1, 0.5]",   "[1, \"x\"]",
                                      "1.2", "[1, 1e300]", "{\"k\": 1}", "[1, null]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o = hw_json_with(bad[i]);
        ck_assert_msg(dts_hw_from_json(o, "t.json", &hw) == DT_ERR_FORMAT, "contention %s accepted", bad[i]);
        ck_assert_msg(strstr(dt_last_error(), "t.json") && strstr(dt_last_error(), "contention"),
                      "contention %s: message %s", bad[i], dt_last_error());
        json_decref(o);
    }
    /* 65 entries: one too many */
    char many[1024] = "[1";
    for (int i = 1; i < DTS_HW_MAX_CONTENTION + 1; i++) strcat(many, ", 1.5");
    strcat(many, "]");
    o = hw_json_with(many);
    ck_assert_int_eq(dts_hw_from_json(o, "t.json", &hw), DT_ERR_FORMAT);
    json_decref(o);
}
END_TEST

START_TEST(test_compute_rate)
{
    /* processor sharing of k computing among n ranks on c cores, against hand counts */
    ck_assert(dts_hw_share(1, 1, 1) == 1.0);
    ck_assert(dts_hw_share(2, 2, 2) == 1.0);                    /* a core each */
    ck_assert(fabs(dts_hw_share(2, 2, 1) - 0.5) < 1e-12);       /* both on the one core */
    ck_assert(fabs(dts_hw_share(1, 2, 1) - 1.0) < 1e-12);       /* the other one waits: yields at once */
    ck_assert(fabs(dts_hw_share(4, 4, 2) - 0.5) < 1e-12);       /* two computing on each core */
    ck_assert(fabs(dts_hw_share(3, 4, 2) - 2.0 / 3.0) < 1e-12); /* beside 1 of 3 others, 2 computing */
    ck_assert(fabs(dts_hw_share(2, 4, 2) - 5.0 / 6.0) < 1e-12); /* 1/3 shared (1/2), 2/3 alone (1) */
    ck_assert(fabs(dts_hw_share(1, 4, 2) - 1.0) < 1e-12);
    /* 8 ranks on 2 cores, all computing: 4 per core */
    ck_assert(fabs(dts_hw_share(8, 8, 2) - 0.25) < 1e-12);
    /* the probabilities sum to 1: with everyone computing the expectation is exact */
    for (int n = 2; n <= 12; n++)
        for (int c = 1; c < n; c++)
            if (n % c == 0) ck_assert_msg(fabs(dts_hw_share(n, n, c) - (double)c / n) < 1e-12, "n %d c %d", n, c);
    dts_hw hw;
    dts_hw_default(&hw);
    /* no shared cores: always full speed */
    ck_assert(dts_hw_compute_rate(&hw, 5, 8) == 1.0);
    hw.cores_per_node = 2;
    /* unmeasured: processor sharing alone */
    ck_assert(dts_hw_compute_rate(&hw, 2, 2) == 1.0);
    ck_assert(fabs(dts_hw_compute_rate(&hw, 4, 4) - 0.5) < 1e-12);
    ck_assert(fabs(dts_hw_compute_rate(&hw, 2, 4) - 5.0 / 6.0) < 1e-12);
    ck_assert(dts_hw_compute_rate(&hw, 0, 4) == 1.0);
    /* measured 1.25 for 2 (a core each: all cache and bandwidth), 2.2 for 4 (1.1 once the halving is out) */
    hw.contention[1] = 1.25;
    hw.contention[2] = 1.8;
    hw.contention[3] = 2.2;
    hw.n_contention = 4;
    ck_assert(fabs(dts_hw_compute_rate(&hw, 2, 2) - 0.8) < 1e-12);
    ck_assert(fabs(dts_hw_compute_rate(&hw, 4, 4) - 1 / 2.2) < 1e-12); /* as measured */
    ck_assert(fabs(dts_hw_compute_rate(&hw, 2, 4) - 5.0 / 6.0 / 1.25) < 1e-12);
    /* beyond the list: its last entry's cache part, 1.1, and the sharing of 8 on 2 */
    ck_assert(fabs(dts_hw_compute_rate(&hw, 8, 8) - 0.25 / 1.1) < 1e-12);
    /* a measured slowdown below the sharing it held counts as no cache cost */
    hw.contention[3] = 1.5;
    ck_assert(fabs(dts_hw_compute_rate(&hw, 4, 4) - 0.5) < 1e-12);
}
END_TEST

/* ---- the executor ---------------------------------------------------------- */

/* Two data-parallel ranks that always compute together on 2 cores run at 1/1.25 of their speed:
 * the step is 1.25 x the one with a core of their own (the links are free). The same for a
 * tensor-parallel pair (t = 2: one unit of two ranks) and for a t = 2 pipeline of two stages
 * sharing one node. */
/* rank 0's step (compute only: its compute time) of a 2-block run on 2 devices of one node, d = 2 or
 * t = 2, with a core each (shared 0) or 2 shared cores whose 2 ranks computing at once run 1.25 x slower */
static double two_rank_time(int t, int shared, int compute_only)
{
    dts_scenario sc;
    dts_summary s;
    dt_test_fixed_scenario(&sc, 2, 1, 2, 3, DT_SCHED_1F1B, 1000, 2000);
    if (t > 1) sc.t = t;
    else sc.d = 2;
    sc.hw.devices_per_node = 2;
    if (shared) {
        sc.hw.cores_per_node = 2;
        sc.hw.contention[1] = 1.25;
        sc.hw.n_contention = 2;
    }
    ck_assert_msg(dts_run(&sc, NULL, &s) == DT_OK, "%s", dt_last_error());
    const double v = compute_only ? s.rank0.compute_ns : s.step_ns;
    dts_summary_free(&s);
    return v;
}

START_TEST(test_executor_contention)
{
    const double alone = two_rank_time(1, 0, 0), shared = two_rank_time(1, 1, 0);
    ck_assert_msg(fabs(shared - 1.25 * alone) <= 10, "d = 2 sharing: %.0f ns, alone %.0f ns", shared, alone);
    /* t = 2: the pair computes together: 1.25 x as well */
    const double t_alone = two_rank_time(2, 0, 1), t_shared = two_rank_time(2, 1, 1);
    ck_assert_msg(fabs(t_shared - 1.25 * t_alone) <= 10, "t = 2 sharing: compute %.0f ns, alone %.0f ns", t_shared,
                  t_alone);
    dts_scenario sc;
    dts_summary s;
    /* t = 2 with more devices per node than ranks of a group divides; 3 does not */
    dt_test_fixed_scenario(&sc, 2, 1, 2, 3, DT_SCHED_1F1B, 1000, 2000);
    sc.t = 2;
    sc.hw.devices_per_node = 3;
    sc.hw.cores_per_node = 2;
    ck_assert_int_eq(dts_run(&sc, NULL, &s), DT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(dt_last_error(), "multiple"), "%s", dt_last_error());
}
END_TEST

/* ---- the fit ------------------------------------------------------------------ */

/* a trace of one rank: `iters` steps of one forward (fwd ns) and one backward (2 fwd ns) each */
static void make_trace(dt_trace *t, dt_trace_event *ev, int iters, int64_t fwd, const char *config)
{
    int64_t ts = 0;
    size_t n = 0;
    for (int i = 0; i < iters; i++) {
        dt_trace_event_init(&ev[n], DT_TRACE_COMPLETE, "forward", "compute", 0, 0, ts, fwd);
        ev[n].iter = i;
        ev[n++].layer = 0;
        ts += fwd;
        dt_trace_event_init(&ev[n], DT_TRACE_COMPLETE, "backward", "compute", 0, 0, ts, 2 * fwd);
        ev[n].iter = i;
        ev[n++].layer = 0;
        ts += 2 * fwd + 100;
    }
    memset(t, 0, sizeof *t);
    t->version = 1;
    t->events = ev;
    t->n_events = n;
    t->config_json = (char *)config;
}

START_TEST(test_fit_contention)
{
    dt_trace_event ev[3][40];
    dt_trace solo, a, b;
    const char *cfg = "{\"hidden_size\":96,\"trace\":\"solo.json\"}";
    make_trace(&solo, ev[0], 10, 1000, cfg);
    make_trace(&a, ev[1], 10, 1200, "{\"hidden_size\":96,\"trace\":\"a.json\"}");
    make_trace(&b, ev[2], 10, 1300, "{\"hidden_size\":96,\"trace\":\"b.json\"}");
    const dt_trace *co[2] = {&a, &b};
    const char *names[2] = {"a.json", "b.json"};
    double slow = 0, spread = 0;
    ck_assert_msg(dts_fit_contention(&solo, "solo.json", co, names, 2, 1, &slow, &spread) == DT_OK, "%s",
                  dt_last_error());
    ck_assert_msg(fabs(slow - 1.25) < 1e-12 && fabs(spread - 0.1) < 1e-12, "slowdown %g spread %g", slow, spread);
    /* another configuration is refused, naming its file */
    make_trace(&b, ev[2], 10, 1300, "{\"hidden_size\":128,\"trace\":\"b.json\"}");
    ck_assert_int_eq(dts_fit_contention(&solo, "solo.json", co, names, 2, 1, &slow, &spread), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "b.json") && strstr(dt_last_error(), "configuration"), "%s", dt_last_error());
    /* no config at all */
    make_trace(&b, ev[2], 10, 1300, NULL);
    ck_assert_int_eq(dts_fit_contention(&solo, "solo.json", co, names, 2, 1, &slow, &spread), DT_ERR_INVALID);
}
END_TEST

static Suite *contention_suite(void)
{
    Suite *s = suite_create("sim_contention");
    TCase *tc = tcase_create("contention");
    tcase_add_test(tc, test_hw_contention_key);
    tcase_add_test(tc, test_compute_rate);
    tcase_add_test(tc, test_executor_contention);
    tcase_add_test(tc, test_fit_contention);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(contention_suite()); }
