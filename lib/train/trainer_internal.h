/* trainer_internal.h: the trainer's state and the seams between the files
 * of lib/train/ (private to them; the public API is dt_train.h).
 *
 * The trainer is a short core (trainer.c: create, free, the step as a
 * dispatch over strategies) with each concern in a file of its own that
 * owns one sub-struct of dt_trainer:
 *   model_gpt.c, model_mlp.c  the model kind behind dt__model_kind (gpt, mlp)
 *   step_dp.c       one process or allreduce data parallelism: buckets, comm thread (dp)
 *   step_zero.c     ZeRO-1: reduce-scatter, shard update, all-gather (zero);
 *                   ZeRO-2/3: the sharded GPT's update (zgpt)
 *   model_gpt_zero.c the GPT kind of ZeRO-2/3 over lib/parallel/zero_gpt.c
 *   step_ps.c       parameter-server workers and servers (ps)
 *   step_pipe.c     pipeline and tensor parallelism: the stage runtime (pipe)
 *   nonfinite.c     non-finite loss or gradient norm: the first bad layer (nf)
 *   trace_hooks.c   trace events from the layers, collectives and steps (trace)
 *   trace_gather.c  several ranks: their clocks, the merged trace at the end (trace)
 *   eval.c          evaluation on the validation split
 *   thread_tune.c   the automatic CPU thread count (tune)
 *   summary.c       the --summary JSON
 *   checkpoint_io.c dt_trainer_save / dt_trainer_load (ck)
 *   config.c, config_json.c  the configuration: defaults, validation, JSON
 *
 * Invariants: exactly one strategy runs a trainer's steps, fixed at
 * create; the model kind's table is the only place that tells the GPT from
 * the BatchNorm MLP; a sub-struct is written only by the file that owns it
 * (the trace lock dp.mu excepted, which the trace writer takes when the
 * comm thread runs). */
#ifndef DT_TRAINER_INTERNAL_H
#define DT_TRAINER_INTERNAL_H

#include <jansson.h>
#include <pthread.h>

#include "dt_backend.h"
#include "dt_blobs.h"
#include "dt_checkpoint.h"
#include "dt_grid.h"
#include "dt_internal.h"
#include "dt_mlp.h"
#include "dt_train.h"
#include "dt_trace.h"
#include "pipeline.h"
#include "thread_tune.h"
#include "ps.h"
#include "update.h"
#include "zero.h"
#include "zero_gpt.h"

/* The sums of one evaluation (eval.c): over every rank of the data-parallel group. */
typedef struct dt__eval_sums {
    double loss;     /* sum of per-target (GPT) or per-example (mlp-bn) losses */
    double counted;  /* targets or examples the loss is summed over */
    double examples; /* complete examples (accuracy) */
    double correct;
} dt__eval_sums;

/* One model kind (DT_MODEL_GPT, DT_MODEL_MLP_BN) behind the trainer. The
 * optional slots are NULL where the kind has no such thing. */
typedef struct dt__model_kind {
    const char *name;
    /* open the data and, unless split (pipeline/tensor stages own the
     * model), build and initialise the model; fill cfg's data-dependent
     * sizes, num_params and the host batch buffers */
    dt_status (*create)(dt_trainer *tr, int split);
    void (*destroy)(dt_trainer *tr);
    const dt_paramset *(*layout)(const dt_trainer *tr); /* the flat buffer's tensors */
    float *(*params)(dt_trainer *tr);                   /* (numel) backend memory */
    float *(*grads)(dt_trainer *tr);                    /* (numel) backend memory */
    dt_status (*zero_grad)(dt_trainer *tr);
    size_t (*peak_activation_bytes)(const dt_trainer *tr);
    size_t (*activation_bytes)(const dt_trainer *tr); /* optional: saved activations held now (the layer hook's) */
    /* forward and backward of this rank's micro-batches of step tr->iter,
     * the backward seeded with S times the micro-batch's weight in the
     * global batch (share: the ranks whose micro-batches make one
     * gradient); adds the weighted losses to *loss_sum */
    dt_status (*accumulate)(dt_trainer *tr, float S, int share, double *loss_sum, size_t *act_bytes);
    int (*has_accuracy)(const dt_trainer *tr);
    dt_status (*eval_batch)(dt_trainer *tr, int i, dt__eval_sums *sum); /* validation micro-batch i */
    void (*set_training)(dt_trainer *tr, int on);   /* optional: BatchNorm's batch or running statistics */
    void (*set_layer_hook)(dt_trainer *tr, int on); /* optional: per-layer trace spans and bucket launches */
    /* optional: extra state a checkpoint keeps (BatchNorm running statistics) */
    const dt_paramset *(*state_layout)(const dt_trainer *tr);
    float *(*state)(dt_trainer *tr);
    /* optional: the first layer whose forward output is non-finite (nonfinite.c) */
    dt_status (*locate_forward)(dt_trainer *tr, char *where, size_t cap);
    /* optional: round the weights to the compute precision after ZeRO took the FP32 masters */
    dt_status (*round_weights)(dt_trainer *tr);
    /* the layout is the GPT's (embedding, blocks "h.<l>.*", head): buckets
     * by layer and per-layer grad_amax events apply */
    int gpt_layers;
} dt__model_kind;

