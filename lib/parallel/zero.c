/* zero.c: ZeRO-1 (see zero.h and docs/zero.md).
 *
 * What z owns: the shard's layout (one 1-D entry per piece of a model
 * tensor inside this rank's segment, offsets relative to the segment
 * start), the piece -> layout tensor map, and the dt_optim whose state has
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
 * Units (stages 2 and 3, lib/parallel/zero_gpt.c): the flat buffer may be
 * cut into consecutive units (gradient buckets, layers), each sharded on
 * its own as dt_comm_segment(unit length, n, r), so that one unit's ring
 * reduce-scatter or all-gather moves exactly this rank's segment of it.
 * The shard is then the units' segments one after the other (shard_off),
 * and the pieces are cut from each segment in turn. Stage 1 is one unit,
 * the whole buffer.
 *
 * Invariants: pieces are in model order and cover, with the padding, the
 * units' segments exactly (one unit: [lo, lo + len)); z->shard.numel == len, so the optimizer
 * state is len floats per moment and the ranks' states add up to the
 * whole; every rank reaches the same skip decision because the overflow
 * flag is summed over the group before the scaler sees it. */
#include "zero.h"

#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"

struct dt__zero {
    dt_comm *dp;                 /* the data-parallel group (not owned) */
    dt_backend *be;              /* not owned */
    const dt_paramset *layout;   /* the whole model's (not owned) */
    size_t lo, len;              /* this rank's segment of the flat buffer (one unit); len: the shard's numel */
    int n_units;                 /* consecutive ranges of the flat buffer, each sharded over dp */
    size_t *unit_off, *unit_len; /* (n_units) */
    size_t *seg_lo, *seg_len;    /* (n_units) this rank's segment of each unit, from the unit's start */
    size_t *shard_off;           /* (n_units) where that segment starts in the shard */
    dt_paramset shard;           /* (pieces) the segment's own layout, offsets from lo */
    int *tensor;                 /* (pieces) layout index of each piece's tensor */
    int *model;                  /* (pieces) scratch: each piece's model index under a step's tensor_map */
    dt_optim opt;                /* state for the segment only */
    int opt_ready;
    /* mixed precision (dt__zero_keep_masters): the FP32 master weights of the
     * segment live here only; the model's buffer holds their 16-bit values */
    int has_master;   /* the shard's FP32 weights live here (master), not in the caller's buffer */
    dt_dtype masters; /* the compute precision of the weights rounded from master (DT_F32: copied) */
    dt_buffer master; /* (len) FP32 */
    dt_buffer half;   /* (len) in masters' dtype: rounding scratch */
};

void dt__zero_unit(const dt__zero *z, int u, size_t *seg_lo, size_t *seg_len, size_t *shard_off)
{
    *seg_lo = z->seg_lo[u];
    *seg_len = z->seg_len[u];
    *shard_off = z->shard_off[u];
}

int dt__zero_units(const dt__zero *z) { return z->n_units; }

size_t dt__zero_shard_index(const dt__zero *z, size_t i)
{
    for (int u = 0; u < z->n_units; u++)
        if (i < z->shard_off[u] + z->seg_len[u]) return z->unit_off[u] + z->seg_lo[u] + (i - z->shard_off[u]);
    return z->layout->numel; /* past the shard */
}

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
    free(z->model);
    free(z->unit_off);
    free(z->unit_len);
    free(z->seg_lo);
    free(z->seg_len);
    free(z->shard_off);
    free(z);
}

