/* tp.h: Megatron-LM tensor parallelism for a transformer block
 * (lib/parallel/tp.c), never installed.
 *
 * With t ranks, rank r holds:
 *   ln1, ln2 (gains, biases)       replicated;
 *   qkv.w (3C/t, C), qkv.b (3C/t)  column-parallel: the q, k and v rows of
 *                                  heads r*NH/t .. (r+1)*NH/t - 1;
 *   attproj.w (C, C/t)             row-parallel: the matching columns;
 *   fc.w (4C/t, C), fc.b (4C/t)    column-parallel: rows r*4C/t ..;
 *   fcproj.w (C, 4C/t)             row-parallel: the matching columns;
 *   attproj.b, fcproj.b (C)        replicated, added once (by rank 0) to the
 *                                  partial outputs before g sums them.
 * The conjugate operators of the Megatron-LM paper (Shoeybi et al. 2019,
 * section 3): f before each column-parallel layer (identity forward,
 * allreduce of the input gradient backward) and g after each row-parallel
 * layer (allreduce forward, identity backward). A block therefore makes
 * exactly two allreduces forward (g after attention, g after the MLP) and
 * two backward (f before each LayerNorm's backward).
 *
 * Replicated parameters get identical gradients on every rank (they see
 * the same allreduced values, and the collectives give bit-identical
 * results everywhere), so they stay equal without communication.
 * FP32 only. */
#ifndef DT_TP_H
#define DT_TP_H

#include <stddef.h>
#include <stdint.h>

#include "dt_backend.h"
#include "dt_comm.h"
#include "dt_gpt.h"
#include "runner.h"

typedef struct dt__tp {
    dt_comm *comm; /* the tensor-parallel group: t ranks, rank r */
    dt_allreduce_algo algo;
    size_t chunk_bytes;
    /* the embedding and LM head split by vocabulary rows over the group
     * (dt__tp_vocab; Megatron's default), else replicated */
    int vocab_parallel;
    long long allreduces_fwd, allreduces_bwd; /* made by f and g so far */
    /* sequence parallelism (lib/parallel/sp.c): the blocks' per-token
     * regions split over the group (its collectives are traced, not counted) */
    int sp;
    float *ln_grad; /* (2C) backend memory, the owner's: one LayerNorm's gradients before their sum */
    /* optional (traces): each collective, kind DT__TP_F, _G (pass 'F' or
     * 'B'), _VOCAB_SUM or _VOCAB_GATHER, with its start and end from
     * dt_time_ns() */
    void (*event)(void *ctx, int kind, char pass, int64_t t0_ns, int64_t t1_ns);
    void *event_ctx;
} dt__tp;

enum {
    DT__TP_F = 0,
    DT__TP_G = 1,
    DT__TP_VOCAB_SUM = 2,
    DT__TP_VOCAB_GATHER = 3,
    DT__TP_SP_SCATTER = 4, /* sequence parallelism: g's reduce-scatter (forward), f's (backward) */
    DT__TP_SP_GATHER = 5,  /* its all-gathers: f's (forward), g's (backward) */
    DT__TP_SP_LN = 6,      /* the sum of a LayerNorm's gain and bias gradients */
    DT__TP_NKINDS = 7
};

/* The vocabulary split over the group (gpt_layers.h's dt__vocab): this
 * rank's rows of a vocabulary of V, and its collectives on tp (the
 * embedding output's allreduce forward, the head input gradient's
 * backward, the loss statistics' all-gather), traced as the f and g. */
dt__vocab dt__tp_vocab(dt__tp *tp, int V);

/* Sequence parallelism's collectives on x(n) over the group, n a multiple
 * of t, rank r's segment rows r*n/t ..: the reduce-scatter (segment r
 * becomes the sum of every rank's, the others are left partial), the
 * all-gather (every rank's segment r copied to all), and the in-place sum
 * of one LayerNorm's gradients g(2C) = (gain, bias) added into gw, gb,
 * from tp->ln_grad holding this rank's part. */
dt_status dt__tp_scatter(dt__tp *tp, char pass, float *x, size_t n);
dt_status dt__tp_gather(dt__tp *tp, char pass, float *x, size_t n);
dt_status dt__tp_ln_sum(dt__tp *tp, dt_backend *be, float *gw, float *gb, size_t C);

