/* check_zero.c: ZeRO-1, the sharded optimizer (lib/parallel/zero.c). Run by
 * tests/zero.sh under mpirun with 1..4 ranks; every rank runs the whole
 * suite on the MPI world (a "self" communicator when built without MPI).
 * `check_zero --have-mpi` prints yes or no and starts nothing.
 *
 * The comparison: k steps of dt__zero_step on n ranks, each rank feeding
 * its own gradient, against one dt_optim over the whole layout fed the sum
 * of the n gradients through the same update rule (dt__update_apply, no
 * reduce), computed on every rank. Weights, norm, clip factor, learning
 * rate, skip flag, first overflowing tensor and the loss scaler's state
 * must be bit-identical after every step (tolerance 0). Why exact: every
 * gradient is an integer-valued float times a power-of-two loss scale
 * (|g| <= 4 per rank, sums <= 16 * 2^11), so the ring's sums, the unscaling
 * and every squared norm (integers below 2^24) are exact in any order;
 * the sharded squared norm, passed between ranks as a float, then rounds
 * back to the same integer, and the norm is the sqrt of the same double.
 * SGD and AdamW are elementwise, so an element takes the same arithmetic
 * whichever piece of which shard it lies in.
 *
 * Layouts: "aligned" (dt_paramset_add, 16-element alignment: padding
 * inside segments), "packed" (tensors abutting, chosen so that segment
 * boundaries cut tensors, a 2-element tensor on 3 ranks and a 3-element
 * one on 4), and "tiny" (3 elements: on 4 ranks one shard is empty).
 * Tensors of odd sizes, with and without weight decay, counts not
 * divisible by n.
 *
 * Cases: AdamW and SGD (momentum, Nesterov, weight decay) with clipping
 * engaged (max norm below the norm: clip < 1 checked) and disengaged (none,
 * or a max norm far above it: clip == 1); dynamic loss scaling with an
 * inf injected into one rank's contribution at the last element (so the
 * shard that owns it alone sees the overflow) and later into two shards at
 * once: every rank must skip the same steps, leave its weights unchanged,
 * report the same first_bad, and skip the all-gather; a layout whose
 * tensors are not one run of the model's (a pipeline rank's chunks) names
 * the first overflowing tensor through tensor_map. Optimizer state
 * bytes: each rank's = its segment's share, their sum = the whole
 * optimizer's, each at most ceil(numel / n) elements' worth; measured on
 * the tiny GPT's layout and printed (docs/zero.md quotes it). LARS and
 * LAMB take each piece's trust ratio from its whole tensor's norms, summed
 * over the ranks (dt_optim_set_group_norms): the weights agree with the
 * whole optimizer's within 1e-6 + 1e-6 |w| (the pieces' sums of squares
 * add in double in another order, ~1e-16, which can move a float32 ratio
 * by an ulp; a piece's own norm instead would move them by percents).
 *
 * Against plain data parallelism (the whole gradient ring-allreduced, one
 * optimizer on every rank) with non-integer gradients: each shard's summed
 * gradient and, without clipping, the weights are bit-identical (the
 * reduce-scatter adds in the ring allreduce's order); with clipping engaged
 * the weights agree within 1e-6 + 1e-6 |w| (the norm crosses ranks as a
 * float: the clip factor may differ in its last bit), and the largest
 * difference is printed.
 *
 * Tests communicate first and assert afterwards (messages collected in
 * err), so a wrong value on one rank does not leave the others waiting;
 * main sums the failures of all ranks. */
#include <stdarg.h>
#include <string.h>

#include "testutil.h"
#include "zero.h"

static dt_comm *g_world;
static dt_backend *g_be;

/* ---- layouts ------------------------------------------------------------- */

typedef struct tspec {
    const char *name;
    int ndim;
    int64_t shape[2];
    int decay;
} tspec;

/* offsets from dt_paramset_add: padding between tensors */
static const tspec aligned_spec[] = {
    {"wte", 2, {7, 5}, 1}, {"b1", 1, {3}, 0}, {"w1", 2, {13, 3}, 1}, {"ln", 1, {2}, 0},
    {"w2", 2, {1, 17}, 1}, {"b2", 1, {1}, 0}, {"g", 1, {1}, 0},      {"w4", 2, {3, 7}, 1},
};
/* abutting, 127 elements: segment boundaries cut w1 (n = 4), b1 (3), w2
 * (2, 4), ln (2 elements, n = 3) and b3 (3 elements, n = 4) */
static const tspec packed_spec[] = {
    {"wte", 1, {6}, 1}, {"w1", 2, {2, 17}, 1}, {"b1", 1, {8}, 0}, {"w2", 2, {4, 9}, 1},
    {"ln", 1, {2}, 0},  {"w3", 2, {3, 3}, 1},  {"b3", 1, {3}, 0}, {"wout", 1, {29}, 1},
};
static const tspec tiny_spec[] = {{"w", 1, {2}, 1}, {"b", 1, {1}, 0}};

