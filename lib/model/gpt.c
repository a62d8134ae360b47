/* gpt.c: the GPT model: presets, the flat parameter layout, the embedding
 * and head modules, and forward/backward over the layers (see dt_gpt.h).
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
 * range. The layer modules (embedding.c, block.c, head.c) do the math; this
 * file owns the layout, the buffers and the order of the layers. Invariant: activations saved by the last forward are valid until
 * the next forward; backward needs them unchanged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_gpt.h"
#include "dt_rng.h"
#include "dt_time.h"
#include "dt_internal.h"
#include "gpt_layers.h"

#define DT__NBLOCK_TENSORS 12

struct dt_gpt {
    dt_gpt_config cfg;
    dt_backend *be;
    dt_paramset layout;
    dt_buffer params, grads;
    float *wte, *wpe, *gwte, *gwpe;     /* (V,C), (maxT,C) parameter and gradient views */
    dt__block_params *blocks, *gblocks; /* (L) */
    dt__head_params head, ghead;

    /* activations of the last forward, for (B, T) */
    int B, T;         /* sizes the buffers below were made for */
    int cur_B, cur_T; /* sizes of the last forward */
    int have_forward;
    dt_buffer act_buf; /* backs the arena */
    dt__arena arena;
    dt__block_acts *acts; /* (L) */
    float *x0;            /* (B,T,C) embedding output */
    dt__head_acts head_acts;
    dt_buffer work;                /* not saved: tokens, targets, losses, flags, backward scratch */
    int32_t *d_tokens, *d_targets; /* (B,T) */
    float *losses;                 /* (B,T) */
    uint8_t *correct;              /* (B,T) */
    dt__block_scratch scratch;
    float *dres;   /* (B,T,C) residual-stream gradient */
    int n_counted; /* targets >= 0 in the last forward */
    int has_targets;

    /* mixed precision (dt_gpt_set_precision) */
    dt_dtype precision; /* DT_F32, DT_F16 or DT_BF16 */
    dt__rounder rnd;    /* storage rounding; scratch in round_buf */
    dt_buffer round_buf;
    dt_buffer whalf;                    /* (numel) the compute copy of the weights, in precision */
    dt_buffer wq;                       /* (numel) the same values as FP32, read by the GEMMs (or whalf's) */
    dt_buffer gmb;                      /* (numel) one micro-batch's parameter gradients, rounded before accumulation */
    int weights_rounded;                /* dt_gpt_set_weights_rounded: params hold 16-bit values, no whalf/wq copies */
    void *(*packed)[DT__BLOCK_NFIELDS]; /* (L) half mode: each block's saved tensors in 2-byte storage */

    /* activation recomputation */
    dt_recompute recompute;
    int recompute_k;  /* full: blocks per checkpointed group */
    float **ckpt;     /* (G) full: output of each group, (B,T,C) each */
    size_t *mark;     /* (L) arena marks: full, before ckpt[g]; else before block l's saved activations,
                       * released when its backward is done (the arena's use falls through the backward) */
    size_t head_mark; /* arena mark taken before the head's activations */

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
    static const char *const names[DT__NBLOCK_TENSORS] = {"ln1.w", "ln1.b", "qkv.w", "qkv.b", "attproj.w", "attproj.b",
                                                          "ln2.w", "ln2.b", "fc.w",  "fc.b",  "fcproj.w",  "fcproj.b"};
    const int64_t shapes[DT__NBLOCK_TENSORS][2] = {{C, 0}, {C, 0}, {3 * C, C}, {3 * C, 0}, {C, C},     {C, 0},
                                                   {C, 0}, {C, 0}, {4 * C, C}, {4 * C, 0}, {C, 4 * C}, {C, 0}};
    for (int l = 0; l < cfg->num_layers; l++)
        for (int i = 0; i < DT__NBLOCK_TENSORS; i++) {
            snprintf(name, sizeof name, "h.%d.%s", l, names[i]);
            int nd = shapes[i][1] ? 2 : 1;
            DT_CHECK(dt_paramset_add(ps, name, nd, shapes[i], nd == 2));
        }
    DT_CHECK(dt_paramset_add(ps, "lnf.w", 1, (int64_t[]){C}, 0));
    DT_CHECK(dt_paramset_add(ps, "lnf.b", 1, (int64_t[]){C}, 0));
    if (!cfg->tie_embeddings) DT_CHECK(dt_paramset_add(ps, "lm_head.w", 2, (int64_t[]){V, C}, 1));
    return DT_OK;
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

