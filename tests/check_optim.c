/* check_optim.c: optimizers (SGD, AdamW, LARS, LAMB), gradient norm and
 * clipping, the learning-rate schedule (dt_optim.h), and the CPU backend's
 * optimizer ops.
 *
 * References are computed here in double from the formulas in dt_backend.h
 * and dt_optim.h. Tolerances: the library works in float32, so each op
 * rounds to ~6e-8 relative; a few steps of a few ops each stay well within
 * 1e-6 relative on the moments and 1e-6 absolute on parameters of size ~1
 * (AdamW's normalised step is ~lr in magnitude, and its 1/(sqrt(v)+eps) is
 * well conditioned because gradients are far from 0). LARS and LAMB trust
 * ratios are held to 1e-6 relative too: the library takes the norms of its
 * float32 parameters (and of LAMB's float32 u), the reference those of its
 * double ones, which after a few steps differ by a few float32 roundings
 * (the largest ratio error seen is 1.2e-7). The LARS/LAMB cases use eta and
 * lr large enough that trust-scaled steps are ~0.01-0.3 (one LARS case
 * keeps the default eta, ~5e-4), so a wrong ratio, decay or momentum moves
 * parameters far more than 1e-6. Where float32 results are compared with
 * float32 results of the same operations (power-of-two grad_scale folding,
 * thread counts, LAMB's Adam step on no-decay tensors), they must be
 * bit-identical. */
#include <string.h>

#include "testutil.h"
#include "update.h"

/* Check records every passing ck_assert; REQUIRE calls it only on failure. */
#define REQUIRE(cond, ...)                      \
    do {                                        \
        if (!(cond)) ck_abort_msg(__VA_ARGS__); \
    } while (0)

#define ATOL 1e-6
#define RTOL 1e-6
#define TRUST_RTOL 1e-6

static dt_backend *be;

static void setup(void) { ck_dt(dt_backend_cpu_create(1, &be)); }
static void teardown(void) { dt_backend_destroy(be); }

/* Layout: "w" (2,3) with decay, "b" (5) without, "w2" (4) with decay. The
 * 16-element alignment leaves gaps the optimizer must never touch. */
static void make_layout(dt_paramset *ps)
{
    dt_paramset_init(ps);
    int64_t s1[2] = {2, 3}, s2[1] = {5}, s3[1] = {4};
    ck_dt(dt_paramset_add(ps, "w", 2, s1, 1));
    ck_dt(dt_paramset_add(ps, "b", 1, s2, 0));
    ck_dt(dt_paramset_add(ps, "w2", 1, s3, 1));
    ck_assert_uint_eq(ps->numel, 36); /* offsets 0, 16, 32 */
}

static const float GAP = 12345.0f;

static void fill(const dt_paramset *ps, float *p, float *g, double *pd, int seed)
{
    for (size_t i = 0; i < ps->numel; i++) p[i] = g[i] = GAP;
    for (int t = 0; t < ps->count; t++)
        for (size_t j = 0; j < ps->info[t].numel; j++) {
            size_t i = ps->info[t].offset + j;
            p[i] = 0.5f - 0.1f * (float)((i * 7 + (size_t)seed) % 11);
            pd[i] = p[i];
        }
}

/* Step-dependent gradients, never near 0. */
static void grads_for_step(const dt_paramset *ps, float *g, int step)
{
    for (int t = 0; t < ps->count; t++)
        for (size_t j = 0; j < ps->info[t].numel; j++) {
            size_t i = ps->info[t].offset + j;
            float mag = 0.25f + 0.125f * (float)((i + (size_t)step * 3) % 5);
            g[i] = ((i + (size_t)step) % 3 == 0) ? -mag : mag;
        }
}

static void check_gaps(const dt_paramset *ps, const float *p)
{
    size_t next = 0;
    for (int t = 0; t < ps->count; t++) {
        for (size_t i = next; i < ps->info[t].offset; i++) REQUIRE(p[i] == GAP, "gap element %zu changed", i);
        next = ps->info[t].offset + ps->info[t].numel;
    }
}

START_TEST(test_defaults_and_parse)
{
    dt_optim_config c;
    dt_optim_config_default(&c, DT_OPTIM_ADAMW);
    ck_assert_int_eq(c.kind, DT_OPTIM_ADAMW);
    ck_assert_float_eq(c.beta1, 0.9f);
    ck_assert_float_eq(c.beta2, 0.95f);
    ck_assert_float_eq(c.eps, 1e-8f);
    ck_assert_float_eq(c.momentum, 0.9f);
    dt_optim_kind k;
    ck_dt(dt_optim_kind_parse("sgd", &k));
    ck_assert_int_eq(k, DT_OPTIM_SGD);
    ck_dt(dt_optim_kind_parse("adamw", &k));
    ck_assert_int_eq(k, DT_OPTIM_ADAMW);
    ck_dt(dt_optim_kind_parse("lars", &k));
    ck_assert_int_eq(k, DT_OPTIM_LARS);
    ck_dt(dt_optim_kind_parse("lamb", &k));
    ck_assert_int_eq(k, DT_OPTIM_LAMB);
    for (int i = 0; i < 4; i++) { /* names round-trip */
        ck_dt(dt_optim_kind_parse(dt_optim_kind_name((dt_optim_kind)i), &k));
        ck_assert_int_eq(k, i);
    }
    ck_assert_str_eq(dt_optim_kind_name((dt_optim_kind)4), "?");
    ck_assert_str_eq(dt_optim_kind_name((dt_optim_kind)-1), "?");
    const char *bad[] = {"adam", "LARS", "lamb ", "", "larsx"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        k = DT_OPTIM_SGD;
        ck_assert_int_eq(dt_optim_kind_parse(bad[i], &k), DT_ERR_INVALID);
        ck_assert_int_eq(k, DT_OPTIM_SGD); /* untouched on failure */
        char quoted[16];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
        ck_assert_msg(strstr(dt_last_error(), quoted), "'%s' lacks %s", dt_last_error(), quoted);
        ck_assert_ptr_nonnull(strstr(dt_last_error(), "--optimizer"));
        ck_assert_ptr_nonnull(strstr(dt_last_error(), "sgd, adamw, lars or lamb"));
    }
    ck_assert_int_eq(dt_optim_kind_parse(NULL, &k), DT_ERR_INVALID);
    /* LARS/LAMB defaults (dt_optim.h says why) */
    for (int i = 0; i < 4; i++) {
        dt_optim_config_default(&c, (dt_optim_kind)i);
        ck_assert_int_eq(c.kind, i);
        ck_assert_float_eq(c.lars_eta, 0.001f);
        ck_assert_float_eq(c.lamb_gamma_l, 0.0f);
        ck_assert_float_eq(c.lamb_gamma_u, 10.0f);
        ck_assert_float_eq(c.weight_decay, 0.0f);
    }
    dt_lr_decay d;
    const char *names[] = {"constant", "linear", "cosine"};
    for (int i = 0; i < 3; i++) {
        ck_dt(dt_lr_decay_parse(names[i], &d));
        ck_assert_int_eq(d, (dt_lr_decay)i);
    }
    ck_assert_int_eq(dt_lr_decay_parse("exp", &d), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "'exp'"));
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "constant, linear or cosine"));
    ck_assert_int_eq(dt_lr_decay_parse("Cosine", &d), DT_ERR_INVALID);
}
END_TEST

