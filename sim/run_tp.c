/* run_tp.c: the tensor group's collectives (see run_internal.h): what each
 * pass of a virtual stage runs over its t ranks, in the runtime's order
 * and with its trace names, priced as the runtime runs them, and their
 * spans on the comm lane; with them the context group's exchanges of each
 * block's attention (run_cp.c prices and lists them). One unit stands for
 * the t ranks, which do the same work in lockstep, so a collective is a
 * stretch of the pass's time; the c units of a context group are alike.
 *
 * Tensor parallelism (lib/parallel/tp.c): per block two "tp allreduce g"
 * of the (B,T,C) activation in the forward, two "tp allreduce f" of its
 * gradient in B; under the vocabulary split the embedding's output and
 * the head's input gradient are summed ("tp vocab allreduce") and the
 * head's per-row statistics gathered ("tp vocab gather", 4 floats a row
 * and rank).
 * Sequence parallelism (lib/parallel/sp.c): a block's conjugate operators
 * are "tp all-gather" (before a column-parallel GEMM) and "tp
 * reduce-scatter" (after a row-parallel one) of the same (B,T,C), each
 * rank giving or keeping its B*T/t rows: forward and B each all-gather,
 * reduce-scatter, all-gather, reduce-scatter; W all-gathers the two
 * recomputed LayerNorm outputs, each followed by the sum of that
 * LayerNorm's gain and bias gradients ("tp layernorm grad allreduce", 2C
 * floats). The embedding reduce-scatters its output (forward) and
 * all-gathers its gradient (in its W when the backward is split); the
 * head all-gathers its LayerNorm output and gathers the statistics
 * (forward), reduce-scatters its input gradient (B) and sums its
 * LayerNorm's gradients (W).
 * Full recomputation runs each block's forward collectives again in B.
 *
 * Prices: the ring's, unloaded, over the group's links, at 4 bytes an
 * element in every precision (the runtime sums and moves FP32 buffers):
 * an all-gather or a reduce-scatter of S bytes in all (t-1)·α +
 * (t-1)/t·S/β, an allreduce twice that. A collective that ends a segment
 * of compute adds the expected wait for the slowest of the t ranks
 * (dts__tp_skew_ns): g and f, and sequence parallelism's reduce-scatters,
 * after half a block's forward or backward; W's four, after an eighth of
 * a block's backward; an all-gather that follows a reduce-scatter at once
 * (a LayerNorm on the rank's rows between them) adds none.
 *
 * Invariants: a pass's spans sit at the end of its compute span, in its
 * order, and their durations add up to what run.c adds to the pass, and
 * for each ring step the attention it overlaps (part of the pass's
 * compute), as the runtime's spans hold it. */
#include "run_internal.h"

/* E[max of n independent standard normals] (n >= 1), by Simpson's rule:
 * the integral of x n phi(x) Phi(x)^(n-1) over [-10, 10]. 0.5642 for 2
 * (1/sqrt(pi)), 1.0294 for 4, 1.4236 for 8. */
static double dts__max_normal(int n)
{
    if (n <= 1) return 0.0;
    const int K = 4000;
    const double a = -10.0, h = 20.0 / K;
    double sum = 0.0;
    for (int k = 0; k <= K; k++) {
        const double x = a + k * h, phi = exp(-0.5 * x * x) / sqrt(2.0 * M_PI), Phi = 0.5 * erfc(-x / sqrt(2.0));
        const double f = x * n * phi * pow(Phi, n - 1);
        sum += (k == 0 || k == K ? 1.0 : k % 2 ? 4.0 : 2.0) * f;
    }
    return sum * h / 3.0;
}

/* The expected wait at a collective between t ranks for the slowest: each
 * arrives after a segment of compute of its own, `share` of a block's
 * forward or backward on 1/t of it, whose time varies independently with
 * the variance of that share of the block's (sd_block, the profile's);
 * every rank waits for the last, sd_segment x E[max of t standard
 * normals] after the mean. */
static int64_t dts__tp_skew_ns(int t, double sd_block, double share)
{
    return t > 1 && sd_block > 0 ? dts__ns(dts__max_normal(t) * sd_block * sqrt(share / t)) : 0;
}

