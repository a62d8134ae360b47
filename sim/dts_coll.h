/* dts_coll.h: collectives among simulated ranks, as lib/comm/collectives.c
 * runs them, in one of two models behind this one interface
 * (sim/coll_internal.h), chosen per instance by the hardware's
 * "collectives" (dts_hw.h; dts_hw_coll_analytic): message-level
 * (sim/coll.c, below) or analytic (sim/coll_analytic.c, after it).
 *
 * Message-level. Each member runs a list of steps; a step sends at most one message and
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
 * one engine event (its arrival). Memory and events: n x steps x chunks,
 * so n^2 for a ring.
 *
 * Analytic. The same algorithms, priced per phase in closed form from the
 * members' links (dts_net_cost), once the last member has arrived and
 * every member's ports are free: memory O(n), events O(n) (one per member
 * and phase). The ring takes the larger of its two bounds, the chain of
 * 2(n-1) hops of a chunk around the ring and the busiest port's 2(n-1)
 * segments; tree and naive follow each member's step times (O(n log n)).
 * Exact against the message model when the members arrive together, the
 * ring's links are alike and the buffer splits evenly (sim/coll_analytic.c
 * says what differs otherwise; tests/check_sim_coll.c measures it). The
 * step hook is called once per phase per member (step 0, the phase's
 * bytes, the peer of its first step) instead of once per step.
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

#include <stddef.h>

/* Called when member i is done, at its done time (an engine event). */
typedef void (*dts_coll_done_fn)(dts_engine *e, void *ctx, int member);
/* Trace hook: member i spent [t0, t1) in one step (phase: "reduce-scatter",
 * "all-gather", "reduce", "broadcast"; step numbered from 0 within the
 * phase), sending `bytes` to rank `peer` (-1 and 0 bytes: it only receives). */
typedef void (*dts_coll_step_fn)(void *ctx, int member, const char *phase, int step, int peer, int64_t bytes,
                                 int64_t t0, int64_t t1);

typedef struct dts_coll dts_coll;

/* n members with world ranks ranks[0..n-1] (copied); bytes of the whole
 * buffer; the model is net->hw's choice for n members. step_hook may be
 * NULL. */
dt_status dts_coll_create(dts_engine *e, dts_net *net, dts_coll_kind kind, int n, const int *ranks, int64_t bytes,
                          int64_t chunk_bytes, dts_coll_done_fn done, dts_coll_step_fn step_hook, void *ctx,
                          dts_coll **out);
void dts_coll_free(dts_coll *c);
/* Member i reaches the collective now. */
void dts_coll_arrive(dts_coll *c, int member);
/* Members that are done so far. */
int dts_coll_done_count(const dts_coll *c);
/* Steps in a member's list (for tests: ring 2(n-1)), in either model. */
int dts_coll_steps(const dts_coll *c);
/* Heap bytes the instance holds (for tests: the analytic model's grow
 * linearly with n, the message model's with n x steps x chunks). */
size_t dts_coll_bytes(const dts_coll *c);
/* The model the instance runs: "messages" or "analytic". */
const char *dts_coll_model(const dts_coll *c);

#endif
