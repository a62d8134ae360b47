/* nonfinite.c: what happens when an FP32 step's loss or gradient norm is
 * not finite (the failure path only): find the first bad layer (the GPT's
 * forward re-run layer by layer on scratch memory, else the gradients in
 * backward order, else the weights), then fail naming it, or with
 * --skip-nonfinite mark the step skipped.
 *
 * Pipeline and tensor parallelism (gpipe/1f1b) search the same way inside
 * the step, when the whole model's gradient norm turned out non-finite and
 * no rank updated (dt__nf_pipe_locate): each rank looks at its stage's or
 * shard's layers, and one allreduce over all ranks picks the earliest, so
 * every rank names the same layer (whole-model numbering).
 *
 * fp16 with loss scaling: a non-finite loss is an overflow (dt__loss_overflow):
 * the update skips the step and the scaler backs off, as for an inf/NaN
 * gradient; after the skipped step the same forward search, in fp16, says
 * where the activations left the range (dt__loss_overflow_locate). At the
 * minimum scale, --min-loss-scale-patience overflowing steps in a row end
 * the run (dt__min_scale_check).
 *
 * Invariants: the search never changes the model, its gradients or the
 * data position; fp16 gradient overflows never come here (their loss
 * scaler skips overflowing steps), nor parameter-server, pipedream or ZeRO
 * runs (they update before the check), which get the plain message. */
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

/* The message of a forward whose layer pos (0 the embedding, 1 + l block
 * l, num_layers + 1 the head) is the first with a non-finite output. */
static void dt__nf_forward_where(char *where, size_t cap, int pos, int num_layers, int mb)
{
    if (pos == 0)
        snprintf(where, cap, "forward: the output of layer embedding is the first non-finite (micro-batch %d)", mb);
    else if (pos <= num_layers)
        snprintf(where, cap,
                 "forward: the output of layer h.%d (block %d of %d) is the first non-finite (micro-batch %d)", pos - 1,
                 pos - 1, num_layers, mb);
    else
        snprintf(where, cap,
                 "forward: the output of layer head (logits or losses) is the first non-finite (micro-batch %d)", mb);
}

/* The GPT's forward again (dt__gpt_forward_check), on this step's
 * micro-batches, after its backward spent the activations (the weights
 * and gradients are not touched): the first layer whose output holds a
 * NaN or inf, in where (empty when none). Whole models only (the caller
 * checks), in the model's precision: under fp16/bf16 with its rounded
 * weights and storage rounding, so the re-run computes what the step did. */
dt_status dt__gpt_locate_forward(dt_trainer *tr, char *where, size_t cap)
{
    where[0] = 0;
    if (!tr->gpt.model) return DT_OK; /* split across stages: no whole model here */
    const int NL = dt_gpt_config_of(tr->gpt.model)->num_layers;
    for (int m = 0; m < tr->n_micro && !where[0]; m++) {
        uint64_t index = dt__micro_index(tr, tr->dp_rank * tr->n_micro + m);
        DT_CHECK(dt_data_batch(tr->gpt.data, DT_SPLIT_TRAIN, index, tr->B, tr->T, tr->gpt.tokens, tr->gpt.targets,
                               NULL, NULL));
        int pos = -1;
        DT_CHECK(dt__gpt_forward_check(tr->gpt.model, tr->gpt.tokens, tr->gpt.targets, tr->B, tr->T, &pos));
        if (pos >= 0) dt__nf_forward_where(where, cap, pos, NL, m);
    }
    return DT_OK;
}

static void dt__nf_grad_where(char *where, size_t cap, const char *tensor)
{
    char layer[DT_NAME_MAX];
    dt__nf_layer_of(tensor, layer, sizeof layer);
    snprintf(where, cap, "backward: the gradient of layer %s (%s) is the first non-finite in backward order", layer,
             tensor);
}

static void dt__nf_weight_where(char *where, size_t cap, const char *tensor)
{
    char layer[DT_NAME_MAX];
    dt__nf_layer_of(tensor, layer, sizeof layer);
    snprintf(where, cap, "weights: layer %s (%s) holds the first non-finite weight", layer, tensor);
}

#define DT__NF_NOWHERE "no layer's output, gradient or weight is non-finite on a re-check"

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
    if (!g || !w) { /* ZeRO-2/3: no whole buffers to look into */
        snprintf(where, cap, "%s", DT__NF_NOWHERE);
        return DT_OK;
    }
    for (int i = L->count - 1; i >= 0; i--) {
        int bad = 0;
        DT_CHECK(dt__nf_any(tr->be, g + L->info[i].offset, L->info[i].numel, &bad));
        if (!bad) continue;
        dt__nf_grad_where(where, cap, L->info[i].name);
        return DT_OK;
    }
    for (int i = 0; i < L->count; i++) {
        int bad = 0;
        DT_CHECK(dt__nf_any(tr->be, w + L->info[i].offset, L->info[i].numel, &bad));
        if (!bad) continue;
        dt__nf_weight_where(where, cap, L->info[i].name);
        return DT_OK;
    }
    snprintf(where, cap, DT__NF_NOWHERE);
    return DT_OK;
}

