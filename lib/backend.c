/* backend.c: creates backends by name. Core code sees only dt_backend. */
#include <string.h>

#include "dt_backend.h"

dt_status dt_backend_create(const char *name, int threads, dt_backend **out)
{
    *out = NULL;
    if (name == NULL || strcmp(name, "cpu") == 0) return dt_backend_cpu_create(threads, out);
    if (strcmp(name, "cuda") == 0)
        return DT_FAIL(DT_ERR_UNSUPPORTED, "--device cuda: the CUDA backend is not built in this version");
    return DT_FAIL(DT_ERR_INVALID, "--device '%s': unknown backend (expected cpu or cuda)", name);
}

void dt_backend_destroy(dt_backend *be)
{
    if (be && be->destroy) be->destroy(be);
}
