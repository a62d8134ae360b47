/* optim.c: SGD, AdamW, LARS and LAMB over a flat parameter buffer, plus
 * the global gradient norm and its clip factor (see dt_optim.h for the
 * equations, corner cases and defaults).
 *
 * Invariants: state1/state2 have the layout's numel floats, zeroed at init,
 * so tensor i's state lives at the same offset as its parameters; every op
 * goes through the dt_backend table (this file never touches parameter
 * memory itself, so it works for any device); weight decay is passed as 0
 * for tensors whose layout entry has decay == 0, and LARS/LAMB pass trust 1
 * for them; the per-tensor norms LARS and LAMB need come from the backend's
 * sumsq in double and the trust ratio is computed here on the host, so a
 * step is deterministic whenever the backend's ops are; opt->trust
 * (host, layout->count floats, LARS/LAMB only) holds the last step's
 * ratios; LAMB's scratch u holds one tensor's direction at a time and is
 * never read before lamb_direction writes it. dt_grad_norm adds the
 * per-tensor sums in layout order, so it is deterministic whenever the
 * backend's sumsq is. */
#include "dt_optim.h"
#include "update.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const dt__optim_names[] = {"sgd", "adamw", "lars", "lamb"};
#define DT__OPTIM_NKINDS ((int)(sizeof dt__optim_names / sizeof dt__optim_names[0]))

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
    cfg->lars_eta = 0.001f;
    cfg->lamb_gamma_l = 0.0f;
    cfg->lamb_gamma_u = 10.0f;
}

dt_status dt_optim_kind_parse(const char *s, dt_optim_kind *out)
{
    for (int k = 0; s && k < DT__OPTIM_NKINDS; k++)
        if (strcmp(s, dt__optim_names[k]) == 0) {
            *out = (dt_optim_kind)k;
            return DT_OK;
        }
    return DT_FAIL(DT_ERR_INVALID, "--optimizer '%s': unknown optimizer (expected sgd, adamw, lars or lamb)",
                   s ? s : "(null)");
}

const char *dt_optim_kind_name(dt_optim_kind kind)
{
    return (int)kind >= 0 && (int)kind < DT__OPTIM_NKINDS ? dt__optim_names[kind] : "?";
}

static int dt__optim_is_layerwise(dt_optim_kind k) { return k == DT_OPTIM_LARS || k == DT_OPTIM_LAMB; }

dt_status dt_optim_config_validate(const dt_optim_config *c)
{
    if ((int)c->kind < 0 || (int)c->kind >= DT__OPTIM_NKINDS)
        return DT_FAIL(DT_ERR_INVALID, "optimizer kind %d: expected sgd, adamw, lars or lamb", (int)c->kind);
    if (!(c->weight_decay >= 0.0f) || !isfinite(c->weight_decay))
        return DT_FAIL(DT_ERR_INVALID, "--weight-decay %g: expected a finite value >= 0", (double)c->weight_decay);
    if (c->kind == DT_OPTIM_ADAMW || c->kind == DT_OPTIM_LAMB) {
        if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f))
            return DT_FAIL(DT_ERR_INVALID, "--adam-beta1 %g: expected 0 <= beta1 < 1", (double)c->beta1);
        if (!(c->beta2 >= 0.0f && c->beta2 < 1.0f))
            return DT_FAIL(DT_ERR_INVALID, "--adam-beta2 %g: expected 0 <= beta2 < 1", (double)c->beta2);
        if (!(c->eps > 0.0f) || !isfinite(c->eps))
            return DT_FAIL(DT_ERR_INVALID, "--adam-eps %g: expected a finite value > 0", (double)c->eps);
    } else {
        if (!(c->momentum >= 0.0f && c->momentum < 1.0f))
            return DT_FAIL(DT_ERR_INVALID, "--sgd-momentum %g: expected 0 <= momentum < 1", (double)c->momentum);
        if (c->nesterov && c->kind == DT_OPTIM_LARS)
            return DT_FAIL(DT_ERR_INVALID, "Nesterov momentum: only with --optimizer sgd (got lars)");
        if (c->nesterov && c->momentum == 0.0f)
            return DT_FAIL(DT_ERR_INVALID, "SGD with Nesterov momentum needs --sgd-momentum > 0 (got 0)");
    }
    if (c->kind == DT_OPTIM_LARS && (!(c->lars_eta > 0.0f) || !isfinite(c->lars_eta)))
        return DT_FAIL(DT_ERR_INVALID, "--lars-eta %g: expected a finite value > 0", (double)c->lars_eta);
    if (c->kind == DT_OPTIM_LAMB) {
        if (!(c->lamb_gamma_l >= 0.0f) || !isfinite(c->lamb_gamma_l))
            return DT_FAIL(DT_ERR_INVALID, "--lamb-gamma-l %g: expected a finite value >= 0", (double)c->lamb_gamma_l);
        /* +inf is allowed: phi without a cap */
        if (!(c->lamb_gamma_u > 0.0f) || !(c->lamb_gamma_u >= c->lamb_gamma_l))
            return DT_FAIL(DT_ERR_INVALID, "--lamb-gamma-u %g: expected a value > 0 and >= --lamb-gamma-l (%g)",
                           (double)c->lamb_gamma_u, (double)c->lamb_gamma_l);
    }
    return DT_OK;
}

