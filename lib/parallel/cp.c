/* cp.c: context parallelism's attention (cp.h): the ring (p2p), the
 * all-gather and the all-to-all (a2a) exchanges, each built on the
 * backend's chunk attention (dt_backend.h's attention_chunk_*).
 *
 * Shapes on one call: the rank's rows Nl = B*Tl (Tl = T/c), two parts of
 * Nc = B*Tc rows (Tc = Tl/2), chunk-major (gpt_layers.h's dt__cpos); qkv
 * (Nl, 3C) [q | k | v], out (Nl, C); C and NH are the rank's attention
 * width and heads (a tensor shard's). A key/value block is (Nl, 2C) [k | v]
 * in the same row order. lse is the exchange's own: p2p and allgather
 * (part, B, NH, Tc); a2a (rank, part, B, NH/c, Tc), the rows of each rank
 * for this rank's heads. Either is B*NH*Tl floats, as the block sizes it.
 *
 * Which chunk pairs: queries of global chunk ga against keys of chunk gb,
 * all keys where ga > gb, causal where ga == gb, none where ga < gb. With
 * chunks i and 2c-1-i on rank i every ring step costs each rank two
 * chunk pairs' work (the causal diagonal pairs on step 0 make up for the
 * one pair it skips), the balance the layout is for.
 *
 * Invariants: the workspace (one buffer, sized at creation for the largest
 * micro-batch) holds nothing between calls; every rank of the group makes
 * the same calls in the same order (the blocks run in step), so the
 * point-to-point messages pair up by tag in order. */
#include "cp.h"

#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "dt_time.h"

enum { DT__CP_TAG_KV = 101, DT__CP_TAG_DKV = 102, DT__CP_TAG_A2A = 103 };

struct dt__cp {
    dt_comm *comm; /* the context-parallel group (not owned) */
    int c, rank;
    dt_cp_comm type;
    dt_backend *be;
    int B, T, C, NH; /* the largest micro-batch, the whole sequence, the rank's width and heads */
    dt_buffer ws;    /* the workspace */
    float *w[5];     /* its parts (the type's) */
    dt_comm_request **reqs; /* (2c) an all-to-all's */
    dt__attn attn;
    long long exchanges, bytes;
    void (*event)(void *ctx, int kind, char pass, int step, int from, size_t bytes, int64_t t0, int64_t t1);
    void *event_ctx;
};

dt_status dt_cp_comm_parse(const char *s, dt_cp_comm *out)
{
    static const char *const names[] = {"p2p", "a2a", "allgather"};
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, names[i])) {
            *out = (dt_cp_comm)i;
            return DT_OK;
        }
    return DT_FAIL(DT_ERR_INVALID, "--cp-comm-type '%s': expected p2p, a2a or allgather", s ? s : "(null)");
}

const char *dt_cp_comm_name(dt_cp_comm c)
{
    return c == DT_CP_A2A ? "a2a" : c == DT_CP_ALLGATHER ? "allgather" : "p2p";
}

static void dt__cp_note(dt__cp *cp, int kind, char pass, int step, int from, size_t bytes, int64_t t0)
{
    cp->exchanges++;
    cp->bytes += (long long)bytes;
    if (cp->event) cp->event(cp->event_ctx, kind, pass, step, from, bytes, t0, dt_time_ns());
}

/* ---- the chunk pairs ------------------------------------------------------- */

/* Rank qi's two query parts (q, rows ldq apart) against rank kj's two
 * key/value parts (k, v, rows ldkv apart): the pairs that see each other,
 * merged into out (rows C apart) and lse part by part; have[a]: part a has
 * a result already. */
static dt_status dt__cp_pairs_forward(const dt__cp *cp, dt_backend *be, int qi, int kj, float *out, float *lse,
                                      const float *q, int ldq, const float *k, const float *v, int ldkv, int B, int Tc,
                                      int C, int NH, int have[2])
{
    const size_t Nc = (size_t)B * Tc, lc = (size_t)B * NH * Tc;
    const dt__cpos Q = {cp->c, qi}, K = {cp->c, kj};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            const int ga = dt__cpos_chunk(Q, a), gb = dt__cpos_chunk(K, b);
            if (ga < gb) continue;
            DT_CHECK(be->attention_chunk_forward(be, out + a * Nc * C, lse + a * lc, q + a * Nc * ldq, ldq,
                                                 k + b * Nc * ldkv, v + b * Nc * ldkv, ldkv, B, Tc, C, NH, ga == gb,
                                                 have[a]));
            have[a] = 1;
        }
    return DT_OK;
}

