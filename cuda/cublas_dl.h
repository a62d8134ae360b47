/* cublas_dl.h: cuBLAS loaded at run time (cuda/cublas_dl.c), never installed.
 *
 * Linking libcublas (with libcublasLt) costs every process of a CUDA build
 * 0.15 s and 217 MB of resident memory at start, CPU runs included: the
 * loader applies its hundreds of thousands of relocations before main().
 * So the library is opened with dlopen when the CUDA backend or the NCCL
 * communicator is created (dt__cublas_load), and the few functions dtrain
 * calls go through a table. After this header, the usual names
 * (cublasCreate, cublasGemmEx, ...) are that table's members: the backend's
 * code reads as plain cuBLAS.
 *
 * cuBLASLt (libcublasLt.so.<major>, which libcublas itself depends on, so
 * it is already mapped once cuBLAS is) is opened the same way for the FP8
 * GEMMs (cuda/fp8.cu): dt__cublaslt_load fills a second table of the
 * twelve cublasLt functions they call, under their usual names too.
 *
 * Invariants: a name below is called only after dt__cublas_load (or, for
 * the cublasLt names, dt__cublaslt_load) returned DT_OK (a CUDA backend
 * that exists has loaded both; the NCCL communicator loads cuBLAS); each
 * table is filled once, by its first load, on the thread creating
 * backends. */
#ifndef DT_CUBLAS_DL_H
#define DT_CUBLAS_DL_H

/* cublasLt.h declares one function without a prototype (an empty
 * parameter list), which the library's C warnings flag */
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#endif
#include <cublasLt.h>
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic pop
#endif
#include <cublas_v2.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt__cublas_api {
    __typeof__(&cublasCreate_v2) Create;
    __typeof__(&cublasDestroy_v2) Destroy;
    __typeof__(&cublasSetStream_v2) SetStream;
    __typeof__(&cublasSetMathMode) SetMathMode;
    __typeof__(&cublasSetPointerMode_v2) SetPointerMode;
    /* spelled out: C++ sees overloads of these two (cublasComputeType_t or cudaDataType) */
    cublasStatus_t (*GemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                             const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                             cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    cublasStatus_t (*GemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                           const void *, const void *, cudaDataType, int, long long int,
                                           const void *, cudaDataType, int, long long int, const void *, void *,
                                           cudaDataType, int, long long int, int, cublasComputeType_t,
                                           cublasGemmAlgo_t);
    __typeof__(&cublasSaxpy_v2) Saxpy;
    __typeof__(&cublasGetStatusString) GetStatusString;
    __typeof__(&cublasGetStatusName) GetStatusName;
} dt__cublas_api;

extern dt__cublas_api dt__cublas;

/* cuBLASLt: what the FP8 GEMMs call (cuda/fp8.cu) */
typedef struct dt__cublaslt_api {
    __typeof__(&cublasLtCreate) Create;
    __typeof__(&cublasLtDestroy) Destroy;
    __typeof__(&cublasLtMatmulDescCreate) MatmulDescCreate;
    __typeof__(&cublasLtMatmulDescDestroy) MatmulDescDestroy;
    __typeof__(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
    __typeof__(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
    __typeof__(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
    __typeof__(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
    __typeof__(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
    __typeof__(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
    __typeof__(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
    __typeof__(&cublasLtMatmul) Matmul;
} dt__cublaslt_api;

extern dt__cublaslt_api dt__cublaslt;

/* Opens libcublas.so.<major of the headers> (the loader's search path,
 * then the toolkit's lib64 that configure found) and resolves the table.
 * DT_ERR_BACKEND naming the library or the symbol when it cannot. */
dt_status dt__cublas_load(void);
/* Opens libcublasLt.so.<major of the headers> the same way and resolves
 * its table. DT_ERR_BACKEND naming the library or the symbol. */
dt_status dt__cublaslt_load(void);

#ifdef __cplusplus
}
#endif

#undef cublasCreate
#undef cublasDestroy
#undef cublasSetStream
#undef cublasSetPointerMode
#undef cublasSaxpy
#define cublasCreate dt__cublas.Create
#define cublasDestroy dt__cublas.Destroy
#define cublasSetStream dt__cublas.SetStream
#define cublasSetMathMode dt__cublas.SetMathMode
#define cublasSetPointerMode dt__cublas.SetPointerMode
#define cublasGemmEx dt__cublas.GemmEx
#define cublasGemmStridedBatchedEx dt__cublas.GemmStridedBatchedEx
#define cublasSaxpy dt__cublas.Saxpy
#define cublasGetStatusString dt__cublas.GetStatusString
#define cublasGetStatusName dt__cublas.GetStatusName
#define cublasLtCreate dt__cublaslt.Create
#define cublasLtDestroy dt__cublaslt.Destroy
#define cublasLtMatmulDescCreate dt__cublaslt.MatmulDescCreate
#define cublasLtMatmulDescDestroy dt__cublaslt.MatmulDescDestroy
#define cublasLtMatmulDescSetAttribute dt__cublaslt.MatmulDescSetAttribute
#define cublasLtMatrixLayoutCreate dt__cublaslt.MatrixLayoutCreate
#define cublasLtMatrixLayoutDestroy dt__cublaslt.MatrixLayoutDestroy
#define cublasLtMatmulPreferenceCreate dt__cublaslt.MatmulPreferenceCreate
#define cublasLtMatmulPreferenceDestroy dt__cublaslt.MatmulPreferenceDestroy
#define cublasLtMatmulPreferenceSetAttribute dt__cublaslt.MatmulPreferenceSetAttribute
#define cublasLtMatmulAlgoGetHeuristic dt__cublaslt.MatmulAlgoGetHeuristic
#define cublasLtMatmul dt__cublaslt.Matmul

#endif
