/* stage.c: one pipeline stage of the GPT (see stage.h): its share of the
 * whole model's layout (a range of it, or with tensor parallelism its
 * blocks' shards), its parameters and gradients, the weights of each call
 * rounded under mixed precision, and the fingerprint and gradient norm
 * terms. Its layers run on the layer runner (lib/model/runner.h) in the
 * stage memory discipline: a slot per micro-batch in flight, the work
 * arena for an op's transients, the B/W split; tensor-parallel blocks are
 * lib/parallel/tp.c's ops.
 *
 * Under --fp16/--bf16 without full recomputation a block's saved tensors
 * are kept packed, 2 bytes an element (the runner's), and each
 * micro-batch's parameter gradients go to gmb, rounded before they
 * accumulate in FP32, as lib/model/gpt.c does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "dt_time.h"
#include "runner.h"
#include "stage.h"
#include "cp.h"
#include "sp.h"
#include "zero_shard.h"

struct dt__stage {
    dt_gpt_config cfg;
    dt_backend *be;
    int l0, l1, nb, first, last, nslots, B, T;
    dt_paramset layout;
    int *whole_index;  /* (layout.count) each tensor's index in the whole model's layout */
    size_t offset;     /* whole-model element offset of element 0 (t = 1) */
    dt_paramset whole; /* the whole model's layout */
    dt__tp *tp;        /* tensor parallelism (not owned), or NULL */
    int t, tr;         /* tensor-parallel size and rank */
    uint8_t *sharded;  /* (layout.count) t > 1: 1 this rank holds a shard of the tensor; 2 the first
                               (replicated) tensor of a sharded block; 0 replicated; 3 the last
                               stage's copy of the tied wte (counted on the first stage); 4 the
                               rank's rows of wte or the LM head (vocabulary-parallel) */
    dt__vocab vocab;   /* the embedding's and head's rows: vocab.t > 1 split, else all V */
    dt_buffer params, grads;
    dt__runner *run; /* the layers, the slots and their activations */
    int split;       /* dt__stage_set_split */
    /* mixed precision (dt__stage_set_precision), as lib/model/gpt.c's */
    dt_dtype precision; /* DT_F32, DT_F16 or DT_BF16 */
    dt_buffer wq;       /* (numel) the weights of this call rounded to precision, as FP32: what the GEMMs read */
    /* (numel) wq in precision, kept where the backend can read GEMM
     * operands from it (set_gemm_shadow): the rounding's own scratch */
    dt_buffer whalf;
    /* wq holds wq_src's values rounded as of weights epoch wq_epoch (valid when
     * wq_src is set): a later call with the same weights and no change since
     * (dt__stage_weights_changed) reuses it instead of rounding again */
    const float *wq_src;
    uint64_t epoch, wq_epoch;
    dt_buffer gmb; /* (numel) one micro-batch's parameter gradients, rounded before they accumulate */
    dt__stage_recompute_fn recompute_hook; /* may be NULL */
    void *recompute_ctx;
    /* the layers (the embedding on the first stage, the blocks, the head
     * on the last): each one's first tensor and range in the layout */
    int nlay;
    int *lay_first;            /* (nlay + 1) the last entry: layout.count */
    size_t *lay_off, *lay_len; /* (nlay) */
    /* ZeRO-2/3 (dt__stage_set_sharder): the sharder, the range of the
     * stage's first layer in it, and the flat element of its element 0 */
    dt__zs *zs;
    int zs_first;
    size_t zs_origin;
    /* a sharded stage with both ends and tied embeddings (as
     * lib/parallel/zero_gpt.c's): at stage 3 the embedding's weights from
     * its forward through the head's backward (the head multiplies by
     * wte); the head's wte gradient until the embedding's backward starts
     * from it */
    dt_buffer wemb;  /* (V*C + maxT*C) FP32, stage 3 */
    dt_buffer gtied; /* (V*C) FP32 */
};

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

/* Layer l's position in the stage's layers (see struct dt__stage). */
static int dt__stage_layer_index(const dt__stage *st, int l)
{
    if (l < 0) return 0;
    if (l >= st->cfg.num_layers) return st->nlay - 1;
    return st->first + (l - st->l0);
}

/* Point layer l's views (weights or gradients) into a buffer whose element
 * 0 is element origin of the stage's layout: its tensors in the layer
 * table's order (a block's shard has as many as the block), the last
 * stage's head with its copy of the tied wte as its third. */
