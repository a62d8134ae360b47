/* pipeline_optim.c: a pipeline rank's OPTIM_STEP (pipeline_impl.h): one
 * update of the rank's flat buffer, every chunk's parameters at once.
 *
 *   1. tied embeddings: wte's gradient (virtual stage 0) plus its copy's
 *      (the last virtual stage's LM head), summed over the two ranks that
 *      hold them, or on the rank itself when it holds both (zb-v's V puts
 *      both ends on device 0): both then hold the whole gradient, apply the
 *      same update and stay equal;
 *   2. the data-parallel allreduce of the flat gradient buffer;
 *   3. lib/optim/update.c with the squared norm summed over the chunks,
 *      the tensor ranks and the pipeline's devices (gpipe/1f1b and the
 *      issue-22 kinds; pipedream clips each stage by its own norm, since
 *      its stages update at different times); with ZeRO-1 (setup.zero)
 *      lib/parallel/zero.c instead: reduce-scatter, the segment's update,
 *      all-gather.
 * Invariant: after it the gradients are zero and every chunk's weights
 * are version in->version. */
#include <math.h>
#include <stdlib.h>

#include "dt_internal.h"
#include "dt_time.h"
#include "pipeline_impl.h"

/* A collective of OPTIM_STEP that began at t0 ended now: the update's span
 * starts here; an agreement of the ranks (name set) is traced with the
 * stage's own work before it. */
static void dt__pipe_synced(dt__pipe *pp, const char *name, int64_t t0)
{
    const int64_t now = dt_time_ns();
    if (name && pp->cfg.sync_event) pp->cfg.sync_event(pp->cfg.ctx, name, pp->opt_from, t0, now);
    pp->opt_from = now;
}

/* The squared norm of the whole model's gradients: each chunk's elements
 * in [lo, hi) of the flat buffer (ZeRO-1: the rank's segment), the shards'
 * summed over the tensor-parallel group, the replicated tensors' counted
 * once, the ZeRO-1 segments' summed over the data-parallel group, then the
 * devices' added (pipedream: this stage's alone). */
