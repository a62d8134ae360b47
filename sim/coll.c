/* coll.c: the front of dts_coll.h (the model's choice and the dispatch,
 * coll_internal.h) and the message-level model (see dts_coll.h).
 *
 * Layout: every member has the same number of steps S and chunks C; the
 * tables are indexed [member][step] (plans) and [member][step][chunk]
 * (arrival times, -1 until the message arrives). A send of member i's step
 * k goes to the same step k on the receiving member (all three programs
 * are written so that sender and receiver share the step index). Memory
 * and events grow as n * S * C: n^2 for a ring.
 *
 * Trace hook: one call per step that sends or receives, numbered from 0
 * within its phase as lib/comm/collectives.c numbers them (docs/trace-format.md).
 *
 * Invariants: prefix[i][c] = number of leading steps whose chunk-c receive
 * has arrived (steps without a receive count as arrived); next[i][c] =
 * next step whose chunk c member i will send; a member sends step k's
 * chunk c only when it has arrived and prefix >= k. */
#include "coll_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- the front ------------------------------------------------------------ */

const char *const dts__coll_phase_names[4] = {"reduce-scatter", "all-gather", "reduce", "broadcast"};

int64_t dts__coll_seg(int64_t bytes, int n, int s)
{
    const int64_t count = bytes / 4, q = count / n, r = count % n;
    return 4 * (q + (s < r));
}

int dts__coll_lg(int p)
{
    int l = 0;
    while ((1 << l) < p) l++;
    return l;
}

int dts__coll_pow2(int n)
{
    int P = 1;
    while (P * 2 <= n) P *= 2;
    return P;
}

int dts__coll_is_ring(dts_coll_kind kind)
{
    return kind == DTS_COLL_RING_ALLREDUCE || kind == DTS_COLL_REDUCE_SCATTER || kind == DTS_COLL_ALL_GATHER;
}

int dts__coll_steps(dts_coll_kind kind, int n)
{
    return n <= 1                            ? 0
           : dts__coll_is_ring(kind)         ? (kind == DTS_COLL_RING_ALLREDUCE ? 2 : 1) * (n - 1)
           : kind == DTS_COLL_TREE_ALLREDUCE ? 2 * dts__coll_lg(dts__coll_pow2(n)) + 2
                                             : n - 1 + dts__coll_lg(n);
}

int dts__coll_chunks(dts_coll_kind kind, int n, int64_t bytes, int64_t chunk_bytes)
{
    if (!dts__coll_is_ring(kind) || chunk_bytes <= 0 || n <= 1) return 1;
    const int64_t seg = dts__coll_seg(bytes, n, 0), C = (seg + chunk_bytes - 1) / chunk_bytes;
    return C < 1 ? 1 : (int)C;
}

dt_status dts_coll_create(dts_engine *e, dts_net *net, dts_coll_kind kind, int n, const int *ranks, int64_t bytes,
                          int64_t chunk_bytes, dts_coll_done_fn done, dts_coll_step_fn step_hook, void *ctx,
                          dts_coll **out)
{
    if (n < 1) return DT_FAIL(DT_ERR_INVALID, "dtsim: a collective of %d members", n);
    const dts__coll_args a = {e, net, kind, n, ranks, bytes, chunk_bytes, done, step_hook, ctx};
    return dts_hw_coll_analytic(net->hw, n) ? dts__coll_ana_create(&a, out) : dts__coll_msg_create(&a, out);
}

void dts_coll_free(dts_coll *c)
{
    if (c) c->ops->free(c);
}

void dts_coll_arrive(dts_coll *c, int member) { c->ops->arrive(c, member); }
int dts_coll_done_count(const dts_coll *c) { return c->n_done; }
int dts_coll_steps(const dts_coll *c) { return c->steps; }
size_t dts_coll_bytes(const dts_coll *c) { return c->ops->bytes(c); }
const char *dts_coll_model(const dts_coll *c) { return c->ops->name; }

/* ---- the message-level model ---------------------------------------------- */

typedef struct dts__cstep {
    int send_to;         /* member, -1 none */
    int recv_from;       /* member, -1 none */
    int64_t bytes;       /* of the message sent (whole step; chunks split it) */
    int64_t rbytes;      /* of the message received */
    unsigned char phase; /* index into dts__phase_names */
    int pstep;           /* the step's number within its phase on this member (the trace's "step", from 0) */
} dts__cstep;

