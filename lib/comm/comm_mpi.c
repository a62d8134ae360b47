/* comm_mpi.c: the "mpi" communicator backend (built when configure found
 * MPI), plus dt_comm_finalize and dt_comm_have_mpi for such builds.
 *
 * Design:
 * - dt_comm_mpi_world starts MPI if nobody has (MPI_Init_thread asking for
 *   MPI_THREAD_SERIALIZED: dtrain calls MPI from one thread at a time, the
 *   caller's; its OpenMP workers never do) and remembers that it did, so
 *   that dt_comm_finalize finalises only an MPI that dtrain started.
 * - Every communicator, the world included, owns an MPI communicator of its
 *   own (the world's is a dup of MPI_COMM_WORLD), so dtrain's messages never
 *   match an application's, and destroy frees it (unless MPI is finalised).
 * - Each of them has MPI_ERRORS_RETURN, so MPI errors come back as
 *   DT_ERR_BACKEND statuses naming the operation, the MPI function and MPI's
 *   error string instead of aborting the job. When dtrain started MPI it
 *   also sets it on MPI_COMM_WORLD, which handles errors raised outside any
 *   communicator (datatypes); an application's own MPI_COMM_WORLD is left
 *   as the application set it.
 * - MPI counts are int. A message of more than dt__comm_max_count() bytes
 *   (INT_MAX) travels as one message of one derived datatype: q pieces of
 *   max bytes, then the r remaining bytes. Its type signature is still
 *   bytes x MPI_BYTE, so it matches any receive of at least as many bytes,
 *   and it stays a single message, so ordering per (peer, tag) holds.
 *   Reductions are elementwise, so allreduce_native simply runs pieces of at
 *   most max floats in turn (every rank has the same count).
 * - Waits (wait, waitany, barrier) poll with MPI_Testany against the
 *   communicator's timeout_s (MPI_Ibarrier for the barrier), yielding the
 *   core between polls (comm.c's waiter),
 *   and fail with DT_ERR_BACKEND naming the rank waited for once it has
 *   passed: a dead or hung rank stops the others instead of hanging them.
 *   timeout_s 0 keeps MPI's own blocking calls. A wait that timed out
 *   cancels (receives) and frees its request; waitany leaves them all to
 *   the caller. allreduce_native (--allreduce mpi) is MPI_Iallreduce
 *   polled the same way (MPI_Allreduce with timeout_s 0). Unbounded:
 *   split (MPI_Comm_split has no non-blocking form; it runs only while
 *   setting up).
 *
 * Invariants: every MPI call goes through DT__MPI_CHECK or
 * DT__MPI_CHECK_GOTO, except MPI_Error_string inside the reporter itself
 * and the frees on cleanup paths (DT__MPI_CLEANUP), whose failure would
 * only hide the first error, and the group look-ups of job_rank, which only
 * name ranks in messages and fall back to the communicator's own rank. */
#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"

/* 1 once dt_comm_mpi_world has called MPI_Init_thread. */
static int dt__mpi_we_initialised;

typedef struct dt__mpi {
    MPI_Comm comm; /* owned: freed by destroy */
} dt__mpi;

typedef struct dt__mpi_req {
    dt_comm_request base;
    MPI_Request mreq;
    MPI_Datatype type; /* MPI_BYTE, or the message's derived type (freed on completion) */
} dt__mpi_req;

/* Records "<context>: <MPI function> failed: <MPI's error string>" at the
 * caller's file:line (as DT_FAIL does) and returns DT_ERR_BACKEND. */
__attribute__((format(printf, 5, 6))) static dt_status dt__mpi_fail(int rc, const char *call, const char *file,
                                                                    int line, const char *fmt, ...)
{
    char ctx[256], err[MPI_MAX_ERROR_STRING];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    int len = 0;
    /* The one unchecked call: it is how failures are reported. */
    if (MPI_Error_string(rc, err, &len) != MPI_SUCCESS) snprintf(err, sizeof err, "MPI error code %d", rc);
    int name_len = (int)strcspn(call, "(");
    return dt__fail(DT_ERR_BACKEND, file, line, "%s: %.*s failed: %s", ctx, name_len, call, err);
}

/* Runs an MPI call; on failure records the context (printf arguments) with
 * MPI's error string at this file:line and returns DT_ERR_BACKEND. */