static void dt__stage_bind_layer(const dt__stage *st, int l, float *base, size_t origin, dt__runner_views *v)
{
    const int k = dt__stage_layer_index(st, l), t0 = st->lay_first[k];
    dt__runner_views_bind(v, &st->cfg, st->l0, l, st->layout.info + t0, st->lay_first[k + 1] - t0, base, origin);
}

/* Every layer's views into a flat buffer of the stage's layout. */
static void dt__stage_bind(const dt__stage *st, float *base, dt__runner_views *v)
{
    for (int l = st->first ? -1 : st->l0; l <= (st->last ? st->cfg.num_layers : st->l1 - 1); l++) {
        if (l == st->l1) l = st->cfg.num_layers; /* past the blocks: the head */
        dt__stage_bind_layer(st, l, base, 0, v);
    }
}

/* The layers' first tensors and ranges, from the layer table. */
static dt_status dt__stage_layers_make(dt__stage *st)
{
    st->nlay = st->first + st->nb + st->last;
    st->lay_first = calloc((size_t)st->nlay + 1, sizeof *st->lay_first);
    st->lay_off = calloc((size_t)st->nlay, sizeof *st->lay_off);
    st->lay_len = calloc((size_t)st->nlay, sizeof *st->lay_len);
    if (!st->lay_first || !st->lay_off || !st->lay_len) return DT_FAIL(DT_ERR_NOMEM, "pipeline stage: out of memory");
    int k = 0, t = 0, first, n;
    for (int l = st->first ? -1 : st->l0; l <= (st->last ? st->cfg.num_layers : st->l1 - 1); l++, k++) {
        if (l == st->l1) l = st->cfg.num_layers;
        dt__gpt_layer_tensors(&st->cfg, l, &first, &n);
        st->lay_first[k] = t;
        t += n;
    }
    st->lay_first[st->nlay] = st->layout.count; /* the head's count includes the tied copy */
    for (k = 0; k < st->nlay; k++) {
        st->lay_off[k] = st->layout.info[st->lay_first[k]].offset;
        st->lay_len[k] = (k + 1 < st->nlay ? st->layout.info[st->lay_first[k + 1]].offset : st->layout.numel) -
                         st->lay_off[k];
    }
    return DT_OK;
}

int dt__stage_layer_count(const dt__stage *st) { return st->nlay; }
void dt__stage_layer_range(const dt__stage *st, int k, size_t *off, size_t *len)
{
    *off = st->lay_off[k];
    *len = st->lay_len[k];
}

int dt__stage_has_tied_copy(const dt__stage *st) { return st->cfg.tie_embeddings && st->last && !st->first; }

/* Whole tensor i is one with a row per vocabulary entry: wte, or the
 * untied LM head (the last tensor). */
static int dt__stage_vocab_tensor(const dt__stage *st, int i)
{
    return i == 0 || (!st->cfg.tie_embeddings && i == st->whole.count - 1);
}

/* The stage's tensors in the whole model's order, with their whole indexes,
 * and the whole-model offset of the first (from the whole layout's rule:
 * 16-aligned offsets in order, so a range rebased keeps its alignment). */
