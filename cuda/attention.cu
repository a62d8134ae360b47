/* attention.cu: causal multi-head self-attention on the GPU, behind the
 * fused contract of include/dt_backend.h (out and a per-row log-sum-exp;
 * no (T, T) array outlives the op) but with unfused kernels inside: the
 * probabilities are made in the backend's workspace (dt__cuda_workspace,
 * B*NH*T*T floats, 2x that in the backward) and dropped when the op
 * returns. A fused flash kernel waits until a GPU can test it (docs/cuda.md).
 *
 * qkv(B,T,3C) = [q | k | v] per position, head h owning channels
 * h*hs .. h*hs+hs-1 of each part (hs = C/NH); lse(B,NH,T); out(B,T,C).
 * Per (b, h):
 *   forward:  S = Q K^T / sqrt(hs); P = causal_softmax(S), lse = log-sum-exp
 *             of each row of S; Y = P V
 *   backward: P = exp(S - lse) from S recomputed; dP = dY V^T; dV = P^T dY;
 *             dS = P * (dP - rowsum(P * dP)) / sqrt(hs); dQ = dS K; dK = dS^T Q
 * (rowsum(P * dP) equals the contract's rowsum(dY * Y): the GPU path does
 * not read out.) The GEMMs read the heads in place through leading
 * dimensions (3C or C): for one batch row b, head h + 1 starts hs floats
 * after head h in qkv and out, and T*T floats after it in P, so each GEMM is
 * one strided-batched cuBLAS call over the NH heads, issued once per b (no
 * transposed copies). P holds zeros above the diagonal, so full-width GEMMs
 * give the causal result (the CPU's tiles skip that half; these do not).
 *
 * Mixed precision (set_gemm_inputs F16/BF16): all GEMMs take 16-bit
 * inputs with FP32 accumulation (gemm.cu). Q, K, V and dY are 16-bit values
 * already (the model rounds them); P and dS are computed here in FP32 and
 * rounded to the 16-bit type by the GEMM's cast, as PyTorch's autocast
 * does (softmax in FP32, its result cast for the 16-bit matmul P V; the
 * scores come from the 16-bit matmul Q K^T, so dS is cast to 16 bits for
 * its backward). So Y, dQ and dK differ from the CPU's by
 * that rounding: at most u * sum_j P_ij |V_jd| for Y (u = 2^-8 bf16,
 * 2^-11 f16), u * sum_j |dS_ij| |K_jd| for dQ (tests/check_cuda.c).
 *
 * Softmax kernels: one warp per row of T; max and sums by xor-shuffle
 * butterflies (fixed order), exp from dt_math_hd.h (the CPU backend's
 * polynomial). */
#include "cuda_internal.h"

#define DT__ATT_WARPS 8 /* rows per block */

/* Rows of att (B*NH*T of them, row r is query t = r % T): softmax over
 * keys 0..t, zeros above the diagonal; lse[r] = the row's log-sum-exp.
 * Scores already carry 1/sqrt(hs). */
__global__ void dt__k_causal_softmax(float *att, float *lse, size_t rows, int T)
{
    const int lane = threadIdx.x % 32;
    const size_t row = (size_t)blockIdx.x * DT__ATT_WARPS + threadIdx.x / 32;
    if (row >= rows) return;
    const int t = (int)(row % T);
    float *p = att + row * T;
    float mx = -INFINITY;
    for (int j = lane; j <= t; j += 32) mx = fmaxf(mx, p[j]);
    mx = dt__warp_max(mx);
    float s = 0.0f;
    for (int j = lane; j <= t; j += 32) {
        float e = dt__expf(p[j] - mx);
        p[j] = e;
        s += e;
    }
    s = dt__warp_sum(s);
    const float inv = 1.0f / s;
    for (int j = lane; j <= t; j += 32) p[j] *= inv;
    for (int j = t + 1 + lane; j < T; j += 32) p[j] = 0.0f;
    if (lane == 0) lse[row] = mx + logf(s);
}

/* The forward's probabilities again: att holds the scores S and becomes
 * exp(S - lse) on keys 0..t, zeros above the diagonal. */
__global__ void dt__k_causal_prob(float *att, const float *lse, size_t rows, int T)
{
    const int lane = threadIdx.x % 32;
    const size_t row = (size_t)blockIdx.x * DT__ATT_WARPS + threadIdx.x / 32;
    if (row >= rows) return;
    const int t = (int)(row % T);
    float *p = att + row * T;
    const float L = lse[row];
    for (int j = lane; j <= t; j += 32) p[j] = dt__expf(p[j] - L);
    for (int j = t + 1 + lane; j < T; j += 32) p[j] = 0.0f;
}

/* dS = scale * P * (dP - rowsum(P * dP)) on the causal part, 0 above it;
 * dS arrives holding dP and is overwritten in place. */
__global__ void dt__k_causal_softmax_backward(float *dS, const float *att, size_t rows, int T, float scale)
{
    const int lane = threadIdx.x % 32;
    const size_t row = (size_t)blockIdx.x * DT__ATT_WARPS + threadIdx.x / 32;
    if (row >= rows) return;
    const int t = (int)(row % T);
    const float *p = att + row * T;
    float *d = dS + row * T;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += 32) dot += p[j] * d[j];
    dot = dt__warp_sum(dot);
    for (int j = lane; j <= t; j += 32) d[j] = scale * p[j] * (d[j] - dot);
    for (int j = t + 1 + lane; j < T; j += 32) d[j] = 0.0f;
}

