/* cpu_backend.c: the CPU backend's static const table of ops: memory
 * (64-byte aligned, zeroed), threads (one OpenMP pool; OpenBLAS
 * single-threaded inside it; ops whose split shapes their sums split by
 * be->threads, so set_workers can run them on fewer threads with the same
 * results), and the ops of the cpu_*.c files. It is the
 * reference every other backend is tested against. Arguments reach the
 * ops already checked by the front (backend.c). */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_backend.h"

static void dt__cpu_destroy(dt_backend *be)
{
    dt__cpu_impl *im = be->impl;
    if (im) {
        pthread_mutex_destroy(&im->mu);
        free(im->scratch);
        free(im->fp8_acc);
        free(im);
    }
    free(be);
}

/* ---- room for OpenBLAS's work buffers ----
 * OpenBLAS 0.3 (driver/others/memory.c) gives each thread that runs a GEMM
 * a work buffer from one process-wide table, mapping a new one when none is
 * free, and retries a failed mapping for ever: under `ulimit -v` a run spun
 * at 200% CPU instead of failing (issue 34, D3). Its own threads, started
 * when it loads, each map one as they begin, and exit() waits for them. So
 * the room is checked before a thread first needs a buffer (a mapping of
 * the same size, released at once: DT_ERR_NOMEM when it fails), and the
 * backend's threads then each hold a buffer at the same moment, before the
 * model's allocations, so that no later GEMM has to map one. */

/* BUFFER_SIZE of OpenBLAS's common_<arch>.h: (32 << 22) on x86-64 and
 * arm64, (64 << 22) on POWER. */
#if defined(__powerpc64__)
#define DT__BLAS_BUFFER ((size_t)256 << 20)
#else
#define DT__BLAS_BUFFER ((size_t)128 << 20)
#endif

/* OpenBLAS's buffer table (memory.c); not in cblas.h, so weak: without
 * them (another OpenBLAS) the threads hold nothing and only the room is
 * checked. */
extern void *blas_memory_alloc(int procpos) __attribute__((weak));
extern void blas_memory_free(void *buffer) __attribute__((weak));

/* Threads whose buffers OpenBLAS's table already holds: the table keeps
 * them for the process's life, so this is process-wide too. */
static int dt__cpu_blas_held;
static pthread_mutex_t dt__cpu_blas_mu = PTHREAD_MUTEX_INITIALIZER;

/* Address space for `buffers` more OpenBLAS buffers (each with the page
 * OpenBLAS adds) and `threads` more threads: a thread's default stack and
 * the malloc arena glibc gives a thread at its first malloc (HEAP_MAX_SIZE,
 * 64 MiB on 64-bit systems; a thread's failed arena only falls back to
 * another, but the space it takes is gone). */
static dt_status dt__cpu_room(int buffers, int threads, const char *whose)
{
    if (buffers <= 0 && threads <= 0) return DT_OK;
    size_t stack = (size_t)8 << 20;
    pthread_attr_t a;
    if (pthread_attr_init(&a) == 0) {
        size_t s = 0;
        if (pthread_attr_getstacksize(&a, &s) == 0 && s > 0) stack = s;
        pthread_attr_destroy(&a);
    }
    if (buffers < 0) buffers = 0;
    if (threads < 0) threads = 0;
    const size_t per_buffer = DT__BLAS_BUFFER + ((size_t)1 << 20), per_thread = stack + ((size_t)64 << 20);
    const size_t bytes = per_buffer * (size_t)buffers + per_thread * (size_t)threads;
    /* MAP_NORESERVE: no commit charge under the default overcommit, so
     * only a limit (ulimit -v, overcommit_memory = 2) refuses it */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return DT_FAIL(DT_ERR_NOMEM,
                       "out of memory: no room for %s (%zu MiB of address space for OpenBLAS work buffers and thread "
                       "stacks)",
                       whose, bytes >> 20);
    munmap(p, bytes);
    return DT_OK;
}

const char *dt_backend_cpu_bf16_engine(void) { return dt__cpu_dnnl_probe() ? dt__cpu_dnnl_impl() : NULL; }

dt_status dt_backend_cpu_blas_room(int threads, const char *whose) { return dt__cpu_room(threads, threads, whose); }

/* The threads exist (their stacks are mapped) but may not have mapped
 * their buffers yet: one that maps it later, when the run's allocations
 * have taken the room, spins, and one that maps it between the backend's
 * check and its threads' buffers makes those spin (seen under ulimit -v).
 * So once the room is there, wait until each has its buffer: a threaded
 * saxpy hands a share to every one of them (blas_level1_thread; above
 * OpenBLAS's threshold of at most 200000 elements) and returns when all
 * are done, and a thread takes work only after mapping its buffer. */
