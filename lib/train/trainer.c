/* trainer.c: the trainer's core (see dt_train.h): create and free, the
 * step as a short dispatch over the strategies, and the run's throughput
 * bookkeeping. Everything else lives beside it in lib/train/ (the list and
 * the invariants are in trainer_internal.h).
 *
 * A step with N = global_batch_size / micro_batch_size:
 *   for k in 0..N-1: batch(train, iter*N + k) -> forward -> backward(1/N)
 *   norm = ||grads||; scale = clip factor; lr = schedule(iter)
 *   optimizer step(grad_scale = scale); zero grads
 * so gradients are the mean over the global batch, and the training data a
 * run sees depends only on (seed, global batch, micro batch, T), never on
 * timing or threads.
 *
 * Invariants: the trainer owns copies of every string in its config; the
 * same config (and thread count) gives bit-identical losses, whatever
 * workers the automatic count picks (thread_tune.c); evaluation
 * always reads validation batches 0..eval_iters-1 and never changes the
 * parameters or gradients. Trace times are nanoseconds since the trainer
 * was created; the "iter" arg of trace events is the 0-based iteration. */
#define _POSIX_C_SOURCE 200809L
#include "dt_train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dt_safetensors.h"
#include "dt_time.h"
#include "trainer_internal.h"

void dt__tr_set_hook(dt_trainer *tr, int on)
{
    if (tr->kind->set_layer_hook) tr->kind->set_layer_hook(tr, on);
}

size_t dt__tr_peak_act(const dt_trainer *tr)
{
    if (tr->strategy->peak_activation_bytes) return tr->strategy->peak_activation_bytes(tr);
    return tr->kind->peak_activation_bytes(tr);
}

static dt_status dt__strdup(const char *s, char **out)
{
    *out = NULL;
    if (!s) return DT_OK;
    *out = strdup(s);
    if (!*out) return DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory copying '%s'", s);
    return DT_OK;
}

/* The ranks' layout: the grid (lib/parallel/grid.c; workers 0..W-1, then
 * any parameter servers), this rank's data-parallel rank and size,
 * micro-batches per step, and the strategy. */
static dt_status dt__tr_layout_ranks(dt_trainer *tr)
{
    const dt_train_config *cfg = &tr->cfg;
    const int world = cfg->comm ? cfg->comm->size : 1;
    const int servers = cfg->ps_mode != DT_PS_NONE ? cfg->num_ps_servers : 0;
    const int cpc = cfg->context_size > 1 ? cfg->context_size : 1;
    DT_CHECK(dt_grid_init(&tr->grid, world, servers, cfg->tensor_size, cpc, cfg->pipeline_size));
    tr->rank = cfg->comm ? cfg->comm->rank : 0;
    tr->dp_size = tr->grid.size[DT_GRID_DATA];
    tr->dp_rank = dt_grid_coord(&tr->grid, tr->rank, DT_GRID_DATA);
    if (tr->dp_rank < 0) tr->dp_rank = 0; /* a server: its batch buffers are never used */
    tr->dp_comm = cfg->comm;
    /* the stage runtime (lib/parallel/pipeline.c) */
    const int split = cfg->pipeline_size > 1 || cfg->tensor_size > 1 || cpc > 1;
    tr->n_micro = cfg->global_batch_size / (cfg->micro_batch_size * tr->dp_size);
    tr->strategy = split                                                                         ? &dt__strategy_pipe
                   : cfg->ps_mode != DT_PS_NONE                                                  ? &dt__strategy_ps
                   : (cfg->use_distributed_optimizer && tr->dp_size > 1) || cfg->zero_stage >= 2 ? &dt__strategy_zero
                                                                                                 : &dt__strategy_replica;
    return DT_OK;
}

/* --load-hf without --load: the Hugging Face checkpoint, checked against
 * the model configured (the driver took it from the same config.json), as
 * the weights' source. With --load the checkpoint's weights replace the
 * initial ones anyway: only the configuration is checked. */
