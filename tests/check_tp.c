/* check_tp.c: Megatron-style tensor parallelism of a transformer block, run
 * by tests/tp.sh under mpirun with 1, 2 and 4 ranks (t = the world size).
 *
 * Every rank also runs the serial block (block.c) on the whole weights, so
 * the test compares within each rank:
 *   - f and g in isolation: f forward and g backward leave x as it is; f
 *     backward and g forward give the sum over ranks (exact: integer-valued
 *     floats);
 *   - the block forward output (replicated) equals the serial one;
 *   - backward: the input gradient (replicated) equals the serial one, and
 *     each rank's parameter gradients equal its shard of the serial ones;
 *   - one block makes exactly 2 allreduces forward and 2 backward;
 *   - its backward split into B and W (zero-bubble) is the whole one, bit
 *     for bit (test_block_split).
 * Tolerance 1e-5 of the tensor's largest value (plus 1e-5 relative): the
 * partial products of the row-parallel layers are summed over ranks in
 * another order than one GEMM's dot products, ~1e-7 of the terms' size per
 * sum in FP32, over a few chained ops (measured: 1.5e-6 on outputs of size
 * about 4); a wrong shard or a missing sum is off by the values themselves. */
#include <math.h>
#include <string.h>

#include "dt_rng.h"
#include "testutil.h"
#include "tp.h"

static dt_comm *g_world;
static dt_backend *be;

static dt_gpt_config config(void)
{
    dt_gpt_config c;
    ck_dt(dt_gpt_config_preset("tiny", &c));
    c.num_layers = 1;
    c.vocab_size = 32;
    c.seq_len = 16;
    return c; /* C = 64, NH = 4 */
}

static void randn(float *x, size_t n, uint64_t seed, float scale)
{
    dt_rng r;
    dt_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = scale * (float)dt_rng_normal(&r);
}

/* Views of the 12 block tensors of a flat buffer laid out as ps (tensors first..first+11). */
static void bind(const dt_paramset *ps, int first, float *base, dt__block_params *b, float *t[12])
{
    float **f[12] = {&b->ln1w, &b->ln1b, &b->qkvw, &b->qkvb, &b->attprojw, &b->attprojb,
                     &b->ln2w, &b->ln2b, &b->fcw,  &b->fcb,  &b->fcprojw,  &b->fcprojb};
    for (int i = 0; i < 12; i++) {
        *f[i] = base + ps->info[first + i].offset;
        if (t) t[i] = *f[i];
    }
}

/* |got - want| <= 1e-5 * max|want| + 1e-5 * |want|: rounding of reordered
 * sums scales with the size of the terms, i.e. with the tensor's largest
 * values, not with an element that happens to cancel to near 0. */
static void expect_close(const float *got, const float *want, size_t n, const char *what)
{
    double scale = 0.0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(dt_test_close(got[i], want[i], 1e-5 * scale + 1e-12, 1e-5),
                      "rank %d of %d: %s[%zu] = %.9g, serial %.9g (largest %.3g)", g_world->rank, g_world->size, what,
                      i, (double)got[i], (double)want[i], scale);
}

START_TEST(test_f_g)
{
    const int n = 5, r = g_world->rank, t = g_world->size;
    dt__tp tp = {.comm = g_world, .algo = DT_ALLREDUCE_RING};
    float x[5], y[5];
    for (int i = 0; i < n; i++) x[i] = y[i] = (float)(r * 10 + i);
    ck_dt(dt__tp_f(&tp, 'F', x, n));
    ck_dt(dt__tp_g(&tp, 'B', y, n));
    for (int i = 0; i < n; i++) ck_assert(x[i] == (float)(r * 10 + i) && y[i] == x[i]);
    ck_dt(dt__tp_f(&tp, 'B', x, n));
    ck_dt(dt__tp_g(&tp, 'F', y, n));
    for (int i = 0; i < n; i++) {
        float want = (float)(10 * t * (t - 1) / 2 + t * i);
        ck_assert_msg(x[i] == want && y[i] == want, "rank %d: f backward %g, g forward %g, expected %g", r, x[i], y[i],
                      want);
    }
    ck_assert(tp.allreduces_fwd == 1 && tp.allreduces_bwd == 1);
}
END_TEST

