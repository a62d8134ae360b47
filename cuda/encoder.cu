/* encoder.cu: token + position embedding on the GPU.
 *
 * forward: out(B,T,C) = wte[tokens] + wpe[t], one thread per element.
 * backward: dwte(V,C) +=, dwpe(T,C) += from dout(B,T,C), without atomics
 * and in the CPU backend's order, so the result is bit-identical to it:
 *  - dwpe: one thread per (t, c) adds dout[b, t, c] for b = 0, 1, ... into
 *    dwpe[t, c] one term at a time (what cpu_layers.c does per cell);
 *  - dwte, all on the device (no host round trip): the (token, position)
 *    pairs of the B*T tokens are sorted by token with CUB's radix sort,
 *    which is stable, so each token's positions stay ascending; then one
 *    block per sorted index that starts a run of equal tokens adds that
 *    token's rows in position order (the other blocks return at once). A
 *    negative token would be a negative index: its run is skipped and,
 *    unless it is DT_TOKEN_MASKED (-1: a row another vocabulary-parallel
 *    rank holds, dt_backend.h), the lowest such position is reported as
 *    DT_ERR_INVALID at the backend's next host synchronisation
 *    (dt__cuda_pending_error). wpe NULL: no position; dwpe NULL: skipped.
 *    Sort buffers and
 *    CUB's temporary storage come from the backend's workspace. */
#include <cub/device/device_radix_sort.cuh>

#include "cuda_internal.h"

__global__ void dt__k_encoder_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe, int T,
                                      int C, size_t n)
{
    DT__CUDA_FOR(idx, n)
    {
        size_t bt = idx / C;
        int c = (int)(idx % C);
        const int32_t tok = tokens[bt];
        if (!wpe) out[idx] = tok == DT_TOKEN_MASKED ? 0.0f : wte[(size_t)tok * C + c];
        else if (tok == DT_TOKEN_MASKED) out[idx] = wpe[(size_t)(bt % T) * C + c];
        else out[idx] = wte[(size_t)tok * C + c] + wpe[(size_t)(bt % T) * C + c];
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

/* pos[i] = i; *bad = the lowest position with a negative token (*bad
 * starts at UINT_MAX). */
__global__ void dt__k_encoder_positions(int32_t *pos, unsigned *bad, const int32_t *tokens, int BT)
{
    DT__CUDA_FOR(i, (size_t)BT)
    {
        pos[i] = (int32_t)i;
        if (tokens[i] < 0 && tokens[i] != DT_TOKEN_MASKED) atomicMin(bad, (unsigned)i);
    }
}

/* dwte: tok(BT) sorted, pos(BT) the positions in the same (stable) order.
 * Block k works only if k starts a run of equal tokens; it adds the run's
 * rows of dout in order (positions ascending); threads stride over
 * channels. A negative token's run is skipped (reported elsewhere). */
__global__ void dt__k_encoder_backward_wte(float *dwte, const float *dout, const int32_t *tok, const int32_t *pos,
                                           int BT, int C)
{
    const int k = blockIdx.x;
    const int32_t t = tok[k];
    if ((k > 0 && tok[k - 1] == t) || t < 0) return;
    int hi = k + 1;
    while (hi < BT && tok[hi] == t) hi++;
    float *g = dwte + (size_t)t * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = g[c];
        for (int j = k; j < hi; j++) acc += dout[(size_t)pos[j] * C + c];
        g[c] = acc;
    }
}

/* Record the lowest bad position as the pending error (one thread, after
 * dt__k_encoder_positions in stream order), unless one is pending. */
__global__ void dt__k_encoder_report(dt__cuda_pending *pending, const unsigned *bad, const int32_t *tokens, int BT)
{
    const unsigned b = *bad;
    if (b < (unsigned)BT && pending->row < 0) {
        pending->kind = DT__CUDA_PENDING_TOKEN;
        pending->target = tokens[b];
        pending->vocab = 0;
        __threadfence_system();
        pending->row = (int)b;
    }
}

static size_t dt__align256(size_t n) { return (n + 255) & ~(size_t)255; }

dt_status dt__cuda_encoder_backward(dt_backend *be, float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                                    int B, int T, int C)
{
    const int BT = B * T;
    if (BT <= 0 || C <= 0) return DT_OK;
    cudaStream_t s = DT__CUDA_STREAM(be);
    dt__cuda_impl *im = DT__CUDA_IMPL(be);
    if (dwpe) {
        dt__k_encoder_backward_wpe<<<dt__cuda_blocks((size_t)T * C, DT__CUDA_THREADS), DT__CUDA_THREADS, 0, s>>>(
            dwpe, dout, B, T, C);
        DT_CUDA_LAUNCHED("encoder backward (positions)");
    }

    /* Workspace: sorted tokens | positions | sorted positions | CUB's
     * temporary storage, each 256-byte aligned. */
    size_t temp_bytes = 0;
    DT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, (int32_t *)nullptr,
                                                  (const int32_t *)nullptr, (int32_t *)nullptr, BT, 0, 32, s));
    const size_t ints = dt__align256(sizeof(int32_t) * (size_t)BT);
    char *w;
    DT_CHECK(dt__cuda_workspace(be, 3 * ints + dt__align256(temp_bytes), (void **)&w));
    int32_t *tok_sorted = (int32_t *)w, *pos = (int32_t *)(w + ints), *pos_sorted = (int32_t *)(w + 2 * ints);
    void *temp = w + 3 * ints;

    DT_CUDA_CHECK(cudaMemsetAsync(im->bad_row, 0xff, sizeof(unsigned), s)); /* UINT_MAX: none */
    dt__k_encoder_positions<<<dt__cuda_blocks((size_t)BT, DT__CUDA_THREADS), DT__CUDA_THREADS, 0, s>>>(pos, im->bad_row,
                                                                                                       tokens, BT);
    DT_CUDA_LAUNCHED("encoder backward (position list)");
    dt__k_encoder_report<<<1, 1, 0, s>>>(im->pending_dev, im->bad_row, tokens, BT);
    DT_CUDA_LAUNCHED("encoder backward (token check)");
    /* signed 32-bit keys, all bits: negative tokens sort first (and are skipped) */
    DT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, tok_sorted, pos, pos_sorted, BT, 0, 32, s));
    const int wte_threads = C < 256 ? 32 * ((C + 31) / 32) : 256;
    dt__k_encoder_backward_wte<<<BT, wte_threads, 0, s>>>(dwte, dout, tok_sorted, pos_sorted, BT, C);
    DT_CUDA_LAUNCHED("encoder backward (tokens)");
    return DT_OK;
}
