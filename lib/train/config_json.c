/* config_json.c: the configuration as JSON (dt_train_config_json), the
 * object that trace headers, summaries and checkpoint manifests carry; the
 * run's own additions for trace headers and summaries (threads asked for,
 * saves, data size, the machine: dt__run_config_object); and the small
 * jansson helpers the summary shares.
 *
 * Invariants: keys are Megatron-LM's argument names where one exists, in a
 * fixed order; a float is written as the shortest decimal that reads back
 * as the same float; a seed above 2^63 is kept exact as text. A resumed
 * run compares these objects key by key (checkpoint_io.c), so a key's
 * meaning never changes. */
#define _POSIX_C_SOURCE 200809L
#include "dt_train.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer_internal.h"

/* A float as the shortest decimal that reads back as the same float, so
 * 0.001f is written 0.001 rather than 0.0010000000474974513. */
static double dt__float_json(float f)
{
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) break;
    }
    return strtod(buf, NULL);
}

static const char *dt__lr_style_name(dt_lr_decay s)
{
    switch (s) {
    case DT_LR_CONSTANT: return "constant";
    case DT_LR_LINEAR: return "linear";
    case DT_LR_COSINE: return "cosine";
    }
    return "?";
}

/* json_object_set_new that remembers a failure (NULL value or no memory). */
void dt__jset(json_t *obj, const char *key, json_t *v, int *bad)
{
    if (!v || json_object_set_new(obj, key, v) != 0) *bad = 1;
}

static json_t *dt__jstr_or_null(const char *s) { return s ? json_string(s) : json_null(); }

json_t *dt__jreal_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *dt__jseed_text(uint64_t seed)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)seed);
    return json_string(buf);
}

