/* zero_gpt.c: the GPT under ZeRO stages 2 and 3 (see zero_gpt.h and
 * docs/zero.md).
 *
 * What z owns: the whole model's layout (names and offsets only), the
 * units and the layers' ranges, the sharded optimizer (a dt__zero over the
 * units, holding the shard's FP32 masters and moments), the shard's summed
 * gradients, and the working buffers: one unit's gradient (gbuf), one
 * layer's FP32 weights (wb; two with stage 3's prefetch), the collectives'
 * queue (zero_queue.c), and the layer runner (lib/model/runner.h) with
 * the activations and scratch of one micro-batch, whose hooks are the
 * gathers and reduce-scatters below. Stage 2 also keeps the whole weights (w32 in FP32, w16 in
 * the 16-bit format under mixed precision).
 *
 * Layers: -1 the embedding (wte, wpe), 0..L-1 the blocks, L the head
 * (lnf, lm_head); layer l's tensors are one range of the flat buffer, and
 * unit boundaries are layer boundaries.
 *
 * Why the sums equal data parallelism's: a unit's ring reduce-scatter adds
 * each element in the order of the ring allreduce of the same range (its
 * first half), and data parallelism allreduces the same ranges (its
 * buckets; stage 3's units are the buckets of --bucket-size-mb 0). With
 * one micro-batch per rank the summed gradients are therefore
 * bit-identical; with several, this file sums over the ranks first and
 * then over the micro-batches, data parallelism the other way round.
 *
 * Invariants: wb[b] holds layer wl[b]'s weights as the model computes with
 * them once its gather wseq[b] is waited for, or wl[b] is DT__ZG_NONE
 * (after an update or a restore); no collective is in flight between a
 * forward and a backward or after a backward (prefetch stays inside a
 * pass), so the trainer's trace writes and the update never meet one; gbuf
 * holds the gradients of the unit being backpropagated only; the shard's
 * gradients are the sum over ranks and micro-batches since zero_grad. */
#include "zero_gpt.h"

#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "dt_time.h"
#include "runner.h"
#include "zero_queue.h"

#define DT__ZG_NONE (-2)

struct dt__zgpt {
    dt_gpt_config cfg;
    dt_backend *be;
    dt_comm *dp;
    int stage;
    dt_dtype precision;
    dt_recompute recompute;
    int recompute_k;    /* full: blocks per group */
    dt_paramset layout; /* the whole model's: names and offsets */
    dt__zero *zero;     /* the units' shards: masters and optimizer */

    int n_layers;    /* L + 2 */
    size_t *lay_off; /* (L+2) layer l's range starts at lay_off[l+1] */
    size_t *lay_len; /* (L+2) */
    int *lay_unit;   /* (L+2) the unit holding layer l */
    int n_units;     /* ascending in the buffer */
    size_t *unit_off, *unit_len;
    int *unit_low, *unit_high; /* (n_units) lowest and highest layer */

    dt_buffer grad; /* (shard) FP32: the summed gradients */
    dt_buffer gbuf; /* (largest unit) FP32: one unit's gradients of one micro-batch */
    dt_buffer
        wb[2]; /* (largest layer) FP32: a layer's weights (stage 3; stage 2 under mixed precision); two with prefetch */
    dt_buffer w32;       /* stage 2, FP32: the whole weights (numel) */
    dt_buffer w16;       /* stage 2, mixed precision: the whole weights in the 16-bit format (numel) */
    /* tied embeddings: the embedding's weights from its forward through the
     * head's backward (stage 3, or stage 2 in 16 bits: dt__zg_weights_tied),
     * and the head's wte gradient until the embedding's backward adds to it */
    dt_buffer wemb; /* (V*C + maxT*C) FP32 */
    dt_buffer gtied; /* (V*C) FP32 */
    int wl[2];           /* the layer each holds, DT__ZG_NONE: none */
    int64_t wseq[2];     /* its gather's place in the queue, -1: none pending */
    int cur;             /* the buffer the bound layer reads */
    int prefetch;        /* stage 3: gather the next layer while this one computes */
    dt__zq *q;           /* every collective, in issue order */
    int64_t accumulated; /* micro-batches added into grad since zero_grad */

