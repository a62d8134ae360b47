/* gpt_layers.h: the GPT's layer modules (private). Each module has a
 * forward, a backward and a declared activation footprint (floats it saves
 * for backward per (B, T)), so later work can recompute activations or
 * split layers across pipeline stages and tensor-parallel ranks.
 *
 * Modules: embedding (wte + wpe; embedding.c), transformer block
 * (block.c), head (final LayerNorm + LM head + cross-entropy; head.c).
 * Saved activations come from a dt__arena that tracks current and peak
 * bytes; each module's *_act_floats is the single source of its size. */
#ifndef DT_GPT_LAYERS_H
#define DT_GPT_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "dt_backend.h"
#include "dt_gpt.h"
#include "fp8.h"

/* ---- activation arena: bump allocation with current/peak accounting ---- */
typedef struct dt__arena {
    float *base;     /* backend memory */
    size_t capacity; /* floats */
    size_t used;     /* floats */
    size_t peak;     /* floats */
} dt__arena;

dt_status dt__arena_alloc(dt__arena *a, size_t n, float **out);
void dt__arena_reset(dt__arena *a);
/* Stack discipline: release everything allocated after the mark. */
static inline size_t dt__arena_mark(const dt__arena *a) { return a->used; }
static inline void dt__arena_release(dt__arena *a, size_t mark) { a->used = mark; }

/* ---- mixed precision: storage rounding ---------------------------------- */
/* With --fp16/--bf16 every op computes in FP32 but its output is stored in
 * the half format, as in a framework that keeps activations and gradients
 * in half: dt__round sends x through a real IEEE half buffer (backend cast,
 * round to nearest even, overflow to inf, underflow to subnormals or 0)
 * and back, or through the backend's fused round op (the same bits, one
 * pass): the scratch does not keep the 16-bit values afterwards. A NULL
 * rounder or DT_F32 does nothing. */
typedef struct dt__rounder {
    dt_dtype dtype;  /* DT_F32, DT_F16 or DT_BF16 */
    void *scratch;   /* backend memory for the largest rounded tensor, in dtype */
    size_t capacity; /* elements */
    /* FP8 training (fp8.h): the linear layers' GEMMs run in FP8 under
     * this state (the rounding above is bf16's); NULL: they do not */
    dt__fp8 *fp8;
} dt__rounder;

static inline dt__fp8 *dt__rnd_fp8(const dt__rounder *r) { return r ? r->fp8 : NULL; }

dt_status dt__round(dt_backend *be, const dt__rounder *r, float *x, size_t n);
/* GELU under rounder r: out = round(gelu(inp)), inp rounded in place
 * first when round_in; the backward d = round(gelu'(inp) * round(d)) in
 * place and, where out is not NULL, out = round(gelu(inp)) from the same
 * pass. Under bf16 on a backend with the fused passes
 * (gelu_forward_bf16, gelu_backward_bf16) each is one pass that also
 * writes the result's bf16 copy into r's scratch and registers it as the
 * GEMM shadow of out (d): *shadow is then 1, the GEMM that follows reads
 * the copy instead of casting, and dt__shadow_end must follow that GEMM.
 * The same bits either way. */
dt_status dt__gelu_round(dt_backend *be, const dt__rounder *r, float *out, float *inp, int round_in, size_t n,
                         int *shadow);
dt_status dt__gelu_back_round(dt_backend *be, const dt__rounder *r, float *d, float *out, const float *inp, size_t n,
                              int *shadow);
/* x = round(x) under rounder r for the one GEMM that reads it next: under
 * bf16 on a backend with round_bf16, the bf16 copy goes into r's scratch
 * and is registered as x's GEMM shadow (*shadow 1; dt__shadow_end after
 * that GEMM), so the GEMM does not cast x again. */
dt_status dt__round_shadow(dt_backend *be, const dt__rounder *r, float *x, size_t n, int *shadow);
/* After the GEMM that read it (whose status is st): forget the shadow of
 * p when shadow is 1. Returns st, or the forgetting's failure. */
dt_status dt__shadow_end(dt_backend *be, const float *p, int shadow, dt_status st);
/* The whole model's forward again on (tokens, targets) (host, B*T), as
 * dt_gpt_forward computes it (its precision, its rounded weights), looking
 * at each layer's output: *pos the first holding a NaN or inf (0 the
 * embedding, 1 + l block l, L + 1 the head's logits or losses), or -1.
 * Nothing is kept of it (lib/train/nonfinite.c). */
