/* engine.c: the discrete-event engine (see dts_engine.h): a binary min-heap
 * of events keyed by (time, seq).
 *
 * Invariants: heap[0] is the smallest (time, seq); seq is strictly
 * increasing over the engine's life, so no two events compare equal and
 * the order of a run does not depend on the heap's layout. */
#include "dts_engine.h"

#include <assert.h>
#include <stdlib.h>

typedef struct dts__event {
    int64_t time;
    uint64_t seq;
    dts_fn fn;
    void *ctx;
    int64_t a, b;
} dts__event;

struct dts_engine {
    dts__event *heap;
    size_t n, cap;
    int64_t now;
    uint64_t seq;
    uint64_t ran;
    dt_status status;
};

dt_status dts_engine_create(dts_engine **out)
{
    dts_engine *e = calloc(1, sizeof *e);
    if (!e) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for the event engine");
    e->cap = 1024;
    e->heap = malloc(e->cap * sizeof *e->heap);
    if (!e->heap) {
        free(e);
        return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for the event queue");
    }
    *out = e;
    return DT_OK;
}

void dts_engine_free(dts_engine *e)
{
    if (!e) return;
    free(e->heap);
    free(e);
}

static inline int dts__before(const dts__event *x, const dts__event *y)
{
    return x->time < y->time || (x->time == y->time && x->seq < y->seq);
}

/* Events past DTS_HORIZON_NS (dts_engine.h) are refused: time + a few
 * durations the model computes (saturated at DTS_NS_BEYOND) then stays far
 * from int64 overflow. */
#define DTS__HORIZON_NS DTS_HORIZON_NS

static dt_status dts__beyond_horizon(void)
{
    return DT_FAIL(DT_ERR_INVALID,
                   "dtsim: the simulated run lasts more than %.1f years (the engine's horizon, 2^60 ns): the "
                   "scenario is too large (fewer --train-iters, or a smaller model or batch)",
                   (double)DTS__HORIZON_NS / 1e9 / 86400 / 365.25);
}

dt_status dts_engine_at(dts_engine *e, int64_t at, dts_fn fn, void *ctx, int64_t a, int64_t b)
{
    if (at > DTS__HORIZON_NS) return dts__beyond_horizon();
    assert(at >= e->now && "dtsim: event scheduled in the past");
    if (at < e->now)
        return DT_FAIL(DT_ERR_INVALID, "dtsim: event scheduled at %lld ns, before the current time %lld ns",
                       (long long)at, (long long)e->now);
    if (e->n == e->cap) {
        size_t cap = e->cap * 2;
        dts__event *h = realloc(e->heap, cap * sizeof *h);
        if (!h) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for %zu queued events", cap);
        e->heap = h;
        e->cap = cap;
    }
    dts__event ev = {at, e->seq++, fn, ctx, a, b};
    size_t i = e->n++;
    while (i > 0) { /* sift up */
        size_t parent = (i - 1) / 2;
        if (!dts__before(&ev, &e->heap[parent])) break;
        e->heap[i] = e->heap[parent];
        i = parent;
    }
    e->heap[i] = ev;
    return DT_OK;
}

dt_status dts_engine_after(dts_engine *e, int64_t delay, dts_fn fn, void *ctx, int64_t a, int64_t b)
{
    if (delay < 0) return DT_FAIL(DT_ERR_INVALID, "dtsim: negative delay %lld ns", (long long)delay);
    if (delay > DTS__HORIZON_NS - e->now) return dts__beyond_horizon();
    return dts_engine_at(e, e->now + delay, fn, ctx, a, b);
}

static dts__event dts__pop(dts_engine *e)
{
    dts__event top = e->heap[0];
    dts__event last = e->heap[--e->n];
    size_t i = 0, n = e->n;
    for (;;) { /* sift the last event down from the root */
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && dts__before(&e->heap[c + 1], &e->heap[c])) c++;
        if (!dts__before(&e->heap[c], &last)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n) e->heap[i] = last;
    return top;
}

dt_status dts_engine_run(dts_engine *e)
{
    while (e->n && e->status == DT_OK) {
        dts__event ev = dts__pop(e);
        e->now = ev.time;
        e->ran++;
        ev.fn(e, ev.ctx, ev.a, ev.b);
    }
    return e->status;
}

dt_status dts_engine_fail(dts_engine *e, dt_status st)
{
    if (e->status == DT_OK) e->status = st;
    return st;
}

dt_status dts_engine_status(const dts_engine *e) { return e->status; }
int64_t dts_engine_now(const dts_engine *e) { return e->now; }
uint64_t dts_engine_events(const dts_engine *e) { return e->ran; }
size_t dts_engine_pending(const dts_engine *e) { return e->n; }
