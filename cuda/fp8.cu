/* fp8.cu: FP8 on the GPU, the ops fp8_quantize and fp8_gemm of
 * dt_backend.h (formats, rounding and scale rules in dt_fp8.h).
 *
 * fp8_quantize. The element conversion and the scale rule are those of
 * cuda/cuda_fp8.h, integer code on the bit patterns that gives
 * dt_fp8_round's values and codes bit for bit (checked on the host against
 * lib/core/fp8.c), so q, the counts, the amax and the histogram are the
 * CPU backend's (lib/backend/cpu/cpu_fp8.c) exactly; only a NaN's payload
 * may differ (the GPU's float operations return its canonical NaN).
 *  - One scale (tile_rows 0): with a given scale, one pass; tensorwise
 *    (scale 0), a first kernel reduces max |x| and the second computes the
 *    scale from it on the device (dt__f8_scale, as dt_fp8_scale_from_amax
 *    does on the host), so no host round trip sits between the two.
 *    dequant 0 writes the FP8 codes, one byte per element, in the first
 *    rows * cols bytes of q (the GEMM's operand); dequant 1 writes
 *    fp8(x s) * (1 / s) as floats, the CPU's expression.
 *  - Tiles (blockwise, dequant 1): one block per group of tiles reads its
 *    tiles twice, first for each tile's amax (a shared-memory max), then
 *    to convert with the tile's power-of-two scale. Tiles at least 32
 *    wide (1 x 128, 128 x 128): a block takes up to 8 tiles stacked
 *    vertically, 256 / T threads per tile walking it row by row
 *    (coalesced); narrower tiles (128 x 1, the weight gradient's): 32 / tc
 *    tiles side by side, a lane per column and the 8 warps down the rows.
 *  - The statistics (saturated and flushed counts, amax, the tensor's
 *    scale, the histogram of x's binades) are reduced on the device by
 *    warp shuffles and per-warp integer atomics (unsigned adds, and a max
 *    of |x|'s bits, which order as the floats do): integer sums and maxima
 *    do not depend on the order, so they are exact and the same in every
 *    run. They come back to the host in one cudaMemcpyAsync followed by a
 *    cudaStreamSynchronize: fp8_quantize is a synchronizing op (the model
 *    reads the scale and the counts on the host after every conversion).
 *
 * fp8_gemm, cuBLASLt (loaded at run time, cuda/cublas_dl.h), compute
 * capability 8.9 and newer. Row-major C(M,N) = alpha op(A) op(B) + beta C
 * is the column-major D(m = N, n = M) = X^T Y with X (k x m) holding
 * op(B)^T's rows and Y (k x n) op(A)'s rows, each K bytes contiguous:
 * the "TN" layout that cuBLASLt's FP8 kernels require on Ada and Hopper,
 * used here on every GPU. An operand whose bytes are not already so laid
 * out (op(B) = B or op(A) = A^T, i.e. the input-gradient GEMM's weight and
 * both operands of the weight-gradient GEMM), or whose pointer is not
 * 16-byte aligned, or whose ld or K is not a multiple of 16, is first
 * packed into the workspace by dt__k_f8_pack (a 32 x 32 shared-memory
 * transpose or copy) with K padded to a multiple of 16 by zeros (0 * 0
 * adds exactly 0); an N that is not a multiple of 16 pads X with zero rows
 * and sends D through an FP32 scratch (C copied in when beta != 0, the N
 * real columns copied back), as does a C that is not 16-byte aligned or
 * whose ldc is not a multiple of 4. The descale is alpha, a host float
 * (the caller passes 1 / (sa sb), dt_backend.h), not
 * CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER: the scales live on the host
 * already, and device scale pointers would need a copy per call for the
 * same product. FAST_ACCUM stays 0 (its default): cuBLASLt promotes the
 * tensor cores' partial sums to FP32 periodically, the accumulation the
 * op promises. Algorithms come from cuBLASLt's heuristic, cached per
 * shape, layout and alignment (32 entries a backend).
 *
 * Invariants: every CUDA and cuBLASLt call goes through DT_CUDA_CHECK /
 * DT_CUBLAS_CHECK (cuBLASLt returns cublasStatus_t); the workspace is
 * borrowed until the op returns; nothing adds floats with atomics. */
