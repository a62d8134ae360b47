/* ps.c: the parameter server (see ps.h): shard assignment, the servers'
 * loops (ps-sync, ps-async with bounded staleness) and the workers' side of
 * the push/pull protocol. */
#define _POSIX_C_SOURCE 200809L
#include "ps.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_internal.h"
#include "dt_internal.h"
#include "dt_time.h"
#include "update.h"

/* Tags of the protocol on the world communicator (below the collectives' 32704..). */
enum { DT__PS_TAG_HDR = 32000, DT__PS_TAG_DATA, DT__PS_TAG_RHDR, DT__PS_TAG_RDATA };
/* Message kinds. */
enum { DT__PS_PUSH = 1, DT__PS_DONE, DT__PS_REPLY, DT__PS_FINAL, DT__PS_INIT, DT__PS_SAVE, DT__PS_SAVED };

/* The header of every message (the same on every rank of one build). */
typedef struct dt__ps_msg {
    int64_t kind;
    int64_t iter;      /* push: the worker's step; reply: the server's version after the update */
    int64_t staleness; /* reply: updates applied between the worker's last pull and this push */
    int64_t skipped, first_bad;
    double loss, norm, clip, lr, loss_scale;
} dt__ps_msg;
_Static_assert(sizeof(dt__ps_msg) == DT_PS_MSG_HEADER_BYTES, "ps.h: DT_PS_MSG_HEADER_BYTES is not sizeof(dt__ps_msg)");

struct dt__ps {
    dt_comm *world;
    dt_comm *group; /* the workers' communicator on a worker, the servers' on a server */
    int async, W, K, index, is_server, max_staleness;
    const dt_paramset *layout;
    int *t_lo;   /* (K + 1) server s holds tensors t_lo[s] .. t_lo[s+1]-1 */
    size_t *off; /* (K + 1) and elements off[s] .. off[s+1]-1 of the flat buffer */
    int finished;
    dt__ps_stats stats;
    int64_t *worker_max; /* (W) scratch for the statistics' maximum */
    /* server */
    dt_backend *be;
    dt_paramset sub;  /* the shard's own layout (offsets from 0) */
    dt_buffer params; /* (len) the shard's weights */
    dt_buffer grads;  /* (len) ps-sync: the summed gradient */
    dt_buffer rbuf;   /* (W, len) each worker's last push */
    dt_optim opt;
    int opt_ready;
    dt_loss_scaler scaler;
    int64_t version; /* updates applied (as of the last save point or the end) */
};

void dt__ps_server_tensors(const dt__ps *ps, int *t_lo, int *t_hi)
{
    const int s = ps->is_server ? ps->index : 0;
    *t_lo = ps->t_lo[s];
    *t_hi = ps->t_lo[s + 1];
}
const dt_paramset *dt__ps_server_layout(const dt__ps *ps) { return &ps->sub; }
float *dt__ps_server_params(dt__ps *ps) { return ps->params.data; }
dt_optim *dt__ps_server_optim(dt__ps *ps) { return ps->opt_ready ? &ps->opt : NULL; }
dt_loss_scaler *dt__ps_server_scaler(dt__ps *ps) { return &ps->scaler; }
int64_t dt__ps_server_version(const dt__ps *ps) { return ps->version; }

int dt__ps_is_server(const dt__ps *ps) { return ps->is_server; }
int dt__ps_num_workers(const dt__ps *ps) { return ps->W; }
dt_comm *dt__ps_workers(const dt__ps *ps) { return ps->is_server ? NULL : ps->group; }
int dt__ps_index(const dt__ps *ps) { return ps->index; }
size_t dt__ps_shard_len(const dt__ps *ps, int s) { return ps->off[s + 1] - ps->off[s]; }
int dt__ps_finished(const dt__ps *ps) { return ps->finished; }

/* Contiguous runs of whole tensors, cut where the running size first
 * reaches s/K of the model, each server keeping at least one tensor. */
