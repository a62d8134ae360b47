/* dtsim.c: the simulator's program. Subcommands:
 *
 *   dtsim run [flags]        simulate one scenario: summary lines, --trace, --summary
 *   dtsim sweep [flags] --sweep KEY=V1,V2,... [--sweep ...] [--csv]
 *                            simulate every combination, print a table
 *   dtsim validate --profile FILE [--hw FILE] [--comm FILE] RUN...
 *                            predict measured runs from calibration inputs
 *
 * The scenario's flags are dtrain's (--num-layers, --micro-batch-size,
 * --pipeline-model-parallel-size, ...) plus --data-parallel-size (dtrain
 * infers it from the ranks) and --micro-batches; the shared ones come from
 * one table (job_flags.c). --config FILE reads a scenario from JSON first
 * (a dtsim config file, or a dtrain trace or summary: its config); flags on
 * the command line override it.
 *
 * The batch: --global-batch-size G sets the micro-batches per step and
 * pipeline to m = G / (B x d) (it must divide); --micro-batches M sets m
 * directly (both: they must agree); neither keeps m (1 by default, as
 * dtrain's one micro-batch per rank), so changing B or d alone changes G.
 *
 * Exit status: 0 success; 1 a failure at run time (out of memory, an
 * output file that cannot be written, a failed validation); 2 a bad command
 * line or an unusable input (unknown flag, bad value, inconsistent flags, a
 * --config / --hw / --profile / --grad-trace file that is missing or
 * malformed, a scenario the simulator cannot run). Always one line on
 * stderr, `dtsim: ...`, naming the flag, key or file. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "dtrain.h"
#include "job_flags.h"
#include "dts_run.h"
#include "dts_scenario.h"
#include "dts_validate.h"

#define PROG "dtsim"
#define DTSIM_MAX_SWEEP_KEYS 3
#define DTSIM_MAX_SWEEP_VALUES 64
#define DTSIM_MAX_COMBOS 4096
#define DTSIM_MAX_RUNS 256

typedef enum { DTSIM_RUN = 0, DTSIM_SWEEP, DTSIM_VALIDATE } dtsim_mode;

typedef struct dtsim_opts {
    job_opts job; /* the flags dtsim shares with dtrain (job_flags.h) */
    /* scenario */
    int vocab, micro_batches, data_size;
    const char *config, *hw, *profile, *grad_trace;
    int devices_per_node; /* 0: the hardware file's */
    int cores_per_node;   /* 0: a core (device) per rank */
    /* sweep */
    const char *sweep;
    int csv;
    /* validate */
    const char *comm;
    int skip;
} dtsim_opts;

_Static_assert(JOB_FLAGS_SIM_MAX_STAGES == DTS_MAX_STAGES, "--pipeline-model-parallel-size's bound is the simulator's");

/* ranges of dtsim's own flags, as designated initializers */
#define MIN1 .range = DT_ARG_HAS_MIN, .min = 1
#define MIN0 .range = DT_ARG_HAS_MIN, .min = 0
#define IN(lo, hi) .range = DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, .min = (lo), .max = (hi)

