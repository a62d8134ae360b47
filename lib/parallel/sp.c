/* sp.c: Megatron sequence parallelism for a tensor-parallel block
 * (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
 * Transformer Models", section 4.2.2), as the layer runner's block ops.
 *
 * The GEMMs and the attention are tp.c's shard (qkv, fc column-parallel,
 * attproj, fcproj row-parallel, every one of the N = B*T rows). What tp.c
 * replicates on every rank, the per-token regions (the LayerNorms, the
 * residual adds and what they save: res2, out, the statistics, and the
 * block's input and output), holds only the rank's rows here: rows
 * r*N/t .. (r+1)*N/t - 1 (gpt_layers.h's dt__shard with sp). The
 * conjugate operators change with it:
 *   before a column-parallel GEMM, g-bar: the LayerNorm output of the
 *     rank's rows all-gathered (forward), the input gradient's partial
 *     sums reduce-scattered (backward), where tp.c's f is the identity
 *     and an allreduce;
 *   after a row-parallel GEMM, g: the partial output reduce-scattered
 *     (forward), the output gradient all-gathered (backward), where tp.c's
 *     g is an allreduce and the identity.
 * A ring allreduce is a reduce-scatter and an all-gather, so a block
 * moves the same bytes as tp.c's. Two more things follow from the split:
 *   - W needs each LayerNorm's output with every row again: it
 *     recomputes the rank's rows (as block.c's W does) and all-gathers
 *     them (Megatron keeps the rank's rows and all-gathers too);
 *   - the LayerNorms' gain and bias gradients are each rank's rows'
 *     part: summed over the group per micro-batch (dt__tp_ln_sum, 2C
 *     floats a LayerNorm); the biases of attproj and fcproj are added by
 *     rank 0 before the reduce-scatter, as tp.c adds them before g, and
 *     their gradients come from the all-gathered output gradient, the
 *     same on every rank.
 * Rounding under --fp16/--bf16 is block.c's: each tensor rounded where
 * the whole block rounds it; a rounded tensor all-gathered is rounded
 * again only to make its GEMM's 16-bit copy (the same values). */
#include "sp.h"

static size_t dt__pad16(size_t n) { return (n + 15) & ~(size_t)15; }

size_t dt__sp_scratch_floats(const dt_gpt_config *cfg, int t, int B, int T)
{
    const size_t N = (size_t)B * T, C = (size_t)cfg->hidden_size, Cl = C / (size_t)t, n = N / (size_t)t;
    /* dbtc, dqkv, dfch, the (N,C) partial sums, then the keep of a
     * backward that runs W at once: dout, dres2 (N,C), dln2, dln1 (n,C) */
    return dt__pad16(N * Cl) + dt__pad16(N * 3 * Cl) + dt__pad16(N * 4 * Cl) + 3 * dt__pad16(N * C) +
           2 * dt__pad16(n * C) + 64;
}

/* The scratch's parts (the layout above). */
typedef struct dt__sp_scr {
    float *dbtc, *dqkv, *dfch, *part; /* (N,C/t), (N,3C/t), (N,4C/t), (N,C) */
    dt__block_keep keep;              /* its dfch and dqkv the scratch's */
} dt__sp_scr;

static dt__sp_scr dt__sp_scr_bind(const dt_gpt_config *cfg, int t, int B, int T, float *w)
{
    const size_t N = (size_t)B * T, C = (size_t)cfg->hidden_size, Cl = C / (size_t)t, n = N / (size_t)t;
    dt__sp_scr s;
    s.dbtc = w, w += dt__pad16(N * Cl);
    s.dqkv = w, w += dt__pad16(N * 3 * Cl);
    s.dfch = w, w += dt__pad16(N * 4 * Cl);
    s.part = w, w += dt__pad16(N * C);
    s.keep = (dt__block_keep){.dfch = s.dfch, .dqkv = s.dqkv};
    s.keep.dout = w, w += dt__pad16(N * C);
    s.keep.dres2 = w, w += dt__pad16(N * C);
    s.keep.dln2 = w, w += dt__pad16(n * C);
    s.keep.dln1 = w;
    return s;
}

