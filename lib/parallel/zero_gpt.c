/* zero_gpt.c: the GPT under ZeRO stages 2 and 3 (see zero_gpt.h and
 * docs/zero.md): the whole model's layers on one runner, sharded by
 * lib/parallel/zero_shard.c.
 *
 * What z owns: the whole model's layout (names and offsets only), its
 * layers' ranges (range l + 1 is layer l: -1 the embedding, 0..L-1 the
 * blocks, L the head), the sharder over them, the layer runner
 * (lib/model/runner.h) with the activations and scratch of one
 * micro-batch, whose hooks are the sharder's gathers and reduce-scatters.
 * Stage 2 also keeps the whole weights (w32 in FP32, w16 in the 16-bit
 * format under mixed precision, widened a layer at a time into w16l).
 *
 * Invariants: w16l holds layer w16l_layer's weights, or that is
 * DT__ZG_NONE; no collective is in flight between a forward and a
 * backward or after a backward (prefetch stays inside a pass), so the
 * trainer's trace writes and the update never meet one. */
#include "zero_gpt.h"

#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "dt_time.h"
#include "runner.h"
#include "zero_shard.h"

#define DT__ZG_NONE (-2)

struct dt__zgpt {
    dt_gpt_config cfg;
    dt_backend *be;
    int stage;
    dt_dtype precision;
    dt__fp8 *fp8; /* FP8 training's state (dt__zgpt_set_fp8), given to each runner made */
    dt_recompute recompute;
    int recompute_k;    /* full: blocks per group */
    dt_paramset layout; /* the whole model's: names and offsets */
    size_t *lay_off;    /* (L+2) layer l's range starts at lay_off[l+1] */
    size_t *lay_len;    /* (L+2) */
    dt__zs *zs;         /* the units' shards: masters, optimizer, gradients */

    dt_buffer w32;  /* stage 2, FP32: the whole weights (numel) */
    dt_buffer w16;  /* stage 2, mixed precision: the whole weights in the 16-bit format (numel) */
    dt_buffer w16l; /* stage 2, mixed precision (largest layer) FP32: one layer widened */
    int w16l_layer;
    /* tied embeddings: the embedding's weights from its forward through the
     * head's backward (stage 3, or stage 2 in 16 bits: dt__zg_weights_tied),
     * and the head's wte gradient until the embedding's backward adds to it */
    dt_buffer wemb;  /* (V*C + maxT*C) FP32 */
    dt_buffer gtied; /* (V*C) FP32 */

    /* the layers' runner (lib/model/runner.h) for micro-batches up to (B,
     * T), the shared memory discipline of lib/model/gpt.c: its views are
     * pointed at each layer's weights and gradients by its bind hook */
    dt__runner *run;
    int B, T;

    dt_gpt_layer_hook hook;
    void *hook_ctx;
};

/* ---- views ---------------------------------------------------------------- */

/* Layer l's tensors inside a buffer whose element 0 is flat element origin,
 * into the runner's weight (grads 0) or gradient views. */
static void dt__zg_bind(dt__zgpt *z, int l, float *base, size_t origin, int grads)
{
    int first, n;
    dt__gpt_layer_tensors(&z->cfg, l, &first, &n);
    dt__runner_views_bind(grads ? dt__runner_g(z->run) : dt__runner_w(z->run), &z->cfg, 0, l, z->layout.info + first,
                          n, base, origin);
}

/* Layer l's range in the sharder (DT__ZG_NONE: none). */
static int dt__zg_range(int l) { return l == DT__ZG_NONE ? -1 : l + 1; }

/* Tied embeddings (stage 3, or stage 2 under mixed precision): the
 * embedding's weights go to a buffer of their own, wemb, which holds them
 * from the embedding's forward through the head's backward (the head
 * multiplies by wte: its views' lmw is wemb's). With prefetch the gather
 * of `next` then starts into a layer buffer. */