static dt_status dt__pipe_norm(void *ctx, double *norm)
{
    dt__pipe *pp = ctx;
    double sh = 0.0, rep = 0.0;
    size_t lo = 0, len = pp->layout.numel;
    if (pp->zero) dt__zero_shard(pp->zero, &lo, &len);
    if (pp->zs) DT_CHECK(dt__pipe_shard_sumsq(pp, &sh, &rep));
    for (int c = 0; c < pp->v && !pp->zs; c++) {
        const size_t o = pp->ch[c].offset, n = dt__stage_layout(pp->ch[c].st)->numel;
        const size_t a = DT_MAX(lo, o), b = DT_MIN(lo + len, o + n);
        double s1 = 0.0, r1 = 0.0;
        if (a < b) DT_CHECK(dt__stage_grad_sumsq(pp->ch[c].st, a - o, b - o, &s1, &r1));
        sh += s1, rep += r1;
    }
    float v = (float)sh;
    if (pp->t > 1) DT_CHECK(dt_comm_allreduce(pp->tpc, &v, 1, DT_ALLREDUCE_RING, NULL));
    v += (float)rep;
    if (pp->zero || pp->zs) DT_CHECK(dt_comm_allreduce(pp->data, &v, 1, DT_ALLREDUCE_RING, NULL));
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
 * is the highest whole-model index any rank found. A last stage whose
 * loss sum is inf/NaN reports an overflow (every gpipe/1f1b forward of the
 * step has run by its OPTIM_STEP). */
static dt_status dt__pipe_agree(void *ctx, int *overflow, int *first_bad)
{
    dt__pipe *pp = ctx;
    dt_comm *w = pp->cfg.world;
    float *v = calloc((size_t)w->size + 1, sizeof *v);
    if (!v) return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory");
    /* the last stage's loss of this step inf/NaN (fp16's forward left the
     * range): an overflow too, whatever the gradients hold */
    v[0] = *overflow || !isfinite(pp->loss_sum) ? 1.0f : 0.0f;
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

float dt__pipe_scale(const dt__pipe *pp) { return pp->cfg.scaler ? dt_loss_scaler_scale(pp->cfg.scaler) : 1.0f; }

/* After an update (or a skipped one) with loss scale S: zero the gradients, record it. */
static dt_status dt__pipe_updated(dt__pipe *pp, const dt_sched_instr *in, const dt__update_result *r, float S)
{
    if (pp->zs) DT_CHECK(dt__pipe_shard_zero_grad(pp));
    else DT_CHECK(pp->cfg.be->memset_zero(pp->cfg.be, pp->grads.data, pp->layout.numel * sizeof(float)));
    pp->version = in->version;
    pp->updates += !r->skipped && !r->nonfinite;
    pp->last_norm = r->norm;
    pp->last_lr = r->lr;
    pp->last = *r;
    pp->last_scale = S;
    return DT_OK;
}

/* Tied embeddings: wte's gradient and its copy's, summed. */
static dt_status dt__pipe_tied_sum(dt__pipe *pp, const dt_collective_opts *o)
{
    float *grads = pp->grads.data;
    const int c0 = dt__pipe_chunk_of(pp, 0), c1 = dt__pipe_chunk_of(pp, pp->q_last);
    size_t off, n;
    if (c0 >= 0 && c1 >= 0) { /* both on this rank: wte += copy, copy = wte (the same bits on both) */
        size_t off1, n1;
        dt__stage_tied_range(pp->ch[c0].st, &off, &n);
        dt__stage_tied_range(pp->ch[c1].st, &off1, &n1);
        float *g0 = grads + pp->ch[c0].offset + off, *g1 = grads + pp->ch[c1].offset + off1;
        DT_CHECK(pp->cfg.be->axpy(pp->cfg.be, g0, 1.0f, g1, n));
        return pp->cfg.be->copy(pp->cfg.be, g1, g0, n * sizeof(float), DT_COPY_D2D);
    }
    const int c = c0 >= 0 ? c0 : c1;
    dt__stage_tied_range(pp->ch[c].st, &off, &n);
    const int64_t t0 = pp->cfg.emb_event ? dt_time_ns() : 0;
    DT_CHECK(dt_comm_allreduce(pp->demb ? pp->demb : pp->emb, grads + pp->ch[c].offset + off, n, pp->cfg.allreduce, o));
    if (pp->cfg.emb_event) pp->cfg.emb_event(pp->cfg.ctx, t0, dt_time_ns(), n * sizeof(float));
    dt__pipe_synced(pp, NULL, 0);
    return DT_OK;
}

dt_status dt__pipe_optim(dt__pipe *pp, const dt_sched_instr *in, int64_t t)
{
    const dt_paramset *L = &pp->layout;
    float *grads = pp->grads.data;
    const dt_collective_opts o = {
        .chunk_bytes = pp->cfg.chunk_bytes, .hook = pp->cfg.coll_event, .hook_ctx = pp->cfg.ctx};
    const int ends = dt__pipe_chunk_of(pp, 0) >= 0 || dt__pipe_chunk_of(pp, pp->q_last) >= 0;
    if (pp->tied && ends && !pp->zs) DT_CHECK(dt__pipe_tied_sum(pp, &o)); /* ZeRO-2/3: in dt__pipe_shard_update */
    if (pp->d > 1 && !pp->zero && !pp->zs) {
        DT_CHECK(dt_comm_allreduce(dt__pipe_dev_data(pp), grads, L->numel, pp->cfg.allreduce, &o));
        dt__pipe_synced(pp, NULL, 0);
    }
    const int async = dt__pipe_async(pp);
    /* pipedream: one update per micro-batch, m per step, for the schedule's position */
    const int64_t position = async ? (int64_t)(in->version - 1) / pp->cfg.m : t;
    const float S = dt__pipe_scale(pp);
    dt__update_result r;
    if (pp->zero || pp->zs) { /* ZeRO-1: reduce-scatter, the segment's update under the whole model's norm,
                                * all-gather; ZeRO-2/3: the shard's update (reduce-scattered already) */
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
                                       /* each tensor's model index: the chunks are not one run of the
                                        * model's tensors, and the tied copy is named past them */
                                       .tensor_map = pp->tensor_map};
        if (pp->zs) DT_CHECK(dt__pipe_shard_update(pp, &za, &r));
        else DT_CHECK(dt__zero_step(pp->zero, pp->params.data, grads, &za, &r));
        return dt__pipe_updated(pp, in, &r, S);
    }
    dt__update_args ua = {.be = pp->cfg.be,
                          .layout = L,
                          .params = pp->params.data,
                          .grads = grads,
                          .opt = &pp->opt,
                          .scaler = pp->cfg.scaler,
                          .loss_scale = S,
                          .lr = &pp->cfg.lr,
                          .position = position,
                          .clip_grad = pp->cfg.clip_grad,
                          .given_norm = -1.0,
                          .first_tensor = 0,
                          .tensor_map = pp->tensor_map,
                          .reduce = NULL,
                          .agree = pp->cfg.scaler ? dt__pipe_agree : NULL,
                          .norm = (!async && pp->p > 1) || pp->t > 1 || pp->v > 1 ? dt__pipe_norm : NULL,
                          .group_ctx = pp,
                          .allow_nonfinite = pp->cfg.nonfinite && !async};
    DT_CHECK(dt__update_apply(&ua, &r));
    /* the norm is the whole model's, the same on every rank: all skip the
     * update, and the caller looks for the first bad layer while the
     * gradients are still there */
    if (r.nonfinite) DT_CHECK(pp->cfg.nonfinite(pp->cfg.ctx, t));
    return dt__pipe_updated(pp, in, &r, S);
}
