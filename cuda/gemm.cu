/* gemm.cu: GEMM and linear layers on the GPU through cuBLAS.
 *
 * Row-major over column-major: a row-major matrix X (r x c, leading
 * dimension ld) is, read column-major, X^T (c x r, same ld). So the row-major
 * C(M,N) = op(A) op(B) is computed as the column-major
 * C^T(N,M) = op(B)^T op(A)^T, i.e. cuBLAS with the operands swapped, m = N,
 * n = M, and each operand's own transpose flag unchanged.
 *
 * Precision: every GEMM is cublasGemmEx / cublasGemmStridedBatchedEx with
 * FP32 inputs and outputs and CUBLAS_COMPUTE_32F, which never rounds the
 * inputs to TF32; dt__cuda_set_tf32(be, 1) switches to
 * CUBLAS_COMPUTE_32F_FAST_TF32 (tensor cores, ~1e-3 relative error).
 *
 * Mixed precision (set_gemm_inputs F16/BF16): the model promises that the
 * inputs are exactly 16-bit values, so each GEMM casts the spans of A and B
 * it reads to that type (exact) in a workspace of its own and runs
 * cublasGemmEx with 16-bit inputs, FP32 output and CUBLAS_COMPUTE_32F:
 * tensor cores, exact products, FP32 accumulation. (Attention's own
 * probabilities and score gradients are not 16-bit values: the cast rounds
 * them to nearest even, as autocast does; see attention.cu.) An operand
 * inside a range registered by set_gemm_shadow (the model's weights, whose
 * 16-bit copy it makes once per step) is read from that copy: no cast.
 *
 * Linear layers store w as (OC, C) like the CPU backend (cpu_gemm.c): forward
 * out = inp @ w^T with the bias broadcast into out first (beta = 1);
 * backward dinp = dout @ w, dw += dout^T @ inp, dbias += column sums of dout
 * (fixed-order, no atomics: rows split into the row chunks of
 * dt__colsum_plan_for (cuda_plan.h), one (32 columns, chunk) block each, 32
 * row lanes per column combined in lane order into a partial per chunk;
 * then a second pass adds the partials in chunk order). */
#include "cuda_internal.h"

/* C(M,N) with leading dimension ldc, `batch` matrices sC apart: C *= beta,
 * or 0 when beta == 0 (BLAS's rule: C is not read then). */
__global__ void dt__k_scale_matrix(float *C, int M, int N, int ldc, long long sC, int batch, float beta)
{
    size_t total = (size_t)M * N * batch;
    DT__CUDA_FOR(idx, total)
    {
        size_t b = idx / ((size_t)M * N), r = idx % ((size_t)M * N);
        float *c = C + (size_t)b * sC + (r / N) * (size_t)ldc + r % N;
        *c = beta == 0.0f ? 0.0f : beta * *c;
    }
}

/* The registered 16-bit copy of the n floats at p, or NULL: an entry in
 * the GEMM's input type whose range holds all of [p, p + n). */
static const void *dt__cuda_shadow_of(const dt__cuda_impl *im, const float *p, size_t n)
{
    const uintptr_t lo = (uintptr_t)p, hi = lo + n * sizeof(float);
    for (int i = 0; i < DT__CUDA_SHADOWS; i++) {
        const dt__cuda_shadow *s = &im->shadow[i];
        if (!s->f32 || s->dtype != im->gemm_inputs) continue;
        const uintptr_t b = (uintptr_t)s->f32;
        if (lo >= b && hi <= b + s->n * sizeof(float)) return (const char *)s->half + (lo - b) / sizeof(float) * 2;
    }
    return NULL;
}

