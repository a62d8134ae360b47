/* runner_backward.c: the layer runner's backward (runner.h), whole or
 * split into B and W for zero-bubble schedules (gpt_layers.h's split).
 *
 * One traversal serves both: the head, the blocks from the last (each
 * unpacked from half storage, or recomputed, as the forward left it), then
 * the embedding. Each layer runs its B, then at once its W (a whole
 * backward: what B hands W lives in the scratch) or not (B: what W needs
 * is kept in the slot's arena until dt__runner_backward_w, which walks the
 * same layers in the same order). So a micro-batch's parameter gradients
 * get the same contributions in the same order either way, bit for bit.
 *
 * Memory kept from B to W (counted in the activation accounting): per
 * block its keep (dt__block_keep_floats: 4 (B,T,C) floats and its dfch
 * (B,T,4C/t), its dqkv going into the block's saved qkv, which W does not
 * read; in half storage, whose saved tensors W unpacks again, all six
 * packed, 2 bytes an element, exact), the final LayerNorm's output
 * gradient (B,T,C) on the last range and the embedding output's gradient
 * (B,T,C) on the first; under full recomputation every block's recomputed
 * activations too (recomputed in B, read by W). Under selective
 * recomputation W needs no attention log-sum-exp: it lives in the work
 * arena during B only.
 *
 * The shared discipline releases each layer's saved tensors once its
 * backward is done (the head's after the head, a block's after the block,
 * a group's output before the group is recomputed), so the arena's use
 * falls through the backward. */
#include <stdint.h>

#include "dt_internal.h"
#include "dt_time.h"
#include "runner_impl.h"

/* The embedding output's gradient with every row: d itself, or under
 * sequence parallelism the ranks' rows all-gathered into the workspace. */
static dt_status dt__runner_embed_grad(dt__runner *r, const float *d, int B, int T, const float **full)
{
    *full = d;
    if (!r->sh.sp) return DT_OK;
    const size_t NC = (size_t)B * T * r->cfg.hidden_size, nC = NC / (size_t)r->t;
    DT_CHECK(r->be->copy(r->be, r->vocab.part + (size_t)r->vocab.rank * nC, d, nC * sizeof(float), DT_COPY_D2D));
    DT_CHECK(r->vocab.allgather(r->vocab.ctx, 'B', r->vocab.part, NC));
    *full = r->vocab.part;
    return DT_OK;
}

/* Block l's W: the ops' own, or block.c's. */
static dt_status dt__runner_block_w(dt__runner *r, int l, const dt__block_acts *a, const float *x,
                                    const dt__block_keep *k, int B, int T)
{
    if (r->ops->backward_w)
        return r->ops->backward_w(r->ops_ctx, r->be, &r->cfg, &r->w.blocks[l], &r->g.blocks[l], a, x, k, B, T,
                                  dt__runner_rnd(r));
    return dt__block_backward_w(r->be, &r->cfg, r->t, &r->w.blocks[l], &r->g.blocks[l], a, x, k, B, T,
                                dt__runner_rnd(r));
}

/* Block l's backward in slot sl, x its input: selective recomputation
 * first recomputes the attention log-sum-exp from the kept qkv into the
 * work arena (the attention output goes to scratch: the kept one is the
 * same). whole: B and W at once; else B, keeping what W needs in the
 * slot. release: the shared arena's mark to release to when done. */
