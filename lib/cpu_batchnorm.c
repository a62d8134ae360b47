/* cpu_batchnorm.c: placeholder until BatchNorm and ReLU are implemented. */
#include "cpu_backend.h"
dt_status dt__cpu_batchnorm_forward(dt_backend *be, float *out, float *mean, float *rstd, float *running_mean,
                                    float *running_var, const float *inp, const float *w, const float *b, int N,
                                    int C, float momentum, float eps, int training)
{
    return DT_FAIL(DT_ERR_UNSUPPORTED, "batchnorm: not implemented yet");
}
dt_status dt__cpu_batchnorm_backward(dt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                     const float *inp, const float *w, const float *mean, const float *rstd, int N,
                                     int C)
{
    return DT_FAIL(DT_ERR_UNSUPPORTED, "batchnorm: not implemented yet");
}
dt_status dt__cpu_relu_forward(dt_backend *be, float *out, const float *inp, size_t n)
{
    return DT_FAIL(DT_ERR_UNSUPPORTED, "relu: not implemented yet");
}
dt_status dt__cpu_relu_backward(dt_backend *be, float *dinp, const float *inp, const float *dout, size_t n)
{
    return DT_FAIL(DT_ERR_UNSUPPORTED, "relu: not implemented yet");
}
