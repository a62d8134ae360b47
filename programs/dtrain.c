/* dtrain.c: the training program. Parses Megatron-LM style flags into a
 * dt_train_config, runs the trainer, logs progress and evaluations, and
 * writes the optional summary (--summary) and trace (--trace). This file
 * owns dtrain's flag table (the job flags shared with dtsim, job_flags.c,
 * plus its own), main and the training loop; the configuration is built in
 * dtrain_config.c, the output printed by dtrain_report.c, the launcher's
 * environment handled in dtrain_mpi.c; --generate (sampling text from a
 * checkpoint instead of training) is dtrain_generate.c's.
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
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtrain_prog.h"

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
        JOB(JF_UNTIE_EMBEDDINGS),
        JOB(JF_TIE_EMBEDDINGS),
        JOB_SECTION("Data"),
        {.name = "--task",
         .kind = DT_ARG_CHOICE,
         .dest = &o->task,
         .choices = "add|reverse|sort|blobs",
         .help = "built-in synthetic task (blobs: classification for --model mlp-bn)"},
        {.name = "--data",
         .kind = DT_ARG_STRING,
         .dest = &o->data,
         .metavar = "FILE",
         .help = "train on a text file (a regular file, read whole at the start) instead of --task"},
        {.name = "--tokenizer",
         .kind = DT_ARG_STRING,
         .dest = &o->tokenizer,
         .metavar = "DIR",
         .help = "GPT-2's byte-level BPE from DIR/vocab.json + merges.txt (or tokenizer.json): --data is tokenized "
                 "once (cached beside it as FILE.tok-*), --generate encodes and decodes with it (docs/interop.md)",
         .default_text = "bytes"},
        {.name = "--task-digits",
         .kind = DT_ARG_INT,
         .dest = &o->task_digits,
         IN(1, 9),
         .metavar = "N",
         .help = "add: maximum digits per operand"},
        {.name = "--task-max-len",
         .kind = DT_ARG_INT,
         .dest = &o->task_max_len,
         IN(1, 64),
         .metavar = "N",
         .help = "reverse/sort: maximum word length"},
        {.name = "--blobs-classes",
         .kind = DT_ARG_INT,
         .dest = &o->blobs_classes,
         IN(2, 1024),
         .metavar = "K",
         .help = "blobs: classes"},
        {.name = "--blobs-dims",
         .kind = DT_ARG_INT,
         .dest = &o->blobs_dims,
         IN(1, 65536),
         .metavar = "D",
         .help = "blobs: input dimensions"},
        {.name = "--blobs-separation",
         .kind = DT_ARG_FLOAT,
         .dest = &o->blobs_separation,
         POS,
         .metavar = "X",
         .help = "blobs: spread of the class centers in units of the noise"},
        JOB_SECTION("mlp-bn (BatchNorm)"),
        {.name = "--bn-momentum",
         .kind = DT_ARG_FLOAT,
         .dest = &o->bn_momentum,
         IN(0, 1),
         .metavar = "M",
         .help = "BatchNorm running-statistics momentum per optimizer step"},
        {.name = "--bn-momentum-adjust",
         .kind = DT_ARG_FLAG,
         .dest = &o->bn_momentum_adjust,
         .help = "with N micro-batches per step, update the running statistics with 1-(1-M)^(1/N) per micro-batch",
         .default_text = "off"},
        {.name = "--no-batchnorm",
         .kind = DT_ARG_FLAG,
         .dest = &o->no_batchnorm,
         .help = "mlp-bn without BatchNorm (a plain MLP)",
         .default_text = "off"},
        JOB_SECTION("Batch and schedule"),
        JOB(JF_MICRO_BATCH_SIZE),
        JOB(JF_GLOBAL_BATCH_SIZE),
        JOB(JF_TRAIN_ITERS),
        JOB(JF_SEED),
        JOB_SECTION("Optimizer"),
        JOB(JF_OPTIMIZER),
        {.name = "--lr", .kind = DT_ARG_FLOAT, .dest = &o->lr, MIN0, .metavar = "X", .help = "peak learning rate"},
        {.name = "--min-lr",
         .kind = DT_ARG_FLOAT,
         .dest = &o->min_lr,
         MIN0,
         .metavar = "X",
         .help = "learning rate at the end of the decay"},
        {.name = "--lr-warmup-iters",
         .kind = DT_ARG_INT64,
         .dest = &o->warmup_iters,
         MIN0,
         .metavar = "N",
         .help = "linear warm-up iterations (default at most --train-iters/10)"},
        {.name = "--lr-decay-iters",
         .kind = DT_ARG_INT64,
         .dest = &o->decay_iters,
         MIN0,
         .metavar = "N",
         .help = "iteration where the decay ends",
         .default_text = "--train-iters"},
        {.name = "--lr-decay-style",
         .kind = DT_ARG_CHOICE,
         .dest = &o->decay_style,
         .choices = "constant|linear|cosine",
         .help = "learning-rate decay"},
        {.name = "--weight-decay",
         .kind = DT_ARG_FLOAT,
         .dest = &o->weight_decay,
         MIN0,
         .metavar = "X",
         .help = "weight decay (matrices only)"},
        {.name = "--adam-beta1", .kind = DT_ARG_FLOAT, .dest = &o->beta1, UNIT, .metavar = "X", .help = "AdamW beta1"},
        {.name = "--adam-beta2", .kind = DT_ARG_FLOAT, .dest = &o->beta2, UNIT, .metavar = "X", .help = "AdamW beta2"},
        {.name = "--adam-eps",
         .kind = DT_ARG_FLOAT,
         .dest = &o->adam_eps,
         POS,
         .metavar = "X",
         .help = "AdamW epsilon"},
        {.name = "--sgd-momentum",
         .kind = DT_ARG_FLOAT,
         .dest = &o->momentum,
         UNIT,
         .metavar = "X",
         .help = "SGD and LARS momentum"},
        {.name = "--lars-eta",
         .kind = DT_ARG_FLOAT,
         .dest = &o->lars_eta,
         POS,
         .metavar = "X",
         .help = "LARS trust coefficient"},
        {.name = "--lamb-gamma-l",
         .kind = DT_ARG_FLOAT,
         .dest = &o->lamb_gamma_l,
         MIN0,
         .metavar = "X",
         .help = "LAMB: lower bound of phi(||w||)"},
        {.name = "--lamb-gamma-u",
         .kind = DT_ARG_FLOAT,
         .dest = &o->lamb_gamma_u,
         POS,
         .metavar = "X",
         .help = "LAMB: upper bound of phi(||w||) (inf: none)"},
        {.name = "--clip-grad",
         .kind = DT_ARG_FLOAT,
         .dest = &o->clip_grad,
         .metavar = "X",
         .help = "clip the gradient norm to this (<= 0: off)"},
        {.name = "--lr-scaling",
         .kind = DT_ARG_CHOICE,
         .dest = &o->lr_scaling,
         .choices = "none|linear|sqrt",
         .help = "scale --lr and --min-lr by global/base batch (linear) or its square root (sqrt)"},
        {.name = "--base-batch-size",
         .kind = DT_ARG_INT,
         .dest = &o->base_batch,
         MIN1,
         .metavar = "N",
         .help = "the global batch --lr was tuned for (with --lr-scaling)",
         .default_text = "--global-batch-size"},
        JOB_SECTION("Mixed precision"),
        JOB(JF_FP16),
        JOB(JF_BF16),
        JOB(JF_FP8_FORMAT),
        JOB(JF_FP8_RECIPE),
        JOB(JF_FP8_MARGIN),
        JOB(JF_FP8_AMAX_HISTORY_LEN),
        JOB(JF_FP8_AMAX_COMPUTE_ALGO),
        JOB(JF_LOSS_SCALE),
        JOB(JF_INITIAL_LOSS_SCALE),
        JOB(JF_LOSS_SCALE_WINDOW),
        JOB(JF_HYSTERESIS),
        JOB(JF_MIN_LOSS_SCALE),
        {.name = "--min-loss-scale-patience",
         .kind = DT_ARG_INT,
         .dest = &o->min_scale_patience,
         MIN0,
         .metavar = "N",
         .help = "stop (exit 1) after N steps in a row that overflow at the minimum scale; 0: never stop"},
        JOB_SECTION("Memory"),
        JOB(JF_RECOMPUTE_ACTIVATIONS),
        JOB(JF_RECOMPUTE_GRANULARITY),
        JOB(JF_RECOMPUTE_NUM_LAYERS),
        JOB_SECTION("Data parallelism (run under mpirun -np N)"),
        JOB(JF_ALLREDUCE),
        JOB(JF_USE_DISTRIBUTED_OPTIMIZER),
        JOB(JF_ZERO_STAGE),
        JOB(JF_ZERO_PREFETCH),
        JOB(JF_NUM_PS_SERVERS),
        {.name = "--max-staleness",
         .kind = DT_ARG_INT,
         .dest = &o->max_staleness,
         MIN0,
         .metavar = "S",
         .help = "ps-async: a worker waits rather than push a gradient more than S updates old",
         .default_text = "none"},
        JOB_SECTION("Model parallelism (mpirun -np t x p x d)"),
        JOB(JF_TENSOR_MODEL_PARALLEL_SIZE),
        JOB(JF_NO_VOCAB_PARALLEL),
        JOB(JF_SEQUENCE_PARALLEL),
        JOB(JF_CONTEXT_PARALLEL_SIZE),
        JOB(JF_CP_COMM_TYPE),
        JOB(JF_NO_SCATTER_GATHER),
        JOB(JF_PIPELINE_MODEL_PARALLEL_SIZE),
        JOB(JF_PIPELINE_SCHEDULE),
        JOB(JF_PIPELINE_SPLIT),
        JOB(JF_VIRTUAL_PIPELINE_MODEL_PARALLEL_SIZE),
        JOB(JF_NUM_LAYERS_PER_VIRTUAL_PIPELINE_STAGE),
        {.name = "--print-schedule",
         .kind = DT_ARG_FLAG,
         .dest = &o->print_schedule,
         .help = "print each stage's instruction list for these settings and exit",
         .default_text = "off"},
        JOB(JF_SLOW_RANK),
        {.name = "--comm-timeout",
         .kind = DT_ARG_DOUBLE,
         .dest = &o->comm_timeout,
         IN(0, 1e9),
         .metavar = "SECONDS",
         .help = "a rank waiting this long for another (died or hung) fails and mpirun ends the job, exit status 3 "
                 "(0: wait for ever; docs/faults.md)"},
        {.name = "--hang-rank",
         .kind = DT_ARG_STRING,
         .dest = &o->hang_rank,
         .metavar = "R:ITER",
         .help = "testing: rank R hangs (sleeps for ever) at the start of iteration ITER",
         .default_text = "off"},
        JOB(JF_ALLREDUCE_CHUNK_BYTES),
        JOB(JF_BUCKET_SIZE_MB),
        JOB_SECTION("Run"),
        {.name = "--device",
         .kind = DT_ARG_CHOICE,
         .dest = &o->device,
         .choices = "cpu|cuda",
         .help = "compute backend"},
        {.name = "--threads",
         .kind = DT_ARG_INT,
         .dest = &o->threads,
         IN(0, 1024),
         .metavar = "N",
         .help = "CPU threads (0: automatic, up to one per core, fewer while fewer run the steps faster, with the same "
                 "results; under mpirun: cores / ranks on the host)",
         .default_text = "0"},
        {.name = "--log-interval",
         .kind = DT_ARG_INT64,
         .dest = &o->log_interval,
         MIN1,
         .metavar = "N",
         .help = "iterations between log lines"},
        {.name = "--eval-interval",
         .kind = DT_ARG_INT64,
         .dest = &o->eval_interval,
         MIN0,
         .metavar = "N",
         .help = "iterations between evaluations (0: only at the end)"},
        {.name = "--eval-iters",
         .kind = DT_ARG_INT,
         .dest = &o->eval_iters,
         MIN1,
         .metavar = "N",
         .help = "validation batches per evaluation"},
        JOB(JF_TRACE),
        {.name = "--skip-nonfinite",
         .kind = DT_ARG_FLAG,
         .dest = &o->skip_nonfinite,
         .help = "FP32: skip (and count) a step whose loss or gradient norm is NaN/inf instead of stopping; either "
                 "way the first bad layer is named",
         .default_text = "off (stop)"},
        JOB(JF_SUMMARY),
        JOB_SECTION("Generation: what a checkpoint learned (--load DIR --generate N --prompt TEXT)"),
        {.name = "--generate",
         .kind = DT_ARG_INT,
         .dest = &o->generate,
         IN(0, 1000000),
         .metavar = "N",
         .help = "instead of training: continue --prompt by N tokens sampled from --load's checkpoint (or "
                 "--load-hf's model), on one process; 0 with --logits: only the prompt's logits",
         .default_text = "off"},
        {.name = "--prompt",
         .kind = DT_ARG_STRING,
         .dest = &o->prompt,
         .metavar = "TEXT",
         .help = "--generate: the text to continue (beyond the training context: its last --seq-length bytes)",
         .default_text = "none: required with --generate"},
        {.name = "--temperature",
         .kind = DT_ARG_FLOAT,
         .dest = &o->temperature,
         MIN0,
         .metavar = "T",
         .help = "--generate: divides the logits before the softmax (0: greedy, the most likely byte)"},
        {.name = "--top-k",
         .kind = DT_ARG_INT,
         .dest = &o->top_k,
         MIN0,
         .metavar = "K",
         .help = "--generate: sample among the K most likely bytes only (0: all; 1: greedy)"},
        {.name = "--logits",
         .kind = DT_ARG_STRING,
         .dest = &o->logits,
         .metavar = "FILE",
         .help = "--generate: also write the prompt's logits (one forward; tokens x vocabulary float32, "
                 "little-endian) to FILE, for tools/hf_compare.py",
         .default_text = "off"},
        {.name = "--export-hf",
         .kind = DT_ARG_STRING,
         .dest = &o->export_hf,
         .metavar = "OUT",
         .help = "instead of training: write --load's checkpoint as a Hugging Face GPT-2 directory (config.json, "
                 "model.safetensors, and the tokenizer's files if it trained with one) that transformers' "
                 "GPT2LMHeadModel.from_pretrained(OUT) loads (docs/interop.md)",
         .default_text = "off"},
        JOB_SECTION("Checkpoints (docs/checkpoints.md)"),
        {.name = "--save",
         .kind = DT_ARG_STRING,
         .dest = &o->save,
         .metavar = "DIR",
         .help = "save checkpoints under DIR (DIR/iter_XXXXXXXX, DIR/latest) every --save-interval iterations and "
                 "at the end",
         .default_text = "off"},
        {.name = "--save-interval",
         .kind = DT_ARG_INT64,
         .dest = &o->save_interval,
         MIN1,
         .metavar = "N",
         .help = "iterations between checkpoints",
         .default_text = "1000"},
        {.name = "--save-keep",
         .kind = DT_ARG_INT,
         .dest = &o->save_keep,
         MIN0,
         .metavar = "K",
         .help = "keep only the newest K checkpoints (0: all)",
         .default_text = "0"},
        {.name = "--load",
         .kind = DT_ARG_STRING,
         .dest = &o->load,
         .metavar = "DIR",
         .help = "resume exactly from a checkpoint (with --generate: sample from it): DIR/latest (or the newest "
                 "valid one) of a save directory, or DIR itself (DIR/iter_X)",
         .default_text = "off"},
        {.name = "--load-hf",
         .kind = DT_ARG_STRING,
         .dest = &o->load_hf,
         .metavar = "DIR",
         .help = "start from a Hugging Face GPT-2 (DIR/config.json gives the model, DIR/model.safetensors its "
                 "weights, F32/F16/BF16) in any layout; with --load the checkpoint's weights win (docs/interop.md)",
         .default_text = "off"},
        {.name = "--allow-data-change",
         .kind = DT_ARG_FLAG,
         .dest = &o->allow_data_change,
         .help = "--load with --data: resume even if the file's size or CRC32C differs from the one the "
                 "checkpoint recorded",
         .default_text = "off (refuse)"},
        JOB(JF_HELP),
        JOB(JF_VERSION),
    };
    int n = (int)(sizeof table / sizeof table[0]);
    if (n > cap) return -1;
    memcpy(a, table, sizeof table);
    return n;
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
    o->min_scale_patience = d->loss_scaler.min_patience;
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
    o->job.recompute_num_layers = 1;
    o->threads = d->threads;
    o->device = d->device;
    o->log_interval = d->log_interval;
    o->eval_interval = d->eval_interval;
    o->eval_iters = d->eval_iters;
    o->save_interval = 1000;
    o->save_keep = 0;
    o->temperature = 1.0f;
    o->top_k = 0;
}

/* The command line: the flags' values, their table and the --help texts
 * of defaults that depend on other flags. */
