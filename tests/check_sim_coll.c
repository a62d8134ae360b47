/* check_sim_coll.c: the simulator's two collective models (sim/coll.c,
 * sim/coll_analytic.c) against each other, the choice between them
 * (the hardware's "collectives"), and the analytic model's memory.
 *
 * Agreement, with members arriving together and no other traffic:
 * - links all alike (one node) and a buffer that splits evenly (4 n C
 *   divides it): equal to the nanosecond, every algorithm; the analytic
 *   ring's two bounds are then exactly the message model's time;
 * - alike links, an uneven split: segments differ by 4 bytes and chunks by
 *   a byte, each message rounded to the ns: within H (C + 1 + 4/β) ns
 *   (H steps of C chunks; the analytic ring prices every segment at the
 *   largest);
 * - across nodes (devices_per_node < n): tree and naive replay the
 *   message model's steps member by member, so still equal; the ring's
 *   two bounds are lower bounds, so the analytic time is never above the
 *   message model's (beyond the rounding above), and the message model is
 *   above it only by how long ports wait for one another where fast and
 *   slow links meet: at most 5% over this matrix (measured worst 4.97%:
 *   devices_per_node 2, n = 4, 1 MiB in 64 KiB chunks).
 * Memory: an analytic instance holds O(n) bytes (4096 members: < 100 per
 * member, 4x the members 4x the bytes); a message-level ring O(n^2). */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dts_coll.h"
#include "dts_engine.h"
#include "dts_hw.h"
#include "dts_net.h"
#include "dts_run.h"
#include "simtest.h"
#include "testutil.h"

#define MAXN 4096

typedef struct cc {
    int64_t *done_at; /* (n) */
    int n_done;
    int calls;
    int64_t *bytes;   /* (n, 4) bytes per member and phase (reduce-scatter, all-gather, reduce, broadcast) */
    int64_t *span_ns; /* (n) sum of the member's step spans */
    int bad_span;     /* a span that ends before it starts */
} cc;

static int phase_index(const char *phase)
{
    static const char *const names[] = {"reduce-scatter", "all-gather", "reduce", "broadcast"};
    for (int k = 0; k < 4; k++)
        if (!strcmp(phase, names[k])) return k;
    return -1;
}

static void on_done(dts_engine *e, void *ctx, int member)
{
    cc *c = ctx;
    c->done_at[member] = dts_engine_now(e);
    c->n_done++;
}

static void on_step(void *ctx, int member, const char *phase, int step, int peer, int64_t bytes, int64_t t0, int64_t t1)
{
    (void)step;
    (void)peer;
    cc *c = ctx;
    const int k = phase_index(phase);
    ck_assert_int_ge(k, 0);
    c->bytes[(size_t)member * 4 + k] += bytes;
    c->span_ns[member] += t1 - t0;
    if (t1 < t0) c->bad_span = 1;
    c->calls++;
}

static void arrive_fn(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)e;
    (void)b;
    dts_coll_arrive(ctx, (int)a);
}

/* One collective of n members arriving at 0 (or at `stagger` * member ns)
 * under hw with model `model`; fills c (caller frees its arrays with
 * cc_free); returns the last done time. */
typedef struct run_out {
    int64_t last;
    int64_t net_bytes, net_messages; /* the net's totals after the collective */
    uint64_t events;
    size_t bytes;
    char model[16];
} run_out;

static void cc_init(cc *c, int n)
{
    memset(c, 0, sizeof *c);
    c->done_at = calloc((size_t)n, sizeof *c->done_at);
    c->bytes = calloc((size_t)n * 4, sizeof *c->bytes);
    c->span_ns = calloc((size_t)n, sizeof *c->span_ns);
    ck_assert(c->done_at && c->bytes && c->span_ns);
}

static void cc_free(cc *c)
{
    free(c->done_at);
    free(c->bytes);
    free(c->span_ns);
}

