/* dts_run.h: simulate one scenario (sim/run*.c: run.c the
 * entry, run_internal.h its files) and summarise it.
 *
 * The executor walks the same per-stage instruction lists the real runtime
 * executes (dt_schedule_make in lib/), or, without pipeline and tensor
 * parallelism, the trainer's step (forward and backward per layer and
 * micro-batch, gradient buckets launched during the last backward onto a
 * communication lane, then the optimizer), or the parameter server's
 * push / apply / pull. Its events are the real trace's events (names, cats,
 * lanes and args of docs/trace-format.md), with tool "dtsim", so the trace
 * statistics, the validation and the viewer read both alike.
 *
 * Invariants: a run is deterministic (same scenario, same bytes out);
 * simulated time is integer nanoseconds from 0. */
#ifndef DTS_RUN_H
#define DTS_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "dt_trace.h"
#include "dt_trace_stats.h"
#include "dts_scenario.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dts_run_opts {
    const char *trace_path;      /* write every rank's events there (NULL: none) */
    int keep_events;             /* keep every rank's events in the summary (dts_summary.ev) */
    double bw_scale;             /* what-if: every link's bandwidth times this (0: 1) */
    const dt_schedule *schedule; /* tests: run this schedule instead of dt_schedule_make_chunks's (same kind,
                                    p, chunks, m, steps); not owned */
} dts_run_opts;

typedef struct dts_summary {
    int64_t steps;
    int64_t total_ns;           /* end of the last event */
    double step_ns;             /* mean step period over steps >= 1 of rank 0 (all steps if only one) */
    int64_t *step_end_ns;       /* (steps) when rank 0 finished each step */
    dt_trace_phase_times rank0; /* rank 0's phases (dt_trace_phase_times_events over steps >= 1, as the
                                 * validation reads real traces) */
    int p;
    double *bubble;        /* (p) per stage: dt_bubble_stats mean; pipedream: run (NAN without pipeline events) */
    double *bubble_fb;     /* (p) forward/backward-only bubble (mean_fb; pipedream: run_fb) */
    double bubble_formula; /* dt_schedule_bubble_ideal_chunks: (p-1)/(m+p-1); pipedream (p-1)/(steps*m+p-1);
                              interleaved-1f1b (p-1)/(v*m+p-1); ... */
    dt_sched_kind schedule;
    int v;                   /* model chunks per stage (1 without pipeline) */
    int64_t *peak_mem_stage; /* (p) per stage: the most of its ranks' peak memory (bytes) */
    double *stage_compute_ns; /* (p) per stage, per step: its forwards and backwards of the m micro-batches over
                                 its chunks (the tensor-parallel collectives inside them included): the stages'
                                 balance, which the bubble formula assumes */
    int n_ranks;
    int64_t *peak_mem; /* (n_ranks) bytes: parameters + gradients + optimizer state + activations + stash */
    int *max_stash;    /* (p) most stashed weight versions held at once per stage */
    double comm_ns_dp, comm_ns_pp, comm_ns_tp, comm_ns_ps; /* rank 0, per step: data-parallel allreduce steps,
                                                             pipeline receive waits, tensor-parallel allreduces,
                                                             push/pull */
    double comm_ns_cp;    /* rank 0, per step: what context parallelism's exchanges add to its passes (a ring step
                          overlapped with the attention: its part not hidden) */
    double world_sync_ns; /* pipeline/tensor runs: the world allreduce of the loss that ends each step
                              * (8 bytes, a ring over every rank: 2(n-1) latencies), per step; else 0 */
    /* parameter server */
    int64_t pushes;
    double staleness_mean;
    int staleness_max;
    int64_t staleness_hist[16]; /* [0..14] exact, [15] >= 15 */
    /* numerics (fp16 with a gradient model) */
    int64_t skipped_steps, overflows;
    double final_loss_scale;
    uint64_t events;     /* engine events run */
    double wall_seconds; /* simulator's own time */
    dt_trace_event *ev;  /* (n_ev) with keep_events */
    size_t n_ev;
} dts_summary;

/* The most engine events dts_run runs (more is refused up front, naming
 * --collectives analytic where analytic collectives would bring it under). */
#define DTS_RUN_MAX_EVENTS 1e10
/* How many engine events a run of sc will create (sim/estimate.c): what
 * the executor creates per simulated rank (one per tensor-parallel group),
 * collective and sync; within a factor of 3 of the run's own count
 * (tests/check_sim.c). sc must hold its cost table. */
double dts_run_events_estimate(const dts_scenario *sc);
dt_status dts_run(const dts_scenario *sc, const dts_run_opts *opts, dts_summary *out);
void dts_summary_free(dts_summary *s);
/* The summary as JSON (with the scenario) into path. */
dt_status dts_summary_write(const dts_summary *s, const dts_scenario *sc, const char *path);
/* Ranks whose peak memory exceeds `capacity` bytes (0: none; capacity <= 0:
 * 0); *first (may be NULL) the lowest such rank. */
int dts_summary_over_memory(const dts_summary *s, int64_t capacity, int *first);
/* The stages' compute, most over least (1 with one stage or none);
 * *slow, *fast (may be NULL) the stages. */
double dts_summary_imbalance(const dts_summary *s, int *slow, int *fast);
/* A few human lines (step time, bubbles vs formula, comm per phase, peak memory). */
void dts_summary_print(FILE *f, const dts_summary *s, const dts_scenario *sc);

#ifdef __cplusplus
}
#endif
#endif