static dt_status dt__ps_shards(dt__ps *ps)
{
    const dt_paramset *L = ps->layout;
    const int K = ps->K, n = L->count;
    if (K > n)
        return DT_FAIL(DT_ERR_INVALID,
                       "--num-ps-servers %d: the model has only %d tensors to share out (expected at "
                       "most %d servers)",
                       K, n, n);
    ps->t_lo = calloc((size_t)K + 1, sizeof *ps->t_lo);
    ps->off = calloc((size_t)K + 1, sizeof *ps->off);
    if (!ps->t_lo || !ps->off) return DT_FAIL(DT_ERR_NOMEM, "parameter server: out of memory");
    for (int s = 1; s < K; s++) {
        const double target = (double)L->numel * s / K;
        int t = ps->t_lo[s - 1] + 1;
        while (t < n - (K - s) && (double)L->info[t].offset < target) t++;
        ps->t_lo[s] = t;
    }
    ps->t_lo[K] = n;
    for (int s = 0; s < K; s++) ps->off[s] = L->info[ps->t_lo[s]].offset;
    ps->off[K] = L->numel;
    return DT_OK;
}

dt_status dt__ps_create(const dt__ps_setup *s, dt__ps **out)
{
    *out = NULL;
    const int N = s->world->size, K = s->num_servers;
    if (K < 1 || K >= N)
        return DT_FAIL(DT_ERR_INVALID, "--num-ps-servers %d: with %d ranks expected 1..%d (at least one worker)", K, N,
                       N - 1);
    dt__ps *ps = calloc(1, sizeof *ps);
    if (!ps) return DT_FAIL(DT_ERR_NOMEM, "parameter server: out of memory");
    ps->world = s->world;
    ps->async = s->async;
    ps->K = K;
    ps->W = N - K;
    ps->max_staleness = s->max_staleness;
    ps->layout = s->layout;
    ps->is_server = s->world->rank >= ps->W;
    ps->index = ps->is_server ? s->world->rank - ps->W : s->world->rank;
    dt_paramset_init(&ps->sub);
    dt_status st = DT_OK;
    if (ps->async && ps->max_staleness >= 0 && ps->max_staleness < ps->W - 1) {
        st = DT_FAIL(DT_ERR_INVALID,
                     "--max-staleness %d: with %d workers expected at least %d (one round of the "
                     "others' pushes)",
                     ps->max_staleness, ps->W, ps->W - 1);
        goto fail;
    }
    ps->worker_max = calloc((size_t)ps->W, sizeof *ps->worker_max);
    if (!ps->worker_max) {
        st = DT_FAIL(DT_ERR_NOMEM, "parameter server: out of memory");
        goto fail;
    }
    DT_CHECK_GOTO(dt__ps_shards(ps), st, fail);
    DT_CHECK_GOTO(s->world->ops->split(s->world, ps->is_server, s->world->rank, &ps->group), st, fail);
    *out = ps;
    return DT_OK;
fail:
    dt__ps_free(ps);
    return st;
}

void dt__ps_free(dt__ps *ps)
{
    if (!ps) return;
    if (ps->opt_ready) dt_optim_free(&ps->opt);
    dt_buffer_free(&ps->params);
    dt_buffer_free(&ps->grads);
    dt_buffer_free(&ps->rbuf);
    dt_paramset_free(&ps->sub);
    dt_comm_free(ps->group);
    free(ps->t_lo);
    free(ps->off);
    free(ps->worker_max);
    free(ps);
}

/* ---- point-to-point helpers ---------------------------------------------- */

/* 1 if a request of reqs(n) is still pending (NULL reqs: none). */
static int dt__ps_any(dt_comm_request *const *reqs, int n)
{
    for (int i = 0; reqs && i < n; i++)
        if (reqs[i]) return 1;
    return 0;
}

/* Every request of reqs(n) (NULL entries are done), as waitany calls: the
 * --comm-timeout deadline runs from the last completion, so a peer that
 * stopped fails the wait one timeout after it last answered. (Waiting on
 * the requests one by one gave each of them a timeout of its own: a
 * stopped server was found after 2-3 timeouts, and each timeout's message
 * replaced the one before.) After a failure the requests still pending
 * stay so, left to the exit as dt__ps_idle_waitany leaves them. */
static dt_status dt__ps_wait_all(dt_comm *c, dt_comm_request **reqs, int n)
{
    int idx;
    while (dt__ps_any(reqs, n)) DT_CHECK(dt_comm_waitany(c, n, reqs, &idx));
    return DT_OK;
}

/* A server waits for workers most of the time; blocking in MPI would spin
 * on a core the workers need (ranks share the host's cores), so it polls
 * with test and sleeps in between, from 20 us doubling to 500 us (DT_PS_POLL_*). Returns
 * the index of the request that completed (it becomes NULL). Gives up after
 * the communicator's timeout (--comm-timeout), naming the workers still
 * silent; the requests stay pending (the caller leaves them to the exit). */