dt_status dt__sp_block_forward(dt__tp *tp, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                               dt__block_acts *a, const float *x, int B, int T, const dt__rounder *r)
{
    const int t = tp->comm->size, rank = tp->comm->rank;
    const int C = cfg->hidden_size, Cl = C / t, NHl = cfg->num_heads / t, N = B * T, n = N / t;
    const size_t NC = (size_t)N * C, nC = (size_t)n * C;
    float *full = a->tmp.ln, *mine = full + (size_t)rank * nC; /* (N,C), the rank's rows in it */
    int sh;
    /* ln1 of the rank's rows, all-gathered for qkv */
    DT_CHECK(be->layernorm_forward(be, mine, a->ln1_mean, a->ln1_rstd, x, p->ln1w, p->ln1b, n, C));
    DT_CHECK(dt__tp_gather(tp, 'F', full, NC));
    DT_CHECK(dt__round_shadow(be, r, full, NC, &sh));
    DT_CHECK(dt__shadow_end(be, full, sh, dt__linear_forward(be, dt__rnd_fp8(r), DT__LIN_QKV, a->qkv, full, p->qkvw, p->qkvb, N, C, 3 * Cl)));
    DT_CHECK(dt__round(be, r, a->qkv, (size_t)N * 3 * Cl));
    DT_CHECK(dt__attention_forward(be, a->tmp.attn, a->atty, a->lse, a->qkv, B, T, Cl, NHl));
    DT_CHECK(dt__round_shadow(be, r, a->atty, (size_t)N * Cl, &sh));
    /* attproj's partial output over every row, reduce-scattered: the rank's rows summed */
    DT_CHECK(dt__shadow_end(
        be, a->atty, sh, dt__linear_forward(be, dt__rnd_fp8(r), DT__LIN_ATTPROJ, full, a->atty, p->attprojw, rank ? NULL : p->attprojb, N, Cl, C)));
    DT_CHECK(dt__tp_scatter(tp, 'F', full, NC));
    DT_CHECK(be->residual_forward(be, a->res2, mine, x, nC));
    DT_CHECK(dt__round(be, r, a->res2, nC));
    /* the MLP the same way */
    DT_CHECK(be->layernorm_forward(be, mine, a->ln2_mean, a->ln2_rstd, a->res2, p->ln2w, p->ln2b, n, C));
    DT_CHECK(dt__tp_gather(tp, 'F', full, NC));
    DT_CHECK(dt__round_shadow(be, r, full, NC, &sh));
    DT_CHECK(dt__shadow_end(be, full, sh, dt__linear_forward(be, dt__rnd_fp8(r), DT__LIN_FC, a->fch, full, p->fcw, p->fcb, N, C, 4 * Cl)));
    DT_CHECK(dt__gelu_round(be, r, a->tmp.gelu, a->fch, 1, (size_t)N * 4 * Cl, &sh)); /* fch rounded too */
    DT_CHECK(dt__shadow_end(
        be, a->tmp.gelu, sh,
        dt__linear_forward(be, dt__rnd_fp8(r), DT__LIN_FCPROJ, full, a->tmp.gelu, p->fcprojw, rank ? NULL : p->fcprojb, N, 4 * Cl, C)));
    DT_CHECK(dt__tp_scatter(tp, 'F', full, NC));
    DT_CHECK(be->residual_forward(be, a->out, mine, a->res2, nC));
    return dt__round(be, r, a->out, nC);
}

