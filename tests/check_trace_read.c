/* check_trace_read.c: the trace reader's refusals of events and values
 * (the malformed files and the writer stay in check_trace.c): malformed
 * events, the ranges of docs/trace-format.md "Ranges" (issue 20's F1), and
 * reading a trace's header alone (F13). */
#define _GNU_SOURCE
#include <check.h>
#include <stdint.h>

#include "trace_testutil.h"

START_TEST(test_malformed_events)
{
    expect_format_error(HDR OK_EV "{\"name\":\"a\",\"ts\":0,\"pid\":0,\"tid\":0}]}", "traceEvents[1]: missing \"ph\"",
                        NULL);
    expect_format_error(HDR OK_EV "{\"name\":\"a\",\"ph\":7,\"ts\":0,\"pid\":0,\"tid\":0}]}", "traceEvents[1]",
                        "\"ph\"", "an integer", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"B\",\"ts\":0,\"pid\":0,\"tid\":0}]}", "traceEvents[0]",
                        "\"ph\" is \"B\"", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"XX\",\"ts\":0,\"pid\":0,\"tid\":0}]}", "\"ph\"", NULL);
    expect_format_error(HDR "{\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0}]}", "missing \"name\"", NULL);
    expect_format_error(HDR "{\"name\":\"\",\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0}]}", "\"name\" is empty", NULL);
    expect_format_error(HDR "{\"name\":[],\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0}]}", "\"name\" must be a string",
                        "an array", NULL);
    expect_format_error(HDR "{\"name\":\"0123456789012345678901234567890123456789012345678\",\"ph\":\"i\",\"ts\":0,"
                            "\"pid\":0,\"tid\":0}]}",
                        "\"name\" is 49 bytes, longer than 47", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"cat\":1,\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0}]}", "\"cat\"", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"pid\":0,\"tid\":0}]}", "missing \"ts\"", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"ts\":\"5\",\"pid\":0,\"tid\":0}]}",
                        "\"ts\" must be a number", "a string", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"X\",\"ts\":0,\"pid\":0,\"tid\":0}]}", "missing \"dur\"", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"X\",\"ts\":0,\"dur\":-0.001,\"pid\":0,\"tid\":0}]}",
                        "\"dur\" is negative", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"tid\":0}]}", "missing \"pid\"", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"pid\":1.5,\"tid\":0}]}",
                        "\"pid\" must be an integer", "a real number", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":\"main\"}]}",
                        "\"tid\" must be an integer", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"pid\":4294967296,\"tid\":0}]}",
                        "\"pid\" is 4294967296; expected 0..2147483647", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0,\"args\":[]}]}",
                        "\"args\" must be an object", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"X\",\"ts\":0,\"dur\":1,\"pid\":0,\"tid\":0,"
                            "\"args\":{\"layer\":\"3\"}}]}",
                        "\"args.layer\" must be an integer", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"X\",\"ts\":0,\"dur\":1,\"pid\":0,\"tid\":0,"
                            "\"args\":{\"iter\":1.5}}]}",
                        "\"args.iter\" must be an integer", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"X\",\"ts\":0,\"dur\":1,\"pid\":0,\"tid\":0,"
                            "\"args\":{\"micro_batch\":3000000000}}]}",
                        "\"args.micro_batch\" is 3000000000; expected 0..2147483647", NULL);
    expect_format_error(HDR "{\"name\":\"loss\",\"ph\":\"C\",\"ts\":0,\"pid\":0,\"tid\":0,\"args\":{}}]}",
                        "missing \"args.value\"", NULL);
    expect_format_error(HDR "{\"name\":\"loss\",\"ph\":\"C\",\"ts\":0,\"pid\":0,\"tid\":0}]}", "missing \"args.value\"",
                        NULL);
    expect_format_error(HDR
                        "{\"name\":\"loss\",\"ph\":\"C\",\"ts\":0,\"pid\":0,\"tid\":0,\"args\":{\"value\":\"1\"}}]}",
                        "\"args.value\" must be a number", NULL);
    expect_format_error(HDR "{\"name\":\"process_name\",\"ph\":\"M\",\"ts\":0,\"pid\":0,\"tid\":0,\"args\":{}}]}",
                        "missing \"args.name\"", NULL);
    expect_format_error(HDR "{\"name\":\"process_name\",\"ph\":\"M\",\"ts\":0,\"pid\":0,\"tid\":0,"
                            "\"args\":{\"name\":5}}]}",
                        "\"args.name\" must be a string", NULL);
    /* not an object */
    expect_format_error(HDR OK_EV "42]}", "traceEvents[1]: not an object (an integer)", NULL);
    expect_format_error(HDR "[1,2]]}", "traceEvents[0]: not an object (an array)", NULL);
    expect_format_error(HDR "\"x\"]}", "traceEvents[0]: not an object (a string)", NULL);
    /* too many numeric extras: an error, not a silent drop */
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0,\"args\":{\"a1\":1,\"a2\":2,"
                            "\"a3\":3,\"a4\":4,\"a5\":5,\"a6\":6,\"a7\":7,\"a8\":8,\"a9\":9}}]}",
                        "traceEvents[0]", "more than 8 numeric args", "\"a9\"", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0,"
                            "\"args\":{\"a_key_of_twenty_four_byt\":1}}]}",
                        "numeric arg key", NULL);
    /* duplicate keys */
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"ts\":1,\"pid\":0,\"tid\":0}]}", "duplicate",
                        "line 2", "traceEvents[0]", NULL);
}
END_TEST

