/* job_flags.c: the one table of the job flags dtrain and dtsim share (see
 * job_flags.h): name, kind, destination in job_opts, range, metavar and
 * help, with each program's own wording or bound where they differ. */
#include "job_flags.h"

#include <stddef.h>
#include <stdio.h>

typedef struct job_range {
    unsigned range;
    double min, max;
} job_range;

/* What one program says differently; NULL: the common field. */
typedef struct job_wording {
    const char *help, *default_text, *choices;
    const job_range *range;
} job_wording;

typedef struct job_flag_def {
    const char *name;
    dt_arg_kind kind;
    size_t offset; /* of the destination in job_opts */
    job_range range;
    const char *choices, *metavar, *help, *default_text;
    job_wording prog[JOB_N_PROGS];
} job_flag_def;

#define AT(field) offsetof(job_opts, field)
#define MIN1                 \
    {                        \
        DT_ARG_HAS_MIN, 1, 0 \
    }
#define MIN0                 \
    {                        \
        DT_ARG_HAS_MIN, 0, 0 \
    }
#define POS                                         \
    {                                               \
        DT_ARG_HAS_MIN | DT_ARG_MIN_EXCLUSIVE, 0, 0 \
    }
#define IN(lo, hi)                                  \
    {                                               \
        DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, (lo), (hi) \
    }

