/* dt_mlp.h: "mlp-bn", a small classifier with BatchNorm for teaching
 * gradient accumulation (docs/architecture.md, "BatchNorm and mlp-bn";
 * Ioffe and Szegedy, Batch Normalization, arXiv 1502.03167, 2015): with
 * BatchNorm, N micro-batches are not one large batch, neither for the
 * gradients (each micro-batch normalises with its own statistics) nor for
 * the running statistics (updated N times per optimizer step).
 *
 * Legend: B = batch (micro-batch) rows, D = input features, H = hidden
 * width, L = hidden layers, K = classes.
 *
 * Layers, in order: L hidden layers [Linear(H) -> BatchNorm(H) -> ReLU],
 * then Linear(K) and softmax cross-entropy (mean over the B rows). With
 * batchnorm = 0 a hidden layer is [Linear(H) with bias -> ReLU], a plain
 * MLP (for which accumulation over micro-batches is exact). With BatchNorm
 * the hidden Linear has no bias: BatchNorm subtracts the batch mean, so a
 * bias there would get an identically zero gradient.
 *
 * BatchNorm follows PyTorch's BatchNorm1d: in training mode the batch
 * statistics normalise (biased variance) and the running statistics move
 * by running = (1 - momentum) * running + momentum * batch (unbiased
 * variance for running_var); in eval mode the running statistics
 * normalise and nothing moves. eps = 1e-5, momentum 0.1, running_mean 0,
 * running_var 1 at initialisation.
 *
 * Invariants: parameters live in one flat buffer (params) and their
 * gradients in another with the same layout (grads); backward accumulates
 * into grads (dt_mlp_zero_grad zeroes them). The running statistics are
 * not parameters: they live in a third flat buffer (state) with its own
 * layout, which no optimizer touches and a checkpoint saves next to the
 * parameters. Activations saved by the last forward are valid until the
 * next forward; backward spends them. */
#ifndef DT_MLP_H
#define DT_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "dt_backend.h"
#include "dt_status.h"
#include "dt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_mlp_config {
    int input_dim;     /* D, from the data (dt_blobs_dims) */
    int num_classes;   /* K, from the data (dt_blobs_classes) */
    int hidden_size;   /* H, --hidden-size (default 64) */
    int num_layers;    /* L hidden layers, --num-layers (default 2; 0: a linear classifier) */
    int batchnorm;     /* 1: BatchNorm in every hidden layer (default); 0: plain MLP */
    float bn_momentum; /* --bn-momentum, per forward in training mode (default 0.1) */
    float bn_eps;      /* default 1e-5 */
} dt_mlp_config;

/* Defaults above, for D = 8 and K = 4 (the blobs defaults). */
DT_API void dt_mlp_config_default(dt_mlp_config *cfg);
/* Check sizes and BatchNorm settings; messages name the flag. */
DT_API dt_status dt_mlp_config_validate(const dt_mlp_config *cfg);
/* Number of parameters (sum of tensor sizes, no padding). */
DT_API size_t dt_mlp_config_num_params(const dt_mlp_config *cfg);

/* Per-micro-batch momentum that makes N BatchNorm updates move the running
 * statistics' old value by as much as one update with momentum m:
 * (1 - m')^N = 1 - m, i.e. m' = 1 - (1 - m)^(1/N) (--bn-momentum-adjust).
 * Computed as -expm1(log1p(-m) / N) so small m keeps full precision.
 * n <= 1 returns m; m outside [0, 1] returns NaN. */
DT_API float dt_bn_momentum_per_micro(float m, int n);

typedef struct dt_mlp dt_mlp;

/* Parameter layout, in order, for l = 0..L-1:
 *   h.l.fc.w (H, D or H), h.l.fc.b (H) [plain MLP only],
 *   h.l.bn.w (H), h.l.bn.b (H) [BatchNorm only],
 * then out.w (K, H or D), out.b (K). decay = 1 for the .w matrices only.
 * State layout (BatchNorm only): h.l.bn.running_mean (H),
 * h.l.bn.running_var (H) for l = 0..L-1. */
DT_API dt_status dt_mlp_create(const dt_mlp_config *cfg, dt_backend *be, dt_mlp **out);
DT_API void dt_mlp_free(dt_mlp *m);
/* Initialise from a seed (one RNG stream per tensor): hidden Linear
 * weights Kaiming-uniform for ReLU, U(-sqrt(6/fan_in), +sqrt(6/fan_in))
 * (variance 2/fan_in keeps the activations' scale through the ReLUs);
 * the output Linear U(-1/sqrt(fan_in), +1/sqrt(fan_in)) (PyTorch's
 * nn.Linear default: small logits at the start); biases 0; BatchNorm gains
 * 1 and biases 0. Also resets the running statistics. */
DT_API dt_status dt_mlp_init_weights(dt_mlp *m, uint64_t seed);
/* running_mean = 0, running_var = 1. */
DT_API dt_status dt_mlp_reset_running_stats(dt_mlp *m);

DT_API const dt_mlp_config *dt_mlp_config_of(const dt_mlp *m);
DT_API const dt_paramset *dt_mlp_layout(const dt_mlp *m);
DT_API float *dt_mlp_params(dt_mlp *m); /* flat, backend memory */
DT_API float *dt_mlp_grads(dt_mlp *m);  /* flat, backend memory */
DT_API dt_backend *dt_mlp_backend(dt_mlp *m);
/* Running statistics: layout (count 0 without BatchNorm) and flat buffer
 * (backend memory; NULL without BatchNorm). */
DT_API const dt_paramset *dt_mlp_state_layout(const dt_mlp *m);
DT_API float *dt_mlp_state(dt_mlp *m);

/* Training mode (the default after create) or eval mode (0). */
DT_API void dt_mlp_set_training(dt_mlp *m, int training);
DT_API int dt_mlp_is_training(const dt_mlp *m);
/* BatchNorm momentum for the following training-mode forwards, 0..1
 * (e.g. dt_bn_momentum_per_micro(m, N) under accumulation over N). */
DT_API dt_status dt_mlp_set_bn_momentum(dt_mlp *m, float momentum);
DT_API float dt_mlp_bn_momentum(const dt_mlp *m);

/* Forward pass on host x (B, D) and labels y (B), each in 0..K-1 (y may be
 * NULL for inference). In training mode with BatchNorm B must be >= 2 and
 * the running statistics move once. *loss (may be NULL) = mean
 * cross-entropy over the B rows. */
DT_API dt_status dt_mlp_forward(dt_mlp *m, const float *x, const int32_t *y, int B, float *loss);
/* Backward of the last forward (training mode, with labels); accumulates
 * into grads. The loss differentiated is the mean over the B rows times
 * loss_scale (1/N for N accumulated micro-batches of equal size). */
DT_API dt_status dt_mlp_backward(dt_mlp *m, float loss_scale);
DT_API dt_status dt_mlp_zero_grad(dt_mlp *m);

/* After a forward with labels: rows whose argmax logit (lowest index on
 * ties) equals the label. */
DT_API dt_status dt_mlp_accuracy(const dt_mlp *m, int *n_correct);
/* Logits of the last forward, (B, K), copied to host (spent by backward). */
DT_API dt_status dt_mlp_logits(dt_mlp *m, float *out);
/* Bytes of the activation buffers (sized for the largest B seen). */
DT_API size_t dt_mlp_activation_bytes(const dt_mlp *m);

#ifdef __cplusplus
}
#endif
#endif
