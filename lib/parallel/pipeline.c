/* pipeline.c: the pipeline-parallel runtime (see pipeline.h): one stage of
 * one pipeline executing its list of the schedule.
 *
 * Per instruction:
 *   RECV_ACT   irecv into the micro-batch's slot input, wait
 *   FORWARD    the stage forward in slot mb % slots, with the version's
 *              weights; the last stage reads the targets, weighs the loss
 *   SEND_ACT   isend the slot's output (waited for before the slot's reuse)
 *   RECV_GRAD  irecv into the stage's dout, wait
 *   BACKWARD   the stage backward (gradients accumulate)
 *   SEND_GRAD  isend the input gradient (waited for before the next backward)
 *   OPTIM_STEP with tied embeddings, sum wte's gradient (first stage) and
 *              its copy's (the last stage's head) over those two stages;
 *              allreduce the gradients over the stage's data-parallel group,
 *              then lib/optim/update.c with the squared norm summed over the
 *              pipeline's stages (gpipe/1f1b; pipedream clips each stage by
 *              its own norm, since its stages update at different times);
 *              with ZeRO-1 (setup.zero) lib/parallel/zero.c instead:
 *              reduce-scatter, the segment's update, all-gather
 *   STASH/DROP copy the current weights into a stash buffer / free it
 * Under --fp16/--bf16 activations and their gradients travel in the 16-bit
 * format (a cast before the send and after the receive; exact, as the
 * stages hold only 16-bit values), half the FP32 bytes.
 * Tags on the pipeline communicator: 1 activations, 2 gradients; between
 * two stages the schedule posts sends and receives in the same order on
 * both sides, so one tag per direction matches them.
 *
 * Invariants: a slot's output is not overwritten while its send is in
 * flight; dres is not overwritten while the input gradient's send is; the
 * step's loss is added over the micro-batches in order on the last stage. */
#include "pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt_checkpoint.h"
#include "dt_data.h"
#include "dt_internal.h"
#include "dt_time.h"
#include "stage.h"
#include "tp.h"
#include "update.h"
#include "zero.h"

enum { DT__PIPE_TAG_ACT = 1, DT__PIPE_TAG_GRAD = 2, DT__PIPE_TAG_LOSS = 4, DT__PIPE_MAX_STASH = 64 };

typedef struct dt__stash {
    int version; /* -1: free */
    dt_buffer buf;
} dt__stash;

struct dt__pipe {
    dt__pipe_setup cfg;
    int stage, dpi, d, p, slots, t, tpi;
    const dt_sched_instr *cur;    /* the BACKWARD being executed, for the stage's recompute hook */
    dt_comm *pipe, *data, *tpc;   /* host sub-communicators: pipeline, data-parallel group, tensor-parallel group */
    dt_comm *dpipe, *ddata, *dtp; /* device ones (NCCL) or NULL */
    dt_comm *emb, *demb;          /* tied embeddings, p > 1: the first and last stage (host, device or NULL) */
    int tied;                     /* tied embeddings on p > 1 stages: the last holds a copy of wte */
    dt__tp tp;                    /* the stage's tensor parallelism (t > 1) */
    dt_schedule *sched;
    dt__stage *st;
    dt_optim opt;
    int opt_ready;
    dt__zero *zero; /* ZeRO-1 over the data group (setup.zero, d > 1): owns the optimizer instead of opt */
    int pc;         /* next instruction */
    int version;    /* current weight version of this stage */
    dt__stash stash[DT__PIPE_MAX_STASH];
    int n_stash, max_versions, max_versions_in_flight;
    int *slot_mb, *slot_version; /* (slots) busy slots' micro-batch (-1 free) and version */
    dt_comm_request **act_send;  /* (slots) pending activation send per slot */
    dt_comm_request *grad_send;  /* pending input-gradient send */
    /* mixed precision: activations and their gradients travel between stages
     * in the 16-bit format (exact: the stages store only 16-bit values) */
    size_t wire_elem;               /* bytes per element on the wire: 4, or 2 under --fp16/--bf16 */
    dt_buffer *act_wire;            /* (slots + 1) 16-bit copy of each slot's output while its send is in flight */
    dt_buffer grad_wire, recv_wire; /* the input gradient's 16-bit copy; a receive's 16-bit landing place */
    int *used;                      /* (2 * total mbs) version used by FORWARD / BACKWARD of mb, -1 unknown */
    int total_mb;
    /* the current step (last stage): loss sum and targets of the global batch */
    double loss_sum;
    long long n_total;
    int64_t step_of_total; /* the step n_total belongs to */
    int updates;
    int64_t opt_from; /* the running instruction's start, or (OPTIM_STEP) the end of its last collective so far */
    double last_norm;
    float last_lr;
    dt__update_result last;              /* the step's last update (its loss-scaling decision) */
    float last_scale;                    /* the loss scale that update's gradients carried */
    int32_t *tokens, *targets, *example; /* (B*T) host */
    /* pipedream (p > 1): each step's loss from the last stage to stage 0,
     * in flight for a step (slot t % 2) */
    float loss_out[2], loss_in[2];
    dt_comm_request *loss_send[2], *loss_recv[2];
};

int dt__pipe_stage(const dt__pipe *pp) { return pp->stage; }
int dt__pipe_dp_index(const dt__pipe *pp) { return pp->dpi; }
int dt__pipe_tp_index(const dt__pipe *pp) { return pp->tpi; }
long long dt__pipe_tp_allreduces(const dt__pipe *pp) { return pp->tp.allreduces_fwd + pp->tp.allreduces_bwd; }
size_t dt__pipe_peak_activation_bytes(const dt__pipe *pp) { return dt__stage_peak_activation_bytes(pp->st); }
int dt__pipe_max_versions(const dt__pipe *pp) { return pp->max_versions; }
int dt__pipe_max_versions_in_flight(const dt__pipe *pp) { return pp->max_versions_in_flight; }

static int dt__pipe_async(const dt__pipe *pp)
{
    return pp->cfg.kind == DT_SCHED_PIPEDREAM || pp->cfg.kind == DT_SCHED_PIPEDREAM_VSYNC;
}

dt_status dt__pipe_check(const dt_gpt_config *model, int p, dt_sched_kind kind, int loss_scaling)
{
    if (p < 2 || (kind != DT_SCHED_PIPEDREAM && kind != DT_SCHED_PIPEDREAM_VSYNC)) return DT_OK;
    if (loss_scaling)
        return DT_FAIL(DT_ERR_INVALID,
                       "--pipeline-schedule %s with --fp16: each stage updates on its own, so the stages cannot "
                       "agree on a loss scale without a barrier per update (use --bf16)",
                       dt_sched_kind_name(kind));
    if (model->tie_embeddings)
        return DT_FAIL(DT_ERR_INVALID,
                       "--pipeline-schedule %s with tied embeddings: the first and last stages "
                       "would update their copies of wte at different times (add "
                       "--untie-embeddings-and-output-weights)",
                       dt_sched_kind_name(kind));
    return DT_OK;
}

