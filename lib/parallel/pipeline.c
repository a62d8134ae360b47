/* pipeline.c: the pipeline-parallel runtime (see pipeline.h): one device
 * of one pipeline executing its list of the schedule, with its v model
 * chunks (pipeline_impl.h).
 *
 * Per instruction, on chunk c (virtual stage q):
 *   RECV_ACT   irecv into the micro-batch's slot input, wait (from this
 *              rank's other chunk: take it from the chunk's mailbox)
 *   FORWARD    the stage forward in slot mb % slots, with the version's
 *              weights; the last virtual stage reads the targets, weighs the loss
 *   SEND_ACT   isend the slot's output (waited for before the slot's reuse;
 *              to this rank: a copy into the receiving chunk's mailbox)
 *   RECV_GRAD  irecv into the stage's dout, wait (or the mailbox)
 *   BACKWARD   the stage backward (gradients accumulate)
 *   BACKWARD_B the stage's B (stage.h): the input gradient only
 *   BACKWARD_W its W: the parameter gradients, then the slot is free
 *   SEND_GRAD  isend a copy of the input gradient (one per slot, waited
 *              for before the slot's next send; to this rank: the mailbox)
 *   OPTIM_STEP pipeline_optim.c: every chunk's parameters, one update of
 *              the rank's flat buffer
 *   STASH/DROP copy the current weights into a stash buffer / free it
 * Under --fp16/--bf16 activations and their gradients travel in the 16-bit
 * format (a cast before the send and after the receive; exact, as the
 * stages hold only 16-bit values), half the FP32 bytes. Hand-overs between
 * two chunks of the rank are FP32 copies. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt_data.h"
#include "dt_internal.h"
#include "dt_time.h"
#include "cp.h"
#include "pipeline_impl.h"
#include "zero_shard.h"

int dt__pipe_stage(const dt__pipe *pp) { return pp->stage; }
int dt__pipe_chunks(const dt__pipe *pp) { return pp->v; }
int dt__pipe_dp_index(const dt__pipe *pp) { return pp->dpi; }
int dt__pipe_tp_index(const dt__pipe *pp) { return pp->tpi; }
const struct dt__cp *dt__pipe_cp(const dt__pipe *pp) { return pp->cp; }
int dt__pipe_cp_index(const dt__pipe *pp) { return pp->cpi; }
int64_t dt__pipe_message_id(const dt__pipe *pp, const dt_sched_instr *in)
{
    return dt_sched_message_id(pp->sched, pp->stage, in,
                               dt_grid_group_index(&pp->grid, DT_GRID_PIPELINE, pp->cfg.world->rank),
                               dt_grid_group_count(&pp->grid, DT_GRID_PIPELINE));
}
long long dt__pipe_tp_allreduces(const dt__pipe *pp) { return pp->tp.allreduces_fwd + pp->tp.allreduces_bwd; }
size_t dt__pipe_message_bytes(const dt__pipe *pp, const dt_sched_instr *in)
{
    const int msg = in->op == DT_SCHED_SEND_ACT || in->op == DT_SCHED_SEND_GRAD || in->op == DT_SCHED_RECV_ACT ||
                    in->op == DT_SCHED_RECV_GRAD;
    return msg && in->peer != pp->stage ? pp->sg_len : 0;
}
size_t dt__pipe_peak_activation_bytes(const dt__pipe *pp) { return pp->peak; }
size_t dt__pipe_activation_bytes(const dt__pipe *pp)
{
    size_t now = 0;
    for (int c = 0; c < pp->v; c++) now += dt__stage_activation_bytes(pp->ch[c].st);
    return now;
}
int dt__pipe_max_versions(const dt__pipe *pp) { return pp->max_versions; }
int dt__pipe_max_versions_in_flight(const dt__pipe *pp) { return pp->max_versions_in_flight; }

int dt__pipe_async(const dt__pipe *pp)
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

dt_comm *dt__pipe_dev_pipe(const dt__pipe *pp) { return pp->dpipe ? pp->dpipe : pp->pipe; }
dt_comm *dt__pipe_dev_data(const dt__pipe *pp) { return pp->ddata ? pp->ddata : pp->data; }

int dt__pipe_chunk_of(const dt__pipe *pp, int q)
{
    for (int c = 0; c < pp->v; c++)
        if (pp->sched->vstage[pp->stage * pp->v + c] == q) return c;
    return -1;
}

int dt__pipe_device_of(const dt__pipe *pp, int q)
{
    for (int i = 0; i < pp->p * pp->v; i++)
        if (pp->sched->vstage[i] == q) return i / pp->v;
    return -1;
}

/* The stage's recompute hook: the span belongs to the BACKWARD being run. */
static void dt__pipe_recomputed(void *ctx, int layer, int64_t t0_ns, int64_t t1_ns)
{
    dt__pipe *pp = ctx;
    if (pp->cur) pp->cfg.recompute_event(pp->cfg.ctx, pp->stage, pp->cur, layer, t0_ns, t1_ns);
}

/* The communicators: the grid's sub-groups, and with tied embeddings the
 * group of the ranks holding virtual stages 0 and p*v-1 (none when one
 * rank holds both: the sum is local, pipeline_optim.c). */
