/* check_schedule.c: the pipeline schedule generator (dt_schedule.h).
 *
 * Every kind is generated for p = 1..6 stages, m = 1..12 micro-batches and
 * 1..3 steps, and each schedule is checked against the header's contract
 * from its instruction lists alone (nothing here reuses the generator's
 * code):
 *   - structure: each micro-batch is forwarded and backwarded exactly once
 *     per stage, F before B; RECV_ACT right before FORWARD (s > 0), SEND_ACT
 *     right after (s < p-1), likewise RECV_GRAD / SEND_GRAD around BACKWARD;
 *     mb, step, version and deps fields as documented; the compute order is
 *     the kind's (warm-up / steady / cool-down, with the phase of each);
 *   - links: the sends of stage s and the receives of its neighbour match
 *     one to one and in the same order;
 *   - deps: RECV_ACT on the neighbour's SEND_ACT of the same mb, RECV_GRAD
 *     on SEND_GRAD, BACKWARD on the FORWARD of the same stage and mb;
 *   - in flight: recounted and equal to max_in_flight (gpipe m, 1f1b
 *     min(p-s, m), pipedream min(p-s, N));
 *   - versions: gpipe/1f1b use t in step t with one OPT per step at its
 *     end; pipedream F uses the current version, B its F's, one OPT after
 *     every B; vsync uses stage 0's version on every stage;
 *   - stash: a version used while a newer one is current is stashed
 *     (STASH right when it becomes current), dropped right after its last
 *     use, never used after; no needless stash; at most p-s alive for
 *     pipedream (p for vsync);
 *   - an interpreter that runs every stage's list round-robin, each stage
 *     advancing while its next instruction's dependencies are done (blocking
 *     receives, non-blocking sends), finishes; with unit costs (forward 1,
 *     backward 2, communication and the rest 0) the idle share of every
 *     stage equals (p-1)/(m+p-1) exactly for gpipe and 1f1b, and
 *     (p-1)/(N+p-1) for the pipedream kinds (one fill and one drain).
 * The printed form of small cases is compared verbatim. */
#include <string.h>

#include "testutil.h"

static char ctx[160]; /* which schedule is being checked, for messages */

/* Check records every passing ck_assert; REQUIRE calls it only on failure. */
#define REQUIRE(cond, fmt, ...)                                    \
    do {                                                           \
        if (!(cond)) ck_abort_msg("%s: " fmt, ctx, ##__VA_ARGS__); \
    } while (0)

static const dt_sched_kind KINDS[] = {DT_SCHED_GPIPE, DT_SCHED_1F1B, DT_SCHED_PIPEDREAM, DT_SCHED_PIPEDREAM_VSYNC};
#define NKINDS 4

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }
static int is_async(const dt_schedule *S)
{
    return S->kind == DT_SCHED_PIPEDREAM || S->kind == DT_SCHED_PIPEDREAM_VSYNC;
}
static int is_send_or_drop(dt_sched_op op)
{
    return op == DT_SCHED_SEND_ACT || op == DT_SCHED_SEND_GRAD || op == DT_SCHED_DROP;
}

static dt_schedule *make(dt_sched_kind k, int p, int m, int steps)
{
    snprintf(ctx, sizeof ctx, "%s p=%d m=%d steps=%d", dt_sched_kind_name(k), p, m, steps);
    dt_schedule *S = NULL;
    ck_dt(dt_schedule_make(k, p, m, steps, &S));
    ck_assert_ptr_nonnull(S);
    return S;
}

/* Fields, exactly-once F and B, F before B, receives and sends next to their
 * compute, and dependencies. */
