/* check_zero_stages.c: ZeRO stages 2 and 3 (lib/parallel/zero_gpt.c and
 * the trainer's --zero-stage). Run by tests/zero.sh under mpirun with 1..4
 * ranks; every rank runs the whole suite on the MPI world (a "self"
 * communicator when built without MPI). `check_zero_stages --have-mpi`
 * prints yes or no and starts nothing.
 *
 * Memory: each rank's bytes of weights, gradients and optimizer state
 * equal the formulas of docs/zero.md applied to dtrain's layout (numel N
 * with its alignment padding, and this rank's segment S of every unit,
 * dt_comm_segment of the unit's length): stage 2 weights 4N (FP32) or 2N
 * (16-bit), stage 3 none; gradients 4S; optimizer 4S (FP32 masters) +
 * AdamW's 8S; the segments add up to N over the ranks. Each is printed
 * with its ratio to the paper's figure for the same N and n (2Ψ + 14Ψ/n,
 * 16Ψ/n under mixed precision; 4Ψ + 12Ψ/n, 16Ψ/n in FP32).
 *
 * Against data parallelism: the same training run (the tiny GPT, task
 * add, 3 steps) with the replica strategy (ring allreduce, in buckets of
 * the same bytes: stage 3's units are the buckets of --bucket-size-mb 0)
 * and with --zero-stage 2 or 3; after every step the losses (within
 * 1e-5 relative where not bit-identical: see below), the skipped steps
 * and the loss scale must be equal, and at the end every element of
 * this rank's shard of FP32 weights must equal the replica's weight at
 * its index, bit for bit, where the summation order is the same (one
 * micro-batch per rank, no clipping); with gradient accumulation (the
 * ranks summed per micro-batch, then the micro-batches) and with clipping
 * (the norm crosses the ranks as a float) within 1e-4 + 1e-5 |w|, in
 * fp32, bf16 and fp16 (from a loss scale of 2^17 times the step's
 * micro-batches the first step overflows and is skipped on every rank, the
 * next ones train). Why: the two runs' gradients differ in the last bits
 * (~1e-6 relative: sums of a few hundred terms in another order), and
 * AdamW's step lr m^/(sqrt(v^) + eps) has the size of lr whatever the
 * gradient's, so an element's steps differ by ~lr 1e-6 and the weights by
 * ~1e-8 after 3 steps: 1e-4 + 1e-5 |w| is far above that (measured at
 * most 1.1e-5 on 1-4 ranks in both builds of the developers' Xeon,
 * printed: the sum over the ranks of each rank's largest difference, an
 * upper bound). Where an element's gradients cancel to within their
 * rounding, AdamW's division can turn the last bits into a different
 * step, as large as the step itself: by Cauchy-Schwarz |m^| / sqrt(v^) <=
 * 1.001 for t <= 3 with beta1 0.9 and beta2 0.95, so no element may part
 * by more than 2 x 1.001 x lr per step (the hard bound below), and such
 * elements must stay rare: at most 1 in 1000 of a shard beyond 1e-4 +
 * 1e-5 |w| (0 seen). A wrong shard, index or sum moves most elements.
 *
 * The peak of saved activations equals the replica's to the byte (the same
 * arena: 2-byte stores under mixed precision, selective recomputation).
 *
 * With --zero-prefetch (a communication thread gathers the next layer
 * while one computes) the collectives are the same, in the same order:
 * the same results, bit for bit where the run without it is.
 *
 * Checkpoints: 2 steps, save, a new trainer loads and runs 2 more: every
 * shard element and the losses equal the uninterrupted 4 steps'.
 *
 * Tests communicate first and assert afterwards (messages collected in
 * err), so a wrong value on one rank does not leave the others waiting;
 * main sums the failures of all ranks. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "gpt_layers.h"
#include "trainer_internal.h"
#include "zero_gpt.h"

static dt_comm *g_world;
static dt_backend *g_be;

static void note(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char *err, size_t cap, const char *fmt, ...)
{
    if (err[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* 1 on every rank when any rank says bad */
