/* runner.c: the one loop over the GPT's layers (runner.h): creation, the
 * slots and their memory, precision and recomputation settings, and the
 * forward. The backward, whole or split into B and W, is
 * runner_backward.c's; what both use is runner_impl.h's.
 *
 * Per slot an arena holds its fixed buffers (input, tokens, targets,
 * losses, flags: below its mark) and then what its forward keeps: the
 * embedding output, each block's saved tensors (or, packed under
 * --fp16/--bf16, their 2-byte stores; or under full recomputation one
 * output per group), the head's activations. A block's transients and an
 * op's working set go to the work arena, which in the shared discipline
 * is the slot's own (so releasing in stack order gives gpt.c's peaks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "dt_time.h"
#include "runner_impl.h"

size_t dt__runner_pad(size_t n) { return (n + 15) & ~(size_t)15; }
const dt__vocab *dt__runner_vp(const dt__runner *r) { return r->vocab.t > 1 ? &r->vocab : NULL; }

/* ---- sizes ------------------------------------------------------------- */

int dt__runner_packs(const dt__runner *r) { return r->precision != DT_F32 && r->recompute != DT_RECOMPUTE_FULL; }

dt__block_pack dt__runner_pack_of(const dt__runner *r, int l, int B, int T)
{
    return (dt__block_pack){.cfg = &r->cfg,
                            .sh = r->sh,
                            .B = B,
                            .T = T,
                            .with_att = r->recompute != DT_RECOMPUTE_SELECTIVE,
                            .out_fp32 = l == r->nb - 1, /* the head's input, or the message sent on */
                            .dtype = r->precision};
}

size_t dt__runner_shared_floats(const dt_backend *be, const dt_gpt_config *c, dt_dtype dtype, dt_recompute mode, int K,
                                int B, int T)
{
    /* With E, A, H the embedding, block and head footprints, P = B*T*C,
     * ATT the attention log-sum-exp, G = ceil(L/K):
     *   none:      E + L*A + H
     *   selective: E + L*(A - ATT) + max(ATT, H)
     *   full, K:   E + max(G*P + H, max over groups g of (g+1)*P + K_g*A)
     *              (group outputs kept; one group's activations live at a
     *              time; K_g = K but for a shorter last group)
     *   packed (16-bit, not full): E + the blocks' stores + max(A + P, H)
     *              (one block's FP32 working set and its unpacked input) */
    const size_t L = (size_t)c->num_layers, E = dt__embed_act_floats(c, B, T), H = dt__head_act_floats(be, c, B, T, 1);
    const size_t A = dt__block_act_floats(c, DT__WHOLE, B, T, 1), P = dt__runner_pad((size_t)B * T * c->hidden_size);
    if (dtype != DT_F32 && mode != DT_RECOMPUTE_FULL) {
        size_t stores = 0;
        for (size_t l = 0; l < L; l++) {
            const dt__block_pack k = {.cfg = c,
                                      .sh = DT__WHOLE,
                                      .B = B,
                                      .T = T,
                                      .with_att = mode != DT_RECOMPUTE_SELECTIVE,
                                      .out_fp32 = l == L - 1,
                                      .dtype = dtype};
            stores += dt__block_packed_floats(&k);
        }
        return E + stores + DT_MAX(A + P, H);
    }
    switch (mode) {
    case DT_RECOMPUTE_SELECTIVE: {
        const size_t att = dt__block_att_floats(c, 1, B, T);
        return E + L * (A - att) + DT_MAX(att, H);
    }
    case DT_RECOMPUTE_FULL: {
        /* forward of group g holds g+1 group outputs and K_g blocks; the
         * head holds all G outputs; backward of group g holds g outputs */
        const size_t G = (L + (size_t)K - 1) / (size_t)K;
        size_t peak = G * P + H;
        for (size_t g = 0; g < G; g++) peak = DT_MAX(peak, (g + 1) * P + DT_MIN((size_t)K, L - g * (size_t)K) * A);
        return E + peak;
    }
    case DT_RECOMPUTE_NONE: break;
    }
    return E + L * A + H;
}

/* The fixed buffers of a slot: input (not first), tokens, targets (int32
 * as floats), losses, flags. */
static size_t dt__runner_fixed_floats(const dt__runner *r)
{
    const size_t N = (size_t)r->B * r->T, C = (size_t)r->cfg.hidden_size;
    return (r->first ? 0 : dt__runner_pad(dt__shard_rows(r->sh, N) * C)) + 4 * dt__runner_pad(N);
}

/* What B keeps for W in a slot's arena (runner_backward.c): each block's
 * keep, the head's dlnf (last), the embedding output's gradient (first),
 * and under full recomputation every block's recomputed activations. */
static size_t dt__runner_split_floats(const dt__runner *r)
{
    const size_t NC = dt__runner_pad(dt__shard_rows(r->sh, (size_t)r->B * r->T) * r->cfg.hidden_size);
    size_t n = (size_t)r->nb * (dt__runner_packs(r) ? dt__block_keep_packed_floats(&r->cfg, r->sh, r->B, r->T)
                                                    : dt__block_keep_floats(&r->cfg, r->sh, r->B, r->T, 1));
    n += (r->last ? NC : 0) + (r->first ? NC : 0);
    if (r->recompute == DT_RECOMPUTE_FULL) n += (size_t)r->nb * dt__block_act_floats(&r->cfg, r->sh, r->B, r->T, 1);
    return n;
}

