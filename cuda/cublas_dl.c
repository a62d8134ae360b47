/* cublas_dl.c: opens cuBLAS on first use and fills dt__cublas, and
 * cuBLASLt for dt__cublaslt (see cublas_dl.h for why). Compiled only in
 * CUDA builds. */
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
dt__cublaslt_api dt__cublaslt;
static int dt__cublaslt_loaded;

#define DT__STR2(x) #x
#define DT__STR(x) DT__STR2(x)
#define DT__CUBLAS_SONAME "libcublas.so." DT__STR(CUBLAS_VER_MAJOR)
#define DT__CUBLASLT_SONAME "libcublasLt.so." DT__STR(CUBLAS_VER_MAJOR) /* cuBLASLt shares cuBLAS's version */

/* dlsym's void * to a function pointer, through memcpy (ISO C has no cast between them). */
static dt_status dt__dl_sym(void *lib, const char *soname, const char *name, void *slot, size_t size)
{
    void *p = dlsym(lib, name);
    if (!p) return DT_FAIL(DT_ERR_BACKEND, "--device cuda: %s has no %s (%s)", soname, name, dlerror());
    memcpy(slot, &p, size);
    return DT_OK;
}

/* soname on the loader's path, then in configure's toolkit folder */
static void *dt__dl_open(const char *soname, const char *path)
{
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib && path) lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    return lib;
}

#ifdef DT_CUDA_LIBDIR
#define DT__LIBPATH(soname) DT_CUDA_LIBDIR "/" soname
#else
#define DT__LIBPATH(soname) NULL
#endif

dt_status dt__cublas_load(void)
{
    if (dt__cublas_loaded) return DT_OK;
    void *lib = dt__dl_open(DT__CUBLAS_SONAME, DT__LIBPATH(DT__CUBLAS_SONAME));
    if (!lib) return DT_FAIL(DT_ERR_BACKEND, "--device cuda: cannot load %s (%s)", DT__CUBLAS_SONAME, dlerror());
    dt__cublas_api t;
#define DT__SYM(member, name) DT_CHECK(dt__dl_sym(lib, DT__CUBLAS_SONAME, name, &t.member, sizeof t.member))
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

dt_status dt__cublaslt_load(void)
{
    if (dt__cublaslt_loaded) return DT_OK;
    void *lib = dt__dl_open(DT__CUBLASLT_SONAME, DT__LIBPATH(DT__CUBLASLT_SONAME));
    if (!lib) return DT_FAIL(DT_ERR_BACKEND, "--device cuda: cannot load %s (%s)", DT__CUBLASLT_SONAME, dlerror());
    dt__cublaslt_api t;
#define DT__SYM(member) DT_CHECK(dt__dl_sym(lib, DT__CUBLASLT_SONAME, "cublasLt" #member, &t.member, sizeof t.member))
    DT__SYM(Create);
    DT__SYM(Destroy);
    DT__SYM(MatmulDescCreate);
    DT__SYM(MatmulDescDestroy);
    DT__SYM(MatmulDescSetAttribute);
    DT__SYM(MatrixLayoutCreate);
    DT__SYM(MatrixLayoutDestroy);
    DT__SYM(MatmulPreferenceCreate);
    DT__SYM(MatmulPreferenceDestroy);
    DT__SYM(MatmulPreferenceSetAttribute);
    DT__SYM(MatmulAlgoGetHeuristic);
    DT__SYM(Matmul);
#undef DT__SYM
    dt__cublaslt = t; /* open for the process's life, as cuBLAS */
    dt__cublaslt_loaded = 1;
    return DT_OK;
}
