/* step_dp.c: the replica strategy: one process, or data parallelism by
 * allreduce. Each rank keeps the whole model and its optimizer; after the
 * micro-batches the gradients are summed over the data-parallel ranks, in
 * buckets that a comm thread allreduces while the last backward still
 * runs (the GPT), or in one allreduce of the flat buffer; then every rank
 * applies the same update (lib/optim/update.c).
 *
 * Invariants: the collectives give bit-identical sums on every rank, so
 * the replicas stay equal; buckets are contiguous ranges of the flat
 * gradient buffer in backward order, each launched once per step, and the
 * step waits for all of them before the update; the comm thread touches
 * only the gradients and tr->dp, under tr->dp.mu. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_time.h"
#include "gpt_layers.h"
#include "trainer_internal.h"

void dt__tr_dp_launch_bucket(dt_trainer *tr, int b)
{
    if (tr->trace.writer && tr->trace.status == DT_OK) { /* the hand-over, on the comm lane */
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_INSTANT, "bucket launch", "comm", tr->rank, DT_LANE_COMM,
                            dt_time_ns() - tr->t_start_ns, 0);
        e.iter = tr->iter;
        e.bytes = (int64_t)(tr->dp.bucket_len[b] * sizeof(float));
        if (dt_trace_event_add_arg(&e, "bucket", b) == DT_OK) dt__trace_write(tr, &e);
    }
    pthread_mutex_lock(&tr->dp.mu);
    tr->dp.queue[tr->dp.q_tail++] = b;
    pthread_cond_broadcast(&tr->dp.cv);
    pthread_mutex_unlock(&tr->dp.mu);
}

/* The communicator for gradients: NCCL on the GPU, the host one otherwise. */
static dt_comm *dt__tr_grad_comm(const dt_trainer *tr) { return tr->gcomm ? tr->gcomm : tr->cfg.comm; }

static void *dt__comm_main(void *arg)
{
    dt_trainer *tr = arg;
    const dt_collective_opts opts = {
        .chunk_bytes = tr->cfg.allreduce_chunk_bytes, .hook = tr->trace.writer ? dt__comm_hook : NULL, .hook_ctx = tr};
    float *g = tr->kind->grads(tr);
    pthread_mutex_lock(&tr->dp.mu);
    for (;;) {
        while (tr->dp.q_head == tr->dp.q_tail && !tr->dp.stop) pthread_cond_wait(&tr->dp.cv, &tr->dp.mu);
        if (tr->dp.stop) break;
        int b = tr->dp.queue[tr->dp.q_head++];
        pthread_mutex_unlock(&tr->dp.mu);
        dt_status st = dt_comm_allreduce(dt__tr_grad_comm(tr), g + tr->dp.bucket_off[b], tr->dp.bucket_len[b],
                                         tr->cfg.allreduce, &opts);
        pthread_mutex_lock(&tr->dp.mu);
        if (st != DT_OK && tr->dp.comm_status == DT_OK) {
            tr->dp.comm_status = st;
            snprintf(tr->dp.comm_err, sizeof tr->dp.comm_err, "%s", dt_last_error());
        }
        tr->dp.n_done++;
        pthread_cond_broadcast(&tr->dp.cv);
    }
    pthread_mutex_unlock(&tr->dp.mu);
    return NULL;
}

/* Buckets for the GPT under data parallelism: layers in backward order
 * (head, blocks L-1..0, embedding), each layer's tensors one contiguous
 * range of the flat buffer, gathered until a bucket holds bucket_bytes. */
static dt_status dt__buckets_init(dt_trainer *tr)
{
    const dt_paramset *ps = tr->kind->layout(tr);
    const int L = tr->cfg.model.num_layers, n_layers = L + 2;
    tr->dp.bucket_off = calloc((size_t)n_layers, sizeof *tr->dp.bucket_off);
    tr->dp.bucket_len = calloc((size_t)n_layers, sizeof *tr->dp.bucket_len);
    tr->dp.bucket_low = calloc((size_t)n_layers, sizeof *tr->dp.bucket_low);
    tr->dp.queue = calloc((size_t)n_layers, sizeof *tr->dp.queue);
    if (!tr->dp.bucket_off || !tr->dp.bucket_len || !tr->dp.bucket_low || !tr->dp.queue)
        return DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory for gradient buckets");
    /* layers in backward order cut at bucket_bytes (ZeRO-2's units are the same buckets) */
    tr->dp.n_buckets =
        dt__gpt_buckets(&tr->cfg.model, ps, tr->cfg.bucket_bytes, tr->dp.bucket_off, tr->dp.bucket_len, tr->dp.bucket_low);
    pthread_mutex_init(&tr->dp.mu, NULL);
    pthread_cond_init(&tr->dp.cv, NULL);
    if (pthread_create(&tr->dp.comm_thread, NULL, dt__comm_main, tr) != 0)
        return DT_FAIL(DT_ERR_BACKEND, "trainer: cannot start the communication thread");
    tr->dp.comm_thread_on = 1;
    return DT_OK;
}