static dt_comm *dt__pipe_dev_pipe(const dt__pipe *pp) { return pp->dpipe ? pp->dpipe : pp->pipe; }
static dt_comm *dt__pipe_dev_data(const dt__pipe *pp) { return pp->ddata ? pp->ddata : pp->data; }

static dt_status dt__pipe_wait_send(dt__pipe *pp, dt_comm_request **q);

/* The stage's recompute hook: the span belongs to the BACKWARD being run. */
static void dt__pipe_recomputed(void *ctx, int layer, int64_t t0_ns, int64_t t1_ns)
{
    dt__pipe *pp = ctx;
    if (pp->cur) pp->cfg.recompute_event(pp->cfg.ctx, pp->stage, pp->cur, layer, t0_ns, t1_ns);
}

dt_status dt__pipe_create(const dt__pipe_setup *s, dt__pipe **out)
{
    *out = NULL;
    const int N = s->world->size, t = s->t > 0 ? s->t : 1;
    if (s->p < 1 || N % (s->p * t))
        return DT_FAIL(DT_ERR_INVALID,
                       "--pipeline-model-parallel-size %d x --tensor-model-parallel-size %d: %d ranks are not a "
                       "multiple of it",
                       s->p, t, N);
    dt__pipe *pp = calloc(1, sizeof *pp);
    if (!pp) return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory");
    dt_status st = DT_OK;
    pp->cfg = *s;
    /* the grid, tensor fastest: rank = tpi + t * (dpi + d * stage) */
    pp->p = s->p;
    pp->t = t;
    pp->d = N / (s->p * t);
    pp->tpi = s->world->rank % t;
    pp->dpi = (s->world->rank / t) % pp->d;
    pp->stage = s->world->rank / (t * pp->d);
    pp->step_of_total = -1;
    for (int i = 0; i < DT__PIPE_MAX_STASH; i++) pp->stash[i].version = -1;
    if (s->steps > INT32_MAX / (s->m > 0 ? s->m : 1)) {
        st =
            DT_FAIL(DT_ERR_INVALID, "pipeline: %lld steps of %d micro-batches are too many", (long long)s->steps, s->m);
        goto fail;
    }
    DT_CHECK_GOTO(dt_schedule_make(s->kind, s->p, s->m, (int)s->steps, &pp->sched), st, fail);
    {
        const int cpipe = pp->tpi + t * pp->dpi, cdata = pp->tpi + t * pp->stage, ctp = pp->dpi + pp->d * pp->stage;
        DT_CHECK_GOTO(s->world->ops->split(s->world, cpipe, pp->stage, &pp->pipe), st, fail);
        DT_CHECK_GOTO(s->world->ops->split(s->world, cdata, pp->dpi, &pp->data), st, fail);
        DT_CHECK_GOTO(s->world->ops->split(s->world, ctp, pp->tpi, &pp->tpc), st, fail);
        if (s->device_world) {
            DT_CHECK_GOTO(s->device_world->ops->split(s->device_world, cpipe, pp->stage, &pp->dpipe), st, fail);
            DT_CHECK_GOTO(s->device_world->ops->split(s->device_world, cdata, pp->dpi, &pp->ddata), st, fail);
            DT_CHECK_GOTO(s->device_world->ops->split(s->device_world, ctp, pp->tpi, &pp->dtp), st, fail);
        }
        pp->tied = s->model->tie_embeddings && pp->p > 1;
        if (pp->tied) {
            /* the first and last stage of each (tensor, data) position; the
             * middle stages land in groups of their own, never used */
            const int end = pp->stage == 0 || pp->stage == pp->p - 1;
            const int cemb = end ? cpipe : t * pp->d * (1 + pp->stage) + cpipe;
            DT_CHECK_GOTO(s->world->ops->split(s->world, cemb, pp->stage, &pp->emb), st, fail);
            if (s->device_world)
                DT_CHECK_GOTO(s->device_world->ops->split(s->device_world, cemb, pp->stage, &pp->demb), st, fail);
            if (!end) dt_comm_free(pp->emb), dt_comm_free(pp->demb), pp->emb = pp->demb = NULL;
        }
    }
    pp->tp = (dt__tp){.comm = pp->dtp ? pp->dtp : pp->tpc,
                      .algo = s->allreduce == DT_ALLREDUCE_MPI && pp->dtp ? DT_ALLREDUCE_NCCL : s->allreduce,
                      .chunk_bytes = s->chunk_bytes,
                      .event = s->tp_event,
                      .event_ctx = s->ctx};
    int l0, l1;
    DT_CHECK_GOTO(dt__stage_split(s->model->num_layers, s->p, s->split, &l0, &l1, pp->stage), st, fail);
    pp->slots = pp->sched->max_in_flight[pp->stage];
    if (pp->slots < 1) pp->slots = 1;
    /* one more slot for evaluation, which may come while micro-batches are in flight (pipedream) */
    DT_CHECK_GOTO(dt__stage_create(s->model, s->be, l0, l1, pp->stage == 0, pp->stage == s->p - 1, pp->slots + 1, s->B,
                                   s->T, t > 1 ? &pp->tp : NULL, &pp->st),
                  st, fail);
    DT_CHECK_GOTO(dt__stage_init_weights(pp->st, s->seed), st, fail);
    DT_CHECK_GOTO(dt__stage_set_precision(pp->st, s->precision), st, fail);
    if (s->recompute_event) dt__stage_set_recompute_hook(pp->st, dt__pipe_recomputed, pp);
    DT_CHECK_GOTO(dt__stage_set_recompute(pp->st, s->recompute, s->recompute_num_layers), st, fail);
    DT_CHECK_GOTO(dt__pipe_check(s->model, s->p, s->kind, s->scaler != NULL), st, fail);
    DT_CHECK_GOTO(dt__stage_zero_grad(pp->st), st, fail);
    if (s->zero && pp->d > 1) {
        DT_CHECK_GOTO(dt__zero_create(dt__pipe_dev_data(pp), s->be, dt__stage_layout(pp->st), &s->optim, &pp->zero), st,
                      fail);
        /* the masters sharded; the stage's params hold their 16-bit values
         * (which it rounds again, exactly, before computing) */
        if (s->precision != DT_F32)
            DT_CHECK_GOTO(dt__zero_keep_masters(pp->zero, dt__stage_params(pp->st), s->precision), st, fail);
    } else {
        DT_CHECK_GOTO(dt_optim_init(&pp->opt, &s->optim, s->be, dt__stage_layout(pp->st)), st, fail);
        pp->opt_ready = 1;
    }
    pp->total_mb = (int)s->steps * s->m;
    pp->slot_mb = malloc((size_t)pp->slots * sizeof *pp->slot_mb);
    pp->slot_version = calloc((size_t)pp->slots, sizeof *pp->slot_version);
    pp->act_send = calloc((size_t)pp->slots, sizeof *pp->act_send);
    pp->used = malloc((size_t)(2 * pp->total_mb + 2) * sizeof *pp->used);
    const size_t n = (size_t)s->B * s->T;
    pp->tokens = malloc(n * sizeof *pp->tokens);
    pp->targets = malloc(n * sizeof *pp->targets);
    pp->example = malloc(n * sizeof *pp->example);
    if (!pp->slot_mb || !pp->slot_version || !pp->act_send || !pp->used || !pp->tokens || !pp->targets ||
        !pp->example) {
        st = DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory");
        goto fail;
    }
    pp->wire_elem = s->precision == DT_F32 ? sizeof(float) : 2;
    if (s->precision != DT_F32) {
        const size_t wire = (size_t)s->B * s->T * s->model->hidden_size * pp->wire_elem;
        pp->act_wire = calloc((size_t)pp->slots + 1, sizeof *pp->act_wire); /* and evaluation's slot */
        if (!pp->act_wire) {
            st = DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory");
            goto fail;
        }
        for (int k = 0; k <= pp->slots; k++) DT_CHECK_GOTO(dt_buffer_alloc(&pp->act_wire[k], s->be, wire), st, fail);
        DT_CHECK_GOTO(dt_buffer_alloc(&pp->grad_wire, s->be, wire), st, fail);
        DT_CHECK_GOTO(dt_buffer_alloc(&pp->recv_wire, s->be, wire), st, fail);
    }
    for (int k = 0; k < pp->slots; k++) pp->slot_mb[k] = -1;
    for (int i = 0; i < 2 * pp->total_mb + 2; i++) pp->used[i] = -1;
    pp->max_versions = 1;
    *out = pp;
    return DT_OK;
fail:
    dt__pipe_free(pp);
    return st;
}