    /* the layers' runner (lib/model/runner.h) for micro-batches up to (B,
     * T), the shared memory discipline of lib/model/gpt.c: its views are
     * pointed at each layer's weights and gradients by its bind hook */
    dt__runner *run;
    int B, T;

    dt_gpt_layer_hook hook;
    void *hook_ctx;
    dt__zgpt_traffic traffic;
};

/* ---- units ---------------------------------------------------------------- */

static dt_status dt__zg_units(dt__zgpt *z, size_t bucket_bytes)
{
    const int L = z->cfg.num_layers, NL = L + 2;
    const dt_paramset *ps = &z->layout;
    z->n_layers = NL;
    z->lay_off = calloc((size_t)NL, sizeof *z->lay_off);
    z->lay_len = calloc((size_t)NL, sizeof *z->lay_len);
    z->lay_unit = calloc((size_t)NL, sizeof *z->lay_unit);
    z->unit_off = calloc((size_t)NL, sizeof *z->unit_off);
    z->unit_len = calloc((size_t)NL, sizeof *z->unit_len);
    z->unit_low = calloc((size_t)NL, sizeof *z->unit_low);
    z->unit_high = calloc((size_t)NL, sizeof *z->unit_high);
    size_t *boff = calloc((size_t)NL, sizeof *boff), *blen = calloc((size_t)NL, sizeof *blen);
    int *blow = calloc((size_t)NL, sizeof *blow);
    dt_status st = DT_OK;
    if (!z->lay_off || !z->lay_len || !z->lay_unit || !z->unit_off || !z->unit_len || !z->unit_low || !z->unit_high ||
        !boff || !blen || !blow) {
        st = DT_FAIL(DT_ERR_NOMEM, "--zero-stage: out of memory for the units");
        goto done;
    }
    for (int l = -1; l <= L; l++) dt__gpt_layer_range(&z->cfg, ps, l, &z->lay_off[l + 1], &z->lay_len[l + 1]);
    /* stage 3: every layer a unit (the buckets of bucket_bytes 0); stage 2: the buckets */
    const int nb = dt__gpt_buckets(&z->cfg, ps, z->stage == 3 ? 0 : bucket_bytes, boff, blen, blow);
    z->n_units = nb;
    for (int b = 0; b < nb; b++) { /* ascending: the last bucket (the embedding's) first */
        const int u = nb - 1 - b;
        z->unit_off[u] = boff[b];
        z->unit_len[u] = blen[b];
        z->unit_low[u] = blow[b];
        z->unit_high[u] = b == 0 ? L : blow[b - 1] - 1;
        for (int l = z->unit_low[u]; l <= z->unit_high[u]; l++) z->lay_unit[l + 1] = u;
    }
done:
    free(boff);
    free(blen);
    free(blow);
    return st;
}

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

/* Start gathering layer l's weights into buffer b (stage 3): this rank's
 * segment, rounded from the FP32 shard, then an all-gather of the layer,
 * issued to the queue (it has run on return unless prefetching). */
static dt_status dt__zg_gather(dt__zgpt *z, int b, int l)
{
    if (z->wseq[b] >= 0) DT_CHECK(dt__zq_wait(z->q, z->wseq[b])); /* the buffer's last gather, done */
    z->wseq[b] = -1;
    z->wl[b] = DT__ZG_NONE;
    const size_t n = z->lay_len[l + 1];
    DT_CHECK(dt__zero_unit_weights(z->zero, z->lay_unit[l + 1], z->wb[b].data));
    DT_CHECK(dt__zq_issue(z->q, DT__ZQ_ALL_GATHER, z->wb[b].data, n, &z->wseq[b]));
    z->wl[b] = l;
    z->traffic.gathers++;
    z->traffic.gather_floats += (int64_t)n;
    return DT_OK;
}

/* Tied embeddings (stage 3, or stage 2 under mixed precision): the
 * embedding's weights go to a buffer of their own, wemb, which holds them
 * from the embedding's forward through the head's backward (the head
 * multiplies by wte: its views' lmw is wemb's). With prefetch the gather
 * of `next` then starts into a layer buffer. */