void dts__tp_setup(dts__sim *s)
{
    const dts_scenario *sc = s->sc;
    dts__tp_price *p = &s->tpp;
    *p = (dts__tp_price){0};
    if (sc->t < 2) return;
    const int t = sc->t, stride = dt_grid_stride(&s->grid, DT_GRID_TENSOR);
    const int64_t BT = (int64_t)sc->B * dts__Tl(sc), act = BT * sc->model.hidden_size * 4; /* the rank's rows */
    p->ar = dts_net_ring_allreduce_ns(&s->net, 0, stride, t, act);
    p->ag = dts_net_ring_allgather_ns(&s->net, 0, stride, t, act); /* a ring reduce-scatter moves the same */
    p->ln = dts_net_ring_allreduce_ns(&s->net, 0, stride, t, 2 * (int64_t)sc->model.hidden_size * 4);
    p->stats = dts_net_ring_allgather_ns(&s->net, 0, stride, t, (int64_t)t * BT * 4 * 4);
    const double c = sc->c; /* a context rank computes 1/c of each segment */
    p->skew_f = dts__tp_skew_ns(t, sc->cost.block_fwd_sd_ns, 0.5 / c);
    p->skew_b = dts__tp_skew_ns(t, sc->cost.block_bwd_sd_ns, 0.5 / c);
    p->skew_w = dts__tp_skew_ns(t, sc->cost.block_bwd_sd_ns, 0.125 / c);
}

/* Add collective x to a pass's list k: 0 before its blocks, 1 each
 * block's, 2 after them. */
static void dts__tp_put(dts__tp_pass *ps, int k, dts__tpc x)
{
    dts__tpc *c = k == 0 ? ps->pre : k == 1 ? ps->each : ps->post;
    int *n = k == 0 ? &ps->n_pre : k == 1 ? &ps->n_each : &ps->n_post;
    c[(*n)++] = x;
}

/* the tensor group's collective (name, ns), traced as the pass's */
static void dts__tp_add(dts__tp_pass *ps, int k, int fwd, const char *name, int64_t ns)
{
    dts__tp_put(ps, k, (dts__tpc){.name = name, .cat = "tp", .ns = ns, .span = ns, .fwd = fwd, .rep = 1, .step = -1});
}

/* the context group's exchanges of a block's attention in pass k (run_cp.c) */
static void dts__tp_cp(const dts__sim *s, dts__tp_pass *ps, int k, int recompute)
{
    dts__tpc x[4];
    const int n = dts__cp_block(s, k, recompute, x);
    for (int i = 0; i < n; i++) dts__tp_put(ps, 1, x[i]);
}

/* A block's forward collectives, added to each block's of pass ps (the
 * forward, or B under full recomputation: traced as forward there too, as
 * the runtime's recomputed forward traces them): the attention's exchanges
 * between the first all-gather and the first reduce-scatter (or g) */
static void dts__tp_block_fwd(const dts__sim *s, int recompute, dts__tp_pass *ps)
{
    const dts__tp_price *p = &s->tpp;
    const int tp = s->sc->t > 1, sp = s->sc->sequence_parallel;
    for (int i = 0; i < 2; i++) {
        if (sp) dts__tp_add(ps, 1, 1, "tp all-gather", p->ag);
        if (i == 0) dts__tp_cp(s, ps, DTS__TP_F, recompute);
        if (tp) dts__tp_add(ps, 1, 1, sp ? "tp reduce-scatter" : "tp allreduce g", (sp ? p->ag : p->ar) + p->skew_f);
    }
}