static int any_bad(int bad)
{
    float f = (float)(bad != 0);
    ck_dt(dt_comm_allreduce(g_world, &f, 1, DT_ALLREDUCE_RING, NULL));
    return f > 0.0f;
}

/* index of the first element whose bits differ, or SIZE_MAX */
static size_t first_mismatch(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
    return SIZE_MAX;
}

/* ---- memory against the formulas ------------------------------------------- */

static const dt_gpt_config small_model = {
    .vocab_size = 32, .seq_len = 8, .num_layers = 3, .num_heads = 2, .hidden_size = 16};

START_TEST(test_bytes_formula)
{
    const int stage = 2 + _i / 2, mixed = _i % 2;
    const int n = g_world->size, r = g_world->rank;
    dt_optim_config oc;
    dt_optim_config_default(&oc, DT_OPTIM_ADAMW);
    /* stage 2 in buckets of about one block (three units); stage 3 a unit per layer */
    const size_t bucket = 16000;
    const dt__zgpt_config zc = {.model = &small_model,
                                .stage = stage,
                                .precision = mixed ? DT_BF16 : DT_F32,
                                .recompute = DT_RECOMPUTE_NONE,
                                .bucket_bytes = bucket,
                                .init = {.seed = 7},
                                .optim = &oc};
    dt__zgpt *z = NULL;
    ck_dt(dt__zgpt_create(&zc, g_world, g_be, &z));
    const dt_paramset *L = dt__zgpt_layout(z);
    const size_t N = L->numel;
    /* the units from the buckets of data parallelism, this rank's segment of each */
    size_t off[8], len[8];
    int low[8];
    const int nu = dt__gpt_buckets(&small_model, L, stage == 3 ? 0 : bucket, off, len, low);
    size_t S = 0;
    for (int u = 0; u < nu; u++) {
        size_t so, sl;
        dt_comm_segment(len[u], n, r, &so, &sl);
        S += sl;
    }
    ck_assert_int_eq(nu, dt__zero_units(dt__zgpt_zero(z)));
    if (stage == 3) ck_assert_int_eq(nu, small_model.num_layers + 2);
    else ck_assert_int_ge(nu, 2); /* several buckets */
    dt__zgpt_bytes b;
    dt__zgpt_bytes_of(z, &b);
    const size_t f = sizeof(float);
    const size_t want_w = stage == 3 ? 0 : N * (mixed ? 2 : f);
    char err[256] = "";
    if (b.weights != want_w) note(err, sizeof err, "weights %zu bytes, formula %zu", b.weights, want_w);
    if (b.gradients != S * f) note(err, sizeof err, "gradients %zu bytes, formula 4S = %zu", b.gradients, S * f);
    if (b.optimizer != 3 * S * f)
        note(err, sizeof err, "optimizer %zu bytes, formula 12S = %zu", b.optimizer, 3 * S * f);
    float total = (float)S;
    ck_dt(dt_comm_allreduce(g_world, &total, 1, DT_ALLREDUCE_RING, NULL));
    if ((size_t)total != N) note(err, sizeof err, "the segments add up to %.0f, numel %zu", (double)total, N);
    const double nd = (double)n, paper = stage == 3 ? 16.0 * N / nd
                                         : mixed    ? 2.0 * N + 14.0 * N / nd
                                                    : 4.0 * N + 12.0 * N / nd;
    const double mine = (double)(b.weights + b.gradients + b.optimizer);
    if (r == 0)
        printf("check_zero_stages: stage %d %s n=%d N=%zu S=%zu: weights %zu gradients %zu optimizer %zu "
               "(formula %s) = %.0f bytes, paper %.0f, ratio %.4f; working %zu\n",
               stage, mixed ? "bf16" : "fp32", n, N, S, b.weights, b.gradients, b.optimizer,
               stage == 3 ? "4S + 12S"
               : mixed    ? "2N + 4S + 12S"
                          : "4N + 4S + 12S",
               mine, paper, mine / paper, b.working);
    dt__zgpt_free(z);
    ck_assert_msg(!any_bad(err[0] != 0), "rank %d: %s", r, err[0] ? err : "another rank failed");
}
END_TEST

/* ---- against data parallelism ------------------------------------------------- */