static dt_status dt__stage_layout_make(dt__stage *st)
{
    const int64_t C = st->cfg.hidden_size, V = st->vocab.nv;
    dt_paramset *w = &st->whole;
    dt_status s = DT_OK;
    /* the whole layout (names and shapes only matter), to find the range */
    DT_CHECK_GOTO(dt__gpt_whole_layout(&st->cfg, w), s, done);
    int lo = 0, hi = w->count, n;
    if (!st->first) dt__gpt_layer_tensors(&st->cfg, st->l0, &lo, &n);
    if (!st->last) dt__gpt_layer_tensors(&st->cfg, st->l1, &hi, &n);
    const int copy = dt__stage_has_tied_copy(st);
    st->whole_index = calloc((size_t)(hi - lo + copy), sizeof *st->whole_index);
    st->sharded = calloc((size_t)(hi - lo + copy), 1);
    if (!st->whole_index || !st->sharded) {
        s = DT_FAIL(DT_ERR_NOMEM, "pipeline stage: out of memory");
        goto done;
    }
    st->offset = w->info[lo].offset;
    for (int i = lo; i < hi;) {
        const int l = dt__gpt_tensor_layer(&st->cfg, i);
        if (st->t > 1 && l >= 0 && l < st->cfg.num_layers) { /* a block's shard on this tensor-parallel rank */
            DT_CHECK_GOTO(dt__tp_block_layout(&st->cfg, st->t, l, &st->layout), s, done);
            /* 1: column/row-parallel shard; 2: replicated, and the block's first tensor */
            for (int k = 0; k < DT__BLOCK_NTENSORS; k++) {
                st->whole_index[i - lo + k] = i + k;
                st->sharded[i - lo + k] = k == 0 ? 2 : (uint8_t)dt__tp_sharded[k];
            }
            i += DT__BLOCK_NTENSORS;
            continue;
        }
        const dt_param_info *p = &w->info[i];
        const int rows = st->vocab.t > 1 && dt__stage_vocab_tensor(st, i);
        int64_t shape[2] = {rows ? V : p->shape[0], p->ndim > 1 ? p->shape[1] : 0};
        DT_CHECK_GOTO(dt_paramset_add(&st->layout, p->name, p->ndim, shape, p->decay), s, done);
        st->whole_index[i - lo] = i;
        if (rows) st->sharded[i - lo] = 4;
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

/* The runner's span hook: only its recomputations are reported (a
 * pipeline traces its ops, not its layers). */
static void dt__stage_span(void *ctx, int layer, char pass, int64_t t0)
{
    const dt__stage *st = ctx;
    if (pass == 'R' && st->recompute_hook) st->recompute_hook(st->recompute_ctx, layer, t0, dt_time_ns());
}

dt_status dt__stage_create(const dt_gpt_config *cfg, dt_backend *be, int l0, int l1, int first, int last, int slots,
                           int B, int T, dt__tp *tp, dt__cp *cp, dt__stage **out)
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
    st->vocab = tp && tp->vocab_parallel && st->t > 1 ? dt__tp_vocab(tp, cfg->vocab_size)
                                                      : (dt__vocab){.V = cfg->vocab_size, .t = 1, .nv = cfg->vocab_size};
    dt_paramset_init(&st->layout);
    dt_paramset_init(&st->whole);
    if (st->t > 1) DT_CHECK_GOTO(dt__tp_check(cfg, st->t), s, fail);
    if (st->vocab.nv < 1) {
        s = DT_FAIL(DT_ERR_INVALID, "--tensor-model-parallel-size %d: a vocabulary of %d has fewer rows than ranks "
                                    "(add --no-vocab-parallel)", st->t, cfg->vocab_size);
        goto fail;
    }
    DT_CHECK_GOTO(dt__stage_layout_make(st), s, fail);
    DT_CHECK_GOTO(dt__stage_layers_make(st), s, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&st->params, be, st->layout.numel * sizeof(float)), s, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&st->grads, be, st->layout.numel * sizeof(float)), s, fail);
    const dt__runner_config rc = {.cfg = cfg,
                                  .be = be,
                                  .l0 = l0,
                                  .l1 = l1,
                                  .first = first,
                                  .last = last,
                                  .slots = slots,
                                  .B = B,
                                  .T = T,
                                  .shared = 0,
                                  .t = st->t,
                                  .sp = st->t > 1 && tp->sp,
                                  .ops = st->t > 1 ? (tp->sp ? &dt__sp_block_ops : &dt__tp_block_ops) : NULL,
                                  .ops_ctx = tp,
                                  .vocab = &st->vocab,
                                  .cp = cp ? dt__cp_pos(cp) : DT__CPOS_WHOLE,
                                  .attn = cp ? dt__cp_attn(cp) : NULL};
    DT_CHECK_GOTO(dt__runner_create(&rc, &st->run), s, fail);
    static const dt__runner_hooks hooks = {.span = dt__stage_span};
    dt__runner_set_hooks(st->run, &hooks, st);
    dt__stage_bind(st, st->grads.data, dt__runner_g(st->run));
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
    dt__runner_free(st->run);
    dt__stage_forget_shadow(st);
    dt_buffer_free(&st->wq);
    dt_buffer_free(&st->whalf);
    dt_buffer_free(&st->gmb);
    dt_buffer_free(&st->params);
    dt_buffer_free(&st->grads);
    dt_paramset_free(&st->layout);
    free(st->whole_index);
    free(st->sharded);
    dt_buffer_free(&st->wemb);
    dt_buffer_free(&st->gtied);
    free(st->lay_first);
    free(st->lay_off);
    free(st->lay_len);
    dt_paramset_free(&st->whole);
    free(st);
}