void dt__pipe_free(dt__pipe *pp)
{
    if (!pp) return;
    /* sends still in flight complete as their receivers take them */
    for (int k = 0; pp->act_send && k < pp->slots; k++) (void)dt__pipe_wait_send(pp, &pp->act_send[k]);
    (void)dt__pipe_wait_send(pp, &pp->grad_send);
    for (int k = 0; k < 2; k++) { /* a run that failed may leave them */
        if (pp->loss_send[k]) (void)pp->pipe->ops->wait(pp->pipe, pp->loss_send[k]);
        if (pp->loss_recv[k]) (void)pp->pipe->ops->wait(pp->pipe, pp->loss_recv[k]);
    }
    for (int i = 0; i < DT__PIPE_MAX_STASH; i++) dt_buffer_free(&pp->stash[i].buf);
    for (int k = 0; pp->act_wire && k <= pp->slots; k++) dt_buffer_free(&pp->act_wire[k]);
    free(pp->act_wire);
    dt_buffer_free(&pp->grad_wire);
    dt_buffer_free(&pp->recv_wire);
    if (pp->opt_ready) dt_optim_free(&pp->opt);
    dt__zero_free(pp->zero); /* before the stage: it points at the stage's layout */
    dt__stage_free(pp->st);
    dt_schedule_free(pp->sched);
    dt_comm_free(pp->dpipe);
    dt_comm_free(pp->ddata);
    dt_comm_free(pp->dtp);
    dt_comm_free(pp->demb);
    dt_comm_free(pp->emb);
    dt_comm_free(pp->pipe);
    dt_comm_free(pp->data);
    dt_comm_free(pp->tpc);
    free(pp->slot_mb);
    free(pp->slot_version);
    free(pp->act_send);
    free(pp->used);
    free(pp->tokens);
    free(pp->targets);
    free(pp->example);
    free(pp);
}

/* ---- weight versions ------------------------------------------------------ */

/* The weights of version v: the params when current, else its stash. */
static dt_status dt__pipe_weights(dt__pipe *pp, int v, const float **w)
{
    if (v == pp->version) {
        *w = NULL;
        return DT_OK;
    }
    for (int i = 0; i < DT__PIPE_MAX_STASH; i++)
        if (pp->stash[i].version == v) {
            *w = pp->stash[i].buf.data;
            return DT_OK;
        }
    return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: weight version %d is neither current (%d) nor stashed",
                   pp->stage, v, pp->version);
}

static dt_status dt__pipe_stash(dt__pipe *pp, int v)
{
    if (v != pp->version)
        return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: STASH of version %d while %d is current", pp->stage, v,
                       pp->version);
    const size_t bytes = dt__stage_layout(pp->st)->numel * sizeof(float);
    for (int i = 0; i < DT__PIPE_MAX_STASH; i++) {
        dt__stash *x = &pp->stash[i];
        if (x->version >= 0) continue;
        if (!x->buf.data) DT_CHECK(dt_buffer_alloc(&x->buf, pp->cfg.be, bytes));
        DT_CHECK(pp->cfg.be->copy(pp->cfg.be, x->buf.data, dt__stage_params(pp->st), bytes, DT_COPY_D2D));
        dt__stage_weights_changed(pp->st); /* the buffer may have held another version */
        x->version = v;
        pp->n_stash++;
        if (pp->n_stash + 1 > pp->max_versions) pp->max_versions = pp->n_stash + 1;
        return DT_OK;
    }
    return DT_FAIL(DT_ERR_UNSUPPORTED, "pipeline stage %d: more than %d stashed weight versions", pp->stage,
                   DT__PIPE_MAX_STASH);
}

static dt_status dt__pipe_drop(dt__pipe *pp, int v)
{
    for (int i = 0; i < DT__PIPE_MAX_STASH; i++)
        if (pp->stash[i].version == v) {
            pp->stash[i].version = -1; /* the buffer is kept for the next stash */
            pp->n_stash--;
            return DT_OK;
        }
    return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: DROP of version %d, which is not stashed", pp->stage, v);
}

/* Distinct versions among busy slots (measured: stashing's real depth). */
static void dt__pipe_count_versions(dt__pipe *pp)
{
    int distinct = 0;
    for (int a = 0; a < pp->slots; a++) {
        if (pp->slot_mb[a] < 0) continue;
        int seen = 0;
        for (int b = 0; b < a; b++) seen |= pp->slot_mb[b] >= 0 && pp->slot_version[b] == pp->slot_version[a];
        distinct += !seen;
    }
    if (distinct > pp->max_versions_in_flight) pp->max_versions_in_flight = distinct;
}

/* ---- data ------------------------------------------------------------------ */

/* Row-stream index of micro-batch mb (global over steps, m per step) of this pipeline. */
static uint64_t dt__pipe_index(const dt__pipe *pp, int mb)
{
    const int m = pp->cfg.m;
    return (uint64_t)(mb / m) * (uint64_t)(m * pp->d) + (uint64_t)(pp->dpi * m + mb % m);
}

