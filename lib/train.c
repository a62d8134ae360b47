/* train.c: the single-process trainer (see dt_train.h): owns the backend,
 * dataset, model, optimizer, host batch buffers and the optional trace
 * writer of one run, and the run's throughput bookkeeping; and its
 * checkpoints (dt_trainer_save / dt_trainer_load, the section at the end:
 * what each rank's shard holds, docs/checkpoints.md).
 *
 * A step with N = global_batch_size / micro_batch_size:
 *   for k in 0..N-1: batch(train, iter*N + k) -> forward -> backward(1/N)
 *   norm = ||grads||; scale = clip factor; lr = schedule(iter)
 *   optimizer step(grad_scale = scale); zero grads
 * so gradients are the mean over the global batch, and the training data a
 * run sees depends only on (seed, global batch, micro batch, T), never on
 * timing or threads.
 *
 * Invariants: the trainer owns copies of every string in its config; the
 * same config (and thread count) gives bit-identical losses; evaluation
 * always reads validation batches 0..eval_iters-1 and never changes the
 * parameters or gradients. Trace times are nanoseconds since the trainer
 * was created; the "iter" arg of trace events is the 0-based iteration. */
#define _POSIX_C_SOURCE 200809L
#include "dt_train.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_backend.h"
#include "dt_checkpoint.h"
#include "dt_internal.h"
#include "gpt_layers.h"
#include "dt_rng.h"
#include "dt_time.h"
#include "dt_trace.h"
#include "pipeline.h"
#include "ps.h"
#include "tp.h"
#include "zero.h"
#include "update.h"

struct dt_trainer {
    dt_train_config cfg;   /* copy; strings point to the owned copies below */
    char *task, *path, *device, *trace_path;

    dt_backend *be;
    dt_dataset *data;      /* GPT: byte tasks and text */
    dt_gpt *model;
    dt_blobs *blobs;       /* mlp-bn: the blobs task */
    dt_mlp *mlp;
    float *x;              /* (B, D) host: mlp-bn inputs */
    int32_t *y;            /* (B) host: mlp-bn labels */
    dt_optim opt;
    int opt_ready;
    size_t num_params;

    int B, T, n_micro;     /* micro-batch size, sequence length, micro-batches per step on this rank */
    int dp_rank, dp_size;  /* data parallelism (1 rank without a communicator): the workers */
    int rank;              /* in cfg.comm (0 without one): trace pid and file */
    dt_comm *dp_comm;      /* the data-parallel ranks: cfg.comm, or the workers' with a parameter server */
    dt__ps *ps;            /* parameter server (cfg.ps_mode), else NULL */
    dt_comm *gcomm;        /* owned: NCCL over cfg.comm's ranks for device gradients (--device cuda), else NULL */
    dt__pipe *pipe;        /* pipeline parallelism (cfg.pipeline_size > 1): this rank's stage, else NULL */
    dt__zero *zero;        /* ZeRO-1 (cfg.use_distributed_optimizer with data parallelism), else NULL */
    double pipe_probe;     /* after the last step: the whole model's weights fingerprint (NAN before) */
    double *pipe_figures;  /* (3p) after the last step: per stage peak activation bytes, versions alive, versions in flight */
    long long pipe_mismatch, pipe_disagree; /* after the last step: dt__pipe_version_check */
    int ps_broken;         /* an exchange failed: do not say goodbye to the servers */
    int32_t *tokens;       /* (B,T) host */
    int32_t *targets;      /* (B,T) host */
    int32_t *example;      /* (B,T) host: example id per counted target */
    float *pos_loss;       /* (B,T) host */
    uint8_t *pos_correct;  /* (B,T) host */

    int64_t t_start_ns;
    int64_t iter;          /* steps completed */
    double first_step_s;   /* duration of step 0 */
    double rest_s;         /* total duration of steps 1.. */
    double rest_tokens;    /* tokens of steps 1.. */

    /* trace */
    dt_trace_writer *trace;
    dt_status trace_status; /* first error while writing from the layer hook */
    int cur_micro;          /* micro-batch being computed (hook args) */
    dt_lr_schedule lr;      /* cfg.lr after lr_scaling */

    /* Gradient buckets (data parallelism): contiguous ranges of the flat
     * gradient buffer, in backward order; a comm thread allreduces each as
     * soon as the last micro-batch's backward has finished its layers, so
     * communication overlaps the rest of the backward. */
    int n_buckets;
    size_t *bucket_off, *bucket_len; /* (n_buckets) in floats */
    int *bucket_low;        /* (n_buckets) lowest layer of the bucket: ready after its backward */
    int *queue;             /* (n_buckets) launched buckets, in order */
    int q_head, q_tail, n_done, stop, overlap_active;
    dt_status comm_status;
    char comm_err[512];     /* the comm thread's message (dt_last_error is per thread) */
    pthread_t comm_thread;
    int comm_thread_on;
    pthread_mutex_t mu;     /* the queue, and trace writes from both threads */
    pthread_cond_t cv;
    dt_loss_scaler scaler;  /* when cfg.use_loss_scaling */

    /* non-finite loss or gradient norm (FP32) */
    int nf_skip;            /* this step is skipped (--skip-nonfinite) */
    int64_t nf_skipped;     /* steps skipped so far */
    char nf_where[256];     /* the first bad layer, as the message says it */

    /* checkpoints (dt_trainer_save / dt_trainer_load; section at the end) */
    char *save_dir, *load_dir; /* owned copies of cfg's */
    int ps_pulled;          /* a parameter-server worker has pulled the servers' first weights */
    int64_t last_save;      /* iteration (a server: version) last saved or loaded; -1 none */
    dt_checkpoint_shard *ps_resume; /* a server: the loaded shard, applied when serving starts */
    int64_t ps_start_version; /* ... and its version */
    char *ck_loaded, *ck_note, *ck_saved;
};

/* ---- configuration ------------------------------------------------------ */

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
    cfg->pipeline_schedule = DT_SCHED_1F1B;
    cfg->precision = DT_F32;
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
            return DT_FAIL(DT_ERR_INVALID, "--max-staleness %d applies to --allreduce ps-async only", cfg->max_staleness);
        return DT_OK;
    }
    const char *mode = cfg->ps_mode == DT_PS_SYNC ? "ps-sync" : "ps-async";
    if (cfg->ps_mode != DT_PS_SYNC && cfg->ps_mode != DT_PS_ASYNC)
        return DT_FAIL(DT_ERR_INVALID, "--allreduce: unknown parameter-server mode %d", (int)cfg->ps_mode);
    if (world < 2)
        return DT_FAIL(DT_ERR_INVALID, "--allreduce %s needs at least 2 ranks (workers and servers; run it under "
                                       "mpirun -np N)",
                       mode);
    if (cfg->num_ps_servers < 1 || cfg->num_ps_servers >= world)
        return DT_FAIL(DT_ERR_INVALID, "--num-ps-servers %d: with %d ranks expected 1..%d (at least one worker)",
                       cfg->num_ps_servers, world, world - 1);
    const int workers = world - cfg->num_ps_servers;
    if (cfg->ps_mode == DT_PS_SYNC && cfg->max_staleness >= 0)
        return DT_FAIL(DT_ERR_INVALID, "--max-staleness %d applies to --allreduce ps-async only", cfg->max_staleness);
    if (cfg->ps_mode == DT_PS_ASYNC && cfg->max_staleness >= 0 && cfg->max_staleness < workers - 1)
        return DT_FAIL(DT_ERR_INVALID, "--max-staleness %d: with %d workers expected at least %d (one round of the "
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
    if (p == 1 && t == 1) return DT_OK;
    if (t > 1) {
        dt_gpt_config m = cfg->model;
        if (m.vocab_size <= 0) m.vocab_size = 256;
        DT_CHECK(dt__tp_check(&m, t));
    }
    if (world % (p * t)) {
        if (t == 1)
            return DT_FAIL(DT_ERR_INVALID, "--pipeline-model-parallel-size %d: %d ranks are not a multiple of it (run "
                                           "mpirun -np p x d)",
                           p, world);
        return DT_FAIL(DT_ERR_INVALID, "--tensor-model-parallel-size %d x --pipeline-model-parallel-size %d: %d ranks "
                                       "are not a multiple of %d (run mpirun -np t x p x d)",
                       t, p, world, t * p);
    }
    const char *flag = p > 1 ? "--pipeline-model-parallel-size" : "--tensor-model-parallel-size";
    const int size = p > 1 ? p : t;
    if (cfg->model_kind != DT_MODEL_GPT)
        return DT_FAIL(DT_ERR_INVALID, "%s: only the GPT is split across ranks", flag);
    if (cfg->precision != DT_F32)
        return DT_FAIL(DT_ERR_INVALID, "%s %d with --fp16/--bf16: not supported yet (FP32 stages)", flag, size);
    if (cfg->recompute != DT_RECOMPUTE_NONE)
        return DT_FAIL(DT_ERR_INVALID, "%s %d with --recompute-activations: not supported yet", flag, size);
    if (cfg->ps_mode != DT_PS_NONE)
        return DT_FAIL(DT_ERR_INVALID, "%s %d with a parameter server: not supported", flag, size);
    if (given) {
        int sum = 0;
        for (int i = 0; i < 64; i++) {
            if (i < p && cfg->pipeline_split[i] < 1)
                return DT_FAIL(DT_ERR_INVALID, "--pipeline-split: expected %d positive block counts (one per stage)", p);
            if (i >= p && cfg->pipeline_split[i])
                return DT_FAIL(DT_ERR_INVALID, "--pipeline-split: more counts than the %d stages", p);
            sum += cfg->pipeline_split[i];
        }
        if (sum != cfg->model.num_layers)
            return DT_FAIL(DT_ERR_INVALID, "--pipeline-split: the stages hold %d blocks, the model has %d "
                                           "(--num-layers)",
                           sum, cfg->model.num_layers);
    } else if (p > 1 && cfg->model.num_layers < p) {
        return DT_FAIL(DT_ERR_INVALID, "--pipeline-model-parallel-size %d: the model has only %d blocks "
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
    if (cfg->precision != DT_F32)
        return DT_FAIL(DT_ERR_INVALID, "--fp16/--bf16: mixed precision is implemented for the GPT, not mlp-bn");
    return DT_OK;
}

static dt_status dt__validate_checkpoint(const dt_train_config *cfg);

dt_status dt_train_config_validate(const dt_train_config *cfg)
{
    if (!cfg) return DT_FAIL(DT_ERR_INVALID, "dt_train_config_validate: cfg is NULL");
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
    const int dp = (world - (cfg->ps_mode != DT_PS_NONE ? cfg->num_ps_servers : 0)) / (cfg->pipeline_size * cfg->tensor_size);
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
        return DT_FAIL(DT_ERR_INVALID, "--slow-rank: MS %d is not below --comm-timeout %g s: the others would give up "
                                       "on the slow rank (raise --comm-timeout, or 0 for none)",
                       cfg->slow_ms, cfg->comm_timeout);
    if (cfg->hang_iter < 0) return DT_FAIL(DT_ERR_INVALID, "--hang-rank: ITER %lld: expected >= 1",
                                           (long long)cfg->hang_iter);
    if (cfg->skip_nonfinite) {
        if (cfg->precision != DT_F32)
            return DT_FAIL(DT_ERR_INVALID, "--skip-nonfinite applies to FP32 training (with --fp16 the loss scaler "
                                           "skips overflowing steps; --bf16: not supported)");
        if (cfg->ps_mode != DT_PS_NONE || cfg->pipeline_size > 1 || cfg->use_distributed_optimizer)
            return DT_FAIL(DT_ERR_INVALID, "--skip-nonfinite: not supported with a parameter server, pipeline "
                                           "parallelism or --use-distributed-optimizer (they update before the "
                                           "check)");
    }
    if (cfg->use_distributed_optimizer) {
        if (cfg->ps_mode != DT_PS_NONE)
            return DT_FAIL(DT_ERR_INVALID, "--use-distributed-optimizer shards over an allreduce group, not with a "
                                           "parameter server");
        if (cfg->pipeline_size > 1 || cfg->tensor_size > 1)
            return DT_FAIL(DT_ERR_INVALID, "--use-distributed-optimizer with pipeline or tensor parallelism: not "
                                           "supported yet");
        if (cfg->optim.kind == DT_OPTIM_LARS || cfg->optim.kind == DT_OPTIM_LAMB)
            return DT_FAIL(DT_ERR_INVALID, "--use-distributed-optimizer: --optimizer %s needs whole-tensor norms, "
                                           "which the sharded optimizer splits across ranks (use --optimizer sgd or "
                                           "adamw)",
                           dt_optim_kind_name(cfg->optim.kind));
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
        return DT_FAIL(DT_ERR_INVALID, "--lr-warmup-iters %lld: expected an integer >= 0",
                       (long long)lr->warmup_iters);
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
    if (cfg->use_loss_scaling) {
        dt_loss_scaler probe;
        DT_CHECK(dt_loss_scaler_init(&probe, &cfg->loss_scaler));
    }
    if (cfg->threads > 1024) return DT_FAIL(DT_ERR_INVALID, "--threads %d: expected 1..1024", cfg->threads);
    if (!cfg->device || !cfg->device[0]) return DT_FAIL(DT_ERR_INVALID, "--device: expected a backend name (cpu)");
    if (cfg->eval_iters < 1)
        return DT_FAIL(DT_ERR_INVALID, "--eval-iters %d: expected an integer >= 1", cfg->eval_iters);
    if (cfg->eval_interval < 0)
        return DT_FAIL(DT_ERR_INVALID, "--eval-interval %lld: expected an integer >= 0",
                       (long long)cfg->eval_interval);
    if (cfg->log_interval < 1)
        return DT_FAIL(DT_ERR_INVALID, "--log-interval %lld: expected an integer >= 1", (long long)cfg->log_interval);
    if (cfg->trace_path && !cfg->trace_path[0]) return DT_FAIL(DT_ERR_INVALID, "--trace '': expected a file name");
    return DT_OK;
}

/* Reals are written with 15 significant digits: exact for every float the
 * summary holds, and 0.1 stays "0.1" instead of 0.10000000000000001. */
#define DT__JSON_PRECISION JSON_REAL_PRECISION(15)

/* A float as the shortest decimal that reads back as the same float, so
 * 0.001f is written 0.001 rather than 0.0010000000474974513. */
static double dt__float_json(float f)
{
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) break;
    }
    return strtod(buf, NULL);
}

static const char *dt__lr_style_name(dt_lr_decay s)
{
    switch (s) {
    case DT_LR_CONSTANT: return "constant";
    case DT_LR_LINEAR: return "linear";
    case DT_LR_COSINE: return "cosine";
    }
    return "?";
}

/* json_object_set_new that remembers a failure (NULL value or no memory). */
static void dt__jset(json_t *obj, const char *key, json_t *v, int *bad)
{
    if (!v || json_object_set_new(obj, key, v) != 0) *bad = 1;
}

static json_t *dt__jstr_or_null(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *dt__jreal_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *dt__jseed_text(uint64_t seed)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)seed);
    return json_string(buf);
}

