/* dtsim_analyze.c: `dtsim analyze [--skip N] [--compare] [--csv] TRACE...`:
 * where each rank's step time goes (lib/'s dt_breakdown_all, docs/
 * breakdown.md), for real runs and simulations alike, in the manner of
 * Holistic Trace Analysis' temporal breakdown and comm/compute overlap.
 *
 * A run is one trace file (dtsim's holds every rank; a merged file several),
 * a real run's name whose rank files exist (run.json for run.rank0.json,
 * run.rank1.json, ..., as dtviz takes it), or consecutive rank files of one
 * run (run.rank0.json run.rank1.json: a shell glob). Each file is analysed
 * on its own clock, rank by rank.
 *
 * Output: one table, a row per run and rank: the step time, then the five
 * categories that partition it (ms per step and % of the step), then the
 * communication overlapped with compute (and its share of all
 * communication) and, on pipeline stages, `dtbench bubbles`' bubble. With
 * several ranks a run gets a mean row; with --compare (two runs: a real
 * run and its simulation) the rows of a rank sit together with B - A
 * under them. --csv prints the rank rows as CSV. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dt_file.h"
#include "dtsim_prog.h"

typedef struct dtsim_an_run {
    char label[16];  /* "A", "B", ... */
    const char *arg; /* the first argument it came from */
    char tool[32];
    int n_files;
    dt_breakdown *bd; /* (n_bd) by file, then pid */
    int *stage;       /* (n_bd) the pipeline stage of pid_of[k] (its instructions' "stage"), -1 none */
    int *pid_of;      /* (n_bd) as read (bd is sorted by pid afterwards) */
    int n_bd;
} dtsim_an_run;

/* "PREFIX.rank<digits>.json": the length of PREFIX, or 0 when path is not a rank file. */
static size_t dtsim_an_rank_prefix(const char *path)
{
    const size_t len = strlen(path);
    if (len < 11 || strcmp(path + len - 5, ".json") != 0) return 0;
    size_t d = len - 5;
    while (d > 0 && path[d - 1] >= '0' && path[d - 1] <= '9') d--;
    if (d == len - 5 || d < 6 || strncmp(path + d - 5, ".rank", 5) != 0) return 0;
    return d - 5;
}

/* Read one file and append its ranks' breakdowns to r; 0 or the exit status after one line. */
static int dtsim_an_add_file(dtsim_an_run *r, const char *path, int skip)
{
    dt_trace *t = NULL;
    dt_status st = dt_trace_read(path, &t);
    if (st != DT_OK) return dtsim_fail(st);
    if (r->n_files == 0) dt_escape(t->tool, r->tool, sizeof r->tool); /* printed: a file's control bytes escaped */
    dt_breakdown *bd = NULL;
    int n = 0;
    st = dt_breakdown_all(t->events, t->n_events, skip, &bd, &n);
    if (st != DT_OK) {
        dt_trace_free(t);
        fprintf(stderr, PROG ": analyze: %s: %s\n", path, dtsim_last_error());
        return dtsim_input_code(st);
    }
    dt_breakdown *grown = realloc(r->bd, (size_t)(r->n_bd + n) * sizeof *grown);
    int *stages = grown ? realloc(r->stage, (size_t)(r->n_bd + n) * sizeof *stages) : NULL;
    if (grown) r->bd = grown;
    if (stages) r->stage = stages;
    int *pids = stages ? realloc(r->pid_of, (size_t)(r->n_bd + n) * sizeof *pids) : NULL;
    if (pids) r->pid_of = pids;
    if (!grown || !stages || !pids) {
        free(bd);
        dt_trace_free(t);
        fprintf(stderr, PROG ": analyze: %s: out of memory\n", path);
        return 1;
    }
    memcpy(grown + r->n_bd, bd, (size_t)n * sizeof *bd);
    /* each rank's stage, from its pipeline instructions (bd is in ascending pid) */
    for (int k = 0; k < n; k++) stages[r->n_bd + k] = -1, pids[r->n_bd + k] = bd[k].pid;
    for (size_t e = 0; e < t->n_events; e++) {
        const dt_trace_event *ev = &t->events[e];
        if (strcmp(ev->cat, "pipeline") != 0) continue;
        const double sv = dt_trace_event_arg(ev, "stage", -1);
        int lo = 0, hi = n - 1;
        while (lo <= hi) { /* the pid's row */
            const int mid = (lo + hi) / 2;
            if (bd[mid].pid == ev->pid) {
                if (sv >= 0 && sv < 1e6) stages[r->n_bd + mid] = (int)sv;
                break;
            }
            if (bd[mid].pid < ev->pid) lo = mid + 1;
            else hi = mid - 1;
        }
    }
    dt_trace_free(t);
    free(bd);
    r->n_bd += n;
    r->n_files++;
    return 0;
}

