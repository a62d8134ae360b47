/* layernorm.cu: LayerNorm over the last dimension on the GPU.
 *
 * Shapes: inp, out, dout, dinp (N, C); w, b, dw, db (C); mean, rstd (N).
 * forward: one warp per row. Each lane sums its elements c = lane, lane+32,
 * ... in FP32, the lanes are combined with xor-shuffle butterflies
 * (dt__warp_sum: fixed order, every lane gets the same bits); the variance
 * is the two-pass centred sum, as in the CPU backend; rstd = 1 / sqrtf(.)
 * with IEEE division and square root (eps = 1e-5).
 * backward: dinp += (row kernel, one warp per row, same reductions);
 * dw +=, db += by a column kernel: blocks (32 channels, row chunk) with the
 * chunks of dt__colsum_plan_for (cuda_plan.h), threadIdx.x a channel,
 * threadIdx.y a row lane summing its chunk's rows y, y+32, ... in order,
 * lanes combined in order into one partial per chunk; a second pass
 * (dt__cuda_colsum_finish) adds the partials in chunk order. No atomics:
 * results are bit-identical run to run on one GPU. */
#include "cuda_internal.h"

#define DT__LN_EPS 1e-5f
#define DT__LN_WARPS 8 /* rows per block of the row kernels */

__global__ void dt__k_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                                        const float *b, int N, int C)
{
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * DT__LN_WARPS + threadIdx.x / 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    float *o = out + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += x[c];
    const float m = dt__warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = x[c] - m;
        v += d * d;
    }
    const float r = 1.0f / sqrtf(dt__warp_sum(v) / C + DT__LN_EPS);
    for (int c = lane; c < C; c += 32) o[c] = (x[c] - m) * r * w[c] + b[c];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

dt_status dt__cuda_layernorm_forward(dt_backend *be, float *out, float *mean, float *rstd, const float *inp,
                                     const float *w, const float *b, int N, int C)
{
    if (N <= 0) return DT_OK;
    if (C <= 0) return DT_FAIL(DT_ERR_INVALID, "layernorm: %d channels (expected >= 1)", C);
    dt__k_layernorm_forward<<<(N + DT__LN_WARPS - 1) / DT__LN_WARPS, 32 * DT__LN_WARPS, 0, DT__CUDA_STREAM(be)>>>(
        out, mean, rstd, inp, w, b, N, C);
    DT_CUDA_LAUNCHED("layernorm forward");
    return DT_OK;
}

/* dinp(N,C) += rstd * (dn - mean(dn) - n * mean(dn * n)), dn = w * dout. */
__global__ void dt__k_layernorm_backward_dinp(float *dinp, const float *dout, const float *inp, const float *w,
                                              const float *mean, const float *rstd, int N, int C)
{
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * DT__LN_WARPS + threadIdx.x / 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C, *d = dout + (size_t)row * C;
    float *dx = dinp + (size_t)row * C;
    const float m = mean[row], r = rstd[row];
    float s_d = 0.0f, s_dn = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float n = (x[c] - m) * r;
        float dn = w[c] * d[c];
        s_d += dn;
        s_dn += dn * n;
    }
    s_d = dt__warp_sum(s_d) / C;
    s_dn = dt__warp_sum(s_dn) / C;
    for (int c = lane; c < C; c += 32) {
        float n = (x[c] - m) * r;
        float dn = w[c] * d[c];
        dx[c] += r * (dn - s_d - n * s_dn);
    }
}

/* dw(C) += sum_i n_i * dout_i, db(C) += sum_i dout_i over the N rows, first
 * pass: block (blockIdx.x, blockIdx.y) sums the rows [lo, hi) of its row
 * chunk for 32 channels (layout of gemm.cu's dt__k_bias_grad). add = 1 (one
 * chunk): pw, pb are dw, db and get += the sums; add = 0: pw, pb are the
 * partials (chunks, C), row blockIdx.y. */
__global__ void dt__k_layernorm_backward_dwdb(float *pw, float *pb, const float *dout, const float *inp,
                                              const float *mean, const float *rstd, int N, int C, int rows, int add)
{
    __shared__ float sw_[32][33], sb_[32][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    const int lo = blockIdx.y * rows, hi = N - lo < rows ? N : lo + rows; /* no int overflow */
    float aw = 0.0f, ab = 0.0f;
    if (c < C)
        for (int i = lo + threadIdx.y; i < hi; i += 32) {
            float d = dout[(size_t)i * C + c];
            float n = (inp[(size_t)i * C + c] - mean[i]) * rstd[i];
            ab += d;
            aw += n * d;
        }
    sw_[threadIdx.y][threadIdx.x] = aw;
    sb_[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float sw = 0.0f, sb = 0.0f;
        for (int k = 0; k < 32; k++) {
            sw += sw_[k][threadIdx.x];
            sb += sb_[k][threadIdx.x];
        }
        if (add) {
            pw[c] += sw;
            pb[c] += sb;
        } else {
            pw[(size_t)blockIdx.y * C + c] = sw;
            pb[(size_t)blockIdx.y * C + c] = sb;
        }
    }
}

dt_status dt__cuda_layernorm_backward(dt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                      const float *inp, const float *w, const float *mean, const float *rstd, int N,
                                      int C)
{
    if (N <= 0 || C <= 0) return DT_OK;
    cudaStream_t s = DT__CUDA_STREAM(be);
    if (dinp) { /* either part may be skipped (the zero-bubble split: dinp in B, dw and db in W) */
        dt__k_layernorm_backward_dinp<<<(N + DT__LN_WARPS - 1) / DT__LN_WARPS, 32 * DT__LN_WARPS, 0, s>>>(
            dinp, dout, inp, w, mean, rstd, N, C);
        DT_CUDA_LAUNCHED("layernorm backward (dinp)");
    }
    if (!dw) return DT_OK;
    const dt__colsum_plan p = dt__colsum_plan_for(N, C, DT__CUDA_IMPL(be)->sms);
    float *pw = dw, *pb = db;
    if (p.chunks > 1) {
        DT_CHECK(dt__cuda_workspace(be, 2 * (size_t)p.chunks * C * sizeof(float), (void **)&pw));
        pb = pw + (size_t)p.chunks * C;
    }
    dt__k_layernorm_backward_dwdb<<<dim3((C + 31) / 32, p.chunks), dim3(32, 32), 0, s>>>(pw, pb, dout, inp, mean, rstd,
                                                                                         N, C, p.rows, p.chunks == 1);
    DT_CUDA_LAUNCHED("layernorm backward (dw, db)");
    if (p.chunks > 1) {
        DT_CHECK(dt__cuda_colsum_finish(be, dw, pw, p.chunks, C));
        DT_CHECK(dt__cuda_colsum_finish(be, db, pb, p.chunks, C));
    }
    return DT_OK;
}
