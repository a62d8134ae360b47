/* bench_threads.c: `dtbench threads`, the automatic thread count against
 * every fixed one, on a quiet machine and beside one busy process.
 *
 * For each model (tiny, small) it trains dtrain's default run (the
 * addition task, T = 16; micro-batch 128 for tiny, 16 for small, to keep a
 * small run to seconds) with --threads 0 (automatic) and with each fixed
 * count 1..cores, first alone, then with one child process spinning on a
 * core; every configuration --repeats times, interleaved, and prints the
 * median tokens/s (wall time of steps 1..n-1, the first being warm-up) with
 * its range. The figures of merit, printed last:
 *   busy:  automatic / the best fixed count (goal >= 0.90)
 *   quiet: automatic / one thread per core, dtrain's default before the
 *          automatic count (goal >= 0.97)
 * The busy process is fork()ed here and killed after each run. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "dt_time.h"
#include "dtbench.h"

#define THR_MAX_CFG 9 /* automatic + fixed 1..8 */
#define THR_MAX_REP 64

static pid_t threads_busy_start(void)
{
    pid_t pid = fork();
    if (pid < 0) dtbench_die("threads: fork");
    if (pid == 0) {
        volatile unsigned long x = 0;
        for (;;) x++;
    }
    return pid;
}

static void threads_busy_stop(pid_t pid)
{
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* tokens/s of one run; *workers: the automatic count's choice at the end */
static double threads_run(const char *model, int threads, int steps, int *workers)
{
    dt_train_config cfg;
    dt_train_config_default(&cfg);
    if (strcmp(model, "tiny") != 0) {
        snprintf(cfg.model_name, sizeof cfg.model_name, "%s", model);
        if (dt_gpt_config_preset(model, &cfg.model) != DT_OK) dtbench_die("--model");
        cfg.model.vocab_size = 0;
        cfg.micro_batch_size = cfg.global_batch_size = 16;
    }
    cfg.train_iters = steps;
    cfg.threads = threads;
    dt_trainer *tr;
    if (dt_trainer_create(&cfg, &tr) != DT_OK) dtbench_die("threads: trainer");
    int64_t t1 = 0;
    for (int k = 0; k < steps; k++) {
        if (dt_trainer_step(tr, NULL) != DT_OK) dtbench_die("threads: step");
        if (k == 0) t1 = dt_time_ns();
    }
    const double secs = (double)(dt_time_ns() - t1) * 1e-9;
    const double tps = secs > 0 ? (double)(steps - 1) * cfg.global_batch_size * cfg.seq_length / secs : 0.0;
    *workers = dt_trainer_workers(tr);
    dt_trainer_free(tr);
    return tps;
}

static int threads_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median, min and max of v[0..n) (sorts v) */
static void threads_stats(double *v, int n, double *med, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof *v, threads_cmp);
    *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    *lo = v[0];
    *hi = v[n - 1];
}

static int threads_model(const char *model, int steps, int repeats, int cores, int *fail)
{
    const int ncfg = cores + 1 < THR_MAX_CFG ? cores + 1 : THR_MAX_CFG; /* 0: automatic */
    double tps[2][THR_MAX_CFG][THR_MAX_REP];
    int chose[2][THR_MAX_REP];
    for (int r = 0; r < repeats; r++)
        for (int busy = 0; busy < 2; busy++)
            for (int c = 0; c < ncfg; c++) {
                pid_t pid = busy ? threads_busy_start() : 0;
                int w = 0;
                tps[busy][c][r] = threads_run(model, c, steps, &w);
                threads_busy_stop(pid);
                if (c == 0) chose[busy][r] = w;
            }
    double med[2][THR_MAX_CFG];
    for (int busy = 0; busy < 2; busy++) {
        printf("%-5s %-5s", model, busy ? "busy" : "quiet");
        for (int c = 0; c < ncfg; c++) {
            double lo, hi;
            threads_stats(tps[busy][c], repeats, &med[busy][c], &lo, &hi);
            printf("  %8.0f [%.0f-%.0f]", med[busy][c], lo, hi);
        }
        printf("  (automatic chose:");
        for (int r = 0; r < repeats; r++) printf(" %d", chose[busy][r]);
        printf(")\n");
    }
    int best = 1;
    for (int c = 2; c < ncfg; c++)
        if (med[1][c] > med[1][best]) best = c;
    const double r_busy = med[1][0] / med[1][best], r_quiet = med[0][0] / med[0][ncfg - 1];
    printf("%-5s busy:  automatic / best fixed (%d): %.3f (goal >= 0.90)%s\n", model, best, r_busy,
           r_busy >= 0.90 ? "" : "  MISSED");
    printf("%-5s quiet: automatic / %d threads: %.3f (goal >= 0.97)%s\n", model, ncfg - 1, r_quiet,
           r_quiet >= 0.97 ? "" : "  MISSED");
    if (r_busy < 0.90 || r_quiet < 0.97) *fail = 1;
    return 0;
}

int dtbench_cmd_threads(const char *model, int steps, int repeats)
{
    int cores = 1;
#ifdef _OPENMP
    cores = omp_get_num_procs();
#endif
    if (cores < 2) {
        fprintf(stderr, "dtbench: threads: this machine has one core: nothing to choose\n");
        return 1;
    }
    if (repeats > THR_MAX_REP) repeats = THR_MAX_REP;
    const int ncfg = cores + 1 < THR_MAX_CFG ? cores + 1 : THR_MAX_CFG;
    printf("# dtbench threads: tokens/s, median [range] of %d runs; automatic (--threads 0) and fixed 1..%d "
           "threads; quiet, then beside one busy process\n",
           repeats, ncfg - 1);
    printf("# model state    automatic");
    for (int c = 1; c < ncfg; c++) printf("  %d thread%s          ", c, c > 1 ? "s" : " ");
    printf("\n");
    int fail = 0;
    const char *models[2] = {"tiny", "small"};
    for (int i = 0; i < 2; i++) {
        if (model && strcmp(model, models[i]) != 0) continue;
        int n = steps > 0 ? steps : (i == 0 ? 400 : 60);
        threads_model(models[i], n, repeats, cores, &fail);
    }
    return fail;
}
