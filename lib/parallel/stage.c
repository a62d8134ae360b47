/* stage.c: one pipeline stage of the GPT (see stage.h), built from the
 * model's layer modules (embedding.c, block.c, head.c).
 *
 * Memory: the parameters and gradients; per slot an arena holding the
 * slot's input (stages after the first), tokens and targets, and the saved
 * activations of its forward (embedding output, each block's, the head's);
 * shared by all slots the backward scratch, the gradient flowing through the
 * stage (dres) and the receive buffer for the output gradient (dout).
 * Under --fp16/--bf16 without full recomputation a block's saved tensors
 * are kept packed, 2 bytes an element (LayerNorm statistics and the last
 * block's output FP32), as lib/model/gpt.c keeps them: the block runs in an
 * FP32 working set in the work arena, packed when it is done and unpacked
 * for its backward. The values are half values already, so this is exact.
 *
 * The backward, whole or split into B and W, is stage_backward.c's; the
 * struct and the helpers both use are stage_impl.h's (its invariants). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "dt_time.h"
#include "stage_impl.h"

dt_status dt__stage_split(int num_layers, int p, const int *split, int *l0, int *l1, int s)
{
    if (p < 1 || s < 0 || s >= p) return DT_FAIL(DT_ERR_INVALID, "pipeline stage %d of %d", s, p);
    if (split) {
        int sum = 0, at = 0;
        for (int i = 0; i < p; i++) {
            if (split[i] < 1)
                return DT_FAIL(DT_ERR_INVALID, "--pipeline-split: stage %d has %d blocks (expected >= 1)", i, split[i]);
            if (i == s) at = sum;
            sum += split[i];
        }
        if (sum != num_layers)
            return DT_FAIL(DT_ERR_INVALID,
                           "--pipeline-split: the stages hold %d blocks, the model has %d "
                           "(--num-layers)",
                           sum, num_layers);
        *l0 = at;
        *l1 = at + split[s];
        return DT_OK;
    }
    if (num_layers < p)
        return DT_FAIL(DT_ERR_INVALID,
                       "--pipeline-model-parallel-size %d: the model has only %d blocks "
                       "(--num-layers; expected at least one per stage)",
                       p, num_layers);
    int q = num_layers / p, r = num_layers % p;
    *l0 = s * q + (s < r ? s : r);
    *l1 = *l0 + q + (s < r);
    return DT_OK;
}

static void dt__stage_bind(dt__stage *st, float *base, float **wte, float **wpe, dt__block_params *b,
                           dt__head_params *h)
{
    const dt_param_info *in = st->layout.info;
    int k = 0;
    if (st->first) {
        *wte = base + in[k++].offset;
        *wpe = base + in[k++].offset;
    }
    for (int l = 0; l < st->nb; l++) {
        float **f[DT__NBLOCK] = {&b[l].ln1w, &b[l].ln1b, &b[l].qkvw, &b[l].qkvb, &b[l].attprojw, &b[l].attprojb,
                                 &b[l].ln2w, &b[l].ln2b, &b[l].fcw,  &b[l].fcb,  &b[l].fcprojw,  &b[l].fcprojb};
        for (int i = 0; i < DT__NBLOCK; i++) *f[i] = base + in[k++].offset;
    }
    if (st->last) {
        h->lnfw = base + in[k++].offset;
        h->lnfb = base + in[k++].offset;
        /* tied: wte itself on a one-stage pipeline, else this stage's copy */
        h->lmw = st->cfg.tie_embeddings && st->first ? *wte : base + in[k++].offset;
    }
}

int dt__stage_has_tied_copy(const dt__stage *st) { return st->cfg.tie_embeddings && st->last && !st->first; }

/* The stage's tensors in the whole model's order, with their whole indexes,
 * and the whole-model offset of the first (from the whole layout's rule:
 * 16-aligned offsets in order, so a range rebased keeps its alignment). */
static dt_status dt__stage_layout_make(dt__stage *st)
{
    const int64_t C = st->cfg.hidden_size, V = st->cfg.vocab_size;
    dt_paramset *w = &st->whole;
    dt_status s = DT_OK;
    /* the whole layout (names and shapes only matter), to find the range */
    DT_CHECK_GOTO(dt__gpt_whole_layout(&st->cfg, w), s, done);
    const int lo = st->first ? 0 : 2 + DT__NBLOCK * st->l0;
    const int hi = st->last ? w->count : 2 + DT__NBLOCK * st->l1;
    const int copy = dt__stage_has_tied_copy(st);
    st->whole_index = calloc((size_t)(hi - lo + copy), sizeof *st->whole_index);
    st->sharded = calloc((size_t)(hi - lo + copy), 1);
    if (!st->whole_index || !st->sharded) {
        s = DT_FAIL(DT_ERR_NOMEM, "pipeline stage: out of memory");
        goto done;
    }
    st->offset = w->info[lo].offset;
    for (int i = lo; i < hi;) {
        const int in_block = i >= 2 && i < 2 + DT__NBLOCK * st->cfg.num_layers;
        if (st->t > 1 && in_block) { /* a block's shard on this tensor-parallel rank */
            const int l = (i - 2) / DT__NBLOCK;
            DT_CHECK_GOTO(dt__tp_block_layout(&st->cfg, st->t, l, &st->layout), s, done);
            /* 1: column/row-parallel shard; 2: replicated, and the block's first tensor */
            static const int part[DT__NBLOCK] = {2, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0};
            for (int k = 0; k < DT__NBLOCK; k++) {
                st->whole_index[i - lo + k] = i + k;
                st->sharded[i - lo + k] = (uint8_t)part[k];
            }
            i += DT__NBLOCK;
            continue;
        }
        const dt_param_info *p = &w->info[i];
        DT_CHECK_GOTO(dt_paramset_add(&st->layout, p->name, p->ndim, p->shape, p->decay), s, done);
        st->whole_index[i - lo] = i;
        if (st->t == 1 && st->layout.info[i - lo].offset != p->offset - st->offset) {
            s = DT_FAIL(DT_ERR_BACKEND, "pipeline stage: tensor %s moved in the stage's layout", p->name);
            goto done;
        }
        i++;
    }
    if (copy) { /* the last stage's copy of the tied wte, after the stage's range */
        DT_CHECK_GOTO(dt_paramset_add(&st->layout, "lm_head.w", 2, (int64_t[]){V, C}, 1), s, done);
        st->whole_index[hi - lo] = 0;
        st->sharded[hi - lo] = 3;
    }
done:
    return s;
}

