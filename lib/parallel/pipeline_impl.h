/* pipeline_impl.h: the insides of the pipeline runtime (pipeline.h), shared
 * by pipeline.c (creation, the instructions, the step), pipeline_optim.c
 * (OPTIM_STEP) and pipeline_eval.c (evaluation, checks, the fingerprint,
 * checkpoint positions); never installed, included by nothing else.
 *
 * A rank is one device of the schedule. It holds v model chunks: chunk c
 * is virtual stage vstage[device*v + c] of the p*v (v = 1: the device's
 * own stage), a dt__stage over its blocks, with its own slots, sends and
 * mailboxes. Their parameters and gradients lie in one flat buffer per
 * rank: the chunks' layouts one after the other, each a contiguous range
 * (16-float aligned, so a chunk's offsets are its own layout's, rebased).
 *
 * Invariants: a chunk's slot output is not overwritten while its send is
 * in flight, nor a slot's copy of its input gradient; a message
 * between two chunks of this rank (peer == the rank itself) waits in the
 * receiving chunk's mailbox, in micro-batch order; the step's loss is
 * added over the micro-batches in order by the rank holding the last
 * virtual stage. */
#ifndef DT_PIPELINE_IMPL_H
#define DT_PIPELINE_IMPL_H

#include "dt_grid.h"
#include "pipeline.h"
#include "stage.h"
#include "tp.h"
#include "update.h"
#include "zero.h"

/* Tags on the pipeline communicator: 4 the pipedream loss; from 16, four
 * per receiving virtual stage q: 16 + 4q + kind (activation, gradient,
 * evaluation). Between two virtual stages the schedule posts sends and
 * receives in the same order on both sides, so one tag a link and
 * direction matches them. */
enum { DT__PIPE_TAG_LOSS = 4, DT__PIPE_TAG_BASE = 16, DT__PIPE_MAX_STASH = 64 };
enum { DT__PIPE_ACT = 0, DT__PIPE_GRAD = 1, DT__PIPE_EVAL = 2 };
static inline int dt__pipe_tag(int q, int kind) { return DT__PIPE_TAG_BASE + 4 * q + kind; }

typedef struct dt__stash {
    int version; /* -1: free */
    dt_buffer buf;
} dt__stash;

/* Messages from another chunk of this rank, first in first out: (B,T,C)
 * FP32 buffers, head the oldest of n, cap allocated. */
typedef struct dt__pipe_box {
    dt_buffer *buf;
    int head, n, cap;
} dt__pipe_box;

typedef struct dt__chunk {
    dt__stage *st;
    int q;                       /* its virtual stage */
    int slots;                   /* for the schedule's micro-batches; slot `slots` is evaluation's */
    int *slot_mb, *slot_version; /* (slots) busy slots' micro-batch (-1 free) and version */
    dt_comm_request **act_send;  /* (slots + 1) pending activation send per slot */
    dt_comm_request **grad_send; /* (slots) pending input-gradient send per slot */
    dt_buffer *act_wire;         /* (slots + 1) mixed precision: 16-bit copy of each slot's output in flight */
    /* (slots) each slot's input gradient while its send is in flight, in
     * the wire's format: the stage's dres is free again at once, so a
     * backward never waits for the previous one's send */
    dt_buffer *grad_out;
    int dout_mb;         /* the micro-batch whose output gradient the stage's dout holds, -1 none */
    dt__pipe_box box[2]; /* hand-overs from this rank's other chunks: activations, gradients */
    size_t offset;       /* of its tensors in the rank's flat buffer */
    int first;           /* its tensor 0's index in the rank's layout */
} dt__chunk;

