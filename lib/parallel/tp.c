/* tp.c: a tensor-parallel transformer block and the f/g operators (see
 * tp.h). The block is block.c's with the attention heads and the MLP's
 * hidden units split over the group:
 *
 *   ln1 = LN(x)                                    replicated
 *   qkv_r = f(ln1) W_qkv,r^T + b_qkv,r              column-parallel (NH/t heads)
 *   y_r = attention(qkv_r)                          (B,T,C/t)
 *   res2 = g(y_r W_proj,r^T [+ b_proj on rank 0]) + x
 *   ln2 = LN(res2)
 *   h_r = gelu(f(ln2) W_fc,r^T + b_fc,r)            column-parallel (4C/t)
 *   out = g(h_r W_fcproj,r^T [+ b_fcproj on rank 0]) + res2
 *
 * Backward mirrors it: g's backward is the identity, f's sums the partial
 * input gradients of the column-parallel layers over the group, just before
 * the LayerNorm backward that needs the whole of it. It is B then W
 * (gpt_layers.h's zero-bubble split): the allreduces are all in B, and W is
 * block.c's at the shard's sizes. */
#include "tp.h"

#include <stdio.h>
#include <string.h>

#include "dt_internal.h"
#include "dt_time.h"

static dt_status dt__tp_sum(dt__tp *tp, float *x, size_t n)
{
    const dt_collective_opts o = {.chunk_bytes = tp->chunk_bytes};
    return dt_comm_allreduce(tp->comm, x, n, tp->algo, &o);
}

static dt_status dt__tp_sum_traced(dt__tp *tp, int kind, char pass, float *x, size_t n)
{
    const int64_t t0 = tp->event ? dt_time_ns() : 0;
    DT_CHECK(dt__tp_sum(tp, x, n));
    if (tp->event) tp->event(tp->event_ctx, kind, pass, t0, dt_time_ns());
    return DT_OK;
}

static dt_status dt__tp_vocab_sum(void *ctx, int what, float *x, size_t n)
{
    dt__tp *tp = ctx;
    return dt__tp_sum_traced(tp, DT__TP_VOCAB_SUM, what == DT__VOCAB_EMBED ? 'F' : 'B', x, n);
}

static dt_status dt__tp_vocab_gather(void *ctx, float *buf, size_t n)
{
    dt__tp *tp = ctx;
    const int64_t t0 = tp->event ? dt_time_ns() : 0;
    const dt_collective_opts o = {.chunk_bytes = tp->chunk_bytes};
    DT_CHECK(dt_comm_all_gather(tp->comm, buf, n * (size_t)tp->comm->size, &o));
    if (tp->event) tp->event(tp->event_ctx, DT__TP_VOCAB_GATHER, 'F', t0, dt_time_ns());
    return DT_OK;
}

/* A reduce-scatter or an all-gather over the group, counted and traced. */
static dt_status dt__tp_sp_coll(dt__tp *tp, int kind, char pass, float *x, size_t n)
{
    const int64_t t0 = tp->event ? dt_time_ns() : 0;
    const dt_collective_opts o = {.chunk_bytes = tp->chunk_bytes};
    if (kind == DT__TP_SP_SCATTER) DT_CHECK(dt_comm_reduce_scatter(tp->comm, x, n, &o));
    else DT_CHECK(dt_comm_all_gather(tp->comm, x, n, &o));
    if (tp->event) tp->event(tp->event_ctx, kind, pass, t0, dt_time_ns());
    return DT_OK;
}

dt_status dt__tp_scatter(dt__tp *tp, char pass, float *x, size_t n)
{
    return dt__tp_sp_coll(tp, DT__TP_SP_SCATTER, pass, x, n);
}

dt_status dt__tp_gather(dt__tp *tp, char pass, float *x, size_t n)
{
    return dt__tp_sp_coll(tp, DT__TP_SP_GATHER, pass, x, n);
}

