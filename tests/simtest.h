/* simtest.h: scenarios with exact costs for the simulator's and viewer's
 * tests (check_sim.c, check_viz.c): a model of L blocks whose forward and
 * backward take fixed nanoseconds, a free embedding and head, no optimizer
 * or host cost, and links of given latency and bandwidth (all ranks on one
 * node, the parameter server's polls waking on time). */
#ifndef DT_SIMTEST_H
#define DT_SIMTEST_H

#include <string.h>

#include "dts_scenario.h"

/* Links of latency alpha_ns and bandwidth bytes_per_ns between every pair. */
static inline dts_hw dt_test_flat_hw(double alpha_ns, double bytes_per_ns)
{
    dts_hw hw;
    dts_hw_default(&hw);
    hw.devices_per_node = 1 << 20;
    hw.intra.alpha_ns = hw.inter.alpha_ns = alpha_ns;
    hw.intra.bytes_per_ns = hw.inter.bytes_per_ns = bytes_per_ns;
    hw.sleep_overshoot_ns = 0;
    return hw;
}

/* L blocks of forward F and backward Bw ns on p stages, m micro-batches,
 * `steps` steps of `kind`, t = d = 1, free links. */
static inline void dt_test_fixed_scenario(dts_scenario *sc, int L, int p, int m, int steps, dt_sched_kind kind,
                                          int64_t F, int64_t Bw)
{
    dts_scenario_default(sc);
    sc->model.num_layers = L;
    sc->p = p;
    sc->t = 1;
    sc->d = 1;
    sc->m = m;
    sc->steps = steps;
    sc->schedule = kind;
    sc->hw = dt_test_flat_hw(0, 1e12);
    memset(&sc->cost, 0, sizeof sc->cost);
    sc->cost.n_layer = L;
    for (int l = 0; l < L; l++) {
        sc->cost.fwd_ns[l + 1] = F;
        sc->cost.bwd_ns[l + 1] = Bw;
        sc->cost.params[l + 1] = 1000;
        sc->cost.act_bytes[l + 1] = 4096;
    }
    sc->cost.params[0] = sc->cost.params[L + 1] = 1000;
    sc->have_cost = 1;
}

#endif