dt_status dt__sp_block_backward_b(dt__tp *tp, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                  const dt__block_acts *a, float *scratch, const float *x, float *dres,
                                  const dt__block_keep *k, int B, int T, const dt__rounder *r)
{
    const int t = tp->comm->size, rank = tp->comm->rank;
    const int C = cfg->hidden_size, Cl = C / t, NHl = cfg->num_heads / t, N = B * T, n = N / t;
    const size_t NC = (size_t)N * C, nC = (size_t)n * C, off = (size_t)rank * nC;
    const dt__sp_scr s = dt__sp_scr_bind(cfg, t, B, T, scratch);
    /* MLP: the output gradient of the rank's rows all-gathered (g's
     * conjugate): fcproj's output gradient, every row */
    DT_CHECK(be->copy(be, k->dout + off, dres, nC * sizeof(float), DT_COPY_D2D));
    DT_CHECK(dt__tp_gather(tp, 'B', k->dout, NC));
    DT_CHECK(dt__linear_dgrad(be, dt__rnd_fp8(r), DT__LIN_FCPROJ, s.dfch, k->dout, p->fcprojw, N, 4 * Cl, C));
    int sh;
    DT_CHECK(dt__gelu_back_round(be, r, s.dfch, k->gelu, a->fch, (size_t)N * 4 * Cl, &sh));
    dt_status st =
        k->dfch != s.dfch ? be->copy(be, k->dfch, s.dfch, (size_t)N * 4 * Cl * sizeof(float), DT_COPY_D2D) : DT_OK;
    if (st == DT_OK) st = dt__linear_dgrad(be, dt__rnd_fp8(r), DT__LIN_FC, s.part, s.dfch, p->fcw, N, C, 4 * Cl);
    DT_CHECK(dt__shadow_end(be, s.dfch, sh, st));
    DT_CHECK(dt__tp_scatter(tp, 'B', s.part, NC)); /* d(ln2) of the rank's rows, every rank's part summed */
    DT_CHECK(be->copy(be, k->dln2, s.part + off, nC * sizeof(float), DT_COPY_D2D));
    DT_CHECK(dt__round(be, r, k->dln2, nC));
    DT_CHECK(be->layernorm_backward(be, dres, NULL, NULL, k->dln2, a->res2, p->ln2w, a->ln2_mean, a->ln2_rstd, n, C));
    /* attention: d(res2) of the rank's rows, all-gathered for attproj */
    DT_CHECK(dt__round(be, r, dres, nC));
    DT_CHECK(be->copy(be, k->dres2 + off, dres, nC * sizeof(float), DT_COPY_D2D));
    DT_CHECK(dt__tp_gather(tp, 'B', k->dres2, NC));
    DT_CHECK(dt__round_shadow(be, r, k->dres2, NC, &sh));
    DT_CHECK(dt__shadow_end(be, k->dres2, sh,
                            dt__linear_dgrad(be, dt__rnd_fp8(r), DT__LIN_ATTPROJ, s.dbtc, k->dres2, p->attprojw, N, Cl, C)));
    DT_CHECK(dt__round(be, r, s.dbtc, (size_t)N * Cl));
    DT_CHECK(dt__attention_backward(be, a->tmp.attn, s.dqkv, s.dbtc, a->qkv, a->atty, a->lse, B, T, Cl, NHl));
    DT_CHECK(dt__round_shadow(be, r, s.dqkv, (size_t)N * 3 * Cl, &sh));
    st = k->dqkv != s.dqkv ? be->copy(be, k->dqkv, s.dqkv, (size_t)N * 3 * Cl * sizeof(float), DT_COPY_D2D) : DT_OK;
    if (st == DT_OK) st = dt__linear_dgrad(be, dt__rnd_fp8(r), DT__LIN_QKV, s.part, s.dqkv, p->qkvw, N, C, 3 * Cl);
    DT_CHECK(dt__shadow_end(be, s.dqkv, sh, st));
    DT_CHECK(dt__tp_scatter(tp, 'B', s.part, NC)); /* d(ln1) of the rank's rows */
    DT_CHECK(be->copy(be, k->dln1, s.part + off, nC * sizeof(float), DT_COPY_D2D));
    DT_CHECK(dt__round(be, r, k->dln1, nC));
    DT_CHECK(be->layernorm_backward(be, dres, NULL, NULL, k->dln1, x, p->ln1w, a->ln1_mean, a->ln1_rstd, n, C));
    return dt__round(be, r, dres, nC);
}

/* A LayerNorm's output with every row, in a->tmp.ln: the rank's rows
 * recomputed from its input xin (n rows) as the forward made them, all-gathered, rounded. */
static dt_status dt__sp_ln_full(dt__tp *tp, dt_backend *be, const dt__block_acts *a, const float *xin, const float *w,
                                const float *b, int N, int C, const dt__rounder *r, int *sh)
{
    const int t = tp->comm->size, n = N / t;
    float *full = a->tmp.ln;
    DT_CHECK(be->layernorm_forward(be, full + (size_t)tp->comm->rank * n * C, a->tmp.mean, a->tmp.rstd, xin, w, b, n,
                                   C));
    DT_CHECK(dt__tp_gather(tp, 'B', full, (size_t)N * C));
    return dt__round_shadow(be, r, full, (size_t)N * C, sh);
}

/* A LayerNorm's gain and bias gradients from the rank's rows, summed over
 * the group into gw, gb. */
static dt_status dt__sp_ln_grads(dt__tp *tp, dt_backend *be, float *gw, float *gb, const float *dy, const float *xin,
                                 const float *w, const float *mean, const float *rstd, int n, int C)
{
    DT_CHECK(be->memset_zero(be, tp->ln_grad, 2 * (size_t)C * sizeof(float)));
    DT_CHECK(be->layernorm_backward(be, NULL, tp->ln_grad, tp->ln_grad + C, dy, xin, w, mean, rstd, n, C));
    return dt__tp_ln_sum(tp, be, gw, gb, (size_t)C);
}

