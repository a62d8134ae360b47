/* dts_validate.h: the validation of predictions against measured runs
 * (sim/validate.c).
 *
 * Both sides' step and phase times come from one function,
 * dt_trace_phase_times_events (include/dt_trace_stats.h), over the measured
 * trace and over the simulated events alike.
 *
 * Validation predicts each measured run from calibration inputs that are
 * not that run (a single-rank compute profile and a communication fit),
 * and reports measured vs predicted step time and phases with the error. */
#ifndef DTS_VALIDATE_H
#define DTS_VALIDATE_H

#include <stdio.h>

#include "dt_trace.h"
#include "dts_run.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dts_validate_opts {
    const char *profile;   /* single-rank compute profile trace (required) */
    const char *hw;        /* hardware JSON (its links: the communication fit); NULL: dts_hw_default */
    const char *comm_json; /* `dtbench allreduce --json` output to fit the links from (overrides hw's links) */
    const char **runs;     /* measured traces: rank 0's file of each run (run.rank0.json or run.json) */
    int n_runs;
    int skip;             /* warm-up steps left out (default 1) */
    int devices_per_node; /* > 0: overrides the hardware file's (ranks sharing a node's intra link) */
    int cores_per_node;   /* > 0: the node's ranks share this many cores (dts_hw.cores_per_node) */
    /* a co-located profile: n_colocated (>= 2) copies of `profile`'s run made at once on one node; the
     * compute slowdown of that many ranks computing together is fitted from them (dts_fit_contention_files) */
    const char *const *colocated;
    int n_colocated;
    int keep_summaries; /* 1: each row keeps its simulation's summary with its events (row.summary) */
} dts_validate_opts;

typedef struct dts_validate_row {
    char name[96]; /* the run: its layout and schedule */
    dt_trace_phase_times measured, predicted;
    double err; /* (predicted - measured) / measured step time */
    int has_summary;
    dts_summary summary; /* with opts.keep_summaries: the simulation's, events kept */
} dts_validate_row;

typedef struct dts_validate_result {
    int n;
    dts_validate_row *rows; /* (n) */
    double mean_abs_err, max_abs_err;
} dts_validate_result;

/* Predict each run, print the table (and which inputs were used) to out
 * (NULL: print nothing). On failure the rows before the failing run are
 * kept (res->n of them). */
dt_status dts_validate(const dts_validate_opts *o, FILE *out, dts_validate_result *res);
void dts_validate_result_free(dts_validate_result *r);

#ifdef __cplusplus
}
#endif
#endif