static json_t *dt__config_object(const dt_train_config *cfg)
{
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = 0;
    dt__jset(o, "model", json_string(cfg->model_name), &bad);
    dt__jset(o, "num_layers", json_integer(cfg->model.num_layers), &bad);
    dt__jset(o, "hidden_size", json_integer(cfg->model.hidden_size), &bad);
    dt__jset(o, "num_attention_heads", json_integer(cfg->model.num_heads), &bad);
    dt__jset(o, "max_position_embeddings", json_integer(cfg->model.seq_len), &bad);
    dt__jset(o, "vocab_size", cfg->model.vocab_size > 0 ? json_integer(cfg->model.vocab_size) : json_null(), &bad);
    dt__jset(o, "seq_length", json_integer(cfg->seq_length), &bad);
    dt__jset(o, "task", cfg->data.path ? json_null() : dt__jstr_or_null(cfg->data.task), &bad);
    dt__jset(o, "data", dt__jstr_or_null(cfg->data.path), &bad);
    dt__jset(o, "task_digits", json_integer(cfg->data.digits), &bad);
    dt__jset(o, "task_max_len", json_integer(cfg->data.max_len), &bad);
    dt__jset(o, "data_seed", json_integer((json_int_t)cfg->data.seed), &bad);
    dt__jset(o, "micro_batch_size", json_integer(cfg->micro_batch_size), &bad);
    dt__jset(o, "global_batch_size", json_integer(cfg->global_batch_size), &bad);
    dt__jset(o, "train_iters", json_integer(cfg->train_iters), &bad);
    dt__jset(o, "optimizer", json_string(dt_optim_kind_name(cfg->optim.kind)), &bad);
    dt__jset(o, "lr", json_real(dt__float_json(cfg->lr.max_lr)), &bad);
    dt__jset(o, "min_lr", json_real(dt__float_json(cfg->lr.min_lr)), &bad);
    dt__jset(o, "lr_warmup_iters", json_integer(cfg->lr.warmup_iters), &bad);
    dt__jset(o, "lr_decay_iters", json_integer(cfg->lr.decay_iters), &bad);
    dt__jset(o, "lr_decay_style", json_string(dt__lr_style_name(cfg->lr.style)), &bad);
    dt__jset(o, "weight_decay", json_real(dt__float_json(cfg->optim.weight_decay)), &bad);
    dt__jset(o, "adam_beta1", json_real(dt__float_json(cfg->optim.beta1)), &bad);
    dt__jset(o, "adam_beta2", json_real(dt__float_json(cfg->optim.beta2)), &bad);
    dt__jset(o, "adam_eps", json_real(dt__float_json(cfg->optim.eps)), &bad);
    dt__jset(o, "sgd_momentum", json_real(dt__float_json(cfg->optim.momentum)), &bad);
    dt__jset(o, "lars_eta", json_real(dt__float_json(cfg->optim.lars_eta)), &bad);
    dt__jset(o, "lamb_gamma_l", json_real(dt__float_json(cfg->optim.lamb_gamma_l)), &bad);
    dt__jset(o, "lamb_gamma_u", dt__jreal_or_null(cfg->optim.lamb_gamma_u), &bad);
    dt__jset(o, "sgd_nesterov", json_boolean(cfg->optim.nesterov), &bad);
    dt__jset(o, "clip_grad", json_real(dt__float_json(cfg->clip_grad)), &bad);
    if (cfg->model_kind == DT_MODEL_MLP_BN) {
        dt__jset(o, "mlp_hidden_size", json_integer(cfg->mlp.hidden_size), &bad);
        dt__jset(o, "mlp_num_layers", json_integer(cfg->mlp.num_layers), &bad);
        dt__jset(o, "batchnorm", json_boolean(cfg->mlp.batchnorm), &bad);
        dt__jset(o, "bn_momentum", json_real(dt__float_json(cfg->mlp.bn_momentum)), &bad);
        dt__jset(o, "bn_momentum_adjust", json_boolean(cfg->bn_momentum_adjust), &bad);
        dt__jset(o, "blobs_classes", json_integer(cfg->blobs.classes), &bad);
        dt__jset(o, "blobs_dims", json_integer(cfg->blobs.dims), &bad);
        dt__jset(o, "blobs_separation", json_real(dt__float_json(cfg->blobs.separation)), &bad);
    }
    dt__jset(o, "precision", json_string(dt_dtype_name(cfg->precision)), &bad);
    const int ps = cfg->ps_mode != DT_PS_NONE;
    dt__jset(o, "data_parallel_size",
             json_integer(((cfg->comm ? cfg->comm->size : 1) - (ps ? cfg->num_ps_servers : 0)) /
                          (cfg->pipeline_size * cfg->tensor_size)),
             &bad);
    dt__jset(o, "allreduce",
             json_string(ps ? (cfg->ps_mode == DT_PS_SYNC ? "ps-sync" : "ps-async") : dt_allreduce_algo_name(cfg->allreduce)),
             &bad);
    dt__jset(o, "num_ps_servers", json_integer(ps ? cfg->num_ps_servers : 0), &bad);
    dt__jset(o, "pipeline_model_parallel_size", json_integer(cfg->pipeline_size), &bad);
    dt__jset(o, "tensor_model_parallel_size", json_integer(cfg->tensor_size), &bad);
    dt__jset(o, "pipeline_schedule", json_string(dt_sched_kind_name(cfg->pipeline_schedule)), &bad);
    dt__jset(o, "use_distributed_optimizer", json_boolean(cfg->use_distributed_optimizer), &bad);
    dt__jset(o, "max_staleness", cfg->ps_mode == DT_PS_ASYNC && cfg->max_staleness >= 0 ? json_integer(cfg->max_staleness)
                                                                                          : json_null(),
             &bad);
    dt__jset(o, "allreduce_chunk_bytes", json_integer((json_int_t)cfg->allreduce_chunk_bytes), &bad);
    dt__jset(o, "bucket_bytes", json_integer((json_int_t)cfg->bucket_bytes), &bad);
    dt__jset(o, "comm_timeout", json_real(cfg->comm_timeout), &bad);
    dt__jset(o, "skip_nonfinite", json_boolean(cfg->skip_nonfinite), &bad);
    if (cfg->use_loss_scaling) {
        dt__jset(o, "loss_scale", json_real(cfg->loss_scaler.static_scale), &bad);
        dt__jset(o, "initial_loss_scale", json_real(cfg->loss_scaler.initial_scale), &bad);
        dt__jset(o, "loss_scale_window", json_integer(cfg->loss_scaler.window), &bad);
        dt__jset(o, "hysteresis", json_integer(cfg->loss_scaler.hysteresis), &bad);
        dt__jset(o, "min_loss_scale", json_real(cfg->loss_scaler.min_scale), &bad);
    }
    static const char *const scaling[] = {"none", "linear", "sqrt"};
    dt__jset(o, "lr_scaling", json_string(scaling[cfg->lr_scaling]), &bad);
    dt__jset(o, "base_batch_size", json_integer(cfg->base_batch_size), &bad);
    static const char *const recompute[] = {"none", "full", "selective"};
    dt__jset(o, "recompute_granularity", json_string(recompute[cfg->recompute]), &bad);
    dt__jset(o, "recompute_num_layers", json_integer(cfg->recompute == DT_RECOMPUTE_FULL ? cfg->recompute_num_layers : 0),
             &bad);
    /* seeds above 2^63 do not fit a JSON integer in jansson; keep them exact as text */
    dt__jset(o, "seed",
             cfg->seed <= (uint64_t)INT64_MAX ? json_integer((json_int_t)cfg->seed) : dt__jseed_text(cfg->seed),
             &bad);
    dt__jset(o, "threads", json_integer(cfg->threads), &bad);
    dt__jset(o, "device", dt__jstr_or_null(cfg->device), &bad);
    dt__jset(o, "eval_iters", json_integer(cfg->eval_iters), &bad);
    dt__jset(o, "eval_interval", json_integer(cfg->eval_interval), &bad);
    dt__jset(o, "log_interval", json_integer(cfg->log_interval), &bad);
    dt__jset(o, "trace", dt__jstr_or_null(cfg->trace_path), &bad);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

char *dt_train_config_json(const dt_train_config *cfg)
{
    json_t *o = dt__config_object(cfg);
    if (!o) return NULL;
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | DT__JSON_PRECISION);
    json_decref(o);
    return s;
}

/* ---- trainer ------------------------------------------------------------- */

static void dt__layer_hook(void *ctx, int layer, char pass, int64_t t0_ns, int64_t t1_ns);
static void dt__comm_hook(void *ctx, const char *phase, int step, int peer, size_t bytes, int64_t t0_ns,
                          int64_t t1_ns);
static dt_status dt__buckets_init(dt_trainer *tr);
static void dt__buckets_free(dt_trainer *tr);
static dt_status dt__ps_ensure_pulled(dt_trainer *tr);
static dt_status dt__ck_ps_restore(void *ctx, dt__ps *ps);
static dt_status dt__ck_ps_save(void *ctx, dt__ps *ps, int64_t version);

/* The model-specific pieces the step needs, for either model kind. */
static const dt_paramset *dt__tr_layout(const dt_trainer *tr)
{
    return tr->mlp ? dt_mlp_layout(tr->mlp) : dt_gpt_layout(tr->model);
}
static float *dt__tr_params(dt_trainer *tr) { return tr->mlp ? dt_mlp_params(tr->mlp) : dt_gpt_params(tr->model); }
static float *dt__tr_grads(dt_trainer *tr) { return tr->mlp ? dt_mlp_grads(tr->mlp) : dt_gpt_grads(tr->model); }
static dt_status dt__tr_zero_grad(dt_trainer *tr)
{
    return tr->mlp ? dt_mlp_zero_grad(tr->mlp) : dt_gpt_zero_grad(tr->model);
}
static size_t dt__tr_peak_act(const dt_trainer *tr)
{
    if (tr->pipe) return dt__pipe_peak_activation_bytes(tr->pipe);
    return tr->mlp ? dt_mlp_activation_bytes(tr->mlp) : dt_gpt_peak_activation_bytes(tr->model);
}
static void dt__tr_set_hook(dt_trainer *tr, int on)
{
    if (tr->model) dt_gpt_set_layer_hook(tr->model, on ? dt__layer_hook : NULL, on ? tr : NULL);
}

static dt_status dt__strdup(const char *s, char **out)
{
    *out = NULL;
    if (!s) return DT_OK;
    *out = strdup(s);
    if (!*out) return DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory copying '%s'", s);
    return DT_OK;
}

static dt_status dt__trace_write(dt_trainer *tr, const dt_trace_event *e)
{
    if (tr->comm_thread_on) pthread_mutex_lock(&tr->mu);
    dt_status st = dt_trace_write(tr->trace, e);
    if (st != DT_OK && tr->trace_status == DT_OK) tr->trace_status = st;
    if (tr->comm_thread_on) pthread_mutex_unlock(&tr->mu);
    return st;
}

static void dt__launch_bucket(dt_trainer *tr, int b)
{
    if (tr->trace && tr->trace_status == DT_OK) { /* the hand-over, on the comm lane */
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_INSTANT, "bucket launch", "comm", tr->rank, DT_LANE_COMM,
                            dt_time_ns() - tr->t_start_ns, 0);
        e.iter = tr->iter;
        e.bytes = (int64_t)(tr->bucket_len[b] * sizeof(float));
        if (dt_trace_event_add_arg(&e, "bucket", b) == DT_OK) dt__trace_write(tr, &e);
    }
    pthread_mutex_lock(&tr->mu);
    tr->queue[tr->q_tail++] = b;
    pthread_cond_broadcast(&tr->cv);
    pthread_mutex_unlock(&tr->mu);
}

static void dt__layer_hook(void *ctx, int layer, char pass, int64_t t0_ns, int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (tr->overlap_active && pass == 'B')
        for (int b = 0; b < tr->n_buckets; b++)
            if (tr->bucket_low[b] == layer) dt__launch_bucket(tr, b);
    if (!tr->trace || tr->trace_status != DT_OK) return;
    dt_trace_event e;
    const char *name = pass == 'B' ? "backward" : pass == 'R' ? "recompute" : "forward";
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, name, "compute", tr->rank, DT_LANE_COMPUTE, t0_ns - tr->t_start_ns,
                        t1_ns - t0_ns);
    e.iter = tr->iter;
    e.micro_batch = tr->cur_micro;
    e.layer = layer;
    dt__trace_write(tr, &e);
}

static dt_status dt__trace_metadata(dt_trainer *tr)
{
    static const struct {
        const char *what;
        int tid;
        const char *label;
    } meta[] = {
        {"process_name", 0, NULL},
        {"thread_name", DT_LANE_COMPUTE, "compute"},
        {"thread_name", DT_LANE_COMM, "comm"},
        {"thread_name", DT_LANE_OPTIM, "optimizer"},
    };
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
        if (meta[i].tid == DT_LANE_COMM && !(tr->cfg.comm && tr->cfg.comm->size > 1)) continue;
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_METADATA, meta[i].what, "meta", tr->rank, meta[i].tid, 0, 0);
        if (meta[i].label)
            snprintf(e.label, sizeof e.label, "%s", meta[i].label);
        else if (tr->pipe)
            snprintf(e.label, sizeof e.label, "dtrain rank %d (t %d, d %d, p %d)", tr->rank,
                     dt__pipe_tp_index(tr->pipe), dt__pipe_dp_index(tr->pipe), dt__pipe_stage(tr->pipe));
        else if (tr->ps)
            snprintf(e.label, sizeof e.label, "dtrain rank %d (%s %d)", tr->rank,
                     dt__ps_is_server(tr->ps) ? "parameter server" : "worker", dt__ps_index(tr->ps));
        else
            snprintf(e.label, sizeof e.label, "dtrain rank %d", tr->rank);
        DT_CHECK(dt__trace_write(tr, &e));
    }
    return DT_OK;
}

static dt_status dt__trace_counter(dt_trainer *tr, const char *name, int64_t ts, double value)
{
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COUNTER, name, "counter", tr->rank, DT_LANE_COMPUTE, ts, 0);
    e.value = value; /* no other args: Perfetto plots each counter arg as a series */
    return dt__trace_write(tr, &e);
}

/* The trace's layer slot of a GPT parameter: -1 the embedding (wte, wpe),
 * l for "h.<l>.*", L for the final LayerNorm and the LM head. */
static int dt__param_layer(const char *name, int L)
{
    if (!strncmp(name, "h.", 2)) return (int)strtol(name + 2, NULL, 10);
    return !strcmp(name, "wte") || !strcmp(name, "wpe") ? -1 : L;
}

/* grad_amax (docs/trace-format.md): one instant per layer slot, from the
 * per-tensor amax of dt__update_apply (-1: the tensor had an inf/NaN). */
static dt_status dt__trace_grad_amax(dt_trainer *tr, const dt_paramset *layout, const float *amax, float S,
                                     int64_t ts)
{
    const int L = tr->cfg.model.num_layers;
    for (int layer = -1; layer <= L; layer++) {
        float m = -1.0f;
        int bad = 0;
        for (int i = 0; i < layout->count; i++) {
            if (dt__param_layer(layout->info[i].name, L) != layer) continue;
            if (amax[i] < 0)
                bad++;
            else
                m = fmaxf(m, amax[i]);
        }
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_INSTANT, "grad_amax", "optim", tr->rank, DT_LANE_OPTIM, ts, 0);
        e.iter = tr->iter;
        e.layer = layer;
        if (m >= 0) DT_CHECK(dt_trace_event_add_arg(&e, "amax", m)); /* absent: every tensor of the slot overflowed */
        DT_CHECK(dt_trace_event_add_arg(&e, "nonfinite", bad));
        DT_CHECK(dt_trace_event_add_arg(&e, "loss_scale", S));
        DT_CHECK(dt__trace_write(tr, &e));
    }
    return DT_OK;
}

/* The pipeline's data: micro-batch `index` of the training or validation rows. */
static dt_status dt__pipe_batch(void *ctx, int val, uint64_t index, int32_t *tokens, int32_t *targets, int32_t *example,
                                int *n_examples)
{
    dt_trainer *tr = ctx;
    return dt_data_batch(tr->data, val ? DT_SPLIT_VAL : DT_SPLIT_TRAIN, index, tr->B, tr->T, tokens, targets, example,
                         n_examples);
}

/* Trace: every executed instruction of the schedule, on the lane of its kind. */
static void dt__pipe_event(void *ctx, int stage, const dt_sched_instr *in, int64_t t0_ns, int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (!tr->trace || tr->trace_status != DT_OK) return;
    const int compute = in->op == DT_SCHED_FORWARD || in->op == DT_SCHED_BACKWARD;
    const int optim = in->op == DT_SCHED_OPTIM_STEP || in->op == DT_SCHED_STASH || in->op == DT_SCHED_DROP;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, dt_sched_op_name(in->op), "pipeline", tr->rank,
                        compute ? DT_LANE_COMPUTE : optim ? DT_LANE_OPTIM : DT_LANE_COMM, t0_ns - tr->t_start_ns,
                        t1_ns - t0_ns);
    e.iter = in->step;
    if (in->mb >= 0) e.micro_batch = in->mb;
    if (dt_trace_event_add_arg(&e, "stage", stage) != DT_OK || dt_trace_event_add_arg(&e, "version", in->version) != DT_OK ||
        dt_trace_event_add_arg(&e, "phase", (double)in->phase) != DT_OK)
        return;
    dt__trace_write(tr, &e);
}

