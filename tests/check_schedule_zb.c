/* check_schedule_zb.c: the schedules with model chunks or a split backward
 * (interleaved-1f1b, zb-h1, zb-v; dt_schedule.h), from their instruction
 * lists alone (nothing here reuses the generator's code):
 *   - hand-derived lists of small cases, verbatim (printed form);
 *   - for a grid of p, v, m and steps, the contract of the header: the
 *     chunks' virtual stages; each (chunk, mb) forwarded, backwarded (and
 *     weight-graded) exactly once per device in that order, per chunk in
 *     ascending mb order; receives and sends right around their compute,
 *     naming the device of the neighbouring virtual stage; every link's
 *     sends and receives matching one to one in the same order; the
 *     dependencies; step and version fields; one OPT per step, last;
 *   - max_in_flight recounted (a chunk's micro-batch is in flight from its
 *     FORWARD to its BACKWARD or BACKWARD_W) and equal to its formula;
 *   - an interpreter (blocking receives, non-blocking sends) finishes; with
 *     F = B = W = 1 (BACKWARD = 2) and free messages, every device's idle
 *     share equals dt_schedule_bubble_ideal_chunks exactly, the four
 *     flushing kinds order 1f1b > interleaved-1f1b > zb-h1 > zb-v, and with
 *     other costs zb-h1 idles (p-1)(F+B-min(F,B,W)) and interleaved-1f1b
 *     (p-1)(F+B) per chunk costs;
 *   - message ids: a send's is its receive's, distinct over the run and
 *     the pipelines, none for hand-overs (every kind);
 *   - the one-line errors. */
#include <string.h>

#include "testutil.h"

static char ctx[160];

