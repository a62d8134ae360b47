/* fp8_op_tests.h: part of check_fp8.c: the CPU backend's fp8_quantize
 * and fp8_gemm against dt_fp8.h's scalar reference. Per tensor with a
 * given scale and with the tensor's own (tensorwise), blockwise tiles
 * (1 x 128 and 128 x 128, ragged edges), on values spread over 2^-30 ..
 * 2^20 so that every path (saturation, normals, subnormals, flushing)
 * is taken; the counts, amax and binade histogram recomputed here. */

static uint64_t op_rng = 0x2545f4914f6cdd1dull;
static float op_value(void)
{
    op_rng ^= op_rng >> 12, op_rng ^= op_rng << 25, op_rng ^= op_rng >> 27;
    const uint64_t r = op_rng * 0x2545f4914f6cdd1dull;
    const float m = 1.0f + (float)(r >> 40) / (float)(1 << 24);
    const int e = (int)((r >> 8) % 51) - 30;
    float v = ldexpf(m, e);
    if ((r & 0xff) == 7) v = 0.0f;
    return (r & 1) ? -v : v;
}

/* the reference quantization of a rows x cols tile set; returns mismatches */
static int op_check(dt_backend *be, int rows, int cols, const dt_fp8_quant *spec)
{
    const size_t n = (size_t)rows * cols;
    float *x = malloc(n * sizeof *x), *q = malloc(n * sizeof *q);
    uint32_t *hist = calloc(DT_FP8_HIST, sizeof *hist), want_hist[DT_FP8_HIST] = {0};
    ck_assert(x && q && hist);
    for (size_t i = 0; i < n; i++) x[i] = op_value();
    dt_fp8_qstats st = {.hist = hist};
    ck_dt(be->fp8_quantize(be, q, x, rows, cols, spec, &st));
    int bad = 0;
    uint64_t sat = 0, fl = 0;
    float amax = 0;
    const int tr = spec->tile_rows > 0 ? spec->tile_rows : rows, tc = spec->tile_rows > 0 ? spec->tile_cols : cols;
    for (int bi = 0; bi < rows; bi += tr)
        for (int bj = 0; bj < cols; bj += tc) {
            float tmax = 0;
            for (int i = bi; i < bi + tr && i < rows; i++)
                for (int j = bj; j < bj + tc && j < cols; j++) tmax = fmaxf(tmax, fabsf(x[(size_t)i * cols + j]));
            float s = spec->scale;
            if (spec->tile_rows > 0) s = dt_fp8_scale_from_amax(tmax, spec->format, spec->margin, 1);
            else if (s == 0) {
                float m = 0;
                for (size_t k = 0; k < n; k++) m = fmaxf(m, fabsf(x[k]));
                s = dt_fp8_scale_from_amax(m, spec->format, spec->margin, 0);
            }
            if (s == 0) s = 1;
            for (int i = bi; i < bi + tr && i < rows; i++)
                for (int j = bj; j < bj + tc && j < cols; j++) {
                    const float v = x[(size_t)i * cols + j];
                    int sa = 0, f = 0;
                    float r = dt_fp8_round(v * s, spec->format, &sa, &f);
                    if (spec->dequant) r /= s;
                    sat += sa, fl += f;
                    amax = fmaxf(amax, fabsf(v));
                    if (v != 0) {
                        uint32_t u;
                        memcpy(&u, &v, sizeof u);
                        want_hist[(u >> 23) & 0xff]++;
                    }
                    const float got = q[(size_t)i * cols + j];
                    if (memcmp(&got, &r, sizeof r)) bad++;
                }
            if (spec->tile_rows <= 0) ck_assert(st.scale == s);
        }
    ck_assert_msg(st.saturated == sat && st.flushed == fl, "counts %llu %llu, want %llu %llu",
                  (unsigned long long)st.saturated, (unsigned long long)st.flushed, (unsigned long long)sat,
                  (unsigned long long)fl);
    ck_assert(st.amax == amax);
    ck_assert(!memcmp(hist, want_hist, sizeof want_hist));
    free(x), free(q), free(hist);
    return bad;
}

