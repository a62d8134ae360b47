/* update.c: one optimizer update (see update.h): loss-scale check, norm,
 * clip, learning rate, optimizer step; when asked (a traced fp16 run), each
 * tensor's unscaled gradient amax, read without changing anything. */
#include "update.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* max |x(n)| of a gradient on the backend (host floats on the CPU; a copy
 * to the host otherwise). Only traced runs call it: it costs a read of the
 * gradients, or a device-to-host copy, per step. */
static dt_status dt__update_amax(dt_backend *be, const float *x, size_t n, float *out)
{
    const float *h = x;
    float *copy = NULL;
    if (be->device != DT_DEVICE_CPU && n) {
        copy = malloc(n * sizeof *copy);
        if (!copy) return DT_FAIL(DT_ERR_NOMEM, "grad_amax: out of memory for %zu floats", n);
        dt_status st = be->copy(be, copy, x, n * sizeof *copy, DT_COPY_D2H);
        if (st != DT_OK) {
            free(copy);
            return st;
        }
        h = copy;
    }
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(h[i]));
    free(copy);
    *out = m;
    return DT_OK;
}

dt_status dt__update_apply(const dt__update_args *a, dt__update_result *r)
{
    memset(r, 0, sizeof *r);
    r->first_bad = -1;
    r->clip = 1.0f;
    const dt_paramset *layout = a->layout;
    int overflow = 0, first_bad = -1;
    if (a->scaler) {
        /* backward order, so the first tensor found is the first that overflowed */
        for (int i = layout->count - 1; i >= 0; i--) {
            int nf = 0;
            DT_CHECK(a->be->unscale_check(a->be, a->grads + layout->info[i].offset, 1.0f / a->loss_scale,
                                          layout->info[i].numel, &nf));
            if (nf && first_bad < 0) first_bad = i;
            overflow |= nf;
            if (a->amax) {
                if (nf) a->amax[i] = -1.0f;
                else
                    DT_CHECK(
                        dt__update_amax(a->be, a->grads + layout->info[i].offset, layout->info[i].numel, &a->amax[i]));
            }
        }
    }
    int first_whole = first_bad < 0 ? -1 : a->first_tensor + (a->tensor_map ? a->tensor_map[first_bad] : first_bad);
    if (a->scaler && a->agree) DT_CHECK(a->agree(a->group_ctx, &overflow, &first_whole));
    double norm = a->given_norm;
    if (a->norm && !overflow) DT_CHECK(a->norm(a->group_ctx, &norm));
    else if (norm < 0 && !overflow) DT_CHECK(dt_grad_norm(a->be, layout, a->grads, &norm));
    if (a->reduce) { /* over the shards: any overflow skips everywhere; norms add in squares */
        float v[2] = {(float)overflow, a->given_norm < 0 && !overflow ? (float)(norm * norm) : 0.0f};
        DT_CHECK(a->reduce(a->reduce_ctx, v, 2));
        overflow = v[0] > 0;
        if (a->given_norm < 0) norm = sqrt((double)v[1]);
    }
    int skip = 0;
    if (a->scaler) skip = dt_loss_scaler_update(a->scaler, overflow, &r->ev);
    r->skipped = skip;
    r->first_bad = first_whole;
    /* the schedule advances with the updates applied (as Megatron-LM's) */
    const int64_t applied = a->position - (a->scaler ? a->scaler->skipped - skip : 0);
    r->lr = dt_lr_at(a->lr, applied);
    if (skip) return DT_OK;
    r->norm = norm;
    if (!isfinite(r->norm) && a->allow_nonfinite) {
        r->nonfinite = 1;
        return DT_OK;
    }
    if (!isfinite(r->norm))
        return DT_FAIL(DT_ERR_NUMERIC,
                       "iteration %lld: gradient norm is %g (diverged; try a lower --lr or --clip-grad)",
                       (long long)a->position + 1, r->norm);
    r->clip = dt_clip_factor(r->norm, a->clip_grad);
    return dt_optim_step(a->opt, a->params, a->grads, r->lr, r->clip);
}
