/* check_gpt.c: the whole GPT against a naive double-precision reference
 * written here from the equations (embedding, pre-LN blocks with causal
 * attention and tanh-GELU MLP, final LN, LM head, mean cross-entropy over
 * counted targets), and its backward against central finite differences
 * of that reference: with an untied LM head, and again tied to wte (the
 * reference's head then reads wte, so wte's finite differences see both
 * uses and check the summed gradient).
 *
 * Tolerances: the model runs in float32; with C = 8 and two layers every
 * value passes through a handful of sums of <= 32 terms, so the loss agrees
 * with the reference to rtol 1e-5. Finite differences are taken in double
 * (step 1e-5; truncation ~1e-10, roundoff ~1e-11), i.e. exact at float
 * precision, so every gradient entry is compared with atol 2e-5 + rtol 2e-3
 * (float32 backward error, with margin for the deeper chain). */
#include <string.h>

#include "testutil.h"

static dt_gpt_config CFG = {.vocab_size = 11, .seq_len = 6, .num_layers = 2, .num_heads = 2, .hidden_size = 8};
enum { B = 2, T = 5 };

typedef struct ref_ctx {
    const dt_paramset *ps;
    const int32_t *tok, *tgt;
} ref_ctx;

static const double *P(const ref_ctx *r, const double *w, const char *name)
{
    int i = dt_paramset_find(r->ps, name);
    ck_assert_msg(i >= 0, "no parameter %s", name);
    return w + r->ps->info[i].offset;
}

static void ref_ln(const double *x, const double *g, const double *b, double *o, int C)
{
    double m = 0, v = 0;
    for (int c = 0; c < C; c++) m += x[c];
    m /= C;
    for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    double r = 1.0 / sqrt(v / C + 1e-5);
    for (int c = 0; c < C; c++) o[c] = (x[c] - m) * r * g[c] + b[c];
}

static void ref_lin(const double *x, const double *w, const double *b, double *o, int C, int OC)
{
    for (int k = 0; k < OC; k++) {
        double s = b ? b[k] : 0;
        for (int c = 0; c < C; c++) s += w[k * C + c] * x[c];
        o[k] = s;
    }
}

/* Mean cross-entropy over counted targets, all in double. */
static double ref_loss(const ref_ctx *r, const double *w)
{
    const int C = CFG.hidden_size, NH = CFG.num_heads, hs = C / NH, V = CFG.vocab_size;
    enum { CC = 8, NT = B * T };
    double x[NT][CC], ln[NT][CC], qkv[NT][3 * CC], y[NT][CC], tmp[NT][4 * CC], h4[4 * CC];
    char name[64];
    for (int i = 0; i < NT; i++)
        for (int c = 0; c < C; c++) x[i][c] = P(r, w, "wte")[r->tok[i] * C + c] + P(r, w, "wpe")[(i % T) * C + c];
    for (int l = 0; l < CFG.num_layers; l++) {
#define W(s) (snprintf(name, sizeof name, "h.%d.%s", l, s), P(r, w, name))
        for (int i = 0; i < NT; i++) {
            ref_ln(x[i], W("ln1.w"), W("ln1.b"), ln[i], C);
            ref_lin(ln[i], W("qkv.w"), W("qkv.b"), qkv[i], C, 3 * C);
        }
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    double s[T], mx = -1e300, z = 0;
                    for (int j = 0; j <= t; j++) {
                        s[j] = 0;
                        for (int d = 0; d < hs; d++)
                            s[j] += qkv[b * T + t][h * hs + d] * qkv[b * T + j][C + h * hs + d];
                        s[j] /= sqrt((double)hs);
                        mx = s[j] > mx ? s[j] : mx;
                    }
                    for (int j = 0; j <= t; j++) z += (s[j] = exp(s[j] - mx));
                    for (int d = 0; d < hs; d++) {
                        double acc = 0;
                        for (int j = 0; j <= t; j++) acc += s[j] / z * qkv[b * T + j][2 * C + h * hs + d];
                        y[b * T + t][h * hs + d] = acc;
                    }
                }
        for (int i = 0; i < NT; i++) {
            ref_lin(y[i], W("attproj.w"), W("attproj.b"), tmp[i], C, C);
            for (int c = 0; c < C; c++) x[i][c] += tmp[i][c];
            ref_ln(x[i], W("ln2.w"), W("ln2.b"), ln[i], C);
            ref_lin(ln[i], W("fc.w"), W("fc.b"), h4, C, 4 * C);
            for (int k = 0; k < 4 * C; k++) {
                double u = h4[k];
                h4[k] = 0.5 * u * (1 + tanh(sqrt(2 / M_PI) * (u + 0.044715 * u * u * u)));
            }
            ref_lin(h4, W("fcproj.w"), W("fcproj.b"), tmp[i], 4 * C, C);
            for (int c = 0; c < C; c++) x[i][c] += tmp[i][c];
        }
#undef W
    }
    double L = 0;
    int n = 0;
    for (int i = 0; i < NT; i++) {
        if (r->tgt[i] < 0) continue;
        double logits[16], mx = -1e300, s = 0;
        ref_ln(x[i], P(r, w, "lnf.w"), P(r, w, "lnf.b"), ln[i], C);
        ref_lin(ln[i], P(r, w, dt_paramset_find(r->ps, "lm_head.w") >= 0 ? "lm_head.w" : "wte"), NULL, logits, C, V);
        for (int v = 0; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
        for (int v = 0; v < V; v++) s += exp(logits[v] - mx);
        L += mx + log(s) - logits[r->tgt[i]];
        n++;
    }
    return L / n;
}