/* Last stage: targets counted over step t's whole global batch (m x d micro-batches). */
static dt_status dt__pipe_count_targets(dt__pipe *pp, int64_t t)
{
    if (pp->step_of_total == t) return DT_OK;
    const size_t n = (size_t)pp->cfg.B * pp->cfg.T;
    long long total = 0;
    for (int j = 0; j < pp->cfg.m * pp->d; j++) {
        uint64_t index = (uint64_t)t * (uint64_t)(pp->cfg.m * pp->d) + (uint64_t)j;
        DT_CHECK(pp->cfg.batch(pp->cfg.ctx, 0, index, pp->tokens, pp->targets, NULL, NULL));
        for (size_t i = 0; i < n; i++) total += pp->targets[i] >= 0;
    }
    pp->n_total = total;
    pp->step_of_total = t;
    return DT_OK;
}

/* ---- executing instructions ------------------------------------------------ */

static dt_status dt__pipe_wait_send(dt__pipe *pp, dt_comm_request **q)
{
    if (!*q) return DT_OK;
    dt_comm *c = dt__pipe_dev_pipe(pp);
    dt_status st = c->ops->wait(c, *q);
    *q = NULL;
    return st;
}

/* Receive an activation or gradient (B,T,C) into buf (FP32), through the
 * 16-bit landing buffer under mixed precision. */
static dt_status dt__pipe_recv(dt__pipe *pp, float *buf, int peer, int tag)
{
    dt_comm *c = dt__pipe_dev_pipe(pp);
    const size_t n = (size_t)pp->cfg.B * pp->cfg.T * pp->cfg.model->hidden_size;
    void *land = pp->wire_elem == sizeof(float) ? (void *)buf : pp->recv_wire.data;
    dt_comm_request *q = NULL;
    DT_CHECK(c->ops->irecv(c, land, n * pp->wire_elem, peer, tag, &q));
    DT_CHECK(c->ops->wait(c, q));
    if (land != buf) DT_CHECK(pp->cfg.be->cast(pp->cfg.be, buf, DT_F32, land, pp->cfg.precision, n));
    return DT_OK;
}

/* Start sending x (B,T,C, FP32) to peer; under mixed precision its 16-bit
 * copy in wire travels (wire untouched until *q completes). */
static dt_status dt__pipe_send(dt__pipe *pp, const float *x, dt_buffer *wire, int peer, int tag, dt_comm_request **q)
{
    dt_comm *c = dt__pipe_dev_pipe(pp);
    const size_t n = (size_t)pp->cfg.B * pp->cfg.T * pp->cfg.model->hidden_size;
    const void *src = x;
    if (pp->wire_elem != sizeof(float)) {
        DT_CHECK(pp->cfg.be->cast(pp->cfg.be, wire->data, pp->cfg.precision, x, DT_F32, n));
        src = wire->data;
    }
    return c->ops->isend(c, src, n * pp->wire_elem, peer, tag, q);
}

/* A collective of OPTIM_STEP that began at t0 ended now: the update's span
 * starts here; an agreement of the ranks (name set) is traced with the
 * stage's own work before it. */
static void dt__pipe_synced(dt__pipe *pp, const char *name, int64_t t0)
{
    const int64_t now = dt_time_ns();
    if (name && pp->cfg.sync_event) pp->cfg.sync_event(pp->cfg.ctx, name, pp->opt_from, t0, now);
    pp->opt_from = now;
}

/* The squared norm of the whole model's gradients: the shards' summed over the
 * tensor-parallel group, the replicated tensors' counted once, the ZeRO-1
 * segments' summed over the data-parallel group, then the stages' added
 * (pipedream: this stage's alone, as its stages update at different times). */
static dt_status dt__pipe_norm(void *ctx, double *norm)
{
    dt__pipe *pp = ctx;
    double sh = 0.0, rep = 0.0;
    size_t lo = 0, len = dt__stage_layout(pp->st)->numel;
    if (pp->zero) dt__zero_shard(pp->zero, &lo, &len);
    DT_CHECK(dt__stage_grad_sumsq(pp->st, lo, lo + len, &sh, &rep));
    float v = (float)sh;
    if (pp->t > 1) DT_CHECK(dt_comm_allreduce(pp->tpc, &v, 1, DT_ALLREDUCE_RING, NULL));
    v += (float)rep;
    if (pp->zero) DT_CHECK(dt_comm_allreduce(pp->data, &v, 1, DT_ALLREDUCE_RING, NULL));
    if (!dt__pipe_async(pp) && pp->p > 1) {
        const int64_t t0 = dt_time_ns();
        DT_CHECK(dt_comm_allreduce(pp->pipe, &v, 1, DT_ALLREDUCE_RING, NULL));
        dt__pipe_synced(pp, "grad norm allreduce", t0);
    }
    *norm = sqrt((double)v);
    return DT_OK;
}

/* Loss scaling: one decision for the whole model. Every rank updates at the
 * end of the step (gpipe/1f1b), so an overflow on any stage or tensor rank
 * skips the step everywhere and the scaler (the same state machine on
 * every rank) stays equal; the first overflowing tensor in backward order
 * is the highest whole-model index any rank found. */
static dt_status dt__pipe_agree(void *ctx, int *overflow, int *first_bad)
{
    dt__pipe *pp = ctx;
    dt_comm *w = pp->cfg.world;
    float *v = calloc((size_t)w->size + 1, sizeof *v);
    if (!v) return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory");
    v[0] = *overflow ? 1.0f : 0.0f;
    v[1 + w->rank] = (float)(*first_bad + 1); /* exact: one rank writes each slot */
    const int64_t t0 = dt_time_ns();
    dt_status st = dt_comm_allreduce(w, v, (size_t)w->size + 1, DT_ALLREDUCE_RING, NULL);
    if (st == DT_OK) {
        dt__pipe_synced(pp, "overflow allreduce", t0);
        *overflow = v[0] > 0.0f;
        int best = -1;
        for (int i = 0; i < w->size; i++) best = DT_MAX(best, (int)v[1 + i] - 1);
        *first_bad = best;
    }
    free(v);
    return st;
}

/* The loss scale the gradients of this step carry (1 without loss scaling). */
static float dt__pipe_scale(const dt__pipe *pp) { return pp->cfg.scaler ? dt_loss_scaler_scale(pp->cfg.scaler) : 1.0f; }

/* After an update (or a skipped one) with loss scale S: zero the gradients, record it. */
static dt_status dt__pipe_updated(dt__pipe *pp, const dt_sched_instr *in, const dt__update_result *r, float S)
{
    dt__stage_weights_changed(pp->st);
    DT_CHECK(dt__stage_zero_grad(pp->st));
    pp->version = in->version;
    pp->updates += !r->skipped && !r->nonfinite;
    pp->last_norm = r->norm;
    pp->last_lr = r->lr;
    pp->last = *r;
    pp->last_scale = S;
    return DT_OK;
}

