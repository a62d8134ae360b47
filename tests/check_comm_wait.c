/* check_comm_wait.c: the bounded waits' shared pieces (lib/comm/comm.c),
 * one process, no MPI:
 *  - a waiter's deadline does not count a gap between polls longer than
 *    DT__COMM_GAP_NS (this process was stopped: issue 20 F10, a rank
 *    resumed after SIGSTOP blamed the rank it waited for), while the
 *    ordinary wait still expires at its timeout;
 *  - the timeout message says "it waits" for one peer and "they wait" for
 *    several (it said "they waits"). */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "comm_internal.h"
#include "testutil.h"

static dt_comm *self_with_timeout(double s)
{
    dt_comm *c = NULL;
    ck_dt(dt_comm_self_create(&c));
    ck_dt(dt_comm_set_timeout(c, s));
    return c;
}

START_TEST(test_waiter_expires)
{
    dt_comm *c = self_with_timeout(1.0);
    dt__comm_waiter w;
    dt__comm_waiter_start(&w, c);
    const long long t0 = w.start_ns, step = 100000000LL; /* polls 0.1 s apart: no gap */
    long long t = t0;
    int expired = 0;
    while (!expired && t < t0 + 3000000000LL) expired = dt__comm_waiter_expired(&w, t += step);
    ck_assert_int_eq(expired, 1);
    ck_assert(t >= t0 + 1000000000LL && t <= t0 + 1000000000LL + step); /* at the timeout itself */
    dt_comm_free(c);
}
END_TEST

START_TEST(test_waiter_gap_not_counted)
{
    dt_comm *c = self_with_timeout(1.0);
    dt__comm_waiter w;
    dt__comm_waiter_start(&w, c);
    const long long t0 = w.start_ns;
    ck_assert_int_eq(dt__comm_waiter_expired(&w, t0 + 200000000LL), 0);
    /* stopped for 5 s: resumed, the wait has still 0.8 s to go */
    ck_assert_int_eq(dt__comm_waiter_expired(&w, t0 + 5200000000LL), 0);
    ck_assert_int_eq(dt__comm_waiter_expired(&w, t0 + 5600000000LL), 0);
    ck_assert_int_eq(dt__comm_waiter_expired(&w, t0 + 6000000000LL), 1);
    dt_comm_free(c);
}
END_TEST

START_TEST(test_waiter_no_timeout)
{
    dt_comm *c = self_with_timeout(0.0);
    dt__comm_waiter w;
    dt__comm_waiter_start(&w, c);
    ck_assert_int_eq(dt__comm_waiter_expired(&w, w.start_ns + 1000000000000LL), 0);
    dt_comm_free(c);
}
END_TEST

START_TEST(test_timeout_grammar)
{
    dt_comm *c = self_with_timeout(3.0);
    dt_comm_request a = {.comm = c, .is_send = 0, .peer = 0, .tag = 1}, b = a;
    b.tag = 2;
    dt_comm_request *one[1] = {&a};
    ck_assert_int_eq(DT__COMM_TIMEOUT(c, one, 1), DT_ERR_BACKEND);
    ck_assert_msg(strstr(dt_last_error(), "it, or a rank it waits for, may have died or hung"), "%s",
                  dt_last_error());
    /* two pending receives from one peer: still one peer, "it" */
    dt_comm_request *same[2] = {&a, &b};
    ck_assert_int_eq(DT__COMM_TIMEOUT(c, same, 2), DT_ERR_BACKEND);
    ck_assert_msg(strstr(dt_last_error(), "no message from rank 0 for 3 s"), "%s", dt_last_error());
    ck_assert_msg(strstr(dt_last_error(), "it, or a rank it waits for"), "%s", dt_last_error());
    /* two peers (the message only names them: self's job ranks are its own numbers) */
    dt_comm_request p1 = {.comm = c, .is_send = 1, .peer = 1, .tag = 1}, p2 = p1;
    p2.peer = 2;
    dt_comm_request *two[2] = {&p1, &p2};
    ck_assert_int_eq(DT__COMM_TIMEOUT(c, two, 2), DT_ERR_BACKEND);
    ck_assert_msg(strstr(dt_last_error(), "ranks 1, 2 took no message for 3 s (--comm-timeout 3): they, or a rank "
                                          "they wait for, may have died or hung"),
                  "%s", dt_last_error());
    dt_comm_free(c);
}
END_TEST

static Suite *comm_wait_suite(void)
{
    Suite *s = suite_create("comm_wait");
    TCase *tc = tcase_create("waiter");
    tcase_add_test(tc, test_waiter_expires);
    tcase_add_test(tc, test_waiter_gap_not_counted);
    tcase_add_test(tc, test_waiter_no_timeout);
    tcase_add_test(tc, test_timeout_grammar);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(comm_wait_suite()); }
