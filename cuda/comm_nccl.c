/* comm_nccl.c: the "nccl" communicator backend (built with CUDA): messages
 * and collectives on device memory through NCCL, on the stream of the CUDA
 * backend it was made for, so they are ordered after the kernels that
 * produced their buffers.
 *
 * Creation: rank 0 of the host communicator (MPI, or self for one rank)
 * makes NCCL's unique id and sends it to the others over the host
 * communicator; every rank then joins with ncclCommInitRank on the
 * backend's device. split is ncclCommSplit (no host communicator needed).
 *
 * Point-to-point: NCCL's send and receive block each other on one stream
 * unless they are issued as one group, so isend/irecv only queue the
 * operation; the first wait, test or waitany issues everything queued as
 * one group (ncclGroupStart; ncclSend/ncclRecv ...; ncclGroupEnd) and
 * records one CUDA event after it, which every request of the group holds.
 * wait is cudaEventSynchronize on it, test cudaEventQuery. The collectives
 * of lib/comm/collectives.c post their receives and sends before waiting, so
 * they run unchanged; ops->grouped tells the ring not to pipeline chunks
 * (each chunk's group would wait on a neighbour's later group).
 *
 * Collectives: allreduce_native is ncclAllReduce (in place, sum, FP32); the
 * own collectives' scratch is device memory and their local sums are
 * cublasSaxpy with alpha = 1 (one rounding per element: dst + src exactly
 * rounded, as the host loop). Every blocking call returns when the device
 * work is done (the stream is synchronised), like the host backends.
 *
 * Invariants: every CUDA, cuBLAS and NCCL call is checked (DT__NC_* macros,
 * file:line and the library's message); a request is freed by the call
 * that completes it; an event is destroyed with the last request of its
 * group. Not run on a GPU yet (docs/cuda.md). */
#include "cublas_dl.h" /* cuBLAS, opened at run time */
#include <cuda_runtime.h>
#include <limits.h>
/* nccl.h declares some functions as f() (not prototypes): not our warning */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_internal.h"
#include "dt_backend.h"
#include "dt_cuda.h"

/* On failure the runtime's last-error slot is cleared (cudaGetLastError),
 * so a non-sticky error (a failed cudaMalloc) is not reported again by the
 * backend's next launch check. */
#define DT__NC_CUDA(call, ...)                                                                             \
    do {                                                                                                   \
        cudaError_t dt__e_ = (call);                                                                       \
        if (dt__e_ != cudaSuccess) {                                                                       \
            (void)cudaGetLastError();                                                                      \
            return dt__fail(DT_ERR_BACKEND, __FILE__, __LINE__, "nccl communicator: %s failed: %s", #call, \
                            cudaGetErrorString(dt__e_));                                                   \
        }                                                                                                  \
    } while (0)
#define DT__NC_NCCL(call)                                                                                  \
    do {                                                                                                   \
        ncclResult_t dt__r_ = (call);                                                                      \
        if (dt__r_ != ncclSuccess)                                                                         \
            return dt__fail(DT_ERR_BACKEND, __FILE__, __LINE__, "nccl communicator: %s failed: %s", #call, \
                            ncclGetErrorString(dt__r_));                                                   \
    } while (0)
#define DT__NC_BLAS(call)                                                                                  \
    do {                                                                                                   \
        cublasStatus_t dt__b_ = (call);                                                                    \
        if (dt__b_ != CUBLAS_STATUS_SUCCESS)                                                               \
            return dt__fail(DT_ERR_BACKEND, __FILE__, __LINE__, "nccl communicator: %s failed: %s", #call, \
                            cublasGetStatusString(dt__b_));                                                \
    } while (0)

typedef struct dt__nc_group {
    cudaEvent_t done; /* recorded after the group's ncclGroupEnd */
    int refs;         /* requests still holding it */
} dt__nc_group;

typedef struct dt__nc_req {
    dt_comm_request base;
    void *buf;
    struct dt__nc_req *next; /* queue link while not issued */
    dt__nc_group *group;     /* NULL while queued */
} dt__nc_req;

