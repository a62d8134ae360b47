/* cpu_backend.h: the CPU backend's op implementations, one file per op
 * family (cpu_gemm.c, cpu_layers.c, cpu_attention.c, cpu_optim.c,
 * cpu_half.c, cpu_batchnorm.c), declared with the op types of
 * dt_backend.h and assembled into the static const table by
 * cpu_backend.c. Internal to the library. */
#ifndef DT_CPU_BACKEND_H
#define DT_CPU_BACKEND_H

#include <pthread.h>
#include <stdint.h>

#include "dt_backend.h"

/* be->impl: the mixed-precision state (set_gemm_inputs, set_gemm_shadow)
 * and the scratch where cpu_gemm.c casts GEMM operands to bf16. */
#define DT__CPU_SHADOWS 8
typedef struct dt__cpu_shadow {
    const float *f32; /* NULL: a free slot */
    size_t n;
    const void *half;
    dt_dtype dtype;
} dt__cpu_shadow;
typedef struct dt__cpu_impl {
    dt_dtype gemm_inputs; /* DT_F32, or DT_BF16 while the model promises bf16 values */
    int bf16_gemm;        /* 1: bf16 GEMMs run on oneDNN (dt__cpu_dnnl_probe) */
    dt__cpu_shadow shadow[DT__CPU_SHADOWS];
    pthread_mutex_t mu; /* one GEMM at a time uses the scratch */
    uint16_t *scratch;  /* (cap) bf16 operands */
    size_t cap;
    float *fp8_acc;     /* (fp8_cap) cpu_fp8.c: an FP8 GEMM's unscaled result before it is added */
    size_t fp8_cap;
} dt__cpu_impl;

/* cpu_gemm.c */
dt_backend_gemm_fn dt__cpu_gemm;
dt_backend_matmul_forward_fn dt__cpu_matmul_forward;
dt_backend_matmul_backward_fn dt__cpu_matmul_backward;

dt_backend_set_gemm_inputs_fn dt__cpu_set_gemm_inputs;
dt_backend_set_gemm_shadow_fn dt__cpu_set_gemm_shadow;

/* cpu_dnnl.c (oneDNN) or cpu_dnnl_none.c: C(M,N) = alpha op(A) op(B) +
 * beta C with bf16 A and B, FP32 accumulation and C, on the calling thread
 * only; probe: 1 when oneDNN runs bf16 matmuls with a real kernel here;
 * impl: the name of oneDNN's implementation ("brg:avx512_core_amx_bf16"). */
dt_status dt__cpu_dnnl_gemm_bf16(int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                                 const uint16_t *B, int ldb, float beta, float *C, int ldc);
int dt__cpu_dnnl_probe(void);
const char *dt__cpu_dnnl_impl(void);

/* cpu_fp8.c */
dt_backend_fp8_quantize_fn dt__cpu_fp8_quantize;
dt_backend_fp8_gemm_fn dt__cpu_fp8_gemm;

/* cpu_layers.c */
dt_backend_encoder_forward_fn dt__cpu_encoder_forward;
dt_backend_encoder_backward_fn dt__cpu_encoder_backward;
dt_backend_layernorm_forward_fn dt__cpu_layernorm_forward;
dt_backend_layernorm_backward_fn dt__cpu_layernorm_backward;
dt_backend_gelu_forward_fn dt__cpu_gelu_forward;
dt_backend_gelu_backward_fn dt__cpu_gelu_backward;
dt_backend_residual_forward_fn dt__cpu_residual_forward;
dt_backend_crossentropy_forward_backward_fn dt__cpu_crossentropy_forward_backward;
dt_backend_crossentropy_part_fn dt__cpu_crossentropy_part;

/* cpu_attention.c */
dt_backend_attention_forward_fn dt__cpu_attention_forward;
dt_backend_attention_backward_fn dt__cpu_attention_backward;
/* cpu_attention.c */
dt_backend_attention_chunk_forward_fn dt__cpu_attention_chunk_forward;
dt_backend_attention_chunk_backward_fn dt__cpu_attention_chunk_backward;
dt_backend_copy2d_fn dt__cpu_copy2d;

/* cpu_optim.c */
dt_backend_sumsq_fn dt__cpu_sumsq;
dt_backend_scale_fn dt__cpu_scale;
dt_backend_adamw_update_fn dt__cpu_adamw_update;
dt_backend_sgd_update_fn dt__cpu_sgd_update;
dt_backend_lars_update_fn dt__cpu_lars_update;
dt_backend_lamb_direction_fn dt__cpu_lamb_direction;
dt_backend_axpy_fn dt__cpu_axpy;

/* cpu_half.c */
dt_backend_cast_fn dt__cpu_cast;
dt_backend_round_fn dt__cpu_round;
dt_backend_round_bf16_fn dt__cpu_round_bf16;
dt_backend_gelu_forward_bf16_fn dt__cpu_gelu_forward_bf16;
dt_backend_gelu_backward_bf16_fn dt__cpu_gelu_backward_bf16;
dt_backend_unscale_check_fn dt__cpu_unscale_check;

/* cpu_batchnorm.c */
dt_backend_batchnorm_forward_fn dt__cpu_batchnorm_forward;
dt_backend_batchnorm_backward_fn dt__cpu_batchnorm_backward;
dt_backend_relu_forward_fn dt__cpu_relu_forward;
dt_backend_relu_backward_fn dt__cpu_relu_backward;

#endif
