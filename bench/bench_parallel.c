/* bench_parallel.c: the multi-rank benchmarks run under mpirun:
 * `dtbench allreduce` (the nccl-tests table of our algorithms), pipeline
 * (every schedule's step time, bubbles and memory per stage), tp (tensor
 * parallelism's allreduces against the formula), bubbles (a stage's
 * mean bubble from dtrain traces, per rank in a file of several) and flows
 * (how a merged trace's flow events pair). */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "dt_file.h"
#include "dtbench.h"

/* Allreduce: the nccl-tests table (size, count, type, then time, algbw,
 * busbw and #wrong) for the ring, tree, naive and mpi algorithms side by
 * side, float32 sums from --min-bytes to --max-bytes doubling, run under
 * mpirun. Per size and algorithm: warm-up calls, a barrier, `iters` timed
 * calls; time = the largest over ranks of the mean per-call time; algbw =
 * bytes / time (1e9 B/s), busbw = algbw * 2(n-1)/n. #wrong = elements (over
 * all ranks) that differ from the exact sum after one more call on freshly
 * filled buffers (rank-dependent small integers, so every order of addition
 * gives the exact sum). Timed calls reuse the buffer in place: its values
 * grow n-fold per call and saturate at +inf (all positive: never NaN), which
 * costs the same as finite values on this CPU. */
enum { AR_TAG = 7 }; /* bench's own gather of timings to rank 0 (outside the collectives' tags) */

static float ar_value(size_t i, int rank) { return (float)(1 + (i * 7 + (size_t)rank * 13) % 61); }

/* Rank 0 gets v[0] = max over ranks of v[0] and v[1] = the sum of v[1]. */
static void ar_gather(dt_comm *c, double v[2])
{
    dt_comm_request *q;
    if (c->rank != 0) {
        if (c->ops->isend(c, v, 2 * sizeof(double), 0, AR_TAG, &q) != DT_OK || c->ops->wait(c, q) != DT_OK)
            dtbench_die("gather timings");
        return;
    }
    for (int i = 1; i < c->size; i++) {
        double w[2];
        if (c->ops->irecv(c, w, sizeof w, i, AR_TAG, &q) != DT_OK || c->ops->wait(c, q) != DT_OK)
            dtbench_die("gather timings");
        v[0] = w[0] > v[0] ? w[0] : v[0];
        v[1] += w[1];
    }
}

/* --json FILE: rank 0's table as {"format":"dtbench-allreduce","version":1,
 * "ranks":n,"communicator":...,"chunk_bytes":...,"rows":[{"algo","bytes",
 * "time_us","algbw","busbw","wrong"}, ...]} (one row per size and algorithm
 * that ran; sim/fit.c reads it for the simulator's link calibration). */