static dt_backend *be;
static dt_gpt *m;
static int32_t tok[B * T], tgt[B * T];

static void setup(void)
{
    ck_dt(dt_backend_cpu_create(2, &be));
    ck_dt(dt_gpt_create(&CFG, be, &m));
    ck_dt(dt_gpt_init_weights(m, 7));
    /* Larger random weights than GPT-2's 0.02 so every path carries signal. */
    dt_rng r;
    dt_rng_seed(&r, 99);
    const dt_paramset *ps = dt_gpt_layout(m);
    float *w = dt_gpt_params(m);
    for (int i = 0; i < ps->count; i++)
        for (size_t j = 0; j < ps->info[i].numel; j++) w[ps->info[i].offset + j] += 0.3f * (float)dt_rng_normal(&r);
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)dt_rng_below(&r, CFG.vocab_size);
        tgt[i] = (int32_t)dt_rng_below(&r, CFG.vocab_size);
    }
    tgt[3] = -1; /* an ignored position */
}

static void setup_tied(void)
{
    CFG.tie_embeddings = 1;
    setup();
}

static void teardown(void)
{
    CFG.tie_embeddings = 0;
    dt_gpt_free(m);
    dt_backend_destroy(be);
}

START_TEST(test_layout)
{
    const dt_paramset *ps = dt_gpt_layout(m);
    size_t n = 0;
    for (int i = 0; i < ps->count; i++) {
        n += ps->info[i].numel;
        ck_assert_int_eq(ps->info[i].offset % 16, 0);
        if (i) ck_assert(ps->info[i].offset >= ps->info[i - 1].offset + ps->info[i - 1].numel);
    }
    ck_assert_uint_eq(n, dt_gpt_config_num_params(&CFG));
    ck_assert_int_eq(ps->count, 2 + 12 * CFG.num_layers + 3 - CFG.tie_embeddings);
    ck_assert_int_eq(dt_paramset_find(ps, "lm_head.w") < 0, CFG.tie_embeddings);
    if (CFG.tie_embeddings) return;
    /* no decay on biases and LayerNorm gains */
    ck_assert_int_eq(ps->info[dt_paramset_find(ps, "h.0.ln1.w")].decay, 0);
    ck_assert_int_eq(ps->info[dt_paramset_find(ps, "h.1.fc.b")].decay, 0);
    ck_assert_int_eq(ps->info[dt_paramset_find(ps, "h.1.fc.w")].decay, 1);
    ck_assert_int_eq(ps->info[dt_paramset_find(ps, "lm_head.w")].decay, 1);
}
END_TEST

/* GPT-2 124M: tied, as GPT-2 (and Megatron by default); untied, the head adds V x C. */
START_TEST(test_gpt2_124m_params)
{
    dt_gpt_config c;
    ck_dt(dt_gpt_config_preset("gpt2-124m", &c));
    ck_assert_int_eq(c.tie_embeddings, 1);
    ck_assert_uint_eq(dt_gpt_config_num_params(&c), 124439808u);
    c.tie_embeddings = 0;
    ck_assert_uint_eq(dt_gpt_config_num_params(&c), 124439808u + 50257u * 768u);
    ck_dt(dt_gpt_config_preset("tiny", &c));
    ck_assert_int_eq(c.tie_embeddings, 0);
}
END_TEST

START_TEST(test_forward_matches_reference)
{
    float loss;
    ck_dt(dt_gpt_forward(m, tok, tgt, B, T, &loss));
    const dt_paramset *ps = dt_gpt_layout(m);
    double *w = malloc(sizeof(double) * ps->numel);
    for (size_t i = 0; i < ps->numel; i++) w[i] = dt_gpt_params(m)[i];
    ref_ctx r = {ps, tok, tgt};
    double ref = ref_loss(&r, w);
    ck_assert_msg(dt_test_close(loss, ref, 1e-6, 1e-5), "loss %.9g vs reference %.9g", loss, ref);
    /* per-position losses average to the loss; ignored position is 0 */
    float pl[B * T];
    uint8_t ok[B * T];
    ck_dt(dt_gpt_position_stats(m, pl, ok));
    double s = 0;
    for (int i = 0; i < B * T; i++) s += pl[i];
    ck_assert(dt_test_close(s / (B * T - 1), loss, 1e-6, 1e-5));
    ck_assert_float_eq(pl[3], 0.0f);
    free(w);
}
END_TEST

