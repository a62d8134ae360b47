/* dt_optim.h: optimizers over a model's flat parameter buffer, gradient
 * norm clipping, and the learning-rate schedule.
 *
 * Invariants: optimizer state (momentum, Adam moments) lives in flat
 * buffers with the parameters' layout; weight decay applies only to tensors
 * whose layout entry has decay = 1 (matrices), never to biases or
 * LayerNorm gains. */
#ifndef DT_OPTIM_H
#define DT_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "dt_backend.h"
#include "dt_status.h"
#include "dt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_optim_kind { DT_OPTIM_SGD = 0, DT_OPTIM_ADAMW } dt_optim_kind;

typedef struct dt_optim_config {
    dt_optim_kind kind;
    float beta1, beta2, eps; /* AdamW (defaults 0.9, 0.95, 1e-8) */
    float momentum;          /* SGD (default 0.9) */
    int nesterov;            /* SGD */
    float weight_decay;      /* decoupled for AdamW, added to the gradient for SGD */
} dt_optim_config;

DT_API void dt_optim_config_default(dt_optim_config *cfg, dt_optim_kind kind);
/* "sgd" or "adamw" */
DT_API dt_status dt_optim_kind_parse(const char *s, dt_optim_kind *out);

typedef struct dt_optim {
    dt_optim_config cfg;
    dt_backend *be;
    const dt_paramset *layout;
    dt_buffer state1; /* SGD momentum buffer, or AdamW first moment m */
    dt_buffer state2; /* AdamW second moment v (empty for SGD) */
    int64_t step;     /* optimizer steps taken */
} dt_optim;

DT_API dt_status dt_optim_init(dt_optim *opt, const dt_optim_config *cfg, dt_backend *be,
                               const dt_paramset *layout);
DT_API void dt_optim_free(dt_optim *opt);
/* One step at learning rate lr; gradients are multiplied by grad_scale
 * first (clipping and unscaling fold into it, so no extra pass). */
DT_API dt_status dt_optim_step(dt_optim *opt, float *params, const float *grads, float lr, float grad_scale);
/* Bytes of optimizer state. */
DT_API size_t dt_optim_state_bytes(const dt_optim *opt);

/* Global L2 norm of the gradients (sum over the layout's tensors). */
DT_API dt_status dt_grad_norm(dt_backend *be, const dt_paramset *layout, const float *grads, double *norm);
/* Clip factor for a norm: min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0. */
DT_API float dt_clip_factor(double norm, float max_norm);

typedef enum dt_lr_decay { DT_LR_CONSTANT = 0, DT_LR_LINEAR, DT_LR_COSINE } dt_lr_decay;
DT_API dt_status dt_lr_decay_parse(const char *s, dt_lr_decay *out);

typedef struct dt_lr_schedule {
    float max_lr, min_lr;
    int64_t warmup_iters; /* linear from max_lr/warmup to max_lr over these iterations */
    int64_t decay_iters;  /* decay from max_lr to min_lr ends here (then min_lr) */
    dt_lr_decay style;
} dt_lr_schedule;

/* Learning rate at iteration it (0-based). */
DT_API float dt_lr_at(const dt_lr_schedule *s, int64_t it);

#ifdef __cplusplus
}
#endif
#endif
