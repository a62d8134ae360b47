/* stage_backward.c: a pipeline stage's backward (stage.h), whole or split
 * into B and W for zero-bubble schedules (gpt_layers.h's split).
 *
 * One traversal serves both: the head, the blocks from the last (each
 * unpacked from half storage, or recomputed, as the forward left it), then
 * the embedding. Each layer runs its B, then at once its W (a whole
 * backward: what B keeps for W lives in the stage's scratch, so memory is
 * what it was before the split) or not (dt__stage_backward_b: what W needs
 * is kept in the slot's arena until dt__stage_backward_w, which walks the
 * same layers in the same order). So a micro-batch's parameter gradients
 * get the same contributions in the same order either way, bit for bit,
 * and over micro-batches in the order their W run (the pipeline runs them
 * in micro-batch order).
 *
 * Memory kept from B to W (counted in the activation accounting): per
 * block its keep (dt__block_keep_floats: 4 (B,T,C) floats and its dfch,
 * (B,T,4C/t), its dqkv going into the block's saved qkv, which W does not
 * read;
 * in half storage, whose saved tensors W unpacks again, all six packed, 2
 * bytes an element, exact: dt__block_keep_packed_floats), the final
 * LayerNorm's output gradient
 * (B,T,C) on the last stage and the embedding output's gradient (B,T,C) on
 * the first; under full recomputation every block's recomputed activations
 * too (dt__block_act_floats each: recomputed in B, read by W). The saved
 * activations of the forward stay until W, as the logits do (turned into
 * their gradient by B). Under selective recomputation W needs no attention
 * log-sum-exp: it lives in the work arena during B only. In half storage
 * W unpacks each block's saved tensors and keep again (exact). */
#include "dt_internal.h"
#include "dt_time.h"
#include "stage_impl.h"

/* Block l's backward in slot sl, x its input; selective recomputation
 * first recomputes the attention log-sum-exp from the kept qkv into the
 * work arena (the attention output goes to scratch: the kept one is the
 * same). whole: B and W at once; else B, keeping what W needs in the slot. */
static dt_status dt__stage_block_backward(dt__stage *st, dt__slot *sl, int l, const float *x, int whole)
{
    const dt_gpt_config *c = &st->cfg;
    const dt__rounder *r = dt__stage_rnd(st);
    const int B = st->B, T = st->T, sel = st->recompute == DT_RECOMPUTE_SELECTIVE;
    const size_t mark = dt__arena_mark(&st->work);
    dt__block_acts *a = &sl->acts[l];
    dt__block_keep *k = &sl->keep[l];
    /* the keep's dqkv in the block's own qkv, dead after B (its dfch apart: W reads fch);
     * half storage: FP32 in the work arena (the block's tensors are an
     * unpacking there), packed into the slot after B */
    const int packs = dt__stage_packs(st);
    if (!whole) DT_CHECK(dt__block_keep_alloc(packs ? &st->work : &sl->arena, c, st->t, B, T, a, k));
    if (sel) {
        const int Cl = c->hidden_size / st->t, NHl = c->num_heads / st->t;
        const int64_t t0 = dt_time_ns();
        DT_CHECK(dt__arena_alloc(&st->work, dt__stage_att_floats(st), &a->lse));
        DT_CHECK(st->be->attention_forward(st->be, st->scratch.dbtc, a->lse, a->qkv, B, T, Cl, NHl));
        dt__stage_recomputed(st, l, t0);
    }
    dt__stage_note_peak(st);
    if (st->t > 1) {
        if (whole)
            DT_CHECK(
                dt__tp_block_backward(st->tp, st->be, c, &st->w[l], &st->g[l], a, st->tscratch, x, st->dres, B, T, r));
        else DT_CHECK(dt__tp_block_backward_b(st->tp, st->be, c, &st->w[l], a, st->tscratch, x, st->dres, k, B, T, r));
    } else if (whole) {
        DT_CHECK(dt__block_backward(st->be, c, &st->w[l], &st->g[l], a, &st->scratch, x, st->dres, B, T, r));
    } else {
        DT_CHECK(dt__block_backward_b(st->be, c, &st->w[l], a, &st->scratch, x, st->dres, k, B, T, r));
    }
    if (!whole && packs) {
        DT_CHECK(dt__block_keep_pack_alloc(&sl->arena, c, st->t, B, T, sl->kpacked[l]));
        DT_CHECK(dt__block_keep_pack_copy(st->be, c, st->t, B, T, st->precision, k, sl->kpacked[l], 1));
        dt__stage_note_peak(st);
    }
    if (sel) a->lse = NULL;
    dt__arena_release(&st->work, mark);
    return DT_OK;
}

/* Half storage: block l's saved tensors unpacked into the work arena
 * (sl->acts[l]) and its FP32 input in *in. */