/* The optimizer step ending step t (gpipe/1f1b) or after one backward (pipedream). */
static dt_status dt__pipe_optim(dt__pipe *pp, const dt_sched_instr *in, int64_t t)
{
    const dt_paramset *L = dt__stage_layout(pp->st);
    float *grads = dt__stage_grads(pp->st);
    const dt_collective_opts o = {
        .chunk_bytes = pp->cfg.chunk_bytes, .hook = pp->cfg.coll_event, .hook_ctx = pp->cfg.ctx};
    if (pp->emb) { /* tied embeddings: wte's gradient on the first stage plus the head copy's on the last */
        size_t off, n;
        dt__stage_tied_range(pp->st, &off, &n);
        const int64_t t0 = pp->cfg.emb_event ? dt_time_ns() : 0;
        DT_CHECK(dt_comm_allreduce(pp->demb ? pp->demb : pp->emb, grads + off, n, pp->cfg.allreduce, &o));
        if (pp->cfg.emb_event) pp->cfg.emb_event(pp->cfg.ctx, t0, dt_time_ns(), n * sizeof(float));
        dt__pipe_synced(pp, NULL, 0);
    }
    if (pp->d > 1 && !pp->zero) {
        DT_CHECK(dt_comm_allreduce(dt__pipe_dev_data(pp), grads, L->numel, pp->cfg.allreduce, &o));
        dt__pipe_synced(pp, NULL, 0);
    }
    const int async = dt__pipe_async(pp);
    /* pipedream: one update per micro-batch, m per step, for the schedule's position */
    const int64_t position = async ? (int64_t)(in->version - 1) / pp->cfg.m : t;
    const float S = dt__pipe_scale(pp);
    dt__update_result r;
    if (pp->zero) { /* reduce-scatter, the segment's update under the whole model's norm, all-gather */
        const dt__zero_step_args za = {.scaler = pp->cfg.scaler,
                                       .loss_scale = S,
                                       .lr = &pp->cfg.lr,
                                       .position = position,
                                       .clip_grad = pp->cfg.clip_grad,
                                       .coll = &o,
                                       .scalar_comm = pp->data,
                                       .agree = pp->cfg.scaler ? dt__pipe_agree : NULL,
                                       .norm = dt__pipe_norm,
                                       .group_ctx = pp,
                                       .first_tensor = dt__stage_first_tensor(pp->st)};
        DT_CHECK(dt__zero_step(pp->zero, dt__stage_params(pp->st), grads, &za, &r));
        return dt__pipe_updated(pp, in, &r, S);
    }
    dt__update_args ua = {.be = pp->cfg.be,
                          .layout = L,
                          .params = dt__stage_params(pp->st),
                          .grads = grads,
                          .opt = &pp->opt,
                          .scaler = pp->cfg.scaler,
                          .loss_scale = S,
                          .lr = &pp->cfg.lr,
                          .position = position,
                          .clip_grad = pp->cfg.clip_grad,
                          .given_norm = -1.0,
                          .first_tensor = dt__stage_first_tensor(pp->st),
                          .reduce = NULL,
                          .agree = pp->cfg.scaler ? dt__pipe_agree : NULL,
                          .norm = (!async && pp->p > 1) || pp->t > 1 ? dt__pipe_norm : NULL,
                          .group_ctx = pp,
                          .allow_nonfinite = pp->cfg.nonfinite && !async};
    DT_CHECK(dt__update_apply(&ua, &r));
    /* the norm is the whole model's, the same on every rank: all skip the
     * update, and the caller looks for the first bad layer while the
     * gradients are still there */
    if (r.nonfinite) DT_CHECK(pp->cfg.nonfinite(pp->cfg.ctx, t));
    return dt__pipe_updated(pp, in, &r, S);
}

static dt_status dt__pipe_exec(dt__pipe *pp, const dt_sched_instr *in, int64_t t)
{
    const int s = pp->stage, slot = in->mb >= 0 ? in->mb % pp->slots : -1;
    switch (in->op) {
    case DT_SCHED_RECV_ACT: return dt__pipe_recv(pp, dt__stage_input(pp->st, slot), s - 1, DT__PIPE_TAG_ACT);
    case DT_SCHED_FORWARD: {
        if (pp->slot_mb[slot] >= 0)
            return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: micro-batch %d needs slot %d, still held by %d", s,
                           in->mb, slot, pp->slot_mb[slot]);
        DT_CHECK(dt__pipe_wait_send(pp, &pp->act_send[slot]));
        const float *w = NULL;
        DT_CHECK(dt__pipe_weights(pp, in->version, &w));
        const int first = s == 0, last = s == pp->p - 1;
        if (first || last)
            DT_CHECK(pp->cfg.batch(pp->cfg.ctx, 0, dt__pipe_index(pp, in->mb), pp->tokens, pp->targets, NULL, NULL));
        float loss = 0.0f;
        int nc = 0;
        DT_CHECK(
            dt__stage_forward(pp->st, slot, w, first ? pp->tokens : NULL, last ? pp->targets : NULL, NULL, &loss, &nc));
        pp->slot_mb[slot] = in->mb;
        pp->slot_version[slot] = in->version;
        if (in->mb < pp->total_mb) pp->used[2 * in->mb] = in->version;
        dt__pipe_count_versions(pp);
        if (last && dt__pipe_async(pp)) { /* each micro-batch its own update: the mean of their losses */
            pp->loss_sum += loss / (double)(pp->cfg.m * pp->d);
        } else if (last) { /* weighted by its share of the global batch's counted targets */
            DT_CHECK(dt__pipe_count_targets(pp, in->step));
            pp->loss_sum += pp->n_total ? (double)nc / (double)pp->n_total * loss : 0.0;
        }
        return DT_OK;
    }
    case DT_SCHED_SEND_ACT: {
        const float *out = NULL;
        DT_CHECK(dt__stage_output(pp->st, slot, &out));
        return dt__pipe_send(pp, out, pp->act_wire ? &pp->act_wire[slot] : NULL, s + 1, DT__PIPE_TAG_ACT,
                             &pp->act_send[slot]);
    }
    case DT_SCHED_RECV_GRAD: return dt__pipe_recv(pp, dt__stage_dout(pp->st), s + 1, DT__PIPE_TAG_GRAD);
    case DT_SCHED_BACKWARD: {
        if (pp->slot_mb[slot] != in->mb)
            return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: backward of micro-batch %d, slot %d holds %d", s, in->mb,
                           slot, pp->slot_mb[slot]);
        DT_CHECK(dt__pipe_wait_send(pp, &pp->grad_send)); /* dres is about to be rewritten */
        const float *w = NULL;
        DT_CHECK(dt__pipe_weights(pp, in->version, &w));
        float dloss = 0.0f;
        if (s == pp->p - 1) {
            /* the micro-batch's counted targets nc, and (gpipe/1f1b) the global batch's n */
            if (!dt__pipe_async(pp)) DT_CHECK(dt__pipe_count_targets(pp, in->step));
            DT_CHECK(pp->cfg.batch(pp->cfg.ctx, 0, dt__pipe_index(pp, in->mb), pp->tokens, pp->targets, NULL, NULL));
            int nc = 0;
            for (int i = 0; i < pp->cfg.B * pp->cfg.T; i++) nc += pp->targets[i] >= 0;
            if (dt__pipe_async(pp)) {
                /* each micro-batch is its own update: the mean over its own targets, averaged
                 * over the d pipelines by the data-parallel allreduce's sum */
                dloss = nc ? 1.0f / ((float)nc * (float)pp->d) : 0.0f;
            } else {
                /* weight nc / n times the loss scale, then per target: the very floats
                 * lib/train/model_gpt.c and lib/model/gpt.c compute for this micro-batch */
                const double wk = pp->n_total ? (double)nc / (double)pp->n_total : 0.0;
                const float scaled = (float)(wk * dt__pipe_scale(pp));
                dloss = nc ? scaled / (float)nc : 0.0f;
            }
        }
        const float *dx = NULL;
        pp->cur = in;
        const dt_status bs = dt__stage_backward(pp->st, slot, w, dloss, &dx);
        pp->cur = NULL;
        DT_CHECK(bs);
        pp->slot_mb[slot] = -1;
        if (in->mb < pp->total_mb) pp->used[2 * in->mb + 1] = in->version;
        return DT_OK;
    }
    case DT_SCHED_SEND_GRAD: {
        return dt__pipe_send(pp, dt__stage_dres(pp->st), &pp->grad_wire, s - 1, DT__PIPE_TAG_GRAD, &pp->grad_send);
    }
    case DT_SCHED_OPTIM_STEP: return dt__pipe_optim(pp, in, t);
    case DT_SCHED_STASH: return dt__pipe_stash(pp, in->version);
    case DT_SCHED_DROP: return dt__pipe_drop(pp, in->version);
    }
    return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: unknown instruction %d", s, (int)in->op);
}