#define REQUIRE(cond, fmt, ...)                                    \
    do {                                                           \
        if (!(cond)) ck_abort_msg("%s: " fmt, ctx, ##__VA_ARGS__); \
    } while (0)

#define MAXP 16

static dt_schedule *make(dt_sched_kind k, int p, int v, int m, int steps)
{
    snprintf(ctx, sizeof ctx, "%s p=%d v=%d m=%d steps=%d", dt_sched_kind_name(k), p, v, m, steps);
    dt_schedule *S = NULL;
    ck_dt(dt_schedule_make_chunks(k, p, v, m, steps, &S));
    ck_assert_ptr_nonnull(S);
    return S;
}

static int split_kind(const dt_schedule *S) { return S->kind == DT_SCHED_ZB_H1 || S->kind == DT_SCHED_ZB_V; }

/* The virtual stage of device r's chunk c, as the header states it. */
static int want_vstage(const dt_schedule *S, int r, int c)
{
    if (S->kind == DT_SCHED_ZB_V) return c == 0 ? r : 2 * S->p - 1 - r;
    return c * S->p + r;
}

/* ---- the contract -------------------------------------------------------- */

typedef struct where {
    int dev, chunk;
} where;

static void check_contract(const dt_schedule *S)
{
    const int p = S->p, v = S->v, m = S->m, N = m * S->steps, Q = p * v, split = split_kind(S);
    REQUIRE(v >= 1 && S->vstage && S->count && S->instr, "bad header");
    where *at = malloc((size_t)Q * sizeof *at);
    for (int q = 0; q < Q; q++) at[q] = (where){-1, -1};
    for (int r = 0; r < p; r++)
        for (int c = 0; c < v; c++) {
            const int q = S->vstage[r * v + c];
            REQUIRE(q == want_vstage(S, r, c), "vstage[%d*v+%d] = %d, expected %d", r, c, q, want_vstage(S, r, c));
            REQUIRE(at[q].dev < 0, "virtual stage %d twice", q);
            at[q] = (where){r, c};
        }
    /* positions of F, B, W per (q, mb), and the last mb seen per (q, op) for the ascending order */
    int *fpos = malloc((size_t)Q * N * sizeof *fpos), *bpos = malloc((size_t)Q * N * sizeof *bpos);
    int *wpos = malloc((size_t)Q * N * sizeof *wpos);
    for (int r = 0; r < p; r++) {
        const dt_sched_instr *L = S->instr[r];
        const int n = S->count[r];
        int lastf[64], lastb[64], lastw[64], opts = 0;
        for (int c = 0; c < v; c++) lastf[c] = lastb[c] = lastw[c] = -1;
        for (size_t i = 0; i < (size_t)Q * N; i++) fpos[i] = bpos[i] = wpos[i] = -1;
        for (int i = 0; i < n; i++) {
            const dt_sched_instr *in = &L[i], *prev = i ? &L[i - 1] : NULL, *next = i + 1 < n ? &L[i + 1] : NULL;
            const dt_sched_op op = in->op;
            REQUIRE(in->chunk >= 0 && in->chunk < v, "device %d [%d]: chunk %d", r, i, in->chunk);
            const int c = in->chunk, q = S->vstage[r * v + c];
            if (op == DT_SCHED_OPTIM_STEP) {
                REQUIRE(in->mb == -1 && in->chunk == 0 && in->peer == -1 && in->ndeps == 0, "device %d [%d]: OPT", r,
                        i);
                REQUIRE(in->step == opts && in->version == opts + 1, "device %d [%d]: OPT step %d version %d", r, i,
                        in->step, in->version);
                /* everything of step t comes before its OPT */
                REQUIRE(!next || next->step == opts + 1, "device %d [%d]: step %d after OPT %d", r, i + 1, next->step,
                        opts);
                opts++;
                continue;
            }
            REQUIRE(op != DT_SCHED_STASH && op != DT_SCHED_DROP, "device %d [%d]: %s", r, i, dt_sched_op_name(op));
            REQUIRE(op != (split ? DT_SCHED_BACKWARD : DT_SCHED_BACKWARD_B) && (split || op != DT_SCHED_BACKWARD_W),
                    "device %d [%d]: %s in a %s list", r, i, dt_sched_op_name(op), split ? "split" : "whole-backward");
            REQUIRE(in->mb >= 0 && in->mb < N && in->step == in->mb / m, "device %d [%d]: mb %d step %d", r, i, in->mb,
                    in->step);
            const size_t k = (size_t)q * N + (size_t)in->mb;
            const int is_comm = op == DT_SCHED_RECV_ACT || op == DT_SCHED_SEND_ACT || op == DT_SCHED_RECV_GRAD ||
                                op == DT_SCHED_SEND_GRAD;
            REQUIRE(in->version == (is_comm ? -1 : in->step), "device %d [%d]: version %d", r, i, in->version);
            if (!is_comm) REQUIRE(in->peer == -1, "device %d [%d]: peer %d", r, i, in->peer);
            int ndeps = 0;
            switch (op) {
            case DT_SCHED_RECV_ACT:
                REQUIRE(q > 0 && next && next->op == DT_SCHED_FORWARD && next->mb == in->mb && next->chunk == c,
                        "device %d [%d]: RECV_ACT %d.%d not right before its FORWARD", r, i, in->mb, c);
                REQUIRE(in->peer == at[q - 1].dev, "device %d [%d]: RECV_ACT peer %d", r, i, in->peer);
                ndeps = 1;
                {
                    const dt_sched_dep d = in->deps[0];
                    REQUIRE(in->ndeps == 1 && d.stage == at[q - 1].dev && d.index >= 0 && d.index < S->count[d.stage],
                            "device %d [%d]: RECV_ACT dep", r, i);
                    const dt_sched_instr *x = &S->instr[d.stage][d.index];
                    REQUIRE(x->op == DT_SCHED_SEND_ACT && x->mb == in->mb && x->chunk == at[q - 1].chunk,
                            "device %d [%d]: RECV_ACT %d on %s %d", r, i, in->mb, dt_sched_op_name(x->op), x->mb);
                }
                break;
            case DT_SCHED_RECV_GRAD:
                REQUIRE(q < Q - 1 && next && next->mb == in->mb && next->chunk == c &&
                            next->op == (split ? DT_SCHED_BACKWARD_B : DT_SCHED_BACKWARD),
                        "device %d [%d]: RECV_GRAD %d.%d not right before its backward", r, i, in->mb, c);
                REQUIRE(in->peer == at[q + 1].dev, "device %d [%d]: RECV_GRAD peer %d", r, i, in->peer);
                ndeps = 1;
                {
                    const dt_sched_dep d = in->deps[0];
                    REQUIRE(in->ndeps == 1 && d.stage == at[q + 1].dev && d.index >= 0 && d.index < S->count[d.stage],
                            "device %d [%d]: RECV_GRAD dep", r, i);
                    const dt_sched_instr *x = &S->instr[d.stage][d.index];
                    REQUIRE(x->op == DT_SCHED_SEND_GRAD && x->mb == in->mb && x->chunk == at[q + 1].chunk,
                            "device %d [%d]: RECV_GRAD %d on %s %d", r, i, in->mb, dt_sched_op_name(x->op), x->mb);
                }
                break;
            case DT_SCHED_SEND_ACT:
                REQUIRE(q < Q - 1 && prev && prev->op == DT_SCHED_FORWARD && prev->mb == in->mb && prev->chunk == c,
                        "device %d [%d]: SEND_ACT not right after its FORWARD", r, i);
                REQUIRE(in->peer == at[q + 1].dev, "device %d [%d]: SEND_ACT peer %d", r, i, in->peer);
                break;
            case DT_SCHED_SEND_GRAD:
                REQUIRE(q > 0 && prev && prev->mb == in->mb && prev->chunk == c &&
                            (prev->op == DT_SCHED_BACKWARD || prev->op == DT_SCHED_BACKWARD_B),
                        "device %d [%d]: SEND_GRAD not right after its backward", r, i);
                REQUIRE(in->peer == at[q - 1].dev, "device %d [%d]: SEND_GRAD peer %d", r, i, in->peer);
                break;
            case DT_SCHED_FORWARD:
                REQUIRE(fpos[k] < 0 && in->mb > lastf[c], "device %d [%d]: F %d.%d twice or out of order", r, i, in->mb,
                        c);
                lastf[c] = in->mb;
                fpos[k] = i;
                REQUIRE((q > 0) == (prev && prev->op == DT_SCHED_RECV_ACT), "device %d [%d]: F's receive", r, i);
                REQUIRE((q < Q - 1) == (next && next->op == DT_SCHED_SEND_ACT), "device %d [%d]: F's send", r, i);
                break;
            case DT_SCHED_BACKWARD:
            case DT_SCHED_BACKWARD_B:
                REQUIRE(bpos[k] < 0 && fpos[k] >= 0 && in->mb > lastb[c], "device %d [%d]: B %d.%d", r, i, in->mb, c);
                lastb[c] = in->mb;
                bpos[k] = i;
                REQUIRE((q < Q - 1) == (prev && prev->op == DT_SCHED_RECV_GRAD), "device %d [%d]: B's receive", r, i);
                REQUIRE((q > 0) == (next && next->op == DT_SCHED_SEND_GRAD), "device %d [%d]: B's send", r, i);
                ndeps = 1;
                REQUIRE(in->ndeps == 1 && in->deps[0].stage == r && in->deps[0].index == fpos[k],
                        "device %d [%d]: B %d.%d does not depend on its F", r, i, in->mb, c);
                break;
            case DT_SCHED_BACKWARD_W:
                REQUIRE(wpos[k] < 0 && bpos[k] >= 0 && in->mb > lastw[c], "device %d [%d]: W %d.%d", r, i, in->mb, c);
                lastw[c] = in->mb;
                wpos[k] = i;
                ndeps = 1;
                REQUIRE(in->ndeps == 1 && in->deps[0].stage == r && in->deps[0].index == bpos[k],
                        "device %d [%d]: W %d.%d does not depend on its B", r, i, in->mb, c);
                break;
            default: break;
            }
            if (!ndeps) REQUIRE(in->ndeps == 0, "device %d [%d] %s: %d deps", r, i, dt_sched_op_name(op), in->ndeps);
        }
        REQUIRE(opts == S->steps && S->instr[r][n - 1].op == DT_SCHED_OPTIM_STEP, "device %d: %d OPTs", r, opts);
        for (int c = 0; c < v; c++)
            for (int mb = 0; mb < N; mb++) {
                const size_t k = (size_t)S->vstage[r * v + c] * N + (size_t)mb;
                REQUIRE(fpos[k] >= 0 && bpos[k] > fpos[k] && (split ? wpos[k] > bpos[k] : wpos[k] < 0),
                        "device %d: mb %d.%d not F, B%s once each", r, mb, c, split ? ", W" : "");
            }
    }
    /* links: q -> q+1 activations and q+1 -> q gradients, in the same order on both sides */
    int *a = malloc((size_t)N * sizeof *a), *b = malloc((size_t)N * sizeof *b);
    for (int q = 0; q + 1 < Q; q++)
        for (int grad = 0; grad < 2; grad++) {
            const where from = grad ? at[q + 1] : at[q], to = grad ? at[q] : at[q + 1];
            const dt_sched_op sop = grad ? DT_SCHED_SEND_GRAD : DT_SCHED_SEND_ACT;
            const dt_sched_op rop = grad ? DT_SCHED_RECV_GRAD : DT_SCHED_RECV_ACT;
            int na = 0, nb = 0;
            for (int i = 0; i < S->count[from.dev]; i++)
                if (S->instr[from.dev][i].op == sop && S->instr[from.dev][i].chunk == from.chunk)
                    a[na++] = S->instr[from.dev][i].mb;
            for (int i = 0; i < S->count[to.dev]; i++)
                if (S->instr[to.dev][i].op == rop && S->instr[to.dev][i].chunk == to.chunk)
                    b[nb++] = S->instr[to.dev][i].mb;
            REQUIRE(na == N && nb == N, "link %d%s%d: %d sends, %d receives", grad ? q + 1 : q, "->", grad ? q : q + 1,
                    na, nb);
            for (int i = 0; i < N; i++)
                REQUIRE(a[i] == i && b[i] == i, "link %d->%d: message %d sent as mb %d, received as mb %d",
                        grad ? q + 1 : q, grad ? q : q + 1, i, a[i], b[i]);
        }
    free(a);
    free(b);
    free(fpos);
    free(bpos);
    free(wpos);
    free(at);
}

/* In flight: recounted, equal to the field and to the kind's formula. */
static int recount_in_flight(const dt_schedule *S, int r)
{
    int cur = 0, most = 0;
    for (int i = 0; i < S->count[r]; i++) {
        const dt_sched_op op = S->instr[r][i].op;
        if (op == DT_SCHED_FORWARD && ++cur > most) most = cur;
        if (op == DT_SCHED_BACKWARD || op == DT_SCHED_BACKWARD_W) cur--;
    }
    return most;
}

static void check_in_flight(const dt_schedule *S)
{
    const int p = S->p, v = S->v, m = S->m;
    for (int r = 0; r < p; r++) {
        const int got = recount_in_flight(S, r);
        REQUIRE(got == S->max_in_flight[r], "device %d: max_in_flight %d, recounted %d", r, S->max_in_flight[r], got);
        int want = -1;
        if (S->kind == DT_SCHED_INTERLEAVED_1F1B) { /* its warm-up forwards and one more */
            want = (v - 1) * p + 2 * (p - 1 - r) + 1;
            if (want > v * m) want = v * m;
        } else if (S->kind == DT_SCHED_ZB_H1) { /* 1f1b's p-r, plus the r W's it holds back */
            want = m < p ? m : p;
        } else if (S->kind == DT_SCHED_ZB_V) { /* 2p half-stage chunks: 1f1b's p stage-micro-batches */
            REQUIRE(got <= 2 * p, "device %d: %d in flight, more than 2p", r, got);
            if (m >= 2 * p - 1) want = 2 * p;
        }
        if (want >= 0) REQUIRE(got == want, "device %d: %d in flight, expected %d", r, got, want);
    }
}

/* ---- the interpreter ------------------------------------------------------- */

typedef struct costs {
    long long f, b, bi, w; /* FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W; everything else 0 */
} costs;

static long long cost_of(const costs *c, dt_sched_op op)
{
    switch (op) {
    case DT_SCHED_FORWARD: return c->f;
    case DT_SCHED_BACKWARD: return c->b;
    case DT_SCHED_BACKWARD_B: return c->bi;
    case DT_SCHED_BACKWARD_W: return c->w;
    default: return 0;
    }
}

/* Every device runs its list in order; an instruction starts once the one
 * before it and its dependencies are done. Returns -1 on deadlock. */
static int interpret(const dt_schedule *S, const costs *c, long long *makespan, long long *busy)
{
    const int p = S->p;
    int pc[MAXP] = {0}, total = 0, ran = 0;
    long long clock[MAXP] = {0}, *fin[MAXP];
    for (int r = 0; r < p; r++) {
        fin[r] = calloc((size_t)S->count[r] + 1, sizeof **fin);
        total += S->count[r];
        busy[r] = 0;
    }
    for (int progress = 1; progress && ran < total;) {
        progress = 0;
        for (int r = 0; r < p; r++)
            while (pc[r] < S->count[r]) {
                const dt_sched_instr *in = &S->instr[r][pc[r]];
                long long start = clock[r];
                int ready = 1;
                for (int d = 0; d < in->ndeps && ready; d++) {
                    const dt_sched_dep dep = in->deps[d];
                    if (dep.index >= pc[dep.stage]) ready = 0;
                    else if (fin[dep.stage][dep.index] > start) start = fin[dep.stage][dep.index];
                }
                if (!ready) break;
                clock[r] = start + cost_of(c, in->op);
                busy[r] += cost_of(c, in->op);
                fin[r][pc[r]++] = clock[r];
                ran++;
                progress = 1;
            }
    }
    *makespan = 0;
    for (int r = 0; r < p; r++) {
        if (clock[r] > *makespan) *makespan = clock[r];
        free(fin[r]);
    }
    return ran == total ? 0 : -1;
}

static const costs UNIT = {1, 2, 1, 1}; /* F = B = W: a whole backward is two */

/* The idle share of every device, unit costs, one step: exactly the formula. */
static void check_bubble(const dt_schedule *S)
{
    long long makespan, busy[MAXP];
    REQUIRE(interpret(S, &UNIT, &makespan, busy) == 0, "the interpreter deadlocks");
    if (S->steps != 1) return;
    const double want = dt_schedule_bubble_ideal_chunks(S->kind, S->p, S->v, S->m, 1);
    for (int r = 0; r < S->p; r++) {
        REQUIRE(busy[r] == 3LL * S->v * S->m, "device %d: busy %lld", r, busy[r]);
        const double got = (double)(makespan - busy[r]) / (double)makespan;
        REQUIRE(fabs(got - want) < 1e-12, "device %d: idle %lld of %lld = %.6f, formula %s = %.6f", r,
                makespan - busy[r], makespan, got, dt_schedule_bubble_formula_text(S->kind), want);
    }
}

static void check_all(const dt_schedule *S)
{
    check_contract(S);
    check_in_flight(S);
    check_bubble(S);
}

/* ---- tests ------------------------------------------------------------------- */

static void expect_format(dt_sched_kind k, int p, int v, int m, int verbose, const char *want)
{
    dt_schedule *S = make(k, p, v, m, 1);
    check_all(S);
    char *got = dt_schedule_format(S, verbose);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got, want);
    free(got);
    dt_schedule_free(S);
}

