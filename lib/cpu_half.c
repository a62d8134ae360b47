/* cpu_half.c: placeholder until the mixed-precision ops are implemented. */
#include "cpu_backend.h"
dt_status dt__cpu_cast(dt_backend *be, void *dst, dt_dtype dst_type, const void *src, dt_dtype src_type, size_t n)
{
    return DT_FAIL(DT_ERR_UNSUPPORTED, "cast: not implemented yet");
}
dt_status dt__cpu_unscale_check(dt_backend *be, float *x, float s, size_t n, int *nonfinite)
{
    return DT_FAIL(DT_ERR_UNSUPPORTED, "unscale_check: not implemented yet");
}
