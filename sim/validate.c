/* validate.c: step and phase times read the same way from real and
 * simulated traces, and `dtsim validate` (see dts_validate.h).
 *
 * What a prediction may use: the scenario read from the measured run's own
 * configuration (model, layout, schedule, batch: what the user would type),
 * the compute profile (a different, single-rank run) and the links
 * (hardware JSON or a dtbench allreduce fit). Never the measured run's
 * durations. */
#include "dts_validate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dts_fit.h"

static int dts__is(const char *a, const char *b) { return strcmp(a, b) == 0; }

/* Evaluation spans of one rank: what happens inside them (the evaluate span
 * itself, and under tensor parallelism its allreduces, which carry the
 * iteration after the last step) is not part of a training step. */
typedef struct dts__evals {
    int64_t t0[64], t1[64];
    int n;
} dts__evals;

static void dts__find_evals(const dt_trace_event *ev, size_t n, int pid, dts__evals *out)
{
    out->n = 0;
    for (size_t i = 0; i < n && out->n < 64; i++)
        if (ev[i].pid == pid && ev[i].ph == DT_TRACE_COMPLETE && dts__is(ev[i].name, "evaluate")) {
            out->t0[out->n] = ev[i].ts_ns;
            out->t1[out->n++] = ev[i].ts_ns + ev[i].dur_ns;
        }
}

/* An event of pid's training steps: it has an iteration and is not part of an evaluation. */
static int dts__in_step(const dt_trace_event *e, int pid, const dts__evals *ev)
{
    if (e->pid != pid || e->iter == DT_TRACE_NONE || e->iter < 0) return 0;
    for (int i = 0; i < ev->n; i++)
        if (e->ts_ns >= ev->t0[i] && e->ts_ns <= ev->t1[i]) return 0;
    return 1;
}

dt_status dts_phase_times_events(const dt_trace_event *ev, size_t n, int pid, int skip, dts_phase_times *out)
{
    memset(out, 0, sizeof *out);
    dts__evals evals;
    dts__find_evals(ev, n, pid, &evals);
    int64_t max_iter = -1;
    for (size_t i = 0; i < n; i++)
        if (dts__in_step(&ev[i], pid, &evals) && ev[i].iter > max_iter) max_iter = ev[i].iter;
    if (max_iter < 0) return DT_FAIL(DT_ERR_INVALID, "trace: rank %d has no events with an iteration", pid);
    const size_t ns = (size_t)max_iter + 1;
    int64_t *end = malloc(ns * sizeof *end);
    if (!end) return DT_FAIL(DT_ERR_NOMEM, "trace: out of memory for %zu steps", ns);
    for (size_t i = 0; i < ns; i++) end[i] = INT64_MIN;
    double compute = 0, optim = 0, comm = 0;
    for (size_t i = 0; i < n; i++) {
        const dt_trace_event *e = &ev[i];
        if (!dts__in_step(e, pid, &evals)) continue;
        const int64_t t1 = e->ts_ns + (e->ph == DT_TRACE_COMPLETE ? e->dur_ns : 0);
        if (t1 > end[e->iter]) end[e->iter] = t1;
        if (e->ph != DT_TRACE_COMPLETE || e->iter < skip) continue;
        const int pipe = dts__is(e->cat, "pipeline");
        if ((dts__is(e->cat, "compute") || pipe) &&
            (dts__is(e->name, "forward") || dts__is(e->name, "backward") || dts__is(e->name, "recompute")))
            compute += (double)e->dur_ns;
        else if (dts__is(e->name, "optimizer") || dts__is(e->name, "optim_step") || dts__is(e->name, "apply"))
            optim += (double)e->dur_ns;
        else if (dts__is(e->cat, "comm") || dts__is(e->cat, "tp") ||
                 (pipe && (dts__is(e->name, "recv_act") || dts__is(e->name, "recv_grad"))))
            comm += (double)e->dur_ns;
    }
    /* the period: from the end of step skip-1 to the end of the last step, per step */
    const int64_t last = max_iter;
    const int64_t base = skip > 0 && skip - 1 <= last ? end[skip - 1] : 0;
    const int64_t counted = last - (skip > 0 ? skip - 1 : -1);
    const int64_t last_end = end[last];
    free(end);
    if (counted < 1 || base == INT64_MIN || (skip > 0 && skip > last))
        return DT_FAIL(DT_ERR_INVALID, "trace: rank %d has %lld steps; at least %d needed (the first %d are warm-up)",
                       pid, (long long)last + 1, skip + 1, skip);
    out->steps = (int)counted;
    out->step_ns = (double)(last_end - base) / (double)counted;
    out->compute_ns = compute / (double)counted;
    out->optim_ns = optim / (double)counted;
    out->comm_ns = comm / (double)counted;
    return DT_OK;
}

/* A short name of a run: its layout, schedule and exchange. */
static void dts__run_name(const dts_scenario *sc, char *buf, size_t n)
{
    if (sc->p > 1 || sc->t > 1)
        snprintf(buf, n, "t%d p%d d%d %s m=%d%s%s", sc->t, sc->p, sc->d, dt_sched_kind_name(sc->schedule), sc->m,
                 sc->d > 1 ? " " : "", sc->d > 1 ? sc->exchange_name : "");
    else if (sc->exchange == DTS_EX_PS_SYNC || sc->exchange == DTS_EX_PS_ASYNC)
        snprintf(buf, n, "%s W=%d K=%d m=%d", sc->exchange_name, sc->d, sc->num_ps_servers, sc->m);
    else
        snprintf(buf, n, "dp d%d %s%s m=%d", sc->d, sc->exchange_name, sc->zero ? " zero1" : "", sc->m);
}

