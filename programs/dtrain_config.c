/* dtrain_config.c: dtrain's parsed flags (dtrain_opts) turned into a
 * dt_train_config, one part of the configuration per function, with the
 * checks between flags that the library cannot make (it never sees which
 * flags were given). Each check prints one line naming the flag and makes
 * dtrain_make_config return 2; the checks run in the order the flags are
 * described in --help, so the first problem is the one reported. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain_prog.h"

/* Default warm-up: at most this many iterations, and at most a tenth of the run. */
#define DT_DEFAULT_WARMUP_CAP_FRACTION 10

#define GIVEN(flag) dt_args_given(args, n_args, flag)

const char *dtrain_decay_name(dt_lr_decay s)
{
    return s == DT_LR_CONSTANT ? "constant" : s == DT_LR_LINEAR ? "linear" : "cosine";
}

/* The library's message for a value it rejected: 2. */
static int dtrain_bad(void)
{
    fprintf(stderr, PROG ": %s\n", dt_last_error());
    return 2;
}

/* The first of flags (NULL-terminated) that was given, or NULL. */
static const char *dtrain_first_given(dt_arg *args, int n_args, const char *const *flags)
{
    for (const char *const *f = flags; *f; f++)
        if (GIVEN(*f)) return *f;
    return NULL;
}

/* --model mlp-bn: the sizes go to the MLP; the GPT's own sizes are errors. */
static int dtrain_config_mlp(dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg)
{
    static const char *const gpt_only[] = {"--num-attention-heads",
                                           "--max-position-embeddings",
                                           "--seq-length",
                                           "--untie-embeddings-and-output-weights",
                                           "--tie-embeddings-and-output-weights",
                                           NULL};
    cfg->model_kind = DT_MODEL_MLP_BN;
    if (GIVEN("--hidden-size")) cfg->mlp.hidden_size = o->job.hidden_size;
    if (GIVEN("--num-layers")) cfg->mlp.num_layers = o->job.num_layers;
    cfg->mlp.batchnorm = !o->no_batchnorm;
    cfg->mlp.bn_momentum = o->bn_momentum;
    cfg->bn_momentum_adjust = o->bn_momentum_adjust;
    if (!GIVEN("--task")) o->task = "blobs";
    const char *f = dtrain_first_given(args, n_args, gpt_only);
    if (f) {
        fprintf(stderr, PROG ": %s: --model mlp-bn has no attention, positions or token embedding\n", f);
        return 2;
    }
    return 0;
}

/* The GPT: the preset, then the size flags (a changed size: "custom"). */
static int dtrain_config_gpt(const dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg,
                             dt_gpt_config *preset)
{
    static const char *const mlp_only[] = {"--bn-momentum", "--bn-momentum-adjust", "--no-batchnorm", NULL};
    const char *f = dtrain_first_given(args, n_args, mlp_only);
    if (f) {
        fprintf(stderr, PROG ": %s applies to --model mlp-bn only\n", f);
        return 2;
    }
    const job_opts *j = &o->job;
    int custom = 0;
#define DT_SIZE(flag, field, value)                    \
    do {                                               \
        if (GIVEN(flag) && (value) != preset->field) { \
            preset->field = (value);                   \
            custom = 1;                                \
        }                                              \
    } while (0)
    DT_SIZE("--num-layers", num_layers, j->num_layers);
    DT_SIZE("--hidden-size", hidden_size, j->hidden_size);
    DT_SIZE("--num-attention-heads", num_heads, j->num_heads);
    DT_SIZE("--max-position-embeddings", seq_len, j->max_pos);
#undef DT_SIZE
    const int tie = job_tie_embeddings(j, PROG, preset->tie_embeddings); /* not a size: the name stays */
    if (tie < 0) return 2;
    preset->tie_embeddings = tie;
    snprintf(cfg->model_name, sizeof cfg->model_name, "%s", custom ? "custom" : j->model);
    return 0;
}

/* --load-hf DIR: the model is DIR/config.json's; the flags that would
 * choose another are refused rather than ignored. */