static int dtsim_an_cmp_pid(const void *a, const void *b)
{
    const int x = ((const dt_breakdown *)a)->pid, y = ((const dt_breakdown *)b)->pid;
    return (x > y) - (x < y);
}

/* The runs from the arguments (see the top of the file); 0 or the exit status after one line. */
static int dtsim_an_load(const char **args, int n_args, int skip, dtsim_an_run *runs, int *n_runs)
{
    *n_runs = 0;
    for (int i = 0; i < n_args; i++) {
        const char *a = args[i];
        struct stat sb;
        const size_t pre = dtsim_an_rank_prefix(a);
        dtsim_an_run *prev = *n_runs > 0 ? &runs[*n_runs - 1] : NULL;
        int rc;
        if (prev && pre > 0 && stat(a, &sb) == 0 && dtsim_an_rank_prefix(prev->arg) == pre &&
            !strncmp(prev->arg, a, pre)) { /* the next rank file of the run before */
            if ((rc = dtsim_an_add_file(prev, a, skip)) != 0) return rc;
            continue;
        }
        dtsim_an_run *r = &runs[(*n_runs)++];
        memset(r, 0, sizeof *r);
        r->arg = a;
        if (*n_runs <= 26) snprintf(r->label, sizeof r->label, "%c", 'A' + *n_runs - 1);
        else snprintf(r->label, sizeof r->label, "%d", *n_runs);
        const size_t len = strlen(a);
        if (stat(a, &sb) != 0 && len > 5 && !strcmp(a + len - 5, ".json")) { /* run.json: run.rank<r>.json */
            char f[1100];
            for (int k = 0;; k++) {
                snprintf(f, sizeof f, "%.*s.rank%d.json", (int)(len - 5), a, k);
                if (stat(f, &sb) != 0) break;
                if ((rc = dtsim_an_add_file(r, f, skip)) != 0) return rc;
            }
            if (r->n_files > 0) continue;
            fprintf(stderr, PROG ": analyze: %s: no such trace (nor %.*s.rank0.json, a real run's rank files)\n", a,
                    (int)(len - 5), a);
            return 2;
        }
        if ((rc = dtsim_an_add_file(r, a, skip)) != 0) return rc;
    }
    for (int i = 0; i < *n_runs; i++) qsort(runs[i].bd, (size_t)runs[i].n_bd, sizeof *runs[i].bd, dtsim_an_cmp_pid);
    return 0;
}

/* ---- the table ----------------------------------------------------------- */

#define MS 1e6

/* Category c of b in ns per step; c == DT_BREAKDOWN_N_CATS: overlapped communication. */
static double dtsim_an_ns(const dt_breakdown *b, int c)
{
    return c < DT_BREAKDOWN_N_CATS ? dt_breakdown_per_step(b, (dt_breakdown_cat)c)
                                   : (double)b->comm_overlapped_ns / (double)b->steps;
}

/* The mean of runs' ranks: per-step figures averaged (a row for the table). */
typedef struct dtsim_an_row {
    double step, cat[DT_BREAKDOWN_N_CATS + 1]; /* ns per step; [N_CATS]: overlapped */
    double bubble;                             /* NAN: not a stage */
} dtsim_an_row;

static dtsim_an_row dtsim_an_row_of(const dt_breakdown *b)
{
    dtsim_an_row r;
    r.step = b->step_ns;
    for (int c = 0; c <= DT_BREAKDOWN_N_CATS; c++) r.cat[c] = dtsim_an_ns(b, c);
    r.bubble = b->pipeline ? b->bubble : NAN;
    return r;
}

static dtsim_an_row dtsim_an_mean(const dtsim_an_run *r)
{
    dtsim_an_row m;
    memset(&m, 0, sizeof m);
    int stages = 0;
    double bub = 0;
    for (int i = 0; i < r->n_bd; i++) {
        const dtsim_an_row x = dtsim_an_row_of(&r->bd[i]);
        m.step += x.step / r->n_bd;
        for (int c = 0; c <= DT_BREAKDOWN_N_CATS; c++) m.cat[c] += x.cat[c] / r->n_bd;
        if (!isnan(x.bubble)) bub += x.bubble, stages++;
    }
    m.bubble = stages > 0 ? bub / stages : NAN;
    return m;
}

