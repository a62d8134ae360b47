/* check_sim.c: the simulator's engine, links, collectives and executor
 * against exact formulas. Costs are fixed integers (ns) and links have
 * round figures, so every expected time is exact: the tolerances below are
 * rounding of one nanosecond per message or per operation, and no more. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dt_schedule.h"
#include "dts_coll.h"
#include "dts_engine.h"
#include "dts_net.h"
#include "dts_run.h"
#include "dts_scenario.h"
#include "simtest.h"
#include "testutil.h"

/* ---- engine ------------------------------------------------------------- */

typedef struct order_log {
    int64_t a[64];
    int64_t t[64];
    int n;
} order_log;

static void log_fn(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)b;
    order_log *l = ctx;
    l->t[l->n] = dts_engine_now(e);
    l->a[l->n++] = a;
}

START_TEST(test_engine_order)
{
    dts_engine *e = NULL;
    ck_assert_int_eq(dts_engine_create(&e), DT_OK);
    order_log l = {.n = 0};
    /* times out of order, ties among them: ties must run in scheduling order */
    const int64_t times[] = {50, 10, 50, 10, 30, 50, 0, 10};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(dts_engine_at(e, times[i], log_fn, &l, i, 0), DT_OK);
    ck_assert_int_eq(dts_engine_run(e), DT_OK);
    const int64_t want[] = {6, 1, 3, 7, 4, 0, 2, 5};
    ck_assert_int_eq(l.n, 8);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(l.a[i], want[i]);
    for (int i = 1; i < 8; i++) ck_assert_int_ge(l.t[i], l.t[i - 1]);
    ck_assert_uint_eq(dts_engine_events(e), 8);
    dts_engine_free(e);
}
END_TEST

static void past_fn(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)a;
    (void)b;
    dt_status *st = ctx;
    *st = dts_engine_after(e, -5, past_fn, ctx, 0, 0);
}

START_TEST(test_engine_past)
{
#ifdef NDEBUG
    dts_engine *e = NULL;
    ck_assert_int_eq(dts_engine_create(&e), DT_OK);
    dt_status st = DT_OK;
    ck_assert_int_eq(dts_engine_at(e, 100, past_fn, &st, 0, 0), DT_OK);
    ck_assert_int_eq(dts_engine_run(e), DT_OK);
    ck_assert_int_eq(st, DT_ERR_INVALID);
    dts_engine_free(e);
#else
    (void)past_fn; /* with asserts on, scheduling in the past aborts: checked by the run below in a child */
#endif
}
END_TEST

static void heap_fn(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)e;
    (void)b;
    int64_t *last = ctx;
    ck_assert_int_ge(a, *last);
    *last = a;
}

/* many events in pseudo-random order come out sorted by (time, seq) */
START_TEST(test_engine_heap)
{
    dts_engine *e = NULL;
    ck_assert_int_eq(dts_engine_create(&e), DT_OK);
    uint64_t x = 12345;
    int64_t last = -1;
    for (int i = 0; i < 100000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const int64_t t = (int64_t)(x >> 44);
        ck_assert_int_eq(dts_engine_at(e, t, heap_fn, &last, t, 0), DT_OK);
    }
    ck_assert_int_eq(dts_engine_run(e), DT_OK);
    ck_assert_uint_eq(dts_engine_events(e), 100000);
    dts_engine_free(e);
}
END_TEST

/* ---- links and collectives ---------------------------------------------- */

static dts_hw flat_hw(double alpha_ns, double bytes_per_ns) { return dt_test_flat_hw(alpha_ns, bytes_per_ns); }

START_TEST(test_net_fifo)
{
    dts_hw hw = flat_hw(1000, 2.0);
    dts_net net;
    ck_assert_int_eq(dts_net_init(&net, 4, &hw, 1.0), DT_OK);
    /* one message: α + S/β */
    ck_assert_int_eq(dts_net_send(&net, 0, 1, 4000, 0, NULL), 1000 + 2000);
    /* two more into rank 1's receiving port at time 0: they queue behind the first */
    ck_assert_int_eq(dts_net_send(&net, 2, 1, 4000, 0, NULL), 2000 + 2000 + 1000);
    ck_assert_int_eq(dts_net_send(&net, 3, 1, 4000, 0, NULL), 4000 + 2000 + 1000);
    /* another port pair is free */
    ck_assert_int_eq(dts_net_send(&net, 1, 0, 4000, 0, NULL), 3000);
    dts_net_free(&net);
}
END_TEST