#define DT__MPI_CHECK(call, ...)                                                                            \
    do {                                                                                                    \
        int dt__mrc_ = (call);                                                                              \
        if (dt__mrc_ != MPI_SUCCESS) return dt__mpi_fail(dt__mrc_, #call, __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
/* The same, storing the status in st and jumping to label (for cleanup). */
#define DT__MPI_CHECK_GOTO(call, st, label, ...)                                   \
    do {                                                                           \
        int dt__mrc_ = (call);                                                     \
        if (dt__mrc_ != MPI_SUCCESS) {                                             \
            (st) = dt__mpi_fail(dt__mrc_, #call, __FILE__, __LINE__, __VA_ARGS__); \
            goto label;                                                            \
        }                                                                          \
    } while (0)
/* Releases on a path that is already failing: the first error is the one
 * reported, so a failure here is deliberately dropped. */
#define DT__MPI_CLEANUP(call) ((void)(call))

static const dt_comm_ops dt__mpi_ops;

static dt_status dt__mpi_free_comm(MPI_Comm *mc)
{
    int finalized = 0;
    DT__MPI_CHECK(MPI_Finalized(&finalized), "freeing a communicator");
    /* After MPI_Finalize no MPI object may be touched; the process is ending. */
    if (finalized || *mc == MPI_COMM_NULL) return DT_OK;
    DT__MPI_CHECK(MPI_Comm_free(mc), "freeing a communicator");
    return DT_OK;
}

/* Wraps an MPI communicator we own into a dt_comm (freeing it on failure). */
static dt_status dt__mpi_wrap(MPI_Comm mc, dt_comm **out)
{
    dt_status st = DT_OK;
    int rank = 0, size = 0;
    dt__mpi *m = malloc(sizeof *m);
    if (m == NULL) {
        st = DT_FAIL(DT_ERR_NOMEM, "MPI communicator: out of memory for its state");
        goto fail;
    }
    m->comm = mc;
    DT__MPI_CHECK_GOTO(MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN), st, fail, "new communicator");
    DT__MPI_CHECK_GOTO(MPI_Comm_rank(mc, &rank), st, fail, "new communicator");
    DT__MPI_CHECK_GOTO(MPI_Comm_size(mc, &size), st, fail, "new communicator");
    DT_CHECK_GOTO(dt__comm_new(&dt__mpi_ops, rank, size, m, out), st, fail);
    return DT_OK;
fail:
    free(m);
    DT__MPI_CLEANUP(MPI_Comm_free(&mc));
    return st;
}

dt_status dt_comm_mpi_world(dt_comm **out)
{
    if (out == NULL) return DT_FAIL(DT_ERR_INVALID, "dt_comm_mpi_world: out is NULL (expected where to store it)");
    *out = NULL;
    int initialized = 0, finalized = 0;
    DT__MPI_CHECK(MPI_Finalized(&finalized), "dt_comm_mpi_world");
    if (finalized)
        return DT_FAIL(DT_ERR_INVALID, "dt_comm_mpi_world: MPI was already finalised in this process (expected "
                                       "dt_comm_finalize only once, at the end of the program)");
    DT__MPI_CHECK(MPI_Initialized(&initialized), "dt_comm_mpi_world");
    if (!initialized) {
        /* provided may come back lower only from an MPI built without
         * threads; dtrain makes its MPI calls from the caller's thread
         * alone, so it goes on regardless. */
        int provided = MPI_THREAD_SINGLE;
        DT__MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided), "dt_comm_mpi_world: starting MPI");
        dt__mpi_we_initialised = 1;
        DT__MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "dt_comm_mpi_world");
    }
    MPI_Comm dup = MPI_COMM_NULL;
    DT__MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "dt_comm_mpi_world: duplicating MPI_COMM_WORLD");
    DT_CHECK(dt__mpi_wrap(dup, out));
    /* the rank among the processes sharing this node, for the GPU choice */
    dt_status st = DT_OK;
    MPI_Comm node = MPI_COMM_NULL;
    int local = -1;
    DT__MPI_CHECK_GOTO(MPI_Comm_split_type(dup, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), st, fail,
                       "dt_comm_mpi_world: grouping the ranks by node");
    DT__MPI_CHECK_GOTO(MPI_Comm_rank(node, &local), st, fail, "dt_comm_mpi_world: the rank on this node");
    DT__MPI_CHECK_GOTO(MPI_Comm_free(&node), st, fail, "dt_comm_mpi_world");
    (*out)->local_rank = local;
    return DT_OK;
