/* fp8.c: the simulator's FP8 numerics model (dts_fp8.h): from one real
 * FP8 run's trace, what share of each FP8 tensor's values other settings
 * would saturate (|v s| > max, set to the max) or flush (non-zero, |v s|
 * <= min_subnormal / 2, set to 0), and the comparison with a held-out
 * run's measured counts (dtsim fp8). The formats, the conversion's
 * thresholds and the scale rules are include/dt_fp8.h's functions; the
 * delayed recipe's history is replayed as lib/train/fp8_train.c runs it.
 *
 * What a run's trace gives (docs/trace-format.md): per tensor and step the
 * amax over every micro-batch and rank, the values converted, and (delayed)
 * the scale in force; once, fp8_hist, the run's non-zero values by j =
 * floor(log2 amax) - floor(log2 |v|) below their conversion call's amax.
 *
 * The model, per tensor:
 *  1. The distribution of u = log2(amax / |v|) over the non-zero values is
 *     the same at every step (stationary), and a step's conversions count
 *     as one: u relative to the step's amax. Exact in the binning for one
 *     micro-batch on one rank (one counted call per tensor and step);
 *     with several calls a call's amax can be below the step's, which
 *     this ignores.
 *  2. The distribution of u in unit cells p[0..63] is recovered from the
 *     histogram: j is counted from floor(log2 amax), not from amax, so a
 *     step whose amax sits a = frac(log2 amax) into its binade puts cell
 *     i's values [i, i + a) into bucket i and [i + a, i + 1) into bucket
 *     i + 1 (values log-uniform within a cell). Over the run bucket j =
 *     A p[j] + (1 - A) p[j - 1], A the steps' mean a weighted by their
 *     values (clamped to [0.01, 0.99]); p is its maximum-likelihood
 *     solution (EM, 2000 iterations: every p >= 0, sum 1).
 *  3. A step k of c_k non-zero values (the step's values times the run's
 *     non-zero share) and scale s_k then has count(c_k, u) values within
 *     u of its amax: log-uniform inside cells 1..63; inside the top cell
 *     c_k p[0] u^beta, at least 1 (the amax itself). Flushed: c_k - count
 *     at u_f = log2(amax_k s_k / (min_subnormal / 2)). Saturated, when
 *     amax_k s_k > max in float (as the conversion computes it): count at
 *     u_s = log2(amax_k s_k / max), but at most the top cell's c_k p[0]
 *     (u_s capped at 1): an amax more than a binade above the history's
 *     is a spike carried by a few values, not the whole distribution
 *     moving up. In the 15 runs A of the validation below, 9 steps had
 *     u_s >= 1 (1.06 to 4.66): 43 to 308 values saturated, the top cell
 *     gives 38 to 83, the whole distribution 94 to 4612.
 *  4. beta, the top cell's shape. The histogram cannot say how the values
 *     of the top binade lie (a Gaussian's thin out towards its max; an
 *     activation repeated by identical tokens piles up at it), and
 *     saturation under delayed scaling is decided there: a step's amax a
 *     few percent above the history's. beta is fitted to the run's own
 *     saturating steps with u_s < 1 (delayed runs record s_k and the
 *     count): sum_k max(1, c_k p[0] u_k^beta) = sum_k saturated_k, beta in
 *     [1, 16] by bisection; per tensor, or the run's pooled value for a
 *     tensor that never saturated; 1 (log-uniform) for a run without
 *     saturation (tensorwise or blockwise: then an overestimate). For run
 *     A of tests/sim.sh (2 blocks, 30 steps, hybrid delayed, history 16)
 *     the fit gives beta 1 to 16 by tensor, pooled 2.37, and the run's
 *     own saturated fraction 8.7e-5 (measured 9.5e-5); log-uniform (beta
 *     1, dtsim fp8 --top-beta 1) gives 7.1e-4.
 *  5. The scale of step k, per recipe, from the run's amax sequence (the
 *     same trajectory under every setting: the real ones differ a little):
 *     delayed: the first step scales from its own amax (dtrain's first
 *     step, with no history: torchao's initialisation); after each step
 *     its amax enters a ring of H (zeros for a step the tensor did not
 *     run, as the runtime pushes), dt_fp8_history_amax gives max or
 *     most_recent, and dt_fp8_scale_from_amax the next step's scale (kept
 *     when it is 0); tensorwise: dt_fp8_scale_from_amax of the step's own
 *     amax (never saturates); blockwise: per tile a power-of-two scale
 *     from the tile's amax, never saturating. A tile's amax is at most the
 *     tensor's, so its scale is at least the power-of-two scale of the
 *     tensor's amax and it flushes at most what that scale flushes:
 *     blockwise is predicted with the tensor's power-of-two scale, an
 *     upper bound on flushing (the histogram is per tensor, not per tile).
 *
 * Measured (docs/simulator.md, "FP8 numerics"): 90 held-out runs (15
 * seeds x margin 2, history 1 most_recent, tensorwise, e4m3, blockwise,
 * e4m3 tensorwise), each predicted from its seed's run A: the saturated
 * fraction within -30% .. +30% where it is above 1e-4, the flushed
 * fraction within -31% .. +68% (the largest errors on fractions near
 * 5e-6), each tensor's flushed count (100 or more) within a factor 1.5.
 *
 * Not modelled: how training changes with the settings (the amaxes are
 * run A's); a spike's shape (above); several calls per step (1., with
 * gradient accumulation or data parallelism); a resumed run's history
 * before its first traced step (replayed as a fresh start).
 *
 * Invariants: no global state; dts_fp8_predict reads the run only, so a
 * run fitted once predicts any number of settings. */