/* The ranges of docs/trace-format.md "Ranges", from the format and from
 * otherData.config: issue 20's F1 (an iter of 2^62 made dtsim validate and
 * dtviz overflow a heap buffer sized (iter + 1) * 8). */
#define CFG_HDR(cfg) \
    "{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"t\",\"config\":" cfg "},\"traceEvents\":[\n"
#define SPAN(args) "{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":1,\"pid\":0,\"tid\":0,\"args\":" args "}]}"
START_TEST(test_ranges)
{
    /* F1's input: iter 2^62 under train_iters 2, and 2^31 - 1 */
    expect_format_error(CFG_HDR("{\"train_iters\":2}") SPAN("{\"iter\":4611686018427387904}"), "traceEvents[0]",
                        "\"args.iter\" is 4611686018427387904; expected 0..2 (otherData.config.train_iters)", NULL);
    expect_format_error(CFG_HDR("{\"train_iters\":2}") SPAN("{\"iter\":2147483647}"), "\"args.iter\" is 2147483647",
                        NULL);
    expect_format_error(HDR SPAN("{\"iter\":2147483648}"), "expected 0..2147483647 (no otherData.config.train_iters)",
                        NULL);
    expect_format_error(HDR SPAN("{\"iter\":-1}"), "\"args.iter\" is -1; expected 0..", NULL);
    expect_format_error(HDR SPAN("{\"micro_batch\":-1}"), "\"args.micro_batch\" is -1", NULL);
    expect_format_error(HDR SPAN("{\"layer\":-2}"), "\"args.layer\" is -2; expected -1..", NULL);
    expect_format_error(HDR SPAN("{\"bytes\":-1}"), "\"args.bytes\" is -1", NULL);
    expect_format_error(CFG_HDR("{\"num_layers\":2}") SPAN("{\"layer\":3}"),
                        "\"args.layer\" is 3; expected -1..2 (otherData.config.num_layers)", NULL);
    /* ranks: below t*p*d, plus the servers under a parameter server */
    expect_format_error(CFG_HDR("{\"data_parallel_size\":2,\"pipeline_model_parallel_size\":2}")
                            "{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"pid\":4,\"tid\":0}]}",
                        "\"pid\" is 4; expected 0..3 (otherData.config: a world of 4 ranks", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"pid\":-1,\"tid\":0}]}", "\"pid\" is -1", NULL);
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":4}]}",
                        "\"tid\" is 4; expected 0..3 (a lane", NULL);
    /* times: >= 0, and a span ends at a representable time */
    expect_format_error(HDR "{\"name\":\"a\",\"ph\":\"X\",\"ts\":9223372036854775.000,\"dur\":1,\"pid\":0,"
                            "\"tid\":0}]}",
                        "\"ts\" + \"dur\"", "past the largest time", NULL);
    /* config keys that set a range must be sane integers */
    expect_format_error(CFG_HDR("{\"train_iters\":-1}") "]}", "otherData.config: \"train_iters\": expected an integer in 0..",
                        "not -1", NULL);
    expect_format_error(CFG_HDR("{\"data_parallel_size\":\"2\"}") "]}", "otherData.config: \"data_parallel_size\"",
                        "a string", NULL);

    /* the edges themselves are accepted: iter = train_iters (the evaluation
     * after the last step), a ps-async server's W * train_iters - 1, the
     * last rank of a world with servers, the head's layer */
    static const char *const ok[] = {
        CFG_HDR("{\"train_iters\":2,\"num_layers\":2}") SPAN("{\"iter\":2,\"layer\":2}"),
        CFG_HDR("{\"train_iters\":4,\"allreduce\":\"ps-async\",\"data_parallel_size\":3,\"num_ps_servers\":2}")
            "{\"name\":\"apply\",\"ph\":\"X\",\"ts\":0,\"dur\":1,\"pid\":4,\"tid\":2,\"args\":{\"iter\":12}}]}",
        HDR "{\"name\":\"a\",\"ph\":\"X\",\"ts\":9223372036854775.000,\"dur\":0.807,\"pid\":2147483647,"
            "\"tid\":3,\"args\":{\"iter\":2147483647,\"layer\":-1}}]}",
    };
    const char *p = path_in("ok.json");
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        write_bytes(p, ok[i], strlen(ok[i]));
        dt_trace *t = NULL;
        ck_dt(dt_trace_read(p, &t));
        ck_assert_uint_eq(t->n_events, 1);
        dt_trace_free(t);
    }
}
END_TEST