START_TEST(test_op_quantize)
{
    dt_backend *be;
    ck_dt(dt_backend_create("cpu", 2, &be));
    ck_assert(be->fp8_quantize && be->fp8_gemm);
    for (int f = 0; f < 2; f++) {
        const dt_fp8_format fmt = (dt_fp8_format)f;
        /* a scale that sends the top of the range past max and the bottom below the subnormals */
        dt_fp8_quant given = {.format = fmt, .scale = fmt == DT_FP8_E4M3 ? 0.01f : 0.5f};
        ck_assert_int_eq(op_check(be, 300, 257, &given), 0);
        dt_fp8_quant own = {.format = fmt, .margin = 1};
        ck_assert_int_eq(op_check(be, 64, 129, &own), 0);
        dt_fp8_quant row = {.format = fmt, .tile_rows = 1, .tile_cols = DT_FP8_TILE, .dequant = 1};
        ck_assert_int_eq(op_check(be, 70, 300, &row), 0);
        dt_fp8_quant blk = {.format = fmt, .tile_rows = DT_FP8_TILE, .tile_cols = DT_FP8_TILE, .dequant = 1};
        ck_assert_int_eq(op_check(be, 200, 260, &blk), 0);
        dt_fp8_quant col = {.format = fmt, .tile_rows = DT_FP8_TILE, .tile_cols = 1, .dequant = 1};
        ck_assert_int_eq(op_check(be, 130, 9, &col), 0);
    }
    /* every midpoint of E4M3 through the op (the scalar test walks them too) */
    float mids[2 * 126], q[2 * 126];
    int k = 0;
    for (int v = 0; v + 1 < 127; v++) {
        const float lo = dt_fp8_to_float((uint8_t)v, DT_FP8_E4M3), hi = dt_fp8_to_float((uint8_t)(v + 1), DT_FP8_E4M3);
        mids[k++] = (lo + hi) / 2;
        mids[k++] = -(lo + hi) / 2;
    }
    dt_fp8_qstats st = {0};
    dt_fp8_quant one = {.format = DT_FP8_E4M3, .scale = 1.0f};
    ck_dt(be->fp8_quantize(be, q, mids, 1, k, &one, &st));
    for (int i = 0; i < k; i++) ck_assert(q[i] == dt_fp8_round(mids[i], DT_FP8_E4M3, NULL, NULL));
    ck_assert(st.flushed == 2 && st.saturated == 0);
    /* bad input: one line, no crash */
    dt_fp8_quant badt = {.format = DT_FP8_E4M3, .tile_rows = 1, .tile_cols = 0, .dequant = 1};
    ck_assert_int_eq(be->fp8_quantize(be, q, mids, 1, k, &badt, &st), DT_ERR_INVALID);
    dt_backend_destroy(be);
}
END_TEST

/* fp8_gemm: C = alpha A B^T + beta C on quantized operands against a
 * double reference over the FP8 values: the products are exact and the
 * FP32 sums of K = 96 terms of magnitude <= 448^2 differ from the double
 * sum by at most K * 2^-24 * sum|a b| (a bound on any summation order). */
START_TEST(test_op_gemm)
{
    dt_backend *be;
    ck_dt(dt_backend_create("cpu", 2, &be));
    ck_dt(be->set_gemm_inputs(be, DT_BF16));
    enum { M = 33, N = 17, K = 96 };
    float a[M * K], b[N * K], qa[M * K], qb[N * K], c[M * N];
    for (int i = 0; i < M * K; i++) a[i] = op_value() * 1e-3f;
    for (int i = 0; i < N * K; i++) b[i] = op_value() * 1e-3f;
    dt_fp8_qstats sa = {0}, sb = {0};
    dt_fp8_quant qs = {.format = DT_FP8_E4M3};
    ck_dt(be->fp8_quantize(be, qa, a, M, K, &qs, &sa));
    qs.format = DT_FP8_E5M2;
    ck_dt(be->fp8_quantize(be, qb, b, N, K, &qs, &sb));
    for (int i = 0; i < M * N; i++) c[i] = 1.0f;
    const float alpha = 1.0f / (sa.scale * sb.scale);
    ck_dt(be->fp8_gemm(be, 0, 1, M, N, K, alpha, qa, DT_FP8_E4M3, K, qb, DT_FP8_E5M2, K, 1.0f, c, N));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                sum += (double)qa[i * K + k] * qb[j * K + k];
                mag += fabs((double)qa[i * K + k] * qb[j * K + k]);
            }
            const double want = (double)alpha * sum + 1.0;
            const double tol = (double)alpha * K * ldexp(mag, -24) + 2 * ldexp(fabs(want), -24);
            ck_assert_msg(fabs(c[i * N + j] - want) <= tol, "C[%d,%d] %.9g, want %.9g", i, j, c[i * N + j], want);
        }
    ck_dt(be->set_gemm_inputs(be, DT_F32));
    dt_backend_destroy(be);
}
END_TEST


