/* bpe_load.c: a tokenizer directory into a dt_bpe (dt_bpe_open): the
 * vocab (token string -> id) and the merges (pairs of token strings, the
 * rank of each its position), from DIR/vocab.json + DIR/merges.txt, or
 * from DIR/tokenizer.json's model.vocab and model.merges when the pair is
 * absent (one of the two alone is refused rather than mixed with
 * tokenizer.json).
 *
 * merges.txt, as Hugging Face reads it: lines "A B" (one space); a line
 * starting "#version" is skipped, a final line without '\n' counts, a
 * trailing '\r' is dropped. tokenizer.json's merges are "A B" strings or
 * ["A", "B"] pairs. A merge's A, B and A+B must all be tokens.
 *
 * The vocab is read in two passes: the ids first (their range sets the
 * tables' size), then the strings. Ids may skip values, at most
 * DT__BPE_MAX_HOLES of them, so a stray huge id cannot make the tables
 * enormous. The checksum (dt_bpe_checksum) is built as the tables are:
 * the merges' CRC as they are read in rank order, then the tokens' in id
 * order once all are in. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bpe_internal.h"
#include "dt_checkpoint.h" /* dt_crc32c */
#include "dt_file.h"

#define DT__BPE_MAX_HOLES (1 << 20)
/* Names the pre-tokenizer and the Unicode version in the checksum: change
 * it when either changes what text encodes to. */
static const char dt__bpe_version_tag[] = "dtrain bpe: gpt2 pattern, unicode 14.0, v1";

/* A token string for a message: escaped, cut to fit. */
static const char *dt__bpe_quote(const char *s, size_t n, char *buf, size_t cap)
{
    char tmp[96];
    if (n >= sizeof tmp) n = sizeof tmp - 1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    return dt_escape(tmp, buf, cap);
}

/* A token's string (s, n bytes of UTF-8) shown in byte-to-unicode
 * characters, back to bytes: out (room for n bytes) gets them and the
 * count is returned, or -1 with *bad the byte offset of a character that
 * shows no byte (or of bad UTF-8). */
static long dt__bpe_unshow(const char *s, size_t n, uint8_t *out, size_t *bad)
{
    long k = 0;
    for (size_t i = 0; i < n;) {
        const unsigned c = (unsigned char)s[i];
        uint32_t cp;
        size_t len;
        if (c < 0x80) cp = c, len = 1;
        else if (c >= 0xc2 && c <= 0xdf && i + 1 < n && ((unsigned char)s[i + 1] & 0xc0) == 0x80)
            cp = (c & 0x1fu) << 6 | ((unsigned char)s[i + 1] & 0x3fu), len = 2;
        else cp = UINT32_MAX, len = 1; /* the alphabet ends at U+0143: two bytes at most */
        const int b = cp == UINT32_MAX ? -1 : dt__bpe_cp_byte(cp);
        if (b < 0) {
            *bad = i;
            return -1;
        }
        out[k++] = (uint8_t)b;
        i += len;
    }
    return k;
}

/* ---- the vocab ---- */

static dt_status dt__bpe_vocab_ids(dt_bpe *bpe, const char *file, const char *where, json_t *v)
{
    char q[160];
    if (!json_is_object(v))
        return DT_FAIL(DT_ERR_FORMAT, "%s: %sexpected a JSON object of token strings to ids", file, where);
    if (json_object_size(v) == 0) return DT_FAIL(DT_ERR_FORMAT, "%s: %sno tokens (expected a vocabulary)", file, where);
    json_int_t max = -1;
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x)
    {
        if (!json_is_integer(x))
            return DT_FAIL(DT_ERR_FORMAT, "%s: %stoken \"%s\": expected an integer id", file, where,
                           dt__bpe_quote(key, strlen(key), q, sizeof q));
        const json_int_t id = json_integer_value(x);
        if (id < 0 || id >= INT32_MAX)
            return DT_FAIL(DT_ERR_FORMAT,
                           "%s: %stoken \"%s\" has id %lld (expected 0 .. 2^31 - 2, so that the "
                           "vocabulary size fits an int32)",
                           file, where, dt__bpe_quote(key, strlen(key), q, sizeof q), (long long)id);
        if (id > max) max = id;
    }
    const size_t count = json_object_size(v);
    if ((size_t)max + 1 > count && (size_t)max + 1 - count > DT__BPE_MAX_HOLES)
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: %s%zu tokens with ids up to %lld (expected ids 0 .. %zu with at most %d unused)", file,
                       where, count, (long long)max, count - 1, DT__BPE_MAX_HOLES);
    bpe->n_ids = (int32_t)(max + 1);
    bpe->tok_off = malloc((size_t)bpe->n_ids * sizeof *bpe->tok_off);
    bpe->tok_len = malloc((size_t)bpe->n_ids * sizeof *bpe->tok_len);
    if (!bpe->tok_off || !bpe->tok_len)
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %d ids", file, (int)bpe->n_ids);
    for (int32_t i = 0; i < bpe->n_ids; i++) bpe->tok_len[i] = -1;
    return DT_OK;
}