static run_out run_coll(dts_hw hw, dts_hw_coll model, dts_coll_kind kind, int n, int64_t bytes, int64_t chunk,
                        int64_t stagger, cc *c)
{
    hw.collectives = model;
    dts_engine *e = NULL;
    ck_assert_int_eq(dts_engine_create(&e), DT_OK);
    dts_net net;
    ck_assert_int_eq(dts_net_init(&net, n, &hw, 1.0), DT_OK);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    ck_assert(ranks);
    for (int i = 0; i < n; i++) ranks[i] = i;
    cc_init(c, n);
    dts_coll *co = NULL;
    ck_assert_int_eq(dts_coll_create(e, &net, kind, n, ranks, bytes, chunk, on_done, on_step, c, &co), DT_OK);
    run_out r = {.bytes = dts_coll_bytes(co)};
    snprintf(r.model, sizeof r.model, "%s", dts_coll_model(co));
    for (int i = 0; i < n; i++) ck_assert_int_eq(dts_engine_at(e, stagger * i, arrive_fn, co, i, 0), DT_OK);
    ck_assert_int_eq(dts_engine_run(e), DT_OK);
    ck_assert_int_eq(c->n_done, n);
    ck_assert_int_eq(dts_coll_done_count(co), n);
    ck_assert_int_eq(c->bad_span, 0);
    for (int i = 0; i < n; i++)
        if (c->done_at[i] > r.last) r.last = c->done_at[i];
    r.events = dts_engine_events(e);
    r.net_bytes = net.bytes;
    r.net_messages = net.messages;
    dts_coll_free(co);
    dts_net_free(&net);
    dts_engine_free(e);
    free(ranks);
    return r;
}

static const char *const kind_names[] = {"ring", "tree", "naive", "reduce-scatter", "all-gather"};
static const int sizes_n[] = {2, 3, 4, 8, 16, 64};
#define N_SIZES ((int)(sizeof sizes_n / sizeof *sizes_n))

static int is_ring(dts_coll_kind k)
{
    return k == DTS_COLL_RING_ALLREDUCE || k == DTS_COLL_REDUCE_SCATTER || k == DTS_COLL_ALL_GATHER;
}

/* H (steps) and C (chunks per segment) of a ring, for the rounding bound */
static int64_t ring_round_ns(dts_coll_kind k, int n, int64_t bytes, int64_t chunk, double beta)
{
    const int64_t H = (k == DTS_COLL_RING_ALLREDUCE ? 2 : 1) * (n - 1);
    const int64_t seg = 4 * ((bytes / 4 + n - 1) / n), C = chunk > 0 ? (seg + chunk - 1) / chunk : 1;
    return H * (C + 1 + (int64_t)ceil(4.0 / beta));
}

/* ---- agreement -------------------------------------------------------------- */

/* One node, an even split: equal, every member's done time, every kind, with and without chunks. */
START_TEST(test_agree_alike_even)
{
    const dts_hw hw = dt_test_flat_hw(5000, 2.0);
    int cases = 0;
    for (int k = 0; k <= DTS_COLL_ALL_GATHER; k++)
        for (int ni = 0; ni < N_SIZES; ni++)
            for (int ch = 0; ch < 2; ch++) {
                const int n = sizes_n[ni];
                if (ch && !is_ring((dts_coll_kind)k)) continue;           /* only the ring chunks */
                const int64_t chunk = ch ? 16000 : 0;                     /* 4 chunks of each 64000-byte segment */
                const int64_t S = (int64_t)n * 64000 * (k == 1 ? 64 : 1); /* tree: halvings stay even */
                cc a, m;
                const run_out rm = run_coll(hw, DTS_HW_COLL_MESSAGES, (dts_coll_kind)k, n, S, chunk, 0, &m);
                const run_out ra = run_coll(hw, DTS_HW_COLL_ANALYTIC, (dts_coll_kind)k, n, S, chunk, 0, &a);
                ck_assert_str_eq(rm.model, "messages");
                ck_assert_str_eq(ra.model, "analytic");
                ck_assert_msg(ra.last == rm.last, "%s n=%d chunk=%lld: analytic %lld ns, messages %lld ns",
                              kind_names[k], n, (long long)chunk, (long long)ra.last, (long long)rm.last);
                for (int i = 0; i < n; i++) {
                    ck_assert_msg(a.done_at[i] == m.done_at[i], "%s n=%d member %d: done %lld vs %lld", kind_names[k],
                                  n, i, (long long)a.done_at[i], (long long)m.done_at[i]);
                    /* each phase's bytes are the sum of its steps' */
                    for (int p = 0; p < 4; p++)
                        ck_assert_msg(a.bytes[i * 4 + p] == m.bytes[i * 4 + p],
                                      "%s n=%d member %d phase %d: %lld vs %lld", kind_names[k], n, i, p,
                                      (long long)a.bytes[i * 4 + p], (long long)m.bytes[i * 4 + p]);
                    /* the member's spans cover its time in the collective, arrival (0) to done */
                    ck_assert_int_eq(a.span_ns[i], a.done_at[i]);
                }
                /* the net counts the bytes and messages the message model moves */
                ck_assert_int_eq(ra.net_bytes, rm.net_bytes);
                ck_assert_int_eq(ra.net_messages, rm.net_messages);
                /* one span per member and phase, against one per member and step */
                if (k == DTS_COLL_RING_ALLREDUCE) {
                    ck_assert_int_eq(a.calls, 2 * n);
                    ck_assert_int_eq(m.calls, 2 * n * (n - 1));
                }
                cc_free(&a);
                cc_free(&m);
                cases++;
            }
    ck_assert_int_eq(cases, N_SIZES * (5 + 3));
}
END_TEST