typedef struct dtrain_cli {
    dtrain_opts o;
    dt_arg args[DTRAIN_MAX_ARGS];
    int n_args;
    char gb_text[64];
    char size_text[4][48];
} dtrain_cli;

/* The table, with the defaults' texts --help shows; -1 if it overflows. */
static int dtrain_cli_init(dtrain_cli *c)
{
    dt_train_config defaults;
    dt_train_config_default(&defaults);
    dtrain_opts_default(&c->o, &defaults);
    c->n_args = dtrain_build_args(&c->o, c->args, DTRAIN_MAX_ARGS);
    if (c->n_args < 0) return -1;
    const job_opts *j = &c->o.job;
    /* --global-batch-size follows a lone --micro-batch-size: say so */
    snprintf(c->gb_text, sizeof c->gb_text, "%d, or --micro-batch-size if only that is given", j->global_batch);
    dt_args_find(c->args, c->n_args, "--global-batch-size")->default_text = c->gb_text;
    /* sizes default to the preset's: say which in --help */
    const char *size_flags[4] = {"--num-layers", "--hidden-size", "--num-attention-heads", "--max-position-embeddings"};
    const int size_values[4] = {j->num_layers, j->hidden_size, j->num_heads, j->max_pos};
    for (int i = 0; i < 4; i++) {
        snprintf(c->size_text[i], sizeof c->size_text[i], "%d from --model %s", size_values[i], j->model);
        dt_args_find(c->args, c->n_args, size_flags[i])->default_text = c->size_text[i];
    }
    return 0;
}