/* Derived by hand from the rules in docs/pipeline-schedules.md. */
START_TEST(test_hand_interleaved)
{
    /* p=2 v=2 m=4: forwards k = 0..7 take chunk (k mod 4) div 2 of mb (k div 4)*2 + k mod 2;
     * device 0 warms up with 2(p-1) + (v-1)p = 4, device 1 with 2 */
    expect_format(DT_SCHED_INTERLEAVED_1F1B, 2, 2, 4, 0,
                  "schedule interleaved-1f1b: p=2 m=4 steps=1 v=2 (stage r's chunk c is virtual stage c*p+r)\n"
                  "stage 0: F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0 OPT\n"
                  "stage 1: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0 OPT\n");
    /* p=4 v=2 m=4: warm-ups 10 -> 8 (all), 8, 6, 4 */
    expect_format(DT_SCHED_INTERLEAVED_1F1B, 4, 2, 4, 0,
                  "schedule interleaved-1f1b: p=4 m=4 steps=1 v=2 (stage r's chunk c is virtual stage c*p+r)\n"
                  "stage 0: F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 B0.1 B1.1 B2.1 B3.1 B0.0 B1.0 B2.0 B3.0 OPT\n"
                  "stage 1: F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 B0.1 B1.1 B2.1 B3.1 B0.0 B1.0 B2.0 B3.0 OPT\n"
                  "stage 2: F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 B0.1 F3.1 B1.1 B2.1 B3.1 B0.0 B1.0 B2.0 B3.0 OPT\n"
                  "stage 3: F0.0 F1.0 F2.0 F3.0 F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 F3.1 B3.1 B0.0 B1.0 B2.0 B3.0 OPT\n");
    /* the receives and sends of p=2 v=2 m=2: stage 1's chunk 0 hands over to stage 0's chunk 1 */
    expect_format(DT_SCHED_INTERLEAVED_1F1B, 2, 2, 2, 1,
                  "schedule interleaved-1f1b: p=2 m=2 steps=1 v=2 (stage r's chunk c is virtual stage c*p+r)\n"
                  "stage 0: F0.0 SF0.0 F1.0 SF1.0 RF0.1 F0.1 SF0.1 RF1.1 F1.1 SF1.1 RB0.1 B0.1 SB0.1 RB1.1 B1.1 "
                  "SB1.1 RB0.0 B0.0 RB1.0 B1.0 OPT\n"
                  "stage 1: RF0.0 F0.0 SF0.0 RF1.0 F1.0 SF1.0 RF0.1 F0.1 B0.1 SB0.1 RF1.1 F1.1 B1.1 SB1.1 RB0.0 B0.0 "
                  "SB0.0 RB1.0 B1.0 SB1.0 OPT\n");
}
END_TEST