static dt_status dt__zg_weights_tied(dt__zgpt *z, int next)
{
    const size_t n = z->lay_len[0];
    if (z->stage == 2) DT_CHECK(z->be->cast(z->be, z->wemb.data, DT_F32, z->w16.data, z->precision, n));
    else DT_CHECK(dt__zs_gather_range(z->zs, 0, z->wemb.data));
    dt__zg_bind(z, -1, z->wemb.data, 0, 0);
    return z->stage == 3 ? dt__zs_prefetch(z->zs, dt__zg_range(next)) : DT_OK;
}

/* Layer l's weights as the model computes with them, bound: stage 2 in
 * FP32 reads the whole weights in place; stage 2 under mixed precision
 * widens the layer's 16-bit values into w16l; stage 3 uses the sharder's
 * layer buffer (the head's forward copy serves its backward; a prefetched
 * gather is waited for), the gather of `next` (DT__ZG_NONE: none) started
 * behind it with prefetch. */
static dt_status dt__zg_weights(dt__zgpt *z, int l, int next)
{
    const size_t off = z->lay_off[l + 1], n = z->lay_len[l + 1];
    if (l == -1 && z->wemb.data) return dt__zg_weights_tied(z, next);
    if (z->stage == 2 && z->precision == DT_F32) {
        dt__zg_bind(z, l, z->w32.data, 0, 0);
        return DT_OK;
    }
    if (z->stage == 2) {
        if (z->w16l_layer != l)
            DT_CHECK(z->be->cast(z->be, z->w16l.data, DT_F32, (char *)z->w16.data + off * dt_dtype_size(z->precision),
                                 z->precision, n));
        z->w16l_layer = l;
        dt__zg_bind(z, l, z->w16l.data, off, 0);
        return DT_OK;
    }
    float *base;
    DT_CHECK(dt__zs_weights(z->zs, l + 1, dt__zg_range(next), &base));
    dt__zg_bind(z, l, base, off, 0);
    return DT_OK;
}

/* Forget the gathered layers (the shard changed); nothing is in flight
 * between passes (a pass prefetches only inside itself). */
static void dt__zg_forget(dt__zgpt *z)
{
    z->w16l_layer = DT__ZG_NONE;
    dt__zs_forget(z->zs);
}

/* ---- creation --------------------------------------------------------------- */

/* The whole model's initial weights (as dt_gpt_init_weights_from), into backend memory. */
static dt_status dt__zg_init_whole(dt__zgpt *z, const dt_gpt_init *init, dt_buffer *whole)
{
    const size_t n = z->layout.numel;
    float *host = calloc(n ? n : 1, sizeof *host);
    if (!host) return DT_FAIL(DT_ERR_NOMEM, "--zero-stage: out of memory for the %zu initial weights", n);
    dt_status st = DT_OK;
    for (int i = 0; i < z->layout.count && st == DT_OK; i++)
        st = dt__gpt_init_tensor(&z->cfg, &z->layout.info[i], i, init, host + z->layout.info[i].offset);
    if (st == DT_OK) st = dt_buffer_alloc(whole, z->be, (n ? n : 1) * sizeof(float));
    if (st == DT_OK) st = z->be->copy(z->be, whole->data, host, n * sizeof(float), DT_COPY_H2D);
    free(host);
    return st;
}