static size_t dt__pad16(size_t n) { return (n + 15) & ~(size_t)15; }

/* A block's saved floats on this stage (its shard with t > 1). */
static size_t dt__stage_block_floats(const dt__stage *st, int with_att)
{
    return st->t > 1 ? dt__tp_act_floats(&st->cfg, st->t, st->B, st->T, with_att)
                     : dt__block_act_floats(&st->cfg, st->B, st->T, with_att);
}

size_t dt__stage_att_floats(const dt__stage *st)
{
    return st->t > 1 ? dt__tp_att_floats(&st->cfg, st->t, st->B, st->T) : dt__block_att_floats(&st->cfg, st->B, st->T);
}

/* Half storage (see the top): without full recomputation, a 16-bit stage packs. */
int dt__stage_packs(const dt__stage *st) { return st->precision != DT_F32 && st->recompute != DT_RECOMPUTE_FULL; }

/* Block l's half storage (lib/model/block.c): the stage's last output
 * stays FP32, the head's input or the message sent on. */
dt__block_pack dt__stage_pack_of(const dt__stage *st, int l)
{
    return (dt__block_pack){.cfg = &st->cfg,
                            .t = st->t,
                            .B = st->B,
                            .T = st->T,
                            .with_att = st->recompute != DT_RECOMPUTE_SELECTIVE,
                            .out_fp32 = l == st->nb - 1,
                            .dtype = st->precision};
}

/* What B keeps for W in a slot's arena (stage_backward.c): each block's
 * keep, the head's dlnf (last stage), the embedding output's gradient
 * (first stage), and under full recomputation every block's recomputed
 * activations. */
static size_t dt__slot_split_floats(const dt__stage *st)
{
    const size_t NC = dt__pad16((size_t)st->B * st->T * st->cfg.hidden_size);
    const int packs = dt__stage_packs(st);
    size_t n = (size_t)st->nb * (packs ? dt__block_keep_packed_floats(&st->cfg, st->t, st->B, st->T)
                                       : dt__block_keep_floats(&st->cfg, st->t, st->B, st->T, 1));
    n += (st->last ? NC : 0) + (st->first ? NC : 0);
    if (st->recompute == DT_RECOMPUTE_FULL) n += (size_t)st->nb * dt__stage_block_floats(st, 1);
    return n;
}

/* Floats of one slot's arena: fixed buffers, then the forward's saved
 * activations: every block's (none), without the attention log-sum-exp
 * (selective), or one (B,T,C) output per group of recompute_k blocks (full). */
static size_t dt__slot_floats(const dt__stage *st)
{
    const int B = st->B, T = st->T;
    const size_t N = (size_t)B * T, C = (size_t)st->cfg.hidden_size;
    size_t n = 0;
    if (!st->first) n += dt__pad16(N * C);               /* input */
    n += 2 * dt__pad16(N) + dt__pad16(N) + dt__pad16(N); /* tokens, targets (int32 as floats), losses, correct */
    if (st->first) n += dt__embed_act_floats(&st->cfg, B, T);
    if (dt__stage_packs(st)) {
        for (int l = 0; l < st->nb; l++) {
            const dt__block_pack k = dt__stage_pack_of(st, l);
            n += dt__block_packed_floats(&k);
        }
    } else {
        switch (st->recompute) {
        case DT_RECOMPUTE_FULL: n += (size_t)st->groups * dt__pad16(N * C); break;
        case DT_RECOMPUTE_SELECTIVE: n += (size_t)st->nb * dt__stage_block_floats(st, 0); break;
        case DT_RECOMPUTE_NONE: n += (size_t)st->nb * dt__stage_block_floats(st, 1); break;
        }
    }
    if (st->last) n += dt__head_act_floats(st->be, &st->cfg, B, T);
    if (st->split) n += dt__slot_split_floats(st);
    return n + 64;
}

/* Floats of the shared work arena: the attention lse of one block
 * (selective), the activations of one group (full); packed, one block's
 * FP32 working set and its unpacked input. */
static size_t dt__work_floats(const dt__stage *st)
{
    if (dt__stage_packs(st)) /* with the split, a keep's FP32 buffers beside (the rest in the block's fch, qkv) */
        return dt__stage_block_floats(st, 1) + dt__pad16((size_t)st->B * st->T * st->cfg.hidden_size) +
               (st->split ? dt__block_keep_floats(&st->cfg, st->t, st->B, st->T, 1) : 0) + 64;
    switch (st->recompute) {
    case DT_RECOMPUTE_FULL: return (size_t)st->recompute_k * dt__stage_block_floats(st, 1) + 64;
    case DT_RECOMPUTE_SELECTIVE: return dt__stage_att_floats(st) + 64;
    case DT_RECOMPUTE_NONE: break;
    }
    return 0;
}