/* The stage discipline: one slot's arena, fixed buffers then the saved
 * activations of a forward: every block's (none), without the attention
 * log-sum-exp (selective), or one (B,T,C) output per group (full). */
static size_t dt__runner_slot_floats(const dt__runner *r)
{
    const int B = r->B, T = r->T;
    const size_t N = dt__shard_rows(r->sh, (size_t)B * T), C = (size_t)r->cfg.hidden_size;
    size_t n = dt__runner_fixed_floats(r);
    if (r->first) n += dt__runner_pad(N * C); /* the embedding's output (dt__embed_act_floats: the rank's rows) */
    if (dt__runner_packs(r)) {
        for (int l = 0; l < r->nb; l++) {
            const dt__block_pack k = dt__runner_pack_of(r, l, B, T);
            n += dt__block_packed_floats(&k);
        }
    } else {
        switch (r->recompute) {
        case DT_RECOMPUTE_FULL: n += (size_t)r->groups * dt__runner_pad(N * C); break;
        case DT_RECOMPUTE_SELECTIVE: n += (size_t)r->nb * dt__block_act_floats(&r->cfg, r->sh, B, T, 0); break;
        case DT_RECOMPUTE_NONE: n += (size_t)r->nb * dt__block_act_floats(&r->cfg, r->sh, B, T, 1); break;
        }
    }
    if (r->last) n += dt__head_act_floats(r->be, &r->hcfg, B, T, r->vocab.t);
    if (r->split) n += dt__runner_split_floats(r);
    return n + 64;
}

/* The stage discipline's work arena: the attention lse of one block
 * (selective), the activations of one group (full); packed, one block's
 * FP32 working set and its unpacked input (and, split, a keep's FP32
 * buffers beside; the rest in the block's fch and qkv). */
static size_t dt__runner_work_floats(const dt__runner *r)
{
    const size_t A = dt__block_act_floats(&r->cfg, r->sh, r->B, r->T, 1);
    if (dt__runner_packs(r))
        return A + dt__runner_pad(dt__shard_rows(r->sh, (size_t)r->B * r->T) * r->cfg.hidden_size) +
               (r->split ? dt__block_keep_floats(&r->cfg, r->sh, r->B, r->T, 1) : 0) + 64;
    switch (r->recompute) {
    case DT_RECOMPUTE_FULL: return (size_t)r->recompute_k * A + 64;
    case DT_RECOMPUTE_SELECTIVE: return dt__block_att_floats(&r->cfg, r->t, r->B, r->T) + 64;
    case DT_RECOMPUTE_NONE: break;
    }
    return 0;
}

/* ---- slots ---------------------------------------------------------------- */

static void dt__runner_slots_free(dt__runner *r)
{
    for (int k = 0; r->slots && k < r->nslots; k++) {
        dt__rslot *sl = &r->slots[k];
        dt_buffer_free(&sl->buf);
        free(sl->acts);
        free(sl->ckpt);
        free(sl->packed);
        free(sl->keep);
        free(sl->kpacked);
        free(sl->lmark);
        *sl = (dt__rslot){0};
    }
    dt_buffer_free(&r->work_buf);
    r->work_own = (dt__arena){0};
    r->work = &r->work_own;
    r->act_now = r->act_peak = 0;
}

/* Each slot's arena and fixed buffers, and the work arena, for the current settings. */
static dt_status dt__runner_slots_alloc(dt__runner *r)
{
    const size_t N = (size_t)r->B * r->T, C = (size_t)r->cfg.hidden_size, n = dt__shard_rows(r->sh, N);
    const size_t per = r->shared ? dt__runner_fixed_floats(r) + 64 +
                                       dt__runner_shared_floats(r->be, &r->cfg, r->precision, r->recompute,
                                                                r->recompute_k, r->B, r->T)
                                 : dt__runner_slot_floats(r);
    const size_t work = r->shared ? 0 : dt__runner_work_floats(r);
    if (work) {
        DT_CHECK(dt_buffer_alloc(&r->work_buf, r->be, work * sizeof(float)));
        r->work_own = (dt__arena){.base = r->work_buf.data, .capacity = work};
    }
    const int nb = r->nb ? r->nb : 1;
    for (int k = 0; k < r->nslots; k++) {
        dt__rslot *sl = &r->slots[k];
        sl->acts = calloc((size_t)nb, sizeof *sl->acts);
        sl->ckpt = calloc((size_t)nb, sizeof *sl->ckpt);
        sl->packed = calloc((size_t)nb, sizeof *sl->packed);
        sl->keep = calloc((size_t)nb, sizeof *sl->keep);
        sl->kpacked = calloc((size_t)nb, sizeof *sl->kpacked);
        sl->lmark = calloc((size_t)nb, sizeof *sl->lmark);
        if (!sl->acts || !sl->ckpt || !sl->packed || !sl->keep || !sl->kpacked || !sl->lmark)
            return DT_FAIL(DT_ERR_NOMEM, "layer runner: out of memory");
        DT_CHECK(dt_buffer_alloc(&sl->buf, r->be, per * sizeof(float)));
        sl->arena = (dt__arena){.base = sl->buf.data, .capacity = per};
        float *f;
        if (!r->first) DT_CHECK(dt__arena_alloc(&sl->arena, n * C, &sl->input));
        DT_CHECK(dt__arena_alloc(&sl->arena, N, &f));
        sl->tokens = (int32_t *)f;
        DT_CHECK(dt__arena_alloc(&sl->arena, N, &f));
        sl->targets = (int32_t *)f;
        DT_CHECK(dt__arena_alloc(&sl->arena, N, &sl->losses));
        DT_CHECK(dt__arena_alloc(&sl->arena, N, &f));
        sl->correct = (uint8_t *)f;
        sl->mark = dt__arena_mark(&sl->arena);
        sl->arena.peak = sl->mark;
    }
    if (r->shared) r->work = &r->slots[0].arena;
    return DT_OK;
}