/* The bytes of an id's token shown as the file shows them (for a message). */
static const char *dt__bpe_show(const dt_bpe *bpe, int32_t id, char *buf, size_t cap)
{
    char s[96];
    size_t k = 0;
    for (int32_t i = 0; i < bpe->tok_len[id] && k + 3 < sizeof s; i++) {
        const uint32_t cp = dt__bpe_byte_cp(bpe->pool.p[bpe->tok_off[id] + (uint32_t)i]);
        if (cp < 0x80) s[k++] = (char)cp;
        else s[k++] = (char)(0xc0 | cp >> 6), s[k++] = (char)(0x80 | (cp & 0x3f));
    }
    s[k] = 0;
    return dt_escape(s, buf, cap);
}

static dt_status dt__bpe_vocab(dt_bpe *bpe, const char *file, const char *where, json_t *v)
{
    DT_CHECK(dt__bpe_vocab_ids(bpe, file, where, v));
    char q[160], q2[160];
    uint8_t buf[1024];
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x)
    {
        const size_t n = strlen(key);
        const int32_t id = (int32_t)json_integer_value(x);
        if (n == 0)
            return DT_FAIL(DT_ERR_FORMAT, "%s: %sid %d has an empty token (expected bytes)", file, where, (int)id);
        uint8_t *out = n <= sizeof buf ? buf : malloc(n);
        if (!out) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", file);
        size_t bad = 0;
        const long k = dt__bpe_unshow(key, n, out, &bad);
        dt_status st = DT_OK;
        if (k < 0)
            st = DT_FAIL(DT_ERR_FORMAT,
                         "%s: %stoken \"%s\" (id %d): byte %zu is not a character of GPT-2's "
                         "byte-to-unicode alphabet (expected tokens as vocab.json writes them, \"Ġ\" for a space)",
                         file, where, dt__bpe_quote(key, n, q, sizeof q), (int)id, bad);
        else if (bpe->tok_len[id] >= 0)
            st = DT_FAIL(DT_ERR_FORMAT, "%s: %sid %d is given to both \"%s\" and \"%s\" (expected each id once)", file,
                         where, (int)id, dt__bpe_show(bpe, id, q2, sizeof q2), dt__bpe_quote(key, n, q, sizeof q));
        else st = dt__bpe_add_token(bpe, file, out, (uint32_t)k, id);
        if (out != buf) free(out);
        DT_CHECK(st);
    }
    for (int b = 0; b < 256; b++) {
        if (bpe->byte_id[b] >= 0) continue;
        const uint32_t cp = dt__bpe_byte_cp((uint8_t)b);
        const char s[3] = {cp < 0x80 ? (char)cp : (char)(0xc0 | cp >> 6), cp < 0x80 ? 0 : (char)(0x80 | (cp & 0x3f)),
                           0};
        return DT_FAIL(DT_ERR_FORMAT, "%s: %sno token for the byte 0x%02x (\"%s\"); a byte-level vocab has all 256",
                       file, where, b, dt_escape(s, q, sizeof q));
    }
    return DT_OK;
}

/* ---- the merges ---- */

/* Merge (A, B) of rank bpe->n_merges; at names it for messages. */
static dt_status dt__bpe_merge_add(dt_bpe *bpe, const char *at, const char *a, size_t na, const char *b, size_t nb,
                                   uint32_t *crc)
{
    char q[160], q2[160];
    if (na == 0 || nb == 0)
        return DT_FAIL(DT_ERR_FORMAT, "%s: an empty token in a merge (expected two tokens, \"A B\")", at);
    uint8_t *buf = malloc(na + nb);
    if (!buf) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", at);
    size_t bad;
    const long ka = dt__bpe_unshow(a, na, buf, &bad);
    const long kb = ka < 0 ? -1 : dt__bpe_unshow(b, nb, buf + ka, &bad);
    const int32_t ia = ka < 0 ? -1 : dt__bpe_lookup(bpe, buf, (size_t)ka);
    const int32_t ib = kb < 0 ? -1 : dt__bpe_lookup(bpe, buf + ka, (size_t)kb);
    const int32_t iab = ia < 0 || ib < 0 ? -1 : dt__bpe_lookup(bpe, buf, (size_t)(ka + kb));
    free(buf);
    if (ia < 0 || ib < 0)
        return DT_FAIL(DT_ERR_FORMAT, "%s: merge \"%s %s\": \"%s\" is not in the vocab (expected merges of its tokens)",
                       at, dt__bpe_quote(a, na, q, sizeof q), dt__bpe_quote(b, nb, q2, sizeof q2), ia < 0 ? q : q2);
    if (iab < 0)
        return DT_FAIL(DT_ERR_FORMAT, "%s: merge \"%s %s\" makes a token the vocab lacks (expected it in the vocab)",
                       at, dt__bpe_quote(a, na, q, sizeof q), dt__bpe_quote(b, nb, q2, sizeof q2));
    if (bpe->n_merges >= UINT32_MAX - 1) return DT_FAIL(DT_ERR_FORMAT, "%s: too many merges (expected under 2^32)", at);
    DT_CHECK(dt__pmap_set(&bpe->merges, ia, ib, (uint32_t)bpe->n_merges, iab));
    bpe->n_merges++;
    const uint32_t pair[2] = {(uint32_t)ia, (uint32_t)ib}; /* little-endian hosts only, as the checkpoints */
    *crc = dt_crc32c_update(*crc, pair, sizeof pair);
    return DT_OK;
}