/* --print-schedule: one pipeline; micro-batches per step from the global batch. */
static int dtrain_print_schedule(const dt_train_config *cfg)
{
    const int m = cfg->global_batch_size / cfg->micro_batch_size, p = cfg->pipeline_size;
    const dt_sched_kind kind = cfg->pipeline_schedule;
    const int async = kind == DT_SCHED_PIPEDREAM || kind == DT_SCHED_PIPEDREAM_VSYNC;
    const int steps = async && cfg->train_iters > 1 ? 2 : 1;
    dt_schedule *sc = NULL;
    char *text = NULL;
    int v = 1;
    if (dt_sched_chunks_from_flags(kind, p, cfg->model.num_layers, cfg->virtual_pipeline_size,
                                   cfg->layers_per_virtual_stage, &v) != DT_OK) {
        fprintf(stderr, PROG ": --print-schedule: %s\n", dt_last_error());
        return 2;
    }
    if (dt_schedule_make_chunks(kind, p, v, m, steps, &sc) != DT_OK || !(text = dt_schedule_format(sc, 0))) {
        fprintf(stderr, PROG ": --print-schedule: %s\n", sc ? "out of memory" : dt_last_error());
        dt_schedule_free(sc);
        return sc ? 1 : 2;
    }
    fputs(text, stdout);
    if (async) /* no flush between steps: filled and drained once per run */
        printf("bubble fraction (p-1)/(steps*m+p-1) = %.4f over %lld steps (filled and drained once per run)\n",
               dt_schedule_bubble_ideal(kind, p, m, (int)cfg->train_iters), (long long)cfg->train_iters);
    else if (kind == DT_SCHED_GPIPE || kind == DT_SCHED_1F1B)
        printf("bubble fraction (p-1)/(m+p-1) = %.4f\n", dt_schedule_bubble_formula(p, m));
    else /* the issue-22 kinds: with equal costs per virtual stage, against 1f1b's */
        printf("bubble fraction %s = %.4f with equal F, B and W (1f1b: (p-1)/(m+p-1) = %.4f)\n",
               dt_schedule_bubble_formula_text(kind), dt_schedule_bubble_ideal_chunks(kind, p, v, m, 1),
               dt_schedule_bubble_formula(p, m));
    free(text);
    dt_schedule_free(sc);
    return 0;
}

