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
 *   - context parallelism: each exchange's count and price, a rank's
 *     1/c of the compute and memory, the gradients' group of c x d, the
 *     scenario keys and the runtime's refusals, by hand;
 *   - the memory capacity: ranks whose predicted peak exceeds it;
 *   - the stages' compute (the imbalance the summary reports), by hand;
 *   - the hardware's "gemm_efficiency" table: reading, interpolation, bad
 *     tables, and the roofline's GEMMs at their size on a tensor rank;
 *   - a balanced 3,072-GPU job: every stage's bubble within 0.03 of the
 *     formula. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dts_cost.h"
#include "dts_hw.h"
#include "dts_run.h"
#include "dts_scenario.h"
#include "simtest.h"
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
    sc->c = 2, sc->d = 2;
    check_estimate(sc, "t 2 c 2 p 2 d 2");
    sc->c = 1;
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

/* Blocks of forward 1000 ns and backward 2000, an embedding of 300/600 and a
 * head of 5000/10000 (real parameter counts and activations), on t = 2
 * ranks and p stages, m = 1, one step, all links alpha 1000 ns and 1 byte
 * per ns, V = 257 (uneven: tensor rank 0 holds 128 rows, rank 1 129). */
/* The model's real parameters and activations at sc's B and T, an
 * embedding of 300/600 ns and a head of 5000/10000, a free optimizer,
 * links of alpha 1000 ns and 1 byte per ns. */
static void real_layers(dts_scenario *sc)
{
    sc->hw = dt_test_flat_hw(1000, 1.0);
    const int L = sc->model.num_layers;
    for (int slot = 0; slot <= L + 1; slot++) {
        sc->cost.params[slot] = dts_layer_params(&sc->model, slot);
        sc->cost.act_bytes[slot] = dts_layer_act_bytes(&sc->model, slot, sc->B, sc->T);
    }
    sc->cost.fwd_ns[0] = 300, sc->cost.bwd_ns[0] = 600;
    sc->cost.fwd_ns[L + 1] = 5000, sc->cost.bwd_ns[L + 1] = 10000;
    sc->cost.optim_ns_per_param = 0;
}

static dts_scenario *vocab_scenario(int p, int vp, int sg)
{
    dts_scenario *sc = malloc(sizeof *sc);
    ck_assert_ptr_nonnull(sc);
    dt_test_fixed_scenario(sc, 2 * p, p, 1, 1, DT_SCHED_1F1B, 1000, 2000);
    sc->model.vocab_size = 257;
    sc->model.tie_embeddings = 0;
    sc->t = 2, sc->B = 2, sc->T = 16;
    sc->vocab_parallel = vp, sc->scatter_gather = sg;
    real_layers(sc);
    return sc;
}

/* cfg read into the default scenario, checked, written as JSON (holding
 * `written`) and read back from it into sc. */
static void round_trip(dts_scenario *sc, const char *cfg, const char *written)
{
    dts_scenario_default(sc);
    ck_dt(dts_scenario_from_config(sc, cfg, "c.json"));
    ck_dt(dts_scenario_check(sc));
    char *text = dts_scenario_json(sc);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, written) != NULL, "%s", text);
    dts_scenario_default(sc);
    ck_dt(dts_scenario_from_config(sc, text, "sim.json"));
    free(text);
}

/* The first complete event named `name` of rank pid (its duration in *dur). */
static int64_t first_span(const dts_summary *s, int pid, const char *name, int64_t *dur)
{
    for (size_t i = 0; i < s->n_ev; i++)
        if (s->ev[i].pid == pid && s->ev[i].ph == DT_TRACE_COMPLETE && !strcmp(s->ev[i].name, name)) {
            if (dur) *dur = s->ev[i].dur_ns;
            return s->ev[i].ts_ns;
        }
    ck_abort_msg("no %s event of rank %d", name, pid);
    return -1;
}

/* The vocabulary split, by hand: the largest rank holds Vr = 129 of V = 257
 * rows, so the embedding's and head's compute scale by 129/257, their rows'
 * weights, gradients and AdamW states (16 bytes a parameter) by the same,
 * and the head's logits (BT x V floats) become BT x Vr plus every rank's
 * per-row statistics and the merged pair ((4t + 2) BT floats). Added: the
 * embedding output's allreduce (2 alpha + S/beta for t = 2, S = BTC x 4) in
 * the first stage's forward, the statistics' all-gather (alpha + BT x 16
 * bytes / beta) in the last stage's forward, the head input gradient's
 * allreduce in its backward. */
START_TEST(test_vocab_parallel)
{
    const int p = 2;
    dts_run_opts o = {.keep_events = 1};
    dts_summary on, off;
    dts_scenario *a = vocab_scenario(p, 1, 0), *b = vocab_scenario(p, 0, 0);
    ck_dt(dts_run(a, &o, &on));
    ck_dt(dts_run(b, &o, &off));
    const int64_t V = 257, Vr = 129, C = a->model.hidden_size, BT = (int64_t)a->B * a->T, t = 2;
    const double ar = 2 * 1000.0 + (double)(BT * C * 4), gather = 1000.0 + (double)(BT * 16);
    const int last = (p - 1) * 2; /* the last stage's tensor rank 0 */
    int64_t f_on, f_off, b_on, b_off;
    first_span(&on, 0, "forward", &f_on);
    first_span(&off, 0, "forward", &f_off);
    ck_assert_int_eq(f_on - f_off, llround(300.0 * Vr / V + ar) - 300);
    first_span(&on, last, "forward", &f_on);
    first_span(&off, last, "forward", &f_off);
    ck_assert_int_eq(f_on - f_off, llround(5000.0 * Vr / V + gather) - 5000); /* the blocks' parts are in both */
    first_span(&on, last, "backward", &b_on);
    first_span(&off, last, "backward", &b_off);
    ck_assert(labs((long)(b_on - b_off - (llround(10000.0 * Vr / V + ar) - 10000))) <= 1);
    /* memory: the rows' model state, and the head's logits */
    ck_assert_int_eq(off.peak_mem_stage[0] - on.peak_mem_stage[0], (V - Vr) * C * 16);
    ck_assert_int_eq(off.peak_mem_stage[p - 1] - on.peak_mem_stage[p - 1],
                     (V - Vr) * C * 16 + BT * (V - Vr) * 4 - BT * (4 * t + 2) * 4);
    /* the summary's tensor-parallel time holds the vocabulary's collectives (stage 0: the embedding's) */
    ck_assert(fabs(on.comm_ns_tp - off.comm_ns_tp - ar) < 1.0);
    dts_summary_free(&on);
    dts_summary_free(&off);
    free(a);
    free(b);
}
END_TEST

