/* estimate.c: how many engine events a scenario's run will create
 * (dts_run_events_estimate, dts_run.h), counted from the shapes the
 * executor (sim/run*.c) builds, without running it, so that dts_run can
 * refuse up front what would run for hours rather than seem to hang.
 *
 * What creates events, per step:
 *   - a simulated rank (a "unit": one per tensor-parallel group, so p x c
 *     x d of them, or d without pipeline, tensor and context
 *     parallelism) creates one event per compute operation (a pipeline
 *     instruction's forward or
 *     backward part, or a layer's forward or backward per micro-batch
 *     without a pipeline) and at most one per pipeline receive; with
 *     shared cores (--cores-per-node) each change of a node's computing
 *     ranks re-times its running ones, an event each;
 *   - a collective of n members as messages: one event per message (n x
 *     steps x chunks; a ring has 2(n-1) steps, a reduce-scatter or
 *     all-gather n-1) and one per member when it is done; analytically,
 *     one per member and phase;
 *   - the analytic syncs (loss, norm, world): one per member;
 *   - the parameter server: a worker's push and reply, and the servers'
 *     polling (a wake per sleep of the ladder while they wait).
 * The tensor-parallel allreduces and the context-parallel exchanges are
 * priced inside the compute spans and create none.
 *
 * Invariants: a pure function of the scenario (no allocation); it is an
 * estimate, checked within a factor of 3 of dts_engine_events of real runs
 * over several shapes (tests/check_sim.c). */
#include <math.h>
#include <string.h>

#include "dts_run.h"

/* Events of one collective of n members over `bytes`, as the executor
 * would run it (ring: 2 phases of n-1 steps for an allreduce, one for a
 * reduce-scatter or an all-gather, of `chunks` chunks each). */
static double dts__coll_events(const dts_scenario *sc, int n, double bytes, int phases)
{
    if (n <= 1) return n;
    if (dts_hw_coll_analytic(&sc->hw, n)) return (double)n * phases;
    const int tree = sc->exchange == DTS_EX_TREE, naive = sc->exchange == DTS_EX_NAIVE;
    double steps = phases * (n - 1.0), chunks = 1;
    if (tree) steps = 2.0 * ceil(log2(n)) + 2;
    else if (naive) steps = n - 1.0 + ceil(log2(n));
    else if (sc->chunk_bytes > 0) chunks = fmax(1.0, ceil(bytes / n / (double)sc->chunk_bytes));
    return (double)n * steps * chunks + n;
}

/* Parameters (elements) of one tensor rank of pipeline stage s: blocks
 * divided by t, the embedding and head by t under vocabulary parallelism. */
static double dts__stage_params(const dts_scenario *sc, int s)
{
    const int L = sc->model.num_layers;
    int first = -1, last = L;
    if (sc->p > 1 && dts_scenario_stage_layers(sc, s, &first, &last) != DT_OK) return 0;
    double prm = 0;
    for (int l = first; l <= last; l++) {
        const int block = l >= 0 && l < L, div = block || sc->vocab_parallel ? sc->t : 1;
        prm += (double)sc->cost.params[l + 1] / div;
    }
    return prm;
}

double dts_run_events_estimate(const dts_scenario *sc)
{
    /* d: the ranks a stage's gradients are reduced over (c x d: a context rank is a unit of its own) */
    const int L = sc->model.num_layers, t = sc->t, p = sc->p, d = sc->c * sc->d;
    const double m = sc->m, steps = (double)sc->steps;
    const int pipe = p > 1 || t > 1 || sc->c > 1,
              ps = sc->exchange == DTS_EX_PS_SYNC || sc->exchange == DTS_EX_PS_ASYNC;
    const int dpn = sc->hw.devices_per_node > 0 ? sc->hw.devices_per_node : 1;
    /* with shared cores, each compute op re-times the node's other computing units */
    const double share = sc->hw.cores_per_node > 0 ? fmax(1.0, (double)dpn / t) : 1.0;
    double per_step = 0;
    if (pipe) {
        int v = 1;
        if (dts_scenario_chunks(sc, &v) != DT_OK) v = 1;
        const int split = sc->schedule == DT_SCHED_ZB_H1 || sc->schedule == DT_SCHED_ZB_V;
        /* per micro-batch and chunk: a forward, a backward (B and W apart when split), two receives */
        const double unit = (double)v * m * ((2.0 + split) * share + 2.0) + 8.0;
        per_step += (double)p * d * unit + (double)p * d; /* + the world sync */
        if (p > 1) per_step += (double)p * d;             /* the norm syncs */
        for (int s = 0; s < p && d > 1; s++) {
            const double bytes = 4.0 * dts__stage_params(sc, s);
            per_step += sc->zero ? dts__coll_events(sc, d, bytes, 1) * 2 : dts__coll_events(sc, d, bytes, 2);
        }
    } else {
        /* per micro-batch: every layer slot's forward and backward */
        const double unit = m * 2.0 * (L + 2) * share + 8.0;
        per_step += d * unit + d;
        const double total = 4.0 * (double)dts_cost_total_params(&sc->cost);
        if (ps) {
            const int K = sc->num_ps_servers > 0 ? sc->num_ps_servers : 1;
            /* each worker's header, gradient and reply to each server, and the
             * servers' polls while they wait (up to ~10 sleeps of the ladder) */
            per_step += (double)d * K * 4.0 + (double)K * d * 10.0;
        } else if (d > 1 && sc->zero >= 2) {
            /* ZeRO-2: each bucket reduce-scattered per micro-batch, all-gathered once;
             * ZeRO-3: each layer reduce-scattered per micro-batch, gathered twice */
            const double units = sc->zero == 3 ? L + 2 : fmax(1.0, ceil(total / (double)sc->bucket_bytes));
            const double per = total / units;
            per_step += m * units * dts__coll_events(sc, d, per, 1) +
                        (sc->zero == 3 ? 2.0 * m : 1.0) * units * dts__coll_events(sc, d, per, 1);
        } else if (d > 1 && sc->zero) {
            per_step += 2.0 * dts__coll_events(sc, d, total, 1);
        } else if (d > 1) {
            /* lib/train/step_dp.c's buckets, in every precision */
            const double buckets = sc->bucket_bytes > 0 ? fmax(1.0, floor(total / (double)sc->bucket_bytes)) : 1.0;
            per_step += buckets * dts__coll_events(sc, d, total / buckets, 2);
        }
    }
    return per_step * steps;
}
