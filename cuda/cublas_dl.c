/* cublas_dl.c: opens cuBLAS on first use and fills dt__cublas (see
 * cublas_dl.h for why). Compiled only in CUDA builds. */
#define _POSIX_C_SOURCE 200809L
#ifdef HAVE_CONFIG_H
#include "config.h" /* DT_CUDA_LIBDIR */
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cublas_dl.h"
#include "dt_internal.h"

dt__cublas_api dt__cublas;
static int dt__cublas_loaded;

#define DT__STR2(x) #x
#define DT__STR(x) DT__STR2(x)
#define DT__CUBLAS_SONAME "libcublas.so." DT__STR(CUBLAS_VER_MAJOR)

/* dlsym's void * to a function pointer, through memcpy (ISO C has no cast between them). */
static dt_status dt__cublas_sym(void *lib, const char *name, void *slot, size_t size)
{
    void *p = dlsym(lib, name);
    if (!p) return DT_FAIL(DT_ERR_BACKEND, "--device cuda: %s has no %s (%s)", DT__CUBLAS_SONAME, name, dlerror());
    memcpy(slot, &p, size);
    return DT_OK;
}

dt_status dt__cublas_load(void)
{
    if (dt__cublas_loaded) return DT_OK;
    void *lib = dlopen(DT__CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
#ifdef DT_CUDA_LIBDIR
    if (!lib) lib = dlopen(DT_CUDA_LIBDIR "/" DT__CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!lib) return DT_FAIL(DT_ERR_BACKEND, "--device cuda: cannot load %s (%s)", DT__CUBLAS_SONAME, dlerror());
    dt__cublas_api t;
#define DT__SYM(member, name) DT_CHECK(dt__cublas_sym(lib, name, &t.member, sizeof t.member))
    DT__SYM(Create, "cublasCreate_v2");
    DT__SYM(Destroy, "cublasDestroy_v2");
    DT__SYM(SetStream, "cublasSetStream_v2");
    DT__SYM(SetMathMode, "cublasSetMathMode");
    DT__SYM(SetPointerMode, "cublasSetPointerMode_v2");
    DT__SYM(GemmEx, "cublasGemmEx");
    DT__SYM(GemmStridedBatchedEx, "cublasGemmStridedBatchedEx");
    DT__SYM(Saxpy, "cublasSaxpy_v2");
    DT__SYM(GetStatusString, "cublasGetStatusString");
    DT__SYM(GetStatusName, "cublasGetStatusName");
#undef DT__SYM
    dt__cublas = t; /* the library stays open for the process's life */
    dt__cublas_loaded = 1;
    return DT_OK;
}
