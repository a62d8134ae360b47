/* dtsim_sweep.c: `dtsim sweep`: the --sweep KEY=V1,V2,... values taken
 * out of argv, every combination of them applied to the base scenario and
 * checked before any runs, then one table row (text or CSV) per run. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dts_run.h"
#include "dtsim_prog.h"

static const char *const dtsim_sweep_names[] = {
    "micro-batches",      "pipeline-model-parallel-size", "pipeline-schedule",
    "data-parallel-size", "tensor-model-parallel-size",   "link-bandwidth-scale"};
/* short column headings */
static const char *const dtsim_sweep_cols[] = {"m", "p", "schedule", "d", "t", "bw_scale"};

/* Parse one --sweep KEY=V1,V2,...; 0 or 2 after the message. */
static int dtsim_parse_sweep(const char *spec, dtsim_sweep *sw)
{
    const char *eq = strchr(spec, '=');
    int key = -1;
    for (int k = 0; eq && k < 6; k++)
        if (strlen(dtsim_sweep_names[k]) == (size_t)(eq - spec) && !strncmp(spec, dtsim_sweep_names[k], eq - spec))
            key = k;
    if (key < 0) {
        fprintf(stderr,
                PROG ": --sweep '%s': expected KEY=V1,V2,... with KEY one of micro-batches, "
                     "pipeline-model-parallel-size, pipeline-schedule, data-parallel-size, "
                     "tensor-model-parallel-size, link-bandwidth-scale\n",
                spec);
        return 2;
    }
    sw->key = (dtsim_sweep_key)key;
    sw->n = 0;
    const char *q = eq + 1;
    for (;;) {
        const char *comma = strchr(q, ',');
        size_t len = comma ? (size_t)(comma - q) : strlen(q);
        char item[24];
        int ok = len > 0 && len < sizeof item && sw->n < DTSIM_MAX_SWEEP_VALUES;
        double v = 0;
        if (ok) {
            memcpy(item, q, len);
            item[len] = '\0';
            if (sw->key == DTSIM_SW_SCHED) {
                dt_sched_kind kind;
                ok = dt_sched_kind_parse(item, &kind) == DT_OK;
                dt_clear_error();
                v = (double)kind;
            } else {
                char *end = NULL;
                errno = 0;
                v = strtod(item, &end);
                ok = *end == '\0' && errno == 0 && isfinite(v) && v > 0;
                if (ok && sw->key != DTSIM_SW_BW) ok = v == floor(v) && v <= 1 << 20;
            }
        }
        if (!ok) {
            const char *want = sw->key == DTSIM_SW_SCHED ? "schedule names (gpipe, 1f1b, pipedream, pipedream-vsync, "
                                                           "interleaved-1f1b, zb-h1, zb-v)"
                               : sw->key == DTSIM_SW_BW  ? "numbers > 0"
                                                         : "integers >= 1";
            if (sw->n >= DTSIM_MAX_SWEEP_VALUES)
                fprintf(stderr, PROG ": --sweep '%s': expected at most %d values\n", spec, DTSIM_MAX_SWEEP_VALUES);
            else
                fprintf(stderr, PROG ": --sweep '%s': expected %s=V1,V2,... with %s separated by commas\n", spec,
                        dtsim_sweep_names[key], want);
            return 2;
        }
        sw->v[sw->n] = v;
        snprintf(sw->text[sw->n], sizeof sw->text[sw->n], "%s", item);
        sw->n++;
        if (!comma) break;
        q = comma + 1;
    }
    return 0;
}

/* Every --sweep out of argv (dtsim_prog.h). */
int dtsim_take_sweeps(int *argc, char **argv, dtsim_sweep *sw, int *n_sw)
{
    int out = 1;
    *n_sw = 0;
    for (int i = 1; i < *argc; i++) {
        const char *spec = NULL;
        if (!strcmp(argv[i], "--sweep")) {
            if (i + 1 >= *argc || !strncmp(argv[i + 1], "--", 2)) {
                fprintf(stderr, PROG ": --sweep: missing value (KEY=V1,V2,...)\n");
                return 2;
            }
            spec = argv[++i];
        } else if (!strncmp(argv[i], "--sweep=", 8)) {
            spec = argv[i] + 8;
        } else {
            argv[out++] = argv[i];
            continue;
        }
        if (*n_sw >= DTSIM_MAX_SWEEP_KEYS) {
            fprintf(stderr, PROG ": --sweep '%s': at most %d keys can be swept\n", spec, DTSIM_MAX_SWEEP_KEYS);
            return 2;
        }
        if (dtsim_parse_sweep(spec, &sw[*n_sw]) != 0) return 2;
        for (int k = 0; k < *n_sw; k++)
            if (sw[k].key == sw[*n_sw].key) {
                fprintf(stderr, PROG ": --sweep %s: given twice (one --sweep per key)\n", dtsim_sweep_names[sw[k].key]);
                return 2;
            }
        (*n_sw)++;
    }
    *argc = out;
    return 0;
}

