/* run.c: the executor's entry (see dts_run.h and run_internal.h): it sets
 * up a run (per-stage costs, units, syncs, buckets, server shards), runs
 * the engine, reads the summary off the events and the units (rank 0's
 * step ends and phases, bubbles, peak memory, staleness), adds the
 * numerics (the loss scaler's trajectory), writes the trace, tears down.
 *
 * Three shapes, as in the real runtime: pipeline (p, t or c > 1,
 * run_pipe.c), data parallel (p = t = 1, run_dp.c), parameter server
 * (run_ps.c, its workers' compute in run_dp.c).
 *
 * Invariants: a run with the same scenario gives the same events and the
 * same summary (no clocks but wall_seconds, no unordered containers); a
 * failed run leaves nothing allocated and no partial trace. */
#include "run_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dt_rules.h"
#include "dt_trace_stats.h"
#include "dts_amp.h"

/* ---- setup -------------------------------------------------------------- */

static int64_t dts__mem_ns(const dts_scenario *sc, double bytes)
{
    return dts__ns(bytes / (sc->hw.mem_bytes_per_s * 1e-9));
}

/* ZeRO-2/3's units (lib/parallel/zero_gpt.c): stage 3 a unit per layer,
 * stage 2 data parallelism's buckets (layers in backward order cut at
 * bucket_bytes, whatever the precision); and the bytes a rank keeps
 * (docs/zero.md): weights (stage 2: the whole model, FP32 or 16-bit),
 * its share of the FP32 gradients and of the FP32 masters and the
 * optimizer's states, one unit's gradient buffer and (stage 3, or stage 2
 * under mixed precision) one layer's FP32 weights (two with prefetch). */
static dt_status dts__zg_setup(dts__sim *s, const dts_scenario *sc)
{
    const int L = sc->model.num_layers, fp32 = !strcmp(sc->precision, "fp32");
    s->zg_bytes = calloc((size_t)L + 2, sizeof *s->zg_bytes);
    s->zg_rs_at = calloc((size_t)L + 2, sizeof *s->zg_rs_at);
    if (!s->zg_bytes || !s->zg_rs_at) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
    int64_t acc = 0, big_unit = 0, big_layer = 0, prm = 0;
    s->zg_n = 0;
    for (int l = L; l >= -1; l--) {
        const int64_t b = sc->cost.params[l + 1] * 4;
        acc += b;
        prm += sc->cost.params[l + 1];
        if (b > big_layer) big_layer = b;
        if (sc->zero == 3 || acc >= sc->bucket_bytes || l == -1) {
            s->zg_rs_at[l + 1] = acc;
            if (acc > big_unit) big_unit = acc;
            s->zg_bytes[s->zg_n++] = acc; /* descending; reversed below */
            acc = 0;
        }
    }
    for (int i = 0; i < s->zg_n / 2; i++) {
        const int64_t t = s->zg_bytes[i];
        s->zg_bytes[i] = s->zg_bytes[s->zg_n - 1 - i];
        s->zg_bytes[s->zg_n - 1 - i] = t;
    }
    const int64_t share = (prm + sc->d - 1) / sc->d; /* ZeRO-2/3: c = 1 (dts_scenario_check) */
    const int64_t weights = sc->zero == 2 ? prm * (fp32 ? 4 : 2) : 0;
    s->zg_static = weights + share * 4 + share * 4 * (1 + (int64_t)sc->optimizer_states) + big_unit +
                   (sc->zero == 3 || !fp32 ? big_layer : 0) + (sc->zero_prefetch ? big_layer : 0);
    return DT_OK;
}

/* The blocks of virtual stage q of Q: the scenario's stages (--pipeline-split
 * or as even as possible) when Q is p, else an even split over the Q
 * (dts_scenario_check has asked for a multiple); first/last in the trace's
 * numbering (-1 the embedding, L the head). */
static dt_status dts__vstage_layers(const dts_scenario *sc, int Q, int q, int *first, int *last)
{
    if (Q == sc->p) return dts_scenario_stage_layers(sc, q, first, last);
    int l0 = 0, l1 = 0;
    DT_CHECK(dt__stage_split(sc->model.num_layers, Q, NULL, &l0, &l1, q));
    *first = q == 0 ? -1 : l0;
    *last = q == Q - 1 ? sc->model.num_layers : l1 - 1;
    return DT_OK;
}

/* The schedule a pipelined run executes: the given one (it must fit the
 * scenario) or the generator's. */
static dt_status dts__schedule(dts__sim *s, const dts_scenario *sc, const dts_run_opts *o)
{
    int v = 1;
    DT_CHECK(dts_scenario_chunks(sc, &v));
    if (o && o->schedule) {
        if (o->schedule->p != sc->p || o->schedule->m != sc->m || o->schedule->steps != sc->steps ||
            o->schedule->v != v)
            return DT_FAIL(DT_ERR_INVALID,
                           "dtsim: the given schedule is for p %d, m %d, %d steps, %d chunks; the scenario has "
                           "p %d, m %d, %lld steps, %d chunks",
                           o->schedule->p, o->schedule->m, o->schedule->steps, o->schedule->v, sc->p, sc->m,
                           (long long)sc->steps, v);
        s->sched = (dt_schedule *)o->schedule;
        s->sched_borrowed = 1;
        return DT_OK;
    }
    return dt_schedule_make_chunks(sc->schedule, sc->p, v, sc->m, (int)sc->steps, &s->sched);
}

/* An unloaded ring allreduce of `bytes` over the group along dimension dim
 * that holds `rank`: evenly spaced ranks (include/dt_grid.h). */