typedef struct dts__cmsg {
    dts_coll base;
    dts_engine *e;
    dts_net *net;
    int n, S, C;
    int *ranks;         /* (n) */
    dts__cstep *plan;   /* (n, S) */
    int64_t *arr;       /* (n, S, C) arrival times, -1 unknown */
    int *prefix, *next; /* (n, C) */
    int *lo;            /* (n, C) min(prefix, next) as last counted into okc */
    int *okc;           /* (n, S) chunks whose step k is received and sent: the step closes at C */
    int64_t *t_arrive;  /* (n) -1 until arrived */
    int64_t *step_t0;   /* (n) start of the member's current step (trace) */
    int *step_cur;      /* (n) first step not yet finished (trace) */
    int64_t *send_done; /* (n) when the member's last send leaves its port */
    char *done;         /* (n) */
    dts_coll_done_fn done_fn;
    dts_coll_step_fn step_fn;
    void *ctx;
} dts__cmsg;

#define DTS__P(c, i, k) ((c)->plan[(size_t)(i) * (c)->S + (k)])
#define DTS__A(c, i, k, ch) ((c)->arr[((size_t)(i) * (c)->S + (k)) * (c)->C + (ch)])

static void dts__plan_ring(dts__cmsg *c, int64_t bytes, int rs, int ag)
{
    const int n = c->n;
    for (int i = 0; i < n; i++) {
        int k = 0;
        for (int j = 0; rs && j < n - 1; j++, k++) {
            dts__cstep *st = &DTS__P(c, i, k);
            st->send_to = (i + 1) % n;
            st->recv_from = (i - 1 + n) % n;
            st->bytes = dts__coll_seg(bytes, n, ((i - j - 1) % n + n) % n);
            st->rbytes = dts__coll_seg(bytes, n, ((i - j - 2) % n + n) % n);
            st->phase = DTS__PH_RS;
        }
        for (int j = 0; ag && j < n - 1; j++, k++) {
            dts__cstep *st = &DTS__P(c, i, k);
            st->send_to = (i + 1) % n;
            st->recv_from = (i - 1 + n) % n;
            st->bytes = dts__coll_seg(bytes, n, ((i - j) % n + n) % n);
            st->rbytes = dts__coll_seg(bytes, n, ((i - j - 1) % n + n) % n);
            st->phase = DTS__PH_AG;
        }
    }
}

/* Recursive halving-doubling: step 0 fold, 1..lg halving, lg+1..2lg doubling, 2lg+1 unfold. */
static void dts__plan_tree(dts__cmsg *c, int64_t bytes)
{
    const int n = c->n;
    int P = 1;
    while (P * 2 <= n) P *= 2;
    const int lg = dts__coll_lg(P);
    for (int i = 0; i < n; i++) {
        if (i >= P) { /* folded away: send, wait for the result */
            DTS__P(c, i, 0) = (dts__cstep){i - P, -1, bytes, 0, DTS__PH_REDUCE, 0};
            DTS__P(c, i, 2 * lg + 1) = (dts__cstep){-1, i - P, 0, bytes, DTS__PH_BCAST, 0};
            continue;
        }
        if (i < n - P) {
            DTS__P(c, i, 0) = (dts__cstep){-1, i + P, 0, bytes, DTS__PH_REDUCE, 0};
            DTS__P(c, i, 2 * lg + 1) = (dts__cstep){i + P, -1, bytes, 0, DTS__PH_BCAST, 0};
        }
        int64_t blk = bytes;
        for (int k = 0; k < lg; k++) { /* halving over masks P/2 .. 1 */
            const int mask = P >> (k + 1);
            blk /= 2;
            DTS__P(c, i, 1 + k) = (dts__cstep){i ^ mask, i ^ mask, blk, blk, DTS__PH_RS, 0};
        }
        for (int k = 0; k < lg; k++) { /* doubling over masks 1 .. P/2 */
            const int mask = 1 << k;
            DTS__P(c, i, 1 + lg + k) = (dts__cstep){i ^ mask, i ^ mask, blk, blk, DTS__PH_AG, 0};
            blk *= 2;
        }
    }
}

/* Naive: steps 0..n-2 member j+1 sends to 0; then L binomial broadcast rounds from 0. */
static void dts__plan_naive(dts__cmsg *c, int64_t bytes)
{
    const int n = c->n, L = dts__coll_lg(n);
    for (int j = 1; j < n; j++) {
        DTS__P(c, j, j - 1) = (dts__cstep){0, -1, bytes, 0, DTS__PH_REDUCE, 0};
        DTS__P(c, 0, j - 1) = (dts__cstep){-1, j, 0, bytes, DTS__PH_REDUCE, 0};
    }
    for (int v = 0; v < n; v++) {
        int b = L; /* lowest set bit of v (v = 0: L) */
        if (v) {
            b = 0;
            while (!(v & (1 << b))) b++;
            DTS__P(c, v, n - 1 + L - 1 - b).recv_from = v - (1 << b);
            DTS__P(c, v, n - 1 + L - 1 - b).rbytes = bytes;
            DTS__P(c, v, n - 1 + L - 1 - b).phase = DTS__PH_BCAST;
        }
        for (int j = b - 1; j >= 0; j--) {
            if (v + (1 << j) >= n) continue;
            dts__cstep *st = &DTS__P(c, v, n - 1 + L - 1 - j);
            st->send_to = v + (1 << j);
            st->bytes = bytes;
            st->phase = DTS__PH_BCAST;
        }
    }
}

