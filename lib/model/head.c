/* head.c: the head module: final LayerNorm, LM head (V, C) without bias,
 * fused softmax cross-entropy.
 *
 * Saved: the LayerNorm output and statistics and the logits. Backward turns
 * the logits buffer into dlogits in place (recomputing the softmax, which
 * costs one pass over (B*T, V) and saves a second (B,T,V) buffer), so after
 * a backward the head's activations are spent. */
#include <stdlib.h>

#include "gpt_layers.h"

static size_t dt__pad16(size_t n) { return (n + 15) & ~(size_t)15; }

size_t dt__head_act_floats(const dt_gpt_config *cfg, int B, int T)
{
    size_t BT = (size_t)B * T;
    return dt__pad16(BT * cfg->hidden_size) + 2 * dt__pad16(BT) + dt__pad16(BT * cfg->vocab_size);
}

dt_status dt__head_forward(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p, dt__arena *a,
                           dt__head_acts *acts, const float *x, const int32_t *targets, float *losses, uint8_t *correct,
                           int B, int T, const dt__rounder *r)
{
    const int C = cfg->hidden_size, V = cfg->vocab_size, N = B * T;
    DT_CHECK(dt__arena_alloc(a, (size_t)N * C, &acts->lnf));
    DT_CHECK(dt__arena_alloc(a, (size_t)N, &acts->lnf_mean));
    DT_CHECK(dt__arena_alloc(a, (size_t)N, &acts->lnf_rstd));
    DT_CHECK(dt__arena_alloc(a, (size_t)N * V, &acts->logits));
    DT_CHECK(be->layernorm_forward(be, acts->lnf, acts->lnf_mean, acts->lnf_rstd, x, p->lnfw, p->lnfb, N, C));
    DT_CHECK(dt__round(be, r, acts->lnf, (size_t)N * C));
    DT_CHECK(be->matmul_forward(be, acts->logits, acts->lnf, p->lmw, NULL, N, C, V));
    DT_CHECK(dt__round(be, r, acts->logits, (size_t)N * V)); /* the loss then reduces in FP32 */
    if (targets)
        DT_CHECK(be->crossentropy_forward_backward(be, losses, correct, NULL, acts->logits, targets, N, V, 0.0f));
    return DT_OK;
}

dt_status dt__head_backward(dt_backend *be, const dt_gpt_config *cfg, const dt__head_params *p,
                            const dt__head_params *g, dt__head_acts *acts, const float *x, const int32_t *targets,
                            float *losses, float dloss, float *dx, float *dtmp, int B, int T, const dt__rounder *r)
{
    const int C = cfg->hidden_size, V = cfg->vocab_size, N = B * T;
    DT_CHECK(be->crossentropy_forward_backward(be, losses, NULL, acts->logits, acts->logits, targets, N, V, dloss));
    DT_CHECK(dt__round(be, r, acts->logits, (size_t)N * V));
    DT_CHECK(be->matmul_backward(be, dtmp, g->lmw, NULL, acts->logits, acts->lnf, p->lmw, N, C, V));
    DT_CHECK(dt__round(be, r, dtmp, (size_t)N * C));
    DT_CHECK(be->memset_zero(be, dx, (size_t)N * C * sizeof(float)));
    DT_CHECK(be->layernorm_backward(be, dx, g->lnfw, g->lnfb, dtmp, x, p->lnfw, acts->lnf_mean, acts->lnf_rstd, N, C));
    DT_CHECK(dt__round(be, r, dx, (size_t)N * C));
    return DT_OK;
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
