/* gpt.c: the GPT model (see dt_gpt.h): presets, the flat parameter
 * layout, the buffers, the compute copy of the weights under mixed
 * precision, and forward/backward through the layer runner (runner.h).
 *
 * Parameter layout (one flat buffer, the same for gradients), in order:
 *   wte (V,C), wpe (maxT,C),
 *   for each block l: h.l.ln1.w (C), h.l.ln1.b (C), h.l.qkv.w (3C,C),
 *   h.l.qkv.b (3C), h.l.attproj.w (C,C), h.l.attproj.b (C), h.l.ln2.w (C),
 *   h.l.ln2.b (C), h.l.fc.w (4C,C), h.l.fc.b (4C), h.l.fcproj.w (C,4C),
 *   h.l.fcproj.b (C),
 *   lnf.w (C), lnf.b (C), and lm_head.w (V,C) only when untied (with
 *   tie_embeddings the head multiplies by wte, and wte's gradient sums the
 *   head's and the embedding's).
 * Each block's parameters are contiguous, so a pipeline stage's shard is one
 * range. The layer modules (embedding.c, block.c, head.c) do the math and
 * the runner their order, recomputation and 16-bit packing (one slot, the
 * shared memory discipline); this file owns the layout and the buffers.
 * Invariant: activations saved by the last forward are valid until the
 * next forward; backward needs them unchanged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_gpt.h"
#include "dt_rng.h"
#include "dt_time.h"
#include "dt_internal.h"
#include "runner.h"

struct dt_gpt {
    dt_gpt_config cfg;
    dt_backend *be;
    dt_paramset layout;
    dt_buffer params, grads;

    /* the layers' runner (runner.h) for micro-batches up to (B, T): one
     * slot, the shared memory discipline; made at the first forward of a
     * larger B, another T, or after a change of precision or recomputation */
    dt__runner *run;
    int B, T;
    dt__fp8 *fp8; /* FP8 training's state (dt__gpt_set_fp8), given to each runner made */

    /* mixed precision (dt_gpt_set_precision) */
    dt_dtype precision;  /* DT_F32, DT_F16 or DT_BF16 */
    dt_buffer whalf;     /* (numel) the compute copy of the weights, in precision */
    dt_buffer wq;        /* (numel) the same values as FP32, read by the GEMMs (or whalf's) */
    dt_buffer gmb;       /* (numel) one micro-batch's parameter gradients, rounded before accumulation */
    int weights_rounded; /* dt_gpt_set_weights_rounded: params hold 16-bit values, no whalf/wq copies */

    /* activation recomputation */
    dt_recompute recompute;
    int recompute_k; /* full: blocks per checkpointed group */

    dt_gpt_layer_hook hook;
    void *hook_ctx;
    int split_backward; /* dt_gpt_set_split_backward: the hook sees B ('b') and W ('W') apart */
};

/* ---- configuration ------------------------------------------------------ */

dt_status dt_gpt_config_preset(const char *name, dt_gpt_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->vocab_size = 256;
    /* tie_embeddings: GPT-2's (and Megatron's default) for gpt2-124m; the
     * byte-level toys keep their untied head: tied, tiny learned dtrain's
     * default task slower (18.7/58.0/84.8/92.0/93.5% at iterations
     * 500..2500 against 43/85/95/96/98% untied, ./dtrain, 2026-12-02) */
    if (strcmp(name, "tiny") == 0) {
        cfg->num_layers = 2, cfg->num_heads = 4, cfg->hidden_size = 64, cfg->seq_len = 64;
    } else if (strcmp(name, "small") == 0) {
        cfg->num_layers = 6, cfg->num_heads = 6, cfg->hidden_size = 384, cfg->seq_len = 256;
    } else if (strcmp(name, "gpt2-124m") == 0) {
        cfg->num_layers = 12, cfg->num_heads = 12, cfg->hidden_size = 768, cfg->seq_len = 1024;
        cfg->vocab_size = 50257;
        cfg->tie_embeddings = 1;
    } else {
        return DT_FAIL(DT_ERR_INVALID, "--model '%s': unknown preset (expected tiny, small or gpt2-124m)", name);
    }
    return DT_OK;
}

