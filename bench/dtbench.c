/* dtbench.c: benchmarks that print a figure and its ratio to a reference
 * measured in the same run.
 *
 *   dtbench gemm  [--threads N]   cblas_sgemm peak (GFLOP/s) on square sizes
 *   dtbench gemm  --device cuda   cuBLAS peak through be->gemm on 4096^3 and
 *       8192^3: exact FP32, TF32 allowed, and bf16 / fp16 inputs with FP32
 *       accumulation (be->set_gemm_inputs) (GFLOP/s)
 *   dtbench gelu  [--device cuda] [--n N] [--iters R]
 *       FP32 GELU (the table op) against the f16 / bf16 half2 kernel
 *       (dt__cuda_gelu_forward_half) on N elements: elements/s, GB/s (bytes
 *       read + written), half / FP32 in elements/s (goal >= 1.8) and each
 *       kernel as a fraction of the D2D copy bandwidth (be->copy of the same
 *       bytes) measured in the same run (goal >= 0.80 for the half kernels)
 *   dtbench pipeline [--pipeline-model-parallel-size P] [--num-layers L]
 *                 [--hidden-size C] [--pipeline-split N,N] [--steps S]
 *                 [--micro-batch-size B] [--seq-length T] [--trace-dir DIR]
 *       under mpirun: every pipeline schedule (gpipe, 1f1b, pipedream,
 *       pipedream-vsync, interleaved-1f1b, zb-h1, zb-v) for m = 2, 4, 8,
 *       16; step time, measured bubble per stage (dt_trace_stats.h)
 *       against the schedule's ideal (dt_schedule_bubble_ideal_chunks),
 *       peak activation bytes and weight versions per stage
 *   dtbench fp8 [--threads N] [--model small] [--micro-batch-size 8] [--seq-length 256] [--steps 6] [--device cuda]
 *       bf16 and FP8 (hybrid, each recipe) training of the same model:
 *       tokens/s and its ratio to bf16's in the same run, the final loss,
 *       the share of values saturated and flushed (bench_fp8.c)
 *   dtbench interop [--model gpt2-124m] [--repeats 3] [--threads 1] [--tokenizer DIR --data FILE]
 *       a model's --export-hf write and --load-hf read against its seeded
 *       initialisation; BPE encoding against the token cache (bench_interop.c)
 *   dtbench longseq (under mpirun -np 2 or 4)
 *       tensor parallelism, with sequence parallelism, and context
 *       parallelism (p2p, a2a) on the n ranks for T = 256, 1024, 4096:
 *       rank 0's peak activation bytes against dtrain's formula, tokens/s
 *       against tensor parallelism's in the same run (bench_longseq.c)
 *   dtbench simval, dtbench simspeed: the simulator's validation matrix
 *       (bench/simval.c) and its speed and memory (bench/simspeed.c)
 *   dtbench bubbles [--skip N] TRACE...
 *       one line per dtrain trace file: its stage's mean bubble and more
 *       (per rank in a file of several: a merged trace, a dtsim trace)
 *   dtbench flows TRACE...
 *       one line per trace file: its flow events, how they pair, the
 *       smallest end - start against the clock alignment's error
 *   dtbench train [--threads N] [--model small] [--micro-batch-size 16]
 *                 [--seq-length T] [--steps S] [--warmup W]
 *                 [--device cpu|cuda] [--fp32|--bf16|--fp16]
 *       trains the model (forward, backward, AdamW step) on random tokens and
 *       prints tokens/s, model FLOPs per token (6N + 12LCT), achieved
 *       GFLOP/s, the GEMM peak measured in the same run (on the CPU sgemm
 *       at the same thread count for FP32, be->gemm's bf16 peak for bf16;
 *       on the GPU cuBLAS through be->gemm in the mode the run's GEMMs use:
 *       FP32, or bf16 / fp16 inputs with --bf16 / --fp16), and their ratio
 *       (MFU against this machine's peak). On the CPU without a precision
 *       flag: an FP32 run, then a bf16 run (bf16_ lines), the ratio of
 *       their tokens/s (bf16_over_fp32) and oneDNN's ISA (bf16_engine).
 *
 * The GPU commands go through the dt_backend table and cuda/dt_cuda.h only
 * (no #ifdef): without CUDA or without a device they print one line naming
 * the problem and exit 1, or 77 with --skip-no-device (for scripts).
 *
 * This file owns the command line (the flag table, the checks between
 * flags and command), the registry of commands and the helpers every
 * benchmark uses; each family of benchmarks has its file (dtbench.h). */

