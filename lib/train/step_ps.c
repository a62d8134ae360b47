/* step_ps.c: the parameter-server strategy (--allreduce ps-sync,
 * ps-async; lib/parallel/ps.c holds the protocol). The last --num-ps-servers ranks
 * serve a shard of the weights and the optimizer state each
 * (dt_trainer_serve); the others are workers: each step they push their
 * gradients and pull the servers' new weights, which stand in for the
 * local update.
 *
 * Invariants: a worker pulls the servers' first weights before its first
 * step, evaluation or save (dt__tr_ps_ensure_pulled), so that a load can
 * run on every rank first; after a failed exchange (ps.broken) a worker
 * never waits for a server again; a worker's loss scaler stays equal to
 * the servers'. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_time.h"
#include "trainer_internal.h"

static dt_status dt__ck_ps_restore(void *ctx, dt__ps *ps);
static dt_status dt__ck_ps_save(void *ctx, dt__ps *ps, int64_t version);

/* The optimizer state lives on the servers, in shards. */
dt_status dt__tr_ps_create(dt_trainer *tr)
{
    const dt_train_config *cfg = &tr->cfg;
    const dt__ps_setup ps = {.world = cfg->comm,
                             .async = cfg->ps_mode == DT_PS_ASYNC,
                             .num_servers = cfg->num_ps_servers,
                             .max_staleness = cfg->max_staleness,
                             .layout = tr->kind->layout(tr)};
    DT_CHECK(dt__ps_create(&ps, &tr->ps.rt));
    tr->dp_comm = dt__ps_workers(tr->ps.rt);
    return DT_OK;
}

/* Stopped before train_iters: let the servers end (errors only go to
 * dt_last_error); then free what the strategy holds. */
void dt__tr_ps_shutdown(dt_trainer *tr)
{
    if (tr->ps.rt && !tr->ps.broken && !dt__ps_is_server(tr->ps.rt) && !dt__ps_finished(tr->ps.rt) &&
        dt__tr_ps_ensure_pulled(tr) == DT_OK)
        (void)dt__ps_finish(tr->ps.rt, tr->kind->params(tr));
    if (tr->ps.resume) dt_checkpoint_shard_free(tr->ps.resume);
    free(tr->ps.resume);
    tr->ps.resume = NULL;
    dt__ps_free(tr->ps.rt);
    tr->ps.rt = NULL;
}

/* A step may start on a worker that has not finished. */
dt_status dt__tr_ps_begin_step(dt_trainer *tr)
{
    if (dt__ps_is_server(tr->ps.rt))
        return DT_FAIL(DT_ERR_INVALID, "rank %d is a parameter server: it serves (dt_trainer_serve), it does not step",
                       tr->rank);
    if (dt__ps_finished(tr->ps.rt))
        return DT_FAIL(DT_ERR_INVALID, "iteration %lld: the parameter servers have finished after --train-iters %lld",
                       (long long)tr->iter + 1, (long long)tr->cfg.train_iters);
    return dt__tr_ps_ensure_pulled(tr);
}

/* A worker's exchange with the parameter servers: push this step's
 * gradients (ps-async: with their norm, for clipping), pull the new
 * weights; the servers' answer stands in for the local update. The last
 * iteration also pulls the final weights (every worker's pushes applied). */
static dt_status dt__ps_worker_exchange(dt_trainer *tr, double *loss_sum, float S, dt__update_result *ur,
                                        dt__ps_reply *rep)
{
    const dt_paramset *layout = tr->kind->layout(tr);
    float *params = tr->kind->params(tr), *grads = tr->kind->grads(tr);
    dt__ps_push push = {.iter = tr->iter, .loss = *loss_sum, .norm = -1.0, .loss_scale = S};
    if (tr->cfg.ps_mode == DT_PS_ASYNC) DT_CHECK(dt_grad_norm(tr->be, layout, grads, &push.norm));
    DT_CHECK(tr->be->synchronize(tr->be));
    const int64_t t0 = dt_time_ns();
    dt_status st = dt__ps_exchange(tr->ps.rt, params, grads, &push, rep);
    if (st == DT_OK && tr->iter + 1 == tr->cfg.train_iters) st = dt__ps_finish(tr->ps.rt, params);
    if (st != DT_OK) {
        tr->ps.broken = 1;
        return st;
    }
    const int64_t t1 = dt_time_ns();
    memset(ur, 0, sizeof *ur);
    ur->skipped = rep->skipped;
    ur->first_bad = rep->first_bad;
    ur->norm = rep->norm;
    ur->clip = rep->clip;
    ur->lr = rep->lr;
    /* the servers' scaler saw the same overflow: this copy stays equal to theirs */
    if (tr->cfg.use_loss_scaling) (void)dt_loss_scaler_update(&tr->scaler, rep->skipped, &ur->ev);
    *loss_sum = rep->loss;
    if (tr->trace.writer && tr->trace.status == DT_OK) {
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, "push/pull", "comm", tr->rank, DT_LANE_COMM, t0 - tr->t_start_ns,
                            t1 - t0);
        e.iter = tr->iter;
        e.bytes = (int64_t)(layout->numel * sizeof(float));
        DT_CHECK(dt_trace_event_add_arg(&e, "staleness", (double)rep->staleness));
        DT_CHECK(dt_trace_event_add_arg(&e, "version", (double)rep->version));
        DT_CHECK(dt__trace_write(tr, &e));
        if (tr->cfg.ps_mode == DT_PS_ASYNC)
            DT_CHECK(dt__trace_counter(tr, "staleness", t1 - tr->t_start_ns, (double)rep->staleness));
    }
    return DT_OK;
}

