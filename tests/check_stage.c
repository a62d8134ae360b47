/* check_stage.c: pipeline stages of the GPT against the whole model, in one
 * process (activations and their gradients handed over by copies).
 *
 * For splits of a 4-block model into 1, 2, 3 and 4 stages (even and given
 * splits): the stages' weights are the whole model's slices bit for bit;
 * forward through the stages gives the whole model's loss, and backward the
 * whole model's gradients, within 1e-5 relative + 1e-7 absolute (the same
 * layer code runs on the same values, so only whole-tensor copies differ:
 * in fact they come out equal); two micro-batches in flight in two slots
 * give the sum of the two whole-model backward passes; weights rebound to a
 * copy give the same results as the stage's own (stashing); activation
 * accounting returns to 0 and its peak grows with the slots in flight.
 * Tied and untied embeddings both: tied over p > 1 stages, the last
 * stage's head copy starts equal to wte, and its gradient plus the first
 * stage's wte gradient is the whole model's wte gradient (two partial
 * sums added once: within the same tolerance). A NaN weight in a block or
 * the head of a stage is named by dt__stage_forward_check in whole-model
 * layer positions. */
#include <math.h>
#include <string.h>

#include "dt_data.h"
#include "stage.h"
#include "testutil.h"

static dt_backend *be;

static void setup(void) { ck_dt(dt_backend_cpu_create(1, &be)); }
static void teardown(void) { dt_backend_destroy(be); }

static int tie = 1;

static dt_gpt_config tiny4(void)
{
    dt_gpt_config c;
    ck_dt(dt_gpt_config_preset("tiny", &c));
    c.tie_embeddings = tie;
    c.num_layers = 4;
    c.vocab_size = 32;
    c.seq_len = 16;
    return c;
}

static void batch(int seed, int B, int T, int V, int32_t *tok, int32_t *tgt)
{
    for (int i = 0; i < B * T; i++) {
        tok[i] = (i * 7 + seed * 13) % V;
        tgt[i] = (i % 5 == 0) ? -1 : (i * 11 + seed * 3) % V;
    }
}

/* Run nmb micro-batches through p stages (split may be NULL) and compare
 * with the whole model. */
