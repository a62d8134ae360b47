/* crossentropy.cu: fused softmax cross-entropy on the GPU (semantics in
 * dt_backend.h, algorithm of cpu_layers.c).
 *
 * Shapes: logits, dlogits (N, V), rows ld floats apart; targets, losses,
 * correct (N).
 * First a check kernel finds the lowest row whose target is >= V (an
 * unsigned atomicMin in a device int of the backend); the main kernel's
 * first thread copies it, with its target and V, into the backend's
 * pending-error record (mapped host memory) unless an earlier call's error
 * is still unreported. Nothing is read back here: the next op that waits
 * for the stream (synchronize, a host copy, sumsq, unscale_check) returns
 * DT_ERR_INVALID with the CPU backend's message (dt__cuda_pending_error).
 * A bad row gets loss NaN, correct 0 and a zero gradient row; the others
 * are computed as usual. Then one block per row:
 *   1. max and argmax by the CPU's rule (its strict `>` scan from z[0]:
 *      ties to the lowest index; a NaN wins only at index 0, elsewhere it
 *      is skipped; dt__argmax_better in cuda_plan.h, checked on the host);
 *   2. s = sum exp(z - max) in FP32, exp from dt_math_hd.h;
 *   3. loss = max + logf(s) - z[target], correct = (argmax == target);
 *   4. dlogits = dloss * exp(z - max) / s, then dlogits[target] -= dloss.
 * dlogits may alias logits: z[target] is read in step 3, and a barrier
 * separates every read of z from the first write. A row with target < 0
 * gets loss 0, correct 0 and a zero gradient row. Block reductions: each
 * thread reduces its strided elements, warps by xor butterflies, then warp
 * results in warp order (fixed; no atomics on floats). */
#include "cuda_internal.h"

#define DT__CE_THREADS 256
#define DT__CE_WARPS (DT__CE_THREADS / 32)

/* *bad = the lowest row whose target is >= V (*bad starts at UINT_MAX). */
__global__ void dt__k_ce_check(unsigned *bad, const int32_t *targets, int N, int V)
{
    DT__CUDA_FOR(i, (size_t)N)
    if (targets[i] >= V) atomicMin(bad, (unsigned)i);
}

/* A block's pass over one row z(V), every thread of the block calling it:
 * 1. the max and its index by dt__argmax_better (cuda_plan.h): the CPU's
 *    rule, NaNs included; a total order on the offered candidates, so the
 *    butterflies and the warp-order pass all find the same one;
 * 2. s = sum exp(z - max) in FP32, exp from dt_math_hd.h.
 * Results in *s_max, *s_arg, *s_sum (shared), read after its final
 * barrier; s_val, s_idx: DT__CE_WARPS shared slots. */
static __device__ void dt__ce_row(const float *z, int V, float *s_val, int *s_idx, float *s_max, int *s_arg,
                                  float *s_sum)
{
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    float mx = -INFINITY;
    int arg = -1;
    for (int v = tid; v < V; v += DT__CE_THREADS) {
        const float x = z[v];
        if (dt__argmax_offered(x, v) && dt__argmax_better(x, v, mx, arg)) {
            mx = x;
            arg = v;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, mx, o);
        int oa = __shfl_xor_sync(0xffffffffu, arg, o);
        if (dt__argmax_better(om, oa, mx, arg)) {
            mx = om;
            arg = oa;
        }
    }
    if (lane == 0) {
        s_val[warp] = mx;
        s_idx[warp] = arg;
    }
    __syncthreads();
    if (tid == 0) {
        float m = s_val[0];
        int a = s_idx[0];
        for (int w = 1; w < DT__CE_WARPS; w++)
            if (dt__argmax_better(s_val[w], s_idx[w], m, a)) {
                m = s_val[w];
                a = s_idx[w];
            }
        *s_max = m;
        *s_arg = a;
    }
    __syncthreads();
    mx = *s_max;
    float s = 0.0f;
    for (int v = tid; v < V; v += DT__CE_THREADS) s += dt__expf(z[v] - mx);
    s = dt__warp_sum(s);
    if (lane == 0) s_val[warp] = s;
    __syncthreads();
    if (tid == 0) {
        float t = 0.0f;
        for (int w = 0; w < DT__CE_WARPS; w++) t += s_val[w];
        *s_sum = t;
    }
    __syncthreads();
}