/* Scattered sends, by hand, on links of alpha 1000 ns and 1 byte per ns
 * everywhere: a whole activation M = BTC x 4 bytes arrives alpha + M/beta
 * after it is sent; scattered, each rank sends M/2 (alpha + M/2), and the
 * receiving pair all-gathers it (alpha + M/2): alpha later on equal links.
 * On h100-ib (inter 50, intra 450 GB/s, the two stages on two nodes) the
 * scattered send of a large message is the faster. */
START_TEST(test_scatter_gather)
{
    dts_run_opts o = {.keep_events = 1};
    dts_summary sg, whole;
    dts_scenario *a = vocab_scenario(2, 1, 1), *b = vocab_scenario(2, 1, 0);
    ck_dt(dts_run(a, &o, &sg));
    ck_dt(dts_run(b, &o, &whole));
    const int64_t M = (int64_t)a->B * a->T * a->model.hidden_size * 4;
    /* stage 1's forward starts when its activation is there */
    ck_assert_int_eq(first_span(&sg, 2, "forward", NULL) - first_span(&whole, 2, "forward", NULL), 1000);
    int64_t f0;
    first_span(&whole, 0, "forward", &f0);
    ck_assert_int_eq(first_span(&whole, 2, "forward", NULL), f0 + 1000 + M);
    ck_assert_int_eq(first_span(&sg, 2, "forward", NULL), f0 + 1000 + M / 2 + 1000 + M / 2);
    dts_summary_free(&sg);
    dts_summary_free(&whole);
    /* h100-ib: 8 devices a node; t = 8 puts each stage on a node of its own;
     * a message of 32 MiB (T 1024, C 8192), where bandwidth rules */
    char path[1024];
    snprintf(path, sizeof path, "%s/sim/hw/h100-ib.json", DT_SRCDIR);
    a->t = b->t = 8, a->model.num_heads = b->model.num_heads = 8;
    a->model.hidden_size = b->model.hidden_size = 8192, a->B = b->B = 1;
    a->model.seq_len = b->model.seq_len = a->T = b->T = 1024;
    ck_dt(dts_hw_load(path, &a->hw));
    ck_dt(dts_hw_load(path, &b->hw));
    ck_dt(dts_run(a, &o, &sg));
    ck_dt(dts_run(b, &o, &whole));
    ck_assert(first_span(&sg, 8, "forward", NULL) < first_span(&whole, 8, "forward", NULL));
    dts_summary_free(&sg);
    dts_summary_free(&whole);
    free(a);
    free(b);
}
END_TEST

/* Full recomputation runs each block's forward again in the backward, and
 * on a tensor rank its two g allreduces with it (lib/model/runner_backward.c
 * through lib/parallel/tp.c): 6 allreduces a block and micro-batch, not 4;
 * the backward is longer by the forward and its 2 allreduces, by hand. */
START_TEST(test_recompute_allreduces)
{
    dts_run_opts o = {.keep_events = 1};
    dts_summary rc, none;
    dts_scenario *a = vocab_scenario(1, 0, 0), *b = vocab_scenario(1, 0, 0);
    a->recompute = 1;
    ck_dt(dts_run(a, &o, &rc));
    ck_dt(dts_run(b, &o, &none));
    const double ar = 2 * 1000.0 + (double)((int64_t)a->B * a->T * a->model.hidden_size * 4);
    const int L = a->model.num_layers; /* 2 blocks on the one stage */
    ck_assert(fabs(rc.comm_ns_tp - none.comm_ns_tp * 6.0 / 4.0) < 1e-6);
    ck_assert(fabs(none.comm_ns_tp - 4.0 * L * ar * a->m) < 1e-6);
    int64_t b_rc, b_none;
    first_span(&rc, 0, "backward", &b_rc);
    first_span(&none, 0, "backward", &b_none);
    ck_assert_int_eq(b_rc - b_none, llround(L * (1000.0 / 2 + 2 * ar)));
    int n_g = 0;
    for (size_t i = 0; i < rc.n_ev; i++)
        n_g += rc.ev[i].pid == 0 && rc.ev[i].iter == 0 && !strcmp(rc.ev[i].name, "tp allreduce g");
    ck_assert_int_eq(n_g, 4 * L); /* the forward's and their recomputation's in B, as the runtime's trace names them */
    dts_summary_free(&rc);
    dts_summary_free(&none);
    free(a);
    free(b);
}
END_TEST