json_t *dt__config_object(const dt_train_config *cfg)
{
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = 0;
    dt__jset(o, "model", json_string(cfg->model_name), &bad);
    dt__jset(o, "num_layers", json_integer(cfg->model.num_layers), &bad);
    dt__jset(o, "hidden_size", json_integer(cfg->model.hidden_size), &bad);
    dt__jset(o, "num_attention_heads", json_integer(cfg->model.num_heads), &bad);
    dt__jset(o, "max_position_embeddings", json_integer(cfg->model.seq_len), &bad);
    dt__jset(o, "untie_embeddings_and_output_weights", json_boolean(!cfg->model.tie_embeddings), &bad);
    dt__jset(o, "vocab_size", cfg->model.vocab_size > 0 ? json_integer(cfg->model.vocab_size) : json_null(), &bad);
    dt__jset(o, "seq_length", json_integer(cfg->seq_length), &bad);
    dt__jset(o, "task", cfg->data.path ? json_null() : dt__jstr_or_null(cfg->data.task), &bad);
    dt__jset(o, "data", dt__jstr_or_null(cfg->data.path), &bad);
    if (cfg->data.tokenizer) dt__jset(o, "tokenizer", json_string(cfg->data.tokenizer), &bad); /* --data's BPE */
    if (cfg->load_hf) dt__jset(o, "load_hf", json_string(cfg->load_hf), &bad); /* where the weights began */
    dt__jset(o, "task_digits", json_integer(cfg->data.digits), &bad);
    dt__jset(o, "task_max_len", json_integer(cfg->data.max_len), &bad);
    dt__jset(o, "data_seed", json_integer((json_int_t)cfg->data.seed), &bad);
    dt__jset(o, "micro_batch_size", json_integer(cfg->micro_batch_size), &bad);
    dt__jset(o, "global_batch_size", json_integer(cfg->global_batch_size), &bad);
    dt__jset(o, "train_iters", json_integer(cfg->train_iters), &bad);
    dt__jset(o, "optimizer", json_string(dt_optim_kind_name(cfg->optim.kind)), &bad);
    dt__jset(o, "lr", json_real(dt__float_json(cfg->lr.max_lr)), &bad);
    dt__jset(o, "min_lr", json_real(dt__float_json(cfg->lr.min_lr)), &bad);
    dt__jset(o, "lr_warmup_iters", json_integer(cfg->lr.warmup_iters), &bad);
    dt__jset(o, "lr_decay_iters", json_integer(cfg->lr.decay_iters), &bad);
    dt__jset(o, "lr_decay_style", json_string(dt__lr_style_name(cfg->lr.style)), &bad);
    dt__jset(o, "weight_decay", json_real(dt__float_json(cfg->optim.weight_decay)), &bad);
    dt__jset(o, "adam_beta1", json_real(dt__float_json(cfg->optim.beta1)), &bad);
    dt__jset(o, "adam_beta2", json_real(dt__float_json(cfg->optim.beta2)), &bad);
    dt__jset(o, "adam_eps", json_real(dt__float_json(cfg->optim.eps)), &bad);
    dt__jset(o, "sgd_momentum", json_real(dt__float_json(cfg->optim.momentum)), &bad);
    dt__jset(o, "lars_eta", json_real(dt__float_json(cfg->optim.lars_eta)), &bad);
    dt__jset(o, "lamb_gamma_l", json_real(dt__float_json(cfg->optim.lamb_gamma_l)), &bad);
    dt__jset(o, "lamb_gamma_u", dt__jreal_or_null(cfg->optim.lamb_gamma_u), &bad);
    dt__jset(o, "sgd_nesterov", json_boolean(cfg->optim.nesterov), &bad);
    dt__jset(o, "clip_grad", json_real(dt__float_json(cfg->clip_grad)), &bad);
    if (cfg->model_kind == DT_MODEL_MLP_BN) {
        dt__jset(o, "mlp_hidden_size", json_integer(cfg->mlp.hidden_size), &bad);
        dt__jset(o, "mlp_num_layers", json_integer(cfg->mlp.num_layers), &bad);
        dt__jset(o, "batchnorm", json_boolean(cfg->mlp.batchnorm), &bad);
        dt__jset(o, "bn_momentum", json_real(dt__float_json(cfg->mlp.bn_momentum)), &bad);
        dt__jset(o, "bn_momentum_adjust", json_boolean(cfg->bn_momentum_adjust), &bad);
        dt__jset(o, "blobs_classes", json_integer(cfg->blobs.classes), &bad);
        dt__jset(o, "blobs_dims", json_integer(cfg->blobs.dims), &bad);
        dt__jset(o, "blobs_separation", json_real(dt__float_json(cfg->blobs.separation)), &bad);
    }
    dt__jset(o, "precision", json_string(dt_dtype_name(cfg->precision)), &bad);
    const int ps = cfg->ps_mode != DT_PS_NONE;
    dt__jset(o, "data_parallel_size",
             json_integer(dt_grid_data_size(cfg->comm ? cfg->comm->size : 1, ps ? cfg->num_ps_servers : 0,
                                            cfg->tensor_size, cfg->context_size > 1 ? cfg->context_size : 1,
                                            cfg->pipeline_size)),
             &bad);
    dt__jset(o, "allreduce",
             json_string(ps ? (cfg->ps_mode == DT_PS_SYNC ? "ps-sync" : "ps-async")
                            : dt_allreduce_algo_name(cfg->allreduce)),
             &bad);
    dt__jset(o, "num_ps_servers", json_integer(ps ? cfg->num_ps_servers : 0), &bad);
    dt__jset(o, "pipeline_model_parallel_size", json_integer(cfg->pipeline_size), &bad);
    dt__jset(o, "tensor_model_parallel_size", json_integer(cfg->tensor_size), &bad);
    /* written only with t > 1 and the vocabulary split (a layout of their
     * own), so older manifests and --no-vocab-parallel still compare */
    if (cfg->tensor_size > 1 && !cfg->no_vocab_parallel) dt__jset(o, "vocab_parallel", json_true(), &bad);
    /* where the activations live and how they travel, not the state (a
     * resumed run may turn it on or off): written when on */
    if (cfg->tensor_size > 1 && cfg->sequence_parallel) dt__jset(o, "sequence_parallel", json_true(), &bad);
    /* written with c > 1 only, so older manifests still compare; the
     * exchange is communication only (a resumed run may change it) */
    if (cfg->context_size > 1) {
        dt__jset(o, "context_parallel_size", json_integer(cfg->context_size), &bad);
        dt__jset(o, "cp_comm_type", json_string(dt_cp_comm_name(cfg->cp_comm_type)), &bad);
    }
    /* written with FP8 only, so older manifests still compare */
    if (cfg->fp8 != DT_FP8_OFF) {
        dt__jset(o, "fp8_format", json_string(dt_fp8_mode_name(cfg->fp8)), &bad);
        dt__jset(o, "fp8_recipe", json_string(dt_fp8_recipe_name(cfg->fp8_recipe)), &bad);
        dt__jset(o, "fp8_margin", json_integer(cfg->fp8_margin), &bad);
        dt__jset(o, "fp8_amax_history_len", json_integer(cfg->fp8_amax_history_len), &bad);
        dt__jset(o, "fp8_amax_compute_algo", json_string(dt_fp8_amax_algo_name(cfg->fp8_amax_algo)), &bad);
    }
    /* communication only (the same bits), written when turned off */
    if (cfg->no_scatter_gather) dt__jset(o, "scatter_gather_tensors_in_pipeline", json_false(), &bad);
    dt__jset(o, "pipeline_schedule", json_string(dt_sched_kind_name(cfg->pipeline_schedule)), &bad);
    /* written only when given (absent: the even split), so older manifests still compare */
    if (cfg->pipeline_split[0]) {
        json_t *split = json_array();
        for (int i = 0; split && i < cfg->pipeline_size && i < 64; i++)
            if (json_array_append_new(split, json_integer(cfg->pipeline_split[i])) != 0) bad = 1;
        dt__jset(o, "pipeline_split", split, &bad);
    }
    /* the chunks per device of interleaved-1f1b, likewise only when given (absent: the kind's default) */
    if (cfg->virtual_pipeline_size > 0)
        dt__jset(o, "virtual_pipeline_model_parallel_size", json_integer(cfg->virtual_pipeline_size), &bad);
    if (cfg->layers_per_virtual_stage > 0)
        dt__jset(o, "num_layers_per_virtual_pipeline_stage", json_integer(cfg->layers_per_virtual_stage), &bad);
    dt__jset(o, "use_distributed_optimizer", json_boolean(cfg->use_distributed_optimizer), &bad);
    dt__jset(o, "zero_stage", json_integer(cfg->zero_stage ? cfg->zero_stage : cfg->use_distributed_optimizer), &bad);
    dt__jset(o, "zero_prefetch", json_boolean(cfg->zero_prefetch), &bad);
    dt__jset(o, "max_staleness",
             cfg->ps_mode == DT_PS_ASYNC && cfg->max_staleness >= 0 ? json_integer(cfg->max_staleness) : json_null(),
             &bad);
    dt__jset(o, "allreduce_chunk_bytes", json_integer((json_int_t)cfg->allreduce_chunk_bytes), &bad);
    dt__jset(o, "bucket_bytes", json_integer((json_int_t)cfg->bucket_bytes), &bad);
    dt__jset(o, "comm_timeout", json_real(cfg->comm_timeout), &bad);
    /* the testing faults: a straggler changes every rank's timing (-1 / 0: off) */
    dt__jset(o, "slow_rank", json_integer(cfg->slow_ms > 0 ? cfg->slow_rank : -1), &bad);
    dt__jset(o, "slow_ms", json_integer(cfg->slow_ms > 0 ? cfg->slow_ms : 0), &bad);
    dt__jset(o, "hang_rank", json_integer(cfg->hang_iter > 0 ? cfg->hang_rank : -1), &bad);
    dt__jset(o, "hang_iter", json_integer(cfg->hang_iter > 0 ? (json_int_t)cfg->hang_iter : 0), &bad);
    dt__jset(o, "skip_nonfinite", json_boolean(cfg->skip_nonfinite), &bad);
    if (cfg->use_loss_scaling) {
        dt__jset(o, "loss_scale", json_real(cfg->loss_scaler.static_scale), &bad);
        dt__jset(o, "initial_loss_scale", json_real(cfg->loss_scaler.initial_scale), &bad);
        dt__jset(o, "loss_scale_window", json_integer(cfg->loss_scaler.window), &bad);
        dt__jset(o, "hysteresis", json_integer(cfg->loss_scaler.hysteresis), &bad);
        dt__jset(o, "min_loss_scale", json_real(cfg->loss_scaler.min_scale), &bad);
    }
    static const char *const scaling[] = {"none", "linear", "sqrt"};
    dt__jset(o, "lr_scaling", json_string(scaling[cfg->lr_scaling]), &bad);
    dt__jset(o, "base_batch_size", json_integer(cfg->base_batch_size), &bad);
    static const char *const recompute[] = {"none", "full", "selective"};
    dt__jset(o, "recompute_granularity", json_string(recompute[cfg->recompute]), &bad);
    dt__jset(o, "recompute_num_layers",
             json_integer(cfg->recompute == DT_RECOMPUTE_FULL ? cfg->recompute_num_layers : 0), &bad);
    /* seeds above 2^63 do not fit a JSON integer in jansson; keep them exact as text */
    dt__jset(o, "seed",
             cfg->seed <= (uint64_t)INT64_MAX ? json_integer((json_int_t)cfg->seed) : dt__jseed_text(cfg->seed), &bad);
    dt__jset(o, "threads", json_integer(cfg->threads), &bad);
    dt__jset(o, "device", dt__jstr_or_null(cfg->device), &bad);
    dt__jset(o, "eval_iters", json_integer(cfg->eval_iters), &bad);
    dt__jset(o, "eval_interval", json_integer(cfg->eval_interval), &bad);
    dt__jset(o, "log_interval", json_integer(cfg->log_interval), &bad);
    dt__jset(o, "trace", dt__jstr_or_null(cfg->trace_path), &bad);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Longest DT_CLUSTER recorded: a description, one line of a header. */
#define DT__CLUSTER_MAX 4096

dt_status dt__validate_cluster(const char *cluster)
{
    if (!cluster) return DT_OK;
    const size_t n = strlen(cluster);
    if (n > DT__CLUSTER_MAX)
        return DT_FAIL(DT_ERR_INVALID, "cluster description (DT_CLUSTER): %zu bytes; expected at most %d", n,
                       DT__CLUSTER_MAX);
    json_t *j = json_string(cluster); /* jansson takes UTF-8 text only */
    if (!j) return DT_FAIL(DT_ERR_INVALID, "cluster description (DT_CLUSTER): expected UTF-8 text");
    json_decref(j);
    return DT_OK;
}

/* The machine this rank runs on: its host name, the cores online, and the
 * emulated cluster's description as given (null: none). */
static json_t *dt__machine_object(const dt_trainer *tr)
{
    json_t *m = json_object();
    if (!m) return NULL;
    int bad = 0;
    char host[256] = "";
    if (gethostname(host, sizeof host) != 0) host[0] = '\0';
    host[sizeof host - 1] = '\0';
    json_t *h = host[0] ? json_string(host) : NULL; /* NULL too for a name that is not UTF-8 */
    dt__jset(m, "host", h ? h : json_null(), &bad);
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    dt__jset(m, "online_cores", cores > 0 ? json_integer(cores) : json_null(), &bad);
    dt__jset(m, "cluster", dt__jstr_or_null(tr->cfg.cluster), &bad);
    if (bad) {
        json_decref(m);
        return NULL;
    }
    return m;
}

json_t *dt__run_config_object(const dt_trainer *tr)
{
    json_t *o = dt__config_object(&tr->cfg);
    if (!o) return NULL;
    int bad = 0;
    dt__jset(o, "threads_requested", json_integer(tr->threads_requested > 0 ? tr->threads_requested : 0), &bad);
    dt__jset(o, "threads_automatic", json_boolean(tr->tune.on), &bad);
    dt__jset(o, "save_interval", json_integer(tr->cfg.save_dir ? tr->cfg.save_interval : 0), &bad);
    uint64_t bytes = 0;
    uint32_t crc = 0;
    const int text = tr->cfg.data.path && tr->gpt.data && dt_data_fingerprint(tr->gpt.data, &bytes, &crc) == DT_OK;
    dt__jset(o, "data_bytes", text ? json_integer((json_int_t)bytes) : json_null(), &bad);
    dt__jset(o, "machine", dt__machine_object(tr), &bad);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

char *dt_train_config_json(const dt_train_config *cfg)
{
    json_t *o = dt__config_object(cfg);
    if (!o) return NULL;
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | DT__JSON_PRECISION);
    json_decref(o);
    return s;
}