static dt_status dt__runner_block_backward(dt__runner *r, dt__rslot *sl, int l, const float *x, int whole,
                                           size_t release)
{
    const dt_gpt_config *c = &r->cfg;
    const dt__rounder *rnd = dt__runner_rnd(r);
    const int B = sl->B, T = sl->T, sel = r->recompute == DT_RECOMPUTE_SELECTIVE, L = r->l0 + l;
    const size_t wmark = dt__arena_mark(r->work);
    dt__block_acts *a = &sl->acts[l];
    dt__block_keep *k = &sl->keep[l];
    const int packs = dt__runner_packs(r);
    DT_CHECK(dt__runner_bind(r, L, whole ? 'B' : 'b'));
    /* the keep's dqkv in the block's own qkv, dead after B (its dfch apart:
     * W reads fch); half storage: FP32 in the work arena (the block's
     * tensors are an unpacking there), packed into the slot after B */
    if (!whole) DT_CHECK(dt__block_keep_alloc(packs ? r->work : &sl->arena, c, r->sh, B, T, a, k));
    if (sel) {
        const int64_t t0 = dt_time_ns();
        DT_CHECK(dt__arena_alloc(r->work, dt__block_att_floats(c, r->t, B, T), &a->lse));
        DT_CHECK(dt__attention_forward(r->be, a->tmp.attn, r->scratch.dbtc, a->lse, a->qkv, B, T, c->hidden_size / r->t,
                                          c->num_heads / r->t));
        dt__runner_span(r, L, 'R', t0);
    }
    dt__runner_note_peak(r);
    int64_t t0 = dt_time_ns();
    const dt__block_params *p = &r->w.blocks[l];
    if (whole) {
        dt__block_keep kk = r->ops->whole_keep(c, r->t, B, T, &r->scratch, r->xs);
        /* W takes GELU's output from B, or (traced apart, as a deferred W
         * does) recomputes it: the same bits */
        kk.gelu = r->trace_split ? NULL : a->tmp.gelu;
        DT_CHECK(r->ops->backward_b(r->ops_ctx, r->be, c, p, a, &r->scratch, r->xs, x, r->dres, &kk, B, T, rnd));
        if (r->trace_split) {
            dt__runner_span(r, L, 'b', t0);
            t0 = dt_time_ns();
        }
        DT_CHECK(dt__runner_block_w(r, l, a, x, &kk, B, T));
    } else {
        DT_CHECK(r->ops->backward_b(r->ops_ctx, r->be, c, p, a, &r->scratch, r->xs, x, r->dres, k, B, T, rnd));
        if (packs) {
            DT_CHECK(dt__block_keep_pack_alloc(&sl->arena, c, r->sh, B, T, sl->kpacked[l]));
            DT_CHECK(dt__block_keep_pack_copy(r->be, c, r->sh, B, T, r->precision, k, sl->kpacked[l], 1));
            dt__runner_note_peak(r);
        }
    }
    if (sel) a->lse = NULL;
    dt__runner_drop(r->work, wmark);
    if (r->shared) dt__runner_drop(&sl->arena, release);
    if (whole) {
        dt__runner_span(r, L, r->trace_split ? 'W' : 'B', t0);
        if (r->hooks.done) DT_CHECK(r->hooks.done(r->hctx, L));
    }
    return DT_OK;
}

/* Half storage: block l's saved tensors unpacked into the work arena
 * (sl->acts[l]) and its FP32 input in *in. */
static dt_status dt__runner_unpack(dt__runner *r, dt__rslot *sl, int l, const float *xin, const float **in)
{
    const dt__block_pack k = dt__runner_pack_of(r, l, sl->B, sl->T);
    dt__block_acts *a = &sl->acts[l];
    DT_CHECK(dt__block_acts_alloc(r->work, &r->cfg, r->sh, sl->B, sl->T, k.with_att, &r->scratch.tmp, a));
    DT_CHECK(dt__block_pack_copy(&k, r->be, a, sl->packed[l], 0));
    DT_CHECK(dt__runner_packed_input(r, sl, l, xin, in));
    dt__runner_note_peak(r);
    return DT_OK;
}

/* The blocks' backward from the last, whole or B; xin: the range's input.
 * Full recomputation: a whole backward recomputes one group at a time in
 * the work arena, B recomputes into the slot's arena, where W finds the
 * activations. */