/* dt_trace_read_header (dtsim run --config; issue 20, F13): the header of a
 * trace whose events are cut short and followed by garbage, in prefixes
 * (a header past the first 64 KiB); a header cut short is refused. */
START_TEST(test_read_header)
{
    const char *p = path_in("hdr.json");
    size_t pad = 200000; /* a config longer than the first 64 KiB read */
    char *text = malloc(pad + 512);
    int n = snprintf(text, 512, "{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"dtsim\","
                                "\"config\":{\"train_iters\":3,\"pad\":\"");
    memset(text + n, 'p', pad);
    n += (int)pad;
    n += snprintf(text + n, 512, "\"}},\"traceEvents\":[\n{\"name\":\"forw\x01\x02 garbage");
    write_bytes(p, text, (size_t)n);
    dt_trace *t = NULL;
    ck_dt(dt_trace_read_header(p, &t));
    ck_assert_str_eq(t->tool, "dtsim");
    ck_assert_uint_eq(t->n_events, 0);
    ck_assert(strstr(t->config_json, "\"train_iters\":3") != NULL);
    dt_trace_free(t);
    ck_assert_int_eq(dt_trace_read(p, &t), DT_ERR_FORMAT); /* the whole file is refused */
    write_bytes(p, text, 100);                            /* the header cut short */
    ck_assert_int_eq(dt_trace_read_header(p, &t), DT_ERR_FORMAT);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(dt_last_error(), "line 1"), "%s", dt_last_error());
    free(text);
    ck_assert_int_eq(dt_trace_read_header(path_in("missing.json"), &t), DT_ERR_IO);
}
END_TEST

static Suite *trace_read_suite(void)
{
    Suite *s = suite_create("trace_read");
    TCase *tc = tcase_create("values");
    tcase_add_checked_fixture(tc, setup_dir, teardown_dir);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_malformed_events);
    tcase_add_test(tc, test_ranges);
    tcase_add_test(tc, test_read_header);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(trace_read_suite()); }
