/* fp8.c: FP8 training's per-tensor state and the linear layers' FP8
 * GEMMs (fp8.h). The scale rules and the conversion are dt_fp8.h's; the
 * conversion and the GEMM are the backend's ops (fp8_quantize,
 * fp8_gemm), so the same code drives the CPU and the GPU.
 *
 * Invariants: a tensor's amax and counts change only in a recording
 * pass (forward x, w; backward dy) while not frozen; the scale a GEMM
 * uses for a tensor is the same in every GEMM of a step (delayed: the
 * state's; tensorwise and blockwise: computed from the same values), so
 * a conversion repeated for another GEMM gives the same FP8 values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "fp8.h"

static const char *const dt__lin_names[DT__LIN_N] = {"qkv", "attproj", "fc", "fcproj"};
static const char *const dt__role_names[3] = {"x", "w", "dy"};

void dt__fp8_tensor_name(int i, char *buf, size_t n)
{
    const int l = i / DT__FP8_PER_BLOCK, k = i % DT__FP8_PER_BLOCK;
    snprintf(buf, n, "h.%d.%s.%s", l, dt__lin_names[k / 3], dt__role_names[k % 3]);
}

int dt__fp8_replicated(int i)
{
    const int k = i % DT__FP8_PER_BLOCK, lin = k / 3, role = k % 3;
    const int column = lin == DT__LIN_QKV || lin == DT__LIN_FC;
    return (column && role == DT__FP8_X) || (!column && role == DT__FP8_DY);
}

static dt_status dt__fp8_room(dt__fp8 *f, float **buf, size_t *cap, size_t n);

dt_status dt__fp8_create(dt_backend *be, const dt__fp8_settings *s, int L, dt__fp8 **out)
{
    *out = NULL;
    if (!be->fp8_quantize || !be->fp8_gemm)
        return DT_FAIL(DT_ERR_UNSUPPORTED, "--fp8-format: the %s backend has no FP8 GEMMs", be->name);
    if (s->history_len < 1 || s->margin < 0 || L < 1)
        return DT_FAIL(DT_ERR_INVALID, "fp8: history length %d, margin %d, %d blocks (expected >= 1, >= 0, >= 1)",
                       s->history_len, s->margin, L);
    dt__fp8 *f = calloc(1, sizeof *f);
    if (!f) return DT_FAIL(DT_ERR_NOMEM, "fp8: out of memory for its state");
    f->set = *s;
    f->L = L;
    f->n = L * DT__FP8_PER_BLOCK;
    f->be = be;
    f->layer = -1;
    const size_t n = (size_t)f->n;
    f->scale = malloc(n * sizeof *f->scale);
    f->history = calloc(n * (size_t)s->history_len, sizeof *f->history);
    f->amax = calloc(n, sizeof *f->amax);
    f->sat = calloc(n, sizeof *f->sat);
    f->flush = calloc(n, sizeof *f->flush);
    f->values = calloc(n, sizeof *f->values);
    f->rel = calloc(n * DT__FP8_REL, sizeof *f->rel);
    if (!f->scale || !f->history || !f->amax || !f->sat || !f->flush || !f->values || !f->rel) {
        dt__fp8_free(f);
        return DT_FAIL(DT_ERR_NOMEM, "fp8: out of memory for %d tensors' state", f->n);
    }
    for (size_t i = 0; i < n; i++) f->scale[i] = 1.0f;
    /* per-tensor recipes need the backend's FP8 GEMM (a GPU older than
     * compute capability 8.9 has none): one small product now, so that
     * the run is refused at start with the backend's line, not at its
     * first forward */
    if (s->recipe != DT_FP8_BLOCKWISE) {
        dt_status st = dt__fp8_room(f, &f->qa, &f->qa_cap, 16 * 16);
        if (st == DT_OK) st = dt__fp8_room(f, &f->qb, &f->qb_cap, 16 * 16);
        float *c = NULL;
        if (st == DT_OK) st = be->alloc(be, 16 * 16 * sizeof(float), (void **)&c);
        if (st == DT_OK)
            st = be->fp8_gemm(be, 0, 1, 16, 16, 16, 1.0f, f->qa, DT_FP8_E4M3, 16, f->qb, DT_FP8_E4M3, 16, 0.0f, c, 16);
        if (c) be->free(be, c);
        if (st != DT_OK) {
            dt__fp8_free(f);
            return st;
        }
    }
    *out = f;
    return DT_OK;
}