int dt_trainer_is_server(const dt_trainer *tr) { return tr->ps.rt && dt__ps_is_server(tr->ps.rt); }

/* Server trace: one "apply" span per update on the optimizer lane. */
static void dt__tr_apply_hook(void *ctx, int worker, int64_t staleness, int64_t version, int64_t t0_ns, int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (!tr->trace.writer || tr->trace.status != DT_OK) return;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, "apply", "optim", tr->rank, DT_LANE_OPTIM, t0_ns - tr->t_start_ns,
                        t1_ns - t0_ns);
    e.iter = version - 1;
    if (dt_trace_event_add_arg(&e, "worker", worker) != DT_OK ||
        dt_trace_event_add_arg(&e, "staleness", (double)staleness) != DT_OK ||
        dt_trace_event_add_arg(&e, "version", (double)version) != DT_OK)
        return;
    dt__trace_write(tr, &e);
}

dt_status dt_trainer_serve(dt_trainer *tr)
{
    if (!dt_trainer_is_server(tr))
        return DT_FAIL(DT_ERR_INVALID,
                       "rank %d is not a parameter server (serve runs on the last --num-ps-servers ranks)", tr->rank);
    const dt__ps_server_env env = {.be = tr->be,
                                   .init_params = tr->kind->params(tr),
                                   .optim = tr->cfg.optim,
                                   .lr = tr->lr,
                                   .clip_grad = tr->cfg.clip_grad,
                                   .loss_scaler = tr->cfg.use_loss_scaling ? &tr->cfg.loss_scaler : NULL,
                                   .hook = dt__tr_apply_hook,
                                   .hook_ctx = tr,
                                   .start_version = tr->ps.resume ? tr->ps.start_version : 0,
                                   .restore = tr->ps.resume ? dt__ck_ps_restore : NULL,
                                   .save = tr->save_dir ? dt__ck_ps_save : NULL,
                                   .ckpt_ctx = tr};
    DT_CHECK(dt__ps_serve(tr->ps.rt, &env));
    /* the end of the run is saved too, unless the workers just did */
    if (tr->save_dir && dt__ps_server_version(tr->ps.rt) != tr->ck.last_save)
        DT_CHECK(dt_trainer_save(tr, tr->save_dir));
    return dt__trace_check(tr);
}

dt_status dt_trainer_staleness(const dt_trainer *tr, int64_t *pushes, double *mean, int64_t *max)
{
    if (!tr->ps.rt || dt_trainer_is_server(tr))
        return DT_FAIL(DT_ERR_INVALID, "staleness: this rank is not a parameter-server worker");
    dt__ps_stats x;
    dt__ps_get_stats(tr->ps.rt, &x);
    *pushes = x.pushes;
    *mean = x.mean;
    *max = x.max;
    return DT_OK;
}

