/* check_trace_merge.c: one trace for a multi-rank run (dt_trace_merge.h,
 * docs/trace-format.md "Merged files") on hand-made rank files:
 *   - ping-pong: two rank files with otherData.clock, given in reverse
 *     order, merge into one file in ascending pid, each rank's times moved
 *     by its start on rank 0's clock less the earliest start, the header's
 *     otherData.merge reads back, a send and its receive get one flow
 *     pair, the event count is the files' plus the flows;
 *   - step0 and none: files without clocks align the ends of step 0, or
 *     keep their own time 0 when a file has no step 0;
 *   - what is refused, with no output file left: two files of one rank,
 *     clocks of two runs, clocks on some files only, a merged file as
 *     input, a file of two ranks, a damaged "flow" extra;
 *   - the header sections' ranges (clock.rank < ranks, merge pids
 *     ascending, ping-pong errors known);
 *   - the flow statistics (dt_trace_flow_stats_trace): lone, doubled and
 *     same-rank flows, an end earlier than its start beyond and within the
 *     alignment's tolerance. */
#define _GNU_SOURCE
#include <check.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "dt_trace_merge.h"
#include "dt_trace_stats.h"
#include "trace_testutil.h"

/* A rank file: its metadata, a send or a receive of message 5 (or a span
 * with the damaged flow arg `bad_flow` when it is not 0), an iter-0
 * forward ending at step0_end (none when < 0); clock when method is set. */
static void write_rank(const char *path, int pid, int64_t start_ns, int64_t error_ns, int64_t sync_id,
                       const char *method, int64_t msg_ts, int64_t msg_dur, int64_t step0_end, double bad_flow)
{
    dt_trace_clock c = {"", sync_id, pid, 2, start_ns, error_ns};
    snprintf(c.method, sizeof c.method, "%s", method ? method : "");
    char *other = method ? dt_trace_clock_json(&c) : NULL;
    dt_trace_writer *w = NULL;
    ck_dt(dt_trace_writer_open_ext(path, "dtrain", "{\"pipeline_model_parallel_size\":2}", other, &w));
    free(other);
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_METADATA, "process_name", "meta", pid, 0, 0, 0);
    snprintf(e.label, sizeof e.label, "dtrain rank %d", pid);
    ck_dt(dt_trace_write(w, &e));
    if (step0_end >= 0) {
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, "forward", "pipeline", pid, DT_LANE_COMPUTE, 0, step0_end);
        e.iter = 0;
        ck_dt(dt_trace_write(w, &e));
    }
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, pid == 0 ? "send_act" : "recv_act", "pipeline", pid, DT_LANE_COMM,
                        msg_ts, msg_dur);
    e.iter = 1;
    ck_dt(dt_trace_event_add_arg(&e, "flow", bad_flow != 0 ? bad_flow : 5));
    ck_dt(dt_trace_write(w, &e));
    ck_dt(dt_trace_writer_close(w));
}

/* path_in's buffers rotate: a test's files keep their names here. */
static const char *keep(const char *name)
{
    static char bufs[8][512];
    static int k;
    char *p = bufs[k++ % 8];
    snprintf(p, 512, "%s", path_in(name));
    return p;
}

static dt_trace *read_ok(const char *p)
{
    dt_trace *t = NULL;
    ck_dt(dt_trace_read(p, &t));
    return t;
}