/* pipedream, p > 1, at the end of step t: the last stage starts sending
 * its loss of step t to stage 0 of its pipeline; stage 0 posts the
 * receive of step t and completes step t-1's (at the last step also step
 * t's), then adds the pipelines' parts over its data-parallel group (whose
 * updates keep it in step anyway). A step's message is in flight while the
 * next step runs, so no stage waits at the boundary for a later one; the
 * waits are bounded by --comm-timeout as every other. *loss, *iter: see
 * dt__pipe_stats. */
static dt_status dt__pipe_report_loss(dt__pipe *pp, int64_t t, float *loss, int64_t *iter)
{
    dt_comm *c = pp->pipe;
    const int k = (int)(t % 2), last = pp->p - 1, final = t + 1 >= pp->cfg.steps;
    *loss = 0.0f;
    *iter = 0;
    if (pp->stage == last) {
        if (pp->loss_send[k]) DT_CHECK(c->ops->wait(c, pp->loss_send[k])); /* step t-2's: long done */
        pp->loss_send[k] = NULL;
        pp->loss_out[k] = (float)pp->loss_sum;
        DT_CHECK(c->ops->isend(c, &pp->loss_out[k], sizeof(float), 0, DT__PIPE_TAG_LOSS, &pp->loss_send[k]));
        if (final)
            for (int j = 0; j < 2; j++)
                if (pp->loss_send[j]) {
                    DT_CHECK(c->ops->wait(c, pp->loss_send[j]));
                    pp->loss_send[j] = NULL;
                }
        *loss = pp->loss_out[k]; /* its part: a non-finite one stops the run here */
        *iter = isfinite(*loss) ? 0 : t + 1;
        return DT_OK;
    }
    if (pp->stage != 0) return DT_OK;
    DT_CHECK(c->ops->irecv(c, &pp->loss_in[k], sizeof(float), last, DT__PIPE_TAG_LOSS, &pp->loss_recv[k]));
    const int64_t want = final ? t : t - 1; /* the step whose loss is taken now */
    if (want < 0) return DT_OK;
    int took = 0;
    for (int64_t u = t - 1; u <= want; u++) { /* messages arrive in order: step t-1's first */
        const int j = (int)(u % 2);
        if (u < 0 || !pp->loss_recv[j]) continue; /* none posted (the run began at step t) */
        DT_CHECK(c->ops->wait(c, pp->loss_recv[j]));
        pp->loss_recv[j] = NULL;
        took |= u == want;
    }
    if (!took) return DT_OK; /* this rank never posted that step's receive: its loss is unknown here */
    float v = pp->loss_in[want % 2];
    if (pp->d > 1) DT_CHECK(dt_comm_allreduce(pp->data, &v, 1, DT_ALLREDUCE_RING, NULL));
    if (pp->dpi == 0 && pp->tpi == 0) *loss = v, *iter = want + 1;
    return DT_OK;
}

dt_status dt__pipe_step(dt__pipe *pp, int64_t t, dt__pipe_stats *out)
{
    const int s = pp->stage, n = pp->sched->count[s];
    const dt_sched_instr *list = pp->sched->instr[s];
    int end = pp->pc;
    for (int i = pp->pc; i < n; i++)
        if (list[i].step <= t) end = i + 1;
    dt__stage_weights_changed(pp->st); /* a checkpoint load or ZeRO's gather may have written them */
    pp->loss_sum = 0.0;
    pp->updates = 0;
    memset(&pp->last, 0, sizeof pp->last);
    pp->last.first_bad = -1;
    pp->last_scale = dt__pipe_scale(pp);
    for (; pp->pc < end; pp->pc++) {
        const int64_t t0 = dt_time_ns();
        pp->opt_from = t0;
        DT_CHECK(dt__pipe_exec(pp, &list[pp->pc], t));
        /* an OPTIM_STEP's span is its update, after its collectives (pipeline.h) */
        if (pp->cfg.event) pp->cfg.event(pp->cfg.ctx, s, &list[pp->pc], pp->opt_from, dt_time_ns());
    }
    float v[2] = {0.0f, 0.0f};
    int64_t loss_iter = t + 1;
    if (dt__pipe_async(pp) && pp->p > 1) { /* no barrier: the loss arrives a step late */
        DT_CHECK(dt__pipe_report_loss(pp, t, &v[0], &loss_iter));
        v[1] = (float)pp->last_norm; /* this stage's (the same on its data-parallel replicas) */
    } else {                         /* the step's loss: the last stages' weighted sums, added over every rank */
        v[0] = s == pp->p - 1 && pp->tpi == 0 ? (float)pp->loss_sum : 0.0f;
        v[1] = s == 0 && pp->tpi == 0 ? (float)pp->last_norm : 0.0f;
        DT_CHECK(dt_comm_allreduce(pp->cfg.world, v, 2, DT_ALLREDUCE_RING, NULL));
        v[1] /= (float)pp->d; /* stage 0's, from each pipeline */
    }
    if (out) {
        out->loss = v[0];
        out->loss_iter = loss_iter;
        out->lr = pp->last_lr;
        out->grad_norm = v[1];
        out->updates = pp->updates;
        out->loss_scale = pp->last_scale;
        out->skipped = pp->last.skipped;
        out->first_bad = pp->last.first_bad;
        out->ev = pp->last.ev;
        out->nonfinite = pp->last.nonfinite;
    }
    return DT_OK;
}