/* Point the named views (params or grads) into a flat buffer. */
static void dt__gpt_bind(const dt_gpt *m, float *base, float **wte, float **wpe, dt__block_params *blocks,
                         dt__head_params *head)
{
    const dt_param_info *in = m->layout.info;
    int k = 0;
    *wte = base + in[k++].offset;
    *wpe = base + in[k++].offset;
    for (int l = 0; l < m->cfg.num_layers; l++) {
        float **f[DT__NBLOCK_TENSORS] = {&blocks[l].ln1w, &blocks[l].ln1b,     &blocks[l].qkvw,
                                         &blocks[l].qkvb, &blocks[l].attprojw, &blocks[l].attprojb,
                                         &blocks[l].ln2w, &blocks[l].ln2b,     &blocks[l].fcw,
                                         &blocks[l].fcb,  &blocks[l].fcprojw,  &blocks[l].fcprojb};
        for (int i = 0; i < DT__NBLOCK_TENSORS; i++) *f[i] = base + in[k++].offset;
    }
    head->lnfw = base + in[k++].offset;
    head->lnfb = base + in[k++].offset;
    head->lmw = m->cfg.tie_embeddings ? *wte : base + in[k++].offset;
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
    m->blocks = calloc((size_t)cfg->num_layers, sizeof *m->blocks);
    m->gblocks = calloc((size_t)cfg->num_layers, sizeof *m->gblocks);
    m->acts = calloc((size_t)cfg->num_layers, sizeof *m->acts);
    m->ckpt = calloc((size_t)cfg->num_layers, sizeof *m->ckpt);
    m->mark = calloc((size_t)cfg->num_layers, sizeof *m->mark);
    m->packed = calloc((size_t)cfg->num_layers, sizeof *m->packed);
    if (!m->blocks || !m->gblocks || !m->acts || !m->ckpt || !m->mark || !m->packed) {
        st = DT_FAIL(DT_ERR_NOMEM, "model: out of memory");
        goto fail;
    }
    DT_CHECK_GOTO(dt__gpt_whole_layout(&m->cfg, &m->layout), st, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&m->params, be, m->layout.numel * sizeof(float)), st, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&m->grads, be, m->layout.numel * sizeof(float)), st, fail);
    dt__gpt_bind(m, m->params.data, &m->wte, &m->wpe, m->blocks, &m->head);
    dt__gpt_bind(m, m->grads.data, &m->gwte, &m->gwpe, m->gblocks, &m->ghead);
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

void dt_gpt_free(dt_gpt *m)
{
    if (m && m->precision != DT_F32 && m->be && m->be->set_gemm_inputs)
        (void)m->be->set_gemm_inputs(m->be, DT_F32); /* the promise ends with the model */
    if (!m) return;
    dt__gpt_forget_shadow(m);
    dt_buffer_free(&m->params);
    dt_buffer_free(&m->grads);
    dt_buffer_free(&m->act_buf);
    dt_buffer_free(&m->work);
    dt_buffer_free(&m->round_buf);
    dt_buffer_free(&m->whalf);
    dt_buffer_free(&m->wq);
    dt_buffer_free(&m->gmb);
    dt_paramset_free(&m->layout);
    free(m->blocks);
    free(m->gblocks);
    free(m->acts);
    free(m->ckpt);
    free(m->mark);
    free(m->packed);
    free(m);
}

void dt__gpt_init_tensor(const dt_gpt_config *cfg, const dt_param_info *p, int index, uint64_t seed, float *w)
{
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
}