#include <cblas.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "dt_file.h"
#include "dtbench.h"

void dtbench_die(const char *what)
{
    char why[4 * 512 + 1]; /* escaped: a message may quote an input file (dt_escape) */
    dt_escape(dt_last_error(), why, sizeof why);
    if (why[0]) fprintf(stderr, "dtbench: %s: %s\n", what, why);
    else fprintf(stderr, "dtbench: %s\n", what); /* a failed malloc here: no library message */
    dt_args_exit_failed(1);                      /* not exit(): see args.h */
}

/* Exit status when CUDA or a device is missing: 1, or 77 (skipped) with
 * --skip-no-device. */
int dtbench_no_device_status = 1;

/* The CUDA backend, or one line naming the problem and exit: 1 (77 with
 * --skip-no-device) when the build has no CUDA or no device is usable
 * (DT_ERR_UNSUPPORTED), 1 on any other failure. */
dt_backend *dtbench_gpu_backend(const char *cmd)
{
    dt_backend *be;
    dt_status st = dt_backend_create("cuda", 0, &be);
    if (st != DT_OK) {
        fprintf(stderr, "dtbench %s: %s\n", cmd, dt_last_error());
        exit(st == DT_ERR_UNSUPPORTED ? dtbench_no_device_status : 1);
    }
    return be;
}

void dtbench_check(dt_status st, const char *what)
{
    if (st != DT_OK) dtbench_die(what);
}

/* A figure against its goal, on one line ending in PASS or BELOW (what
 * tests/gpu/device-check.sh collects). */
void dtbench_goal_line(const char *key, double value, double goal, const char *note)
{
    printf("%-28s %8.3f   goal >= %-5g %-5s%s%s\n", key, value, goal, value >= goal ? "PASS" : "BELOW",
           note ? "  " : "", note ? note : "");
}

/* The flags of the commands that share dtbench's table. */
typedef struct dtbench_flags {
    int threads, B, T, steps, warmup, help, ar_iters, repeats;
    int fp16, bf16, fp32, skip_no_device;
    int pp_size, pp_layers, pp_hidden;
    int tp_size; /* zero: t of the grid */
    const char *pp_split, *pp_keep, *ar_json;
    int64_t ar_chunk, ar_min, ar_max, gelu_n;
    const char *model, *device;
    int on_gpu;
    dt_arg *args;
    int n_args;
} dtbench_flags;

static int dtbench_given(const dtbench_flags *f, const char *flag) { return dt_args_given(f->args, f->n_args, flag); }

/* ---- the commands of the shared table, as the registry calls them -------- */

static int dtbench_run_gemm(const dtbench_flags *f)
{
    return f->on_gpu ? dtbench_cmd_gemm_gpu() : dtbench_cmd_gemm(f->threads);
}

static int dtbench_run_gelu(const dtbench_flags *f)
{
    if (f->device && !f->on_gpu) {
        fprintf(stderr, "dtbench: gelu --device cpu: the half2 GELU kernel exists on cuda only\n");
        return 2;
    }
    return dtbench_cmd_gelu(f->gelu_n, f->ar_iters);
}

static int dtbench_run_train(const dtbench_flags *f)
{
    /* on the CPU, no precision flag: both, one after the other */
    const int compare = !f->on_gpu && !f->fp16 && !f->bf16 && !f->fp32;
    return dtbench_cmd_train(f->on_gpu ? "cuda" : "cpu", f->threads, f->model, f->B, f->T, f->steps, f->warmup,
                             f->fp16   ? DT_F16
                             : f->bf16 ? DT_BF16
                                       : DT_F32,
                             compare);
}

