/* simval.c: `dtbench simval`, the simulator's validation lab.
 *
 *   dtbench simval [--iters N] [--repeats R] [--skip S] [--dir DIR] [--quick]
 *                  [--runs NAME,...] [--mpirun CMD] [--cluster auto|on|off]
 *                  [--cluster-rate RATE]
 *
 * Two disjoint sets of real runs, named in the output:
 *   calibration (the only inputs the simulator is fitted to):
 *     - single-rank compute profiles (dtrain --threads 1), one per precision
 *       and micro-batch size that the runs use;
 *     - a co-located profile: k copies of the fp32 profile run at once on
 *       this machine (k = 2, and 4 when a run has 4 ranks), fitting the
 *       compute slowdown of k ranks sharing the node (dts_fit_contention:
 *       the hardware's "contention");
 *     - the links: `mpirun -np 2 dtbench allreduce --json` (shared memory)
 *       and, on the emulated cluster, the same across its 2 nodes;
 *   validation (never used for fitting): the matrix of bench/simval_runs.c,
 *     every run measured R times (default 3), rep after rep.
 * The calibrated hardware file is written as DIR/hw-calibrated.json; every
 * run is predicted from it and the profile of its precision and
 * micro-batch size (dts_validate: the run gives only its configuration).
 *
 * Reported per run: the measured step time (median and range of the R
 * repeats: the noise floor), the prediction and its error against the
 * median. Goals, each printed with its ratio: mean |error| < 3% and none
 * over 8%; the staleness of ps-async with a slow worker (mean, max,
 * histogram distance); peak activation memory of every rank within 5%.
 * Exit 0 when every run was measured and predicted (the goals' verdicts are
 * printed, not the exit code), 1 on a failure, 2 on a bad flag. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../programs/args.h"
#include "dtbench.h"
#include "dtrain.h"
#include "dts_fit.h"
#include "dts_hw.h"
#include "dts_validate.h"
#include "simval.h"

/* snprintf into an array, failing the benchmark instead of truncating a path or command */
#define FMT(buf, ...)                                                                              \
    do {                                                                                           \
        int n_ = snprintf((buf), sizeof(buf), __VA_ARGS__);                                        \
        if (n_ < 0 || (size_t)n_ >= sizeof(buf)) {                                                 \
            fprintf(stderr, "dtbench: a path or command is longer than %zu bytes\n", sizeof(buf)); \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#define SV_MAX_REPEATS 9

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
    snprintf(full, sizeof full, "( %s ) > '%s' 2>&1", cmd, log);
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

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* 1 when name is one of list's comma-separated names */
static int sv_listed(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const size_t k = strcspn(p, ",");
        if (k == n && !strncmp(p, name, n)) return 1;
        p += k + (p[k] == ',');
    }
    return 0;
}

/* the state of one simval session */
typedef struct sv {
    char bindir[PATH_MAX], srcdir[PATH_MAX], dir[PATH_MAX];
    const char *mpirun;
    char cluster_mpirun[PATH_MAX + 128]; /* "" without the cluster */
    int iters, repeats, skip, cores;
} sv;

static int sv_profile_path(const sv *s, int prec, int mbs, char *out, size_t n)
{
    int k = snprintf(out, n, "%s/profile-%s-mbs%d.json", s->dir, dt_simval_prec_name[prec], mbs);
    return k > 0 && (size_t)k < n ? 0 : -1;
}

/* (1) one compute profile per (precision, micro-batch size) the runs use */
static int sv_profiles(const sv *s, const char *used)
{
    char cmd[4096], log[PATH_MAX + 64], path[PATH_MAX + 64];
    for (int p = 0; p < DT_SIMVAL_NPREC; p++)
        for (int mbs = 1; mbs <= 64; mbs++) {
            if (!used[p * 65 + mbs]) continue;
            if (sv_profile_path(s, p, mbs, path, sizeof path) != 0) return 1;
            FMT(cmd,
                "'%s/dtrain' " DT_SIMVAL_MODEL " --micro-batch-size %d --train-iters %d --threads 1 %s --trace '%s'",
                s->bindir, mbs, s->iters, dt_simval_prec_flag[p], path);
            FMT(log, "%s.log", path);
            printf("  profile:    %s\n", cmd);
            fflush(stdout);
            if (run_logged(cmd, log) != 0) return 1;
        }
    return 0;
}

/* (2) k copies of the fp32 micro-batch-16 profile at once; fits hw->contention[k-1] */
static int sv_colocated(const sv *s, int k, dts_hw *hw)
{
    char cmd[8192] = "", one[1024], log[PATH_MAX + 64], solo[PATH_MAX + 64];
    char files[8][PATH_MAX + 64];
    const char *names[8];
    if (k > 8 || sv_profile_path(s, DT_SIMVAL_FP32, 16, solo, sizeof solo) != 0) return 1;
    size_t used = 0;
    for (int i = 0; i < k; i++) {
        FMT(files[i], "%s/colocated-k%d-%d.json", s->dir, k, i);
        names[i] = files[i];
        FMT(one,
            "'%s/dtrain' " DT_SIMVAL_MODEL
            " --micro-batch-size 16 --train-iters %d --threads 1 --trace '%s' & p%d=$!; ",
            s->bindir, s->iters, files[i], i);
        if (used + strlen(one) >= sizeof cmd) return 1;
        memcpy(cmd + used, one, strlen(one) + 1);
        used += strlen(one);
    }
    for (int i = 0; i < k; i++) {
        FMT(one, "wait $p%d || exit 1; ", i);
        if (used + strlen(one) >= sizeof cmd) return 1;
        memcpy(cmd + used, one, strlen(one) + 1);
        used += strlen(one);
    }
    FMT(log, "%s/colocated-k%d.log", s->dir, k);
    printf("  co-located: %d copies of the fp32 micro-batch 16 profile at once\n", k);
    fflush(stdout);
    if (run_logged(cmd, log) != 0) return 1;
    double slow = 1, spread = 0;
    if (dts_fit_contention_files(solo, names, k, s->skip, hw, &slow, &spread) != DT_OK) {
        fprintf(stderr, "dtbench simval: %s\n", dt_last_error());
        return 1;
    }
    printf("              %d ranks computing at once: compute %.3fx a lone rank's (range over the copies %.3f)\n", k,
           slow, spread);
    return 0;
}

/* (3) a link fit from `dtbench allreduce --json` on 2 ranks launched by `launcher` */
static int sv_link(const sv *s, const char *launcher, const char *tag, dts_link *out)
{
    char cmd[4096], log[PATH_MAX + 64], path[PATH_MAX + 64];
    FMT(path, "%s/allreduce-%s.json", s->dir, tag);
    FMT(cmd, "%s -np 2 '%s/dtbench' allreduce --max-bytes 4194304 --json '%s'", launcher, s->bindir, path);
    FMT(log, "%s.log", path);
    printf("  links:      %s\n", cmd);
    fflush(stdout);
    if (run_logged(cmd, log) != 0) return 1;
    double rms = 0;
    if (dts_fit_allreduce_json(path, "ring", out, &rms) != DT_OK) {
        fprintf(stderr, "dtbench simval: %s\n", dt_last_error());
        return 1;
    }
    printf("              %s ring fit: alpha %.0f ns, beta %.3f GB/s (relative rms %.3f)\n", tag, out->alpha_ns,
           out->bytes_per_ns, rms);
    return 0;
}

/* The emulated cluster (tests/cluster.sh): 1 on success (s->cluster_mpirun set), 0 when it cannot be made. */
static int sv_cluster_up(sv *s, const char *rate, int required)
{
    char cmd[PATH_MAX + 256], log[PATH_MAX + 64];
    if (geteuid() != 0) {
        printf("  cluster:    not root: the emulated cluster (network namespaces) is left out\n");
        return 0;
    }
    snprintf(cmd, sizeof cmd, "sh '%s/tests/cluster.sh' up --name dtsv --nodes 2 --ranks-per-node 1 --rate %s",
             s->srcdir, rate);
    snprintf(log, sizeof log, "%s/cluster-up.log", s->dir);
    printf("  cluster:    %s\n", cmd);
    fflush(stdout);
    if (run_logged(cmd, log) != 0) {
        if (required) return -1;
        printf("              could not be made: the cluster runs are left out\n");
        return 0;
    }
    snprintf(s->cluster_mpirun, sizeof s->cluster_mpirun, "sh '%s/tests/cluster.sh' mpirun --name dtsv", s->srcdir);
    return 1;
}

static void sv_cluster_down(const sv *s)
{
    char cmd[PATH_MAX + 128];
    if (!s->cluster_mpirun[0]) return;
    snprintf(cmd, sizeof cmd, "sh '%s/tests/cluster.sh' down --name dtsv >/dev/null 2>&1", s->srcdir);
    if (system(cmd) != 0) fprintf(stderr, "dtbench simval: tests/cluster.sh down --name dtsv failed\n");
}

/* one measured run's files */
static int sv_run_path(const sv *s, const dt_simval_run *r, int rep, const char *suffix, char *out, size_t n)
{
    int k = snprintf(out, n, "%s/%s.rep%d%s", s->dir, r->name, rep, suffix);
    return k > 0 && (size_t)k < n ? 0 : -1;
}

static int sv_measure(const sv *s, const dt_simval_run *r, int rep)
{
    char cmd[8192], log[PATH_MAX + 64], trace[PATH_MAX + 64], summary[PATH_MAX + 64];
    if (sv_run_path(s, r, rep, ".json", trace, sizeof trace) ||
        sv_run_path(s, r, rep, ".summary.json", summary, sizeof summary) ||
        sv_run_path(s, r, rep, ".log", log, sizeof log))
        return 1;
    /* one thread per rank, as in the profiles (on the emulated cluster each node would otherwise take every core) */
    FMT(cmd,
        "%s -np %d '%s/dtrain' " DT_SIMVAL_MODEL
        " --micro-batch-size %d --train-iters %d --threads 1 %s %s --trace '%s' --summary '%s'",
        r->cluster ? s->cluster_mpirun : s->mpirun, r->np, s->bindir, r->mbs, s->iters, dt_simval_prec_flag[r->prec],
        r->flags, trace, summary);
    printf("  rep %d %-18s %s\n", rep, r->name, cmd);
    fflush(stdout);
    return run_logged(cmd, log) != 0;
}

/* one run's outcome */
typedef struct sv_row {
    double meas_med, meas_lo, meas_hi, pred, err, spread;
    double comp_meas, comp_pred, comm_meas, comm_pred;
    int has_stale;
    double stale_mean[2];
    int stale_max[2];
    double stale_dist;
    double mem_err; /* largest |error| of peak activation memory over the ranks compared, -1: none compared */
    int mem_ranks;
} sv_row;

/* Peak activation memory of every simulated rank against its real trace (rep 1). */
static void sv_memory(const sv *s, const dt_simval_run *r, const dts_summary *sum, sv_row *row)
{
    row->mem_err = -1;
    for (int pid = 0; pid < r->np; pid++) {
        const int64_t sim = dt_simval_sim_peak_act(sum->ev, sum->n_ev, pid);
        if (sim <= 0) continue;
        char path[PATH_MAX + 64], suf[32];
        snprintf(suf, sizeof suf, ".rank%d.json", pid);
        if (sv_run_path(s, r, 1, suf, path, sizeof path) != 0) continue;
        dt_trace *t = NULL;
        if (dt_trace_read(path, &t) != DT_OK) continue;
        const int64_t real = dt_simval_peak_act(t);
        dt_trace_free(t);
        if (real <= 0) continue;
        const double e = fabs((double)(sim - real) / (double)real);
        if (e > row->mem_err) row->mem_err = e;
        row->mem_ranks++;
    }
}

/* Predict run r from its R traces; fills row. */
static int sv_predict(const sv *s, const dt_simval_run *r, const char *hw_path, sv_row *row)
{
    char files[SV_MAX_REPEATS][PATH_MAX + 64], prof[PATH_MAX + 64];
    const char *names[SV_MAX_REPEATS];
    for (int k = 0; k < s->repeats; k++) {
        if (sv_run_path(s, r, k + 1, ".rank0.json", files[k], sizeof files[k]) != 0) return 1;
        names[k] = files[k];
    }
    if (sv_profile_path(s, r->prec, r->mbs, prof, sizeof prof) != 0) return 1;
    /* this machine: every rank on one node of s->cores cores; the cluster: a node per rank */
    dts_validate_opts o = {.profile = prof,
                           .hw = hw_path,
                           .runs = names,
                           .n_runs = s->repeats,
                           .skip = s->skip,
                           .devices_per_node = r->cluster ? 1 : 64,
                           .cores_per_node = r->cluster ? 1 : s->cores,
                           .keep_summaries = 1};
    dts_validate_result res;
    if (dts_validate(&o, NULL, &res) != DT_OK) {
        fprintf(stderr, "dtbench simval: %s: %s\n", r->name, dt_last_error());
        dts_validate_result_free(&res);
        return 1;
    }
    double m[SV_MAX_REPEATS];
    for (int k = 0; k < res.n; k++) m[k] = res.rows[k].measured.step_ns;
    qsort(m, (size_t)res.n, sizeof m[0], cmp_double);
    const int n = res.n;
    row->meas_med = n % 2 ? m[n / 2] : (m[n / 2 - 1] + m[n / 2]) / 2;
    row->meas_lo = m[0];
    row->meas_hi = m[n - 1];
    row->spread = (m[n - 1] - m[0]) / row->meas_med;
    row->pred = res.rows[0].predicted.step_ns;
    row->err = (row->pred - row->meas_med) / row->meas_med;
    for (int k = 0; k < n; k++) {
        row->comp_meas += res.rows[k].measured.compute_ns / n;
        row->comm_meas += res.rows[k].measured.comm_ns / n;
    }
    row->comp_pred = res.rows[0].predicted.compute_ns;
    row->comm_pred = res.rows[0].predicted.comm_ns;
    const dts_summary *sum = &res.rows[0].summary;
    sv_memory(s, r, sum, row);
    if (strstr(r->flags, "ps-async") && strstr(r->flags, "--slow-rank")) {
        char path[PATH_MAX + 64];
        int64_t h[16];
        if (sv_run_path(s, r, 1, ".summary.json", path, sizeof path) == 0 &&
            dt_simval_staleness(path, &row->stale_mean[0], &row->stale_max[0], h) == 0) {
            row->has_stale = 1;
            row->stale_mean[1] = sum->staleness_mean;
            row->stale_max[1] = sum->staleness_max;
            row->stale_dist = dt_simval_hist_distance(h, sum->staleness_hist);
        }
    }
    dts_validate_result_free(&res);
    return 0;
}

/* The report: the table and each goal with its ratio. */
static void sv_report(const sv *s, const dt_simval_run *const *runs, const sv_row *rows, int n)
{
    printf("\nvalidation (never used for fitting): %d runs, each measured %d times; error = predicted / median - 1\n",
           n, s->repeats);
    printf("%-19s %-26s %9s %19s %7s %9s %8s | %17s | %17s\n", "run", "set", "measured", "(range of repeats)", "spread",
           "predicted", "error", "compute meas/pred", "comm meas/pred");
    double sum = 0, max = 0, spread_sum = 0, spread_max = 0, mem_max = -1;
    int within = 0, mem_ranks = 0;
    const sv_row *stale = NULL;
    for (int i = 0; i < n; i++) {
        const sv_row *r = &rows[i];
        char range[48];
        snprintf(range, sizeof range, "(%.1f-%.1f ms)", r->meas_lo * 1e-6, r->meas_hi * 1e-6);
        printf("%-19s %-26s %6.1f ms %19s %6.1f%% %6.1f ms %+7.1f%% | %7.1f / %7.1f | %7.1f / %7.1f\n", runs[i]->name,
               runs[i]->set, r->meas_med * 1e-6, range, 100 * r->spread, r->pred * 1e-6, 100 * r->err,
               r->comp_meas * 1e-6, r->comp_pred * 1e-6, r->comm_meas * 1e-6, r->comm_pred * 1e-6);
        sum += fabs(r->err);
        max = fmax(max, fabs(r->err));
        spread_sum += r->spread;
        spread_max = fmax(spread_max, r->spread);
        within += fabs(r->err) <= r->spread;
        if (r->mem_err > mem_max) mem_max = r->mem_err;
        mem_ranks += r->mem_ranks;
        if (r->has_stale) stale = r;
    }
    if (n < 1) return;
    const double mean = sum / n;
    printf("\nnoise floor: run-to-run spread (max - min) / median over %d repeats: mean %.1f%%, largest %.1f%%; "
           "%d of %d errors are inside their run's spread\n",
           s->repeats, 100 * spread_sum / n, 100 * spread_max, within, n);
    printf("goal: mean |error| < 3%% (%.1f%% over %d runs: ratio %.2f) and none over 8%% (largest %.1f%%: ratio %.2f): "
           "%s\n",
           100 * mean, n, mean / 0.03, 100 * max, max / 0.08, mean < 0.03 && max <= 0.08 ? "MET" : "NOT MET");
    if (stale)
        printf("staleness of ps-async with a slow worker: measured mean %.2f max %d, predicted mean %.2f max %d; "
               "histogram distance (total variation) %.3f\n",
               stale->stale_mean[0], stale->stale_max[0], stale->stale_mean[1], stale->stale_max[1], stale->stale_dist);
    if (mem_max >= 0)
        printf("goal: peak activation memory within 5%% on every rank (%d ranks, largest |error| %.1f%%: ratio %.2f): "
               "%s\n",
               mem_ranks, 100 * mem_max, mem_max / 0.05, mem_max <= 0.05 ? "MET" : "NOT MET");
}

int dt_bench_simval(int argc, char **argv)
{
    sv s = {.iters = 50, .repeats = 3, .skip = 5, .mpirun = "mpirun --oversubscribe --allow-run-as-root"};
    int quick = 0, help = 0;
    const char *dir = NULL, *cluster = "auto", *rate = "2gbit", *only = NULL;
    dt_arg args[] = {
        {"--iters", DT_ARG_INT, &s.iters, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 8, 100000, NULL, NULL,
         "training steps of every run and profile", NULL, 0},
        {"--repeats", DT_ARG_INT, &s.repeats, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, SV_MAX_REPEATS, NULL, NULL,
         "measurements of every validation run (their spread is the noise floor)", NULL, 0},
        {"--skip", DT_ARG_INT, &s.skip, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 1000, NULL, NULL,
         "warm-up steps left out of every mean", NULL, 0},
        {"--dir", DT_ARG_STRING, &dir, 0, 0, 0, NULL, "DIR", "keep the traces and logs in DIR", "temporary, removed",
         0},
        {"--quick", DT_ARG_FLAG, &quick, 0, 0, 0, NULL, NULL,
         "the runs marked quick (11), no cluster, the co-located profiles of 2 and 4 (tests)", NULL, 0},
        {"--runs", DT_ARG_STRING, &only, 0, 0, 0, NULL, "NAME,NAME,...",
         "only these runs of the matrix (their names as the table prints them)", "all", 0},
        {"--mpirun", DT_ARG_STRING, &s.mpirun, 0, 0, 0, NULL, "CMD", "the launcher on this machine", NULL, 0},
        {"--cluster", DT_ARG_CHOICE, &cluster, 0, 0, 0, "auto|on|off", NULL,
         "the runs on the emulated 2-node cluster (tests/cluster.sh; root): auto = where it can be made", NULL, 0},
        {"--cluster-rate", DT_ARG_STRING, &rate, 0, 0, 0, NULL, "RATE", "the cluster's shaped link (tc rate)", NULL, 0},
        {"--help", DT_ARG_FLAG, &help, 0, 0, 0, NULL, NULL, "print this help and exit", NULL, 0},
    };
    const int n_args = (int)(sizeof args / sizeof args[0]);
    if (dt_args_parse("dtbench simval", args, n_args, argc, argv) != DT_ARGS_OK) return 2;
    if (help) {
        dt_args_print_help(stdout, "dtbench simval [flags]", args, n_args);
        return 0;
    }
    for (const char *p = only; p && *p;) {
        const size_t k = strcspn(p, ",");
        int found = 0;
        for (int i = 0; i < dt_simval_n_runs && !found; i++)
            found = strlen(dt_simval_runs[i].name) == k && !strncmp(p, dt_simval_runs[i].name, k);
        if (!found) {
            fprintf(stderr,
                    "dtbench simval: --runs: '%.*s' is not a run of the matrix (see the table's first column)\n",
                    (int)k, p);
            return 2;
        }
        p += k + (p[k] == ',');
    }
    if (s.skip + 2 > s.iters) {
        fprintf(stderr, "dtbench simval: --iters %d: expected at least --skip + 2 = %d steps\n", s.iters, s.skip + 2);
        return 2;
    }
    if (strspn(rate, "abcdefghijklmnopqrstuvwxyz0123456789.") != strlen(rate)) {
        fprintf(stderr, "dtbench simval: --cluster-rate %s: expected a tc rate such as 2gbit\n", rate);
        return 2;
    }
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        fprintf(stderr, "dtbench simval: cannot find this program's directory (/proc/self/exe)\n");
        return 1;
    }
    self[len] = '\0';
    FMT(s.bindir, "%s", dirname(self));
    FMT(s.srcdir, "%s", getenv("DT_SRCDIR") ? getenv("DT_SRCDIR") : DT_SRCDIR_DEFAULT);
    const long nc = sysconf(_SC_NPROCESSORS_ONLN);
    s.cores = nc > 0 ? (int)nc : 1;
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
    FMT(s.dir, "%s", dir);
    mpi_env();
    const double t0 = now_s();
    printf("calibration (the only inputs the simulator is fitted to), on %d cores:\n", s.cores);
    int rc = 0;
    const int want_cluster = !quick && strcmp(cluster, "off") != 0;
    if (want_cluster) {
        const int up = sv_cluster_up(&s, rate, !strcmp(cluster, "on"));
        if (up < 0) rc = 1;
    }
    /* the runs of this session and what they need */
    const dt_simval_run **runs = calloc((size_t)dt_simval_n_runs, sizeof *runs);
    sv_row *rows = calloc((size_t)dt_simval_n_runs, sizeof *rows);
    char used[DT_SIMVAL_NPREC * 65] = {0};
    int n = 0, max_np = 2;
    if (!runs || !rows) rc = 1;
    for (int i = 0; rc == 0 && i < dt_simval_n_runs; i++) {
        const dt_simval_run *r = &dt_simval_runs[i];
        if ((quick && !r->quick) || (r->cluster && !s.cluster_mpirun[0]) || (only && !sv_listed(only, r->name)))
            continue;
        runs[n++] = r;
        used[r->prec * 65 + r->mbs] = 1;
        if (!r->cluster && r->np > max_np) max_np = r->np;
    }
    used[DT_SIMVAL_FP32 * 65 + 16] = 1; /* the co-located profile's lone run */
    dts_hw hw;
    dts_hw_default(&hw);
    if (rc == 0) rc = sv_profiles(&s, used);
    /* the contention of 2 ranks, and of the most ranks a run puts on this machine */
    if (rc == 0) rc = sv_colocated(&s, 2, &hw);
    if (rc == 0 && max_np > 2) rc = sv_colocated(&s, max_np > 4 ? 4 : max_np, &hw);
    if (rc == 0) rc = sv_link(&s, s.mpirun, "shared-memory", &hw.intra);
    hw.inter = hw.intra;
    if (rc == 0 && s.cluster_mpirun[0]) rc = sv_link(&s, s.cluster_mpirun, "cluster", &hw.inter);
    char hw_path[PATH_MAX + 64];
    FMT(hw_path, "%s/hw-calibrated.json", s.dir);
    if (rc == 0) {
        snprintf(hw.name, sizeof hw.name, "simval-calibrated");
        snprintf(hw.source, sizeof hw.source,
                 "calibrated by dtbench simval: links from dtbench allreduce --json (shared memory%s), contention "
                 "from co-located profiles; compute from each run's single-rank profile",
                 s.cluster_mpirun[0] ? "; inter: the emulated cluster's shaped link" : "");
        if (dts_hw_save(hw_path, &hw) != DT_OK) {
            fprintf(stderr, "dtbench simval: %s\n", dt_last_error());
            rc = 1;
        } else {
            printf("  hardware:   %s (contention by ranks computing at once:", hw_path);
            for (int k = 1; k <= hw.n_contention; k++) printf(" %d: %.3f", k, hw.contention[k - 1]);
            printf(")\n");
        }
    }
    if (rc == 0) printf("calibrated in %.1f s\n\nvalidation runs (measured, then predicted):\n", now_s() - t0);
    const double t1 = now_s();
    for (int rep = 1; rc == 0 && rep <= s.repeats; rep++)
        for (int i = 0; rc == 0 && i < n; i++) rc = sv_measure(&s, runs[i], rep);
    if (rc == 0) printf("measured in %.1f s\n", now_s() - t1);
    for (int i = 0; rc == 0 && i < n; i++) rc = sv_predict(&s, runs[i], hw_path, &rows[i]);
    if (rc == 0) sv_report(&s, runs, rows, n);
    sv_cluster_down(&s);
    free(runs);
    free(rows);
    char cmd[PATH_MAX + 32];
    if (!keep) {
        FMT(cmd, "rm -rf '%s'", s.dir);
        if (system(cmd) != 0) fprintf(stderr, "dtbench simval: could not remove %s\n", s.dir);
    } else {
        printf("traces and logs kept in %s\n", s.dir);
    }
    return rc;
}
