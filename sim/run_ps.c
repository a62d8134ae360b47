/* run_ps.c: the parameter server (lib/parallel/ps.c) and its workers' push/pull
 * (see run_internal.h). Workers compute (run_dp.c), then push each server
 * its shard's gradient and wait for every server's reply; ps-sync servers
 * wait for every worker's push of the step, sum, apply once and reply to
 * all; ps-async servers apply each push on arrival (in arrival order) and
 * reply to its worker. Staleness = updates the server applied between that
 * worker's previous pull and this push (largest over the servers), as the
 * real servers count it.
 *
 * A server waits for pushes by polling (lib/parallel/ps.c dt__ps_idle_waitany), so
 * it notices a header at its first poll after the arrival; a push's
 * gradient moves only once the server has posted its receive, after
 * noticing the push's header. Every message starts with a header of
 * DT_PS_MSG_HEADER_BYTES (lib/parallel/ps.h).
 *
 * Invariants: a server handles one push (ps-async) or one step's pushes
 * (ps-sync) at a time; a worker's step ends once every server replied. */
#include "run_internal.h"

#include "dt_rules.h"

static void dts__ps_hdr(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__ps_wake(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__ps_apply(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__ps_applied(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__ps_reply(dts_engine *e, void *ctx, int64_t a, int64_t b);

/* lib/parallel/ps.c dt__ps_idle_waitany: test at once, then sleep 20 us, 40 us, ...
 * 500 us, 500 us, ... between tests. When a message arriving at `arrival`
 * is noticed by a wait that started at t0. */
static int64_t dts__poll_notice(const dts__sim *s, int64_t t0, int64_t arrival)
{
    int64_t t = t0, sleep = DT_PS_POLL_FIRST_NS;
    const int64_t over = s->sc->hw.sleep_overshoot_ns;
    while (arrival > t) {
        t += sleep + over;
        if (sleep < DT_PS_POLL_MAX_NS) sleep = sleep * 2 < DT_PS_POLL_MAX_NS ? sleep * 2 : DT_PS_POLL_MAX_NS;
    }
    return t;
}

void dts__ps_push(dts__sim *s, dts__unit *u)
{
    const int64_t now = dts_engine_now(s->e);
    u->exch_t0 = now;
    u->replies = 0;
    u->max_stale = 0;
    for (int k = 0; k < s->K; k++) {
        const int64_t at = dts_net_send(&s->net, u->rank, s->srv[k].rank, DT_PS_MSG_HEADER_BYTES, now, NULL);
        dts__at(s, at, dts__ps_hdr, &s->srv[k], u->idx, 0);
    }
}

/* The server is free at `now`: notice what has arrived, or go back to polling. */
static void dts__ps_idle(dts__sim *s, dts__server *v)
{
    const int64_t now = dts_engine_now(s->e);
    int64_t first = -1;
    for (int w = 0; w < s->W; w++)
        if (v->hdr_at[w] >= 0 && (s->sc->exchange != DTS_EX_PS_SYNC || !v->noticed[w]) &&
            (first < 0 || v->hdr_at[w] < first))
            first = v->hdr_at[w];
    v->idle_since = now;
    if (first < 0) {
        v->state = DTS__SV_IDLE;
        return;
    }
    v->state = DTS__SV_WAKE;
    dts__at(s, dts__poll_notice(s, now, first), dts__ps_wake, v, 0, 0);
}

/* a push header from worker a arrives */
static void dts__ps_hdr(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)b;
    dts__server *v = ctx;
    dts__sim *s = v->sim;
    v->hdr_at[a] = dts_engine_now(e);
    if (v->state != DTS__SV_IDLE) return;
    v->state = DTS__SV_WAKE;
    dts__at(s, dts__poll_notice(s, v->idle_since, dts_engine_now(e)), dts__ps_wake, v, 0, 0);
}

/* the server's poll finds a header (the lowest worker index among those arrived, as its test loop) */
static void dts__ps_wake(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)a;
    (void)b;
    dts__server *v = ctx;
    dts__sim *s = v->sim;
    const int64_t now = dts_engine_now(e);
    const int sync = s->sc->exchange == DTS_EX_PS_SYNC;
    int w = -1;
    for (int i = 0; i < s->W && w < 0; i++)
        if (v->hdr_at[i] >= 0 && v->hdr_at[i] <= now && (!sync || !v->noticed[i])) w = i;
    if (w < 0) return dts__fail(s, DT_FAIL(DT_ERR_INVALID, "dtsim: parameter server %d woke with nothing", v->idx));
    const int64_t bytes = v->params * 4;
    if (!sync) { /* receive the gradient (a blocking wait: noticed on arrival), then apply */
        v->state = DTS__SV_BUSY;
        v->hdr_at[w] = -1;
        const int64_t at = dts_net_send(&s->net, s->u[w].rank, v->rank, bytes, now, NULL);
        dts__at(s, at, dts__ps_apply, v, w, 0);
        return;
    }
    v->noticed[w] = 1;
    if (++v->n_noticed < s->W) { /* the next wait call: a new ladder from now */
        dts__ps_idle(s, v);
        return;
    }
    /* every header in: post the gradients' receives, wait for them all (polling again) */
    v->state = DTS__SV_BUSY;
    int64_t t = now;
    for (int i = 0; i < s->W; i++) {
        const int64_t at = dts_net_send(&s->net, s->u[i].rank, v->rank, bytes, now, NULL);
        t = dts__poll_notice(s, t, at);
    }
    dts__at(s, t, dts__ps_apply, v, -1, 0);
}

/* a: the worker whose gradient is applied (-1: ps-sync, the sum of every worker's) */
static void dts__ps_apply(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)b;
    dts__server *v = ctx;
    dts__sim *s = v->sim;
    const dts_scenario *sc = s->sc;
    const int64_t now = dts_engine_now(e);
    double dur = (double)v->params * sc->cost.optim_ns_per_param;
    if (a < 0) /* copy the first gradient, add the others (read 2, write 1 each) */
        dur += (double)(3 * s->W - 1) * (double)v->params * 4.0 / (sc->hw.mem_bytes_per_s * 1e-9);
    dts__at(s, now + dts__ns(dur), dts__ps_applied, v, a, now);
}

static void dts__ps_send_reply(dts__sim *s, dts__server *v, int w, int64_t staleness, int64_t *done)
{
    dts__unit *u = &s->u[w];
    if (staleness > u->max_stale) u->max_stale = (int)staleness;
    const int64_t now = dts_engine_now(s->e);
    int64_t sd = 0;
    dts_net_send(&s->net, v->rank, u->rank, DT_PS_MSG_HEADER_BYTES, now, NULL);
    const int64_t at = dts_net_send(&s->net, v->rank, u->rank, v->params * 4, now, &sd);
    if (sd > *done) *done = sd;
    dts__at(s, at, dts__ps_reply, u, v->idx, v->version);
}

static void dts__ps_free(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)e;
    (void)a;
    (void)b;
    dts__server *v = ctx;
    dts__ps_idle(v->sim, v);
}