dt_status dt__stage_init_weights(dt__stage *st, const dt_gpt_init *init)
{
    st->epoch++;
    const size_t n = st->layout.numel;
    float *host = calloc(n ? n : 1, sizeof *host);
    if (!host) return DT_FAIL(DT_ERR_NOMEM, "pipeline stage: out of memory for %zu initial weights", n);
    dt_status s = DT_OK;
    if (st->t == 1) {
        for (int i = 0; i < st->layout.count && s == DT_OK; i++)
            s = dt__gpt_init_tensor(&st->cfg, &st->layout.info[i], st->whole_index[i], init,
                                    host + st->layout.info[i].offset);
    } else { /* the whole tensors, then this rank's shards of the blocks' */
        float *full[DT__BLOCK_NTENSORS] = {0};
        for (int i = 0; i < st->layout.count && s == DT_OK;) {
            const dt_param_info *wi = &st->whole.info[st->whole_index[i]];
            if (st->sharded[i] != 2 && st->vocab.t > 1 && (st->sharded[i] == 4 || st->sharded[i] == 3)) {
                /* the rank's rows of wte (or its tied copy) or the LM head */
                float *whole = malloc(wi->numel * sizeof *whole);
                if (!whole) {
                    s = DT_FAIL(DT_ERR_NOMEM, "pipeline stage: out of memory for initial weights");
                    break;
                }
                s = dt__gpt_init_tensor(&st->cfg, wi, st->whole_index[i], init, whole);
                if (s == DT_OK)
                    memcpy(host + st->layout.info[i].offset, whole + (size_t)st->vocab.v0 * st->cfg.hidden_size,
                           st->layout.info[i].numel * sizeof *whole);
                free(whole);
                i++;
                continue;
            }
            if (st->sharded[i] != 2) { /* replicated: embedding, head */
                s = dt__gpt_init_tensor(&st->cfg, wi, st->whole_index[i], init, host + st->layout.info[i].offset);
                i++;
                continue;
            }
            for (int k = 0; k < DT__BLOCK_NTENSORS; k++) { /* a block: ln1.w .. fcproj.b */
                const dt_param_info *pk = &st->whole.info[st->whole_index[i + k]];
                full[k] = malloc(pk->numel * sizeof(float));
                if (!full[k]) s = DT_FAIL(DT_ERR_NOMEM, "pipeline stage: out of memory for initial weights");
                else if (s == DT_OK) s = dt__gpt_init_tensor(&st->cfg, pk, st->whole_index[i + k], init, full[k]);
            }
            if (s == DT_OK)
                dt__tp_block_shard(&st->cfg, st->t, st->tr, (const float *const *)full, &st->layout, i, host);
            for (int k = 0; k < DT__BLOCK_NTENSORS; k++) free(full[k]), full[k] = NULL;
            i += DT__BLOCK_NTENSORS;
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
float *dt__stage_input(dt__stage *st, int slot) { return dt__runner_input(st->run, slot); }
float *dt__stage_dout(dt__stage *st) { return dt__runner_dout(st->run); }
const float *dt__stage_dres(const dt__stage *st) { return dt__runner_dres(st->run); }
size_t dt__stage_activation_bytes(const dt__stage *st) { return dt__runner_activation_bytes(st->run); }
void dt__stage_bytes(const dt__stage *st, size_t *compute, size_t *mb_grads, size_t *working)
{
    *compute = st->wq.bytes + st->whalf.bytes;
    *mb_grads = st->gmb.bytes;
    *working = st->wemb.bytes + st->gtied.bytes + dt__runner_round_bytes(st->run);
}
size_t dt__stage_peak_activation_bytes(const dt__stage *st) { return dt__runner_peak_activation_bytes(st->run); }
void dt__stage_reset_peak(dt__stage *st) { dt__runner_reset_peak(st->run); }

/* The gradients each micro-batch writes: gmb under mixed precision (rounded
 * before they accumulate), else the gradient buffer itself. */
static void dt__stage_bind_grads(dt__stage *st)
{
    dt__stage_bind(st, st->precision != DT_F32 ? (float *)st->gmb.data : (float *)st->grads.data,
                   dt__runner_g(st->run));
}

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
    dt__stage_bind_grads(st);
    st->wq_src = NULL;
    st->epoch++;
    return DT_OK;
}

dt_status dt__stage_zero_grad(dt__stage *st)
{
    return st->be->memset_zero(st->be, st->grads.data, st->layout.numel * sizeof(float));
}

void dt__stage_set_fp8(dt__stage *st, dt__fp8 *f) { dt__runner_set_fp8(st->run, f); }

dt_status dt__stage_set_precision(dt__stage *st, dt_dtype dtype)
{
    if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "pipeline stage precision %s: expected f32, f16 or bf16", dt_dtype_name(dtype));
    if (st->zs) return DT_FAIL(DT_ERR_INVALID, "pipeline stage: precision is set before ZeRO shards the stage");
    const size_t n = st->layout.numel;
    DT_CHECK(dt__runner_set_precision(st->run, dtype, n)); /* refused while a slot is in flight */
    dt__stage_forget_shadow(st);
    dt_buffer_free(&st->wq);
    dt_buffer_free(&st->whalf);
    dt_buffer_free(&st->gmb);
    st->wq_src = NULL;
    st->precision = dtype;
    if (st->be->set_gemm_inputs) DT_CHECK(st->be->set_gemm_inputs(st->be, dtype));
    if (dtype != DT_F32) {
        DT_CHECK(dt_buffer_alloc(&st->wq, st->be, n * sizeof(float)));
        DT_CHECK(dt_buffer_alloc(&st->gmb, st->be, n * sizeof(float)));
    }
    dt__stage_bind_grads(st);
    if (dtype == DT_F32 || !st->be->set_gemm_shadow) return DT_OK;
    DT_CHECK(dt_buffer_alloc(&st->whalf, st->be, n * dt_dtype_size(dtype)));
    return st->be->set_gemm_shadow(st->be, st->wq.data, n, st->whalf.data, dtype);
}

void dt__stage_weights_changed(dt__stage *st) { st->epoch++; }

/* Bind the weights of this call: w (NULL: the stage's own); under mixed
 * precision their values rounded to the 16-bit format (the compute copy of
 * the FP32 masters), made again only when w differs from the last call's
 * or the weights changed since (gpipe/1f1b: once per step instead of once
 * per forward and per backward). */
static dt_status dt__stage_use_weights(dt__stage *st, const float *w)
{
    if (st->zs && dt__zs_stage(st->zs) == 3) return DT_OK; /* the bind hook gathers each layer's */
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
                DT_CHECK(dt__round(st->be, dt__runner_rnd(st->run), st->wq.data, n));
            }
            st->wq_src = src;
            st->wq_epoch = st->epoch;
        }
        src = st->wq.data;
    }
    dt__stage_bind(st, (float *)src, dt__runner_w(st->run));
    return DT_OK;
}

