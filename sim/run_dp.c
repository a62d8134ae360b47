/* run_dp.c: the data-parallel step (lib/train/step_dp.c; see run_internal.h),
 * also the parameter server's workers' compute. Forward and backward per
 * layer and micro-batch; during the last micro-batch's backward each
 * gradient bucket (25 MiB, head first) is handed to the unit's
 * communication lane when its lowest layer is done (FP32 only; with
 * --fp16/--bf16 the whole buffer after the backward); the lane allreduces
 * the buckets in order; then the loss allreduce and the optimizer. ZeRO-1:
 * reduce-scatter, the update of 1/d of the parameters, all-gather.
 * ZeRO-2/3 (lib/parallel/zero_gpt.c): after the backward of a unit's
 * lowest layer, every micro-batch, the unit's gradient is reduce-scattered
 * while the compute waits (the runtime runs it inline); stage 3 also
 * all-gathers each layer's weights before its forward and each block's
 * before its backward (the head's forward copy serves its backward, the
 * embedding's backward reads none); then the loss, the update of 1/d and
 * (stage 2) the all-gather of every unit's new weights. A
 * parameter server's worker pushes instead (run_ps.c). The activations a
 * layer keeps for its backward follow lib/'s arena, with recomputation.
 *
 * Invariants: a unit's lane runs one bucket at a time, in order; the loss
 * allreduce starts only after every bucket is done and any straggler's
 * sleep is over. */
#include "run_internal.h"

#include <stdlib.h>
#include <string.h>