START_TEST(test_block)
{
    const dt_gpt_config c = config();
    const int t = g_world->size, r = g_world->rank, B = 2, T = 8, N = B * T, C = c.hidden_size;
    ck_dt(dt__tp_check(&c, t));
    /* whole block: layout, random weights (biases too), same on every rank */
    dt_paramset whole, local;
    dt_paramset_init(&whole);
    dt_paramset_init(&local);
    ck_dt(dt__tp_block_layout(&c, 1, 0, &whole));
    ck_dt(dt__tp_block_layout(&c, t, 0, &local));
    float *w = calloc(whole.numel, sizeof *w), *gw = calloc(whole.numel, sizeof *gw);
    float *wl = calloc(local.numel, sizeof *wl), *gl = calloc(local.numel, sizeof *gl), *gwl = calloc(local.numel, 4);
    ck_assert(w && gw && wl && gl && gwl);
    randn(w, whole.numel, 7, 0.2f);
    dt__block_params pw, pg, lw, lg;
    float *tw[12], *tg[12];
    bind(&whole, 0, w, &pw, tw);
    bind(&whole, 0, gw, &pg, tg);
    for (int i = 0; i < C; i++) pw.ln1w[i] = pw.ln2w[i] = 1.0f + 0.1f * pw.ln1w[i];
    dt__tp_block_shard(&c, t, r, (const float *const *)tw, &local, 0, wl);
    bind(&local, 0, wl, &lw, NULL);
    bind(&local, 0, gl, &lg, NULL);
    /* serial block */
    dt_buffer abuf, sbuf;
    const size_t serial_floats = dt__block_act_floats(&c, DT__WHOLE, B, T, 1) + dt__block_scratch_floats(&c, B, T) + 64;
    ck_dt(dt_buffer_alloc(&abuf, be, (serial_floats + dt__block_act_floats(&c, (dt__shard){t, 0}, B, T, 1) + 64) * sizeof(float)));
    ck_dt(dt_buffer_alloc(&sbuf, be, dt__tp_scratch_floats(&c, t, B, T) * sizeof(float)));
    dt__arena ar = {.base = abuf.data, .capacity = serial_floats + dt__block_act_floats(&c, (dt__shard){t, 0}, B, T, 1) + 64};
    dt__block_acts sa;
    dt__block_scratch ss;
    float *sscr;
    ck_dt(dt__arena_alloc(&ar, dt__block_scratch_floats(&c, B, T), &sscr));
    dt__block_scratch_bind(&ss, &c, B, T, sscr);
    ck_dt(dt__block_acts_alloc(&ar, &c, DT__WHOLE, B, T, 1, &ss.tmp, &sa));
    dt__tp_acts ta; /* the same transients: each W recomputes its own */
    ck_dt(dt__block_acts_alloc(&ar, &c, (dt__shard){t, 0}, B, T, 1, &ss.tmp, &ta));
    float *x = malloc((size_t)N * C * sizeof *x), *d0 = malloc((size_t)N * C * sizeof *d0);
    float *dser = malloc((size_t)N * C * sizeof *dser), *dtp = malloc((size_t)N * C * sizeof *dtp);
    ck_assert(x && d0 && dser && dtp);
    randn(x, (size_t)N * C, 11, 1.0f);
    randn(d0, (size_t)N * C, 13, 0.1f);
    ck_dt(dt__block_forward(be, &c, &pw, &sa, x, B, T, NULL));
    dt__tp tp = {.comm = g_world, .algo = DT_ALLREDUCE_RING};
    ck_dt(dt__tp_block_forward(&tp, be, &c, &lw, &ta, x, B, T, NULL));
    ck_assert_msg(tp.allreduces_fwd == 2 && tp.allreduces_bwd == 0, "forward: %lld and %lld allreduces",
                  tp.allreduces_fwd, tp.allreduces_bwd);
    expect_close(ta.out, sa.out, (size_t)N * C, "block output");
    memcpy(dser, d0, (size_t)N * C * sizeof *dser);
    memcpy(dtp, d0, (size_t)N * C * sizeof *dtp);
    ck_dt(dt__block_backward(be, &c, &pw, &pg, &sa, &ss, x, dser, B, T, NULL));
    ck_dt(dt__tp_block_backward(&tp, be, &c, &lw, &lg, &ta, sbuf.data, x, dtp, B, T, NULL));
    ck_assert_msg(tp.allreduces_fwd == 2 && tp.allreduces_bwd == 2,
                  "block: %lld forward and %lld backward allreduces "
                  "(expected 2 and 2)",
                  tp.allreduces_fwd, tp.allreduces_bwd);
    expect_close(dtp, dser, (size_t)N * C, "input gradient");
    dt__tp_block_shard(&c, t, r, (const float *const *)tg, &local, 0, gwl); /* this rank's share of the serial grads */
    for (int i = 0; i < local.count; i++)
        expect_close(gl + local.info[i].offset, gwl + local.info[i].offset, local.info[i].numel, local.info[i].name);
    dt_buffer_free(&abuf);
    dt_buffer_free(&sbuf);
    dt_paramset_free(&whole);
    dt_paramset_free(&local);
    free(w), free(gw), free(wl), free(gl), free(gwl), free(x), free(d0), free(dser), free(dtp);
}
END_TEST