/* Trace: each allreduce of the tensor-parallel operators f and g. */
static void dt__tp_event(void *ctx, int is_g, char pass, int64_t t0_ns, int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (!tr->trace || tr->trace_status != DT_OK) return;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, is_g ? "tp allreduce g" : "tp allreduce f", "tp", tr->rank,
                        DT_LANE_COMM, t0_ns - tr->t_start_ns, t1_ns - t0_ns);
    e.iter = tr->iter;
    if (dt_trace_event_add_arg(&e, "forward", pass == 'F') != DT_OK) return;
    dt__trace_write(tr, &e);
}

dt_status dt_trainer_create(const dt_train_config *cfg, dt_trainer **out)
{
    *out = NULL;
    DT_CHECK(dt_train_config_validate(cfg));
    dt_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory");
    dt_status st = DT_OK;

    tr->cfg = *cfg;
    tr->pipe_probe = NAN;
    DT_CHECK_GOTO(dt__strdup(cfg->data.task, &tr->task), st, fail);
    DT_CHECK_GOTO(dt__strdup(cfg->data.path, &tr->path), st, fail);
    DT_CHECK_GOTO(dt__strdup(cfg->device, &tr->device), st, fail);
    DT_CHECK_GOTO(dt__strdup(cfg->trace_path, &tr->trace_path), st, fail);
    DT_CHECK_GOTO(dt__strdup(cfg->save_dir, &tr->save_dir), st, fail);
    DT_CHECK_GOTO(dt__strdup(cfg->load_dir, &tr->load_dir), st, fail);
    tr->cfg.save_dir = tr->save_dir;
    tr->cfg.load_dir = tr->load_dir;
    tr->last_save = -1;
    tr->cfg.data.task = tr->task;
    tr->cfg.data.path = tr->path;
    tr->cfg.device = tr->device;
    tr->cfg.trace_path = tr->trace_path;

    tr->B = cfg->micro_batch_size;
    tr->T = cfg->seq_length;
    /* before any split: the communicators made from comm inherit it */
    if (cfg->comm) DT_CHECK_GOTO(dt_comm_set_timeout(cfg->comm, cfg->comm_timeout), st, fail);
    tr->rank = cfg->comm ? cfg->comm->rank : 0;
    tr->dp_rank = tr->rank;
    tr->dp_size = cfg->comm ? cfg->comm->size : 1;
    tr->dp_comm = cfg->comm;
    if (cfg->ps_mode != DT_PS_NONE) { /* workers 0..W-1, then the servers */
        tr->dp_size -= cfg->num_ps_servers;
        if (tr->dp_rank >= tr->dp_size) tr->dp_rank = 0; /* a server: its batch buffers are never used */
    }
    const int split = cfg->pipeline_size > 1 || cfg->tensor_size > 1; /* the stage runtime (lib/pipeline.c) */
    if (split) { /* t x d x p: rank = tensor + t * (data + d * stage) */
        tr->dp_size /= cfg->pipeline_size * cfg->tensor_size;
        tr->dp_rank = (tr->rank / cfg->tensor_size) % tr->dp_size;
    }
    tr->n_micro = cfg->global_batch_size / (cfg->micro_batch_size * tr->dp_size);

    DT_CHECK_GOTO(dt_backend_create(tr->cfg.device, cfg->threads, &tr->be), st, fail);
    tr->cfg.threads = tr->be->threads;
    if (cfg->model_kind == DT_MODEL_MLP_BN) {
        tr->T = 1; /* one example per row: "tokens" are examples */
        DT_CHECK_GOTO(dt_blobs_open(&tr->cfg.blobs, &tr->blobs), st, fail);
        tr->cfg.mlp.input_dim = dt_blobs_dims(tr->blobs);
        tr->cfg.mlp.num_classes = dt_blobs_classes(tr->blobs);
        DT_CHECK_GOTO(dt_mlp_create(&tr->cfg.mlp, tr->be, &tr->mlp), st, fail);
        /* cfg keeps the per-step momentum; the model runs per micro-batch */
        if (cfg->bn_momentum_adjust)
            DT_CHECK_GOTO(dt_mlp_set_bn_momentum(tr->mlp, dt_bn_momentum_per_micro(cfg->mlp.bn_momentum, tr->n_micro)),
                          st, fail);
        DT_CHECK_GOTO(dt_mlp_init_weights(tr->mlp, cfg->seed), st, fail);
        tr->num_params = dt_mlp_config_num_params(&tr->cfg.mlp);
        tr->x = malloc((size_t)tr->B * tr->cfg.mlp.input_dim * sizeof *tr->x);
        tr->y = malloc((size_t)tr->B * sizeof *tr->y);
        if (!tr->x || !tr->y) {
            st = DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory for batch buffers");
            goto fail;
        }
    } else {
        DT_CHECK_GOTO(dt_data_open(&tr->cfg.data, tr->T, &tr->data), st, fail);
        tr->cfg.model.vocab_size = dt_data_vocab_size(tr->data);
        tr->num_params = dt_gpt_config_num_params(&tr->cfg.model);
        if (!split) {
            DT_CHECK_GOTO(dt_gpt_create(&tr->cfg.model, tr->be, &tr->model), st, fail);
            DT_CHECK_GOTO(dt_gpt_init_weights(tr->model, cfg->seed), st, fail);
            DT_CHECK_GOTO(dt_gpt_set_recompute(tr->model, cfg->recompute, cfg->recompute_num_layers), st, fail);
            DT_CHECK_GOTO(dt_gpt_set_precision(tr->model, cfg->precision), st, fail);
        }
    }
    {
        double f = dt_lr_scaling_factor(cfg->lr_scaling, cfg->global_batch_size, cfg->base_batch_size);
        tr->lr = cfg->lr;
        tr->lr.max_lr = (float)(cfg->lr.max_lr * f);
        tr->lr.min_lr = (float)(cfg->lr.min_lr * f);
    }
    if (split) { /* the stage owns its weights, gradients and optimizer */
        if (tr->be->device == DT_DEVICE_CUDA) DT_CHECK_GOTO(dt_comm_nccl_create(cfg->comm, tr->be, &tr->gcomm), st, fail);
        int any = 0;
        for (int i = 0; i < 64; i++) any |= cfg->pipeline_split[i] != 0;
        const dt__pipe_setup ps = {.world = cfg->comm,
                                   .device_world = tr->gcomm,
                                   .p = cfg->pipeline_size,
                                   .t = cfg->tensor_size,
                                   .kind = cfg->pipeline_schedule,
                                   .split = any ? cfg->pipeline_split : NULL,
                                   .model = &tr->cfg.model,
                                   .B = tr->B,
                                   .T = tr->T,
                                   .m = tr->n_micro,
                                   .steps = cfg->train_iters > 0 ? cfg->train_iters : 1,
                                   .be = tr->be,
                                   .seed = cfg->seed,
                                   .optim = cfg->optim,
                                   .lr = tr->lr,
                                   .clip_grad = cfg->clip_grad,
                                   .allreduce = cfg->allreduce,
                                   .chunk_bytes = cfg->allreduce_chunk_bytes,
                                   .batch = dt__pipe_batch,
                                   .event = dt__pipe_event,
                                   .tp_event = dt__tp_event,
                                   .ctx = tr};
        DT_CHECK_GOTO(dt__pipe_create(&ps, &tr->pipe), st, fail);
    }
    if (cfg->use_loss_scaling) DT_CHECK_GOTO(dt_loss_scaler_init(&tr->scaler, &cfg->loss_scaler), st, fail);
    if (tr->pipe) {
        /* nothing more: the stage has its optimizer */
    } else if (cfg->ps_mode != DT_PS_NONE) {
        /* the optimizer state lives on the servers, in shards */
        const dt__ps_setup ps = {.world = cfg->comm,
                                 .async = cfg->ps_mode == DT_PS_ASYNC,
                                 .num_servers = cfg->num_ps_servers,
                                 .max_staleness = cfg->max_staleness,
                                 .layout = dt__tr_layout(tr)};
        DT_CHECK_GOTO(dt__ps_create(&ps, &tr->ps), st, fail);
        tr->dp_comm = dt__ps_workers(tr->ps);
    } else if (cfg->use_distributed_optimizer && tr->dp_size > 1) {
        /* the device gradients' communicator: NCCL on the GPU (made here, before the buckets would) */
        if (tr->be->device == DT_DEVICE_CUDA) DT_CHECK_GOTO(dt_comm_nccl_create(cfg->comm, tr->be, &tr->gcomm), st, fail);
        DT_CHECK_GOTO(dt__zero_create(tr->gcomm ? tr->gcomm : cfg->comm, tr->be, dt__tr_layout(tr), &tr->cfg.optim,
                                      &tr->zero),
                      st, fail);
        if (cfg->precision != DT_F32 && tr->model) { /* the FP32 masters sharded too; the model keeps their half values */
            DT_CHECK_GOTO(dt__zero_keep_masters(tr->zero, dt__tr_params(tr), cfg->precision), st, fail);
            DT_CHECK_GOTO(dt_gpt_set_weights_rounded(tr->model), st, fail);
        }
    } else {
        DT_CHECK_GOTO(dt_optim_init(&tr->opt, &tr->cfg.optim, tr->be, dt__tr_layout(tr)), st, fail);
        tr->opt_ready = 1;
    }
    if (!tr->pipe) DT_CHECK_GOTO(dt__tr_zero_grad(tr), st, fail);

    size_t n = (size_t)tr->B * (size_t)tr->T;
    tr->tokens = malloc(n * sizeof *tr->tokens);
    tr->targets = malloc(n * sizeof *tr->targets);
    tr->example = malloc(n * sizeof *tr->example);
    tr->pos_loss = malloc(n * sizeof *tr->pos_loss);
    tr->pos_correct = malloc(n * sizeof *tr->pos_correct);
    if (!tr->tokens || !tr->targets || !tr->example || !tr->pos_loss || !tr->pos_correct) {
        st = DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory for batch buffers (%zu positions)", n);
        goto fail;
    }

    if (tr->cfg.trace_path) {
        char *cj = dt_train_config_json(&tr->cfg);
        if (!cj) {
            st = DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory serialising the configuration");
            goto fail;
        }
        if (cfg->comm && cfg->comm->size > 1) { /* one file per rank: run.json -> run.rank1.json */
            size_t len = strlen(tr->trace_path);
            char *per = malloc(len + 32);
            if (!per) {
                free(cj);
                st = DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory");
                goto fail;
            }
            int dot = len > 5 && strcmp(tr->trace_path + len - 5, ".json") == 0 ? (int)len - 5 : (int)len;
            snprintf(per, len + 32, "%.*s.rank%d%s", dot, tr->trace_path, tr->rank, tr->trace_path + dot);
            free(tr->trace_path);
            tr->trace_path = per;
            tr->cfg.trace_path = per;
        }
        st = dt_trace_writer_open(tr->cfg.trace_path, "dtrain", cj, &tr->trace);
        free(cj);
        if (st != DT_OK) goto fail;
        DT_CHECK_GOTO(dt__trace_metadata(tr), st, fail);
        dt__tr_set_hook(tr, 1);
    }
    /* device gradients travel through NCCL (the host communicator keeps the losses and counts) */
    if (tr->dp_size > 1 && !tr->ps && !tr->pipe && !tr->gcomm && tr->be->device == DT_DEVICE_CUDA)
        DT_CHECK_GOTO(dt_comm_nccl_create(cfg->comm, tr->be, &tr->gcomm), st, fail);
    if (tr->dp_size > 1 && tr->model && !tr->ps && !tr->zero) { /* ZeRO-1 reduce-scatters after the backward */
        DT_CHECK_GOTO(dt__buckets_init(tr), st, fail);
        dt__tr_set_hook(tr, 1);
    }
    /* workers start from the servers' weights (they answer in dt_trainer_serve) */
    /* (the pull comes with the first step, evaluation or save: dt__ps_ensure_pulled, so
     * that dt_trainer_load can still run on every rank first) */
    tr->t_start_ns = dt_time_ns();
    *out = tr;
    return DT_OK;

fail:
    dt_trainer_free(tr);
    return st;
}

dt_status dt_trainer_finish(dt_trainer *tr)
{
    if (!tr || !tr->trace) return DT_OK;
    dt__tr_set_hook(tr, 0);
    dt_status st = dt_trace_writer_close(tr->trace);
    tr->trace = NULL;
    if (tr->trace_status != DT_OK) {
        /* the first write error is the cause; the message of a later close
         * failure would hide it, so restate it */
        return DT_FAIL(tr->trace_status, "--trace %s: writing the trace failed", tr->cfg.trace_path);
    }
    return st;
}

void dt_trainer_free(dt_trainer *tr)
{
    if (!tr) return;
    if (tr->trace) { /* not finished: the run failed, leave no partial trace */
        dt__tr_set_hook(tr, 0);
        dt_trace_writer_abort(tr->trace);
    }
    dt__buckets_free(tr);
    if (tr->ps && !tr->ps_broken && !dt__ps_is_server(tr->ps) && !dt__ps_finished(tr->ps) &&
        dt__ps_ensure_pulled(tr) == DT_OK) {
        /* stopped before train_iters: let the servers end (errors only go to dt_last_error) */
        (void)dt__ps_finish(tr->ps, dt__tr_params(tr));
    }
    if (tr->ps_resume) dt_checkpoint_shard_free(tr->ps_resume);
    free(tr->ps_resume);
    free(tr->save_dir);
    free(tr->load_dir);
    free(tr->ck_loaded);
    free(tr->ck_note);
    free(tr->ck_saved);
    dt__ps_free(tr->ps);
    dt__pipe_free(tr->pipe);
    dt__zero_free(tr->zero);
    free(tr->pipe_figures);
    dt_comm_free(tr->gcomm);
    if (tr->opt_ready) dt_optim_free(&tr->opt);
    dt_gpt_free(tr->model);
    dt_data_close(tr->data);
    dt_mlp_free(tr->mlp);
    dt_blobs_close(tr->blobs);
    free(tr->x);
    free(tr->y);
    dt_backend_destroy(tr->be);
    free(tr->tokens);
    free(tr->targets);
    free(tr->example);
    free(tr->pos_loss);
    free(tr->pos_correct);
    free(tr->task);
    free(tr->path);
    free(tr->device);
    free(tr->trace_path);
    free(tr);
}

/* Return the trace hook's first write error, if any, as this call's status. */
static dt_status dt__trace_check(dt_trainer *tr)
{
    if (tr->trace_status == DT_OK) return DT_OK;
    return DT_FAIL(tr->trace_status, "--trace %s: writing the trace failed", tr->cfg.trace_path);
}

/* The communicator for gradients: NCCL on the GPU, the host one otherwise. */
static dt_comm *dt__tr_grad_comm(const dt_trainer *tr) { return tr->gcomm ? tr->gcomm : tr->cfg.comm; }

static void *dt__comm_main(void *arg)
{
    dt_trainer *tr = arg;
    const dt_collective_opts opts = {.chunk_bytes = tr->cfg.allreduce_chunk_bytes,
                                     .hook = tr->trace ? dt__comm_hook : NULL,
                                     .hook_ctx = tr};
    float *g = dt__tr_grads(tr);
    pthread_mutex_lock(&tr->mu);
    for (;;) {
        while (tr->q_head == tr->q_tail && !tr->stop) pthread_cond_wait(&tr->cv, &tr->mu);
        if (tr->stop) break;
        int b = tr->queue[tr->q_head++];
        pthread_mutex_unlock(&tr->mu);
        dt_status st = dt_comm_allreduce(dt__tr_grad_comm(tr), g + tr->bucket_off[b], tr->bucket_len[b], tr->cfg.allreduce,
                                         &opts);
        pthread_mutex_lock(&tr->mu);
        if (st != DT_OK && tr->comm_status == DT_OK) {
            tr->comm_status = st;
            snprintf(tr->comm_err, sizeof tr->comm_err, "%s", dt_last_error());
        }
        tr->n_done++;
        pthread_cond_broadcast(&tr->cv);
    }
    pthread_mutex_unlock(&tr->mu);
    return NULL;
}