int dtbench_cmd_allreduce(int64_t chunk_bytes, int64_t min_bytes, int64_t max_bytes, int iters_flag,
                          const char *json_path)
{
    dt_comm *c;
    if (dt_comm_mpi_world(&c) != DT_OK) dtbench_die("allreduce");
    const int n = c->size, r = c->rank;
    enum { NALGO = 4 };
    const dt_allreduce_algo algos[NALGO] = {DT_ALLREDUCE_RING, DT_ALLREDUCE_TREE, DT_ALLREDUCE_NAIVE, DT_ALLREDUCE_MPI};
    const size_t max_count = (size_t)max_bytes / sizeof(float);
    float *buf = malloc((max_count ? max_count : 1) * sizeof(float));
    if (!buf) dtbench_die("out of memory");
    const double bus = 2.0 * (n - 1) / n;
    json_t *rows = r == 0 && json_path ? json_array() : NULL;
    if (r == 0 && json_path && !rows) dtbench_die("out of memory");
    if (r == 0) {
        printf("# dtbench allreduce: %d rank(s), '%s' communicator, float32 sum in place; ring chunk %lld bytes; "
               "%s\n",
               n, c->ops->name, (long long)chunk_bytes,
               iters_flag ? "--iters timed calls per size" : "timed calls per size: 1 GiB / size, 10 to 5000");
        printf("# time = max over ranks of the mean per call; algbw = bytes / time; busbw = algbw * 2(n-1)/n\n");
        printf("#%31s", "");
        for (int a = 0; a < NALGO; a++) printf("  %-33s", dt_allreduce_algo_name(algos[a]));
        printf("\n#%11s %12s %6s", "size", "count", "type");
        for (int a = 0; a < NALGO; a++) printf("  %10s %7s %7s %6s", "time", "algbw", "busbw", "#wrong");
        printf("\n#%11s %12s %6s", "(B)", "(elements)", "");
        for (int a = 0; a < NALGO; a++) printf("  %10s %7s %7s %6s", "(us)", "(GB/s)", "(GB/s)", "");
        printf("\n");
        fflush(stdout);
    }
    double ratio_size[64], ratio[64];
    int nratio = 0;
    for (size_t count = (size_t)min_bytes / sizeof(float); count <= max_count && count > 0; count *= 2) {
        const size_t bytes = count * sizeof(float);
        const size_t auto_iters = ((size_t)1 << 30) / bytes;
        const int iters = iters_flag ? iters_flag : auto_iters < 10 ? 10 : auto_iters > 5000 ? 5000 : (int)auto_iters;
        const int warm = iters / 10 > 2 ? iters / 10 : 2;
        double busbw[NALGO] = {0};
        if (r == 0) printf("%12zu %12zu %6s", bytes, count, "float");
        for (int a = 0; a < NALGO; a++) {
            dt_collective_opts o = {.chunk_bytes = algos[a] == DT_ALLREDUCE_RING ? (size_t)chunk_bytes : 0};
            for (size_t i = 0; i < count; i++) buf[i] = ar_value(i, r);
            dt_status st = dt_comm_allreduce(c, buf, count, algos[a], &o);
            if (st == DT_ERR_UNSUPPORTED) { /* the same answer on every rank: no native allreduce */
                if (r == 0) printf("  %10s %7s %7s %6s", "n/a", "", "", "");
                continue;
            }
            if (st != DT_OK) dtbench_die(dt_allreduce_algo_name(algos[a]));
            for (int it = 1; it < warm; it++)
                if (dt_comm_allreduce(c, buf, count, algos[a], &o) != DT_OK)
                    dtbench_die(dt_allreduce_algo_name(algos[a]));
            if (c->ops->barrier(c) != DT_OK) dtbench_die("barrier");
            int64_t t0 = dt_time_ns();
            for (int it = 0; it < iters; it++)
                if (dt_comm_allreduce(c, buf, count, algos[a], &o) != DT_OK)
                    dtbench_die(dt_allreduce_algo_name(algos[a]));
            double v[2] = {(dt_time_ns() - t0) * 1e-9 / iters, 0};
            // the check: one more call on fresh values, compared with the exact sum
            for (size_t i = 0; i < count; i++) buf[i] = ar_value(i, r);
            if (dt_comm_allreduce(c, buf, count, algos[a], &o) != DT_OK) dtbench_die(dt_allreduce_algo_name(algos[a]));
            for (size_t i = 0; i < count; i++) {
                float want = 0;
                for (int q = 0; q < n; q++) want += ar_value(i, q);
                v[1] += buf[i] != want;
            }
            ar_gather(c, v);
            double algbw = bytes / v[0] / 1e9;
            busbw[a] = algbw * bus;
            if (r == 0) printf("  %10.2f %7.2f %7.2f %6.0f", v[0] * 1e6, algbw, busbw[a], v[1]);
            if (rows && json_array_append_new(rows, json_pack("{s:s, s:I, s:f, s:f, s:f, s:I}", "algo",
                                                              dt_allreduce_algo_name(algos[a]), "bytes",
                                                              (json_int_t)bytes, "time_us", v[0] * 1e6, "algbw", algbw,
                                                              "busbw", busbw[a], "wrong", (json_int_t)v[1])) != 0)
                dtbench_die("out of memory");
        }
        if (r == 0) printf("\n"), fflush(stdout);
        if (bytes >= 256 * 1024 && busbw[3] > 0 && nratio < 64)
            ratio_size[nratio] = (double)bytes, ratio[nratio++] = busbw[0] / busbw[3];
    }
    if (r == 0 && nratio > 0) {
        printf("# ring busbw / mpi busbw, sizes >= 256 KiB (goal: >= 0.9, above 1 at 64 MiB)\n");
        for (int i = 0; i < nratio; i++) printf("%12.0f %6.3f\n", ratio_size[i], ratio[i]);
    }
    int rc = 0;
    if (rows) { /* the header on one line, then one row per line */
        json_t *head = json_pack("{s:s, s:i, s:i, s:s, s:I}", "format", "dtbench-allreduce", "version", 1, "ranks", n,
                                 "communicator", c->ops->name, "chunk_bytes", (json_int_t)chunk_bytes);
        char *h = head ? json_dumps(head, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        dt_file_out *out = NULL; /* whole or not at all (dt_file.h) */
        int bad = !h || dt_file_out_open(json_path, "--json", &out) != DT_OK;
        if (out) {
            FILE *fp = dt_file_out_stream(out);
            h[strlen(h) - 1] = '\0'; /* drop the closing brace: "rows" follows */
            bad |= fprintf(fp, "%s,\"rows\":[\n", h) < 0;
            for (size_t i = 0; i < json_array_size(rows); i++) {
                char *row =
                    json_dumps(json_array_get(rows, i), JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
                bad |= !row || fprintf(fp, "%s%s\n", row, i + 1 < json_array_size(rows) ? "," : "") < 0;
                free(row);
            }
            bad |= fprintf(fp, "]}\n") < 0;
            if (bad) {
                const int e = errno;
                dt_file_out_abort(out);
                (void)DT_FAIL(DT_ERR_IO, "--json %s: write failed (%s)", json_path, strerror(e ? e : EIO));
            } else bad = dt_file_out_commit(out) != DT_OK;
        }
        if (bad) {
            fprintf(stderr, "dtbench allreduce: %s\n", h ? dt_last_error() : "out of memory");
            rc = 1;
        }
        free(h);
        json_decref(head);
        json_decref(rows);
    }
    free(buf);
    dt_comm_free(c);
    if (dt_comm_finalize() != DT_OK) dtbench_die("finalize");
    return rc;
}

/* ---- pipeline bubbles (dt_trace_stats.h) ------------------------------------ */

/* One line per trace file: the bubble of its rank's stage (dt_bubble_stats_trace)
 * as key=value pairs: mean over the steps >= skip of bubble (forward, backward
 * and optim_step are busy) and bubble_fb (forward and backward only), the mean
 * window, and forward / backward / optimizer milliseconds per event on the
 * stage (how balanced the stages are). Exit 1 when a file cannot be used. */
static int dbl_cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* How disturbed a run's timing was: over the forward (then backward, B,
 * W) instructions of pid's steps >= skip, per model chunk (the `chunk`
 * extra: chunks hold different layers), the time above the median duration
 * of their kind as a fraction of their total, (sum (d - median)+) / sum d.
 * Every micro-batch does the same work, so a quiet machine gives a few
 * percent; another process taking the core shows up here. -1 when there is
 * nothing to measure. */
