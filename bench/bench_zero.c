/* bench_zero.c: dtbench zero (run under mpirun -np 2 or 4): ZeRO stages 0
 * (plain data parallelism, ring allreduce), 1, 2 and 3 on the same run,
 * on the data-parallel group alone or, with --tensor-model-parallel-size
 * t and --pipeline-model-parallel-size p, on a t x d x p grid, where each
 * stage (tensor shard) is sharded over its d ranks and psi is rank 0's
 * share of the model (its flat buffer: the first stage's tensors, or their
 * shards):
 * per rank, the bytes of weights, gradients and optimizer state (FP32
 * masters included) that the trainer's summary reports, against the ZeRO
 * paper's figure for the same parameter count psi and n ranks (and stage 3
 * again with --zero-prefetch, row "3+pf"); the
 * buffer volumes each step moves per rank (stage 0 and 1: a reduce-scatter
 * and an all-gather of the whole buffer, 2; stages 2 and 3 counted by the
 * runtime); and the step time against stage 0's, measured in the same
 * round (the stages run in turn, `repeats` rounds; the median of the
 * rounds' ratios is printed, each round's steps after the first two).
 *
 * The paper's figures (Rajbhandari et al., arXiv 1910.02054), Adam, mixed
 * precision: stage 0 16 psi, 1 4 psi + 12 psi/n, 2 2 psi + 14 psi/n, 3
 * 16 psi/n; FP32: 16 psi, 8 psi + 8 psi/n, 4 psi + 12 psi/n, 16 psi/n.
 * dtrain's own layout is docs/zero.md's (its FP32 gradient accumulation,
 * its FP32 copy of 16-bit weights for the CPU GEMMs): the ratio column. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtbench.h"

typedef struct zb_figures {
    double weights, gradients, optimizer, working, volumes; /* bytes per rank; buffer volumes per step */
    double numel;                                           /* a stage's flat buffer (grids), else 0 */
} zb_figures;

static void zb_summary(const char *path, int steps, double numel, zb_figures *f)
{
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    json_t *b = root ? json_object_get(root, "model_state_bytes") : NULL;
    if (!json_is_object(b)) {
        fprintf(stderr, "dtbench zero: %s: no model_state_bytes in the summary\n", path);
        exit(1);
    }
    f->weights = json_number_value(json_object_get(b, "weights"));
    f->gradients = json_number_value(json_object_get(b, "gradients"));
    f->optimizer = json_number_value(json_object_get(b, "optimizer"));
    f->working = json_number_value(json_object_get(b, "working"));
    f->numel = json_number_value(json_object_get(b, "numel")); /* 0 when absent */
    json_t *z = json_object_get(root, "zero");
    f->volumes = 2.0; /* stages 0 and 1: the whole buffer reduce-scattered and all-gathered */
    if (json_is_object(z)) {
        const double fl = json_number_value(json_object_get(z, "gather_floats")) +
                          json_number_value(json_object_get(z, "reduce_scatter_floats")) +
                          json_number_value(json_object_get(z, "refresh_floats"));
        f->volumes = fl / steps / numel;
    }
    json_decref(root);
}

