/* schedule.c: the pipeline schedule generator (dt_schedule.h). Pure data:
 * no I/O, no communication, no clocks.
 *
 * p devices (pipeline stages), v model chunks per device (p*v virtual
 * stages; v = 1 but for interleaved-1f1b and zb-v), m micro-batches per
 * step, `steps` steps, N = steps*m micro-batches in all (mb = t*m + i). A
 * schedule is built per device in three passes:
 *
 *   1. the compute order: a list of F(c, mb), B(c, mb) (or B and W apart)
 *      and OPT items (gpipe: per step F.. B.. OPT; 1f1b: per step
 *      w = min(p-1-s, m) warm-up forwards, m-w steady (F, B) pairs, w
 *      cool-down backwards, OPT; pipedream kinds: the 1f1b pattern once
 *      over all N micro-batches with w = min(p-1-s, N) and an OPT after
 *      every B; interleaved-1f1b, zb-h1 and zb-v: schedule_order.c);
 *   2. the weight versions: gpipe/1f1b and the issue-22 kinds use t in step
 *      t; pipedream F uses the stage's current version (OPTs before it) and
 *      B its F's; vsync gives every stage stage 0's F version of the
 *      micro-batch. Which versions must be stashed (used while a newer one
 *      is current) and where each is last used follow from that;
 *   3. the expansion into instructions a runtime with blocking receives and
 *      non-blocking sends runs in order; q is the item's virtual stage
 *      (vstage[r*v + c]) and Q = p*v:
 *        F(c, mb):  [RECV_ACT (q>0)]  FORWARD   [SEND_ACT (q<Q-1)]
 *        B(c, mb):  [RECV_GRAD (q<Q-1)] BACKWARD or BACKWARD_B [SEND_GRAD (q>0)]
 *        W(c, mb):  BACKWARD_W
 *        OPT:       OPTIM_STEP [STASH v if v is stashed]
 *      with STASH 0 first when version 0 is stashed and DROP v right after
 *      the group of v's last use (so before the OPT that follows a B: a
 *      stage never holds more stashed copies than it needs). A send or
 *      receive names the device of virtual stage q-1 or q+1 as its peer
 *      (itself for a hand-over between two chunks of one device).
 *
 * Dependencies (filled once every device is expanded): RECV_ACT(q, mb) on
 * SEND_ACT(q-1, mb), RECV_GRAD(q, mb) on SEND_GRAD(q+1, mb), BACKWARD and
 * BACKWARD_B (q, mb) on FORWARD(q, mb), BACKWARD_W(q, mb) on
 * BACKWARD_B(q, mb). Sends and receives of a link (q -> q+1, or q+1 -> q)
 * are in ascending mb order on both sides: every order forwards and
 * backwards each chunk's micro-batches in ascending order.
 *
 * Why vsync versions exist on stage s: at F(mb) stage s has applied
 * max(0, mb - w_s) updates and stage 0 had applied max(0, mb - w_0) at its
 * F(mb); w_s <= w_0, so the version stage s needs has already been made at
 * that point of its list (the generator asserts it). */
#include <assert.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "dt_schedule.h"
#include "schedule_internal.h"

static const char *const dt__sched_kind_names[] = {"gpipe", "1f1b", "pipedream", "pipedream-vsync", "interleaved-1f1b",
                                                   "zb-h1", "zb-v"};
#define DT__SCHED_NKINDS ((int)(sizeof dt__sched_kind_names / sizeof dt__sched_kind_names[0]))
#define DT__SCHED_KIND_LIST "gpipe, 1f1b, pipedream, pipedream-vsync, interleaved-1f1b, zb-h1 or zb-v"

static const char *const dt__sched_op_names[] = {"recv_act", "forward",    "send_act",   "recv_grad",
                                                 "backward", "send_grad",  "optim_step", "stash",
                                                 "drop",     "backward_b", "backward_w"};
#define DT__SCHED_NOPS ((int)(sizeof dt__sched_op_names / sizeof dt__sched_op_names[0]))

