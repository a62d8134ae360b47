/* check_bw.c: the zero-bubble split of a pipeline stage's backward into B
 * (the input gradient) and W (the parameter gradients), against the whole
 * backward, in one process (stages chained by copies, as check_stage.c).
 *
 * Three micro-batches in flight on p = 1 (embedding and head on one
 * stage) and p = 3 stages (first, middle, last) of a 4-block model, tied
 * and untied, in FP32, bf16 and fp16, without recomputation, selective,
 * and full with groups of 1 and 2 blocks, run
 *   whole:  whole0 whole1 whole2
 *   split:  B0 B1 B2 W0 W1 W2
 *   mixed:  B0 B1 W0 B2 W1 W2
 * (each B over the stages from the last, each W on every stage). The input
 * gradients each B hands back and every stage's parameter gradients are
 * the whole backward's bit for bit: B and W run the same ops on the same
 * values, and the W of the micro-batches run in their order, so each
 * gradient element accumulates the same terms in the same order. B alone
 * leaves the parameter gradients untouched. The activation accounting
 * returns to 0, and without recomputation in FP32 the split's peak is the
 * whole backward's plus exactly what B keeps for W for three micro-batches
 * (lib/model/runner_backward.c). A W before its B, a B of a stage not set up for the
 * split, and a second B are refused. */
#include <string.h>

#include "gpt_layers.h"
#include "stage.h"
#include "testutil.h"

static dt_backend *be;

static void setup(void) { ck_dt(dt_backend_cpu_create(1, &be)); }
static void teardown(void) { dt_backend_destroy(be); }

enum { NMB = 3, MAXP = 3, B_ = 2, T_ = 8 };

static dt_gpt_config model(int tie)
{
    dt_gpt_config c;
    ck_dt(dt_gpt_config_preset("tiny", &c));
    c.tie_embeddings = tie;
    c.num_layers = 4;
    c.vocab_size = 32;
    c.seq_len = 16;
    return c;
}

static void batch(int k, int V, int32_t *tok, int32_t *tgt)
{
    for (int i = 0; i < B_ * T_; i++) {
        tok[i] = (i * 7 + k * 13) % V;
        tgt[i] = (i % 5 == 0) ? -1 : (i * 11 + k * 3) % V;
    }
}

typedef struct run_cfg {
    int p, tie;
    dt_dtype dtype;
    dt_recompute rec;
    int k; /* full: blocks per group */
} run_cfg;

/* What a run leaves: every stage's gradients, the input gradient each
 * stage after the first handed back for each micro-batch, each stage's
 * peak activation bytes. */
typedef struct run_out {
    float *grads[MAXP];
    size_t numel[MAXP];
    float *dx[MAXP][NMB];
    size_t peak[MAXP];
} run_out;

static void run_free(run_out *o)
{
    for (int s = 0; s < MAXP; s++) {
        free(o->grads[s]);
        for (int k = 0; k < NMB; k++) free(o->dx[s][k]);
    }
    memset(o, 0, sizeof *o);
}