extern const dt__model_kind dt__model_gpt, dt__model_mlp, dt__model_gpt_zero;

/* model_gpt.c: one GPT's forward and backward of the current micro-batch
 * (the trainer's B, T), for the step's weighting of micro-batches and the
 * evaluation that both GPT kinds share: the whole model of this process,
 * or the sharded one of ZeRO stages 2 and 3 (model_gpt_zero.c). */
typedef struct dt__gpt_runner {
    dt_status (*forward)(dt_trainer *tr, const int32_t *tokens, const int32_t *targets, float *loss);
    dt_status (*backward)(dt_trainer *tr, float scale);
    dt_status (*position_stats)(dt_trainer *tr, float *losses, uint8_t *correct);
    size_t (*activation_bytes)(const dt_trainer *tr);
} dt__gpt_runner;
dt_status dt__gpt_accumulate_with(dt_trainer *tr, const dt__gpt_runner *run, float S, int share, double *loss_sum,
                                  size_t *act_bytes);
dt_status dt__gpt_eval_batch_with(dt_trainer *tr, const dt__gpt_runner *run, int i, dt__eval_sums *sum);
/* The GPT kind's data and batch buffers (split: no whole model), and their end. */
dt_status dt__gpt_create(dt_trainer *tr, int split);
void dt__gpt_destroy(dt_trainer *tr);
int dt__gpt_has_accuracy(const dt_trainer *tr);

/* A checkpoint shard's role (its "trainer" record; the numbers are the file format's). */
enum { DT__CK_REPLICA = 0, DT__CK_ZERO, DT__CK_STAGE, DT__CK_PS_WORKER, DT__CK_PS_SERVER };

typedef struct dt__step_ctx dt__step_ctx; /* below */

/* What a strategy's state is made of, for the summary's byte counts. */
typedef struct dt__strategy_state {
    const dt__zero *zero;     /* the sharded optimizer (ZeRO), or NULL */
    const dt_optim *optim;    /* an optimizer over the whole layout below, or NULL */
    const dt_paramset *layout; /* the weights this rank keeps whole (a stage's, or the model's) */
} dt__strategy_state;

/* One parallel strategy: how this trainer's steps run (fixed at create).
 * A static const table per strategy, filled in its file (step_dp.c
 * replica, step_zero.c ZeRO, step_ps.c parameter server, step_pipe.c
 * pipeline and tensor parallelism); the trainer, the evaluation, the
 * summary, checkpoints and the non-finite search call it instead of
 * testing which strategy runs. Optional slots are NULL. */
