/* backend.c: creates backends by name. Core code sees only dt_backend.
 * "cuda" is the .cu files of cuda/, or cuda/cuda_none.c (which says the
 * build has no CUDA) in a build without it. */
#include <string.h>

#include "dt_backend.h"

dt_status dt_backend_create(const char *name, int threads, dt_backend **out)
{
    *out = NULL;
    if (name == NULL || strcmp(name, "cpu") == 0) return dt_backend_cpu_create(threads, out);
    if (strcmp(name, "cuda") == 0) return dt_backend_cuda_create(threads, out);
    return DT_FAIL(DT_ERR_INVALID, "--device '%s': unknown backend (expected cpu or cuda)", name);
}

void dt_backend_destroy(dt_backend *be)
{
    if (be && be->destroy) be->destroy(be);
}