dt_status dt__tp_ln_sum(dt__tp *tp, dt_backend *be, float *gw, float *gb, size_t C)
{
    DT_CHECK(dt__tp_sum_traced(tp, DT__TP_SP_LN, 'B', tp->ln_grad, 2 * C));
    DT_CHECK(be->residual_forward(be, gw, gw, tp->ln_grad, C));
    return be->residual_forward(be, gb, gb, tp->ln_grad + C, C);
}

static dt_status dt__tp_vocab_scatter(void *ctx, char pass, float *x, size_t n)
{
    return dt__tp_scatter(ctx, pass, x, n);
}
static dt_status dt__tp_vocab_allgather(void *ctx, char pass, float *x, size_t n)
{
    return dt__tp_gather(ctx, pass, x, n);
}

static dt_status dt__tp_vocab_ln(void *ctx, dt_backend *be, float **part, float *gw, float *gb, size_t C)
{
    dt__tp *tp = ctx;
    if (!gw) { /* the buffer to compute into, zeroed */
        *part = tp->ln_grad;
        return be->memset_zero(be, tp->ln_grad, 2 * C * sizeof(float));
    }
    return dt__tp_ln_sum(tp, be, gw, gb, C);
}

dt__vocab dt__tp_vocab(dt__tp *tp, int V)
{
    dt__vocab v = {.V = V, .t = tp->comm->size, .rank = tp->comm->rank, .sum = dt__tp_vocab_sum,
                   .gather = dt__tp_vocab_gather, .ctx = tp};
    if (tp->sp) {
        v.sp = 1;
        v.scatter = dt__tp_vocab_scatter;
        v.allgather = dt__tp_vocab_allgather;
        v.ln = dt__tp_vocab_ln;
    }
    dt__vocab_rows(V, v.t, v.rank, &v.v0, &v.nv);
    return v;
}

dt_status dt__tp_f(dt__tp *tp, char pass, float *x, size_t n)
{
    if (pass != 'B') return DT_OK; /* identity forward */
    tp->allreduces_bwd++;
    return dt__tp_sum_traced(tp, DT__TP_F, pass, x, n);
}

dt_status dt__tp_g(dt__tp *tp, char pass, float *x, size_t n)
{
    if (pass != 'F') return DT_OK; /* identity backward */
    tp->allreduces_fwd++;
    return dt__tp_sum_traced(tp, DT__TP_G, pass, x, n);
}

dt_status dt__tp_check(const dt_gpt_config *cfg, int t)
{
    if (t < 1) return DT_FAIL(DT_ERR_INVALID, "--tensor-model-parallel-size %d: expected >= 1", t);
    if (cfg->num_heads % t)
        return DT_FAIL(DT_ERR_INVALID, "--tensor-model-parallel-size %d does not divide --num-attention-heads %d", t,
                       cfg->num_heads);
    if (cfg->hidden_size % t)
        return DT_FAIL(DT_ERR_INVALID, "--tensor-model-parallel-size %d does not divide --hidden-size %d", t,
                       cfg->hidden_size);
    return DT_OK;
}

const uint8_t dt__tp_sharded[DT__BLOCK_NTENSORS] = {0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0};

dt_status dt__tp_block_layout(const dt_gpt_config *cfg, int t, int l, dt_paramset *ps)
{
    DT_CHECK(dt__tp_check(cfg, t));
    const int64_t C = cfg->hidden_size, Cl = C / t, Fl = 4 * C / t;
    static const char *const names[12] = {"ln1.w", "ln1.b", "qkv.w", "qkv.b", "attproj.w", "attproj.b",
                                          "ln2.w", "ln2.b", "fc.w",  "fc.b",  "fcproj.w",  "fcproj.b"};
    const int64_t shapes[12][2] = {{C, 0}, {C, 0}, {3 * Cl, C}, {3 * Cl, 0}, {C, Cl}, {C, 0},
                                   {C, 0}, {C, 0}, {Fl, C},     {Fl, 0},     {C, Fl}, {C, 0}};
    char name[DT_NAME_MAX];
    for (int i = 0; i < 12; i++) {
        snprintf(name, sizeof name, "h.%d.%s", l, names[i]);
        int nd = shapes[i][1] ? 2 : 1;
        DT_CHECK(dt_paramset_add(ps, name, nd, shapes[i], nd == 2));
    }
    return DT_OK;
}