static dt_status dt__ps_idle_waitany(dt_comm *c, dt_comm_request **reqs, int n, int *index)
{
    long sleep_ns = DT_PS_POLL_FIRST_NS;
    dt__comm_waiter w; /* the deadline; the sleeps are this loop's own */
    dt__comm_waiter_start(&w, c);
    for (;;) {
        int live = 0;
        for (int i = 0; i < n; i++) {
            if (!reqs[i]) continue;
            live = 1;
            int done = 0;
            dt_status st = c->ops->test(c, reqs[i], &done);
            if (done) reqs[i] = NULL; /* completed, or failed and freed */
            DT_CHECK(st);
            if (done) {
                *index = i;
                return DT_OK;
            }
        }
        if (!live) return DT_FAIL(DT_ERR_INVALID, "parameter server: waiting with nothing pending");
        if (dt__comm_waiter_expired(&w, dt_time_ns())) return DT__COMM_TIMEOUT(c, reqs, n);
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < DT_PS_POLL_MAX_NS)
            sleep_ns = sleep_ns * 2 < DT_PS_POLL_MAX_NS ? sleep_ns * 2 : DT_PS_POLL_MAX_NS;
    }
}

/* Every request of reqs(n), waited for as above. */
static dt_status dt__ps_idle_wait_all(dt_comm *c, dt_comm_request **reqs, int n)
{
    int idx;
    while (dt__ps_any(reqs, n)) DT_CHECK(dt__ps_idle_waitany(c, reqs, n, &idx));
    return DT_OK;
}

/* Send a header and, when n > 0, n floats of backend memory to peer. */
static dt_status dt__ps_send(dt__ps *ps, const dt__ps_msg *m, const float *data, size_t n, int peer, int tag_hdr,
                             int tag_data)
{
    dt_comm *c = ps->world;
    dt_comm_request *q[2] = {NULL, NULL};
    DT_CHECK(c->ops->isend(c, m, sizeof *m, peer, tag_hdr, &q[0]));
    dt_status st = DT_OK;
    if (n) st = c->ops->isend(c, data, n * sizeof(float), peer, tag_data, &q[1]);
    dt_status wst = dt__ps_wait_all(c, q, 2);
    return st != DT_OK ? st : wst;
}

/* ---- servers --------------------------------------------------------------- */

static dt_status dt__ps_server_reduce(void *ctx, float *v, int n)
{
    dt__ps *ps = ctx;
    return dt_comm_allreduce(ps->group, v, (size_t)n, DT_ALLREDUCE_RING, NULL);
}

static dt_status dt__ps_server_init(dt__ps *ps, const dt__ps_server_env *env)
{
    const dt_paramset *L = ps->layout;
    const int s = ps->index;
    const size_t len = dt__ps_shard_len(ps, s);
    ps->be = env->be;
    for (int t = ps->t_lo[s]; t < ps->t_lo[s + 1]; t++) {
        const dt_param_info *p = &L->info[t];
        DT_CHECK(dt_paramset_add(&ps->sub, p->name, p->ndim, p->shape, p->decay));
        const dt_param_info *q = &ps->sub.info[ps->sub.count - 1];
        if (q->offset != p->offset - ps->off[s] || q->numel != p->numel)
            return DT_FAIL(DT_ERR_BACKEND, "parameter server %d: tensor %s does not keep its place in the shard", s,
                           p->name);
    }
    if (ps->sub.numel > len)
        return DT_FAIL(DT_ERR_BACKEND, "parameter server %d: shard layout of %zu elements exceeds its %zu", s,
                       ps->sub.numel, len);
    DT_CHECK(dt_buffer_alloc(&ps->params, env->be, len * sizeof(float)));
    DT_CHECK(dt_buffer_alloc(&ps->grads, env->be, len * sizeof(float)));
    DT_CHECK(dt_buffer_alloc(&ps->rbuf, env->be, (size_t)ps->W * len * sizeof(float)));
    DT_CHECK(env->be->copy(env->be, ps->params.data, env->init_params + ps->off[s], len * sizeof(float), DT_COPY_D2D));
    DT_CHECK(dt_optim_init(&ps->opt, &env->optim, env->be, &ps->sub));
    ps->opt_ready = 1;
    if (env->loss_scaler) DT_CHECK(dt_loss_scaler_init(&ps->scaler, env->loss_scaler));
    ps->version = env->start_version;
    if (env->restore) DT_CHECK(env->restore(env->ckpt_ctx, ps)); /* a checkpoint's shard instead */
    /* every worker starts from the servers' weights */
    const dt__ps_msg init = {.kind = DT__PS_INIT};
    for (int w = 0; w < ps->W; w++)
        DT_CHECK(dt__ps_send(ps, &init, ps->params.data, len, w, DT__PS_TAG_RHDR, DT__PS_TAG_RDATA));
    return DT_OK;
}

