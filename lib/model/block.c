/* block.c: one pre-LayerNorm transformer block, forward and backward.
 *
 *   res2 = x + proj(attention(ln1(x)))
 *   out  = res2 + fcproj(gelu(fc(ln2(res2))))
 *
 * Backward keeps one residual-gradient buffer dres flowing through the
 * block: each LayerNorm backward accumulates into it (the "+" of the
 * residual), so no separate add is needed. It is B (the input gradient,
 * keeping each layer's output gradient) then W (the parameter gradients
 * from what B kept): gpt_layers.h's zero-bubble split. Saved activations per block,
 * in floats: 10*B*T*C + 4*B*T + NH*B*T (dt__block_act_floats is the single
 * source of truth for that size): the LayerNorm outputs and GELU's output
 * are transients (dt__block_tmp) that W recomputes, 6*B*T*C fewer. */
#include "runner.h"

void dt__block_params_bind(dt__block_params *b, const dt_param_info *info, float *base, size_t origin)
{
    float **f[DT__BLOCK_NTENSORS] = {&b->ln1w, &b->ln1b, &b->qkvw, &b->qkvb, &b->attprojw, &b->attprojb,
                                     &b->ln2w, &b->ln2b, &b->fcw,  &b->fcb,  &b->fcprojw,  &b->fcprojb};
    for (int i = 0; i < DT__BLOCK_NTENSORS; i++) *f[i] = base + (info[i].offset - origin);
}

dt_status dt__arena_alloc(dt__arena *a, size_t n, float **out)
{
    n = (n + 15) & ~(size_t)15; /* keep 64-byte alignment */
    if (a->used + n > a->capacity)
        return DT_FAIL(DT_ERR_NOMEM, "activation arena: %zu floats requested, %zu of %zu in use", n, a->used,
                       a->capacity);
    *out = a->base + a->used;
    a->used += n;
    if (a->used > a->peak) a->peak = a->used;
    return DT_OK;
}

void dt__arena_reset(dt__arena *a) { a->used = 0; }

static size_t dt__pad16(size_t n) { return (n + 15) & ~(size_t)15; }

size_t dt__block_att_floats(const dt_gpt_config *cfg, int t, int B, int T)
{
    return dt__pad16((size_t)B * ((size_t)cfg->num_heads / (size_t)t) * T);
}

size_t dt__block_act_floats(const dt_gpt_config *cfg, dt__shard sh, int B, int T, int with_att)
{
    const int t = sh.t;
    const size_t BT = (size_t)B * T, C = (size_t)cfg->hidden_size, Cl = C / (size_t)t, n = dt__shard_rows(sh, BT);
    return 2 * dt__pad16(n * C)      /* res2, out */
           + 4 * dt__pad16(n)        /* LayerNorm means and rstds */
           + dt__pad16(BT * 3 * Cl)  /* qkv */
           + dt__pad16(BT * Cl)      /* atty */
           + dt__pad16(BT * 4 * Cl)  /* fch */
           + (with_att ? dt__block_att_floats(cfg, t, B, T) : 0);
}

size_t dt__block_tmp_floats(const dt_gpt_config *cfg, int B, int T)
{
    size_t BT = (size_t)B * T, C = (size_t)cfg->hidden_size;
    return dt__pad16(BT * C) + dt__pad16(BT * 4 * C) + 2 * dt__pad16(BT);
}

void dt__block_tmp_bind(dt__block_tmp *tmp, const dt_gpt_config *cfg, int B, int T, float *w)
{
    const size_t BT = (size_t)B * T, C = (size_t)cfg->hidden_size;
    tmp->attn = NULL;
    tmp->ln = w, w += dt__pad16(BT * C);
    tmp->gelu = w, w += dt__pad16(BT * 4 * C);
    tmp->mean = w, w += dt__pad16(BT);
    tmp->rstd = w;
}

/* dbtc, dqkv, dfch, then the keep's four (B,T,C) (its dfch and dqkv
 * are the scratch's), then the transients */
size_t dt__block_scratch_floats(const dt_gpt_config *cfg, int B, int T)
{
    size_t BT = (size_t)B * T, C = (size_t)cfg->hidden_size;
    return 5 * dt__pad16(BT * C) + dt__pad16(BT * 3 * C) + dt__pad16(BT * 4 * C) + dt__block_tmp_floats(cfg, B, T);
}

