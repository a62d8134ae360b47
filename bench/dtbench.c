/* dtbench.c: benchmarks that print a figure and its ratio to a reference
 * measured in the same run.
 *
 *   dtbench gemm  [--threads N]   cblas_sgemm peak (GFLOP/s) on square sizes
 *   dtbench train [--threads N] [--model small] [--micro-batch-size 16]
 *                 [--seq-length T] [--steps S] [--warmup W]
 *       trains the model (forward, backward, AdamW step) on random tokens and
 *       prints tokens/s, model FLOPs per token (6N + 12LCT), achieved
 *       GFLOP/s, the sgemm peak at the same thread count, and their ratio
 *       (MFU against this machine's measured peak). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "../programs/args.h"

static void die(const char *what)
{
    fprintf(stderr, "dtbench: %s: %s\n", what, dt_last_error());
    exit(1);
}

/* Best GFLOP/s of cblas_sgemm over square sizes with OpenBLAS's own
 * threading at `threads` threads (the backend keeps OpenBLAS single-threaded
 * and splits GEMMs itself, so the count is set here and restored). */
static double sgemm_peak(int threads, int verbose)
{
    openblas_set_num_threads(threads);
    static const int sizes[] = {1024, 1536, 2048};
    double best = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
        if (!a || !b || !c) {
            fprintf(stderr, "dtbench: out of memory for the %d x %d sgemm peak\n", n, n);
            exit(1);
        }
        for (long i = 0; i < (long)n * n; i++) a[i] = (float)(i % 17) * 0.01f, b[i] = (float)(i % 13) * 0.01f;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double flops = 2.0 * n * n * n;
        int reps = (int)(3e10 / flops) + 1;
        double sbest = 0;
        for (int r = 0; r < 3; r++) {
            int64_t t0 = dt_time_ns();
            for (int k = 0; k < reps; k++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            double g = flops * reps / ((dt_time_ns() - t0) * 1e-9) / 1e9;
            if (g > sbest) sbest = g;
        }
        if (verbose) printf("  sgemm %5d x %5d x %5d   %8.1f GFLOP/s\n", n, n, n, sbest);
        if (sbest > best) best = sbest;
        free(a), free(b), free(c);
    }
    openblas_set_num_threads(1);
    return best;
}

static int cmd_gemm(int threads)
{
    dt_backend *be;
    if (dt_backend_create("cpu", threads, &be) != DT_OK) die("--threads");
    printf("# dtbench gemm: cblas_sgemm (OpenBLAS), %d thread(s)\n", be->threads);
    double peak = sgemm_peak(be->threads, 1);
    printf("peak_gflops %.1f\n", peak);
    dt_backend_destroy(be);
    return 0;
}

/* The benchmark model: a preset on random tokens (B, T); T <= 0 means the
 * preset's context. Exits with 2 on a bad --seq-length. */
typedef struct bench_setup {
    dt_backend *be;
    dt_gpt_config cfg;
    dt_gpt *m;
    int T;
    int32_t *tok, *tgt; /* (B, T) */
} bench_setup;

static void bench_setup_init(bench_setup *b, int threads, const char *model, int B, int T)
{
    if (dt_backend_create("cpu", threads, &b->be) != DT_OK) die("--threads");
    if (dt_gpt_config_preset(model, &b->cfg) != DT_OK) die("--model");
    if (T <= 0) T = b->cfg.seq_len;
    if (T > b->cfg.seq_len) {
        fprintf(stderr, "dtbench: --seq-length %d exceeds --model %s's context %d\n", T, model, b->cfg.seq_len);
        exit(2);
    }
    b->T = T;
    if (dt_gpt_create(&b->cfg, b->be, &b->m) != DT_OK) die("model");
    if (dt_gpt_init_weights(b->m, 1) != DT_OK) die("model init");
    b->tok = malloc(sizeof(int32_t) * B * T);
    b->tgt = malloc(sizeof(int32_t) * B * T);
    if (!b->tok || !b->tgt) die("out of memory");
    dt_rng r;
    dt_rng_seed(&r, 5);
    for (int i = 0; i < B * T; i++) b->tok[i] = (int32_t)dt_rng_below(&r, b->cfg.vocab_size);
    for (int i = 0; i < B * T; i++) b->tgt[i] = (int32_t)dt_rng_below(&r, b->cfg.vocab_size);
}

