/* cpu_backend.h: the CPU backend's op implementations, one file per op
 * family (cpu_gemm.c, cpu_layers.c, cpu_attention.c, cpu_optim.c,
 * cpu_half.c, cpu_batchnorm.c), declared with the op types of
 * dt_backend.h and assembled into the static const table by
 * cpu_backend.c. Internal to the library. */
#ifndef DT_CPU_BACKEND_H
#define DT_CPU_BACKEND_H

#include "dt_backend.h"

/* cpu_gemm.c */
dt_backend_gemm_fn dt__cpu_gemm;
dt_backend_matmul_forward_fn dt__cpu_matmul_forward;
dt_backend_matmul_backward_fn dt__cpu_matmul_backward;

/* cpu_layers.c */
dt_backend_encoder_forward_fn dt__cpu_encoder_forward;
dt_backend_encoder_backward_fn dt__cpu_encoder_backward;
dt_backend_layernorm_forward_fn dt__cpu_layernorm_forward;
dt_backend_layernorm_backward_fn dt__cpu_layernorm_backward;
dt_backend_gelu_forward_fn dt__cpu_gelu_forward;
dt_backend_gelu_backward_fn dt__cpu_gelu_backward;
dt_backend_residual_forward_fn dt__cpu_residual_forward;
dt_backend_crossentropy_forward_backward_fn dt__cpu_crossentropy_forward_backward;

/* cpu_attention.c */
dt_backend_attention_forward_fn dt__cpu_attention_forward;
dt_backend_attention_backward_fn dt__cpu_attention_backward;

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
dt_backend_unscale_check_fn dt__cpu_unscale_check;

/* cpu_batchnorm.c */
dt_backend_batchnorm_forward_fn dt__cpu_batchnorm_forward;
dt_backend_batchnorm_backward_fn dt__cpu_batchnorm_backward;
dt_backend_relu_forward_fn dt__cpu_relu_forward;
dt_backend_relu_backward_fn dt__cpu_relu_backward;

#endif