static void check_structure(const dt_schedule *S)
{
    const int p = S->p, m = S->m, N = m * S->steps;
    REQUIRE(S->p >= 1 && S->count && S->instr && S->max_in_flight && S->max_versions, "bad header");
    REQUIRE(S->v == 1 && S->vstage, "v %d", S->v);
    for (int s = 0; s < p; s++) REQUIRE(S->vstage[s] == s, "vstage[%d] = %d", s, S->vstage[s]);
    int *fpos = malloc((size_t)N * sizeof *fpos), *bpos = malloc((size_t)N * sizeof *bpos);
    for (int s = 0; s < p; s++) {
        const dt_sched_instr *L = S->instr[s];
        const int n = S->count[s];
        for (int i = 0; i < N; i++) fpos[i] = bpos[i] = -1;
        int nra = 0, nsa = 0, nrg = 0, nsg = 0;
        for (int i = 0; i < n; i++) {
            const dt_sched_instr *in = &L[i];
            dt_sched_op op = in->op;
            REQUIRE((int)op >= DT_SCHED_RECV_ACT && (int)op <= DT_SCHED_DROP, "stage %d [%d]: op %d", s, i, (int)op);
            REQUIRE((int)in->phase >= DT_SCHED_WARMUP && (int)in->phase <= DT_SCHED_COOLDOWN, "stage %d [%d]: phase", s,
                    i);
            REQUIRE(in->chunk == 0, "stage %d [%d]: chunk %d", s, i, in->chunk);
            {
                const int peer = op == DT_SCHED_RECV_ACT || op == DT_SCHED_SEND_GRAD   ? s - 1
                                 : op == DT_SCHED_SEND_ACT || op == DT_SCHED_RECV_GRAD ? s + 1
                                                                                       : -1;
                REQUIRE(in->peer == peer, "stage %d [%d] %s: peer %d, expected %d", s, i, dt_sched_op_name(op),
                        in->peer, peer);
            }
            int has_mb = op <= DT_SCHED_SEND_GRAD;
            if (has_mb) {
                REQUIRE(in->mb >= 0 && in->mb < N, "stage %d [%d] %s: mb %d", s, i, dt_sched_op_name(op), in->mb);
                REQUIRE(in->step == in->mb / m, "stage %d [%d] %s mb %d: step %d", s, i, dt_sched_op_name(op), in->mb,
                        in->step);
            } else {
                REQUIRE(in->mb == -1, "stage %d [%d] %s: mb %d, expected -1", s, i, dt_sched_op_name(op), in->mb);
                REQUIRE(in->step >= 0 && in->step < S->steps, "stage %d [%d]: step %d", s, i, in->step);
            }
            int is_comm = op == DT_SCHED_RECV_ACT || op == DT_SCHED_SEND_ACT || op == DT_SCHED_RECV_GRAD ||
                          op == DT_SCHED_SEND_GRAD;
            if (is_comm) REQUIRE(in->version == -1, "stage %d [%d]: comm version %d", s, i, in->version);
            else REQUIRE(in->version >= 0, "stage %d [%d] %s: version %d", s, i, dt_sched_op_name(op), in->version);
            const dt_sched_instr *prev = i > 0 ? &L[i - 1] : NULL, *next = i + 1 < n ? &L[i + 1] : NULL;
            int want_deps = 0;
            switch (op) {
            case DT_SCHED_RECV_ACT:
                nra++;
                REQUIRE(s > 0, "stage 0 receives an activation");
                REQUIRE(next && next->op == DT_SCHED_FORWARD && next->mb == in->mb,
                        "stage %d [%d]: RECV_ACT %d not right before its FORWARD", s, i, in->mb);
                want_deps = 1;
                REQUIRE(in->ndeps == 1 && in->deps[0].stage == s - 1 && in->deps[0].index >= 0 &&
                            in->deps[0].index < S->count[s - 1],
                        "stage %d [%d]: RECV_ACT deps", s, i);
                {
                    const dt_sched_instr *d = &S->instr[s - 1][in->deps[0].index];
                    REQUIRE(d->op == DT_SCHED_SEND_ACT && d->mb == in->mb,
                            "stage %d [%d]: RECV_ACT %d depends on %s %d", s, i, in->mb, dt_sched_op_name(d->op),
                            d->mb);
                }
                break;
            case DT_SCHED_RECV_GRAD:
                nrg++;
                REQUIRE(s < p - 1, "the last stage receives a gradient");
                REQUIRE(next && next->op == DT_SCHED_BACKWARD && next->mb == in->mb,
                        "stage %d [%d]: RECV_GRAD %d not right before its BACKWARD", s, i, in->mb);
                want_deps = 1;
                REQUIRE(in->ndeps == 1 && in->deps[0].stage == s + 1 && in->deps[0].index >= 0 &&
                            in->deps[0].index < S->count[s + 1],
                        "stage %d [%d]: RECV_GRAD deps", s, i);
                {
                    const dt_sched_instr *d = &S->instr[s + 1][in->deps[0].index];
                    REQUIRE(d->op == DT_SCHED_SEND_GRAD && d->mb == in->mb,
                            "stage %d [%d]: RECV_GRAD %d depends on %s %d", s, i, in->mb, dt_sched_op_name(d->op),
                            d->mb);
                }
                break;
            case DT_SCHED_SEND_ACT:
                nsa++;
                REQUIRE(s < p - 1, "the last stage sends an activation");
                REQUIRE(prev && prev->op == DT_SCHED_FORWARD && prev->mb == in->mb,
                        "stage %d [%d]: SEND_ACT %d not right after its FORWARD", s, i, in->mb);
                break;
            case DT_SCHED_SEND_GRAD:
                nsg++;
                REQUIRE(s > 0, "stage 0 sends a gradient");
                REQUIRE(prev && prev->op == DT_SCHED_BACKWARD && prev->mb == in->mb,
                        "stage %d [%d]: SEND_GRAD %d not right after its BACKWARD", s, i, in->mb);
                break;
            case DT_SCHED_FORWARD:
                REQUIRE(fpos[in->mb] < 0, "stage %d: mb %d forwarded twice", s, in->mb);
                fpos[in->mb] = i;
                if (s > 0)
                    REQUIRE(prev && prev->op == DT_SCHED_RECV_ACT, "stage %d [%d]: FORWARD without RECV_ACT", s, i);
                if (s < p - 1)
                    REQUIRE(next && next->op == DT_SCHED_SEND_ACT, "stage %d [%d]: FORWARD without SEND_ACT", s, i);
                break;
            case DT_SCHED_BACKWARD:
                REQUIRE(bpos[in->mb] < 0, "stage %d: mb %d backwarded twice", s, in->mb);
                REQUIRE(fpos[in->mb] >= 0, "stage %d: BACKWARD %d before its FORWARD", s, in->mb);
                bpos[in->mb] = i;
                if (s < p - 1)
                    REQUIRE(prev && prev->op == DT_SCHED_RECV_GRAD, "stage %d [%d]: BACKWARD without RECV_GRAD", s, i);
                if (s > 0)
                    REQUIRE(next && next->op == DT_SCHED_SEND_GRAD, "stage %d [%d]: BACKWARD without SEND_GRAD", s, i);
                want_deps = 1;
                REQUIRE(in->ndeps == 1 && in->deps[0].stage == s && in->deps[0].index == fpos[in->mb],
                        "stage %d [%d]: BACKWARD %d does not depend on its FORWARD", s, i, in->mb);
                break;
            default: break;
            }
            if (!want_deps) REQUIRE(in->ndeps == 0, "stage %d [%d] %s: %d deps", s, i, dt_sched_op_name(op), in->ndeps);
        }
        for (int mb = 0; mb < N; mb++)
            REQUIRE(fpos[mb] >= 0 && bpos[mb] > fpos[mb], "stage %d: mb %d not forwarded and backwarded", s, mb);
        REQUIRE(nra == (s > 0 ? N : 0) && nsg == (s > 0 ? N : 0), "stage %d: %d RECV_ACT, %d SEND_GRAD", s, nra, nsg);
        REQUIRE(nsa == (s < p - 1 ? N : 0) && nrg == (s < p - 1 ? N : 0), "stage %d: %d SEND_ACT, %d RECV_GRAD", s, nsa,
                nrg);
    }
    free(fpos);
    free(bpos);
}

