/* dts_amp.h: the simulator's mixed-precision numerics model (sim/amp.c):
 * per-layer gradient magnitudes fitted from a real fp16 run's trace, and
 * the dynamic loss scaler's trajectory they imply (overflow steps, skipped
 * steps, the first overflowing layer), driven by the real scaler
 * (dt_loss_scaler_update in lib/optim/loss_scaler.c), never a copy of it.
 *
 * Layer slots: index = trace layer + 1, so slot 0 is the embedding (wte,
 * wpe), slots 1..L the blocks, slot L+1 the final LayerNorm and LM head.
 * "Backward order" is from the head (slot L+1) down to the embedding (0),
 * the order in which the trainer checks tensors for inf/NaN.
 *
 * The model, per slot l and step t: log2 amax_l(t) ~ Normal(mu_l + slope_l
 * * clamp(t, t_lo, t_hi), sigma_l), independent over slots and steps, where
 * amax is the largest |g| of the slot's unscaled gradient. A step at loss
 * scale S overflows when S * amax_l >= limit for some l (the rule and its
 * measured accuracy are at the top of sim/amp.c). */
#ifndef DTS_AMP_H
#define DTS_AMP_H

#include <stdint.h>

#include "dt_loss_scaler.h"
#include "dt_status.h"
#include "dt_trace.h"

/* Layer slots a model can hold: L <= 256 blocks. */
#define DTS_AMP_MAX_SLOTS 258
/* The smallest FP32 magnitude that rounds to inf in IEEE half (round to
 * nearest even): half-way between the largest half, 65504, and 2^16. */
#define DTS_AMP_F16_LIMIT 65520.0

typedef struct dts_grad_model {
    int n_slots;                       /* layer slots (L + 2), 1..DTS_AMP_MAX_SLOTS */
    double mu[DTS_AMP_MAX_SLOTS];      /* log2 amax at step 0 (the trend's intercept; the mean without trend) */
    double sigma[DTS_AMP_MAX_SLOTS];   /* >= 0: spread of log2 amax around the mean, per step */
    double slope[DTS_AMP_MAX_SLOTS];   /* log2 amax per step; 0 where the data does not support a trend */
    int n_obs[DTS_AMP_MAX_SLOTS];      /* fit: steps with a finite amax */
    int n_censored[DTS_AMP_MAX_SLOTS]; /* fit: steps where the slot held an inf/NaN (amax >= limit / S) */
    double t_lo, t_hi;                 /* the trend holds for steps in [t_lo, t_hi], constant outside */
    double limit;                      /* overflow when S * amax >= limit; DTS_AMP_F16_LIMIT */
} dts_grad_model;

/* Fit *out to the grad_amax events of trace t (rank pid 0 or the lowest
 * present), whose file name is `name` (for messages). Each slot's mean and
 * spread are fitted with its overflowing steps as right-censored
 * observations (a Tobit fit by EM); the slope is kept when its t-statistic
 * is at least 3 with 10 or more steps, else the slot's mean is constant.
 * A trace without grad_amax events is DT_ERR_FORMAT naming the file ("run
 * dtrain with --fp16 --trace"). */
dt_status dts_grad_model_fit(const dt_trace *t, const char *name, dts_grad_model *out);

/* The model with every slot at log2 amax = mu exactly (sigma 0, no trend)
 * and limit DTS_AMP_F16_LIMIT: for hand-made models and tests. */
dt_status dts_grad_model_constant(int n_slots, double log2_amax, dts_grad_model *out);

/* The overflow rule for one step: the first slot in backward order with
 * S * 2^log2_amax[l] >= gm->limit, or -1 when none overflows. */
int dts_amp_first_overflow(const dts_grad_model *gm, float scale, const double *log2_amax);

typedef struct dts_amp_step {
    int64_t step; /* 0-based */
    float scale;  /* S used for this step */
    int overflow; /* some gradient was inf/NaN */
    int skipped;  /* the optimizer skipped the step (every overflow, as the real scaler decides) */
    int layer;    /* first overflowing layer slot in backward order (slot = trace layer + 1), -1 none */
} dts_amp_step;

typedef struct dts_amp_result {
    int64_t steps, overflows, skipped, backoffs, growths;
    float final_scale;   /* the scale after the last step */
    dts_amp_step *trace; /* (steps) */
} dts_amp_result;

/* Simulate `steps` optimizer steps of the scaler configured by cfg (NULL:
 * defaults) under model gm: each step draws every slot's log2 amax (from
 * dt_rng seeded with `seed`, n_slots normals per step, so a seed gives one
 * trajectory), applies the overflow rule and feeds the flag to
 * dt_loss_scaler_update. *out is filled on success (free it with
 * dts_amp_result_free); an invalid cfg is the scaler's DT_ERR_INVALID. */
dt_status dts_amp_simulate(const dts_grad_model *gm, const dt_loss_scaler_config *cfg, int64_t steps, uint64_t seed,
                           dts_amp_result *out);

/* The real run's trajectory read back from its trace (grad_amax events and
 * the loss_scale counter), in the same form, for comparing with a
 * simulation: overflow = some slot held an inf/NaN; layer = the highest such
 * slot; growths and backoffs from the scale changes between steps. */
dt_status dts_amp_observe(const dt_trace *t, const char *name, dts_amp_result *out);

void dts_amp_result_free(dts_amp_result *r);

#endif
