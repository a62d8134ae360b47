/* check_data_tokens.c: text data tokenized with a BPE tokenizer
 * (dt_data.h, dt_data_config.tokenizer): the batches hold the ids that
 * dt_bpe_encode gives for the file, split 90/10 in tokens; the cache
 * FILE.tok-XXXXXXXX appears, is reused untouched (same inode and mtime),
 * is rebuilt when the text changes, and is rebuilt rather than trusted
 * when corrupt (ids, header, size, an id outside the vocabulary); where it
 * cannot be written the ids are kept in memory and the note says so. The
 * tokenizer is tiny: the 256 bytes and 9 merges. */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char dir[] = "/tmp/dtrain-tok.XXXXXX";

static const char *const merges[] = {"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"};
#define N_MERGES 9

static void put_byte_json(FILE *f, int byte)
{
    int n = 0;
    uint32_t cp = 0;
    for (int b = 0; b < 256; b++) { /* GPT-2's bytes_to_unicode() */
        const int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        if (b == byte) cp = printable ? (uint32_t)b : 256u + (uint32_t)n;
        if (!printable) n++;
    }
    if (cp == '"' || cp == '\\') fputc('\\', f);
    if (cp < 0x80) fputc((int)cp, f);
    else fputc((int)(0xc0 | cp >> 6), f), fputc((int)(0x80 | (cp & 0x3f)), f);
}

/* DIR/sub with vocab.json and merges.txt; merge r's token gets id
 * first_id + r (70000: ids above 65536 make the cache's ids 4 bytes). */
static void write_tokenizer(const char *sub, int first_id, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, sub);
    ck_assert(mkdir(path, 0777) == 0);
    char p[512];
    snprintf(p, sizeof p, "%s/vocab.json", path);
    FILE *f = fopen(p, "wb");
    ck_assert(f);
    fputc('{', f);
    for (int b = 0; b < 256; b++) {
        fputs(b ? ", \"" : "\"", f);
        put_byte_json(f, b);
        fprintf(f, "\": %d", b);
    }
    for (int r = 0; r < N_MERGES; r++) {
        fputs(", \"", f);
        for (const char *s = merges[r]; *s; s++)
            if (*s != ' ') fputc(*s, f);
        fprintf(f, "\": %d", first_id + r);
    }
    fprintf(f, ", \"<|endoftext|>\": %d}", first_id + N_MERGES);
    ck_assert(fclose(f) == 0);
    snprintf(p, sizeof p, "%s/merges.txt", path);
    f = fopen(p, "wb");
    ck_assert(f);
    fputs("#version: 0.2\n", f);
    for (int r = 0; r < N_MERGES; r++) fprintf(f, "%s\n", merges[r]);
    ck_assert(fclose(f) == 0);
}

/* A text of about n bytes: words, numbers, spaces, newlines and, with
 * seed's help, different each seed. */
static char *write_text(const char *name, size_t n, uint64_t seed, char *path, size_t cap)
{
    static const char *const words[] = {"hello", " world",        " hello", "\n", " the", " 42",
                                        "!!",    "<|endoftext|>", " café",  "  ", "'s",   " or"};
    snprintf(path, cap, "%s/%s", dir, name);
    char *t = malloc(n + 32);
    ck_assert(t);
    size_t k = 0;
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    while (k < n) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const char *w = words[x % (sizeof words / sizeof words[0])];
        memcpy(t + k, w, strlen(w));
        k += strlen(w);
    }
    t[k] = 0;
    FILE *f = fopen(path, "wb");
    ck_assert(f);
    ck_assert(fwrite(t, 1, k, f) == k);
    ck_assert(fclose(f) == 0);
    return t;
}

static dt_status open_tokens(const char *text, const char *tok, int T, dt_dataset **ds)
{
    dt_data_config c;
    memset(&c, 0, sizeof c);
    c.path = text;
    c.tokenizer = tok;
    c.seed = 5;
    return dt_data_open(&c, T, ds);
}