/* Their backward: dq (rows ldq apart) and dk, dv (ldkv) accumulate. */
static dt_status dt__cp_pairs_backward(const dt__cp *cp, dt_backend *be, int qi, int kj, float *dq, float *dk,
                                       float *dv, const float *dout, const float *out, const float *lse, const float *q,
                                       int ldq, const float *k, const float *v, int ldkv, int B, int Tc, int C, int NH)
{
    const size_t Nc = (size_t)B * Tc, lc = (size_t)B * NH * Tc;
    const dt__cpos Q = {cp->c, qi}, K = {cp->c, kj};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            const int ga = dt__cpos_chunk(Q, a), gb = dt__cpos_chunk(K, b);
            if (ga < gb) continue;
            DT_CHECK(be->attention_chunk_backward(be, dq + a * Nc * ldq, dk + b * Nc * ldkv, dv + b * Nc * ldkv,
                                                  dout + a * Nc * C, out + a * Nc * C, lse + a * lc, q + a * Nc * ldq,
                                                  ldq, k + b * Nc * ldkv, v + b * Nc * ldkv, ldkv, B, Tc, C, NH,
                                                  ga == gb));
        }
    return DT_OK;
}

/* ---- messages --------------------------------------------------------------- */

/* send(n) to the next rank of the ring, recv(n) from the previous, both posted. */
static dt_status dt__cp_post(dt__cp *cp, const float *send, float *recv, size_t n, int tag, dt_comm_request **sq,
                             dt_comm_request **rq)
{
    dt_comm *c = cp->comm;
    const int next = (cp->rank + 1) % cp->c, prev = (cp->rank + cp->c - 1) % cp->c;
    DT_CHECK(cp->be->synchronize(cp->be)); /* what was written is in memory before it leaves */
    DT_CHECK(c->ops->irecv(c, recv, n * sizeof(float), prev, tag, rq));
    return c->ops->isend(c, send, n * sizeof(float), next, tag, sq);
}

static dt_status dt__cp_wait(dt__cp *cp, dt_comm_request **sq, dt_comm_request **rq)
{
    dt_comm *c = cp->comm;
    const dt_status a = *sq ? c->ops->wait(c, *sq) : DT_OK, b = *rq ? c->ops->wait(c, *rq) : DT_OK;
    *sq = *rq = NULL;
    return a != DT_OK ? a : b;
}

/* recv block j (blk floats) = rank j's send block i, for every j. */
static dt_status dt__cp_alltoall(dt__cp *cp, char pass, const float *send, float *recv, size_t blk)
{
    dt_comm *c = cp->comm;
    const int64_t t0 = dt_time_ns();
    DT_CHECK(cp->be->synchronize(cp->be));
    int n = 0;
    dt_status st = DT_OK;
    for (int j = 0; j < cp->c && st == DT_OK; j++) {
        if (j == cp->rank) continue;
        st = c->ops->irecv(c, recv + j * blk, blk * sizeof(float), j, DT__CP_TAG_A2A, &cp->reqs[n]);
        if (st == DT_OK) n++;
        if (st == DT_OK) st = c->ops->isend(c, send + j * blk, blk * sizeof(float), j, DT__CP_TAG_A2A, &cp->reqs[n]);
        if (st == DT_OK) n++;
    }
    if (st == DT_OK)
        st = cp->be->copy(cp->be, recv + cp->rank * blk, send + cp->rank * blk, blk * sizeof(float), DT_COPY_D2D);
    for (int k = 0; k < n; k++) {
        const dt_status w = c->ops->wait(c, cp->reqs[k]);
        if (st == DT_OK) st = w;
    }
    DT_CHECK(st);
    dt__cp_note(cp, DT__CP_ALLTOALL, pass, -1, -1, (size_t)(cp->c - 1) * blk * sizeof(float), t0);
    return DT_OK;
}

/* ---- p2p: the ring ------------------------------------------------------------ */

