/* zero_gpt.c: the GPT under ZeRO stages 2 and 3 (see zero_gpt.h and
 * docs/zero.md).
 *
 * What z owns: the whole model's layout (names and offsets only), the
 * units and the layers' ranges, the sharded optimizer (a dt__zero over the
 * units, holding the shard's FP32 masters and moments), the shard's summed
 * gradients, and the working buffers: one unit's gradient (gbuf), one
 * layer's FP32 weights (wb; two with stage 3's prefetch), the collectives'
 * queue (zero_queue.c), the activation arena and the scratch of one
 * micro-batch. Stage 2 also keeps the whole weights (w32 in FP32, w16 in
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
#include "gpt_layers.h"
#include "zero_queue.h"

#define DT__ZG_NONE (-2)
#define DT__ZG_NBLOCK 12

struct dt__zgpt {
    dt_gpt_config cfg;
    dt_backend *be;
    dt_comm *dp;
    int stage;
    dt_dtype precision;
    dt_recompute recompute;
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
    int wl[2];           /* the layer each holds, DT__ZG_NONE: none */
    int64_t wseq[2];     /* its gather's place in the queue, -1: none pending */
    int cur;             /* the buffer the bound layer reads */
    int prefetch;        /* stage 3: gather the next layer while this one computes */
    dt__zq *q;           /* every collective, in issue order */
    int64_t accumulated; /* micro-batches added into grad since zero_grad */

    /* the bound views of the layer being computed */
    float *wte, *wpe, *gwte, *gwpe;
    dt__block_params bp, bg;
    dt__head_params hp, hg;

    /* activations and scratch, as lib/model/gpt.c's */
    int B, T, cur_B, cur_T, have_forward, has_targets, n_counted;
    dt_buffer act_buf;
    dt__arena arena;
    dt__block_acts *acts;               /* (L) */
    void *(*packed)[DT__BLOCK_NFIELDS]; /* (L) mixed precision: each block's saved tensors in 2-byte storage */
    size_t *mark;                       /* (L) arena mark before block l's saved tensors, released after its backward */
    float *x0;
    dt__head_acts head_acts;
    size_t head_mark;
    dt_buffer work;
    int32_t *d_tokens, *d_targets;
    float *losses;
    uint8_t *correct;
    dt__block_scratch scratch;
    float *dres;
    dt__rounder rnd;
    dt_buffer round_buf;

    dt_gpt_layer_hook hook;
    void *hook_ctx;
    dt__zgpt_traffic traffic;
};

/* ---- units ---------------------------------------------------------------- */

/* The first tensor of layer l in the whole layout (untied: head = lnf.w, lnf.b, lm_head.w). */
static int dt__zg_first_tensor(int L, int layer) { return layer == -1 ? 0 : 2 + DT__ZG_NBLOCK * layer; }

int dt__zgpt_buckets(const dt_paramset *ps, int L, size_t bucket_bytes, size_t *off, size_t *len, int *low)
{
    size_t end = ps->numel, acc = 0;
    int n = 0;
    for (int layer = L; layer >= -1; layer--) {
        /* tensors of the layer: embedding 0..1, block l 2+12l..13+12l, head the last 3 */
        int first = layer == -1 ? 0 : layer == L ? ps->count - 3 : 2 + DT__ZG_NBLOCK * layer;
        size_t lo = ps->info[first].offset;
        acc += end - lo;
        end = lo;
        if (acc * sizeof(float) >= bucket_bytes || layer == -1) {
            off[n] = lo;
            len[n] = acc;
            low[n++] = layer;
            acc = 0;
        }
    }
    return n;
}

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
    for (int l = -1; l <= L; l++) {
        z->lay_off[l + 1] = ps->info[dt__zg_first_tensor(L, l)].offset;
        const size_t end = l == L ? ps->numel : ps->info[dt__zg_first_tensor(L, l + 1)].offset;
        z->lay_len[l + 1] = end - z->lay_off[l + 1];
    }
    /* stage 3: every layer a unit (the buckets of bucket_bytes 0); stage 2: the buckets */
    const int nb = dt__zgpt_buckets(ps, L, z->stage == 3 ? 0 : bucket_bytes, boff, blen, blow);
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

