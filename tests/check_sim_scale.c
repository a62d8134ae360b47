/* check_sim_scale.c: what the simulator models for large jobs.
 *
 *   - the event estimate (sim/estimate.c) against the events real runs
 *     create (dts_summary.events), within a factor of 3, over data
 *     parallelism (ring with chunks, tree, ZeRO-1 and -3), pipelines with
 *     tensor parallelism, zb-v, a parameter server, shared cores and
 *     analytic collectives;
 *   - the vocabulary split: the embedding's and head's compute, parameters
 *     and the head's logits fall by t on each tensor rank (with the split
 *     uneven where t does not divide V), priced by hand against the same
 *     run with --no-vocab-parallel;
 *   - scattered pipeline sends: 1/t of the message on the link plus the
 *     receiving group's all-gather, against whole sends, by hand;
 *   - the memory capacity: ranks whose predicted peak exceeds it;
 *   - the stages' compute (the imbalance the summary reports). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dts_hw.h"
#include "dts_run.h"
#include "dts_scenario.h"
#include "testutil.h"

static dts_scenario *scenario(const char *hw)
{
    dts_scenario *sc = malloc(sizeof *sc);
    ck_assert_ptr_nonnull(sc);
    dts_scenario_default(sc);
    if (hw) {
        char path[1024];
        snprintf(path, sizeof path, "%s/sim/hw/%s", DT_SRCDIR, hw);
        ck_dt(dts_hw_load(path, &sc->hw));
    }
    sc->B = 4;
    sc->steps = 2;
    return sc;
}

static void exchange(dts_scenario *sc, dts_exchange ex, const char *name)
{
    sc->exchange = ex;
    snprintf(sc->exchange_name, sizeof sc->exchange_name, "%s", name);
}

/* The estimate within a factor of 3 of the run's own count. */
static void check_estimate(dts_scenario *sc, const char *what)
{
    ck_dt(dts_scenario_set_cost(sc, NULL));
    const double est = dts_run_events_estimate(sc);
    dts_summary s;
    ck_dt(dts_run(sc, NULL, &s));
    const double real = (double)s.events;
    fprintf(stderr, "estimate %-24s %12.0f events, run %12.0f (x%.2f)\n", what, est, real, est / real);
    ck_assert_msg(real > 0 && est >= real / 3 && est <= real * 3, "%s: estimated %.0f events, the run made %.0f", what,
                  est, real);
    dts_summary_free(&s);
}

START_TEST(test_estimate)
{
    dts_scenario *sc = scenario("h100-ib.json");
    sc->d = 8, sc->m = 2, sc->chunk_bytes = 4096; /* a ring of 8 in many chunks */
    check_estimate(sc, "ring d 8 chunks");
    sc->d = 6;
    exchange(sc, DTS_EX_TREE, "tree");
    check_estimate(sc, "tree d 6");
    exchange(sc, DTS_EX_RING, "ring");
    sc->d = 4, sc->zero = 1;
    check_estimate(sc, "zero-1 d 4");
    sc->zero = 3;
    check_estimate(sc, "zero-3 d 4");
    sc->zero = 0, sc->d = 4, sc->p = 2, sc->t = 2, sc->m = 8, sc->chunk_bytes = 1 << 20;
    check_estimate(sc, "t 2 p 2 d 4");
    sc->model.num_layers = 8, sc->t = 1, sc->p = 4, sc->d = 1, sc->schedule = DT_SCHED_ZB_V;
    check_estimate(sc, "zb-v p 4");
    sc->schedule = DT_SCHED_1F1B, sc->p = 2, sc->d = 600, sc->m = 4; /* auto: analytic above 512 members */
    check_estimate(sc, "p 2 d 600 analytic");
    sc->hw.collectives = DTS_HW_COLL_ANALYTIC, sc->p = 4, sc->t = 8, sc->d = 16, sc->model.num_layers = 8;
    sc->model.num_heads = 8, sc->model.hidden_size = 64;
    check_estimate(sc, "t 8 p 4 d 16 analytic");
    free(sc);
    sc = scenario("cpu-2core.json");
    sc->d = 3, sc->m = 2, sc->num_ps_servers = 1;
    exchange(sc, DTS_EX_PS_SYNC, "ps-sync");
    check_estimate(sc, "ps-sync 3 workers");
    exchange(sc, DTS_EX_RING, "ring");
    sc->num_ps_servers = 0, sc->d = 4, sc->hw.cores_per_node = 2;
    sc->hw.devices_per_node = 4;
    check_estimate(sc, "d 4 on 2 shared cores");
    free(sc);
}
END_TEST

/* The refusal names --collectives analytic only where it would help. */
START_TEST(test_estimate_refusal)
{
    dts_scenario *sc = scenario("h100-ib.json");
    sc->model.num_layers = 8, sc->model.hidden_size = 1024, sc->model.num_heads = 8, sc->model.vocab_size = 256;
    sc->d = 400, sc->m = 1, sc->steps = 100, sc->chunk_bytes = 256; /* messages: d^2 x chunks */
    ck_dt(dts_scenario_set_cost(sc, NULL));
    ck_assert(dts_run_events_estimate(sc) > DTS_RUN_MAX_EVENTS);
    dts_summary s;
    ck_assert_int_eq(dts_run(sc, NULL, &s), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--collectives analytic"));
    sc->hw.collectives = DTS_HW_COLL_ANALYTIC, sc->m = 60000, sc->steps = 2000; /* compute-bound: no help */
    ck_assert_int_eq(dts_run(sc, NULL, &s), DT_ERR_INVALID);
    ck_assert_ptr_null(strstr(dt_last_error(), "--collectives analytic"));
    free(sc);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sim_scale");
    TCase *tc = tcase_create("estimate");
    tcase_add_test(tc, test_estimate);
    tcase_add_test(tc, test_estimate_refusal);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return dt_test_run(s);
}
