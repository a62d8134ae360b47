/* check_fuzz_regress.c: the fuzzers' harnesses (fuzz/*.c) run on every
 * input kept in the source tree: the crash inputs found by `make fuzz`
 * (fuzz/regress/TARGET/*, fixed since) and the seed corpus
 * (fuzz/corpus/TARGET/*). Each harness aborts when a reader breaks its
 * contract (an accepted input that does not round-trip, a refusal without
 * a message, ...); under --enable-sanitizers a memory error or undefined
 * behaviour fails the test too. The harness files are compiled into this
 * test as they are (their LLVMFuzzerTestOneInput renamed), so the test
 * checks exactly what the fuzzer checks. The name of each input goes to
 * stderr before it runs, so a failure's log names the input. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define LLVMFuzzerTestOneInput fuzz_trace_read_one
#include "../fuzz/trace_read.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_hw_one
#include "../fuzz/hw.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_sim_config_one
#include "../fuzz/sim_config.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_args_one
#include "../fuzz/args.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_checkpoint_one
#include "../fuzz/checkpoint.c"
#undef LLVMFuzzerTestOneInput

#ifndef DT_SRCDIR
#define DT_SRCDIR "."
#endif

typedef int (*fuzz_one_fn)(const uint8_t *data, size_t size);

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Feeds every regular file of DT_SRCDIR/fuzz/SUB/TARGET to one; returns
 * how many (0 when the folder does not exist). */
static int feed_dir(const char *sub, const char *target, fuzz_one_fn one)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/fuzz/%s/%s", DT_SRCDIR, sub, target);
    DIR *d = opendir(dir);
    if (!d) return 0;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof *names);
            ck_assert_ptr_nonnull(names);
        }
        names[n] = strdup(de->d_name);
        ck_assert_ptr_nonnull(names[n]);
        n++;
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, cmp_str);
    int fed = 0;
    for (size_t i = 0; i < n; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        ck_assert_msg(f != NULL, "cannot open %s", path);
        uint8_t *buf = NULL;
        size_t len = 0, bcap = 0;
        for (;;) {
            if (len == bcap) {
                bcap = bcap ? 2 * bcap : 4096;
                buf = realloc(buf, bcap);
                ck_assert_ptr_nonnull(buf);
            }
            size_t got = fread(buf + len, 1, bcap - len, f);
            len += got;
            if (got == 0) break;
        }
        fclose(f);
        fprintf(stderr, "fuzz input %s (%zu bytes)\n", path, len);
        /* an exact-size copy, as the fuzzer hands it over */
        uint8_t *exact = malloc(len ? len : 1);
        ck_assert_ptr_nonnull(exact);
        if (len) memcpy(exact, buf, len);
        free(buf);
        ck_assert_int_eq(one(exact, len), 0);
        free(exact);
        free(names[i]);
        fed++;
    }
    free(names);
    return fed;
}

static void feed_target(const char *target, fuzz_one_fn one, int min_seeds)
{
    const int seeds = feed_dir("corpus", target, one);
    const int regress = feed_dir("regress", target, one);
    fprintf(stderr, "%s: %d seeds, %d regression inputs\n", target, seeds, regress);
    ck_assert_msg(seeds >= min_seeds, "fuzz/corpus/%s: %d seed inputs, expected at least %d", target, seeds, min_seeds);
}

START_TEST(test_trace_read) { feed_target("trace_read", fuzz_trace_read_one, 3); }
END_TEST

START_TEST(test_hw) { feed_target("hw", fuzz_hw_one, 3); }
END_TEST

START_TEST(test_sim_config) { feed_target("sim_config", fuzz_sim_config_one, 3); }
END_TEST

START_TEST(test_args) { feed_target("args", fuzz_args_one, 3); }
END_TEST

START_TEST(test_checkpoint) { feed_target("checkpoint", fuzz_checkpoint_one, 3); }
END_TEST

/* The empty input and one byte: every harness takes them. */
START_TEST(test_tiny_inputs)
{
    static const uint8_t one[1] = {'{'};
    fuzz_one_fn fns[] = {fuzz_trace_read_one, fuzz_hw_one, fuzz_sim_config_one, fuzz_args_one, fuzz_checkpoint_one};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        ck_assert_int_eq(fns[i](one, 0), 0);
        ck_assert_int_eq(fns[i](one, 1), 0);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fuzz_regress");
    TCase *tc = tcase_create("inputs");
    tcase_add_test(tc, test_trace_read);
    tcase_add_test(tc, test_hw);
    tcase_add_test(tc, test_sim_config);
    tcase_add_test(tc, test_args);
    tcase_add_test(tc, test_checkpoint);
    tcase_add_test(tc, test_tiny_inputs);
    suite_add_tcase(s, tc);
    return dt_test_run(s);
}