static dt_status dt__ps_protocol(const dt__ps *ps, int w, const dt__ps_msg *m, const char *expected)
{
    return DT_FAIL(DT_ERR_BACKEND, "parameter server %d: worker %d sent message kind %lld (expected %s)", ps->index, w,
                   (long long)m->kind, expected);
}

/* After every worker is done: the final weights to each. */
static dt_status dt__ps_send_final(dt__ps *ps)
{
    const dt__ps_msg fin = {.kind = DT__PS_FINAL};
    for (int w = 0; w < ps->W; w++)
        DT_CHECK(dt__ps_send(ps, &fin, ps->params.data, dt__ps_shard_len(ps, ps->index), w, DT__PS_TAG_RHDR,
                             DT__PS_TAG_RDATA));
    return DT_OK;
}

/* Every worker still training (parked[w]) asked for a checkpoint: each gets
 * the shard's weights back, then the shard is saved at `version`. */
static dt_status dt__ps_save_point(dt__ps *ps, const dt__ps_server_env *env, const int *parked, int64_t version)
{
    if (!env->save)
        return DT_FAIL(DT_ERR_INVALID,
                       "parameter server %d: the workers asked for a checkpoint, but this server was "
                       "given no --save directory",
                       ps->index);
    const dt__ps_msg m = {.kind = DT__PS_SAVED, .iter = version};
    for (int w = 0; w < ps->W; w++)
        if (parked[w])
            DT_CHECK(dt__ps_send(ps, &m, ps->params.data, dt__ps_shard_len(ps, ps->index), w, DT__PS_TAG_RHDR,
                                 DT__PS_TAG_RDATA));
    ps->version = version;
    return env->save(env->ckpt_ctx, ps, version);
}