/* The tensor ranks' wait for the slowest at each allreduce: a block's
 * forward of standard deviation 1000 ns (its backward 2000) on t ranks is
 * two segments each of variance 1000^2 / (2t); every rank waits for the
 * last of t, E[max of t standard normals] (1/sqrt(pi) for 2, 1.0294 for
 * 4) times the segment's deviation after the mean: by hand, per block and
 * micro-batch, 2 of those in the forward, 2 in the backward; with
 * sequence parallelism 4 more in W, after segments of an eighth. */
START_TEST(test_tp_skew)
{
    dts_run_opts o = {.keep_events = 1};
    const double emax[2] = {1.0 / sqrt(M_PI), 1.0293754};
    const int ts[2] = {2, 4};
    for (int k = 0; k < 2; k++) {
        dts_summary sk, none;
        dts_scenario *a = vocab_scenario(1, 0, 0), *b = vocab_scenario(1, 0, 0);
        a->t = b->t = ts[k];
        a->cost.block_fwd_sd_ns = 1000, a->cost.block_bwd_sd_ns = 2000;
        ck_dt(dts_run(a, &o, &sk));
        ck_dt(dts_run(b, &o, &none));
        const int L = a->model.num_layers;
        const double seg = sqrt(1.0 / (2.0 * ts[k]));
        const int64_t wf = llround(emax[k] * 1000 * seg), wb = llround(emax[k] * 2000 * seg);
        int64_t f1, f0, b1, b0;
        first_span(&sk, 0, "forward", &f1);
        first_span(&none, 0, "forward", &f0);
        first_span(&sk, 0, "backward", &b1);
        first_span(&none, 0, "backward", &b0);
        ck_assert_msg(llabs((long long)(f1 - f0 - 2 * L * wf)) <= 2 * L, "t %d: forward %lld longer, want %lld", ts[k],
                      (long long)(f1 - f0), (long long)(2 * L * wf));
        ck_assert_msg(llabs((long long)(b1 - b0 - 2 * L * wb)) <= 2 * L, "t %d: backward %lld longer, want %lld", ts[k],
                      (long long)(b1 - b0), (long long)(2 * L * wb));
        dts_summary_free(&sk);
        dts_summary_free(&none);
        /* sequence parallelism: the reduce-scatters wait as g and f; W's two all-gathers and two LayerNorm
         * sums each after an eighth of the block's backward (variance 2000^2 / (8t)) */
        a->sequence_parallel = b->sequence_parallel = 1;
        a->vocab_parallel = b->vocab_parallel = 1;
        ck_dt(dts_run(a, &o, &sk));
        ck_dt(dts_run(b, &o, &none));
        const int64_t ww = llround(emax[k] * 2000 * sqrt(1.0 / (8.0 * ts[k])));
        first_span(&sk, 0, "forward", &f1);
        first_span(&none, 0, "forward", &f0);
        first_span(&sk, 0, "backward", &b1);
        first_span(&none, 0, "backward", &b0);
        ck_assert(llabs((long long)(f1 - f0 - 2 * L * wf)) <= 2 * L);
        ck_assert_msg(llabs((long long)(b1 - b0 - L * (2 * wb + 4 * ww))) <= 6 * L, "t %d: sp backward %lld longer",
                      ts[k], (long long)(b1 - b0));
        dts_summary_free(&sk);
        dts_summary_free(&none);
        free(a);
        free(b);
    }
}
END_TEST

/* The keys: a dtsim config keeps the split unless "vocab_parallel" is
 * false; dtrain's configuration writes the key only when it split, so
 * there its absence means whole; both keys read back from the scenario's
 * JSON; a bad value names the key. */
START_TEST(test_vocab_keys)
{
    dts_scenario *sc = malloc(sizeof *sc);
    ck_assert_ptr_nonnull(sc);
    dts_scenario_default(sc);
    ck_assert_int_eq(sc->vocab_parallel, 1);
    ck_assert_int_eq(sc->scatter_gather, 1);
    ck_dt(dts_scenario_from_config(sc, "{\"tensor_model_parallel_size\": 2}", "c.json"));
    ck_assert_int_eq(sc->vocab_parallel, 1);
    ck_dt(dts_scenario_from_config(
        sc, "{\"vocab_parallel\": false, \"scatter_gather_tensors_in_pipeline\": false}", "c.json"));
    ck_assert_int_eq(sc->vocab_parallel, 0);
    ck_assert_int_eq(sc->scatter_gather, 0);
    char *text = dts_scenario_json(sc);
    ck_assert_ptr_nonnull(text);
    dts_scenario_default(sc);
    ck_dt(dts_scenario_from_config(sc, text, "sim.json"));
    free(text);
    ck_assert_int_eq(sc->vocab_parallel, 0);
    ck_assert_int_eq(sc->scatter_gather, 0);
    dts_scenario_default(sc);
    ck_dt(dts_scenario_from_config(sc, "{\"task\": \"gpt\", \"tensor_model_parallel_size\": 2}", "run.json"));
    ck_assert_int_eq(sc->vocab_parallel, 0);
    ck_assert_int_eq(sc->scatter_gather, 1);
    dts_scenario_default(sc);
    ck_dt(dts_scenario_from_config(
        sc, "{\"task\": \"gpt\", \"tensor_model_parallel_size\": 2, \"vocab_parallel\": true}", "run.json"));
    ck_assert_int_eq(sc->vocab_parallel, 1);
    ck_assert_int_ne(dts_scenario_from_config(sc, "{\"vocab_parallel\": 3}", "c.json"), DT_OK);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "\"vocab_parallel\""));
    /* fewer rows than tensor ranks */
    dts_scenario_default(sc);
    sc->t = 4, sc->model.vocab_size = 3;
    ck_assert_int_ne(dts_scenario_check(sc), DT_OK);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--no-vocab-parallel"));
    sc->vocab_parallel = 0;
    ck_dt(dts_scenario_check(sc));
    free(sc);
}
END_TEST