START_TEST(test_hand_zbh1)
{
    /* device r: min(p-1-r, m) warm-up F; steady "F B" + a W once k >= r; cool-down "B W"; the W's owed */
    expect_format(DT_SCHED_ZB_H1, 2, 1, 4, 0,
                  "schedule zb-h1: p=2 m=4 steps=1\n"
                  "stage 0: F0 F1 B0 W0 F2 B1 W1 F3 B2 W2 B3 W3 OPT\n"
                  "stage 1: F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3 OPT\n");
    expect_format(DT_SCHED_ZB_H1, 3, 1, 4, 0,
                  "schedule zb-h1: p=3 m=4 steps=1\n"
                  "stage 0: F0 F1 F2 B0 W0 F3 B1 W1 B2 W2 B3 W3 OPT\n"
                  "stage 1: F0 F1 B0 F2 B1 W0 F3 B2 W1 B3 W2 W3 OPT\n"
                  "stage 2: F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3 OPT\n");
    expect_format(DT_SCHED_ZB_H1, 4, 1, 4, 0,
                  "schedule zb-h1: p=4 m=4 steps=1\n"
                  "stage 0: F0 F1 F2 F3 B0 W0 B1 W1 B2 W2 B3 W3 OPT\n"
                  "stage 1: F0 F1 F2 B0 F3 B1 W0 B2 W1 B3 W2 W3 OPT\n"
                  "stage 2: F0 F1 B0 F2 B1 F3 B2 W0 B3 W1 W2 W3 OPT\n"
                  "stage 3: F0 B0 F1 B1 F2 B2 F3 B3 W0 W1 W2 W3 OPT\n");
    expect_format(DT_SCHED_ZB_H1, 2, 1, 2, 1,
                  "schedule zb-h1: p=2 m=2 steps=1\n"
                  "stage 0: F0 SF0 F1 SF1 RB0 B0 W0 RB1 B1 W1 OPT\n"
                  "stage 1: RF0 F0 B0 SB0 RF1 F1 B1 SB1 W0 W1 OPT\n");
}
END_TEST

