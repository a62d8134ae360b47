/* check_bpe.c: the byte-level BPE tokenizer (include/dt_bpe.h) on a tiny
 * vocab written here: the 256 bytes (id = the byte) and 24 merges (merge r
 * makes id 256 + r), "<|endoftext|>" last. Each example's ids are worked
 * out by hand in its comment: the pieces GPT-2's pattern cuts, then bpe()'s
 * rounds, each merging the pair of lowest rank everywhere. Also: the same
 * tokenizer as tokenizer.json, in both forms of its merges, gives the same
 * ids and checksum; malformed directories are refused with one line naming
 * the file; and any bytes decode back to themselves. */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dt_bpe.h"
#include "testutil.h"

static char dir[] = "/tmp/dtrain-bpe.XXXXXX";

/* rank r -> "A B" in GPT-2's byte-to-unicode characters; merged id 256 + r */
static const char *const merges[] = {
    "h e",     /* 0  he     256 */
    "l l",     /* 1  ll     257 */
    "he ll",   /* 2  hell   258 */
    "hell o",  /* 3  hello  259 */
    "Ġ w",     /* 4  " w"   260  (Ġ is the byte 0x20) */
    "o r",     /* 5  or     261 */
    "Ġw or",   /* 6  " wor" 262 */
    "l d",     /* 7  ld     263 */
    "Ġwor ld", /* 8  " world" 264 */
    "' s",     /* 9  's     265 */
    "' r",     /* 10 'r     266 */
    "'r e",    /* 11 're    267 */
    "1 2",     /* 12 12     268 */
    "Ġ Ġ",     /* 13 "  "   269 */
    "Ċ Ċ",     /* 14 "\n\n" 270  (Ċ is 0x0a) */
    "! !",     /* 15 !!     271 */
    "a a",     /* 16 aa     272 */
    "Ã ©",     /* 17 é      273  (é is c3 a9: Ã is 0xc3, © is 0xa9) */
    "c a",     /* 18 ca     274 */
    "ca f",    /* 19 caf    275 */
    "caf Ã©",  /* 20 café   276 */
    "ä ¸",     /* 21 e4 b8  277  (中 is e4 b8 ad) */
    "ä¸ Ń",    /* 22 中     278  (Ń is 0xad) */
    "e l",     /* 23 el     279 */
};
#define N_MERGES ((int)(sizeof merges / sizeof merges[0]))
#define EOT (256 + N_MERGES) /* 280 */

/* GPT-2's bytes_to_unicode(), written as encoder.py does it: the printable
 * bytes map to themselves, the rest in order to 256, 257, ... */
static uint32_t gpt2_cp(int byte)
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        const int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        if (b == byte) return printable ? (uint32_t)b : 256u + (uint32_t)n;
        if (!printable) n++;
    }
    return 0;
}

/* byte b's character as a JSON string body ('"' and '\\' escaped) */
static void put_byte_json(FILE *f, int b)
{
    const uint32_t cp = gpt2_cp(b);
    if (cp == '"' || cp == '\\') fputc('\\', f);
    if (cp < 0x80) fputc((int)cp, f);
    else fputc((int)(0xc0 | cp >> 6), f), fputc((int)(0x80 | (cp & 0x3f)), f);
}

/* merge r's token string: A and B without the space */
static void merged_token(int r, char *out)
{
    const char *s = merges[r];
    size_t k = 0;
    for (; *s; s++)
        if (*s != ' ') out[k++] = *s;
    out[k] = 0;
}

static void path_of(char *buf, size_t n, const char *sub, const char *name)
{
    snprintf(buf, n, "%s/%s/%s", dir, sub, name);
}

static void make_sub(const char *sub)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    ck_assert(mkdir(p, 0777) == 0);
}

static void write_text(const char *sub, const char *name, const char *text)
{
    char p[512];
    path_of(p, sizeof p, sub, name);
    FILE *f = fopen(p, "wb");
    ck_assert(f);
    ck_assert(fputs(text, f) >= 0);
    ck_assert(fclose(f) == 0);
}

/* The vocab object: the 256 bytes, the merges' tokens, then (eot) the
 * special token. */