START_TEST(test_merge_ping_pong)
{
    const char *r0 = keep("run.rank0.json"), *r1 = keep("run.rank1.json"), *out = keep("run.json");
    /* rank 1 started 500 ns after rank 0 on rank 0's clock */
    write_rank(r0, 0, 1000, 0, 77, "ping-pong", 100, 10, -1, 0);
    write_rank(r1, 1, 1500, 20, 77, "ping-pong", 50, 100, -1, 0);
    const char *paths[] = {r1, r0};
    dt_trace_merge_stats ms;
    ck_dt(dt_trace_merge_files(out, paths, 2, &ms));
    ck_assert_int_eq(ms.files, 2);
    ck_assert_uint_eq(ms.flows, 2);
    ck_assert_uint_eq(ms.events, 6);
    ck_assert_int_eq(ms.max_error_ns, 20);
    dt_trace *t = read_ok(out);
    ck_assert_str_eq(t->tool, "dtrain");
    ck_assert_int_eq(t->minor_version, DT_TRACE_VERSION_MINOR);
    ck_assert_str_eq(t->config_json, "{\"pipeline_model_parallel_size\":2}");
    ck_assert_str_eq(t->merge.method, "ping-pong");
    ck_assert_int_eq(t->merge.sync_id, 77);
    ck_assert_int_eq(t->merge.n, 2);
    ck_assert(t->merge.pid[0] == 0 && t->merge.pid[1] == 1);
    ck_assert(t->merge.offset_ns[0] == 0 && t->merge.offset_ns[1] == 500);
    ck_assert(t->merge.error_ns[0] == 0 && t->merge.error_ns[1] == 20);
    ck_assert_str_eq(t->clock.method, ""); /* the rank files' clocks are not the merged file's */
    ck_assert_uint_eq(t->n_events, 6);
    /* rank 0: metadata, send, its flow start; rank 1: metadata, receive moved by 500, its flow end */
    const char want_ph[] = {'M', 'X', 's', 'M', 'X', 'f'};
    const int64_t want_ts[] = {0, 100, 100, 500, 550, 650};
    for (int i = 0; i < 6; i++) {
        ck_assert_msg(t->events[i].ph == want_ph[i] && t->events[i].ts_ns == want_ts[i] && t->events[i].pid == (i >= 3),
                      "event %d: %c at %lld of rank %d", i, t->events[i].ph, (long long)t->events[i].ts_ns,
                      t->events[i].pid);
    }
    ck_assert(t->events[2].flow_id == 5 && t->events[5].flow_id == 5);
    ck_assert_str_eq(t->events[5].name, "act");
    dt_trace_flow_stats fs;
    ck_dt(dt_trace_flow_stats_trace(t, &fs));
    ck_assert(fs.starts == 1 && fs.ends == 1 && fs.pairs == 1 && fs.unpaired == 0 && fs.early == 0);
    ck_assert(fs.judged == 1 && fs.min_lag_ns == 550 && fs.max_tol_ns == 20);
    dt_trace_free(t);
}
END_TEST

START_TEST(test_merge_without_clocks)
{
    const char *r0 = keep("a.json"), *r1 = keep("b.json"), *out = keep("m.json");
    write_rank(r0, 0, 0, 0, 0, NULL, 100, 10, 3000, 0);
    write_rank(r1, 1, 0, 0, 0, NULL, 50, 100, 1000, 0);
    const char *paths[] = {r0, r1};
    ck_dt(dt_trace_merge_files(out, paths, 2, NULL));
    dt_trace *t = read_ok(out);
    ck_assert_str_eq(t->merge.method, "step0");
    ck_assert(t->merge.offset_ns[0] == 0 && t->merge.offset_ns[1] == 2000);
    ck_assert(t->merge.error_ns[0] == -1 && t->merge.error_ns[1] == -1);
    dt_trace_flow_stats fs;
    ck_dt(dt_trace_flow_stats_trace(t, &fs));
    ck_assert(fs.pairs == 1 && fs.judged == 0); /* unknown errors are not judged */
    dt_trace_free(t);
    write_rank(r1, 1, 0, 0, 0, NULL, 50, 100, -1, 0); /* no step 0 */
    ck_dt(dt_trace_merge_files(out, paths, 2, NULL));
    t = read_ok(out);
    ck_assert_str_eq(t->merge.method, "none");
    ck_assert(t->merge.offset_ns[0] == 0 && t->merge.offset_ns[1] == 0);
    dt_trace_free(t);
}
END_TEST