static dt_status dt__cp_ring_forward(dt__cp *cp, dt_backend *be, float *out, float *lse, const float *qkv, int B,
                                     int Tl, int C, int NH)
{
    const int c = cp->c, i = cp->rank, Tc = Tl / 2, C2 = 2 * C, C3 = 3 * C;
    const size_t Nl = (size_t)B * Tl, kvn = Nl * C2;
    float *kv[2] = {cp->w[0], cp->w[1]};
    DT_CHECK(be->copy2d(be, kv[0], C2, qkv + C, C3, Nl, C2));
    int have[2] = {0, 0};
    for (int s = 0; s < c; s++) { /* step s: the block of rank i - s, the next one on its way */
        const float *cur = kv[s & 1];
        dt_comm_request *sq = NULL, *rq = NULL;
        const int64_t t0 = dt_time_ns();
        if (s < c - 1) DT_CHECK(dt__cp_post(cp, cur, kv[(s + 1) & 1], kvn, DT__CP_TAG_KV, &sq, &rq));
        const dt_status st =
            dt__cp_pairs_forward(cp, be, i, (i - s + c) % c, out, lse, qkv, C3, cur, cur + C, C2, B, Tc, C, NH, have);
        if (s < c - 1) {
            DT_CHECK(dt__cp_wait(cp, &sq, &rq));
            dt__cp_note(cp, DT__CP_RING, 'F', s, (i - s - 1 + 2 * c) % c, kvn * sizeof(float), t0);
        }
        DT_CHECK(st);
    }
    return DT_OK;
}

static dt_status dt__cp_ring_backward(dt__cp *cp, dt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                      const float *out, const float *lse, int B, int Tl, int C, int NH)
{
    const int c = cp->c, i = cp->rank, Tc = Tl / 2, C2 = 2 * C, C3 = 3 * C;
    const size_t Nl = (size_t)B * Tl, kvn = Nl * C2;
    float *kv[2] = {cp->w[0], cp->w[1]}, *dkv[2] = {cp->w[2], cp->w[3]};
    DT_CHECK(be->memset_zero(be, dqkv, Nl * C3 * sizeof(float)));
    DT_CHECK(be->copy2d(be, kv[0], C2, qkv + C, C3, Nl, C2));
    DT_CHECK(be->memset_zero(be, dkv[0], kvn * sizeof(float)));
    for (int s = 0; s < c; s++) {
        /* the block of rank i - s with the gradient the ranks before added */
        const float *cur = kv[s & 1];
        float *dcur = dkv[s & 1];
        dt_comm_request *sq = NULL, *rq = NULL;
        int64_t t0 = dt_time_ns();
        if (s < c - 1) DT_CHECK(dt__cp_post(cp, cur, kv[(s + 1) & 1], kvn, DT__CP_TAG_KV, &sq, &rq));
        dt_status st = dt__cp_pairs_backward(cp, be, i, (i - s + c) % c, dqkv, dcur, dcur + C, dout, out, lse, qkv,
                                             C3, cur, cur + C, C2, B, Tc, C, NH);
        if (s < c - 1) {
            const dt_status w = dt__cp_wait(cp, &sq, &rq);
            if (st == DT_OK) st = w;
        }
        DT_CHECK(st);
        /* the gradient goes on with its block; the last step's arrives home */
        DT_CHECK(dt__cp_post(cp, dcur, dkv[(s + 1) & 1], kvn, DT__CP_TAG_DKV, &sq, &rq));
        DT_CHECK(dt__cp_wait(cp, &sq, &rq));
        dt__cp_note(cp, DT__CP_RING, 'B', s, (i - s - 1 + 2 * c) % c, (s < c - 1 ? 2 : 1) * kvn * sizeof(float), t0);
    }
    /* this rank's own keys' and values' gradients, from every rank */
    return be->copy2d(be, dqkv + C, C3, dkv[c & 1], C2, Nl, C2);
}

/* ---- allgather ---------------------------------------------------------------- */

/* Every rank's key/value block into w[0] (c blocks). */
static dt_status dt__cp_gather_kv(dt__cp *cp, dt_backend *be, char pass, const float *qkv, size_t Nl, int C)
{
    const size_t kvn = Nl * 2 * C;
    float *all = cp->w[0];
    DT_CHECK(be->copy2d(be, all + cp->rank * kvn, 2 * (size_t)C, qkv + C, 3 * (size_t)C, Nl, 2 * (size_t)C));
    DT_CHECK(be->synchronize(be));
    const int64_t t0 = dt_time_ns();
    DT_CHECK(dt_comm_all_gather(cp->comm, all, kvn * cp->c, NULL));
    dt__cp_note(cp, DT__CP_GATHER, pass, -1, -1, (size_t)(cp->c - 1) * kvn * sizeof(float), t0);
    return DT_OK;
}