static void bench_setup_free(bench_setup *b)
{
    dt_gpt_free(b->m);
    free(b->tok), free(b->tgt);
    dt_backend_destroy(b->be);
}

static int cmd_train(int threads, const char *model, int B, int T, int steps, int warmup)
{
    bench_setup bs;
    bench_setup_init(&bs, threads, model, B, T);
    dt_backend *be = bs.be;
    dt_gpt *m = bs.m;
    const dt_gpt_config cfg = bs.cfg;
    const int32_t *tok = bs.tok, *tgt = bs.tgt;
    T = bs.T;
    dt_optim_config oc;
    dt_optim_config_default(&oc, DT_OPTIM_ADAMW);
    dt_optim opt;
    if (dt_optim_init(&opt, &oc, be, dt_gpt_layout(m)) != DT_OK) die("optimizer");

    double fpt = dt_gpt_config_flops_per_token(&cfg, T);
    printf("# dtbench train: --model %s (L=%d, NH=%d, C=%d, V=%d, N=%zu params), B=%d, T=%d, %d thread(s)\n",
           model, cfg.num_layers, cfg.num_heads, cfg.hidden_size, cfg.vocab_size, dt_gpt_config_num_params(&cfg), B,
           T, be->threads);
    printf("# step = forward + backward + AdamW on random tokens; %d warm-up + %d timed steps\n", warmup, steps);
    int64_t t_total = 0, t_fwd = 0, t_bwd = 0, t_opt = 0;
    float loss = 0;
    for (int s = 0; s < warmup + steps; s++) {
        int64_t t0 = dt_time_ns();
        if (dt_gpt_zero_grad(m) != DT_OK) die("zero_grad");
        if (dt_gpt_forward(m, tok, tgt, B, T, &loss) != DT_OK) die("forward");
        int64_t t1 = dt_time_ns();
        if (dt_gpt_backward(m, 1.0f) != DT_OK) die("backward");
        int64_t t2 = dt_time_ns();
        if (dt_optim_step(&opt, dt_gpt_params(m), dt_gpt_grads(m), 1e-4f, 1.0f) != DT_OK) die("optimizer step");
        int64_t t3 = dt_time_ns();
        if (s >= warmup) {
            t_total += t3 - t0, t_fwd += t1 - t0, t_bwd += t2 - t1, t_opt += t3 - t2;
            printf("  step %2d  %8.1f ms  loss %.4f\n", s - warmup, (t3 - t0) * 1e-6, loss);
        }
    }
    double sec = t_total * 1e-9;
    double tps = (double)B * T * steps / sec;
    double gflops = tps * fpt / 1e9;
    printf("  time split: forward %.1f%%  backward %.1f%%  optimizer %.1f%%\n", 100.0 * t_fwd / t_total,
           100.0 * t_bwd / t_total, 100.0 * t_opt / t_total);
    printf("# reference: cblas_sgemm peak at %d thread(s), measured now\n", be->threads);
    double peak = sgemm_peak(be->threads, 1);
    printf("tokens_per_second %.1f\n", tps);
    printf("flops_per_token %.4g\n", fpt);
    printf("achieved_gflops %.1f\n", gflops);
    printf("peak_gflops %.1f\n", peak);
    printf("mfu %.3f\n", gflops / peak);
    printf("peak_activation_bytes %zu\n", dt_gpt_peak_activation_bytes(m));
    dt_optim_free(&opt);
    bench_setup_free(&bs);
    return 0;
}