#include "dts_fp8.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_file.h"
#include "dts_json.h"

#define DTS__FP8_EM_ITERS 2000
#define DTS__FP8_A_MIN 0.01
#define DTS__FP8_BISECT 60

static const char *const dts__lin[4] = {"qkv", "attproj", "fc", "fcproj"};
static const char *const dts__role[3] = {"x", "w", "dy"};

const char *dts_fp8_tensor_name(int i, char *buf, size_t n)
{
    const int k = i % DTS_FP8_PER_BLOCK;
    snprintf(buf, n, "h.%d.%s.%s", i / DTS_FP8_PER_BLOCK, dts__lin[k / 3], dts__role[k % 3]);
    return buf;
}

int dts_fp8_tensor_index(const char *name)
{
    int l = -1, used = 0;
    if (!name || sscanf(name, "h.%d.%n", &l, &used) != 1 || used == 0 || l < 0 || l >= DTS_FP8_MAX_LAYERS) return -1;
    const char *rest = name + used;
    for (int lin = 0; lin < 4; lin++) {
        const size_t ln = strlen(dts__lin[lin]);
        if (strncmp(rest, dts__lin[lin], ln) != 0 || rest[ln] != '.') continue;
        for (int role = 0; role < 3; role++)
            if (!strcmp(rest + ln + 1, dts__role[role])) return l * DTS_FP8_PER_BLOCK + lin * 3 + role;
    }
    return -1;
}

/* ---- settings ---------------------------------------------------------------------- */

const char *dts_fp8_settings_text(const dts_fp8_settings *s, char *buf, size_t n)
{
    if (s->recipe == DT_FP8_DELAYED)
        snprintf(buf, n, "%s %s, margin %d, history %d, %s", dt_fp8_mode_name(s->mode), dt_fp8_recipe_name(s->recipe),
                 s->margin, s->history_len, dt_fp8_amax_algo_name(s->algo));
    else snprintf(buf, n, "%s %s, margin %d", dt_fp8_mode_name(s->mode), dt_fp8_recipe_name(s->recipe), s->margin);
    return buf;
}

/* The configuration object in a parsed trace, summary or configuration. */
static const json_t *dts__fp8_config_root(const json_t *root)
{
    const json_t *od = json_object_get(root, "otherData");
    if (json_is_object(od) && json_is_object(json_object_get(od, "config"))) return json_object_get(od, "config");
    const json_t *c = json_object_get(root, "config");
    if (json_is_object(c)) return c;
    return root;
}

/* o[key] as a string naming one of parse's values; absent or null: 0 and *out kept */
static dt_status dts__fp8_choice(const json_t *o, const char *key, const char *what, const char *want,
                                 dt_status (*parse)(const char *, int *), int *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return DT_OK;
    int x;
    if (!json_is_string(v) || parse(json_string_value(v), &x) != DT_OK) {
        dt_clear_error();
        return dts__json_expected(DT_ERR_INVALID, what, key, want, v);
    }
    *out = x;
    return DT_OK;
}

static dt_status dts__mode_parse(const char *s, int *o)
{
    dt_fp8_mode m;
    DT_CHECK(dt_fp8_mode_parse(s, &m));
    *o = (int)m;
    return DT_OK;
}
static dt_status dts__recipe_parse(const char *s, int *o)
{
    dt_fp8_recipe r;
    DT_CHECK(dt_fp8_recipe_parse(s, &r));
    *o = (int)r;
    return DT_OK;
}
static dt_status dts__algo_parse(const char *s, int *o)
{
    dt_fp8_amax_algo a;
    DT_CHECK(dt_fp8_amax_algo_parse(s, &a));
    *o = (int)a;
    return DT_OK;
}

/* o[key] as an integer in lo..hi; absent or null: *out kept */
static dt_status dts__fp8_int(const json_t *o, const char *key, const char *what, int lo, int hi, int *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return DT_OK;
    int64_t x;
    if (!dts__json_int(v, lo, hi, &x)) {
        char want[48];
        snprintf(want, sizeof want, "an integer in %d..%d", lo, hi);
        return dts__json_expected(DT_ERR_INVALID, what, key, want, v);
    }
    *out = (int)x;
    return DT_OK;
}