#include <stdlib.h>
#include <string.h>

#include "cuda_fp8.h"
#include "cuda_internal.h"

/* What a conversion saw, reduced on the device (the workspace). */
typedef struct dt__f8_dstats {
    unsigned long long sat, flush;
    unsigned amax; /* bits of max |x|: non-negative floats order as their bits */
    float scale;   /* one scale: the scale used */
    unsigned hist[DT_FP8_HIST];
} dt__f8_dstats;

#define DT__F8_THREADS 256 /* every kernel here: 8 warps */

static __device__ __forceinline__ unsigned long long dt__f8_warp_add(unsigned long long v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ unsigned dt__f8_warp_max(unsigned v)
{
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* |x|'s bits for the amax; 0 for a NaN (ignored, as the CPU's a > m) */
static __device__ __forceinline__ unsigned dt__f8_abs_bits(float x)
{
    const unsigned a = __float_as_uint(x) & 0x7fffffffu;
    return a > 0x7f800000u ? 0u : a;
}

/* A warp's counts and amax into the totals: one atomic each per warp.
 * Every lane of the warp calls it. */
static __device__ __forceinline__ void dt__f8_warp_flush(dt__f8_dstats *st, unsigned long long sat,
                                                         unsigned long long fl, unsigned amax)
{
    sat = dt__f8_warp_add(sat);
    fl = dt__f8_warp_add(fl);
    amax = dt__f8_warp_max(amax);
    if ((threadIdx.x & 31) == 0) {
        if (sat) atomicAdd(&st->sat, sat);
        if (fl) atomicAdd(&st->flush, fl);
        if (amax) atomicMax(&st->amax, amax);
    }
}

/* x's binade into the block's histogram (non-zero values): lanes with the
 * same bucket add once (warp-aggregated). Every lane of the warp calls it;
 * valid 0 for a lane with no element. */
static __device__ __forceinline__ void dt__f8_hist_add(unsigned *sh, float x, int valid)
{
    const unsigned u = __float_as_uint(x);
    const unsigned b = valid && (u & 0x7fffffffu) ? (u >> 23) & 0xffu : DT_FP8_HIST; /* DT_FP8_HIST: none */
    const unsigned peers = __match_any_sync(0xffffffffu, b);
    if (b < DT_FP8_HIST && (threadIdx.x & 31) == (unsigned)(__ffs(peers) - 1)) atomicAdd(&sh[b], __popc(peers));
}

static __device__ __forceinline__ void dt__f8_hist_out(dt__f8_dstats *st, const unsigned *sh)
{
    for (int b = threadIdx.x; b < DT_FP8_HIST; b += blockDim.x)
        if (sh[b]) atomicAdd(&st->hist[b], sh[b]);
}

/* ---- one scale ------------------------------------------------------------------------------- */

/* st->amax = max |x| (tensorwise scaling's first pass) */
__global__ void dt__k_f8_amax(const float *x, size_t n, dt__f8_dstats *st)
{
    unsigned m = 0;
    for (size_t base = (size_t)blockIdx.x * blockDim.x; base < n; base += (size_t)gridDim.x * blockDim.x) {
        const size_t i = base + threadIdx.x;
        if (i < n) m = max(m, dt__f8_abs_bits(x[i]));
    }
    dt__f8_warp_flush(st, 0, 0, m);
}

/* q = fp8(x s): codes (DEQ 0, one byte each) or floats fp8(x s) * (1 / s)
 * (DEQ 1); s the given scale, or (given 0) the scale of st->amax. Each
 * thread takes 4 consecutive elements a turn (vec: one 16-byte load, one
 * store). amax: accumulate max |x| here (with a given scale). */
template <int DEQ>
__global__ void dt__k_f8_tensor(void *q, const float *x, size_t n, int format, float given, int margin, int amax,
                                int hist, int vec, dt__f8_dstats *st)
{
    __shared__ unsigned sh[DT_FP8_HIST];
    __shared__ float s_sh;
    const dt__f8 p = dt__f8_of(format);
    if (threadIdx.x == 0) {
        float s = given;
        if (!(s > 0.0f)) {
            s = dt__f8_scale(&p, __uint_as_float(st->amax), margin, 0);
            if (s == 0.0f) s = 1.0f; /* amax 0 (or not finite): no scale */
        }
        s_sh = s;
        if (blockIdx.x == 0) st->scale = s;
    }
    if (hist)
        for (int b = threadIdx.x; b < DT_FP8_HIST; b += blockDim.x) sh[b] = 0;
    __syncthreads();
    const float s = s_sh, inv = DEQ ? __fdiv_rn(1.0f, s) : 1.0f;
    unsigned long long sat = 0, fl = 0;
    unsigned m = 0;
    const size_t groups = (n + 3) / 4;
    for (size_t base = (size_t)blockIdx.x * blockDim.x; base < groups; base += (size_t)gridDim.x * blockDim.x) {
        const size_t g = base + threadIdx.x, e = g * 4;
        float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        int cnt = 0; /* valid elements of this thread's four */
        if (g < groups) {
            cnt = n - e < 4 ? (int)(n - e) : 4;
            if (vec && cnt == 4) {
                const float4 t = *(const float4 *)(x + e);
                v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
            } else {
                for (int j = 0; j < cnt; j++) v[j] = x[e + j];
            }
        }
        float r[4];
        uint32_t c[4];
        for (int j = 0; j < 4; j++) {
            int sa = 0, f = 0;
            r[j] = dt__f8_round(&p, __fmul_rn(v[j], s), &c[j], &sa, &f);
            if (j < cnt) {
                sat += (unsigned)sa, fl += (unsigned)f;
                if (amax) m = max(m, dt__f8_abs_bits(v[j]));
            }
            if (DEQ) r[j] = __fmul_rn(r[j], inv);
            if (hist) dt__f8_hist_add(sh, v[j], j < cnt);
        }
        if (DEQ) {
            float *qf = (float *)q + e;
            if (vec && cnt == 4) *(float4 *)qf = make_float4(r[0], r[1], r[2], r[3]);
            else
                for (int j = 0; j < cnt; j++) qf[j] = r[j];
        } else {
            uint8_t *qb = (uint8_t *)q + e;
            if (vec && cnt == 4) *(uint32_t *)qb = c[0] | c[1] << 8 | c[2] << 16 | c[3] << 24;
            else
                for (int j = 0; j < cnt; j++) qb[j] = (uint8_t)c[j];
        }
    }
    dt__f8_warp_flush(st, sat, fl, m);
    if (hist) {
        __syncthreads();
        dt__f8_hist_out(st, sh);
    }
}

/* ---- tiles (blockwise) ---------------------------------------------------------------------- */

/* The tile layout of a call (see the file's comment). */
typedef struct dt__f8_tiling {
    int R, C, tr, tc;
    int narrow; /* tc < 32: columns side by side */
    int T;      /* wide: tiles per block (stacked), 256 / T threads each; narrow: tiles side by side */
    int ngc;    /* block groups across the columns */
} dt__f8_tiling;

/* Element k of this thread's walk (k < dt__f8_walk_len): *row, *col, and
 * the tile's index in the block (-1: this thread has no tile); returns 1
 * when the element exists. */
static __device__ __forceinline__ int dt__f8_walk(const dt__f8_tiling *t, int k, int *row, int *col, int *tile)
{
    const int gi = blockIdx.x / t->ngc, gj = blockIdx.x % t->ngc;
    if (!t->narrow) {
        const int P = DT__F8_THREADS / t->T, lt = threadIdx.x % P;
        *tile = threadIdx.x / P;
        const int e = lt + P * k, r0 = (gi * t->T + *tile) * t->tr, c0 = gj * t->tc;
        *row = r0 + e / t->tc, *col = c0 + e % t->tc;
        return e < t->tr * t->tc && *row < t->R && *col < t->C;
    }
    const int x = threadIdx.x & 31, y = threadIdx.x >> 5, w = t->T * t->tc;
    *tile = x < w ? x / t->tc : -1;
    const int ry = y + 8 * k;
    *row = gi * t->tr + ry, *col = gj * w + x;
    return x < w && ry < t->tr && *row < t->R && *col < t->C;
}

static __device__ __forceinline__ int dt__f8_walk_len(const dt__f8_tiling *t)
{
    return t->narrow ? (t->tr + 7) / 8 : (t->tr * t->tc + DT__F8_THREADS / t->T - 1) / (DT__F8_THREADS / t->T);
}

__global__ void dt__k_f8_tiles(float *q, const float *x, dt__f8_tiling t, int format, int margin, int hist,
                               dt__f8_dstats *st)
{
    __shared__ unsigned tam[32]; /* each tile's amax bits */
    __shared__ float tsc[32];    /* each tile's scale */
    __shared__ unsigned sh[DT_FP8_HIST];
    const dt__f8 p = dt__f8_of(format);
    if (threadIdx.x < 32) tam[threadIdx.x] = 0;
    if (hist)
        for (int b = threadIdx.x; b < DT_FP8_HIST; b += blockDim.x) sh[b] = 0;
    __syncthreads();
    const int len = dt__f8_walk_len(&t);
    int row, col, tile = -1;
    unsigned m = 0;
    for (int k = 0; k < len; k++)
        if (dt__f8_walk(&t, k, &row, &col, &tile)) m = max(m, dt__f8_abs_bits(x[(size_t)row * t.C + col]));
    (void)dt__f8_walk(&t, 0, &row, &col, &tile); /* this thread's tile, whatever its elements */
    if (!t.narrow) m = dt__f8_warp_max(m);       /* a whole warp walks one tile */
    if (tile >= 0 && m && (t.narrow || (threadIdx.x & 31) == 0)) atomicMax(&tam[tile], m);
    __syncthreads();
    if (threadIdx.x < (unsigned)t.T) {
        float s = dt__f8_scale(&p, __uint_as_float(tam[threadIdx.x]), margin, 1);
        tsc[threadIdx.x] = s == 0.0f ? 1.0f : s;
    }
    __syncthreads();
    const float s = tile >= 0 ? tsc[tile] : 1.0f, inv = __fdiv_rn(1.0f, s);
    unsigned long long sat = 0, fl = 0;
    for (int k = 0; k < len; k++) {
        const int ok = dt__f8_walk(&t, k, &row, &col, &tile);
        const size_t i = (size_t)row * t.C + col;
        const float v = ok ? x[i] : 0.0f;
        int sa = 0, f = 0;
        uint32_t c;
        const float r = dt__f8_round(&p, __fmul_rn(v, s), &c, &sa, &f);
        if (ok) {
            q[i] = __fmul_rn(r, inv);
            sat += (unsigned)sa, fl += (unsigned)f;
        }
        if (hist) dt__f8_hist_add(sh, v, ok);
    }
    dt__f8_warp_flush(st, sat, fl, m); /* m: the tile amaxes' max is the tensor's */
    if (hist) {
        __syncthreads();
        dt__f8_hist_out(st, sh);
    }
}

dt_status dt__cuda_fp8_quantize(dt_backend *be, void *q, const float *x, int rows, int cols, const dt_fp8_quant *spec,
                                dt_fp8_qstats *stats)
{
    /* sizes, pointers, format, tiles (dequantized) and scale checked by the front (lib/backend/backend.c) */
    cudaStream_t stream = DT__CUDA_STREAM(be);
    const size_t n = (size_t)rows * (size_t)cols;
    const int hist = stats->hist != NULL, tiles = spec->tile_rows > 0;
    const size_t back = hist ? sizeof(dt__f8_dstats) : offsetof(dt__f8_dstats, hist);
    dt__f8_dstats *d, *h;
    DT_CHECK(dt__cuda_workspace(be, sizeof *d, (void **)&d));
    DT_CHECK(dt__cuda_host_workspace(be, sizeof *h, (void **)&h));
    DT_CUDA_CHECK(cudaMemsetAsync(d, 0, back, stream));
    if (!tiles) {
        const unsigned blocks = dt__cuda_blocks((n + 3) / 4, DT__F8_THREADS);
        const int given = spec->scale > 0.0f;
        if (!given) {
            dt__k_f8_amax<<<dt__cuda_blocks(n, DT__F8_THREADS), DT__F8_THREADS, 0, stream>>>(x, n, d);
            DT_CUDA_LAUNCHED("fp8_quantize (amax)");
        }
        const int vec = (uintptr_t)x % 16 == 0 && (uintptr_t)q % (spec->dequant ? 16 : 4) == 0;
        if (spec->dequant)
            dt__k_f8_tensor<1><<<blocks, DT__F8_THREADS, 0, stream>>>(q, x, n, spec->format, spec->scale, spec->margin,
                                                                      given, hist, vec, d);
        else
            dt__k_f8_tensor<0><<<blocks, DT__F8_THREADS, 0, stream>>>(q, x, n, spec->format, spec->scale, spec->margin,
                                                                      given, hist, vec, d);
        DT_CUDA_LAUNCHED("fp8_quantize");
    } else {
        dt__f8_tiling t = {rows, cols, spec->tile_rows, spec->tile_cols, spec->tile_cols < 32, 1, 1};
        const long long nbr = (rows + t.tr - 1) / t.tr, nbc = (cols + t.tc - 1) / t.tc;
        long long groups;
        if (t.narrow) {
            t.T = 32 / t.tc; /* tiles side by side: at most 32 columns */
            t.ngc = (int)((nbc + t.T - 1) / t.T);
            groups = nbr * t.ngc;
        } else {
            /* about 1024 elements a block: 8 tiles of 1 x 128, one of 128 x 128 (T divides 256) */
            const long long area = (long long)t.tr * t.tc;
            t.T = area >= 1024 ? 1 : area >= 512 ? 2 : area >= 256 ? 4 : 8;
            t.ngc = (int)nbc;
            groups = (nbr + t.T - 1) / t.T * nbc;
        }
        if (groups > 0x7fffffffLL)
            return DT_FAIL(DT_ERR_INVALID, "fp8_quantize: %d x %d in %d x %d tiles: too many tiles for one grid", rows,
                           cols, t.tr, t.tc);
        dt__k_f8_tiles<<<(unsigned)groups, DT__F8_THREADS, 0, stream>>>((float *)q, x, t, spec->format, spec->margin,
                                                                        hist, d);
        DT_CUDA_LAUNCHED("fp8_quantize (tiles)");
    }
    /* the statistics to the host: this op waits for the stream */
    DT_CUDA_CHECK(cudaMemcpyAsync(h, d, back, cudaMemcpyDeviceToHost, stream));
    DT_CUDA_CHECK(cudaStreamSynchronize(stream));
    DT_CHECK(dt__cuda_pending_error(be)); /* a deferred error of an earlier op (cuda_internal.h) */
    memcpy(&stats->amax, &h->amax, sizeof stats->amax);
    stats->scale = tiles ? 1.0f : h->scale;
    stats->saturated = h->sat;
    stats->flushed = h->flush;
    if (hist)
        for (int b = 0; b < DT_FP8_HIST; b++) stats->hist[b] += h->hist[b];
    return DT_OK;
}

/* ---- the GEMM -------------------------------------------------------------------------------- */

/* dst (rows_p x kp bytes, row-major) = the rows x K operand of src read
 * directly (src[r ld + k]) or transposed (src[k ld + r]), zero beyond rows
 * and K. A 32 x 32 tile through shared memory, so that both the reads and
 * the writes run along memory. */
__global__ void dt__k_f8_pack(uint8_t *dst, const uint8_t *src, int rows, int K, int rows_p, int kp, long long ld,
                              int trans)
{
    __shared__ uint8_t t[32][33];
    const int k0 = blockIdx.x * 32;
    for (int r0 = blockIdx.y * 32; r0 < rows_p; r0 += gridDim.y * 32) {
        for (int j = 0; j < 32; j += 8) {
            int r, k;
            if (trans) r = r0 + threadIdx.x, k = k0 + threadIdx.y + j;
            else r = r0 + threadIdx.y + j, k = k0 + threadIdx.x;
            const uint8_t v = r < rows && k < K ? src[trans ? (size_t)k * ld + r : (size_t)r * ld + k] : 0;
            t[k - k0][r - r0] = v;
        }
        __syncthreads();
        for (int j = 0; j < 32; j += 8) {
            const int r = r0 + threadIdx.y + j, k = k0 + threadIdx.x;
            if (r < rows_p && k < kp) dst[(size_t)r * kp + k] = t[threadIdx.x][threadIdx.y + j];
        }
        __syncthreads();
    }
}

static dt_status dt__f8_pack(dt_backend *be, uint8_t *dst, const void *src, int rows, int K, int rows_p, int kp, int ld,
                             int trans)
{
    const unsigned gy = (unsigned)((rows_p + 31) / 32);
    const dim3 grid((unsigned)((kp + 31) / 32), gy < 65535u ? gy : 65535u), block(32, 8);
    dt__k_f8_pack<<<grid, block, 0, DT__CUDA_STREAM(be)>>>(dst, (const uint8_t *)src, rows, K, rows_p, kp, ld, trans);
    DT_CUDA_LAUNCHED("fp8_gemm (operand packing)");
    return DT_OK;
}

/* A cached algorithm: the heuristic's choice for a shape, layout and alignment. */
typedef struct dt__f8_plan {
    int used;
    int fx, fy, m, n, k;
    long long ldx, ldy, ldd;
    unsigned ax, ay, ad; /* pointer alignments the heuristic was told */
    cublasLtMatmulAlgo_t algo;
} dt__f8_plan;

#define DT__F8_PLANS 32
#define DT__F8_LT_WORK ((size_t)32 << 20) /* cuBLASLt's workspace: 32 MiB, NVIDIA's advice for Hopper */

struct dt__cuda_fp8 {
    cublasLtHandle_t lt;
    void *work; /* DT__F8_LT_WORK bytes of device memory for cuBLASLt */
    dt__f8_plan plan[DT__F8_PLANS];
    int next; /* the entry replaced next when all are used */
};

void dt__cuda_fp8_release(dt__cuda_impl *im)
{
    if (!im->fp8) return;
    /* best effort, from destroy: nothing to report to */
    if (im->fp8->work) cudaFree(im->fp8->work);
    if (im->fp8->lt) cublasLtDestroy(im->fp8->lt);
    free(im->fp8);
    im->fp8 = NULL;
}

/* The cuBLASLt handle and workspace, made by the first FP8 GEMM. */
static dt_status dt__f8_state(dt_backend *be, struct dt__cuda_fp8 **out)
{
    dt__cuda_impl *im = DT__CUDA_IMPL(be);
    if (!im->fp8) {
        struct dt__cuda_fp8 *f = (struct dt__cuda_fp8 *)calloc(1, sizeof *f);
        if (!f) return DT_FAIL(DT_ERR_NOMEM, "cuda: fp8_gemm: out of memory for its state");
        im->fp8 = f; /* freed by destroy, whatever fails below */
        DT_CUBLAS_CHECK(cublasLtCreate(&f->lt));
        const cudaError_t e = cudaMalloc(&f->work, DT__F8_LT_WORK);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            f->work = NULL;
            return DT_FAIL(DT_ERR_NOMEM,
                           "cuda: fp8_gemm: cannot allocate cuBLASLt's %zu-byte workspace on device %d: %s",
                           DT__F8_LT_WORK, im->device, cudaGetErrorString(e));
        }
    }
    if (!im->fp8->lt || !im->fp8->work)
        return DT_FAIL(DT_ERR_BACKEND, "cuda: fp8_gemm: cuBLASLt could not be set up on device %d (an earlier error)",
                       im->device);
    *out = im->fp8;
    return DT_OK;
}