/* Under mpirun every rank is a data-parallel worker; rank 0 reports.
 * Returns 0 (*comm NULL outside mpirun) or 1 after the message. */
static int dtrain_join_mpi(dt_train_config *cfg, dt_arg *args, int n_args, dt_comm **comm_out)
{
    *comm_out = NULL;
    if (!dt_comm_launched()) return 0; /* MPI only under a launcher */
    if (cfg->pipeline_size > 1) dtrain_mpi_pipeline_env(cfg);
    dt_comm *comm = NULL;
    if (dt_comm_mpi_world(&comm) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        return 1;
    }
    cfg->comm = comm;
    /* ranks on one host share its cores: without --threads each takes its share
     * (as torchrun sets OMP_NUM_THREADS), since OpenMP threads spinning
     * on an oversubscribed core slow every rank down */
    if (!dt_args_given(args, n_args, "--threads")) {
        const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        long cores = sysconf(_SC_NPROCESSORS_ONLN), local = ls ? atol(ls) : 1;
        if (cores > 0 && local > 0) cfg->threads = cores / local > 1 ? (int)(cores / local) : 1;
    }
    /* as Megatron-LM: without --global-batch-size, one micro-batch per rank and step */
    if (!dt_args_given(args, n_args, "--global-batch-size")) {
        const int workers = dt_grid_data_size(comm->size, cfg->ps_mode != DT_PS_NONE ? cfg->num_ps_servers : 0,
                                              cfg->tensor_size, cfg->context_size > 1 ? cfg->context_size : 1,
                                              cfg->pipeline_size);
        cfg->global_batch_size = cfg->micro_batch_size * (workers > 0 ? workers : 1);
    }
    if (comm->rank != 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, PROG ": rank %d: cannot silence stdout\n", comm->rank);
        dtrain_comm_end(comm);
        return 1;
    }
    *comm_out = comm;
    return 0;
}

