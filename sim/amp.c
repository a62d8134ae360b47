/* amp.c: the simulator's mixed-precision numerics model (dts_amp.h): fit
 * per-slot gradient magnitudes to a real fp16 run's grad_amax events, then
 * replay the dynamic loss scaler on random draws from the fit. The scaler
 * is lib/optim/loss_scaler.c's dt_loss_scaler_update itself; this file only
 * decides the overflow flag it is fed.
 *
 * The overflow rule, and why. Under --fp16 the CPU GPT (lib/model/gpt.c,
 * block.c, head.c) computes in FP32 but rounds to half (lib/core/half.c, round
 * to nearest even, overflow to inf) every activation, every activation
 * gradient after each op, and each micro-batch's parameter gradients
 * before they are accumulated in FP32 (gpt.c, dt__round of gmb). An inf
 * can therefore come from two places: an activation gradient (it then
 * spreads to every layer below, a cascade) or a parameter gradient (it
 * stays in its tensor). With the mean loss over n counted tokens, each
 * token's activation gradient carries a 1/n and a weight gradient sums n
 * tokens' outer products, so weight gradients are normally the larger
 * (|dlogits| <= S/n per element, while the tiny model's scaled lm_head.w
 * gradient reaches S/2 to S/8). The rule is therefore the parameter
 * gradients' rounding:
 *
 *     a step at scale S overflows  <=>  S * amax_l >= 65520 for some slot l
 *
 * with amax_l the slot's largest unscaled |g| (what grad_amax records) and
 * 65520 the half-way point between the largest half (65504) and 2^16, the
 * smallest value that rounds to inf (not 65504: 65504 <= x < 65520 rounds
 * down to 65504). The first overflowing slot in backward order is the one
 * the trainer reports (its first_bad tensor lies in it).
 *
 * Measured (tests/check_sim_amp.c, test_rule_matches_real): one step
 * from the same weights and batch at static scales 2^10..2^22, 4 seeds (52
 * runs, 24 overflowing): from the amax recorded at 2^10 the rule predicted
 * every run's overflow, its first overflowing slot and all 208 per-slot
 * inf/NaN flags (none was within 0.01 log2 of the limit). No cascade from
 * an activation gradient was seen: the embedding stayed finite while the
 * blocks above it overflowed. In training runs the first overflowing slot
 * is the head (lm_head.w) when the scale grows into the limit and block 0
 * or the embedding at gradient spikes.
 * Limits: with gradient accumulation the rounding applies to each
 * micro-batch's weighted share while grad_amax records their FP32 sum: with
 * k micro-batches that agree a share is about amax/k and the rule
 * over-predicts by up to a factor k in S (where they cancel, a share can
 * exceed amax and the rule under-predicts); validated for k = 1 only. A model
 * whose activation gradients are the larger (few counted tokens, e.g. one)
 * would overflow earlier than predicted.
 *
 * The gradient model and its fit: per slot, log2 amax ~ Normal(mu + slope
 * t, sigma), independent over slots and steps. Steps where a slot held an
 * inf/NaN are right-censored at log2(65520 / S) and fitted by EM (Tobit):
 * the censored values are replaced by their conditional mean and variance
 * given the bound. The trend is kept when |slope| / se(slope) >= 3 with at
 * least 10 steps, and held constant outside the fitted steps [t_lo, t_hi]
 * (a linear trend in log2 would otherwise run off to 0 or inf). Correlation
 * between slots and between steps is not modelled, and the normal tail is
 * too light for the occasional gradient spike (one step 2^6 above its
 * neighbours): predicting another run of the tiny model (check_sim_amp.c,
 * PREDICT_*), the skipped steps were within 2 and the final scale within a
 * factor 2 in 65 of 72 runs; the 7 misses under-predict (spikes).
 *
 * Invariants: dts_amp_simulate draws exactly n_slots normals per step from
 * one dt_rng stream, so (model, cfg, steps, seed) gives one trajectory;
 * nothing here keeps global state. */
#include "dts_amp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt_rng.h"

/* Trend kept at |t| >= this with at least DTS__AMP_TREND_MIN_N steps. */
#define DTS__AMP_TREND_T 3.0
#define DTS__AMP_TREND_MIN_N 10
#define DTS__AMP_EM_ITERS 200