/* The storage format, and under 16 bits the rounding scratch: the
 * largest tensor rounded (attention's (T x T) scores, fch, the logits,
 * the owner's round_min). No slot may be allocated for another format. */
static dt_status dt__runner_use_precision(dt__runner *r, dt_dtype dtype, size_t round_min)
{
    dt_buffer_free(&r->round_buf);
    r->rnd = (dt__rounder){.dtype = dtype, .fp8 = dtype == DT_BF16 ? r->fp8 : NULL};
    r->precision = dtype;
    if (dtype == DT_F32) return DT_OK;
    const dt_gpt_config *c = &r->cfg;
    const size_t BT = (size_t)r->B * r->T;
    const size_t cap = DT_MAX(DT_MAX((size_t)r->B * c->num_heads * r->T * r->T, 4 * BT * c->hidden_size),
                              DT_MAX(BT * dt__head_ld(r->be, r->hcfg.vocab_size), round_min));
    DT_CHECK(dt_buffer_alloc(&r->round_buf, r->be, cap * dt_dtype_size(dtype)));
    r->rnd.scratch = r->round_buf.data;
    r->rnd.capacity = cap;
    return DT_OK;
}

static dt_status dt__runner_use_recompute(dt__runner *r, dt_recompute mode, int num_layers)
{
    if (mode != DT_RECOMPUTE_NONE && mode != DT_RECOMPUTE_FULL && mode != DT_RECOMPUTE_SELECTIVE)
        return DT_FAIL(DT_ERR_INVALID, "recompute mode %d: expected none, full or selective", (int)mode);
    if (mode == DT_RECOMPUTE_FULL && num_layers < 1)
        return DT_FAIL(DT_ERR_INVALID, "--recompute-num-layers %d: expected >= 1", num_layers);
    r->recompute = mode;
    r->recompute_k = mode == DT_RECOMPUTE_FULL ? DT_MIN(num_layers, DT_MAX(r->nb, 1)) : 0;
    r->groups = mode == DT_RECOMPUTE_FULL ? (r->nb + r->recompute_k - 1) / r->recompute_k : 0;
    return DT_OK;
}

static dt_status dt__runner_idle(const dt__runner *r, const char *what)
{
    for (int k = 0; k < r->nslots; k++)
        if (r->slots[k].busy) return DT_FAIL(DT_ERR_INVALID, "layer runner %s: slot %d is in flight", what, k);
    return DT_OK;
}

/* ---- creation and settings --------------------------------------------- */

dt__runner_config dt__runner_whole(const dt_gpt_config *cfg, dt_backend *be, int B, int T, dt_dtype precision,
                                   size_t round_min, dt_recompute recompute, int recompute_k)
{
    return (dt__runner_config){.cfg = cfg,
                               .be = be,
                               .l1 = cfg->num_layers,
                               .first = 1,
                               .last = 1,
                               .slots = 1,
                               .B = B,
                               .T = T,
                               .shared = 1,
                               .t = 1,
                               .precision = precision,
                               .round_min = round_min,
                               .recompute = recompute,
                               .recompute_k = recompute_k};
}

