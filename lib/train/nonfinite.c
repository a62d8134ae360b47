/* nonfinite.c: what happens when an FP32 step's loss or gradient norm is
 * not finite (the failure path only): find the first bad layer (the GPT's
 * forward re-run layer by layer on scratch memory, else the gradients in
 * backward order, else the weights), then fail naming it, or with
 * --skip-nonfinite mark the step skipped.
 *
 * Invariants: the search never changes the model, its gradients or the
 * data position; fp16 runs never come here (their loss scaler skips
 * overflowing steps), nor pipeline or parameter-server runs (they update
 * before the check), which get the plain message. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_layers.h"
#include "trainer_internal.h"

/* The layer a tensor of the layout belongs to: the GPT's "h.K.*" -> "h.K",
 * wte/wpe -> "embedding", lnf.*, lm_head.* -> "head"; any other model's
 * tensor: its name up to the last '.'. */
static void dt__nf_layer_of(const char *tensor, char *out, size_t cap)
{
    if (!strcmp(tensor, "wte") || !strcmp(tensor, "wpe")) {
        snprintf(out, cap, "embedding");
    } else if (!strncmp(tensor, "lnf.", 4) || !strncmp(tensor, "lm_head.", 8)) {
        snprintf(out, cap, "head");
    } else {
        const char *dot = strrchr(tensor, '.');
        snprintf(out, cap, "%.*s", dot ? (int)(dot - tensor) : (int)strlen(tensor), tensor);
    }
}

/* *bad = 1 if x(n), backend memory, holds a NaN or inf (unscale by 1: no change). */
static dt_status dt__nf_any(dt_backend *be, float *x, size_t n, int *bad)
{
    *bad = 0;
    return n ? be->unscale_check(be, x, 1.0f, n, bad) : DT_OK;
}

/* *bad = 1 if a row's first `cols` of x(rows, ld) hold a NaN or inf; the
 * padding beyond cols (the logits' row stride) is not looked at. One
 * span_stats call, a span a row (multiplying by 1: no change). */
static dt_status dt__nf_rows(dt_backend *be, float *x, size_t rows, size_t cols, size_t ld, int *bad)
{
    *bad = 0;
    if (ld == cols) return dt__nf_any(be, x, rows * cols, bad);
    dt_span *sp = malloc(rows * sizeof *sp);
    int *nf = malloc(rows * sizeof *nf);
    dt_status st = sp && nf ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "nonfinite: out of memory for %zu rows", rows);
    for (size_t i = 0; st == DT_OK && i < rows; i++) sp[i] = (dt_span){i * ld, cols};
    if (st == DT_OK) st = be->span_stats(be, x, sp, (int)rows, 1.0f, nf, NULL);
    for (size_t i = 0; st == DT_OK && i < rows; i++) *bad |= nf[i];
    free(sp);
    free(nf);
    return st;
}

/* The GPT's forward again, layer by layer, on this step's micro-batches,
 * on scratch memory of its own (the model is not touched): the first
 * layer whose output holds a NaN or inf, in where (empty when none). FP32
 * whole models only (the caller checks). */
