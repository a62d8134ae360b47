/* thread_tune.h: the automatic thread count of a CPU run (thread_tune.c).
 * Private to lib/train/ and its tests. */
#ifndef DT_THREAD_TUNE_H
#define DT_THREAD_TUNE_H

#include <stdint.h>

#define DT__TUNE_MAX_CAND 12 /* max, max/2, ..., 1: enough for 1024 threads */
#define DT__TUNE_SAMPLES 3   /* steps per candidate and exploration (median) */

typedef struct dt__tune {
    int on;                           /* 0: workers stay at the backend's threads */
    int ncand;                        /* candidates, most threads first */
    int cand[DT__TUNE_MAX_CAND];      /* worker counts */
    int best;                         /* index of the count used between explorations */
    int cur;                          /* index running the step being timed */
    int exploring;                    /* 1: the steps now measure the candidates */
    int probe;                        /* exploring: the candidate being measured (order: best first) */
    int order[DT__TUNE_MAX_CAND];     /* exploring: candidate indices, best first */
    int n;                            /* samples of order[probe] so far */
    int64_t samp[DT__TUNE_SAMPLES];   /* ns */
    int64_t med[DT__TUNE_MAX_CAND];   /* this exploration's median per candidate; 0: not measured */
    int64_t ref;                      /* best's median, against which a slowdown is seen */
    int slow;                         /* consecutive steps slower than DT__TUNE_SLOW * ref */
    int64_t steps;                    /* steps recorded */
    int64_t next;                     /* step at which the next exploration starts */
    int64_t interval;                 /* steps between explorations */
    int64_t explorations, switches;   /* counts, for reports and tests */
} dt__tune;

/* on: tune between max and 1 workers; off (or max <= 1): always max. */
void dt__tune_init(dt__tune *t, int max, int on);
/* The worker count for the next step. */
int dt__tune_next(dt__tune *t);
/* The time of the step that ran with dt__tune_next's count. */
void dt__tune_record(dt__tune *t, int64_t ns);
/* The count used between explorations. */
int dt__tune_best(const dt__tune *t);

#endif