static dt_status dt__zg_weights_tied(dt__zgpt *z, int next)
{
    const size_t n = z->lay_len[0];
    if (z->stage == 2) {
        DT_CHECK(z->be->cast(z->be, z->wemb.data, DT_F32, z->w16.data, z->precision, n));
    } else {
        int64_t seq;
        DT_CHECK(dt__zero_unit_weights(z->zero, z->lay_unit[0], z->wemb.data));
        DT_CHECK(dt__zq_issue(z->q, DT__ZQ_ALL_GATHER, z->wemb.data, n, &seq));
        DT_CHECK(dt__zq_wait(z->q, seq));
        z->traffic.gathers++;
        z->traffic.gather_floats += (int64_t)n;
    }
    dt__zg_bind(z, -1, z->wemb.data, 0, 0);
    const int b = z->cur ^ 1;
    if (z->prefetch && next != DT__ZG_NONE && z->wl[0] != next && z->wl[1] != next) DT_CHECK(dt__zg_gather(z, b, next));
    return DT_OK;
}

/* Layer l's weights as the model computes with them, bound: stage 2 in
 * FP32 reads the whole weights in place; stage 2 under mixed precision
 * widens the layer's 16-bit values into a layer buffer; stage 3 uses the
 * buffer that holds layer l (the head's forward copy serves its backward;
 * a prefetched gather is waited for) or gathers it. With prefetch, the
 * gather of `next` (DT__ZG_NONE: none) then starts into the other buffer,
 * to run while layer l computes. */
static dt_status dt__zg_weights(dt__zgpt *z, int l, int next)
{
    const size_t off = z->lay_off[l + 1], n = z->lay_len[l + 1];
    if (l == -1 && z->wemb.data) return dt__zg_weights_tied(z, next);
    if (z->stage == 2 && z->precision == DT_F32) {
        dt__zg_bind(z, l, z->w32.data, 0, 0);
        return DT_OK;
    }
    if (z->stage == 2) {
        if (z->wl[0] != l)
            DT_CHECK(z->be->cast(z->be, z->wb[0].data, DT_F32, (char *)z->w16.data + off * dt_dtype_size(z->precision),
                                 z->precision, n));
        z->wl[0] = l;
        dt__zg_bind(z, l, z->wb[0].data, off, 0);
        return DT_OK;
    }
    int b = z->wl[0] == l ? 0 : z->wl[1] == l ? 1 : -1;
    if (b < 0) {
        b = z->prefetch ? z->cur ^ 1 : 0;
        DT_CHECK(dt__zg_gather(z, b, l));
    }
    if (z->wseq[b] >= 0) DT_CHECK(dt__zq_wait(z->q, z->wseq[b]));
    z->wseq[b] = -1;
    z->cur = b;
    dt__zg_bind(z, l, z->wb[b].data, off, 0);
    if (z->prefetch && next != DT__ZG_NONE && z->wl[b ^ 1] != next) DT_CHECK(dt__zg_gather(z, b ^ 1, next));
    return DT_OK;
}

/* Forget the gathered layers (the shard changed); nothing is in flight
 * between passes (a pass prefetches only inside itself). */
static void dt__zg_forget(dt__zgpt *z) { z->wl[0] = z->wl[1] = DT__ZG_NONE; }

/* ---- creation --------------------------------------------------------------- */