/* The micro-batches of `op` on stage s, in list order. */
static int collect(const dt_schedule *S, int s, dt_sched_op op, int *out)
{
    int k = 0;
    for (int i = 0; i < S->count[s]; i++)
        if (S->instr[s][i].op == op) out[k++] = S->instr[s][i].mb;
    return k;
}

static void check_links(const dt_schedule *S)
{
    int N = S->m * S->steps, *a = malloc((size_t)N * sizeof *a), *b = malloc((size_t)N * sizeof *b);
    for (int s = 0; s + 1 < S->p; s++) {
        int na = collect(S, s, DT_SCHED_SEND_ACT, a), nb = collect(S, s + 1, DT_SCHED_RECV_ACT, b);
        REQUIRE(na == N && nb == N, "link %d->%d: %d sends, %d receives", s, s + 1, na, nb);
        for (int i = 0; i < N; i++)
            REQUIRE(a[i] == b[i], "link %d->%d: activation %d sent as mb %d, received as mb %d", s, s + 1, i, a[i],
                    b[i]);
        na = collect(S, s + 1, DT_SCHED_SEND_GRAD, a);
        nb = collect(S, s, DT_SCHED_RECV_GRAD, b);
        REQUIRE(na == N && nb == N, "link %d->%d: %d sends, %d receives", s + 1, s, na, nb);
        for (int i = 0; i < N; i++)
            REQUIRE(a[i] == b[i], "link %d->%d: gradient %d sent as mb %d, received as mb %d", s + 1, s, i, a[i], b[i]);
    }
    free(a);
    free(b);
}

/* The compute order (F, B, OPT with their phases) the header describes, as
 * (op, mb, phase) triples, compared with the list without its
 * communication and STASH/DROP. */
typedef struct {
    dt_sched_op op;
    int mb;
    dt_sched_phase phase;
} citem;

static void check_order(const dt_schedule *S)
{
    const int p = S->p, m = S->m, N = m * S->steps;
    citem *want = malloc((size_t)(3 * N + S->steps) * sizeof *want);
    for (int s = 0; s < p; s++) {
        int n = 0;
#define ADD(op_, mb_, ph_) (want[n++] = (citem){(op_), (mb_), (ph_)})
        if (!is_async(S)) {
            int w = S->kind == DT_SCHED_GPIPE ? m : imin(p - 1 - s, m);
            for (int t = 0; t < S->steps; t++) {
                int f = t * m, b = t * m;
                for (int i = 0; i < w; i++) ADD(DT_SCHED_FORWARD, f++, DT_SCHED_WARMUP);
                while (f < (t + 1) * m) {
                    ADD(DT_SCHED_FORWARD, f++, DT_SCHED_STEADY);
                    ADD(DT_SCHED_BACKWARD, b++, DT_SCHED_STEADY);
                }
                while (b < (t + 1) * m) ADD(DT_SCHED_BACKWARD, b++, DT_SCHED_COOLDOWN);
                ADD(DT_SCHED_OPTIM_STEP, -1, DT_SCHED_COOLDOWN);
            }
        } else {
            int w = imin(p - 1 - s, N), f = 0, b = 0;
            for (int i = 0; i < w; i++) ADD(DT_SCHED_FORWARD, f++, DT_SCHED_WARMUP);
            while (f < N) {
                ADD(DT_SCHED_FORWARD, f++, DT_SCHED_STEADY);
                ADD(DT_SCHED_BACKWARD, b++, DT_SCHED_STEADY);
                ADD(DT_SCHED_OPTIM_STEP, -1, DT_SCHED_STEADY);
            }
            while (b < N) {
                ADD(DT_SCHED_BACKWARD, b++, DT_SCHED_COOLDOWN);
                ADD(DT_SCHED_OPTIM_STEP, -1, DT_SCHED_COOLDOWN);
            }
        }
#undef ADD
        int k = 0;
        for (int i = 0; i < S->count[s]; i++) {
            const dt_sched_instr *in = &S->instr[s][i];
            if (in->op != DT_SCHED_FORWARD && in->op != DT_SCHED_BACKWARD && in->op != DT_SCHED_OPTIM_STEP) {
                /* communication and STASH/DROP share the phase of what they surround */
                continue;
            }
            REQUIRE(k < n, "stage %d: more compute than expected", s);
            REQUIRE(in->op == want[k].op && in->mb == want[k].mb && in->phase == want[k].phase,
                    "stage %d, compute item %d: %s %d phase %d, expected %s %d phase %d", s, k,
                    dt_sched_op_name(in->op), in->mb, (int)in->phase, dt_sched_op_name(want[k].op), want[k].mb,
                    (int)want[k].phase);
            k++;
        }
        REQUIRE(k == n, "stage %d: %d compute items, expected %d", s, k, n);
        /* receives and sends carry the phase of their compute */
        for (int i = 0; i < S->count[s]; i++) {
            const dt_sched_instr *in = &S->instr[s][i];
            if (in->op == DT_SCHED_RECV_ACT || in->op == DT_SCHED_RECV_GRAD)
                REQUIRE(in->phase == S->instr[s][i + 1].phase, "stage %d [%d]: receive phase", s, i);
            if (in->op == DT_SCHED_SEND_ACT || in->op == DT_SCHED_SEND_GRAD)
                REQUIRE(in->phase == S->instr[s][i - 1].phase, "stage %d [%d]: send phase", s, i);
        }
    }
    free(want);
}

