/* encoder.cu: token + position embedding on the GPU.
 *
 * forward: out(B,T,C) = wte[tokens] + wpe[t], one thread per element.
 * backward: dwte(V,C) +=, dwpe(T,C) += from dout(B,T,C), without atomics
 * and in the CPU backend's order, so the result is bit-identical to it:
 *  - dwpe: one thread per (t, c) adds dout[b, t, c] for b = 0, 1, ... into
 *    dwpe[t, c] one term at a time (what cpu_layers.c does per cell);
 *  - dwte: the tokens (device memory, B*T int32) are copied to the host and
 *    bucketed there by token, positions ascending (a stable sort of
 *    (token, position) pairs); one block per distinct token then adds its
 *    positions' rows in that order. A token outside [0, 2^31) would be a
 *    negative index: it is DT_ERR_INVALID. This costs one small round trip
 *    per call (B*T ints each way), once per micro-batch. */
#include <stdlib.h>

#include "cuda_internal.h"

__global__ void dt__k_encoder_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe, int T,
                                      int C, size_t n)
{
    DT__CUDA_FOR(idx, n)
    {
        size_t bt = idx / C;
        int c = (int)(idx % C);
        out[idx] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)(bt % T) * C + c];
    }
}

dt_status dt__cuda_encoder_forward(dt_backend *be, float *out, const int32_t *tokens, const float *wte,
                                   const float *wpe, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    if (n == 0) return DT_OK;
    dt__k_encoder_forward<<<dt__cuda_blocks(n, DT__CUDA_THREADS), DT__CUDA_THREADS, 0, DT__CUDA_STREAM(be)>>>(
        out, tokens, wte, wpe, T, C, n);
    DT_CUDA_LAUNCHED("encoder forward");
    return DT_OK;
}

/* dwpe(T,C): thread per (t, c), batches in order. */
__global__ void dt__k_encoder_backward_wpe(float *dwpe, const float *dout, int B, int T, int C)
{
    DT__CUDA_FOR(idx, (size_t)T * C)
    {
        size_t t = idx / C, c = idx % C;
        float acc = dwpe[idx];
        for (int b = 0; b < B; b++) acc += dout[((size_t)b * T + t) * C + c];
        dwpe[idx] = acc;
    }
}

/* dwte: block u handles the distinct token uniq[u] whose positions are
 * pos[off[u] .. off[u+1]) (ascending); threads stride over channels. */
__global__ void dt__k_encoder_backward_wte(float *dwte, const float *dout, const int32_t *uniq, const int32_t *off,
                                           const int32_t *pos, int C)
{
    const int u = blockIdx.x;
    const int32_t tok = uniq[u], lo = off[u], hi = off[u + 1];
    float *g = dwte + (size_t)tok * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = g[c];
        for (int k = lo; k < hi; k++) acc += dout[(size_t)pos[k] * C + c];
        g[c] = acc;
    }
}

typedef struct dt__tokpos {
    int32_t tok, pos;
} dt__tokpos;

static int dt__tokpos_cmp(const void *a, const void *b)
{
    const dt__tokpos *x = (const dt__tokpos *)a, *y = (const dt__tokpos *)b;
    if (x->tok != y->tok) return x->tok < y->tok ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

dt_status dt__cuda_encoder_backward(dt_backend *be, float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                                    int B, int T, int C)
{
    const int BT = B * T;
    if (BT <= 0 || C <= 0) return DT_OK;
    cudaStream_t s = DT__CUDA_STREAM(be);
    dt__k_encoder_backward_wpe<<<dt__cuda_blocks((size_t)T * C, DT__CUDA_THREADS), DT__CUDA_THREADS, 0, s>>>(dwpe, dout,
                                                                                                             B, T, C);
    DT_CUDA_LAUNCHED("encoder backward (positions)");

    /* Host layout: pairs(BT) | uniq(BT) | off(BT+1) | pos(BT); the last three
     * go to the device in one copy. */
    size_t ints = 3 * (size_t)BT + 1;
    void *hbuf;
    DT_CHECK(dt__cuda_host_workspace(be, sizeof(dt__tokpos) * BT + ints * sizeof(int32_t), &hbuf));
    dt__tokpos *pairs = (dt__tokpos *)hbuf;
    int32_t *uniq = (int32_t *)(pairs + BT), *off = uniq + BT, *pos = off + BT + 1;
    int32_t *htok = uniq; /* the raw tokens land in uniq first, then become pairs */
    DT_CUDA_CHECK(cudaMemcpyAsync(htok, tokens, sizeof(int32_t) * BT, cudaMemcpyDeviceToHost, s));
    DT_CUDA_CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < BT; i++) {
        if (htok[i] < 0)
            return DT_FAIL(DT_ERR_INVALID, "encoder backward: token %d at position %d is negative", (int)htok[i], i);
        pairs[i].tok = htok[i];
        pairs[i].pos = i;
    }
    qsort(pairs, (size_t)BT, sizeof *pairs, dt__tokpos_cmp);
    int nu = 0;
    for (int i = 0; i < BT; i++) {
        if (i == 0 || pairs[i].tok != pairs[i - 1].tok) {
            uniq[nu] = pairs[i].tok;
            off[nu] = i;
            nu++;
        }
        pos[i] = pairs[i].pos;
    }
    off[nu] = BT;
    /* Device copy: uniq(nu) | off(nu+1) | pos(BT), packed. */
    void *dbuf;
    DT_CHECK(dt__cuda_workspace(be, ints * sizeof(int32_t), &dbuf));
    int32_t *duniq = (int32_t *)dbuf, *doff = duniq + nu, *dpos = doff + nu + 1;
    DT_CUDA_CHECK(cudaMemcpyAsync(duniq, uniq, sizeof(int32_t) * nu, cudaMemcpyHostToDevice, s));
    DT_CUDA_CHECK(cudaMemcpyAsync(doff, off, sizeof(int32_t) * (nu + 1), cudaMemcpyHostToDevice, s));
    DT_CUDA_CHECK(cudaMemcpyAsync(dpos, pos, sizeof(int32_t) * BT, cudaMemcpyHostToDevice, s));
    const int wte_threads = C < 256 ? 32 * ((C + 31) / 32) : 256;
    dt__k_encoder_backward_wte<<<nu, wte_threads, 0, s>>>(dwte, dout, duniq, doff, dpos, C);
    DT_CUDA_LAUNCHED("encoder backward (tokens)");
    /* The host workspace must not change before the copies have read it. */
    DT_CUDA_CHECK(cudaStreamSynchronize(s));
    return DT_OK;
}