typedef struct dt__strategy {
    const char *name;
    int split; /* the stage runtime owns the model: the kind makes no whole one */
    dt_status (*create)(dt_trainer *tr);
    dt_status (*start)(dt_trainer *tr);                     /* optional: after the trace opened */
    dt_status (*step)(dt_trainer *tr, dt_train_stats *out); /* optional: the whole step (a schedule) */
    dt_status (*begin_step)(dt_trainer *tr);                /* optional: before the micro-batches */
    dt_status (*update)(dt_trainer *tr, dt__step_ctx *c);   /* the exchange and update (without step) */
    /* optional: this evaluation's sums over every rank (else the kind's
     * batches, this rank's share, summed over the data-parallel ranks) */
    dt_status (*evaluate)(dt_trainer *tr, dt__eval_sums *sum);
    size_t (*peak_activation_bytes)(const dt_trainer *tr); /* optional: else the kind's */
    double (*probe)(const dt_trainer *tr);                 /* optional: param_probe (else the kind's weights) */
    void (*state)(const dt_trainer *tr, dt__strategy_state *s);
    int gpt_state_bytes; /* the summary's model_state_bytes from the GPT's buffers (one whole model) */
    /* optional: the summary's model_state_bytes otherwise (docs/zero.md),
     * and the elements of this rank's flat buffer they are of */
    void (*state_bytes)(const dt_trainer *tr, size_t *weights, size_t *gradients, size_t *optimizer,
                        size_t *working, size_t *numel);
    const char *summary_key;                   /* its object in the summary, or NULL */
    json_t *(*summary)(const dt_trainer *tr);  /* with summary_key */
    /* checkpoints (checkpoint_io.c; docs/checkpoints.md): */
    int (*ck_role)(const dt_trainer *tr);           /* DT__CK_* */
    const char *(*ck_kind)(const dt_trainer *tr);   /* the manifest's layout kind */
    const char *(*ck_shards)(const dt_trainer *tr); /* what a shard holds, in words */
    /* optional: before a save, the iteration and version the shard is of (and any exchange it needs) */
    dt_status (*ck_prepare)(dt_trainer *tr, const char *dir, int64_t *iteration, int64_t *version);
    const dt_loss_scaler *(*ck_scaler)(const dt_trainer *tr); /* optional: the scaler a shard keeps */
    /* its records after the trainer's, the data's and the scaler's; read back
     * and applied (it: the shard's iteration; a server keeps s, emptying it) */
    dt_status (*ck_save)(dt_trainer *tr, dt_checkpoint_shard *s, int64_t version);
    dt_status (*ck_load)(dt_trainer *tr, dt_checkpoint_shard *s, int64_t it);
    dt_status (*restored)(dt_trainer *tr); /* optional: after every rank loaded its checkpoint part */
    /* the non-finite search (nonfinite.c): DT__NF_AFTER the step fails
     * (the whole model's forward, the gradients, the weights), DT__NF_IN_STEP
     * (the stages found it already), DT__NF_NONE (updated before the check) */
    int nonfinite;
    void (*free)(dt_trainer *tr); /* what it holds; safe after a failed create */
} dt__strategy;

enum { DT__NF_AFTER = 0, DT__NF_IN_STEP, DT__NF_NONE };

extern const dt__strategy dt__strategy_replica, dt__strategy_zero, dt__strategy_ps, dt__strategy_pipe;

struct dt_trainer {
    dt_train_config cfg; /* copy; strings point to the owned copies below */
    char *task, *path, *device, *trace_path, *save_dir, *load_dir, *load_hf, *tokenizer, *cluster;
    dt_gpt_init init; /* the GPT's initial weights: cfg.seed's, or --load-hf's (open during create only) */
    int threads_requested; /* cfg.threads as given (0: automatic), before the backend resolved it */

    dt_backend *be;
    dt__tune tune;              /* the workers of be for each step (thread_tune.c) */
    const dt__model_kind *kind; /* cfg.model_kind's table */
    const dt__strategy *strategy; /* fixed at create */
    dt_optim opt; /* the replica strategy's optimizer (opt_ready) */
    int opt_ready;
    dt_loss_scaler scaler; /* when cfg.use_loss_scaling */
    dt_lr_schedule lr;     /* cfg.lr after lr_scaling */
    size_t num_params;

    int B, T, n_micro;    /* micro-batch size, sequence length, micro-batches per step on this rank */
    dt_grid grid;         /* the ranks' layout (t x 1 x d x p, then the servers; lib/parallel/grid.c) */
    int dp_rank, dp_size; /* data parallelism (1 rank without a communicator): the workers */
    int rank;             /* in cfg.comm (0 without one): trace pid and file */
    dt_comm *dp_comm;     /* the data-parallel ranks: cfg.comm, or the workers' with a parameter server */
    dt_comm *gcomm;       /* owned: NCCL over cfg.comm's ranks for device gradients (--device cuda), else NULL */

    int64_t t_start_ns;
    int64_t iter; /* steps completed */