static void dt__slots_free(dt__stage *st)
{
    for (int k = 0; st->slots && k < st->nslots; k++) {
        dt_buffer_free(&st->slots[k].buf);
        free(st->slots[k].acts);
        free(st->slots[k].ckpt);
        free(st->slots[k].packed);
        free(st->slots[k].keep);
        free(st->slots[k].kpacked);
        st->slots[k] = (dt__slot){0};
    }
    dt_buffer_free(&st->work_buf);
    st->work = (dt__arena){0};
}

/* Each slot's arena and fixed buffers, and the work arena, for the recomputation mode. */
static dt_status dt__slots_alloc(dt__stage *st)
{
    const size_t N = (size_t)st->B * st->T, C = (size_t)st->cfg.hidden_size;
    const size_t per = dt__slot_floats(st), work = dt__work_floats(st);
    if (work) {
        DT_CHECK(dt_buffer_alloc(&st->work_buf, st->be, work * sizeof(float)));
        st->work = (dt__arena){.base = st->work_buf.data, .capacity = work};
    }
    for (int k = 0; k < st->nslots; k++) {
        dt__slot *sl = &st->slots[k];
        sl->acts = calloc((size_t)st->nb, sizeof *sl->acts);
        sl->ckpt = calloc((size_t)(st->groups ? st->groups : 1), sizeof *sl->ckpt);
        sl->packed = calloc((size_t)st->nb, sizeof *sl->packed);
        sl->keep = calloc((size_t)st->nb, sizeof *sl->keep);
        sl->kpacked = calloc((size_t)st->nb, sizeof *sl->kpacked);
        if (!sl->acts || !sl->ckpt || !sl->packed || !sl->keep || !sl->kpacked)
            return DT_FAIL(DT_ERR_NOMEM, "pipeline stage: out of memory");
        DT_CHECK(dt_buffer_alloc(&sl->buf, st->be, per * sizeof(float)));
        sl->arena = (dt__arena){.base = sl->buf.data, .capacity = per};
        float *f;
        if (!st->first) DT_CHECK(dt__arena_alloc(&sl->arena, N * C, &sl->input));
        DT_CHECK(dt__arena_alloc(&sl->arena, N, &f));
        sl->tokens = (int32_t *)f;
        DT_CHECK(dt__arena_alloc(&sl->arena, N, &f));
        sl->targets = (int32_t *)f;
        DT_CHECK(dt__arena_alloc(&sl->arena, N, &sl->losses));
        DT_CHECK(dt__arena_alloc(&sl->arena, N, &f));
        sl->correct = (uint8_t *)f;
        sl->mark = dt__arena_mark(&sl->arena);
    }
    return DT_OK;
}

dt_status dt__stage_create(const dt_gpt_config *cfg, dt_backend *be, int l0, int l1, int first, int last, int slots,
                           int B, int T, dt__tp *tp, dt__stage **out)
{
    *out = NULL;
    DT_CHECK(dt_gpt_config_validate(cfg));
    if (l0 < 0 || l1 <= l0 || l1 > cfg->num_layers || slots < 1 || B < 1 || T < 1 || T > cfg->seq_len)
        return DT_FAIL(DT_ERR_INVALID, "pipeline stage: blocks %d..%d of %d, %d slots, B %d, T %d", l0, l1 - 1,
                       cfg->num_layers, slots, B, T);
    dt__stage *st = calloc(1, sizeof *st);
    if (!st) return DT_FAIL(DT_ERR_NOMEM, "pipeline stage: out of memory");
    dt_status s = DT_OK;
    st->cfg = *cfg;
    st->be = be;
    st->l0 = l0, st->l1 = l1, st->nb = l1 - l0, st->first = first, st->last = last;
    st->nslots = slots, st->B = B, st->T = T;
    st->tp = tp;
    st->t = tp ? tp->comm->size : 1;
    st->tr = tp ? tp->comm->rank : 0;
    dt_paramset_init(&st->layout);
    dt_paramset_init(&st->whole);
    if (st->t > 1) DT_CHECK_GOTO(dt__tp_check(cfg, st->t), s, fail);
    st->w = calloc((size_t)st->nb, sizeof *st->w);
    st->g = calloc((size_t)st->nb, sizeof *st->g);
    st->slots = calloc((size_t)slots, sizeof *st->slots);
    if (!st->w || !st->g || !st->slots) {
        s = DT_FAIL(DT_ERR_NOMEM, "pipeline stage: out of memory");
        goto fail;
    }
    DT_CHECK_GOTO(dt__stage_layout_make(st), s, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&st->params, be, st->layout.numel * sizeof(float)), s, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&st->grads, be, st->layout.numel * sizeof(float)), s, fail);
    dt__stage_bind(st, st->grads.data, &st->gwte, &st->gwpe, st->g, &st->hg);
    const size_t N = (size_t)B * T, C = (size_t)cfg->hidden_size;
    const size_t nscr = dt__block_scratch_floats(cfg, B, T),
                 ntscr = st->t > 1 ? dt__tp_scratch_floats(cfg, st->t, B, T) : 0;
    DT_CHECK_GOTO(dt_buffer_alloc(&st->shared, be, (nscr + ntscr + 2 * dt__pad16(N * C) + 64) * sizeof(float)), s,
                  fail);
    {
        dt__arena sh = {.base = st->shared.data, .capacity = nscr + ntscr + 2 * dt__pad16(N * C) + 64};
        if (ntscr) DT_CHECK_GOTO(dt__arena_alloc(&sh, ntscr, &st->tscratch), s, fail);
        float *scr;
        DT_CHECK_GOTO(dt__arena_alloc(&sh, nscr, &scr), s, fail);
        dt__block_scratch_bind(&st->scratch, cfg, B, T, scr);
        DT_CHECK_GOTO(dt__arena_alloc(&sh, N * C, &st->dres), s, fail);
        DT_CHECK_GOTO(dt__arena_alloc(&sh, N * C, &st->dout), s, fail);
    }
    DT_CHECK_GOTO(dt__slots_alloc(st), s, fail);
    *out = st;
    return DT_OK;
