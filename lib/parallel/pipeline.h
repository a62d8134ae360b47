/* pipeline.h: the pipeline-parallel runtime (lib/parallel/pipeline.c), never
 * installed; the trainer drives it under --pipeline-model-parallel-size p.
 *
 * Ranks: the world's N = t x d x p ranks form the process grid
 * (include/dt_grid.h, lib/parallel/grid.c), tensor fastest, then data, then
 * pipeline: rank = tpi + t * (dpi + d * stage), so a tensor-parallel group
 * (the most communication) is neighbouring ranks, as Megatron-LM orders
 * them. Sub-communicators, the grid's groups: the pipeline's (rank = stage),
 * for activations and their gradients; the stage's data-parallel group, for
 * the gradient allreduce; the tensor-parallel group, for f and g (lib/parallel/tp.h).
 * t = 1 and p = 1 are allowed (one stage: tensor parallelism alone).
 *
 * A stage executes its list of the schedule (lib/parallel/schedule.c, the one
 * generator) in order: receives block, sends do not (their buffers stay
 * untouched until the send is complete). It holds the schedule's v model
 * chunks (interleaved-1f1b, zb-v: virtual stages, over which the blocks
 * are split evenly in order, the embedding on the first and the head on
 * the last), whose parameters and gradients form one flat buffer, and runs
 * a split backward's BACKWARD_B and BACKWARD_W (zb-h1, zb-v) as the
 * stage's B and W (stage.h). Training step t runs the list
 * through the last instruction of step t (pipedream: later forwards that
 * come earlier in the list run too: that is the pipelining). Weight
 * versions: the stage's params are the current version; STASH copies them
 * into a stash buffer, DROP frees it; a FORWARD/BACKWARD that names an
 * older version uses its stash.
 *
 * Data: pipeline i of step t takes micro-batches t*m*d + i*m .. + m-1 of the
 * row stream (the trainer's data-parallel split), so p x d ranks train on
 * exactly the rows of one process accumulating m*d micro-batches. */
#ifndef DT_PIPELINE_H
#define DT_PIPELINE_H

#include <stdint.h>

#include "dt_backend.h"
#include "dt_comm.h"
#include "dt_gpt.h"
#include "dt_loss_scaler.h"
#include "dt_optim.h"
#include "dt_schedule.h"
#include "dt_train.h"

typedef struct dt__pipe dt__pipe;

/* The trainer's data: micro-batch `index` of the training row stream
 * (tokens and targets, host, B*T each); the validation stream with val = 1. */
typedef dt_status (*dt__pipe_batch_fn)(void *ctx, int val, uint64_t index, int32_t *tokens, int32_t *targets,
                                       int32_t *example, int *n_examples);
/* One executed instruction (for traces): times from dt_time_ns(). An
 * OPTIM_STEP's t0 is where its last collective before the update ended
 * (the tied embeddings', the data-parallel allreduce, the agreements of
 * sync_event), so that its span is the optimizer's work, not the waits. */
typedef void (*dt__pipe_event_fn)(void *ctx, int stage, const dt_sched_instr *in, int64_t t0_ns, int64_t t1_ns);