static int dtsim_build_args(dtsim_mode mode, dtsim_opts *o, dt_arg *a, int cap)
{
    int n = 0;
#define ADD(...)                                                                                                     \
    do {                                                                                                             \
        if (n >= cap) return -1;                                                                                     \
        a[n++] = (dt_arg){__VA_ARGS__};                                                                              \
    } while (0)
/* one of the job flags shared with dtrain (job_flags.c), as dtsim words it */
#define JOB(id)                                                                                                      \
    do {                                                                                                             \
        if (n >= cap) return -1;                                                                                     \
        a[n++] = job_flag(JOB_DTSIM, &o->job, (id));                                                                 \
    } while (0)
#define SECTION(heading) ADD(.name = (heading), .kind = DT_ARG_SECTION)
/* the machine's shape, for every subcommand */
#define ADD_NODE_FLAGS()                                                                                             \
    do {                                                                                                             \
        ADD(.name = "--devices-per-node", .kind = DT_ARG_INT, .dest = &o->devices_per_node, MIN1, .metavar = "N",   \
            .help = "ranks on one node, sharing its intra link (e.g. every rank of a one-machine run)",              \
            .default_text = "the hardware file's devices_per_node");                                                 \
        ADD(.name = "--cores-per-node", .kind = DT_ARG_INT, .dest = &o->cores_per_node, MIN1, .metavar = "N",       \
            .help = "the node's ranks share N cores for their compute (more ranks than cores: each computing rank "  \
                    "runs at N/k of its speed while k compute)",                                                     \
            .default_text = "a core of its own per rank");                                                           \
    } while (0)
    if (mode == DTSIM_VALIDATE) {
        SECTION("Calibration inputs (not the measured runs)");
        ADD(.name = "--profile", .kind = DT_ARG_STRING, .dest = &o->profile, .metavar = "FILE",
            .help = "single-rank compute profile: a `dtrain --trace` of one process (required)", .default_text = "none");
        ADD(.name = "--hw", .kind = DT_ARG_STRING, .dest = &o->hw, .metavar = "FILE",
            .help = "hardware file (sim/hw/*.json): its links", .default_text = "built-in defaults (dts_hw_default)");
        ADD(.name = "--comm", .kind = DT_ARG_STRING, .dest = &o->comm, .metavar = "FILE",
            .help = "`dtbench allreduce --json` output to fit the links from (overrides --hw's links)",
            .default_text = "none");
        ADD_NODE_FLAGS();
        ADD(.name = "--skip", .kind = DT_ARG_INT, .dest = &o->skip, MIN0, .metavar = "N",
            .help = "warm-up steps left out of the means");
        SECTION("Other");
        JOB(JF_HELP);
        return n;
    }
    SECTION("Scenario input");
    ADD(.name = "--config", .kind = DT_ARG_STRING, .dest = &o->config, .metavar = "FILE",
        .help = "read the scenario from JSON first: a dtsim config, or a dtrain trace or summary (its config); flags "
                "override it",
        .default_text = "none");
    SECTION("Model");
    JOB(JF_MODEL);
    JOB(JF_NUM_LAYERS);
    JOB(JF_HIDDEN_SIZE);
    JOB(JF_NUM_ATTENTION_HEADS);
    JOB(JF_MAX_POSITION_EMBEDDINGS);
    ADD(.name = "--vocab-size", .kind = DT_ARG_INT, .dest = &o->vocab, IN(2, 1 << 24), .metavar = "V",
        .help = "vocabulary (dtrain's data: 256 bytes; the LM head's cost)");
    JOB(JF_SEQ_LENGTH);
    SECTION("Batch");
    JOB(JF_MICRO_BATCH_SIZE);
    JOB(JF_GLOBAL_BATCH_SIZE);
    ADD(.name = "--micro-batches", .kind = DT_ARG_INT, .dest = &o->micro_batches, MIN1, .metavar = "M",
        .help = "micro-batches per step and pipeline (m; instead of --global-batch-size)",
        .default_text = "1, or from --config");
    JOB(JF_TRAIN_ITERS);
    JOB(JF_OPTIMIZER);
    JOB(JF_SEED);
    SECTION("Mixed precision");
    JOB(JF_FP16);
    JOB(JF_BF16);
    JOB(JF_LOSS_SCALE);
    JOB(JF_INITIAL_LOSS_SCALE);
    JOB(JF_LOSS_SCALE_WINDOW);
    JOB(JF_HYSTERESIS);
    JOB(JF_MIN_LOSS_SCALE);
    ADD(.name = "--grad-trace", .kind = DT_ARG_STRING, .dest = &o->grad_trace, .metavar = "FILE",
        .help = "fp16: a real run's trace with grad_amax events to fit the gradient model from",
        .default_text = "none (no numerics model)");
    SECTION("Memory");
    JOB(JF_RECOMPUTE_ACTIVATIONS);
    JOB(JF_RECOMPUTE_GRANULARITY);
    SECTION("Parallelism (ranks = t x p x d, plus the parameter servers)");
    JOB(JF_TENSOR_MODEL_PARALLEL_SIZE);
    JOB(JF_PIPELINE_MODEL_PARALLEL_SIZE);
    ADD(.name = "--data-parallel-size", .kind = DT_ARG_INT, .dest = &o->data_size, IN(1, 1 << 20), .metavar = "D",
        .help = "data-parallel replicas (workers with a parameter server); dtrain infers it from the ranks");
    JOB(JF_PIPELINE_SCHEDULE);
    JOB(JF_PIPELINE_SPLIT);
    JOB(JF_ALLREDUCE);
    JOB(JF_NUM_PS_SERVERS);
    JOB(JF_USE_DISTRIBUTED_OPTIMIZER);
    JOB(JF_BUCKET_SIZE_MB);
    JOB(JF_ALLREDUCE_CHUNK_BYTES);
    JOB(JF_SLOW_RANK);
    SECTION("Machine and costs");
    ADD(.name = "--hw", .kind = DT_ARG_STRING, .dest = &o->hw, .metavar = "FILE",
        .help = "hardware file (sim/hw/*.json; sim/hw/cpu-2core.json has this machine's fitted links)",
        .default_text = "built-in uncalibrated defaults (dts_hw_default)");
    ADD(.name = "--profile", .kind = DT_ARG_STRING, .dest = &o->profile, .metavar = "FILE",
        .help = "per-layer costs from a single-rank `dtrain --trace` (same width, heads, vocab and T)",
        .default_text = "roofline of --hw");
    ADD_NODE_FLAGS();
    if (mode == DTSIM_RUN) {
        SECTION("Output");
        JOB(JF_TRACE);
        JOB(JF_SUMMARY);
    } else {
        SECTION("Sweep");
        ADD(.name = "--sweep", .kind = DT_ARG_STRING, .dest = &o->sweep, .metavar = "KEY=V1,V2,...",
            .help = "values of one key (up to 3 --sweep): micro-batches, pipeline-model-parallel-size, "
                    "pipeline-schedule, data-parallel-size, tensor-model-parallel-size, link-bandwidth-scale",
            .default_text = "none (required)");
        ADD(.name = "--csv", .kind = DT_ARG_FLAG, .dest = &o->csv, .help = "print the table as CSV",
            .default_text = "aligned text");
    }
    SECTION("Other");
    JOB(JF_HELP);
    JOB(JF_VERSION);
#undef ADD_NODE_FLAGS
#undef SECTION
#undef JOB
#undef ADD
    return n;
}

static void dtsim_opts_default(dtsim_opts *o, const dts_scenario *d)
{
    memset(o, 0, sizeof *o);
    o->job.model = d->model_name;
    o->job.num_layers = d->model.num_layers;
    o->job.hidden_size = d->model.hidden_size;
    o->job.num_heads = d->model.num_heads;
    o->job.max_pos = d->model.seq_len;
    o->vocab = d->model.vocab_size;
    o->job.seq_length = d->T;
    o->job.micro_batch = d->B;
    o->micro_batches = d->m;
    o->job.global_batch = d->m * d->B * d->d;
    o->job.train_iters = d->steps;
    o->job.seed = d->seed;
    o->job.optimizer = "adamw";
    o->job.loss_scale = d->scaler.static_scale;
    o->job.initial_loss_scale = d->scaler.initial_scale;
    o->job.loss_scale_window = d->scaler.window;
    o->job.hysteresis = d->scaler.hysteresis;
    o->job.min_loss_scale = d->scaler.min_scale;
    o->job.recompute_granularity = "selective";
    o->job.tensor_size = d->t;
    o->job.pipeline_size = d->p;
    o->data_size = d->d;
    o->job.pipeline_schedule = dt_sched_kind_name(d->schedule);
    o->job.allreduce = d->exchange_name;
    o->job.num_ps_servers = 1;
    o->job.bucket_mb = (double)d->bucket_bytes / (1 << 20);
    o->job.allreduce_chunk_bytes = d->chunk_bytes;
    o->skip = 1;
}

/* The library's message without the "dtsim: " some of sim/'s messages
 * start with (the program prefixes its name itself). */
static const char *dtsim_last_error(void)
{
    const char *m = dt_last_error();
    return strncmp(m, PROG ": ", sizeof PROG + 1) == 0 ? m + sizeof PROG + 1 : m;
}

/* Exit status of a library failure on the inputs: 2 for what the user
 * gave (a bad value, a missing or malformed file), 1 otherwise. */