/* One node, uneven splits: the ring within its rounding, tree and naive equal. */
START_TEST(test_agree_alike_uneven)
{
    const double beta = 2.0;
    const dts_hw hw = dt_test_flat_hw(5000, beta);
    for (int k = 0; k <= DTS_COLL_ALL_GATHER; k++)
        for (int ni = 0; ni < N_SIZES; ni++)
            for (int ch = 0; ch < 2; ch++) {
                const int n = sizes_n[ni];
                if (ch && !is_ring((dts_coll_kind)k)) continue;
                const int64_t chunk = ch ? 65536 : 0, S = 1048588; /* 4 n does not divide it for n >= 8 */
                cc a, m;
                const int64_t tm = run_coll(hw, DTS_HW_COLL_MESSAGES, (dts_coll_kind)k, n, S, chunk, 0, &m).last;
                const int64_t ta = run_coll(hw, DTS_HW_COLL_ANALYTIC, (dts_coll_kind)k, n, S, chunk, 0, &a).last;
                const int64_t tol = is_ring((dts_coll_kind)k) ? ring_round_ns((dts_coll_kind)k, n, S, chunk, beta) : 0;
                ck_assert_msg(llabs(ta - tm) <= tol,
                              "%s n=%d chunk=%lld: analytic %lld, messages %lld (tolerance %lld)", kind_names[k], n,
                              (long long)chunk, (long long)ta, (long long)tm, (long long)tol);
                cc_free(&a);
                cc_free(&m);
            }
}
END_TEST