typedef struct dt__pipe_setup {
    dt_comm *world;        /* host communicator of all p x d ranks */
    dt_comm *device_world; /* NCCL over the same ranks for device buffers (--device cuda), or NULL */
    int p;
    int t; /* tensor-parallel size (>= 1; lib/parallel/tp.h): the blocks are sharded over t ranks */
    int vocab_parallel; /* t > 1: the embedding and LM head split by vocabulary rows (tp.h's dt__tp_vocab) */
    /* t > 1, p > 1: each tensor rank sends 1/t of a stage's activation (and
     * gradient), all-gathered over the tensor group on arrival (Megatron's
     * scatter/gather); 0: every tensor rank sends it whole */
    int scatter_gather;
    /* t > 1: Megatron's sequence parallelism (lib/parallel/sp.h); needs
     * vocab_parallel and t dividing B*T */
    int sequence_parallel;
    /* c > 1: context parallelism (lib/parallel/cp.h), each sequence over c
     * ranks exchanging keys and values as cp_type says; the gradients are
     * reduced (and ZeRO shards) over the c x d ranks of a (tensor,
     * pipeline) position, the micro-batches are the d replicas' */
    int c;
    dt_cp_comm cp_type;
    dt_sched_kind kind;
    int v;                      /* model chunks per stage (interleaved-1f1b, zb-v), 0: the kind's default */
    const int *split;           /* (p) blocks per stage, or NULL: even (one chunk per stage only) */
    const dt_gpt_config *model; /* vocab_size set */
    int B, T, m;                /* micro-batch shape, micro-batches per step per pipeline */
    int64_t steps;
    dt_backend *be;
    dt_gpt_init init; /* the initial weights (dt_gpt.h) */
    dt_optim_config optim;
    dt_lr_schedule lr; /* after lr scaling */
    float clip_grad;
    dt_dtype precision;       /* DT_F32, DT_F16 or DT_BF16: the stages' compute and storage (stage.h) */
    dt_loss_scaler *scaler;   /* loss scaling (gpipe/1f1b), or NULL: the caller's state, the same on every rank */
    dt_recompute recompute;   /* activation recomputation inside each stage (stage.h) */
    int recompute_num_layers; /* full: blocks per checkpointed group */
    dt_allreduce_algo allreduce;
    size_t chunk_bytes;
    /* --use-distributed-optimizer: each stage's (tensor shard's) optimizer
     * state, and under --fp16/--bf16 its FP32 masters, sharded over the
     * stage's data-parallel group (lib/parallel/zero.h; with d = 1 there is
     * nothing to shard) */
    int zero;
    /* --zero-stage 2 or 3 (0: none): each rank's chunks cut into their
     * layers and sharded over the stage's data-parallel group by
     * lib/parallel/zero_shard.c (pipeline_shard.c): the gradients, at 3
     * the weights too; bucket_bytes cuts stage 2's units */
    int zero_stage;
    size_t bucket_bytes;
    dt__pipe_batch_fn batch;
    dt__pipe_event_fn event; /* may be NULL */
    /* each f/g allreduce and vocabulary collective (tp.h's kinds), may be NULL */
    void (*tp_event)(void *ctx, int kind, char pass, int64_t t0_ns, int64_t t1_ns);
    /* optional (traces): each context-parallel exchange (lib/parallel/cp.h's dt__cp_set_event) */
    void (*cp_event)(void *ctx, int kind, char pass, int step, int from, size_t bytes, int64_t t0_ns, int64_t t1_ns);
    /* each sum of the tied wte's gradient over the first and last stage
     * (inside OPTIM_STEP), may be NULL */
    void (*emb_event)(void *ctx, int64_t t0_ns, int64_t t1_ns, size_t bytes);
    /* each step of the stage's data-parallel gradient allreduce (and of
     * ZeRO-1's reduce-scatter and all-gather): dt_collective_opts' hook;
     * may be NULL */
    void (*coll_event)(void *ctx, const char *phase, int step, int peer, size_t bytes, int64_t t0_ns, int64_t t1_ns);
    /* each agreement of the ranks inside OPTIM_STEP, [t0, t1): "grad norm
     * allreduce" (gpipe/1f1b, p > 1: the squared gradient norm summed over
     * the pipeline's stages) and "overflow allreduce" (loss scaling: any
     * overflow, over every rank). A stage that finishes its backwards first
     * waits for the others there. [local_t0, t0) is the stage's own work
     * before it since the instruction's start or its previous collective
     * (unscaling, the squares of its gradients). May be NULL. */
    void (*sync_event)(void *ctx, const char *name, int64_t local_t0_ns, int64_t t0_ns, int64_t t1_ns);
    /* each recomputation inside a BACKWARD instruction (stage.h's hook):
     * the instruction, the block's whole-model index; may be NULL */
    void (*recompute_event)(void *ctx, int stage, const dt_sched_instr *in, int layer, int64_t t0_ns, int64_t t1_ns);
    /* FP32 gpipe/1f1b without ZeRO: a non-finite gradient norm (the whole
     * model's, so every rank sees it) is not an error: no rank updates, the
     * step's stats say nonfinite, and first nonfinite(ctx, t) runs on every
     * rank together, inside the step's OPTIM_STEP, while the gradients are
     * still there (dt__pipe_forward_check may be called from it). NULL: the
     * update fails with "gradient norm is nan" (also pipedream, ZeRO). */
    dt_status (*nonfinite)(void *ctx, int64_t t);
    void *ctx;
} dt__pipe_setup;

