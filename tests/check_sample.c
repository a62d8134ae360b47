/* check_sample.c: the sampler and the generation loop (dt_sample.h)
 * against hand computations: the softmax with temperature, top-k
 * truncation (exactly k, ties towards the lower token), greedy, the
 * inverse-CDF pick, the seeded coins, and generation on a small random GPT
 * (deterministic, top-k 1 equal to greedy, a longer run extending a
 * shorter one, the window cropped to the context). */
#include "testutil.h"

#include <string.h>

static const float L4[4] = {1.0f, 2.0f, 3.0f, 0.0f};

static void expect_probs(const double *got, const double *want, int V)
{
    for (int i = 0; i < V; i++)
        ck_assert_msg(dt_test_close(got[i], want[i], 1e-9, 0), "p[%d] = %.9f, expected %.9f", i, got[i], want[i]);
}

/* exp((l - 3) / T) normalised, worked out by hand (9 digits) */
START_TEST(test_temperature)
{
    double p[4];
    ck_dt(dt_sample_probs(L4, 4, 1.0f, 0, p));
    expect_probs(p, (const double[]){0.087144319, 0.236882818, 0.643914260, 0.032058603}, 4);
    ck_dt(dt_sample_probs(L4, 4, 2.0f, 0, p));
    expect_probs(p, (const double[]){0.167405097, 0.276004345, 0.455054234, 0.101536324}, 4);
    /* temperature 0: all the mass on the argmax */
    ck_dt(dt_sample_probs(L4, 4, 0.0f, 0, p));
    expect_probs(p, (const double[]){0, 0, 1, 0}, 4);
    /* a tiny temperature: still finite, the argmax's */
    ck_dt(dt_sample_probs(L4, 4, 1e-30f, 0, p));
    expect_probs(p, (const double[]){0, 0, 1, 0}, 4);
}
END_TEST

START_TEST(test_top_k)
{
    double p[4];
    /* k = 2 keeps tokens 2 and 1: e^-1 and 1 over their sum */
    ck_dt(dt_sample_probs(L4, 4, 1.0f, 2, p));
    expect_probs(p, (const double[]){0, 0.268941421, 0.731058579, 0}, 4);
    /* k = 3 at T = 0.5: exp(2(l - 3)) over tokens 0, 1, 2 */
    ck_dt(dt_sample_probs(L4, 4, 0.5f, 3, p));
    expect_probs(p, (const double[]){0.015876240, 0.117310428, 0.866813332, 0}, 4);
    /* k = V: no truncation */
    double q[4];
    ck_dt(dt_sample_probs(L4, 4, 1.0f, 4, p));
    ck_dt(dt_sample_probs(L4, 4, 1.0f, 0, q));
    expect_probs(p, q, 4);
    /* ties: exactly k kept, the lower tokens first */
    const float tie[4] = {5.0f, 5.0f, 1.0f, 5.0f};
    ck_dt(dt_sample_probs(tie, 4, 1.0f, 2, p));
    expect_probs(p, (const double[]){0.5, 0.5, 0, 0}, 4);
    /* k = 1 is greedy, and greedy's tie goes to the lowest token */
    ck_dt(dt_sample_probs(tie, 4, 1.0f, 1, p));
    expect_probs(p, (const double[]){1, 0, 0, 0}, 4);
    ck_dt(dt_sample_probs(tie, 4, 0.0f, 0, p));
    expect_probs(p, (const double[]){1, 0, 0, 0}, 4);
}
END_TEST

START_TEST(test_pick)
{
    const double p[3] = {0.2, 0.3, 0.5};
    ck_assert_int_eq(dt_sample_pick(p, 3, 0.0), 0);
    ck_assert_int_eq(dt_sample_pick(p, 3, 0.199), 0);
    ck_assert_int_eq(dt_sample_pick(p, 3, 0.2), 1);
    ck_assert_int_eq(dt_sample_pick(p, 3, 0.499), 1);
    ck_assert_int_eq(dt_sample_pick(p, 3, 0.5), 2);
    ck_assert_int_eq(dt_sample_pick(p, 3, 0.999), 2);
    /* zero-probability tokens are never picked, even at coin 0 or past the sum */
    const double z[4] = {0, 0.5, 0, 0.5};
    ck_assert_int_eq(dt_sample_pick(z, 4, 0.0), 1);
    ck_assert_int_eq(dt_sample_pick(z, 4, 0.7), 3);
    const double short_sum[3] = {0.3, 0.3, 0};
    ck_assert_int_eq(dt_sample_pick(short_sum, 3, 0.9), 1);
}
END_TEST

/* The coins are dt_rng_seed3(seed, "sample", 0)'s uniforms: each draw is
 * the pick of the hand-made CDF at the coin an identical generator gives. */
