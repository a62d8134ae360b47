/* dt_comm.h: communicators. A communicator is a group of ranks with
 * point-to-point messages (non-blocking send/recv with wait/test), a
 * barrier, sub-groups (split), and collectives.
 *
 * Backends fill a table of function pointers (dt_comm_ops): "self" (one
 * rank, always built), "mpi" (OpenMPI, when configure found it), later
 * "nccl". Core code never tests which backend it has.
 *
 * The collective algorithms (lib/comm/collectives.c) are written on top of the
 * point-to-point ops, so every step can be traced and taught: ring
 * allreduce = reduce-scatter then all-gather, 2(n-1) steps, chunked; tree
 * (recursive halving-doubling); naive (reduce to rank 0, broadcast); and
 * "mpi", the library's own MPI_Allreduce, for comparison.
 *
 * Tags: user point-to-point messages use tags 0..32703; 32704..32767 are
 * reserved for the collectives.
 *
 * Invariants: collectives are called by every rank of the communicator in
 * the same order with the same count; any count works (0, fewer elements
 * than ranks, not divisible by the number of ranks); results are identical
 * on every rank (the same additions in the same order). */
#ifndef DT_COMM_H
#define DT_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_comm dt_comm;
struct dt_backend;
typedef struct dt_comm_request dt_comm_request; /* one pending send or receive */

typedef struct dt_comm_ops {
    const char *name; /* "self", "mpi" */
    /* Point-to-point, bytes. A request is freed by the wait/test that completes it. */
    dt_status (*isend)(dt_comm *c, const void *buf, size_t bytes, int peer, int tag, dt_comm_request **req);
    dt_status (*irecv)(dt_comm *c, void *buf, size_t bytes, int peer, int tag, dt_comm_request **req);
    dt_status (*wait)(dt_comm *c, dt_comm_request *req);
    dt_status (*test)(dt_comm *c, dt_comm_request *req, int *done);
    /* Block until one of reqs[0..n-1] completes (NULL entries are skipped,
     * at least one must be non-NULL); *index names it and reqs[*index]
     * becomes NULL (the request is freed, as by wait). */
    dt_status (*waitany)(dt_comm *c, int n, dt_comm_request **reqs, int *index);
    dt_status (*barrier)(dt_comm *c);
    /* New communicator of the ranks with the same color, ordered by key
     * (as MPI_Comm_split); color < 0: this rank joins none (*out = NULL). */
    dt_status (*split)(dt_comm *c, int color, int key, dt_comm **out);
    /* The backend library's own allreduce (sum of floats, in place), or NULL. */
    dt_status (*allreduce_native)(dt_comm *c, float *buf, size_t count);
    /* The memory the messages live in, for the collectives' scratch and
     * their local sums: NULL means host memory (malloc/free, a host loop);
     * a device backend (NCCL) gives device memory and a device kernel. add
     * is dst(n) += src(n), one addition per element (bit-identical however
     * it is split). */
    dt_status (*scratch_alloc)(dt_comm *c, size_t bytes, void **out);
    void (*scratch_free)(dt_comm *c, void *p);
    dt_status (*add)(dt_comm *c, float *dst, const float *src, size_t n);
    /* 1: posted sends and receives start together, as one group, at the
     * first wait/test (NCCL, whose send and receive deadlock unless grouped).
     * The ring then sends each segment whole: pipelined chunks would leave
     * a rank waiting on a group its neighbour completes only later. */
    int grouped;
    void (*destroy)(dt_comm *c);
    /* For messages: rank's number in the process's whole job (MPI_COMM_WORLD
     * for "mpi"), so a sub-communicator's failure names the rank as mpirun
     * numbers it. NULL: ranks are already the job's. */
    int (*job_rank)(const dt_comm *c, int rank);
    /* Ends the whole job at once (MPI_Abort): for programs, after a failure
     * that may leave other ranks waiting (a rank timed out). NULL: nothing
     * to do (the caller exits on its own). Never returns when it acts. */
    void (*abort)(dt_comm *c, int code);
} dt_comm_ops;

struct dt_comm {
    const dt_comm_ops *ops;
    int rank, size;
    void *impl; /* backend state */
    /* Seconds a blocking wait of the "mpi" backend (wait, waitany, barrier,
     * allreduce_native; so every collective, the parameter server's and
     * the pipeline's receives) may take before it fails with DT_ERR_BACKEND
     * naming the rank waited for (a collective names none); 0: wait for
     * ever. New communicators get
     * DT_COMM_TIMEOUT_DEFAULT; split ones inherit their parent's. */
    double timeout_s;
    /* This process's index among the job's processes on its node, for
     * choosing a GPU (dt_backend_options.local_rank): the "mpi" world's
     * rank in MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), inherited by the
     * communicators split from it; -1 where unknown (self, nccl). */
    int local_rank;
};

/* The default timeout of a blocking wait (dtrain's --comm-timeout): far
 * above the longest healthy wait of this project's runs (docs/faults.md). */
#define DT_COMM_TIMEOUT_DEFAULT 300.0

/* Sets c's wait timeout in seconds (0: none; otherwise > 0 and finite).
 * Communicators split from c afterwards inherit it. */
DT_API dt_status dt_comm_set_timeout(dt_comm *c, double seconds);
/* Ends the whole job (c->ops->abort, MPI_Abort for "mpi") with exit code;
 * returns only when the backend has nothing to abort (self, NULL). For
 * programs: the library itself never calls it. */
DT_API void dt_comm_abort(dt_comm *c, int code);

/* One rank talking to itself: size 1; sends to rank 0 match receives from 0. */
DT_API dt_status dt_comm_self_create(dt_comm **out);
/* The MPI world (calls MPI_Init_thread if MPI is not initialised yet).
 * DT_ERR_UNSUPPORTED with a clear message when built without MPI. */