/* f: identity forward; backward, x(n) becomes the sum over the group. */
dt_status dt__tp_f(dt__tp *tp, char pass, float *x, size_t n);
/* g: forward, x(n) becomes the sum over the group; identity backward. */
dt_status dt__tp_g(dt__tp *tp, char pass, float *x, size_t n);

/* dt__tp_check, whether the model splits over t ranks: dt_rules.h (the simulator uses it). */
#include "dt_rules.h"
/* Elements of rank r's block shard, and its layout (12 tensors in the
 * whole block's order, shapes local) appended to ps with names h.<l>.*. */
dt_status dt__tp_block_layout(const dt_gpt_config *cfg, int t, int l, dt_paramset *ps);
/* Copy rank r's shard out of a whole block's tensors (host; in the whole
 * layout's order and shapes, `full[i]` tensor i) into `local` (host, laid
 * out as dt__tp_block_layout gives). */
void dt__tp_block_shard(const dt_gpt_config *cfg, int t, int r, const float *const full[12],
                        const dt_paramset *local_layout, int first_tensor, float *local);
/* The inverse: rank r's shard (local, as above) written into its places
 * of the whole block's tensors full[12] (the replicated ones whole). */
void dt__tp_block_unshard(const dt_gpt_config *cfg, int t, int r, const dt_paramset *local_layout, int first_tensor,
                          const float *local, float *const full[12]);

/* The fingerprint terms (dt__probe_u in dt_internal.h) of the sharded
 * tensors of rank r's block shard (host, laid out as local_layout from
 * first_tensor), each element weighted by its index in the whole model's
 * buffer; whole_off[i]: where whole tensor i of the block starts there. */
double dt__tp_block_probe(const dt_gpt_config *cfg, int t, int r, const dt_paramset *local_layout, int first_tensor,
                          const float *local, const size_t whole_off[12]);

/* A sharded block's saved tensors: block.c's fields at the shard's sizes
 * (dt__block_act_floats and dt__block_acts_alloc with t), qkv (B,T,3C/t),
 * lse (B,NH/t,T), atty (B,T,C/t), fch (B,T,4C/t); res2, out and the
 * statistics whole; the transients (acts->tmp: the LayerNorm outputs
 * whole, GELU's output (B,T,4C/t)) not saved, as the whole block's. */
typedef dt__block_acts dt__tp_acts;

size_t dt__tp_scratch_floats(const dt_gpt_config *cfg, int t, int B, int T);
/* scratch: dt__tp_scratch_floats floats of backend memory. r: mixed
 * precision's storage rounding (gpt_layers.h), or NULL for FP32. */
dt_status dt__tp_block_forward(dt__tp *tp, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                               dt__tp_acts *a, const float *x, int B, int T, const dt__rounder *r);
/* dres (B,T,C): in, the gradient of the block output; out, of x (both
 * replicated). Parameter gradients of the shard accumulate into g: B
 * (below) then block.c's dt__block_backward_w with t. */
dt_status dt__tp_block_backward(dt__tp *tp, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                const dt__block_params *g, const dt__tp_acts *a, float *scratch, const float *x,
                                float *dres, int B, int T, const dt__rounder *r);
/* B alone (gpt_layers.h's zero-bubble split): dres as above, the f
 * allreduces, what W needs in k (dt__block_keep_alloc with t); scratch as
 * above (its keep part unused: dfch and dqkv go through scratch into k). */
dt_status dt__tp_block_backward_b(dt__tp *tp, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                  const dt__tp_acts *a, float *scratch, const float *x, float *dres,
                                  const dt__block_keep *k, int B, int T, const dt__rounder *r);

/* Of a block's tensors in the layout's order (ln1.w .. fcproj.b): 1 the
 * tensors a rank holds a shard of (qkv, attproj.w, fc, fcproj.w), 0 the
 * replicated ones. */
extern const uint8_t dt__tp_sharded[DT__BLOCK_NTENSORS];

/* The shard as the layer runner's block ops (ctx: the dt__tp). */
extern const dt__block_ops dt__tp_block_ops;

#endif