/* Sequence parallelism (lib/parallel/sp.c) against tensor parallelism
 * alone, by hand, on vocab_scenario's links (alpha 1000 ns, 1 byte per
 * ns; t = 2, M = BTC x 4 bytes): an all-gather or a reduce-scatter costs
 * A = alpha + M/2, an allreduce 2A, a LayerNorm's gradient sum 2 alpha +
 * 2C x 4. A block's forward and B move what the allreduces did; W adds
 * per block 2 all-gathers and 2 sums; the embedding reduce-scatters its
 * output (A less) and all-gathers its gradient (A more); the head
 * all-gathers its LayerNorm output (A more), reduce-scatters its input
 * gradient (A less) and sums its LayerNorm's gradients. A message is each
 * rank's half, nothing gathered: it arrives alpha + M/2 after its send.
 * Memory per micro-batch: a block's residual, output and statistics and
 * the embedding's output hold B T / 2 rows. Then the keys and refusals. */
START_TEST(test_sequence_parallel)
{
    dts_run_opts o = {.keep_events = 1};
    dts_summary sp, tp;
    dts_scenario *a = vocab_scenario(2, 1, 1), *b = vocab_scenario(2, 1, 1);
    a->sequence_parallel = 1;
    ck_dt(dts_run(a, &o, &sp));
    ck_dt(dts_run(b, &o, &tp));
    const int64_t C = a->model.hidden_size, BT = (int64_t)a->B * a->T, n = BT / 2, M = BT * C * 4;
    const int64_t A = 1000 + M / 2, ln = 2000 + 2 * C * 4, nb = 2; /* blocks a stage */
    int64_t f_sp, f_tp, b_sp, b_tp;
    const int64_t f0 = first_span(&sp, 0, "forward", &f_sp);
    first_span(&tp, 0, "forward", &f_tp);
    ck_assert_int_eq(f_sp - f_tp, -A);
    ck_assert_int_eq(first_span(&sp, 2, "forward", NULL), f0 + f_sp + 1000 + M / 2);
    first_span(&sp, 2, "forward", &f_sp);
    first_span(&tp, 2, "forward", &f_tp);
    ck_assert_int_eq(f_sp - f_tp, A);
    first_span(&sp, 0, "backward", &b_sp);
    first_span(&tp, 0, "backward", &b_tp);
    ck_assert_int_eq(b_sp - b_tp, nb * (2 * A + 2 * ln) + A);
    first_span(&sp, 2, "backward", &b_sp);
    first_span(&tp, 2, "backward", &b_tp);
    ck_assert_int_eq(b_sp - b_tp, -A + ln + nb * (2 * A + 2 * ln));
    ck_assert(fabs(sp.comm_ns_tp - tp.comm_ns_tp - (double)(nb * (2 * A + 2 * ln))) < 1.0);
    int ag = 0, rs = 0, lns = 0, ar = 0;
    for (size_t i = 0; i < sp.n_ev; i++) {
        const dt_trace_event *e = &sp.ev[i];
        if (e->pid != 0 || e->iter != 0) continue;
        ag += !strcmp(e->name, "tp all-gather"), rs += !strcmp(e->name, "tp reduce-scatter");
        lns += !strcmp(e->name, "tp layernorm grad allreduce"), ar += !strncmp(e->name, "tp allreduce", 12);
    }
    ck_assert_int_eq(ag, 3 * 2 * nb + 1); /* forward, B, W; the embedding's gradient */
    ck_assert_int_eq(rs, 2 * 2 * nb + 1); /* forward, B; the embedding's output */
    ck_assert_int_eq(lns, 2 * nb);
    ck_assert_int_eq(ar, 0);
    const int64_t block = (2 * (BT - n) * C + 4 * (BT - n)) * 4;
    ck_assert_int_eq(tp.peak_mem_stage[0] - sp.peak_mem_stage[0], nb * block + (BT - n) * C * 4);
    ck_assert_int_eq(tp.peak_mem_stage[1] - sp.peak_mem_stage[1], nb * block);
    dts_summary_free(&sp);
    dts_summary_free(&tp);
    /* the key: dtrain writes it only when on, a dtsim config keeps it; read back from the scenario's JSON */
    dts_scenario_default(a);
    ck_assert_int_eq(a->sequence_parallel, 0);
    round_trip(a, "{\"tensor_model_parallel_size\": 2, \"sequence_parallel\": true}", "\"sequence_parallel\":true");
    ck_assert_int_eq(a->sequence_parallel, 1);
    ck_dt(dts_scenario_from_config(a, "{\"task\": \"gpt\", \"tensor_model_parallel_size\": 2}", "run.json"));
    ck_assert_int_eq(a->sequence_parallel, 0);
    /* the runtime's refusals (lib/train/config.c), in its words */
    const struct {
        int t, vp, T;
        const char *says;
    } bad[] = {{1, 1, 16, "needs --tensor-model-parallel-size > 1"},
               {2, 0, 16, "drop --no-vocab-parallel"},
               {4, 1, 18, "--tensor-model-parallel-size 4 does not divide --seq-length 18"}};
    for (int k = 0; k < 3; k++) {
        dts_scenario_default(a);
        a->sequence_parallel = 1, a->t = bad[k].t, a->vocab_parallel = bad[k].vp, a->T = bad[k].T;
        ck_assert_int_eq(dts_scenario_check(a), DT_ERR_INVALID);
        ck_assert_msg(strstr(dt_last_error(), bad[k].says) != NULL, "%s", dt_last_error());
    }
    free(a);
    free(b);
}
END_TEST