dt_status dt__runner_create(const dt__runner_config *c, dt__runner **out)
{
    *out = NULL;
    const int nb = c->l1 - c->l0;
    if (c->l0 < 0 || nb < 0 || c->l1 > c->cfg->num_layers || c->slots < 1 || c->B < 1 || c->T < 1 ||
        c->T > c->cfg->seq_len || c->t < 1 ||
        (c->sp && (c->t < 2 || ((size_t)c->B * c->T / (size_t)(c->cp.c > 1 ? c->cp.c : 1)) % (size_t)c->t)) ||
        (c->shared && (c->slots != 1 || c->t != 1 || !c->first || !c->last || nb != c->cfg->num_layers)))
        return DT_FAIL(DT_ERR_INVALID, "layer runner: blocks %d..%d of %d, %d slots, B %d, T %d, t %d", c->l0,
                       c->l1 - 1, c->cfg->num_layers, c->slots, c->B, c->T, c->t);
    if (c->cp.c > 1 && (c->T % (2 * c->cp.c) || c->cp.rank < 0 || c->cp.rank >= c->cp.c || !c->attn || c->shared))
        return DT_FAIL(DT_ERR_INVALID, "layer runner: context parallelism over %d ranks (rank %d) of T %d needs T a "
                                       "multiple of %d, its attention exchange and the stage discipline",
                       c->cp.c, c->cp.rank, c->T, 2 * c->cp.c);
    if (c->sp && (!c->vocab || !c->vocab->sp || c->vocab->t != c->t || !c->ops || c->ops == &dt__block_ops_plain))
        return DT_FAIL(DT_ERR_INVALID, "layer runner: sequence parallelism needs the vocabulary split and "
                                       "sequence-parallel block ops");
    dt__runner *r = calloc(1, sizeof *r);
    if (!r) return DT_FAIL(DT_ERR_NOMEM, "layer runner: out of memory");
    dt_status s = DT_OK;
    r->cfg = *c->cfg;
    r->be = c->be;
    r->l0 = c->l0, r->nb = nb, r->first = c->first, r->last = c->last;
    r->nslots = c->slots, r->B = c->B, r->T = c->T;
    r->shared = c->shared;
    r->t = c->t;
    r->sh = (dt__shard){.t = c->t, .sp = c->sp != 0};
    r->cp = c->cp.c > 1 ? c->cp : DT__CPOS_WHOLE;
    r->T = c->T / r->cp.c; /* the rank's positions of a sequence: the sizes below are its */
    r->ops = c->ops ? c->ops : &dt__block_ops_plain;
    r->ops_ctx = c->ops_ctx;
    r->hcfg = r->cfg;
    r->vocab = (dt__vocab){.V = r->cfg.vocab_size, .t = 1, .nv = r->cfg.vocab_size};
    if (c->vocab && c->vocab->t > 1) {
        r->vocab = *c->vocab;
        r->hcfg.vocab_size = r->vocab.nv;
        if (r->first && !(r->tok_host = malloc((size_t)c->B * r->T * sizeof *r->tok_host))) {
            s = DT_FAIL(DT_ERR_NOMEM, "layer runner: out of memory");
            goto fail;
        }
    }
    if (r->cp.c > 1 && (!(r->cp_tok = malloc((size_t)c->B * r->T * sizeof *r->cp_tok)) ||
                        !(r->cp_tgt = malloc((size_t)c->B * r->T * sizeof *r->cp_tgt)))) {
        s = DT_FAIL(DT_ERR_NOMEM, "layer runner: out of memory");
        goto fail;
    }
    r->work = &r->work_own;
    const int nbv = nb ? nb : 1;
    r->w.blocks = calloc((size_t)nbv, sizeof *r->w.blocks);
    r->g.blocks = calloc((size_t)nbv, sizeof *r->g.blocks);
    r->slots = calloc((size_t)c->slots, sizeof *r->slots);
    if (!r->w.blocks || !r->g.blocks || !r->slots) {
        s = DT_FAIL(DT_ERR_NOMEM, "layer runner: out of memory");
        goto fail;
    }
    /* shared by the slots: the block scratch, the ops' own, dres, dout */
    const size_t N = (size_t)c->B * r->T, C = (size_t)c->cfg->hidden_size;
    const size_t nscr = dt__block_scratch_floats(c->cfg, c->B, r->T),
                 nxs = r->ops->scratch_floats ? r->ops->scratch_floats(c->cfg, c->t, c->B, r->T) : 0;
    const size_t total = nscr + nxs + 2 * dt__runner_pad(N * C) + 64;
    DT_CHECK_GOTO(dt_buffer_alloc(&r->sbuf, c->be, total * sizeof(float)), s, fail);
    {
        dt__arena sh = {.base = r->sbuf.data, .capacity = total};
        float *scr;
        if (nxs) DT_CHECK_GOTO(dt__arena_alloc(&sh, nxs, &r->xs), s, fail);
        DT_CHECK_GOTO(dt__arena_alloc(&sh, nscr, &scr), s, fail);
        dt__block_scratch_bind(&r->scratch, c->cfg, c->B, r->T, scr);
        r->scratch.tmp.attn = r->cp.c > 1 ? c->attn : NULL;
        r->vocab.part = r->scratch.tmp.ln; /* free while the embedding or the head runs */
        DT_CHECK_GOTO(dt__arena_alloc(&sh, N * C, &r->dres), s, fail);
        DT_CHECK_GOTO(dt__arena_alloc(&sh, N * C, &r->dout), s, fail);
    }
    DT_CHECK_GOTO(dt__runner_use_precision(r, c->precision, c->round_min), s, fail);
    DT_CHECK_GOTO(dt__runner_use_recompute(r, c->recompute, c->recompute_k), s, fail);
    DT_CHECK_GOTO(dt__runner_slots_alloc(r), s, fail);
    *out = r;
    return DT_OK;
fail:
    dt__runner_free(r);
    return s;
}

void dt__runner_free(dt__runner *r)
{
    if (!r) return;
    dt__runner_slots_free(r);
    free(r->slots);
    free(r->tok_host);
    free(r->cp_tok);
    free(r->cp_tgt);
    dt_buffer_free(&r->sbuf);
    dt_buffer_free(&r->round_buf);
    free(r->w.blocks);
    free(r->g.blocks);
    free(r);
}

void dt__runner_set_hooks(dt__runner *r, const dt__runner_hooks *h, void *ctx)
{
    r->hooks = h ? *h : (dt__runner_hooks){0};
    r->hctx = ctx;
}