static void put_vocab(FILE *f, int eot)
{
    fputc('{', f);
    for (int b = 0; b < 256; b++) {
        fputs(b ? ", \"" : "\"", f);
        put_byte_json(f, b);
        fprintf(f, "\": %d", b);
    }
    for (int r = 0; r < N_MERGES; r++) {
        char t[64];
        merged_token(r, t);
        fprintf(f, ", \"%s\": %d", t, 256 + r);
    }
    if (eot) fprintf(f, ", \"<|endoftext|>\": %d", EOT);
    fputc('}', f);
}

/* form 0: vocab.json + merges.txt; 1: tokenizer.json, "A B" strings;
 * 2: tokenizer.json, ["A", "B"] pairs */
static void write_tokenizer(const char *sub, int form, int eot)
{
    make_sub(sub);
    char p[512];
    path_of(p, sizeof p, sub, form ? "tokenizer.json" : "vocab.json");
    FILE *f = fopen(p, "wb");
    ck_assert(f);
    if (form)
        fputs("{\"version\": \"1.0\", \"added_tokens\": [], \"model\": {\"type\": \"BPE\", \"dropout\": null, "
              "\"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", \"vocab\": ",
              f);
    put_vocab(f, eot);
    if (form) {
        fputs(", \"merges\": [", f);
        for (int r = 0; r < N_MERGES; r++) {
            char a[32];
            snprintf(a, sizeof a, "%s", merges[r]);
            char *sp = strchr(a, ' ');
            *sp = 0;
            if (form == 1) fprintf(f, "%s\"%s %s\"", r ? ", " : "", a, sp + 1);
            else fprintf(f, "%s[\"%s\", \"%s\"]", r ? ", " : "", a, sp + 1);
        }
        fputs("]}}", f);
    }
    ck_assert(fclose(f) == 0);
    if (form) return;
    path_of(p, sizeof p, sub, "merges.txt");
    f = fopen(p, "wb");
    ck_assert(f);
    fputs("#version: 0.2\n", f);
    for (int r = 0; r < N_MERGES; r++) fprintf(f, "%s\n", merges[r]);
    ck_assert(fclose(f) == 0);
}

static dt_bpe *open_sub(const char *sub)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    dt_bpe *bpe = NULL;
    ck_dt(dt_bpe_open(p, &bpe));
    return bpe;
}

/* ids of text (n bytes; -1: strlen) must be want[0, n_want); and decode
 * back to the text */
static void expect_ids(dt_bpe *bpe, const char *text, long n, const int32_t *want, size_t n_want)
{
    const size_t len = n < 0 ? strlen(text) : (size_t)n;
    int32_t *ids = NULL;
    size_t k = 0;
    ck_dt(dt_bpe_encode(bpe, text, len, &ids, &k));
    char got[512] = "";
    for (size_t i = 0, at = 0; i < k && at < sizeof got - 12; i++)
        at += (size_t)snprintf(got + at, sizeof got - at, "%s%d", i ? " " : "", (int)ids[i]);
    ck_assert_msg(k == n_want && !memcmp(ids, want, k * sizeof *ids), "\"%s\": got ids %s", text, got);
    size_t at = 0;
    for (size_t i = 0; i < k; i++) {
        const uint8_t *b;
        size_t nb;
        ck_dt(dt_bpe_decode(bpe, ids[i], &b, &nb));
        ck_assert(at + nb <= len && !memcmp(text + at, b, nb));
        at += nb;
    }
    ck_assert(at == len);
    free(ids);
}

#define EXPECT(bpe, text, ...)                                       \
    do {                                                             \
        const int32_t w_[] = {__VA_ARGS__};                          \
        expect_ids((bpe), (text), -1, w_, sizeof w_ / sizeof w_[0]); \
    } while (0)
#define EXPECT_N(bpe, text, n, ...)                                   \
    do {                                                              \
        const int32_t w_[] = {__VA_ARGS__};                           \
        expect_ids((bpe), (text), (n), w_, sizeof w_ / sizeof w_[0]); \
    } while (0)

