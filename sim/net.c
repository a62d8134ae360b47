/* net.c: links and ports (see dts_net.h). */
#include "dts_net.h"

#include "dts_engine.h"

#include <math.h>
#include <stdlib.h>

dt_status dts_net_init(dts_net *net, int n, const dts_hw *hw, double bw_scale)
{
    net->n = n;
    net->hw = hw;
    net->bw_scale = bw_scale > 0 ? bw_scale : 1.0;
    net->bytes = net->messages = 0;
    net->send_free = calloc((size_t)n, sizeof *net->send_free);
    net->recv_free = calloc((size_t)n, sizeof *net->recv_free);
    if (!net->send_free || !net->recv_free) {
        dts_net_free(net);
        return DT_FAIL(DT_ERR_NOMEM, "dtsim: out of memory for %d ranks' ports", n);
    }
    return DT_OK;
}

void dts_net_free(dts_net *net)
{
    free(net->send_free);
    free(net->recv_free);
    net->send_free = net->recv_free = NULL;
}

static inline int64_t dts__wire_ns(const dts_net *net, dts_link l, int64_t bytes)
{
    return dts_ns_sat((double)bytes / (l.bytes_per_ns * net->bw_scale));
}

int64_t dts_net_cost(const dts_net *net, int src, int dst, int64_t bytes)
{
    dts_link l = dts_hw_link(net->hw, src, dst);
    return dts_ns_add_sat(dts_ns_sat(l.alpha_ns), dts__wire_ns(net, l, bytes));
}

int64_t dts_net_send(dts_net *net, int src, int dst, int64_t bytes, int64_t now, int64_t *send_done)
{
    dts_link l = dts_hw_link(net->hw, src, dst);
    int64_t start = now;
    if (net->send_free[src] > start) start = net->send_free[src];
    if (net->recv_free[dst] > start) start = net->recv_free[dst];
    const int64_t wire = dts__wire_ns(net, l, bytes);
    net->send_free[src] = net->recv_free[dst] = start + wire;
    net->bytes += bytes;
    net->messages++;
    if (send_done) *send_done = start + wire;
    return start + dts_ns_add_sat(wire, dts_ns_sat(l.alpha_ns));
}

/* The ring's slowest latency and bandwidth. */
static void dts__ring_link(const dts_net *net, int first, int stride, int n, double *alpha, double *beta)
{
    *alpha = 0, *beta = INFINITY;
    for (int i = 0; i < n; i++) {
        dts_link l = dts_hw_link(net->hw, first + i * stride, first + ((i + 1) % n) * stride);
        if (l.alpha_ns > *alpha) *alpha = l.alpha_ns;
        if (l.bytes_per_ns * net->bw_scale < *beta) *beta = l.bytes_per_ns * net->bw_scale;
    }
}

int64_t dts_net_ring_allreduce_ns(const dts_net *net, int first, int stride, int n, int64_t bytes)
{
    if (n <= 1) return 0;
    double alpha, beta;
    dts__ring_link(net, first, stride, n, &alpha, &beta);
    const double steps = 2.0 * (n - 1);
    return dts_ns_sat(steps * alpha + steps / n * (double)bytes / beta);
}

int64_t dts_net_ring_allgather_ns(const dts_net *net, int first, int stride, int n, int64_t bytes)
{
    if (n <= 1) return 0;
    double alpha, beta;
    dts__ring_link(net, first, stride, n, &alpha, &beta);
    const double steps = n - 1.0;
    return dts_ns_sat(steps * alpha + steps / n * (double)bytes / beta);
}

int64_t dts_net_ring_step_ns(const dts_net *net, int first, int stride, int n, int64_t bytes)
{
    if (n <= 1) return 0;
    double alpha, beta;
    dts__ring_link(net, first, stride, n, &alpha, &beta);
    return dts_ns_sat(alpha + (double)bytes / beta);
}

int64_t dts_net_alltoall_ns(const dts_net *net, int first, int stride, int n, int64_t bytes)
{
    if (n <= 1) return 0;
    double alpha = 0, beta = INFINITY; /* the slowest link between any two members */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j) continue;
            const dts_link l = dts_hw_link(net->hw, first + i * stride, first + j * stride);
            if (l.alpha_ns > alpha) alpha = l.alpha_ns;
            if (l.bytes_per_ns * net->bw_scale < beta) beta = l.bytes_per_ns * net->bw_scale;
        }
    return dts_ns_sat(alpha + (n - 1.0) / n * (double)bytes / beta);
}