dt_status dt__zgpt_create(const dt__zgpt_config *c, dt_comm *dp, dt_backend *be, dt__zgpt **out)
{
    *out = NULL;
    if (c->stage != 2 && c->stage != 3) return DT_FAIL(DT_ERR_INVALID, "--zero-stage %d: expected 2 or 3", c->stage);
    if (c->recompute == DT_RECOMPUTE_FULL && (c->recompute_k < 1 || c->recompute_k > c->model->num_layers))
        return DT_FAIL(DT_ERR_INVALID, "--recompute-num-layers %d: expected 1..%d (the number of layers)",
                       c->recompute_k, c->model->num_layers);
    DT_CHECK(dt_gpt_config_validate(c->model));
    dt__zgpt *z = calloc(1, sizeof *z);
    if (!z) return DT_FAIL(DT_ERR_NOMEM, "--zero-stage: out of memory");
    z->cfg = *c->model;
    z->be = be;
    z->stage = c->stage;
    z->precision = c->precision;
    z->recompute = c->recompute;
    z->recompute_k = c->recompute == DT_RECOMPUTE_FULL ? c->recompute_k : 0;
    z->w16l_layer = DT__ZG_NONE;
    dt_paramset_init(&z->layout);
    dt_buffer whole = {0};
    dt_status st;
    const int L = z->cfg.num_layers;
    DT_CHECK_GOTO(dt__gpt_whole_layout(&z->cfg, &z->layout), st, fail);
    z->lay_off = calloc((size_t)L + 2, sizeof *z->lay_off);
    z->lay_len = calloc((size_t)L + 2, sizeof *z->lay_len);
    if (!z->lay_off || !z->lay_len) {
        st = DT_FAIL(DT_ERR_NOMEM, "--zero-stage: out of memory for the layers");
        goto fail;
    }
    size_t big_layer = 0;
    for (int l = -1; l <= L; l++) {
        dt__gpt_layer_range(&z->cfg, &z->layout, l, &z->lay_off[l + 1], &z->lay_len[l + 1]);
        big_layer = DT_MAX(big_layer, z->lay_len[l + 1]);
    }
    const dt__zs_config zc = {.stage = c->stage,
                              .bucket_bytes = c->bucket_bytes,
                              .prefetch = c->prefetch,
                              .precision = c->precision,
                              .optim = c->optim,
                              .layout = &z->layout,
                              .n_ranges = L + 2,
                              .range_off = z->lay_off,
                              .range_len = z->lay_len};
    DT_CHECK_GOTO(dt__zs_create(&zc, dp, be, &z->zs), st, fail);
    if (z->stage == 2 && z->precision != DT_F32)
        DT_CHECK_GOTO(dt_buffer_alloc(&z->w16l, be, big_layer * sizeof(float)), st, fail);
    if (z->cfg.tie_embeddings) {
        if (z->stage == 3 || z->precision != DT_F32)
            DT_CHECK_GOTO(dt_buffer_alloc(&z->wemb, be, z->lay_len[0] * sizeof(float)), st, fail);
        DT_CHECK_GOTO(dt_buffer_alloc(&z->gtied, be, (size_t)z->cfg.vocab_size * z->cfg.hidden_size * sizeof(float)),
                      st, fail);
    }
    /* the initial weights: every rank makes the whole model once and keeps its shard */
    DT_CHECK_GOTO(dt__zg_init_whole(z, &c->init, &whole), st, fail);
    DT_CHECK_GOTO(dt__zs_take_shard(z->zs, whole.data), st, fail);
    if (z->stage == 2) DT_CHECK_GOTO(dt__zgpt_restored(z), st, fail); /* the whole weights, as the model computes */
    dt_buffer_free(&whole);
    dt__zs_traffic_reset(z->zs); /* the run's, not the creation's */
    /* every GEMM input is a half value (weights from the 16-bit shards,
     * activations rounded), as in dt_gpt_set_precision: the backend may
     * multiply in that format, as it does for data parallelism's model */
    if (z->precision != DT_F32 && be->set_gemm_inputs) DT_CHECK_GOTO(be->set_gemm_inputs(be, z->precision), st, fail);
    *out = z;
    return DT_OK;
fail:
    dt_buffer_free(&whole);
    dt__zgpt_free(z);
    return st;
}

void dt__zgpt_set_fp8(dt__zgpt *z, dt__fp8 *f)
{
    z->fp8 = f;
    if (z->run) dt__runner_set_fp8(z->run, f);
}

