/* config.c: the training configuration's defaults and its validation
 * (dt_train_config_default, dt_train_config_validate), and the small
 * parsers of its enumerations (--lr-scaling, the parameter-server modes).
 *
 * Invariants: validation reads only the configuration and the world size
 * of cfg->comm, never a file; every refusal is one line naming the flag
 * and the value and what was expected; a configuration that validates can
 * be created (what depends on the data, such as the vocabulary, is checked
 * with its placeholder here). */
#define _POSIX_C_SOURCE 200809L
#include "dt_train.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dt_internal.h"
#include "tp.h"
#include "trainer_internal.h"

void dt_train_config_default(dt_train_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->model_name, sizeof cfg->model_name, "tiny");
    if (dt_gpt_config_preset("tiny", &cfg->model) != DT_OK) {
        /* the preset table is the source of truth; this only keeps the
         * defaults usable if it were ever missing */
        cfg->model.seq_len = 128;
        cfg->model.num_layers = 2;
        cfg->model.num_heads = 4;
        cfg->model.hidden_size = 64;
        dt_clear_error();
    }
    cfg->model.vocab_size = 0; /* from the data */
    /* Tuned on 2 cores (measured, see the trainer's report): the tiny model
     * learns 2-digit addition to ~99% exact match on held-out sums in ~2500
     * steps (about 50 s); 3 digits reach only ~80% in the same minute.
     * Short sequences help most: with T=16 a row holds one or two examples,
     * so their digits sit at few distinct positions and the model finds the
     * alignment quickly (T=64 learned 3x slower per token). */
    cfg->seq_length = 16;
    cfg->data.task = "add";
    cfg->data.path = NULL;
    cfg->data.seed = 1337;
    cfg->data.digits = 2;
    cfg->data.max_len = 8;
    cfg->micro_batch_size = 128;
    cfg->global_batch_size = 128;
    cfg->train_iters = 2500;
    dt_optim_config_default(&cfg->optim, DT_OPTIM_ADAMW);
    cfg->optim.weight_decay = 0.1f;
    cfg->lr.max_lr = 3e-3f; /* 2e-3 and 6e-3 learned slower; 1e-2 much slower */
    cfg->lr.min_lr = 1e-4f;
    cfg->lr.warmup_iters = 50;
    cfg->lr.decay_iters = cfg->train_iters;
    cfg->lr.style = DT_LR_COSINE;
    cfg->clip_grad = 1.0f;
    cfg->seed = 1337;
    cfg->threads = 0;
    cfg->device = "cpu";
    cfg->eval_iters = 8;
    cfg->trace_path = NULL;
    cfg->log_interval = 100;
    cfg->eval_interval = 500;
    cfg->model_kind = DT_MODEL_GPT;
    cfg->allreduce = DT_ALLREDUCE_RING;
    cfg->allreduce_chunk_bytes = 1 << 20; /* dtbench allreduce: best overall on 2 ranks, 2.4x unchunked at 64 MiB */
    cfg->bucket_bytes = 25u << 20;        /* 25 MiB, as PyTorch DDP's bucket_cap_mb */
    cfg->ps_mode = DT_PS_NONE;
    cfg->num_ps_servers = 0;
    cfg->max_staleness = -1;
    cfg->slow_rank = -1;
    cfg->slow_ms = 0;
    cfg->hang_rank = -1;
    cfg->comm_timeout = DT_COMM_TIMEOUT_DEFAULT;
    cfg->pipeline_size = 1;
    cfg->tensor_size = 1;
    cfg->context_size = 1;
    cfg->cp_comm_type = DT_CP_P2P;
    cfg->pipeline_schedule = DT_SCHED_1F1B;
    cfg->precision = DT_F32;
    cfg->fp8 = DT_FP8_OFF;
    cfg->fp8_recipe = DT_FP8_DELAYED;
    cfg->fp8_margin = 0;
    cfg->fp8_amax_history_len = 1024;
    cfg->fp8_amax_algo = DT_FP8_AMAX_MAX;
    dt_loss_scaler_config_default(&cfg->loss_scaler);
    cfg->use_loss_scaling = 0;
    dt_mlp_config_default(&cfg->mlp);
    dt_blobs_config_default(&cfg->blobs);
    cfg->blobs.seed = cfg->data.seed;
}

