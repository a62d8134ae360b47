/* dts_fp8.h: the simulator's FP8 numerics model (sim/fp8.c): from one
 * real FP8 run's trace, the share of each FP8 tensor's values that other
 * FP8 settings (format, recipe, margin, amax history) would saturate or
 * flush, and the comparison with a held-out run's counts (dtsim fp8).
 *
 * The tensors are dtrain's (docs/trace-format.md, "fp8 <tensor>"): block
 * l's twelve, index 12 l + 3 lin + role, lin 0 qkv, 1 attproj, 2 fc,
 * 3 fcproj, role 0 x (the GEMM's activation input), 1 w, 2 dy; named
 * "h.l.lin.role". The scale rules and formats are include/dt_fp8.h's,
 * called, not copied.
 *
 * u = log2(amax / |v|) is a value's distance below its conversion's amax
 * in binades (u >= 0). The model (its assumptions and measured accuracy
 * are at the top of sim/fp8.c): the distribution of u over a tensor's
 * non-zero values is the same at every step; a step of c non-zero values
 * with threshold u holds count(c, u) values with u' < u. */
#ifndef DTS_FP8_H
#define DTS_FP8_H

#include <stdint.h>
#include <stdio.h>

#include "dt_fp8.h"
#include "dt_status.h"
#include "dt_trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Relative binades of fp8_hist: j = floor(log2 amax) - floor(log2 |v|), 0..63 (63: 63 and below). */
#define DTS_FP8_REL 64
#define DTS_FP8_PER_BLOCK 12
#define DTS_FP8_MAX_LAYERS 1024
/* The top cell's shape exponent is fitted in [1, DTS_FP8_BETA_MAX]: 1 is log-uniform. */
#define DTS_FP8_BETA_MAX 16.0

/* A run's FP8 settings (dtrain's --fp8-* flags, its config's fp8_* keys). */
typedef struct dts_fp8_settings {
    dt_fp8_mode mode; /* DT_FP8_MODE_E4M3 or DT_FP8_MODE_HYBRID */
    dt_fp8_recipe recipe;
    dt_fp8_amax_algo algo;
    int margin;      /* 0..32 */
    int history_len; /* 1..65536 */
} dts_fp8_settings;

/* One FP8 tensor of a real run. */
typedef struct dts_fp8_tensor {
    int present;                          /* 1: the run recorded it (an fp8 event) */
    float *amax;                          /* (steps) the step's amax over every call; 0: not run */
    float *scale;                         /* (steps) delayed runs: the scale the step used; 0: not recorded */
    double *values, *saturated, *flushed; /* (steps) the step's counts */
    double hist[DTS_FP8_REL];             /* fp8_hist: the run's non-zero values by j */
    /* the fitted distribution (dts_fp8_fit) */
    double p[DTS_FP8_REL]; /* share of the non-zero values with u in [i, i + 1) (p[63]: u >= 63); sums to 1 */
    double nonzero;        /* non-zero values / values over the run (the histogram's total over the counts') */
    double a_mean;         /* the mean over the steps, by values, of frac(log2 amax): the binning's offset */
    double beta;           /* the top cell: c p[0] u^beta values within u < 1 of the amax */
    int beta_steps;        /* the run's saturating steps beta was fitted to; 0: the run's pooled beta */
} dts_fp8_tensor;

typedef struct dts_fp8_run {
    dts_fp8_settings set; /* the run's own (its config) */
    int layers;           /* blocks L */
    int n;                /* tensors, 12 L */
    int64_t first_iter;   /* the iteration of step 0 (a resumed run: > 0) */
    int64_t steps;
    dts_fp8_tensor *t;  /* (n) */
    double beta_pooled; /* beta fitted to every saturating step of the run (1 when none) */
    int beta_pooled_steps;
} dts_fp8_run;

/* The settings in a dtrain configuration (JSON text: a trace's
 * otherData.config, a summary's "config", or either whole file). A
 * configuration without "fp8_format" is DT_ERR_FORMAT ("not an FP8 run"),
 * a bad value DT_ERR_INVALID naming the key; what names it in messages. */
dt_status dts_fp8_settings_from_config(const char *json_text, const char *what, dts_fp8_settings *out);
/* "hybrid delayed, margin 0, history 16, max" (tensorwise and blockwise
 * without the history); returns buf. */