static dt_status dt__tr_open_hf(dt_trainer *tr, dt_hf_model **hf)
{
    *hf = NULL;
    if (!tr->cfg.load_hf) return DT_OK;
    const dt_gpt_config *m = &tr->cfg.model;
    dt_gpt_config c;
    DT_CHECK(tr->cfg.load_dir ? dt_hf_read_config(tr->cfg.load_hf, &c) : dt_hf_open(tr->cfg.load_hf, hf));
    if (*hf) c = *dt_hf_config(*hf);
    const char *bad = c.vocab_size != m->vocab_size ? "vocab_size"
                      : c.seq_len != m->seq_len     ? "n_positions"
                      : c.num_layers != m->num_layers ? "n_layer"
                      : c.num_heads != m->num_heads   ? "n_head"
                      : c.hidden_size != m->hidden_size ? "n_embd"
                      : c.tie_embeddings != m->tie_embeddings ? "tie_word_embeddings"
                                                              : NULL;
    if (bad) {
        dt_hf_close(*hf);
        *hf = NULL;
        return DT_FAIL(DT_ERR_INVALID, "--load-hf %s: config.json's %s differs from the model configured", tr->cfg.load_hf,
                       bad);
    }
    if (*hf) tr->init = dt_hf_init(*hf);
    return DT_OK;
}

