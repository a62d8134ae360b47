/* coll_analytic.c: the analytic collective model (dts_coll.h,
 * coll_internal.h): the message model's algorithms priced per phase from
 * the members' links, in memory and events linear in the members.
 *
 * The collective starts at T0, when the last member has arrived and every
 * member's sending and receiving ports are free (dts_net); its messages
 * then meet no other traffic, and afterwards each member's ports are held
 * until its done time less the smaller latency (the end of its last
 * transfer when the links are alike). Costs are dts_net_cost's, rounded
 * per message as the message model rounds them.
 *
 * Ring (allreduce H = 2(n-1) steps, reduce-scatter or all-gather n-1), each
 * segment in C chunks, link j the one from member j to j+1, with latency
 * a_j, c_j = a_j + the wire time of a chunk, W_j = the wire time of a
 * whole segment. Two lower bounds of the message model's time:
 *   chain: chunk 0 goes round the ring H hops, then the last hop carries
 *          the other C-1 chunks: sum of the H links before member i,
 *          2 sum(c) - c_i - c_i+1 for an allreduce, sum(c) - c_i for a
 *          half, + W_i-1 - (c_i-1 - a_i-1);
 *   port:  the sending port of link j carries H segments back to back:
 *          H W_j + a_j.
 * The ring takes the largest of both over the members, for every member.
 * With alike links and an even split both are what the message model
 * gives (H (a + w) + (C-1) w and H C w + a, w a chunk's wire time): equal.
 * With mixed intra and inter links the message model is slower by how
 * long its ports wait for one another; segments that differ by 4 bytes
 * are priced at the larger; and members that arrive at different times
 * start here at the last arrival, where the message model starts the
 * early members' first steps at once (it finishes earlier, by less than
 * the spread of the arrivals).
 *
 * Tree and naive: the message model's steps replayed member by member
 * without events (each member's sending and receiving port kept in an
 * array), in the order the message model posts them when every member
 * arrives at once: O(n log n) time, O(n) memory.
 *
 * Trace: one call of the step hook per member and phase it takes part in,
 * at the phase's end, from the end of its previous phase (its arrival for
 * the first), with step 0, the phase's bytes and its first peer.
 *
 * Invariants: every member is done exactly once, at or after T0; the
 * instance holds O(n) bytes (dts_coll_bytes) whatever the algorithm. */
#include "coll_internal.h"

#include <stdlib.h>
#include <string.h>

#define DTS__NPH 4 /* phases a member may take part in: reduce (fold), reduce-scatter, all-gather, broadcast */

typedef struct dts__cana {
    dts_coll base;
    dts_engine *e;
    dts_net *net;
    dts_coll_kind kind;
    int64_t bytes;
    int C;            /* chunks per ring segment */
    int *ranks;       /* (n) */
    int64_t *t_arr;   /* (n) arrival, -1 until arrived */
    int64_t *ph_end;  /* (n, DTS__NPH) end of the member's part of each phase, -1: not in it */
    int64_t *ph_byte; /* (n, DTS__NPH) bytes the member sends in the phase */
    int *ph_peer;     /* (n, DTS__NPH) world rank of its first peer, -1 none */
    int n_arrived;
    int64_t last; /* latest arrival */
    dts_coll_done_fn done_fn;
    dts_coll_step_fn step_fn;
    void *ctx;
} dts__cana;

/* phase order within a member's span list (the hook's names: dts__coll_phase_names) */
static const int dts__ph_order[DTS__NPH] = {DTS__PH_REDUCE, DTS__PH_RS, DTS__PH_AG, DTS__PH_BCAST};

#define DTS__E(c, i, p) ((c)->ph_end[(size_t)(i)*DTS__NPH + (p)])
#define DTS__B(c, i, p) ((c)->ph_byte[(size_t)(i)*DTS__NPH + (p)])
#define DTS__Q(c, i, p) ((c)->ph_peer[(size_t)(i)*DTS__NPH + (p)])

static void dts__ana_free(dts_coll *base);
static void dts__ana_arrive(dts_coll *base, int member);
static size_t dts__ana_bytes(const dts_coll *base);
static const dts__coll_ops dts__ana_ops = {
    .name = "analytic", .arrive = dts__ana_arrive, .free = dts__ana_free, .bytes = dts__ana_bytes};