static double dts__amp_extra(const dt_trace_event *e, const char *key, double dflt)
{
    return dt_trace_event_arg(e, key, dflt);
}

static int dts__amp_has_extra(const dt_trace_event *e, const char *key)
{
    return dt_trace_event_find_arg(e, key) != NULL;
}

static int dts__amp_is_event(const dt_trace_event *e)
{
    return e->ph == DT_TRACE_INSTANT && !strcmp(e->name, "grad_amax");
}

/* The pid of the grad_amax events used (the lowest), or -1 if none. */
static int dts__amp_pid(const dt_trace *t)
{
    int pid = -1;
    for (size_t i = 0; i < t->n_events; i++)
        if (dts__amp_is_event(&t->events[i]) && (pid < 0 || t->events[i].pid < pid)) pid = t->events[i].pid;
    return pid;
}

/* Checks one grad_amax event of pid; *slot, *iter, *scale out. */
static dt_status dts__amp_event(const dt_trace_event *e, size_t i, const char *name, int *slot, int64_t *iter,
                                double *scale)
{
    if (e->layer == DT_TRACE_NONE || e->layer < -1 || e->layer + 1 >= DTS_AMP_MAX_SLOTS)
        return DT_FAIL(DT_ERR_FORMAT, "%s: traceEvents[%zu]: grad_amax with layer %d (expected -1..%d)", name, i,
                       e->layer, DTS_AMP_MAX_SLOTS - 2);
    if (e->iter == DT_TRACE_NONE || e->iter < 0)
        return DT_FAIL(DT_ERR_FORMAT, "%s: traceEvents[%zu]: grad_amax without an iter >= 0", name, i);
    const double S = dts__amp_extra(e, "loss_scale", -1.0);
    if (!(S > 0) || !isfinite(S))
        return DT_FAIL(DT_ERR_FORMAT, "%s: traceEvents[%zu]: grad_amax without a loss_scale > 0", name, i);
    *slot = e->layer + 1;
    *iter = e->iter;
    *scale = S;
    return DT_OK;
}

/* Standard normal density and upper tail. */
static double dts__phi(double z) { return exp(-0.5 * z * z) * 0.39894228040143267794; /* 1/sqrt(2 pi) */ }
static double dts__q(double z) { return 0.5 * erfc(z * 0.70710678118654752440); /* 1/sqrt(2) */ }

/* Least squares y ~ a + b t over n points (b = 0 without trend). */
static void dts__amp_ols(int n, const double *t, const double *y, int trend, double *a, double *b)
{
    double st = 0, sy = 0;
    for (int i = 0; i < n; i++) st += t[i], sy += y[i];
    const double tm = st / n, ym = sy / n;
    double stt = 0, sty = 0;
    for (int i = 0; i < n; i++) stt += (t[i] - tm) * (t[i] - tm), sty += (t[i] - tm) * (y[i] - ym);
    *b = trend && stt > 0 ? sty / stt : 0.0;
    *a = ym - *b * tm;
}

/* Tobit fit by EM of y ~ Normal(a + b t, sigma) with cens[i] != 0 meaning
 * only y >= y[i] is known. Needs at least one uncensored point. *se_b is
 * the slope's standard error (as if every point were observed). */
