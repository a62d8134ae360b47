/* dtrain_report.c: what dtrain prints: the run's setup, the progress line
 * redrawn on a terminal or the log lines, the overflow and non-finite
 * notes, and the evaluations. */
#include <stdio.h>
#include <string.h>

#include "dtrain_prog.h"

/* Remove the progress line before other output. */
void dtrain_clear_live(dtrain_out *out)
{
    if (out->live && out->line_shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        out->line_shown = 0;
    }
}

static void dtrain_fmt_count(char *buf, size_t n, double v)
{
    if (v >= 1e9) snprintf(buf, n, "%.2fG", v / 1e9);
    else if (v >= 1e6) snprintf(buf, n, "%.2fM", v / 1e6);
    else if (v >= 1e4) snprintf(buf, n, "%.1fk", v / 1e3);
    else snprintf(buf, n, "%.0f", v);
}

static void dtrain_fmt_duration(char *buf, size_t n, double s)
{
    if (s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

static void dtrain_print_model(const dt_train_config *c, const dt_trainer *tr, const char *params)
{
    if (c->model_kind == DT_MODEL_MLP_BN) {
        printf("model: mlp-bn, %d hidden layer%s of %d, %s, %d inputs, %d classes, %zu params (%s)\n",
               c->mlp.num_layers, c->mlp.num_layers == 1 ? "" : "s", c->mlp.hidden_size,
               c->mlp.batchnorm ? "BatchNorm + ReLU" : "ReLU (no BatchNorm)", c->mlp.input_dim, c->mlp.num_classes,
               dt_trainer_num_params(tr), params);
        if (c->mlp.batchnorm) {
            int n = c->global_batch_size / c->micro_batch_size;
            if (c->bn_momentum_adjust)
                printf("bn:    momentum %g per step -> %.6g per micro-batch (1-(1-m)^(1/%d))\n",
                       (double)c->mlp.bn_momentum, (double)dt_bn_momentum_per_micro(c->mlp.bn_momentum, n), n);
            else
                printf("bn:    momentum %g per micro-batch%s\n", (double)c->mlp.bn_momentum,
                       n > 1 ? " (not adjusted for accumulation: --bn-momentum-adjust)" : "");
        }
        printf("data:  task blobs (%d classes in %d dimensions, separation %g)\n", c->blobs.classes, c->blobs.dims,
               (double)c->blobs.separation);
    } else {
        printf("model: %s, %d layers, %d heads, width %d, context %d, vocab %d, %zu params (%s)\n", c->model_name,
               c->model.num_layers, c->model.num_heads, c->model.hidden_size, c->model.seq_len, c->model.vocab_size,
               dt_trainer_num_params(tr), params);
        if (c->load_hf)
            printf("init:  %s from --load-hf %s (config.json, model.safetensors)\n",
                   c->load_dir ? "the model's configuration" : "the weights", c->load_hf);
        if (c->data.path && c->data.tokenizer)
            printf("data:  text file %s, GPT-2 BPE from %s, seq length %d\n", c->data.path, c->data.tokenizer,
                   c->seq_length);
        else if (c->data.path) printf("data:  text file %s, seq length %d\n", c->data.path, c->seq_length);
        else if (strcmp(c->data.task, "add") == 0)
            printf("data:  task add (operands of 1..%d digits), seq length %d\n", c->data.digits, c->seq_length);
        else
            printf("data:  task %s (words of 1..%d letters), seq length %d\n", c->data.task, c->data.max_len,
                   c->seq_length);
        const char *note = dt_trainer_data_note(tr);
        if (note) printf("data:  %s\n", note);
    }
}

/* Micro-batches per step on each rank. */
static int dtrain_micro_per_rank(const dt_train_config *c)
{
    const int dp = dt_grid_data_size(c->comm ? c->comm->size : 1, c->ps_mode != DT_PS_NONE ? c->num_ps_servers : 0,
                                     c->tensor_size, c->context_size > 1 ? c->context_size : 1, c->pipeline_size);
    return c->global_batch_size / (c->micro_batch_size * dp);
}

static void dtrain_print_batch(const dt_train_config *c, int n_micro)
{
    if (c->model_kind == DT_MODEL_MLP_BN) /* progress "tok/s" counts examples here */
        printf("batch: %d examples (%d x %d micro-batch%s), %lld iterations\n", c->global_batch_size, n_micro,
               c->micro_batch_size, n_micro == 1 ? "" : "es", (long long)c->train_iters);
    else
        printf("batch: %d sequences (%d x %d micro-batch%s), %lld tokens per step, %lld iterations\n",
               c->global_batch_size, n_micro, c->micro_batch_size, n_micro == 1 ? "" : "es",
               (long long)c->global_batch_size * c->seq_length, (long long)c->train_iters);
}

static void dtrain_print_optim(const dt_train_config *c, const dt_trainer *tr)
{
    if (c->optim.kind == DT_OPTIM_ADAMW)
        printf("optim: adamw (beta1 %g, beta2 %g, eps %g)", (double)c->optim.beta1, (double)c->optim.beta2,
               (double)c->optim.eps);
    else if (c->optim.kind == DT_OPTIM_LAMB)
        printf("optim: lamb (beta1 %g, beta2 %g, eps %g, phi clipped to [%g, %g])", (double)c->optim.beta1,
               (double)c->optim.beta2, (double)c->optim.eps, (double)c->optim.lamb_gamma_l,
               (double)c->optim.lamb_gamma_u);
    else if (c->optim.kind == DT_OPTIM_LARS)
        printf("optim: lars (momentum %g, eta %g)", (double)c->optim.momentum, (double)c->optim.lars_eta);
    else printf("optim: sgd (momentum %g)", (double)c->optim.momentum);
    printf(", lr %g -> %g %s over %lld iters, warmup %lld, weight decay %g, clip %g\n", (double)c->lr.max_lr,
           (double)c->lr.min_lr, dtrain_decay_name(c->lr.style), (long long)c->lr.decay_iters,
           (long long)c->lr.warmup_iters, (double)c->optim.weight_decay, (double)c->clip_grad);
    if (c->lr_scaling != DT_LR_SCALING_NONE) {
        const dt_lr_schedule *eff = dt_trainer_lr_schedule(tr);
        printf("lr scaling: %s, global batch %d / base %d = x%.4g: effective lr %g -> %g\n",
               c->lr_scaling == DT_LR_SCALING_LINEAR ? "linear" : "sqrt", c->global_batch_size, c->base_batch_size,
               dt_lr_scaling_factor(c->lr_scaling, c->global_batch_size, c->base_batch_size), (double)eff->max_lr,
               (double)eff->min_lr);
    }
}

static void dtrain_print_parallel(const dt_train_config *c, int n_micro)
{
    const int cpc = c->context_size > 1 ? c->context_size : 1;
    if (c->comm && (c->pipeline_size > 1 || c->tensor_size > 1 || cpc > 1)) {
        dt_grid g; /* the trainer made the same one: it cannot be refused here */
        if (dt_grid_init(&g, c->comm->size, 0, c->tensor_size, cpc, c->pipeline_size) != DT_OK) return;
        const int t = g.size[DT_GRID_TENSOR], p = g.size[DT_GRID_PIPELINE], d = g.size[DT_GRID_DATA];
        if (cpc == 1)
            printf("parallel: grid t=%d x d=%d x p=%d (tensor, data, pipeline; rank = t_i + %d*(d_i + %d*p_i)), "
                   "schedule %s, %d micro-batch%s per step per pipeline\n",
                   t, d, p, t, d, dt_sched_kind_name(c->pipeline_schedule), n_micro, n_micro == 1 ? "" : "es");
        else
            printf("parallel: grid t=%d x c=%d x d=%d x p=%d (tensor, context, data, pipeline; rank = t_i + "
                   "%d*(c_i + %d*(d_i + %d*p_i))), context exchange %s, schedule %s, %d micro-batch%s per step per "
                   "pipeline; gradients reduced over the %d x %d context and data ranks\n",
                   t, cpc, d, p, t, cpc, d, dt_cp_comm_name(c->cp_comm_type), dt_sched_kind_name(c->pipeline_schedule),
                   n_micro, n_micro == 1 ? "" : "es", cpc, d);
        if (c->use_distributed_optimizer)
            printf("  ZeRO-1: %s\n",
                   d > 1 ? "each stage's (tensor shard's) optimizer state and FP32 masters sharded over its "
                           "data-parallel group"
                         : "nothing to shard (d = 1)");
        if (c->zero_stage >= 2)
            printf("  ZeRO-%d: each stage's (tensor shard's) gradients reduce-scattered layer by layer during every "
                   "backward%s, optimizer state and FP32 weights sharded over its data-parallel group\n",
                   c->zero_stage, c->zero_stage == 3 ? ", its weights gathered before each layer computes" : "");
        for (int r = 0; r < c->comm->size && c->comm->size <= 64; r++)
            if (cpc == 1)
                printf("  rank %d: tensor %d, data %d, stage %d\n", r, dt_grid_coord(&g, r, DT_GRID_TENSOR),
                       dt_grid_coord(&g, r, DT_GRID_DATA), dt_grid_coord(&g, r, DT_GRID_PIPELINE));
            else
                printf("  rank %d: tensor %d, context %d (chunks %d and %d of %d), data %d, stage %d\n", r,
                       dt_grid_coord(&g, r, DT_GRID_TENSOR), dt_grid_coord(&g, r, DT_GRID_CONTEXT),
                       dt_grid_coord(&g, r, DT_GRID_CONTEXT), 2 * cpc - 1 - dt_grid_coord(&g, r, DT_GRID_CONTEXT),
                       2 * cpc, dt_grid_coord(&g, r, DT_GRID_DATA), dt_grid_coord(&g, r, DT_GRID_PIPELINE));
    } else if (c->comm && c->ps_mode != DT_PS_NONE)
        printf("parallel: %d worker%s and %d parameter server%s (%s%s), weights and optimizer state sharded over "
               "the servers\n",
               c->comm->size - c->num_ps_servers, c->comm->size - c->num_ps_servers == 1 ? "" : "s", c->num_ps_servers,
               c->num_ps_servers == 1 ? "" : "s", c->ps_mode == DT_PS_SYNC ? "ps-sync" : "ps-async",
               c->ps_mode == DT_PS_ASYNC && c->max_staleness >= 0 ? ", bounded staleness" : "");
    else if (c->zero_stage >= 2)
        printf("parallel: %d data-parallel rank%s, ZeRO-%d: gradients reduce-scattered %s during every backward%s, "
               "optimizer state and FP32 weights sharded\n",
               c->comm ? c->comm->size : 1,
               c->comm && c->comm->size == 1 ? ""
               : c->comm                     ? "s"
                                             : "",
               c->zero_stage, c->zero_stage == 2 ? "per bucket" : "per layer",
               c->zero_stage == 3 ? ", each layer's weights all-gathered before its forward and backward" : "");
    else if (c->comm && c->use_distributed_optimizer)
        printf("parallel: %d data-parallel rank%s, ZeRO-1: gradients reduce-scattered, optimizer state sharded, "
               "weights all-gathered\n",
               c->comm->size, c->comm->size == 1 ? "" : "s");
    else if (c->comm)
        printf("parallel: %d data-parallel rank%s, gradients summed by %s allreduce%s\n", c->comm->size,
               c->comm->size == 1 ? "" : "s", dt_allreduce_algo_name(c->allreduce),
               c->allreduce == DT_ALLREDUCE_RING && c->allreduce_chunk_bytes ? " (chunked)" : "");
}

static void dtrain_print_precision_memory(const dt_train_config *c)
{
    if (c->precision != DT_F32) {
        printf("precision: %s storage, FP32 master weights and accumulation", c->precision == DT_F16 ? "fp16" : "bf16");
        if (c->use_loss_scaling && c->loss_scaler.static_scale > 0)
            printf(", static loss scale %g\n", (double)c->loss_scaler.static_scale);
        else if (c->use_loss_scaling)
            printf(", dynamic loss scale from %g (window %d, hysteresis %d, min %g)\n",
                   (double)c->loss_scaler.initial_scale, c->loss_scaler.window, c->loss_scaler.hysteresis,
                   (double)c->loss_scaler.min_scale);
        else printf(", no loss scaling\n");
    }
    if (c->fp8 != DT_FP8_OFF) {
        /* the formats' ranges, as dt_fp8.h computes them */
        const dt_fp8_format fx = dt_fp8_role_format(c->fp8, 0), fg = dt_fp8_role_format(c->fp8, 2);
        printf("fp8: %s GEMMs in the blocks' linear layers: x and w %s (max %g, smallest %g), gradients %s (max %g, "
               "smallest %g); ",
               dt_fp8_mode_name(c->fp8), dt_fp8_format_name(fx), (double)dt_fp8_max(fx),
               (double)dt_fp8_min_subnormal(fx), dt_fp8_format_name(fg), (double)dt_fp8_max(fg),
               (double)dt_fp8_min_subnormal(fg));
        if (c->fp8_recipe == DT_FP8_DELAYED)
            printf("delayed scaling: amax history %d (%s), margin %d\n", c->fp8_amax_history_len,
                   dt_fp8_amax_algo_name(c->fp8_amax_algo), c->fp8_margin);
        else if (c->fp8_recipe == DT_FP8_TENSORWISE) printf("tensorwise scaling, margin %d\n", c->fp8_margin);
        else printf("blockwise scaling (1x128 activations and gradients, 128x128 weights), margin %d\n", c->fp8_margin);
    }
    if (c->recompute == DT_RECOMPUTE_FULL)
        printf("memory: full activation recomputation, checkpoint every %d block%s\n", c->recompute_num_layers,
               c->recompute_num_layers == 1 ? "" : "s");
    else if (c->recompute == DT_RECOMPUTE_SELECTIVE)
        printf("memory: selective activation recomputation (attention core: its log-sum-exp)\n");
    fflush(stdout);
}

void dtrain_print_setup(const dt_trainer *tr)
{
    const dt_train_config *c = dt_trainer_config(tr);
    char params[32];
    dtrain_fmt_count(params, sizeof params, (double)dt_trainer_num_params(tr));
    if (dt_trainer_threads_automatic(tr))
        printf("dtrain %s on %s, up to %d threads (automatic: fewer while fewer run faster)\n", DT_VERSION_STRING,
               c->device, c->threads);
    else printf("dtrain %s on %s, %d thread%s\n", DT_VERSION_STRING, c->device, c->threads, c->threads == 1 ? "" : "s");
    dtrain_print_model(c, tr, params);
    const int n_micro = dtrain_micro_per_rank(c);
    dtrain_print_batch(c, n_micro);
    dtrain_print_optim(c, tr);
    dtrain_print_parallel(c, n_micro);
    dtrain_print_precision_memory(c);
    fflush(stdout);
}

/* Every skipped or troubled step is said, clearing the progress line. */
static void dtrain_print_step_notes(dtrain_out *out, const dt_train_config *cfg, const dt_train_stats *st)
{
    if (st->overflow) { /* like DeepSpeed's OVERFLOW! line: every skipped step is said */
        dtrain_clear_live(out);
        if (st->overflow_where) /* the loss itself: where the forward left fp16's range */
            printf("overflow: iteration %lld skipped at loss scale %g (non-finite loss; %s)\n", (long long)st->iter,
                   (double)st->loss_scale, st->overflow_where);
        else
            printf("overflow: iteration %lld skipped at loss scale %g (first inf/NaN gradient: %s)\n",
                   (long long)st->iter, (double)st->loss_scale, st->overflow_tensor ? st->overflow_tensor : "?");
        fflush(stdout);
    }
    if (st->nonfinite) { /* --skip-nonfinite: every skipped step is said */
        dtrain_clear_live(out);
        printf("nonfinite: iteration %lld skipped (%s); %lld skipped so far\n", (long long)st->iter,
               st->nonfinite_where ? st->nonfinite_where : "?", (long long)st->nonfinite_skipped);
        fflush(stdout);
    }
    if (st->scale_at_min_first) {
        dtrain_clear_live(out);
        fprintf(stderr,
                PROG ": warning: the loss scale is at its minimum (%g) and %s still overflow "
                     "(iteration %lld, first in %s): fp16 cannot hold them; lower --lr, check the data, or "
                     "use --bf16\n",
                (double)cfg->loss_scaler.min_scale, st->overflow_where ? "activations" : "gradients",
                (long long)st->iter,
                st->overflow_where ? "the forward" : st->overflow_tensor ? st->overflow_tensor : "?");
    }
}

void dtrain_print_step(dtrain_out *out, const dt_train_config *cfg, const dt_train_stats *st, double tps)
{
    const int64_t total = cfg->train_iters;
    /* from the throughput after the first (warm-up) step */
    const double eta =
        tps > 0 ? (double)(total - st->iter) * (double)cfg->global_batch_size * cfg->seq_length / tps : 0.0;
    char tok[32], eta_s[32], ls[64] = "";
    dtrain_fmt_count(tok, sizeof tok, tps);
    dtrain_fmt_duration(eta_s, sizeof eta_s, eta);
    if (cfg->use_loss_scaling)
        snprintf(ls, sizeof ls, "  scale %g skipped %lld", (double)st->loss_scale, (long long)st->skipped_steps);
    /* pipedream: rank 0 learns a step's loss a step later (dt_train_stats.loss_iter) */
    char loss[48];
    if (st->loss_iter == st->iter) snprintf(loss, sizeof loss, "%.4f", (double)st->loss);
    else if (st->loss_iter > 0)
        snprintf(loss, sizeof loss, "%.4f (iter %lld)", (double)st->loss, (long long)st->loss_iter);
    else snprintf(loss, sizeof loss, "-");
    dtrain_print_step_notes(out, cfg, st);
    if (out->live) {
        int64_t now = dt_time_ns();
        if (now - out->last_draw_ns > 100000000LL || st->iter == total) {
            fprintf(stderr, "\r[%lld/%lld] loss %s lr %.2e%s %s tok/s eta %s\033[K", (long long)st->iter,
                    (long long)total, loss, (double)st->lr, ls, tok, eta_s);
            fflush(stderr);
            out->line_shown = 1;
            out->last_draw_ns = now;
        }
    } else if (st->iter % cfg->log_interval == 0 || st->iter == 1) {
        printf("iter %lld/%lld  loss %s  lr %.3e  grad_norm %.3f%s  %s tok/s  eta %s\n", (long long)st->iter,
               (long long)total, loss, (double)st->lr, st->grad_norm, ls, tok, eta_s);
        fflush(stdout);
    }
}

void dtrain_print_eval(dtrain_out *out, int64_t iter, const dt_eval_result *ev)
{
    dtrain_clear_live(out);
    if (ev->accuracy >= 0)
        printf("eval  iter %lld: val_loss %.4f accuracy %.2f%% (%d examples)\n", (long long)iter, (double)ev->loss,
               100.0 * ev->accuracy, ev->n_examples);
    else printf("eval  iter %lld: val_loss %.4f\n", (long long)iter, (double)ev->loss);
    fflush(stdout);
}