__global__ void dt__k_crossentropy(float *losses, uint8_t *correct, float *dlogits, const float *logits,
                                   const int32_t *targets, int N, int V, int ld, float dloss, const unsigned *bad,
                                   dt__cuda_pending *pending)
{
    __shared__ float s_val[DT__CE_WARPS];
    __shared__ int s_idx[DT__CE_WARPS];
    __shared__ float s_max, s_sum;
    __shared__ int s_arg;
    const int row = blockIdx.x, tid = threadIdx.x;
    const float *z = logits + (size_t)row * ld;
    float *d = dlogits ? dlogits + (size_t)row * ld : NULL;
    const int tgt = targets[row];
    if (row == 0 && tid == 0) {
        /* the check kernel has finished (stream order): record the call's
         * lowest bad row unless an earlier call's is still unreported */
        const unsigned b = *bad;
        if (b < (unsigned)N && pending->row < 0) {
            pending->kind = DT__CUDA_PENDING_TARGET;
            pending->target = targets[b];
            pending->vocab = V;
            __threadfence_system();
            pending->row = (int)b;
        }
    }
    if (tgt < 0 || tgt >= V) { /* ignored row; a bad one (reported later) gets a NaN loss */
        if (tid == 0) {
            losses[row] = tgt < 0 ? 0.0f : NAN;
            if (correct) correct[row] = 0;
        }
        if (d)
            for (int v = tid; v < V; v += DT__CE_THREADS) d[v] = 0.0f;
        return;
    }
    /* 1-2. max, its index and the sum of exponentials (dt__ce_row) */
    dt__ce_row(z, V, s_val, s_idx, &s_max, &s_arg, &s_sum);
    const float mx = s_max;
    if (tid == 0) { /* 3. loss, before any write to an aliased dlogits */
        losses[row] = mx + logf(s_sum) - z[tgt];
        if (correct) correct[row] = (uint8_t)(s_arg == tgt);
    }
    __syncthreads();
    if (!d) return;
    /* 4. gradient */
    const float inv = 1.0f / s_sum;
    for (int v = tid; v < V; v += DT__CE_THREADS) d[v] = dloss * dt__expf(z[v] - mx) * inv;
    __syncthreads();
    if (tid == 0) d[tgt] -= dloss;
}

dt_status dt__cuda_crossentropy_forward_backward(dt_backend *be, float *losses, uint8_t *correct, float *dlogits,
                                                 const float *logits, const int32_t *targets, int N, int V, int ld,
                                                 float dloss)
{
    if (N <= 0) return DT_OK;
    if (V <= 0) return DT_FAIL(DT_ERR_INVALID, "cross-entropy: vocabulary of %d (expected >= 1)", V);
    cudaStream_t s = DT__CUDA_STREAM(be);
    dt__cuda_impl *im = DT__CUDA_IMPL(be);
    DT_CUDA_CHECK(cudaMemsetAsync(im->bad_row, 0xff, sizeof(unsigned), s)); /* UINT_MAX: none */
    dt__k_ce_check<<<dt__cuda_blocks((size_t)N, DT__CUDA_THREADS), DT__CUDA_THREADS, 0, s>>>(im->bad_row, targets, N,
                                                                                             V);
    DT_CUDA_LAUNCHED("cross-entropy target check");
    dt__k_crossentropy<<<N, DT__CE_THREADS, 0, s>>>(losses, correct, dlogits, logits, targets, N, V, ld, dloss,
                                                    im->bad_row, im->pending_dev);
    DT_CUDA_LAUNCHED("cross-entropy");
    return DT_OK;
}

/* ---- a vocabulary-parallel part (dt_backend.h, cpu_layers.c's
 * dt__cpu_crossentropy_part): one block per row, the same reductions as
 * above over the part's V columns. Targets are whole-vocabulary indexes,
 * not checked here (the runner checks them against the whole vocabulary). */
__global__ void dt__k_crossentropy_part(float *stats, float *dlogits, const float *ms, const float *logits,
                                        const int32_t *targets, int V, int ld, int v0, float dloss)
{
    __shared__ float s_val[DT__CE_WARPS];
    __shared__ int s_idx[DT__CE_WARPS];
    __shared__ float s_max, s_sum;
    __shared__ int s_arg;
    const int row = blockIdx.x, tid = threadIdx.x;
    const float *z = logits + (size_t)row * ld;
    const int tgt = targets[row], here = tgt >= v0 && tgt - v0 < V ? tgt - v0 : -1;
    if (dlogits) {
        float *d = dlogits + (size_t)row * ld;
        if (tgt < 0) {
            for (int v = tid; v < V; v += DT__CE_THREADS) d[v] = 0.0f;
            return;
        }
        const float mx = ms[2 * (size_t)row], inv = 1.0f / ms[2 * (size_t)row + 1];
        for (int v = tid; v < V; v += DT__CE_THREADS) d[v] = dloss * dt__expf(z[v] - mx) * inv;
        __syncthreads();
        if (tid == 0 && here >= 0) d[here] -= dloss;
        return;
    }
    float *o = stats + (size_t)row * 4;
    if (tgt < 0) {
        if (tid == 0) o[0] = 0.0f, o[1] = 1.0f, o[2] = 0.0f, o[3] = -1.0f;
        return;
    }
    dt__ce_row(z, V, s_val, s_idx, &s_max, &s_arg, &s_sum);
    if (tid == 0) o[0] = s_max, o[1] = s_sum, o[2] = here >= 0 ? z[here] : 0.0f, o[3] = (float)(v0 + s_arg);
}

dt_status dt__cuda_crossentropy_part(dt_backend *be, float *stats, float *dlogits, const float *ms,
                                     const float *logits, const int32_t *targets, int N, int V, int ld, int v0,
                                     float dloss)
{
    if (N <= 0) return DT_OK;
    dt__k_crossentropy_part<<<N, DT__CE_THREADS, 0, DT__CUDA_STREAM(be)>>>(stats, dlogits, ms, logits, targets, V, ld,
                                                                           v0, dloss);
    DT_CUDA_LAUNCHED("cross-entropy part");
    return DT_OK;
}