/* Buckets for the GPT under data parallelism: layers in backward order
 * (head, blocks L-1..0, embedding), each layer's tensors one contiguous
 * range of the flat buffer, gathered until a bucket holds bucket_bytes. */
static dt_status dt__buckets_init(dt_trainer *tr)
{
    const dt_paramset *ps = dt__tr_layout(tr);
    const int L = tr->cfg.model.num_layers, n_layers = L + 2;
    tr->bucket_off = calloc((size_t)n_layers, sizeof *tr->bucket_off);
    tr->bucket_len = calloc((size_t)n_layers, sizeof *tr->bucket_len);
    tr->bucket_low = calloc((size_t)n_layers, sizeof *tr->bucket_low);
    tr->queue = calloc((size_t)n_layers, sizeof *tr->queue);
    if (!tr->bucket_off || !tr->bucket_len || !tr->bucket_low || !tr->queue)
        return DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory for gradient buckets");
    size_t end = ps->numel, acc = 0;
    tr->n_buckets = 0;
    for (int layer = L; layer >= -1; layer--) {
        /* tensors of the layer: embedding 0..1, block l 2+12l..13+12l, head the last 3 */
        int first = layer == -1 ? 0 : layer == L ? ps->count - 3 : 2 + 12 * layer;
        size_t lo = ps->info[first].offset;
        acc += end - lo;
        end = lo;
        if (acc * sizeof(float) >= tr->cfg.bucket_bytes || layer == -1) {
            int b = tr->n_buckets++;
            tr->bucket_off[b] = lo;
            tr->bucket_len[b] = acc;
            tr->bucket_low[b] = layer;
            acc = 0;
        }
    }
    pthread_mutex_init(&tr->mu, NULL);
    pthread_cond_init(&tr->cv, NULL);
    if (pthread_create(&tr->comm_thread, NULL, dt__comm_main, tr) != 0)
        return DT_FAIL(DT_ERR_BACKEND, "trainer: cannot start the communication thread");
    tr->comm_thread_on = 1;
    return DT_OK;
}

static void dt__buckets_free(dt_trainer *tr)
{
    if (tr->comm_thread_on) {
        pthread_mutex_lock(&tr->mu);
        tr->stop = 1;
        pthread_cond_broadcast(&tr->cv);
        pthread_mutex_unlock(&tr->mu);
        pthread_join(tr->comm_thread, NULL);
        tr->comm_thread_on = 0;
        pthread_mutex_destroy(&tr->mu);
        pthread_cond_destroy(&tr->cv);
    }
    free(tr->bucket_off);
    free(tr->bucket_len);
    free(tr->bucket_low);
    free(tr->queue);
}

/* The batch index of micro-batch j (0 .. n_micro * dp_size - 1) of the
 * current step: the global batch is n_micro * dp_size micro-batches, rank r
 * takes j = r * n_micro .. r * n_micro + n_micro - 1, so n ranks with
 * micro-batch b see exactly the rows of one rank with n * b. */
static uint64_t dt__micro_index(const dt_trainer *tr, int j)
{
    return (uint64_t)tr->iter * (uint64_t)(tr->n_micro * tr->dp_size) + (uint64_t)j;
}

/* Trace hook for the steps of the gradient allreduce (comm lane). */
static void dt__comm_hook(void *ctx, const char *phase, int step, int peer, size_t bytes, int64_t t0_ns,
                          int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (!tr->trace || tr->trace_status != DT_OK) return;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, phase, "comm", tr->rank, DT_LANE_COMM, t0_ns - tr->t_start_ns,
                        t1_ns - t0_ns);
    e.iter = tr->iter;
    e.bytes = (int64_t)bytes;
    if (dt_trace_event_add_arg(&e, "step", step) != DT_OK || dt_trace_event_add_arg(&e, "peer", peer) != DT_OK)
        return;
    dt__trace_write(tr, &e);
}

/* Data parallelism: sum the gradients and the step's loss over the ranks.
 * Every rank weighted its micro-batches by their share of the global
 * batch's targets, so the sum is the global batch's gradient, identical on
 * every rank (the collectives give bit-identical results everywhere). */
static dt_status dt__dp_reduce(dt_trainer *tr, double *loss_sum)
{
    if (tr->comm_thread_on) {
        /* launch what the backward did not (all of it without overlap), wait for all */
        pthread_mutex_lock(&tr->mu);
        for (int b = 0; b < tr->n_buckets; b++) {
            int launched = 0;
            for (int i = 0; i < tr->q_tail; i++) launched |= tr->queue[i] == b;
            if (!launched) tr->queue[tr->q_tail++] = b;
        }
        pthread_cond_broadcast(&tr->cv);
        while (tr->n_done < tr->n_buckets) pthread_cond_wait(&tr->cv, &tr->mu);
        dt_status st = tr->comm_status;
        tr->q_head = tr->q_tail = tr->n_done = 0;
        tr->comm_status = DT_OK;
        pthread_mutex_unlock(&tr->mu);
        if (st != DT_OK) return DT_FAIL(st, "%s", tr->comm_err);
    } else {
        const dt_paramset *layout = dt__tr_layout(tr);
        dt_collective_opts opts = {.chunk_bytes = tr->cfg.allreduce_chunk_bytes,
                                   .hook = tr->trace ? dt__comm_hook : NULL,
                                   .hook_ctx = tr};
        DT_CHECK(dt_comm_allreduce(dt__tr_grad_comm(tr), dt__tr_grads(tr), layout->numel, tr->cfg.allreduce, &opts));
    }
    float l = (float)*loss_sum;
    DT_CHECK(dt_comm_allreduce(tr->cfg.comm, &l, 1, DT_ALLREDUCE_RING, NULL));
    *loss_sum = l;
    return DT_OK;
}

/* ---- non-finite loss or gradient norm (the failure path only) ----------- */

/* The layer a tensor of the layout belongs to: the GPT's "h.K.*" -> "h.K",
 * wte/wpe -> "embedding", lnf.*, lm_head.* -> "head"; any other model's
 * tensor: its name up to the last '.'. */
static void dt__nf_layer_of(const char *tensor, char *out, size_t cap)
{
    if (!strcmp(tensor, "wte") || !strcmp(tensor, "wpe")) {
        snprintf(out, cap, "embedding");
    } else if (!strncmp(tensor, "lnf.", 4) || !strncmp(tensor, "lm_head.", 8)) {
        snprintf(out, cap, "head");
    } else {
        const char *dot = strrchr(tensor, '.');
        snprintf(out, cap, "%.*s", dot ? (int)(dot - tensor) : (int)strlen(tensor), tensor);
    }
}

/* *bad = 1 if x(n), backend memory, holds a NaN or inf (unscale by 1: no change). */
static dt_status dt__nf_any(dt_backend *be, float *x, size_t n, int *bad)
{
    *bad = 0;
    return n ? be->unscale_check(be, x, 1.0f, n, bad) : DT_OK;
}

/* The GPT's forward again, layer by layer, on this step's micro-batches,
 * on scratch memory of its own (the model is not touched): the first
 * layer whose output holds a NaN or inf, in where (empty when none). FP32
 * whole models only (the caller checks). */
static dt_status dt__nf_forward(dt_trainer *tr, char *where, size_t cap)
{
    where[0] = 0;
    const dt_gpt_config *c = dt_gpt_config_of(tr->model);
    const dt_paramset *L = dt_gpt_layout(tr->model);
    dt_backend *be = tr->be;
    const int B = tr->B, T = tr->T, NL = c->num_layers, N = B * T;
    if (L->count != 2 + 12 * NL + 3) return DT_OK; /* not the layout below */
    float *w = dt_gpt_params(tr->model);
    const dt_param_info *in = L->info;
    const float *wte = w + in[0].offset, *wpe = w + in[1].offset;
    dt__block_params *bp = calloc((size_t)(NL ? NL : 1), sizeof *bp);
    dt__block_acts *acts = calloc((size_t)(NL ? NL : 1), sizeof *acts);
    dt_buffer arena_buf = {0}, io = {0};
    dt_status st = DT_OK;
    if (!bp || !acts) {
        st = DT_FAIL(DT_ERR_NOMEM, "non-finite check: out of memory");
        goto done;
    }
    int k = 2;
    for (int l = 0; l < NL; l++) {
        float **f[12] = {&bp[l].ln1w,     &bp[l].ln1b, &bp[l].qkvw, &bp[l].qkvb,    &bp[l].attprojw, &bp[l].attprojb,
                         &bp[l].ln2w,     &bp[l].ln2b, &bp[l].fcw,  &bp[l].fcb,     &bp[l].fcprojw,  &bp[l].fcprojb};
        for (int i = 0; i < 12; i++) *f[i] = w + in[k++].offset;
    }
    const dt__head_params hp = {w + in[k].offset, w + in[k + 1].offset, w + in[k + 2].offset};
    const size_t floats = dt__embed_act_floats(c, B, T) + (size_t)NL * dt__block_act_floats(c, B, T, 1) +
                          dt__head_act_floats(c, B, T) + 256 * (size_t)(NL + 3); /* + the arena's rounding */
    DT_CHECK_GOTO(dt_buffer_alloc(&arena_buf, be, floats * sizeof(float)), st, done);
    /* tokens, targets (int32), losses (float), correct (bytes) */
    DT_CHECK_GOTO(dt_buffer_alloc(&io, be, (size_t)N * 13 + 64), st, done);
    int32_t *d_tokens = io.data, *d_targets = d_tokens + N;
    float *losses = (float *)(d_targets + N);
    uint8_t *correct = (uint8_t *)(losses + N);
    dt__arena a = {.base = arena_buf.data, .capacity = floats};
    for (int m = 0; m < tr->n_micro && !where[0]; m++) {
        uint64_t index = dt__micro_index(tr, tr->dp_rank * tr->n_micro + m);
        DT_CHECK_GOTO(dt_data_batch(tr->data, DT_SPLIT_TRAIN, index, B, T, tr->tokens, tr->targets, NULL, NULL), st,
                      done);
        DT_CHECK_GOTO(be->copy(be, d_tokens, tr->tokens, (size_t)N * sizeof(int32_t), DT_COPY_H2D), st, done);
        DT_CHECK_GOTO(be->copy(be, d_targets, tr->targets, (size_t)N * sizeof(int32_t), DT_COPY_H2D), st, done);
        dt__arena_reset(&a);
        float *x = NULL;
        int bad = 0;
        DT_CHECK_GOTO(dt__embed_forward(be, c, wte, wpe, d_tokens, &a, &x, B, T, NULL), st, done);
        DT_CHECK_GOTO(dt__nf_any(be, x, (size_t)N * c->hidden_size, &bad), st, done);
        if (bad) {
            snprintf(where, cap, "forward: the output of layer embedding is the first non-finite (micro-batch %d)",
                     m);
            break;
        }
        for (int l = 0; l < NL && !bad; l++) {
            DT_CHECK_GOTO(dt__block_acts_alloc(&a, c, B, T, 1, &acts[l]), st, done);
            DT_CHECK_GOTO(dt__block_forward(be, c, &bp[l], &acts[l], x, B, T, NULL), st, done);
            x = acts[l].out;
            DT_CHECK_GOTO(dt__nf_any(be, x, (size_t)N * c->hidden_size, &bad), st, done);
            if (bad)
                snprintf(where, cap, "forward: the output of layer h.%d (block %d of %d) is the first non-finite "
                                     "(micro-batch %d)",
                         l, l, NL, m);
        }
        if (bad) break;
        dt__head_acts ha;
        DT_CHECK_GOTO(dt__head_forward(be, c, &hp, &a, &ha, x, d_targets, losses, correct, B, T, NULL), st, done);
        DT_CHECK_GOTO(dt__nf_any(be, ha.logits, (size_t)N * c->vocab_size, &bad), st, done);
        if (!bad) DT_CHECK_GOTO(dt__nf_any(be, losses, (size_t)N, &bad), st, done);
        if (bad)
            snprintf(where, cap, "forward: the output of layer head (logits or losses) is the first non-finite "
                                 "(micro-batch %d)",
                     m);
    }
done:
    dt_buffer_free(&io);
    dt_buffer_free(&arena_buf);
    free(bp);
    free(acts);
    return st;
}

/* Where the step went non-finite, into tr->nf_where: the forward re-run
 * (a whole FP32 GPT), else the gradients in backward order (the layout's
 * tensors from the last), else the weights. */
static dt_status dt__nf_locate(dt_trainer *tr)
{
    char *where = tr->nf_where;
    const size_t cap = sizeof tr->nf_where;
    where[0] = 0;
    if (tr->model && tr->cfg.tensor_size <= 1) DT_CHECK(dt__nf_forward(tr, where, cap));
    if (where[0]) return DT_OK;
    const dt_paramset *L = dt__tr_layout(tr);
    float *g = dt__tr_grads(tr), *w = dt__tr_params(tr);
    char layer[DT_NAME_MAX];
    for (int i = L->count - 1; i >= 0; i--) {
        int bad = 0;
        DT_CHECK(dt__nf_any(tr->be, g + L->info[i].offset, L->info[i].numel, &bad));
        if (!bad) continue;
        dt__nf_layer_of(L->info[i].name, layer, sizeof layer);
        snprintf(where, cap, "backward: the gradient of layer %s (%s) is the first non-finite in backward order",
                 layer, L->info[i].name);
        return DT_OK;
    }
    for (int i = 0; i < L->count; i++) {
        int bad = 0;
        DT_CHECK(dt__nf_any(tr->be, w + L->info[i].offset, L->info[i].numel, &bad));
        if (!bad) continue;
        dt__nf_layer_of(L->info[i].name, layer, sizeof layer);
        snprintf(where, cap, "weights: layer %s (%s) holds the first non-finite weight", layer, L->info[i].name);
        return DT_OK;
    }
    snprintf(where, cap, "no layer's output, gradient or weight is non-finite on a re-check");
    return DT_OK;
}

/* A non-finite loss or gradient norm (what: "training loss", "gradient
 * norm") in iteration tr->iter. FP32 without a parameter server or a
 * pipeline: the first bad layer is found (dt__nf_locate), then the step
 * fails naming it, or with --skip-nonfinite is marked skipped (nf_skip).
 * Otherwise (fp16 has its loss scaler) the message is the plain one. */
static dt_status dt__nonfinite(dt_trainer *tr, const char *what, double v)
{
    if (tr->cfg.precision != DT_F32 || tr->pipe || tr->ps)
        return DT_FAIL(DT_ERR_NUMERIC, "iteration %lld: %s is %g (diverged; try a lower --lr or --clip-grad)",
                       (long long)tr->iter + 1, what, v);
    DT_CHECK(dt__nf_locate(tr));
    if (tr->cfg.skip_nonfinite) {
        tr->nf_skip = 1;
        tr->nf_skipped++;
        return DT_OK;
    }
    return DT_FAIL(DT_ERR_NUMERIC,
                   "iteration %lld: %s is %g; %s (diverged; try a lower --lr or --clip-grad, or --skip-nonfinite)",
                   (long long)tr->iter + 1, what, v, tr->nf_where);
}

static dt_status dt__loss_check(dt_trainer *tr, double loss)
{
    if (isfinite((float)loss)) return DT_OK;
    return dt__nonfinite(tr, "training loss", loss);
}