static dt_status dts__fp8_settings_json(const json_t *root, const char *what, dts_fp8_settings *out)
{
    const json_t *o = dts__fp8_config_root(root);
    if (!json_is_object(o))
        return DT_FAIL(DT_ERR_FORMAT, "%s: expected a dtrain configuration, trace or summary", what);
    const json_t *f = json_object_get(o, "fp8_format");
    if (!f || json_is_null(f))
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: not an FP8 run (its configuration has no \"fp8_format\"; run dtrain with "
                       "--fp8-format)",
                       what);
    /* dtrain's defaults for what a configuration leaves out (dt_train_config_default) */
    dts_fp8_settings s = {.mode = DT_FP8_MODE_HYBRID,
                          .recipe = DT_FP8_DELAYED,
                          .algo = DT_FP8_AMAX_MAX,
                          .margin = 0,
                          .history_len = 1024};
    int mode = (int)s.mode, recipe = (int)s.recipe, algo = (int)s.algo;
    DT_CHECK(dts__fp8_choice(o, "fp8_format", what, "\"e4m3\" or \"hybrid\"", dts__mode_parse, &mode));
    DT_CHECK(dts__fp8_choice(o, "fp8_recipe", what, "\"delayed\", \"tensorwise\" or \"blockwise\"", dts__recipe_parse,
                             &recipe));
    DT_CHECK(dts__fp8_choice(o, "fp8_amax_compute_algo", what, "\"max\" or \"most_recent\"", dts__algo_parse, &algo));
    DT_CHECK(dts__fp8_int(o, "fp8_margin", what, 0, 32, &s.margin));
    DT_CHECK(dts__fp8_int(o, "fp8_amax_history_len", what, 1, 65536, &s.history_len));
    s.mode = (dt_fp8_mode)mode;
    s.recipe = (dt_fp8_recipe)recipe;
    s.algo = (dt_fp8_amax_algo)algo;
    *out = s;
    return DT_OK;
}

dt_status dts_fp8_settings_from_config(const char *json_text, const char *what, dts_fp8_settings *out)
{
    if (!json_text || !out) return DT_FAIL(DT_ERR_INVALID, "dts_fp8_settings_from_config: NULL argument");
    if (!what) what = "config";
    json_error_t err;
    json_t *root = json_loads(json_text, 0, &err);
    if (!root) return DT_FAIL(DT_ERR_FORMAT, "%s: line %d, column %d: %s", what, err.line, err.column, err.text);
    const dt_status st = dts__fp8_settings_json(root, what, out);
    json_decref(root);
    return st;
}

/* ---- runs -------------------------------------------------------------------------- */

void dts_fp8_run_free(dts_fp8_run *r)
{
    if (!r) return;
    for (int i = 0; r->t && i < r->n; i++) {
        free(r->t[i].amax);
        free(r->t[i].scale);
        free(r->t[i].values);
        free(r->t[i].saturated);
        free(r->t[i].flushed);
    }
    free(r->t);
    memset(r, 0, sizeof *r);
}

dt_status dts_fp8_run_init(dts_fp8_run *r, int layers, int64_t steps, const dts_fp8_settings *set)
{
    if (!r || !set) return DT_FAIL(DT_ERR_INVALID, "dts_fp8_run_init: NULL argument");
    memset(r, 0, sizeof *r);
    if (layers < 1 || layers > DTS_FP8_MAX_LAYERS || steps < 1 || steps > ((int64_t)1 << 32))
        return DT_FAIL(DT_ERR_INVALID, "fp8 run: %d blocks, %lld steps (expected 1..%d and 1..2^32)", layers,
                       (long long)steps, DTS_FP8_MAX_LAYERS);
    r->set = *set;
    r->layers = layers;
    r->n = layers * DTS_FP8_PER_BLOCK;
    r->steps = steps;
    r->beta_pooled = 1.0;
    r->t = calloc((size_t)r->n, sizeof *r->t);
    if (!r->t) return DT_FAIL(DT_ERR_NOMEM, "fp8 run: out of memory for %d tensors", r->n);
    const size_t k = (size_t)steps;
    for (int i = 0; i < r->n; i++) {
        dts_fp8_tensor *t = &r->t[i];
        t->amax = calloc(k, sizeof *t->amax);
        t->scale = calloc(k, sizeof *t->scale);
        t->values = calloc(k, sizeof *t->values);
        t->saturated = calloc(k, sizeof *t->saturated);
        t->flushed = calloc(k, sizeof *t->flushed);
        t->beta = 1.0;
        if (!t->amax || !t->scale || !t->values || !t->saturated || !t->flushed) {
            dts_fp8_run_free(r);
            return DT_FAIL(DT_ERR_NOMEM, "fp8 run: out of memory for %d tensors of %lld steps", layers * 12,
                           (long long)steps);
        }
    }
    return DT_OK;
}

static int dts__fp8_is(const dt_trace_event *e, const char *prefix)
{
    return e->ph == DT_TRACE_INSTANT && !strncmp(e->name, prefix, strlen(prefix));
}

/* The event's tensor index from its layer and "tensor", checked against its name. */
static dt_status dts__fp8_event_tensor(const dt_trace_event *e, size_t i, const char *name, const char *prefix,
                                       int *out)
{
    const double k = dt_trace_event_arg(e, "tensor", -1.0);
    const int idx = dts_fp8_tensor_index(e->name + strlen(prefix));
    if (e->layer == DT_TRACE_NONE || e->layer < 0 || e->layer >= DTS_FP8_MAX_LAYERS || !(k >= 0 && k < 12) ||
        k != floor(k) || idx != e->layer * DTS_FP8_PER_BLOCK + (int)k)
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: traceEvents[%zu] (\"%s\"): expected a name h.L.lin.role matching its \"layer\" "
                       "(0..%d) and \"tensor\" (0..11)",
                       name, i, e->name, DTS_FP8_MAX_LAYERS - 1);
    *out = idx;
    return DT_OK;
}

