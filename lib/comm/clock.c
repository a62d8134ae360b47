/* clock.c: dt_comm_clock_sync, each rank's monotonic clock against rank
 * 0's, so that the ranks' trace files can be put on one time line
 * (lib/trace/trace_merge.c, docs/trace-format.md "Merged files").
 *
 * How: after a barrier, rank 0 answers each other rank in turn. Rank r
 * sends a ping at t1 (its clock), rank 0 reads t0 (its clock) when the
 * ping arrives and sends it back, rank r reads t2 when the answer arrives.
 * Rank 0 read t0 between t1 and t2, so rank 0's clock minus rank r's lies
 * in [t0 - t2, t0 - t1]: the estimate t0 - (t1 + t2) / 2 is off by at most
 * (t2 - t1) / 2, a bound measured, not assumed (a barrier's exits, by
 * contrast, are apart by an unknown share of its latency, and by a whole
 * time slice when a loaded host deschedules a rank leaving it). Of `rounds`
 * round trips the shortest gives the estimate. The bound holds while both
 * clocks run at one rate: exactly on one host (one CLOCK_MONOTONIC), to a
 * few parts per million across hosts.
 *
 * Invariants: collective over the communicator (every rank calls it, in
 * the same order as its other collectives); one tag of the range reserved
 * for lib/comm (DT__COMM_TAG_CLOCK); messages are 8 and 16 bytes. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "comm_internal.h"
#include "dt_time.h"

dt_status dt_comm_clock_sync(dt_comm *c, int rounds, dt_comm_clock *out)
{
    if (!c || !out) return DT_FAIL(DT_ERR_INVALID, "dt_comm_clock_sync: NULL communicator or output");
    if (rounds < 1 || rounds > 1000)
        return DT_FAIL(DT_ERR_INVALID, "dt_comm_clock_sync: %d rounds; expected 1..1000", rounds);
    out->offset_ns = 0;
    out->error_ns = 0;
    int64_t id = 0;
    if (c->rank == 0) { /* this run's: the wall clock, and the process for two runs started at once */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        id = (int64_t)(((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40)) &
             INT64_MAX;
    }
    out->sync_id = id;
    if (c->size == 1) return DT_OK;
    DT_CHECK(c->ops->barrier(c));
    if (c->rank == 0) {
        for (int peer = 1; peer < c->size; peer++)
            for (int k = 0; k < rounds; k++) {
                int64_t ping = 0, pong[2];
                dt_comm_request *r = NULL, *s = NULL;
                DT_CHECK(c->ops->irecv(c, &ping, sizeof ping, peer, DT__COMM_TAG_CLOCK, &r));
                DT_CHECK(c->ops->wait(c, r));
                pong[0] = dt_time_ns();
                pong[1] = id;
                DT_CHECK(c->ops->isend(c, pong, sizeof pong, peer, DT__COMM_TAG_CLOCK, &s));
                DT_CHECK(c->ops->wait(c, s));
            }
        return DT_OK;
    }
    int64_t best = INT64_MAX;
    for (int k = 0; k < rounds; k++) {
        int64_t ping = k, pong[2] = {0, 0};
        dt_comm_request *r = NULL, *s = NULL;
        DT_CHECK(c->ops->irecv(c, pong, sizeof pong, 0, DT__COMM_TAG_CLOCK, &r));
        const int64_t t1 = dt_time_ns();
        DT_CHECK(c->ops->isend(c, &ping, sizeof ping, 0, DT__COMM_TAG_CLOCK, &s));
        DT_CHECK(c->ops->wait(c, s));
        DT_CHECK(c->ops->wait(c, r));
        const int64_t t2 = dt_time_ns();
        if (t2 - t1 < best) {
            best = t2 - t1;
            out->offset_ns = pong[0] - (t1 + (t2 - t1) / 2);
            out->error_ns = (t2 - t1 + 1) / 2;
        }
        out->sync_id = pong[1];
    }
    return DT_OK;
}