static int dtsim_input_code(dt_status st)
{
    return st == DT_ERR_INVALID || st == DT_ERR_FORMAT || st == DT_ERR_IO || st == DT_ERR_UNSUPPORTED ? 2 : 1;
}

static int dtsim_fail(dt_status st)
{
    fprintf(stderr, PROG ": %s\n", dtsim_last_error());
    return dtsim_input_code(st);
}

/* The whole file as a string (caller frees), or NULL after DT_FAIL. */
static char *dtsim_read_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        DT_FAIL(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len - 1, fp);
        len += got;
        if (len + 1 < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(fp);
    fclose(fp);
    if (!buf) {
        DT_FAIL(DT_ERR_NOMEM, "%s: out of memory reading it", path);
        return NULL;
    }
    if (err) {
        free(buf);
        DT_FAIL(DT_ERR_IO, "%s: read error", path);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

/* A dtsim config file's "profile" (a path), copied into out ("" if none). */
static void dtsim_config_profile(const char *text, char *out, size_t cap)
{
    out[0] = '\0';
    json_t *root = json_loads(text, 0, NULL);
    const json_t *p = root ? json_object_get(root, "profile") : NULL;
    if (json_is_string(p)) snprintf(out, cap, "%s", json_string_value(p));
    json_decref(root);
}

/* Parse --pipeline-split into sc; 0 or 2 (after the message). */
static int dtsim_parse_split(const char *text, dts_scenario *sc)
{
    const char *q = text;
    for (int i = 0;; i++) {
        char *end = NULL;
        errno = 0;
        long v = strtol(q, &end, 10);
        if (i >= DTS_MAX_STAGES || end == q || errno || v < 1 || v > 100000 || (*end && *end != ',')) {
            fprintf(stderr, PROG ": --pipeline-split '%s': expected positive block counts separated by commas, e.g. "
                                 "3,5\n",
                    text);
            return 2;
        }
        sc->split[i] = (int)v;
        sc->n_split = i + 1;
        if (!*end) break;
        q = end + 1;
    }
    for (int i = sc->n_split; i < DTS_MAX_STAGES; i++) sc->split[i] = 0;
    return 0;
}

/* The scenario from --config and the flags (checked when `check`).
 * Returns 0, or the exit status after printing the one-line error. The
 * cost is not filled yet; *profile is the --profile or the config's. */
static int dtsim_make_scenario(dtsim_opts *o, dt_arg *args, int n_args, dts_scenario *sc, char *profile,
                               size_t profile_cap, int check)
{
#define GIVEN(flag) dt_args_given(args, n_args, flag)
    dts_scenario_default(sc);
    profile[0] = '\0';
    if (o->config) {
        char *text = dtsim_read_file(o->config);
        if (!text) return dtsim_fail(DT_ERR_IO);
        dt_status st = dts_scenario_from_config(sc, text, o->config);
        if (st == DT_OK) dtsim_config_profile(text, profile, profile_cap);
        free(text);
        if (st != DT_OK) return dtsim_fail(st);
    }
    if (o->profile) snprintf(profile, profile_cap, "%s", o->profile);

    /* the model: the preset, then the sizes */
    if (GIVEN("--model")) {
        dt_gpt_config pre;
        if (dt_gpt_config_preset(o->job.model, &pre) != DT_OK) return dtsim_fail(DT_ERR_INVALID);
        pre.vocab_size = sc->model.vocab_size;
        sc->model = pre;
        snprintf(sc->model_name, sizeof sc->model_name, "%s", o->job.model);
        if (!GIVEN("--seq-length") && sc->T > sc->model.seq_len) sc->T = sc->model.seq_len;
    }
    int custom = 0;
#define DTSIM_SIZE(flag, field, value)                                                                               \
    do {                                                                                                             \
        if (GIVEN(flag) && (value) != sc->model.field) {                                                             \
            sc->model.field = (value);                                                                               \
            custom = 1;                                                                                              \
        }                                                                                                            \
    } while (0)
    DTSIM_SIZE("--num-layers", num_layers, o->job.num_layers);
    DTSIM_SIZE("--hidden-size", hidden_size, o->job.hidden_size);
    DTSIM_SIZE("--num-attention-heads", num_heads, o->job.num_heads);
    DTSIM_SIZE("--max-position-embeddings", seq_len, o->job.max_pos);
#undef DTSIM_SIZE
    if (custom) snprintf(sc->model_name, sizeof sc->model_name, "custom");
    if (GIVEN("--vocab-size")) sc->model.vocab_size = o->vocab;
    if (GIVEN("--seq-length")) sc->T = o->job.seq_length;

    /* batch and layout */
    if (GIVEN("--micro-batch-size")) sc->B = o->job.micro_batch;
    if (GIVEN("--data-parallel-size")) sc->d = o->data_size;
    if (GIVEN("--tensor-model-parallel-size")) sc->t = o->job.tensor_size;
    if (GIVEN("--pipeline-model-parallel-size")) sc->p = o->job.pipeline_size;
    const int64_t per_micro = (int64_t)sc->B * sc->d;
    if (GIVEN("--global-batch-size")) {
        if (o->job.global_batch % per_micro != 0) {
            if (sc->d == 1)
                fprintf(stderr, PROG ": --global-batch-size %d is not a multiple of --micro-batch-size %d\n",
                        o->job.global_batch, sc->B);
            else
                fprintf(stderr,
                        PROG ": --global-batch-size %d is not a multiple of --micro-batch-size %d x "
                             "--data-parallel-size %d\n",
                        o->job.global_batch, sc->B, sc->d);
            return 2;
        }
        if (GIVEN("--micro-batches") && (int64_t)o->micro_batches * per_micro != o->job.global_batch) {
            fprintf(stderr,
                    PROG ": --micro-batches %d x --micro-batch-size %d x --data-parallel-size %d is not "
                         "--global-batch-size %d\n",
                    o->micro_batches, sc->B, sc->d, o->job.global_batch);
            return 2;
        }
        sc->m = (int)(o->job.global_batch / per_micro);
    }
    if (GIVEN("--micro-batches")) sc->m = o->micro_batches;
    if (GIVEN("--train-iters")) sc->steps = o->job.train_iters;
    if (GIVEN("--seed")) sc->seed = o->job.seed;
    if (GIVEN("--optimizer")) {
        dt_optim_kind kind;
        if (dt_optim_kind_parse(o->job.optimizer, &kind) != DT_OK) return dtsim_fail(DT_ERR_INVALID);
        sc->optimizer_states = kind == DT_OPTIM_ADAMW || kind == DT_OPTIM_LAMB ? 2 : 1;
    }

    /* precision */
    if (o->job.fp16 && o->job.bf16) {
        fprintf(stderr, PROG ": --fp16 and --bf16: choose one\n");
        return 2;
    }
    if (o->job.fp16) snprintf(sc->precision, sizeof sc->precision, "fp16");
    if (o->job.bf16) snprintf(sc->precision, sizeof sc->precision, "bf16");
    if (GIVEN("--loss-scale")) sc->scaler.static_scale = o->job.loss_scale;
    if (GIVEN("--initial-loss-scale")) sc->scaler.initial_scale = o->job.initial_loss_scale;
    if (GIVEN("--loss-scale-window")) sc->scaler.window = o->job.loss_scale_window;
    if (GIVEN("--hysteresis")) sc->scaler.hysteresis = o->job.hysteresis;
    if (GIVEN("--min-loss-scale")) sc->scaler.min_scale = o->job.min_loss_scale;
    sc->use_loss_scaling = !strcmp(sc->precision, "fp16") || sc->scaler.static_scale > 0;
    static const char *const scaler_flags[] = {"--initial-loss-scale", "--loss-scale-window", "--hysteresis",
                                               "--min-loss-scale", NULL};
    for (const char *const *f = scaler_flags; *f; f++)
        if (GIVEN(*f) && (strcmp(sc->precision, "fp16") != 0 || sc->scaler.static_scale > 0)) {
            fprintf(stderr, PROG ": %s needs dynamic loss scaling (--fp16 without --loss-scale)\n", *f);
            return 2;
        }

    /* memory: Megatron-LM's rule, as dtrain */
    if (o->job.recompute_on || GIVEN("--recompute-granularity"))
        sc->recompute = !strcmp(o->job.recompute_granularity, "full") ? 1 : 2;

    /* parallelism */
    if (GIVEN("--pipeline-schedule") && dt_sched_kind_parse(o->job.pipeline_schedule, &sc->schedule) != DT_OK)
        return dtsim_fail(DT_ERR_INVALID);
    if (o->job.pipeline_split && dtsim_parse_split(o->job.pipeline_split, sc) != 0) return 2;
    if (GIVEN("--allreduce")) {
        const int ps = !strcmp(o->job.allreduce, "ps-sync") || !strcmp(o->job.allreduce, "ps-async");
        snprintf(sc->exchange_name, sizeof sc->exchange_name, "%s", o->job.allreduce);
        sc->exchange = !strcmp(o->job.allreduce, "tree")       ? DTS_EX_TREE
                       : !strcmp(o->job.allreduce, "naive")    ? DTS_EX_NAIVE
                       : !strcmp(o->job.allreduce, "ps-sync")  ? DTS_EX_PS_SYNC
                       : !strcmp(o->job.allreduce, "ps-async") ? DTS_EX_PS_ASYNC
                                                           : DTS_EX_RING;
        sc->num_ps_servers = ps ? (sc->num_ps_servers > 0 ? sc->num_ps_servers : 1) : 0;
    }
    if (GIVEN("--num-ps-servers")) {
        if (sc->exchange != DTS_EX_PS_SYNC && sc->exchange != DTS_EX_PS_ASYNC) {
            fprintf(stderr, PROG ": --num-ps-servers needs --allreduce ps-sync or ps-async\n");
            return 2;
        }
        sc->num_ps_servers = o->job.num_ps_servers;
    }
    if (o->job.distributed_optimizer) sc->zero = 1;
    if (GIVEN("--bucket-size-mb")) sc->bucket_bytes = (int64_t)(o->job.bucket_mb * (1 << 20));
    if (GIVEN("--allreduce-chunk-bytes")) sc->chunk_bytes = o->job.allreduce_chunk_bytes;
    if (o->job.slow_rank) {
        int r, ms;
        if (dt_args_parse_rank_ms(PROG, "--slow-rank", o->job.slow_rank, &r, &ms) != DT_ARGS_OK) return 2;
        sc->slow_rank = r;
        sc->slow_ns = (int64_t)ms * 1000000;
    }

    /* machine and numerics inputs */
    if (o->hw) {
        dts_hw hw;
        dt_status st = dts_hw_load(o->hw, &hw);
        if (st != DT_OK) return dtsim_fail(st);
        sc->hw = hw;
    }
    if (o->devices_per_node > 0) sc->hw.devices_per_node = o->devices_per_node;
    if (o->cores_per_node > 0) sc->hw.cores_per_node = o->cores_per_node;
    if (sc->hw.cores_per_node > 0 && sc->t > 1) {
        fprintf(stderr, PROG ": --cores-per-node with --tensor-model-parallel-size %d: not supported (shared cores "
                             "model pipeline and data-parallel ranks)\n", sc->t);
        return 2;
    }
    if (o->grad_trace) {
        if (strlen(o->grad_trace) >= sizeof sc->grad_trace) {
            fprintf(stderr, PROG ": --grad-trace: a file name of at most %zu bytes expected\n",
                    sizeof sc->grad_trace - 1);
            return 2;
        }
        snprintf(sc->grad_trace, sizeof sc->grad_trace, "%s", o->grad_trace);
    }
    if (sc->grad_trace[0]) { /* an input: missing is the user's error (2), found before the run */
        FILE *fp = fopen(sc->grad_trace, "rb");
        if (!fp) {
            fprintf(stderr, PROG ": --grad-trace %s: cannot open: %s\n", sc->grad_trace, strerror(errno));
            return 2;
        }
        fclose(fp);
    }
    if (check) {
        dt_status st = dts_scenario_check(sc);
        if (st != DT_OK) return dtsim_fail(st);
    }
    return 0;
#undef GIVEN
}

static void dtsim_print_scenario(FILE *f, const dts_scenario *sc)
{
    fprintf(f,
            "scenario: %s (%d layers, width %d, %d heads, vocab %d), B=%d T=%d m=%d (global batch %lld), "
            "%lld step%s\n",
            sc->model_name, sc->model.num_layers, sc->model.hidden_size, sc->model.num_heads, sc->model.vocab_size,
            sc->B, sc->T, sc->m, (long long)sc->m * sc->B * sc->d, (long long)sc->steps, sc->steps == 1 ? "" : "s");
    fprintf(f, "layout:   t=%d p=%d d=%d", sc->t, sc->p, sc->d);
    if (sc->exchange == DTS_EX_PS_SYNC || sc->exchange == DTS_EX_PS_ASYNC)
        fprintf(f, " + %d parameter server%s", sc->num_ps_servers, sc->num_ps_servers == 1 ? "" : "s");
    fprintf(f, " (%d rank%s), schedule %s, exchange %s%s, %s%s\n", dts_scenario_world(sc),
            dts_scenario_world(sc) == 1 ? "" : "s", dt_sched_kind_name(sc->schedule), sc->exchange_name, sc->zero ? " + ZeRO-1" : "", sc->precision,
            sc->recompute == 1 ? ", full recomputation" : sc->recompute == 2 ? ", selective recomputation" : "");
    fprintf(f, "machine:  %s; cost: %s\n", sc->hw.name, sc->have_cost ? sc->cost.source : "none");
}

/* ---- run --------------------------------------------------------------------- */

static int dtsim_cmd_run(dtsim_opts *o, dt_arg *args, int n_args)
{
    dts_scenario *sc = malloc(sizeof *sc);
    if (!sc) {
        fprintf(stderr, PROG ": out of memory for the scenario\n");
        return 1;
    }
    char profile[1024];
    int rc = dtsim_make_scenario(o, args, n_args, sc, profile, sizeof profile, 1);
    if (rc == 0) {
        dt_status st = dts_scenario_set_cost(sc, profile[0] ? profile : NULL);
        if (st != DT_OK) rc = dtsim_fail(st);
    }
    if (rc != 0) {
        free(sc);
        return rc;
    }
    dtsim_print_scenario(stdout, sc);
    fflush(stdout);
    dts_run_opts ro = {.trace_path = o->job.trace, .keep_events = 0};
    dts_summary s;
    memset(&s, 0, sizeof s);
    dt_status st = dts_run(sc, &ro, &s);
    if (st != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dtsim_last_error());
        free(sc);
        /* the scenario was checked: an invalid one here is still the input;
         * files (the trace being written) and memory are run-time failures */
        return st == DT_ERR_INVALID || st == DT_ERR_UNSUPPORTED || st == DT_ERR_FORMAT ? 2 : 1;
    }
    dts_summary_print(stdout, &s, sc);
    if (o->job.trace) printf("trace: %s\n", o->job.trace);
    if (o->job.summary) {
        st = dts_summary_write(&s, sc, o->job.summary);
        if (st != DT_OK) {
            fflush(stdout);
            fprintf(stderr, PROG ": %s\n", dtsim_last_error());
            rc = 1;
        } else {
            printf("summary: %s\n", o->job.summary);
        }
    }
    fflush(stdout);
    dts_summary_free(&s);
    free(sc);
    return rc;
}

/* ---- sweep ------------------------------------------------------------------- */

typedef enum {
    DTSIM_SW_M = 0,
    DTSIM_SW_P,
    DTSIM_SW_SCHED,
    DTSIM_SW_D,
    DTSIM_SW_T,
    DTSIM_SW_BW
} dtsim_sweep_key;

static const char *const dtsim_sweep_names[] = {"micro-batches", "pipeline-model-parallel-size", "pipeline-schedule",
                                                "data-parallel-size", "tensor-model-parallel-size",
                                                "link-bandwidth-scale"};
/* short column headings */
static const char *const dtsim_sweep_cols[] = {"m", "p", "schedule", "d", "t", "bw_scale"};

typedef struct dtsim_sweep {
    dtsim_sweep_key key;
    int n;
    double v[DTSIM_MAX_SWEEP_VALUES];    /* numbers, or the schedule kind */
    char text[DTSIM_MAX_SWEEP_VALUES][24]; /* as given */
} dtsim_sweep;

/* Parse one --sweep KEY=V1,V2,...; 0 or 2 after the message. */
static int dtsim_parse_sweep(const char *spec, dtsim_sweep *sw)
{
    const char *eq = strchr(spec, '=');
    int key = -1;
    for (int k = 0; eq && k < 6; k++)
        if (strlen(dtsim_sweep_names[k]) == (size_t)(eq - spec) && !strncmp(spec, dtsim_sweep_names[k], eq - spec))
            key = k;
    if (key < 0) {
        fprintf(stderr,
                PROG ": --sweep '%s': expected KEY=V1,V2,... with KEY one of micro-batches, "
                     "pipeline-model-parallel-size, pipeline-schedule, data-parallel-size, "
                     "tensor-model-parallel-size, link-bandwidth-scale\n",
                spec);
        return 2;
    }
    sw->key = (dtsim_sweep_key)key;
    sw->n = 0;
    const char *q = eq + 1;
    for (;;) {
        const char *comma = strchr(q, ',');
        size_t len = comma ? (size_t)(comma - q) : strlen(q);
        char item[24];
        int ok = len > 0 && len < sizeof item && sw->n < DTSIM_MAX_SWEEP_VALUES;
        double v = 0;
        if (ok) {
            memcpy(item, q, len);
            item[len] = '\0';
            if (sw->key == DTSIM_SW_SCHED) {
                dt_sched_kind kind;
                ok = dt_sched_kind_parse(item, &kind) == DT_OK;
                dt_clear_error();
                v = (double)kind;
            } else {
                char *end = NULL;
                errno = 0;
                v = strtod(item, &end);
                ok = *end == '\0' && errno == 0 && isfinite(v) && v > 0;
                if (ok && sw->key != DTSIM_SW_BW) ok = v == floor(v) && v <= 1 << 20;
            }
        }
        if (!ok) {
            const char *want = sw->key == DTSIM_SW_SCHED ? "schedule names (gpipe, 1f1b, pipedream, pipedream-vsync)"
                               : sw->key == DTSIM_SW_BW  ? "numbers > 0"
                                                         : "integers >= 1";
            if (sw->n >= DTSIM_MAX_SWEEP_VALUES)
                fprintf(stderr, PROG ": --sweep '%s': expected at most %d values\n", spec, DTSIM_MAX_SWEEP_VALUES);
            else
                fprintf(stderr, PROG ": --sweep '%s': expected %s=V1,V2,... with %s separated by commas\n", spec,
                        dtsim_sweep_names[key], want);
            return 2;
        }
        sw->v[sw->n] = v;
        snprintf(sw->text[sw->n], sizeof sw->text[sw->n], "%s", item);
        sw->n++;
        if (!comma) break;
        q = comma + 1;
    }
    return 0;
}

/* Take every --sweep out of argv (it may repeat, unlike the table's
 * flags); the rest goes to the parser. Returns 0 or 2. */
static int dtsim_take_sweeps(int *argc, char **argv, dtsim_sweep *sw, int *n_sw)
{
    int out = 1;
    *n_sw = 0;
    for (int i = 1; i < *argc; i++) {
        const char *spec = NULL;
        if (!strcmp(argv[i], "--sweep")) {
            if (i + 1 >= *argc || !strncmp(argv[i + 1], "--", 2)) {
                fprintf(stderr, PROG ": --sweep: missing value (KEY=V1,V2,...)\n");
                return 2;
            }
            spec = argv[++i];
        } else if (!strncmp(argv[i], "--sweep=", 8)) {
            spec = argv[i] + 8;
        } else {
            argv[out++] = argv[i];
            continue;
        }
        if (*n_sw >= DTSIM_MAX_SWEEP_KEYS) {
            fprintf(stderr, PROG ": --sweep '%s': at most %d keys can be swept\n", spec, DTSIM_MAX_SWEEP_KEYS);
            return 2;
        }
        if (dtsim_parse_sweep(spec, &sw[*n_sw]) != 0) return 2;
        for (int k = 0; k < *n_sw; k++)
            if (sw[k].key == sw[*n_sw].key) {
                fprintf(stderr, PROG ": --sweep %s: given twice (one --sweep per key)\n",
                        dtsim_sweep_names[sw[k].key]);
                return 2;
            }
        (*n_sw)++;
    }
    *argc = out;
    return 0;
}

static void dtsim_sweep_apply(const dtsim_sweep *sw, int i, const dts_scenario *base, dts_scenario *sc)
{
    const double v = sw->v[i];
    switch (sw->key) {
    case DTSIM_SW_M: sc->m = (int)v; break;
    case DTSIM_SW_P: sc->p = (int)v; break;
    case DTSIM_SW_SCHED: sc->schedule = (dt_sched_kind)(int)v; break;
    case DTSIM_SW_D: sc->d = (int)v; break;
    case DTSIM_SW_T: sc->t = (int)v; break;
    case DTSIM_SW_BW:
        sc->hw.intra.bytes_per_ns = base->hw.intra.bytes_per_ns * v;
        sc->hw.inter.bytes_per_ns = base->hw.inter.bytes_per_ns * v;
        break;
    }
}

/* With --global-batch-size G (and m not swept), a combination keeps G:
 * m = G / (B x d) for its d. 0, or 2 after the message naming the combination. */
static int dtsim_sweep_batch(const dtsim_opts *o, dt_arg *args, int n_args, const dtsim_sweep *sw, int n_sw,
                             dts_scenario *sc, const char *label)
{
    if (!dt_args_given(args, n_args, "--global-batch-size")) return 0;
    for (int k = 0; k < n_sw; k++)
        if (sw[k].key == DTSIM_SW_M) return 0;
    const int64_t per_micro = (int64_t)sc->B * sc->d;
    if (o->job.global_batch % per_micro != 0) {
        fprintf(stderr,
                PROG ": --sweep %s: --global-batch-size %d is not a multiple of --micro-batch-size %d x "
                     "--data-parallel-size %d\n",
                label, o->job.global_batch, sc->B, sc->d);
        return 2;
    }
    sc->m = (int)(o->job.global_batch / per_micro);
    return 0;
}

static void dtsim_cell(int csv, int width, const char *text, int last)
{
    if (csv)
        printf("%s%s", text, last ? "\n" : ",");
    else
        printf("%*s%s", width, text, last ? "\n" : "  ");
}

static int dtsim_cmd_sweep(dtsim_opts *o, dt_arg *args, int n_args, const dtsim_sweep *sw, int n_sw)
{
    if (n_sw == 0) {
        fprintf(stderr, PROG ": --sweep: expected at least one KEY=V1,V2,... (see dtsim sweep --help)\n");
        return 2;
    }
    int combos = 1;
    for (int k = 0; k < n_sw; k++) {
        combos *= sw[k].n;
        if (combos > DTSIM_MAX_COMBOS) {
            fprintf(stderr, PROG ": --sweep: more than %d combinations\n", DTSIM_MAX_COMBOS);
            return 2;
        }
    }
    dts_scenario *base = malloc(sizeof *base), *sc = malloc(sizeof *sc);
    if (!base || !sc) {
        free(base);
        free(sc);
        fprintf(stderr, PROG ": out of memory for the scenarios\n");
        return 1;
    }
    char profile[1024];
    /* the base alone is not checked: only with each combination applied (a
     * --pipeline-split for the swept p, say) */
    int rc = dtsim_make_scenario(o, args, n_args, base, profile, sizeof profile, 0);
    int idx[DTSIM_MAX_SWEEP_KEYS];
    char label[256];
    /* every combination is checked before any runs */
    for (int c = 0; rc == 0 && c < combos; c++) {
        *sc = *base;
        int r = c, len = 0;
        label[0] = '\0';
        for (int k = n_sw - 1; k >= 0; k--) { /* the first key varies slowest */
            idx[k] = r % sw[k].n;
            r /= sw[k].n;
        }
        for (int k = 0; k < n_sw; k++) {
            dtsim_sweep_apply(&sw[k], idx[k], base, sc);
            len += snprintf(label + len, sizeof label - (size_t)len, "%s%s=%s", k ? " " : "",
                            dtsim_sweep_names[sw[k].key], sw[k].text[idx[k]]);
            if (len >= (int)sizeof label) len = (int)sizeof label - 1;
        }
        rc = dtsim_sweep_batch(o, args, n_args, sw, n_sw, sc, label);
        if (rc != 0) break;
        dt_status st = dts_scenario_check(sc);
        if (st != DT_OK) {
            fprintf(stderr, PROG ": --sweep %s: %s\n", label, dtsim_last_error());
            rc = dtsim_input_code(st);
        }
    }
    /* the costs do not depend on the swept keys (model, B, T and the
     * device are fixed; costs are per whole layer): fill them once */
    if (rc == 0) {
        dt_status st = dts_scenario_set_cost(base, profile[0] ? profile : NULL);
        if (st != DT_OK) rc = dtsim_fail(st);
    }
    if (rc != 0) {
        free(base);
        free(sc);
        return rc;
    }
    const int csv = o->csv;
    static const char *const cols[] = {"step_ms", "bubble0", "bubble_max", "formula", "comm_ms", "peak_MiB"};
    int width[DTSIM_MAX_SWEEP_KEYS];
    if (!csv) {
        dtsim_print_scenario(stdout, base);
        printf("\n");
    }
    for (int k = 0; k < n_sw; k++) {
        int w = (int)strlen(dtsim_sweep_cols[sw[k].key]);
        for (int i = 0; i < sw[k].n; i++)
            if ((int)strlen(sw[k].text[i]) > w) w = (int)strlen(sw[k].text[i]);
        width[k] = w;
        dtsim_cell(csv, w, dtsim_sweep_cols[sw[k].key], 0);
    }
    for (int j = 0; j < 6; j++) dtsim_cell(csv, 10, cols[j], j == 5);
    fflush(stdout);
    for (int c = 0; c < combos; c++) {
        *sc = *base;
        int r = c;
        for (int k = n_sw - 1; k >= 0; k--) {
            idx[k] = r % sw[k].n;
            r /= sw[k].n;
        }
        for (int k = 0; k < n_sw; k++) dtsim_sweep_apply(&sw[k], idx[k], base, sc);
        (void)dtsim_sweep_batch(o, args, n_args, sw, n_sw, sc, ""); /* checked above */
        dts_run_opts ro = {.trace_path = NULL, .keep_events = 0};
        dts_summary s;
        memset(&s, 0, sizeof s);
        dt_status st = dts_run(sc, &ro, &s);
        if (st != DT_OK) {
            fflush(stdout);
            fprintf(stderr, PROG ": %s\n", dtsim_last_error());
            rc = st == DT_ERR_INVALID || st == DT_ERR_UNSUPPORTED || st == DT_ERR_FORMAT ? 2 : 1;
            break;
        }
        double b0 = s.bubble && s.p > 0 ? s.bubble[0] : NAN, bmax = NAN;
        for (int i = 0; s.bubble && i < s.p; i++)
            if (!isnan(s.bubble[i]) && (isnan(bmax) || s.bubble[i] > bmax)) bmax = s.bubble[i];
        int64_t peak = 0;
        for (int i = 0; s.peak_mem && i < s.n_ranks; i++)
            if (s.peak_mem[i] > peak) peak = s.peak_mem[i];
        const double comm = s.comm_ns_dp + s.comm_ns_pp + s.comm_ns_tp + s.comm_ns_ps;
        char cell[6][32];
        snprintf(cell[0], sizeof cell[0], "%.3f", s.step_ns / 1e6);
        if (isnan(b0)) snprintf(cell[1], sizeof cell[1], "%s", csv ? "" : "-");
        else snprintf(cell[1], sizeof cell[1], "%.4f", b0);
        if (isnan(bmax)) snprintf(cell[2], sizeof cell[2], "%s", csv ? "" : "-");
        else snprintf(cell[2], sizeof cell[2], "%.4f", bmax);
        snprintf(cell[3], sizeof cell[3], "%.4f", dt_schedule_bubble_formula(sc->p, sc->m));
        snprintf(cell[4], sizeof cell[4], "%.3f", comm / 1e6);
        snprintf(cell[5], sizeof cell[5], "%.2f", (double)peak / (1024.0 * 1024.0));
        for (int k = 0; k < n_sw; k++) dtsim_cell(csv, width[k], sw[k].text[idx[k]], 0);
        for (int j = 0; j < 6; j++) dtsim_cell(csv, 10, cell[j], j == 5);
        fflush(stdout);
        dts_summary_free(&s);
    }
    free(base);
    free(sc);
    return rc;
}

/* ---- validate ---------------------------------------------------------------- */

static int dtsim_cmd_validate(dtsim_opts *o, const char **runs, int n_runs)
{
    if (!o->profile) {
        fprintf(stderr, PROG ": --profile: expected a single-rank profile trace (`dtrain --trace` of one process)\n");
        return 2;
    }
    if (n_runs == 0) {
        fprintf(stderr, PROG ": validate: expected measured traces after the flags (run.rank0.json or run.json ...)\n");
        return 2;
    }
    dts_validate_opts vo = {.profile = o->profile,
                            .hw = o->hw,
                            .comm_json = o->comm,
                            .runs = runs,
                            .n_runs = n_runs,
                            .skip = o->skip,
                            .devices_per_node = o->devices_per_node,
                            .cores_per_node = o->cores_per_node};
    dts_validate_result res;
    memset(&res, 0, sizeof res);
    dt_status st = dts_validate(&vo, stdout, &res);
    fflush(stdout);
    if (st != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dtsim_last_error());
        dts_validate_result_free(&res);
        return dtsim_input_code(st);
    }
    dts_validate_result_free(&res);
    return 0;
}

