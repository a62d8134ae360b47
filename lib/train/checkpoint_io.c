/* checkpoint_io.c: the trainer's checkpoints (dt_trainer_save,
 * dt_trainer_load): what each rank's shard holds, the checks a load makes
 * before it changes anything, and the agreement of every rank on the
 * outcome. The file format and the crash-safe commit are lib/train/checkpoint.c's.
 *
 * (docs/checkpoints.md.) Every rank writes one
 * shard; what it holds depends on the rank's role:
 *   every role       trainer i64[5]: iteration, role, data position (the next
 *                    training micro-batch index), micro-batches per step (all
 *                    ranks), steps skipped by --skip-nonfinite;
 *                    loss_scaler i64[9] with loss scaling: scale (float
 *                    bits), hysteresis, good steps, steps, overflows,
 *                    skipped, growths, backoffs, at-min overflows;
 *                    fp8 i64[4], fp8.scale, fp8.history with
 *                    --fp8-format (lib/train/fp8_train.c; the same on
 *                    every rank)
 *                    data i64[2] with --data: the file's size and CRC32C
 *                    (a load refuses another file unless
 *                    --allow-data-change; checkpoints saved before this
 *                    record existed load with a note that nothing was
 *                    checked)
 *   replica          (one process, each data-parallel rank: replicas are
 *                    equal and each writes its own, so every shard is
 *                    self-contained) param/<t> for every tensor (the FP32
 *                    masters under --fp16/--bf16), state/<t> (mlp-bn's
 *                    BatchNorm statistics), the optimizer
 *   zero-1 segment   param/<piece> (FP32) or master/<piece> (mixed
 *                    precision) of the rank's segment, its optimizer
 *   zero-2/3 shard   zero.units i64[2] (the units and this rank's shard
 *                    numel: another --bucket-size-mb is refused in
 *                    words), master/<piece> of the rank's segment of
 *                    every unit (its FP32 weights, in FP32 training too),
 *                    its optimizer; the whole weights (stage 2) are rebuilt
 *   stage            param/<t> of the stage's tensors (tensor-parallel
 *                    shards under t > 1), its optimizer
 *   ps server        ps.version i64[1], param/<t> of its shard, its optimizer
 *   ps worker        nothing more (its weights are the servers')
 *   optimizer        optim.step i64[1]; exp_avg/<t> and exp_avg_sq/<t>
 *                    (adamw, lamb) or momentum/<t> (sgd, lars)
 * The common records (trainer, data, loss_scaler) are written here; each
 * strategy writes and reads its own through its table (ck_save, ck_load
 * in step_dp.c, step_zero.c, step_pipe.c, step_ps.c) with the record
 * helpers below.
 * Nothing else is state: the data rows and the weight init are pure
 * functions of (seed, stream, index) (there is no dropout and no other RNG),
 * the LR is a function of the iteration and the skipped steps, evaluation
 * always reads validation batches 0..eval_iters-1, gradients are zero
 * between steps, and the half compute copies are rebuilt at every forward. */

#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_internal.h"

static const char *const dt__ck_roles[] = {"replica", "zero segment", "pipeline/tensor stage",
                                           "parameter-server worker", "parameter server"};

static int dt__ck_role(const dt_trainer *tr) { return tr->strategy->ck_role(tr); }