START_TEST(test_init_errors)
{
    dt_paramset ps;
    make_layout(&ps);
    dt_optim opt;
    dt_optim_config c;
    struct {
        dt_optim_kind kind;
        float *field;
        float value;
        const char *needle;
    } bad[] = {
        {DT_OPTIM_ADAMW, &c.beta1, 1.0f, "--adam-beta1"},
        {DT_OPTIM_ADAMW, &c.beta2, -0.1f, "--adam-beta2"},
        {DT_OPTIM_ADAMW, &c.eps, 0.0f, "--adam-eps"},
        {DT_OPTIM_SGD, &c.momentum, 1.5f, "--sgd-momentum"},
        {DT_OPTIM_SGD, &c.weight_decay, -1.0f, "--weight-decay"},
        {DT_OPTIM_LARS, &c.lars_eta, 0.0f, "--lars-eta"},
        {DT_OPTIM_LARS, &c.lars_eta, -0.001f, "--lars-eta"},
        {DT_OPTIM_LARS, &c.lars_eta, INFINITY, "--lars-eta"},
        {DT_OPTIM_LARS, &c.lars_eta, NAN, "--lars-eta"},
        {DT_OPTIM_LARS, &c.momentum, 1.0f, "--sgd-momentum"},
        {DT_OPTIM_LARS, &c.weight_decay, NAN, "--weight-decay"},
        {DT_OPTIM_LAMB, &c.beta1, 1.0f, "--adam-beta1"},
        {DT_OPTIM_LAMB, &c.beta2, 1.5f, "--adam-beta2"},
        {DT_OPTIM_LAMB, &c.eps, -1e-8f, "--adam-eps"},
        {DT_OPTIM_LAMB, &c.weight_decay, INFINITY, "--weight-decay"},
        {DT_OPTIM_LAMB, &c.lamb_gamma_l, -0.5f, "--lamb-gamma-l"},
        {DT_OPTIM_LAMB, &c.lamb_gamma_l, INFINITY, "--lamb-gamma-l"},
        {DT_OPTIM_LAMB, &c.lamb_gamma_l, NAN, "--lamb-gamma-l"},
        {DT_OPTIM_LAMB, &c.lamb_gamma_l, 11.0f, "--lamb-gamma-u"}, /* above the default gamma_u 10 */
        {DT_OPTIM_LAMB, &c.lamb_gamma_u, 0.0f, "--lamb-gamma-u"},
        {DT_OPTIM_LAMB, &c.lamb_gamma_u, NAN, "--lamb-gamma-u"},
        {DT_OPTIM_LAMB, &c.lamb_gamma_u, -INFINITY, "--lamb-gamma-u"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_optim_config_default(&c, bad[i].kind);
        *bad[i].field = bad[i].value;
        ck_assert_int_eq(dt_optim_init(&opt, &c, be, &ps), DT_ERR_INVALID);
        ck_assert_msg(strstr(dt_last_error(), bad[i].needle), "'%s' lacks %s", dt_last_error(), bad[i].needle);
        ck_assert_ptr_null(opt.state1.data);
    }
    dt_optim_config_default(&c, DT_OPTIM_SGD);
    c.momentum = 0.0f;
    c.nesterov = 1;
    ck_assert_int_eq(dt_optim_init(&opt, &c, be, &ps), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "Nesterov"));
    dt_optim_config_default(&c, DT_OPTIM_LARS);
    c.nesterov = 1;
    ck_assert_int_eq(dt_optim_init(&opt, &c, be, &ps), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "Nesterov"));
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "lars"));
    dt_optim_config_default(&c, DT_OPTIM_LAMB);
    c.kind = (dt_optim_kind)4;
    ck_assert_int_eq(dt_optim_init(&opt, &c, be, &ps), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "sgd, adamw, lars or lamb"));
    /* Fields of the other optimizers are not validated: LARS ignores the
     * Adam betas, LAMB the momentum and eta; gamma_u = +inf and gamma_l ==
     * gamma_u are valid. */
    dt_optim_config_default(&c, DT_OPTIM_LARS);
    c.beta1 = 2.0f;
    c.lamb_gamma_u = -1.0f;
    ck_dt(dt_optim_init(&opt, &c, be, &ps));
    dt_optim_free(&opt);
    dt_optim_config_default(&c, DT_OPTIM_LAMB);
    c.momentum = 2.0f;
    c.lars_eta = 0.0f;
    c.lamb_gamma_u = INFINITY;
    ck_dt(dt_optim_init(&opt, &c, be, &ps));
    dt_optim_free(&opt);
    c.lamb_gamma_l = c.lamb_gamma_u = 1.0f;
    ck_dt(dt_optim_init(&opt, &c, be, &ps));
    dt_optim_free(&opt);
    dt_paramset_free(&ps);
}
END_TEST

/* State, scratch and trust-ratio storage per kind. */
START_TEST(test_state_per_kind)
{
    dt_paramset ps;
    make_layout(&ps);
    const size_t state[4] = {36, 72, 36, 72};
    for (int k = 0; k < 4; k++) {
        dt_optim_config c;
        dt_optim_config_default(&c, (dt_optim_kind)k);
        dt_optim opt;
        ck_dt(dt_optim_init(&opt, &c, be, &ps));
        ck_assert_uint_eq(dt_optim_state_bytes(&opt), state[k] * sizeof(float));
        /* LAMB's u: the largest decay tensor ("w", 6), not the whole layout */
        ck_assert_uint_eq(dt_optim_scratch_bytes(&opt), k == DT_OPTIM_LAMB ? 6 * sizeof(float) : 0);
        int layerwise = k == DT_OPTIM_LARS || k == DT_OPTIM_LAMB;
        ck_assert_int_eq(dt_optim_has_trust_ratios(&opt), layerwise);
        const float *tr = dt_optim_trust_ratios(&opt);
        if (layerwise)
            for (int t = 0; t < ps.count; t++) ck_assert_float_eq(tr[t], 1.0f); /* before the first step */
        else ck_assert_ptr_null(tr);
        dt_optim_free(&opt);
        ck_assert_ptr_null(opt.state1.data);
        ck_assert_ptr_null(opt.state2.data);
        ck_assert_ptr_null(opt.scratch.data);
        ck_assert_ptr_null(opt.trust);
    }
    dt_paramset_free(&ps);
    /* u is sized by the decay tensors only, even when a no-decay one is larger */
    dt_paramset_init(&ps);
    int64_t big[1] = {1000}, small[2] = {3, 4};
    ck_dt(dt_paramset_add(&ps, "ln", 1, big, 0));
    ck_dt(dt_paramset_add(&ps, "w", 2, small, 1));
    dt_optim_config c;
    dt_optim_config_default(&c, DT_OPTIM_LAMB);
    dt_optim opt;
    ck_dt(dt_optim_init(&opt, &c, be, &ps));
    ck_assert_uint_eq(dt_optim_scratch_bytes(&opt), 12 * sizeof(float));
    dt_optim_free(&opt);
    dt_paramset_free(&ps);
}
END_TEST