/* Step t's micro-batches of this pipeline forward again through the
 * stages (slot 0, free at the end of a gpipe/1f1b step), each stage looking
 * at its layers' outputs; activations travel as in the step (FP32). */
dt_status dt__pipe_forward_check(dt__pipe *pp, int64_t t, int *mb, int *pos)
{
    const int s = pp->stage, first = s == 0, last = s == pp->p - 1;
    *mb = *pos = -1;
    DT_CHECK(dt__pipe_wait_send(pp, &pp->act_send[0]));
    for (int k = 0; k < pp->cfg.m; k++) {
        const int j = (int)t * pp->cfg.m + k; /* the schedule's micro-batch */
        if (first || last)
            DT_CHECK(pp->cfg.batch(pp->cfg.ctx, 0, dt__pipe_index(pp, j), pp->tokens, pp->targets, NULL, NULL));
        if (!first) DT_CHECK(dt__pipe_recv(pp, dt__stage_input(pp->st, 0), s - 1, DT__PIPE_TAG_ACT));
        const float *out = NULL;
        int at = -1;
        DT_CHECK(dt__stage_forward_check(pp->st, 0, first ? pp->tokens : NULL, last ? pp->targets : NULL, &out, &at));
        dt_comm_request *q = NULL;
        if (!last) DT_CHECK(dt__pipe_send(pp, out, NULL, s + 1, DT__PIPE_TAG_ACT, &q));
        DT_CHECK(dt__pipe_wait_send(pp, &q));
        DT_CHECK(dt__stage_release(pp->st, 0));
        if (at >= 0 && *mb < 0) *mb = k, *pos = at;
    }
    return DT_OK;
}

const char *dt__pipe_tensor_name(const dt__pipe *pp, int index)
{
    const dt_paramset *w = dt__stage_whole_layout(pp->st);
    /* one past the whole layout: the last stage's copy of the tied wte */
    if (index == w->count && pp->tied) return "lm_head.w";
    return index >= 0 && index < w->count ? w->info[index].name : "";
}

/* ---- evaluation and gathering ---------------------------------------------- */

enum { DT__PIPE_TAG_EVAL = 3 };

dt_status dt__pipe_evaluate(dt__pipe *pp, int n_val, int has_accuracy, double sums[4])
{
    dt__stage_weights_changed(pp->st);
    const int s = pp->stage, first = s == 0, last = s == pp->p - 1, eslot = pp->slots; /* the spare slot */
    const int lo = (int)((int64_t)n_val * pp->dpi / pp->d), hi = (int)((int64_t)n_val * (pp->dpi + 1) / pp->d);
    const size_t n = (size_t)pp->cfg.B * pp->cfg.T;
    dt_comm *c = dt__pipe_dev_pipe(pp);
    double acc[4] = {0, 0, 0, 0};
    float *pos_loss = malloc(n * sizeof *pos_loss);
    uint8_t *pos_correct = malloc(n);
    dt_status st = DT_OK;
    if (!pos_loss || !pos_correct) {
        st = DT_FAIL(DT_ERR_NOMEM, "pipeline evaluation: out of memory");
        goto done;
    }
    for (int j = lo; j < hi; j++) {
        int n_ex = 0;
        if (first || last)
            DT_CHECK_GOTO(pp->cfg.batch(pp->cfg.ctx, 1, (uint64_t)j, pp->tokens, pp->targets, pp->example, &n_ex), st,
                          done);
        if (!first)
            DT_CHECK_GOTO(dt__pipe_recv(pp, dt__stage_input(pp->st, eslot), s - 1, DT__PIPE_TAG_EVAL), st, done);
        float loss = 0.0f;
        int nc = 0;
        DT_CHECK_GOTO(dt__stage_forward(pp->st, eslot, NULL, first ? pp->tokens : NULL, last ? pp->targets : NULL, NULL,
                                        &loss, &nc),
                      st, done);
        if (!last) {
            const float *out = NULL;
            dt_comm_request *q = NULL;
            DT_CHECK_GOTO(dt__stage_output(pp->st, eslot, &out), st, done);
            DT_CHECK_GOTO(
                dt__pipe_send(pp, out, pp->act_wire ? &pp->act_wire[eslot] : NULL, s + 1, DT__PIPE_TAG_EVAL, &q), st,
                done);
            DT_CHECK_GOTO(c->ops->wait(c, q), st, done);
        } else {
            acc[0] += (double)loss * nc;
            acc[1] += nc;
            if (has_accuracy && n_ex > 0) {
                int nok = 0;
                DT_CHECK_GOTO(dt__stage_position_stats(pp->st, eslot, pos_loss, pos_correct), st, done);
                dt_data_count_correct(pp->example, pos_correct, (int)n, n_ex, &nok);
                acc[2] += n_ex;
                acc[3] += nok;
            }
        }
        DT_CHECK_GOTO(dt__stage_release(pp->st, eslot), st, done);
    }
    {
        if (pp->tpi != 0) acc[0] = acc[1] = acc[2] = acc[3] = 0.0; /* tensor-parallel ranks computed the same */
        DT_CHECK_GOTO(dt_comm_sum_doubles(pp->cfg.world, acc, 4), st, done);
        for (int i = 0; i < 4; i++) sums[i] = acc[i];
    }
done:
    free(pos_loss);
    free(pos_correct);
    return st;
}

/* Under ZeRO-1 with mixed precision the weights are the FP32 masters, in
 * segments over the data group: gathered into one stage buffer, then
 * fingerprinted. Collective over the data group. */
static dt_status dt__pipe_probe_masters(dt__pipe *pp, double *mine)
{
    const float *m = dt__zero_master(pp->zero);
    size_t lo = 0, len = 0;
    dt__zero_shard(pp->zero, &lo, &len);
    const size_t n = dt__stage_layout(pp->st)->numel;
    dt_buffer all = {0};
    dt_status st = dt_buffer_alloc(&all, pp->cfg.be, (n ? n : 1) * sizeof(float));
    if (st == DT_OK && len)
        st = pp->cfg.be->copy(pp->cfg.be, (float *)all.data + lo, m, len * sizeof(float), DT_COPY_D2D);
    if (st == DT_OK) st = dt_comm_all_gather(dt__pipe_dev_data(pp), all.data, n, NULL);
    if (st == DT_OK && pp->dpi == 0) st = dt__stage_probe_of(pp->st, all.data, mine);
    dt_buffer_free(&all);
    return st;
}