dt_status dt__validate_checkpoint(const dt_train_config *cfg)
{
    if (cfg->save_dir && !cfg->save_dir[0]) return DT_FAIL(DT_ERR_INVALID, "--save '': expected a directory");
    if (cfg->load_dir && !cfg->load_dir[0]) return DT_FAIL(DT_ERR_INVALID, "--load '': expected a directory");
    if (cfg->save_dir && cfg->save_interval < 1)
        return DT_FAIL(DT_ERR_INVALID, "--save-interval %lld: expected an integer >= 1", (long long)cfg->save_interval);
    if (cfg->save_keep < 0)
        return DT_FAIL(DT_ERR_INVALID, "--save-keep %d: expected an integer >= 0 (0: keep every checkpoint)",
                       cfg->save_keep);
    const int pipe = cfg->pipeline_size > 1 || cfg->tensor_size > 1;
    if (pipe && (cfg->save_dir || cfg->load_dir) &&
        (cfg->pipeline_schedule == DT_SCHED_PIPEDREAM || cfg->pipeline_schedule == DT_SCHED_PIPEDREAM_VSYNC))
        return DT_FAIL(DT_ERR_INVALID,
                       "--%s with --pipeline-schedule %s: not supported: its stages keep "
                       "micro-batches and stashed weight versions in flight across step boundaries, "
                       "which a checkpoint of whole steps cannot hold (use gpipe or 1f1b)",
                       cfg->save_dir ? "save" : "load", dt_sched_kind_name(cfg->pipeline_schedule));
    return DT_OK;
}

/* Records prefix<tensor> of a flat buffer in backend memory, one per tensor of L. */
dt_status dt__ck_put_tensors(dt_checkpoint_shard *s, dt_backend *be, const char *prefix, const dt_paramset *L,
                                    const float *buf)
{
    char name[DT_CHECKPOINT_NAME_MAX + 1];
    for (int i = 0; i < L->count; i++) {
        const dt_param_info *p = &L->info[i];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        void *copy = NULL;
        DT_CHECK(dt_checkpoint_shard_add(s, name, DT_CKPT_F32, NULL, p->numel, &copy));
        if (p->numel) DT_CHECK(be->copy(be, copy, buf + p->offset, p->numel * sizeof(float), DT_COPY_D2H));
    }
    return DT_OK;
}

dt_status dt__ck_get_tensors(const dt_checkpoint_shard *s, dt_backend *be, const char *prefix,
                                    const dt_paramset *L, float *buf)
{
    char name[DT_CHECKPOINT_NAME_MAX + 1];
    for (int i = 0; i < L->count; i++) {
        const dt_param_info *p = &L->info[i];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        const void *data = NULL;
        DT_CHECK(dt_checkpoint_shard_find(s, name, DT_CKPT_F32, p->numel, &data));
        if (buf && p->numel) DT_CHECK(be->copy(be, buf + p->offset, data, p->numel * sizeof(float), DT_COPY_H2D));
    }
    return DT_OK;
}

static int dt__ck_adam(const dt_optim *o) { return o->cfg.kind == DT_OPTIM_ADAMW || o->cfg.kind == DT_OPTIM_LAMB; }

dt_status dt__ck_put_optim(dt_checkpoint_shard *s, const dt_optim *o)
{
    const int64_t step = o->step;
    DT_CHECK(dt_checkpoint_shard_add(s, "optim.step", DT_CKPT_I64, &step, 1, NULL));
    DT_CHECK(dt__ck_put_tensors(s, o->be, dt__ck_adam(o) ? "exp_avg/" : "momentum/", o->layout, o->state1.data));
    if (dt__ck_adam(o)) DT_CHECK(dt__ck_put_tensors(s, o->be, "exp_avg_sq/", o->layout, o->state2.data));
    return DT_OK;
}

/* With apply 0 only check that the records are there with the right sizes. */
dt_status dt__ck_get_optim(const dt_checkpoint_shard *s, dt_optim *o, int apply)
{
    const void *step = NULL;
    DT_CHECK(dt_checkpoint_shard_find(s, "optim.step", DT_CKPT_I64, 1, &step));
    DT_CHECK(dt__ck_get_tensors(s, o->be, dt__ck_adam(o) ? "exp_avg/" : "momentum/", o->layout,
                                apply ? o->state1.data : NULL));
    if (dt__ck_adam(o)) DT_CHECK(dt__ck_get_tensors(s, o->be, "exp_avg_sq/", o->layout, apply ? o->state2.data : NULL));
    if (apply) memcpy(&o->step, step, sizeof o->step);
    return DT_OK;
}

/* A ZeRO-1 segment of params (the whole flat buffer, backend memory): its
 * weights (the FP32 masters under mixed precision) and its optimizer. */