/* --slow-rank: this rank sleeps before its gradient exchange (a straggler). */
static void dt__straggle(const dt_trainer *tr)
{
    if (tr->cfg.slow_ms <= 0 || tr->rank != tr->cfg.slow_rank) return;
    struct timespec ts = {.tv_sec = tr->cfg.slow_ms / 1000, .tv_nsec = (long)(tr->cfg.slow_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A worker's exchange with the parameter servers: push this step's
 * gradients (ps-async: with their norm, for clipping), pull the new
 * weights; the servers' answer stands in for the local update. The last
 * iteration also pulls the final weights (every worker's pushes applied). */
static dt_status dt__ps_step(dt_trainer *tr, double *loss_sum, float S, dt__update_result *ur, dt__ps_reply *rep)
{
    const dt_paramset *layout = dt__tr_layout(tr);
    float *params = dt__tr_params(tr), *grads = dt__tr_grads(tr);
    dt__ps_push push = {.iter = tr->iter, .loss = *loss_sum, .norm = -1.0, .loss_scale = S};
    if (tr->cfg.ps_mode == DT_PS_ASYNC) DT_CHECK(dt_grad_norm(tr->be, layout, grads, &push.norm));
    DT_CHECK(tr->be->synchronize(tr->be));
    const int64_t t0 = dt_time_ns();
    dt_status st = dt__ps_exchange(tr->ps, params, grads, &push, rep);
    if (st == DT_OK && tr->iter + 1 == tr->cfg.train_iters) st = dt__ps_finish(tr->ps, params);
    if (st != DT_OK) {
        tr->ps_broken = 1;
        return st;
    }
    const int64_t t1 = dt_time_ns();
    memset(ur, 0, sizeof *ur);
    ur->skipped = rep->skipped;
    ur->first_bad = rep->first_bad;
    ur->norm = rep->norm;
    ur->clip = rep->clip;
    ur->lr = rep->lr;
    /* the servers' scaler saw the same overflow: this copy stays equal to theirs */
    if (tr->cfg.use_loss_scaling) (void)dt_loss_scaler_update(&tr->scaler, rep->skipped, &ur->ev);
    *loss_sum = rep->loss;
    if (tr->trace && tr->trace_status == DT_OK) {
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, "push/pull", "comm", tr->rank, DT_LANE_COMM, t0 - tr->t_start_ns,
                            t1 - t0);
        e.iter = tr->iter;
        e.bytes = (int64_t)(layout->numel * sizeof(float));
        DT_CHECK(dt_trace_event_add_arg(&e, "staleness", (double)rep->staleness));
        DT_CHECK(dt_trace_event_add_arg(&e, "version", (double)rep->version));
        DT_CHECK(dt__trace_write(tr, &e));
        if (tr->cfg.ps_mode == DT_PS_ASYNC) DT_CHECK(dt__trace_counter(tr, "staleness", t1 - tr->t_start_ns, (double)rep->staleness));
    }
    return DT_OK;
}

/* Steps' throughput bookkeeping (the first step is the warm-up). */
static void dt__tr_account(dt_trainer *tr, double secs)
{
    const double tokens = (double)tr->cfg.global_batch_size * tr->T;
    if (tr->iter == 0) {
        tr->first_step_s = secs;
    } else {
        tr->rest_s += secs;
        tr->rest_tokens += tokens;
    }
}

/* After the last pipeline step: the whole model on rank 0 and every stage's
 * figures on every rank (collective). */
static dt_status dt__pipe_finish(dt_trainer *tr)
{
    const int p = tr->cfg.pipeline_size;
    DT_CHECK(dt__pipe_probe(tr->pipe, &tr->pipe_probe));
    tr->pipe_figures = calloc((size_t)3 * p, sizeof *tr->pipe_figures);
    float *v = calloc((size_t)3 * p, sizeof *v);
    if (!tr->pipe_figures || !v) {
        free(v);
        return DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory");
    }
    const int s = dt__pipe_stage(tr->pipe);
    if (dt__pipe_dp_index(tr->pipe) == 0 && dt__pipe_tp_index(tr->pipe) == 0) {
        v[s] = (float)dt__pipe_peak_activation_bytes(tr->pipe);
        v[p + s] = (float)dt__pipe_max_versions(tr->pipe);
        v[2 * p + s] = (float)dt__pipe_max_versions_in_flight(tr->pipe);
    }
    dt_status st = dt_comm_allreduce(tr->cfg.comm, v, (size_t)3 * p, DT_ALLREDUCE_RING, NULL);
    for (int i = 0; st == DT_OK && i < 3 * p; i++) tr->pipe_figures[i] = v[i];
    free(v);
    DT_CHECK(st);
    return dt__pipe_version_check(tr->pipe, &tr->pipe_mismatch, &tr->pipe_disagree);
}

static dt_status dt__pipe_trainer_step(dt_trainer *tr, dt_train_stats *out)
{
    const int64_t t0 = dt_time_ns();
    dt__pipe_stats ps;
    DT_CHECK(dt__pipe_step(tr->pipe, tr->iter, &ps));
    DT_CHECK(tr->be->synchronize(tr->be));
    const int64_t t1 = dt_time_ns();
    DT_CHECK(dt__trace_check(tr));
    DT_CHECK(dt__loss_check(tr, ps.loss));
    if (tr->trace) {
        const int64_t ts = t1 - tr->t_start_ns;
        DT_CHECK(dt__trace_counter(tr, "loss", ts, ps.loss));
        DT_CHECK(dt__trace_counter(tr, "lr", ts, ps.lr));
        DT_CHECK(dt__trace_counter(tr, "peak_activation_bytes", ts, (double)dt__pipe_peak_activation_bytes(tr->pipe)));
    }
    const double secs = (double)(t1 - t0) * 1e-9;
    dt__tr_account(tr, secs);
    tr->iter++;
    if (tr->iter == tr->cfg.train_iters) DT_CHECK(dt__pipe_finish(tr));
    if (out) {
        memset(out, 0, sizeof *out);
        out->iter = tr->iter;
        out->loss = ps.loss;
        out->lr = ps.lr;
        out->grad_norm = ps.grad_norm;
        out->step_seconds = secs;
        out->tokens_per_second = secs > 0 ? (double)tr->cfg.global_batch_size * tr->T / secs : 0.0;
        out->loss_scale = 1.0f;
    }
    return DT_OK;
}

/* --hang-rank R:ITER: rank R stops for ever at the start of iteration ITER
 * (a hung rank, for tests of --comm-timeout); signals still end it. */
static void dt__hang(const dt_trainer *tr)
{
    if (tr->cfg.hang_iter <= 0 || tr->rank != tr->cfg.hang_rank || tr->iter + 1 != tr->cfg.hang_iter) return;
    for (;;) {
        struct timespec ts = {.tv_sec = 1, .tv_nsec = 0};
        nanosleep(&ts, NULL);
    }
}

dt_status dt_trainer_step(dt_trainer *tr, dt_train_stats *out)
{
    dt__hang(tr);
    tr->nf_skip = 0;
    if (tr->pipe) {
        if (tr->iter >= tr->cfg.train_iters)
            return DT_FAIL(DT_ERR_INVALID, "iteration %lld: the pipeline schedule ends after --train-iters %lld",
                           (long long)tr->iter + 1, (long long)tr->cfg.train_iters);
        return dt__pipe_trainer_step(tr, out);
    }
    if (tr->ps && dt__ps_is_server(tr->ps))
        return DT_FAIL(DT_ERR_INVALID, "rank %d is a parameter server: it serves (dt_trainer_serve), it does not step",
                       tr->rank);
    if (tr->ps && dt__ps_finished(tr->ps))
        return DT_FAIL(DT_ERR_INVALID, "iteration %lld: the parameter servers have finished after --train-iters %lld",
                       (long long)tr->iter + 1, (long long)tr->cfg.train_iters);
    if (tr->ps) DT_CHECK(dt__ps_ensure_pulled(tr));
    const int64_t t0 = dt_time_ns();
    /* The step's loss is the mean over every counted target of all its
     * micro-batches, so micro-batch k's mean loss is weighted by n_k / n
     * (n_k its counted targets, n their sum). With equal n_k that is the
     * usual 1/N; with masked targets (the tasks' answers vary in length)
     * it keeps the accumulated gradient equal to one large batch's. A
     * first pass over the (cheap, deterministic) data counts n. */
    const size_t n_pos = (size_t)tr->B * tr->T;
    /* loss scaling: the backward starts from S * loss; unscaled below */
    const float S = tr->cfg.use_loss_scaling ? dt_loss_scaler_scale(&tr->scaler) : 1.0f;
    double loss_sum = 0.0;
    size_t act_bytes = 0;
    /* the ranks whose micro-batches make up one gradient: every worker's,
     * except under ps-async, where each worker's push is an update of its own */
    const int share = tr->cfg.ps_mode == DT_PS_ASYNC ? 1 : tr->dp_size;
    if (tr->mlp) { /* every example counts: each micro-batch weighs 1/N */
        for (int k = 0; k < tr->n_micro; k++) {
            uint64_t index = dt__micro_index(tr, tr->dp_rank * tr->n_micro + k);
            DT_CHECK(dt_blobs_batch(tr->blobs, DT_SPLIT_TRAIN, index, tr->B, tr->x, tr->y));
            float loss = 0.0f;
            DT_CHECK(dt_mlp_forward(tr->mlp, tr->x, tr->y, tr->B, &loss));
            act_bytes = DT_MAX(act_bytes, dt_mlp_activation_bytes(tr->mlp));
            DT_CHECK(dt_mlp_backward(tr->mlp, 1.0f / (float)(tr->n_micro * share)));
            loss_sum += loss / (tr->n_micro * share);
        }
    }
    long long n_total = 0; /* over the whole global batch, all ranks' micro-batches (ps-async: this worker's) */
    for (int k = share == 1 ? tr->dp_rank * tr->n_micro : 0; !tr->mlp && k < tr->n_micro * (share == 1 ? tr->dp_rank + 1 : share); k++) {
        uint64_t index = dt__micro_index(tr, k);
        DT_CHECK(dt_data_batch(tr->data, DT_SPLIT_TRAIN, index, tr->B, tr->T, tr->tokens, tr->targets, NULL, NULL));
        for (size_t i = 0; i < n_pos; i++) n_total += tr->targets[i] >= 0;
    }
    for (int k = 0; !tr->mlp && k < tr->n_micro; k++) {
        uint64_t index = dt__micro_index(tr, tr->dp_rank * tr->n_micro + k);
        DT_CHECK(dt_data_batch(tr->data, DT_SPLIT_TRAIN, index, tr->B, tr->T, tr->tokens, tr->targets, NULL, NULL));
        long long n_k = 0;
        for (size_t i = 0; i < n_pos; i++) n_k += tr->targets[i] >= 0;
        tr->cur_micro = k;
        float loss = 0.0f;
        DT_CHECK(dt_gpt_forward(tr->model, tr->tokens, tr->targets, tr->B, tr->T, &loss));
        act_bytes = DT_MAX(act_bytes, dt_gpt_activation_bytes(tr->model));
        const double w = n_total ? (double)n_k / (double)n_total : 0.0;
        /* the last micro-batch's backward completes each layer's gradient:
         * launch its bucket from the layer hook (FP32 gradients only; under
         * mixed precision they reach the FP32 buffer at the very end) */
        tr->overlap_active = tr->comm_thread_on && k == tr->n_micro - 1 && tr->cfg.precision == DT_F32;
        dt_status bst = dt_gpt_backward(tr->model, (float)(w * S));
        tr->overlap_active = 0;
        DT_CHECK(bst);
        loss_sum += w * loss;
    }
    DT_CHECK(dt__trace_check(tr));
    dt__straggle(tr);
    const dt_paramset *layout = dt__tr_layout(tr);
    float *grads = dt__tr_grads(tr);
    dt__update_result ur;
    dt__ps_reply rep;
    memset(&rep, 0, sizeof rep);
    int64_t t_opt;
    float *amax = NULL; /* per tensor, for the grad_amax trace events */
    if (tr->ps) { /* push the gradients, pull the servers' new weights */
        t_opt = dt_time_ns();
        DT_CHECK(dt__ps_step(tr, &loss_sum, S, &ur, &rep));
    } else if (tr->zero) { /* reduce-scatter, update this rank's shard, all-gather the weights */
        float l = (float)loss_sum;
        DT_CHECK(dt_comm_allreduce(tr->cfg.comm, &l, 1, DT_ALLREDUCE_RING, NULL));
        loss_sum = l;
        DT_CHECK(dt__loss_check(tr, loss_sum));
        t_opt = dt_time_ns();
        const dt_collective_opts opts = {.chunk_bytes = tr->cfg.allreduce_chunk_bytes,
                                         .hook = tr->trace ? dt__comm_hook : NULL,
                                         .hook_ctx = tr};
        const dt__zero_step_args za = {.scaler = tr->cfg.use_loss_scaling ? &tr->scaler : NULL,
                                       .loss_scale = S,
                                       .lr = &tr->lr,
                                       .position = tr->iter,
                                       .clip_grad = tr->cfg.clip_grad,
                                       .coll = &opts,
                                       .scalar_comm = tr->cfg.comm};
        DT_CHECK(dt__zero_step(tr->zero, dt__tr_params(tr), grads, &za, &ur));
    } else {
        if (tr->dp_size > 1) DT_CHECK(dt__dp_reduce(tr, &loss_sum));
        DT_CHECK(dt__loss_check(tr, loss_sum));
        t_opt = dt_time_ns();
        dt__update_args ua = {.be = tr->be,
                              .layout = layout,
                              .params = dt__tr_params(tr),
                              .grads = grads,
                              .opt = &tr->opt,
                              .scaler = tr->cfg.use_loss_scaling ? &tr->scaler : NULL,
                              .loss_scale = S,
                              .lr = &tr->lr,
                              .position = tr->iter,
                              .clip_grad = tr->cfg.clip_grad,
                              .given_norm = -1.0,
                              .allow_nonfinite = tr->cfg.precision == DT_F32};
        if (tr->trace && tr->cfg.use_loss_scaling && tr->model) { /* grad_amax: traced fp16 runs only */
            amax = malloc((size_t)layout->count * sizeof *amax);
            if (!amax) return DT_FAIL(DT_ERR_NOMEM, "trace: out of memory for %d gradient amax", layout->count);
            ua.amax = amax;
        }
        dt_status ust = DT_OK;
        if (tr->nf_skip) { /* --skip-nonfinite: a non-finite loss, no update */
            memset(&ur, 0, sizeof ur);
            ur.first_bad = -1;
            ur.lr = dt_lr_at(&tr->lr, tr->iter);
        } else {
            ust = dt__update_apply(&ua, &ur);
            if (ust == DT_OK && ur.nonfinite) ust = dt__nonfinite(tr, "gradient norm", ur.norm);
        }
        if (ust == DT_OK && amax) ust = dt__trace_grad_amax(tr, layout, amax, S, t_opt - tr->t_start_ns);
        free(amax);
        DT_CHECK(ust);
    }
    const float loss = (float)loss_sum;
    if (tr->ps) DT_CHECK(dt__loss_check(tr, loss_sum)); /* the servers' sum */
    const dt_loss_scaler_event ev = ur.ev;
    const int skip = ur.skipped, first_bad = ur.first_bad;
    const double norm = ur.norm;
    const float scale = ur.clip, lr = ur.lr;
    DT_CHECK(dt__tr_zero_grad(tr));
    DT_CHECK(tr->be->synchronize(tr->be));
    const int64_t t1 = dt_time_ns();

    if (tr->trace && tr->cfg.use_loss_scaling) {
        const int64_t ts = t1 - tr->t_start_ns;
        DT_CHECK(dt__trace_counter(tr, "loss_scale", ts, ev.scale_after));
        if (skip) {
            dt_trace_event e;
            char name[16 + DT_NAME_MAX];
            snprintf(name, sizeof name, "overflow %s", first_bad >= 0 ? layout->info[first_bad].name : "");
            dt_trace_event_init(&e, DT_TRACE_INSTANT, name, "optim", tr->rank, DT_LANE_OPTIM, t_opt - tr->t_start_ns, 0);
            e.iter = tr->iter;
            DT_CHECK(dt_trace_event_add_arg(&e, "loss_scale", S));
            DT_CHECK(dt_trace_event_add_arg(&e, "tensor", first_bad));
            DT_CHECK(dt_trace_event_add_arg(&e, "at_min", ev.at_min));
            DT_CHECK(dt__trace_write(tr, &e));
        }
    }
    if (tr->trace && !skip) {
        if (!tr->ps) { /* a worker of a parameter server has its push/pull on the comm lane instead */
            dt_trace_event e;
            dt_trace_event_init(&e, DT_TRACE_COMPLETE, "optimizer", "optim", tr->rank, DT_LANE_OPTIM,
                                t_opt - tr->t_start_ns, t1 - t_opt);
            e.iter = tr->iter;
            DT_CHECK(dt_trace_event_add_arg(&e, "grad_norm", norm));
            DT_CHECK(dt_trace_event_add_arg(&e, "clip_factor", scale));
            DT_CHECK(dt__trace_write(tr, &e));
        }
        const int64_t ts = t1 - tr->t_start_ns;
        DT_CHECK(dt__trace_counter(tr, "loss", ts, loss));
        DT_CHECK(dt__trace_counter(tr, "lr", ts, lr));
        DT_CHECK(dt__trace_counter(tr, "activation_bytes", ts, (double)act_bytes));
        DT_CHECK(dt__trace_counter(tr, "peak_activation_bytes", ts, (double)dt__tr_peak_act(tr)));
        if (tr->opt_ready && dt_optim_has_trust_ratios(&tr->opt)) {
            /* LARS/LAMB: one counter track per tensor the trust ratio applies to */
            const float *ratio = dt_optim_trust_ratios(&tr->opt);
            for (int i = 0; i < layout->count; i++) {
                if (!layout->info[i].decay) continue;
                char name[8 + DT_NAME_MAX]; /* the event keeps its first DT_TRACE_NAME_MAX - 1 bytes */
                snprintf(name, sizeof name, "trust/%s", layout->info[i].name);
                DT_CHECK(dt__trace_counter(tr, name, ts, ratio[i]));
            }
        }
    }

    const double secs = (double)(t1 - t0) * 1e-9;
    const double tokens = (double)tr->cfg.global_batch_size * tr->T;
    dt__tr_account(tr, secs);
    tr->iter++;
    if (out) {
        out->iter = tr->iter;
        out->loss = loss;
        out->lr = lr;
        out->grad_norm = norm;
        out->step_seconds = secs;
        out->tokens_per_second = secs > 0 ? tokens / secs : 0.0;
        out->loss_scale = S;
        out->overflow = skip;
        out->overflow_tensor = first_bad >= 0 ? layout->info[first_bad].name : NULL;
        out->scale_at_min = ev.at_min;
        out->scale_at_min_first = ev.at_min_first;
        out->skipped_steps = tr->cfg.use_loss_scaling ? tr->scaler.skipped : 0;
        out->nonfinite = tr->nf_skip;
        out->nonfinite_where = tr->nf_skip ? tr->nf_where : NULL;
        out->nonfinite_skipped = tr->nf_skipped;
        out->staleness = rep.staleness;
        out->version = rep.version;
    }
    return DT_OK;
}

/* mlp-bn: evaluation in eval mode (BatchNorm uses its running statistics). */
/* Evaluation covers eval_iters global batches of the validation split,
 * whatever the micro-batch size and the number of ranks: n_val micro-batches
 * of B rows, split into one contiguous share per rank, with the sums
 * (loss over counted targets, targets, examples, correct) added over the
 * ranks. So a serial run and a data-parallel one evaluate the same rows. */
typedef struct dt__eval_sums {
    double loss;      /* sum of per-target (GPT) or per-example (mlp-bn) losses */
    double counted;   /* targets or examples the loss is summed over */
    double examples;  /* complete examples (accuracy) */
    double correct;
} dt__eval_sums;

static dt_status dt__evaluate_share(dt_trainer *tr, dt__eval_sums *sum)
{
    if (tr->pipe) { /* through the stages; the sums come back added over every rank */
        double v[4];
        DT_CHECK(dt__pipe_evaluate(tr->pipe, tr->cfg.eval_iters * tr->n_micro * tr->dp_size,
                                   dt_data_has_accuracy(tr->data), v));
        sum->loss = v[0], sum->counted = v[1], sum->examples = v[2], sum->correct = v[3];
        return DT_OK;
    }
    const int n_val = tr->cfg.eval_iters * tr->n_micro * tr->dp_size;
    const int lo = (int)((int64_t)n_val * tr->dp_rank / tr->dp_size);
    const int hi = (int)((int64_t)n_val * (tr->dp_rank + 1) / tr->dp_size);
    const int has_acc = tr->mlp ? 1 : dt_data_has_accuracy(tr->data);
    const size_t n = (size_t)tr->B * tr->T;
    for (int i = lo; i < hi; i++) {
        float loss = 0.0f;
        if (tr->mlp) {
            int nc = 0;
            DT_CHECK(dt_blobs_batch(tr->blobs, DT_SPLIT_VAL, (uint64_t)i, tr->B, tr->x, tr->y));
            DT_CHECK(dt_mlp_forward(tr->mlp, tr->x, tr->y, tr->B, &loss));
            DT_CHECK(dt_mlp_accuracy(tr->mlp, &nc));
            sum->loss += (double)loss * tr->B;
            sum->counted += tr->B;
            sum->examples += tr->B;
            sum->correct += nc;
            continue;
        }
        int n_ex = 0;
        DT_CHECK(dt_data_batch(tr->data, DT_SPLIT_VAL, (uint64_t)i, tr->B, tr->T, tr->tokens, tr->targets,
                               tr->example, &n_ex));
        DT_CHECK(dt_gpt_forward(tr->model, tr->tokens, tr->targets, tr->B, tr->T, &loss));
        size_t counted = 0;
        for (size_t k = 0; k < n; k++) counted += tr->targets[k] >= 0;
        sum->loss += (double)loss * (double)counted;
        sum->counted += (double)counted;
        if (has_acc && n_ex > 0) {
            int nc = 0;
            DT_CHECK(dt_gpt_position_stats(tr->model, tr->pos_loss, tr->pos_correct));
            dt_data_count_correct(tr->example, tr->pos_correct, (int)n, n_ex, &nc);
            sum->examples += n_ex;
            sum->correct += nc;
        }
    }
    if (tr->dp_size > 1) { /* exact for counts below 2^24; the loss sum to float precision */
        float v[4] = {(float)sum->loss, (float)sum->counted, (float)sum->examples, (float)sum->correct};
        DT_CHECK(dt_comm_allreduce(tr->dp_comm, v, 4, DT_ALLREDUCE_RING, NULL));
        sum->loss = v[0], sum->counted = v[1], sum->examples = v[2], sum->correct = v[3];
    }
    return DT_OK;
}

dt_status dt_trainer_evaluate(dt_trainer *tr, dt_eval_result *out)
{
    if (tr->ps && dt__ps_is_server(tr->ps))
        return DT_FAIL(DT_ERR_INVALID, "rank %d is a parameter server: the workers evaluate", tr->rank);
    if (tr->ps) DT_CHECK(dt__ps_ensure_pulled(tr));
    const int64_t t0 = dt_time_ns();
    const int has_acc = tr->mlp ? 1 : dt_data_has_accuracy(tr->data);
    dt__eval_sums sum = {0, 0, 0, 0};
    /* evaluation forwards are not training layers: keep them out of the
     * trace; BatchNorm normalises with its running statistics */
    if (tr->trace) dt__tr_set_hook(tr, 0);
    if (tr->mlp) dt_mlp_set_training(tr->mlp, 0);
    dt_status st = dt__evaluate_share(tr, &sum);
    if (tr->mlp) dt_mlp_set_training(tr->mlp, 1);
    if (tr->trace) dt__tr_set_hook(tr, 1);
    if (st != DT_OK) return st;
    out->loss = sum.counted > 0 ? (float)(sum.loss / sum.counted) : 0.0f;
    out->n_examples = (int)sum.examples;
    out->accuracy = (has_acc && sum.examples > 0) ? sum.correct / sum.examples : -1.0;
    if (tr->trace) {
        const int64_t t1 = dt_time_ns();
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, "evaluate", "compute", tr->rank, DT_LANE_COMPUTE, t0 - tr->t_start_ns,
                            t1 - t0);
        e.iter = tr->iter;
        DT_CHECK(dt__trace_write(tr, &e));
        DT_CHECK(dt__trace_counter(tr, "val_loss", t1 - tr->t_start_ns, out->loss));
    }
    return DT_OK;
}

int dt_trainer_is_server(const dt_trainer *tr) { return tr->ps && dt__ps_is_server(tr->ps); }

/* Server trace: one "apply" span per update on the optimizer lane. */
static void dt__tr_apply_hook(void *ctx, int worker, int64_t staleness, int64_t version, int64_t t0_ns, int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (!tr->trace || tr->trace_status != DT_OK) return;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, "apply", "optim", tr->rank, DT_LANE_OPTIM, t0_ns - tr->t_start_ns,
                        t1_ns - t0_ns);
    e.iter = version - 1;
    if (dt_trace_event_add_arg(&e, "worker", worker) != DT_OK || dt_trace_event_add_arg(&e, "staleness", (double)staleness) != DT_OK ||
        dt_trace_event_add_arg(&e, "version", (double)version) != DT_OK)
        return;
    dt__trace_write(tr, &e);
}

dt_status dt_trainer_serve(dt_trainer *tr)
{
    if (!dt_trainer_is_server(tr))
        return DT_FAIL(DT_ERR_INVALID, "rank %d is not a parameter server (serve runs on the last --num-ps-servers ranks)",
                       tr->rank);
    const dt__ps_server_env env = {.be = tr->be,
                                   .init_params = dt__tr_params(tr),
                                   .optim = tr->cfg.optim,
                                   .lr = tr->lr,
                                   .clip_grad = tr->cfg.clip_grad,
                                   .loss_scaler = tr->cfg.use_loss_scaling ? &tr->cfg.loss_scaler : NULL,
                                   .hook = dt__tr_apply_hook,
                                   .hook_ctx = tr,
                                   .start_version = tr->ps_resume ? tr->ps_start_version : 0,
                                   .restore = tr->ps_resume ? dt__ck_ps_restore : NULL,
                                   .save = tr->save_dir ? dt__ck_ps_save : NULL,
                                   .ckpt_ctx = tr};
    DT_CHECK(dt__ps_serve(tr->ps, &env));
    /* the end of the run is saved too, unless the workers just did */
    if (tr->save_dir && dt__ps_server_version(tr->ps) != tr->last_save) DT_CHECK(dt_trainer_save(tr, tr->save_dir));
    return dt__trace_check(tr);
}

dt_gpt *dt_trainer_model(dt_trainer *tr) { return tr->model; }
const dt_lr_schedule *dt_trainer_lr_schedule(const dt_trainer *tr) { return &tr->lr; }
size_t dt_trainer_peak_activation_bytes(const dt_trainer *tr) { return dt__tr_peak_act(tr); }
const dt_train_config *dt_trainer_config(const dt_trainer *tr) { return &tr->cfg; }
const dt_dataset *dt_trainer_data(const dt_trainer *tr) { return tr->data; }
int64_t dt_trainer_iterations(const dt_trainer *tr) { return tr->iter; }
size_t dt_trainer_num_params(const dt_trainer *tr) { return tr->num_params; }

double dt_trainer_tokens_per_second(const dt_trainer *tr)
{
    if (tr->iter >= 2 && tr->rest_s > 0) return tr->rest_tokens / tr->rest_s;
    if (tr->iter >= 1 && tr->first_step_s > 0)
        return (double)tr->cfg.global_batch_size * tr->T / tr->first_step_s;
    return 0.0;
}

double dt_trainer_elapsed_seconds(const dt_trainer *tr) { return (double)(dt_time_ns() - tr->t_start_ns) * 1e-9; }

/* A fingerprint of the weights for comparing runs (serial against data
 * parallel, ...): sum of w_i * u(i) with u(i) in [-1, 1) a hash of the
 * element index (dt__probe_u), in double. Any change of the weights changes
 * it to first order; a split model adds its parts (dt__pipe_probe). */
static double dt__param_probe(dt_trainer *tr)
{
    if (tr->pipe) return tr->pipe_probe; /* added over the stages after the last step */
    size_t n = dt__tr_layout(tr)->numel;
    float *w = malloc(n * sizeof *w);
    if (!w || tr->be->copy(tr->be, w, dt__tr_params(tr), n * sizeof *w, DT_COPY_D2H) != DT_OK) {
        free(w);
        return NAN;
    }
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)w[i] * dt__probe_u(i);
    free(w);
    return s;
}

