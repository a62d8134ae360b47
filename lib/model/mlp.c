/* mlp.c: the mlp-bn model (see dt_mlp.h): configuration, the flat
 * parameter and running-statistics layouts, initialisation, and
 * forward/backward through the backend's matmul, BatchNorm, ReLU and fused
 * cross-entropy ops.
 *
 * Buffers:
 *   params, grads  one flat buffer each, layout `layout` (dt_mlp.h);
 *   state          running_mean/running_var per BatchNorm, layout
 *                  `state_layout`; never seen by an optimizer;
 *   acts           one allocation carved into the saved activations and
 *                  the backward scratch for up to cap_B rows (grown, never
 *                  shrunk, when a forward has more rows).
 * Saved per hidden layer l: pre (B,H) the Linear output, bn (B,H) the
 * BatchNorm output (BatchNorm only), act (B,H) the ReLU output (the next
 * layer's input), mean/rstd (H) the statistics BatchNorm normalised with.
 *
 * Invariants: a forward overwrites every saved activation; backward needs
 * a training-mode forward with labels and turns the logits into their
 * gradient in place (so logits are spent, and a second backward is
 * refused); the gradient of the hidden activations ping-pongs between two
 * scratch buffers d1, d2, because neither matmul_backward nor
 * batchnorm_backward accepts dinp aliasing dout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_mlp.h"
#include "dt_rng.h"

#define DT__MLP_MAX_WIDTH 65536
#define DT__MLP_MAX_CLASSES (1 << 20)
#define DT__MLP_MAX_LAYERS 64
#define DT__MLP_MAX_B (1 << 24)
#define DT__MLP_INIT_STREAM 0x6d6c70696e697400ULL /* "mlpinit" */

typedef struct dt__mlp_layer {
    float *fcw, *fcb; /* (H, in), (H) or NULL with BatchNorm */
    float *bnw, *bnb; /* (H), (H), or NULL without BatchNorm */
} dt__mlp_layer;

typedef struct dt__mlp_acts {
    float *pre;         /* (B,H) Linear output */
    float *bn;          /* (B,H) BatchNorm output, NULL without BatchNorm */
    float *act;         /* (B,H) ReLU output */
    float *mean, *rstd; /* (H), (H) */
} dt__mlp_acts;

struct dt_mlp {
    dt_mlp_config cfg;
    dt_backend *be;
    dt_paramset layout, state_layout;
    dt_buffer params, grads, state;
    dt__mlp_layer *p, *g;  /* (L) views into params and grads */
    float *outw, *outb;    /* (K, in), (K) */
    float *goutw, *goutb;  /* (K, in), (K) */
    float **rmean, **rvar; /* (L) views into state, each (H) */
    int training;
    float momentum;

    /* activations for up to cap_B rows */
    int cap_B;
    dt_buffer acts_buf;
    dt__mlp_acts *acts; /* (L) */
    float *x0;          /* (B,D) input */
    float *logits;      /* (B,K); the logits' gradient after backward */
    float *losses;      /* (B) */
    uint8_t *correct;   /* (B) */
    int32_t *d_labels;  /* (B) */
    float *d1, *d2;     /* (B,H) backward scratch */

    int cur_B;        /* rows of the last forward */
    int have_forward; /* saved activations valid (not spent by backward) */
    int has_labels;   /* the last forward had labels */
    int fwd_training; /* the last forward ran in training mode */
    int n_correct;    /* of the last forward with labels */
};

/* ---- configuration -------------------------------------------------------- */

void dt_mlp_config_default(dt_mlp_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->input_dim = 8;
    cfg->num_classes = 4;
    cfg->hidden_size = 64;
    cfg->num_layers = 2;
    cfg->batchnorm = 1;
    cfg->bn_momentum = 0.1f;
    cfg->bn_eps = 1e-5f;
}

