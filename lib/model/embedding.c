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
 * rank keeping its rows; the backward's caller all-gathers the gradient.
 * Context-parallel (dt__cpos): each part of the rank's rows is its own
 * chunk of the sequence, with that chunk's positions. */
#include <string.h>

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

void dt__cpos_gather(dt__cpos cp, const int32_t *whole, int32_t *local, int B, int T)
{
    const int parts = dt__cpos_parts(cp), Tc = T / (2 * cp.c);
    if (parts == 1) {
        memcpy(local, whole, (size_t)B * T * sizeof *local);
        return;
    }
    for (int p = 0; p < parts; p++)
        for (int b = 0; b < B; b++)
            memcpy(local + ((size_t)p * B + b) * Tc, whole + (size_t)b * T + (size_t)dt__cpos_chunk(cp, p) * Tc,
                   (size_t)Tc * sizeof *local);
}

/* The encoder over each part of the rank's rows (T of them a sequence),
 * with its chunk's positions (wpe NULL: none). */
static dt_status dt__embed_parts(dt_backend *be, const dt_gpt_config *cfg, float *out, const int32_t *tokens,
                                 const float *wte, const float *wpe, int B, int T, dt__cpos cp)
{
    const int parts = dt__cpos_parts(cp), Tp = T / parts, C = cfg->hidden_size;
    for (int p = 0; p < parts; p++) {
        const size_t r0 = (size_t)p * B * Tp;
        const float *pos = wpe ? wpe + (size_t)dt__cpos_chunk(cp, p) * Tp * C : NULL;
        DT_CHECK(be->encoder_forward(be, out + r0 * C, tokens + r0, wte, pos, B, Tp, C));
    }
    return DT_OK;
}

dt_status dt__embed_forward(dt_backend *be, const dt_gpt_config *cfg, const float *wte, const float *wpe,
                            const int32_t *tokens, dt__arena *a, float **out, int B, int T, const dt__rounder *r,
                            const dt__vocab *vp, dt__cpos cp)
{
    const size_t n = (size_t)B * T * cfg->hidden_size;
    if (vp && vp->sp) { /* every row's partial sums in the workspace, reduce-scattered: the rank's rows */
        const size_t nl = n / (size_t)vp->t;
        DT_CHECK(dt__arena_alloc(a, nl, out));
        DT_CHECK(dt__embed_parts(be, cfg, vp->part, tokens, wte, vp->rank ? NULL : wpe, B, T, cp));
        DT_CHECK(vp->scatter(vp->ctx, 'F', vp->part, n));
        DT_CHECK(be->copy(be, *out, vp->part + (size_t)vp->rank * nl, nl * sizeof(float), DT_COPY_D2D));
        return dt__round(be, r, *out, nl);
    }
    DT_CHECK(dt__arena_alloc(a, n, out));
    DT_CHECK(dt__embed_parts(be, cfg, *out, tokens, wte, vp && vp->rank ? NULL : wpe, B, T, cp));
    if (vp) DT_CHECK(vp->sum(vp->ctx, DT__VOCAB_EMBED, *out, n));
    return dt__round(be, r, *out, n);
}

dt_status dt__embed_backward(dt_backend *be, const dt_gpt_config *cfg, float *dwte, float *dwpe, const int32_t *tokens,
                             const float *dout, int B, int T, dt__cpos cp)
{
    const int parts = dt__cpos_parts(cp), Tp = T / parts, C = cfg->hidden_size;
    for (int p = 0; p < parts; p++) {
        const size_t r0 = (size_t)p * B * Tp;
        DT_CHECK(be->encoder_backward(be, dwte, dwpe + (size_t)dt__cpos_chunk(cp, p) * Tp * C, dout + r0 * C,
                                      tokens + r0, B, Tp, C));
    }
    return DT_OK;
}