/* Rank r's shard of a block and the whole block's tensors, element for
 * element: to_whole 0 copies the whole tensors' elements into the shard, 1
 * the shard's back into the whole tensors (the one map of tp.h's layout,
 * both ways). */
static void dt__tp_block_copy(const dt_gpt_config *cfg, int t, int r, float *const full[12],
                              const dt_paramset *local_layout, int first_tensor, float *local, int to_whole)
{
    const size_t C = (size_t)cfg->hidden_size, Cl = C / (size_t)t, F = 4 * C, Fl = F / (size_t)t;
    float *o[12];
    for (int i = 0; i < 12; i++) o[i] = local + local_layout->info[first_tensor + i].offset;
#define DT__CP(shard, whole, n) memcpy(to_whole ? (whole) : (shard), to_whole ? (shard) : (whole), (n) * sizeof(float))
    static const int whole[] = {0, 1, 5, 6, 7, 11}; /* replicated */
    for (size_t k = 0; k < sizeof whole / sizeof whole[0]; k++) DT__CP(o[whole[k]], full[whole[k]], C);
    for (size_t part = 0; part < 3; part++) { /* q, k, v rows of this rank's heads */
        DT__CP(o[2] + part * Cl * C, full[2] + (part * C + r * Cl) * C, Cl * C);
        DT__CP(o[3] + part * Cl, full[3] + part * C + r * Cl, Cl);
    }
    for (size_t i = 0; i < C; i++) DT__CP(o[4] + i * Cl, full[4] + i * C + r * Cl, Cl);
    DT__CP(o[8], full[8] + r * Fl * C, Fl * C);
    DT__CP(o[9], full[9] + r * Fl, Fl);
    for (size_t i = 0; i < C; i++) DT__CP(o[10] + i * Fl, full[10] + i * F + r * Fl, Fl);
#undef DT__CP
}

void dt__tp_block_shard(const dt_gpt_config *cfg, int t, int r, const float *const full[12],
                        const dt_paramset *local_layout, int first_tensor, float *local)
{
    dt__tp_block_copy(cfg, t, r, (float *const *)full, local_layout, first_tensor, local, 0);
}

void dt__tp_block_unshard(const dt_gpt_config *cfg, int t, int r, const dt_paramset *local_layout, int first_tensor,
                          const float *local, float *const full[12])
{
    dt__tp_block_copy(cfg, t, r, full, local_layout, first_tensor, (float *)local, 1);
}

static size_t dt__pad16(size_t n) { return (n + 15) & ~(size_t)15; }

size_t dt__tp_scratch_floats(const dt_gpt_config *cfg, int t, int B, int T)
{
    const size_t BT = (size_t)B * T, C = (size_t)cfg->hidden_size, Cl = C / (size_t)t;
    /* dbtc, dqkv, dfch, and the keep's four (B,T,C) of a backward that runs W at once */
    return 5 * dt__pad16(BT * C) + dt__pad16(BT * 3 * Cl) + dt__pad16(BT * 4 * Cl) + 64;
}

