/* bench_compose.c: dtbench compose, the composition matrix's speed and
 * memory (docs/composition.md): layout {single, dp, 1f1b, tp} x precision
 * {fp32, bf16, fp16} x recompute {none, selective, full (K = 1)}, run under
 * mpirun -np 2 (single runs on rank 0 while rank 1 waits). Each cell trains
 * the same 4-block GPT (width 128, 4 heads, T = 64, micro-batch 4, global
 * batch 16) for `steps` steps, `repeats` times, and prints the median
 * tokens/s (the trainer's, steps after the first) with its range, the peak
 * saved activations of the largest stage or rank, and both as ratios to the
 * layout's fp32/none cell measured in the same run. The numerics of the
 * same cells are checked by tests/compose.sh.
 *
 * Invariant: every rank runs every cell in the same order (the trainer is
 * collective over the world), so the figures rank 0 prints are the run's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtbench.h"

enum { COMPOSE_MAX_REPEATS = 64 };

static const char *const compose_layouts[] = {"single", "dp", "1f1b", "tp"};
static const dt_dtype compose_prec[] = {DT_F32, DT_BF16, DT_F16};
static const char *const compose_prec_name[] = {"fp32", "bf16", "fp16"};
static const dt_recompute compose_rc[] = {DT_RECOMPUTE_NONE, DT_RECOMPUTE_SELECTIVE, DT_RECOMPUTE_FULL};
static const char *const compose_rc_name[] = {"none", "selective", "full"};

static int compose_cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One run of a cell on the ranks that take part (comm NULL: one process):
 * tokens/s and this rank's peak activation bytes. */
static void compose_run(int layout, int prec, int rc, int steps, int threads, dt_comm *comm, double *tps, double *peak)
{
    dt_train_config cfg;
    dt_train_config_default(&cfg);
    snprintf(cfg.model_name, sizeof cfg.model_name, "custom");
    cfg.model.num_layers = 4;
    cfg.model.hidden_size = 128;
    cfg.model.num_heads = 4;
    cfg.model.seq_len = 64;
    cfg.seq_length = 64;
    cfg.micro_batch_size = 4;
    cfg.global_batch_size = 16;
    cfg.train_iters = steps;
    cfg.lr.warmup_iters = 1;
    cfg.lr.decay_iters = steps;
    cfg.eval_iters = 1;
    cfg.threads = threads;
    cfg.comm = comm;
    cfg.precision = compose_prec[prec];
    cfg.use_loss_scaling = compose_prec[prec] == DT_F16; /* dtrain's --fp16: dynamic scaling */
    cfg.recompute = compose_rc[rc];
    cfg.recompute_num_layers = 1;
    if (layout == 2) cfg.pipeline_size = 2;
    if (layout == 3) cfg.tensor_size = 2;
    dt_trainer *tr;
    if (dt_trainer_create(&cfg, &tr) != DT_OK) dtbench_die("compose: trainer");
    for (int k = 0; k < steps; k++) {
        dt_train_stats st;
        if (dt_trainer_step(tr, &st) != DT_OK) dtbench_die("compose: step");
    }
    *tps = dt_trainer_tokens_per_second(tr);
    *peak = (double)dt_trainer_peak_activation_bytes(tr);
    dt_trainer_free(tr);
}

int dtbench_cmd_compose(int repeats, int steps, int threads)
{
    if (repeats > COMPOSE_MAX_REPEATS) {
        fprintf(stderr, "dtbench compose: --repeats %d: expected 1..%d\n", repeats, COMPOSE_MAX_REPEATS);
        return 2;
    }
    if (steps < 2) {
        fprintf(stderr, "dtbench compose: --steps %d: expected at least 2 (the first is not timed)\n", steps);
        return 2;
    }
    dt_comm *c;
    if (!dt_comm_launched()) { /* MPI's singleton would start only to be refused */
        fprintf(stderr, "dtbench compose: not under mpirun: run under mpirun -np 2 (mpirun -np 2 ./dtbench compose)\n");
        return 2;
    }
    if (dt_comm_mpi_world(&c) != DT_OK) { /* a build without MPI, or MPI failing to start */
        fprintf(stderr, "dtbench compose: %s: run under mpirun -np 2 (mpirun -np 2 ./dtbench compose)\n",
                dt_last_error());
        return 2;
    }
    if (c->size != 2) {
        if (c->rank == 0)
            fprintf(stderr, "dtbench compose: %d rank(s): run under mpirun -np 2 (mpirun -np 2 ./dtbench compose)\n",
                    c->size);
        dt_comm_free(c);
        dt_comm_finalize();
        return 2;
    }
    const int r = c->rank;
    if (r == 0) {
        printf("# dtbench compose: a GPT of 4 blocks, width 128, 4 heads, T = 64, micro-batch 4, global batch 16, "
               "%d steps, %d thread(s) per rank, %d run(s) per cell\n",
               steps, threads, repeats);
        printf("# tokens/s: median (range) of the runs, steps after the first; peak: the largest stage's or rank's "
               "saved activations; x: against the layout's fp32/none cell\n");
        printf("%-6s %-4s %-9s %10s %17s %9s %8s %7s\n", "layout", "prec", "recompute", "tokens/s", "(range)",
               "peak MiB", "x speed", "x peak");
        fflush(stdout);
    }
    for (int l = 0; l < 4; l++) {
        double base_tps = 0, base_peak = 0;
        for (int p = 0; p < 3; p++)
            for (int q = 0; q < 3; q++) {
                double tps[COMPOSE_MAX_REPEATS], peak = 0;
                for (int k = 0; k < repeats; k++) {
                    double two[2] = {0, 0}, t = 0, pk = 0;
                    if (l > 0 || r == 0) compose_run(l, p, q, steps, threads, l > 0 ? c : NULL, &t, &pk);
                    two[r] = pk; /* every rank's peak, to take the largest */
                    if (dt_comm_sum_doubles(c, two, 2) != DT_OK) dtbench_die("compose: gathering the peaks");
                    tps[k] = t;
                    peak = two[0] > two[1] ? two[0] : two[1];
                }
                if (r != 0) continue;
                qsort(tps, (size_t)repeats, sizeof tps[0], compose_cmp);
                const double med = tps[(repeats - 1) / 2];
                if (p == 0 && q == 0) base_tps = med, base_peak = peak;
                char range[40];
                snprintf(range, sizeof range, "(%.0f-%.0f)", tps[0], tps[repeats - 1]);
                printf("%-6s %-4s %-9s %10.0f %17s %9.2f %8.2f %7.2f\n", compose_layouts[l], compose_prec_name[p],
                       compose_rc_name[q], med, range, peak / 1048576.0, base_tps > 0 ? med / base_tps : 0.0,
                       base_peak > 0 ? peak / base_peak : 0.0);
                fflush(stdout);
            }
    }
    dt_comm_free(c);
    dt_comm_finalize();
    return 0;
}