/* The summary's pipeline object (JSON null without pipeline parallelism):
 * per stage the peak saved activation bytes, the most weight versions
 * alive at once (current + stashed) and the most distinct versions used by
 * micro-batches in flight. */
static json_t *dt__pipe_summary(const dt_trainer *tr)
{
    if (!tr->pipe) return json_null();
    const int p = tr->cfg.pipeline_size;
    json_t *o = json_object(), *a = json_array(), *v = json_array(), *f = json_array();
    int bad = !o || !a || !v || !f;
    for (int s = 0; !bad && tr->pipe_figures && s < p; s++) {
        bad |= json_array_append_new(a, json_integer((json_int_t)tr->pipe_figures[s])) != 0;
        bad |= json_array_append_new(v, json_integer((json_int_t)tr->pipe_figures[p + s])) != 0;
        bad |= json_array_append_new(f, json_integer((json_int_t)tr->pipe_figures[2 * p + s])) != 0;
    }
    if (!bad) {
        dt__jset(o, "schedule", json_string(dt_sched_kind_name(tr->cfg.pipeline_schedule)), &bad);
        dt__jset(o, "stages", json_integer(p), &bad);
        dt__jset(o, "data_parallel_size", json_integer(tr->dp_size), &bad);
        dt__jset(o, "micro_batches_per_step", json_integer(tr->n_micro), &bad);
        dt__jset(o, "stage_peak_activation_bytes", a, &bad);
        dt__jset(o, "stage_weight_versions", v, &bad);
        dt__jset(o, "stage_versions_in_flight", f, &bad);
        /* stashing: backward on the forward's weights; vertical sync: one version per micro-batch */
        dt__jset(o, "version_mismatches", json_integer(tr->pipe_mismatch), &bad);
        dt__jset(o, "version_disagreements_across_stages", json_integer(tr->pipe_disagree), &bad);
        a = v = f = NULL;
    }
    json_decref(a), json_decref(v), json_decref(f);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

dt_status dt_trainer_staleness(const dt_trainer *tr, int64_t *pushes, double *mean, int64_t *max)
{
    if (!tr->ps || dt_trainer_is_server(tr))
        return DT_FAIL(DT_ERR_INVALID, "staleness: this rank is not a parameter-server worker");
    dt__ps_stats x;
    dt__ps_get_stats(tr->ps, &x);
    *pushes = x.pushes;
    *mean = x.mean;
    *max = x.max;
    return DT_OK;
}

/* The summary's parameter_server object (JSON null without one). */
static json_t *dt__ps_summary(const dt_trainer *tr)
{
    if (!tr->ps) return json_null();
    dt__ps_stats x;
    dt__ps_get_stats(tr->ps, &x);
    json_t *o = json_object(), *h = json_array();
    int bad = !o || !h, last = 0;
    for (int i = 0; i < DT__PS_HIST; i++)
        if (x.hist[i]) last = i;
    for (int i = 0; !bad && i <= last; i++) bad |= json_array_append_new(h, json_integer(x.hist[i])) != 0;
    if (!bad) {
        dt__jset(o, "mode", json_string(tr->cfg.ps_mode == DT_PS_SYNC ? "ps-sync" : "ps-async"), &bad);
        dt__jset(o, "workers", json_integer(dt__ps_num_workers(tr->ps)), &bad);
        dt__jset(o, "servers", json_integer(tr->cfg.num_ps_servers), &bad);
        dt__jset(o, "pushes", json_integer(x.pushes), &bad);
        dt__jset(o, "staleness_mean", json_real(x.mean), &bad);
        dt__jset(o, "staleness_max", json_integer(x.max), &bad);
        dt__jset(o, "staleness_histogram", h, &bad); /* bin i: pushes of staleness i (the last bin: 63 or more) */
        h = NULL;
    }
    json_decref(h);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

dt_status dt_trainer_write_summary(dt_trainer *tr, const char *path, const dt_train_stats *last,
                                   const dt_eval_result *eval)
{
    if (!path || !path[0]) return DT_FAIL(DT_ERR_INVALID, "--summary: expected a file name");
    json_t *o = json_object();
    json_t *cfg = dt__config_object(&tr->cfg);
    int bad = !o || !cfg;
    if (!bad) {
        const int has_acc = eval && eval->accuracy >= 0;
        dt__jset(o, "train_loss", last ? dt__jreal_or_null(last->loss) : json_null(), &bad);
        dt__jset(o, "val_loss", eval ? dt__jreal_or_null(eval->loss) : json_null(), &bad);
        dt__jset(o, "accuracy", has_acc ? json_real(eval->accuracy) : json_null(), &bad);
        dt__jset(o, "val_examples", json_integer(eval ? eval->n_examples : 0), &bad);
        dt__jset(o, "tokens_per_second", dt__jreal_or_null(dt_trainer_tokens_per_second(tr)), &bad);
        dt__jset(o, "peak_activation_bytes", json_integer((json_int_t)dt__tr_peak_act(tr)), &bad);
        dt__jset(o, "iterations", json_integer(tr->iter), &bad);
        dt__jset(o, "param_probe", dt__jreal_or_null(dt__param_probe(tr)), &bad);
        const int ls = tr->cfg.use_loss_scaling;
        dt__jset(o, "loss_scale", ls ? json_real(dt_loss_scaler_scale(&tr->scaler)) : json_null(), &bad);
        dt__jset(o, "skipped_steps", json_integer(ls ? tr->scaler.skipped : 0), &bad);
        dt__jset(o, "nonfinite_skipped_steps", json_integer(tr->nf_skipped), &bad);
        dt__jset(o, "loss_scale_backoffs", json_integer(ls ? tr->scaler.backoffs : 0), &bad);
        dt__jset(o, "loss_scale_at_min_overflows", json_integer(ls ? tr->scaler.min_overflows : 0), &bad);
        dt__jset(o, "num_params", json_integer((json_int_t)tr->num_params), &bad);
        /* this rank's FP32 master weights and optimizer state: the model's, its stage's or tensor shard's
         * (pipeline, tensor parallelism), or its ZeRO-1 shard's (--use-distributed-optimizer) */
        dt__jset(o, "master_weight_bytes",
                 json_integer((json_int_t)(tr->zero && dt__zero_master_bytes(tr->zero)
                                               ? dt__zero_master_bytes(tr->zero)
                                               : (tr->pipe ? dt__pipe_layout(tr->pipe) : dt__tr_layout(tr))->numel *
                                                     sizeof(float))),
                 &bad);
        dt__jset(o, "optimizer_state_bytes",
                 json_integer((json_int_t)(tr->zero   ? dt__zero_state_bytes(tr->zero)
                                           : tr->pipe ? dt_optim_state_bytes(dt__pipe_optimizer(tr->pipe))
                                           : tr->opt_ready ? dt_optim_state_bytes(&tr->opt)
                                                           : 0)),
                 &bad);
        dt__jset(o, "parameter_server", dt__ps_summary(tr), &bad);
        dt__jset(o, "pipeline", dt__pipe_summary(tr), &bad);
        dt__jset(o, "elapsed_seconds", json_real(dt_trainer_elapsed_seconds(tr)), &bad);
        dt__jset(o, "config", cfg, &bad);
        cfg = NULL; /* owned by o now, even on failure */
    }
    json_decref(cfg);
    if (bad) {
        json_decref(o);
        return DT_FAIL(DT_ERR_NOMEM, "--summary %s: out of memory building the summary", path);
    }
    errno = 0;
    int rc = json_dump_file(o, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER | DT__JSON_PRECISION);
    int err = errno;
    json_decref(o);
    if (rc != 0)
        return DT_FAIL(DT_ERR_IO, "--summary %s: cannot write the file (%s)", path,
                       err ? strerror(err) : "write failed");
    return DT_OK;
}

/* ---- checkpoints -------------------------------------------------------------
 * (docs/checkpoints.md; files: lib/checkpoint.c.) Every rank writes one
 * shard; what it holds depends on the rank's role:
 *   every role       trainer i64[5]: iteration, role, data position (the next
 *                    training micro-batch index), micro-batches per step (all
 *                    ranks), steps skipped by --skip-nonfinite;
 *                    loss_scaler i64[9] with loss scaling: scale (float
 *                    bits), hysteresis, good steps, steps, overflows,
 *                    skipped, growths, backoffs, at-min overflows
 *   replica          (one process, each data-parallel rank: replicas are
 *                    equal and each writes its own, so every shard is
 *                    self-contained) param/<t> for every tensor (the FP32
 *                    masters under --fp16/--bf16), state/<t> (mlp-bn's
 *                    BatchNorm statistics), the optimizer
 *   zero-1 segment   param/<piece> (FP32) or master/<piece> (mixed
 *                    precision) of the rank's segment, its optimizer
 *   stage            param/<t> of the stage's tensors (tensor-parallel
 *                    shards under t > 1), its optimizer
 *   ps server        ps.version i64[1], param/<t> of its shard, its optimizer
 *   ps worker        nothing more (its weights are the servers')
 *   optimizer        optim.step i64[1]; exp_avg/<t> and exp_avg_sq/<t>
 *                    (adamw, lamb) or momentum/<t> (sgd, lars)
 * Nothing else is state: the data rows and the weight init are pure
 * functions of (seed, stream, index) (there is no dropout and no other RNG),
 * the LR is a function of the iteration and the skipped steps, evaluation
 * always reads validation batches 0..eval_iters-1, gradients are zero
 * between steps, and the half compute copies are rebuilt at every forward. */

enum { DT__CK_REPLICA = 0, DT__CK_ZERO, DT__CK_STAGE, DT__CK_PS_WORKER, DT__CK_PS_SERVER };
static const char *const dt__ck_roles[] = {"replica", "zero-1 segment", "pipeline/tensor stage",
                                           "parameter-server worker", "parameter server"};

static int dt__ck_role(const dt_trainer *tr)
{
    if (tr->ps) return dt__ps_is_server(tr->ps) ? DT__CK_PS_SERVER : DT__CK_PS_WORKER;
    if (tr->pipe) return DT__CK_STAGE;
    if (tr->zero) return DT__CK_ZERO;
    return DT__CK_REPLICA;
}

static dt_status dt__validate_checkpoint(const dt_train_config *cfg)
{
    if (cfg->save_dir && !cfg->save_dir[0]) return DT_FAIL(DT_ERR_INVALID, "--save '': expected a directory");
    if (cfg->load_dir && !cfg->load_dir[0]) return DT_FAIL(DT_ERR_INVALID, "--load '': expected a directory");
    if (cfg->save_dir && cfg->save_interval < 1)
        return DT_FAIL(DT_ERR_INVALID, "--save-interval %lld: expected an integer >= 1", (long long)cfg->save_interval);
    if (cfg->save_keep < 0)
        return DT_FAIL(DT_ERR_INVALID, "--save-keep %d: expected an integer >= 0 (0: keep every checkpoint)",
                       cfg->save_keep);
    const int pipe = cfg->pipeline_size > 1 || cfg->tensor_size > 1;
    if (pipe && (cfg->save_dir || cfg->load_dir) &&
        (cfg->pipeline_schedule == DT_SCHED_PIPEDREAM || cfg->pipeline_schedule == DT_SCHED_PIPEDREAM_VSYNC))
        return DT_FAIL(DT_ERR_INVALID, "--%s with --pipeline-schedule %s: not supported: its stages keep "
                                       "micro-batches and stashed weight versions in flight across step boundaries, "
                                       "which a checkpoint of whole steps cannot hold (use gpipe or 1f1b)",
                       cfg->save_dir ? "save" : "load", dt_sched_kind_name(cfg->pipeline_schedule));
    return DT_OK;
}

/* Records prefix<tensor> of a flat buffer in backend memory, one per tensor of L. */
static dt_status dt__ck_put_tensors(dt_checkpoint_shard *s, dt_backend *be, const char *prefix, const dt_paramset *L,
                                    const float *buf)
{
    char name[DT_CHECKPOINT_NAME_MAX + 1];
    for (int i = 0; i < L->count; i++) {
        const dt_param_info *p = &L->info[i];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        void *copy = NULL;
        DT_CHECK(dt_checkpoint_shard_add(s, name, DT_CKPT_F32, NULL, p->numel, &copy));
        if (p->numel) DT_CHECK(be->copy(be, copy, buf + p->offset, p->numel * sizeof(float), DT_COPY_D2H));
    }
    return DT_OK;
}

static dt_status dt__ck_get_tensors(const dt_checkpoint_shard *s, dt_backend *be, const char *prefix,
                                    const dt_paramset *L, float *buf)
{
    char name[DT_CHECKPOINT_NAME_MAX + 1];
    for (int i = 0; i < L->count; i++) {
        const dt_param_info *p = &L->info[i];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        const void *data = NULL;
        DT_CHECK(dt_checkpoint_shard_find(s, name, DT_CKPT_F32, p->numel, &data));
        if (buf && p->numel) DT_CHECK(be->copy(be, buf + p->offset, data, p->numel * sizeof(float), DT_COPY_H2D));
    }
    return DT_OK;
}

static int dt__ck_adam(const dt_optim *o) { return o->cfg.kind == DT_OPTIM_ADAMW || o->cfg.kind == DT_OPTIM_LAMB; }

static dt_status dt__ck_put_optim(dt_checkpoint_shard *s, const dt_optim *o)
{
    const int64_t step = o->step;
    DT_CHECK(dt_checkpoint_shard_add(s, "optim.step", DT_CKPT_I64, &step, 1, NULL));
    DT_CHECK(dt__ck_put_tensors(s, o->be, dt__ck_adam(o) ? "exp_avg/" : "momentum/", o->layout, o->state1.data));
    if (dt__ck_adam(o)) DT_CHECK(dt__ck_put_tensors(s, o->be, "exp_avg_sq/", o->layout, o->state2.data));
    return DT_OK;
}

/* With apply 0 only check that the records are there with the right sizes. */
static dt_status dt__ck_get_optim(const dt_checkpoint_shard *s, dt_optim *o, int apply)
{
    const void *step = NULL;
    DT_CHECK(dt_checkpoint_shard_find(s, "optim.step", DT_CKPT_I64, 1, &step));
    DT_CHECK(dt__ck_get_tensors(s, o->be, dt__ck_adam(o) ? "exp_avg/" : "momentum/", o->layout,
                                apply ? o->state1.data : NULL));
    if (dt__ck_adam(o))
        DT_CHECK(dt__ck_get_tensors(s, o->be, "exp_avg_sq/", o->layout, apply ? o->state2.data : NULL));
    if (apply) memcpy(&o->step, step, sizeof o->step);
    return DT_OK;
}

static dt_status dt__ck_put_scaler(dt_checkpoint_shard *s, const dt_loss_scaler *sc)
{
    uint32_t bits;
    memcpy(&bits, &sc->scale, sizeof bits);
    const int64_t v[9] = {bits, sc->hysteresis, sc->good_steps, sc->steps, sc->overflows, sc->skipped, sc->growths,
                          sc->backoffs, sc->min_overflows};
    return dt_checkpoint_shard_add(s, "loss_scaler", DT_CKPT_I64, v, 9, NULL);
}

static dt_status dt__ck_get_scaler(const dt_checkpoint_shard *s, dt_loss_scaler *sc)
{
    const void *p = NULL;
    DT_CHECK(dt_checkpoint_shard_find(s, "loss_scaler", DT_CKPT_I64, 9, &p));
    int64_t v[9];
    memcpy(v, p, sizeof v);
    const uint32_t bits = (uint32_t)v[0];
    memcpy(&sc->scale, &bits, sizeof bits);
    sc->hysteresis = (int)v[1];
    sc->good_steps = v[2], sc->steps = v[3], sc->overflows = v[4], sc->skipped = v[5];
    sc->growths = v[6], sc->backoffs = v[7], sc->min_overflows = v[8];
    return DT_OK;
}

/* Micro-batches of one step over every rank, and the data position of iteration it. */
static int64_t dt__ck_micro_per_step(const dt_trainer *tr) { return (int64_t)tr->n_micro * tr->dp_size; }

/* This rank's shard at iteration `iteration` (a server: its version too). */
static dt_status dt__ck_fill(dt_trainer *tr, dt_checkpoint_shard *s, int role, int64_t iteration, int64_t version)
{
    const int64_t t[5] = {iteration, role, iteration * dt__ck_micro_per_step(tr), dt__ck_micro_per_step(tr),
                          tr->nf_skipped};
    DT_CHECK(dt_checkpoint_shard_add(s, "trainer", DT_CKPT_I64, t, 5, NULL));
    const dt_loss_scaler *sc = role == DT__CK_PS_SERVER ? dt__ps_server_scaler(tr->ps) : &tr->scaler;
    if (tr->cfg.use_loss_scaling) DT_CHECK(dt__ck_put_scaler(s, sc));
    switch (role) {
    case DT__CK_REPLICA:
        DT_CHECK(dt__ck_put_tensors(s, tr->be, "param/", dt__tr_layout(tr), dt__tr_params(tr)));
        if (tr->mlp) DT_CHECK(dt__ck_put_tensors(s, tr->be, "state/", dt_mlp_state_layout(tr->mlp), dt_mlp_state(tr->mlp)));
        return dt__ck_put_optim(s, &tr->opt);
    case DT__CK_ZERO: {
        size_t lo, len;
        dt__zero_shard(tr->zero, &lo, &len);
        float *m = dt__zero_master_data(tr->zero);
        DT_CHECK(dt__ck_put_tensors(s, tr->be, m ? "master/" : "param/", dt__zero_layout(tr->zero),
                                    m ? m : dt__tr_params(tr) + lo));
        return dt__ck_put_optim(s, dt__zero_optimizer(tr->zero));
    }
    case DT__CK_STAGE:
        DT_CHECK(dt__pipe_boundary(tr->pipe, tr->iter));
        DT_CHECK(dt__ck_put_tensors(s, tr->be, "param/", dt__pipe_layout(tr->pipe), dt__pipe_params(tr->pipe)));
        return dt__ck_put_optim(s, dt__pipe_optimizer(tr->pipe));
    case DT__CK_PS_SERVER: {
        DT_CHECK(dt_checkpoint_shard_add(s, "ps.version", DT_CKPT_I64, &version, 1, NULL));
        const dt_optim *o = dt__ps_server_optim(tr->ps);
        if (!o) return DT_FAIL(DT_ERR_INVALID, "parameter server: a checkpoint before serving began");
        DT_CHECK(dt__ck_put_tensors(s, tr->be, "param/", dt__ps_server_layout(tr->ps), dt__ps_server_params(tr->ps)));
        return dt__ck_put_optim(s, o);
    }
    default: return DT_OK; /* a worker: trainer and scaler only */
    }
}

/* The manifest's layout object. */
static char *dt__ck_layout_json(const dt_trainer *tr)
{
    const dt_train_config *c = &tr->cfg;
    const int world = c->comm ? c->comm->size : 1;
    const int role = dt__ck_role(tr);
    const char *kind = tr->ps       ? (c->ps_mode == DT_PS_SYNC ? "parameter server (ps-sync)" : "parameter server (ps-async)")
                       : tr->pipe   ? "pipeline/tensor parallel"
                       : tr->zero   ? "zero-1"
                       : world > 1 ? "data parallel"
                                    : "single process";
    json_t *o = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:b, s:s, s:s}", "kind", kind, "world_size", world,
                          "data_parallel_size", tr->dp_size, "tensor_model_parallel_size", c->tensor_size,
                          "pipeline_model_parallel_size", c->pipeline_size, "num_ps_servers",
                          tr->ps ? c->num_ps_servers : 0, "use_distributed_optimizer", tr->zero != NULL,
                          "rank_0_role", dt__ck_roles[role],
                          "shards", tr->ps ? "servers: their shard's weights and optimizer; workers: iteration and "
                                             "scaler"
                                   : tr->pipe ? "each rank: its stage's (tensor shard's) weights and optimizer"
                                   : tr->zero ? "each rank: its segment's weights (masters) and optimizer"
                                              : "each rank: the whole model and optimizer (replicas are equal)");
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

static void dt__ck_set(char **dst, const char *s)
{
    free(*dst);
    *dst = strdup(s ? s : "");
}

dt_status dt_trainer_save(dt_trainer *tr, const char *dir)
{
    if (!dir || !dir[0]) return DT_FAIL(DT_ERR_INVALID, "--save '': expected a directory");
    const int role = dt__ck_role(tr);
    const int world = tr->cfg.comm ? tr->cfg.comm->size : 1;
    int64_t iteration = tr->iter, version = 0;
    if (tr->ps) { /* the servers save when asked: the same directory everywhere */
        if (!tr->save_dir || strcmp(dir, tr->save_dir) != 0)
            return DT_FAIL(DT_ERR_INVALID, "--save %s: with a parameter server the checkpoint directory is the "
                                           "configuration's (--save %s), which the servers use",
                           dir, tr->save_dir ? tr->save_dir : "not given");
        if (role == DT__CK_PS_WORKER) {
            DT_CHECK(dt__ps_ensure_pulled(tr));
            if (!dt__ps_finished(tr->ps)) {
                dt_status st = dt__ps_save_round(tr->ps, dt__tr_params(tr));
                if (st != DT_OK) {
                    tr->ps_broken = 1;
                    return st;
                }
            }
        } else {
            version = dt__ps_server_version(tr->ps);
            iteration = tr->cfg.ps_mode == DT_PS_ASYNC ? version / dt__ps_num_workers(tr->ps) : version;
        }
    }
    dt_checkpoint_shard s;
    dt_checkpoint_shard_init(&s, tr->cfg.comm ? tr->cfg.comm->rank : 0, world, iteration);
    dt_status local = dt__ck_fill(tr, &s, role, iteration, version);
    char *cj = local == DT_OK ? dt_train_config_json(&tr->cfg) : NULL;
    char *lj = local == DT_OK ? dt__ck_layout_json(tr) : NULL;
    if (local == DT_OK && (!cj || !lj)) local = DT_FAIL(DT_ERR_NOMEM, "--save %s: out of memory", dir);
    const dt_checkpoint_save a = {.dir = dir,
                                  .iteration = iteration,
                                  .comm = tr->cfg.comm,
                                  .shard = &s,
                                  .layout_json = lj,
                                  .config_json = cj,
                                  .keep = tr->cfg.save_keep,
                                  .local_status = local};
    char path[4200];
    dt_status st = dt_checkpoint_write(&a, path, sizeof path);
    dt_checkpoint_shard_free(&s);
    free(cj);
    free(lj);
    DT_CHECK(st);
    tr->last_save = role == DT__CK_PS_SERVER ? version : iteration;
    dt__ck_set(&tr->ck_saved, path);
    return DT_OK;
}

/* Configuration keys a resumed run may change: they do not touch the state. */
static const char *const dt__ck_may_change[] = {"train_iters",  "log_interval", "eval_interval",  "eval_iters",
                                                "trace",        "threads",      "device",         "comm_timeout",
                                                "skip_nonfinite", "allreduce_chunk_bytes", "bucket_bytes", NULL};

static char *dt__ck_value_text(json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | DT__JSON_PRECISION);
}