void dt__block_scratch_bind(dt__block_scratch *s, const dt_gpt_config *cfg, int B, int T, float *w)
{
    const size_t BT = (size_t)B * T, C = (size_t)cfg->hidden_size;
    s->dbtc = w, w += dt__pad16(BT * C);
    s->dqkv = w, w += dt__pad16(BT * 3 * C);
    s->dfch = w, w += dt__pad16(BT * 4 * C);
    s->keep.dout = w, w += dt__pad16(BT * C);
    s->keep.dln2 = w, w += dt__pad16(BT * C);
    s->keep.dres2 = w, w += dt__pad16(BT * C);
    s->keep.dln1 = w, w += dt__pad16(BT * C);
    dt__block_tmp_bind(&s->tmp, cfg, B, T, w);
    s->keep.dfch = s->dfch;
    s->keep.gelu = s->tmp.gelu; /* W follows B at once */
    s->keep.dqkv = s->dqkv;
}

/* dout and dres2 have every row (the GEMMs' output gradients: gathered
 * under sequence parallelism), dln2 and dln1 the rank's rows */
size_t dt__block_keep_floats(const dt_gpt_config *cfg, dt__shard sh, int B, int T, int in_acts)
{
    const size_t BT = (size_t)B * T, C = (size_t)cfg->hidden_size, Cl = C / (size_t)sh.t, n = dt__shard_rows(sh, BT);
    return 2 * dt__pad16(BT * C) + 2 * dt__pad16(n * C) + dt__pad16(BT * 4 * Cl) +
           (in_acts ? 0 : dt__pad16(BT * 3 * Cl));
}

dt_status dt__block_keep_alloc(dt__arena *a, const dt_gpt_config *cfg, dt__shard sh, int B, int T,
                               const dt__block_acts *acts, dt__block_keep *k)
{
    const size_t BT = (size_t)B * T, C = (size_t)cfg->hidden_size, Cl = C / (size_t)sh.t, n = dt__shard_rows(sh, BT);
    DT_CHECK(dt__arena_alloc(a, BT * C, &k->dout));
    DT_CHECK(dt__arena_alloc(a, n * C, &k->dln2));
    DT_CHECK(dt__arena_alloc(a, BT * C, &k->dres2));
    DT_CHECK(dt__arena_alloc(a, n * C, &k->dln1));
    DT_CHECK(dt__arena_alloc(a, BT * 4 * Cl, &k->dfch));
    k->gelu = NULL; /* W runs later: it recomputes GELU's output */
    if (acts) {     /* dead after B: qkv (read by attention's backward); W reads fch */
        k->dqkv = acts->qkv;
        return DT_OK;
    }
    return dt__arena_alloc(a, BT * 3 * Cl, &k->dqkv);
}

/* The keep's tensors in order and their floats (t's shard). */
static void dt__block_keep_fields(const dt__block_keep *k, const dt_gpt_config *cfg, dt__shard sh, int B, int T,
                                  float *ptr[DT__BLOCK_NKEEP], size_t n[DT__BLOCK_NKEEP])
{
    const size_t BT = (size_t)B * T, C = (size_t)cfg->hidden_size, Cl = C / (size_t)sh.t, nr = dt__shard_rows(sh, BT);
    float *const p[DT__BLOCK_NKEEP] = {k ? k->dout : NULL,  k ? k->dfch : NULL, k ? k->dln2 : NULL,
                                       k ? k->dres2 : NULL, k ? k->dqkv : NULL, k ? k->dln1 : NULL};
    const size_t sz[DT__BLOCK_NKEEP] = {BT * C, BT * 4 * Cl, nr * C, BT * C, BT * 3 * Cl, nr * C};
    for (int i = 0; i < DT__BLOCK_NKEEP; i++) ptr[i] = p[i], n[i] = sz[i];
}

size_t dt__block_keep_packed_floats(const dt_gpt_config *cfg, dt__shard sh, int B, int T)
{
    float *ptr[DT__BLOCK_NKEEP];
    size_t n[DT__BLOCK_NKEEP], total = 0;
    dt__block_keep_fields(NULL, cfg, sh, B, T, ptr, n);
    for (int i = 0; i < DT__BLOCK_NKEEP; i++) total += dt__pad16((n[i] + 1) / 2);
    return total;
}