/* order: "w" whole, "b" B, "W" W, each followed by its micro-batch. */
static void run(const run_cfg *rc, const char *order, run_out *o)
{
    const dt_gpt_config c = model(rc->tie);
    const int p = rc->p, N = B_ * T_;
    const size_t NC = (size_t)N * c.hidden_size;
    memset(o, 0, sizeof *o);
    dt__stage *st[MAXP] = {0};
    for (int s = 0; s < p; s++) {
        int l0, l1;
        ck_dt(dt__stage_split(c.num_layers, p, NULL, &l0, &l1, s));
        ck_dt(dt__stage_create(&c, be, l0, l1, s == 0, s == p - 1, NMB, B_, T_, NULL, NULL, &st[s]));
        ck_dt(dt__stage_init_weights(st[s], &(dt_gpt_init){.seed = 42}));
        ck_dt(dt__stage_set_precision(st[s], rc->dtype));
        ck_dt(dt__stage_set_recompute(st[s], rc->rec, rc->k));
        ck_dt(dt__stage_set_split(st[s], strchr(order, 'b') != NULL));
        ck_dt(dt__stage_zero_grad(st[s]));
    }
    int32_t tok[NMB][B_ * T_], tgt[NMB][B_ * T_];
    for (int k = 0; k < NMB; k++) {
        batch(k, c.vocab_size, tok[k], tgt[k]);
        const float *x = NULL;
        for (int s = 0; s < p; s++) {
            if (s > 0) memcpy(dt__stage_input(st[s], k), x, NC * sizeof(float));
            float loss;
            int nc;
            ck_dt(dt__stage_forward(st[s], k, NULL, s == 0 ? tok[k] : NULL, tgt[k], &x, &loss, &nc));
        }
    }
    int b_done = 0;
    for (const char *op = order; op[0] && op[1]; op += 2) {
        const int k = op[1] - '0';
        if (op[0] == 'W') {
            for (int s = 0; s < p; s++) ck_dt(dt__stage_backward_w(st[s], k, NULL));
            continue;
        }
        int n_counted = 0;
        for (int i = 0; i < N; i++) n_counted += tgt[k][i] >= 0;
        const float dloss = 1.0f / (float)n_counted;
        const float *dx = NULL;
        for (int s = p - 1; s >= 0; s--) {
            if (s < p - 1) memcpy(dt__stage_dout(st[s]), dx, NC * sizeof(float));
            if (op[0] == 'w') ck_dt(dt__stage_backward(st[s], k, NULL, dloss, &dx));
            else ck_dt(dt__stage_backward_b(st[s], k, NULL, dloss, &dx));
            if (s > 0) {
                o->dx[s][k] = malloc(NC * sizeof(float));
                memcpy(o->dx[s][k], dx, NC * sizeof(float));
            }
        }
        if (op[0] == 'b' && ++b_done == 1) /* B alone: no parameter gradient yet */
            for (int s = 0; s < p; s++) {
                const size_t n = dt__stage_layout(st[s])->numel;
                const float *g = dt__stage_grads(st[s]);
                for (size_t j = 0; j < n; j++) ck_assert_msg(g[j] == 0.0f, "stage %d: B wrote gradient %zu", s, j);
            }
    }
    for (int s = 0; s < p; s++) {
        ck_assert_int_eq((int)dt__stage_activation_bytes(st[s]), 0);
        o->numel[s] = dt__stage_layout(st[s])->numel;
        o->grads[s] = malloc(o->numel[s] * sizeof(float));
        memcpy(o->grads[s], dt__stage_grads(st[s]), o->numel[s] * sizeof(float));
        o->peak[s] = dt__stage_peak_activation_bytes(st[s]);
        dt__stage_free(st[s]);
    }
}

static const char *dtype_name(dt_dtype d) { return d == DT_F32 ? "fp32" : d == DT_BF16 ? "bf16" : "fp16"; }

static void same(const run_cfg *rc, const run_out *a, const run_out *b, const char *what)
{
    for (int s = 0; s < rc->p; s++) {
        ck_assert(a->numel[s] == b->numel[s]);
        for (size_t j = 0; j < a->numel[s]; j++)
            ck_assert_msg(memcmp(&a->grads[s][j], &b->grads[s][j], sizeof(float)) == 0,
                          "p=%d tie=%d %s recompute %d/%d, %s: stage %d gradient %zu %.9g, whole %.9g", rc->p, rc->tie,
                          dtype_name(rc->dtype), (int)rc->rec, rc->k, what, s, j, (double)b->grads[s][j],
                          (double)a->grads[s][j]);
        for (int k = 0; s > 0 && k < NMB; k++)
            ck_assert_msg(memcmp(a->dx[s][k], b->dx[s][k], (size_t)B_ * T_ * 64 * sizeof(float)) == 0,
                          "p=%d %s recompute %d, %s: stage %d input gradient of micro-batch %d", rc->p,
                          dtype_name(rc->dtype), (int)rc->rec, what, s, k);
    }
}

