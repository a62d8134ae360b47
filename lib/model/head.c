/* head.c: the head module: final LayerNorm, LM head (V, C) without bias,
 * fused softmax cross-entropy.
 *
 * Saved: the LayerNorm output and statistics and the logits. Backward turns
 * the logits buffer into dlogits in place (recomputing the softmax, which
 * costs one pass over (B*T, V) and saves a second (B,T,V) buffer), so after
 * a backward the head's activations are spent. A backward is B (the input
 * gradient; the logits become their gradient) then W (the LM head's and
 * final LayerNorm's parameter gradients from them), gpt_layers.h's split.
 *
 * The logits' rows are ld = dt__head_ld(be, V) floats apart: V rounded up
 * to the backend's row_align (1 on the CPU, so ld = V there; 64 on CUDA),
 * so that the LM head's GEMMs get aligned rows. Hence plain gemm calls
 * with that leading dimension instead of matmul_forward/backward (which
 * make exactly these calls, without bias, when ld = V). No op computes the
 * padding columns: the rounding pass over the whole buffer rewrites
 * whatever the arena held there (a cast, harmless), and cross-entropy, the
 * GEMMs and the non-finite search (lib/train/nonfinite.c) never read them.
 *
 * Vocabulary-parallel (gpt_layers.h's dt__vocab): the rank's logits are
 * its nv columns; the loss is merged from every rank's per-row statistics
 * (dt__head_vocab_merge) and the head input's gradient summed over the
 * group after the LM head's input-gradient GEMM, before its rounding.
 * With sequence parallelism (dt__vocab's sp) the input holds the rank's
 * rows: their LayerNorm output is all-gathered before the LM head (the
 * saved lnf has every row), the input gradient reduce-scattered instead
 * of summed, and the LayerNorm's gain and bias gradients summed. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "gpt_layers.h"

static size_t dt__pad16(size_t n) { return (n + 15) & ~(size_t)15; }

int dt__head_ld(const dt_backend *be, int V)
{
    const long long a = be->row_align > 1 ? be->row_align : 1, ld = ((long long)V + a - 1) / a * a;
    return ld > INT_MAX ? V : (int)ld;
}

size_t dt__head_act_floats(const dt_backend *be, const dt_gpt_config *cfg, int B, int T, int vt)
{
    size_t BT = (size_t)B * T;
    return dt__pad16(BT * cfg->hidden_size) + 2 * dt__pad16(BT) + dt__pad16(BT * dt__head_ld(be, cfg->vocab_size)) +
           (vt > 1 ? dt__pad16(4 * BT * (size_t)vt) + dt__pad16(2 * BT) : 0);
}

/* The vocabulary-parallel loss: every rank's statistics (host, (t,N,4),
 * dt_backend.h's crossentropy_part) merged in rank order, the same on
 * every rank: the row's maximum M over the parts, sum = sum_r s_r *
 * exp(m_r - M), loss = M + log(sum) - z[target] (the fused op's formula),
 * argmax the first part's whose maximum is M (ties to the lowest index, as
 * the parts are in vocabulary order). losses, correct (N) and ms (N,2) on
 * the host. */
static void dt__head_vocab_merge(const dt__vocab *vp, const float *stats, const int32_t *targets, int N,
                                 float *losses, uint8_t *correct, float *ms)
{
    const size_t part = (size_t)N * 4;
    for (int i = 0; i < N; i++) {
        const int tgt = targets[i];
        if (tgt < 0) {
            losses[i] = 0.0f, correct[i] = 0, ms[2 * i] = 0.0f, ms[2 * i + 1] = 1.0f;
            continue;
        }
        float mx = stats[(size_t)i * 4], zt = 0.0f;
        int arg = (int)stats[(size_t)i * 4 + 3];
        for (int r = 1; r < vp->t; r++) {
            const float m = stats[r * part + (size_t)i * 4];
            if (m > mx) mx = m, arg = (int)stats[r * part + (size_t)i * 4 + 3];
        }
        float s = 0.0f;
        for (int r = 0; r < vp->t; r++) {
            const float *o = stats + r * part + (size_t)i * 4;
            int v0, nv;
            dt__vocab_rows(vp->V, vp->t, r, &v0, &nv);
            s += o[1] * expf(o[0] - mx);
            if (tgt >= v0 && tgt < v0 + nv) zt = o[2];
        }
        losses[i] = mx + logf(s) - zt;
        correct[i] = (uint8_t)(arg == tgt);
        ms[2 * i] = mx, ms[2 * i + 1] = s;
    }
}

/* The vocabulary-parallel cross-entropy of the forward: the part's
 * statistics, gathered, merged on the host, the results copied back. */