    struct {                  /* model_gpt.c */
        dt_dataset *data;     /* byte tasks and text */
        dt_gpt *model;        /* NULL when split across stages */
        int32_t *tokens;      /* (B,T) host */
        int32_t *targets;     /* (B,T) host */
        int32_t *example;     /* (B,T) host: example id per counted target */
        float *pos_loss;      /* (B,T) host */
        uint8_t *pos_correct; /* (B,T) host */
    } gpt;
    struct { /* model_mlp.c */
        dt_blobs *blobs;
        dt_mlp *net;
        float *x;   /* (B, D) host: inputs */
        int32_t *y; /* (B) host: labels */
    } mlp;

    /* step_dp.c: gradient buckets, contiguous ranges of the flat gradient
     * buffer in backward order; a comm thread allreduces each as soon as
     * the last micro-batch's backward has finished its layers, so
     * communication overlaps the rest of the backward. */
    struct {
        int n_buckets;
        size_t *bucket_off, *bucket_len; /* (n_buckets) in floats */
        int *bucket_low;                 /* (n_buckets) lowest layer of the bucket: ready after its backward */
        int *queue;                      /* (n_buckets) launched buckets, in order */
        int q_head, q_tail, n_done, stop, overlap_active;
        dt_status comm_status;
        char comm_err[512]; /* the comm thread's message (dt_last_error is per thread) */
        pthread_t comm_thread;
        int comm_thread_on;
        pthread_mutex_t mu; /* the queue, and trace writes from both threads */
        pthread_cond_t cv;
    } dp;

    struct dt__fp8 *fp8; /* fp8_train.c: FP8 training's state (--fp8-format), else NULL */
    struct {             /* fp8_train.c: the run's figures since its start (or resume) */
        double *sat, *flush, *values; /* (tensors) */
        float *amax;                  /* (tensors) the largest amax seen */
        int64_t steps, steps_saturated;
    } fp8_run;

    dt__zero *zero;  /* step_zero.c: ZeRO-1 (cfg.use_distributed_optimizer with data parallelism), else NULL */
    dt__zgpt *zgpt;  /* step_zero.c: ZeRO-2/3 (cfg.zero_stage >= 2), the model of dt__model_gpt_zero, else NULL */
    dt_comm *zself;  /* owned: the one-rank communicator of ZeRO-2/3 without cfg.comm */
    int zero_probed; /* step_zero.c: zero_probe holds the FP32 masters' fingerprint (mixed precision) */
    double zero_probe;

    struct {                         /* step_ps.c */
        dt__ps *rt;                  /* parameter server (cfg.ps_mode), else NULL */
        int broken;                  /* an exchange failed: do not say goodbye to the servers */
        int pulled;                  /* a worker has pulled the servers' first weights */
        dt_checkpoint_shard *resume; /* a server: the loaded shard, applied when serving starts */
        int64_t start_version;       /* ... and its version */
    } ps;

    struct {             /* step_pipe.c */
        dt__pipe *rt;    /* this rank's stage (cfg.pipeline_size or tensor_size > 1), else NULL */
        double probe;    /* after the last step: the whole model's weights fingerprint (NAN before) */
        double *figures; /* (3p) after the last step: per stage peak activation bytes, versions alive, in flight */
        long long mismatch, disagree; /* after the last step: dt__pipe_version_check */
    } pipe;

    struct { /* trace_hooks.c, trace_gather.c */
        dt_trace_writer *writer;
        dt_status status;    /* first error while writing from a hook */
        int micro;           /* micro-batch being computed (hook args) */
        char *merged_path;   /* several ranks: the --trace path, where rank 0 merges the rank files */
        dt_comm_clock clock; /* several ranks: this rank's clock against rank 0's */
        size_t live_act;     /* the last live_activation_bytes written (SIZE_MAX: none yet) */
    } trace;

    struct {             /* nonfinite.c: non-finite loss or gradient norm (FP32) */
        int skip;        /* this step is skipped (--skip-nonfinite) */
        int located;     /* pipeline/tensor parallelism: where was found in this step (dt__nf_pipe_locate) */
        int shared;      /* the step failed with a message every rank has word for word (an agreed where) */
        int loss_overflow; /* fp16: this step's loss was inf/NaN, an overflow; where says where (dt__loss_overflow_locate) */
        int64_t skipped; /* steps skipped so far */
        char where[256]; /* the first bad layer, as the message says it */
    } nf;