/* In-flight micro-batches and the distinct versions they use. */
static void check_in_flight(const dt_schedule *S)
{
    const int p = S->p, m = S->m, N = m * S->steps;
    int *vcount = calloc((size_t)N + 2, sizeof *vcount), *fver = malloc((size_t)N * sizeof *fver);
    for (int s = 0; s < p; s++) {
        int inflight = 0, distinct = 0, max_if = 0, max_v = 0;
        for (int i = 0; i < S->count[s]; i++) {
            const dt_sched_instr *in = &S->instr[s][i];
            if (in->op == DT_SCHED_FORWARD) {
                REQUIRE(in->version <= N, "stage %d: version %d", s, in->version);
                fver[in->mb] = in->version;
                inflight++;
                if (vcount[in->version]++ == 0) distinct++;
                max_if = imax(max_if, inflight);
                max_v = imax(max_v, distinct);
            } else if (in->op == DT_SCHED_BACKWARD) {
                inflight--;
                if (--vcount[fver[in->mb]] == 0) distinct--;
            }
        }
        REQUIRE(inflight == 0, "stage %d: %d micro-batches left in flight", s, inflight);
        REQUIRE(S->max_in_flight[s] == max_if, "stage %d: max_in_flight %d, counted %d", s, S->max_in_flight[s],
                max_if);
        REQUIRE(S->max_versions[s] == max_v, "stage %d: max_versions %d, counted %d", s, S->max_versions[s], max_v);
        int want_if = S->kind == DT_SCHED_GPIPE ? m : S->kind == DT_SCHED_1F1B ? imin(p - s, m) : imin(p - s, N);
        REQUIRE(max_if == want_if, "stage %d: %d in flight, expected %d", s, max_if, want_if);
        REQUIRE(max_v <= p - s, "stage %d: %d versions in flight, more than p-s", s, max_v);
        if (!is_async(S)) REQUIRE(max_v == 1, "stage %d: %d versions in flight", s, max_v);
        if (S->kind == DT_SCHED_PIPEDREAM) {
            /* F(w+j) has j..w+j in flight with versions max(0, k-w): min(j, w)+1 distinct */
            int w = imin(p - 1 - s, N), want = N > w ? imin(N - w, w + 1) : 1;
            REQUIRE(max_v == want, "stage %d: %d versions in flight, expected %d", s, max_v, want);
        }
    }
    free(vcount);
    free(fver);
}

