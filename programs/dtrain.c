/* dtrain.c: the training program. Parses Megatron-LM style flags into a
 * dt_train_config, runs the trainer, logs progress and evaluations, and
 * writes the optional summary (--summary) and trace (--trace). Its flag
 * table takes the job flags shared with dtsim from job_flags.c.
 *
 * Exit status: 0 success; 1 a library failure at run time (message
 * `dtrain: <dt_last_error()>`, e.g. an unreadable --data file); 2 a bad
 * command line (unknown flag, missing or invalid value, inconsistent
 * flags, including those only found when the trainer is built, such as a
 * --seq-length too short for the task), always one line on stderr naming
 * the flag.
 *
 * Output: the run's setup, then on a terminal (stderr is a tty) a progress
 * line redrawn in place; otherwise one log line per --log-interval on
 * stdout. Evaluations and the final line always go to stdout. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "dtrain.h"
#include "job_flags.h"

#define PROG "dtrain"

/* Default warm-up: at most this many iterations, and at most a tenth of the run. */
#define DT_DEFAULT_WARMUP_CAP_FRACTION 10

/* The flags' values; the destinations hold the defaults before parsing. */
typedef struct dtrain_opts {
    job_opts job; /* the flags dtrain shares with dtsim (job_flags.h) */
    /* data */
    const char *task, *data;
    int task_digits, task_max_len;
    float blobs_separation;
    int blobs_classes, blobs_dims;
    /* mlp-bn */
    float bn_momentum;
    int bn_momentum_adjust, no_batchnorm;
    /* optimizer */
    float lr, min_lr;
    int64_t warmup_iters, decay_iters;
    const char *decay_style;
    float weight_decay, beta1, beta2, adam_eps, momentum, clip_grad;
    float lars_eta, lamb_gamma_l, lamb_gamma_u;
    const char *lr_scaling;
    int base_batch;
    /* memory */
    int recompute_num_layers;
    /* parallelism and faults */
    int max_staleness;
    int print_schedule;
    const char *hang_rank;
    double comm_timeout;
    /* run */
    const char *device;
    int threads;
    int64_t log_interval, eval_interval;
    int eval_iters;
    int skip_nonfinite;
    /* checkpoints */
    const char *save, *load;
    int64_t save_interval;
    int save_keep;
} dtrain_opts;

/* ranges of dtrain's own flags, as designated initializers */
#define MIN1 .range = DT_ARG_HAS_MIN, .min = 1
#define MIN0 .range = DT_ARG_HAS_MIN, .min = 0
#define POS .range = DT_ARG_HAS_MIN | DT_ARG_MIN_EXCLUSIVE, .min = 0
#define UNIT .range = DT_ARG_HAS_MIN | DT_ARG_HAS_MAX | DT_ARG_MAX_EXCLUSIVE, .min = 0, .max = 1
#define IN(lo, hi) .range = DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, .min = (lo), .max = (hi)
/* one of the job flags shared with dtsim (job_flags.c), as dtrain words it */
#define JOB(id) job_flag(JOB_DTRAIN, &o->job, (id))

enum { DTRAIN_MAX_ARGS = 128 };