static dt_status dt__ps_serve_sync(dt__ps *ps, const dt__ps_server_env *env)
{
    dt_comm *c = ps->world;
    const int W = ps->W, s = ps->index;
    const size_t len = dt__ps_shard_len(ps, s);
    float *rbuf = ps->rbuf.data, *grads = ps->grads.data;
    dt__ps_msg *in = calloc((size_t)W, sizeof *in);
    dt_comm_request **q = calloc((size_t)W, sizeof *q);
    dt_status st = DT_OK;
    if (!in || !q) {
        st = DT_FAIL(DT_ERR_NOMEM, "parameter server: out of memory");
        goto done;
    }
    for (int64_t step = env->start_version;; step++) {
        ps->version = step;
        for (int w = 0; w < W; w++)
            DT_CHECK_GOTO(c->ops->irecv(c, &in[w], sizeof in[w], w, DT__PS_TAG_HDR, &q[w]), st, done);
        DT_CHECK_GOTO(dt__ps_idle_wait_all(c, q, W), st, done);
        int n_done = 0, n_save = 0;
        for (int w = 0; w < W; w++) n_done += in[w].kind == DT__PS_DONE, n_save += in[w].kind == DT__PS_SAVE;
        if (n_done == W) break;
        if (n_save == W) { /* a checkpoint between steps: no update, the same step again */
            int *all = calloc((size_t)W, sizeof *all);
            for (int w = 0; all && w < W; w++) all[w] = 1;
            st = all ? dt__ps_save_point(ps, env, all, step) : DT_FAIL(DT_ERR_NOMEM, "parameter server: out of memory");
            free(all);
            if (st != DT_OK) goto done;
            step--;
            continue;
        }
        for (int w = 0; w < W; w++) {
            if (in[w].kind != DT__PS_PUSH) {
                st = n_done ? DT_FAIL(DT_ERR_INVALID,
                                      "parameter server %d: worker %d ended before step %lld while others went on "
                                      "(every worker must run the same --train-iters)",
                                      s, w, (long long)step + 1)
                            : dt__ps_protocol(ps, w, &in[w], "a push");
                goto done;
            }
            if (in[w].iter != step) {
                st = DT_FAIL(DT_ERR_BACKEND, "parameter server %d: worker %d pushed step %lld during step %lld", s, w,
                             (long long)in[w].iter + 1, (long long)step + 1);
                goto done;
            }
        }
        for (int w = 0; w < W; w++)
            DT_CHECK_GOTO(c->ops->irecv(c, rbuf + (size_t)w * len, len * sizeof(float), w, DT__PS_TAG_DATA, &q[w]), st,
                          done);
        DT_CHECK_GOTO(dt__ps_idle_wait_all(c, q, W), st, done);
        const int64_t t0 = dt_time_ns();
        /* the sum in worker order, whatever order the pushes arrived in */
        double loss = 0.0;
        DT_CHECK_GOTO(env->be->copy(env->be, grads, rbuf, len * sizeof(float), DT_COPY_D2D), st, done);
        for (int w = 1; w < W; w++)
            DT_CHECK_GOTO(env->be->axpy(env->be, grads, 1.0f, rbuf + (size_t)w * len, len), st, done);
        for (int w = 0; w < W; w++) loss += in[w].loss;
        dt__update_args ua = {.be = env->be,
                              .layout = &ps->sub,
                              .params = ps->params.data,
                              .grads = grads,
                              .opt = &ps->opt,
                              .scaler = env->loss_scaler ? &ps->scaler : NULL,
                              .loss_scale = (float)in[0].loss_scale,
                              .lr = &env->lr,
                              .position = step,
                              .clip_grad = env->clip_grad,
                              .given_norm = -1.0,
                              .first_tensor = ps->t_lo[s],
                              .reduce = ps->K > 1 ? dt__ps_server_reduce : NULL,
                              .reduce_ctx = ps};
        dt__update_result r;
        DT_CHECK_GOTO(dt__update_apply(&ua, &r), st, done);
        DT_CHECK_GOTO(env->be->synchronize(env->be), st, done);
        const int64_t t1 = dt_time_ns();
        const dt__ps_msg rep = {.kind = DT__PS_REPLY,
                                .iter = step + 1,
                                .skipped = r.skipped,
                                .first_bad = r.first_bad,
                                .loss = loss,
                                .norm = r.norm,
                                .clip = r.clip,
                                .lr = r.lr};
        for (int w = 0; w < W; w++)
            DT_CHECK_GOTO(dt__ps_send(ps, &rep, ps->params.data, len, w, DT__PS_TAG_RHDR, DT__PS_TAG_RDATA), st, done);
        if (env->hook) env->hook(env->hook_ctx, -1, 0, step + 1, t0, t1);
    }
    st = dt__ps_send_final(ps);
done:
    if (!dt__ps_any(q, W)) { /* after a failure, receives may still point into in: leave them to the exit */
        free(in);
        free(q);
    }
    return st;
}

/* ps-async with --max-staleness S: would the state after applying worker
 * x's push (version + 1, x pulled at version + 1) still let every worker
 * not yet done push once more within S, taken oldest pull first? */
static int dt__ps_safe_after(const dt__ps *ps, int x, int64_t version, const int64_t *pulled, const int *done,
                             int64_t *scratch)
{
    if (ps->max_staleness < 0) return 1;
    int n = 0;
    for (int w = 0; w < ps->W; w++)
        if (!done[w]) scratch[n++] = w == x ? version + 1 : pulled[w];
    for (int i = 1; i < n; i++) { /* insertion sort: W is small */
        int64_t v = scratch[i];
        int j = i - 1;
        for (; j >= 0 && scratch[j] > v; j--) scratch[j + 1] = scratch[j];
        scratch[j + 1] = v;
    }
    for (int i = 0; i < n; i++)
        if (version + 1 + i - scratch[i] > ps->max_staleness) return 0;
    return 1;
}