/* AdamW against a double reference for 3 steps with varying lr and
 * grad_scale; decay only on "w" and "w2". */
START_TEST(test_adamw)
{
    dt_paramset ps;
    make_layout(&ps);
    dt_optim_config c;
    dt_optim_config_default(&c, DT_OPTIM_ADAMW);
    c.beta1 = 0.8f;
    c.beta2 = 0.9f;
    c.eps = 1e-6f;
    c.weight_decay = 0.1f;
    dt_optim opt;
    ck_dt(dt_optim_init(&opt, &c, be, &ps));
    ck_assert_uint_eq(dt_optim_state_bytes(&opt), 2 * 36 * sizeof(float));
    float p[36], g[36];
    double pd[36], md[36] = {0}, vd[36] = {0};
    fill(&ps, p, g, pd, 1);
    const float lrs[3] = {0.01f, 0.02f, 0.005f}, scales[3] = {1.0f, 0.5f, 3.0f};
    for (int s = 0; s < 3; s++) {
        grads_for_step(&ps, g, s);
        ck_dt(dt_optim_step(&opt, p, g, lrs[s], scales[s]));
        ck_assert_int_eq(opt.step, s + 1);
        double b1 = c.beta1, b2 = c.beta2, bc1 = 1 - pow(b1, s + 1), bc2 = 1 - pow(b2, s + 1);
        for (int t = 0; t < ps.count; t++) {
            double wd = ps.info[t].decay ? c.weight_decay : 0.0;
            for (size_t j = 0; j < ps.info[t].numel; j++) {
                size_t i = ps.info[t].offset + j;
                double gi = (double)g[i] * scales[s];
                md[i] = b1 * md[i] + (1 - b1) * gi;
                vd[i] = b2 * vd[i] + (1 - b2) * gi * gi;
                pd[i] -= lrs[s] * ((md[i] / bc1) / (sqrt(vd[i] / bc2) + c.eps) + wd * pd[i]);
            }
        }
        const float *m = opt.state1.data, *v = opt.state2.data;
        for (int t = 0; t < ps.count; t++)
            for (size_t j = 0; j < ps.info[t].numel; j++) {
                size_t i = ps.info[t].offset + j;
                ck_assert_msg(dt_test_close(p[i], pd[i], ATOL, RTOL), "step %d %s[%zu]: p %.9g, expected %.9g", s,
                              ps.info[t].name, j, (double)p[i], pd[i]);
                ck_assert_msg(dt_test_close(m[i], md[i], 1e-9, RTOL), "m[%zu] %.9g vs %.9g", i, (double)m[i], md[i]);
                ck_assert_msg(dt_test_close(v[i], vd[i], 1e-9, RTOL), "v[%zu] %.9g vs %.9g", i, (double)v[i], vd[i]);
            }
        check_gaps(&ps, p);
    }
    dt_optim_free(&opt);
    ck_assert_ptr_null(opt.state1.data);
    dt_paramset_free(&ps);
}
END_TEST

/* With zero gradients the moments stay 0, so AdamW only decays: decay
 * tensors shrink by exactly (1 - lr*wd) per step, the others stay put. */
START_TEST(test_adamw_decay_only_where_flagged)
{
    dt_paramset ps;
    make_layout(&ps);
    dt_optim_config c;
    dt_optim_config_default(&c, DT_OPTIM_ADAMW);
    c.weight_decay = 0.5f;
    dt_optim opt;
    ck_dt(dt_optim_init(&opt, &c, be, &ps));
    float p[36], g[36], p0[36];
    double pd[36];
    fill(&ps, p, g, pd, 2);
    for (int t = 0; t < ps.count; t++)
        for (size_t j = 0; j < ps.info[t].numel; j++) g[ps.info[t].offset + j] = 0.0f;
    memcpy(p0, p, sizeof p);
    for (int s = 0; s < 2; s++) ck_dt(dt_optim_step(&opt, p, g, 0.1f, 1.0f));
    for (int t = 0; t < ps.count; t++)
        for (size_t j = 0; j < ps.info[t].numel; j++) {
            size_t i = ps.info[t].offset + j;
            if (ps.info[t].decay) ck_assert(dt_test_close(p[i], p0[i] * 0.95 * 0.95, 1e-7, 1e-6));
            else ck_assert_float_eq(p[i], p0[i]); /* bit-identical */
        }
    dt_optim_free(&opt);
    dt_paramset_free(&ps);
}
END_TEST

static void sgd_case(float momentum, int nesterov, float wd)
{
    dt_paramset ps;
    make_layout(&ps);
    dt_optim_config c;
    dt_optim_config_default(&c, DT_OPTIM_SGD);
    c.momentum = momentum;
    c.nesterov = nesterov;
    c.weight_decay = wd;
    dt_optim opt;
    ck_dt(dt_optim_init(&opt, &c, be, &ps));
    float p[36], g[36];
    double pd[36], bd[36] = {0};
    fill(&ps, p, g, pd, 3);
    const float lrs[3] = {0.1f, 0.05f, 0.2f}, scales[3] = {2.0f, 1.0f, 0.25f};
    for (int s = 0; s < 3; s++) {
        grads_for_step(&ps, g, s);
        ck_dt(dt_optim_step(&opt, p, g, lrs[s], scales[s]));
        for (int t = 0; t < ps.count; t++) {
            double w = ps.info[t].decay ? wd : 0.0;
            for (size_t j = 0; j < ps.info[t].numel; j++) {
                size_t i = ps.info[t].offset + j;
                double gi = (double)g[i] * scales[s] + w * pd[i];
                bd[i] = s == 0 ? gi : momentum * bd[i] + gi; /* PyTorch: first buf = g */
                pd[i] -= lrs[s] * (nesterov ? gi + momentum * bd[i] : bd[i]);
            }
        }
        for (int t = 0; t < ps.count; t++)
            for (size_t j = 0; j < ps.info[t].numel; j++) {
                size_t i = ps.info[t].offset + j;
                ck_assert_msg(dt_test_close(p[i], pd[i], ATOL, RTOL),
                              "momentum %g nesterov %d wd %g step %d %s[%zu]: %.9g, expected %.9g", (double)momentum,
                              nesterov, (double)wd, s, ps.info[t].name, j, (double)p[i], pd[i]);
            }
        check_gaps(&ps, p);
    }
    ck_assert_uint_eq(dt_optim_state_bytes(&opt), 36 * sizeof(float));
    dt_optim_free(&opt);
    dt_paramset_free(&ps);
}

START_TEST(test_sgd)
{
    sgd_case(0.0f, 0, 0.0f);
    sgd_case(0.0f, 0, 0.1f);
    sgd_case(0.9f, 0, 0.0f);
    sgd_case(0.9f, 0, 0.05f);
    sgd_case(0.9f, 1, 0.0f);
    sgd_case(0.5f, 1, 0.05f);
}
END_TEST