static dt_status dt__pipe_comms(dt__pipe *pp, const dt__pipe_setup *s)
{
    dt_comm *dev = s->device_world;
    DT_CHECK(dt_grid_split(&pp->grid, s->world, DT_GRID_PIPELINE, &pp->pipe));
    /* the gradient's group: the data replicas, times the context ranks with c > 1 */
    const dt_grid_group dg = pp->c > 1 ? DT_GRID_ZERO : DT_GRID_DATA;
    DT_CHECK(dt_grid_split(&pp->grid, s->world, dg, &pp->data));
    DT_CHECK(dt_grid_split(&pp->grid, s->world, DT_GRID_CONTEXT, &pp->cpc));
    DT_CHECK(dt_grid_split(&pp->grid, s->world, DT_GRID_TENSOR, &pp->tpc));
    if (dev) {
        DT_CHECK(dt_grid_split(&pp->grid, dev, DT_GRID_PIPELINE, &pp->dpipe));
        DT_CHECK(dt_grid_split(&pp->grid, dev, dg, &pp->ddata));
        DT_CHECK(dt_grid_split(&pp->grid, dev, DT_GRID_TENSOR, &pp->dtp));
    }
    const int d0 = dt__pipe_device_of(pp, 0), d1 = dt__pipe_device_of(pp, pp->q_last);
    pp->tied = s->model->tie_embeddings && pp->q_last > 0;
    if (!pp->tied || d0 == d1) return DT_OK;
    /* the two ends of each (tensor, data) position; the other devices join
     * none (the split is still collective over the world) */
    pp->grid.embedding[0] = d0;
    pp->grid.embedding[1] = d1;
    DT_CHECK(dt_grid_split(&pp->grid, s->world, DT_GRID_EMBEDDING, &pp->emb));
    if (dev) DT_CHECK(dt_grid_split(&pp->grid, dev, DT_GRID_EMBEDDING, &pp->demb));
    return DT_OK;
}

/* Micro-batches of chunk c in flight at once in the device's list: from
 * its RECV_ACT (or FORWARD) to its BACKWARD or BACKWARD_W. */
static int dt__pipe_chunk_slots(const dt__pipe *pp, int c)
{
    const dt_sched_instr *list = pp->sched->instr[pp->stage];
    int held = 0, most = 1, recv = -1;
    for (int i = 0; i < pp->sched->count[pp->stage]; i++) {
        const dt_sched_instr *in = &list[i];
        if (in->chunk != c) continue;
        if (in->op == DT_SCHED_RECV_ACT || (in->op == DT_SCHED_FORWARD && recv != in->mb)) held++;
        if (in->op == DT_SCHED_RECV_ACT) recv = in->mb;
        if (in->op == DT_SCHED_BACKWARD || in->op == DT_SCHED_BACKWARD_W) held--;
        most = DT_MAX(most, held);
    }
    return most;
}

/* The rank's flat buffer: each chunk's layout appended in chunk order. */
static dt_status dt__pipe_layout_make(dt__pipe *pp)
{
    for (int c = 0; c < pp->v; c++) {
        const dt_paramset *L = dt__stage_layout(pp->ch[c].st);
        pp->ch[c].first = pp->layout.count;
        for (int i = 0; i < L->count; i++)
            DT_CHECK(
                dt_paramset_add(&pp->layout, L->info[i].name, L->info[i].ndim, L->info[i].shape, L->info[i].decay));
        pp->ch[c].offset = L->count ? pp->layout.info[pp->ch[c].first].offset : 0;
    }
    const int n = pp->layout.count;
    pp->whole_index = malloc((size_t)(n ? n : 1) * sizeof *pp->whole_index);
    pp->tensor_map = malloc((size_t)(n ? n : 1) * sizeof *pp->tensor_map);
    if (!pp->whole_index || !pp->tensor_map) return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory");
    for (int c = 0; c < pp->v; c++) {
        const dt__stage *st = pp->ch[c].st;
        const int *wi = dt__stage_whole_index(st), cnt = dt__stage_layout(st)->count;
        const int copy = dt__stage_has_tied_copy(st);
        for (int i = 0; i < cnt; i++) {
            pp->whole_index[pp->ch[c].first + i] = wi[i];
            /* the tied copy (the last tensor): named one past the whole layout */
            pp->tensor_map[pp->ch[c].first + i] = copy && i == cnt - 1 ? dt__stage_whole_layout(st)->count : wi[i];
        }
    }
    const size_t bytes = (pp->layout.numel ? pp->layout.numel : 1) * sizeof(float);
    DT_CHECK(dt_buffer_alloc(&pp->params, pp->cfg.be, bytes));
    DT_CHECK(dt_buffer_alloc(&pp->grads, pp->cfg.be, bytes));
    for (int c = 0; c < pp->v; c++)
        DT_CHECK(dt__stage_bind_buffers(pp->ch[c].st, (float *)pp->params.data + pp->ch[c].offset,
                                        (float *)pp->grads.data + pp->ch[c].offset));
    return DT_OK;
}

/* Chunk c: its stage (blocks of virtual stage q, evenly over the p*v, or
 * --pipeline-split's with one chunk), slots and buffers. */
