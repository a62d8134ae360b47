/* dtsim.c: the simulator's program. Subcommands:
 *
 *   dtsim run [flags]        simulate one scenario: summary lines, --trace, --summary
 *   dtsim sweep [flags] --sweep KEY=V1,V2,... [--sweep ...] [--csv]
 *                            simulate every combination, print a table
 *   dtsim validate --profile FILE [--hw FILE] [--comm FILE] RUN...
 *                            predict measured runs from calibration inputs
 *   dtsim analyze [--skip N] [--compare] [--csv] TRACE...
 *                            each rank's step time by category, real or
 *                            simulated (dtsim_analyze.c)
 *   dtsim merge RUN.json | --output OUT FILE...
 *                            a multi-rank run's rank files into one trace
 *                            (dtsim_merge.c)
 *   dtsim fp8 --trace A.json [--fp8-* flags] [RUN...]
 *                            FP8 numerics: the values other FP8 settings
 *                            would saturate and flush, learnt from run A;
 *                            with held-out runs, each predicted under its
 *                            own settings against its counts (sim/fp8.c)
 *
 * The scenario's flags are dtrain's (--num-layers, --micro-batch-size,
 * --pipeline-model-parallel-size, ...) plus --data-parallel-size (dtrain
 * infers it from the ranks) and --micro-batches; the shared ones come from
 * one table (job_flags.c). --config FILE reads a scenario from JSON first
 * (a dtsim config file, or a dtrain trace or summary: its config); flags on
 * the command line override it.
 *
 * This file owns the flag tables of the subcommands, run, validate and
 * main; the scenario is built in dtsim_scenario.c, sweep is dtsim_sweep.c,
 * analyze dtsim_analyze.c.
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dts_fp8.h"
#include "dts_run.h"
#include "dts_validate.h"
#include "dtsim_prog.h"

_Static_assert(JOB_FLAGS_SIM_MAX_STAGES == DTS_MAX_STAGES, "--pipeline-model-parallel-size's bound is the simulator's");

/* ranges of dtsim's own flags, as designated initializers */
#define MIN1 .range = DT_ARG_HAS_MIN, .min = 1
#define MIN0 .range = DT_ARG_HAS_MIN, .min = 0
#define IN(lo, hi) .range = DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, .min = (lo), .max = (hi)