/* the update is done (b: when it started): reply, then wait for the sends and poll again */
static void dts__ps_applied(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    dts__server *v = ctx;
    dts__sim *s = v->sim;
    const int64_t now = dts_engine_now(e);
    int64_t stale = 0;
    if (a >= 0) stale = v->version - s->u[a].pulled[v->idx];
    v->version++;
    if (v->record) {
        dt_trace_event ev;
        dt_trace_event_init(&ev, DT_TRACE_COMPLETE, "apply", "optim", v->rank, DT_LANE_OPTIM, b, now - b);
        ev.iter = v->version - 1;
        dt_trace_event_add_arg(&ev, "worker", (double)a);
        dt_trace_event_add_arg(&ev, "staleness", (double)stale);
        dt_trace_event_add_arg(&ev, "version", (double)v->version);
        dts__rec(s, 1, &ev);
    }
    int64_t done = now;
    if (a >= 0) {
        dts__ps_send_reply(s, v, (int)a, stale, &done);
    } else {
        for (int w = 0; w < s->W; w++) {
            dts__ps_send_reply(s, v, w, 0, &done);
            v->hdr_at[w] = -1;
            v->noticed[w] = 0;
        }
        v->n_noticed = 0;
    }
    dts__at(s, done, dts__ps_free, v, 0, 0);
}

static void dts__ps_reply(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    dts__unit *u = ctx;
    dts__sim *s = u->sim;
    const int64_t now = dts_engine_now(e);
    u->pulled[a] = b;
    if (++u->replies < s->K) return;
    u->ns_ps += now - u->exch_t0;
    s->pushes++;
    s->stale_sum += u->max_stale;
    if (u->max_stale > s->stale_max) s->stale_max = u->max_stale;
    s->stale_hist[u->max_stale < 15 ? u->max_stale : 15]++;
    if (u->record) {
        int64_t version = 0;
        for (int k = 0; k < s->K; k++)
            if (s->srv[k].version > version) version = s->srv[k].version;
        dt_trace_event ev;
        dt_trace_event_init(&ev, DT_TRACE_COMPLETE, "push/pull", "comm", u->rank, DT_LANE_COMM, u->exch_t0,
                            now - u->exch_t0);
        ev.iter = u->step;
        ev.bytes = s->params[0] * 4;
        dt_trace_event_add_arg(&ev, "staleness", u->max_stale);
        dt_trace_event_add_arg(&ev, "version", (double)version);
        dts__rec(s, 1, &ev);
        if (s->sc->exchange == DTS_EX_PS_ASYNC) {
            dt_trace_event c;
            dt_trace_event_init(&c, DT_TRACE_COUNTER, "staleness", "counter", u->rank, DT_LANE_COMPUTE, now, 0);
            c.value = u->max_stale;
            dts__rec(s, 1, &c);
        }
    }
    dts__step_end(s, u);
}