dt_status dt_gpt_config_validate(const dt_gpt_config *c)
{
    if (c->num_layers < 1 || c->num_layers > 1024)
        return DT_FAIL(DT_ERR_INVALID, "--num-layers %d: expected 1..1024", c->num_layers);
    if (c->num_heads < 1) return DT_FAIL(DT_ERR_INVALID, "--num-attention-heads %d: expected >= 1", c->num_heads);
    if (c->hidden_size < 1 || c->hidden_size > 65536)
        return DT_FAIL(DT_ERR_INVALID, "--hidden-size %d: expected 1..65536", c->hidden_size);
    if (c->hidden_size % c->num_heads != 0)
        return DT_FAIL(DT_ERR_INVALID, "--hidden-size %d is not divisible by --num-attention-heads %d", c->hidden_size,
                       c->num_heads);
    if (c->seq_len < 1 || c->seq_len > 65536)
        return DT_FAIL(DT_ERR_INVALID, "--max-position-embeddings %d: expected 1..65536", c->seq_len);
    if (c->vocab_size < 2 || c->vocab_size > (1 << 24))
        return DT_FAIL(DT_ERR_INVALID, "vocabulary size %d: expected 2..16777216", c->vocab_size);
    return DT_OK;
}

size_t dt_gpt_config_num_params(const dt_gpt_config *c)
{
    size_t C = (size_t)c->hidden_size, V = (size_t)c->vocab_size, L = (size_t)c->num_layers;
    size_t block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C;
    return V * C + (size_t)c->seq_len * C + L * block + 2 * C + (c->tie_embeddings ? 0 : V * C);
}

double dt_gpt_config_flops_per_token(const dt_gpt_config *c, int T)
{
    return 6.0 * (double)dt_gpt_config_num_params(c) + 12.0 * c->num_layers * (double)c->hidden_size * T;
}

/* ---- creation ------------------------------------------------------------ */

dt_status dt__gpt_whole_layout(const dt_gpt_config *cfg, dt_paramset *ps)
{
    const int64_t C = cfg->hidden_size, V = cfg->vocab_size, P = cfg->seq_len;
    char name[DT_NAME_MAX];
    DT_CHECK(dt_paramset_add(ps, "wte", 2, (int64_t[]){V, C}, 1));
    DT_CHECK(dt_paramset_add(ps, "wpe", 2, (int64_t[]){P, C}, 1));
    static const char *const names[DT__BLOCK_NTENSORS] = {"ln1.w", "ln1.b", "qkv.w", "qkv.b", "attproj.w", "attproj.b",
                                                          "ln2.w", "ln2.b", "fc.w",  "fc.b",  "fcproj.w",  "fcproj.b"};
    const int64_t shapes[DT__BLOCK_NTENSORS][2] = {{C, 0}, {C, 0}, {3 * C, C}, {3 * C, 0}, {C, C},     {C, 0},
                                                   {C, 0}, {C, 0}, {4 * C, C}, {4 * C, 0}, {C, 4 * C}, {C, 0}};
    for (int l = 0; l < cfg->num_layers; l++)
        for (int i = 0; i < DT__BLOCK_NTENSORS; i++) {
            snprintf(name, sizeof name, "h.%d.%s", l, names[i]);
            int nd = shapes[i][1] ? 2 : 1;
            DT_CHECK(dt_paramset_add(ps, name, nd, shapes[i], nd == 2));
        }
    DT_CHECK(dt_paramset_add(ps, "lnf.w", 1, (int64_t[]){C}, 0));
    DT_CHECK(dt_paramset_add(ps, "lnf.b", 1, (int64_t[]){C}, 0));
    if (!cfg->tie_embeddings) DT_CHECK(dt_paramset_add(ps, "lm_head.w", 2, (int64_t[]){V, C}, 1));
    return DT_OK;
}

