/* cuda_internal.h: what the CUDA backend's .cu files share (compiled by nvcc
 * only, never installed): the backend's private state, the checking macros
 * for CUDA and cuBLAS calls, launch helpers, and the op entry points that
 * backend.cu assembles into its static const dt_backend_ops table, declared
 * with the op types of dt_backend.h (one .cu file per family).
 *
 * Invariants:
 *  - every CUDA runtime and cuBLAS call goes through DT_CUDA_CHECK or
 *    DT_CUBLAS_CHECK, and every kernel launch is followed by
 *    DT_CUDA_LAUNCHED; on failure they record "file:line" and the library's
 *    error string as the one-line message and return DT_ERR_BACKEND. No code
 *    here exits or prints;
 *  - all work goes to the backend's one stream, in call order, so ops are
 *    asynchronous to the host but ordered among themselves. An op returns
 *    before its kernels finish unless it must hand a value to the host
 *    (sumsq, unscale_check) or copies to or from host memory;
 *  - errors in device data (cross-entropy's targets, the embedding
 *    backward's tokens) are found by kernels
 *    and reported by the next op that waits for the stream
 *    (dt__cuda_pending_error), not by the op that met them;
 *  - the device workspace (dt__cuda_workspace) is one buffer, reused by
 *    every op: an op may use it until it returns (later work on the stream
 *    is ordered after its kernels, so reuse is safe);
 *  - no kernel uses float atomics: every sum has a fixed order, so results
 *    are bit-identical run to run on the same GPU and launch shapes. */
#ifndef DT_CUDA_INTERNAL_H
#define DT_CUDA_INTERNAL_H

#include "cublas_dl.h" /* cuBLAS, opened at run time */
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "dt_backend.h"
#include "cuda_plan.h"
#include "dt_cuda.h"
#include "dt_math_hd.h"

/* Registered 16-bit copies of FP32 ranges (set_gemm_shadow): a handful of
 * models or pipeline stages per backend at most. */
#define DT__CUDA_SHADOWS 16

typedef struct dt__cuda_shadow {
    const float *f32; /* NULL: free entry */
    size_t n;         /* floats */
    const void *half; /* n elements of dtype, equal in value to f32's */
    dt_dtype dtype;   /* DT_F16 or DT_BF16 */
} dt__cuda_shadow;

/* An error found on the device and reported at the backend's next host
 * synchronisation (dt__cuda_pending_error): a cross-entropy target outside
 * the vocabulary, a negative token in the embedding backward. Host memory
 * mapped into the device: a kernel writes it (row last), the host reads
 * it after the stream is synchronised. row < 0: none. */
enum { DT__CUDA_PENDING_TARGET = 1, DT__CUDA_PENDING_TOKEN = 2 };
typedef struct dt__cuda_pending {
    int row;    /* the lowest bad row (target) or position (token) */
    int kind;   /* DT__CUDA_PENDING_* */
    int target; /* its target or token */
    int vocab;  /* V (cross-entropy) */
} dt__cuda_pending;

typedef struct dt__cuda_impl {
    int device;            /* CUDA device ordinal */
    int sms;               /* its multiprocessor count, for launch shapes (cuda_plan.h) */
    cudaStream_t stream;   /* every op's stream */
    cublasHandle_t cublas; /* bound to stream */
    int allow_tf32;        /* GEMM compute type: 0 exact FP32, 1 TF32 tensor cores */
    dt_dtype gemm_inputs;  /* set_gemm_inputs: DT_F16/DT_BF16 GEMMs cast their inputs and use tensor cores */
    void *gemm_work;       /* device: the 16-bit copies of a GEMM's A and B */
    size_t gemm_work_bytes;
    dt__cuda_shadow shadow[DT__CUDA_SHADOWS]; /* set_gemm_shadow: operands read without a cast */
    void *work;                               /* device workspace, grown on demand */
    size_t work_bytes;
    void *host; /* host staging for small results */
    size_t host_bytes;
    unsigned *bad_row;             /* device: an op's lowest bad row or position (atomicMin), reset per op */
    dt__cuda_pending *pending;     /* mapped host memory: the first deferred error since the last report */
    dt__cuda_pending *pending_dev; /* the same, as the device addresses it */
    int sync_launches;             /* DT_CUDA_SYNC=1 at creation: DT_CUDA_LAUNCHED synchronises and checks */
    int cc_major, cc_minor;        /* the device's compute capability (FP8 GEMMs need 8.9) */
    struct dt__cuda_fp8 *fp8;      /* fp8.cu: cuBLASLt handle, workspace, plans; NULL until the first FP8 GEMM */
    char name[256];                /* the device's name, for messages */
} dt__cuda_impl;