static void dts__msg_free(dts_coll *base);
static void dts__msg_arrive(dts_coll *base, int member);
static size_t dts__msg_bytes(const dts_coll *base);
static const dts__coll_ops dts__msg_ops = {
    .name = "messages", .arrive = dts__msg_arrive, .free = dts__msg_free, .bytes = dts__msg_bytes};

dt_status dts__coll_msg_create(const dts__coll_args *a, dts_coll **out)
{
    const int n = a->n;
    dts__cmsg *c = calloc(1, sizeof *c);
    if (!c) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for a collective");
    c->base = (dts_coll){.ops = &dts__msg_ops, .n = n, .steps = dts__coll_steps(a->kind, n)};
    c->e = a->e;
    c->net = a->net;
    c->n = n;
    c->done_fn = a->done;
    c->step_fn = a->step_hook;
    c->ctx = a->ctx;
    c->S = c->base.steps;
    c->C = dts__coll_chunks(a->kind, n, a->bytes, a->chunk_bytes);
    const size_t nS = (size_t)n * (c->S ? c->S : 1);
    c->ranks = malloc((size_t)n * sizeof *c->ranks);
    c->plan = calloc(nS, sizeof *c->plan);
    c->arr = malloc(nS * c->C * sizeof *c->arr);
    c->prefix = calloc((size_t)n * c->C, sizeof *c->prefix);
    c->next = calloc((size_t)n * c->C, sizeof *c->next);
    c->lo = calloc((size_t)n * c->C, sizeof *c->lo);
    c->okc = calloc(nS, sizeof *c->okc);
    c->t_arrive = malloc((size_t)n * sizeof *c->t_arrive);
    c->step_t0 = calloc((size_t)n, sizeof *c->step_t0);
    c->step_cur = calloc((size_t)n, sizeof *c->step_cur);
    c->send_done = calloc((size_t)n, sizeof *c->send_done);
    c->done = calloc((size_t)n, 1);
    if (!c->ranks || !c->plan || !c->arr || !c->prefix || !c->next || !c->lo || !c->okc || !c->t_arrive || !c->step_t0 || !c->step_cur ||
        !c->send_done || !c->done) {
        dts__msg_free(&c->base);
        return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for a collective of %d members", n);
    }
    memcpy(c->ranks, a->ranks, (size_t)n * sizeof *a->ranks);
    for (size_t i = 0; i < nS; i++) c->plan[i] = (dts__cstep){-1, -1, 0, 0, 0, 0};
    for (size_t i = 0; i < nS * c->C; i++) c->arr[i] = -1;
    for (int i = 0; i < n; i++) c->t_arrive[i] = -1;
    if (n > 1) {
        if (dts__coll_is_ring(a->kind))
            dts__plan_ring(c, a->bytes, a->kind != DTS_COLL_ALL_GATHER, a->kind != DTS_COLL_REDUCE_SCATTER);
        else if (a->kind == DTS_COLL_TREE_ALLREDUCE) dts__plan_tree(c, a->bytes);
        else dts__plan_naive(c, a->bytes);
    }
    /* number each member's steps within their phase (no-op steps of the tree are not counted) */
    for (int i = 0; i < n; i++) {
        int count[4] = {0, 0, 0, 0};
        for (int k = 0; k < c->S; k++) {
            dts__cstep *st = &DTS__P(c, i, k);
            if (st->send_to >= 0 || st->recv_from >= 0) st->pstep = count[st->phase]++;
        }
    }
    /* steps without a receive count as received from the start */
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c->C; ch++) {
            int k = 0;
            while (k < c->S && DTS__P(c, i, k).recv_from < 0) k++;
            c->prefix[(size_t)i * c->C + ch] = k;
        }
    *out = &c->base;
    return DT_OK;
}

static void dts__msg_free(dts_coll *base)
{
    dts__cmsg *c = (dts__cmsg *)base;
    free(c->ranks);
    free(c->plan);
    free(c->arr);
    free(c->prefix);
    free(c->next);
    free(c->lo);
    free(c->okc);
    free(c->t_arrive);
    free(c->step_t0);
    free(c->step_cur);
    free(c->send_done);
    free(c->done);
    free(c);
}

static size_t dts__msg_bytes(const dts_coll *base)
{
    const dts__cmsg *c = (const dts__cmsg *)base;
    const size_t n = (size_t)c->n, nS = n * (c->S ? c->S : 1), C = (size_t)c->C;
    return sizeof *c + n * sizeof *c->ranks + nS * sizeof *c->plan + nS * C * sizeof *c->arr +
           3 * n * C * sizeof *c->prefix + nS * sizeof *c->okc +
           n * (sizeof *c->t_arrive + sizeof *c->step_t0 + sizeof *c->step_cur + sizeof *c->send_done + 1);
}