void dt__gpt_layer_tensors(const dt_gpt_config *cfg, int layer, int *first, int *n)
{
    const int L = cfg->num_layers;
    if (layer < 0) *first = 0, *n = 2;                                     /* wte, wpe */
    else if (layer < L) *first = 2 + DT__BLOCK_NTENSORS * layer, *n = DT__BLOCK_NTENSORS;
    else *first = 2 + DT__BLOCK_NTENSORS * L, *n = cfg->tie_embeddings ? 2 : 3; /* lnf.w, lnf.b, lm_head.w */
}

int dt__gpt_tensor_layer(const dt_gpt_config *cfg, int tensor)
{
    if (tensor < 2) return -1;
    const int l = (tensor - 2) / DT__BLOCK_NTENSORS;
    return l < cfg->num_layers ? l : cfg->num_layers;
}

void dt__gpt_layer_range(const dt_gpt_config *cfg, const dt_paramset *ps, int layer, size_t *off, size_t *len)
{
    int first, n, next;
    dt__gpt_layer_tensors(cfg, layer, &first, &n);
    *off = ps->info[first].offset;
    if (layer >= cfg->num_layers) { /* the last layer: to the end */
        *len = ps->numel - *off;
        return;
    }
    dt__gpt_layer_tensors(cfg, layer + 1, &next, &n);
    *len = ps->info[next].offset - *off; /* the layout's alignment padding goes with the layer */
}

int dt__gpt_buckets(const dt_gpt_config *cfg, const dt_paramset *ps, size_t bucket_bytes, size_t *off, size_t *len,
                    int *low)
{
    const int L = cfg->num_layers;
    size_t acc = 0;
    int n = 0;
    for (int layer = L; layer >= -1; layer--) {
        size_t lo, ll;
        dt__gpt_layer_range(cfg, ps, layer, &lo, &ll);
        acc += ll;
        if (acc * sizeof(float) >= bucket_bytes || layer == -1) {
            off[n] = lo;
            len[n] = acc;
            low[n++] = layer;
            acc = 0;
        }
    }
    return n;
}

size_t dt_gpt_config_layout_numel(const dt_gpt_config *cfg)
{
    dt_gpt tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.cfg = *cfg;
    dt_paramset_init(&tmp.layout);
    size_t n = dt__gpt_whole_layout(&tmp.cfg, &tmp.layout) == DT_OK ? tmp.layout.numel : 0;
    dt_paramset_free(&tmp.layout);
    return n;
}

/* Point the views (weights or gradients) into a flat buffer of the layout. */
static void dt__gpt_bind(const dt_gpt *m, float *base, dt__runner_views *v)
{
    for (int l = -1; l <= m->cfg.num_layers; l++) {
        int first, n;
        dt__gpt_layer_tensors(&m->cfg, l, &first, &n);
        dt__runner_views_bind(v, &m->cfg, 0, l, m->layout.info + first, n, base, 0);
    }
}

/* The runner's views: the weights the GEMMs read (the rounded copy wq in
 * half mode, else params) and the gradients each micro-batch writes (gmb
 * in half mode, rounded before they accumulate into grads). */
static void dt__gpt_bind_views(dt_gpt *m)
{
    if (!m->run) return;
    dt__gpt_bind(m, m->wq.data ? (float *)m->wq.data : (float *)m->params.data, dt__runner_w(m->run));
    dt__gpt_bind(m, m->precision != DT_F32 ? (float *)m->gmb.data : (float *)m->grads.data, dt__runner_g(m->run));
}

dt_status dt_gpt_create(const dt_gpt_config *cfg, dt_backend *be, dt_gpt **out)
{
    *out = NULL;
    DT_CHECK(dt_gpt_config_validate(cfg));
    dt_gpt *m = calloc(1, sizeof *m);
    if (!m) return DT_FAIL(DT_ERR_NOMEM, "model: out of memory");
    m->cfg = *cfg;
    m->be = be;
    dt_paramset_init(&m->layout);
    dt_status st;
    DT_CHECK_GOTO(dt__gpt_whole_layout(&m->cfg, &m->layout), st, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&m->params, be, m->layout.numel * sizeof(float)), st, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&m->grads, be, m->layout.numel * sizeof(float)), st, fail);
    *out = m;
    return DT_OK;