static int dtsim_build_args(dtsim_mode mode, dtsim_opts *o, dt_arg *a, int cap)
{
    int n = 0;
#define ADD(...)                        \
    do {                                \
        if (n >= cap) return -1;        \
        a[n++] = (dt_arg){__VA_ARGS__}; \
    } while (0)
/* one of the job flags shared with dtrain (job_flags.c), as dtsim words it */
#define JOB(id)                                      \
    do {                                             \
        if (n >= cap) return -1;                     \
        a[n++] = job_flag(JOB_DTSIM, &o->job, (id)); \
    } while (0)
#define SECTION(heading) ADD(.name = (heading), .kind = DT_ARG_SECTION)
/* the machine's shape, for every subcommand */
#define ADD_NODE_FLAGS()                                                                                            \
    do {                                                                                                            \
        ADD(.name = "--devices-per-node", .kind = DT_ARG_INT, .dest = &o->devices_per_node, MIN1, .metavar = "N",   \
            .help = "ranks on one node, sharing its intra link (e.g. every rank of a one-machine run)",             \
            .default_text = "the hardware file's devices_per_node");                                                \
        ADD(.name = "--cores-per-node", .kind = DT_ARG_INT, .dest = &o->cores_per_node, MIN1, .metavar = "N",       \
            .help = "the node's ranks share N cores for their compute (more ranks than cores: each computing rank " \
                    "runs at N/k of its speed while k compute)",                                                    \
            .default_text = "a core of its own per rank");                                                          \
        ADD(.name = "--colocated", .kind = DT_ARG_STRING, .dest = &o->colocated, .metavar = "FILE,FILE,...",        \
            .help = "a co-located profile: k copies of --profile's run made at once on one node (2..64 files); "    \
                    "fits the compute slowdown of k ranks computing together (the hardware's contention), used "    \
                    "with --cores-per-node",                                                                        \
            .default_text = "none (the hardware file's contention)");                                               \
    } while (0)
    if (mode == DTSIM_ANALYZE) {
        SECTION("Analysis");
        ADD(.name = "--skip", .kind = DT_ARG_INT, .dest = &o->skip, MIN0, .metavar = "N",
            .help = "warm-up steps left out (the range starts at the end of step N-1)");
        ADD(.name = "--compare", .kind = DT_ARG_FLAG, .dest = &o->compare,
            .help = "two runs (e.g. a real run and its simulation): each rank's rows together, with B - A",
            .default_text = "one block of rows per run");
        ADD(.name = "--csv", .kind = DT_ARG_FLAG, .dest = &o->csv, .help = "print the rank rows as CSV",
            .default_text = "aligned text");
        SECTION("Other");
        JOB(JF_HELP);
        return n;
    }
    if (mode == DTSIM_VALIDATE) {
        SECTION("Calibration inputs (not the measured runs)");
        ADD(.name = "--profile", .kind = DT_ARG_STRING, .dest = &o->profile, .metavar = "FILE",
            .help = "single-rank compute profile: a `dtrain --trace` of one process (required)",
            .default_text = "none");
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
    JOB(JF_UNTIE_EMBEDDINGS);
    JOB(JF_TIE_EMBEDDINGS);
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
    JOB(JF_RECOMPUTE_NUM_LAYERS);
    SECTION("Parallelism (ranks = t x c x p x d, plus the parameter servers)");
    JOB(JF_TENSOR_MODEL_PARALLEL_SIZE);
    JOB(JF_NO_VOCAB_PARALLEL);
    JOB(JF_NO_SCATTER_GATHER);
    JOB(JF_SEQUENCE_PARALLEL);
    JOB(JF_CONTEXT_PARALLEL_SIZE);
    JOB(JF_CP_COMM_TYPE);
    JOB(JF_PIPELINE_MODEL_PARALLEL_SIZE);
    ADD(.name = "--data-parallel-size", .kind = DT_ARG_INT, .dest = &o->data_size, IN(1, 1 << 20), .metavar = "D",
        .help = "data-parallel replicas (workers with a parameter server); dtrain infers it from the ranks");
    JOB(JF_PIPELINE_SCHEDULE);
    JOB(JF_PIPELINE_SPLIT);
    JOB(JF_VIRTUAL_PIPELINE_MODEL_PARALLEL_SIZE);
    JOB(JF_NUM_LAYERS_PER_VIRTUAL_PIPELINE_STAGE);
    JOB(JF_ALLREDUCE);
    JOB(JF_NUM_PS_SERVERS);
    JOB(JF_USE_DISTRIBUTED_OPTIMIZER);
    JOB(JF_ZERO_STAGE);
    JOB(JF_ZERO_PREFETCH);
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
    ADD(.name = "--collectives", .kind = DT_ARG_CHOICE, .dest = &o->collectives, .choices = "messages|analytic|auto",
        .help = "price data-parallel collectives step by step as messages, per phase analytically (linear in the "
                "ranks), or auto: messages up to 512 ranks",
        .default_text = "the hardware file's \"collectives\" (auto if absent)");
    if (mode == DTSIM_RUN) {
        ADD(.name = "--strict-memory", .kind = DT_ARG_FLAG, .dest = &o->strict_memory,
            .help = "refuse (exit 2) a scenario whose predicted peak memory on a device exceeds the hardware's "
                    "mem_capacity_bytes",
            .default_text = "a warning on stderr");
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
    o->job.recompute_num_layers = d->recompute_num_layers;
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

/* ---- run --------------------------------------------------------------------- */

/* A predicted peak over the device's memory: one warning line, or with
 * --strict-memory a refusal (exit 2). */
static int dtsim_check_memory(const dtsim_opts *o, const dts_scenario *sc, const dts_summary *s)
{
    int first = -1;
    const int64_t cap = sc->hw.mem_capacity_bytes;
    const int n = dts_summary_over_memory(s, cap, &first);
    if (n == 0) return 0;
    const int per_stage = sc->t * sc->c * sc->d;
    char stage[32] = "";
    if (sc->p > 1 && first < per_stage * sc->p) snprintf(stage, sizeof stage, " (stage %d)", first / per_stage);
    char hw_name[4 * sizeof sc->hw.name];
    fflush(stdout);
    fprintf(stderr,
            PROG ": %s: rank %d%s peaks at %.2f MiB, more than the device's memory (%s: mem_capacity_bytes %lld, "
                 "%.2f MiB); %d of %d ranks over%s\n",
            o->strict_memory ? "--strict-memory" : "warning", first, stage, (double)s->peak_mem[first] / 1048576.0,
            dt_escape(sc->hw.name, hw_name, sizeof hw_name), (long long)cap, (double)cap / 1048576.0, n,
            s->n_ranks, o->strict_memory ? "" : " (--strict-memory refuses it)");
    return o->strict_memory ? 2 : 0;
}

/* Stages whose compute differs by more than 10% (most over least): one warning line. */
static void dtsim_warn_imbalance(const dts_scenario *sc, const dts_summary *s)
{
    int slow = 0, fast = 0;
    const double r = dts_summary_imbalance(s, &slow, &fast);
    if (sc->p < 2 || !(r > 1.10)) return;
    fflush(stdout);
    fprintf(stderr,
            PROG ": warning: the stages' compute differs by %.1f%% (stage %d %.3f ms a step, stage %d %.3f ms): the "
                 "bubble formula assumes equal stages (--pipeline-split moves blocks)\n",
            100.0 * (r - 1.0), slow, s->stage_compute_ns[slow] * 1e-6, fast, s->stage_compute_ns[fast] * 1e-6);
}

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
        free(sc);
        /* the scenario was checked: an invalid one here (too many events, beyond the engine's horizon) is
         * still the input, named with the files it came from; files (the trace being written) and
         * memory are run-time failures */
        if (st == DT_ERR_INVALID || st == DT_ERR_UNSUPPORTED || st == DT_ERR_FORMAT) return dtsim_fail_scenario(st, o);
        fprintf(stderr, PROG ": %s\n", dtsim_last_error());
        return 1;
    }
    dtsim_warn_unmodelled(o, sc);
    rc = dtsim_check_memory(o, sc, &s);
    if (rc != 0) {
        dts_summary_free(&s);
        free(sc);
        return rc;
    }
    dtsim_warn_imbalance(sc, &s);
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
    /* --colocated: its files, split at commas in a copy */
    char *co_buf = NULL;
    const char *co[DTS_HW_MAX_CONTENTION];
    int n_co = 0;
    if (o->colocated && dtsim_colocated_split(o->colocated, co, &n_co, &co_buf) != 0) return 2;
    dts_validate_opts vo = {.profile = o->profile,
                            .colocated = co,
                            .n_colocated = n_co,
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
    free(co_buf);
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
    const int size_values[5] = {o->job.num_layers, o->job.hidden_size, o->job.num_heads, o->job.max_pos,
                                o->job.seq_length};
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
          "       dtsim analyze [--skip N] [--compare] [--csv] TRACE...\n"
          "                                             each rank's step time by category (compute,\n"
          "                                             optimizer, comm exposed, waiting, idle; comm\n"
          "                                             overlapped), of real runs or simulations\n"
          "       dtsim merge RUN.json | --output OUT FILE...\n"
          "                                             a multi-rank run's rank files into one trace\n"
          "       dtsim fp8 --trace A.json [--fp8-* flags] [RUN...]\n"
          "                                             FP8 numerics: saturated and flushed values under\n"
          "                                             other settings, learnt from run A; RUN...: held out\n"
          "       dtsim --help | --version\n"
          "Each subcommand's flags: dtsim SUBCOMMAND --help.\n",
          f);
}

/* ---- fp8 --------------------------------------------------------------------------- */

static const char *const dtsim_fp8_usage =
    "Usage: dtsim fp8 --trace A.json [--fp8-format F] [--fp8-recipe R] [--fp8-margin M]\n"
    "                 [--fp8-amax-history-len H] [--fp8-amax-compute-algo ALGO] [RUN...]\n"
    "FP8 numerics (sim/fp8.c): from a real FP8 run's trace (dtrain --fp8-format ... --trace A.json), the\n"
    "share of each FP8 tensor's values that other settings would saturate (above the format's max after\n"
    "scaling) and flush (to zero), per tensor and in total. The flags default to run A's own settings.\n"
    "RUN...: held-out real runs (their traces or --summary files): each is predicted from A under its own\n"
    "settings (its configuration's fp8_* keys) and printed beside its measured counts, with the error.";

/* "+12.3%" or "(measured 0)" */
static const char *dtsim_fp8_err(double pred, double real, char *buf, size_t n)
{
    if (real > 0) snprintf(buf, n, "%+.1f%%", 100.0 * (pred - real) / real);
    else snprintf(buf, n, "measured 0");
    return buf;
}

static int dtsim_cmd_fp8(int argc, char **argv)
{
    job_opts job;
    memset(&job, 0, sizeof job);
    job.fp8_margin = -1;
    const char *trace = NULL;
    double top_beta = 0;
    dt_arg a[18];
    int n = 0;
    a[n++] = (dt_arg){.name = "Input", .kind = DT_ARG_SECTION};
    a[n++] = (dt_arg){.name = "--trace",
                      .kind = DT_ARG_STRING,
                      .dest = &trace,
                      .metavar = "FILE",
                      .help = "the real FP8 run to learn from: its trace (dtrain --fp8-format ... --trace; required)",
                      .default_text = "none"};
    a[n++] = (dt_arg){.name = "Settings to predict (without RUN...)", .kind = DT_ARG_SECTION};
    const job_flag_id ids[5] = {JF_FP8_FORMAT, JF_FP8_RECIPE, JF_FP8_MARGIN, JF_FP8_AMAX_HISTORY_LEN,
                                JF_FP8_AMAX_COMPUTE_ALGO};
    for (int i = 0; i < 5; i++) {
        a[n] = job_flag(JOB_DTSIM, &job, ids[i]);
        a[n++].default_text = "run A's";
    }
    a[n++] = (dt_arg){.name = "Model", .kind = DT_ARG_SECTION};
    a[n++] = (dt_arg){.name = "--top-beta",
                      .kind = DT_ARG_DOUBLE,
                      .dest = &top_beta,
                      .range = DT_ARG_HAS_MIN | DT_ARG_HAS_MAX,
                      .min = 1,
                      .max = DTS_FP8_BETA_MAX,
                      .metavar = "B",
                      .help = "the top binade's shape for every tensor: B values c p0 u^B within u < 1 of the amax "
                              "(1: log-uniform)",
                      .default_text = "fitted to run A's saturated counts"};
    a[n++] = (dt_arg){.name = "Other", .kind = DT_ARG_SECTION};
    a[n++] = job_flag(JOB_DTSIM, &job, JF_HELP);
    const char *runs[DTSIM_MAX_RUNS];
    const int n_runs = dtsim_take_positionals(&argc, argv, a, n, runs, DTSIM_MAX_RUNS);
    if (n_runs < 0) {
        fprintf(stderr, PROG ": fp8: more than %d held-out runs\n", DTSIM_MAX_RUNS);
        return 2;
    }
    if (dt_args_parse(PROG, a, n, argc, argv) != DT_ARGS_OK) return 2;
    if (job.help) {
        dt_args_print_help(stdout, dtsim_fp8_usage, a, n);
        fputs(dtsim_epilogue, stdout);
        return 0;
    }
    if (!trace) {
        fprintf(stderr, PROG ": fp8: --trace: expected the real FP8 run's trace to learn from (dtrain --fp8-format "
                             "... --trace A.json)\n");
        return 2;
    }
    const char *given = NULL;
    for (int i = 0; i < n && !given; i++)
        if (a[i].given && strncmp(a[i].name, "--fp8-", 6) == 0) given = a[i].name;
    if (given && n_runs > 0) {
        fprintf(stderr,
                PROG ": fp8: %s: a held-out run is predicted under its own settings (its configuration); "
                     "give either the settings or runs\n",
                given);
        return 2;
    }
    /* every input read and checked before anything is printed */
    dt_trace *tr = NULL;
    dt_status st = dt_trace_read(trace, &tr);
    dts_fp8_run run;
    memset(&run, 0, sizeof run);
    if (st == DT_OK) st = dts_fp8_run_read(tr, trace, &run);
    dt_trace_free(tr);
    if (st == DT_OK && top_beta > 0) st = dts_fp8_set_beta(&run, top_beta);
    dts_fp8_measured *held = calloc((size_t)(n_runs > 0 ? n_runs : 1), sizeof *held);
    if (!held && st == DT_OK) st = DT_FAIL(DT_ERR_NOMEM, "fp8: out of memory for %d runs", n_runs);
    for (int r = 0; st == DT_OK && r < n_runs; r++) st = dts_fp8_measured_read(runs[r], &held[r]);
    if (st != DT_OK) {
        for (int r = 0; held && r < n_runs; r++) dts_fp8_measured_free(&held[r]);
        free(held);
        dts_fp8_run_free(&run);
        return dtsim_fail(st);
    }
    char text[128], e1[32], e2[32], esc[1024];
    int fitted = 0;
    for (int i = 0; i < run.n; i++) fitted += run.t[i].beta_steps > 0;
    printf("run A %s: %s; %d blocks, %lld steps from iteration %lld\n", dt_escape(trace, esc, sizeof esc),
           dts_fp8_settings_text(&run.set, text, sizeof text), run.layers, (long long)run.steps,
           (long long)run.first_iter);
    if (top_beta > 0) printf("top binade's shape: beta %.2f for every tensor (--top-beta)\n", top_beta);
    else
        printf("top binade's shape: beta fitted to %d tensors' saturating steps, pooled %.2f (%d steps) for the "
               "rest\n",
               fitted, run.beta_pooled, run.beta_pooled_steps);
    if (run.first_iter > 0) {
        fflush(stdout);
        fprintf(stderr,
                PROG ": warning: %s starts at iteration %lld (a resumed run): its delayed scales before "
                     "are unknown, replayed as a fresh start\n",
                dt_escape(trace, esc, sizeof esc), (long long)run.first_iter);
    }
    int rc = 0;
    if (n_runs == 0) {
        dts_fp8_settings s = run.set;
        if (job.fp8_format) st = dt_fp8_mode_parse(job.fp8_format, &s.mode);
        if (st == DT_OK && job.fp8_recipe) st = dt_fp8_recipe_parse(job.fp8_recipe, &s.recipe);
        if (st == DT_OK && job.fp8_amax_algo) st = dt_fp8_amax_algo_parse(job.fp8_amax_algo, &s.algo);
        if (job.fp8_margin >= 0) s.margin = job.fp8_margin;
        if (job.fp8_history_len > 0) s.history_len = job.fp8_history_len;
        dts_fp8_prediction p;
        memset(&p, 0, sizeof p);
        if (st == DT_OK) st = dts_fp8_predict(&run, &s, &p);
        if (st != DT_OK) {
            dts_fp8_run_free(&run);
            return dtsim_fail(st);
        }
        dts_fp8_measured own;
        const int same = !given || (s.mode == run.set.mode && s.recipe == run.set.recipe && s.algo == run.set.algo &&
                                    s.margin == run.set.margin && s.history_len == run.set.history_len);
        if (same && dts_fp8_measured_of_run(&run, &own) == DT_OK) {
            dts_fp8_print(stdout, &run, &p, &own); /* the run's own settings: its counts beside */
            dts_fp8_measured_free(&own);
        } else {
            dts_fp8_print(stdout, &run, &p, NULL);
        }
        if (p.scales_compared > 0)
            printf("delayed scales recomputed from the amaxes: %lld of %lld equal to the run's\n",
                   (long long)p.scales_equal, (long long)p.scales_compared);
        dts_fp8_prediction_free(&p);
    }
    for (int r = 0; r < n_runs; r++) {
        const dts_fp8_measured m = held[r];
        dts_fp8_prediction p;
        st = dts_fp8_predict(&run, &m.set, &p);
        if (st != DT_OK) {
            rc = dtsim_fail(st);
            break;
        }
        printf("\nheld-out run %s: %s, %lld steps\n", dt_escape(runs[r], esc, sizeof esc),
               dts_fp8_settings_text(&m.set, text, sizeof text), (long long)m.steps);
        if (m.n != run.n || (m.steps > 0 && m.steps != run.steps)) {
            fflush(stdout);
            fprintf(stderr,
                    PROG ": warning: %s has %d tensors and %lld steps, run A %d and %lld: the fractions are "
                         "compared\n",
                    dt_escape(runs[r], esc, sizeof esc), m.n, (long long)m.steps, run.n, (long long)run.steps);
        }
        dts_fp8_print(stdout, &run, &p, &m);
        const double pv = p.total.values, mv = m.total.values;
        const double ps = pv > 0 ? p.total.saturated / pv : 0, ms = mv > 0 ? m.total.saturated / mv : 0;
        const double pf = pv > 0 ? p.total.flushed / pv : 0, mf = mv > 0 ? m.total.flushed / mv : 0;
        printf("fp8 %s: saturated fraction measured %.3e predicted %.3e (%s), flushed fraction measured %.3e "
               "predicted %.3e (%s)\n",
               dt_escape(runs[r], esc, sizeof esc), ms, ps, dtsim_fp8_err(ps, ms, e1, sizeof e1), mf, pf,
               dtsim_fp8_err(pf, mf, e2, sizeof e2));
        double med_f, max_f, med_s, max_s;
        const int nf = dts_fp8_agreement(&p, &m, 1, 100, &med_f, &max_f);
        const int ns = dts_fp8_agreement(&p, &m, 0, 100, &med_s, &max_s);
        printf("fp8 %s: per tensor, predicted/measured (+1 each) within a factor of: flushed %.2f at the median, %.2f "
               "at most (%d tensors with >= 100 either side); saturated %.2f, %.2f (%d with >= 100)\n",
               dt_escape(runs[r], esc, sizeof esc), med_f, max_f, nf, med_s, max_s, ns);
        dts_fp8_prediction_free(&p);
    }
    fflush(stdout);
    for (int r = 0; r < n_runs; r++) dts_fp8_measured_free(&held[r]);
    free(held);
    dts_fp8_run_free(&run);
    return rc;
}

int main(int argc, char **argv)
{
    /* a file size limit (ulimit -f) makes a write fail with EFBIG, reported, instead of killing silently */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        fprintf(stderr,
                PROG ": expected a subcommand: run, sweep, validate, analyze, merge or fp8 (see dtsim --help)\n");
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "merge")) return dtsim_cmd_merge(argc - 1, argv + 1); /* its own flags */
    if (!strcmp(cmd, "fp8")) return dtsim_cmd_fp8(argc - 1, argv + 1);     /* its own flags */
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
    else if (!strcmp(cmd, "analyze")) mode = DTSIM_ANALYZE;
    else {
        fprintf(stderr,
                PROG
                ": unknown subcommand '%s' (expected run, sweep, validate, analyze, merge or fp8; see dtsim --help)\n",
                cmd);
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
    if (mode == DTSIM_RUN || mode == DTSIM_SWEEP) dtsim_default_texts(&o, args, n_args, def_text);
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
    if (mode == DTSIM_VALIDATE || mode == DTSIM_ANALYZE) {
        n_runs = dtsim_take_positionals(&sargc, sargv, args, n_args, runs, DTSIM_MAX_RUNS);
        if (n_runs < 0) {
            fprintf(stderr, PROG ": %s: more than %d traces\n", cmd, DTSIM_MAX_RUNS);
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
            "inputs only, and print measured vs predicted step and phase times with the error.",
            "Usage: dtsim analyze [--skip N] [--compare] [--csv] TRACE...\n"
            "Where each rank's step time goes, in the manner of Holistic Trace Analysis: per rank, ms per step and\n"
            "% of the step in compute (forward, backward, recompute), optimizer, comm exposed (communication with no\n"
            "compute or optimizer under it), waiting (a pipeline stage's step window with nothing else: receives,\n"
            "gaps) and idle (the rest), which sum to the step; then comm overlapped (communication under compute or\n"
            "the optimizer, and its share of all communication) and a stage's bubble as `dtbench bubbles` prints it.\n"
            "TRACE: a dtsim trace (every rank), a real rank's file, a real run's name (run.json for run.rank0.json,\n"
            "run.rank1.json, ...), or consecutive rank files of one run. docs/breakdown.md has the definitions."};
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
    else if (mode == DTSIM_VALIDATE) rc = dtsim_cmd_validate(&o, runs, n_runs);
    else rc = dtsim_cmd_analyze(&o, runs, n_runs);
done:
    free(defaults);
    return rc;
}