static int zb_cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int dtbench_cmd_zero(int threads, int B, int T, int L, int C, int steps, int repeats, dt_dtype precision, int t, int p)
{
    dt_comm *c;
    if (dt_comm_mpi_world(&c) != DT_OK) dtbench_die("zero");
    const int r = c->rank, mixed = precision != DT_F32;
    if (t < 1) t = 1;
    if (p < 1) p = 1;
    if (c->size % (t * p) != 0) {
        if (r == 0)
            fprintf(stderr, "dtbench zero: %d ranks are not a multiple of t x p = %d x %d\n", c->size, t, p);
        dt_comm_free(c);
        dt_comm_finalize();
        return 2;
    }
    const int n = c->size / (t * p), grid = t * p > 1; /* n: the data-parallel ways */
    if (steps < 3) steps = 3;
    if (repeats < 1) repeats = 1;
    char path[128];
    snprintf(path, sizeof path, "/tmp/dtbench-zero-%ld.json", (long)getpid());
    enum { ZB_ROWS = 5 }; /* stages 0-3, then 3 with --zero-prefetch (not on a grid) */
    const int rows = grid ? 4 : ZB_ROWS;
    double *ratio = calloc((size_t)repeats * ZB_ROWS, sizeof *ratio);
    zb_figures fig[ZB_ROWS];
    double psi = 0, numel = 0;
    if (!ratio) dtbench_die("zero: out of memory");
    for (int k = 0; k < repeats; k++) {
        double step_s[ZB_ROWS];
        for (int row = 0; row < rows; row++) {
            const int stage = row < 4 ? row : 3;
            dt_train_config cfg;
            dt_train_config_default(&cfg);
            snprintf(cfg.model_name, sizeof cfg.model_name, "custom");
            cfg.model.num_layers = L;
            cfg.model.hidden_size = C;
            cfg.model.num_heads = 4;
            cfg.model.seq_len = T;
            cfg.seq_length = T;
            cfg.micro_batch_size = B;
            cfg.global_batch_size = B * n * (p > 1 ? 2 * p : 1); /* 2p micro-batches keep a pipeline busy */
            cfg.tensor_size = t;
            cfg.pipeline_size = p;
            cfg.train_iters = steps;
            cfg.lr.warmup_iters = 1;
            cfg.lr.decay_iters = steps;
            cfg.eval_iters = 1;
            cfg.threads = threads;
            cfg.comm = c;
            cfg.precision = precision;
            cfg.bucket_bytes = 1u << 20; /* data parallelism's buckets are stage 2's units */
            cfg.zero_stage = stage;
            cfg.zero_prefetch = row == 4;
            cfg.use_distributed_optimizer = stage == 1;
            dt_trainer *tr;
            if (dt_trainer_create(&cfg, &tr) != DT_OK) dtbench_die("zero: trainer");
            double secs = 0;
            for (int s = 0; s < steps; s++) {
                dt_train_stats st;
                if (dt_trainer_step(tr, &st) != DT_OK) dtbench_die("zero: step");
                if (s >= 2) secs += st.step_seconds;
            }
            step_s[row] = secs / (steps - 2);
            if (k == 0 && r == 0) {
                if (dt_trainer_write_summary(tr, path, NULL, NULL) != DT_OK) dtbench_die("zero: summary");
                psi = (double)dt_trainer_num_params(tr);
                json_error_t err;
                json_t *root = json_load_file(path, 0, &err);
                json_t *z = root ? json_object_get(root, "zero") : NULL;
                if (json_is_object(z)) numel = json_number_value(json_object_get(z, "numel")); /* with padding */
                json_decref(root);
            }
            dt_trainer_free(tr);
            if (k == 0 && r == 0) zb_summary(path, steps, numel > 0 ? numel : psi, &fig[row]);
        }
        for (int row = 0; row < rows; row++) ratio[row * repeats + k] = step_s[row] / step_s[0];
    }
    if (r == 0) {
        unlink(path);
        if (grid && fig[0].numel > 0) psi = fig[0].numel; /* rank 0's stage (tensor shard) */
        if (grid)
            printf("# dtbench zero: %d rank(s) (t = %d x d = %d x p = %d), GPT %d blocks, width %d, 4 heads, T = %d, "
                   "micro-batch %d, AdamW, %s, psi = %.0f parameters (rank 0's share: its stage's flat buffer; the "
                   "paper's figures over its d ranks), %d steps x %d round(s) (step times over steps 3..%d)\n",
                   c->size, t, n, p, L, C, T, B, mixed ? "bf16" : "fp32", psi, steps, repeats, steps);
        else
            printf("# dtbench zero: %d rank(s), GPT %d blocks, width %d, 4 heads, T = %d, micro-batch %d per rank, "
                   "AdamW, %s, psi = %.0f parameters, %d steps x %d round(s) (step times over steps 3..%d)\n",
                   n, L, C, T, B, mixed ? "bf16" : "fp32", psi, steps, repeats, steps);
        printf("# bytes per rank kept between steps (docs/zero.md); paper: the ZeRO paper's figure for psi and n; "
               "volumes: buffers moved per rank and step; time: the median over rounds of step / stage 0's step\n");
        printf("# %5s %12s %12s %12s %12s %12s %7s %10s %8s %8s\n", "stage", "weights", "gradients", "optimizer",
               "total", "paper", "ratio", "working", "volumes", "time");
        for (int row = 0; row < rows; row++) {
            const int stage = row < 4 ? row : 3;
            const double nd = n,
                         paper_mixed[4] = {16 * psi, 4 * psi + 12 * psi / nd, 2 * psi + 14 * psi / nd, 16 * psi / nd};
            const double paper_fp32[4] = {16 * psi, 8 * psi + 8 * psi / nd, 4 * psi + 12 * psi / nd, 16 * psi / nd};
            const double paper = mixed ? paper_mixed[stage] : paper_fp32[stage];
            const zb_figures *f = &fig[row];
            const double total = f->weights + f->gradients + f->optimizer;
            qsort(ratio + row * repeats, (size_t)repeats, sizeof *ratio, zb_cmp);
            static const char *const label[ZB_ROWS] = {"0", "1", "2", "3", "3+pf"};
            if (grid) /* a pipeline's collectives are not counted by volume */
                printf("  %5s %12.0f %12.0f %12.0f %12.0f %12.0f %7.3f %10.0f %8s %7.2fx\n", label[row], f->weights,
                       f->gradients, f->optimizer, total, paper, total / paper, f->working, "-",
                       ratio[row * repeats + repeats / 2]);
            else
                printf("  %5s %12.0f %12.0f %12.0f %12.0f %12.0f %7.3f %10.0f %8.2f %7.2fx\n", label[row], f->weights,
                       f->gradients, f->optimizer, total, paper, total / paper, f->working, f->volumes,
                       ratio[row * repeats + repeats / 2]);
        }
        fflush(stdout);
    }
    free(ratio);
    dt_comm_free(c);
    dt_comm_finalize();
    return 0;
}