dt_status dt_trainer_create(const dt_train_config *cfg, dt_trainer **out)
{
    *out = NULL;
    DT_CHECK(dt_train_config_validate(cfg));
    dt_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory");
    dt_status st = DT_OK;
    dt_hf_model *hf = NULL;

    tr->cfg = *cfg;
    tr->kind = cfg->model_kind == DT_MODEL_MLP_BN ? &dt__model_mlp
               : cfg->zero_stage >= 2 && cfg->pipeline_size == 1 && cfg->tensor_size == 1 && cfg->context_size <= 1
                   ? &dt__model_gpt_zero /* else the pipeline's stages shard (lib/parallel/pipeline_shard.c) */
                                                  : &dt__model_gpt;
    tr->pipe.probe = NAN;
    DT_CHECK_GOTO(dt__strdup(cfg->data.task, &tr->task), st, fail);
    DT_CHECK_GOTO(dt__strdup(cfg->data.path, &tr->path), st, fail);
    DT_CHECK_GOTO(dt__strdup(cfg->device, &tr->device), st, fail);
    DT_CHECK_GOTO(dt__strdup(cfg->trace_path, &tr->trace_path), st, fail);
    DT_CHECK_GOTO(dt__strdup(cfg->save_dir, &tr->save_dir), st, fail);
    DT_CHECK_GOTO(dt__strdup(cfg->load_dir, &tr->load_dir), st, fail);
    DT_CHECK_GOTO(dt__strdup(cfg->load_hf, &tr->load_hf), st, fail);
    DT_CHECK_GOTO(dt__strdup(cfg->data.tokenizer, &tr->tokenizer), st, fail);
    tr->cfg.data.tokenizer = tr->tokenizer;
    tr->cfg.load_hf = tr->load_hf;
    DT_CHECK_GOTO(dt__strdup(cfg->cluster, &tr->cluster), st, fail);
    tr->cfg.cluster = tr->cluster;
    tr->cfg.save_dir = tr->save_dir;
    tr->cfg.load_dir = tr->load_dir;
    tr->ck.last_save = -1;
    tr->cfg.data.task = tr->task;
    tr->cfg.data.path = tr->path;
    tr->cfg.device = tr->device;
    tr->cfg.trace_path = tr->trace_path;

    tr->B = cfg->micro_batch_size;
    tr->T = cfg->seq_length;
    /* before any split: the communicators made from comm inherit it */
    if (cfg->comm) DT_CHECK_GOTO(dt_comm_set_timeout(cfg->comm, cfg->comm_timeout), st, fail);
    DT_CHECK_GOTO(dt__tr_layout_ranks(tr), st, fail);

    {
        /* the GPU of this process's rank on its node, where the communicator knows it */
        const dt_backend_options bo = {cfg->threads, cfg->comm ? cfg->comm->local_rank : -1};
        DT_CHECK_GOTO(dt_backend_create_with(tr->cfg.device, &bo, &tr->be), st, fail);
    }
    tr->threads_requested = cfg->threads;
    tr->cfg.threads = tr->be->threads;
    /* --threads 0 in one process: as many workers as are fastest now (a
     * rank under mpirun has its share of the cores already, and its step
     * times are its peers' too) */
    dt__tune_init(&tr->tune, tr->be->threads, cfg->threads <= 0 && !cfg->comm && tr->be->ops->set_workers);
    tr->init = (dt_gpt_init){.seed = cfg->seed};
    DT_CHECK_GOTO(dt__tr_open_hf(tr, &hf), st, fail);
    DT_CHECK_GOTO(tr->kind->create(tr, tr->strategy->split), st, fail);
    {
        double f = dt_lr_scaling_factor(cfg->lr_scaling, cfg->global_batch_size, cfg->base_batch_size);
        tr->lr = cfg->lr;
        tr->lr.max_lr = (float)(cfg->lr.max_lr * f);
        tr->lr.min_lr = (float)(cfg->lr.min_lr * f);
    }
    if (cfg->use_loss_scaling) DT_CHECK_GOTO(dt_loss_scaler_init(&tr->scaler, &cfg->loss_scaler), st, fail);
    DT_CHECK_GOTO(tr->strategy->create(tr), st, fail);
    dt_hf_close(hf); /* every layout has read its weights */
    hf = NULL;
    tr->init.read = NULL;
    tr->init.ctx = NULL;
    if (!tr->strategy->split) DT_CHECK_GOTO(tr->kind->zero_grad(tr), st, fail);
    DT_CHECK_GOTO(dt__fp8_train_create(tr), st, fail);
    /* several ranks with a trace: their clocks against rank 0's (collective),
     * then time 0, which each rank file's header places on rank 0's clock */
    DT_CHECK_GOTO(dt__trace_sync(tr), st, fail);
    tr->t_start_ns = dt_time_ns();
    if (tr->cfg.trace_path) DT_CHECK_GOTO(dt__trace_open(tr), st, fail);
    if (tr->strategy->start) DT_CHECK_GOTO(tr->strategy->start(tr), st, fail);
    /* a parameter-server worker pulls the servers' weights with its first
     * step, evaluation or save (dt__tr_ps_ensure_pulled), so that
     * dt_trainer_load can still run on every rank first */
    *out = tr;
    return DT_OK;

fail:
    dt_hf_close(hf);
    dt_trainer_free(tr);
    return st;
}

dt_status dt_trainer_finish(dt_trainer *tr)
{
    if (!tr || !tr->trace.writer) return DT_OK;
    dt__tr_set_hook(tr, 0);
    const dt_status hst = tr->fp8 ? dt__fp8_train_trace_hist(tr) : DT_OK; /* collective */
    dt_status st = dt_trace_writer_close(tr->trace.writer);
    if (hst != DT_OK) st = hst;
    tr->trace.writer = NULL;
    if (tr->trace.status != DT_OK) {
        /* the first write error is the cause; the message of a later close
         * failure would hide it, so restate it */
        st = DT_FAIL(tr->trace.status, "--trace %s: writing the trace failed", tr->cfg.trace_path);
    }
    return dt__trace_gather(tr, st); /* several ranks: the merged trace (collective) */
}