dt_status dt__ck_put_zero(dt_checkpoint_shard *s, dt_backend *be, dt__zero *z, float *params)
{
    size_t lo, len;
    dt__zero_shard(z, &lo, &len);
    float *m = dt__zero_master_data(z);
    DT_CHECK(dt__ck_put_tensors(s, be, m ? "master/" : "param/", dt__zero_layout(z), m ? m : params + lo));
    return dt__ck_put_optim(s, dt__zero_optimizer(z));
}

/* ZeRO-2/3: the units the shard was cut from (their count and the shard's
 * numel), so that a run with other units (stage 2's buckets follow
 * --bucket-size-mb) is refused in words, not by a piece's size. */
dt_status dt__ck_put_units(dt_checkpoint_shard *s, const dt__zero *z)
{
    size_t lo, len;
    dt__zero_shard(z, &lo, &len);
    const int64_t v[2] = {dt__zero_units(z), (int64_t)len};
    return dt_checkpoint_shard_add(s, "zero.units", DT_CKPT_I64, v, 2, NULL);
}

dt_status dt__ck_get_units(const dt_checkpoint_shard *s, const dt__zero *z, int stage)
{
    const void *p;
    int64_t v[2];
    DT_CHECK(dt_checkpoint_shard_find(s, "zero.units", DT_CKPT_I64, 2, &p));
    memcpy(v, p, sizeof v); /* records are unaligned */
    size_t lo, len;
    dt__zero_shard(z, &lo, &len);
    if (v[0] != dt__zero_units(z) || v[1] != (int64_t)len)
        return DT_FAIL(DT_ERR_INVALID,
                       "--load: the shard was cut from %lld unit%s (%lld elements on this rank), this run cuts %d "
                       "(%zu)%s",
                       (long long)v[0], v[0] == 1 ? "" : "s", (long long)v[1], dt__zero_units(z), len,
                       stage == 2 ? ": --zero-stage 2's units are the buckets: give the saved run's --bucket-size-mb"
                                  : "");
    return DT_OK;
}

/* The same read back; dt__zero_restored then gives every rank the whole buffer. */
dt_status dt__ck_get_zero(const dt_checkpoint_shard *s, dt_backend *be, dt__zero *z, float *params)
{
    size_t lo, len;
    dt__zero_shard(z, &lo, &len);
    float *m = dt__zero_master_data(z);
    DT_CHECK(dt__ck_get_tensors(s, be, m ? "master/" : "param/", dt__zero_layout(z), m ? m : params + lo));
    return dt__ck_get_optim(s, dt__zero_optimizer(z), 1);
}

dt_status dt__ck_put_scaler(dt_checkpoint_shard *s, const dt_loss_scaler *sc)
{
    uint32_t bits;
    memcpy(&bits, &sc->scale, sizeof bits);
    const int64_t v[9] = {bits,        sc->hysteresis, sc->good_steps, sc->steps,        sc->overflows,
                          sc->skipped, sc->growths,    sc->backoffs,   sc->min_overflows};
    return dt_checkpoint_shard_add(s, "loss_scaler", DT_CKPT_I64, v, 9, NULL);
}

dt_status dt__ck_get_scaler(const dt_checkpoint_shard *s, dt_loss_scaler *sc)
{
    const void *p = NULL;
    DT_CHECK(dt_checkpoint_shard_find(s, "loss_scaler", DT_CKPT_I64, 9, &p));
    int64_t v[9];
    memcpy(v, p, sizeof v);
    const uint32_t bits = (uint32_t)v[0];
    memcpy(&sc->scale, &bits, sizeof bits);
    sc->hysteresis = (int)v[1];
    sc->good_steps = v[2], sc->steps = v[3], sc->overflows = v[4], sc->skipped = v[5];
    sc->growths = v[6], sc->backoffs = v[7], sc->min_overflows = v[8];
    return DT_OK;
}

