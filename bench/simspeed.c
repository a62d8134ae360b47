/* simspeed.c: `dtbench simspeed`, the simulator's own speed and memory.
 *
 *   dtbench simspeed [--steps N] [--scale] [--runs R] [--pending N]
 *       Three figures, each with its ratio to the goal:
 *       - the engine alone: events per second of a heap under a steady
 *         load of --pending events (goal > 10 million);
 *       - the 1024-device job: 32 blocks of GPT-2's width 768, 12 heads,
 *         T = 1024, byte vocabulary, on sim/hw/h100-ib.json's figures with
 *         the roofline, t = 1, p = 16, d = 64, m = 64, 1f1b, ring allreduce
 *         without chunks, collectives as the file says (auto: messages at
 *         64 members), --steps steps (10): wall time (goal < 10 s);
 *       - the 102400-device job: the same blocks with 16 heads (t must
 *         divide the heads; 12 do not split over 8), t = 8, p = 16,
 *         d = 800, analytic collectives, 2 steps: wall time (goal < 10 s)
 *         and peak resident memory (goal < 2 GB).
 *       --scale: the table instead: 1024, 4096 and 16384 devices (the
 *       1024-device job with d = 64, 256, 1024, 2 steps) and the
 *       102400-device job, each under the message and the analytic
 *       model, and 102400 devices without tensor parallelism (t = 1,
 *       d = 6400: 8x the simulated ranks; analytic only, the message
 *       model's tables would need ~50 GB), --runs runs each (3): median
 *       and range of the wall time and of the peak resident memory.
 *
 * Every job runs in a child process of its own (fork), so that its peak
 * resident memory is its own: wait4's ru_maxrss (kB on Linux). The child
 * sends its figures back on a pipe. */
#define _DEFAULT_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../programs/args.h"
#include "dtbench.h"
#include "dtrain.h"
#include "dts_engine.h"
#include "dts_run.h"
#include "dts_scenario.h"

static double ss_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the engine alone ------------------------------------------------------ */

typedef struct spin {
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

static int ss_engine(int pending)
{
    dts_engine *e = NULL;
    if (dts_engine_create(&e) != DT_OK) return 1;
    spin s = {.x = 42, .left = 20000000};
    for (int i = 0; i < pending; i++) dts_engine_at(e, i, spin_fn, &s, 0, 0);
    const double t0 = ss_now_s();
    if (dts_engine_run(e) != DT_OK) return 1;
    const double dt = ss_now_s() - t0, eps = (double)dts_engine_events(e) / dt;
    printf("engine: %llu events with %d pending in %.3f s: %.1f million events/s (goal > 10: ratio %.2f)\n",
           (unsigned long long)dts_engine_events(e), pending, dt, eps * 1e-6, eps / 1e7);
    dts_engine_free(e);
    return 0;
}

/* ---- jobs ------------------------------------------------------------------- */

typedef struct ss_job {
    int t, d, heads, steps;
    int coll; /* dts_hw_coll; DTS_HW_COLL_AUTO: the file's */
} ss_job;

/* What a job's child sends back. */
typedef struct ss_result {
    int ok;
    double wall_s, step_ns, bubble, bubble_formula;
    uint64_t events;
    int world;
    long maxrss_kb; /* filled by the parent */
} ss_result;

/* The job's scenario on sim/hw/h100-ib.json (roofline costs). */
static int ss_scenario(const ss_job *j, dts_scenario *sc)
{
    char hw[PATH_MAX], cfg[1024];
    const char *src = getenv("DT_SRCDIR") ? getenv("DT_SRCDIR") : DT_SRCDIR_DEFAULT;
    if ((size_t)snprintf(hw, sizeof hw, "%s/sim/hw/h100-ib.json", src) >= sizeof hw) return 1;
    if ((size_t)snprintf(cfg, sizeof cfg,
                         "{\"model\":\"custom\",\"num_layers\":32,\"hidden_size\":768,\"num_attention_heads\":%d,"
                         "\"max_position_embeddings\":1024,\"seq_length\":1024,\"micro_batch_size\":1,"
                         "\"micro_batches\":64,\"tensor_model_parallel_size\":%d,\"pipeline_model_parallel_size\":16,"
                         "\"data_parallel_size\":%d,\"pipeline_schedule\":\"1f1b\",\"allreduce\":\"ring\","
                         "\"allreduce_chunk_bytes\":0,\"train_iters\":%d,\"hardware\":\"%s\"}",
                         j->heads, j->t, j->d, j->steps, hw) >= sizeof cfg)
        return 1;
    dts_scenario_default(sc);
    if (dts_scenario_from_config(sc, cfg, "simspeed") != DT_OK || dts_scenario_set_cost(sc, NULL) != DT_OK) return 1;
    if (j->coll != DTS_HW_COLL_AUTO) sc->hw.collectives = (dts_hw_coll)j->coll;
    return 0;
}

/* In the child: run the job, write its figures to fd. */
static void ss_child(const ss_job *j, int fd)
{
    ss_result r = {0};
    dts_scenario sc;
    dts_summary sum;
    if (ss_scenario(j, &sc) == 0) {
        const double t0 = ss_now_s();
        if (dts_run(&sc, NULL, &sum) == DT_OK) {
            r.ok = 1;
            r.wall_s = ss_now_s() - t0;
            r.step_ns = sum.step_ns;
            r.bubble = sum.bubble_fb[0];
            r.bubble_formula = sum.bubble_formula;
            r.events = sum.events;
            r.world = dts_scenario_world(&sc);
            dts_summary_free(&sum);
        }
    }
    if (!r.ok) fprintf(stderr, "dtbench simspeed: %s\n", dt_last_error());
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r) _exit(1);
    _exit(r.ok ? 0 : 1);
}