dt_status dt_sched_kind_parse(const char *s, dt_sched_kind *out)
{
    for (int k = 0; s && k < DT__SCHED_NKINDS; k++)
        if (strcmp(s, dt__sched_kind_names[k]) == 0) {
            *out = (dt_sched_kind)k;
            return DT_OK;
        }
    return DT_FAIL(DT_ERR_INVALID, "--pipeline-schedule '%s': unknown schedule (expected " DT__SCHED_KIND_LIST ")",
                   s ? s : "(null)");
}

const char *dt_sched_kind_name(dt_sched_kind k)
{
    return (int)k >= 0 && (int)k < DT__SCHED_NKINDS ? dt__sched_kind_names[k] : "?";
}

const char *dt_sched_op_name(dt_sched_op op)
{
    return (int)op >= 0 && (int)op < DT__SCHED_NOPS ? dt__sched_op_names[op] : "?";
}

int64_t dt_sched_message_id(const dt_schedule *s, int device, const dt_sched_instr *in, int pipeline, int pipelines)
{
    if (!s || !in || device < 0 || device >= s->p || in->chunk < 0 || in->chunk >= s->v || in->mb < 0 ||
        pipelines < 1 || pipeline < 0 || pipeline >= pipelines || in->peer == device)
        return -1;
    const int q = s->vstage[device * s->v + in->chunk];
    int dst, dir;
    switch (in->op) {
    case DT_SCHED_SEND_ACT: dst = q + 1, dir = 0; break;
    case DT_SCHED_RECV_ACT: dst = q, dir = 0; break;
    case DT_SCHED_SEND_GRAD: dst = q - 1, dir = 1; break;
    case DT_SCHED_RECV_GRAD: dst = q, dir = 1; break;
    default: return -1;
    }
    /* in doubles: the bound is checked before any integer product could overflow */
    const double Q = (double)s->p * s->v, id = (((double)in->mb * Q + dst) * 2 + dir) * pipelines + pipeline;
    if (dst < 0 || dst >= Q || !(id <= 9007199254740991.0)) return -1;
    return (((int64_t)in->mb * (int64_t)Q + dst) * 2 + dir) * pipelines + pipeline;
}

int dt_sched_default_chunks(dt_sched_kind k) { return k == DT_SCHED_INTERLEAVED_1F1B || k == DT_SCHED_ZB_V ? 2 : 1; }

int dt_sched_splits_backward(dt_sched_kind k) { return k == DT_SCHED_ZB_H1 || k == DT_SCHED_ZB_V; }

static int dt__sched_is_async(dt_sched_kind k) { return k == DT_SCHED_PIPEDREAM || k == DT_SCHED_PIPEDREAM_VSYNC; }

dt_status dt_sched_chunks_from_flags(dt_sched_kind k, int p, int num_layers, int vflag, int layers_per_vstage,
                                     int *v_out)
{
    if (vflag < 0)
        return DT_FAIL(DT_ERR_INVALID, "--virtual-pipeline-model-parallel-size %d: expected at least 1", vflag);
    if (layers_per_vstage < 0)
        return DT_FAIL(DT_ERR_INVALID, "--num-layers-per-virtual-pipeline-stage %d: expected at least 1",
                       layers_per_vstage);
    if (p < 1)
        return DT_FAIL(DT_ERR_INVALID, "--pipeline-model-parallel-size %d: expected at least 1 pipeline stage", p);
    int v = vflag;
    if (layers_per_vstage > 0) {
        /* Megatron-LM: chunks = (layers / p) / layers per virtual stage */
        if (num_layers % ((long long)p * layers_per_vstage) != 0)
            return DT_FAIL(DT_ERR_INVALID,
                           "--num-layers-per-virtual-pipeline-stage %d: --num-layers %d is not a multiple of "
                           "--pipeline-model-parallel-size x it = %lld",
                           layers_per_vstage, num_layers, (long long)p * layers_per_vstage);
        const int from_l = num_layers / (p * layers_per_vstage);
        if (vflag > 0 && vflag != from_l)
            return DT_FAIL(DT_ERR_INVALID,
                           "--virtual-pipeline-model-parallel-size %d and --num-layers-per-virtual-pipeline-stage "
                           "%d disagree: %d blocks over %d stages of %d blocks a chunk make %d chunks per stage",
                           vflag, layers_per_vstage, num_layers, p, layers_per_vstage, from_l);
        v = from_l;
    }
    const char *flag =
        layers_per_vstage > 0 ? "--num-layers-per-virtual-pipeline-stage" : "--virtual-pipeline-model-parallel-size";
    const int given = layers_per_vstage > 0 ? layers_per_vstage : vflag;
    if (v == 0) v = dt_sched_default_chunks(k);
    if (k == DT_SCHED_INTERLEAVED_1F1B && v < 2)
        return DT_FAIL(DT_ERR_INVALID, "%s %d: interleaved-1f1b needs at least 2 model chunks per stage (got %d)", flag,
                       given, v);
    if (k == DT_SCHED_ZB_V && v != 2)
        return DT_FAIL(DT_ERR_INVALID, "%s %d: zb-v places exactly 2 model chunks per stage, in a V (got %d)", flag,
                       given, v);
    if (k != DT_SCHED_INTERLEAVED_1F1B && k != DT_SCHED_ZB_V && v != 1)
        return DT_FAIL(DT_ERR_INVALID,
                       "%s %d: --pipeline-schedule %s has one model chunk per stage (interleaved-1f1b and zb-v have "
                       "more)",
                       flag, given, dt_sched_kind_name(k));
    if (v > 1 && num_layers % ((long long)p * v) != 0)
        return DT_FAIL(DT_ERR_INVALID,
                       "--num-layers %d: --pipeline-schedule %s with %d stages x %d chunks needs a multiple of %lld "
                       "(every virtual stage holds the same number of blocks)",
                       num_layers, dt_sched_kind_name(k), p, v, (long long)p * v);
    *v_out = v;
    return DT_OK;
}