dt_status dt__gpt_forward_check(dt_gpt *m, const int32_t *tokens, const int32_t *targets, int B, int T, int *pos);

/* ---- context parallelism: which rows of the sequence a rank holds -------- */
/* With c ranks (lib/parallel/cp.c), each sequence of T positions is cut
 * into 2c chunks of T/(2c) and rank i holds chunks i and 2c-1-i (so that
 * under the causal mask every rank has the same work). Its B*T/c rows are
 * laid out chunk-major, (part, b, t): part 0 chunk i, part 1 chunk
 * 2c-1-i, each (B, T/(2c)) as a whole micro-batch's (b, t), so every
 * per-token op runs on them unchanged and a chunk is a contiguous
 * (B, T/(2c), .) tensor. c = 1: one part, the whole sequence, (b, t). */
typedef struct dt__cpos {
    int c, rank;
} dt__cpos;
#define DT__CPOS_WHOLE ((dt__cpos){1, 0})
static inline int dt__cpos_parts(dt__cpos cp) { return cp.c > 1 ? 2 : 1; }
/* the sequence's chunk (of 2c) held as part `part` */
static inline int dt__cpos_chunk(dt__cpos cp, int part) { return part ? 2 * cp.c - 1 - cp.rank : cp.rank; }
/* local(B * T/c) = the rank's rows of whole(B * T) in its layout (host, any 4-byte elements) */
void dt__cpos_gather(dt__cpos cp, const int32_t *whole, int32_t *local, int B, int T);

/* ---- how attention runs -------------------------------------------------- */
/* NULL: the backend's fused causal op on the micro-batch's rows; else
 * context parallelism's exchange (lib/parallel/cp.c), the same contract
 * (dt_backend.h's attention_forward/_backward) over the rank's rows, the
 * keys and values of the others fetched as it goes; its lse layout is its
 * own, of the same size. */
typedef struct dt__attn {
    dt_status (*forward)(void *ctx, dt_backend *be, float *out, float *lse, const float *qkv, int B, int T, int C,
                         int NH);
    dt_status (*backward)(void *ctx, dt_backend *be, float *dqkv, const float *dout, const float *qkv, const float *out,
                          const float *lse, int B, int T, int C, int NH);
    void *ctx;
} dt__attn;

static inline dt_status dt__attention_forward(dt_backend *be, const dt__attn *at, float *out, float *lse,
                                              const float *qkv, int B, int T, int C, int NH)
{
    return at ? at->forward(at->ctx, be, out, lse, qkv, B, T, C, NH)
              : be->attention_forward(be, out, lse, qkv, B, T, C, NH);
}

static inline dt_status dt__attention_backward(dt_backend *be, const dt__attn *at, float *dqkv, const float *dout,
                                               const float *qkv, const float *out, const float *lse, int B, int T,
                                               int C, int NH)
{
    return at ? at->backward(at->ctx, be, dqkv, dout, qkv, out, lse, B, T, C, NH)
              : be->attention_backward(be, dqkv, dout, qkv, out, lse, B, T, C, NH);
}

/* ---- the whole model's layout -------------------------------------------- */
/* wte, wpe, each block's 12 tensors (h.L.ln1.w .. h.L.fcproj.b), lnf.w,
 * lnf.b and, untied, lm_head.w, appended to ps in that order: the flat
 * buffer of one process, and what a pipeline stage cuts its range from. */
dt_status dt__gpt_whole_layout(const dt_gpt_config *cfg, dt_paramset *ps);

/* ---- the layer table ------------------------------------------------- */
/* Which tensors of the whole model's layout each layer owns (the one
 * place that counts them): layer -1 the embedding (wte, wpe), 0..L-1 the
 * blocks (their DT__BLOCK_NTENSORS), L the head (lnf.w, lnf.b and,
 * untied, lm_head.w). Stages, ZeRO's units, data parallelism's buckets
 * and the non-finite locator read it. */
void dt__gpt_layer_tensors(const dt_gpt_config *cfg, int layer, int *first, int *n);
/* The layer owning tensor `tensor` of the whole layout. */
int dt__gpt_tensor_layer(const dt_gpt_config *cfg, int tensor);
/* Layer layer's elements in ps (the whole layout): [*off, *off + *len),
 * up to the next layer's first (the layout's padding included), so the
 * layers tile the buffer. */