/* Across nodes: tree and naive equal; the ring a lower bound within 5%. */
START_TEST(test_agree_nodes)
{
    dts_hw hw;
    dts_hw_default(&hw);
    hw.intra = (dts_link){.alpha_ns = 3000, .bytes_per_ns = 450}; /* sim/hw/h100-ib.json's links */
    hw.inter = (dts_link){.alpha_ns = 8000, .bytes_per_ns = 50};
    static const int dpns[] = {8, 4, 2};
    static const int64_t sizes[] = {4096, 1 << 20, 100 << 20}, chunks[] = {0, 1 << 20, 65536};
    double worst = 0;
    int crossing = 0;
    for (int di = 0; di < 3; di++)
        for (int k = 0; k <= DTS_COLL_ALL_GATHER; k++)
            for (int si = 0; si < 3; si++)
                for (int ci = 0; ci < 3; ci++)
                    for (int ni = 0; ni < N_SIZES; ni++) {
                        const int n = sizes_n[ni];
                        hw.devices_per_node = dpns[di];
                        if (n <= dpns[di] || (ci && !is_ring((dts_coll_kind)k))) continue; /* one node: above */
                        cc a, m;
                        const int64_t tm =
                            run_coll(hw, DTS_HW_COLL_MESSAGES, (dts_coll_kind)k, n, sizes[si], chunks[ci], 0, &m).last;
                        const int64_t ta =
                            run_coll(hw, DTS_HW_COLL_ANALYTIC, (dts_coll_kind)k, n, sizes[si], chunks[ci], 0, &a).last;
                        cc_free(&a);
                        cc_free(&m);
                        crossing++;
                        if (!is_ring((dts_coll_kind)k)) {
                            ck_assert_msg(ta == tm, "%s n=%d dpn=%d S=%lld: analytic %lld, messages %lld",
                                          kind_names[k], n, dpns[di], (long long)sizes[si], (long long)ta,
                                          (long long)tm);
                            continue;
                        }
                        const int64_t round = ring_round_ns((dts_coll_kind)k, n, sizes[si], chunks[ci], 50);
                        const double rel = (double)(tm - ta) / (double)tm;
                        if (rel > worst) worst = rel;
                        ck_assert_msg(ta <= tm + round && rel <= 0.05,
                                      "%s n=%d dpn=%d S=%lld chunk=%lld: analytic %lld, messages %lld (%.2f%% low)",
                                      kind_names[k], n, dpns[di], (long long)sizes[si], (long long)chunks[ci],
                                      (long long)ta, (long long)tm, 100 * rel);
                    }
    ck_assert_int_gt(crossing, 300);
    ck_assert_msg(worst > 0.01, "worst %.4f: the matrix no longer has a case where ports wait", worst);
}
END_TEST

/* Staggered arrivals: the analytic model starts at the last one; the message model is never later. */
START_TEST(test_staggered)
{
    const dts_hw hw = dt_test_flat_hw(5000, 2.0);
    const int n = 8;
    const int64_t S = (int64_t)n * 64000, stagger = 10000;
    cc a, m;
    const int64_t tm = run_coll(hw, DTS_HW_COLL_MESSAGES, DTS_COLL_RING_ALLREDUCE, n, S, 0, stagger, &m).last;
    const int64_t ta = run_coll(hw, DTS_HW_COLL_ANALYTIC, DTS_COLL_RING_ALLREDUCE, n, S, 0, stagger, &a).last;
    const int64_t t0 = run_coll(hw, DTS_HW_COLL_ANALYTIC, DTS_COLL_RING_ALLREDUCE, n, S, 0, 0, &a).last;
    ck_assert_int_eq(ta, stagger * (n - 1) + t0);
    ck_assert_int_le(tm, ta);
    ck_assert_int_ge(tm, t0);
    cc_free(&a);
    cc_free(&m);
}
END_TEST

/* ---- memory and events -------------------------------------------------------- */

START_TEST(test_memory_linear)
{
    const dts_hw hw = dt_test_flat_hw(5000, 2.0);
    cc c;
    const int64_t S = (int64_t)MAXN * 4 * 1000;
    const run_out big = run_coll(hw, DTS_HW_COLL_ANALYTIC, DTS_COLL_RING_ALLREDUCE, MAXN, S, 0, 0, &c);
    cc_free(&c);
    const run_out quarter = run_coll(hw, DTS_HW_COLL_ANALYTIC, DTS_COLL_RING_ALLREDUCE, MAXN / 4, S, 0, 0, &c);
    cc_free(&c);
    ck_assert_msg(big.bytes < (size_t)100 * MAXN, "%zu bytes for %d members", big.bytes, MAXN);
    ck_assert_msg(big.bytes <= 4 * quarter.bytes, "%zu bytes for %d members, %zu for %d", big.bytes, MAXN,
                  quarter.bytes, MAXN / 4);
    /* events: n arrivals and one per member and phase */
    ck_assert_uint_eq(big.events, 3 * (uint64_t)MAXN);
    /* the message model's tables grow as n^2: 4x the members, ~16x the bytes */
    const run_out m64 = run_coll(hw, DTS_HW_COLL_MESSAGES, DTS_COLL_RING_ALLREDUCE, 64, S, 0, 0, &c);
    cc_free(&c);
    const run_out m16 = run_coll(hw, DTS_HW_COLL_MESSAGES, DTS_COLL_RING_ALLREDUCE, 16, S, 0, 0, &c);
    cc_free(&c);
    ck_assert_msg(m64.bytes > 12 * m16.bytes, "messages: %zu bytes for 64 members, %zu for 16", m64.bytes, m16.bytes);
    ck_assert_uint_gt(m64.events, 64 * 2 * 63);
    /* tree and naive: linear too */
    for (int k = DTS_COLL_TREE_ALLREDUCE; k <= DTS_COLL_NAIVE_ALLREDUCE; k++) {
        const run_out t = run_coll(hw, DTS_HW_COLL_ANALYTIC, (dts_coll_kind)k, MAXN, S, 0, 0, &c);
        cc_free(&c);
        ck_assert_msg(t.bytes < (size_t)100 * MAXN, "%s: %zu bytes", kind_names[k], t.bytes);
    }
}
END_TEST