void dt__fp8_free(dt__fp8 *f)
{
    if (!f) return;
    if (f->be) {
        f->be->free(f->be, f->qa);
        f->be->free(f->be, f->qb);
        f->be->free(f->be, f->ones);
    }
    free(f->scale);
    free(f->history);
    free(f->amax);
    free(f->sat);
    free(f->flush);
    free(f->values);
    free(f->rel);
    free(f);
}

void dt__fp8_at(dt__fp8 *f, int layer, char pass)
{
    f->layer = layer;
    f->record = pass == 'F' || pass == 'B' || pass == 'b';
}

void dt__fp8_step_clear(dt__fp8 *f)
{
    const size_t n = (size_t)f->n;
    memset(f->amax, 0, n * sizeof *f->amax);
    memset(f->sat, 0, n * sizeof *f->sat);
    memset(f->flush, 0, n * sizeof *f->flush);
    memset(f->values, 0, n * sizeof *f->values);
}

/* *buf holds at least n floats (grown, contents lost) */
static dt_status dt__fp8_room(dt__fp8 *f, float **buf, size_t *cap, size_t n)
{
    if (*cap >= n) return DT_OK;
    f->be->free(f->be, *buf);
    *buf = NULL;
    *cap = 0;
    DT_CHECK(f->be->alloc(f->be, n * sizeof(float), (void **)buf));
    *cap = n;
    return DT_OK;
}

static dt_status dt__fp8_ones(dt__fp8 *f, size_t n)
{
    if (f->ones_cap >= n) return DT_OK;
    DT_CHECK(dt__fp8_room(f, &f->ones, &f->ones_cap, n));
    float *h = malloc(n * sizeof *h);
    if (!h) return DT_FAIL(DT_ERR_NOMEM, "fp8: out of memory for %zu ones", n);
    for (size_t i = 0; i < n; i++) h[i] = 1.0f;
    const dt_status st = f->be->copy(f->be, f->ones, h, n * sizeof *h, DT_COPY_H2D);
    free(h);
    return st;
}

/* which: 0 the forward and input-gradient GEMMs' tiling, 1 the weight
 * gradient's (its K runs over the rows: 128 x 1 tiles, as DeepSeek-V3) */
static dt_status dt__fp8_quant(dt__fp8 *f, float *q, const float *v, int rows, int cols, int lin, int role, int wgrad,
                               int rec, float *scale)
{
    if (f->layer < 0 || f->layer >= f->L)
        return DT_FAIL(DT_ERR_INVALID, "fp8: a linear layer ran outside a block (layer %d)", f->layer);
    const int t = f->layer * DT__FP8_PER_BLOCK + lin * 3 + role;
    dt_fp8_quant spec = {.format = dt_fp8_role_format(f->set.mode, role), .margin = f->set.margin};
    if (f->set.recipe == DT_FP8_BLOCKWISE) {
        spec.dequant = 1;
        spec.tile_rows = role == DT__FP8_W || wgrad ? DT_FP8_TILE : 1;
        spec.tile_cols = role == DT__FP8_W || !wgrad ? DT_FP8_TILE : 1;
    } else if (f->set.recipe == DT_FP8_DELAYED && f->hfill > 0) {
        spec.scale = f->scale[t];
        spec.margin = 0;
    } /* else current scaling: tensorwise, and delayed's first step (no history yet) */
    rec = rec && f->record && !f->frozen;
    const int counted = rec && !(f->tp_rank > 0 && dt__fp8_replicated(t)) && !(f->cp_rank > 0 && role == DT__FP8_W);
    dt_fp8_qstats st = {.hist = counted ? f->hist : NULL};
    if (counted) memset(f->hist, 0, sizeof f->hist);
    DT_CHECK(f->be->fp8_quantize(f->be, q, v, rows, cols, &spec, &st));
    *scale = st.scale;
    if (!rec) return DT_OK;
    if (st.amax > f->amax[t]) f->amax[t] = st.amax;
    if (!counted) return DT_OK;
    f->sat[t] += (double)st.saturated;
    f->flush[t] += (double)st.flushed;
    f->values[t] += (double)rows * (double)cols;
    uint32_t u;
    memcpy(&u, &st.amax, sizeof u);
    const int ea = (int)((u >> 23) & 0xffu);
    double *rel = f->rel + (size_t)t * DT__FP8_REL;
    for (int b = 0; b < 255; b++) {
        if (!f->hist[b]) continue;
        int j = ea - b;
        j = j < 0 ? 0 : j >= DT__FP8_REL ? DT__FP8_REL - 1 : j;
        rel[j] += f->hist[b];
    }
    return DT_OK;
}