START_TEST(test_token_coins)
{
    dt_rng a, b, c;
    dt_rng_seed(&a, 42);
    dt_rng_seed(&b, 42);
    dt_rng_seed(&c, 43);
    const double cdf[4] = {0.087144319, 0.087144319 + 0.236882818, 0.087144319 + 0.236882818 + 0.643914260, 1.0};
    double scratch[4];
    int same_as_c = 1, counts[4] = {0};
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        int32_t t, u;
        ck_dt(dt_sample_token(L4, 4, 1.0f, 0, &a, scratch, &t));
        const double coin = dt_rng_uniform(&b);
        int want = 0;
        while (want < 3 && coin >= cdf[want]) want++;
        ck_assert_msg(t == want, "draw %d: token %d, the CDF at coin %.9f gives %d", i, t, coin, want);
        ck_dt(dt_sample_token(L4, 4, 1.0f, 0, &c, scratch, &u));
        same_as_c &= t == u;
        counts[t]++;
    }
    ck_assert_msg(!same_as_c, "seeds 42 and 43 drew the same %d tokens", n);
    /* the frequencies follow the distribution (4 sigma at n = 20000: < 0.014) */
    const double want[4] = {0.087144319, 0.236882818, 0.643914260, 0.032058603};
    for (int i = 0; i < 4; i++)
        ck_assert_msg(fabs((double)counts[i] / n - want[i]) < 0.014, "token %d drawn %d times in %d, p = %.4f", i,
                      counts[i], n, want[i]);
    /* greedy draws no coin: the generator is where it was */
    dt_rng d = a;
    int32_t t;
    ck_dt(dt_sample_token(L4, 4, 0.0f, 0, &a, scratch, &t));
    ck_assert_int_eq(t, 2);
    ck_assert_uint_eq(dt_rng_u64(&a), dt_rng_u64(&d));
}
END_TEST

START_TEST(test_errors)
{
    double p[4];
    ck_assert_int_eq(dt_sample_probs(L4, 4, -1.0f, 0, p), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--temperature"));
    ck_assert_int_eq(dt_sample_probs(L4, 4, NAN, 0, p), DT_ERR_INVALID);
    ck_assert_int_eq(dt_sample_probs(L4, 4, INFINITY, 0, p), DT_ERR_INVALID);
    ck_assert_int_eq(dt_sample_probs(L4, 4, 1.0f, 5, p), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--top-k 5: expected 0..4"));
    ck_assert_int_eq(dt_sample_probs(L4, 4, 1.0f, -1, p), DT_ERR_INVALID);
    const float bad[3] = {0.0f, NAN, 1.0f};
    ck_assert_int_eq(dt_sample_probs(bad, 3, 1.0f, 0, p), DT_ERR_NUMERIC);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "token 1"));
    ck_assert_int_eq(dt_sample_check(0.0f, 256, 256), DT_OK);
    ck_assert_int_eq(dt_sample_check(0.0f, 257, 256), DT_ERR_INVALID);
}
END_TEST

/* ---- generation on a small random GPT ---------------------------------- */

static dt_gpt *small_gpt(dt_backend **be)
{
    ck_dt(dt_backend_cpu_create(1, be));
    const dt_gpt_config c = {.vocab_size = 300, .seq_len = 8, .num_layers = 1, .num_heads = 2, .hidden_size = 16};
    dt_gpt *m = NULL;
    ck_dt(dt_gpt_create(&c, *be, &m));
    ck_dt(dt_gpt_init_weights(m, 7));
    return m;
}

typedef struct seen {
    int n, stop_at;
    int32_t tok[64];
} seen;

static dt_status on_token(void *ctx, int32_t t)
{
    seen *s = ctx;
    if (s->n == s->stop_at) return DT_FAIL(DT_ERR_INVALID, "stopped at %d", s->n);
    s->tok[s->n++] = t;
    return DT_OK;
}