typedef struct scase {
    const char *name;
    int stage;
    dt_dtype precision;
    int accum;     /* micro-batches per rank and step */
    float clip;    /* 0: none */
    int exact;     /* 1: bit-identical expected */
    size_t bucket; /* stage 2's bucket bytes (stage 3: 0) */
    int recompute; /* selective */
    int prefetch;  /* --zero-prefetch */
} scase;

static const scase scases[] = {
    {"stage 2 fp32", 2, DT_F32, 1, 0.0f, 1, 64000, 0, 0},
    {"stage 3 fp32", 3, DT_F32, 1, 0.0f, 1, 0, 0, 0},
    {"stage 2 bf16", 2, DT_BF16, 1, 0.0f, 1, 64000, 0, 0},
    {"stage 3 bf16 selective", 3, DT_BF16, 1, 0.0f, 1, 0, 1, 0},
    {"stage 3 fp16 overflow", 3, DT_F16, 1, 0.0f, 1, 0, 0, 0},
    {"stage 2 fp16 overflow", 2, DT_F16, 1, 0.0f, 1, 64000, 0, 0},
    {"stage 3 fp32 accumulation 2", 3, DT_F32, 2, 0.0f, 0, 0, 0, 0},
    {"stage 2 bf16 accumulation 2", 2, DT_BF16, 2, 0.0f, 0, 64000, 0, 0},
    {"stage 3 fp32 clip", 3, DT_F32, 1, 0.05f, 0, 0, 0, 0},
    {"stage 3 fp32 prefetch", 3, DT_F32, 1, 0.0f, 1, 0, 0, 1},
    {"stage 3 bf16 selective prefetch", 3, DT_BF16, 1, 0.0f, 1, 0, 1, 1},
    {"stage 3 fp16 overflow prefetch, accumulation 2", 3, DT_F16, 2, 0.0f, 0, 0, 0, 1},
};
#define N_SCASES (int)(sizeof scases / sizeof scases[0])

static void base_cfg(const scase *c, int stage, dt_train_config *cfg)
{
    dt_train_config_default(cfg);
    cfg->comm = g_world;
    cfg->seq_length = 16;
    cfg->data.digits = 2;
    cfg->micro_batch_size = 2;
    cfg->global_batch_size = 2 * c->accum * g_world->size;
    cfg->train_iters = 4;
    cfg->lr.warmup_iters = 1;
    cfg->lr.decay_iters = 4;
    cfg->threads = 1;
    cfg->eval_iters = 1;
    cfg->clip_grad = c->clip;
    cfg->precision = c->precision;
    cfg->bucket_bytes = c->bucket;
    cfg->allreduce = DT_ALLREDUCE_RING;
    if (c->recompute) cfg->recompute = DT_RECOMPUTE_SELECTIVE;
    if (c->precision == DT_F16) {
        cfg->use_loss_scaling = 1;
        /* 2^17 per micro-batch of the step: the first step overflows, the next ones train (a micro-batch's
         * gradient is weighted by its share of the step's targets) */
        cfg->loss_scaler.initial_scale = 131072.0f * (float)(c->accum * g_world->size);
        cfg->loss_scaler.hysteresis = 1;
    }
    cfg->zero_stage = stage;
    cfg->zero_prefetch = stage == 3 && c->prefetch;
}

typedef struct run_out {
    float loss[8];
    int64_t skipped;
    float scale;
    size_t peak_act; /* peak saved-activation bytes */
    int64_t gathers; /* stage 3: layer gathers over the run */
    float *whole;    /* zero: the whole weights as the model computes with them (dt__zgpt_weights) */
    float *w;        /* replica: the whole FP32 weights; zero: this rank's shard of masters */
    size_t n;
} run_out;