static void dts__dp_op(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__dp_launch(dts__sim *s, dts__unit *u, int b);
static void dts__dp_exchange(dts__sim *s, dts__unit *u);
static void dts__dp_coll_done(dts__sim *s, dts__unit *u, int kind);
static void dts__zg_coll(dts__sim *s, dts__unit *u, int which, int64_t bytes);
static void dts__dp_bwd_next(dts__sim *s, dts__unit *u, int64_t now);

/* ZeRO-3: does the op at (layer, dir) read its layer's weights? Every
 * forward, and the backward of the blocks and the head (the embedding's
 * reads none). Whether it gathers them is the layer buffers' business
 * (the head's forward copy serves its backward; with prefetch the second
 * buffer keeps one layer more), as in lib/parallel/zero_gpt.c. */
static int dts__zg_reads(const dts__sim *s, const dts__unit *u)
{
    const dts_scenario *sc = s->sc;
    if (sc->zero != 3 || sc->d < 2 || u->zg_have) return 0;
    return !u->dir || u->layer >= 0;
}

/* --zero-prefetch: the layer whose gather starts with the op at (layer,
 * dir), as lib/parallel/zero_gpt.c's: the next in the same pass (the
 * forward up to the head; the backward from the head down to block 0),
 * -2 none. */
static int dts__zg_next(const dts__sim *s, const dts__unit *u)
{
    const int L = s->sc->model.num_layers;
    if (!u->dir) return u->layer < L ? u->layer + 1 : -2;
    return u->layer >= 1 ? u->layer - 1 : -2;
}

/* Activation bytes one tensor rank (of t) of a block keeps per micro-batch
 * (the arenas of lib/model/block.c and lib/parallel/tp.c): the residual
 * and the output, (B, T, C) each, and the LayerNorm statistics stay whole
 * (the rank's B T / t rows under sequence parallelism, lib/parallel/sp.c:
 * dts__tok_rows); qkv, the attention output, the MLP's (B, T, 4C) before
 * GELU and the attention's log-sum-exp (B, NH, T) are split over the t
 * ranks (the LayerNorm and GELU outputs are recomputed by the backward,
 * not kept). recompute 2 (selective) drops the log-sum-exp, 1 (full, one
 * block per group) keeps only the block's input. With t = 1 this is
 * dts_layer_act_bytes' block (dt_gpt_predicted_activation_bytes). Under
 * context parallelism every one of them has the rank's T/c positions
 * (dts__Tl): the c = 1 block's at T/c (lib/parallel/cp.c). */
int64_t dts__block_act(const dts_scenario *sc, int t, int recompute)
{
    const int64_t BT = (int64_t)sc->B * dts__Tl(sc), C = sc->model.hidden_size, n = t > 0 ? t : 1;
    const int64_t rows = dts__tok_rows(sc, t), att = (int64_t)sc->B * sc->model.num_heads * dts__Tl(sc);
    if (recompute == 1) return rows * C * (int64_t)sizeof(float);
    const int64_t whole = 2 * rows * C + 4 * rows, split = 8 * BT * C + (recompute == 2 ? 0 : att);
    return (whole + split / n) * (int64_t)sizeof(float);
}

/* Full recomputation over nb blocks (the model's, or a virtual stage's):
 * groups of K = min(recompute_num_layers, nb) from the first block, the
 * last one shorter when K does not divide nb (lib/model/gpt.c,
 * lib/parallel/stage.c). Block i (0..nb-1) is the j-th of its group of
 * kg blocks; returns K. */
int dts__rc_group(const dts_scenario *sc, int nb, int i, int *j, int *kg)
{
    int K = sc->recompute_num_layers < nb ? sc->recompute_num_layers : nb;
    if (K < 1) K = 1;
    const int l0 = i / K * K;
    if (j) *j = i - l0;
    if (kg) *kg = nb - l0 < K ? nb - l0 : K;
    return K;
}

/* Under fp16/bf16 without full recomputation a block's saved tensors are
 * kept packed (lib/model/gpt.c, lib/parallel/stage.c): 2 bytes an element,
 * the LayerNorm statistics and the attention's log-sum-exp 4, and the output of a stage's last block 4
 * (the head's input or the message sent on). The block runs in an FP32
 * working set (dts__block_act's, plus its unpacked input) while it runs. */
int dts__packs(const dts_scenario *sc) { return strcmp(sc->precision, "fp32") != 0 && sc->recompute != 1; }

int64_t dts__block_act_packed(const dts_scenario *sc, int t, int recompute, int last)
{
    const int64_t BT = (int64_t)sc->B * dts__Tl(sc), C = sc->model.hidden_size, n = t > 0 ? t : 1;
    const int64_t rows = dts__tok_rows(sc, t), att = (int64_t)sc->B * sc->model.num_heads * dts__Tl(sc);
    const int64_t halves = 2 * rows * C + 8 * BT * C / n;
    return 2 * halves + 4 * (4 * rows + (recompute == 2 ? 0 : att / n)) + (last ? 2 * rows * C : 0);
}

/* Activation bytes a layer keeps from its forward to its backward under
 * the scenario's recomputation (one process: t = 1); under full
 * recomputation a group keeps its output, counted at its first block. */
static int64_t dts__saved_act(const dts_scenario *sc, int slot)
{
    const int L = sc->model.num_layers;
    if (slot < 1 || slot > L) return sc->cost.act_bytes[slot]; /* the embedding and the head */
    if (dts__packs(sc)) return dts__block_act_packed(sc, 1, sc->recompute, slot == L);
    int j = 0;
    if (sc->recompute == 1) dts__rc_group(sc, L, slot - 1, &j, NULL);
    return j ? 0 : dts__block_act(sc, 1, sc->recompute);
}

/* What a block holds beyond its saved bytes while its forward (backward =
 * 0) or backward (1) runs, in lib/model/gpt.c's arena, the forward's
 * counting its saved bytes too: under full recomputation the forward of
 * a group's j-th block holds the group's kept output and the sets of the
 * group's blocks so far (j + 1), and the backward of each block of a
 * group of kg holds all kg sets, rebuilt once the group's own output is
 * spent (its input is the previous group's output); packed, the block's
 * stores come first, then its FP32 working set and unpacked input; under
 * selective recomputation the attention's log-sum-exp sits on top while
 * the block runs, forward and backward. */
static int64_t dts__dp_work(const dts_scenario *sc, int layer, int backward)
{
    if (layer < 0 || layer >= sc->model.num_layers) return 0;
    const int64_t A = dts__block_act(sc, 1, 0), P = (int64_t)sc->B * dts__Tl(sc) * sc->model.hidden_size * 4;
    if (sc->recompute == 1) {
        int j, kg;
        dts__rc_group(sc, sc->model.num_layers, layer, &j, &kg);
        return backward ? kg * A - P : (j + 1) * A + (j ? 0 : P);
    }
    if (dts__packs(sc)) return A + (layer > 0 ? P : 0) + (backward ? 0 : dts__saved_act(sc, layer + 1));
    if (sc->recompute == 2) return backward ? A - dts__block_act(sc, 1, 2) : A;
    return 0;
}

void dts__dp_begin_step(dts__sim *s, dts__unit *u)
{
    u->mb = 0;
    u->layer = -1;
    u->dir = 0;
    u->next_bucket = u->buckets_ready = u->buckets_done = u->comm_busy = u->bwd_done = 0;
    u->zg_wl[0] = u->zg_wl[1] = -2; /* the update changed the shard: nothing gathered is current */
    u->zg_cur = 0, u->zg_pf_buf = -1, u->zg_pf_state = 0, u->zg_wait_pf = 0, u->zg_rs_pending = 0;
    dts__at(s, dts_engine_now(s->e), dts__dp_op, u, 0, 0);
}

/* a = 0: start the op at (mb, layer, dir); a = 1: it finished (t0 in b); a = 2: a straggler's sleep ended */
static void dts__dp_op(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    dts__unit *u = ctx;
    dts__sim *s = u->sim;
    const dts_scenario *sc = s->sc;
    const int64_t now = dts_engine_now(e);
    const int L = sc->model.num_layers;
    const int ps = sc->exchange == DTS_EX_PS_SYNC || sc->exchange == DTS_EX_PS_ASYNC;
    if (a == 2) { /* the straggler's sleep is over */
        if (ps) dts__ps_push(s, u);
        else dts__dp_exchange(s, u);
        return;
    }
    if (a == 0) {
        if (dts__zg_reads(s, u)) {
            const int l = u->layer;
            int buf = u->zg_wl[0] == l ? 0 : u->zg_wl[1] == l ? 1 : -1;
            if (buf < 0) { /* gathered now, into the buffer the running layer does not read; resumed at its end */
                buf = sc->zero_prefetch ? u->zg_cur ^ 1 : 0;
                u->zg_wl[buf] = l;
                u->zg_cur = buf;
                dts__zg_coll(s, u, 1, sc->cost.params[l + 1] * 4);
                return;
            }
            if (buf == u->zg_pf_buf && u->zg_pf_state == 1) { /* gathered ahead, still on the wire */
                u->zg_wait_pf = 1;
                return;
            }
            u->zg_cur = buf;
        }
        u->zg_have = 0;
        if (sc->zero == 3 && sc->zero_prefetch && sc->d > 1) { /* the next layer's gather beside this compute */
            const int nl = dts__zg_next(s, u), b1 = u->zg_cur ^ 1;
            if (nl != -2 && u->zg_wl[b1] != nl) {
                u->zg_wl[b1] = nl;
                u->zg_pf_buf = b1, u->zg_pf_state = 1;
                dts__zg_coll(s, u, 1, sc->cost.params[nl + 1] * 4);
            }
        }
        const int slot = u->layer + 1;
        int64_t dur = u->dir ? sc->cost.bwd_ns[slot] : sc->cost.fwd_ns[slot];
        if (u->dir && sc->recompute == 1 && u->layer >= 0 && u->layer < L) {
            /* the group's forward again, before its last block's backward */
            int j, kg;
            dts__rc_group(sc, L, u->layer, &j, &kg);
            for (int i = j == kg - 1 ? 0 : kg; i < kg; i++) dur = dts_ns_add_sat(dur, sc->cost.fwd_ns[slot - j + i]);
        }
        const int64_t work = dts__dp_work(sc, u->layer, u->dir);
        if (work) {
            u->mem_act += work;
            dts__memory(s, u);
        }
        dts__compute(s, u, dur, dts__dp_op, 1, now);
        return;
    }
    const int slot = u->layer + 1;
    const int64_t work = dts__dp_work(sc, u->layer, u->dir);
    dts__span(s, u, u->dir ? "backward" : "forward", "compute", DT_LANE_COMPUTE, b, now, u->step, u->mb, u->layer,
              DT_TRACE_NONE);
    if (!u->dir) {
        u->mem_act += dts__saved_act(sc, slot) - work;
        if (u->layer == L) dts__memory(s, u);
        if (u->layer < L) u->layer++;
        else u->dir = 1;
    } else {
        u->mem_act -= dts__saved_act(sc, slot) + work;
        /* the last micro-batch's backward completes this layer's gradient */
        if (!ps && sc->d > 1 && !sc->zero && u->mb == sc->m - 1 && !strcmp(sc->precision, "fp32"))
            for (int k = 0; k < s->n_buckets; k++)
                if (s->bucket_low[k] == u->layer) dts__dp_launch(s, u, k);
        if (sc->zero >= 2 && sc->d > 1 && s->zg_rs_at[slot]) { /* ZeRO-2/3: the unit's gradient, every micro-batch */
            if (u->zg_pf_state == 1) u->zg_rs_pending = s->zg_rs_at[slot]; /* after the gather ahead of it */
            else dts__zg_coll(s, u, 0, s->zg_rs_at[slot]);
            return;
        }
        dts__dp_bwd_next(s, u, now);
        return;
    }
    dts__at(s, now, dts__dp_op, u, 0, 0);
}

/* After a layer's backward (and ZeRO-2/3's reduce-scatter): the next op. */
static void dts__dp_bwd_next(dts__sim *s, dts__unit *u, int64_t now)
{
    const dts_scenario *sc = s->sc;
    const int ps = sc->exchange == DTS_EX_PS_SYNC || sc->exchange == DTS_EX_PS_ASYNC;
    if (u->layer > -1) {
        u->layer--;
    } else if (u->mb + 1 < sc->m) {
        dts__memory(s, u);
        u->mb++;
        u->layer = -1;
        u->dir = 0;
    } else { /* backward done */
        dts__memory(s, u);
        u->bwd_done = 1;
        const int64_t slow = u->rank == sc->slow_rank ? sc->slow_ns : 0;
        u->exch_t0 = now + slow;
        if (slow) {
            dts__at(s, now + slow, dts__dp_op, u, 2, 0);
            return;
        }
        if (ps) dts__ps_push(s, u);
        else dts__dp_exchange(s, u);
        return;
    }
    dts__at(s, now, dts__dp_op, u, 0, 0);
}

/* Hand bucket b to the communication lane (in order). */
static void dts__dp_start_bucket(dts__sim *s, dts__unit *u)
{
    if (u->comm_busy || u->next_bucket >= u->buckets_ready) return;
    const int b = u->next_bucket;
    dts__cinst *ci = s->bucket_open[b];
    if (!ci) {
        dts__unit **m = malloc((size_t)s->sc->d * sizeof *m);
        if (!m) return dts__fail(s, DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory"));
        for (int i = 0; i < s->sc->d; i++) m[i] = &s->u[i];
        ci = dts__cinst_new(s, dts__ar_kind(s->sc), m, s->sc->d, s->bucket_bytes[b], DTS__C_BUCKET, dts__dp_coll_done);
        free(m);
        if (!ci) return;
        s->bucket_open[b] = ci;
    }
    if (++ci->arrived == ci->n) s->bucket_open[b] = NULL;
    u->comm_busy = 1;
    u->next_bucket++;
    dts_coll_arrive(ci->c, u->dpi);
}

static void dts__dp_launch(dts__sim *s, dts__unit *u, int b)
{
    (void)b;
    if (u->record) {
        dt_trace_event ev;
        dt_trace_event_init(&ev, DT_TRACE_INSTANT, "bucket launch", "comm", u->rank, DT_LANE_COMM, dts_engine_now(s->e),
                            0);
        ev.iter = u->step;
        ev.bytes = s->bucket_bytes[b];
        dt_trace_event_add_arg(&ev, "bucket", b);
        dts__rec(s, 1, &ev);
    }
    u->buckets_ready++;
    dts__dp_start_bucket(s, u);
}

static void dts__dp_optimizer(dts__sim *s, dts__unit *u);

/* After the backward (and the straggler's sleep): the gradient exchange. */
static void dts__dp_exchange(dts__sim *s, dts__unit *u)
{
    const dts_scenario *sc = s->sc;
    if (sc->d == 1) {
        dts__dp_optimizer(s, u);
        return;
    }
    if (sc->zero) { /* the loss first, then reduce-scatter / update / all-gather */
        dts__sync_arrive(s, &s->loss_sync, u);
        return;
    }
    if (strcmp(sc->precision, "fp32") != 0)
        for (int b = 0; b < s->n_buckets; b++) dts__dp_launch(s, u, b);
    if (u->buckets_done == s->n_buckets) dts__sync_arrive(s, &s->loss_sync, u);
}

static void dts__zero_coll(dts__sim *s, dts__unit *u, int which)
{
    dts__cinst *ci = s->zero_open[which];
    if (!ci) {
        dts__unit **m = malloc((size_t)s->sc->d * sizeof *m);
        if (!m) return dts__fail(s, DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory"));
        for (int i = 0; i < s->sc->d; i++) m[i] = &s->u[i];
        ci = dts__cinst_new(s, which ? DTS_COLL_ALL_GATHER : DTS_COLL_REDUCE_SCATTER, m, s->sc->d, s->params[0] * 4,
                            which ? DTS__C_ZERO_AG : DTS__C_ZERO_RS, dts__dp_coll_done);
        free(m);
        if (!ci) return;
        s->zero_open[which] = ci;
    }
    if (++ci->arrived == ci->n) s->zero_open[which] = NULL;
    dts_coll_arrive(ci->c, u->dpi);
}

/* ZeRO-2/3's collectives over the d ranks (which: 0 a unit's
 * reduce-scatter, 1 stage 3's gather of a layer, 2 stage 2's gather of a
 * unit's updated weights); each rank runs them in the same order, one at a
 * time, so one open instance of each suffices. */
static void dts__zg_coll(dts__sim *s, dts__unit *u, int which, int64_t bytes)
{
    static const int what[3] = {DTS__C_ZG_RS, DTS__C_ZG_AG, DTS__C_ZG_REFRESH};
    dts__cinst *ci = s->zg_open[which];
    if (!ci) {
        dts__unit **m = malloc((size_t)s->sc->d * sizeof *m);
        if (!m) return dts__fail(s, DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory"));
        for (int i = 0; i < s->sc->d; i++) m[i] = &s->u[i];
        ci = dts__cinst_new(s, which ? DTS_COLL_ALL_GATHER : DTS_COLL_REDUCE_SCATTER, m, s->sc->d, bytes, what[which],
                            dts__dp_coll_done);
        free(m);
        if (!ci) return;
        s->zg_open[which] = ci;
    }
    if (++ci->arrived == ci->n) s->zg_open[which] = NULL;
    dts_coll_arrive(ci->c, u->dpi);
}

static void dts__dp_opt_done(dts_engine *e, void *ctx, int64_t a, int64_t b);

void dts__dp_after_sync(dts__sim *s, dts__unit *u)
{
    const int64_t now = dts_engine_now(s->e);
    u->opt_t0 = now;
    if (s->sc->zero >= 2) /* the shard's update; stage 2 then gathers the weights */
        dts__at(s, now + dts__ns((double)s->params[0] / s->sc->d * s->sc->cost.optim_ns_per_param), dts__dp_opt_done, u,
                3, 0);
    else if (s->sc->zero) dts__zero_coll(s, u, 0);
    else dts__dp_optimizer(s, u);
}

static void dts__dp_coll_done(dts__sim *s, dts__unit *u, int kind)
{
    const int64_t now = dts_engine_now(s->e);
    switch (kind) {
    case DTS__C_BUCKET:
        u->comm_busy = 0;
        u->buckets_done++;
        dts__dp_start_bucket(s, u);
        if (u->bwd_done && u->buckets_done == s->n_buckets && now >= u->exch_t0) dts__sync_arrive(s, &s->loss_sync, u);
        break;
    case DTS__C_ZERO_RS: /* update this rank's 1/d of the parameters */
        dts__at(s, now + dts__ns((double)s->params[0] / s->sc->d * s->sc->cost.optim_ns_per_param), dts__dp_opt_done, u,
                1, 0);
        break;
    case DTS__C_ZERO_AG: dts__dp_opt_done(s->e, u, 2, 0); break;
    case DTS__C_ZG_RS: dts__dp_bwd_next(s, u, now); break;
    case DTS__C_ZG_AG:
        if (u->zg_pf_state == 1) { /* the gather ahead: the op waiting for it, or a reduce-scatter queued behind it */
            u->zg_pf_state = 0;
            if (u->zg_rs_pending) {
                const int64_t b = u->zg_rs_pending;
                u->zg_rs_pending = 0;
                dts__zg_coll(s, u, 0, b);
            } else if (u->zg_wait_pf) {
                u->zg_wait_pf = 0;
                u->zg_cur = u->zg_pf_buf;
                u->zg_have = 1;
                dts__dp_op(s->e, u, 0, 0);
            }
            break;
        }
        u->zg_have = 1;
        dts__dp_op(s->e, u, 0, 0);
        break;
    case DTS__C_ZG_REFRESH: dts__dp_opt_done(s->e, u, 3, 0); break;
    }
}

static void dts__dp_optimizer(dts__sim *s, dts__unit *u)
{
    const int64_t now = dts_engine_now(s->e);
    if (s->sc->d == 1) u->opt_t0 = now;
    dts__at(s, now + dts__ns((double)s->params[0] * s->sc->cost.optim_ns_per_param), dts__dp_opt_done, u, 2, 0);
}

/* a = 1: ZeRO's update done (all-gather next); a = 2: the optimizer is
 * done; a = 3: ZeRO-2/3's update or one of stage 2's gathers is done (the
 * next unit's gather, or the end) */
static void dts__dp_opt_done(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)b;
    dts__unit *u = ctx;
    dts__sim *s = u->sim;
    if (a == 1) {
        dts__zero_coll(s, u, 1);
        return;
    }
    if (a == 3) {
        if (s->sc->zero == 2 && s->sc->d > 1 && u->zg_refresh < s->zg_n) {
            dts__zg_coll(s, u, 2, s->zg_bytes[u->zg_refresh++]);
            return;
        }
        u->zg_refresh = 0;
    }
    dts__span(s, u, "optimizer", "optim", DT_LANE_OPTIM, u->opt_t0, dts_engine_now(e), u->step, DT_TRACE_NONE,
              DT_TRACE_NONE, DT_TRACE_NONE);
    dts__step_end(s, u);
}