dt_status dt__runner_set_precision(dt__runner *r, dt_dtype dtype, size_t round_min)
{
    if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "precision %s: expected f32, f16 or bf16", dt_dtype_name(dtype));
    DT_CHECK(dt__runner_idle(r, "precision"));
    DT_CHECK(dt__runner_use_precision(r, dtype, round_min));
    dt__runner_slots_free(r); /* the slots' sizes follow the storage */
    return dt__runner_slots_alloc(r);
}

dt_status dt__runner_set_recompute(dt__runner *r, dt_recompute mode, int num_layers)
{
    DT_CHECK(dt__runner_idle(r, "recomputation"));
    DT_CHECK(dt__runner_use_recompute(r, mode, num_layers));
    dt__runner_slots_free(r);
    return dt__runner_slots_alloc(r);
}

dt_status dt__runner_set_split(dt__runner *r, int on)
{
    DT_CHECK(dt__runner_idle(r, "B/W split"));
    dt__runner_slots_free(r);
    r->split = on != 0;
    return dt__runner_slots_alloc(r);
}

void dt__runner_set_trace_split(dt__runner *r, int on) { r->trace_split = on != 0; }
dt__runner_views *dt__runner_w(dt__runner *r) { return &r->w; }
dt__runner_views *dt__runner_g(dt__runner *r) { return &r->g; }
const dt__rounder *dt__runner_rnd(const dt__runner *r) { return r->precision == DT_F32 ? NULL : &r->rnd; }
size_t dt__runner_round_bytes(const dt__runner *r) { return r->round_buf.bytes; }
float *dt__runner_input(dt__runner *r, int slot) { return r->slots[slot].input; }
float *dt__runner_dout(dt__runner *r) { return r->dout; }
const float *dt__runner_dres(const dt__runner *r) { return r->dres; }
int dt__runner_has_forward(const dt__runner *r, int slot) { return r->slots[slot].busy == DT__RSLOT_FORWARD; }
const dt__head_acts *dt__runner_head(const dt__runner *r, int slot) { return &r->slots[slot].head; }

void dt__runner_batch(const dt__runner *r, int slot, int *B, int *T, int *has_targets)
{
    const dt__rslot *sl = &r->slots[slot];
    if (B) *B = sl->B;
    if (T) *T = sl->T;
    if (has_targets) *has_targets = sl->has_targets;
}

int dt__runner_n_counted(const dt__runner *r, int slot) { return r->slots[slot].n_counted; }

void dt__runner_views_bind(dt__runner_views *v, const dt_gpt_config *cfg, int l0, int layer, const dt_param_info *info,
                           int n, float *base, size_t origin)
{
#define DT__AT(i) (base + (info[i].offset - origin))
    if (layer < 0) {
        v->wte = DT__AT(0), v->wpe = DT__AT(1);
    } else if (layer < cfg->num_layers) {
        dt__block_params_bind(&v->blocks[layer - l0], info, base, origin);
    } else {
        v->head.lnfw = DT__AT(0), v->head.lnfb = DT__AT(1);
        v->head.lmw = n > 2 ? DT__AT(2) : v->wte; /* tied: wte itself */
    }
#undef DT__AT
}

/* ---- memory accounting ------------------------------------------------------ */

size_t dt__runner_activation_bytes(const dt__runner *r)
{
    if (r->shared) return (r->slots[0].arena.used - r->slots[0].mark) * sizeof(float);
    return r->act_now * sizeof(float);
}

size_t dt__runner_peak_activation_bytes(const dt__runner *r)
{
    if (r->shared) return (r->slots[0].arena.peak - r->slots[0].mark) * sizeof(float);
    return r->act_peak * sizeof(float);
}

void dt__runner_reset_peak(dt__runner *r)
{
    if (r->shared) r->slots[0].arena.peak = r->slots[0].arena.used;
    r->act_peak = r->act_now;
}

void dt__runner_note_peak(dt__runner *r)
{
    if (r->shared) return; /* the one arena keeps its own */
    const size_t grow = r->growing ? r->growing->arena.used - r->grow_from : 0;
    const size_t now = r->act_now + grow + r->work->used;
    if (now > r->act_peak) r->act_peak = now;
}

void dt__runner_drop(dt__arena *a, size_t mark)
{
    if (a->used > mark) a->used = mark;
}

void dt__runner_span(const dt__runner *r, int layer, char pass, int64_t t0)
{
    if (r->hooks.span) r->hooks.span(r->hctx, layer, pass, t0);
}

void dt__runner_set_fp8(dt__runner *r, dt__fp8 *f)
{
    r->fp8 = f;
    r->rnd.fp8 = r->precision == DT_BF16 ? f : NULL;
}

dt_status dt__runner_bind(const dt__runner *r, int layer, char pass)
{
    if (r->fp8) dt__fp8_at(r->fp8, layer, pass);
    return r->hooks.bind ? r->hooks.bind(r->hctx, layer, pass) : DT_OK;
}

/* The output of a slot's last block (xin when the range has none). */
const float *dt__runner_slot_out(const dt__runner *r, const dt__rslot *sl, const float *xin)
{
    if (!r->nb) return xin;
    if (r->recompute == DT_RECOMPUTE_FULL) return sl->ckpt[r->groups - 1];
    if (dt__runner_packs(r)) return sl->packed[r->nb - 1][DT__BLOCK_OUT]; /* kept FP32 */
    return sl->acts[r->nb - 1].out;
}

