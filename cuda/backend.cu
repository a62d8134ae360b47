/* backend.cu: the CUDA backend's table, device selection and memory.
 *
 * Owns: dt_backend_cuda_create (device check, stream, cuBLAS handle), the
 * memory ops (cudaMalloc'd buffers zeroed on the stream, copies,
 * synchronize), the device and host workspaces that other ops borrow, and
 * the static const table of ops from the op files (gemm.cu, encoder.cu,
 * layernorm.cu, attention.cu, elementwise.cu, crossentropy.cu, optim.cu,
 * half.cu, batchnorm.cu, fp8.cu). Arguments reach the ops already checked
 * by the front (lib/backend/backend.c); the ops check only what is theirs
 * (device data).
 *
 * Invariants: the backend takes GPU local_rank mod the device count at
 * creation (dt_backend_options: the MPI communicator's node-local rank;
 * without one the launcher's local rank variables, else the current
 * device) and makes it current again in every call that allocates; one
 * non-blocking stream orders all its work; copies from or to host memory
 * are complete when copy() returns (so host buffers may be reused at once);
 * device-to-device copies and every op are asynchronous until
 * synchronize(). Errors that kernels find in device data are reported by
 * the next call that waits for the stream (dt__cuda_pending_error: here
 * synchronize and host copies; span_stats, so sumsq and unscale_check, too). With no
 * usable device, creation fails with DT_ERR_UNSUPPORTED and a one-line
 * message, and nothing is left allocated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

static void dt__cuda_destroy(dt_backend *be)
{
    if (!be) return;
    dt__cuda_impl *im = DT__CUDA_IMPL(be);
    if (im) {
        /* Best effort: errors here cannot be returned, and recording them
         * would overwrite the message of a failed creation. */
        if (cudaSetDevice(im->device) == cudaSuccess && im->stream) (void)cudaStreamSynchronize(im->stream);
        (void)cudaGetLastError();
        if (im->work) cudaFree(im->work);
        if (im->bad_row) cudaFree(im->bad_row);
        if (im->pending) cudaFreeHost(im->pending);
        if (im->gemm_work) cudaFree(im->gemm_work);
        dt__cuda_fp8_release(im);
        if (im->cublas) cublasDestroy(im->cublas);
        if (im->stream) cudaStreamDestroy(im->stream);
        free(im->host);
        free(im);
    }
    free(be);
}

static dt_status dt__cuda_set_threads(dt_backend *be, int n)
{
    /* Host threads do no work in this backend; the count is kept for logs. */
    be->threads = n <= 0 ? 1 : n;
    return DT_OK;
}

static dt_status dt__cuda_alloc(dt_backend *be, size_t bytes, void **out)
{
    dt__cuda_impl *im = DT__CUDA_IMPL(be);
    *out = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63; /* cudaMalloc aligns to 256 bytes */
    if (rounded == 0) rounded = 64;
    DT_CUDA_CHECK(cudaSetDevice(im->device));
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, rounded);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky-free allocation error */
        return DT_FAIL(e == cudaErrorMemoryAllocation ? DT_ERR_NOMEM : DT_ERR_BACKEND,
                       "cuda: cannot allocate %zu bytes on device %d (%s): %s", bytes, im->device, im->name,
                       cudaGetErrorString(e));
    }
    e = cudaMemsetAsync(p, 0, rounded, im->stream);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFree(p);
        return DT_FAIL(DT_ERR_BACKEND, "cuda: zeroing %zu new bytes: %s", bytes, cudaGetErrorString(e));
    }
    *out = p;
    return DT_OK;
}

static void dt__cuda_free(dt_backend *be, void *p)
{
    if (!p) return;
    /* cudaFree waits for the device, so no pending kernel still uses p. */
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* reported here, not again by the next launch check */
        dt__fail(DT_ERR_BACKEND, __FILE__, __LINE__, "cuda: cudaFree: %s", cudaGetErrorString(e));
    }
    (void)be;
}

static dt_status dt__cuda_memset_zero(dt_backend *be, void *p, size_t bytes)
{
    if (bytes) DT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, DT__CUDA_STREAM(be)));
    return DT_OK;
}