static const job_flag_def job_flags[JF_COUNT] = {
    /* model */
    [JF_MODEL] = {.name = "--model",
                  .kind = DT_ARG_CHOICE,
                  .offset = AT(model),
                  .help = "model preset (sizes below override it)",
                  .prog = {[JOB_DTRAIN] = {.choices = "tiny|small|gpt2-124m|mlp-bn"},
                           [JOB_DTSIM] = {.choices = "tiny|small|gpt2-124m"}}},
    [JF_NUM_LAYERS] = {.name = "--num-layers",
                       .kind = DT_ARG_INT,
                       .offset = AT(num_layers),
                       .range = IN(1, 1024),
                       .metavar = "N",
                       .help = "transformer blocks"},
    [JF_HIDDEN_SIZE] = {.name = "--hidden-size",
                        .kind = DT_ARG_INT,
                        .offset = AT(hidden_size),
                        .range = IN(1, 65536),
                        .metavar = "N",
                        .help = "model width C"},
    [JF_NUM_ATTENTION_HEADS] = {.name = "--num-attention-heads",
                                .kind = DT_ARG_INT,
                                .offset = AT(num_heads),
                                .range = MIN1,
                                .metavar = "N",
                                .help = "attention heads (divide --hidden-size)"},
    [JF_MAX_POSITION_EMBEDDINGS] = {.name = "--max-position-embeddings",
                                    .kind = DT_ARG_INT,
                                    .offset = AT(max_pos),
                                    .range = IN(1, 65536),
                                    .metavar = "N",
                                    .help = "model context (positions)"},
    [JF_SEQ_LENGTH] = {.name = "--seq-length",
                       .kind = DT_ARG_INT,
                       .offset = AT(seq_length),
                       .range = MIN1,
                       .metavar = "N",
                       .help = "training sequence length T"},
    [JF_UNTIE_EMBEDDINGS] = {.name = "--untie-embeddings-and-output-weights",
                             .kind = DT_ARG_FLAG,
                             .offset = AT(untie_embeddings),
                             .default_text = "the preset's",
                             .help = "a separate LM head matrix instead of the token embedding's (gpt2-124m "
                                     "ties them, as GPT-2 and Megatron do)"},
    [JF_TIE_EMBEDDINGS] = {.name = "--tie-embeddings-and-output-weights",
                           .kind = DT_ARG_FLAG,
                           .offset = AT(tie_embeddings),
                           .default_text = "the preset's",
                           .help = "the LM head multiplies by the token embedding (tiny and small are untied)"},
    /* batch and schedule */
    [JF_MICRO_BATCH_SIZE] = {.name = "--micro-batch-size",
                             .kind = DT_ARG_INT,
                             .offset = AT(micro_batch),
                             .range = MIN1,
                             .metavar = "N",
                             .help = "sequences per forward/backward"},
    [JF_GLOBAL_BATCH_SIZE] =
        {.name = "--global-batch-size",
         .kind = DT_ARG_INT,
         .offset = AT(global_batch),
         .range = MIN1,
         .metavar = "N",
         .prog = {[JOB_DTRAIN] = {.help = "sequences per optimizer step (a multiple of --micro-batch-size)"},
                  [JOB_DTSIM] = {.help = "sequences per optimizer step (a multiple of --micro-batch-size x "
                                         "--data-parallel-size)",
                                 .default_text = "--micro-batch-size x --micro-batches x --data-parallel-size"}}},
    [JF_TRAIN_ITERS] = {.name = "--train-iters",
                        .kind = DT_ARG_INT64,
                        .offset = AT(train_iters),
                        .metavar = "N",
                        .prog = {[JOB_DTRAIN] = {.help = "optimizer steps", .range = &(job_range)MIN0},
                                 [JOB_DTSIM] = {.help = "optimizer steps simulated", .range = &(job_range)MIN1}}},
    [JF_SEED] = {.name = "--seed",
                 .kind = DT_ARG_UINT64,
                 .offset = AT(seed),
                 .metavar = "N",
                 .prog = {[JOB_DTRAIN] = {.help = "seed of the weights and the data (--generate: of the sampling)"},
                          [JOB_DTSIM] = {.help = "seed of the simulator's random draws (numerics)",
                                         .default_text = "1, or --config's seed (a dtrain trace's: the run's "
                                                         "--seed)"}}},
    [JF_OPTIMIZER] = {.name = "--optimizer",
                      .kind = DT_ARG_CHOICE,
                      .offset = AT(optimizer),
                      .choices = "sgd|adamw|lars|lamb",
                      .prog = {[JOB_DTRAIN] = {.help = "optimizer"},
                               [JOB_DTSIM] = {.help = "optimizer (its state: 2 floats per parameter for "
                                                      "adamw/lamb, 1 for sgd/lars)"}}},
    /* mixed precision */
    [JF_FP16] = {.name = "--fp16",
                 .kind = DT_ARG_FLAG,
                 .offset = AT(fp16),
                 .default_text = "off",
                 .prog = {[JOB_DTRAIN] = {.help = "FP16 storage of weights, activations and gradients; FP32 "
                                                  "masters; dynamic loss scaling"},
                          [JOB_DTSIM] = {.help = "FP16 storage, FP32 masters, dynamic loss scaling"}}},
    [JF_BF16] = {.name = "--bf16",
                 .kind = DT_ARG_FLAG,
                 .offset = AT(bf16),
                 .default_text = "off",
                 .prog = {[JOB_DTRAIN] = {.help = "bfloat16 storage, FP32 masters; no loss scaling"},
                          [JOB_DTSIM] = {.help = "bfloat16 storage, FP32 masters"}}},
    [JF_FP8_FORMAT] = {.name = "--fp8-format",
                       .kind = DT_ARG_CHOICE,
                       .offset = AT(fp8_format),
                       .choices = "e4m3|hybrid",
                       .default_text = "off",
                       .prog = {[JOB_DTRAIN] = {.help = "FP8 GEMMs in the blocks' linear layers (implies --bf16 for "
                                                        "the rest): E4M3 everywhere, or hybrid (E5M2 gradients)"},
                                [JOB_DTSIM] = {.help = "FP8 GEMMs in the linear layers: e4m3 or hybrid"}}},
    [JF_FP8_RECIPE] = {.name = "--fp8-recipe",
                       .kind = DT_ARG_CHOICE,
                       .offset = AT(fp8_recipe),
                       .choices = "delayed|tensorwise|blockwise",
                       .default_text = "delayed",
                       .help = "FP8 scaling: from each tensor's amax history (delayed), its own amax "
                               "(tensorwise), or per 1x128 / 128x128 tile (blockwise)"},
    [JF_FP8_MARGIN] = {.name = "--fp8-margin",
                       .kind = DT_ARG_INT,
                       .offset = AT(fp8_margin),
                       .range = IN(0, 32),
                       .metavar = "M",
                       .default_text = "0",
                       .help = "FP8 scales divided by 2^M (headroom)"},
    [JF_FP8_AMAX_HISTORY_LEN] = {.name = "--fp8-amax-history-len",
                                 .kind = DT_ARG_INT,
                                 .offset = AT(fp8_history_len),
                                 .range = IN(1, 65536),
                                 .metavar = "H",
                                 .default_text = "1024",
                                 .help = "delayed scaling: steps of amax history"},
    [JF_FP8_AMAX_COMPUTE_ALGO] = {.name = "--fp8-amax-compute-algo",
                                  .kind = DT_ARG_CHOICE,
                                  .offset = AT(fp8_amax_algo),
                                  .choices = "max|most_recent",
                                  .default_text = "max",
                                  .help = "delayed scaling: the history's max, or its latest amax"},
    [JF_LOSS_SCALE] = {.name = "--loss-scale",
                       .kind = DT_ARG_FLOAT,
                       .offset = AT(loss_scale),
                       .range = MIN0,
                       .metavar = "S",
                       .help = "static loss scale (0: dynamic with --fp16)"},
    [JF_INITIAL_LOSS_SCALE] = {.name = "--initial-loss-scale",
                               .kind = DT_ARG_FLOAT,
                               .offset = AT(initial_loss_scale),
                               .range = POS,
                               .metavar = "S",
                               .help = "dynamic loss scale at the start"},
    [JF_LOSS_SCALE_WINDOW] = {.name = "--loss-scale-window",
                              .kind = DT_ARG_INT,
                              .offset = AT(loss_scale_window),
                              .range = MIN1,
                              .metavar = "N",
                              .help = "clean steps before the scale doubles"},
    [JF_HYSTERESIS] = {.name = "--hysteresis",
                       .kind = DT_ARG_INT,
                       .offset = AT(hysteresis),
                       .range = MIN1,
                       .metavar = "N",
                       .help = "overflows tolerated before the scale halves"},
    [JF_MIN_LOSS_SCALE] = {.name = "--min-loss-scale",
                           .kind = DT_ARG_FLOAT,
                           .offset = AT(min_loss_scale),
                           .range = POS,
                           .metavar = "S",
                           .help = "the scale never goes below this"},
    /* memory */
    [JF_RECOMPUTE_ACTIVATIONS] =
        {.name = "--recompute-activations",
         .kind = DT_ARG_FLAG,
         .offset = AT(recompute_on),
         .default_text = "off",
         .prog = {[JOB_DTRAIN] = {.help = "recompute activations in backward instead of keeping them (selective "
                                          "unless a granularity is given)"},
                  [JOB_DTSIM] = {.help = "recompute activations in backward (selective unless a granularity is "
                                         "given)"}}},
    [JF_RECOMPUTE_GRANULARITY] =
        {.name = "--recompute-granularity",
         .kind = DT_ARG_CHOICE,
         .offset = AT(recompute_granularity),
         .choices = "full|selective",
         .default_text = "off",
         .prog = {[JOB_DTRAIN] = {.help = "full: keep only every K-th block's input; selective: recompute the "
                                          "attention core (fused: only its log-sum-exp was kept)"},
                  [JOB_DTSIM] = {.help = "full: recompute whole blocks; selective: only the attention "
                                         "core"}}},
    [JF_RECOMPUTE_NUM_LAYERS] = {.name = "--recompute-num-layers",
                                 .kind = DT_ARG_INT,
                                 .offset = AT(recompute_num_layers),
                                 .range = MIN1,
                                 .metavar = "K",
                                 .help = "full recomputation: blocks per checkpointed group",
                                 .default_text = "1"},
    /* parallelism */
    [JF_TENSOR_MODEL_PARALLEL_SIZE] =
        {.name = "--tensor-model-parallel-size",
         .kind = DT_ARG_INT,
         .offset = AT(tensor_size),
         .metavar = "T",
         .prog = {[JOB_DTRAIN] = {.help = "split each block's attention heads and MLP over T ranks (Megatron-LM; "
                                          "rank r is tensor rank r % T)",
                                  .default_text = "1",
                                  .range = &(job_range)IN(1, 64)},
                  [JOB_DTSIM] = {.help = "split each block's heads and MLP over T ranks",
                                 .range = &(job_range)IN(1, 1024)}}},
    [JF_NO_VOCAB_PARALLEL] =
        {.name = "--no-vocab-parallel",
         .kind = DT_ARG_FLAG,
         .offset = AT(no_vocab_parallel),
         .default_text = "split",
         .prog = {[JOB_DTRAIN] = {.help = "with T > 1, keep the embedding and LM head whole on every tensor rank "
                                          "(default: each holds V/T vocabulary rows, Megatron's vocab-parallel "
                                          "embedding and cross-entropy)"},
                  [JOB_DTSIM] = {.help = "with T > 1, the embedding and LM head whole on every tensor rank"}}},
    [JF_NO_SCATTER_GATHER] =
        {.name = "--no-scatter-gather-tensors-in-pipeline",
         .kind = DT_ARG_FLAG,
         .offset = AT(no_scatter_gather),
         .default_text = "scatter",
         .prog = {[JOB_DTRAIN] = {.help = "with T > 1 and P > 1, every tensor rank sends the whole activation to "
                                          "the next stage (default: 1/T each, all-gathered over the tensor group)"},
                  [JOB_DTSIM] = {.help = "with T > 1 and P > 1, every tensor rank sends the whole activation"}}},
    [JF_SEQUENCE_PARALLEL] =
        {.name = "--sequence-parallel",
         .kind = DT_ARG_FLAG,
         .offset = AT(sequence_parallel),
         .default_text = "off",
         .prog = {[JOB_DTRAIN] = {.help = "with T > 1, split the LayerNorm and residual regions along the tokens "
                                          "over the tensor ranks too (Megatron's sequence parallelism): "
                                          "reduce-scatters and all-gathers in place of the allreduces"},
                  [JOB_DTSIM] = {.help = "with T > 1, Megatron's sequence parallelism"}}},
    [JF_CONTEXT_PARALLEL_SIZE] =
        {.name = "--context-parallel-size",
         .kind = DT_ARG_INT,
         .offset = AT(context_size),
         .metavar = "C",
         .range = IN(1, 64),
         .default_text = "1",
         .prog = {[JOB_DTRAIN] = {.help = "split each sequence over C ranks for the whole block (Megatron's context "
                                          "parallelism): rank i holds chunks i and 2C-1-i of 2C; the gradients are "
                                          "reduced over C x D ranks"},
                  [JOB_DTSIM] = {.help = "split each sequence over C ranks (context parallelism)"}}},
    [JF_CP_COMM_TYPE] =
        {.name = "--cp-comm-type",
         .kind = DT_ARG_CHOICE,
         .offset = AT(cp_comm_type),
         .choices = "p2p|a2a|allgather",
         .default_text = "p2p",
         .prog = {[JOB_DTRAIN] = {.help = "with C > 1: keys and values around a ring, overlapped with attention "
                                          "(p2p), all-to-all into a head split (a2a, DeepSpeed-Ulysses; C must "
                                          "divide a tensor rank's heads), or all-gathered at once (allgather)"},
                  [JOB_DTSIM] = {.help = "with C > 1: p2p, a2a or allgather"}}},
    [JF_PIPELINE_MODEL_PARALLEL_SIZE] =
        {.name = "--pipeline-model-parallel-size",
         .kind = DT_ARG_INT,
         .offset = AT(pipeline_size),
         .metavar = "P",
         .prog = {[JOB_DTRAIN] = {.help = "split the GPT's blocks over P stages (of N = P x d ranks, rank r is "
                                          "stage r / d)",
                                  .default_text = "1",
                                  .range = &(job_range)IN(1, 64)},
                  [JOB_DTSIM] = {.help = "split the blocks over P stages",
                                 .range = &(job_range)IN(1, JOB_FLAGS_SIM_MAX_STAGES)}}},
    [JF_PIPELINE_SCHEDULE] = {.name = "--pipeline-schedule",
                              .kind = DT_ARG_CHOICE,
                              .offset = AT(pipeline_schedule),
                              .choices = "gpipe|1f1b|pipedream|pipedream-vsync|interleaved-1f1b|zb-h1|zb-v",
                              .prog = {[JOB_DTRAIN] = {.help = "the order of forwards and backwards on each stage "
                                                               "(docs/pipeline-schedules.md); zb-h1 or zb-v in one "
                                                               "process: the trace shows each layer's B and W apart "
                                                               "(a profile for dtsim)",
                                                       .default_text = "1f1b"},
                                       [JOB_DTSIM] = {.help = "order of forwards and backwards on each stage"}}},
    [JF_PIPELINE_SPLIT] = {.name = "--pipeline-split",
                           .kind = DT_ARG_STRING,
                           .offset = AT(pipeline_split),
                           .metavar = "N,N,...",
                           .help = "blocks per stage",
                           .default_text = "as even as possible"},
    [JF_VIRTUAL_PIPELINE_MODEL_PARALLEL_SIZE] = {.name = "--virtual-pipeline-model-parallel-size",
                                                 .kind = DT_ARG_INT,
                                                 .offset = AT(virtual_pipeline_size),
                                                 .range = MIN1,
                                                 .metavar = "V",
                                                 .help = "model chunks per stage: interleaved-1f1b's V (Megatron-LM), "
                                                         "zb-v's 2",
                                                 .default_text = "2 for interleaved-1f1b and zb-v, else 1"},
    [JF_NUM_LAYERS_PER_VIRTUAL_PIPELINE_STAGE] = {.name = "--num-layers-per-virtual-pipeline-stage",
                                                  .kind = DT_ARG_INT,
                                                  .offset = AT(layers_per_virtual_stage),
                                                  .range = MIN1,
                                                  .metavar = "L",
                                                  .help = "blocks per model chunk: V = num-layers / (P x L) "
                                                          "(Megatron-LM's other way of giving V)"},
    [JF_ALLREDUCE] =
        {.name = "--allreduce",
         .kind = DT_ARG_CHOICE,
         .offset = AT(allreduce),
         .choices = "ring|tree|naive|mpi|nccl|ps-sync|ps-async",
         .prog = {[JOB_DTRAIN] = {.help = "gradients summed by our ring, recursive halving-doubling, "
                                          "reduce+broadcast, MPI_Allreduce, ncclAllReduce (--device cuda), or a "
                                          "parameter server (synchronous or asynchronous)"},
                  [JOB_DTSIM] = {.help = "gradient exchange (mpi and nccl are simulated as the ring)"}}},
    [JF_NUM_PS_SERVERS] =
        {.name = "--num-ps-servers",
         .kind = DT_ARG_INT,
         .offset = AT(num_ps_servers),
         .range = MIN1,
         .metavar = "K",
         .prog = {[JOB_DTRAIN] = {.help = "ps-sync/ps-async: the last K ranks are servers holding shards of the "
                                          "weights and optimizer state",
                                  .default_text = "1"},
                  [JOB_DTSIM] = {.help = "ps-sync/ps-async: K server ranks after the workers"}}},
    [JF_USE_DISTRIBUTED_OPTIMIZER] =
        {.name = "--use-distributed-optimizer",
         .kind = DT_ARG_FLAG,
         .offset = AT(distributed_optimizer),
         .default_text = "off",
         .prog = {[JOB_DTRAIN] = {.help = "ZeRO-1: shard the optimizer state over the data-parallel ranks "
                                          "(reduce-scatter, update, all-gather)"},
                  [JOB_DTSIM] = {.help = "ZeRO-1: reduce-scatter, sharded update, all-gather"}}},
    [JF_ZERO_STAGE] =
        {.name = "--zero-stage",
         .kind = DT_ARG_INT,
         .offset = AT(zero_stage),
         .range = IN(0, 3),
         .metavar = "S",
         .default_text = "0",
         .prog = {[JOB_DTRAIN] = {.help = "ZeRO stage (DeepSpeed's): 1 shards the optimizer state (as "
                                          "--use-distributed-optimizer), 2 also the gradients (reduce-scatter per "
                                          "bucket), 3 also the weights (all-gathered per layer)"},
                  [JOB_DTSIM] = {.help = "ZeRO stage: 1 as --use-distributed-optimizer, 2 reduce-scatters per "
                                         "bucket, 3 all-gathers each layer before its forward and backward"}}},
    [JF_ZERO_PREFETCH] =
        {.name = "--zero-prefetch",
         .kind = DT_ARG_FLAG,
         .offset = AT(zero_prefetch),
         .default_text = "off",
         .prog = {[JOB_DTRAIN] = {.help = "--zero-stage 3: all-gather the next layer on a communication thread while "
                                          "the current one computes (FSDP's prefetch)"},
                  [JOB_DTSIM] = {.help = "--zero-stage 3: the next layer's all-gather overlaps the current layer's "
                                         "compute"}}},
    [JF_BUCKET_SIZE_MB] =
        {.name = "--bucket-size-mb",
         .kind = DT_ARG_DOUBLE,
         .offset = AT(bucket_mb),
         .range = IN(0, 1 << 20),
         .metavar = "MB",
         .prog = {[JOB_DTRAIN] = {.help = "gradient buckets allreduced while the backward goes on (0: one bucket "
                                          "after it)"},
                  [JOB_DTSIM] = {.help = "gradient buckets exchanged while the backward goes on (0: one bucket "
                                         "after it)"}}},
    [JF_ALLREDUCE_CHUNK_BYTES] = {.name = "--allreduce-chunk-bytes",
                                  .kind = DT_ARG_INT64,
                                  .offset = AT(allreduce_chunk_bytes),
                                  .range = MIN0,
                                  .metavar = "N",
                                  .help = "ring allreduce: pipeline each segment in chunks of this many bytes (0: "
                                          "whole segments)"},
    [JF_SLOW_RANK] =
        {.name = "--slow-rank",
         .kind = DT_ARG_STRING,
         .offset = AT(slow_rank),
         .metavar = "R:MS",
         .default_text = "off",
         .prog = {[JOB_DTRAIN] = {.help = "testing: rank R sleeps MS milliseconds before each gradient exchange "
                                          "(a straggler)"},
                  [JOB_DTSIM] = {.help = "rank R waits MS milliseconds before each gradient exchange (a "
                                         "straggler)"}}},
    /* output */
    [JF_TRACE] = {.name = "--trace",
                  .kind = DT_ARG_STRING,
                  .offset = AT(trace),
                  .metavar = "FILE",
                  .prog = {[JOB_DTRAIN] = {.help = "write a Chrome trace (Perfetto) of the run"},
                           [JOB_DTSIM] = {.help = "write every rank's simulated events (dtrain's trace format)",
                                          .default_text = "none"}}},
    [JF_SUMMARY] = {.name = "--summary",
                    .kind = DT_ARG_STRING,
                    .offset = AT(summary),
                    .metavar = "FILE",
                    .prog = {[JOB_DTRAIN] = {.help = "write a JSON summary of the run"},
                             [JOB_DTSIM] = {.help = "write a JSON summary", .default_text = "none"}}},
    [JF_HELP] = {.name = "--help", .kind = DT_ARG_FLAG, .offset = AT(help), .help = "print this help and exit"},
    [JF_VERSION] = {.name = "--version",
                    .kind = DT_ARG_FLAG,
                    .offset = AT(version),
                    .help = "print the version and exit"},
};

dt_arg job_flag(job_prog prog, job_opts *o, job_flag_id id)
{
    const job_flag_def *d = &job_flags[id];
    const job_wording *w = &d->prog[prog];
    const job_range *r = w->range ? w->range : &d->range;
    return (dt_arg){
        .name = d->name,
        .kind = d->kind,
        .dest = (char *)o + d->offset,
        .range = r->range,
        .min = r->min,
        .max = r->max,
        .choices = w->choices ? w->choices : d->choices,
        .metavar = d->metavar,
        .help = w->help ? w->help : d->help,
        .default_text = w->default_text ? w->default_text : d->default_text,
    };
}

int job_tie_embeddings(const job_opts *o, const char *prog, int preset_tie)
{
    if (o->untie_embeddings && o->tie_embeddings) {
        fprintf(stderr, "%s: --untie-embeddings-and-output-weights and --tie-embeddings-and-output-weights: give one\n",
                prog);
        return -1;
    }
    return o->untie_embeddings ? 0 : o->tie_embeddings ? 1 : preset_tie;
}