static dt_status dt__runner_blocks_backward(dt__runner *r, dt__rslot *sl, const float *xin, int whole)
{
    const size_t none = SIZE_MAX;
    if (r->recompute == DT_RECOMPUTE_FULL) {
        for (int g = r->groups - 1; g >= 0; g--) { /* recompute the group from its input, then its backward */
            const int l0 = g * r->recompute_k, l1 = DT_MIN(l0 + r->recompute_k, r->nb);
            const float *gin = g ? sl->ckpt[g - 1] : xin, *y;
            if (r->shared) dt__runner_drop(&sl->arena, sl->lmark[g]); /* the group's own output is spent */
            dt__arena *a = whole ? r->work : &sl->arena;
            const size_t gmark = dt__arena_mark(a);
            DT_CHECK(dt__runner_group_forward(r, sl, g, a, gin, &y, 1));
            dt__runner_note_peak(r);
            for (int l = l1 - 1; l >= l0; l--) /* the group's lowest block releases the group */
                DT_CHECK(dt__runner_block_backward(r, sl, l, l > l0 ? sl->acts[l - 1].out : gin, whole,
                                                   l == l0 ? gmark : none));
            if (whole) dt__runner_drop(r->work, gmark);
        }
    } else if (dt__runner_packs(r)) { /* each block unpacked into the work arena */
        for (int l = r->nb - 1; l >= 0; l--) {
            const size_t wmark = dt__arena_mark(r->work);
            const float *in;
            DT_CHECK(dt__runner_unpack(r, sl, l, xin, &in));
            DT_CHECK(dt__runner_block_backward(r, sl, l, in, whole, sl->lmark[l])); /* its stores too */
            dt__runner_drop(r->work, wmark);
        }
    } else {
        for (int l = r->nb - 1; l >= 0; l--)
            DT_CHECK(dt__runner_block_backward(r, sl, l, l ? sl->acts[l - 1].out : xin, whole, sl->lmark[l]));
    }
    return DT_OK;
}

/* The blocks' W from the last, from what their B kept. */
static dt_status dt__runner_blocks_w(dt__runner *r, dt__rslot *sl, const float *xin)
{
    const dt_gpt_config *c = &r->cfg;
    for (int l = r->nb - 1; l >= 0; l--) {
        const float *x = l ? sl->acts[l - 1].out : xin;
        const size_t wmark = dt__arena_mark(r->work);
        if (r->recompute == DT_RECOMPUTE_FULL) { /* the group's input for its first block */
            const int g = l / r->recompute_k;
            if (l == g * r->recompute_k) x = g ? sl->ckpt[g - 1] : xin;
        } else if (dt__runner_packs(r)) { /* the block's tensors and its keep, unpacked */
            DT_CHECK(dt__runner_unpack(r, sl, l, xin, &x));
            DT_CHECK(dt__block_keep_alloc(r->work, c, r->sh, sl->B, sl->T, &sl->acts[l], &sl->keep[l]));
            DT_CHECK(dt__block_keep_pack_copy(r->be, c, r->sh, sl->B, sl->T, r->precision, &sl->keep[l],
                                              sl->kpacked[l], 0));
            dt__runner_note_peak(r);
        }
        DT_CHECK(dt__runner_bind(r, r->l0 + l, 'W'));
        DT_CHECK(dt__runner_block_w(r, l, &sl->acts[l], x, &sl->keep[l], sl->B, sl->T));
        dt__runner_drop(r->work, wmark);
        if (r->hooks.done) DT_CHECK(r->hooks.done(r->hctx, r->l0 + l));
    }
    return DT_OK;
}

