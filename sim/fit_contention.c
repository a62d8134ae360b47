/* fit_contention.c: the compute slowdown of ranks that share a node
 * (dts_fit_contention, see dts_fit.h).
 *
 * Input: one single-rank profile run alone and k copies of the same run
 * made at the same time on the same node (a "co-located profile"). Each
 * copy's mean compute time per step (forward + backward + recompute spans,
 * dt_trace_phase_times_events, warm-up steps left out) over the lone run's
 * is its slowdown; the fit is their mean, and the spread their range.
 *
 * Invariants: the traces must be of the same configuration (every key of
 * otherData.config but "trace", the output's name), so that the ratio is
 * the sharing's alone; the result is >= 1 only if the machine says so (a
 * slowdown below 1 is reported, not clamped: the caller decides). */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "dt_trace_stats.h"
#include "dts_fit.h"

/* The pid of a trace's first event that is not metadata (a single-rank profile: its only rank). */
static int fitc__pid(const dt_trace *t)
{
    for (size_t k = 0; k < t->n_events; k++)
        if (t->events[k].ph != DT_TRACE_METADATA) return t->events[k].pid;
    return 0;
}

/* 1 when a's and b's configs are equal but for "trace"; 0 when not; -1 when one has none or is not JSON. */
static int fitc__same_config(const dt_trace *a, const dt_trace *b)
{
    if (!a->config_json || !b->config_json) return -1;
    json_t *ja = json_loads(a->config_json, 0, NULL), *jb = json_loads(b->config_json, 0, NULL);
    int same = -1;
    if (json_is_object(ja) && json_is_object(jb)) {
        json_object_del(ja, "trace");
        json_object_del(jb, "trace");
        same = json_equal(ja, jb) ? 1 : 0;
    }
    json_decref(ja);
    json_decref(jb);
    return same;
}

dt_status dts_fit_contention(const dt_trace *solo, const char *solo_name, const dt_trace *const *co,
                             const char *const *co_names, int k, int skip, double *slowdown, double *spread)
{
    if (!solo || !co || k < 1 || !slowdown) return DT_FAIL(DT_ERR_INVALID, "dts_fit_contention: bad arguments");
    dt_trace_phase_times alone;
    DT_CHECK(dt_trace_phase_times_events(solo->events, solo->n_events, fitc__pid(solo), skip, &alone));
    if (!(alone.compute_ns > 0))
        return DT_FAIL(DT_ERR_INVALID, "%s: no forward or backward spans after %d warm-up steps", solo_name, skip);
    double sum = 0, lo = INFINITY, hi = 0;
    for (int i = 0; i < k; i++) {
        const int same = fitc__same_config(solo, co[i]);
        if (same != 1)
            return DT_FAIL(DT_ERR_INVALID, "%s: %s", co_names[i],
                           same < 0 ? "no readable otherData.config to compare with the lone profile's"
                                    : "not the lone profile's configuration (only \"trace\" may differ)");
        dt_trace_phase_times t;
        DT_CHECK(dt_trace_phase_times_events(co[i]->events, co[i]->n_events, fitc__pid(co[i]), skip, &t));
        const double r = t.compute_ns / alone.compute_ns;
        sum += r;
        lo = fmin(lo, r);
        hi = fmax(hi, r);
    }
    *slowdown = sum / k;
    if (spread) *spread = hi - lo;
    return DT_OK;
}

dt_status dts_fit_contention_files(const char *solo_path, const char *const *paths, int k, int skip, dts_hw *hw,
                                   double *slowdown, double *spread)
{
    if (!solo_path || !paths || !hw || k < 2 || k > DTS_HW_MAX_CONTENTION)
        return DT_FAIL(DT_ERR_INVALID, "co-located profile: expected 2 to %d traces of ranks computing at once, got %d",
                       DTS_HW_MAX_CONTENTION, k);
    dt_trace *solo = NULL, *co[DTS_HW_MAX_CONTENTION] = {NULL};
    dt_status st = dt_trace_read(solo_path, &solo);
    for (int i = 0; i < k && st == DT_OK; i++) st = dt_trace_read(paths[i], &co[i]);
    double s = 1, sp = 0;
    if (st == DT_OK) st = dts_fit_contention(solo, solo_path, (const dt_trace *const *)co, paths, k, skip, &s, &sp);
    if (st == DT_OK && s < 1.0) s = 1.0; /* faster together than alone: noise; the model's floor is no slowdown */
    if (st == DT_OK) {
        /* entries between the last known one and k: linear in the ranks computing at once */
        const int n = hw->n_contention < k ? hw->n_contention : k - 1;
        const double from = hw->contention[n - 1];
        for (int j = n + 1; j < k; j++) hw->contention[j - 1] = from + (s - from) * (j - n) / (k - n);
        hw->contention[k - 1] = s;
        if (hw->n_contention < k) hw->n_contention = k;
        if (slowdown) *slowdown = s;
        if (spread) *spread = sp;
    }
    dt_trace_free(solo);
    for (int i = 0; i < k; i++) dt_trace_free(co[i]);
    return st;
}