fail:
    dt__stage_free(st);
    return s;
}

/* Before wq or whalf is freed: the backend forgets the 16-bit copy. */
static void dt__stage_forget_shadow(dt__stage *st)
{
    if (st->be && st->be->set_gemm_shadow && st->wq.data)
        (void)st->be->set_gemm_shadow(st->be, st->wq.data, 0, NULL, DT_F32);
}

void dt__stage_free(dt__stage *st)
{
    if (!st) return;
    dt__slots_free(st);
    free(st->slots);
    dt_buffer_free(&st->shared);
    dt_buffer_free(&st->round_buf);
    dt__stage_forget_shadow(st);
    dt_buffer_free(&st->wq);
    dt_buffer_free(&st->whalf);
    dt_buffer_free(&st->gmb);
    dt_buffer_free(&st->params);
    dt_buffer_free(&st->grads);
    dt_paramset_free(&st->layout);
    free(st->whole_index);
    free(st->sharded);
    dt_paramset_free(&st->whole);
    free(st->w);
    free(st->g);
    free(st);
}

dt_status dt__stage_init_weights(dt__stage *st, uint64_t seed)
{
    st->epoch++;
    const size_t n = st->layout.numel;
    float *host = calloc(n ? n : 1, sizeof *host);
    if (!host) return DT_FAIL(DT_ERR_NOMEM, "pipeline stage: out of memory for %zu initial weights", n);
    dt_status s = DT_OK;
    if (st->t == 1) {
        for (int i = 0; i < st->layout.count; i++)
            dt__gpt_init_tensor(&st->cfg, &st->layout.info[i], st->whole_index[i], seed,
                                host + st->layout.info[i].offset);
    } else { /* the whole tensors, then this rank's shards of the blocks' */
        float *full[DT__NBLOCK] = {0};
        for (int i = 0; i < st->layout.count && s == DT_OK;) {
            const dt_param_info *wi = &st->whole.info[st->whole_index[i]];
            if (st->sharded[i] != 2) { /* replicated: embedding, head */
                dt__gpt_init_tensor(&st->cfg, wi, st->whole_index[i], seed, host + st->layout.info[i].offset);
                i++;
                continue;
            }
            for (int k = 0; k < DT__NBLOCK; k++) { /* a block: ln1.w .. fcproj.b */
                const dt_param_info *pk = &st->whole.info[st->whole_index[i + k]];
                full[k] = malloc(pk->numel * sizeof(float));
                if (!full[k]) s = DT_FAIL(DT_ERR_NOMEM, "pipeline stage: out of memory for initial weights");
                else dt__gpt_init_tensor(&st->cfg, pk, st->whole_index[i + k], seed, full[k]);
            }
            if (s == DT_OK)
                dt__tp_block_shard(&st->cfg, st->t, st->tr, (const float *const *)full, &st->layout, i, host);
            for (int k = 0; k < DT__NBLOCK; k++) free(full[k]), full[k] = NULL;
            i += DT__NBLOCK;
        }
    }
    if (s == DT_OK) s = st->be->copy(st->be, st->params.data, host, n * sizeof(float), DT_COPY_H2D);
    free(host);
    return s;
}

const dt_paramset *dt__stage_layout(const dt__stage *st) { return &st->layout; }
float *dt__stage_params(dt__stage *st) { return st->params.data; }
float *dt__stage_grads(dt__stage *st) { return st->grads.data; }
size_t dt__stage_offset(const dt__stage *st) { return st->offset; }
const dt_paramset *dt__stage_whole_layout(const dt__stage *st) { return &st->whole; }
const int *dt__stage_whole_index(const dt__stage *st) { return st->whole_index; }
void dt__stage_tied_range(const dt__stage *st, size_t *offset, size_t *n)
{
    *offset = *n = 0;
    if (!st->cfg.tie_embeddings || st->first == st->last) return;
    const dt_param_info *p = &st->layout.info[st->first ? 0 : st->layout.count - 1];
    *offset = p->offset;
    *n = p->numel;
}
float *dt__stage_input(dt__stage *st, int slot) { return st->slots[slot].input; }
float *dt__stage_dout(dt__stage *st) { return st->dout; }
size_t dt__stage_activation_bytes(const dt__stage *st) { return st->act_now * sizeof(float); }
size_t dt__stage_peak_activation_bytes(const dt__stage *st) { return st->act_peak * sizeof(float); }

dt_status dt__stage_bind_buffers(dt__stage *st, float *params, float *grads)
{
    const size_t bytes = st->layout.numel * sizeof(float);
    DT_CHECK(st->be->copy(st->be, params, st->params.data, bytes, DT_COPY_D2D));
    DT_CHECK(st->be->copy(st->be, grads, st->grads.data, bytes, DT_COPY_D2D));
    dt_buffer_free(&st->params);
    dt_buffer_free(&st->grads);
    /* no backend: dt_buffer_free leaves the caller's memory alone */
    st->params = (dt_buffer){.data = params, .bytes = bytes};
    st->grads = (dt_buffer){.data = grads, .bytes = bytes};
    if (st->precision == DT_F32) dt__stage_bind(st, st->grads.data, &st->gwte, &st->gwpe, st->g, &st->hg);
    st->wq_src = NULL;
    st->epoch++;
    return DT_OK;
}

void dt__stage_reset_peak(dt__stage *st) { st->act_peak = st->act_now; }

dt_status dt__stage_zero_grad(dt__stage *st)
{
    return st->be->memset_zero(st->be, st->grads.data, st->layout.numel * sizeof(float));
}

