/* fp8.h: FP8 training's state and the linear layers' GEMMs under it
 * (private; lib/model/fp8.c).
 *
 * Under --fp8-format the four linear layers of every block (qkv, attproj,
 * fc, fcproj) run their forward, input-gradient and weight-gradient GEMMs
 * on FP8 inputs, as Transformer Engine's Linear does: the activation x,
 * the weight w and the output gradient dy are each converted with a scale
 * (include/dt_fp8.h), the GEMM multiplies FP8 values with FP32
 * accumulation, and its output is divided by the two scales (the bias
 * added after, in the bf16 mode's precision). Everything else runs as
 * under --bf16. The block code calls dt__linear_* for these twelve GEMMs;
 * with no FP8 state they are the backend's matmul_forward/_backward.
 *
 * The tensors: each block l has 12, index 12 l + 3 lin + role, lin
 * DT__LIN_QKV .. DT__LIN_FCPROJ, role 0 x, 1 w, 2 dy (named
 * "h.l.qkv.x" ...). For each the state holds this step's amax and counts
 * (recorded by the forward's x and w conversions and the backward's dy
 * conversion, not by recomputations or W's conversions of the same
 * values), the run's histogram of |v| by binade below the call's amax,
 * and for delayed scaling the amax history and the scale in force (the
 * first step, with no history, takes each tensor's own amax as
 * tensorwise does: torchao's amax initialisation; Transformer Engine
 * starts from scale 1, which flushes most E5M2 gradients of that step
 * and, under Adam, makes it a bad step). The
 * Counted once per micro-batch whatever the layout: a tensor-parallel
 * group's replicated tensors by its rank 0, weights by context rank 0.
 * whole model's tensors are held on every rank (a pipeline stage records
 * only its own); lib/train/fp8_train.c reduces them over the ranks after
 * each step and updates the histories and scales.
 *
 * Conversions are repeated where TE would keep the FP8 copy (w in the
 * input-gradient GEMM, x in the weight-gradient GEMM): with the step's
 * scale the values are the same, and no activation memory is added. The
 * FP8 operands live in two buffers of the state, grown on demand.
 *
 * Invariant: a block op runs between dt__fp8_at (the runner's bind) and
 * the next; recording is off while frozen (evaluation). */
#ifndef DT_MODEL_FP8_H
#define DT_MODEL_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "dt_backend.h"
#include "dt_fp8.h"

enum { DT__LIN_QKV = 0, DT__LIN_ATTPROJ, DT__LIN_FC, DT__LIN_FCPROJ, DT__LIN_N };
enum { DT__FP8_X = 0, DT__FP8_W = 1, DT__FP8_DY = 2 };
#define DT__FP8_PER_BLOCK (3 * DT__LIN_N)
/* Relative binades kept per tensor: j = floor(log2 amax) - floor(log2 |v|), 0..63 */
#define DT__FP8_REL 64

typedef struct dt__fp8_settings {
    dt_fp8_mode mode;
    dt_fp8_recipe recipe;
    dt_fp8_amax_algo algo;
    int margin;
    int history_len;
} dt__fp8_settings;

typedef struct dt__fp8 {
    dt__fp8_settings set;
    int L, n; /* blocks; tensors (12 L) */
    int layer;  /* the block being run (dt__fp8_at) */
    int record; /* 1: this pass's conversions are recorded */
    int frozen; /* 1: nothing is recorded (evaluation) */
    int tp_rank; /* > 0: tensors replicated over the tensor-parallel group are not counted here */
    int cp_rank; /* > 0: the weights (the same on every context rank) are not counted here */
    /* per tensor (n) */
    float *scale;          /* delayed: the scale in force (1 at the start) */
    float *history;        /* (n, history_len) delayed: the amax history, a ring */
    int hpos, hfill;       /* the ring's next slot, and its filled entries */
    float *amax;           /* this step's max |v| (0 none) */
    double *sat, *flush;   /* this step's saturated and flushed values */
    double *values;        /* this step's converted values */
    double *rel;           /* (n, DT__FP8_REL) the run's values by binade below their call's amax */
    uint32_t hist[DT_FP8_HIST];
    /* the FP8 operands (backend memory, floats), the ones vector of the bias GEMMs */
    dt_backend *be;
    float *qa, *qb, *ones;
    size_t qa_cap, qb_cap, ones_cap;
} dt__fp8;

/* A state for a model of L blocks (all its tensors), on be, which must
 * have the FP8 ops. */
dt_status dt__fp8_create(dt_backend *be, const dt__fp8_settings *s, int L, dt__fp8 **out);
void dt__fp8_free(dt__fp8 *f);
/* "h.l.qkv.x" for tensor i */
void dt__fp8_tensor_name(int i, char *buf, size_t n);
/* 1 when tensor i (its lin and role) is the same on every rank of a
 * tensor-parallel group: the column-parallel layers' x, the
 * row-parallel layers' dy */
int dt__fp8_replicated(int i);
/* The runner's bind: layer (whole-model; blocks 0..L-1) runs pass next. */
void dt__fp8_at(dt__fp8 *f, int layer, char pass);
/* Clear this step's amax and counts. */
void dt__fp8_step_clear(dt__fp8 *f);

/* The whole model of lib/model/gpt.c under f (NULL: off). */
struct dt_gpt;
void dt__gpt_set_fp8(struct dt_gpt *m, dt__fp8 *f);

/* The linear layers: f NULL is the backend's matmul (dt_backend.h) */
/* out(N,OC) = x(N,C) w(OC,C)^T + bias(OC) (bias may be NULL) */
dt_status dt__linear_forward(dt_backend *be, dt__fp8 *f, int lin, float *out, const float *x, const float *w,
                             const float *bias, int N, int C, int OC);
/* dx(N,C) = dy(N,OC) w(OC,C) (overwritten) */
dt_status dt__linear_dgrad(dt_backend *be, dt__fp8 *f, int lin, float *dx, const float *dy, const float *w, int N,
                           int C, int OC);
/* dw(OC,C) += dy^T x, dbias(OC) += column sums of dy (dbias may be NULL); w: the forward's */
dt_status dt__linear_wgrad(dt_backend *be, dt__fp8 *f, int lin, float *dw, float *dbias, const float *dy,
                           const float *x, const float *w, int N, int C, int OC);

#endif