/* Every hand-worked example, against one open tokenizer. */
static void check_examples(dt_bpe *bpe)
{
    /* "hello" | " world". hello: (h,e) rank 0 -> he l l o; (l,l) 1 -> he ll o;
     * (he,ll) 2 -> hell o; (hell,o) 3 -> hello = 259. " world": Ġ w o r l d;
     * (Ġ,w) 4 -> Ġw o r l d; (o,r) 5 -> Ġw or l d; (Ġw,or) 6 -> Ġwor l d;
     * (l,d) 7 -> Ġwor ld; (Ġwor,ld) 8 -> Ġworld = 264. */
    EXPECT(bpe, "hello world", 259, 264);
    /* the lowest rank first, not the leftmost pair: e l l has (e,l) 23 and
     * (l,l) 1, so e ll (a leftmost-first merge would give el l) */
    EXPECT(bpe, "ell", 'e', 257);
    /* case matters: H e l l o: (e,l) 23 and (l,l) 1 -> H e ll o; no more */
    EXPECT(bpe, "Hello", 'H', 'e', 257, 'o');
    /* every occurrence, left to right, without overlap: a a a -> aa a;
     * a a a a -> aa aa; a a a a a -> aa aa a */
    EXPECT(bpe, "aaa", 272, 'a');
    EXPECT(bpe, "aaaa", 272, 272);
    EXPECT(bpe, "aaaaa", 272, 272, 'a');
    /* contractions are pieces of their own: "he" | "'s"; (',s) 9 -> 's */
    EXPECT(bpe, "he's", 256, 265);
    /* "they" | "'re": t h e y -> (h,e) 0 -> t he y; ' r e -> (',r) 10 -> 'r e
     * -> ('r,e) 11 -> 're = 267 */
    EXPECT(bpe, "they're", 't', 256, 'y', 267);
    /* "don" | "'t" (no merge for ' t); upper case is no contraction: "'" | "S" */
    EXPECT(bpe, "don't", 'd', 'o', 'n', '\'', 't');
    EXPECT(bpe, "'S", '\'', 'S');
    /* numbers: "a" | " 1234" (the space leads the digits); Ġ 1 2 3 4 ->
     * (1,2) 12 -> Ġ 12 3 4. Letters and digits part: "abc" | "123" */
    EXPECT(bpe, "a 1234", 'a', ' ', 268, '3', '4');
    EXPECT(bpe, "abc123", 'a', 'b', 'c', 268, '3');
    /* punctuation runs: "hi" | "!!!" -> (!,!) 15 -> !! !; "x" | " ?!" */
    EXPECT(bpe, "hi!!!", 'h', 'i', 271, '!');
    EXPECT(bpe, "x ?!", 'x', ' ', '?', '!');
    /* \s+(?!\S): before a non-space a run of white space gives up its last
     * character. "a" | "\n" | "\n" | "b" (the lone "\n" before b is \s+), so
     * (Ċ,Ċ) never meets; at the end the run stays whole: "a" | "\n\n" */
    EXPECT(bpe, "a\n\nb", 'a', '\n', '\n', 'b');
    EXPECT(bpe, "a\n\n", 'a', 270);
    /* "a" | " " | " b"; trailing "a" | "   " -> (Ġ,Ġ) 13 -> ĠĠ Ġ */
    EXPECT(bpe, "a  b", 'a', ' ', ' ', 'b');
    EXPECT(bpe, "a   ", 'a', 269, ' ');
    /* "a" | "  " | "\n" | "b": the run "  \n" keeps "  " (-> ĠĠ) */
    EXPECT(bpe, "a  \nb", 'a', 269, '\n', 'b');
    /* é is a letter, so " café" is one piece: Ġ c a f Ã ©; (Ã,©) 17 -> Ġ c a
     * f é; (c,a) 18 -> Ġ ca f é; (ca,f) 19 -> Ġ caf é; (caf,é) 20 -> Ġ café */
    EXPECT(bpe, " café", ' ', 276);
    EXPECT(bpe, "é!", 273, '!'); /* "é" | "!" */
    /* CJK letters: "中文" one piece, e4 b8 ad e6 96 87; (ä,¸) 21 -> 277 ad
     * e6 96 87; (277,Ń) 22 -> 中 = 278 e6 96 87 */
    EXPECT(bpe, "中文", 278, 0xe6, 0x96, 0x87);
    /* ² (U+00B2) is a number (No): "x" | "²" */
    EXPECT(bpe, "x²", 'x', 0xc2, 0xb2);
    /* € (U+20AC) is other (Sc): "€" | "5" */
    EXPECT(bpe, "€5", 0xe2, 0x82, 0xac, '5');
    /* invalid UTF-8: each byte is an "other" character. "a" | "\xff" | " b";
     * a truncated € (e2 82) is two others, one piece, even before a letter */
    EXPECT(bpe, "a\xff b", 'a', 0xff, ' ', 'b');
    EXPECT(bpe, "\xe2\x82", 0xe2, 0x82);
    EXPECT(bpe, "\xe2\x82x", 0xe2, 0x82, 'x');
    /* an overlong '/' (c0 af) and a surrogate (ed a0 80) are others too */
    EXPECT(bpe,
           "\xc0\xaf"
           "a",
           0xc0, 0xaf, 'a');
    EXPECT(bpe,
           "\xed\xa0\x80"
           "a",
           0xed, 0xa0, 0x80, 'a');
    /* a NUL byte is a byte like any other */
    EXPECT_N(bpe, "a\0b", 3, 'a', 0, 'b');
    /* the empty text */
    int32_t *ids = NULL;
    size_t k = 1;
    ck_dt(dt_bpe_encode(bpe, "", 0, &ids, &k));
    ck_assert(ids && k == 0);
    free(ids);
}

