/* optim.c: SGD and AdamW over a flat parameter buffer, plus the global
 * gradient norm and its clip factor (see dt_optim.h).
 *
 * Invariants: state1/state2 have the layout's numel floats, zeroed at init,
 * so tensor i's state lives at the same offset as its parameters; every op
 * goes through the dt_backend table (this file never touches parameter
 * memory itself, so it works for any device); weight decay is passed as 0
 * for tensors whose layout entry has decay == 0; dt_grad_norm adds the
 * per-tensor sums in layout order, so it is deterministic whenever the
 * backend's sumsq is. */
#include "dt_optim.h"

#include <math.h>
#include <string.h>

void dt_optim_config_default(dt_optim_config *cfg, dt_optim_kind kind)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    cfg->beta1 = 0.9f;
    cfg->beta2 = 0.95f;
    cfg->eps = 1e-8f;
    cfg->momentum = 0.9f;
    cfg->nesterov = 0;
    cfg->weight_decay = 0.0f; /* opt-in: callers set it (e.g. 0.1 for AdamW) */
}

dt_status dt_optim_kind_parse(const char *s, dt_optim_kind *out)
{
    if (s && strcmp(s, "sgd") == 0) {
        *out = DT_OPTIM_SGD;
        return DT_OK;
    }
    if (s && strcmp(s, "adamw") == 0) {
        *out = DT_OPTIM_ADAMW;
        return DT_OK;
    }
    return DT_FAIL(DT_ERR_INVALID, "--optimizer '%s': unknown optimizer (expected sgd or adamw)", s ? s : "(null)");
}

static dt_status dt__optim_validate(const dt_optim_config *c)
{
    if (c->kind != DT_OPTIM_SGD && c->kind != DT_OPTIM_ADAMW)
        return DT_FAIL(DT_ERR_INVALID, "optimizer kind %d: expected sgd or adamw", (int)c->kind);
    if (!(c->weight_decay >= 0.0f) || !isfinite(c->weight_decay))
        return DT_FAIL(DT_ERR_INVALID, "--weight-decay %g: expected a finite value >= 0", (double)c->weight_decay);
    if (c->kind == DT_OPTIM_ADAMW) {
        if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f))
            return DT_FAIL(DT_ERR_INVALID, "--adam-beta1 %g: expected 0 <= beta1 < 1", (double)c->beta1);
        if (!(c->beta2 >= 0.0f && c->beta2 < 1.0f))
            return DT_FAIL(DT_ERR_INVALID, "--adam-beta2 %g: expected 0 <= beta2 < 1", (double)c->beta2);
        if (!(c->eps > 0.0f) || !isfinite(c->eps))
            return DT_FAIL(DT_ERR_INVALID, "--adam-eps %g: expected a finite value > 0", (double)c->eps);
    } else {
        if (!(c->momentum >= 0.0f && c->momentum < 1.0f))
            return DT_FAIL(DT_ERR_INVALID, "--sgd-momentum %g: expected 0 <= momentum < 1", (double)c->momentum);
        if (c->nesterov && c->momentum == 0.0f)
            return DT_FAIL(DT_ERR_INVALID, "SGD with Nesterov momentum needs --sgd-momentum > 0 (got 0)");
    }
    return DT_OK;
}

dt_status dt_optim_init(dt_optim *opt, const dt_optim_config *cfg, dt_backend *be, const dt_paramset *layout)
{
    memset(opt, 0, sizeof *opt);
    DT_CHECK(dt__optim_validate(cfg));
    opt->cfg = *cfg;
    opt->be = be;
    opt->layout = layout;
    opt->state1.backend = be;
    opt->state2.backend = be;
    size_t bytes = layout->numel * sizeof(float);
    /* SGD keeps its momentum buffer even when momentum is 0: the backend op
     * always writes buf, and the state then has one shape per optimizer. */
    dt_status st = dt_buffer_alloc(&opt->state1, be, bytes);
    if (st == DT_OK && cfg->kind == DT_OPTIM_ADAMW) st = dt_buffer_alloc(&opt->state2, be, bytes);
    if (st != DT_OK) {
        dt_optim_free(opt);
        return st;
    }
    return DT_OK;
}

void dt_optim_free(dt_optim *opt)
{
    dt_buffer_free(&opt->state1);
    dt_buffer_free(&opt->state2);
    memset(opt, 0, sizeof *opt);
}

dt_status dt_optim_step(dt_optim *opt, float *params, const float *grads, float lr, float grad_scale)
{
    if (!(isfinite(lr) && isfinite(grad_scale)))
        return DT_FAIL(DT_ERR_NUMERIC, "optimizer step: lr %g, grad_scale %g (expected finite values)", (double)lr,
                       (double)grad_scale);
    const dt_optim_config *c = &opt->cfg;
    const dt_paramset *ps = opt->layout;
    dt_backend *be = opt->be;
    float *s1 = opt->state1.data, *s2 = opt->state2.data;
    int64_t t = opt->step + 1;
    if (c->kind == DT_OPTIM_ADAMW) {
        /* In double: beta^t for large t underflows gracefully to 0, and
         * 1 - beta2^t keeps its digits for small t (beta2 = 0.95, 0.999). */
        float bc1 = (float)(1.0 - pow((double)c->beta1, (double)t));
        float bc2 = (float)(1.0 - pow((double)c->beta2, (double)t));
        for (int i = 0; i < ps->count; i++) {
            const dt_param_info *pi = &ps->info[i];
            float wd = pi->decay ? c->weight_decay : 0.0f;
            DT_CHECK(be->adamw_update(be, params + pi->offset, grads + pi->offset, s1 + pi->offset, s2 + pi->offset,
                                      pi->numel, lr, c->beta1, c->beta2, c->eps, wd, bc1, bc2, grad_scale));
        }
    } else {
        int first = t == 1;
        for (int i = 0; i < ps->count; i++) {
            const dt_param_info *pi = &ps->info[i];
            float wd = pi->decay ? c->weight_decay : 0.0f;
            DT_CHECK(be->sgd_update(be, params + pi->offset, grads + pi->offset, s1 + pi->offset, pi->numel, lr,
                                    c->momentum, wd, grad_scale, c->nesterov, first));
        }
    }
    opt->step = t;
    return DT_OK;
}

size_t dt_optim_state_bytes(const dt_optim *opt) { return opt->state1.bytes + opt->state2.bytes; }

dt_status dt_grad_norm(dt_backend *be, const dt_paramset *layout, const float *grads, double *norm)
{
    double total = 0.0;
    for (int i = 0; i < layout->count; i++) {
        double s = 0.0;
        DT_CHECK(be->sumsq(be, grads + layout->info[i].offset, layout->info[i].numel, &s));
        total += s;
    }
    *norm = sqrt(total);
    return DT_OK;
}

float dt_clip_factor(double norm, float max_norm)
{
    if (!(max_norm > 0.0f)) return 1.0f;
    double f = (double)max_norm / (norm + 1e-6);
    /* A NaN norm gives 1: the step is then as non-finite as the gradients,
     * which the caller's finiteness check reports. */
    return f < 1.0 ? (float)f : 1.0f;
}