/* The whole model's initial weights (as dt_gpt_init_weights), into backend memory. */
static dt_status dt__zg_init_whole(dt__zgpt *z, uint64_t seed, dt_buffer *whole)
{
    const size_t n = z->layout.numel;
    float *host = calloc(n ? n : 1, sizeof *host);
    if (!host) return DT_FAIL(DT_ERR_NOMEM, "--zero-stage: out of memory for the %zu initial weights", n);
    for (int i = 0; i < z->layout.count; i++)
        dt__gpt_init_tensor(&z->cfg, &z->layout.info[i], i, seed, host + z->layout.info[i].offset);
    dt_status st = dt_buffer_alloc(whole, z->be, (n ? n : 1) * sizeof(float));
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
    z->dp = dp;
    z->stage = c->stage;
    z->precision = c->precision;
    z->recompute = c->recompute;
    z->recompute_k = c->recompute == DT_RECOMPUTE_FULL ? c->recompute_k : 0;
    z->wl[0] = z->wl[1] = DT__ZG_NONE;
    z->wseq[0] = z->wseq[1] = -1;
    z->prefetch = c->prefetch && c->stage == 3;
    dt_paramset_init(&z->layout);
    dt_buffer whole = {0};
    dt_status st;
    DT_CHECK_GOTO(dt__gpt_whole_layout(&z->cfg, &z->layout), st, fail);
    DT_CHECK_GOTO(dt__zg_units(z, c->bucket_bytes), st, fail);
    DT_CHECK_GOTO(dt__zero_create_units(dp, be, &z->layout, c->optim, z->n_units, z->unit_off, z->unit_len, &z->zero),
                  st, fail);
    size_t shard_lo = 0, shard = 0, big_unit = 0, big_layer = 0;
    dt__zero_shard(z->zero, &shard_lo, &shard);
    for (int u = 0; u < z->n_units; u++) big_unit = DT_MAX(big_unit, z->unit_len[u]);
    for (int l = 0; l < z->n_layers; l++) big_layer = DT_MAX(big_layer, z->lay_len[l]);
    DT_CHECK_GOTO(dt_buffer_alloc(&z->grad, be, (shard ? shard : 1) * sizeof(float)), st, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&z->gbuf, be, big_unit * sizeof(float)), st, fail);
    if (z->stage == 3 || z->precision != DT_F32)
        for (int b = 0; b < 1 + z->prefetch; b++)
            DT_CHECK_GOTO(dt_buffer_alloc(&z->wb[b], be, big_layer * sizeof(float)), st, fail);
    if (z->cfg.tie_embeddings) {
        if (z->stage == 3 || z->precision != DT_F32)
            DT_CHECK_GOTO(dt_buffer_alloc(&z->wemb, be, z->lay_len[0] * sizeof(float)), st, fail);
        DT_CHECK_GOTO(dt_buffer_alloc(&z->gtied, be, (size_t)z->cfg.vocab_size * z->cfg.hidden_size * sizeof(float)),
                      st, fail);
    }
    DT_CHECK_GOTO(dt__zq_create(dp, NULL, z->prefetch, &z->q), st, fail);
    /* the initial weights: every rank makes the whole model once and keeps its shard */
    DT_CHECK_GOTO(dt__zg_init_whole(z, c->seed, &whole), st, fail);
    DT_CHECK_GOTO(dt__zero_take_shard(z->zero, whole.data, z->precision), st, fail);
    if (z->stage == 2) DT_CHECK_GOTO(dt__zgpt_restored(z), st, fail); /* the whole weights, as the model computes */
    dt_buffer_free(&whole);
    z->traffic = (dt__zgpt_traffic){0}; /* the run's, not the creation's */
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

void dt__zgpt_free(dt__zgpt *z)
{
    if (!z) return;
    if (z->precision != DT_F32 && z->be && z->be->set_gemm_inputs)
        (void)z->be->set_gemm_inputs(z->be, DT_F32); /* the promise ends with the model */
    dt__zq_free(z->q); /* first: its thread may still use the buffers */
    z->q = NULL;
    dt__zero_free(z->zero);
    dt_buffer_free(&z->grad);
    dt_buffer_free(&z->gbuf);
    dt_buffer_free(&z->wb[0]);
    dt_buffer_free(&z->wb[1]);
    dt_buffer_free(&z->w32);
    dt_buffer_free(&z->w16);
    dt_buffer_free(&z->wemb);
    dt_buffer_free(&z->gtied);
    dt__runner_free(z->run);
    dt_paramset_free(&z->layout);
    free(z->lay_off);
    free(z->lay_len);
    free(z->lay_unit);
    free(z->unit_off);
    free(z->unit_len);
    free(z->unit_low);
    free(z->unit_high);
    free(z);
}

void dt__zgpt_set_coll(dt__zgpt *z, const dt_collective_opts *coll) { dt__zq_set_coll(z->q, coll); }

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
    dt__zq_locked(z->q, dt__zg_hook_call, &s);
}

/* ---- the runner's hooks: weights before a layer, gradients around its backward */