static void dtsim_sweep_apply(const dtsim_sweep *sw, int i, const dts_scenario *base, dts_scenario *sc)
{
    const double v = sw->v[i];
    switch (sw->key) {
    case DTSIM_SW_M: sc->m = (int)v; break;
    case DTSIM_SW_P: sc->p = (int)v; break;
    case DTSIM_SW_SCHED:
        /* --virtual-pipeline-model-parallel-size and --num-layers-per-virtual-pipeline-stage are
         * interleaved-1f1b's: the other kinds take their own chunks (zb-v 2, the rest 1) */
        sc->schedule = (dt_sched_kind)(int)v;
        sc->vpp = sc->schedule == DT_SCHED_INTERLEAVED_1F1B ? base->vpp : 0;
        sc->vpp_layers = sc->schedule == DT_SCHED_INTERLEAVED_1F1B ? base->vpp_layers : 0;
        break;
    case DTSIM_SW_D: sc->d = (int)v; break;
    case DTSIM_SW_T: /* --sequence-parallel splits over t > 1 ranks: a t = 1 row runs without it */
        sc->t = (int)v;
        sc->sequence_parallel = base->sequence_parallel && sc->t > 1;
        break;
    case DTSIM_SW_BW:
        sc->hw.intra.bytes_per_ns = base->hw.intra.bytes_per_ns * v;
        sc->hw.inter.bytes_per_ns = base->hw.inter.bytes_per_ns * v;
        break;
    }
}

/* With --global-batch-size G (and m not swept), a combination keeps G:
 * m = G / (B x d) for its d. 0, or 2 after the message naming the combination. */
static int dtsim_sweep_batch(const dtsim_opts *o, dt_arg *args, int n_args, const dtsim_sweep *sw, int n_sw,
                             dts_scenario *sc, const char *label)
{
    if (!dt_args_given(args, n_args, "--global-batch-size")) return 0;
    for (int k = 0; k < n_sw; k++)
        if (sw[k].key == DTSIM_SW_M) return 0;
    const int64_t per_micro = (int64_t)sc->B * sc->d;
    if (o->job.global_batch % per_micro != 0) {
        fprintf(stderr,
                PROG ": --sweep %s: --global-batch-size %d is not a multiple of --micro-batch-size %d x "
                     "--data-parallel-size %d\n",
                label, o->job.global_batch, sc->B, sc->d);
        return 2;
    }
    sc->m = (int)(o->job.global_batch / per_micro);
    return 0;
}

static void dtsim_cell(int csv, int width, const char *text, int last)
{
    if (csv) printf("%s%s", text, last ? "\n" : ",");
    else printf("%*s%s", width, text, last ? "\n" : "  ");
}

