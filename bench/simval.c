/* simval.c: `dtbench simval` and `dtbench simspeed`, the simulator's
 * benchmarks.
 *
 *   dtbench simval [--iters N] [--dir DIR] [--quick] [--mpirun CMD]
 *       The validation matrix on this machine. It runs, as a user would,
 *       (1) single-rank compute profiles of the tiny model (dtrain
 *       --threads 1) in fp32, bf16 and fp16, (2) `mpirun -np 2 dtbench
 *       allreduce --json` for the links' fit, (3) real 2-rank runs:
 *       pipeline p = 2 (gpipe and 1f1b for m = 2, 4, 8; pipedream and
 *       pipedream-vsync for m = 4), tensor parallel t = 2, data parallel
 *       d = 2 (ring, tree, ZeRO-1), the parameter server (ps-sync,
 *       ps-async: one worker, one server), and two combined runs (1f1b
 *       bf16, t = 2 fp16), each with a trace; then dts_validate predicts
 *       every run from (1) of its precision and (2) only and prints
 *       measured vs predicted step time and phases. Goal
 *       (the errors peer simulators' papers report against real runs:
 *       SimAI ~1.9%, Lumos 3.3%, ASTRA-sim 10-20%): mean absolute error
 *       < 5%, no run over 10%. --quick: five runs (1f1b, dp ring,
 *       ps-sync and the two combined ones; for tests). Exit 0
 *       when every run was predicted (the goal's verdict is printed, not
 *       the exit code), 1 on a failure.
 *   dtbench simspeed [--steps N]
 *       The engine alone (events per second of a heap under a steady load
 *       of pending events, goal > 10 million) and a 1024-device job:
 *       32 blocks of GPT-2's width 768, 12 heads, T = 1024, byte vocabulary,
 *       on sim/hw/h100-ib.json's figures with the roofline,
 *       p = 16, d = 64, m = 64, 1f1b, ring allreduce at step level; wall
 *       time for 10 steps (goal < 10 s on one core) and events per second.
 *
 * Both programs print the figure and the ratio to the goal. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../programs/args.h"
#include "dtrain.h"
#include "dts_engine.h"
#include "dts_run.h"
#include "dts_scenario.h"
#include "dts_validate.h"

int dt_bench_simval(int argc, char **argv);
int dt_bench_simspeed(int argc, char **argv);

/* snprintf into an array, failing the benchmark instead of truncating a path or command */
#define FMT(buf, ...)                                                                              \
    do {                                                                                           \
        int n_ = snprintf((buf), sizeof(buf), __VA_ARGS__);                                        \
        if (n_ < 0 || (size_t)n_ >= sizeof(buf)) {                                                 \
            fprintf(stderr, "dtbench: a path or command is longer than %zu bytes\n", sizeof(buf)); \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Run a shell command with its output in log; 0 on success. */
static int run_logged(const char *cmd, const char *log)
{
    char full[8192];
    snprintf(full, sizeof full, "%s > '%s' 2>&1", cmd, log);
    int rc = system(full);
    if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
        fprintf(stderr, "dtbench simval: command failed (status %d): %s\n  see %s; its last lines:\n", rc, cmd, log);
        char tail[600];
        snprintf(tail, sizeof tail, "tail -5 '%s' >&2", log);
        if (system(tail) == -1) fprintf(stderr, "  (cannot show it)\n");
        return -1;
    }
    return 0;
}

/* The Open MPI settings of tests/mpi-env.sh (one host, containers). */
static void mpi_env(void)
{
    static const char *const kv[][2] = {{"OMPI_MCA_btl_vader_single_copy_mechanism", "none"},
                                        {"OMPI_MCA_plm", "isolated"},
                                        {"OMPI_MCA_pml", "ob1"},
                                        {"OMPI_MCA_btl", "self,vader"},
                                        {"OMPI_MCA_rmaps_base_oversubscribe", "1"},
                                        {"OMPI_MCA_mpi_yield_when_idle", "1"},
                                        {"PMIX_MCA_gds", "hash"},
                                        {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                        {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) setenv(kv[i][0], kv[i][1], 0);
}

typedef struct simval_run {
    const char *name; /* file stem */
    int np;
    const char *flags; /* beyond the common ones */
    int prec;          /* 0 fp32, 1 bf16, 2 fp16: predicted from the profile of that precision */
} simval_run;

static const char *const simval_prec[] = {"fp32", "bf16", "fp16"};
static const char *const simval_prec_flag[] = {"", "--bf16", "--fp16"};

int dt_bench_simval(int argc, char **argv)
{
    int iters = 30, quick = 0, help = 0;
    const char *dir = NULL, *mpirun = "mpirun --oversubscribe --allow-run-as-root";
    dt_arg args[] = {
        {"--iters", DT_ARG_INT, &iters, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 3, 100000, NULL, NULL,
         "training steps of every run (the first 2 are left out as warm-up)", NULL, 0},
        {"--dir", DT_ARG_STRING, &dir, 0, 0, 0, NULL, "DIR", "keep the traces and logs in DIR", "temporary, removed",
         0},
        {"--quick", DT_ARG_FLAG, &quick, 0, 0, 0, NULL, NULL, "five runs instead of the whole matrix (tests)", NULL, 0},
        {"--mpirun", DT_ARG_STRING, &mpirun, 0, 0, 0, NULL, "CMD", "the launcher", NULL, 0},
        {"--help", DT_ARG_FLAG, &help, 0, 0, 0, NULL, NULL, "print this help and exit", NULL, 0},
    };
    const int n_args = (int)(sizeof args / sizeof args[0]);
    if (dt_args_parse("dtbench simval", args, n_args, argc, argv) != DT_ARGS_OK) return 2;
    if (help) {
        dt_args_print_help(stdout, "dtbench simval [--iters N] [--dir DIR] [--quick]", args, n_args);
        return 0;
    }
    /* the programs next to this one */
    char self[PATH_MAX], bindir[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        fprintf(stderr, "dtbench simval: cannot find this program's directory (/proc/self/exe)\n");
        return 1;
    }
    self[len] = '\0';
    FMT(bindir, "%s", dirname(self));
    char tmpl[] = "/tmp/dtbench-simval-XXXXXX";
    const int keep = dir != NULL;
    if (!dir) {
        dir = mkdtemp(tmpl);
        if (!dir) {
            fprintf(stderr, "dtbench simval: cannot make a temporary directory: %s\n", strerror(errno));
            return 1;
        }
    } else if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "dtbench simval: --dir %s: cannot create it: %s\n", dir, strerror(errno));
        return 2;
    }
    mpi_env();
    char common[512], cmd[4096], log[PATH_MAX + 64], path[PATH_MAX + 64];
    snprintf(common, sizeof common,
             "--model tiny --micro-batch-size 16 --train-iters %d --eval-interval 0 --log-interval 100000", iters);
    const double t0 = now_s();
    /* (1) the compute profiles: one rank, one thread (what each of 2 ranks gets on 2 cores), one per
     * precision (a 16-bit run rounds every op's output: its compute costs differ) */
    for (int p = 0; p < 3; p++) {
        FMT(cmd, "'%s/dtrain' %s --global-batch-size 64 --threads 1 %s --trace '%s/profile-%s.json'", bindir, common,
            simval_prec_flag[p], dir, simval_prec[p]);
        FMT(log, "%s/profile-%s.log", dir, simval_prec[p]);
        printf("profile:  %s\n", cmd);
        fflush(stdout);
        if (run_logged(cmd, log) != 0) return 1;
    }
    /* (2) the links: our ring allreduce between 2 ranks, 4 KiB .. 4 MiB */
    FMT(cmd, "%s -np 2 '%s/dtbench' allreduce --max-bytes 4194304 --json '%s/allreduce.json'", mpirun, bindir, dir);
    FMT(log, "%s/allreduce.log", dir);
    printf("links:    %s\n", cmd);
    fflush(stdout);
    if (run_logged(cmd, log) != 0) return 1;
    /* (3) the measured runs */
    static const simval_run full[] = {
        {"gpipe-m2", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule gpipe --global-batch-size 32", 0},
        {"gpipe-m4", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule gpipe --global-batch-size 64", 0},
        {"gpipe-m8", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule gpipe --global-batch-size 128", 0},
        {"1f1b-m2", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule 1f1b --global-batch-size 32", 0},
        {"1f1b-m4", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule 1f1b --global-batch-size 64", 0},
        {"1f1b-m8", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule 1f1b --global-batch-size 128", 0},
        {"pipedream-m4", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule pipedream --global-batch-size 64", 0},
        {"vsync-m4", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule pipedream-vsync --global-batch-size 64",
         0},
        {"tp2-m4", 2, "--tensor-model-parallel-size 2 --global-batch-size 64", 0},
        {"dp-ring", 2, "--allreduce ring --global-batch-size 64", 0},
        {"dp-tree", 2, "--allreduce tree --global-batch-size 64", 0},
        {"dp-zero1", 2, "--allreduce ring --use-distributed-optimizer --global-batch-size 64", 0},
        {"ps-sync", 2, "--allreduce ps-sync --num-ps-servers 1 --global-batch-size 64", 0},
        {"ps-async", 2, "--allreduce ps-async --num-ps-servers 1 --global-batch-size 64", 0},
        {"1f1b-m4-bf16", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule 1f1b --global-batch-size 64 --bf16",
         1},
        {"tp2-m4-fp16", 2, "--tensor-model-parallel-size 2 --global-batch-size 64 --fp16", 2},
    };
    static const simval_run small[] = {
        {"1f1b-m4", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule 1f1b --global-batch-size 64", 0},
        {"dp-ring", 2, "--allreduce ring --global-batch-size 64", 0},
        {"ps-sync", 2, "--allreduce ps-sync --num-ps-servers 1 --global-batch-size 64", 0},
        {"1f1b-m4-bf16", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule 1f1b --global-batch-size 64 --bf16",
         1},
        {"tp2-m4-fp16", 2, "--tensor-model-parallel-size 2 --global-batch-size 64 --fp16", 2},
    };
    const simval_run *runs = quick ? small : full;
    const int n_runs = quick ? (int)(sizeof small / sizeof small[0]) : (int)(sizeof full / sizeof full[0]);
    char(*files)[PATH_MAX + 64] = calloc((size_t)n_runs, sizeof *files);
    const char **names = calloc((size_t)n_runs, sizeof *names);
    if (!files || !names) {
        fprintf(stderr, "dtbench simval: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n_runs; i++) {
        FMT(path, "%s/%s.json", dir, runs[i].name);
        FMT(cmd, "%s -np %d '%s/dtrain' %s %s --trace '%s'", mpirun, runs[i].np, bindir, common, runs[i].flags, path);
        FMT(log, "%s/%s.log", dir, runs[i].name);
        printf("run %2d:   %s\n", i + 1, cmd);
        fflush(stdout);
        if (run_logged(cmd, log) != 0) return 1;
        FMT(files[i], "%s/%s.rank0.json", dir, runs[i].name);
        names[i] = files[i];
    }
    printf("measured in %.1f s\n\n", now_s() - t0);
    char prof[PATH_MAX + 64], comm[PATH_MAX + 64];
    FMT(comm, "%s/allreduce.json", dir);
    /* each precision's runs from its own profile; the goal over all of them */
    double sum_abs = 0, max_abs = 0;
    int counted = 0, rc = 0;
    for (int p = 0; p < 3 && rc == 0; p++) {
        const char *group[64];
        int n = 0;
        for (int i = 0; i < n_runs && n < 64; i++)
            if (runs[i].prec == p) group[n++] = names[i];
        if (!n) continue;
        FMT(prof, "%s/profile-%s.json", dir, simval_prec[p]);
        printf("%s runs, from the %s profile:\n", simval_prec[p], simval_prec[p]);
        dts_validate_opts o = {.profile = prof, .comm_json = comm, .runs = group, .n_runs = n, .skip = 2};
        dts_validate_result r;
        if (dts_validate(&o, stdout, &r) != DT_OK) {
            fprintf(stderr, "dtbench simval: %s\n", dt_last_error());
            rc = 1;
            break;
        }
        sum_abs += r.mean_abs_err * r.n;
        counted += r.n;
        if (r.max_abs_err > max_abs) max_abs = r.max_abs_err;
        dts_validate_result_free(&r);
        printf("\n");
    }
    if (rc == 0 && counted) {
        const double mean = sum_abs / counted;
        printf("goal: mean absolute error < 5%% (%.1f%% over %d runs: ratio %.2f) and no run over 10%% (largest "
               "%.1f%%: ratio %.2f): %s\n",
               100 * mean, counted, mean / 0.05, 100 * max_abs, max_abs / 0.10,
               mean < 0.05 && max_abs <= 0.10 ? "MET" : "NOT MET");
    }
    free(files);
    free(names);
    if (!keep) {
        FMT(cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "dtbench simval: could not remove %s\n", dir);
    } else {
        printf("traces and logs kept in %s\n", dir);
    }
    return rc;
}

/* ---- simspeed ----------------------------------------------------------- */

typedef struct spin {
    dts_engine *e;
    uint64_t x;
    int64_t left;
} spin;

/* each event schedules one more at a pseudo-random later time: a steady
 * queue of `pending` events, as a large simulation keeps */
static void spin_fn(dts_engine *e, void *ctx, int64_t a, int64_t b)
{
    (void)a;
    (void)b;
    spin *s = ctx;
    if (s->left-- <= 0) return;
    s->x = s->x * 6364136223846793005ull + 1442695040888963407ull;
    dts_engine_after(e, (int64_t)(s->x >> 50), spin_fn, s, 0, 0);
}

int dt_bench_simspeed(int argc, char **argv)
{
    int steps = 10, help = 0, pending = 4096;
    dt_arg args[] = {
        {"--steps", DT_ARG_INT, &steps, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 1000, NULL, NULL,
         "steps of the 1024-device job", NULL, 0},
        {"--pending", DT_ARG_INT, &pending, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 1 << 24, NULL, NULL,
         "engine test: events kept in the queue", NULL, 0},
        {"--help", DT_ARG_FLAG, &help, 0, 0, 0, NULL, NULL, "print this help and exit", NULL, 0},
    };
    const int n_args = (int)(sizeof args / sizeof args[0]);
    if (dt_args_parse("dtbench simspeed", args, n_args, argc, argv) != DT_ARGS_OK) return 2;
    if (help) {
        dt_args_print_help(stdout, "dtbench simspeed [--steps N]", args, n_args);
        return 0;
    }
    /* the engine alone */
    dts_engine *e = NULL;
    if (dts_engine_create(&e) != DT_OK) return 1;
    spin s = {.e = e, .x = 42, .left = 20000000};
    for (int i = 0; i < pending; i++) dts_engine_at(e, i, spin_fn, &s, 0, 0);
    double t0 = now_s();
    if (dts_engine_run(e) != DT_OK) return 1;
    double dt = now_s() - t0;
    const double eps = (double)dts_engine_events(e) / dt;
    printf("engine: %llu events with %d pending in %.3f s: %.1f million events/s (goal > 10: ratio %.2f)\n",
           (unsigned long long)dts_engine_events(e), pending, dt, eps * 1e-6, eps / 1e7);
    dts_engine_free(e);
    /* the 1024-device job */
    dts_scenario sc;
    dts_scenario_default(&sc);
    char hw[PATH_MAX];
    FMT(hw, "%s/sim/hw/h100-ib.json", getenv("DT_SRCDIR") ? getenv("DT_SRCDIR") : DT_SRCDIR_DEFAULT);
    const char *cfg_fmt =
        "{\"model\":\"custom\",\"num_layers\":32,\"hidden_size\":768,\"num_attention_heads\":12,"
        "\"max_position_embeddings\":1024,\"seq_length\":1024,\"micro_batch_size\":1,\"micro_batches\":64,"
        "\"pipeline_model_parallel_size\":16,\"data_parallel_size\":64,\"pipeline_schedule\":\"1f1b\","
        "\"allreduce\":\"ring\",\"allreduce_chunk_bytes\":0,\"train_iters\":%d,\"hardware\":\"%s\"}";
    char cfg[1024];
    FMT(cfg, cfg_fmt, steps, hw);
    if (dts_scenario_from_config(&sc, cfg, "simspeed") != DT_OK || dts_scenario_set_cost(&sc, NULL) != DT_OK) {
        fprintf(stderr, "dtbench simspeed: %s\n", dt_last_error());
        return 1;
    }
    dts_summary sum;
    t0 = now_s();
    if (dts_run(&sc, NULL, &sum) != DT_OK) {
        fprintf(stderr, "dtbench simspeed: %s\n", dt_last_error());
        return 1;
    }
    dt = now_s() - t0;
    printf("job: %s, %d layers, t=%d p=%d d=%d (%d devices), m=%d, %s, %d steps on %s\n", sc.model_name,
           sc.model.num_layers, sc.t, sc.p, sc.d, dts_scenario_world(&sc), sc.m, dt_sched_kind_name(sc.schedule), steps,
           sc.hw.name);
    printf("  simulated step %.2f ms, bubble stage 0 %.4f (formula %.4f)\n", sum.step_ns * 1e-6, sum.bubble_fb[0],
           sum.bubble_formula);
    printf("  %llu events in %.3f s: %.1f million events/s; wall %.2f s (goal < 10 s: ratio %.2f)\n",
           (unsigned long long)sum.events, dt, (double)sum.events / dt * 1e-6, dt, dt / 10.0);
    dts_summary_free(&sum);
    return 0;
}