/* ---- LARS and LAMB ------------------------------------------------------ */

/* ||x|| in double over one tensor of a double array. */
static double dnorm(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s);
}

static void zero_tensor(const dt_paramset *ps, int t, float *p, double *pd)
{
    for (size_t j = 0; j < ps->info[t].numel; j++) p[ps->info[t].offset + j] = 0.0f, pd[ps->info[t].offset + j] = 0.0;
}

/* Compare parameters, one state buffer and the trust ratios with the
 * reference after step s. */
static void check_step(const dt_paramset *ps, const dt_optim *opt, const float *p, const double *pd, const double *sd,
                       const double *trd, const char *what, int s)
{
    const float *st = opt->state1.data, *tr = dt_optim_trust_ratios(opt);
    for (int t = 0; t < ps->count; t++) {
        if (ps->info[t].decay)
            ck_assert_msg(dt_test_close(tr[t], trd[t], 0, TRUST_RTOL), "%s step %d %s: trust %.9g, expected %.9g", what,
                          s, ps->info[t].name, (double)tr[t], trd[t]);
        else
            ck_assert_msg(tr[t] == 1.0f, "%s step %d %s (no decay): trust %.9g, expected 1", what, s, ps->info[t].name,
                          (double)tr[t]);
        for (size_t j = 0; j < ps->info[t].numel; j++) {
            size_t i = ps->info[t].offset + j;
            ck_assert_msg(dt_test_close(p[i], pd[i], ATOL, RTOL), "%s step %d %s[%zu]: p %.9g, expected %.9g", what, s,
                          ps->info[t].name, j, (double)p[i], pd[i]);
            ck_assert_msg(dt_test_close(st[i], sd[i], ATOL, RTOL), "%s step %d %s[%zu]: state %.9g, expected %.9g",
                          what, s, ps->info[t].name, j, (double)st[i], sd[i]);
        }
    }
    check_gaps(ps, p);
}

/* LARS for 3 steps with varying lr and grad_scale against the equations of
 * dt_optim.h in double. zero_w2: "w2" starts at 0, so its first trust is 1. */
static void lars_case(float momentum, float wd, float eta, int zero_w2)
{
    dt_paramset ps;
    make_layout(&ps);
    dt_optim_config c;
    dt_optim_config_default(&c, DT_OPTIM_LARS);
    c.momentum = momentum;
    c.weight_decay = wd;
    c.lars_eta = eta;
    dt_optim opt;
    ck_dt(dt_optim_init(&opt, &c, be, &ps));
    float p[36], g[36];
    double pd[36], bd[36] = {0}, gd[36], trd[3];
    fill(&ps, p, g, pd, 6);
    if (zero_w2) zero_tensor(&ps, 2, p, pd);
    const float lrs[3] = {0.5f, 1.0f, 0.25f}, scales[3] = {1.0f, 0.5f, 3.0f};
    char what[96];
    snprintf(what, sizeof what, "lars momentum %g wd %g eta %g zero_w2 %d", (double)momentum, (double)wd, (double)eta,
             zero_w2);
    for (int s = 0; s < 3; s++) {
        grads_for_step(&ps, g, s);
        ck_dt(dt_optim_step(&opt, p, g, lrs[s], scales[s]));
        for (int t = 0; t < ps.count; t++) {
            size_t off = ps.info[t].offset, n = ps.info[t].numel;
            for (size_t j = 0; j < n; j++) gd[off + j] = (double)g[off + j] * scales[s];
            double w = ps.info[t].decay ? wd : 0.0, trust = 1.0;
            if (ps.info[t].decay) {
                double wn = dnorm(pd + off, n), gn = dnorm(gd + off, n);
                if (wn > 0 && gn + w * wn > 0) trust = eta * wn / (gn + w * wn);
                if (zero_w2 && t == 2 && s == 0) ck_assert(trust == 1.0); /* the corner case is hit */
            }
            trd[t] = trust;
            for (size_t j = 0; j < n; j++) {
                size_t i = off + j;
                bd[i] = momentum * bd[i] + lrs[s] * trust * (gd[i] + w * pd[i]);
                pd[i] -= bd[i];
            }
        }
        check_step(&ps, &opt, p, pd, bd, trd, what, s);
    }
    ck_assert_int_eq(opt.step, 3);
    dt_optim_free(&opt);
    dt_paramset_free(&ps);
}

START_TEST(test_lars)
{
    lars_case(0.0f, 0.0f, 0.5f, 0);
    lars_case(0.9f, 0.0f, 0.5f, 0);
    lars_case(0.9f, 0.05f, 0.5f, 0);
    lars_case(0.5f, 0.2f, 2.0f, 0);
    lars_case(0.9f, 0.05f, 0.5f, 1);
    lars_case(0.9f, 0.0f, 0.001f, 1); /* the default eta */
}
END_TEST

/* LAMB for 3 steps against the equations of dt_optim.h in double. Counts
 * the (step, decay tensor) pairs where phi clipped at gamma_l and gamma_u,
 * so callers can assert the case exercises what it claims. */
static void lamb_case(float wd, float gamma_l, float gamma_u, int zero_w2, int *n_low, int *n_high)
{
    dt_paramset ps;
    make_layout(&ps);
    dt_optim_config c;
    dt_optim_config_default(&c, DT_OPTIM_LAMB);
    c.beta1 = 0.8f;
    c.beta2 = 0.9f;
    c.eps = 1e-6f;
    c.weight_decay = wd;
    c.lamb_gamma_l = gamma_l;
    c.lamb_gamma_u = gamma_u;
    dt_optim opt;
    ck_dt(dt_optim_init(&opt, &c, be, &ps));
    float p[36], g[36];
    double pd[36], md[36] = {0}, vd[36] = {0}, ud[36], trd[3];
    fill(&ps, p, g, pd, 7);
    if (zero_w2) zero_tensor(&ps, 2, p, pd);
    const float lrs[3] = {0.1f, 0.2f, 0.05f}, scales[3] = {1.0f, 0.5f, 3.0f};
    char what[96];
    snprintf(what, sizeof what, "lamb wd %g phi [%g, %g] zero_w2 %d", (double)wd, (double)gamma_l, (double)gamma_u,
             zero_w2);
    *n_low = *n_high = 0;
    for (int s = 0; s < 3; s++) {
        grads_for_step(&ps, g, s);
        ck_dt(dt_optim_step(&opt, p, g, lrs[s], scales[s]));
        double b1 = c.beta1, b2 = c.beta2, bc1 = 1 - pow(b1, s + 1), bc2 = 1 - pow(b2, s + 1);
        for (int t = 0; t < ps.count; t++) {
            size_t off = ps.info[t].offset, n = ps.info[t].numel;
            double w = ps.info[t].decay ? wd : 0.0, trust = 1.0;
            for (size_t j = 0; j < n; j++) {
                size_t i = off + j;
                double gi = (double)g[i] * scales[s];
                md[i] = b1 * md[i] + (1 - b1) * gi;
                vd[i] = b2 * vd[i] + (1 - b2) * gi * gi;
                ud[i] = (md[i] / bc1) / (sqrt(vd[i] / bc2) + c.eps) + w * pd[i];
            }
            if (ps.info[t].decay) {
                double wn = dnorm(pd + off, n), un = dnorm(ud + off, n);
                double phi = wn < gamma_l ? gamma_l : wn > gamma_u ? gamma_u : wn;
                if (wn > 0 && wn < gamma_l) ++*n_low;
                if (wn > gamma_u) ++*n_high;
                if (wn > 0 && un > 0) trust = phi / un;
                if (zero_w2 && t == 2 && s == 0) ck_assert(trust == 1.0); /* the corner case is hit */
            }
            trd[t] = trust;
            for (size_t j = 0; j < n; j++) pd[off + j] -= lrs[s] * trust * ud[off + j];
        }
        check_step(&ps, &opt, p, pd, md, trd, what, s);
        const float *v = opt.state2.data;
        for (size_t i = 0; i < 36; i++) /* gaps included: 0 in both */
            REQUIRE(dt_test_close(v[i], vd[i], 1e-9, RTOL), "%s step %d: v[%zu] %.9g, expected %.9g", what, s, i,
                    (double)v[i], vd[i]);
    }
    dt_optim_free(&opt);
    dt_paramset_free(&ps);
}