fail:
    if (node != MPI_COMM_NULL) DT__MPI_CLEANUP(MPI_Comm_free(&node));
    dt_comm_free(*out);
    *out = NULL;
    return st;
}

dt_status dt_comm_finalize(void)
{
    if (!dt__mpi_we_initialised) return DT_OK;
    int finalized = 0;
    DT__MPI_CHECK(MPI_Finalized(&finalized), "dt_comm_finalize");
    if (finalized) return DT_OK;
    DT__MPI_CHECK(MPI_Finalize(), "dt_comm_finalize");
    return DT_OK;
}

int dt_comm_have_mpi(void) { return 1; }

/* The datatype and count for a message of bytes: MPI_BYTE x bytes when that
 * fits one call, else one committed derived type (count 1) that the request
 * owns until it completes. */
static dt_status dt__mpi_bytes_type(size_t bytes, const char *what, MPI_Datatype *type, int *count)
{
    size_t piece = dt__comm_max_count();
    if (bytes <= piece) {
        *type = MPI_BYTE;
        *count = (int)bytes;
        return DT_OK;
    }
    size_t q = bytes / piece, r = bytes % piece;
    if (q > (size_t)INT_MAX)
        return DT_FAIL(DT_ERR_UNSUPPORTED, "%s: a message of %zu bytes is too large for MPI (expected at most %zu)",
                       what, bytes, (size_t)INT_MAX * piece);
    dt_status st = DT_OK;
    MPI_Datatype piece_type = MPI_DATATYPE_NULL, msg = MPI_DATATYPE_NULL;
    DT__MPI_CHECK_GOTO(MPI_Type_contiguous((int)piece, MPI_BYTE, &piece_type), st, fail, "%s of %zu bytes", what,
                       bytes);
    if (r == 0) {
        DT__MPI_CHECK_GOTO(MPI_Type_contiguous((int)q, piece_type, &msg), st, fail, "%s of %zu bytes", what, bytes);
    } else {
        int lens[2] = {(int)q, (int)r};
        MPI_Aint displs[2] = {0, (MPI_Aint)(q * piece)};
        MPI_Datatype types[2] = {piece_type, MPI_BYTE};
        DT__MPI_CHECK_GOTO(MPI_Type_create_struct(2, lens, displs, types, &msg), st, fail, "%s of %zu bytes", what,
                           bytes);
    }
    DT__MPI_CHECK_GOTO(MPI_Type_commit(&msg), st, fail, "%s of %zu bytes", what, bytes);
    DT__MPI_CHECK_GOTO(MPI_Type_free(&piece_type), st, fail, "%s of %zu bytes", what, bytes);
    *type = msg;
    *count = 1;
    return DT_OK;
fail:
    if (msg != MPI_DATATYPE_NULL) DT__MPI_CLEANUP(MPI_Type_free(&msg));
    if (piece_type != MPI_DATATYPE_NULL) DT__MPI_CLEANUP(MPI_Type_free(&piece_type));
    return st;
}

/* Frees a request that MPI has completed (or failed), with its datatype. */
static dt_status dt__mpi_req_free(dt__mpi_req *r)
{
    dt_status st = DT_OK;
    if (r->type != MPI_BYTE)
        DT__MPI_CHECK_GOTO(MPI_Type_free(&r->type), st, done, "%s rank %d (tag %d, %zu bytes): releasing its datatype",
                           r->base.is_send ? "isend to" : "irecv from", r->base.peer, r->base.tag, r->base.bytes);
done:
    free(r);
    return st;
}

/* Frees a request on a path that is already failing. */
static void dt__mpi_req_drop(dt__mpi_req *r)
{
    if (r->type != MPI_BYTE) DT__MPI_CLEANUP(MPI_Type_free(&r->type));
    free(r);
}

