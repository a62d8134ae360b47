/* dt_trace_stats.h: figures computed from a trace (lib/trace/trace_stats.c).
 * Pure computation over events already in memory: no I/O, no clocks, so a
 * real run's trace (dt_trace_read) and the simulator's events give their
 * figures through the same code.
 *
 * Step and phase times of one rank (dt_trace_phase_times_events): the step
 * period is the mean distance between the ends of consecutive steps, where
 * a step ends with the last event carrying its "iter" (steps >= skip;
 * "evaluate" spans are not part of a step); the phases are the summed
 * spans per step: compute (forward, backward, recompute: cat "compute" or
 * "pipeline"), optimizer (optimizer, optim_step, apply, grad norm), comm
 * (cat "comm" and "tp" spans, push/pull, pipeline receives; among them a
 * pipeline's agreements inside OPTIM_STEP, grad norm allreduce and
 * overflow allreduce, where a stage that finished first waits for the
 * others). step - compute - optimizer - comm is the time in no span. The
 * simulator's summary, its validation against measured runs and the
 * viewer all use it.
 *
 * Pipeline bubble of one rank's stage. The events used are the pipeline
 * instructions: complete ('X') events with cat "pipeline" and an "iter" arg
 * (docs/trace-format.md), of one pid. For each step t (the "iter" arg)
 * that has such events:
 *
 *   window(t) = end of the stage's last instruction of step t
 *               - start of its first instruction of step t
 *               (every instruction counts: receives, sends, stash, drop)
 *   busy(t)   = the summed durations of its "forward", "backward" and
 *               "optim_step" events of step t (a split backward's
 *               "backward_b" and "backward_w" count as "backward")
 *   bubble(t) = 1 - busy(t) / window(t)      (0 when window(t) is 0)
 *
 * and mean = the mean of bubble(t) over the steps t >= skip (the first step
 * is a warm-up: allocation, first touches, ranks starting apart). The
 * forward/backward-only share, 1 - (forward + backward) / window, is given
 * too (bubble_fb): it does not count the optimizer step as work. With
 * p > 1, gpipe/1f1b allreduce the gradient norm over the pipeline inside
 * OPTIM_STEP, where a stage that finishes first waits; the optim_step span
 * starts after that allreduce (the wait is its own "grad norm allreduce"
 * span, cat "comm"), so `bubble` counts the wait as idle. In traces written
 * before issue 21 optim_step held the wait, and `bubble` counted it as busy.
 *
 * With equal per-stage costs and no communication time, gpipe and 1f1b give
 * (p-1)/(m+p-1) on every stage when the window spans the whole step
 * (dt_schedule_bubble_formula). Under pipedream the instructions of
 * consecutive steps interleave (forwards of step t+1 run inside step t's
 * window and are not counted in busy(t)), so its per-step bubble is an
 * upper bound on the idle share, not the idle share.
 *
 * A stage runs one instruction at a time, so busy(t) <= window(t); a trace
 * where events of one step overlap can give a negative bubble, which is
 * reported as it is. */
#ifndef DT_TRACE_STATS_H
#define DT_TRACE_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"
#include "dt_trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phases of one rank's step, in ns per step (means over steps >= skip). */
typedef struct dt_trace_phase_times {
    double step_ns;    /* step period */
    double compute_ns; /* forward + backward (+ recompute) spans */
    double optim_ns;   /* optimizer / optim_step / apply / grad norm spans */
    double comm_ns;    /* comm-lane spans (allreduce steps, push/pull, tp allreduces, pipeline waits) */
    int steps;         /* steps in the means */
} dt_trace_phase_times;

/* The step and phase times of pid from events ev[0..n-1] (any order),
 * leaving out the steps before skip (warm-up). DT_ERR_INVALID when pid has
 * no events with an iteration, or fewer than skip + 1 steps. Its memory does
 * not depend on the iteration numbers (they come from a file). */
DT_API dt_status dt_trace_phase_times_events(const dt_trace_event *ev, size_t n, int pid, int skip,
                                             dt_trace_phase_times *out);

