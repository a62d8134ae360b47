/* dt_train.h: the single-process trainer: model + data + optimizer + LR
 * schedule + trace, one optimizer step at a time. The dtrain program parses
 * flags into a dt_train_config and drives this; tests drive it directly.
 *
 * One step = N = global_batch_size / micro_batch_size micro-batches
 * (gradient accumulation), then gradient-norm clipping and one optimizer
 * step. Each micro-batch's mean loss is weighted by its share of the step's
 * counted targets (1/N when every micro-batch counts as many), so the
 * accumulated gradient equals that of one batch of global_batch_size. */
#ifndef DT_TRAIN_H
#define DT_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "dt_data.h"
#include "dt_blobs.h"
#include "dt_comm.h"
#include "dt_gpt.h"
#include "dt_loss_scaler.h"
#include "dt_mlp.h"
#include "dt_optim.h"
#include "dt_schedule.h"
#include "dt_fp8.h"
#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Learning-rate scaling when the global batch grows (Goyal et al. 2017: the
 * linear scaling rule; sqrt is common for Adam-like optimizers): the peak
 * and minimum LR are multiplied by global/base (linear) or its square root
 * (sqrt); warm-up then ramps to the scaled peak. */
typedef enum dt_lr_scaling { DT_LR_SCALING_NONE = 0, DT_LR_SCALING_LINEAR, DT_LR_SCALING_SQRT } dt_lr_scaling;
/* "none", "linear" or "sqrt" */
DT_API dt_status dt_lr_scaling_parse(const char *s, dt_lr_scaling *out);
/* The factor applied to the LR for a global batch against a base batch. */
DT_API double dt_lr_scaling_factor(dt_lr_scaling s, int global_batch, int base_batch);

/* Data parallelism through a parameter server instead of an allreduce
 * (--allreduce ps-sync / ps-async; docs/parallelism.md). */
typedef enum dt_ps_mode { DT_PS_NONE = 0, DT_PS_SYNC, DT_PS_ASYNC } dt_ps_mode;
/* "ps-sync" or "ps-async"; DT_ERR_INVALID for anything else (no message
 * kept: --allreduce also accepts the collective algorithms). */
DT_API dt_status dt_ps_mode_parse(const char *s, dt_ps_mode *out);

/* Which model the trainer builds: the GPT on byte data, or the mlp-bn
 * classifier on the blobs task (for BatchNorm with gradient accumulation). */
typedef enum dt_model_kind { DT_MODEL_GPT = 0, DT_MODEL_MLP_BN } dt_model_kind;

/* --cp-comm-type: how context parallelism's attention gets the other
 * ranks' keys and values (lib/parallel/cp.h) */
typedef enum dt_cp_comm { DT_CP_P2P = 0, DT_CP_A2A, DT_CP_ALLGATHER } dt_cp_comm;
/* "p2p", "a2a", "allgather" */
DT_API dt_status dt_cp_comm_parse(const char *s, dt_cp_comm *out);
DT_API const char *dt_cp_comm_name(dt_cp_comm c);

