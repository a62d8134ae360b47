/* cpu_dnnl_none.c: the CPU backend without oneDNN (configure found no
 * libdnnl-dev): no 16-bit GEMMs, so the backend's GEMMs stay FP32
 * (OpenBLAS) whatever set_gemm_inputs promises; cpu_dnnl.c is the real
 * one. */
#include "cpu_backend.h"

dt_status dt__cpu_dnnl_gemm_bf16(int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                                 const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    (void)transa, (void)transb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
    return DT_FAIL(DT_ERR_UNSUPPORTED, "this dtrain was built without oneDNN (libdnnl-dev): no bf16 GEMMs");
}

int dt__cpu_dnnl_probe(void) { return 0; }

const char *dt__cpu_dnnl_impl(void) { return "none (built without oneDNN)"; }