static int64_t dts__grid_ring_ns(const dts__sim *s, dt_grid_group dim, int rank, int64_t bytes)
{
    const int stride = dt_grid_stride(&s->grid, dim);
    return dts_net_ring_allreduce_ns(&s->net, rank - dt_grid_coord(&s->grid, rank, dim) * stride, stride,
                                     s->grid.size[dim], bytes);
}

static dt_status dts__setup(dts__sim *s, const dts_scenario *sc, const dts_run_opts *o, double bw_scale)
{
    const int L = sc->model.num_layers, P = dts__is_pipe(sc) ? sc->p : 1;
    s->sc = sc;
    s->keep_all = o && (o->trace_path || o->keep_events);
    s->K = dts__is_ps(sc) ? sc->num_ps_servers : 0;
    s->W = sc->d;
    DT_CHECK(dts_scenario_grid(sc, &s->grid));
    s->world = s->grid.world;
    s->D = sc->c * sc->d;
    s->begin_step = dts__is_pipe(sc) ? dts__pipe_begin_step : dts__dp_begin_step;
    DT_CHECK(dts_engine_create(&s->e));
    DT_CHECK(dts_net_init(&s->net, s->world, &sc->hw, bw_scale));
    if (dts__is_pipe(sc)) {
        DT_CHECK(dts__schedule(s, sc, o));
        s->n_units = sc->p * s->D;
    } else {
        s->n_units = sc->d;
    }
    /* virtual stages: the schedule's chunks (v = 1: the stages themselves) */
    const int V = s->sched ? s->sched->v : 1, Q = P * V;
    s->V = V;
    s->Q = Q;
    s->q_dev = calloc((size_t)Q, sizeof *s->q_dev);
    s->q_chunk = calloc((size_t)Q, sizeof *s->q_chunk);
    s->fwd_ns = calloc((size_t)Q, sizeof *s->fwd_ns);
    s->bwd_ns = calloc((size_t)Q, sizeof *s->bwd_ns);
    s->bwd_b_ns = calloc((size_t)Q, sizeof *s->bwd_b_ns);
    s->bwd_w_ns = calloc((size_t)Q, sizeof *s->bwd_w_ns);
    s->act = calloc((size_t)Q, sizeof *s->act);
    s->act_re = calloc((size_t)Q, sizeof *s->act_re);
    s->act_fwd = calloc((size_t)Q, sizeof *s->act_fwd);
    s->split = calloc((size_t)Q, sizeof *s->split);
    s->tp = calloc((size_t)Q * DTS__TP_PASSES, sizeof *s->tp);
    s->opt_ns = calloc((size_t)P, sizeof *s->opt_ns);
    s->stash_ns = calloc((size_t)P, sizeof *s->stash_ns);
    s->params = calloc((size_t)P, sizeof *s->params);
    s->dp_open = calloc((size_t)P, sizeof *s->dp_open);
    if (!s->q_dev || !s->q_chunk || !s->fwd_ns || !s->bwd_ns || !s->bwd_b_ns || !s->bwd_w_ns || !s->act || !s->act_re ||
        !s->act_fwd || !s->split || !s->tp || !s->opt_ns || !s->stash_ns || !s->params || !s->dp_open)
        return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for %d stages of %d chunks", P, V);
    for (int r = 0; r < P; r++)
        for (int c = 0; c < V; c++) {
            const int q = s->sched ? s->sched->vstage[r * V + c] : r;
            s->q_dev[q] = r;
            s->q_chunk[q] = c;
        }
    /* between stages, activations and their gradients travel in the 16-bit
     * format under --fp16/--bf16 (lib/parallel/pipeline.c); the tensor
     * group's collectives stay FP32 (run_tp.c). Under sequence parallelism
     * each tensor rank sends its own rows, and nothing is gathered */
    const int64_t whole_msg = dts__tok_rows(sc, sc->t) * sc->model.hidden_size * (strcmp(sc->precision, "fp32") ? 2 : 4);
    s->msg_bytes = whole_msg;
    if (sc->t > 1 && P > 1 && sc->scatter_gather && !sc->sequence_parallel) {
        /* each of the t ranks sends its 1/t over its own link, and the
         * receiving stage's t ranks all-gather the pieces (intra node) */
        s->msg_bytes = ((whole_msg / 4 + sc->t - 1) / sc->t) * 4; /* whole 32-bit words (dt_comm_segment) */
        s->sg_ns = dts_net_ring_allgather_ns(&s->net, 0, dt_grid_stride(&s->grid, DT_GRID_TENSOR), sc->t,
                                             s->msg_bytes * sc->t);
    }
    dts__tp_setup(s);
    dts__cp_setup(s);
    /* the vocabulary split (t > 1): each rank holds at most ceil(V/t) rows
     * of wte and of the head (rank r: [V*r/t, V*(r+1)/t)); the slowest rank
     * sets the pace and the unit's memory is the largest rank's */
    const int vp = sc->t > 1 && sc->vocab_parallel;
    const int64_t Vw = sc->model.vocab_size, Vr = vp ? (Vw + sc->t - 1) / sc->t : Vw, C = sc->model.hidden_size;
    const int64_t BT = (int64_t)sc->B * dts__Tl(sc), cs = sc->c; /* a context rank's rows, and its share */
    for (int q = 0; q < Q; q++) {
        int first = -1, last = L;
        if (Q > 1) DT_CHECK(dts__vstage_layers(sc, Q, q, &first, &last));
        double f = 0, b = 0, w = 0;
        int64_t prm = 0, act = 0, act_re = 0, act_fwd = 0;
        int blocks = 0;
        const int first_block = first > 0 ? first : 0, last_block = last < L - 1 ? last : L - 1;
        const int nblocks = last_block - first_block + 1;
        for (int l = first; l <= last; l++) {
            const int slot = l + 1, block = l >= 0 && l < L;
            /* a block's share of its t ranks; the embedding's and head's under the vocabulary split; a
             * context rank's 1/c of each (its rows, and the balanced attention's 1/c) */
            const double share = (block ? 1.0 / sc->t : (double)Vr / (double)Vw) / (double)cs;
            f += (double)sc->cost.fwd_ns[slot] * share;
            b += (double)sc->cost.bwd_ns[slot] * share;
            w += (double)sc->cost.bwd_w_ns[slot] * share; /* the weight-gradient part of the backward */
            if (block && sc->recompute == 1) b += (double)sc->cost.fwd_ns[slot] * share;
            if (block) prm += sc->cost.params[slot] / sc->t;
            else if (slot == 0 || !sc->model.tie_embeddings) prm += sc->cost.params[slot] - (Vw - Vr) * C; /* wte, head rows */
            else prm += sc->cost.params[slot];
            /* what the slot keeps per micro-batch (lib/parallel/stage.c): under
             * full recomputation each group's output (B, T, C), whole on
             * every tensor rank, counted at its first block, and a group
             * is rebuilt (its blocks' whole sets) during the backward;
             * under selective the attention's log-sum-exp is dropped, and
             * one block's are rebuilt during its backward */
            /* the head's logits are the rank's columns, with every rank's per-row statistics (4 floats) and
             * the merged maximum and sum (2) beside them (lib/model/head.c) */
            /* under sequence parallelism the embedding keeps its output's rank's rows; the head's LayerNorm
             * output is all-gathered, kept whole (lib/model/embedding.c, head.c) */
            /* a context rank: every per-token tensor its B*T/c rows (the cost's are the whole sequence's) */
            const int64_t whole = sc->cost.act_bytes[slot] / cs;
            const int64_t all = block          ? dts__block_act(sc, sc->t, 0)
                                : vp && l == L ? whole - BT * (Vw - Vr) * 4 + BT * (4 * sc->t + 2) * 4
                                : l < 0        ? whole / (BT / dts__tok_rows(sc, sc->t))
                                               : whole;
            int j = 0, kg = 0, K = 1;
            if (block && sc->recompute == 1) K = dts__rc_group(sc, nblocks, l - first_block, &j, &kg);
            const int64_t keep = !block           ? all
                                 : dts__packs(sc) ? dts__block_act_packed(sc, sc->t, sc->recompute, l == last_block)
                                 : j              ? 0
                                                  : dts__block_act(sc, sc->t, sc->recompute);
            act += keep;
            if (block && dts__packs(sc)) { /* one block's FP32 working set, and its unpacked input */
                const int64_t work = all + (nblocks > 1 ? dts__tok_rows(sc, sc->t) * C * 4 : 0);
                if (work > act_re) act_re = work;
            } else if (block && sc->recompute == 1) {
                if (kg * all > act_re) act_re = kg * all;
                /* a group's forward runs its blocks (whole sets) beside the
                 * outputs kept so far: beyond act by that, less the later
                 * groups' outputs and the head's activations, not yet kept */
                const int64_t over =
                    kg * all - (last_block - l) / K * keep - (last == L ? sc->cost.act_bytes[L + 1] / cs : 0);
                if (!j && over > act_fwd) act_fwd = over;
            } else if (block && sc->recompute == 2 && all - keep > act_re) act_re = all - keep;
            blocks += block;
        }
        /* the tensor group's collectives (run_tp.c): W's are part of the backward too */
        dts__tp_stage(s, q, blocks, first < 0, last == L);
        const dts__tp_pass *tq = &s->tp[q * DTS__TP_PASSES];
        f += (double)tq[DTS__TP_F].ns;
        b += (double)(tq[DTS__TP_B].ns + tq[DTS__TP_W].ns);
        w += (double)tq[DTS__TP_W].ns;
        s->fwd_ns[q] = dts__ns(f);
        s->bwd_ns[q] = dts__ns(b);
        s->bwd_w_ns[q] = dts__ns(w);
        s->bwd_b_ns[q] = s->bwd_ns[q] - s->bwd_w_ns[q];
        s->act[q] = act;
        s->act_re[q] = act_re;
        s->act_fwd[q] = act_fwd;
        s->split[q] = dts__split_mem_of(sc, sc->t, blocks, first < 0, last == L);
        s->params[s->q_dev[q]] += prm;
    }
    /* tied embeddings with the first and last virtual stages on two devices:
     * the last holds a copy of wte as its head, and before each update the
     * two sum their gradients (lib/parallel/pipeline.c), costed here
     * unloaded as part of the update (zb-v has both ends on device 0) */
    const int d0 = s->q_dev[0], dL = s->q_dev[Q - 1], tied = sc->model.tie_embeddings && d0 != dL;
    const int64_t VC = Vr * C; /* the rank's rows of the tied copy */
    if (tied) s->params[dL] += VC;
    const int ends_apart = dt_grid_stride(&s->grid, DT_GRID_PIPELINE) * (dL - d0); /* ranks between the two ends */
    for (int r = 0; r < P; r++) {
        const int64_t prm = s->params[r];
        const int tied_end = tied && (r == d0 || r == dL);
        /* ZeRO-1: each rank updates its 1/(c d) of the stage */
        const int shards = sc->zero && s->D > 1 ? s->D : 1;
        s->opt_ns[r] = dts__ns((double)prm / shards * sc->cost.optim_ns_per_param) +
                       (sc->t > 1 ? dts__grid_ring_ns(s, DT_GRID_TENSOR, 0, 4) : 0) +
                       (tied_end ? dts_net_ring_allreduce_ns(&s->net, 0, ends_apart, 2, VC * 4) : 0);
        s->stash_ns[r] = dts__mem_ns(sc, 2.0 * (double)prm * 4);
    }
    s->u = calloc((size_t)s->n_units, sizeof *s->u);
    if (!s->u) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for %d ranks", s->n_units);
    if (sc->hw.cores_per_node > 0) {
        if (sc->t > 1 && sc->hw.devices_per_node % sc->t != 0)
            return DT_FAIL(DT_ERR_UNSUPPORTED,
                           "dtsim: --cores-per-node with --tensor-model-parallel-size %d: expected the devices per "
                           "node (%d) to be a multiple of it (a tensor-parallel group shares one node's cores)",
                           sc->t, sc->hw.devices_per_node);
        const int dpn = sc->hw.devices_per_node > 0 ? sc->hw.devices_per_node : 1;
        s->n_nodes = (s->world + dpn - 1) / dpn;
        s->job = calloc((size_t)s->n_units, sizeof *s->job);
        s->cpu_active = calloc((size_t)s->n_nodes, sizeof *s->cpu_active);
        s->cpu_last = calloc((size_t)s->n_nodes, sizeof *s->cpu_last);
        s->node_ranks = calloc((size_t)s->n_nodes, sizeof *s->node_ranks);
        if (!s->job || !s->cpu_active || !s->cpu_last || !s->node_ranks)
            return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for %d nodes", s->n_nodes);
    }
    const int states = sc->optimizer_states;
    if (sc->zero >= 2) DT_CHECK(dts__zg_setup(s, sc));
    for (int i = 0; i < s->n_units; i++) {
        dts__unit *u = &s->u[i];
        u->sim = s;
        u->idx = i;
        u->dpi = i % s->D;
        u->stage = dts__is_pipe(sc) ? i / s->D : 0;
        const int coord[DT_GRID_DIMS] = {0, u->dpi % sc->c, u->dpi / sc->c, u->stage}; /* dpi = context + c * data */
        u->rank = dt_grid_rank(&s->grid, coord);                                       /* its tensor rank 0 */
        if (s->node_ranks)
            s->node_ranks[u->rank / (sc->hw.devices_per_node > 0 ? sc->hw.devices_per_node : 1)] += sc->t;
        u->record = s->keep_all || u->dpi == 0;
        const int64_t prm = s->params[u->stage];
        if (s->K) u->mem_static = prm * 8; /* weights + gradients; the servers keep the optimizer state */
        else if (sc->zero >= 2) u->mem_static = s->zg_static;
        else if (sc->zero) u->mem_static = prm * 8 + prm * 4 * states / s->D;
        else u->mem_static = prm * (8 + 4 * (int64_t)states);
        if (s->sched) { /* 8 messages in flight per chunk to start with; the rings grow to the largest backlog */
            u->link = calloc((size_t)V, sizeof *u->link);
            if (!u->link) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
            for (int c = 0; c < V; c++) {
                DT_CHECK(dts__mbox_init(&u->link[c].act, 8));
                DT_CHECK(dts__mbox_init(&u->link[c].grad, 8));
            }
        }
        if (s->K) {
            u->pulled = calloc((size_t)s->K, sizeof *u->pulled);
            if (!u->pulled) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
        }
    }
    /* syncs */
    s->world_sync = (dts__sync){
        .n = s->n_units, .cost = dts_net_ring_allreduce_ns(&s->net, 0, 1, s->world, 8), .done = dts__step_synced};
    s->world_sync.members = malloc((size_t)s->n_units * sizeof *s->world_sync.members);
    s->loss_sync = (dts__sync){.n = s->n_units,
                               .cost = dts_net_ring_allreduce_ns(&s->net, 0, 1, s->D, 4),
                               .done = dts__dp_after_sync,
                               .members = s->world_sync.members};
    if (!s->world_sync.members) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
    for (int i = 0; i < s->n_units; i++) s->world_sync.members[i] = &s->u[i];
    for (int i = 0; i < s->n_units; i++) s->u[i].loss_wait = -1;
    s->async_report = dts__is_pipe(sc) && sc->p > 1 &&
                      (sc->schedule == DT_SCHED_PIPEDREAM || sc->schedule == DT_SCHED_PIPEDREAM_VSYNC);
    if (s->async_report) {
        s->loss_at = malloc((size_t)s->D * (size_t)sc->steps * sizeof *s->loss_at);
        s->loss0_sync = (dts__sync){.n = s->D,
                                    .cost = dts__grid_ring_ns(s, DT_GRID_DATA, 0, 4),
                                    .done = dts__step_synced,
                                    .members = malloc((size_t)s->D * sizeof(dts__unit *))};
        if (!s->loss_at || !s->loss0_sync.members) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
        for (int64_t i = 0; i < (int64_t)s->D * sc->steps; i++) s->loss_at[i] = -1;
        for (int i = 0; i < s->D; i++) s->loss0_sync.members[i] = dts__unit_at(s, i, 0);
    }
    if (dts__is_pipe(sc)) {
        s->norm = calloc((size_t)s->D, sizeof *s->norm); /* one per pipeline */
        if (!s->norm) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
        for (int d = 0; d < s->D; d++) {
            s->norm[d] = (dts__sync){.n = sc->p,
                                     .done = dts__pipe_norm_done,
                                     .cost = dts__grid_ring_ns(s, DT_GRID_PIPELINE, dts__unit_at(s, d, 0)->rank, 4)};
            s->norm[d].members = malloc((size_t)sc->p * sizeof *s->norm[d].members);
            if (!s->norm[d].members) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
            for (int st = 0; st < sc->p; st++) s->norm[d].members[st] = dts__unit_at(s, d, st);
        }
    } else if (!s->K && sc->d > 1 && !sc->zero) {
        /* lib/train/step_dp.c's buckets (dt__gpt_buckets): layers in backward order, cut at bucket_bytes, in every
         * precision; under --fp16/--bf16 they are all launched after the backward (run_dp.c) */
        s->bucket_bytes = calloc((size_t)L + 2, sizeof *s->bucket_bytes);
        s->bucket_low = calloc((size_t)L + 2, sizeof *s->bucket_low);
        s->bucket_open = calloc((size_t)L + 2, sizeof *s->bucket_open);
        if (!s->bucket_bytes || !s->bucket_low || !s->bucket_open) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
        int64_t acc = 0;
        for (int l = L; l >= -1; l--) {
            acc += sc->cost.params[l + 1] * 4;
            if (acc >= sc->bucket_bytes || l == -1) {
                s->bucket_bytes[s->n_buckets] = acc;
                s->bucket_low[s->n_buckets++] = l;
                acc = 0;
            }
        }
    }
    if (s->K) {
        s->srv = calloc((size_t)s->K, sizeof *s->srv);
        if (!s->srv) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
        /* contiguous runs of whole layers, cut where the running size first reaches k/K of the model */
        const int64_t total = s->params[0];
        int64_t run = 0, prev = 0;
        int k = 0;
        for (int l = -1; l <= L; l++) {
            run += sc->cost.params[l + 1];
            if (k < s->K - 1 && run * s->K >= (int64_t)(k + 1) * total && L - l >= s->K - 1 - k) {
                s->srv[k++].params = run - prev;
                prev = run;
            }
        }
        s->srv[s->K - 1].params += run - prev;
        for (int j = 0; j < s->K; j++) {
            dts__server *v = &s->srv[j];
            v->sim = s;
            v->idx = j;
            v->rank = s->W + j;
            v->record = s->keep_all;
            v->hdr_at = malloc((size_t)s->W * sizeof *v->hdr_at);
            v->noticed = calloc((size_t)s->W, sizeof *v->noticed);
            if (!v->hdr_at || !v->noticed) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory");
            for (int w = 0; w < s->W; w++) v->hdr_at[w] = -1;
        }
    }
    return DT_OK;
}

