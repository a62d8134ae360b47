/* placeholder */
#include "cpu_backend.h"
dt_status dt__cpu_encoder_forward(dt_backend *be, float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, int C) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
dt_status dt__cpu_encoder_backward(dt_backend *be, float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T, int C) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
dt_status dt__cpu_layernorm_forward(dt_backend *be, float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int N, int C) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
dt_status dt__cpu_layernorm_backward(dt_backend *be, float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w, const float *mean, const float *rstd, int N, int C) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
dt_status dt__cpu_gelu_forward(dt_backend *be, float *out, const float *inp, size_t n) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
dt_status dt__cpu_gelu_backward(dt_backend *be, float *dinp, const float *inp, const float *dout, size_t n) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
dt_status dt__cpu_residual_forward(dt_backend *be, float *out, const float *a, const float *b, size_t n) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
dt_status dt__cpu_crossentropy_forward_backward(dt_backend *be, float *losses, uint8_t *correct, float *dlogits, const float *logits, const int32_t *targets, int N, int V, float dloss) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