/* Run the job in a child of its own; its figures and its peak resident memory. */
static int ss_run(const ss_job *j, ss_result *out)
{
    int fds[2];
    memset(out, 0, sizeof *out);
    if (pipe(fds) != 0) return 1;
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        close(fds[0]);
        ss_child(j, fds[1]);
    }
    close(fds[1]);
    const ssize_t got = read(fds[0], out, sizeof *out);
    close(fds[0]);
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || got != (ssize_t)sizeof *out || !out->ok) return 1;
    out->maxrss_kb = ru.ru_maxrss;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static const char *ss_coll_name(int coll)
{
    return coll == DTS_HW_COLL_MESSAGES ? "messages" : coll == DTS_HW_COLL_ANALYTIC ? "analytic" : "auto";
}

/* The job's line, as dtbench simspeed has always printed it. */
static int ss_header(const ss_job *j)
{
    dts_scenario sc;
    if (ss_scenario(j, &sc) != 0) {
        fprintf(stderr, "dtbench simspeed: %s\n", dt_last_error());
        return 1;
    }
    printf("job: %s, %d layers (%d heads), t=%d p=%d d=%d (%d devices), m=%d, %s, %d steps on %s, collectives %s "
           "(%s)\n",
           sc.model_name, sc.model.num_layers, sc.model.num_heads, sc.t, sc.p, sc.d, dts_scenario_world(&sc), sc.m,
           dt_sched_kind_name(sc.schedule), j->steps, sc.hw.name, dts_hw_coll_name(sc.hw.collectives),
           dts_hw_coll_analytic(&sc.hw, sc.d) ? "analytic" : "messages");
    return 0;
}

/* ---- --scale: the table ----------------------------------------------------- */