/* Versions and optimizer steps. */
static void check_versions(const dt_schedule *S)
{
    const int p = S->p, m = S->m, N = m * S->steps;
    int *fver = malloc((size_t)p * N * sizeof *fver);
    for (int s = 0; s < p; s++) {
        const dt_sched_instr *L = S->instr[s];
        int cur = 0, opts = 0;
        for (int i = 0; i < S->count[s]; i++) {
            const dt_sched_instr *in = &L[i];
            if (!is_async(S)) {
                REQUIRE(in->op != DT_SCHED_STASH && in->op != DT_SCHED_DROP, "stage %d [%d]: %s in %s", s, i,
                        dt_sched_op_name(in->op), dt_sched_kind_name(S->kind));
                if (in->op == DT_SCHED_FORWARD || in->op == DT_SCHED_BACKWARD) {
                    REQUIRE(in->step == opts, "stage %d [%d]: mb %d of step %d runs after %d OPTs", s, i, in->mb,
                            in->step, opts);
                    REQUIRE(in->version == in->step, "stage %d [%d]: version %d in step %d", s, i, in->version,
                            in->step);
                }
                if (in->op == DT_SCHED_OPTIM_STEP) {
                    REQUIRE(in->step == opts && in->version == opts + 1, "stage %d [%d]: OPT step %d version %d", s, i,
                            in->step, in->version);
                    opts++;
                }
                continue;
            }
            switch (in->op) {
            case DT_SCHED_FORWARD:
                fver[s * N + in->mb] = in->version;
                if (S->kind == DT_SCHED_PIPEDREAM || s == 0)
                    REQUIRE(in->version == cur, "stage %d: F%d uses v%d, current is v%d", s, in->mb, in->version, cur);
                else {
                    REQUIRE(in->version == fver[in->mb], "stage %d: F%d uses v%d, stage 0 used v%d", s, in->mb,
                            in->version, fver[in->mb]);
                    REQUIRE(in->version <= cur, "stage %d: F%d uses v%d, which it has not made yet (current v%d)", s,
                            in->mb, in->version, cur);
                }
                break;
            case DT_SCHED_BACKWARD: {
                REQUIRE(in->version == fver[s * N + in->mb], "stage %d: B%d uses v%d, its forward v%d", s, in->mb,
                        in->version, fver[s * N + in->mb]);
                int j = i + 1;
                while (j < S->count[s] && is_send_or_drop(L[j].op)) j++;
                REQUIRE(j < S->count[s] && L[j].op == DT_SCHED_OPTIM_STEP, "stage %d: no OPT right after B%d", s,
                        in->mb);
                REQUIRE(L[j].step == in->step, "stage %d: OPT after B%d has step %d", s, in->mb, L[j].step);
                break;
            }
            case DT_SCHED_OPTIM_STEP: {
                int j = i - 1;
                while (j >= 0 && is_send_or_drop(L[j].op)) j--;
                REQUIRE(j >= 0 && L[j].op == DT_SCHED_BACKWARD, "stage %d [%d]: OPT not right after a BACKWARD", s, i);
                REQUIRE(in->version == cur + 1, "stage %d [%d]: OPT makes v%d after v%d", s, i, in->version, cur);
                cur = in->version;
                opts++;
                break;
            }
            default: break;
            }
        }
        REQUIRE(opts == (is_async(S) ? N : S->steps), "stage %d: %d OPTs", s, opts);
        if (!is_async(S)) REQUIRE(L[S->count[s] - 1].op == DT_SCHED_OPTIM_STEP, "stage %d: does not end with OPT", s);
    }
    free(fver);
}

/* STASH/DROP: replays each stage with the set of stashed copies. Returns
 * the most copies alive at once on stage s in *alive_out (may be NULL). */
static void check_stash(const dt_schedule *S, int *alive_out)
{
    const int p = S->p, N = S->m * S->steps, nv = N + 2;
    char *stashed = malloc((size_t)nv), *dropped = malloc((size_t)nv), *stale_use = malloc((size_t)nv);
    for (int s = 0; s < p; s++) {
        const dt_sched_instr *L = S->instr[s];
        memset(stashed, 0, (size_t)nv);
        memset(dropped, 0, (size_t)nv);
        memset(stale_use, 0, (size_t)nv);
        int cur = 0, alive = 0, max_alive = 0;
        for (int i = 0; i < S->count[s]; i++) {
            const dt_sched_instr *in = &L[i];
            int v = in->version;
            switch (in->op) {
            case DT_SCHED_STASH:
                REQUIRE(v == cur, "stage %d [%d]: STASH v%d while v%d is current", s, i, v, cur);
                REQUIRE(!stashed[v] && !dropped[v], "stage %d [%d]: v%d stashed twice", s, i, v);
                if (v == 0) REQUIRE(i == 0, "stage %d: STASH v0 at %d, not at the start", s, i);
                else
                    REQUIRE(i > 0 && L[i - 1].op == DT_SCHED_OPTIM_STEP && L[i - 1].version == v,
                            "stage %d [%d]: STASH v%d not right after the OPT that makes it", s, i, v);
                stashed[v] = 1;
                max_alive = imax(max_alive, ++alive);
                break;
            case DT_SCHED_DROP: {
                REQUIRE(stashed[v], "stage %d [%d]: DROP v%d, which is not stashed", s, i, v);
                int j = i - 1;
                while (j >= 0 && is_send_or_drop(L[j].op)) j--;
                REQUIRE(j >= 0 && (L[j].op == DT_SCHED_FORWARD || L[j].op == DT_SCHED_BACKWARD) && L[j].version == v,
                        "stage %d [%d]: DROP v%d not right after a use of v%d", s, i, v, v);
                stashed[v] = 0;
                dropped[v] = 1;
                alive--;
                break;
            }
            case DT_SCHED_FORWARD:
            case DT_SCHED_BACKWARD:
                REQUIRE(!dropped[v], "stage %d [%d]: %s %d uses v%d after its DROP", s, i, dt_sched_op_name(in->op),
                        in->mb, v);
                REQUIRE(v <= cur, "stage %d [%d]: uses v%d before it exists (current v%d)", s, i, v, cur);
                if (v < cur) {
                    REQUIRE(stashed[v], "stage %d [%d]: %s %d uses v%d (current v%d), which is not stashed", s, i,
                            dt_sched_op_name(in->op), in->mb, v, cur);
                    stale_use[v] = 1;
                }
                break;
            case DT_SCHED_OPTIM_STEP: cur = in->version; break;
            default: break;
            }
        }
        REQUIRE(alive == 0, "stage %d: %d stashed copies never dropped", s, alive);
        for (int v = 0; v < nv; v++)
            if (dropped[v])
                REQUIRE(stale_use[v], "stage %d: v%d stashed but never used while a newer one is current", s, v);
        if (S->kind == DT_SCHED_PIPEDREAM)
            REQUIRE(max_alive <= p - s, "stage %d: %d stashed copies > p-s", s, max_alive);
        if (S->kind == DT_SCHED_PIPEDREAM_VSYNC)
            REQUIRE(max_alive <= p, "stage %d: %d stashed copies > p", s, max_alive);
        if (alive_out) alive_out[s] = max_alive;
    }
    free(stashed);
    free(dropped);
    free(stale_use);
}