typedef struct dt_train_config {
    dt_model_kind model_kind;
    dt_mlp_config mlp;      /* mlp-bn sizes; input_dim and num_classes come from blobs */
    dt_blobs_config blobs;  /* --task blobs */
    int bn_momentum_adjust; /* mlp-bn: per-micro-batch momentum 1-(1-m)^(1/N) */
    char model_name[32];    /* preset name the sizes came from ("custom" otherwise) */
    dt_gpt_config model;    /* vocab_size is taken from the data */
    int seq_length;         /* T used for training (<= model.seq_len) */
    dt_data_config data;
    int micro_batch_size;
    int global_batch_size;
    int64_t train_iters;
    dt_optim_config optim;
    dt_lr_schedule lr; /* as given; the trainer applies lr_scaling to it */
    dt_lr_scaling lr_scaling;
    int base_batch_size;               /* the batch the given LR is for (lr_scaling); <= 0: the global batch */
    float clip_grad;                   /* <= 0: no clipping */
    dt_dtype precision;                /* DT_F32, or DT_F16 / DT_BF16 mixed precision (--fp16, --bf16; GPT only) */
    dt_loss_scaler_config loss_scaler; /* used when loss scaling is on (see use_loss_scaling) */
    int use_loss_scaling;              /* fp16: 1 by default (dynamic); bf16: only with a static --loss-scale */
    /* FP8 training (dt_fp8.h; --fp8-format, GPT only): the blocks' linear
     * layers' GEMMs on FP8 inputs, everything else as under bf16
     * (precision must be DT_BF16); DT_FP8_OFF: none */
    dt_fp8_mode fp8;
    dt_fp8_recipe fp8_recipe;         /* --fp8-recipe: delayed (default), tensorwise, blockwise */
    int fp8_margin;                   /* --fp8-margin: scales divided by 2^margin (default 0) */
    int fp8_amax_history_len;         /* --fp8-amax-history-len: delayed scaling's window (default 1024) */
    dt_fp8_amax_algo fp8_amax_algo;   /* --fp8-amax-compute-algo: max (default) or most_recent */
    dt_recompute recompute;            /* activation recomputation (dt_gpt.h) */
    int recompute_num_layers;          /* K for DT_RECOMPUTE_FULL */
    uint64_t seed;
    int threads;        /* <= 0: backend default */
    const char *device; /* "cpu" */
    int eval_iters;     /* global batches of the validation split per evaluation */
    /* Data parallelism: every rank of comm trains on its share of each
     * global batch and the gradients are summed with `allreduce`. NULL: one
     * process. The trainer does not own comm. */
    dt_comm *comm;
    dt_allreduce_algo allreduce;
    size_t allreduce_chunk_bytes; /* ring chunking (0: none) */
    size_t bucket_bytes;          /* gradient buckets, launched during the last backward (0: one, after it) */
    /* Parameter server (with comm): the last num_ps_servers ranks hold the
     * parameters and optimizer state in shards, the others are workers. */
    dt_ps_mode ps_mode;
    int num_ps_servers; /* K >= 1 with a ps mode; 0 otherwise */
    int max_staleness;  /* ps-async: bound on a push's staleness (< 0: none) */
    /* ZeRO-1 (--use-distributed-optimizer): the optimizer state sharded over
     * the data-parallel ranks (gradients reduce-scattered, each rank updates
     * its shard, weights all-gathered; docs/zero.md). */
    int use_distributed_optimizer;
    /* --zero-stage (DeepSpeed's names): 0 none; 1 as use_distributed_optimizer;
     * 2 also the gradients (each bucket reduce-scattered during every
     * micro-batch's backward into the rank's segment); 3 also the weights
     * (each layer all-gathered before its forward and its backward).
     * Stages 2 and 3: the GPT with data parallelism only (docs/zero.md). */
    int zero_stage;
    /* --zero-prefetch (stage 3): all-gather the next layer while one computes */
    int zero_prefetch;
    /* Pipeline parallelism (with comm): comm's ranks form size/p pipelines
     * of p stages (docs/pipeline.md); 1 turns it off. */
    int pipeline_size;               /* --pipeline-model-parallel-size p */
    int tensor_size;                 /* --tensor-model-parallel-size t: each block's heads and MLP split over t ranks */
    /* --no-vocab-parallel: with t > 1 the embedding and LM head stay whole
     * on every tensor rank (default: split by vocabulary rows, Megatron's
     * vocabulary-parallel embedding and cross-entropy; docs/tensor-parallel.md) */
    int no_vocab_parallel;
    /* --sequence-parallel: with tensor_size > 1, Megatron's sequence
     * parallelism (the per-token regions split along the tokens) */
    int sequence_parallel;
    /* --context-parallel-size c: each sequence split over c ranks (lib/parallel/cp.h) */
    int context_size;
    dt_cp_comm cp_comm_type; /* --cp-comm-type */
    /* --no-scatter-gather-tensors-in-pipeline (Megatron's): with t > 1 and
     * p > 1 each tensor rank sends its stage's whole activation (default:
     * 1/t each, all-gathered over the tensor group on arrival) */
    int no_scatter_gather;
    dt_sched_kind pipeline_schedule; /* --pipeline-schedule (default 1f1b) */
    int pipeline_split[64];          /* --pipeline-split: blocks per stage (all 0: even) */
    /* Model chunks per stage (interleaved-1f1b, zb-v): Megatron-LM's
     * --virtual-pipeline-model-parallel-size V or
     * --num-layers-per-virtual-pipeline-stage L (0: not given; the kind's
     * default, dt_sched_chunks_from_flags). */
    int virtual_pipeline_size, layers_per_virtual_stage;
    /* Testing and teaching: rank slow_rank sleeps slow_ms milliseconds
     * before each gradient exchange, a straggler (slow_ms 0: off). */
    int slow_rank, slow_ms;
    /* Testing faults: rank hang_rank sleeps for ever at the start of
     * iteration hang_iter (1-based; 0: off), a hung rank (docs/faults.md). */
    int hang_rank;
    int64_t hang_iter;
    /* Seconds a blocking wait on comm may take before the step fails with
     * DT_ERR_BACKEND naming the rank waited for (--comm-timeout; 0: wait for
     * ever). The trainer sets it on comm (dt_comm_set_timeout) and on every
     * communicator it makes. Default DT_COMM_TIMEOUT_DEFAULT. */
    double comm_timeout;
    /* FP32: a step whose loss or gradient norm is NaN/inf is skipped (no
     * update, counted in nonfinite_skipped) instead of failing the run
     * (--skip-nonfinite). Either way the first bad layer is named.
     * Rejected (DT_ERR_INVALID) with a parameter server, ZeRO and the
     * pipedream schedules, which update before the check (docs/faults.md). */
    int skip_nonfinite;
    const char *trace_path; /* NULL: no trace */
    /* A description of the emulated cluster the run is on (dtrain: the
     * environment variable DT_CLUSTER, as it is, UTF-8, at most 4096
     * bytes), recorded in the trace header and the summary for the
     * simulator to name; NULL: none. The trainer copies it. */
    const char *cluster;
    /* Used by drivers (dtrain), not by the trainer; recorded in the config
     * JSON so a summary says how the run was logged and evaluated. */
    int64_t log_interval;  /* iterations between log lines */
    int64_t eval_interval; /* iterations between evaluations; 0: only at the end */
    /* Checkpoints (docs/checkpoints.md): --save DIR --save-interval N
     * [--save-keep K], --load DIR. Drivers call dt_trainer_save and
     * dt_trainer_load with them; the trainer itself uses save_dir and
     * save_keep on a parameter server (the servers save when their workers
     * ask) and refuses pipedream schedules with either. Not in the config
     * JSON (a resumed run may save elsewhere). NULL: none. */
    const char *save_dir;
    int64_t save_interval; /* >= 1 with save_dir */
    int save_keep;         /* > 0: keep the newest K checkpoints; 0: all */
    const char *load_dir;
    /* --load-hf DIR: the initial weights are a Hugging Face GPT-2's
     * (dt_safetensors.h: config.json must describe cfg.model exactly,
     * model.safetensors holds the weights), read by every layout whole and
     * sharded as it loads; with load_dir too, the checkpoint's weights win
     * and DIR only names the model. In the config JSON as load_hf, a label
     * a resumed run may change. NULL: GPT-2's initialisation from seed. */
    const char *load_hf;
    /* --load with --data: resume even when the file's size or CRC32C
     * differs from what the checkpoint recorded (--allow-data-change);
     * 0: refuse. */
    int allow_data_change;
} dt_train_config;