static int dtrain_config_hf(const dtrain_opts *o, dt_arg *args, int n_args, dt_gpt_config *preset)
{
    static const char *const model_flags[] = {"--model",
                                              "--num-layers",
                                              "--hidden-size",
                                              "--num-attention-heads",
                                              "--max-position-embeddings",
                                              "--untie-embeddings-and-output-weights",
                                              "--tie-embeddings-and-output-weights",
                                              NULL};
    for (const char *const *f = model_flags; *f; f++)
        if (dt_args_find(args, n_args, *f) && GIVEN(*f)) {
            fprintf(stderr, PROG ": %s: not with --load-hf (the model is %s/config.json's)\n", *f, o->load_hf);
            return 2;
        }
    /* the whole directory checked here (headers only), before any output
     * is created: a bad file is refused with nothing left behind; with
     * --load the checkpoint holds the weights and config.json is enough */
    dt_hf_model *h = NULL;
    if (o->load ? dt_hf_read_config(o->load_hf, preset) != DT_OK : dt_hf_open(o->load_hf, &h) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        return 1;
    }
    if (h) *preset = *dt_hf_config(h);
    dt_hf_close(h);
    return 0;
}

static int dtrain_config_model(dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg)
{
    const int mlp = strcmp(o->job.model, "mlp-bn") == 0;
    if (o->load_hf && mlp) {
        fprintf(stderr, PROG ": --load-hf: a GPT-2 checkpoint, not for --model mlp-bn\n");
        return 2;
    }
    dt_gpt_config preset;
    int rc;
    if (o->load_hf) { /* the model is config.json's, named "hf" */
        rc = dtrain_config_hf(o, args, n_args, &preset);
        cfg->load_hf = o->load_hf;
        snprintf(cfg->model_name, sizeof cfg->model_name, "hf");
    } else {
        if (mlp) /* the GPT sizes stay at their defaults; the size flags go to the MLP */
            preset = cfg->model;
        else if (dt_gpt_config_preset(o->job.model, &preset) != DT_OK) return dtrain_bad();
        rc = mlp ? dtrain_config_mlp(o, args, n_args, cfg) : dtrain_config_gpt(o, args, n_args, cfg, &preset);
    }
    if (rc != 0) return rc;
    cfg->blobs.classes = o->blobs_classes;
    cfg->blobs.dims = o->blobs_dims;
    cfg->blobs.separation = o->blobs_separation;
    cfg->blobs.seed = o->job.seed;
    if (mlp) snprintf(cfg->model_name, sizeof cfg->model_name, "%s", o->job.model);
    cfg->model = preset;
    if (mlp) cfg->model.vocab_size = 0; /* a GPT keeps its preset's vocabulary: the data must fit in it */
    /* the byte-level presets (tiny, small: 256) take a tokenizer's vocabulary */
    if (!mlp && !o->load_hf && o->tokenizer && cfg->model.vocab_size == 256) cfg->model.vocab_size = 0;
    cfg->seq_length = o->job.seq_length;
    /* a longer context than the default sequence: train at the default T
     * unless --seq-length says otherwise; a shorter one: use all of it */
    if (!GIVEN("--seq-length") && cfg->seq_length > cfg->model.seq_len) cfg->seq_length = cfg->model.seq_len;
    return 0;
}

static void dtrain_config_data_batch(const dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg)
{
    cfg->data.task = o->task;
    cfg->data.path = o->data;
    cfg->data.tokenizer = o->tokenizer;
    cfg->data.seed = o->job.seed;
    cfg->data.digits = o->task_digits;
    cfg->data.max_len = o->task_max_len;
    cfg->micro_batch_size = o->job.micro_batch;
    cfg->global_batch_size = o->job.global_batch;
    /* --micro-batch-size alone: one micro-batch per step unless the global
     * size was given too */
    if (GIVEN("--micro-batch-size") && !GIVEN("--global-batch-size")) cfg->global_batch_size = o->job.micro_batch;
    cfg->train_iters = o->job.train_iters;
}