typedef struct coll_ctx {
    int64_t done_at[64];
    int n_done;
    int steps_seen;
} coll_ctx;

static void coll_done(dts_engine *e, void *ctx, int member)
{
    coll_ctx *c = ctx;
    c->done_at[member] = dts_engine_now(e);
    c->n_done++;
}

static void coll_step(void *ctx, int member, const char *phase, int step, int peer, int64_t bytes, int64_t t0,
                      int64_t t1)
{
    (void)member;
    (void)phase;
    (void)step;
    (void)peer;
    (void)bytes;
    coll_ctx *c = ctx;
    ck_assert_int_ge(t1, t0);
    c->steps_seen++;
}

static void arrive_fn(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)e;
    (void)b;
    dts_coll_arrive(ctx, (int)a);
}

/* Run one collective of n members arriving at 0; returns the last done time. */
static int64_t run_coll(dts_coll_kind kind, int n, int64_t bytes, int64_t chunk, double alpha, double beta,
                        int *steps_out, int *steps_seen)
{
    dts_hw hw = flat_hw(alpha, beta);
    dts_engine *e = NULL;
    ck_assert_int_eq(dts_engine_create(&e), DT_OK);
    dts_net net;
    ck_assert_int_eq(dts_net_init(&net, n, &hw, 1.0), DT_OK);
    int ranks[64];
    for (int i = 0; i < n; i++) ranks[i] = i;
    coll_ctx cc = {.n_done = 0};
    dts_coll *c = NULL;
    ck_assert_int_eq(dts_coll_create(e, &net, kind, n, ranks, bytes, chunk, coll_done, coll_step, &cc, &c), DT_OK);
    for (int i = 0; i < n; i++) ck_assert_int_eq(dts_engine_at(e, 0, arrive_fn, c, i, 0), DT_OK);
    ck_assert_int_eq(dts_engine_run(e), DT_OK);
    ck_assert_int_eq(cc.n_done, n);
    int64_t last = 0;
    for (int i = 0; i < n; i++)
        if (cc.done_at[i] > last) last = cc.done_at[i];
    if (steps_out) *steps_out = dts_coll_steps(c);
    if (steps_seen) *steps_seen = cc.steps_seen;
    dts_coll_free(c);
    dts_net_free(&net);
    dts_engine_free(e);
    return last;
}

/* Ring allreduce = 2(n-1)·α + 2(n-1)/n·S/β exactly (S divisible by 4n). */
START_TEST(test_ring_formula)
{
    const int ns[] = {2, 3, 4, 5, 8, 16, 32};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        const int n = ns[k];
        const int64_t S = (int64_t)4 * n * 25000; /* 4n · 25000 bytes: segments of 100 000 bytes */
        const double alpha = 5000, beta = 2.0;
        int steps = 0, seen = 0;
        const int64_t t = run_coll(DTS_COLL_RING_ALLREDUCE, n, S, 0, alpha, beta, &steps, &seen);
        const double want = 2.0 * (n - 1) * alpha + 2.0 * (n - 1) / n * (double)S / beta;
        ck_assert_int_eq(steps, 2 * (n - 1));
        ck_assert_int_eq(seen, n * 2 * (n - 1)); /* one trace span per member and step */
        ck_assert_msg(llabs(t - (int64_t)want) <= 2 * (n - 1), "n=%d: %lld ns, formula %.0f", n, (long long)t, want);
    }
}
END_TEST

/* Chunks pipeline the ring across steps: without latency the link is the
 * bound, 2(n-1)·seg/β either way; with latency the chunked ring hides most
 * of the 2(n-1) latencies behind the transfers and is faster. */
START_TEST(test_ring_chunked)
{
    const int n = 4, C = 8;
    const int64_t seg = 4 * 80000, S = seg * n; /* chunks of 40 000 bytes */
    const int64_t t0 = run_coll(DTS_COLL_RING_ALLREDUCE, n, S, seg / C, 0, 1.0, NULL, NULL);
    ck_assert_msg(llabs(t0 - 2 * (n - 1) * seg) <= 2 * (n - 1) * C, "%lld vs %lld", (long long)t0,
                  (long long)(2 * (n - 1) * seg));
    const double alpha = 40000; /* one chunk's wire time */
    const int64_t tc = run_coll(DTS_COLL_RING_ALLREDUCE, n, S, seg / C, alpha, 1.0, NULL, NULL);
    const int64_t t1 = run_coll(DTS_COLL_RING_ALLREDUCE, n, S, 0, alpha, 1.0, NULL, NULL);
    ck_assert_int_eq(t1, 2 * (n - 1) * (int64_t)alpha + 2 * (n - 1) * seg);
    ck_assert_msg(tc < t1 && tc >= 2 * (n - 1) * seg, "chunked %lld, whole %lld", (long long)tc, (long long)t1);
}
END_TEST