/* Defaults for everything (tiny model on "add", tuned so that a plain run
 * learns the task on a laptop CPU in about a minute); callers then
 * override. String fields point to static strings; the trainer copies every
 * string it is given, so the caller's may be freed after create. */
DT_API void dt_train_config_default(dt_train_config *cfg);
/* Validate the whole configuration; messages name the offending flag. */
DT_API dt_status dt_train_config_validate(const dt_train_config *cfg);
/* The configuration as a compact JSON object text (caller frees with
 * free()); keys are the dtrain flag names with '_' for '-' (num_layers,
 * micro_batch_size, lr_decay_style, ...). NULL when out of memory. */
DT_API char *dt_train_config_json(const dt_train_config *cfg);

typedef struct dt_train_stats {
    int64_t iter; /* iterations completed, including this one */
    float loss;   /* mean training loss over the step's counted targets */
    /* the iteration (1-based) `loss` belongs to: iter, except under
     * --pipeline-schedule pipedream/pipedream-vsync, whose stages do not
     * wait for each other at a step's end: there rank 0 learns a step's
     * loss one step later (iter - 1; 0 after the first step: none yet),
     * and the last step's at the end; other ranks may know none (0). */
    int64_t loss_iter;
    float lr;         /* learning rate used */
    double grad_norm; /* before clipping */
    double step_seconds;
    double tokens_per_second;
    /* loss scaling (all 0 / 1 without it) */
    float loss_scale;            /* the scale this step used */
    int overflow;                /* a gradient or the loss was inf/NaN: the optimizer step was skipped */
    const char *overflow_tensor; /* first tensor, in backward order, with an inf/NaN gradient (or NULL) */
    /* NULL, or the loss was inf/NaN (fp16): where the forward first went
     * non-finite ("forward: the output of layer h.1 ... (micro-batch 0)") */
    const char *overflow_where;
    int scale_at_min;            /* overflow at the minimum scale with no hysteresis left */
    int scale_at_min_first;      /* ... for the first time in this run (say so once) */
    int64_t skipped_steps;       /* skipped so far in the run */
    /* --skip-nonfinite (FP32): this step's loss or gradient norm was NaN/inf
     * and it was skipped; nonfinite_where names the first bad layer (the
     * text of the message a run without the flag stops with). */
    int nonfinite;
    const char *nonfinite_where;
    int64_t nonfinite_skipped; /* so far in the run */
    /* parameter server (0 otherwise) */
    int64_t staleness; /* ps-async: updates the servers applied between this worker's pull and its push */
    int64_t version;   /* updates the servers have applied so far */
} dt_train_stats;

