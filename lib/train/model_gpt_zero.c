/* model_gpt_zero.c: the GPT kind of ZeRO stages 2 and 3 (--zero-stage 2|3):
 * the GPT kind's data and batches (model_gpt.c) over the sharded model of
 * lib/parallel/zero_gpt.c, which step_zero.c creates and updates.
 *
 * There is no whole parameter or gradient buffer on a rank: params and
 * grads are NULL, and every reader of the weights (the summary's
 * fingerprint, checkpoints) goes through the shard (step_zero.c,
 * checkpoint_io.c).
 *
 * Invariants: tr->zgpt exists from the strategy's create to the trainer's
 * free; the micro-batches are weighted as the GPT kind's (model_gpt.c), so
 * a step's gradient is the same sum. */
#define _POSIX_C_SOURCE 200809L
#include "trainer_internal.h"

static dt_status dt__gz_create(dt_trainer *tr, int split)
{
    (void)split; /* the sharded model is made by the strategy, over the data-parallel group */
    return dt__gpt_create(tr, 1);
}

static const dt_paramset *dt__gz_layout(const dt_trainer *tr) { return dt__zgpt_layout(tr->zgpt); }
static float *dt__gz_none(dt_trainer *tr)
{
    (void)tr;
    return NULL;
}
static dt_status dt__gz_zero_grad(dt_trainer *tr) { return dt__zgpt_zero_grad(tr->zgpt); }
static size_t dt__gz_peak_act(const dt_trainer *tr) { return dt__zgpt_peak_activation_bytes(tr->zgpt); }

static dt_status dt__gz_forward(dt_trainer *tr, const int32_t *tokens, const int32_t *targets, float *loss)
{
    return dt__zgpt_forward(tr->zgpt, tokens, targets, tr->B, tr->T, loss);
}
static dt_status dt__gz_backward(dt_trainer *tr, float scale) { return dt__zgpt_backward(tr->zgpt, scale); }
static dt_status dt__gz_stats(dt_trainer *tr, float *losses, uint8_t *correct)
{
    return dt__zgpt_position_stats(tr->zgpt, losses, correct);
}
static size_t dt__gz_act(const dt_trainer *tr) { return dt__zgpt_activation_bytes(tr->zgpt); }

static const dt__gpt_runner dt__gz_runner = {
    .forward = dt__gz_forward,
    .backward = dt__gz_backward,
    .position_stats = dt__gz_stats,
    .activation_bytes = dt__gz_act,
};

static dt_status dt__gz_accumulate(dt_trainer *tr, float S, int share, double *loss_sum, size_t *act_bytes)
{
    return dt__gpt_accumulate_with(tr, &dt__gz_runner, S, share, loss_sum, act_bytes);
}

static dt_status dt__gz_eval_batch(dt_trainer *tr, int i, dt__eval_sums *sum)
{
    return dt__gpt_eval_batch_with(tr, &dt__gz_runner, i, sum);
}

static void dt__gz_set_layer_hook(dt_trainer *tr, int on)
{
    if (tr->zgpt) dt__zgpt_set_layer_hook(tr->zgpt, on ? dt__layer_hook : NULL, on ? tr : NULL);
}

const dt__model_kind dt__model_gpt_zero = {
    .name = "gpt",
    .create = dt__gz_create,
    .destroy = dt__gpt_destroy,
    .layout = dt__gz_layout,
    .params = dt__gz_none,
    .grads = dt__gz_none,
    .zero_grad = dt__gz_zero_grad,
    .peak_activation_bytes = dt__gz_peak_act,
    .activation_bytes = dt__gz_act,
    .accumulate = dt__gz_accumulate,
    .has_accuracy = dt__gpt_has_accuracy,
    .eval_batch = dt__gz_eval_batch,
    .set_training = NULL,
    .set_layer_hook = dt__gz_set_layer_hook,
    .state_layout = NULL,
    .state = NULL,
    .locate_forward = NULL,
    .round_weights = NULL,
    .gpt_layers = 0, /* no buckets of data parallelism, no per-tensor grad_amax */
};