dt_status dt_gpt_init_weights(dt_gpt *m, uint64_t seed)
{
    size_t n = m->layout.numel;
    float *host = calloc(n, sizeof *host);
    if (!host) return DT_FAIL(DT_ERR_NOMEM, "model init: out of memory for %zu parameters", n);
    for (int i = 0; i < m->layout.count; i++)
        dt__gpt_init_tensor(&m->cfg, &m->layout.info[i], i, seed, host + m->layout.info[i].offset);
    dt_status st = m->be->copy(m->be, m->params.data, host, n * sizeof(float), DT_COPY_H2D);
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

size_t dt_gpt_activation_bytes(const dt_gpt *m) { return m->arena.used * sizeof(float); }
size_t dt_gpt_peak_activation_bytes(const dt_gpt *m) { return m->arena.peak * sizeof(float); }

/* ---- buffers for (B, T) -------------------------------------------------- */

static size_t dt__pad(size_t n) { return (n + 15) & ~(size_t)15; }

/* Peak saved-activation floats for (B, T) under a recomputation mode; the
 * arena is sized by it and measures what is really used (the tests check
 * that the two agree). With E, A, H the embedding, block and head
 * footprints, P = B*T*C, ATT the attention log-sum-exp, G = ceil(L/K):
 *   none:      E + L*A + H
 *   selective: E + L*(A - ATT) + max(ATT, H)
 *   full, K:   E + max(G*P + H, max over groups g of (g+1)*P + K_g*A)
 *              (group outputs kept; one group's activations live at a
 *              time; K_g = K but for a shorter last group). For L
 *              divisible by K that is E + G*P + max(K*A, H). */
/* Half mode without full recomputation: each block keeps its saved tensors
 * packed (2 bytes an element; statistics FP32; the last block's output FP32
 * for the head; no attention lse under selective), and one block's FP32
 * working set plus its unpacked input (A + P) lives while it runs. */
/* Block l's half storage (lib/model/block.c): the last block's output FP32 for the head. */
static dt__block_pack dt__gpt_pack_of(const dt_gpt *m, int l, int with_att, int B, int T)
{
    return (dt__block_pack){.cfg = &m->cfg,
                            .t = 1,
                            .B = B,
                            .T = T,
                            .with_att = with_att,
                            .out_fp32 = l == m->cfg.num_layers - 1,
                            .dtype = m->precision};
}

static int dt__gpt_packs(const dt_gpt *m) { return m->precision != DT_F32 && m->recompute != DT_RECOMPUTE_FULL; }

static size_t dt__gpt_act_floats(const dt_gpt *m, int B, int T)
{
    const dt_gpt_config *c = &m->cfg;
    const dt_recompute mode = m->recompute;
    const int K = m->recompute_k;
    const size_t L = (size_t)c->num_layers, E = dt__embed_act_floats(c, B, T), H = dt__head_act_floats(m->be, c, B, T);
    const size_t A = dt__block_act_floats(c, B, T, 1);
    if (dt__gpt_packs(m)) {
        const int with_att = mode != DT_RECOMPUTE_SELECTIVE;
        size_t stores = 0, P = dt__pad((size_t)B * T * c->hidden_size);
        for (size_t l = 0; l < L; l++) {
            const dt__block_pack k = dt__gpt_pack_of(m, (int)l, with_att, B, T);
            stores += dt__block_packed_floats(&k);
        }
        return E + stores + DT_MAX(A + P, H);
    }
    switch (mode) {
    case DT_RECOMPUTE_SELECTIVE: {
        size_t att = dt__block_att_floats(c, B, T);
        return E + L * (A - att) + DT_MAX(att, H);
    }
    case DT_RECOMPUTE_FULL: {
        /* Forward of group g holds g+1 group outputs and K_g blocks; the
         * head holds all G outputs; backward of group g holds g outputs. */
        size_t G = (L + (size_t)K - 1) / (size_t)K, P = dt__pad((size_t)B * T * c->hidden_size);
        size_t peak = G * P + H;
        for (size_t g = 0; g < G; g++) {
            size_t Kg = DT_MIN((size_t)K, L - g * (size_t)K);
            peak = DT_MAX(peak, (g + 1) * P + Kg * A);
        }
        return E + peak;
    }
    case DT_RECOMPUTE_NONE: break;
    }
    return E + L * A + H;
}

static dt_status dt__gpt_ensure(dt_gpt *m, int B, int T)
{
    if (B <= m->B && T == m->T && m->act_buf.data) return DT_OK;
    const dt_gpt_config *c = &m->cfg;
    dt_buffer_free(&m->act_buf);
    dt_buffer_free(&m->work);
    m->B = m->T = 0;
    size_t acts = dt__gpt_act_floats(m, B, T);
    DT_CHECK(dt_buffer_alloc(&m->act_buf, m->be, acts * sizeof(float)));
    m->arena.base = m->act_buf.data;
    m->arena.capacity = acts;
    m->arena.used = m->arena.peak = 0;
    size_t BT = (size_t)B * T;
    size_t work = 2 * dt__pad(BT) /* tokens, targets (int32) */ + dt__pad(BT) /* losses */ +
                  dt__pad(BT / 4 + 1) /* correct flags */ + dt__block_scratch_floats(c, B, T) +
                  dt__pad(BT * c->hidden_size);
    DT_CHECK(dt_buffer_alloc(&m->work, m->be, work * sizeof(float)));
    dt_buffer_free(&m->round_buf);
    m->rnd.scratch = NULL;
    m->rnd.capacity = 0;
    if (m->precision != DT_F32) {
        size_t cap = DT_MAX(DT_MAX((size_t)B * c->num_heads * T * T, 4 * BT * c->hidden_size),
                            DT_MAX(BT * dt__head_ld(m->be, c->vocab_size), m->layout.numel));
        DT_CHECK(dt_buffer_alloc(&m->round_buf, m->be, cap * dt_dtype_size(m->precision)));
        m->rnd.scratch = m->round_buf.data;
        m->rnd.capacity = cap;
    }
    float *w = m->work.data;
    m->d_tokens = (int32_t *)w, w += dt__pad(BT);
    m->d_targets = (int32_t *)w, w += dt__pad(BT);
    m->losses = w, w += dt__pad(BT);
    m->correct = (uint8_t *)w, w += dt__pad(BT / 4 + 1);
    dt__block_scratch_bind(&m->scratch, c, B, T, w);
    w += dt__block_scratch_floats(c, B, T);
    m->dres = w;
    m->B = B;
    m->T = T;
    return DT_OK;
}

/* ---- forward / backward --------------------------------------------------- */

/* The span ends when the layer's work has: on an asynchronous backend (a
 * GPU) the kernels are only queued when the host returns, so wait for them
 * first; a failed wait shows again at the next call that needs the device. */
static void dt__hook(dt_gpt *m, int layer, char pass, int64_t t0)
{
    if (!m->hook) return;
    if (m->be->synchronize) (void)m->be->synchronize(m->be);
    m->hook(m->hook_ctx, layer, pass, t0, dt_time_ns());
}

static const dt__rounder *dt__gpt_rnd(const dt_gpt *m) { return m->precision == DT_F32 ? NULL : &m->rnd; }

/* Block l's backward from its saved activations a and input x, begun at
 * t0: B then W at once, one span ('B'), or under dt_gpt_set_split_backward
 * two ('b', then 'W'). dt__block_backward is exactly these two calls, so
 * the arithmetic is the same either way (W takes GELU's output from B or
 * recomputes it: the same bits). When it is done the arena is
 * released to `release` (SIZE_MAX: kept) before the last hook, which so
 * sees only the activations still held. */
static dt_status dt__gpt_block_backward(dt_gpt *m, int l, const dt__block_acts *a, const float *x, int64_t t0,
                                        size_t release)
{
    const dt_gpt_config *c = &m->cfg;
    const int B = m->cur_B, T = m->cur_T;
    if (!m->split_backward || !m->hook) {
        DT_CHECK(dt__block_backward(m->be, c, &m->blocks[l], &m->gblocks[l], a, &m->scratch, x, m->dres, B, T,
                                    dt__gpt_rnd(m)));
        if (release != SIZE_MAX) dt__arena_release(&m->arena, release);
        dt__hook(m, l, 'B', t0);
        return DT_OK;
    }
    /* traced apart to profile a zero-bubble schedule, whose deferred W
     * recomputes GELU's output (gpt_layers.h): so does this W, so that its
     * span costs what a pipeline's W does */
    dt__block_keep k = m->scratch.keep;
    k.gelu = NULL;
    DT_CHECK(dt__block_backward_b(m->be, c, &m->blocks[l], a, &m->scratch, x, m->dres, &k, B, T, dt__gpt_rnd(m)));
    dt__hook(m, l, 'b', t0);
    const int64_t t1 = dt_time_ns();
    DT_CHECK(dt__block_backward_w(m->be, c, 1, &m->blocks[l], &m->gblocks[l], a, x, &k, B, T, dt__gpt_rnd(m)));
    if (release != SIZE_MAX) dt__arena_release(&m->arena, release);
    dt__hook(m, l, 'W', t1);
    return DT_OK;
}

/* Run the blocks of full-recomputation group g from its input x: their
 * activations are allocated on top of the arena (the caller releases them),
 * and the group's output is copied into ckpt[g] on the first pass ('F');
 * on a recomputation ('R') the output stays in the block's own buffer. */
static dt_status dt__gpt_group_forward(dt_gpt *m, int g, const float *x, char pass)
{
    const dt_gpt_config *c = &m->cfg;
    const int B = m->cur_B, T = m->cur_T;
    int l0 = g * m->recompute_k, l1 = DT_MIN(l0 + m->recompute_k, c->num_layers);
    size_t mark = dt__arena_mark(&m->arena);
    for (int l = l0; l < l1; l++) {
        int64_t t0 = dt_time_ns();
        DT_CHECK(dt__block_acts_alloc(&m->arena, c, B, T, 1, &m->scratch.tmp, &m->acts[l]));
        DT_CHECK(dt__block_forward(m->be, c, &m->blocks[l], &m->acts[l], x, B, T, dt__gpt_rnd(m)));
        x = m->acts[l].out;
        dt__hook(m, l, pass, t0);
    }
    if (pass == 'F') {
        DT_CHECK(m->be->copy(m->be, m->ckpt[g], x, (size_t)B * T * c->hidden_size * sizeof(float), DT_COPY_D2D));
        dt__arena_release(&m->arena, mark);
    }
    return DT_OK;
}

dt_status dt_gpt_set_precision(dt_gpt *m, dt_dtype dtype)
{
    if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "precision %s: expected f32, f16 or bf16", dt_dtype_name(dtype));
    dt__gpt_forget_shadow(m);
    dt_buffer_free(&m->whalf);
    dt_buffer_free(&m->wq);
    dt_buffer_free(&m->gmb);
    dt_buffer_free(&m->act_buf); /* the next forward sizes the scratch for the format */
    m->arena = (dt__arena){0};
    m->have_forward = 0;
    /* every GEMM input is a half value from now on (weights from whalf,
     * activations and their gradients rounded): tensor cores may take them */
    if (m->be->set_gemm_inputs) DT_CHECK(m->be->set_gemm_inputs(m->be, dtype));
    m->precision = dtype;
    m->weights_rounded = 0;
    m->rnd.dtype = dtype;
    if (dtype == DT_F32) {
        dt__gpt_bind(m, m->params.data, &m->wte, &m->wpe, m->blocks, &m->head);
        dt__gpt_bind(m, m->grads.data, &m->gwte, &m->gwpe, m->gblocks, &m->ghead);
        return DT_OK;
    }
    size_t n = m->layout.numel;
    DT_CHECK(dt_buffer_alloc(&m->whalf, m->be, n * dt_dtype_size(dtype)));
    DT_CHECK(dt_buffer_alloc(&m->wq, m->be, n * sizeof(float)));
    DT_CHECK(dt_buffer_alloc(&m->gmb, m->be, n * sizeof(float)));
    dt__gpt_bind(m, m->wq.data, &m->wte, &m->wpe, m->blocks, &m->head);
    dt__gpt_bind(m, m->gmb.data, &m->gwte, &m->gwpe, m->gblocks, &m->ghead);
    return dt__gpt_shadow_weights(m);
}

