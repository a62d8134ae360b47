/* dtsim_prog.h: what the simulator program's files share (not a library
 * header): the parsed flags (dtsim_opts), the scenario built from them
 * (dtsim_scenario.c), the sweep subcommand (dtsim_sweep.c), the analyze
 * subcommand (dtsim_analyze.c) and merge (dtsim_merge.c). The flag tables,
 * run, validate and main are in dtsim.c. */
#ifndef DTSIM_PROG_H
#define DTSIM_PROG_H

#include <stddef.h>
#include <stdio.h>

#include "args.h"
#include "dtrain.h"
#include "dts_scenario.h"
#include "job_flags.h"

#define PROG "dtsim"
#define DTSIM_MAX_SWEEP_KEYS 3
#define DTSIM_MAX_SWEEP_VALUES 64
#define DTSIM_MAX_COMBOS 4096
#define DTSIM_MAX_RUNS 256

typedef enum { DTSIM_RUN = 0, DTSIM_SWEEP, DTSIM_VALIDATE, DTSIM_ANALYZE } dtsim_mode;

typedef struct dtsim_opts {
    job_opts job; /* the flags dtsim shares with dtrain (job_flags.h) */
    /* scenario */
    int vocab, micro_batches, data_size;
    const char *config, *hw, *profile, *grad_trace;
    int devices_per_node;    /* 0: the hardware file's */
    int cores_per_node;      /* 0: a core (device) per rank */
    const char *colocated;   /* validate: FILE,FILE,... a co-located profile (NULL: none) */
    const char *collectives; /* NULL: the hardware file's "collectives" */
    int strict_memory;       /* run: refuse a prediction over the device's memory */
    /* sweep */
    const char *sweep;
    int csv;
    /* validate */
    const char *comm;
    int skip; /* validate, analyze */
    /* analyze */
    int compare;
} dtsim_opts;

/* dtsim_scenario.c: the library's message without a leading "dtsim: ",
 * the exit status of a failure on the inputs (2 for the user's, else 1),
 * and both after printing the message. */
const char *dtsim_last_error(void);
int dtsim_input_code(dt_status st);
int dtsim_fail(dt_status st);
/* dtsim_fail for a failure of the whole scenario (its checks, the run's
 * limits): the line also names the --config and --hw files it came from. */
int dtsim_fail_scenario(dt_status st, const dtsim_opts *o);

/* --colocated's list split at commas into out (DTS_HW_MAX_CONTENTION entries), pointing into *buf (the
 * caller frees it); 0, or 2 after one line on stderr. */
int dtsim_colocated_split(const char *list, const char **out, int *n, char **buf);
/* Fit hw's contention from the lone profile and the co-located list (dts_fit_contention_files); 0, or 2
 * after one line on stderr. */
int dtsim_colocated_fit(const char *list, const char *profile, int skip, dts_hw *hw);
/* The scenario from --config and the flags (checked when `check`).
 * Returns 0, or the exit status after printing the one-line error. The
 * cost is not filled yet; *profile is the --profile or the config's. */
int dtsim_make_scenario(const dtsim_opts *o, dt_arg *args, int n_args, dts_scenario *sc, char *profile,
                        size_t profile_cap, int check);
void dtsim_print_scenario(FILE *f, const dts_scenario *sc);
/* One warning line on stderr naming what --config's run recorded that the
 * simulation leaves out (dts_scenario_unmodelled); nothing when none. */
void dtsim_warn_unmodelled(const dtsim_opts *o, const dts_scenario *sc);

/* dtsim_merge.c: dtsim merge (argv from the subcommand on). Returns the exit status. */
int dtsim_cmd_merge(int argc, char **argv);

/* dtsim_sweep.c: the swept keys and their values. */
typedef enum { DTSIM_SW_M = 0, DTSIM_SW_P, DTSIM_SW_SCHED, DTSIM_SW_D, DTSIM_SW_T, DTSIM_SW_BW } dtsim_sweep_key;

typedef struct dtsim_sweep {
    dtsim_sweep_key key;
    int n;
    double v[DTSIM_MAX_SWEEP_VALUES];      /* numbers, or the schedule kind */
    char text[DTSIM_MAX_SWEEP_VALUES][24]; /* as given */
} dtsim_sweep;

/* Take every --sweep out of argv (it may repeat, unlike the table's
 * flags); the rest goes to the parser. Returns 0 or 2. */
int dtsim_take_sweeps(int *argc, char **argv, dtsim_sweep *sw, int *n_sw);
/* dtsim sweep: every combination, checked first, then the table. */
int dtsim_cmd_sweep(dtsim_opts *o, dt_arg *args, int n_args, const dtsim_sweep *sw, int n_sw);

/* dtsim_analyze.c: dtsim analyze: each run's time per step and rank by
 * category (dt_breakdown_all), a table or CSV. Returns the exit status. */
int dtsim_cmd_analyze(const dtsim_opts *o, const char **args, int n_args);

#endif