/* Tree (halving-doubling, n = 2^k): 2·log2(n)·α + 2(n-1)/n·S/β. Naive: the
 * root's port takes n-1 whole buffers, then ceil(log2 n) broadcast rounds. */
START_TEST(test_tree_naive_formula)
{
    const double alpha = 3000, beta = 4.0;
    for (int n = 2; n <= 16; n *= 2) {
        const int64_t S = (int64_t)4 * 16 * 10000;
        int lg = 0;
        while ((1 << lg) < n) lg++;
        const double tree = 2.0 * lg * alpha + 2.0 * (n - 1) / n * (double)S / beta;
        const int64_t t = run_coll(DTS_COLL_TREE_ALLREDUCE, n, S, 0, alpha, beta, NULL, NULL);
        ck_assert_msg(llabs(t - (int64_t)tree) <= 4 * lg, "tree n=%d: %lld vs %.0f", n, (long long)t, tree);
        const double naive = (n - 1) * (double)S / beta + alpha + lg * (alpha + (double)S / beta);
        const int64_t tn = run_coll(DTS_COLL_NAIVE_ALLREDUCE, n, S, 0, alpha, beta, NULL, NULL);
        ck_assert_msg(llabs(tn - (int64_t)naive) <= 2 * n, "naive n=%d: %lld vs %.0f", n, (long long)tn, naive);
    }
    /* n = 6 (not a power of two): fold and unfold add two whole-buffer
     * messages; and member 2, which has nothing to fold, sends its first
     * halving message (S/2) to member 0 at once, ahead of member 4's fold
     * message on member 0's receiving port: + S/(2β) on the critical path */
    const int64_t S = 4 * 12 * 1000;
    const double want = 2 * (alpha + S / beta) + 2.0 * 2 * alpha + 2.0 * 3 / 4 * (double)S / beta + S / 2 / beta;
    const int64_t t = run_coll(DTS_COLL_TREE_ALLREDUCE, 6, S, 0, alpha, beta, NULL, NULL);
    ck_assert_msg(llabs(t - (int64_t)want) <= 16, "tree n=6: %lld vs %.0f", (long long)t, want);
}
END_TEST

/* ---- the executor ------------------------------------------------------- */

static void fixed_scenario(dts_scenario *sc, int L, int p, int m, int steps, dt_sched_kind kind, int64_t F, int64_t Bw)
{
    dt_test_fixed_scenario(sc, L, p, m, steps, kind, F, Bw);
}

/* gpipe and 1f1b, equal stages: every stage's forward/backward bubble is (p-1)/(m+p-1). */
START_TEST(test_bubble_formula)
{
    const dt_sched_kind kinds[] = {DT_SCHED_GPIPE, DT_SCHED_1F1B};
    int cases = 0;
    for (int k = 0; k < 2; k++)
        for (int p = 2; p <= 8; p *= 2)
            for (int m = 1; m <= 32; m *= 2) {
                dts_scenario sc;
                fixed_scenario(&sc, p, p, m, 3, kinds[k], 1000, 2000);
                dts_summary s;
                ck_assert_msg(dts_run(&sc, NULL, &s) == DT_OK, "%s p=%d m=%d: %s", dt_sched_kind_name(kinds[k]), p, m,
                              dt_last_error());
                const double f = (double)(p - 1) / (m + p - 1);
                ck_assert(fabs(s.bubble_formula - f) < 1e-12);
                for (int st = 0; st < p; st++)
                    ck_assert_msg(fabs(s.bubble_fb[st] - f) < 1e-9, "%s p=%d m=%d stage %d: %.6f vs %.6f",
                                  dt_sched_kind_name(kinds[k]), p, m, st, s.bubble_fb[st], f);
                /* step time: (m + p - 1)(F + B) */
                ck_assert_msg(fabs(s.step_ns - (double)(m + p - 1) * 3000) < 1e-6, "step %.1f", s.step_ns);
                dts_summary_free(&s);
                cases++;
            }
    ck_assert_int_eq(cases, 2 * 3 * 6);
}
END_TEST

/* The chunked and split-backward kinds on L equal blocks (forward F, backward 2F, half of it the
 * weight gradients: F = B = W), free links: every stage's forward/backward bubble and the step time
 * are the generator's exact unit-cost values (tests/check_schedule_zb.c), and with one model
 * (L = 2p blocks) and m >= 2p the four flushing kinds order 1f1b > interleaved-1f1b > zb-h1 > zb-v. */