static int dtbench_run_recompute(const dtbench_flags *f)
{
    return dtbench_cmd_recompute(f->threads, f->model, f->B, f->T, f->steps, f->warmup);
}

static int dtbench_run_amp(const dtbench_flags *f)
{
    return dtbench_cmd_amp(f->threads, dtbench_given(f, "--steps") ? f->steps : 1000);
}

static int dtbench_run_largebatch(const dtbench_flags *f)
{
    return dtbench_cmd_largebatch(f->threads, dtbench_given(f, "--steps") ? f->steps : 1600,
                                  dtbench_given(f, "--micro-batch-size") ? f->B : 64);
}

static int dtbench_run_allreduce(const dtbench_flags *f)
{
    return dtbench_cmd_allreduce(f->ar_chunk, f->ar_min, f->ar_max, f->ar_iters, f->ar_json);
}

static int dtbench_run_tp(const dtbench_flags *f)
{
    return dtbench_cmd_tp(f->threads, dtbench_given(f, "--micro-batch-size") ? f->B : 4,
                          dtbench_given(f, "--seq-length") && f->T > 0 ? f->T : 64, 4, 128,
                          dtbench_given(f, "--steps") ? f->steps : 5);
}

static int dtbench_run_pipeline(const dtbench_flags *f)
{
    int split[64] = {0};
    if (f->pp_split) {
        int64_t v[64];
        int count = 0;
        if (dt_args_parse_int_list("dtbench", "--pipeline-split", f->pp_split, DT_ARG_HAS_MIN, 1, 0, v, 64, &count) !=
            DT_ARGS_OK)
            return 2;
        for (int i = 0; i < count; i++) split[i] = (int)v[i];
    }
    return dtbench_cmd_pipeline(f->pp_size, f->threads, dtbench_given(f, "--micro-batch-size") ? f->B : 4,
                                dtbench_given(f, "--seq-length") && f->T > 0 ? f->T : 64, f->pp_layers, f->pp_hidden,
                                split, dtbench_given(f, "--steps") ? f->steps : 6, f->pp_keep);
}

static int dtbench_run_fp8(const dtbench_flags *f)
{
    return dtbench_cmd_fp8(f->on_gpu ? "cuda" : "cpu", f->threads, dtbench_given(f, "--model") ? f->model : "small",
                           dtbench_given(f, "--micro-batch-size") ? f->B : 8,
                           dtbench_given(f, "--seq-length") ? f->T : 256, dtbench_given(f, "--steps") ? f->steps : 6);
}

static int dtbench_run_longseq(const dtbench_flags *f)
{
    return dtbench_cmd_longseq(f->threads, dtbench_given(f, "--steps") ? f->steps : 3);
}

static int dtbench_run_zero(const dtbench_flags *f)
{
    return dtbench_cmd_zero(f->threads, dtbench_given(f, "--micro-batch-size") ? f->B : 4,
                            dtbench_given(f, "--seq-length") && f->T > 0 ? f->T : 64, 4, 128,
                            dtbench_given(f, "--steps") ? f->steps : 8, dtbench_given(f, "--repeats") ? f->repeats : 3,
                            f->bf16   ? DT_BF16
                            : f->fp16 ? DT_F16
                                      : DT_F32,
                            f->tp_size, f->pp_size);
}

static int dtbench_run_compose(const dtbench_flags *f)
{
    return dtbench_cmd_compose(f->repeats, dtbench_given(f, "--steps") ? f->steps : 12, f->threads);
}

/* ---- the registry ---------------------------------------------------------- */

/* Commands with their own parser (file arguments, their own flags): argv
 * from the command on (bubbles: from the program, as it always had). */