/* Runs every stage's list round-robin: a stage advances while its next
 * instruction's dependencies are done (blocking receives; sends complete
 * when posted). Each instruction starts when the previous one of its stage
 * and its dependencies have finished and takes cost(op) time units.
 * Returns 0, the makespan and each stage's busy time; -1 on deadlock. */
static long long cost(dt_sched_op op) { return op == DT_SCHED_FORWARD ? 1 : op == DT_SCHED_BACKWARD ? 2 : 0; }

static int interpret(const dt_schedule *S, long long *makespan, long long *busy)
{
    const int p = S->p;
    int *pc = calloc((size_t)p, sizeof *pc);
    long long **fin = calloc((size_t)p, sizeof *fin), *clock = calloc((size_t)p, sizeof *clock);
    int total = 0, ran = 0;
    for (int s = 0; s < p; s++) {
        fin[s] = calloc((size_t)S->count[s] + 1, sizeof **fin);
        total += S->count[s];
        busy[s] = 0;
    }
    for (int progress = 1; progress && ran < total;) {
        progress = 0;
        for (int s = 0; s < p; s++)
            for (;;) {
                if (pc[s] == S->count[s]) break;
                const dt_sched_instr *in = &S->instr[s][pc[s]];
                long long start = clock[s];
                int ready = 1;
                for (int d = 0; d < in->ndeps; d++) {
                    dt_sched_dep dep = in->deps[d];
                    if (dep.index >= pc[dep.stage]) { /* not done yet */
                        ready = 0;
                        break;
                    }
                    if (fin[dep.stage][dep.index] > start) start = fin[dep.stage][dep.index];
                }
                if (!ready) break;
                clock[s] = start + cost(in->op);
                busy[s] += cost(in->op);
                fin[s][pc[s]++] = clock[s];
                ran++;
                progress = 1;
            }
    }
    *makespan = 0;
    for (int s = 0; s < p; s++) {
        if (clock[s] > *makespan) *makespan = clock[s];
        free(fin[s]);
    }
    free(fin);
    free(clock);
    free(pc);
    return ran == total ? 0 : -1;
}

static void check_run(const dt_schedule *S)
{
    const int p = S->p, m = S->m, N = m * S->steps;
    long long makespan, busy[16];
    REQUIRE(interpret(S, &makespan, busy) == 0, "the interpreter deadlocks");
    /* the idle share of every stage: (p-1)/(m+p-1) per step for the flushing
     * kinds, one fill and drain (p-1)/(N+p-1) for the pipedream kinds */
    long long mm = is_async(S) ? N : m;
    double formula = dt_schedule_bubble_formula(p, (int)mm);
    for (int s = 0; s < p; s++) {
        REQUIRE(busy[s] == 3LL * N, "stage %d: busy %lld", s, busy[s]);
        long long idle = makespan - busy[s];
        REQUIRE(idle * (mm + p - 1) == makespan * (p - 1),
                "stage %d: idle %lld of %lld, bubble %.6f, formula (p-1)/(m+p-1) = %.6f", s, idle, makespan,
                (double)idle / (double)makespan, formula);
        REQUIRE(fabs((double)idle / (double)makespan - formula) < 1e-12, "stage %d: bubble", s);
    }
}

static void check_all(const dt_schedule *S, int *alive)
{
    check_structure(S);
    check_links(S);
    check_order(S);
    check_in_flight(S);
    check_versions(S);
    check_stash(S, alive);
    check_run(S);
}

START_TEST(test_invariants)
{
    dt_sched_kind k = KINDS[_i];
    int n = 0;
    for (int p = 1; p <= 6; p++)
        for (int m = 1; m <= 12; m++)
            for (int steps = 1; steps <= 3; steps++) {
                dt_schedule *S = make(k, p, m, steps);
                check_all(S, NULL);
                dt_schedule_free(S);
                n++;
            }
    ck_assert_int_eq(n, 6 * 12 * 3);
}
END_TEST

START_TEST(test_larger)
{
    /* a few longer pipelines and runs */
    static const int cases[][3] = {{8, 32, 2}, {16, 5, 1}, {16, 64, 1}, {12, 3, 4}, {7, 1, 9}};
    for (int k = 0; k < NKINDS; k++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            dt_schedule *S = make(KINDS[k], cases[c][0], cases[c][1], cases[c][2]);
            check_all(S, NULL);
            dt_schedule_free(S);
        }
}
END_TEST

