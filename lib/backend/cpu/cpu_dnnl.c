/* cpu_dnnl.c: 16-bit GEMMs on the CPU's own matrix units through oneDNN
 * (Intel AMX tiles, AVX512-BF16), for the CPU backend's mixed precision
 * (cpu_gemm.c; set_gemm_inputs in dt_backend.h). Built when configure
 * finds oneDNN (libdnnl-dev); cpu_dnnl_none.c otherwise.
 *
 * One call computes C(M,N) = alpha op(A) op(B) + beta C with A and B in
 * bf16, products exact and sums in FP32 (the matmul primitive's f32
 * accumulator), C in FP32, on the calling thread only: oneDNN's OpenMP
 * runtime sees a thread count of 1 while the primitive is made and run
 * (omp_set_num_threads(1) in the caller's data environment, restored
 * after), so each block of cpu_gemm.c's split is one thread's, and the
 * result depends on the block's shape only, never on timing or on the
 * worker count (the backend's invariant).
 *
 * Invariants: primitives are cached by shape, transposes, leading
 * dimensions, alpha and beta (DT__DNNL_CACHE entries, least recently
 * made replaced) and are used only if oneDNN implements them with a real
 * kernel: a reference implementation ("ref" in its name; bf16 on a CPU
 * without AVX-512) is refused once, at dt__cpu_dnnl_probe, and the
 * backend keeps its FP32 GEMMs. Scratchpads are the caller's (user mode),
 * one per OpenMP thread number, grown as needed; primitives are never
 * run with oneDNN's shared scratchpad. Every oneDNN call goes through
 * DT__DNNL_CHECK (file:line and oneDNN's status). */
#define _GNU_SOURCE
#include <dnnl.h>
#include <dnnl_debug.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_backend.h"

#define DT__DNNL_CACHE 64
#define DT__DNNL_SLOTS 256 /* scratchpads: one per OpenMP thread number */

#define DT__DNNL_CHECK(call)                                                                             \
    do {                                                                                                 \
        const dnnl_status_t dt__s = (call);                                                              \
        if (dt__s != dnnl_success)                                                                       \
            return DT_FAIL(DT_ERR_BACKEND, "oneDNN: %s failed at %s:%d (%s)", #call, __FILE__, __LINE__, \
                           dnnl_status2str(dt__s));                                                      \
    } while (0)

typedef struct dt__dnnl_key {
    int transa, transb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
} dt__dnnl_key;

typedef struct dt__dnnl_entry {
    dt__dnnl_key key;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, c, scratch;
    size_t scratch_bytes;
    unsigned long made;
} dt__dnnl_entry;

static pthread_mutex_t dt__dnnl_mu = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t dt__dnnl_engine;
static int dt__dnnl_state; /* 0 not probed, 1 usable, -1 not */
static char dt__dnnl_impl[128] = "none";
static dt__dnnl_entry dt__dnnl_cache[DT__DNNL_CACHE];
static unsigned long dt__dnnl_made;
static void *dt__dnnl_scratch[DT__DNNL_SLOTS];
static size_t dt__dnnl_scratch_cap[DT__DNNL_SLOTS];

/* Run f with oneDNN seeing one thread (see the top). */
#ifdef _OPENMP
#define DT__DNNL_ONE_THREAD_BEGIN                        \
    const int dt__saved_threads = omp_get_max_threads(); \
    omp_set_num_threads(1);
#define DT__DNNL_ONE_THREAD_END omp_set_num_threads(dt__saved_threads);
#else
#define DT__DNNL_ONE_THREAD_BEGIN
#define DT__DNNL_ONE_THREAD_END
#endif

/* A (rows, cols) matrix of type t with row stride ld (trans: stored
 * transposed, (cols, rows) with row stride ld). */
static dt_status dt__dnnl_md(dnnl_memory_desc_t *md, int rows, int cols, int ld, int trans, dnnl_data_type_t t)
{
    const dnnl_dims_t dims = {rows, cols};
    const dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    DT__DNNL_CHECK(dnnl_memory_desc_init_by_strides(md, 2, dims, t, strides));
    return DT_OK;
}