/* Activation recomputation: peak activation bytes and step time per
 * granularity / K, each relative to no recomputation in the same run. */
static int cmd_recompute(int threads, const char *model, int B, int T, int steps, int warmup)
{
    bench_setup bs;
    bench_setup_init(&bs, threads, model, B, T);
    dt_backend *be = bs.be;
    dt_gpt *m = bs.m;
    const dt_gpt_config cfg = bs.cfg;
    const int32_t *tok = bs.tok, *tgt = bs.tgt;
    T = bs.T;
    int sq = 1;
    while ((sq + 1) * (sq + 1) <= cfg.num_layers) sq++;
    struct run { dt_recompute mode; int k; const char *name; } runs[8];
    int n = 0;
    runs[n++] = (struct run){DT_RECOMPUTE_NONE, 0, "none"};
    runs[n++] = (struct run){DT_RECOMPUTE_SELECTIVE, 0, "selective"};
    runs[n++] = (struct run){DT_RECOMPUTE_FULL, 1, "full"};
    if (sq > 1) runs[n++] = (struct run){DT_RECOMPUTE_FULL, sq, "full"};
    if (cfg.num_layers > sq) runs[n++] = (struct run){DT_RECOMPUTE_FULL, cfg.num_layers, "full"};
    printf("# dtbench recompute: --model %s (L=%d, C=%d), B=%d, T=%d, %d thread(s); forward + backward, %d warm-up + "
           "%d timed steps\n", model, cfg.num_layers, cfg.hidden_size, B, T, be->threads, warmup, steps);
    printf("# K = blocks per checkpointed group (full); sqrt(L) rounds down to %d\n", sq);
    printf("%-10s %3s %16s %8s %10s %8s\n", "granularity", "K", "peak_act_bytes", "ratio", "step_ms", "ratio");
    double base_bytes = 0, base_ms = 0;
    for (int i = 0; i < n; i++) {
        if (dt_gpt_set_recompute(m, runs[i].mode, runs[i].k) != DT_OK) die("recompute");
        int64_t t_total = 0;
        for (int s = 0; s < warmup + steps; s++) {
            int64_t t0 = dt_time_ns();
            if (dt_gpt_forward(m, tok, tgt, B, T, NULL) != DT_OK) die("forward");
            if (dt_gpt_backward(m, 1.0f) != DT_OK) die("backward");
            if (s >= warmup) t_total += dt_time_ns() - t0;
        }
        if (dt_gpt_zero_grad(m) != DT_OK) die("zero_grad");
        double bytes = (double)dt_gpt_peak_activation_bytes(m), ms = t_total * 1e-6 / steps;
        if (i == 0) base_bytes = bytes, base_ms = ms;
        char k[8] = "-";
        if (runs[i].mode == DT_RECOMPUTE_FULL) snprintf(k, sizeof k, "%d", runs[i].k);
        printf("%-10s %3s %16.0f %8.3f %10.1f %8.3f\n", runs[i].name, k, bytes, bytes / base_bytes, ms, ms / base_ms);
    }
    bench_setup_free(&bs);
    return 0;
}

/* Large-batch training: the same number of samples at the base batch and at
 * 8x the batch, with linear-scaled AdamW, LARS and LAMB. */