/* The linear layers under FP8 (lib/model/fp8.c) against a double
 * reference built here from the scalar conversion: forward, input
 * gradient and weight gradient (with bias), each recipe and both formats
 * of the gradient, at a shape that is not a multiple of the 128 tiles.
 * The reference converts x, w and dy as the recipe says (its scales from
 * dt_fp8.h), multiplies the FP8 values in double and divides by the
 * scales; dtrain's GEMM adds the same exact products in FP32, so the two
 * differ by FP32 summation only: K * 2^-24 * sum |a b| / (sa sb) bounds it
 * (K <= 160), plus the bias's and the output's own rounding. */
#include "../lib/model/fp8.h"

/* the reference conversion of v (rows x cols) for a recipe: returns the
 * dequantized values (q / s) in double */
static void lin_ref_quant(double *out, const float *v, int rows, int cols, dt_fp8_format f, dt_fp8_recipe rc,
                          float delayed_scale, int tr, int tc)
{
    if (rc != DT_FP8_BLOCKWISE) { tr = rows, tc = cols; }
    for (int bi = 0; bi < rows; bi += tr)
        for (int bj = 0; bj < cols; bj += tc) {
            float m = 0;
            for (int i = bi; i < bi + tr && i < rows; i++)
                for (int j = bj; j < bj + tc && j < cols; j++) m = fmaxf(m, fabsf(v[(size_t)i * cols + j]));
            float s = rc == DT_FP8_DELAYED ? delayed_scale : dt_fp8_scale_from_amax(m, f, 0, rc == DT_FP8_BLOCKWISE);
            if (s == 0) s = 1;
            for (int i = bi; i < bi + tr && i < rows; i++)
                for (int j = bj; j < bj + tc && j < cols; j++)
                    out[(size_t)i * cols + j] = (double)dt_fp8_round(v[(size_t)i * cols + j] * s, f, NULL, NULL) / s;
        }
}