void dt__gpt_layer_range(const dt_gpt_config *cfg, const dt_paramset *ps, int layer, size_t *off, size_t *len);
/* Data parallelism's gradient buckets (and ZeRO-2's units): the layers in
 * backward order (head L, blocks L-1..0, embedding -1) gathered until a
 * bucket holds bucket_bytes; off, len (floats) and low (each one's lowest
 * layer) have room for L + 2. Returns the count. */
int dt__gpt_buckets(const dt_gpt_config *cfg, const dt_paramset *ps, size_t bucket_bytes, size_t *off, size_t *len,
                    int *low);

/* ---- initialisation --------------------------------------------------- */
/* The initial values of one tensor of the whole model's layout (index: its
 * place in that layout, which seeds its own RNG stream): gains 1, biases 0,
 * matrices N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)). A
 * pipeline stage initialises its tensors with their whole-model index and
 * so holds exactly the whole model's values. With init->read set, the
 * values are the source's (dt_gpt_init). */
dt_status dt__gpt_init_tensor(const dt_gpt_config *cfg, const dt_param_info *p, int index, const dt_gpt_init *init,
                              float *w);

/* ---- the vocabulary split over tensor-parallel ranks ------------------- */
/* Megatron's vocabulary-parallel embedding and cross-entropy (Shoeybi et
 * al. 2019; Narayanan et al. 2021): rank r of the t tensor-parallel ranks
 * holds rows [v0, v0 + nv) of wte and of an untied LM head, nv about V/t
 * (dt__vocab_rows; uneven where t does not divide V, so the model is the
 * serial one, unpadded). The embedding looks up the rows it holds (the
 * others' tokens masked) and sums the outputs over the group, rank 0
 * adding the positions; the head computes its logits' columns, each rank's
 * per-row statistics are all-gathered and merged in rank order on every
 * rank (the loss, the argmax, the softmax's maximum and sum), so the whole
 * logits never exist on one rank, and the head input's gradient is summed
 * over the group. The communication is the owner's (lib/parallel/tp.c). */
enum { DT__VOCAB_EMBED = 0, DT__VOCAB_HEAD = 1 };
typedef struct dt__vocab {
    int V;          /* the whole vocabulary */
    int t, rank;    /* the tensor-parallel group and this rank in it */
    int v0, nv;     /* this rank's rows */
    /* x(n) summed over the group in place: what DT__VOCAB_EMBED the
     * embedding's output (forward), DT__VOCAB_HEAD the head input's
     * gradient (backward) */
    dt_status (*sum)(void *ctx, int what, float *x, size_t n);
    /* buf(t * n): segment r (n floats) of rank r copied to every rank */
    dt_status (*gather)(void *ctx, float *buf, size_t n);
    void *ctx;
    /* sequence parallelism (dt__shard's sp): the embedding's output and
     * the head's input hold the rank's rows of the N = B*T (rows
     * rank*N/t ..). The embedding's output is reduce-scattered (scatter,
     * x(n) over the group, segment rank its sum) instead of summed; the
     * head's LayerNorm output is all-gathered (allgather, pass 'F'), its
     * input gradient reduce-scattered, and the final LayerNorm's gain and
     * bias gradients summed over the group: ln with gw NULL points *part
     * at a zeroed (2C) buffer to compute them into, then with gw, gb adds
     * their sum into gw, gb. part: a (B,T,C) workspace (the runner's
     * transient), for the whole rows. */
    int sp;
    dt_status (*scatter)(void *ctx, char pass, float *x, size_t n); /* pass 'F' or 'B' (traces) */
    dt_status (*allgather)(void *ctx, char pass, float *x, size_t n);
    dt_status (*ln)(void *ctx, dt_backend *be, float **part, float *gw, float *gb, size_t C);
    float *part;
} dt__vocab;

/* Rank r's rows of V over t ranks: [V*r/t, V*(r+1)/t). */
void dt__vocab_rows(int V, int t, int r, int *v0, int *nv);
/* local(n) (host) = tokens(n) (host) shifted to the rank's rows, or
 * DT_TOKEN_MASKED where another rank holds the row. */