static unsigned dt__f8_align(const void *p)
{
    unsigned a = 256;
    while (a > 1 && (uintptr_t)p % a) a >>= 1;
    return a;
}

/* The descriptors of one matmul, destroyed whatever happens. */
typedef struct dt__f8_descs {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t x, y, d;
    cublasLtMatmulPreference_t pref;
} dt__f8_descs;

static void dt__f8_descs_free(dt__f8_descs *s)
{
    if (s->pref) cublasLtMatmulPreferenceDestroy(s->pref);
    if (s->d) cublasLtMatrixLayoutDestroy(s->d);
    if (s->y) cublasLtMatrixLayoutDestroy(s->y);
    if (s->x) cublasLtMatrixLayoutDestroy(s->x);
    if (s->op) cublasLtMatmulDescDestroy(s->op);
}

/* D(m x n, ldd) = alpha X^T Y + beta D, X (k x m, ldx) and Y (k x n, ldy) FP8 */
static dt_status dt__f8_matmul(dt_backend *be, dt__f8_descs *s, int m, int n, int k, float alpha, const void *X,
                               dt_fp8_format fx, long long ldx, const void *Y, dt_fp8_format fy, long long ldy,
                               float beta, float *D, long long ldd)
{
    struct dt__cuda_fp8 *f = NULL;
    DT_CHECK(dt__f8_state(be, &f));
    const cudaDataType_t tx = fx == DT_FP8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    const cudaDataType_t ty = fy == DT_FP8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    const int8_t fast = 0;
    DT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&s->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    DT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s->op, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
    DT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s->op, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
    DT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    DT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s->x, tx, (uint64_t)k, (uint64_t)m, ldx));
    DT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s->y, ty, (uint64_t)k, (uint64_t)n, ldy));
    DT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s->d, CUDA_R_32F, (uint64_t)m, (uint64_t)n, ldd));
    const unsigned ax = dt__f8_align(X), ay = dt__f8_align(Y), ad = dt__f8_align(D);
    dt__f8_plan *pl = NULL;
    for (int i = 0; i < DT__F8_PLANS && !pl; i++) {
        dt__f8_plan *c = &f->plan[i];
        if (c->used && c->fx == (int)fx && c->fy == (int)fy && c->m == m && c->n == n && c->k == k && c->ldx == ldx &&
            c->ldy == ldy && c->ldd == ldd && c->ax == ax && c->ay == ay && c->ad == ad)
            pl = c;
    }
    if (!pl) {
        const uint64_t wsz = DT__F8_LT_WORK;
        DT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&s->pref));
        DT_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(s->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz));
        DT_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(s->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &ax, sizeof ax));
        DT_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(s->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ay, sizeof ay));
        DT_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(s->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof ad));
        DT_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(s->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad));
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        memset(&res, 0, sizeof res);
        DT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(f->lt, s->op, s->x, s->y, s->d, s->d, s->pref, 1, &res, &found));
        if (found < 1 || res.state != CUBLAS_STATUS_SUCCESS)
            return DT_FAIL(DT_ERR_BACKEND,
                           "cuda: fp8_gemm: cuBLASLt has no FP8 algorithm for m %d n %d k %d (%s x %s, ld %lld %lld "
                           "%lld, alignments %u %u %u bytes)",
                           m, n, k, dt_fp8_format_name(fx), dt_fp8_format_name(fy), ldx, ldy, ldd, ax, ay, ad);
        pl = &f->plan[f->next];
        f->next = (f->next + 1) % DT__F8_PLANS;
        *pl = (dt__f8_plan){1, (int)fx, (int)fy, m, n, k, ldx, ldy, ldd, ax, ay, ad, res.algo};
    }
    DT_CUBLAS_CHECK(cublasLtMatmul(f->lt, s->op, &alpha, X, s->x, Y, s->y, &beta, D, s->d, D, s->d, &pl->algo, f->work,
                                   DT__F8_LT_WORK, DT__CUDA_STREAM(be)));
    return DT_OK;
}

