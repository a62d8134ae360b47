/* crossentropy.cu: fused softmax cross-entropy on the GPU (semantics in
 * dt_backend.h, algorithm of cpu_layers.c).
 *
 * Shapes: logits, dlogits (N, V); targets, losses, correct (N).
 * First a check kernel finds the lowest row whose target is >= V; if there
 * is one the op fails with DT_ERR_INVALID naming it (as the CPU backend)
 * before anything is written, at the cost of one 4-byte read back per call.
 * Then one block per row:
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

/* bad = lowest row whose target is >= V (bad starts at N). */
__global__ void dt__k_ce_check(int *bad, const int32_t *targets, int N, int V)
{
    DT__CUDA_FOR(i, (size_t)N)
    if (targets[i] >= V) atomicMin(bad, (int)i);
}

__global__ void dt__k_crossentropy(float *losses, uint8_t *correct, float *dlogits, const float *logits,
                                   const int32_t *targets, int V, float dloss)
{
    __shared__ float s_val[DT__CE_WARPS];
    __shared__ int s_idx[DT__CE_WARPS];
    __shared__ float s_max, s_sum;
    __shared__ int s_arg;
    const int row = blockIdx.x, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const float *z = logits + (size_t)row * V;
    float *d = dlogits ? dlogits + (size_t)row * V : NULL;
    const int tgt = targets[row];
    if (tgt < 0) {
        if (tid == 0) {
            losses[row] = 0.0f;
            if (correct) correct[row] = 0;
        }
        if (d)
            for (int v = tid; v < V; v += DT__CE_THREADS) d[v] = 0.0f;
        return;
    }
    /* 1. max and its index by dt__argmax_better (cuda_plan.h): the CPU's
     * rule, NaNs included; a total order on the offered candidates, so
     * the butterflies and the warp-order pass all find the same one */
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
        s_max = m;
        s_arg = a;
    }
    __syncthreads();
    mx = s_max;
    /* 2. sum of exponentials */
    float s = 0.0f;
    for (int v = tid; v < V; v += DT__CE_THREADS) s += dt__expf(z[v] - mx);
    s = dt__warp_sum(s);
    if (lane == 0) s_val[warp] = s;
    __syncthreads();
    if (tid == 0) {
        float t = 0.0f;
        for (int w = 0; w < DT__CE_WARPS; w++) t += s_val[w];
        s_sum = t;
        /* 3. loss, before any write to an aliased dlogits */
        losses[row] = mx + logf(t) - z[tgt];
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
                                                 const float *logits, const int32_t *targets, int N, int V, float dloss)
{
    if (N <= 0) return DT_OK;
    if (V <= 0) return DT_FAIL(DT_ERR_INVALID, "cross-entropy: vocabulary of %d (expected >= 1)", V);
    cudaStream_t s = DT__CUDA_STREAM(be);
    int *dbad;
    DT_CHECK(dt__cuda_workspace(be, sizeof(int), (void **)&dbad));
    int *hbad;
    DT_CHECK(dt__cuda_host_workspace(be, 2 * sizeof(int), (void **)&hbad));
    DT_CUDA_CHECK(cudaMemcpyAsync(dbad, &N, sizeof(int), cudaMemcpyHostToDevice, s));
    dt__k_ce_check<<<dt__cuda_blocks((size_t)N, DT__CUDA_THREADS), DT__CUDA_THREADS, 0, s>>>(dbad, targets, N, V);
    DT_CUDA_LAUNCHED("cross-entropy target check");
    DT_CUDA_CHECK(cudaMemcpyAsync(hbad, dbad, sizeof(int), cudaMemcpyDeviceToHost, s));
    DT_CUDA_CHECK(cudaStreamSynchronize(s));
    if (hbad[0] < N) {
        int row = hbad[0];
        DT_CUDA_CHECK(cudaMemcpyAsync(hbad + 1, targets + row, sizeof(int32_t), cudaMemcpyDeviceToHost, s));
        DT_CUDA_CHECK(cudaStreamSynchronize(s));
        return DT_FAIL(DT_ERR_INVALID, "cross-entropy: target %d at row %d outside the vocabulary of %d", hbad[1], row,
                       V);
    }
    dt__k_crossentropy<<<N, DT__CE_THREADS, 0, s>>>(losses, correct, dlogits, logits, targets, V, dloss);
    DT_CUDA_LAUNCHED("cross-entropy");
    return DT_OK;
}
