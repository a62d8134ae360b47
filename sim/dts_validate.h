/* dts_validate.h: the same figures from a real trace and a simulated one,
 * and the validation of predictions against measured runs
 * (sim/validate.c).
 *
 * Step and phase times of one rank (dts_phase_times_events): the step
 * period is the mean distance between the ends of consecutive steps, where
 * a step ends with the last event carrying its "iter" (steps >= skip;
 * "evaluate" spans are not part of a step); the
 * phases are the summed spans per step: compute (forward, backward,
 * recompute: cat "compute" or "pipeline"), optimizer (optimizer,
 * optim_step, apply), comm (cat "comm" and "tp" spans, push/pull, pipeline
 * receives). One function computes them for both sides.
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

dt_status dts_phase_times_events(const dt_trace_event *ev, size_t n, int pid, int skip, dts_phase_times *out);

typedef struct dts_validate_opts {
    const char *profile;   /* single-rank compute profile trace (required) */
    const char *hw;        /* hardware JSON (its links: the communication fit); NULL: dts_hw_default */
    const char *comm_json; /* `dtbench allreduce --json` output to fit the links from (overrides hw's links) */
    const char **runs;     /* measured traces: rank 0's file of each run (run.rank0.json or run.json) */
    int n_runs;
    int skip;              /* warm-up steps left out (default 1) */
    int devices_per_node;  /* > 0: overrides the hardware file's (ranks sharing a node's intra link) */
    int cores_per_node;    /* > 0: the node's ranks share this many cores (dts_hw.cores_per_node) */
} dts_validate_opts;

typedef struct dts_validate_row {
    char name[96];         /* the run: its layout and schedule */
    dts_phase_times measured, predicted;
    double err;            /* (predicted - measured) / measured step time */
} dts_validate_row;

typedef struct dts_validate_result {
    int n;
    dts_validate_row *rows; /* (n) */
    double mean_abs_err, max_abs_err;
} dts_validate_result;

/* Predict each run, print the table (and which inputs were used) to out. */
dt_status dts_validate(const dts_validate_opts *o, FILE *out, dts_validate_result *res);
void dts_validate_result_free(dts_validate_result *r);

#ifdef __cplusplus
}
#endif
#endif