static void dtsim_an_print_row(const char *run, const char *rank, const dtsim_an_row *x)
{
    printf("%-4s %6s %9.3f |", run, rank, x->step / MS);
    for (int c = 0; c < DT_BREAKDOWN_N_CATS; c++)
        printf(" %7.3f %5.1f%%", x->cat[c] / MS, x->step > 0 ? 100.0 * x->cat[c] / x->step : 0.0);
    const double comm = x->cat[DT_BREAKDOWN_N_CATS] + x->cat[DT_BREAKDOWN_COMM_EXPOSED];
    printf(" | %7.3f", x->cat[DT_BREAKDOWN_N_CATS] / MS);
    if (comm > 0) printf(" %5.1f%%", 100.0 * x->cat[DT_BREAKDOWN_N_CATS] / comm);
    else printf(" %6s", "-");
    if (!isnan(x->bubble)) printf(" %7.4f\n", x->bubble);
    else printf(" %7s\n", "-");
}

/* b - a: ms and percentage points of the step. */
static void dtsim_an_print_delta(const char *rank, const dtsim_an_row *a, const dtsim_an_row *b)
{
    printf("%-4s %6s %+9.3f |", "B-A", rank, (b->step - a->step) / MS);
    for (int c = 0; c < DT_BREAKDOWN_N_CATS; c++) {
        const double pa = a->step > 0 ? 100.0 * a->cat[c] / a->step : 0.0;
        const double pb = b->step > 0 ? 100.0 * b->cat[c] / b->step : 0.0;
        printf(" %+7.3f %+5.1f", (b->cat[c] - a->cat[c]) / MS, pb - pa);
    }
    printf(" | %+7.3f %6s", (b->cat[DT_BREAKDOWN_N_CATS] - a->cat[DT_BREAKDOWN_N_CATS]) / MS, "");
    if (!isnan(a->bubble) && !isnan(b->bubble)) printf(" %+7.4f\n", b->bubble - a->bubble);
    else printf(" %7s\n", "-");
}

static void dtsim_an_header(void)
{
    printf("%-4s %6s %9s |", "run", "rank", "step ms");
    for (int c = 0; c < DT_BREAKDOWN_N_CATS; c++) printf(" %14s", dt_breakdown_cat_name((dt_breakdown_cat)c));
    printf(" | %14s %7s\n", "comm overlapped", "bubble");
}

static void dtsim_an_csv(const dtsim_an_run *runs, int n_runs)
{
    printf("run,trace,tool,rank,steps,first_iter,last_iter,step_ms,compute_ms,optimizer_ms,comm_exposed_ms,"
           "waiting_ms,idle_ms,comm_overlapped_ms,bubble,bubble_ms\n");
    for (int i = 0; i < n_runs; i++)
        for (int k = 0; k < runs[i].n_bd; k++) {
            const dt_breakdown *b = &runs[i].bd[k];
            printf("%s,%s,%s,%d,%lld,%lld,%lld,%.6f", runs[i].label, runs[i].arg, runs[i].tool, b->pid,
                   (long long)b->steps, (long long)b->first_iter, (long long)b->last_iter, b->step_ns / MS);
            for (int c = 0; c <= DT_BREAKDOWN_N_CATS; c++) printf(",%.6f", dtsim_an_ns(b, c) / MS);
            if (b->pipeline) printf(",%.6f,%.6f\n", b->bubble, b->bubble_ns / MS);
            else printf(",,\n");
        }
}

/* A pipelined run's compute per step by stage (the mean of its ranks), and
 * most over least: the imbalance the bubble formula does not assume. */
static void dtsim_an_stages(const dtsim_an_run *r)
{
    int p = 0;
    for (int k = 0; k < r->n_bd; k++)
        if (r->stage[k] + 1 > p) p = r->stage[k] + 1;
    if (p < 2 || p > r->n_bd) return;
    if (p < 2) return;
    double *sum = calloc((size_t)p, sizeof *sum);
    int *cnt = calloc((size_t)p, sizeof *cnt);
    if (sum && cnt) {
        for (int k = 0; k < r->n_bd; k++)
            for (int j = 0; j < r->n_bd; j++) /* bd[k]'s stage, by its pid */
                if (r->pid_of[j] == r->bd[k].pid && r->stage[j] >= 0) {
                    sum[r->stage[j]] += dt_breakdown_per_step(&r->bd[k], DT_BREAKDOWN_COMPUTE);
                    cnt[r->stage[j]]++;
                    break;
                }
        double hi = 0, lo = INFINITY;
        printf("%s: compute per step by stage, ms (mean of its ranks):", r->label);
        for (int i = 0; i < p; i++) {
            if (!cnt[i]) continue;
            const double x = sum[i] / cnt[i] * 1e-6;
            printf(" %d: %.3f%s", i, x, i + 1 < p ? "," : "");
            if (x > hi) hi = x;
            if (x < lo) lo = x;
        }
        printf("; most/least %.3f\n", lo > 0 ? hi / lo : NAN);
    }
    free(sum);
    free(cnt);
}