START_TEST(test_backward_finite_differences)
{
    float loss;
    ck_dt(dt_gpt_zero_grad(m));
    ck_dt(dt_gpt_forward(m, tok, tgt, B, T, &loss));
    ck_dt(dt_gpt_backward(m, 1.0f));
    const dt_paramset *ps = dt_gpt_layout(m);
    double *w = malloc(sizeof(double) * ps->numel);
    for (size_t i = 0; i < ps->numel; i++) w[i] = dt_gpt_params(m)[i];
    const float *g = dt_gpt_grads(m);
    ref_ctx r = {ps, tok, tgt};
    const double h = 1e-5;
    int checked = 0;
    double max_g = 0;
    /* Every entry of every tensor except the two big embeddings, whose rows
     * are checked where a token or position uses them. */
    for (int t = 0; t < ps->count; t++) {
        const dt_param_info *p = &ps->info[t];
        for (size_t j = 0; j < p->numel; j++) {
            size_t k = p->offset + j;
            if (strcmp(p->name, "wte") == 0 && j % CFG.hidden_size != j / CFG.hidden_size % CFG.hidden_size) continue;
            double s = w[k];
            w[k] = s + h;
            double lp = ref_loss(&r, w);
            w[k] = s - h;
            double lm = ref_loss(&r, w);
            w[k] = s;
            double fd = (lp - lm) / (2 * h);
            ck_assert_msg(dt_test_close(g[k], fd, 2e-5, 2e-3), "%s[%zu]: backward %.8g finite difference %.8g", p->name,
                          j, g[k], fd);
            if (fabs(fd) > max_g) max_g = fabs(fd);
            checked++;
        }
    }
    ck_assert_int_gt(checked, 1000);
    ck_assert(max_g > 1e-2); /* the check compared real signal, not zeros */
    free(w);
}
END_TEST

START_TEST(test_grad_accumulates_and_zeroes)
{
    const dt_paramset *ps = dt_gpt_layout(m);
    float *g1 = malloc(sizeof(float) * ps->numel);
    ck_dt(dt_gpt_zero_grad(m));
    ck_dt(dt_gpt_forward(m, tok, tgt, B, T, NULL));
    ck_dt(dt_gpt_backward(m, 1.0f));
    memcpy(g1, dt_gpt_grads(m), sizeof(float) * ps->numel);
    ck_dt(dt_gpt_forward(m, tok, tgt, B, T, NULL));
    ck_dt(dt_gpt_backward(m, 0.5f));
    for (size_t i = 0; i < ps->numel; i++) ck_assert(dt_test_close(dt_gpt_grads(m)[i], 1.5 * g1[i], 1e-7, 1e-5));
    ck_dt(dt_gpt_zero_grad(m));
    for (size_t i = 0; i < ps->numel; i++) ck_assert_float_eq(dt_gpt_grads(m)[i], 0.0f);
    /* backward without a fresh forward is refused */
    ck_assert_int_eq(dt_gpt_backward(m, 1.0f), DT_ERR_INVALID);
    free(g1);
}
END_TEST

START_TEST(test_activation_accounting)
{
    ck_dt(dt_gpt_forward(m, tok, tgt, B, T, NULL));
    /* Saved floats: per block 10*B*T*C + 4*B*T + NH*B*T (atty, res2,
     * out, qkv 3, fch 4; the LayerNorm statistics; the attention's
     * log-sum-exp; the LayerNorm and GELU outputs are transients that W
     * recomputes), outside: 2*B*T*C
     * (embedding out, final LN) + 2*B*T + B*T*V, each rounded up to 16. */
#define PAD(n) (((size_t)(n) + 15) & ~(size_t)15)
    size_t C = CFG.hidden_size, BT = B * T;
    size_t block = 3 * PAD(BT * C) + 4 * PAD(BT) + PAD(BT * 3 * C) + PAD(B * CFG.num_heads * T) + PAD(BT * 4 * C);
    size_t expect = (CFG.num_layers * block + 2 * PAD(BT * C) + 2 * PAD(BT) + PAD(BT * CFG.vocab_size)) * 4;
    ck_assert_uint_eq(dt_gpt_activation_bytes(m), expect);
    ck_assert_uint_eq(dt_gpt_peak_activation_bytes(m), expect);
    ck_dt(dt_gpt_backward(m, 1.0f));
    ck_assert_uint_eq(dt_gpt_activation_bytes(m), 0);
    ck_assert_uint_eq(dt_gpt_peak_activation_bytes(m), expect);
}
END_TEST