int dtsim_cmd_sweep(dtsim_opts *o, dt_arg *args, int n_args, const dtsim_sweep *sw, int n_sw)
{
    if (n_sw == 0) {
        fprintf(stderr, PROG ": --sweep: expected at least one KEY=V1,V2,... (see dtsim sweep --help)\n");
        return 2;
    }
    int combos = 1;
    for (int k = 0; k < n_sw; k++) {
        combos *= sw[k].n;
        if (combos > DTSIM_MAX_COMBOS) {
            fprintf(stderr, PROG ": --sweep: more than %d combinations\n", DTSIM_MAX_COMBOS);
            return 2;
        }
    }
    dts_scenario *base = malloc(sizeof *base), *sc = malloc(sizeof *sc);
    if (!base || !sc) {
        free(base);
        free(sc);
        fprintf(stderr, PROG ": out of memory for the scenarios\n");
        return 1;
    }
    char profile[1024];
    /* the base alone is not checked: only with each combination applied (a
     * --pipeline-split for the swept p, say) */
    int rc = dtsim_make_scenario(o, args, n_args, base, profile, sizeof profile, 0);
    int idx[DTSIM_MAX_SWEEP_KEYS];
    char label[256];
    /* every combination is checked before any runs */
    for (int c = 0; rc == 0 && c < combos; c++) {
        *sc = *base;
        int r = c, len = 0;
        label[0] = '\0';
        for (int k = n_sw - 1; k >= 0; k--) { /* the first key varies slowest */
            idx[k] = r % sw[k].n;
            r /= sw[k].n;
        }
        for (int k = 0; k < n_sw; k++) {
            dtsim_sweep_apply(&sw[k], idx[k], base, sc);
            len += snprintf(label + len, sizeof label - (size_t)len, "%s%s=%s", k ? " " : "",
                            dtsim_sweep_names[sw[k].key], sw[k].text[idx[k]]);
            if (len >= (int)sizeof label) len = (int)sizeof label - 1;
        }
        rc = dtsim_sweep_batch(o, args, n_args, sw, n_sw, sc, label);
        if (rc != 0) break;
        dt_status st = dts_scenario_check(sc);
        if (st != DT_OK) {
            fprintf(stderr, PROG ": --sweep %s: %s\n", label, dtsim_last_error());
            rc = dtsim_input_code(st);
        }
    }
    /* the costs do not depend on the swept keys (model, B, T and the
     * device are fixed; costs are per whole layer): fill them once */
    if (rc == 0) {
        dt_status st = dts_scenario_set_cost(base, profile[0] ? profile : NULL);
        if (st != DT_OK) rc = dtsim_fail(st);
    }
    if (rc != 0) {
        free(base);
        free(sc);
        return rc;
    }
    const int csv = o->csv;
    static const char *const cols[] = {"step_ms", "bubble0", "bubble_max", "formula", "comm_ms", "peak_MiB"};
    int width[DTSIM_MAX_SWEEP_KEYS];
    if (!csv) {
        dtsim_print_scenario(stdout, base);
        printf("\n");
    }
    for (int k = 0; k < n_sw; k++) {
        int w = (int)strlen(dtsim_sweep_cols[sw[k].key]);
        for (int i = 0; i < sw[k].n; i++)
            if ((int)strlen(sw[k].text[i]) > w) w = (int)strlen(sw[k].text[i]);
        width[k] = w;
        dtsim_cell(csv, w, dtsim_sweep_cols[sw[k].key], 0);
    }
    for (int j = 0; j < 6; j++) dtsim_cell(csv, 10, cols[j], j == 5);
    fflush(stdout);
    for (int c = 0; c < combos; c++) {
        *sc = *base;
        int r = c;
        for (int k = n_sw - 1; k >= 0; k--) {
            idx[k] = r % sw[k].n;
            r /= sw[k].n;
        }
        for (int k = 0; k < n_sw; k++) dtsim_sweep_apply(&sw[k], idx[k], base, sc);
        (void)dtsim_sweep_batch(o, args, n_args, sw, n_sw, sc, ""); /* checked above */
        dts_run_opts ro = {.trace_path = NULL, .keep_events = 0};
        dts_summary s;
        memset(&s, 0, sizeof s);
        dt_status st = dts_run(sc, &ro, &s);
        if (st != DT_OK) {
            fflush(stdout);
            fprintf(stderr, PROG ": %s\n", dtsim_last_error());
            rc = st == DT_ERR_INVALID || st == DT_ERR_UNSUPPORTED || st == DT_ERR_FORMAT ? 2 : 1;
            break;
        }
        double b0 = s.bubble && s.p > 0 ? s.bubble[0] : NAN, bmax = NAN;
        for (int i = 0; s.bubble && i < s.p; i++)
            if (!isnan(s.bubble[i]) && (isnan(bmax) || s.bubble[i] > bmax)) bmax = s.bubble[i];
        int64_t peak = 0;
        for (int i = 0; s.peak_mem && i < s.n_ranks; i++)
            if (s.peak_mem[i] > peak) peak = s.peak_mem[i];
        const double comm = s.comm_ns_dp + s.comm_ns_pp + s.comm_ns_tp + s.comm_ns_ps;
        char cell[6][32];
        snprintf(cell[0], sizeof cell[0], "%.3f", s.step_ns / 1e6);
        if (isnan(b0)) snprintf(cell[1], sizeof cell[1], "%s", csv ? "" : "-");
        else snprintf(cell[1], sizeof cell[1], "%.4f", b0);
        if (isnan(bmax)) snprintf(cell[2], sizeof cell[2], "%s", csv ? "" : "-");
        else snprintf(cell[2], sizeof cell[2], "%.4f", bmax);
        snprintf(cell[3], sizeof cell[3], "%.4f", s.bubble_formula);
        snprintf(cell[4], sizeof cell[4], "%.3f", comm / 1e6);
        snprintf(cell[5], sizeof cell[5], "%.2f", (double)peak / (1024.0 * 1024.0));
        for (int k = 0; k < n_sw; k++) dtsim_cell(csv, width[k], sw[k].text[idx[k]], 0);
        for (int j = 0; j < 6; j++) dtsim_cell(csv, 10, cell[j], j == 5);
        fflush(stdout);
        dts_summary_free(&s);
    }
    if (rc == 0) dtsim_warn_unmodelled(o, base);
    free(base);
    free(sc);
    return rc;
}