/* Tied embeddings: the first stage's wte and the last stage's copy must be
 * equal bit for bit (the same sums, the same updates); their CRC32C, added
 * with opposite signs over the two (exact in a double), tells. */
static dt_status dt__pipe_tied_check(dt__pipe *pp)
{
    size_t off, n;
    dt__stage_tied_range(pp->st, &off, &n);
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory checking the tied embeddings");
    dt_status st = pp->cfg.be->copy(pp->cfg.be, h, dt__stage_params(pp->st) + off, n * sizeof(float), DT_COPY_D2H);
    double v = st == DT_OK ? (pp->stage == 0 ? 1.0 : -1.0) * (double)dt_crc32c(h, n * sizeof(float)) : 0.0;
    free(h);
    DT_CHECK(st);
    DT_CHECK(dt_comm_sum_doubles(pp->emb, &v, 1));
    if (v != 0.0)
        return DT_FAIL(DT_ERR_NUMERIC,
                       "pipeline: tied embeddings: the last stage's copy of wte differs from the first stage's wte");
    return DT_OK;
}

dt_status dt__pipe_probe(dt__pipe *pp, double *out)
{
    double mine = 0.0;
    if (pp->emb) DT_CHECK(dt__pipe_tied_check(pp));
    if (pp->zero && dt__zero_master(pp->zero)) DT_CHECK(dt__pipe_probe_masters(pp, &mine));
    else if (pp->dpi == 0) DT_CHECK(dt__stage_probe(pp->st, &mine)); /* the first pipeline speaks for all */
    DT_CHECK(dt_comm_sum_doubles(pp->cfg.world, &mine, 1));
    *out = mine;
    return DT_OK;
}

dt_status dt__pipe_version_check(dt__pipe *pp, long long *mismatches, long long *disagreements)
{
    long long mis = 0;
    const int n = pp->total_mb;
    for (int mb = 0; mb < n; mb++)
        if (pp->used[2 * mb] >= 0 && pp->used[2 * mb] != pp->used[2 * mb + 1]) mis++;
    /* across stages: per micro-batch the sum and the sum of squares of the
     * stages' forward versions (first pipeline only); equal versions on all
     * p stages give p * sumsq == sum^2 */
    double *v = calloc((size_t)2 * n + 1, sizeof *v);
    float *f = calloc((size_t)2 * n + 1, sizeof *f);
    if (!v || !f) {
        free(v), free(f);
        return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory checking versions");
    }
    if (pp->dpi == 0 && pp->tpi == 0) {
        for (int mb = 0; mb < n; mb++) {
            f[2 * mb] = (float)pp->used[2 * mb];
            f[2 * mb + 1] = (float)pp->used[2 * mb] * (float)pp->used[2 * mb];
        }
        f[2 * n] = (float)mis;
    }
    dt_status st = dt_comm_allreduce(pp->cfg.world, f, (size_t)2 * n + 1, DT_ALLREDUCE_RING, NULL);
    long long dis = 0;
    for (int mb = 0; st == DT_OK && mb < n; mb++) {
        const double sum = f[2 * mb], sq = f[2 * mb + 1];
        if (fabs((double)pp->p * sq - sum * sum) > 0.5) dis++;
    }
    if (st == DT_OK) {
        *mismatches = (long long)f[2 * n];
        *disagreements = dis;
    }
    free(v), free(f);
    return st;
}

/* ---- checkpoints ----------------------------------------------------------- */

const dt_paramset *dt__pipe_layout(const dt__pipe *pp) { return dt__stage_layout(pp->st); }
float *dt__pipe_params(dt__pipe *pp) { return dt__stage_params(pp->st); }
float *dt__pipe_grads(dt__pipe *pp) { return dt__stage_grads(pp->st); }
const int *dt__pipe_whole_index(const dt__pipe *pp) { return dt__stage_whole_index(pp->st); }
dt_optim *dt__pipe_optimizer(dt__pipe *pp) { return pp->zero ? dt__zero_optimizer(pp->zero) : &pp->opt; }
dt__zero *dt__pipe_zero(dt__pipe *pp) { return pp->zero; }

/* The first instruction of step t or later in this stage's list (n if none),
 * after checking that no instruction of a step before t comes later. */
static dt_status dt__pipe_cut(const dt__pipe *pp, int64_t t, int *cut)
{
    const int s = pp->stage, n = pp->sched->count[s];
    const dt_sched_instr *list = pp->sched->instr[s];
    int i = 0;
    while (i < n && list[i].step < t) i++;
    for (int j = i; j < n; j++)
        if (list[j].step < t)
            return DT_FAIL(DT_ERR_UNSUPPORTED,
                           "--pipeline-schedule %s: stage %d runs work of step %d after step %lld "
                           "has begun (micro-batches and weight versions in flight across the "
                           "boundary): a checkpoint cannot be taken or resumed there",
                           dt_sched_kind_name(pp->cfg.kind), s, list[j].step + 1, (long long)t + 1);
    *cut = i;
    return DT_OK;
}

dt_status dt__pipe_boundary(const dt__pipe *pp, int64_t t)
{
    int cut;
    DT_CHECK(dt__pipe_cut(pp, t, &cut));
    if (pp->pc != cut || pp->n_stash)
        return DT_FAIL(DT_ERR_UNSUPPORTED,
                       "pipeline stage %d: %s at the start of step %lld (a checkpoint needs a "
                       "clean step boundary)",
                       pp->stage, pp->n_stash ? "weight versions stashed" : "not", (long long)t + 1);
    for (int k = 0; k < pp->slots; k++)
        if (pp->slot_mb[k] >= 0)
            return DT_FAIL(DT_ERR_UNSUPPORTED, "pipeline stage %d: micro-batch %d in flight at the start of step %lld",
                           pp->stage, pp->slot_mb[k], (long long)t + 1);
    return DT_OK;
}

dt_status dt__pipe_seek(dt__pipe *pp, int64_t t)
{
    if (t < 0 || t > pp->cfg.steps)
        return DT_FAIL(DT_ERR_INVALID, "pipeline: cannot resume at step %lld of %lld", (long long)t,
                       (long long)pp->cfg.steps);
    if (pp->pc != 0 || pp->n_stash)
        return DT_FAIL(DT_ERR_INVALID, "pipeline stage %d: resume only before the first step", pp->stage);
    int cut;
    DT_CHECK(dt__pipe_cut(pp, t, &cut));
    /* the current version: the last optimizer step's before the cut (0 before any) */
    const dt_sched_instr *list = pp->sched->instr[pp->stage];
    int v = 0;
    for (int i = 0; i < cut; i++)
        if (list[i].op == DT_SCHED_OPTIM_STEP) v = list[i].version;
    pp->pc = cut;
    pp->version = v;
    return DT_OK;
}