/* C = A op(B) / (sa sb) + beta C on the quantized operands */
static dt_status dt__fp8_mm(dt__fp8 *f, int transa, int transb, int M, int N, int K, int ra, int rb, float sa,
                            float sb, float beta, float *C)
{
    dt_backend *be = f->be;
    const int lda = transa ? M : K, ldb = transb ? K : N;
    if (f->set.recipe == DT_FP8_BLOCKWISE) /* dequantized, exact in bf16 */
        return be->gemm(be, transa, transb, M, N, K, 1.0f, f->qa, lda, f->qb, ldb, beta, C, N);
    const dt_fp8_format fa = dt_fp8_role_format(f->set.mode, ra), fb = dt_fp8_role_format(f->set.mode, rb);
    return be->fp8_gemm(be, transa, transb, M, N, K, (1.0f / sa) / sb, f->qa, fa, lda, f->qb, fb, ldb, beta, C, N);
}

dt_status dt__linear_forward(dt_backend *be, dt__fp8 *f, int lin, float *out, const float *x, const float *w,
                             const float *bias, int N, int C, int OC)
{
    if (!f) return be->matmul_forward(be, out, x, w, bias, N, C, OC);
    float sx, sw;
    DT_CHECK(dt__fp8_room(f, &f->qa, &f->qa_cap, (size_t)N * C));
    DT_CHECK(dt__fp8_room(f, &f->qb, &f->qb_cap, (size_t)OC * C));
    DT_CHECK(dt__fp8_quant(f, f->qa, x, N, C, lin, DT__FP8_X, 0, 1, &sx));
    DT_CHECK(dt__fp8_quant(f, f->qb, w, OC, C, lin, DT__FP8_W, 0, 1, &sw));
    DT_CHECK(dt__fp8_mm(f, 0, 1, N, OC, C, DT__FP8_X, DT__FP8_W, sx, sw, 0.0f, out));
    if (!bias) return DT_OK;
    DT_CHECK(dt__fp8_ones(f, (size_t)N));
    return be->gemm(be, 0, 0, N, OC, 1, 1.0f, f->ones, 1, bias, OC, 1.0f, out, OC); /* out += 1 bias^T */
}

dt_status dt__linear_dgrad(dt_backend *be, dt__fp8 *f, int lin, float *dx, const float *dy, const float *w, int N,
                           int C, int OC)
{
    if (!f) return be->matmul_backward(be, dx, NULL, NULL, dy, NULL, w, N, C, OC);
    float sg, sw;
    DT_CHECK(dt__fp8_room(f, &f->qa, &f->qa_cap, (size_t)N * OC));
    DT_CHECK(dt__fp8_room(f, &f->qb, &f->qb_cap, (size_t)OC * C));
    DT_CHECK(dt__fp8_quant(f, f->qa, dy, N, OC, lin, DT__FP8_DY, 0, 1, &sg));
    DT_CHECK(dt__fp8_quant(f, f->qb, w, OC, C, lin, DT__FP8_W, 0, 0, &sw));
    return dt__fp8_mm(f, 0, 0, N, C, OC, DT__FP8_DY, DT__FP8_W, sg, sw, 0.0f, dx);
}

dt_status dt__linear_wgrad(dt_backend *be, dt__fp8 *f, int lin, float *dw, float *dbias, const float *dy,
                           const float *x, const float *w, int N, int C, int OC)
{
    if (!f) return be->matmul_backward(be, NULL, dw, dbias, dy, x, w, N, C, OC);
    float sg, sx;
    DT_CHECK(dt__fp8_room(f, &f->qa, &f->qa_cap, (size_t)N * OC));
    DT_CHECK(dt__fp8_room(f, &f->qb, &f->qb_cap, (size_t)N * C));
    DT_CHECK(dt__fp8_quant(f, f->qa, dy, N, OC, lin, DT__FP8_DY, 1, 0, &sg));
    DT_CHECK(dt__fp8_quant(f, f->qb, x, N, C, lin, DT__FP8_X, 1, 0, &sx));
    DT_CHECK(dt__fp8_mm(f, 1, 0, OC, C, N, DT__FP8_DY, DT__FP8_X, sg, sx, 1.0f, dw));
    if (!dbias) return DT_OK;
    DT_CHECK(dt__fp8_ones(f, (size_t)N));
    return be->gemm(be, 0, 0, 1, OC, N, 1.0f, f->ones, N, dy, OC, 1.0f, dbias, OC); /* dbias += 1^T dy */
}
