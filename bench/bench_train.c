/* bench_train.c: the single-process training benchmarks: `dtbench train`
 * (tokens/s and MFU against the GEMM peak measured in the same run),
 * recompute (memory and time per recomputation granularity), largebatch
 * (scaled AdamW, LARS and LAMB at 8x the batch) and amp (fp16 gradient
 * underflow with and without loss scaling). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "dtbench.h"

/* The benchmark model: a preset on random tokens (B, T); T <= 0 means the
 * preset's context. Exits with 2 on a bad --seq-length. */
typedef struct bench_setup {
    dt_backend *be;
    dt_gpt_config cfg;
    dt_gpt *m;
    int T;
    int32_t *tok, *tgt; /* (B, T) */
} bench_setup;

static void bench_setup_init(bench_setup *b, const char *device, int threads, const char *model, int B, int T)
{
    if (strcmp(device, "cuda") == 0) b->be = dtbench_gpu_backend("train");
    else if (dt_backend_create("cpu", threads, &b->be) != DT_OK) dtbench_die("cpu backend");
    if (dt_gpt_config_preset(model, &b->cfg) != DT_OK) dtbench_die("--model");
    if (T <= 0) T = b->cfg.seq_len;
    if (T > b->cfg.seq_len) {
        fprintf(stderr, "dtbench: --seq-length %d exceeds --model %s's context %d\n", T, model, b->cfg.seq_len);
        exit(2);
    }
    if ((int64_t)B * T > (int64_t)1 << 30) { /* as dtrain: the token loops and indices are int */
        fprintf(stderr,
                "dtbench: --micro-batch-size %d x --seq-length %d: too many tokens per micro-batch (at most "
                "2^30)\n",
                B, T);
        exit(2);
    }
    b->T = T;
    if (dt_gpt_create(&b->cfg, b->be, &b->m) != DT_OK) dtbench_die("model");
    if (dt_gpt_init_weights(b->m, 1) != DT_OK) dtbench_die("model init");
    b->tok = malloc(sizeof(int32_t) * B * T);
    b->tgt = malloc(sizeof(int32_t) * B * T);
    if (!b->tok || !b->tgt) dtbench_die("out of memory");
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

/* What one timed run measured. */
typedef struct train_result {
    double tps, mfu;
    size_t act_bytes;
} train_result;

/* One timed run at one precision: DT_F32, or DT_F16 / DT_BF16 mixed
 * precision (dt_gpt_set_precision). Its result lines carry prefix ("" or
 * "bf16_"). On the GPU the MFU is against the peak of the GEMM path the run
 * takes: FP32 runs keep exact FP32 GEMMs (the FP32 peak); in mixed precision
 * every GEMM input is a 16-bit value and dt_gpt_set_precision tells the
 * backend so (be->set_gemm_inputs), which then multiplies in that type with
 * FP32 accumulation: the bf16 / fp16 peak of be->gemm in the same mode. A
 * backend without set_gemm_inputs gets TF32 instead (exact on 16-bit
 * values) and the TF32 peak. On the CPU, FP32 runs are measured against
 * OpenBLAS's sgemm peak, bf16 runs against be->gemm's bf16 peak (oneDNN's
 * matrix units where it has a kernel), each measured in this run. */
static void train_once(const char *device, int threads, const char *model, int B, int T, int steps, int warmup,
                       dt_dtype precision, const char *prefix, train_result *res)
{
    const int gpu = strcmp(device, "cuda") == 0;
    bench_setup bs;
    bench_setup_init(&bs, device, threads, model, B, T);
    dt_backend *be = bs.be;
    dt_gpt *m = bs.m;
    const dt_gpt_config cfg = bs.cfg;
    const int32_t *tok = bs.tok, *tgt = bs.tgt;
    T = bs.T;
    dt_optim_config oc;
    dt_optim_config_default(&oc, DT_OPTIM_ADAMW);
    dt_optim opt;
    if (dt_optim_init(&opt, &oc, be, dt_gpt_layout(m)) != DT_OK) dtbench_die("optimizer");
    if (precision != DT_F32 && dt_gpt_set_precision(m, precision) != DT_OK) dtbench_die("precision");
    dtbench_gemm_kind gk = GEMM_FP32;
    if (gpu && precision != DT_F32) {
        gk = !be->set_gemm_inputs ? GEMM_TF32 : precision == DT_BF16 ? GEMM_BF16 : GEMM_FP16;
        if (gk == GEMM_TF32) dtbench_check(dt__cuda_set_tf32(be, 1), "TF32 setting");
    }
    /* fp16: a static loss scale keeps small gradients from flushing to zero;
     * AdamW unscales them (grad_scale). 1 otherwise. */
    const float loss_scale = precision == DT_F16 ? 1024.0f : 1.0f;

    double fpt = dt_gpt_config_flops_per_token(&cfg, T);
    char where[32];
    if (gpu) snprintf(where, sizeof where, "device cuda");
    else snprintf(where, sizeof where, "%d thread(s)", be->threads);
    printf("# dtbench train: --model %s (L=%d, NH=%d, C=%d, V=%d, N=%zu params), B=%d, T=%d, %s%s\n", model,
           cfg.num_layers, cfg.num_heads, cfg.hidden_size, cfg.vocab_size, dt_gpt_config_num_params(&cfg), B, T, where,
           precision == DT_F16    ? ", --fp16"
           : precision == DT_BF16 ? ", --bf16"
                                  : "");
    printf("# step = forward + backward + AdamW on random tokens; %d warm-up + %d timed steps\n", warmup, steps);
    if (precision != DT_F32)
        printf("# mixed precision: %s activations and compute weights, FP32 masters and statistics%s\n",
               precision == DT_F16 ? "f16" : "bf16",
               precision == DT_F16 ? "; static loss scale 1024, unscaled in the AdamW step" : "");
    static const char *const gemm_text[] = {
        "exact FP32 (CUBLAS_COMPUTE_32F)",
        "TF32 allowed (dt__cuda_set_tf32; the 16-bit-rounded inputs are exact in TF32)",
        "bf16 inputs, FP32 accumulation (be->set_gemm_inputs, tensor cores)",
        "fp16 inputs, FP32 accumulation (be->set_gemm_inputs, tensor cores)"};
    if (gpu) printf("# GEMMs: %s\n", gemm_text[gk]);
    else if (precision == DT_BF16) {
        const char *engine = dt_backend_cpu_bf16_engine();
        printf("# GEMMs: bf16 inputs, FP32 accumulation: %s\n",
               engine ? engine : "no oneDNN bf16 kernel here: OpenBLAS FP32 on the bf16 values");
    }
    int64_t t_total = 0, t_fwd = 0, t_bwd = 0, t_opt = 0;
    float loss = 0;
    for (int s = 0; s < warmup + steps; s++) {
        int64_t t0 = dt_time_ns();
        if (dt_gpt_zero_grad(m) != DT_OK) dtbench_die("zero_grad");
        if (dt_gpt_forward(m, tok, tgt, B, T, &loss) != DT_OK) dtbench_die("forward");
        int64_t t1 = dt_time_ns();
        if (dt_gpt_backward(m, loss_scale) != DT_OK) dtbench_die("backward");
        if (be->synchronize(be) != DT_OK) dtbench_die("synchronize"); /* GPU ops are asynchronous */
        int64_t t2 = dt_time_ns();
        if (dt_optim_step(&opt, dt_gpt_params(m), dt_gpt_grads(m), 1e-4f, 1.0f / loss_scale) != DT_OK)
            dtbench_die("optimizer step");
        if (be->synchronize(be) != DT_OK) dtbench_die("synchronize");
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
    double peak;
    if (gpu) {
        printf("# reference: cuBLAS %s GEMM peak through be->gemm (4096^3, 8192^3) in the mode this run's GEMMs "
               "use, measured now\n",
               dtbench_gemm_kind_name[gk]);
        peak = dtbench_gpu_gemm_peak(be, gk, 1);
    } else if (precision == DT_BF16) {
        printf("# reference: be->gemm bf16 peak at %d thread(s) (1024^3, 2048^3), measured now\n", be->threads);
        peak = dtbench_cpu_bf16_peak(be, 1);
    } else {
        printf("# reference: cblas_sgemm peak at %d thread(s), measured now\n", be->threads);
        peak = dtbench_sgemm_peak(be->threads, 1);
    }
    printf("%stokens_per_second %.1f\n", prefix, tps);
    printf("%sflops_per_token %.4g\n", prefix, fpt);
    printf("%sachieved_gflops %.1f\n", prefix, gflops);
    if (gpu) printf("peak_kind %s\n", dtbench_gemm_kind_name[gk]);
    printf("%speak_gflops %.1f\n", prefix, peak);
    char note[64];
    snprintf(note, sizeof note, "(against the cuBLAS %s peak)", dtbench_gemm_kind_name[gk]);
    if (gpu && strcmp(model, "gpt2-124m") == 0) dtbench_goal_line("mfu", gflops / peak, 0.4, note);
    else printf("%smfu %.3f\n", prefix, gflops / peak);
    printf("%speak_activation_bytes %zu\n", prefix, dt_gpt_peak_activation_bytes(m));
    *res = (train_result){.tps = tps, .mfu = gflops / peak, .act_bytes = dt_gpt_peak_activation_bytes(m)};
    dt_optim_free(&opt);
    bench_setup_free(&bs);
}

/* precision: DT_F32, DT_BF16 or DT_F16 for one run; compare (the CPU's
 * default): an FP32 run, then a bf16 run of the same model, and the ratio
 * of their tokens/s. */
int dtbench_cmd_train(const char *device, int threads, const char *model, int B, int T, int steps, int warmup,
                      dt_dtype precision, int compare)
{
    train_result a, b;
    train_once(device, threads, model, B, T, steps, warmup, compare ? DT_F32 : precision, "", &a);
    if (!compare) return 0;
    printf("\n");
    train_once(device, threads, model, B, T, steps, warmup, DT_BF16, "bf16_", &b);
    const char *engine = dt_backend_cpu_bf16_engine();
    printf("bf16_engine %s\n", engine ? engine : "none");
    printf("bf16_over_fp32 %.2f\n", b.tps / a.tps);
    printf("# bf16 / fp32: %.2fx the tokens/s, %.2fx the peak activation memory; MFU %.3f (fp32, of OpenBLAS's "
           "sgemm peak) and %.3f (bf16, of be->gemm's bf16 peak)\n",
           b.tps / a.tps, (double)b.act_bytes / (double)a.act_bytes, a.mfu, b.mfu);
    return 0;
}

/* Activation recomputation: peak activation bytes and step time per
 * granularity / K, each relative to no recomputation in the same run. */
int dtbench_cmd_recompute(int threads, const char *model, int B, int T, int steps, int warmup)
{
    bench_setup bs;
    bench_setup_init(&bs, "cpu", threads, model, B, T);
    dt_backend *be = bs.be;
    dt_gpt *m = bs.m;
    const dt_gpt_config cfg = bs.cfg;
    const int32_t *tok = bs.tok, *tgt = bs.tgt;
    T = bs.T;
    int sq = 1;
    while ((sq + 1) * (sq + 1) <= cfg.num_layers) sq++;
    struct run {
        dt_recompute mode;
        int k;
        const char *name;
    } runs[8];
    int n = 0;
    runs[n++] = (struct run){DT_RECOMPUTE_NONE, 0, "none"};
    runs[n++] = (struct run){DT_RECOMPUTE_SELECTIVE, 0, "selective"};
    runs[n++] = (struct run){DT_RECOMPUTE_FULL, 1, "full"};
    if (sq > 1) runs[n++] = (struct run){DT_RECOMPUTE_FULL, sq, "full"};
    if (cfg.num_layers > sq) runs[n++] = (struct run){DT_RECOMPUTE_FULL, cfg.num_layers, "full"};
    printf("# dtbench recompute: --model %s (L=%d, C=%d), B=%d, T=%d, %d thread(s); forward + backward, %d warm-up + "
           "%d timed steps\n",
           model, cfg.num_layers, cfg.hidden_size, B, T, be->threads, warmup, steps);
    printf("# K = blocks per checkpointed group (full); sqrt(L) rounds down to %d\n", sq);
    printf("%-10s %3s %16s %8s %10s %8s\n", "granularity", "K", "peak_act_bytes", "ratio", "step_ms", "ratio");
    double base_bytes = 0, base_ms = 0;
    for (int i = 0; i < n; i++) {
        if (dt_gpt_set_recompute(m, runs[i].mode, runs[i].k) != DT_OK) dtbench_die("recompute");
        int64_t t_total = 0;
        for (int s = 0; s < warmup + steps; s++) {
            int64_t t0 = dt_time_ns();
            if (dt_gpt_forward(m, tok, tgt, B, T, NULL) != DT_OK) dtbench_die("forward");
            if (dt_gpt_backward(m, 1.0f) != DT_OK) dtbench_die("backward");
            if (s >= warmup) t_total += dt_time_ns() - t0;
        }
        if (dt_gpt_zero_grad(m) != DT_OK) dtbench_die("zero_grad");
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
int dtbench_cmd_largebatch(int threads, int base_iters, int base_batch)
{
    struct lb_run {
        const char *name;
        dt_optim_kind kind;
        int mult;              /* batch multiple */
        float lr;              /* LR at the base batch */
        dt_lr_scaling scaling; /* to the run's batch */
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
        if (dt_trainer_create(&c, &tr) != DT_OK) dtbench_die("trainer");
        int64_t t0 = dt_time_ns();
        dt_train_stats st;
        for (int64_t it = 0; it < c.train_iters; it++)
            if (dt_trainer_step(tr, &st) != DT_OK) dtbench_die("step");
        dt_eval_result ev;
        if (dt_trainer_evaluate(tr, &ev) != DT_OK) dtbench_die("evaluate");
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
    if (!g32) dtbench_die("out of memory");
    if (dt_gpt_set_precision(m, DT_F32) != DT_OK || dt_gpt_zero_grad(m) != DT_OK ||
        dt_gpt_forward(m, tok, tgt, B, T, NULL) != DT_OK || dt_gpt_backward(m, 1.0f) != DT_OK)
        dtbench_die("fp32 pass");
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
    struct {
        dt_dtype prec;
        float scale;
    } runs[] = {{DT_F16, 1.0f}, {DT_F16, 256.0f}, {DT_F16, 65536.0f}, {DT_BF16, 1.0f}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        if (dt_gpt_set_precision(m, runs[r].prec) != DT_OK || dt_gpt_zero_grad(m) != DT_OK ||
            dt_gpt_forward(m, tok, tgt, B, T, NULL) != DT_OK || dt_gpt_backward(m, runs[r].scale) != DT_OK)
            dtbench_die("half pass");
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
    if (dt_gpt_set_precision(m, DT_F32) != DT_OK) dtbench_die("precision");
    free(g32);
}

int dtbench_cmd_amp(int threads, int trained)
{
    dt_train_config c;
    dt_train_config_default(&c);
    c.threads = threads;
    c.train_iters = trained;
    c.lr.decay_iters = trained > 0 ? trained : 1;
    c.lr.warmup_iters = trained / 10;
    dt_trainer *tr;
    if (dt_trainer_create(&c, &tr) != DT_OK) dtbench_die("trainer");
    dt_gpt *m = dt_trainer_model(tr);
    const int B = c.micro_batch_size, T = c.seq_length;
    int32_t *tok = malloc(sizeof(int32_t) * B * T), *tgt = malloc(sizeof(int32_t) * B * T);
    if (dt_data_batch(dt_trainer_data(tr), DT_SPLIT_VAL, 0, B, T, tok, tgt, NULL, NULL) != DT_OK) dtbench_die("data");
    printf("# dtbench amp: tiny GPT, one micro-batch of %d x %d tokens of 2-digit addition (the dtrain defaults), "
           "%d thread(s)\n",
           B, T, dt_trainer_config(tr)->threads);
    printf("%-12s %-6s %10s %12s %12s %14s\n", "weights", "format", "loss_scale", "underflowed", "fraction",
           "rel_l2_error");
    amp_measure(m, tok, tgt, B, T, "initial");
    for (int i = 0; i < trained; i++)
        if (dt_trainer_step(tr, NULL) != DT_OK) dtbench_die("step");
    char when[32];
    snprintf(when, sizeof when, "step%d", trained);
    amp_measure(m, tok, tgt, B, T, when);
    printf("# underflowed = non-zero in FP32, zero in the half run after unscaling; rel_l2_error = "
           "||g_half - g_fp32|| / ||g_fp32||\n");
    free(tok), free(tgt);
    dt_trainer_free(tr);
    return 0;
}