/* The trainer, its setup printed. Returns 0, or the exit status after the
 * message (the job ended). */
static int dtrain_create(const dt_train_config *cfg, dt_comm *comm, int rank0, dt_trainer **tr)
{
    dt_status cst = dt_trainer_create(cfg, tr);
    if (cst != DT_OK) {
        /* DT_ERR_INVALID here is still the command line (a --seq-length too
         * short for the task, ...); files and memory are run-time failures */
        if (rank0 || cst == DT_ERR_BACKEND) fprintf(stderr, PROG ": %s\n", dt_last_error());
        if (cst == DT_ERR_BACKEND) dtrain_abort_job(comm); /* a rank may be gone: the others must not wait */
        dtrain_comm_end(comm);
        return cst == DT_ERR_INVALID ? 2 : 1;
    }
    dtrain_print_setup(*tr);
    return 0;
}

/* --load: every rank, servers included, before serving or stepping.
 * Returns 0 or 1 after the message. */
static int dtrain_load(dt_trainer *tr, const char *dir, int rank0)
{
    if (dt_trainer_load(tr, dir) != DT_OK) {
        const char *msg = dt_last_error();
        if (rank0 || !strstr(msg, "(its message is on its stderr)")) fprintf(stderr, PROG ": %s\n", msg);
        return 1;
    }
    if (rank0 && dt_trainer_load_note(tr)[0])
        fprintf(stderr, PROG ": warning: --load %s: %s\n", dir, dt_trainer_load_note(tr));
    printf("resume: loaded %s at iteration %lld\n", dt_trainer_loaded_path(tr), (long long)dt_trainer_iterations(tr));
    fflush(stdout);
    return 0;
}