static void dts__teardown(dts__sim *s)
{
    free(s->job);
    free(s->cpu_active);
    free(s->cpu_last);
    free(s->node_ranks);
    if (s->u)
        for (int i = 0; i < s->n_units; i++) {
            for (int c = 0; s->u[i].link && c < s->V; c++) {
                dts__mbox_free(&s->u[i].link[c].act);
                dts__mbox_free(&s->u[i].link[c].grad);
            }
            free(s->u[i].link);
            free(s->u[i].pulled);
        }
    if (s->norm)
        for (int d = 0; d < s->D; d++) free(s->norm[d].members);
    if (s->srv)
        for (int j = 0; j < s->K; j++) {
            free(s->srv[j].hdr_at);
            free(s->srv[j].noticed);
        }
    if (s->dp_open)
        for (int st = 0; st < (dts__is_pipe(s->sc) ? s->sc->p : 1); st++) dts__cinst_free(s->dp_open[st]);
    if (s->bucket_open)
        for (int b = 0; b < s->n_buckets; b++) dts__cinst_free(s->bucket_open[b]);
    for (int k = 0; k < 2; k++) dts__cinst_free(s->zero_open[k]);
    for (int k = 0; k < 3; k++) dts__cinst_free(s->zg_open[k]);
    free(s->zg_bytes);
    free(s->zg_rs_at);
    free(s->norm);
    free(s->srv);
    free(s->world_sync.members);
    free(s->loss_at);
    free(s->loss0_sync.members);
    free(s->u);
    free(s->q_dev);
    free(s->q_chunk);
    free(s->fwd_ns);
    free(s->bwd_ns);
    free(s->bwd_b_ns);
    free(s->bwd_w_ns);
    free(s->opt_ns);
    free(s->act_re);
    free(s->act_fwd);
    free(s->split);
    free(s->stash_ns);
    free(s->params);
    free(s->act);
    free(s->tp);
    free(s->dp_open);
    free(s->bucket_bytes);
    free(s->bucket_low);
    free(s->bucket_open);
    free(s->ev.v);
    if (!s->sched_borrowed) dt_schedule_free(s->sched);
    dts_net_free(&s->net);
    dts_engine_free(s->e);
}