/* ---- the choice ---------------------------------------------------------------- */

START_TEST(test_auto_threshold)
{
    dts_hw hw;
    dts_hw_default(&hw);
    ck_assert_int_eq(hw.collectives, DTS_HW_COLL_AUTO);
    ck_assert_int_eq(dts_hw_coll_analytic(&hw, DTS_HW_COLL_AUTO_MAX_MEMBERS), 0);
    ck_assert_int_eq(dts_hw_coll_analytic(&hw, DTS_HW_COLL_AUTO_MAX_MEMBERS + 1), 1);
    cc c;
    const int M = DTS_HW_COLL_AUTO_MAX_MEMBERS;
    ck_assert_int_eq(M, 512); /* docs/simulator.md and dtsim --help say so */
    ck_assert_str_eq(run_coll(hw, DTS_HW_COLL_AUTO, DTS_COLL_RING_ALLREDUCE, M, M * 400, 0, 0, &c).model, "messages");
    cc_free(&c);
    ck_assert_str_eq(run_coll(hw, DTS_HW_COLL_AUTO, DTS_COLL_RING_ALLREDUCE, M + 1, (M + 1) * 400, 0, 0, &c).model,
                     "analytic");
    cc_free(&c);
    hw.collectives = DTS_HW_COLL_MESSAGES;
    ck_assert_int_eq(dts_hw_coll_analytic(&hw, 100000), 0);
    hw.collectives = DTS_HW_COLL_ANALYTIC;
    ck_assert_int_eq(dts_hw_coll_analytic(&hw, 2), 1);
}
END_TEST

static json_t *hw_json(const char *collectives)
{
    dts_hw hw;
    dts_hw_default(&hw);
    json_t *o = dts_hw_to_json(&hw);
    ck_assert_ptr_nonnull(o);
    if (collectives) json_object_set_new(o, "collectives", json_string(collectives));
    return o;
}

START_TEST(test_hw_key)
{
    dts_hw hw;
    json_t *o = hw_json(NULL); /* absent: auto, and auto is not written back */
    ck_assert_int_eq(dts_hw_from_json(o, "t", &hw), DT_OK);
    ck_assert_int_eq(hw.collectives, DTS_HW_COLL_AUTO);
    json_decref(o);
    o = dts_hw_to_json(&hw);
    ck_assert_ptr_null(json_object_get(o, "collectives"));
    json_decref(o);
    static const char *const words[] = {"messages", "analytic", "auto"};
    static const dts_hw_coll want[] = {DTS_HW_COLL_MESSAGES, DTS_HW_COLL_ANALYTIC, DTS_HW_COLL_AUTO};
    for (int k = 0; k < 3; k++) {
        o = hw_json(words[k]);
        ck_assert_int_eq(dts_hw_from_json(o, "t", &hw), DT_OK);
        ck_assert_int_eq(hw.collectives, want[k]);
        json_decref(o);
        o = dts_hw_to_json(&hw); /* round trip */
        dts_hw back;
        ck_assert_int_eq(dts_hw_from_json(o, "t", &back), DT_OK);
        ck_assert(dts_hw_equal(&back, &hw));
        json_decref(o);
    }
    static const char *const bad[] = {"fast", "Messages", ""};
    for (int k = 0; k < 3; k++) {
        o = hw_json(bad[k]);
        hw.collectives = DTS_HW_COLL_MESSAGES;
        ck_assert_int_eq(dts_hw_from_json(o, "t.json", &hw), DT_ERR_FORMAT);
        ck_assert_msg(strstr(dt_last_error(), "\"collectives\"") != NULL, "%s", dt_last_error());
        ck_assert_int_eq(hw.collectives, DTS_HW_COLL_MESSAGES); /* untouched on failure */
        json_decref(o);
    }
    o = hw_json(NULL);
    json_object_set_new(o, "collectives", json_integer(1));
    ck_assert_int_eq(dts_hw_from_json(o, "t.json", &hw), DT_ERR_FORMAT);
    json_decref(o);
    hw.collectives = (dts_hw_coll)7;
    ck_assert_int_eq(dts_hw_validate(&hw, "t"), DT_ERR_INVALID);
}
END_TEST

