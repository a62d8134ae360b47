/* zero_queue.h: the collectives of ZeRO-2/3 in issue order
 * (lib/parallel/zero_queue.c), never installed; lib/parallel/zero_gpt.c
 * issues its reduce-scatters and all-gathers here.
 *
 * Without a thread a collective runs when it is issued (wait does
 * nothing). With one (stage 3's prefetch), a communication thread runs
 * them one at a time in the order they were issued, so the main thread
 * can compute while a gather it issued ahead is on the wire, and waits
 * only when it needs the result.
 *
 * Invariants: every rank issues the same collectives in the same order
 * (so the thread's order agrees across ranks); one thread at most uses the
 * communicator at a time (the queue's, while it has work); a buffer is not
 * touched by the caller between its issue and its wait; the trace hook of
 * the collectives is called with the queue's lock held, as is the hook the
 * caller runs through dt__zq_locked. */
#ifndef DT_ZERO_QUEUE_H
#define DT_ZERO_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "dt_comm.h"

typedef struct dt__zq dt__zq;

typedef enum dt__zq_kind { DT__ZQ_REDUCE_SCATTER = 0, DT__ZQ_ALL_GATHER } dt__zq_kind;

/* dp and coll are kept (coll copied; NULL: defaults); threaded: a
 * communication thread (else every collective runs at its issue). */
dt_status dt__zq_create(dt_comm *dp, const dt_collective_opts *coll, int threaded, dt__zq **out);
/* Waits for what is in flight, stops the thread. */
void dt__zq_free(dt__zq *q);
void dt__zq_set_coll(dt__zq *q, const dt_collective_opts *coll);
/* Issue a collective of buf(n) over dp; *seq identifies it for the wait.
 * Without a thread it has run (and failed, if it did) on return. */
dt_status dt__zq_issue(dt__zq *q, dt__zq_kind kind, float *buf, size_t n, int64_t *seq);
/* Return once collective seq (and all issued before it) is done, with its
 * status (the thread's message restated on this thread). */
dt_status dt__zq_wait(dt__zq *q, int64_t seq);
/* Everything issued is done. */
dt_status dt__zq_drain(dt__zq *q);
/* Run fn(ctx) with the hook lock held (the layer trace hook beside the
 * collectives'). */
void dt__zq_locked(dt__zq *q, void (*fn)(void *ctx), void *ctx);
int dt__zq_threaded(const dt__zq *q);

#endif
