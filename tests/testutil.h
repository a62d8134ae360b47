/* testutil.h: small helpers shared by the Check suites. */
#ifndef DT_TESTUTIL_H
#define DT_TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtrain.h"

/* Fail the test with the library's message if a call does not return DT_OK. */
#define ck_dt(expr)                                                                                              \
    do {                                                                                                         \
        dt_status ck_dt_st_ = (expr);                                                                            \
        ck_assert_msg(ck_dt_st_ == DT_OK, "%s -> %s: %s (%s)", #expr, dt_status_str(ck_dt_st_), dt_last_error(), \
                      dt_last_error_site());                                                                     \
    } while (0)

/* |a - b| <= atol + rtol * |b| */
static inline int dt_test_close(double a, double b, double atol, double rtol)
{
    return fabs(a - b) <= atol + rtol * fabs(b);
}

/* Run one suite with Check's runner; returns the process exit code. */
static inline int dt_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* Run one suite inside a fresh directory: dir is a mkdtemp template
 * ("...XXXXXX", rewritten with the name made), removed afterwards, made
 * writable first so that a test stopped while a folder was read-only
 * leaves nothing. 99 when the directory cannot be made or removed. */
static inline int dt_test_run_in_tmpdir(Suite *s, char *dir)
{
    if (!mkdtemp(dir)) return 99;
    const int rc = dt_test_run(s);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'; rm -rf '%s'", dir, dir);
    if (system(cmd) != 0) return 99;
    return rc;
}

/* Run one suite on every rank of `world` in the runner's process
 * (CK_NOFORK: neither MPI nor CUDA survive fork()), with `extra` failures
 * found before it; the failures are summed over the ranks, so any rank's
 * failure fails every rank, and rank 0 prints "NAME: <comm> communicator, N
 * rank(s): F failure(s) over all ranks" (the multi-rank scripts look for it).
 * Returns 1 when every rank passed. */
static inline int dt_test_run_ranks(Suite *s, dt_comm *world, const char *name, int extra)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    float failed = (float)(srunner_ntests_failed(sr) + extra);
    srunner_free(sr);
    dt_status st = world->ops->allreduce_native(world, &failed, 1);
    if (st != DT_OK)
        fprintf(stderr, "%s: rank %d: summing the failures over ranks: %s (%s)\n", name, world->rank, dt_last_error(),
                dt_last_error_site());
    else if (world->rank == 0)
        printf("%s: %s communicator, %d rank(s): %d failure(s) over all ranks\n", name, world->ops->name, world->size,
               (int)failed);
    return st == DT_OK && failed == 0;
}

#endif
