/* sample.c: the sampler and the generation loop of dt_sample.h (which
 * states the distribution, the draw and the cropping to the context).
 *
 * The sampler runs on the host over one row of logits (V floats, copied
 * from the backend with dt_gpt_logits_row); the model runs through its
 * backend's table, so the loop is the same on every backend. Probabilities
 * are computed in double, after subtracting the largest logit, so a tiny
 * temperature gives 0 and 1, never inf/inf. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "dt_sample.h"

/* The coins' stream, apart from the data's and the weights' (dt_rng_seed3). */
#define DT__SAMPLE_STREAM 0x73616d706c65ull /* "sample" */

dt_status dt_sample_check(float temperature, int top_k, int vocab)
{
    if (!isfinite(temperature) || temperature < 0.0f)
        return DT_FAIL(DT_ERR_INVALID, "--temperature %g: expected a number >= 0 (0: greedy)", (double)temperature);
    if (top_k < 0 || top_k > vocab)
        return DT_FAIL(DT_ERR_INVALID, "--top-k %d: expected 0..%d (the vocabulary; 0: no truncation)", top_k, vocab);
    return DT_OK;
}

typedef struct dt__ranked {
    float v;
    int i;
} dt__ranked;

/* Larger logit first; equal logits: lower token first. */
static int dt__ranked_cmp(const void *a, const void *b)
{
    const dt__ranked *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* The argmax, ties to the lowest token; logits are finite. */
static int32_t dt__argmax(const float *logits, int V)
{
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

static dt_status dt__check_logits(const float *logits, int V)
{
    if (!logits || V < 1) return DT_FAIL(DT_ERR_INVALID, "sample: %d logits (expected >= 1)", V);
    for (int i = 0; i < V; i++)
        if (!isfinite(logits[i]))
            return DT_FAIL(DT_ERR_NUMERIC, "sample: the logit of token %d is %g (the model's output is not finite)", i,
                           (double)logits[i]);
    return DT_OK;
}

dt_status dt_sample_probs(const float *logits, int V, float temperature, int top_k, double *probs)
{
    DT_CHECK(dt__check_logits(logits, V));
    DT_CHECK(dt_sample_check(temperature, top_k, V));
    if (temperature == 0.0f || top_k == 1) { /* greedy: all the mass on the argmax */
        memset(probs, 0, (size_t)V * sizeof *probs);
        probs[dt__argmax(logits, V)] = 1.0;
        return DT_OK;
    }
    const double mx = logits[dt__argmax(logits, V)];
    for (int i = 0; i < V; i++) probs[i] = exp(((double)logits[i] - mx) / (double)temperature);
    if (top_k > 0 && top_k < V) { /* zero all but the top_k largest */
        dt__ranked *r = malloc((size_t)V * sizeof *r);
        if (!r) return DT_FAIL(DT_ERR_NOMEM, "sample: out of memory for %d logits", V);
        for (int i = 0; i < V; i++) r[i] = (dt__ranked){logits[i], i};
        qsort(r, (size_t)V, sizeof *r, dt__ranked_cmp);
        for (int j = top_k; j < V; j++) probs[r[j].i] = 0.0;
        free(r);
    }
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += probs[i];
    for (int i = 0; i < V; i++) probs[i] /= sum; /* sum >= 1: the argmax's term is exp(0) */
    return DT_OK;
}

int32_t dt_sample_pick(const double *probs, int V, double coin)
{
    double cdf = 0.0;
    int32_t last = 0;
    for (int i = 0; i < V; i++) {
        if (probs[i] <= 0.0) continue;
        cdf += probs[i];
        last = i;
        if (coin < cdf) return i;
    }
    return last;
}

dt_status dt_sample_token(const float *logits, int V, float temperature, int top_k, dt_rng *rng, double *probs,
                          int32_t *token)
{
    DT_CHECK(dt_sample_probs(logits, V, temperature, top_k, probs));
    if (temperature == 0.0f || top_k == 1) {
        *token = dt_sample_pick(probs, V, 0.0); /* the argmax; no coin */
        return DT_OK;
    }
    *token = dt_sample_pick(probs, V, (double)dt_rng_uniform(rng));
    return DT_OK;
}

dt_status dt_gpt_generate(dt_gpt *m, const dt_generate_config *g, const int32_t *prompt, int n_prompt, int32_t *out,
                          dt_generate_fn fn, void *ctx)
{
    const dt_gpt_config *c = dt_gpt_config_of(m);
    const int context = g->context > 0 ? g->context : c->seq_len;
    const int vocab = g->vocab > 0 ? g->vocab : c->vocab_size;
    if (g->n_new < 1 || g->n_new > INT32_MAX - n_prompt)
        return DT_FAIL(DT_ERR_INVALID, "--generate %d: expected a number of tokens >= 1", g->n_new);
    if (!prompt || n_prompt < 1)
        return DT_FAIL(DT_ERR_INVALID, "--prompt: expected at least one token (the model has no start-of-text token)");
    if (context > c->seq_len)
        return DT_FAIL(DT_ERR_INVALID, "generate: context %d exceeds the model's %d positions", context, c->seq_len);
    if (vocab > c->vocab_size)
        return DT_FAIL(DT_ERR_INVALID, "generate: vocabulary %d exceeds the model's %d", vocab, c->vocab_size);
    DT_CHECK(dt_sample_check(g->temperature, g->top_k, vocab));
    const size_t n_all = (size_t)n_prompt + (size_t)g->n_new;
    int32_t *seq = malloc(n_all * sizeof *seq);
    float *row = malloc((size_t)c->vocab_size * sizeof *row);
    double *probs = malloc((size_t)vocab * sizeof *probs);
    dt_status st = DT_OK;
    if (!seq || !row || !probs) {
        st = DT_FAIL(DT_ERR_NOMEM, "generate: out of memory for %zu tokens", n_all);
        goto done;
    }
    memcpy(seq, prompt, (size_t)n_prompt * sizeof *seq);
    dt_rng rng;
    dt_rng_seed3(&rng, g->seed, DT__SAMPLE_STREAM, 0);
    size_t len = (size_t)n_prompt;
    for (int i = 0; i < g->n_new; i++, len++) {
        const int T = len < (size_t)context ? (int)len : context; /* the last T tokens */
        DT_CHECK_GOTO(dt_gpt_forward(m, seq + (len - (size_t)T), NULL, 1, T, NULL), st, done);
        DT_CHECK_GOTO(dt_gpt_logits_row(m, 0, T - 1, row), st, done);
        /* only the tokenizer's tokens: the model's other logits are ignored */
        DT_CHECK_GOTO(dt_sample_token(row, vocab, g->temperature, g->top_k, &rng, probs, &seq[len]), st, done);
        if (out) out[i] = seq[len];
        if (fn) DT_CHECK_GOTO(fn(ctx, seq[len]), st, done);
    }
done:
    free(probs);
    free(row);
    free(seq);
    return st;
}