typedef struct dt__nc {
    ncclComm_t comm;
    cudaStream_t stream; /* the backend's: not owned */
    int device;
    cublasHandle_t blas; /* for add, bound to stream */
    dt_backend *be;
    dt__nc_req *head, *tail; /* queued, not yet issued */
    float *one;              /* device scratch of one float (barrier) */
} dt__nc;

static const dt_comm_ops dt__nc_ops;

/* Issue every queued operation as one group. Once ncclGroupStart has
 * succeeded, ncclGroupEnd is called whatever happens inside (NCCL's group
 * depth is per thread: a missing end would swallow every later call into
 * a group that never runs), and the group record (with its event) is
 * freed on every error path before the group is issued; the requests then
 * stay queued. Once issued, they leave the queue even if recording the
 * event fails (they are never issued twice). */
static dt_status dt__nc_flush(dt_comm *c)
{
    dt__nc *m = c->impl;
    if (!m->head) return DT_OK;
    dt__nc_group *g = calloc(1, sizeof *g);
    if (!g) return DT_FAIL(DT_ERR_NOMEM, "nccl communicator: out of memory for a group");
    cudaError_t ce = cudaSetDevice(m->device);
    if (ce == cudaSuccess) ce = cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming);
    if (ce != cudaSuccess) {
        (void)cudaGetLastError();
        free(g);
        return DT_FAIL(DT_ERR_BACKEND, "nccl communicator: preparing a group on device %d failed: %s", m->device,
                       cudaGetErrorString(ce));
    }
    ncclResult_t e = ncclGroupStart();
    if (e != ncclSuccess) {
        (void)cudaEventDestroy(g->done);
        free(g);
        return DT_FAIL(DT_ERR_BACKEND, "nccl communicator: ncclGroupStart() failed: %s", ncclGetErrorString(e));
    }
    const dt__nc_req *bad = NULL;
    for (dt__nc_req *r = m->head; r; r = r->next) {
        e = r->base.is_send ? ncclSend(r->buf, r->base.bytes, ncclUint8, r->base.peer, m->comm, m->stream)
                            : ncclRecv(r->buf, r->base.bytes, ncclUint8, r->base.peer, m->comm, m->stream);
        if (e != ncclSuccess) {
            bad = r;
            break;
        }
    }
    const ncclResult_t end = ncclGroupEnd(); /* always, after a successful start */
    if (bad) {
        (void)cudaEventDestroy(g->done);
        free(g);
        return DT_FAIL(DT_ERR_BACKEND, "nccl communicator: %s rank %d (%zu bytes) failed: %s",
                       bad->base.is_send ? "ncclSend to" : "ncclRecv from", bad->base.peer, bad->base.bytes,
                       ncclGetErrorString(e));
    }
    if (end != ncclSuccess) {
        (void)cudaEventDestroy(g->done);
        free(g);
        return DT_FAIL(DT_ERR_BACKEND, "nccl communicator: ncclGroupEnd() failed: %s", ncclGetErrorString(end));
    }
    /* Issued: the requests leave the queue whatever follows (never issued twice). */
    ce = cudaEventRecord(g->done, m->stream);
    if (ce != cudaSuccess) {
        /* the event stays unrecorded (waits on it return at once): make the
         * group complete first, best effort */
        (void)cudaGetLastError();
        (void)cudaStreamSynchronize(m->stream);
        (void)cudaGetLastError();
    }
    for (dt__nc_req *r = m->head, *next; r; r = next) {
        next = r->next;
        r->next = NULL;
        r->group = g;
        g->refs++;
    }
    m->head = m->tail = NULL;
    if (ce != cudaSuccess)
        return DT_FAIL(DT_ERR_BACKEND, "nccl communicator: cudaEventRecord after the group failed: %s",
                       cudaGetErrorString(ce));
    return DT_OK;
}

