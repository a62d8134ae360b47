/* check_trace.c: the trace format (dt_trace.h, docs/trace-format.md).
 *
 * Core: every event kind with awkward values is written and read back equal,
 * field by field; the file text itself follows the documented layout (one
 * event per line, exact "%lld.%03lld" microseconds, Perfetto's args
 * conventions) and is valid JSON to an independent parse; flow events
 * (minor version 1) are written, made from message spans and read back.
 * Limits: a file cut at any byte is DT_ERR_FORMAT naming the path and a line;
 * wrong versions and foreign traces give messages naming the field
 * (malformed events and out-of-range values: check_trace_read.c); unwritable paths and a full disk are
 * DT_ERR_IO; bad events and extras are refused before anything is written.
 * Every test works in its own mkdtemp directory. */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace_testutil.h"

static void assert_event_eq(const dt_trace_event *a, const dt_trace_event *b, size_t i)
{
    ck_assert_msg(a->ph == b->ph, "event %zu: ph %c vs %c", i, a->ph, b->ph);
    ck_assert_msg(strcmp(a->name, b->name) == 0, "event %zu: name '%s' vs '%s'", i, a->name, b->name);
    ck_assert_msg(strcmp(a->cat, b->cat) == 0, "event %zu: cat '%s' vs '%s'", i, a->cat, b->cat);
    ck_assert_msg(a->pid == b->pid && a->tid == b->tid, "event %zu: pid/tid", i);
    ck_assert_msg(a->ts_ns == b->ts_ns, "event %zu: ts %lld vs %lld", i, (long long)a->ts_ns, (long long)b->ts_ns);
    ck_assert_msg(a->dur_ns == b->dur_ns, "event %zu: dur %lld vs %lld", i, (long long)a->dur_ns, (long long)b->dur_ns);
    ck_assert_msg(a->iter == b->iter && a->micro_batch == b->micro_batch && a->layer == b->layer &&
                      a->bytes == b->bytes,
                  "event %zu: well-known args differ", i);
    ck_assert_msg(a->value == b->value && signbit(a->value) == signbit(b->value), "event %zu: value %.17g vs %.17g", i,
                  a->value, b->value);
    ck_assert_msg(strcmp(a->label, b->label) == 0, "event %zu: label '%s' vs '%s'", i, a->label, b->label);
    ck_assert_msg(a->flow_id == b->flow_id, "event %zu: flow_id %lld vs %lld", i, (long long)a->flow_id,
                  (long long)b->flow_id);
    ck_assert_msg(a->n_extra == b->n_extra, "event %zu: n_extra %d vs %d", i, a->n_extra, b->n_extra);
    for (int k = 0; k < a->n_extra; k++) {
        ck_assert_msg(strcmp(a->extra[k].key, b->extra[k].key) == 0, "event %zu: extra %d key", i, k);
        ck_assert_msg(a->extra[k].value == b->extra[k].value &&
                          signbit(a->extra[k].value) == signbit(b->extra[k].value),
                      "event %zu: extra %s %.17g vs %.17g", i, a->extra[k].key, a->extra[k].value, b->extra[k].value);
    }
}

static void write_all(const char *path, const char *tool, const char *config, const dt_trace_event *ev, size_t n)
{
    dt_trace_writer *w = NULL;
    ck_dt(dt_trace_writer_open(path, tool, config, &w));
    for (size_t i = 0; i < n; i++) ck_dt(dt_trace_write(w, &ev[i]));
    ck_dt(dt_trace_writer_close(w));
}

/* Every kind of event, with awkward names and values. */
static size_t make_events(dt_trace_event *ev)
{
    size_t n = 0;
    dt_trace_event *e;
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_METADATA, "process_name", "meta", 0, 0, 0, 0);
    strcpy(e->label, "rank 0");
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_METADATA, "thread_name", "meta", 0, DT_LANE_COMPUTE, 0, 0);
    strcpy(e->label, "compute \"lane\" \\ µ");
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_METADATA, "thread_name", "meta", 0, DT_LANE_OPTIM, 0, 0);
    e->label[0] = '\0'; /* empty label is allowed */
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_COMPLETE, "forward", "compute", 0, DT_LANE_COMPUTE, 1500, 2500);
    e->iter = 7;
    e->micro_batch = 1;
    e->layer = 3;
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_COMPLETE, "backward", "compute", 0, DT_LANE_COMPUTE, 1, 0); /* zero dur */
    e->iter = INT_MAX; /* the largest without a config's train_iters */
    e->layer = 0;
    e->bytes = INT64_MAX;
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_COMPLETE, "q\"uo\\te\n\ttab\x01 ünï ✓ 日本 🙂", "c\"a\\t", INT_MAX, DT_LANE_DATA,
                        0, INT64_MAX); /* a span to the largest time */
    e->micro_batch = INT_MAX;
    e->bytes = 0;
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_COMPLETE, "embedding", "", 3, DT_LANE_COMM, INT64_MAX, 0);
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_COMPLETE, "huge", "compute", 1, 0, 5123456789012345678LL, 999);
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_INSTANT, "mark", "compute", 0, DT_LANE_DATA, 999, 0);
    ck_dt(dt_trace_event_add_arg(e, "pi", 3.141592653589793));
    ck_dt(dt_trace_event_add_arg(e, "tiny", 4.9406564584124654e-324));
    ck_dt(dt_trace_event_add_arg(e, "big", -1.7976931348623157e308));
    ck_dt(dt_trace_event_add_arg(e, "tenth", 0.1));
    ck_dt(dt_trace_event_add_arg(e, "int", 42));
    ck_dt(dt_trace_event_add_arg(e, "2^53+2", 9007199254740994.0));
    ck_dt(dt_trace_event_add_arg(e, "negzero", -0.0));
    ck_dt(dt_trace_event_add_arg(e, "k\"e\\y µ", 1e-7));
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_INSTANT, "plain", "data", 0, DT_LANE_DATA, 1000, 0);
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_COUNTER, "loss", "counter", 0, DT_LANE_COMPUTE, 1001, 0);
    e->value = 2.3456789;
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_COUNTER, "lr", "counter", 0, DT_LANE_OPTIM, 1, 0);
    e->value = 3e-4;
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_COUNTER, "activation_bytes", "counter", 0, DT_LANE_COMPUTE, 2, 0);
    e->value = 123456789.0;
    ck_dt(dt_trace_event_add_arg(e, "peak", 2e9)); /* a second series */
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_COUNTER, "neg", "counter", 0, 0, 3, 0);
    e->value = -0.0;
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_COMPLETE, "optimizer", "optim", 0, DT_LANE_OPTIM, 999, 1001);
    e->iter = 0;
    ck_dt(dt_trace_event_add_arg(e, "value", 1.5)); /* "value" is only reserved on counters */
    e = &ev[n++];
    /* a name of exactly DT_TRACE_NAME_MAX - 1 bytes */
    char longname[DT_TRACE_NAME_MAX];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    dt_trace_event_init(e, DT_TRACE_INSTANT, longname, "cat_of_23_bytes_exactly", 0, 0, 0, 0);
    e = &ev[n++]; /* flows: the smallest and the largest id, an extra on one */
    dt_trace_event_init(e, DT_TRACE_FLOW_START, "act", "flow", 0, DT_LANE_COMM, 1500, 0);
    e = &ev[n++];
    dt_trace_event_init(e, DT_TRACE_FLOW_END, "act", "flow", 1, DT_LANE_COMM, INT64_MAX, 0);
    e->flow_id = INT64_MAX;
    ck_dt(dt_trace_event_add_arg(e, "iter", 2)); /* nothing is reserved on a flow */
    return n;
}