dt_status dt__stage_set_precision(dt__stage *st, dt_dtype dtype)
{
    if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "pipeline stage precision %s: expected f32, f16 or bf16", dt_dtype_name(dtype));
    for (int k = 0; k < st->nslots; k++)
        if (st->slots[k].busy) return DT_FAIL(DT_ERR_INVALID, "pipeline stage precision: slot %d is in flight", k);
    dt_buffer_free(&st->round_buf);
    dt__stage_forget_shadow(st);
    dt_buffer_free(&st->wq);
    dt_buffer_free(&st->whalf);
    dt_buffer_free(&st->gmb);
    st->wq_src = NULL;
    st->rnd = (dt__rounder){.dtype = dtype};
    st->precision = dtype;
    dt__slots_free(st); /* the slots' sizes follow the storage (dt__slot_floats) */
    st->act_now = st->act_peak = 0;
    DT_CHECK(dt__slots_alloc(st));
    if (st->be->set_gemm_inputs) DT_CHECK(st->be->set_gemm_inputs(st->be, dtype));
    dt__stage_bind(st, st->grads.data, &st->gwte, &st->gwpe, st->g, &st->hg);
    if (dtype == DT_F32) return DT_OK;
    const dt_gpt_config *c = &st->cfg;
    const size_t BT = (size_t)st->B * st->T, n = st->layout.numel;
    const size_t cap = DT_MAX(DT_MAX((size_t)st->B * c->num_heads * st->T * st->T, 4 * BT * c->hidden_size),
                              DT_MAX(BT * dt__head_ld(st->be, c->vocab_size), n));
    DT_CHECK(dt_buffer_alloc(&st->round_buf, st->be, cap * dt_dtype_size(dtype)));
    st->rnd.scratch = st->round_buf.data;
    st->rnd.capacity = cap;
    DT_CHECK(dt_buffer_alloc(&st->wq, st->be, n * sizeof(float)));
    DT_CHECK(dt_buffer_alloc(&st->gmb, st->be, n * sizeof(float)));
    dt__stage_bind(st, st->gmb.data, &st->gwte, &st->gwpe, st->g, &st->hg);
    if (!st->be->set_gemm_shadow) return DT_OK;
    DT_CHECK(dt_buffer_alloc(&st->whalf, st->be, n * dt_dtype_size(dtype)));
    return st->be->set_gemm_shadow(st->be, st->wq.data, n, st->whalf.data, dtype);
}

const dt__rounder *dt__stage_rnd(const dt__stage *st) { return st->precision == DT_F32 ? NULL : &st->rnd; }

void dt__stage_weights_changed(dt__stage *st) { st->epoch++; }

/* Bind the weights of this call: w (NULL: the stage's own); under mixed
 * precision their values rounded to the 16-bit format (the compute copy of
 * the FP32 masters), made again only when w differs from the last call's
 * or the weights changed since (gpipe/1f1b: once per step instead of once
 * per forward and per backward). */
dt_status dt__stage_use_weights(dt__stage *st, const float *w)
{
    const float *src = w ? w : st->params.data;
    if (st->precision != DT_F32) {
        const size_t n = st->layout.numel;
        if (st->wq_src != src || st->wq_epoch != st->epoch) {
            st->wq_src = NULL; /* invalid until rounded */
            /* rounded through whalf where there is one, so it holds wq's
             * 16-bit values for the GEMMs (the same rounding either way);
             * two casts, not dt__round, whose fused form leaves no 16-bit copy */
            if (st->whalf.data) {
                DT_CHECK(st->be->cast(st->be, st->whalf.data, st->precision, src, DT_F32, n));
                DT_CHECK(st->be->cast(st->be, st->wq.data, DT_F32, st->whalf.data, st->precision, n));
            } else {
                DT_CHECK(st->be->copy(st->be, st->wq.data, src, n * sizeof(float), DT_COPY_D2D));
                DT_CHECK(dt__round(st->be, &st->rnd, st->wq.data, n));
            }
            st->wq_src = src;
            st->wq_epoch = st->epoch;
        }
        src = st->wq.data;
    }
    dt__stage_bind(st, (float *)src, &st->wte, &st->wpe, st->w, &st->hw);
    return DT_OK;
}

dt_status dt__stage_set_recompute(dt__stage *st, dt_recompute mode, int num_layers)
{
    if (mode != DT_RECOMPUTE_NONE && mode != DT_RECOMPUTE_FULL && mode != DT_RECOMPUTE_SELECTIVE)
        return DT_FAIL(DT_ERR_INVALID, "recompute mode %d: expected none, full or selective", (int)mode);
    if (mode == DT_RECOMPUTE_FULL && num_layers < 1)
        return DT_FAIL(DT_ERR_INVALID, "--recompute-num-layers %d: expected >= 1", num_layers);
    for (int k = 0; k < st->nslots; k++)
        if (st->slots[k].busy) return DT_FAIL(DT_ERR_INVALID, "pipeline stage recomputation: slot %d is in flight", k);
    dt__slots_free(st);
    st->recompute = mode;
    st->recompute_k = mode == DT_RECOMPUTE_FULL ? DT_MIN(num_layers, st->nb) : 0;
    st->groups = mode == DT_RECOMPUTE_FULL ? (st->nb + st->recompute_k - 1) / st->recompute_k : 0;
    st->act_now = st->act_peak = 0;
    return dt__slots_alloc(st);
}

dt_status dt__stage_set_split(dt__stage *st, int on)
{
    for (int k = 0; k < st->nslots; k++)
        if (st->slots[k].busy) return DT_FAIL(DT_ERR_INVALID, "pipeline stage B/W split: slot %d is in flight", k);
    dt__slots_free(st);
    st->split = on != 0;
    st->act_now = st->act_peak = 0;
    return dt__slots_alloc(st);
}