static void compare(int p, const int *split, int nmb, int stash)
{
    const dt_gpt_config c = tiny4();
    const int B = 3, T = 8, N = B * T;
    dt_gpt *m = NULL;
    ck_dt(dt_gpt_create(&c, be, &m));
    ck_dt(dt_gpt_init_weights(m, 42));
    ck_dt(dt_gpt_zero_grad(m));
    dt__stage *st[4] = {0};
    for (int s = 0; s < p; s++) {
        int l0, l1;
        ck_dt(dt__stage_split(c.num_layers, p, split, &l0, &l1, s));
        ck_dt(dt__stage_create(&c, be, l0, l1, s == 0, s == p - 1, nmb, B, T, NULL, NULL, &st[s]));
        ck_dt(dt__stage_init_weights(st[s], &(dt_gpt_init){.seed = 42}));
        ck_dt(dt__stage_zero_grad(st[s]));
        const dt_paramset *L = dt__stage_layout(st[s]), *W = dt_gpt_layout(m);
        const int *wi = dt__stage_whole_index(st[s]);
        ck_assert_int_eq(dt__stage_has_tied_copy(st[s]), tie && p > 1 && s == p - 1);
        for (int t = 0; t < L->count; t++) /* the tied copy: wte's values */
            ck_assert_msg(memcmp(dt_gpt_params(m) + W->info[wi[t]].offset, dt__stage_params(st[s]) + L->info[t].offset,
                                 L->info[t].numel * sizeof(float)) == 0,
                          "stage %d of %d: %s differs from the whole model's %s", s, p, L->info[t].name,
                          W->info[wi[t]].name);
    }
    int32_t tok[8][24], tgt[8][24];
    float loss_whole[8], loss_pipe[8];
    for (int k = 0; k < nmb; k++) {
        batch(k, B, T, c.vocab_size, tok[k], tgt[k]);
        ck_dt(dt_gpt_forward(m, tok[k], tgt[k], B, T, &loss_whole[k]));
        ck_dt(dt_gpt_backward(m, 1.0f));
    }
    /* copies of the weights, used instead of the stage's own (a stash) */
    float *copies[4] = {0};
    for (int s = 0; s < p && stash; s++) {
        size_t n = dt__stage_layout(st[s])->numel;
        ck_dt(be->alloc(be, n * sizeof(float), (void **)&copies[s]));
        memcpy(copies[s], dt__stage_params(st[s]), n * sizeof(float));
    }
    /* all forwards (slot k holds micro-batch k), then all backwards */
    for (int k = 0; k < nmb; k++) {
        const float *x = NULL;
        for (int s = 0; s < p; s++) {
            if (s > 0) memcpy(dt__stage_input(st[s], k), x, (size_t)N * c.hidden_size * sizeof(float));
            int nc = 0;
            ck_dt(dt__stage_forward(st[s], k, copies[s], s == 0 ? tok[k] : NULL, tgt[k], &x, &loss_pipe[k], &nc));
        }
        ck_assert_msg(dt_test_close(loss_pipe[k], loss_whole[k], 1e-7, 1e-5), "p=%d mb %d: loss %.9g, whole %.9g", p, k,
                      (double)loss_pipe[k], (double)loss_whole[k]);
    }
    const size_t peak = dt__stage_peak_activation_bytes(st[0]);
    ck_assert(dt__stage_activation_bytes(st[0]) == peak);
    for (int k = nmb - 1; k >= 0; k--) {
        int n_counted = 0;
        for (int i = 0; i < N; i++) n_counted += tgt[k][i] >= 0;
        const float *dx = NULL;
        for (int s = p - 1; s >= 0; s--) {
            if (s < p - 1) memcpy(dt__stage_dout(st[s]), dx, (size_t)N * c.hidden_size * sizeof(float));
            ck_dt(dt__stage_backward(st[s], k, copies[s], 1.0f / (float)n_counted, &dx));
        }
    }
    /* tied over p > 1 stages: the first stage's wte gradient gets the last's copy's, as the pipeline's sum does */
    size_t to0, to1, tn0, tn1;
    dt__stage_tied_range(st[0], &to0, &tn0);
    dt__stage_tied_range(st[p - 1], &to1, &tn1);
    float *tg0 = dt__stage_grads(st[0]) + to0, *tg1 = dt__stage_grads(st[p - 1]) + to1;
    ck_assert_int_eq((int)tn0, tie && p > 1 ? c.vocab_size * c.hidden_size : 0);
    ck_assert_int_eq((int)tn1, (int)tn0);
    for (size_t j = 0; j < tn0; j++) tg0[j] += tg1[j];
    for (int s = 0; s < p; s++) {
        ck_assert_int_eq((int)dt__stage_activation_bytes(st[s]), 0);
        const dt_paramset *L = dt__stage_layout(st[s]), *W = dt_gpt_layout(m);
        const int *wi = dt__stage_whole_index(st[s]);
        const float *gs = dt__stage_grads(st[s]);
        for (int t = 0; t < L->count; t++) {
            if (dt__stage_has_tied_copy(st[s]) && t == L->count - 1) continue; /* added into stage 0's */
            const float *gw = dt_gpt_grads(m) + W->info[wi[t]].offset;
            for (size_t j = 0; j < L->info[t].numel; j++) {
                size_t o = L->info[t].offset + j;
                ck_assert_msg(dt_test_close(gs[o], gw[j], 1e-7, 1e-5), "p=%d stage %d %s[%zu]: grad %.9g, whole %.9g",
                              p, s, L->info[t].name, j, (double)gs[o], (double)gw[j]);
            }
        }
        if (copies[s]) be->free(be, copies[s]);
        dt__stage_free(st[s]);
    }
    dt_gpt_free(m);
}

START_TEST(test_even_splits)
{
    for (tie = 0; tie <= 1; tie++)
        for (int p = 1; p <= 4; p++) compare(p, NULL, 1, 0);
    tie = 1;
}
END_TEST

START_TEST(test_given_split_two_in_flight)
{
    static const int split[3] = {1, 2, 1};
    compare(3, split, 2, 0);
}
END_TEST

START_TEST(test_stashed_weights) { compare(2, NULL, 3, 1); }
END_TEST

