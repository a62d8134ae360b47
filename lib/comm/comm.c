/* comm.c: what every communicator shares (creation, dt_comm_free, argument
 * checks, the per-call count limit) and the "self" backend: one rank, rank 0,
 * talking to itself.
 *
 * Self keeps two queues of unmatched requests, sends and receives, each in
 * posting order. isend looks for the oldest receive with its tag (irecv for
 * the oldest send), copies the bytes at once and takes both requests off
 * their queues as matched; otherwise it queues. So messages with one tag
 * arrive in the order they were sent, as MPI guarantees, and no data is
 * buffered: an unmatched send still points at the caller's buffer.
 *
 * Invariants: a request is on at most one queue, and only while unmatched;
 * wait/test free a request (matched ones are no longer on any queue). A
 * wait on an unmatched request fails at once instead of hanging, since with
 * one rank nothing else can ever match it; test reports it as not done.
 * A message longer than the receive buffer fails the receive's wait, as
 * MPI_ERR_TRUNCATE does; a shorter one fills the front of it. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_internal.h"
#include "dt_time.h"

/* ---- shared by the backends ------------------------------------------- */

static size_t dt__comm_max_count_value; /* 0: INT_MAX */

size_t dt__comm_max_count(void) { return dt__comm_max_count_value ? dt__comm_max_count_value : (size_t)INT_MAX; }

void dt__comm_set_max_count(size_t n) { dt__comm_max_count_value = n > (size_t)INT_MAX ? (size_t)INT_MAX : n; }

dt_status dt__comm_new(const dt_comm_ops *ops, int rank, int size, void *impl, dt_comm **out)
{
    dt_comm *c = calloc(1, sizeof *c);
    if (c == NULL)
        return DT_FAIL(DT_ERR_NOMEM, "communicator '%s': out of memory for its %zu-byte handle", ops->name, sizeof *c);
    c->ops = ops;
    c->rank = rank;
    c->size = size;
    c->impl = impl;
    c->timeout_s = DT_COMM_TIMEOUT_DEFAULT;
    c->local_rank = -1;
    *out = c;
    return DT_OK;
}

dt_status dt_comm_set_timeout(dt_comm *c, double seconds)
{
    if (c == NULL) return DT_FAIL(DT_ERR_INVALID, "dt_comm_set_timeout: communicator is NULL");
    if (!isfinite(seconds) || seconds < 0 || seconds > 1e9)
        return DT_FAIL(DT_ERR_INVALID, "--comm-timeout %g: expected 0 (none) or seconds > 0, at most 1e9", seconds);
    c->timeout_s = seconds;
    return DT_OK;
}

void dt_comm_abort(dt_comm *c, int code)
{
    if (c && c->ops && c->ops->abort) c->ops->abort(c, code);
}

/* A waiter polls without yielding for its first DT__COMM_SPIN_NS, as
 * MPI_Wait would (a message on its way is taken at once), then yields the
 * core between polls (sched_yield) and after DT__COMM_SLEEP_AFTER_NS sleeps
 * 200 us between them (a pipeline bubble, a straggler, a dead peer). */
#define DT__COMM_SPIN_NS 1000000LL

void dt__comm_waiter_start(dt__comm_waiter *w, const dt_comm *c)
{
    w->start_ns = w->last_ns = dt_time_ns();
    w->deadline_ns = c->timeout_s > 0 ? w->start_ns + (long long)(c->timeout_s * 1e9) : 0;
    w->polls = 0;
}

int dt__comm_waiter_expired(dt__comm_waiter *w, long long now)
{
    /* A gap between two polls far above their 200 us sleep: this process
     * did not run (SIGSTOP, a suspended VM). That time is not the peer's
     * silence: without this, a rank resumed after being stopped blamed the
     * innocent rank it was waiting for, whose messages it had not yet
     * looked for. */
    if (now - w->last_ns > DT__COMM_GAP_NS && w->deadline_ns) w->deadline_ns += now - w->last_ns;
    w->last_ns = now;
    return w->deadline_ns && now >= w->deadline_ns;
}