/* ---- round trip --------------------------------------------------------- */

START_TEST(test_roundtrip_every_kind)
{
    dt_trace_event ev[32];
    size_t n = make_events(ev);
    const char *p = path_in("all.json");
    const char *cfg = "{\"model\":{\"n_layer\":2,\"name\":\"a\\\"b ✓\"},\"lr\":0.001,\"steps\":[1,2,3],\"z\":null}";
    write_all(p, "dtrain", cfg, ev, n);

    dt_trace *t = NULL;
    ck_dt(dt_trace_read(p, &t));
    ck_assert_int_eq(t->version, DT_TRACE_VERSION);
    ck_assert_str_eq(t->tool, "dtrain");
    ck_assert_ptr_nonnull(t->config_json);
    ck_assert_str_eq(t->config_json,
                     "{\"model\":{\"n_layer\":2,\"name\":\"a\\\"b ✓\"},\"lr\":0.001,\"steps\":[1,2,3],\"z\":null}");
    ck_assert_uint_eq(t->n_events, n);
    for (size_t i = 0; i < n; i++) assert_event_eq(&t->events[i], &ev[i], i);
    dt_trace_free(t);
}
END_TEST

START_TEST(test_roundtrip_random_times)
{
    /* ts/dur exact over the whole range of times (0..INT64_MAX, ts + dur
     * too), including values a double cannot hold to the nanosecond. */
    enum { N = 3000 };
    dt_trace_event *ev = calloc(N, sizeof *ev);
    uint64_t x = 0x1234567887654321ULL;
    for (int i = 0; i < N; i++) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        int shift = i % 64; /* spread magnitudes */
        int64_t ts = (int64_t)((z >> 1) >> shift);
        int64_t dur = (int64_t)(((z * 31) >> 1) >> shift);
        if (dur > INT64_MAX - ts) dur = INT64_MAX - ts;
        dt_trace_event_init(&ev[i], DT_TRACE_COMPLETE, "s", "compute", i % 7, i % 4, ts, dur);
    }
    const char *p = path_in("rand.json");
    write_all(p, "dtsim", NULL, ev, N);
    dt_trace *t = NULL;
    ck_dt(dt_trace_read(p, &t));
    ck_assert_str_eq(t->tool, "dtsim");
    ck_assert_ptr_null(t->config_json);
    ck_assert_uint_eq(t->n_events, N);
    for (int i = 0; i < N; i++) assert_event_eq(&t->events[i], &ev[i], (size_t)i);
    dt_trace_free(t);
    free(ev);
}
END_TEST

START_TEST(test_empty_trace)
{
    const char *p = path_in("empty.json");
    write_all(p, "dtrain", "{}", NULL, 0);
    dt_trace *t = NULL;
    ck_dt(dt_trace_read(p, &t));
    ck_assert_uint_eq(t->n_events, 0);
    ck_assert_str_eq(t->config_json, "{}");
    dt_trace_free(t);
    dt_trace_free(NULL);
    ck_dt(dt_trace_writer_close(NULL));
}
END_TEST