static void run(const dt_train_config *cfg, int steps, const char *save, const char *load, run_out *o)
{
    dt_trainer *tr = NULL;
    ck_dt(dt_trainer_create(cfg, &tr));
    if (load) ck_dt(dt_trainer_load(tr, load));
    for (int s = 0; s < steps; s++) {
        dt_train_stats st;
        ck_dt(dt_trainer_step(tr, &st));
        o->loss[s] = st.loss;
    }
    if (save) ck_dt(dt_trainer_save(tr, save));
    o->skipped = cfg->use_loss_scaling ? tr->scaler.skipped : 0;
    o->scale = cfg->use_loss_scaling ? dt_loss_scaler_scale(&tr->scaler) : 1.0f;
    o->peak_act = dt_trainer_peak_activation_bytes(tr);
    if (tr->zgpt) {
        dt__zgpt_traffic t;
        dt__zgpt_traffic_of(tr->zgpt, &t);
        o->gathers = t.gathers;
        const size_t N = dt__zgpt_layout(tr->zgpt)->numel;
        o->whole = calloc(N, sizeof *o->whole);
        ck_assert(o->whole != NULL);
        ck_dt(dt__zgpt_weights(tr->zgpt, o->whole)); /* collective: an all-gather per unit at stage 3 */
    }
    const float *src;
    if (tr->zgpt) {
        dt__zero *z = dt__zgpt_zero(tr->zgpt);
        size_t lo;
        dt__zero_shard(z, &lo, &o->n);
        src = dt__zero_master(z);
    } else {
        o->n = dt_gpt_layout(tr->gpt.model)->numel;
        src = dt_gpt_params(tr->gpt.model);
    }
    o->w = calloc(o->n ? o->n : 1, sizeof *o->w);
    ck_assert(o->w != NULL);
    memcpy(o->w, src, o->n * sizeof *o->w);
    dt_trainer_free(tr);
}

/* The flat index of each shard element of a fresh stage-`stage` model of cfg. */
static size_t *shard_index(const dt_train_config *cfg, size_t *n)
{
    dt_trainer *tr = NULL;
    ck_dt(dt_trainer_create(cfg, &tr));
    dt__zero *z = dt__zgpt_zero(tr->zgpt);
    size_t lo;
    dt__zero_shard(z, &lo, n);
    size_t *ix = calloc(*n ? *n : 1, sizeof *ix);
    ck_assert(ix != NULL);
    for (size_t i = 0; i < *n; i++) ix[i] = dt__zero_shard_index(z, i);
    dt_trainer_free(tr);
    return ix;
}