void dt__stage_set_recompute_hook(dt__stage *st, dt__stage_recompute_fn fn, void *ctx)
{
    st->recompute_hook = fn;
    st->recompute_ctx = ctx;
}

void dt__stage_recomputed(const dt__stage *st, int l, int64_t t0)
{
    if (st->recompute_hook) st->recompute_hook(st->recompute_ctx, st->l0 + l, t0, dt_time_ns());
}

/* The output of a slot's last block (xin when the stage has none). */
const float *dt__slot_out(const dt__stage *st, const dt__slot *sl, const float *xin)
{
    if (!st->nb) return xin;
    if (st->recompute == DT_RECOMPUTE_FULL) return sl->ckpt[st->groups - 1];
    if (dt__stage_packs(st)) return sl->packed[st->nb - 1][DT__BLOCK_OUT]; /* kept FP32 */
    return sl->acts[st->nb - 1].out;
}

/* The peak counts the slots' saved activations, the part of the growing
 * slot's not yet counted, and the work arena's transient ones (a group
 * being recomputed, the attention lse of one block). */
void dt__stage_note_peak(dt__stage *st)
{
    const size_t grow = st->growing ? st->growing->arena.used - st->grow_from : 0;
    const size_t now = st->act_now + grow + st->work.used;
    if (now > st->act_peak) st->act_peak = now;
}

/* dt__stage_forward_check: if no layer's output was non-finite yet, look
 * at x (rows, ld apart, of which the first cols count) and note layer pos
 * if it holds a NaN or inf (one span_stats call; multiplying by 1 changes nothing). */
static dt_status dt__stage_nf_note(dt__stage *st, float *x, size_t rows, size_t cols, size_t ld, int pos)
{
    if (!st->nf_check || st->nf_pos >= 0 || !rows || !cols) return DT_OK;
    int bad = 0;
    if (ld == cols) {
        DT_CHECK(st->be->unscale_check(st->be, x, 1.0f, rows * cols, &bad));
        if (bad) st->nf_pos = pos;
        return DT_OK;
    }
    dt_span *sp = malloc(rows * sizeof *sp);
    int *nf = malloc(rows * sizeof *nf);
    dt_status rc = sp && nf ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "stage: out of memory for %zu rows", rows);
    for (size_t i = 0; rc == DT_OK && i < rows; i++) sp[i] = (dt_span){i * ld, cols};
    if (rc == DT_OK) rc = st->be->span_stats(st->be, x, sp, (int)rows, 1.0f, nf, NULL);
    for (size_t i = 0; rc == DT_OK && i < rows; i++) bad |= nf[i];
    if (bad) st->nf_pos = pos;
    free(sp);
    free(nf);
    return rc;
}

/* Block l's forward in slot sl from x: its activations in arena a (the
 * slot's, or the work arena while a group is recomputed); with_att = 0
 * keeps the attention log-sum-exp only while the block runs. */
static dt_status dt__stage_block_forward(dt__stage *st, dt__slot *sl, int l, dt__arena *a, int with_att, const float *x,
                                         const float **out)
{
    const dt_gpt_config *c = &st->cfg;
    const dt__rounder *r = dt__stage_rnd(st);
    dt__block_acts *acts = &sl->acts[l];
    float *att = NULL;
    if (st->t > 1) DT_CHECK(dt__tp_acts_alloc(a, c, st->t, st->B, st->T, with_att, &st->scratch.tmp, acts));
    else DT_CHECK(dt__block_acts_alloc(a, c, st->B, st->T, with_att, &st->scratch.tmp, acts));
    const size_t mark = dt__arena_mark(&st->work);
    if (!with_att) DT_CHECK(dt__arena_alloc(&st->work, dt__stage_att_floats(st), &att));
    if (att) acts->lse = att;
    if (st->t > 1) DT_CHECK(dt__tp_block_forward(st->tp, st->be, c, &st->w[l], acts, x, st->B, st->T, r));
    else DT_CHECK(dt__block_forward(st->be, c, &st->w[l], acts, x, st->B, st->T, r));
    if (att) acts->lse = NULL;
    *out = acts->out;
    DT_CHECK(dt__stage_nf_note(st, acts->out, 1, (size_t)st->B * st->T * c->hidden_size,
                               (size_t)st->B * st->T * c->hidden_size, 1 + st->l0 + l));
    if (!with_att) {
        dt__stage_note_peak(st);
        dt__arena_release(&st->work, mark);
    }
    return DT_OK;
}

/* Half storage: block l's FP32 input, x for the stage's first block, else
 * the previous block's packed output unpacked into the work arena. */
dt_status dt__stage_packed_input(dt__stage *st, dt__slot *sl, int l, const float *x, const float **in)
{
    if (l == 0) {
        *in = x;
        return DT_OK;
    }
    const size_t n = (size_t)st->B * st->T * st->cfg.hidden_size;
    float *x32;
    DT_CHECK(dt__arena_alloc(&st->work, n, &x32));
    DT_CHECK(st->be->cast(st->be, x32, DT_F32, sl->packed[l - 1][DT__BLOCK_OUT], st->precision, n));
    *in = x32;
    return DT_OK;
}

/* Half storage: the stage's blocks forward from x, each in the work arena
 * and then packed into its stores. */