typedef enum { L_ALIGNED, L_PACKED, L_TINY } layout_kind;

static void make_layout(layout_kind k, dt_paramset *L)
{
    const tspec *s = k == L_ALIGNED ? aligned_spec : k == L_PACKED ? packed_spec : tiny_spec;
    int n = k == L_ALIGNED  ? (int)(sizeof aligned_spec / sizeof *s)
            : k == L_PACKED ? (int)(sizeof packed_spec / sizeof *s)
                            : (int)(sizeof tiny_spec / sizeof *s);
    dt_paramset_init(L);
    for (int i = 0; i < n; i++) ck_dt(dt_paramset_add(L, s[i].name, s[i].ndim, s[i].shape, s[i].decay));
    if (k == L_ALIGNED) return;
    size_t off = 0; /* close the gaps: tensors abut */
    for (int i = 0; i < L->count; i++) {
        L->info[i].offset = off;
        off += L->info[i].numel;
    }
    L->numel = off;
}

/* 1 where element i belongs to a tensor, 0 in the padding */
static unsigned char *tensor_mask(const dt_paramset *L)
{
    unsigned char *m = calloc(L->numel ? L->numel : 1, 1);
    ck_assert(m != NULL);
    for (int t = 0; t < L->count; t++) memset(m + L->info[t].offset, 1, L->info[t].numel);
    return m;
}

/* rank r's gradient at step s, element i: an integer in [-4, 4] */
static float gval(int r, int s, size_t i)
{
    return (float)((int)((i * 7u + (size_t)r * 13u + (size_t)s * 5u + (i * i) % 11u) % 9u) - 4);
}

/* ---- helpers ----------------------------------------------------------------- */

static float *falloc(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    ck_assert(p != NULL);
    return p;
}

/* sum of v over the world, in place (small host vectors) */
static void world_sum(float *v, size_t n) { ck_dt(dt_comm_allreduce(g_world, v, n, DT_ALLREDUCE_RING, NULL)); }