dt_status dt_mlp_config_validate(const dt_mlp_config *c)
{
    if (c->input_dim < 1 || c->input_dim > DT__MLP_MAX_WIDTH)
        return DT_FAIL(DT_ERR_INVALID, "mlp-bn: %d input features (the data's --blobs-dims): expected 1..%d",
                       c->input_dim, DT__MLP_MAX_WIDTH);
    if (c->num_classes < 2 || c->num_classes > DT__MLP_MAX_CLASSES)
        return DT_FAIL(DT_ERR_INVALID, "mlp-bn: %d classes (the data's --blobs-classes): expected 2..%d",
                       c->num_classes, DT__MLP_MAX_CLASSES);
    if (c->hidden_size < 1 || c->hidden_size > DT__MLP_MAX_WIDTH)
        return DT_FAIL(DT_ERR_INVALID, "--hidden-size %d: expected 1..%d", c->hidden_size, DT__MLP_MAX_WIDTH);
    if (c->num_layers < 0 || c->num_layers > DT__MLP_MAX_LAYERS)
        return DT_FAIL(DT_ERR_INVALID, "--num-layers %d: expected 0..%d hidden layers for mlp-bn", c->num_layers,
                       DT__MLP_MAX_LAYERS);
    if (c->batchnorm != 0 && c->batchnorm != 1)
        return DT_FAIL(DT_ERR_INVALID, "mlp-bn: batchnorm %d: expected 0 (plain MLP) or 1", c->batchnorm);
    if (!(c->bn_momentum >= 0.0f && c->bn_momentum <= 1.0f))
        return DT_FAIL(DT_ERR_INVALID, "--bn-momentum %g: expected a number in [0, 1]", (double)c->bn_momentum);
    if (!(c->bn_eps > 0.0f) || !isfinite(c->bn_eps))
        return DT_FAIL(DT_ERR_INVALID, "mlp-bn: BatchNorm eps %g: expected a finite number > 0", (double)c->bn_eps);
    return DT_OK;
}

size_t dt_mlp_config_num_params(const dt_mlp_config *c)
{
    size_t D = (size_t)c->input_dim, H = (size_t)c->hidden_size, K = (size_t)c->num_classes;
    size_t n = 0, in = D;
    for (int l = 0; l < c->num_layers; l++) {
        n += H * in + (c->batchnorm ? 2 * H : H);
        in = H;
    }
    return n + K * in + K;
}

float dt_bn_momentum_per_micro(float m, int n)
{
    if (!(m >= 0.0f && m <= 1.0f)) return NAN;
    if (n <= 1) return m;
    return (float)-expm1(log1p(-(double)m) / n);
}

/* ---- creation -------------------------------------------------------------- */

static dt_status dt__mlp_layouts(dt_mlp *m)
{
    const dt_mlp_config *c = &m->cfg;
    const int64_t H = c->hidden_size, K = c->num_classes;
    int64_t in = c->input_dim;
    char name[DT_NAME_MAX];
    for (int l = 0; l < c->num_layers; l++) {
        snprintf(name, sizeof name, "h.%d.fc.w", l);
        DT_CHECK(dt_paramset_add(&m->layout, name, 2, (int64_t[]){H, in}, 1));
        if (!c->batchnorm) {
            snprintf(name, sizeof name, "h.%d.fc.b", l);
            DT_CHECK(dt_paramset_add(&m->layout, name, 1, (int64_t[]){H}, 0));
        } else {
            snprintf(name, sizeof name, "h.%d.bn.w", l);
            DT_CHECK(dt_paramset_add(&m->layout, name, 1, (int64_t[]){H}, 0));
            snprintf(name, sizeof name, "h.%d.bn.b", l);
            DT_CHECK(dt_paramset_add(&m->layout, name, 1, (int64_t[]){H}, 0));
            snprintf(name, sizeof name, "h.%d.bn.running_mean", l);
            DT_CHECK(dt_paramset_add(&m->state_layout, name, 1, (int64_t[]){H}, 0));
            snprintf(name, sizeof name, "h.%d.bn.running_var", l);
            DT_CHECK(dt_paramset_add(&m->state_layout, name, 1, (int64_t[]){H}, 0));
        }
        in = H;
    }
    DT_CHECK(dt_paramset_add(&m->layout, "out.w", 2, (int64_t[]){K, in}, 1));
    DT_CHECK(dt_paramset_add(&m->layout, "out.b", 1, (int64_t[]){K}, 0));
    return DT_OK;
}