static dt_status dt__stage_unpack(dt__stage *st, dt__slot *sl, int l, const float *xin, const float **in)
{
    const dt__block_pack k = dt__stage_pack_of(st, l);
    dt__block_acts *a = &sl->acts[l];
    if (st->t > 1)
        DT_CHECK(dt__tp_acts_alloc(&st->work, &st->cfg, st->t, st->B, st->T, k.with_att, &st->scratch.tmp, a));
    else DT_CHECK(dt__block_acts_alloc(&st->work, &st->cfg, st->B, st->T, k.with_att, &st->scratch.tmp, a));
    DT_CHECK(dt__block_pack_copy(&k, st->be, a, sl->packed[l], 0));
    DT_CHECK(dt__stage_packed_input(st, sl, l, xin, in));
    dt__stage_note_peak(st);
    return DT_OK;
}

/* The blocks' backward from the last, whole or B (see dt__stage_block_backward);
 * xin: the stage's input. Full recomputation: a whole backward recomputes
 * one group at a time in the work arena, B recomputes into the slot's
 * arena, where W finds the activations. */
static dt_status dt__stage_blocks_backward(dt__stage *st, dt__slot *sl, const float *xin, int whole)
{
    if (st->recompute == DT_RECOMPUTE_FULL) {
        for (int g = st->groups - 1; g >= 0; g--) { /* recompute the group from its input, then its backward */
            const int l0 = g * st->recompute_k, l1 = DT_MIN(l0 + st->recompute_k, st->nb);
            const float *gin = g ? sl->ckpt[g - 1] : xin, *y;
            DT_CHECK(dt__stage_group_forward(st, sl, g, whole ? &st->work : &sl->arena, gin, &y, 1));
            dt__stage_note_peak(st);
            for (int l = l1 - 1; l >= l0; l--)
                DT_CHECK(dt__stage_block_backward(st, sl, l, l > l0 ? sl->acts[l - 1].out : gin, whole));
            dt__arena_reset(&st->work);
        }
    } else if (dt__stage_packs(st)) { /* each block unpacked into the work arena */
        for (int l = st->nb - 1; l >= 0; l--) {
            const float *in;
            DT_CHECK(dt__stage_unpack(st, sl, l, xin, &in));
            DT_CHECK(dt__stage_block_backward(st, sl, l, in, whole));
            dt__arena_reset(&st->work);
        }
    } else {
        for (int l = st->nb - 1; l >= 0; l--)
            DT_CHECK(dt__stage_block_backward(st, sl, l, l ? sl->acts[l - 1].out : xin, whole));
    }
    return DT_OK;
}

/* The blocks' W from the last, from what their B kept. */
static dt_status dt__stage_blocks_w(dt__stage *st, dt__slot *sl, const float *xin)
{
    const dt_gpt_config *c = &st->cfg;
    for (int l = st->nb - 1; l >= 0; l--) {
        const float *x = l ? sl->acts[l - 1].out : xin;
        if (st->recompute == DT_RECOMPUTE_FULL) { /* the group's input for its first block */
            const int g = l / st->recompute_k;
            if (l == g * st->recompute_k) x = g ? sl->ckpt[g - 1] : xin;
        } else if (dt__stage_packs(st)) { /* the block's tensors and its keep, unpacked */
            DT_CHECK(dt__stage_unpack(st, sl, l, xin, &x));
            DT_CHECK(dt__block_keep_alloc(&st->work, c, st->t, st->B, st->T, &sl->acts[l], &sl->keep[l]));
            DT_CHECK(dt__block_keep_pack_copy(st->be, c, st->t, st->B, st->T, st->precision, &sl->keep[l],
                                              sl->kpacked[l], 0));
            dt__stage_note_peak(st);
        }
        DT_CHECK(dt__block_backward_w(st->be, c, st->t, &st->w[l], &st->g[l], &sl->acts[l], x, &sl->keep[l], st->B,
                                      st->T, dt__stage_rnd(st)));
        dt__arena_reset(&st->work);
    }
    return DT_OK;
}

/* Under mixed precision a micro-batch's parameter gradients go to gmb,
 * rounded before they accumulate in FP32 (begin: zero it; end: round, add). */
static dt_status dt__stage_grads_begin(dt__stage *st)
{
    if (!dt__stage_rnd(st)) return DT_OK;
    return st->be->memset_zero(st->be, st->gmb.data, st->layout.numel * sizeof(float));
}

static dt_status dt__stage_grads_end(dt__stage *st)
{
    const dt__rounder *r = dt__stage_rnd(st);
    if (!r) return DT_OK;
    DT_CHECK(dt__round(st->be, r, st->gmb.data, st->layout.numel));
    return st->be->axpy(st->be, st->grads.data, 1.0f, st->gmb.data, st->layout.numel);
}