/* Micro-batches of one step over every rank, and the data position of iteration it. */
static int64_t dt__ck_micro_per_step(const dt_trainer *tr) { return (int64_t)tr->n_micro * tr->dp_size; }

/* This rank's shard at iteration `iteration` (a server: its version too). */
static dt_status dt__ck_fill(dt_trainer *tr, dt_checkpoint_shard *s, int64_t iteration, int64_t version)
{
    const int64_t t[5] = {iteration, dt__ck_role(tr), iteration * dt__ck_micro_per_step(tr), dt__ck_micro_per_step(tr),
                          tr->nf.skipped};
    DT_CHECK(dt_checkpoint_shard_add(s, "trainer", DT_CKPT_I64, t, 5, NULL));
    uint64_t data_bytes;
    uint32_t data_crc;
    if (tr->cfg.data.path && tr->gpt.data && dt_data_fingerprint(tr->gpt.data, &data_bytes, &data_crc) == DT_OK) {
        const int64_t d[2] = {(int64_t)data_bytes, (int64_t)data_crc};
        DT_CHECK(dt_checkpoint_shard_add(s, "data", DT_CKPT_I64, d, 2, NULL));
    }
    const dt_loss_scaler *sc = tr->strategy->ck_scaler ? tr->strategy->ck_scaler(tr) : &tr->scaler;
    if (tr->cfg.use_loss_scaling) DT_CHECK(dt__ck_put_scaler(s, sc));
    if (tr->fp8) DT_CHECK(dt__fp8_ck_put(tr, s));
    return tr->strategy->ck_save(tr, s, version); /* its own records */
}

/* The manifest's layout object. */
static char *dt__ck_layout_json(const dt_trainer *tr)
{
    const dt_train_config *c = &tr->cfg;
    const int world = c->comm ? c->comm->size : 1;
    const int role = dt__ck_role(tr);
    dt__strategy_state ss;
    tr->strategy->state(tr, &ss);
    const int zero = ss.zero != NULL;
    json_t *o = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:b, s:s, s:s}", "kind", tr->strategy->ck_kind(tr),
                          "world_size", world, "data_parallel_size", tr->dp_size, "tensor_model_parallel_size",
                          c->tensor_size, "pipeline_model_parallel_size", c->pipeline_size, "num_ps_servers",
                          c->ps_mode != DT_PS_NONE ? c->num_ps_servers : 0, "use_distributed_optimizer", zero,
                          "rank_0_role", dt__ck_roles[role], "shards", tr->strategy->ck_shards(tr));
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

static void dt__ck_set(char **dst, const char *s)
{
    free(*dst);
    *dst = strdup(s ? s : "");
}

dt_status dt_trainer_save(dt_trainer *tr, const char *dir)
{
    if (!dir || !dir[0]) return DT_FAIL(DT_ERR_INVALID, "--save '': expected a directory");
    const int role = dt__ck_role(tr);
    const int world = tr->cfg.comm ? tr->cfg.comm->size : 1;
    int64_t iteration = tr->iter, version = 0;
    if (tr->strategy->ck_prepare) DT_CHECK(tr->strategy->ck_prepare(tr, dir, &iteration, &version));
    dt_checkpoint_shard s;
    dt_checkpoint_shard_init(&s, tr->cfg.comm ? tr->cfg.comm->rank : 0, world, iteration);
    dt_status local = dt__ck_fill(tr, &s, iteration, version);
    char *cj = local == DT_OK ? dt_train_config_json(&tr->cfg) : NULL;
    char *lj = local == DT_OK ? dt__ck_layout_json(tr) : NULL;
    if (local == DT_OK && (!cj || !lj)) local = DT_FAIL(DT_ERR_NOMEM, "--save %s: out of memory", dir);
    const dt_checkpoint_save a = {.dir = dir,
                                  .iteration = iteration,
                                  .comm = tr->cfg.comm,
                                  .shard = &s,
                                  .layout_json = lj,
                                  .config_json = cj,
                                  .keep = tr->cfg.save_keep,
                                  .local_status = local};
    char path[4200];
    dt_status st = dt_checkpoint_write(&a, path, sizeof path);
    dt_checkpoint_shard_free(&s);
    free(cj);
    free(lj);
    DT_CHECK(st);
    tr->ck.last_save = role == DT__CK_PS_SERVER ? version : iteration;
    dt__ck_set(&tr->ck.saved, path);
    return DT_OK;
}