/* The text on disk: layout, exact microseconds, args conventions. */
START_TEST(test_file_layout)
{
    const char *p = path_in("layout.json");
    dt_trace_event ev[6];
    dt_trace_event_init(&ev[0], DT_TRACE_METADATA, "process_name", "meta", 2, 0, 0, 0);
    strcpy(ev[0].label, "rank 2");
    dt_trace_event_init(&ev[1], DT_TRACE_COMPLETE, "forward", "compute", 2, DT_LANE_COMPUTE, 1500, 0);
    ev[1].layer = 0;
    ev[1].iter = 3;
    dt_trace_event_init(&ev[2], DT_TRACE_COMPLETE, "backward", "compute", 2, DT_LANE_COMPUTE, 1, 1000000);
    dt_trace_event_init(&ev[3], DT_TRACE_COUNTER, "loss", "counter", 2, DT_LANE_COMPUTE, 500, 0);
    ev[3].value = 2.5;
    dt_trace_event_init(&ev[4], DT_TRACE_INSTANT, "mark", "data", 2, DT_LANE_DATA, 0, 0);
    ck_dt(dt_trace_event_add_arg(&ev[4], "x", 0.1));
    dt_trace_event_init(&ev[5], DT_TRACE_COUNTER, "lr", "counter", 2, DT_LANE_OPTIM, INT64_MAX, 0);
    ev[5].value = 3.0;
    write_all(p, "dtrain", "{\"a\":1}", ev, 6);

    size_t len;
    char *s = read_bytes(p, &len);
    const char *want =
        "{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"minor_version\":1,\"tool\":\"dtrain\","
        "\"config\":{\"a\":1}},\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"
        "{\"name\":\"process_name\",\"cat\":\"meta\",\"ph\":\"M\",\"ts\":0.000,\"pid\":2,\"tid\":0,"
        "\"args\":{\"name\":\"rank 2\"}},\n"
        "{\"name\":\"forward\",\"cat\":\"compute\",\"ph\":\"X\",\"ts\":1.500,\"dur\":0.000,\"pid\":2,\"tid\":0,"
        "\"args\":{\"iter\":3,\"layer\":0}},\n"
        "{\"name\":\"backward\",\"cat\":\"compute\",\"ph\":\"X\",\"ts\":0.001,\"dur\":1000.000,\"pid\":2,\"tid\":0,"
        "\"args\":{}},\n"
        "{\"name\":\"loss\",\"cat\":\"counter\",\"ph\":\"C\",\"ts\":0.500,\"pid\":2,\"tid\":0,"
        "\"args\":{\"value\":2.5}},\n"
        "{\"name\":\"mark\",\"cat\":\"data\",\"ph\":\"i\",\"ts\":0.000,\"pid\":2,\"tid\":3,"
        "\"args\":{\"x\":0.1}},\n"
        "{\"name\":\"lr\",\"cat\":\"counter\",\"ph\":\"C\",\"ts\":9223372036854775.807,\"pid\":2,\"tid\":2,"
        "\"args\":{\"value\":3.0}}\n"
        "]}\n";
    ck_assert_str_eq(s, want);

    /* An independent parse: valid JSON, numbers are numbers. */
    json_error_t jerr;
    json_t *root = json_loads(s, 0, &jerr);
    ck_assert_msg(root != NULL, "jansson: %s", jerr.text);
    json_t *events = json_object_get(root, "traceEvents");
    ck_assert_uint_eq(json_array_size(events), 6);
    for (size_t i = 0; i < 6; i++) {
        json_t *e = json_array_get(events, i);
        ck_assert(json_is_number(json_object_get(e, "ts")));
        ck_assert(json_is_integer(json_object_get(e, "pid")));
    }
    json_t *counter_args = json_object_get(json_array_get(events, 3), "args");
    ck_assert_uint_eq(json_object_size(counter_args), 1); /* each counter arg is a series */
    json_decref(root);
    free(s);
}
END_TEST

/* Numbers written by hand or another writer: rounded to the nearest ns. */
START_TEST(test_read_number_forms)
{
    static const struct {
        const char *text;
        int64_t ns;
    } cases[] = {
        {"0", 0},
        {"-0", 0},
        {"1", 1000},
        {"1.5", 1500},
        {"1.0005", 1001},
        {"1.0004999", 1000},
        {"-0.0004", 0},
        {"1.5e3", 1500000},
        {"15E-1", 1500},
        {"2e-4", 0},
        {"6e-4", 1},
        {"0.000000000000000000000000000000000000000000000000000000000000000000009e72", 9000000},
        {"9223372036854775.807", INT64_MAX},
        {"123456789012345.678", 123456789012345678LL},
        {"123456789012.345678", 123456789012346LL},
    };
    const char *p = path_in("num.json");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"hand\"},\"traceEvents\":"
                 "[{\"name\":\"a\",\"ph\":\"X\",\"ts\":%s,\"dur\":%s,\"pid\":0,\"tid\":0}]}",
                 cases[i].text, cases[i].ns <= INT64_MAX / 2 ? cases[i].text : "0"); /* ts + dur fits */
        write_bytes(p, text, strlen(text));
        dt_trace *t = NULL;
        ck_dt(dt_trace_read(p, &t));
        ck_assert_msg(t->events[0].ts_ns == cases[i].ns, "%s -> %lld, want %lld", cases[i].text,
                      (long long)t->events[0].ts_ns, (long long)cases[i].ns);
        ck_assert_str_eq(t->events[0].cat, ""); /* cat is optional */
        ck_assert_int_eq(t->events[0].n_extra, 0);
        dt_trace_free(t);
    }
    /* outside int64, or negative (times are >= 0: docs/trace-format.md "Ranges") */
    static const char *const out_of_range[] = {"9223372036854775.808", "-9223372036854775.809", "1e20", "-1e300",
                                               "99999999999999999999999999.0", "-0.0005", "-0.001",
                                               "-9223372036854775.808"};
    for (size_t i = 0; i < sizeof out_of_range / sizeof out_of_range[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"hand\"},\"traceEvents\":"
                 "[{\"name\":\"a\",\"ph\":\"i\",\"ts\":%s,\"pid\":0,\"tid\":0}]}",
                 out_of_range[i]);
        write_bytes(p, text, strlen(text));
        dt_trace *t = NULL;
        ck_assert_int_eq(dt_trace_read(p, &t), DT_ERR_FORMAT);
        ck_assert_ptr_null(t);
        ck_assert_msg(strstr(dt_last_error(), "traceEvents[0]") && strstr(dt_last_error(), "\"ts\""), "%s",
                      dt_last_error());
    }
}
END_TEST

START_TEST(test_unknown_args_and_keys)
{
    /* Unknown top-level keys and non-numeric args are ignored; numeric ones
     * become extras, in file order. */
    const char *p = path_in("extra.json");
    const char *text =
        "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"x\","
        "\"future\":[1]},\"traceEvents\":[\n"
        "{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":2,\"pid\":0,\"tid\":0,\"s\":\"t\",\"id2\":{},"
        "\"args\":{\"note\":\"hi\",\"b\":2,\"layer\":-1,\"a\":1.25,\"flag\":true}},\n"
        "{\"name\":\"c\",\"ph\":\"C\",\"ts\":1,\"pid\":0,\"tid\":0,\"args\":{\"iter\":5,\"value\":7}}\n"
        "],\"metadata\":{\"x\":1}}";
    write_bytes(p, text, strlen(text));
    dt_trace *t = NULL;
    ck_dt(dt_trace_read(p, &t));
    ck_assert_uint_eq(t->n_events, 2);
    dt_trace_event *e = &t->events[0];
    ck_assert_int_eq(e->layer, -1);
    ck_assert_int_eq(e->n_extra, 2);
    ck_assert_str_eq(e->extra[0].key, "b");
    ck_assert(e->extra[0].value == 2.0);
    ck_assert_str_eq(e->extra[1].key, "a");
    ck_assert(e->extra[1].value == 1.25);
    e = &t->events[1];
    ck_assert(e->value == 7.0);
    ck_assert_int_eq(e->iter, DT_TRACE_NONE); /* on a counter, iter is just another series */
    ck_assert_int_eq(e->n_extra, 1);
    ck_assert_str_eq(e->extra[0].key, "iter");
    /* what the reader returns can be written again */
    const char *p2 = path_in("extra2.json");
    write_all(p2, t->tool, t->config_json, t->events, t->n_events);
    dt_trace *t2 = NULL;
    ck_dt(dt_trace_read(p2, &t2));
    for (size_t i = 0; i < t->n_events; i++) assert_event_eq(&t2->events[i], &t->events[i], i);
    dt_trace_free(t2);
    dt_trace_free(t);
}
END_TEST

