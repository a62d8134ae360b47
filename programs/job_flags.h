/* job_flags.h: the job flags dtrain and dtsim share, defined once.
 *
 * A training job is described by the same Megatron-LM style flags in both
 * programs (--num-layers, --micro-batch-size, --fp16, --allreduce, ...).
 * Their names, kinds, destinations (a field of job_opts), ranges and help
 * live in one table (job_flags.c); where the two programs word a flag's
 * help or bound it differently, the entry says so for each program. A
 * program builds its own dt_arg table (args.h) from these entries, in the
 * order and sections of its --help, and adds only its own flags.
 *
 * dtbench's flags of the same names are its benchmarks' own (other ranges
 * and meanings, "train: ..." help) and stay in its table. */
#ifndef DT_JOB_FLAGS_H
#define DT_JOB_FLAGS_H

#include <stdint.h>

#include "args.h"

/* The program whose wording and bounds an entry takes. */
typedef enum job_prog { JOB_DTRAIN = 0, JOB_DTSIM, JOB_N_PROGS } job_prog;

/* dtsim's --pipeline-model-parallel-size bound; dtsim.c checks that it is
 * the simulator's DTS_MAX_STAGES. */
#define JOB_FLAGS_SIM_MAX_STAGES 1024

/* Where the shared flags' values go; each program fills in the defaults. */
typedef struct job_opts {
    /* model */
    const char *model;
    int num_layers, hidden_size, num_heads, max_pos, seq_length;
    int untie_embeddings, tie_embeddings; /* --untie-/--tie-embeddings-and-output-weights */
    /* batch and schedule */
    int micro_batch, global_batch;
    int64_t train_iters;
    uint64_t seed;
    const char *optimizer;
    /* mixed precision */
    int fp16, bf16, loss_scale_window, hysteresis;
    const char *fp8_format, *fp8_recipe, *fp8_amax_algo; /* --fp8-*: NULL not given */
    int fp8_margin, fp8_history_len;
    float loss_scale, initial_loss_scale, min_loss_scale;
    /* memory */
    int recompute_on;
    const char *recompute_granularity;
    int recompute_num_layers; /* K of full recomputation */
    /* parallelism */
    int tensor_size, pipeline_size;
    int no_vocab_parallel, no_scatter_gather; /* --no-vocab-parallel, --no-scatter-gather-tensors-in-pipeline */
    int sequence_parallel;                    /* --sequence-parallel */
    int context_size;                         /* --context-parallel-size (0: not given) */
    const char *cp_comm_type;                 /* --cp-comm-type */
    const char *pipeline_schedule, *pipeline_split, *allreduce, *slow_rank;
    int virtual_pipeline_size, layers_per_virtual_stage; /* 0: not given */
    int num_ps_servers, distributed_optimizer, zero_stage, zero_prefetch;
    double bucket_mb;
    int64_t allreduce_chunk_bytes;
    /* output */
    const char *trace, *summary;
    int help, version;
} job_opts;

typedef enum job_flag_id {
    JF_MODEL = 0,
    JF_NUM_LAYERS,
    JF_HIDDEN_SIZE,
    JF_NUM_ATTENTION_HEADS,
    JF_MAX_POSITION_EMBEDDINGS,
    JF_SEQ_LENGTH,
    JF_UNTIE_EMBEDDINGS,
    JF_TIE_EMBEDDINGS,
    JF_MICRO_BATCH_SIZE,
    JF_GLOBAL_BATCH_SIZE,
    JF_TRAIN_ITERS,
    JF_SEED,
    JF_OPTIMIZER,
    JF_FP16,
    JF_BF16,
    JF_FP8_FORMAT,
    JF_FP8_RECIPE,
    JF_FP8_MARGIN,
    JF_FP8_AMAX_HISTORY_LEN,
    JF_FP8_AMAX_COMPUTE_ALGO,
    JF_LOSS_SCALE,
    JF_INITIAL_LOSS_SCALE,
    JF_LOSS_SCALE_WINDOW,
    JF_HYSTERESIS,
    JF_MIN_LOSS_SCALE,
    JF_RECOMPUTE_ACTIVATIONS,
    JF_RECOMPUTE_GRANULARITY,
    JF_RECOMPUTE_NUM_LAYERS,
    JF_TENSOR_MODEL_PARALLEL_SIZE,
    JF_NO_VOCAB_PARALLEL,
    JF_SEQUENCE_PARALLEL,
    JF_CONTEXT_PARALLEL_SIZE,
    JF_CP_COMM_TYPE,
    JF_NO_SCATTER_GATHER,
    JF_PIPELINE_MODEL_PARALLEL_SIZE,
    JF_PIPELINE_SCHEDULE,
    JF_PIPELINE_SPLIT,
    JF_VIRTUAL_PIPELINE_MODEL_PARALLEL_SIZE,
    JF_NUM_LAYERS_PER_VIRTUAL_PIPELINE_STAGE,
    JF_ALLREDUCE,
    JF_NUM_PS_SERVERS,
    JF_USE_DISTRIBUTED_OPTIMIZER,
    JF_ZERO_STAGE,
    JF_ZERO_PREFETCH,
    JF_BUCKET_SIZE_MB,
    JF_ALLREDUCE_CHUNK_BYTES,
    JF_SLOW_RANK,
    JF_TRACE,
    JF_SUMMARY,
    JF_HELP,
    JF_VERSION,
    JF_COUNT
} job_flag_id;

/* The table entry of flag id as prog words it, its destination in o. */
dt_arg job_flag(job_prog prog, job_opts *o, job_flag_id id);

/* The LM head's tie: the preset's (preset_tie), unless --untie- or
 * --tie-embeddings-and-output-weights says otherwise; -1 when both are
 * given (the one line is printed to stderr, prefixed with prog). */
int job_tie_embeddings(const job_opts *o, const char *prog, int preset_tie);

/* A --help heading, for the programs' tables. */
#define JOB_SECTION(heading) ((dt_arg){.name = (heading), .kind = DT_ARG_SECTION})

#endif