dt_status dt__runner_slot_check(const dt__runner *r, int slot, int want, const char *what)
{
    if (slot < 0 || slot >= r->nslots)
        return DT_FAIL(DT_ERR_INVALID, "pipeline stage %s: slot %d outside 0..%d", what, slot, r->nslots - 1);
    const int busy = r->slots[slot].busy;
    if (want == DT__RSLOT_BUSY ? busy != DT__RSLOT_FREE : busy == want) return DT_OK;
    return DT_FAIL(DT_ERR_INVALID, "pipeline stage %s: slot %d is %s", what, slot,
                   busy == DT__RSLOT_FREE   ? "free (no forward to differentiate)"
                   : want == DT__RSLOT_FREE ? "still holding a micro-batch"
                   : busy == DT__RSLOT_B    ? "past its B (waiting for its W)"
                                            : "not past its B (no W to run)");
}

/* ---- forward ---------------------------------------------------------------- */

/* dt__runner_forward_check: if no layer's output was non-finite yet, look
 * at x (rows, ld apart, of which the first cols count) and note layer pos
 * if it holds a NaN or inf (one span_stats call; multiplying by 1 changes nothing). */
static dt_status dt__runner_nf_note(dt__runner *r, float *x, size_t rows, size_t cols, size_t ld, int pos)
{
    if (!r->nf_check || r->nf_pos >= 0 || !rows || !cols) return DT_OK;
    int bad = 0;
    if (ld == cols) {
        DT_CHECK(r->be->unscale_check(r->be, x, 1.0f, rows * cols, &bad));
        if (bad) r->nf_pos = pos;
        return DT_OK;
    }
    dt_span *sp = malloc(rows * sizeof *sp);
    int *nf = malloc(rows * sizeof *nf);
    dt_status rc = sp && nf ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "layer runner: out of memory for %zu rows", rows);
    for (size_t i = 0; rc == DT_OK && i < rows; i++) sp[i] = (dt_span){i * ld, cols};
    if (rc == DT_OK) rc = r->be->span_stats(r->be, x, sp, (int)rows, 1.0f, nf, NULL);
    for (size_t i = 0; rc == DT_OK && i < rows; i++) bad |= nf[i];
    if (bad) r->nf_pos = pos;
    free(sp);
    free(nf);
    return rc;
}

/* Block l's forward in slot sl from x: its activations in arena a (the
 * slot's, or the work arena while a group is computed); with_att = 0
 * keeps the attention log-sum-exp only while the block runs (in the work arena). */
static dt_status dt__runner_block_forward(dt__runner *r, dt__rslot *sl, int l, dt__arena *a, int with_att,
                                          const float *x, const float **out)
{
    const dt_gpt_config *c = &r->cfg;
    const int B = sl->B, T = sl->T;
    dt__block_acts *acts = &sl->acts[l];
    DT_CHECK(dt__block_acts_alloc(a, c, r->sh, B, T, with_att, &r->scratch.tmp, acts));
    const size_t mark = dt__arena_mark(r->work);
    if (!with_att) DT_CHECK(dt__arena_alloc(r->work, dt__block_att_floats(c, r->t, B, T), &acts->lse));
    DT_CHECK(r->ops->forward(r->ops_ctx, r->be, c, &r->w.blocks[l], acts, x, B, T, dt__runner_rnd(r)));
    *out = acts->out;
    const size_t NC = dt__shard_rows(r->sh, (size_t)B * T) * c->hidden_size;
    DT_CHECK(dt__runner_nf_note(r, acts->out, 1, NC, NC, 1 + r->l0 + l));
    if (!with_att) {
        dt__runner_note_peak(r);
        dt__runner_drop(r->work, mark);
        acts->lse = NULL;
    }
    return DT_OK;
}

dt_status dt__runner_packed_input(dt__runner *r, dt__rslot *sl, int l, const float *x, const float **in)
{
    if (l == 0) {
        *in = x;
        return DT_OK;
    }
    const size_t n = dt__shard_rows(r->sh, (size_t)sl->B * sl->T) * r->cfg.hidden_size;
    float *x32;
    DT_CHECK(dt__arena_alloc(r->work, n, &x32));
    DT_CHECK(r->be->cast(r->be, x32, DT_F32, sl->packed[l - 1][DT__BLOCK_OUT], r->precision, n));
    *in = x32;
    return DT_OK;
}

dt_status dt__runner_group_forward(dt__runner *r, dt__rslot *sl, int g, dt__arena *a, const float *x,
                                   const float **out, int again)
{
    const int l0 = g * r->recompute_k, l1 = DT_MIN(l0 + r->recompute_k, r->nb);
    for (int l = l0; l < l1; l++) {
        const int64_t t0 = dt_time_ns();
        DT_CHECK(dt__runner_bind(r, r->l0 + l, again ? 'R' : 'F'));
        DT_CHECK(dt__runner_block_forward(r, sl, l, a, 1, x, &x));
        dt__runner_span(r, r->l0 + l, again ? 'R' : 'F', t0);
    }
    *out = x;
    return DT_OK;
}