/* The optimizer and the learning-rate schedule. */
static int dtrain_config_optim(const dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg)
{
    dt_optim_kind kind;
    if (dt_optim_kind_parse(o->job.optimizer, &kind) != DT_OK) return dtrain_bad();
    dt_optim_config_default(&cfg->optim, kind);
    cfg->optim.weight_decay = o->weight_decay;
    cfg->optim.beta1 = o->beta1;
    cfg->optim.beta2 = o->beta2;
    cfg->optim.eps = o->adam_eps;
    cfg->optim.momentum = o->momentum;
    cfg->optim.lars_eta = o->lars_eta;
    cfg->optim.lamb_gamma_l = o->lamb_gamma_l;
    cfg->optim.lamb_gamma_u = o->lamb_gamma_u;
    const int64_t iters = o->job.train_iters;
    cfg->lr.max_lr = o->lr;
    cfg->lr.min_lr = o->min_lr;
    if (!GIVEN("--min-lr") && cfg->lr.min_lr > cfg->lr.max_lr) cfg->lr.min_lr = cfg->lr.max_lr;
    cfg->lr.warmup_iters = o->warmup_iters;
    if (!GIVEN("--lr-warmup-iters") && cfg->lr.warmup_iters > iters / DT_DEFAULT_WARMUP_CAP_FRACTION)
        cfg->lr.warmup_iters = iters / DT_DEFAULT_WARMUP_CAP_FRACTION;
    cfg->lr.decay_iters = GIVEN("--lr-decay-iters") ? o->decay_iters : iters;
    if (dt_lr_decay_parse(o->decay_style, &cfg->lr.style) != DT_OK) return dtrain_bad();
    cfg->clip_grad = o->clip_grad;
    if (dt_lr_scaling_parse(o->lr_scaling, &cfg->lr_scaling) != DT_OK) return dtrain_bad();
    cfg->base_batch_size = GIVEN("--base-batch-size") ? o->base_batch : cfg->global_batch_size;
    return 0;
}

/* Megatron-LM: --recompute-activations alone means selective; a
 * granularity turns recomputation on by itself. */
static int dtrain_config_recompute(const dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg)
{
    cfg->recompute = DT_RECOMPUTE_NONE;
    if (o->job.recompute_on || GIVEN("--recompute-granularity"))
        if (dt_recompute_parse(o->job.recompute_granularity, &cfg->recompute) != DT_OK) return dtrain_bad();
    if (GIVEN("--recompute-num-layers") && cfg->recompute != DT_RECOMPUTE_FULL) {
        fprintf(stderr, PROG ": --recompute-num-layers needs --recompute-granularity full\n");
        return 2;
    }
    cfg->recompute_num_layers = o->job.recompute_num_layers;
    return 0;
}

/* --allreduce: an allreduce algorithm or a parameter server. */
static int dtrain_config_exchange(const dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg)
{
    const char *allreduce = o->job.allreduce;
    if (dt_ps_mode_parse(allreduce, &cfg->ps_mode) != DT_OK &&
        dt_allreduce_algo_parse(allreduce, &cfg->allreduce) != DT_OK)
        return dtrain_bad();
    const int ps_given = dt_ps_mode_parse(allreduce, &cfg->ps_mode) == DT_OK;
    if (ps_given) {
        cfg->allreduce = DT_ALLREDUCE_RING; /* unused by the parameter server */
        cfg->num_ps_servers = o->job.num_ps_servers;
    } else if (GIVEN("--num-ps-servers")) {
        fprintf(stderr, PROG ": --num-ps-servers needs --allreduce ps-sync or ps-async\n");
        return 2;
    }
    if (GIVEN("--max-staleness")) {
        if (cfg->ps_mode != DT_PS_ASYNC) {
            fprintf(stderr, PROG ": --max-staleness applies to --allreduce ps-async only\n");
            return 2;
        }
        cfg->max_staleness = o->max_staleness;
    }
    return 0;
}

/* --pipeline-split N,N,...: blocks per stage. */
static int dtrain_parse_split(const char *text, dt_train_config *cfg)
{
    const char *q = text;
    for (int i = 0;; i++) {
        char *end = NULL;
        long v = strtol(q, &end, 10);
        if (i >= 64 || end == q || v < 1 || v > 100000 || (*end && *end != ',')) {
            fprintf(stderr,
                    PROG ": --pipeline-split '%s': expected positive block counts separated by commas, "
                         "e.g. 3,5\n",
                    text);
            return 2;
        }
        cfg->pipeline_split[i] = (int)v;
        if (!*end) return 0;
        q = end + 1;
    }
}