static void dts__on_arrive(dts_engine *e, void *ctx, int64_t a, int64_t b);
static void dts__on_done(dts_engine *e, void *ctx, int64_t a, int64_t b);

static int64_t dts__chunk_bytes(const dts__cmsg *c, int64_t bytes, int ch)
{
    const int64_t q = bytes / c->C, r = bytes % c->C;
    return q + (ch < r);
}

/* Chunk ch of member i moved (its prefix or next grew): count it into the
 * steps it now has received and sent (okc), each step once per chunk. */
static void dts__count_chunk(dts__cmsg *c, int i, int ch)
{
    const size_t x = (size_t)i * c->C + ch;
    const int m = c->prefix[x] < c->next[x] ? c->prefix[x] : c->next[x];
    for (int k = c->lo[x]; k < m; k++) c->okc[(size_t)i * c->S + k]++;
    if (m > c->lo[x]) c->lo[x] = m;
}

/* Trace: close the member's steps that are complete (all chunks received, sends posted). */
static void dts__close_steps(dts__cmsg *c, int i, int64_t now)
{
    while (c->step_cur[i] < c->S && c->okc[(size_t)i * c->S + c->step_cur[i]] == c->C) {
        const int k = c->step_cur[i];
        const dts__cstep *st = &DTS__P(c, i, k);
        if (c->step_fn && (st->send_to >= 0 || st->recv_from >= 0)) /* a tree's no-op steps are not reported */
            c->step_fn(c->ctx, i, dts__coll_phase_names[st->phase], st->pstep,
                       st->send_to >= 0 ? c->ranks[st->send_to] : -1, st->send_to >= 0 ? st->bytes : 0, c->step_t0[i],
                       now);
        c->step_t0[i] = now;
        c->step_cur[i]++;
    }
}

/* Send what chunks ch0..ch1-1 of member i can send now (the others have
 * not changed since they were last looked at: each call sends all that is
 * ready, so an arrival of chunk ch needs only ch), then close its finished
 * steps, and the member once every step is. */
static void dts__progress(dts__cmsg *c, int i, int ch0, int ch1)
{
    dts_engine *e = c->e;
    const int64_t now = dts_engine_now(e);
    if (c->t_arrive[i] < 0 || c->done[i]) return;
    for (int ch = ch0; ch < ch1; ch++) {
        int *nx = &c->next[(size_t)i * c->C + ch];
        const int pre = c->prefix[(size_t)i * c->C + ch];
        while (*nx < c->S && pre >= *nx) {
            const dts__cstep *st = &DTS__P(c, i, *nx);
            if (st->send_to >= 0) {
                int64_t sd = 0;
                const int64_t at = dts_net_send(c->net, c->ranks[i], c->ranks[st->send_to],
                                                dts__chunk_bytes(c, st->bytes, ch), now, &sd);
                if (sd > c->send_done[i]) c->send_done[i] = sd;
                dt_status s = dts_engine_at(e, at, dts__on_arrive, c, st->send_to, (int64_t)*nx * c->C + ch);
                if (s != DT_OK) {
                    dts_engine_fail(e, s);
                    return;
                }
            }
            (*nx)++;
        }
        dts__count_chunk(c, i, ch);
    }
    dts__close_steps(c, i, now);
    if (c->step_cur[i] == c->S) {
        c->done[i] = 1;
        const int64_t t = c->send_done[i] > now ? c->send_done[i] : now;
        dt_status s = dts_engine_at(e, t, dts__on_done, c, i, 0);
        if (s != DT_OK) dts_engine_fail(e, s);
    }
}

static void dts__on_arrive(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    dts__cmsg *c = ctx;
    const int i = (int)a, k = (int)(b / c->C), ch = (int)(b % c->C);
    DTS__A(c, i, k, ch) = dts_engine_now(e);
    int *pre = &c->prefix[(size_t)i * c->C + ch];
    while (*pre < c->S && (DTS__P(c, i, *pre).recv_from < 0 || DTS__A(c, i, *pre, ch) >= 0)) (*pre)++;
    dts__progress(c, i, ch, ch + 1);
}

static void dts__on_done(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)b;
    dts__cmsg *c = ctx;
    c->base.n_done++;
    if (c->done_fn) c->done_fn(e, c->ctx, (int)a);
}

static void dts__msg_arrive(dts_coll *base, int member)
{
    dts__cmsg *c = (dts__cmsg *)base;
    const int64_t now = dts_engine_now(c->e);
    c->t_arrive[member] = now;
    c->step_t0[member] = now;
    dts__progress(c, member, 0, c->C);
}