/* ---- the executor -------------------------------------------------------------- */

/* The same scenario under both models: the same step time (one node, even
 * buffers, members arriving together), and comm spans of every phase for
 * every member under the analytic one. */
START_TEST(test_run_models)
{
    static const struct {
        int p, d, zero;
        dts_exchange exchange;
    } cases[] = {{1, 4, 0, DTS_EX_RING}, {1, 4, 1, DTS_EX_RING}, {1, 8, 0, DTS_EX_TREE}, {2, 4, 0, DTS_EX_RING}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        double step[2];
        for (int model = 0; model < 2; model++) {
            dts_scenario sc;
            dt_test_fixed_scenario(&sc, 4, cases[k].p, 4, 3, DT_SCHED_1F1B, 100000, 200000);
            sc.d = cases[k].d;
            sc.zero = cases[k].zero;
            sc.exchange = cases[k].exchange;
            snprintf(sc.exchange_name, sizeof sc.exchange_name, "%s",
                     cases[k].exchange == DTS_EX_TREE ? "tree" : "ring");
            sc.chunk_bytes = 0;
            sc.hw = dt_test_flat_hw(5000, 2.0);
            sc.hw.collectives = model ? DTS_HW_COLL_ANALYTIC : DTS_HW_COLL_MESSAGES;
            dts_run_opts o = {.keep_events = 1};
            dts_summary s;
            ck_assert_msg(dts_run(&sc, &o, &s) == DT_OK, "%s", dt_last_error());
            step[model] = s.step_ns;
            if (model) { /* every data-parallel rank of stage 0 has reduce-scatter and all-gather spans */
                for (int r = 0; r < sc.d; r++) {
                    int rs = 0, ag = 0;
                    for (size_t i = 0; i < s.n_ev; i++) {
                        const dt_trace_event *e = &s.ev[i];
                        if (e->pid != r || e->tid != DT_LANE_COMM || strcmp(e->cat, "comm")) continue;
                        rs += !strcmp(e->name, "reduce-scatter");
                        ag += !strcmp(e->name, "all-gather");
                    }
                    ck_assert_msg(rs >= 3 && ag >= 3, "case %zu rank %d: %d reduce-scatter, %d all-gather spans", k, r,
                                  rs, ag);
                }
            }
            dts_summary_free(&s);
        }
        ck_assert_msg(step[0] == step[1], "case %zu: step %.1f ns as messages, %.1f analytic", k, step[0], step[1]);
    }
}
END_TEST

/* ZeRO's traffic per rank and step, from the comm spans' bytes (a ring
 * step moves one segment: (n-1)/n of the buffer per collective): stage 1
 * reduce-scatters and all-gathers the whole buffer (2 psi); stage 2
 * reduce-scatters every micro-batch's gradient and gathers the updated
 * weights once (m + 1 psi); stage 3 gathers every layer before its forward
 * and every block before its backward and reduce-scatters every
 * micro-batch's gradient (2 psi + the blocks' psi per micro-batch: the
 * paper's 3 psi, less the head and the embedding, which are not gathered
 * again for the backward; with --zero-prefetch less the last block too,
 * whose forward copy the second layer buffer keeps). Also the spans'
 * count: one reduce-scatter a unit and micro-batch; and prefetch's step
 * is shorter (its gathers hide behind the compute). */