static int dtrain_config_model_parallel(const dtrain_opts *o, dt_train_config *cfg)
{
    cfg->pipeline_size = o->job.pipeline_size;
    cfg->tensor_size = o->job.tensor_size;
    /* --zero-stage 1 and --use-distributed-optimizer are one thing: the same configuration */
    cfg->zero_stage = o->job.zero_stage ? o->job.zero_stage : o->job.distributed_optimizer;
    cfg->use_distributed_optimizer = o->job.distributed_optimizer || o->job.zero_stage == 1;
    cfg->zero_prefetch = o->job.zero_prefetch;
    cfg->no_vocab_parallel = o->job.no_vocab_parallel;
    cfg->sequence_parallel = o->job.sequence_parallel;
    cfg->context_size = o->job.context_size > 0 ? o->job.context_size : 1;
    if (o->job.cp_comm_type && dt_cp_comm_parse(o->job.cp_comm_type, &cfg->cp_comm_type) != DT_OK) return dtrain_bad();
    cfg->no_scatter_gather = o->job.no_scatter_gather;
    cfg->virtual_pipeline_size = o->job.virtual_pipeline_size;
    cfg->layers_per_virtual_stage = o->job.layers_per_virtual_stage;
    if (dt_sched_kind_parse(o->job.pipeline_schedule, &cfg->pipeline_schedule) != DT_OK) return dtrain_bad();
    if (o->job.pipeline_split && dtrain_parse_split(o->job.pipeline_split, cfg) != 0) return 2;
    return 0;
}

/* The testing faults (--slow-rank, --hang-rank) and --comm-timeout. */
static int dtrain_config_faults(const dtrain_opts *o, dt_train_config *cfg)
{
    if (o->job.slow_rank) {
        int r, ms;
        if (dt_args_parse_rank_ms(PROG, "--slow-rank", o->job.slow_rank, &r, &ms) != DT_ARGS_OK) return 2;
        cfg->slow_rank = r;
        cfg->slow_ms = ms;
    }
    if (o->hang_rank) {
        int r, iter;
        if (dt_args_parse_rank_value(PROG, "--hang-rank", o->hang_rank, "ITER", "1:3", 1, INT_MAX, &r, &iter) !=
            DT_ARGS_OK)
            return 2;
        cfg->hang_rank = r;
        cfg->hang_iter = iter;
    }
    cfg->comm_timeout = o->comm_timeout;
    return 0;
}

/* Checkpoints, --skip-nonfinite and the gradient exchange's sizes. */
static int dtrain_config_checkpoints(const dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg)
{
    if (!o->save && (GIVEN("--save-interval") || GIVEN("--save-keep"))) {
        fprintf(stderr, PROG ": %s: needs --save DIR\n", GIVEN("--save-interval") ? "--save-interval" : "--save-keep");
        return 2;
    }
    if (!o->load && o->allow_data_change) {
        fprintf(stderr, PROG ": --allow-data-change: needs --load DIR\n");
        return 2;
    }
    cfg->save_dir = o->save;
    cfg->save_interval = o->save_interval;
    cfg->save_keep = o->save_keep;
    cfg->load_dir = o->load;
    cfg->skip_nonfinite = o->skip_nonfinite;
    cfg->allow_data_change = o->allow_data_change;
    cfg->allreduce_chunk_bytes = (size_t)o->job.allreduce_chunk_bytes;
    cfg->bucket_bytes = (size_t)(o->job.bucket_mb * (1 << 20));
    return 0;
}