void dt__vocab_mask(const dt__vocab *vp, const int32_t *tokens, int32_t *local, size_t n);

/* ---- embedding: out = wte[tokens] + wpe[t] ------------------------------ */
/* Saved: its output (B,T,C), the first block's input. */
size_t dt__embed_act_floats(const dt_gpt_config *cfg, int B, int T);
/* vp NULL: the whole table; else wte holds the rank's rows and tokens
 * (device) were masked by dt__vocab_mask. */
/* T: the rank's positions (T/c of the sequence), laid out as cp says:
 * each part gets its chunk's rows of wpe. */
dt_status dt__embed_forward(dt_backend *be, const dt_gpt_config *cfg, const float *wte, const float *wpe,
                            const int32_t *tokens, dt__arena *a, float **out, int B, int T, const dt__rounder *r,
                            const dt__vocab *vp, dt__cpos cp);
/* dwte, dwpe +=; dout (B,T,C) is the gradient of the embedding output. */
dt_status dt__embed_backward(dt_backend *be, const dt_gpt_config *cfg, float *dwte, float *dwpe, const int32_t *tokens,
                             const float *dout, int B, int T, dt__cpos cp);

/* ---- head: final LayerNorm, LM head (untied), cross-entropy ------------ */
typedef struct dt__head_params {
    float *lnfw, *lnfb; /* (C), (C) */
    float *lmw;         /* (V, C) */
} dt__head_params;

typedef struct dt__head_acts {
    float *lnf, *lnf_mean, *lnf_rstd; /* (B,T,C), (B,T), (B,T) */
    float *logits;                    /* (B,T,V), rows ld apart; turned into dlogits by backward */
    int ld;                           /* dt__head_ld: V rounded up to the backend's row_align */
    /* vocabulary-parallel: V is the rank's nv columns; */
    float *stats; /* (t,B,T,4) every rank's per-row statistics (dt_backend.h's crossentropy_part) */
    float *ms;    /* (B,T,2) the whole rows' maximum and sum of exponentials, for the backward */
} dt__head_acts;

/* The logits' row stride: V rounded up to a multiple of be->row_align
 * (gpt2-124m on CUDA: 50304 for V = 50257). Columns V..ld-1 hold
 * whatever the arena held: no op reads them as logits. */
int dt__head_ld(const dt_backend *be, int V);
/* vt: the vocabulary-parallel group's size (1: the whole head); with
 * vt > 1, cfg->vocab_size is the rank's nv. */
size_t dt__head_act_floats(const dt_backend *be, const dt_gpt_config *cfg, int B, int T, int vt);
/* logits from x (B,T,C); with targets (device, (B,T)), also per-position
 * losses (B,T) and argmax==target flags (B,T). vp NULL: the whole head;
 * else cfg->vocab_size is vp->nv, lmw holds the rank's rows, and the
 * losses and flags are the whole vocabulary's (the same on every rank). */
dt_status dt__head_forward(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p, dt__arena *a,
                           dt__head_acts *acts, const float *x, const int32_t *targets, float *losses, uint8_t *correct,
                           int B, int T, const dt__rounder *r, const dt__vocab *vp);
/* dx (B,T,C) is overwritten with the gradient of x for a loss whose
 * per-target gradient weight is dloss; dtmp (B,T,C) is scratch. B then W,
 * at once (see the zero-bubble split below). */
dt_status dt__head_backward(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p,
                            const dt__head_params *g, dt__head_acts *acts, const float *x, const int32_t *targets,
                            float *losses, float dloss, float *dx, float *dtmp, int B, int T, const dt__rounder *r,
                            const dt__vocab *vp);

/* B: dx as above; the logits become their gradient (kept in acts for W)
 * and dlnf (B,T,C) receives the final LayerNorm's output gradient, which W
 * needs. W: the LM head's and the final LayerNorm's parameter gradients. */
dt_status dt__head_backward_b(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p, dt__head_acts *acts,
                              const float *x, const int32_t *targets, float *losses, float dloss, float *dx,
                              float *dlnf, int B, int T, const dt__rounder *r, const dt__vocab *vp);
dt_status dt__head_backward_w(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p,
                              const dt__head_params *g, const dt__head_acts *acts, const float *x, const float *dlnf,
                              int B, int T, const dt__vocab *vp);

/* The mean over n_counted targets of the per-position losses (N, device;
 * ignored positions hold 0), summed in double on the host in order. */
