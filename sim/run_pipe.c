/* run_pipe.c: the pipeline step (lib/parallel/pipeline.c; see run_internal.h).
 * One unit per (d_i, p_i) stands for its t tensor-parallel ranks (they do
 * the same work in lockstep, joined by their per-block collectives, which
 * are costed with the ring formula over the t ranks' links: run_tp.c). The unit
 * walks its device's instruction list from dt_schedule_make_chunks; each
 * instruction names its chunk, whose virtual stage q holds a share of the
 * blocks (run.c): FORWARD, BACKWARD, BACKWARD_B and BACKWARD_W take q's
 * summed layer costs (B and W the two parts of the backward), SEND posts a
 * message to the device of q+1 (activation) or q-1 (gradient), on the link
 * between the two ranks (non-blocking) or, between two chunks of one
 * device, at no cost (the buffer changes hands); with t > 1 the message is
 * each tensor rank's 1/t over its own link and its RECV ends with the
 * group's all-gather of the pieces (scatter/gather, the runtime's
 * default), or the whole tensor on each of the t links (t parallel whole
 * sends, as one: --no-scatter-gather-tensors-in-pipeline), or under sequence
 * parallelism each rank's own rows, nothing gathered; RECV waits for the matching message (sends
 * and receives between two virtual stages come in the same order on both
 * sides, so the k-th receive into a chunk takes the k-th message from its
 * neighbour), OPTIM_STEP runs the device's data-parallel allreduce (step
 * level, dts_coll), the gradient-norm allreduce over the pipeline
 * (the flushing kinds; its own comm span, a pipeline wait) and the update
 * (the optim_step span: it starts after those collectives, as in
 * lib/parallel/pipeline.c), STASH copies the weights. Each step ends
 * with the world allreduce of the loss (run_step.c).
 *
 * Memory: a micro-batch's activations of virtual stage q are held from its
 * FORWARD to its BACKWARD, or to its BACKWARD_W when the backward is split
 * (W needs the layer inputs); what a backward recomputes (one group of
 * blocks under full recomputation) is held during BACKWARD, and a group's
 * blocks during FORWARD.
 * A split backward's B also leaves what W needs, held until W ends, and
 * each of B and W holds a working set while it runs (dts__split_mem_of).
 *
 * Traces: the message spans carry the runtime's "flow" id
 * (dt_sched_message_id), so that the trace's flow events join them.
 *
 * Invariants: a unit executes its instructions in list order, one at a
 * time; it waits for exactly one message at a time (wait, wait_chunk, and
 * the next receive's sequence number of that chunk). */
#include "run_internal.h"

#include <stdlib.h>