dt_status dt__stage_set_recompute(dt__stage *st, dt_recompute mode, int num_layers)
{
    return dt__runner_set_recompute(st->run, mode, num_layers);
}

dt_status dt__stage_set_split(dt__stage *st, int on)
{
    DT_CHECK(dt__runner_set_split(st->run, on));
    st->split = on != 0;
    return DT_OK;
}

void dt__stage_set_recompute_hook(dt__stage *st, dt__stage_recompute_fn fn, void *ctx)
{
    st->recompute_hook = fn;
    st->recompute_ctx = ctx;
}

/* ---- ZeRO-2/3 ---------------------------------------------------------------- */

/* The runner's bind hook under a sharder: stage 3 gathers layer l's
 * weights before it computes (the embedding's backward reads none), the
 * next layer's behind it with prefetch (the one above in a forward, below
 * in a backward; none in a recomputation); a whole backward ('B') and a W
 * ('W') bind the layer's gradient views into its unit's buffer (a split
 * B, 'b', writes no parameter gradient). */
static dt_status dt__stage_zs_bind(void *ctx, int l, char pass)
{
    dt__stage *st = ctx;
    const int k = dt__stage_layer_index(st, l), i = st->zs_first + k;
    const int back = pass == 'B' || pass == 'b' || pass == 'W';
    if (st->wemb.data && l < 0 && pass == 'F') { /* tied: kept apart for the head */
        DT_CHECK(dt__zs_gather_range(st->zs, i, st->wemb.data));
        dt__stage_bind_layer(st, l, st->wemb.data, st->lay_off[k], dt__runner_w(st->run));
    } else if (dt__zs_stage(st->zs) == 3 && !(back && l < 0)) {
        int next = -1;
        if (pass == 'F' && k + 1 < st->nlay) next = i + 1;
        if (back && k > st->first) next = i - 1; /* a block below (not the embedding) */
        float *base;
        DT_CHECK(dt__zs_weights(st->zs, i, next, &base));
        dt__stage_bind_layer(st, l, base, st->lay_off[k], dt__runner_w(st->run));
    }
    if (pass != 'B' && pass != 'W') return DT_OK;
    float *base;
    size_t origin;
    DT_CHECK(dt__zs_grads_open(st->zs, i, &base, &origin));
    dt__runner_views *g = dt__runner_g(st->run);
    const size_t vc = (size_t)st->vocab.nv * st->cfg.hidden_size;
    if (st->gtied.data && l == st->cfg.num_layers) { /* the head's wte gradient waits in gtied */
        DT_CHECK(st->be->memset_zero(st->be, st->gtied.data, vc * sizeof(float)));
        g->wte = st->gtied.data;
    }
    dt__stage_bind_layer(st, l, base, origin - st->zs_origin, g);
    if (st->gtied.data && l < 0) /* the embedding's starts from the head's, as one process adds both in turn */
        DT_CHECK(st->be->copy(st->be, g->wte, st->gtied.data, vc * sizeof(float), DT_COPY_D2D));
    return DT_OK;
}