typedef struct dt_eval_result {
    float loss;      /* mean over the validation batches */
    double accuracy; /* exact match over complete examples; < 0 if the data has none */
    int n_examples;
} dt_eval_result;

typedef struct dt_trainer dt_trainer;

/* Validates cfg, then builds backend, data, model (initialised from
 * cfg->seed), optimizer and, with trace_path, the trace file. */
DT_API dt_status dt_trainer_create(const dt_train_config *cfg, dt_trainer **out);
/* Frees everything; an open trace is finished first (errors ignored: call
 * dt_trainer_finish to see them). */
DT_API void dt_trainer_free(dt_trainer *tr);
/* One optimizer step (iteration dt_trainer_iterations(tr), 0-based). With
 * a parameter server the step's last iteration (train_iters) also pulls the
 * servers' final weights. */
DT_API dt_status dt_trainer_step(dt_trainer *tr, dt_train_stats *out);
/* 1 on a parameter-server rank: it neither steps nor evaluates, it serves. */
DT_API int dt_trainer_is_server(const dt_trainer *tr);
/* On a parameter-server rank: serve the workers until they are all done. */
DT_API dt_status dt_trainer_serve(dt_trainer *tr);
/* Mean loss and exact-match accuracy over eval_iters validation batches
 * 0..eval_iters-1 (the same examples at every evaluation). */
DT_API dt_status dt_trainer_evaluate(dt_trainer *tr, dt_eval_result *out);
/* Finish and close the trace file (no-op without one); reports write errors. */
DT_API dt_status dt_trainer_finish(dt_trainer *tr);
DT_API dt_gpt *dt_trainer_model(dt_trainer *tr);
/* The learning-rate schedule in effect (after lr_scaling). */
DT_API const dt_lr_schedule *dt_trainer_lr_schedule(const dt_trainer *tr);
/* Peak activation bytes of the model (GPT or mlp-bn). */
DT_API size_t dt_trainer_peak_activation_bytes(const dt_trainer *tr);
/* The trainer's copy of the configuration: model.vocab_size filled from the
 * data and threads from the backend. */