void dt_trainer_free(dt_trainer *tr)
{
    if (!tr) return;
    if (tr->trace.writer) { /* not finished: the run failed, leave no partial trace */
        dt__tr_set_hook(tr, 0);
        dt_trace_writer_abort(tr->trace.writer);
    }
    if (tr->strategy) tr->strategy->free(tr);
    dt__fp8_train_free(tr);
    free(tr->save_dir);
    free(tr->load_dir);
    free(tr->load_hf);
    free(tr->tokenizer);
    free(tr->ck.loaded);
    free(tr->ck.note);
    free(tr->ck.saved);
    dt_comm_free(tr->gcomm);
    if (tr->opt_ready) dt_optim_free(&tr->opt);
    tr->kind->destroy(tr);
    dt_backend_destroy(tr->be);
    free(tr->task);
    free(tr->path);
    free(tr->device);
    free(tr->trace_path);
    free(tr->trace.merged_path);
    free(tr->cluster);
    free(tr);
}

/* The batch index of micro-batch j (0 .. n_micro * dp_size - 1) of the
 * current step: the global batch is n_micro * dp_size micro-batches, rank r
 * takes j = r * n_micro .. r * n_micro + n_micro - 1, so n ranks with
 * micro-batch b see exactly the rows of one rank with n * b. */
uint64_t dt__micro_index(const dt_trainer *tr, int j)
{
    return (uint64_t)tr->iter * (uint64_t)(tr->n_micro * tr->dp_size) + (uint64_t)j;
}