/* Configuration keys a resumed run may change: they do not touch the state. */
static const char *const dt__ck_may_change[] = {"train_iters",    "log_interval",
                                                "eval_interval",  "eval_iters",
                                                "trace",          "threads",
                                                "device",         "comm_timeout",
                                                "skip_nonfinite", "allreduce_chunk_bytes",
                                                "bucket_bytes",   "slow_rank",
                                                "slow_ms",        "hang_rank",
                                                "hang_iter",      "scatter_gather_tensors_in_pipeline",
                                                "sequence_parallel", "cp_comm_type",
                                                "load_hf",        NULL};

static char *dt__ck_value_text(json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | DT__JSON_PRECISION);
}

/* The checkpoint's configuration (JSON text) against this run's: the first
 * key that differs, named with both values. */
static dt_status dt__ck_config_check(const char *path, const char *saved, const dt_train_config *cfg)
{
    json_error_t err;
    json_t *a = json_loads(saved, 0, &err), *b = dt__config_object(cfg);
    dt_status st = DT_OK;
    if (!a || !b) {
        st = !a ? DT_FAIL(DT_ERR_FORMAT, "%s: the manifest's config does not parse (%s)", path, err.text)
                : DT_FAIL(DT_ERR_NOMEM, "--load: out of memory");
        goto done;
    }
    for (int pass = 0; pass < 2 && st == DT_OK; pass++) {
        json_t *x = pass ? b : a, *y = pass ? a : b;
        const char *key;
        json_t *v;
        json_object_foreach(x, key, v)
        {
            int allowed = 0;
            for (int i = 0; dt__ck_may_change[i]; i++) allowed |= !strcmp(key, dt__ck_may_change[i]);
            allowed |= !strcmp(key, "model"); /* the preset's name: a label, the sizes are compared one by one */
            if (allowed) continue;
            json_t *w = json_object_get(y, key);
            if (!w) {
                st = DT_FAIL(DT_ERR_INVALID,
                             "%s: model, layout or optimizer differ from this run's: %s is %s "
                             "configuration only",
                             path, key, pass ? "this run's" : "the checkpoint's");
                break;
            }
            char *sv = dt__ck_value_text(pass ? w : v), *sw = dt__ck_value_text(pass ? v : w);
            if (sv && sw && strcmp(sv, sw) != 0)
                st = DT_FAIL(DT_ERR_INVALID,
                             "%s: model, layout or optimizer differ from this run's: %s %s vs %s "
                             "(checkpoint vs this run; only train_iters, the log and eval settings, "
                             "trace, threads, device, communication tuning and testing faults may change)",
                             path, key, sv, sw);
            free(sv);
            free(sw);
            if (st != DT_OK) break;
        }
    }
done:
    json_decref(a);
    json_decref(b);
    return st;
}

/* Every rank of the world learns whether any failed; a rank that did not
 * keeps its own message, the others get one naming the first that did.
 * Each failed rank contributes a 24-bit hash of its message (exact in a
 * float): a rank whose failure is rank 0's word for word (a job-wide one,
 * such as a world-size or configuration mismatch, which every rank finds
 * alike) gets the "its message is on its stderr" form, which dtrain does
 * not print, so such a failure is one line per job (rank 0's); a failure
 * of its own (its shard) is still its own line. */
