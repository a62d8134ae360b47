/* simval.h: the validation matrix of `dtbench simval` (bench/simval_runs.c)
 * and the figures read from its runs (bench/simval_figures.c).
 *
 * A run is a real dtrain job under mpirun that the simulator predicts from
 * the calibration inputs only; the matrix lists each run once, and simval
 * measures each `--repeats` times. Every run of the matrix uses the same
 * model (DT_SIMVAL_MODEL) and global batch, so that runs differ only in
 * what is validated (layout, schedule, exchange, precision, recomputation,
 * micro-batch count). */
#ifndef DT_SIMVAL_H
#define DT_SIMVAL_H

#include <stdint.h>

#include "dt_trace.h"

/* the model and batch of every profile and run: GPT width 96, 4 blocks,
 * T = 32, global batch 64. A step takes 140 ms on one core of this machine
 * alone (fp32), 60-150 ms in the 2- and 4-rank runs: long against the
 * scheduler's hiccups (a few ms). */
#define DT_SIMVAL_MODEL                                                                     \
    "--model tiny --hidden-size 96 --num-attention-heads 4 --num-layers 4 --seq-length 32 " \
    "--max-position-embeddings 64 --global-batch-size 64 --eval-interval 0 --eval-iters 1 --log-interval 100000"

enum { DT_SIMVAL_FP32 = 0, DT_SIMVAL_BF16, DT_SIMVAL_FP16, DT_SIMVAL_NPREC };

typedef struct dt_simval_run {
    const char *name;  /* file stem and table label */
    const char *set;   /* what it validates: "pipeline", "data-parallel", ... */
    int np;            /* mpirun -np */
    int mbs;           /* --micro-batch-size: the compute profile of that size predicts it */
    int prec;          /* DT_SIMVAL_FP32, _BF16, _FP16: and of that precision */
    int cluster;       /* 1: on the emulated 2-node cluster (tests/cluster.sh), 1 rank per node */
    int quick;         /* 1: in --quick (make check) */
    const char *flags; /* dtrain flags beyond DT_SIMVAL_MODEL, --micro-batch-size and the precision's */
} dt_simval_run;

extern const dt_simval_run dt_simval_runs[];
extern const int dt_simval_n_runs;
extern const char *const dt_simval_prec_name[DT_SIMVAL_NPREC];
extern const char *const dt_simval_prec_flag[DT_SIMVAL_NPREC];

/* The largest "activation_bytes" counter of a real trace (bytes), -1 when it has none. */
int64_t dt_simval_peak_act(const dt_trace *t);
/* The largest activations (not the stashed weights) of pid's "memory" counters among simulated events, -1 when none. */
int64_t dt_simval_sim_peak_act(const dt_trace_event *ev, size_t n, int pid);

/* A parameter-server run's staleness, from its --summary JSON: the pushes'
 * mean, largest and histogram ([0..14] exact, [15] >= 15). 0 on success,
 * -1 (message on stderr) when the file has no "parameter_server" figures. */
int dt_simval_staleness(const char *summary_json, double *mean, int *max, int64_t hist[16]);
/* Total variation distance of two histograms (each normalised): 0 equal, 1 disjoint. */
double dt_simval_hist_distance(const int64_t a[16], const int64_t b[16]);

#endif
