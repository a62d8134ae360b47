/* dts_engine.h: the simulator's discrete-event engine (sim/engine.c).
 *
 * Time is integer nanoseconds. Events sit in a binary heap ordered by
 * (time, sequence number): the sequence number is the order in which the
 * events were scheduled, so two events at the same time run in the order
 * they were scheduled and a run is deterministic. There is no global state:
 * everything lives in the dts_engine passed to every call.
 *
 * An event is a callback with a context pointer and two integer arguments
 * (no allocation per event). A callback may schedule further events at the
 * current time or later; scheduling in the past is a bug in the model and
 * is refused (DT_ERR_INVALID, and an assert in debug builds). A callback
 * that fails calls dts_engine_fail: the run stops after that callback and
 * dts_engine_run returns the status.
 *
 * Invariants: now never decreases; events run in (time, seq) order; the
 * engine counts every event it runs (dts_engine_events). */
#ifndef DTS_ENGINE_H
#define DTS_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"

/* The latest time an event may have (2^60 ns, 36.5 years): a run that goes
 * past it is refused with one message (dts_engine_at). Far below INT64_MAX,
 * so that now + a few durations cannot overflow. */
#define DTS_HORIZON_NS ((int64_t)1 << 60)
/* A duration beyond the horizon: what an absurd computed duration saturates
 * to, so that scheduling it is refused instead of wrapping. */
#define DTS_NS_BEYOND (DTS_HORIZON_NS + 1)

/* ns (a computed duration, any double) as int64 nanoseconds: rounded,
 * negative -> 0, NaN or >= the horizon -> DTS_NS_BEYOND. Never overflows
 * (llround of a double past int64 is undefined). */
static inline int64_t dts_ns_sat(double ns)
{
    if (!(ns < (double)DTS_HORIZON_NS)) return DTS_NS_BEYOND; /* NaN too */
    if (!(ns > 0)) return 0;
    return (int64_t)(ns + 0.5);
}
/* a + b for durations in 0..DTS_NS_BEYOND, saturating at DTS_NS_BEYOND. */
static inline int64_t dts_ns_add_sat(int64_t a, int64_t b)
{
    return a >= DTS_NS_BEYOND - b ? DTS_NS_BEYOND : a + b;
}
/* a * k for a duration a in 0..DTS_NS_BEYOND and k >= 0, saturating. */
static inline int64_t dts_ns_mul_sat(int64_t a, int64_t k)
{
    return k > 0 && a > DTS_NS_BEYOND / k ? DTS_NS_BEYOND : a * k;
}

typedef struct dts_engine dts_engine;
typedef void (*dts_fn)(dts_engine *e, void *ctx, int64_t a, int64_t b);

dt_status dts_engine_create(dts_engine **out);
void dts_engine_free(dts_engine *e);

/* Run fn(e, ctx, a, b) at time `at` (>= now). */
dt_status dts_engine_at(dts_engine *e, int64_t at, dts_fn fn, void *ctx, int64_t a, int64_t b);
/* The same, `delay` >= 0 ns from now. */
dt_status dts_engine_after(dts_engine *e, int64_t delay, dts_fn fn, void *ctx, int64_t a, int64_t b);

/* Run events until the queue is empty (or a callback fails). Returns the
 * first failure, or DT_OK. */
dt_status dts_engine_run(dts_engine *e);

/* From a callback: stop the run with this status (the first one wins).
 * Returns st, so `return (void)dts_engine_fail(e, st)` reads well. */
dt_status dts_engine_fail(dts_engine *e, dt_status st);
/* The first failure so far (DT_OK if none). */
dt_status dts_engine_status(const dts_engine *e);

int64_t dts_engine_now(const dts_engine *e);
uint64_t dts_engine_events(const dts_engine *e); /* events run so far */
size_t dts_engine_pending(const dts_engine *e);  /* events still queued */

#endif