START_TEST(test_lamb)
{
    int lo, hi;
    /* phi is the identity at the defaults (norms ~0.5-1 here) */
    lamb_case(0.0f, 0.0f, 10.0f, 0, &lo, &hi);
    ck_assert_int_eq(lo + hi, 0);
    lamb_case(0.1f, 0.0f, 10.0f, 0, &lo, &hi);
    ck_assert_int_eq(lo + hi, 0);
    lamb_case(0.1f, 0.0f, INFINITY, 0, &lo, &hi);
    ck_assert_int_eq(lo + hi, 0);
    /* every decay tensor clipped at the upper bound, then at the lower one */
    lamb_case(0.1f, 0.0f, 0.25f, 0, &lo, &hi);
    ck_assert_int_eq(hi, 6);
    lamb_case(0.1f, 2.0f, 5.0f, 0, &lo, &hi);
    ck_assert_int_eq(lo, 6);
    /* ||w|| == 0 gives trust 1 even where phi(0) = gamma_l = 2 */
    lamb_case(0.1f, 2.0f, 5.0f, 1, &lo, &hi);
    ck_assert_int_eq(lo, 5);
    lamb_case(0.0f, 0.0f, 10.0f, 1, &lo, &hi);
}
END_TEST

/* LAMB's step on a no-decay tensor is AdamW's with wd 0, to the bit; on
 * decay tensors it differs (the trust ratio is applied). */
START_TEST(test_lamb_nodecay_is_adam)
{
    dt_paramset ps;
    make_layout(&ps);
    dt_optim_config c;
    dt_optim_config_default(&c, DT_OPTIM_LAMB);
    c.weight_decay = 0.3f;
    dt_optim a, b;
    ck_dt(dt_optim_init(&a, &c, be, &ps));
    c.kind = DT_OPTIM_ADAMW;
    ck_dt(dt_optim_init(&b, &c, be, &ps));
    float pa[36], pb[36], g[36];
    double pd[36];
    fill(&ps, pa, g, pd, 8);
    memcpy(pb, pa, sizeof pa);
    for (int s = 0; s < 3; s++) {
        grads_for_step(&ps, g, s);
        ck_dt(dt_optim_step(&a, pa, g, 0.05f, 2.0f));
        ck_dt(dt_optim_step(&b, pb, g, 0.05f, 2.0f));
    }
    const dt_param_info *bi = &ps.info[1], *wi = &ps.info[0];
    ck_assert_int_eq(memcmp(pa + bi->offset, pb + bi->offset, bi->numel * sizeof(float)), 0);
    ck_assert_int_ne(memcmp(pa + wi->offset, pb + wi->offset, wi->numel * sizeof(float)), 0);
    dt_optim_free(&a);
    dt_optim_free(&b);
    dt_paramset_free(&ps);
}
END_TEST

/* Zero gradients without weight decay: LARS's denominator ||g'|| + wd*||w||
 * and LAMB's ||u|| are 0, so trust is 1 (not NaN) and nothing moves. */
START_TEST(test_layerwise_zero_denominator)
{
    for (int k = DT_OPTIM_LARS; k <= DT_OPTIM_LAMB; k++) {
        dt_paramset ps;
        make_layout(&ps);
        dt_optim_config c;
        dt_optim_config_default(&c, (dt_optim_kind)k);
        dt_optim opt;
        ck_dt(dt_optim_init(&opt, &c, be, &ps));
        float p[36], g[36], p0[36];
        double pd[36];
        fill(&ps, p, g, pd, 9);
        for (int t = 0; t < ps.count; t++)
            for (size_t j = 0; j < ps.info[t].numel; j++) g[ps.info[t].offset + j] = 0.0f;
        memcpy(p0, p, sizeof p);
        for (int s = 0; s < 2; s++) {
            ck_dt(dt_optim_step(&opt, p, g, 0.1f, 1.0f));
            for (int t = 0; t < ps.count; t++) ck_assert_float_eq(dt_optim_trust_ratios(&opt)[t], 1.0f);
            ck_assert_int_eq(memcmp(p, p0, sizeof p), 0);
        }
        /* and grad_scale 0 with nonzero gradients is the same case */
        grads_for_step(&ps, g, 0);
        ck_dt(dt_optim_step(&opt, p, g, 0.1f, 0.0f));
        for (int t = 0; t < ps.count; t++) ck_assert_float_eq(dt_optim_trust_ratios(&opt)[t], 1.0f);
        ck_assert_int_eq(memcmp(p, p0, sizeof p), 0);
        dt_optim_free(&opt);
        dt_paramset_free(&ps);
    }
}
END_TEST

/* Folding an unscale into grad_scale: grads g*2^-k with grad_scale 2^k
 * give bit-identical steps (power-of-two scaling is exact, and so is it on
 * LARS's ||g|| = sqrt(sumsq): sqrt commutes with scaling by 4^-k). */