/* Make the primitive for key (the caller holds the mutex and one thread). */
static dt_status dt__dnnl_make(const dt__dnnl_key *k, dt__dnnl_entry *e)
{
    memset(e, 0, sizeof *e);
    e->key = *k;
    DT_CHECK(dt__dnnl_md(&e->a, k->M, k->K, k->lda, k->transa, dnnl_bf16));
    DT_CHECK(dt__dnnl_md(&e->b, k->K, k->N, k->ldb, k->transb, dnnl_bf16));
    DT_CHECK(dt__dnnl_md(&e->c, k->M, k->N, k->ldc, 0, dnnl_f32));
    dnnl_matmul_desc_t desc;
    DT__DNNL_CHECK(dnnl_matmul_desc_init(&desc, &e->a, &e->b, NULL, &e->c));
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_primitive_attr_create(&attr);
    if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success && k->alpha != 1.0f) s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha);
    if (s == dnnl_success && k->beta != 0.0f) {
        s = dnnl_post_ops_create(&po);
        if (s == dnnl_success) s = dnnl_post_ops_append_sum(po, k->beta);
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &desc, attr, dt__dnnl_engine, NULL);
    if (s == dnnl_success) s = dnnl_primitive_create(&e->prim, pd);
    if (s == dnnl_success) {
        const dnnl_memory_desc_t *sm = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (sm) e->scratch = *sm;
        e->scratch_bytes = sm ? dnnl_memory_desc_get_size(sm) : 0;
        const char *impl = NULL;
        if (dt__dnnl_state == 0 && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
            impl)
            snprintf(dt__dnnl_impl, sizeof dt__dnnl_impl, "%s", impl);
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) {
        e->prim = NULL;
        return DT_FAIL(DT_ERR_BACKEND, "oneDNN: a bf16 matmul %dx%dx%d could not be made (%s)", k->M, k->N, k->K,
                       dnnl_status2str(s));
    }
    e->made = ++dt__dnnl_made;
    return DT_OK;
}

/* The cached primitive for key, made if needed (under the mutex). A full
 * cache makes one for this call only (*own: the caller destroys it):
 * cached primitives are never destroyed while the process runs, since
 * another thread may be running one. */
static dt_status dt__dnnl_get(const dt__dnnl_key *k, dt__dnnl_entry *out, int *own)
{
    *own = 0;
    pthread_mutex_lock(&dt__dnnl_mu);
    dt__dnnl_entry *slot = NULL;
    for (int i = 0; i < DT__DNNL_CACHE; i++) {
        dt__dnnl_entry *e = &dt__dnnl_cache[i];
        if (e->prim && !memcmp(&e->key, k, sizeof *k)) {
            *out = *e;
            pthread_mutex_unlock(&dt__dnnl_mu);
            return DT_OK;
        }
        if (!slot && !e->prim) slot = e;
    }
    dt_status st = dt__dnnl_make(k, slot ? slot : out);
    if (st == DT_OK && slot) *out = *slot;
    if (st == DT_OK && !slot) *own = 1;
    pthread_mutex_unlock(&dt__dnnl_mu);
    return st;
}

/* The scratchpad of OpenMP thread number `slot`, at least bytes long. */
static dt_status dt__dnnl_scratchpad(int slot, size_t bytes, void **out)
{
    *out = NULL;
    if (!bytes) return DT_OK;
    if (slot < 0 || slot >= DT__DNNL_SLOTS)
        return DT_FAIL(DT_ERR_BACKEND, "oneDNN: thread %d has no scratchpad (at most %d threads)", slot,
                       DT__DNNL_SLOTS);
    if (dt__dnnl_scratch_cap[slot] < bytes) {
        free(dt__dnnl_scratch[slot]);
        dt__dnnl_scratch[slot] = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        dt__dnnl_scratch_cap[slot] = dt__dnnl_scratch[slot] ? bytes : 0;
        if (!dt__dnnl_scratch[slot])
            return DT_FAIL(DT_ERR_NOMEM, "oneDNN: out of memory for a %zu-byte scratchpad", bytes);
    }
    *out = dt__dnnl_scratch[slot];
    return DT_OK;
}