/* ---- truncation --------------------------------------------------------- */

START_TEST(test_truncated_everywhere)
{
    dt_trace_event ev[32];
    size_t n = make_events(ev);
    const char *full = path_in("full.json");
    write_all(full, "dtrain", "{\"k\":[1,{\"x\":\"}\"}]}", ev, n);
    size_t len;
    char *s = read_bytes(full, &len);
    const char *last = strrchr(s, '}');
    size_t needed = (size_t)(last - s) + 1; /* everything up to the final '}' */
    const char *cut = path_in("cut.json");
    for (size_t k = 0; k < needed; k++) {
        write_bytes(cut, s, k);
        dt_trace *t = (dt_trace *)&t;
        dt_status st = dt_trace_read(cut, &t);
        ck_assert_msg(st == DT_ERR_FORMAT, "cut at %zu/%zu: %s (%s)", k, len, dt_status_str(st), dt_last_error());
        ck_assert_ptr_null(t);
        ck_assert_msg(strstr(dt_last_error(), cut) && strstr(dt_last_error(), "line "),
                      "cut at %zu: message lacks path or line: %s", k, dt_last_error());
    }
    /* without only the final newline it is still a whole trace */
    write_bytes(cut, s, needed);
    dt_trace *t = NULL;
    ck_dt(dt_trace_read(cut, &t));
    ck_assert_uint_eq(t->n_events, n);
    dt_trace_free(t);
    free(s);
}
END_TEST

START_TEST(test_truncation_message)
{
    const char *p = path_in("crash.json");
    const char *text =
        "{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"dtrain\"},\"displayTimeUnit\":\"ns\","
        "\"traceEvents\":[\n"
        "{\"name\":\"a\",\"ph\":\"i\",\"ts\":1.000,\"pid\":0,\"tid\":0,\"args\":{}},\n"
        "{\"name\":\"b\",\"ph\":\"i\",\"ts\":2.000,\"pid\":0,\"tid\":0,\"args\":{}},\n"
        "{\"name\":\"c\",\"ph\":\"i\",\"ts\":3.0";
    write_bytes(p, text, strlen(text));
    dt_trace *t = NULL;
    ck_assert_int_eq(dt_trace_read(p, &t), DT_ERR_FORMAT);
    char want[600];
    snprintf(want, sizeof want, "%s: line 4, column 29 (byte %zu): ", p, strlen(text));
    ck_assert_msg(strncmp(dt_last_error(), want, strlen(want)) == 0, "got: %s\nwant prefix: %s", dt_last_error(), want);
    ck_assert_msg(strstr(dt_last_error(), "traceEvents[2]"), "%s", dt_last_error());

    /* cut between events: says how many events came before */
    const char *text2 =
        "{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"dtrain\"},\"traceEvents\":[\n"
        "{\"name\":\"a\",\"ph\":\"i\",\"ts\":1.000,\"pid\":0,\"tid\":0},\n";
    write_bytes(p, text2, strlen(text2));
    ck_assert_int_eq(dt_trace_read(p, &t), DT_ERR_FORMAT);
    ck_assert_msg(strstr(dt_last_error(), "line 3") && strstr(dt_last_error(), "after 1 events") &&
                      strstr(dt_last_error(), "cut short"),
                  "%s", dt_last_error());
}
END_TEST

START_TEST(test_malformed_files)
{
    /* header: format and version */
    expect_format_error("{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":2,\"tool\":\"t\"},\"traceEvents\":[]}",
                        "version 2", "reads version 1 only", NULL);
    expect_format_error("{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":\"1\",\"tool\":\"t\"},"
                        "\"traceEvents\":[]}",
                        "otherData.version must be an integer", "version 1", NULL);
    expect_format_error("{\"otherData\":{\"format\":\"dtrain-trace\",\"tool\":\"t\"},\"traceEvents\":[]}",
                        "otherData.version is missing", "version 1", NULL);
    expect_format_error("{\"otherData\":{\"format\":\"other\",\"version\":1,\"tool\":\"t\"},\"traceEvents\":[]}",
                        "\"other\"", "dtrain-trace", NULL);
    expect_format_error("{\"otherData\":{\"version\":1,\"tool\":\"t\"},\"traceEvents\":[]}", "otherData.format", NULL);
    expect_format_error("{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1},\"traceEvents\":[]}",
                        "otherData: missing \"tool\"", NULL);
    expect_format_error("{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"t\",\"config\":3},"
                        "\"traceEvents\":[]}",
                        "otherData.config must be an object", NULL);
    expect_format_error("{\"otherData\":[],\"traceEvents\":[]}", "otherData must be an object", NULL);
    /* a Chrome trace from another tool */
    expect_format_error("{\"traceEvents\":[{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0}]}",
                        "not a dtrain trace", NULL);
    expect_format_error("{\"traceEvents\":[{\"name\":\"a\",\"ph\":\"B\",\"ts\":0,\"pid\":0,\"tid\":0}],"
                        "\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"t\"}}",
                        "not a dtrain trace", "before any \"otherData\"", NULL);
    expect_format_error("{\"displayTimeUnit\":\"ns\"}", "not a dtrain trace", NULL);
    /* a future version is refused for its version, not for its events */
    expect_format_error("{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":2,\"tool\":\"t\"},"
                        "\"traceEvents\":[{\"kind\":\"new\"}]}",
                        "version 2", NULL);
    expect_format_error("[{\"name\":\"a\",\"ph\":\"X\",\"ts\":0,\"dur\":1,\"pid\":0,\"tid\":0}]", "line 1",
                        "expected '{'", NULL);
    /* outer shape */
    expect_format_error("", "line 1, column 0 (byte 0)", "empty", NULL);
    expect_format_error("  \n ", "empty", NULL);
    expect_format_error("{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"t\"}}",
                        "no \"traceEvents\"", NULL);
    expect_format_error("{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"t\"},\"traceEvents\":{}}",
                        "traceEvents must be an array, not an object", NULL);
    expect_format_error(HDR OK_EV "]}", "line 3", NULL); /* trailing comma */
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0}\n"
                            "{\"name\":\"b\",\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0}]}",
                        "line 3, column 1", "expected ',' or ']' after traceEvents[0]", NULL);
    expect_format_error(HDR "]} x", "line 2, column 4", "unexpected data after the end", NULL);
    expect_format_error(HDR "]}{}", "unexpected data", NULL);
    expect_format_error("{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"t\"},"
                        "\"traceEvents\":[],\"traceEvents\":[]}",
                        "second \"traceEvents\"", NULL);
    expect_format_error("{\"otherData\" 1}", "expected ':'", NULL);
    expect_format_error("{otherData:1}", "line 1, column 2", NULL);
    expect_format_error(HDR "{\"name\":\"a\xff\",\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0}]}", "line 2",
                        "traceEvents[0]", NULL); /* invalid UTF-8 */
    expect_format_error(HDR "{\"name\":\"a\\u0000b\",\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0}]}", "line 2",
                        NULL); /* NUL inside a name */
}
END_TEST