static dt_status dt__pipe_chunk_create(dt__pipe *pp, int c)
{
    const dt__pipe_setup *s = &pp->cfg;
    dt__chunk *k = &pp->ch[c];
    k->q = pp->sched->vstage[pp->stage * pp->v + c];
    k->dout_mb = -1;
    int l0, l1, split = 0;
    DT_CHECK(dt__stage_split(s->model->num_layers, pp->p * pp->v, pp->v == 1 ? s->split : NULL, &l0, &l1, k->q));
    k->slots = dt__pipe_chunk_slots(pp, c);
    for (int i = 0; i < pp->sched->count[pp->stage]; i++)
        split |= pp->sched->instr[pp->stage][i].op == DT_SCHED_BACKWARD_B;
    /* one more slot for evaluation, which may come while micro-batches are in flight (pipedream) */
    DT_CHECK(dt__stage_create(s->model, s->be, l0, l1, k->q == 0, k->q == pp->q_last, k->slots + 1, s->B, s->T,
                              pp->t > 1 ? &pp->tp : NULL, pp->cp, &k->st));
    DT_CHECK(dt__stage_init_weights(k->st, &s->init));
    DT_CHECK(dt__stage_set_precision(k->st, s->precision));
    if (s->recompute_event) dt__stage_set_recompute_hook(k->st, dt__pipe_recomputed, pp);
    DT_CHECK(dt__stage_set_recompute(k->st, s->recompute, s->recompute_num_layers));
    if (split) DT_CHECK(dt__stage_set_split(k->st, 1));
    DT_CHECK(dt__stage_zero_grad(k->st));
    k->slot_mb = malloc((size_t)k->slots * sizeof *k->slot_mb);
    k->slot_version = calloc((size_t)k->slots, sizeof *k->slot_version);
    k->act_send = calloc((size_t)k->slots + 1, sizeof *k->act_send);
    k->grad_send = calloc((size_t)k->slots, sizeof *k->grad_send);
    k->grad_out = calloc((size_t)k->slots, sizeof *k->grad_out);
    if (!k->slot_mb || !k->slot_version || !k->act_send || !k->grad_send || !k->grad_out)
        return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory");
    for (int j = 0; j < k->slots; j++) k->slot_mb[j] = -1;
    const size_t wire = pp->msg_n * pp->wire_elem;
    if (k->q > 0)
        for (int j = 0; j < k->slots; j++) DT_CHECK(dt_buffer_alloc(&k->grad_out[j], s->be, wire));
    if (s->precision != DT_F32) {
        k->act_wire = calloc((size_t)k->slots + 1, sizeof *k->act_wire); /* and evaluation's slot */
        if (!k->act_wire) return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory");
        for (int j = 0; j <= k->slots; j++) DT_CHECK(dt_buffer_alloc(&k->act_wire[j], s->be, wire));
    }
    return DT_OK;
}