fail:
    dt_gpt_free(m);
    return st;
}

/* The backend's GEMMs may read wq's values from whalf (set_gemm_shadow):
 * both are written together, by dt__gpt_sync_weights only. */
static dt_status dt__gpt_shadow_weights(dt_gpt *m)
{
    if (!m->be->set_gemm_shadow || !m->wq.data) return DT_OK;
    return m->be->set_gemm_shadow(m->be, m->wq.data, m->layout.numel, m->whalf.data, m->precision);
}

/* Before wq or whalf is freed. */
static void dt__gpt_forget_shadow(dt_gpt *m)
{
    if (m->be && m->be->set_gemm_shadow && m->wq.data) (void)m->be->set_gemm_shadow(m->be, m->wq.data, 0, NULL, DT_F32);
}

/* The runner is made again at the next forward (for new sizes or settings). */
static void dt__gpt_drop_runner(dt_gpt *m)
{
    dt__runner_free(m->run);
    m->run = NULL;
    m->B = m->T = 0;
}

void dt_gpt_free(dt_gpt *m)
{
    if (m && m->precision != DT_F32 && m->be && m->be->set_gemm_inputs)
        (void)m->be->set_gemm_inputs(m->be, DT_F32); /* the promise ends with the model */
    if (!m) return;
    dt__gpt_forget_shadow(m);
    dt__gpt_drop_runner(m);
    dt_buffer_free(&m->params);
    dt_buffer_free(&m->grads);
    dt_buffer_free(&m->whalf);
    dt_buffer_free(&m->wq);
    dt_buffer_free(&m->gmb);
    dt_paramset_free(&m->layout);
    free(m);
}

dt_status dt__gpt_init_tensor(const dt_gpt_config *cfg, const dt_param_info *p, int index, const dt_gpt_init *init,
                              float *w)
{
    if (init->read) return init->read(init->ctx, p, index, w);
    const uint64_t seed = init->seed;
    const float std_resid = 0.02f / sqrtf(2.0f * cfg->num_layers);
    /* One RNG stream per tensor, so a tensor's values do not depend on the others. */
    dt_rng r;
    dt_rng_seed3(&r, seed, 0x1417, (uint64_t)index);
    const char *dot = strrchr(p->name, '.');
    int is_gain = dot && strcmp(dot, ".w") == 0 && p->ndim == 1;
    int is_bias = dot && strcmp(dot, ".b") == 0;
    int is_resid = strstr(p->name, "attproj.w") || strstr(p->name, "fcproj.w");
    for (size_t j = 0; j < p->numel; j++) {
        if (is_gain) w[j] = 1.0f;
        else if (is_bias) w[j] = 0.0f;
        else w[j] = (float)dt_rng_normal(&r) * (is_resid ? std_resid : 0.02f);
    }
    return DT_OK;
}

dt_status dt_gpt_init_weights(dt_gpt *m, uint64_t seed)
{
    const dt_gpt_init init = {.seed = seed};
    return dt_gpt_init_weights_from(m, &init);
}

dt_status dt_gpt_init_weights_from(dt_gpt *m, const dt_gpt_init *init)
{
    size_t n = m->layout.numel;
    float *host = calloc(n, sizeof *host);
    if (!host) return DT_FAIL(DT_ERR_NOMEM, "model init: out of memory for %zu parameters", n);
    dt_status st = DT_OK;
    for (int i = 0; i < m->layout.count && st == DT_OK; i++)
        st = dt__gpt_init_tensor(&m->cfg, &m->layout.info[i], i, init, host + m->layout.info[i].offset);
    if (st == DT_OK) st = m->be->copy(m->be, m->params.data, host, n * sizeof(float), DT_COPY_H2D);
    free(host);
    return st;
}

const dt_gpt_config *dt_gpt_config_of(const dt_gpt *m) { return &m->cfg; }
const dt_paramset *dt_gpt_layout(const dt_gpt *m) { return &m->layout; }
float *dt_gpt_params(dt_gpt *m) { return m->params.data; }
float *dt_gpt_grads(dt_gpt *m) { return m->grads.data; }
dt_backend *dt_gpt_backend(dt_gpt *m) { return m->be; }