void dt__zgpt_free(dt__zgpt *z)
{
    if (!z) return;
    if (z->precision != DT_F32 && z->be && z->be->set_gemm_inputs)
        (void)z->be->set_gemm_inputs(z->be, DT_F32); /* the promise ends with the model */
    dt__zs_free(z->zs); /* first: its thread may still use the buffers */
    dt_buffer_free(&z->w32);
    dt_buffer_free(&z->w16);
    dt_buffer_free(&z->w16l);
    dt_buffer_free(&z->wemb);
    dt_buffer_free(&z->gtied);
    dt__runner_free(z->run);
    dt_paramset_free(&z->layout);
    free(z->lay_off);
    free(z->lay_len);
    free(z);
}

void dt__zgpt_set_coll(dt__zgpt *z, const dt_collective_opts *coll) { dt__zs_set_coll(z->zs, coll); }

void dt__zgpt_set_layer_hook(dt__zgpt *z, dt_gpt_layer_hook hook, void *ctx)
{
    z->hook = hook;
    z->hook_ctx = ctx;
}

typedef struct dt__zg_span {
    dt__zgpt *z;
    int layer;
    char pass;
    int64_t t0, t1;
} dt__zg_span;

static void dt__zg_hook_call(void *ctx)
{
    const dt__zg_span *s = ctx;
    s->z->hook(s->z->hook_ctx, s->layer, s->pass, s->t0, s->t1);
}

/* The runner's span hook: the layer's span, under the queue's lock (with
 * prefetch its thread writes the collectives' spans meanwhile). */
static void dt__zg_span_hook(void *ctx, int layer, char pass, int64_t t0)
{
    dt__zgpt *z = ctx;
    if (!z->hook) return;
    if (z->be->synchronize) (void)z->be->synchronize(z->be);
    dt__zg_span s = {.z = z, .layer = layer, .pass = pass, .t0 = t0, .t1 = dt_time_ns()};
    dt__zs_locked(z->zs, dt__zg_hook_call, &s);
}

/* ---- the runner's hooks: weights before a layer, gradients around its backward */

/* Before layer l's backward: the layer's gradient views bound into its
 * unit's buffer (fresh when l opens the unit). */
static dt_status dt__zg_grads_open(dt__zgpt *z, int l)
{
    const size_t vc = (size_t)z->cfg.vocab_size * z->cfg.hidden_size;
    float *base;
    size_t origin;
    DT_CHECK(dt__zs_grads_open(z->zs, l + 1, &base, &origin));
    if (z->gtied.data && l == z->cfg.num_layers) { /* tied: the head's wte gradient waits in gtied */
        DT_CHECK(z->be->memset_zero(z->be, z->gtied.data, vc * sizeof(float)));
        dt__runner_g(z->run)->wte = z->gtied.data;
    }
    dt__zg_bind(z, l, base, origin, 1);
    if (z->gtied.data && l == -1) /* the embedding's wte gradient starts from the head's, as gpt.c adds both in turn */
        DT_CHECK(z->be->copy(z->be, dt__runner_g(z->run)->wte, z->gtied.data, vc * sizeof(float), DT_COPY_D2D));
    return DT_OK;
}

/* The runner's bind hook: layer l's weights before its forward ('F', the
 * next layer prefetched), its recomputation under full recomputation ('R',
 * the next block of the group prefetched, or the group's last, whose
 * backward comes next) or its backward ('B', the layer below prefetched;
 * the embedding's backward reads no weights), and at 'B' its gradient views. */
static dt_status dt__zg_bind_hook(void *ctx, int l, char pass)
{
    dt__zgpt *z = ctx;
    const int L = z->cfg.num_layers;
    if (pass == 'F') return dt__zg_weights(z, l, l < L ? l + 1 : DT__ZG_NONE);
    if (pass == 'R') {
        const int last = DT_MIN((l / z->recompute_k + 1) * z->recompute_k, L) - 1;
        return dt__zg_weights(z, l, l < last ? l + 1 : DT__ZG_NONE);
    }
    if (pass != 'B') return DT_FAIL(DT_ERR_INVALID, "--zero-stage %d: pass '%c' of layer %d", z->stage, pass, l);
    if (l >= 0) DT_CHECK(dt__zg_weights(z, l, l > 0 ? l - 1 : DT__ZG_NONE));
    return dt__zg_grads_open(z, l);
}