static void check_all(dt_dtype dtype)
{
    static const struct {
        dt_recompute rec;
        int k;
    } recs[] = {{DT_RECOMPUTE_NONE, 0}, {DT_RECOMPUTE_SELECTIVE, 0}, {DT_RECOMPUTE_FULL, 1}, {DT_RECOMPUTE_FULL, 2}};
    for (int p = 1; p <= MAXP; p += 2)
        for (int tie = 0; tie <= 1; tie++)
            for (size_t r = 0; r < sizeof recs / sizeof recs[0]; r++) {
                const run_cfg rc = {.p = p, .tie = tie, .dtype = dtype, .rec = recs[r].rec, .k = recs[r].k};
                run_out whole, split, mixed;
                run(&rc, "w0w1w2", &whole);
                run(&rc, "b0b1b2W0W1W2", &split);
                run(&rc, "b0b1W0b2W1W2", &mixed);
                same(&rc, &whole, &split, "B0 B1 B2 W0 W1 W2");
                same(&rc, &whole, &mixed, "B0 B1 W0 B2 W1 W2");
                if (dtype == DT_F32 && recs[r].rec == DT_RECOMPUTE_NONE) {
                    /* the peak: three micro-batches' forwards plus what their B kept */
                    const dt_gpt_config c = model(tie);
                    const size_t NC = ((size_t)B_ * T_ * c.hidden_size + 15) & ~(size_t)15;
                    for (int s = 0; s < p; s++) {
                        int l0, l1;
                        ck_dt(dt__stage_split(c.num_layers, p, NULL, &l0, &l1, s));
                        size_t keep = (size_t)(l1 - l0) * dt__block_keep_floats(&c, DT__WHOLE, B_, T_, 1);
                        keep += (s == p - 1 ? NC : 0) + (s == 0 ? NC : 0);
                        ck_assert_msg(split.peak[s] == whole.peak[s] + NMB * keep * sizeof(float),
                                      "p=%d stage %d: split peak %zu, whole %zu, kept %zu floats per micro-batch", p, s,
                                      split.peak[s], whole.peak[s], keep);
                    }
                }
                run_free(&whole);
                run_free(&split);
                run_free(&mixed);
            }
}

START_TEST(test_fp32) { check_all(DT_F32); }
END_TEST

START_TEST(test_bf16) { check_all(DT_BF16); }
END_TEST

START_TEST(test_fp16) { check_all(DT_F16); }
END_TEST

START_TEST(test_refusals)
{
    const dt_gpt_config c = model(0);
    dt__stage *st = NULL;
    ck_dt(dt__stage_create(&c, be, 0, 4, 1, 1, 2, B_, T_, NULL, NULL, &st));
    ck_dt(dt__stage_init_weights(st, &(dt_gpt_init){.seed = 1}));
    int32_t tok[B_ * T_], tgt[B_ * T_];
    batch(0, c.vocab_size, tok, tgt);
    float loss;
    int nc;
    ck_dt(dt__stage_forward(st, 0, NULL, tok, tgt, NULL, &loss, &nc));
    ck_assert_int_eq(dt__stage_backward_b(st, 0, NULL, 0.1f, NULL), DT_ERR_INVALID); /* not set up */
    ck_assert_int_eq(dt__stage_set_split(st, 1), DT_ERR_INVALID);                    /* in flight */
    ck_dt(dt__stage_release(st, 0));
    ck_dt(dt__stage_set_split(st, 1));
    ck_dt(dt__stage_forward(st, 0, NULL, tok, tgt, NULL, &loss, &nc));
    ck_assert_int_eq(dt__stage_backward_w(st, 0, NULL), DT_ERR_INVALID); /* no B yet */
    ck_assert_msg(strstr(dt_last_error(), "not past its B"), "%s", dt_last_error());
    ck_dt(dt__stage_backward_b(st, 0, NULL, 0.1f, NULL));
    ck_assert_int_eq(dt__stage_backward_b(st, 0, NULL, 0.1f, NULL), DT_ERR_INVALID); /* a second B */
    ck_assert_int_eq(dt__stage_backward(st, 0, NULL, 0.1f, NULL), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "waiting for its W"), "%s", dt_last_error());
    ck_dt(dt__stage_backward_w(st, 0, NULL));
    ck_assert_int_eq((int)dt__stage_activation_bytes(st), 0);
    dt__stage_free(st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bw");
    TCase *tc = tcase_create("bw");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_fp32);
    tcase_add_test(tc, test_bf16);
    tcase_add_test(tc, test_fp16);
    tcase_add_test(tc, test_refusals);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return dt_test_run(s);
}
