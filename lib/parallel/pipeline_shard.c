/* pipeline_shard.c: ZeRO stages 2 and 3 of a pipeline rank
 * (pipeline_impl.h, docs/zero.md): each stage (tensor shard) is sharded
 * over its data-parallel group, as FSDP with pipeline and tensor
 * parallelism shards each model chunk over its data group.
 *
 * The rank's flat buffer (its chunks' layouts, one after the other) is cut
 * into the chunks' layers, and lib/parallel/zero_shard.c shards them:
 * stage 2 in units of --bucket-size-mb (never across two chunks), stage 3
 * a layer a unit. The chunks' stages call the sharder from their runner's
 * hooks (dt__stage_set_sharder): every micro-batch's gradients are
 * reduce-scattered unit by unit into the shard, and at stage 3 every
 * layer's weights are gathered before it computes. OPTIM_STEP updates the
 * shard (dt__pipe_shard_update) and, at stage 2, all-gathers the whole
 * weights again.
 *
 * Tied embeddings over more than one stage: wte on the first stage and
 * its copy on the last take their gradients in different units of
 * different groups, so the sharder keeps that range apart (dt__zs_keep):
 * each micro-batch's part is added whole into gtied, which OPTIM_STEP sums
 * over the two ends and then over the data group before this rank adds
 * its segments' part into its shard. Both ends then update with the same
 * sum and stay equal. This costs a whole (V, C) gradient on the two end
 * ranks, and an allreduce instead of a reduce-scatter for that matrix.
 *
 * Invariants: the shard's gradients are the sum over the data group and
 * the step's micro-batches; every micro-batch adds (the shard is zeroed at
 * each step's start, dt__pipe_shard_zero_grad); params hold the whole
 * weights at stage 2 after every update and restore. */
#include <stdlib.h>

#include "dt_internal.h"
#include "dt_time.h"
#include "pipeline_impl.h"
#include "zero_shard.h"

dt_status dt__pipe_shard_zero_grad(dt__pipe *pp)
{
    DT_CHECK(dt__zs_zero_grad(pp->zs));
    dt__zs_accumulated(pp->zs); /* the chunks' micro-batches all add into the zeroed shard */
    if (pp->gtied.data) DT_CHECK(pp->cfg.be->memset_zero(pp->cfg.be, pp->gtied.data, pp->gtied.bytes));
    return DT_OK;
}

dt_status dt__pipe_shard_refresh(dt__pipe *pp)
{
    dt__zs_forget(pp->zs);
    if (dt__zs_stage(pp->zs) == 2)
        for (int u = 0; u < dt__zs_units(pp->zs); u++) {
            size_t off, n;
            dt__zs_unit_range(pp->zs, u, &off, &n);
            DT_CHECK(dt__zs_gather_unit(pp->zs, u, (float *)pp->params.data + off, 1));
        }
    return DT_OK; /* the stages round them again: dt__pipe_step and OPTIM_STEP say they changed */
}

dt_status dt__pipe_shard_create(dt__pipe *pp)
{
    const dt__pipe_setup *s = &pp->cfg;
    int n = 0;
    for (int c = 0; c < pp->v; c++) n += dt__stage_layer_count(pp->ch[c].st);
    pp->zs_off = calloc((size_t)n, sizeof *pp->zs_off);
    pp->zs_len = calloc((size_t)n, sizeof *pp->zs_len);
    pp->zs_group = calloc((size_t)n, sizeof *pp->zs_group);
    if (!pp->zs_off || !pp->zs_len || !pp->zs_group) return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory");
    int i = 0;
    for (int c = 0; c < pp->v; c++) {
        const int k1 = dt__stage_layer_count(pp->ch[c].st);
        const size_t end = c + 1 < pp->v ? pp->ch[c + 1].offset : pp->layout.numel;
        for (int k = 0; k < k1; k++, i++) {
            dt__stage_layer_range(pp->ch[c].st, k, &pp->zs_off[i], &pp->zs_len[i]);
            pp->zs_off[i] += pp->ch[c].offset;
            if (k == k1 - 1) pp->zs_len[i] = end - pp->zs_off[i]; /* the alignment before the next chunk */
            pp->zs_group[i] = c;
        }
    }
    const dt__zs_config zc = {.stage = s->zero_stage,
                              .bucket_bytes = s->bucket_bytes,
                              .prefetch = 0,
                              .precision = s->precision,
                              .optim = &s->optim,
                              .layout = &pp->layout,
                              .n_ranges = n,
                              .range_off = pp->zs_off,
                              .range_len = pp->zs_len,
                              .range_group = pp->zs_group};
    DT_CHECK(dt__zs_create(&zc, dt__pipe_dev_data(pp), s->be, &pp->zs));
    DT_CHECK(dt__zs_take_shard(pp->zs, pp->params.data));
    i = 0;
    for (int c = 0; c < pp->v; c++) {
        DT_CHECK(dt__stage_set_sharder(pp->ch[c].st, pp->zs, i, pp->ch[c].offset));
        i += dt__stage_layer_count(pp->ch[c].st);
    }
    dt_buffer_free(&pp->grads);
    pp->gtied_chunk = -1;
    if (pp->tied) {
        const int c0 = dt__pipe_chunk_of(pp, 0), c1 = dt__pipe_chunk_of(pp, pp->q_last);
        if (c0 >= 0 && c1 >= 0)
            return DT_FAIL(DT_ERR_UNSUPPORTED, "--zero-stage %d with tied embeddings: both ends of the pipeline on "
                                               "one device (this schedule) are not sharded yet; untie them or use "
                                               "another schedule",
                           s->zero_stage);
        const int c = c0 >= 0 ? c0 : c1;
        if (c >= 0) {
            size_t off, len;
            dt__stage_tied_range(pp->ch[c].st, &off, &len);
            DT_CHECK(dt_buffer_alloc(&pp->gtied, s->be, len * sizeof(float)));
            dt__zs_keep(pp->zs, pp->ch[c].offset + off, len, pp->gtied.data);
            pp->gtied_chunk = c;
        }
    }
    if (s->zero_stage == 3) dt_buffer_free(&pp->params);
    else DT_CHECK(dt__pipe_shard_refresh(pp)); /* the weights as the stages compute with them */
    dt__zs_traffic_reset(pp->zs);
    return dt__pipe_shard_zero_grad(pp);
}