dt_status dt__block_keep_pack_alloc(dt__arena *a, const dt_gpt_config *cfg, dt__shard sh, int B, int T,
                                    void *stores[DT__BLOCK_NKEEP])
{
    float *ptr[DT__BLOCK_NKEEP], *f = NULL;
    size_t n[DT__BLOCK_NKEEP];
    dt__block_keep_fields(NULL, cfg, sh, B, T, ptr, n);
    for (int i = 0; i < DT__BLOCK_NKEEP; i++) {
        DT_CHECK(dt__arena_alloc(a, (n[i] + 1) / 2, &f));
        stores[i] = f;
    }
    return DT_OK;
}

dt_status dt__block_keep_pack_copy(dt_backend *be, const dt_gpt_config *cfg, dt__shard sh, int B, int T, dt_dtype dtype,
                                   const dt__block_keep *k, void *const stores[DT__BLOCK_NKEEP], int pack)
{
    float *ptr[DT__BLOCK_NKEEP];
    size_t n[DT__BLOCK_NKEEP];
    dt__block_keep_fields(k, cfg, sh, B, T, ptr, n);
    for (int i = 0; i < DT__BLOCK_NKEEP; i++) {
        if (pack) DT_CHECK(be->cast(be, stores[i], dtype, ptr[i], DT_F32, n[i]));
        else DT_CHECK(be->cast(be, ptr[i], DT_F32, stores[i], dtype, n[i]));
    }
    return DT_OK;
}

dt_status dt__block_acts_alloc(dt__arena *a, const dt_gpt_config *cfg, dt__shard sh, int B, int T, int with_att,
                               const dt__block_tmp *tmp, dt__block_acts *acts)
{
    const size_t BT = (size_t)B * T, C = (size_t)cfg->hidden_size, Cl = C / (size_t)sh.t, n = dt__shard_rows(sh, BT);
    const size_t NHl = (size_t)cfg->num_heads / (size_t)sh.t;
    acts->tmp = *tmp;
    DT_CHECK(dt__arena_alloc(a, n, &acts->ln1_mean));
    DT_CHECK(dt__arena_alloc(a, n, &acts->ln1_rstd));
    DT_CHECK(dt__arena_alloc(a, BT * 3 * Cl, &acts->qkv));
    acts->lse = NULL;
    if (with_att) DT_CHECK(dt__arena_alloc(a, (size_t)B * NHl * T, &acts->lse));
    DT_CHECK(dt__arena_alloc(a, BT * Cl, &acts->atty));
    DT_CHECK(dt__arena_alloc(a, n * C, &acts->res2));
    DT_CHECK(dt__arena_alloc(a, n, &acts->ln2_mean));
    DT_CHECK(dt__arena_alloc(a, n, &acts->ln2_rstd));
    DT_CHECK(dt__arena_alloc(a, BT * 4 * Cl, &acts->fch));
    DT_CHECK(dt__arena_alloc(a, n * C, &acts->out));
    return DT_OK;
}

dt_status dt__round(dt_backend *be, const dt__rounder *r, float *x, size_t n)
{
    if (!r || r->dtype == DT_F32 || n == 0) return DT_OK;
    if (n > r->capacity)
        return DT_FAIL(DT_ERR_INVALID, "mixed precision: %zu elements to round, scratch holds %zu", n, r->capacity);
    if (be->round) return be->round(be, x, r->dtype, n); /* the same bits, one pass, no scratch */
    DT_CHECK(be->cast(be, r->scratch, r->dtype, x, DT_F32, n));
    return be->cast(be, x, DT_F32, r->scratch, r->dtype, n);
}

/* Whether the fused bf16 passes can run: a bf16 rounder whose scratch
 * holds the copy, and shadows to register it as (each pass checks that
 * the backend has its own op too). */
static int dt__bf16_fused(const dt_backend *be, const dt__rounder *r, size_t n)
{
    return r && r->dtype == DT_BF16 && r->scratch && n <= r->capacity && be->set_gemm_shadow;
}

dt_status dt__gelu_round(dt_backend *be, const dt__rounder *r, float *out, float *inp, int round_in, size_t n,
                         int *shadow)
{
    *shadow = 0;
    if (dt__bf16_fused(be, r, n) && be->gelu_forward_bf16) {
        DT_CHECK(be->gelu_forward_bf16(be, out, r->scratch, inp, round_in, n));
        DT_CHECK(be->set_gemm_shadow(be, out, n, r->scratch, DT_BF16));
        *shadow = 1;
        return DT_OK;
    }
    if (round_in) DT_CHECK(dt__round(be, r, inp, n));
    DT_CHECK(be->gelu_forward(be, out, inp, n));
    return dt__round(be, r, out, n);
}

