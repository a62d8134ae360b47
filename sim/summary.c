/* summary.c: a simulated run's summary as JSON and as a few lines of text
 * (see dts_run.h). Times in the JSON are milliseconds per step, memory in
 * bytes; NaN (no pipeline) is written as null. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt_file.h"
#include "dts_run.h"

static json_t *dts__real(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static int dts__set(json_t *o, const char *k, json_t *v) { return !v || json_object_set_new(o, k, v) != 0; }

dt_status dts_summary_write(const dts_summary *s, const dts_scenario *sc, const char *path)
{
    json_t *o = json_object();
    int bad = !o;
    char *cfg = dts_scenario_json(sc);
    json_t *jc = cfg ? json_loads(cfg, 0, NULL) : NULL;
    free(cfg);
    bad |= !jc;
    if (!bad) {
        bad |= dts__set(o, "tool", json_string("dtsim"));
        bad |= dts__set(o, "steps", json_integer(s->steps));
        bad |= dts__set(o, "step_ms", dts__real(s->step_ns * 1e-6));
        bad |= dts__set(o, "total_ms", json_real((double)s->total_ns * 1e-6));
        json_t *ph = json_object();
        bad |= !ph || dts__set(o, "rank0_ms_per_step", ph);
        if (ph) {
            bad |= dts__set(ph, "compute", dts__real(s->rank0.compute_ns * 1e-6));
            bad |= dts__set(ph, "optimizer", dts__real(s->rank0.optim_ns * 1e-6));
            bad |= dts__set(ph, "comm", dts__real(s->rank0.comm_ns * 1e-6));
            bad |= dts__set(ph, "dp_allreduce", json_real(s->comm_ns_dp * 1e-6));
            bad |= dts__set(ph, "pipeline_wait", json_real(s->comm_ns_pp * 1e-6));
            bad |= dts__set(ph, "tp_allreduce", json_real(s->comm_ns_tp * 1e-6));
            bad |= dts__set(ph, "cp_exchange", json_real(s->comm_ns_cp * 1e-6));
            bad |= dts__set(ph, "push_pull", json_real(s->comm_ns_ps * 1e-6));
            bad |= dts__set(ph, "step_end_allreduce", json_real(s->world_sync_ns * 1e-6));
        }
        json_t *b = json_array(), *bf = json_array(), *ms = json_array(), *pm = json_array();
        bad |= !b || !bf || !ms || !pm;
        for (int i = 0; !bad && i < s->p; i++) {
            bad |= json_array_append_new(b, dts__real(s->bubble[i])) != 0;
            bad |= json_array_append_new(bf, dts__real(s->bubble_fb[i])) != 0;
            bad |= json_array_append_new(ms, json_integer(s->max_stash[i])) != 0;
        }
        for (int i = 0; !bad && i < s->n_ranks; i++)
            bad |= json_array_append_new(pm, json_integer(s->peak_mem[i])) != 0;
        bad |= dts__set(o, "bubble", b) | dts__set(o, "bubble_fb", bf);
        bad |= dts__set(o, "bubble_formula", dts__real(s->bubble_formula));
        bad |= dts__set(o, "model_chunks", json_integer(s->v));
        json_t *pms = json_array();
        bad |= !pms;
        for (int i = 0; !bad && i < s->p; i++)
            bad |= json_array_append_new(pms, json_integer(s->peak_mem_stage[i])) != 0;
        bad |= dts__set(o, "peak_memory_per_stage_bytes", pms);
        bad |= dts__set(o, "max_stashed_versions", ms) | dts__set(o, "peak_memory_bytes", pm);
        /* the device's memory against each rank's peak */
        const int64_t cap = sc->hw.mem_capacity_bytes;
        json_t *over = json_array();
        bad |= !over;
        for (int i = 0; !bad && i < s->n_ranks; i++)
            if (cap > 0 && s->peak_mem[i] > cap) bad |= json_array_append_new(over, json_integer(i)) != 0;
        bad |= dts__set(o, "mem_capacity_bytes", json_integer(cap));
        bad |= dts__set(o, "over_memory", json_boolean(over && json_array_size(over) > 0));
        bad |= dts__set(o, "over_memory_ranks", over);
        /* each stage's compute per step, and most over least */
        json_t *sc_ms = json_array();
        bad |= !sc_ms;
        for (int i = 0; !bad && i < s->p; i++)
            bad |= json_array_append_new(sc_ms, json_real(s->stage_compute_ns[i] * 1e-6)) != 0;
        bad |= dts__set(o, "stage_compute_ms", sc_ms);
        bad |= dts__set(o, "stage_compute_imbalance", json_real(dts_summary_imbalance(s, NULL, NULL)));
        json_t *ps = json_object(), *h = json_array();
        bad |= !ps || !h;
        for (int i = 0; !bad && i < 16; i++) bad |= json_array_append_new(h, json_integer(s->staleness_hist[i])) != 0;
        if (ps) {
            bad |= dts__set(ps, "pushes", json_integer(s->pushes));
            bad |= dts__set(ps, "staleness_mean", json_real(s->staleness_mean));
            bad |= dts__set(ps, "staleness_max", json_integer(s->staleness_max));
            bad |= dts__set(ps, "staleness_histogram", h);
        }
        bad |= dts__set(o, "parameter_server", ps);
        bad |= dts__set(o, "skipped_steps", json_integer(s->skipped_steps));
        bad |= dts__set(o, "overflows", json_integer(s->overflows));
        bad |= dts__set(o, "final_loss_scale", dts__real(s->final_loss_scale));
        bad |= dts__set(o, "events", json_integer((json_int_t)s->events));
        bad |= dts__set(o, "wall_seconds", json_real(s->wall_seconds));
        bad |= dts__set(o, "config", jc);
        jc = NULL;
    }
    json_decref(jc);
    if (bad) {
        json_decref(o);
        return DT_FAIL(DT_ERR_NOMEM, "--summary %s: out of memory building the summary", path);
    }
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (!text) return DT_FAIL(DT_ERR_NOMEM, "--summary %s: out of memory writing the summary", path);
    dt_status st = dt_file_write_whole(path, "--summary", text, strlen(text)); /* whole or not at all */
    free(text);
    return st;
}

