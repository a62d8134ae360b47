/* collectives.c: the collective half of dt_comm.h (allreduce in four
 * algorithms, ring reduce-scatter and all-gather, binomial broadcast),
 * written only on the ops table's isend/irecv/wait, plus allreduce_native
 * for DT_ALLREDUCE_MPI. It owns the algorithms, the tags they use and the
 * per-call scratch buffers; the backends own the transport.
 *
 * n ranks, rank r, count floats in buf. Segment s (dt_comm_segment) is the
 * s-th of n near-equal pieces of buf; the first count % n are one longer.
 *
 * Ring (allreduce = reduce-scatter then all-gather, 2(n-1) steps, each
 * moving one segment to rank r+1 and one from rank r-1):
 *   reduce-scatter step k (0 <= k < n-1): send segment (r-k-1) mod n to r+1,
 *     receive segment (r-k-2) mod n from r-1 and add it in. The segment
 *     received at step k is the one sent at step k+1, and the last step
 *     receives segment r, so rank r ends owning the full sum of segment r,
 *     as dt_comm_reduce_scatter promises (the textbook numbering, sending
 *     segment r-k, would leave rank r owning segment r+1).
 *   all-gather step k (0 <= k < n-1): send segment (r-k) mod n to r+1,
 *     receive segment (r-k-1) mod n from r-1 straight into buf; the segment
 *     received at step k is the one sent at step k+1. Step k receives into
 *     the memory that reduce-scatter step k sent from, so each chunk's
 *     receive is posted only after that send has completed.
 *   With chunk_bytes > 0 each segment moves as chunks of at most that many
 *   bytes: a received chunk is reduced and sent on at once (as chunk c of
 *   the next step) while the receive of chunk c+1 is already posted, so the
 *   next rank works on chunk c while this one takes chunk c+1, and
 *   consecutive steps overlap. Reduce-scatter receives land
 *   in DT__RING_SLOTS reused slots of one chunk (cache-resident) instead of
 *   a whole segment. Without chunking each segment is one message. Both give
 *   the same bits: each element's sum is formed by the same chain of ranks
 *   in the same order, ((x[s+1] + x[s+2]) + ...) + x[s] for segment s.
 * Tree (recursive halving-doubling, Rabenseifner): p = largest power of
 *   two <= n. Fold: ranks r >= p send buf to r-p, which adds it in ("reduce").
 *   Halving over masks p/2, p/4, ..., 1 ("reduce-scatter"): exchange with
 *   r ^ mask, keep the lower half of the current block range if bit `mask`
 *   of r is clear (else the upper), add the partner's copy of the kept half;
 *   rank r ends owning block r of p. Doubling over masks 1, 2, ..., p/2
 *   ("all-gather"): exchange owned ranges with r ^ mask. Unfold: r < n-p
 *   sends the result to r+p ("broadcast"). Each block's sum is formed only
 *   by its final owner's chain and then copied, so it is identical everywhere.
 * Naive: every rank sends buf to rank 0, which adds them in rank order
 *   ((x0 + x1) + x2) + ..., then a binomial broadcast from 0.
 * Broadcast (binomial, relative rank v = (r - root) mod n, L = ceil(log2 n)
 *   rounds): v receives from v - 2^b (b = lowest set bit of v) in round
 *   L-1-b, then sends to v + 2^j for j = b-1 down to 0 (round L-1-j).
 * MPI: ops->allreduce_native (DT_ERR_UNSUPPORTED when the backend has none).
 *
 * Hooks: one call at the end of each step (t0..t1 spans the step): ring steps
 * (peer r+1, the bytes of the segment sent), tree and naive steps (a step
 * that only receives reports peer -1 and 0 bytes), broadcast rounds in
 * which the rank takes part, and one "allreduce" step for mpi (peer -1, the
 * buffer's bytes: whom MPI sends to is not known). n = 1: no calls.
 *
 * Tags: collectives use only tags DT__TAG_FIRST..DT__TAG_LAST (32704 ..
 * 32767, the top of the range every MPI guarantees; 32767 itself is the
 * clock synchronisation's, clock.c); user point-to-point messages must use
 * other tags. Each phase has its own tag; within a phase
 * messages between two ranks are matched in the order they were posted
 * (MPI's non-overtaking rule, which every backend must keep), and every
 * rank posts its receives in the order its peer posts the sends.
 *
 * Invariants: every rank ends with bit-identical results (each element's
 * sum is computed on exactly one rank and then copied); n = 1 and count 0
 * send nothing; zero-length pieces (count < n) are never sent, on both sides
 * alike. Scratch comes from the communicator's memory (ops->scratch_alloc;
 * malloc for host memory) once per call (tree: up to count floats, naive:
 * 2 x count on rank 0, unchunked ring: one segment; above glibc's mmap
 * threshold that means fresh pages, i.e. page faults, on every call), and
 * local sums go through ops->add when the backend has one. After
 * a failed call the communicator is in an unknown state (requests may be
 * pending). */