dt_status dt__pipe_create(const dt__pipe_setup *s, dt__pipe **out)
{
    *out = NULL;
    dt_grid grid; /* tensor fastest: rank = tpi + t * (dpi + d * stage) */
    DT_CHECK(dt_grid_init(&grid, s->world->size, 0, s->t > 0 ? s->t : 1, s->c > 0 ? s->c : 1, s->p));
    dt__pipe *pp = calloc(1, sizeof *pp);
    if (!pp) return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory");
    dt_status st = DT_OK;
    pp->cfg = *s;
    dt_paramset_init(&pp->layout);
    pp->grid = grid;
    pp->p = grid.size[DT_GRID_PIPELINE];
    pp->t = grid.size[DT_GRID_TENSOR];
    pp->c = grid.size[DT_GRID_CONTEXT];
    pp->dd = grid.size[DT_GRID_DATA];
    pp->d = pp->c * pp->dd; /* the gradient's group */
    pp->tpi = dt_grid_coord(&grid, s->world->rank, DT_GRID_TENSOR);
    pp->cpi = dt_grid_coord(&grid, s->world->rank, DT_GRID_CONTEXT);
    pp->ddi = dt_grid_coord(&grid, s->world->rank, DT_GRID_DATA);
    pp->dpi = pp->cpi + pp->c * pp->ddi; /* its place in the gradient's group (dt_grid.h's order) */
    pp->stage = dt_grid_coord(&grid, s->world->rank, DT_GRID_PIPELINE);
    pp->step_of_total = -1;
    for (int i = 0; i < DT__PIPE_MAX_STASH; i++) pp->stash[i].version = -1;
    if (s->steps > INT32_MAX / (s->m > 0 ? s->m : 1)) {
        st =
            DT_FAIL(DT_ERR_INVALID, "pipeline: %lld steps of %d micro-batches are too many", (long long)s->steps, s->m);
        goto fail;
    }
    DT_CHECK_GOTO(dt_schedule_make_chunks(s->kind, s->p, s->v > 0 ? s->v : dt_sched_default_chunks(s->kind), s->m,
                                          (int)s->steps, &pp->sched),
                  st, fail);
    pp->v = pp->sched->v;
    pp->q_last = pp->p * pp->v - 1;
    DT_CHECK_GOTO(dt__pipe_comms(pp, s), st, fail);
    pp->tp = (dt__tp){.comm = pp->dtp ? pp->dtp : pp->tpc,
                      .algo = s->allreduce == DT_ALLREDUCE_MPI && pp->dtp ? DT_ALLREDUCE_NCCL : s->allreduce,
                      .chunk_bytes = s->chunk_bytes,
                      .vocab_parallel = s->vocab_parallel,
                      .sp = s->sequence_parallel && pp->t > 1,
                      .event = s->tp_event,
                      .event_ctx = s->ctx};
    /* a message: the micro-batch's activation, the rank's rows of it under
     * context (1/c) and sequence (1/t) parallelism */
    pp->msg_n = (size_t)s->B * s->T * s->model->hidden_size / (size_t)(pp->tp.sp ? pp->t : 1) / (size_t)pp->c;
    if (pp->tp.sp) {
        DT_CHECK_GOTO(dt_buffer_alloc(&pp->ln_grad, s->be, 2 * (size_t)s->model->hidden_size * sizeof(float)), st,
                      fail);
        pp->tp.ln_grad = pp->ln_grad.data;
    }
    pp->wire_elem = s->precision == DT_F32 ? sizeof(float) : 2;
    if (pp->c > 1) {
        if (dt__pipe_async(pp)) {
            st = DT_FAIL(DT_ERR_INVALID, "--context-parallel-size %d: not with --pipeline-schedule %s (each stage "
                                         "updates on its own: no common loss over the sequence's ranks)",
                         pp->c, dt_sched_kind_name(s->kind));
            goto fail;
        }
        const int t = pp->t;
        DT_CHECK_GOTO(dt__cp_create(pp->cpc, s->cp_type, s->be, s->B, s->T, s->model->hidden_size / t,
                                    s->model->num_heads / t, &pp->cp),
                      st, fail);
        if (s->cp_event) dt__cp_set_event(pp->cp, s->cp_event, s->ctx);
    }
    pp->ch = calloc((size_t)pp->v, sizeof *pp->ch);
    if (!pp->ch) {
        st = DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory");
        goto fail;
    }
    for (int c = 0; c < pp->v; c++) DT_CHECK_GOTO(dt__pipe_chunk_create(pp, c), st, fail);
    DT_CHECK_GOTO(dt__pipe_layout_make(pp), st, fail);
    DT_CHECK_GOTO(dt__pipe_check(s->model, s->p, s->kind, s->scaler != NULL), st, fail);
    if (s->zero_stage >= 2) {
        DT_CHECK_GOTO(dt__pipe_shard_create(pp), st, fail);
    } else if (s->zero && pp->d > 1) {
        DT_CHECK_GOTO(dt__zero_create(dt__pipe_dev_data(pp), s->be, &pp->layout, &s->optim, &pp->zero), st, fail);
        /* the masters sharded; the stages' params hold their 16-bit values
         * (which they round again, exactly, before computing) */
        if (s->precision != DT_F32)
            DT_CHECK_GOTO(dt__zero_keep_masters(pp->zero, pp->params.data, s->precision), st, fail);
    } else {
        DT_CHECK_GOTO(dt_optim_init(&pp->opt, &s->optim, s->be, &pp->layout), st, fail);
        pp->opt_ready = 1;
    }
    pp->total_mb = (int)s->steps * s->m;
    pp->used = malloc((size_t)(2 * pp->total_mb + 2) * sizeof *pp->used);
    const size_t n = (size_t)s->B * s->T;
    pp->tokens = malloc(n * sizeof *pp->tokens);
    pp->targets = malloc(n * sizeof *pp->targets);
    pp->example = malloc(n * sizeof *pp->example);
    if (!pp->used || !pp->tokens || !pp->targets || !pp->example) {
        st = DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory");
        goto fail;
    }
    if (s->precision != DT_F32)
        DT_CHECK_GOTO(dt_buffer_alloc(&pp->recv_wire, s->be, pp->msg_n * pp->wire_elem), st, fail);
    const size_t msg = pp->msg_n * pp->wire_elem;
    pp->sg = s->scatter_gather && pp->t > 1 && pp->p > 1 && !pp->tp.sp; /* sp: a message is the rank's part already */
    pp->sg_len = msg;
    if (pp->sg) {
        if (msg % 4) {
            st = DT_FAIL(DT_ERR_INVALID,
                         "pipeline: a message of %zu bytes does not split into 32-bit words over the tensor ranks "
                         "(add --no-scatter-gather-tensors-in-pipeline)",
                         msg);
            goto fail;
        }
        dt_comm_segment(msg / 4, pp->t, pp->tpi, &pp->sg_off, &pp->sg_len);
        pp->sg_off *= 4, pp->sg_len *= 4;
    }
    for (int i = 0; i < 2 * pp->total_mb + 2; i++) pp->used[i] = -1;
    pp->max_versions = 1;
    *out = pp;
    return DT_OK;
fail:
    dt__pipe_free(pp);
    return st;
}

void dt__pipe_set_fp8(dt__pipe *pp, dt__fp8 *f)
{
    if (f) {
        f->tp_rank = pp->tpi;
        f->cp_rank = pp->cpi;
    }
    for (int c = 0; c < pp->v; c++) dt__stage_set_fp8(pp->ch[c].st, f);
}