/* Context parallelism by hand: 2 blocks of forward 100000 ns and backward
 * 200000, an embedding of 300/600 and a head of 5000/10000, B 2, T 16,
 * C 64, 4 heads, c = 2, links of alpha 1000 ns and 1 byte per ns. A rank
 * computes 1/c of every layer; a key/value block is Nl x 2C FP32, Nl = 16
 * rows (8192 bytes), a trip alpha + S/beta = 9192 ns; a ring step's
 * attention is the block's share T/(6C + T) = 1/25 over t c c = 4 (1000
 * ns forward, 2000 backward). p2p: the forward's step adds 9192 - 1000,
 * B's first 9192 - 2000 + 9192 (the gradient's trip not hidden), its
 * second 9192; allgather: the gather (c-1) alpha + (c-1)/c x 2S / beta =
 * 9192 forward, twice backward; a2a: an all-to-all of (Nl, 3C) alpha +
 * 1/2 x 12288 = 7144 and of (Nl, C) 3048, two forward, four backward.
 * A ring step's span holds the attention it overlaps, as the runtime's. */
static dts_scenario *cp_scenario(int c, int T, dt_cp_comm type)
{
    dts_scenario *sc = malloc(sizeof *sc);
    ck_assert_ptr_nonnull(sc);
    dt_test_fixed_scenario(sc, 2, 1, 1, 2, DT_SCHED_1F1B, 100000, 200000);
    sc->c = c, sc->cp_comm = type, sc->B = 2, sc->T = T;
    real_layers(sc);
    return sc;
}

/* rank pid's events named `name` in step 0 (and, step >= 0, ring step `step` from rank `from`) */
static int count_cp(const dts_summary *s, int pid, const char *name, int fwd, int step, int from)
{
    int n = 0;
    for (size_t i = 0; i < s->n_ev; i++) {
        const dt_trace_event *e = &s->ev[i];
        if (e->pid != pid || e->iter != 0 || strcmp(e->name, name) != 0 || strcmp(e->cat, "cp") != 0) continue;
        if ((int)dt_trace_event_arg(e, "forward", -1) != fwd) continue;
        if (step >= 0 &&
            ((int)dt_trace_event_arg(e, "step", -1) != step || (int)dt_trace_event_arg(e, "from", -1) != from))
            continue;
        n++;
    }
    return n;
}