static dt_status dt__ps_serve_async(dt__ps *ps, const dt__ps_server_env *env)
{
    dt_comm *c = ps->world;
    const int W = ps->W, s = ps->index;
    const size_t len = dt__ps_shard_len(ps, s);
    float *rbuf = ps->rbuf.data;
    dt__ps_msg *in = calloc((size_t)W, sizeof *in);
    dt_comm_request **q = calloc((size_t)W, sizeof *q);
    int64_t *pulled = calloc((size_t)W, sizeof *pulled), *scratch = calloc((size_t)W, sizeof *scratch);
    int *done = calloc((size_t)W, sizeof *done), *pending = calloc((size_t)W, sizeof *pending);
    /* parked: waiting at a checkpoint; idle: done or parked (the staleness check leaves them out) */
    int *parked = calloc((size_t)W, sizeof *parked), *idle = calloc((size_t)W, sizeof *idle);
    dt_status st = DT_OK;
    if (!in || !q || !pulled || !scratch || !done || !pending || !parked || !idle) {
        st = DT_FAIL(DT_ERR_NOMEM, "parameter server: out of memory");
        goto out;
    }
    int64_t version = env->start_version;
    for (int w = 0; w < W; w++) pulled[w] = version; /* every worker pulls the starting weights */
    int n_done = 0, n_parked = 0;
    for (int w = 0; w < W; w++)
        DT_CHECK_GOTO(c->ops->irecv(c, &in[w], sizeof in[w], w, DT__PS_TAG_HDR, &q[w]), st, out);
    while (n_done < W) {
        int w = -1;
        DT_CHECK_GOTO(dt__ps_idle_waitany(c, q, W, &w), st, out);
        if (in[w].kind == DT__PS_DONE) {
            done[w] = idle[w] = 1;
            n_done++;
        } else if (in[w].kind == DT__PS_SAVE) {
            parked[w] = idle[w] = 1;
            n_parked++;
        } else if (in[w].kind == DT__PS_PUSH) {
            dt_comm_request *dq = NULL;
            DT_CHECK_GOTO(c->ops->irecv(c, rbuf + (size_t)w * len, len * sizeof(float), w, DT__PS_TAG_DATA, &dq), st,
                          out);
            DT_CHECK_GOTO(c->ops->wait(c, dq), st, out);
            pending[w] = 1;
        } else {
            st = dt__ps_protocol(ps, w, &in[w], "a push or done");
            goto out;
        }
        /* apply every push that may go now, oldest pull first */
        for (;;) {
            int pick = -1;
            for (int v = 0; v < W; v++)
                if (pending[v] && (pick < 0 || pulled[v] < pulled[pick]) &&
                    dt__ps_safe_after(ps, v, version, pulled, idle, scratch))
                    pick = v;
            if (pick < 0) break;
            const int64_t t0 = dt_time_ns();
            const int64_t staleness = version - pulled[pick];
            dt__update_args ua = {.be = env->be,
                                  .layout = &ps->sub,
                                  .params = ps->params.data,
                                  .grads = rbuf + (size_t)pick * len,
                                  .opt = &ps->opt,
                                  .lr = &env->lr,
                                  .position = version / W, /* W pushes make one global batch */
                                  .clip_grad = env->clip_grad,
                                  .given_norm = in[pick].norm,
                                  .first_tensor = ps->t_lo[s]};
            dt__update_result r;
            DT_CHECK_GOTO(dt__update_apply(&ua, &r), st, out);
            DT_CHECK_GOTO(env->be->synchronize(env->be), st, out);
            const int64_t t1 = dt_time_ns();
            version++;
            pulled[pick] = version;
            pending[pick] = 0;
            const dt__ps_msg rep = {.kind = DT__PS_REPLY,
                                    .iter = version,
                                    .staleness = staleness,
                                    .first_bad = -1,
                                    .loss = in[pick].loss,
                                    .norm = r.norm,
                                    .clip = r.clip,
                                    .lr = r.lr};
            DT_CHECK_GOTO(dt__ps_send(ps, &rep, ps->params.data, len, pick, DT__PS_TAG_RHDR, DT__PS_TAG_RDATA), st,
                          out);
            if (env->hook) env->hook(env->hook_ctx, pick, staleness, version, t0, t1);
            DT_CHECK_GOTO(c->ops->irecv(c, &in[pick], sizeof in[pick], pick, DT__PS_TAG_HDR, &q[pick]), st, out);
        }
        if (n_parked > 0 && n_parked + n_done == W) { /* a checkpoint: every worker still training is parked */
            DT_CHECK_GOTO(dt__ps_save_point(ps, env, parked, version), st, out);
            for (int v = 0; v < W; v++) {
                if (!parked[v]) continue;
                parked[v] = idle[v] = 0;
                pulled[v] = version; /* it took the weights back */
                DT_CHECK_GOTO(c->ops->irecv(c, &in[v], sizeof in[v], v, DT__PS_TAG_HDR, &q[v]), st, out);
            }
            n_parked = 0;
        }
    }
    ps->version = version;
    st = dt__ps_send_final(ps);
out:
    if (!dt__ps_any(q, W)) { /* after a failure, receives may still point into in: leave them to the exit */
        free(in);
        free(q);
    }
    free(pulled);
    free(scratch);
    free(done);
    free(pending);
    free(parked);
    free(idle);
    return st;
}