/* Layer l's tensors inside a buffer whose element 0 is flat element origin. */
static void dt__zg_bind(dt__zgpt *z, int l, float *base, size_t origin, int grads)
{
    const dt_param_info *in = z->layout.info;
    const int k = dt__zg_first_tensor(z->cfg.num_layers, l);
#define AT(i) (base + (in[k + (i)].offset - origin))
    if (l == -1) {
        if (grads) z->gwte = AT(0), z->gwpe = AT(1);
        else z->wte = AT(0), z->wpe = AT(1);
    } else if (l == z->cfg.num_layers) {
        dt__head_params *h = grads ? &z->hg : &z->hp;
        h->lnfw = AT(0), h->lnfb = AT(1), h->lmw = AT(2);
    } else {
        dt__block_params *b = grads ? &z->bg : &z->bp;
        float **f[DT__ZG_NBLOCK] = {&b->ln1w, &b->ln1b, &b->qkvw, &b->qkvb, &b->attprojw, &b->attprojb,
                                    &b->ln2w, &b->ln2b, &b->fcw,  &b->fcb,  &b->fcprojw,  &b->fcprojb};
        for (int i = 0; i < DT__ZG_NBLOCK; i++) *f[i] = AT(i);
    }
#undef AT
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

static size_t dt__zg_pad(size_t n) { return (n + 15) & ~(size_t)15; }

/* Mixed precision: a block's saved tensors packed into 2-byte stores, as
 * lib/model/gpt.c keeps them (the last block's output FP32, for the head). */
static int dt__zg_packs(const dt__zgpt *z) { return z->precision != DT_F32; }

static dt__block_pack dt__zg_pack_of(const dt__zgpt *z, int l, int B, int T)
{
    return (dt__block_pack){.cfg = &z->cfg,
                            .t = 1,
                            .B = B,
                            .T = T,
                            .with_att = z->recompute != DT_RECOMPUTE_SELECTIVE,
                            .out_fp32 = l == z->cfg.num_layers - 1,
                            .dtype = z->precision};
}

/* Saved-activation floats, as lib/model/gpt.c's: none E + L*A + H;
 * selective E + L*(A - ATT) + max(ATT, H); packed (mixed precision) E +
 * the blocks' stores + max(A + P, H) (one block's FP32 working set and its
 * unpacked input while it runs). */
static size_t dt__zg_act_floats(const dt__zgpt *z, int B, int T)
{
    const dt_gpt_config *c = &z->cfg;
    const size_t L = (size_t)c->num_layers, E = dt__embed_act_floats(c, B, T), H = dt__head_act_floats(z->be, c, B, T);
    const size_t A = dt__block_act_floats(c, B, T, 1);
    if (dt__zg_packs(z)) {
        size_t stores = 0, P = dt__zg_pad((size_t)B * T * c->hidden_size);
        for (size_t l = 0; l < L; l++) {
            const dt__block_pack k = dt__zg_pack_of(z, (int)l, B, T);
            stores += dt__block_packed_floats(&k);
        }
        return E + stores + DT_MAX(A + P, H);
    }
    if (z->recompute == DT_RECOMPUTE_SELECTIVE) {
        const size_t att = dt__block_att_floats(c, B, T);
        return E + L * (A - att) + DT_MAX(att, H);
    }
    return E + L * A + H;
}

static dt_status dt__zg_ensure(dt__zgpt *z, int B, int T)
{
    if (B <= z->B && T == z->T && z->act_buf.data) return DT_OK;
    const dt_gpt_config *c = &z->cfg;
    dt_buffer_free(&z->act_buf);
    dt_buffer_free(&z->work);
    dt_buffer_free(&z->round_buf);
    z->B = z->T = 0;
    const size_t acts = dt__zg_act_floats(z, B, T);
    DT_CHECK(dt_buffer_alloc(&z->act_buf, z->be, acts * sizeof(float)));
    z->arena = (dt__arena){.base = z->act_buf.data, .capacity = acts};
    const size_t BT = (size_t)B * T;
    const size_t work = 2 * dt__zg_pad(BT) + dt__zg_pad(BT) + dt__zg_pad(BT / 4 + 1) +
                        dt__block_scratch_floats(c, B, T) + dt__zg_pad(BT * c->hidden_size);
    DT_CHECK(dt_buffer_alloc(&z->work, z->be, work * sizeof(float)));
    z->rnd = (dt__rounder){.dtype = z->precision};
    if (z->precision != DT_F32) {
        size_t big = 0;
        for (int u = 0; u < z->n_units; u++) big = DT_MAX(big, z->unit_len[u]);
        const size_t cap = DT_MAX(DT_MAX((size_t)B * c->num_heads * T * T, 4 * BT * c->hidden_size),
                                  DT_MAX(BT * dt__head_ld(z->be, c->vocab_size), big));
        DT_CHECK(dt_buffer_alloc(&z->round_buf, z->be, cap * dt_dtype_size(z->precision)));
        z->rnd.scratch = z->round_buf.data;
        z->rnd.capacity = cap;
    }
    float *w = z->work.data;
    z->d_tokens = (int32_t *)w, w += dt__zg_pad(BT);
    z->d_targets = (int32_t *)w, w += dt__zg_pad(BT);
    z->losses = w, w += dt__zg_pad(BT);
    z->correct = (uint8_t *)w, w += dt__zg_pad(BT / 4 + 1);
    dt__block_scratch_bind(&z->scratch, c, B, T, w); /* and its B-to-W hand-over (keep) */
    w += dt__block_scratch_floats(c, B, T);
    z->dres = w;
    z->B = B;
    z->T = T;
    return DT_OK;
}

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
    if (c->model->tie_embeddings)
        return DT_FAIL(DT_ERR_INVALID, "--zero-stage %d with tied embeddings: not supported yet", c->stage);
    if (c->recompute == DT_RECOMPUTE_FULL)
        return DT_FAIL(DT_ERR_INVALID, "--zero-stage %d with --recompute-granularity full: not supported yet",
                       c->stage);
    DT_CHECK(dt_gpt_config_validate(c->model));
    dt__zgpt *z = calloc(1, sizeof *z);
    if (!z) return DT_FAIL(DT_ERR_NOMEM, "--zero-stage: out of memory");
    z->cfg = *c->model;
    z->be = be;
    z->dp = dp;
    z->stage = c->stage;
    z->precision = c->precision;
    z->recompute = c->recompute;
    z->wl[0] = z->wl[1] = DT__ZG_NONE;
    z->wseq[0] = z->wseq[1] = -1;
    z->prefetch = c->prefetch && c->stage == 3;
    dt_paramset_init(&z->layout);
    dt_buffer whole = {0};
    dt_status st;
    z->acts = calloc((size_t)z->cfg.num_layers, sizeof *z->acts);
    z->packed = calloc((size_t)z->cfg.num_layers, sizeof *z->packed);
    z->mark = calloc((size_t)z->cfg.num_layers, sizeof *z->mark);
    if (!z->acts || !z->packed || !z->mark) {
        st = DT_FAIL(DT_ERR_NOMEM, "--zero-stage: out of memory");
        goto fail;
    }
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
    dt_buffer_free(&z->act_buf);
    dt_buffer_free(&z->work);
    dt_buffer_free(&z->round_buf);
    dt_paramset_free(&z->layout);
    free(z->lay_off);
    free(z->lay_len);
    free(z->lay_unit);
    free(z->unit_off);
    free(z->unit_len);
    free(z->unit_low);
    free(z->unit_high);
    free(z->acts);
    free(z->packed);
    free(z->mark);
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

/* The layer's span, under the queue's lock: with prefetch its thread
 * writes the collectives' spans meanwhile. */
static void dt__zg_hook(dt__zgpt *z, int layer, char pass, int64_t t0)
{
    if (!z->hook) return;
    if (z->be->synchronize) (void)z->be->synchronize(z->be);
    dt__zg_span s = {.z = z, .layer = layer, .pass = pass, .t0 = t0, .t1 = dt_time_ns()};
    dt__zq_locked(z->q, dt__zg_hook_call, &s);
}

static const dt__rounder *dt__zg_rnd(const dt__zgpt *z) { return z->precision == DT_F32 ? NULL : &z->rnd; }

/* ---- forward ---------------------------------------------------------------- */

/* The input of block l as FP32: the embedding output, or block l-1's packed
 * output unpacked into a temporary on top of the arena. */
static dt_status dt__zg_block_input(dt__zgpt *z, int l, const float **x)
{
    if (l == 0) {
        *x = z->x0;
        return DT_OK;
    }
    const size_t n = (size_t)z->cur_B * z->cur_T * z->cfg.hidden_size;
    float *x32;
    DT_CHECK(dt__arena_alloc(&z->arena, n, &x32));
    DT_CHECK(z->be->cast(z->be, x32, DT_F32, z->packed[l - 1][DT__BLOCK_OUT], z->precision, n));
    *x = x32;
    return DT_OK;
}

/* Mixed precision, block l (weights bound): forward = 1 runs it in an FP32
 * working set and packs what it saves into its stores; forward = 0
 * unpacks them, recomputes the attention log-sum-exp under selective
 * recomputation, and runs its backward (gradients bound). As gpt.c's. */
static dt_status dt__zg_block_packed(dt__zgpt *z, int l, int forward)
{
    const dt_gpt_config *c = &z->cfg;
    const int B = z->cur_B, T = z->cur_T;
    const dt__block_pack k = dt__zg_pack_of(z, l, B, T);
    if (forward) DT_CHECK(dt__block_pack_alloc(&k, &z->arena, z->packed[l]));
    const size_t mark = dt__arena_mark(&z->arena);
    dt__block_acts w;
    const float *x;
    DT_CHECK(dt__block_acts_alloc(&z->arena, c, B, T, 1, &z->scratch.tmp, &w));
    if (!forward) DT_CHECK(dt__block_pack_copy(&k, z->be, &w, z->packed[l], 0));
    DT_CHECK(dt__zg_block_input(z, l, &x));
    if (forward) {
        DT_CHECK(dt__block_forward(z->be, c, &z->bp, &w, x, B, T, dt__zg_rnd(z)));
        DT_CHECK(dt__block_pack_copy(&k, z->be, &w, z->packed[l], 1));
    } else {
        if (z->recompute == DT_RECOMPUTE_SELECTIVE) {
            const int64_t t0 = dt_time_ns();
            DT_CHECK(
                z->be->attention_forward(z->be, z->scratch.dbtc, w.lse, w.qkv, B, T, c->hidden_size, c->num_heads));
            dt__zg_hook(z, l, 'R', t0);
        }
        DT_CHECK(dt__block_backward(z->be, c, &z->bp, &z->bg, &w, &z->scratch, x, z->dres, B, T, dt__zg_rnd(z)));
    }
    dt__arena_release(&z->arena, mark);
    return DT_OK;
}

dt_status dt__zgpt_forward(dt__zgpt *z, const int32_t *tokens, const int32_t *targets, int B, int T, float *loss)
{
    const dt_gpt_config *c = &z->cfg;
    dt_backend *be = z->be;
    if (B < 1) return DT_FAIL(DT_ERR_INVALID, "forward: batch size %d (expected >= 1)", B);
    if (T < 1 || T > c->seq_len)
        return DT_FAIL(DT_ERR_INVALID, "forward: sequence length %d outside 1..%d (the model's context)", T,
                       c->seq_len);
    for (int i = 0; i < B * T; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size || (targets && targets[i] >= c->vocab_size))
            return DT_FAIL(DT_ERR_INVALID, "forward: token or target at position %d outside the vocabulary of %d", i,
                           c->vocab_size);
    DT_CHECK(dt__zg_ensure(z, B, T));
    z->have_forward = 0;
    z->cur_B = B;
    z->cur_T = T;
    const int N = B * T;
    dt__arena_reset(&z->arena);
    DT_CHECK(be->copy(be, z->d_tokens, tokens, (size_t)N * sizeof(int32_t), DT_COPY_H2D));
    z->has_targets = targets != NULL;
    z->n_counted = 0;
    if (targets) {
        DT_CHECK(be->copy(be, z->d_targets, targets, (size_t)N * sizeof(int32_t), DT_COPY_H2D));
        for (int i = 0; i < N; i++) z->n_counted += targets[i] >= 0;
    }
    int64_t t0 = dt_time_ns();
    DT_CHECK(dt__zg_weights(z, -1, 0)); /* next: block 0, or the head */
    DT_CHECK(dt__embed_forward(be, c, z->wte, z->wpe, z->d_tokens, &z->arena, &z->x0, B, T, dt__zg_rnd(z)));
    dt__zg_hook(z, -1, 'F', t0);
    const float *x = z->x0;
    const int with_att = z->recompute != DT_RECOMPUTE_SELECTIVE;
    for (int l = 0; l < c->num_layers && dt__zg_packs(z); l++) {
        t0 = dt_time_ns();
        DT_CHECK(dt__zg_weights(z, l, l + 1));
        z->mark[l] = dt__arena_mark(&z->arena);
        DT_CHECK(dt__zg_block_packed(z, l, 1));
        dt__zg_hook(z, l, 'F', t0);
    }
    if (dt__zg_packs(z) && c->num_layers) x = z->packed[c->num_layers - 1][DT__BLOCK_OUT]; /* kept FP32 */
    for (int l = 0; l < c->num_layers && !dt__zg_packs(z); l++) {
        t0 = dt_time_ns();
        DT_CHECK(dt__zg_weights(z, l, l + 1));
        z->mark[l] = dt__arena_mark(&z->arena);
        DT_CHECK(dt__block_acts_alloc(&z->arena, c, B, T, with_att, &z->scratch.tmp, &z->acts[l]));
        const size_t mark = dt__arena_mark(&z->arena);
        if (!with_att) /* the attention lse live only while the block runs */
            DT_CHECK(dt__arena_alloc(&z->arena, dt__block_att_floats(c, B, T), &z->acts[l].lse));
        DT_CHECK(dt__block_forward(be, c, &z->bp, &z->acts[l], x, B, T, dt__zg_rnd(z)));
        if (!with_att) {
            dt__arena_release(&z->arena, mark);
            z->acts[l].lse = NULL;
        }
        x = z->acts[l].out;
        dt__zg_hook(z, l, 'F', t0);
    }
    t0 = dt_time_ns();
    DT_CHECK(dt__zg_weights(z, c->num_layers, DT__ZG_NONE)); /* nothing in flight after the forward */
    z->head_mark = dt__arena_mark(&z->arena);
    DT_CHECK(dt__head_forward(be, c, &z->hp, &z->arena, &z->head_acts, x, targets ? z->d_targets : NULL, z->losses,
                              z->correct, B, T, dt__zg_rnd(z)));
    float mean = 0.0f;
    if (targets) DT_CHECK(dt__head_mean_loss(be, z->losses, N, z->n_counted, &mean));
    dt__zg_hook(z, c->num_layers, 'F', t0);
    if (loss) *loss = mean;
    z->have_forward = 1;
    return DT_OK;
}

/* ---- backward --------------------------------------------------------------- */

/* Before layer l's backward: a fresh gradient buffer when l opens its unit
 * (its highest layer), and the layer's gradient views bound into it. */
static dt_status dt__zg_grads_open(dt__zgpt *z, int l)
{
    const int u = z->lay_unit[l + 1];
    if (l == z->unit_high[u]) DT_CHECK(z->be->memset_zero(z->be, z->gbuf.data, z->unit_len[u] * sizeof(float)));
    dt__zg_bind(z, l, z->gbuf.data, z->unit_off[u], 1);
    return DT_OK;
}

/* After layer l's backward: when l closes its unit (its lowest layer), the
 * unit's gradients, rounded to the 16-bit format under mixed precision (as
 * gpt.c rounds each micro-batch's), are reduce-scattered, and this rank's
 * segment is added into the shard (copied on the first micro-batch). */
static dt_status dt__zg_grads_close(dt__zgpt *z, int l)
{
    const int u = z->lay_unit[l + 1];
    if (l != z->unit_low[u]) return DT_OK;
    const size_t n = z->unit_len[u];
    float *g = z->gbuf.data;
    if (z->precision != DT_F32) DT_CHECK(dt__round(z->be, &z->rnd, g, n));
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

dt_status dt__zgpt_backward(dt__zgpt *z, float loss_scale)
{
    const dt_gpt_config *c = &z->cfg;
    dt_backend *be = z->be;
    if (!z->have_forward || !z->has_targets)
        return DT_FAIL(DT_ERR_INVALID, "backward: no forward pass with targets to differentiate");
    const int B = z->cur_B, T = z->cur_T, L = c->num_layers;
    const float dloss = z->n_counted ? loss_scale / (float)z->n_counted : 0.0f;
    int64_t t0 = dt_time_ns();
    const float *xL = !L                ? z->x0
                      : dt__zg_packs(z) ? (const float *)z->packed[L - 1][DT__BLOCK_OUT]
                                        : z->acts[L - 1].out;
    DT_CHECK(dt__zg_weights(z, L, L ? L - 1 : DT__ZG_NONE)); /* still there from the forward: no second gather */
    DT_CHECK(dt__zg_grads_open(z, L));
    DT_CHECK(dt__head_backward(be, c, &z->hp, &z->hg, &z->head_acts, xL, z->d_targets, z->losses, dloss, z->dres,
                               z->scratch.dbtc, B, T, dt__zg_rnd(z)));
    dt__arena_release(&z->arena, z->head_mark);
    dt__zg_hook(z, L, 'B', t0);
    DT_CHECK(dt__zg_grads_close(z, L));
    for (int l = L - 1; l >= 0 && dt__zg_packs(z); l--) {
        DT_CHECK(dt__zg_weights(z, l, l ? l - 1 : DT__ZG_NONE)); /* the embedding's backward reads no weights */
        t0 = dt_time_ns();
        DT_CHECK(dt__zg_grads_open(z, l));
        DT_CHECK(dt__zg_block_packed(z, l, 0));
        dt__arena_release(&z->arena, z->mark[l]); /* its stores are spent */
        dt__zg_hook(z, l, 'B', t0);
        DT_CHECK(dt__zg_grads_close(z, l));
    }
    for (int l = L - 1; l >= 0 && !dt__zg_packs(z); l--) {
        const float *x = l ? z->acts[l - 1].out : z->x0;
        DT_CHECK(dt__zg_weights(z, l, l ? l - 1 : DT__ZG_NONE));
        if (z->recompute == DT_RECOMPUTE_SELECTIVE) { /* the attention lse again, from the kept qkv */
            t0 = dt_time_ns();
            DT_CHECK(dt__arena_alloc(&z->arena, dt__block_att_floats(c, B, T), &z->acts[l].lse));
            DT_CHECK(be->attention_forward(be, z->scratch.dbtc, z->acts[l].lse, z->acts[l].qkv, B, T, c->hidden_size,
                                           c->num_heads));
            dt__zg_hook(z, l, 'R', t0);
        }
        t0 = dt_time_ns();
        DT_CHECK(dt__zg_grads_open(z, l));
        DT_CHECK(dt__block_backward(be, c, &z->bp, &z->bg, &z->acts[l], &z->scratch, x, z->dres, B, T, dt__zg_rnd(z)));
        dt__arena_release(&z->arena, z->mark[l]); /* the block's saved activations are spent */
        if (z->recompute == DT_RECOMPUTE_SELECTIVE) z->acts[l].lse = NULL;
        dt__zg_hook(z, l, 'B', t0);
        DT_CHECK(dt__zg_grads_close(z, l));
    }
    z->have_forward = 0; /* the embedding's backward reads the tokens and dres only: every activation is spent */
    dt__arena_reset(&z->arena);
    t0 = dt_time_ns(); /* the embedding's backward reads no weights: nothing to gather */
    DT_CHECK(dt__zg_grads_open(z, -1));
    DT_CHECK(dt__embed_backward(be, c, z->gwte, z->gwpe, z->d_tokens, z->dres, B, T));
    dt__zg_hook(z, -1, 'B', t0);
    DT_CHECK(dt__zg_grads_close(z, -1));
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
    if (!z->has_targets || z->cur_B == 0)
        return DT_FAIL(DT_ERR_INVALID, "position stats: no forward pass with targets");
    const size_t N = (size_t)z->cur_B * z->cur_T;
    if (losses) DT_CHECK(z->be->copy(z->be, losses, z->losses, N * sizeof(float), DT_COPY_D2H));
    if (correct) DT_CHECK(z->be->copy(z->be, correct, z->correct, N, DT_COPY_D2H));
    return DT_OK;
}

const dt_paramset *dt__zgpt_layout(const dt__zgpt *z) { return &z->layout; }
dt__zero *dt__zgpt_zero(dt__zgpt *z) { return z->zero; }
size_t dt__zgpt_activation_bytes(const dt__zgpt *z) { return z->arena.used * sizeof(float); }
size_t dt__zgpt_peak_activation_bytes(const dt__zgpt *z) { return z->arena.peak * sizeof(float); }
void dt__zgpt_traffic_of(const dt__zgpt *z, dt__zgpt_traffic *t) { *t = z->traffic; }

void dt__zgpt_bytes_of(const dt__zgpt *z, dt__zgpt_bytes *b)
{
    b->weights = z->w32.bytes + z->w16.bytes;
    b->gradients = z->grad.bytes;
    b->optimizer = dt__zero_master_bytes(z->zero) + dt__zero_state_bytes(z->zero);
    b->working = z->gbuf.bytes + z->wb[0].bytes + z->wb[1].bytes + z->round_buf.bytes;
}
