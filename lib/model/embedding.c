/* embedding.c: the embedding module, out(B,T,C) = wte[tokens] + wpe[t].
 * It saves only its output (the first block's input); its backward
 * scatters the incoming gradient into the two tables (+=). */
#include "gpt_layers.h"

size_t dt__embed_act_floats(const dt_gpt_config *cfg, int B, int T)
{
    return ((size_t)B * T * cfg->hidden_size + 15) & ~(size_t)15;
}

dt_status dt__embed_forward(dt_backend *be, const dt_gpt_config *cfg, const float *wte, const float *wpe,
                            const int32_t *tokens, dt__arena *a, float **out, int B, int T, const dt__rounder *r)
{
    DT_CHECK(dt__arena_alloc(a, (size_t)B * T * cfg->hidden_size, out));
    DT_CHECK(be->encoder_forward(be, *out, tokens, wte, wpe, B, T, cfg->hidden_size));
    return dt__round(be, r, *out, (size_t)B * T * cfg->hidden_size);
}

dt_status dt__embed_backward(dt_backend *be, const dt_gpt_config *cfg, float *dwte, float *dwpe, const int32_t *tokens,
                             const float *dout, int B, int T)
{
    return be->encoder_backward(be, dwte, dwpe, dout, tokens, B, T, cfg->hidden_size);
}