START_TEST(test_encode)
{
    write_tokenizer("pair", 0, 1);
    dt_bpe *bpe = open_sub("pair");
    ck_assert_int_eq(dt_bpe_vocab_size(bpe), EOT + 1);
    ck_assert_int_eq(dt_bpe_eot(bpe), EOT);
    check_examples(bpe);
    /* <|endoftext|> is cut out first: "hi" | EOT | "hello"; around it the
     * stretches are texts of their own: " " (a run to the end) | EOT | " " */
    EXPECT(bpe, "hi<|endoftext|>hello", 'h', 'i', EOT, 259);
    EXPECT(bpe, " <|endoftext|> ", ' ', EOT, ' ');
    EXPECT(bpe, "<|endoftext|><|endoftext|>", EOT, EOT);
    /* not quite the token: "<|" | "endoftext", bytes (no merge applies) */
    EXPECT(bpe, "<|endoftext", '<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't');
    const uint8_t *b;
    size_t n;
    ck_dt(dt_bpe_decode(bpe, EOT, &b, &n));
    ck_assert(n == 13 && !memcmp(b, "<|endoftext|>", 13));
    ck_dt(dt_bpe_decode(bpe, 278, &b, &n));
    ck_assert(n == 3 && !memcmp(b, "中", 3));
    ck_assert_int_eq(dt_bpe_decode(bpe, EOT + 1, &b, &n), DT_ERR_INVALID);
    ck_assert_int_eq(dt_bpe_decode(bpe, -1, &b, &n), DT_ERR_INVALID);
    /* the cache gives the same ids the second time */
    check_examples(bpe);
    dt_bpe_close(bpe);
}
END_TEST

/* Without "<|endoftext|>" in the vocab it is plain text. */
START_TEST(test_no_eot)
{
    write_tokenizer("noeot", 0, 0);
    dt_bpe *bpe = open_sub("noeot");
    ck_assert_int_eq(dt_bpe_eot(bpe), -1);
    ck_assert_int_eq(dt_bpe_vocab_size(bpe), EOT);
    /* "hi" | "<|" | "endoftext" | "|>" */
    EXPECT(bpe, "hi<|endoftext|>", 'h', 'i', '<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|', '>');
    dt_bpe_close(bpe);
}
END_TEST

/* tokenizer.json in both merges forms: the same ids and checksum. */
START_TEST(test_tokenizer_json)
{
    write_tokenizer("pair2", 0, 1);
    write_tokenizer("tj-strings", 1, 1);
    write_tokenizer("tj-pairs", 2, 1);
    dt_bpe *a = open_sub("pair2"), *b = open_sub("tj-strings"), *c = open_sub("tj-pairs");
    ck_assert_uint_eq(dt_bpe_checksum(a), dt_bpe_checksum(b));
    ck_assert_uint_eq(dt_bpe_checksum(a), dt_bpe_checksum(c));
    ck_assert_int_eq(dt_bpe_vocab_size(b), EOT + 1);
    check_examples(b);
    check_examples(c);
    EXPECT(c, "hi<|endoftext|>hello", 'h', 'i', EOT, 259);
    /* both files present: vocab.json + merges.txt win over tokenizer.json */
    write_text("tj-strings", "vocab.json", "{\"a\": 0}");
    write_text("tj-strings", "merges.txt", "");
    char p[512];
    snprintf(p, sizeof p, "%s/tj-strings", dir);
    dt_bpe *d = NULL;
    ck_assert_int_eq(dt_bpe_open(p, &d), DT_ERR_FORMAT);
    ck_assert_msg(strstr(dt_last_error(), "vocab.json"), "%s", dt_last_error());
    /* a different tokenizer has a different checksum */
    write_tokenizer("noeot2", 0, 0);
    dt_bpe *e = open_sub("noeot2");
    ck_assert_uint_ne(dt_bpe_checksum(a), dt_bpe_checksum(e));
    dt_bpe_close(a);
    dt_bpe_close(b);
    dt_bpe_close(c);
    dt_bpe_close(e);
}
END_TEST

/* Ids may skip values: the vocabulary size is the largest + 1. */
START_TEST(test_id_gap)
{
    make_sub("gap");
    char p[512];
    path_of(p, sizeof p, "gap", "vocab.json");
    FILE *f = fopen(p, "wb");
    ck_assert(f);
    fputc('{', f);
    for (int b = 0; b < 256; b++) {
        fputs(b ? ", \"" : "\"", f);
        put_byte_json(f, b);
        fprintf(f, "\": %d", b);
    }
    fputs(", \"he\": 300}", f);
    ck_assert(fclose(f) == 0);
    write_text("gap", "merges.txt", "h e"); /* no final newline: the line counts */
    dt_bpe *bpe = open_sub("gap");
    ck_assert_int_eq(dt_bpe_vocab_size(bpe), 301);
    EXPECT(bpe, "the", 't', 300);
    const uint8_t *b;
    size_t n;
    ck_assert_int_eq(dt_bpe_decode(bpe, 290, &b, &n), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "290"), "%s", dt_last_error());
    dt_bpe_close(bpe);
}
END_TEST

