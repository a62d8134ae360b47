/* cp.h: context parallelism, the attention of a sequence split over c
 * ranks (lib/parallel/cp.c), never installed.
 *
 * Rank i of the context-parallel group holds chunks i and 2c-1-i of the
 * 2c equal chunks of every sequence (gpt_layers.h's dt__cpos), for the
 * whole block: every per-token op runs on its B*T/c rows as they are.
 * Attention needs every earlier key and value; three ways to get them
 * (Megatron-LM's --cp-comm-type):
 *   p2p        ring attention (Liu et al. 2023, "Ring Attention with
 *              Blockwise Transformers"): the keys and values go around the
 *              ring in c steps, each rank computing its queries against
 *              the block it holds while the next one travels, the results
 *              merged by log-sum-exp; the backward sends the blocks round
 *              again with their gradients, which arrive home at the end;
 *   allgather  the keys and values all-gathered at once (Llama 3's
 *              variant), their gradients reduce-scattered back;
 *   a2a        DeepSpeed-Ulysses (Jacobs et al. 2023): an all-to-all turns
 *              the sequence split into a head split (rank i: heads
 *              i*NH/c.. of every position), attention runs whole, a second
 *              all-to-all turns it back; needs c | heads.
 * Each is the same attention as one process's, up to FP32 summation order
 * (tests/check_ops.c checks the chunk ops, tests/cp.sh whole runs).
 * The data-parallel gradient reduction runs over the c x d ranks (the
 * grid's DT_GRID_ZERO group), as Megatron's does. */
#ifndef DT_CP_H
#define DT_CP_H

#include <stddef.h>
#include <stdint.h>

#include "dt_backend.h"
#include "dt_comm.h"
#include "dt_train.h"
#include "gpt_layers.h"

typedef struct dt__cp dt__cp;

/* kinds of the trace's events (dt__cp's event hook) */
enum {
    DT__CP_RING = 0,      /* p2p: one step's send and receive of a key/value block (and, backward, its gradient) */
    DT__CP_GATHER = 1,    /* allgather: the keys' and values' all-gather */
    DT__CP_SCATTER = 2,   /* allgather: their gradients' reduce-scatter */
    DT__CP_ALLTOALL = 3,  /* a2a: one all-to-all */
    DT__CP_NKINDS = 4
};

/* The exchange for a context-parallel group comm (c = its size) on be, for
 * micro-batches of up to B sequences of T positions (the whole sequence's;
 * T/c a rank's), attention width C and NH heads on this rank (a tensor
 * shard's: C/t, NH/t). Refused with one line where the backend has no
 * chunk attention (dt_backend.h), where 2c does not divide T, or, a2a,
 * where c does not divide NH. */
dt_status dt__cp_create(dt_comm *comm, dt_cp_comm type, dt_backend *be, int B, int T, int C, int NH, dt__cp **out);
void dt__cp_free(dt__cp *cp);
/* The blocks' attention hook (gpt_layers.h's dt__attn), ctx this. */
const dt__attn *dt__cp_attn(dt__cp *cp);
/* The rank's rows (gpt_layers.h's dt__cpos). */
dt__cpos dt__cp_pos(const dt__cp *cp);
/* optional (traces): each exchange, kind DT__CP_*, pass 'F' or 'B', the
 * ring step (or -1), the rank whose block arrives (or -1), the bytes
 * this rank sent, its start and end from dt_time_ns() */
void dt__cp_set_event(dt__cp *cp,
                      void (*event)(void *ctx, int kind, char pass, int step, int from, size_t bytes, int64_t t0,
                                    int64_t t1),
                      void *ctx);
/* exchanges made so far (all kinds) and bytes sent */
long long dt__cp_exchanges(const dt__cp *cp);
long long dt__cp_bytes_sent(const dt__cp *cp);
/* Workspace bytes of the exchange (its buffers, not counted as activations). */
size_t dt__cp_workspace_bytes(const dt__cp *cp);

#endif