/* A parameter server: serve, then close the trace. Returns the exit status. */
static int dtrain_serve(dt_trainer *tr, dt_comm *comm)
{
    int status = 0;
    if (dt_trainer_serve(tr) != DT_OK || dt_trainer_finish(tr) != DT_OK) {
        const char *msg = dt_last_error(); /* a timeout already names the rank */
        if (strncmp(msg, "rank ", 5) == 0) fprintf(stderr, PROG ": %s\n", msg);
        else fprintf(stderr, PROG ": rank %d: %s\n", comm->rank, msg);
        status = 1;
        dtrain_abort_job(comm);
    }
    return status;
}

/* A worker's run: the training loop and what it reports. */
typedef struct dtrain_run {
    dt_trainer *tr;
    const dt_train_config *cfg;
    const dtrain_opts *o;
    dtrain_out out;
    dt_train_stats st;
    dt_eval_result ev;
    int have_step;
    double train_seconds;
    int rank0;     /* this process prints the job's shared lines */
    dt_comm *comm; /* NULL: one process */
} dtrain_run;

/* The library's message after a failed call: 1. A failure every rank has
 * word for word is rank 0's to print (one line per job): the other ranks
 * wait for its MPI_Abort to end them, and print only if it has not come in
 * DTRAIN_SHARED_WAIT_S (rank 0 gone another way). */
#define DTRAIN_SHARED_WAIT_S 10
static int dtrain_run_fail(dtrain_run *r)
{
    dtrain_clear_live(&r->out);
    if (!r->rank0 && r->comm && r->comm->size > 1 && dt_trainer_failure_shared(r->tr)) {
        const struct timespec tick = {.tv_sec = 0, .tv_nsec = 100000000L};
        for (int i = 0; i < DTRAIN_SHARED_WAIT_S * 10; i++) nanosleep(&tick, NULL);
    }
    fprintf(stderr, PROG ": %s\n", dt_last_error());
    return 1;
}