static double trace_noise(const dt_trace *t, int pid, int skip)
{
    static const char *const kinds[4] = {"forward", "backward", "backward_b", "backward_w"};
    double excess = 0, total = 0;
    double *d = malloc((t->n_events ? t->n_events : 1) * sizeof *d);
    if (!d) dtbench_die("out of memory");
    int chunks = 1;
    for (size_t i = 0; i < t->n_events; i++) {
        const double c = dt_trace_event_arg(&t->events[i], "chunk", 0);
        if (c >= chunks && c < 64) chunks = (int)c + 1;
    }
    for (int k = 0; k < 4 * chunks; k++) {
        size_t n = 0;
        for (size_t i = 0; i < t->n_events; i++) {
            const dt_trace_event *e = &t->events[i];
            if (e->ph == DT_TRACE_COMPLETE && strcmp(e->cat, "pipeline") == 0 && strcmp(e->name, kinds[k % 4]) == 0 &&
                dt_trace_event_arg(e, "chunk", 0) == k / 4 && e->iter != DT_TRACE_NONE && e->iter >= skip &&
                (pid < 0 || e->pid == pid))
                d[n++] = (double)e->dur_ns;
        }
        if (n == 0) continue;
        qsort(d, n, sizeof *d, dbl_cmp);
        const double med = d[n / 2];
        for (size_t i = 0; i < n; i++) total += d[i], excess += d[i] > med ? d[i] - med : 0;
    }
    free(d);
    return total > 0 ? excess / total : -1;
}

static int int_cmp(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The distinct pids of t's events (pipe: of its pipeline instructions only), ascending, in *out (malloc'd). */
static dt_status trace_pids_of(const dt_trace *t, int pipe, int **out, int *n)
{
    *n = 0;
    *out = malloc((t->n_events + 1) * sizeof **out);
    if (!*out) return DT_FAIL(DT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < t->n_events; i++) {
        const dt_trace_event *e = &t->events[i];
        if (!pipe || (e->ph == DT_TRACE_COMPLETE && strcmp(e->cat, "pipeline") == 0 && e->iter != DT_TRACE_NONE))
            (*out)[(*n)++] = e->pid;
    }
    qsort(*out, (size_t)*n, sizeof **out, int_cmp);
    int k = 0;
    for (int i = 0; i < *n; i++)
        if (k == 0 || (*out)[i] != (*out)[k - 1]) (*out)[k++] = (*out)[i];
    *n = k;
    return DT_OK;
}
static dt_status trace_pids(const dt_trace *t, int **out, int *n) { return trace_pids_of(t, 0, out, n); }
static dt_status trace_pipeline_pids(const dt_trace *t, int **out, int *n) { return trace_pids_of(t, 1, out, n); }