/* Drop a completed request and, with the last one, its group's event. */
static dt_status dt__nc_release(dt__nc_req *r)
{
    dt__nc_group *g = r->group;
    free(r);
    if (g && --g->refs == 0) {
        cudaError_t e = cudaEventDestroy(g->done);
        free(g);
        if (e != cudaSuccess)
            return DT_FAIL(DT_ERR_BACKEND, "nccl communicator: cudaEventDestroy failed: %s", cudaGetErrorString(e));
    }
    return DT_OK;
}

static dt_status dt__nc_post(dt_comm *c, int is_send, void *buf, size_t bytes, int peer, int tag, dt_comm_request **req)
{
    DT_CHECK(dt__comm_check_p2p(c, is_send ? "isend" : "irecv", buf, bytes, peer, tag, req));
    dt__nc *m = c->impl;
    dt__nc_req *r = calloc(1, sizeof *r);
    if (!r) return DT_FAIL(DT_ERR_NOMEM, "nccl communicator: out of memory for a request");
    dt__comm_request_init(&r->base, c, is_send, peer, tag, bytes);
    r->buf = buf;
    if (m->tail) m->tail->next = r;
    else m->head = r;
    m->tail = r;
    *req = &r->base;
    return DT_OK;
}

static dt_status dt__nc_isend(dt_comm *c, const void *buf, size_t bytes, int peer, int tag, dt_comm_request **req)
{
    return dt__nc_post(c, 1, (void *)buf, bytes, peer, tag, req);
}

static dt_status dt__nc_irecv(dt_comm *c, void *buf, size_t bytes, int peer, int tag, dt_comm_request **req)
{
    return dt__nc_post(c, 0, buf, bytes, peer, tag, req);
}

static dt_status dt__nc_wait(dt_comm *c, dt_comm_request *req)
{
    DT_CHECK(dt__comm_check_request(c, "wait", req));
    dt__nc_req *r = (dt__nc_req *)req;
    DT_CHECK(dt__nc_flush(c));
    cudaError_t e = cudaEventSynchronize(r->group->done);
    dt_status st = dt__nc_release(r);
    if (e != cudaSuccess)
        return DT_FAIL(DT_ERR_BACKEND, "nccl communicator: wait: cudaEventSynchronize failed: %s",
                       cudaGetErrorString(e));
    return st;
}

static dt_status dt__nc_test(dt_comm *c, dt_comm_request *req, int *done)
{
    if (!done) return DT_FAIL(DT_ERR_INVALID, "test on communicator 'nccl': done is NULL");
    *done = 0;
    DT_CHECK(dt__comm_check_request(c, "test", req));
    dt__nc_req *r = (dt__nc_req *)req;
    DT_CHECK(dt__nc_flush(c));
    cudaError_t e = cudaEventQuery(r->group->done);
    if (e == cudaErrorNotReady) return DT_OK;
    *done = 1; /* complete or failed: the request is gone either way */
    dt_status st = dt__nc_release(r);
    if (e != cudaSuccess)
        return DT_FAIL(DT_ERR_BACKEND, "nccl communicator: test: cudaEventQuery failed: %s", cudaGetErrorString(e));
    return st;
}

/* Poll the requests, sleeping 20-500 us between rounds (no CUDA call
 * blocks on "any of these events"). */
static dt_status dt__nc_waitany(dt_comm *c, int n, dt_comm_request **reqs, int *index)
{
    long ns = 20000;
    for (;;) {
        for (int i = 0; i < n; i++) {
            if (!reqs[i]) continue;
            int done = 0;
            dt_status st = dt__nc_test(c, reqs[i], &done);
            if (done) {
                reqs[i] = NULL;
                *index = i;
                return st;
            }
            DT_CHECK(st);
        }
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 500000) ns *= 2;
    }
}

/* An allreduce of one float, waited for: no rank leaves before all came. */
static dt_status dt__nc_barrier(dt_comm *c)
{
    dt__nc *m = c->impl;
    DT_CHECK(dt__nc_flush(c));
    DT__NC_CUDA(cudaSetDevice(m->device));
    DT__NC_NCCL(ncclAllReduce(m->one, m->one, 1, ncclFloat, ncclSum, m->comm, m->stream));
    DT__NC_CUDA(cudaStreamSynchronize(m->stream));
    return DT_OK;
}