dt_status dts__coll_ana_create(const dts__coll_args *a, dts_coll **out)
{
    const int n = a->n;
    dts__cana *c = calloc(1, sizeof *c);
    if (!c) return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for a collective");
    c->base = (dts_coll){.ops = &dts__ana_ops, .n = n, .steps = dts__coll_steps(a->kind, n)};
    c->e = a->e;
    c->net = a->net;
    c->kind = a->kind;
    c->bytes = a->bytes;
    c->C = dts__coll_chunks(a->kind, n, a->bytes, a->chunk_bytes);
    c->done_fn = a->done;
    c->step_fn = a->step_hook;
    c->ctx = a->ctx;
    c->last = -1;
    c->ranks = malloc((size_t)n * sizeof *c->ranks);
    c->t_arr = malloc((size_t)n * sizeof *c->t_arr);
    c->ph_end = malloc((size_t)n * DTS__NPH * sizeof *c->ph_end);
    c->ph_byte = calloc((size_t)n * DTS__NPH, sizeof *c->ph_byte);
    c->ph_peer = malloc((size_t)n * DTS__NPH * sizeof *c->ph_peer);
    if (!c->ranks || !c->t_arr || !c->ph_end || !c->ph_byte || !c->ph_peer) {
        dts__ana_free(&c->base);
        return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for a collective of %d members", n);
    }
    memcpy(c->ranks, a->ranks, (size_t)n * sizeof *a->ranks);
    for (int i = 0; i < n; i++) c->t_arr[i] = -1;
    for (size_t k = 0; k < (size_t)n * DTS__NPH; k++) c->ph_end[k] = -1, c->ph_peer[k] = -1;
    *out = &c->base;
    return DT_OK;
}

static void dts__ana_free(dts_coll *base)
{
    dts__cana *c = (dts__cana *)base;
    free(c->ranks);
    free(c->t_arr);
    free(c->ph_end);
    free(c->ph_byte);
    free(c->ph_peer);
    free(c);
}

static size_t dts__ana_bytes(const dts_coll *base)
{
    const dts__cana *c = (const dts__cana *)base;
    const size_t n = (size_t)c->base.n;
    return sizeof *c + n * (sizeof *c->ranks + sizeof *c->t_arr) +
           n * DTS__NPH * (sizeof *c->ph_end + sizeof *c->ph_byte + sizeof *c->ph_peer);
}

/* ---- pricing -------------------------------------------------------------- */

/* wire time of `bytes` from member i to member j (cost less the latency, as dts_net_send rounds it) */
static int64_t dts__wire(const dts__cana *c, int i, int j, int64_t bytes)
{
    if (bytes <= 0) return 0;
    return dts_net_cost(c->net, c->ranks[i], c->ranks[j], bytes) - dts_net_cost(c->net, c->ranks[i], c->ranks[j], 0);
}

static int64_t dts__lat(const dts__cana *c, int i, int j) { return dts_net_cost(c->net, c->ranks[i], c->ranks[j], 0); }

static int64_t dts__max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The ring's time from T0 over H steps (see the top of the file). */
static int64_t dts__ring_ns(const dts__cana *c, int H)
{
    const int n = c->base.n, C = c->C;
    const int64_t seg = dts__coll_seg(c->bytes, n, 0), q = seg / C, r = seg % C;
    int64_t sum = 0, t = 0;
    for (int j = 0; j < n; j++) sum += dts__lat(c, j, (j + 1) % n) + dts__wire(c, j, (j + 1) % n, q + (r > 0));
    for (int i = 0; i < n; i++) {
        const int in = (i - 1 + n) % n, i1 = (i + 1) % n;
        const int64_t a = dts__lat(c, in, i), w0 = dts__wire(c, in, i, q + (r > 0));
        const int64_t W = r * dts__wire(c, in, i, q + 1) + (C - r) * dts__wire(c, in, i, q);
        const int64_t ci = dts__lat(c, i, i1) + dts__wire(c, i, i1, q + (r > 0));
        const int64_t ci1 = dts__lat(c, i1, (i1 + 1) % n) + dts__wire(c, i1, (i1 + 1) % n, q + (r > 0));
        const int64_t chain = (H > n - 1 ? 2 * sum - ci - ci1 : sum - ci) + (W - w0);
        const int64_t port = (int64_t)H * W + a;
        t = dts__max64(t, dts__max64(chain, port));
    }
    return t;
}