dt_status dt__gpt_locate_forward(dt_trainer *tr, char *where, size_t cap)
{
    where[0] = 0;
    if (!tr->gpt.model) return DT_OK; /* split across stages: no whole model here */
    const dt_gpt_config *c = dt_gpt_config_of(tr->gpt.model);
    const dt_paramset *L = dt_gpt_layout(tr->gpt.model);
    dt_backend *be = tr->be;
    const int B = tr->B, T = tr->T, NL = c->num_layers, N = B * T;
    const int tied = c->tie_embeddings;
    if (L->count != 2 + 12 * NL + 3 - tied) return DT_OK; /* not the layout below */
    float *w = dt_gpt_params(tr->gpt.model);
    const dt_param_info *in = L->info;
    const float *wte = w + in[0].offset, *wpe = w + in[1].offset;
    dt__block_params *bp = calloc((size_t)(NL ? NL : 1), sizeof *bp);
    dt__block_acts *acts = calloc((size_t)(NL ? NL : 1), sizeof *acts);
    dt_buffer arena_buf = {0}, io = {0};
    dt_status st = DT_OK;
    if (!bp || !acts) {
        st = DT_FAIL(DT_ERR_NOMEM, "non-finite check: out of memory");
        goto done;
    }
    int k = 2;
    for (int l = 0; l < NL; l++) {
        float **f[12] = {&bp[l].ln1w, &bp[l].ln1b, &bp[l].qkvw, &bp[l].qkvb, &bp[l].attprojw, &bp[l].attprojb,
                         &bp[l].ln2w, &bp[l].ln2b, &bp[l].fcw,  &bp[l].fcb,  &bp[l].fcprojw,  &bp[l].fcprojb};
        for (int i = 0; i < 12; i++) *f[i] = w + in[k++].offset;
    }
    const dt__head_params hp = {w + in[k].offset, w + in[k + 1].offset, tied ? (float *)wte : w + in[k + 2].offset};
    const size_t floats = dt__embed_act_floats(c, B, T) + (size_t)NL * dt__block_act_floats(c, B, T, 1) +
                          dt__head_act_floats(be, c, B, T) + 256 * (size_t)(NL + 3); /* + the arena's rounding */
    DT_CHECK_GOTO(dt_buffer_alloc(&arena_buf, be, floats * sizeof(float)), st, done);
    /* tokens, targets (int32), losses (float), correct (bytes) */
    DT_CHECK_GOTO(dt_buffer_alloc(&io, be, (size_t)N * 13 + 64), st, done);
    int32_t *d_tokens = io.data, *d_targets = d_tokens + N;
    float *losses = (float *)(d_targets + N);
    uint8_t *correct = (uint8_t *)(losses + N);
    dt__arena a = {.base = arena_buf.data, .capacity = floats};
    for (int m = 0; m < tr->n_micro && !where[0]; m++) {
        uint64_t index = dt__micro_index(tr, tr->dp_rank * tr->n_micro + m);
        DT_CHECK_GOTO(
            dt_data_batch(tr->gpt.data, DT_SPLIT_TRAIN, index, B, T, tr->gpt.tokens, tr->gpt.targets, NULL, NULL), st,
            done);
        DT_CHECK_GOTO(be->copy(be, d_tokens, tr->gpt.tokens, (size_t)N * sizeof(int32_t), DT_COPY_H2D), st, done);
        DT_CHECK_GOTO(be->copy(be, d_targets, tr->gpt.targets, (size_t)N * sizeof(int32_t), DT_COPY_H2D), st, done);
        dt__arena_reset(&a);
        float *x = NULL;
        int bad = 0;
        DT_CHECK_GOTO(dt__embed_forward(be, c, wte, wpe, d_tokens, &a, &x, B, T, NULL), st, done);
        DT_CHECK_GOTO(dt__nf_any(be, x, (size_t)N * c->hidden_size, &bad), st, done);
        if (bad) {
            snprintf(where, cap, "forward: the output of layer embedding is the first non-finite (micro-batch %d)", m);
            break;
        }
        for (int l = 0; l < NL && !bad; l++) {
            DT_CHECK_GOTO(dt__block_acts_alloc(&a, c, B, T, 1, &acts[l]), st, done);
            DT_CHECK_GOTO(dt__block_forward(be, c, &bp[l], &acts[l], x, B, T, NULL), st, done);
            x = acts[l].out;
            DT_CHECK_GOTO(dt__nf_any(be, x, (size_t)N * c->hidden_size, &bad), st, done);
            if (bad)
                snprintf(where, cap,
                         "forward: the output of layer h.%d (block %d of %d) is the first non-finite "
                         "(micro-batch %d)",
                         l, l, NL, m);
        }
        if (bad) break;
        dt__head_acts ha;
        DT_CHECK_GOTO(dt__head_forward(be, c, &hp, &a, &ha, x, d_targets, losses, correct, B, T, NULL), st, done);
        DT_CHECK_GOTO(dt__nf_rows(be, ha.logits, (size_t)N, (size_t)c->vocab_size, (size_t)ha.ld, &bad), st, done);
        if (!bad) DT_CHECK_GOTO(dt__nf_any(be, losses, (size_t)N, &bad), st, done);
        if (bad)
            snprintf(where, cap,
                     "forward: the output of layer head (logits or losses) is the first non-finite "
                     "(micro-batch %d)",
                     m);
    }
done:
    dt_buffer_free(&io);
    dt_buffer_free(&arena_buf);
    free(bp);
    free(acts);
    return st;
}