/* The checkpoint's configuration (JSON text) against this run's: the first
 * key that differs, named with both values. */
static dt_status dt__ck_config_check(const char *path, const char *saved, const dt_train_config *cfg)
{
    json_error_t err;
    json_t *a = json_loads(saved, 0, &err), *b = dt__config_object(cfg);
    dt_status st = DT_OK;
    if (!a || !b) {
        st = !a ? DT_FAIL(DT_ERR_FORMAT, "%s: the manifest's config does not parse (%s)", path, err.text)
                : DT_FAIL(DT_ERR_NOMEM, "--load: out of memory");
        goto done;
    }
    for (int pass = 0; pass < 2 && st == DT_OK; pass++) {
        json_t *x = pass ? b : a, *y = pass ? a : b;
        const char *key;
        json_t *v;
        json_object_foreach(x, key, v)
        {
            int allowed = 0;
            for (int i = 0; dt__ck_may_change[i]; i++) allowed |= !strcmp(key, dt__ck_may_change[i]);
            allowed |= !strcmp(key, "model"); /* the preset's name: a label, the sizes are compared one by one */
            if (allowed) continue;
            json_t *w = json_object_get(y, key);
            if (!w) {
                st = DT_FAIL(DT_ERR_INVALID, "%s: model, layout or optimizer differ from this run's: %s is %s "
                                             "configuration only",
                             path, key, pass ? "this run's" : "the checkpoint's");
                break;
            }
            char *sv = dt__ck_value_text(pass ? w : v), *sw = dt__ck_value_text(pass ? v : w);
            if (sv && sw && strcmp(sv, sw) != 0)
                st = DT_FAIL(DT_ERR_INVALID, "%s: model, layout or optimizer differ from this run's: %s %s vs %s "
                                             "(checkpoint vs this run; only train_iters, the log and eval settings, "
                                             "trace, threads, device and communication tuning may change)",
                             path, key, sv, sw);
            free(sv);
            free(sw);
            if (st != DT_OK) break;
        }
    }
done:
    json_decref(a);
    json_decref(b);
    return st;
}

