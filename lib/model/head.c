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
 * GEMMs and the non-finite search (lib/train/nonfinite.c) never read them. */
#include <limits.h>
#include <stdlib.h>

#include "gpt_layers.h"

static size_t dt__pad16(size_t n) { return (n + 15) & ~(size_t)15; }

int dt__head_ld(const dt_backend *be, int V)
{
    const long long a = be->row_align > 1 ? be->row_align : 1, ld = ((long long)V + a - 1) / a * a;
    return ld > INT_MAX ? V : (int)ld;
}

size_t dt__head_act_floats(const dt_backend *be, const dt_gpt_config *cfg, int B, int T)
{
    size_t BT = (size_t)B * T;
    return dt__pad16(BT * cfg->hidden_size) + 2 * dt__pad16(BT) + dt__pad16(BT * dt__head_ld(be, cfg->vocab_size));
}

dt_status dt__head_forward(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p, dt__arena *a,
                           dt__head_acts *acts, const float *x, const int32_t *targets, float *losses, uint8_t *correct,
                           int B, int T, const dt__rounder *r)
{
    const int C = cfg->hidden_size, V = cfg->vocab_size, N = B * T, ld = dt__head_ld(be, V);
    acts->ld = ld;
    DT_CHECK(dt__arena_alloc(a, (size_t)N * C, &acts->lnf));
    DT_CHECK(dt__arena_alloc(a, (size_t)N, &acts->lnf_mean));
    DT_CHECK(dt__arena_alloc(a, (size_t)N, &acts->lnf_rstd));
    DT_CHECK(dt__arena_alloc(a, (size_t)N * ld, &acts->logits));
    DT_CHECK(be->layernorm_forward(be, acts->lnf, acts->lnf_mean, acts->lnf_rstd, x, p->lnfw, p->lnfb, N, C));
    int sh; /* a 16-bit copy for the one GEMM that reads a rounded input (gpt_layers.h) */
    DT_CHECK(dt__round_shadow(be, r, acts->lnf, (size_t)N * C, &sh));
    /* logits(N,V) = lnf @ lmw^T: matmul_forward without bias, with the row stride */
    DT_CHECK(dt__shadow_end(be, acts->lnf, sh,
                            be->gemm(be, 0, 1, N, V, C, 1.0f, acts->lnf, C, p->lmw, C, 0.0f, acts->logits, ld)));
    DT_CHECK(dt__round(be, r, acts->logits, (size_t)N * ld)); /* the loss then reduces in FP32 */
    if (targets)
        DT_CHECK(be->crossentropy_forward_backward(be, losses, correct, NULL, acts->logits, targets, N, V, ld, 0.0f));
    return DT_OK;
}

dt_status dt__head_backward_b(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p, dt__head_acts *acts,
                              const float *x, const int32_t *targets, float *losses, float dloss, float *dx,
                              float *dlnf, int B, int T, const dt__rounder *r)
{
    const int C = cfg->hidden_size, V = cfg->vocab_size, N = B * T, ld = acts->ld;
    DT_CHECK(be->crossentropy_forward_backward(be, losses, NULL, acts->logits, acts->logits, targets, N, V, ld, dloss));
    int sh;
    DT_CHECK(dt__round_shadow(be, r, acts->logits, (size_t)N * ld, &sh));
    /* matmul_backward's input gradient, with the row stride: dlnf = dlogits @ lmw */
    DT_CHECK(dt__shadow_end(be, acts->logits, sh,
                            be->gemm(be, 0, 0, N, C, V, 1.0f, acts->logits, ld, p->lmw, C, 0.0f, dlnf, C)));
    DT_CHECK(dt__round(be, r, dlnf, (size_t)N * C));
    DT_CHECK(be->memset_zero(be, dx, (size_t)N * C * sizeof(float)));
    DT_CHECK(be->layernorm_backward(be, dx, NULL, NULL, dlnf, x, p->lnfw, acts->lnf_mean, acts->lnf_rstd, N, C));
    DT_CHECK(dt__round(be, r, dx, (size_t)N * C));
    return DT_OK;
}

dt_status dt__head_backward_w(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p,
                              const dt__head_params *g, const dt__head_acts *acts, const float *x, const float *dlnf,
                              int B, int T)
{
    const int C = cfg->hidden_size, V = cfg->vocab_size, N = B * T, ld = acts->ld;
    /* matmul_backward's weight gradient, with the row stride: dlmw += dlogits^T @ lnf */
    DT_CHECK(be->gemm(be, 1, 0, V, C, N, 1.0f, acts->logits, ld, acts->lnf, C, 1.0f, g->lmw, C));
    return be->layernorm_backward(be, NULL, g->lnfw, g->lnfb, dlnf, x, p->lnfw, acts->lnf_mean, acts->lnf_rstd, N, C);
}

dt_status dt__head_backward(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p,
                            const dt__head_params *g, dt__head_acts *acts, const float *x, const int32_t *targets,
                            float *losses, float dloss, float *dx, float *dtmp, int B, int T, const dt__rounder *r)
{
    DT_CHECK(dt__head_backward_b(be, cfg, p, acts, x, targets, losses, dloss, dx, dtmp, B, T, r));
    return dt__head_backward_w(be, cfg, p, g, acts, x, dtmp, B, T);
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