/* The exact idle shares with F = B = W per virtual stage and free messages,
 * from the unit-cost interpreter of tests/check_schedule_zb.c, which checks
 * them for every p <= 8, m <= 24:
 *   zb-h1 (units of F): a device idles I = max(p-1, 2p-m-1) of a step of
 *   3m + I (the first micro-batch's F and B cross all p stages before the
 *   last W: for m >= p, I = p-1, the fill alone);
 *   zb-v (units of a chunk's F = F/2): I = max(p-1, 4p-2m-2) of 6m + I
 *   (for m >= (3p-1)/2, I = p-1: device p-1 starts after p-1 chunk
 *   forwards, the least any placement allows, and nothing else idles). */
static double dt__sched_idle_share(int idle, int busy) { return (double)idle / (double)(busy + idle); }
#define DT__SCHED_ZBH1_BUBBLE(p, m) dt__sched_idle_share(DT_MAX((p)-1, 2 * (p) - (m)-1), 3 * (m))
#define DT__SCHED_ZBV_BUBBLE(p, m) dt__sched_idle_share(DT_MAX((p)-1, 4 * (p)-2 * (m)-2), 6 * (m))

double dt_schedule_bubble_formula(int p, int m)
{
    if (p < 1 || m < 1) return 0.0;
    return (double)(p - 1) / (double)(m + p - 1);
}

double dt_schedule_bubble_ideal_chunks(dt_sched_kind k, int p, int v, int m, int steps)
{
    if (p < 1 || m < 1 || v < 1) return 0.0;
    switch (k) {
    case DT_SCHED_PIPEDREAM:
    case DT_SCHED_PIPEDREAM_VSYNC:
        if (steps < 1 || (long long)steps * m > INT_MAX) return 0.0;
        return dt_schedule_bubble_formula(p, steps * m);
    case DT_SCHED_INTERLEAVED_1F1B: return (double)(p - 1) / ((double)v * m + p - 1);
    case DT_SCHED_ZB_H1: return DT__SCHED_ZBH1_BUBBLE(p, m);
    case DT_SCHED_ZB_V: return DT__SCHED_ZBV_BUBBLE(p, m);
    default: return dt_schedule_bubble_formula(p, m);
    }
}

double dt_schedule_bubble_ideal(dt_sched_kind k, int p, int m, int steps)
{
    return dt_schedule_bubble_ideal_chunks(k, p, dt_sched_default_chunks(k), m, steps);
}