/* Where the step went non-finite, into tr->nf.where: the forward re-run
 * (a whole FP32 GPT), else the gradients in backward order (the layout's
 * tensors from the last), else the weights. */
static dt_status dt__nf_locate(dt_trainer *tr)
{
    char *where = tr->nf.where;
    const size_t cap = sizeof tr->nf.where;
    where[0] = 0;
    if (tr->kind->locate_forward && tr->cfg.tensor_size <= 1) DT_CHECK(tr->kind->locate_forward(tr, where, cap));
    if (where[0]) return DT_OK;
    const dt_paramset *L = tr->kind->layout(tr);
    float *g = tr->kind->grads(tr), *w = tr->kind->params(tr);
    char layer[DT_NAME_MAX];
    for (int i = L->count - 1; i >= 0; i--) {
        int bad = 0;
        DT_CHECK(dt__nf_any(tr->be, g + L->info[i].offset, L->info[i].numel, &bad));
        if (!bad) continue;
        dt__nf_layer_of(L->info[i].name, layer, sizeof layer);
        snprintf(where, cap, "backward: the gradient of layer %s (%s) is the first non-finite in backward order", layer,
                 L->info[i].name);
        return DT_OK;
    }
    for (int i = 0; i < L->count; i++) {
        int bad = 0;
        DT_CHECK(dt__nf_any(tr->be, w + L->info[i].offset, L->info[i].numel, &bad));
        if (!bad) continue;
        dt__nf_layer_of(L->info[i].name, layer, sizeof layer);
        snprintf(where, cap, "weights: layer %s (%s) holds the first non-finite weight", layer, L->info[i].name);
        return DT_OK;
    }
    snprintf(where, cap, "no layer's output, gradient or weight is non-finite on a re-check");
    return DT_OK;
}

/* A non-finite loss or gradient norm (what: "training loss", "gradient
 * norm") in iteration tr->iter. FP32 without a parameter server or a
 * pipeline: the first bad layer is found (dt__nf_locate), then the step
 * fails naming it, or with --skip-nonfinite is marked skipped (nf_skip).
 * Otherwise (fp16 has its loss scaler) the message is the plain one. */
dt_status dt__nonfinite(dt_trainer *tr, const char *what, double v)
{
    if (tr->cfg.precision != DT_F32 || tr->strategy == DT__STRATEGY_PIPE || tr->strategy == DT__STRATEGY_PS)
        return DT_FAIL(DT_ERR_NUMERIC, "iteration %lld: %s is %g (diverged; try a lower --lr or --clip-grad)",
                       (long long)tr->iter + 1, what, v);
    DT_CHECK(dt__nf_locate(tr));
    if (tr->cfg.skip_nonfinite) {
        tr->nf.skip = 1;
        tr->nf.skipped++;
        return DT_OK;
    }
    return DT_FAIL(DT_ERR_NUMERIC,
                   "iteration %lld: %s is %g; %s (diverged; try a lower --lr or --clip-grad, or --skip-nonfinite)",
                   (long long)tr->iter + 1, what, v, tr->nf.where);
}

dt_status dt__loss_check(dt_trainer *tr, double loss)
{
    if (isfinite((float)loss)) return DT_OK;
    return dt__nonfinite(tr, "training loss", loss);
}