/* Take the positional arguments (the measured traces) out of argv, keeping
 * each flag with its value. Returns the number taken, or -1 (too many). */
static int dtsim_take_positionals(int *argc, char **argv, dt_arg *args, int n_args, const char **runs, int cap)
{
    int out = 1, n = 0;
    for (int i = 1; i < *argc; i++) {
        const char *tok = argv[i];
        if (!strncmp(tok, "--", 2) && tok[2]) {
            argv[out++] = argv[i];
            const char *eq = strchr(tok, '=');
            if (eq) continue;
            dt_arg *a = dt_args_find(args, n_args, tok);
            if (a && a->kind != DT_ARG_FLAG && i + 1 < *argc && strncmp(argv[i + 1], "--", 2) != 0)
                argv[out++] = argv[++i];
            continue;
        }
        if (!strcmp(tok, "-h")) {
            argv[out++] = argv[i];
            continue;
        }
        if (n >= cap) return -1;
        runs[n++] = tok;
    }
    *argc = out;
    return n;
}

/* The sizes default to the preset's: say which in --help. */
static void dtsim_default_texts(const dtsim_opts *o, dt_arg *args, int n_args, char def_text[5][48])
{
    const char *size_flags[5] = {"--num-layers", "--hidden-size", "--num-attention-heads", "--max-position-embeddings",
                                 "--seq-length"};
    const int size_values[5] = {o->job.num_layers, o->job.hidden_size, o->job.num_heads, o->job.max_pos, o->job.seq_length};
    for (int i = 0; i < 5; i++) {
        if (i < 4) snprintf(def_text[i], 48, "%d from --model %s", size_values[i], o->job.model);
        else snprintf(def_text[i], 48, "%d, or the preset's context if shorter", size_values[i]);
        dt_arg *a = dt_args_find(args, n_args, size_flags[i]);
        if (a) a->default_text = def_text[i];
    }
}