dt_status dt_optim_init(dt_optim *opt, const dt_optim_config *cfg, dt_backend *be, const dt_paramset *layout)
{
    memset(opt, 0, sizeof *opt);
    DT_CHECK(dt_optim_config_validate(cfg));
    opt->cfg = *cfg;
    opt->be = be;
    opt->layout = layout;
    opt->state1.backend = be;
    opt->state2.backend = be;
    opt->scratch.backend = be;
    size_t bytes = layout->numel * sizeof(float);
    int adam = cfg->kind == DT_OPTIM_ADAMW || cfg->kind == DT_OPTIM_LAMB;
    /* SGD and LARS keep their momentum buffer even when momentum is 0: the
     * backend op always writes buf, and the state then has one shape per
     * optimizer. */
    dt_status st = dt_buffer_alloc(&opt->state1, be, bytes);
    if (st == DT_OK && adam) st = dt_buffer_alloc(&opt->state2, be, bytes);
    if (st == DT_OK && cfg->kind == DT_OPTIM_LAMB) {
        /* u is only needed for the tensors the trust ratio applies to; the
         * others take adamw_update directly (one pass, no u). */
        size_t most = 0;
        for (int i = 0; i < layout->count; i++)
            if (layout->info[i].decay && layout->info[i].numel > most) most = layout->info[i].numel;
        st = dt_buffer_alloc(&opt->scratch, be, most * sizeof(float));
    }
    if (st == DT_OK && dt__optim_is_layerwise(cfg->kind)) {
        opt->trust = malloc((layout->count > 0 ? (size_t)layout->count : 1) * sizeof *opt->trust);
        if (!opt->trust) st = DT_FAIL(DT_ERR_NOMEM, "optimizer: out of memory for %d trust ratios", layout->count);
        else
            for (int i = 0; i < layout->count; i++) opt->trust[i] = 1.0f;
    }
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
    dt_buffer_free(&opt->scratch);
    free(opt->trust);
    memset(opt, 0, sizeof *opt);
}

/* ||x|| of one tensor, in double. */
static dt_status dt__norm(dt_backend *be, const float *x, size_t n, double *out)
{
    double s = 0.0;
    DT_CHECK(be->sumsq(be, x, n, &s));
    *out = sqrt(s);
    return DT_OK;
}