dt_status dt__head_mean_loss(dt_backend *be, const float *losses, int N, int n_counted, float *mean);

/* ---- how a block is split over ranks ------------------------------------ */
/* t tensor-parallel ranks hold C/t of the column- and row-parallel GEMMs'
 * widths (lib/parallel/tp.h); with sp the per-token regions (the
 * LayerNorms and residuals: res2, out, the statistics, the block's input
 * and output, the keep's dln1 and dln2) are split along the tokens too,
 * rank r holding rows r*N/t .. (r+1)*N/t - 1 of the micro-batch's N = B*T
 * (Megatron's sequence parallelism, lib/parallel/sp.c). DT__WHOLE: one
 * rank, the whole block. */
typedef struct dt__shard {
    int t;  /* tensor-parallel ranks */
    int sp; /* 1: the per-token regions split over the t ranks too */
} dt__shard;
#define DT__WHOLE ((dt__shard){1, 0})
/* Rows of a per-token tensor of a micro-batch of N tokens on one rank. */
static inline size_t dt__shard_rows(dt__shard sh, size_t N) { return sh.sp ? N / (size_t)sh.t : N; }

/* ---- transformer block ----------------------------------------------- */
typedef struct dt__block_params {
    float *ln1w, *ln1b;         /* (C), (C) */
    float *qkvw, *qkvb;         /* (3C, C), (3C) */
    float *attprojw, *attprojb; /* (C, C), (C) */
    float *ln2w, *ln2b;         /* (C), (C) */
    float *fcw, *fcb;           /* (4C, C), (4C) */
    float *fcprojw, *fcprojb;   /* (C, 4C), (C) */
} dt__block_params;

/* The 12 tensors of a block in the layout's order (ln1.w .. fcproj.b). */
#define DT__BLOCK_NTENSORS 12
/* Point b's fields at a block's tensors in a buffer whose element 0 is
 * the layout's element origin; info: the block's 12 tensors (whole or a
 * tensor-parallel shard's). */
void dt__block_params_bind(dt__block_params *b, const dt_param_info *info, float *base, size_t origin);

/* A block's transients: tensors its forward writes and at once reads
 * back, and its W recomputes from what is saved (LayerNorm outputs from
 * the LayerNorm's input, GELU's output from fch: the same ops on the same
 * values, so the same bits). They are not saved: one set serves every
 * block of a model or stage, whose forwards and Ws never overlap, and
 * lives with the backward scratch (dt__block_scratch). Saving them would
 * cost 6*B*T*C floats a block, 38% of its activations. */
typedef struct dt__block_tmp {
    /* not a tensor: how attention runs (NULL: the backend's op), the
     * runner's, copied with the transients into each block's acts */
    const dt__attn *attn;
    float *ln;          /* (B,T,C) ln1's output, later ln2's */
    float *gelu;        /* (B,T,4C/t) GELU's output (t: a tensor-parallel shard's) */
    float *mean, *rstd; /* (B,T) the statistics of W's recomputed LayerNorm */
} dt__block_tmp;

size_t dt__block_tmp_floats(const dt_gpt_config *cfg, int B, int T);
/* Point tmp's fields into base, which holds dt__block_tmp_floats floats
 * (sized for the whole block, so a tensor-parallel shard fits too). */
void dt__block_tmp_bind(dt__block_tmp *tmp, const dt_gpt_config *cfg, int B, int T, float *base);

typedef struct dt__block_acts {
    float *ln1_mean, *ln1_rstd; /* (B,T), (B,T) */
    float *qkv;                 /* (B,T,3C) */
    float *lse;                 /* (B,NH,T) attention's log-sum-exp per row */
    float *atty;                /* (B,T,C) attention output before projection */
    float *res2;                /* (B,T,C) x + attention */
    float *ln2_mean, *ln2_rstd; /* (B,T), (B,T) */
    float *fch;                 /* (B,T,4C) before GELU */
    float *out;                 /* (B,T,C) res2 + MLP = block output */
    dt__block_tmp tmp;          /* not saved: the shared transients above */
} dt__block_acts;