/* The runner's done hook, after layer l's backward: the sharder
 * reduce-scatters its unit when l closes it, rounded to the 16-bit
 * format under mixed precision (as gpt.c rounds each micro-batch's). */
static dt_status dt__zg_done_hook(void *ctx, int l)
{
    dt__zgpt *z = ctx;
    return dt__zs_grads_done(z->zs, l + 1, dt__runner_rnd(z->run));
}

/* The runner for (B, T): made again for a larger B or another T. */
static dt_status dt__zg_ensure(dt__zgpt *z, int B, int T)
{
    if (z->run && B <= z->B && T == z->T) return DT_OK;
    dt__runner_free(z->run);
    z->run = NULL;
    z->B = z->T = 0;
    const size_t big = dt__zs_largest_unit(z->zs); /* the rounding of a unit's gradients */
    const dt__runner_config rc =
        dt__runner_whole(&z->cfg, z->be, B, T, z->precision, big, z->recompute, z->recompute_k);
    DT_CHECK(dt__runner_create(&rc, &z->run));
    static const dt__runner_hooks hooks = {
        .bind = dt__zg_bind_hook, .done = dt__zg_done_hook, .span = dt__zg_span_hook};
    dt__runner_set_hooks(z->run, &hooks, z);
    dt__runner_set_fp8(z->run, z->fp8);
    z->B = B;
    z->T = T;
    return DT_OK;
}

/* ---- forward and backward ---------------------------------------------------- */

dt_status dt__zgpt_forward(dt__zgpt *z, const int32_t *tokens, const int32_t *targets, int B, int T, float *loss)
{
    if (B < 1) return DT_FAIL(DT_ERR_INVALID, "forward: batch size %d (expected >= 1)", B);
    if (T < 1 || T > z->cfg.seq_len)
        return DT_FAIL(DT_ERR_INVALID, "forward: sequence length %d outside 1..%d (the model's context)", T,
                       z->cfg.seq_len);
    if (z->run && dt__runner_has_forward(z->run, 0)) DT_CHECK(dt__runner_release(z->run, 0));
    DT_CHECK(dt__zg_ensure(z, B, T));
    float mean = 0.0f; /* nothing in flight after the forward: the head prefetches nothing */
    DT_CHECK(dt__runner_forward(z->run, 0, tokens, targets, B, T, NULL, &mean, NULL));
    if (loss) *loss = mean;
    return DT_OK;
}

dt_status dt__zgpt_backward(dt__zgpt *z, float loss_scale)
{
    int has_targets = 0;
    if (z->run) dt__runner_batch(z->run, 0, NULL, NULL, &has_targets);
    if (!z->run || !dt__runner_has_forward(z->run, 0) || !has_targets)
        return DT_FAIL(DT_ERR_INVALID, "backward: no forward pass with targets to differentiate");
    const int n_counted = dt__runner_n_counted(z->run, 0);
    const float dloss = n_counted ? loss_scale / (float)n_counted : 0.0f;
    /* the head's weights are still there from the forward: no second gather */
    DT_CHECK(dt__runner_backward(z->run, 0, dloss, NULL));
    dt__zs_accumulated(z->zs);
    return DT_OK;
}

dt_status dt__zgpt_zero_grad(dt__zgpt *z) { return dt__zs_zero_grad(z->zs); }

/* ---- update and the whole weights --------------------------------------- */

