/* cpu_backend.h: the CPU backend's op implementations, one file per op
 * family (cpu_gemm.c, cpu_layers.c, cpu_attention.c, cpu_optim.c),
 * assembled into the table by cpu_backend.c. Internal to the library. */
#ifndef DT_CPU_BACKEND_H
#define DT_CPU_BACKEND_H

#include "dt_backend.h"

/* cpu_gemm.c */
dt_status dt__cpu_gemm(dt_backend *be, int transa, int transb, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc);
dt_status dt__cpu_matmul_forward(dt_backend *be, float *out, const float *inp, const float *w, const float *bias,
                                 int N, int C, int OC);
dt_status dt__cpu_matmul_backward(dt_backend *be, float *dinp, float *dw, float *dbias, const float *dout,
                                  const float *inp, const float *w, int N, int C, int OC);

/* cpu_layers.c */
dt_status dt__cpu_encoder_forward(dt_backend *be, float *out, const int32_t *tokens, const float *wte,
                                  const float *wpe, int B, int T, int C);
dt_status dt__cpu_encoder_backward(dt_backend *be, float *dwte, float *dwpe, const float *dout,
                                   const int32_t *tokens, int B, int T, int C);
dt_status dt__cpu_layernorm_forward(dt_backend *be, float *out, float *mean, float *rstd, const float *inp,
                                    const float *w, const float *b, int N, int C);
dt_status dt__cpu_layernorm_backward(dt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                     const float *inp, const float *w, const float *mean, const float *rstd,
                                     int N, int C);
dt_status dt__cpu_gelu_forward(dt_backend *be, float *out, const float *inp, size_t n);
dt_status dt__cpu_gelu_backward(dt_backend *be, float *dinp, const float *inp, const float *dout, size_t n);
dt_status dt__cpu_residual_forward(dt_backend *be, float *out, const float *a, const float *b, size_t n);
dt_status dt__cpu_crossentropy_forward_backward(dt_backend *be, float *losses, uint8_t *correct, float *dlogits,
                                                const float *logits, const int32_t *targets, int N, int V,
                                                float dloss);

/* cpu_attention.c */
dt_status dt__cpu_attention_forward(dt_backend *be, float *out, float *att, const float *qkv, int B, int T, int C,
                                    int NH);
dt_status dt__cpu_attention_backward(dt_backend *be, float *dqkv, float *scratch, const float *dout,
                                     const float *qkv, const float *att, int B, int T, int C, int NH);

/* cpu_optim.c */
dt_status dt__cpu_sumsq(dt_backend *be, const float *x, size_t n, double *out);
dt_status dt__cpu_scale(dt_backend *be, float *x, float s, size_t n);
dt_status dt__cpu_adamw_update(dt_backend *be, float *p, const float *g, float *m, float *v, size_t n, float lr,
                               float beta1, float beta2, float eps, float wd, float bc1, float bc2,
                               float grad_scale);
dt_status dt__cpu_sgd_update(dt_backend *be, float *p, const float *g, float *buf, size_t n, float lr,
                             float momentum, float wd, float grad_scale, int nesterov, int first);

dt_status dt__cpu_lars_update(dt_backend *be, float *p, const float *g, float *buf, size_t n, float lr, float trust,
                              float momentum, float wd, float grad_scale);
dt_status dt__cpu_lamb_direction(dt_backend *be, float *u, const float *p, const float *g, float *m, float *v,
                                 size_t n, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
                                 float grad_scale);
dt_status dt__cpu_axpy(dt_backend *be, float *y, float a, const float *x, size_t n);

/* cpu_half.c */
dt_status dt__cpu_cast(dt_backend *be, void *dst, dt_dtype dst_type, const void *src, dt_dtype src_type, size_t n);
dt_status dt__cpu_unscale_check(dt_backend *be, float *x, float s, size_t n, int *nonfinite);

/* cpu_batchnorm.c */
dt_status dt__cpu_batchnorm_forward(dt_backend *be, float *out, float *mean, float *rstd, float *running_mean,
                                    float *running_var, const float *inp, const float *w, const float *b, int N,
                                    int C, float momentum, float eps, int training);
dt_status dt__cpu_batchnorm_backward(dt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                     const float *inp, const float *w, const float *mean, const float *rstd, int N,
                                     int C);
dt_status dt__cpu_relu_forward(dt_backend *be, float *out, const float *inp, size_t n);
dt_status dt__cpu_relu_backward(dt_backend *be, float *dinp, const float *inp, const float *dout, size_t n);

#endif