static void dtsim_an_table(const dtsim_an_run *runs, int n_runs, int skip, int compare)
{
    for (int i = 0; i < n_runs; i++) {
        const dtsim_an_run *r = &runs[i];
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (int k = 0; k < r->n_bd; k++) {
            if (r->bd[k].first_iter < lo) lo = r->bd[k].first_iter;
            if (r->bd[k].last_iter > hi) hi = r->bd[k].last_iter;
        }
        char files[32] = "";
        if (r->n_files > 1) snprintf(files, sizeof files, " in %d files", r->n_files);
        printf("%s: %s (%s, %d rank%s%s), steps %lld..%lld\n", r->label, r->arg, r->tool, r->n_bd,
               r->n_bd == 1 ? "" : "s", files, (long long)lo, (long long)hi);
    }
    printf("time per step and rank, ms and %% of the step (--skip %d: the steps before %d left out)%s:\n", skip, skip,
           compare ? "; B-A in ms and percentage points" : "");
    dtsim_an_header();
    char rank[16];
    if (compare) {
        const dtsim_an_run *a = &runs[0], *b = &runs[1];
        int ia = 0, ib = 0;
        while (ia < a->n_bd || ib < b->n_bd) {
            const int pa = ia < a->n_bd ? a->bd[ia].pid : INT32_MAX, pb = ib < b->n_bd ? b->bd[ib].pid : INT32_MAX;
            const int pid = pa < pb ? pa : pb;
            snprintf(rank, sizeof rank, "%d", pid);
            dtsim_an_row xa, xb;
            if (pa == pid) xa = dtsim_an_row_of(&a->bd[ia]), dtsim_an_print_row("A", rank, &xa);
            if (pb == pid) xb = dtsim_an_row_of(&b->bd[ib]), dtsim_an_print_row("B", rank, &xb);
            if (pa == pid && pb == pid) dtsim_an_print_delta(rank, &xa, &xb);
            ia += pa == pid;
            ib += pb == pid;
        }
        if (a->n_bd > 1 || b->n_bd > 1) {
            const dtsim_an_row ma = dtsim_an_mean(a), mb = dtsim_an_mean(b);
            dtsim_an_print_row("A", "mean", &ma);
            dtsim_an_print_row("B", "mean", &mb);
            dtsim_an_print_delta("mean", &ma, &mb);
        }
    } else {
        for (int i = 0; i < n_runs; i++) {
            for (int k = 0; k < runs[i].n_bd; k++) {
                snprintf(rank, sizeof rank, "%d", runs[i].bd[k].pid);
                const dtsim_an_row x = dtsim_an_row_of(&runs[i].bd[k]);
                dtsim_an_print_row(runs[i].label, rank, &x);
            }
            if (runs[i].n_bd > 1) {
                const dtsim_an_row m = dtsim_an_mean(&runs[i]);
                dtsim_an_print_row(runs[i].label, "mean", &m);
            }
        }
    }
    for (int i = 0; i < n_runs; i++) dtsim_an_stages(&runs[i]);
    printf("compute + optimizer + comm exposed + waiting + idle = step; comm overlapped runs under compute or the\n"
           "optimizer (its share of all communication after it); waiting: inside a pipeline stage's step window\n"
           "with no other span; bubble: the stage's mean bubble as `dtbench bubbles` prints it (docs/breakdown.md)\n");
}

int dtsim_cmd_analyze(const dtsim_opts *o, const char **args, int n_args)
{
    if (n_args == 0) {
        fprintf(stderr, PROG ": analyze: expected traces after the flags (run.json, run.rank0.json, sim.json ...)\n");
        return 2;
    }
    dtsim_an_run *runs = calloc((size_t)n_args, sizeof *runs);
    if (!runs) {
        fprintf(stderr, PROG ": analyze: out of memory\n");
        return 1;
    }
    int n_runs = 0;
    int rc = dtsim_an_load(args, n_args, o->skip, runs, &n_runs);
    if (rc == 0 && o->compare && n_runs != 2) {
        fprintf(stderr, PROG ": --compare: expected two runs (e.g. REAL.json SIM.json), got %d\n", n_runs);
        rc = 2;
    }
    if (rc == 0) {
        if (o->csv) dtsim_an_csv(runs, n_runs);
        else dtsim_an_table(runs, n_runs, o->skip, o->compare);
        fflush(stdout);
    }
    for (int i = 0; i < n_runs; i++) free(runs[i].bd), free(runs[i].stage), free(runs[i].pid_of);
    free(runs);
    return rc;
}