    struct {               /* checkpoint_io.c */
        int64_t last_save; /* iteration (a server: version) last saved or loaded; -1 none */
        char *loaded, *note, *saved;
    } ck;

    struct {                 /* trainer.c: throughput (the first step is the warm-up) */
        double first_step_s; /* duration of step 0 */
        double rest_s;       /* total duration of steps 1.. */
        double rest_tokens;  /* tokens of steps 1.. */
    } speed;
};

/* What a step strategy hands back to the step's common end (trainer.c). */
struct dt__step_ctx {
    float S;              /* the loss scale the backward started from */
    double loss_sum;      /* the step's loss (all ranks' after the update) */
    dt__update_result ur; /* the update's figures */
    dt__ps_reply rep;     /* a parameter-server worker: the servers' answer */
    int64_t t_opt;        /* when the update began */
};

/* ---- trainer.c ---- */
/* The batch index of micro-batch j (0 .. n_micro * dp_size - 1) of the current step. */
uint64_t dt__micro_index(const dt_trainer *tr, int j);
void dt__tr_set_hook(dt_trainer *tr, int on);
size_t dt__tr_peak_act(const dt_trainer *tr);

/* ---- config_json.c ---- */
/* Reals are written with 15 significant digits: exact for every float the
 * summary holds, and 0.1 stays "0.1" instead of 0.10000000000000001. */
#define DT__JSON_PRECISION JSON_REAL_PRECISION(15)
json_t *dt__config_object(const dt_train_config *cfg);
/* dt__config_object of the trainer's copy plus what the run itself decided
 * or found: the threads asked for, checkpoint saves, the data's size, the
 * machine (docs/trace-format.md, "The run's environment"). For the trace
 * header and the summary; checkpoints compare dt__config_object only. */
json_t *dt__run_config_object(const dt_trainer *tr);
/* The cluster description's rules (dt_train_config.cluster). */
dt_status dt__validate_cluster(const char *cluster);
void dt__jset(json_t *obj, const char *key, json_t *v, int *bad);
json_t *dt__jreal_or_null(double v);

/* ---- config.c / checkpoint_io.c ---- */
dt_status dt__validate_checkpoint(const dt_train_config *cfg);

/* ---- trace_hooks.c ---- */
dt_status dt__trace_write(dt_trainer *tr, const dt_trace_event *e);

/* fp8_train.c: FP8 training (--fp8-format) */
dt_status dt__fp8_train_create(dt_trainer *tr); /* after the model and strategy; no-op without FP8 */
void dt__fp8_train_free(dt_trainer *tr);
dt_status dt__fp8_train_step_end(dt_trainer *tr); /* collective: after each step */
void dt__fp8_train_freeze(dt_trainer *tr, int on); /* evaluation records nothing */
dt_status dt__fp8_train_trace_hist(dt_trainer *tr); /* collective: before the trace closes */
json_t *dt__fp8_train_summary(const dt_trainer *tr);
dt_status dt__fp8_ck_put(const dt_trainer *tr, dt_checkpoint_shard *s);
dt_status dt__fp8_ck_get(dt_trainer *tr, const dt_checkpoint_shard *s);
dt_status dt__trace_counter(dt_trainer *tr, const char *name, int64_t ts, double value);
dt_status dt__trace_grad_amax(dt_trainer *tr, const dt_paramset *layout, const float *amax, float S, int64_t ts);
dt_status dt__trace_check(dt_trainer *tr);
dt_status dt__trace_open(dt_trainer *tr);
/* live_activation_bytes: `bytes` held at ts_ns (trainer clock), written only when it changed. */
void dt__trace_live_act(dt_trainer *tr, int64_t ts_ns, size_t bytes);
dt_status dt__trace_step_end(dt_trainer *tr, const dt__step_ctx *c, size_t act_bytes, int64_t t1);
void dt__layer_hook(void *ctx, int layer, char pass, int64_t t0_ns, int64_t t1_ns);
void dt__comm_hook(void *ctx, const char *phase, int step, int peer, size_t bytes, int64_t t0_ns, int64_t t1_ns);
/* path with ".rank<r>" before its ".json" (or at its end) into out[cap] */
void dt__trace_rank_path(const char *path, int rank, char *out, size_t cap);