dt_status dt_backend_cpu_blas_startup(void)
{
    const int n = openblas_get_num_threads();
    if (n <= 1) return DT_OK;
    DT_CHECK(dt__cpu_room(n - 1, 0, "OpenBLAS's own threads"));
    const size_t len = (size_t)n * 4096 > ((size_t)1 << 18) ? (size_t)n * 4096 : (size_t)1 << 18;
    float *xy = calloc(2 * len, sizeof *xy);
    if (!xy)
        return DT_FAIL(DT_ERR_NOMEM, "out of memory: cannot allocate %zu bytes for OpenBLAS's threads",
                       2 * len * sizeof *xy);
    cblas_saxpy((blasint)len, 1.0f, xy, 1, xy + len, 1);
    free(xy);
    return DT_OK;
}

/* Room for n OpenMP threads' buffers, then each thread takes one and
 * holds it until all have (the barrier): the table then has n buffers, one
 * for each thread that can run a GEMM at the same time (cpu_gemm.c). */
static dt_status dt__cpu_blas_reserve(int n)
{
    pthread_mutex_lock(&dt__cpu_blas_mu);
    dt_status st = DT_OK;
    if (n > dt__cpu_blas_held) {
        /* the calling thread exists already; OpenMP starts the others */
        const int have = dt__cpu_blas_held > 1 ? dt__cpu_blas_held : 1;
        st = dt__cpu_room(n - dt__cpu_blas_held, n - have, "the CPU backend's threads");
        if (st == DT_OK && blas_memory_alloc && blas_memory_free) {
#ifdef _OPENMP
#pragma omp parallel num_threads(n)
#endif
            {
                void *buf = blas_memory_alloc(0);
#ifdef _OPENMP
#pragma omp barrier
#endif
                blas_memory_free(buf);
            }
        }
        if (st == DT_OK) dt__cpu_blas_held = n;
    }
    pthread_mutex_unlock(&dt__cpu_blas_mu);
    return st;
}

/* n <= 0: one thread per core, which goes back through the front so it
 * meets the same limit as an explicit count. */
static dt_status dt__cpu_set_threads(dt_backend *be, int n)
{
    if (n <= 0) {
#ifdef _OPENMP
        return be->set_threads(be, omp_get_num_procs());
#else
        return be->set_threads(be, 1);
#endif
    }
    /* OpenBLAS stays single-threaded: GEMMs are split across OpenMP's
     * threads instead (cpu_gemm.c), so one pool serves every op. */
    openblas_set_num_threads(1);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    DT_CHECK(dt__cpu_blas_reserve(n));
    be->threads = n;
    return DT_OK;
}

/* Fewer threads run the same split (cpu_gemm.c, cpu_layers.c): each op
 * divides its work by be->threads and OpenMP hands the parts to n threads. */
static dt_status dt__cpu_set_workers(dt_backend *be, int n)
{
    (void)be;
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
    return DT_OK;
}

static dt_status dt__cpu_alloc(dt_backend *be, size_t bytes, void **out)
{
    (void)be;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) return DT_FAIL(DT_ERR_NOMEM, "cpu backend: out of memory: cannot allocate %zu bytes", bytes);
    memset(p, 0, rounded);
    *out = p;
    return DT_OK;
}

static void dt__cpu_free(dt_backend *be, void *p)
{
    (void)be;
    free(p);
}

static dt_status dt__cpu_memset_zero(dt_backend *be, void *p, size_t bytes)
{
    (void)be;
    if (bytes) memset(p, 0, bytes);
    return DT_OK;
}

static dt_status dt__cpu_copy(dt_backend *be, void *dst, const void *src, size_t bytes, dt_copy_kind kind)
{
    (void)be;
    (void)kind; /* host and device memory are the same on the CPU */
    if (bytes && dst != src) memmove(dst, src, bytes);
    return DT_OK;
}

static dt_status dt__cpu_synchronize(dt_backend *be)
{
    (void)be;
    return DT_OK;
}