static int dtbench_run_threads(const dtbench_flags *f)
{
    return dtbench_cmd_threads(dtbench_given(f, "--model") ? f->model : NULL,
                               dtbench_given(f, "--steps") ? f->steps : 0, f->repeats);
}

static int dtbench_run_bubbles(int argc, char **argv) { return dtbench_cmd_bubbles(argc + 1, argv - 1); }
static int dtbench_run_flows(int argc, char **argv) { return dtbench_cmd_flows(argc + 1, argv - 1); }

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} dtbench_own_parser[] = {
    {"bubbles", dtbench_run_bubbles},
    {"flows", dtbench_run_flows},
    {"simval", dt_bench_simval},     /* bench/simval.c */
    {"simspeed", dt_bench_simspeed}, /* bench/simspeed.c */
    {"viz", dt_bench_viz},           /* bench/vizbench.c */
    {"interop", dtbench_cmd_interop}, /* bench/bench_interop.c */
};

/* Commands of the shared flag table. */
static const struct {
    const char *name;
    int (*run)(const dtbench_flags *f);
} dtbench_commands[] = {
    {"gelu", dtbench_run_gelu},           {"gemm", dtbench_run_gemm},       {"train", dtbench_run_train},
    {"recompute", dtbench_run_recompute}, {"amp", dtbench_run_amp},         {"largebatch", dtbench_run_largebatch},
    {"allreduce", dtbench_run_allreduce}, {"tp", dtbench_run_tp},           {"pipeline", dtbench_run_pipeline},
    {"compose", dtbench_run_compose},     {"threads", dtbench_run_threads}, {"zero", dtbench_run_zero},
    {"longseq", dtbench_run_longseq},
    {"fp8", dtbench_run_fp8},
};

#define DTBENCH_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The checks between flags and the command, in the order they always ran:
 * 0, or 2 after the message. */
static int dtbench_check_flags(const dtbench_flags *f, const char *cmd)
{
    if (f->fp16 + f->bf16 + f->fp32 > 1) {
        fprintf(stderr, "dtbench: --fp32, --fp16 and --bf16: choose one\n");
        return 2;
    }
    if (f->fp32 && strcmp(cmd, "train") != 0) {
        fprintf(stderr, "dtbench: --fp32: only train takes it (the other commands run FP32 unless told)\n");
        return 2;
    }
    if (f->on_gpu && strcmp(cmd, "gemm") != 0 && strcmp(cmd, "gelu") != 0 && strcmp(cmd, "train") != 0 &&
        strcmp(cmd, "fp8") != 0) {
        fprintf(stderr,
                "dtbench: --device cuda: '%s' runs on the CPU only (the GPU commands are gemm, gelu, train and "
                "fp8)\n",
                cmd);
        return 2;
    }
    if ((f->fp16 || f->bf16) && strcmp(cmd, "train") != 0 && strcmp(cmd, "zero") != 0) {
        fprintf(stderr, "dtbench: --%s: only train and zero take a precision\n", f->fp16 ? "fp16" : "bf16");
        return 2;
    }
    return 0;
}