static dt_status dts__amp_tobit(int n, const double *t, const double *y, const int *cens, int trend, double *a_out,
                                double *b_out, double *sigma_out, double *se_b)
{
    double *e = calloc((size_t)n, sizeof *e), *tu = calloc((size_t)n, sizeof *tu);
    if (!e || !tu) {
        free(e);
        free(tu);
        return DT_FAIL(DT_ERR_NOMEM, "amp fit: out of memory for %d steps", n);
    }
    int nu = 0;
    for (int i = 0; i < n; i++)
        if (!cens[i]) tu[nu] = t[i], e[nu] = y[i], nu++;
    double a, b;
    dts__amp_ols(nu, tu, e, trend, &a, &b);
    double ss = 0;
    for (int i = 0; i < nu; i++) ss += (e[i] - a - b * tu[i]) * (e[i] - a - b * tu[i]);
    double sigma = nu > 1 ? sqrt(ss / nu) : 0.0;
    for (int it = 0; it < DTS__AMP_EM_ITERS && nu < n; it++) {
        double var_sum = 0;
        for (int i = 0; i < n; i++) {
            const double m = a + b * t[i];
            if (!cens[i]) {
                e[i] = y[i];
                continue;
            }
            if (sigma <= 0) {
                e[i] = fmax(y[i], m);
                continue;
            }
            const double z = (y[i] - m) / sigma, q = dts__q(z);
            /* inverse Mills ratio; its asymptote where the tail underflows */
            const double lam = q > 1e-300 ? dts__phi(z) / q : z + 1.0 / z;
            e[i] = m + sigma * lam;
            var_sum += fmax(0.0, sigma * sigma * (1.0 + z * lam - lam * lam));
        }
        double a2, b2;
        dts__amp_ols(n, t, e, trend, &a2, &b2);
        ss = var_sum;
        for (int i = 0; i < n; i++) ss += (e[i] - a2 - b2 * t[i]) * (e[i] - a2 - b2 * t[i]);
        const double s2 = sqrt(ss / n);
        const int done = fabs(a2 - a) < 1e-12 && fabs(b2 - b) < 1e-12 && fabs(s2 - sigma) < 1e-12;
        a = a2, b = b2, sigma = s2;
        if (done) break;
    }
    double st = 0, stt = 0;
    for (int i = 0; i < n; i++) st += t[i];
    for (int i = 0; i < n; i++) stt += (t[i] - st / n) * (t[i] - st / n);
    const int dof = n - (trend ? 2 : 1);
    *se_b = stt > 0 && dof > 0 ? sigma * sqrt((double)n / dof) / sqrt(stt) : INFINITY;
    *a_out = a, *b_out = b, *sigma_out = sigma;
    free(e);
    free(tu);
    return DT_OK;
}

/* What both readers of a trace's grad_amax events do first: check the
 * arguments (null_msg when t is NULL or !have_out), default the name to
 * "trace", find *pid, the rank whose events are read (an error if none),
 * and check each of its events, counting them (*n_ev), the slots they use
 * (*n_slots) and their first and last iteration (*it_lo, *it_hi). */
static dt_status dts__amp_begin(const dt_trace *t, int have_out, const char *null_msg, const char **name, int *pid,
                                int *n_slots, size_t *n_ev, int64_t *it_lo, int64_t *it_hi)
{
    if (!t || !have_out) return DT_FAIL(DT_ERR_INVALID, "%s", null_msg);
    if (!*name) *name = "trace";
    *pid = dts__amp_pid(t);
    if (*pid < 0)
        return DT_FAIL(DT_ERR_FORMAT, "%s: no grad_amax events (run dtrain with --fp16 --trace to record them)", *name);
    *n_slots = 0;
    *n_ev = 0;
    *it_lo = INT64_MAX, *it_hi = INT64_MIN;
    for (size_t i = 0; i < t->n_events; i++) {
        const dt_trace_event *e = &t->events[i];
        if (!dts__amp_is_event(e) || e->pid != *pid) continue;
        int slot = 0;
        int64_t iter = 0;
        double S;
        DT_CHECK(dts__amp_event(e, i, *name, &slot, &iter, &S));
        if (slot + 1 > *n_slots) *n_slots = slot + 1;
        if (iter < *it_lo) *it_lo = iter;
        if (iter > *it_hi) *it_hi = iter;
        (*n_ev)++;
    }
    return DT_OK;
}