const char *dt_schedule_bubble_formula_text(dt_sched_kind k)
{
    switch (k) {
    case DT_SCHED_PIPEDREAM:
    case DT_SCHED_PIPEDREAM_VSYNC: return "(p-1)/(steps*m+p-1)";
    case DT_SCHED_INTERLEAVED_1F1B: return "(p-1)/(v*m+p-1)";
    case DT_SCHED_ZB_H1: return "I/(3m+I), I = max(p-1, 2p-m-1)";
    case DT_SCHED_ZB_V: return "I/(6m+I), I = max(p-1, 4p-2m-2)";
    default: return "(p-1)/(m+p-1)";
    }
}

/* Pass 1 and the pipedream versions of pass 2 for stage s of the four
 * original kinds. items holds room for the largest list: steps*(2m+1) or
 * 3N. Returns the item count. */
static int dt__compute_order(dt_sched_kind kind, int p, int m, int steps, int s, dt__sched_item *it)
{
    int n = 0;
#define DT__ADD(op_, mb_, step_, ver_, ph_) \
    (it[n++] =                              \
         (dt__sched_item){.op = (op_), .chunk = 0, .mb = (mb_), .step = (step_), .version = (ver_), .phase = (ph_)})
    if (kind == DT_SCHED_GPIPE || kind == DT_SCHED_1F1B) {
        int w = kind == DT_SCHED_GPIPE ? m : DT_MIN(p - 1 - s, m);
        for (int t = 0; t < steps; t++) {
            int base = t * m;
            for (int i = 0; i < w; i++) DT__ADD(DT_SCHED_FORWARD, base + i, t, t, DT_SCHED_WARMUP);
            for (int i = 0; i < m - w; i++) {
                DT__ADD(DT_SCHED_FORWARD, base + w + i, t, t, DT_SCHED_STEADY);
                DT__ADD(DT_SCHED_BACKWARD, base + i, t, t, DT_SCHED_STEADY);
            }
            for (int i = m - w; i < m; i++) DT__ADD(DT_SCHED_BACKWARD, base + i, t, t, DT_SCHED_COOLDOWN);
            DT__ADD(DT_SCHED_OPTIM_STEP, -1, t, t + 1, DT_SCHED_COOLDOWN);
        }
        return n;
    }
    int N = steps * m, w = DT_MIN(p - 1 - s, N), cur = 0, nb = 0;
    /* a forward's version is the number of OPTs before it; B's is set later */
    for (int i = 0; i < w; i++) DT__ADD(DT_SCHED_FORWARD, i, i / m, 0, DT_SCHED_WARMUP);
    for (int i = 0; i < N - w; i++) {
        DT__ADD(DT_SCHED_FORWARD, w + i, (w + i) / m, cur, DT_SCHED_STEADY);
        DT__ADD(DT_SCHED_BACKWARD, nb, nb / m, -1, DT_SCHED_STEADY);
        DT__ADD(DT_SCHED_OPTIM_STEP, -1, nb / m, ++cur, DT_SCHED_STEADY);
        nb++;
    }
    for (; nb < N; nb++) {
        DT__ADD(DT_SCHED_BACKWARD, nb, nb / m, -1, DT_SCHED_COOLDOWN);
        DT__ADD(DT_SCHED_OPTIM_STEP, -1, nb / m, ++cur, DT_SCHED_COOLDOWN);
    }
#undef DT__ADD
    return n;
}

/* Pass 1 of any kind for device r: the four original kinds above, the
 * others step by step from schedule_order.c. */
static int dt__order(dt_sched_kind kind, int p, int v, int m, int steps, int r, dt__sched_item *it)
{
    if ((int)kind <= DT_SCHED_PIPEDREAM_VSYNC) return dt__compute_order(kind, p, m, steps, r, it);
    int n = 0;
    for (int t = 0; t < steps; t++) {
        if (kind == DT_SCHED_INTERLEAVED_1F1B) n += dt__sched_order_interleaved(p, v, m, r, t, it + n);
        else if (kind == DT_SCHED_ZB_H1) n += dt__sched_order_zbh1(p, m, r, t, it + n);
        else n += dt__sched_order_zbv(p, m, r, t, it + n);
    }
    return n;
}

/* A growable instruction list. */
typedef struct dt__ibuf {
    dt_sched_instr *v;
    int n, cap;
} dt__ibuf;