void dt__tr_dp_free(dt_trainer *tr)
{
    if (tr->dp.comm_thread_on) {
        pthread_mutex_lock(&tr->dp.mu);
        tr->dp.stop = 1;
        pthread_cond_broadcast(&tr->dp.cv);
        pthread_mutex_unlock(&tr->dp.mu);
        pthread_join(tr->dp.comm_thread, NULL);
        tr->dp.comm_thread_on = 0;
        pthread_mutex_destroy(&tr->dp.mu);
        pthread_cond_destroy(&tr->dp.cv);
    }
    free(tr->dp.bucket_off);
    free(tr->dp.bucket_len);
    free(tr->dp.bucket_low);
    free(tr->dp.queue);
}

/* Data parallelism: sum the gradients and the step's loss over the ranks.
 * Every rank weighted its micro-batches by their share of the global
 * batch's targets, so the sum is the global batch's gradient, identical on
 * every rank (the collectives give bit-identical results everywhere). */
static dt_status dt__dp_reduce(dt_trainer *tr, double *loss_sum)
{
    if (tr->dp.comm_thread_on) {
        /* launch what the backward did not (all of it without overlap), wait for all */
        pthread_mutex_lock(&tr->dp.mu);
        for (int b = 0; b < tr->dp.n_buckets; b++) {
            int launched = 0;
            for (int i = 0; i < tr->dp.q_tail; i++) launched |= tr->dp.queue[i] == b;
            if (!launched) tr->dp.queue[tr->dp.q_tail++] = b;
        }
        pthread_cond_broadcast(&tr->dp.cv);
        while (tr->dp.n_done < tr->dp.n_buckets) pthread_cond_wait(&tr->dp.cv, &tr->dp.mu);
        dt_status st = tr->dp.comm_status;
        tr->dp.q_head = tr->dp.q_tail = tr->dp.n_done = 0;
        tr->dp.comm_status = DT_OK;
        pthread_mutex_unlock(&tr->dp.mu);
        if (st != DT_OK) return DT_FAIL(st, "%s", tr->dp.comm_err);
    } else {
        const dt_paramset *layout = tr->kind->layout(tr);
        dt_collective_opts opts = {.chunk_bytes = tr->cfg.allreduce_chunk_bytes,
                                   .hook = tr->trace.writer ? dt__comm_hook : NULL,
                                   .hook_ctx = tr};
        DT_CHECK(dt_comm_allreduce(dt__tr_grad_comm(tr), tr->kind->grads(tr), layout->numel, tr->cfg.allreduce, &opts));
    }
    float l = (float)*loss_sum;
    DT_CHECK(dt_comm_allreduce(tr->cfg.comm, &l, 1, DT_ALLREDUCE_RING, NULL));
    *loss_sum = l;
    return DT_OK;
}

/* ---- non-finite loss or gradient norm (the failure path only) ----------- */

/* The replica strategy's optimizer, over the whole model. */
dt_status dt__tr_dp_create(dt_trainer *tr)
{
    DT_CHECK(dt_optim_init(&tr->opt, &tr->cfg.optim, tr->be, tr->kind->layout(tr)));
    tr->opt_ready = 1;
    return DT_OK;
}

/* After the trace is open (the comm thread's hook depends on it): device
 * gradients travel through NCCL (the host communicator keeps the losses
 * and counts); the GPT's gradients in buckets overlapping the backward. */
dt_status dt__tr_dp_start(dt_trainer *tr)
{
    if (tr->dp_size > 1 && !tr->gcomm && tr->be->device == DT_DEVICE_CUDA)
        DT_CHECK(dt_comm_nccl_create(tr->cfg.comm, tr->be, &tr->gcomm));
    if (tr->dp_size > 1 && tr->kind->gpt_layers) {
        DT_CHECK(dt__buckets_init(tr));
        dt__tr_set_hook(tr, 1);
    }
    return DT_OK;
}

/* Sum over the ranks, then the update on every replica (or none: a
 * --skip-nonfinite step). */
