/* placeholder */
#include "cpu_backend.h"
dt_status dt__cpu_sumsq(dt_backend *be, const float *x, size_t n, double *out) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
dt_status dt__cpu_scale(dt_backend *be, float *x, float s, size_t n) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
dt_status dt__cpu_adamw_update(dt_backend *be, float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2, float grad_scale) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
dt_status dt__cpu_sgd_update(dt_backend *be, float *p, const float *g, float *buf, size_t n, float lr, float momentum, float wd, float grad_scale, int nesterov, int first) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
