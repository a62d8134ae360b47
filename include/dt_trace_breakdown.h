/* dt_trace_breakdown.h: where a rank's step time goes, in the manner of
 * Holistic Trace Analysis' temporal breakdown and communication/compute
 * overlap (lib/trace/trace_breakdown.c). Pure computation over events in
 * memory, so a real run's trace (dt_trace_read) and the simulator's give
 * their breakdowns through the same code; docs/breakdown.md has the
 * definitions with examples.
 *
 * The range: the steps skip..last of one rank, from the end of step skip-1
 * to the end of the last step (the events with an "iter" outside its
 * "evaluate" spans; dt_trace_phase_times_events' step period is this
 * range over its steps). Every instant of the range falls in exactly one
 * category, by the spans of that rank covering it, in this order:
 *
 *   compute     a forward, backward, backward_b, backward_w or recompute
 *               span (cat "compute", "pipeline" or "stage"; nested spans
 *               count once)
 *   optimizer   optimizer, optim_step, apply, grad norm, stash, drop
 *   comm        a communication span: cat "comm" or "tp", push/pull (the
 *   exposed     pipeline's own sends and receives are not: they are waits
 *               for the other stage, below)
 *   waiting     inside a pipeline stage's step window (its first to its
 *               last instruction of a step, as dt_bubble_stats_events
 *               defines it) with none of the above: receives waiting for a
 *               neighbour, sends, the gaps between instructions
 *   idle        the rest: outside every window and every span (data
 *               loading, the loss, the host between operations)
 *
 * so compute + optimizer + comm exposed + waiting + idle = the range,
 * exactly, in integer ns. Beside the partition, comm overlapped is the
 * time a communication span runs while compute or the optimizer does
 * (gradient buckets allreduced during the backward; ZeRO-1's all-gather
 * inside optim_step), so comm overlapped + comm exposed = the union of the
 * communication spans.
 *
 * The pipeline bubble of the same rank (dt_bubble_stats_events, the
 * figure `dtbench bubbles` prints) is given too. Its idle time per step,
 * window - (forward + backward + optim_step), is this breakdown's waiting
 * in the window plus the communication and optimizer time in the window
 * that is not optim_step (the stages' grad norm allreduce, where a stage
 * that finished first waits, and the grad norm). */
#ifndef DT_TRACE_BREAKDOWN_H
#define DT_TRACE_BREAKDOWN_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"
#include "dt_trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The categories of the partition, in their order of precedence. */
typedef enum dt_breakdown_cat {
    DT_BREAKDOWN_COMPUTE = 0,
    DT_BREAKDOWN_OPTIM,
    DT_BREAKDOWN_COMM_EXPOSED,
    DT_BREAKDOWN_WAITING,
    DT_BREAKDOWN_IDLE,
    DT_BREAKDOWN_N_CATS
} dt_breakdown_cat;

/* "compute", "optimizer", "comm exposed", "waiting", "idle" ("?" out of range). */
DT_API const char *dt_breakdown_cat_name(dt_breakdown_cat c);

typedef struct dt_breakdown {
    int pid;            /* the rank */
    int64_t first_iter; /* the steps counted: first_iter (= skip) .. last_iter */
    int64_t last_iter;
    int64_t steps;                       /* last_iter - first_iter + 1 */
    int64_t start_ns;                    /* the range: end of step skip-1 (0 when skip is 0) */
    int64_t end_ns;                      /* end of the last step */
    int64_t cat_ns[DT_BREAKDOWN_N_CATS]; /* the partition over the range (sums to end_ns - start_ns) */
    int64_t comm_overlapped_ns;          /* communication concurrent with compute or the optimizer */
    double step_ns;                      /* (end_ns - start_ns) / steps */
    /* the pipeline bubble (dt_bubble_stats_events), when the rank has pipeline instructions */
    int pipeline;     /* 1: it has; 0: the two below are NAN */
    double bubble;    /* mean over steps >= skip of 1 - busy / window (`dtbench bubbles`' bubble) */
    double bubble_ns; /* mean over the same steps of window - busy */
} dt_breakdown;

/* Category c per step, in ns (cat_ns[c] / steps). */
DT_API double dt_breakdown_per_step(const dt_breakdown *b, dt_breakdown_cat c);

/* The breakdown of pid from events ev[0..n-1] (any order, any pids),
 * leaving out the steps before skip (warm-up). DT_ERR_INVALID when pid has
 * no events with an iteration or fewer than skip + 1 steps, or its
 * pipeline instructions name two stages; DT_ERR_NOMEM. */
DT_API dt_status dt_breakdown_events(const dt_trace_event *ev, size_t n, int pid, int skip, dt_breakdown *out);

/* The breakdown of every pid that has events with an iteration, in
 * ascending pid: *out (free() it) holds *n_out of them. Each pid's events
 * are gathered once, so the cost does not grow with pids x events.
 * DT_ERR_INVALID when no pid has such events, or one of them fails as
 * above (the message names it). */
DT_API dt_status dt_breakdown_all(const dt_trace_event *ev, size_t n, int skip, dt_breakdown **out, int *n_out);

#ifdef __cplusplus
}
#endif
#endif
