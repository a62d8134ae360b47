/* schedule.c: the pipeline schedule generator (dt_schedule.h). Pure data:
 * no I/O, no communication, no clocks.
 *
 * p stages, m micro-batches per step, `steps` steps, N = steps*m
 * micro-batches in all (mb = t*m + i). A schedule is built per stage in
 * three passes:
 *
 *   1. the compute order: a list of F(mb), B(mb) and OPT items
 *      (gpipe: per step F.. B.. OPT; 1f1b: per step w = min(p-1-s, m)
 *      warm-up forwards, m-w steady (F, B) pairs, w cool-down backwards, OPT;
 *      pipedream kinds: the 1f1b pattern once over all N micro-batches with
 *      w = min(p-1-s, N) and an OPT after every B);
 *   2. the weight versions: gpipe/1f1b use t in step t; pipedream F uses the
 *      stage's current version (OPTs before it) and B its F's; vsync gives
 *      every stage stage 0's F version of the micro-batch. Which versions
 *      must be stashed (used while a newer one is current) and where each is
 *      last used follow from that;
 *   3. the expansion into instructions a runtime with blocking receives and
 *      non-blocking sends runs in order:
 *        F(mb):  [RECV_ACT (s>0)]  FORWARD   [SEND_ACT (s<p-1)]
 *        B(mb):  [RECV_GRAD (s<p-1)] BACKWARD [SEND_GRAD (s>0)]
 *        OPT:    OPTIM_STEP [STASH v if v is stashed]
 *      with STASH 0 first when version 0 is stashed and DROP v right after
 *      the group of v's last use (so before the OPT that follows a B: a
 *      stage never holds more stashed copies than it needs).
 *
 * Dependencies (filled once every stage is expanded): RECV_ACT(s, mb) on
 * SEND_ACT(s-1, mb), RECV_GRAD(s, mb) on SEND_GRAD(s+1, mb), BACKWARD(s, mb)
 * on FORWARD(s, mb). Sends and receives of a link are in ascending mb order
 * on both sides: every stage forwards and backwards micro-batches in
 * ascending order.
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

static const char *const dt__sched_kind_names[] = {"gpipe", "1f1b", "pipedream", "pipedream-vsync"};
#define DT__SCHED_NKINDS ((int)(sizeof dt__sched_kind_names / sizeof dt__sched_kind_names[0]))

static const char *const dt__sched_op_names[] = {"recv_act",  "forward",    "send_act", "recv_grad", "backward",
                                                 "send_grad", "optim_step", "stash",    "drop"};
#define DT__SCHED_NOPS ((int)(sizeof dt__sched_op_names / sizeof dt__sched_op_names[0]))

dt_status dt_sched_kind_parse(const char *s, dt_sched_kind *out)
{
    for (int k = 0; s && k < DT__SCHED_NKINDS; k++)
        if (strcmp(s, dt__sched_kind_names[k]) == 0) {
            *out = (dt_sched_kind)k;
            return DT_OK;
        }
    return DT_FAIL(DT_ERR_INVALID,
                   "--pipeline-schedule '%s': unknown schedule (expected gpipe, 1f1b, pipedream or pipedream-vsync)",
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

double dt_schedule_bubble_formula(int p, int m)
{
    if (p < 1 || m < 1) return 0.0;
    return (double)(p - 1) / (double)(m + p - 1);
}

static int dt__sched_is_async(dt_sched_kind k) { return k == DT_SCHED_PIPEDREAM || k == DT_SCHED_PIPEDREAM_VSYNC; }

double dt_schedule_bubble_ideal(dt_sched_kind k, int p, int m, int steps)
{
    if (!dt__sched_is_async(k)) return dt_schedule_bubble_formula(p, m);
    if (steps < 1 || m < 1 || (long long)steps * m > INT_MAX) return 0.0;
    return dt_schedule_bubble_formula(p, steps * m);
}

const char *dt_schedule_bubble_formula_text(dt_sched_kind k)
{
    return dt__sched_is_async(k) ? "(p-1)/(steps*m+p-1)" : "(p-1)/(m+p-1)";
}

/* One item of pass 1: F, B or OPT (op is FORWARD, BACKWARD or OPTIM_STEP). */
typedef struct dt__item {
    dt_sched_op op;
    int mb, step, version;
    dt_sched_phase phase;
} dt__item;

/* Pass 1 and the pipedream versions of pass 2 for stage s. items holds
 * room for the largest list: steps*(2m+1) or 3N. Returns the item count. */
