/* run_unit.c: what every unit does whatever the shape (see
 * run_internal.h): scheduling its engine events, recording its trace
 * events and memory counter, the mailboxes of its receives, and running
 * its compute on a core of its own
 * or on its node's shared cores (processor sharing: k jobs on c < k cores
 * each progress at c/k, re-timed whenever a job starts or stops).
 *
 * Invariants: the first failure is the run's status (later ones are
 * dropped); a unit has at most one live job; a job's finish events of an
 * earlier rate are ignored (gen). */
#include "run_internal.h"

#include <stdlib.h>

static int dts__push(dts__evbuf *b, const dt_trace_event *e)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        dt_trace_event *v = realloc(b->v, cap * sizeof *v);
        if (!v) return -1;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = *e;
    return 0;
}

dt_status dts__mbox_init(dts__mbox *b, int cap)
{
    b->cap = cap > 0 ? cap : 1;
    b->t = malloc((size_t)b->cap * sizeof *b->t);
    if (!b->t) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for messages");
    for (int k = 0; k < b->cap; k++) b->t[k] = -1;
    return DT_OK;
}

void dts__mbox_free(dts__mbox *b)
{
    free(b->t);
    b->t = NULL;
    b->cap = 0;
}

dt_status dts__mbox_put(dts__mbox *b, int seq, int first, int64_t t)
{
    if (seq - first >= b->cap) { /* more in flight than slots: double until they fit, moving [first, seq) */
        int cap = b->cap;
        while (seq - first >= cap) cap *= 2;
        int64_t *v = malloc((size_t)cap * sizeof *v);
        if (!v) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for %d messages in flight", seq - first + 1);
        for (int k = 0; k < cap; k++) v[k] = -1;
        for (int q = first; q < seq; q++) v[q % cap] = b->t[q % b->cap];
        free(b->t);
        b->t = v;
        b->cap = cap;
    }
    b->t[seq % b->cap] = t;
    return DT_OK;
}

int64_t dts__mbox_get(const dts__mbox *b, int seq) { return b->t[seq % b->cap]; }

void dts__mbox_take(dts__mbox *b, int seq) { b->t[seq % b->cap] = -1; }

void dts__fail(dts__sim *s, dt_status st)
{
    if (s->st == DT_OK) s->st = st;
    dts_engine_fail(s->e, st);
}

void dts__at(dts__sim *s, int64_t t, dts_fn fn, void *ctx, int64_t a, int64_t b)
{
    dt_status st = dts_engine_at(s->e, t, fn, ctx, a, b);
    if (st != DT_OK) dts__fail(s, st);
}

void dts__rec(dts__sim *s, int record, const dt_trace_event *e)
{
    if (!record) return;
    if (dts__push(&s->ev, e) != 0) dts__fail(s, DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for %zu events", s->ev.n));
}

void dts__span(dts__sim *s, dts__unit *u, const char *name, const char *cat, int lane, int64_t t0, int64_t t1,
               int64_t iter, int mb, int layer, int64_t bytes)
{
    if (!u->record) return;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, name, cat, u->rank, lane, t0, t1 - t0);
    e.iter = iter;
    e.micro_batch = mb;
    e.layer = layer;
    e.bytes = bytes;
    dts__rec(s, 1, &e);
}

void dts__memory(dts__sim *s, dts__unit *u)
{
    const int64_t total = u->mem_static + u->mem_act + u->mem_stash;
    if (total > u->mem_peak) u->mem_peak = total;
    /* without a trace the summary reads only rank 0's counters (and none of them): the others' are left out */
    if (!u->record || (!s->keep_all && u->rank != 0)) return;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COUNTER, "memory", "counter", u->rank, DT_LANE_COMPUTE, dts_engine_now(s->e), 0);
    e.value = (double)total;
    dt_trace_event_add_arg(&e, "static", (double)u->mem_static);
    dt_trace_event_add_arg(&e, "activations", (double)u->mem_act);
    dt_trace_event_add_arg(&e, "stash", (double)u->mem_stash);
    dts__rec(s, 1, &e);
}

/* ---- compute, on a core of its own or on shared cores -------------------- */

static int dts__node_of(const dts__sim *s, const dts__unit *u)
{
    return u->rank / (s->sc->hw.devices_per_node > 0 ? s->sc->hw.devices_per_node : 1);
}

/* Bring the node's jobs' work left up to now at the rate they had. */
static void dts__cpu_advance(dts__sim *s, int node, int64_t now)
{
    const int k = s->cpu_active[node];
    const double rate = dts_hw_compute_rate(&s->sc->hw, k, s->node_ranks[node]);
    const double done = (double)(now - s->cpu_last[node]) * rate;
    for (int i = 0; k > 0 && i < s->n_units; i++)
        if (s->job[i].live && dts__node_of(s, &s->u[i]) == node) s->job[i].left -= done;
    s->cpu_last[node] = now;
}

static void dts__cpu_done(dts_engine *e, void *ctx, int64_t a, int64_t b);

/* The node's computing jobs at their new rate: a new finish event each. */
static void dts__cpu_resched(dts__sim *s, int node, int64_t now)
{
    const double rate = dts_hw_compute_rate(&s->sc->hw, s->cpu_active[node], s->node_ranks[node]);
    for (int i = 0; i < s->n_units; i++) {
        dts__job *j = &s->job[i];
        if (!j->live || dts__node_of(s, &s->u[i]) != node) continue;
        j->gen++;
        const double left = j->left > 0 ? j->left : 0;
        dts__at(s, now + dts_ns_sat(ceil(left / rate)), dts__cpu_done, j, j->gen, 0);
    }
}

static void dts__cpu_done(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)b;
    dts__job *j = ctx;
    if (!j->live || a != j->gen) return; /* a finish time of an earlier rate */
    dts__sim *s = j->u->sim;
    const int node = dts__node_of(s, j->u);
    const int64_t now = dts_engine_now(e);
    dts__cpu_advance(s, node, now);
    j->live = 0;
    s->cpu_active[node] -= s->sc->t;
    dts__cpu_resched(s, node, now);
    j->fn(e, j->u, j->a, j->b);
}

void dts__compute(dts__sim *s, dts__unit *u, int64_t dur, dts_fn fn, int64_t a, int64_t b)
{
    const int64_t now = dts_engine_now(s->e);
    if (s->sc->hw.cores_per_node <= 0) {
        dts__at(s, now + dur, fn, u, a, b);
        return;
    }
    const int node = dts__node_of(s, u);
    dts__cpu_advance(s, node, now);
    dts__job *j = &s->job[u->idx];
    *j = (dts__job){.u = u, .left = (double)dur, .gen = j->gen, .live = 1, .fn = fn, .a = a, .b = b};
    s->cpu_active[node] += s->sc->t; /* a unit is t tensor-parallel ranks, computing together */
    dts__cpu_resched(s, node, now);
}