static dt_status dt__nc_allreduce_native(dt_comm *c, float *buf, size_t count)
{
    DT_CHECK(dt__comm_check_buffer("allreduce_native", buf, count));
    dt__nc *m = c->impl;
    if (count == 0) return DT_OK;
    DT_CHECK(dt__nc_flush(c));
    DT__NC_CUDA(cudaSetDevice(m->device));
    DT__NC_NCCL(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, m->comm, m->stream));
    DT__NC_CUDA(cudaStreamSynchronize(m->stream));
    return DT_OK;
}

static dt_status dt__nc_scratch_alloc(dt_comm *c, size_t bytes, void **out)
{
    dt__nc *m = c->impl;
    *out = NULL;
    DT__NC_CUDA(cudaSetDevice(m->device));
    DT__NC_CUDA(cudaMalloc(out, bytes ? bytes : 1));
    return DT_OK;
}

static void dt__nc_scratch_free(dt_comm *c, void *p)
{
    dt__nc *m = c->impl;
    /* pending work may still read it: cudaFree waits for the device */
    if (cudaSetDevice(m->device) == cudaSuccess) (void)cudaFree(p);
}

/* dst += src on the device: saxpy with alpha 1 in pieces of at most INT_MAX. */
static dt_status dt__nc_add(dt_comm *c, float *dst, const float *src, size_t n)
{
    dt__nc *m = c->impl;
    const float one = 1.0f;
    for (size_t off = 0; off < n; off += (size_t)INT_MAX) {
        int k = n - off < (size_t)INT_MAX ? (int)(n - off) : INT_MAX;
        DT__NC_BLAS(cublasSaxpy(m->blas, k, &one, src + off, 1, dst + off, 1));
    }
    return DT_OK;
}

static void dt__nc_destroy(dt_comm *c)
{
    dt__nc *m = c->impl;
    if (!m) return;
    (void)cudaSetDevice(m->device);
    /* requests never waited for: issue them so the group's peers are not left hanging, then drop them */
    (void)dt__nc_flush(c);
    if (m->stream) (void)cudaStreamSynchronize(m->stream);
    if (m->comm) (void)ncclCommDestroy(m->comm);
    if (m->blas) (void)cublasDestroy(m->blas);
    if (m->one) (void)cudaFree(m->one);
    free(m);
    c->impl = NULL;
}

/* A dt_comm around an initialised NCCL communicator (m filled but for the comm). */
static dt_status dt__nc_wrap(dt__nc *m, dt_comm **out)
{
    int rank = 0, size = 0;
    DT__NC_NCCL(ncclCommUserRank(m->comm, &rank));
    DT__NC_NCCL(ncclCommCount(m->comm, &size));
    DT_CHECK(dt__cublas_load()); /* the backend has loaded it; a no-op then */
    DT__NC_BLAS(cublasCreate(&m->blas));
    DT__NC_BLAS(cublasSetStream(m->blas, m->stream));
    DT__NC_BLAS(cublasSetPointerMode(m->blas, CUBLAS_POINTER_MODE_HOST));
    DT__NC_CUDA(cudaMalloc((void **)&m->one, sizeof(float)));
    DT__NC_CUDA(cudaMemsetAsync(m->one, 0, sizeof(float), m->stream));
    return dt__comm_new(&dt__nc_ops, rank, size, m, out);
}

static void dt__nc_free_partial(dt__nc *m)
{
    if (!m) return;
    if (m->comm) (void)ncclCommDestroy(m->comm);
    if (m->blas) (void)cublasDestroy(m->blas);
    if (m->one) (void)cudaFree(m->one);
    free(m);
}