static void cache_path(const char *text, const char *tok, char *out, size_t cap)
{
    dt_bpe *bpe;
    ck_dt(dt_bpe_open(tok, &bpe));
    snprintf(out, cap, "%s.tok-%08x", text, (unsigned)dt_bpe_checksum(bpe));
    dt_bpe_close(bpe);
}

/* The dataset's batches against the ids dt_bpe_encode gives for text:
 * validation windows consecutive from the 90% mark, training windows
 * inside the first 90%; fingerprint = text CRC over the tokenizer's. */
static void check_matches_encode(dt_dataset *ds, const char *text, const char *tok, int T)
{
    dt_bpe *bpe;
    ck_dt(dt_bpe_open(tok, &bpe));
    int32_t *e = NULL;
    size_t n = 0;
    ck_dt(dt_bpe_encode(bpe, text, strlen(text), &e, &n));
    ck_assert_int_eq(dt_data_vocab_size(ds), dt_bpe_vocab_size(bpe));
    const size_t n_train = n - (n + 9) / 10, n_win = (n - n_train - 1) / (size_t)T;
    enum { B = 3 };
    int32_t tk[B * 64], tg[B * 64];
    for (uint64_t i = 0; i < 6; i++) {
        ck_dt(dt_data_batch(ds, DT_SPLIT_VAL, i, B, T, tk, tg, NULL, NULL));
        for (int b = 0; b < B; b++) {
            const size_t s = n_train + ((i * B + (uint64_t)b) % n_win) * (size_t)T;
            for (int t = 0; t < T; t++) ck_assert(tk[b * T + t] == e[s + t] && tg[b * T + t] == e[s + t + 1]);
        }
        ck_dt(dt_data_batch(ds, DT_SPLIT_TRAIN, i, B, T, tk, tg, NULL, NULL));
        for (int b = 0; b < B; b++) {
            int found = 0;
            for (size_t s = 0; !found && s + (size_t)T < n_train; s++) {
                int t = 0;
                while (t < T && tk[b * T + t] == e[s + t] && tg[b * T + t] == e[s + t + 1]) t++;
                found = t == T;
            }
            ck_assert_msg(found, "training row %d of batch %d is not a window of the first 90%% of the ids", b, (int)i);
        }
    }
    uint64_t bytes;
    uint32_t crc;
    ck_dt(dt_data_fingerprint(ds, &bytes, &crc));
    const uint32_t c = dt_bpe_checksum(bpe);
    const uint8_t le[4] = {(uint8_t)c, (uint8_t)(c >> 8), (uint8_t)(c >> 16), (uint8_t)(c >> 24)};
    ck_assert_uint_eq(bytes, strlen(text));
    ck_assert_uint_eq(crc, dt_crc32c_update(dt_crc32c(text, strlen(text)), le, 4));
    free(e);
    dt_bpe_close(bpe);
}

static void expect_note(const dt_dataset *ds, const char *needle)
{
    const char *m = dt_data_note(ds);
    ck_assert_msg(m && strstr(m, needle), "note '%s' lacks '%s'", m ? m : "(null)", needle);
    ck_assert(!strchr(m, '\n'));
}

/* Open text with tok, expecting note needle, and check the ids. */
static void reopen(const char *path, const char *text, const char *tok, const char *needle)
{
    dt_dataset *ds;
    ck_dt(open_tokens(path, tok, 8, &ds));
    expect_note(ds, needle);
    check_matches_encode(ds, text, tok, 8);
    dt_data_close(ds);
}

static void patch(const char *path, long off, const void *b, size_t n)
{
    FILE *f = fopen(path, "r+b");
    ck_assert(f);
    ck_assert(fseek(f, off, off < 0 ? SEEK_END : SEEK_SET) == 0);
    ck_assert(fwrite(b, 1, n, f) == n);
    ck_assert(fclose(f) == 0);
}