/* first message wins */
static void note(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char *err, size_t cap, const char *fmt, ...)
{
    if (err[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* index of the first element whose bits differ, or SIZE_MAX */
static size_t first_diff(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
    return SIZE_MAX;
}

/* the collectives' trace hook: steps per phase */
typedef struct hook_count {
    int rs, ag, other;
} hook_count;

static void count_hook(void *ctx, const char *phase, int step, int peer, size_t bytes, int64_t t0, int64_t t1)
{
    (void)step, (void)peer, (void)bytes, (void)t0, (void)t1;
    hook_count *h = ctx;
    if (strcmp(phase, "reduce-scatter") == 0) h->rs++;
    else if (strcmp(phase, "all-gather") == 0) h->ag++;
    else h->other++;
}

/* ---- ZeRO-1 against one optimizer on the summed gradient -------------------- */

typedef struct zcase {
    const char *name;
    layout_kind layout;
    dt_optim_kind kind;
    int nesterov;
    float clip_grad; /* <= 0: none */
    int expect_clip; /* 1: clip < 1 on every applied step; 0: clip == 1 */
    int scaling;     /* dynamic loss scaling */
    int overflow;    /* inject infs at steps 2 and 4 (with scaling) */
    int steps;
} zcase;

static const zcase zcases[] = {
    {"adamw aligned, no clip", L_ALIGNED, DT_OPTIM_ADAMW, 0, 0.0f, 0, 0, 0, 5},
    {"adamw packed, clip engaged", L_PACKED, DT_OPTIM_ADAMW, 0, 1.0f, 1, 0, 0, 5},
    {"adamw packed, clip disengaged", L_PACKED, DT_OPTIM_ADAMW, 0, 1e9f, 0, 0, 0, 5},
    {"sgd aligned, clip engaged", L_ALIGNED, DT_OPTIM_SGD, 0, 2.0f, 1, 0, 0, 5},
    {"sgd packed, no clip", L_PACKED, DT_OPTIM_SGD, 0, 0.0f, 0, 0, 0, 5},
    {"sgd nesterov packed, clip engaged", L_PACKED, DT_OPTIM_SGD, 1, 1.5f, 1, 0, 0, 5},
    {"adamw tiny, clip engaged", L_TINY, DT_OPTIM_ADAMW, 0, 0.5f, 1, 0, 0, 4},
    {"adamw packed, loss scaling + overflow, clip engaged", L_PACKED, DT_OPTIM_ADAMW, 0, 1.0f, 1, 1, 1, 6},
    {"adamw aligned, loss scaling + overflow", L_ALIGNED, DT_OPTIM_ADAMW, 0, 0.0f, 0, 1, 1, 6},
    {"sgd aligned, loss scaling + overflow, clip engaged", L_ALIGNED, DT_OPTIM_SGD, 0, 2.0f, 1, 1, 1, 6},
    {"sgd tiny, loss scaling + overflow", L_TINY, DT_OPTIM_SGD, 0, 0.0f, 0, 1, 1, 6},
};
#define N_ZCASES (int)(sizeof zcases / sizeof zcases[0])

static void optim_config(const zcase *c, dt_optim_config *o)
{
    dt_optim_config_default(o, c->kind);
    if (c->kind == DT_OPTIM_ADAMW) {
        o->weight_decay = 0.1f;
    } else {
        o->momentum = 0.9f;
        o->weight_decay = 0.01f;
        o->nesterov = c->nesterov;
    }
}

START_TEST(test_zero_matches_whole)
{
    const zcase *c = &zcases[_i];
    const int n = g_world->size, rank = g_world->rank;
    dt_paramset L;
    make_layout(c->layout, &L);
    const size_t N = L.numel;
    unsigned char *mask = tensor_mask(&L);
    dt_optim_config oc;
    optim_config(c, &oc);
    const dt_lr_schedule lr = {
        .max_lr = 0.05f, .min_lr = 0.005f, .warmup_iters = 2, .decay_iters = 8, .style = DT_LR_COSINE};
    dt_loss_scaler_config sc;
    dt_loss_scaler_config_default(&sc);
    sc.initial_scale = 1024.0f; /* powers of two: unscaling stays exact */
    sc.window = 2;              /* grows too, within the 6 steps */
    sc.hysteresis = 1;          /* every overflow backs off */
    dt_loss_scaler zs, rs;
    ck_dt(dt_loss_scaler_init(&zs, &sc));
    ck_dt(dt_loss_scaler_init(&rs, &sc));

    float *P = falloc(N), *R = falloc(N), *G = falloc(N), *GS = falloc(N), *before = falloc(N);
    for (size_t i = 0; i < N; i++) P[i] = R[i] = mask[i] ? (float)((int)((i * 37u) % 17u) - 8) / 16.0f : 0.0f;
    dt__zero *z = NULL;
    ck_dt(dt__zero_create(g_world, g_be, &L, &oc, &z));
    dt_optim ref;
    ck_dt(dt_optim_init(&ref, &oc, g_be, &L));
    /* where the infs go: the last element (last tensor, last rank's segment)
     * and element 0 (first tensor, rank 0's segment) */
    const size_t bad_hi = N - 1, bad_lo = 0;

    char err[512] = "";
    int applied_clipped = 0, applied = 0, skips = 0;
    hook_count hc = {0, 0, 0};
    const dt_collective_opts co = {.chunk_bytes = 16, .hook = count_hook, .hook_ctx = &hc};
    for (int s = 0; s < c->steps; s++) {
        const float S = c->scaling ? dt_loss_scaler_scale(&zs) : 1.0f;
        for (size_t i = 0; i < N; i++) {
            G[i] = mask[i] ? gval(rank, s, i) * S : 0.0f;
            float sum = 0.0f;
            for (int k = 0; k < n; k++) sum += mask[i] ? gval(k, s, i) * S : 0.0f;
            GS[i] = sum;
        }
        if (c->overflow && s == 2) { /* one rank's contribution, inside one shard only (the last element's) */
            if (rank == n - 1) G[bad_hi] = INFINITY;
            GS[bad_hi] = INFINITY;
        }
        if (c->overflow && s == 4) { /* two shards (one, on one rank) */
            if (rank == 0) G[bad_lo] = INFINITY;
            if (rank == n - 1) G[bad_hi] = INFINITY;
            GS[bad_lo] = GS[bad_hi] = INFINITY;
        }
        memcpy(before, P, N * sizeof *P);
        const hook_count h0 = hc;
        dt__zero_step_args za = {.scaler = c->scaling ? &zs : NULL,
                                 .loss_scale = S,
                                 .lr = &lr,
                                 .position = s,
                                 .clip_grad = c->clip_grad,
                                 .coll = &co};
        dt__update_result zr, rr;
        ck_dt(dt__zero_step(z, P, G, &za, &zr));
        dt__update_args ra = {.be = g_be,
                              .layout = &L,
                              .params = R,
                              .grads = GS,
                              .opt = &ref,
                              .scaler = c->scaling ? &rs : NULL,
                              .loss_scale = S,
                              .lr = &lr,
                              .position = s,
                              .clip_grad = c->clip_grad,
                              .given_norm = -1.0};
        ck_dt(dt__update_apply(&ra, &rr));
        /* the same skip decision on every rank */
        float skipv = (float)zr.skipped;
        world_sum(&skipv, 1);
        if (skipv != (float)(zr.skipped * n))
            note(err, sizeof err, "step %d: %g of %d ranks skipped (this one: %d)", s, (double)skipv, n, zr.skipped);

        size_t d = first_diff(P, R, N);
        if (d != SIZE_MAX)
            note(err, sizeof err, "step %d: weight %zu is %.9g, the whole optimizer's %.9g", s, d, (double)P[d],
                 (double)R[d]);
        if (zr.skipped != rr.skipped || zr.first_bad != rr.first_bad)
            note(err, sizeof err, "step %d: skipped %d first_bad %d, the whole optimizer's %d, %d", s, zr.skipped,
                 zr.first_bad, rr.skipped, rr.first_bad);
        if (zr.norm != rr.norm || zr.clip != rr.clip || zr.lr != rr.lr)
            note(err, sizeof err, "step %d: norm %.17g clip %.9g lr %.9g, the whole optimizer's %.17g %.9g %.9g", s,
                 zr.norm, (double)zr.clip, (double)zr.lr, rr.norm, (double)rr.clip, (double)rr.lr);
        if (zs.scale != rs.scale || zs.skipped != rs.skipped || zr.ev.backed_off != rr.ev.backed_off ||
            zr.ev.grew != rr.ev.grew)
            note(err, sizeof err, "step %d: loss scale %g (skipped %lld), the whole optimizer's %g (%lld)", s,
                 (double)zs.scale, (long long)zs.skipped, (double)rs.scale, (long long)rs.skipped);
        const int expect_skip = c->overflow && (s == 2 || s == 4);
        if (zr.skipped != expect_skip)
            note(err, sizeof err, "step %d: skipped %d, expected %d", s, zr.skipped, expect_skip);
        if (expect_skip) {
            skips++;
            if (zr.first_bad != L.count - 1)
                note(err, sizeof err, "step %d: first_bad %d, expected the last tensor %d", s, zr.first_bad,
                     L.count - 1);
            if (first_diff(P, before, N) != SIZE_MAX) note(err, sizeof err, "step %d: skipped but weights changed", s);
            if (hc.ag != h0.ag) note(err, sizeof err, "step %d: skipped but all-gathered", s);
        } else {
            applied++;
            applied_clipped += zr.clip < 1.0f;
            if (n > 1 && hc.ag == h0.ag) note(err, sizeof err, "step %d: applied but no all-gather step traced", s);
        }
        if (n > 1 && hc.rs == h0.rs) note(err, sizeof err, "step %d: no reduce-scatter step traced", s);
    }
    if (c->expect_clip && applied_clipped != applied)
        note(err, sizeof err, "clipping engaged on %d of %d applied steps, expected all", applied_clipped, applied);
    if (!c->expect_clip && applied_clipped != 0)
        note(err, sizeof err, "clipping engaged on %d of %d applied steps, expected none", applied_clipped, applied);
    if (c->overflow && (skips != 2 || zs.skipped != 2 || zs.backoffs != 2 || zs.growths < 1))
        note(err, sizeof err, "scaler: %d skips, %lld skipped, %lld backoffs, %lld growths (expected 2, 2, 2, >= 1)",
             skips, (long long)zs.skipped, (long long)zs.backoffs, (long long)zs.growths);
    if (hc.other) note(err, sizeof err, "%d collective steps outside reduce-scatter and all-gather traced", hc.other);
    dt__zero_free(z);
    dt_optim_free(&ref);
    free(P), free(R), free(G), free(GS), free(before), free(mask);
    dt_paramset_free(&L);
    ck_assert_msg(err[0] == 0, "%s, rank %d of %d: %s", c->name, rank, n, err);
}
END_TEST

/* A layout whose tensors are not one run of the model's (a pipeline rank's
 * chunks: tensors 0-3 are model tensors 2-5, tensors 4-7 model tensors
 * 34-37): with tensor_map the first overflowing tensor is reported by its
 * model index, the highest any shard found; first_tensor (the first
 * chunk's, what the pipeline used to pass) is not read. Infs on one rank
 * in one tensor, or on two ranks in two tensors (segments cut the packed
 * layout, so several shards see them). */
START_TEST(test_zero_first_bad_map)
{
    const int n = g_world->size, rank = g_world->rank;
    dt_paramset L;
    make_layout(L_PACKED, &L);
    const size_t N = L.numel;
    int map[8];
    ck_assert_int_eq(L.count, 8);
    for (int i = 0; i < 8; i++) map[i] = i < 4 ? 2 + i : 30 + i;
    dt_optim_config oc;
    dt_optim_config_default(&oc, DT_OPTIM_ADAMW);
    const dt_lr_schedule lr = {.max_lr = 0.05f, .min_lr = 0.005f, .warmup_iters = 1, .decay_iters = 4};
    dt_loss_scaler_config sc;
    dt_loss_scaler_config_default(&sc);
    sc.initial_scale = 1024.0f;
    dt_loss_scaler zs;
    ck_dt(dt_loss_scaler_init(&zs, &sc));
    float *P = falloc(N), *G = falloc(N);
    dt__zero *z = NULL;
    ck_dt(dt__zero_create(g_world, g_be, &L, &oc, &z));
    /* per step: the bad tensors (-1 none) and the rank that sends each inf */
    const int bad[3][2] = {{2, -1}, {5, -1}, {1, 6}}, who[3][2] = {{0, 0}, {n - 1, 0}, {0, n - 1}};
    const int want[3] = {4, 35, 36};
    char err[512] = "";
    for (int s = 0; s < 3; s++) {
        for (size_t i = 0; i < N; i++) G[i] = gval(rank, s, i);
        for (int k = 0; k < 2; k++) {
            if (bad[s][k] < 0 || who[s][k] != rank) continue;
            const dt_param_info *t = &L.info[bad[s][k]];
            G[t->offset + t->numel - 1] = INFINITY; /* its last element: the highest segment that holds it */
        }
        dt__zero_step_args za = {.scaler = &zs,
                                 .loss_scale = dt_loss_scaler_scale(&zs),
                                 .lr = &lr,
                                 .position = s,
                                 .first_tensor = map[0],
                                 .tensor_map = map};
        dt__update_result r;
        ck_dt(dt__zero_step(z, P, G, &za, &r));
        if (!r.skipped || r.first_bad != want[s])
            note(err, sizeof err, "step %d: skipped %d, first_bad %d (expected 1, model tensor %d)", s, r.skipped,
                 r.first_bad, want[s]);
    }
    dt__zero_free(z);
    free(P), free(G);
    dt_paramset_free(&L);
    ck_assert_msg(err[0] == 0, "rank %d of %d: %s", rank, n, err);
}
END_TEST

/* ---- ZeRO-1 against plain data parallelism (ring allreduce) ------------------ */

/* rank r's gradient at step s, element i: not integer-valued, so sums round */
static float rval(int r, int s, size_t i)
{
    return (float)((i * 2654435761u + (size_t)r * 97u + (size_t)s * 131u) % 10007u) / 10007.0f - 0.5f;
}

typedef struct dpcase {
    const char *name;
    layout_kind layout;
    dt_optim_kind kind;
    float clip_grad;
    int exact; /* 1: bit-identical; 0: within 1e-6 + 1e-6 |w| */
} dpcase;

static const dpcase dpcases[] = {
    {"adamw aligned, no clip", L_ALIGNED, DT_OPTIM_ADAMW, 0.0f, 1},
    {"sgd packed, no clip", L_PACKED, DT_OPTIM_SGD, 0.0f, 1},
    {"adamw packed, clip engaged", L_PACKED, DT_OPTIM_ADAMW, 0.5f, 0},
    {"sgd aligned, clip engaged", L_ALIGNED, DT_OPTIM_SGD, 0.5f, 0},
};
#define N_DPCASES (int)(sizeof dpcases / sizeof dpcases[0])

/* The trainer's plain data parallelism: the whole gradient ring-allreduced,
 * then one optimizer over the whole layout on every rank. The reduce-scatter
 * adds each element in the ring allreduce's order, so without clipping the
 * weights are bit-identical; with clipping the norm is summed over shards
 * in float (the parameter server's rule), so the clip factor may differ in
 * its last bit: relative 1e-7 on the step, far inside 1e-6. */
START_TEST(test_zero_matches_ring_dp)
{
    const dpcase *c = &dpcases[_i];
    const int n = g_world->size, rank = g_world->rank, steps = 4;
    dt_paramset L;
    make_layout(c->layout, &L);
    const size_t N = L.numel;
    unsigned char *mask = tensor_mask(&L);
    const zcase zc = {.kind = c->kind};
    dt_optim_config oc;
    optim_config(&zc, &oc);
    const dt_lr_schedule lr = {
        .max_lr = 0.05f, .min_lr = 0.005f, .warmup_iters = 1, .decay_iters = 6, .style = DT_LR_LINEAR};
    float *P = falloc(N), *R = falloc(N), *G = falloc(N), *GD = falloc(N);
    for (size_t i = 0; i < N; i++) P[i] = R[i] = mask[i] ? rval(99, 0, i) : 0.0f;
    dt__zero *z = NULL;
    ck_dt(dt__zero_create(g_world, g_be, &L, &oc, &z));
    dt_optim dp;
    ck_dt(dt_optim_init(&dp, &oc, g_be, &L));
    char err[512] = "";
    double worst = 0.0;
    int clipped = 0;
    for (int s = 0; s < steps; s++) {
        for (size_t i = 0; i < N; i++) G[i] = GD[i] = mask[i] ? rval(rank, s, i) : 0.0f;
        ck_dt(dt_comm_allreduce(g_world, GD, N, DT_ALLREDUCE_RING, NULL));
        dt__zero_step_args za = {.lr = &lr, .position = s, .clip_grad = c->clip_grad};
        dt__update_result zr, rr;
        ck_dt(dt__zero_step(z, P, G, &za, &zr));
        dt__update_args ra = {.be = g_be,
                              .layout = &L,
                              .params = R,
                              .grads = GD,
                              .opt = &dp,
                              .lr = &lr,
                              .position = s,
                              .clip_grad = c->clip_grad,
                              .given_norm = -1.0};
        ck_dt(dt__update_apply(&ra, &rr));
        clipped += zr.clip < 1.0f;
        /* the segment's summed gradient: the ring allreduce's, bit for bit */
        size_t lo, len;
        dt__zero_shard(z, &lo, &len);
        size_t d = first_diff(G + lo, GD + lo, len);
        if (d != SIZE_MAX)
            note(err, sizeof err, "step %d: summed gradient %zu is %.9g, the ring allreduce's %.9g", s, lo + d,
                 (double)G[lo + d], (double)GD[lo + d]);
        for (size_t i = 0; i < N; i++) {
            const double e = fabs((double)P[i] - (double)R[i]);
            worst = e > worst ? e : worst;
            if (c->exact ? memcmp(&P[i], &R[i], sizeof(float)) != 0 : !dt_test_close(P[i], R[i], 1e-6, 1e-6))
                note(err, sizeof err, "step %d: weight %zu is %.9g, data parallelism's %.9g", s, i, (double)P[i],
                     (double)R[i]);
        }
        if (!dt_test_close(zr.norm, rr.norm, 0.0, 1e-6))
            note(err, sizeof err, "step %d: norm %.9g, data parallelism's %.9g", s, zr.norm, rr.norm);
    }
    if ((c->clip_grad > 0.0f) != (clipped == steps))
        note(err, sizeof err, "clipping engaged on %d of %d steps (max norm %g)", clipped, steps, (double)c->clip_grad);
    if (rank == 0 && !c->exact)
        printf("check_zero: against ring data parallelism, %s, %d rank(s): largest weight difference %.3g\n", c->name,
               n, worst);
    dt__zero_free(z);
    dt_optim_free(&dp);
    free(P), free(R), free(G), free(GD), free(mask);
    dt_paramset_free(&L);
    ck_assert_msg(err[0] == 0, "%s, rank %d of %d: %s", c->name, rank, n, err);
}
END_TEST

/* ---- optimizer state: each rank's share ----------------------------------- */

static void check_state(const dt_paramset *L, dt_optim_kind kind, char *err, size_t cap)
{
    const int n = g_world->size, rank = g_world->rank;
    dt_optim_config oc;
    dt_optim_config_default(&oc, kind);
    dt__zero *z = NULL;
    ck_dt(dt__zero_create(g_world, g_be, L, &oc, &z));
    dt_optim whole;
    ck_dt(dt_optim_init(&whole, &oc, g_be, L));
    const size_t moments = kind == DT_OPTIM_ADAMW ? 2 : 1, bytes = dt__zero_state_bytes(z);
    size_t lo, len, elo, elen;
    dt__zero_shard(z, &lo, &len);
    dt_comm_segment(L->numel, n, rank, &elo, &elen);
    if (lo != elo || len != elen)
        note(err, cap, "shard [%zu, +%zu), dt_comm_segment's [%zu, +%zu)", lo, len, elo, elen);
    if (bytes != len * sizeof(float) * moments)
        note(err, cap, "%s: %zu state bytes for a %zu-element segment", dt_optim_kind_name(kind), bytes, len);
    const size_t ceil_share = (L->numel + (size_t)n - 1) / (size_t)n * sizeof(float) * moments;
    if (bytes > ceil_share) note(err, cap, "%zu state bytes, more than the %zu of 1/%d", bytes, ceil_share, n);
    /* the shard's pieces: inside the segment, in order; over the ranks they
     * cover each tensor exactly once */
    const dt_paramset *S = dt__zero_layout(z);
    float covered = 0.0f, tensors = 0.0f;
    size_t end = 0;
    for (int i = 0; i < S->count; i++) {
        if (S->info[i].offset < end || S->info[i].offset + S->info[i].numel > len || S->info[i].ndim != 1)
            note(err, cap, "piece %d (%s) at [%zu, +%zu) out of order or outside the %zu-element shard", i,
                 S->info[i].name, S->info[i].offset, S->info[i].numel, len);
        end = S->info[i].offset + S->info[i].numel;
        covered += (float)S->info[i].numel;
    }
    for (int t = 0; t < L->count; t++) tensors += (float)L->info[t].numel;
    float v[2] = {(float)bytes, covered};
    world_sum(v, 2);
    if (v[0] != (float)dt_optim_state_bytes(&whole))
        note(err, cap, "%s: state bytes over the ranks %g, the whole optimizer's %zu", dt_optim_kind_name(kind),
             (double)v[0], dt_optim_state_bytes(&whole));
    if (v[1] != tensors)
        note(err, cap, "pieces cover %g elements over the ranks, the tensors %g", (double)v[1], (double)tensors);
    dt__zero_free(z);
    dt_optim_free(&whole);
}

START_TEST(test_state_share)
{
    char err[512] = "";
    for (int k = 0; k < 3; k++) {
        dt_paramset L;
        make_layout((layout_kind)k, &L);
        check_state(&L, DT_OPTIM_ADAMW, err, sizeof err);
        check_state(&L, DT_OPTIM_SGD, err, sizeof err);
        dt_paramset_free(&L);
    }
    ck_assert_msg(err[0] == 0, "rank %d of %d: %s", g_world->rank, g_world->size, err);
}
END_TEST

/* The tiny GPT's layout: each rank's AdamW state, printed by rank 0. */
START_TEST(test_state_gpt_tiny)
{
    const int n = g_world->size, rank = g_world->rank;
    dt_gpt_config gc;
    ck_dt(dt_gpt_config_preset("tiny", &gc));
    dt_gpt *m = NULL;
    ck_dt(dt_gpt_create(&gc, g_be, &m));
    const dt_paramset *L = dt_gpt_layout(m);
    dt_optim_config oc;
    dt_optim_config_default(&oc, DT_OPTIM_ADAMW);
    dt__zero *z = NULL;
    ck_dt(dt__zero_create(g_world, g_be, L, &oc, &z));
    dt_optim whole;
    ck_dt(dt_optim_init(&whole, &oc, g_be, L));
    float *v = falloc((size_t)n);
    v[rank] = (float)dt__zero_state_bytes(z); /* < 2^24: exact */
    world_sum(v, (size_t)n);
    const size_t all = dt_optim_state_bytes(&whole);
    double total = 0.0, most = 0.0;
    for (int k = 0; k < n; k++) {
        total += v[k];
        most = v[k] > most ? v[k] : most;
    }
    if (rank == 0) {
        printf("check_zero: tiny GPT (%zu parameters, %zu-element buffer), adamw state: whole %zu bytes; on %d "
               "rank(s):",
               dt_gpt_config_num_params(&gc), L->numel, all, n);
        for (int k = 0; k < n; k++) printf(" %.0f", (double)v[k]);
        printf(" bytes (largest %.2fx less than whole)\n", (double)all / most);
    }
    const size_t ceil_share = (L->numel + (size_t)n - 1) / (size_t)n * 2 * sizeof(float);
    free(v);
    dt__zero_free(z);
    dt_optim_free(&whole);
    dt_gpt_free(m);
    ck_assert_msg(total == (double)all, "state over the ranks %.0f bytes, the whole optimizer's %zu", total, all);
    ck_assert_msg(most <= (double)ceil_share, "largest share %.0f bytes exceeds ceil(numel/n) elements' %zu", most,
                  ceil_share);
}
END_TEST

/* ---- refusals and argument errors -------------------------------------------- */

START_TEST(test_layerwise_matches_whole)
{
    const int n = g_world->size, rank = g_world->rank;
    dt_paramset L;
    make_layout(L_PACKED, &L);
    const size_t N = L.numel;
    unsigned char *mask = tensor_mask(&L);
    const dt_lr_schedule lr = {.max_lr = 0.05f, .min_lr = 0.05f, .warmup_iters = 0, .decay_iters = 4};
    const dt_optim_kind kinds[] = {DT_OPTIM_LARS, DT_OPTIM_LAMB};
    char err[512] = "";
    for (int k = 0; k < 2; k++) {
        dt_optim_config oc;
        dt_optim_config_default(&oc, kinds[k]);
        oc.weight_decay = 0.01f;
        if (kinds[k] == DT_OPTIM_LARS) oc.lars_eta = 0.02f;
        float *P = falloc(N), *R = falloc(N), *G = falloc(N), *GS = falloc(N);
        for (size_t i = 0; i < N; i++) P[i] = R[i] = mask[i] ? (float)((int)((i * 37u) % 17u) - 8) / 16.0f : 0.0f;
        dt__zero *z = NULL;
        ck_dt(dt__zero_create(g_world, g_be, &L, &oc, &z));
        dt_optim ref;
        ck_dt(dt_optim_init(&ref, &oc, g_be, &L));
        for (int s = 0; s < 3; s++) {
            for (size_t i = 0; i < N; i++) {
                G[i] = mask[i] ? gval(rank, s, i) : 0.0f;
                float sum = 0.0f;
                for (int r = 0; r < n; r++) sum += mask[i] ? gval(r, s, i) : 0.0f;
                GS[i] = sum;
            }
            dt__zero_step_args za = {.loss_scale = 1.0f, .lr = &lr, .position = s};
            dt__update_result zr, rr;
            ck_dt(dt__zero_step(z, P, G, &za, &zr));
            dt__update_args ra = {.be = g_be,
                                  .layout = &L,
                                  .params = R,
                                  .grads = GS,
                                  .opt = &ref,
                                  .loss_scale = 1.0f,
                                  .lr = &lr,
                                  .position = s,
                                  .given_norm = -1.0};
            ck_dt(dt__update_apply(&ra, &rr));
        }
        for (size_t i = 0; i < N && !err[0]; i++)
            if (fabsf(P[i] - R[i]) > 1e-6f + 1e-6f * fabsf(R[i]))
                note(err, sizeof err, "%s: weight %zu is %.9g, the whole optimizer's %.9g",
                     dt_optim_kind_name(kinds[k]), i, (double)P[i], (double)R[i]);
        dt__zero_free(z);
        dt_optim_free(&ref);
        free(P), free(R), free(G), free(GS);
    }
    free(mask);
    dt_paramset_free(&L);
    ck_assert_msg(err[0] == 0, "rank %d of %d: %s", rank, n, err);
}
END_TEST

START_TEST(test_arg_errors)
{
    dt_paramset L;
    make_layout(L_PACKED, &L);
    dt_optim_config oc;
    dt_optim_config_default(&oc, DT_OPTIM_ADAMW);
    dt__zero *z = NULL;
    ck_assert_int_eq(dt__zero_create(NULL, g_be, &L, &oc, &z), DT_ERR_INVALID);
    ck_assert_ptr_null(z);
    oc.beta1 = 1.5f; /* the optimizer's own check, its own message */
    ck_assert_int_eq(dt__zero_create(g_world, g_be, &L, &oc, &z), DT_ERR_INVALID);
    ck_assert_ptr_null(z);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--adam-beta1"));
    dt_paramset_free(&L);
}
END_TEST

static Suite *zero_suite(void)
{
    Suite *s = suite_create("zero");
    TCase *tc = tcase_create("against one optimizer");
    tcase_add_loop_test(tc, test_zero_matches_whole, 0, N_ZCASES);
    tcase_add_test(tc, test_zero_first_bad_map);
    suite_add_tcase(s, tc);
    tc = tcase_create("against data parallelism");
    tcase_add_loop_test(tc, test_zero_matches_ring_dp, 0, N_DPCASES);
    suite_add_tcase(s, tc);
    tc = tcase_create("state");
    tcase_add_test(tc, test_state_share);
    tcase_add_test(tc, test_state_gpt_tiny);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_layerwise_matches_whole);
    tcase_add_test(tc, test_arg_errors);
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
        fprintf(stderr, "usage: check_zero [--have-mpi]\n");
        return 2;
    }
    dt_status st = dt_comm_have_mpi() ? dt_comm_mpi_world(&g_world) : dt_comm_self_create(&g_world);
    if (st != DT_OK) {
        fprintf(stderr, "check_zero: no communicator: %s (%s)\n", dt_last_error(), dt_last_error_site());
        return EXIT_FAILURE;
    }
    const char *expect = getenv("DT_COMM_EXPECT_SIZE");
    int ok = 1;
    if (expect && *expect && atoi(expect) != g_world->size) {
        fprintf(stderr, "check_zero: rank %d: the world has %d ranks, DT_COMM_EXPECT_SIZE says %s\n", g_world->rank,
                g_world->size, expect);
        ok = 0;
    }
    st = dt_backend_cpu_create(1, &g_be); /* one thread per rank: the ranks share the cores */
    if (st != DT_OK) {
        fprintf(stderr, "check_zero: no CPU backend: %s (%s)\n", dt_last_error(), dt_last_error_site());
        return EXIT_FAILURE;
    }
    ok = dt_test_run_ranks(zero_suite(), g_world, "check_zero", !ok);
    dt_backend_destroy(g_be);
    dt_comm_free(g_world);
    st = dt_comm_finalize();
    if (st != DT_OK) {
        fprintf(stderr, "check_zero: %s (%s)\n", dt_last_error(), dt_last_error_site());
        ok = 0;
    }
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