/* LARS on every tensor; the trust ratio only where decay == 1. */
static dt_status dt__lars_step(dt_optim *opt, float *params, const float *grads, float lr, float grad_scale)
{
    const dt_optim_config *c = &opt->cfg;
    const dt_paramset *ps = opt->layout;
    dt_backend *be = opt->be;
    float *buf = opt->state1.data;
    for (int i = 0; i < ps->count; i++) {
        const dt_param_info *pi = &ps->info[i];
        float *p = params + pi->offset;
        const float *g = grads + pi->offset;
        double trust = 1.0;
        float wd = 0.0f;
        if (pi->decay) {
            wd = c->weight_decay;
            double wn, gn;
            DT_CHECK(dt__norm(be, p, pi->numel, &wn));
            DT_CHECK(dt__norm(be, g, pi->numel, &gn));
            gn *= fabs((double)grad_scale);
            double den = gn + (double)wd * wn;
            /* NaN norms fall through to the formula: a NaN ratio in the
             * trace says where the step went non-finite. */
            if (wn != 0.0 && den != 0.0) trust = (double)c->lars_eta * wn / den;
        }
        DT_CHECK(be->lars_update(be, p, g, buf + pi->offset, pi->numel, lr, (float)trust, c->momentum, wd, grad_scale));
        opt->trust[i] = (float)trust;
    }
    return DT_OK;
}

/* LAMB: decay tensors through u = lamb_direction, then p += -lr*trust*u;
 * the others take the Adam step (trust 1, wd 0), which adamw_update is. */
static dt_status dt__lamb_step(dt_optim *opt, float *params, const float *grads, float lr, float grad_scale, float bc1,
                               float bc2)
{
    const dt_optim_config *c = &opt->cfg;
    const dt_paramset *ps = opt->layout;
    dt_backend *be = opt->be;
    float *m = opt->state1.data, *v = opt->state2.data, *u = opt->scratch.data;
    for (int i = 0; i < ps->count; i++) {
        const dt_param_info *pi = &ps->info[i];
        size_t off = pi->offset, n = pi->numel;
        if (!pi->decay) {
            DT_CHECK(be->adamw_update(be, params + off, grads + off, m + off, v + off, n, lr, c->beta1, c->beta2,
                                      c->eps, 0.0f, bc1, bc2, grad_scale));
            opt->trust[i] = 1.0f;
            continue;
        }
        DT_CHECK(be->lamb_direction(be, u, params + off, grads + off, m + off, v + off, n, c->beta1, c->beta2, c->eps,
                                    c->weight_decay, bc1, bc2, grad_scale));
        double wn, un;
        DT_CHECK(dt__norm(be, params + off, n, &wn));
        DT_CHECK(dt__norm(be, u, n, &un));
        /* comparisons rather than fmin/fmax, which would drop a NaN norm */
        double phi = wn < (double)c->lamb_gamma_l ? (double)c->lamb_gamma_l : wn;
        phi = phi > (double)c->lamb_gamma_u ? (double)c->lamb_gamma_u : phi;
        double trust = wn != 0.0 && un != 0.0 ? phi / un : 1.0;
        DT_CHECK(be->axpy(be, params + off, (float)(-(double)lr * trust), u, n));
        opt->trust[i] = (float)trust;
    }
    return DT_OK;
}

dt_status dt_optim_set_group_norms(dt_optim *opt, const int *tensor, int n_tensors,
                                   dt_status (*sum)(void *ctx, double *v, size_t n), void *ctx)
{
    if (!tensor || n_tensors < 1 || !sum)
        return DT_FAIL(DT_ERR_INVALID, "optimizer group norms: a tensor map, a count >= 1 and a sum are required");
    for (int i = 0; i < opt->layout->count; i++)
        if (tensor[i] < 0 || tensor[i] >= n_tensors)
            return DT_FAIL(DT_ERR_INVALID, "optimizer group norms: entry %d names tensor %d of %d", i, tensor[i],
                           n_tensors);
    if (opt->cfg.kind == DT_OPTIM_LAMB) { /* u for every decay piece at once */
        dt_buffer_free(&opt->scratch);
        opt->scratch.backend = opt->be;
        DT_CHECK(dt_buffer_alloc(&opt->scratch, opt->be, (opt->layout->numel ? opt->layout->numel : 1) * sizeof(float)));
    }
    opt->group_tensor = tensor;
    opt->group_tensors = n_tensors;
    opt->group_sum = sum;
    opt->group_ctx = ctx;
    return DT_OK;
}