dt_status dt__ps_serve(dt__ps *ps, const dt__ps_server_env *env)
{
    if (!ps->is_server) return DT_FAIL(DT_ERR_INVALID, "parameter server: rank %d is a worker", ps->world->rank);
    if (ps->async && env->loss_scaler)
        return DT_FAIL(DT_ERR_INVALID, "--allreduce ps-async: loss scaling is not supported (use ps-sync or --bf16)");
    DT_CHECK(dt__ps_server_init(ps, env));
    return ps->async ? dt__ps_serve_async(ps, env) : dt__ps_serve_sync(ps, env);
}

/* ---- workers --------------------------------------------------------------- */

/* Post the receives of one answer from every server (headers into m[K],
 * shards into params), then, with push != NULL, send it. */
static dt_status dt__ps_round(dt__ps *ps, float *params, const float *grads, const dt__ps_msg *push, dt__ps_msg *m,
                              int expect)
{
    dt_comm *c = ps->world;
    const int K = ps->K;
    dt_comm_request *q[4 * 16], **qs = K <= 16 ? q : calloc((size_t)4 * K, sizeof *qs);
    if (!qs) return DT_FAIL(DT_ERR_NOMEM, "parameter server: out of memory");
    memset(qs, 0, sizeof(*qs) * 4 * (size_t)K);
    dt_status st = DT_OK;
    for (int s = 0; s < K && st == DT_OK; s++) {
        const int peer = ps->W + s;
        st = c->ops->irecv(c, &m[s], sizeof m[s], peer, DT__PS_TAG_RHDR, &qs[4 * s]);
        if (st == DT_OK)
            st = c->ops->irecv(c, params + ps->off[s], dt__ps_shard_len(ps, s) * sizeof(float), peer, DT__PS_TAG_RDATA,
                               &qs[4 * s + 1]);
    }
    for (int s = 0; push && s < K && st == DT_OK; s++) {
        const int peer = ps->W + s;
        st = c->ops->isend(c, push, sizeof *push, peer, DT__PS_TAG_HDR, &qs[4 * s + 2]);
        if (st == DT_OK && grads)
            st = c->ops->isend(c, grads + ps->off[s], dt__ps_shard_len(ps, s) * sizeof(float), peer, DT__PS_TAG_DATA,
                               &qs[4 * s + 3]);
    }
    /* after a failed post the others would wait for ever: report it as is */
    dt_status wst = st == DT_OK ? dt__ps_wait_all(c, qs, 4 * K) : DT_OK;
    if (qs != q) free(qs);
    DT_CHECK(st);
    DT_CHECK(wst);
    for (int s = 0; s < K; s++)
        if (m[s].kind != expect)
            return DT_FAIL(DT_ERR_BACKEND, "parameter server %d sent message kind %lld to worker %d (expected %d)", s,
                           (long long)m[s].kind, ps->index, expect);
    return DT_OK;
}

dt_status dt__ps_pull_initial(dt__ps *ps, float *params)
{
    dt__ps_msg m[16], *ms = ps->K <= 16 ? m : calloc((size_t)ps->K, sizeof *ms);
    if (!ms) return DT_FAIL(DT_ERR_NOMEM, "parameter server: out of memory");
    dt_status st = dt__ps_round(ps, params, NULL, NULL, ms, DT__PS_INIT);
    if (ms != m) free(ms);
    return st;
}

static void dt__ps_record(dt__ps *ps, int64_t staleness)
{
    dt__ps_stats *x = &ps->stats;
    x->hist[staleness < DT__PS_HIST - 1 ? staleness : DT__PS_HIST - 1]++;
    x->mean = (x->mean * (double)x->pushes + (double)staleness) / (double)(x->pushes + 1);
    x->pushes++;
    if (staleness > x->max) x->max = staleness;
}