/* Stage s of pipedream keeps p-s stashed copies in the steady state; vsync
 * keeps p on every stage (the versions of its in-flight micro-batches plus
 * those stage 0 has made since, which micro-batches still to come will use). */
START_TEST(test_stash_depth)
{
    const int p = 4, m = 8;
    int alive[4];
    dt_schedule *S = make(DT_SCHED_PIPEDREAM, p, m, 2);
    check_stash(S, alive);
    for (int s = 0; s < p; s++) {
        ck_assert_int_eq(S->max_versions[s], p - s);
        ck_assert_int_eq(alive[s], s == p - 1 ? 0 : p - s); /* the last stage never stashes */
    }
    dt_schedule_free(S);
    S = make(DT_SCHED_PIPEDREAM_VSYNC, p, m, 2);
    check_stash(S, alive);
    for (int s = 0; s < p; s++) {
        ck_assert_int_eq(S->max_versions[s], p - s);
        ck_assert_int_eq(alive[s], p);
    }
    dt_schedule_free(S);
}
END_TEST

/* The interpreter must be able to fail: on stage 0 of gpipe p=2 m=1, move
 * the gradient receive before the activation send (a blocking receive
 * waiting on a message that needs our own send first). */
START_TEST(test_interpreter_detects_deadlock)
{
    dt_schedule *S = make(DT_SCHED_GPIPE, 2, 1, 1);
    dt_sched_instr *L = S->instr[0];
    ck_assert_int_eq(L[1].op, DT_SCHED_SEND_ACT);
    ck_assert_int_eq(L[2].op, DT_SCHED_RECV_GRAD);
    dt_sched_instr t = L[1];
    L[1] = L[2];
    L[2] = t;
    ck_assert_int_eq(S->instr[1][0].op, DT_SCHED_RECV_ACT);
    S->instr[1][0].deps[0].index = 2;
    long long makespan, busy[2];
    ck_assert_int_eq(interpret(S, &makespan, busy), -1);
    dt_schedule_free(S);
}
END_TEST

static void expect_format(dt_sched_kind k, int p, int m, int steps, int verbose, const char *want)
{
    dt_schedule *S = make(k, p, m, steps);
    char *got = dt_schedule_format(S, verbose);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got, want);
    free(got);
    dt_schedule_free(S);
}

START_TEST(test_format)
{
    expect_format(DT_SCHED_1F1B, 2, 3, 1, 0,
                  "schedule 1f1b: p=2 m=3 steps=1\n"
                  "stage 0: F0 F1 B0 F2 B1 B2 OPT\n"
                  "stage 1: F0 B0 F1 B1 F2 B2 OPT\n");
    expect_format(DT_SCHED_1F1B, 2, 3, 1, 1,
                  "schedule 1f1b: p=2 m=3 steps=1\n"
                  "stage 0: F0 SF0 F1 SF1 RB0 B0 F2 SF2 RB1 B1 RB2 B2 OPT\n"
                  "stage 1: RF0 F0 B0 SB0 RF1 F1 B1 SB1 RF2 F2 B2 SB2 OPT\n");
    expect_format(DT_SCHED_GPIPE, 2, 2, 2, 0,
                  "schedule gpipe: p=2 m=2 steps=2\n"
                  "stage 0: F0 F1 B0 B1 OPT F2 F3 B2 B3 OPT\n"
                  "stage 1: F0 F1 B0 B1 OPT F2 F3 B2 B3 OPT\n");
    expect_format(DT_SCHED_PIPEDREAM, 2, 2, 1, 1,
                  "schedule pipedream: p=2 m=2 steps=1\n"
                  "stage 0: STASH@v0 F0@v0 SF0 F1@v0 SF1 RB0 B0@v0 OPT RB1 B1@v0 DROP@v0 OPT\n"
                  "stage 1: RF0 F0@v0 B0@v0 SB0 OPT RF1 F1@v1 B1@v1 SB1 OPT\n");
    expect_format(DT_SCHED_PIPEDREAM_VSYNC, 2, 2, 1, 0,
                  "schedule pipedream-vsync: p=2 m=2 steps=1\n"
                  "stage 0: F0@v0 F1@v0 B0@v0 OPT B1@v0 OPT\n"
                  "stage 1: F0@v0 B0@v0 OPT F1@v0 B1@v0 OPT\n");
    expect_format(DT_SCHED_1F1B, 1, 2, 1, 1,
                  "schedule 1f1b: p=1 m=2 steps=1\n"
                  "stage 0: F0 B0 F1 B1 OPT\n");
    ck_assert_ptr_null(dt_schedule_format(NULL, 0));
}
END_TEST

