/* bench_longseq.c: dtbench longseq (run under mpirun -np 2 or 4): the long-
 * sequence layouts on n ranks, for T = 256, 1024 and 4096: tensor
 * parallelism (t = n), with sequence parallelism, and context parallelism
 * (c = n) with the ring (p2p) and with Ulysses' all-to-all (a2a). Per
 * layout and T: each rank's peak activation bytes (the trainer's summary,
 * rank 0's) against dtrain's formula (docs/tensor-parallel.md,
 * docs/context-parallel.md), and tokens/s (the mean of the steps after
 * the first) with its ratio to tensor parallelism's in the same run.
 *
 * The model: L = 2 blocks, C = 256, 8 heads, one sequence per step, FP32,
 * no recomputation, the add task packed into T positions (vocabulary 256
 * is a multiple of 16 times n, so no allocation is padded and the
 * formulas need no padding terms). Formulas in bytes, N = T tokens, Vt =
 * V/t rows of the head on a tensor rank, Nl = N/c:
 *   tp:     4 [N C + L N (2C + 4 + 8C/t + NH/t) + N C + 2N + N Vt + (4t + 2) N]
 *   tp+sp:  4 [N C/t + L N (10C + 4 + NH)/t + N C + 2N + N Vt + (4t + 2) N]
 *   cp:     4 [Nl C + L Nl (10C + 4 + NH) + Nl C + 2Nl + Nl V]
 * (embedding output, blocks, the head's LayerNorm output, statistics,
 * logits and, vocabulary-parallel, every rank's per-row statistics and the
 * merged ones). */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtbench.h"

enum { LS_TP = 0, LS_SP, LS_P2P, LS_A2A, LS_N };

static double ls_formula(int layout, double N, double n, double L, double C, double NH, double V)
{
    switch (layout) {
    case LS_TP: return 4 * (N * C + L * N * (2 * C + 4 + 8 * C / n + NH / n) + N * C + 2 * N + N * V / n + (4 * n + 2) * N);
    case LS_SP: return 4 * (N * C / n + L * N * (10 * C + 4 + NH) / n + N * C + 2 * N + N * V / n + (4 * n + 2) * N);
    default: {
        const double Nl = N / n;
        return 4 * (Nl * C + L * Nl * (10 * C + 4 + NH) + Nl * C + 2 * Nl + Nl * V);
    }
    }
}

/* Rank 0's peak activation bytes and the model's vocabulary, from a summary. */
static double ls_peak(const char *path, double *vocab)
{
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    json_t *p = root ? json_object_get(root, "pipeline") : NULL;
    json_t *a = json_is_object(p) ? json_object_get(p, "stage_peak_activation_bytes") : NULL;
    if (!json_is_array(a) || !json_array_size(a)) {
        fprintf(stderr, "dtbench longseq: %s: no pipeline.stage_peak_activation_bytes in the summary\n", path);
        exit(1);
    }
    const double v = json_number_value(json_array_get(a, 0));
    json_t *cf = json_object_get(root, "config");
    *vocab = json_number_value(json_is_object(cf) ? json_object_get(cf, "vocab_size") : NULL);
    json_decref(root);
    return v;
}

int dtbench_cmd_longseq(int threads, int steps)
{
    dt_comm *c;
    if (dt_comm_mpi_world(&c) != DT_OK) dtbench_die("longseq");
    const int r = c->rank, n = c->size;
    if (n != 2 && n != 4) {
        if (r == 0) fprintf(stderr, "dtbench longseq: %d rank(s): run under mpirun -np 2 or 4\n", n);
        dt_comm_free(c);
        dt_comm_finalize();
        return 2;
    }
    if (steps < 2) steps = 2;
    const int L = 2, C = 256, NH = 8, Ts[3] = {256, 1024, 4096};
    static const char *const names[LS_N] = {"tp", "tp+sp", "cp-p2p", "cp-a2a"};
    char path[128];
    snprintf(path, sizeof path, "/tmp/dtbench-longseq-%ld.json", (long)getpid());
    if (r == 0) {
        printf("# dtbench longseq: %d ranks (t = %d, or c = %d), GPT %d blocks, width %d, %d heads, one sequence of T "
               "tokens a step, FP32, no recomputation, %d steps (tokens/s over steps 2..%d)\n",
               n, n, n, L, C, NH, steps, steps);
        printf("# peak: rank 0's peak activation bytes; formula: dtrain's (bench/bench_longseq.c); vs_tp: tokens/s "
               "over tensor parallelism's, same T, same run\n");
        printf("# %5s %8s %14s %14s %8s %12s %7s\n", "T", "layout", "peak", "formula", "ratio", "tokens/s", "vs_tp");
    }
    for (int ti = 0; ti < 3; ti++) {
        const int T = Ts[ti];
        double tps[LS_N];
        for (int lay = 0; lay < LS_N; lay++) {
            dt_train_config cfg;
            dt_train_config_default(&cfg);
            snprintf(cfg.model_name, sizeof cfg.model_name, "custom");
            cfg.model.num_layers = L;
            cfg.model.hidden_size = C;
            cfg.model.num_heads = NH;
            cfg.model.seq_len = T;
            cfg.seq_length = T;
            cfg.micro_batch_size = 1;
            cfg.global_batch_size = 1;
            cfg.train_iters = steps;
            cfg.lr.warmup_iters = 1;
            cfg.lr.decay_iters = steps;
            cfg.eval_iters = 1;
            cfg.threads = threads;
            cfg.comm = c;
            cfg.tensor_size = lay <= LS_SP ? n : 1;
            cfg.sequence_parallel = lay == LS_SP;
            cfg.context_size = lay >= LS_P2P ? n : 1;
            cfg.cp_comm_type = lay == LS_A2A ? DT_CP_A2A : DT_CP_P2P;
            dt_trainer *tr;
            if (dt_trainer_create(&cfg, &tr) != DT_OK) dtbench_die("longseq: trainer");
            double secs = 0;
            for (int s = 0; s < steps; s++) {
                dt_train_stats st;
                if (dt_trainer_step(tr, &st) != DT_OK) dtbench_die("longseq: step");
                if (s >= 1) secs += st.step_seconds;
            }
            tps[lay] = (double)T * (steps - 1) / secs;
            if (dt_trainer_write_summary(tr, path, NULL, NULL) != DT_OK) dtbench_die("longseq: summary");
            dt_trainer_free(tr);
            if (r == 0) {
                double V = 0;
                const double peak = ls_peak(path, &V), f = ls_formula(lay, T, n, L, C, NH, V);
                printf("  %5d %8s %14.0f %14.0f %8.4f %12.0f %6.2fx\n", T, names[lay], peak, f, peak / f, tps[lay],
                       tps[lay] / tps[0]);
                fflush(stdout);
            }
        }
    }
    if (r == 0) unlink(path);
    dt_comm_free(c);
    dt_comm_finalize();
    return 0;
}