/* e's extra key as a finite number >= 0 */
static dt_status dts__fp8_arg(const dt_trace_event *e, size_t i, const char *name, const char *key, double *out)
{
    const double v = dt_trace_event_arg(e, key, -1.0);
    if (!(v >= 0) || !isfinite(v))
        return DT_FAIL(DT_ERR_FORMAT, "%s: traceEvents[%zu] (\"%s\"): \"%s\" missing or not a finite number >= 0", name,
                       i, e->name, key);
    *out = v;
    return DT_OK;
}

dt_status dts_fp8_run_read(const dt_trace *tr, const char *name, dts_fp8_run *out)
{
    if (!tr || !out) return DT_FAIL(DT_ERR_INVALID, "dts_fp8_run_read: NULL argument");
    if (!name) name = "trace";
    memset(out, 0, sizeof *out);
    if (!tr->config_json) return DT_FAIL(DT_ERR_FORMAT, "%s: no otherData.config (not a dtrain trace)", name);
    dts_fp8_settings set;
    DT_CHECK(dts_fp8_settings_from_config(tr->config_json, name, &set));
    /* the range of steps and blocks first */
    int64_t lo = INT64_MAX, hi = -1;
    int layers = 0;
    for (size_t i = 0; i < tr->n_events; i++) {
        const dt_trace_event *e = &tr->events[i];
        if (!dts__fp8_is(e, "fp8 ")) continue;
        int idx;
        DT_CHECK(dts__fp8_event_tensor(e, i, name, "fp8 ", &idx));
        if (e->iter == DT_TRACE_NONE || e->iter < 0)
            return DT_FAIL(DT_ERR_FORMAT, "%s: traceEvents[%zu] (\"%s\"): no \"iter\" >= 0", name, i, e->name);
        lo = e->iter < lo ? e->iter : lo;
        hi = e->iter > hi ? e->iter : hi;
        if (e->layer + 1 > layers) layers = e->layer + 1;
    }
    if (hi < 0)
        return DT_FAIL(DT_ERR_FORMAT, "%s: no \"fp8 <tensor>\" events (run dtrain with --fp8-format and --trace)",
                       name);
    DT_CHECK(dts_fp8_run_init(out, layers, hi - lo + 1, &set));
    out->first_iter = lo;
    dt_status st = DT_OK;
    int any_hist = 0;
    for (size_t i = 0; st == DT_OK && i < tr->n_events; i++) {
        const dt_trace_event *e = &tr->events[i];
        int idx;
        if (dts__fp8_is(e, "fp8 ")) {
            st = dts__fp8_event_tensor(e, i, name, "fp8 ", &idx);
            double amax = 0, sat = 0, fl = 0, vals = 0, scale = 0;
            if (st == DT_OK) st = dts__fp8_arg(e, i, name, "amax", &amax);
            if (st == DT_OK) st = dts__fp8_arg(e, i, name, "saturated", &sat);
            if (st == DT_OK) st = dts__fp8_arg(e, i, name, "flushed", &fl);
            if (st == DT_OK) st = dts__fp8_arg(e, i, name, "values", &vals);
            if (st == DT_OK && dt_trace_event_find_arg(e, "scale")) st = dts__fp8_arg(e, i, name, "scale", &scale);
            if (st != DT_OK) break;
            if (sat + fl > vals || amax > FLT_MAX) {
                st = DT_FAIL(DT_ERR_FORMAT,
                             "%s: traceEvents[%zu] (\"%s\"): saturated %.17g + flushed %.17g > values "
                             "%.17g, or an amax beyond a float",
                             name, i, e->name, sat, fl, vals);
                break;
            }
            dts_fp8_tensor *t = &out->t[idx];
            const size_t k = (size_t)(e->iter - lo);
            if (t->values[k] > 0 || t->amax[k] > 0) {
                st = DT_FAIL(DT_ERR_FORMAT, "%s: traceEvents[%zu]: a second \"%s\" of iteration %lld", name, i, e->name,
                             (long long)e->iter);
                break;
            }
            t->present = 1;
            t->amax[k] = (float)amax;
            t->scale[k] = (float)scale;
            t->values[k] = vals;
            t->saturated[k] = sat;
            t->flushed[k] = fl;
        } else if (dts__fp8_is(e, "fp8_hist ")) {
            st = dts__fp8_event_tensor(e, i, name, "fp8_hist ", &idx);
            double from = -1;
            if (st == DT_OK) st = dts__fp8_arg(e, i, name, "from", &from);
            if (st == DT_OK && (from != floor(from) || from >= DTS_FP8_REL))
                st = DT_FAIL(DT_ERR_FORMAT,
                             "%s: traceEvents[%zu] (\"%s\"): \"from\" %.17g: expected an integer in 0..%d", name, i,
                             e->name, from, DTS_FP8_REL - 1);
            if (st != DT_OK) break;
            if (idx >= out->n) continue; /* a block with no fp8 events: nothing to predict */
            for (int b = 0; st == DT_OK && b < 6; b++) {
                char key[8];
                snprintf(key, sizeof key, "b%d", b);
                if (!dt_trace_event_find_arg(e, key)) continue;
                const int j = (int)from + b;
                double c = 0;
                st = dts__fp8_arg(e, i, name, key, &c);
                if (st == DT_OK && j >= DTS_FP8_REL)
                    st = DT_FAIL(DT_ERR_FORMAT, "%s: traceEvents[%zu] (\"%s\"): \"%s\" is j = %d, beyond %d", name, i,
                                 e->name, key, j, DTS_FP8_REL - 1);
                if (st == DT_OK) out->t[idx].hist[j] += c;
            }
            any_hist = 1;
        }
    }
    if (st == DT_OK && !any_hist)
        st = DT_FAIL(DT_ERR_FORMAT, "%s: no \"fp8_hist <tensor>\" events (the run ended before its trace closed?)",
                     name);
    if (st == DT_OK) st = dts_fp8_fit(out);
    if (st != DT_OK) dts_fp8_run_free(out);
    return st;
}