START_TEST(test_generate)
{
    dt_backend *be;
    dt_gpt *m = small_gpt(&be);
    const int32_t prompt[3] = {10, 20, 30};
    dt_generate_config g = {.n_new = 20, .context = 0, .vocab = 256, .temperature = 1.0f, .top_k = 0, .seed = 5};
    int32_t a[20], b[20], c[20], d[10];
    ck_dt(dt_gpt_generate(m, &g, prompt, 3, a, NULL, NULL));
    ck_dt(dt_gpt_generate(m, &g, prompt, 3, b, NULL, NULL));
    ck_assert_mem_eq(a, b, sizeof a);                         /* same seed, same text */
    for (int i = 0; i < 20; i++) ck_assert_int_lt(a[i], 256); /* the tokenizer's tokens only */
    g.seed = 6;
    ck_dt(dt_gpt_generate(m, &g, prompt, 3, c, NULL, NULL));
    ck_assert_msg(memcmp(a, c, sizeof a) != 0, "seeds 5 and 6 made the same 20 tokens");
    /* a shorter run is the longer one's beginning */
    g.seed = 5;
    g.n_new = 10;
    ck_dt(dt_gpt_generate(m, &g, prompt, 3, d, NULL, NULL));
    ck_assert_mem_eq(a, d, sizeof d);
    /* top-k 1 is greedy, whatever the temperature and seed */
    g.n_new = 20;
    g.temperature = 0.0f;
    ck_dt(dt_gpt_generate(m, &g, prompt, 3, a, NULL, NULL));
    g.temperature = 3.0f;
    g.top_k = 1;
    g.seed = 99;
    ck_dt(dt_gpt_generate(m, &g, prompt, 3, b, NULL, NULL));
    ck_assert_mem_eq(a, b, sizeof a);
    /* greedy by hand: the argmax of the last position's logits over the
     * last 8 tokens (the context), read from the whole logits */
    int32_t seq[23];
    memcpy(seq, prompt, sizeof prompt);
    float logits[8 * 300];
    for (int i = 0; i < 20; i++) {
        const int len = 3 + i, T = len < 8 ? len : 8;
        ck_dt(dt_gpt_forward(m, seq + len - T, NULL, 1, T, NULL));
        ck_dt(dt_gpt_logits(m, logits));
        const float *row = logits + (size_t)(T - 1) * 300;
        int best = 0;
        for (int v = 1; v < 256; v++)
            if (row[v] > row[best]) best = v;
        ck_assert_msg(a[i] == best, "greedy token %d: %d, the argmax is %d", i, a[i], best);
        seq[len] = best;
    }
    /* the callback sees every token, and its failure stops the run */
    seen s = {.stop_at = -1};
    g.temperature = 0.0f;
    g.top_k = 0;
    ck_dt(dt_gpt_generate(m, &g, prompt, 3, NULL, on_token, &s));
    ck_assert_int_eq(s.n, 20);
    ck_assert_mem_eq(s.tok, a, sizeof a);
    seen t = {.stop_at = 4};
    ck_assert_int_eq(dt_gpt_generate(m, &g, prompt, 3, NULL, on_token, &t), DT_ERR_INVALID);
    ck_assert_int_eq(t.n, 4);
    dt_gpt_free(m);
    dt_backend_destroy(be);
}
END_TEST

/* A prompt longer than the context: only its last `context` tokens count. */
START_TEST(test_generate_crop)
{
    dt_backend *be;
    dt_gpt *m = small_gpt(&be);
    int32_t long_prompt[12], tail[4];
    for (int i = 0; i < 12; i++) long_prompt[i] = 40 + 7 * i;
    memcpy(tail, long_prompt + 8, sizeof tail);
    dt_generate_config g = {.n_new = 6, .context = 4, .vocab = 256, .temperature = 0.8f, .seed = 3};
    int32_t a[6], b[6];
    ck_dt(dt_gpt_generate(m, &g, long_prompt, 12, a, NULL, NULL));
    ck_dt(dt_gpt_generate(m, &g, tail, 4, b, NULL, NULL));
    ck_assert_mem_eq(a, b, sizeof a);
    /* the whole model context (0: seq_len 8) is used when asked */
    g.context = 9;
    ck_assert_int_eq(dt_gpt_generate(m, &g, tail, 4, a, NULL, NULL), DT_ERR_INVALID);
    g.context = 0;
    g.n_new = 0;
    ck_assert_int_eq(dt_gpt_generate(m, &g, tail, 4, a, NULL, NULL), DT_ERR_INVALID);
    g.n_new = 1;
    ck_assert_int_eq(dt_gpt_generate(m, &g, tail, 0, a, NULL, NULL), DT_ERR_INVALID);
    g.top_k = 257;
    ck_assert_int_eq(dt_gpt_generate(m, &g, tail, 4, a, NULL, NULL), DT_ERR_INVALID);
    dt_gpt_free(m);
    dt_backend_destroy(be);
}
END_TEST

/* The model's row copy equals the row of the whole logits. */
START_TEST(test_logits_row)
{
    dt_backend *be;
    dt_gpt *m = small_gpt(&be);
    const int32_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    float all[2 * 5 * 300], row[300];
    ck_assert_int_eq(dt_gpt_logits_row(m, 0, 0, row), DT_ERR_INVALID); /* no forward yet */
    ck_dt(dt_gpt_forward(m, tok, NULL, 2, 5, NULL));
    ck_dt(dt_gpt_logits(m, all));
    ck_dt(dt_gpt_logits_row(m, 1, 3, row));
    ck_assert_mem_eq(row, all + (size_t)(1 * 5 + 3) * 300, sizeof row);
    ck_assert_int_eq(dt_gpt_logits_row(m, 2, 0, row), DT_ERR_INVALID);
    ck_assert_int_eq(dt_gpt_logits_row(m, 0, 5, row), DT_ERR_INVALID);
    dt_gpt_free(m);
    dt_backend_destroy(be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sample");
    TCase *sampler = tcase_create("sampler");
    tcase_add_test(sampler, test_temperature);
    tcase_add_test(sampler, test_top_k);
    tcase_add_test(sampler, test_pick);
    tcase_add_test(sampler, test_token_coins);
    tcase_add_test(sampler, test_errors);
    suite_add_tcase(s, sampler);
    TCase *gen = tcase_create("generate");
    tcase_add_test(gen, test_generate);
    tcase_add_test(gen, test_generate_crop);
    tcase_add_test(gen, test_logits_row);
    suite_add_tcase(s, gen);
    return dt_test_run(s);
}