dt_status dt__tp_block_forward(dt__tp *tp, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                               dt__tp_acts *a, const float *x, int B, int T, const dt__rounder *r)
{
    const int t = tp->comm->size, first = tp->comm->rank == 0;
    const int C = cfg->hidden_size, Cl = C / t, NHl = cfg->num_heads / t, N = B * T;
    const size_t NC = (size_t)N * C;
    /* Rounded where block.c rounds (a NULL r: FP32); a row-parallel
     * layer's partial output is summed by g first, rounded after the
     * residual as the whole block's is. */
    DT_CHECK(be->layernorm_forward(be, a->tmp.ln, a->ln1_mean, a->ln1_rstd, x, p->ln1w, p->ln1b, N, C));
    int sh; /* a 16-bit copy for the one GEMM that reads a rounded input, as in block.c */
    DT_CHECK(dt__round_shadow(be, r, a->tmp.ln, NC, &sh));
    dt_status st = dt__tp_f(tp, 'F', a->tmp.ln, NC); /* the identity: the copy stays valid */
    if (st == DT_OK) st = dt__linear_forward(be, dt__rnd_fp8(r), DT__LIN_QKV, a->qkv, a->tmp.ln, p->qkvw, p->qkvb, N, C, 3 * Cl);
    DT_CHECK(dt__shadow_end(be, a->tmp.ln, sh, st));
    DT_CHECK(dt__round(be, r, a->qkv, (size_t)N * 3 * Cl));
    DT_CHECK(dt__attention_forward(be, a->tmp.attn, a->atty, a->lse, a->qkv, B, T, Cl, NHl));
    DT_CHECK(dt__round_shadow(be, r, a->atty, (size_t)N * Cl, &sh));
    DT_CHECK(dt__shadow_end(
        be, a->atty, sh, dt__linear_forward(be, dt__rnd_fp8(r), DT__LIN_ATTPROJ, a->res2, a->atty, p->attprojw, first ? p->attprojb : NULL, N, Cl, C)));
    DT_CHECK(dt__tp_g(tp, 'F', a->res2, NC));
    DT_CHECK(be->residual_forward(be, a->res2, a->res2, x, NC));
    DT_CHECK(dt__round(be, r, a->res2, NC));
    DT_CHECK(be->layernorm_forward(be, a->tmp.ln, a->ln2_mean, a->ln2_rstd, a->res2, p->ln2w, p->ln2b, N, C));
    DT_CHECK(dt__round_shadow(be, r, a->tmp.ln, NC, &sh));
    st = dt__tp_f(tp, 'F', a->tmp.ln, NC);
    if (st == DT_OK) st = dt__linear_forward(be, dt__rnd_fp8(r), DT__LIN_FC, a->fch, a->tmp.ln, p->fcw, p->fcb, N, C, 4 * Cl);
    DT_CHECK(dt__shadow_end(be, a->tmp.ln, sh, st));
    DT_CHECK(dt__gelu_round(be, r, a->tmp.gelu, a->fch, 1, (size_t)N * 4 * Cl, &sh)); /* fch rounded too */
    DT_CHECK(dt__shadow_end(
        be, a->tmp.gelu, sh,
        dt__linear_forward(be, dt__rnd_fp8(r), DT__LIN_FCPROJ, a->out, a->tmp.gelu, p->fcprojw, first ? p->fcprojb : NULL, N, 4 * Cl, C)));
    DT_CHECK(dt__tp_g(tp, 'F', a->out, NC));
    DT_CHECK(be->residual_forward(be, a->out, a->out, a->res2, NC));
    DT_CHECK(dt__round(be, r, a->out, NC));
    return DT_OK;
}

