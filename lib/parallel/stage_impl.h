/* stage_impl.h: the insides of a pipeline stage (stage.h), shared by
 * stage.c (creation, layout, slots, weights, forward) and stage_backward.c
 * (the backward, whole or split into B and W); never installed, included by
 * nothing else.
 *
 * Invariants: a slot is busy (DT__SLOT_FORWARD or DT__SLOT_B) from its
 * forward until its backward (its W when split); the activation accounting
 * (act_now, act_peak) is the sum of busy slots' arenas, plus while an op
 * runs its slot's growth and the work arena's transient tensors. */
#ifndef DT_STAGE_IMPL_H
#define DT_STAGE_IMPL_H

#include "gpt_layers.h"
#include "stage.h"
#include "tp.h"

#define DT__NBLOCK 12 /* tensors per block, as in gpt.c's layout */

typedef struct dt__slot {
    dt_buffer buf; /* backs the arena */
    dt__arena arena;
    float *input;         /* (B,T,C) received activation (stages > 0) */
    int32_t *tokens;      /* (B,T) device */
    int32_t *targets;     /* (B,T) device (last stage) */
    float *losses;        /* (B,T) last stage */
    uint8_t *correct;     /* (B,T) last stage */
    float *x0;            /* (B,T,C) embedding output (first stage) */
    dt__block_acts *acts; /* (nb) each block's saved tensors (a shard's with tensor parallelism, tp.h) */
    dt__head_acts head;
    float **ckpt;                       /* (groups) full recomputation: each group's output (B,T,C) */
    void *(*packed)[DT__BLOCK_NFIELDS]; /* (nb) half mode: each block's saved tensors in 2-byte storage */
    /* the B/W split (dt__stage_set_split), from B until W, in the arena: */
    dt__block_keep *keep;              /* (nb) what each block's W needs from its B */
    void *(*kpacked)[DT__BLOCK_NKEEP]; /* (nb) half storage: each block's keep in 2-byte storage */
    float *dlnf;                       /* (B,T,C) last stage: the final LayerNorm's output gradient */
    float *demb;                       /* (B,T,C) first stage: the gradient of the embedding output */
    int n_counted, has_targets;
    int busy;    /* DT__SLOT_FREE, _FORWARD (after its forward), _B (after its B, until its W) */
    size_t mark; /* arena mark after the fixed buffers: forward activations start here */
} dt__slot;

enum { DT__SLOT_FREE = 0, DT__SLOT_FORWARD = 1, DT__SLOT_B = 2, DT__SLOT_BUSY = -1 /* dt__slot_check: either */ };

struct dt__stage {
    dt_gpt_config cfg;
    dt_backend *be;
    int l0, l1, nb, first, last, nslots, B, T;
    dt_paramset layout;
    int *whole_index;  /* (layout.count) each tensor's index in the whole model's layout */
    size_t offset;     /* whole-model element offset of element 0 (t = 1) */
    dt_paramset whole; /* the whole model's layout */
    dt__tp *tp;        /* tensor parallelism (not owned), or NULL */
    int t, tr;         /* tensor-parallel size and rank */
    uint8_t *sharded;  /* (layout.count) t > 1: 1 this rank holds a shard of the tensor; 2 the first
                               (replicated) tensor of a sharded block; 0 replicated; 3 the last
                               stage's copy of the tied wte (counted on the first stage) */
    float *tscratch;   /* t > 1: the tensor-parallel block's backward scratch */
    dt_buffer params, grads;
    /* views: weights bound per call, gradients fixed */
    float *wte, *wpe, *gwte, *gwpe;
    dt__block_params *w, *g; /* (nb) */
    dt__head_params hw, hg;
    dt__slot *slots;
    dt_buffer shared; /* scratch + dres + dout */
    dt__block_scratch scratch;
    float *dres, *dout;
    size_t act_now, act_peak; /* floats */
    /* the slot whose arena is growing in the running forward or B (NULL
     * none), from grow_from: its part not yet in act_now (dt__stage_note_peak) */
    const dt__slot *growing;
    size_t grow_from;
    int split; /* dt__stage_set_split: slots sized to keep what W needs from B until W */
    /* activation recomputation (dt__stage_set_recompute), as lib/model/gpt.c's */
    dt_recompute recompute;
    int recompute_k, groups; /* full: blocks per group (at most nb), groups of the stage's blocks */
    dt_buffer work_buf;      /* one op's transient activations, shared by the slots (one op runs at a time) */
    dt__arena work;
    /* mixed precision (dt__stage_set_precision), as lib/model/gpt.c's */
    dt_dtype precision; /* DT_F32, DT_F16 or DT_BF16 */
    dt__rounder rnd;    /* storage rounding; scratch in round_buf */
    dt_buffer round_buf;
    dt_buffer wq; /* (numel) the weights of this call rounded to precision, as FP32: what the GEMMs read */
    /* (numel) wq in precision, kept where the backend can read GEMM
     * operands from it (set_gemm_shadow): the rounding's own scratch */
    dt_buffer whalf;
    /* wq holds wq_src's values rounded as of weights epoch wq_epoch (valid when
     * wq_src is set): a later call with the same weights and no change since
     * (dt__stage_weights_changed) reuses it instead of rounding again */
    const float *wq_src;
    uint64_t epoch, wq_epoch;
    dt_buffer gmb; /* (numel) one micro-batch's parameter gradients, rounded before they accumulate */
    dt__stage_recompute_fn recompute_hook; /* may be NULL */
    void *recompute_ctx;
    /* dt__stage_forward_check: the forward looks at each layer's output;
     * nf_pos is the first non-finite one (0 embedding, 1 + l block l of the
     * whole model, L + 1 head), -1 none yet */
    int nf_check, nf_pos;
};

/* Shared by stage.c and stage_backward.c. */
const dt__rounder *dt__stage_rnd(const dt__stage *st);
/* Bind the weights of this call: w (NULL: the stage's own), rounded under mixed precision. */
dt_status dt__stage_use_weights(dt__stage *st, const float *w);
/* Half storage: without full recomputation, a 16-bit stage packs its blocks' saved tensors. */
int dt__stage_packs(const dt__stage *st);
dt__block_pack dt__stage_pack_of(const dt__stage *st, int l);
size_t dt__stage_att_floats(const dt__stage *st);
/* Report a recomputation of block l (stage index) that began at t0 to the hook. */
void dt__stage_recomputed(const dt__stage *st, int l, int64_t t0);
/* The output of a slot's last block (xin when the stage has none). */
const float *dt__slot_out(const dt__stage *st, const dt__slot *sl, const float *xin);
/* Raise the peak to what is in use now: busy slots, the growing slot's
 * part not yet counted, and the work arena. */
void dt__stage_note_peak(dt__stage *st);
/* Half storage: block l's FP32 input (x for the stage's first block, else
 * the previous block's packed output unpacked into the work arena). */
dt_status dt__stage_packed_input(dt__stage *st, dt__slot *sl, int l, const float *x, const float **in);
/* Full recomputation: group g's blocks forward from x, their activations
 * in arena a (the work arena is reset first); *out is the last block's
 * output; again = 1: the backward's recomputation (reported to the hook). */
dt_status dt__stage_group_forward(dt__stage *st, dt__slot *sl, int g, dt__arena *a, const float *x, const float **out,
                                  int again);
/* slot is in range and in state want (DT__SLOT_BUSY: either busy state). */
dt_status dt__slot_check(const dt__stage *st, int slot, int want, const char *what);

#endif