/* ---- numerics ----------------------------------------------------------- */

/* fp16 with a gradient model: the loss scaler's trajectory (sim/amp.c), put
 * on rank 0's timeline at its step ends. */
static dt_status dts__numerics(dts__sim *s, dts_summary *out)
{
    const dts_scenario *sc = s->sc;
    out->final_loss_scale = NAN;
    if (!sc->use_loss_scaling || !sc->grad_trace[0]) return DT_OK;
    dt_trace *t = NULL;
    DT_CHECK(dt_trace_read(sc->grad_trace, &t));
    dts_grad_model gm;
    dt_status st = dts_grad_model_fit(t, sc->grad_trace, &gm);
    dt_trace_free(t);
    DT_CHECK(st);
    dts_amp_result r;
    DT_CHECK(dts_amp_simulate(&gm, &sc->scaler, sc->steps, sc->seed, &r));
    out->skipped_steps = r.skipped;
    out->overflows = r.overflows;
    out->final_loss_scale = r.final_scale;
    for (int64_t i = 0; i < r.steps && i < out->steps; i++) {
        const int64_t at = out->step_end_ns[i];
        dt_trace_event e;
        if (r.trace[i].overflow) {
            dt_trace_event_init(&e, DT_TRACE_INSTANT, "overflow", "optim", 0, DT_LANE_OPTIM, at, 0);
            e.iter = i;
            dt_trace_event_add_arg(&e, "loss_scale", r.trace[i].scale);
            dt_trace_event_add_arg(&e, "layer_slot", r.trace[i].layer);
            dt_trace_event_add_arg(&e, "skipped", r.trace[i].skipped);
            dts__rec(s, 1, &e);
        }
        dt_trace_event_init(&e, DT_TRACE_COUNTER, "loss_scale", "counter", 0, DT_LANE_COMPUTE, at, 0);
        e.value = i + 1 < r.steps ? r.trace[i + 1].scale : r.final_scale;
        dts__rec(s, 1, &e);
    }
    dts_amp_result_free(&r);
    return s->st;
}

