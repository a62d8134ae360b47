/* sp.h: Megatron sequence parallelism for a tensor-parallel block
 * (lib/parallel/sp.c), never installed.
 *
 * The shard of tp.h (its weights, its layout, its GEMM widths) with the
 * per-token regions split along the tokens over the same t ranks:
 * rank r holds rows r*N/t .. (r+1)*N/t - 1 of the micro-batch's N = B*T
 * of the block's input and output, res2 and the LayerNorm statistics
 * (gpt_layers.h's dt__shard {t, 1}); the collectives are reduce-scatters
 * and all-gathers in place of tp.c's allreduces (sp.c's top comment).
 * Needs t | N and the vocabulary split (the embedding reduce-scatters its
 * output, the head all-gathers its LayerNorm output). */
#ifndef DT_SP_H
#define DT_SP_H

#include "tp.h"

size_t dt__sp_scratch_floats(const dt_gpt_config *cfg, int t, int B, int T);
/* x, a->res2, a->out: the rank's rows (B*T/t, C); a->qkv, atty, fch,
 * lse: every row, the rank's heads and columns (tp.h's). */
dt_status dt__sp_block_forward(dt__tp *tp, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                               dt__block_acts *a, const float *x, int B, int T, const dt__rounder *r);
/* B: dres (the rank's rows) in, the output's gradient, out, the input's;
 * what W needs in k (dt__block_keep_alloc with {t, 1}: dout and dres2
 * every row, dln2 and dln1 the rank's); scratch: dt__sp_scratch_floats. */
dt_status dt__sp_block_backward_b(dt__tp *tp, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                  const dt__block_acts *a, float *scratch, const float *x, float *dres,
                                  const dt__block_keep *k, int B, int T, const dt__rounder *r);
/* W: the shard's parameter gradients (+= into g); the LayerNorms' summed
 * over the group (tp->ln_grad: 2C floats of backend memory). */
dt_status dt__sp_block_backward_w(dt__tp *tp, dt_backend *be, const dt_gpt_config *cfg, const dt__block_params *p,
                                  const dt__block_params *g, const dt__block_acts *a, const float *x,
                                  const dt__block_keep *k, int B, int T, const dt__rounder *r);

/* The sequence-parallel shard as the layer runner's block ops (ctx: the dt__tp). */
extern const dt__block_ops dt__sp_block_ops;

#endif