/* The heads (NH > 0 dividing C) are checked by the front (lib/backend/backend.c);
 * negative sizes only here: the CPU backend does not reject them. */
static dt_status dt__att_check(int B, int T)
{
    if (B < 0 || T < 0) return DT_FAIL(DT_ERR_INVALID, "attention: negative batch %d or length %d", B, T);
    return DT_OK;
}

dt_status dt__cuda_attention_forward(dt_backend *be, float *out, float *lse, const float *qkv, int B, int T, int C,
                                     int NH)
{
    DT_CHECK(dt__att_check(B, T));
    if (B == 0 || T == 0) return DT_OK;
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long TT = (long long)T * T;
    float *att = NULL; /* (B,NH,T,T) probabilities, for this op only */
    DT_CHECK(dt__cuda_workspace(be, (size_t)B * NH * TT * sizeof(float), (void **)&att));
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C;
        float *P = att + (size_t)b * NH * TT;
        /* S_h(T,T) = scale * Q_h K_h^T */
        DT_CHECK(dt__cuda_gemm_batched(be, 0, 1, T, T, hs, scale, q, C3, hs, k, C3, hs, 0.0f, P, T, TT, NH));
    }
    const size_t rows = (size_t)B * NH * T;
    dt__k_causal_softmax<<<(unsigned)((rows + DT__ATT_WARPS - 1) / DT__ATT_WARPS), 32 * DT__ATT_WARPS, 0,
                           DT__CUDA_STREAM(be)>>>(att, lse, rows, T);
    DT_CUDA_LAUNCHED("attention softmax");
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * C3 + 2 * C;
        const float *P = att + (size_t)b * NH * TT;
        float *y = out + (size_t)b * T * C;
        /* Y_h(T,hs) = P_h V_h */
        DT_CHECK(dt__cuda_gemm_batched(be, 0, 0, T, hs, T, 1.0f, P, T, TT, v, C3, hs, 0.0f, y, C, hs, NH));
    }
    return DT_OK;
}

dt_status dt__cuda_attention_backward(dt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                      const float *out, const float *lse, int B, int T, int C, int NH)
{
    (void)out; /* rowsum(P * dP) below is the contract's rowsum(dout * out) */
    DT_CHECK(dt__att_check(B, T));
    if (B == 0 || T == 0) return DT_OK;
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long TT = (long long)T * T;
    float *att = NULL; /* (B,NH,T,T) probabilities, then (B,NH,T,T) score gradients */
    DT_CHECK(dt__cuda_workspace(be, 2 * (size_t)B * NH * TT * sizeof(float), (void **)&att));
    float *scratch = att + (size_t)B * NH * TT;
    const size_t rows = (size_t)B * NH * T;
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C;
        /* S_h(T,T) = scale * Q_h K_h^T, as in the forward */
        DT_CHECK(dt__cuda_gemm_batched(be, 0, 1, T, T, hs, scale, q, C3, hs, k, C3, hs, 0.0f, att + (size_t)b * NH * TT,
                                       T, TT, NH));
    }
    dt__k_causal_prob<<<(unsigned)((rows + DT__ATT_WARPS - 1) / DT__ATT_WARPS), 32 * DT__ATT_WARPS, 0,
                        DT__CUDA_STREAM(be)>>>(att, lse, rows, T);
    DT_CUDA_LAUNCHED("attention probabilities again");
    for (int b = 0; b < B; b++) {
        const size_t base = (size_t)b * T * C3;
        const float *v = qkv + base + 2 * C;
        float *dv = dqkv + base + 2 * C;
        const float *P = att + (size_t)b * NH * TT;
        float *dS = scratch + (size_t)b * NH * TT;
        const float *dy = dout + (size_t)b * T * C;
        /* dP_h(T,T) = dY_h V_h^T */
        DT_CHECK(dt__cuda_gemm_batched(be, 0, 1, T, T, hs, 1.0f, dy, C, hs, v, C3, hs, 0.0f, dS, T, TT, NH));
        /* dV_h(T,hs) = P_h^T dY_h */
        DT_CHECK(dt__cuda_gemm_batched(be, 1, 0, T, hs, T, 1.0f, P, T, TT, dy, C, hs, 0.0f, dv, C3, hs, NH));
    }
    dt__k_causal_softmax_backward<<<(unsigned)((rows + DT__ATT_WARPS - 1) / DT__ATT_WARPS), 32 * DT__ATT_WARPS, 0,
                                    DT__CUDA_STREAM(be)>>>(scratch, att, rows, T, scale);
    DT_CUDA_LAUNCHED("attention softmax backward");
    for (int b = 0; b < B; b++) {
        const size_t base = (size_t)b * T * C3;
        const float *q = qkv + base, *k = q + C;
        float *dq = dqkv + base, *dk = dq + C;
        const float *dS = scratch + (size_t)b * NH * TT;
        /* dQ_h = dS_h K_h, dK_h = dS_h^T Q_h (the scale is inside dS) */
        DT_CHECK(dt__cuda_gemm_batched(be, 0, 0, T, hs, T, 1.0f, dS, T, TT, k, C3, hs, 0.0f, dq, C3, hs, NH));
        DT_CHECK(dt__cuda_gemm_batched(be, 1, 0, T, hs, T, 1.0f, dS, T, TT, q, C3, hs, 0.0f, dk, C3, hs, NH));
    }
    return DT_OK;
}
