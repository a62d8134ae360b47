/* fit.c: α-β least squares for communication (dts_fit.h), and the two
 * sources of points: `dtbench allreduce --json` tables and the collective
 * step spans of a dtrain trace.
 *
 * The solve works on the columns scaled to unit norm (x_latency is ~1-10,
 * x_bytes up to ~1e8), so the 2x2 normal equations stay well conditioned;
 * points that cannot separate α from β (one bytes/latency ratio) are an
 * error, not an arbitrary split.
 *
 * Invariants: a successful fit has α >= 0 and β > 0, finite; *out is
 * written only on success. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_file.h"
#include "dts_fit.h"
#include "dts_json.h"

static double fit__rel_rms(const dts_fit_point *p, int n, double alpha, double inv_beta)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) {
        double r = (alpha * p[i].x_latency + inv_beta * p[i].x_bytes) / p[i].ns - 1.0;
        s += r * r;
    }
    return sqrt(s / n);
}

/* Weighted least squares of ns on (x_latency, x_bytes) with weights 1
 * (relative = 0) or 1/ns^2 (relative = 1). */
static dt_status fit__solve(const dts_fit_point *p, int n, const char *what, int relative, dts_link *out,
                            double *rel_rms)
{
    what = what ? what : "fit";
    if (!p || n < 2)
        return DT_FAIL(DT_ERR_INVALID, "%s: %d point(s): a latency-bandwidth fit needs at least 2", what, p ? n : 0);
    double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
    for (int i = 0; i < n; i++) {
        if (!(p[i].ns > 0) || !(p[i].x_latency >= 0) || !(p[i].x_bytes >= 0) || !isfinite(p[i].ns) ||
            !isfinite(p[i].x_latency) || !isfinite(p[i].x_bytes))
            return DT_FAIL(DT_ERR_INVALID, "%s: point %d (x_latency %g, x_bytes %g, ns %g): expected ns > 0 and x >= 0",
                           what, i, p[i].x_latency, p[i].x_bytes, p[i].ns);
        const double w = relative ? 1.0 / (p[i].ns * p[i].ns) : 1.0;
        s11 += w * p[i].x_latency * p[i].x_latency;
        s12 += w * p[i].x_latency * p[i].x_bytes;
        s22 += w * p[i].x_bytes * p[i].x_bytes;
        s1y += w * p[i].x_latency * p[i].ns;
        s2y += w * p[i].x_bytes * p[i].ns;
    }
    if (!(s22 > 0)) return DT_FAIL(DT_ERR_INVALID, "%s: every point has 0 bytes: the bandwidth cannot be fitted", what);
    double alpha = -1.0, inv_beta;
    if (s11 > 0) {
        /* scaled unknowns a' = α·sqrt(s11), c' = (1/β)·sqrt(s22): [1 r; r 1] [a'; c'] = [u; v] */
        const double n1 = sqrt(s11), n2 = sqrt(s22), r = s12 / (n1 * n2), u = s1y / n1, v = s2y / n2;
        const double det = 1.0 - r * r;
        if (det < 1e-12)
            return DT_FAIL(DT_ERR_INVALID,
                           "%s: every point has the same bytes per latency term: latency and bandwidth cannot be "
                           "separated (measure several message sizes)",
                           what);
        alpha = (u - r * v) / det / n1;
        inv_beta = (v - r * u) / det / n2;
    }
    if (alpha < 0) { /* α >= 0: the best fit on the boundary is the one-variable fit */
        alpha = 0.0;
        inv_beta = s2y / s22;
    }
    if (!(inv_beta > 0) || !isfinite(inv_beta) || !isfinite(alpha))
        return DT_FAIL(DT_ERR_INVALID,
                       "%s: the fit gives no positive bandwidth (time does not grow with bytes in these %d points)",
                       what, n);
    out->alpha_ns = alpha;
    out->bytes_per_ns = 1.0 / inv_beta;
    if (rel_rms) *rel_rms = fit__rel_rms(p, n, alpha, inv_beta);
    return DT_OK;
}

dt_status dts_fit_link(const dts_fit_point *pts, int n, const char *what, dts_link *out, double *rel_rms)
{
    if (!out) return DT_FAIL(DT_ERR_INVALID, "%s: NULL output", what ? what : "fit");
    return fit__solve(pts, n, what, 0, out, rel_rms);
}

dt_status dts_fit_link_relative(const dts_fit_point *pts, int n, const char *what, dts_link *out, double *rel_rms)
{
    if (!out) return DT_FAIL(DT_ERR_INVALID, "%s: NULL output", what ? what : "fit");
    return fit__solve(pts, n, what, 1, out, rel_rms);
}

/* ---- dtbench allreduce --json ------------------------------------------------ */

static dt_status fit__row_num(const char *path, size_t i, const json_t *row, const char *key, double *out)
{
    const json_t *v = json_object_get(row, key);
    if (!json_is_number(v) || !(json_number_value(v) > 0))
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"rows[%zu].%s\": expected a number > 0", path, i, key);
    *out = json_number_value(v);
    return DT_OK;
}