void dt_gpt_set_layer_hook(dt_gpt *m, dt_gpt_layer_hook hook, void *ctx)
{
    m->hook = hook;
    m->hook_ctx = ctx;
}

void dt_gpt_set_split_backward(dt_gpt *m, int on) { m->split_backward = on != 0; }

size_t dt_gpt_activation_bytes(const dt_gpt *m) { return m->run ? dt__runner_activation_bytes(m->run) : 0; }
size_t dt_gpt_peak_activation_bytes(const dt_gpt *m) { return m->run ? dt__runner_peak_activation_bytes(m->run) : 0; }

/* ---- the runner for (B, T) ------------------------------------------------- */

/* The span ends when the layer's work has: on an asynchronous backend (a
 * GPU) the kernels are only queued when the host returns, so wait for them
 * first; a failed wait shows again at the next call that needs the device. */
static void dt__gpt_span(void *ctx, int layer, char pass, int64_t t0)
{
    dt_gpt *m = ctx;
    if (!m->hook) return;
    if (m->be->synchronize) (void)m->be->synchronize(m->be);
    m->hook(m->hook_ctx, layer, pass, t0, dt_time_ns());
}

static dt_status dt__gpt_ensure(dt_gpt *m, int B, int T)
{
    if (m->run && B <= m->B && T == m->T) return DT_OK;
    dt__gpt_drop_runner(m);
    /* round_min: the rounding of gmb too */
    const dt__runner_config rc =
        dt__runner_whole(&m->cfg, m->be, B, T, m->precision, m->layout.numel, m->recompute, m->recompute_k);
    DT_CHECK(dt__runner_create(&rc, &m->run));
    static const dt__runner_hooks hooks = {.span = dt__gpt_span};
    dt__runner_set_hooks(m->run, &hooks, m);
    dt__runner_set_fp8(m->run, m->fp8);
    m->B = B;
    m->T = T;
    dt__gpt_bind_views(m);
    return DT_OK;
}

void dt__gpt_set_fp8(dt_gpt *m, dt__fp8 *f)
{
    m->fp8 = f;
    if (m->run) dt__runner_set_fp8(m->run, f);
}

dt_status dt_gpt_set_precision(dt_gpt *m, dt_dtype dtype)
{
    if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "precision %s: expected f32, f16 or bf16", dt_dtype_name(dtype));
    dt__gpt_forget_shadow(m);
    dt_buffer_free(&m->whalf);
    dt_buffer_free(&m->wq);
    dt_buffer_free(&m->gmb);
    dt__gpt_drop_runner(m); /* the next forward sizes the activations and the scratch for the format */
    /* every GEMM input is a half value from now on (weights from whalf,
     * activations and their gradients rounded): tensor cores may take them */
    if (m->be->set_gemm_inputs) DT_CHECK(m->be->set_gemm_inputs(m->be, dtype));
    m->precision = dtype;
    m->weights_rounded = 0;
    if (dtype == DT_F32) return DT_OK;
    size_t n = m->layout.numel;
    DT_CHECK(dt_buffer_alloc(&m->whalf, m->be, n * dt_dtype_size(dtype)));
    DT_CHECK(dt_buffer_alloc(&m->wq, m->be, n * sizeof(float)));
    DT_CHECK(dt_buffer_alloc(&m->gmb, m->be, n * sizeof(float)));
    return dt__gpt_shadow_weights(m);
}

dt_dtype dt_gpt_precision(const dt_gpt *m) { return m->precision; }

dt_status dt_gpt_set_weights_rounded(dt_gpt *m)
{
    if (m->precision == DT_F32)
        return DT_FAIL(DT_ERR_INVALID, "rounded weights: the model is FP32 (expected --fp16 or --bf16 first)");
    dt__gpt_forget_shadow(m);
    dt_buffer_free(&m->whalf);
    dt_buffer_free(&m->wq);
    m->weights_rounded = 1;
    dt__gpt_bind_views(m);
    return DT_OK;
}