/* The runner's done hook: the sharder reduce-scatters the layer's unit
 * when the layer closes it. */
static dt_status dt__stage_zs_done(void *ctx, int l)
{
    dt__stage *st = ctx;
    return dt__zs_grads_done(st->zs, st->zs_first + dt__stage_layer_index(st, l), dt__runner_rnd(st->run));
}

dt_status dt__stage_set_sharder(dt__stage *st, dt__zs *zs, int first, size_t origin)
{
    if (st->zs) return DT_FAIL(DT_ERR_INVALID, "pipeline stage: already sharded");
    st->zs = zs;
    st->zs_first = first;
    st->zs_origin = origin;
    static const dt__runner_hooks hooks = {.bind = dt__stage_zs_bind, .done = dt__stage_zs_done, .span = dt__stage_span};
    dt__runner_set_hooks(st->run, &hooks, st);
    if (st->first && st->last && st->cfg.tie_embeddings) {
        const size_t vc = (size_t)st->vocab.nv * st->cfg.hidden_size;
        DT_CHECK(dt_buffer_alloc(&st->gtied, st->be, vc * sizeof(float)));
        if (dt__zs_stage(zs) == 3) DT_CHECK(dt_buffer_alloc(&st->wemb, st->be, st->lay_len[0] * sizeof(float)));
    }
    dt_buffer_free(&st->gmb); /* no whole gradient: a unit's at a time */
    dt_buffer_free(&st->grads);
    st->grads = (dt_buffer){0};
    if (dt__zs_stage(zs) == 3) { /* no whole weights either */
        dt__stage_forget_shadow(st);
        dt_buffer_free(&st->wq);
        dt_buffer_free(&st->whalf);
        dt_buffer_free(&st->params);
        st->params = (dt_buffer){0};
        st->wq_src = NULL;
    }
    return DT_OK;
}

/* ---- forward and backward -------------------------------------------------- */

dt_status dt__stage_forward(dt__stage *st, int slot, const float *w, const int32_t *tokens, const int32_t *targets,
                            const float **out, float *loss, int *n_counted)
{
    DT_CHECK(dt__stage_use_weights(st, w));
    return dt__runner_forward(st->run, slot, tokens, targets, st->B, st->T, out, loss, n_counted);
}

dt_status dt__stage_forward_check(dt__stage *st, int slot, const int32_t *tokens, const int32_t *targets,
                                  const float **out, int *pos)
{
    DT_CHECK(dt__stage_use_weights(st, NULL));
    return dt__runner_forward_check(st->run, slot, tokens, targets, st->B, st->T, out, pos);
}

/* Under mixed precision a micro-batch's parameter gradients go to gmb,
 * rounded before they accumulate in FP32 (begin: zero it; end: round, add). */