START_TEST(test_grad_scale_folding)
{
    for (int kind = 0; kind < 4; kind++) {
        dt_paramset ps;
        make_layout(&ps);
        dt_optim_config c;
        dt_optim_config_default(&c, (dt_optim_kind)kind);
        c.weight_decay = 0.1f;
        c.lars_eta = 0.5f; /* a step well above float32 resolution */
        dt_optim a, b;
        ck_dt(dt_optim_init(&a, &c, be, &ps));
        ck_dt(dt_optim_init(&b, &c, be, &ps));
        float pa[36], pb[36], g[36], gs[36];
        double pd[36];
        fill(&ps, pa, g, pd, 4);
        memcpy(pb, pa, sizeof pa);
        for (int s = 0; s < 3; s++) {
            grads_for_step(&ps, g, s);
            for (int i = 0; i < 36; i++) gs[i] = g[i] * 0.125f;
            ck_dt(dt_optim_step(&a, pa, g, 0.01f, 1.0f));
            ck_dt(dt_optim_step(&b, pb, gs, 0.01f, 8.0f));
            ck_assert_int_eq(memcmp(pa, pb, sizeof pa), 0);
        }
        /* A non-trivial scale changes the step (it is applied at all). */
        ck_dt(dt_optim_step(&b, pb, gs, 0.01f, 1.0f));
        ck_dt(dt_optim_step(&a, pa, g, 0.01f, 1.0f));
        ck_assert_int_ne(memcmp(pa, pb, sizeof pa), 0);
        dt_optim_free(&a);
        dt_optim_free(&b);
        dt_paramset_free(&ps);
    }
}
END_TEST

START_TEST(test_step_rejects_nonfinite)
{
    dt_paramset ps;
    make_layout(&ps);
    dt_optim_config c;
    dt_optim_config_default(&c, DT_OPTIM_ADAMW);
    dt_optim opt;
    ck_dt(dt_optim_init(&opt, &c, be, &ps));
    float p[36], g[36];
    double pd[36];
    fill(&ps, p, g, pd, 5);
    ck_assert_int_eq(dt_optim_step(&opt, p, g, NAN, 1.0f), DT_ERR_NUMERIC);
    ck_assert_int_eq(dt_optim_step(&opt, p, g, 0.1f, INFINITY), DT_ERR_NUMERIC);
    ck_assert_int_eq(opt.step, 0);
    dt_optim_free(&opt);
    dt_paramset_free(&ps);
}
END_TEST

/* ---- gradient norm and clipping --------------------------------------- */