static void dts__price_ring(dts__cana *c, int64_t T0)
{
    const int n = c->base.n;
    const int rs = c->kind != DTS_COLL_ALL_GATHER, ag = c->kind != DTS_COLL_REDUCE_SCATTER;
    const int64_t t_mid = T0 + (rs && ag ? dts__ring_ns(c, n - 1) : 0);
    const int64_t t_end = T0 + dts__ring_ns(c, (rs + ag) * (n - 1));
    const int64_t all = 4 * (c->bytes / 4);
    for (int i = 0; i < n; i++) {
        const int next = c->ranks[(i + 1) % n];
        if (rs) {
            DTS__E(c, i, DTS__PH_RS) = ag ? t_mid : t_end;
            DTS__B(c, i, DTS__PH_RS) = all - dts__coll_seg(c->bytes, n, i);
            DTS__Q(c, i, DTS__PH_RS) = next;
        }
        if (ag) {
            DTS__E(c, i, DTS__PH_AG) = t_end;
            DTS__B(c, i, DTS__PH_AG) = all - dts__coll_seg(c->bytes, n, (i + 1) % n);
            DTS__Q(c, i, DTS__PH_AG) = next;
        }
    }
}

/* Ports and step times of tree and naive, member by member. */
typedef struct dts__replay {
    int64_t *ready; /* (n) when the member has received every step so far (it posts its next send then) */
    int64_t *sfree; /* (n) its sending port free */
    int64_t *rfree; /* (n) its receiving port free */
    int64_t *pre;   /* (n) tree: arrival of a halving message sent ahead of the fold, -1 none */
} dts__replay;

/* Member i sends `bytes` to j, posted at `at`: returns the arrival (ports as dts_net_send holds them). */
static int64_t dts__send(const dts__cana *c, dts__replay *R, int i, int j, int64_t bytes, int64_t at)
{
    const int64_t start = dts__max64(at, dts__max64(R->sfree[i], R->rfree[j])), w = dts__wire(c, i, j, bytes);
    R->sfree[i] = R->rfree[j] = start + w;
    return start + w + dts__lat(c, i, j);
}