/* The zero-bubble split (gpt_layers.h): the sharded block's B (with both
 * backward allreduces) then block.c's W at the shard's sizes give the
 * whole backward's input gradient and parameter gradients bit for bit,
 * FP32 and with bf16 rounding; W makes no allreduce. Two micro-batches
 * B0 B1 W0 W1 accumulate as two whole backwards do. */
START_TEST(test_block_split)
{
    const dt_gpt_config c = config();
    const int t = g_world->size, r = g_world->rank, B = 2, T = 8, N = B * T, C = c.hidden_size;
    const size_t NC = (size_t)N * C;
    dt_paramset local;
    dt_paramset_init(&local);
    ck_dt(dt__tp_block_layout(&c, t, 0, &local));
    float *wl = calloc(local.numel, sizeof *wl), *g1 = calloc(local.numel, 4), *g2 = calloc(local.numel, 4);
    ck_assert(wl && g1 && g2);
    randn(wl, local.numel, 7, 0.2f);
    dt__block_params lw, l1, l2;
    bind(&local, 0, wl, &lw, NULL);
    for (int i = 0; i < C; i++) lw.ln1w[i] = lw.ln2w[i] = 1.0f + 0.1f * lw.ln1w[i]; /* replicated: the same */
    bind(&local, 0, g1, &l1, NULL);
    bind(&local, 0, g2, &l2, NULL);
    const size_t act = dt__block_act_floats(&c, (dt__shard){t, 0}, B, T, 1), keep = dt__block_keep_floats(&c, (dt__shard){t, 0}, B, T, 0);
    const size_t total =
        2 * act + 2 * keep + 2 * dt__tp_scratch_floats(&c, t, B, T) + dt__block_tmp_floats(&c, B, T) + 96;
    dt_buffer buf, rbuf;
    ck_dt(dt_buffer_alloc(&buf, be, total * sizeof(float)));
    ck_dt(dt_buffer_alloc(&rbuf, be, 4 * NC * 2));
    float *x[2], *d0[2], *d1 = malloc(NC * sizeof *d1), *d2 = malloc(NC * sizeof *d2);
    for (int k = 0; k < 2; k++) {
        x[k] = malloc(NC * sizeof *x[k]), d0[k] = malloc(NC * sizeof *d0[k]);
        randn(x[k], NC, 11 + (uint64_t)k, 1.0f);
        randn(d0[k], NC, 13 + (uint64_t)k, 0.1f);
    }
    for (int bf = 0; bf <= 1; bf++) {
        const dt__rounder rnd = {.dtype = DT_BF16, .scratch = rbuf.data, .capacity = 4 * NC};
        const dt__rounder *rr = bf ? &rnd : NULL;
        dt__arena ar = {.base = buf.data, .capacity = total};
        dt__tp_acts ta[2];
        dt__block_keep kp[2];
        float *scr, *tmpf;
        dt__block_tmp tmp; /* shared by both micro-batches: W recomputes it */
        ck_dt(dt__arena_alloc(&ar, dt__tp_scratch_floats(&c, t, B, T), &scr));
        ck_dt(dt__arena_alloc(&ar, dt__block_tmp_floats(&c, B, T), &tmpf));
        dt__block_tmp_bind(&tmp, &c, B, T, tmpf);
        dt__tp tp = {.comm = g_world, .algo = DT_ALLREDUCE_RING};
        for (int k = 0; k < 2; k++) {
            ck_dt(dt__block_acts_alloc(&ar, &c, (dt__shard){t, 0}, B, T, 1, &tmp, &ta[k]));
            ck_dt(dt__block_keep_alloc(&ar, &c, (dt__shard){t, 0}, B, T, k ? &ta[k] : NULL, &kp[k])); /* both kinds of keep */
            ck_dt(dt__tp_block_forward(&tp, be, &c, &lw, &ta[k], x[k], B, T, rr));
        }
        memset(g1, 0, local.numel * 4);
        memset(g2, 0, local.numel * 4);
        for (int k = 0; k < 2; k++) { /* whole, micro-batch 0 then 1 */
            memcpy(d1, d0[k], NC * sizeof *d1);
            ck_dt(dt__tp_block_backward(&tp, be, &c, &lw, &l1, &ta[k], scr, x[k], d1, B, T, rr));
        }
        const long long before = tp.allreduces_bwd;
        for (int k = 0; k < 2; k++) { /* B0 B1 */
            memcpy(d2, d0[k], NC * sizeof *d2);
            ck_dt(dt__tp_block_backward_b(&tp, be, &c, &lw, &ta[k], scr, x[k], d2, &kp[k], B, T, rr));
            if (k == 1) ck_assert(memcmp(d1, d2, NC * sizeof *d1) == 0); /* the input gradient, B alone */
        }
        ck_assert_int_eq((int)(tp.allreduces_bwd - before), 4);
        for (int k = 0; k < 2; k++) /* W0 W1 */
            ck_dt(dt__block_backward_w(be, &c, t, &lw, &l2, &ta[k], x[k], &kp[k], B, T, rr));
        ck_assert_int_eq((int)(tp.allreduces_bwd - before), 4);
        for (int i = 0; i < local.count; i++)
            ck_assert_msg(memcmp(g1 + local.info[i].offset, g2 + local.info[i].offset, local.info[i].numel * 4) == 0,
                          "rank %d of %d, %s: %s differs between B+W and the whole backward", r, t,
                          bf ? "bf16" : "fp32", local.info[i].name);
    }
    dt_buffer_free(&buf);
    dt_buffer_free(&rbuf);
    dt_paramset_free(&local);
    for (int k = 0; k < 2; k++) free(x[k]), free(d0[k]);
    free(wl), free(g1), free(g2), free(d1), free(d2);
}
END_TEST