/* The saved tensors of a block in a fixed order: where each pointer lives
 * in *acts, its size in floats (a tensor-parallel shard's for t > 1, see
 * lib/parallel/tp.h; t = 1: the whole block), and whether it is a statistic
 * (LayerNorm mean/rstd and the attention's log-sum-exp, kept FP32 under
 * mixed precision). DT__BLOCK_ATT is the index of the attention's saved
 * state (its lse), DT__BLOCK_OUT of the output. */
#define DT__BLOCK_NFIELDS 10
#define DT__BLOCK_ATT 3
#define DT__BLOCK_OUT 9
void dt__block_fields(dt__block_acts *acts, const dt_gpt_config *cfg, dt__shard sh, int B, int T,
                      float **ptr[DT__BLOCK_NFIELDS], size_t n[DT__BLOCK_NFIELDS], int stat[DT__BLOCK_NFIELDS]);

/* Half storage of a block's saved tensors under --fp16/--bf16: the block
 * runs in an FP32 working set (acts), which is packed into stores when it
 * is done and unpacked for its backward; the values are half values
 * already, so both ways are exact. A store holds 2 bytes an element, FP32
 * for the statistics and, with out_fp32, for the output; there is none for
 * the attention's lse when !with_att. */
typedef struct dt__block_pack {
    const dt_gpt_config *cfg;
    dt__shard sh; /* the shard, or DT__WHOLE */
    int B, T;
    int with_att, out_fp32;
    dt_dtype dtype; /* DT_F16 or DT_BF16 */
} dt__block_pack;

size_t dt__block_packed_floats(const dt__block_pack *k);
/* The stores, from arena a (stores[DT__BLOCK_ATT] NULL without the lse). */
dt_status dt__block_pack_alloc(const dt__block_pack *k, dt__arena *a, void *stores[DT__BLOCK_NFIELDS]);
/* acts' tensors into the stores (pack = 1), or back (pack = 0) but for
 * the output, which a backward does not read (the next block's input is
 * unpacked apart). */
dt_status dt__block_pack_copy(const dt__block_pack *k, dt_backend *be, dt__block_acts *acts,
                              void *const stores[DT__BLOCK_NFIELDS], int pack);

/* ---- the zero-bubble split of the backward ------------------------------ */
/* A backward is B, the input gradient (the critical path of a pipeline),
 * then W, the parameter gradients (zero-bubble pipelines, arXiv
 * 2401.10241, run W later, in the bubbles). B computes no parameter
 * gradient; W reads only what B kept and the forward's saved activations,
 * and accumulates into the parameter gradients (+=) with the same ops on
 * the same values as the backward that runs both at once: B then W is
 * that backward, bit for bit, and W may run any time before the saved
 * tensors are freed.
 *
 * What a block's W needs beyond its saved activations: the gradient at the
 * output of each of its linear layers and LayerNorms, as B computed them
 * (a tensor-parallel shard's sizes for t > 1; lib/parallel/tp.h). */
typedef struct dt__block_keep {
    float *dout;  /* (B,T,C) gradient of the block output: fcproj's output gradient */
    float *dfch;  /* (B,T,4C/t) fc's output gradient (through GELU) */
    float *dln2;  /* (B,T,C) ln2's output gradient */
    float *dres2; /* (B,T,C) gradient of res2 after ln2: attproj's output gradient */
    float *dqkv;  /* (B,T,3C/t) qkv's output gradient */
    float *dln1;  /* (B,T,C) ln1's output gradient */
    /* (B,T,4C/t) where B leaves GELU's output, rounded as the forward's,
     * from its GELU backward's pass, for a W that runs before the next
     * forward or B (a backward that runs W at once: the transients'
     * gelu); NULL: W recomputes it from fch */
    float *gelu;
} dt__block_keep;

/* B computes dfch and dqkv in the backward scratch and copies them into
 * the keep when it has buffers of its own; dqkv can be the block's saved
 * qkv, which no op reads after B (W reads fch, to recompute GELU's output):
 * a keep in_acts then costs 4 + 4/t (B,T,C) floats instead of 4 + 7/t. */
size_t dt__block_keep_floats(const dt_gpt_config *cfg, dt__shard sh, int B, int T, int in_acts);
/* The keep's buffers from arena a; acts non-NULL: dqkv in its qkv. */
dt_status dt__block_keep_alloc(dt__arena *a, const dt_gpt_config *cfg, dt__shard sh, int B, int T, const dt__block_acts *acts,
                               dt__block_keep *k);

