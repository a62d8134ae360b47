/* stats.cu: span_stats on the GPU, the per-tensor unscale, finiteness
 * flags and sums of squares of a flat buffer with one wait for the device,
 * and sumsq and unscale_check as one span of it (semantics in
 * dt_backend.h).
 *
 * Two kernels and one copy back. Span i takes B_i blocks, a function of
 * its own length only. The first kernel runs a (max B_i, count) grid:
 * block (b, i) with b < B_i walks span i with a stride of B_i blocks,
 * multiplies in place when asked, notes a non-finite result and sums
 * squares in double, combining its threads by a shared-memory tree; it
 * writes one partial and one flag per (i, b). The second runs one block
 * per span and combines the span's B_i partials by the same tree. So the
 * order of a tensor's sum depends on its length alone, not on the other
 * spans of the call (a stage's clipped spans and the whole layout give a
 * tensor the same bits): bit-identical run to run, and different from the
 * CPU's order by double rounding, about 1e-16 relative. The spans travel
 * to the device in the workspace ahead of the partials; the flags and sums
 * come back in one cudaMemcpyAsync. */
#include <string.h>

#include "cuda_internal.h"

#define DT__STATS_THREADS 256
#define DT__STATS_BLOCKS 512 /* the most blocks per span (sumsq's grid): a power of two, the final tree's width */

/* blocks for a span of n elements: one per DT__STATS_THREADS elements (as
 * sumsq always launched), at most DT__STATS_BLOCKS. A function of the span's own length, so a tensor's sum
 * has the same bits whatever other spans share the call. */
static __host__ __device__ __forceinline__ int dt__stats_blocks(size_t n)
{
    size_t b = (n + DT__STATS_THREADS - 1) / DT__STATS_THREADS;
    return b < 1 ? 1 : b > DT__STATS_BLOCKS ? DT__STATS_BLOCKS : (int)b;
}

/* Grid (bmax, count): block (b, i) does part b of span i's B_i parts and
 * returns at once when b >= B_i; partials are bmax apart per span. */
__global__ void dt__k_stats_partial(float *x, const dt_span *spans, float s, int check, int write, int squares,
                                    double *part, int *bad)
{
    __shared__ double sh[DT__STATS_THREADS];
    __shared__ int shbad;
    const int span = blockIdx.y;
    const size_t off = spans[span].offset, n = spans[span].n;
    const int nb = dt__stats_blocks(n);
    if ((int)blockIdx.x >= nb) return; /* the whole block: no barrier is skipped by part of it */
    if (threadIdx.x == 0) shbad = 0;
    __syncthreads();
    double acc = 0.0;
    int nf = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)nb * blockDim.x) {
        float v = x[off + i];
        if (check) {
            v *= s;
            if (write) x[off + i] = v; /* a multiplication by 1 writes nothing */
            nf |= dt__float_nonfinite(v);
        }
        if (squares) acc += (double)v * (double)v;
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

/* One block of DT__STATS_BLOCKS threads per span: out_sum[i], out_bad[i]
 * from its B_i partials (stride bmax), the rest of the tree's width 0. */
__global__ void dt__k_stats_final(const dt_span *spans, const double *part, const int *bad, int bmax, double *out_sum,
                                  int *out_bad)
{
    __shared__ double sh[DT__STATS_BLOCKS];
    __shared__ int shb[DT__STATS_BLOCKS];
    const int span = blockIdx.x, t = threadIdx.x, nparts = dt__stats_blocks(spans[span].n);
    sh[t] = t < nparts ? part[(size_t)span * bmax + t] : 0.0;
    shb[t] = t < nparts ? bad[(size_t)span * bmax + t] : 0;
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
    /* count > 0, spans and x checked by the front (lib/backend/backend.c).
     * A grid has at most 65535 rows: more spans go in calls of that many. */
    enum { DT__STATS_MAX_SPANS = 65535 };
    if (count > DT__STATS_MAX_SPANS) {
        for (int at = 0; at < count; at += DT__STATS_MAX_SPANS) {
            const int k = count - at < DT__STATS_MAX_SPANS ? count - at : DT__STATS_MAX_SPANS;
            DT_CHECK(dt__cuda_span_stats(be, x, spans + at, k, s, nonfinite ? nonfinite + at : NULL,
                                         sumsq ? sumsq + at : NULL));
        }
        return DT_OK;
    }
    cudaStream_t st = DT__CUDA_STREAM(be);
    int B = 1; /* the most blocks any span takes: the grid's width */
    for (int i = 0; i < count; i++) B = dt__stats_blocks(spans[i].n) > B ? dt__stats_blocks(spans[i].n) : B;
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
                                                                       nonfinite != NULL && s != 1.0f, sumsq != NULL,
                                                                       (double *)(w + o_part), (int *)(w + o_bad));
    DT_CUDA_LAUNCHED("span_stats (partials)");
    dt__k_stats_final<<<count, DT__STATS_BLOCKS, 0, st>>>((const dt_span *)w, (const double *)(w + o_part),
                                                          (const int *)(w + o_bad), B, (double *)(w + o_sum),
                                                          (int *)(w + o_out));
    DT_CUDA_LAUNCHED("span_stats (per span)");
    DT_CUDA_CHECK(cudaMemcpyAsync(h, w + o_sum, back, cudaMemcpyDeviceToHost, st));
    DT_CUDA_CHECK(cudaStreamSynchronize(st));
    DT_CHECK(dt__cuda_pending_error(be)); /* a deferred error of an earlier op (cuda_internal.h) */
    if (sumsq) memcpy(sumsq, h, n * sizeof(double));
    if (nonfinite) memcpy(nonfinite, h + n * sizeof(double), n * sizeof(int));
    return DT_OK;
}

/* sumsq and unscale_check are span_stats of one span: one reduction for
 * all three ops (semantics in dt_backend.h). */
dt_status dt__cuda_sumsq(dt_backend *be, const float *x, size_t n, double *out)
{
    *out = 0.0;
    if (n == 0) return DT_OK;
    const dt_span sp = {0, n};
    return dt__cuda_span_stats(be, (float *)x, &sp, 1, 1.0f, NULL, out); /* x is only read */
}

dt_status dt__cuda_unscale_check(dt_backend *be, float *x, float s, size_t n, int *nonfinite)
{
    if (n == 0) return DT_OK;
    const dt_span sp = {0, n};
    int nf = 0;
    DT_CHECK(dt__cuda_span_stats(be, x, &sp, 1, s, &nf, NULL));
    if (nf) *nonfinite = 1; /* left unchanged otherwise */
    return DT_OK;
}