/* The slot's saved activations are spent: free it. */
static void dt__stage_free_slot(dt__stage *st, dt__slot *sl)
{
    st->act_now -= sl->arena.used - sl->mark;
    dt__arena_release(&sl->arena, sl->mark);
    sl->busy = DT__SLOT_FREE;
}

/* A whole backward (whole = 1) or its B. */
static dt_status dt__stage_run_backward(dt__stage *st, int slot, const float *w, float dloss, const float **dx,
                                        int whole)
{
    DT_CHECK(dt__slot_check(st, slot, DT__SLOT_FORWARD, whole ? "backward" : "backward B"));
    if (!whole && !st->split)
        return DT_FAIL(DT_ERR_INVALID, "pipeline stage backward B: the stage keeps nothing for W "
                                       "(dt__stage_set_split first)");
    dt__slot *sl = &st->slots[slot];
    dt_backend *be = st->be;
    const dt_gpt_config *c = &st->cfg;
    const int B = st->B, T = st->T;
    const size_t NC = (size_t)B * T * c->hidden_size;
    const dt__rounder *r = dt__stage_rnd(st);
    DT_CHECK(dt__stage_use_weights(st, w));
    if (whole) DT_CHECK(dt__stage_grads_begin(st));
    if (st->last && !sl->has_targets) return DT_FAIL(DT_ERR_INVALID, "backward: the forward had no targets");
    const size_t u0 = sl->arena.used;
    st->growing = sl, st->grow_from = u0;
    const float *xin = st->first ? sl->x0 : sl->input;
    const float *xL = dt__slot_out(st, sl, xin);
    if (st->last) {
        float *dlnf = st->scratch.dbtc;
        if (!whole) {
            DT_CHECK(dt__arena_alloc(&sl->arena, NC, &sl->dlnf));
            dlnf = sl->dlnf;
        }
        DT_CHECK(dt__head_backward_b(be, c, &st->hw, &sl->head, xL, sl->targets, sl->losses, dloss, st->dres, dlnf, B,
                                     T, r));
        if (whole) DT_CHECK(dt__head_backward_w(be, c, &st->hw, &st->hg, &sl->head, xL, dlnf, B, T));
    } else {
        DT_CHECK(be->copy(be, st->dres, st->dout, NC * sizeof(float), DT_COPY_D2D));
    }
    DT_CHECK(dt__stage_blocks_backward(st, sl, xin, whole));
    if (st->first && whole) DT_CHECK(dt__embed_backward(be, c, st->gwte, st->gwpe, sl->tokens, st->dres, B, T));
    if (st->first && !whole) { /* the embedding's W reads its output's gradient */
        DT_CHECK(dt__arena_alloc(&sl->arena, NC, &sl->demb));
        DT_CHECK(be->copy(be, sl->demb, st->dres, NC * sizeof(float), DT_COPY_D2D));
    }
    if (whole) DT_CHECK(dt__stage_grads_end(st));
    if (dx) *dx = st->first ? NULL : st->dres;
    st->growing = NULL;
    if (whole) {
        dt__stage_free_slot(st, sl);
    } else {
        st->act_now += sl->arena.used - u0;
        dt__stage_note_peak(st);
        sl->busy = DT__SLOT_B;
    }
    return DT_OK;
}

dt_status dt__stage_backward(dt__stage *st, int slot, const float *w, float dloss, const float **dx)
{
    return dt__stage_run_backward(st, slot, w, dloss, dx, 1);
}

dt_status dt__stage_backward_b(dt__stage *st, int slot, const float *w, float dloss, const float **dx)
{
    return dt__stage_run_backward(st, slot, w, dloss, dx, 0);
}

dt_status dt__stage_backward_w(dt__stage *st, int slot, const float *w)
{
    DT_CHECK(dt__slot_check(st, slot, DT__SLOT_B, "backward W"));
    dt__slot *sl = &st->slots[slot];
    const dt_gpt_config *c = &st->cfg;
    DT_CHECK(dt__stage_use_weights(st, w));
    DT_CHECK(dt__stage_grads_begin(st));
    const float *xin = st->first ? sl->x0 : sl->input;
    if (st->last)
        DT_CHECK(dt__head_backward_w(st->be, c, &st->hw, &st->hg, &sl->head, dt__slot_out(st, sl, xin), sl->dlnf, st->B,
                                     st->T));
    DT_CHECK(dt__stage_blocks_w(st, sl, xin));
    if (st->first) DT_CHECK(dt__embed_backward(st->be, c, st->gwte, st->gwpe, sl->tokens, sl->demb, st->B, st->T));
    DT_CHECK(dt__stage_grads_end(st));
    dt__stage_free_slot(st, sl);
    return DT_OK;
}

const float *dt__stage_dres(const dt__stage *st) { return st->dres; }