static dt_status dt__ck_agree(dt_trainer *tr, dt_status mine, const char *what)
{
    dt_comm *c = tr->cfg.comm;
    if (!c || c->size == 1) return mine;
    float *f = calloc((size_t)c->size, sizeof *f);
    if (!f) return DT_FAIL(DT_ERR_NOMEM, "checkpoint: out of memory");
    const char *msg = mine != DT_OK ? dt_last_error() : "";
    const uint32_t h = (dt_crc32c(msg, strlen(msg)) & 0xFFFFFFu) + 1u;
    f[c->rank] = mine != DT_OK ? (float)h : 0.0f;
    dt_status st = dt_comm_allreduce(c, f, (size_t)c->size, DT_ALLREDUCE_RING, NULL);
    int bad = -1;
    for (int r = 0; st == DT_OK && r < c->size && bad < 0; r++)
        if (f[r] != 0.0f) bad = r;
    const int same_as_0 = st == DT_OK && c->rank != 0 && f[0] == (float)h;
    free(f);
    if (mine != DT_OK && same_as_0)
        return DT_FAIL(mine, "%s: rank 0 failed the same way (its message is on its stderr)", what);
    if (mine != DT_OK) return mine;
    DT_CHECK(st);
    if (bad >= 0) return DT_FAIL(DT_ERR_INVALID, "%s: rank %d failed (its message is on its stderr)", what, bad);
    return DT_OK;
}

/* With --data: the file against the size and CRC32C the checkpoint
 * recorded (record "data"); a checkpoint without the record predates it
 * and loads with a note. */
static dt_status dt__ck_data_check(const dt_trainer *tr, const dt_checkpoint_shard *s, const char *path, char *note,
                                   size_t ncap)
{
    uint64_t bytes;
    uint32_t crc;
    if (!tr->cfg.data.path || !tr->gpt.data || dt_data_fingerprint(tr->gpt.data, &bytes, &crc) != DT_OK) return DT_OK;
    int found = 0;
    for (int i = 0; i < s->count; i++) found |= !strcmp(s->rec[i].name, "data");
    if (!found) {
        const size_t n = strlen(note);
        snprintf(note + n, ncap - n, "%s%s predates the data fingerprint: --data %s was not checked against it",
                 n ? "; " : "", path, tr->cfg.data.path);
        return DT_OK;
    }
    const void *p = NULL;
    DT_CHECK(dt_checkpoint_shard_find(s, "data", DT_CKPT_I64, 2, &p));
    int64_t d[2];
    memcpy(d, p, sizeof d);
    if ((uint64_t)d[0] == bytes && (uint32_t)d[1] == crc) return DT_OK;
    if (tr->cfg.allow_data_change) {
        const size_t n = strlen(note);
        snprintf(note + n, ncap - n,
                 "%s--data %s changed since the checkpoint (%lld bytes, CRC32C %08x then; %llu bytes, %08x now): "
                 "resuming on it (--allow-data-change)",
                 n ? "; " : "", tr->cfg.data.path, (long long)d[0], (unsigned)(uint32_t)d[1], (unsigned long long)bytes,
                 (unsigned)crc);
        return DT_OK;
    }
    return DT_FAIL(DT_ERR_INVALID,
                   "%s: --data %s changed since the checkpoint (%lld bytes, CRC32C %08x then; %llu bytes, %08x "
                   "now); to resume on it anyway, add --allow-data-change",
                   path, tr->cfg.data.path, (long long)d[0], (unsigned)(uint32_t)d[1], (unsigned long long)bytes,
                   (unsigned)crc);
}

/* This rank's part of the load, local only: check everything, restore
 * what is local. */