dt_status dt__zgpt_restored(dt__zgpt *z)
{
    dt__zg_forget(z);
    if (z->stage != 2) return DT_OK; /* stage 3 gathers from the shard at every use */
    const size_t numel = z->layout.numel, h = dt_dtype_size(z->precision);
    if (z->precision == DT_F32 && !z->w32.data) DT_CHECK(dt_buffer_alloc(&z->w32, z->be, numel * sizeof(float)));
    if (z->precision != DT_F32 && !z->w16.data) DT_CHECK(dt_buffer_alloc(&z->w16, z->be, numel * h));
    for (int u = 0; u < dt__zs_units(z->zs); u++) { /* in place (FP32), or through the scratch */
        size_t off, n;
        dt__zs_unit_range(z->zs, u, &off, &n);
        float *buf = z->precision == DT_F32 ? (float *)z->w32.data + off : dt__zs_scratch(z->zs);
        DT_CHECK(dt__zs_gather_unit(z->zs, u, buf, 1));
        if (z->precision != DT_F32)
            DT_CHECK(z->be->cast(z->be, (char *)z->w16.data + off * h, z->precision, buf, DT_F32, n));
    }
    return DT_OK;
}

dt_status dt__zgpt_update(dt__zgpt *z, const dt__zero_step_args *a, dt__update_result *r)
{
    DT_CHECK(dt__zs_update(z->zs, a, r));
    dt__zg_forget(z); /* the masters may have changed */
    if (r->skipped) return DT_OK;
    return z->stage == 2 ? dt__zgpt_restored(z) : DT_OK;
}

dt_status dt__zgpt_weights(dt__zgpt *z, float *host)
{
    for (int u = 0; u < dt__zs_units(z->zs); u++) {
        size_t off, n;
        dt__zs_unit_range(z->zs, u, &off, &n);
        float *buf = dt__zs_scratch(z->zs);
        if (z->stage == 2 && z->precision == DT_F32) buf = (float *)z->w32.data + off;
        else if (z->stage == 2)
            DT_CHECK(z->be->cast(z->be, buf, DT_F32, (char *)z->w16.data + off * dt_dtype_size(z->precision),
                                 z->precision, n));
        else DT_CHECK(dt__zs_gather_unit(z->zs, u, buf, 0));
        DT_CHECK(z->be->copy(z->be, host + off, buf, n * sizeof(float), DT_COPY_D2H));
    }
    return DT_OK;
}

/* ---- accessors ---------------------------------------------------------------- */

dt_status dt__zgpt_position_stats(dt__zgpt *z, float *losses, uint8_t *correct)
{
    int has_targets = 0;
    if (z->run) dt__runner_batch(z->run, 0, NULL, NULL, &has_targets);
    if (!has_targets) return DT_FAIL(DT_ERR_INVALID, "position stats: no forward pass with targets");
    return dt__runner_position_stats(z->run, 0, losses, correct);
}

const dt_paramset *dt__zgpt_layout(const dt__zgpt *z) { return &z->layout; }
dt__zero *dt__zgpt_zero(dt__zgpt *z) { return dt__zs_zero(z->zs); }
size_t dt__zgpt_activation_bytes(const dt__zgpt *z) { return z->run ? dt__runner_activation_bytes(z->run) : 0; }
size_t dt__zgpt_peak_activation_bytes(const dt__zgpt *z)
{
    return z->run ? dt__runner_peak_activation_bytes(z->run) : 0;
}
void dt__zgpt_traffic_of(const dt__zgpt *z, dt__zgpt_traffic *t) { dt__zs_traffic_of(z->zs, t); }

void dt__zgpt_bytes_of(const dt__zgpt *z, dt__zgpt_bytes *b)
{
    b->weights = z->w32.bytes + z->w16.bytes;
    const dt__zero *zero = dt__zs_zero(z->zs);
    b->gradients = dt__zs_grad_bytes(z->zs);
    b->optimizer = dt__zero_master_bytes(zero) + dt__zero_state_bytes(zero);
    b->working = dt__zs_working_bytes(z->zs) + z->w16l.bytes + z->wemb.bytes + z->gtied.bytes +
                 (z->run ? dt__runner_round_bytes(z->run) : 0);
}