void dt__pipe_free(dt__pipe *pp)
{
    if (!pp) return;
    /* sends still in flight complete as their receivers take them */
    for (int c = 0; pp->ch && c < pp->v; c++) {
        dt__chunk *k = &pp->ch[c];
        for (int j = 0; k->act_send && j <= k->slots; j++) (void)dt__pipe_wait_send(pp, &k->act_send[j]);
        for (int j = 0; k->grad_send && j < k->slots; j++) (void)dt__pipe_wait_send(pp, &k->grad_send[j]);
    }
    for (int k = 0; k < 2; k++) { /* a run that failed may leave them */
        if (pp->loss_send[k]) (void)pp->pipe->ops->wait(pp->pipe, pp->loss_send[k]);
        if (pp->loss_recv[k]) (void)pp->pipe->ops->wait(pp->pipe, pp->loss_recv[k]);
    }
    for (int i = 0; i < DT__PIPE_MAX_STASH; i++) dt_buffer_free(&pp->stash[i].buf);
    if (pp->opt_ready) dt_optim_free(&pp->opt);
    dt__zero_free(pp->zero); /* before the layout: it points at it */
    dt__pipe_shard_free(pp);
    for (int c = 0; pp->ch && c < pp->v; c++) {
        dt__chunk *k = &pp->ch[c];
        for (int j = 0; k->act_wire && j <= k->slots; j++) dt_buffer_free(&k->act_wire[j]);
        for (int b = 0; b < 2; b++) {
            for (int j = 0; j < k->box[b].cap; j++) dt_buffer_free(&k->box[b].buf[j]);
            free(k->box[b].buf);
        }
        free(k->act_wire);
        for (int j = 0; k->grad_out && j < k->slots; j++) dt_buffer_free(&k->grad_out[j]);
        free(k->grad_out);
        free(k->grad_send);
        dt__stage_free(k->st);
        free(k->slot_mb);
        free(k->slot_version);
        free(k->act_send);
    }
    free(pp->ch);
    dt_buffer_free(&pp->recv_wire);
    dt_buffer_free(&pp->ln_grad);
    dt_buffer_free(&pp->params);
    dt_buffer_free(&pp->grads);
    dt_paramset_free(&pp->layout);
    free(pp->whole_index);
    free(pp->tensor_map);
    dt_schedule_free(pp->sched);
    dt_comm_free(pp->dpipe);
    dt_comm_free(pp->ddata);
    dt_comm_free(pp->dtp);
    dt_comm_free(pp->demb);
    dt_comm_free(pp->emb);
    dt_comm_free(pp->pipe);
    dt_comm_free(pp->data);
    dt_comm_free(pp->tpc);
    dt_comm_free(pp->cpc);
    dt__cp_free(pp->cp);
    free(pp->used);
    free(pp->tokens);
    free(pp->targets);
    free(pp->example);
    free(pp);
}

/* ---- weight versions ------------------------------------------------------ */

/* Every chunk's weights were written (an update, a checkpoint load, a gather). */
static void dt__pipe_weights_changed(dt__pipe *pp)
{
    for (int c = 0; c < pp->v; c++) dt__stage_weights_changed(pp->ch[c].st);
}