static int dtbench_main(int argc, char **argv)
{
    /* a file size limit (ulimit -f) makes a write fail with EFBIG, reported, instead of killing silently */
    signal(SIGXFSZ, SIG_IGN);
    dtbench_flags f = {.threads = 1,
                       .B = 16,
                       .T = 0,
                       .steps = 5,
                       .warmup = 1,
                       .repeats = 3,
                       .pp_layers = 8,
                       .pp_hidden = 128,
                       .ar_chunk = 1024 * 1024,
                       .ar_min = 4 * 1024,
                       .ar_max = 64 * 1024 * 1024,
                       .gelu_n = (int64_t)64 << 20,
                       .model = "small"};
    dt_arg args[] = {
        {"--device", DT_ARG_CHOICE, &f.device, 0, 0, 0, "cpu|cuda", NULL,
         "gemm, train: backend (gelu runs on cuda only)", "cpu; gelu: cuda", 0},
        {"--skip-no-device", DT_ARG_FLAG, &f.skip_no_device, 0, 0, 0, NULL, NULL,
         "exit 77 instead of 1 when CUDA or a CUDA device is missing (for scripts)", "exit 1", 0},
        {"--threads", DT_ARG_INT, &f.threads, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 1024, NULL, NULL,
         "CPU threads (the sgemm peak is measured at the same count)", NULL, 0},
        {"--model", DT_ARG_CHOICE, &f.model, 0, 0, 0, "tiny|small|gpt2-124m", NULL, "train: model preset", NULL, 0},
        {"--micro-batch-size", DT_ARG_INT, &f.B, DT_ARG_HAS_MIN, 1, 0, NULL, NULL, "train: sequences per step", NULL,
         0},
        {"--seq-length", DT_ARG_INT, &f.T, DT_ARG_HAS_MIN, 0, 0, NULL, NULL,
         "train: sequence length (0: the model's context)", NULL, 0},
        {"--steps", DT_ARG_INT, &f.steps, DT_ARG_HAS_MIN, 1, 0, NULL, NULL, "train: timed steps", NULL, 0},
        {"--warmup", DT_ARG_INT, &f.warmup, DT_ARG_HAS_MIN, 0, 0, NULL, NULL, "train: untimed warm-up steps", NULL, 0},
        {"--fp16", DT_ARG_FLAG, &f.fp16, 0, 0, 0, NULL, NULL,
         "train: fp16 mixed precision (static loss scale 1024; on cuda: MFU against the fp16-input GEMM peak)", "FP32",
         0},
        {"--bf16", DT_ARG_FLAG, &f.bf16, 0, 0, 0, NULL, NULL,
         "train: bf16 mixed precision only (MFU against the bf16-input GEMM peak)",
         "cpu: an fp32 run, then a bf16 run; cuda: FP32", 0},
        {"--fp32", DT_ARG_FLAG, &f.fp32, 0, 0, 0, NULL, NULL, "train: the FP32 run only",
         "cpu: an fp32 run, then a bf16 run; cuda: FP32", 0},
        {"--n", DT_ARG_INT64, &f.gelu_n, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, (double)((int64_t)1 << 32), NULL, NULL,
         "gelu: elements", NULL, 0},
        {"--allreduce-chunk-bytes", DT_ARG_INT64, &f.ar_chunk, DT_ARG_HAS_MIN, 0, 0, NULL, NULL,
         "allreduce: ring chunk size in bytes (0: one message per segment; 1 MiB measured best at -np 2)", NULL, 0},
        {"--min-bytes", DT_ARG_INT64, &f.ar_min, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 4, 1 << 30, NULL, NULL,
         "allreduce: smallest buffer", NULL, 0},
        {"--max-bytes", DT_ARG_INT64, &f.ar_max, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 4, 1 << 30, NULL, NULL,
         "allreduce: largest buffer (sizes double from --min-bytes)", NULL, 0},
        {"--json", DT_ARG_STRING, &f.ar_json, 0, 0, 0, NULL, "FILE",
         "allreduce: also write rank 0's table to FILE as JSON (format dtbench-allreduce, for the simulator's fit)",
         "none", 0},
        {"--iters", DT_ARG_INT, &f.ar_iters, DT_ARG_HAS_MIN, 0, 0, NULL, NULL,
         "allreduce: timed calls per size and algorithm (0: 1 GiB / size, 10 to 5000); gelu: launches per trial "
         "(0: about 0.1 s)",
         NULL, 0},
        {"--pipeline-model-parallel-size", DT_ARG_INT, &f.pp_size, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 0, 64, NULL, NULL,
         "pipeline: stages p (0: every rank is a stage); zero: p of the grid (0: 1)", NULL, 0},
        {"--tensor-model-parallel-size", DT_ARG_INT, &f.tp_size, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 0, 64, NULL, NULL,
         "zero: t of the grid (0: 1)", NULL, 0},
        {"--num-layers", DT_ARG_INT, &f.pp_layers, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 1024, NULL, NULL,
         "pipeline: transformer blocks", NULL, 0},
        {"--hidden-size", DT_ARG_INT, &f.pp_hidden, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 4, 65536, NULL, NULL,
         "pipeline: model width (4 heads)", NULL, 0},
        {"--pipeline-split", DT_ARG_STRING, &f.pp_split, 0, 0, 0, NULL, "N,N,...", "pipeline: blocks per stage", "even",
         0},
        {"--trace-dir", DT_ARG_STRING, &f.pp_keep, 0, 0, 0, NULL, "DIR",
         "pipeline: keep each run's traces in DIR (SCHEDULE-mM.rankR.json, for Perfetto)", "temporary, removed", 0},
        {"--repeats", DT_ARG_INT, &f.repeats, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 64, NULL, NULL,
         "compose, threads, zero: runs per cell (the median and range are printed)", NULL, 0},
        {"--help", DT_ARG_FLAG, &f.help, 0, 0, 0, NULL, NULL, "print this help and exit", NULL, 0},
    };
    const int n_args = (int)(sizeof args / sizeof args[0]);
    const char *usage =
        "dtbench gemm|gelu|train|recompute|largebatch|amp|allreduce|pipeline|tp|zero|longseq|fp8|compose|threads [--flag "
        "value]...\n"
        "       dtbench bubbles [--skip N] TRACE...\n"
        "       dtbench flows TRACE...\n"
        "       dtbench interop [--model NAME] [--repeats N] [--tokenizer DIR --data FILE]\n"
        "  gemm       cblas_sgemm peak (GFLOP/s) at --threads; --device cuda: cuBLAS FP32, TF32, bf16 and "
        "fp16 peaks through the backend\n"
        "  gelu       GPU: FP32 GELU vs the f16/bf16 half2 kernel, elements/s, GB/s and fraction of the "
        "D2D copy bandwidth (goals: half >= 1.8x FP32, >= 80% of copy)\n"
        "  train      tokens/s, achieved GFLOP/s and MFU against the GEMM peak measured in the same run "
        "(--device cuda, --bf16, --fp16)\n"
        "  recompute  peak activation bytes and step time per recomputation granularity / K\n"
        "  largebatch base batch vs 8x batch with linear-scaled AdamW, LARS and LAMB (--steps: base "
        "iterations)\n"
        "  amp        fraction of gradients that underflow in fp16 with and without loss scaling "
        "(--steps: FP32 training steps before the second measurement)\n"
        "  allreduce  nccl-tests table of ring, tree, naive and mpi allreduce (run under mpirun)\n"
        "  pipeline   every pipeline schedule (gpipe, 1f1b, pipedream, pipedream-vsync, interleaved-1f1b, zb-h1, "
        "zb-v) for m = 2, 4, 8, 16 (run under mpirun -np p): step time, bubble per stage against the schedule's "
        "ideal ((p-1)/(m+p-1) for gpipe and 1f1b), peak activation bytes and weight versions per stage; a "
        "schedule and m the trainer refuses is a line saying why (--steps: steps per run, default 6; "
        "--micro-batch-size default 4, --seq-length 64)\n"
        "  tp         tensor parallelism for t = 1, 2, 4 (run under mpirun -np 4): f/g allreduces and "
        "their bytes per step against the formula, their time, the step time\n"
        "  zero       ZeRO stages 0-3 (run under mpirun -np 2 or 4): bytes of weights, gradients and optimizer "
        "state per rank against the paper's formulas, buffers moved per step, step time against stage 0's in the "
        "same round (--repeats rounds, default 3; --steps default 8; --bf16; on a t x d x p grid with "
        "--tensor-model-parallel-size and --pipeline-model-parallel-size: rank 0's stage over its d ranks)\n"
        "  fp8        bf16 against FP8 training (hybrid; delayed, tensorwise, blockwise) of the same model: tokens/s, "
        "ratio, final loss, saturated and flushed shares\n"
        "  interop    --export-hf and --load-hf of a model (gpt2-124m) against its seeded initialisation; with "
        "--tokenizer DIR --data FILE, BPE encoding against the token cache\n"
        "  longseq    long sequences (run under mpirun -np 2 or 4): tensor parallelism, with sequence parallelism, "
        "context parallelism p2p and a2a on the n ranks, T = 256, 1024, 4096: rank 0's peak activation bytes against "
        "dtrain's formula, tokens/s against tensor parallelism's (--steps default 3)\n"
        "  compose    the composition matrix (run under mpirun -np 2): layout {single, dp, 1f1b, tp} x "
        "{fp32, bf16, fp16} x recompute {none, selective, full}: tokens/s (median and range of --repeats runs, "
        "default 3; --steps default 12) and peak saved activations, each against the layout's fp32/none cell\n"
        "  threads    the automatic thread count (--threads 0) against every fixed one, quiet and beside one "
        "busy process, on tiny and small (--model: one of them; --steps default 400 and 60; goals: busy >= 0.90 "
        "of the best fixed count, quiet >= 0.97 of one thread per core)\n"
        "  simval     the simulator's validation lab: 37 real runs (33 without root's emulated cluster), each "
        "measured 3 times, predicted from calibration runs only (profiles, co-located profiles, link fits; goal: "
        "mean |error| < 3%, none over 8%)\n"
        "  simspeed   simulator events/s, the wall time of a 1024-device job and the wall time and peak memory of a "
        "102400-device one (goals: > 10 M/s, < 10 s, < 2 GB; --scale: the table from 1024 to 102400 devices)\n"
        "  viz        ms per frame of dtviz's timeline, headless 1400x800, on a ~100k-event simulated "
        "trace (--events N, --frames K; goal: 60 frames/s)\n"
        "  bubbles    one line per trace file (dtrain --trace under a pipeline; per rank in a merged or dtsim "
        "trace): its stage's mean bubble over the steps >= --skip (default 1)\n"
        "  flows      one line per trace file (a merged dtrain --trace, a dtsim trace): its flow events, how they "
        "pair (one send and one receive per id, on two ranks), the smallest receive end - send start and the "
        "clock alignment's tolerance; exit 1 when a flow is unpaired or early";
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        dt_args_print_help(argc < 2 ? stderr : stdout, usage, args, n_args);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    for (int i = 0; i < DTBENCH_COUNT(dtbench_own_parser); i++)
        if (strcmp(cmd, dtbench_own_parser[i].name) == 0) return dtbench_own_parser[i].run(argc - 1, argv + 1);
    if (dt_args_parse("dtbench", args, n_args, argc - 1, argv + 1) != DT_ARGS_OK) return 2;
    if (f.help) {
        dt_args_print_help(stdout, usage, args, n_args);
        return 0;
    }
    if (f.skip_no_device) dtbench_no_device_status = 77;
    f.on_gpu = f.device && strcmp(f.device, "cuda") == 0;
    f.args = args;
    f.n_args = n_args;
    if (dtbench_check_flags(&f, cmd) != 0) return 2;
    for (int i = 0; i < DTBENCH_COUNT(dtbench_commands); i++)
        if (strcmp(cmd, dtbench_commands[i].name) == 0) return dtbench_commands[i].run(&f);
    fprintf(stderr,
            "dtbench: '%s': unknown command (expected gemm, gelu, train, recompute, largebatch, amp, allreduce, "
            "pipeline, tp, compose, bubbles or flows)\n",
            cmd);
    return 2;
}

int main(int argc, char **argv)
{
    /* OpenBLAS's own threads spin for ever if their work buffers do not fit (dt_backend.h) */
    if (dt_backend_cpu_blas_startup() != DT_OK) dtbench_die("OpenBLAS");
    const int status = dtbench_main(argc, argv);
    if (status != 0) dt_args_exit_failed(status); /* not exit(): see args.h */
    return 0;
}