static int hook_calls;
static char hook_seq[64];
static void hook(void *ctx, int layer, char pass, int64_t t0, int64_t t1)
{
    (void)ctx;
    ck_assert(t1 >= t0);
    hook_seq[hook_calls++] = (char)(pass == 'F' ? 'a' + layer + 1 : 'A' + layer + 1);
}

START_TEST(test_hooks_and_errors)
{
    dt_gpt_set_layer_hook(m, hook, NULL);
    ck_dt(dt_gpt_forward(m, tok, tgt, B, T, NULL));
    ck_dt(dt_gpt_backward(m, 1.0f));
    hook_seq[hook_calls] = 0;
    ck_assert_str_eq(hook_seq, "abcdDCBA"); /* embed, block 0, 1, head; then reverse */
    int32_t bad[B * T];
    memcpy(bad, tok, sizeof bad);
    bad[4] = CFG.vocab_size;
    ck_assert_int_eq(dt_gpt_forward(m, bad, tgt, B, T, NULL), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "vocabulary"));
    ck_assert_int_eq(dt_gpt_forward(m, tok, tgt, B, CFG.seq_len + 1, NULL), DT_ERR_INVALID);
    dt_gpt_config c = CFG;
    c.num_heads = 3;
    dt_gpt *m2;
    ck_assert_int_eq(dt_gpt_create(&c, be, &m2), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--num-attention-heads"));
    ck_assert_int_eq(dt_gpt_config_preset("huge", &c), DT_ERR_INVALID);
    ck_dt(dt_gpt_config_preset("small", &c));
    ck_assert_int_eq(c.num_layers, 6);
    ck_assert_int_eq(c.hidden_size, 384);
    /* 6N + 12LCT for small at T = 256 */
    double f = dt_gpt_config_flops_per_token(&c, 256);
    ck_assert(dt_test_close(f, 6.0 * dt_gpt_config_num_params(&c) + 12.0 * 6 * 384 * 256, 0, 1e-12));
}
END_TEST

START_TEST(test_init_deterministic)
{
    dt_gpt *a, *b2;
    ck_dt(dt_gpt_create(&CFG, be, &a));
    ck_dt(dt_gpt_create(&CFG, be, &b2));
    ck_dt(dt_gpt_init_weights(a, 42));
    ck_dt(dt_gpt_init_weights(b2, 42));
    size_t n = dt_gpt_layout(a)->numel;
    ck_assert_mem_eq(dt_gpt_params(a), dt_gpt_params(b2), n * sizeof(float));
    ck_dt(dt_gpt_init_weights(b2, 43));
    ck_assert(memcmp(dt_gpt_params(a), dt_gpt_params(b2), n * sizeof(float)) != 0);
    const dt_paramset *ps = dt_gpt_layout(a);
    ck_assert_float_eq(dt_gpt_params(a)[ps->info[dt_paramset_find(ps, "h.0.ln2.w")].offset], 1.0f);
    ck_assert_float_eq(dt_gpt_params(a)[ps->info[dt_paramset_find(ps, "h.0.fc.b")].offset], 0.0f);
    dt_gpt_free(a);
    dt_gpt_free(b2);
}
END_TEST

/* ---- activation recomputation -------------------------------------------- */

static const dt_gpt_config CFG4 = {.vocab_size = 11, .seq_len = 6, .num_layers = 4, .num_heads = 2, .hidden_size = 8};

/* Gradients and peak activation bytes of one forward + backward. */
static size_t run_recompute(dt_recompute mode, int k, float *grads_out, float *loss_out)
{
    dt_gpt *g4;
    ck_dt(dt_gpt_create(&CFG4, be, &g4));
    ck_dt(dt_gpt_init_weights(g4, 5));
    ck_dt(dt_gpt_set_recompute(g4, mode, k));
    ck_dt(dt_gpt_zero_grad(g4));
    ck_dt(dt_gpt_forward(g4, tok, tgt, B, T, loss_out));
    ck_dt(dt_gpt_backward(g4, 1.0f));
    memcpy(grads_out, dt_gpt_grads(g4), dt_gpt_layout(g4)->numel * sizeof(float));
    size_t peak = dt_gpt_peak_activation_bytes(g4);
    ck_assert_uint_eq(peak, dt_gpt_predicted_activation_bytes(g4, B, T));
    ck_assert_uint_eq(dt_gpt_activation_bytes(g4), 0);
    dt_gpt_free(g4);
    return peak;
}

