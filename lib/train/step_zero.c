/* step_zero.c: the ZeRO strategies with data parallelism (lib/parallel/zero.c
 * and zero_gpt.c hold the algorithms, docs/zero.md explains them).
 *
 * Stage 1 (--use-distributed-optimizer, --zero-stage 1): every rank keeps
 * the whole model's weights and gradients but only its segment of the
 * optimizer state (and, under mixed precision, of the FP32 master
 * weights): the step reduce-scatters the gradients, updates the rank's
 * segment and all-gathers the new weights.
 *
 * Stages 2 and 3 (--zero-stage 2|3): the model is lib/parallel/zero_gpt.c's
 * sharded GPT (the kind of model_gpt_zero.c), whose backward has already
 * reduce-scattered the gradients unit by unit into the rank's shard; the
 * step updates the shard and (stage 2) all-gathers the whole weights.
 *
 * Invariants: the segments partition the flat buffer (each unit's); after
 * a step every rank holds the same weights, equal to the replica
 * strategy's up to the order of the gradient sums; the loss is summed
 * before the update, so a non-finite one stops the step on every rank. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "dt_internal.h"
#include "dt_time.h"
#include "trainer_internal.h"

static dt_status dt__tr_zgpt_create(dt_trainer *tr)
{
    const dt_train_config *cfg = &tr->cfg;
    dt_comm *dp = cfg->comm;
    if (!dp) { /* one process: one shard, the whole */
        DT_CHECK(dt_comm_self_create(&tr->zself));
        dp = tr->zself;
    }
    if (tr->be->device == DT_DEVICE_CUDA && cfg->comm) DT_CHECK(dt_comm_nccl_create(cfg->comm, tr->be, &tr->gcomm));
    const dt__zgpt_config zc = {.model = &tr->cfg.model,
                                .stage = cfg->zero_stage,
                                .precision = cfg->precision,
                                .recompute = cfg->recompute,
                                .recompute_k = cfg->recompute_num_layers,
                                .bucket_bytes = cfg->bucket_bytes,
                                .prefetch = cfg->zero_prefetch,
                                .init = tr->init,
                                .optim = &tr->cfg.optim};
    DT_CHECK(dt__zgpt_create(&zc, tr->gcomm ? tr->gcomm : dp, tr->be, &tr->zgpt));
    /* the collectives' steps on the trace's comm lane (the hook writes only with a trace open) */
    const dt_collective_opts opts = {.chunk_bytes = cfg->allreduce_chunk_bytes, .hook = dt__comm_hook, .hook_ctx = tr};
    dt__zgpt_set_coll(tr->zgpt, &opts);
    return DT_OK;
}

dt_status dt__tr_zero_create(dt_trainer *tr)
{
    const dt_train_config *cfg = &tr->cfg;
    if (cfg->zero_stage >= 2) return dt__tr_zgpt_create(tr);
    /* the device gradients' communicator: NCCL on the GPU (made here, before the buckets would) */
    if (tr->be->device == DT_DEVICE_CUDA) DT_CHECK(dt_comm_nccl_create(cfg->comm, tr->be, &tr->gcomm));
    DT_CHECK(
        dt__zero_create(tr->gcomm ? tr->gcomm : cfg->comm, tr->be, tr->kind->layout(tr), &tr->cfg.optim, &tr->zero));
    if (cfg->precision != DT_F32 &&
        tr->kind->round_weights) { /* the FP32 masters sharded too; the model keeps their half values */
        DT_CHECK(dt__zero_keep_masters(tr->zero, tr->kind->params(tr), cfg->precision));
        DT_CHECK(tr->kind->round_weights(tr));
    }
    return DT_OK;
}

/* The weights' fingerprint (summary.c's sum of w_i u(i)) from the FP32
 * masters, whose segments the ranks hold (under mixed precision at stage 1,
 * and always at stages 2 and 3), added over the ranks. Collective. */