/* Flow events (minor version 1): their text, the flow a message span makes,
 * what the writer and the reader refuse. */
START_TEST(test_flows)
{
    const char *p = path_in("flows.json");
    dt_trace_event ev[4], fl;
    dt_trace_event_init(&ev[0], DT_TRACE_COMPLETE, "send_act", "pipeline", 0, DT_LANE_COMM, 1000, 500);
    ck_dt(dt_trace_event_add_arg(&ev[0], "flow", 12));
    ck_assert_int_eq(dt_trace_flow_of(&ev[0], &fl), 1);
    ck_assert_int_eq(fl.ph, DT_TRACE_FLOW_START);
    ck_assert_str_eq(fl.name, "act");
    ck_assert_str_eq(fl.cat, "flow");
    ck_assert(fl.ts_ns == 1000 && fl.pid == 0 && fl.tid == DT_LANE_COMM && fl.flow_id == 12);
    ev[1] = fl;
    dt_trace_event_init(&ev[2], DT_TRACE_COMPLETE, "recv_act", "pipeline", 1, DT_LANE_COMM, 900, 700);
    ck_dt(dt_trace_event_add_arg(&ev[2], "flow", 12));
    ck_assert_int_eq(dt_trace_flow_of(&ev[2], &ev[3]), 1);
    ck_assert(ev[3].ph == DT_TRACE_FLOW_END && ev[3].ts_ns == 1600 && ev[3].pid == 1 && ev[3].flow_id == 12);
    write_all(p, "dtrain", NULL, ev, 4);
    size_t len;
    char *s = read_bytes(p, &len);
    ck_assert_msg(strstr(s, "{\"name\":\"act\",\"cat\":\"flow\",\"ph\":\"s\",\"ts\":1.000,\"pid\":0,\"tid\":1,"
                            "\"id\":12,\"args\":{}},\n"),
                  "%s", s);
    ck_assert_msg(strstr(s, "{\"name\":\"act\",\"cat\":\"flow\",\"ph\":\"f\",\"ts\":1.600,\"pid\":1,\"tid\":1,"
                            "\"id\":12,\"bp\":\"e\",\"args\":{}}\n"),
                  "%s", s);
    free(s);
    dt_trace *t = NULL;
    ck_dt(dt_trace_read(p, &t));
    ck_assert_int_eq(t->minor_version, DT_TRACE_VERSION_MINOR);
    for (int i = 0; i < 4; i++) assert_event_eq(&t->events[i], &ev[i], (size_t)i);
    dt_trace_free(t);

    /* spans that make no flow, and damaged ids */
    dt_trace_event_init(&ev[0], DT_TRACE_COMPLETE, "send_grad", "pipeline", 0, DT_LANE_COMM, 0, 1);
    ck_assert_int_eq(dt_trace_flow_of(&ev[0], &fl), 0); /* no "flow" arg */
    dt_trace_event_init(&ev[1], DT_TRACE_COMPLETE, "forward", "pipeline", 0, 0, 0, 1);
    ck_dt(dt_trace_event_add_arg(&ev[1], "flow", 3));
    ck_assert_int_eq(dt_trace_flow_of(&ev[1], &fl), 0); /* neither a send nor a receive */
    const double bad[] = {-1, 2.5, 1e308, 9007199254740992.0, NAN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_trace_event_init(&ev[0], DT_TRACE_COMPLETE, "recv_grad", "pipeline", 0, DT_LANE_COMM, 0, 1);
        ev[0].extra[0].value = bad[i];
        strcpy(ev[0].extra[0].key, "flow");
        ev[0].n_extra = 1;
        ck_assert_msg(dt_trace_flow_of(&ev[0], &fl) == -1, "flow %g", bad[i]);
    }

    /* the writer */
    dt_trace_writer *w = NULL;
    ck_dt(dt_trace_writer_open(path_in("rej.json"), "dtrain", NULL, &w));
    dt_trace_event_init(&fl, DT_TRACE_FLOW_START, "act", "flow", 0, 1, 0, 0);
    fl.flow_id = -1;
    ck_assert_int_eq(dt_trace_write(w, &fl), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "flow_id is -1"), "%s", dt_last_error());
    fl.flow_id = 1;
    fl.iter = 0;
    ck_assert_int_eq(dt_trace_write(w, &fl), DT_ERR_INVALID);
    dt_trace_event_init(&fl, DT_TRACE_COMPLETE, "x", "c", 0, 1, 0, 0);
    fl.flow_id = 5;
    ck_assert_int_eq(dt_trace_write(w, &fl), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "only flows"), "%s", dt_last_error());
    dt_trace_writer_abort(w);

    /* the reader */