START_TEST(test_recompute_bit_identical_and_memory)
{
    size_t n = dt_gpt_config_num_params(&CFG4) + 64 * 40;
    float *g0 = malloc(n * sizeof *g0), *g1 = malloc(n * sizeof *g1);
    float l0, l1;
    size_t numel;
    {
        dt_gpt *tmp;
        ck_dt(dt_gpt_create(&CFG4, be, &tmp));
        numel = dt_gpt_layout(tmp)->numel;
        dt_gpt_free(tmp);
    }
    size_t none = run_recompute(DT_RECOMPUTE_NONE, 0, g0, &l0);
    /* Footprints written out from the layer definitions (floats, each
     * tensor rounded up to 16 by PAD, defined above): */
    const size_t C = 8, NH = 2, L = 4, V = 11, BT = B * T;
    const size_t P = PAD(BT * C), ATT = PAD(B * NH * T);
    const size_t A = 3 * P + 4 * PAD(BT) + PAD(BT * 3 * C) + ATT + PAD(BT * 4 * C);
    const size_t E = P, H = P + 2 * PAD(BT) + PAD(BT * V);
    ck_assert_uint_eq(none, (E + L * A + H) * 4);
    struct {
        dt_recompute mode;
        int k;
        size_t expect;
    } cases[] = {
        {DT_RECOMPUTE_FULL, 1, (E + 4 * P + (A > H ? A : H)) * 4},         /* K = 1 */
        {DT_RECOMPUTE_FULL, 2, (E + 2 * P + (2 * A > H ? 2 * A : H)) * 4}, /* K = sqrt(L) */
        /* uneven groups {0,1,2}, {3}: group 0's forward (1 output + 3 blocks)
         * against the head (2 outputs + H) */
        {DT_RECOMPUTE_FULL, 3, (E + (P + 3 * A > 2 * P + H ? P + 3 * A : 2 * P + H)) * 4},
        {DT_RECOMPUTE_SELECTIVE, 0, (E + L * (A - ATT) + (ATT > H ? ATT : H)) * 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t peak = run_recompute(cases[i].mode, cases[i].k, g1, &l1);
        ck_assert_msg(memcmp(g0, g1, numel * sizeof(float)) == 0, "case %zu: gradients differ from no recompute", i);
        ck_assert_msg(l0 == l1, "case %zu: loss differs", i);
        ck_assert_msg(peak == cases[i].expect, "case %zu: peak %zu bytes, predicted %zu", i, peak, cases[i].expect);
        ck_assert_msg(peak < none, "case %zu: no memory saved (%zu vs %zu)", i, peak, none);
    }
    ck_assert_int_eq(dt_gpt_set_recompute(m, DT_RECOMPUTE_FULL, 3), DT_ERR_INVALID); /* m has 2 layers */
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--recompute-num-layers"));
    dt_recompute r;
    ck_assert_int_eq(dt_recompute_parse("partial", &r), DT_ERR_INVALID);
    ck_dt(dt_recompute_parse("selective", &r));
    ck_assert_int_eq(r, DT_RECOMPUTE_SELECTIVE);
    free(g0), free(g1);
}
END_TEST

static int n_recompute_events;
static void count_hook(void *ctx, int layer, char pass, int64_t t0, int64_t t1)
{
    (void)ctx, (void)layer, (void)t0, (void)t1;
    n_recompute_events += pass == 'R';
}

START_TEST(test_recompute_hook)
{
    dt_gpt *g4;
    ck_dt(dt_gpt_create(&CFG4, be, &g4));
    ck_dt(dt_gpt_init_weights(g4, 5));
    dt_gpt_set_layer_hook(g4, count_hook, NULL);
    ck_dt(dt_gpt_set_recompute(g4, DT_RECOMPUTE_FULL, 2));
    n_recompute_events = 0;
    ck_dt(dt_gpt_forward(g4, tok, tgt, B, T, NULL));
    ck_dt(dt_gpt_backward(g4, 1.0f));
    ck_assert_int_eq(n_recompute_events, 4); /* every block recomputed once */
    ck_dt(dt_gpt_set_recompute(g4, DT_RECOMPUTE_SELECTIVE, 0));
    n_recompute_events = 0;
    ck_dt(dt_gpt_forward(g4, tok, tgt, B, T, NULL));
    ck_dt(dt_gpt_backward(g4, 1.0f));
    ck_assert_int_eq(n_recompute_events, 4);
    dt_gpt_free(g4);
}
END_TEST

/* dt_gpt_set_split_backward: the hook sees each block's and the head's B
 * ('b') then W ('W'), the embedding's whole backward ('B'), and the
 * gradients are those of the whole backward bit for bit, in FP32 and bf16,
 * with and without recomputation (dt__block_backward is B then W). */
static char split_seq[128];
static int split_n;
static void split_hook(void *ctx, int layer, char pass, int64_t t0, int64_t t1)
{
    (void)ctx, (void)layer;
    ck_assert(t1 >= t0);
    if (pass != 'F' && split_n < (int)sizeof split_seq - 1) split_seq[split_n++] = pass;
}

static void split_grads(dt_dtype prec, dt_recompute rc, int k, int split, float *out, size_t *numel)
{
    dt_gpt *g;
    ck_dt(dt_gpt_create(&CFG4, be, &g));
    ck_dt(dt_gpt_init_weights(g, 5));
    ck_dt(dt_gpt_set_precision(g, prec));
    ck_dt(dt_gpt_set_recompute(g, rc, k));
    dt_gpt_set_layer_hook(g, split_hook, NULL);
    dt_gpt_set_split_backward(g, split);
    split_n = 0;
    ck_dt(dt_gpt_zero_grad(g));
    ck_dt(dt_gpt_forward(g, tok, tgt, B, T, NULL));
    ck_dt(dt_gpt_backward(g, 1.0f));
    split_seq[split_n] = 0;
    *numel = dt_gpt_layout(g)->numel;
    memcpy(out, dt_gpt_grads(g), *numel * sizeof *out);
    dt_gpt_free(g);
}

START_TEST(test_split_backward)
{
    size_t n = dt_gpt_config_num_params(&CFG4) + 64 * 40, n0, n1;
    float *g0 = malloc(n * sizeof *g0), *g1 = malloc(n * sizeof *g1);
    const struct {
        dt_dtype prec;
        dt_recompute rc;
        int k;
        const char *seq; /* the split run's backward passes */
    } cases[] = {
        {DT_F32, DT_RECOMPUTE_NONE, 0, "bWbWbWbWbWB"}, /* head, blocks 3..0, embedding */
        {DT_BF16, DT_RECOMPUTE_NONE, 0, "bWbWbWbWbWB"},
        {DT_F32, DT_RECOMPUTE_SELECTIVE, 0, "bWRbWRbWRbWRbWB"},
        {DT_F32, DT_RECOMPUTE_FULL, 2, "bWRRbWbWRRbWbWB"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        split_grads(cases[i].prec, cases[i].rc, cases[i].k, 0, g0, &n0);
        ck_assert_msg(strchr(split_seq, 'b') == NULL, "case %zu: a B span without the split: %s", i, split_seq);
        split_grads(cases[i].prec, cases[i].rc, cases[i].k, 1, g1, &n1);
        ck_assert_msg(strcmp(split_seq, cases[i].seq) == 0, "case %zu: passes %s, expected %s", i, split_seq,
                      cases[i].seq);
        ck_assert_uint_eq(n0, n1);
        ck_assert_msg(memcmp(g0, g1, n0 * sizeof *g0) == 0, "case %zu: split gradients differ", i);
    }
    free(g0), free(g1);
}
END_TEST

/* ---- mixed precision ---------------------------------------------------------- */

/* Gradients of one forward + backward at a precision and loss scale,
 * divided back by the scale. */
static void grads_at(dt_dtype prec, float loss_scale, float *out, size_t *numel)
{
    dt_gpt *g;
    ck_dt(dt_gpt_create(&CFG4, be, &g));
    ck_dt(dt_gpt_init_weights(g, 5));
    ck_dt(dt_gpt_set_precision(g, prec));
    ck_assert_int_eq(dt_gpt_precision(g), prec);
    ck_dt(dt_gpt_zero_grad(g));
    ck_dt(dt_gpt_forward(g, tok, tgt, B, T, NULL));
    ck_dt(dt_gpt_backward(g, loss_scale));
    *numel = dt_gpt_layout(g)->numel;
    for (size_t i = 0; i < *numel; i++) out[i] = dt_gpt_grads(g)[i] / loss_scale;
    dt_gpt_free(g);
}

/* fp16 and bf16 gradients follow the fp32 ones: every value passes through
 * ~10 roundings to 11 (fp16) or 8 (bf16) significant bits, so the gradient
 * vector keeps its direction (cosine > 0.999 for fp16, > 0.99 for bf16)
 * and its norm within 2% (fp16) and 5% (bf16). */
START_TEST(test_half_gradients_follow_fp32)
{
    size_t n = 0, n2 = 0;
    float *g32 = malloc(sizeof(float) * 40000), *gh = malloc(sizeof(float) * 40000);
    grads_at(DT_F32, 1.0f, g32, &n);
    ck_assert_uint_le(n, 40000);
    const dt_dtype precs[] = {DT_F16, DT_BF16};
    const double min_cos[] = {0.999, 0.99}, max_norm_err[] = {0.02, 0.05};
    for (int k = 0; k < 2; k++) {
        grads_at(precs[k], k == 0 ? 1024.0f : 1.0f, gh, &n2);
        double dot = 0, a2 = 0, b2 = 0;
        int differs = 0;
        for (size_t i = 0; i < n; i++) {
            dot += (double)g32[i] * gh[i], a2 += (double)g32[i] * g32[i], b2 += (double)gh[i] * gh[i];
            differs |= g32[i] != gh[i];
        }
        double cosv = dot / sqrt(a2 * b2), nerr = fabs(sqrt(b2) / sqrt(a2) - 1);
        ck_assert_msg(cosv > min_cos[k], "%s: cosine %.6f", dt_dtype_name(precs[k]), cosv);
        ck_assert_msg(nerr < max_norm_err[k], "%s: norm error %.4f", dt_dtype_name(precs[k]), nerr);
        ck_assert_msg(differs, "%s: gradients identical to fp32: no rounding happened", dt_dtype_name(precs[k]));
    }
    free(g32), free(gh);
}
END_TEST

/* The logits' row stride follows the backend's row_align (64 on CUDA):
 * with the CPU backend told to pad (V = 11 -> rows of 64), loss, logits
 * and every gradient are bit-identical to the unpadded run, in FP32 and
 * in bf16, with and without recomputation, untied and tied (the same
 * GEMM calls, only ld differs; the padding is never read), and the
 * activation prediction still equals the measured peak. */
static void run_aligned(int align, dt_dtype prec, dt_recompute rc, float *loss, float *logits, float *grads,
                        size_t *peak, size_t *pred)
{
    be->row_align = align;
    dt_gpt *g;
    ck_dt(dt_gpt_create(&CFG, be, &g));
    const size_t n = dt_gpt_layout(g)->numel;
    memcpy(dt_gpt_params(g), dt_gpt_params(m), n * sizeof(float));
    ck_dt(dt_gpt_set_precision(g, prec));
    ck_dt(dt_gpt_set_recompute(g, rc, 1));
    ck_dt(dt_gpt_zero_grad(g));
    ck_dt(dt_gpt_forward(g, tok, tgt, B, T, loss));
    ck_dt(dt_gpt_logits(g, logits));
    ck_dt(dt_gpt_backward(g, 1.0f));
    memcpy(grads, dt_gpt_grads(g), n * sizeof(float));
    *peak = dt_gpt_peak_activation_bytes(g);
    *pred = dt_gpt_predicted_activation_bytes(g, B, T);
    dt_gpt_free(g);
    be->row_align = 1;
}

START_TEST(test_padded_logits)
{
    const size_t n = dt_gpt_layout(m)->numel, nl = (size_t)B * T * CFG.vocab_size;
    float *l1 = malloc(nl * sizeof(float)), *l64 = malloc(nl * sizeof(float));
    float *g1 = malloc(n * sizeof(float)), *g64 = malloc(n * sizeof(float));
    const dt_dtype precs[] = {DT_F32, DT_BF16, DT_F32};
    const dt_recompute rcs[] = {DT_RECOMPUTE_NONE, DT_RECOMPUTE_NONE, DT_RECOMPUTE_FULL};
    for (int k = 0; k < 3; k++) {
        float loss1, loss64;
        size_t peak1, pred1, peak64, pred64;
        run_aligned(1, precs[k], rcs[k], &loss1, l1, g1, &peak1, &pred1);
        run_aligned(64, precs[k], rcs[k], &loss64, l64, g64, &peak64, &pred64);
        ck_assert_mem_eq(&loss1, &loss64, sizeof loss1);
        ck_assert_mem_eq(l1, l64, nl * sizeof(float));
        ck_assert_mem_eq(g1, g64, n * sizeof(float));
        ck_assert_uint_eq(peak64, pred64);
        ck_assert_uint_eq(peak1, pred1);
    }
    free(l1), free(l64), free(g1), free(g64);
}
END_TEST

/* Half storage: the saved activations are packed into 2 bytes an element,
 * so the measured peak equals the packed prediction and is well below the
 * FP32 peak; with selective recomputation too; gradients do not depend on
 * the recomputation mode under half storage either (packing is exact). */
START_TEST(test_half_storage_memory)
{
    const dt_recompute modes[] = {DT_RECOMPUTE_NONE, DT_RECOMPUTE_SELECTIVE, DT_RECOMPUTE_FULL};
    size_t peak[2][3];
    float *g[3];
    size_t numel = 0;
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 3; k++) {
            dt_gpt *h;
            ck_dt(dt_gpt_create(&CFG4, be, &h));
            ck_dt(dt_gpt_init_weights(h, 5));
            ck_dt(dt_gpt_set_recompute(h, modes[k], 2));
            ck_dt(dt_gpt_set_precision(h, p ? DT_F16 : DT_F32));
            ck_dt(dt_gpt_zero_grad(h));
            ck_dt(dt_gpt_forward(h, tok, tgt, B, T, NULL));
            ck_dt(dt_gpt_backward(h, 256.0f));
            peak[p][k] = dt_gpt_peak_activation_bytes(h);
            ck_assert_uint_eq(peak[p][k], dt_gpt_predicted_activation_bytes(h, B, T));
            numel = dt_gpt_layout(h)->numel;
            if (p) {
                g[k] = malloc(numel * sizeof(float));
                memcpy(g[k], dt_gpt_grads(h), numel * sizeof(float));
            }
            dt_gpt_free(h);
        }
    /* Four blocks packed to half, but one block's FP32 working set and the
     * FP32 head remain: 0.80 of the FP32 peak here (more blocks save more;
     * bench/README.md has the small model's figure). */
    ck_assert_msg(peak[1][0] * 100 < peak[0][0] * 85, "fp16 peak %zu vs fp32 %zu", peak[1][0], peak[0][0]);
    ck_assert_msg(peak[1][1] * 100 < peak[0][1] * 90, "fp16 selective peak %zu vs fp32 %zu", peak[1][1], peak[0][1]);
    ck_assert_uint_eq(peak[1][2], peak[0][2]); /* full recomputation keeps FP32 checkpoints */
    ck_assert_mem_eq(g[0], g[1], numel * sizeof(float));
    ck_assert_mem_eq(g[0], g[2], numel * sizeof(float));
    for (int k = 0; k < 3; k++) free(g[k]);
}
END_TEST

/* Loss scaling at work: with a tiny loss scale, fp16 gradients underflow to
 * zero where the fp32 ones are not; scaling by 2^16 brings them back. */
START_TEST(test_loss_scale_prevents_underflow)
{
    size_t n = 0;
    float *g32 = malloc(sizeof(float) * 40000), *g16 = malloc(sizeof(float) * 40000);
    grads_at(DT_F32, 1.0f, g32, &n);
    const float small = 0x1p-20f;
    size_t zeros[2] = {0, 0}, nonzero = 0;
    for (int k = 0; k < 2; k++) {
        grads_at(DT_F16, k == 0 ? small : small * 65536.0f, g16, &n);
        for (size_t i = 0; i < n; i++)
            if (g32[i] != 0.0f) {
                zeros[k] += g16[i] == 0.0f;
                nonzero += k == 0;
            }
    }
    ck_assert_uint_gt(nonzero, 1000);
    ck_assert_msg(zeros[0] > nonzero / 10, "only %zu of %zu gradients underflowed at scale 2^-20", zeros[0], nonzero);
    ck_assert_msg(zeros[1] * 20 < zeros[0], "scale 2^-4 still lost %zu (2^-20: %zu)", zeros[1], zeros[0]);
    /* an absurd scale overflows: inf where fp32 is finite */
    grads_at(DT_F16, 1e30f, g16, &n);
    int inf = 0;
    for (size_t i = 0; i < n; i++) inf |= isinf(g16[i]);
    ck_assert(inf);
    free(g32), free(g16);
}
END_TEST

static Suite *gpt_suite(void)
{
    Suite *s = suite_create("gpt");
    TCase *tc = tcase_create("model");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_gpt2_124m_params);
    tcase_add_test(tc, test_forward_matches_reference);
    tcase_add_test(tc, test_backward_finite_differences);
    tcase_add_test(tc, test_grad_accumulates_and_zeroes);
    tcase_add_test(tc, test_activation_accounting);
    tcase_add_test(tc, test_hooks_and_errors);
    tcase_add_test(tc, test_init_deterministic);
    tcase_add_test(tc, test_recompute_bit_identical_and_memory);
    tcase_add_test(tc, test_recompute_hook);
    tcase_add_test(tc, test_split_backward);
    tcase_add_test(tc, test_half_gradients_follow_fp32);
    tcase_add_test(tc, test_loss_scale_prevents_underflow);
    tcase_add_test(tc, test_half_storage_memory);
    tcase_add_test(tc, test_padded_logits);
    suite_add_tcase(s, tc);
    TCase *tt = tcase_create("tied");
    tcase_add_checked_fixture(tt, setup_tied, teardown);
    tcase_set_timeout(tt, 120);
    tcase_add_test(tt, test_layout);
    tcase_add_test(tt, test_forward_matches_reference);
    tcase_add_test(tt, test_backward_finite_differences);
    tcase_add_test(tt, test_grad_accumulates_and_zeroes);
    tcase_add_test(tt, test_recompute_bit_identical_and_memory);
    tcase_add_test(tt, test_half_gradients_follow_fp32);
    tcase_add_test(tt, test_padded_logits);
    suite_add_tcase(s, tt);
    return s;
}

int main(void) { return dt_test_run(gpt_suite()); }
