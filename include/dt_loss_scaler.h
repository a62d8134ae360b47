/* dt_loss_scaler.h: the loss scale of mixed-precision training, as a small
 * state machine the trainer feeds one overflow flag per optimizer step.
 *
 * Why: f16 gradients below 2^-24 flush to zero, so the loss (and with it
 * every gradient) is multiplied by a scale S before backward; the optimizer
 * divides by S again (unscale_check in dt_backend.h), which also reports
 * whether any gradient became inf or NaN ("overflow"); the trainer also
 * counts a step whose loss is inf or NaN as an overflow (the forward's
 * activations left the f16 range), as PyTorch's GradScaler and Megatron's
 * DynamicGradScaler do. An overflowing step
 * must be skipped, and the scale lowered; a long run of clean steps means
 * the scale can grow to use more of the f16 range.
 *
 * Defaults follow DeepSpeed's DynamicLossScaler: initial scale 2^16, growth
 * x2 after a window of 1000 clean steps (PyTorch's GradScaler uses
 * growth_interval 2000 and has no hysteresis, i.e. hysteresis 1), backoff
 * x0.5, hysteresis 2, minimum scale 1.
 *
 * State: S (scale), h (hysteresis left, starts at H = config hysteresis),
 * g (clean steps since the last overflow or growth, starts at 0).
 * dt_loss_scaler_update(s, overflow, ev) takes exactly one row:
 *
 *   mode     overflow  condition          action                     skip  event
 *   dynamic  0         g + 1 <  window    g += 1                     no    -
 *   dynamic  0         g + 1 == window    S *= growth, g = 0, h = H  no    grew
 *   dynamic  1         h > 1              h -= 1, g = 0              yes   absorbed
 *   dynamic  1         h <= 1, S > min    S = max(S*backoff, min),   yes   backed_off
 *                                         g = 0
 *   dynamic  1         h <= 1, S == min   g = 0                      yes   at_min
 *                                                                          (+ at_min_first once)
 *   static   0         -                  -                          no    -
 *   static   1         -                  -                          yes   -
 *
 * How the hysteresis counter resets (DeepSpeed semantics, its
 * consecutive_hysteresis = False by default): h is refilled to H only when
 * the scale grows, i.e. after `window` consecutive clean steps. Clean steps
 * in between do not refill it, so overflows spread over a window add up;
 * once h is down to 1 every further overflow backs the scale off, until a
 * growth refills h. With consecutive_hysteresis = 1, every clean step also
 * sets h = H (only H overflows in a row are tolerated).
 * Growth never makes S non-finite: if S * growth would overflow a float, S
 * stays (g and h still reset), as PyTorch does.
 *
 * at_min: the scale is already at min_scale, hysteresis is exhausted and
 * the gradients still overflow: lowering the scale can no longer help
 * (DeepSpeed raises "Current loss scale already at minimum" here). Every
 * such step sets ev->at_min; ev->at_min_first is set on the first one in
 * the scaler's life only, so the trainer prints its warning once.
 * min_streak counts at_min steps in a row; once it reaches
 * cfg.min_patience (> 0) the trainer ends the run with one line.
 *
 * Static mode (static_scale > 0, flag --loss-scale): S = static_scale
 * forever; overflowing steps are still skipped and counted; h and g stay
 * as initialised and at_min is never reported (the scale is fixed by
 * choice, not by collapse). */
#ifndef DT_LOSS_SCALER_H
#define DT_LOSS_SCALER_H

#include <stdint.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_loss_scaler_config {
    float initial_scale;        /* --initial-loss-scale, default 65536 (2^16); >= min_scale */
    float growth_factor;        /* default 2; > 1 */
    float backoff_factor;       /* default 0.5; in (0, 1) */
    int window;                 /* --loss-scale-window: clean steps per growth, default 1000 (PyTorch: 2000) */
    int hysteresis;             /* --hysteresis: H, overflows tolerated before a backoff, default 2; >= 1 */
    int consecutive_hysteresis; /* 1: refill h on every clean step (see above), default 0 */
    float min_scale;            /* --min-loss-scale, default 1; > 0 */
    float static_scale;         /* --loss-scale: > 0 static scale, 0 (default) dynamic */
    /* --min-loss-scale-patience: at_min steps in a row (every one an
     * overflow at min_scale) after which training must stop, default 100;
     * 0: never. The scaler only counts (min_streak); the trainer stops. */
    int min_patience;
} dt_loss_scaler_config;

/* The scaler's state; read the fields freely, change them only through the
 * functions below. */
typedef struct dt_loss_scaler {
    dt_loss_scaler_config cfg;
    float scale;           /* S */
    int hysteresis;        /* h: overflows left before the next backoff (1: the next one backs off) */
    int64_t good_steps;    /* g: clean steps since the last overflow or growth */
    int64_t steps;         /* updates so far */
    int64_t overflows;     /* steps that reported an overflow */
    int64_t skipped;       /* steps the optimizer must skip (every overflow, in both modes) */
    int64_t growths;       /* times the scale grew */
    int64_t backoffs;      /* times the scale was lowered */
    int64_t min_overflows; /* steps with the at_min condition */
    /* at_min steps in a row (0 after any other step). Not kept in a
     * checkpoint: a resumed run counts afresh. */
    int64_t min_streak;
} dt_loss_scaler;

/* What one update did (all flags 0 or 1). */
typedef struct dt_loss_scaler_event {
    int skip;           /* the step overflowed: do not apply the optimizer update */
    int grew;           /* S was multiplied by growth_factor */
    int backed_off;     /* S was lowered (times backoff_factor, clamped to min_scale) */
    int absorbed;       /* the overflow was tolerated by hysteresis: S unchanged, h lowered */
    int at_min;         /* overflow with S == min_scale and no hysteresis left */
    int at_min_first;   /* at_min for the first time in this scaler's life */
    float scale_before; /* S used for this step */
    float scale_after;  /* S for the next step */
} dt_loss_scaler_event;

/* Fill *cfg with the defaults above. */
DT_API void dt_loss_scaler_config_default(dt_loss_scaler_config *cfg);
/* Validate cfg (NULL: defaults) and start the state machine at S =
 * initial_scale (or static_scale), h = H, all counters 0. On failure *s is
 * untouched and the message names the flag, e.g. "--hysteresis 0: expected
 * an integer >= 1". */
DT_API dt_status dt_loss_scaler_init(dt_loss_scaler *s, const dt_loss_scaler_config *cfg);
/* The current scale S: multiply the loss by it; unscale gradients by 1/S. */
DT_API float dt_loss_scaler_scale(const dt_loss_scaler *s);
/* 1 if the scaler is static (--loss-scale > 0). */
DT_API int dt_loss_scaler_is_static(const dt_loss_scaler *s);
/* Advance one optimizer step; overflow != 0 if any gradient was inf/NaN.
 * Fills *ev when ev is not NULL. Returns 1 if the step must be skipped. */
DT_API int dt_loss_scaler_update(dt_loss_scaler *s, int overflow, dt_loss_scaler_event *ev);

#ifdef __cplusplus
}
#endif
#endif