static void dts__price_tree(dts__cana *c, dts__replay *R, int64_t T0)
{
    const int n = c->base.n, P = dts__coll_pow2(n), lg = dts__coll_lg(P);
    const int64_t S = c->bytes;
    if (n > P) { /* fold: i >= P sends its buffer to i - P; a member with nothing to fold sends its first
                  * halving message at once, ahead of the fold on the receiver's port (member order) */
        for (int r = 0; r < n - P; r++) {
            const int j = lg ? r ^ (P >> 1) : r;
            if (lg && j >= n - P) R->pre[j] = dts__send(c, R, j, r, S / 2, T0);
        }
        for (int i = P; i < n; i++) {
            const int r = i - P;
            R->ready[r] = dts__send(c, R, i, r, S, T0);
            DTS__E(c, r, DTS__PH_REDUCE) = R->ready[r];
            DTS__Q(c, r, DTS__PH_REDUCE) = -1;
            DTS__E(c, i, DTS__PH_REDUCE) = R->sfree[i];
            DTS__B(c, i, DTS__PH_REDUCE) = S;
            DTS__Q(c, i, DTS__PH_REDUCE) = c->ranks[r];
        }
    }
    int64_t blk = S;
    for (int k = 0; k < 2 * lg; k++) { /* halving over masks P/2 .. 1, doubling over 1 .. P/2 */
        const int halving = k < lg, mask = halving ? P >> (k + 1) : 1 << (k - lg),
                  ph = halving ? DTS__PH_RS : DTS__PH_AG;
        if (halving) blk /= 2;
        for (int i = 0; i < P; i++) { /* every send of the step, posted once its sender is ready */
            const int p = i ^ mask;
            const int64_t arr = k == 0 && R->pre[i] >= 0 ? R->pre[i] : dts__send(c, R, i, p, blk, R->ready[i]);
            R->pre[i] = arr; /* the arrival at p, read below */
            DTS__B(c, i, ph) += blk;
            if (DTS__Q(c, i, ph) < 0) DTS__Q(c, i, ph) = c->ranks[p];
        }
        for (int i = 0; i < P; i++) R->ready[i] = dts__max64(R->ready[i], R->pre[i ^ mask]);
        for (int i = 0; i < P; i++) R->pre[i] = -1;
        for (int i = 0; i < P; i++) DTS__E(c, i, ph) = R->ready[i];
        if (!halving) blk *= 2;
    }
    for (int r = 0; n > P && r < n - P; r++) { /* unfold: the result back to i + P */
        const int64_t arr = dts__send(c, R, r, r + P, S, R->ready[r]);
        DTS__E(c, r, DTS__PH_BCAST) = R->sfree[r];
        DTS__B(c, r, DTS__PH_BCAST) = S;
        DTS__Q(c, r, DTS__PH_BCAST) = c->ranks[r + P];
        DTS__E(c, r + P, DTS__PH_BCAST) = arr;
    }
    for (int i = 0; i < P; i++) { /* done once the last send has left the port */
        const int last = n > P && i < n - P ? DTS__PH_BCAST : lg ? DTS__PH_AG : -1;
        if (last >= 0) DTS__E(c, i, last) = dts__max64(DTS__E(c, i, last), R->sfree[i]);
    }
}

static void dts__price_naive(dts__cana *c, dts__replay *R, int64_t T0)
{
    const int n = c->base.n, L = dts__coll_lg(n);
    const int64_t S = c->bytes;
    int64_t tg = T0;
    for (int j = 1; j < n; j++) { /* every buffer to member 0, whose receiving port takes them in member order */
        tg = dts__max64(tg, dts__send(c, R, j, 0, S, T0));
        DTS__E(c, j, DTS__PH_REDUCE) = R->sfree[j];
        DTS__B(c, j, DTS__PH_REDUCE) = S;
        DTS__Q(c, j, DTS__PH_REDUCE) = c->ranks[0];
    }
    DTS__E(c, 0, DTS__PH_REDUCE) = tg;
    R->ready[0] = tg;
    for (int v = 0; v < n; v++) { /* binomial broadcast: parents (v less its lowest bit) come first */
        int b = L;
        if (v) {
            b = 0;
            while (!(v & (1 << b))) b++;
        }
        for (int j = b - 1; j >= 0; j--) { /* its sends, all posted once it has the result */
            const int to = v + (1 << j);
            if (to >= n) continue;
            R->ready[to] = dts__send(c, R, v, to, S, R->ready[v]);
            DTS__B(c, v, DTS__PH_BCAST) += S;
            if (DTS__Q(c, v, DTS__PH_BCAST) < 0) DTS__Q(c, v, DTS__PH_BCAST) = c->ranks[to];
        }
        DTS__E(c, v, DTS__PH_BCAST) = dts__max64(R->ready[v], R->sfree[v]);
    }
}

/* ---- events --------------------------------------------------------------- */

static void dts__ana_event(dts_engine *e, void *ctx, int64_t a, int64_t b);

