/* model_gpt.c: the GPT behind the trainer's model-kind table (the byte
 * tasks and text data of lib/data_*.c, the model of lib/model/gpt.c).
 *
 * A step's micro-batches are weighted by their counted targets: the
 * step's loss is the mean over every counted target of all its
 * micro-batches, so micro-batch k's mean loss is weighted by n_k / n (n_k
 * its counted targets, n their sum over the global batch). With equal n_k
 * that is the usual 1/N; with masked targets (the tasks' answers vary in
 * length) it keeps the accumulated gradient equal to one large batch's. A
 * first pass over the (cheap, deterministic) data counts n.
 *
 * Invariants: the training rows of a step depend only on (seed, global
 * batch, micro batch, T); without a whole model here (pipeline or tensor
 * stages own it) only the data and the host buffers exist. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "trainer_internal.h"

dt_status dt__gpt_create(dt_trainer *tr, int split)
{
    const dt_train_config *cfg = &tr->cfg;
    DT_CHECK(dt_data_open(&tr->cfg.data, tr->T, &tr->gpt.data));
    /* the vocabulary: the data's, or the model's own when set (a preset's,
     * e.g. GPT-2's 50257), which the data's token ids must fit in */
    const int dv = dt_data_vocab_size(tr->gpt.data);
    if (tr->cfg.model.vocab_size <= 0) tr->cfg.model.vocab_size = dv;
    else if (dv > tr->cfg.model.vocab_size)
        return DT_FAIL(DT_ERR_INVALID, "--model %s: a vocabulary of %d, the data's token ids go up to %d",
                       tr->cfg.model_name, tr->cfg.model.vocab_size, dv - 1);
    tr->num_params = dt_gpt_config_num_params(&tr->cfg.model);
    if (!split) {
        DT_CHECK(dt_gpt_create(&tr->cfg.model, tr->be, &tr->gpt.model));
        DT_CHECK(dt_gpt_init_weights_from(tr->gpt.model, &tr->init));
        DT_CHECK(dt_gpt_set_recompute(tr->gpt.model, cfg->recompute, cfg->recompute_num_layers));
        DT_CHECK(dt_gpt_set_precision(tr->gpt.model, cfg->precision));
        /* one process with a zero-bubble kind: its trace shows each layer's B and W apart, the
         * profile from which dtsim costs W (the schedule itself needs p > 1) */
        dt_gpt_set_split_backward(tr->gpt.model, dt_sched_splits_backward(cfg->pipeline_schedule));
    }
    size_t n = (size_t)tr->B * (size_t)tr->T;
    tr->gpt.tokens = malloc(n * sizeof *tr->gpt.tokens);
    tr->gpt.targets = malloc(n * sizeof *tr->gpt.targets);
    tr->gpt.example = malloc(n * sizeof *tr->gpt.example);
    tr->gpt.pos_loss = malloc(n * sizeof *tr->gpt.pos_loss);
    tr->gpt.pos_correct = malloc(n * sizeof *tr->gpt.pos_correct);
    if (!tr->gpt.tokens || !tr->gpt.targets || !tr->gpt.example || !tr->gpt.pos_loss || !tr->gpt.pos_correct)
        return DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory for batch buffers (%zu positions)", n);
    return DT_OK;
}

void dt__gpt_destroy(dt_trainer *tr)
{
    dt_gpt_free(tr->gpt.model);
    dt_data_close(tr->gpt.data);
    free(tr->gpt.tokens);
    free(tr->gpt.targets);
    free(tr->gpt.example);
    free(tr->gpt.pos_loss);
    free(tr->gpt.pos_correct);
}

static const dt_paramset *dt__gpt_layout(const dt_trainer *tr) { return dt_gpt_layout(tr->gpt.model); }
static float *dt__gpt_params(dt_trainer *tr) { return dt_gpt_params(tr->gpt.model); }
static float *dt__gpt_grads(dt_trainer *tr) { return dt_gpt_grads(tr->gpt.model); }
static dt_status dt__gpt_zero_grad(dt_trainer *tr) { return dt_gpt_zero_grad(tr->gpt.model); }
static size_t dt__gpt_peak_act(const dt_trainer *tr) { return dt_gpt_peak_activation_bytes(tr->gpt.model); }
int dt__gpt_has_accuracy(const dt_trainer *tr) { return dt_data_has_accuracy(tr->gpt.data); }
static dt_status dt__gpt_round_weights(dt_trainer *tr) { return dt_gpt_set_weights_rounded(tr->gpt.model); }

static void dt__gpt_set_layer_hook(dt_trainer *tr, int on)
{
    if (tr->gpt.model) dt_gpt_set_layer_hook(tr->gpt.model, on ? dt__layer_hook : NULL, on ? tr : NULL);
}

/* The whole model of this process (lib/model/gpt.c) as a runner. */
static dt_status dt__gpt_run_forward(dt_trainer *tr, const int32_t *tokens, const int32_t *targets, float *loss)
{
    return dt_gpt_forward(tr->gpt.model, tokens, targets, tr->B, tr->T, loss);
}
static dt_status dt__gpt_run_backward(dt_trainer *tr, float scale) { return dt_gpt_backward(tr->gpt.model, scale); }
static dt_status dt__gpt_run_stats(dt_trainer *tr, float *losses, uint8_t *correct)
{
    return dt_gpt_position_stats(tr->gpt.model, losses, correct);
}
static size_t dt__gpt_run_act(const dt_trainer *tr) { return dt_gpt_activation_bytes(tr->gpt.model); }