static dt_status dt__dnnl_run(const dt__dnnl_entry *e, const void *A, const void *B, float *C)
{
    int slot = 0;
#ifdef _OPENMP
    slot = omp_get_thread_num();
#endif
    void *sp = NULL;
    DT_CHECK(dt__dnnl_scratchpad(slot, e->scratch_bytes, &sp));
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, ms = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_status_t s = dnnl_memory_create(&ma, &e->a, dt__dnnl_engine, (void *)A);
    if (s == dnnl_success) s = dnnl_memory_create(&mb, &e->b, dt__dnnl_engine, (void *)B);
    if (s == dnnl_success) s = dnnl_memory_create(&mc, &e->c, dt__dnnl_engine, C);
    if (s == dnnl_success && sp) s = dnnl_memory_create(&ms, &e->scratch, dt__dnnl_engine, sp);
    if (s == dnnl_success) s = dnnl_stream_create(&stream, dt__dnnl_engine, dnnl_stream_default_flags);
    if (s == dnnl_success) {
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}, {DNNL_ARG_SCRATCHPAD, ms}};
        s = dnnl_primitive_execute(e->prim, stream, ms ? 4 : 3, args);
        if (s == dnnl_success) s = dnnl_stream_wait(stream);
    }
    if (stream) dnnl_stream_destroy(stream);
    if (ms) dnnl_memory_destroy(ms);
    if (mc) dnnl_memory_destroy(mc);
    if (mb) dnnl_memory_destroy(mb);
    if (ma) dnnl_memory_destroy(ma);
    if (s != dnnl_success) return DT_FAIL(DT_ERR_BACKEND, "oneDNN: a bf16 matmul failed (%s)", dnnl_status2str(s));
    return DT_OK;
}

dt_status dt__cpu_dnnl_gemm_bf16(int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                                 const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    if (dt__dnnl_state != 1) return DT_FAIL(DT_ERR_UNSUPPORTED, "oneDNN: no bf16 matmul on this CPU");
    const dt__dnnl_key k = {transa, transb, M, N, K, lda, ldb, ldc, alpha, beta};
    dt__dnnl_entry e;
    int own = 0;
    dt_status st;
    DT__DNNL_ONE_THREAD_BEGIN
    st = dt__dnnl_get(&k, &e, &own);
    if (st == DT_OK) st = dt__dnnl_run(&e, A, B, C);
    if (own && e.prim) dnnl_primitive_destroy(e.prim);
    DT__DNNL_ONE_THREAD_END
    return st;
}

int dt__cpu_dnnl_probe(void)
{
    pthread_mutex_lock(&dt__dnnl_mu);
    if (dt__dnnl_state == 0) {
        int ok = dnnl_engine_create(&dt__dnnl_engine, dnnl_cpu, 0) == dnnl_success;
        if (ok) {
            /* a shape of dtrain's kind: the implementation oneDNN picks for bf16 */
            const dt__dnnl_key k = {0, 1, 64, 64, 64, 64, 64, 64, 1.0f, 0.0f};
            DT__DNNL_ONE_THREAD_BEGIN
            ok = dt__dnnl_make(&k, &dt__dnnl_cache[0]) == DT_OK;
            DT__DNNL_ONE_THREAD_END
            /* a reference kernel would be far slower than OpenBLAS's FP32 */
            if (ok && strstr(dt__dnnl_impl, "ref")) {
                dnnl_primitive_destroy(dt__dnnl_cache[0].prim);
                memset(&dt__dnnl_cache[0], 0, sizeof dt__dnnl_cache[0]);
                ok = 0;
            }
        }
        dt__dnnl_state = ok ? 1 : -1;
    }
    const int usable = dt__dnnl_state == 1;
    pthread_mutex_unlock(&dt__dnnl_mu);
    return usable;
}

const char *dt__cpu_dnnl_impl(void) { return dt__dnnl_impl; }