dt_dtype dt_gpt_precision(const dt_gpt *m) { return m->precision; }

/* The weights the forward computes with (half mode: the rounded copy, as
 * of the last forward) and its storage rounding (NULL in FP32). */
const float *dt__gpt_forward_weights(dt_gpt *m) { return m->wq.data ? (const float *)m->wq.data : m->params.data; }
const dt__rounder *dt__gpt_rounder(const dt_gpt *m) { return dt__gpt_rnd(m); }

dt_status dt_gpt_set_weights_rounded(dt_gpt *m)
{
    if (m->precision == DT_F32)
        return DT_FAIL(DT_ERR_INVALID, "rounded weights: the model is FP32 (expected --fp16 or --bf16 first)");
    dt__gpt_forget_shadow(m);
    dt_buffer_free(&m->whalf);
    dt_buffer_free(&m->wq);
    m->weights_rounded = 1;
    dt__gpt_bind(m, m->params.data, &m->wte, &m->wpe, m->blocks, &m->head);
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

/* The input of block l as FP32: the embedding output, or block l-1's packed
 * output unpacked into a temporary on top of the arena. */
static dt_status dt__gpt_block_input(dt_gpt *m, int l, const float **x)
{
    if (l == 0) {
        *x = m->x0;
        return DT_OK;
    }
    size_t n = (size_t)m->cur_B * m->cur_T * m->cfg.hidden_size;
    float *x32;
    DT_CHECK(dt__arena_alloc(&m->arena, n, &x32));
    DT_CHECK(m->be->cast(m->be, x32, DT_F32, m->packed[l - 1][DT__BLOCK_OUT], m->precision, n));
    *x = x32;
    return DT_OK;
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
    m->have_forward = 0;
    /* The arena is sized per mode: drop it so the next forward sizes it anew. */
    dt_buffer_free(&m->act_buf);
    m->arena = (dt__arena){0};
    return DT_OK;
}

size_t dt_gpt_predicted_activation_bytes(const dt_gpt *m, int B, int T)
{
    return dt__gpt_act_floats(m, B, T) * sizeof(float);
}

dt_status dt_gpt_forward(dt_gpt *m, const int32_t *tokens, const int32_t *targets, int B, int T, float *loss)
{
    const dt_gpt_config *c = &m->cfg;
    dt_backend *be = m->be;
    if (B < 1) return DT_FAIL(DT_ERR_INVALID, "forward: batch size %d (expected >= 1)", B);
    if (T < 1 || T > c->seq_len)
        return DT_FAIL(DT_ERR_INVALID, "forward: sequence length %d outside 1..%d (the model's context)", T,
                       c->seq_len);
    for (int i = 0; i < B * T; i++) {
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return DT_FAIL(DT_ERR_INVALID, "forward: token %d at position %d outside the vocabulary of %d", tokens[i],
                           i, c->vocab_size);
        if (targets && targets[i] >= c->vocab_size)
            return DT_FAIL(DT_ERR_INVALID, "forward: target %d at position %d outside the vocabulary of %d", targets[i],
                           i, c->vocab_size);
    }
    DT_CHECK(dt__gpt_ensure(m, B, T));
    DT_CHECK(dt__gpt_sync_weights(m)); /* the masters may have changed since the last forward */
    m->have_forward = 0;
    m->cur_B = B;
    m->cur_T = T;
    const int N = B * T;
    dt__arena_reset(&m->arena);
    DT_CHECK(be->copy(be, m->d_tokens, tokens, (size_t)N * sizeof(int32_t), DT_COPY_H2D));
    m->has_targets = targets != NULL;
    m->n_counted = 0;
    if (targets) {
        DT_CHECK(be->copy(be, m->d_targets, targets, (size_t)N * sizeof(int32_t), DT_COPY_H2D));
        for (int i = 0; i < N; i++) m->n_counted += targets[i] >= 0;
    }

    int64_t t0 = dt_time_ns();
    DT_CHECK(dt__embed_forward(be, c, m->wte, m->wpe, m->d_tokens, &m->arena, &m->x0, B, T, dt__gpt_rnd(m)));
    dt__hook(m, -1, 'F', t0);
    const float *x = m->x0;
    if (m->recompute == DT_RECOMPUTE_FULL) {
        for (int g = 0, l0 = 0; l0 < c->num_layers; g++, l0 += m->recompute_k) {
            m->mark[g] = dt__arena_mark(&m->arena);
            DT_CHECK(dt__arena_alloc(&m->arena, (size_t)N * c->hidden_size, &m->ckpt[g]));
            DT_CHECK(dt__gpt_group_forward(m, g, x, 'F'));
            x = m->ckpt[g];
        }
    } else if (dt__gpt_packs(m)) {
        /* half storage: each block runs in an FP32 working set that is
         * packed into 2-byte stores when the block is done */
        const int with_att = m->recompute != DT_RECOMPUTE_SELECTIVE;
        for (int l = 0; l < c->num_layers; l++) {
            t0 = dt_time_ns();
            const dt__block_pack k = dt__gpt_pack_of(m, l, with_att, B, T);
            m->mark[l] = dt__arena_mark(&m->arena);
            DT_CHECK(dt__block_pack_alloc(&k, &m->arena, m->packed[l]));
            size_t mark = dt__arena_mark(&m->arena);
            dt__block_acts w;
            const float *xin;
            DT_CHECK(dt__block_acts_alloc(&m->arena, c, B, T, 1, &m->scratch.tmp, &w));
            DT_CHECK(dt__gpt_block_input(m, l, &xin));
            DT_CHECK(dt__block_forward(be, c, &m->blocks[l], &w, xin, B, T, dt__gpt_rnd(m)));
            DT_CHECK(dt__block_pack_copy(&k, be, &w, m->packed[l], 1));
            dt__arena_release(&m->arena, mark);
            dt__hook(m, l, 'F', t0);
        }
        if (c->num_layers) x = m->packed[c->num_layers - 1][DT__BLOCK_OUT]; /* kept FP32 */
    } else {
        const int with_att = m->recompute != DT_RECOMPUTE_SELECTIVE;
        for (int l = 0; l < c->num_layers; l++) {
            t0 = dt_time_ns();
            m->mark[l] = dt__arena_mark(&m->arena);
            DT_CHECK(dt__block_acts_alloc(&m->arena, c, B, T, with_att, &m->scratch.tmp, &m->acts[l]));
            size_t mark = dt__arena_mark(&m->arena);
            if (!with_att) /* the attention lse live only while the block runs */
                DT_CHECK(dt__arena_alloc(&m->arena, dt__block_att_floats(c, B, T), &m->acts[l].lse));
            DT_CHECK(dt__block_forward(be, c, &m->blocks[l], &m->acts[l], x, B, T, dt__gpt_rnd(m)));
            if (!with_att) {
                dt__arena_release(&m->arena, mark);
                m->acts[l].lse = NULL;
            }
            x = m->acts[l].out;
            dt__hook(m, l, 'F', t0);
        }
    }
    t0 = dt_time_ns();
    m->head_mark = dt__arena_mark(&m->arena);
    DT_CHECK(dt__head_forward(be, c, &m->head, &m->arena, &m->head_acts, x, targets ? m->d_targets : NULL, m->losses,
                              m->correct, B, T, dt__gpt_rnd(m)));
    float mean_loss = 0.0f;
    if (targets) DT_CHECK(dt__head_mean_loss(be, m->losses, N, m->n_counted, &mean_loss));
    dt__hook(m, c->num_layers, 'F', t0);
    if (loss) *loss = mean_loss;
    m->have_forward = 1;
    return DT_OK;
}

dt_status dt_gpt_backward(dt_gpt *m, float loss_scale)
{
    const dt_gpt_config *c = &m->cfg;
    dt_backend *be = m->be;
    if (!m->have_forward || !m->has_targets)
        return DT_FAIL(DT_ERR_INVALID, "backward: no forward pass with targets to differentiate");
    const int B = m->cur_B, T = m->cur_T;
    const float dloss = m->n_counted ? loss_scale / (float)m->n_counted : 0.0f;

    const int L = c->num_layers, full = m->recompute == DT_RECOMPUTE_FULL;
    const int G = full ? (L + m->recompute_k - 1) / m->recompute_k : 0;
    int64_t t0 = dt_time_ns();
    const int packs = dt__gpt_packs(m);
    const float *xL = full    ? m->ckpt[G - 1]
                      : !L    ? m->x0
                      : packs ? (const float *)m->packed[L - 1][DT__BLOCK_OUT]
                              : m->acts[L - 1].out;
    if (m->precision != DT_F32) /* this micro-batch's parameter gradients, rounded before they accumulate */
        DT_CHECK(be->memset_zero(be, m->gmb.data, m->layout.numel * sizeof(float)));
    if (m->split_backward && m->hook) { /* B, then W, as dt__head_backward does them */
        DT_CHECK(dt__head_backward_b(be, c, &m->head, &m->head_acts, xL, m->d_targets, m->losses, dloss, m->dres,
                                     m->scratch.dbtc, B, T, dt__gpt_rnd(m)));
        dt__hook(m, L, 'b', t0);
        t0 = dt_time_ns();
        DT_CHECK(dt__head_backward_w(be, c, &m->head, &m->ghead, &m->head_acts, xL, m->scratch.dbtc, B, T));
    } else {
        DT_CHECK(dt__head_backward(be, c, &m->head, &m->ghead, &m->head_acts, xL, m->d_targets, m->losses, dloss,
                                   m->dres, m->scratch.dbtc, B, T, dt__gpt_rnd(m)));
    }
    dt__arena_release(&m->arena, m->head_mark);
    dt__hook(m, L, m->split_backward && m->hook ? 'W' : 'B', t0);
    if (full) {
        for (int g = G - 1; g >= 0; g--) {
            /* The group's own output is spent; recompute its blocks from its input. */
            dt__arena_release(&m->arena, m->mark[g]);
            const float *xin = g ? m->ckpt[g - 1] : m->x0;
            size_t mark = dt__arena_mark(&m->arena);
            DT_CHECK(dt__gpt_group_forward(m, g, xin, 'R'));
            int l0 = g * m->recompute_k, l1 = DT_MIN(l0 + m->recompute_k, L);
            for (int l = l1 - 1; l >= l0; l--) { /* the group's lowest block releases the group */
                const float *x = l > l0 ? m->acts[l - 1].out : xin;
                DT_CHECK(dt__gpt_block_backward(m, l, &m->acts[l], x, dt_time_ns(), l == l0 ? mark : SIZE_MAX));
            }
        }
    } else if (packs) {
        for (int l = L - 1; l >= 0; l--) {
            dt__block_acts w;
            const float *x;
            const dt__block_pack k = dt__gpt_pack_of(m, l, m->recompute != DT_RECOMPUTE_SELECTIVE, B, T);
            DT_CHECK(dt__block_acts_alloc(&m->arena, c, B, T, 1, &m->scratch.tmp, &w));
            DT_CHECK(dt__block_pack_copy(&k, be, &w, m->packed[l], 0));
            DT_CHECK(dt__gpt_block_input(m, l, &x));
            if (m->recompute == DT_RECOMPUTE_SELECTIVE) {
                t0 = dt_time_ns();
                DT_CHECK(be->attention_forward(be, m->scratch.dbtc, w.lse, w.qkv, B, T, c->hidden_size, c->num_heads));
                dt__hook(m, l, 'R', t0);
            }
            DT_CHECK(dt__gpt_block_backward(m, l, &w, x, dt_time_ns(), m->mark[l])); /* its stores too */
        }
    } else {
        for (int l = L - 1; l >= 0; l--) {
            const float *x = l ? m->acts[l - 1].out : m->x0;
            if (m->recompute == DT_RECOMPUTE_SELECTIVE) {
                /* Recompute the attention core (its lse) from the kept
                 * qkv; its output goes to scratch (the kept atty is identical). */
                t0 = dt_time_ns();
                DT_CHECK(dt__arena_alloc(&m->arena, dt__block_att_floats(c, B, T), &m->acts[l].lse));
                DT_CHECK(be->attention_forward(be, m->scratch.dbtc, m->acts[l].lse, m->acts[l].qkv, B, T,
                                               c->hidden_size, c->num_heads));
                dt__hook(m, l, 'R', t0);
            }
            DT_CHECK(dt__gpt_block_backward(m, l, &m->acts[l], x, dt_time_ns(), m->mark[l]));
            if (m->recompute == DT_RECOMPUTE_SELECTIVE) m->acts[l].lse = NULL;
        }
    }
    /* the embedding's backward reads the tokens and dres only: every activation is spent */
    m->have_forward = 0;
    dt__arena_reset(&m->arena);
    t0 = dt_time_ns();
    DT_CHECK(dt__embed_backward(be, c, m->gwte, m->gwpe, m->d_tokens, m->dres, B, T));
    if (m->precision != DT_F32) { /* half gradients of this micro-batch, accumulated in FP32 */
        DT_CHECK(dt__round(be, &m->rnd, m->gmb.data, m->layout.numel));
        DT_CHECK(be->axpy(be, m->grads.data, 1.0f, m->gmb.data, m->layout.numel));
    }
    dt__hook(m, -1, 'B', t0);
    return DT_OK;
}

dt_status dt_gpt_zero_grad(dt_gpt *m)
{
    return m->be->memset_zero(m->be, m->grads.data, m->layout.numel * sizeof(float));
}

dt_status dt_gpt_position_stats(dt_gpt *m, float *losses, uint8_t *correct)
{
    if (!m->has_targets || m->cur_B == 0)
        return DT_FAIL(DT_ERR_INVALID, "position stats: no forward pass with targets");
    size_t N = (size_t)m->cur_B * m->cur_T;
    if (losses) DT_CHECK(m->be->copy(m->be, losses, m->losses, N * sizeof(float), DT_COPY_D2H));
    if (correct) DT_CHECK(m->be->copy(m->be, correct, m->correct, N, DT_COPY_D2H));
    return DT_OK;
}

dt_status dt_gpt_logits(dt_gpt *m, float *out)
{
    if (!m->have_forward) return DT_FAIL(DT_ERR_INVALID, "logits: no forward pass (or spent by backward)");
    const size_t N = (size_t)m->cur_B * m->cur_T, V = (size_t)m->cfg.vocab_size, ld = (size_t)m->head_acts.ld;
    if (ld == V) return m->be->copy(m->be, out, m->head_acts.logits, N * V * sizeof(float), DT_COPY_D2H);
    /* padded rows: one copy to the host, then the rows packed */
    float *h = malloc(N * ld * sizeof *h);
    if (!h) return DT_FAIL(DT_ERR_NOMEM, "logits: out of memory for %zu x %zu floats", N, ld);
    dt_status st = m->be->copy(m->be, h, m->head_acts.logits, N * ld * sizeof(float), DT_COPY_D2H);
    if (st == DT_OK)
        for (size_t i = 0; i < N; i++) memcpy(out + i * V, h + i * ld, V * sizeof(float));
    free(h);
    return st;
}

dt_status dt_gpt_logits_row(dt_gpt *m, int b, int t, float *out)
{
    if (!m->have_forward) return DT_FAIL(DT_ERR_INVALID, "logits: no forward pass (or spent by backward)");
    if (b < 0 || b >= m->cur_B || t < 0 || t >= m->cur_T)
        return DT_FAIL(DT_ERR_INVALID, "logits: position (%d, %d) outside the last forward's (%d, %d)", b, t, m->cur_B,
                       m->cur_T);
    const size_t row = (size_t)b * m->cur_T + (size_t)t;
    return m->be->copy(m->be, out, m->head_acts.logits + row * (size_t)m->head_acts.ld,
                       (size_t)m->cfg.vocab_size * sizeof(float), DT_COPY_D2H);
}
