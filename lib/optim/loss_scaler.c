/* loss_scaler.c: the dynamic / static loss scaler (state machine and its
 * table in dt_loss_scaler.h).
 *
 * Invariants: min_scale <= S in dynamic mode, S finite and > 0; 1 <= h <= H;
 * 0 <= g < window; skipped == overflows; every update takes exactly one row
 * of the table, so the event flags skip/grew/backed_off/absorbed/at_min
 * are consistent (grew only without skip; exactly one of backed_off,
 * absorbed, at_min with a dynamic skip). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "dt_loss_scaler.h"

void dt_loss_scaler_config_default(dt_loss_scaler_config *cfg)
{
    cfg->initial_scale = 65536.0f;
    cfg->growth_factor = 2.0f;
    cfg->backoff_factor = 0.5f;
    cfg->window = 1000;
    cfg->hysteresis = 2;
    cfg->consecutive_hysteresis = 0;
    cfg->min_scale = 1.0f;
    cfg->static_scale = 0.0f;
    cfg->min_patience = 100;
}

static dt_status dt__loss_scaler_validate(const dt_loss_scaler_config *c)
{
    if (!(isfinite(c->static_scale) && c->static_scale >= 0.0f))
        return DT_FAIL(DT_ERR_INVALID, "--loss-scale %g: expected 0 (dynamic) or a finite value > 0",
                       (double)c->static_scale);
    if (!(isfinite(c->initial_scale) && c->initial_scale > 0.0f))
        return DT_FAIL(DT_ERR_INVALID, "--initial-loss-scale %g: expected a finite value > 0",
                       (double)c->initial_scale);
    if (!(isfinite(c->min_scale) && c->min_scale > 0.0f))
        return DT_FAIL(DT_ERR_INVALID, "--min-loss-scale %g: expected a finite value > 0", (double)c->min_scale);
    if (c->static_scale == 0.0f && c->initial_scale < c->min_scale)
        return DT_FAIL(DT_ERR_INVALID, "--initial-loss-scale %g is below --min-loss-scale %g: expected initial >= min",
                       (double)c->initial_scale, (double)c->min_scale);
    if (c->window < 1)
        return DT_FAIL(DT_ERR_INVALID, "--loss-scale-window %d: expected an integer >= 1 (clean steps per growth)",
                       c->window);
    if (c->hysteresis < 1)
        return DT_FAIL(DT_ERR_INVALID, "--hysteresis %d: expected an integer >= 1 (1: back off on every overflow)",
                       c->hysteresis);
    if (!(isfinite(c->growth_factor) && c->growth_factor > 1.0f))
        return DT_FAIL(DT_ERR_INVALID, "loss scaler growth_factor %g: expected a finite value > 1",
                       (double)c->growth_factor);
    if (!(c->backoff_factor > 0.0f && c->backoff_factor < 1.0f))
        return DT_FAIL(DT_ERR_INVALID, "loss scaler backoff_factor %g: expected a value in (0, 1)",
                       (double)c->backoff_factor);
    if (c->min_patience < 0)
        return DT_FAIL(DT_ERR_INVALID,
                       "--min-loss-scale-patience %d: expected an integer >= 0 (0: never stop at the minimum scale)",
                       c->min_patience);
    if (c->consecutive_hysteresis != 0 && c->consecutive_hysteresis != 1)
        return DT_FAIL(DT_ERR_INVALID, "loss scaler consecutive_hysteresis %d: expected 0 or 1",
                       c->consecutive_hysteresis);
    return DT_OK;
}

dt_status dt_loss_scaler_init(dt_loss_scaler *s, const dt_loss_scaler_config *cfg)
{
    dt_loss_scaler_config def;
    if (!cfg) {
        dt_loss_scaler_config_default(&def);
        cfg = &def;
    }
    DT_CHECK(dt__loss_scaler_validate(cfg));
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->scale = cfg->static_scale > 0.0f ? cfg->static_scale : cfg->initial_scale;
    s->hysteresis = cfg->hysteresis;
    return DT_OK;
}

float dt_loss_scaler_scale(const dt_loss_scaler *s) { return s->scale; }

int dt_loss_scaler_is_static(const dt_loss_scaler *s) { return s->cfg.static_scale > 0.0f; }

int dt_loss_scaler_update(dt_loss_scaler *s, int overflow, dt_loss_scaler_event *ev)
{
    dt_loss_scaler_event e;
    memset(&e, 0, sizeof e);
    e.scale_before = s->scale;
    s->steps++;

    if (overflow) {
        e.skip = 1;
        s->overflows++;
        s->skipped++;
        if (!dt_loss_scaler_is_static(s)) {
            s->good_steps = 0;
            if (s->hysteresis > 1) {
                s->hysteresis--;
                e.absorbed = 1;
            } else if (s->scale > s->cfg.min_scale) {
                float next = s->scale * s->cfg.backoff_factor;
                s->scale = next > s->cfg.min_scale ? next : s->cfg.min_scale;
                s->backoffs++;
                e.backed_off = 1;
            } else {
                e.at_min = 1;
                e.at_min_first = s->min_overflows == 0;
                s->min_overflows++;
                s->min_streak++;
            }
        }
    } else if (!dt_loss_scaler_is_static(s)) {
        if (s->cfg.consecutive_hysteresis) s->hysteresis = s->cfg.hysteresis;
        if (++s->good_steps == s->cfg.window) {
            float next = s->scale * s->cfg.growth_factor;
            if (next <= FLT_MAX) { /* false for inf: the scale stays finite */
                s->scale = next;
                s->growths++;
                e.grew = 1;
            }
            s->good_steps = 0;
            s->hysteresis = s->cfg.hysteresis;
        }
    }

    if (!e.at_min) s->min_streak = 0;
    e.scale_after = s->scale;
    if (ev) *ev = e;
    return e.skip;
}