const char *dts_fp8_settings_text(const dts_fp8_settings *s, char *buf, size_t n);

/* A run of L blocks and `steps` steps with every array zeroed (for
 * hand-made runs: fill amax, values, hist, then dts_fp8_fit). */
dt_status dts_fp8_run_init(dts_fp8_run *r, int layers, int64_t steps, const dts_fp8_settings *set);
/* The run recorded in trace t (its fp8 and fp8_hist events and its
 * configuration), fitted; name is the file's, for messages. A trace
 * without fp8 events is DT_ERR_FORMAT ("run dtrain with --fp8-format
 * --trace"). */
dt_status dts_fp8_run_read(const dt_trace *t, const char *name, dts_fp8_run *out);
/* Fit each tensor's distribution of u from its histogram and its steps'
 * amaxes, and the top cell's shape from the run's own saturated counts
 * (sim/fp8.c). */
dt_status dts_fp8_fit(dts_fp8_run *r);
/* Every tensor's top-cell shape set to beta (>= 1; 1: log-uniform), in
 * place of the fit: to see what the prediction owes to it. */
dt_status dts_fp8_set_beta(dts_fp8_run *r, double beta);
void dts_fp8_run_free(dts_fp8_run *r);

/* "h.l.lin.role" of tensor index i; returns buf. */
const char *dts_fp8_tensor_name(int i, char *buf, size_t n);
/* The index of such a name, or -1. */
int dts_fp8_tensor_index(const char *name);

/* Of a step of c non-zero values of tensor t, those within u binades of
 * its amax (u' < u): 0 for u <= 0, at least 1 (the amax itself) for u >
 * 0, c p[0] u^beta in the top cell, log-uniform within the cells below. */
double dts_fp8_count_within(const dts_fp8_tensor *t, double c, double u);

typedef struct dts_fp8_counts {
    double saturated, flushed, values;
} dts_fp8_counts;

typedef struct dts_fp8_prediction {
    dts_fp8_settings set;
    int n;                   /* tensors (the run's) */
    dts_fp8_counts *t;       /* (n) predicted over the run's steps */
    dts_fp8_counts total;    /* over the tensors */
    int64_t steps_saturated; /* steps in which some tensor's amax exceeds max / scale */
    /* under the run's own delayed settings: the scales recomputed from its
     * amaxes against those it recorded (equal when the recipe is replayed
     * as the runtime runs it) */
    int64_t scales_compared, scales_equal;
} dts_fp8_prediction;

/* Predict the run's tensors under settings s (sim/fp8.c). */
dt_status dts_fp8_predict(const dts_fp8_run *r, const dts_fp8_settings *s, dts_fp8_prediction *out);
void dts_fp8_prediction_free(dts_fp8_prediction *p);

/* A real run's measured counts, per tensor and in total, with its settings. */
typedef struct dts_fp8_measured {
    dts_fp8_settings set;
    int n;             /* tensors (12 L) */
    int64_t steps;     /* the run's steps with FP8 (a summary's "steps") */
    dts_fp8_counts *t; /* (n); a tensor the run did not record has values 0 */
    dts_fp8_counts total;
} dts_fp8_measured;

/* From a dtrain trace (its fp8 events summed) or summary (its "fp8"
 * object) at path. */
dt_status dts_fp8_measured_read(const char *path, dts_fp8_measured *out);
/* The run's own measured counts. */
dt_status dts_fp8_measured_of_run(const dts_fp8_run *r, dts_fp8_measured *out);
void dts_fp8_measured_free(dts_fp8_measured *m);

/* Per-tensor agreement of a prediction with measured counts, over the
 * tensors with at least min_count saturated (flushed: 1) values on either
 * side: each tensor's factor max(r, 1/r), r = (predicted + 1) / (measured
 * + 1); *median and *max of them (0 when none), returns how many. */
int dts_fp8_agreement(const dts_fp8_prediction *p, const dts_fp8_measured *m, int flushed, double min_count,
                      double *median, double *max);

/* Print the prediction, one row per tensor and the total; with m (may be
 * NULL) the measured counts beside it and the total's errors. */
void dts_fp8_print(FILE *f, const dts_fp8_run *r, const dts_fp8_prediction *p, const dts_fp8_measured *m);

#ifdef __cplusplus
}
#endif
#endif