dt_status dt_lr_scaling_parse(const char *s, dt_lr_scaling *out)
{
    if (s && strcmp(s, "none") == 0) *out = DT_LR_SCALING_NONE;
    else if (s && strcmp(s, "linear") == 0) *out = DT_LR_SCALING_LINEAR;
    else if (s && strcmp(s, "sqrt") == 0) *out = DT_LR_SCALING_SQRT;
    else return DT_FAIL(DT_ERR_INVALID, "--lr-scaling '%s': expected none, linear or sqrt", s ? s : "");
    return DT_OK;
}

double dt_lr_scaling_factor(dt_lr_scaling s, int global_batch, int base_batch)
{
    if (base_batch <= 0 || s == DT_LR_SCALING_NONE) return 1.0;
    double k = (double)global_batch / (double)base_batch;
    return s == DT_LR_SCALING_LINEAR ? k : sqrt(k);
}

dt_status dt_ps_mode_parse(const char *s, dt_ps_mode *out)
{
    if (s && strcmp(s, "ps-sync") == 0) *out = DT_PS_SYNC;
    else if (s && strcmp(s, "ps-async") == 0) *out = DT_PS_ASYNC;
    else return DT_ERR_INVALID;
    return DT_OK;
}

/* The parameter-server settings against the world size. */
static dt_status dt__validate_ps(const dt_train_config *cfg, int world)
{
    if (cfg->ps_mode == DT_PS_NONE) {
        if (cfg->num_ps_servers != 0)
            return DT_FAIL(DT_ERR_INVALID, "--num-ps-servers %d needs --allreduce ps-sync or ps-async",
                           cfg->num_ps_servers);
        if (cfg->max_staleness >= 0)
            return DT_FAIL(DT_ERR_INVALID, "--max-staleness %d applies to --allreduce ps-async only",
                           cfg->max_staleness);
        return DT_OK;
    }
    const char *mode = cfg->ps_mode == DT_PS_SYNC ? "ps-sync" : "ps-async";
    if (cfg->ps_mode != DT_PS_SYNC && cfg->ps_mode != DT_PS_ASYNC)
        return DT_FAIL(DT_ERR_INVALID, "--allreduce: unknown parameter-server mode %d", (int)cfg->ps_mode);
    if (world < 2)
        return DT_FAIL(DT_ERR_INVALID,
                       "--allreduce %s needs at least 2 ranks (workers and servers; run it under "
                       "mpirun -np N)",
                       mode);
    if (cfg->num_ps_servers < 1 || cfg->num_ps_servers >= world)
        return DT_FAIL(DT_ERR_INVALID, "--num-ps-servers %d: with %d ranks expected 1..%d (at least one worker)",
                       cfg->num_ps_servers, world, world - 1);
    const int workers = world - cfg->num_ps_servers;
    if (cfg->ps_mode == DT_PS_SYNC && cfg->max_staleness >= 0)
        return DT_FAIL(DT_ERR_INVALID, "--max-staleness %d applies to --allreduce ps-async only", cfg->max_staleness);
    if (cfg->ps_mode == DT_PS_ASYNC && cfg->max_staleness >= 0 && cfg->max_staleness < workers - 1)
        return DT_FAIL(DT_ERR_INVALID,
                       "--max-staleness %d: with %d workers expected at least %d (one round of the "
                       "others' pushes)",
                       cfg->max_staleness, workers, workers - 1);
    if (cfg->ps_mode == DT_PS_ASYNC && cfg->use_loss_scaling)
        return DT_FAIL(DT_ERR_INVALID, "--allreduce ps-async: loss scaling (--fp16) is not supported; use ps-sync, "
                                       "or --bf16 without --loss-scale");
    return DT_OK;
}