static int dtrain_build_args(dtrain_opts *o, dt_arg *a, int cap)
{
    const dt_arg table[] = {
        JOB_SECTION("Model"),
        JOB(JF_MODEL),
        JOB(JF_NUM_LAYERS),
        JOB(JF_HIDDEN_SIZE),
        JOB(JF_NUM_ATTENTION_HEADS),
        JOB(JF_MAX_POSITION_EMBEDDINGS),
        JOB(JF_SEQ_LENGTH),
        JOB_SECTION("Data"),
        {.name = "--task", .kind = DT_ARG_CHOICE, .dest = &o->task, .choices = "add|reverse|sort|blobs",
         .help = "built-in synthetic task (blobs: classification for --model mlp-bn)"},
        {.name = "--data", .kind = DT_ARG_STRING, .dest = &o->data, .metavar = "FILE",
         .help = "train on a text file instead of --task"},
        {.name = "--task-digits", .kind = DT_ARG_INT, .dest = &o->task_digits, IN(1, 9), .metavar = "N",
         .help = "add: maximum digits per operand"},
        {.name = "--task-max-len", .kind = DT_ARG_INT, .dest = &o->task_max_len, IN(1, 64), .metavar = "N",
         .help = "reverse/sort: maximum word length"},
        {.name = "--blobs-classes", .kind = DT_ARG_INT, .dest = &o->blobs_classes, IN(2, 1024), .metavar = "K",
         .help = "blobs: classes"},
        {.name = "--blobs-dims", .kind = DT_ARG_INT, .dest = &o->blobs_dims, IN(1, 65536), .metavar = "D",
         .help = "blobs: input dimensions"},
        {.name = "--blobs-separation", .kind = DT_ARG_FLOAT, .dest = &o->blobs_separation, POS, .metavar = "X",
         .help = "blobs: spread of the class centers in units of the noise"},
        JOB_SECTION("mlp-bn (BatchNorm)"),
        {.name = "--bn-momentum", .kind = DT_ARG_FLOAT, .dest = &o->bn_momentum, IN(0, 1), .metavar = "M",
         .help = "BatchNorm running-statistics momentum per optimizer step"},
        {.name = "--bn-momentum-adjust", .kind = DT_ARG_FLAG, .dest = &o->bn_momentum_adjust,
         .help = "with N micro-batches per step, update the running statistics with 1-(1-M)^(1/N) per micro-batch",
         .default_text = "off"},
        {.name = "--no-batchnorm", .kind = DT_ARG_FLAG, .dest = &o->no_batchnorm,
         .help = "mlp-bn without BatchNorm (a plain MLP)", .default_text = "off"},
        JOB_SECTION("Batch and schedule"),
        JOB(JF_MICRO_BATCH_SIZE),
        JOB(JF_GLOBAL_BATCH_SIZE),
        JOB(JF_TRAIN_ITERS),
        JOB(JF_SEED),
        JOB_SECTION("Optimizer"),
        JOB(JF_OPTIMIZER),
        {.name = "--lr", .kind = DT_ARG_FLOAT, .dest = &o->lr, MIN0, .metavar = "X", .help = "peak learning rate"},
        {.name = "--min-lr", .kind = DT_ARG_FLOAT, .dest = &o->min_lr, MIN0, .metavar = "X",
         .help = "learning rate at the end of the decay"},
        {.name = "--lr-warmup-iters", .kind = DT_ARG_INT64, .dest = &o->warmup_iters, MIN0, .metavar = "N",
         .help = "linear warm-up iterations (default at most --train-iters/10)"},
        {.name = "--lr-decay-iters", .kind = DT_ARG_INT64, .dest = &o->decay_iters, MIN0, .metavar = "N",
         .help = "iteration where the decay ends", .default_text = "--train-iters"},
        {.name = "--lr-decay-style", .kind = DT_ARG_CHOICE, .dest = &o->decay_style,
         .choices = "constant|linear|cosine", .help = "learning-rate decay"},
        {.name = "--weight-decay", .kind = DT_ARG_FLOAT, .dest = &o->weight_decay, MIN0, .metavar = "X",
         .help = "weight decay (matrices only)"},
        {.name = "--adam-beta1", .kind = DT_ARG_FLOAT, .dest = &o->beta1, UNIT, .metavar = "X",
         .help = "AdamW beta1"},
        {.name = "--adam-beta2", .kind = DT_ARG_FLOAT, .dest = &o->beta2, UNIT, .metavar = "X",
         .help = "AdamW beta2"},
        {.name = "--adam-eps", .kind = DT_ARG_FLOAT, .dest = &o->adam_eps, POS, .metavar = "X",
         .help = "AdamW epsilon"},
        {.name = "--sgd-momentum", .kind = DT_ARG_FLOAT, .dest = &o->momentum, UNIT, .metavar = "X",
         .help = "SGD and LARS momentum"},
        {.name = "--lars-eta", .kind = DT_ARG_FLOAT, .dest = &o->lars_eta, POS, .metavar = "X",
         .help = "LARS trust coefficient"},
        {.name = "--lamb-gamma-l", .kind = DT_ARG_FLOAT, .dest = &o->lamb_gamma_l, MIN0, .metavar = "X",
         .help = "LAMB: lower bound of phi(||w||)"},
        {.name = "--lamb-gamma-u", .kind = DT_ARG_FLOAT, .dest = &o->lamb_gamma_u, POS, .metavar = "X",
         .help = "LAMB: upper bound of phi(||w||) (inf: none)"},
        {.name = "--clip-grad", .kind = DT_ARG_FLOAT, .dest = &o->clip_grad, .metavar = "X",
         .help = "clip the gradient norm to this (<= 0: off)"},
        {.name = "--lr-scaling", .kind = DT_ARG_CHOICE, .dest = &o->lr_scaling, .choices = "none|linear|sqrt",
         .help = "scale --lr and --min-lr by global/base batch (linear) or its square root (sqrt)"},
        {.name = "--base-batch-size", .kind = DT_ARG_INT, .dest = &o->base_batch, MIN1, .metavar = "N",
         .help = "the global batch --lr was tuned for (with --lr-scaling)", .default_text = "--global-batch-size"},
        JOB_SECTION("Mixed precision"),
        JOB(JF_FP16),
        JOB(JF_BF16),
        JOB(JF_LOSS_SCALE),
        JOB(JF_INITIAL_LOSS_SCALE),
        JOB(JF_LOSS_SCALE_WINDOW),
        JOB(JF_HYSTERESIS),
        JOB(JF_MIN_LOSS_SCALE),
        JOB_SECTION("Memory"),
        JOB(JF_RECOMPUTE_ACTIVATIONS),
        JOB(JF_RECOMPUTE_GRANULARITY),
        {.name = "--recompute-num-layers", .kind = DT_ARG_INT, .dest = &o->recompute_num_layers, MIN1,
         .metavar = "K", .help = "full recomputation: blocks per checkpointed group"},
        JOB_SECTION("Data parallelism (run under mpirun -np N)"),
        JOB(JF_ALLREDUCE),
        JOB(JF_USE_DISTRIBUTED_OPTIMIZER),
        JOB(JF_NUM_PS_SERVERS),
        {.name = "--max-staleness", .kind = DT_ARG_INT, .dest = &o->max_staleness, MIN0, .metavar = "S",
         .help = "ps-async: a worker waits rather than push a gradient more than S updates old",
         .default_text = "none"},
        JOB_SECTION("Model parallelism (mpirun -np t x p x d)"),
        JOB(JF_TENSOR_MODEL_PARALLEL_SIZE),
        JOB(JF_PIPELINE_MODEL_PARALLEL_SIZE),
        JOB(JF_PIPELINE_SCHEDULE),
        JOB(JF_PIPELINE_SPLIT),
        {.name = "--print-schedule", .kind = DT_ARG_FLAG, .dest = &o->print_schedule,
         .help = "print each stage's instruction list for these settings and exit", .default_text = "off"},
        JOB(JF_SLOW_RANK),
        {.name = "--comm-timeout", .kind = DT_ARG_DOUBLE, .dest = &o->comm_timeout, IN(0, 1e9),
         .metavar = "SECONDS",
         .help = "a rank waiting this long for another (died or hung) fails and mpirun ends the job, exit status 3 "
                 "(0: wait for ever; docs/faults.md)"},
        {.name = "--hang-rank", .kind = DT_ARG_STRING, .dest = &o->hang_rank, .metavar = "R:ITER",
         .help = "testing: rank R hangs (sleeps for ever) at the start of iteration ITER", .default_text = "off"},
        JOB(JF_ALLREDUCE_CHUNK_BYTES),
        JOB(JF_BUCKET_SIZE_MB),
        JOB_SECTION("Run"),
        {.name = "--device", .kind = DT_ARG_CHOICE, .dest = &o->device, .choices = "cpu|cuda",
         .help = "compute backend"},
        {.name = "--threads", .kind = DT_ARG_INT, .dest = &o->threads, IN(0, 1024), .metavar = "N",
         .help = "CPU threads (0: one per core; under mpirun: cores / ranks on the host)", .default_text = "0"},
        {.name = "--log-interval", .kind = DT_ARG_INT64, .dest = &o->log_interval, MIN1, .metavar = "N",
         .help = "iterations between log lines"},
        {.name = "--eval-interval", .kind = DT_ARG_INT64, .dest = &o->eval_interval, MIN0, .metavar = "N",
         .help = "iterations between evaluations (0: only at the end)"},
        {.name = "--eval-iters", .kind = DT_ARG_INT, .dest = &o->eval_iters, MIN1, .metavar = "N",
         .help = "validation batches per evaluation"},
        JOB(JF_TRACE),
        {.name = "--skip-nonfinite", .kind = DT_ARG_FLAG, .dest = &o->skip_nonfinite,
         .help = "FP32: skip (and count) a step whose loss or gradient norm is NaN/inf instead of stopping; either "
                 "way the first bad layer is named",
         .default_text = "off (stop)"},
        JOB(JF_SUMMARY),
        JOB_SECTION("Checkpoints (docs/checkpoints.md)"),
        {.name = "--save", .kind = DT_ARG_STRING, .dest = &o->save, .metavar = "DIR",
         .help = "save checkpoints under DIR (DIR/iter_XXXXXXXX, DIR/latest) every --save-interval iterations and "
                 "at the end",
         .default_text = "off"},
        {.name = "--save-interval", .kind = DT_ARG_INT64, .dest = &o->save_interval, MIN1, .metavar = "N",
         .help = "iterations between checkpoints", .default_text = "1000"},
        {.name = "--save-keep", .kind = DT_ARG_INT, .dest = &o->save_keep, MIN0, .metavar = "K",
         .help = "keep only the newest K checkpoints (0: all)", .default_text = "0"},
        {.name = "--load", .kind = DT_ARG_STRING, .dest = &o->load, .metavar = "DIR",
         .help = "resume exactly from a checkpoint: DIR/latest (or the newest valid one) of a save directory, or "
                 "DIR itself (DIR/iter_X)",
         .default_text = "off"},
        JOB(JF_HELP),
        JOB(JF_VERSION),
    };
    int n = (int)(sizeof table / sizeof table[0]);
    if (n > cap) return -1;
    memcpy(a, table, sizeof table);
    return n;
}