/* The merge of paths must fail with DT_ERR_INVALID or DT_ERR_FORMAT naming frag, and leave no out. */
static void expect_refused(const char *p0, const char *p1, const char *frag)
{
    static char out[512];
    snprintf(out, sizeof out, "%s", path_in("refused.json"));
    const char *paths[] = {p0, p1};
    const dt_status st = dt_trace_merge_files(out, paths, 2, NULL);
    ck_assert_msg(st == DT_ERR_INVALID || st == DT_ERR_FORMAT, "%s: got %s: %s", frag, dt_status_str(st),
                  dt_last_error());
    ck_assert_msg(strstr(dt_last_error(), frag) && !strchr(dt_last_error(), '\n'), "want \"%s\": %s", frag,
                  dt_last_error());
    ck_assert_msg(access(out, F_OK) != 0, "%s left behind", out);
}

START_TEST(test_merge_refusals)
{
    const char *a = keep("r0.json"), *b = keep("r1.json"), *c = keep("other.json");
    write_rank(a, 0, 1000, 0, 77, "ping-pong", 100, 10, -1, 0);
    write_rank(b, 1, 1500, 20, 77, "ping-pong", 50, 100, -1, 0);
    expect_refused(a, a, "both hold rank 0");
    write_rank(c, 1, 1500, 20, 78, "ping-pong", 50, 100, -1, 0);
    expect_refused(a, c, "clocks of different runs");
    write_rank(c, 1, 0, 0, 0, NULL, 50, 100, -1, 0);
    expect_refused(a, c, "has none");
    const char *m = keep("merged.json"), *paths[] = {a, b};
    ck_dt(dt_trace_merge_files(m, paths, 2, NULL));
    expect_refused(a, m, "ranks 0 and 1"); /* a merged file holds several ranks */
    write_rank(c, 1, 1500, 20, 77, "ping-pong", 50, 100, -1, 2.5);
    expect_refused(a, c, "\"args.flow\" is 2.5");
    write_rank(c, 1, 1500, 20, 77, "ping-pong", INT64_MAX - 100, 50, -1, 0);
    expect_refused(a, c, "past the largest time");
}
END_TEST

START_TEST(test_header_sections)
{
#define OD(more) \
    "{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"t\"," more "},\"traceEvents\":[]}"
    expect_format_error(OD("\"clock\":3"), "otherData.clock must be an object", NULL);
    expect_format_error(OD("\"clock\":{\"method\":\"ping-pong\",\"sync_id\":1,\"ranks\":2,\"rank\":2,"
                           "\"start_ns\":0,\"error_ns\":0}"),
                        "otherData.clock.rank is 2; expected 0..1", NULL);
    expect_format_error(OD("\"config\":{\"data_parallel_size\":2},\"clock\":{\"method\":\"p\",\"sync_id\":1,"
                           "\"ranks\":3,\"rank\":0,\"start_ns\":0,\"error_ns\":0}"),
                        "otherData.clock.ranks is 3; expected 1..2", NULL);
    expect_format_error(OD("\"clock\":{\"method\":\"\",\"sync_id\":1}"), "otherData.clock.method", NULL);
    expect_format_error(OD("\"clock\":{\"method\":\"p\",\"sync_id\":1,\"ranks\":1,\"rank\":0,\"start_ns\":-5,"
                           "\"error_ns\":0}"),
                        "otherData.clock.start_ns is -5", NULL);
    expect_format_error(OD("\"merge\":{\"method\":\"ping-pong\",\"sync_id\":1,\"ranks\":[]}"),
                        "otherData.merge.ranks must be an array", NULL);
    expect_format_error(OD("\"merge\":{\"method\":\"ping-pong\",\"sync_id\":1,\"ranks\":[{\"pid\":1,\"offset_ns\":0,"
                           "\"error_ns\":0},{\"pid\":1,\"offset_ns\":0,\"error_ns\":0}]}"),
                        "otherData.merge.ranks[1].pid is 1; expected 2..", NULL);
    expect_format_error(OD("\"merge\":{\"method\":\"ping-pong\",\"sync_id\":1,\"ranks\":[{\"pid\":0,\"offset_ns\":0,"
                           "\"error_ns\":null}]}"),
                        "otherData.merge.ranks[0].error_ns must be an integer, not null", NULL);
    expect_format_error(OD("\"merge\":{\"method\":\"step0\",\"sync_id\":0,\"ranks\":[{\"pid\":0,\"offset_ns\":-1,"
                           "\"error_ns\":null}]}"),
                        "offset_ns is -1", NULL);
#undef OD
    dt_trace_writer *w = NULL;
    ck_assert_int_eq(dt_trace_writer_open_ext(path_in("x.json"), "t", NULL, "{\"version\":2}", &w), DT_ERR_INVALID);
    ck_assert_int_eq(dt_trace_writer_open_ext(path_in("x.json"), "t", NULL, "[1]", &w), DT_ERR_INVALID);
    ck_assert_msg(access(path_in("x.json"), F_OK) != 0, "a refused header left a file");
}
END_TEST