static int cmd_largebatch(int threads, int base_iters, int base_batch)
{
    struct lb_run {
        const char *name;
        dt_optim_kind kind;
        int mult;                /* batch multiple */
        float lr;                /* LR at the base batch */
        dt_lr_scaling scaling;   /* to the run's batch */
    } runs[] = {
        {"adamw", DT_OPTIM_ADAMW, 1, 3e-3f, DT_LR_SCALING_NONE},
        {"adamw", DT_OPTIM_ADAMW, 8, 3e-3f, DT_LR_SCALING_LINEAR},
        {"adamw", DT_OPTIM_ADAMW, 8, 3e-3f, DT_LR_SCALING_SQRT},
        {"lars", DT_OPTIM_LARS, 8, 2.0f, DT_LR_SCALING_LINEAR},
        {"lamb", DT_OPTIM_LAMB, 8, 3e-3f, DT_LR_SCALING_LINEAR},
        {"lamb", DT_OPTIM_LAMB, 8, 3e-3f, DT_LR_SCALING_SQRT},
    };
    const int n = (int)(sizeof runs / sizeof runs[0]);
    printf("# dtbench largebatch: tiny GPT on 2-digit addition (the dtrain defaults), %d samples per run;\n"
           "# base batch %d for %d iterations, 8x batch for %d iterations (warm-up 10%%, cosine decay)\n",
           base_iters * base_batch, base_batch, base_iters, base_iters / 8);
    printf("%-6s %6s %6s %-7s %10s %9s %9s %8s\n", "optim", "batch", "iters", "scaling", "peak_lr", "val_loss",
           "accuracy", "seconds");
    for (int i = 0; i < n; i++) {
        dt_train_config c;
        dt_train_config_default(&c);
        c.threads = threads;
        c.global_batch_size = base_batch * runs[i].mult;
        c.micro_batch_size = base_batch;
        c.train_iters = base_iters / runs[i].mult;
        c.lr.decay_iters = c.train_iters;
        c.lr.warmup_iters = c.train_iters / 10;
        dt_optim_config_default(&c.optim, runs[i].kind);
        c.optim.weight_decay = 0.1f;
        c.lr.max_lr = runs[i].lr;
        c.lr.min_lr = runs[i].lr / 30;
        c.lr_scaling = runs[i].scaling;
        c.base_batch_size = base_batch;
        dt_trainer *tr;
        if (dt_trainer_create(&c, &tr) != DT_OK) die("trainer");
        int64_t t0 = dt_time_ns();
        dt_train_stats st;
        for (int64_t it = 0; it < c.train_iters; it++)
            if (dt_trainer_step(tr, &st) != DT_OK) die("step");
        dt_eval_result ev;
        if (dt_trainer_evaluate(tr, &ev) != DT_OK) die("evaluate");
        static const char *const sc[] = {"none", "linear", "sqrt"};
        printf("%-6s %6d %6lld %-7s %10.4g %9.4f %8.2f%% %8.1f\n", runs[i].name, c.global_batch_size,
               (long long)c.train_iters, sc[runs[i].scaling], (double)dt_trainer_lr_schedule(tr)->max_lr,
               (double)ev.loss, 100.0 * ev.accuracy, (dt_time_ns() - t0) * 1e-9);
        fflush(stdout);
        dt_trainer_free(tr);
    }
    return 0;
}

/* Mixed precision: how many gradient values underflow to zero in fp16
 * without loss scaling and with it, on one micro-batch of the dtrain task
 * (2-digit addition), against the FP32 gradients of the same batch, at
 * initialisation and after `trained` FP32 steps of the dtrain defaults
 * (gradients shrink as the loss falls). bf16 for comparison. */