/* Pipeline parallelism against the world size and the other features. */
static dt_status dt__validate_pipeline(const dt_train_config *cfg, int world)
{
    const int p = cfg->pipeline_size, t = cfg->tensor_size;
    if (p < 1 || p > 64) return DT_FAIL(DT_ERR_INVALID, "--pipeline-model-parallel-size %d: expected 1..64", p);
    if (t < 1 || t > 64) return DT_FAIL(DT_ERR_INVALID, "--tensor-model-parallel-size %d: expected 1..64", t);
    int given = 0;
    for (int i = 0; i < 64; i++) given += cfg->pipeline_split[i] != 0;
    if (p == 1 && given) return DT_FAIL(DT_ERR_INVALID, "--pipeline-split needs --pipeline-model-parallel-size > 1");
    if (cfg->no_vocab_parallel && t == 1)
        return DT_FAIL(DT_ERR_INVALID, "--no-vocab-parallel needs --tensor-model-parallel-size > 1");
    if (cfg->sequence_parallel && t == 1)
        return DT_FAIL(DT_ERR_INVALID, "--sequence-parallel needs --tensor-model-parallel-size > 1");
    if (cfg->sequence_parallel && cfg->no_vocab_parallel)
        return DT_FAIL(DT_ERR_INVALID, "--sequence-parallel needs the vocabulary split: drop --no-vocab-parallel");
    if (cfg->sequence_parallel && cfg->seq_length % t)
        return DT_FAIL(DT_ERR_INVALID, "--sequence-parallel: --tensor-model-parallel-size %d does not divide "
                                       "--seq-length %d",
                       t, cfg->seq_length);
    const int c = cfg->context_size;
    if (c < 1 || c > 64) return DT_FAIL(DT_ERR_INVALID, "--context-parallel-size %d: expected 1..64", c);
    if (c > 1 && cfg->seq_length % (2 * c))
        return DT_FAIL(DT_ERR_INVALID, "--context-parallel-size %d: --seq-length %d does not split into %d equal "
                                       "chunks (2 per rank)",
                       c, cfg->seq_length, 2 * c);
    if (c > 1 && cfg->cp_comm_type == DT_CP_A2A && (cfg->model.num_heads / t) % c)
        return DT_FAIL(DT_ERR_INVALID, "--cp-comm-type a2a: --context-parallel-size %d does not divide the %d "
                                       "attention heads of a tensor rank (--num-attention-heads %d / %d)",
                       c, cfg->model.num_heads / t, cfg->model.num_heads, t);
    if (cfg->sequence_parallel && c > 1 && (cfg->seq_length / c) % t)
        return DT_FAIL(DT_ERR_INVALID, "--sequence-parallel: --tensor-model-parallel-size %d does not divide the "
                                       "%d positions of a context-parallel rank",
                       t, cfg->seq_length / c);
    if (cfg->no_scatter_gather && (t == 1 || p == 1))
        return DT_FAIL(DT_ERR_INVALID, "--no-scatter-gather-tensors-in-pipeline needs --tensor-model-parallel-size > 1 "
                                       "and --pipeline-model-parallel-size > 1");
    if (p == 1 && t == 1 && c == 1) return DT_OK;
    if (t > 1) {
        dt_gpt_config m = cfg->model;
        if (m.vocab_size <= 0) m.vocab_size = 256;
        DT_CHECK(dt__tp_check(&m, t));
    }
    dt_grid grid; /* over the whole world: a parameter server is refused below */
    DT_CHECK(dt_grid_init(&grid, world, 0, t, c, p));
    const char *flag = p > 1 ? "--pipeline-model-parallel-size"
                       : t > 1 ? "--tensor-model-parallel-size"
                               : "--context-parallel-size";
    const int size = p > 1 ? p : t > 1 ? t : c;
    if (c > 1 && p > 1 &&
        (cfg->pipeline_schedule == DT_SCHED_PIPEDREAM || cfg->pipeline_schedule == DT_SCHED_PIPEDREAM_VSYNC))
        return DT_FAIL(DT_ERR_INVALID, "--context-parallel-size %d: not with --pipeline-schedule %s (each stage "
                                       "updates on its own: no common loss over the sequence's ranks)",
                       c, dt_sched_kind_name(cfg->pipeline_schedule));
    if (cfg->model_kind != DT_MODEL_GPT) return DT_FAIL(DT_ERR_INVALID, "%s: only the GPT is split across ranks", flag);
    DT_CHECK(dt__pipe_check(&cfg->model, p, cfg->pipeline_schedule, cfg->use_loss_scaling));
    if (p > 1) {
        int v = 1;
        DT_CHECK(dt_sched_chunks_from_flags(cfg->pipeline_schedule, p, cfg->model.num_layers,
                                            cfg->virtual_pipeline_size, cfg->layers_per_virtual_stage, &v));
        if (v > 1 && given)
            return DT_FAIL(DT_ERR_INVALID,
                           "--pipeline-split: not with --pipeline-schedule %s (its blocks are split evenly over the "
                           "%d x %d virtual stages)",
                           dt_sched_kind_name(cfg->pipeline_schedule), p, v);
    }
    if (cfg->ps_mode != DT_PS_NONE)
        return DT_FAIL(DT_ERR_INVALID, "%s %d with a parameter server: not supported", flag, size);
    if (given) {
        int sum = 0;
        for (int i = 0; i < 64; i++) {
            if (i < p && cfg->pipeline_split[i] < 1)
                return DT_FAIL(DT_ERR_INVALID, "--pipeline-split: expected %d positive block counts (one per stage)",
                               p);
            if (i >= p && cfg->pipeline_split[i])
                return DT_FAIL(DT_ERR_INVALID, "--pipeline-split: more counts than the %d stages", p);
            sum += cfg->pipeline_split[i];
        }
        if (sum != cfg->model.num_layers)
            return DT_FAIL(DT_ERR_INVALID,
                           "--pipeline-split: the stages hold %d blocks, the model has %d "
                           "(--num-layers)",
                           sum, cfg->model.num_layers);
    } else if (p > 1 && cfg->model.num_layers < p) {
        return DT_FAIL(DT_ERR_INVALID,
                       "--pipeline-model-parallel-size %d: the model has only %d blocks "
                       "(--num-layers; expected at least one per stage)",
                       p, cfg->model.num_layers);
    }
    return DT_OK;
}

