/* zero.c: ZeRO-1 (see zero.h and docs/zero.md).
 *
 * What z owns: the shard's layout (one 1-D entry per piece of a model
 * tensor inside this rank's segment, offsets relative to the segment
 * start), the piece -> model tensor map, and the dt_optim whose state has
 * the segment's len elements. The parameters and gradients stay the
 * caller's.
 *
 * Why 1-D pieces work with dt_optim: SGD and AdamW read only offset, numel
 * and decay of each entry (runs of entries alike in decay become one
 * backend call over [first offset, last end), gaps included; the update is
 * elementwise, so an element's arithmetic does not depend on how its
 * tensor is cut). The gaps are the layout's alignment padding that falls in
 * the segment, updated exactly as the whole-layout optimizer updates the
 * padding inside its own runs. Shapes are never read (dt_paramset_add's
 * 16-element alignment would move the pieces, so the entries are written
 * here directly).
 *
 * Invariants: pieces are in model order and cover, with the padding, the
 * segment [lo, lo + len) exactly; z->shard.numel == len, so the optimizer
 * state is len floats per moment and the ranks' states add up to the
 * whole; every rank reaches the same skip decision because the overflow
 * flag is summed over the group before the scaler sees it. */
#include "zero.h"

#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"

struct dt__zero {
    dt_comm *dp;               /* the data-parallel group (not owned) */
    dt_backend *be;            /* not owned */
    const dt_paramset *layout; /* the whole model's (not owned) */
    size_t lo, len;            /* this rank's segment of the flat buffer */
    dt_paramset shard;         /* (pieces) the segment's own layout, offsets from lo */
    int *tensor;               /* (pieces) model index of each piece's tensor */
    dt_optim opt;              /* state for the segment only */
    int opt_ready;
    /* mixed precision (dt__zero_keep_masters): the FP32 master weights of the
     * segment live here only; the model's buffer holds their 16-bit values */
    dt_dtype masters; /* DT_F32: none (the model's buffer is the masters) */
    dt_buffer master; /* (len) FP32 */
    dt_buffer half;   /* (len) in masters' dtype: rounding scratch */
};

size_t dt__zero_state_bytes(const dt__zero *z) { return z->opt_ready ? dt_optim_state_bytes(&z->opt) : 0; }

void dt__zero_shard(const dt__zero *z, size_t *lo, size_t *len)
{
    *lo = z->lo;
    *len = z->len;
}

const dt_paramset *dt__zero_layout(const dt__zero *z) { return &z->shard; }

void dt__zero_free(dt__zero *z)
{
    if (!z) return;
    if (z->opt_ready) dt_optim_free(&z->opt);
    dt_buffer_free(&z->master);
    dt_buffer_free(&z->half);
    dt_paramset_free(&z->shard);
    free(z->tensor);
    free(z);
}

/* The pieces of layout's tensors inside [z->lo, z->lo + z->len). */
static dt_status dt__zero_pieces(dt__zero *z)
{
    const dt_paramset *L = z->layout;
    const size_t lo = z->lo, hi = z->lo + z->len;
    size_t prev_end = 0;
    for (int i = 0; i < L->count; i++) { /* dt_optim relies on the order; so do the segments */
        const dt_param_info *p = &L->info[i];
        if (p->offset < prev_end || p->offset + p->numel > L->numel)
            return DT_FAIL(DT_ERR_INVALID,
                           "distributed optimizer: tensor %d (%s) at [%zu, %zu) overlaps the one "
                           "before or lies past the layout's %zu elements",
                           i, p->name, p->offset, p->offset + p->numel, L->numel);
        prev_end = p->offset + p->numel;
    }
    const size_t cap = L->count > 0 ? (size_t)L->count : 1;
    z->shard.info = calloc(cap, sizeof *z->shard.info);
    z->tensor = calloc(cap, sizeof *z->tensor);
    if (!z->shard.info || !z->tensor) return DT_FAIL(DT_ERR_NOMEM, "distributed optimizer: out of memory");
    z->shard.capacity = (int)cap;
    for (int i = 0; i < L->count; i++) {
        const dt_param_info *p = &L->info[i];
        const size_t a = DT_MAX(p->offset, lo), b = DT_MIN(p->offset + p->numel, hi);
        if (a >= b) continue;
        dt_param_info *q = &z->shard.info[z->shard.count];
        memset(q, 0, sizeof *q);
        memcpy(q->name, p->name, sizeof q->name);
        q->ndim = 1;
        q->shape[0] = (int64_t)(b - a);
        q->offset = a - lo;
        q->numel = b - a;
        q->decay = p->decay;
        z->tensor[z->shard.count++] = i;
    }
    z->shard.numel = z->len; /* trailing padding included: the state covers the segment */
    return DT_OK;
}

