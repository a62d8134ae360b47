/* testutil.h: small helpers shared by the Check suites. */
#ifndef DT_TESTUTIL_H
#define DT_TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtrain.h"

/* Fail the test with the library's message if a call does not return DT_OK. */
#define ck_dt(expr)                                                                     \
    do {                                                                                \
        dt_status ck_dt_st_ = (expr);                                                   \
        ck_assert_msg(ck_dt_st_ == DT_OK, "%s -> %s: %s (%s)", #expr,                  \
                      dt_status_str(ck_dt_st_), dt_last_error(), dt_last_error_site()); \
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

#endif