#define DT__CUDA_IMPL(be) ((dt__cuda_impl *)(be)->impl)
#define DT__CUDA_STREAM(be) (DT__CUDA_IMPL(be)->stream)

/* Record a CUDA runtime failure with file:line and return DT_ERR_BACKEND.
 * The runtime's last-error slot is cleared (cudaGetLastError): a
 * non-sticky error such as a failed cudaMalloc is reported here once and
 * not again by the next launch check; a sticky one (a fault) persists in
 * the context whatever we do. */
#define DT_CUDA_CHECK(call)                                                                        \
    do {                                                                                           \
        cudaError_t dt__ce_ = (call);                                                              \
        if (dt__ce_ != cudaSuccess) {                                                              \
            (void)cudaGetLastError();                                                              \
            return dt__fail(DT_ERR_BACKEND, __FILE__, __LINE__, "cuda: %s failed: %s (%s)", #call, \
                            cudaGetErrorString(dt__ce_), cudaGetErrorName(dt__ce_));               \
        }                                                                                          \
    } while (0)

#define DT_CUBLAS_CHECK(call)                                                                        \
    do {                                                                                             \
        cublasStatus_t dt__cb_ = (call);                                                             \
        if (dt__cb_ != CUBLAS_STATUS_SUCCESS)                                                        \
            return dt__fail(DT_ERR_BACKEND, __FILE__, __LINE__, "cublas: %s failed: %s (%s)", #call, \
                            cublasGetStatusString(dt__cb_), cublasGetStatusName(dt__cb_));           \
    } while (0)

/* After a <<<...>>> launch, in a function with the backend `be` in scope:
 * a bad configuration shows up here. With DT_CUDA_SYNC=1 (read once, at
 * creation: sync_launches) the stream is also synchronised, so a fault
 * inside the kernel is reported here, at the launch's file:line, and so
 * are deferred errors (dt__cuda_pending_error), by the op that met them. */
#define DT_CUDA_LAUNCHED(what)                                                                                  \
    do {                                                                                                        \
        cudaError_t dt__ce_ = cudaGetLastError();                                                               \
        if (dt__ce_ != cudaSuccess)                                                                             \
            return dt__fail(DT_ERR_BACKEND, __FILE__, __LINE__, "cuda: launching %s failed: %s (%s)", (what),   \
                            cudaGetErrorString(dt__ce_), cudaGetErrorName(dt__ce_));                            \
        if (DT__CUDA_IMPL(be)->sync_launches) {                                                                 \
            dt__ce_ = cudaStreamSynchronize(DT__CUDA_STREAM(be));                                               \
            if (dt__ce_ == cudaSuccess) dt__ce_ = cudaGetLastError();                                           \
            if (dt__ce_ != cudaSuccess)                                                                         \
                return dt__fail(DT_ERR_BACKEND, __FILE__, __LINE__, "cuda: running %s failed: %s (%s)", (what), \
                                cudaGetErrorString(dt__ce_), cudaGetErrorName(dt__ce_));                        \
            DT_CHECK(dt__cuda_pending_error(be));                                                               \
        }                                                                                                       \
    } while (0)

/* Threads per block of the 1-D elementwise kernels. */
#define DT__CUDA_THREADS 256
/* Upper bound on the grid of grid-stride kernels: enough blocks to fill any
 * current GPU several times over; each thread loops over the rest. */
#define DT__CUDA_MAX_BLOCKS 8192u

static inline unsigned dt__cuda_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    return b > DT__CUDA_MAX_BLOCKS ? DT__CUDA_MAX_BLOCKS : (unsigned)b;
}

/* Grid-stride loop over [0, n). */
#define DT__CUDA_FOR(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

#ifdef __CUDACC__
/* Sum / max over a warp by xor butterflies: every lane ends with the same
 * value (a + b == b + a bit for bit), combined in a fixed order. */
static __device__ __forceinline__ float dt__warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float dt__warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
#endif