static dt_status dt__cp_gather_forward(dt__cp *cp, dt_backend *be, float *out, float *lse, const float *qkv, int B,
                                       int Tl, int C, int NH)
{
    const size_t Nl = (size_t)B * Tl, kvn = Nl * 2 * C;
    DT_CHECK(dt__cp_gather_kv(cp, be, 'F', qkv, Nl, C));
    int have[2] = {0, 0};
    for (int j = 0; j < cp->c; j++) {
        const float *kv = cp->w[0] + j * kvn;
        DT_CHECK(dt__cp_pairs_forward(cp, be, cp->rank, j, out, lse, qkv, 3 * C, kv, kv + C, 2 * C, B, Tl / 2, C, NH,
                                      have));
    }
    return DT_OK;
}

static dt_status dt__cp_gather_backward(dt__cp *cp, dt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                        const float *out, const float *lse, int B, int Tl, int C, int NH)
{
    const size_t Nl = (size_t)B * Tl, kvn = Nl * 2 * C;
    float *dall = cp->w[1];
    DT_CHECK(dt__cp_gather_kv(cp, be, 'B', qkv, Nl, C));
    DT_CHECK(be->memset_zero(be, dqkv, Nl * 3 * C * sizeof(float)));
    DT_CHECK(be->memset_zero(be, dall, kvn * cp->c * sizeof(float)));
    for (int j = 0; j < cp->c; j++) {
        const float *kv = cp->w[0] + j * kvn;
        float *dkv = dall + j * kvn;
        DT_CHECK(dt__cp_pairs_backward(cp, be, cp->rank, j, dqkv, dkv, dkv + C, dout, out, lse, qkv, 3 * C, kv, kv + C,
                                       2 * C, B, Tl / 2, C, NH));
    }
    DT_CHECK(be->synchronize(be));
    const int64_t t0 = dt_time_ns();
    DT_CHECK(dt_comm_reduce_scatter(cp->comm, dall, kvn * cp->c, NULL));
    dt__cp_note(cp, DT__CP_SCATTER, 'B', -1, -1, (size_t)(cp->c - 1) * kvn * sizeof(float), t0);
    return be->copy2d(be, dqkv + C, 3 * (size_t)C, dall + cp->rank * kvn, 2 * (size_t)C, Nl, 2 * (size_t)C);
}

/* ---- a2a: Ulysses --------------------------------------------------------------- */

/* x (Nl rows, parts of width C, ldx apart) to head-split form: block j of
 * dst (Nl rows of parts * C/c, contiguous) holds head group j of every
 * part, sent to rank j; recv gets every rank's block for this rank's heads. */
static dt_status dt__cp_to_heads(dt__cp *cp, dt_backend *be, char pass, const float *x, size_t ldx, int parts, int C,
                                 size_t Nl, float *stage, float *recv)
{
    const size_t W = (size_t)C / (size_t)cp->c, blk = Nl * parts * W;
    for (int j = 0; j < cp->c; j++)
        for (int p = 0; p < parts; p++)
            DT_CHECK(be->copy2d(be, stage + j * blk + p * W, parts * W, x + (size_t)p * C + j * W, ldx, Nl, W));
    return dt__cp_alltoall(cp, pass, stage, recv, blk);
}

/* The inverse: block j of src (this rank's heads of rank j's rows) back to
 * rank j, and every rank's head group j of this rank's rows into x. */
static dt_status dt__cp_from_heads(dt__cp *cp, dt_backend *be, char pass, const float *src, float *stage, float *x,
                                   size_t ldx, int parts, int C, size_t Nl)
{
    const size_t W = (size_t)C / (size_t)cp->c, blk = Nl * parts * W;
    DT_CHECK(dt__cp_alltoall(cp, pass, src, stage, blk));
    for (int j = 0; j < cp->c; j++)
        for (int p = 0; p < parts; p++)
            DT_CHECK(be->copy2d(be, x + (size_t)p * C + j * W, ldx, stage + j * blk + p * W, parts * W, Nl, W));
    return DT_OK;
}