START_TEST(test_peak_grows_with_slots)
{
    const dt_gpt_config c = tiny4();
    size_t peak[3];
    for (int n = 1; n <= 2; n++) {
        dt__stage *st = NULL;
        ck_dt(dt__stage_create(&c, be, 0, 2, 1, 0, n, 2, 8, NULL, NULL, &st));
        ck_dt(dt__stage_init_weights(st, &(dt_gpt_init){.seed = 1}));
        int32_t tok[16] = {0};
        for (int k = 0; k < n; k++) ck_dt(dt__stage_forward(st, k, NULL, tok, NULL, NULL, NULL, NULL));
        peak[n] = dt__stage_peak_activation_bytes(st);
        ck_assert_int_eq(dt__stage_forward(st, 0, NULL, tok, NULL, NULL, NULL, NULL), DT_ERR_INVALID); /* busy */
        for (int k = 0; k < n; k++) ck_dt(dt__stage_release(st, k));
        ck_assert_int_eq((int)dt__stage_activation_bytes(st), 0);
        dt__stage_free(st);
    }
    ck_assert_msg(peak[2] == 2 * peak[1], "peak with 2 in flight %zu, with 1 %zu", peak[2], peak[1]);
}
END_TEST

/* Stage s's tensor `name` (whole-model name), element 0, in backend (CPU) memory. */
static float *stage_weight(dt__stage *st, const char *name)
{
    const dt_paramset *L = dt__stage_layout(st);
    for (int i = 0; i < L->count; i++)
        if (!strcmp(L->info[i].name, name)) return dt__stage_params(st) + L->info[i].offset;
    ck_abort_msg("no tensor %s in the stage", name);
    return NULL;
}

/* dt__stage_forward_check names the first layer with a non-finite output in
 * whole-model positions (1 + l for block l, num_layers + 1 the head), -1
 * when none, and leaves the slot busy as a forward does. */
START_TEST(test_forward_check_names_layer)
{
    const dt_gpt_config c = tiny4();
    const int B = 2, T = 8, N = B * T;
    int32_t tok[16], tgt[16];
    batch(1, B, T, c.vocab_size, tok, tgt);
    float x[16 * 64];
    ck_assert_int_le(N * c.hidden_size, (int)(sizeof x / sizeof *x));
    for (int i = 0; i < N * c.hidden_size; i++) x[i] = 0.01f * (float)(i % 17) - 0.08f;
    static const struct {
        int l0, l1, last;
        const char *tensor; /* made NaN, or NULL */
        int want;
    } cases[] = {{1, 3, 0, NULL, -1}, {1, 3, 0, "h.2.fc.w", 3}, {1, 3, 0, "h.1.ln1.w", 2}, {2, 4, 1, "lnf.w", 5}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        dt__stage *st = NULL;
        ck_dt(dt__stage_create(&c, be, cases[k].l0, cases[k].l1, 0, cases[k].last, 1, B, T, NULL, NULL, &st));
        ck_dt(dt__stage_init_weights(st, &(dt_gpt_init){.seed = 7}));
        if (cases[k].tensor) *stage_weight(st, cases[k].tensor) = NAN;
        memcpy(dt__stage_input(st, 0), x, (size_t)N * c.hidden_size * sizeof(float));
        const float *out = NULL;
        int pos = -2;
        ck_dt(dt__stage_forward_check(st, 0, NULL, cases[k].last ? tgt : NULL, &out, &pos));
        ck_assert_msg(pos == cases[k].want, "stage h.%d..h.%d, NaN in %s: position %d, expected %d", cases[k].l0,
                      cases[k].l1 - 1, cases[k].tensor ? cases[k].tensor : "none", pos, cases[k].want);
        ck_assert_int_eq(dt__stage_forward(st, 0, NULL, NULL, NULL, NULL, NULL, NULL), DT_ERR_INVALID); /* busy */
        ck_dt(dt__stage_release(st, 0));
        dt__stage_free(st);
    }
}
END_TEST

START_TEST(test_split_errors)
{
    int l0, l1;
    ck_assert_int_eq(dt__stage_split(2, 3, NULL, &l0, &l1, 0), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "--pipeline-model-parallel-size 3"), "%s", dt_last_error());
    static const int bad[2] = {1, 2};
    ck_assert_int_eq(dt__stage_split(4, 2, bad, &l0, &l1, 0), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "--pipeline-split") && strstr(dt_last_error(), "3 blocks"), "%s",
                  dt_last_error());
    ck_dt(dt__stage_split(5, 2, NULL, &l0, &l1, 1));
    ck_assert(l0 == 3 && l1 == 5);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stage");
    TCase *tc = tcase_create("stage");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_even_splits);
    tcase_add_test(tc, test_given_split_two_in_flight);
    tcase_add_test(tc, test_stashed_weights);
    tcase_add_test(tc, test_peak_grows_with_slots);
    tcase_add_test(tc, test_split_errors);
    tcase_add_test(tc, test_forward_check_names_layer);
    suite_add_tcase(s, tc);
    return dt_test_run(s);
}