/* "A B" (one space, nothing else) into the merge at. */
static dt_status dt__bpe_merge_line(dt_bpe *bpe, const char *at, const char *s, size_t n, uint32_t *crc)
{
    const char *sp = memchr(s, ' ', n);
    if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)) || sp == s || sp + 1 == s + n) {
        char q[160];
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\" (expected two tokens separated by one space)", at,
                       dt__bpe_quote(s, n, q, sizeof q));
    }
    return dt__bpe_merge_add(bpe, at, s, (size_t)(sp - s), sp + 1, n - (size_t)(sp + 1 - s), crc);
}

static dt_status dt__bpe_merges_txt(dt_bpe *bpe, const char *file, const char *text, size_t n, uint32_t *crc)
{
    char at[4200];
    size_t line = 0;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(text + i, '\n', n - i);
        size_t e = nl ? (size_t)(nl - text) : n;
        const size_t next = nl ? e + 1 : n;
        line++;
        if (e > i && text[e - 1] == '\r') e--;
        if (!(e - i >= 8 && !memcmp(text + i, "#version", 8))) {
            snprintf(at, sizeof at, "%s:%zu", file, line);
            DT_CHECK(dt__bpe_merge_line(bpe, at, text + i, e - i, crc));
        }
        i = next;
    }
    return DT_OK;
}

static dt_status dt__bpe_merges_json(dt_bpe *bpe, const char *file, json_t *m, uint32_t *crc)
{
    if (!json_is_array(m))
        return DT_FAIL(DT_ERR_FORMAT, "%s: model.merges: expected an array of \"A B\" strings or [A, B] pairs", file);
    char at[4200];
    size_t i;
    json_t *x;
    json_array_foreach(m, i, x)
    {
        snprintf(at, sizeof at, "%s: model.merges[%zu]", file, i);
        if (json_is_string(x)) {
            DT_CHECK(dt__bpe_merge_line(bpe, at, json_string_value(x), json_string_length(x), crc));
        } else if (json_is_array(x) && json_array_size(x) == 2 && json_is_string(json_array_get(x, 0)) &&
                   json_is_string(json_array_get(x, 1))) {
            json_t *a = json_array_get(x, 0), *b = json_array_get(x, 1);
            DT_CHECK(dt__bpe_merge_add(bpe, at, json_string_value(a), json_string_length(a), json_string_value(b),
                                       json_string_length(b), crc));
        } else {
            return DT_FAIL(DT_ERR_FORMAT, "%s: expected a string \"A B\" or a pair [\"A\", \"B\"]", at);
        }
    }
    return DT_OK;
}

/* ---- the files ---- */

static dt_status dt__bpe_json(const char *path, json_t **out)
{
    char *text = NULL;
    size_t n = 0;
    DT_CHECK(dt_file_read_whole(path, "--tokenizer", 0, &text, &n));
    json_error_t je;
    *out = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!*out) return DT_FAIL(DT_ERR_FORMAT, "%s: not JSON (%s, line %d)", path, je.text, je.line);
    return DT_OK;
}

static dt_status dt__bpe_pair(dt_bpe *bpe, const char *vocab_path, const char *merges_path, uint32_t *crc)
{
    json_t *v = NULL;
    DT_CHECK(dt__bpe_json(vocab_path, &v));
    dt_status st = dt__bpe_vocab(bpe, vocab_path, "", v);
    json_decref(v);
    DT_CHECK(st);
    char *text = NULL;
    size_t n = 0;
    DT_CHECK(dt_file_read_whole(merges_path, "--tokenizer", 0, &text, &n));
    st = dt__bpe_merges_txt(bpe, merges_path, text, n, crc);
    free(text);
    return st;
}