static double naive_sumsq(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

START_TEST(test_grad_norm)
{
    dt_paramset ps;
    dt_paramset_init(&ps);
    int64_t s1[2] = {3, 7}, s2[1] = {100003}, s3[2] = {512, 515};
    ck_dt(dt_paramset_add(&ps, "a", 2, s1, 1));
    ck_dt(dt_paramset_add(&ps, "b", 1, s2, 0));
    ck_dt(dt_paramset_add(&ps, "c", 2, s3, 1));
    float *g = malloc(ps.numel * sizeof *g);
    for (size_t i = 0; i < ps.numel; i++) g[i] = 1e6f; /* gaps: must not count */
    double want = 0;
    for (int t = 0; t < ps.count; t++) {
        float *x = g + ps.info[t].offset;
        for (size_t j = 0; j < ps.info[t].numel; j++) x[j] = (float)sin(0.37 * (double)(j + 1) * (t + 1)) * 0.01f;
        want += naive_sumsq(x, ps.info[t].numel);
    }
    want = sqrt(want);
    double n1, n2;
    ck_dt(dt_grad_norm(be, &ps, g, &n1));
    /* The squares are exact in double; only summation order differs from
     * the naive loop: ~n * 1e-16 relative. */
    ck_assert_msg(dt_test_close(n1, want, 0, 1e-10), "norm %.17g, naive %.17g", n1, want);
    ck_dt(dt_grad_norm(be, &ps, g, &n2));
    ck_assert(n1 == n2);
    /* Same bits with 2 threads: the chunking does not depend on threads. */
    ck_dt(be->set_threads(be, 2));
    ck_dt(dt_grad_norm(be, &ps, g, &n2));
    ck_assert(n1 == n2);
    free(g);
    dt_paramset_free(&ps);
}
END_TEST

/* One optimizer update waits for a GPU once for its loss-scale check and
 * its norm: dt__update_apply makes one span_stats call and no per-tensor
 * unscale_check or sumsq call of its own (counted by wrapping the front's
 * members), with and without an overflow; dt_grad_norm makes one too. The
 * norm is the hand-computed ||g / S|| (1e-12 relative: double sums). */
static int n_span, n_unscale, n_sumsq;
static dt_backend_span_stats_fn *real_span;
static dt_backend_unscale_check_fn *real_unscale;
static dt_backend_sumsq_fn *real_sumsq;
static dt_status count_span(dt_backend *b, float *x, const dt_span *sp, int n, float s, int *nf, double *sq)
{
    n_span++;
    return real_span(b, x, sp, n, s, nf, sq);
}
static dt_status count_unscale(dt_backend *b, float *x, float s, size_t n, int *nf)
{
    n_unscale++;
    return real_unscale(b, x, s, n, nf);
}
static dt_status count_sumsq(dt_backend *b, const float *x, size_t n, double *out)
{
    n_sumsq++;
    return real_sumsq(b, x, n, out);
}

START_TEST(test_update_one_wait)
{
    dt_paramset ps;
    make_layout(&ps);
    float p[36], g[36];
    double pd[36];
    fill(&ps, p, g, pd, 3);
    for (size_t i = 0; i < 36; i++)
        if (g[i] == GAP) g[i] = 0.0f; /* the gaps hold no gradient */
    real_span = be->span_stats, real_unscale = be->unscale_check, real_sumsq = be->sumsq;
    be->span_stats = count_span, be->unscale_check = count_unscale, be->sumsq = count_sumsq;
    dt_optim_config c;
    dt_optim_config_default(&c, DT_OPTIM_ADAMW);
    dt_optim opt;
    ck_dt(dt_optim_init(&opt, &c, be, &ps));
    dt_loss_scaler_config sc;
    dt_loss_scaler_config_default(&sc);
    dt_loss_scaler scaler;
    ck_dt(dt_loss_scaler_init(&scaler, &sc));
    const float S = 1024.0f;
    double want = 0.0;
    float gs[36];
    for (size_t i = 0; i < 36; i++) {
        gs[i] = g[i] * S; /* exact: a power of two */
        want += (double)g[i] * g[i];
    }
    want = sqrt(want);
    dt_lr_schedule lr = {.max_lr = 1e-3f, .min_lr = 1e-3f};
    for (int bad = 0; bad < 2; bad++) {
        if (bad) gs[17] = INFINITY; /* tensor 1, "b" */
        dt__update_args a = {.be = be, .layout = &ps, .params = p, .grads = gs, .opt = &opt, .scaler = &scaler,
                             .loss_scale = S, .lr = &lr, .position = bad, .clip_grad = 1.0f, .given_norm = -1.0};
        dt__update_result r;
        n_span = n_unscale = n_sumsq = 0;
        ck_dt(dt__update_apply(&a, &r));
        ck_assert_int_eq(n_span, 1);
        ck_assert_int_eq(n_unscale + n_sumsq, 0);
        ck_assert_int_eq(r.skipped, bad);
        ck_assert_int_eq(r.first_bad, bad ? 1 : -1);
        if (!bad) ck_assert_msg(fabs(r.norm - want) <= 1e-12 * want, "norm %.17g, by hand %.17g", r.norm, want);
    }
    double n2;
    n_span = n_unscale = n_sumsq = 0;
    ck_dt(dt_grad_norm(be, &ps, g, &n2));
    ck_assert_int_eq(n_span, 1);
    ck_assert_int_eq(n_unscale + n_sumsq, 0);
    ck_assert_msg(fabs(n2 - want) <= 1e-12 * want, "dt_grad_norm %.17g, by hand %.17g", n2, want);
    be->span_stats = real_span, be->unscale_check = real_unscale, be->sumsq = real_sumsq;
    dt_optim_free(&opt);
    dt_paramset_free(&ps);
}
END_TEST

START_TEST(test_clip_factor)
{
    ck_assert_float_eq(dt_clip_factor(10.0, 0.0f), 1.0f);  /* disabled */
    ck_assert_float_eq(dt_clip_factor(10.0, -1.0f), 1.0f); /* disabled */
    ck_assert_float_eq(dt_clip_factor(0.5, 1.0f), 1.0f);   /* below the limit */
    ck_assert_float_eq(dt_clip_factor(0.0, 1.0f), 1.0f);
    ck_assert(dt_test_close(dt_clip_factor(10.0, 1.0f), 1.0 / (10.0 + 1e-6), 0, 1e-7));
    ck_assert(dt_test_close(dt_clip_factor(4.0, 2.0f), 0.5, 0, 1e-6));
    /* clipped norm = factor * norm <= max_norm */
    ck_assert(dt_clip_factor(123.0, 1.0f) * 123.0 <= 1.0);
}
END_TEST

/* ---- CPU kernels directly, on sizes that take the threaded paths -------- */

START_TEST(test_cpu_kernels_large)
{
    ck_dt(be->set_threads(be, 2));
    const size_t sizes[] = {0, 1, 7, 8, 8191, 8193, 65537, 3000017};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        float *x = malloc((n + 1) * sizeof *x);
        for (size_t i = 0; i < n; i++) x[i] = (float)((int)(i % 2001) - 1000) * 1e-3f;
        double s1, s2;
        ck_dt(be->sumsq(be, x, n, &s1));
        /* positive terms: both orders are within ~sqrt(n) * 1e-16 typically */
        ck_assert_msg(dt_test_close(s1, naive_sumsq(x, n), 0, 1e-11), "n=%zu: %.17g vs %.17g", n, s1,
                      naive_sumsq(x, n));
        ck_dt(be->set_threads(be, 1));
        ck_dt(be->sumsq(be, x, n, &s2));
        ck_dt(be->set_threads(be, 2));
        ck_assert_msg(s1 == s2, "n=%zu: sumsq differs between 1 and 2 threads", n);
        ck_dt(be->scale(be, x, 0.5f, n));
        for (size_t i = 0; i < n; i++)
            REQUIRE(x[i] == (float)((int)(i % 2001) - 1000) * 1e-3f * 0.5f, "scale at %zu", i);
        free(x);
    }
    /* AdamW and SGD on 100003 elements (threaded) against the scalar formula. */
    size_t n = 100003;
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g), *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v),
          *buf = calloc(n, sizeof *buf), *q = malloc(n * sizeof *q);
    for (size_t i = 0; i < n; i++) {
        p[i] = q[i] = (float)((int)(i % 97) - 48) * 0.01f;
        g[i] = (float)((int)(i % 89) - 44) * 0.02f + 0.001f;
    }
    ck_dt(be->adamw_update(be, p, g, m, v, n, 0.01f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f, 0.5f));
    for (size_t i = 0; i < n; i++) {
        double gi = g[i] * 0.5, mi = 0.1 * gi, vi = 0.05 * gi * gi;
        double want = q[i] - 0.01 * ((mi / 0.1) / (sqrt(vi / 0.05) + 1e-8) + 0.1 * q[i]);
        REQUIRE(dt_test_close(m[i], mi, 1e-9, RTOL) && dt_test_close(v[i], vi, 1e-12, RTOL), "adamw moments at %zu", i);
        REQUIRE(dt_test_close(p[i], want, ATOL, RTOL), "adamw at %zu: %.9g vs %.9g", i, (double)p[i], want);
    }
    memcpy(p, q, n * sizeof *p);
    for (size_t i = 0; i < n; i++) buf[i] = 7.0f; /* first != 0: the old buffer is ignored */
    ck_dt(be->sgd_update(be, p, g, buf, n, 0.1f, 0.9f, 0.01f, 2.0f, 1, 1));
    ck_dt(be->sgd_update(be, p, g, buf, n, 0.1f, 0.9f, 0.01f, 2.0f, 1, 0));
    for (size_t i = 0; i < n; i++) {
        double p1 = q[i], g1 = g[i] * 2.0 + 0.01 * p1, b1 = g1;
        p1 -= 0.1 * (g1 + 0.9 * b1);
        double g2 = g[i] * 2.0 + 0.01 * p1, b2 = 0.9 * b1 + g2;
        p1 -= 0.1 * (g2 + 0.9 * b2);
        REQUIRE(dt_test_close(buf[i], b2, ATOL, RTOL), "sgd buf at %zu", i);
        REQUIRE(dt_test_close(p[i], p1, ATOL, RTOL), "sgd at %zu: %.9g vs %.9g", i, (double)p[i], p1);
    }
    /* bias corrections of 0 (step 0) are a caller bug the op reports */
    ck_assert_int_eq(be->adamw_update(be, p, g, m, v, n, 0.01f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.0f, 0.0f, 1.0f),
                     DT_ERR_INVALID);
    free(p);
    free(g);
    free(m);
    free(v);
    free(buf);
    free(q);
}
END_TEST

/* LARS, LAMB's direction and axpy on 100003 elements (threaded) against the
 * scalar formulas, and bit-identical between 1 and 2 threads. */