START_TEST(test_cache)
{
    char tok[512], path[512], cache[600];
    write_tokenizer("tok", 256, tok, sizeof tok);
    char *text = write_text("a.txt", 3000, 1, path, sizeof path);
    cache_path(path, tok, cache, sizeof cache);
    struct stat s0, s1;
    ck_assert(stat(cache, &s0) != 0);
    dt_dataset *ds;
    ck_dt(open_tokens(path, tok, 8, &ds));
    expect_note(ds, "tokenized and cached in");
    expect_note(ds, cache);
    ck_assert_int_eq(dt_data_vocab_size(ds), 256 + N_MERGES + 1);
    check_matches_encode(ds, text, tok, 8);
    dt_data_close(ds);
    ck_assert(stat(cache, &s0) == 0);
    /* header: magic, version 1, 2-byte ids, the text's size */
    FILE *f = fopen(cache, "rb");
    uint8_t h[48];
    ck_assert(f && fread(h, 1, 48, f) == 48);
    fclose(f);
    ck_assert(!memcmp(h, "DTTOKIDS\1\0\0\0\2\0\0\0", 16));
    ck_assert_uint_eq(h[16] | h[17] << 8, strlen(text));

    /* reused: the same file, not rewritten */
    sleep(1); /* a rewrite would show in the mtime too */
    reopen(path, text, tok, "read from the cache");
    ck_assert(stat(cache, &s1) == 0);
    ck_assert(s1.st_ino == s0.st_ino && s1.st_mtime == s0.st_mtime);

    /* a corrupt id: rebuilt (a new file), not trusted */
    patch(cache, -2, "\x07\x00", 2);
    reopen(path, text, tok, "its ids are corrupt");
    reopen(path, text, tok, "read from the cache");
    /* a corrupt header, a truncated file, not a cache at all */
    patch(cache, 20, "\xff", 1);
    reopen(path, text, tok, "its header is corrupt");
    ck_assert(truncate(cache, (off_t)s0.st_size - 2) == 0);
    reopen(path, text, tok, "its size does not match");
    f = fopen(cache, "wb");
    ck_assert(f && fputs("hello", f) >= 0 && fclose(f) == 0);
    reopen(path, text, tok, "it is not a token cache");
    /* an id the tokenizer lacks, with both CRCs made right: still refused */
    f = fopen(cache, "rb");
    uint8_t *c = malloc((size_t)s0.st_size);
    ck_assert(f && fread(c, 1, (size_t)s0.st_size, f) == (size_t)s0.st_size);
    fclose(f);
    c[48] = 0x00, c[49] = 0x7f; /* id 32512 */
    uint32_t x = dt_crc32c(c + 48, (size_t)s0.st_size - 48);
    for (int i = 0; i < 4; i++) c[40 + i] = (uint8_t)(x >> (8 * i));
    x = dt_crc32c(c, 44);
    for (int i = 0; i < 4; i++) c[44 + i] = (uint8_t)(x >> (8 * i));
    f = fopen(cache, "wb");
    ck_assert(f && fwrite(c, 1, (size_t)s0.st_size, f) == (size_t)s0.st_size && fclose(f) == 0);
    free(c);
    reopen(path, text, tok, "it holds an id the tokenizer lacks");

    /* the text changes: rebuilt */
    free(text);
    text = write_text("a.txt", 3000, 2, path, sizeof path);
    reopen(path, text, tok, "it was made from another text");
    reopen(path, text, tok, "read from the cache");
    free(text);
}
END_TEST