/* After a step: the evaluation and the checkpoint it is due for. 0 or 1. */
static int dtrain_after_step(dtrain_run *r)
{
    const dt_train_config *cfg = r->cfg;
    const int64_t iter = r->st.iter, total = cfg->train_iters;
    if (cfg->eval_interval > 0 && iter % cfg->eval_interval == 0 && iter != total) {
        if (dt_trainer_evaluate(r->tr, &r->ev) != DT_OK) return dtrain_run_fail(r);
        dtrain_print_eval(&r->out, iter, &r->ev);
    }
    if (r->o->save && (iter % cfg->save_interval == 0 || iter == total)) {
        if (dt_trainer_save(r->tr, r->o->save) != DT_OK) return dtrain_run_fail(r);
        if (!r->out.live) {
            printf("checkpoint: iteration %lld saved in %s\n", (long long)iter, dt_trainer_saved_path(r->tr));
            fflush(stdout);
        }
    }
    return 0;
}

static int dtrain_train(dtrain_run *r)
{
    /* --train-iters 0 --save: the starting weights as a checkpoint of this
     * layout (--load-hf's, converted and sharded) */
    if (r->cfg->train_iters == 0 && dt_trainer_iterations(r->tr) == 0 && dtrain_after_step(r) != 0) return 1;
    for (int64_t it = dt_trainer_iterations(r->tr); it < r->cfg->train_iters; it++) {
        if (dt_trainer_step(r->tr, &r->st) != DT_OK) return dtrain_run_fail(r);
        r->have_step = 1;
        r->train_seconds += r->st.step_seconds;
        dtrain_print_step(&r->out, r->cfg, &r->st, dt_trainer_tokens_per_second(r->tr));
        if (dtrain_after_step(r) != 0) return 1;
    }
    return 0;
}

/* The final evaluation, summary, trace and lines. 0 or 1. */
static int dtrain_finish(dtrain_run *r, int rank0)
{
    dt_trainer *tr = r->tr;
    const dtrain_opts *o = r->o;
    if (dt_trainer_evaluate(tr, &r->ev) != DT_OK) return dtrain_run_fail(r);
    dtrain_print_eval(&r->out, dt_trainer_iterations(tr), &r->ev);
    if (o->job.summary && rank0) {
        if (dt_trainer_write_summary(tr, o->job.summary, r->have_step ? &r->st : NULL, &r->ev) != DT_OK) {
            fprintf(stderr, PROG ": %s\n", dt_last_error());
            return 1;
        }
        printf("summary: %s\n", o->job.summary);
    }
    if (dt_trainer_finish(tr) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        return 1;
    }
    if (o->job.trace) printf("trace: %s\n", o->job.trace);
    printf("done: %lld iterations in %.1f s (%.1f s training), peak activation memory %.2f MiB\n",
           (long long)dt_trainer_iterations(tr), dt_trainer_elapsed_seconds(tr), r->train_seconds,
           (double)dt_trainer_peak_activation_bytes(tr) / (1024.0 * 1024.0));
    int64_t pushes, smax;
    double smean;
    if (o->job.allreduce && !strcmp(o->job.allreduce, "ps-async") &&
        dt_trainer_staleness(tr, &pushes, &smean, &smax) == DT_OK)
        printf("staleness: mean %.4f, max %lld over the %lld pushes of all workers\n", smean, (long long)smax,
               (long long)pushes);
    const dt_eval_result *ev = &r->ev;
    if (ev->accuracy >= 0)
        printf("final: val_loss %.4f accuracy %.2f%% (%d examples) tokens/s %.0f\n", (double)ev->loss,
               100.0 * ev->accuracy, ev->n_examples, dt_trainer_tokens_per_second(tr));
    else
        printf("final: val_loss %.4f accuracy n/a (%d examples) tokens/s %.0f\n", (double)ev->loss, ev->n_examples,
               dt_trainer_tokens_per_second(tr));
    fflush(stdout);
    return 0;
}

/* Everything after the command line: MPI, the trainer, serving or
 * training. Returns the exit status. */