START_TEST(test_stage_matches_dp)
{
    const scase *c = &scases[_i];
    dt_train_config dcfg, zcfg;
    base_cfg(c, 0, &dcfg);
    base_cfg(c, c->stage, &zcfg);
    if (c->stage == 3) dcfg.bucket_bytes = 0; /* a bucket per layer: stage 3's units */
    run_out d = {0}, z = {0};
    const int steps = 3;
    run(&dcfg, steps, NULL, NULL, &d);
    run(&zcfg, steps, NULL, NULL, &z);
    size_t n = 0;
    size_t *ix = shard_index(&zcfg, &n);
    char err[256] = "";
    double worst = 0.0;
    for (int s = 0; s < steps; s++)
        if (memcmp(&d.loss[s], &z.loss[s], sizeof(float)) != 0 &&
            (c->exact || fabsf(d.loss[s] - z.loss[s]) > 1e-5f * (1.0f + fabsf(d.loss[s]))))
            note(err, sizeof err, "step %d: loss %.9g, data parallelism's %.9g", s, (double)z.loss[s],
                 (double)d.loss[s]);
    if (d.skipped != z.skipped || d.scale != z.scale)
        note(err, sizeof err, "skipped %lld at scale %g, data parallelism %lld at %g", (long long)z.skipped,
             (double)z.scale, (long long)d.skipped, (double)d.scale);
    if (c->precision == DT_F16 && (z.skipped < 1 || z.skipped >= steps))
        note(err, sizeof err, "fp16: %lld of %d steps skipped (expected some, not all)", (long long)z.skipped, steps);
    /* stage 3's gathers per micro-batch: every layer for the forward, the blocks for the backward (the
     * head's forward copy serves its backward, the embedding's reads none); with prefetch the second
     * buffer keeps the last block's forward copy for its backward and block 0's backward copy for the
     * next micro-batch's forward */
    const int L = zcfg.model.num_layers, acc = c->accum;
    const int64_t want_g = c->stage != 3  ? 0
                           : !c->prefetch ? (int64_t)steps * acc * (2 * L + 2)
                                          : (int64_t)steps * (acc * (2 * L + 1) - (acc - 1));
    if (z.gathers != want_g)
        note(err, sizeof err, "%lld layer gathers in %d steps, expected %lld", (long long)z.gathers, steps,
             (long long)want_g);
    if (z.peak_act != d.peak_act) /* the same arena: packed stores under mixed precision, selective recomputation */
        note(err, sizeof err, "peak activations %zu bytes, data parallelism's %zu", z.peak_act, d.peak_act);
    /* the hard bound: every step at most 1.001 lr in size (see the top), in each run */
    const double hard = 2.0 * 1.001 * steps * (double)zcfg.lr.max_lr;
    size_t beyond = 0;
    for (size_t i = 0; i < n && i < z.n; i++) {
        const float a = z.w[i], b = d.w[ix[i]];
        const double diff = fabs((double)a - (double)b);
        worst = fmax(worst, diff);
        if (c->exact ? memcmp(&a, &b, sizeof a) != 0 : diff > hard + 1e-5 * fabs((double)b))
            note(err, sizeof err, "shard element %zu (flat %zu): %.9g, data parallelism's %.9g", i, ix[i], (double)a,
                 (double)b);
        beyond += !c->exact && diff > 1e-4 + 1e-5 * fabs((double)b);
    }
    if (beyond * 1000 > n)
        note(err, sizeof err, "%zu of %zu shard elements differ from data parallelism's by more than 1e-4 + 1e-5|w|",
             beyond, n);
    /* FP32: the weights the model computes with, gathered whole, are the replica's */
    if (c->exact && c->precision == DT_F32 && z.whole && first_mismatch(z.whole, d.w, d.n) != SIZE_MAX)
        note(err, sizeof err, "the whole weights differ from data parallelism's at element %zu",
             first_mismatch(z.whole, d.w, d.n));
    float wf = (float)worst;
    ck_dt(dt_comm_allreduce(g_world, &wf, 1, DT_ALLREDUCE_RING, NULL)); /* a sum: an upper bound of the largest */
    if (g_world->rank == 0)
        printf("check_zero_stages: %s, %d rank(s): %s; largest weight difference <= %.3g (skipped %lld)\n", c->name,
               g_world->size, c->exact ? "bit-identical" : "within 1e-4 + 1e-5|w| (all but 1 in 1000)", (double)wf,
               (long long)z.skipped);
    free(ix);
    free(d.w);
    free(z.w);
    free(z.whole);
    ck_assert_msg(!any_bad(err[0] != 0), "%s, rank %d: %s", c->name, g_world->rank, err[0] ? err : "another rank");
}
END_TEST

/* ---- checkpoints ------------------------------------------------------------------ */