static int dt__emit(dt__ibuf *b, dt_sched_op op, int mb, int step, int version, dt_sched_phase phase, int chunk,
                    int peer)
{
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        dt_sched_instr *v = realloc(b->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        b->v = v;
        b->cap = cap;
    }
    dt_sched_instr *in = &b->v[b->n];
    memset(in, 0, sizeof *in);
    in->op = op;
    in->mb = mb;
    in->step = step;
    in->version = version;
    in->phase = phase;
    in->chunk = chunk;
    in->peer = peer;
    in->ndeps = 0;
    return b->n++;
}

void dt_schedule_free(dt_schedule *s)
{
    if (!s) return;
    if (s->instr)
        for (int i = 0; i < s->p; i++) free(s->instr[i]);
    free(s->instr);
    free(s->count);
    free(s->vstage);
    free(s->max_in_flight);
    free(s->max_versions);
    free(s);
}

/* The kind's own limits on v and m (the common ones are checked before). */
static dt_status dt__check_kind(dt_sched_kind kind, int p, int v, int m)
{
    if (kind == DT_SCHED_INTERLEAVED_1F1B) {
        if (v < 2)
            return DT_FAIL(DT_ERR_INVALID,
                           "--virtual-pipeline-model-parallel-size %d: interleaved-1f1b needs at least 2 model chunks "
                           "per stage",
                           v);
        if (m % p != 0)
            return DT_FAIL(DT_ERR_INVALID,
                           "micro-batches per step %d: interleaved-1f1b needs a multiple of "
                           "--pipeline-model-parallel-size %d (its forwards take the chunks in groups of p "
                           "micro-batches, as Megatron-LM's)",
                           m, p);
    } else if (kind == DT_SCHED_ZB_V) {
        if (v != 2)
            return DT_FAIL(DT_ERR_INVALID,
                           "--virtual-pipeline-model-parallel-size %d: zb-v places exactly 2 model chunks per stage",
                           v);
    } else if (v != 1) {
        return DT_FAIL(DT_ERR_INVALID,
                       "--virtual-pipeline-model-parallel-size %d: --pipeline-schedule %s has one model chunk per "
                       "stage (interleaved-1f1b and zb-v have more)",
                       v, dt_sched_kind_name(kind));
    }
    return DT_OK;
}

dt_status dt_schedule_make(dt_sched_kind kind, int p, int m, int steps, dt_schedule **out)
{
    return dt_schedule_make_chunks(kind, p, dt_sched_default_chunks(kind), m, steps, out);
}

dt_status dt_schedule_check(dt_sched_kind kind, int p, int v, int m, int steps)
{
    if ((int)kind < 0 || (int)kind >= DT__SCHED_NKINDS)
        return DT_FAIL(DT_ERR_INVALID,
                       "--pipeline-schedule: unknown schedule kind %d (expected " DT__SCHED_KIND_LIST ")", (int)kind);
    if (p < 1)
        return DT_FAIL(DT_ERR_INVALID, "--pipeline-model-parallel-size %d: expected at least 1 pipeline stage", p);
    if (m < 1)
        return DT_FAIL(
            DT_ERR_INVALID,
            "micro-batches per step %d: expected at least 1 (global batch / (micro batch x data-parallel size))", m);
    if (steps < 1) return DT_FAIL(DT_ERR_INVALID, "--train-iters %d: expected at least 1 step", steps);
    DT_CHECK(dt__check_kind(kind, p, v, m));
    /* every device holds at most 7 instructions per chunk and micro-batch plus 2 per step
     * (pipedream: RECV, F, SEND, RECV, B, SEND, OPT, STASH, DROP; zb: RECV, F, SEND, RECV, B, SEND, W) */
    if ((long long)steps * m * v > (INT_MAX - 64) / 16 || (long long)p * v * steps * m > (long long)INT_MAX / 4)
        return DT_FAIL(DT_ERR_INVALID,
                       "pipeline schedule: %d stages x %d chunks x %d micro-batches x %d steps is too large to "
                       "generate",
                       p, v, m, steps);
    return DT_OK;
}