static void split_costs(dts_scenario *sc, int64_t W)
{
    for (int l = 0; l < sc->model.num_layers; l++) sc->cost.bwd_w_ns[l + 1] = W;
}

/* The most activation bytes each stage held (rank = stage with t = d = 1), from the memory counters. */
static void peak_activations(const dts_summary *s, int p, double *out)
{
    for (int r = 0; r < p; r++) out[r] = 0;
    for (size_t i = 0; i < s->n_ev; i++)
        if (s->ev[i].ph == DT_TRACE_COUNTER && !strcmp(s->ev[i].name, "memory") && s->ev[i].pid < p) {
            const double a = dt_trace_event_arg(&s->ev[i], "activations", 0);
            if (a > out[s->ev[i].pid]) out[s->ev[i].pid] = a;
        }
}

START_TEST(test_bubble_chunks)
{
    const int64_t F = 1000;
    for (int p = 2; p <= 4; p++)
        for (int m = p; m <= 4 * p; m += p) {
            double got[4][8], step[4];
            const dt_sched_kind kinds[4] = {DT_SCHED_1F1B, DT_SCHED_INTERLEAVED_1F1B, DT_SCHED_ZB_H1, DT_SCHED_ZB_V};
            for (int k = 0; k < 4; k++) {
                dts_scenario sc;
                fixed_scenario(&sc, 2 * p, p, m, 3, kinds[k], F, 2 * F);
                split_costs(&sc, F);
                dts_summary s;
                ck_assert_msg(dts_run(&sc, NULL, &s) == DT_OK, "%s p=%d m=%d: %s", dt_sched_kind_name(kinds[k]), p, m,
                              dt_last_error());
                const double f = dt_schedule_bubble_ideal_chunks(kinds[k], p, dt_sched_default_chunks(kinds[k]), m, 1);
                ck_assert(fabs(s.bubble_formula - f) < 1e-12);
                ck_assert_int_eq(s.v, dt_sched_default_chunks(kinds[k]));
                for (int st = 0; st < p; st++) {
                    ck_assert_msg(fabs(s.bubble_fb[st] - f) < 1e-9, "%s p=%d m=%d stage %d: %.6f vs %.6f",
                                  dt_sched_kind_name(kinds[k]), p, m, st, s.bubble_fb[st], f);
                    got[k][st] = s.bubble_fb[st];
                }
                /* the step: the stage's work 6mF (2 blocks of F + 2F) over 1 - bubble */
                step[k] = s.step_ns;
                ck_assert_msg(fabs(s.step_ns * (1 - f) - 6.0 * m * F) < 1e-3, "%s p=%d m=%d: step %.1f",
                              dt_sched_kind_name(kinds[k]), p, m, s.step_ns);
                dts_summary_free(&s);
            }
            if (m < 2 * p) continue; /* below, zb-v's fill can match zb-h1's (p = 2, m = 2: both 1/7) */
            for (int st = 0; st < p; st++)
                ck_assert_msg(got[0][st] > got[1][st] && got[1][st] > got[2][st] && got[2][st] > got[3][st],
                              "p=%d m=%d stage %d: %.4f %.4f %.4f %.4f", p, m, st, got[0][st], got[1][st], got[2][st],
                              got[3][st]);
            ck_assert(step[0] > step[1] && step[1] > step[2] && step[2] > step[3]);
        }
    /* exact values of one case: p = 4, m = 8, 8 blocks */
    const double want[4] = {3.0 / 11, 3.0 / 19, 3.0 / 27, 3.0 / 51};
    const dt_sched_kind kinds[4] = {DT_SCHED_1F1B, DT_SCHED_INTERLEAVED_1F1B, DT_SCHED_ZB_H1, DT_SCHED_ZB_V};
    for (int k = 0; k < 4; k++) {
        dts_scenario sc;
        fixed_scenario(&sc, 8, 4, 8, 2, kinds[k], F, 2 * F);
        split_costs(&sc, F);
        dts_summary s;
        ck_assert_int_eq(dts_run(&sc, NULL, &s), DT_OK);
        for (int st = 0; st < 4; st++) ck_assert(fabs(s.bubble_fb[st] - want[k]) < 1e-9);
        dts_summary_free(&s);
    }
}
END_TEST

