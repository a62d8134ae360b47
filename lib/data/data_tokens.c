/* data_tokens.c: a text file as GPT-2 BPE ids for data_text.c
 * (dt_data_config.tokenizer; the cache's layout is in dt_data.h).
 *
 * Owns the token cache FILE.tok-XXXXXXXX beside the text: XXXXXXXX is the
 * tokenizer's checksum, so texts tokenized by two tokenizers keep two
 * caches. A cache is used only when every check holds: magic, version and
 * id width; its header's CRC32C; the text's size and CRC32C as read now;
 * the tokenizer's checksum; a size of exactly the header plus count ids;
 * the CRC32C of its ids; every id a token of the tokenizer. Anything else
 * is rebuilt from the text, never trusted, and the note says why. A cache
 * is written whole or not at all (dt_file_write_whole: a temporary file
 * renamed over it), so a reader sees the old cache or the new one. When
 * it cannot be written (a read-only directory, a directory in its place)
 * the ids live in memory only, and the note says so: nothing falls back
 * silently.
 *
 * Invariant: after open the text's bytes are freed and ds->ids points
 * past the header of ds->ids_buf, which has the cache's layout whether it
 * was read or made here. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data_internal.h"
#include "dt_bpe.h"
#include "dt_checkpoint.h" /* dt_crc32c */
#include "dt_file.h"

#define DT__TOK_MAGIC "DTTOKIDS"
#define DT__TOK_VERSION 1u
#define DT__TOK_HEAD 48 /* bytes; its CRC32C covers the 44 before it */

static void dt__put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void dt__put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t dt__get32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

static uint64_t dt__get64(const uint8_t *p) { return dt__get32(p) | (uint64_t)dt__get32(p + 4) << 32; }

/* ds->note = the common start, then fmt. */
static dt_status dt__tok_note(dt_dataset *ds, const char *tokenizer, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static dt_status dt__tok_note(dt_dataset *ds, const char *tokenizer, const char *fmt, ...)
{
    char tail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tail, sizeof tail, fmt, ap);
    va_end(ap);
    const char *f = "--data %s: %zu tokens from %zu bytes (--tokenizer %s, vocabulary %d); %s";
    const int n = snprintf(NULL, 0, f, ds->name, ds->n_ids, ds->n_bytes, tokenizer, ds->vocab, tail);
    free(ds->note);
    ds->note = n < 0 ? NULL : malloc((size_t)n + 1);
    if (!ds->note) return DT_FAIL(DT_ERR_NOMEM, "--data %s: out of memory", ds->name);
    snprintf(ds->note, (size_t)n + 1, f, ds->name, ds->n_ids, ds->n_bytes, tokenizer, ds->vocab, tail);
    return DT_OK;
}

/* NULL when buf (n bytes, a cache read back) can be used, else why not. */
static const char *dt__tok_check(const dt_dataset *ds, const dt_bpe *bpe, const uint8_t *buf, size_t n)
{
    if (n < DT__TOK_HEAD || memcmp(buf, DT__TOK_MAGIC, 8)) return "it is not a token cache";
    if (dt__get32(buf + 8) != DT__TOK_VERSION) return "it has another version";
    if (dt_crc32c(buf, DT__TOK_HEAD - 4) != dt__get32(buf + 44)) return "its header is corrupt (CRC32C)";
    if ((int)dt__get32(buf + 12) != ds->id_width) return "its ids have another width";
    if (dt__get64(buf + 16) != ds->n_bytes || dt__get32(buf + 24) != ds->crc32c)
        return "it was made from another text (size or CRC32C)";
    if (dt__get32(buf + 28) != ds->tok_crc32c) return "it was made by another tokenizer";
    const uint64_t count = dt__get64(buf + 32);
    if (count != (n - DT__TOK_HEAD) / (size_t)ds->id_width || (n - DT__TOK_HEAD) % (size_t)ds->id_width)
        return "its size does not match its count of ids";
    if (dt_crc32c(buf + DT__TOK_HEAD, n - DT__TOK_HEAD) != dt__get32(buf + 40)) return "its ids are corrupt (CRC32C)";
    dt_dataset v = *ds;
    v.ids = buf + DT__TOK_HEAD;
    for (size_t k = 0; k < count; k++) {
        const uint8_t *b;
        size_t nb;
        if (dt_bpe_decode(bpe, dt__data_id(&v, k), &b, &nb) != DT_OK) {
            dt_clear_error();
            return "it holds an id the tokenizer lacks";
        }
    }
    return NULL;
}