static int dtrain_job(const dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg)
{
    dt_comm *comm = NULL;
    if (dtrain_join_mpi(cfg, args, n_args, &comm) != 0) return 1;
    const int rank0 = !comm || comm->rank == 0;
    const int agree = dtrain_ranks_agree(o, cfg, comm, args, n_args);
    if (agree != 0) {
        dtrain_comm_end(comm);
        return agree;
    }
    int lock_fd = -1; /* the save directory's, held until the end */
    if (dtrain_prepare_outputs(o, comm, &lock_fd) != 0) {
        dtrain_comm_end(comm);
        return 1;
    }
    dt_trainer *tr = NULL;
    int status = dtrain_create(cfg, comm, rank0, &tr);
    if (status != 0) {
        dt_checkpoint_lock_release(lock_fd);
        return status;
    }
    if (o->load && dtrain_load(tr, o->load, rank0) != 0) {
        dt_trainer_free(tr);
        dtrain_comm_end(comm);
        dt_checkpoint_lock_release(lock_fd);
        return 1;
    }
    if (dt_trainer_is_server(tr)) {
        status = dtrain_serve(tr, comm);
    } else {
        dtrain_run r = {.tr = tr,
                        .cfg = cfg,
                        .o = o,
                        .out = {.live = rank0 && isatty(STDERR_FILENO)},
                        .rank0 = rank0,
                        .comm = comm};
        status = dtrain_train(&r);
        if (status == 0) status = dtrain_finish(&r, rank0);
        if (status != 0) dtrain_abort_job(comm);
    }
    dt_trainer_free(tr);
    dtrain_comm_end(comm);
    dt_checkpoint_lock_release(lock_fd);
    return status;
}

/* Ended by a signal (Ctrl-C; SIGTERM from mpirun ending a job that another
 * rank aborted): no hidden temporary of an output stays behind, and the
 * process still dies of the signal (exit status 128 + N). */
static void dtrain_on_signal(int sig)
{
    dt_file_out_remove_temporaries();
    signal(sig, SIG_DFL);
    raise(sig);
}

static int dtrain_main(int argc, char **argv)
{
    static dtrain_cli cli;
    /* a file size limit (ulimit -f) makes a write fail with EFBIG, reported, instead of killing silently */
    signal(SIGXFSZ, SIG_IGN);
    signal(SIGTERM, dtrain_on_signal);
    signal(SIGINT, dtrain_on_signal);
    signal(SIGHUP, dtrain_on_signal);
    if (dtrain_cli_init(&cli) != 0) {
        fprintf(stderr, PROG ": internal error: flag table too large\n");
        return 1;
    }
    const dtrain_opts *o = &cli.o;
    const int saved_stderr = dtrain_quiet_other_ranks();
    if (dt_args_parse(PROG, cli.args, cli.n_args, argc, argv) != DT_ARGS_OK)
        return dtrain_bad_command_line(saved_stderr, 2);
    if (o->job.help) {
        dt_args_print_help(stdout,
                           "Usage: dtrain [--flag value | --flag=value]...\n"
                           "Train a small GPT on the CPU: a built-in task (add, reverse, sort) or a text file.\n"
                           "With no flags: the tiny model learns 2-digit addition (about 40 s on 2 cores).\n"
                           "What a saved model learned: dtrain --load DIR --generate N --prompt TEXT.",
                           cli.args, cli.n_args);
        return 0;
    }
    if (o->job.version) {
        printf("dtrain %s\n", DT_VERSION_STRING);
        return 0;
    }
    int rc = dtrain_generate_flags(o, cli.args, cli.n_args);
    if (rc != 0) return dtrain_bad_command_line(saved_stderr, rc);
    if (dt_args_given(cli.args, cli.n_args, "--generate")) { /* --generate 0 --logits F included */
        dtrain_restore_stderr(saved_stderr);
        return dtrain_generate(o);
    }
    if (o->export_hf) {
        dtrain_restore_stderr(saved_stderr);
        return dtrain_export_hf(o);
    }
    dt_train_config cfg;
    rc = dtrain_make_config(&cli.o, cli.args, cli.n_args, &cfg);
    if (rc == 0) rc = dtrain_check_not_inputs(o);
    if (rc != 0) return dtrain_bad_command_line(saved_stderr, rc);
    dtrain_restore_stderr(saved_stderr);
    if (o->print_schedule) return dtrain_print_schedule(&cfg);
    return dtrain_job(o, cli.args, cli.n_args, &cfg);
}

int main(int argc, char **argv)
{
    /* before anything else: OpenBLAS's own threads, started when it loaded,
     * spin for ever if their work buffers do not fit (dt_backend.h) */
    if (dt_backend_cpu_blas_startup() != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        dt_args_exit_failed(1);
    }
    const int status = dtrain_main(argc, argv);
    if (status != 0) dt_args_exit_failed(status); /* not exit(): see args.h */
    return 0;
}