/* Interleaved with v = 4 (--virtual-pipeline-model-parallel-size) and from
 * --num-layers-per-virtual-pipeline-stage: (p-1)/(v*m+p-1). */
START_TEST(test_bubble_interleaved_v)
{
    for (int v = 2; v <= 4; v++) {
        dts_scenario sc;
        fixed_scenario(&sc, 36, 3, 6, 2, DT_SCHED_INTERLEAVED_1F1B, 1000, 2000);
        if (v == 4) sc.vpp_layers = 3; /* 36 / (3 x 3) = 4 */
        else sc.vpp = v;
        dts_summary s;
        ck_assert_msg(dts_run(&sc, NULL, &s) == DT_OK, "%s", dt_last_error());
        ck_assert_int_eq(s.v, v);
        const double f = 2.0 / (v * 6 + 2);
        for (int st = 0; st < 3; st++)
            ck_assert_msg(fabs(s.bubble_fb[st] - f) < 1e-9, "v=%d stage %d: %.6f vs %.6f", v, st, s.bubble_fb[st], f);
        dts_summary_free(&s);
    }
    dts_scenario sc;
    fixed_scenario(&sc, 10, 3, 6, 1, DT_SCHED_INTERLEAVED_1F1B, 1000, 2000);
    ck_assert_int_eq(dts_scenario_check(&sc), DT_ERR_INVALID); /* 10 blocks over 3 x 2 */
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--num-layers 10"));
    fixed_scenario(&sc, 12, 3, 4, 1, DT_SCHED_INTERLEAVED_1F1B, 1000, 2000);
    ck_assert_int_eq(dts_scenario_check(&sc), DT_ERR_INVALID); /* m = 4, not a multiple of 3 */
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "micro-batches per step 4"));
}
END_TEST

/* The most one device holds, walking its instruction list in order (the
 * memory of a unit depends on its order only): a chunk-micro-batch of
 * virtual stage q holds fwd[q] from its FORWARD to its BACKWARD or
 * BACKWARD_W, and keep[q] more from its BACKWARD_B to its BACKWARD_W. */
static double walk_peak(const dt_schedule *S, int r, const double *fwd, const double *keep)
{
    double held = 0, peak = 0;
    for (int i = 0; i < S->count[r]; i++) {
        const dt_sched_instr *in = &S->instr[r][i];
        const int q = S->vstage[r * S->v + in->chunk];
        if (in->op == DT_SCHED_FORWARD) held += fwd[q];
        else if (in->op == DT_SCHED_BACKWARD_B) held += keep[q];
        else if (in->op == DT_SCHED_BACKWARD) held -= fwd[q];
        else if (in->op == DT_SCHED_BACKWARD_W) held -= fwd[q] + keep[q];
        if (held > peak) peak = held;
    }
    return peak;
}

/* Activation memory: a chunk-micro-batch is held from its FORWARD to its
 * BACKWARD (or BACKWARD_W). A split backward's B (FP32, no recomputation:
 * lib/model/runner_backward.c) leaves 4 (B,T,C) and its fc layer's
 * output gradient (B,T,4C) per block for its W,
 * plus the final LayerNorm's output gradient on the last virtual stage
 * and the embedding output's gradient on the first: zb-h1 holds p
 * micro-batches on every stage and zb-v 2p half-stage chunks on every
 * device (1f1b's first-stage peak) and what their B kept. */