dt_status dt__cuda_fp8_gemm(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha, const void *A,
                            dt_fp8_format fa, int lda, const void *B, dt_fp8_format fb, int ldb, float beta, float *C,
                            int ldc)
{
    /* sizes (> 0), leading dimensions and pointers checked by the front (lib/backend/backend.c) */
    dt__cuda_impl *im = DT__CUDA_IMPL(be);
    if (im->cc_major * 10 + im->cc_minor < 89)
        return DT_FAIL(DT_ERR_UNSUPPORTED,
                       "cuda: fp8_gemm: device %d (%s) has compute capability %d.%d; FP8 GEMMs need 8.9 or newer",
                       im->device, im->name, im->cc_major, im->cc_minor);
    if (fa == DT_FP8_E5M2 && fb == DT_FP8_E5M2)
        return DT_FAIL(DT_ERR_UNSUPPORTED, "cuda: fp8_gemm: e5m2 x e5m2 is not supported by cuBLASLt (FP8 training "
                                           "pairs e4m3 with e4m3 or e5m2)");
    cudaStream_t stream = im->stream;
    const int Kp = (K + 15) / 16 * 16, Np = (N + 15) / 16 * 16;
    /* X = op(B)^T as N rows of K bytes, Y = op(A) as M rows of K bytes, D = C^T column-major */
    const int x_ok = transb && ldb % 16 == 0 && (uintptr_t)B % 16 == 0 && K == Kp && N == Np;
    const int y_ok = !transa && lda % 16 == 0 && (uintptr_t)A % 16 == 0 && K == Kp;
    const int d_ok = ldc % 4 == 0 && (uintptr_t)C % 16 == 0 && N == Np;
    const size_t xb = x_ok ? 0 : ((size_t)Np * Kp + 255) / 256 * 256,
                 yb = y_ok ? 0 : ((size_t)M * Kp + 255) / 256 * 256;
    const size_t db = d_ok ? 0 : (size_t)M * Np * sizeof(float);
    char *w = NULL;
    if (xb + yb + db) DT_CHECK(dt__cuda_workspace(be, xb + yb + db, (void **)&w));
    const void *X = B, *Y = A;
    long long ldx = ldb, ldy = lda, ldd = ldc;
    float *D = C;
    if (!x_ok) {
        DT_CHECK(dt__f8_pack(be, (uint8_t *)w, B, N, K, Np, Kp, ldb, !transb));
        X = w, ldx = Kp;
    }
    if (!y_ok) {
        DT_CHECK(dt__f8_pack(be, (uint8_t *)w + xb, A, M, K, M, Kp, lda, transa));
        Y = w + xb, ldy = Kp;
    }
    if (!d_ok) {
        D = (float *)(w + xb + yb), ldd = Np;
        if (beta != 0.0f)
            DT_CUDA_CHECK(cudaMemcpy2DAsync(D, (size_t)Np * sizeof(float), C, (size_t)ldc * sizeof(float),
                                            (size_t)N * sizeof(float), (size_t)M, cudaMemcpyDeviceToDevice, stream));
        else /* not read with beta 0, but its padding columns should hold numbers */
            DT_CUDA_CHECK(cudaMemsetAsync(D, 0, db, stream));
    }
    dt__f8_descs s;
    memset(&s, 0, sizeof s);
    const dt_status st = dt__f8_matmul(be, &s, Np, M, Kp, alpha, X, fb, ldx, Y, fa, ldy, beta, D, ldd);
    dt__f8_descs_free(&s);
    DT_CHECK(st);
    if (!d_ok)
        DT_CUDA_CHECK(cudaMemcpy2DAsync(C, (size_t)ldc * sizeof(float), D, (size_t)Np * sizeof(float),
                                        (size_t)N * sizeof(float), (size_t)M, cudaMemcpyDeviceToDevice, stream));
    return DT_OK;
}