static dt_status dt__zero_probe(dt_trainer *tr, const dt__zero *z, dt_comm *comm)
{
    const float *master = dt__zero_master(z);
    if (!master) return DT_OK;
    size_t lo = 0, len = 0;
    dt__zero_shard(z, &lo, &len);
    float *h = malloc((len ? len : 1) * sizeof *h);
    dt_status st = !h ? DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory for the weights fingerprint")
                      : tr->be->copy(tr->be, h, master, len * sizeof *h, DT_COPY_D2H);
    double mine = 0.0;
    for (size_t i = 0; st == DT_OK && i < len; i++) mine += (double)h[i] * dt__probe_u(dt__zero_shard_index(z, i));
    free(h);
    if (st == DT_OK && comm) st = dt_comm_sum_doubles(comm, &mine, 1);
    if (st == DT_OK) tr->zero_probe = mine, tr->zero_probed = 1;
    return st;
}

/* Reduce-scatter, update this rank's shard, all-gather the weights. */
dt_status dt__tr_zero_update(dt_trainer *tr, dt__step_ctx *c)
{
    float l = (float)c->loss_sum;
    if (tr->cfg.comm) DT_CHECK(dt_comm_allreduce(tr->cfg.comm, &l, 1, DT_ALLREDUCE_RING, NULL));
    c->loss_sum = l;
    /* fp16: a non-finite loss (every rank's sum) is an overflow, not a divergence */
    const int loss_overflow = dt__loss_overflow(tr, c->loss_sum);
    if (!loss_overflow) DT_CHECK(dt__loss_check(tr, c->loss_sum));
    c->t_opt = dt_time_ns();
    const dt_collective_opts opts = {
        .chunk_bytes = tr->cfg.allreduce_chunk_bytes, .hook = tr->trace.writer ? dt__comm_hook : NULL, .hook_ctx = tr};
    const dt__zero_step_args za = {.scaler = tr->cfg.use_loss_scaling ? &tr->scaler : NULL,
                                   .loss_scale = c->S,
                                   .lr = &tr->lr,
                                   .position = tr->iter,
                                   .clip_grad = tr->cfg.clip_grad,
                                   .coll = &opts,
                                   .scalar_comm = tr->cfg.comm ? tr->cfg.comm : tr->zself,
                                   .force_overflow = loss_overflow};
    if (tr->zgpt) {
        DT_CHECK(dt__zgpt_update(tr->zgpt, &za, &c->ur));
        if (loss_overflow) DT_CHECK(dt__loss_overflow_locate(tr)); /* skipped: where it overflowed */
        if (tr->iter + 1 == tr->cfg.train_iters) /* after the last step */
            DT_CHECK(dt__zero_probe(tr, dt__zgpt_zero(tr->zgpt), tr->cfg.comm));
        return DT_OK;
    }
    DT_CHECK(dt__zero_step(tr->zero, tr->kind->params(tr), tr->kind->grads(tr), &za, &c->ur));
    if (loss_overflow) DT_CHECK(dt__loss_overflow_locate(tr)); /* skipped: where it overflowed */
    if (tr->iter + 1 == tr->cfg.train_iters)
        DT_CHECK(dt__zero_probe(tr, tr->zero, tr->cfg.comm)); /* after the last step */
    return DT_OK;
}

/* ---- the ZeRO strategy's table --------------------------------------------- */

static void dt__zero_state(const dt_trainer *tr, dt__strategy_state *s)
{
    *s = (dt__strategy_state){.zero = tr->zero ? tr->zero : tr->zgpt ? dt__zgpt_zero(tr->zgpt) : NULL,
                              .layout = tr->kind->layout(tr)};
}