DT_API const dt_train_config *dt_trainer_config(const dt_trainer *tr);
DT_API const dt_dataset *dt_trainer_data(const dt_trainer *tr);
DT_API int64_t dt_trainer_iterations(const dt_trainer *tr);
DT_API size_t dt_trainer_num_params(const dt_trainer *tr);
/* What opening tokenized --data did (dt_data_note), or NULL. */
DT_API const char *dt_trainer_data_note(const dt_trainer *tr);
/* Throughput over the run so far, excluding the first step (warm-up);
 * the first step's own when only one was taken; 0 before any. */
DT_API double dt_trainer_tokens_per_second(const dt_trainer *tr);
/* CPU threads the steps run on now: with --threads 0 in one process, the
 * automatic count's choice (thread_tune.c); else the backend's threads. */
DT_API int dt_trainer_workers(const dt_trainer *tr);
/* 1 where the automatic count chooses the workers, else 0. */
DT_API int dt_trainer_threads_automatic(const dt_trainer *tr);
/* 1 when the last failed step's message is every rank's word for word (a
 * non-finite loss or norm whose first bad layer the pipeline or tensor
 * parallel ranks agreed on): a program prints it once per job. */
DT_API int dt_trainer_failure_shared(const dt_trainer *tr);
/* Seconds since dt_trainer_create returned. */
DT_API double dt_trainer_elapsed_seconds(const dt_trainer *tr);
/* A parameter-server worker's staleness: the pushes, their mean and largest
 * staleness (updates the servers applied between the worker's last pull and
 * the push; 0 under ps-sync): this worker's during the run, every worker's
 * after dt_trainer_finish. DT_ERR_INVALID without a parameter server or on
 * a server rank. */
DT_API dt_status dt_trainer_staleness(const dt_trainer *tr, int64_t *pushes, double *mean, int64_t *max);
/* Write the JSON run summary with stable keys: train_loss (last step's, or
 * null), val_loss and accuracy (null without eval or without examples),
 * val_examples, tokens_per_second, peak_activation_bytes, iterations,
 * num_params, elapsed_seconds, nonfinite_skipped_steps (--skip-nonfinite),
 * parameter_server (null, or mode, workers,
 * servers, pushes and the staleness mean, max and histogram over every
 * worker's pushes), config (dt_train_config_json of the trainer's copy).
 * last and eval may be NULL. */
/* Checkpoints (docs/checkpoints.md, include/dt_checkpoint.h). Collective over
 * cfg.comm: every rank calls. dt_trainer_save writes DIR/iter_X (X the
 * iterations done) with one shard per rank: the model's weights (FP32
 * masters under --fp16/--bf16), the optimizer state and step, the loss
 * scaler, the iteration and data position; this rank's part of them under
 * ZeRO-1, pipeline and tensor parallelism, nothing but the iteration and
 * scaler on a parameter-server worker (its servers save their shards).
 * With a parameter server dir must be cfg.save_dir. Refused with pipedream
 * schedules (micro-batches in flight across steps).
 * dt_trainer_load, right after dt_trainer_create (a parameter server:
 * before dt_trainer_serve): the checkpoint dt_checkpoint_find_latest picks
 * for dir, verified, whose configuration must equal this run's except
 * train_iters, log/eval intervals, eval_iters, trace, threads, device,
 * comm_timeout, skip_nonfinite, the communication tuning and the testing
 * faults (slow_rank, slow_ms, hang_rank, hang_iter); then the next
 * step is the checkpoint's iteration + 1 and continues it exactly. On
 * failure the trainer is unusable: free it. */
DT_API dt_status dt_trainer_save(dt_trainer *tr, const char *dir);
DT_API dt_status dt_trainer_load(dt_trainer *tr, const char *dir);
/* After dt_trainer_load: the checkpoint directory loaded, and a one-line
 * note of what was skipped to reach it ("" when latest was valid). */
DT_API const char *dt_trainer_loaded_path(const dt_trainer *tr);
DT_API const char *dt_trainer_load_note(const dt_trainer *tr);
/* After dt_trainer_save: the directory written. */
DT_API const char *dt_trainer_saved_path(const dt_trainer *tr);
DT_API dt_status dt_trainer_write_summary(dt_trainer *tr, const char *path, const dt_train_stats *last,
                                          const dt_eval_result *eval);

#ifdef __cplusplus
}
#endif
#endif