int dtbench_cmd_bubbles(int argc, char **argv)
{
    int skip = 1, n_files = 0, bad = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--skip") == 0) {
            int64_t v;
            if (i + 1 >= argc) {
                fprintf(stderr, "dtbench bubbles: --skip: expected a value\n");
                return 2;
            }
            if (dt_args_parse_int64("dtbench", "--skip", argv[++i], DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 0, 1e9, &v) !=
                DT_ARGS_OK)
                return 2;
            skip = (int)v;
        } else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "dtbench bubbles: '%s': unknown flag (expected --skip N and trace files)\n", argv[i]);
            return 2;
        } else {
            n_files++;
        }
    }
    if (n_files == 0) {
        fprintf(stderr, "dtbench bubbles: expected trace files (run.rank0.json run.rank1.json ...)\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--skip") == 0) {
            i++;
            continue;
        }
        dt_trace *t = NULL;
        int *pids = NULL, n_pids = 0;
        dt_status st = dt_trace_read(argv[i], &t);
        if (st == DT_OK) st = trace_pipeline_pids(t, &pids, &n_pids);
        /* a rank's file: one line; a file of several ranks (merged, dtsim's): one per rank, "rank=R" after the name */
        for (int k = 0; st == DT_OK && k < (n_pids > 1 ? n_pids : 1); k++) {
            dt_bubble_stats b;
            st = dt_bubble_stats_trace(t, n_pids > 1 ? pids[k] : -1, skip, &b);
            if (st != DT_OK) break;
            char rank[32] = "";
            if (n_pids > 1) snprintf(rank, sizeof rank, " rank=%d", pids[k]);
            printf("%s%s stage=%d steps=%d mean_steps=%d bubble=%.4f bubble_fb=%.4f window_ms=%.3f "
                   "forward_ms=%.3f backward_ms=%.3f optim_ms=%.3f noise=%.4f run_fb=%.4f\n",
                   argv[i], rank, b.stage, b.n_steps, b.n_mean, b.mean, b.mean_fb, b.mean_window_ns * 1e-6,
                   b.n_forward ? b.forward_ns * 1e-6 / b.n_forward : NAN,
                   b.n_backward ? b.backward_ns * 1e-6 / b.n_backward : NAN,
                   b.n_optim ? b.optim_ns * 1e-6 / b.n_optim : NAN, trace_noise(t, b.pid, skip), b.run_fb);
            dt_bubble_stats_free(&b);
        }
        if (st != DT_OK) {
            char why[4 * 512 + 1]; /* the reader's messages mostly name the file already; escaped (dt_escape) */
            dt_escape(dt_last_error(), why, sizeof why);
            if (strncmp(why, argv[i], strlen(argv[i])) == 0) fprintf(stderr, "dtbench bubbles: %s\n", why);
            else fprintf(stderr, "dtbench bubbles: %s: %s\n", argv[i], why);
            bad = 1;
        }
        free(pids);
        dt_trace_free(t);
    }
    return bad;
}

/* ---- flows of a merged trace (dt_trace_stats.h) ------------------------------ */

/* One line per trace file: its ranks and events, its flow events and how
 * they pair (dt_trace_flow_stats_trace), the smallest end - start and the
 * tolerance (the merged file's clock errors), the alignment method. Exit 1
 * when a file cannot be read or its flows are unpaired or early. */
int dtbench_cmd_flows(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "dtbench flows: expected trace files (a merged run.json, a dtsim trace)\n");
        return 2;
    }
    int bad = 0;
    for (int i = 2; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "dtbench flows: '%s': unknown flag (expected trace files)\n", argv[i]);
            return 2;
        }
    }
    for (int i = 2; i < argc; i++) {
        dt_trace *t = NULL;
        dt_trace_flow_stats f;
        if (dt_trace_read(argv[i], &t) != DT_OK || dt_trace_flow_stats_trace(t, &f) != DT_OK) {
            char why[4 * 512 + 1]; /* escaped: it may quote the file (dt_escape) */
            dt_escape(dt_last_error(), why, sizeof why);
            if (strncmp(why, argv[i], strlen(argv[i])) == 0) fprintf(stderr, "dtbench flows: %s\n", why);
            else fprintf(stderr, "dtbench flows: %s: %s\n", argv[i], why);
            dt_trace_free(t);
            bad = 1;
            continue;
        }
        int *pids = NULL, n_pids = 0;
        if (trace_pids(t, &pids, &n_pids) != DT_OK) dtbench_die("out of memory");
        char method[4 * sizeof t->merge.method]; /* from the file: escaped */
        printf("%s ranks=%d events=%zu flows=%zu pairs=%zu unpaired=%zu early=%zu judged=%zu min_lag_us=%.3f "
               "tolerance_us=%.3f method=%s\n",
               argv[i], n_pids, t->n_events, f.starts + f.ends, f.pairs, f.unpaired, f.early, f.judged,
               f.min_lag_ns * 1e-3, f.max_tol_ns * 1e-3,
               t->merge.method[0] ? dt_escape(t->merge.method, method, sizeof method) : "one-clock");
        if (f.unpaired || f.early) {
            fprintf(stderr,
                    "dtbench flows: %s: %zu unpaired flow ids, %zu ends before their starts beyond the "
                    "alignment's error\n",
                    argv[i], f.unpaired, f.early);
            bad = 1;
        }
        free(pids);
        dt_trace_free(t);
    }
    return bad;
}

/* Pipeline: every schedule and m in {2, 4, 8, 16} on p = the world size
 * stages (or --pipeline-model-parallel-size p with p x d ranks), run under
 * mpirun. Per (schedule, m): `steps` training steps of the equal-cost GPT
 * (--num-layers blocks split evenly, or --pipeline-split) with a trace to a
 * temporary file; each rank reads its trace back and computes its stage's
 * bubble (dt_bubble_stats_trace, steps after the first), rank 0 gathers
 * them (averaged over the d pipelines; every rank gets every figure, so all
 * agree to repeat a run whose compute times show another process took a
 * core, at most 3 runs, unless there are more ranks than cores) and prints the step time (mean of
 * steps after the first), the bubble per stage and its mean (optim_step
 * counted as busy, and forward/backward only), the kind's ideal bubble
 * (dt_schedule_bubble_ideal_chunks: equal stages, F = B = W), the ratio of
 * the measured ones to it for the flushing kinds (pipedream's per-step
 * bubble is not its idle share), and the trainer's per-stage peak
 * activation bytes and weight versions alive at once (from its summary).
 * interleaved-1f1b and zb-v run their default 2 chunks per stage; a
 * (schedule, m) the trainer refuses (interleaved-1f1b's m not a multiple
 * of p, blocks not a multiple of p x 2 chunks, --pipeline-split with
 * chunks) is a line saying so, the same on every rank. Activations cross
 * stages as MPI messages of B*T*C*4 bytes: unless the environment says
 * otherwise, Open MPI's shared-memory eager limit is raised above that, so
 * a send completes without the sender entering MPI again (see
 * bench/README.md). */