dt_status dts_grad_model_fit(const dt_trace *t, const char *name, dts_grad_model *out)
{
    /* first pass: checks, slots, steps */
    int pid, n_slots;
    size_t n_ev;
    int64_t t_lo, t_hi;
    DT_CHECK(dts__amp_begin(t, out != NULL, "dts_grad_model_fit: NULL trace or model", &name, &pid, &n_slots, &n_ev,
                            &t_lo, &t_hi));
    double *tt = malloc(n_ev * sizeof *tt), *yy = malloc(n_ev * sizeof *yy);
    int *cc = malloc(n_ev * sizeof *cc);
    if (!tt || !yy || !cc) {
        free(tt), free(yy), free(cc);
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %zu grad_amax events", name, n_ev);
    }
    dts_grad_model gm;
    memset(&gm, 0, sizeof gm);
    gm.n_slots = n_slots;
    gm.limit = DTS_AMP_F16_LIMIT;
    gm.t_lo = (double)t_lo;
    gm.t_hi = (double)t_hi;
    dt_status st = DT_OK;
    for (int s = 0; s < n_slots && st == DT_OK; s++) {
        int n = 0, nu = 0;
        for (size_t i = 0; i < t->n_events; i++) {
            const dt_trace_event *e = &t->events[i];
            if (!dts__amp_is_event(e) || e->pid != pid || e->layer + 1 != s) continue;
            const double S = dts__amp_extra(e, "loss_scale", 1.0), amax = dts__amp_extra(e, "amax", -1.0);
            const int bad = dts__amp_extra(e, "nonfinite", 0.0) > 0 || !dts__amp_has_extra(e, "amax");
            if (bad) { /* the slot overflowed: amax_l >= limit / S is all that is known */
                tt[n] = (double)e->iter, yy[n] = log2(gm.limit / S), cc[n] = 1;
                n++;
                gm.n_censored[s]++;
            } else if (amax > 0 && isfinite(amax)) {
                tt[n] = (double)e->iter, yy[n] = log2(amax), cc[n] = 0;
                n++, nu++;
                gm.n_obs[s]++;
            }
        }
        if (nu == 0) {
            st = DT_FAIL(DT_ERR_FORMAT, "%s: layer %d: no step with a finite, nonzero grad_amax to fit", name, s - 1);
            break;
        }
        double a = 0, b = 0, sigma = 0, se_b = INFINITY;
        if (n >= DTS__AMP_TREND_MIN_N) {
            st = dts__amp_tobit(n, tt, yy, cc, 1, &a, &b, &sigma, &se_b);
            if (st != DT_OK) break;
        }
        if (!(n >= DTS__AMP_TREND_MIN_N && fabs(b) >= DTS__AMP_TREND_T * se_b)) {
            st = dts__amp_tobit(n, tt, yy, cc, 0, &a, &b, &sigma, &se_b);
            b = 0;
        }
        gm.mu[s] = a, gm.slope[s] = b, gm.sigma[s] = sigma;
    }
    free(tt), free(yy), free(cc);
    if (st == DT_OK) *out = gm;
    return st;
}

dt_status dts_grad_model_constant(int n_slots, double log2_amax, dts_grad_model *out)
{
    if (!out || n_slots < 1 || n_slots > DTS_AMP_MAX_SLOTS || !isfinite(log2_amax))
        return DT_FAIL(DT_ERR_INVALID, "grad model: %d slots (expected 1..%d), log2 amax %g", n_slots,
                       DTS_AMP_MAX_SLOTS, log2_amax);
    memset(out, 0, sizeof *out);
    out->n_slots = n_slots;
    out->limit = DTS_AMP_F16_LIMIT;
    for (int s = 0; s < n_slots; s++) out->mu[s] = log2_amax;
    return DT_OK;
}

int dts_amp_first_overflow(const dts_grad_model *gm, float scale, const double *log2_amax)
{
    for (int s = gm->n_slots - 1; s >= 0; s--)
        if ((double)scale * exp2(log2_amax[s]) >= gm->limit) return s;
    return -1;
}

static dt_status dts__amp_check_model(const dts_grad_model *gm)
{
    if (!gm || gm->n_slots < 1 || gm->n_slots > DTS_AMP_MAX_SLOTS)
        return DT_FAIL(DT_ERR_INVALID, "grad model: %d slots (expected 1..%d)", gm ? gm->n_slots : 0,
                       DTS_AMP_MAX_SLOTS);
    if (!(gm->limit > 0) || !isfinite(gm->limit) || !(gm->t_lo <= gm->t_hi))
        return DT_FAIL(DT_ERR_INVALID, "grad model: limit %g, steps [%g, %g]", gm->limit, gm->t_lo, gm->t_hi);
    for (int s = 0; s < gm->n_slots; s++)
        if (!isfinite(gm->mu[s]) || !isfinite(gm->slope[s]) || !(gm->sigma[s] >= 0) || !isfinite(gm->sigma[s]))
            return DT_FAIL(DT_ERR_INVALID, "grad model: slot %d: mu %g, slope %g, sigma %g", s, gm->mu[s], gm->slope[s],
                           gm->sigma[s]);
    return DT_OK;
}