/* The group's LARS or LAMB step (dt_optim_set_group_norms): every decay
 * piece's sums of squares (||w||^2 and LARS's ||g||^2 or LAMB's ||u||^2,
 * u written first), added per whole tensor over the group, then each
 * piece updated with its tensor's trust ratio, by the formulas of
 * dt__lars_step and dt__lamb_step. */
static dt_status dt__layerwise_group_step(dt_optim *opt, float *params, const float *grads, float lr,
                                          float grad_scale, float bc1, float bc2)
{
    const dt_optim_config *c = &opt->cfg;
    const dt_paramset *ps = opt->layout;
    dt_backend *be = opt->be;
    const int lamb = c->kind == DT_OPTIM_LAMB, nt = opt->group_tensors;
    float *s1 = opt->state1.data, *s2 = opt->state2.data, *u = opt->scratch.data;
    double *sq = calloc(2 * (size_t)nt, sizeof *sq);
    if (!sq) return DT_FAIL(DT_ERR_NOMEM, "optimizer: out of memory for %d tensors' norms", nt);
    dt_status st = DT_OK;
    for (int i = 0; st == DT_OK && i < ps->count; i++) {
        const dt_param_info *pi = &ps->info[i];
        const size_t off = pi->offset, n = pi->numel;
        if (!pi->decay) continue;
        double a = 0.0, b = 0.0;
        if (lamb)
            st = be->lamb_direction(be, u + off, params + off, grads + off, s1 + off, s2 + off, n, c->beta1, c->beta2,
                                    c->eps, c->weight_decay, bc1, bc2, grad_scale);
        if (st == DT_OK) st = be->sumsq(be, params + off, n, &a);
        if (st == DT_OK) st = be->sumsq(be, lamb ? u + off : grads + off, n, &b);
        sq[2 * opt->group_tensor[i]] += a;
        sq[2 * opt->group_tensor[i] + 1] += b;
    }
    if (st == DT_OK) st = opt->group_sum(opt->group_ctx, sq, 2 * (size_t)nt);
    for (int i = 0; st == DT_OK && i < ps->count; i++) {
        const dt_param_info *pi = &ps->info[i];
        const size_t off = pi->offset, n = pi->numel;
        const double wn = sqrt(sq[2 * opt->group_tensor[i]]), vn = sqrt(sq[2 * opt->group_tensor[i] + 1]);
        double trust = 1.0;
        if (lamb) {
            if (!pi->decay) {
                st = be->adamw_update(be, params + off, grads + off, s1 + off, s2 + off, n, lr, c->beta1, c->beta2,
                                      c->eps, 0.0f, bc1, bc2, grad_scale);
            } else {
                double phi = wn < (double)c->lamb_gamma_l ? (double)c->lamb_gamma_l : wn;
                phi = phi > (double)c->lamb_gamma_u ? (double)c->lamb_gamma_u : phi;
                trust = wn != 0.0 && vn != 0.0 ? phi / vn : 1.0;
                st = be->axpy(be, params + off, (float)(-(double)lr * trust), u + off, n);
            }
        } else {
            float wd = 0.0f;
            if (pi->decay) {
                wd = c->weight_decay;
                const double den = vn * fabs((double)grad_scale) + (double)wd * wn;
                if (wn != 0.0 && den != 0.0) trust = (double)c->lars_eta * wn / den;
            }
            st = be->lars_update(be, params + off, grads + off, s1 + off, n, lr, (float)trust, c->momentum, wd,
                                 grad_scale);
        }
        opt->trust[i] = (float)trust;
    }
    free(sq);
    return st;
}