/* Before layer l's backward: a fresh gradient buffer when l opens its unit
 * (its highest layer), and the layer's gradient views bound into it. */
static dt_status dt__zg_grads_open(dt__zgpt *z, int l)
{
    const int u = z->lay_unit[l + 1];
    const size_t vc = (size_t)z->cfg.vocab_size * z->cfg.hidden_size;
    if (l == z->unit_high[u]) DT_CHECK(z->be->memset_zero(z->be, z->gbuf.data, z->unit_len[u] * sizeof(float)));
    if (z->gtied.data && l == z->cfg.num_layers) { /* tied: the head's wte gradient waits in gtied */
        DT_CHECK(z->be->memset_zero(z->be, z->gtied.data, vc * sizeof(float)));
        dt__runner_g(z->run)->wte = z->gtied.data;
    }
    dt__zg_bind(z, l, z->gbuf.data, z->unit_off[u], 1);
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

/* The runner's done hook, after layer l's backward: when l closes its unit
 * (its lowest layer), the unit's gradients, rounded to the 16-bit format
 * under mixed precision (as gpt.c rounds each micro-batch's), are
 * reduce-scattered, and this rank's segment is added into the shard
 * (copied on the first micro-batch). */
static dt_status dt__zg_done_hook(void *ctx, int l)
{
    dt__zgpt *z = ctx;
    const int u = z->lay_unit[l + 1];
    if (l != z->unit_low[u]) return DT_OK;
    const size_t n = z->unit_len[u];
    float *g = z->gbuf.data;
    if (z->precision != DT_F32) DT_CHECK(dt__round(z->be, dt__runner_rnd(z->run), g, n));
    int64_t seq;
    DT_CHECK(dt__zq_issue(z->q, DT__ZQ_REDUCE_SCATTER, g, n, &seq)); /* after any gather issued before it */
    DT_CHECK(dt__zq_wait(z->q, seq));
    z->traffic.scatters++;
    z->traffic.scatter_floats += (int64_t)n;
    size_t seg_lo, seg_len, shard_off;
    dt__zero_unit(z->zero, u, &seg_lo, &seg_len, &shard_off);
    if (!seg_len) return DT_OK;
    float *dst = (float *)z->grad.data + shard_off;
    if (z->accumulated == 0) return z->be->copy(z->be, dst, g + seg_lo, seg_len * sizeof(float), DT_COPY_D2D);
    return z->be->axpy(z->be, dst, 1.0f, g + seg_lo, seg_len);
}

/* The runner for (B, T): made again for a larger B or another T. */
static dt_status dt__zg_ensure(dt__zgpt *z, int B, int T)
{
    if (z->run && B <= z->B && T == z->T) return DT_OK;
    dt__runner_free(z->run);
    z->run = NULL;
    z->B = z->T = 0;
    size_t big = 0; /* the rounding of a unit's gradients */
    for (int u = 0; u < z->n_units; u++) big = DT_MAX(big, z->unit_len[u]);
    const dt__runner_config rc = {.cfg = &z->cfg,
                                  .be = z->be,
                                  .l1 = z->cfg.num_layers,
                                  .first = 1,
                                  .last = 1,
                                  .slots = 1,
                                  .B = B,
                                  .T = T,
                                  .shared = 1,
                                  .t = 1,
                                  .precision = z->precision,
                                  .round_min = big,
                                  .recompute = z->recompute,
                                  .recompute_k = z->recompute_k};
    DT_CHECK(dt__runner_create(&rc, &z->run));
    static const dt__runner_hooks hooks = {
        .bind = dt__zg_bind_hook, .done = dt__zg_done_hook, .span = dt__zg_span_hook};
    dt__runner_set_hooks(z->run, &hooks, z);
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
    z->accumulated++;
    return DT_OK;
}

dt_status dt__zgpt_zero_grad(dt__zgpt *z)
{
    z->accumulated = 0; /* the next micro-batch copies its sums into the shard */
    size_t lo, len;
    dt__zero_shard(z->zero, &lo, &len);
    return z->be->memset_zero(z->be, z->grad.data, (len ? len : 1) * sizeof(float));
}

/* ---- update and the whole weights --------------------------------------- */

dt_status dt__zgpt_restored(dt__zgpt *z)
{
    dt__zg_forget(z);
    if (z->stage != 2) return DT_OK; /* stage 3 gathers from the shard at every use */
    const size_t numel = z->layout.numel, h = dt_dtype_size(z->precision);
    if (z->precision == DT_F32 && !z->w32.data) DT_CHECK(dt_buffer_alloc(&z->w32, z->be, numel * sizeof(float)));
    if (z->precision != DT_F32 && !z->w16.data) DT_CHECK(dt_buffer_alloc(&z->w16, z->be, numel * h));
    for (int u = 0; u < z->n_units; u++) { /* each unit's segments to every rank, in place (FP32) or via gbuf */
        const size_t n = z->unit_len[u];
        float *buf = z->precision == DT_F32 ? (float *)z->w32.data + z->unit_off[u] : z->gbuf.data;
        DT_CHECK(dt__zero_unit_weights(z->zero, u, buf));
        int64_t seq;
        DT_CHECK(dt__zq_issue(z->q, DT__ZQ_ALL_GATHER, buf, n, &seq));
        DT_CHECK(dt__zq_wait(z->q, seq));
        z->traffic.refreshes++;
        z->traffic.refresh_floats += (int64_t)n;
        if (z->precision != DT_F32)
            DT_CHECK(z->be->cast(z->be, (char *)z->w16.data + z->unit_off[u] * h, z->precision, buf, DT_F32, n));
    }
    return DT_OK;
}

dt_status dt__zgpt_update(dt__zgpt *z, const dt__zero_step_args *a, dt__update_result *r)
{
    DT_CHECK(dt__zero_update(z->zero, NULL, z->grad.data, a, r));
    dt__zg_forget(z); /* the masters may have changed */
    if (r->skipped) return DT_OK;
    return z->stage == 2 ? dt__zgpt_restored(z) : DT_OK;
}

dt_status dt__zgpt_weights(dt__zgpt *z, float *host)
{
    for (int u = 0; u < z->n_units; u++) {
        const size_t n = z->unit_len[u];
        if (z->stage == 2 && z->precision == DT_F32) {
            DT_CHECK(z->be->copy(z->be, host + z->unit_off[u], (float *)z->w32.data + z->unit_off[u], n * sizeof(float),
                                 DT_COPY_D2H));
            continue;
        }
        float *buf = z->gbuf.data;
        if (z->stage == 2) {
            DT_CHECK(z->be->cast(z->be, buf, DT_F32, (char *)z->w16.data + z->unit_off[u] * dt_dtype_size(z->precision),
                                 z->precision, n));
        } else {
            DT_CHECK(dt__zero_unit_weights(z->zero, u, buf));
            int64_t seq;
            DT_CHECK(dt__zq_issue(z->q, DT__ZQ_ALL_GATHER, buf, n, &seq));
            DT_CHECK(dt__zq_wait(z->q, seq));
        }
        DT_CHECK(z->be->copy(z->be, host + z->unit_off[u], buf, n * sizeof(float), DT_COPY_D2H));
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
dt__zero *dt__zgpt_zero(dt__zgpt *z) { return z->zero; }
size_t dt__zgpt_activation_bytes(const dt__zgpt *z) { return z->run ? dt__runner_activation_bytes(z->run) : 0; }
size_t dt__zgpt_peak_activation_bytes(const dt__zgpt *z)
{
    return z->run ? dt__runner_peak_activation_bytes(z->run) : 0;
}
void dt__zgpt_traffic_of(const dt__zgpt *z, dt__zgpt_traffic *t) { *t = z->traffic; }

void dt__zgpt_bytes_of(const dt__zgpt *z, dt__zgpt_bytes *b)
{
    b->weights = z->w32.bytes + z->w16.bytes;
    b->gradients = z->grad.bytes;
    b->optimizer = dt__zero_master_bytes(z->zero) + dt__zero_state_bytes(z->zero);
    b->working = z->gbuf.bytes + z->wb[0].bytes + z->wb[1].bytes + z->wemb.bytes + z->gtied.bytes +
                 (z->run ? dt__runner_round_bytes(z->run) : 0);
}