static dt_status dt__ck_load_local(dt_trainer *tr, const char *dir, char *path, size_t cap, char *note, size_t ncap)
{
    const int world = tr->cfg.comm ? tr->cfg.comm->size : 1, rank = tr->cfg.comm ? tr->cfg.comm->rank : 0;
    const int role = dt__ck_role(tr);
    dt_checkpoint_manifest m;
    DT_CHECK(dt_checkpoint_find_latest(dir, path, cap, note, ncap, &m));
    dt_status st = DT_OK;
    dt_checkpoint_shard s;
    memset(&s, 0, sizeof s);
    if (m.world_size != world) {
        st = DT_FAIL(DT_ERR_INVALID,
                     "%s: %d shards (a world of %d ranks), this run has %d rank%s: the shard count "
                     "differs from the world",
                     path, m.world_size, m.world_size, world, world == 1 ? "" : "s");
        goto done;
    }
    DT_CHECK_GOTO(dt__ck_config_check(path, m.config_json, &tr->cfg), st, done);
    DT_CHECK_GOTO(dt_checkpoint_read_shard(&m, rank, &s), st, done);
    DT_CHECK_GOTO(dt__ck_data_check(tr, &s, path, note, ncap), st, done);
    const void *tp = NULL;
    DT_CHECK_GOTO(dt_checkpoint_shard_find(&s, "trainer", DT_CKPT_I64, 5, &tp), st, done);
    int64_t t[5];
    memcpy(t, tp, sizeof t);
    const int64_t it = m.iteration;
    if (t[0] != it || t[1] != role || t[3] != dt__ck_micro_per_step(tr) || t[2] != it * t[3]) {
        st = DT_FAIL(DT_ERR_FORMAT,
                     "%s: the shard is a %s at iteration %lld (data position %lld, %lld micro-batches "
                     "per step); this rank is a %s at %lld (%lld micro-batches per step)",
                     s.path, t[1] >= 0 && t[1] <= 4 ? dt__ck_roles[t[1]] : "?", (long long)t[0], (long long)t[2],
                     (long long)t[3], dt__ck_roles[role], (long long)it, (long long)dt__ck_micro_per_step(tr));
        goto done;
    }
    if (it > tr->cfg.train_iters && role != DT__CK_PS_SERVER) {
        st = DT_FAIL(DT_ERR_INVALID, "%s: saved at iteration %lld, beyond this run's --train-iters %lld", path,
                     (long long)it, (long long)tr->cfg.train_iters);
        goto done;
    }
    if (tr->cfg.use_loss_scaling && role != DT__CK_PS_SERVER)
        DT_CHECK_GOTO(dt__ck_get_scaler(&s, &tr->scaler), st, done);
    if (tr->fp8) DT_CHECK_GOTO(dt__fp8_ck_get(tr, &s), st, done);
    DT_CHECK_GOTO(tr->strategy->ck_load(tr, &s, it), st, done); /* its own records (a server keeps s) */
    tr->iter = role == DT__CK_PS_SERVER ? 0 : it;
    if (role != DT__CK_PS_SERVER) tr->ck.last_save = it;
    tr->nf.skipped = t[4];
done:
    dt_checkpoint_shard_free(&s);
    dt_checkpoint_manifest_free(&m);
    return st;
}

dt_status dt_trainer_load(dt_trainer *tr, const char *dir)
{
    if (tr->iter != 0 || tr->ps.pulled || tr->ps.resume)
        return DT_FAIL(DT_ERR_INVALID, "--load %s: load right after creating the trainer, before any step", dir);
    char path[4200] = "", note[2048] = "";
    dt_status mine = dt__ck_load_local(tr, dir, path, sizeof path, note, sizeof note);
    char what[4300];
    snprintf(what, sizeof what, "--load %s", dir);
    dt_status st = dt__ck_agree(tr, mine, what);
    if (st != DT_OK) {
        tr->ps.broken = 1; /* every rank fails: no server will serve, so no worker may wait for one */
        return st;
    }
    /* every rank has its part: the ZeRO segments to everyone (of the stage's data group) */
    if (tr->strategy->restored) DT_CHECK(tr->strategy->restored(tr));
    dt__ck_set(&tr->ck.loaded, path);
    dt__ck_set(&tr->ck.note, note);
    return DT_OK;
}

const char *dt_trainer_loaded_path(const dt_trainer *tr) { return tr->ck.loaded; }
const char *dt_trainer_load_note(const dt_trainer *tr) { return tr->ck.note ? tr->ck.note : ""; }
const char *dt_trainer_saved_path(const dt_trainer *tr) { return tr->ck.saved; }