START_TEST(test_flow_stats)
{
    /* ids: 1 paired (end 30 ns early, tolerance 10+25), 2 a lone start, 3 two starts and an end, 4 both ends on
     * rank 0, 5 paired 50 ns early: beyond the tolerance */
    static const struct {
        char ph;
        int pid;
        int64_t id, ts;
    } f[] = {{'s', 0, 1, 100}, {'f', 1, 1, 70}, {'s', 0, 2, 5}, {'s', 0, 3, 1},   {'s', 1, 3, 2},
             {'f', 0, 3, 9},   {'s', 0, 4, 1},  {'f', 0, 4, 2}, {'f', 0, 5, 950}, {'s', 1, 5, 1000}};
    enum { N = sizeof f / sizeof f[0] };
    dt_trace t;
    memset(&t, 0, sizeof t);
    dt_trace_event ev[N];
    for (int i = 0; i < N; i++) {
        dt_trace_event_init(&ev[i], f[i].ph, "act", "flow", f[i].pid, DT_LANE_COMM, f[i].ts, 0);
        ev[i].flow_id = f[i].id;
    }
    t.events = ev;
    t.n_events = N;
    int pid[] = {0, 1};
    int64_t off[] = {0, 0}, err[] = {10, 25};
    t.merge = (dt_trace_merge_info){"ping-pong", 1, 2, pid, off, err};
    dt_trace_flow_stats s;
    ck_dt(dt_trace_flow_stats_trace(&t, &s));
    ck_assert_uint_eq(s.starts, 6);
    ck_assert_uint_eq(s.ends, 4);
    ck_assert_uint_eq(s.pairs, 2);
    ck_assert_uint_eq(s.unpaired, 3);
    ck_assert_uint_eq(s.early, 1);
    ck_assert_uint_eq(s.judged, 2);
    ck_assert_int_eq(s.min_lag_ns, -50);
    ck_assert_int_eq(s.max_tol_ns, 35);
    t.merge.method[0] = '\0'; /* one clock (dtsim): no tolerance */
    ck_dt(dt_trace_flow_stats_trace(&t, &s));
    ck_assert_uint_eq(s.early, 2);
}
END_TEST

static Suite *trace_merge_suite(void)
{
    Suite *s = suite_create("trace_merge");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup_dir, teardown_dir);
    tcase_add_test(tc, test_merge_ping_pong);
    tcase_add_test(tc, test_merge_without_clocks);
    tcase_add_test(tc, test_merge_refusals);
    tcase_add_test(tc, test_header_sections);
    tcase_add_test(tc, test_flow_stats);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(trace_merge_suite()); }