static dt_status dt__nc_split(dt_comm *c, int color, int key, dt_comm **out)
{
    if (!out) return DT_FAIL(DT_ERR_INVALID, "split (color %d): out is NULL", color);
    *out = NULL;
    dt__nc *m = c->impl;
    DT_CHECK(dt__nc_flush(c));
    dt__nc *n = calloc(1, sizeof *n);
    if (!n) return DT_FAIL(DT_ERR_NOMEM, "nccl communicator: out of memory");
    n->stream = m->stream;
    n->device = m->device;
    n->be = m->be;
    ncclResult_t e = ncclCommSplit(m->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &n->comm, NULL);
    if (e != ncclSuccess) {
        free(n);
        return DT_FAIL(DT_ERR_BACKEND, "nccl communicator: ncclCommSplit (color %d, key %d) failed: %s", color, key,
                       ncclGetErrorString(e));
    }
    if (color < 0 || !n->comm) {
        free(n);
        return DT_OK;
    }
    dt_status st = dt__nc_wrap(n, out);
    if (st != DT_OK) dt__nc_free_partial(n);
    return st;
}

static const dt_comm_ops dt__nc_ops = {
    .name = "nccl",
    .isend = dt__nc_isend,
    .irecv = dt__nc_irecv,
    .wait = dt__nc_wait,
    .test = dt__nc_test,
    .waitany = dt__nc_waitany,
    .barrier = dt__nc_barrier,
    .split = dt__nc_split,
    .allreduce_native = dt__nc_allreduce_native,
    .destroy = dt__nc_destroy,
    .scratch_alloc = dt__nc_scratch_alloc,
    .scratch_free = dt__nc_scratch_free,
    .add = dt__nc_add,
    .grouped = 1,
};

/* Rank 0's unique id to every rank of host (point-to-point on host). */
static dt_status dt__nc_share_id(dt_comm *host, ncclUniqueId *id)
{
    enum { TAG = 32100 }; /* user range; host carries nothing else meanwhile */
    if (host->rank == 0) {
        DT__NC_NCCL(ncclGetUniqueId(id));
        for (int r = 1; r < host->size; r++) {
            dt_comm_request *q = NULL;
            DT_CHECK(host->ops->isend(host, id, sizeof *id, r, TAG, &q));
            DT_CHECK(host->ops->wait(host, q));
        }
    } else {
        dt_comm_request *q = NULL;
        DT_CHECK(host->ops->irecv(host, id, sizeof *id, 0, TAG, &q));
        DT_CHECK(host->ops->wait(host, q));
    }
    return DT_OK;
}

dt_status dt_comm_nccl_create(dt_comm *host, dt_backend *be, dt_comm **out)
{
    if (!out) return DT_FAIL(DT_ERR_INVALID, "dt_comm_nccl_create: out is NULL");
    *out = NULL;
    if (!host) return DT_FAIL(DT_ERR_INVALID, "dt_comm_nccl_create: host communicator is NULL");
    if (!be || !dt__cuda_stream(be))
        return DT_FAIL(DT_ERR_INVALID, "NCCL communicator: needs the CUDA backend (--device cuda), got %s",
                       be ? be->name : "none");
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    DT_CHECK(dt__nc_share_id(host, &id));
    dt__nc *m = calloc(1, sizeof *m);
    if (!m) return DT_FAIL(DT_ERR_NOMEM, "nccl communicator: out of memory");
    m->stream = (cudaStream_t)dt__cuda_stream(be);
    m->device = dt__cuda_device(be);
    m->be = be;
    dt_status st = DT_OK;
    cudaError_t ce = cudaSetDevice(m->device);
    if (ce != cudaSuccess) {
        st = DT_FAIL(DT_ERR_BACKEND, "NCCL communicator: cudaSetDevice(%d) failed: %s", m->device,
                     cudaGetErrorString(ce));
        goto fail;
    }
    ncclResult_t ne = ncclCommInitRank(&m->comm, host->size, id, host->rank);
    if (ne != ncclSuccess) {
        m->comm = NULL;
        st = DT_FAIL(DT_ERR_BACKEND, "NCCL communicator: ncclCommInitRank (rank %d of %d) failed: %s", host->rank,
                     host->size, ncclGetErrorString(ne));
        goto fail;
    }
    st = dt__nc_wrap(m, out);
    if (st == DT_OK) return DT_OK;
fail:
    dt__nc_free_partial(m);
    return st;
}