/* ---- main -------------------------------------------------------------------- */

static const char *const dtsim_epilogue =
    "\nExit status: 0 success; 1 a failure at run time (out of memory, an output file that cannot be\n"
    "written, a failed step of the simulation); 2 a bad command line or input (unknown flag, bad value,\n"
    "inconsistent flags, a --config/--hw/--profile/--grad-trace file missing or malformed, a scenario the\n"
    "simulator cannot run). Errors are one line on stderr: `dtsim: ...` naming the flag, key or file.\n";

static void dtsim_usage(FILE *f)
{
    fputs("Usage: dtsim run [flags]                     simulate one scenario\n"
          "       dtsim sweep [flags] --sweep KEY=V1,V2,... [--sweep ...] [--csv]\n"
          "                                             simulate every combination, print a table\n"
          "       dtsim validate --profile FILE [--hw FILE] [--comm FILE] [--skip N] RUN...\n"
          "                                             predict measured runs (their rank-0 traces)\n"
          "       dtsim --help | --version\n"
          "Each subcommand's flags: dtsim SUBCOMMAND --help.\n",
          f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, PROG ": expected a subcommand: run, sweep or validate (see dtsim --help)\n");
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version")) {
        printf("dtsim %s\n", DT_VERSION_STRING);
        return 0;
    }
    dts_scenario *defaults = malloc(sizeof *defaults);
    if (!defaults) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    dts_scenario_default(defaults);
    dtsim_opts o;
    dtsim_opts_default(&o, defaults);
    dt_arg args[96];
    int rc = 0;
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        if (argc > 2) {
            fprintf(stderr, PROG ": %s takes nothing after it (got '%s')\n", cmd, argv[2]);
            rc = 2;
            goto done;
        }
        int n = dtsim_build_args(DTSIM_RUN, &o, args, 96);
        char def_text[5][48];
        dtsim_default_texts(&o, args, n, def_text);
        dtsim_usage(stdout);
        printf("\nSimulate dtrain's training step (data, pipeline and tensor parallelism, the parameter server,\n"
               "ZeRO-1, mixed precision) on a modelled machine; flags have dtrain's names.\n\n");
        dt_args_print_help(stdout, "dtsim run flags:", args, n);
        fputs(dtsim_epilogue, stdout);
        goto done;
    }
    dtsim_mode mode;
    if (!strcmp(cmd, "run")) mode = DTSIM_RUN;
    else if (!strcmp(cmd, "sweep")) mode = DTSIM_SWEEP;
    else if (!strcmp(cmd, "validate")) mode = DTSIM_VALIDATE;
    else {
        fprintf(stderr, PROG ": unknown subcommand '%s' (expected run, sweep or validate; see dtsim --help)\n", cmd);
        rc = 2;
        goto done;
    }
    int n_args = dtsim_build_args(mode, &o, args, 96);
    if (n_args < 0) {
        fprintf(stderr, PROG ": internal error: flag table too large\n");
        rc = 1;
        goto done;
    }
    char def_text[5][48];
    if (mode != DTSIM_VALIDATE) dtsim_default_texts(&o, args, n_args, def_text);
    /* argv from the subcommand on: argv[0] is the subcommand */
    int sargc = argc - 1;
    char **sargv = argv + 1;
    dtsim_sweep sw[DTSIM_MAX_SWEEP_KEYS];
    int n_sw = 0;
    const char *runs[DTSIM_MAX_RUNS];
    int n_runs = 0;
    if (mode == DTSIM_SWEEP && dtsim_take_sweeps(&sargc, sargv, sw, &n_sw) != 0) {
        rc = 2;
        goto done;
    }
    if (mode == DTSIM_VALIDATE) {
        n_runs = dtsim_take_positionals(&sargc, sargv, args, n_args, runs, DTSIM_MAX_RUNS);
        if (n_runs < 0) {
            fprintf(stderr, PROG ": validate: more than %d measured traces\n", DTSIM_MAX_RUNS);
            rc = 2;
            goto done;
        }
    }
    if (dt_args_parse(PROG, args, n_args, sargc, sargv) != DT_ARGS_OK) {
        rc = 2;
        goto done;
    }
    if (o.job.help) {
        static const char *const usage[] = {
            "Usage: dtsim run [--flag value | --flag=value]...\n"
            "Simulate one scenario: step time, bubbles, communication and memory per rank.",
            "Usage: dtsim sweep [flags] --sweep KEY=V1,V2,... [--sweep KEY=...] [--csv]\n"
            "Simulate every combination of the swept values (up to 3 keys) and print a table: step time,\n"
            "the pipeline bubble of stage 0 and the largest, the formula (p-1)/(m+p-1), communication per\n"
            "step and the peak memory of any rank.",
            "Usage: dtsim validate --profile FILE [--hw FILE] [--comm FILE] [--skip N] RUN...\n"
            "Predict each measured run (rank 0's trace: run.rank0.json or run.json) from the calibration\n"
            "inputs only, and print measured vs predicted step and phase times with the error."};
        dt_args_print_help(stdout, usage[mode], args, n_args);
        fputs(dtsim_epilogue, stdout);
        goto done;
    }
    if (o.job.version) {
        printf("dtsim %s\n", DT_VERSION_STRING);
        goto done;
    }
    if (mode == DTSIM_RUN) rc = dtsim_cmd_run(&o, args, n_args);
    else if (mode == DTSIM_SWEEP) rc = dtsim_cmd_sweep(&o, args, n_args, sw, n_sw);
    else rc = dtsim_cmd_validate(&o, runs, n_runs);
done:
    free(defaults);
    return rc;
}