dt_status dt__tp_block_backward_b(dt__tp *tp, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                  const dt__tp_acts *a, float *scratch, const float *x, float *dres,
                                  const dt__block_keep *k, int B, int T, const dt__rounder *r)
{
    const int t = tp->comm->size;
    const int C = cfg->hidden_size, Cl = C / t, NHl = cfg->num_heads / t, N = B * T;
    const size_t NC = (size_t)N * C, BT = (size_t)N;
    float *dbtc = scratch;                       /* (N, C/t) the attention output's gradient */
    float *dqkv = dbtc + dt__pad16(BT * C);      /* (N, 3C/t) */
    float *dfch = dqkv + dt__pad16(BT * 3 * Cl); /* (N, 4C/t) */
    /* activation gradients rounded where block.c rounds them; a partial
     * input gradient is rounded once f has summed it */
    /* MLP: g backward is the identity, so dres is the row-parallel layer's output gradient */
    DT_CHECK(be->copy(be, k->dout, dres, NC * sizeof(float), DT_COPY_D2D));
    DT_CHECK(dt__linear_dgrad(be, dt__rnd_fp8(r), DT__LIN_FCPROJ, dfch, dres, p->fcprojw, N, 4 * Cl, C));
    int sh;
    DT_CHECK(dt__gelu_back_round(be, r, dfch, k->gelu, a->fch, BT * 4 * Cl, &sh));
    dt_status st = k->dfch != dfch ? be->copy(be, k->dfch, dfch, BT * 4 * Cl * sizeof(float), DT_COPY_D2D) : DT_OK;
    if (st == DT_OK) st = dt__linear_dgrad(be, dt__rnd_fp8(r), DT__LIN_FC, k->dln2, dfch, p->fcw, N, C, 4 * Cl);
    DT_CHECK(dt__shadow_end(be, dfch, sh, st));
    DT_CHECK(dt__tp_f(tp, 'B', k->dln2, NC)); /* the whole d(ln2): every rank's part */
    DT_CHECK(dt__round(be, r, k->dln2, NC));
    DT_CHECK(be->layernorm_backward(be, dres, NULL, NULL, k->dln2, a->res2, p->ln2w, a->ln2_mean, a->ln2_rstd, N, C));
    /* attention */
    DT_CHECK(dt__round_shadow(be, r, dres, NC, &sh));
    st = be->copy(be, k->dres2, dres, NC * sizeof(float), DT_COPY_D2D);
    if (st == DT_OK) st = dt__linear_dgrad(be, dt__rnd_fp8(r), DT__LIN_ATTPROJ, dbtc, dres, p->attprojw, N, Cl, C);
    DT_CHECK(dt__shadow_end(be, dres, sh, st));
    DT_CHECK(dt__round(be, r, dbtc, BT * Cl));
    DT_CHECK(dt__attention_backward(be, a->tmp.attn, dqkv, dbtc, a->qkv, a->atty, a->lse, B, T, Cl, NHl));
    DT_CHECK(dt__round_shadow(be, r, dqkv, BT * 3 * Cl, &sh));
    st = k->dqkv != dqkv ? be->copy(be, k->dqkv, dqkv, BT * 3 * Cl * sizeof(float), DT_COPY_D2D) : DT_OK;
    if (st == DT_OK) st = dt__linear_dgrad(be, dt__rnd_fp8(r), DT__LIN_QKV, k->dln1, dqkv, p->qkvw, N, C, 3 * Cl);
    DT_CHECK(dt__shadow_end(be, dqkv, sh, st));
    DT_CHECK(dt__tp_f(tp, 'B', k->dln1, NC)); /* the whole d(ln1) */
    DT_CHECK(dt__round(be, r, k->dln1, NC));
    DT_CHECK(be->layernorm_backward(be, dres, NULL, NULL, k->dln1, x, p->ln1w, a->ln1_mean, a->ln1_rstd, N, C));
    DT_CHECK(dt__round(be, r, dres, NC));
    return DT_OK;
}

/* The keep of a backward that runs W at once, in scratch after the
 * backward's own buffers (its dfch and dqkv are theirs). */
static dt__block_keep dt__tp_scratch_keep(const dt_gpt_config *cfg, int t, int B, int T, float *scratch)
{
    const size_t BT = (size_t)B * T, C = (size_t)cfg->hidden_size, Cl = C / (size_t)t;
    float *dqkv = scratch + dt__pad16(BT * C);   /* (N, 3C/t) */
    float *dfch = dqkv + dt__pad16(BT * 3 * Cl); /* (N, 4C/t) */
    float *w = dfch + dt__pad16(BT * 4 * Cl);
    dt__block_keep k = {.dfch = dfch, .dqkv = dqkv};
    k.dout = w, w += dt__pad16(BT * C);
    k.dln2 = w, w += dt__pad16(BT * C);
    k.dres2 = w, w += dt__pad16(BT * C);
    k.dln1 = w;
    return k;
}