START_TEST(test_errors)
{
    dt_gpt_config c = config();
    ck_assert_int_eq(dt__tp_check(&c, 3), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "--tensor-model-parallel-size 3") && strstr(dt_last_error(), "heads 4"), "%s",
                  dt_last_error());
    c.num_heads = 6;
    c.hidden_size = 66;
    ck_assert_int_eq(dt__tp_check(&c, 2), DT_OK);
    c.hidden_size = 64;
    ck_assert_int_eq(dt__tp_check(&c, 6), DT_ERR_INVALID);
}
END_TEST

int main(int argc, char **argv)
{
    (void)argc, (void)argv;
    dt_status st = dt_comm_have_mpi() && getenv("OMPI_COMM_WORLD_SIZE") ? dt_comm_mpi_world(&g_world)
                                                                        : dt_comm_self_create(&g_world);
    if (st != DT_OK || dt_backend_cpu_create(1, &be) != DT_OK) {
        fprintf(stderr, "check_tp: %s\n", dt_last_error());
        return 1;
    }
    Suite *s = suite_create("tp");
    TCase *tc = tcase_create("tp");
    tcase_add_test(tc, test_f_g);
    tcase_add_test(tc, test_block);
    tcase_add_test(tc, test_block_split);
    tcase_add_test(tc, test_errors);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    const int ok = dt_test_run_ranks(s, g_world, "check_tp", 0);
    dt_comm_free(g_world);
    dt_backend_destroy(be);
    if (dt_comm_finalize() != DT_OK) return 1;
    return ok ? 0 : 1;
}