static dt_status dt__stage_forward_packed(dt__stage *st, dt__slot *sl, const float *x)
{
    for (int l = 0; l < st->nb; l++) {
        const dt__block_pack k = dt__stage_pack_of(st, l);
        const float *in, *y;
        DT_CHECK(dt__block_pack_alloc(&k, &sl->arena, sl->packed[l]));
        DT_CHECK(dt__stage_packed_input(st, sl, l, x, &in));
        DT_CHECK(dt__stage_block_forward(st, sl, l, &st->work, k.with_att, in, &y));
        dt__stage_note_peak(st);
        DT_CHECK(dt__block_pack_copy(&k, st->be, &sl->acts[l], sl->packed[l], 1));
        dt__arena_reset(&st->work);
    }
    return DT_OK;
}

dt_status dt__stage_group_forward(dt__stage *st, dt__slot *sl, int g, dt__arena *a, const float *x, const float **out,
                                  int again)
{
    const int l0 = g * st->recompute_k, l1 = DT_MIN(l0 + st->recompute_k, st->nb);
    if (a == &st->work) dt__arena_reset(&st->work);
    for (int l = l0; l < l1; l++) {
        const int64_t t0 = again ? dt_time_ns() : 0;
        DT_CHECK(dt__stage_block_forward(st, sl, l, a, 1, x, &x));
        if (again) dt__stage_recomputed(st, l, t0);
    }
    *out = x;
    return DT_OK;
}

dt_status dt__slot_check(const dt__stage *st, int slot, int want, const char *what)
{
    if (slot < 0 || slot >= st->nslots)
        return DT_FAIL(DT_ERR_INVALID, "pipeline stage %s: slot %d outside 0..%d", what, slot, st->nslots - 1);
    const int busy = st->slots[slot].busy;
    if (want == DT__SLOT_BUSY ? busy != DT__SLOT_FREE : busy == want) return DT_OK;
    return DT_FAIL(DT_ERR_INVALID, "pipeline stage %s: slot %d is %s", what, slot,
                   busy == DT__SLOT_FREE   ? "free (no forward to differentiate)"
                   : want == DT__SLOT_FREE ? "still holding a micro-batch"
                   : busy == DT__SLOT_B    ? "past its B (waiting for its W)"
                                           : "not past its B (no W to run)");
}

dt_status dt__stage_forward(dt__stage *st, int slot, const float *w, const int32_t *tokens, const int32_t *targets,
                            const float **out, float *loss, int *n_counted)
{
    DT_CHECK(dt__slot_check(st, slot, DT__SLOT_FREE, "forward"));
    dt__slot *sl = &st->slots[slot];
    dt_backend *be = st->be;
    const dt_gpt_config *c = &st->cfg;
    const int B = st->B, T = st->T, N = B * T;
    const dt__rounder *r = dt__stage_rnd(st);
    DT_CHECK(dt__stage_use_weights(st, w));
    dt__arena_release(&sl->arena, sl->mark);
    st->growing = sl, st->grow_from = sl->mark;
    const float *x = sl->input;
    if (st->first) {
        for (int i = 0; i < N; i++)
            if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
                return DT_FAIL(DT_ERR_INVALID, "forward: token %d at position %d outside the vocabulary of %d",
                               tokens[i], i, c->vocab_size);
        DT_CHECK(be->copy(be, sl->tokens, tokens, (size_t)N * sizeof(int32_t), DT_COPY_H2D));
        DT_CHECK(dt__embed_forward(be, c, st->wte, st->wpe, sl->tokens, &sl->arena, &sl->x0, B, T, r));
        x = sl->x0;
        DT_CHECK(dt__stage_nf_note(st, sl->x0, 1, (size_t)N * c->hidden_size, (size_t)N * c->hidden_size, 0));
    }
    if (st->recompute == DT_RECOMPUTE_FULL) { /* keep each group's output; its blocks' activations go */
        const size_t NC = (size_t)N * c->hidden_size;
        for (int g = 0; g < st->groups; g++) {
            DT_CHECK(dt__arena_alloc(&sl->arena, NC, &sl->ckpt[g]));
            const float *y;
            DT_CHECK(dt__stage_group_forward(st, sl, g, &st->work, x, &y, 0));
            DT_CHECK(be->copy(be, sl->ckpt[g], y, NC * sizeof(float), DT_COPY_D2D));
            dt__stage_note_peak(st);
            dt__arena_reset(&st->work);
            x = sl->ckpt[g];
        }
    } else if (dt__stage_packs(st)) {
        DT_CHECK(dt__stage_forward_packed(st, sl, x));
        x = dt__slot_out(st, sl, x);
    } else {
        const int with_att = st->recompute != DT_RECOMPUTE_SELECTIVE;
        for (int l = 0; l < st->nb; l++) DT_CHECK(dt__stage_block_forward(st, sl, l, &sl->arena, with_att, x, &x));
    }
    sl->has_targets = 0;
    if (st->last) {
        sl->n_counted = 0;
        if (targets) {
            for (int i = 0; i < N; i++) {
                if (targets[i] >= c->vocab_size)
                    return DT_FAIL(DT_ERR_INVALID, "forward: target %d at position %d outside the vocabulary of %d",
                                   targets[i], i, c->vocab_size);
                sl->n_counted += targets[i] >= 0;
            }
            DT_CHECK(be->copy(be, sl->targets, targets, (size_t)N * sizeof(int32_t), DT_COPY_H2D));
            sl->has_targets = 1;
        }
        DT_CHECK(dt__head_forward(be, c, &st->hw, &sl->arena, &sl->head, x, targets ? sl->targets : NULL, sl->losses,
                                  sl->correct, B, T, r));
        const int head = c->num_layers + 1;
        DT_CHECK(dt__stage_nf_note(st, sl->head.logits, (size_t)N, (size_t)c->vocab_size, (size_t)sl->head.ld, head));
        if (targets) DT_CHECK(dt__stage_nf_note(st, sl->losses, 1, (size_t)N, (size_t)N, head));
        float mean = 0.0f;
        if (targets) DT_CHECK(dt__head_mean_loss(be, sl->losses, N, sl->n_counted, &mean));
        if (loss) *loss = mean;
        if (n_counted) *n_counted = sl->n_counted;
        if (out) *out = NULL;
    } else if (out) {
        *out = x;
    }
    sl->busy = DT__SLOT_FORWARD;
    st->growing = NULL;
    st->act_now += sl->arena.used - sl->mark;
    if (st->act_now > st->act_peak) st->act_peak = st->act_now;
    return DT_OK;
}