/* ---- the run ------------------------------------------------------------ */

static dt_status dts__write_trace(const dts__sim *s, const char *path)
{
    const dts_scenario *sc = s->sc;
    char *cfg = dts_scenario_json(sc);
    if (!cfg) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for the trace's config");
    dt_trace_writer *w = NULL;
    dt_status st = dt_trace_writer_open(path, "dtsim", cfg, &w);
    free(cfg);
    DT_CHECK(st);
    static const char *const lanes[] = {"compute", "comm", "optimizer"};
    for (int r = 0; r < s->world && st == DT_OK; r++) {
        char label[96];
        dt_trace_event e;
        if (dts__is_ps(sc) && r >= s->W)
            snprintf(label, sizeof label, "dtsim rank %d (parameter server %d)", r, r - s->W);
        else if (dts__is_pipe(sc) && sc->c > 1)
            snprintf(label, sizeof label, "dtsim rank %d (t %d, c %d, d %d, p %d)", r,
                     dt_grid_coord(&s->grid, r, DT_GRID_TENSOR), dt_grid_coord(&s->grid, r, DT_GRID_CONTEXT),
                     dt_grid_coord(&s->grid, r, DT_GRID_DATA), dt_grid_coord(&s->grid, r, DT_GRID_PIPELINE));
        else if (dts__is_pipe(sc))
            snprintf(label, sizeof label, "dtsim rank %d (t %d, d %d, p %d)", r,
                     dt_grid_coord(&s->grid, r, DT_GRID_TENSOR), dt_grid_coord(&s->grid, r, DT_GRID_DATA),
                     dt_grid_coord(&s->grid, r, DT_GRID_PIPELINE));
        else snprintf(label, sizeof label, "dtsim rank %d", r);
        dt_trace_event_init(&e, DT_TRACE_METADATA, "process_name", "meta", r, 0, 0, 0);
        snprintf(e.label, sizeof e.label, "%.*s", (int)sizeof e.label - 1, label);
        st = dt_trace_write(w, &e);
        for (int l = 0; l < 3 && st == DT_OK; l++) {
            dt_trace_event_init(&e, DT_TRACE_METADATA, "thread_name", "meta", r, l, 0, 0);
            snprintf(e.label, sizeof e.label, "%s", lanes[l]);
            st = dt_trace_write(w, &e);
        }
    }
    /* a unit's events stand for its t tensor-parallel ranks; each message
     * span is followed by its flow event (the copy on tensor rank k is
     * pipeline k's message: its id is k more) */
    const int tp = dts__is_pipe(sc) ? sc->t : 1;
    for (size_t i = 0; i < s->ev.n && st == DT_OK; i++)
        for (int k = 0; k < tp && st == DT_OK; k++) {
            dt_trace_event e = s->ev.v[i], flow;
            e.pid += k;
            for (int x = 0; x < e.n_extra && k > 0; x++)
                if (!strcmp(e.extra[x].key, "flow")) e.extra[x].value += k;
            st = dt_trace_write(w, &e);
            if (st == DT_OK && dt_trace_flow_of(&e, &flow) == 1) st = dt_trace_write(w, &flow);
        }
    if (st != DT_OK) { /* leave no partial trace */
        dt_trace_writer_abort(w);
        return st;
    }
    return dt_trace_writer_close(w);
}