START_TEST(test_run_zero_traffic)
{
    const int L = 4, n = 4, m = 2, steps = 3;
    const int64_t psi = (int64_t)(L + 2) * 1000 * 4, blocks = (int64_t)L * 1000 * 4; /* bytes */
    double step3[2] = {0, 0};
    for (int stage = 1; stage <= 4; stage++) { /* 4: stage 3 with --zero-prefetch, the same traffic */
        dts_scenario sc;
        dt_test_fixed_scenario(&sc, L, 1, m, steps, DT_SCHED_1F1B, 100000, 200000);
        sc.d = n;
        sc.zero = stage < 4 ? stage : 3;
        sc.zero_prefetch = stage == 4;
        sc.chunk_bytes = 0;
        sc.bucket_bytes = 2 * 1000 * 4; /* stage 2: buckets of two layers, three units */
        sc.hw = dt_test_flat_hw(5000, 2.0);
        dts_run_opts o = {.keep_events = 1};
        dts_summary s;
        ck_assert_msg(dts_run(&sc, &o, &s) == DT_OK, "%s", dt_last_error());
        int64_t bytes = 0, rs_first = 0;
        for (size_t i = 0; i < s.n_ev; i++) {
            const dt_trace_event *e = &s.ev[i];
            if (e->pid != 0 || e->tid != DT_LANE_COMM || strcmp(e->cat, "comm")) continue;
            if (strcmp(e->name, "reduce-scatter") && strcmp(e->name, "all-gather")) continue;
            bytes += e->bytes;
            const dt_trace_arg *st = dt_trace_event_find_arg(e, "step"); /* the first ring step of each */
            rs_first += !strcmp(e->name, "reduce-scatter") && e->iter == 0 && st && st->value == 0;
        }
        /* with prefetch the second layer buffer keeps the last block's forward copy for its backward, and
         * block 0's backward copy for the next micro-batch's forward */
        const int64_t per_step = stage == 1   ? 2 * psi
                                 : stage == 2 ? (m + 1) * psi
                                 : stage == 3 ? m * (2 * psi + blocks)
                                              : m * (2 * psi + blocks - 1000 * 4) - (m - 1) * 1000 * 4;
        if (stage >= 3) step3[stage - 3] = s.step_ns;
        ck_assert_msg(bytes == (int64_t)steps * per_step * (n - 1) / n,
                      "stage %d: %lld bytes over %d steps, expected %lld", stage, (long long)bytes, steps,
                      (long long)((int64_t)steps * per_step * (n - 1) / n));
        const int units = stage == 1 ? 1 : stage == 2 ? 3 : L + 2;
        ck_assert_msg(rs_first == (stage == 1 ? 1 : (int64_t)m * units), "stage %d: %lld reduce-scatters in step 0",
                      stage, (long long)rs_first);
        dts_summary_free(&s);
    }
    /* prefetch moves the same bytes but hides gathers behind the compute */
    ck_assert_msg(step3[1] < step3[0], "stage 3: step %.0f ns with prefetch, %.0f without", step3[1], step3[0]);
}
END_TEST

static Suite *sim_coll_suite(void)
{
    Suite *s = suite_create("sim_coll");
    TCase *t = tcase_create("agree");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_agree_alike_even);
    tcase_add_test(t, test_agree_alike_uneven);
    tcase_add_test(t, test_agree_nodes);
    tcase_add_test(t, test_staggered);
    suite_add_tcase(s, t);
    t = tcase_create("scale");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_memory_linear);
    suite_add_tcase(s, t);
    t = tcase_create("choice");
    tcase_add_test(t, test_auto_threshold);
    tcase_add_test(t, test_hw_key);
    tcase_add_test(t, test_run_models);
    tcase_add_test(t, test_run_zero_traffic);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return dt_test_run(sim_coll_suite()); }