/* The cache cannot be written: the ids live in memory, the note says so. */
START_TEST(test_unwritable)
{
    char tok[512], path[512], cache[600];
    write_tokenizer("tok2", 256, tok, sizeof tok);
    char *text = write_text("b.txt", 2000, 3, path, sizeof path);
    cache_path(path, tok, cache, sizeof cache);
    ck_assert(mkdir(cache, 0777) == 0); /* a directory where the cache goes */
    reopen(path, text, tok, "tokenized in memory only, not cached");
    ck_assert(rmdir(cache) == 0);
    free(text);
    if (geteuid() == 0) return; /* permissions do not stop root */
    char sub[600];
    snprintf(sub, sizeof sub, "%s/ro", dir);
    ck_assert(mkdir(sub, 0777) == 0);
    snprintf(sub, sizeof sub, "ro/c.txt");
    text = write_text(sub, 2000, 4, path, sizeof path);
    snprintf(sub, sizeof sub, "%s/ro", dir);
    ck_assert(chmod(sub, 0555) == 0);
    reopen(path, text, tok, "tokenized in memory only, not cached");
    ck_assert(chmod(sub, 0755) == 0);
    free(text);
}
END_TEST

/* Ids above 65536 are stored in 4 bytes. */
START_TEST(test_wide_ids)
{
    char tok[512], path[512], cache[600];
    write_tokenizer("wide", 70000, tok, sizeof tok);
    char *text = write_text("w.txt", 2000, 5, path, sizeof path);
    cache_path(path, tok, cache, sizeof cache);
    reopen(path, text, tok, "tokenized and cached");
    reopen(path, text, tok, "read from the cache");
    FILE *f = fopen(cache, "rb");
    uint8_t h[16];
    ck_assert(f && fread(h, 1, 16, f) == 16);
    fclose(f);
    ck_assert_int_eq(h[12], 4);
    free(text);
}
END_TEST

START_TEST(test_errors)
{
    char tok[512], path[512];
    write_tokenizer("tok3", 256, tok, sizeof tok);
    dt_data_config c;
    memset(&c, 0, sizeof c);
    c.task = "add";
    c.tokenizer = tok;
    dt_dataset *ds = (dt_dataset *)&ds;
    ck_assert_int_eq(dt_data_open(&c, 8, &ds), DT_ERR_INVALID);
    ck_assert_ptr_null(ds);
    ck_assert_msg(strstr(dt_last_error(), "--data text files only"), "%s", dt_last_error());
    /* a bad tokenizer directory is named */
    char *text = write_text("e.txt", 2000, 6, path, sizeof path);
    char bad[600];
    snprintf(bad, sizeof bad, "%s/none", dir);
    ds = (dt_dataset *)&ds;
    ck_assert_int_eq(open_tokens(path, bad, 8, &ds), DT_ERR_IO);
    ck_assert_ptr_null(ds);
    ck_assert_msg(strstr(dt_last_error(), bad), "%s", dt_last_error());
    /* too short in tokens, though long enough in bytes: " hello" x 30 is
     * 180 bytes (enough for T = 16 as bytes) but 60 tokens (Ġ and hello:
     * the tokenizer has no merge of Ġ with h) */
    free(text);
    snprintf(path, sizeof path, "%s/short.txt", dir);
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < 30; i++) fputs(" hello", f);
    ck_assert(fclose(f) == 0);
    ds = (dt_dataset *)&ds;
    ck_assert_int_eq(open_tokens(path, tok, 16, &ds), DT_ERR_FORMAT);
    ck_assert_ptr_null(ds);
    ck_assert_msg(strstr(dt_last_error(), "60 tokens is too short for --seq-length 16"), "%s", dt_last_error());
    ck_assert_msg(strstr(dt_last_error(), "at least 161 tokens"), "%s", dt_last_error());
    /* without a tokenizer: bytes, no note */
    ck_dt(open_tokens(path, NULL, 16, &ds));
    ck_assert_ptr_null(dt_data_note(ds));
    ck_assert_int_eq(dt_data_vocab_size(ds), 256);
    dt_data_close(ds);
}
END_TEST

static Suite *tokens_suite(void)
{
    Suite *s = suite_create("data_tokens");
    TCase *tc = tcase_create("cache");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_cache);
    tcase_add_test(tc, test_unwritable);
    tcase_add_test(tc, test_wide_ids);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run_in_tmpdir(tokens_suite(), dir); }
