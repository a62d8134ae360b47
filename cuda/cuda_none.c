/* cuda_none.c: the CUDA entry points of a build without CUDA (configure
 * found no toolkit, or --without-cuda). Each says so in one line and
 * returns DT_ERR_UNSUPPORTED; the real backend is the .cu files of cuda/
 * and the NCCL communicator cuda/comm_nccl.c. */
#include "dt_backend.h"
#include "dt_comm.h"
#include "dt_cuda.h"

#define DT__NO_CUDA                                                                                             \
    "--device cuda: this dtrain was built without CUDA (configure found no CUDA toolkit in /usr/local/cuda or " \
    "was given --without-cuda; re-run ./configure --with-cuda[=DIR])"

dt_status dt_backend_cuda_create(int threads, dt_backend **out)
{
    (void)threads;
    if (out) *out = NULL;
    return DT_FAIL(DT_ERR_UNSUPPORTED, DT__NO_CUDA);
}

dt_status dt_backend_cuda_create_with(const dt_backend_options *opts, dt_backend **out)
{
    (void)opts;
    if (out) *out = NULL;
    return DT_FAIL(DT_ERR_UNSUPPORTED, DT__NO_CUDA);
}

dt_status dt__cuda_set_tf32(dt_backend *be, int allow_tf32)
{
    (void)be;
    (void)allow_tf32;
    return DT_FAIL(DT_ERR_UNSUPPORTED, DT__NO_CUDA);
}

dt_status dt__cuda_gelu_forward_half(dt_backend *be, void *out, const void *in, dt_dtype dtype, size_t n)
{
    (void)be, (void)out, (void)in, (void)dtype, (void)n;
    return DT_FAIL(DT_ERR_UNSUPPORTED, DT__NO_CUDA);
}

void *dt__cuda_stream(dt_backend *be)
{
    (void)be;
    return NULL;
}

int dt__cuda_device(const dt_backend *be)
{
    (void)be;
    return -1;
}

dt_status dt_comm_nccl_create(dt_comm *host, dt_backend *be, dt_comm **out)
{
    (void)host, (void)be;
    if (out) *out = NULL;
    return DT_FAIL(DT_ERR_UNSUPPORTED, "NCCL communicator: this dtrain was built without CUDA (re-run ./configure "
                                       "--with-cuda[=DIR])");
}