dt_status dt__tp_block_backward(dt__tp *tp, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                const dt__block_params *g, const dt__tp_acts *a, float *scratch, const float *x,
                                float *dres, int B, int T, const dt__rounder *r)
{
    const int t = tp->comm->size;
    dt__block_keep k = dt__tp_scratch_keep(cfg, t, B, T, scratch);
    k.gelu = a->tmp.gelu; /* W follows B at once */
    DT_CHECK(dt__tp_block_backward_b(tp, be, cfg, p, a, scratch, x, dres, &k, B, T, r));
    return dt__block_backward_w(be, cfg, t, p, g, a, x, &k, B, T, r);
}

double dt__tp_block_probe(const dt_gpt_config *cfg, int t, int r, const dt_paramset *local_layout, int first_tensor,
                          const float *local, const size_t whole_off[12])
{
    const size_t C = (size_t)cfg->hidden_size, Cl = C / (size_t)t, F = 4 * C, Fl = F / (size_t)t;
    const float *o[12];
    for (int i = 0; i < 12; i++) o[i] = local + local_layout->info[first_tensor + i].offset;
    double sum = 0.0;
    for (size_t part = 0; part < 3; part++) { /* q, k, v rows of this rank's heads, and their biases */
        for (size_t j = 0; j < Cl * C; j++)
            sum += (double)o[2][part * Cl * C + j] * dt__probe_u(whole_off[2] + (part * C + r * Cl) * C + j);
        for (size_t j = 0; j < Cl; j++)
            sum += (double)o[3][part * Cl + j] * dt__probe_u(whole_off[3] + part * C + r * Cl + j);
    }
    for (size_t i = 0; i < C; i++)
        for (size_t j = 0; j < Cl; j++)
            sum += (double)o[4][i * Cl + j] * dt__probe_u(whole_off[4] + i * C + r * Cl + j);
    for (size_t j = 0; j < Fl * C; j++) sum += (double)o[8][j] * dt__probe_u(whole_off[8] + r * Fl * C + j);
    for (size_t j = 0; j < Fl; j++) sum += (double)o[9][j] * dt__probe_u(whole_off[9] + r * Fl + j);
    for (size_t i = 0; i < C; i++)
        for (size_t j = 0; j < Fl; j++)
            sum += (double)o[10][i * Fl + j] * dt__probe_u(whole_off[10] + i * F + r * Fl + j);
    return sum;
}

/* ---- the tensor-parallel block as the runner's ops (lib/model/runner.h) --- */

static dt_status dt__tp_ops_forward(void *ctx, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                    dt__block_acts *a, const float *x, int B, int T, const dt__rounder *r)
{
    return dt__tp_block_forward(ctx, be, cfg, p, a, x, B, T, r);
}

static dt_status dt__tp_ops_backward_b(void *ctx, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                       const dt__block_acts *a, const dt__block_scratch *s, float *xs, const float *x,
                                       float *dres, const dt__block_keep *k, int B, int T, const dt__rounder *r)
{
    (void)s; /* the shard's sizes: its own scratch */
    return dt__tp_block_backward_b(ctx, be, cfg, p, a, xs, x, dres, k, B, T, r);
}

static dt__block_keep dt__tp_ops_whole_keep(const dt_gpt_config *cfg, int t, int B, int T, const dt__block_scratch *s,
                                            float *xs)
{
    (void)s;
    return dt__tp_scratch_keep(cfg, t, B, T, xs);
}

const dt__block_ops dt__tp_block_ops = {
    .scratch_floats = dt__tp_scratch_floats,
    .forward = dt__tp_ops_forward,
    .backward_b = dt__tp_ops_backward_b,
    .whole_keep = dt__tp_ops_whole_keep,
};