/* Half mode: the compute copy of the weights from the FP32 masters. */
static dt_status dt__gpt_sync_weights(dt_gpt *m)
{
    if (m->precision == DT_F32 || m->weights_rounded) return DT_OK;
    size_t n = m->layout.numel;
    DT_CHECK(m->be->cast(m->be, m->whalf.data, m->precision, m->params.data, DT_F32, n));
    return m->be->cast(m->be, m->wq.data, DT_F32, m->whalf.data, m->precision, n);
}

dt_status dt_recompute_parse(const char *s, dt_recompute *out)
{
    if (s && strcmp(s, "full") == 0) *out = DT_RECOMPUTE_FULL;
    else if (s && strcmp(s, "selective") == 0) *out = DT_RECOMPUTE_SELECTIVE;
    else if (s && strcmp(s, "none") == 0) *out = DT_RECOMPUTE_NONE;
    else return DT_FAIL(DT_ERR_INVALID, "--recompute-granularity '%s': expected full or selective", s ? s : "");
    return DT_OK;
}

dt_status dt_gpt_set_recompute(dt_gpt *m, dt_recompute mode, int num_layers)
{
    if (mode == DT_RECOMPUTE_FULL && (num_layers < 1 || num_layers > m->cfg.num_layers))
        return DT_FAIL(DT_ERR_INVALID, "--recompute-num-layers %d: expected 1..%d (the number of layers)", num_layers,
                       m->cfg.num_layers);
    if (mode != DT_RECOMPUTE_NONE && mode != DT_RECOMPUTE_FULL && mode != DT_RECOMPUTE_SELECTIVE)
        return DT_FAIL(DT_ERR_INVALID, "recompute mode %d: expected none, full or selective", (int)mode);
    m->recompute = mode;
    m->recompute_k = mode == DT_RECOMPUTE_FULL ? num_layers : 0;
    dt__gpt_drop_runner(m); /* the activations are sized per mode */
    return DT_OK;
}

size_t dt_gpt_predicted_activation_bytes(const dt_gpt *m, int B, int T)
{
    return dt__runner_shared_floats(m->be, &m->cfg, m->precision, m->recompute, m->recompute_k, B, T) *
           sizeof(float);
}

/* ---- forward / backward --------------------------------------------------- */

/* Before a forward: the sizes checked, the runner for them, and (sync)
 * the compute copy of the weights made from the masters. */
static dt_status dt__gpt_start(dt_gpt *m, int B, int T, int sync)
{
    if (B < 1) return DT_FAIL(DT_ERR_INVALID, "forward: batch size %d (expected >= 1)", B);
    if (T < 1 || T > m->cfg.seq_len)
        return DT_FAIL(DT_ERR_INVALID, "forward: sequence length %d outside 1..%d (the model's context)", T,
                       m->cfg.seq_len);
    if (m->run && dt__runner_has_forward(m->run, 0)) DT_CHECK(dt__runner_release(m->run, 0)); /* never differentiated */
    DT_CHECK(dt__gpt_ensure(m, B, T));
    return sync ? dt__gpt_sync_weights(m) : DT_OK; /* the masters may have changed since the last forward */
}

dt_status dt_gpt_forward(dt_gpt *m, const int32_t *tokens, const int32_t *targets, int B, int T, float *loss)
{
    DT_CHECK(dt__gpt_start(m, B, T, 1));
    float mean = 0.0f;
    DT_CHECK(dt__runner_forward(m->run, 0, tokens, targets, B, T, NULL, &mean, NULL));
    if (loss) *loss = mean;
    return DT_OK;
}

dt_status dt__gpt_forward_check(dt_gpt *m, const int32_t *tokens, const int32_t *targets, int B, int T, int *pos)
{
    DT_CHECK(dt__gpt_start(m, B, T, 0)); /* the weights of the last forward */
    DT_CHECK(dt__runner_forward_check(m->run, 0, tokens, targets, B, T, NULL, pos));
    return dt__runner_release(m->run, 0);
}