/* The last member is here: price the collective from T0, hold the ports, schedule each member's phase ends. */
static void dts__ana_start(dts__cana *c)
{
    const int n = c->base.n;
    dts_net *net = c->net;
    int64_t T0 = c->last; /* one member sends nothing: done on arrival, as in the message model */
    for (int i = 0; n > 1 && i < n; i++)
        T0 = dts__max64(T0, dts__max64(net->send_free[c->ranks[i]], net->recv_free[c->ranks[i]]));
    int64_t amin = 0;
    if (n > 1) {
        dts__replay R = {0};
        if (!dts__coll_is_ring(c->kind)) {
            R.ready = malloc((size_t)n * sizeof *R.ready);
            R.sfree = malloc((size_t)n * sizeof *R.sfree);
            R.rfree = malloc((size_t)n * sizeof *R.rfree);
            R.pre = malloc((size_t)n * sizeof *R.pre);
            if (!R.ready || !R.sfree || !R.rfree || !R.pre) {
                free(R.ready), free(R.sfree), free(R.rfree), free(R.pre);
                dts_engine_fail(c->e, DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for a collective of %d members", n));
                return;
            }
            for (int i = 0; i < n; i++) R.ready[i] = R.sfree[i] = R.rfree[i] = T0, R.pre[i] = -1;
        }
        if (dts__coll_is_ring(c->kind)) dts__price_ring(c, T0);
        else if (c->kind == DTS_COLL_TREE_ALLREDUCE) dts__price_tree(c, &R, T0);
        else dts__price_naive(c, &R, T0);
        free(R.ready), free(R.sfree), free(R.rfree), free(R.pre);
        const dts_hw *hw = net->hw;
        amin = dts_ns_sat(hw->intra.alpha_ns < hw->inter.alpha_ns ? hw->intra.alpha_ns : hw->inter.alpha_ns);
    }
    /* the bytes and messages the message model would have moved, for the net's totals */
    const int P = dts__coll_pow2(n);
    const int64_t msgs = dts__coll_is_ring(c->kind)           ? (int64_t)n * c->base.steps * c->C
                         : c->kind == DTS_COLL_TREE_ALLREDUCE ? (int64_t)P * 2 * dts__coll_lg(P) + 2 * (n - P)
                                                              : 2 * (int64_t)(n - 1);
    for (int i = 0; i < n; i++) {
        int64_t done = T0;
        for (int p = 0; p < DTS__NPH; p++) {
            net->bytes += DTS__B(c, i, p);
            done = dts__max64(done, DTS__E(c, i, p));
        }
        const int r = c->ranks[i];
        const int64_t held = dts__max64(T0, done - amin);
        if (n > 1) {
            net->send_free[r] = dts__max64(net->send_free[r], held);
            net->recv_free[r] = dts__max64(net->recv_free[r], held);
        }
        int any = 0;
        for (int k = 0; k < DTS__NPH; k++) {
            const int p = dts__ph_order[k];
            if (DTS__E(c, i, p) < 0) continue;
            any = 1;
            dt_status st = dts_engine_at(c->e, DTS__E(c, i, p), dts__ana_event, c, i, p);
            if (st != DT_OK) return (void)dts_engine_fail(c->e, st);
        }
        if (!any) { /* one member: done at once */
            dt_status st = dts_engine_at(c->e, T0, dts__ana_event, c, i, -1);
            if (st != DT_OK) return (void)dts_engine_fail(c->e, st);
        }
    }
    net->messages += msgs;
}

/* Member a's phase b has ended (b = -1: it takes part in none): report it
 * from the end of its previous phase (its arrival for the first); after
 * its last phase it is done. A member's phases end in dts__ph_order. */
static void dts__ana_event(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    dts__cana *c = ctx;
    const int i = (int)a, ph = (int)b;
    int64_t t0 = c->t_arr[i];
    int is_last = 1;
    if (ph >= 0) {
        int kp = 0;
        while (dts__ph_order[kp] != ph) kp++;
        for (int k = 0; k < DTS__NPH; k++) {
            const int64_t end = DTS__E(c, i, dts__ph_order[k]);
            if (end < 0) continue;
            if (k < kp && end > t0) t0 = end;
            if (k > kp) is_last = 0;
        }
        if (c->step_fn)
            c->step_fn(c->ctx, i, dts__coll_phase_names[ph], 0, DTS__Q(c, i, ph), DTS__B(c, i, ph), t0,
                       dts_engine_now(e));
    }
    if (!is_last) return;
    c->base.n_done++;
    if (c->done_fn) c->done_fn(e, c->ctx, i);
}

static void dts__ana_arrive(dts_coll *base, int member)
{
    dts__cana *c = (dts__cana *)base;
    const int64_t now = dts_engine_now(c->e);
    c->t_arr[member] = now;
    if (now > c->last) c->last = now;
    if (++c->n_arrived == c->base.n) dts__ana_start(c);
}