static dt_status dt__head_vocab_loss(dt_backend *be, const dt__vocab *vp, dt__head_acts *acts,
                                     const int32_t *targets, float *losses, uint8_t *correct, int N)
{
    const size_t part = (size_t)N * 4;
    DT_CHECK(be->crossentropy_part(be, acts->stats + vp->rank * part, NULL, NULL, acts->logits, targets, N, vp->nv,
                                   acts->ld, vp->v0, 0.0f));
    DT_CHECK(vp->gather(vp->ctx, acts->stats, part));
    float *hs = malloc(part * vp->t * sizeof *hs), *hl = malloc((size_t)N * 3 * sizeof *hl);
    int32_t *ht = malloc((size_t)N * sizeof *ht);
    uint8_t *hc = malloc((size_t)N);
    dt_status st = DT_OK;
    if (!hs || !hl || !ht || !hc) st = DT_FAIL(DT_ERR_NOMEM, "vocabulary-parallel loss: out of memory for %d rows", N);
    if (st == DT_OK) st = be->copy(be, hs, acts->stats, part * vp->t * sizeof *hs, DT_COPY_D2H);
    if (st == DT_OK) st = be->copy(be, ht, targets, (size_t)N * sizeof *ht, DT_COPY_D2H);
    if (st == DT_OK) {
        dt__head_vocab_merge(vp, hs, ht, N, hl, hc, hl + N);
        st = be->copy(be, losses, hl, (size_t)N * sizeof *hl, DT_COPY_H2D);
    }
    if (st == DT_OK && correct) st = be->copy(be, correct, hc, (size_t)N, DT_COPY_H2D);
    if (st == DT_OK) st = be->copy(be, acts->ms, hl + N, (size_t)N * 2 * sizeof *hl, DT_COPY_H2D);
    free(hs), free(hl), free(ht), free(hc);
    return st;
}

dt_status dt__head_forward(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p, dt__arena *a,
                           dt__head_acts *acts, const float *x, const int32_t *targets, float *losses, uint8_t *correct,
                           int B, int T, const dt__rounder *r, const dt__vocab *vp)
{
    const int C = cfg->hidden_size, V = cfg->vocab_size, N = B * T, ld = dt__head_ld(be, V);
    acts->ld = ld;
    acts->stats = acts->ms = NULL;
    DT_CHECK(dt__arena_alloc(a, (size_t)N * C, &acts->lnf));
    DT_CHECK(dt__arena_alloc(a, (size_t)N, &acts->lnf_mean));
    DT_CHECK(dt__arena_alloc(a, (size_t)N, &acts->lnf_rstd));
    DT_CHECK(dt__arena_alloc(a, (size_t)N * ld, &acts->logits));
    if (vp) {
        DT_CHECK(dt__arena_alloc(a, (size_t)N * 4 * vp->t, &acts->stats));
        DT_CHECK(dt__arena_alloc(a, (size_t)N * 2, &acts->ms));
    }
    if (vp && vp->sp) { /* x holds the rank's rows: their LayerNorm, then every row's */
        const size_t n = (size_t)N / (size_t)vp->t;
        DT_CHECK(be->layernorm_forward(be, acts->lnf + (size_t)vp->rank * n * C, acts->lnf_mean, acts->lnf_rstd, x,
                                       p->lnfw, p->lnfb, (int)n, C));
        DT_CHECK(vp->allgather(vp->ctx, 'F', acts->lnf, (size_t)N * C));
    } else {
        DT_CHECK(be->layernorm_forward(be, acts->lnf, acts->lnf_mean, acts->lnf_rstd, x, p->lnfw, p->lnfb, N, C));
    }
    int sh; /* a 16-bit copy for the one GEMM that reads a rounded input (gpt_layers.h) */
    DT_CHECK(dt__round_shadow(be, r, acts->lnf, (size_t)N * C, &sh));
    /* logits(N,V) = lnf @ lmw^T: matmul_forward without bias, with the row stride */
    DT_CHECK(dt__shadow_end(be, acts->lnf, sh,
                            be->gemm(be, 0, 1, N, V, C, 1.0f, acts->lnf, C, p->lmw, C, 0.0f, acts->logits, ld)));
    DT_CHECK(dt__round(be, r, acts->logits, (size_t)N * ld)); /* the loss then reduces in FP32 */
    if (targets && vp) return dt__head_vocab_loss(be, vp, acts, targets, losses, correct, N);
    if (targets)
        DT_CHECK(be->crossentropy_forward_backward(be, losses, correct, NULL, acts->logits, targets, N, V, ld, 0.0f));
    return DT_OK;
}