dt_status dt_schedule_make_chunks(dt_sched_kind kind, int p, int v, int m, int steps, dt_schedule **out)
{
    if (out) *out = NULL;
    DT_CHECK(dt_schedule_check(kind, p, v, m, steps));
    if (!out) return DT_FAIL(DT_ERR_INVALID, "dt_schedule_make: out is NULL");

    const int N = steps * m, Q = p * v, maxv = dt__sched_is_async(kind) ? N : steps; /* versions 0..maxv */
    const int nitems_max = dt__sched_is_async(kind) ? 3 * N : steps * (3 * v * m + 1);
    dt_status st = DT_OK;
    dt_schedule *S = calloc(1, sizeof *S);
    dt__sched_item *items = malloc((size_t)nitems_max * sizeof *items);
    int *fver0 = malloc((size_t)N * sizeof *fver0);                     /* vsync: stage 0's F versions */
    int *idx = malloc((size_t)4 * (size_t)Q * (size_t)N * sizeof *idx); /* F, SEND_ACT, SEND_GRAD, B indices */
    int *need = calloc((size_t)maxv + 1, sizeof *need), *last = malloc(((size_t)maxv + 1) * sizeof *last);
    int *vcount = calloc((size_t)maxv + 1, sizeof *vcount);
    int *qdev = malloc((size_t)Q * sizeof *qdev); /* the device of each virtual stage */
    dt__ibuf buf = {0};
    if (!S || !items || !fver0 || !idx || !need || !last || !vcount || !qdev) goto nomem;
    S->kind = kind;
    S->p = p;
    S->m = m;
    S->steps = steps;
    S->v = v;
    S->vstage = malloc((size_t)Q * sizeof *S->vstage);
    S->count = calloc((size_t)p, sizeof *S->count);
    S->instr = calloc((size_t)p, sizeof *S->instr);
    S->max_in_flight = calloc((size_t)p, sizeof *S->max_in_flight);
    S->max_versions = calloc((size_t)p, sizeof *S->max_versions);
    if (!S->vstage || !S->count || !S->instr || !S->max_in_flight || !S->max_versions) goto nomem;
    for (int r = 0; r < p; r++)
        for (int c = 0; c < v; c++) {
            /* interleaved: chunk c is virtual stage c*p + r; zb-v: r, then 2p-1-r (a V) */
            const int q = kind == DT_SCHED_ZB_V ? (c == 0 ? r : 2 * p - 1 - r) : c * p + r;
            S->vstage[r * v + c] = q;
            qdev[q] = r;
        }
    int *fidx = idx, *sact = idx + (size_t)Q * N, *sgrad = idx + 2 * (size_t)Q * N, *bidx = idx + 3 * (size_t)Q * N;
    for (size_t i = 0; i < 4 * (size_t)Q * N; i++) idx[i] = -1;

    for (int s = 0; s < p; s++) {
        int n = dt__order(kind, p, v, m, steps, s, items);
        assert(n <= nitems_max);

        /* pass 2: versions of the pipedream kinds */
        if (dt__sched_is_async(kind)) {
            int cur = 0;
            for (int k = 0; k < n; k++) {
                dt__sched_item *x = &items[k];
                if (x->op == DT_SCHED_OPTIM_STEP) cur = x->version;
                if (x->op != DT_SCHED_FORWARD) continue;
                if (s == 0) fver0[x->mb] = x->version;
                if (kind == DT_SCHED_PIPEDREAM_VSYNC) {
                    x->version = fver0[x->mb];
                    assert(x->version <= cur); /* the stage has made that version */
                }
            }
            /* B uses its F's version: F(mb) precedes B(mb) in the list */
            for (int k = 0; k < n; k++) {
                if (items[k].op == DT_SCHED_FORWARD) vcount[items[k].mb] = items[k].version; /* scratch, by mb */
                if (items[k].op == DT_SCHED_BACKWARD) items[k].version = vcount[items[k].mb];
            }
            memset(vcount, 0, ((size_t)maxv + 1) * sizeof *vcount);
        }

        /* which versions are stashed (used while a newer one is current), where each is last used,
         * and the in-flight figures: a chunk's micro-batch is in flight from its FORWARD to its
         * BACKWARD, or to its BACKWARD_W when the backward is split */
        memset(need, 0, ((size_t)maxv + 1) * sizeof *need);
        int cur = 0, inflight = 0, distinct = 0, max_if = 0, max_v = 0;
        for (int k = 0; k < n; k++) {
            const dt__sched_item *x = &items[k];
            if (x->op == DT_SCHED_OPTIM_STEP) {
                cur = x->version;
                continue;
            }
            int ver = x->version;
            last[ver] = k;
            if (cur > ver) need[ver] = 1;
            if (x->op == DT_SCHED_FORWARD) {
                inflight++;
                if (vcount[ver]++ == 0) distinct++;
                max_if = DT_MAX(max_if, inflight);
                max_v = DT_MAX(max_v, distinct);
            } else if (x->op != DT_SCHED_BACKWARD_B) {
                inflight--;
                if (--vcount[ver] == 0) distinct--;
            }
        }
        S->max_in_flight[s] = max_if;
        S->max_versions[s] = max_v;

        /* pass 3: expansion */
        buf = (dt__ibuf){0};
        if (need[0] && dt__emit(&buf, DT_SCHED_STASH, -1, 0, 0, items[0].phase, 0, -1) < 0) goto nomem;
        for (int k = 0; k < n; k++) {
            const dt__sched_item *x = &items[k];
            const int mb = x->mb, c = x->chunk, q = S->vstage[s * v + c];
            int i;
            size_t at = (size_t)q * N + (size_t)(mb >= 0 ? mb : 0);
            switch (x->op) {
            case DT_SCHED_FORWARD:
                if (q > 0 && dt__emit(&buf, DT_SCHED_RECV_ACT, mb, x->step, -1, x->phase, c, qdev[q - 1]) < 0)
                    goto nomem;
                if ((i = dt__emit(&buf, DT_SCHED_FORWARD, mb, x->step, x->version, x->phase, c, -1)) < 0) goto nomem;
                fidx[at] = i;
                if (q < Q - 1) {
                    if ((i = dt__emit(&buf, DT_SCHED_SEND_ACT, mb, x->step, -1, x->phase, c, qdev[q + 1])) < 0)
                        goto nomem;
                    sact[at] = i;
                }
                break;
            case DT_SCHED_BACKWARD:
            case DT_SCHED_BACKWARD_B:
                if (q < Q - 1 && dt__emit(&buf, DT_SCHED_RECV_GRAD, mb, x->step, -1, x->phase, c, qdev[q + 1]) < 0)
                    goto nomem;
                if ((i = dt__emit(&buf, x->op, mb, x->step, x->version, x->phase, c, -1)) < 0) goto nomem;
                bidx[at] = i;
                if (q > 0) {
                    if ((i = dt__emit(&buf, DT_SCHED_SEND_GRAD, mb, x->step, -1, x->phase, c, qdev[q - 1])) < 0)
                        goto nomem;
                    sgrad[at] = i;
                }
                break;
            case DT_SCHED_BACKWARD_W:
                if (dt__emit(&buf, DT_SCHED_BACKWARD_W, mb, x->step, x->version, x->phase, c, -1) < 0) goto nomem;
                break;
            default: /* OPTIM_STEP */
                if (dt__emit(&buf, DT_SCHED_OPTIM_STEP, -1, x->step, x->version, x->phase, 0, -1) < 0) goto nomem;
                if (need[x->version] && dt__emit(&buf, DT_SCHED_STASH, -1, x->step, x->version, x->phase, 0, -1) < 0)
                    goto nomem;
                continue;
            }
            if (need[x->version] && last[x->version] == k &&
                dt__emit(&buf, DT_SCHED_DROP, -1, x->step, x->version, x->phase, 0, -1) < 0)
                goto nomem;
        }
        S->instr[s] = buf.v;
        S->count[s] = buf.n;
        buf = (dt__ibuf){0};
    }

    /* dependencies */
    for (int s = 0; s < p; s++)
        for (int i = 0; i < S->count[s]; i++) {
            dt_sched_instr *in = &S->instr[s][i];
            const int q = S->vstage[s * v + in->chunk];
            const size_t mb = (size_t)(in->mb >= 0 ? in->mb : 0);
            switch (in->op) {
            case DT_SCHED_RECV_ACT:
                in->deps[in->ndeps++] = (dt_sched_dep){qdev[q - 1], sact[(size_t)(q - 1) * N + mb]};
                break;
            case DT_SCHED_RECV_GRAD:
                in->deps[in->ndeps++] = (dt_sched_dep){qdev[q + 1], sgrad[(size_t)(q + 1) * N + mb]};
                break;
            case DT_SCHED_BACKWARD:
            case DT_SCHED_BACKWARD_B: in->deps[in->ndeps++] = (dt_sched_dep){s, fidx[(size_t)q * N + mb]}; break;
            case DT_SCHED_BACKWARD_W: in->deps[in->ndeps++] = (dt_sched_dep){s, bidx[(size_t)q * N + mb]}; break;
            default: break;
            }
            for (int d = 0; d < in->ndeps; d++) assert(in->deps[d].index >= 0);
        }
    *out = S;
    S = NULL;
    goto done;
nomem:
    st = DT_FAIL(DT_ERR_NOMEM, "pipeline schedule %s (p=%d v=%d m=%d steps=%d): out of memory",
                 dt_sched_kind_name(kind), p, v, m, steps);
    free(buf.v);
done:
    dt_schedule_free(S);
    free(items);
    free(fver0);
    free(idx);
    free(need);
    free(last);
    free(vcount);
    free(qdev);
    return st;
}