static dt_status dt__mpi_post(dt_comm *c, int is_send, const void *src, void *dst, size_t bytes, int peer, int tag,
                              dt_comm_request **req)
{
    const char *what = is_send ? "isend" : "irecv";
    DT_CHECK(dt__comm_check_p2p(c, what, is_send ? src : dst, bytes, peer, tag, req));
    dt__mpi *m = c->impl;
    dt__mpi_req *r = malloc(sizeof *r);
    if (r == NULL) return DT_FAIL(DT_ERR_NOMEM, "%s (peer %d, tag %d): out of memory for a request", what, peer, tag);
    dt__comm_request_init(&r->base, c, is_send, peer, tag, bytes);
    r->mreq = MPI_REQUEST_NULL;
    r->type = MPI_BYTE;
    dt_status st = DT_OK;
    int count = 0;
    DT_CHECK_GOTO(dt__mpi_bytes_type(bytes, what, &r->type, &count), st, fail);
    if (is_send)
        DT__MPI_CHECK_GOTO(MPI_Isend(src, count, r->type, peer, tag, m->comm, &r->mreq), st, fail,
                           "isend to rank %d (tag %d, %zu bytes)", peer, tag, bytes);
    else
        DT__MPI_CHECK_GOTO(MPI_Irecv(dst, count, r->type, peer, tag, m->comm, &r->mreq), st, fail,
                           "irecv from rank %d (tag %d, %zu bytes)", peer, tag, bytes);
    *req = &r->base;
    return DT_OK;
fail:
    dt__mpi_req_drop(r);
    return st;
}

static dt_status dt__mpi_isend(dt_comm *c, const void *buf, size_t bytes, int peer, int tag, dt_comm_request **req)
{
    return dt__mpi_post(c, 1, buf, NULL, bytes, peer, tag, req);
}

static dt_status dt__mpi_irecv(dt_comm *c, void *buf, size_t bytes, int peer, int tag, dt_comm_request **req)
{
    return dt__mpi_post(c, 0, NULL, buf, bytes, peer, tag, req);
}

/* Polls mr(n) with MPI_Testany (MPI_Test for one) until one completes (*k,
 * MPI_UNDEFINED when none is active) or c's timeout passes (*timed_out =
 * 1), yielding the core in between (dt__comm_waiter_idle). Without a
 * timeout: MPI_Waitany (MPI_Wait for one). */
static dt_status dt__mpi_poll(dt_comm *c, int n, MPI_Request *mr, int *k, int *timed_out, const char *what)
{
    *timed_out = 0;
    if (c->timeout_s <= 0) {
        if (n == 1) {
            DT__MPI_CHECK(MPI_Wait(mr, MPI_STATUS_IGNORE), "%s", what);
            *k = 0;
        } else {
            DT__MPI_CHECK(MPI_Waitany(n, mr, k, MPI_STATUS_IGNORE), "%s", what);
        }
        return DT_OK;
    }
    dt__comm_waiter w;
    dt__comm_waiter_start(&w, c);
    for (;;) {
        int flag = 0;
        if (n == 1) { /* a wait: MPI_Test names the failure as test does */
            DT__MPI_CHECK(MPI_Test(mr, &flag, MPI_STATUS_IGNORE), "%s", what);
            *k = 0;
        } else {
            DT__MPI_CHECK(MPI_Testany(n, mr, k, &flag, MPI_STATUS_IGNORE), "%s", what);
        }
        if (flag) return DT_OK;
        if (dt__comm_waiter_idle(&w)) {
            *timed_out = 1;
            return DT_OK;
        }
    }
}

/* A request whose wait timed out: the caller's buffer must be let go of, so
 * a receive is cancelled and the request freed (MPI finishes or drops a
 * send on its own); failures are dropped, the timeout is the error. */
static void dt__mpi_req_abandon(dt__mpi_req *r)
{
    if (r->mreq != MPI_REQUEST_NULL) {
        if (!r->base.is_send) DT__MPI_CLEANUP(MPI_Cancel(&r->mreq));
        DT__MPI_CLEANUP(MPI_Request_free(&r->mreq));
    }
    dt__mpi_req_drop(r);
}

static dt_status dt__mpi_wait(dt_comm *c, dt_comm_request *req)
{
    DT_CHECK(dt__comm_check_request(c, "wait", req));
    dt__mpi_req *r = (dt__mpi_req *)req;
    dt_status st = DT_OK;
    char what[96];
    snprintf(what, sizeof what, "wait on %s rank %d (tag %d, %zu bytes)", r->base.is_send ? "isend to" : "irecv from",
             r->base.peer, r->base.tag, r->base.bytes);
    int k = MPI_UNDEFINED, timed_out = 0;
    DT_CHECK_GOTO(dt__mpi_poll(c, 1, &r->mreq, &k, &timed_out, what), st, failed);
    if (timed_out) {
        dt_comm_request *one = req;
        st = DT__COMM_TIMEOUT(c, &one, 1);
        dt__mpi_req_abandon(r);
        return st;
    }
    return dt__mpi_req_free(r);
failed:
    dt__mpi_req_drop(r);
    return st;
}