dt_status dts_validate(const dts_validate_opts *o, FILE *out, dts_validate_result *res)
{
    memset(res, 0, sizeof *res);
    if (!o->profile) return DT_FAIL(DT_ERR_INVALID, "dtsim validate: --profile FILE is required (a single-rank dtrain trace)");
    if (o->n_runs < 1) return DT_FAIL(DT_ERR_INVALID, "dtsim validate: expected at least one measured run's trace");
    dts_hw hw;
    if (o->hw) DT_CHECK(dts_hw_load(o->hw, &hw));
    else dts_hw_default(&hw);
    double rms = NAN;
    if (o->comm_json) {
        dts_link l;
        DT_CHECK(dts_fit_allreduce_json(o->comm_json, "ring", &l, &rms));
        hw.intra = hw.inter = l;
    }
    if (o->devices_per_node > 0) hw.devices_per_node = o->devices_per_node;
    if (o->cores_per_node > 0) hw.cores_per_node = o->cores_per_node;
    dt_trace *prof = NULL;
    DT_CHECK(dt_trace_read(o->profile, &prof));
    res->rows = calloc((size_t)o->n_runs, sizeof *res->rows);
    if (!res->rows) {
        dt_trace_free(prof);
        return DT_FAIL(DT_ERR_NOMEM, "dtsim validate: out of memory");
    }
    const int skip = o->skip > 0 ? o->skip : 1;
    fprintf(out, "inputs: compute profile %s (a single-rank run); links %s", o->profile,
            o->comm_json ? o->comm_json : o->hw ? o->hw : "dtsim's default hardware");
    if (o->comm_json) fprintf(out, " (ring fit: alpha %.0f ns, beta %.3f GB/s, rel. rms %.3f)", hw.intra.alpha_ns,
                              hw.intra.bytes_per_ns, rms);
    fprintf(out, "\nthe measured runs give only their configuration (layout, schedule, batch), never their durations\n");
    fprintf(out, "%-34s %10s %10s %8s | %21s | %21s | %21s\n", "run", "measured", "predicted", "error", "compute ms meas/pred",
            "comm ms meas/pred", "optim ms meas/pred");
    dt_status st = DT_OK;
    double sum = 0;
    for (int i = 0; i < o->n_runs && st == DT_OK; i++) {
        dt_trace *t = NULL;
        st = dt_trace_read(o->runs[i], &t);
        if (st != DT_OK) break;
        dts_scenario sc;
        dts_scenario_default(&sc);
        if (!t->config_json) st = DT_FAIL(DT_ERR_FORMAT, "%s: the trace has no otherData.config", o->runs[i]);
        if (st == DT_OK) st = dts_scenario_from_config(&sc, t->config_json, o->runs[i]);
        if (st == DT_OK) {
            sc.hw = hw;
            st = dts_cost_from_profile(prof, o->profile, &sc.model, sc.B, sc.T, &sc.cost);
            sc.have_cost = st == DT_OK;
        }
        int pid = 0;
        for (size_t k = 0; k < t->n_events; k++)
            if (t->events[k].ph != DT_TRACE_METADATA) {
                pid = t->events[k].pid;
                break;
            }
        dts_validate_row *row = &res->rows[i];
        if (st == DT_OK) st = dts_phase_times_events(t->events, t->n_events, pid, skip, &row->measured);
        dts_summary sum_pred;
        if (st == DT_OK) {
            const dts_run_opts ro = {.keep_events = 1};
            st = dts_run(&sc, &ro, &sum_pred);
        }
        if (st == DT_OK) {
            st = dts_phase_times_events(sum_pred.ev, sum_pred.n_ev, pid, skip, &row->predicted);
            dts_summary_free(&sum_pred);
        }
        dt_trace_free(t);
        if (st != DT_OK) break;
        dts__run_name(&sc, row->name, sizeof row->name);
        row->err = (row->predicted.step_ns - row->measured.step_ns) / row->measured.step_ns;
        sum += fabs(row->err);
        if (fabs(row->err) > res->max_abs_err) res->max_abs_err = fabs(row->err);
        res->n++;
        fprintf(out, "%-34s %7.2f ms %7.2f ms %+7.1f%% | %9.2f / %9.2f | %9.2f / %9.2f | %9.2f / %9.2f\n", row->name,
                row->measured.step_ns * 1e-6, row->predicted.step_ns * 1e-6, 100 * row->err,
                row->measured.compute_ns * 1e-6, row->predicted.compute_ns * 1e-6, row->measured.comm_ns * 1e-6,
                row->predicted.comm_ns * 1e-6, row->measured.optim_ns * 1e-6, row->predicted.optim_ns * 1e-6);
    }
    dt_trace_free(prof);
    if (res->n) res->mean_abs_err = sum / res->n;
    if (st == DT_OK)
        fprintf(out, "step time: mean absolute error %.1f%%, largest %.1f%% over %d runs\n", 100 * res->mean_abs_err,
                100 * res->max_abs_err, res->n);
    return st;
}

void dts_validate_result_free(dts_validate_result *r)
{
    if (!r) return;
    free(r->rows);
    memset(r, 0, sizeof *r);
}