static int dt__is_task(const char *t)
{
    return t && (strcmp(t, "add") == 0 || strcmp(t, "reverse") == 0 || strcmp(t, "sort") == 0);
}

/* mlp-bn on blobs: the model and data checks that replace the GPT's. */
static dt_status dt__validate_mlp(const dt_train_config *cfg)
{
    if (cfg->data.path)
        return DT_FAIL(DT_ERR_INVALID, "--model mlp-bn trains on --task blobs, not on --data %s", cfg->data.path);
    if (!cfg->data.task || strcmp(cfg->data.task, "blobs") != 0)
        return DT_FAIL(DT_ERR_INVALID, "--model mlp-bn needs --task blobs (got --task %s)",
                       cfg->data.task ? cfg->data.task : "(none)");
    DT_CHECK(dt_blobs_config_validate(&cfg->blobs));
    dt_mlp_config m = cfg->mlp;
    m.input_dim = cfg->blobs.dims; /* filled from the data later */
    m.num_classes = cfg->blobs.classes;
    DT_CHECK(dt_mlp_config_validate(&m));
    if (cfg->mlp.batchnorm && cfg->micro_batch_size < 2)
        return DT_FAIL(DT_ERR_INVALID, "--micro-batch-size %d: BatchNorm needs at least 2 examples per micro-batch",
                       cfg->micro_batch_size);
    if (cfg->recompute != DT_RECOMPUTE_NONE)
        return DT_FAIL(DT_ERR_INVALID, "--recompute-activations: only the GPT recomputes activations, not mlp-bn");
    if (cfg->fp8 != DT_FP8_OFF)
        return DT_FAIL(DT_ERR_INVALID, "--fp8-format: FP8 training is implemented for the GPT, not mlp-bn");
    if (cfg->precision != DT_F32)
        return DT_FAIL(DT_ERR_INVALID, "--fp16/--bf16: mixed precision is implemented for the GPT, not mlp-bn");
    return DT_OK;
}

/* FP8 training: the GPT in bf16 with the linear layers' GEMMs in FP8;
 * the settings in range; what it does not compose with, refused. */