/* The pieces of layout's tensors inside each unit's segment, in order. */
static dt_status dt__zero_pieces(dt__zero *z)
{
    const dt_paramset *L = z->layout;
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
    z->model = calloc(cap, sizeof *z->model);
    if (!z->shard.info || !z->tensor || !z->model) return DT_FAIL(DT_ERR_NOMEM, "distributed optimizer: out of memory");
    z->shard.capacity = (int)cap;
    for (int u = 0; u < z->n_units; u++) {
        const size_t lo = z->unit_off[u] + z->seg_lo[u], hi = lo + z->seg_len[u];
        for (int i = 0; i < L->count; i++) {
            const dt_param_info *p = &L->info[i];
            const size_t a = DT_MAX(p->offset, lo), b = DT_MIN(p->offset + p->numel, hi);
            if (a >= b) continue;
            if (z->shard.count == z->shard.capacity) /* a unit boundary never cuts a tensor: at most one piece each */
                return DT_FAIL(DT_ERR_INVALID, "distributed optimizer: tensor %d (%s) is cut by a unit boundary", i,
                               p->name);
            dt_param_info *q = &z->shard.info[z->shard.count];
            memset(q, 0, sizeof *q);
            memcpy(q->name, p->name, sizeof q->name);
            q->ndim = 1;
            q->shape[0] = (int64_t)(b - a);
            q->offset = z->shard_off[u] + (a - lo);
            q->numel = b - a;
            q->decay = p->decay;
            z->tensor[z->shard.count++] = i;
        }
    }
    z->shard.numel = z->len; /* trailing padding included: the state covers the segment */
    return DT_OK;
}

dt_status dt__zero_create(dt_comm *dp, dt_backend *be, const dt_paramset *layout, const dt_optim_config *optim,
                          dt__zero **out)
{
    const size_t off = 0, len = layout ? layout->numel : 0;
    return dt__zero_create_units(dp, be, layout, optim, 1, &off, &len, out);
}

/* The group's sum of the pieces' sums of squares (dt_optim_set_group_norms). */
static dt_status dt__zero_sum_doubles(void *ctx, double *v, size_t n) { return dt_comm_sum_doubles(ctx, v, n); }