struct dt__pipe {
    dt__pipe_setup cfg;
    dt_grid grid;                 /* the world's ranks (lib/parallel/grid.c); embedding: the tied ends */
    int stage, dpi, d, p, t, tpi; /* the grid's: stage is this rank's device in the schedule (its pipeline rank) */
    int v, q_last;                /* chunks per device; the last virtual stage, p*v - 1 */
    const dt_sched_instr *cur;    /* the BACKWARD being executed, for the stage's recompute hook */
    dt_comm *pipe, *data, *tpc;   /* host sub-communicators: pipeline, data-parallel group, tensor-parallel group */
    dt_comm *dpipe, *ddata, *dtp; /* device ones (NCCL) or NULL */
    dt_comm *emb, *demb;          /* tied embeddings: the ranks of virtual stages 0 and p*v-1 when not one */
    int tied;                     /* tied embeddings, p*v > 1: the last virtual stage holds a copy of wte */
    dt__tp tp;                    /* the stage's tensor parallelism (t > 1) */
    /* context parallelism (c > 1): d and dpi above are then the c x d
     * ranks' (the gradient reduction's), dd and ddi the data replicas'
     * (whose micro-batches a rank takes), cpi the rank's place in its
     * context group cpc; cp its exchange (lib/parallel/cp.h) */
    int c, cpi, dd, ddi;
    dt_comm *cpc;
    struct dt__cp *cp;
    dt_schedule *sched;
    dt__chunk *ch; /* (v) */
    /* the rank's flat buffer: every chunk's tensors, chunk 0 first */
    dt_paramset layout;
    int *whole_index; /* (layout.count) each tensor's index in the whole model's layout */
    int *tensor_map;  /* (layout.count) the same, the tied copy as one past the whole layout (overflow names) */
    dt_buffer params, grads;
    size_t peak; /* saved activation bytes of all chunks at once, at their most */
    dt_optim opt;
    int opt_ready;
    dt__zero *zero; /* ZeRO-1 over the data group (setup.zero, d > 1): owns the optimizer instead of opt */
    /* ZeRO-2/3 (setup.zero_stage; pipeline_shard.c): the sharder over the
     * chunks' layers, which owns the optimizer instead of opt; params is
     * NULL at stage 3 and grads always. Tied embeddings: the end chunk's
     * wte gradient, whole, summed over the step's micro-batches (gtied) */
    struct dt__zs *zs;
    size_t *zs_off, *zs_len;
    int *zs_group;
    dt_buffer gtied;
    int gtied_chunk; /* the chunk that holds the tied matrix, -1 none */
    int pc;         /* next instruction */
    int version;    /* current weight version of this stage */
    dt__stash stash[DT__PIPE_MAX_STASH];
    int n_stash, max_versions, max_versions_in_flight;
    /* mixed precision: activations and their gradients travel between stages
     * in the 16-bit format (exact: the stages store only 16-bit values) */
    size_t wire_elem;    /* bytes per element on the wire: 4, or 2 under --fp16/--bf16 */
    dt_buffer recv_wire; /* a receive's 16-bit landing place */
    size_t msg_n;        /* floats of a message: B*T*C, or the rank's rows' (B*T/t)*C under sequence parallelism */
    dt_buffer ln_grad;   /* sequence parallelism: tp.ln_grad's (2C) */
    /* scatter/gather (t > 1, dt__pipe_setup's): each tensor rank sends its
     * part [sg_off, sg_off + sg_len) of a message's bytes, whole 32-bit
     * words of it (dt_comm_segment over the words), and the receivers
     * all-gather the words over the tensor group; else 0, n * wire_elem */
    int sg;
    size_t sg_off, sg_len;
    int *used;           /* (2 * total mbs) version used by FORWARD / BACKWARD of mb, -1 unknown */
    int total_mb;
    /* the current step (last virtual stage): loss sum and targets of the global batch */
    double loss_sum;
    long long n_total;
    int64_t step_of_total; /* the step n_total belongs to */
    int updates;
    int64_t opt_from; /* the running instruction's start, or (OPTIM_STEP) the end of its last collective so far */
    double last_norm;
    float last_lr;
    dt__update_result last;              /* the step's last update (its loss-scaling decision) */
    float last_scale;                    /* the loss scale that update's gradients carried */
    int32_t *tokens, *targets, *example; /* (B*T) host */
    /* pipedream (p > 1): each step's loss from the last stage to stage 0,
     * in flight for a step (slot t % 2) */
    float loss_out[2], loss_in[2];
    dt_comm_request *loss_send[2], *loss_recv[2];
};

/* pipeline_shard.c: ZeRO-2/3 of the rank's chunks */
/* After the chunks and the layout: the sharder, the shard of the initial
 * weights; the whole gradients dropped (and at stage 3 the weights). */
dt_status dt__pipe_shard_create(dt__pipe *pp);
void dt__pipe_shard_free(dt__pipe *pp);
/* OPTIM_STEP's update: the tied sum, the shard's update under the whole
 * model's norm, the whole weights again (stage 2). */
dt_status dt__pipe_shard_update(dt__pipe *pp, const dt__zero_step_args *za, dt__update_result *r);
/* The gradients zeroed for the next step. */
dt_status dt__pipe_shard_zero_grad(dt__pipe *pp);
/* The whole weights again from the masters (stage 2), the layer buffers forgotten. */
dt_status dt__pipe_shard_refresh(dt__pipe *pp);
/* The norm's terms of the shard's gradients (as dt__pipe_norm's). */
dt_status dt__pipe_shard_sumsq(dt__pipe *pp, double *sharded, double *replicated);

/* pipeline.c */
int dt__pipe_async(const dt__pipe *pp);
dt_comm *dt__pipe_dev_pipe(const dt__pipe *pp);
dt_comm *dt__pipe_dev_data(const dt__pipe *pp);
/* The chunk of this rank that is virtual stage q, or -1. */
int dt__pipe_chunk_of(const dt__pipe *pp, int q);
/* The device that holds virtual stage q. */
int dt__pipe_device_of(const dt__pipe *pp, int q);
dt_status dt__pipe_wait_send(dt__pipe *pp, dt_comm_request **q);
/* Receive (B,T,C) FP32 into buf from peer (through the 16-bit landing buffer under mixed precision). */
dt_status dt__pipe_recv(dt__pipe *pp, float *buf, int peer, int tag);
/* Start sending x (B,T,C, FP32) to peer; under mixed precision its 16-bit copy in wire travels. */
dt_status dt__pipe_send(dt__pipe *pp, const float *x, dt_buffer *wire, int peer, int tag, dt_comm_request **q);
/* A hand-over to chunk c of this rank: x (B,T,C) queued in its mailbox kind (DT__PIPE_ACT, _GRAD), or the oldest taken into out. */
dt_status dt__pipe_box_put(dt__pipe *pp, int c, int kind, const float *x);
dt_status dt__pipe_box_take(dt__pipe *pp, int c, int kind, float *out);
/* Row-stream index of micro-batch mb (global over steps, m per step) of this pipeline. */
uint64_t dt__pipe_index(const dt__pipe *pp, int mb);
/* Around one op of chunk c: the rank's peak counts the other chunks' saved bytes plus the op's own peak. */
void dt__pipe_op_begin(dt__pipe *pp, int c);
void dt__pipe_op_end(dt__pipe *pp, int c);

/* pipeline_optim.c: OPTIM_STEP (gpipe/1f1b: ending step t; pipedream: after one backward) */
dt_status dt__pipe_optim(dt__pipe *pp, const dt_sched_instr *in, int64_t t);
/* The loss scale the gradients of this step carry (1 without loss scaling). */
float dt__pipe_scale(const dt__pipe *pp);

#endif
