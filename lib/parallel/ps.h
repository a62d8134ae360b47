/* ps.h: the parameter server (lib/parallel/ps.c), never installed; the trainer drives
 * it when --allreduce is ps-sync or ps-async.
 *
 * Roles: of the N ranks of the world communicator, ranks 0..W-1 are workers
 * and the last K (--num-ps-servers) are servers, W = N - K. Server s holds a
 * shard of the flat parameter buffer, made of whole tensors (a contiguous
 * range of them, balanced by size), with the optimizer state of that shard
 * only. Workers compute gradients, push shard s to server s and pull the
 * shard's new weights back.
 *
 * ps-sync: for every step a server takes one push from each worker, sums
 * them in worker order, applies one update (lib/optim/update.c, the trainer's own
 * rule; the servers sum their overflow flags and squared norms so clipping
 * and loss scaling see the whole gradient) and answers every worker: the
 * same arithmetic as data parallelism with an allreduce.
 *
 * ps-async: a server applies each push on its own, as it arrives, and
 * answers that worker at once. A push's staleness is the number of updates
 * the server applied between that worker's previous pull and this push.
 * With --max-staleness S a server holds a push whose application would make
 * a worker still computing (or waiting) exceed S in any order it could
 * still be served in; the held worker waits. The check (a banker's
 * algorithm: the oldest-pulled worker can always go next) never deadlocks
 * when S >= W - 1, which the trainer requires.
 *
 * Protocol (world communicator, tags 32000..32003): every message is a
 * header (dt__ps_msg) followed, where it carries floats, by the shard.
 * A worker ends with DONE; when every worker is done the servers send each
 * the final weights, so all workers end with the servers' model. A worker
 * at a checkpoint sends SAVE instead of a push; a server answers SAVED with
 * its shard once every worker still training has sent SAVE (ps-async: the
 * others' pushes go on meanwhile, a parked worker counting as idle for the
 * staleness bound), then saves (env->save); version is then W x the
 * workers' iteration under ps-async, the iteration under ps-sync.
 *
 * Invariants: a server never changes its shard while an answer that points
 * at it is in flight; a worker's parameters change only inside
 * dt__ps_exchange / dt__ps_finish. */
#ifndef DT_PS_H
#define DT_PS_H

#include <stdint.h>

#include "dt_backend.h"
#include "dt_comm.h"
#include "dt_loss_scaler.h"
#include "dt_optim.h"
#include "dt_tensor.h"

/* The polling ladder and the message header's size: dt_rules.h (the
 * simulator models both). */
#include "dt_rules.h"

#define DT__PS_HIST 64 /* staleness histogram bins 0..63 (the last one: 63 or more) */

typedef struct dt__ps dt__ps;

typedef struct dt__ps_setup {
    dt_comm *world;
    int async;                 /* 0: ps-sync, 1: ps-async */
    int num_servers;           /* K >= 1, K < world size */
    int max_staleness;         /* < 0: unbounded (ps-async) */
    const dt_paramset *layout; /* the whole model's */
} dt__ps_setup;

/* Collective over world (splits it into workers and servers). */
dt_status dt__ps_create(const dt__ps_setup *s, dt__ps **out);
void dt__ps_free(dt__ps *ps);
int dt__ps_is_server(const dt__ps *ps);
int dt__ps_num_workers(const dt__ps *ps);
/* The workers' communicator (NULL on a server): evaluation and statistics. */
dt_comm *dt__ps_workers(const dt__ps *ps);
/* This worker's index (0..W-1) or this server's (0..K-1). */
int dt__ps_index(const dt__ps *ps);
/* Elements of the parameter buffer held by server s (padding included). */
size_t dt__ps_shard_len(const dt__ps *ps, int s);

/* ---- servers ------------------------------------------------------------ */

/* Called by a server after each update it applies (for traces); worker is
 * -1 for a ps-sync step (all workers), times from dt_time_ns(). */
typedef void (*dt__ps_apply_hook)(void *ctx, int worker, int64_t staleness, int64_t version, int64_t t0_ns,
                                  int64_t t1_ns);