START_TEST(test_memory_chunks)
{
    const int p = 4, m = 8;
    double one[4], act[4];
    const dt_sched_kind kinds[3] = {DT_SCHED_ZB_H1, DT_SCHED_ZB_V, DT_SCHED_INTERLEAVED_1F1B};
    dts_scenario sc;
    fixed_scenario(&sc, 2 * p, p, m, 1, DT_SCHED_1F1B, 1000, 2000);
    dts_run_opts o = {.keep_events = 1};
    dts_summary s;
    ck_assert_int_eq(dts_run(&sc, &o, &s), DT_OK);
    peak_activations(&s, p, one);
    for (int r = 0; r < p; r++) ck_assert(fabs(one[r] * p - one[0] * (p - r)) < 1e-6); /* p - r micro-batches */
    dts_summary_free(&s);
    const double block = one[0] / (2 * p), btc = 4.0 * sc.B * sc.T * sc.model.hidden_size; /* no head, embedding */
    for (int k = 0; k < 3; k++) {
        fixed_scenario(&sc, 2 * p, p, m, 1, kinds[k], 1000, 2000);
        split_costs(&sc, 1000);
        ck_assert_int_eq(dts_run(&sc, &o, &s), DT_OK);
        peak_activations(&s, p, act);
        dt_schedule *S = NULL;
        ck_dt(dt_schedule_make(kinds[k], p, m, 1, &S));
        const int Q = p * S->v, nb = 2 / S->v;
        double fwd[8], keep[8];
        for (int q = 0; q < Q; q++) {
            fwd[q] = nb * block;
            keep[q] = nb * 8 * btc + (q == 0) * btc + (q == Q - 1) * btc;
        }
        for (int r = 0; r < p; r++) {
            /* each chunk-micro-batch holds 2/v blocks: one[0] / p per block pair */
            const double held = one[0] / p * S->max_in_flight[r] / S->v;
            const double want = walk_peak(S, r, fwd, keep);
            ck_assert_msg(fabs(act[r] - want) < 1e-6, "%s stage %d: %.0f vs %.0f", dt_sched_kind_name(kinds[k]), r,
                          act[r], want);
            if (kinds[k] == DT_SCHED_INTERLEAVED_1F1B) ck_assert(fabs(act[r] - held) < 1e-6);
            else ck_assert(fabs(held - one[0]) < 1e-6 && act[r] > one[0]);
        }
        dt_schedule_free(S);
        dts_summary_free(&s);
    }
}
END_TEST

/* A pipeline step ends with the world allreduce of the loss (lib/parallel/pipeline.c:
 * 8 bytes, a ring over every rank): the summary reports its cost, 2(n-1)·α
 * + 2(n-1)/n·8/β. */
START_TEST(test_world_sync)
{
    const int p = 4, m = 4;
    const double alpha = 5000, beta = 2.0;
    dts_scenario sc;
    fixed_scenario(&sc, p, p, m, 3, DT_SCHED_1F1B, 1000, 2000);
    sc.hw = dt_test_flat_hw(alpha, beta);
    dts_summary s;
    ck_assert_msg(dts_run(&sc, NULL, &s) == DT_OK, "%s", dt_last_error());
    const double want = 2.0 * (p - 1) * alpha + 2.0 * (p - 1) / p * 8.0 / beta;
    ck_assert_msg(fabs(s.world_sync_ns - want) <= 2 * (p - 1), "world sync %.1f ns, formula %.1f", s.world_sync_ns,
                  want);
    dts_summary_free(&s);
}
END_TEST

/* Shared cores (--cores-per-node): two data-parallel ranks that always
 * compute together on one core take exactly twice as long; a 1F1B pipeline
 * of two stages on one core lies between a core per stage and twice that,
 * and no faster than its total work on one core. */
START_TEST(test_shared_cores)
{
    dts_scenario sc;
    dts_summary s;
    double step[2];
    for (int cores = 0; cores <= 1; cores++) {
        fixed_scenario(&sc, 2, 1, 2, 3, DT_SCHED_1F1B, 1000, 2000);
        sc.d = 2;
        sc.hw.cores_per_node = cores;
        ck_assert_msg(dts_run(&sc, NULL, &s) == DT_OK, "%s", dt_last_error());
        step[cores] = s.step_ns;
        dts_summary_free(&s);
    }
    ck_assert_msg(fabs(step[1] - 2 * step[0]) <= 10, "d = 2 on one core: %.0f ns, alone %.0f ns", step[1], step[0]);
    const int L = 2, p = 2, m = 4;
    for (int cores = 0; cores <= 1; cores++) {
        fixed_scenario(&sc, L, p, m, 3, DT_SCHED_1F1B, 1000, 2000);
        sc.hw.cores_per_node = cores;
        ck_assert_msg(dts_run(&sc, NULL, &s) == DT_OK, "%s", dt_last_error());
        step[cores] = s.step_ns;
        dts_summary_free(&s);
    }
    ck_assert(fabs(step[0] - (m + p - 1) * 3000.0) < 1e-6);
    const double work = (double)m * L * 3000; /* every forward and backward of a step, one after the other */
    ck_assert_msg(step[1] >= work - 10 && step[1] < 2 * step[0], "p = 2 on one core: %.0f ns (work %.0f, alone %.0f)",
                  step[1], work, step[0]);
    /* more cores than ranks: nothing changes */
    fixed_scenario(&sc, L, p, m, 3, DT_SCHED_1F1B, 1000, 2000);
    sc.hw.cores_per_node = 2;
    ck_assert(dts_run(&sc, NULL, &s) == DT_OK);
    ck_assert(fabs(s.step_ns - step[0]) < 1e-6);
    dts_summary_free(&s);
}
END_TEST