static int dtrain_config_precision(const dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg)
{
    static const char *const scaler_flags[] = {"--initial-loss-scale", "--loss-scale-window", "--hysteresis",
                                               "--min-loss-scale", "--min-loss-scale-patience", NULL};
    const job_opts *j = &o->job;
    if (j->fp16 && j->bf16) {
        fprintf(stderr, PROG ": --fp16 and --bf16: choose one\n");
        return 2;
    }
    cfg->precision = j->fp16 ? DT_F16 : j->bf16 ? DT_BF16 : DT_F32;
    static const char *const fp8_flags[] = {"--fp8-recipe", "--fp8-margin", "--fp8-amax-history-len",
                                            "--fp8-amax-compute-algo", NULL};
    if (j->fp8_format) {
        if (j->fp16) {
            fprintf(stderr, PROG ": --fp8-format and --fp16: FP8 runs the rest in bf16; drop --fp16\n");
            return 2;
        }
        if (dt_fp8_mode_parse(j->fp8_format, &cfg->fp8) != DT_OK ||
            (j->fp8_recipe && dt_fp8_recipe_parse(j->fp8_recipe, &cfg->fp8_recipe) != DT_OK) ||
            (j->fp8_amax_algo && dt_fp8_amax_algo_parse(j->fp8_amax_algo, &cfg->fp8_amax_algo) != DT_OK))
            return dtrain_bad();
        cfg->precision = DT_BF16; /* --fp8-format implies bf16 for everything else */
        if (j->fp8_margin >= 0) cfg->fp8_margin = j->fp8_margin;
        if (j->fp8_history_len > 0) cfg->fp8_amax_history_len = j->fp8_history_len;
    } else {
        const char *g = dtrain_first_given(args, n_args, fp8_flags);
        if (g) {
            fprintf(stderr, PROG ": %s needs --fp8-format\n", g);
            return 2;
        }
    }
    cfg->loss_scaler.static_scale = j->loss_scale;
    cfg->loss_scaler.initial_scale = j->initial_loss_scale;
    cfg->loss_scaler.window = j->loss_scale_window;
    cfg->loss_scaler.hysteresis = j->hysteresis;
    cfg->loss_scaler.min_scale = j->min_loss_scale;
    cfg->loss_scaler.min_patience = o->min_scale_patience;
    /* fp16: dynamic scaling unless --loss-scale; bf16 and fp32: only a static --loss-scale */
    cfg->use_loss_scaling = j->fp16 || j->loss_scale > 0;
    const char *f = dtrain_first_given(args, n_args, scaler_flags);
    if (f && (!j->fp16 || j->loss_scale > 0)) {
        fprintf(stderr, PROG ": %s needs dynamic loss scaling (--fp16 without --loss-scale)\n", f);
        return 2;
    }
    return 0;
}

static int dtrain_config_run(const dtrain_opts *o, dt_train_config *cfg)
{
    cfg->seed = o->job.seed;
    cfg->threads = o->threads;
    cfg->device = o->device;
    cfg->log_interval = o->log_interval;
    cfg->eval_interval = o->eval_interval;
    cfg->eval_iters = o->eval_iters;
    cfg->trace_path = o->job.trace;
    /* an emulated cluster's one-line description, as its script exports it:
     * recorded in the trace header for the simulator (empty: none) */
    const char *cluster = getenv("DT_CLUSTER");
    cfg->cluster = cluster && cluster[0] ? cluster : NULL;
    if (o->job.trace && o->job.summary && !strcmp(o->job.trace, o->job.summary)) {
        fprintf(stderr,
                PROG ": --summary '%s': the same file as --trace; expected another name (the summary would "
                     "overwrite the trace)\n",
                o->job.summary);
        return 2;
    }
    return 0;
}

/* Before MPI: the library's checks of everything but what depends on the
 * number of ranks (the trainer checks the parameter server against it). */
static int dtrain_config_validate_early(const dt_train_config *cfg)
{
    dt_train_config early = *cfg;
    early.ps_mode = DT_PS_NONE;
    early.num_ps_servers = 0;
    early.max_staleness = -1;
    early.slow_ms = 0;
    early.hang_iter = 0;
    early.pipeline_size = 1; /* checked with the number of ranks by the trainer */
    early.tensor_size = 1;
    early.context_size = 1;
    early.no_vocab_parallel = early.no_scatter_gather = early.sequence_parallel = 0; /* they need t (and p): checked with them */
    memset(early.pipeline_split, 0, sizeof early.pipeline_split);
    if (dt_train_config_validate(&early) != DT_OK) return dtrain_bad();
    return 0;
}

int dtrain_make_config(dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg)
{
    dt_train_config_default(cfg);
    int rc = dtrain_config_model(o, args, n_args, cfg);
    if (rc == 0) {
        dtrain_config_data_batch(o, args, n_args, cfg);
        rc = dtrain_config_optim(o, args, n_args, cfg);
    }
    if (rc == 0) rc = dtrain_config_recompute(o, args, n_args, cfg);
    if (rc == 0) rc = dtrain_config_exchange(o, args, n_args, cfg);
    if (rc == 0) rc = dtrain_config_model_parallel(o, cfg);
    if (rc == 0) rc = dtrain_config_faults(o, cfg);
    if (rc == 0) rc = dtrain_config_checkpoints(o, args, n_args, cfg);
    if (rc == 0) rc = dtrain_config_precision(o, args, n_args, cfg);
    if (rc == 0) rc = dtrain_config_run(o, cfg);
    if (rc == 0) rc = dtrain_config_validate_early(cfg);
    return rc;
}