/* ---- pipeline and tensor parallelism ---------------------------------------- */

/* The keys each rank offers, the smallest over all ranks winning: the
 * forward's (micro-batch of the step, then layer), the gradients' in
 * backward order (the highest whole-model tensor index first), the
 * weights' in model order. DT__NF_NONE: none on this rank. */
enum { DT__NF_FWD, DT__NF_GRAD, DT__NF_WEIGHT, DT__NF_KEYS };
#define DT__NF_NONE 16777216.0f /* 2^24: above every key, and every key is exact in a float */

/* This stage's (tensor shard's) tensors: keys of its gradients and weights holding a NaN or inf. */
static dt_status dt__nf_pipe_tensors(dt_trainer *tr, float key[DT__NF_KEYS])
{
    dt__pipe *pp = tr->pipe.rt;
    const dt_paramset *L = dt__pipe_layout(pp);
    const int *whole = dt__pipe_whole_index(pp);
    float *g = dt__pipe_grads(pp), *w = dt__pipe_params(pp);
    for (int i = 0; i < L->count; i++) {
        int bad = 0;
        DT_CHECK(dt__nf_any(tr->be, g + L->info[i].offset, L->info[i].numel, &bad));
        if (bad) key[DT__NF_GRAD] = fminf(key[DT__NF_GRAD], DT__NF_NONE - 1.0f - (float)whole[i]);
        DT_CHECK(dt__nf_any(tr->be, w + L->info[i].offset, L->info[i].numel, &bad));
        if (bad) key[DT__NF_WEIGHT] = fminf(key[DT__NF_WEIGHT], (float)whole[i]);
    }
    return DT_OK;
}

/* lib/parallel/pipeline.c's setup.nonfinite: in step t's OPTIM_STEP, the
 * whole model's gradient norm was NaN/inf on every rank and none updated.
 * Every rank offers its keys (its tensors, then its stage's layers in a
 * forward of the step's micro-batches through the stages); one allreduce
 * over all ranks, each summing into slots of its own (exact), gives every
 * rank the smallest, and the same message in tr->nf.where. Collective. */
dt_status dt__nf_pipe_locate(void *ctx, int64_t t)
{
    dt_trainer *tr = ctx;
    dt__pipe *pp = tr->pipe.rt;
    dt_comm *world = tr->cfg.comm;
    const int NL = tr->cfg.model.num_layers;
    float key[DT__NF_KEYS] = {DT__NF_NONE, DT__NF_NONE, DT__NF_NONE};
    DT_CHECK(dt__nf_pipe_tensors(tr, key));
    int mb, pos;
    DT_CHECK(dt__pipe_forward_check(pp, t, &mb, &pos));
    if (mb >= 0) key[DT__NF_FWD] = (float)((dt__pipe_dp_index(pp) * tr->n_micro + mb) * (NL + 2) + pos);
    const size_t n = (size_t)world->size * DT__NF_KEYS;
    float *v = calloc(n, sizeof *v);
    if (!v) return DT_FAIL(DT_ERR_NOMEM, "non-finite check: out of memory");
    memcpy(v + (size_t)world->rank * DT__NF_KEYS, key, sizeof key);
    const dt_status st = dt_comm_allreduce(world, v, n, DT_ALLREDUCE_RING, NULL);
    for (int j = 0; st == DT_OK && j < DT__NF_KEYS; j++)
        for (int r = 0; r < world->size; r++) key[j] = fminf(r ? key[j] : DT__NF_NONE, v[(size_t)r * DT__NF_KEYS + j]);
    free(v);
    DT_CHECK(st);
    char *where = tr->nf.where;
    const size_t cap = sizeof tr->nf.where;
    const int k = (int)key[DT__NF_FWD];
    if (key[DT__NF_FWD] < DT__NF_NONE) dt__nf_forward_where(where, cap, k % (NL + 2), NL, k / (NL + 2));
    else if (key[DT__NF_GRAD] < DT__NF_NONE)
        dt__nf_grad_where(where, cap, dt__pipe_tensor_name(pp, (int)(DT__NF_NONE - 1.0f - key[DT__NF_GRAD])));
    else if (key[DT__NF_WEIGHT] < DT__NF_NONE)
        dt__nf_weight_where(where, cap, dt__pipe_tensor_name(pp, (int)key[DT__NF_WEIGHT]));
    else snprintf(where, cap, DT__NF_NOWHERE);
    tr->nf.located = 1;
    return DT_OK;
}

