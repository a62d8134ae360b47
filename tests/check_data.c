/* check_data.c: the data module (dt_data.h): synthetic tasks (format of
 * every example, target masks, example ids, determinism, train/validation
 * disjointness), text files (splits, window placement, every error case)
 * and exact-match counting.
 *
 * Batches are parsed back from tokens and targets alone: a row's T+1 bytes
 * are tokens[0..T-1] plus targets[T-1] (known only when that target
 * counts), and every complete example found must be a correct instance of
 * its task with exactly its answer targets counted. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#define MAXEX 160

/* Check records every passing ck_assert (one write(2) each), which would
 * dominate these byte-by-byte loops; REQUIRE only calls into Check on
 * failure. */
#define REQUIRE(cond, ...)                      \
    do {                                        \
        if (!(cond)) ck_abort_msg(__VA_ARGS__); \
    } while (0)
#define REQUIRE_EQ(a, b)                                                                               \
    do {                                                                                               \
        long long req_a_ = (long long)(a), req_b_ = (long long)(b);                                    \
        if (req_a_ != req_b_) ck_abort_msg("%s == %lld, expected %s == %lld", #a, req_a_, #b, req_b_); \
    } while (0)

typedef struct parsed_ex {
    char prompt[MAXEX]; /* up to and including '=' ("" if the cut came before it) */
    char answer[MAXEX]; /* without the '\n' */
    int complete;
} parsed_ex;

typedef struct parsed_batch {
    parsed_ex *ex;
    int n, cap;
    int n_complete;
    int n_counted; /* targets >= 0 */
} parsed_batch;

static void pb_push(parsed_batch *pb, const parsed_ex *e)
{
    if (pb->n == pb->cap) {
        pb->cap = pb->cap ? 2 * pb->cap : 256;
        pb->ex = realloc(pb->ex, (size_t)pb->cap * sizeof *pb->ex);
        ck_assert_ptr_nonnull(pb->ex);
    }
    pb->ex[pb->n++] = *e;
}

static void pb_free(parsed_batch *pb)
{
    free(pb->ex);
    memset(pb, 0, sizeof *pb);
}

/* Parse one row, asserting the target mask and example ids on the way. */
static void parse_row(const int32_t *tok, const int32_t *tgt, const int32_t *exid, int T, int *next_id,
                      parsed_batch *pb)
{
    int bytes[T + 1];
    for (int t = 0; t < T; t++) {
        REQUIRE(tok[t] >= 0 && tok[t] <= 255, "token %d out of range: %d", t, tok[t]);
        bytes[t] = tok[t];
        if (tgt[t] >= 0) pb->n_counted++;
    }
    bytes[T] = tgt[T - 1]; /* -1 when unknown (the last example was cut) */
    int pos = 0;
    while (pos <= T) {
        int eq = -1, nl = -1;
        for (int q = pos; q <= T && bytes[q] >= 0; q++)
            if (bytes[q] == '=') {
                eq = q;
                break;
            }
        if (eq >= 0)
            for (int q = eq + 1; q <= T && bytes[q] >= 0; q++)
                if (bytes[q] == '\n') {
                    nl = q;
                    break;
                }
        parsed_ex e;
        memset(&e, 0, sizeof e);
        if (nl < 0) { /* cut by the window end: nothing counts, no newline in it */
            for (int q = pos; q < T; q++) {
                REQUIRE(tgt[q] == -1, "target %d of a cut example counts", q);
                REQUIRE_EQ(exid[q], -1);
                REQUIRE(bytes[q] != '\n', "a complete example was left uncounted at %d", q);
            }
            if (eq >= 0) {
                REQUIRE(eq - pos + 1 < MAXEX, "prompt too long");
                for (int q = pos; q <= eq; q++) e.prompt[q - pos] = (char)bytes[q];
            }
            pb_push(pb, &e);
            break;
        }
        REQUIRE(nl - pos < MAXEX, "example too long");
        for (int q = pos; q <= eq; q++) e.prompt[q - pos] = (char)bytes[q];
        for (int q = eq + 1; q < nl; q++) e.answer[q - eq - 1] = (char)bytes[q];
        e.complete = 1;
        for (int q = pos; q < eq; q++) {
            REQUIRE(tgt[q] == -1, "prompt position %d counts", q);
            REQUIRE_EQ(exid[q], -1);
        }
        /* '=' predicts the first answer byte ... the last answer byte predicts '\n' */
        for (int q = eq; q < nl; q++) {
            REQUIRE_EQ(tgt[q], bytes[q + 1]);
            REQUIRE_EQ(exid[q], *next_id);
        }
        if (nl < T) {
            REQUIRE(tgt[nl] == -1, "the newline at %d predicts the next example", nl);
            REQUIRE_EQ(exid[nl], -1);
        }
        (*next_id)++;
        pb->n_complete++;
        pb_push(pb, &e);
        pos = nl + 1;
    }
}

/* Fetch and parse a batch into pb (reusing its storage: zero it before the
 * first call, pb_free after the last); checks n_examples against the parse. */
static void get_batch(const dt_dataset *ds, dt_split split, uint64_t index, int B, int T, parsed_batch *pb)
{
    size_t n = (size_t)B * T;
    int32_t *tok = malloc(n * sizeof *tok), *tgt = malloc(n * sizeof *tgt), *ex = malloc(n * sizeof *ex);
    int n_examples = -1;
    ck_dt(dt_data_batch(ds, split, index, B, T, tok, tgt, ex, &n_examples));
    pb->n = pb->n_complete = pb->n_counted = 0;
    int id = 0;
    for (int b = 0; b < B; b++) {
        REQUIRE(tok[(size_t)b * T] != '\n' && tok[(size_t)b * T] != '=', "row %d starts inside an example", b);
        parse_row(tok + (size_t)b * T, tgt + (size_t)b * T, ex + (size_t)b * T, T, &id, pb);
    }
    REQUIRE_EQ(n_examples, pb->n_complete);
    free(tok);
    free(tgt);
    free(ex);
}

static dt_dataset *open_task(const char *task, int digits, int max_len, uint64_t seed, int T)
{
    dt_data_config c;
    memset(&c, 0, sizeof c);
    c.task = task;
    c.digits = digits;
    c.max_len = max_len;
    c.seed = seed;
    dt_dataset *ds = NULL;
    ck_dt(dt_data_open(&c, T, &ds));
    return ds;
}

/* A decimal number of 1..digits digits without leading zeros; returns its value. */
static long long check_number(const char *s, size_t n, int digits)
{
    REQUIRE(n >= 1 && n <= (size_t)digits, "operand '%.*s' has %zu digits (1..%d)", (int)n, s, n, digits);
    REQUIRE(n == 1 || s[0] != '0', "leading zero in '%.*s'", (int)n, s);
    long long v = 0;
    for (size_t i = 0; i < n; i++) {
        REQUIRE(s[i] >= '0' && s[i] <= '9', "non-digit in '%.*s'", (int)n, s);
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static void check_add(const parsed_ex *e, int digits)
{
    const char *plus = strchr(e->prompt, '+');
    size_t plen = strlen(e->prompt);
    REQUIRE(plus != NULL, "no + in %s", e->prompt);
    REQUIRE_EQ(e->prompt[plen - 1], '=');
    long long a = check_number(e->prompt, (size_t)(plus - e->prompt), digits);
    long long b = check_number(plus + 1, plen - 1 - (size_t)(plus - e->prompt) - 1, digits);
    long long c = check_number(e->answer, strlen(e->answer), digits + 1);
    REQUIRE(a + b == c, "%s%s: %lld + %lld != %lld", e->prompt, e->answer, a, b, c);
}

static void check_word(const parsed_ex *e, int max_len, int sorted)
{
    size_t n = strlen(e->prompt) - 1;
    REQUIRE_EQ(e->prompt[n], '=');
    REQUIRE(n >= 1 && n <= (size_t)max_len, "word of %zu letters (1..%d)", n, max_len);
    REQUIRE_EQ(strlen(e->answer), n);
    int count[26] = {0};
    for (size_t i = 0; i < n; i++) {
        REQUIRE(e->prompt[i] >= 'a' && e->prompt[i] <= 'z', "non-letter in %s", e->prompt);
        count[e->prompt[i] - 'a']++;
        if (!sorted) REQUIRE_EQ(e->answer[i], e->prompt[n - 1 - i]);
    }
    if (sorted) {
        for (size_t i = 0; i < n; i++) {
            REQUIRE(e->answer[i] >= 'a' && e->answer[i] <= 'z', "non-letter in %s", e->answer);
            count[e->answer[i] - 'a']--;
            if (i) REQUIRE(e->answer[i - 1] <= e->answer[i], "%s%s not sorted", e->prompt, e->answer);
        }
        for (int c = 0; c < 26; c++) REQUIRE(count[c] == 0, "%s%s not a permutation", e->prompt, e->answer);
    }
}

START_TEST(test_add_format)
{
    int digits[] = {1, 3, 9};
    for (int d = 0; d < 3; d++) {
        int T = 3 * digits[d] + 3 + 40;
        dt_dataset *ds = open_task("add", digits[d], 0, 42, T);
        ck_assert_str_eq(dt_data_name(ds), "add");
        ck_assert_int_eq(dt_data_vocab_size(ds), 256);
        ck_assert_int_eq(dt_data_has_accuracy(ds), 1);
        int longest[2] = {0, 0}; /* both 1-digit and max-digit operands occur */
        parsed_batch pb = {0};
        for (int split = 0; split < 2; split++)
            for (uint64_t i = 0; i < 4; i++) {
                get_batch(ds, (dt_split)split, i, 8, T, &pb);
                ck_assert_int_ge(pb.n_complete, 8); /* every row holds one example at least */
                int counted = 0;
                for (int k = 0; k < pb.n; k++) {
                    if (!pb.ex[k].complete) continue;
                    check_add(&pb.ex[k], digits[d]);
                    counted += (int)strlen(pb.ex[k].answer) + 1;
                    size_t alen = (size_t)(strchr(pb.ex[k].prompt, '+') - pb.ex[k].prompt);
                    if (alen == 1) longest[0] = 1;
                    if (alen == (size_t)digits[d]) longest[1] = 1;
                }
                ck_assert_int_eq(counted, pb.n_counted); /* nothing else counts */
            }
        pb_free(&pb);
        ck_assert(longest[0] && longest[1]);
        dt_data_close(ds);
    }
}
END_TEST

static void word_task_format(const char *task, int sorted)
{
    int lens[] = {1, 8, 64};
    for (int l = 0; l < 3; l++) {
        int T = 2 * lens[l] + 1 + 30;
        dt_dataset *ds = open_task(task, 0, lens[l], 7, T);
        ck_assert_str_eq(dt_data_name(ds), task);
        int seen_len[65] = {0};
        parsed_batch pb = {0};
        for (int split = 0; split < 2; split++)
            for (uint64_t i = 0; i < 4; i++) {
                get_batch(ds, (dt_split)split, i, 8, T, &pb);
                ck_assert_int_ge(pb.n_complete, 8);
                int counted = 0;
                for (int k = 0; k < pb.n; k++) {
                    if (!pb.ex[k].complete) continue;
                    check_word(&pb.ex[k], lens[l], sorted);
                    counted += (int)strlen(pb.ex[k].answer) + 1;
                    seen_len[strlen(pb.ex[k].answer)] = 1;
                }
                ck_assert_int_eq(counted, pb.n_counted);
            }
        pb_free(&pb);
        ck_assert(seen_len[1]);
        dt_data_close(ds);
    }
}

START_TEST(test_reverse_format) { word_task_format("reverse", 0); }
END_TEST

START_TEST(test_sort_format) { word_task_format("sort", 1); }
END_TEST

/* Hand-worked layout: reverse with 1-letter words is "x=x\n" (4 bytes), so
 * T+1 = 10 holds two examples and a cut one: x = x \n y = y \n z = | z */
START_TEST(test_mask_exact)
{
    const int B = 3, T = 9;
    dt_dataset *ds = open_task("reverse", 0, 1, 5, T);
    int32_t tok[27], tgt[27], ex[27];
    int n = 0;
    ck_dt(dt_data_batch(ds, DT_SPLIT_TRAIN, 0, B, T, tok, tgt, ex, &n));
    ck_assert_int_eq(n, 2 * B);
    for (int b = 0; b < B; b++) {
        const int32_t *k = tok + b * T, *g = tgt + b * T, *e = ex + b * T;
        ck_assert_int_eq(k[1], '=');
        ck_assert_int_eq(k[3], '\n');
        ck_assert_int_eq(k[5], '=');
        ck_assert_int_eq(k[7], '\n');
        ck_assert_int_eq(k[2], k[0]); /* a 1-letter word is its own reverse */
        ck_assert_int_eq(k[6], k[4]);
        ck_assert(k[8] >= 'a' && k[8] <= 'z'); /* start of the cut example */
        int32_t want_t[9] = {-1, k[0], '\n', -1, -1, k[4], '\n', -1, -1};
        int32_t want_e[9] = {-1, 2 * b, 2 * b, -1, -1, 2 * b + 1, 2 * b + 1, -1, -1};
        for (int t = 0; t < T; t++) {
            ck_assert_msg(g[t] == want_t[t], "row %d target %d: %d, expected %d", b, t, g[t], want_t[t]);
            ck_assert_msg(e[t] == want_e[t], "row %d example %d: %d, expected %d", b, t, e[t], want_e[t]);
        }
    }
    /* T = 7: the second example ends exactly at byte T, so its '\n' is
     * the last target and counts. */
    ck_dt(dt_data_batch(ds, DT_SPLIT_TRAIN, 0, 1, 7, tok, tgt, ex, &n));
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(tgt[6], '\n');
    ck_assert_int_eq(ex[6], 1);
    /* example may be NULL, n_examples too */
    ck_dt(dt_data_batch(ds, DT_SPLIT_VAL, 0, 1, 7, tok, tgt, NULL, NULL));
    dt_data_close(ds);
}
END_TEST

static int batches_equal(const dt_dataset *a, const dt_dataset *b, dt_split sa, dt_split sb, uint64_t ia, uint64_t ib,
                         int B, int T)
{
    size_t n = (size_t)B * T;
    int32_t *buf = malloc(6 * n * sizeof *buf);
    int na = 0, nb = 0;
    ck_dt(dt_data_batch(a, sa, ia, B, T, buf, buf + n, buf + 2 * n, &na));
    ck_dt(dt_data_batch(b, sb, ib, B, T, buf + 3 * n, buf + 4 * n, buf + 5 * n, &nb));
    int eq = na == nb && memcmp(buf, buf + 3 * n, 3 * n * sizeof *buf) == 0;
    free(buf);
    return eq;
}

START_TEST(test_determinism)
{
    const char *tasks[] = {"add", "reverse", "sort"};
    for (int k = 0; k < 3; k++) {
        dt_dataset *a = open_task(tasks[k], 3, 8, 1234, 64);
        dt_dataset *a2 = open_task(tasks[k], 3, 8, 1234, 64);
        dt_dataset *b = open_task(tasks[k], 3, 8, 1235, 64);
        for (uint64_t i = 0; i < 3; i++) {
            ck_assert(batches_equal(a, a, DT_SPLIT_TRAIN, DT_SPLIT_TRAIN, i, i, 4, 64));  /* same call twice */
            ck_assert(batches_equal(a, a2, DT_SPLIT_TRAIN, DT_SPLIT_TRAIN, i, i, 4, 64)); /* fresh open */
            ck_assert(batches_equal(a, a2, DT_SPLIT_VAL, DT_SPLIT_VAL, i, i, 4, 64));
            ck_assert(!batches_equal(a, b, DT_SPLIT_TRAIN, DT_SPLIT_TRAIN, i, i, 4, 64));     /* other seed */
            ck_assert(!batches_equal(a, a, DT_SPLIT_TRAIN, DT_SPLIT_TRAIN, i, i + 1, 4, 64)); /* other index */
            ck_assert(!batches_equal(a, a, DT_SPLIT_TRAIN, DT_SPLIT_VAL, i, i, 4, 64));       /* other split */
        }
        dt_data_close(a);
        dt_data_close(a2);
        dt_data_close(b);
    }
}
END_TEST

/* ---- train/validation disjointness ------------------------------------ */

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Distinct prompt hashes (complete and cut examples alike) over n_batches. */
static uint64_t *collect_prompts(const dt_dataset *ds, dt_split split, int n_batches, int B, int T, size_t *n_out)
{
    size_t n = 0, cap = 1024;
    uint64_t *h = malloc(cap * sizeof *h);
    parsed_batch pb = {0};
    for (int i = 0; i < n_batches; i++) {
        get_batch(ds, split, (uint64_t)i, B, T, &pb);
        for (int k = 0; k < pb.n; k++) {
            if (!pb.ex[k].prompt[0]) continue;
            if (n == cap) h = realloc(h, (cap *= 2) * sizeof *h);
            h[n++] = str_hash(pb.ex[k].prompt);
        }
    }
    pb_free(&pb);
    qsort(h, n, sizeof *h, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || h[u - 1] != h[i]) h[u++] = h[i];
    *n_out = u;
    return h;
}

/* Returns the number of distinct prompts seen in both splits together and
 * asserts none is in both. */
static size_t check_disjoint(const char *task, int digits, int max_len, int n_batches, size_t *n_val)
{
    const int B = 8, T = 96;
    dt_dataset *ds = open_task(task, digits, max_len, 99, T);
    size_t nt, nv;
    uint64_t *tr = collect_prompts(ds, DT_SPLIT_TRAIN, n_batches, B, T, &nt);
    uint64_t *va = collect_prompts(ds, DT_SPLIT_VAL, n_batches, B, T, &nv);
    ck_assert_uint_gt(nv, 0);
    for (size_t i = 0; i < nv; i++)
        ck_assert_msg(!bsearch(&va[i], tr, nt, sizeof *tr, cmp_u64), "%s: a validation prompt was in training", task);
    free(tr);
    free(va);
    dt_data_close(ds);
    *n_val = nv;
    return nt + nv;
}

START_TEST(test_disjoint_small)
{
    /* Spaces small enough that sampling sees every prompt: the two splits
     * partition them, with exactly round(10%) in validation. */
    size_t nv;
    ck_assert_uint_eq(check_disjoint("add", 1, 0, 60, &nv), 100);
    ck_assert_uint_eq(nv, 10);
    ck_assert_uint_eq(check_disjoint("reverse", 0, 1, 30, &nv), 26);
    ck_assert_uint_eq(nv, 3);
    ck_assert_uint_eq(check_disjoint("sort", 0, 1, 30, &nv), 26);
    ck_assert_uint_eq(nv, 3);
}
END_TEST

START_TEST(test_disjoint_default)
{
    /* Larger spaces: repeats are frequent among short operands and words
     * (a third of the operands have one digit), so a leak would show. */
    size_t nv;
    check_disjoint("add", 3, 0, 400, &nv);
    check_disjoint("add", 2, 0, 200, &nv);
    check_disjoint("reverse", 0, 2, 200, &nv);
    check_disjoint("sort", 0, 3, 200, &nv);
}
END_TEST

/* ---- task errors ------------------------------------------------------ */

static void expect_open_error(const dt_data_config *c, int T, dt_status want, const char *needle)
{
    dt_dataset *ds = (dt_dataset *)&ds; /* must be reset to NULL */
    dt_status st = dt_data_open(c, T, &ds);
    ck_assert_msg(st == want, "expected %s, got %s: %s", dt_status_str(want), dt_status_str(st), dt_last_error());
    ck_assert_ptr_null(ds);
    ck_assert_msg(strstr(dt_last_error(), needle), "message '%s' lacks '%s'", dt_last_error(), needle);
}

START_TEST(test_task_errors)
{
    dt_data_config c;
    memset(&c, 0, sizeof c);
    c.digits = 3;
    c.max_len = 8;
    expect_open_error(&c, 64, DT_ERR_INVALID, "add, reverse or sort"); /* no task, no file */
    c.task = "mul";
    expect_open_error(&c, 64, DT_ERR_INVALID, "'mul'");
    expect_open_error(&c, 64, DT_ERR_INVALID, "add, reverse or sort");
    c.task = "add";
    c.digits = 0;
    expect_open_error(&c, 64, DT_ERR_INVALID, "--task-digits 0: expected 1..9");
    c.digits = 10;
    expect_open_error(&c, 64, DT_ERR_INVALID, "--task-digits 10");
    c.digits = 3;
    expect_open_error(&c, 0, DT_ERR_INVALID, "--seq-length 0");
    /* 999+999=1998\n is 13 bytes: T >= 12 */
    expect_open_error(&c, 11, DT_ERR_INVALID, "at least 12");
    dt_dataset *ds;
    ck_dt(dt_data_open(&c, 12, &ds));
    int32_t tok[24], tgt[24];
    ck_assert_int_eq(dt_data_batch(ds, DT_SPLIT_TRAIN, 0, 2, 11, tok, tgt, NULL, NULL), DT_ERR_INVALID);
    ck_assert_int_eq(dt_data_batch(ds, DT_SPLIT_TRAIN, 0, 0, 12, tok, tgt, NULL, NULL), DT_ERR_INVALID);
    ck_dt(dt_data_batch(ds, DT_SPLIT_TRAIN, 0, 2, 12, tok, tgt, NULL, NULL));
    dt_data_close(ds);
    c.task = "sort";
    c.max_len = 0;
    expect_open_error(&c, 64, DT_ERR_INVALID, "--task-max-len 0: expected 1..64");
    c.max_len = 65;
    expect_open_error(&c, 200, DT_ERR_INVALID, "--task-max-len 65");
    c.task = "reverse";
    c.max_len = 8; /* 18 bytes: T >= 17 */
    expect_open_error(&c, 16, DT_ERR_INVALID, "at least 17");
    ck_dt(dt_data_open(&c, 17, &ds));
    dt_data_close(ds);
    dt_data_close(NULL);
}
END_TEST

/* ---- count_correct ---------------------------------------------------- */

START_TEST(test_count_correct)
{
    const int32_t ex[] = {-1, 0, 0, -1, 1, 1, 1, -1, 2, 2, -1};
    uint8_t ok[11];
    int n = -1;
    memset(ok, 1, sizeof ok);
    dt_data_count_correct(ex, ok, 11, 3, &n);
    ck_assert_int_eq(n, 3);
    ok[0] = ok[3] = ok[10] = 0; /* uncounted positions do not matter */
    dt_data_count_correct(ex, ok, 11, 3, &n);
    ck_assert_int_eq(n, 3);
    ok[5] = 0;
    dt_data_count_correct(ex, ok, 11, 3, &n);
    ck_assert_int_eq(n, 2);
    ok[9] = 0;
    dt_data_count_correct(ex, ok, 11, 3, &n);
    ck_assert_int_eq(n, 1);
    dt_data_count_correct(ex, ok, 11, 4, &n); /* an example with no positions is not correct */
    ck_assert_int_eq(n, 1);
    dt_data_count_correct(ex, ok, 11, 0, &n);
    ck_assert_int_eq(n, 0);

    /* On a real batch: all right, then one wrong answer byte per example. */
    const int B = 4, T = 48;
    dt_dataset *ds = open_task("add", 3, 0, 3, T);
    int32_t tok[B * T], tgt[B * T], id[B * T];
    uint8_t corr[B * T];
    int ne;
    ck_dt(dt_data_batch(ds, DT_SPLIT_VAL, 0, B, T, tok, tgt, id, &ne));
    memset(corr, 1, sizeof corr);
    dt_data_count_correct(id, corr, B * T, ne, &n);
    ck_assert_int_eq(n, ne);
    int flipped = 0, last = -1;
    for (int i = 0; i < B * T; i++) {
        if (tgt[i] < 0) corr[i] = 0;
        if (id[i] >= 0 && id[i] != last && id[i] % 2 == 0) {
            corr[i] = 0;
            flipped++;
        }
        if (id[i] >= 0) last = id[i];
    }
    dt_data_count_correct(id, corr, B * T, ne, &n);
    ck_assert_int_eq(n, ne - flipped);
    dt_data_close(ds);
}
END_TEST

/* ---- text files ------------------------------------------------------- */

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/check_data.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* n pseudo-random bytes (all 256 values) so a 17-byte window locates its offset. */
static uint8_t *write_file(const char *name, size_t n, char *path, size_t path_len)
{
    snprintf(path, path_len, "%s/%s", tmpdir, name);
    uint8_t *b = malloc(n ? n : 1);
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (uint8_t)(x >> 24);
    }
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
    return b;
}

static dt_status open_text(const char *path, uint64_t seed, int T, dt_dataset **ds)
{
    dt_data_config c;
    memset(&c, 0, sizeof c);
    c.task = "add"; /* ignored: the path wins */
    c.path = path;
    c.seed = seed;
    return dt_data_open(&c, T, ds);
}

/* Offset of the T+1 bytes (tokens, then the last target) in hay[lo, hi), or -1. */
static long find_window(const uint8_t *hay, size_t lo, size_t hi, const int32_t *tok, const int32_t *tgt, int T)
{
    for (size_t s = lo; s + (size_t)T + 1 <= hi; s++) {
        int t = 0;
        while (t < T && hay[s + t] == (uint8_t)tok[t]) t++;
        if (t == T && hay[s + T] == (uint8_t)tgt[T - 1]) return (long)s;
    }
    return -1;
}

START_TEST(test_text_splits)
{
    make_tmpdir();
    char path[512];
    const size_t N = 5000; /* train [0, 4500), validation [4500, 5000) */
    const int B = 4, T = 16;
    uint8_t *bytes = write_file("data.bin", N, path, sizeof path);
    dt_dataset *ds;
    ck_dt(open_text(path, 11, T, &ds));
    ck_assert_str_eq(dt_data_name(ds), path);
    ck_assert_int_eq(dt_data_has_accuracy(ds), 0);
    ck_assert_int_eq(dt_data_vocab_size(ds), 256);
    int32_t tok[B * T], tgt[B * T], ex[B * T];
    long first_train = -1;
    int distinct_starts = 0;
    for (uint64_t i = 0; i < 20; i++) {
        int ne = -1;
        ck_dt(dt_data_batch(ds, DT_SPLIT_TRAIN, i, B, T, tok, tgt, ex, &ne));
        ck_assert_int_eq(ne, 0);
        for (int b = 0; b < B; b++) {
            const int32_t *k = tok + b * T, *g = tgt + b * T;
            for (int t = 0; t < T; t++) {
                REQUIRE_EQ(ex[b * T + t], -1);
                REQUIRE(g[t] >= 0, "target %d does not count", t); /* every target counts */
                if (t + 1 < T) REQUIRE_EQ(g[t], k[t + 1]);
            }
            long s = find_window(bytes, 0, 4500, k, g, T); /* wholly inside training */
            ck_assert_msg(s >= 0, "training window %d of batch %d is not inside the training split", b, (int)i);
            if (first_train < 0) first_train = s;
            else if (s != first_train) distinct_starts++;
        }
    }
    ck_assert_int_gt(distinct_starts, 40); /* random offsets, not one window */
    /* Validation: consecutive windows stepping by T from byte 4500; 499/16 = 31
     * whole windows, then it wraps. */
    for (uint64_t i = 0; i < 10; i++) {
        ck_dt(dt_data_batch(ds, DT_SPLIT_VAL, i, B, T, tok, tgt, ex, NULL));
        for (int b = 0; b < B; b++) {
            size_t start = 4500 + ((i * B + (uint64_t)b) % 31) * T;
            for (int t = 0; t < T; t++) {
                REQUIRE_EQ(tok[b * T + t], bytes[start + t]);
                REQUIRE_EQ(tgt[b * T + t], bytes[start + t + 1]);
                REQUIRE_EQ(ex[b * T + t], -1);
            }
        }
    }
    /* Determinism per seed. */
    dt_dataset *same, *other;
    ck_dt(open_text(path, 11, T, &same));
    ck_dt(open_text(path, 12, T, &other));
    ck_assert(batches_equal(ds, same, DT_SPLIT_TRAIN, DT_SPLIT_TRAIN, 3, 3, B, T));
    ck_assert(!batches_equal(ds, same, DT_SPLIT_TRAIN, DT_SPLIT_TRAIN, 3, 4, B, T)); /* index matters */
    ck_assert(!batches_equal(ds, other, DT_SPLIT_TRAIN, DT_SPLIT_TRAIN, 3, 3, B, T));
    ck_assert(batches_equal(ds, other, DT_SPLIT_VAL, DT_SPLIT_VAL, 3, 3, B, T)); /* validation ignores the seed */
    dt_data_close(same);
    dt_data_close(other);
    /* A longer T than the validation split holds is refused per batch too. */
    int32_t big[1000];
    ck_assert_int_eq(dt_data_batch(ds, DT_SPLIT_VAL, 0, 1, 500, big, big + 500, NULL, NULL), DT_ERR_FORMAT);
    dt_data_close(ds);
    free(bytes);
    remove_tmpdir();
}
END_TEST

static void expect_text_error(const char *path, int T, dt_status want, const char *needle)
{
    dt_dataset *ds = (dt_dataset *)&ds;
    dt_status st = open_text(path, 1, T, &ds);
    ck_assert_msg(st == want, "%s: expected %s, got %s: %s", path, dt_status_str(want), dt_status_str(st),
                  dt_last_error());
    ck_assert_ptr_null(ds);
    ck_assert_msg(strstr(dt_last_error(), path), "message '%s' does not name the file", dt_last_error());
    ck_assert_msg(strstr(dt_last_error(), needle), "message '%s' lacks '%s'", dt_last_error(), needle);
}

START_TEST(test_text_errors)
{
    make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/missing.txt", tmpdir);
    expect_text_error(path, 16, DT_ERR_IO, "no such file");
    expect_text_error(tmpdir, 16, DT_ERR_IO, "directory");
    free(write_file("empty.txt", 0, path, sizeof path));
    expect_text_error(path, 16, DT_ERR_FORMAT, "empty");
    /* T = 16 needs a 17-byte validation split: 10*16 + 1 = 161 bytes. */
    free(write_file("short.txt", 160, path, sizeof path));
    expect_text_error(path, 16, DT_ERR_FORMAT, "at least 161 bytes");
    free(write_file("exact.txt", 161, path, sizeof path));
    dt_dataset *ds;
    ck_dt(open_text(path, 1, 16, &ds));
    int32_t tok[32], tgt[32];
    ck_dt(dt_data_batch(ds, DT_SPLIT_VAL, 5, 2, 16, tok, tgt, NULL, NULL));
    ck_dt(dt_data_batch(ds, DT_SPLIT_TRAIN, 5, 2, 16, tok, tgt, NULL, NULL));
    dt_data_close(ds);
    /* Unreadable: permissions do not stop root, so only check as a user. */
    if (geteuid() != 0) {
        free(write_file("secret.txt", 1000, path, sizeof path));
        ck_assert_int_eq(chmod(path, 0), 0);
        expect_text_error(path, 16, DT_ERR_IO, "cannot open");
    }
    remove_tmpdir();
}
END_TEST

/* A batch of N*b rows equals N consecutive batches of b rows, for tasks and
 * text: gradient accumulation then sees exactly the large batch's data. */
START_TEST(test_batches_are_row_streams)
{
    const char *kinds[] = {"add", "reverse", NULL};
    char path[256] = "";
    for (int k = 0; k < 3; k++) {
        dt_data_config c = {.task = kinds[k] ? kinds[k] : "add", .seed = 11, .digits = 3, .max_len = 8};
        if (!kinds[k]) {
            snprintf(path, sizeof path, "/tmp/dt_rows_%d.txt", (int)getpid());
            FILE *f = fopen(path, "w");
            ck_assert_ptr_nonnull(f);
            for (int i = 0; i < 4000; i++) fputc('a' + (i * 7 + i / 13) % 26, f);
            fclose(f);
            c.path = path;
        }
        const int T = 24, b = 3, N = 4;
        dt_dataset *ds;
        ck_dt(dt_data_open(&c, T, &ds));
        int32_t big_tok[12 * 24], big_tgt[12 * 24], tok[3 * 24], tgt[3 * 24];
        for (int split = 0; split < 2; split++) {
            ck_dt(dt_data_batch(ds, (dt_split)split, 5, N * b, T, big_tok, big_tgt, NULL, NULL));
            for (int i = 0; i < N; i++) {
                ck_dt(dt_data_batch(ds, (dt_split)split, (uint64_t)(5 * N + i), b, T, tok, tgt, NULL, NULL));
                ck_assert_mem_eq(tok, big_tok + i * b * T, sizeof tok);
                ck_assert_mem_eq(tgt, big_tgt + i * b * T, sizeof tgt);
            }
        }
        dt_data_close(ds);
    }
    unlink(path);
}
END_TEST

static Suite *data_suite(void)
{
    Suite *s = suite_create("data");
    TCase *tasks = tcase_create("tasks");
    tcase_add_test(tasks, test_add_format);
    tcase_add_test(tasks, test_reverse_format);
    tcase_add_test(tasks, test_sort_format);
    tcase_add_test(tasks, test_mask_exact);
    tcase_add_test(tasks, test_determinism);
    tcase_add_test(tasks, test_task_errors);
    tcase_add_test(tasks, test_count_correct);
    tcase_add_test(tasks, test_batches_are_row_streams);
    suite_add_tcase(s, tasks);
    TCase *split = tcase_create("split");
    tcase_set_timeout(split, 30);
    tcase_add_test(split, test_disjoint_small);
    tcase_add_test(split, test_disjoint_default);
    suite_add_tcase(s, split);
    TCase *text = tcase_create("text");
    tcase_add_test(text, test_text_splits);
    tcase_add_test(text, test_text_errors);
    suite_add_tcase(s, text);
    return s;
}

int main(void) { return dt_test_run(data_suite()); }
