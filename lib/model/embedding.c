/* embedding.c: the embedding module, out(B,T,C) = wte[tokens] + wpe[t],
 * and the vocabulary split's rows (gpt_layers.h's dt__vocab).
 * It saves only its output (the first block's input); its backward
 * scatters the incoming gradient into the two tables (+=).
 *
 * Vocabulary-parallel: each rank looks up the rows it holds (the others'
 * tokens masked: a zero row), rank 0 adds the positions, and the outputs
 * are summed over the group. Exactly one rank contributes a nonzero row
 * of wte and one the positions, so the sum is wte[token] + wpe[t] rounded
 * once, bit for bit the whole table's. The backward needs no communication:
 * the output's gradient is the same on every rank (the blocks' f operator
 * summed it), each rank adds it into its rows and into wpe (replicated).
 * Sequence-parallel (dt__vocab's sp): the output is reduce-scattered, each
 * rank keeping its rows; the backward's caller all-gathers the gradient. */
#include "gpt_layers.h"

size_t dt__embed_act_floats(const dt_gpt_config *cfg, int B, int T)
{
    return ((size_t)B * T * cfg->hidden_size + 15) & ~(size_t)15;
}

void dt__vocab_rows(int V, int t, int r, int *v0, int *nv)
{
    *v0 = (int)((long long)V * r / t);
    *nv = (int)((long long)V * (r + 1) / t) - *v0;
}

void dt__vocab_mask(const dt__vocab *vp, const int32_t *tokens, int32_t *local, size_t n)
{
    for (size_t i = 0; i < n; i++)
        local[i] = tokens[i] >= vp->v0 && tokens[i] - vp->v0 < vp->nv ? tokens[i] - vp->v0 : DT_TOKEN_MASKED;
}

dt_status dt__embed_forward(dt_backend *be, const dt_gpt_config *cfg, const float *wte, const float *wpe,
                            const int32_t *tokens, dt__arena *a, float **out, int B, int T, const dt__rounder *r,
                            const dt__vocab *vp)
{
    const size_t n = (size_t)B * T * cfg->hidden_size;
    if (vp && vp->sp) { /* every row's partial sums in the workspace, reduce-scattered: the rank's rows */
        const size_t nl = n / (size_t)vp->t;
        DT_CHECK(dt__arena_alloc(a, nl, out));
        DT_CHECK(be->encoder_forward(be, vp->part, tokens, wte, vp->rank ? NULL : wpe, B, T, cfg->hidden_size));
        DT_CHECK(vp->scatter(vp->ctx, vp->part, n));
        DT_CHECK(be->copy(be, *out, vp->part + (size_t)vp->rank * nl, nl * sizeof(float), DT_COPY_D2D));
        return dt__round(be, r, *out, nl);
    }
    DT_CHECK(dt__arena_alloc(a, n, out));
    DT_CHECK(be->encoder_forward(be, *out, tokens, wte, vp && vp->rank ? NULL : wpe, B, T, cfg->hidden_size));
    if (vp) DT_CHECK(vp->sum(vp->ctx, DT__VOCAB_EMBED, *out, n));
    return dt__round(be, r, *out, n);
}

dt_status dt__embed_backward(dt_backend *be, const dt_gpt_config *cfg, float *dwte, float *dwpe, const int32_t *tokens,
                             const float *dout, int B, int T)
{
    return be->encoder_backward(be, dwte, dwpe, dout, tokens, B, T, cfg->hidden_size);
}