static const dt_backend_ops dt__cpu_ops = {
    .destroy = dt__cpu_destroy,                       /* frees impl's scratch, impl and be */
    .set_threads = dt__cpu_set_threads,               /* OpenMP pool; OpenBLAS single-threaded */
    .set_workers = dt__cpu_set_workers,               /* OpenMP's count; the ops split by be->threads */
    .alloc = dt__cpu_alloc,                           /* aligned_alloc(64), zeroed */
    .free = dt__cpu_free,                             /* free() */
    .memset_zero = dt__cpu_memset_zero,               /* memset */
    .copy = dt__cpu_copy,                             /* memmove: host and device memory are one */
    .synchronize = dt__cpu_synchronize,               /* nothing is queued: no-op */
    .set_gemm_inputs = dt__cpu_set_gemm_inputs,       /* cpu_gemm.c: bf16 GEMMs on oneDNN where it has them */
    .set_gemm_shadow = dt__cpu_set_gemm_shadow,       /* cpu_gemm.c: bf16 weights read in place */
    .gemm = dt__cpu_gemm,                             /* cpu_gemm.c: OpenBLAS per block of rows */
    .encoder_forward = dt__cpu_encoder_forward,       /* cpu_layers.c */
    .encoder_backward = dt__cpu_encoder_backward,     /* cpu_layers.c: channel slices */
    .layernorm_forward = dt__cpu_layernorm_forward,   /* cpu_layers.c */
    .layernorm_backward = dt__cpu_layernorm_backward, /* cpu_layers.c: per-thread partials */
    .matmul_forward = dt__cpu_matmul_forward,         /* cpu_gemm.c: bias, then gemm */
    .matmul_backward = dt__cpu_matmul_backward,       /* cpu_gemm.c */
    .attention_forward = dt__cpu_attention_forward,   /* cpu_attention.c: one (b, h) per task */
    .attention_backward = dt__cpu_attention_backward, /* cpu_attention.c */
    .attention_chunk_forward = dt__cpu_attention_chunk_forward,   /* cpu_attention.c */
    .attention_chunk_backward = dt__cpu_attention_chunk_backward, /* cpu_attention.c */
    .copy2d = dt__cpu_copy2d,                                     /* cpu_attention.c */
    .fp8_quantize = dt__cpu_fp8_quantize, /* cpu_fp8.c: FP8 values held in floats */
    .fp8_gemm = dt__cpu_fp8_gemm,         /* cpu_fp8.c: the bf16 gemm on them */
    .gelu_forward = dt__cpu_gelu_forward,             /* cpu_layers.c */
    .gelu_backward = dt__cpu_gelu_backward,           /* cpu_layers.c */
    .residual_forward = dt__cpu_residual_forward,     /* cpu_layers.c */
    .crossentropy_forward_backward = dt__cpu_crossentropy_forward_backward, /* cpu_layers.c: checks the targets */
    .crossentropy_part = dt__cpu_crossentropy_part,                         /* cpu_layers.c: vocabulary-parallel */
    .sumsq = dt__cpu_sumsq,                                                 /* cpu_optim.c: fixed chunks in double */
    .scale = dt__cpu_scale,                                                 /* cpu_optim.c */
    .adamw_update = dt__cpu_adamw_update,                                   /* cpu_optim.c */
    .sgd_update = dt__cpu_sgd_update,                                       /* cpu_optim.c */
    .lars_update = dt__cpu_lars_update,                                     /* cpu_optim.c */
    .lamb_direction = dt__cpu_lamb_direction,                               /* cpu_optim.c */
    .axpy = dt__cpu_axpy,                                                   /* cpu_optim.c */
    .cast = dt__cpu_cast,                                                   /* cpu_half.c: half.c array conversions */
    .round = dt__cpu_round,                                                 /* cpu_half.c: one pass, in place */
    .round_bf16 = dt__cpu_round_bf16,                                       /* cpu_half.c: round + copy */
    .gelu_forward_bf16 = dt__cpu_gelu_forward_bf16,                         /* cpu_half.c: fused */
    .gelu_backward_bf16 = dt__cpu_gelu_backward_bf16,                       /* cpu_half.c: fused */
    .unscale_check = dt__cpu_unscale_check,                                 /* cpu_half.c */
    .batchnorm_forward = dt__cpu_batchnorm_forward,                         /* cpu_batchnorm.c: double sums */
    .batchnorm_backward = dt__cpu_batchnorm_backward,                       /* cpu_batchnorm.c */
    .relu_forward = dt__cpu_relu_forward,                                   /* cpu_batchnorm.c */
    .relu_backward = dt__cpu_relu_backward,                                 /* cpu_batchnorm.c */
};

dt_status dt_backend_cpu_create(int threads, dt_backend **out)
{
    *out = NULL;
    dt__cpu_impl *im = calloc(1, sizeof *im);
    if (!im) return DT_FAIL(DT_ERR_NOMEM, "cpu backend: out of memory");
    im->gemm_inputs = DT_F32;
    im->bf16_gemm = dt__cpu_dnnl_probe();
    pthread_mutex_init(&im->mu, NULL);
    dt_backend *be;
    dt_status st = dt__backend_new(&dt__cpu_ops, "cpu", DT_DEVICE_CPU, im, &be);
    if (st != DT_OK) {
        pthread_mutex_destroy(&im->mu);
        free(im);
        return st;
    }
    st = be->set_threads(be, threads);
    if (st != DT_OK) {
        dt__cpu_destroy(be);
        return st;
    }
    *out = be;
    return DT_OK;
}