static int dt__compute_order(dt_sched_kind kind, int p, int m, int steps, int s, dt__item *it)
{
    int n = 0;
#define DT__ADD(op_, mb_, step_, ver_, ph_) (it[n++] = (dt__item){(op_), (mb_), (step_), (ver_), (ph_)})
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

/* A growable instruction list. */
typedef struct dt__ibuf {
    dt_sched_instr *v;
    int n, cap;
} dt__ibuf;

static int dt__emit(dt__ibuf *b, dt_sched_op op, int mb, int step, int version, dt_sched_phase phase)
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
    free(s->max_in_flight);
    free(s->max_versions);
    free(s);
}

dt_status dt_schedule_make(dt_sched_kind kind, int p, int m, int steps, dt_schedule **out)
{
    if (out) *out = NULL;
    if ((int)kind < 0 || (int)kind >= DT__SCHED_NKINDS)
        return DT_FAIL(
            DT_ERR_INVALID,
            "--pipeline-schedule: unknown schedule kind %d (expected gpipe, 1f1b, pipedream or pipedream-vsync)",
            (int)kind);
    if (p < 1)
        return DT_FAIL(DT_ERR_INVALID, "--pipeline-model-parallel-size %d: expected at least 1 pipeline stage", p);
    if (m < 1)
        return DT_FAIL(
            DT_ERR_INVALID,
            "micro-batches per step %d: expected at least 1 (global batch / (micro batch x data-parallel size))", m);
    if (steps < 1) return DT_FAIL(DT_ERR_INVALID, "--train-iters %d: expected at least 1 step", steps);
    /* every stage holds at most 7 instructions per micro-batch plus 2 per step
     * (pipedream: RECV, F, SEND, RECV, B, SEND, OPT, STASH, DROP) */
    if ((long long)steps * m > (INT_MAX - 64) / 16 || (long long)p * steps * m > (long long)INT_MAX / 4)
        return DT_FAIL(DT_ERR_INVALID,
                       "pipeline schedule: %d stages x %d micro-batches x %d steps is too large to generate", p, m,
                       steps);
    if (!out) return DT_FAIL(DT_ERR_INVALID, "dt_schedule_make: out is NULL");

    const int N = steps * m, maxv = dt__sched_is_async(kind) ? N : steps; /* versions 0..maxv */
    const int nitems_max = dt__sched_is_async(kind) ? 3 * N : steps * (2 * m + 1);
    dt_status st = DT_OK;
    dt_schedule *S = calloc(1, sizeof *S);
    dt__item *items = malloc((size_t)nitems_max * sizeof *items);
    int *fver0 = malloc((size_t)N * sizeof *fver0);                     /* vsync: stage 0's F versions */
    int *idx = malloc((size_t)3 * (size_t)p * (size_t)N * sizeof *idx); /* F, SEND_ACT, SEND_GRAD indices */
    int *need = calloc((size_t)maxv + 1, sizeof *need), *last = malloc(((size_t)maxv + 1) * sizeof *last);
    int *vcount = calloc((size_t)maxv + 1, sizeof *vcount);
    dt__ibuf buf = {0};
    if (!S || !items || !fver0 || !idx || !need || !last || !vcount) goto nomem;
    S->kind = kind;
    S->p = p;
    S->m = m;
    S->steps = steps;
    S->count = calloc((size_t)p, sizeof *S->count);
    S->instr = calloc((size_t)p, sizeof *S->instr);
    S->max_in_flight = calloc((size_t)p, sizeof *S->max_in_flight);
    S->max_versions = calloc((size_t)p, sizeof *S->max_versions);
    if (!S->count || !S->instr || !S->max_in_flight || !S->max_versions) goto nomem;
    int *fidx = idx, *sact = idx + (size_t)p * N, *sgrad = idx + 2 * (size_t)p * N;
    for (size_t i = 0; i < 3 * (size_t)p * N; i++) idx[i] = -1;

    for (int s = 0; s < p; s++) {
        int n = dt__compute_order(kind, p, m, steps, s, items);
        assert(n <= nitems_max);

        /* pass 2: versions of the pipedream kinds */
        if (dt__sched_is_async(kind)) {
            int cur = 0;
            for (int k = 0; k < n; k++) {
                dt__item *x = &items[k];
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
         * and the in-flight figures */
        memset(need, 0, ((size_t)maxv + 1) * sizeof *need);
        int cur = 0, inflight = 0, distinct = 0, max_if = 0, max_v = 0;
        for (int k = 0; k < n; k++) {
            const dt__item *x = &items[k];
            if (x->op == DT_SCHED_OPTIM_STEP) {
                cur = x->version;
                continue;
            }
            int v = x->version;
            last[v] = k;
            if (cur > v) need[v] = 1;
            if (x->op == DT_SCHED_FORWARD) {
                inflight++;
                if (vcount[v]++ == 0) distinct++;
                max_if = DT_MAX(max_if, inflight);
                max_v = DT_MAX(max_v, distinct);
            } else {
                inflight--;
                if (--vcount[v] == 0) distinct--;
            }
        }
        S->max_in_flight[s] = max_if;
        S->max_versions[s] = max_v;

        /* pass 3: expansion */
        buf = (dt__ibuf){0};
        if (need[0] && dt__emit(&buf, DT_SCHED_STASH, -1, 0, 0, items[0].phase) < 0) goto nomem;
        for (int k = 0; k < n; k++) {
            const dt__item *x = &items[k];
            int mb = x->mb, i;
            size_t at = (size_t)s * N + (size_t)(mb >= 0 ? mb : 0);
            switch (x->op) {
            case DT_SCHED_FORWARD:
                if (s > 0 && dt__emit(&buf, DT_SCHED_RECV_ACT, mb, x->step, -1, x->phase) < 0) goto nomem;
                if ((i = dt__emit(&buf, DT_SCHED_FORWARD, mb, x->step, x->version, x->phase)) < 0) goto nomem;
                fidx[at] = i;
                if (s < p - 1) {
                    if ((i = dt__emit(&buf, DT_SCHED_SEND_ACT, mb, x->step, -1, x->phase)) < 0) goto nomem;
                    sact[at] = i;
                }
                break;
            case DT_SCHED_BACKWARD:
                if (s < p - 1 && dt__emit(&buf, DT_SCHED_RECV_GRAD, mb, x->step, -1, x->phase) < 0) goto nomem;
                if (dt__emit(&buf, DT_SCHED_BACKWARD, mb, x->step, x->version, x->phase) < 0) goto nomem;
                if (s > 0) {
                    if ((i = dt__emit(&buf, DT_SCHED_SEND_GRAD, mb, x->step, -1, x->phase)) < 0) goto nomem;
                    sgrad[at] = i;
                }
                break;
            default: /* OPTIM_STEP */
                if (dt__emit(&buf, DT_SCHED_OPTIM_STEP, -1, x->step, x->version, x->phase) < 0) goto nomem;
                if (need[x->version] && dt__emit(&buf, DT_SCHED_STASH, -1, x->step, x->version, x->phase) < 0)
                    goto nomem;
                continue;
            }
            if (need[x->version] && last[x->version] == k &&
                dt__emit(&buf, DT_SCHED_DROP, -1, x->step, x->version, x->phase) < 0)
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
            switch (in->op) {
            case DT_SCHED_RECV_ACT:
                in->deps[in->ndeps++] = (dt_sched_dep){s - 1, sact[(size_t)(s - 1) * N + in->mb]};
                break;
            case DT_SCHED_RECV_GRAD:
                in->deps[in->ndeps++] = (dt_sched_dep){s + 1, sgrad[(size_t)(s + 1) * N + in->mb]};
                break;
            case DT_SCHED_BACKWARD: in->deps[in->ndeps++] = (dt_sched_dep){s, fidx[(size_t)s * N + in->mb]}; break;
            default: break;
            }
            for (int d = 0; d < in->ndeps; d++) assert(in->deps[d].index >= 0);
        }
    *out = S;
    S = NULL;
    goto done;
nomem:
    st = DT_FAIL(DT_ERR_NOMEM, "pipeline schedule %s (p=%d m=%d steps=%d): out of memory", dt_sched_kind_name(kind), p,
                 m, steps);
    free(buf.v);
done:
    dt_schedule_free(S);
    free(items);
    free(fver0);
    free(idx);
    free(need);
    free(last);
    free(vcount);
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
    const int versions = dt__sched_is_async(s->kind);
    dt__sbuf b = {0};
    dt__sprintf(&b, "schedule %s: p=%d m=%d steps=%d\n", dt_sched_kind_name(s->kind), s->p, s->m, s->steps);
    for (int st = 0; st < s->p; st++) {
        dt__sprintf(&b, "stage %d:", st);
        for (int i = 0; i < s->count[st]; i++) {
            const dt_sched_instr *in = &s->instr[st][i];
            switch (in->op) {
            case DT_SCHED_FORWARD:
            case DT_SCHED_BACKWARD:
                dt__sprintf(&b, " %c%d", in->op == DT_SCHED_FORWARD ? 'F' : 'B', in->mb);
                if (versions) dt__sprintf(&b, "@v%d", in->version);
                break;
            case DT_SCHED_OPTIM_STEP: dt__sprintf(&b, " OPT"); break;
            case DT_SCHED_RECV_ACT:
            case DT_SCHED_SEND_ACT:
            case DT_SCHED_RECV_GRAD:
            case DT_SCHED_SEND_GRAD:
                if (verbose)
                    dt__sprintf(&b, " %c%c%d", in->op == DT_SCHED_RECV_ACT || in->op == DT_SCHED_RECV_GRAD ? 'R' : 'S',
                                in->op == DT_SCHED_RECV_ACT || in->op == DT_SCHED_SEND_ACT ? 'F' : 'B', in->mb);
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