/* backend.cu: workspaces (valid until the op returns; contents undefined). */
dt_status dt__cuda_workspace(dt_backend *be, size_t bytes, void **out);
dt_status dt__cuda_host_workspace(dt_backend *be, size_t bytes, void **out);
/* backend.cu: after the stream has been synchronised, the deferred device
 * error (cross-entropy's bad target), if one is pending: DT_ERR_INVALID
 * with its message, and the error is cleared; DT_OK otherwise. Called by
 * every op that waits for the stream (synchronize, host copies, sumsq,
 * unscale_check, span_stats). */
dt_status dt__cuda_pending_error(dt_backend *be);
/* 1 if be is a CUDA backend (for the internal entry points of dt_cuda.h). */
int dt__cuda_is_cuda(const dt_backend *be);

/* gemm.cu: out(C) += sum over y < chunks of part(chunks, C)[y], y in order
 * (the second pass of the split column sums, cuda_plan.h). */
dt_status dt__cuda_colsum_finish(dt_backend *be, float *out, const float *part, int chunks, int C);

/* gemm.cu. Row-major GEMM over `batch` matrices at element strides sA, sB,
 * sC: C_i(M,N) = alpha op(A_i) op(B_i) + beta C_i; under set_gemm_inputs
 * F16/BF16 A and B are cast to that type (rounded if they are not 16-bit
 * values) unless set_gemm_shadow registered a copy. */
dt_status dt__cuda_gemm_batched(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha,
                                const float *A, int lda, long long sA, const float *B, int ldb, long long sB,
                                float beta, float *C, int ldc, long long sC, int batch);
dt_backend_set_gemm_inputs_fn dt__cuda_set_gemm_inputs;
dt_backend_set_gemm_shadow_fn dt__cuda_set_gemm_shadow;
dt_backend_gemm_fn dt__cuda_gemm;
dt_backend_matmul_forward_fn dt__cuda_matmul_forward;
dt_backend_matmul_backward_fn dt__cuda_matmul_backward;

/* encoder.cu */
dt_backend_encoder_forward_fn dt__cuda_encoder_forward;
dt_backend_encoder_backward_fn dt__cuda_encoder_backward;

/* layernorm.cu */
dt_backend_layernorm_forward_fn dt__cuda_layernorm_forward;
dt_backend_layernorm_backward_fn dt__cuda_layernorm_backward;

/* attention.cu */
dt_backend_attention_forward_fn dt__cuda_attention_forward;
dt_backend_attention_backward_fn dt__cuda_attention_backward;

/* elementwise.cu */
dt_backend_gelu_forward_fn dt__cuda_gelu_forward;
dt_backend_gelu_backward_fn dt__cuda_gelu_backward;
dt_backend_residual_forward_fn dt__cuda_residual_forward;
dt_backend_relu_forward_fn dt__cuda_relu_forward;
dt_backend_relu_backward_fn dt__cuda_relu_backward;

/* crossentropy.cu */
dt_backend_crossentropy_forward_backward_fn dt__cuda_crossentropy_forward_backward;
dt_backend_crossentropy_part_fn dt__cuda_crossentropy_part;

/* optim.cu */
dt_backend_scale_fn dt__cuda_scale;
dt_backend_adamw_update_fn dt__cuda_adamw_update;
dt_backend_sgd_update_fn dt__cuda_sgd_update;
dt_backend_lars_update_fn dt__cuda_lars_update;
dt_backend_lamb_direction_fn dt__cuda_lamb_direction;
dt_backend_axpy_fn dt__cuda_axpy;

/* half.cu */
dt_backend_cast_fn dt__cuda_cast;

/* stats.cu: span_stats, and sumsq and unscale_check as one span of it */
dt_backend_span_stats_fn dt__cuda_span_stats;
dt_backend_sumsq_fn dt__cuda_sumsq;
dt_backend_unscale_check_fn dt__cuda_unscale_check;

/* fp8.cu: FP8 quantization (any GPU) and FP8 GEMMs (cuBLASLt, compute
 * capability 8.9 and newer); dt__cuda_fp8_release frees what the first
 * FP8 GEMM made (called by destroy). */
dt_backend_fp8_quantize_fn dt__cuda_fp8_quantize;
dt_backend_fp8_gemm_fn dt__cuda_fp8_gemm;
void dt__cuda_fp8_release(dt__cuda_impl *im);

/* batchnorm.cu */
dt_backend_batchnorm_forward_fn dt__cuda_batchnorm_forward;
dt_backend_batchnorm_backward_fn dt__cuda_batchnorm_backward;

#endif