static void amp_measure(dt_gpt *m, const int32_t *tok, const int32_t *tgt, int B, int T, const char *when)
{
    const size_t n = dt_gpt_layout(m)->numel;
    float *g32 = malloc(n * sizeof(float));
    if (!g32) die("out of memory");
    if (dt_gpt_set_precision(m, DT_F32) != DT_OK || dt_gpt_zero_grad(m) != DT_OK ||
        dt_gpt_forward(m, tok, tgt, B, T, NULL) != DT_OK || dt_gpt_backward(m, 1.0f) != DT_OK)
        die("fp32 pass");
    memcpy(g32, dt_gpt_grads(m), n * sizeof(float));
    size_t nonzero = 0, tiny = 0;
    double norm32 = 0;
    for (size_t i = 0; i < n; i++) {
        nonzero += g32[i] != 0.0f;
        tiny += g32[i] != 0.0f && fabsf(g32[i]) < 0x1p-25f;
        norm32 += (double)g32[i] * g32[i];
    }
    printf("# %s: %zu parameter gradients non-zero in FP32, %zu (%.3f%%) below 2^-25 (round to 0 in fp16)\n", when,
           nonzero, tiny, 100.0 * tiny / nonzero);
    struct { dt_dtype prec; float scale; } runs[] = {{DT_F16, 1.0f}, {DT_F16, 256.0f}, {DT_F16, 65536.0f},
                                                    {DT_BF16, 1.0f}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        if (dt_gpt_set_precision(m, runs[r].prec) != DT_OK || dt_gpt_zero_grad(m) != DT_OK ||
            dt_gpt_forward(m, tok, tgt, B, T, NULL) != DT_OK || dt_gpt_backward(m, runs[r].scale) != DT_OK)
            die("half pass");
        const float *gh = dt_gpt_grads(m);
        size_t under = 0;
        double err = 0;
        int inf = 0;
        for (size_t i = 0; i < n; i++) {
            float v = gh[i] / runs[r].scale;
            inf |= !isfinite(v);
            under += g32[i] != 0.0f && v == 0.0f;
            err += ((double)v - g32[i]) * ((double)v - g32[i]);
        }
        printf("%-12s %-6s %10g %12zu %11.4f%% %14.3g%s\n", when, runs[r].prec == DT_F16 ? "fp16" : "bf16",
               (double)runs[r].scale, under, 100.0 * under / nonzero, sqrt(err / norm32),
               inf ? "  (overflow: inf/NaN)" : "");
    }
    if (dt_gpt_set_precision(m, DT_F32) != DT_OK) die("precision");
    free(g32);
}

static int cmd_amp(int threads, int trained)
{
    dt_train_config c;
    dt_train_config_default(&c);
    c.threads = threads;
    c.train_iters = trained;
    c.lr.decay_iters = trained > 0 ? trained : 1;
    c.lr.warmup_iters = trained / 10;
    dt_trainer *tr;
    if (dt_trainer_create(&c, &tr) != DT_OK) die("trainer");
    dt_gpt *m = dt_trainer_model(tr);
    const int B = c.micro_batch_size, T = c.seq_length;
    int32_t *tok = malloc(sizeof(int32_t) * B * T), *tgt = malloc(sizeof(int32_t) * B * T);
    if (dt_data_batch(dt_trainer_data(tr), DT_SPLIT_VAL, 0, B, T, tok, tgt, NULL, NULL) != DT_OK) die("data");
    printf("# dtbench amp: tiny GPT, one micro-batch of %d x %d tokens of 2-digit addition (the dtrain defaults), "
           "%d thread(s)\n", B, T, dt_trainer_config(tr)->threads);
    printf("%-12s %-6s %10s %12s %12s %14s\n", "weights", "format", "loss_scale", "underflowed", "fraction",
           "rel_l2_error");
    amp_measure(m, tok, tgt, B, T, "initial");
    for (int i = 0; i < trained; i++)
        if (dt_trainer_step(tr, NULL) != DT_OK) die("step");
    char when[32];
    snprintf(when, sizeof when, "step%d", trained);
    amp_measure(m, tok, tgt, B, T, when);
    printf("# underflowed = non-zero in FP32, zero in the half run after unscaling; rel_l2_error = "
           "||g_half - g_fp32|| / ||g_fp32||\n");
    free(tok), free(tgt);
    dt_trainer_free(tr);
    return 0;
}

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
            die("gather timings");
        return;
    }
    for (int i = 1; i < c->size; i++) {
        double w[2];
        if (c->ops->irecv(c, w, sizeof w, i, AR_TAG, &q) != DT_OK || c->ops->wait(c, q) != DT_OK)
            die("gather timings");
        v[0] = w[0] > v[0] ? w[0] : v[0];
        v[1] += w[1];
    }
}