/* A growable string for dt_schedule_format. */
typedef struct dt__sbuf {
    char *v;
    size_t n, cap;
    int failed;
} dt__sbuf;

__attribute__((format(printf, 2, 3))) static void dt__sprintf(dt__sbuf *b, const char *fmt, ...)
{
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->v ? b->v + b->n : NULL, b->v ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            return;
        }
        if (b->v && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap <= b->n + (size_t)k) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) {
            b->failed = 1;
            return;
        }
        b->v = v;
        b->cap = cap;
    }
}

char *dt_schedule_format(const dt_schedule *s, int verbose)
{
    if (!s) return NULL;
    const int versions = dt__sched_is_async(s->kind), chunks = s->v > 1;
    dt__sbuf b = {0};
    dt__sprintf(&b, "schedule %s: p=%d m=%d steps=%d", dt_sched_kind_name(s->kind), s->p, s->m, s->steps);
    if (chunks)
        dt__sprintf(&b, " v=%d (%s)", s->v,
                    s->kind == DT_SCHED_ZB_V ? "stage r's chunk 0 is virtual stage r, chunk 1 is 2p-1-r"
                                             : "stage r's chunk c is virtual stage c*p+r");
    dt__sprintf(&b, "\n");
    for (int st = 0; st < s->p; st++) {
        dt__sprintf(&b, "stage %d:", st);
        for (int i = 0; i < s->count[st]; i++) {
            const dt_sched_instr *in = &s->instr[st][i];
            switch (in->op) {
            case DT_SCHED_FORWARD:
            case DT_SCHED_BACKWARD:
            case DT_SCHED_BACKWARD_B:
            case DT_SCHED_BACKWARD_W:
                dt__sprintf(&b, " %c%d",
                            in->op == DT_SCHED_FORWARD      ? 'F'
                            : in->op == DT_SCHED_BACKWARD_W ? 'W'
                                                            : 'B',
                            in->mb);
                if (chunks) dt__sprintf(&b, ".%d", in->chunk);
                if (versions) dt__sprintf(&b, "@v%d", in->version);
                break;
            case DT_SCHED_OPTIM_STEP: dt__sprintf(&b, " OPT"); break;
            case DT_SCHED_RECV_ACT:
            case DT_SCHED_SEND_ACT:
            case DT_SCHED_RECV_GRAD:
            case DT_SCHED_SEND_GRAD:
                if (!verbose) break;
                dt__sprintf(&b, " %c%c%d", in->op == DT_SCHED_RECV_ACT || in->op == DT_SCHED_RECV_GRAD ? 'R' : 'S',
                            in->op == DT_SCHED_RECV_ACT || in->op == DT_SCHED_SEND_ACT ? 'F' : 'B', in->mb);
                if (chunks) dt__sprintf(&b, ".%d", in->chunk);
                break;
            case DT_SCHED_STASH:
            case DT_SCHED_DROP:
                if (verbose) dt__sprintf(&b, " %s@v%d", in->op == DT_SCHED_STASH ? "STASH" : "DROP", in->version);
                break;
            }
        }
        dt__sprintf(&b, "\n");
    }
    if (b.failed) {
        free(b.v);
        return NULL;
    }
    return b.v;
}