START_TEST(test_names_and_errors)
{
    static const char *names[] = {"gpipe", "1f1b", "pipedream", "pipedream-vsync"};
    for (int k = 0; k < NKINDS; k++) {
        dt_sched_kind got;
        ck_dt(dt_sched_kind_parse(names[k], &got));
        ck_assert_int_eq(got, KINDS[k]);
        ck_assert_str_eq(dt_sched_kind_name(KINDS[k]), names[k]);
    }
    dt_sched_kind got = DT_SCHED_1F1B;
    ck_assert_int_eq(dt_sched_kind_parse("GPipe", &got), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--pipeline-schedule 'GPipe'"));
    ck_assert_ptr_null(strchr(dt_last_error(), '\n'));
    ck_assert_int_eq(got, DT_SCHED_1F1B);
    ck_assert_int_eq(dt_sched_kind_parse(NULL, &got), DT_ERR_INVALID);
    ck_assert_str_eq(dt_sched_kind_name((dt_sched_kind)7), "?");

    static const char *ops[] = {"recv_act",   "forward", "send_act", "recv_grad",  "backward",  "send_grad",
                                "optim_step", "stash",   "drop",     "backward_b", "backward_w"};
    for (int op = 0; op < 11; op++) ck_assert_str_eq(dt_sched_op_name((dt_sched_op)op), ops[op]);
    ck_assert_str_eq(dt_sched_op_name((dt_sched_op)11), "?");
    ck_assert_str_eq(dt_sched_op_name((dt_sched_op)-1), "?");
    /* the issue-22 kinds parse too, and the message lists every kind */
    static const char *more[] = {"interleaved-1f1b", "zb-h1", "zb-v"};
    static const dt_sched_kind more_k[] = {DT_SCHED_INTERLEAVED_1F1B, DT_SCHED_ZB_H1, DT_SCHED_ZB_V};
    for (int k = 0; k < 3; k++) {
        ck_dt(dt_sched_kind_parse(more[k], &got));
        ck_assert_int_eq(got, more_k[k]);
        ck_assert_str_eq(dt_sched_kind_name(more_k[k]), more[k]);
    }
    ck_assert_int_eq(dt_sched_kind_parse("zb-h2", &got), DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(), "--pipeline-schedule 'zb-h2': unknown schedule (expected gpipe, 1f1b, "
                                      "pipedream, pipedream-vsync, interleaved-1f1b, zb-h1 or zb-v)");

    dt_schedule sentinel, *S = &sentinel; /* set to NULL on failure */
    ck_assert_int_eq(dt_schedule_make(DT_SCHED_1F1B, 0, 4, 1, &S), DT_ERR_INVALID);
    ck_assert_ptr_null(S);
    ck_assert_str_eq(dt_last_error(), "--pipeline-model-parallel-size 0: expected at least 1 pipeline stage");
    ck_assert_int_eq(dt_schedule_make(DT_SCHED_1F1B, 2, 0, 1, &S), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "micro-batches per step 0"));
    ck_assert_int_eq(dt_schedule_make(DT_SCHED_1F1B, 2, 4, -1, &S), DT_ERR_INVALID);
    ck_assert_str_eq(dt_last_error(), "--train-iters -1: expected at least 1 step");
    ck_assert_int_eq(dt_schedule_make((dt_sched_kind)9, 2, 4, 1, &S), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--pipeline-schedule"));
    ck_assert_int_eq(dt_schedule_make(DT_SCHED_PIPEDREAM, 2, 1 << 20, 1 << 20, &S), DT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "too large"));
    dt_schedule_free(NULL);
}
END_TEST

START_TEST(test_bubble_formula)
{
    ck_assert_double_eq_tol(dt_schedule_bubble_formula(4, 8), 3.0 / 11.0, 1e-15);
    ck_assert_double_eq_tol(dt_schedule_bubble_formula(2, 1), 0.5, 1e-15);
    ck_assert_double_eq(dt_schedule_bubble_formula(1, 5), 0.0);
    /* flush schedules: per step; pipedream: filled and drained once per run */
    ck_assert_double_eq_tol(dt_schedule_bubble_ideal(DT_SCHED_1F1B, 4, 8, 20), 3.0 / 11.0, 1e-15);
    ck_assert_double_eq_tol(dt_schedule_bubble_ideal(DT_SCHED_GPIPE, 2, 4, 7), 0.2, 1e-15);
    ck_assert_double_eq_tol(dt_schedule_bubble_ideal(DT_SCHED_PIPEDREAM, 4, 4, 20), 3.0 / 83.0, 1e-15);
    ck_assert_double_eq_tol(dt_schedule_bubble_ideal(DT_SCHED_PIPEDREAM_VSYNC, 2, 4, 1), 0.2, 1e-15);
    ck_assert_str_eq(dt_schedule_bubble_formula_text(DT_SCHED_1F1B), "(p-1)/(m+p-1)");
    ck_assert_str_eq(dt_schedule_bubble_formula_text(DT_SCHED_PIPEDREAM), "(p-1)/(steps*m+p-1)");
}
END_TEST

static Suite *schedule_suite(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("invariants");
    tcase_add_loop_test(tc, test_invariants, 0, NKINDS);
    tcase_add_test(tc, test_larger);
    tcase_add_test(tc, test_stash_depth);
    tcase_add_test(tc, test_interpreter_detects_deadlock);
    suite_add_tcase(s, tc);
    tc = tcase_create("format");
    tcase_add_test(tc, test_format);
    tcase_add_test(tc, test_names_and_errors);
    tcase_add_test(tc, test_bubble_formula);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(schedule_suite()); }