/* Multi-tensor: the run of tensors i..j-1 (returned j) that share the
 * decay flag, as one range [*off, *off + *n) of the flat buffers, the
 * alignment padding between them included: the updates are elementwise,
 * so every tensor gets exactly what one call per tensor gave it, and the
 * padding (never read as a parameter) only takes the same arithmetic.
 * One kernel per run instead of one per tensor on a GPU. */
static int dt__optim_run(const dt_paramset *ps, int i, size_t *off, size_t *n)
{
    int j = i + 1;
    while (j < ps->count && ps->info[j].decay == ps->info[i].decay) j++;
    *off = ps->info[i].offset;
    *n = ps->info[j - 1].offset + ps->info[j - 1].numel - *off;
    return j;
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
    if (c->kind == DT_OPTIM_ADAMW || c->kind == DT_OPTIM_LAMB) {
        /* In double: beta^t for large t underflows gracefully to 0, and
         * 1 - beta2^t keeps its digits for small t (beta2 = 0.95, 0.999). */
        float bc1 = (float)(1.0 - pow((double)c->beta1, (double)t));
        float bc2 = (float)(1.0 - pow((double)c->beta2, (double)t));
        if (c->kind == DT_OPTIM_LAMB && opt->group_sum) {
            DT_CHECK(dt__layerwise_group_step(opt, params, grads, lr, grad_scale, bc1, bc2));
        } else if (c->kind == DT_OPTIM_LAMB) {
            DT_CHECK(dt__lamb_step(opt, params, grads, lr, grad_scale, bc1, bc2));
        } else {
            for (int i = 0, j; i < ps->count; i = j) { /* one call per run of tensors alike in decay */
                size_t off, n;
                j = dt__optim_run(ps, i, &off, &n);
                float wd = ps->info[i].decay ? c->weight_decay : 0.0f;
                DT_CHECK(be->adamw_update(be, params + off, grads + off, s1 + off, s2 + off, n, lr, c->beta1, c->beta2,
                                          c->eps, wd, bc1, bc2, grad_scale));
            }
        }
    } else if (c->kind == DT_OPTIM_LARS && opt->group_sum) {
        DT_CHECK(dt__layerwise_group_step(opt, params, grads, lr, grad_scale, 1.0f, 1.0f));
    } else if (c->kind == DT_OPTIM_LARS) {
        DT_CHECK(dt__lars_step(opt, params, grads, lr, grad_scale));
    } else {
        int first = t == 1;
        for (int i = 0, j; i < ps->count; i = j) {
            size_t off, n;
            j = dt__optim_run(ps, i, &off, &n);
            float wd = ps->info[i].decay ? c->weight_decay : 0.0f;
            DT_CHECK(be->sgd_update(be, params + off, grads + off, s1 + off, n, lr, c->momentum, wd, grad_scale,
                                    c->nesterov, first));
        }
    }
    opt->step = t;
    return DT_OK;
}

size_t dt_optim_state_bytes(const dt_optim *opt) { return opt->state1.bytes + opt->state2.bytes; }

size_t dt_optim_scratch_bytes(const dt_optim *opt) { return opt->scratch.bytes; }

int dt_optim_has_trust_ratios(const dt_optim *opt) { return opt->trust != NULL; }

const float *dt_optim_trust_ratios(const dt_optim *opt) { return opt->trust; }

dt_status dt_grad_norm(dt_backend *be, const dt_paramset *layout, const float *grads, double *norm)
{
    dt_span *spans;
    DT_CHECK(dt__layout_spans(layout, &spans));
    double *sq = malloc((size_t)(layout->count ? layout->count : 1) * sizeof *sq);
    /* one span_stats call (one wait for a GPU); x is only read without nonfinite */
    dt_status st = sq ? be->span_stats(be, (float *)grads, spans, layout->count, 1.0f, NULL, sq)
                      : DT_FAIL(DT_ERR_NOMEM, "grad_norm: out of memory for %d sums", layout->count);
    double total = 0.0;
    for (int i = 0; st == DT_OK && i < layout->count; i++) total += sq[i];
    free(spans);
    free(sq);
    DT_CHECK(st);
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