dt_status dt__zero_create(dt_comm *dp, dt_backend *be, const dt_paramset *layout, const dt_optim_config *optim,
                          dt__zero **out)
{
    *out = NULL;
    if (!dp || !be || !layout || !optim)
        return DT_FAIL(DT_ERR_INVALID, "distributed optimizer: communicator, backend, layout and optimizer are "
                                       "required");
    if (optim->kind == DT_OPTIM_LARS || optim->kind == DT_OPTIM_LAMB)
        return DT_FAIL(DT_ERR_INVALID,
                       "--use-distributed-optimizer: --optimizer %s needs whole-tensor norms, which "
                       "the sharded optimizer splits across ranks (use --optimizer sgd or adamw)",
                       dt_optim_kind_name(optim->kind));
    dt__zero *z = calloc(1, sizeof *z);
    if (!z) return DT_FAIL(DT_ERR_NOMEM, "distributed optimizer: out of memory");
    z->dp = dp;
    z->be = be;
    z->layout = layout;
    dt_comm_segment(layout->numel, dp->size, dp->rank, &z->lo, &z->len);
    dt_status st;
    DT_CHECK_GOTO(dt__zero_pieces(z), st, fail);
    DT_CHECK_GOTO(dt_optim_init(&z->opt, optim, be, &z->shard), st, fail);
    z->opt_ready = 1;
    *out = z;
    return DT_OK;
fail:
    dt__zero_free(z);
    return st;
}

static dt_status dt__zero_reduce(void *ctx, float *v, int n)
{
    return dt_comm_allreduce(ctx, v, (size_t)n, DT_ALLREDUCE_RING, NULL);
}

/* The model index of the first overflowing tensor (backward order: the
 * highest index) over every rank's shard, from each rank's own (-1: none).
 * One float per rank, summed: slot k holds rank k's answer alone. */
static dt_status dt__zero_first_bad(dt_comm *c, int mine, int *out)
{
    float *f = calloc((size_t)c->size, sizeof *f);
    if (!f) return DT_FAIL(DT_ERR_NOMEM, "distributed optimizer: out of memory");
    f[c->rank] = (float)(mine + 1);
    dt_status st = dt_comm_allreduce(c, f, (size_t)c->size, DT_ALLREDUCE_RING, NULL);
    int best = -1;
    for (int k = 0; st == DT_OK && k < c->size; k++) best = DT_MAX(best, (int)f[k] - 1);
    free(f);
    *out = best;
    return st;
}

/* params[lo, lo+len) = the master shard rounded to the 16-bit type (as FP32). */
static dt_status dt__zero_round_into(dt__zero *z, float *params)
{
    if (!z->len) return DT_OK;
    DT_CHECK(z->be->cast(z->be, z->half.data, z->masters, z->master.data, DT_F32, z->len));
    return z->be->cast(z->be, params + z->lo, DT_F32, z->half.data, z->masters, z->len);
}