static dt_status dt__validate_fp8(const dt_train_config *cfg)
{
    if (cfg->fp8 == DT_FP8_OFF) return DT_OK;
    if (cfg->fp8 != DT_FP8_MODE_E4M3 && cfg->fp8 != DT_FP8_MODE_HYBRID)
        return DT_FAIL(DT_ERR_INVALID, "--fp8-format: mode %d is not e4m3 or hybrid", (int)cfg->fp8);
    if (cfg->model_kind != DT_MODEL_GPT)
        return DT_FAIL(DT_ERR_INVALID, "--fp8-format: FP8 training is implemented for the GPT, not mlp-bn");
    if (cfg->precision != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "--fp8-format: the rest of the model runs in bf16 (precision %s given)",
                       dt_dtype_name(cfg->precision));
    if (cfg->use_loss_scaling)
        return DT_FAIL(DT_ERR_INVALID, "--fp8-format with --loss-scale: FP8's per-tensor scales replace loss scaling");
    if (cfg->fp8_recipe != DT_FP8_DELAYED && cfg->fp8_recipe != DT_FP8_TENSORWISE &&
        cfg->fp8_recipe != DT_FP8_BLOCKWISE)
        return DT_FAIL(DT_ERR_INVALID, "--fp8-recipe: %d is not delayed, tensorwise or blockwise", (int)cfg->fp8_recipe);
    if (cfg->fp8_margin < 0 || cfg->fp8_margin > 32)
        return DT_FAIL(DT_ERR_INVALID, "--fp8-margin %d: expected 0..32", cfg->fp8_margin);
    if (cfg->fp8_amax_history_len < 1 || cfg->fp8_amax_history_len > 65536)
        return DT_FAIL(DT_ERR_INVALID, "--fp8-amax-history-len %d: expected 1..65536", cfg->fp8_amax_history_len);
    if (cfg->ps_mode != DT_PS_NONE)
        return DT_FAIL(DT_ERR_INVALID, "--fp8-format with a parameter server: not implemented (the workers' amax "
                                       "histories would need the servers' agreement)");
    return DT_OK;
}

/* --zero-stage: 1 is --use-distributed-optimizer; 2 and 3 run the GPT's
 * layers on sharded state (lib/parallel/zero_gpt.c; with pipeline or
 * tensor parallelism each stage's, lib/parallel/pipeline_shard.c), and
 * say at start what they do not cover yet. */
static dt_status dt__validate_zero_stage(const dt_train_config *cfg)
{
    const int s = cfg->zero_stage;
    if (s < 0 || s > 3) return DT_FAIL(DT_ERR_INVALID, "--zero-stage %d: expected 0, 1, 2 or 3", s);
    if (cfg->zero_prefetch && s != 3)
        return DT_FAIL(DT_ERR_INVALID, "--zero-prefetch gathers stage 3's layers ahead: it needs --zero-stage 3");
    if (s >= 2 && cfg->use_distributed_optimizer)
        return DT_FAIL(DT_ERR_INVALID,
                       "--use-distributed-optimizer is ZeRO stage 1 and --zero-stage is %d: give one "
                       "of the two",
                       s);
    if (s < 2) return DT_OK;
    if (cfg->pipeline_size > 1 || cfg->tensor_size > 1) { /* each stage (tensor shard) over its data group */
        if (cfg->pipeline_schedule == DT_SCHED_PIPEDREAM || cfg->pipeline_schedule == DT_SCHED_PIPEDREAM_VSYNC)
            return DT_FAIL(DT_ERR_INVALID,
                           "--zero-stage %d with --pipeline-schedule %s: not supported (PipeDream stashes whole "
                           "weight versions and updates every micro-batch; use gpipe, 1f1b, interleaved-1f1b, "
                           "zb-h1 or zb-v)",
                           s, dt_sched_kind_name(cfg->pipeline_schedule));
        if (cfg->pipeline_schedule == DT_SCHED_ZB_V && cfg->model.tie_embeddings)
            return DT_FAIL(DT_ERR_INVALID, "--zero-stage %d with --pipeline-schedule zb-v and tied embeddings: not "
                                           "supported yet (zb-v puts both ends on device 0, whose two copies of wte "
                                           "are not sharded together); untie them or use another schedule",
                           s);
        if (cfg->zero_prefetch)
            return DT_FAIL(DT_ERR_INVALID, "--zero-prefetch with --%s-model-parallel-size %d: not supported (the "
                                           "pipeline's own sends share the communicator's thread)",
                           cfg->pipeline_size > 1 ? "pipeline" : "tensor",
                           cfg->pipeline_size > 1 ? cfg->pipeline_size : cfg->tensor_size);
    }
    if (cfg->ps_mode != DT_PS_NONE)
        return DT_FAIL(DT_ERR_INVALID, "--zero-stage %d shards over an allreduce group, not with a parameter server",
                       s);
    if (cfg->model_kind != DT_MODEL_GPT)
        return DT_FAIL(DT_ERR_INVALID, "--zero-stage %d: the GPT only (--model mlp-bn: use --zero-stage 1)", s);
    return DT_OK;
}