dt_status dt__gelu_back_round(dt_backend *be, const dt__rounder *r, float *d, float *out, const float *inp, size_t n,
                              int *shadow)
{
    *shadow = 0;
    if (dt__bf16_fused(be, r, n) && be->gelu_backward_bf16) {
        DT_CHECK(be->gelu_backward_bf16(be, d, r->scratch, out, inp, n));
        DT_CHECK(be->set_gemm_shadow(be, d, n, r->scratch, DT_BF16));
        *shadow = 1;
        return DT_OK;
    }
    DT_CHECK(dt__round(be, r, d, n));
    DT_CHECK(be->gelu_backward(be, d, out, inp, d, n));
    if (out) DT_CHECK(dt__round(be, r, out, n));
    return dt__round(be, r, d, n);
}

dt_status dt__round_shadow(dt_backend *be, const dt__rounder *r, float *x, size_t n, int *shadow)
{
    *shadow = 0;
    if (dt__bf16_fused(be, r, n) && be->round_bf16) {
        DT_CHECK(be->round_bf16(be, x, r->scratch, n));
        DT_CHECK(be->set_gemm_shadow(be, x, n, r->scratch, DT_BF16));
        *shadow = 1;
        return DT_OK;
    }
    return dt__round(be, r, x, n);
}

dt_status dt__shadow_end(dt_backend *be, const float *p, int shadow, dt_status st)
{
    if (!shadow) return st;
    const dt_status forgot = be->set_gemm_shadow(be, p, 0, NULL, DT_BF16);
    return st != DT_OK ? st : forgot;
}

void dt__block_fields(dt__block_acts *a, const dt_gpt_config *cfg, dt__shard sh, int B, int T,
                      float **ptr[DT__BLOCK_NFIELDS], size_t n[DT__BLOCK_NFIELDS], int stat[DT__BLOCK_NFIELDS])
{
    const size_t BT = (size_t)B * T, C = (size_t)cfg->hidden_size, Cl = C / (size_t)sh.t, nr = dt__shard_rows(sh, BT);
    const size_t NHl = (size_t)cfg->num_heads / (size_t)sh.t;
    float **p[DT__BLOCK_NFIELDS] = {&a->ln1_mean, &a->ln1_rstd, &a->qkv,      &a->lse, &a->atty,
                                    &a->res2,     &a->ln2_mean, &a->ln2_rstd, &a->fch, &a->out};
    const size_t sz[DT__BLOCK_NFIELDS] = {nr,     nr, BT * 3 * Cl, B * NHl * T, BT * Cl,
                                          nr * C, nr, nr,          BT * 4 * Cl, nr * C};
    for (int i = 0; i < DT__BLOCK_NFIELDS; i++) {
        ptr[i] = p[i];
        n[i] = sz[i];
        stat[i] = i == 0 || i == 1 || i == 3 || i == 6 || i == 7; /* LayerNorm means and rstds, lse */
    }
}

static int dt__block_pack_fp32(const dt__block_pack *k, int i, const int *stat)
{
    return stat[i] || (k->out_fp32 && i == DT__BLOCK_OUT);
}

size_t dt__block_packed_floats(const dt__block_pack *k)
{
    dt__block_acts tmp;
    float **ptr[DT__BLOCK_NFIELDS];
    size_t n[DT__BLOCK_NFIELDS], total = 0;
    int stat[DT__BLOCK_NFIELDS];
    dt__block_fields(&tmp, k->cfg, k->sh, k->B, k->T, ptr, n, stat);
    for (int i = 0; i < DT__BLOCK_NFIELDS; i++) {
        if (i == DT__BLOCK_ATT && !k->with_att) continue;
        total += dt__pad16(dt__block_pack_fp32(k, i, stat) ? n[i] : (n[i] + 1) / 2);
    }
    return total;
}