dt_status dt__zero_create_units(dt_comm *dp, dt_backend *be, const dt_paramset *layout, const dt_optim_config *optim,
                                int n_units, const size_t *unit_off, const size_t *unit_len, dt__zero **out)
{
    *out = NULL;
    if (!dp || !be || !layout || !optim)
        return DT_FAIL(DT_ERR_INVALID, "distributed optimizer: communicator, backend, layout and optimizer are "
                                       "required");
    dt__zero *z = calloc(1, sizeof *z);
    if (!z) return DT_FAIL(DT_ERR_NOMEM, "distributed optimizer: out of memory");
    z->dp = dp;
    z->be = be;
    z->layout = layout;
    dt_status st;
    const size_t nu = n_units > 0 ? (size_t)n_units : 1;
    z->unit_off = calloc(nu, sizeof *z->unit_off);
    z->unit_len = calloc(nu, sizeof *z->unit_len);
    z->seg_lo = calloc(nu, sizeof *z->seg_lo);
    z->seg_len = calloc(nu, sizeof *z->seg_len);
    z->shard_off = calloc(nu, sizeof *z->shard_off);
    if (!z->unit_off || !z->unit_len || !z->seg_lo || !z->seg_len || !z->shard_off) {
        st = DT_FAIL(DT_ERR_NOMEM, "distributed optimizer: out of memory");
        goto fail;
    }
    z->n_units = n_units;
    size_t end = 0;
    for (int u = 0; u < n_units; u++) { /* consecutive, covering [0, numel) */
        if (unit_off[u] != end || (u == n_units - 1 && unit_off[u] + unit_len[u] != layout->numel)) {
            st = DT_FAIL(DT_ERR_INVALID,
                         "distributed optimizer: unit %d at [%zu, %zu) does not continue the units before it "
                         "over the layout's %zu elements",
                         u, unit_off[u], unit_off[u] + unit_len[u], layout->numel);
            goto fail;
        }
        end = unit_off[u] + unit_len[u];
        z->unit_off[u] = unit_off[u];
        z->unit_len[u] = unit_len[u];
        dt_comm_segment(unit_len[u], dp->size, dp->rank, &z->seg_lo[u], &z->seg_len[u]);
        z->shard_off[u] = z->len;
        z->len += z->seg_len[u];
    }
    if (n_units < 1) {
        st = DT_FAIL(DT_ERR_INVALID, "distributed optimizer: %d units (expected >= 1)", n_units);
        goto fail;
    }
    z->lo = n_units == 1 ? z->seg_lo[0] : 0;
    DT_CHECK_GOTO(dt__zero_pieces(z), st, fail);
    DT_CHECK_GOTO(dt_optim_init(&z->opt, optim, be, &z->shard), st, fail);
    z->opt_ready = 1;
    /* LARS/LAMB: a trust ratio from the whole tensor's norms, its pieces' summed over the group */
    if (optim->kind == DT_OPTIM_LARS || optim->kind == DT_OPTIM_LAMB)
        DT_CHECK_GOTO(dt_optim_set_group_norms(&z->opt, z->tensor, layout->count ? layout->count : 1,
                                               dt__zero_sum_doubles, dp),
                      st, fail);
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

/* dst[0, n) = master[from, from + n) in the compute precision (rounded to
 * the 16-bit type, or copied when FP32), as FP32. */
static dt_status dt__zero_round_range(dt__zero *z, float *dst, size_t from, size_t n)
{
    if (!n) return DT_OK;
    const float *m = (const float *)z->master.data + from;
    if (z->masters == DT_F32) return z->be->copy(z->be, dst, m, n * sizeof(float), DT_COPY_D2D);
    void *h = (char *)z->half.data + from * dt_dtype_size(z->masters);
    DT_CHECK(z->be->cast(z->be, h, z->masters, m, DT_F32, n));
    return z->be->cast(z->be, dst, DT_F32, h, z->masters, n);
}

/* Stage 1: params[lo, lo+len) = the master shard rounded to the 16-bit type (as FP32). */
static dt_status dt__zero_round_into(dt__zero *z, float *params)
{
    return dt__zero_round_range(z, params + z->lo, 0, z->len);
}

static dt_status dt__zero_alloc_masters(dt__zero *z, dt_dtype dtype)
{
    z->masters = dtype;
    z->has_master = 1;
    DT_CHECK(dt_buffer_alloc(&z->master, z->be, (z->len ? z->len : 1) * sizeof(float)));
    if (dtype != DT_F32) DT_CHECK(dt_buffer_alloc(&z->half, z->be, (z->len ? z->len : 1) * dt_dtype_size(dtype)));
    return DT_OK;
}

dt_status dt__zero_keep_masters(dt__zero *z, float *params, dt_dtype dtype)
{
    if (dtype != DT_F16 && dtype != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "distributed optimizer: masters for dtype %s (expected f16 or bf16)",
                       dt_dtype_name(dtype));
    if (z->n_units != 1)
        return DT_FAIL(DT_ERR_INVALID, "distributed optimizer: keep_masters is stage 1's (one unit), not %d units",
                       z->n_units);
    DT_CHECK(dt__zero_alloc_masters(z, dtype));
    if (z->len) DT_CHECK(z->be->copy(z->be, z->master.data, params + z->lo, z->len * sizeof(float), DT_COPY_D2D));
    /* every rank rounds its segment, then all see every segment's rounded values */
    DT_CHECK(dt__zero_round_into(z, params));
    return dt_comm_all_gather(z->dp, params, z->layout->numel, NULL);
}

dt_status dt__zero_take_shard(dt__zero *z, const float *whole, dt_dtype compute)
{
    if (compute != DT_F32 && compute != DT_F16 && compute != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "distributed optimizer: compute precision %s (expected f32, f16 or bf16)",
                       dt_dtype_name(compute));
    DT_CHECK(dt__zero_alloc_masters(z, compute));
    for (int u = 0; u < z->n_units; u++)
        if (z->seg_len[u])
            DT_CHECK(z->be->copy(z->be, (float *)z->master.data + z->shard_off[u],
                                 whole + z->unit_off[u] + z->seg_lo[u], z->seg_len[u] * sizeof(float), DT_COPY_D2D));
    return DT_OK;
}

dt_status dt__zero_unit_weights(dt__zero *z, int u, float *unit_buf)
{
    if (!z->has_master) return DT_FAIL(DT_ERR_INVALID, "distributed optimizer: no shard of weights taken");
    return dt__zero_round_range(z, unit_buf + z->seg_lo[u], z->shard_off[u], z->seg_len[u]);
}

size_t dt__zero_master_bytes(const dt__zero *z) { return z->has_master ? z->len * sizeof(float) : 0; }

const float *dt__zero_master(const dt__zero *z) { return z->has_master ? z->master.data : NULL; }

dt_status dt__zero_update(dt__zero *z, float *params, float *grads, const dt__zero_step_args *a, dt__update_result *r)
{
    if (!a->lr) return DT_FAIL(DT_ERR_INVALID, "distributed optimizer step: no learning-rate schedule");
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
    /* piece -> layout tensor -> model tensor: a layout whose tensors are
     * not one run of the model's (a pipeline rank's chunks) maps each */
    const int *map = z->tensor;
    if (a->tensor_map) {
        for (int i = 0; i < z->shard.count; i++) z->model[i] = a->tensor_map[z->tensor[i]];
        map = z->model;
    }
    dt__update_args ua = {.be = z->be,
                          .layout = &z->shard,
                          .params = z->has_master ? (float *)z->master.data : params,
                          .grads = grads,
                          .opt = &z->opt,
                          .scaler = a->scaler,
                          .loss_scale = a->loss_scale,
                          .lr = a->lr,
                          .position = a->position,
                          .clip_grad = a->clip_grad,
                          .given_norm = -1.0,
                          .first_tensor = a->tensor_map ? 0 : a->first_tensor,
                          .tensor_map = map, /* piece -> model tensor */
                          .reduce = many && !group ? dt__zero_reduce : NULL,
                          .reduce_ctx = scalar,
                          .agree = a->agree,
                          .norm = a->norm,
                          .group_ctx = a->group_ctx,
                          .force_overflow = a->force_overflow};
    DT_CHECK(dt__update_apply(&ua, r));
    /* every rank skips together (the overflow flag was summed): only the
     * report of which tensor overflowed (agree has already made it the
     * whole model's) */
    if (r->skipped && many && !a->agree) DT_CHECK(dt__zero_first_bad(scalar, r->first_bad, &r->first_bad));
    return DT_OK;
}

dt_status dt__zero_step(dt__zero *z, float *params, float *grads, const dt__zero_step_args *a, dt__update_result *r)
{
    if (z->n_units != 1)
        return DT_FAIL(DT_ERR_INVALID, "distributed optimizer: dt__zero_step is stage 1's (one unit), not %d units",
                       z->n_units);
    const size_t numel = z->layout->numel;
    /* step 1: segment r of the gradient summed on rank r */
    DT_CHECK(dt_comm_reduce_scatter(z->dp, grads, numel, a->coll));
    /* step 2: the shard's update, under the whole gradient's norm and overflow */
    DT_CHECK(dt__zero_update(z, params + z->lo, grads + z->lo, a, r));
    if (r->skipped) return DT_OK; /* the weights are unchanged everywhere: nothing to gather */
    /* step 3: every rank's updated segment (rounded from the masters under
     * mixed precision) to every rank */
    if (z->has_master) DT_CHECK(dt__zero_round_into(z, params));
    return dt_comm_all_gather(z->dp, params, numel, a->coll);
}

/* ---- checkpoints ------------------------------------------------------------ */

dt_optim *dt__zero_optimizer(dt__zero *z) { return z->opt_ready ? &z->opt : NULL; }

float *dt__zero_master_data(dt__zero *z) { return z->has_master ? z->master.data : NULL; }

dt_status dt__zero_restored(dt__zero *z, float *params)
{
    if (z->n_units != 1) return DT_OK; /* stages 2 and 3 read their weights from the shard (zero_gpt.c) */
    if (z->has_master) DT_CHECK(dt__zero_round_into(z, params));
    return dt_comm_all_gather(z->dp, params, z->layout->numel, NULL);
}