dt_status dt__tr_dp_update(dt_trainer *tr, dt__step_ctx *c)
{
    const dt_paramset *layout = tr->kind->layout(tr);
    if (tr->dp_size > 1) DT_CHECK(dt__dp_reduce(tr, &c->loss_sum));
    /* fp16: a non-finite loss (every rank's sum) is an overflow, not a divergence */
    const int loss_overflow = dt__loss_overflow(tr, c->loss_sum);
    if (!loss_overflow) DT_CHECK(dt__loss_check(tr, c->loss_sum));
    c->t_opt = dt_time_ns();
    float *amax = NULL; /* per tensor, for the grad_amax trace events */
    dt__update_args ua = {.be = tr->be,
                          .layout = layout,
                          .params = tr->kind->params(tr),
                          .grads = tr->kind->grads(tr),
                          .opt = &tr->opt,
                          .scaler = tr->cfg.use_loss_scaling ? &tr->scaler : NULL,
                          .loss_scale = c->S,
                          .lr = &tr->lr,
                          .position = tr->iter,
                          .clip_grad = tr->cfg.clip_grad,
                          .given_norm = -1.0,
                          .allow_nonfinite = tr->cfg.precision == DT_F32,
                          .force_overflow = loss_overflow};
    if (tr->trace.writer && tr->cfg.use_loss_scaling && tr->kind->gpt_layers) { /* grad_amax: traced fp16 runs only */
        amax = malloc((size_t)layout->count * sizeof *amax);
        if (!amax) return DT_FAIL(DT_ERR_NOMEM, "trace: out of memory for %d gradient amax", layout->count);
        ua.amax = amax;
    }
    dt_status ust = DT_OK;
    if (tr->nf.skip) { /* --skip-nonfinite: a non-finite loss, no update */
        memset(&c->ur, 0, sizeof c->ur);
        c->ur.first_bad = -1;
        c->ur.lr = dt_lr_at(&tr->lr, tr->iter);
    } else {
        ust = dt__update_apply(&ua, &c->ur);
        if (ust == DT_OK && c->ur.nonfinite) ust = dt__nonfinite(tr, "gradient norm", c->ur.norm);
        if (ust == DT_OK && loss_overflow) ust = dt__loss_overflow_locate(tr); /* skipped: where it overflowed */
    }
    if (ust == DT_OK && amax) ust = dt__trace_grad_amax(tr, layout, amax, c->S, c->t_opt - tr->t_start_ns);
    free(amax);
    return ust;
}

/* ---- the replica strategy's table ------------------------------------------- */

static void dt__dp_state(const dt_trainer *tr, dt__strategy_state *s)
{
    *s = (dt__strategy_state){.optim = tr->opt_ready ? &tr->opt : NULL, .layout = tr->kind->layout(tr)};
}

static int dt__dp_ck_role(const dt_trainer *tr)
{
    (void)tr;
    return DT__CK_REPLICA;
}

static const char *dt__dp_ck_kind(const dt_trainer *tr)
{
    return tr->cfg.comm && tr->cfg.comm->size > 1 ? "data parallel" : "single process";
}

static const char *dt__dp_ck_shards(const dt_trainer *tr)
{
    (void)tr;
    return "each rank: the whole model and optimizer (replicas are equal)";
}

/* A replica's shard: every tensor (the FP32 masters under mixed
 * precision), mlp-bn's BatchNorm statistics, the optimizer. Replicas are
 * equal and each writes its own, so every shard is self-contained. */
static dt_status dt__dp_ck_save(dt_trainer *tr, dt_checkpoint_shard *s, int64_t version)
{
    (void)version;
    DT_CHECK(dt__ck_put_tensors(s, tr->be, "param/", tr->kind->layout(tr), tr->kind->params(tr)));
    if (tr->kind->state_layout)
        DT_CHECK(dt__ck_put_tensors(s, tr->be, "state/", tr->kind->state_layout(tr), tr->kind->state(tr)));
    return dt__ck_put_optim(s, &tr->opt);
}

static dt_status dt__dp_ck_load(dt_trainer *tr, dt_checkpoint_shard *s, int64_t it)
{
    (void)it;
    DT_CHECK(dt__ck_get_tensors(s, tr->be, "param/", tr->kind->layout(tr), tr->kind->params(tr)));
    if (tr->kind->state_layout)
        DT_CHECK(dt__ck_get_tensors(s, tr->be, "state/", tr->kind->state_layout(tr), tr->kind->state(tr)));
    return dt__ck_get_optim(s, &tr->opt, 1);
}

const dt__strategy dt__strategy_replica = {
    .name = "replica",
    .create = dt__tr_dp_create,
    .start = dt__tr_dp_start,
    .update = dt__tr_dp_update,
    .state = dt__dp_state,
    .gpt_state_bytes = 1,
    .ck_role = dt__dp_ck_role,
    .ck_kind = dt__dp_ck_kind,
    .ck_shards = dt__dp_ck_shards,
    .ck_save = dt__dp_ck_save,
    .ck_load = dt__dp_ck_load,
    .nonfinite = DT__NF_AFTER,
    .free = dt__tr_dp_free,
};