#define FLOW(ph, rest) "{\"name\":\"act\",\"ph\":\"" ph "\",\"ts\":0,\"pid\":0,\"tid\":1" rest "}]}"
    expect_format_error(HDR FLOW("s", ""), "traceEvents[0]", "missing \"id\"", NULL);
    expect_format_error(HDR FLOW("s", ",\"id\":-1"), "\"id\" is -1", NULL);
    expect_format_error(HDR FLOW("s", ",\"id\":\"0x1\""), "\"id\" must be an integer", NULL);
    expect_format_error(HDR FLOW("f", ",\"id\":1"), "\"bp\":\"e\"", NULL);
    expect_format_error(HDR FLOW("f", ",\"id\":1,\"bp\":\"g\""), "\"bp\":\"e\"", NULL);
    expect_format_error(HDR FLOW("t", ",\"id\":1"), "X, C, i, M, s and f only", NULL);
#undef FLOW
    /* a later minor version: read, and what it adds is named as such */
    const char *later = "{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"minor_version\":7,\"tool\":\"t\"},"
                        "\"traceEvents\":[\n" OK_EV "{\"name\":\"n\",\"ph\":\"n\",\"ts\":0,\"pid\":0,\"tid\":0}]}";
    expect_format_error(later, "minor version 1 (the file's is 7)", NULL);
    expect_format_error("{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"minor_version\":-1,"
                        "\"tool\":\"t\"},\"traceEvents\":[]}",
                        "otherData: \"minor_version\" is -1", NULL);
}
END_TEST

START_TEST(test_read_io_errors)
{
    dt_trace *t = (dt_trace *)&t;
    const char *p = path_in("does-not-exist.json");
    ck_assert_int_eq(dt_trace_read(p, &t), DT_ERR_IO);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(dt_last_error(), p) && strstr(dt_last_error(), "no such file"), "%s", dt_last_error());
    ck_assert_int_eq(dt_trace_read(g_dir, &t), DT_ERR_IO); /* a directory */
    ck_assert_msg(strstr(dt_last_error(), g_dir), "%s", dt_last_error());
    ck_assert_int_eq(dt_trace_read(NULL, &t), DT_ERR_INVALID);
    /* issue 34 D5: a FIFO without a writer (it would block for ever) and /dev/zero (it never ends) are
     * refused before a byte is read, by both readers */
    const char *fifo = path_in("fifo.json");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(dt_trace_read(fifo, &t), DT_ERR_IO);
    ck_assert_msg(strstr(dt_last_error(), fifo) && strstr(dt_last_error(), "pipe (FIFO)"), "%s", dt_last_error());
    ck_assert_int_eq(dt_trace_read_header(fifo, &t), DT_ERR_IO);
    ck_assert_ptr_null(t);
    unlink(fifo);
    if (access("/dev/zero", R_OK) == 0) {
        ck_assert_int_eq(dt_trace_read("/dev/zero", &t), DT_ERR_IO);
        ck_assert_msg(strstr(dt_last_error(), "character device"), "%s", dt_last_error());
        ck_assert_int_eq(dt_trace_read_header("/dev/zero", &t), DT_ERR_IO);
    }
}
END_TEST

/* otherData.config.machine.cluster: at most 4096 bytes, as dtrain records it (issue 34) */
START_TEST(test_read_cluster_cap)
{
    for (int len = 4096; len <= 4097; len++) {
        char *text = malloc(8192);
        ck_assert_ptr_nonnull(text);
        int n = snprintf(text, 8192,
                         "{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"t\","
                         "\"config\":{\"machine\":{\"host\":null,\"cluster\":\"");
        memset(text + n, 'c', (size_t)len);
        snprintf(text + n + len, 8192 - (size_t)(n + len), "\"}}},\"traceEvents\":[]}");
        dt_trace *t = NULL;
        const dt_status st = dt_trace_read_mem("c.json", text, strlen(text), &t);
        if (len == 4096) {
            ck_assert_int_eq(st, DT_OK);
            dt_trace_free(t);
        } else {
            ck_assert_int_eq(st, DT_ERR_FORMAT);
            ck_assert_msg(strstr(dt_last_error(), "machine.cluster is 4097 bytes"), "%s", dt_last_error());
        }
        free(text);
    }
}
END_TEST

/* ---- writer errors ------------------------------------------------------ */

START_TEST(test_unwritable_path)
{
    dt_trace_writer *w = (dt_trace_writer *)&w;
    const char *p = path_in("no/such/dir/x.json");
    ck_assert_int_eq(dt_trace_writer_open(p, "dtrain", NULL, &w), DT_ERR_IO);
    ck_assert_ptr_null(w);
    char want[1300], dir[600];
    snprintf(dir, sizeof dir, "%s", p);
    *strrchr(dir, '/') = '\0';
    snprintf(want, sizeof want, "%s: directory %s: No such file or directory (expected an existing directory)", p, dir);
    ck_assert_str_eq(dt_last_error(), want);
    ck_assert_int_eq(dt_trace_writer_open(g_dir, "dtrain", NULL, &w), DT_ERR_IO); /* a directory */
}
END_TEST