static const dt__gpt_runner dt__gpt_whole = {
    .forward = dt__gpt_run_forward,
    .backward = dt__gpt_run_backward,
    .position_stats = dt__gpt_run_stats,
    .activation_bytes = dt__gpt_run_act,
};

dt_status dt__gpt_accumulate_with(dt_trainer *tr, const dt__gpt_runner *run, float S, int share, double *loss_sum,
                                  size_t *act_bytes)
{
    const size_t n_pos = (size_t)tr->B * tr->T;
    long long n_total = 0; /* over the whole global batch, all ranks' micro-batches (ps-async: this worker's) */
    for (int k = share == 1 ? tr->dp_rank * tr->n_micro : 0; k < tr->n_micro * (share == 1 ? tr->dp_rank + 1 : share);
         k++) {
        uint64_t index = dt__micro_index(tr, k);
        DT_CHECK(dt_data_batch(tr->gpt.data, DT_SPLIT_TRAIN, index, tr->B, tr->T, tr->gpt.tokens, tr->gpt.targets, NULL,
                               NULL));
        for (size_t i = 0; i < n_pos; i++) n_total += tr->gpt.targets[i] >= 0;
    }
    for (int k = 0; k < tr->n_micro; k++) {
        uint64_t index = dt__micro_index(tr, tr->dp_rank * tr->n_micro + k);
        DT_CHECK(dt_data_batch(tr->gpt.data, DT_SPLIT_TRAIN, index, tr->B, tr->T, tr->gpt.tokens, tr->gpt.targets, NULL,
                               NULL));
        long long n_k = 0;
        for (size_t i = 0; i < n_pos; i++) n_k += tr->gpt.targets[i] >= 0;
        tr->trace.micro = k;
        float loss = 0.0f;
        DT_CHECK(run->forward(tr, tr->gpt.tokens, tr->gpt.targets, &loss));
        *act_bytes = DT_MAX(*act_bytes, run->activation_bytes(tr));
        const double w = n_total ? (double)n_k / (double)n_total : 0.0;
        /* the last micro-batch's backward completes each layer's gradient:
         * launch its bucket from the layer hook (FP32 gradients only; under
         * mixed precision they reach the FP32 buffer at the very end) */
        tr->dp.overlap_active = tr->dp.comm_thread_on && k == tr->n_micro - 1 && tr->cfg.precision == DT_F32;
        dt_status bst = run->backward(tr, (float)(w * S));
        tr->dp.overlap_active = 0;
        DT_CHECK(bst);
        *loss_sum += w * loss;
    }
    return DT_OK;
}

static dt_status dt__gpt_accumulate(dt_trainer *tr, float S, int share, double *loss_sum, size_t *act_bytes)
{
    return dt__gpt_accumulate_with(tr, &dt__gpt_whole, S, share, loss_sum, act_bytes);
}

dt_status dt__gpt_eval_batch_with(dt_trainer *tr, const dt__gpt_runner *run, int i, dt__eval_sums *sum)
{
    const size_t n = (size_t)tr->B * tr->T;
    float loss = 0.0f;
    int n_ex = 0;
    DT_CHECK(dt_data_batch(tr->gpt.data, DT_SPLIT_VAL, (uint64_t)i, tr->B, tr->T, tr->gpt.tokens, tr->gpt.targets,
                           tr->gpt.example, &n_ex));
    DT_CHECK(run->forward(tr, tr->gpt.tokens, tr->gpt.targets, &loss));
    size_t counted = 0;
    for (size_t k = 0; k < n; k++) counted += tr->gpt.targets[k] >= 0;
    sum->loss += (double)loss * (double)counted;
    sum->counted += (double)counted;
    if (dt_data_has_accuracy(tr->gpt.data) && n_ex > 0) {
        int nc = 0;
        DT_CHECK(run->position_stats(tr, tr->gpt.pos_loss, tr->gpt.pos_correct));
        dt_data_count_correct(tr->gpt.example, tr->gpt.pos_correct, (int)n, n_ex, &nc);
        sum->examples += n_ex;
        sum->correct += nc;
    }
    return DT_OK;
}

static dt_status dt__gpt_eval_batch(dt_trainer *tr, int i, dt__eval_sums *sum)
{
    return dt__gpt_eval_batch_with(tr, &dt__gpt_whole, i, sum);
}

const dt__model_kind dt__model_gpt = {
    .name = "gpt",
    .create = dt__gpt_create,
    .destroy = dt__gpt_destroy,
    .layout = dt__gpt_layout,
    .params = dt__gpt_params,
    .grads = dt__gpt_grads,
    .zero_grad = dt__gpt_zero_grad,
    .peak_activation_bytes = dt__gpt_peak_act,
    .activation_bytes = dt__gpt_run_act,
    .accumulate = dt__gpt_accumulate,
    .has_accuracy = dt__gpt_has_accuracy,
    .eval_batch = dt__gpt_eval_batch,
    .set_training = NULL, /* no BatchNorm */
    .set_layer_hook = dt__gpt_set_layer_hook,
    .state_layout = NULL, /* the weights are all its state */
    .state = NULL,
    .locate_forward = dt__gpt_locate_forward, /* nonfinite.c */
    .round_weights = dt__gpt_round_weights,
    .gpt_layers = 1,
};
