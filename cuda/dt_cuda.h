/* dt_cuda.h: the CUDA backend's internal entry points beyond the dt_backend
 * table, in plain C so library code, benchmarks and tests can call them in
 * every build (never installed).
 *
 * With CUDA they are implemented in the .cu files of cuda/; without it cuda/cuda_none.c
 * makes each return DT_ERR_UNSUPPORTED with a one-line message, so callers
 * need no #ifdef. `be` must come from dt_backend_cuda_create (anything else
 * is DT_ERR_INVALID). */
#ifndef DT_CUDA_H
#define DT_CUDA_H

#include <stddef.h>

#include "dt_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GEMM precision: allow_tf32 = 0 (the default) keeps every cuBLAS GEMM in
 * exact FP32 (CUBLAS_COMPUTE_32F), matching the CPU backend within FP32
 * rounding; 1 lets cuBLAS round the inputs to TF32 on tensor cores
 * (CUBLAS_COMPUTE_32F_FAST_TF32: 10-bit mantissas, relative error ~1e-3). */
dt_status dt__cuda_set_tf32(dt_backend *be, int allow_tf32);

/* GELU (tanh approximation) on 16-bit storage: out(n) = gelu(in(n)) with
 * dtype DT_F16 or DT_BF16, math in FP32, vectorized as half2 /
 * __nv_bfloat162 pairs in 16-byte loads when both pointers are 16-byte
 * aligned (scalar otherwise and for the tail). Rounding to the 16-bit type
 * uses CUDA's round-to-nearest-even intrinsics (a NaN may come out as
 * CUDA's canonical NaN rather than with cast's payload rule). out may
 * alias in. For the benchmark against the FP32 table op. */
dt_status dt__cuda_gelu_forward_half(dt_backend *be, void *out, const void *in, dt_dtype dtype, size_t n);

/* The backend's stream (a cudaStream_t, every op runs on it) and its device
 * ordinal, for the NCCL communicator, which orders its work after the
 * backend's on the same stream. NULL / -1 for any other backend. */
void *dt__cuda_stream(dt_backend *be);
int dt__cuda_device(const dt_backend *be);

#ifdef __cplusplus
}
#endif
#endif