START_TEST(test_context_parallel)
{
    dts_run_opts o = {.keep_events = 1};
    const int64_t nb = 2, comp_f = (300 + nb * 100000 + 5000) / 2, comp_b = (600 + nb * 200000 + 10000) / 2;
    const int64_t msg = 1000 + 8192, a3 = 1000 + 6144, a1 = 1000 + 2048;
    const struct {
        dt_cp_comm type;
        int64_t f, b; /* what a block's exchanges add to the forward and to the backward */
    } want[] = {{DT_CP_P2P, msg - 1000, (msg - 2000 + msg) + msg},
                {DT_CP_ALLGATHER, msg, 2 * msg},
                {DT_CP_A2A, a3 + a1, 2 * a3 + 2 * a1}};
    for (int k = 0; k < 3; k++) {
        dts_scenario *sc = cp_scenario(2, 16, want[k].type);
        dts_summary s;
        ck_dt(dts_run(sc, &o, &s));
        int64_t f, b;
        first_span(&s, 0, "forward", &f);
        first_span(&s, 0, "backward", &b);
        ck_assert_int_eq(f, comp_f + nb * want[k].f);
        ck_assert_int_eq(b, comp_b + nb * want[k].b);
        ck_assert(fabs(s.comm_ns_cp - (double)(nb * (want[k].f + want[k].b))) < 1.0);
        ck_assert(s.comm_ns_tp == 0);
        ck_assert_int_eq(s.n_ranks, 2);
        ck_assert_int_eq(first_span(&s, 1, "forward", NULL), first_span(&s, 0, "forward", NULL)); /* alike */
        if (want[k].type == DT_CP_P2P) { /* the ring's steps and senders, as lib/parallel/cp.c traces them */
            ck_assert_int_eq(count_cp(&s, 0, "cp ring step", 1, 0, 1), nb);
            ck_assert_int_eq(count_cp(&s, 1, "cp ring step", 1, 0, 0), nb);
            ck_assert_int_eq(count_cp(&s, 0, "cp ring step", 0, 0, 1), nb);
            ck_assert_int_eq(count_cp(&s, 0, "cp ring step", 0, 1, 0), nb);
            ck_assert_int_eq(count_cp(&s, 1, "cp ring step", 0, 1, 1), nb);
            int64_t span;
            first_span(&s, 0, "cp ring step", &span); /* as the runtime's: the attention it overlaps, and the wait */
            ck_assert_int_eq(span, msg);
        } else if (want[k].type == DT_CP_ALLGATHER) {
            ck_assert_int_eq(count_cp(&s, 0, "cp kv all-gather", 1, -1, 0), nb);
            ck_assert_int_eq(count_cp(&s, 0, "cp kv all-gather", 0, -1, 0), nb);
            ck_assert_int_eq(count_cp(&s, 0, "cp dkv reduce-scatter", 0, -1, 0), nb);
        } else {
            ck_assert_int_eq(count_cp(&s, 0, "cp all-to-all", 1, -1, 0), 2 * nb);
            ck_assert_int_eq(count_cp(&s, 0, "cp all-to-all", 0, -1, 0), 4 * nb);
        }
        dts_summary_free(&s);
        free(sc);
    }
    /* recomputation runs the attention's forward again in B, its exchanges traced as forward */
    dts_scenario *sc = cp_scenario(2, 16, DT_CP_P2P);
    sc->recompute = 2;
    dts_summary s;
    ck_dt(dts_run(sc, &o, &s));
    ck_assert_int_eq(count_cp(&s, 0, "cp ring step", 1, 0, 1), 2 * nb);
    dts_summary_free(&s);
    free(sc);
    /* memory: a rank's activations are the sequence's over c (every tensor Nl rows): c 2 at T 16 and c 4 at
     * T 32 hold the same; T 32 at c 2 holds 4 [Nl C + L Nl (10 C + 4 + NH) + Nl C + 2 Nl + Nl V] more, Nl = 16 */
    int64_t peak[3];
    const int cs[3] = {2, 4, 2}, Ts[3] = {16, 32, 32};
    for (int k = 0; k < 3; k++) {
        sc = cp_scenario(cs[k], Ts[k], DT_CP_P2P);
        ck_dt(dts_run(sc, NULL, &s));
        peak[k] = s.peak_mem_stage[0];
        dts_summary_free(&s);
        free(sc);
    }
    const int64_t Nl = 16, C = 64, NH = 4, V = 256;
    ck_assert_int_eq(peak[0], peak[1]);
    ck_assert_int_eq(peak[2] - peak[0], 4 * (Nl * C + nb * Nl * (10 * C + 4 + NH) + Nl * C + 2 * Nl + Nl * V));
    /* the gradients are reduced over the c x d ranks: c 2 x d 2 as c 4 x d 1 (the same group of 4, the same
     * bytes), more than c 2 x d 1; ZeRO-1 shards the optimizer's states over them */
    dts_summary cd, dd, cc;
    sc = cp_scenario(2, 16, DT_CP_P2P);
    ck_dt(dts_run(sc, NULL, &cd));
    dts_scenario *sd = cp_scenario(2, 16, DT_CP_P2P);
    sd->d = 2;
    ck_dt(dts_run(sd, NULL, &dd));
    sd->c = 4, sd->d = 1, sd->T = 32;
    ck_dt(dts_run(sd, NULL, &cc));
    ck_assert_int_eq(dd.n_ranks, 4);
    ck_assert(cd.comm_ns_dp > 0 && dd.comm_ns_dp > cd.comm_ns_dp);
    ck_assert(fabs(cc.comm_ns_dp - dd.comm_ns_dp) < 1.0);
    dts_summary_free(&dd);
    dts_summary_free(&cc);
    sc->zero = 1;
    dts_summary z;
    ck_dt(dts_run(sc, NULL, &z));
    const int64_t prm = dts_cost_total_params(&sc->cost);
    ck_assert_int_eq(cd.peak_mem[0] - z.peak_mem[0], prm * 4 * 2 / 2);
    dts_summary_free(&z);
    dts_summary_free(&cd);
    free(sd);
    /* the keys: dtrain writes them only when c > 1, a dtsim config keeps them; read back from the JSON */
    dts_scenario_default(sc);
    ck_assert_int_eq(sc->c, 1);
    round_trip(sc, "{\"context_parallel_size\": 2, \"cp_comm_type\": \"a2a\"}",
               "\"context_parallel_size\":2,\"cp_comm_type\":\"a2a\"");
    ck_assert_int_eq(dts_scenario_world(sc), 2);
    ck_assert_int_eq(sc->c, 2);
    ck_assert_int_eq(sc->cp_comm, DT_CP_A2A);
    ck_dt(dts_scenario_from_config(sc, "{\"task\": \"add\", \"data_parallel_size\": 1}", "run.json"));
    ck_assert_int_eq(sc->c, 1);
    ck_assert_int_eq(sc->cp_comm, DT_CP_P2P);
    ck_assert_int_eq(dts_scenario_from_config(sc, "{\"cp_comm_type\": \"ring\"}", "c.json"), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "expected p2p, a2a or allgather"));
    /* the runtime's refusals (lib/train/config.c), in its words; and what dtsim does not model */
    const struct {
        int c, t, p, T, NH, sp, zero;
        dt_cp_comm type;
        dt_sched_kind sched;
        const char *says;
    } bad[] = {{2, 1, 1, 6, 4, 0, 0, DT_CP_P2P, DT_SCHED_1F1B, "--seq-length 6 does not split into 4 equal chunks"},
               {2, 1, 1, 16, 3, 0, 0, DT_CP_A2A, DT_SCHED_1F1B, "does not divide the 3 attention heads of a tensor"},
               {2, 1, 2, 16, 4, 0, 0, DT_CP_P2P, DT_SCHED_PIPEDREAM, "not with --pipeline-schedule pipedream"},
               {2, 4, 1, 20, 4, 1, 0, DT_CP_P2P, DT_SCHED_1F1B, "does not divide the 10 positions of a context"},
               {2, 1, 1, 16, 4, 0, 2, DT_CP_P2P, DT_SCHED_1F1B, "--zero-stage 2 with --context-parallel-size 2"},
               {65, 1, 1, 130, 4, 0, 0, DT_CP_P2P, DT_SCHED_1F1B, "--context-parallel-size 65: expected 1..64"}};
    for (int k = 0; k < (int)(sizeof bad / sizeof bad[0]); k++) {
        dts_scenario_default(sc);
        sc->c = bad[k].c, sc->t = bad[k].t, sc->p = bad[k].p, sc->T = bad[k].T, sc->model.num_heads = bad[k].NH;
        sc->model.hidden_size = 12 * bad[k].NH, sc->model.seq_len = 256, sc->sequence_parallel = bad[k].sp;
        sc->zero = bad[k].zero, sc->cp_comm = bad[k].type, sc->schedule = bad[k].sched;
        ck_assert_int_eq(dts_scenario_check(sc), DT_ERR_INVALID);
        ck_assert_msg(strstr(dt_last_error(), bad[k].says) != NULL, "%d: %s", k, dt_last_error());
    }
    free(sc);
}
END_TEST