dt_status dts_amp_simulate(const dts_grad_model *gm, const dt_loss_scaler_config *cfg, int64_t steps, uint64_t seed,
                           dts_amp_result *out)
{
    if (!out) return DT_FAIL(DT_ERR_INVALID, "dts_amp_simulate: NULL result");
    DT_CHECK(dts__amp_check_model(gm));
    if (steps < 0) return DT_FAIL(DT_ERR_INVALID, "amp simulation: %lld steps (expected >= 0)", (long long)steps);
    dt_loss_scaler sc;
    DT_CHECK(dt_loss_scaler_init(&sc, cfg));
    dts_amp_result r;
    memset(&r, 0, sizeof r);
    r.trace = calloc(steps ? (size_t)steps : 1, sizeof *r.trace);
    if (!r.trace) return DT_FAIL(DT_ERR_NOMEM, "amp simulation: out of memory for %lld steps", (long long)steps);
    dt_rng rng;
    dt_rng_seed(&rng, seed);
    double x[DTS_AMP_MAX_SLOTS];
    for (int64_t k = 0; k < steps; k++) {
        const double tc = fmin(fmax((double)k, gm->t_lo), gm->t_hi);
        for (int s = 0; s < gm->n_slots; s++) x[s] = gm->mu[s] + gm->slope[s] * tc + gm->sigma[s] * dt_rng_normal(&rng);
        dts_amp_step *st = &r.trace[k];
        st->step = k;
        st->scale = dt_loss_scaler_scale(&sc);
        st->layer = dts_amp_first_overflow(gm, st->scale, x);
        st->overflow = st->layer >= 0;
        dt_loss_scaler_event ev;
        st->skipped = dt_loss_scaler_update(&sc, st->overflow, &ev);
    }
    r.steps = steps;
    r.overflows = sc.overflows;
    r.skipped = sc.skipped;
    r.backoffs = sc.backoffs;
    r.growths = sc.growths;
    r.final_scale = dt_loss_scaler_scale(&sc);
    *out = r;
    return DT_OK;
}

dt_status dts_amp_observe(const dt_trace *t, const char *name, dts_amp_result *out)
{
    int pid, n_slots;
    size_t n_ev;
    int64_t lo, hi; /* pid has events: hi >= 0 */
    DT_CHECK(dts__amp_begin(t, out != NULL, "dts_amp_observe: NULL trace or result", &name, &pid, &n_slots, &n_ev, &lo,
                            &hi));
    dts_amp_result r;
    memset(&r, 0, sizeof r);
    r.steps = hi + 1;
    r.trace = calloc((size_t)r.steps, sizeof *r.trace);
    if (!r.trace) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %lld steps", name, (long long)r.steps);
    for (int64_t k = 0; k < r.steps; k++) r.trace[k].step = k, r.trace[k].layer = -1;
    float last = 0.0f; /* the last loss_scale counter: the scale after the last step */
    for (size_t i = 0; i < t->n_events; i++) {
        const dt_trace_event *e = &t->events[i];
        if (e->pid == pid && e->ph == DT_TRACE_COUNTER && !strcmp(e->name, "loss_scale")) last = (float)e->value;
        if (!dts__amp_is_event(e) || e->pid != pid) continue;
        dts_amp_step *st = &r.trace[e->iter];
        st->scale = (float)dts__amp_extra(e, "loss_scale", 0.0);
        if (dts__amp_extra(e, "nonfinite", 0.0) > 0 || !dts__amp_has_extra(e, "amax")) {
            st->overflow = st->skipped = 1;
            if (e->layer + 1 > st->layer) st->layer = e->layer + 1;
        }
    }
    for (int64_t k = 0; k < r.steps; k++) {
        const dts_amp_step *st = &r.trace[k];
        if (st->scale <= 0.0f) {
            free(r.trace);
            return DT_FAIL(DT_ERR_FORMAT, "%s: step %lld has no grad_amax events", name, (long long)k);
        }
        r.overflows += st->overflow;
        r.skipped += st->skipped;
        const float next = k + 1 < r.steps ? r.trace[k + 1].scale : last > 0.0f ? last : st->scale;
        r.growths += next > st->scale;
        r.backoffs += next < st->scale;
    }
    r.final_scale = r.steps ? (last > 0.0f ? last : r.trace[r.steps - 1].scale) : 0.0f;
    *out = r;
    return DT_OK;
}

void dts_amp_result_free(dts_amp_result *r)
{
    if (!r) return;
    free(r->trace);
    r->trace = NULL;
}
