/* cuda_plan.h: host-testable decisions of the CUDA kernels (never
 * installed): launch shapes chosen from sizes and the device's SM count,
 * and the cross-entropy arg-max rule. Plain C with DT_HD functions, so
 * nvcc compiles them into the kernels and tests/check_cuda_math compiles
 * the same code with the C compiler and checks it on the CPU.
 *
 * Invariants: every choice here depends only on its arguments (sizes and
 * the SM count, never on timing), so a launch shape, and with it every
 * fixed-order sum, is the same run to run on one GPU. */
#ifndef DT_CUDA_PLAN_H
#define DT_CUDA_PLAN_H

#include "dt_math_hd.h"

/* Column sums of an (N, C) matrix (bias and LayerNorm weight gradients):
 * blocks of 32 columns × `chunks` row chunks of `rows` rows each (the last
 * one may be shorter, none is empty). One chunk when N is small; otherwise
 * enough chunks for about two blocks per SM, each chunk at least
 * DT__COLSUM_MIN_ROWS rows (4 per row lane of a 32-lane block), at most
 * DT__COLSUM_MAX_CHUNKS (the partials stay small). */
#define DT__COLSUM_MIN_ROWS 128
#define DT__COLSUM_MAX_CHUNKS 1024

typedef struct dt__colsum_plan {
    int chunks; /* row chunks (gridDim.y); 1: no second pass */
    int rows;   /* rows per chunk: chunk y covers [y * rows, min(N, (y + 1) * rows)) */
} dt__colsum_plan;

static inline dt__colsum_plan dt__colsum_plan_for(int N, int C, int sms)
{
    dt__colsum_plan p = {1, N > 0 ? N : 0};
    if (N <= 0 || C <= 0) return p;
    const long long col_blocks = ((long long)C + 31) / 32;
    const long long want_blocks = 2LL * (sms > 0 ? sms : 1);
    long long chunks = (want_blocks + col_blocks - 1) / col_blocks;
    const long long most = (long long)N / DT__COLSUM_MIN_ROWS; /* so that rows >= DT__COLSUM_MIN_ROWS */
    if (chunks > most) chunks = most;
    if (chunks > DT__COLSUM_MAX_CHUNKS) chunks = DT__COLSUM_MAX_CHUNKS;
    if (chunks < 1) chunks = 1;
    const long long rows = ((long long)N + chunks - 1) / chunks;
    p.rows = (int)rows;
    p.chunks = (int)(((long long)N + rows - 1) / rows); /* no empty last chunk */
    return p;
}

/* Cross-entropy's arg-max, the rule of the CPU backend's scan
 * (lib/backend/cpu/cpu_layers.c: mx = z[0], then `z[v] > mx` for v >= 1):
 * the largest value, the lowest index among equals; a NaN never wins
 * except at index 0, where it wins over everything (the CPU's mx is NaN
 * then and no `>` succeeds). A candidate is (value, index); index < 0 is
 * "none yet". Returns 1 if a should replace b. The rule is a total order
 * on the candidates a row offers, so any reduction tree over them finds
 * the CPU's index. */
static inline DT_HD int dt__argmax_better(float av, int ai, float bv, int bi)
{
    if (ai < 0) return 0;
    if (bi < 0) return 1;
    const int anan = av != av, bnan = bv != bv;
    if (anan || bnan) {
        if (anan && ai == 0) return 1; /* z[0] = NaN wins */
        if (bnan && bi == 0) return 0;
        if (anan != bnan) return bnan; /* a NaN elsewhere never wins */
        return ai < bi;                /* two such NaNs: unreachable for offered candidates */
    }
    return av > bv || (av == bv && ai < bi);
}

/* Whether element v of a row is offered to the arg-max at all: NaNs past
 * index 0 are not (they can never win). */
static inline DT_HD int dt__argmax_offered(float v_val, int v) { return v == 0 || v_val == v_val; }

#endif