/* ---- the fit ----------------------------------------------------------------------- */

double dts_fp8_count_within(const dts_fp8_tensor *t, double c, double u)
{
    if (!(u > 0) || !(c > 0)) return 0.0;
    const double c0 = c * t->p[0];
    double n;
    if (u < 1.0) {
        n = c0 * pow(u, t->beta);
    } else {
        n = c0;
        for (int i = 1; i < DTS_FP8_REL && u > i; i++) n += c * t->p[i] * (u - i < 1.0 ? u - i : 1.0);
    }
    if (n < 1.0) n = 1.0; /* the amax itself */
    return n < c ? n : c;
}

/* The distribution of u in unit cells from the histogram (step 2 atop the file). */
static void dts__fp8_deconvolve(dts_fp8_tensor *t, double A)
{
    const double *h = t->hist;
    double N = 0;
    int lo = DTS_FP8_REL, hi = -1;
    for (int j = 0; j < DTS_FP8_REL; j++) {
        N += h[j];
        if (h[j] > 0) {
            if (j < lo) lo = j;
            hi = j;
        }
    }
    memset(t->p, 0, sizeof t->p);
    if (hi < 0) return;
    /* cells that can feed the buckets seen: j - 1 and j */
    const int c_lo = lo > 0 ? lo - 1 : 0, c_hi = hi;
    for (int i = c_lo; i <= c_hi; i++) t->p[i] = 1.0 / (c_hi - c_lo + 1);
    double e[DTS_FP8_REL], np[DTS_FP8_REL];
    for (int it = 0; it < DTS__FP8_EM_ITERS; it++) {
        /* the buckets' expected shares: cell i gives A to bucket i, 1 - A to i + 1; cell 63 all to 63 */
        for (int j = 0; j < DTS_FP8_REL; j++) {
            double x = (j < DTS_FP8_REL - 1 ? A : 1.0) * t->p[j];
            if (j > 0) x += (1.0 - A) * t->p[j - 1];
            e[j] = x;
        }
        double change = 0;
        for (int i = 0; i < DTS_FP8_REL; i++) {
            if (t->p[i] == 0) {
                np[i] = 0;
                continue;
            }
            double s = 0;
            if (i < DTS_FP8_REL - 1) {
                if (e[i] > 0) s += A * h[i] / e[i];
                if (e[i + 1] > 0) s += (1.0 - A) * h[i + 1] / e[i + 1];
            } else if (e[i] > 0) {
                s += h[i] / e[i];
            }
            np[i] = t->p[i] * s / N;
            change = fmax(change, fabs(np[i] - t->p[i]));
        }
        memcpy(t->p, np, sizeof np);
        if (change < 1e-13) break;
    }
}

/* One saturating step of the run, for beta's fit. */
typedef struct dts__fp8_obs {
    double c0, u, n;
} dts__fp8_obs;

static double dts__fp8_beta_sum(const dts__fp8_obs *o, int n, double beta)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += fmax(1.0, o[i].c0 * pow(o[i].u, beta));
    return s;
}

