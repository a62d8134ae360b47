/* thread_tune.c: the automatic thread count of a CPU run (--threads 0).
 *
 * One OpenMP thread per core is fastest on a quiet machine, but when
 * another process wants a core, a descheduled thread stalls every barrier
 * of every op: with one busy process beside it, the tiny model ran at
 * 33.5k tokens/s on two threads against 60.8k on one (issue 20's report). So the trainer times
 * its steps and runs them on the fastest worker count: an exploration
 * measures the current choice and then the others (max, max/2, ..., 1),
 * DT__TUNE_SAMPLES steps each, and keeps the one with the lowest median
 * step time; a candidate must be DT__TUNE_BETTER faster to replace the
 * choice. Explorations come at the first steps, then after DT__TUNE_FIRST
 * steps, four times as far each time the choice stands (at most
 * DT__TUNE_LAST), and at once when DT__TUNE_SLOW_STEPS steps in a row run
 * DT__TUNE_SLOW times slower than the choice's median (a process started
 * beside it). A probe whose first step is DT__TUNE_ABORT times slower than
 * the choice ends there, so that a quiet machine pays about one slow step
 * per exploration.
 *
 * Invariants: only the worker count changes, never the split of the work
 * (dt_backend_set_workers_fn), so results do not depend on the choices;
 * the first step (allocations, cold caches) is not recorded; the logic is
 * a pure function of the recorded times (tests feed it synthetic ones). */
#include <stdlib.h>
#include <string.h>

#include "thread_tune.h"

#define DT__TUNE_FIRST 64
#define DT__TUNE_LAST 1024
#define DT__TUNE_BETTER 0.95
#define DT__TUNE_SLOW 1.3
#define DT__TUNE_SLOW_STEPS 4
#define DT__TUNE_ABORT 1.5

void dt__tune_init(dt__tune *t, int max, int on)
{
    memset(t, 0, sizeof *t);
    if (max < 1) max = 1;
    t->cand[t->ncand++] = max;
    for (int c = max / 2; c >= 1 && t->ncand < DT__TUNE_MAX_CAND; c /= 2)
        if (c < t->cand[t->ncand - 1]) t->cand[t->ncand++] = c;
    if (t->cand[t->ncand - 1] != 1 && t->ncand < DT__TUNE_MAX_CAND) t->cand[t->ncand++] = 1;
    t->on = on && max > 1;
    t->next = 1; /* explore from the second step */
    t->interval = DT__TUNE_FIRST;
}

int dt__tune_best(const dt__tune *t) { return t->cand[t->best]; }

static void dt__tune_start(dt__tune *t)
{
    t->exploring = 1;
    t->probe = 0;
    t->n = 0;
    t->explorations++;
    int k = 0;
    t->order[k++] = t->best;
    for (int i = 0; i < t->ncand; i++)
        if (i != t->best) t->order[k++] = i;
    for (int i = 0; i < t->ncand; i++) t->med[i] = 0;
}

int dt__tune_next(dt__tune *t)
{
    if (!t->on) return t->cand[0];
    if (!t->exploring && t->steps >= t->next) dt__tune_start(t);
    t->cur = t->exploring ? t->order[t->probe] : t->best;
    return t->cand[t->cur];
}

static int dt__cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The exploration is over: keep the fastest, and say when to look again. */
static void dt__tune_finish(dt__tune *t)
{
    int pick = t->best;
    for (int i = 0; i < t->ncand; i++)
        if (t->med[i] > 0 && (double)t->med[i] < DT__TUNE_BETTER * (double)t->med[pick]) pick = i;
    if (pick != t->best) {
        t->switches++;
        t->best = pick;
        t->interval = DT__TUNE_FIRST;
    } else if (t->explorations > 1 && t->interval < DT__TUNE_LAST) {
        t->interval *= 4;
        if (t->interval > DT__TUNE_LAST) t->interval = DT__TUNE_LAST;
    }
    t->ref = t->med[t->best];
    t->slow = 0;
    t->exploring = 0;
    t->next = t->steps + t->interval;
}

void dt__tune_record(dt__tune *t, int64_t ns)
{
    if (!t->on) return;
    if (t->steps++ == 0) return; /* the first step: warm-up */
    if (ns < 1) ns = 1;
    if (!t->exploring) {
        if (t->ref > 0 && (double)ns > DT__TUNE_SLOW * (double)t->ref) {
            if (++t->slow >= DT__TUNE_SLOW_STEPS) t->next = t->steps; /* explore with the next step */
        } else {
            t->slow = 0;
        }
        return;
    }
    const int c = t->order[t->probe];
    t->samp[t->n++] = ns;
    const int64_t ref = t->med[t->best];
    const int abort = t->probe > 0 && t->n == 1 && ref > 0 && (double)ns > DT__TUNE_ABORT * (double)ref;
    if (t->n < DT__TUNE_SAMPLES && !abort) return;
    qsort(t->samp, (size_t)t->n, sizeof t->samp[0], dt__cmp_i64);
    t->med[c] = t->samp[t->n / 2];
    t->n = 0;
    if (++t->probe >= t->ncand) dt__tune_finish(t);
}
