/* stats.cu: span_stats on the GPU, the per-tensor unscale, finiteness flags
 * and sums of squares of a flat buffer with one wait for the device
 * (semantics in dt_backend.h).
 *
 * Two kernels and one copy back. The first runs a (B, count) grid: block
 * (b, i) walks span i with a stride of B blocks, multiplies in place when
 * asked, notes a non-finite result and sums squares in double, combining
 * its threads by a shared-memory tree; it writes one partial and one flag
 * per (i, b). The second runs one block per span and combines the span's B
 * partials by the same tree. B is a function of the longest span only, so
 * the order of every sum is fixed by the spans: results are bit-identical
 * run to run (they differ from the CPU's order by double rounding, about
 * 1e-16 relative). The spans travel to the device in the workspace ahead
 * of the partials; the counts and sums come back in one cudaMemcpyAsync. */
#include <string.h>

#include "cuda_internal.h"

#define DT__STATS_THREADS 256
#define DT__STATS_BLOCKS 64 /* the most blocks per span: a power of two, the final tree's width */

/* blocks per span: enough for the longest span's elements at 4 a thread,
 * at most DT__STATS_BLOCKS */
static int dt__stats_blocks(const dt_span *spans, int count)
{
    size_t longest = 0;
    for (int i = 0; i < count; i++) longest = spans[i].n > longest ? spans[i].n : longest;
    size_t b = (longest + 4 * DT__STATS_THREADS - 1) / (4 * DT__STATS_THREADS);
    return b < 1 ? 1 : b > DT__STATS_BLOCKS ? DT__STATS_BLOCKS : (int)b;
}

__global__ void dt__k_stats_partial(float *x, const dt_span *spans, float s, int scale, double *part, int *bad)
{
    __shared__ double sh[DT__STATS_THREADS];
    __shared__ int shbad;
    const int span = blockIdx.y;
    const size_t off = spans[span].offset, n = spans[span].n;
    if (threadIdx.x == 0) shbad = 0;
    __syncthreads();
    double acc = 0.0;
    int nf = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = x[off + i];
        if (scale) {
            v *= s;
            x[off + i] = v;
            nf |= dt__float_nonfinite(v);
        }
        acc += (double)v * (double)v;
    }
    if (nf) shbad = 1; /* every writer stores the same 1 */
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int k = DT__STATS_THREADS / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        part[(size_t)span * gridDim.x + blockIdx.x] = sh[0];
        bad[(size_t)span * gridDim.x + blockIdx.x] = shbad;
    }
}

/* One block of DT__STATS_BLOCKS threads per span: out_sum[i], out_bad[i]. */
__global__ void dt__k_stats_final(const double *part, const int *bad, int nparts, double *out_sum, int *out_bad)
{
    __shared__ double sh[DT__STATS_BLOCKS];
    __shared__ int shb[DT__STATS_BLOCKS];
    const int span = blockIdx.x, t = threadIdx.x;
    sh[t] = t < nparts ? part[(size_t)span * nparts + t] : 0.0;
    shb[t] = t < nparts ? bad[(size_t)span * nparts + t] : 0;
    __syncthreads();
    for (int k = DT__STATS_BLOCKS / 2; k > 0; k >>= 1) {
        if (t < k) {
            sh[t] += sh[t + k];
            shb[t] |= shb[t + k];
        }
        __syncthreads();
    }
    if (t == 0) {
        out_sum[span] = sh[0];
        out_bad[span] = shb[0];
    }
}

dt_status dt__cuda_span_stats(dt_backend *be, float *x, const dt_span *spans, int count, float s, int *nonfinite,
                              double *sumsq)
{
    /* count > 0, spans and x checked by the front (lib/backend/backend.c) */
    if (count > 65535) return DT_FAIL(DT_ERR_INVALID, "span_stats: %d spans (the CUDA backend takes <= 65535)", count);
    cudaStream_t st = DT__CUDA_STREAM(be);
    const int B = dt__stats_blocks(spans, count);
    const size_t n = (size_t)count;
    /* workspace: spans | partials (n * B doubles) | partial flags (n * B ints) | sums (n doubles) | flags (n ints) */
    const size_t o_part = n * sizeof(dt_span); /* a multiple of 8 */
    const size_t o_bad = o_part + n * B * sizeof(double);
    const size_t o_sum = (o_bad + n * B * sizeof(int) + 7) & ~(size_t)7;
    const size_t o_out = o_sum + n * sizeof(double);
    const size_t back = n * sizeof(double) + n * sizeof(int); /* sums and flags, adjacent */
    char *w, *h;
    DT_CHECK(dt__cuda_workspace(be, o_sum + back, (void **)&w));
    DT_CHECK(dt__cuda_host_workspace(be, back, (void **)&h));
    DT_CUDA_CHECK(cudaMemcpyAsync(w, spans, n * sizeof(dt_span), cudaMemcpyHostToDevice, st));
    dt__k_stats_partial<<<dim3(B, count), DT__STATS_THREADS, 0, st>>>(x, (const dt_span *)w, s, nonfinite != NULL,
                                                                       (double *)(w + o_part), (int *)(w + o_bad));
    DT_CUDA_LAUNCHED("span_stats (partials)");
    dt__k_stats_final<<<count, DT__STATS_BLOCKS, 0, st>>>((const double *)(w + o_part), (const int *)(w + o_bad), B,
                                                          (double *)(w + o_sum), (int *)(w + o_out));
    DT_CUDA_LAUNCHED("span_stats (per span)");
    DT_CUDA_CHECK(cudaMemcpyAsync(h, w + o_sum, back, cudaMemcpyDeviceToHost, st));
    DT_CUDA_CHECK(cudaStreamSynchronize(st));
    DT_CHECK(dt__cuda_pending_error(be)); /* a deferred error of an earlier op (cuda_internal.h) */
    if (sumsq) memcpy(sumsq, h, n * sizeof(double));
    if (nonfinite) memcpy(nonfinite, h + n * sizeof(double), n * sizeof(int));
    return DT_OK;
}