#include "dt_comm.h"
#include "dt_internal.h"
#include "dt_time.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    DT__TAG_FIRST = 32704,
    DT__TAG_RS = DT__TAG_FIRST, /* ring reduce-scatter */
    DT__TAG_AG,                 /* ring all-gather */
    DT__TAG_TREE_FOLD,          /* tree: extra rank -> core partner */
    DT__TAG_TREE_HALVE,         /* tree: recursive halving */
    DT__TAG_TREE_DOUBLE,        /* tree: recursive doubling */
    DT__TAG_TREE_UNFOLD,        /* tree: core partner -> extra rank */
    DT__TAG_NAIVE,              /* naive: everyone -> rank 0 */
    DT__TAG_BCAST,              /* binomial broadcast */
    DT__TAG_LAST = 32767
};

/* Ring reduce-scatter receive slots in flight when chunking. */
enum { DT__RING_SLOTS = 2 };

/* ---- small helpers ------------------------------------------------------- */

/* dst[i] += src[i]; one addition per element, so the bits do not depend on
 * how the loop is vectorised or chunked. In the communicator's memory (the
 * backend's add) when it has its own. */
static void dt__add_host(float *restrict dst, const float *restrict src, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

static dt_status dt__add(dt_comm *c, float *dst, const float *src, size_t n)
{
    if (c->ops->add) return c->ops->add(c, dst, src, n);
    dt__add_host(dst, src, n);
    return DT_OK;
}

/* Scratch of floats in the communicator's memory (NULL when out of memory). */
static float *dt__scratch(dt_comm *c, size_t floats)
{
    if (!c->ops->scratch_alloc) return malloc(floats * sizeof(float));
    void *p = NULL;
    return c->ops->scratch_alloc(c, floats * sizeof(float), &p) == DT_OK ? p : NULL;
}

static void dt__scratch_free(dt_comm *c, void *p)
{
    if (!p) return;
    if (c->ops->scratch_free) c->ops->scratch_free(c, p);
    else free(p);
}

static void dt__hook(const dt_collective_opts *o, const char *phase, int step, int peer, size_t bytes, int64_t t0)
{
    if (o && o->hook) o->hook(o->hook_ctx, phase, step, peer, bytes, t0, dt_time_ns());
}

static dt_status dt__check(const dt_comm *c, const float *buf, size_t count, const char *what)
{
    if (!c || !c->ops) return DT_FAIL(DT_ERR_INVALID, "%s: communicator is NULL", what);
    if (c->size < 1 || c->rank < 0 || c->rank >= c->size)
        return DT_FAIL(DT_ERR_INVALID, "%s: communicator has rank %d of size %d", what, c->rank, c->size);
    if (count > SIZE_MAX / sizeof(float) / 2) return DT_FAIL(DT_ERR_INVALID, "%s: count %zu is too large", what, count);
    if (count > 0 && !buf) return DT_FAIL(DT_ERR_INVALID, "%s: buf is NULL with count %zu", what, count);
    return DT_OK;
}

static int dt__mod(int a, int n) { return ((a % n) + n) % n; }

/* Send and receive in one exchange (receive posted first); zero lengths skip
 * their side, which the peer skips too since both compute the same ranges. */
static dt_status dt__sendrecv(dt_comm *c, const float *sbuf, size_t scount, int speer, float *rbuf, size_t rcount,
                              int rpeer, int tag)
{
    dt_comm_request *rq = NULL, *sq = NULL;
    if (rcount) DT_CHECK(c->ops->irecv(c, rbuf, rcount * sizeof(float), rpeer, tag, &rq));
    if (scount) DT_CHECK(c->ops->isend(c, sbuf, scount * sizeof(float), speer, tag, &sq));
    if (sq) DT_CHECK(c->ops->wait(c, sq));
    if (rq) DT_CHECK(c->ops->wait(c, rq));
    return DT_OK;
}

void dt_comm_segment(size_t count, int size, int r, size_t *offset, size_t *len)
{
    size_t n = size > 0 ? (size_t)size : 1, q = count / n, rem = count % n, i = r > 0 ? (size_t)r : 0;
    *len = q + (i < rem ? 1 : 0);
    *offset = i * q + DT_MIN(i, rem);
}

/* ---- ring ---------------------------------------------------------------- */

/* One ring run over global steps [j0, j1) of the 2(n-1): reduce-scatter is
 * [0, n-1), all-gather [n-1, 2n-2), allreduce both. */
typedef struct dt__ring {
    dt_comm *c;
    float *buf;
    size_t count;
    int n, r;
    size_t chunk;           /* elements per chunk (a whole segment when not chunking) */
    size_t mmax;            /* most chunks in one segment */
    dt_comm_request **sreq; /* [2(n-1)][mmax]: sends of each step, NULL once complete */
    dt_comm_request **rreq; /* [mmax]: receives of the current step */
    float *slots;           /* reduce-scatter receive slots: nslots x chunk */
    int nslots;
    const dt_collective_opts *opts;
} dt__ring;

static int dt__ring_send_seg(const dt__ring *R, int j)
{
    return j < R->n - 1 ? dt__mod(R->r - j - 1, R->n) : dt__mod(R->r - (j - (R->n - 1)), R->n);
}

static int dt__ring_recv_seg(const dt__ring *R, int j)
{
    return j < R->n - 1 ? dt__mod(R->r - j - 2, R->n) : dt__mod(R->r - (j - (R->n - 1)) - 1, R->n);
}

static size_t dt__nchunks(const dt__ring *R, size_t len) { return (len + R->chunk - 1) / R->chunk; }

/* isend chunk ci of segment seg as step j's send. */
static dt_status dt__ring_send_chunk(dt__ring *R, int j, int seg, size_t ci)
{
    size_t off, len;
    dt_comm_segment(R->count, R->n, seg, &off, &len);
    size_t a = ci * R->chunk, e = DT_MIN(len, a + R->chunk);
    int tag = j < R->n - 1 ? DT__TAG_RS : DT__TAG_AG;
    return R->c->ops->isend(R->c, R->buf + off + a, (e - a) * sizeof(float), (R->r + 1) % R->n, tag,
                            &R->sreq[(size_t)j * R->mmax + ci]);
}

static dt_status dt__ring_wait_send(dt__ring *R, int j, size_t ci)
{
    dt_comm_request **q = &R->sreq[(size_t)j * R->mmax + ci];
    if (!*q) return DT_OK;
    dt_status st = R->c->ops->wait(R->c, *q);
    *q = NULL;
    return st;
}

/* isend every chunk of step j's send segment straight from buf (the first
 * step of a run; later steps send what the step before received). */
static dt_status dt__ring_send_all(dt__ring *R, int j)
{
    size_t off, len;
    const int seg = dt__ring_send_seg(R, j);
    dt_comm_segment(R->count, R->n, seg, &off, &len);
    for (size_t ci = 0; ci < dt__nchunks(R, len); ci++) DT_CHECK(dt__ring_send_chunk(R, j, seg, ci));
    return DT_OK;
}

static dt_status dt__ring_run(dt__ring *R, int j0, int j1)
{
    const int n = R->n, prev = (R->r - 1 + n) % n, next = (R->r + 1) % n;
    dt_comm *c = R->c;
    for (int j = j0; j < j1; j++) {
        int64_t t0 = dt_time_ns();
        const int rs = j < n - 1, forward = j + 1 < j1;
        const int rseg = dt__ring_recv_seg(R, j);
        size_t roff, rlen;
        dt_comm_segment(R->count, n, rseg, &roff, &rlen);
        const size_t m = dt__nchunks(R, rlen);
        float *dst = R->buf + roff;
        if (rs) {
            // reduce-scatter step j: receive segment (r-j-2) from rank-1 chunk by chunk into the
            // slots, add each into buf and send it on at once to rank+1 as step j+1's chunk; this
            // step's own send, segment (r-j-1), left during step j-1 (or leaves now, on the first step)
            size_t posted = 0;
            for (; posted < m && posted < (size_t)R->nslots; posted++) {
                size_t a = posted * R->chunk, e = DT_MIN(rlen, a + R->chunk);
                DT_CHECK(c->ops->irecv(c, R->slots + (posted % R->nslots) * R->chunk, (e - a) * sizeof(float), prev,
                                       DT__TAG_RS, &R->rreq[posted]));
            }
            if (j == j0) DT_CHECK(dt__ring_send_all(R, j));
            for (size_t ci = 0; ci < m; ci++) {
                size_t a = ci * R->chunk, e = DT_MIN(rlen, a + R->chunk);
                float *slot = R->slots + (ci % R->nslots) * R->chunk;
                DT_CHECK(c->ops->wait(c, R->rreq[ci]));
                R->rreq[ci] = NULL;
                DT_CHECK(dt__add(c, dst + a, slot, e - a));
                if (forward) DT_CHECK(dt__ring_send_chunk(R, j + 1, rseg, ci));
                if (posted < m) {
                    size_t pa = posted * R->chunk, pe = DT_MIN(rlen, pa + R->chunk);
                    DT_CHECK(c->ops->irecv(c, slot, (pe - pa) * sizeof(float), prev, DT__TAG_RS, &R->rreq[posted]));
                    posted++;
                }
            }
        } else {
            // all-gather step k: receive segment (r-k-1) from rank-1 straight into buf (each chunk once
            // reduce-scatter step k's send of that memory has completed) and send it on to rank+1 as
            // step k+1's chunk; this step's own send, segment (r-k), left during the step before
            const int k = j - (n - 1);
            for (size_t ci = 0; ci < m; ci++) {
                size_t a = ci * R->chunk, e = DT_MIN(rlen, a + R->chunk);
                if (j0 == 0) DT_CHECK(dt__ring_wait_send(R, k, ci));
                DT_CHECK(c->ops->irecv(c, dst + a, (e - a) * sizeof(float), prev, DT__TAG_AG, &R->rreq[ci]));
            }
            if (j == j0) DT_CHECK(dt__ring_send_all(R, j));
            for (size_t ci = 0; ci < m; ci++) {
                DT_CHECK(c->ops->wait(c, R->rreq[ci]));
                R->rreq[ci] = NULL;
                if (forward) DT_CHECK(dt__ring_send_chunk(R, j + 1, rseg, ci));
            }
        }
        size_t soff, slen;
        dt_comm_segment(R->count, n, dt__ring_send_seg(R, j), &soff, &slen);
        dt__hook(R->opts, rs ? "reduce-scatter" : "all-gather", rs ? j : j - (n - 1), next, slen * sizeof(float), t0);
    }
    // the sends still pending complete as the next rank posts their receives in its own steps
    for (int j = j0; j < j1; j++)
        for (size_t ci = 0; ci < R->mmax; ci++) DT_CHECK(dt__ring_wait_send(R, j, ci));
    return DT_OK;
}

static dt_status dt__ring_collective(dt_comm *c, float *buf, size_t count, const dt_collective_opts *opts, int j0,
                                     int j1)
{
    const int n = c->size;
    if (n == 1 || count == 0) return DT_OK;
    dt__ring R = {.c = c, .buf = buf, .count = count, .n = n, .r = c->rank, .opts = opts};
    const size_t maxseg = (count + (size_t)n - 1) / (size_t)n; /* >= 1 */
    size_t chunk = opts && opts->chunk_bytes && !c->ops->grouped ? opts->chunk_bytes / sizeof(float) : maxseg;
    R.chunk = DT_MAX((size_t)1, DT_MIN(chunk, maxseg));
    R.mmax = (maxseg + R.chunk - 1) / R.chunk;
    R.nslots = R.mmax > 1 ? DT__RING_SLOTS : 1;
    dt_status st = DT_OK;
    R.sreq = calloc((size_t)(2 * (n - 1)) * R.mmax, sizeof *R.sreq);
    R.rreq = calloc(R.mmax, sizeof *R.rreq);
    R.slots = j0 < n - 1 ? dt__scratch(c, (size_t)R.nslots * R.chunk) : NULL;
    if (!R.sreq || !R.rreq || (j0 < n - 1 && !R.slots))
        st =
            DT_FAIL(DT_ERR_NOMEM, "ring collective: out of memory for %zu-element scratch", (size_t)R.nslots * R.chunk);
    else st = dt__ring_run(&R, j0, j1);
    free(R.sreq), free(R.rreq);
    dt__scratch_free(c, R.slots);
    return st;
}

dt_status dt_comm_reduce_scatter(dt_comm *c, float *buf, size_t count, const dt_collective_opts *opts)
{
    DT_CHECK(dt__check(c, buf, count, "reduce_scatter"));
    return dt__ring_collective(c, buf, count, opts, 0, c->size - 1);
}

dt_status dt_comm_all_gather(dt_comm *c, float *buf, size_t count, const dt_collective_opts *opts)
{
    DT_CHECK(dt__check(c, buf, count, "all_gather"));
    return dt__ring_collective(c, buf, count, opts, c->size - 1, 2 * (c->size - 1));
}

/* ---- broadcast ----------------------------------------------------------- */

static dt_status dt__broadcast(dt_comm *c, float *buf, size_t count, int root, const dt_collective_opts *opts)
{
    const int n = c->size, v = dt__mod(c->rank - root, n);
    if (n == 1 || count == 0) return DT_OK;
    int L = 0;
    while ((1 << L) < n) L++;
    // receive: from v - 2^b, b = lowest set bit of v (the root has none: it starts with the data)
    int b = L;
    if (v != 0) {
        b = __builtin_ctz((unsigned)v);
        int64_t t0 = dt_time_ns();
        dt_comm_request *q;
        DT_CHECK(c->ops->irecv(c, buf, count * sizeof(float), (v - (1 << b) + root) % n, DT__TAG_BCAST, &q));
        DT_CHECK(c->ops->wait(c, q));
        dt__hook(opts, "broadcast", L - 1 - b, -1, 0, t0);
    }
    // round L-1-j: send to v + 2^j for j = b-1 down to 0
    for (int j = b - 1; j >= 0; j--) {
        if (v + (1 << j) >= n) continue;
        int64_t t0 = dt_time_ns();
        int peer = (v + (1 << j) + root) % n;
        dt_comm_request *q;
        DT_CHECK(c->ops->isend(c, buf, count * sizeof(float), peer, DT__TAG_BCAST, &q));
        DT_CHECK(c->ops->wait(c, q));
        dt__hook(opts, "broadcast", L - 1 - j, peer, count * sizeof(float), t0);
    }
    return DT_OK;
}

dt_status dt_comm_broadcast(dt_comm *c, float *buf, size_t count, int root, const dt_collective_opts *opts)
{
    DT_CHECK(dt__check(c, buf, count, "broadcast"));
    if (root < 0 || root >= c->size)
        return DT_FAIL(DT_ERR_INVALID, "broadcast: root %d is not a rank of this %d-rank communicator", root, c->size);
    return dt__broadcast(c, buf, count, root, opts);
}

/* ---- tree (recursive halving-doubling) ---------------------------------- */

/* Elements of blocks [b0, b1) of p blocks. */
static void dt__blocks(size_t count, int p, int b0, int b1, size_t *off, size_t *len)
{
    size_t o1, l1;
    dt_comm_segment(count, p, b0, off, len);
    dt_comm_segment(count, p, b1 - 1, &o1, &l1);
    *len = o1 + l1 - *off;
}

static dt_status dt__tree_core(dt_comm *c, float *buf, size_t count, int p, float *scratch,
                               const dt_collective_opts *opts)
{
    const int r = c->rank;
    int blo = 0, bhi = p, step = 0;
    // halving: exchange with r ^ mask; keep the half of [blo, bhi) on r's side of bit `mask`
    for (int mask = p / 2; mask >= 1; mask /= 2, step++) {
        int64_t t0 = dt_time_ns();
        const int partner = r ^ mask, mid = (blo + bhi) / 2;
        int klo = blo, khi = mid, slo = mid, shi = bhi;
        if (r & mask) klo = mid, khi = bhi, slo = blo, shi = mid;
        size_t koff, klen, soff, slen;
        dt__blocks(count, p, klo, khi, &koff, &klen);
        dt__blocks(count, p, slo, shi, &soff, &slen);
        DT_CHECK(dt__sendrecv(c, buf + soff, slen, partner, scratch, klen, partner, DT__TAG_TREE_HALVE));
        DT_CHECK(dt__add(c, buf + koff, scratch, klen));
        blo = klo, bhi = khi;
        dt__hook(opts, "reduce-scatter", step, partner, slen * sizeof(float), t0);
    }
    // doubling: rank r owns blocks [r & ~(mask-1), +mask); swap with r ^ mask
    step = 0;
    for (int mask = 1; mask < p; mask *= 2, step++) {
        int64_t t0 = dt_time_ns();
        const int partner = r ^ mask;
        size_t moff, mlen, poff, plen;
        int mb = r & ~(mask - 1), pb = partner & ~(mask - 1);
        dt__blocks(count, p, mb, mb + mask, &moff, &mlen);
        dt__blocks(count, p, pb, pb + mask, &poff, &plen);
        DT_CHECK(dt__sendrecv(c, buf + moff, mlen, partner, buf + poff, plen, partner, DT__TAG_TREE_DOUBLE));
        dt__hook(opts, "all-gather", step, partner, mlen * sizeof(float), t0);
    }
    return DT_OK;
}

static dt_status dt__allreduce_tree(dt_comm *c, float *buf, size_t count, const dt_collective_opts *opts)
{
    const int n = c->size, r = c->rank;
    int p = 1;
    while (p * 2 <= n) p *= 2;
    const size_t bytes = count * sizeof(float);
    dt_comm_request *q;
    if (r >= p) {
        // extra rank: fold into r-p, wait for the result back
        int64_t t0 = dt_time_ns();
        DT_CHECK(c->ops->isend(c, buf, bytes, r - p, DT__TAG_TREE_FOLD, &q));
        DT_CHECK(c->ops->wait(c, q));
        dt__hook(opts, "reduce", 0, r - p, bytes, t0);
        t0 = dt_time_ns();
        DT_CHECK(c->ops->irecv(c, buf, bytes, r - p, DT__TAG_TREE_UNFOLD, &q));
        DT_CHECK(c->ops->wait(c, q));
        dt__hook(opts, "broadcast", 0, -1, 0, t0);
        return DT_OK;
    }
    // scratch: the fold receives a whole buffer; a halving step keeps at most p/2 blocks of at
    // most ceil(count/p) elements, <= count/2 + p/2
    float *scratch = dt__scratch(c, r < n - p ? count : count / 2 + (size_t)p);
    if (!scratch) return DT_FAIL(DT_ERR_NOMEM, "tree allreduce: out of memory for %zu-element scratch", count);
    dt_status st = DT_OK;
    if (r < n - p) {
        // fold: add the extra rank r+p's buffer
        int64_t t0 = dt_time_ns();
        DT_CHECK_GOTO(c->ops->irecv(c, scratch, bytes, r + p, DT__TAG_TREE_FOLD, &q), st, done);
        DT_CHECK_GOTO(c->ops->wait(c, q), st, done);
        DT_CHECK_GOTO(dt__add(c, buf, scratch, count), st, done);
        dt__hook(opts, "reduce", 0, -1, 0, t0);
    }
    DT_CHECK_GOTO(dt__tree_core(c, buf, count, p, scratch, opts), st, done);
    if (r < n - p) {
        // unfold: the extra rank gets the result
        int64_t t0 = dt_time_ns();
        DT_CHECK_GOTO(c->ops->isend(c, buf, bytes, r + p, DT__TAG_TREE_UNFOLD, &q), st, done);
        DT_CHECK_GOTO(c->ops->wait(c, q), st, done);
        dt__hook(opts, "broadcast", 0, r + p, bytes, t0);
    }
done:
    dt__scratch_free(c, scratch);
    return st;
}

/* ---- naive --------------------------------------------------------------- */

static dt_status dt__allreduce_naive(dt_comm *c, float *buf, size_t count, const dt_collective_opts *opts)
{
    const int n = c->size;
    const size_t bytes = count * sizeof(float);
    dt_comm_request *q;
    if (c->rank != 0) {
        int64_t t0 = dt_time_ns();
        DT_CHECK(c->ops->isend(c, buf, bytes, 0, DT__TAG_NAIVE, &q));
        DT_CHECK(c->ops->wait(c, q));
        dt__hook(opts, "reduce", 0, 0, bytes, t0);
        return dt__broadcast(c, buf, count, 0, opts);
    }
    // rank 0: receive rank i+1 into one slot while adding rank i from the other, in rank order
    float *slots = dt__scratch(c, 2 * count);
    if (!slots) return DT_FAIL(DT_ERR_NOMEM, "naive allreduce: out of memory for 2 x %zu-element scratch", count);
    dt_status st = DT_OK;
    dt_comm_request *rq[2] = {NULL, NULL};
    DT_CHECK_GOTO(c->ops->irecv(c, slots + count, bytes, 1, DT__TAG_NAIVE, &rq[1]), st, done);
    for (int i = 1; i < n; i++) {
        int64_t t0 = dt_time_ns();
        if (i + 1 < n)
            DT_CHECK_GOTO(
                c->ops->irecv(c, slots + (size_t)((i + 1) % 2) * count, bytes, i + 1, DT__TAG_NAIVE, &rq[(i + 1) % 2]),
                st, done);
        st = c->ops->wait(c, rq[i % 2]);
        rq[i % 2] = NULL;
        if (st != DT_OK) goto done;
        DT_CHECK_GOTO(dt__add(c, buf, slots + (size_t)(i % 2) * count, count), st, done);
        dt__hook(opts, "reduce", i - 1, -1, 0, t0);
    }
    st = dt__broadcast(c, buf, count, 0, opts);
done:
    dt__scratch_free(c, slots);
    return st;
}

/* ---- allreduce ----------------------------------------------------------- */

dt_status dt_comm_allreduce(dt_comm *c, float *buf, size_t count, dt_allreduce_algo algo,
                            const dt_collective_opts *opts)
{
    DT_CHECK(dt__check(c, buf, count, "allreduce"));
    switch (algo) {
    case DT_ALLREDUCE_RING: return dt__ring_collective(c, buf, count, opts, 0, 2 * (c->size - 1));
    case DT_ALLREDUCE_TREE:
        if (c->size == 1 || count == 0) return DT_OK;
        return dt__allreduce_tree(c, buf, count, opts);
    case DT_ALLREDUCE_NAIVE:
        if (c->size == 1 || count == 0) return DT_OK;
        return dt__allreduce_naive(c, buf, count, opts);
    case DT_ALLREDUCE_MPI:
    case DT_ALLREDUCE_NCCL: {
        /* the library's own: MPI_Allreduce on host communicators, ncclAllReduce on "nccl" */
        const int on_nccl = c->ops->name && strcmp(c->ops->name, "nccl") == 0;
        if (!c->ops->allreduce_native || on_nccl != (algo == DT_ALLREDUCE_NCCL))
            return DT_FAIL(DT_ERR_UNSUPPORTED,
                           "allreduce algorithm '%s': the '%s' communicator has no such native allreduce (mpi: host "
                           "memory; nccl: --device cuda)",
                           algo == DT_ALLREDUCE_NCCL ? "nccl" : "mpi", c->ops->name ? c->ops->name : "?");
        int64_t t0 = dt_time_ns();
        DT_CHECK(c->ops->allreduce_native(c, buf, count));
        dt__hook(opts, "allreduce", 0, -1, count * sizeof(float), t0);
        return DT_OK;
    }
    }
    return DT_FAIL(DT_ERR_INVALID, "allreduce: unknown algorithm %d", (int)algo);
}

static const char *const dt__algo_names[] = {"ring", "tree", "naive", "mpi", "nccl"};

dt_status dt_allreduce_algo_parse(const char *s, dt_allreduce_algo *out)
{
    for (int i = 0; s && i < 5; i++)
        if (strcmp(s, dt__algo_names[i]) == 0) {
            *out = (dt_allreduce_algo)i;
            return DT_OK;
        }
    return DT_FAIL(DT_ERR_INVALID, "allreduce algorithm '%s': expected ring, tree, naive, mpi or nccl",
                   s ? s : "(null)");
}

const char *dt_allreduce_algo_name(dt_allreduce_algo a) { return (unsigned)a < 5 ? dt__algo_names[a] : "unknown"; }

dt_status dt_comm_sum_doubles(dt_comm *c, double *v, size_t n)
{
    if (!c || (!v && n)) return DT_FAIL(DT_ERR_INVALID, "sum of doubles: NULL communicator or values");
    if (n == 0 || c->size == 1) return DT_OK;
    const size_t R = (size_t)c->size;
    if (n > SIZE_MAX / (2 * R)) return DT_FAIL(DT_ERR_INVALID, "sum of doubles: %zu values on %zu ranks", n, R);
    float *f = calloc(2 * R * n, sizeof *f);
    if (!f) return DT_FAIL(DT_ERR_NOMEM, "sum of doubles: out of memory for %zu values", n);
    float *mine = f + 2 * n * (size_t)c->rank;
    for (size_t i = 0; i < n; i++) {
        mine[2 * i] = (float)v[i];
        mine[2 * i + 1] = (float)(v[i] - (double)(float)v[i]);
    }
    dt_status st = dt_comm_allreduce(c, f, 2 * R * n, DT_ALLREDUCE_RING, NULL); /* one writer per slot: exact */
    for (size_t i = 0; st == DT_OK && i < n; i++) {
        double s = 0.0;
        for (size_t r = 0; r < R; r++) s += (double)f[2 * n * r + 2 * i] + (double)f[2 * n * r + 2 * i + 1];
        v[i] = s;
    }
    free(f);
    return st;
}