dt_status dt__block_pack_alloc(const dt__block_pack *k, dt__arena *a, void *stores[DT__BLOCK_NFIELDS])
{
    dt__block_acts tmp;
    float **ptr[DT__BLOCK_NFIELDS];
    size_t n[DT__BLOCK_NFIELDS];
    int stat[DT__BLOCK_NFIELDS];
    dt__block_fields(&tmp, k->cfg, k->sh, k->B, k->T, ptr, n, stat);
    for (int i = 0; i < DT__BLOCK_NFIELDS; i++) {
        stores[i] = NULL;
        if (i == DT__BLOCK_ATT && !k->with_att) continue;
        float *p = NULL;
        DT_CHECK(dt__arena_alloc(a, dt__block_pack_fp32(k, i, stat) ? n[i] : (n[i] + 1) / 2, &p));
        stores[i] = p;
    }
    return DT_OK;
}

dt_status dt__block_pack_copy(const dt__block_pack *k, dt_backend *be, dt__block_acts *acts,
                              void *const stores[DT__BLOCK_NFIELDS], int pack)
{
    float **ptr[DT__BLOCK_NFIELDS];
    size_t n[DT__BLOCK_NFIELDS];
    int stat[DT__BLOCK_NFIELDS];
    dt__block_fields(acts, k->cfg, k->sh, k->B, k->T, ptr, n, stat);
    for (int i = 0; i < DT__BLOCK_NFIELDS; i++) {
        void *store = stores[i];
        if (!store || (!pack && i == DT__BLOCK_OUT)) continue; /* no backward reads the output */
        float *f = *ptr[i];
        if (dt__block_pack_fp32(k, i, stat))
            DT_CHECK(be->copy(be, pack ? store : f, pack ? f : store, n[i] * sizeof(float), DT_COPY_D2D));
        else if (pack) DT_CHECK(be->cast(be, store, k->dtype, f, DT_F32, n[i]));
        else DT_CHECK(be->cast(be, f, DT_F32, store, k->dtype, n[i]));
    }
    return DT_OK;
}

dt_status dt__block_forward(dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p, dt__block_acts *a,
                            const float *x, int B, int T, const dt__rounder *r)
{
    const int C = cfg->hidden_size, NH = cfg->num_heads, N = B * T;
    const size_t NC = (size_t)N * C;
    /* Each op's output is rounded to the storage format before the next op
     * reads it (statistics stay FP32); with r == NULL nothing changes. */
    /* A GEMM input rounded just before its GEMM may leave a 16-bit copy
     * for that GEMM (dt__round_shadow, dt__gelu_round): the same values. */
    int sh;
    DT_CHECK(be->layernorm_forward(be, a->tmp.ln, a->ln1_mean, a->ln1_rstd, x, p->ln1w, p->ln1b, N, C));
    DT_CHECK(dt__round_shadow(be, r, a->tmp.ln, NC, &sh));
    DT_CHECK(
        dt__shadow_end(be, a->tmp.ln, sh, dt__linear_forward(be, dt__rnd_fp8(r), DT__LIN_QKV, a->qkv, a->tmp.ln, p->qkvw, p->qkvb, N, C, 3 * C)));
    DT_CHECK(dt__round(be, r, a->qkv, 3 * NC));
    DT_CHECK(dt__attention_forward(be, a->tmp.attn, a->atty, a->lse, a->qkv, B, T, C, NH));
    DT_CHECK(dt__round_shadow(be, r, a->atty, NC, &sh));
    DT_CHECK(
        dt__shadow_end(be, a->atty, sh, dt__linear_forward(be, dt__rnd_fp8(r), DT__LIN_ATTPROJ, a->res2, a->atty, p->attprojw, p->attprojb, N, C, C)));
    DT_CHECK(be->residual_forward(be, a->res2, a->res2, x, NC));
    DT_CHECK(dt__round(be, r, a->res2, NC));
    DT_CHECK(be->layernorm_forward(be, a->tmp.ln, a->ln2_mean, a->ln2_rstd, a->res2, p->ln2w, p->ln2b, N, C));
    DT_CHECK(dt__round_shadow(be, r, a->tmp.ln, NC, &sh));
    DT_CHECK(dt__shadow_end(be, a->tmp.ln, sh, dt__linear_forward(be, dt__rnd_fp8(r), DT__LIN_FC, a->fch, a->tmp.ln, p->fcw, p->fcb, N, C, 4 * C)));
    DT_CHECK(dt__gelu_round(be, r, a->tmp.gelu, a->fch, 1, 4 * NC, &sh)); /* fch rounded too */
    DT_CHECK(dt__shadow_end(be, a->tmp.gelu, sh,
                            dt__linear_forward(be, dt__rnd_fp8(r), DT__LIN_FCPROJ, a->out, a->tmp.gelu, p->fcprojw, p->fcprojb, N, 4 * C, C)));
    DT_CHECK(be->residual_forward(be, a->out, a->out, a->res2, NC));
    DT_CHECK(dt__round(be, r, a->out, NC));
    return DT_OK;
}

