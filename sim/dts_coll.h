/* dts_coll.h: collectives among simulated ranks (sim/coll.c), at the level
 * of their steps, as lib/comm/collectives.c runs them.
 *
 * Each member runs a list of steps; a step sends at most one message and
 * receives at most one. Ring allreduce: n-1 reduce-scatter steps then n-1
 * all-gather steps, each sending one of n near-equal segments to the next
 * member and receiving one from the previous; with chunk_bytes > 0 a
 * segment moves as chunks and chunk c of step k+1 leaves as soon as chunk
 * c of step k has arrived (the real ring's pipelining). Tree: recursive
 * halving-doubling (fold, log2 P halving steps, log2 P doubling steps,
 * unfold). Naive: every member sends the whole buffer to member 0 (whose
 * receiving port serialises them), then a binomial broadcast. Reduce-
 * scatter and all-gather alone are the ring's halves (ZeRO-1).
 *
 * A member may send step k's chunk c once it has arrived at the collective
 * and received chunk c of every earlier step; it is done when every
 * receive has arrived and every send has left its port. Each message is
 * one engine event (its arrival).
 */
#ifndef DTS_COLL_H
#define DTS_COLL_H

#include <stdint.h>

#include "dt_status.h"
#include "dts_engine.h"
#include "dts_net.h"

typedef enum dts_coll_kind {
    DTS_COLL_RING_ALLREDUCE = 0,
    DTS_COLL_TREE_ALLREDUCE,
    DTS_COLL_NAIVE_ALLREDUCE,
    DTS_COLL_REDUCE_SCATTER,
    DTS_COLL_ALL_GATHER
} dts_coll_kind;

/* Called when member i is done, at its done time (an engine event). */
typedef void (*dts_coll_done_fn)(dts_engine *e, void *ctx, int member);
/* Trace hook: member i spent [t0, t1) in one step (phase: "reduce-scatter",
 * "all-gather", "reduce", "broadcast"; step numbered from 0 within the
 * phase), sending `bytes` to rank `peer` (-1 and 0 bytes: it only receives). */
typedef void (*dts_coll_step_fn)(void *ctx, int member, const char *phase, int step, int peer, int64_t bytes,
                                 int64_t t0, int64_t t1);

typedef struct dts_coll dts_coll;

/* n members with world ranks ranks[0..n-1] (copied); bytes of the whole
 * buffer. step_hook may be NULL. */
dt_status dts_coll_create(dts_engine *e, dts_net *net, dts_coll_kind kind, int n, const int *ranks, int64_t bytes,
                          int64_t chunk_bytes, dts_coll_done_fn done, dts_coll_step_fn step_hook, void *ctx,
                          dts_coll **out);
void dts_coll_free(dts_coll *c);
/* Member i reaches the collective now. */
void dts_coll_arrive(dts_coll *c, int member);
/* Members that are done so far. */
int dts_coll_done_count(const dts_coll *c);
/* Steps in a member's list (for tests: ring 2(n-1)). */
int dts_coll_steps(const dts_coll *c);

#endif