dt_status dt_train_config_validate(const dt_train_config *cfg)
{
    if (!cfg) return DT_FAIL(DT_ERR_INVALID, "dt_train_config_validate: cfg is NULL");
    if (cfg->load_hf && (!cfg->load_hf[0] || cfg->model_kind != DT_MODEL_GPT))
        return DT_FAIL(DT_ERR_INVALID, cfg->load_hf[0] ? "--load-hf: a GPT-2 checkpoint, not for --model mlp-bn"
                                                       : "--load-hf '': expected a directory");
    if (cfg->model_kind == DT_MODEL_MLP_BN) {
        DT_CHECK(dt__validate_mlp(cfg));
    } else if (cfg->data.task && !cfg->data.path && strcmp(cfg->data.task, "blobs") == 0) {
        return DT_FAIL(DT_ERR_INVALID, "--task blobs is a classification task for --model mlp-bn");
    }
    dt_gpt_config m = cfg->model;
    if (m.vocab_size <= 0) m.vocab_size = 256; /* filled from the data later */
    DT_CHECK(dt_gpt_config_validate(&m));

    if (cfg->seq_length < 1)
        return DT_FAIL(DT_ERR_INVALID, "--seq-length %d: expected an integer >= 1", cfg->seq_length);
    if (cfg->seq_length > m.seq_len) {
        if (cfg->load_hf)
            return DT_FAIL(DT_ERR_INVALID, "--seq-length %d exceeds --load-hf %s's n_positions %d", cfg->seq_length,
                           cfg->load_hf, m.seq_len);
        if (cfg->model_name[0] && strcmp(cfg->model_name, "custom") != 0)
            return DT_FAIL(DT_ERR_INVALID,
                           "--seq-length %d exceeds --model %s's context %d (raise --max-position-embeddings)",
                           cfg->seq_length, cfg->model_name, m.seq_len);
        return DT_FAIL(DT_ERR_INVALID, "--seq-length %d exceeds --max-position-embeddings %d", cfg->seq_length,
                       m.seq_len);
    }

    if (cfg->data.path) {
        if (cfg->data.path[0] == '\0') return DT_FAIL(DT_ERR_INVALID, "--data '': expected a file name");
    } else if (cfg->model_kind == DT_MODEL_GPT && !dt__is_task(cfg->data.task)) {
        return DT_FAIL(DT_ERR_INVALID, "--task '%s': expected one of add, reverse, sort",
                       cfg->data.task ? cfg->data.task : "(null)");
    }
    if (cfg->data.digits < 1)
        return DT_FAIL(DT_ERR_INVALID, "--task-digits %d: expected an integer >= 1", cfg->data.digits);
    if (cfg->data.max_len < 1)
        return DT_FAIL(DT_ERR_INVALID, "--task-max-len %d: expected an integer >= 1", cfg->data.max_len);

    if (cfg->micro_batch_size < 1)
        return DT_FAIL(DT_ERR_INVALID, "--micro-batch-size %d: expected an integer >= 1", cfg->micro_batch_size);
    if (cfg->global_batch_size < 1)
        return DT_FAIL(DT_ERR_INVALID, "--global-batch-size %d: expected an integer >= 1", cfg->global_batch_size);
    const int world = cfg->comm ? cfg->comm->size : 1;
    DT_CHECK(dt__validate_ps(cfg, world));
    DT_CHECK(dt__validate_pipeline(cfg, world));
    DT_CHECK(dt__validate_checkpoint(cfg));
    dt_grid grid;
    DT_CHECK(dt_grid_init(&grid, world, cfg->ps_mode != DT_PS_NONE ? cfg->num_ps_servers : 0, cfg->tensor_size,
                          cfg->context_size > 1 ? cfg->context_size : 1, cfg->pipeline_size));
    const int dp = grid.size[DT_GRID_DATA];
    if (cfg->global_batch_size % ((int64_t)cfg->micro_batch_size * dp) != 0) {
        if (world == 1)
            return DT_FAIL(DT_ERR_INVALID, "--global-batch-size %d is not a multiple of --micro-batch-size %d",
                           cfg->global_batch_size, cfg->micro_batch_size);
        return DT_FAIL(DT_ERR_INVALID, "--global-batch-size %d is not a multiple of --micro-batch-size %d x %d %s",
                       cfg->global_batch_size, cfg->micro_batch_size, dp,
                       cfg->ps_mode != DT_PS_NONE ? "workers" : "data-parallel ranks");
    }
    if (cfg->slow_ms < 0) return DT_FAIL(DT_ERR_INVALID, "--slow-rank: MS %d: expected >= 0", cfg->slow_ms);
    if (!isfinite(cfg->comm_timeout) || cfg->comm_timeout < 0 || cfg->comm_timeout > 1e9)
        return DT_FAIL(DT_ERR_INVALID, "--comm-timeout %g: expected 0 (none) or seconds > 0, at most 1e9",
                       cfg->comm_timeout);
    if (cfg->slow_ms > 0 && cfg->comm_timeout > 0 && cfg->slow_ms >= cfg->comm_timeout * 1000.0)
        return DT_FAIL(DT_ERR_INVALID,
                       "--slow-rank: MS %d is not below --comm-timeout %g s: the others would give up "
                       "on the slow rank (raise --comm-timeout, or 0 for none)",
                       cfg->slow_ms, cfg->comm_timeout);
    if (cfg->hang_iter < 0)
        return DT_FAIL(DT_ERR_INVALID, "--hang-rank: ITER %lld: expected >= 1", (long long)cfg->hang_iter);
    DT_CHECK(dt__validate_cluster(cfg->cluster));
    if (cfg->skip_nonfinite) {
        if (cfg->precision != DT_F32)
            return DT_FAIL(DT_ERR_INVALID, "--skip-nonfinite applies to FP32 training (with --fp16 the loss scaler "
                                           "skips overflowing steps; --bf16: not supported)");
        /* gpipe/1f1b and tensor parallelism check the whole model's norm before any rank updates */
        const int pipedream =
            cfg->pipeline_schedule == DT_SCHED_PIPEDREAM || cfg->pipeline_schedule == DT_SCHED_PIPEDREAM_VSYNC;
        if (cfg->ps_mode != DT_PS_NONE || cfg->use_distributed_optimizer || cfg->zero_stage ||
            (pipedream && (cfg->pipeline_size > 1 || cfg->tensor_size > 1)))
            return DT_FAIL(DT_ERR_INVALID, "--skip-nonfinite: not supported with a parameter server, "
                                           "--pipeline-schedule pipedream or pipedream-vsync, or "
                                           "--use-distributed-optimizer (they update before the check)");
    }
    DT_CHECK(dt__validate_zero_stage(cfg));
    if (cfg->use_distributed_optimizer) {
        if (cfg->ps_mode != DT_PS_NONE)
            return DT_FAIL(DT_ERR_INVALID, "--use-distributed-optimizer shards over an allreduce group, not with a "
                                           "parameter server");
    }
    const int cuda = cfg->device && strcmp(cfg->device, "cuda") == 0;
    if (cuda && cfg->ps_mode != DT_PS_NONE)
        return DT_FAIL(DT_ERR_INVALID, "--allreduce %s runs on --device cpu (the servers' messages are host memory)",
                       cfg->ps_mode == DT_PS_SYNC ? "ps-sync" : "ps-async");
    if (!cuda && cfg->allreduce == DT_ALLREDUCE_NCCL)
        return DT_FAIL(DT_ERR_INVALID, "--allreduce nccl needs --device cuda");
    if (cuda && world > 1 && cfg->allreduce == DT_ALLREDUCE_MPI)
        return DT_FAIL(DT_ERR_INVALID, "--allreduce mpi sums host memory: with --device cuda use nccl (or ring, tree, "
                                       "naive, which then run over NCCL)");
    if (cfg->slow_ms > 0 && (cfg->slow_rank < 0 || cfg->slow_rank >= world))
        return DT_FAIL(DT_ERR_INVALID, "--slow-rank %d: expected a rank 0..%d", cfg->slow_rank, world - 1);
    if (cfg->hang_iter > 0 && (cfg->hang_rank < 0 || cfg->hang_rank >= world))
        return DT_FAIL(DT_ERR_INVALID, "--hang-rank %d: expected a rank 0..%d", cfg->hang_rank, world - 1);
    if (cfg->model_kind == DT_MODEL_GPT && (int64_t)cfg->micro_batch_size * cfg->seq_length > (int64_t)1 << 30)
        return DT_FAIL(DT_ERR_INVALID, "--micro-batch-size %d x --seq-length %d: too many tokens per micro-batch",
                       cfg->micro_batch_size, cfg->seq_length);
    if (cfg->train_iters < 0)
        return DT_FAIL(DT_ERR_INVALID, "--train-iters %lld: expected an integer >= 0", (long long)cfg->train_iters);

    const dt_lr_schedule *lr = &cfg->lr;
    if (!isfinite(lr->max_lr) || lr->max_lr < 0)
        return DT_FAIL(DT_ERR_INVALID, "--lr %g: expected a number >= 0", (double)lr->max_lr);
    if (!isfinite(lr->min_lr) || lr->min_lr < 0)
        return DT_FAIL(DT_ERR_INVALID, "--min-lr %g: expected a number >= 0", (double)lr->min_lr);
    if (lr->min_lr > lr->max_lr)
        return DT_FAIL(DT_ERR_INVALID, "--min-lr %g exceeds --lr %g", (double)lr->min_lr, (double)lr->max_lr);
    if (lr->warmup_iters < 0)
        return DT_FAIL(DT_ERR_INVALID, "--lr-warmup-iters %lld: expected an integer >= 0", (long long)lr->warmup_iters);
    if (lr->decay_iters < 0)
        return DT_FAIL(DT_ERR_INVALID, "--lr-decay-iters %lld: expected an integer >= 0", (long long)lr->decay_iters);
    if (lr->style != DT_LR_CONSTANT && lr->style != DT_LR_LINEAR && lr->style != DT_LR_COSINE)
        return DT_FAIL(DT_ERR_INVALID, "--lr-decay-style: expected constant, linear or cosine");
    if (lr->style != DT_LR_CONSTANT && lr->decay_iters < lr->warmup_iters)
        return DT_FAIL(DT_ERR_INVALID, "--lr-decay-iters %lld is less than --lr-warmup-iters %lld",
                       (long long)lr->decay_iters, (long long)lr->warmup_iters);

    DT_CHECK(dt_optim_config_validate(&cfg->optim));
    if (!isfinite(cfg->clip_grad))
        return DT_FAIL(DT_ERR_INVALID, "--clip-grad %g: expected a finite number (<= 0: no clipping)",
                       (double)cfg->clip_grad);

    if (cfg->lr_scaling != DT_LR_SCALING_NONE && cfg->lr_scaling != DT_LR_SCALING_LINEAR &&
        cfg->lr_scaling != DT_LR_SCALING_SQRT)
        return DT_FAIL(DT_ERR_INVALID, "--lr-scaling: expected none, linear or sqrt");
    if (cfg->lr_scaling != DT_LR_SCALING_NONE && cfg->base_batch_size < 1)
        return DT_FAIL(DT_ERR_INVALID, "--lr-scaling needs --base-batch-size (the batch --lr was tuned for), got %d",
                       cfg->base_batch_size);
    if (cfg->recompute == DT_RECOMPUTE_FULL &&
        (cfg->recompute_num_layers < 1 || cfg->recompute_num_layers > cfg->model.num_layers))
        return DT_FAIL(DT_ERR_INVALID, "--recompute-num-layers %d: expected 1..%d (--num-layers)",
                       cfg->recompute_num_layers, cfg->model.num_layers);
    if (cfg->precision != DT_F32 && cfg->precision != DT_F16 && cfg->precision != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "precision %s: expected f32, f16 (--fp16) or bf16 (--bf16)",
                       dt_dtype_name(cfg->precision));
    DT_CHECK(dt__validate_fp8(cfg));
    if (cfg->use_loss_scaling) {
        dt_loss_scaler probe;
        DT_CHECK(dt_loss_scaler_init(&probe, &cfg->loss_scaler));
    }
    if (cfg->threads > 1024) return DT_FAIL(DT_ERR_INVALID, "--threads %d: expected 1..1024", cfg->threads);
    if (!cfg->device || !cfg->device[0]) return DT_FAIL(DT_ERR_INVALID, "--device: expected a backend name (cpu)");
    if (cfg->eval_iters < 1)
        return DT_FAIL(DT_ERR_INVALID, "--eval-iters %d: expected an integer >= 1", cfg->eval_iters);
    if (cfg->eval_interval < 0)
        return DT_FAIL(DT_ERR_INVALID, "--eval-interval %lld: expected an integer >= 0", (long long)cfg->eval_interval);
    if (cfg->log_interval < 1)
        return DT_FAIL(DT_ERR_INVALID, "--log-interval %lld: expected an integer >= 1", (long long)cfg->log_interval);
    if (cfg->trace_path && !cfg->trace_path[0]) return DT_FAIL(DT_ERR_INVALID, "--trace '': expected a file name");
    return DT_OK;
}
