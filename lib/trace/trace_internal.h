/* trace_internal.h: what the files of lib/trace share. Never installed.
 * The trace statistics (trace_stats.c defines them; trace_breakdown.c
 * uses them), and the reader's hand-over (trace_read.c) of the merged
 * file's header sections of otherData to trace_merge.c, which owns their
 * keys.
 *
 * A rank's training steps are the events of its pid that carry an "iter"
 * and do not start inside one of its "evaluate" spans (a validation pass
 * is not part of a step; under tensor parallelism its allreduces carry the
 * iteration after the last step). The range of steps skip..last is from
 * the end of step skip-1 (the latest end of its events; 0 when skip is 0)
 * to the end of the last step, so consecutive steps tile it. */
#ifndef DT_TRACE_INTERNAL_H
#define DT_TRACE_INTERNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"
#include "dt_trace.h"

/* Evaluation spans of one rank (the first 64). */
typedef struct dt__evals {
    int64_t t0[64], t1[64];
    int n;
} dt__evals;

void dt__find_evals(const dt_trace_event *ev, size_t n, int pid, dt__evals *out);
/* An event of pid's training steps: it has an iteration and is not part of an evaluation. */
int dt__in_step(const dt_trace_event *e, int pid, const dt__evals *evals);

/* The range of pid's steps skip..last: [*start, *end), *steps = last - skip + 1,
 * *last the last step's iter. DT_ERR_INVALID when pid has no events with an
 * iteration or fewer than skip + 1 steps; DT_ERR_FORMAT when the last step
 * ends before step skip-1 (steps out of time order: the step time would be
 * negative). Its memory does not depend on the iteration numbers (they come
 * from a file). */
dt_status dt__trace_step_range(const dt_trace_event *ev, size_t n, int pid, int skip, const dt__evals *evals,
                               int64_t *start, int64_t *end, int64_t *steps, int64_t *last);

/* otherData.clock and otherData.merge of the file path, when present, into
 * t->clock and t->merge, each field range-checked (ranks and pids up to
 * max_pid, the largest pid the file's config allows); DT_ERR_FORMAT naming
 * the key otherwise (trace_merge.c). */
dt_status dt__trace_read_alignment(const char *path, json_t *other, int64_t max_pid, dt_trace *t);

#endif