static dt_status dt__cp_a2a_forward(dt__cp *cp, dt_backend *be, float *out, float *lse, const float *qkv, int B, int Tl,
                                    int C, int NH)
{
    const int c = cp->c, W = C / c, H = NH / c, Tc = Tl / 2;
    const size_t Nl = (size_t)B * Tl, lr = (size_t)B * H * Tl; /* lse floats of one rank's rows */
    float *stage = cp->w[0], *hq = cp->w[1], *ho = cp->w[2];
    DT_CHECK(dt__cp_to_heads(cp, be, 'F', qkv, 3 * (size_t)C, 3, C, Nl, stage, hq));
    for (int jq = 0; jq < c; jq++) { /* rank jq's rows for this rank's heads, against every rank's keys */
        int have[2] = {0, 0};
        const float *q = hq + jq * Nl * 3 * W;
        for (int jk = 0; jk < c; jk++) {
            const float *k = hq + jk * Nl * 3 * W + W;
            DT_CHECK(dt__cp_pairs_forward(cp, be, jq, jk, ho + jq * Nl * W, lse + jq * lr, q, 3 * W, k, k + W, 3 * W,
                                          B, Tc, W, H, have));
        }
    }
    return dt__cp_from_heads(cp, be, 'F', ho, stage, out, (size_t)C, 1, C, Nl);
}

static dt_status dt__cp_a2a_backward(dt__cp *cp, dt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                     const float *out, const float *lse, int B, int Tl, int C, int NH)
{
    const int c = cp->c, W = C / c, H = NH / c, Tc = Tl / 2;
    const size_t Nl = (size_t)B * Tl, lr = (size_t)B * H * Tl;
    float *stage = cp->w[0], *hq = cp->w[1], *ho = cp->w[2], *hdo = cp->w[3], *hdq = cp->w[4];
    /* the head-split tensors again: the block keeps its rows' only */
    DT_CHECK(dt__cp_to_heads(cp, be, 'B', qkv, 3 * (size_t)C, 3, C, Nl, stage, hq));
    DT_CHECK(dt__cp_to_heads(cp, be, 'B', out, (size_t)C, 1, C, Nl, stage, ho));
    DT_CHECK(dt__cp_to_heads(cp, be, 'B', dout, (size_t)C, 1, C, Nl, stage, hdo));
    DT_CHECK(be->memset_zero(be, hdq, Nl * 3 * C * sizeof(float)));
    for (int jq = 0; jq < c; jq++)
        for (int jk = 0; jk < c; jk++) {
            const size_t qo = jq * Nl * 3 * W, ko = jk * Nl * 3 * W + W;
            DT_CHECK(dt__cp_pairs_backward(cp, be, jq, jk, hdq + qo, hdq + ko, hdq + ko + W, hdo + jq * Nl * W,
                                           ho + jq * Nl * W, lse + jq * lr, hq + qo, 3 * W, hq + ko, hq + ko + W,
                                           3 * W, B, Tc, W, H));
        }
    return dt__cp_from_heads(cp, be, 'B', hdq, stage, dqkv, 3 * (size_t)C, 3, C, Nl);
}

/* ---- the hook ---------------------------------------------------------------------- */

static dt_status dt__cp_forward(void *ctx, dt_backend *be, float *out, float *lse, const float *qkv, int B, int T,
                                int C, int NH)
{
    dt__cp *cp = ctx;
    if (B > cp->B || T * cp->c > cp->T || T % 2 || C != cp->C || NH != cp->NH)
        return DT_FAIL(DT_ERR_INVALID, "context-parallel attention: B %d, T %d, C %d, NH %d for an exchange sized "
                                       "for B %d, T %d, C %d, NH %d",
                       B, T * cp->c, C, NH, cp->B, cp->T, cp->C, cp->NH);
    switch (cp->type) {
    case DT_CP_A2A: return dt__cp_a2a_forward(cp, be, out, lse, qkv, B, T, C, NH);
    case DT_CP_ALLGATHER: return dt__cp_gather_forward(cp, be, out, lse, qkv, B, T, C, NH);
    case DT_CP_P2P: break;
    }
    return dt__cp_ring_forward(cp, be, out, lse, qkv, B, T, C, NH);
}

static dt_status dt__cp_backward(void *ctx, dt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                 const float *out, const float *lse, int B, int T, int C, int NH)
{
    dt__cp *cp = ctx;
    if (B > cp->B || T * cp->c > cp->T || T % 2 || C != cp->C || NH != cp->NH)
        return DT_FAIL(DT_ERR_INVALID, "context-parallel attention backward: B %d, T %d, C %d, NH %d for an exchange "
                                       "sized for B %d, T %d, C %d, NH %d",
                       B, T * cp->c, C, NH, cp->B, cp->T, cp->C, cp->NH);
    switch (cp->type) {
    case DT_CP_A2A: return dt__cp_a2a_backward(cp, be, dqkv, dout, qkv, out, lse, B, T, C, NH);
    case DT_CP_ALLGATHER: return dt__cp_gather_backward(cp, be, dqkv, dout, qkv, out, lse, B, T, C, NH);
    case DT_CP_P2P: break;
    }
    return dt__cp_ring_backward(cp, be, dqkv, dout, qkv, out, lse, B, T, C, NH);
}