/* A whole backward (whole = 1) or its B. */
static dt_status dt__runner_run_backward(dt__runner *r, int slot, float dloss, const float **dx, int whole)
{
    DT_CHECK(dt__runner_slot_check(r, slot, DT__RSLOT_FORWARD, whole ? "backward" : "backward B"));
    if (!whole && !r->split)
        return DT_FAIL(DT_ERR_INVALID, "pipeline stage backward B: the stage keeps nothing for W "
                                       "(dt__stage_set_split first)");
    dt__rslot *sl = &r->slots[slot];
    dt_backend *be = r->be;
    const dt_gpt_config *c = &r->cfg;
    const int B = sl->B, T = sl->T, L = c->num_layers;
    const size_t NC = dt__shard_rows(r->sh, (size_t)B * T) * c->hidden_size; /* the rank's rows */
    const dt__rounder *rnd = dt__runner_rnd(r);
    if (r->last && !sl->has_targets) return DT_FAIL(DT_ERR_INVALID, "backward: the forward had no targets");
    const size_t u0 = sl->arena.used;
    r->growing = sl, r->grow_from = u0;
    const float *xin = r->first ? sl->x0 : sl->input;
    const float *xL = dt__runner_slot_out(r, sl, xin);
    if (r->last) {
        int64_t t0 = dt_time_ns();
        DT_CHECK(dt__runner_bind(r, L, whole ? 'B' : 'b'));
        float *dlnf = r->scratch.dbtc;
        if (!whole) {
            DT_CHECK(dt__arena_alloc(&sl->arena, NC, &sl->dlnf));
            dlnf = sl->dlnf;
        }
        DT_CHECK(dt__head_backward_b(be, &r->hcfg, &r->w.head, &sl->head, xL, sl->targets, sl->losses, dloss,
                                     r->dres, dlnf, B, T, rnd, dt__runner_vp(r)));
        if (whole) {
            if (r->trace_split) {
                dt__runner_span(r, L, 'b', t0);
                t0 = dt_time_ns();
            }
            DT_CHECK(dt__head_backward_w(be, &r->hcfg, &r->w.head, &r->g.head, &sl->head, xL, dlnf, B, T,
                                         dt__runner_vp(r)));
            if (r->shared) dt__runner_drop(&sl->arena, sl->head_mark);
            dt__runner_span(r, L, r->trace_split ? 'W' : 'B', t0);
            if (r->hooks.done) DT_CHECK(r->hooks.done(r->hctx, L));
        }
    } else {
        DT_CHECK(be->copy(be, r->dres, r->dout, NC * sizeof(float), DT_COPY_D2D));
    }
    DT_CHECK(dt__runner_blocks_backward(r, sl, xin, whole));
    if (r->first && whole) {
        /* the embedding's backward reads the tokens and dres only: every activation is spent */
        if (r->shared) dt__runner_drop(&sl->arena, sl->mark);
        const int64_t t0 = dt_time_ns();
        DT_CHECK(dt__runner_bind(r, -1, 'B'));
        const float *demb;
        DT_CHECK(dt__runner_embed_grad(r, r->dres, B, T, &demb));
        DT_CHECK(dt__embed_backward(be, c, r->g.wte, r->g.wpe, sl->tokens, demb, B, T, r->cp));
        dt__runner_span(r, -1, 'B', t0);
        if (r->hooks.done) DT_CHECK(r->hooks.done(r->hctx, -1));
    }
    if (r->first && !whole) { /* the embedding's W reads its output's gradient */
        DT_CHECK(dt__arena_alloc(&sl->arena, NC, &sl->demb));
        DT_CHECK(be->copy(be, sl->demb, r->dres, NC * sizeof(float), DT_COPY_D2D));
    }
    if (dx) *dx = r->first ? NULL : r->dres;
    r->growing = NULL;
    if (whole) {
        dt__runner_free_slot(r, sl);
    } else {
        r->act_now += sl->arena.used - u0;
        dt__runner_note_peak(r);
        sl->busy = DT__RSLOT_B;
    }
    return DT_OK;
}

dt_status dt__runner_backward(dt__runner *r, int slot, float dloss, const float **dx)
{
    return dt__runner_run_backward(r, slot, dloss, dx, 1);
}

dt_status dt__runner_backward_b(dt__runner *r, int slot, float dloss, const float **dx)
{
    return dt__runner_run_backward(r, slot, dloss, dx, 0);
}

dt_status dt__runner_backward_w(dt__runner *r, int slot)
{
    DT_CHECK(dt__runner_slot_check(r, slot, DT__RSLOT_B, "backward W"));
    dt__rslot *sl = &r->slots[slot];
    const dt_gpt_config *c = &r->cfg;
    const float *xin = r->first ? sl->x0 : sl->input;
    if (r->last) {
        DT_CHECK(dt__runner_bind(r, c->num_layers, 'W'));
        DT_CHECK(dt__head_backward_w(r->be, &r->hcfg, &r->w.head, &r->g.head, &sl->head,
                                     dt__runner_slot_out(r, sl, xin), sl->dlnf, sl->B, sl->T, dt__runner_vp(r)));
        if (r->hooks.done) DT_CHECK(r->hooks.done(r->hctx, c->num_layers));
    }
    DT_CHECK(dt__runner_blocks_w(r, sl, xin));
    if (r->first) {
        DT_CHECK(dt__runner_bind(r, -1, 'W'));
        const float *demb;
        DT_CHECK(dt__runner_embed_grad(r, sl->demb, sl->B, sl->T, &demb));
        DT_CHECK(dt__embed_backward(r->be, c, r->g.wte, r->g.wpe, sl->tokens, demb, sl->B, sl->T, r->cp));
        if (r->hooks.done) DT_CHECK(r->hooks.done(r->hctx, -1));
    }
    dt__runner_free_slot(r, sl);
    return DT_OK;
}