enum { PIPE_NV = 7, PIPE_ATTEMPTS = 3, PIPE_NKINDS = 7 };
#define PIPE_NOISE_MAX 0.05 /* a run noisier than this is repeated (at most PIPE_ATTEMPTS runs) */

static const char *pipe_path(char *buf, size_t n, const char *dir, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

/* The summary's pipeline arrays, into peak[p] and versions[p]. */
static void pipe_summary_figures(const char *path, int p, double *peak, double *versions)
{
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    json_t *pl = root ? json_object_get(root, "pipeline") : NULL;
    json_t *a = pl ? json_object_get(pl, "stage_peak_activation_bytes") : NULL;
    json_t *v = pl ? json_object_get(pl, "stage_weight_versions") : NULL;
    if (!json_is_array(a) || !json_is_array(v) || (int)json_array_size(a) != p || (int)json_array_size(v) != p) {
        fprintf(stderr, "dtbench pipeline: %s: no pipeline figures for %d stages in the summary\n", path, p);
        exit(1);
    }
    for (int s = 0; s < p; s++) {
        peak[s] = json_number_value(json_array_get(a, s));
        versions[s] = json_number_value(json_array_get(v, s));
    }
    json_decref(root);
}

/* 1 when the trainer runs kind k with m micro-batches (its default chunks
 * per stage, in *v); 0 with the reason in why[n] when it refuses. */
static int pipe_runs(dt_sched_kind k, int p, int L, const int *split, int m, int steps, int *v, char *why, size_t n)
{
    *v = 1;
    if (dt_sched_chunks_from_flags(k, p, L, 0, 0, v) != DT_OK || dt_schedule_check(k, p, *v, m, steps) != DT_OK) {
        snprintf(why, n, "%s", dt_last_error());
        return 0;
    }
    if (*v > 1 && split[0]) {
        snprintf(why, n, "--pipeline-split: its %d chunks per stage split the blocks evenly", *v);
        return 0;
    }
    return 1;
}

/* A custom GPT (L blocks, width C, 4 heads, context T) trained on micro-batches
 * of B with the given global batch for `steps` steps over comm: the runs of
 * dtbench pipeline and tp. */
static void bench_split_config(dt_train_config *cfg, int L, int C, int T, int B, int global, int steps, int threads,
                               dt_comm *comm)
{
    dt_train_config_default(cfg);
    snprintf(cfg->model_name, sizeof cfg->model_name, "custom");
    cfg->model.num_layers = L;
    cfg->model.hidden_size = C;
    cfg->model.num_heads = 4;
    cfg->model.seq_len = T;
    cfg->seq_length = T;
    cfg->micro_batch_size = B;
    cfg->global_batch_size = global;
    cfg->train_iters = steps;
    cfg->lr.warmup_iters = 1;
    cfg->lr.decay_iters = steps;
    cfg->eval_iters = 1;
    cfg->threads = threads;
    cfg->comm = comm;
}

/* dtbench tp: Megatron tensor parallelism for t = 1, 2, 4 (each dividing
 * the ranks; d = ranks / t data-parallel replicas): per step and rank, the
 * f/g allreduces counted in the trace and the bytes they send against the
 * formula 4 L m allreduces of B*T*C floats, each a ring sending 2(t-1)/t of
 * it; their time; the step time. */
int dtbench_cmd_tp(int threads, int B, int T, int L, int C, int steps)
{
    dt_comm *c;
    if (dt_comm_mpi_world(&c) != DT_OK) dtbench_die("tp");
    const int n = c->size, r = c->rank, m = 2;
    char tmpl[64] = "/tmp/dtbench-tp.XXXXXX"; /* 16 floats' worth, for the broadcast */
    if (r == 0 && !mkdtemp(tmpl)) {
        fprintf(stderr, "dtbench tp: cannot create a temporary directory in /tmp\n");
        exit(1);
    }
    /* every rank writes its trace into rank 0's directory: send its name */
    if (dt_comm_broadcast(c, (float *)tmpl, sizeof tmpl / sizeof(float), 0, NULL) != DT_OK) dtbench_die("tp");
    if (r == 0) {
        printf(
            "# dtbench tp: %d rank(s), GPT %d blocks, width %d, 4 heads, T = %d, micro-batch %d, %d micro-batches per "
            "step and replica, %d steps (figures over steps 2..%d)\n",
            n, L, C, T, B, m, steps, steps);
        printf("# per step and rank: allreduces of f and g (2 forward + 2 backward per block and micro-batch: 4 L m), "
               "bytes each rank sends in them (ring: 2(t-1)/t of B*T*C*4 each), their share of the step time\n");
        printf("# %2s %2s %11s %11s %14s %14s %8s %10s %10s\n", "t", "d", "allreduces", "formula", "bytes_sent",
               "formula_bytes", "tp_time", "step_ms", "tokens/s");
    }
    for (int t = 1; t <= 4; t *= 2) {
        if (n % t) continue;
        dt_train_config cfg;
        bench_split_config(&cfg, L, C, T, B, B * m * (n / t), steps, threads, c);
        cfg.tensor_size = t;
        char path[256];
        snprintf(path, sizeof path, "%s/t%d.json", tmpl, t);
        cfg.trace_path = path;
        dt_trainer *tr;
        if (dt_trainer_create(&cfg, &tr) != DT_OK) dtbench_die("tp: trainer");
        double secs = 0;
        for (int k = 0; k < steps; k++) {
            dt_train_stats st;
            if (dt_trainer_step(tr, &st) != DT_OK) dtbench_die("tp: step");
            if (k > 0) secs += st.step_seconds;
        }
        if (dt_trainer_finish(tr) != DT_OK) dtbench_die("tp: trace");
        dt_trainer_free(tr);
        if (c->ops->barrier(c) != DT_OK) dtbench_die("tp: barrier");
        if (r != 0) continue;
        /* rank 0's trace: run.json became run.rank0.json with several ranks */
        char rpath[300];
        if (n > 1) snprintf(rpath, sizeof rpath, "%s/t%d.rank0.json", tmpl, t);
        else snprintf(rpath, sizeof rpath, "%s", path);
        dt_trace *tc;
        if (dt_trace_read(rpath, &tc) != DT_OK) dtbench_die("tp: reading the trace");
        long long count = 0;
        double busy = 0;
        for (size_t i = 0; i < tc->n_events; i++) {
            const dt_trace_event *e = &tc->events[i];
            if (strncmp(e->name, "tp allreduce", 12) != 0 || e->iter < 1 || e->iter >= steps) continue;
            count++;
            busy += (double)e->dur_ns * 1e-9;
        }
        dt_trace_free(tc);
        const double per = (double)B * T * C * 4, frac = t > 1 ? 2.0 * (t - 1) / t : 0.0;
        const double meas = (double)count / (steps - 1), want = t > 1 ? 4.0 * L * m : 0.0;
        const double tokens = (double)B * T * m * (n / t) * (steps - 1); /* the global batch grows with d */
        printf("  %2d %2d %11.0f %11.0f %14.0f %14.0f %7.1f%% %10.2f %10.0f\n", t, n / t, meas, want, meas * per * frac,
               want * per * frac, secs > 0 ? 100.0 * busy / secs : 0.0, 1e3 * secs / (steps - 1),
               secs > 0 ? tokens / secs : 0.0);
        fflush(stdout);
    }
    dt_comm_free(c);
    dt_comm_finalize();
    return 0;
}

int dtbench_cmd_pipeline(int p, int threads, int B, int T, int L, int C, const int *split, int steps, const char *keep)
{
    dt_comm *c;
    char eager[32];
    /* activation messages: B*T*C floats plus the transport's header */
    const long long msg = (long long)B * T * C * 4;
    snprintf(eager, sizeof eager, "%lld", msg + 4096);
    setenv("OMPI_MCA_btl_vader_eager_limit", eager, 0); /* read by MPI_Init; the caller's setting wins */
    /* room for 16 (the largest m) eager messages in flight, with margin */
    long long seg = 4 << 20;
    while (seg < 8 * 16 * (msg + 4096)) seg *= 2;
    char segment[32];
    snprintf(segment, sizeof segment, "%lld", seg);
    setenv("OMPI_MCA_btl_vader_segment_size", segment, 0);
    if (dt_comm_mpi_world(&c) != DT_OK) dtbench_die("pipeline");
    const int n = c->size, r = c->rank;
    if (p <= 0) p = n;
    if (p < 2 || n % p != 0) {
        if (r == 0)
            fprintf(stderr,
                    "dtbench pipeline: %d rank(s) for --pipeline-model-parallel-size %d: run under mpirun "
                    "with p x d ranks, p >= 2 (mpirun -np 2 ./dtbench pipeline)\n",
                    n, p);
        dt_comm_free(c);
        dt_comm_finalize();
        return 2;
    }
    const int d = n / p;
    /* more ranks than cores: every run is "disturbed" by the others, repeating is useless */
    const int attempts = n > sysconf(_SC_NPROCESSORS_ONLN) ? 1 : PIPE_ATTEMPTS;
    char dir[512] = "", path[640], summary[640], name[64];
    if (keep) {
        snprintf(dir, sizeof dir, "%s", keep);
    } else {
        char tmpl[] = "/tmp/dtbench-pipeline.XXXXXX";
        if (!mkdtemp(tmpl)) {
            fprintf(stderr, "dtbench pipeline: cannot create a temporary directory in /tmp\n");
            exit(1);
        }
        snprintf(dir, sizeof dir, "%s", tmpl);
    }
    static const dt_sched_kind kinds[PIPE_NKINDS] = {
        DT_SCHED_GPIPE, DT_SCHED_1F1B, DT_SCHED_PIPEDREAM, DT_SCHED_PIPEDREAM_VSYNC, DT_SCHED_INTERLEAVED_1F1B,
        DT_SCHED_ZB_H1, DT_SCHED_ZB_V};
    static const int ms[4] = {2, 4, 8, 16};
    float *allf = calloc((size_t)n * PIPE_NV, sizeof *allf);
    double *all = calloc((size_t)n * PIPE_NV, sizeof *all), *peak = calloc((size_t)p, sizeof *peak),
           *vers = calloc((size_t)p, sizeof *vers), *bub = calloc((size_t)p, sizeof *bub),
           *bfb = calloc((size_t)p, sizeof *bfb), *fw = calloc((size_t)p, sizeof *fw),
           *bw = calloc((size_t)p, sizeof *bw);
    if (!allf || !all || !peak || !vers || !bub || !bfb || !fw || !bw) dtbench_die("out of memory");
    int n_fb = 0; /* gpipe/1f1b runs in fw/bw */
    if (r == 0) {
        printf("# dtbench pipeline: p = %d stages x d = %d pipeline(s), %d rank(s), %d thread(s) per rank; GPT %d "
               "blocks, width %d, T = %d, micro-batch %d; split ",
               p, d, n, threads, L, C, T, B);
        for (int s = 0; s < p; s++) printf("%s%d", s ? "," : "", split[0] ? split[s] : L / p + (s < L % p));
        printf("\n# %d steps per run, figures over steps 2..%d; activation message %lld bytes, "
               "OMPI_MCA_btl_vader_eager_limit=%s, OMPI_MCA_btl_vader_segment_size=%s\n",
               steps, steps, msg, getenv("OMPI_MCA_btl_vader_eager_limit"), getenv("OMPI_MCA_btl_vader_segment_size"));
        printf("# bubble(t) = 1 - (forward + backward + optim_step) / window(t) per stage (dt_trace_stats.h); "
               "fb: forward + backward (B and W) only; run_fb: 1 - forward + backward / the whole window of steps "
               "2..N, mean over stages\n# formula: the schedule's ideal bubble with equal stages and F = B = W, "
               "v = 2 chunks per stage for interleaved-1f1b and zb-v:");
        for (int k = 0; k < PIPE_NKINDS; k++)
            printf("%s%s %s", k ? "; " : " ", dt_sched_kind_name(kinds[k]), dt_schedule_bubble_formula_text(kinds[k]));
        printf("\n# ratio, r_fb: mean and fb over the formula, not for pipedream (its steps interleave: its per-step "
               "bubble is not its idle share)\n# noise: compute time above the median forward/backward duration, "
               "worst stage (a few %% when quiet; above 0.05 another process took a core)\n");
        printf("# %-16s %3s %9s  %-*s %6s  %-*s %6s %7s %6s %6s  %-*s %-14s %s %s\n", "schedule", "m", "step_ms", 7 * p,
               "bubble/stage", "mean", 7 * p, "fb/stage", "fb", "formula", "ratio", "r_fb", 11 * p,
               "peak_act_bytes/stage", "versions/stage", "noise", "run_fb");
        fflush(stdout);
    }
    for (int k = 0; k < PIPE_NKINDS; k++) {
        for (int mi = 0; mi < 4; mi++) {
            const int m = ms[mi];
            double noise = 0, secs = 0;
            int nv; /* model chunks per stage */
            char why[256];
            if (!pipe_runs(kinds[k], p, L, split, m, steps, &nv, why, sizeof why)) {
                if (r == 0) printf("  %-16s %3d  (not run: %s)\n", dt_sched_kind_name(kinds[k]), m, why);
                continue;
            }
            for (int attempt = 0; attempt < attempts; attempt++) {
                dt_train_config cfg;
                bench_split_config(&cfg, L, C, T, B, B * m * d, steps, threads, c);
                cfg.pipeline_size = p;
                cfg.pipeline_schedule = kinds[k];
                for (int s = 0; s < p && split[0]; s++) cfg.pipeline_split[s] = split[s];
                snprintf(name, sizeof name, "%s-m%d.json", dt_sched_kind_name(kinds[k]), m);
                cfg.trace_path = pipe_path(path, sizeof path, dir, name);
                dt_trainer *tr;
                if (dt_trainer_create(&cfg, &tr) != DT_OK) dtbench_die("pipeline: trainer");
                secs = 0;
                for (int t = 0; t < steps; t++) {
                    dt_train_stats st;
                    if (dt_trainer_step(tr, &st) != DT_OK) dtbench_die("pipeline: step");
                    if (t > 0 || steps == 1) secs += st.step_seconds;
                }
                secs /= steps > 1 ? steps - 1 : 1;
                if (dt_trainer_finish(tr) != DT_OK) dtbench_die("pipeline: trace");
                if (r == 0) {
                    if (dt_trainer_write_summary(tr, pipe_path(summary, sizeof summary, dir, "summary.json"), NULL,
                                                 NULL) != DT_OK)
                        dtbench_die("pipeline: summary");
                    pipe_summary_figures(summary, p, peak, vers);
                    remove(summary);
                }
                dt_trainer_free(tr);
                /* this rank's stage from its own trace */
                char mine[720];
                snprintf(mine, sizeof mine, "%s/%s-m%d.rank%d.json", dir, dt_sched_kind_name(kinds[k]), m, r);
                dt_trace *tt;
                dt_bubble_stats b;
                if (dt_trace_read(mine, &tt) != DT_OK || dt_bubble_stats_trace(tt, -1, 1, &b) != DT_OK)
                    dtbench_die("pipeline: bubble");
                double v[PIPE_NV] = {b.stage,
                                     b.mean,
                                     b.mean_fb,
                                     b.n_forward ? b.forward_ns * 1e-6 / b.n_forward : 0,
                                     b.n_backward ? b.backward_ns * 1e-6 / b.n_backward : 0,
                                     trace_noise(tt, b.pid, 1),
                                     b.run_fb};
                dt_bubble_stats_free(&b);
                dt_trace_free(tt);
                if (!keep) remove(mine);
                /* every rank's figures on every rank (floats are enough), so all agree on a repeat */
                for (size_t i = 0; i < (size_t)n * PIPE_NV; i++) allf[i] = 0;
                for (int i = 0; i < PIPE_NV; i++) allf[(size_t)r * PIPE_NV + i] = (float)v[i];
                if (dt_comm_allreduce(c, allf, (size_t)n * PIPE_NV, DT_ALLREDUCE_RING, NULL) != DT_OK)
                    dtbench_die("pipeline: gather");
                for (size_t i = 0; i < (size_t)n * PIPE_NV; i++) all[i] = allf[i];
                noise = 0;
                for (int i = 0; i < n; i++)
                    if (all[(size_t)i * PIPE_NV + 5] > noise) noise = all[(size_t)i * PIPE_NV + 5];
                if (noise <= PIPE_NOISE_MAX || attempt == attempts - 1) break;
                if (r == 0)
                    printf("  (%s m=%d: disturbed, noise %.3f: repeated)\n", dt_sched_kind_name(kinds[k]), m, noise);
            }
            if (r != 0) continue;
            for (int s = 0; s < p; s++) bub[s] = bfb[s] = 0;
            for (int i = 0; i < n; i++) {
                const int s = (int)all[(size_t)i * PIPE_NV];
                if (s < 0 || s >= p) {
                    fprintf(stderr, "dtbench pipeline: rank %d's trace names stage %d\n", i, s);
                    exit(1);
                }
                bub[s] += all[(size_t)i * PIPE_NV + 1] / d;
                bfb[s] += all[(size_t)i * PIPE_NV + 2] / d;
                if (k < 2 && noise <= PIPE_NOISE_MAX)
                    fw[s] += all[(size_t)i * PIPE_NV + 3] / d, bw[s] += all[(size_t)i * PIPE_NV + 4] / d;
            }
            n_fb += k < 2 && noise <= PIPE_NOISE_MAX;
            double mean = 0, mean_fb = 0, run_fb = 0;
            for (int s = 0; s < p; s++) mean += bub[s] / p, mean_fb += bfb[s] / p;
            for (int i = 0; i < n; i++) run_fb += all[(size_t)i * PIPE_NV + 6] / n;
            const double f = dt_schedule_bubble_ideal_chunks(kinds[k], p, nv, m, steps);
            const int flushes = kinds[k] != DT_SCHED_PIPEDREAM && kinds[k] != DT_SCHED_PIPEDREAM_VSYNC;
            char cell[64];
            printf("  %-16s %3d %9.2f  ", dt_sched_kind_name(kinds[k]), m, secs * 1e3);
            for (int s = 0; s < p; s++) printf("%6.3f ", bub[s]);
            printf("%6.3f  ", mean);
            for (int s = 0; s < p; s++) printf("%6.3f ", bfb[s]);
            printf("%6.3f %7.3f ", mean_fb, f);
            if (flushes) printf("%6.2f %6.2f  ", mean / f, mean_fb / f);
            else printf("%6s %6s  ", "-", "-");
            for (int s = 0; s < p; s++) {
                snprintf(cell, sizeof cell, "%.0f", peak[s]);
                printf("%10s ", cell);
            }
            for (int s = 0; s < p; s++) printf("%s%.0f", s ? "," : " ", vers[s]);
            printf("%*s%6.3f %6.3f\n", 14 - 2 * p, "", noise, run_fb);
            fflush(stdout);
        }
    }
    if (r == 0 && n_fb > 0) {
        printf("# balance (gpipe and 1f1b runs, steps 2..%d): ms per micro-batch on each stage\n", steps);
        for (int s = 0; s < p; s++)
            printf("#   stage %d: forward %.3f backward %.3f total %.3f\n", s, fw[s] / n_fb, bw[s] / n_fb,
                   (fw[s] + bw[s]) / n_fb);
    }
    free(allf), free(all), free(peak), free(vers), free(bub), free(bfb), free(fw), free(bw);
    if (!keep) rmdir(dir);
    dt_comm_free(c);
    if (dt_comm_finalize() != DT_OK) dtbench_die("finalize");
    return 0;
}