dt_status dt__head_backward_b(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p, dt__head_acts *acts,
                              const float *x, const int32_t *targets, float *losses, float dloss, float *dx,
                              float *dlnf, int B, int T, const dt__rounder *r, const dt__vocab *vp)
{
    const int C = cfg->hidden_size, V = cfg->vocab_size, N = B * T, ld = acts->ld;
    if (vp) /* the losses stay the forward's */
        DT_CHECK(be->crossentropy_part(be, NULL, acts->logits, acts->ms, acts->logits, targets, N, V, ld, vp->v0, dloss));
    else
        DT_CHECK(
            be->crossentropy_forward_backward(be, losses, NULL, acts->logits, acts->logits, targets, N, V, ld, dloss));
    int sh;
    DT_CHECK(dt__round_shadow(be, r, acts->logits, (size_t)N * ld, &sh));
    /* matmul_backward's input gradient, with the row stride: dlnf = dlogits @ lmw
     * (sequence-parallel: every row's partial sums into the workspace) */
    float *dfull = vp && vp->sp ? vp->part : dlnf;
    DT_CHECK(dt__shadow_end(be, acts->logits, sh,
                            be->gemm(be, 0, 0, N, C, V, 1.0f, acts->logits, ld, p->lmw, C, 0.0f, dfull, C)));
    if (vp && vp->sp) { /* the partial sums reduce-scattered: the rank's rows from here on */
        const size_t n = (size_t)N / (size_t)vp->t;
        DT_CHECK(vp->scatter(vp->ctx, 'B', vp->part, (size_t)N * C));
        DT_CHECK(be->copy(be, dlnf, vp->part + (size_t)vp->rank * n * C, n * C * sizeof(float), DT_COPY_D2D));
        DT_CHECK(dt__round(be, r, dlnf, n * C));
        DT_CHECK(be->memset_zero(be, dx, n * C * sizeof(float)));
        DT_CHECK(be->layernorm_backward(be, dx, NULL, NULL, dlnf, x, p->lnfw, acts->lnf_mean, acts->lnf_rstd, (int)n, C));
        return dt__round(be, r, dx, n * C);
    }
    if (vp) DT_CHECK(vp->sum(vp->ctx, DT__VOCAB_HEAD, dlnf, (size_t)N * C)); /* the parts' partial sums */
    DT_CHECK(dt__round(be, r, dlnf, (size_t)N * C));
    DT_CHECK(be->memset_zero(be, dx, (size_t)N * C * sizeof(float)));
    DT_CHECK(be->layernorm_backward(be, dx, NULL, NULL, dlnf, x, p->lnfw, acts->lnf_mean, acts->lnf_rstd, N, C));
    DT_CHECK(dt__round(be, r, dx, (size_t)N * C));
    return DT_OK;
}

dt_status dt__head_backward_w(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p,
                              const dt__head_params *g, const dt__head_acts *acts, const float *x, const float *dlnf,
                              int B, int T, const dt__vocab *vp)
{
    const int C = cfg->hidden_size, V = cfg->vocab_size, N = B * T, ld = acts->ld;
    /* matmul_backward's weight gradient, with the row stride: dlmw += dlogits^T @ lnf */
    DT_CHECK(be->gemm(be, 1, 0, V, C, N, 1.0f, acts->logits, ld, acts->lnf, C, 1.0f, g->lmw, C));
    if (vp && vp->sp) { /* the rank's rows' part of the gain and bias gradients, then their sum */
        float *part = NULL;
        DT_CHECK(vp->ln(vp->ctx, be, &part, NULL, NULL, (size_t)C));
        DT_CHECK(be->layernorm_backward(be, NULL, part, part + C, dlnf, x, p->lnfw, acts->lnf_mean, acts->lnf_rstd,
                                        N / vp->t, C));
        return vp->ln(vp->ctx, be, NULL, g->lnfw, g->lnfb, (size_t)C);
    }
    return be->layernorm_backward(be, NULL, g->lnfw, g->lnfb, dlnf, x, p->lnfw, acts->lnf_mean, acts->lnf_rstd, N, C);
}

dt_status dt__head_backward(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p,
                            const dt__head_params *g, dt__head_acts *acts, const float *x, const int32_t *targets,
                            float *losses, float dloss, float *dx, float *dtmp, int B, int T, const dt__rounder *r,
                            const dt__vocab *vp)
{
    DT_CHECK(dt__head_backward_b(be, cfg, p, acts, x, targets, losses, dloss, dx, dtmp, B, T, r, vp));
    return dt__head_backward_w(be, cfg, p, g, acts, x, dtmp, B, T, vp);
}

dt_status dt__head_mean_loss(dt_backend *be, const float *losses, int N, int n_counted, float *mean)
{
    float *hl = malloc((size_t)N * sizeof *hl);
    if (!hl) return DT_FAIL(DT_ERR_NOMEM, "forward: out of memory for %d losses", N);
    dt_status st = be->copy(be, hl, losses, (size_t)N * sizeof(float), DT_COPY_D2H);
    double s = 0.0;
    for (int i = 0; i < N; i++) s += hl[i];
    free(hl);
    DT_CHECK(st);
    *mean = n_counted ? (float)(s / n_counted) : 0.0f;
    return DT_OK;
}
