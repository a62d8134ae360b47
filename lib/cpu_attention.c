/* placeholder */
#include "cpu_backend.h"
dt_status dt__cpu_attention_forward(dt_backend *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
dt_status dt__cpu_attention_backward(dt_backend *be, float *dqkv, float *scratch, const float *dout, const float *qkv, const float *att, int B, int T, int C, int NH) { return DT_FAIL(DT_ERR_UNSUPPORTED, "todo"); }