START_TEST(test_cpu_layerwise_kernels_large)
{
    /* float constants, widened exactly for the reference, so only the
     * kernels' own rounding is measured (m cancels to ~2e-3 at some i) */
    const float lr = 0.5f, trust = 0.02f, mom = 0.9f, wd = 0.1f, gs1 = 2.0f, b0 = 0.5f;
    const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, bc1 = 0.19f, bc2 = 0.0975f, gs2 = 0.5f, m0 = 0.01f, v0 = 0.04f;
    const float a = -0.25f;
    size_t n = 100003;
    float *q = malloc(n * sizeof *q), *g = malloc(n * sizeof *g), *p[2], *buf[2], *m[2], *v[2], *u[2];
    for (size_t i = 0; i < n; i++) {
        q[i] = (float)((int)(i % 97) - 48) * 0.01f;
        g[i] = (float)((int)(i % 89) - 44) * 0.02f + 0.001f;
    }
    for (int r = 0; r < 2; r++) {
        ck_dt(be->set_threads(be, r == 0 ? 2 : 1));
        p[r] = malloc(n * sizeof(float));
        buf[r] = malloc(n * sizeof(float));
        m[r] = malloc(n * sizeof(float));
        v[r] = malloc(n * sizeof(float));
        u[r] = malloc(n * sizeof(float));
        memcpy(p[r], q, n * sizeof(float));
        for (size_t i = 0; i < n; i++) buf[r][i] = b0, m[r][i] = m0, v[r][i] = v0;
        ck_dt(be->lars_update(be, p[r], g, buf[r], n, lr, trust, mom, wd, gs1));
        ck_dt(be->lamb_direction(be, u[r], p[r], g, m[r], v[r], n, b1, b2, eps, wd, bc1, bc2, gs2));
        ck_dt(be->axpy(be, p[r], a, u[r], n));
    }
    for (size_t i = 0; i < n; i++) {
        double b = (double)mom * b0 + (double)lr * trust * ((double)g[i] * gs1 + (double)wd * q[i]);
        double p1 = q[i] - b;
        double gi = (double)g[i] * gs2, mi = (double)b1 * m0 + (1.0 - b1) * gi;
        double vi = (double)b2 * v0 + (1.0 - b2) * gi * gi;
        double ui = (mi / bc1) / (sqrt(vi / bc2) + eps) + (double)wd * p1;
        REQUIRE(dt_test_close(buf[0][i], b, ATOL, RTOL), "lars buf at %zu: %.9g vs %.9g", i, (double)buf[0][i], b);
        REQUIRE(dt_test_close(m[0][i], mi, 1e-9, RTOL) && dt_test_close(v[0][i], vi, 1e-9, RTOL),
                "lamb moments at %zu: m %.9g vs %.9g, v %.9g vs %.9g", i, (double)m[0][i], mi, (double)v[0][i], vi);
        REQUIRE(dt_test_close(u[0][i], ui, ATOL, RTOL), "lamb u at %zu: %.9g vs %.9g", i, (double)u[0][i], ui);
        REQUIRE(dt_test_close(p[0][i], p1 + (double)a * ui, ATOL, RTOL), "lars+axpy p at %zu", i);
    }
    ck_assert_int_eq(memcmp(p[0], p[1], n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(buf[0], buf[1], n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(u[0], u[1], n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(m[0], m[1], n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(v[0], v[1], n * sizeof(float)), 0);
    /* bias corrections of 0 (step 0) are a caller bug the op reports */
    ck_assert_int_eq(be->lamb_direction(be, u[0], p[0], g, m[0], v[0], n, 0.9f, 0.95f, 1e-8f, 0.0f, 0.0f, 0.5f, 1.0f),
                     DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "bias correction"));
    /* n = 0 touches nothing */
    ck_dt(be->lars_update(be, NULL, NULL, NULL, 0, 0.5f, 1.0f, 0.9f, 0.0f, 1.0f));
    ck_dt(be->lamb_direction(be, NULL, NULL, NULL, NULL, NULL, 0, 0.9f, 0.95f, 1e-8f, 0.0f, 0.1f, 0.05f, 1.0f));
    ck_dt(be->axpy(be, NULL, 1.0f, NULL, 0));
    for (int r = 0; r < 2; r++) {
        free(p[r]);
        free(buf[r]);
        free(m[r]);
        free(v[r]);
        free(u[r]);
    }
    free(q);
    free(g);
}
END_TEST

/* ---- learning-rate schedule ------------------------------------------- */

static void lr_is(const dt_lr_schedule *s, int64_t it, double want)
{
    double got = dt_lr_at(s, it);
    ck_assert_msg(dt_test_close(got, want, 1e-12, 1e-6), "style %d it %lld: %.9g, expected %.9g", (int)s->style,
                  (long long)it, got, want);
}

START_TEST(test_lr_schedule)
{
    const double hi = 1e-3, lo = 1e-4;
    dt_lr_schedule s = {.max_lr = (float)hi, .min_lr = (float)lo, .warmup_iters = 10, .decay_iters = 110};
    for (int style = 0; style < 3; style++) {
        s.style = (dt_lr_decay)style;
        /* warm-up: (it+1)/W * max, the same for every style */
        lr_is(&s, 0, hi / 10);
        lr_is(&s, 4, hi / 2);
        lr_is(&s, 9, hi);
        lr_is(&s, 10, hi); /* decay starts at max_lr */
    }
    s.style = DT_LR_CONSTANT;
    lr_is(&s, 35, hi);
    lr_is(&s, 110, hi);
    lr_is(&s, 100000, hi);
    s.style = DT_LR_LINEAR; /* r = (it - 10) / 100 */
    lr_is(&s, 35, hi - 0.25 * (hi - lo));
    lr_is(&s, 60, hi - 0.5 * (hi - lo));
    lr_is(&s, 109, hi - 0.99 * (hi - lo));
    lr_is(&s, 110, lo);
    lr_is(&s, 5000, lo);
    s.style = DT_LR_COSINE;
    lr_is(&s, 35, lo + 0.5 * (1 + cos(M_PI * 0.25)) * (hi - lo));
    lr_is(&s, 60, lo + 0.5 * (hi - lo));
    lr_is(&s, 85, lo + 0.5 * (1 + cos(M_PI * 0.75)) * (hi - lo));
    lr_is(&s, 110, lo);
    lr_is(&s, 5000, lo);
    /* decay is monotone between the boundaries */
    for (int style = 1; style < 3; style++) {
        s.style = (dt_lr_decay)style;
        for (int64_t it = 10; it < 115; it++) ck_assert(dt_lr_at(&s, it + 1) <= dt_lr_at(&s, it));
    }
    /* no warm-up: it = 0 is already max_lr */
    s.warmup_iters = 0;
    s.style = DT_LR_COSINE;
    lr_is(&s, 0, hi);
    lr_is(&s, 55, lo + 0.5 * (1 + cos(M_PI * 0.5)) * (hi - lo));
    /* decay ending inside warm-up: min_lr right after it */
    s.warmup_iters = 10;
    s.decay_iters = 5;
    s.style = DT_LR_LINEAR;
    lr_is(&s, 9, hi);
    lr_is(&s, 10, lo);
}
END_TEST

static Suite *optim_suite(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("optimizers");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_defaults_and_parse);
    tcase_add_test(tc, test_init_errors);
    tcase_add_test(tc, test_adamw);
    tcase_add_test(tc, test_adamw_decay_only_where_flagged);
    tcase_add_test(tc, test_sgd);
    tcase_add_test(tc, test_state_per_kind);
    tcase_add_test(tc, test_lars);
    tcase_add_test(tc, test_lamb);
    tcase_add_test(tc, test_lamb_nodecay_is_adam);
    tcase_add_test(tc, test_layerwise_zero_denominator);
    tcase_add_test(tc, test_grad_scale_folding);
    tcase_add_test(tc, test_step_rejects_nonfinite);
    tcase_add_test(tc, test_grad_norm);
    tcase_add_test(tc, test_clip_factor);
    tcase_add_test(tc, test_update_one_wait);
    tcase_add_test(tc, test_cpu_kernels_large);
    tcase_add_test(tc, test_cpu_layerwise_kernels_large);
    suite_add_tcase(s, tc);
    TCase *lr = tcase_create("lr");
    tcase_add_test(lr, test_lr_schedule);
    suite_add_tcase(s, lr);
    return s;
}

int main(void) { return dt_test_run(optim_suite()); }