/* One step of one stage. */
typedef struct dt_bubble_step {
    int64_t iter;     /* the step (the events' "iter" arg) */
    int64_t start_ns; /* start of its first pipeline instruction */
    int64_t end_ns;   /* end of its last one */
    int64_t busy_ns;  /* forward + backward + optim_step */
    int64_t fb_ns;    /* forward + backward */
    int n_events;     /* pipeline instructions of the step */
    int n_forward, n_backward, n_optim;
    double bubble;    /* 1 - busy / window */
    double bubble_fb; /* 1 - fb / window */
} dt_bubble_step;

typedef struct dt_bubble_stats {
    int pid;               /* the rank whose events were used */
    int stage;             /* the events' "stage" extra; -1 when they carry none */
    int skip;              /* steps with iter < skip are left out of the means */
    int n_steps;           /* steps with pipeline events */
    dt_bubble_step *steps; /* (n_steps) in ascending iter; free with dt_bubble_stats_free */
    int n_mean;            /* steps in the means (iter >= skip) */
    double mean;           /* mean of bubble over them (NAN when n_mean is 0) */
    double mean_fb;        /* mean of bubble_fb over them (NAN when n_mean is 0) */
    /* Over the steps in the means: compute per micro-batch on this stage
     * (how balanced the stages are), and the optimizer steps. */
    int64_t n_forward, n_backward, n_optim;
    int64_t forward_ns, backward_ns, optim_ns;
    double mean_window_ns; /* mean window(t) (NAN when n_mean is 0) */
    /* Over the whole run from step skip on: 1 - (forward + backward of
     * steps >= skip) / (end of the last of their instructions - start of
     * the first). The stage's true idle share when steps interleave
     * (pipedream: filled once, drained once, no flush between steps); for
     * gpipe/1f1b about mean_fb, plus the gaps between steps. NAN when
     * n_mean is 0. */
    double run_fb;
    double run; /* the same with optim_step counted as work (1 - busy / the whole window) */
} dt_bubble_stats;

/* The bubble of pid's stage from events ev[0..n-1] (any order). pid < 0:
 * the only pid that has pipeline events (an error if there are several).
 * skip >= 0. DT_ERR_INVALID when no pipeline events match or their "stage"
 * extras disagree; DT_ERR_NOMEM. On success *out owns its steps array. */
DT_API dt_status dt_bubble_stats_events(const dt_trace_event *ev, size_t n, int pid, int skip, dt_bubble_stats *out);
/* The same over a trace read with dt_trace_read (one rank's file: pid -1). */
DT_API dt_status dt_bubble_stats_trace(const dt_trace *t, int pid, int skip, dt_bubble_stats *out);
/* Frees out->steps and clears *out; NULL and a cleared struct are fine. */
DT_API void dt_bubble_stats_free(dt_bubble_stats *out);

/* The flow events of a trace (docs/trace-format.md "Flow events"), as a
 * merged file should have them: each id once as a start ('s') and once as
 * an end ('f') on another pid, the end no earlier than the start less the
 * two ranks' clock alignment errors (otherData.merge.ranks[].error_ns; 0
 * for a file on one clock, such as dtsim's; unknown errors are not judged). */
typedef struct dt_trace_flow_stats {
    size_t starts, ends; /* 's' and 'f' events */
    size_t pairs;        /* ids with exactly one start and one end, on two pids */
    size_t unpaired;     /* ids with a lone start or end, several of either, or both ends on one pid */
    size_t early;        /* pairs whose end is before their start by more than the tolerance */
    size_t judged;       /* pairs whose tolerance is known */
    int64_t min_lag_ns;  /* smallest end - start over the pairs (0 when none) */
    int64_t max_tol_ns;  /* largest tolerance used: the two ranks' errors added */
} dt_trace_flow_stats;
DT_API dt_status dt_trace_flow_stats_trace(const dt_trace *t, dt_trace_flow_stats *out);

#ifdef __cplusplus
}
#endif
#endif