/* Point the per-layer views into a flat buffer (params or grads). */
static void dt__mlp_bind(const dt_mlp *m, float *base, dt__mlp_layer *ly, float **outw, float **outb)
{
    const dt_param_info *in = m->layout.info;
    int k = 0;
    for (int l = 0; l < m->cfg.num_layers; l++) {
        ly[l].fcw = base + in[k++].offset;
        ly[l].fcb = m->cfg.batchnorm ? NULL : base + in[k++].offset;
        ly[l].bnw = m->cfg.batchnorm ? base + in[k++].offset : NULL;
        ly[l].bnb = m->cfg.batchnorm ? base + in[k++].offset : NULL;
    }
    *outw = base + in[k++].offset;
    *outb = base + in[k++].offset;
}

dt_status dt_mlp_create(const dt_mlp_config *cfg, dt_backend *be, dt_mlp **out)
{
    *out = NULL;
    DT_CHECK(dt_mlp_config_validate(cfg));
    dt_mlp *m = calloc(1, sizeof *m);
    if (!m) return DT_FAIL(DT_ERR_NOMEM, "mlp-bn: out of memory");
    m->cfg = *cfg;
    m->be = be;
    m->training = 1;
    m->momentum = cfg->bn_momentum;
    dt_paramset_init(&m->layout);
    dt_paramset_init(&m->state_layout);
    dt_status st;
    size_t L = (size_t)cfg->num_layers;
    m->p = calloc(L + 1, sizeof *m->p);
    m->g = calloc(L + 1, sizeof *m->g);
    m->acts = calloc(L + 1, sizeof *m->acts);
    m->rmean = calloc(L + 1, sizeof *m->rmean);
    m->rvar = calloc(L + 1, sizeof *m->rvar);
    if (!m->p || !m->g || !m->acts || !m->rmean || !m->rvar) {
        st = DT_FAIL(DT_ERR_NOMEM, "mlp-bn: out of memory");
        goto fail;
    }
    DT_CHECK_GOTO(dt__mlp_layouts(m), st, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&m->params, be, m->layout.numel * sizeof(float)), st, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&m->grads, be, m->layout.numel * sizeof(float)), st, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&m->state, be, m->state_layout.numel * sizeof(float)), st, fail);
    dt__mlp_bind(m, m->params.data, m->p, &m->outw, &m->outb);
    dt__mlp_bind(m, m->grads.data, m->g, &m->goutw, &m->goutb);
    if (cfg->batchnorm)
        for (int l = 0; l < cfg->num_layers; l++) {
            m->rmean[l] = (float *)m->state.data + m->state_layout.info[2 * l].offset;
            m->rvar[l] = (float *)m->state.data + m->state_layout.info[2 * l + 1].offset;
        }
    DT_CHECK_GOTO(dt_mlp_reset_running_stats(m), st, fail);
    *out = m;
    return DT_OK;
fail:
    dt_mlp_free(m);
    return st;
}

void dt_mlp_free(dt_mlp *m)
{
    if (!m) return;
    dt_buffer_free(&m->params);
    dt_buffer_free(&m->grads);
    dt_buffer_free(&m->state);
    dt_buffer_free(&m->acts_buf);
    dt_paramset_free(&m->layout);
    dt_paramset_free(&m->state_layout);
    free(m->p);
    free(m->g);
    free(m->acts);
    free(m->rmean);
    free(m->rvar);
    free(m);
}

dt_status dt_mlp_reset_running_stats(dt_mlp *m)
{
    size_t n = m->state_layout.numel;
    if (n == 0) return DT_OK;
    float *host = calloc(n, sizeof *host);
    if (!host) return DT_FAIL(DT_ERR_NOMEM, "mlp-bn: out of memory for %zu running statistics", n);
    for (int i = 0; i < m->state_layout.count; i++) {
        const dt_param_info *p = &m->state_layout.info[i];
        float v = strstr(p->name, "running_var") ? 1.0f : 0.0f;
        for (size_t j = 0; j < p->numel; j++) host[p->offset + j] = v;
    }
    dt_status st = m->be->copy(m->be, m->state.data, host, n * sizeof(float), DT_COPY_H2D);
    free(host);
    return st;
}