/* PipeDream keeps p - s weight versions alive on stage s (msr-fiddle/pipedream's
 * num_versions = warm-up + 1): the generator stashes a copy of each of them
 * (the current weights move on while in-flight micro-batches still need
 * theirs), and the last stage, whose backward follows its forward at once,
 * stashes none. gpipe and 1f1b never stash. */
START_TEST(test_stash_depth)
{
    for (int p = 2; p <= 6; p++) {
        dts_scenario sc;
        fixed_scenario(&sc, p, p, 8, 4, DT_SCHED_PIPEDREAM, 1000, 2000);
        dts_summary s;
        ck_assert_int_eq(dts_run(&sc, NULL, &s), DT_OK);
        for (int st = 0; st < p; st++)
            ck_assert_msg(s.max_stash[st] == (st == p - 1 ? 0 : p - st), "p=%d stage %d: %d stashed", p, st,
                          s.max_stash[st]);
        dts_summary_free(&s);
        fixed_scenario(&sc, p, p, 8, 2, DT_SCHED_1F1B, 1000, 2000);
        ck_assert_int_eq(dts_run(&sc, NULL, &s), DT_OK);
        for (int st = 0; st < p; st++) ck_assert_int_eq(s.max_stash[st], 0);
        dts_summary_free(&s);
    }
}
END_TEST

/* The same scenario twice gives the same trace, byte for byte. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

START_TEST(test_deterministic)
{
    char p1[] = "/tmp/dtsim-det-XXXXXX", p2[] = "/tmp/dtsim-det-XXXXXX";
    int f1 = mkstemp(p1), f2 = mkstemp(p2);
    ck_assert(f1 >= 0 && f2 >= 0);
    close(f1);
    close(f2);
    dts_scenario sc;
    fixed_scenario(&sc, 4, 2, 4, 3, DT_SCHED_1F1B, 1000, 2000);
    sc.d = 2;
    sc.hw = flat_hw(700, 1.5);
    const char *paths[] = {p1, p2};
    for (int i = 0; i < 2; i++) {
        dts_run_opts o = {.trace_path = paths[i]};
        dts_summary s;
        ck_assert_msg(dts_run(&sc, &o, &s) == DT_OK, "%s", dt_last_error());
        dts_summary_free(&s);
    }
    size_t n1, n2;
    char *a = slurp(p1, &n1), *b = slurp(p2, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert(memcmp(a, b, n1) == 0);
    ck_assert_ptr_nonnull(strstr(a, "\"tool\":\"dtsim\""));
    free(a);
    free(b);
    unlink(p1);
    unlink(p2);
}
END_TEST

/* A schedule whose stage waits for a gradient before sending the forward
 * that would produce it: reported as a deadlock, naming the stage. */
START_TEST(test_deadlock)
{
    dt_schedule *sch = NULL;
    ck_assert_int_eq(dt_schedule_make(DT_SCHED_GPIPE, 2, 2, 1, &sch), DT_OK);
    /* on stage 0 move the first RECV_GRAD to the front */
    dt_sched_instr *l = sch->instr[0];
    int g = -1;
    for (int i = 0; i < sch->count[0]; i++)
        if (l[i].op == DT_SCHED_RECV_GRAD) {
            g = i;
            break;
        }
    ck_assert_int_gt(g, 0);
    dt_sched_instr tmp = l[g];
    memmove(&l[1], &l[0], (size_t)g * sizeof *l);
    l[0] = tmp;
    dts_scenario sc;
    fixed_scenario(&sc, 2, 2, 2, 1, DT_SCHED_GPIPE, 1000, 2000);
    dts_run_opts o = {.schedule = sch};
    dts_summary s;
    ck_assert_int_eq(dts_run(&sc, &o, &s), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "deadlock"));
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "stage 0"));
    dt_schedule_free(sch);
}
END_TEST

/* ps-sync, one worker and one server, every cost a round figure
 * (α = 2 µs, β = 0.5 B/ns, M = 16 000 B so M/β = 32 µs, a header of 80 B
 * is 0.16 µs on the wire, compute C = 6 µs, update U = 8 µs). One cycle,
 * from the server's update ending at t = 0:
 *   reply header then data leave the server's port by 32.16 µs (the server
 *   waits for its sends, then polls from 32.16 µs), reach the worker at
 *   34.16; it computes to 40.16 and posts its push header, which arrives at
 *   42.32; the server's polls (lib/parallel/ps.c: at once, then after 20 µs, 40 µs,
 *   ...) find it at 52.16; it posts the gradient's receive, the gradient
 *   moves (32 µs + α) and arrives at 86.16; the new wait polls at 72.16,
 *   then 112.16: found; the update ends at 120.16 µs = the step period. */