dt_status dt__stage_forward_check(dt__stage *st, int slot, const int32_t *tokens, const int32_t *targets,
                                  const float **out, int *pos)
{
    st->nf_check = 1;
    st->nf_pos = -1;
    const dt_status rc = dt__stage_forward(st, slot, NULL, tokens, targets, out, NULL, NULL);
    st->nf_check = 0;
    *pos = st->nf_pos;
    return rc;
}

dt_status dt__stage_position_stats(dt__stage *st, int slot, float *losses, uint8_t *correct)
{
    if (slot < 0 || slot >= st->nslots || !st->last)
        return DT_FAIL(DT_ERR_INVALID, "position stats: slot %d of a %s stage", slot, st->last ? "last" : "non-last");
    dt__slot *sl = &st->slots[slot];
    const size_t N = (size_t)st->B * st->T;
    if (losses) DT_CHECK(st->be->copy(st->be, losses, sl->losses, N * sizeof(float), DT_COPY_D2H));
    if (correct) DT_CHECK(st->be->copy(st->be, correct, sl->correct, N, DT_COPY_D2H));
    return DT_OK;
}

dt_status dt__stage_release(dt__stage *st, int slot)
{
    DT_CHECK(dt__slot_check(st, slot, DT__SLOT_BUSY, "release"));
    dt__slot *sl = &st->slots[slot];
    st->act_now -= sl->arena.used - sl->mark;
    dt__arena_release(&sl->arena, sl->mark);
    sl->busy = DT__SLOT_FREE;
    return DT_OK;
}

dt_status dt__stage_output(dt__stage *st, int slot, const float **out)
{
    DT_CHECK(dt__slot_check(st, slot, DT__SLOT_BUSY, "output"));
    if (st->last) return DT_FAIL(DT_ERR_INVALID, "pipeline stage output: the last stage sends no activation");
    *out = dt__slot_out(st, &st->slots[slot], NULL);
    return DT_OK;
}

dt_status dt__stage_grad_sumsq(dt__stage *st, size_t lo, size_t hi, double *sharded, double *replicated)
{
    *sharded = *replicated = 0.0;
    const int n = st->layout.count;
    dt_span *spans = malloc((size_t)(n ? n : 1) * sizeof *spans);
    double *sq = malloc((size_t)(n ? n : 1) * sizeof *sq);
    if (!spans || !sq) {
        free(spans);
        free(sq);
        return DT_FAIL(DT_ERR_NOMEM, "stage: out of memory for %d gradient spans", n);
    }
    /* each tensor's part in [lo, hi); empty for the tied copy (the first stage counts wte) */
    for (int i = 0; i < n; i++) {
        const dt_param_info *p = &st->layout.info[i];
        const size_t a = DT_MAX(p->offset, lo), b = DT_MIN(p->offset + p->numel, hi);
        spans[i] = (dt_span){a, a < b && st->sharded[i] != 3 ? b - a : 0};
    }
    /* one span_stats call: one wait for a GPU; grads are only read */
    dt_status rc = st->be->span_stats(st->be, (float *)st->grads.data, spans, n, 1.0f, NULL, sq);
    for (int i = 0; rc == DT_OK && i < n; i++) {
        if (!spans[i].n) continue;
        if (st->sharded[i] == 1) *sharded += sq[i];
        else *replicated += sq[i];
    }
    free(spans);
    free(sq);
    return rc;
}

dt_status dt__stage_probe(dt__stage *st, double *out) { return dt__stage_probe_of(st, st->params.data, out); }

dt_status dt__stage_probe_of(dt__stage *st, const float *weights, double *out)
{
    const size_t n = st->layout.numel;
    float *w = malloc((n ? n : 1) * sizeof *w);
    if (!w) return DT_FAIL(DT_ERR_NOMEM, "pipeline stage: out of memory for the weights fingerprint");
    dt_status s = st->be->copy(st->be, w, weights, n * sizeof(float), DT_COPY_D2H);
    double sum = 0.0;
    for (int i = 0; s == DT_OK && i < st->layout.count;) {
        if (st->sharded[i] ==
            2) { /* a tensor-parallel block: its replicated tensors once (tensor rank 0), its shards */
            size_t off[DT__NBLOCK];
            for (int k = 0; k < DT__NBLOCK; k++) off[k] = st->whole.info[st->whole_index[i + k]].offset;
            for (int k = 0; k < DT__NBLOCK && st->tr == 0; k++) {
                if (st->sharded[i + k] == 1) continue;
                const dt_param_info *p = &st->layout.info[i + k];
                for (size_t j = 0; j < p->numel; j++) sum += (double)w[p->offset + j] * dt__probe_u(off[k] + j);
            }
            sum += dt__tp_block_probe(&st->cfg, st->t, st->tr, &st->layout, i, w, off);
            i += DT__NBLOCK;
            continue;
        }
        const dt_param_info *p = &st->layout.info[i];
        const size_t off = st->whole.info[st->whole_index[i]].offset;
        if (st->tr == 0 && st->sharded[i] != 3) /* the tied copy: the first stage counts wte */
            for (size_t j = 0; j < p->numel; j++) sum += (double)w[p->offset + j] * dt__probe_u(off + j);
        i++;
    }
    free(w);
    *out = sum;
    return s;
}