dt_status dt__sp_block_backward_w(dt__tp *tp, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                  const dt__block_params *g, const dt__block_acts *a, const float *x,
                                  const dt__block_keep *k, int B, int T, const dt__rounder *r)
{
    const int t = tp->comm->size, C = cfg->hidden_size, Cl = C / t, N = B * T, n = N / t;
    const dt__block_tmp *tmp = &a->tmp;
    /* block.c's W in its order, the LayerNorm outputs all-gathered, their
     * own gradients summed */
    int sh = 0;
    const float *gelu = k->gelu;
    if (!gelu) {
        DT_CHECK(dt__gelu_round(be, r, tmp->gelu, a->fch, 0, (size_t)N * 4 * Cl, &sh));
        gelu = tmp->gelu;
    }
    DT_CHECK(dt__shadow_end(
        be, gelu, sh, dt__linear_wgrad(be, dt__rnd_fp8(r), DT__LIN_FCPROJ, g->fcprojw, g->fcprojb, k->dout, gelu, p->fcprojw, N, 4 * Cl, C)));
    DT_CHECK(dt__sp_ln_full(tp, be, a, a->res2, p->ln2w, p->ln2b, N, C, r, &sh));
    DT_CHECK(dt__shadow_end(be, tmp->ln, sh,
                            dt__linear_wgrad(be, dt__rnd_fp8(r), DT__LIN_FC, g->fcw, g->fcb, k->dfch, tmp->ln, p->fcw, N, C, 4 * Cl)));
    DT_CHECK(dt__sp_ln_grads(tp, be, g->ln2w, g->ln2b, k->dln2, a->res2, p->ln2w, a->ln2_mean, a->ln2_rstd, n, C));
    DT_CHECK(dt__linear_wgrad(be, dt__rnd_fp8(r), DT__LIN_ATTPROJ, g->attprojw, g->attprojb, k->dres2, a->atty, p->attprojw, N, Cl, C));
    DT_CHECK(dt__sp_ln_full(tp, be, a, x, p->ln1w, p->ln1b, N, C, r, &sh));
    DT_CHECK(dt__shadow_end(be, tmp->ln, sh,
                            dt__linear_wgrad(be, dt__rnd_fp8(r), DT__LIN_QKV, g->qkvw, g->qkvb, k->dqkv, tmp->ln, p->qkvw, N, C, 3 * Cl)));
    return dt__sp_ln_grads(tp, be, g->ln1w, g->ln1b, k->dln1, x, p->ln1w, a->ln1_mean, a->ln1_rstd, n, C);
}

/* ---- the sequence-parallel block as the runner's ops (lib/model/runner.h) -- */

static dt_status dt__sp_ops_forward(void *ctx, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                    dt__block_acts *a, const float *x, int B, int T, const dt__rounder *r)
{
    return dt__sp_block_forward(ctx, be, cfg, p, a, x, B, T, r);
}

static dt_status dt__sp_ops_backward_b(void *ctx, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                       const dt__block_acts *a, const dt__block_scratch *s, float *xs, const float *x,
                                       float *dres, const dt__block_keep *k, int B, int T, const dt__rounder *r)
{
    (void)s; /* the shard's sizes: its own scratch */
    return dt__sp_block_backward_b(ctx, be, cfg, p, a, xs, x, dres, k, B, T, r);
}

static dt_status dt__sp_ops_backward_w(void *ctx, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                       const dt__block_params *g, const dt__block_acts *a, const float *x,
                                       const dt__block_keep *k, int B, int T, const dt__rounder *r)
{
    return dt__sp_block_backward_w(ctx, be, cfg, p, g, a, x, k, B, T, r);
}

static dt__block_keep dt__sp_ops_whole_keep(const dt_gpt_config *cfg, int t, int B, int T, const dt__block_scratch *s,
                                            float *xs)
{
    (void)s;
    return dt__sp_scr_bind(cfg, t, B, T, xs).keep;
}

const dt__block_ops dt__sp_block_ops = {
    .scratch_floats = dt__sp_scratch_floats,
    .forward = dt__sp_ops_forward,
    .backward_b = dt__sp_ops_backward_b,
    .backward_w = dt__sp_ops_backward_w,
    .whole_keep = dt__sp_ops_whole_keep,
};