int dts_summary_over_memory(const dts_summary *s, int64_t capacity, int *first)
{
    int n = 0;
    if (first) *first = -1;
    for (int i = 0; capacity > 0 && i < s->n_ranks; i++)
        if (s->peak_mem[i] > capacity) {
            if (first && n == 0) *first = i;
            n++;
        }
    return n;
}

double dts_summary_imbalance(const dts_summary *s, int *slow, int *fast)
{
    int hi = 0, lo = 0;
    for (int i = 1; s->stage_compute_ns && i < s->p; i++) {
        if (s->stage_compute_ns[i] > s->stage_compute_ns[hi]) hi = i;
        if (s->stage_compute_ns[i] < s->stage_compute_ns[lo]) lo = i;
    }
    if (slow) *slow = hi;
    if (fast) *fast = lo;
    if (!s->stage_compute_ns || s->p < 2 || !(s->stage_compute_ns[lo] > 0)) return 1.0;
    return s->stage_compute_ns[hi] / s->stage_compute_ns[lo];
}

void dts_summary_print(FILE *f, const dts_summary *s, const dts_scenario *sc)
{
    char hw_name[4 * sizeof sc->hw.name]; /* from a hardware file: its control bytes escaped (dt_escape) */
    char cp[48] = "";
    if (sc->c > 1) snprintf(cp, sizeof cp, " c=%d (%s)", sc->c, dt_cp_comm_name(sc->cp_comm));
    fprintf(f, "dtsim: %s, t=%d p=%d d=%d%s, m=%d, %s, %s, %lld steps on %s\n", sc->model_name, sc->t, sc->p, sc->d, cp,
            sc->m, sc->p > 1 ? dt_sched_kind_name(sc->schedule) : "no pipeline", sc->exchange_name, (long long)s->steps,
            dt_escape(sc->hw.name, hw_name, sizeof hw_name));
    fprintf(f, "step time %.3f ms (rank 0: compute %.3f, optimizer %.3f, comm %.3f ms per step)\n", s->step_ns * 1e-6,
            s->rank0.compute_ns * 1e-6, s->rank0.optim_ns * 1e-6, s->rank0.comm_ns * 1e-6);
    if (s->p > 1 || sc->t > 1 || sc->c > 1) {
        /* both shares of each stage's step window: "bubble" counts forward, backward and the optimizer
         * step as work, "fwd/bwd-only" forward and backward alone (what the formula assumes) */
        fprintf(f, "bubble per stage (idle share of its step), formula %s = %.4f:\n",
                dt_schedule_bubble_formula_text(s->schedule), s->bubble_formula);
        for (int i = 0; i < s->p; i++)
            fprintf(f, "  stage %d: bubble %.4f, fwd/bwd-only %.4f\n", i, s->bubble[i], s->bubble_fb[i]);
        for (int i = 0; i < s->p; i++)
            if (s->max_stash[i]) fprintf(f, "  stage %d stashes up to %d weight versions\n", i, s->max_stash[i]);
        if ((int)s->schedule > DT_SCHED_PIPEDREAM_VSYNC) { /* the issue-22 kinds: chunks, split backward, memory */
            fprintf(f, "%d model chunk%s per stage%s; peak memory per stage:", s->v, s->v == 1 ? "" : "s",
                    dt_sched_splits_backward(s->schedule) ? ", backward split in B and W" : "");
            for (int i = 0; i < s->p; i++) fprintf(f, " %.2f", (double)s->peak_mem_stage[i] / 1048576.0);
            fprintf(f, " MiB\n");
        }
    }
    fprintf(f,
            "comm per step on rank 0: dp allreduce %.3f ms, pipeline waits %.3f ms, tp allreduce %.3f ms, "
            "push/pull %.3f ms",
            s->comm_ns_dp * 1e-6, s->comm_ns_pp * 1e-6, s->comm_ns_tp * 1e-6, s->comm_ns_ps * 1e-6);
    if (sc->c > 1) fprintf(f, ", cp exchange %.3f ms", s->comm_ns_cp * 1e-6);
    fprintf(f, "\n");
    if (s->world_sync_ns > 0)
        fprintf(f, "step end on every rank: the world allreduce of the loss (8 bytes, a ring over %d ranks) %.3f ms\n",
                s->n_ranks, s->world_sync_ns * 1e-6);
    int64_t peak = 0;
    int at = 0;
    for (int i = 0; i < s->n_ranks; i++)
        if (s->peak_mem[i] > peak) {
            peak = s->peak_mem[i];
            at = i;
        }
    fprintf(f, "peak memory %.2f MiB (rank %d)\n", (double)peak / 1048576.0, at);
    if (s->pushes)
        fprintf(f, "parameter server: %lld pushes, staleness mean %.2f, max %d\n", (long long)s->pushes,
                s->staleness_mean, s->staleness_max);
    if (isfinite(s->final_loss_scale))
        fprintf(f, "loss scale: %lld overflows, %lld skipped steps, final scale %g\n", (long long)s->overflows,
                (long long)s->skipped_steps, s->final_loss_scale);
    fprintf(f, "simulated %llu events in %.3f s\n", (unsigned long long)s->events, s->wall_seconds);
}