START_TEST(test_hand_zbv)
{
    /* device 0: 2p-1 = 3 F of chunk 0; p triples F B W of chunk 1; then "F0 B0 W0 F1 B1 W1" while chunk 0
     * has forwards left or chunk 1 lags; cool-down "B0 W0" pairs (r = 0) */
    expect_format(DT_SCHED_ZB_V, 2, 2, 4, 0,
                  "schedule zb-v: p=2 m=4 steps=1 v=2 (stage r's chunk 0 is virtual stage r, chunk 1 is 2p-1-r)\n"
                  "stage 0: F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 B1.1 W1.1 F3.0 B0.0 W0.0 F2.1 B2.1 W2.1 B1.0 W1.0 "
                  "F3.1 B3.1 W3.1 B2.0 W2.0 B3.0 W3.0 OPT\n"
                  "stage 1: F0.0 F0.1 F1.0 F1.1 B0.1 W0.1 F2.0 B0.0 W0.0 F2.1 B1.1 W1.1 F3.0 B1.0 W1.0 F3.1 B2.1 "
                  "W2.1 B2.0 B3.1 B3.0 W2.0 W3.1 W3.0 OPT\n");
    /* m = 5: device 0 runs one more steady round; device 1 the same pattern one micro-batch longer */
    expect_format(DT_SCHED_ZB_V, 2, 2, 5, 0,
                  "schedule zb-v: p=2 m=5 steps=1 v=2 (stage r's chunk 0 is virtual stage r, chunk 1 is 2p-1-r)\n"
                  "stage 0: F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 B1.1 W1.1 F3.0 B0.0 W0.0 F2.1 B2.1 W2.1 F4.0 B1.0 "
                  "W1.0 F3.1 B3.1 W3.1 B2.0 W2.0 F4.1 B4.1 W4.1 B3.0 W3.0 B4.0 W4.0 OPT\n"
                  "stage 1: F0.0 F0.1 F1.0 F1.1 B0.1 W0.1 F2.0 B0.0 W0.0 F2.1 B1.1 W1.1 F3.0 B1.0 W1.0 F3.1 B2.1 "
                  "W2.1 F4.0 B2.0 W2.0 F4.1 B3.1 W3.1 B3.0 B4.1 B4.0 W3.0 W4.1 W4.0 OPT\n");
    /* m = 1 < 2p-1: the order of m = 3 without micro-batches 1 and 2 */
    expect_format(DT_SCHED_ZB_V, 2, 2, 1, 0,
                  "schedule zb-v: p=2 m=1 steps=1 v=2 (stage r's chunk 0 is virtual stage r, chunk 1 is 2p-1-r)\n"
                  "stage 0: F0.0 F0.1 B0.1 W0.1 B0.0 W0.0 OPT\n"
                  "stage 1: F0.0 F0.1 B0.1 W0.1 B0.0 W0.0 OPT\n");
}
END_TEST

