/* zero_queue.c: ZeRO-2/3's collectives in issue order (see zero_queue.h).
 *
 * What q owns: a ring of requests (kind, buffer, count), the thread that
 * runs them (when threaded), the first error and its message (dt_last_error
 * is per thread, so the thread's is copied here), and the lock that the
 * trace hooks take.
 *
 * Invariants: requests are done in issue order (done_seq counts them); the
 * ring never holds more than DT__ZQ_SLOTS undone requests (issue waits for
 * room); after an error every later request is marked done without
 * running and every wait returns the error (the peers that did not fail
 * wait in their collective until the communicator's timeout ends them, as
 * for every collective failure in dtrain). */
#define _POSIX_C_SOURCE 200809L
#include "zero_queue.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "dt_internal.h"

#define DT__ZQ_SLOTS 8

typedef struct dt__zq_req {
    dt__zq_kind kind;
    float *buf;
    size_t n;
} dt__zq_req;

struct dt__zq {
    dt_comm *dp;
    dt_collective_opts coll, wrapped; /* the caller's, and the one the collectives get (the hook locked) */
    int has_coll, threaded;
    dt__zq_req ring[DT__ZQ_SLOTS];
    int64_t issued, done; /* requests issued, done */
    dt_status st;         /* the first failure, or DT_OK */
    char err[512];
    int stop;
    pthread_t th;
    pthread_mutex_t mu, hook_mu;
    pthread_cond_t cv;
};

static void dt__zq_hook(void *ctx, const char *phase, int step, int peer, size_t bytes, int64_t t0, int64_t t1)
{
    dt__zq *q = ctx;
    pthread_mutex_lock(&q->hook_mu);
    q->coll.hook(q->coll.hook_ctx, phase, step, peer, bytes, t0, t1);
    pthread_mutex_unlock(&q->hook_mu);
}

void dt__zq_set_coll(dt__zq *q, const dt_collective_opts *coll)
{
    q->has_coll = coll != NULL;
    if (!coll) return;
    q->coll = *coll;
    q->wrapped = *coll;
    if (coll->hook) q->wrapped.hook = dt__zq_hook, q->wrapped.hook_ctx = q;
}

static dt_status dt__zq_run(dt__zq *q, const dt__zq_req *r)
{
    const dt_collective_opts *o = q->has_coll ? &q->wrapped : NULL;
    return r->kind == DT__ZQ_REDUCE_SCATTER ? dt_comm_reduce_scatter(q->dp, r->buf, r->n, o)
                                            : dt_comm_all_gather(q->dp, r->buf, r->n, o);
}

static void *dt__zq_main(void *arg)
{
    dt__zq *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (q->done == q->issued && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
        if (q->done == q->issued) break; /* stopped with nothing left */
        const dt__zq_req r = q->ring[q->done % DT__ZQ_SLOTS];
        const int failed = q->st != DT_OK;
        pthread_mutex_unlock(&q->mu);
        const dt_status st = failed ? DT_OK : dt__zq_run(q, &r);
        pthread_mutex_lock(&q->mu);
        if (st != DT_OK && q->st == DT_OK) {
            q->st = st;
            snprintf(q->err, sizeof q->err, "%s", dt_last_error());
        }
        q->done++;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

dt_status dt__zq_create(dt_comm *dp, const dt_collective_opts *coll, int threaded, dt__zq **out)
{
    *out = NULL;
    dt__zq *q = calloc(1, sizeof *q);
    if (!q) return DT_FAIL(DT_ERR_NOMEM, "--zero-stage: out of memory for the collectives' queue");
    q->dp = dp;
    dt__zq_set_coll(q, coll);
    pthread_mutex_init(&q->mu, NULL);
    pthread_mutex_init(&q->hook_mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    if (threaded && pthread_create(&q->th, NULL, dt__zq_main, q) != 0) {
        dt__zq_free(q);
        return DT_FAIL(DT_ERR_BACKEND, "--zero-prefetch: cannot start the communication thread");
    }
    q->threaded = threaded;
    *out = q;
    return DT_OK;
}

void dt__zq_free(dt__zq *q)
{
    if (!q) return;
    if (q->threaded) {
        pthread_mutex_lock(&q->mu);
        q->stop = 1;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->th, NULL);
    }
    pthread_mutex_destroy(&q->mu);
    pthread_mutex_destroy(&q->hook_mu);
    pthread_cond_destroy(&q->cv);
    free(q);
}

int dt__zq_threaded(const dt__zq *q) { return q->threaded; }

dt_status dt__zq_issue(dt__zq *q, dt__zq_kind kind, float *buf, size_t n, int64_t *seq)
{
    const dt__zq_req r = {.kind = kind, .buf = buf, .n = n};
    if (!q->threaded) {
        *seq = q->issued++;
        q->done = q->issued;
        return dt__zq_run(q, &r);
    }
    pthread_mutex_lock(&q->mu);
    while (q->issued - q->done >= DT__ZQ_SLOTS) pthread_cond_wait(&q->cv, &q->mu);
    q->ring[q->issued % DT__ZQ_SLOTS] = r;
    *seq = q->issued++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return DT_OK;
}

dt_status dt__zq_wait(dt__zq *q, int64_t seq)
{
    if (!q->threaded) return DT_OK;
    pthread_mutex_lock(&q->mu);
    while (q->done <= seq) pthread_cond_wait(&q->cv, &q->mu);
    const dt_status st = q->st;
    pthread_mutex_unlock(&q->mu);
    if (st != DT_OK) return DT_FAIL(st, "%s", q->err);
    return DT_OK;
}

dt_status dt__zq_drain(dt__zq *q) { return q->issued ? dt__zq_wait(q, q->issued - 1) : DT_OK; }

void dt__zq_locked(dt__zq *q, void (*fn)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&q->hook_mu);
    fn(ctx);
    pthread_mutex_unlock(&q->hook_mu);
}