static dt_status dt__mpi_test(dt_comm *c, dt_comm_request *req, int *done)
{
    if (done == NULL) return DT_FAIL(DT_ERR_INVALID, "test on communicator 'mpi': done is NULL");
    *done = 0;
    DT_CHECK(dt__comm_check_request(c, "test", req));
    dt__mpi_req *r = (dt__mpi_req *)req;
    dt_status st = DT_OK;
    int flag = 0;
    DT__MPI_CHECK_GOTO(MPI_Test(&r->mreq, &flag, MPI_STATUS_IGNORE), st, failed,
                       "test on %s rank %d (tag %d, %zu bytes)", r->base.is_send ? "isend to" : "irecv from",
                       r->base.peer, r->base.tag, r->base.bytes);
    if (!flag) return DT_OK;
    *done = 1;
    return dt__mpi_req_free(r);
failed:
    /* A failed test completes the request: it is gone, so the caller stops polling. */
    *done = 1;
    dt__mpi_req_drop(r);
    return st;
}

static dt_status dt__mpi_waitany(dt_comm *c, int n, dt_comm_request **reqs, int *index)
{
    MPI_Request stack[16], *mr = n <= 16 ? stack : malloc((size_t)n * sizeof *mr);
    if (mr == NULL) return DT_FAIL(DT_ERR_NOMEM, "waitany over %d requests: out of memory", n);
    for (int i = 0; i < n; i++) mr[i] = reqs[i] ? ((dt__mpi_req *)reqs[i])->mreq : MPI_REQUEST_NULL;
    dt_status st = DT_OK;
    int k = MPI_UNDEFINED, timed_out = 0;
    char what[48];
    snprintf(what, sizeof what, "waitany over %d requests", n);
    DT_CHECK_GOTO(dt__mpi_poll(c, n, mr, &k, &timed_out, what), st, done);
    if (timed_out) { /* every request stays the caller's, still pending */
        st = DT__COMM_TIMEOUT(c, reqs, n);
        goto done;
    }
    if (k == MPI_UNDEFINED || k < 0 || k >= n) {
        st = DT_FAIL(DT_ERR_BACKEND, "waitany over %d requests: MPI_Waitany completed none", n);
        goto done;
    }
    dt__mpi_req *r = (dt__mpi_req *)reqs[k];
    r->mreq = mr[k];
    reqs[k] = NULL;
    *index = k;
    st = dt__mpi_req_free(r);
done:
    if (mr != stack) free(mr);
    return st;
}

/* A non-blocking collective's request (the barrier, allreduce_native)
 * polled until c's timeout; the failure names no one (any rank may be the one missing). MPI
 * forbids freeing or cancelling an active collective request, so after a
 * timeout it is left behind (the communicator is unusable then anyway). */
static dt_status dt__mpi_coll_wait(dt_comm *c, MPI_Request *mr, const char *what)
{
    int k = MPI_UNDEFINED, timed_out = 0;
    DT_CHECK(dt__mpi_poll(c, 1, mr, &k, &timed_out, what));
    if (!timed_out) return DT_OK;
    const int me = c->ops->job_rank(c, c->rank);
    return DT_FAIL(DT_ERR_BACKEND,
                   "rank %d: %s not complete after %g s (--comm-timeout %g): a rank may have died or hung", me, what,
                   c->timeout_s, c->timeout_s);
}

static dt_status dt__mpi_barrier(dt_comm *c)
{
    dt__mpi *m = c->impl;
    if (c->timeout_s <= 0) {
        DT__MPI_CHECK(MPI_Barrier(m->comm), "barrier of %d ranks", c->size);
        return DT_OK;
    }
    MPI_Request mr = MPI_REQUEST_NULL;
    char what[48];
    snprintf(what, sizeof what, "barrier of %d ranks", c->size);
    DT__MPI_CHECK(MPI_Ibarrier(m->comm, &mr), "%s", what);
    return dt__mpi_coll_wait(c, &mr, what);
}

