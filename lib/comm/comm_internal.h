/* comm_internal.h: what the communicator backends (comm.c: "self",
 * comm_mpi.c: "mpi") share, never installed.
 *
 * Requests: every backend's request begins with a dt_comm_request (its first
 * member), so the common code can check that a request is handed back to the
 * communicator that made it; the backend casts to its own type. A request is
 * malloc'd by isend/irecv and freed by the call that consumes it: wait always
 * (whether the message succeeded or failed), test when it reports done or
 * fails (setting *done = 1 then too). Only a call that rejects its arguments
 * (a NULL request, another communicator's request) leaves the request alone.
 * Free a communicator only once its requests are complete.
 *
 * Tags: 0..DT__COMM_TAG_MAX on every backend, the range MPI guarantees
 * (MPI_TAG_UB is at least 32767), so code that runs on "self" also runs on
 * "mpi" and later "nccl". */
#ifndef DT_COMM_INTERNAL_H
#define DT_COMM_INTERNAL_H

#include <stddef.h>

#include "dt_comm.h"

#define DT__COMM_TAG_MAX 32767
/* The top of the range reserved for lib/comm (dt_comm.h): the collectives
 * use 32704..32711 (collectives.c), the clock synchronisation this one. */
#define DT__COMM_TAG_CLOCK 32767

struct dt_comm_request {
    dt_comm *comm; /* the communicator that created it */
    int is_send;   /* 1: isend, 0: irecv (for messages) */
    int peer, tag;
    size_t bytes; /* the caller's buffer size */
};

/* A new communicator of ops with this rank and size; impl is owned by it
 * (ops->destroy releases impl, dt_comm_free the struct). */
dt_status dt__comm_new(const dt_comm_ops *ops, int rank, int size, void *impl, dt_comm **out);

/* Checks the arguments of isend/irecv (what names "isend" or "irecv"): a
 * valid peer and tag, a buffer when bytes > 0, somewhere to put the request. */
dt_status dt__comm_check_p2p(const dt_comm *c, const char *what, const void *buf, size_t bytes, int peer, int tag,
                             dt_comm_request **req);
/* Fills the common part of a request the backend allocated. */
void dt__comm_request_init(dt_comm_request *r, dt_comm *c, int is_send, int peer, int tag, size_t bytes);
/* Checks that wait/test (what) got a request of communicator c. */
dt_status dt__comm_check_request(const dt_comm *c, const char *what, const dt_comm_request *r);
/* Checks allreduce_native's arguments. */
dt_status dt__comm_check_buffer(const char *what, const float *buf, size_t count);

/* Timeouts of blocking waits (dt_comm.timeout_s). A waiter is started when
 * a wait begins; dt__comm_waiter_idle is called after each poll that found
 * nothing: it yields the core (polling freely for the first millisecond, as
 * MPI_Wait does, then sched_yield, then, after DT__COMM_SLEEP_AFTER_NS of
 * waiting, 200 us sleeps) and returns 1 once the timeout has passed. */
#define DT__COMM_SLEEP_AFTER_NS 1000000000LL
/* A longer gap between two polls means this process was not running
 * (stopped): the deadline moves on by the gap (dt__comm_waiter_expired). */
#define DT__COMM_GAP_NS 500000000LL
typedef struct dt__comm_waiter {
    long long start_ns, deadline_ns; /* deadline 0: none */
    long long last_ns;               /* the last poll's clock read */
    long polls;
} dt__comm_waiter;
void dt__comm_waiter_start(dt__comm_waiter *w, const dt_comm *c);
int dt__comm_waiter_idle(dt__comm_waiter *w);
/* 1 once w's deadline (if any) has passed at time now (dt_time_ns), not
 * counting gaps of more than DT__COMM_GAP_NS since the previous call, when
 * this process was not running; for loops that poll and sleep their own way
 * (the parameter server's). */
int dt__comm_waiter_expired(dt__comm_waiter *w, long long now);
/* The failure of a wait that timed out on reqs(n) (NULL entries are done):
 * "rank R: no message from rank P for T s (--comm-timeout T): it, or a
 * rank it waits for, may have died or hung" (receives are named before sends; every pending peer is
 * listed), ranks as the job numbers them. DT_ERR_BACKEND. */
dt_status dt__comm_timeout_fail(const dt_comm *c, dt_comm_request *const *reqs, int n, const char *file, int line);
#define DT__COMM_TIMEOUT(c, reqs, n) dt__comm_timeout_fail((c), (reqs), (n), __FILE__, __LINE__)

/* Largest count (bytes for messages, floats for reductions) a backend passes
 * to one call of a library whose counts are int (MPI): INT_MAX unless a test
 * lowered it, so that the paths for larger messages run with small buffers.
 * n = 0 restores INT_MAX. Not thread-safe; set it before communicating. */
size_t dt__comm_max_count(void);
void dt__comm_set_max_count(size_t n);

#endif