dt_status dt__block_backward_b(dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                               const dt__block_acts *a, const dt__block_scratch *s, const float *x, float *dres,
                               const dt__block_keep *k, int B, int T, const dt__rounder *r)
{
    const int C = cfg->hidden_size, NH = cfg->num_heads, N = B * T;
    const size_t NC = (size_t)N * C;
    /* Activation gradients are rounded to the storage format after each op
     * (parameter gradients are rounded by the caller, per micro-batch); W
     * reads the rounded values. */
    /* MLP: dres is d(out) = d(res2) through the residual, and d(fcproj out). */
    DT_CHECK(be->copy(be, k->dout, dres, NC * sizeof(float), DT_COPY_D2D));
    DT_CHECK(dt__linear_dgrad(be, dt__rnd_fp8(r), DT__LIN_FCPROJ, s->dfch, dres, p->fcprojw, N, 4 * C, C));
    int sh;
    DT_CHECK(dt__gelu_back_round(be, r, s->dfch, k->gelu, a->fch, 4 * NC, &sh));
    dt_status st = k->dfch != s->dfch ? be->copy(be, k->dfch, s->dfch, 4 * NC * sizeof(float), DT_COPY_D2D) : DT_OK;
    if (st == DT_OK) st = dt__linear_dgrad(be, dt__rnd_fp8(r), DT__LIN_FC, k->dln2, s->dfch, p->fcw, N, C, 4 * C);
    DT_CHECK(dt__shadow_end(be, s->dfch, sh, st));
    DT_CHECK(dt__round(be, r, k->dln2, NC));
    DT_CHECK(be->layernorm_backward(be, dres, NULL, NULL, k->dln2, a->res2, p->ln2w, a->ln2_mean, a->ln2_rstd, N, C));
    /* Attention: dres now holds d(res2) = d(x) through the residual + d(proj out). */
    DT_CHECK(dt__round_shadow(be, r, dres, NC, &sh));
    st = be->copy(be, k->dres2, dres, NC * sizeof(float), DT_COPY_D2D);
    if (st == DT_OK) st = dt__linear_dgrad(be, dt__rnd_fp8(r), DT__LIN_ATTPROJ, s->dbtc, dres, p->attprojw, N, C, C);
    DT_CHECK(dt__shadow_end(be, dres, sh, st));
    DT_CHECK(dt__round(be, r, s->dbtc, NC));
    DT_CHECK(dt__attention_backward(be, a->tmp.attn, s->dqkv, s->dbtc, a->qkv, a->atty, a->lse, B, T, C, NH));
    DT_CHECK(dt__round_shadow(be, r, s->dqkv, 3 * NC, &sh));
    st = k->dqkv != s->dqkv ? be->copy(be, k->dqkv, s->dqkv, 3 * NC * sizeof(float), DT_COPY_D2D) : DT_OK;
    if (st == DT_OK) st = dt__linear_dgrad(be, dt__rnd_fp8(r), DT__LIN_QKV, k->dln1, s->dqkv, p->qkvw, N, C, 3 * C);
    DT_CHECK(dt__shadow_end(be, s->dqkv, sh, st));
    DT_CHECK(dt__round(be, r, k->dln1, NC));
    DT_CHECK(be->layernorm_backward(be, dres, NULL, NULL, k->dln1, x, p->ln1w, a->ln1_mean, a->ln1_rstd, N, C));
    DT_CHECK(dt__round(be, r, dres, NC));
    return DT_OK;
}