START_TEST(test_resume_exact)
{
    const scase c = {"resume", 2 + _i, _i ? DT_BF16 : DT_F32, 1, 0.0f, 1, 64000, 0, 0};
    dt_train_config cfg;
    base_cfg(&c, c.stage, &cfg);
    /* one directory for every rank: rank 0's pid */
    float pid = (float)(g_world->rank == 0 ? getpid() : 0);
    ck_dt(dt_comm_allreduce(g_world, &pid, 1, DT_ALLREDUCE_RING, NULL));
    char dir[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/check_zero_stages_%ld_%d", tmp && tmp[0] ? tmp : "/tmp", (long)pid, c.stage);
    run_out whole = {0}, first = {0}, rest = {0};
    run(&cfg, 4, NULL, NULL, &whole);
    cfg.save_dir = dir;
    cfg.save_interval = 1000; /* the explicit save below only */
    run(&cfg, 2, dir, NULL, &first);
    cfg.save_dir = NULL;
    run(&cfg, 2, NULL, dir, &rest);
    char err[256] = "";
    for (int s = 0; s < 2; s++) {
        if (memcmp(&whole.loss[s], &first.loss[s], sizeof(float)) != 0) note(err, sizeof err, "step %d's loss", s);
        if (memcmp(&whole.loss[2 + s], &rest.loss[s], sizeof(float)) != 0)
            note(err, sizeof err, "resumed step %d: loss %.9g, uninterrupted %.9g", 2 + s, (double)rest.loss[s],
                 (double)whole.loss[2 + s]);
    }
    if (whole.n != rest.n || memcmp(whole.w, rest.w, whole.n * sizeof(float)) != 0)
        note(err, sizeof err, "the resumed shard differs from the uninterrupted one");
    free(whole.w);
    free(first.w);
    free(rest.w);
    free(whole.whole);
    free(first.whole);
    free(rest.whole);
    if (g_world->rank == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
    }
    ck_assert_msg(!any_bad(err[0] != 0), "stage %d, rank %d: %s", c.stage, g_world->rank,
                  err[0] ? err : "another rank");
}
END_TEST

/* ---- refusals --------------------------------------------------------------------- */

START_TEST(test_refusals)
{
    static const struct {
        const char *what, *want;
    } cases[] = {
        {"use-distributed-optimizer", "--use-distributed-optimizer is ZeRO stage 1"},
        {"stage", "--zero-stage 4: expected 0, 1, 2 or 3"},
        {"prefetch", "--zero-prefetch gathers stage 3's layers ahead: it needs --zero-stage 3"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const scase c = {"refuse", 3, DT_F32, 1, 0.0f, 1, 0, 0, 0};
        dt_train_config cfg;
        base_cfg(&c, 3, &cfg);
        cfg.comm = NULL;
        if (k == 0) cfg.use_distributed_optimizer = 1;
        if (k == 1) cfg.zero_stage = 4;
        if (k == 2) cfg.zero_stage = 2, cfg.zero_prefetch = 1;
        ck_assert_int_eq(dt_train_config_validate(&cfg), DT_ERR_INVALID);
        const char *msg = dt_last_error();
        ck_assert_msg(strstr(msg, cases[k].want) && !strchr(msg, '\n'), "%s: %s", cases[k].what, msg);
    }
}
END_TEST

static Suite *stages_suite(void)
{
    Suite *s = suite_create("zero stages");
    TCase *tc = tcase_create("bytes");
    tcase_add_loop_test(tc, test_bytes_formula, 0, 4);
    suite_add_tcase(s, tc);
    tc = tcase_create("against data parallelism");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_stage_matches_dp, 0, N_SCASES);
    suite_add_tcase(s, tc);
    tc = tcase_create("checkpoints");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_resume_exact, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("refusals");
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--have-mpi") == 0) {
        puts(dt_comm_have_mpi() ? "yes" : "no");
        return EXIT_SUCCESS;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: check_zero_stages [--have-mpi]\n");
        return 2;
    }
    dt_status st = dt_comm_have_mpi() ? dt_comm_mpi_world(&g_world) : dt_comm_self_create(&g_world);
    if (st != DT_OK) {
        fprintf(stderr, "check_zero_stages: no communicator: %s (%s)\n", dt_last_error(), dt_last_error_site());
        return EXIT_FAILURE;
    }
    const char *expect = getenv("DT_COMM_EXPECT_SIZE");
    int ok = 1;
    if (expect && *expect && atoi(expect) != g_world->size) {
        fprintf(stderr, "check_zero_stages: rank %d: the world has %d ranks, DT_COMM_EXPECT_SIZE says %s\n",
                g_world->rank, g_world->size, expect);
        ok = 0;
    }
    st = dt_backend_cpu_create(1, &g_be);
    if (st != DT_OK) {
        fprintf(stderr, "check_zero_stages: no CPU backend: %s (%s)\n", dt_last_error(), dt_last_error_site());
        return EXIT_FAILURE;
    }
    ok = dt_test_run_ranks(stages_suite(), g_world, "check_zero_stages", !ok);
    dt_backend_destroy(g_be);
    dt_comm_free(g_world);
    st = dt_comm_finalize();
    if (st != DT_OK) {
        fprintf(stderr, "check_zero_stages: %s (%s)\n", dt_last_error(), dt_last_error_site());
        ok = 0;
    }
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