/* A directory sub with vocab (NULL: none), merges (NULL: none) and
 * tokenizer.json (NULL: none) must be refused with want, in one line
 * holding needle and the name of file (NULL: the directory). */
static void expect_refused(const char *sub, const char *vocab, const char *merges_txt, const char *tj, dt_status want,
                           const char *file, const char *needle)
{
    make_sub(sub);
    if (vocab) write_text(sub, "vocab.json", vocab);
    if (merges_txt) write_text(sub, "merges.txt", merges_txt);
    if (tj) write_text(sub, "tokenizer.json", tj);
    char p[512];
    if (file) path_of(p, sizeof p, sub, file);
    else snprintf(p, sizeof p, "%s/%s", dir, sub);
    char d[512];
    snprintf(d, sizeof d, "%s/%s", dir, sub);
    dt_bpe *bpe = (dt_bpe *)&bpe;
    const dt_status st = dt_bpe_open(d, &bpe);
    const char *m = dt_last_error();
    ck_assert_msg(st == want, "%s: expected %s, got %s: %s", sub, dt_status_str(want), dt_status_str(st), m);
    ck_assert_ptr_null(bpe);
    ck_assert_msg(strstr(m, p), "%s: message '%s' does not name %s", sub, m, p);
    ck_assert_msg(strstr(m, needle), "%s: message '%s' lacks '%s'", sub, m, needle);
    ck_assert_msg(!strchr(m, '\n'), "%s: message is not one line: %s", sub, m);
}

/* The 256 byte tokens as a JSON object body (no braces) into buf. */
static void byte_vocab(char *buf, size_t cap)
{
    FILE *f = fmemopen(buf, cap, "w");
    ck_assert(f);
    for (int b = 0; b < 256; b++) {
        fputs(b ? ", \"" : "\"", f);
        put_byte_json(f, b);
        fprintf(f, "\": %d", b);
    }
    ck_assert(fclose(f) == 0);
}