dt_status dt_mlp_init_weights(dt_mlp *m, uint64_t seed)
{
    size_t n = m->layout.numel;
    float *host = calloc(n, sizeof *host);
    if (!host) return DT_FAIL(DT_ERR_NOMEM, "mlp-bn init: out of memory for %zu parameters", n);
    for (int i = 0; i < m->layout.count; i++) {
        const dt_param_info *p = &m->layout.info[i];
        float *w = host + p->offset;
        if (p->ndim == 1) { /* biases 0, BatchNorm gains 1 */
            float v = strstr(p->name, ".bn.w") ? 1.0f : 0.0f;
            for (size_t j = 0; j < p->numel; j++) w[j] = v;
            continue;
        }
        /* One RNG stream per tensor, so a tensor's values do not depend on the others. */
        dt_rng r;
        dt_rng_seed3(&r, seed, DT__MLP_INIT_STREAM, (uint64_t)i);
        double fan_in = (double)p->shape[1];
        int hidden = strncmp(p->name, "h.", 2) == 0;
        float bound = (float)(hidden ? sqrt(6.0 / fan_in) : 1.0 / sqrt(fan_in));
        for (size_t j = 0; j < p->numel; j++) w[j] = bound * (2.0f * dt_rng_uniform(&r) - 1.0f);
    }
    dt_status st = m->be->copy(m->be, m->params.data, host, n * sizeof(float), DT_COPY_H2D);
    free(host);
    DT_CHECK(st);
    return dt_mlp_reset_running_stats(m);
}

const dt_mlp_config *dt_mlp_config_of(const dt_mlp *m) { return &m->cfg; }
const dt_paramset *dt_mlp_layout(const dt_mlp *m) { return &m->layout; }
float *dt_mlp_params(dt_mlp *m) { return m->params.data; }
float *dt_mlp_grads(dt_mlp *m) { return m->grads.data; }
dt_backend *dt_mlp_backend(dt_mlp *m) { return m->be; }
const dt_paramset *dt_mlp_state_layout(const dt_mlp *m) { return &m->state_layout; }
float *dt_mlp_state(dt_mlp *m) { return m->state_layout.numel ? m->state.data : NULL; }
void dt_mlp_set_training(dt_mlp *m, int training) { m->training = training != 0; }
int dt_mlp_is_training(const dt_mlp *m) { return m->training; }
float dt_mlp_bn_momentum(const dt_mlp *m) { return m->momentum; }
size_t dt_mlp_activation_bytes(const dt_mlp *m) { return m->acts_buf.bytes; }

dt_status dt_mlp_set_bn_momentum(dt_mlp *m, float momentum)
{
    if (!(momentum >= 0.0f && momentum <= 1.0f))
        return DT_FAIL(DT_ERR_INVALID, "--bn-momentum %g: expected a number in [0, 1]", (double)momentum);
    m->momentum = momentum;
    return DT_OK;
}

/* ---- activations for B rows ---------------------------------------------- */

static size_t dt__pad(size_t n) { return (n + 15) & ~(size_t)15; }