START_TEST(test_full_disk)
{
    /* /dev/full: the header flush at open already fails. */
    dt_trace_writer *w = NULL;
    if (access("/dev/full", W_OK) == 0) {
        ck_assert_int_eq(dt_trace_writer_open("/dev/full", "dtrain", NULL, &w), DT_ERR_IO);
        ck_assert_ptr_null(w);
        ck_assert_msg(strstr(dt_last_error(), "/dev/full") && strstr(dt_last_error(), "No space left"), "%s",
                      dt_last_error());
    }
    /* A file size limit hit mid-stream: some write or the close must fail,
     * and every call after the first failure fails too. */
    const char *p = path_in("limited.json");
    ck_dt(dt_trace_writer_open(p, "dtrain", NULL, &w));
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 8192;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, "forward", "compute", 0, 0, 0, 10);
    dt_status st = DT_OK;
    int i;
    for (i = 0; i < 2000 && st == DT_OK; i++) st = dt_trace_write(w, &e);
    if (st == DT_OK) {
        st = dt_trace_writer_close(w);
    } else {
        ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_IO); /* sticky */
        ck_assert_msg(strstr(dt_last_error(), "earlier write failed"), "%s", dt_last_error());
        ck_assert_int_eq(dt_trace_writer_close(w), DT_ERR_IO);
    }
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, old_handler);
    ck_assert_int_eq(st, DT_ERR_IO);
    ck_assert_msg(strstr(dt_last_error(), p) != NULL, "%s", dt_last_error());
}
END_TEST

START_TEST(test_writer_rejects)
{
    const char *p = path_in("rejects.json");
    dt_trace_writer *w = NULL;
    ck_dt(dt_trace_writer_open(p, "dtrain", NULL, &w));
    dt_trace_event e;

    dt_trace_event_init(&e, 'B', "begin", "compute", 0, 0, 0, 0);
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), p) && strstr(dt_last_error(), "\"begin\""), "%s", dt_last_error());

    dt_trace_event_init(&e, DT_TRACE_COUNTER, "loss", "counter", 0, 0, 0, 0);
    e.iter = 3;
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "series"), "%s", dt_last_error());

    dt_trace_event_init(&e, DT_TRACE_COUNTER, "loss", "counter", 0, 0, 0, 0);
    e.value = NAN;
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_NUMERIC);
    e.value = INFINITY;
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_NUMERIC);

    dt_trace_event_init(&e, DT_TRACE_COMPLETE, "forward", "compute", 0, 0, 0, -1);
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "negative"), "%s", dt_last_error());

    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", 0, 0, 0, 5);
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);

    /* what readers refuse (docs/trace-format.md "Ranges") is not written */
    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", 0, 0, -1, 0);
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "ts_ns is -1"), "%s", dt_last_error());
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, "forward", "compute", 0, 0, INT64_MAX, 1);
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);
    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", -1, 0, 0, 0);
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);
    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", 0, 4, 0, 0);
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);
    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", 0, 0, 0, 0);
    e.iter = -1;
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);
    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", 0, 0, 0, 0);
    e.layer = -2;
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);
    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", 0, 0, 0, 0);
    e.bytes = -5;
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);

    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", 0, 0, 0, 0);
    e.value = 1.0;
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);

    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", 0, 0, 0, 0);
    strcpy(e.label, "x");
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);

    dt_trace_event_init(&e, DT_TRACE_INSTANT, "", "compute", 0, 0, 0, 0);
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);

    dt_trace_event_init(&e, DT_TRACE_INSTANT, "bad \xff utf8", "compute", 0, 0, 0, 0);
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "UTF-8"), "%s", dt_last_error());

    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", 0, 0, 0, 0);
    memset(e.name, 'x', sizeof e.name); /* not NUL-terminated */
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);

    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", 0, 0, 0, 0);
    e.n_extra = DT_TRACE_MAX_EXTRA + 1;
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);
    e.n_extra = 2; /* filled by hand: duplicate keys */
    strcpy(e.extra[0].key, "a");
    strcpy(e.extra[1].key, "a");
    ck_assert_int_eq(dt_trace_write(w, &e), DT_ERR_INVALID);

    /* a rejected event leaves nothing behind: the file is still valid */
    dt_trace_event_init(&e, DT_TRACE_INSTANT, "good", "compute", 0, 0, 42, 0);
    ck_dt(dt_trace_write(w, &e));
    ck_dt(dt_trace_writer_close(w));
    dt_trace *t = NULL;
    ck_dt(dt_trace_read(p, &t));
    ck_assert_uint_eq(t->n_events, 1);
    ck_assert_str_eq(t->events[0].name, "good");
    dt_trace_free(t);
}
END_TEST

START_TEST(test_open_rejects)
{
    dt_trace_writer *w = (dt_trace_writer *)&w;
    const char *p = path_in("never.json");
    ck_assert_int_eq(dt_trace_writer_open(p, "dtrain", "{not json", &w), DT_ERR_INVALID);
    ck_assert_ptr_null(w);
    ck_assert_msg(strstr(dt_last_error(), p) && strstr(dt_last_error(), "config"), "%s", dt_last_error());
    ck_assert_int_eq(dt_trace_writer_open(p, "dtrain", "[1,2]", &w), DT_ERR_INVALID);
    ck_assert_int_eq(dt_trace_writer_open(p, "dtrain", "{\"a\":1,\"a\":2}", &w), DT_ERR_INVALID);
    ck_assert_int_eq(dt_trace_writer_open(p, "dtrain", "{} trailing", &w), DT_ERR_INVALID);
    ck_assert_int_eq(dt_trace_writer_open(p, NULL, NULL, &w), DT_ERR_INVALID);
    ck_assert_int_eq(dt_trace_writer_open(p, "", NULL, &w), DT_ERR_INVALID);
    ck_assert_int_eq(dt_trace_writer_open(p, "a_tool_name_of_32_bytes_exactly!", NULL, &w), DT_ERR_INVALID);
    ck_assert_int_eq(dt_trace_writer_open(NULL, "dtrain", NULL, &w), DT_ERR_INVALID);
    ck_assert_msg(access(p, F_OK) != 0, "a refused open must not create the file");
}
END_TEST

/* ---- event helpers ------------------------------------------------------ */