START_TEST(test_malformed)
{
    static char bytes[8192], v[9000], t[9000];
    byte_vocab(bytes, sizeof bytes);
    char missing[512];
    snprintf(missing, sizeof missing, "%s/nowhere", dir);
    dt_bpe *bpe = NULL;
    ck_assert_int_eq(dt_bpe_open(missing, &bpe), DT_ERR_IO);
    ck_assert_msg(strstr(dt_last_error(), missing) && strstr(dt_last_error(), "no such directory"), "%s",
                  dt_last_error());
    expect_refused("empty", NULL, NULL, NULL, DT_ERR_IO, NULL, "no vocab.json + merges.txt, nor tokenizer.json");
    expect_refused("half", "{}", NULL, NULL, DT_ERR_IO, NULL, "has vocab.json but no merges.txt");
    expect_refused("badjson", "{\"a\": 0,", "", NULL, DT_ERR_FORMAT, "vocab.json", "not JSON");
    expect_refused("notobj", "[1, 2]", "", NULL, DT_ERR_FORMAT, "vocab.json", "expected a JSON object");
    snprintf(v, sizeof v, "{%s, \"he\": 256, \"hx\": 256}", bytes);
    expect_refused("repeat", v, "", NULL, DT_ERR_FORMAT, "vocab.json", "id 256 is given to both");
    snprintf(v, sizeof v, "{%s, \"he\": -1}", bytes);
    expect_refused("negative", v, "", NULL, DT_ERR_FORMAT, "vocab.json", "\"he\" has id -1");
    snprintf(v, sizeof v, "{%s, \"he\": 2147483647}", bytes);
    expect_refused("huge", v, "", NULL, DT_ERR_FORMAT, "vocab.json", "has id 2147483647 (expected 0 .. 2^31 - 2");
    snprintf(v, sizeof v, "{%s, \"he\": 5000000}", bytes);
    expect_refused("sparse", v, "", NULL, DT_ERR_FORMAT, "vocab.json", "at most 1048576 unused");
    snprintf(v, sizeof v, "{%s, \"h e\": 256}", bytes); /* a raw space is not in the alphabet */
    expect_refused("alphabet", v, "", NULL, DT_ERR_FORMAT, "vocab.json", "\"h e\" (id 256): byte 1 is not a character");
    snprintf(v, sizeof v, "{%s, \"\\u20ac\": 256}", bytes);
    expect_refused("euro", v, "", NULL, DT_ERR_FORMAT, "vocab.json", "byte 0 is not a character");
    snprintf(v, sizeof v, "{%s}", strchr(bytes, ',') + 2); /* no token for the byte 0 */
    expect_refused("nobyte", v, "", NULL, DT_ERR_FORMAT, "vocab.json", "no token for the byte 0x00");
    snprintf(v, sizeof v, "{%s, \"he\": 256}", bytes);
    expect_refused("mergeunknown", v, "#version: 0.2\nh e\nhe zz\n", NULL, DT_ERR_FORMAT, "merges.txt:3",
                   "\"zz\" is not in the vocab");
    expect_refused("mergemakes", v, "h e\nl l\n", NULL, DT_ERR_FORMAT, "merges.txt:2",
                   "merge \"l l\" makes a token the vocab lacks");
    expect_refused("mergeline", v, "h e\nh e l\n", NULL, DT_ERR_FORMAT, "merges.txt:2",
                   "expected two tokens separated by one space");
    expect_refused("mergeempty", v, "h e\n\nh e\n", NULL, DT_ERR_FORMAT, "merges.txt:2",
                   "expected two tokens separated by one space");
    snprintf(t, sizeof t, "{\"model\": {\"type\": \"BPE\", \"vocab\": {%s, \"he\": 256}, \"merges\": [\"h e\", 7]}}",
             bytes);
    expect_refused("tjmerge", NULL, NULL, t, DT_ERR_FORMAT, "tokenizer.json", "model.merges[1]: expected a string");
    snprintf(t, sizeof t, "{\"model\": {\"type\": \"BPE\", \"vocab\": {%s}, \"merges\": [[\"h\", \"e\"]]}}", bytes);
    expect_refused("tjpair", NULL, NULL, t, DT_ERR_FORMAT, "tokenizer.json: model.merges[0]", "makes a token");
    snprintf(t, sizeof t, "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {%s}}}", bytes);
    expect_refused("tjtype", NULL, NULL, t, DT_ERR_UNSUPPORTED, "tokenizer.json", "model.type is not \"BPE\"");
    snprintf(t, sizeof t, "{\"model\": {\"vocab\": {%s}, \"merges\": [], \"continuing_subword_prefix\": \"##\"}}",
             bytes);
    expect_refused("tjprefix", NULL, NULL, t, DT_ERR_UNSUPPORTED, "tokenizer.json", "continuing_subword_prefix");
    expect_refused("tjnomodel", NULL, NULL, "{\"vocab\": {}}", DT_ERR_FORMAT, "tokenizer.json",
                   "expected an object with a \"model\" object");
    snprintf(t, sizeof t, "{\"model\": {\"vocab\": {%s}, \"merges\": {}}}", bytes);
    expect_refused("tjmerges", NULL, NULL, t, DT_ERR_FORMAT, "tokenizer.json", "model.merges: expected an array");
}
END_TEST