START_TEST(test_linear_fp8)
{
    enum { N = 37, C = 160, OC = 48 };
    dt_backend *be;
    ck_dt(dt_backend_create("cpu", 2, &be));
    ck_dt(be->set_gemm_inputs(be, DT_BF16));
    static float x[N * C], w[OC * C], dy[N * OC], b[OC], out[N * OC], dx[N * C], dw[OC * C], db[OC];
    static double rx[N * C], rw[OC * C], rg[N * OC], rxw[N * C], rgw[N * OC];
    /* bf16 values (as the model stores them), spread over a few binades */
    for (int i = 0; i < N * C; i++) x[i] = dt_bf16_to_float(dt_bf16_from_float(op_value() * 1e-6f));
    for (int i = 0; i < OC * C; i++) w[i] = dt_bf16_to_float(dt_bf16_from_float(op_value() * 1e-7f));
    for (int i = 0; i < N * OC; i++) dy[i] = dt_bf16_to_float(dt_bf16_from_float(op_value() * 1e-9f));
    for (int i = 0; i < OC; i++) b[i] = dt_bf16_to_float(dt_bf16_from_float((float)i / 64.0f));
    for (int mode = DT_FP8_MODE_E4M3; mode <= DT_FP8_MODE_HYBRID; mode++)
        for (int rc = DT_FP8_DELAYED; rc <= DT_FP8_BLOCKWISE; rc++) {
            const dt__fp8_settings set = {.mode = mode, .recipe = rc, .algo = DT_FP8_AMAX_MAX, .history_len = 4};
            dt__fp8 *f;
            ck_dt(dt__fp8_create(be, &set, 1, &f));
            /* delayed: a history, so that the state's scales are used (3 tensors of layer 0, qkv) */
            const float sdel[3] = {0.5f, 2048.0f, 1e9f};
            if (rc == DT_FP8_DELAYED) {
                f->hfill = 1;
                for (int r = 0; r < 3; r++) f->scale[r] = sdel[r];
            }
            const dt_fp8_format fg = dt_fp8_role_format((dt_fp8_mode)mode, 2);
            dt__fp8_at(f, 0, 'F');
            ck_dt(dt__linear_forward(be, f, DT__LIN_QKV, out, x, w, b, N, C, OC));
            dt__fp8_at(f, 0, 'B');
            ck_dt(dt__linear_dgrad(be, f, DT__LIN_QKV, dx, dy, w, N, C, OC));
            for (int i = 0; i < OC * C; i++) dw[i] = 1.0f;
            for (int i = 0; i < OC; i++) db[i] = 0.5f;
            ck_dt(dt__linear_wgrad(be, f, DT__LIN_QKV, dw, db, dy, x, w, N, C, OC));
            lin_ref_quant(rx, x, N, C, DT_FP8_E4M3, rc, sdel[0], 1, DT_FP8_TILE);
            lin_ref_quant(rw, w, OC, C, DT_FP8_E4M3, rc, sdel[1], DT_FP8_TILE, DT_FP8_TILE);
            lin_ref_quant(rg, dy, N, OC, fg, rc, sdel[2], 1, DT_FP8_TILE);
            lin_ref_quant(rxw, x, N, C, DT_FP8_E4M3, rc, sdel[0], DT_FP8_TILE, 1); /* the weight gradient's tiles */
            lin_ref_quant(rgw, dy, N, OC, fg, rc, sdel[2], DT_FP8_TILE, 1);
            int bad = 0;
            char where[96] = "";
            for (int i = 0; i < N; i++)
                for (int o = 0; o < OC; o++) {
                    double s = 0, mag = 0;
                    for (int k = 0; k < C; k++) {
                        s += rx[i * C + k] * rw[o * C + k];
                        mag += fabs(rx[i * C + k] * rw[o * C + k]);
                    }
                    const double want = s + b[o], tol = C * ldexp(mag, -24) + ldexp(fabs(want) + fabs(b[o]), -22);
                    if (fabs(out[i * OC + o] - want) > tol && !bad++)
                        snprintf(where, sizeof where, "forward [%d,%d] %.9g want %.9g", i, o, out[i * OC + o], want);
                }
            for (int i = 0; i < N; i++)
                for (int k = 0; k < C; k++) {
                    double s = 0, mag = 0;
                    for (int o = 0; o < OC; o++) {
                        s += rg[i * OC + o] * rw[o * C + k];
                        mag += fabs(rg[i * OC + o] * rw[o * C + k]);
                    }
                    const double tol = OC * ldexp(mag, -24) + ldexp(fabs(s), -22);
                    if (fabs(dx[i * C + k] - s) > tol && !bad++)
                        snprintf(where, sizeof where, "dgrad [%d,%d] %.9g want %.9g", i, k, dx[i * C + k], s);
                }
            for (int o = 0; o < OC; o++) {
                double sb = 0.5;
                for (int i = 0; i < N; i++) sb += dy[i * OC + o];
                if (fabs(db[o] - sb) > N * ldexp(fabs(sb) + 1, -23) && !bad++)
                    snprintf(where, sizeof where, "dbias [%d] %.9g want %.9g", o, db[o], sb);
                for (int k = 0; k < C; k++) {
                    double s = 0, mag = 0;
                    for (int i = 0; i < N; i++) {
                        s += rgw[i * OC + o] * rxw[i * C + k];
                        mag += fabs(rgw[i * OC + o] * rxw[i * C + k]);
                    }
                    const double want = 1.0 + s, tol = N * ldexp(mag, -24) + ldexp(fabs(want), -22);
                    if (fabs(dw[o * C + k] - want) > tol && !bad++)
                        snprintf(where, sizeof where, "wgrad [%d,%d] %.9g want %.9g", o, k, dw[o * C + k], want);
                }
            }
            ck_assert_msg(!bad, "%s %s: %d values off, first %s", dt_fp8_mode_name((dt_fp8_mode)mode),
                          dt_fp8_recipe_name((dt_fp8_recipe)rc), bad, where);
            /* recorded: the forward's x and w, the backward's dy, once each */
            ck_assert(f->values[0] == N * C && f->values[1] == OC * C && f->values[2] == N * OC);
            dt__fp8_free(f);
        }
    ck_dt(be->set_gemm_inputs(be, DT_F32));
    dt_backend_destroy(be);
}
END_TEST

static void fp8_add_op_tests(TCase *tc)
{
    tcase_add_test(tc, test_op_quantize);
    tcase_add_test(tc, test_op_gemm);
    tcase_add_test(tc, test_linear_fp8);
}