dt_status dt__pipe_create(const dt__pipe_setup *s, dt__pipe **out);
void dt__pipe_free(dt__pipe *pp);
struct dt__fp8;
/* FP8 training: every chunk's blocks under f (lib/model/fp8.h; NULL:
 * off); f learns the rank's tensor-parallel index (its counts). */
void dt__pipe_set_fp8(dt__pipe *pp, struct dt__fp8 *f);

int dt__pipe_stage(const dt__pipe *pp);
/* Model chunks (virtual stages) this stage holds: the schedule's v. */
int dt__pipe_chunks(const dt__pipe *pp);
int dt__pipe_dp_index(const dt__pipe *pp);
int dt__pipe_tp_index(const dt__pipe *pp);
/* The id of the message a send or receive of this rank moves, the same on
 * the rank at its other end (dt_sched_message_id over this rank's
 * pipeline, tensor rank + t * data rank), or -1 (not a message). */
int64_t dt__pipe_message_id(const dt__pipe *pp, const dt_sched_instr *in);
/* Allreduces made by the tensor-parallel f and g operators so far. */
long long dt__pipe_tp_allreduces(const dt__pipe *pp);
/* Context parallelism's exchange (lib/parallel/cp.h), NULL with c = 1; the rank's place in its context group. */
const struct dt__cp *dt__pipe_cp(const dt__pipe *pp);
int dt__pipe_cp_index(const dt__pipe *pp);
/* Bytes of a message instruction's own link transfer (this rank's part
 * under scatter/gather), 0 for the other instructions and hand-overs
 * between the rank's chunks. */
size_t dt__pipe_message_bytes(const dt__pipe *pp, const dt_sched_instr *in);

typedef struct dt__pipe_stats {
    /* the mean loss of iteration loss_iter (1-based; 0: none known on this
     * rank). gpipe/1f1b: the step's own, on every rank. pipedream and
     * pipedream-vsync (p > 1): the last stage sends each step's loss to
     * stage 0 without waiting, and stage 0 takes step t-1's at the end of
     * step t (the last step's at the end of the run), so no stage waits for
     * another at a step boundary: stage 0 of the first pipeline (rank 0)
     * reports iteration t-1's loss; the last stage reports its own part
     * (the check for a non-finite loss); the other ranks none. */
    float loss;
    int64_t loss_iter;
    float lr;
    double grad_norm; /* gpipe/1f1b: of the whole model; pipedream: this stage's last update */
    int updates;      /* optimizer steps this stage applied in the step */
    /* loss scaling: the scale the step's gradients carried, and the update's
     * decision, agreed by every stage and tensor rank */
    float loss_scale;        /* 1 without loss scaling */
    int skipped;             /* the step overflowed somewhere: no stage updated */
    int first_bad;           /* whole-model index of the first overflowing tensor (backward order), or -1 */
    dt_loss_scaler_event ev; /* zeroed without loss scaling */
    int nonfinite;           /* setup.nonfinite: the gradient norm was NaN/inf, no stage updated */
} dt__pipe_stats;
/* Inside setup.nonfinite (collective over the world): step t's
 * micro-batches of this pipeline forward again with this stage's weights;
 * *mb (0 .. m-1, of this pipeline) and *pos (stage.h's
 * dt__stage_forward_check) name the first micro-batch in which one of
 * this stage's layers output a NaN or inf, and the first such layer; -1 none. */
dt_status dt__pipe_forward_check(dt__pipe *pp, int64_t t, int *mb, int *pos);
/* The name of tensor `index` of the whole model's layout. */
const char *dt__pipe_tensor_name(const dt__pipe *pp, int index);

