/* model_mlp.c: the BatchNorm MLP behind the trainer's model-kind table
 * (--model mlp-bn on --task blobs: lib/model/mlp.c, lib/data/data_blobs.c), the
 * model that shows how BatchNorm's batch statistics interact with
 * micro-batches and data parallelism.
 *
 * Invariants: every example counts, so each micro-batch weighs 1/N of the
 * step (N: micro-batches of the whole global batch); a "token" is an
 * example (T = 1); the BatchNorm running statistics are state that
 * checkpoints keep; with --bn-momentum-adjust the per-step momentum of the
 * configuration becomes the per-micro-batch 1 - (1 - m)^(1/n_micro). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "trainer_internal.h"

static dt_status dt__mlp_create(dt_trainer *tr, int split)
{
    (void)split; /* validation keeps mlp-bn whole */
    const dt_train_config *cfg = &tr->cfg;
    tr->T = 1; /* one example per row: "tokens" are examples */
    DT_CHECK(dt_blobs_open(&tr->cfg.blobs, &tr->mlp.blobs));
    tr->cfg.mlp.input_dim = dt_blobs_dims(tr->mlp.blobs);
    tr->cfg.mlp.num_classes = dt_blobs_classes(tr->mlp.blobs);
    DT_CHECK(dt_mlp_create(&tr->cfg.mlp, tr->be, &tr->mlp.net));
    /* cfg keeps the per-step momentum; the model runs per micro-batch */
    if (cfg->bn_momentum_adjust)
        DT_CHECK(dt_mlp_set_bn_momentum(tr->mlp.net, dt_bn_momentum_per_micro(cfg->mlp.bn_momentum, tr->n_micro)));
    DT_CHECK(dt_mlp_init_weights(tr->mlp.net, cfg->seed));
    tr->num_params = dt_mlp_config_num_params(&tr->cfg.mlp);
    tr->mlp.x = malloc((size_t)tr->B * tr->cfg.mlp.input_dim * sizeof *tr->mlp.x);
    tr->mlp.y = malloc((size_t)tr->B * sizeof *tr->mlp.y);
    if (!tr->mlp.x || !tr->mlp.y) return DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory for batch buffers");
    return DT_OK;
}

static void dt__mlp_destroy(dt_trainer *tr)
{
    dt_mlp_free(tr->mlp.net);
    dt_blobs_close(tr->mlp.blobs);
    free(tr->mlp.x);
    free(tr->mlp.y);
}

static const dt_paramset *dt__mlp_layout(const dt_trainer *tr) { return dt_mlp_layout(tr->mlp.net); }
static float *dt__mlp_params(dt_trainer *tr) { return dt_mlp_params(tr->mlp.net); }
static float *dt__mlp_grads(dt_trainer *tr) { return dt_mlp_grads(tr->mlp.net); }
static dt_status dt__mlp_zero_grad(dt_trainer *tr) { return dt_mlp_zero_grad(tr->mlp.net); }
static size_t dt__mlp_peak_act(const dt_trainer *tr) { return dt_mlp_activation_bytes(tr->mlp.net); }
static int dt__mlp_has_accuracy(const dt_trainer *tr)
{
    (void)tr;
    return 1;
}
static void dt__mlp_set_training(dt_trainer *tr, int on) { dt_mlp_set_training(tr->mlp.net, on); }
static const dt_paramset *dt__mlp_state_layout(const dt_trainer *tr) { return dt_mlp_state_layout(tr->mlp.net); }
static float *dt__mlp_state(dt_trainer *tr) { return dt_mlp_state(tr->mlp.net); }

static dt_status dt__mlp_accumulate(dt_trainer *tr, float S, int share, double *loss_sum, size_t *act_bytes)
{
    (void)S; /* the MLP trains in FP32: its backward takes no loss scale */
    for (int k = 0; k < tr->n_micro; k++) {
        uint64_t index = dt__micro_index(tr, tr->dp_rank * tr->n_micro + k);
        DT_CHECK(dt_blobs_batch(tr->mlp.blobs, DT_SPLIT_TRAIN, index, tr->B, tr->mlp.x, tr->mlp.y));
        float loss = 0.0f;
        DT_CHECK(dt_mlp_forward(tr->mlp.net, tr->mlp.x, tr->mlp.y, tr->B, &loss));
        *act_bytes = DT_MAX(*act_bytes, dt_mlp_activation_bytes(tr->mlp.net));
        DT_CHECK(dt_mlp_backward(tr->mlp.net, 1.0f / (float)(tr->n_micro * share)));
        *loss_sum += loss / (tr->n_micro * share);
    }
    return DT_OK;
}

static dt_status dt__mlp_eval_batch(dt_trainer *tr, int i, dt__eval_sums *sum)
{
    float loss = 0.0f;
    int nc = 0;
    DT_CHECK(dt_blobs_batch(tr->mlp.blobs, DT_SPLIT_VAL, (uint64_t)i, tr->B, tr->mlp.x, tr->mlp.y));
    DT_CHECK(dt_mlp_forward(tr->mlp.net, tr->mlp.x, tr->mlp.y, tr->B, &loss));
    DT_CHECK(dt_mlp_accuracy(tr->mlp.net, &nc));
    sum->loss += (double)loss * tr->B;
    sum->counted += tr->B;
    sum->examples += tr->B;
    sum->correct += nc;
    return DT_OK;
}

const dt__model_kind dt__model_mlp = {
    .name = "mlp-bn",
    .create = dt__mlp_create,
    .destroy = dt__mlp_destroy,
    .layout = dt__mlp_layout,
    .params = dt__mlp_params,
    .grads = dt__mlp_grads,
    .zero_grad = dt__mlp_zero_grad,
    .peak_activation_bytes = dt__mlp_peak_act,
    .accumulate = dt__mlp_accumulate,
    .has_accuracy = dt__mlp_has_accuracy,
    .eval_batch = dt__mlp_eval_batch,
    .set_training = dt__mlp_set_training,
    .set_layer_hook = NULL, /* no per-layer spans */
    .state_layout = dt__mlp_state_layout,
    .state = dt__mlp_state,
    .locate_forward = NULL, /* the gradients and weights are searched */
    .round_weights = NULL,  /* FP32 only */
    .gpt_layers = 0,
};