/* Half storage of a keep (--fp16/--bf16: B rounded every value it kept
 * to the format, so 2 bytes an element hold them exactly): its six
 * tensors in a fixed order (dout, dfch, dln2, dres2, dqkv, dln1) and their
 * floats; the floats of the stores, their allocation from arena a, and
 * the copy into them (pack = 1) or back into k's FP32 buffers (pack = 0). */
#define DT__BLOCK_NKEEP 6
size_t dt__block_keep_packed_floats(const dt_gpt_config *cfg, dt__shard sh, int B, int T);
dt_status dt__block_keep_pack_alloc(dt__arena *a, const dt_gpt_config *cfg, dt__shard sh, int B, int T,
                                    void *stores[DT__BLOCK_NKEEP]);
dt_status dt__block_keep_pack_copy(dt_backend *be, const dt_gpt_config *cfg, dt__shard sh, int B, int T, dt_dtype dtype,
                                   const dt__block_keep *k, void *const stores[DT__BLOCK_NKEEP], int pack);

/* Scratch for a block's backward, shared by all blocks (not saved); keep:
 * the B-to-W hand-over of a backward that runs W at once (its dfch and
 * dqkv are the scratch's own); tmp: the blocks' transients. */
typedef struct dt__block_scratch {
    float *dbtc; /* (B,T,C) */
    float *dqkv; /* (B,T,3C) */
    float *dfch; /* (B,T,4C) */
    dt__block_keep keep;
    dt__block_tmp tmp;
} dt__block_scratch;

/* Point s's fields into base, which holds dt__block_scratch_floats floats. */
void dt__block_scratch_bind(dt__block_scratch *s, const dt_gpt_config *cfg, int B, int T, float *base);

/* Saved floats of one block, or with t > 1 of a tensor-parallel rank's
 * shard (qkv (B,T,3C/t), lse (B,NH/t,T), atty (B,T,C/t), fch (B,T,4C/t);
 * res2, out and the statistics whole; lib/parallel/tp.h); with_att = 0
 * leaves out the attention's log-sum-exp, which selective recomputation
 * does not keep. */
size_t dt__block_act_floats(const dt_gpt_config *cfg, dt__shard sh, int B, int T, int with_att);
size_t dt__block_att_floats(const dt_gpt_config *cfg, int t, int B, int T);
size_t dt__block_scratch_floats(const dt_gpt_config *cfg, int B, int T);
/* Allocate a block's (t's shard's) activations; with_att = 0 leaves
 * acts->lse NULL for the caller to point at a temporary; tmp: the
 * transients acts->tmp uses (a dt__block_scratch's). */
dt_status dt__block_acts_alloc(dt__arena *a, const dt_gpt_config *cfg, dt__shard sh, int B, int T, int with_att,
                               const dt__block_tmp *tmp, dt__block_acts *acts);
/* out = block(x); x (B,T,C) is kept by the caller (previous block's out). */
dt_status dt__block_forward(dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p, dt__block_acts *acts,
                            const float *x, int B, int T, const dt__rounder *r);
/* dres (B,T,C): in, the gradient of the block output; out, the gradient of
 * x. Parameter gradients accumulate into g. B then W, at once. */
dt_status dt__block_backward(dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                             const dt__block_params *g, const dt__block_acts *acts, const dt__block_scratch *s,
                             const float *x, float *dres, int B, int T, const dt__rounder *r);
/* B: dres as above; no parameter gradient; what W needs goes to k. */
dt_status dt__block_backward_b(dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                               const dt__block_acts *acts, const dt__block_scratch *s, const float *x, float *dres,
                               const dt__block_keep *k, int B, int T, const dt__rounder *r);
/* W: the parameter gradients (+= into g) from the saved activations acts,
 * the block input x and what B kept in k; t > 1: a tensor-parallel
 * shard's (lib/parallel/tp.h), whose B is dt__tp_block_backward_b. It
 * recomputes the transients (acts->tmp) as the forward computed them,
 * rounded by r as there. The 16-bit rounding of parameter gradients is the
 * caller's (per micro-batch). */
dt_status dt__block_backward_w(dt_backend *be, const dt_gpt_config *cfg, int t, const dt__block_params *p,
                               const dt__block_params *g, const dt__block_acts *acts, const float *x,
                               const dt__block_keep *k, int B, int T, const dt__rounder *r);

#endif