dt_status dt__cuda_gemm_batched(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha,
                                const float *A, int lda, long long sA, const float *B, int ldb, long long sB,
                                float beta, float *C, int ldc, long long sC, int batch)
{
    /* Sizes are >= 0: the table's gemm and matmul come checked by the front
     * (lib/backend/backend.c), attention passes sizes derived from checked ones. */
    if (M == 0 || N == 0 || batch == 0) return DT_OK;
    dt__cuda_impl *im = DT__CUDA_IMPL(be);
    if (K == 0) {
        size_t total = (size_t)M * N * batch;
        dt__k_scale_matrix<<<dt__cuda_blocks(total, DT__CUDA_THREADS), DT__CUDA_THREADS, 0, im->stream>>>(
            C, M, N, ldc, sC, batch, beta);
        DT_CUDA_LAUNCHED("gemm (K = 0)");
        return DT_OK;
    }
    const cublasOperation_t opA = transa ? CUBLAS_OP_T : CUBLAS_OP_N, opB = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (im->gemm_inputs == DT_F16 || im->gemm_inputs == DT_BF16) {
        /* the elements each operand spans: batch strides, then rows of ld */
        const size_t ea = (size_t)(batch - 1) * (size_t)sA + (size_t)((transa ? K : M) - 1) * lda + (transa ? M : K);
        const size_t eb = (size_t)(batch - 1) * (size_t)sB + (size_t)((transb ? N : K) - 1) * ldb + (transb ? K : N);
        /* a registered 16-bit copy (the weights) is read in place; the rest
         * is cast into the GEMM workspace, A's copy rounded up to 256 bytes
         * so that B's stays aligned */
        const void *ha = dt__cuda_shadow_of(im, A, ea), *hb = dt__cuda_shadow_of(im, B, eb);
        const size_t abytes = ha ? 0 : (ea * 2 + 255) / 256 * 256, bytes = abytes + (hb ? 0 : eb * 2);
        if (bytes > im->gemm_work_bytes) {
            if (im->gemm_work) DT_CUDA_CHECK(cudaFree(im->gemm_work)); /* synchronises: no kernel still reads it */
            im->gemm_work = NULL;
            im->gemm_work_bytes = 0;
            DT_CUDA_CHECK(cudaMalloc(&im->gemm_work, bytes + bytes / 4));
            im->gemm_work_bytes = bytes + bytes / 4;
        }
        if (!ha) {
            DT_CHECK(dt__cuda_cast(be, im->gemm_work, im->gemm_inputs, A, DT_F32, ea));
            ha = im->gemm_work;
        }
        if (!hb) {
            DT_CHECK(dt__cuda_cast(be, (char *)im->gemm_work + abytes, im->gemm_inputs, B, DT_F32, eb));
            hb = (char *)im->gemm_work + abytes;
        }
        const cudaDataType_t ht = im->gemm_inputs == DT_F16 ? CUDA_R_16F : CUDA_R_16BF;
        if (batch == 1)
            DT_CUBLAS_CHECK(cublasGemmEx(im->cublas, opB, opA, N, M, K, &alpha, hb, ht, ldb, ha, ht, lda, &beta, C,
                                         CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        else
            DT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(im->cublas, opB, opA, N, M, K, &alpha, hb, ht, ldb, sB, ha, ht,
                                                       lda, sA, &beta, C, CUDA_R_32F, ldc, sC, batch,
                                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return DT_OK;
    }
    const cublasComputeType_t ct = im->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    if (batch == 1)
        DT_CUBLAS_CHECK(cublasGemmEx(im->cublas, opB, opA, N, M, K, &alpha, B, CUDA_R_32F, ldb, A, CUDA_R_32F, lda,
                                     &beta, C, CUDA_R_32F, ldc, ct, CUBLAS_GEMM_DEFAULT));
    else
        DT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(im->cublas, opB, opA, N, M, K, &alpha, B, CUDA_R_32F, ldb, sB, A,
                                                   CUDA_R_32F, lda, sA, &beta, C, CUDA_R_32F, ldc, sC, batch, ct,
                                                   CUBLAS_GEMM_DEFAULT));
    return DT_OK;
}

dt_status dt__cuda_set_gemm_inputs(dt_backend *be, dt_dtype dtype)
{
    if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "set_gemm_inputs: dtype %d is not f32, f16 or bf16", (int)dtype);
    DT__CUDA_IMPL(be)->gemm_inputs = dtype;
    return DT_OK;
}

dt_status dt__cuda_set_gemm_shadow(dt_backend *be, const float *f32, size_t n, const void *half, dt_dtype dtype)
{
    dt__cuda_impl *im = DT__CUDA_IMPL(be);
    if (!f32) return DT_FAIL(DT_ERR_INVALID, "set_gemm_shadow: no FP32 range");
    int at = -1;
    for (int i = 0; i < DT__CUDA_SHADOWS; i++) {
        if (im->shadow[i].f32 == f32) {
            at = i;
            break;
        }
        if (!im->shadow[i].f32 && at < 0) at = i;
    }
    if (!half) {
        if (at >= 0 && im->shadow[at].f32 == f32) im->shadow[at] = (dt__cuda_shadow){0};
        return DT_OK;
    }
    if (dtype != DT_F16 && dtype != DT_BF16)
        return DT_FAIL(DT_ERR_INVALID, "set_gemm_shadow: dtype %s is not f16 or bf16", dt_dtype_name(dtype));
    if (at < 0)
        return DT_FAIL(DT_ERR_INVALID, "set_gemm_shadow: %d ranges registered already (the most)", DT__CUDA_SHADOWS);
    im->shadow[at] = (dt__cuda_shadow){.f32 = f32, .n = n, .half = half, .dtype = dtype};
    return DT_OK;
}

dt_status dt__cuda_gemm(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    return dt__cuda_gemm_batched(be, transa, transb, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

/* out(N,OC) row i = bias(OC) */
__global__ void dt__k_bias_broadcast(float *out, const float *bias, int N, int OC)
{
    DT__CUDA_FOR(idx, (size_t)N * OC) out[idx] = bias[idx % OC];
}

/* Column sums of dout(N,OC), first pass. Block (32, 32) at (blockIdx.x,
 * blockIdx.y): threadIdx.x is a column of a 32-column slice (a warp reads
 * 128 contiguous bytes of a row), threadIdx.y a row lane summing rows
 * lo + y, lo + y + 32, ... of the block's row chunk [lo, hi) in order; the
 * 32 lane sums are then added in lane order. add = 1 (one chunk): out(OC)
 * += the sum; add = 0: out is the partials (chunks, OC), row blockIdx.y. */
__global__ void dt__k_bias_grad(float *out, const float *dout, int N, int OC, int rows, int add)
{
    __shared__ float part[32][33];
    const int j = blockIdx.x * 32 + threadIdx.x;
    const int lo = blockIdx.y * rows, hi = N - lo < rows ? N : lo + rows; /* no int overflow */
    float acc = 0.0f;
    if (j < OC)
        for (int i = lo + threadIdx.y; i < hi; i += 32) acc += dout[(size_t)i * OC + j];
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < OC) {
        float s = 0.0f;
        for (int r = 0; r < 32; r++) s += part[r][threadIdx.x];
        if (add) out[j] += s;
        else out[(size_t)blockIdx.y * OC + j] = s;
    }
}

/* Second pass: out(C) += the chunks' partials, chunk 0 first. */
__global__ void dt__k_colsum_finish(float *out, const float *part, int chunks, int C)
{
    DT__CUDA_FOR(j, (size_t)C)
    {
        float s = 0.0f;
        for (int y = 0; y < chunks; y++) s += part[(size_t)y * C + j];
        out[j] += s;
    }
}

dt_status dt__cuda_colsum_finish(dt_backend *be, float *out, const float *part, int chunks, int C)
{
    dt__k_colsum_finish<<<dt__cuda_blocks((size_t)C, DT__CUDA_THREADS), DT__CUDA_THREADS, 0, DT__CUDA_STREAM(be)>>>(
        out, part, chunks, C);
    DT_CUDA_LAUNCHED("column sums (second pass)");
    return DT_OK;
}

dt_status dt__cuda_matmul_forward(dt_backend *be, float *out, const float *inp, const float *w, const float *bias,
                                  int N, int C, int OC)
{
    float beta = 0.0f;
    if (bias && N > 0 && OC > 0) {
        size_t n = (size_t)N * OC;
        dt__k_bias_broadcast<<<dt__cuda_blocks(n, DT__CUDA_THREADS), DT__CUDA_THREADS, 0, DT__CUDA_STREAM(be)>>>(
            out, bias, N, OC);
        DT_CUDA_LAUNCHED("matmul bias");
        beta = 1.0f;
    }
    return be->gemm(be, 0, 1, N, OC, C, 1.0f, inp, C, w, C, beta, out, OC);
}

dt_status dt__cuda_matmul_backward(dt_backend *be, float *dinp, float *dw, float *dbias, const float *dout,
                                   const float *inp, const float *w, int N, int C, int OC)
{
    if (dinp) DT_CHECK(be->gemm(be, 0, 0, N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C));
    if (!dw) return DT_OK; /* the input gradient alone (a zero-bubble B) */
    DT_CHECK(be->gemm(be, 1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, C));
    if (dbias && OC > 0 && N > 0) {
        const dt__colsum_plan p = dt__colsum_plan_for(N, OC, DT__CUDA_IMPL(be)->sms);
        float *part = dbias;
        if (p.chunks > 1) DT_CHECK(dt__cuda_workspace(be, (size_t)p.chunks * OC * sizeof(float), (void **)&part));
        dt__k_bias_grad<<<dim3((OC + 31) / 32, p.chunks), dim3(32, 32), 0, DT__CUDA_STREAM(be)>>>(
            part, dout, N, OC, p.rows, p.chunks == 1);
        DT_CUDA_LAUNCHED("matmul bias gradient");
        if (p.chunks > 1) DT_CHECK(dt__cuda_colsum_finish(be, dbias, part, p.chunks, OC));
    }
    return DT_OK;
}