/* The weights of version v for chunk c: the params when current, else its stash. */
static dt_status dt__pipe_weights(dt__pipe *pp, int c, int v, const float **w)
{
    if (v == pp->version) {
        *w = NULL;
        return DT_OK;
    }
    for (int i = 0; i < DT__PIPE_MAX_STASH; i++)
        if (pp->stash[i].version == v) {
            *w = (const float *)pp->stash[i].buf.data + pp->ch[c].offset;
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
    const size_t bytes = pp->layout.numel * sizeof(float);
    for (int i = 0; i < DT__PIPE_MAX_STASH; i++) {
        dt__stash *x = &pp->stash[i];
        if (x->version >= 0) continue;
        if (!x->buf.data) DT_CHECK(dt_buffer_alloc(&x->buf, pp->cfg.be, bytes));
        DT_CHECK(pp->cfg.be->copy(pp->cfg.be, x->buf.data, pp->params.data, bytes, DT_COPY_D2D));
        dt__pipe_weights_changed(pp); /* the buffer may have held another version */
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
    int distinct = 0, seen[DT__PIPE_MAX_STASH + 1], ns = 0;
    for (int c = 0; c < pp->v; c++) {
        const dt__chunk *k = &pp->ch[c];
        for (int a = 0; a < k->slots; a++) {
            if (k->slot_mb[a] < 0) continue;
            int known = 0;
            for (int b = 0; b < ns; b++) known |= seen[b] == k->slot_version[a];
            if (!known && ns <= DT__PIPE_MAX_STASH) seen[ns++] = k->slot_version[a], distinct++;
        }
    }
    if (distinct > pp->max_versions_in_flight) pp->max_versions_in_flight = distinct;
}

/* ---- data ------------------------------------------------------------------ */

uint64_t dt__pipe_index(const dt__pipe *pp, int mb)
{
    const int m = pp->cfg.m;
    return (uint64_t)(mb / m) * (uint64_t)(m * pp->dd) + (uint64_t)(pp->ddi * m + mb % m);
}

/* Last virtual stage: targets counted over step t's whole global batch
 * (m x d micro-batches, d the data replicas: every position of them, as
 * a context-parallel rank weighs its rows' losses by it too). */
static dt_status dt__pipe_count_targets(dt__pipe *pp, int64_t t)
{
    if (pp->step_of_total == t) return DT_OK;
    const size_t n = (size_t)pp->cfg.B * pp->cfg.T;
    long long total = 0;
    for (int j = 0; j < pp->cfg.m * pp->dd; j++) {
        uint64_t index = (uint64_t)t * (uint64_t)(pp->cfg.m * pp->dd) + (uint64_t)j;
        DT_CHECK(pp->cfg.batch(pp->cfg.ctx, 0, index, pp->tokens, pp->targets, NULL, NULL));
        for (size_t i = 0; i < n; i++) total += pp->targets[i] >= 0;
    }
    pp->n_total = total;
    pp->step_of_total = t;
    return DT_OK;
}

/* ---- messages ---------------------------------------------------------------- */

dt_status dt__pipe_wait_send(dt__pipe *pp, dt_comm_request **q)
{
    if (!*q) return DT_OK;
    dt_comm *c = dt__pipe_dev_pipe(pp);
    dt_status st = c->ops->wait(c, *q);
    *q = NULL;
    return st;
}

dt_status dt__pipe_recv(dt__pipe *pp, float *buf, int peer, int tag)
{
    dt_comm *c = dt__pipe_dev_pipe(pp);
    const size_t n = pp->msg_n;
    void *land = pp->wire_elem == sizeof(float) ? (void *)buf : pp->recv_wire.data;
    dt_comm_request *q = NULL;
    DT_CHECK(c->ops->irecv(c, (char *)land + pp->sg_off, pp->sg_len, peer, tag, &q));
    DT_CHECK(c->ops->wait(c, q));
    if (pp->sg) { /* the other tensor ranks' parts, over the fast link: a copy of bytes, whatever they hold */
        const dt_collective_opts o = {.chunk_bytes = pp->cfg.chunk_bytes};
        DT_CHECK(dt_comm_all_gather(pp->tp.comm, (float *)land, n * pp->wire_elem / 4, &o));
    }
    if (land != buf) DT_CHECK(pp->cfg.be->cast(pp->cfg.be, buf, DT_F32, land, pp->cfg.precision, n));
    return DT_OK;
}

dt_status dt__pipe_send(dt__pipe *pp, const float *x, dt_buffer *wire, int peer, int tag, dt_comm_request **q)
{
    dt_comm *c = dt__pipe_dev_pipe(pp);
    const size_t n = pp->msg_n;
    const void *src = x;
    if (pp->wire_elem != sizeof(float)) {
        DT_CHECK(pp->cfg.be->cast(pp->cfg.be, wire->data, pp->cfg.precision, x, DT_F32, n));
        src = wire->data;
    }
    return c->ops->isend(c, (const char *)src + pp->sg_off, pp->sg_len, peer, tag, q);
}

dt_status dt__pipe_box_put(dt__pipe *pp, int c, int kind, const float *x)
{
    dt__pipe_box *b = &pp->ch[c].box[kind];
    const size_t bytes = pp->msg_n * sizeof(float);
    if (b->n == b->cap) { /* grow: the oldest first again, at 0 */
        const int cap = b->cap ? 2 * b->cap : 2;
        dt_buffer *nb = calloc((size_t)cap, sizeof *nb);
        if (!nb) return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory for a hand-over");
        for (int i = 0; i < b->n; i++) nb[i] = b->buf[(b->head + i) % b->cap];
        free(b->buf);
        b->buf = nb, b->head = 0, b->cap = cap;
    }
    dt_buffer *slot = &b->buf[(b->head + b->n) % b->cap];
    if (!slot->data) DT_CHECK(dt_buffer_alloc(slot, pp->cfg.be, bytes));
    DT_CHECK(pp->cfg.be->copy(pp->cfg.be, slot->data, x, bytes, DT_COPY_D2D));
    b->n++;
    return DT_OK;
}

dt_status dt__pipe_box_take(dt__pipe *pp, int c, int kind, float *out)
{
    dt__pipe_box *b = &pp->ch[c].box[kind];
    if (!b->n)
        return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: chunk %d receives from itself but nothing was sent",
                       pp->stage, c);
    const size_t bytes = pp->msg_n * sizeof(float);
    DT_CHECK(pp->cfg.be->copy(pp->cfg.be, out, b->buf[b->head].data, bytes, DT_COPY_D2D));
    b->head = (b->head + 1) % b->cap;
    b->n--;
    return DT_OK;
}

/* ---- executing instructions ------------------------------------------------ */

void dt__pipe_op_begin(dt__pipe *pp, int c) { dt__stage_reset_peak(pp->ch[c].st); }

void dt__pipe_op_end(dt__pipe *pp, int c)
{
    size_t now = dt__stage_peak_activation_bytes(pp->ch[c].st);
    for (int o = 0; o < pp->v; o++)
        if (o != c) now += dt__stage_activation_bytes(pp->ch[o].st);
    if (now > pp->peak) pp->peak = now;
}

/* The last virtual stage's per-target loss gradient of micro-batch mb. */
static dt_status dt__pipe_dloss(dt__pipe *pp, const dt_sched_instr *in, float *dloss)
{
    /* the micro-batch's counted targets nc, and (gpipe/1f1b) the global batch's n */
    if (!dt__pipe_async(pp)) DT_CHECK(dt__pipe_count_targets(pp, in->step));
    DT_CHECK(pp->cfg.batch(pp->cfg.ctx, 0, dt__pipe_index(pp, in->mb), pp->tokens, pp->targets, NULL, NULL));
    int nc = 0;
    for (int i = 0; i < pp->cfg.B * pp->cfg.T; i++) nc += pp->targets[i] >= 0;
    if (dt__pipe_async(pp)) {
        /* each micro-batch is its own update: the mean over its own targets, averaged
         * over the d pipelines by the data-parallel allreduce's sum */
        *dloss = nc ? 1.0f / ((float)nc * (float)pp->d) : 0.0f;
    } else {
        /* weight nc / n times the loss scale, then per target: the very floats
         * lib/train/model_gpt.c and lib/model/gpt.c compute for this micro-batch */
        const double wk = pp->n_total ? (double)nc / (double)pp->n_total : 0.0;
        const float scaled = (float)(wk * dt__pipe_scale(pp));
        *dloss = nc ? scaled / (float)nc : 0.0f;
    }
    return DT_OK;
}

static dt_status dt__pipe_forward(dt__pipe *pp, const dt_sched_instr *in, int c, int slot)
{
    dt__chunk *k = &pp->ch[c];
    if (k->slot_mb[slot] >= 0)
        return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: micro-batch %d needs slot %d of chunk %d, still held by %d",
                       pp->stage, in->mb, slot, c, k->slot_mb[slot]);
    DT_CHECK(dt__pipe_wait_send(pp, &k->act_send[slot]));
    const float *w = NULL;
    DT_CHECK(dt__pipe_weights(pp, c, in->version, &w));
    const int first = k->q == 0, last = k->q == pp->q_last;
    if (first || last)
        DT_CHECK(pp->cfg.batch(pp->cfg.ctx, 0, dt__pipe_index(pp, in->mb), pp->tokens, pp->targets, NULL, NULL));
    float loss = 0.0f;
    int nc = 0;
    dt__pipe_op_begin(pp, c);
    DT_CHECK(dt__stage_forward(k->st, slot, w, first ? pp->tokens : NULL, last ? pp->targets : NULL, NULL, &loss, &nc));
    dt__pipe_op_end(pp, c);
    k->slot_mb[slot] = in->mb;
    k->slot_version[slot] = in->version;
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

/* BACKWARD (whole), BACKWARD_B or BACKWARD_W of chunk c. */
static dt_status dt__pipe_backward(dt__pipe *pp, const dt_sched_instr *in, int c, int slot)
{
    dt__chunk *k = &pp->ch[c];
    if (k->slot_mb[slot] != in->mb)
        return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: %s of micro-batch %d, slot %d of chunk %d holds %d",
                       pp->stage, dt_sched_op_name(in->op), in->mb, slot, c, k->slot_mb[slot]);
    const float *w = NULL;
    DT_CHECK(dt__pipe_weights(pp, c, in->version, &w));
    dt_status bs;
    pp->cur = in;
    dt__pipe_op_begin(pp, c);
    if (in->op == DT_SCHED_BACKWARD_W) {
        bs = dt__stage_backward_w(k->st, slot, w);
    } else {
        if (k->q < pp->q_last && k->dout_mb != in->mb)
            return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: %s of micro-batch %d on chunk %d without its gradient",
                           pp->stage, dt_sched_op_name(in->op), in->mb, c);
        float dloss = 0.0f;
        if (k->q == pp->q_last) DT_CHECK(dt__pipe_dloss(pp, in, &dloss));
        bs = in->op == DT_SCHED_BACKWARD ? dt__stage_backward(k->st, slot, w, dloss, NULL)
                                         : dt__stage_backward_b(k->st, slot, w, dloss, NULL);
        k->dout_mb = -1;
        if (in->mb < pp->total_mb) pp->used[2 * in->mb + 1] = in->version;
    }
    dt__pipe_op_end(pp, c);
    pp->cur = NULL;
    DT_CHECK(bs);
    if (in->op != DT_SCHED_BACKWARD_B) k->slot_mb[slot] = -1;
    return DT_OK;
}

