/* runner_impl.h: the insides of the layer runner (runner.h), shared by
 * runner.c (creation, slots, memory, forward) and runner_backward.c (the
 * backward, whole or split into B and W); never installed, included by
 * nothing else.
 *
 * Invariants: a slot is busy (DT__RSLOT_FORWARD or DT__RSLOT_B) from its
 * forward until its backward (its W when split); in the stage discipline
 * the accounting (act_now, act_peak) is the sum of busy slots' arenas,
 * plus while an op runs its slot's growth and the work arena; in the
 * shared one, the slot's arena's own use and peak above its mark. Arenas
 * are released in stack order (dt__runner_drop only lowers). */
#ifndef DT_RUNNER_IMPL_H
#define DT_RUNNER_IMPL_H

#include "runner.h"

typedef struct dt__rslot {
    dt_buffer buf; /* backs the arena */
    dt__arena arena;
    float *input;         /* (B,T,C) received activation (not first; the rank's rows under sp) */
    int32_t *tokens;      /* (B,T) device */
    int32_t *targets;     /* (B,T) device (last) */
    float *losses;        /* (B,T) last */
    uint8_t *correct;     /* (B,T) last */
    float *x0;            /* (B,T,C) embedding output (first) */
    dt__block_acts *acts; /* (nb) each block's saved tensors (a shard's for t > 1) */
    dt__head_acts head;
    float **ckpt;                       /* (groups) full recomputation: each group's output (B,T,C) */
    void *(*packed)[DT__BLOCK_NFIELDS]; /* (nb) half mode: each block's saved tensors in 2-byte storage */
    /* the B/W split (dt__runner_set_split), from B until W, in the arena: */
    dt__block_keep *keep;              /* (nb) what each block's W needs from its B */
    void *(*kpacked)[DT__BLOCK_NKEEP]; /* (nb) half storage: each block's keep in 2-byte storage */
    float *dlnf;                       /* (B,T,C) last: the final LayerNorm's output gradient */
    float *demb;                       /* (B,T,C) first: the gradient of the embedding output */
    /* shared discipline: arena marks before block l's saved tensors (full:
     * before group l's output), released as the backward passes them */
    size_t *lmark;    /* (nb) */
    size_t head_mark; /* before the head's activations */
    int B, T;         /* of the forward in flight */
    int n_counted, has_targets;
    int busy;    /* DT__RSLOT_FREE, _FORWARD (after its forward), _B (after its B, until its W) */
    size_t mark; /* arena mark after the fixed buffers: forward activations start here */
} dt__rslot;

enum { DT__RSLOT_FREE = 0, DT__RSLOT_FORWARD = 1, DT__RSLOT_B = 2, DT__RSLOT_BUSY = -1 /* either */ };

struct dt__runner {
    dt_gpt_config cfg;
    dt_backend *be;
    int l0, nb, first, last, nslots, B, T, shared, t;
    dt__shard sh; /* {t, sp}: the blocks' split (gpt_layers.h) */
    dt__cpos cp;  /* context parallelism's rows (c 1: the whole sequence); T below is the rank's positions */
    int32_t *cp_tok, *cp_tgt; /* (B*T) c > 1: the rank's rows of the tokens and targets (host) */
    const dt__block_ops *ops;
    void *ops_ctx;
    dt__vocab vocab;      /* vocab.t > 1: vocabulary-parallel (dt__runner_vp) */
    dt_gpt_config hcfg;   /* the head's: cfg with vocab_size the rank's rows */
    int32_t *tok_host;    /* (B*T) vocabulary-parallel: the masked tokens (host) */
    dt__runner_views w, g; /* the owner's views of the weights and gradients */
    dt__rslot *slots;
    dt_buffer sbuf; /* scratch, the ops' scratch, dres, dout */
    dt__block_scratch scratch;
    float *xs;   /* the ops' backward scratch (NULL: none) */
    float *dres; /* (B,T,C) the gradient flowing down the layers */
    float *dout; /* (B,T,C) the received gradient of the output (not last) */
    dt_buffer work_buf;
    dt__arena work_own;
    dt__arena *work;          /* one op's transients: work_own, or (shared) the slot's arena */
    size_t act_now, act_peak; /* floats, the stage discipline */
    /* the slot whose arena grows in the running forward or B (NULL none),
     * from grow_from: its part not yet in act_now */
    const dt__rslot *growing;
    size_t grow_from;
    int split;       /* slots keep what W needs from B until W */
    int trace_split; /* a whole backward's spans are B and W apart */
    dt_recompute recompute;
    int recompute_k, groups; /* full: blocks per group (at most nb), groups */
    dt_dtype precision;      /* DT_F32, DT_F16 or DT_BF16 */
    dt__rounder rnd;         /* storage rounding; scratch in round_buf */
    dt__fp8 *fp8;            /* the owner's FP8 state (dt__runner_set_fp8), or NULL */
    dt_buffer round_buf;
    dt__runner_hooks hooks;
    void *hctx;
    /* dt__runner_forward_check: nf_pos the first non-finite layer, -1 none yet */
    int nf_check, nf_pos;
};

size_t dt__runner_pad(size_t n);
const dt__vocab *dt__runner_vp(const dt__runner *r); /* NULL: the whole vocabulary */
int dt__runner_packs(const dt__runner *r);
dt__block_pack dt__runner_pack_of(const dt__runner *r, int l, int B, int T);
void dt__runner_note_peak(dt__runner *r);
/* Release a to mark if it is above it (stack order: never raises). */
void dt__runner_drop(dt__arena *a, size_t mark);
void dt__runner_span(const dt__runner *r, int layer, char pass, int64_t t0);
dt_status dt__runner_bind(const dt__runner *r, int layer, char pass);
const float *dt__runner_slot_out(const dt__runner *r, const dt__rslot *sl, const float *xin);
dt_status dt__runner_slot_check(const dt__runner *r, int slot, int want, const char *what);
/* Packed: block l's FP32 input (x for the first block, else the previous
 * block's packed output unpacked into the work arena). */
dt_status dt__runner_packed_input(dt__runner *r, dt__rslot *sl, int l, const float *x, const float **in);
/* Full recomputation: group g's blocks forward from x, their activations
 * in arena a; *out the last block's output; again = 1: the backward's
 * recomputation (bind and span 'R'). */
dt_status dt__runner_group_forward(dt__runner *r, dt__rslot *sl, int g, dt__arena *a, const float *x,
                                   const float **out, int again);
void dt__runner_free_slot(dt__runner *r, dt__rslot *sl);

#endif