typedef struct dt__ps_server_env {
    dt_backend *be;
    const float *init_params; /* the whole model's initial weights (backend memory) */
    dt_optim_config optim;
    dt_lr_schedule lr; /* after lr scaling */
    float clip_grad;
    const dt_loss_scaler_config *loss_scaler; /* NULL: no loss scaling (ps-sync only) */
    dt__ps_apply_hook hook;
    void *hook_ctx;
    /* Checkpoints (lib/train.c; docs/checkpoints.md). restore (may be NULL)
     * runs once the shard's weights, optimizer and scaler exist, before the
     * workers get their first weights: it overwrites them with a loaded
     * checkpoint's, and start_version is then that checkpoint's version
     * (0 otherwise). save (may be NULL) runs when every worker still
     * training has asked for a checkpoint (dt__ps_save_round), after each
     * got the shard's weights back, with the number of updates applied. */
    int64_t start_version;
    dt_status (*restore)(void *ctx, dt__ps *ps);
    dt_status (*save)(void *ctx, dt__ps *ps, int64_t version);
    void *ckpt_ctx;
} dt__ps_server_env;

/* A server's shard for checkpoints: whole tensors *t_lo .. *t_hi - 1 of the
 * model's layout; after dt__ps_serve has started, their own layout
 * (offsets from the shard's start), weights (backend memory), optimizer,
 * loss scaler and the updates applied so far. */
void dt__ps_server_tensors(const dt__ps *ps, int *t_lo, int *t_hi);
const dt_paramset *dt__ps_server_layout(const dt__ps *ps);
float *dt__ps_server_params(dt__ps *ps);
dt_optim *dt__ps_server_optim(dt__ps *ps);
dt_loss_scaler *dt__ps_server_scaler(dt__ps *ps);
int64_t dt__ps_server_version(const dt__ps *ps);

/* Serve until every worker is done. */
dt_status dt__ps_serve(dt__ps *ps, const dt__ps_server_env *env);

/* ---- workers ------------------------------------------------------------ */

/* Sent with a push. */
typedef struct dt__ps_push {
    int64_t iter;     /* the worker's step */
    double loss;      /* ps-sync: this worker's share of the step's mean loss; ps-async: its own mean */
    double norm;      /* ps-async: the norm of this push (clipping); ps-sync: unused */
    float loss_scale; /* S the gradients carry (ps-sync with loss scaling) */
} dt__ps_push;

/* What came back (from every server: the first server's values, staleness
 * and version the largest over servers, first_bad the last overflowing
 * tensor in backward order). */
typedef struct dt__ps_reply {
    double loss; /* ps-sync: the step's loss summed over the workers; ps-async: as pushed */
    double norm;
    float clip, lr;
    int skipped;       /* overflow: the servers skipped the update */
    int first_bad;     /* model tensor index or -1 */
    int64_t staleness; /* ps-async: updates applied since this worker's last pull */
    int64_t version;   /* updates the (most advanced) server has applied */
} dt__ps_reply;

/* The first pull: the servers' initial weights into params (collective
 * with dt__ps_serve's start). */
dt_status dt__ps_pull_initial(dt__ps *ps, float *params);
/* Push grads (the whole buffer; each server gets its shard) and pull the
 * new weights into params. */
dt_status dt__ps_exchange(dt__ps *ps, float *params, const float *grads, const dt__ps_push *push, dt__ps_reply *out);
/* Tell the servers this worker is done and pull the final weights; then
 * sum the staleness statistics over the workers (collective over them).
 * Idempotent. */
dt_status dt__ps_finish(dt__ps *ps, float *params);
int dt__ps_finished(const dt__ps *ps);
/* A worker at a checkpoint: ask every server to save (they do once every
 * worker still training has asked; ps-sync: at the same step) and take the
 * shards' weights back into params. */
dt_status dt__ps_save_round(dt__ps *ps, float *params);

/* Staleness of the pushes (this worker's before dt__ps_finish, every
 * worker's after it). */
typedef struct dt__ps_stats {
    int64_t pushes;
    int64_t max;
    double mean;
    int64_t hist[DT__PS_HIST];
} dt__ps_stats;
void dt__ps_get_stats(const dt__ps *ps, dt__ps_stats *out);

#endif