void dts__tp_stage(dts__sim *s, int q, int nb, int first, int last)
{
    const dts_scenario *sc = s->sc;
    const dts__tp_price *p = &s->tpp;
    dts__tp_pass *f = &s->tp[q * DTS__TP_PASSES + DTS__TP_F], *b = &s->tp[q * DTS__TP_PASSES + DTS__TP_B],
                 *w = &s->tp[q * DTS__TP_PASSES + DTS__TP_W];
    *f = *b = *w = (dts__tp_pass){.nb = nb};
    if (sc->t < 2 && sc->c < 2) return;
    const int tp = sc->t > 1, sp = sc->sequence_parallel, vp = tp && sc->vocab_parallel;
    /* the forward: the embedding's output, the blocks, the head's input and statistics */
    if (first && vp) dts__tp_add(f, 0, 1, sp ? "tp reduce-scatter" : "tp vocab allreduce", sp ? p->ag : p->ar);
    dts__tp_block_fwd(s, 0, f);
    if (last && sp) dts__tp_add(f, 2, 1, "tp all-gather", p->ag);
    if (last && vp) dts__tp_add(f, 2, 1, "tp vocab gather", p->stats);
    /* B: the head's input gradient, then each block's (its forward's again first under full recomputation;
     * the attention's under selective) */
    if (last && vp) dts__tp_add(b, 0, 0, sp ? "tp reduce-scatter" : "tp vocab allreduce", sp ? p->ag : p->ar);
    if (sc->recompute == 1) dts__tp_block_fwd(s, 1, b);
    if (sc->recompute == 2) dts__tp_cp(s, b, DTS__TP_B, 1);
    for (int i = 0; i < 2; i++) {
        if (sp) dts__tp_add(b, 1, 0, "tp all-gather", p->ag);
        if (i == 1) dts__tp_cp(s, b, DTS__TP_B, 0);
        if (tp) dts__tp_add(b, 1, 0, sp ? "tp reduce-scatter" : "tp allreduce f", (sp ? p->ag : p->ar) + p->skew_b);
    }
    /* W (sequence parallelism only): the head's LayerNorm, the blocks' two, the embedding's gradient */
    if (sp) {
        if (last) dts__tp_add(w, 0, 0, "tp layernorm grad allreduce", p->ln);
        for (int i = 0; i < 2; i++) {
            dts__tp_add(w, 1, 0, "tp all-gather", p->ag + p->skew_w);
            dts__tp_add(w, 1, 0, "tp layernorm grad allreduce", p->ln + p->skew_w);
        }
        if (first) dts__tp_add(w, 2, 0, "tp all-gather", p->ag);
    }
    for (int k = 0; k < DTS__TP_PASSES; k++) {
        dts__tp_pass *ps = &s->tp[q * DTS__TP_PASSES + k];
        for (int i = 0; i < ps->n_pre; i++) ps->ns += ps->pre[i].ns * ps->pre[i].rep;
        for (int i = 0; i < ps->n_pre; i++) ps->span += ps->pre[i].span * ps->pre[i].rep;
        for (int i = 0; i < ps->n_each; i++) {
            ps->ns += ps->each[i].ns * ps->each[i].rep * nb;
            ps->span += ps->each[i].span * ps->each[i].rep * nb;
            if (ps->each[i].cat[0] == 'c') ps->ns_cp += ps->each[i].ns * ps->each[i].rep * nb;
        }
        for (int i = 0; i < ps->n_post; i++) ps->ns += ps->post[i].ns * ps->post[i].rep;
        for (int i = 0; i < ps->n_post; i++) ps->span += ps->post[i].span * ps->post[i].rep;
    }
}

/* A list of n collectives' spans from `at`, one after another, on unit
 * u (its context rank ci names a ring step's sender); returns where they
 * end. */
static int64_t dts__tp_list(dts__sim *s, dts__unit *u, int ci, const dts__tpc *c, int n, int64_t at, int64_t iter)
{
    const int cs = s->sc->c;
    for (int i = 0; i < n; i++)
        for (int r = 0; r < c[i].rep; r++) {
            dt_trace_event ev;
            dt_trace_event_init(&ev, DT_TRACE_COMPLETE, c[i].name, c[i].cat, u->rank, DT_LANE_COMM, at, c[i].span);
            ev.iter = iter;
            if (c[i].cat[0] == 'c') ev.bytes = c[i].bytes;
            dt_trace_event_add_arg(&ev, "forward", c[i].fwd);
            if (c[i].step >= 0) { /* the ring's step, and the rank whose block arrives (lib/parallel/cp.c) */
                const int step = c[i].step + r;
                dt_trace_event_add_arg(&ev, "step", step);
                dt_trace_event_add_arg(&ev, "from", (ci - step - 1 + 2 * cs) % cs);
            }
            dts__rec(s, 1, &ev);
            at += c[i].span;
        }
    return at;
}

void dts__tp_spans(dts__sim *s, dts__unit *u, int q, unsigned passes, int64_t t0, int64_t t1, int64_t iter)
{
    /* without a trace the summary reads rank 0's spans only (its phases; the bubbles read instructions) */
    if (!u->record || (!s->keep_all && u->rank != 0) || (s->sc->t == 1 && s->sc->c == 1)) return;
    int64_t total = 0; /* the spans' (a ring step's holds the attention it overlaps) */
    for (int k = 0; k < DTS__TP_PASSES; k++)
        if (passes & (1u << k)) total += s->tp[q * DTS__TP_PASSES + k].span;
    int64_t at = t1 - total;
    if (at < t0) at = t0;
    const int ci = dt_grid_coord(&s->grid, u->rank, DT_GRID_CONTEXT);
    for (int k = 0; k < DTS__TP_PASSES; k++) {
        const dts__tp_pass *ps = &s->tp[q * DTS__TP_PASSES + k];
        if (!(passes & (1u << k))) continue;
        at = dts__tp_list(s, u, ci, ps->pre, ps->n_pre, at, iter);
        for (int j = 0; j < ps->nb; j++) at = dts__tp_list(s, u, ci, ps->each, ps->n_each, at, iter);
        at = dts__tp_list(s, u, ci, ps->post, ps->n_post, at, iter);
    }
}