static int cmd_allreduce(int64_t chunk_bytes, int64_t min_bytes, int64_t max_bytes, int iters_flag)
{
    dt_comm *c;
    if (dt_comm_mpi_world(&c) != DT_OK) die("allreduce");
    const int n = c->size, r = c->rank;
    enum { NALGO = 4 };
    const dt_allreduce_algo algos[NALGO] = {DT_ALLREDUCE_RING, DT_ALLREDUCE_TREE, DT_ALLREDUCE_NAIVE,
                                            DT_ALLREDUCE_MPI};
    const size_t max_count = (size_t)max_bytes / sizeof(float);
    float *buf = malloc((max_count ? max_count : 1) * sizeof(float));
    if (!buf) die("out of memory");
    const double bus = 2.0 * (n - 1) / n;
    if (r == 0) {
        printf("# dtbench allreduce: %d rank(s), '%s' communicator, float32 sum in place; ring chunk %lld bytes; "
               "%s\n", n, c->ops->name, (long long)chunk_bytes,
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
            if (st != DT_OK) die(dt_allreduce_algo_name(algos[a]));
            for (int it = 1; it < warm; it++)
                if (dt_comm_allreduce(c, buf, count, algos[a], &o) != DT_OK) die(dt_allreduce_algo_name(algos[a]));
            if (c->ops->barrier(c) != DT_OK) die("barrier");
            int64_t t0 = dt_time_ns();
            for (int it = 0; it < iters; it++)
                if (dt_comm_allreduce(c, buf, count, algos[a], &o) != DT_OK) die(dt_allreduce_algo_name(algos[a]));
            double v[2] = {(dt_time_ns() - t0) * 1e-9 / iters, 0};
            // the check: one more call on fresh values, compared with the exact sum
            for (size_t i = 0; i < count; i++) buf[i] = ar_value(i, r);
            if (dt_comm_allreduce(c, buf, count, algos[a], &o) != DT_OK) die(dt_allreduce_algo_name(algos[a]));
            for (size_t i = 0; i < count; i++) {
                float want = 0;
                for (int q = 0; q < n; q++) want += ar_value(i, q);
                v[1] += buf[i] != want;
            }
            ar_gather(c, v);
            double algbw = bytes / v[0] / 1e9;
            busbw[a] = algbw * bus;
            if (r == 0) printf("  %10.2f %7.2f %7.2f %6.0f", v[0] * 1e6, algbw, busbw[a], v[1]);
        }
        if (r == 0) printf("\n"), fflush(stdout);
        if (bytes >= 256 * 1024 && busbw[3] > 0 && nratio < 64)
            ratio_size[nratio] = (double)bytes, ratio[nratio++] = busbw[0] / busbw[3];
    }
    if (r == 0 && nratio > 0) {
        printf("# ring busbw / mpi busbw, sizes >= 256 KiB (goal: >= 0.9, above 1 at 64 MiB)\n");
        for (int i = 0; i < nratio; i++) printf("%12.0f %6.3f\n", ratio_size[i], ratio[i]);
    }
    free(buf);
    dt_comm_free(c);
    if (dt_comm_finalize() != DT_OK) die("finalize");
    return 0;
}