/* A non-finite loss or gradient norm (what: "training loss", "gradient
 * norm") in iteration tr->iter. FP32 without a parameter server: the
 * first bad layer is found (dt__nf_locate; pipeline and tensor parallelism:
 * found already in the step, dt__nf_pipe_locate), then the step fails
 * naming it, or with --skip-nonfinite is marked skipped (nf_skip).
 * Otherwise (fp16 has its loss scaler; a pipeline that updated before the
 * check) the message is the plain one. */
dt_status dt__nonfinite(dt_trainer *tr, const char *what, double v)
{
    const int in_step = tr->strategy->nonfinite == DT__NF_IN_STEP;
    if (tr->cfg.precision != DT_F32 || tr->strategy->nonfinite == DT__NF_NONE || (in_step && !tr->nf.located))
        return DT_FAIL(DT_ERR_NUMERIC, "iteration %lld: %s is %g (diverged; try a lower --lr or --clip-grad)",
                       (long long)tr->iter + 1, what, v);
    if (!in_step) DT_CHECK(dt__nf_locate(tr));
    if (tr->cfg.skip_nonfinite) {
        tr->nf.skip = 1;
        tr->nf.skipped++;
        return DT_OK;
    }
    /* pipeline and tensor parallelism agreed on where (and the norm is the
     * whole model's): every rank fails with this very line */
    tr->nf.shared = in_step && tr->cfg.comm;
    return DT_FAIL(DT_ERR_NUMERIC,
                   "iteration %lld: %s is %g; %s (diverged; try a lower --lr or --clip-grad, or --skip-nonfinite)",
                   (long long)tr->iter + 1, what, v, tr->nf.where);
}

int dt_trainer_failure_shared(const dt_trainer *tr) { return tr->nf.shared; }

dt_status dt__loss_check(dt_trainer *tr, double loss)
{
    if (isfinite((float)loss)) return DT_OK;
    return dt__nonfinite(tr, "training loss", loss);
}

/* ---- fp16: a non-finite loss is an overflow ------------------------------------- */

/* 1 when loss (the step's, the same on every rank) is inf/NaN under loss
 * scaling: the step is an overflow (update.h's force_overflow), not a
 * divergence. FP32 and bf16 keep dt__loss_check's error. */
int dt__loss_overflow(const dt_trainer *tr, double loss) { return tr->cfg.use_loss_scaling && !isfinite((float)loss); }

/* After a step skipped for its non-finite loss: where the forward first
 * went non-finite, into tr->nf.where (the weights are still the step's).
 * A whole model re-runs its forward in its precision; pipeline and tensor
 * parallelism search their stages and shards together (collective: every
 * rank of the job comes here in the same step, as the loss is the job's);
 * ZeRO-2/3 keeps no whole model to re-run and says so. */
dt_status dt__loss_overflow_locate(dt_trainer *tr)
{
    char *where = tr->nf.where;
    const size_t cap = sizeof tr->nf.where;
    tr->nf.loss_overflow = 1;
    where[0] = 0;
    if (tr->strategy->nonfinite == DT__NF_IN_STEP) {
        DT_CHECK(dt__nf_pipe_locate(tr, tr->iter));
        tr->nf.located = 0; /* not a failure's: dt__nonfinite must not take it */
    } else if (tr->kind->locate_forward && tr->cfg.tensor_size <= 1) {
        DT_CHECK(tr->kind->locate_forward(tr, where, cap));
        if (!where[0]) snprintf(where, cap, "forward: no layer's output is non-finite on a re-run");
    } else {
        snprintf(where, cap, "forward: not re-run (this layout keeps no whole model)");
    }
    return DT_OK;
}

/* Before a step: the scale has sat at its minimum for min_patience
 * overflowing steps in a row: fp16 cannot hold this run's values, and
 * going on only skips steps. Every rank's scaler is the same, so every
 * rank fails here with the same line. */
dt_status dt__min_scale_check(dt_trainer *tr)
{
    const dt_loss_scaler *s = &tr->scaler;
    const int patience = tr->cfg.loss_scaler.min_patience;
    if (!tr->cfg.use_loss_scaling || dt_loss_scaler_is_static(s) || patience <= 0 || s->min_streak < patience)
        return DT_OK;
    tr->nf.shared = tr->cfg.comm != NULL;
    return DT_FAIL(DT_ERR_NUMERIC,
                   "iteration %lld: the loss scale sat at its minimum (%g) for the last %d steps and every one "
                   "overflowed: fp16 cannot hold this run's values; stopping (lower --lr, check the data, or use "
                   "--bf16; --min-loss-scale-patience 0 never stops)",
                   (long long)tr->iter, (double)dt_loss_scaler_scale(s), patience);
}