START_TEST(test_invariants)
{
    int n = 0;
    for (int p = 1; p <= 6; p++)
        for (int m = 1; m <= 12; m++)
            for (int steps = 1; steps <= 2; steps++) {
                dt_schedule *S = make(DT_SCHED_ZB_H1, p, 1, m, steps);
                check_all(S);
                dt_schedule_free(S);
                S = make(DT_SCHED_ZB_V, p, 2, m, steps);
                check_all(S);
                dt_schedule_free(S);
                n += 2;
                for (int v = 2; v <= 4 && m % p == 0; v++) {
                    S = make(DT_SCHED_INTERLEAVED_1F1B, p, v, m, steps);
                    check_all(S);
                    dt_schedule_free(S);
                    n++;
                }
            }
    ck_assert_int_gt(n, 300);
}
END_TEST

/* Longer pipelines: the formulas hold up to p = 8, m = 24. */
START_TEST(test_larger)
{
    for (int p = 7; p <= 8; p++)
        for (int m = 1; m <= 24; m++) {
            dt_schedule *S = make(DT_SCHED_ZB_H1, p, 1, m, 1);
            check_all(S);
            dt_schedule_free(S);
            S = make(DT_SCHED_ZB_V, p, 2, m, 1);
            check_all(S);
            dt_schedule_free(S);
            if (m % p == 0) {
                S = make(DT_SCHED_INTERLEAVED_1F1B, p, 3, m, 1);
                check_all(S);
                dt_schedule_free(S);
            }
        }
    dt_schedule *S = make(DT_SCHED_ZB_V, 16, 2, 64, 2);
    check_contract(S);
    check_in_flight(S);
    dt_schedule_free(S);
}
END_TEST

/* Equal costs, m a multiple of p and >= 2p: 1f1b > interleaved-1f1b (v = 2) > zb-h1 > zb-v, exactly
 * (p-1)/(m+p-1), (p-1)/(2m+p-1), (p-1)/(3m+p-1), (p-1)/(6m+p-1). */
START_TEST(test_bubble_order)
{
    for (int p = 2; p <= 6; p++)
        for (int m = 2 * p; m <= 4 * p; m += p) {
            const double f = dt_schedule_bubble_ideal(DT_SCHED_1F1B, p, m, 1);
            const double il = dt_schedule_bubble_ideal(DT_SCHED_INTERLEAVED_1F1B, p, m, 1);
            const double h1 = dt_schedule_bubble_ideal(DT_SCHED_ZB_H1, p, m, 1);
            const double zv = dt_schedule_bubble_ideal(DT_SCHED_ZB_V, p, m, 1);
            ck_assert_double_eq_tol(f, (double)(p - 1) / (m + p - 1), 1e-15);
            ck_assert_double_eq_tol(il, (double)(p - 1) / (2 * m + p - 1), 1e-15);
            ck_assert_double_eq_tol(h1, (double)(p - 1) / (3 * m + p - 1), 1e-15);
            ck_assert_double_eq_tol(zv, (double)(p - 1) / (6 * m + p - 1), 1e-15);
            ck_assert(f > il && il > h1 && h1 > zv && zv > 0);
        }
    /* below the steady state the exact values: zb-h1 m < p, zb-v m < (3p-1)/2 */
    ck_assert_double_eq_tol(dt_schedule_bubble_ideal(DT_SCHED_ZB_H1, 4, 1, 1), 6.0 / 9.0, 1e-15);
    ck_assert_double_eq_tol(dt_schedule_bubble_ideal(DT_SCHED_ZB_V, 4, 4, 1), 6.0 / 30.0, 1e-15);
    ck_assert_double_eq_tol(dt_schedule_bubble_ideal_chunks(DT_SCHED_INTERLEAVED_1F1B, 4, 3, 8, 1), 3.0 / 27.0, 1e-15);
    ck_assert_str_eq(dt_schedule_bubble_formula_text(DT_SCHED_INTERLEAVED_1F1B), "(p-1)/(v*m+p-1)");
    ck_assert_str_eq(dt_schedule_bubble_formula_text(DT_SCHED_ZB_H1), "I/(3m+I), I = max(p-1, 2p-m-1)");
    ck_assert_str_eq(dt_schedule_bubble_formula_text(DT_SCHED_ZB_V), "I/(6m+I), I = max(p-1, 4p-2m-2)");
    ck_assert_int_eq(dt_sched_default_chunks(DT_SCHED_INTERLEAVED_1F1B), 2);
    ck_assert_int_eq(dt_sched_default_chunks(DT_SCHED_ZB_V), 2);
    ck_assert_int_eq(dt_sched_default_chunks(DT_SCHED_ZB_H1), 1);
    ck_assert_int_eq(dt_sched_default_chunks(DT_SCHED_1F1B), 1);
}
END_TEST

/* Other costs: zb-h1 idles (p-1)(F+B-min(F,B,W)) per device (the paper's (p-1)(F+B-W) when W is the
 * smallest), interleaved-1f1b (p-1)(f+b) with per-chunk costs f, b, whatever their ratio. */