static dt_status dt__stage_grads_begin(dt__stage *st)
{
    if (st->precision == DT_F32 || st->zs) return DT_OK; /* the sharder rounds each unit's */
    return st->be->memset_zero(st->be, st->gmb.data, st->layout.numel * sizeof(float));
}

static dt_status dt__stage_grads_end(dt__stage *st)
{
    if (st->precision == DT_F32 || st->zs) return DT_OK;
    DT_CHECK(dt__round(st->be, dt__runner_rnd(st->run), st->gmb.data, st->layout.numel));
    return st->be->axpy(st->be, st->grads.data, 1.0f, st->gmb.data, st->layout.numel);
}

dt_status dt__stage_backward(dt__stage *st, int slot, const float *w, float dloss, const float **dx)
{
    DT_CHECK(dt__stage_use_weights(st, w));
    DT_CHECK(dt__stage_grads_begin(st));
    DT_CHECK(dt__runner_backward(st->run, slot, dloss, dx));
    return dt__stage_grads_end(st);
}

dt_status dt__stage_backward_b(dt__stage *st, int slot, const float *w, float dloss, const float **dx)
{
    DT_CHECK(dt__stage_use_weights(st, w));
    return dt__runner_backward_b(st->run, slot, dloss, dx);
}

dt_status dt__stage_backward_w(dt__stage *st, int slot, const float *w)
{
    DT_CHECK(dt__stage_use_weights(st, w));
    DT_CHECK(dt__stage_grads_begin(st));
    DT_CHECK(dt__runner_backward_w(st->run, slot));
    return dt__stage_grads_end(st);
}

dt_status dt__stage_release(dt__stage *st, int slot) { return dt__runner_release(st->run, slot); }
dt_status dt__stage_output(dt__stage *st, int slot, const float **out) { return dt__runner_output(st->run, slot, out); }

dt_status dt__stage_position_stats(dt__stage *st, int slot, float *losses, uint8_t *correct)
{
    return dt__runner_position_stats(st->run, slot, losses, correct);
}

dt_status dt__stage_grad_sumsq(dt__stage *st, size_t lo, size_t hi, double *sharded, double *replicated)
{
    return dt__stage_grad_sumsq_of(st, (const float *)st->grads.data + lo, lo, hi, sharded, replicated);
}

dt_status dt__stage_grad_sumsq_of(dt__stage *st, const float *g, size_t lo, size_t hi, double *sharded,
                                  double *replicated)
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
        spans[i] = (dt_span){a < b ? a - lo : 0, a < b && st->sharded[i] != 3 ? b - a : 0};
    }
    /* one span_stats call: one wait for a GPU; grads are only read */
    dt_status rc = st->be->span_stats(st->be, (float *)g, spans, n, 1.0f, NULL, sq);
    for (int i = 0; rc == DT_OK && i < n; i++) {
        if (!spans[i].n) continue;
        if (st->sharded[i] == 1 || st->sharded[i] == 4) *sharded += sq[i];
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
            size_t off[DT__BLOCK_NTENSORS];
            for (int k = 0; k < DT__BLOCK_NTENSORS; k++) off[k] = st->whole.info[st->whole_index[i + k]].offset;
            for (int k = 0; k < DT__BLOCK_NTENSORS && st->tr == 0; k++) {
                if (st->sharded[i + k] == 1) continue;
                const dt_param_info *p = &st->layout.info[i + k];
                for (size_t j = 0; j < p->numel; j++) sum += (double)w[p->offset + j] * dt__probe_u(off[k] + j);
            }
            sum += dt__tp_block_probe(&st->cfg, st->t, st->tr, &st->layout, i, w, off);
            i += DT__BLOCK_NTENSORS;
            continue;
        }
        const dt_param_info *p = &st->layout.info[i];
        size_t off = st->whole.info[st->whole_index[i]].offset;
        if (st->sharded[i] == 4) /* the rank's rows, counted by every rank */
            for (size_t j = 0, o = off + (size_t)st->vocab.v0 * st->cfg.hidden_size; j < p->numel; j++)
                sum += (double)w[p->offset + j] * dt__probe_u(o + j);
        else if (st->tr == 0 && st->sharded[i] != 3) /* the tied copy: the first stage counts wte */
            for (size_t j = 0; j < p->numel; j++) sum += (double)w[p->offset + j] * dt__probe_u(off + j);
        i++;
    }
    free(w);
    *out = sum;
    return s;
}