static void dts__pipe_advance(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__opt_continue(dts__sim *s, dts__unit *u);

/* lib/model/runner_backward.c's split, per micro-batch, in bytes (one of
 * t tensor ranks; as dts__block_act, the arena's 16-float padding is not
 * counted). BACKWARD_B adds, in order: the final LayerNorm's output
 * gradient (B,T,C) on the last stage; for each block from the last its
 * keep, 4 (B,T,C) FP32 (their whole C on a tensor rank) and its dfch
 * (B,T,4C/t) (its dqkv goes into the block's saved qkv), under full recomputation after
 * the block's recomputed activations (whole set, into the slot, read by
 * W); the embedding output's gradient (B,T,C) on the first stage. While a
 * block's B runs, selective recomputation holds its attention's
 * log-sum-exp in the work arena. Half storage (16-bit without full
 * recomputation) unpacks each block into an FP32 working set (its
 * tensors, its input but for the stage's first block, its keep in FP32)
 * and packs the keep into the slot, 2 bytes an element, (4 C + 7 C / t)
 * B T elements; W unpacks the same again (without the log-sum-exp
 * under selective). Without half storage W allocates nothing. Under
 * sequence parallelism the per-token ones hold the rank's rows
 * (dts__tok_rows): the final LayerNorm's and the embedding's gradients,
 * the block's input and, of its keep, dln1 and dln2 (dout and dres2 keep
 * every row: W reads them all-gathered). */
dts__split_mem dts__split_mem_of(const dts_scenario *sc, int t, int nb, int first, int last)
{
    const int64_t BT = (int64_t)sc->B * dts__Tl(sc), C = sc->model.hidden_size, n = t > 0 ? t : 1;
    const int64_t rows = dts__tok_rows(sc, n), btc = rows * C * 4;
    const int64_t kn = 2 * BT * C + 2 * rows * C, /* a block's keep: dout, dres2, dln2, dln1 */
        kf = (kn + 4 * BT * (C / n)) * 4 /* and dfch, FP32 */, all = dts__block_act(sc, n, 0);
    const int64_t att = all - dts__block_act(sc, n, 2), ends = (last ? btc : 0) + (first ? btc : 0);
    dts__split_mem m = {0, 0, 0};
    if (sc->recompute == 1) { /* grows monotonically: its most is what it keeps */
        m.keep = m.b = ends + nb * (all + kf);
    } else if (dts__packs(sc)) {
        const int64_t pk = 2 * (kn + 7 * BT * (C / n)); /* with dqkv, packed */
        m.keep = ends + nb * pk;
        m.b = m.keep;
        for (int l = nb - 1; l >= 0; l--) { /* block l's B: the later blocks' packed keeps, and its working set */
            const int64_t at = (last ? btc : 0) + (nb - l) * pk + all + (l ? btc : 0) + kf;
            if (at > m.b) m.b = at;
        }
        m.w = all - (sc->recompute == 2 ? att : 0) + (nb > 1 ? btc : 0) + kf;
    } else {
        m.keep = ends + nb * kf;
        m.b = m.keep;
        if (sc->recompute == 2 && nb && (last ? btc : 0) + nb * kf + att > m.b) m.b = (last ? btc : 0) + nb * kf + att;
    }
    return m;
}

static void dts__pipe_event(dts__sim *s, dts__unit *u, const dt_sched_instr *in, int64_t t0, int64_t t1)
{
    if (!u->record) return;
    static const int lanes[] = {DT_LANE_COMM,    DT_LANE_COMPUTE, DT_LANE_COMM,   DT_LANE_COMM,
                                DT_LANE_COMPUTE, DT_LANE_COMM,    DT_LANE_OPTIM,  DT_LANE_OPTIM,
                                DT_LANE_OPTIM,   DT_LANE_COMPUTE, DT_LANE_COMPUTE};
    dt_trace_event ev;
    dt_trace_event_init(&ev, DT_TRACE_COMPLETE, dt_sched_op_name(in->op), "pipeline", u->rank, lanes[in->op], t0,
                        t1 - t0);
    ev.iter = in->op == DT_SCHED_OPTIM_STEP || in->op == DT_SCHED_STASH || in->op == DT_SCHED_DROP ? u->step : in->step;
    if (in->mb >= 0) ev.micro_batch = in->mb;
    dt_trace_event_add_arg(&ev, "stage", u->stage);
    if (in->version >= 0) dt_trace_event_add_arg(&ev, "version", in->version);
    dt_trace_event_add_arg(&ev, "phase", in->phase);
    if (s->V > 1) dt_trace_event_add_arg(&ev, "chunk", in->chunk);
    /* a message: the runtime's id (pipeline = tensor rank + t * data rank; this unit is tensor rank 0, and
     * run.c's trace adds k for its copy on tensor rank k) */
    const int64_t id =
        dt_sched_message_id(s->sched, u->stage, in, dt_grid_group_index(&s->grid, DT_GRID_PIPELINE, u->rank),
                            dt_grid_group_count(&s->grid, DT_GRID_PIPELINE));
    if (id >= 0) dt_trace_event_add_arg(&ev, "flow", (double)id);
    dts__rec(s, 1, &ev);
}

/* The all-gather a receive of a scattered send adds on the receiving
 * tensor group, once the pieces are there and it has reached the receive:
 * none between two chunks of one device. */
static int64_t dts__recv_gather_ns(const dts__sim *s, const dts__unit *u, int q, int grad)
{
    const int from = grad ? q + 1 : q - 1;
    return s->sg_ns && from >= 0 && from < s->Q && s->q_dev[from] != u->stage ? s->sg_ns : 0;
}

/* The message arrives into chunk c of `to` at time t: wake it if it waits for exactly this one. */
static void dts__deliver(dts__sim *s, dts__unit *to, int c, int grad, int seq, int64_t t)
{
    const int want = grad ? DTS__W_GRAD : DTS__W_ACT;
    dts__link *l = &to->link[c];
    const int next = grad ? l->n_grad_recv : l->n_act_recv;
    const dt_status st = dts__mbox_put(grad ? &l->grad : &l->act, seq, next, t);
    if (st != DT_OK) return dts__fail(s, st);
    if (to->wait == want && to->wait_chunk == c && next == seq) {
        to->wait = DTS__W_NONE;
        const int q = s->sched->vstage[to->stage * s->V + c];
        /* b = 0: resume the waiting receive (after the pieces' all-gather when scattered) */
        dts__at(s, t + dts__recv_gather_ns(s, to, q, grad), dts__pipe_advance, to, 1, 0);
    }
}

/* The stage's data-parallel allreduce is done (its instance's resume). */
static void dts__opt_dp_done(dts__sim *s, dts__unit *u, int kind)
{
    (void)kind;
    dts__opt_continue(s, u);
}

/* ZeRO-1: the all-gather after the update is done: OPTIM_STEP ends. */
static void dts__opt_ag_done(dts__sim *s, dts__unit *u, int kind)
{
    (void)kind;
    dts__pipe_advance(s->e, u, 2, 0);
}

/* ZeRO-1: the segment's update is done (the all-gather next). */
static void dts__opt_updated(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)e, (void)a, (void)b;
    dts__unit *u = ctx;
    dts__opt_continue(u->sim, u);
}