int dt__comm_waiter_idle(dt__comm_waiter *w)
{
    if (++w->polls <= 16) return 0; /* the clock read is not worth it for the first few */
    const long long now = dt_time_ns(), waited = now - w->start_ns;
    if (dt__comm_waiter_expired(w, now)) return 1;
    if (waited < DT__COMM_SPIN_NS) return 0;
    if (waited < DT__COMM_SLEEP_AFTER_NS) {
        sched_yield();
    } else {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static int dt__comm_job_rank(const dt_comm *c, int r) { return c->ops->job_rank ? c->ops->job_rank(c, r) : r; }

dt_status dt__comm_timeout_fail(const dt_comm *c, dt_comm_request *const *reqs, int n, const char *file, int line)
{
    char peers[160] = "";
    size_t len = 0;
    int count = 0, any_recv = 0;
    for (int i = 0; i < n; i++)
        if (reqs[i] && !reqs[i]->is_send) any_recv = 1;
    for (int i = 0; i < n && len < sizeof peers - 16; i++) {
        const dt_comm_request *r = reqs[i];
        if (!r || r->is_send == any_recv) continue;
        const int p = dt__comm_job_rank(c, r->peer);
        int dup = 0; /* each peer once */
        for (int j = 0; j < i; j++)
            if (reqs[j] && reqs[j]->is_send == r->is_send && reqs[j]->peer == r->peer) dup = 1;
        if (dup) continue;
        len += (size_t)snprintf(peers + len, sizeof peers - len, "%s%d", count ? ", " : "", p);
        count++;
    }
    const int me = dt__comm_job_rank(c, c->rank);
    if (any_recv)
        return dt__fail(DT_ERR_BACKEND, file, line,
                        "rank %d: no message from rank%s %s for %g s (--comm-timeout %g): %s, or a rank %s for, "
                        "may have died or hung",
                        me, count > 1 ? "s" : "", peers, c->timeout_s, c->timeout_s, count > 1 ? "they" : "it",
                        count > 1 ? "they wait" : "it waits");
    return dt__fail(DT_ERR_BACKEND, file, line,
                    "rank %d: rank%s %s took no message for %g s (--comm-timeout %g): %s, or a rank %s for, may "
                    "have died or hung",
                    me, count > 1 ? "s" : "", peers, c->timeout_s, c->timeout_s, count > 1 ? "they" : "it",
                    count > 1 ? "they wait" : "it waits");
}

void dt_comm_free(dt_comm *c)
{
    if (c == NULL) return;
    if (c->ops && c->ops->destroy) c->ops->destroy(c);
    free(c);
}

dt_status dt_comm_waitany(dt_comm *c, int n, dt_comm_request **reqs, int *index)
{
    if (c == NULL || reqs == NULL || index == NULL)
        return DT_FAIL(DT_ERR_INVALID, "waitany: communicator, requests and index must not be NULL");
    *index = -1;
    int live = 0;
    for (int i = 0; i < n; i++) {
        if (reqs[i] == NULL) continue;
        DT_CHECK(dt__comm_check_request(c, "waitany", reqs[i]));
        live++;
    }
    if (live == 0)
        return DT_FAIL(DT_ERR_INVALID,
                       "waitany on communicator '%s': none of the %d requests is pending (expected at "
                       "least one)",
                       c->ops->name, n);
    return c->ops->waitany(c, n, reqs, index);
}

dt_status dt__comm_check_p2p(const dt_comm *c, const char *what, const void *buf, size_t bytes, int peer, int tag,
                             dt_comm_request **req)
{
    if (req == NULL)
        return DT_FAIL(DT_ERR_INVALID, "%s on communicator '%s': req is NULL (expected where to store the request)",
                       what, c->ops->name);
    *req = NULL;
    if (peer < 0 || peer >= c->size)
        return DT_FAIL(DT_ERR_INVALID, "%s: peer %d is not a rank of this %d-rank communicator (expected 0..%d)", what,
                       peer, c->size, c->size - 1);
    if (tag < 0 || tag > DT__COMM_TAG_MAX)
        return DT_FAIL(DT_ERR_INVALID, "%s to/from rank %d: tag %d out of range (expected 0..%d)", what, peer, tag,
                       DT__COMM_TAG_MAX);
    if (buf == NULL && bytes > 0)
        return DT_FAIL(DT_ERR_INVALID, "%s to/from rank %d (tag %d): buffer is NULL for %zu bytes", what, peer, tag,
                       bytes);
    return DT_OK;
}

void dt__comm_request_init(dt_comm_request *r, dt_comm *c, int is_send, int peer, int tag, size_t bytes)
{
    r->comm = c;
    r->is_send = is_send;
    r->peer = peer;
    r->tag = tag;
    r->bytes = bytes;
}

dt_status dt__comm_check_request(const dt_comm *c, const char *what, const dt_comm_request *r)
{
    if (r == NULL) return DT_FAIL(DT_ERR_INVALID, "%s on communicator '%s': request is NULL", what, c->ops->name);
    if (r->comm != c)
        return DT_FAIL(DT_ERR_INVALID,
                       "%s: the %s request (peer %d, tag %d) belongs to another communicator than the one given", what,
                       r->is_send ? "isend" : "irecv", r->peer, r->tag);
    return DT_OK;
}

dt_status dt__comm_check_buffer(const char *what, const float *buf, size_t count)
{
    if (buf == NULL && count > 0) return DT_FAIL(DT_ERR_INVALID, "%s: buffer is NULL for %zu floats", what, count);
    return DT_OK;
}

/* ---- the self backend ------------------------------------------------- */

typedef struct dt__self_req {
    dt_comm_request base;
    struct dt__self_req *next; /* next on its queue, while unmatched */
    const void *src;           /* isend: the caller's data */
    void *dst;                 /* irecv: where the data goes */
    int matched;
    size_t msg_bytes; /* irecv, once matched: bytes of the message */
} dt__self_req;

typedef struct dt__self {
    dt__self_req *sends, *recvs; /* unmatched, oldest first */
} dt__self;

/* Removes and returns the oldest request on *q with this tag, or NULL. */
static dt__self_req *dt__self_take(dt__self_req **q, int tag)
{
    for (dt__self_req **p = q; *p; p = &(*p)->next) {
        dt__self_req *r = *p;
        if (r->base.tag == tag) {
            *p = r->next;
            r->next = NULL;
            return r;
        }
    }
    return NULL;
}

static void dt__self_append(dt__self_req **q, dt__self_req *r)
{
    while (*q) q = &(*q)->next;
    *q = r;
}

static void dt__self_unlink(dt__self_req **q, dt__self_req *r)
{
    for (; *q; q = &(*q)->next)
        if (*q == r) {
            *q = r->next;
            r->next = NULL;
            return;
        }
}

static void dt__self_match(dt__self_req *send, dt__self_req *recv)
{
    /* Truncation is reported by the receive's wait; nothing is copied then. */
    if (send->base.bytes > 0 && send->base.bytes <= recv->base.bytes) memmove(recv->dst, send->src, send->base.bytes);
    recv->msg_bytes = send->base.bytes;
    send->matched = recv->matched = 1;
}

static dt_status dt__self_post(dt_comm *c, int is_send, const void *src, void *dst, size_t bytes, int peer, int tag,
                               dt_comm_request **req)
{
    DT_CHECK(dt__comm_check_p2p(c, is_send ? "isend" : "irecv", is_send ? src : dst, bytes, peer, tag, req));
    dt__self *s = c->impl;
    dt__self_req *r = calloc(1, sizeof *r);
    if (r == NULL)
        return DT_FAIL(DT_ERR_NOMEM, "%s (tag %d): out of memory for a request", is_send ? "isend" : "irecv", tag);
    dt__comm_request_init(&r->base, c, is_send, peer, tag, bytes);
    r->src = src;
    r->dst = dst;
    if (is_send) {
        dt__self_req *recv = dt__self_take(&s->recvs, tag);
        if (recv) dt__self_match(r, recv);
        else dt__self_append(&s->sends, r);
    } else {
        dt__self_req *send = dt__self_take(&s->sends, tag);
        if (send) dt__self_match(send, r);
        else dt__self_append(&s->recvs, r);
    }
    *req = &r->base;
    return DT_OK;
}

static dt_status dt__self_isend(dt_comm *c, const void *buf, size_t bytes, int peer, int tag, dt_comm_request **req)
{
    return dt__self_post(c, 1, buf, NULL, bytes, peer, tag, req);
}

static dt_status dt__self_irecv(dt_comm *c, void *buf, size_t bytes, int peer, int tag, dt_comm_request **req)
{
    return dt__self_post(c, 0, NULL, buf, bytes, peer, tag, req);
}

/* Frees a matched request, failing if it was a receive of a longer message. */
static dt_status dt__self_complete(dt__self_req *r)
{
    dt_status st = DT_OK;
    if (!r->base.is_send && r->msg_bytes > r->base.bytes)
        st = DT_FAIL(DT_ERR_INVALID,
                     "irecv from rank 0 (tag %d): the message has %zu bytes, more than the %zu-byte "
                     "receive buffer (expected at most the buffer's size)",
                     r->base.tag, r->msg_bytes, r->base.bytes);
    free(r);
    return st;
}

static dt_status dt__self_wait(dt_comm *c, dt_comm_request *req)
{
    DT_CHECK(dt__comm_check_request(c, "wait", req));
    dt__self_req *r = (dt__self_req *)req;
    if (r->matched) return dt__self_complete(r);
    dt__self *s = c->impl;
    int is_send = r->base.is_send, tag = r->base.tag;
    dt__self_unlink(is_send ? &s->sends : &s->recvs, r);
    free(r);
    const char *mine = is_send ? "isend" : "irecv", *other = is_send ? "irecv" : "isend";
    return DT_FAIL(DT_ERR_INVALID,
                   "wait on an %s with tag %d that no %s matches: with one rank it would never complete "
                   "(post the %s before waiting)",
                   mine, tag, other, other);
}

static dt_status dt__self_test(dt_comm *c, dt_comm_request *req, int *done)
{
    if (done == NULL) return DT_FAIL(DT_ERR_INVALID, "test on communicator 'self': done is NULL");
    *done = 0;
    DT_CHECK(dt__comm_check_request(c, "test", req));
    dt__self_req *r = (dt__self_req *)req;
    if (!r->matched) return DT_OK;
    *done = 1;
    return dt__self_complete(r);
}

/* With one rank a request completes only when its match was posted: take
 * the first matched one; none matched would never complete. */
static dt_status dt__self_waitany(dt_comm *c, int n, dt_comm_request **reqs, int *index)
{
    (void)c;
    for (int i = 0; i < n; i++) {
        dt__self_req *r = (dt__self_req *)reqs[i];
        if (r == NULL || !r->matched) continue;
        reqs[i] = NULL;
        *index = i;
        return dt__self_complete(r);
    }
    return DT_FAIL(DT_ERR_INVALID, "waitany on communicator 'self': no request is matched, so with one rank none "
                                   "would ever complete (post the matching isend/irecv first)");
}

static dt_status dt__self_barrier(dt_comm *c)
{
    (void)c;
    return DT_OK;
}

static dt_status dt__self_split(dt_comm *c, int color, int key, dt_comm **out)
{
    (void)c;
    (void)key;
    if (out == NULL) return DT_FAIL(DT_ERR_INVALID, "split (color %d): out is NULL", color);
    *out = NULL;
    if (color < 0) return DT_OK;
    return dt_comm_self_create(out);
}

static dt_status dt__self_allreduce_native(dt_comm *c, float *buf, size_t count)
{
    (void)c;
    /* The sum over one rank is the buffer itself. */
    return dt__comm_check_buffer("allreduce_native", buf, count);
}

static void dt__self_free_queue(dt__self_req *r)
{
    while (r) {
        dt__self_req *next = r->next;
        free(r);
        r = next;
    }
}

static void dt__self_destroy(dt_comm *c)
{
    dt__self *s = c->impl;
    if (s == NULL) return;
    /* Unmatched requests die with the communicator (their handles with them). */
    dt__self_free_queue(s->sends);
    dt__self_free_queue(s->recvs);
    free(s);
    c->impl = NULL;
}

static const dt_comm_ops dt__self_ops = {
    .name = "self",
    .isend = dt__self_isend,
    .irecv = dt__self_irecv,
    .wait = dt__self_wait,
    .test = dt__self_test,
    .waitany = dt__self_waitany,
    .barrier = dt__self_barrier,
    .split = dt__self_split,
    .allreduce_native = dt__self_allreduce_native,
    .destroy = dt__self_destroy,
};

dt_status dt_comm_self_create(dt_comm **out)
{
    if (out == NULL) return DT_FAIL(DT_ERR_INVALID, "dt_comm_self_create: out is NULL (expected where to store it)");
    *out = NULL;
    dt__self *s = calloc(1, sizeof *s);
    if (s == NULL) return DT_FAIL(DT_ERR_NOMEM, "dt_comm_self_create: out of memory");
    dt_status st = dt__comm_new(&dt__self_ops, 0, 1, s, out);
    if (st != DT_OK) free(s);
    return st;
}

int dt_comm_launched(void) { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK"); }