/* ---- creation ------------------------------------------------------------------------ */

dt_status dt__cp_create(dt_comm *comm, dt_cp_comm type, dt_backend *be, int B, int T, int C, int NH, dt__cp **out)
{
    *out = NULL;
    const int c = comm->size;
    if (!be->attention_chunk_forward)
        return DT_FAIL(DT_ERR_INVALID, "--context-parallel-size %d: the %s backend has no chunk attention yet "
                                       "(context parallelism runs on the CPU backend; docs/cuda.md)",
                       c, be->name);
    if (c < 2 || T % (2 * c))
        return DT_FAIL(DT_ERR_INVALID, "--context-parallel-size %d: --seq-length %d does not split into %d equal "
                                       "chunks (2 per rank)",
                       c, T, 2 * c);
    if (type == DT_CP_A2A && (NH % c || C % c))
        return DT_FAIL(DT_ERR_INVALID, "--cp-comm-type a2a: --context-parallel-size %d does not divide the %d "
                                       "attention heads of a tensor rank",
                       c, NH);
    dt__cp *cp = calloc(1, sizeof *cp);
    if (!cp) return DT_FAIL(DT_ERR_NOMEM, "context parallelism: out of memory");
    *cp = (dt__cp){.comm = comm, .c = c, .rank = comm->rank, .type = type, .be = be, .B = B, .T = T, .C = C, .NH = NH};
    cp->attn = (dt__attn){.forward = dt__cp_forward, .backward = dt__cp_backward, .ctx = cp};
    const size_t Nl = (size_t)B * (size_t)(T / c), pad = 16;
    size_t part[5] = {0, 0, 0, 0, 0};
    switch (type) {
    case DT_CP_P2P: /* two key/value blocks and two gradient blocks (double buffers) */
        for (int k = 0; k < 4; k++) part[k] = Nl * 2 * C;
        break;
    case DT_CP_ALLGATHER: /* every rank's block, and their gradients */
        part[0] = part[1] = (size_t)c * Nl * 2 * C;
        break;
    case DT_CP_A2A: /* staging, head-split qkv, out, dout, dqkv */
        part[0] = part[1] = part[4] = Nl * 3 * C;
        part[2] = part[3] = Nl * C;
        break;
    }
    size_t total = 0;
    for (int k = 0; k < 5; k++) total += (part[k] + pad - 1) / pad * pad;
    dt_status st = dt_buffer_alloc(&cp->ws, be, (total ? total : 1) * sizeof(float));
    cp->reqs = calloc(2 * (size_t)c, sizeof *cp->reqs);
    if (st == DT_OK && !cp->reqs) st = DT_FAIL(DT_ERR_NOMEM, "context parallelism: out of memory");
    if (st != DT_OK) {
        dt__cp_free(cp);
        return st;
    }
    float *w = cp->ws.data;
    for (int k = 0; k < 5; k++) {
        cp->w[k] = part[k] ? w : NULL;
        w += (part[k] + pad - 1) / pad * pad;
    }
    *out = cp;
    return DT_OK;
}

void dt__cp_free(dt__cp *cp)
{
    if (!cp) return;
    dt_buffer_free(&cp->ws);
    free(cp->reqs);
    free(cp);
}

const dt__attn *dt__cp_attn(dt__cp *cp) { return &cp->attn; }
dt__cpos dt__cp_pos(const dt__cp *cp) { return (dt__cpos){cp->c, cp->rank}; }
long long dt__cp_exchanges(const dt__cp *cp) { return cp->exchanges; }
long long dt__cp_bytes_sent(const dt__cp *cp) { return cp->bytes; }
size_t dt__cp_workspace_bytes(const dt__cp *cp) { return cp->ws.bytes; }

void dt__cp_set_event(dt__cp *cp,
                      void (*event)(void *ctx, int kind, char pass, int step, int from, size_t bytes, int64_t t0,
                                    int64_t t1),
                      void *ctx)
{
    cp->event = event;
    cp->event_ctx = ctx;
}