static dt_status dt__pipe_exec(dt__pipe *pp, const dt_sched_instr *in, int64_t t)
{
    const int c = in->chunk, local = in->peer == pp->stage;
    if (in->op != DT_SCHED_OPTIM_STEP && in->op != DT_SCHED_STASH && in->op != DT_SCHED_DROP && (c < 0 || c >= pp->v))
        return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: instruction on chunk %d of %d", pp->stage, c, pp->v);
    dt__chunk *k = c >= 0 && c < pp->v ? &pp->ch[c] : NULL;
    const int slot = k && in->mb >= 0 ? in->mb % k->slots : -1;
    switch (in->op) {
    case DT_SCHED_RECV_ACT: {
        float *x = dt__stage_input(k->st, slot);
        if (local) return dt__pipe_box_take(pp, c, DT__PIPE_ACT, x);
        return dt__pipe_recv(pp, x, in->peer, dt__pipe_tag(k->q, DT__PIPE_ACT));
    }
    case DT_SCHED_FORWARD: return dt__pipe_forward(pp, in, c, slot);
    case DT_SCHED_SEND_ACT: {
        const float *out = NULL;
        DT_CHECK(dt__stage_output(k->st, slot, &out));
        if (local) return dt__pipe_box_put(pp, dt__pipe_chunk_of(pp, k->q + 1), DT__PIPE_ACT, out);
        return dt__pipe_send(pp, out, k->act_wire ? &k->act_wire[slot] : NULL, in->peer,
                             dt__pipe_tag(k->q + 1, DT__PIPE_ACT), &k->act_send[slot]);
    }
    case DT_SCHED_RECV_GRAD: {
        if (k->dout_mb >= 0)
            return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: gradient of micro-batch %d received over %d's",
                           pp->stage, in->mb, k->dout_mb);
        k->dout_mb = in->mb;
        float *dout = dt__stage_dout(k->st);
        if (local) return dt__pipe_box_take(pp, c, DT__PIPE_GRAD, dout);
        return dt__pipe_recv(pp, dout, in->peer, dt__pipe_tag(k->q, DT__PIPE_GRAD));
    }
    case DT_SCHED_BACKWARD:
    case DT_SCHED_BACKWARD_B:
    case DT_SCHED_BACKWARD_W: return dt__pipe_backward(pp, in, c, slot);
    case DT_SCHED_SEND_GRAD: {
        const float *dx = dt__stage_dres(k->st);
        if (local) return dt__pipe_box_put(pp, dt__pipe_chunk_of(pp, k->q - 1), DT__PIPE_GRAD, dx);
        /* a copy travels (16-bit: the cast is the copy), so dres is free for the next backward */
        DT_CHECK(dt__pipe_wait_send(pp, &k->grad_send[slot]));
        dt_buffer *out = &k->grad_out[slot];
        if (pp->wire_elem == sizeof(float)) {
            DT_CHECK(pp->cfg.be->copy(pp->cfg.be, out->data, dx, out->bytes, DT_COPY_D2D));
            dx = out->data;
        }
        return dt__pipe_send(pp, dx, out, in->peer, dt__pipe_tag(k->q - 1, DT__PIPE_GRAD), &k->grad_send[slot]);
    }
    case DT_SCHED_OPTIM_STEP: {
        DT_CHECK(dt__pipe_optim(pp, in, t));
        dt__pipe_weights_changed(pp);
        return DT_OK;
    }
    case DT_SCHED_STASH: return dt__pipe_stash(pp, in->version);
    case DT_SCHED_DROP: return dt__pipe_drop(pp, in->version);
    }
    return DT_FAIL(DT_ERR_BACKEND, "pipeline stage %d: unknown instruction %d", pp->stage, (int)in->op);
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
    dt__pipe_weights_changed(pp); /* a checkpoint load or ZeRO's gather may have written them */
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
    const int holds_last = dt__pipe_chunk_of(pp, pp->q_last) >= 0, holds_first = dt__pipe_chunk_of(pp, 0) >= 0;
    if (dt__pipe_async(pp) && pp->p > 1) { /* no barrier: the loss arrives a step late */
        DT_CHECK(dt__pipe_report_loss(pp, t, &v[0], &loss_iter));
        v[1] = (float)pp->last_norm; /* this stage's (the same on its data-parallel replicas) */
    } else {                         /* the step's loss: the last stages' weighted sums, added over every rank */
        v[0] = holds_last && pp->tpi == 0 ? (float)pp->loss_sum : 0.0f;
        v[1] = holds_first && pp->tpi == 0 ? (float)pp->last_norm : 0.0f;
        DT_CHECK(dt_comm_allreduce(pp->cfg.world, v, 2, DT_ALLREDUCE_RING, NULL));
        v[1] /= (float)pp->d; /* the first stage's, from each pipeline */
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

const char *dt__pipe_tensor_name(const dt__pipe *pp, int index)
{
    const dt_paramset *w = dt__stage_whole_layout(pp->ch[0].st);
    /* one past the whole layout: the last virtual stage's copy of the tied wte */
    if (index == w->count && pp->tied) return "lm_head.w";
    return index >= 0 && index < w->count ? w->info[index].name : "";
}

/* ---- checkpoints ----------------------------------------------------------- */

const dt_paramset *dt__pipe_layout(const dt__pipe *pp) { return &pp->layout; }
float *dt__pipe_params(dt__pipe *pp) { return pp->params.data; }
float *dt__pipe_grads(dt__pipe *pp) { return pp->grads.data; }
const int *dt__pipe_whole_index(const dt__pipe *pp) { return pp->whole_index; }
dt__zero *dt__pipe_zero(dt__pipe *pp) { return pp->zs ? dt__zs_zero(pp->zs) : pp->zero; }
dt_optim *dt__pipe_optimizer(dt__pipe *pp)
{
    dt__zero *z = dt__pipe_zero(pp);
    return z ? dt__zero_optimizer(z) : &pp->opt;
}
struct dt__zs *dt__pipe_sharder(dt__pipe *pp) { return pp->zs; }

dt_status dt__pipe_restored(dt__pipe *pp)
{
    if (pp->zs) return dt__pipe_shard_refresh(pp);
    return pp->zero ? dt__zero_restored(pp->zero, pp->params.data) : DT_OK;
}