static dt_status dt__mlp_ensure(dt_mlp *m, int B)
{
    if (B <= m->cap_B && m->acts_buf.data) return DT_OK;
    const dt_mlp_config *c = &m->cfg;
    const size_t Bs = (size_t)B, H = (size_t)c->hidden_size, L = (size_t)c->num_layers;
    dt_buffer_free(&m->acts_buf);
    m->cap_B = 0;
    m->have_forward = 0;
    size_t per_layer = (c->batchnorm ? 3 : 2) * dt__pad(Bs * H) + 2 * dt__pad(H);
    size_t n = dt__pad(Bs * c->input_dim) + L * per_layer + dt__pad(Bs * c->num_classes) /* logits */ +
               dt__pad(Bs) /* losses */ + dt__pad(Bs / 4 + 1) /* correct flags */ + dt__pad(Bs) /* labels */ +
               (L ? 2 * dt__pad(Bs * H) : 0) /* d1, d2 */;
    DT_CHECK(dt_buffer_alloc(&m->acts_buf, m->be, n * sizeof(float)));
    float *w = m->acts_buf.data;
    m->x0 = w, w += dt__pad(Bs * c->input_dim);
    for (size_t l = 0; l < L; l++) {
        dt__mlp_acts *a = &m->acts[l];
        a->pre = w, w += dt__pad(Bs * H);
        a->bn = NULL;
        if (c->batchnorm) a->bn = w, w += dt__pad(Bs * H);
        a->act = w, w += dt__pad(Bs * H);
        a->mean = w, w += dt__pad(H);
        a->rstd = w, w += dt__pad(H);
    }
    m->logits = w, w += dt__pad(Bs * c->num_classes);
    m->losses = w, w += dt__pad(Bs);
    m->correct = (uint8_t *)w, w += dt__pad(Bs / 4 + 1);
    m->d_labels = (int32_t *)w, w += dt__pad(Bs);
    m->d1 = m->d2 = NULL;
    if (L) {
        m->d1 = w, w += dt__pad(Bs * H);
        m->d2 = w;
    }
    m->cap_B = B;
    return DT_OK;
}

/* ---- forward / backward ------------------------------------------------------ */

dt_status dt_mlp_forward(dt_mlp *m, const float *x, const int32_t *y, int B, float *loss)
{
    const dt_mlp_config *c = &m->cfg;
    dt_backend *be = m->be;
    const int H = c->hidden_size, K = c->num_classes;
    if (B < 1 || B > DT__MLP_MAX_B)
        return DT_FAIL(DT_ERR_INVALID, "mlp-bn forward: batch of %d rows (expected 1..%d)", B, DT__MLP_MAX_B);
    if (m->training && c->batchnorm && c->num_layers > 0 && B < 2)
        return DT_FAIL(DT_ERR_INVALID,
                       "--micro-batch-size %d: BatchNorm in training mode needs >= 2 rows per forward (the variance "
                       "of one row is undefined); raise it or disable BatchNorm",
                       B);
    if (y)
        for (int i = 0; i < B; i++)
            if (y[i] < 0 || y[i] >= K)
                return DT_FAIL(DT_ERR_INVALID, "mlp-bn forward: label %d at row %d outside 0..%d", y[i], i, K - 1);
    DT_CHECK(dt__mlp_ensure(m, B));
    m->have_forward = 0;
    m->has_labels = 0;
    m->cur_B = B;
    m->fwd_training = m->training;

    DT_CHECK(be->copy(be, m->x0, x, (size_t)B * c->input_dim * sizeof(float), DT_COPY_H2D));
    const float *in = m->x0;
    int in_dim = c->input_dim;
    for (int l = 0; l < c->num_layers; l++) {
        const dt__mlp_layer *p = &m->p[l];
        dt__mlp_acts *a = &m->acts[l];
        DT_CHECK(be->matmul_forward(be, a->pre, in, p->fcw, p->fcb, B, in_dim, H));
        if (c->batchnorm) {
            DT_CHECK(be->batchnorm_forward(be, a->bn, a->mean, a->rstd, m->rmean[l], m->rvar[l], a->pre, p->bnw, p->bnb,
                                           B, H, m->momentum, c->bn_eps, m->training));
            DT_CHECK(be->relu_forward(be, a->act, a->bn, (size_t)B * H));
        } else {
            DT_CHECK(be->relu_forward(be, a->act, a->pre, (size_t)B * H));
        }
        in = a->act;
        in_dim = H;
    }
    DT_CHECK(be->matmul_forward(be, m->logits, in, m->outw, m->outb, B, in_dim, K));

    float mean_loss = 0.0f;
    if (y) {
        DT_CHECK(be->copy(be, m->d_labels, y, (size_t)B * sizeof(int32_t), DT_COPY_H2D));
        DT_CHECK(
            be->crossentropy_forward_backward(be, m->losses, m->correct, NULL, m->logits, m->d_labels, B, K, K, 1.0f));
        float *hl = malloc((size_t)B * sizeof *hl);
        uint8_t *hc = malloc((size_t)B);
        dt_status st = hl && hc ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "mlp-bn forward: out of memory");
        if (st == DT_OK) st = be->copy(be, hl, m->losses, (size_t)B * sizeof(float), DT_COPY_D2H);
        if (st == DT_OK) st = be->copy(be, hc, m->correct, (size_t)B, DT_COPY_D2H);
        if (st == DT_OK) {
            double s = 0.0;
            int nc = 0;
            for (int i = 0; i < B; i++) {
                s += hl[i];
                nc += hc[i];
            }
            mean_loss = (float)(s / B);
            m->n_correct = nc;
        }
        free(hl);
        free(hc);
        DT_CHECK(st);
        m->has_labels = 1;
    }
    if (loss) *loss = mean_loss;
    m->have_forward = 1;
    return DT_OK;
}