static const char *dtrain_decay_name(dt_lr_decay s)
{
    return s == DT_LR_CONSTANT ? "constant" : s == DT_LR_LINEAR ? "linear" : "cosine";
}

/* Defaults come from the library's dt_train_config_default, so the program
 * and library agree and --help prints them. */
static void dtrain_job_default(job_opts *j, const dt_train_config *d)
{
    j->model = "tiny";
    j->num_layers = d->model.num_layers;
    j->hidden_size = d->model.hidden_size;
    j->num_heads = d->model.num_heads;
    j->max_pos = d->model.seq_len;
    j->seq_length = d->seq_length;
    j->micro_batch = d->micro_batch_size;
    j->global_batch = d->global_batch_size;
    j->train_iters = d->train_iters;
    j->optimizer = dt_optim_kind_name(d->optim.kind);
    j->allreduce = dt_allreduce_algo_name(d->allreduce);
    j->allreduce_chunk_bytes = (int64_t)d->allreduce_chunk_bytes;
    j->bucket_mb = (double)d->bucket_bytes / (1 << 20);
    j->num_ps_servers = 1;
    j->pipeline_size = d->pipeline_size;
    j->tensor_size = d->tensor_size;
    j->pipeline_schedule = dt_sched_kind_name(d->pipeline_schedule);
    j->loss_scale = d->loss_scaler.static_scale;
    j->initial_loss_scale = d->loss_scaler.initial_scale;
    j->loss_scale_window = d->loss_scaler.window;
    j->hysteresis = d->loss_scaler.hysteresis;
    j->min_loss_scale = d->loss_scaler.min_scale;
    j->recompute_granularity = "selective";
    j->seed = d->seed;
}

static void dtrain_opts_default(dtrain_opts *o, const dt_train_config *d)
{
    memset(o, 0, sizeof *o);
    dtrain_job_default(&o->job, d);
    o->task = d->data.task;
    o->data = NULL;
    o->task_digits = d->data.digits;
    o->task_max_len = d->data.max_len;
    o->lr = d->lr.max_lr;
    o->min_lr = d->lr.min_lr;
    o->warmup_iters = d->lr.warmup_iters;
    o->decay_iters = d->lr.decay_iters;
    o->decay_style = dtrain_decay_name(d->lr.style);
    o->weight_decay = d->optim.weight_decay;
    o->beta1 = d->optim.beta1;
    o->beta2 = d->optim.beta2;
    o->adam_eps = d->optim.eps;
    dt_optim_config sgd;
    dt_optim_config_default(&sgd, DT_OPTIM_SGD);
    o->momentum = sgd.momentum;
    o->lars_eta = sgd.lars_eta;
    o->lamb_gamma_l = sgd.lamb_gamma_l;
    o->lamb_gamma_u = sgd.lamb_gamma_u;
    o->clip_grad = d->clip_grad;
    o->lr_scaling = "none";
    o->max_staleness = -1;
    o->comm_timeout = d->comm_timeout;
    o->bn_momentum = d->mlp.bn_momentum;
    o->blobs_classes = d->blobs.classes;
    o->blobs_dims = d->blobs.dims;
    o->blobs_separation = d->blobs.separation;
    o->base_batch = d->base_batch_size;
    o->recompute_num_layers = 1;
    o->threads = d->threads;
    o->device = d->device;
    o->log_interval = d->log_interval;
    o->eval_interval = d->eval_interval;
    o->eval_iters = d->eval_iters;
    o->save_interval = 1000;
    o->save_keep = 0;
}

/* Turn parsed flags into a configuration. Returns 0, or 2 after printing
 * the one-line error. */