/* The blocks' forward from x; *out the last one's output. */
static dt_status dt__runner_blocks_forward(dt__runner *r, dt__rslot *sl, const float *x, const float **out)
{
    const int B = sl->B, T = sl->T;
    const size_t NC = dt__shard_rows(r->sh, (size_t)B * T) * r->cfg.hidden_size;
    if (r->recompute == DT_RECOMPUTE_FULL) { /* keep each group's output; its blocks' activations go */
        for (int g = 0; g < r->groups; g++) {
            sl->lmark[g] = dt__arena_mark(&sl->arena);
            DT_CHECK(dt__arena_alloc(&sl->arena, NC, &sl->ckpt[g]));
            const size_t wmark = dt__arena_mark(r->work);
            const float *y;
            DT_CHECK(dt__runner_group_forward(r, sl, g, r->work, x, &y, 0));
            DT_CHECK(r->be->copy(r->be, sl->ckpt[g], y, NC * sizeof(float), DT_COPY_D2D));
            dt__runner_note_peak(r);
            dt__runner_drop(r->work, wmark);
            x = sl->ckpt[g];
        }
    } else if (dt__runner_packs(r)) {
        /* each block runs in an FP32 working set in the work arena, packed
         * into its 2-byte stores when it is done */
        for (int l = 0; l < r->nb; l++) {
            const int64_t t0 = dt_time_ns();
            DT_CHECK(dt__runner_bind(r, r->l0 + l, 'F'));
            const dt__block_pack k = dt__runner_pack_of(r, l, B, T);
            sl->lmark[l] = dt__arena_mark(&sl->arena);
            DT_CHECK(dt__block_pack_alloc(&k, &sl->arena, sl->packed[l]));
            const size_t wmark = dt__arena_mark(r->work);
            const float *in, *y;
            DT_CHECK(dt__runner_packed_input(r, sl, l, x, &in));
            DT_CHECK(dt__runner_block_forward(r, sl, l, r->work, k.with_att, in, &y));
            dt__runner_note_peak(r);
            DT_CHECK(dt__block_pack_copy(&k, r->be, &sl->acts[l], sl->packed[l], 1));
            dt__runner_drop(r->work, wmark);
            dt__runner_span(r, r->l0 + l, 'F', t0);
        }
        x = dt__runner_slot_out(r, sl, x);
    } else {
        const int with_att = r->recompute != DT_RECOMPUTE_SELECTIVE;
        for (int l = 0; l < r->nb; l++) {
            const int64_t t0 = dt_time_ns();
            DT_CHECK(dt__runner_bind(r, r->l0 + l, 'F'));
            sl->lmark[l] = dt__arena_mark(&sl->arena);
            DT_CHECK(dt__runner_block_forward(r, sl, l, &sl->arena, with_att, x, &x));
            dt__runner_span(r, r->l0 + l, 'F', t0);
        }
    }
    *out = x;
    return DT_OK;
}