START_TEST(test_bubble_costs)
{
    static const costs zb[] = {{1, 0, 1, 1}, {2, 0, 2, 1}, {1, 0, 1, 2}, {2, 0, 3, 1}, {1, 0, 2, 3}, {3, 0, 1, 1}};
    for (size_t c = 0; c < sizeof zb / sizeof zb[0]; c++)
        for (int p = 2; p <= 6; p++)
            for (int m = p; m <= 12; m++) {
                dt_schedule *S = make(DT_SCHED_ZB_H1, p, 1, m, 1);
                long long makespan, busy[MAXP];
                ck_assert_int_eq(interpret(S, &zb[c], &makespan, busy), 0);
                long long lo = zb[c].f < zb[c].bi ? zb[c].f : zb[c].bi;
                lo = lo < zb[c].w ? lo : zb[c].w;
                for (int r = 0; r < p; r++)
                    REQUIRE(makespan - busy[r] == (p - 1) * (zb[c].f + zb[c].bi - lo),
                            "F %lld B %lld W %lld device %d: idle %lld", zb[c].f, zb[c].bi, zb[c].w, r,
                            makespan - busy[r]);
                dt_schedule_free(S);
            }
    static const costs il[] = {{1, 3, 0, 0}, {2, 1, 0, 0}, {1, 1, 0, 0}};
    for (size_t c = 0; c < sizeof il / sizeof il[0]; c++)
        for (int p = 2; p <= 5; p++)
            for (int v = 2; v <= 3; v++)
                for (int m = p; m <= 3 * p; m += p) {
                    dt_schedule *S = make(DT_SCHED_INTERLEAVED_1F1B, p, v, m, 1);
                    long long makespan, busy[MAXP];
                    ck_assert_int_eq(interpret(S, &il[c], &makespan, busy), 0);
                    for (int r = 0; r < p; r++)
                        REQUIRE(makespan - busy[r] == (p - 1) * (il[c].f + il[c].b), "device %d: idle %lld", r,
                                makespan - busy[r]);
                    dt_schedule_free(S);
                }
}
END_TEST

/* Message ids (dt_sched_message_id): every send's id is the id of the
 * receive that depends on it, ids are distinct over the whole run and
 * over the pipelines, hand-overs between a device's chunks have none. */
START_TEST(test_message_ids)
{
    static const dt_sched_kind kinds[] = {DT_SCHED_GPIPE, DT_SCHED_1F1B, DT_SCHED_PIPEDREAM, DT_SCHED_INTERLEAVED_1F1B,
                                          DT_SCHED_ZB_H1, DT_SCHED_ZB_V};
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++)
        for (int p = 1; p <= 4; p++) {
            const dt_sched_kind k = kinds[ki];
            const int v = dt_sched_default_chunks(k), m = k == DT_SCHED_INTERLEAVED_1F1B ? 2 * p : 5;
            dt_schedule *S = make(k, p, v, m, 2);
            enum { R = 3 }; /* pipelines */
            size_t n = 0, cap = 0;
            int64_t *ids = NULL;
            for (int d = 0; d < p; d++)
                for (int i = 0; i < S->count[d]; i++) {
                    const dt_sched_instr *in = &S->instr[d][i];
                    const int msg = in->op == DT_SCHED_SEND_ACT || in->op == DT_SCHED_RECV_ACT ||
                                    in->op == DT_SCHED_SEND_GRAD || in->op == DT_SCHED_RECV_GRAD;
                    for (int pl = 0; pl < R; pl++) {
                        const int64_t id = dt_sched_message_id(S, d, in, pl, R);
                        REQUIRE((id >= 0) == (msg && in->peer != d), "device %d instr %d (%s): id %lld", d, i,
                                dt_sched_op_name(in->op), (long long)id);
                        if (id < 0) continue;
                        REQUIRE(id % R == pl, "id %lld of pipeline %d", (long long)id, pl);
                        if (in->op == DT_SCHED_RECV_ACT || in->op == DT_SCHED_RECV_GRAD)
                            for (int j = 0; j < in->ndeps; j++) {
                                const dt_sched_dep *dp = &in->deps[j];
                                const dt_sched_instr *snd = &S->instr[dp->stage][dp->index];
                                if (dp->stage == d) continue;
                                REQUIRE(dt_sched_message_id(S, dp->stage, snd, pl, R) == id,
                                        "device %d instr %d: receive %lld, its send %lld", d, i, (long long)id,
                                        (long long)dt_sched_message_id(S, dp->stage, snd, pl, R));
                            }
                        else { /* each send once: the receives repeat the ids */
                            if (n == cap) ids = realloc(ids, (cap = cap ? 2 * cap : 256) * sizeof *ids);
                            ids[n++] = id;
                        }
                    }
                }
            for (size_t a = 0; a < n; a++)
                for (size_t b = a + 1; b < n; b++) REQUIRE(ids[a] != ids[b], "id %lld twice", (long long)ids[a]);
            free(ids);
            dt_sched_instr bad = S->count[0] ? S->instr[0][0] : (dt_sched_instr){0};
            REQUIRE(dt_sched_message_id(S, p, &bad, 0, 1) == -1 && dt_sched_message_id(S, 0, &bad, 1, 1) == -1,
                    "bad arguments");
            dt_schedule_free(S);
        }
}
END_TEST

