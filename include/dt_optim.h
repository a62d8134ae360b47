/* dt_optim.h: optimizers over a model's flat parameter buffer (SGD, AdamW,
 * LARS, LAMB), gradient norm clipping, and the learning-rate schedule.
 *
 * Invariants: optimizer state (momentum, Adam moments) lives in flat
 * buffers with the parameters' layout; weight decay applies only to tensors
 * whose layout entry has decay = 1 (matrices, embeddings), never to biases
 * or LayerNorm gains. The layer-wise optimizers follow the same split: the
 * trust ratio applies only to decay = 1 tensors; the others take the plain
 * step (LARS: momentum SGD at lr; LAMB: Adam at lr), trust 1, no decay.
 *
 * LARS (You, Gitman and Ginsburg, arXiv 1708.03888, 2017), per tensor,
 * g' = grad_scale * g:
 *   trust = eta * ||w|| / (||g'|| + wd * ||w||)
 *   v <- momentum * v + lr * trust * (g' + wd * w);  w <- w - v
 * LAMB (You et al., arXiv 1904.00962), per tensor:
 *   m, v Adam moments of g' with bias correction; u = mhat / (sqrt(vhat) + eps) + wd * w
 *   trust = phi(||w||) / ||u||,  phi(z) = min(max(z, gamma_l), gamma_u)
 *   w <- w - lr * trust * u
 * Both: trust = 1 when ||w|| == 0 (tested before phi) or the denominator
 * is 0, as common implementations do (cybertronai/pytorch-lamb, timm's
 * Lamb, apex FusedLAMB): a zero-initialised tensor then moves at the
 * global lr instead of staying at 0 for ever (0 * anything), and an
 * all-zero direction stays a no-op instead of 0/0. Norms are computed in
 * double from the backend's sumsq, with ||g'|| = |grad_scale| * ||g||.
 *
 * Defaults: eta = 0.001, the LARS paper's trust coefficient (the step is
 * then about 0.1% of ||w|| per unit lr, so LARS wants lr of order 1-10).
 * gamma_l = 0, gamma_u = 10, i.e. phi(z) = min(z, 10): the paper leaves
 * the bounds open and 10 is what the widely used PyTorch port
 * (cybertronai/pytorch-lamb, clamp(0, 10)) and its derivatives chose; with
 * the 0.02-std init, tiny's matrices start with norms of about 1-3 (phi
 * is the identity) while wider layers (the small preset's MLP matrices,
 * about 15) are capped, so no layer's step scales with an unbounded norm.
 * gamma_l = 0 adds no floor. LARS reuses momentum (0.9); LAMB reuses beta1,
 * beta2, eps (0.9, 0.95, 1e-8); weight decay stays opt-in (0). */
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

typedef enum dt_optim_kind { DT_OPTIM_SGD = 0, DT_OPTIM_ADAMW, DT_OPTIM_LARS, DT_OPTIM_LAMB } dt_optim_kind;

typedef struct dt_optim_config {
    dt_optim_kind kind;
    float beta1, beta2, eps; /* AdamW and LAMB (defaults 0.9, 0.95, 1e-8) */
    float momentum;          /* SGD and LARS (default 0.9) */
    int nesterov;            /* SGD only */
    float weight_decay;      /* decoupled for AdamW and LAMB, added to the gradient for SGD and LARS */
    float lars_eta;          /* LARS trust coefficient eta, --lars-eta (default 0.001) */
    float lamb_gamma_l;      /* LAMB phi lower bound, --lamb-gamma-l (default 0) */
    float lamb_gamma_u;      /* LAMB phi upper bound, --lamb-gamma-u (default 10; +inf: no cap) */
} dt_optim_config;

DT_API void dt_optim_config_default(dt_optim_config *cfg, dt_optim_kind kind);
/* "sgd", "adamw", "lars" or "lamb" (the --optimizer flag) */
DT_API dt_status dt_optim_kind_parse(const char *s, dt_optim_kind *out);
/* Check every field; messages name the flag (--adam-beta1, --lars-eta, ...). */
DT_API dt_status dt_optim_config_validate(const dt_optim_config *cfg);
/* The name dt_optim_kind_parse accepts for kind ("?" if out of range). */
DT_API const char *dt_optim_kind_name(dt_optim_kind kind);

typedef struct dt_optim {
    dt_optim_config cfg;
    dt_backend *be;
    const dt_paramset *layout;
    dt_buffer state1;  /* (numel) SGD/LARS momentum buffer, or AdamW/LAMB first moment m */
    dt_buffer state2;  /* (numel) AdamW/LAMB second moment v (empty for SGD, LARS) */
    dt_buffer scratch; /* LAMB: (largest decay tensor) update direction u, rewritten per tensor; not state */
    float *trust;      /* (layout->count) host: LARS/LAMB trust ratios of the last step; NULL otherwise */
    int64_t step;      /* optimizer steps taken */
    /* dt_optim_set_group_norms (NULL group_sum: each entry is a whole tensor) */
    const int *group_tensor; /* (layout->count) the whole tensor each entry is a piece of */
    int group_tensors;
    dt_status (*group_sum)(void *ctx, double *v, size_t n);
    void *group_ctx;
} dt_optim;

DT_API dt_status dt_optim_init(dt_optim *opt, const dt_optim_config *cfg, dt_backend *be, const dt_paramset *layout);
DT_API void dt_optim_free(dt_optim *opt);
/* One step at learning rate lr; gradients are multiplied by grad_scale
 * first (clipping and unscaling fold into it, so no extra pass). */
DT_API dt_status dt_optim_step(dt_optim *opt, float *params, const float *grads, float lr, float grad_scale);
/* Bytes of optimizer state: what a checkpoint must save to resume the run
 * (momentum, moments). */
DT_API size_t dt_optim_state_bytes(const dt_optim *opt);
/* Bytes of device workspace besides the state (LAMB's u; 0 for the others):
 * overwritten before it is read on every step, so never saved. */
DT_API size_t dt_optim_scratch_bytes(const dt_optim *opt);
/* 1 for the layer-wise optimizers (LARS, LAMB), which report trust ratios. */
DT_API int dt_optim_has_trust_ratios(const dt_optim *opt);
/* The trust ratios of the last step, one per layout tensor in layout order:
 * LARS's local lr factor eta*||w||/(||g'|| + wd*||w||), LAMB's
 * phi(||w||)/||u||; 1 for tensors it does not apply to (decay == 0), for the
 * corner cases above, and before the first step. NULL for SGD and AdamW. */
DT_API const float *dt_optim_trust_ratios(const dt_optim *opt);
/* LARS and LAMB over a layout whose entries are pieces of tensors held
 * across a group (ZeRO's shards): entry i is a piece of whole tensor
 * tensor[i] (0..n_tensors-1; not copied: it must outlive opt), and sum
 * adds an array of doubles over the group, in place, the same on every
 * rank. Each step then takes every piece's sums of squares, adds them per
 * tensor over the group (one call of sum, 2 x n_tensors doubles) and gives
 * each piece its whole tensor's trust ratio. LAMB's u then holds every
 * decay piece at once (its scratch grows to the layout). SGD and AdamW
 * ignore it. */
DT_API dt_status dt_optim_set_group_norms(dt_optim *opt, const int *tensor, int n_tensors,
                                          dt_status (*sum)(void *ctx, double *v, size_t n), void *ctx);

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