/* The scenario with every collective analytic: what --collectives analytic would run. */
static double dts__events_if_analytic(const dts_scenario *sc)
{
    dts_scenario *a = malloc(sizeof *a);
    if (!a) return INFINITY;
    *a = *sc;
    a->hw.collectives = DTS_HW_COLL_ANALYTIC;
    const double n = dts_run_events_estimate(a);
    free(a);
    return n;
}

dt_status dts_run(const dts_scenario *sc, const dts_run_opts *opts, dts_summary *out)
{
    memset(out, 0, sizeof *out);
    DT_CHECK(dts_scenario_check(sc));
    if (!sc->have_cost)
        return DT_FAIL(DT_ERR_INVALID, "dtsim: the scenario has no cost model (a profile or the roofline)");
    const double n_events = dts_run_events_estimate(sc);
    if (!(n_events <= DTS_RUN_MAX_EVENTS)) {
        const int helps = sc->hw.collectives != DTS_HW_COLL_ANALYTIC && dts__events_if_analytic(sc) <= DTS_RUN_MAX_EVENTS;
        return DT_FAIL(DT_ERR_INVALID,
                       "dtsim: the scenario needs about %.3g events (%d ranks, %lld steps of %d micro-batches, %d "
                       "layers), more than the %.0e the simulator runs: %sfewer --train-iters or --micro-batches, "
                       "fewer ranks, or a larger --allreduce-chunk-bytes",
                       n_events, dts_scenario_world(sc), (long long)sc->steps, sc->m, sc->model.num_layers,
                       DTS_RUN_MAX_EVENTS, helps ? "--collectives analytic (the collectives priced per phase), " : "");
    }
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    dts__sim s;
    memset(&s, 0, sizeof s);
    dt_status st = dts__setup(&s, sc, opts, opts && opts->bw_scale > 0 ? opts->bw_scale : 1.0);
    if (st != DT_OK) goto done;
    for (int i = 0; i < s.n_units; i++) {
        dts__unit *u = &s.u[i];
        dts__memory(&s, u);
        s.begin_step(&s, u);
    }
    st = dts_engine_run(s.e);
    if (st == DT_OK) st = s.st;
    if (st != DT_OK) goto done;
    for (int i = 0; i < s.n_units; i++) {
        const dts__unit *u = &s.u[i];
        if (u->finished) continue;
        if (s.sched) {
            const dt_sched_instr *in = &s.sched->instr[u->stage][u->pc < s.sched->count[u->stage] ? u->pc : 0];
            st = DT_FAIL(
                DT_ERR_INVALID,
                "dtsim: deadlock: stage %d (rank %d) waits at instruction %d (%s of micro-batch %d) of step %lld "
                "and nothing can happen any more",
                u->stage, u->rank, u->pc, dt_sched_op_name(in->op), in->mb, (long long)u->step);
        } else {
            st = DT_FAIL(DT_ERR_INVALID, "dtsim: deadlock: rank %d stopped in step %lld", u->rank, (long long)u->step);
        }
        goto done;
    }
    out->steps = sc->steps;
    out->events = dts_engine_events(s.e);
    out->total_ns = dts_engine_now(s.e);
    out->p = dts__is_pipe(sc) ? sc->p : 1;
    out->n_ranks = s.world;
    out->step_end_ns = calloc((size_t)sc->steps, sizeof *out->step_end_ns);
    out->bubble = calloc((size_t)out->p, sizeof *out->bubble);
    out->bubble_fb = calloc((size_t)out->p, sizeof *out->bubble_fb);
    out->max_stash = calloc((size_t)out->p, sizeof *out->max_stash);
    out->peak_mem_stage = calloc((size_t)out->p, sizeof *out->peak_mem_stage);
    out->stage_compute_ns = calloc((size_t)out->p, sizeof *out->stage_compute_ns);
    out->peak_mem = calloc((size_t)s.world, sizeof *out->peak_mem);
    if (!out->step_end_ns || !out->bubble || !out->bubble_fb || !out->max_stash || !out->peak_mem ||
        !out->peak_mem_stage || !out->stage_compute_ns) {
        st = DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for the summary");
        goto done;
    }
    /* rank 0's step ends and phases, as the validation reads real traces */
    for (size_t i = 0; i < s.ev.n; i++) {
        const dt_trace_event *e = &s.ev.v[i];
        if (e->pid != 0 || e->iter == DT_TRACE_NONE || e->iter < 0 || e->iter >= sc->steps) continue;
        const int64_t end = e->ts_ns + (e->ph == DT_TRACE_COMPLETE ? e->dur_ns : 0);
        if (end > out->step_end_ns[e->iter]) out->step_end_ns[e->iter] = end;
    }
    const int skip = sc->steps > 1 ? 1 : 0;
    st = dt_trace_phase_times_events(s.ev.v, s.ev.n, 0, skip, &out->rank0);
    if (st != DT_OK) goto done;
    out->step_ns = out->rank0.step_ns;
    out->bubble_formula = dt_schedule_bubble_ideal_chunks(sc->schedule, out->p, s.V, sc->m, (int)sc->steps);
    out->v = s.V;
    out->schedule = sc->schedule;
    /* each stage's bubble from its own events: the events of each stage's
     * first rank listed once by stage (a counting pass, then a filling
     * one), and gathered into one reused buffer per stage */
    dt_trace_event *mine = NULL;
    size_t *by_stage = NULL, *first_of = calloc((size_t)out->p + 1, sizeof *first_of);
    if (!first_of) {
        st = DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for the bubbles");
        goto done;
    }
    const int per_stage = dts__is_pipe(sc) ? sc->t * s.D : 1;
    for (size_t i = 0; s.sched && i < s.ev.n; i++) {
        const int pid = s.ev.v[i].pid;
        if (pid >= 0 && pid % per_stage == 0 && pid / per_stage < out->p) first_of[pid / per_stage + 1]++;
    }
    for (int p = 0; p < out->p; p++) first_of[p + 1] += first_of[p];
    size_t most = 0;
    for (int p = 0; p < out->p; p++)
        if (first_of[p + 1] - first_of[p] > most) most = first_of[p + 1] - first_of[p];
    by_stage = malloc((first_of[out->p] ? first_of[out->p] : 1) * sizeof *by_stage);
    mine = malloc((most ? most : 1) * sizeof *mine);
    size_t *fill = calloc((size_t)out->p, sizeof *fill);
    if (!by_stage || !mine || !fill) {
        free(by_stage), free(mine), free(fill), free(first_of);
        st = DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for the bubbles");
        goto done;
    }
    for (size_t i = 0; s.sched && i < s.ev.n; i++) {
        const int pid = s.ev.v[i].pid;
        if (pid >= 0 && pid % per_stage == 0 && pid / per_stage < out->p) {
            const int p = pid / per_stage;
            by_stage[first_of[p] + fill[p]++] = i;
        }
    }
    free(fill);
    for (int p = 0; p < out->p; p++) {
        out->bubble[p] = out->bubble_fb[p] = NAN;
        if (!s.sched) continue;
        const int rank = dts__unit_at(&s, 0, p)->rank;
        const size_t n_mine = first_of[p + 1] - first_of[p];
        for (size_t k = 0; k < n_mine; k++) mine[k] = s.ev.v[by_stage[first_of[p] + k]];
        dt_bubble_stats bs;
        if (dt_bubble_stats_events(mine, n_mine, rank, skip, &bs) == DT_OK) {
            /* pipedream: steps interleave, so the per-step window overstates
             * the idle share; the whole run's is the stage's (dt_trace_stats.h) */
            const int async = sc->schedule == DT_SCHED_PIPEDREAM || sc->schedule == DT_SCHED_PIPEDREAM_VSYNC;
            out->bubble[p] = async ? bs.run : bs.mean;
            out->bubble_fb[p] = async ? bs.run_fb : bs.mean_fb;
            dt_bubble_stats_free(&bs);
        }
        for (int d = 0; d < s.D; d++)
            if (dts__unit_at(&s, d, p)->stash_max > out->max_stash[p])
                out->max_stash[p] = dts__unit_at(&s, d, p)->stash_max;
    }
    free(mine);
    free(by_stage);
    free(first_of);
    for (int q = 0; q < s.Q; q++) /* a backward split in B and W takes the same time as a whole one */
        out->stage_compute_ns[s.q_dev[q]] += (double)sc->m * (double)(s.fwd_ns[q] + s.bwd_ns[q]);
    for (int i = 0; i < s.n_units; i++) {
        for (int k = 0; k < (dts__is_pipe(sc) ? sc->t : 1); k++) out->peak_mem[s.u[i].rank + k] = s.u[i].mem_peak;
        if (s.u[i].mem_peak > out->peak_mem_stage[s.u[i].stage]) out->peak_mem_stage[s.u[i].stage] = s.u[i].mem_peak;
    }
    for (int j = 0; j < s.K; j++)
        out->peak_mem[s.srv[j].rank] =
            s.srv[j].params * (4 + 4 * (int64_t)sc->optimizer_states) + s.srv[j].params * 4 * (int64_t)s.W;
    const double n_steps = (double)sc->steps;
    out->comm_ns_dp = s.u[0].ns_dp / n_steps;
    out->comm_ns_pp = s.u[0].ns_pp / n_steps;
    double tp0 = 0, cp0 = 0; /* device 0's tensor and context groups' collectives per micro-batch, over its
                                chunks and passes */
    for (int c = 0; s.sched && c < s.V; c++)
        for (int k = 0; k < DTS__TP_PASSES; k++) {
            const dts__tp_pass *ps = &s.tp[s.sched->vstage[c] * DTS__TP_PASSES + k];
            tp0 += (double)(ps->ns - ps->ns_cp);
            cp0 += (double)ps->ns_cp;
        }
    out->comm_ns_tp = dts__is_pipe(sc) && sc->t > 1 ? tp0 * sc->m : 0.0;
    out->comm_ns_cp = dts__is_pipe(sc) && sc->c > 1 ? cp0 * sc->m : 0.0;
    out->comm_ns_ps = s.u[0].ns_ps / n_steps;
    out->world_sync_ns = dts__is_pipe(sc) && !s.async_report ? (double)s.world_sync.cost : 0.0;
    out->pushes = s.pushes;
    out->staleness_mean = s.pushes ? (double)s.stale_sum / (double)s.pushes : 0.0;
    out->staleness_max = s.stale_max;
    memcpy(out->staleness_hist, s.stale_hist, sizeof out->staleness_hist);
    st = dts__numerics(&s, out);
    if (st != DT_OK) goto done;
    if (opts && opts->trace_path) st = dts__write_trace(&s, opts->trace_path);
    if (st != DT_OK) goto done;
    if (opts && opts->keep_events) {
        out->ev = s.ev.v;
        out->n_ev = s.ev.n;
        s.ev.v = NULL;
    }
done:
    dts__teardown(&s);
    clock_gettime(CLOCK_MONOTONIC, &w1);
    out->wall_seconds = (double)(w1.tv_sec - w0.tv_sec) + 1e-9 * (double)(w1.tv_nsec - w0.tv_nsec);
    if (st != DT_OK) dts_summary_free(out);
    return st;
}

void dts_summary_free(dts_summary *s)
{
    if (!s) return;
    free(s->step_end_ns);
    free(s->bubble);
    free(s->bubble_fb);
    free(s->max_stash);
    free(s->peak_mem);
    free(s->peak_mem_stage);
    free(s->stage_compute_ns);
    free(s->ev);
    memset(s, 0, sizeof *s);
}