static dt_status dt__mpi_split(dt_comm *c, int color, int key, dt_comm **out)
{
    if (out == NULL) return DT_FAIL(DT_ERR_INVALID, "split (color %d): out is NULL", color);
    *out = NULL;
    dt__mpi *m = c->impl;
    MPI_Comm nc = MPI_COMM_NULL;
    DT__MPI_CHECK(MPI_Comm_split(m->comm, color < 0 ? MPI_UNDEFINED : color, key, &nc), "split with color %d, key %d",
                  color, key);
    if (nc == MPI_COMM_NULL) return DT_OK;
    DT_CHECK(dt__mpi_wrap(nc, out));
    (*out)->timeout_s = c->timeout_s;
    (*out)->local_rank = c->local_rank; /* the process's, not the sub-group's */
    return DT_OK;
}

static dt_status dt__mpi_allreduce_native(dt_comm *c, float *buf, size_t count)
{
    DT_CHECK(dt__comm_check_buffer("allreduce_native", buf, count));
    dt__mpi *m = c->impl;
    size_t piece = dt__comm_max_count();
    for (size_t off = 0; off < count; off += piece) {
        size_t n = count - off < piece ? count - off : piece;
        char what[96];
        snprintf(what, sizeof what, "allreduce (--allreduce mpi) of %zu floats (elements %zu..%zu)", count, off,
                 off + n - 1);
        if (c->timeout_s <= 0) { /* --comm-timeout 0: MPI's own blocking call */
            DT__MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)n, MPI_FLOAT, MPI_SUM, m->comm), "%s", what);
            continue;
        }
        /* bounded like every other wait: the non-blocking form polled to
         * the communicator's deadline (one deadline per piece) */
        MPI_Request mr = MPI_REQUEST_NULL;
        DT__MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf + off, (int)n, MPI_FLOAT, MPI_SUM, m->comm, &mr), "%s", what);
        DT_CHECK(dt__mpi_coll_wait(c, &mr, what));
    }
    return DT_OK;
}

/* The rank in MPI_COMM_WORLD of rank r of c (r itself if that cannot be
 * found out: this only names ranks in messages). */
static int dt__mpi_job_rank(const dt_comm *c, int r)
{
    const dt__mpi *m = c->impl;
    MPI_Group g = MPI_GROUP_NULL, wg = MPI_GROUP_NULL;
    int out = MPI_UNDEFINED;
    if (MPI_Comm_group(m->comm, &g) == MPI_SUCCESS && MPI_Comm_group(MPI_COMM_WORLD, &wg) == MPI_SUCCESS &&
        MPI_Group_translate_ranks(g, 1, &r, wg, &out) != MPI_SUCCESS)
        out = MPI_UNDEFINED;
    if (g != MPI_GROUP_NULL) DT__MPI_CLEANUP(MPI_Group_free(&g));
    if (wg != MPI_GROUP_NULL) DT__MPI_CLEANUP(MPI_Group_free(&wg));
    return out == MPI_UNDEFINED ? r : out;
}

/* The whole job, whatever communicator failed: every rank must go. */
static void dt__mpi_abort(dt_comm *c, int code)
{
    (void)c;
    /* if this returns, there is nothing better to do than the caller's exit */
    DT__MPI_CLEANUP(MPI_Abort(MPI_COMM_WORLD, code));
}

static void dt__mpi_destroy(dt_comm *c)
{
    dt__mpi *m = c->impl;
    if (m == NULL) return;
    /* destroy cannot return a status; a failure stays in dt_last_error(). */
    (void)dt__mpi_free_comm(&m->comm);
    free(m);
    c->impl = NULL;
}

static const dt_comm_ops dt__mpi_ops = {
    .name = "mpi",
    .isend = dt__mpi_isend,
    .irecv = dt__mpi_irecv,
    .wait = dt__mpi_wait,
    .test = dt__mpi_test,
    .waitany = dt__mpi_waitany,
    .barrier = dt__mpi_barrier,
    .split = dt__mpi_split,
    .allreduce_native = dt__mpi_allreduce_native,
    .destroy = dt__mpi_destroy,
    .job_rank = dt__mpi_job_rank,
    .abort = dt__mpi_abort,
};
