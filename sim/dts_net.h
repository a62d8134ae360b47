/* dts_net.h: links between devices (sim/net.c).
 *
 * A message of S bytes from rank a to rank b costs α + S/β on the link
 * between them (dts_hw_link: intra-node or inter-node figures). Each rank
 * has one sending port and one receiving port. A message occupies the
 * sender's sending port and the receiver's receiving port for S/β; the
 * latency α overlaps with other messages. Concurrent messages on a port
 * queue in the order they are posted (FIFO) instead of sharing bandwidth:
 * for a set of messages that start together the last one finishes at the
 * same time either way (the port is work-conserving), each message costs
 * one computation instead of a rescheduling of every active flow, and the
 * order is deterministic. The difference is in the individual finish times
 * of concurrent messages: under fair sharing they all finish near the end,
 * under FIFO they finish one after another (docs/simulator.md).
 *
 * Invariants: a port is never busy with two messages at once; a message
 * posted at `now` never arrives before now + α + S/β. */
#ifndef DTS_NET_H
#define DTS_NET_H

#include <stdint.h>

#include "dt_status.h"
#include "dts_hw.h"

typedef struct dts_net {
    int n;              /* ranks */
    const dts_hw *hw;   /* not owned */
    double bw_scale;    /* multiplies every link's bandwidth (what-if; 1 = as described) */
    int64_t *send_free; /* (n) when each sending port is free */
    int64_t *recv_free; /* (n) when each receiving port is free */
    int64_t bytes;      /* bytes moved so far */
    int64_t messages;
} dts_net;

dt_status dts_net_init(dts_net *net, int n, const dts_hw *hw, double bw_scale);
void dts_net_free(dts_net *net);
/* Post a message at time now; returns its arrival time at dst. *send_done
 * (may be NULL): when the sender's port has pushed the last byte. */
int64_t dts_net_send(dts_net *net, int src, int dst, int64_t bytes, int64_t now, int64_t *send_done);
/* α + S/β between two ranks, without queueing. */
int64_t dts_net_cost(const dts_net *net, int src, int dst, int64_t bytes);
/* Ring allreduce over n ranks (consecutive ranks from `first`, `stride`
 * apart) of `bytes`, unloaded: 2(n-1)·α + 2(n-1)/n·S/β with the ring's
 * slowest link. */
int64_t dts_net_ring_allreduce_ns(const dts_net *net, int first, int stride, int n, int64_t bytes);
/* Ring all-gather over the same ranks of `bytes` in all (each member
 * contributes bytes/n), unloaded: (n-1)·α + (n-1)/n·S/β. */
int64_t dts_net_ring_allgather_ns(const dts_net *net, int first, int stride, int n, int64_t bytes);
/* One step of a ring over the same ranks: every member sends `bytes` to
 * the next at once, unloaded: α + S/β with the ring's slowest link. */
int64_t dts_net_ring_step_ns(const dts_net *net, int first, int stride, int n, int64_t bytes);
/* All-to-all over the same ranks, each member's buffer of `bytes` cut in
 * n blocks, block j to member j, every message posted at once: a member's
 * sending port carries its n-1 blocks one after another while the
 * latencies overlap, α + (n-1)/n·S/β with the slowest link between two
 * members. */
int64_t dts_net_alltoall_ns(const dts_net *net, int first, int stride, int n, int64_t bytes);

#endif