dt_status dt_mlp_backward(dt_mlp *m, float loss_scale)
{
    const dt_mlp_config *c = &m->cfg;
    dt_backend *be = m->be;
    const int H = c->hidden_size, K = c->num_classes, L = c->num_layers, B = m->cur_B;
    if (!m->have_forward || !m->has_labels)
        return DT_FAIL(DT_ERR_INVALID, "mlp-bn backward: no forward pass with labels to differentiate");
    if (!m->fwd_training)
        return DT_FAIL(DT_ERR_INVALID,
                       "mlp-bn backward: the last forward ran in eval mode (running statistics); differentiate a "
                       "training-mode forward");
    /* The logits become their gradient, in place: the activations are spent. */
    m->have_forward = 0;
    float *dlogits = m->logits;
    DT_CHECK(be->crossentropy_forward_backward(be, m->losses, NULL, dlogits, m->logits, m->d_labels, B, K, K,
                                               loss_scale / (float)B));
    const float *in = L ? m->acts[L - 1].act : m->x0;
    int in_dim = L ? H : c->input_dim;
    float *d = L ? m->d1 : NULL; /* gradient of the current layer's output (B,H) */
    DT_CHECK(be->matmul_backward(be, d, m->goutw, m->goutb, dlogits, in, m->outw, B, in_dim, K));
    for (int l = L - 1; l >= 0; l--) {
        const dt__mlp_acts *a = &m->acts[l];
        float *other = d == m->d1 ? m->d2 : m->d1;
        DT_CHECK(be->relu_backward(be, d, c->batchnorm ? a->bn : a->pre, d, (size_t)B * H));
        float *dpre = d;
        if (c->batchnorm) {
            DT_CHECK(be->batchnorm_backward(be, other, m->g[l].bnw, m->g[l].bnb, d, a->pre, m->p[l].bnw, a->mean,
                                            a->rstd, B, H));
            dpre = other;
        }
        in = l ? m->acts[l - 1].act : m->x0;
        in_dim = l ? H : c->input_dim;
        float *dnext = l ? (dpre == m->d1 ? m->d2 : m->d1) : NULL; /* layer 0: no input gradient needed */
        DT_CHECK(be->matmul_backward(be, dnext, m->g[l].fcw, m->g[l].fcb, dpre, in, m->p[l].fcw, B, in_dim, H));
        d = dnext;
    }
    return DT_OK;
}

dt_status dt_mlp_zero_grad(dt_mlp *m)
{
    return m->be->memset_zero(m->be, m->grads.data, m->layout.numel * sizeof(float));
}

dt_status dt_mlp_accuracy(const dt_mlp *m, int *n_correct)
{
    if (!m->has_labels) return DT_FAIL(DT_ERR_INVALID, "mlp-bn accuracy: no forward pass with labels");
    *n_correct = m->n_correct;
    return DT_OK;
}

dt_status dt_mlp_logits(dt_mlp *m, float *out)
{
    if (!m->have_forward) return DT_FAIL(DT_ERR_INVALID, "mlp-bn logits: no forward pass (or spent by backward)");
    size_t n = (size_t)m->cur_B * m->cfg.num_classes;
    return m->be->copy(m->be, out, m->logits, n * sizeof(float), DT_COPY_D2H);
}