dt_status dt__block_backward_w(dt_backend *be, const dt_gpt_config *cfg, int t, const dt__block_params *p,
                               const dt__block_params *g, const dt__block_acts *a, const float *x,
                               const dt__block_keep *k, int B, int T, const dt__rounder *r)
{
    const int C = cfg->hidden_size, Cl = C / t, N = B * T;
    const size_t NC = (size_t)N * C;
    const dt__block_tmp *tmp = &a->tmp;
    /* in the backward's order: fcproj, fc, ln2, attproj, qkv, ln1; each
     * transient recomputed (and rounded) as the forward made it */
    int sh = 0;
    const float *gelu = k->gelu; /* B's, or recomputed (fch is only read) */
    if (!gelu) {
        DT_CHECK(dt__gelu_round(be, r, tmp->gelu, a->fch, 0, 4 * (size_t)N * Cl, &sh));
        gelu = tmp->gelu;
    }
    DT_CHECK(dt__shadow_end(
        be, gelu, sh, dt__linear_wgrad(be, dt__rnd_fp8(r), DT__LIN_FCPROJ, g->fcprojw, g->fcprojb, k->dout, gelu, p->fcprojw, N, 4 * Cl, C)));
    DT_CHECK(be->layernorm_forward(be, tmp->ln, tmp->mean, tmp->rstd, a->res2, p->ln2w, p->ln2b, N, C));
    DT_CHECK(dt__round_shadow(be, r, tmp->ln, NC, &sh));
    DT_CHECK(dt__shadow_end(be, tmp->ln, sh,
                            dt__linear_wgrad(be, dt__rnd_fp8(r), DT__LIN_FC, g->fcw, g->fcb, k->dfch, tmp->ln, p->fcw, N, C, 4 * Cl)));
    DT_CHECK(
        be->layernorm_backward(be, NULL, g->ln2w, g->ln2b, k->dln2, a->res2, p->ln2w, a->ln2_mean, a->ln2_rstd, N, C));
    DT_CHECK(dt__linear_wgrad(be, dt__rnd_fp8(r), DT__LIN_ATTPROJ, g->attprojw, g->attprojb, k->dres2, a->atty, p->attprojw, N, Cl, C));
    DT_CHECK(be->layernorm_forward(be, tmp->ln, tmp->mean, tmp->rstd, x, p->ln1w, p->ln1b, N, C));
    DT_CHECK(dt__round_shadow(be, r, tmp->ln, NC, &sh));
    DT_CHECK(dt__shadow_end(be, tmp->ln, sh,
                            dt__linear_wgrad(be, dt__rnd_fp8(r), DT__LIN_QKV, g->qkvw, g->qkvb, k->dqkv, tmp->ln, p->qkvw, N, C, 3 * Cl)));
    DT_CHECK(be->layernorm_backward(be, NULL, g->ln1w, g->ln1b, k->dln1, x, p->ln1w, a->ln1_mean, a->ln1_rstd, N, C));
    return DT_OK;
}

dt_status dt__block_backward(dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                             const dt__block_params *g, const dt__block_acts *a, const dt__block_scratch *s,
                             const float *x, float *dres, int B, int T, const dt__rounder *r)
{
    DT_CHECK(dt__block_backward_b(be, cfg, p, a, s, x, dres, &s->keep, B, T, r));
    return dt__block_backward_w(be, cfg, 1, p, g, a, x, &s->keep, B, T, r);
}

/* ---- the plain block as the runner's ops (runner.h) ---------------------- */

static dt_status dt__plain_forward(void *ctx, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                   dt__block_acts *a, const float *x, int B, int T, const dt__rounder *r)
{
    (void)ctx;
    return dt__block_forward(be, cfg, p, a, x, B, T, r);
}

static dt_status dt__plain_backward_b(void *ctx, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                      const dt__block_acts *a, const dt__block_scratch *s, float *xs, const float *x,
                                      float *dres, const dt__block_keep *k, int B, int T, const dt__rounder *r)
{
    (void)ctx, (void)xs;
    return dt__block_backward_b(be, cfg, p, a, s, x, dres, k, B, T, r);
}

/* dt__block_backward's hand-over: the scratch's own keep */
static dt__block_keep dt__plain_whole_keep(const dt_gpt_config *cfg, int t, int B, int T, const dt__block_scratch *s,
                                           float *xs)
{
    (void)cfg, (void)t, (void)B, (void)T, (void)xs;
    dt__block_keep k = s->keep;
    k.gelu = NULL;
    return k;
}

const dt__block_ops dt__block_ops_plain = {
    .scratch_floats = NULL, /* the block scratch is enough */
    .forward = dt__plain_forward,
    .backward_b = dt__plain_backward_b,
    .whole_keep = dt__plain_whole_keep,
};