dt_status dts_fit_allreduce_json(const char *path, const char *algo, dts_link *out, double *rel_rms)
{
    if (!path || !algo || !out) return DT_FAIL(DT_ERR_INVALID, "dts_fit_allreduce_json: NULL argument");
    char *text; /* a regular file only (a FIFO would block), of a sane size (dt_file.h) */
    size_t len;
    DT_CHECK(dt_file_read_whole(path, NULL, DTS_JSON_FILE_MAX, &text, &len));
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root) return DT_FAIL(DT_ERR_FORMAT, "%s: line %d, column %d: %s", path, jerr.line, jerr.column, jerr.text);
    dt_status st = DT_OK;
    dts_fit_point *pts = NULL;
    const json_t *f = json_is_object(root) ? json_object_get(root, "format") : NULL;
    const json_t *ver = json_is_object(root) ? json_object_get(root, "version") : NULL;
    const json_t *ranks = json_is_object(root) ? json_object_get(root, "ranks") : NULL;
    const json_t *rows = json_is_object(root) ? json_object_get(root, "rows") : NULL;
    if (!json_is_string(f) || strcmp(json_string_value(f), "dtbench-allreduce") != 0) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: \"format\": expected \"dtbench-allreduce\" (dtbench allreduce --json)", path);
        goto done;
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != 1) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: \"version\": expected 1 (the only version read)", path);
        goto done;
    }
    if (!json_is_integer(ranks) || json_integer_value(ranks) < 2 || json_integer_value(ranks) > (1 << 24)) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: \"ranks\": expected an integer >= 2 (one rank sends nothing)", path);
        goto done;
    }
    if (!json_is_array(rows)) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: \"rows\": expected an array", path);
        goto done;
    }
    const double nr = (double)json_integer_value(ranks);
    pts = calloc(json_array_size(rows) + 1, sizeof *pts);
    if (!pts) {
        st = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    int n = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *row = json_array_get(rows, i), *a = json_object_get(row, "algo");
        if (!json_is_object(row) || !json_is_string(a)) {
            st = DT_FAIL(DT_ERR_FORMAT, "%s: \"rows[%zu].algo\": expected a string", path, i);
            goto done;
        }
        if (strcmp(json_string_value(a), algo) != 0) continue;
        double bytes = 0, time_us = 0;
        DT_CHECK_GOTO(fit__row_num(path, i, row, "bytes", &bytes), st, done);
        DT_CHECK_GOTO(fit__row_num(path, i, row, "time_us", &time_us), st, done);
        /* ring: 2(n-1) steps, each sending S/n bytes */
        pts[n++] = (dts_fit_point){
            .x_latency = 2.0 * (nr - 1.0), .x_bytes = 2.0 * (nr - 1.0) / nr * bytes, .ns = time_us * 1e3};
    }
    if (n < 2) {
        st = DT_FAIL(DT_ERR_INVALID, "%s: %d row(s) with \"algo\": \"%s\": the fit needs at least 2 sizes", path, n,
                     algo);
        goto done;
    }
    char what[600];
    snprintf(what, sizeof what, "%s (algo %s)", path, algo);
    st = dts_fit_link_relative(pts, n, what, out, rel_rms);
done:
    free(pts);
    json_decref(root);
    return st;
}

/* ---- trace ------------------------------------------------------------------ */

static const char *const fit__steps[] = {"reduce-scatter", "all-gather", "reduce", "broadcast", "allreduce", NULL};

static int fit__is_step(const char *name)
{
    for (const char *const *s = fit__steps; *s; s++)
        if (strcmp(*s, name) == 0) return 1;
    return 0;
}

dt_status dts_fit_trace_comm(const dt_trace *t, const char *name, dts_link *out, double *rel_rms)
{
    if (!t || !out) return DT_FAIL(DT_ERR_INVALID, "dts_fit_trace_comm: NULL argument");
    if (name && !fit__is_step(name))
        return DT_FAIL(DT_ERR_INVALID,
                       "trace comm fit: \"%s\": expected a collective step (reduce-scatter, all-gather, reduce, "
                       "broadcast, allreduce); send/recv and push/pull spans include waiting",
                       name);
    int later = 0; /* spans after the warm-up iteration exist */
    for (size_t i = 0; i < t->n_events; i++) {
        const dt_trace_event *e = &t->events[i];
        if (e->ph == DT_TRACE_COMPLETE && strcmp(e->cat, "comm") == 0 &&
            (name ? strcmp(e->name, name) == 0 : fit__is_step(e->name)) && e->iter != DT_TRACE_NONE && e->iter >= 1)
            later = 1;
    }
    dts_fit_point *pts = malloc((t->n_events + 1) * sizeof *pts);
    if (!pts) return DT_FAIL(DT_ERR_NOMEM, "trace comm fit: out of memory");
    int n = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        const dt_trace_event *e = &t->events[i];
        if (e->ph != DT_TRACE_COMPLETE || strcmp(e->cat, "comm") != 0) continue;
        if (name ? strcmp(e->name, name) != 0 : !fit__is_step(e->name)) continue;
        if (e->bytes == DT_TRACE_NONE || e->bytes <= 0 || e->dur_ns <= 0) continue;
        if (later && (e->iter == DT_TRACE_NONE || e->iter < 1)) continue;
        pts[n++] = (dts_fit_point){.x_latency = 1.0, .x_bytes = (double)e->bytes, .ns = (double)e->dur_ns};
    }
    char what[96];
    snprintf(what, sizeof what, "trace comm spans \"%s\"", name ? name : "reduce-scatter/all-gather/...");
    dt_status st = dts_fit_link_relative(pts, n, what, out, rel_rms);
    free(pts);
    return st;
}