/* The pipeline's gradient-norm allreduce is done: its span on the comm lane
 * (the runtime's "grad norm allreduce", where a stage that finished its
 * backwards first waits for the others), counted as a pipeline wait. */
void dts__pipe_norm_done(dts__sim *s, dts__unit *u)
{
    const int64_t now = dts_engine_now(s->e);
    u->ns_pp += now - u->opt_t0;
    if (u->record) {
        dt_trace_event ev;
        dt_trace_event_init(&ev, DT_TRACE_COMPLETE, "grad norm allreduce", "comm", u->rank, DT_LANE_COMM, u->opt_t0,
                            now - u->opt_t0);
        ev.iter = u->step;
        dt_trace_event_add_arg(&ev, "stage", u->stage);
        dts__rec(s, 1, &ev);
    }
    u->opt_phase = 2;
    dts__opt_continue(s, u);
}

/* u joins its stage's open data-parallel collective of the stage's
 * gradient bytes (the first of the c x d ranks to arrive opens it). */
static void dts__stage_coll(dts__sim *s, dts__unit *u, dts_coll_kind kind, int what, dts__resume_fn done)
{
    const int d = s->D;
    dts__cinst *ci = s->dp_open[u->stage];
    if (!ci) {
        dts__unit **m = malloc((size_t)d * sizeof *m);
        if (!m) return dts__fail(s, DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory"));
        for (int i = 0; i < d; i++) m[i] = dts__unit_at(s, i, u->stage);
        ci = dts__cinst_new(s, kind, m, d, s->params[u->stage] * 4, what, done);
        free(m);
        if (!ci) return;
        s->dp_open[u->stage] = ci;
    }
    if (++ci->arrived == d) s->dp_open[u->stage] = NULL;
    dts_coll_arrive(ci->c, u->dpi);
}

/* OPTIM_STEP in phases: 0 data-parallel allreduce, 1 norm over the pipeline, 2 update. */
static void dts__opt_continue(dts__sim *s, dts__unit *u)
{
    const dts_scenario *sc = s->sc;
    const int async = sc->schedule == DT_SCHED_PIPEDREAM || sc->schedule == DT_SCHED_PIPEDREAM_VSYNC;
    const int64_t now = dts_engine_now(s->e);
    if (u->opt_phase == 0) {
        u->opt_phase = 1;
        if (s->D > 1) {
            /* ZeRO-1: the reduce-scatter now, the all-gather after the update */
            dts__stage_coll(s, u, sc->zero ? DTS_COLL_REDUCE_SCATTER : dts__ar_kind(sc), DTS__C_OPT_DP,
                            dts__opt_dp_done);
            return;
        }
    }
    if (u->opt_phase == 1) {
        if (!async && sc->p > 1) {
            u->opt_t0 = now;
            dts__sync_arrive(s, &s->norm[u->dpi], u);
            return;
        }
        u->opt_phase = 2;
    }
    if (u->opt_phase == 3) { /* ZeRO-1's update is done: every rank's segment to every rank */
        u->opt_phase = 4;    /* the reduce-scatter's instance is closed: every rank has passed it */
        dts__stage_coll(s, u, DTS_COLL_ALL_GATHER, DTS__C_ZERO_AG, dts__opt_ag_done);
        return;
    }
    /* the update (plus the tensor-parallel norm allreduce); ZeRO-1: of the segment, then the all-gather.
     * The optim_step span starts here, after the collectives before it (as the runtime's) */
    u->wait_t0 = now;
    const int64_t t1 = now + s->opt_ns[u->stage];
    u->opt_phase = 3;
    if (sc->zero && s->D > 1) dts__at(s, t1, dts__opt_updated, u, 0, 0);
    else dts__at(s, t1, dts__pipe_advance, u, 2, 0);
}

/* The instruction's virtual stage. */
static int dts__q(const dts__sim *s, const dts__unit *u, const dt_sched_instr *in)
{
    return s->sched->vstage[u->stage * s->V + in->chunk];
}

/* b: 0 run from pc, 1 a receive's message has arrived (finish it), 2 a timed op finished */
static void dts__pipe_advance(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)b;
    dts__unit *u = ctx;
    dts__sim *s = u->sim;
    const int st = u->stage;
    const dt_sched_instr *list = s->sched->instr[st];
    const int64_t now = dts_engine_now(e);
    if (a == 2) { /* the timed instruction at pc is done */
        const dt_sched_instr *in = &list[u->pc];
        const int q = dts__q(s, u, in);
        dts__pipe_event(s, u, in, u->wait_t0, now);
        if (in->op == DT_SCHED_FORWARD && s->act_fwd[q]) {
            u->mem_act -= s->act_fwd[q];
            dts__memory(s, u);
        }
        if (in->op == DT_SCHED_BACKWARD || in->op == DT_SCHED_BACKWARD_B || in->op == DT_SCHED_BACKWARD_W) {
            const dts__split_mem *m = &s->split[q];
            u->mem_act -= in->op == DT_SCHED_BACKWARD     ? s->act[q] + s->act_re[q]
                          : in->op == DT_SCHED_BACKWARD_B ? m->b - m->keep
                                                          : s->act[q] + m->keep + m->w;
            dts__memory(s, u);
        }
        if (in->op == DT_SCHED_FORWARD || in->op == DT_SCHED_BACKWARD || in->op == DT_SCHED_BACKWARD_B ||
            in->op == DT_SCHED_BACKWARD_W) { /* the tensor group's collectives of the passes it ran */
            const unsigned passes = in->op == DT_SCHED_FORWARD      ? 1u << DTS__TP_F
                                    : in->op == DT_SCHED_BACKWARD_B ? 1u << DTS__TP_B
                                    : in->op == DT_SCHED_BACKWARD_W ? 1u << DTS__TP_W
                                                                    : 1u << DTS__TP_B | 1u << DTS__TP_W;
            dts__tp_spans(s, u, q, passes, u->wait_t0, now, in->step);
        }
        if (in->op == DT_SCHED_OPTIM_STEP) u->opt_phase = 0;
        u->pc++;
    } else if (a == 1) { /* the receive at pc has its message */
        const dt_sched_instr *in = &list[u->pc];
        dts__link *l = &u->link[in->chunk];
        dts__pipe_event(s, u, in, u->wait_t0, now);
        u->ns_pp += now - u->wait_t0;
        if (in->op == DT_SCHED_RECV_ACT) dts__mbox_take(&l->act, l->n_act_recv++);
        else dts__mbox_take(&l->grad, l->n_grad_recv++);
        u->pc++;
    }
    while (u->pc < u->end) {
        const dt_sched_instr *in = &list[u->pc];
        const int q = dts__q(s, u, in);
        u->wait_t0 = now;
        switch (in->op) {
        case DT_SCHED_FORWARD: /* full recomputation: a group's blocks on top while it runs */
            u->mem_act += s->act[q] + s->act_fwd[q];
            dts__memory(s, u);
            dts__compute(s, u, s->fwd_ns[q], dts__pipe_advance, 2, 0);
            return;
        case DT_SCHED_BACKWARD:
            if (s->act_re[q]) { /* recomputation: what is rebuilt for the backward */
                u->mem_act += s->act_re[q];
                dts__memory(s, u);
            }
            dts__compute(s, u, s->bwd_ns[q], dts__pipe_advance, 2, 0);
            return;
        case DT_SCHED_BACKWARD_B:
        case DT_SCHED_BACKWARD_W: { /* B: its most, keep included; W: its working set on top of keep */
            const int64_t add = in->op == DT_SCHED_BACKWARD_B ? s->split[q].b : s->split[q].w;
            if (add) {
                u->mem_act += add;
                dts__memory(s, u);
            }
            dts__compute(s, u, in->op == DT_SCHED_BACKWARD_B ? s->bwd_b_ns[q] : s->bwd_w_ns[q], dts__pipe_advance, 2,
                         0);
            return;
        }
        case DT_SCHED_STASH:
            u->stash_now++;
            if (u->stash_now > u->stash_max) u->stash_max = u->stash_now;
            u->mem_stash += s->params[st] * 4;
            dts__memory(s, u);
            dts__at(s, now + s->stash_ns[st], dts__pipe_advance, u, 2, 0);
            return;
        case DT_SCHED_DROP:
            u->stash_now--;
            u->mem_stash -= s->params[st] * 4;
            dts__memory(s, u);
            dts__pipe_event(s, u, in, now, now);
            u->pc++;
            continue;
        case DT_SCHED_SEND_ACT:
        case DT_SCHED_SEND_GRAD: {
            const int grad = in->op == DT_SCHED_SEND_GRAD, tq = grad ? q - 1 : q + 1;
            dts__unit *to = dts__unit_at(s, u->dpi, s->q_dev[tq]);
            dts__link *l = &u->link[in->chunk];
            const int seq = grad ? l->n_grad_sent++ : l->n_act_sent++;
            /* to another device over the link; to a chunk of this one at once (the buffer changes hands) */
            const int64_t at = to == u ? now : dts_net_send(&s->net, u->rank, to->rank, s->msg_bytes, now, NULL);
            dts__deliver(s, to, s->q_chunk[tq], grad, seq, at);
            dts__pipe_event(s, u, in, now, now);
            u->pc++;
            continue;
        }
        case DT_SCHED_RECV_ACT:
        case DT_SCHED_RECV_GRAD: {
            const int grad = in->op == DT_SCHED_RECV_GRAD;
            dts__link *l = &u->link[in->chunk];
            const int seq = grad ? l->n_grad_recv : l->n_act_recv;
            const int64_t t = dts__mbox_get(grad ? &l->grad : &l->act, seq);
            if (t < 0) { /* not sent yet: the sender wakes us */
                u->wait = grad ? DTS__W_GRAD : DTS__W_ACT;
                u->wait_chunk = in->chunk;
                return;
            }
            const int64_t ready = (t > now ? t : now) + dts__recv_gather_ns(s, u, q, grad);
            if (ready > now) {
                dts__at(s, ready, dts__pipe_advance, u, 1, 0);
                return;
            }
            dts__pipe_event(s, u, in, now, now);
            dts__mbox_take(grad ? &l->grad : &l->act, seq);
            if (grad) l->n_grad_recv++;
            else l->n_act_recv++;
            u->pc++;
            continue;
        }
        case DT_SCHED_OPTIM_STEP: /* its span starts with the update (dts__opt_continue) */
            dts__opt_continue(s, u);
            return;
        }
    }
    dts__step_end(s, u);
}

void dts__pipe_begin_step(dts__sim *s, dts__unit *u)
{
    const int st = u->stage, n = s->sched->count[st];
    const dt_sched_instr *list = s->sched->instr[st];
    int end = u->pc;
    for (int i = u->pc; i < n; i++)
        if (list[i].step <= u->step) end = i + 1;
    u->end = end;
    dts__at(s, dts_engine_now(s->e), dts__pipe_advance, u, 0, 0);
}