/* ---- trace_gather.c ---- */
/* 1 when the trace is one file per rank (a communicator of several ranks) */
int dt__trace_multi(const dt_trainer *tr);
/* Collective at create, before t_start_ns is taken: this rank's clock against rank 0's. */
dt_status dt__trace_sync(dt_trainer *tr);
/* The rank file's otherData "clock" key (malloc'd JSON text, NULL: out of memory). */
char *dt__trace_clock_other(const dt_trainer *tr);
/* Collective after this rank's file was closed with status `closed`: the
 * rank files to rank 0, which writes the merged trace. Returns this rank's
 * failure (its own first). */
dt_status dt__trace_gather(dt_trainer *tr, dt_status closed);

/* ---- step_dp.c ---- */
dt_status dt__tr_dp_create(dt_trainer *tr);
dt_status dt__tr_dp_start(dt_trainer *tr);
void dt__tr_dp_free(dt_trainer *tr);
void dt__tr_dp_launch_bucket(dt_trainer *tr, int b);
dt_status dt__tr_dp_update(dt_trainer *tr, dt__step_ctx *c);

/* ---- step_zero.c ---- */
dt_status dt__tr_zero_create(dt_trainer *tr);
dt_status dt__tr_zero_update(dt_trainer *tr, dt__step_ctx *c);

/* ---- step_ps.c ---- */
dt_status dt__tr_ps_create(dt_trainer *tr);
dt_status dt__tr_ps_begin_step(dt_trainer *tr);
dt_status dt__tr_ps_update(dt_trainer *tr, dt__step_ctx *c);
dt_status dt__tr_ps_ensure_pulled(dt_trainer *tr);
void dt__tr_ps_shutdown(dt_trainer *tr);
json_t *dt__tr_ps_summary(const dt_trainer *tr);

/* ---- step_pipe.c ---- */
dt_status dt__tr_pipe_create(dt_trainer *tr);
dt_status dt__tr_pipe_step(dt_trainer *tr, dt_train_stats *out);
json_t *dt__tr_pipe_summary(const dt_trainer *tr);

/* ---- nonfinite.c ---- */
dt_status dt__nonfinite(dt_trainer *tr, const char *what, double v);
dt_status dt__loss_check(dt_trainer *tr, double loss);
int dt__loss_overflow(const dt_trainer *tr, double loss);
dt_status dt__loss_overflow_locate(dt_trainer *tr);
dt_status dt__min_scale_check(dt_trainer *tr);
dt_status dt__gpt_locate_forward(dt_trainer *tr, char *where, size_t cap);
dt_status dt__nf_pipe_locate(void *ctx, int64_t t);

/* ---- checkpoint_io.c: a shard's records, for the strategies' ck_save and ck_load ---- */
/* prefix<tensor> of a flat buffer in backend memory, one record per tensor
 * of L (get with buf NULL: only check they are there, with their sizes) */
dt_status dt__ck_put_tensors(dt_checkpoint_shard *s, dt_backend *be, const char *prefix, const dt_paramset *L,
                             const float *buf);
dt_status dt__ck_get_tensors(const dt_checkpoint_shard *s, dt_backend *be, const char *prefix, const dt_paramset *L,
                             float *buf);
/* an optimizer's step and state (get with apply 0: only check) */
dt_status dt__ck_put_optim(dt_checkpoint_shard *s, const dt_optim *o);
dt_status dt__ck_get_optim(const dt_checkpoint_shard *s, dt_optim *o, int apply);
/* a ZeRO segment of params (the whole flat buffer; NULL at stages 2/3): its
 * weights (masters under mixed precision) and its optimizer */
dt_status dt__ck_put_zero(dt_checkpoint_shard *s, dt_backend *be, dt__zero *z, float *params);
dt_status dt__ck_get_zero(const dt_checkpoint_shard *s, dt_backend *be, dt__zero *z, float *params);
/* ZeRO-2/3: the units the shard was cut from (another cut is refused in words) */
dt_status dt__ck_put_units(dt_checkpoint_shard *s, const dt__zero *z);
dt_status dt__ck_get_units(const dt_checkpoint_shard *s, const dt__zero *z, int stage);
dt_status dt__ck_put_scaler(dt_checkpoint_shard *s, const dt_loss_scaler *sc);
dt_status dt__ck_get_scaler(const dt_checkpoint_shard *s, dt_loss_scaler *sc);

/* ---- trainer.c: throughput ---- */
void dt__tr_account(dt_trainer *tr, double secs);

#endif
