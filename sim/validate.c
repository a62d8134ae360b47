/* validate.c: `dtsim validate` (see dts_validate.h): predict measured runs
 * and compare their step and phase times (dt_trace_phase_times_events, the
 * same reading of the real trace and of the simulated events).
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

/* A short name of a run: its layout, schedule and exchange. */
static void dts__run_name(const dts_scenario *sc, char *buf, size_t n)
{
    if (sc->c > 1)
        snprintf(buf, n, "t%d c%d %s p%d d%d %s m=%d%s%s", sc->t, sc->c, dt_cp_comm_name(sc->cp_comm), sc->p, sc->d,
                 dt_sched_kind_name(sc->schedule), sc->m, sc->d > 1 ? " " : "", sc->d > 1 ? sc->exchange_name : "");
    else if (sc->p > 1 || sc->t > 1)
        snprintf(buf, n, "t%d p%d d%d %s m=%d%s%s", sc->t, sc->p, sc->d, dt_sched_kind_name(sc->schedule), sc->m,
                 sc->d > 1 ? " " : "", sc->d > 1 ? sc->exchange_name : "");
    else if (sc->exchange == DTS_EX_PS_SYNC || sc->exchange == DTS_EX_PS_ASYNC)
        snprintf(buf, n, "%s W=%d K=%d m=%d", sc->exchange_name, sc->d, sc->num_ps_servers, sc->m);
    else
        snprintf(buf, n, "dp d%d %s%s m=%d", sc->d, sc->exchange_name,
                 sc->zero == 1   ? " zero1"
                 : sc->zero == 2 ? " zero2"
                 : sc->zero == 3 ? " zero3"
                                 : "",
                 sc->m);
}

/* fprintf when there is somewhere to print (dts_validate's out may be NULL) */
#define OUT(...)                            \
    do {                                    \
        if (out) fprintf(out, __VA_ARGS__); \
    } while (0)

dt_status dts_validate(const dts_validate_opts *o, FILE *out, dts_validate_result *res)
{
    memset(res, 0, sizeof *res);
    if (!o->profile)
        return DT_FAIL(DT_ERR_INVALID, "dtsim validate: --profile FILE is required (a single-rank dtrain trace)");
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
    double co_slow = 1, co_spread = 0;
    if (o->n_colocated > 0)
        DT_CHECK(dts_fit_contention_files(o->profile, o->colocated, o->n_colocated, o->skip > 0 ? o->skip : 1, &hw,
                                          &co_slow, &co_spread));
    dt_trace *prof = NULL;
    DT_CHECK(dt_trace_read(o->profile, &prof));
    res->rows = calloc((size_t)o->n_runs, sizeof *res->rows);
    if (!res->rows) {
        dt_trace_free(prof);
        return DT_FAIL(DT_ERR_NOMEM, "dtsim validate: out of memory");
    }
    const int skip = o->skip > 0 ? o->skip : 1;
    OUT("inputs: compute profile %s (a single-rank run); links %s", o->profile,
        o->comm_json ? o->comm_json
        : o->hw      ? o->hw
                     : "dtsim's default hardware");
    if (o->comm_json)
        OUT(" (ring fit: alpha %.0f ns, beta %.3f GB/s, rel. rms %.3f)", hw.intra.alpha_ns, hw.intra.bytes_per_ns, rms);
    if (o->n_colocated > 0)
        OUT("; co-located profile: %d ranks computing at once run %.3fx slower (range %.3f over the ranks)",
            o->n_colocated, co_slow, co_spread);
    if (hw.cores_per_node > 0) {
        OUT("; %d cores per node, compute slowdown by ranks computing at once:", hw.cores_per_node);
        for (int k = 1; k <= hw.n_contention; k++) OUT(" %d: %.3f", k, hw.contention[k - 1]);
    }
    OUT("\nthe measured runs give only their configuration (layout, schedule, batch), never their durations\n");
    OUT("%-34s %10s %10s %8s | %21s | %21s | %21s\n", "run", "measured", "predicted", "error", "compute ms meas/pred",
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
            if (st == DT_OK) st = dts_cost_to_precision(&sc.cost, &sc.model, sc.B, sc.T, &hw, sc.precision, NULL);
            sc.have_cost = st == DT_OK;
        }
        int pid = -1; /* the lowest rank: a rank's file has one, a merged file (dtrain under mpirun) every one */
        for (size_t k = 0; k < t->n_events; k++)
            if (t->events[k].ph != DT_TRACE_METADATA && (pid < 0 || t->events[k].pid < pid)) pid = t->events[k].pid;
        if (pid < 0) pid = 0;
        dts_validate_row *row = &res->rows[i];
        if (st == DT_OK) {
            st = dt_trace_phase_times_events(t->events, t->n_events, pid, skip, &row->measured);
            if (st != DT_OK) { /* the events are the run's file's: name it */
                char why[768];
                snprintf(why, sizeof why, "%s", dt_last_error());
                st = DT_FAIL(st, "%s: %s", o->runs[i], why);
            }
        }
        dts_summary sum_pred;
        if (st == DT_OK) {
            const dts_run_opts ro = {.keep_events = 1};
            st = dts_run(&sc, &ro, &sum_pred);
            if (st != DT_OK) { /* the scenario is the run's file's: name it (the message is overwritten below) */
                char why[768];
                const char *m = dt_last_error();
                snprintf(why, sizeof why, "%s", strncmp(m, "dtsim: ", 7) ? m : m + 7);
                st = DT_FAIL(st, "%s: %s", o->runs[i], why);
            }
        }
        if (st == DT_OK) {
            st = dt_trace_phase_times_events(sum_pred.ev, sum_pred.n_ev, pid, skip, &row->predicted);
            if (st == DT_OK && o->keep_summaries) {
                row->summary = sum_pred; /* the caller's, events and all (dts_validate_result_free) */
                row->has_summary = 1;
            } else {
                dts_summary_free(&sum_pred);
            }
        }
        dt_trace_free(t);
        if (st != DT_OK) break;
        dts__run_name(&sc, row->name, sizeof row->name);
        row->err = (row->predicted.step_ns - row->measured.step_ns) / row->measured.step_ns;
        sum += fabs(row->err);
        if (fabs(row->err) > res->max_abs_err) res->max_abs_err = fabs(row->err);
        res->n++;
        OUT("%-34s %7.2f ms %7.2f ms %+7.1f%% | %9.2f / %9.2f | %9.2f / %9.2f | %9.2f / %9.2f\n", row->name,
            row->measured.step_ns * 1e-6, row->predicted.step_ns * 1e-6, 100 * row->err,
            row->measured.compute_ns * 1e-6, row->predicted.compute_ns * 1e-6, row->measured.comm_ns * 1e-6,
            row->predicted.comm_ns * 1e-6, row->measured.optim_ns * 1e-6, row->predicted.optim_ns * 1e-6);
    }
    dt_trace_free(prof);
    if (res->n) res->mean_abs_err = sum / res->n;
    if (st == DT_OK)
        OUT("step time: mean absolute error %.1f%%, largest %.1f%% over %d runs\n", 100 * res->mean_abs_err,
            100 * res->max_abs_err, res->n);
    return st;
}

void dts_validate_result_free(dts_validate_result *r)
{
    if (!r) return;
    for (int i = 0; r->rows && i < r->n; i++)
        if (r->rows[i].has_summary) dts_summary_free(&r->rows[i].summary);
    free(r->rows);
    memset(r, 0, sizeof *r);
}