void dt__pipe_shard_free(dt__pipe *pp)
{
    dt__zs_free(pp->zs); /* before the layout: it points at it */
    pp->zs = NULL;
    dt_buffer_free(&pp->gtied);
    free(pp->zs_off);
    free(pp->zs_len);
    free(pp->zs_group);
}

typedef struct dt__pipe_sq {
    dt__pipe *pp;
    double sharded, replicated;
} dt__pipe_sq;

/* One segment of the shard: its part in each chunk. */
static dt_status dt__pipe_shard_segment(void *ctx, const float *g, size_t a, size_t b)
{
    dt__pipe_sq *q = ctx;
    dt__pipe *pp = q->pp;
    for (int c = 0; c < pp->v; c++) {
        const size_t o = pp->ch[c].offset, n = dt__stage_layout(pp->ch[c].st)->numel;
        const size_t x = DT_MAX(a, o), y = DT_MIN(b, o + n);
        if (x >= y) continue;
        double s1 = 0.0, r1 = 0.0;
        DT_CHECK(dt__stage_grad_sumsq_of(pp->ch[c].st, g + (x - a), x - o, y - o, &s1, &r1));
        q->sharded += s1, q->replicated += r1;
    }
    return DT_OK;
}

dt_status dt__pipe_shard_sumsq(dt__pipe *pp, double *sharded, double *replicated)
{
    dt__pipe_sq q = {.pp = pp};
    DT_CHECK(dt__zs_each_segment(pp->zs, dt__pipe_shard_segment, &q));
    *sharded = q.sharded, *replicated = q.replicated;
    return DT_OK;
}

dt_status dt__pipe_shard_update(dt__pipe *pp, const dt__zero_step_args *za, dt__update_result *r)
{
    if (pp->gtied.data) { /* the tied matrix: both ends' sums, then the data group's, into the shard */
        const size_t n = pp->gtied.bytes / sizeof(float);
        size_t off, len;
        dt__stage_tied_range(pp->ch[pp->gtied_chunk].st, &off, &len);
        const int64_t t0 = pp->cfg.emb_event ? dt_time_ns() : 0;
        DT_CHECK(dt_comm_allreduce(pp->demb ? pp->demb : pp->emb, pp->gtied.data, n, pp->cfg.allreduce, za->coll));
        if (pp->cfg.emb_event) pp->cfg.emb_event(pp->cfg.ctx, t0, dt_time_ns(), n * sizeof(float));
        if (pp->d > 1) DT_CHECK(dt_comm_allreduce(dt__pipe_dev_data(pp), pp->gtied.data, n, pp->cfg.allreduce, za->coll));
        DT_CHECK(dt__zs_add_whole(pp->zs, pp->ch[pp->gtied_chunk].offset + off, len, pp->gtied.data));
    }
    DT_CHECK(dt__zs_update(pp->zs, za, r));
    if (r->skipped) return DT_OK;
    return dt__pipe_shard_refresh(pp);
}

void dt__pipe_state_bytes(const dt__pipe *pp, size_t *weights, size_t *gradients, size_t *optimizer, size_t *working)
{
    const dt__zero *z = pp->zs ? dt__zs_zero(pp->zs) : pp->zero;
    const int mixed = pp->cfg.precision != DT_F32;
    /* the flat buffer holds the FP32 masters unless a ZeRO optimizer keeps them */
    const int params_are_masters = mixed && !z;
    *weights = params_are_masters ? 0 : pp->params.bytes;
    *gradients = pp->grads.bytes + (pp->zs ? dt__zs_grad_bytes(pp->zs) : 0);
    *optimizer = z ? dt__zero_master_bytes(z) + dt__zero_state_bytes(z)
                   : (params_are_masters ? pp->params.bytes : 0) + (pp->opt_ready ? dt_optim_state_bytes(&pp->opt) : 0);
    *working = (pp->zs ? dt__zs_working_bytes(pp->zs) : 0) + pp->gtied.bytes;
    for (int c = 0; c < pp->v; c++) {
        size_t w, g, k;
        dt__stage_bytes(pp->ch[c].st, &w, &g, &k);
        *weights += w, *gradients += g, *working += k;
    }
}