/* The stages' compute, by hand: m micro-batches of each stage's forward
 * and backward; with 3 blocks of (1000 + 2000) ns on stage 0 and 1 on
 * stage 1 (free embedding and head), 3 to 1. Memory: every rank over a
 * capacity below its peak, none over one above it. */
START_TEST(test_stage_compute_memory)
{
    dts_scenario *sc = malloc(sizeof *sc);
    ck_assert_ptr_nonnull(sc);
    dt_test_fixed_scenario(sc, 4, 2, 4, 2, DT_SCHED_1F1B, 1000, 2000);
    sc->split[0] = 3, sc->split[1] = 1, sc->n_split = 2;
    dts_summary s;
    ck_dt(dts_run(sc, NULL, &s));
    ck_assert(fabs(s.stage_compute_ns[0] - 4 * 3 * 3000.0) < 1e-6);
    ck_assert(fabs(s.stage_compute_ns[1] - 4 * 1 * 3000.0) < 1e-6);
    int slow = -1, fast = -1;
    ck_assert(fabs(dts_summary_imbalance(&s, &slow, &fast) - 3.0) < 1e-12);
    ck_assert_int_eq(slow, 0);
    ck_assert_int_eq(fast, 1);
    int first = -2;
    ck_assert_int_eq(dts_summary_over_memory(&s, s.peak_mem[1] - 1, &first), 2);
    ck_assert_int_eq(first, 0);
    ck_assert_int_eq(dts_summary_over_memory(&s, s.peak_mem[0] > s.peak_mem[1] ? s.peak_mem[0] : s.peak_mem[1], &first),
                     0);
    ck_assert_int_eq(first, -1);
    dts_summary_free(&s);
    free(sc);
}
END_TEST

/* "gemm_efficiency": read, written back equal, interpolated in log(flops)
 * and clamped at its ends; bad tables refused naming the entry; the
 * roofline prices each GEMM of a block at its size on one tensor rank, by
 * hand (compute-bound: memory and launches free). */
static dt_status hw_text(const char *table, dts_hw *out)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"format\": \"dtsim-hw\", \"version\": 1, \"name\": \"g\", \"source\": \"test\", "
             "\"peak_flops\": 1e12, \"mem_bytes_per_s\": 1e18, \"efficiency\": 0.5, \"kernel_overhead_ns\": 0, "
             "\"mem_capacity_bytes\": 1000000000, \"devices_per_node\": 8, "
             "\"intra\": {\"alpha_ns\": 1000, \"bytes_per_ns\": 10}, \"inter\": {\"alpha_ns\": 1000, "
             "\"bytes_per_ns\": 10}%s%s}",
             table ? ", \"gemm_efficiency\": " : "", table ? table : "");
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    ck_assert_msg(root != NULL, "%s", err.text);
    const dt_status st = dts_hw_from_json(root, "g.json", out);
    json_decref(root);
    return st;
}