/* beta in [1, DTS_FP8_BETA_MAX] with the predicted saturated values equal to the measured */
static double dts__fp8_beta_fit(const dts__fp8_obs *o, int n)
{
    double want = 0;
    for (int i = 0; i < n; i++) want += o[i].n;
    if (dts__fp8_beta_sum(o, n, 1.0) <= want) return 1.0;
    if (dts__fp8_beta_sum(o, n, DTS_FP8_BETA_MAX) >= want) return DTS_FP8_BETA_MAX;
    double lo = 1.0, hi = DTS_FP8_BETA_MAX;
    for (int it = 0; it < DTS__FP8_BISECT; it++) {
        const double mid = 0.5 * (lo + hi);
        if (dts__fp8_beta_sum(o, n, mid) > want) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* The run's saturating steps of tensor i with u < 1 into o (room for steps); returns how many. */
static int dts__fp8_observe(const dts_fp8_run *r, int i, dts__fp8_obs *o)
{
    const dts_fp8_tensor *t = &r->t[i];
    if (r->set.recipe != DT_FP8_DELAYED) return 0;
    const float max = dt_fp8_max(dt_fp8_role_format(r->set.mode, i % 3));
    int n = 0;
    for (int64_t k = 0; k < r->steps; k++) {
        const float a = t->amax[k], s = t->scale[k];
        if (!(a > 0) || !(s > 0) || !(t->values[k] > 0)) continue;
        const float prod = a * s;
        if (!(prod > max)) continue;
        const double u = log2((double)prod / max);
        if (u >= 1.0) continue;
        o[n++] = (dts__fp8_obs){t->values[k] * t->nonzero * t->p[0], u, t->saturated[k]};
    }
    return n;
}

dt_status dts_fp8_fit(dts_fp8_run *r)
{
    if (!r || !r->t) return DT_FAIL(DT_ERR_INVALID, "dts_fp8_fit: no run");
    for (int i = 0; i < r->n; i++) {
        dts_fp8_tensor *t = &r->t[i];
        double V = 0, Aw = 0, N = 0;
        for (int64_t k = 0; k < r->steps; k++) {
            if (!(t->amax[k] > 0) || !(t->values[k] > 0)) continue;
            const double la = log2((double)t->amax[k]);
            V += t->values[k];
            Aw += t->values[k] * (la - floor(la));
        }
        for (int j = 0; j < DTS_FP8_REL; j++) N += t->hist[j];
        double A = V > 0 ? Aw / V : 0.5;
        t->a_mean = A;
        A = fmin(fmax(A, DTS__FP8_A_MIN), 1.0 - DTS__FP8_A_MIN);
        t->nonzero = V > 0 ? fmin(N / V, 1.0) : 0.0;
        dts__fp8_deconvolve(t, A);
        t->beta = 1.0;
        t->beta_steps = 0;
    }
    /* beta per tensor from its own saturating steps, pooled for the rest */
    dts__fp8_obs *all = malloc((size_t)r->n * (size_t)r->steps * sizeof *all);
    if (!all) return DT_FAIL(DT_ERR_NOMEM, "fp8 fit: out of memory for %d x %lld steps", r->n, (long long)r->steps);
    int total = 0;
    for (int i = 0; i < r->n; i++) {
        const int n = dts__fp8_observe(r, i, all + total);
        if (n > 0) {
            r->t[i].beta = dts__fp8_beta_fit(all + total, n);
            r->t[i].beta_steps = n;
        }
        total += n;
    }
    r->beta_pooled = total > 0 ? dts__fp8_beta_fit(all, total) : 1.0;
    r->beta_pooled_steps = total;
    free(all);
    for (int i = 0; i < r->n; i++)
        if (r->t[i].beta_steps == 0) r->t[i].beta = r->beta_pooled;
    return DT_OK;
}

dt_status dts_fp8_set_beta(dts_fp8_run *r, double beta)
{
    if (!r || !r->t) return DT_FAIL(DT_ERR_INVALID, "dts_fp8_set_beta: no run");
    if (!(beta >= 1.0 && beta <= DTS_FP8_BETA_MAX))
        return DT_FAIL(DT_ERR_INVALID, "--top-beta %g: expected 1..%g", beta, DTS_FP8_BETA_MAX);
    for (int i = 0; i < r->n; i++) r->t[i].beta = beta;
    return DT_OK;
}

/* ---- prediction -------------------------------------------------------------------- */

void dts_fp8_prediction_free(dts_fp8_prediction *p)
{
    if (!p) return;
    free(p->t);
    memset(p, 0, sizeof *p);
}

static int dts__fp8_same(const dts_fp8_settings *a, const dts_fp8_settings *b)
{
    return a->mode == b->mode && a->recipe == b->recipe && a->algo == b->algo && a->margin == b->margin &&
           a->history_len == b->history_len;
}

dt_status dts_fp8_predict(const dts_fp8_run *r, const dts_fp8_settings *s, dts_fp8_prediction *out)
{
    if (!r || !s || !out || !r->t) return DT_FAIL(DT_ERR_INVALID, "dts_fp8_predict: NULL argument");
    memset(out, 0, sizeof *out);
    if (s->mode != DT_FP8_MODE_E4M3 && s->mode != DT_FP8_MODE_HYBRID)
        return DT_FAIL(DT_ERR_INVALID, "--fp8-format: expected e4m3 or hybrid");
    if (s->margin < 0 || s->margin > 32 || s->history_len < 1 || s->history_len > 65536)
        return DT_FAIL(DT_ERR_INVALID, "fp8: margin %d, history length %d (expected 0..32, 1..65536)", s->margin,
                       s->history_len);
    out->set = *s;
    out->n = r->n;
    out->t = calloc((size_t)r->n, sizeof *out->t);
    const int H = s->recipe == DT_FP8_DELAYED ? s->history_len : 1;
    float *hist = calloc((size_t)H, sizeof *hist);
    char *sat_step = calloc((size_t)r->steps, 1);
    if (!out->t || !hist || !sat_step) {
        free(hist);
        free(sat_step);
        dts_fp8_prediction_free(out);
        return DT_FAIL(DT_ERR_NOMEM, "fp8 predict: out of memory for %d tensors", r->n);
    }
    const int own = dts__fp8_same(s, &r->set) && s->recipe == DT_FP8_DELAYED;
    for (int i = 0; i < r->n; i++) {
        const dts_fp8_tensor *t = &r->t[i];
        dts_fp8_counts *c = &out->t[i];
        const dt_fp8_format fmt = dt_fp8_role_format(s->mode, i % 3);
        const float max = dt_fp8_max(fmt);
        const double flush_at = 0.5 * (double)dt_fp8_min_subnormal(fmt);
        float scale = 1.0f; /* delayed: the scale in force after the first step */
        int hpos = 0, hfill = 0;
        memset(hist, 0, (size_t)H * sizeof *hist);
        for (int64_t k = 0; k < r->steps; k++) {
            const float a = t->amax[k];
            float sk = scale;
            if (s->recipe != DT_FP8_DELAYED || k == 0) { /* current scaling; delayed's first step too */
                sk = dt_fp8_scale_from_amax(a, fmt, s->margin, s->recipe == DT_FP8_BLOCKWISE);
                if (sk == 0.0f) sk = 1.0f; /* the backend's rule for amax 0 */
            } else if (own && t->scale[k] > 0) {
                out->scales_compared++;
                out->scales_equal += sk == t->scale[k];
            }
            const double v = t->values[k];
            if (v > 0 && a > 0) {
                const double nz = v * t->nonzero;
                const float prod = a * sk; /* as the conversion computes |x s| */
                double sat = 0;
                if (prod > max) {
                    sat = dts_fp8_count_within(t, nz, fmin(log2((double)prod / max), 1.0));
                    sat_step[k] = 1;
                }
                const double fl = nz - dts_fp8_count_within(t, nz, log2((double)prod / flush_at));
                c->saturated += sat;
                c->flushed += fl > 0 ? fl : 0;
            }
            c->values += v;
            if (s->recipe == DT_FP8_DELAYED) { /* lib/train/fp8_train.c, after each step */
                hist[hpos] = a;
                const int filled = hfill < H ? hfill + 1 : H;
                const float ha = dt_fp8_history_amax(hist, filled, a, s->algo);
                const float ns = dt_fp8_scale_from_amax(ha, fmt, s->margin, 0);
                if (ns > 0) scale = ns;
                hpos = (hpos + 1) % H;
                if (hfill < H) hfill++;
            }
        }
        out->total.saturated += c->saturated;
        out->total.flushed += c->flushed;
        out->total.values += c->values;
    }
    for (int64_t k = 0; k < r->steps; k++) out->steps_saturated += sat_step[k];
    free(hist);
    free(sat_step);
    return DT_OK;
}

/* ---- measured counts --------------------------------------------------------------- */

void dts_fp8_measured_free(dts_fp8_measured *m)
{
    if (!m) return;
    free(m->t);
    memset(m, 0, sizeof *m);
}

static dt_status dts__fp8_measured_alloc(dts_fp8_measured *m, int n)
{
    m->n = n;
    m->t = calloc((size_t)(n > 0 ? n : 1), sizeof *m->t);
    if (!m->t) return DT_FAIL(DT_ERR_NOMEM, "fp8: out of memory for %d tensors' counts", n);
    return DT_OK;
}

static void dts__fp8_measured_total(dts_fp8_measured *m)
{
    memset(&m->total, 0, sizeof m->total);
    for (int i = 0; i < m->n; i++) {
        m->total.saturated += m->t[i].saturated;
        m->total.flushed += m->t[i].flushed;
        m->total.values += m->t[i].values;
    }
}

dt_status dts_fp8_measured_of_run(const dts_fp8_run *r, dts_fp8_measured *out)
{
    memset(out, 0, sizeof *out);
    DT_CHECK(dts__fp8_measured_alloc(out, r->n));
    out->set = r->set;
    out->steps = r->steps;
    for (int i = 0; i < r->n; i++)
        for (int64_t k = 0; k < r->steps; k++) {
            out->t[i].saturated += r->t[i].saturated[k];
            out->t[i].flushed += r->t[i].flushed[k];
            out->t[i].values += r->t[i].values[k];
        }
    dts__fp8_measured_total(out);
    return DT_OK;
}

/* A summary's "fp8": {"steps": S, "tensors": {"h.0.qkv.x": {"saturated", "flushed", "values", ...}, ...}} */
static dt_status dts__fp8_measured_summary(const json_t *root, const char *path, dts_fp8_measured *out)
{
    const json_t *f = json_object_get(root, "fp8");
    const json_t *ts = json_object_get(f, "tensors");
    if (!json_is_object(f) || !json_is_object(ts))
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: neither a dtrain trace nor a summary with an \"fp8\" object (run dtrain with --fp8-format "
                       "and --trace or --summary)",
                       path);
    DT_CHECK(dts__fp8_settings_json(root, path, &out->set));
    int64_t steps = 0;
    const json_t *sv = json_object_get(f, "steps");
    if (sv && !dts__json_int(sv, 0, INT64_MAX, &steps))
        return dts__json_expected(DT_ERR_FORMAT, path, "fp8.steps", "an integer >= 0", sv);
    out->steps = steps;
    int n = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)ts, key, v)
    {
        const int idx = dts_fp8_tensor_index(key);
        if (idx < 0)
            return DT_FAIL(DT_ERR_FORMAT, "%s: \"fp8.tensors\": \"%s\": expected a tensor name h.L.lin.role", path,
                           key);
        if (idx + 1 > n) n = ((idx / DTS_FP8_PER_BLOCK) + 1) * DTS_FP8_PER_BLOCK;
    }
    DT_CHECK(dts__fp8_measured_alloc(out, n));
    json_object_foreach((json_t *)ts, key, v)
    {
        dts_fp8_counts *c = &out->t[dts_fp8_tensor_index(key)];
        const char *names[3] = {"saturated", "flushed", "values"};
        double *dst[3] = {&c->saturated, &c->flushed, &c->values};
        for (int q = 0; q < 3; q++) {
            const json_t *x = json_object_get(v, names[q]);
            if (!x || !dts__json_num(x, dst[q]) || *dst[q] < 0) {
                char k2[96];
                snprintf(k2, sizeof k2, "fp8.tensors.%s.%s", key, names[q]);
                return dts__json_expected(DT_ERR_FORMAT, path, k2, "a number >= 0", x);
            }
        }
    }
    dts__fp8_measured_total(out);
    return DT_OK;
}

