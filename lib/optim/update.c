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

dt_status dt__layout_spans(const dt_paramset *layout, dt_span **out)
{
    *out = NULL;
    dt_span *sp = malloc((size_t)(layout->count ? layout->count : 1) * sizeof *sp);
    if (!sp) return DT_FAIL(DT_ERR_NOMEM, "update: out of memory for %d tensor spans", layout->count);
    for (int i = 0; i < layout->count; i++) sp[i] = (dt_span){layout->info[i].offset, layout->info[i].numel};
    *out = sp;
    return DT_OK;
}

/* Unscale every tensor, with one span_stats call: nf[i] its overflow flag,
 * and sq[i] its sum of squares when sq is not NULL. */
static dt_status dt__update_unscale(const dt__update_args *a, int *nf, double *sq)
{
    dt_span *spans;
    DT_CHECK(dt__layout_spans(a->layout, &spans));
    dt_status st = a->be->span_stats(a->be, a->grads, spans, a->layout->count, 1.0f / a->loss_scale, nf, sq);
    free(spans);
    return st;
}

dt_status dt__update_apply(const dt__update_args *a, dt__update_result *r)
{
    memset(r, 0, sizeof *r);
    r->first_bad = -1;
    r->clip = 1.0f;
    const dt_paramset *layout = a->layout;
    int overflow = 0, first_bad = -1;
    /* the norm is the layout's own: its squares come from the unscaling's pass */
    const int own_norm = !a->norm && a->given_norm < 0;
    double own_sq = -1.0; /* >= 0: sum of the squares, from that pass */
    if (a->scaler) {
        const size_t n = (size_t)(layout->count ? layout->count : 1);
        int *nf = calloc(n, sizeof *nf);
        double *sq = own_norm ? calloc(n, sizeof *sq) : NULL;
        dt_status st = nf && (sq || !own_norm) ? dt__update_unscale(a, nf, sq)
                                               : DT_FAIL(DT_ERR_NOMEM, "update: out of memory for %d flags", layout->count);
        /* backward order, so the first tensor found is the first that overflowed */
        for (int i = layout->count - 1; st == DT_OK && i >= 0; i--) {
            if (nf[i] && first_bad < 0) first_bad = i;
            overflow |= nf[i];
            if (a->amax) {
                if (nf[i]) a->amax[i] = -1.0f;
                else st = dt__update_amax(a->be, a->grads + layout->info[i].offset, layout->info[i].numel, &a->amax[i]);
            }
        }
        if (st == DT_OK && sq) { /* in tensor order, as dt_grad_norm adds them */
            own_sq = 0.0;
            for (int i = 0; i < layout->count; i++) own_sq += sq[i];
        }
        free(nf);
        free(sq);
        DT_CHECK(st);
    }
    if (a->scaler && a->force_overflow) overflow = 1; /* the loss itself was inf/NaN */
    int first_whole = first_bad < 0 ? -1 : a->first_tensor + (a->tensor_map ? a->tensor_map[first_bad] : first_bad);
    if (a->scaler && a->agree) DT_CHECK(a->agree(a->group_ctx, &overflow, &first_whole));
    double norm = a->given_norm;
    if (a->norm && !overflow) DT_CHECK(a->norm(a->group_ctx, &norm));
    else if (norm < 0 && !overflow && own_sq >= 0.0) norm = sqrt(own_sq);
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