/* The summary's zero object: ZeRO-2/3's units and traffic (null at stage 1). */
static json_t *dt__zero_summary(const dt_trainer *tr)
{
    if (!tr->zgpt) return json_null();
    dt__zgpt_traffic t;
    dt__zgpt_traffic_of(tr->zgpt, &t);
    size_t lo, len;
    dt__zero_shard(dt__zgpt_zero(tr->zgpt), &lo, &len);
    return json_pack("{s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "stage", tr->cfg.zero_stage, "units",
                     dt__zero_units(dt__zgpt_zero(tr->zgpt)), "numel", (json_int_t)dt__zgpt_layout(tr->zgpt)->numel,
                     "shard_numel", (json_int_t)len, "gathers", (json_int_t)t.gathers, "gather_floats",
                     (json_int_t)t.gather_floats, "reduce_scatters", (json_int_t)t.scatters, "reduce_scatter_floats",
                     (json_int_t)t.scatter_floats, "refreshes", (json_int_t)t.refreshes, "refresh_floats",
                     (json_int_t)t.refresh_floats);
}

static int dt__zero_ck_role(const dt_trainer *tr)
{
    (void)tr;
    return DT__CK_ZERO;
}

static const char *dt__zero_ck_kind(const dt_trainer *tr)
{
    return tr->zero ? "zero-1" : tr->cfg.zero_stage == 2 ? "zero-2" : "zero-3";
}

static const char *dt__zero_ck_shards(const dt_trainer *tr)
{
    return tr->zero ? "each rank: its segment's weights (masters) and optimizer"
                    : "each rank: its segment of every unit's weights (masters) and optimizer";
}

/* ZeRO-1: the rank's segment (FP32, or the masters), its optimizer;
 * ZeRO-2/3: the units, then every unit's segment of masters (the whole
 * weights of stage 2 are rebuilt). */
static dt_status dt__zero_ck_save(dt_trainer *tr, dt_checkpoint_shard *s, int64_t version)
{
    (void)version;
    if (tr->zgpt) {
        DT_CHECK(dt__ck_put_units(s, dt__zgpt_zero(tr->zgpt)));
        return dt__ck_put_zero(s, tr->be, dt__zgpt_zero(tr->zgpt), NULL);
    }
    return dt__ck_put_zero(s, tr->be, tr->zero, tr->kind->params(tr));
}

static dt_status dt__zero_ck_load(dt_trainer *tr, dt_checkpoint_shard *s, int64_t it)
{
    (void)it;
    if (tr->zgpt) {
        DT_CHECK(dt__ck_get_units(s, dt__zgpt_zero(tr->zgpt), tr->cfg.zero_stage));
        return dt__ck_get_zero(s, tr->be, dt__zgpt_zero(tr->zgpt), NULL);
    }
    return dt__ck_get_zero(s, tr->be, tr->zero, tr->kind->params(tr));
}

/* Every rank has its segment: the whole weights again (collective). */
static dt_status dt__zero_restored_all(dt_trainer *tr)
{
    if (tr->zero) DT_CHECK(dt__zero_restored(tr->zero, tr->kind->params(tr)));
    if (tr->zgpt) DT_CHECK(dt__zgpt_restored(tr->zgpt));
    return DT_OK;
}

static void dt__zero_strategy_free(dt_trainer *tr)
{
    dt__zero_free(tr->zero);
    tr->zero = NULL;
    dt__zgpt_free(tr->zgpt);
    tr->zgpt = NULL;
    dt_comm_free(tr->zself);
    tr->zself = NULL;
}

const dt__strategy dt__strategy_zero = {
    .name = "zero",
    .create = dt__tr_zero_create,
    .update = dt__tr_zero_update,
    .state = dt__zero_state,
    .gpt_state_bytes = 1,
    .summary_key = "zero",
    .summary = dt__zero_summary,
    .ck_role = dt__zero_ck_role,
    .ck_kind = dt__zero_ck_kind,
    .ck_shards = dt__zero_ck_shards,
    .ck_save = dt__zero_ck_save,
    .ck_load = dt__zero_ck_load,
    .restored = dt__zero_restored_all,
    .nonfinite = DT__NF_AFTER,
    .free = dt__zero_strategy_free,
};