/* Training step t (0-based, in order). */
dt_status dt__pipe_step(dt__pipe *pp, int64_t t, dt__pipe_stats *out);
/* Loss and accuracy sums over `n_val` validation micro-batches (pipeline i
 * takes its share), added over every rank: sums[0] loss over counted
 * targets, [1] counted targets, [2] complete examples, [3] correct ones. */
dt_status dt__pipe_evaluate(dt__pipe *pp, int n_val, int has_accuracy, double sums[4]);
/* The whole model's weights fingerprint (dt__probe_u in dt_internal.h) on
 * every rank: each stage and tensor rank adds its own elements. Collective.
 * With tied embeddings it first checks that the last stage's copy of wte
 * equals the first stage's bit for bit (DT_ERR_NUMERIC if not). */
dt_status dt__pipe_probe(dt__pipe *pp, double *out);

/* This stage's measured figures: saved activation bytes at their peak, the
 * most weight versions alive at once (stashes + current) and the most
 * distinct versions used by in-flight micro-batches. */
size_t dt__pipe_peak_activation_bytes(const dt__pipe *pp);
/* Saved activation bytes of every chunk now (between instructions). */
size_t dt__pipe_activation_bytes(const dt__pipe *pp);
int dt__pipe_max_versions(const dt__pipe *pp);
int dt__pipe_max_versions_in_flight(const dt__pipe *pp);
/* Over every stage (collective, after the last step): micro-batches whose
 * backward used another version than their forward on some stage, and
 * micro-batches whose forward versions differ between stages (0 under
 * vertical sync; also 0 for gpipe/1f1b, where a step is one version). */
dt_status dt__pipe_version_check(dt__pipe *pp, long long *mismatches, long long *disagreements);

/* Checkpoints (lib/train.c): this stage's layout, weights (backend memory)
 * and optimizer. */
const dt_paramset *dt__pipe_layout(const dt__pipe *pp);
float *dt__pipe_params(dt__pipe *pp);
float *dt__pipe_grads(dt__pipe *pp);
/* (layout count) each of the stage's tensors' index in the whole model's layout */
const int *dt__pipe_whole_index(const dt__pipe *pp);
dt_optim *dt__pipe_optimizer(dt__pipe *pp);
/* The stage's ZeRO optimizer (setup.zero with d > 1, or zero_stage 2/3),
 * or NULL: it then owns the optimizer and the masters of its segment
 * (under ZeRO-1 with mixed precision; always at 2 and 3) and
 * dt__pipe_optimizer returns its optimizer. */
struct dt__zero *dt__pipe_zero(dt__pipe *pp);
/* This rank's bytes kept between steps, as docs/zero.md defines them:
 * weights (what the stages compute with: the flat buffer when it is not
 * the FP32 masters, and under mixed precision the rounded copies),
 * gradients (FP32: whole, or a ZeRO-2/3 shard; and one micro-batch's),
 * optimizer (FP32 masters and moments) and ZeRO-2/3's working buffers. */
void dt__pipe_state_bytes(const dt__pipe *pp, size_t *weights, size_t *gradients, size_t *optimizer, size_t *working);
/* ZeRO-2/3's sharder (zero_stage), or NULL. */
struct dt__zs *dt__pipe_sharder(dt__pipe *pp);
/* After a checkpoint restored the ZeRO segments: the whole weights again
 * where the rank keeps them (collective over the data group). */
dt_status dt__pipe_restored(dt__pipe *pp);
/* DT_OK when nothing crosses the boundary before step t on this stage: the
 * schedule runs every instruction of steps < t before any of steps >= t,
 * and (after step t-1) no micro-batch is in flight and no version stashed.
 * gpipe and 1f1b always pass; pipedream fails (DT_ERR_UNSUPPORTED, naming
 * the schedule). */
dt_status dt__pipe_boundary(const dt__pipe *pp, int64_t t);
/* Position the stage at the start of step t (0 <= t <= steps), its weights
 * and optimizer restored by the caller: the next dt__pipe_step is t. */
dt_status dt__pipe_seek(dt__pipe *pp, int64_t t);

#endif