/* The cache's bytes for ids[0, k) (*out, malloc'd, *n bytes). */
static dt_status dt__tok_build(const dt_dataset *ds, const int32_t *ids, size_t k, uint8_t **out, size_t *n)
{
    const size_t w = (size_t)ds->id_width;
    if (k > (SIZE_MAX - DT__TOK_HEAD) / w) return DT_FAIL(DT_ERR_NOMEM, "--data %s: too many tokens", ds->name);
    *n = DT__TOK_HEAD + k * w;
    uint8_t *b = *out = malloc(*n);
    if (!b) return DT_FAIL(DT_ERR_NOMEM, "--data %s: out of memory for %zu tokens", ds->name, k);
    for (size_t i = 0; i < k; i++) {
        uint8_t le[4];
        dt__put32(le, (uint32_t)ids[i]);
        memcpy(b + DT__TOK_HEAD + w * i, le, w); /* ids < 65536 when w is 2 */
    }
    memcpy(b, DT__TOK_MAGIC, 8);
    dt__put32(b + 8, DT__TOK_VERSION);
    dt__put32(b + 12, (uint32_t)w);
    dt__put64(b + 16, ds->n_bytes);
    dt__put32(b + 24, ds->crc32c);
    dt__put32(b + 28, ds->tok_crc32c);
    dt__put64(b + 32, k);
    dt__put32(b + 40, dt_crc32c(b + DT__TOK_HEAD, k * w));
    dt__put32(b + 44, dt_crc32c(b, DT__TOK_HEAD - 4));
    return DT_OK;
}

/* Use buf (n bytes, the cache's layout) as ds's ids; ds owns it now. */
static void dt__tok_adopt(dt_dataset *ds, uint8_t *buf)
{
    ds->ids_buf = buf;
    ds->ids = buf + DT__TOK_HEAD;
    ds->n_ids = (size_t)dt__get64(buf + 32);
    free(ds->bytes);
    ds->bytes = NULL;
}

/* Read the cache at cache into ds if it is usable (returns 1); else 0, and
 * *why says why not ("" when there is none; err[cap] may hold it). */
static int dt__tok_read(dt_dataset *ds, const dt_bpe *bpe, const char *cache, const char **why, char *err, size_t cap)
{
    *why = "";
    struct stat sb;
    if (stat(cache, &sb) != 0) return 0;
    char *buf = NULL;
    size_t n = 0;
    if (dt_file_read_whole(cache, "token cache", 0, &buf, &n) != DT_OK) {
        snprintf(err, cap, "it could not be read (%s)", dt_last_error());
        dt_clear_error();
        *why = err;
        return 0;
    }
    *why = dt__tok_check(ds, bpe, (const uint8_t *)buf, n);
    if (*why) {
        free(buf);
        return 0;
    }
    dt__tok_adopt(ds, (uint8_t *)buf);
    return 1;
}

/* Encode the text into ds and write the cache (why: the old cache's
 * reason for not being used, or ""). */
static dt_status dt__tok_make(dt_dataset *ds, dt_bpe *bpe, const char *tokenizer, const char *cache, const char *why)
{
    int32_t *ids = NULL;
    size_t k = 0;
    DT_CHECK(dt_bpe_encode(bpe, ds->bytes, ds->n_bytes, &ids, &k));
    uint8_t *buf = NULL;
    size_t n = 0;
    const dt_status st = dt__tok_build(ds, ids, k, &buf, &n);
    free(ids);
    DT_CHECK(st);
    dt__tok_adopt(ds, buf);
    char was[1300] = "";
    if (why[0]) snprintf(was, sizeof was, " (the old cache was not used: %s)", why);
    if (dt_file_write_whole(cache, "token cache", buf, n) == DT_OK)
        return dt__tok_note(ds, tokenizer, "tokenized and cached in %s%s", cache, was);
    const dt_status nst =
        dt__tok_note(ds, tokenizer, "tokenized in memory only, not cached: %s%s", dt_last_error(), was);
    if (nst == DT_OK) dt_clear_error();
    return nst;
}

dt_status dt__data_tokens_open(dt_dataset *ds, const char *path, const char *tokenizer)
{
    dt_bpe *bpe = NULL;
    DT_CHECK(dt_bpe_open(tokenizer, &bpe));
    ds->vocab = dt_bpe_vocab_size(bpe);
    ds->tok_crc32c = dt_bpe_checksum(bpe);
    ds->id_width = ds->vocab <= 65536 ? 2 : 4;
    const size_t cn = strlen(path) + 16;
    char *cache = malloc(cn);
    dt_status st = cache ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "--data %s: out of memory", path);
    if (st == DT_OK) {
        snprintf(cache, cn, "%s.tok-%08x", path, (unsigned)ds->tok_crc32c);
        const char *why = "";
        char err[1200];
        if (dt__tok_read(ds, bpe, cache, &why, err, sizeof err))
            st = dt__tok_note(ds, tokenizer, "read from the cache %s", cache);
        else st = dt__tok_make(ds, bpe, tokenizer, cache, why);
    }
    free(cache);
    dt_bpe_close(bpe);
    return st;
}

void dt__data_tokens_free(dt_dataset *ds)
{
    free(ds->ids_buf);
    free(ds->note);
    ds->ids_buf = NULL;
    ds->ids = NULL;
    ds->note = NULL;
    ds->n_ids = 0;
}