static int dtrain_make_config(dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg)
{
    dt_train_config_default(cfg);
    const int mlp = strcmp(o->job.model, "mlp-bn") == 0;
    dt_gpt_config preset;
    if (mlp) { /* the GPT sizes stay at their defaults; the size flags go to the MLP */
        preset = cfg->model;
    } else if (dt_gpt_config_preset(o->job.model, &preset) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        return 2;
    }
    int custom = 0;
    if (mlp) {
        cfg->model_kind = DT_MODEL_MLP_BN;
        if (dt_args_given(args, n_args, "--hidden-size")) cfg->mlp.hidden_size = o->job.hidden_size;
        if (dt_args_given(args, n_args, "--num-layers")) cfg->mlp.num_layers = o->job.num_layers;
        cfg->mlp.batchnorm = !o->no_batchnorm;
        cfg->mlp.bn_momentum = o->bn_momentum;
        cfg->bn_momentum_adjust = o->bn_momentum_adjust;
        if (!dt_args_given(args, n_args, "--task")) o->task = "blobs";
        for (const char *const *f = (const char *const[]){"--num-attention-heads", "--max-position-embeddings",
                                                          "--seq-length", NULL};
             *f; f++)
            if (dt_args_given(args, n_args, *f)) {
                fprintf(stderr, PROG ": %s: --model mlp-bn has no such size\n", *f);
                return 2;
            }
    } else {
        for (const char *const *f = (const char *const[]){"--bn-momentum", "--bn-momentum-adjust", "--no-batchnorm",
                                                          NULL};
             *f; f++)
            if (dt_args_given(args, n_args, *f)) {
                fprintf(stderr, PROG ": %s applies to --model mlp-bn only\n", *f);
                return 2;
            }
    }
    cfg->blobs.classes = o->blobs_classes;
    cfg->blobs.dims = o->blobs_dims;
    cfg->blobs.separation = o->blobs_separation;
    cfg->blobs.seed = o->job.seed;
#define DT_SIZE(flag, field, value)                                                                              \
    do {                                                                                                         \
        if (!mlp && dt_args_given(args, n_args, flag) && (value) != preset.field) {                                      \
            preset.field = (value);                                                                              \
            custom = 1;                                                                                          \
        }                                                                                                        \
    } while (0)
    DT_SIZE("--num-layers", num_layers, o->job.num_layers);
    DT_SIZE("--hidden-size", hidden_size, o->job.hidden_size);
    DT_SIZE("--num-attention-heads", num_heads, o->job.num_heads);
    DT_SIZE("--max-position-embeddings", seq_len, o->job.max_pos);
#undef DT_SIZE
    snprintf(cfg->model_name, sizeof cfg->model_name, "%s", custom ? "custom" : o->job.model);
    cfg->model = preset;
    cfg->model.vocab_size = 0;
    cfg->seq_length = o->job.seq_length;
    /* a longer context than the default sequence: train at the default T
     * unless --seq-length says otherwise; a shorter one: use all of it */
    if (!dt_args_given(args, n_args, "--seq-length") && cfg->seq_length > cfg->model.seq_len)
        cfg->seq_length = cfg->model.seq_len;

    cfg->data.task = o->task;
    cfg->data.path = o->data;
    cfg->data.seed = o->job.seed;
    cfg->data.digits = o->task_digits;
    cfg->data.max_len = o->task_max_len;
    cfg->micro_batch_size = o->job.micro_batch;
    cfg->global_batch_size = o->job.global_batch;
    /* --micro-batch-size alone: one micro-batch per step unless the global
     * size was given too */
    if (dt_args_given(args, n_args, "--micro-batch-size") && !dt_args_given(args, n_args, "--global-batch-size"))
        cfg->global_batch_size = o->job.micro_batch;
    cfg->train_iters = o->job.train_iters;

    dt_optim_kind kind;
    if (dt_optim_kind_parse(o->job.optimizer, &kind) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        return 2;
    }
    dt_optim_config_default(&cfg->optim, kind);
    cfg->optim.weight_decay = o->weight_decay;
    cfg->optim.beta1 = o->beta1;
    cfg->optim.beta2 = o->beta2;
    cfg->optim.eps = o->adam_eps;
    cfg->optim.momentum = o->momentum;
    cfg->optim.lars_eta = o->lars_eta;
    cfg->optim.lamb_gamma_l = o->lamb_gamma_l;
    cfg->optim.lamb_gamma_u = o->lamb_gamma_u;
    cfg->lr.max_lr = o->lr;
    cfg->lr.min_lr = o->min_lr;
    if (!dt_args_given(args, n_args, "--min-lr") && cfg->lr.min_lr > cfg->lr.max_lr) cfg->lr.min_lr = cfg->lr.max_lr;
    cfg->lr.warmup_iters = o->warmup_iters;
    if (!dt_args_given(args, n_args, "--lr-warmup-iters") &&
        cfg->lr.warmup_iters > o->job.train_iters / DT_DEFAULT_WARMUP_CAP_FRACTION)
        cfg->lr.warmup_iters = o->job.train_iters / DT_DEFAULT_WARMUP_CAP_FRACTION;
    cfg->lr.decay_iters = dt_args_given(args, n_args, "--lr-decay-iters") ? o->decay_iters : o->job.train_iters;
    if (dt_lr_decay_parse(o->decay_style, &cfg->lr.style) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        return 2;
    }
    cfg->clip_grad = o->clip_grad;
    if (dt_lr_scaling_parse(o->lr_scaling, &cfg->lr_scaling) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        return 2;
    }
    cfg->base_batch_size = dt_args_given(args, n_args, "--base-batch-size") ? o->base_batch : cfg->global_batch_size;
    /* Megatron-LM: --recompute-activations alone means selective; a
     * granularity turns recomputation on by itself. */
    cfg->recompute = DT_RECOMPUTE_NONE;
    if (o->job.recompute_on || dt_args_given(args, n_args, "--recompute-granularity"))
        if (dt_recompute_parse(o->job.recompute_granularity, &cfg->recompute) != DT_OK) {
            fprintf(stderr, PROG ": %s\n", dt_last_error());
            return 2;
        }
    if (dt_args_given(args, n_args, "--recompute-num-layers") && cfg->recompute != DT_RECOMPUTE_FULL) {
        fprintf(stderr, PROG ": --recompute-num-layers needs --recompute-granularity full\n");
        return 2;
    }
    cfg->recompute_num_layers = o->recompute_num_layers;
    if (dt_ps_mode_parse(o->job.allreduce, &cfg->ps_mode) != DT_OK && dt_allreduce_algo_parse(o->job.allreduce, &cfg->allreduce) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        return 2;
    }
    const int ps_given = dt_ps_mode_parse(o->job.allreduce, &cfg->ps_mode) == DT_OK;
    if (ps_given) {
        cfg->allreduce = DT_ALLREDUCE_RING; /* unused by the parameter server */
        cfg->num_ps_servers = o->job.num_ps_servers;
    } else if (dt_args_given(args, n_args, "--num-ps-servers")) {
        fprintf(stderr, PROG ": --num-ps-servers needs --allreduce ps-sync or ps-async\n");
        return 2;
    }
    if (dt_args_given(args, n_args, "--max-staleness")) {
        if (cfg->ps_mode != DT_PS_ASYNC) {
            fprintf(stderr, PROG ": --max-staleness applies to --allreduce ps-async only\n");
            return 2;
        }
        cfg->max_staleness = o->max_staleness;
    }
    cfg->pipeline_size = o->job.pipeline_size;
    cfg->tensor_size = o->job.tensor_size;
    cfg->use_distributed_optimizer = o->job.distributed_optimizer;
    if (dt_sched_kind_parse(o->job.pipeline_schedule, &cfg->pipeline_schedule) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        return 2;
    }
    if (o->job.pipeline_split) {
        const char *q = o->job.pipeline_split;
        for (int i = 0;; i++) {
            char *end = NULL;
            long v = strtol(q, &end, 10);
            if (i >= 64 || end == q || v < 1 || v > 100000 || (*end && *end != ',')) {
                fprintf(stderr, PROG ": --pipeline-split '%s': expected positive block counts separated by commas, "
                                "e.g. 3,5\n",
                        o->job.pipeline_split);
                return 2;
            }
            cfg->pipeline_split[i] = (int)v;
            if (!*end) break;
            q = end + 1;
        }
    }
    if (o->job.slow_rank) {
        int r, ms;
        if (dt_args_parse_rank_ms(PROG, "--slow-rank", o->job.slow_rank, &r, &ms) != DT_ARGS_OK) return 2;
        cfg->slow_rank = r;
        cfg->slow_ms = ms;
    }
    if (o->hang_rank) {
        int r, iter;
        if (dt_args_parse_rank_ms(PROG, "--hang-rank", o->hang_rank, &r, &iter) != DT_ARGS_OK) return 2;
        if (iter < 1) {
            fprintf(stderr, PROG ": --hang-rank '%s': expected RANK:ITER with ITER >= 1\n", o->hang_rank);
            return 2;
        }
        cfg->hang_rank = r;
        cfg->hang_iter = iter;
    }
    cfg->comm_timeout = o->comm_timeout;
    if (!o->save && (dt_args_given(args, n_args, "--save-interval") || dt_args_given(args, n_args, "--save-keep"))) {
        fprintf(stderr, PROG ": %s: needs --save DIR\n",
                dt_args_given(args, n_args, "--save-interval") ? "--save-interval" : "--save-keep");
        return 2;
    }
    cfg->save_dir = o->save;
    cfg->save_interval = o->save_interval;
    cfg->save_keep = o->save_keep;
    cfg->load_dir = o->load;
    cfg->skip_nonfinite = o->skip_nonfinite;
    cfg->allreduce_chunk_bytes = (size_t)o->job.allreduce_chunk_bytes;
    cfg->bucket_bytes = (size_t)(o->job.bucket_mb * (1 << 20));
    if (o->job.fp16 && o->job.bf16) {
        fprintf(stderr, PROG ": --fp16 and --bf16: choose one\n");
        return 2;
    }
    cfg->precision = o->job.fp16 ? DT_F16 : o->job.bf16 ? DT_BF16 : DT_F32;
    cfg->loss_scaler.static_scale = o->job.loss_scale;
    cfg->loss_scaler.initial_scale = o->job.initial_loss_scale;
    cfg->loss_scaler.window = o->job.loss_scale_window;
    cfg->loss_scaler.hysteresis = o->job.hysteresis;
    cfg->loss_scaler.min_scale = o->job.min_loss_scale;
    /* fp16: dynamic scaling unless --loss-scale; bf16 and fp32: only a static --loss-scale */
    cfg->use_loss_scaling = o->job.fp16 || o->job.loss_scale > 0;
    static const char *const scaler_flags[] = {"--initial-loss-scale", "--loss-scale-window", "--hysteresis",
                                               "--min-loss-scale", NULL};
    for (const char *const *f = scaler_flags; *f; f++)
        if (dt_args_given(args, n_args, *f) && (!o->job.fp16 || o->job.loss_scale > 0)) {
            fprintf(stderr, PROG ": %s needs dynamic loss scaling (--fp16 without --loss-scale)\n", *f);
            return 2;
        }
    cfg->seed = o->job.seed;
    cfg->threads = o->threads;
    cfg->device = o->device;
    cfg->log_interval = o->log_interval;
    cfg->eval_interval = o->eval_interval;
    cfg->eval_iters = o->eval_iters;
    cfg->trace_path = o->job.trace;
    if (o->job.trace && o->job.summary && !strcmp(o->job.trace, o->job.summary)) {
        fprintf(stderr, PROG ": --summary '%s': the same file as --trace; expected another name (the summary would "
                "overwrite the trace)\n", o->job.summary);
        return 2;
    }

    /* before MPI: everything but what depends on the number of ranks (the
     * trainer checks the parameter server against it) */
    dt_train_config early = *cfg;
    early.ps_mode = DT_PS_NONE;
    early.num_ps_servers = 0;
    early.max_staleness = -1;
    early.slow_ms = 0;
    early.hang_iter = 0;
    early.pipeline_size = 1; /* checked with the number of ranks by the trainer */
    early.tensor_size = 1;
    memset(early.pipeline_split, 0, sizeof early.pipeline_split);
    if (dt_train_config_validate(&early) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        return 2;
    }
    return 0;
}