static dt_status dt__cuda_copy(dt_backend *be, void *dst, const void *src, size_t bytes, dt_copy_kind kind)
{
    if (bytes == 0 || dst == src) return DT_OK;
    cudaStream_t s = DT__CUDA_STREAM(be);
    switch (kind) {
    case DT_COPY_H2D:
        DT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
        DT_CUDA_CHECK(cudaStreamSynchronize(s));
        return dt__cuda_pending_error(be);
    case DT_COPY_D2H:
        DT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
        DT_CUDA_CHECK(cudaStreamSynchronize(s));
        return dt__cuda_pending_error(be);
    case DT_COPY_D2D: {
        /* The table's copy has memmove semantics; cudaMemcpy needs disjoint
         * ranges, so overlapping ones go through the workspace. */
        const char *d = (const char *)dst, *sp = (const char *)src;
        if (d < sp + bytes && sp < d + bytes) {
            void *tmp;
            DT_CHECK(dt__cuda_workspace(be, bytes, &tmp));
            DT_CUDA_CHECK(cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, s));
            DT_CUDA_CHECK(cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice, s));
        } else {
            DT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
        }
        return DT_OK;
    }
    }
    return DT_FAIL(DT_ERR_INVALID, "cuda copy: unknown copy kind %d", (int)kind);
}

static dt_status dt__cuda_synchronize(dt_backend *be)
{
    DT_CUDA_CHECK(cudaStreamSynchronize(DT__CUDA_STREAM(be)));
    return dt__cuda_pending_error(be);
}

dt_status dt__cuda_pending_error(dt_backend *be)
{
    volatile dt__cuda_pending *p = DT__CUDA_IMPL(be)->pending;
    if (p->row < 0) return DT_OK;
    const int row = p->row, kind = p->kind, target = p->target, vocab = p->vocab;
    p->row = -1; /* reported once; the stream is idle, so no kernel writes it now */
    if (kind == DT__CUDA_PENDING_TOKEN)
        return DT_FAIL(DT_ERR_INVALID, "encoder backward: token %d at position %d is negative", target, row);
    return DT_FAIL(DT_ERR_INVALID, "cross-entropy: target %d at row %d outside the vocabulary of %d", target, row,
                   vocab);
}

dt_status dt__cuda_workspace(dt_backend *be, size_t bytes, void **out)
{
    dt__cuda_impl *im = DT__CUDA_IMPL(be);
    if (bytes > im->work_bytes) {
        size_t want = bytes < ((size_t)1 << 20) ? (size_t)1 << 20 : bytes + bytes / 4;
        if (im->work) {
            /* cudaFree synchronizes, so no queued kernel still reads the old buffer. */
            DT_CUDA_CHECK(cudaFree(im->work));
            im->work = NULL;
            im->work_bytes = 0;
        }
        cudaError_t e = cudaMalloc(&im->work, want);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            im->work = NULL;
            return DT_FAIL(DT_ERR_NOMEM, "cuda: cannot allocate a %zu-byte workspace on device %d: %s", want,
                           im->device, cudaGetErrorString(e));
        }
        im->work_bytes = want;
    }
    *out = im->work;
    return DT_OK;
}

dt_status dt__cuda_host_workspace(dt_backend *be, size_t bytes, void **out)
{
    dt__cuda_impl *im = DT__CUDA_IMPL(be);
    if (bytes > im->host_bytes) {
        size_t want = bytes < 4096 ? 4096 : bytes + bytes / 4;
        void *p = realloc(im->host, want);
        if (!p) return DT_FAIL(DT_ERR_NOMEM, "cuda: cannot allocate %zu bytes of host workspace", want);
        im->host = p;
        im->host_bytes = want;
    }
    *out = im->host;
    return DT_OK;
}

int dt__cuda_is_cuda(const dt_backend *be) { return be && be->device == DT_DEVICE_CUDA && be->impl; }

void *dt__cuda_stream(dt_backend *be) { return dt__cuda_is_cuda(be) ? (void *)DT__CUDA_STREAM(be) : NULL; }

int dt__cuda_device(const dt_backend *be) { return dt__cuda_is_cuda(be) ? DT__CUDA_IMPL(be)->device : -1; }

dt_status dt__cuda_set_tf32(dt_backend *be, int allow_tf32)
{
    if (!dt__cuda_is_cuda(be)) return DT_FAIL(DT_ERR_INVALID, "cuda: set_tf32 on a backend that is not CUDA");
    DT__CUDA_IMPL(be)->allow_tf32 = allow_tf32 != 0;
    return DT_OK;
}