dt_status dt__runner_forward(dt__runner *r, int slot, const int32_t *tokens, const int32_t *targets, int B, int T,
                             const float **out, float *loss, int *n_counted)
{
    DT_CHECK(dt__runner_slot_check(r, slot, DT__RSLOT_FREE, "forward"));
    const dt_gpt_config *c = &r->cfg;
    dt_backend *be = r->be;
    if (B < 1 || B > r->B) return DT_FAIL(DT_ERR_INVALID, "forward: batch size %d (expected 1..%d)", B, r->B);
    const int cpc = r->cp.c;
    if (T < 1 || T > r->T * cpc)
        return DT_FAIL(DT_ERR_INVALID, "forward: sequence length %d outside 1..%d (the model's context)", T,
                       r->T * cpc);
    if (cpc > 1 && T % (2 * cpc))
        return DT_FAIL(DT_ERR_INVALID, "forward: sequence length %d does not split into %d equal chunks "
                                       "(--context-parallel-size %d)", T, 2 * cpc, cpc);
    if (r->sh.sp && ((size_t)B * T / (size_t)cpc) % (size_t)r->t)
        return DT_FAIL(DT_ERR_INVALID, "forward: %d x %d tokens do not split over %d sequence-parallel ranks", B,
                       T / cpc, r->t);
    int N = B * T;
    if (r->first)
        for (int i = 0; i < N; i++)
            if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
                return DT_FAIL(DT_ERR_INVALID, "forward: token %d at position %d outside the vocabulary of %d",
                               tokens[i], i, c->vocab_size);
    if (r->last && targets)
        for (int i = 0; i < N; i++)
            if (targets[i] >= c->vocab_size)
                return DT_FAIL(DT_ERR_INVALID, "forward: target %d at position %d outside the vocabulary of %d",
                               targets[i], i, c->vocab_size);
    if (cpc > 1) { /* the rank's chunks of each sequence, from here on (gpt_layers.h's dt__cpos) */
        if (r->first) dt__cpos_gather(r->cp, tokens, r->cp_tok, B, T), tokens = r->cp_tok;
        if (r->last && targets) dt__cpos_gather(r->cp, targets, r->cp_tgt, B, T), targets = r->cp_tgt;
        T /= cpc, N = B * T;
    }
    const int Tl = T;
    int counted = 0;
    if (r->last && targets)
        for (int i = 0; i < N; i++) counted += targets[i] >= 0;
    dt__rslot *sl = &r->slots[slot];
    const dt__rounder *rnd = dt__runner_rnd(r);
    sl->B = B, sl->T = T;
    dt__runner_drop(&sl->arena, sl->mark);
    r->growing = sl, r->grow_from = sl->mark;
    const float *x = sl->input;
    if (r->first) {
        const int64_t t0 = dt_time_ns();
        DT_CHECK(dt__runner_bind(r, -1, 'F'));
        const dt__vocab *vp = dt__runner_vp(r);
        if (vp) dt__vocab_mask(vp, tokens, r->tok_host, (size_t)N); /* the rows another rank holds masked */
        DT_CHECK(be->copy(be, sl->tokens, vp ? r->tok_host : tokens, (size_t)N * sizeof(int32_t), DT_COPY_H2D));
        DT_CHECK(dt__embed_forward(be, c, r->w.wte, r->w.wpe, sl->tokens, &sl->arena, &sl->x0, B, Tl, rnd, vp, r->cp));
        x = sl->x0;
        const size_t nx = dt__shard_rows(r->sh, (size_t)N) * c->hidden_size;
        DT_CHECK(dt__runner_nf_note(r, sl->x0, 1, nx, nx, 0));
        dt__runner_span(r, -1, 'F', t0);
    }
    DT_CHECK(dt__runner_blocks_forward(r, sl, x, &x));
    sl->has_targets = 0;
    if (r->last) {
        const int64_t t0 = dt_time_ns();
        DT_CHECK(dt__runner_bind(r, c->num_layers, 'F'));
        sl->n_counted = counted;
        if (targets) {
            DT_CHECK(be->copy(be, sl->targets, targets, (size_t)N * sizeof(int32_t), DT_COPY_H2D));
            sl->has_targets = 1;
        }
        sl->head_mark = dt__arena_mark(&sl->arena);
        DT_CHECK(dt__head_forward(be, &r->hcfg, &r->w.head, &sl->arena, &sl->head, x, targets ? sl->targets : NULL,
                                  sl->losses, sl->correct, B, T, rnd, dt__runner_vp(r)));
        const int head = c->num_layers + 1;
        DT_CHECK(
            dt__runner_nf_note(r, sl->head.logits, (size_t)N, (size_t)r->hcfg.vocab_size, (size_t)sl->head.ld, head));
        if (targets) DT_CHECK(dt__runner_nf_note(r, sl->losses, 1, (size_t)N, (size_t)N, head));
        float mean = 0.0f;
        if (targets) DT_CHECK(dt__head_mean_loss(be, sl->losses, N, sl->n_counted, &mean));
        if (loss) *loss = mean;
        if (n_counted) *n_counted = sl->n_counted;
        if (out) *out = NULL;
        dt__runner_span(r, c->num_layers, 'F', t0);
    } else if (out) {
        *out = x;
    }
    sl->busy = DT__RSLOT_FORWARD;
    r->growing = NULL;
    if (!r->shared) r->act_now += sl->arena.used - sl->mark;
    if (r->act_now > r->act_peak) r->act_peak = r->act_now;
    return DT_OK;
}

dt_status dt__runner_forward_check(dt__runner *r, int slot, const int32_t *tokens, const int32_t *targets, int B,
                                   int T, const float **out, int *pos)
{
    r->nf_check = 1;
    r->nf_pos = -1;
    const dt_status rc = dt__runner_forward(r, slot, tokens, targets, B, T, out, NULL, NULL);
    r->nf_check = 0;
    *pos = r->nf_pos;
    return rc;
}

dt_status dt__runner_position_stats(dt__runner *r, int slot, float *losses, uint8_t *correct)
{
    if (slot < 0 || slot >= r->nslots || !r->last)
        return DT_FAIL(DT_ERR_INVALID, "position stats: slot %d of a %s stage", slot, r->last ? "last" : "non-last");
    const dt__rslot *sl = &r->slots[slot];
    const size_t N = (size_t)sl->B * sl->T;
    if (losses) DT_CHECK(r->be->copy(r->be, losses, sl->losses, N * sizeof(float), DT_COPY_D2H));
    if (correct) DT_CHECK(r->be->copy(r->be, correct, sl->correct, N, DT_COPY_D2H));
    return DT_OK;
}

void dt__runner_free_slot(dt__runner *r, dt__rslot *sl)
{
    if (!r->shared) r->act_now -= sl->arena.used - sl->mark;
    dt__runner_drop(&sl->arena, sl->mark);
    sl->busy = DT__RSLOT_FREE;
}

dt_status dt__runner_release(dt__runner *r, int slot)
{
    DT_CHECK(dt__runner_slot_check(r, slot, DT__RSLOT_BUSY, "release"));
    dt__runner_free_slot(r, &r->slots[slot]);
    return DT_OK;
}

dt_status dt__runner_output(dt__runner *r, int slot, const float **out)
{
    DT_CHECK(dt__runner_slot_check(r, slot, DT__RSLOT_BUSY, "output"));
    if (r->last) return DT_FAIL(DT_ERR_INVALID, "pipeline stage output: the last stage sends no activation");
    *out = dt__runner_slot_out(r, &r->slots[slot], NULL);
    return DT_OK;
}