dt_status dt__zero_keep_masters(dt__zero *z, float *params, dt_dtype dtype)
{
    if (dtype != DT_F16 && dtype != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "distributed optimizer: masters for dtype %s (expected f16 or bf16)",
                       dt_dtype_name(dtype));
    z->masters = dtype;
    DT_CHECK(dt_buffer_alloc(&z->master, z->be, (z->len ? z->len : 1) * sizeof(float)));
    DT_CHECK(dt_buffer_alloc(&z->half, z->be, (z->len ? z->len : 1) * dt_dtype_size(dtype)));
    if (z->len) DT_CHECK(z->be->copy(z->be, z->master.data, params + z->lo, z->len * sizeof(float), DT_COPY_D2D));
    /* every rank rounds its segment, then all see every segment's rounded values */
    DT_CHECK(dt__zero_round_into(z, params));
    return dt_comm_all_gather(z->dp, params, z->layout->numel, NULL);
}

size_t dt__zero_master_bytes(const dt__zero *z) { return z->masters != DT_F32 ? z->len * sizeof(float) : 0; }

const float *dt__zero_master(const dt__zero *z) { return z->masters != DT_F32 ? z->master.data : NULL; }

dt_status dt__zero_step(dt__zero *z, float *params, float *grads, const dt__zero_step_args *a, dt__update_result *r)
{
    if (!a->lr) return DT_FAIL(DT_ERR_INVALID, "distributed optimizer step: no learning-rate schedule");
    const size_t numel = z->layout->numel;
    dt_comm *scalar = a->scalar_comm ? a->scalar_comm : z->dp;
    if (scalar->size != z->dp->size || scalar->rank != z->dp->rank)
        return DT_FAIL(DT_ERR_INVALID,
                       "distributed optimizer step: the scalar communicator (rank %d of %d) is not "
                       "the data-parallel group (rank %d of %d)",
                       scalar->rank, scalar->size, z->dp->rank, z->dp->size);
    const int many = z->dp->size > 1, group = a->agree || a->norm;
    if (group && !a->norm)
        return DT_FAIL(DT_ERR_INVALID, "distributed optimizer step: agree without norm (the shard's norm alone "
                                       "is not the model's)");
    /* step 1: segment r of the gradient summed on rank r */
    DT_CHECK(dt_comm_reduce_scatter(z->dp, grads, numel, a->coll));
    /* step 2: the shard's update, under the whole gradient's norm and overflow */
    dt__update_args ua = {.be = z->be,
                          .layout = &z->shard,
                          .params = z->masters != DT_F32 ? (float *)z->master.data : params + z->lo,
                          .grads = grads + z->lo,
                          .opt = &z->opt,
                          .scaler = a->scaler,
                          .loss_scale = a->loss_scale,
                          .lr = a->lr,
                          .position = a->position,
                          .clip_grad = a->clip_grad,
                          .given_norm = -1.0,
                          .first_tensor = a->first_tensor,
                          .tensor_map = z->tensor, /* piece -> model tensor */
                          .reduce = many && !group ? dt__zero_reduce : NULL,
                          .reduce_ctx = scalar,
                          .agree = a->agree,
                          .norm = a->norm,
                          .group_ctx = a->group_ctx};
    DT_CHECK(dt__update_apply(&ua, r));
    /* every rank skips together (the overflow flag was summed): no new
     * weights to gather, only the report of which tensor overflowed (agree
     * has already made it the whole model's) */
    if (r->skipped) {
        if (many && !a->agree) DT_CHECK(dt__zero_first_bad(scalar, r->first_bad, &r->first_bad));
        return DT_OK;
    }
    /* step 3: every rank's updated segment (rounded from the masters under
     * mixed precision) to every rank */
    if (z->masters != DT_F32) DT_CHECK(dt__zero_round_into(z, params));
    return dt_comm_all_gather(z->dp, params, numel, a->coll);
}

/* ---- checkpoints ------------------------------------------------------------ */

dt_optim *dt__zero_optimizer(dt__zero *z) { return z->opt_ready ? &z->opt : NULL; }

float *dt__zero_master_data(dt__zero *z) { return z->masters != DT_F32 ? z->master.data : NULL; }

dt_status dt__zero_restored(dt__zero *z, float *params)
{
    if (z->masters != DT_F32) DT_CHECK(dt__zero_round_into(z, params));
    return dt_comm_all_gather(z->dp, params, z->layout->numel, NULL);
}