/* The summary's parameter_server object (JSON null without one). */
json_t *dt__tr_ps_summary(const dt_trainer *tr)
{
    if (!tr->ps.rt) return json_null();
    dt__ps_stats x;
    dt__ps_get_stats(tr->ps.rt, &x);
    json_t *o = json_object(), *h = json_array();
    int bad = !o || !h, last = 0;
    for (int i = 0; i < DT__PS_HIST; i++)
        if (x.hist[i]) last = i;
    for (int i = 0; !bad && i <= last; i++) bad |= json_array_append_new(h, json_integer(x.hist[i])) != 0;
    if (!bad) {
        dt__jset(o, "mode", json_string(tr->cfg.ps_mode == DT_PS_SYNC ? "ps-sync" : "ps-async"), &bad);
        dt__jset(o, "workers", json_integer(dt__ps_num_workers(tr->ps.rt)), &bad);
        dt__jset(o, "servers", json_integer(tr->cfg.num_ps_servers), &bad);
        dt__jset(o, "pushes", json_integer(x.pushes), &bad);
        dt__jset(o, "staleness_mean", json_real(x.mean), &bad);
        dt__jset(o, "staleness_max", json_integer(x.max), &bad);
        dt__jset(o, "staleness_histogram", h, &bad); /* bin i: pushes of staleness i (the last bin: 63 or more) */
        h = NULL;
    }
    json_decref(h);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A worker's first pull of the servers' weights, on first use. */
dt_status dt__tr_ps_ensure_pulled(dt_trainer *tr)
{
    if (!tr->ps.rt || dt__ps_is_server(tr->ps.rt) || tr->ps.pulled) return DT_OK;
    tr->ps.pulled = 1;
    dt_status st = dt__ps_pull_initial(tr->ps.rt, tr->kind->params(tr));
    if (st != DT_OK) tr->ps.broken = 1;
    return st;
}

/* Push the gradients, pull the servers' new weights; the loss is the servers' sum. */
dt_status dt__tr_ps_update(dt_trainer *tr, dt__step_ctx *c)
{
    c->t_opt = dt_time_ns();
    DT_CHECK(dt__ps_worker_exchange(tr, &c->loss_sum, c->S, &c->ur, &c->rep));
    /* fp16: the servers skipped the step (the gradients of a non-finite
     * loss overflow too); one they applied fails as a divergence */
    if (dt__loss_overflow(tr, c->loss_sum) && c->ur.skipped) return dt__loss_overflow_locate(tr);
    return dt__loss_check(tr, c->loss_sum);
}

/* ---- checkpoints -------------------------------------------------------------- */

/* A parameter server starts serving: its loaded shard into the buffers. */
static dt_status dt__ck_ps_restore(void *ctx, dt__ps *ps)
{
    dt_trainer *tr = ctx;
    dt_checkpoint_shard *s = tr->ps.resume;
    dt_status st = dt__ck_get_tensors(s, tr->be, "param/", dt__ps_server_layout(ps), dt__ps_server_params(ps));
    if (st == DT_OK) st = dt__ck_get_optim(s, dt__ps_server_optim(ps), 1);
    if (st == DT_OK && tr->cfg.use_loss_scaling) st = dt__ck_get_scaler(s, dt__ps_server_scaler(ps));
    dt_checkpoint_shard_free(s);
    free(s);
    tr->ps.resume = NULL;
    return st;
}

/* Every worker asked for a checkpoint (lib/parallel/ps.c calls this between updates). */
static dt_status dt__ck_ps_save(void *ctx, dt__ps *ps, int64_t version)
{
    (void)ps, (void)version;
    dt_trainer *tr = ctx;
    return dt_trainer_save(tr, tr->save_dir);
}

static const char *dt__ps_ck_kind(const dt_trainer *tr)
{
    return tr->cfg.ps_mode == DT_PS_SYNC ? "parameter server (ps-sync)" : "parameter server (ps-async)";
}

static const char *dt__ps_ck_shards(const dt_trainer *tr)
{
    (void)tr;
    return "servers: their shard's weights and optimizer; workers: iteration and scaler";
}

/* The servers save when asked, into the configuration's directory: a
 * worker asks them (a save round), a server's shard is of its version. */
static dt_status dt__ps_ck_prepare(dt_trainer *tr, const char *dir, int64_t *iteration, int64_t *version)
{
    if (!tr->save_dir || strcmp(dir, tr->save_dir) != 0)
        return DT_FAIL(DT_ERR_INVALID,
                       "--save %s: with a parameter server the checkpoint directory is the "
                       "configuration's (--save %s), which the servers use",
                       dir, tr->save_dir ? tr->save_dir : "not given");
    if (!dt__ps_is_server(tr->ps.rt)) {
        DT_CHECK(dt__tr_ps_ensure_pulled(tr));
        if (!dt__ps_finished(tr->ps.rt)) {
            dt_status st = dt__ps_save_round(tr->ps.rt, tr->kind->params(tr));
            if (st != DT_OK) {
                tr->ps.broken = 1;
                return st;
            }
        }
        return DT_OK;
    }
    *version = dt__ps_server_version(tr->ps.rt);
    *iteration = tr->cfg.ps_mode == DT_PS_ASYNC ? *version / dt__ps_num_workers(tr->ps.rt) : *version;
    return DT_OK;
}

static const dt_loss_scaler *dt__ps_ck_scaler(const dt_trainer *tr)
{
    return dt__ps_is_server(tr->ps.rt) ? dt__ps_server_scaler(tr->ps.rt) : &tr->scaler;
}

/* A server: its version, its shard's weights and optimizer; a worker: nothing more. */
static dt_status dt__ps_ck_save(dt_trainer *tr, dt_checkpoint_shard *s, int64_t version)
{
    if (!dt__ps_is_server(tr->ps.rt)) return DT_OK;
    DT_CHECK(dt_checkpoint_shard_add(s, "ps.version", DT_CKPT_I64, &version, 1, NULL));
    const dt_optim *o = dt__ps_server_optim(tr->ps.rt);
    if (!o) return DT_FAIL(DT_ERR_INVALID, "parameter server: a checkpoint before serving began");
    DT_CHECK(dt__ck_put_tensors(s, tr->be, "param/", dt__ps_server_layout(tr->ps.rt), dt__ps_server_params(tr->ps.rt)));
    return dt__ck_put_optim(s, o);
}

/* A server's shard is checked now and applied when serving starts
 * (dt__ck_ps_restore): it keeps s. */
static dt_status dt__ps_ck_load(dt_trainer *tr, dt_checkpoint_shard *s, int64_t it)
{
    if (!dt__ps_is_server(tr->ps.rt)) return DT_OK;
    const void *vp = NULL;
    DT_CHECK(dt_checkpoint_shard_find(s, "ps.version", DT_CKPT_I64, 1, &vp));
    int64_t v;
    memcpy(&v, vp, sizeof v);
    const int64_t want = tr->cfg.ps_mode == DT_PS_ASYNC ? it * dt__ps_num_workers(tr->ps.rt) : it;
    if (v != want)
        return DT_FAIL(DT_ERR_FORMAT, "%s: server version %lld, expected %lld at iteration %lld", s->path,
                       (long long)v, (long long)want, (long long)it);
    if (tr->cfg.use_loss_scaling) {
        dt_loss_scaler probe;
        DT_CHECK(dt__ck_get_scaler(s, &probe));
    }
    int t_lo, t_hi;
    dt__ps_server_tensors(tr->ps.rt, &t_lo, &t_hi);
    const dt_paramset *L = tr->kind->layout(tr);
    dt_paramset sub = {.info = L->info + t_lo, .count = t_hi - t_lo};
    DT_CHECK(dt__ck_get_tensors(s, tr->be, "param/", &sub, NULL));
    dt_optim probe = {.cfg = tr->cfg.optim, .be = tr->be, .layout = &sub};
    DT_CHECK(dt__ck_get_optim(s, &probe, 0));
    tr->ps.resume = malloc(sizeof *tr->ps.resume);
    if (!tr->ps.resume) return DT_FAIL(DT_ERR_NOMEM, "--load: out of memory");
    *tr->ps.resume = *s; /* moved */
    memset(s, 0, sizeof *s);
    tr->ps.start_version = v;
    tr->ck.last_save = v;
    return DT_OK;
}

/* ---- the parameter-server strategy's table --------------------------------- */

static void dt__ps_state(const dt_trainer *tr, dt__strategy_state *s)
{
    *s = (dt__strategy_state){.optim = tr->opt_ready ? &tr->opt : NULL, .layout = tr->kind->layout(tr)};
}

static int dt__ps_ck_role(const dt_trainer *tr)
{
    return tr->ps.rt && dt__ps_is_server(tr->ps.rt) ? DT__CK_PS_SERVER : DT__CK_PS_WORKER;
}

const dt__strategy dt__strategy_ps = {
    .name = "ps",
    .create = dt__tr_ps_create,
    .begin_step = dt__tr_ps_begin_step,
    .update = dt__tr_ps_update,
    .state = dt__ps_state,
    .summary_key = "parameter_server",
    .summary = dt__tr_ps_summary,
    .ck_role = dt__ps_ck_role,
    .ck_kind = dt__ps_ck_kind,
    .ck_shards = dt__ps_ck_shards,
    .ck_prepare = dt__ps_ck_prepare,
    .ck_scaler = dt__ps_ck_scaler,
    .ck_save = dt__ps_ck_save,
    .ck_load = dt__ps_ck_load,
    .nonfinite = DT__NF_NONE, /* the servers updated before the check */
    .free = dt__tr_ps_shutdown,
};