static const dt_backend_ops dt__cuda_ops = {
    .destroy = dt__cuda_destroy,                                             /* synchronizes, then frees all */
    .set_threads = dt__cuda_set_threads,                                     /* kept for logs only */
    .alloc = dt__cuda_alloc,                                                 /* cudaMalloc, zeroed on the stream */
    .free = dt__cuda_free,                                                   /* cudaFree */
    .memset_zero = dt__cuda_memset_zero,                                     /* cudaMemsetAsync */
    .copy = dt__cuda_copy,                                                   /* host copies complete on return */
    .synchronize = dt__cuda_synchronize,                                     /* cudaStreamSynchronize */
    .set_gemm_inputs = dt__cuda_set_gemm_inputs,                             /* gemm.cu: 16-bit tensor-core GEMMs */
    .set_gemm_shadow = dt__cuda_set_gemm_shadow,                             /* gemm.cu: 16-bit weights read in place */
    .gemm = dt__cuda_gemm,                                                   /* gemm.cu: cuBLAS */
    .encoder_forward = dt__cuda_encoder_forward,                             /* encoder.cu */
    .encoder_backward = dt__cuda_encoder_backward,                           /* encoder.cu: tokens sorted on the device */
    .layernorm_forward = dt__cuda_layernorm_forward,                         /* layernorm.cu */
    .layernorm_backward = dt__cuda_layernorm_backward,                       /* layernorm.cu */
    .matmul_forward = dt__cuda_matmul_forward,                               /* gemm.cu: bias, then gemm */
    .matmul_backward = dt__cuda_matmul_backward,                             /* gemm.cu */
    .attention_forward = dt__cuda_attention_forward,                         /* attention.cu: batched GEMMs */
    .attention_backward = dt__cuda_attention_backward,                       /* attention.cu */
    .gelu_forward = dt__cuda_gelu_forward,                                   /* elementwise.cu */
    .gelu_backward = dt__cuda_gelu_backward,                                 /* elementwise.cu */
    .residual_forward = dt__cuda_residual_forward,                           /* elementwise.cu */
    .crossentropy_forward_backward = dt__cuda_crossentropy_forward_backward, /* crossentropy.cu */
    .crossentropy_part = dt__cuda_crossentropy_part,                         /* crossentropy.cu */
    .sumsq = dt__cuda_sumsq,                                                 /* stats.cu: one span of span_stats */
    .scale = dt__cuda_scale,                                                 /* optim.cu */
    .adamw_update = dt__cuda_adamw_update,                                   /* optim.cu */
    .sgd_update = dt__cuda_sgd_update,                                       /* optim.cu */
    .lars_update = dt__cuda_lars_update,                                     /* optim.cu */
    .lamb_direction = dt__cuda_lamb_direction,                               /* optim.cu */
    .axpy = dt__cuda_axpy,                                                   /* optim.cu */
    .cast = dt__cuda_cast,                                                   /* half.cu: dt_math_hd.h conversions */
    .unscale_check = dt__cuda_unscale_check,                                 /* stats.cu: one span */
    .span_stats = dt__cuda_span_stats,                                       /* stats.cu */
    .batchnorm_forward = dt__cuda_batchnorm_forward,                         /* batchnorm.cu */
    .batchnorm_backward = dt__cuda_batchnorm_backward,                       /* batchnorm.cu */
    .relu_forward = dt__cuda_relu_forward,                                   /* elementwise.cu */
    .relu_backward = dt__cuda_relu_backward,                                 /* elementwise.cu */
    /* attention_chunk_forward, _backward, copy2d: none yet (context parallelism is refused on the GPU) */
    .fp8_quantize = dt__cuda_fp8_quantize, /* fp8.cu: dt_fp8.h's conversion, bit for bit */
    .fp8_gemm = dt__cuda_fp8_gemm,         /* fp8.cu: cuBLASLt; compute capability 8.9 and newer */
};

dt_status dt_backend_cuda_create(int threads, dt_backend **out)
{
    const dt_backend_options opts = {threads, -1};
    return dt_backend_cuda_create_with(&opts, out);
}