/* ---- output ---------------------------------------------------------------- */

typedef struct dtrain_out {
    int live;              /* progress line on stderr (a terminal) */
    int line_shown;        /* the progress line is on screen */
    int64_t last_draw_ns;
} dtrain_out;

/* Remove the progress line before other output. */
static void dtrain_clear_live(dtrain_out *out)
{
    if (out->live && out->line_shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        out->line_shown = 0;
    }
}

static void dtrain_fmt_count(char *buf, size_t n, double v)
{
    if (v >= 1e9) snprintf(buf, n, "%.2fG", v / 1e9);
    else if (v >= 1e6) snprintf(buf, n, "%.2fM", v / 1e6);
    else if (v >= 1e4) snprintf(buf, n, "%.1fk", v / 1e3);
    else snprintf(buf, n, "%.0f", v);
}

static void dtrain_fmt_duration(char *buf, size_t n, double s)
{
    if (s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

static void dtrain_print_setup(const dt_trainer *tr)
{
    const dt_train_config *c = dt_trainer_config(tr);
    char params[32];
    dtrain_fmt_count(params, sizeof params, (double)dt_trainer_num_params(tr));
    printf("dtrain %s on %s, %d thread%s\n", DT_VERSION_STRING, c->device, c->threads, c->threads == 1 ? "" : "s");
    if (c->model_kind == DT_MODEL_MLP_BN) {
        printf("model: mlp-bn, %d hidden layer%s of %d, %s, %d inputs, %d classes, %zu params (%s)\n",
               c->mlp.num_layers, c->mlp.num_layers == 1 ? "" : "s", c->mlp.hidden_size,
               c->mlp.batchnorm ? "BatchNorm + ReLU" : "ReLU (no BatchNorm)", c->mlp.input_dim, c->mlp.num_classes,
               dt_trainer_num_params(tr), params);
        if (c->mlp.batchnorm) {
            int n = c->global_batch_size / c->micro_batch_size;
            if (c->bn_momentum_adjust)
                printf("bn:    momentum %g per step -> %.6g per micro-batch (1-(1-m)^(1/%d))\n",
                       (double)c->mlp.bn_momentum, (double)dt_bn_momentum_per_micro(c->mlp.bn_momentum, n), n);
            else
                printf("bn:    momentum %g per micro-batch%s\n", (double)c->mlp.bn_momentum,
                       n > 1 ? " (not adjusted for accumulation: --bn-momentum-adjust)" : "");
        }
        printf("data:  task blobs (%d classes in %d dimensions, separation %g)\n", c->blobs.classes, c->blobs.dims,
               (double)c->blobs.separation);
    } else {
        printf("model: %s, %d layers, %d heads, width %d, context %d, vocab %d, %zu params (%s)\n", c->model_name,
               c->model.num_layers, c->model.num_heads, c->model.hidden_size, c->model.seq_len, c->model.vocab_size,
               dt_trainer_num_params(tr), params);
        if (c->data.path)
            printf("data:  text file %s, seq length %d\n", c->data.path, c->seq_length);
        else if (strcmp(c->data.task, "add") == 0)
            printf("data:  task add (operands of 1..%d digits), seq length %d\n", c->data.digits, c->seq_length);
        else
            printf("data:  task %s (words of 1..%d letters), seq length %d\n", c->data.task, c->data.max_len,
                   c->seq_length);
    }
    const int dp = ((c->comm ? c->comm->size : 1) - (c->ps_mode != DT_PS_NONE ? c->num_ps_servers : 0)) /
                   (c->pipeline_size * c->tensor_size);
    int n_micro = c->global_batch_size / (c->micro_batch_size * dp); /* per rank */
    if (c->model_kind == DT_MODEL_MLP_BN) /* progress "tok/s" counts examples here */
        printf("batch: %d examples (%d x %d micro-batch%s), %lld iterations\n", c->global_batch_size, n_micro,
               c->micro_batch_size, n_micro == 1 ? "" : "es", (long long)c->train_iters);
    else
        printf("batch: %d sequences (%d x %d micro-batch%s), %lld tokens per step, %lld iterations\n",
               c->global_batch_size, n_micro, c->micro_batch_size, n_micro == 1 ? "" : "es",
               (long long)c->global_batch_size * c->seq_length, (long long)c->train_iters);
    if (c->optim.kind == DT_OPTIM_ADAMW)
        printf("optim: adamw (beta1 %g, beta2 %g, eps %g)", (double)c->optim.beta1, (double)c->optim.beta2,
               (double)c->optim.eps);
    else if (c->optim.kind == DT_OPTIM_LAMB)
        printf("optim: lamb (beta1 %g, beta2 %g, eps %g, phi clipped to [%g, %g])", (double)c->optim.beta1,
               (double)c->optim.beta2, (double)c->optim.eps, (double)c->optim.lamb_gamma_l,
               (double)c->optim.lamb_gamma_u);
    else if (c->optim.kind == DT_OPTIM_LARS)
        printf("optim: lars (momentum %g, eta %g)", (double)c->optim.momentum, (double)c->optim.lars_eta);
    else
        printf("optim: sgd (momentum %g)", (double)c->optim.momentum);
    printf(", lr %g -> %g %s over %lld iters, warmup %lld, weight decay %g, clip %g\n", (double)c->lr.max_lr,
           (double)c->lr.min_lr, dtrain_decay_name(c->lr.style), (long long)c->lr.decay_iters,
           (long long)c->lr.warmup_iters, (double)c->optim.weight_decay, (double)c->clip_grad);
    if (c->lr_scaling != DT_LR_SCALING_NONE) {
        const dt_lr_schedule *eff = dt_trainer_lr_schedule(tr);
        printf("lr scaling: %s, global batch %d / base %d = x%.4g: effective lr %g -> %g\n",
               c->lr_scaling == DT_LR_SCALING_LINEAR ? "linear" : "sqrt", c->global_batch_size, c->base_batch_size,
               dt_lr_scaling_factor(c->lr_scaling, c->global_batch_size, c->base_batch_size), (double)eff->max_lr,
               (double)eff->min_lr);
    }
    if (c->comm && (c->pipeline_size > 1 || c->tensor_size > 1)) {
        const int t = c->tensor_size, p = c->pipeline_size, d = c->comm->size / (t * p);
        printf("parallel: grid t=%d x d=%d x p=%d (tensor, data, pipeline; rank = t_i + %d*(d_i + %d*p_i)), "
               "schedule %s, %d micro-batch%s per step per pipeline\n",
               t, d, p, t, d, dt_sched_kind_name(c->pipeline_schedule), n_micro, n_micro == 1 ? "" : "es");
        for (int r = 0; r < c->comm->size && c->comm->size <= 64; r++)
            printf("  rank %d: tensor %d, data %d, stage %d\n", r, r % t, (r / t) % d, r / (t * d));
    }
    else if (c->comm && c->ps_mode != DT_PS_NONE)
        printf("parallel: %d worker%s and %d parameter server%s (%s%s), weights and optimizer state sharded over "
               "the servers\n",
               c->comm->size - c->num_ps_servers, c->comm->size - c->num_ps_servers == 1 ? "" : "s",
               c->num_ps_servers, c->num_ps_servers == 1 ? "" : "s", c->ps_mode == DT_PS_SYNC ? "ps-sync" : "ps-async",
               c->ps_mode == DT_PS_ASYNC && c->max_staleness >= 0 ? ", bounded staleness" : "");
    else if (c->comm && c->use_distributed_optimizer)
        printf("parallel: %d data-parallel rank%s, ZeRO-1: gradients reduce-scattered, optimizer state sharded, "
               "weights all-gathered\n",
               c->comm->size, c->comm->size == 1 ? "" : "s");
    else if (c->comm)
        printf("parallel: %d data-parallel rank%s, gradients summed by %s allreduce%s\n", c->comm->size,
               c->comm->size == 1 ? "" : "s", dt_allreduce_algo_name(c->allreduce),
               c->allreduce == DT_ALLREDUCE_RING && c->allreduce_chunk_bytes ? " (chunked)" : "");
    if (c->precision != DT_F32) {
        printf("precision: %s storage, FP32 master weights and accumulation", c->precision == DT_F16 ? "fp16" : "bf16");
        if (c->use_loss_scaling && c->loss_scaler.static_scale > 0)
            printf(", static loss scale %g\n", (double)c->loss_scaler.static_scale);
        else if (c->use_loss_scaling)
            printf(", dynamic loss scale from %g (window %d, hysteresis %d, min %g)\n",
                   (double)c->loss_scaler.initial_scale, c->loss_scaler.window, c->loss_scaler.hysteresis,
                   (double)c->loss_scaler.min_scale);
        else
            printf(", no loss scaling\n");
    }
    if (c->recompute == DT_RECOMPUTE_FULL)
        printf("memory: full activation recomputation, checkpoint every %d block%s\n", c->recompute_num_layers,
               c->recompute_num_layers == 1 ? "" : "s");
    else if (c->recompute == DT_RECOMPUTE_SELECTIVE)
        printf("memory: selective activation recomputation (attention probabilities)\n");
    fflush(stdout);
}

static void dtrain_print_eval(dtrain_out *out, int64_t iter, const dt_eval_result *ev)
{
    dtrain_clear_live(out);
    if (ev->accuracy >= 0)
        printf("eval  iter %lld: val_loss %.4f accuracy %.2f%% (%d examples)\n", (long long)iter, (double)ev->loss,
               100.0 * ev->accuracy, ev->n_examples);
    else
        printf("eval  iter %lld: val_loss %.4f\n", (long long)iter, (double)ev->loss);
    fflush(stdout);
}

/* Launched by mpirun (OpenMPI or a PMI-based launcher)? Only then is MPI
 * initialised, so a plain ./dtrain never needs an MPI runtime. */
static int dtrain_launched_by_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

/* Exit status of a multi-rank job ended by dtrain_abort_job (mpirun passes
 * it on): a rank failed, or timed out waiting for a dead or hung one. */
#define DTRAIN_EXIT_ABORT 3

/* After a failure once the ranks work together, other ranks may be waiting
 * for this one (or this one timed out waiting for a dead or hung rank):
 * with more than one rank, end the whole job now (MPI_Abort through
 * dt_comm_abort) rather than wait in MPI_Finalize. The message is printed
 * first. Returns only for a single process. */
static void dtrain_abort_job(dt_comm *comm)
{
    if (!comm || comm->size < 2) return;
    fflush(stdout);
    fflush(stderr);
    dt_comm_abort(comm, DTRAIN_EXIT_ABORT);
}

static void dtrain_comm_end(dt_comm *comm)
{
    if (!comm) return;
    dt_comm_free(comm);
    if (dt_comm_finalize() != DT_OK) fprintf(stderr, PROG ": %s\n", dt_last_error());
}

/* Under mpirun every rank parses the same command line before MPI starts:
 * only rank 0 (by the launcher's environment) reports what is wrong with it,
 * so a bad flag is one line rather than one per rank. Returns the saved
 * stderr to give back to dtrain_restore_stderr, or -1 (nothing silenced). */
static int dtrain_quiet_other_ranks(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    if (!r) r = getenv("PMIX_RANK");
    if (!r || atoi(r) == 0) return -1;
    fflush(stderr);
    int saved = dup(STDERR_FILENO), nul = open("/dev/null", O_WRONLY);
    if (saved >= 0 && nul >= 0 && dup2(nul, STDERR_FILENO) >= 0) {
        close(nul);
        return saved;
    }
    if (saved >= 0) close(saved);
    if (nul >= 0) close(nul);
    return -1;
}

static void dtrain_restore_stderr(int saved)
{
    if (saved < 0) return;
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
}

int main(int argc, char **argv)
{
    dt_train_config defaults;
    dt_train_config_default(&defaults);
    dtrain_opts o;
    dtrain_opts_default(&o, &defaults);
    dt_arg args[DTRAIN_MAX_ARGS];
    int n_args = dtrain_build_args(&o, args, DTRAIN_MAX_ARGS);
    if (n_args < 0) {
        fprintf(stderr, PROG ": internal error: flag table too large\n");
        return 1;
    }
    /* --global-batch-size follows a lone --micro-batch-size: say so */
    char gb_text[64];
    snprintf(gb_text, sizeof gb_text, "%d, or --micro-batch-size if only that is given", o.job.global_batch);
    dt_args_find(args, n_args, "--global-batch-size")->default_text = gb_text;
    /* sizes default to the preset's: say which in --help */
    char def_text[4][48];
    const char *size_flags[4] = {"--num-layers", "--hidden-size", "--num-attention-heads", "--max-position-embeddings"};
    const int size_values[4] = {o.job.num_layers, o.job.hidden_size, o.job.num_heads, o.job.max_pos};
    for (int i = 0; i < 4; i++) {
        snprintf(def_text[i], sizeof def_text[i], "%d from --model %s", size_values[i], o.job.model);
        dt_args_find(args, n_args, size_flags[i])->default_text = def_text[i];
    }
    const int saved_stderr = dtrain_quiet_other_ranks();
    if (dt_args_parse(PROG, args, n_args, argc, argv) != DT_ARGS_OK) return 2;
    if (o.job.help) {
        dt_args_print_help(stdout,
                           "Usage: dtrain [--flag value | --flag=value]...\n"
                           "Train a small GPT on the CPU: a built-in task (add, reverse, sort) or a text file.\n"
                           "With no flags: the tiny model learns 2-digit addition (about 40 s on 2 cores).",
                           args, n_args);
        return 0;
    }
    if (o.job.version) {
        printf("dtrain %s\n", DT_VERSION_STRING);
        return 0;
    }

    dt_train_config cfg;
    int rc = dtrain_make_config(&o, args, n_args, &cfg);
    if (rc != 0) return rc;
    dtrain_restore_stderr(saved_stderr);
    if (o.print_schedule) { /* one pipeline; micro-batches per step from the global batch */
        const int m = cfg.global_batch_size / cfg.micro_batch_size;
        const int async = cfg.pipeline_schedule == DT_SCHED_PIPEDREAM || cfg.pipeline_schedule == DT_SCHED_PIPEDREAM_VSYNC;
        const int steps = async && cfg.train_iters > 1 ? 2 : 1;
        dt_schedule *sc = NULL;
        char *text = NULL;
        if (dt_schedule_make(cfg.pipeline_schedule, cfg.pipeline_size, m, steps, &sc) != DT_OK ||
            !(text = dt_schedule_format(sc, 0))) {
            fprintf(stderr, PROG ": --print-schedule: %s\n", sc ? "out of memory" : dt_last_error());
            dt_schedule_free(sc);
            return sc ? 1 : 2;
        }
        fputs(text, stdout);
        printf("bubble fraction (p-1)/(m+p-1) = %.4f\n", dt_schedule_bubble_formula(cfg.pipeline_size, m));
        free(text);
        dt_schedule_free(sc);
        return 0;
    }

    /* Under mpirun every rank is a data-parallel worker; rank 0 reports. */
    dt_comm *comm = NULL;
    if (dtrain_launched_by_mpirun()) {
        if (cfg.pipeline_size > 1) {
            /* Open MPI's shared memory sends a message above its eager limit
             * (4 KiB) only when the sender calls MPI again, i.e. after its
             * next compute: the stages would run one after the other. Raise
             * the limit above an activation and give the segment room for
             * several in flight, unless the user set them (read by MPI_Init). */
            char eager[32];
            const long long act = (long long)cfg.micro_batch_size * cfg.seq_length * cfg.model.hidden_size * 4;
            snprintf(eager, sizeof eager, "%lld", act + 4096);
            setenv("OMPI_MCA_btl_vader_eager_limit", eager, 0);
            setenv("OMPI_MCA_btl_vader_segment_size", "33554432", 0);
        }
        if (dt_comm_mpi_world(&comm) != DT_OK) {
            fprintf(stderr, PROG ": %s\n", dt_last_error());
            return 1;
        }
        cfg.comm = comm;
        /* as Megatron-LM: without --global-batch-size, one micro-batch per rank and step */
        /* ranks on one host share its cores: without --threads each takes its share
         * (as torchrun sets OMP_NUM_THREADS), since OpenMP threads spinning
         * on an oversubscribed core slow every rank down */
        if (!dt_args_given(args, n_args, "--threads")) {
            const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
            long cores = sysconf(_SC_NPROCESSORS_ONLN), local = ls ? atol(ls) : 1;
            if (cores > 0 && local > 0) cfg.threads = cores / local > 1 ? (int)(cores / local) : 1;
        }
        if (!dt_args_given(args, n_args, "--global-batch-size")) {
            const int workers = (comm->size - (cfg.ps_mode != DT_PS_NONE ? cfg.num_ps_servers : 0)) /
                                (cfg.pipeline_size * cfg.tensor_size);
            cfg.global_batch_size = cfg.micro_batch_size * (workers > 0 ? workers : 1);
        }
        if (comm->rank != 0 && !freopen("/dev/null", "w", stdout)) {
            fprintf(stderr, PROG ": rank %d: cannot silence stdout\n", comm->rank);
            dtrain_comm_end(comm);
            return 1;
        }
    }
    const int rank0 = !comm || comm->rank == 0;

    dt_trainer *tr = NULL;
    dt_status cst = dt_trainer_create(&cfg, &tr);
    if (cst != DT_OK) {
        /* DT_ERR_INVALID here is still the command line (a --seq-length too
         * short for the task, ...); files and memory are run-time failures */
        if (rank0 || cst == DT_ERR_BACKEND) fprintf(stderr, PROG ": %s\n", dt_last_error());
        if (cst == DT_ERR_BACKEND) dtrain_abort_job(comm); /* a rank may be gone: the others must not wait */
        dtrain_comm_end(comm);
        return cst == DT_ERR_INVALID ? 2 : 1;
    }
    dtrain_print_setup(tr);
    if (o.load) { /* every rank, servers included, before serving or stepping */
        dt_status lst = dt_trainer_load(tr, o.load);
        if (lst != DT_OK) {
            const char *msg = dt_last_error();
            if (rank0 || !strstr(msg, "(its message is on its stderr)")) fprintf(stderr, PROG ": %s\n", msg);
            dt_trainer_free(tr);
            dtrain_comm_end(comm);
            return 1;
        }
        if (rank0 && dt_trainer_load_note(tr)[0])
            fprintf(stderr, PROG ": warning: --load %s: %s\n", o.load, dt_trainer_load_note(tr));
        printf("resume: loaded %s at iteration %lld\n", dt_trainer_loaded_path(tr),
               (long long)dt_trainer_iterations(tr));
        fflush(stdout);
    }
    if (dt_trainer_is_server(tr)) { /* a parameter server: serve, then close the trace */
        int status = 0;
        if (dt_trainer_serve(tr) != DT_OK || dt_trainer_finish(tr) != DT_OK) {
            const char *msg = dt_last_error(); /* a timeout already names the rank */
            if (strncmp(msg, "rank ", 5) == 0) fprintf(stderr, PROG ": %s\n", msg);
            else fprintf(stderr, PROG ": rank %d: %s\n", comm->rank, msg);
            status = 1;
            dtrain_abort_job(comm);
        }
        dt_trainer_free(tr);
        dtrain_comm_end(comm);
        return status;
    }

    dtrain_out out = {.live = rank0 && isatty(STDERR_FILENO), .line_shown = 0, .last_draw_ns = 0};
    dt_train_stats st = {0};
    dt_eval_result ev = {0};
    int have_step = 0;
    double train_seconds = 0.0;
    const int64_t total = cfg.train_iters;
    int status = 0;

    for (int64_t it = dt_trainer_iterations(tr); it < total; it++) {
        if (dt_trainer_step(tr, &st) != DT_OK) {
            dtrain_clear_live(&out);
            fprintf(stderr, PROG ": %s\n", dt_last_error());
            status = 1;
            goto done;
        }
        have_step = 1;
        train_seconds += st.step_seconds;
        const double tps = dt_trainer_tokens_per_second(tr);
        /* from the throughput after the first (warm-up) step */
        const double eta = tps > 0 ? (double)(total - st.iter) * (double)cfg.global_batch_size * cfg.seq_length / tps
                                   : 0.0;
        char tok[32], eta_s[32], ls[64] = "";
        dtrain_fmt_count(tok, sizeof tok, tps);
        dtrain_fmt_duration(eta_s, sizeof eta_s, eta);
        if (cfg.use_loss_scaling)
            snprintf(ls, sizeof ls, "  scale %g skipped %lld", (double)st.loss_scale, (long long)st.skipped_steps);
        if (st.overflow) { /* like DeepSpeed's OVERFLOW! line: every skipped step is said */
            dtrain_clear_live(&out);
            printf("overflow: iteration %lld skipped at loss scale %g (first inf/NaN gradient: %s)\n",
                   (long long)st.iter, (double)st.loss_scale, st.overflow_tensor ? st.overflow_tensor : "?");
            fflush(stdout);
        }
        if (st.nonfinite) { /* --skip-nonfinite: every skipped step is said */
            dtrain_clear_live(&out);
            printf("nonfinite: iteration %lld skipped (%s); %lld skipped so far\n", (long long)st.iter,
                   st.nonfinite_where ? st.nonfinite_where : "?", (long long)st.nonfinite_skipped);
            fflush(stdout);
        }
        if (st.scale_at_min_first) {
            dtrain_clear_live(&out);
            fprintf(stderr,
                    PROG ": warning: the loss scale is at its minimum (%g) and gradients still overflow "
                         "(iteration %lld, first in %s): fp16 cannot hold them; lower --lr, check the data, or "
                         "use --bf16\n",
                    (double)cfg.loss_scaler.min_scale, (long long)st.iter,
                    st.overflow_tensor ? st.overflow_tensor : "?");
        }
        if (out.live) {
            int64_t now = dt_time_ns();
            if (now - out.last_draw_ns > 100000000LL || st.iter == total) {
                fprintf(stderr, "\r[%lld/%lld] loss %.4f lr %.2e%s %s tok/s eta %s\033[K", (long long)st.iter,
                        (long long)total, (double)st.loss, (double)st.lr, ls, tok, eta_s);
                fflush(stderr);
                out.line_shown = 1;
                out.last_draw_ns = now;
            }
        } else if (st.iter % cfg.log_interval == 0 || st.iter == 1) {
            printf("iter %lld/%lld  loss %.4f  lr %.3e  grad_norm %.3f%s  %s tok/s  eta %s\n", (long long)st.iter,
                   (long long)total, (double)st.loss, (double)st.lr, st.grad_norm, ls, tok, eta_s);
            fflush(stdout);
        }
        if (cfg.eval_interval > 0 && st.iter % cfg.eval_interval == 0 && st.iter != total) {
            if (dt_trainer_evaluate(tr, &ev) != DT_OK) {
                dtrain_clear_live(&out);
                fprintf(stderr, PROG ": %s\n", dt_last_error());
                status = 1;
                goto done;
            }
            dtrain_print_eval(&out, st.iter, &ev);
        }
        if (o.save && (st.iter % cfg.save_interval == 0 || st.iter == total)) {
            if (dt_trainer_save(tr, o.save) != DT_OK) {
                dtrain_clear_live(&out);
                fprintf(stderr, PROG ": %s\n", dt_last_error());
                status = 1;
                goto done;
            }
            if (!out.live) {
                printf("checkpoint: iteration %lld saved in %s\n", (long long)st.iter, dt_trainer_saved_path(tr));
                fflush(stdout);
            }
        }
    }
    if (dt_trainer_evaluate(tr, &ev) != DT_OK) {
        dtrain_clear_live(&out);
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        status = 1;
        goto done;
    }
    dtrain_print_eval(&out, dt_trainer_iterations(tr), &ev);
    if (o.job.summary && rank0) {
        if (dt_trainer_write_summary(tr, o.job.summary, have_step ? &st : NULL, &ev) != DT_OK) {
            fprintf(stderr, PROG ": %s\n", dt_last_error());
            status = 1;
            goto done;
        }
        printf("summary: %s\n", o.job.summary);
    }
    if (dt_trainer_finish(tr) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        status = 1;
        goto done;
    }
    if (o.job.trace) printf("trace: %s\n", o.job.trace);
    printf("done: %lld iterations in %.1f s (%.1f s training), peak activation memory %.2f MiB\n",
           (long long)dt_trainer_iterations(tr), dt_trainer_elapsed_seconds(tr), train_seconds,
           (double)dt_trainer_peak_activation_bytes(tr) / (1024.0 * 1024.0));
    int64_t pushes, smax;
    double smean;
    if (o.job.allreduce && !strcmp(o.job.allreduce, "ps-async") && dt_trainer_staleness(tr, &pushes, &smean, &smax) == DT_OK)
        printf("staleness: mean %.4f, max %lld over the %lld pushes of all workers\n", smean, (long long)smax,
               (long long)pushes);
    if (ev.accuracy >= 0)
        printf("final: val_loss %.4f accuracy %.2f%% (%d examples) tokens/s %.0f\n", (double)ev.loss,
               100.0 * ev.accuracy, ev.n_examples, dt_trainer_tokens_per_second(tr));
    else
        printf("final: val_loss %.4f accuracy n/a (%d examples) tokens/s %.0f\n", (double)ev.loss, ev.n_examples,
               dt_trainer_tokens_per_second(tr));
    fflush(stdout);

done:
    if (status != 0) dtrain_abort_job(comm);
    dt_trainer_free(tr);
    dtrain_comm_end(comm);
    return status;
}