dt_status dts_fp8_measured_read(const char *path, dts_fp8_measured *out)
{
    if (!path || !out) return DT_FAIL(DT_ERR_INVALID, "dts_fp8_measured_read: NULL argument");
    memset(out, 0, sizeof *out);
    dt_trace *hdr = NULL;
    if (dt_trace_read_header(path, &hdr) == DT_OK) { /* a trace: its fp8 events */
        dt_trace_free(hdr);
        dt_trace *tr = NULL;
        DT_CHECK(dt_trace_read(path, &tr));
        dts_fp8_run run;
        dt_status st = dts_fp8_run_read(tr, path, &run);
        dt_trace_free(tr);
        if (st != DT_OK) return st;
        st = dts_fp8_measured_of_run(&run, out);
        dts_fp8_run_free(&run);
        return st;
    }
    dt_clear_error();
    char *text = NULL;
    size_t len = 0;
    DT_CHECK(dt_file_read_whole(path, NULL, DTS_JSON_FILE_MAX, &text, &len));
    json_error_t err;
    json_t *root = json_loadb(text, len, 0, &err);
    free(text);
    if (!root) return DT_FAIL(DT_ERR_FORMAT, "%s: line %d, column %d: %s", path, err.line, err.column, err.text);
    const dt_status st = dts__fp8_measured_summary(root, path, out);
    json_decref(root);
    if (st != DT_OK) dts_fp8_measured_free(out);
    return st;
}