/* A tokenizer.json option that would change the encoding: refused unless
 * absent, null or "". */
static dt_status dt__bpe_no_option(const char *path, json_t *model, const char *key)
{
    json_t *x = json_object_get(model, key);
    if (!x || json_is_null(x) || (json_is_string(x) && json_string_length(x) == 0)) return DT_OK;
    return DT_FAIL(DT_ERR_UNSUPPORTED, "%s: model.%s is set (expected GPT-2's byte-level BPE, which has none)", path,
                   key);
}

static dt_status dt__bpe_tokenizer_json(dt_bpe *bpe, const char *path, uint32_t *crc)
{
    json_t *root = NULL;
    DT_CHECK(dt__bpe_json(path, &root));
    json_t *model = json_is_object(root) ? json_object_get(root, "model") : NULL;
    json_t *type = model ? json_object_get(model, "type") : NULL;
    dt_status st = DT_OK;
    if (!json_is_object(model))
        st = DT_FAIL(DT_ERR_FORMAT, "%s: expected an object with a \"model\" object (Hugging Face's tokenizer.json)",
                     path);
    else if (type && !(json_is_string(type) && !strcmp(json_string_value(type), "BPE")))
        st = DT_FAIL(DT_ERR_UNSUPPORTED, "%s: model.type is not \"BPE\" (expected a byte-level BPE tokenizer)", path);
    if (st == DT_OK) st = dt__bpe_no_option(path, model, "continuing_subword_prefix");
    if (st == DT_OK) st = dt__bpe_no_option(path, model, "end_of_word_suffix");
    if (st == DT_OK) st = dt__bpe_vocab(bpe, path, "model.vocab: ", json_object_get(model, "vocab"));
    if (st == DT_OK) st = dt__bpe_merges_json(bpe, path, json_object_get(model, "merges"), crc);
    json_decref(root);
    return st;
}

static int dt__bpe_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* CRC32C of the tag, the ids' bytes in id order, then the merges' CRC. */
static uint32_t dt__bpe_checksum(const dt_bpe *bpe, uint32_t merges_crc)
{
    uint32_t crc = dt_crc32c(dt__bpe_version_tag, sizeof dt__bpe_version_tag - 1);
    const uint32_t head[2] = {(uint32_t)bpe->n_ids, (uint32_t)bpe->n_merges};
    crc = dt_crc32c_update(crc, head, sizeof head);
    for (int32_t id = 0; id < bpe->n_ids; id++) {
        const int32_t len = bpe->tok_len[id];
        crc = dt_crc32c_update(crc, &len, sizeof len);
        if (len > 0) crc = dt_crc32c_update(crc, bpe->pool.p + bpe->tok_off[id], (size_t)len);
    }
    return dt_crc32c_update(crc, &merges_crc, sizeof merges_crc);
}

dt_status dt__bpe_load(dt_bpe *bpe)
{
    const char *dir = bpe->dir;
    struct stat sb;
    if (stat(dir, &sb) != 0) return DT_FAIL(DT_ERR_IO, "--tokenizer %s: no such directory", dir);
    if (!S_ISDIR(sb.st_mode))
        return DT_FAIL(DT_ERR_INVALID, "--tokenizer %s: is a %s, expected a directory", dir,
                       dt_file_kind_name(sb.st_mode));
    const size_t n = strlen(dir) + 32;
    char *vocab = malloc(n), *merges = malloc(n), *tj = malloc(n);
    dt_status st = vocab && merges && tj ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "--tokenizer %s: out of memory", dir);
    uint32_t merges_crc = 0;
    if (st == DT_OK) {
        snprintf(vocab, n, "%s/vocab.json", dir);
        snprintf(merges, n, "%s/merges.txt", dir);
        snprintf(tj, n, "%s/tokenizer.json", dir);
        const int hv = dt__bpe_exists(vocab), hm = dt__bpe_exists(merges);
        if (hv && hm) st = dt__bpe_pair(bpe, vocab, merges, &merges_crc);
        else if (hv || hm)
            st = DT_FAIL(DT_ERR_IO, "--tokenizer %s: has %s but no %s (expected both, or tokenizer.json alone)", dir,
                         hv ? "vocab.json" : "merges.txt", hv ? "merges.txt" : "vocab.json");
        else if (dt__bpe_exists(tj)) st = dt__bpe_tokenizer_json(bpe, tj, &merges_crc);
        else
            st = DT_FAIL(DT_ERR_IO,
                         "--tokenizer %s: no vocab.json + merges.txt, nor tokenizer.json (expected a "
                         "GPT-2 tokenizer directory)",
                         dir);
    }
    free(vocab);
    free(merges);
    free(tj);
    if (st == DT_OK) bpe->checksum = dt__bpe_checksum(bpe, merges_crc);
    return st;
}