START_TEST(test_ps_sync_formula)
{
    double prev = 0;
    for (int W = 1; W <= 4; W++) {
        dts_scenario sc;
        fixed_scenario(&sc, 2, 1, 1, 6, DT_SCHED_GPIPE, 1000, 2000);
        sc.d = W;
        sc.exchange = DTS_EX_PS_SYNC;
        snprintf(sc.exchange_name, sizeof sc.exchange_name, "ps-sync");
        sc.num_ps_servers = 1;
        const double alpha = 2000, beta = 0.5;
        sc.hw = flat_hw(alpha, beta);
        sc.hw.mem_bytes_per_s = 1e18; /* summing the pushes costs nothing here */
        sc.cost.optim_ns_per_param = 2.0;
        dts_summary s;
        ck_assert_msg(dts_run(&sc, NULL, &s) == DT_OK, "%s", dt_last_error());
        const double M = 4.0 * 4000; /* 4 layers' slots of 1000 parameters */
        if (W == 1) ck_assert_msg(fabs(s.step_ns - 120160) <= 2, "W=1: %.1f vs 120160", s.step_ns);
        /* each further worker's push and reply pass through the server's two ports (one in, one out,
         * working at once): the period grows by at least M/β per worker (BytePS: the server is the bottleneck) */
        else ck_assert_msg(s.step_ns >= prev + M / beta - 1, "W=%d: %.1f after %.1f", W, s.step_ns, prev);
        prev = s.step_ns;
        dts_summary_free(&s);
    }
}
END_TEST

/* ps-async: a worker that is k times slower pushes less often, and every
 * push of a fast worker is stale by about the updates the others applied
 * meanwhile. With two equal workers staleness is 1 in the steady state. */
START_TEST(test_ps_async_staleness)
{
    dts_scenario sc;
    fixed_scenario(&sc, 2, 1, 1, 40, DT_SCHED_GPIPE, 100000, 200000);
    sc.d = 2;
    sc.exchange = DTS_EX_PS_ASYNC;
    snprintf(sc.exchange_name, sizeof sc.exchange_name, "ps-async");
    sc.num_ps_servers = 1;
    sc.hw = flat_hw(1000, 10.0);
    dts_summary s;
    ck_assert_msg(dts_run(&sc, NULL, &s) == DT_OK, "%s", dt_last_error());
    ck_assert_int_eq(s.pushes, 80);
    ck_assert_int_eq(s.staleness_max, 1);
    ck_assert(s.staleness_mean > 0.9 && s.staleness_mean <= 1.0);
    dts_summary_free(&s);
    /* worker 1 sleeps 3 steps' compute before each push: worker 0's pushes see 0 or 1 updates,
       worker 1's see about 4 (the updates worker 0 made while it slept and computed) */
    sc.slow_rank = 1;
    sc.slow_ns = 3 * 600000;
    ck_assert_int_eq(dts_run(&sc, NULL, &s), DT_OK);
    ck_assert_int_ge(s.staleness_max, 3);
    ck_assert_int_le(s.staleness_max, 5);
    dts_summary_free(&s);
}
END_TEST

static Suite *sim_suite(void)
{
    Suite *s = suite_create("sim");
    TCase *tc = tcase_create("engine");
    tcase_add_test(tc, test_engine_order);
    tcase_add_test(tc, test_world_sync);
    tcase_add_test(tc, test_shared_cores);
    tcase_add_test(tc, test_engine_past);
    tcase_add_test(tc, test_engine_heap);
    suite_add_tcase(s, tc);
    tc = tcase_create("collectives");
    tcase_add_test(tc, test_net_fifo);
    tcase_add_test(tc, test_ring_formula);
    tcase_add_test(tc, test_ring_chunked);
    tcase_add_test(tc, test_tree_naive_formula);
    suite_add_tcase(s, tc);
    tc = tcase_create("executor");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_bubble_formula);
    tcase_add_test(tc, test_bubble_chunks);
    tcase_add_test(tc, test_bubble_interleaved_v);
    tcase_add_test(tc, test_memory_chunks);
    tcase_add_test(tc, test_stash_depth);
    tcase_add_test(tc, test_deterministic);
    tcase_add_test(tc, test_deadlock);
    tcase_add_test(tc, test_ps_sync_formula);
    tcase_add_test(tc, test_ps_async_staleness);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(sim_suite()); }
