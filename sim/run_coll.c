/* run_coll.c: what joins units (see run_internal.h). A collective
 * instance (dts__cinst) runs one dts_coll among its member units, records
 * each member's steps as "comm" events (and their time as data-parallel
 * communication) and, as each member is done, resumes it through the
 * instance's resume function. A sync (dts__sync) is an analytic allreduce
 * of a few floats (the world's loss, the pipeline's gradient norm, the
 * data-parallel loss): once every member has arrived, each is done `cost`
 * ns after the last arrival.
 *
 * Invariants: an instance takes no more members once all have arrived and
 * is freed at its last member's done, after which nothing refers to it; a
 * sync is ready for its next round as soon as it fires. */
#include "run_internal.h"

#include <stdlib.h>

static void dts__cinst_done(dts_engine *e, void *ctx, int member);
static void dts__coll_step(void *ctx, int member, const char *phase, int step, int peer, int64_t bytes, int64_t t0,
                           int64_t t1);

dts__cinst *dts__cinst_new(dts__sim *s, dts_coll_kind kind, dts__unit **members, int n, int64_t bytes, int what,
                           dts__resume_fn resume)
{
    dts__cinst *ci = calloc(1, sizeof *ci);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    if (ci) ci->members = malloc((size_t)n * sizeof *ci->members);
    if (!ci || !ranks || !ci->members) {
        if (ci) free(ci->members);
        free(ci);
        free(ranks);
        dts__fail(s, DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for a collective"));
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        ci->members[i] = members[i];
        ranks[i] = members[i]->rank;
    }
    ci->sim = s;
    ci->n = n;
    ci->kind = what;
    ci->resume = resume;
    dt_status st = dts_coll_create(s->e, &s->net, kind, n, ranks, bytes, s->sc->chunk_bytes, dts__cinst_done,
                                   dts__coll_step, ci, &ci->c);
    free(ranks);
    if (st != DT_OK) {
        free(ci->members);
        free(ci);
        dts__fail(s, st);
        return NULL;
    }
    return ci;
}

void dts__cinst_free(dts__cinst *ci)
{
    if (!ci) return;
    dts_coll_free(ci->c);
    free(ci->members);
    free(ci);
}

dts_coll_kind dts__ar_kind(const dts_scenario *sc)
{
    return sc->exchange == DTS_EX_TREE    ? DTS_COLL_TREE_ALLREDUCE
           : sc->exchange == DTS_EX_NAIVE ? DTS_COLL_NAIVE_ALLREDUCE
                                          : DTS_COLL_RING_ALLREDUCE;
}

static void dts__coll_step(void *ctx, int member, const char *phase, int step, int peer, int64_t bytes, int64_t t0,
                           int64_t t1)
{
    dts__cinst *ci = ctx;
    dts__unit *u = ci->members[member];
    u->ns_dp += t1 - t0;
    if (!u->record) return;
    dt_trace_event ev;
    dt_trace_event_init(&ev, DT_TRACE_COMPLETE, phase, "comm", u->rank, DT_LANE_COMM, t0, t1 - t0);
    ev.iter = u->step;
    ev.bytes = bytes;
    dt_trace_event_add_arg(&ev, "step", step);
    dt_trace_event_add_arg(&ev, "peer", peer);
    dts__rec(ci->sim, 1, &ev);
}

static void dts__cinst_done(dts_engine *e, void *ctx, int member)
{
    dts__cinst *ci = ctx;
    dts__sim *s = ci->sim;
    dts__unit *u = ci->members[member];
    (void)e;
    const int kind = ci->kind;
    const dts__resume_fn resume = ci->resume;
    /* the last member's done: every member arrived, so nothing refers to the instance */
    if (dts_coll_done_count(ci->c) == ci->n) dts__cinst_free(ci);
    resume(s, u, kind);
}

/* ---- syncs: analytic allreduces of a few floats --------------------------- */

static void dts__sync_done(dts_engine *e, void *ctx, int64_t a, int64_t b);

void dts__sync_arrive(dts__sim *s, dts__sync *y, dts__unit *u)
{
    (void)u;
    const int64_t now = dts_engine_now(s->e);
    if (now > y->last) y->last = now;
    if (++y->arrived < y->n) return;
    y->arrived = 0;
    const int64_t t = y->last + y->cost;
    y->last = 0;
    for (int i = 0; i < y->n; i++) dts__at(s, t, dts__sync_done, y, i, 0);
}

static void dts__sync_done(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)e;
    (void)b;
    dts__sync *y = ctx;
    dts__unit *u = y->members[a];
    y->done(u->sim, u);
}