dt_status dt__ps_exchange(dt__ps *ps, float *params, const float *grads, const dt__ps_push *push, dt__ps_reply *out)
{
    if (ps->is_server || ps->finished)
        return DT_FAIL(DT_ERR_INVALID, "parameter server: exchange on %s",
                       ps->is_server ? "a server" : "a finished worker");
    const dt__ps_msg msg = {.kind = DT__PS_PUSH,
                            .iter = push->iter,
                            .loss = push->loss,
                            .norm = push->norm,
                            .loss_scale = push->loss_scale};
    dt__ps_msg m[16], *ms = ps->K <= 16 ? m : calloc((size_t)ps->K, sizeof *ms);
    if (!ms) return DT_FAIL(DT_ERR_NOMEM, "parameter server: out of memory");
    dt_status st = dt__ps_round(ps, params, grads, &msg, ms, DT__PS_REPLY);
    if (st == DT_OK) {
        out->loss = ms[0].loss;
        out->norm = ms[0].norm;
        out->clip = (float)ms[0].clip;
        out->lr = (float)ms[0].lr;
        out->skipped = 0;
        out->first_bad = -1;
        out->staleness = 0;
        out->version = 0;
        for (int s = 0; s < ps->K; s++) {
            out->skipped |= ms[s].skipped != 0;
            if (ms[s].first_bad > out->first_bad) out->first_bad = (int)ms[s].first_bad;
            if (ms[s].staleness > out->staleness) out->staleness = ms[s].staleness;
            if (ms[s].iter > out->version) out->version = ms[s].iter;
        }
        dt__ps_record(ps, out->staleness);
    }
    if (ms != m) free(ms);
    return st;
}

dt_status dt__ps_finish(dt__ps *ps, float *params)
{
    if (ps->is_server || ps->finished) return DT_OK;
    ps->finished = 1; /* even on failure: never twice */
    const dt__ps_msg done = {.kind = DT__PS_DONE};
    dt__ps_msg m[16], *ms = ps->K <= 16 ? m : calloc((size_t)ps->K, sizeof *ms);
    if (!ms) return DT_FAIL(DT_ERR_NOMEM, "parameter server: out of memory");
    dt_status st = dt__ps_round(ps, params, NULL, &done, ms, DT__PS_FINAL);
    if (ms != m) free(ms);
    DT_CHECK(st);
    /* every worker's statistics on every worker: histogram, pushes, staleness sum, maxima (exact below 2^24) */
    const int W = ps->W, n = DT__PS_HIST + 2 + W;
    float *v = calloc((size_t)n, sizeof *v);
    if (!v) return DT_FAIL(DT_ERR_NOMEM, "parameter server: out of memory");
    dt__ps_stats *x = &ps->stats;
    for (int i = 0; i < DT__PS_HIST; i++) v[i] = (float)x->hist[i];
    v[DT__PS_HIST] = (float)x->pushes;
    v[DT__PS_HIST + 1] = (float)(x->mean * (double)x->pushes);
    v[DT__PS_HIST + 2 + ps->index] = (float)x->max;
    st = dt_comm_allreduce(ps->group, v, (size_t)n, DT_ALLREDUCE_RING, NULL);
    if (st == DT_OK) {
        for (int i = 0; i < DT__PS_HIST; i++) x->hist[i] = (int64_t)v[i];
        x->pushes = (int64_t)v[DT__PS_HIST];
        x->mean = x->pushes ? (double)v[DT__PS_HIST + 1] / (double)x->pushes : 0.0;
        x->max = 0;
        for (int w = 0; w < W; w++) x->max = DT_MAX(x->max, (int64_t)v[DT__PS_HIST + 2 + w]);
    }
    free(v);
    return st;
}

void dt__ps_get_stats(const dt__ps *ps, dt__ps_stats *out) { *out = ps->stats; }

dt_status dt__ps_save_round(dt__ps *ps, float *params)
{
    if (ps->is_server || ps->finished)
        return DT_FAIL(DT_ERR_INVALID, "parameter server: checkpoint request from %s",
                       ps->is_server ? "a server" : "a finished worker");
    const dt__ps_msg msg = {.kind = DT__PS_SAVE};
    dt__ps_msg m[16], *ms = ps->K <= 16 ? m : calloc((size_t)ps->K, sizeof *ms);
    if (!ms) return DT_FAIL(DT_ERR_NOMEM, "parameter server: out of memory");
    dt_status st = dt__ps_round(ps, params, NULL, &msg, ms, DT__PS_SAVED);
    if (ms != m) free(ms);
    return st;
}