/* Creation: every failure path releases what was made so far. */
dt_status dt_backend_cuda_create_with(const dt_backend_options *opts, dt_backend **out)
{
    *out = NULL;
    const dt_backend_options def = {0, -1};
    if (opts == NULL) opts = &def;
    const int threads = opts->threads;
    DT_CHECK(dt__cublas_load()); /* first, so a build without its cuBLAS says so on any machine */
    /* cuBLASLt (the FP8 GEMMs): libcublas depends on it, so it is mapped
     * already; loaded here, on the creating thread, as cuBLAS is */
    DT_CHECK(dt__cublaslt_load());
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return DT_FAIL(DT_ERR_UNSUPPORTED, "--device cuda: no CUDA device (cudaGetDeviceCount: %s)",
                       cudaGetErrorString(e));
    }
    if (count < 1) return DT_FAIL(DT_ERR_UNSUPPORTED, "--device cuda: no CUDA device (cudaGetDeviceCount: 0 devices)");
    /* One GPU per rank on a host: the caller's local rank (the MPI
     * communicator's node-local rank, MPI_COMM_TYPE_SHARED) modulo the
     * devices; without one, the launcher's local rank (Open MPI,
     * MPICH/Hydra, Slurm, torchrun); the current device otherwise
     * (CUDA_VISIBLE_DEVICES still narrows what is seen). */
    int dev = 0;
    DT_CUDA_CHECK(cudaGetDevice(&dev));
    if (opts->local_rank >= 0) {
        dev = opts->local_rank % count;
    } else {
        static const char *const local_rank_vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                                                      "LOCAL_RANK"};
        for (size_t i = 0; i < sizeof local_rank_vars / sizeof local_rank_vars[0]; i++) {
            const char *v = getenv(local_rank_vars[i]);
            if (v && *v) {
                int r = atoi(v);
                dev = (r < 0 ? 0 : r) % count;
                break;
            }
        }
    }

    dt__cuda_impl *im = (dt__cuda_impl *)calloc(1, sizeof *im);
    if (!im) return DT_FAIL(DT_ERR_NOMEM, "cuda backend: out of memory");
    im->device = dev;
    {
        /* the debugging switch, read here once: every launch waits and checks */
        const char *sync = getenv("DT_CUDA_SYNC");
        im->sync_launches = sync && strcmp(sync, "1") == 0;
    }
    dt_backend *be;
    dt_status st = dt__backend_new(&dt__cuda_ops, "cuda", DT_DEVICE_CUDA, im, &be);
    if (st != DT_OK) {
        free(im);
        return st;
    }
    be->row_align = 64; /* the logits' rows: 256-byte FP32 and 128-byte 16-bit rows for the GEMMs */

    cudaDeviceProp prop;
    e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, dev);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        st = DT_FAIL(DT_ERR_UNSUPPORTED, "--device cuda: device %d is not usable: %s", dev, cudaGetErrorString(e));
        goto fail;
    }
    /* the deferred-error slots (cuda_internal.h): a device int for the
     * check kernel's atomicMin, a mapped host record for the report */
    e = cudaMalloc((void **)&im->bad_row, sizeof(unsigned));
    if (e == cudaSuccess) e = cudaHostAlloc((void **)&im->pending, sizeof *im->pending, cudaHostAllocMapped);
    if (e == cudaSuccess) e = cudaHostGetDevicePointer((void **)&im->pending_dev, im->pending, 0);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        st = DT_FAIL(DT_ERR_UNSUPPORTED, "--device cuda: device %d: cannot allocate the error slots: %s", dev,
                     cudaGetErrorString(e));
        goto fail;
    }
    im->pending->row = -1;
    snprintf(im->name, sizeof im->name, "%s", prop.name);
    im->cc_major = prop.major;
    im->cc_minor = prop.minor;
    im->sms = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    {
        cublasStatus_t cs = cublasCreate(&im->cublas);
        if (cs == CUBLAS_STATUS_SUCCESS) cs = cublasSetStream(im->cublas, im->stream);
        /* Exact FP32 unless dt__cuda_set_tf32 says otherwise: the compute
         * type of each GEMM call decides (gemm.cu); the handle's math mode
         * stays the default, which never rounds FP32 inputs to TF32. */
        if (cs == CUBLAS_STATUS_SUCCESS) cs = cublasSetMathMode(im->cublas, CUBLAS_DEFAULT_MATH);
        if (cs != CUBLAS_STATUS_SUCCESS) {
            st = DT_FAIL(DT_ERR_BACKEND, "--device cuda: cuBLAS setup failed on device %d (%s): %s", dev, im->name,
                         cublasGetStatusString(cs));
            goto fail;
        }
    }

    st = be->set_threads(be, threads);
    if (st != DT_OK) goto fail;
    *out = be;
    return DT_OK;

fail:
    dt__cuda_destroy(be);
    return st;
}