START_TEST(test_errors)
{
    dt_schedule sentinel, *S = &sentinel;
    ck_assert_int_eq(dt_schedule_make_chunks(DT_SCHED_INTERLEAVED_1F1B, 4, 2, 6, 1, &S), DT_ERR_INVALID);
    ck_assert_ptr_null(S);
    ck_assert_str_eq(dt_last_error(), "micro-batches per step 6: interleaved-1f1b needs a multiple of "
                                      "--pipeline-model-parallel-size 4 (its forwards take the chunks in groups of "
                                      "p micro-batches, as Megatron-LM's)");
    ck_assert_int_eq(dt_schedule_make_chunks(DT_SCHED_INTERLEAVED_1F1B, 2, 1, 4, 1, &S), DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(), "--virtual-pipeline-model-parallel-size 1: interleaved-1f1b needs at least 2 "
                                      "model chunks per stage");
    ck_assert_int_eq(dt_schedule_make_chunks(DT_SCHED_ZB_V, 2, 3, 4, 1, &S), DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(),
                     "--virtual-pipeline-model-parallel-size 3: zb-v places exactly 2 model chunks per stage");
    ck_assert_int_eq(dt_schedule_make_chunks(DT_SCHED_ZB_H1, 2, 2, 4, 1, &S), DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(), "--virtual-pipeline-model-parallel-size 2: --pipeline-schedule zb-h1 has one "
                                      "model chunk per stage (interleaved-1f1b and zb-v have more)");
    ck_assert_int_eq(dt_schedule_check(DT_SCHED_ZB_V, 2, 2, 1, 1), DT_OK);

    int v = -1;
    ck_dt(dt_sched_chunks_from_flags(DT_SCHED_INTERLEAVED_1F1B, 2, 8, 0, 0, &v));
    ck_assert_int_eq(v, 2);
    ck_dt(dt_sched_chunks_from_flags(DT_SCHED_INTERLEAVED_1F1B, 2, 8, 4, 0, &v));
    ck_assert_int_eq(v, 4);
    ck_dt(dt_sched_chunks_from_flags(DT_SCHED_INTERLEAVED_1F1B, 2, 8, 0, 1, &v)); /* 8 / (2 x 1) */
    ck_assert_int_eq(v, 4);
    ck_dt(dt_sched_chunks_from_flags(DT_SCHED_INTERLEAVED_1F1B, 2, 8, 2, 2, &v));
    ck_assert_int_eq(v, 2);
    ck_dt(dt_sched_chunks_from_flags(DT_SCHED_ZB_V, 3, 6, 0, 0, &v));
    ck_assert_int_eq(v, 2);
    ck_dt(dt_sched_chunks_from_flags(DT_SCHED_1F1B, 3, 5, 0, 0, &v));
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(dt_sched_chunks_from_flags(DT_SCHED_INTERLEAVED_1F1B, 2, 8, 4, 2, &v), DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(), "--virtual-pipeline-model-parallel-size 4 and "
                                      "--num-layers-per-virtual-pipeline-stage 2 disagree: 8 blocks over 2 stages of "
                                      "2 blocks a chunk make 2 chunks per stage");
    ck_assert_int_eq(dt_sched_chunks_from_flags(DT_SCHED_INTERLEAVED_1F1B, 2, 6, 2, 0, &v), DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(), "--num-layers 6: --pipeline-schedule interleaved-1f1b with 2 stages x 2 chunks "
                                      "needs a multiple of 4 (every virtual stage holds the same number of blocks)");
    ck_assert_int_eq(dt_sched_chunks_from_flags(DT_SCHED_INTERLEAVED_1F1B, 2, 6, 0, 4, &v), DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(), "--num-layers-per-virtual-pipeline-stage 4: --num-layers 6 is not a multiple "
                                      "of --pipeline-model-parallel-size x it = 8");
    ck_assert_int_eq(dt_sched_chunks_from_flags(DT_SCHED_INTERLEAVED_1F1B, 2, 6, 0, 3, &v), DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(), "--num-layers-per-virtual-pipeline-stage 3: interleaved-1f1b needs at least 2 "
                                      "model chunks per stage (got 1)");
    ck_assert_int_eq(dt_sched_chunks_from_flags(DT_SCHED_1F1B, 2, 8, 2, 0, &v), DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(), "--virtual-pipeline-model-parallel-size 2: --pipeline-schedule 1f1b has one "
                                      "model chunk per stage (interleaved-1f1b and zb-v have more)");
    ck_assert_int_eq(dt_sched_chunks_from_flags(DT_SCHED_ZB_V, 2, 8, 4, 0, &v), DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(), "--virtual-pipeline-model-parallel-size 4: zb-v places exactly 2 model chunks "
                                      "per stage, in a V (got 4)");
    v = 7;
    ck_assert_int_eq(dt_sched_chunks_from_flags(DT_SCHED_ZB_V, 2, 6, 0, 0, &v), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--num-layers 6: --pipeline-schedule zb-v"));
    ck_assert_int_eq(v, 7); /* untouched on failure */
}
END_TEST

static Suite *schedule_zb_suite(void)
{
    Suite *s = suite_create("schedule_zb");
    TCase *tc = tcase_create("lists");
    tcase_add_test(tc, test_hand_interleaved);
    tcase_add_test(tc, test_hand_zbh1);
    tcase_add_test(tc, test_hand_zbv);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_message_ids);
    suite_add_tcase(s, tc);
    tc = tcase_create("invariants");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_invariants);
    tcase_add_test(tc, test_larger);
    tcase_add_test(tc, test_bubble_order);
    tcase_add_test(tc, test_bubble_costs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(schedule_zb_suite()); }