dt_status dt_gpt_backward(dt_gpt *m, float loss_scale)
{
    int has_targets = 0, n_counted = 0;
    if (m->run) dt__runner_batch(m->run, 0, NULL, NULL, &has_targets);
    if (!m->run || !dt__runner_has_forward(m->run, 0) || !has_targets)
        return DT_FAIL(DT_ERR_INVALID, "backward: no forward pass with targets to differentiate");
    n_counted = dt__runner_n_counted(m->run, 0);
    const float dloss = n_counted ? loss_scale / (float)n_counted : 0.0f;
    dt_backend *be = m->be;
    if (m->precision != DT_F32) /* this micro-batch's parameter gradients, rounded before they accumulate */
        DT_CHECK(be->memset_zero(be, m->gmb.data, m->layout.numel * sizeof(float)));
    dt__runner_set_trace_split(m->run, m->split_backward && m->hook);
    DT_CHECK(dt__runner_backward(m->run, 0, dloss, NULL));
    if (m->precision != DT_F32) { /* half gradients of this micro-batch, accumulated in FP32 */
        DT_CHECK(dt__round(be, dt__runner_rnd(m->run), m->gmb.data, m->layout.numel));
        DT_CHECK(be->axpy(be, m->grads.data, 1.0f, m->gmb.data, m->layout.numel));
    }
    return DT_OK;
}

dt_status dt_gpt_zero_grad(dt_gpt *m)
{
    return m->be->memset_zero(m->be, m->grads.data, m->layout.numel * sizeof(float));
}

dt_status dt_gpt_position_stats(dt_gpt *m, float *losses, uint8_t *correct)
{
    int has_targets = 0;
    if (m->run) dt__runner_batch(m->run, 0, NULL, NULL, &has_targets);
    if (!has_targets) return DT_FAIL(DT_ERR_INVALID, "position stats: no forward pass with targets");
    return dt__runner_position_stats(m->run, 0, losses, correct);
}

dt_status dt_gpt_logits(dt_gpt *m, float *out)
{
    if (!m->run || !dt__runner_has_forward(m->run, 0))
        return DT_FAIL(DT_ERR_INVALID, "logits: no forward pass (or spent by backward)");
    int B, T;
    dt__runner_batch(m->run, 0, &B, &T, NULL);
    const dt__head_acts *h = dt__runner_head(m->run, 0);
    const size_t N = (size_t)B * T, V = (size_t)m->cfg.vocab_size, ld = (size_t)h->ld;
    if (ld == V) return m->be->copy(m->be, out, h->logits, N * V * sizeof(float), DT_COPY_D2H);
    /* padded rows: one copy to the host, then the rows packed */
    float *hl = malloc(N * ld * sizeof *hl);
    if (!hl) return DT_FAIL(DT_ERR_NOMEM, "logits: out of memory for %zu x %zu floats", N, ld);
    dt_status st = m->be->copy(m->be, hl, h->logits, N * ld * sizeof(float), DT_COPY_D2H);
    if (st == DT_OK)
        for (size_t i = 0; i < N; i++) memcpy(out + i * V, hl + i * ld, V * sizeof(float));
    free(hl);
    return st;
}

dt_status dt_gpt_logits_row(dt_gpt *m, int b, int t, float *out)
{
    if (!m->run || !dt__runner_has_forward(m->run, 0))
        return DT_FAIL(DT_ERR_INVALID, "logits: no forward pass (or spent by backward)");
    int B, T;
    dt__runner_batch(m->run, 0, &B, &T, NULL);
    if (b < 0 || b >= B || t < 0 || t >= T)
        return DT_FAIL(DT_ERR_INVALID, "logits: position (%d, %d) outside the last forward's (%d, %d)", b, t, B, T);
    const dt__head_acts *h = dt__runner_head(m->run, 0);
    const size_t row = (size_t)b * T + (size_t)t;
    return m->be->copy(m->be, out, h->logits + row * (size_t)h->ld, (size_t)m->cfg.vocab_size * sizeof(float),
                       DT_COPY_D2H);
}