/* --slow-rank: this rank sleeps before its gradient exchange (a straggler). */
static void dt__straggle(const dt_trainer *tr)
{
    if (tr->cfg.slow_ms <= 0 || tr->rank != tr->cfg.slow_rank) return;
    struct timespec ts = {.tv_sec = tr->cfg.slow_ms / 1000, .tv_nsec = (long)(tr->cfg.slow_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Steps' throughput bookkeeping (the first step is the warm-up). */
void dt__tr_account(dt_trainer *tr, double secs)
{
    const double tokens = (double)tr->cfg.global_batch_size * tr->T;
    if (tr->iter == 0) {
        tr->speed.first_step_s = secs;
    } else {
        tr->speed.rest_s += secs;
        tr->speed.rest_tokens += tokens;
    }
}

/* --hang-rank R:ITER: rank R stops for ever at the start of iteration ITER
 * (a hung rank, for tests of --comm-timeout); signals still end it. */
static void dt__hang(const dt_trainer *tr)
{
    if (tr->cfg.hang_iter <= 0 || tr->rank != tr->cfg.hang_rank || tr->iter + 1 != tr->cfg.hang_iter) return;
    for (;;) {
        struct timespec ts = {.tv_sec = 1, .tv_nsec = 0};
        nanosleep(&ts, NULL);
    }
}

static dt_status dt__tr_step(dt_trainer *tr, dt_train_stats *out)
{
    tr->nf.skip = 0;
    tr->nf.located = 0;
    tr->nf.shared = 0;
    tr->nf.loss_overflow = 0;
    DT_CHECK(dt__min_scale_check(tr)); /* fp16 stuck at its minimum scale: stop */
    if (tr->strategy->step) return tr->strategy->step(tr, out); /* a schedule is the whole step */
    if (tr->strategy->begin_step) DT_CHECK(tr->strategy->begin_step(tr));
    const int64_t t0 = dt_time_ns();

    /* forward and backward of this rank's micro-batches; loss scaling: the
     * backward starts from S * loss, unscaled by the update */
    dt__step_ctx c = {.S = tr->cfg.use_loss_scaling ? dt_loss_scaler_scale(&tr->scaler) : 1.0f};
    size_t act_bytes = 0;
    /* the ranks whose micro-batches make up one gradient: every worker's,
     * except under ps-async, where each worker's push is an update of its own */
    const int share = tr->cfg.ps_mode == DT_PS_ASYNC ? 1 : tr->dp_size;
    DT_CHECK(tr->kind->accumulate(tr, c.S, share, &c.loss_sum, &act_bytes));
    DT_CHECK(dt__trace_check(tr));
    dt__straggle(tr);

    /* the gradients' exchange and the update */
    DT_CHECK(tr->strategy->update(tr, &c));
    DT_CHECK(tr->kind->zero_grad(tr));
    DT_CHECK(tr->be->synchronize(tr->be));
    const int64_t t1 = dt_time_ns();
    DT_CHECK(dt__trace_step_end(tr, &c, act_bytes, t1));

    const double secs = (double)(t1 - t0) * 1e-9;
    const double tokens = (double)tr->cfg.global_batch_size * tr->T;
    dt__tr_account(tr, secs);
    tr->iter++;
    if (out) {
        const dt_paramset *layout = tr->kind->layout(tr);
        out->iter = tr->iter;
        out->loss = (float)c.loss_sum;
        out->loss_iter = tr->iter;
        out->lr = c.ur.lr;
        out->grad_norm = c.ur.norm;
        out->step_seconds = secs;
        out->tokens_per_second = secs > 0 ? tokens / secs : 0.0;
        out->loss_scale = c.S;
        out->overflow = c.ur.skipped;
        out->overflow_tensor = c.ur.first_bad >= 0 ? layout->info[c.ur.first_bad].name : NULL;
        out->overflow_where = tr->nf.loss_overflow ? tr->nf.where : NULL;
        out->scale_at_min = c.ur.ev.at_min;
        out->scale_at_min_first = c.ur.ev.at_min_first;
        out->skipped_steps = tr->cfg.use_loss_scaling ? tr->scaler.skipped : 0;
        out->nonfinite = tr->nf.skip;
        out->nonfinite_where = tr->nf.skip ? tr->nf.where : NULL;
        out->nonfinite_skipped = tr->nf.skipped;
        out->staleness = c.rep.staleness;
        out->version = c.rep.version;
    }
    return DT_OK;
}

dt_status dt_trainer_step(dt_trainer *tr, dt_train_stats *out)
{
    dt__hang(tr);
    if (!tr->tune.on) {
        DT_CHECK(dt__tr_step(tr, out));
    } else {
        DT_CHECK(tr->be->set_workers(tr->be, dt__tune_next(&tr->tune)));
        const int64_t t0 = dt_time_ns();
        DT_CHECK(dt__tr_step(tr, out));
        dt__tune_record(&tr->tune, dt_time_ns() - t0);
    }
    return tr->fp8 ? dt__fp8_train_step_end(tr) : DT_OK; /* the amax exchange and the next scales */
}

dt_gpt *dt_trainer_model(dt_trainer *tr) { return tr->gpt.model; }
const dt_lr_schedule *dt_trainer_lr_schedule(const dt_trainer *tr) { return &tr->lr; }
size_t dt_trainer_peak_activation_bytes(const dt_trainer *tr) { return dt__tr_peak_act(tr); }
const dt_train_config *dt_trainer_config(const dt_trainer *tr) { return &tr->cfg; }
const dt_dataset *dt_trainer_data(const dt_trainer *tr) { return tr->gpt.data; }
int64_t dt_trainer_iterations(const dt_trainer *tr) { return tr->iter; }
size_t dt_trainer_num_params(const dt_trainer *tr) { return tr->num_params; }
const char *dt_trainer_data_note(const dt_trainer *tr)
{
    return tr->kind != &dt__model_mlp && tr->gpt.data ? dt_data_note(tr->gpt.data) : NULL;
}

double dt_trainer_tokens_per_second(const dt_trainer *tr)
{
    if (tr->iter >= 2 && tr->speed.rest_s > 0) return tr->speed.rest_tokens / tr->speed.rest_s;
    if (tr->iter >= 1 && tr->speed.first_step_s > 0)
        return (double)tr->cfg.global_batch_size * tr->T / tr->speed.first_step_s;
    return 0.0;
}

int dt_trainer_workers(const dt_trainer *tr) { return tr->tune.on ? dt__tune_best(&tr->tune) : tr->be->threads; }
int dt_trainer_threads_automatic(const dt_trainer *tr) { return tr->tune.on; }
double dt_trainer_elapsed_seconds(const dt_trainer *tr) { return (double)(dt_time_ns() - tr->t_start_ns) * 1e-9; }