int main(int argc, char **argv)
{
    int threads = 1, B = 16, T = 0, steps = 5, warmup = 1, help = 0, ar_iters = 0;
    int64_t ar_chunk = 1024 * 1024, ar_min = 4 * 1024, ar_max = 64 * 1024 * 1024;
    const char *model = "small";
    dt_arg args[] = {
        {"--threads", DT_ARG_INT, &threads, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 1024, NULL, NULL,
         "CPU threads (the sgemm peak is measured at the same count)", NULL, 0},
        {"--model", DT_ARG_CHOICE, &model, 0, 0, 0, "tiny|small|gpt2-124m", NULL, "train: model preset", NULL, 0},
        {"--micro-batch-size", DT_ARG_INT, &B, DT_ARG_HAS_MIN, 1, 0, NULL, NULL, "train: sequences per step", NULL, 0},
        {"--seq-length", DT_ARG_INT, &T, DT_ARG_HAS_MIN, 0, 0, NULL, NULL, "train: sequence length (0: the model's context)",
         NULL, 0},
        {"--steps", DT_ARG_INT, &steps, DT_ARG_HAS_MIN, 1, 0, NULL, NULL, "train: timed steps", NULL, 0},
        {"--warmup", DT_ARG_INT, &warmup, DT_ARG_HAS_MIN, 0, 0, NULL, NULL, "train: untimed warm-up steps", NULL, 0},
        {"--allreduce-chunk-bytes", DT_ARG_INT64, &ar_chunk, DT_ARG_HAS_MIN, 0, 0, NULL, NULL,
         "allreduce: ring chunk size in bytes (0: one message per segment; 1 MiB measured best at -np 2)", NULL, 0},
        {"--min-bytes", DT_ARG_INT64, &ar_min, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 4, 1 << 30, NULL, NULL,
         "allreduce: smallest buffer", NULL, 0},
        {"--max-bytes", DT_ARG_INT64, &ar_max, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 4, 1 << 30, NULL, NULL,
         "allreduce: largest buffer (sizes double from --min-bytes)", NULL, 0},
        {"--iters", DT_ARG_INT, &ar_iters, DT_ARG_HAS_MIN, 0, 0, NULL, NULL,
         "allreduce: timed calls per size and algorithm (0: 1 GiB / size, 10 to 5000)", NULL, 0},
        {"--help", DT_ARG_FLAG, &help, 0, 0, 0, NULL, NULL, "print this help and exit", NULL, 0},
    };
    const int n_args = (int)(sizeof args / sizeof args[0]);
    const char *usage = "dtbench gemm|train|recompute|largebatch|amp|allreduce [--flag value]...\n"
                        "  gemm       cblas_sgemm peak (GFLOP/s) at --threads\n"
                        "  train      tokens/s, achieved GFLOP/s and MFU against the sgemm peak measured in the same run\n"
                        "  recompute  peak activation bytes and step time per recomputation granularity / K\n"
                        "  largebatch base batch vs 8x batch with linear-scaled AdamW, LARS and LAMB (--steps: base "
                        "iterations)\n"
                        "  amp        fraction of gradients that underflow in fp16 with and without loss scaling "
                        "(--steps: FP32 training steps before the second measurement)\n"
                        "  allreduce  nccl-tests table of ring, tree, naive and mpi allreduce (run under mpirun)";
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        dt_args_print_help(argc < 2 ? stderr : stdout, usage, args, n_args);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (dt_args_parse("dtbench", args, n_args, argc - 1, argv + 1) != DT_ARGS_OK) return 2;
    if (help) {
        dt_args_print_help(stdout, usage, args, n_args);
        return 0;
    }
    if (strcmp(cmd, "gemm") == 0) return cmd_gemm(threads);
    if (strcmp(cmd, "train") == 0) return cmd_train(threads, model, B, T, steps, warmup);
    if (strcmp(cmd, "recompute") == 0) return cmd_recompute(threads, model, B, T, steps, warmup);
    if (strcmp(cmd, "amp") == 0)
        return cmd_amp(threads, dt_args_given(args, n_args, "--steps") ? steps : 1000);
    if (strcmp(cmd, "largebatch") == 0)
        return cmd_largebatch(threads, dt_args_given(args, n_args, "--steps") ? steps : 1600,
                              dt_args_given(args, n_args, "--micro-batch-size") ? B : 64);
    if (strcmp(cmd, "allreduce") == 0) return cmd_allreduce(ar_chunk, ar_min, ar_max, ar_iters);
    fprintf(stderr, "dtbench: '%s': unknown command (expected gemm, train, recompute, largebatch, amp or allreduce)\n",
            cmd);
    return 2;
}