/* Any bytes encode to valid ids whose bytes are the text again: random
 * bytes, ASCII words and spaces, and well-formed UTF-8 of every plane. */
START_TEST(test_round_trip)
{
    write_tokenizer("rt", 0, 1);
    dt_bpe *bpe = open_sub("rt");
    static const char *const bits[] = {"hello",
                                       " world",
                                       "'s",
                                       "'re",
                                       "!!",
                                       "  ",
                                       "\n\n",
                                       "\t",
                                       "中",
                                       "é",
                                       "12",
                                       "<|endoftext|>",
                                       "<|",
                                       "aa",
                                       " ",
                                       "\xe2\x82",
                                       "\xff",
                                       "\xc3",
                                       "\xf0\x9f\x98\x80"};
    uint64_t x = 0x9e3779b97f4a7c15ull;
    uint8_t text[600];
    for (int round = 0; round < 3000; round++) {
        size_t n = 0;
        const int mode = round % 3;
        while (n < 400) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (mode == 0) {
                text[n++] = (uint8_t)x;
            } else if (mode == 1) {
                const char *s = bits[(x >> 8) % (sizeof bits / sizeof bits[0])];
                memcpy(text + n, s, strlen(s));
                n += strlen(s);
            } else {
                uint32_t cp = (uint32_t)(x >> 11) % 0x110000u;
                if (cp >= 0xd800 && cp < 0xe000) cp = ' ';
                if (cp < 0x80) text[n++] = (uint8_t)cp;
                else if (cp < 0x800) text[n++] = (uint8_t)(0xc0 | cp >> 6), text[n++] = (uint8_t)(0x80 | (cp & 0x3f));
                else if (cp < 0x10000)
                    text[n++] = (uint8_t)(0xe0 | cp >> 12), text[n++] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)),
                    text[n++] = (uint8_t)(0x80 | (cp & 0x3f));
                else
                    text[n++] = (uint8_t)(0xf0 | cp >> 18), text[n++] = (uint8_t)(0x80 | (cp >> 12 & 0x3f)),
                    text[n++] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)), text[n++] = (uint8_t)(0x80 | (cp & 0x3f));
            }
            if ((x >> 40) % 50 == 0) break;
        }
        int32_t *ids = NULL;
        size_t k = 0;
        ck_dt(dt_bpe_encode(bpe, text, n, &ids, &k));
        ck_assert(k <= n);
        size_t at = 0;
        for (size_t i = 0; i < k; i++) {
            const uint8_t *b;
            size_t nb;
            ck_dt(dt_bpe_decode(bpe, ids[i], &b, &nb));
            ck_assert_msg(at + nb <= n && !memcmp(text + at, b, nb), "round %d: id %zu differs", round, i);
            at += nb;
        }
        ck_assert(at == n);
        free(ids);
    }
    dt_bpe_close(bpe);
}
END_TEST

static Suite *bpe_suite(void)
{
    Suite *s = suite_create("bpe");
    TCase *tc = tcase_create("encode");
    tcase_add_test(tc, test_encode);
    tcase_add_test(tc, test_no_eot);
    tcase_add_test(tc, test_tokenizer_json);
    tcase_add_test(tc, test_id_gap);
    tcase_add_test(tc, test_round_trip);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("errors");
    tcase_add_test(te, test_malformed);
    suite_add_tcase(s, te);
    return s;
}

int main(void) { return dt_test_run_in_tmpdir(bpe_suite(), dir); }