START_TEST(test_event_init_and_args)
{
    dt_trace_event e;
    memset(&e, 0x5a, sizeof e);
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, "forward", "compute", 1, 2, 3, 4);
    ck_assert_int_eq(e.ph, 'X');
    ck_assert_str_eq(e.name, "forward");
    ck_assert_str_eq(e.cat, "compute");
    ck_assert_int_eq(e.pid, 1);
    ck_assert_int_eq(e.tid, 2);
    ck_assert_int_eq(e.ts_ns, 3);
    ck_assert_int_eq(e.dur_ns, 4);
    ck_assert_int_eq(e.iter, DT_TRACE_NONE);
    ck_assert_int_eq(e.micro_batch, DT_TRACE_NONE);
    ck_assert_int_eq(e.layer, DT_TRACE_NONE);
    ck_assert_int_eq(e.bytes, DT_TRACE_NONE);
    ck_assert(e.value == 0.0);
    ck_assert_str_eq(e.label, "");
    ck_assert_int_eq(e.n_extra, 0);

    /* too long: cut on a character boundary, never mid UTF-8 sequence */
    char longname[100];
    strcpy(longname, "0123456789012345678901234567890123456789012345");
    strcat(longname, "µµµ"); /* 46 ASCII bytes, then 2-byte characters */
    dt_trace_event_init(&e, DT_TRACE_INSTANT, longname, NULL, 0, 0, 0, 0);
    ck_assert_uint_eq(strlen(e.name), 46);
    ck_assert_str_eq(e.cat, "");

    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", 0, 0, 0, 0);
    char key[32];
    for (int i = 0; i < DT_TRACE_MAX_EXTRA; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ck_dt(dt_trace_event_add_arg(&e, key, i));
    }
    ck_assert_int_eq(e.n_extra, DT_TRACE_MAX_EXTRA);
    ck_assert_int_eq(dt_trace_event_add_arg(&e, "one_too_many", 1), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "DT_TRACE_MAX_EXTRA"), "%s", dt_last_error());
    ck_assert_int_eq(e.n_extra, DT_TRACE_MAX_EXTRA);

    dt_trace_event_init(&e, DT_TRACE_INSTANT, "mark", "compute", 0, 0, 0, 0);
    ck_dt(dt_trace_event_add_arg(&e, "a_key_of_23_bytes_xxxxx", 1));
    ck_assert_int_eq(dt_trace_event_add_arg(&e, "a_key_of_24_bytes_xxxxxx", 1), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "longer than 23"), "%s", dt_last_error());
    ck_assert_int_eq(dt_trace_event_add_arg(&e, "", 1), DT_ERR_INVALID);
    ck_assert_int_eq(dt_trace_event_add_arg(&e, NULL, 1), DT_ERR_INVALID);
    ck_assert_int_eq(dt_trace_event_add_arg(&e, "a_key_of_23_bytes_xxxxx", 2), DT_ERR_INVALID); /* twice */
    ck_assert_int_eq(dt_trace_event_add_arg(&e, "layer", 2), DT_ERR_INVALID);                   /* use the field */
    ck_assert_int_eq(dt_trace_event_add_arg(&e, "nan", NAN), DT_ERR_NUMERIC);
    ck_assert_int_eq(e.n_extra, 1);

    dt_trace_event_init(&e, DT_TRACE_COUNTER, "loss", "counter", 0, 0, 0, 0);
    ck_assert_int_eq(dt_trace_event_add_arg(&e, "value", 2), DT_ERR_INVALID);
    ck_dt(dt_trace_event_add_arg(&e, "layer", 2)); /* just a series name on a counter */
    dt_trace_event_init(&e, DT_TRACE_METADATA, "thread_name", "meta", 0, 0, 0, 0);
    ck_assert_int_eq(dt_trace_event_add_arg(&e, "name", 2), DT_ERR_INVALID);
}
END_TEST

START_TEST(test_many_events)
{
    /* streaming: a longer trace, the shape the trainer produces */
    const char *p = path_in("many.json");
    dt_trace_writer *w = NULL;
    ck_dt(dt_trace_writer_open(p, "dtrain", "{\"n_layer\":4}", &w));
    dt_trace_event e;
    int64_t t = 0;
    size_t n = 0;
    for (int it = 0; it < 200; it++)
        for (int mb = 0; mb < 2; mb++)
            for (int pass = 0; pass < 2; pass++)
                for (int l = -1; l <= 4; l++) {
                    dt_trace_event_init(&e, DT_TRACE_COMPLETE, pass ? "backward" : "forward", "compute", 0,
                                        DT_LANE_COMPUTE, t, 1234);
                    e.iter = it;
                    e.micro_batch = mb;
                    e.layer = l;
                    ck_dt(dt_trace_write(w, &e));
                    t += 1500;
                    n++;
                }
    ck_dt(dt_trace_writer_close(w));
    dt_trace *tr = NULL;
    ck_dt(dt_trace_read(p, &tr));
    ck_assert_uint_eq(tr->n_events, n);
    ck_assert_int_eq(tr->events[n - 1].iter, 199);
    ck_assert_int_eq(tr->events[n - 1].layer, 4);
    ck_assert_int_eq(tr->events[n - 1].ts_ns, (int64_t)(n - 1) * 1500);
    ck_assert_str_eq(tr->events[n - 1].name, "backward");
    dt_trace_free(tr);
}
END_TEST

static Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *core = tcase_create("core");
    tcase_add_checked_fixture(core, setup_dir, teardown_dir);
    tcase_add_test(core, test_roundtrip_every_kind);
    tcase_add_test(core, test_roundtrip_random_times);
    tcase_add_test(core, test_empty_trace);
    tcase_add_test(core, test_file_layout);
    tcase_add_test(core, test_read_number_forms);
    tcase_add_test(core, test_unknown_args_and_keys);
    tcase_add_test(core, test_event_init_and_args);
    tcase_add_test(core, test_many_events);
    tcase_add_test(core, test_flows);
    suite_add_tcase(s, core);

    TCase *limits = tcase_create("limits");
    tcase_add_checked_fixture(limits, setup_dir, teardown_dir);
    tcase_set_timeout(limits, 60);
    tcase_add_test(limits, test_truncated_everywhere);
    tcase_add_test(limits, test_truncation_message);
    tcase_add_test(limits, test_malformed_files);
    tcase_add_test(limits, test_read_io_errors);
    tcase_add_test(limits, test_read_cluster_cap);
    tcase_add_test(limits, test_unwritable_path);
    tcase_add_test(limits, test_full_disk);
    tcase_add_test(limits, test_writer_rejects);
    tcase_add_test(limits, test_open_rejects);
    suite_add_tcase(s, limits);
    return s;
}

int main(void) { return dt_test_run(trace_suite()); }