START_TEST(test_gemm_efficiency)
{
    dts_hw hw, back;
    ck_dt(hw_text("[{\"flops\": 1e9, \"efficiency\": 0.2}, {\"flops\": 1e12, \"efficiency\": 0.8}]", &hw));
    ck_assert_int_eq(hw.n_gemm_eff, 2);
    ck_assert(fabs(dts_hw_gemm_efficiency(&hw, 1e9) - 0.2) < 1e-12);
    ck_assert(fabs(dts_hw_gemm_efficiency(&hw, sqrt(1e9 * 1e12)) - 0.5) < 1e-12); /* halfway in log(flops) */
    ck_assert(fabs(dts_hw_gemm_efficiency(&hw, 1e10) - 0.4) < 1e-12);            /* a third of the way */
    ck_assert(fabs(dts_hw_gemm_efficiency(&hw, 1e3) - 0.2) < 1e-12);
    ck_assert(fabs(dts_hw_gemm_efficiency(&hw, 1e15) - 0.8) < 1e-12);
    json_t *o = dts_hw_to_json(&hw);
    ck_assert_ptr_nonnull(o);
    ck_dt(dts_hw_from_json(o, "back", &back));
    json_decref(o);
    ck_assert(dts_hw_equal(&hw, &back));
    ck_dt(hw_text(NULL, &back)); /* absent: the single efficiency */
    ck_assert_int_eq(back.n_gemm_eff, 0);
    ck_assert(fabs(dts_hw_gemm_efficiency(&back, 1e9) - 0.5) < 1e-12);
    ck_assert(!dts_hw_equal(&hw, &back));
    static const struct {
        const char *table, *word;
    } bad[] = {{"[]", "\"gemm_efficiency\""},
               {"{\"flops\": 1}", "\"gemm_efficiency\""},
               {"[3]", "\"gemm_efficiency[0]\""},
               {"[{\"flops\": 0, \"efficiency\": 0.5}]", "gemm_efficiency[0].flops"},
               {"[{\"flops\": 1e9, \"efficiency\": 1.5}]", "gemm_efficiency[0].efficiency"},
               {"[{\"flops\": 1e9, \"efficiency\": 0}]", "gemm_efficiency[0].efficiency"},
               {"[{\"flops\": 1e9}]", "gemm_efficiency[0].efficiency"},
               {"[{\"flops\": 1e9, \"efficiency\": 0.5, \"m\": 3}]", "gemm_efficiency[0].m"},
               {"[{\"flops\": 1e9, \"efficiency\": 0.5}, {\"flops\": 1e8, \"efficiency\": 0.6}]",
                "gemm_efficiency[1].flops"},
               {"[{\"flops\": 1e9, \"efficiency\": 0.5}, {\"flops\": 1e9, \"efficiency\": 0.6}]",
                "ascending"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(hw_text(bad[i].table, &back) == DT_ERR_FORMAT, "%s accepted", bad[i].table);
        ck_assert_msg(strstr(dt_last_error(), bad[i].word) && strstr(dt_last_error(), "g.json"), "%s: %s",
                      bad[i].table, dt_last_error());
        ck_assert_ptr_null(strchr(dt_last_error(), '\n'));
    }
    /* a block of C 64, B 4, T 16 (BT 64) on t = 2: qkv 2*3C^2*BT, proj 2*C^2*BT, fc and fc proj 2*4C^2*BT,
     * Q K^T and att V 2*B*T^2*C each, every one at the efficiency of its half */
    dt_gpt_config m;
    ck_dt(dt_gpt_config_preset("tiny", &m));
    ck_dt(hw_text("[{\"flops\": 1e5, \"efficiency\": 0.2}, {\"flops\": 1e7, \"efficiency\": 0.8}]", &hw));
    const double C = 64, BT = 64, B = 4, T = 16;
    const double g[6] = {2 * 3 * C * C * BT, 2 * C * C * BT, 2 * 4 * C * C * BT, 2 * 4 * C * C * BT,
                         2 * B * T * T * C,  2 * B * T * T * C};
    double want = 0;
    for (int i = 0; i < 6; i++) want += g[i] / (1e12 * dts_hw_gemm_efficiency(&hw, g[i] / 2));
    dts_cost *c = malloc(sizeof *c);
    ck_assert_ptr_nonnull(c);
    ck_dt(dts_cost_roofline_sharded(&m, 4, 16, 2, 1, &hw, c));
    ck_assert(llabs((long long)(c->fwd_ns[1] - llround(want * 1e9))) <= 1);
    ck_assert(llabs((long long)(c->bwd_ns[1] - llround(2 * want * 1e9))) <= 1);
    const int64_t fwd_t2 = c->fwd_ns[1];
    ck_dt(dts_cost_roofline(&m, 4, 16, &hw, c)); /* whole GEMMs: larger, more efficient, faster */
    ck_assert(c->fwd_ns[1] < fwd_t2);
    ck_dt(dts_cost_roofline(&m, 4, 16, &back, c)); /* no table: flops / (peak x 0.5) */
    ck_assert(llabs((long long)(c->fwd_ns[1] - llround(dts_layer_fwd_flops(&m, 1, 4, 16) / 0.5e12 * 1e9))) <= 1);
    free(c);
}
END_TEST

/* The 3,072-GPU job of docs/simulator.md ("What it models at scale"):
 * t 8 x p 64 x d 6, m 512, 639 blocks of width 11520 (96 heads, T 2048)
 * and a vocabulary of 256000 split over the 8 tensor ranks, bf16, full
 * recomputation, the distributed optimizer, on h100-ib, default
 * collectives. The default split puts 10 blocks on stages 0-62 and 9 and
 * the head on stage 63, which the head's share of the vocabulary makes
 * about as heavy (1% apart): every stage's bubble is then within 0.03 of
 * the 1F1B formula (p-1)/(m+p-1). The event estimate holds too. */
START_TEST(test_scale_3072)
{
    dts_scenario *sc = scenario("h100-ib.json");
    sc->model.num_layers = 639, sc->model.hidden_size = 11520, sc->model.num_heads = 96;
    sc->model.seq_len = sc->T = 2048, sc->model.vocab_size = 256000;
    sc->B = 1, sc->m = 512, sc->t = 8, sc->p = 64, sc->d = 6, sc->steps = 2;
    snprintf(sc->precision, sizeof sc->precision, "bf16");
    sc->recompute = 1, sc->zero = 1;
    ck_dt(dts_scenario_set_cost(sc, NULL));
    const double est = dts_run_events_estimate(sc);
    dts_summary s;
    ck_dt(dts_run(sc, NULL, &s));
    ck_assert_msg(est >= s.events / 3.0 && est <= s.events * 3.0, "estimated %.0f, ran %llu", est,
                  (unsigned long long)s.events);
    const double f = (63.0) / (512 + 63.0);
    ck_assert(fabs(s.bubble_formula - f) < 1e-9);
    for (int p = 0; p < 64; p++)
        ck_assert_msg(fabs(s.bubble_fb[p] - f) < 0.03, "stage %d: bubble %.4f, formula %.4f", p, s.bubble_fb[p], f);
    ck_assert(dts_summary_imbalance(&s, NULL, NULL) < 1.03);
    fprintf(stderr, "scale 3072: step %.1f ms, bubble stage 0 %.4f, 63 %.4f, %llu events in %.2f s\n", s.step_ns * 1e-6,
            s.bubble_fb[0], s.bubble_fb[63], (unsigned long long)s.events, s.wall_seconds);
    dts_summary_free(&s);
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
    tc = tcase_create("tensor");
    tcase_add_test(tc, test_vocab_parallel);
    tcase_add_test(tc, test_scatter_gather);
    tcase_add_test(tc, test_vocab_keys);
    tcase_add_test(tc, test_recompute_allreduces);
    tcase_add_test(tc, test_tp_skew);
    tcase_add_test(tc, test_sequence_parallel);
    tcase_add_test(tc, test_context_parallel);
    tcase_add_test(tc, test_stage_compute_memory);
    tcase_add_test(tc, test_gemm_efficiency);
    suite_add_tcase(s, tc);
    tc = tcase_create("scale");
    tcase_add_test(tc, test_scale_3072);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return dt_test_run(s);
}