static int dts__cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int dts_fp8_agreement(const dts_fp8_prediction *p, const dts_fp8_measured *m, int flushed, double min_count,
                      double *median, double *max)
{
    *median = *max = 0;
    const int n = p->n < m->n ? p->n : m->n;
    double *f = malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
    if (!f) return 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        const double a = flushed ? p->t[i].flushed : p->t[i].saturated;
        const double b = flushed ? m->t[i].flushed : m->t[i].saturated;
        if (fmax(a, b) < min_count) continue;
        const double r = (a + 1.0) / (b + 1.0);
        f[k++] = r >= 1.0 ? r : 1.0 / r;
    }
    if (k > 0) {
        qsort(f, (size_t)k, sizeof *f, dts__cmp_double);
        *median = k % 2 ? f[k / 2] : 0.5 * (f[k / 2 - 1] + f[k / 2]);
        *max = f[k - 1];
    }
    free(f);
    return k;
}

/* ---- printing ---------------------------------------------------------------------- */

static double dts__frac(double n, double d) { return d > 0 ? n / d : 0.0; }

void dts_fp8_print(FILE *f, const dts_fp8_run *r, const dts_fp8_prediction *p, const dts_fp8_measured *m)
{
    char set[128];
    fprintf(f, "predicted under %s, from the run's %lld steps:\n", dts_fp8_settings_text(&p->set, set, sizeof set),
            (long long)r->steps);
    if (m)
        fprintf(f, "%-17s %-5s %12s %11s %11s %11s %11s %5s\n", "tensor", "fmt", "values", "sat_real", "sat_pred",
                "flush_real", "flush_pred", "beta");
    else
        fprintf(f, "%-17s %-5s %12s %11s %11s %11s %11s %5s\n", "tensor", "fmt", "values", "saturated", "sat_frac",
                "flushed", "flush_frac", "beta");
    for (int i = 0; i < r->n; i++) {
        if (!r->t[i].present) continue;
        char name[40];
        const dts_fp8_counts *c = &p->t[i];
        const char *fmt = dt_fp8_format_name(dt_fp8_role_format(p->set.mode, i % 3));
        if (m) {
            const dts_fp8_counts *x = i < m->n ? &m->t[i] : &(dts_fp8_counts){0, 0, 0};
            fprintf(f, "%-17s %-5s %12.0f %11.0f %11.1f %11.0f %11.1f %5.2f\n",
                    dts_fp8_tensor_name(i, name, sizeof name), fmt, c->values, x->saturated, c->saturated, x->flushed,
                    c->flushed, r->t[i].beta);
        } else {
            fprintf(f, "%-17s %-5s %12.0f %11.1f %11.3e %11.1f %11.3e %5.2f\n",
                    dts_fp8_tensor_name(i, name, sizeof name), fmt, c->values, c->saturated,
                    dts__frac(c->saturated, c->values), c->flushed, dts__frac(c->flushed, c->values), r->t[i].beta);
        }
    }
    const dts_fp8_counts *T = &p->total;
    fprintf(f,
            "total: %.0f values; predicted saturated %.1f (fraction %.3e), flushed %.1f (fraction %.3e); steps "
            "with saturation %lld of %lld\n",
            T->values, T->saturated, dts__frac(T->saturated, T->values), T->flushed, dts__frac(T->flushed, T->values),
            (long long)p->steps_saturated, (long long)r->steps);
    if (m) {
        const dts_fp8_counts *M = &m->total;
        fprintf(f, "measured: %.0f values; saturated %.0f (fraction %.3e), flushed %.0f (fraction %.3e)\n", M->values,
                M->saturated, dts__frac(M->saturated, M->values), M->flushed, dts__frac(M->flushed, M->values));
    }
}