static int ss_cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double ss_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, ss_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int ss_scale(int runs)
{
    static const ss_job jobs[] = {
        {1, 64, 12, 2, DTS_HW_COLL_MESSAGES},   {1, 64, 12, 2, DTS_HW_COLL_ANALYTIC},
        {1, 256, 12, 2, DTS_HW_COLL_MESSAGES},  {1, 256, 12, 2, DTS_HW_COLL_ANALYTIC},
        {1, 1024, 12, 2, DTS_HW_COLL_MESSAGES}, {1, 1024, 12, 2, DTS_HW_COLL_ANALYTIC},
        {8, 800, 16, 2, DTS_HW_COLL_MESSAGES},  {8, 800, 16, 2, DTS_HW_COLL_ANALYTIC},
        {1, 6400, 12, 2, DTS_HW_COLL_ANALYTIC},
    };
    printf("%8s %3s %3s %5s %-9s %14s %22s %22s\n", "devices", "t", "p", "d", "model", "step (ms)",
           "wall s: median [range]", "peak MB: median [range]");
    for (size_t k = 0; k < sizeof jobs / sizeof *jobs; k++) {
        double wall[16], rss[16], step = 0;
        int world = 0;
        for (int r = 0; r < runs; r++) {
            ss_result res;
            if (ss_run(&jobs[k], &res) != 0) {
                fprintf(stderr, "dtbench simspeed: the %d-device job (%s) failed\n", jobs[k].t * 16 * jobs[k].d,
                        ss_coll_name(jobs[k].coll));
                return 1;
            }
            wall[r] = res.wall_s;
            rss[r] = (double)res.maxrss_kb / 1024.0;
            step = res.step_ns;
            world = res.world;
        }
        const double wlo = wall[0], rlo = rss[0];
        double wmin = wlo, wmax = wlo, rmin = rlo, rmax = rlo;
        for (int r = 1; r < runs; r++) {
            wmin = wall[r] < wmin ? wall[r] : wmin, wmax = wall[r] > wmax ? wall[r] : wmax;
            rmin = rss[r] < rmin ? rss[r] : rmin, rmax = rss[r] > rmax ? rss[r] : rmax;
        }
        printf("%8d %3d %3d %5d %-9s %14.3f %8.3f [%.3f, %.3f] %8.1f [%.1f, %.1f]\n", world, jobs[k].t, 16, jobs[k].d,
               ss_coll_name(jobs[k].coll), step * 1e-6, ss_median(wall, runs), wmin, wmax, ss_median(rss, runs), rmin,
               rmax);
        fflush(stdout);
    }
    return 0;
}

/* ---- the command ------------------------------------------------------------ */

int dt_bench_simspeed(int argc, char **argv)
{
    int steps = 10, help = 0, pending = 4096, scale = 0, runs = 3;
    dt_arg args[] = {
        {"--steps", DT_ARG_INT, &steps, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 1000, NULL, NULL,
         "steps of the 1024-device job", NULL, 0},
        {"--pending", DT_ARG_INT, &pending, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 1 << 24, NULL, NULL,
         "engine test: events kept in the queue", NULL, 0},
        {"--scale", DT_ARG_FLAG, &scale, 0, 0, 0, NULL, NULL,
         "the table: 1024 to 102400 devices under both collective models, wall time and peak memory", NULL, 0},
        {"--runs", DT_ARG_INT, &runs, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 16, NULL, NULL,
         "--scale: runs of each job (median and range)", NULL, 0},
        {"--help", DT_ARG_FLAG, &help, 0, 0, 0, NULL, NULL, "print this help and exit", NULL, 0},
    };
    const int n_args = (int)(sizeof args / sizeof args[0]);
    if (dt_args_parse("dtbench simspeed", args, n_args, argc, argv) != DT_ARGS_OK) return 2;
    if (help) {
        dt_args_print_help(stdout, "dtbench simspeed [--steps N] [--scale [--runs R]]", args, n_args);
        return 0;
    }
    if (scale) return ss_scale(runs);
    if (ss_engine(pending) != 0) return 1;
    /* the 1024-device job */
    const ss_job small = {1, 64, 12, steps, DTS_HW_COLL_AUTO};
    ss_result r;
    if (ss_run(&small, &r) != 0) return 1;
    if (ss_header(&small) != 0) return 1;
    printf("  simulated step %.2f ms, bubble stage 0 %.4f (formula %.4f)\n", r.step_ns * 1e-6, r.bubble,
           r.bubble_formula);
    printf("  %llu events in %.3f s: %.1f million events/s; wall %.2f s (goal < 10 s: ratio %.2f)\n",
           (unsigned long long)r.events, r.wall_s, (double)r.events / r.wall_s * 1e-6, r.wall_s, r.wall_s / 10.0);
    /* the 102400-device job */
    const ss_job big = {8, 800, 16, 2, DTS_HW_COLL_ANALYTIC};
    if (ss_run(&big, &r) != 0) return 1;
    const double gb = (double)r.maxrss_kb * 1024.0 / 1e9;
    if (ss_header(&big) != 0) return 1;
    printf("  simulated step %.2f ms, bubble stage 0 %.4f (formula %.4f)\n", r.step_ns * 1e-6, r.bubble,
           r.bubble_formula);
    printf("  %llu events in %.3f s (goal < 10 s: ratio %.2f); peak resident memory %.1f MB (goal < 2 GB: "
           "ratio %.3f)\n",
           (unsigned long long)r.events, r.wall_s, r.wall_s / 10.0, gb * 1e3, gb / 2.0);
    return 0;
}