/* Every rank of the world learns whether any failed; a rank that did not
 * keeps its own message, the others get one naming the first that did. */
static dt_status dt__ck_agree(dt_trainer *tr, dt_status mine, const char *what)
{
    dt_comm *c = tr->cfg.comm;
    if (!c || c->size == 1) return mine;
    float *f = calloc((size_t)c->size, sizeof *f);
    if (!f) return DT_FAIL(DT_ERR_NOMEM, "checkpoint: out of memory");
    f[c->rank] = mine != DT_OK ? 1.0f : 0.0f;
    dt_status st = dt_comm_allreduce(c, f, (size_t)c->size, DT_ALLREDUCE_RING, NULL);
    int bad = -1;
    for (int r = 0; st == DT_OK && r < c->size && bad < 0; r++)
        if (f[r] != 0.0f) bad = r;
    free(f);
    if (mine != DT_OK) return mine;
    DT_CHECK(st);
    if (bad >= 0) return DT_FAIL(DT_ERR_INVALID, "%s: rank %d failed (its message is on its stderr)", what, bad);
    return DT_OK;
}

/* This rank's part of the load, local only: check everything, restore
 * what is local. */
static dt_status dt__ck_load_local(dt_trainer *tr, const char *dir, char *path, size_t cap, char *note, size_t ncap)
{
    const int world = tr->cfg.comm ? tr->cfg.comm->size : 1, rank = tr->cfg.comm ? tr->cfg.comm->rank : 0;
    const int role = dt__ck_role(tr);
    dt_checkpoint_manifest m;
    DT_CHECK(dt_checkpoint_find_latest(dir, path, cap, note, ncap, &m));
    dt_status st = DT_OK;
    dt_checkpoint_shard s;
    memset(&s, 0, sizeof s);
    if (m.world_size != world) {
        st = DT_FAIL(DT_ERR_INVALID, "%s: %d shards (a world of %d ranks), this run has %d rank%s: the shard count "
                                     "differs from the world",
                     path, m.world_size, m.world_size, world, world == 1 ? "" : "s");
        goto done;
    }
    DT_CHECK_GOTO(dt__ck_config_check(path, m.config_json, &tr->cfg), st, done);
    DT_CHECK_GOTO(dt_checkpoint_read_shard(&m, rank, &s), st, done);
    const void *tp = NULL;
    DT_CHECK_GOTO(dt_checkpoint_shard_find(&s, "trainer", DT_CKPT_I64, 5, &tp), st, done);
    int64_t t[5];
    memcpy(t, tp, sizeof t);
    const int64_t it = m.iteration;
    if (t[0] != it || t[1] != role || t[3] != dt__ck_micro_per_step(tr) || t[2] != it * t[3]) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: the shard is a %s at iteration %lld (data position %lld, %lld micro-batches "
                                    "per step); this rank is a %s at %lld (%lld micro-batches per step)",
                     s.path, t[1] >= 0 && t[1] <= 4 ? dt__ck_roles[t[1]] : "?", (long long)t[0], (long long)t[2],
                     (long long)t[3], dt__ck_roles[role], (long long)it, (long long)dt__ck_micro_per_step(tr));
        goto done;
    }
    if (it > tr->cfg.train_iters && role != DT__CK_PS_SERVER) {
        st = DT_FAIL(DT_ERR_INVALID, "%s: saved at iteration %lld, beyond this run's --train-iters %lld", path,
                     (long long)it, (long long)tr->cfg.train_iters);
        goto done;
    }
    if (tr->cfg.use_loss_scaling && role != DT__CK_PS_SERVER) DT_CHECK_GOTO(dt__ck_get_scaler(&s, &tr->scaler), st, done);
    switch (role) {
    case DT__CK_REPLICA:
        DT_CHECK_GOTO(dt__ck_get_tensors(&s, tr->be, "param/", dt__tr_layout(tr), dt__tr_params(tr)), st, done);
        if (tr->mlp)
            DT_CHECK_GOTO(dt__ck_get_tensors(&s, tr->be, "state/", dt_mlp_state_layout(tr->mlp), dt_mlp_state(tr->mlp)),
                          st, done);
        DT_CHECK_GOTO(dt__ck_get_optim(&s, &tr->opt, 1), st, done);
        break;
    case DT__CK_ZERO: {
        size_t lo, len;
        dt__zero_shard(tr->zero, &lo, &len);
        float *mw = dt__zero_master_data(tr->zero);
        DT_CHECK_GOTO(dt__ck_get_tensors(&s, tr->be, mw ? "master/" : "param/", dt__zero_layout(tr->zero),
                                         mw ? mw : dt__tr_params(tr) + lo),
                      st, done);
        DT_CHECK_GOTO(dt__ck_get_optim(&s, dt__zero_optimizer(tr->zero), 1), st, done);
        break;
    }
    case DT__CK_STAGE:
        DT_CHECK_GOTO(dt__ck_get_tensors(&s, tr->be, "param/", dt__pipe_layout(tr->pipe), dt__pipe_params(tr->pipe)),
                      st, done);
        DT_CHECK_GOTO(dt__ck_get_optim(&s, dt__pipe_optimizer(tr->pipe), 1), st, done);
        DT_CHECK_GOTO(dt__pipe_seek(tr->pipe, it), st, done);
        break;
    case DT__CK_PS_SERVER: { /* checked now, applied when serving starts (dt__ck_ps_restore) */
        const void *vp = NULL;
        DT_CHECK_GOTO(dt_checkpoint_shard_find(&s, "ps.version", DT_CKPT_I64, 1, &vp), st, done);
        int64_t v;
        memcpy(&v, vp, sizeof v);
        const int64_t want = tr->cfg.ps_mode == DT_PS_ASYNC ? it * dt__ps_num_workers(tr->ps) : it;
        if (v != want) {
            st = DT_FAIL(DT_ERR_FORMAT, "%s: server version %lld, expected %lld at iteration %lld", s.path,
                         (long long)v, (long long)want, (long long)it);
            goto done;
        }
        if (tr->cfg.use_loss_scaling) {
            dt_loss_scaler probe;
            DT_CHECK_GOTO(dt__ck_get_scaler(&s, &probe), st, done);
        }
        int t_lo, t_hi;
        dt__ps_server_tensors(tr->ps, &t_lo, &t_hi);
        const dt_paramset *L = dt__tr_layout(tr);
        dt_paramset sub = {.info = L->info + t_lo, .count = t_hi - t_lo};
        DT_CHECK_GOTO(dt__ck_get_tensors(&s, tr->be, "param/", &sub, NULL), st, done);
        dt_optim probe = {.cfg = tr->cfg.optim, .be = tr->be, .layout = &sub};
        DT_CHECK_GOTO(dt__ck_get_optim(&s, &probe, 0), st, done);
        tr->ps_resume = malloc(sizeof *tr->ps_resume);
        if (!tr->ps_resume) {
            st = DT_FAIL(DT_ERR_NOMEM, "--load: out of memory");
            goto done;
        }
        *tr->ps_resume = s; /* moved */
        memset(&s, 0, sizeof s);
        tr->ps_start_version = v;
        tr->last_save = v;
        break;
    }
    default: break;
    }
    tr->iter = role == DT__CK_PS_SERVER ? 0 : it;
    if (role != DT__CK_PS_SERVER) tr->last_save = it;
    tr->nf_skipped = t[4];
done:
    dt_checkpoint_shard_free(&s);
    dt_checkpoint_manifest_free(&m);
    return st;
}

dt_status dt_trainer_load(dt_trainer *tr, const char *dir)
{
    if (tr->iter != 0 || tr->ps_pulled || tr->ps_resume)
        return DT_FAIL(DT_ERR_INVALID, "--load %s: load right after creating the trainer, before any step", dir);
    char path[4200] = "", note[2048] = "";
    dt_status mine = dt__ck_load_local(tr, dir, path, sizeof path, note, sizeof note);
    char what[4300];
    snprintf(what, sizeof what, "--load %s", dir);
    dt_status st = dt__ck_agree(tr, mine, what);
    if (st != DT_OK) {
        tr->ps_broken = 1; /* every rank fails: no server will serve, so no worker may wait for one */
        return st;
    }
    /* every rank has its part: the ZeRO segments to everyone */
    if (tr->zero) DT_CHECK(dt__zero_restored(tr->zero, dt__tr_params(tr)));
    dt__ck_set(&tr->ck_loaded, path);
    dt__ck_set(&tr->ck_note, note);
    return DT_OK;
}

const char *dt_trainer_loaded_path(const dt_trainer *tr) { return tr->ck_loaded; }
const char *dt_trainer_load_note(const dt_trainer *tr) { return tr->ck_note ? tr->ck_note : ""; }
const char *dt_trainer_saved_path(const dt_trainer *tr) { return tr->ck_saved; }

/* A parameter server starts serving: its loaded shard into the buffers. */
static dt_status dt__ck_ps_restore(void *ctx, dt__ps *ps)
{
    dt_trainer *tr = ctx;
    dt_checkpoint_shard *s = tr->ps_resume;
    dt_status st = dt__ck_get_tensors(s, tr->be, "param/", dt__ps_server_layout(ps), dt__ps_server_params(ps));
    if (st == DT_OK) st = dt__ck_get_optim(s, dt__ps_server_optim(ps), 1);
    if (st == DT_OK && tr->cfg.use_loss_scaling) st = dt__ck_get_scaler(s, dt__ps_server_scaler(ps));
    dt_checkpoint_shard_free(s);
    free(s);
    tr->ps_resume = NULL;
    return st;
}

/* Every worker asked for a checkpoint (lib/ps.c calls this between updates). */
static dt_status dt__ck_ps_save(void *ctx, dt__ps *ps, int64_t version)
{
    (void)ps, (void)version;
    dt_trainer *tr = ctx;
    return dt_trainer_save(tr, tr->save_dir);
}

/* A worker's first pull of the servers' weights, on first use. */
static dt_status dt__ps_ensure_pulled(dt_trainer *tr)
{
    if (!tr->ps || dt__ps_is_server(tr->ps) || tr->ps_pulled) return DT_OK;
    tr->ps_pulled = 1;
    dt_status st = dt__ps_pull_initial(tr->ps, dt__tr_params(tr));
    if (st != DT_OK) tr->ps_broken = 1;
    return st;
}
