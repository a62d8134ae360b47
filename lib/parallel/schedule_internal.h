/* schedule_internal.h: what the schedule generator's two files share
 * (lib/parallel/schedule.c, schedule_order.c; nothing else includes it).
 *
 * The generator first writes each device's compute order: a list of items
 * F, B (or B and W apart), OPT, each with its chunk, micro-batch, step,
 * weight version and phase; schedule.c then expands the items into the
 * instructions with their receives, sends and dependencies.
 *
 * Invariants of an order: on a device, each (chunk, mb) is forwarded once,
 * then backwarded once (BACKWARD, or BACKWARD_B and later BACKWARD_W); per
 * chunk the forwards, the backwards (B) and the weight gradients (W) each
 * come in ascending mb order, which is what lets sends and receives of one
 * link match in order. */
#ifndef DT_SCHEDULE_INTERNAL_H
#define DT_SCHEDULE_INTERNAL_H

#include "dt_schedule.h"

/* One item of a compute order. op: FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W
 * or OPTIM_STEP; mb -1 and chunk 0 for OPTIM_STEP. */
typedef struct dt__sched_item {
    dt_sched_op op;
    int chunk, mb, step, version;
    dt_sched_phase phase;
} dt__sched_item;

/* Compute orders of one step (step t, micro-batches t*m .. t*m+m-1, all
 * with version t) on device r, ending with the OPT; items are written at
 * `it` and their number returned. At most 3*v*m + 1 items.
 *
 * interleaved-1f1b: v >= 2 chunks, m a multiple of p (the caller checks).
 * zb-h1: one chunk. zb-v: two chunks, any m >= 1. */
int dt__sched_order_interleaved(int p, int v, int m, int r, int t, dt__sched_item *it);
int dt__sched_order_zbh1(int p, int m, int r, int t, dt__sched_item *it);
int dt__sched_order_zbv(int p, int m, int r, int t, dt__sched_item *it);

#endif