DT_API dt_status dt_comm_mpi_world(dt_comm **out);
/* Free a communicator (NULL is fine). The MPI world's last free does not
 * finalise MPI: call dt_comm_finalize() once at the end of the program. */
DT_API void dt_comm_free(dt_comm *c);
DT_API dt_status dt_comm_finalize(void);
/* c->ops->waitany after checking the arguments (n >= 1, one non-NULL request). */
DT_API dt_status dt_comm_waitany(dt_comm *c, int n, dt_comm_request **reqs, int *index);
/* The "nccl" communicator: the ranks of host, talking through NCCL on the
 * device memory of be (a CUDA backend, whose stream it shares, so its work
 * is ordered after the backend's). host (MPI, or self for one rank) carries
 * NCCL's unique id from rank 0 at creation and is not kept. Collective over
 * host. DT_ERR_UNSUPPORTED in a build without CUDA. */
DT_API dt_status dt_comm_nccl_create(dt_comm *host, struct dt_backend *be, dt_comm **out);
/* 1 if this build has the MPI backend. */
DT_API int dt_comm_have_mpi(void);
/* 1 if a launcher started this process (mpirun: OMPI_COMM_WORLD_SIZE; a
 * PMI-based one: PMI_SIZE or PMIX_RANK). Programs initialise MPI only
 * then, so a plain run never needs an MPI runtime (nor leaks its
 * singleton's allocations). */
DT_API int dt_comm_launched(void);

/* ---- clocks (lib/comm/clock.c) ------------------------------------------------- */

/* This rank's monotonic clock (dt_time_ns) against rank 0's. */
typedef struct dt_comm_clock {
    int64_t offset_ns; /* rank 0's clock = this rank's + offset_ns (0 on rank 0) */
    int64_t error_ns;  /* |offset_ns - the true offset| <= error_ns: half the shortest round trip (0 on rank 0) */
    int64_t sync_id;   /* rank 0's number for this synchronisation, the same on every rank, >= 0 */
} dt_comm_clock;

/* Collective: measures each rank's clock offset to rank 0 with `rounds`
 * (1..1000) ping-pongs after a barrier, keeping the shortest round trip,
 * whose half bounds the error. The bound holds while the clocks run at
 * one rate (one host: exactly; across hosts: to their drift). */
DT_API dt_status dt_comm_clock_sync(dt_comm *c, int rounds, dt_comm_clock *out);

/* ---- collectives (lib/comm/collectives.c) ------------------------------------- */

typedef enum dt_allreduce_algo {
    DT_ALLREDUCE_RING = 0, /* reduce-scatter + all-gather, 2(n-1) steps */
    DT_ALLREDUCE_TREE,     /* recursive halving-doubling */
    DT_ALLREDUCE_NAIVE,    /* reduce to rank 0, then broadcast */
    DT_ALLREDUCE_MPI,      /* the MPI library's own (MPI_Allreduce), on host memory */
    DT_ALLREDUCE_NCCL      /* NCCL's own (ncclAllReduce), on the "nccl" communicator */
} dt_allreduce_algo;

/* "ring", "tree", "naive", "mpi", "nccl" */
DT_API dt_status dt_allreduce_algo_parse(const char *s, dt_allreduce_algo *out);
DT_API const char *dt_allreduce_algo_name(dt_allreduce_algo a);

/* Called after each step of a collective (for traces): phase is
 * "reduce-scatter", "all-gather", "reduce", "broadcast" or "allreduce";
 * step counts from 0 within the phase; peer is the rank sent to (-1 none);
 * bytes sent by this rank in the step; times from dt_time_ns(). */
typedef void (*dt_comm_step_hook)(void *ctx, const char *phase, int step, int peer, size_t bytes, int64_t t0_ns,
                                  int64_t t1_ns);

typedef struct dt_collective_opts {
    size_t chunk_bytes;     /* ring: split each segment into pipelined chunks of at most this (0: no chunking) */
    dt_comm_step_hook hook; /* may be NULL */
    void *hook_ctx;
} dt_collective_opts;

/* buf(count) = sum over ranks of buf(count), in place, on every rank.
 * opts may be NULL (defaults). */
DT_API dt_status dt_comm_allreduce(dt_comm *c, float *buf, size_t count, dt_allreduce_algo algo,
                                   const dt_collective_opts *opts);
/* v(n) = sum over ranks of v(n), in double, the same on every rank: each
 * rank's values travel as two floats (about 48 bits) in slots of their own
 * and are added in rank order, so the sum does not depend on the
 * collective's order and one contributing rank gets its own values back to
 * about 1e-14. For sums that are reported (losses, fingerprints), not for
 * gradients. */
DT_API dt_status dt_comm_sum_doubles(dt_comm *c, double *v, size_t n);
/* Ring reduce-scatter: afterwards rank r holds the sum of segment r of buf
 * (segments as dt_comm_segment); other segments hold partial sums. */
DT_API dt_status dt_comm_reduce_scatter(dt_comm *c, float *buf, size_t count, const dt_collective_opts *opts);
/* Ring all-gather: segment r of rank r is copied to every rank. */
DT_API dt_status dt_comm_all_gather(dt_comm *c, float *buf, size_t count, const dt_collective_opts *opts);
/* buf(count) of root copied to every rank. */
DT_API dt_status dt_comm_broadcast(dt_comm *c, float *buf, size_t count, int root, const dt_collective_opts *opts);
/* Segment r of count elements over size ranks: [*offset, *offset + *len);
 * the first count % size segments have one more element. */
DT_API void dt_comm_segment(size_t count, int size, int r, size_t *offset, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
