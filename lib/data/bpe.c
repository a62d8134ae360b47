/* bpe.c: the byte-level BPE tokenizer's encoder and decoder
 * (include/dt_bpe.h): the hash tables, GPT-2's bpe() merge loop, the word
 * cache, and the object's life (files are read by bpe_load.c, the text
 * split into words by bpe_pretok.c).
 *
 * bpe() on a word of n bytes, as encoder.py: the symbols start as the n
 * single-byte tokens; each round finds the lowest rank among the adjacent
 * pairs, then rewrites the word left to right, merging every occurrence of
 * that pair (so "aaa" with the merge "a a" gives "aa a"); it stops when no
 * pair has a rank or one symbol is left. Every symbol is a token (the
 * bytes are, and a merge's result is checked at load), so symbols are ids
 * and pairs are looked up by id. A round is O(n) and takes at least one
 * merge, so a word costs O(n^2) at worst, as encoder.py's.
 *
 * The cache maps a word's bytes to its ids, for words of up to
 * DT__BPE_CACHE_WORD bytes; at DT__BPE_CACHE_MAX words it is emptied and
 * starts again, bounding its memory on text with unbounded vocabulary. */
#include <stdlib.h>
#include <string.h>

#include "bpe_internal.h"

#define DT__BPE_CACHE_WORD 255
#define DT__BPE_CACHE_MAX (1u << 18)

static const uint8_t dt__bpe_eot_text[] = "<|endoftext|>";
#define DT__BPE_EOT_LEN (sizeof dt__bpe_eot_text - 1)

/* ---- hash tables ---- */

static uint64_t dt__bpe_hash(const uint8_t *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a mix so the low bits spread */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    h ^= h >> 32;
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static dt_status dt__smap_grow(dt__smap *m)
{
    const size_t cap = m->cap ? 2 * m->cap : 64;
    dt__smap_slot *s = malloc(cap * sizeof *s);
    if (!s) return DT_FAIL(DT_ERR_NOMEM, "tokenizer: out of memory (a table of %zu entries)", cap);
    for (size_t i = 0; i < cap; i++) s[i].len = UINT32_MAX;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slot[i].len == UINT32_MAX) continue;
        size_t j = m->slot[i].h & (cap - 1);
        while (s[j].len != UINT32_MAX) j = (j + 1) & (cap - 1);
        s[j] = m->slot[i];
    }
    free(m->slot);
    m->slot = s;
    m->cap = cap;
    return DT_OK;
}

/* The slot holding key (hash h) or NULL. */
static dt__smap_slot *dt__smap_find(const dt__smap *m, const uint8_t *pool, const uint8_t *key, uint32_t len,
                                    uint64_t h)
{
    if (!m->cap) return NULL;
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        dt__smap_slot *s = &m->slot[i];
        if (s->len == UINT32_MAX) return NULL;
        if (s->h == h && s->len == len && !memcmp(pool + s->off, key, len)) return s;
    }
}

/* A new slot for a key known to be absent (off, len set; a, b zero), or
 * NULL when out of memory. */
static dt__smap_slot *dt__smap_add(dt__smap *m, uint64_t h, uint32_t off, uint32_t len)
{
    if (2 * (m->n + 1) > m->cap && dt__smap_grow(m) != DT_OK) return NULL;
    size_t i = h & (m->cap - 1);
    while (m->slot[i].len != UINT32_MAX) i = (i + 1) & (m->cap - 1);
    dt__smap_slot *s = &m->slot[i];
    *s = (dt__smap_slot){.h = h, .off = off, .len = len};
    m->n++;
    return s;
}

static void dt__smap_free(dt__smap *m)
{
    free(m->slot);
    *m = (dt__smap){0};
}

static size_t dt__pmap_home(uint64_t key, size_t cap)
{
    key ^= key >> 31;
    key *= 0x9e3779b97f4a7c15ull;
    return (size_t)(key ^ (key >> 32)) & (cap - 1);
}

static dt_status dt__pmap_grow(dt__pmap *m)
{
    const size_t cap = m->cap ? 2 * m->cap : 64;
    dt__pmap_slot *s = malloc(cap * sizeof *s);
    if (!s) return DT_FAIL(DT_ERR_NOMEM, "tokenizer: out of memory (a table of %zu merges)", cap);
    for (size_t i = 0; i < cap; i++) s[i].key = UINT64_MAX;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slot[i].key == UINT64_MAX) continue;
        size_t j = dt__pmap_home(m->slot[i].key, cap);
        while (s[j].key != UINT64_MAX) j = (j + 1) & (cap - 1);
        s[j] = m->slot[i];
    }
    free(m->slot);
    m->slot = s;
    m->cap = cap;
    return DT_OK;
}

dt_status dt__pmap_set(dt__pmap *m, int32_t a, int32_t b, uint32_t rank, int32_t id)
{
    if (2 * (m->n + 1) > m->cap) DT_CHECK(dt__pmap_grow(m));
    const uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = dt__pmap_home(key, m->cap);
    while (m->slot[i].key != UINT64_MAX && m->slot[i].key != key) i = (i + 1) & (m->cap - 1);
    if (m->slot[i].key == UINT64_MAX) m->n++;
    m->slot[i] = (dt__pmap_slot){.key = key, .rank = rank, .id = id};
    return DT_OK;
}

static const dt__pmap_slot *dt__pmap_find(const dt__pmap *m, int32_t a, int32_t b)
{
    if (!m->cap) return NULL;
    const uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = dt__pmap_home(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        const dt__pmap_slot *s = &m->slot[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
    }
}

static void dt__pmap_free(dt__pmap *m)
{
    free(m->slot);
    *m = (dt__pmap){0};
}

static dt_status dt__bytes_put(dt__bytes *b, const void *s, size_t n)
{
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) return DT_FAIL(DT_ERR_NOMEM, "tokenizer: out of memory (%zu bytes)", cap);
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    return DT_OK;
}

/* ---- tokens ---- */

dt_status dt__bpe_add_token(dt_bpe *bpe, const char *file, const uint8_t *s, uint32_t n, int32_t id)
{
    const uint64_t h = dt__bpe_hash(s, n);
    if (dt__smap_find(&bpe->vocab, bpe->pool.p, s, n, h))
        return DT_FAIL(DT_ERR_FORMAT, "%s: id %d repeats a token that has another id (expected each token once)", file,
                       (int)id);
    if (bpe->pool.n > UINT32_MAX - n)
        return DT_FAIL(DT_ERR_FORMAT, "%s: tokens of more than 4 GiB in all (expected a vocabulary)", file);
    const uint32_t off = (uint32_t)bpe->pool.n;
    DT_CHECK(dt__bytes_put(&bpe->pool, s, n));
    dt__smap_slot *slot = dt__smap_add(&bpe->vocab, h, off, n);
    if (!slot) return DT_ERR_NOMEM;
    slot->a = (uint32_t)id;
    bpe->tok_off[id] = off;
    bpe->tok_len[id] = (int32_t)n;
    if (n == 1) bpe->byte_id[s[0]] = id;
    if (n == DT__BPE_EOT_LEN && !memcmp(s, dt__bpe_eot_text, n)) bpe->eot = id;
    return DT_OK;
}

int32_t dt__bpe_lookup(const dt_bpe *bpe, const uint8_t *s, size_t n)
{
    if (n >= UINT32_MAX) return -1;
    const dt__smap_slot *slot = dt__smap_find(&bpe->vocab, bpe->pool.p, s, (uint32_t)n, dt__bpe_hash(s, n));
    return slot ? (int32_t)slot->a : -1;
}

/* ---- encoding ---- */

/* Ids appended to a growing array. */
typedef struct dt__ids {
    int32_t *p;
    size_t n, cap;
} dt__ids;

static dt_status dt__ids_reserve(dt__ids *v, size_t more)
{
    if (more <= v->cap - v->n) return DT_OK;
    size_t cap = v->cap ? v->cap : 64;
    while (cap - v->n < more) cap *= 2;
    int32_t *p = realloc(v->p, cap * sizeof *p);
    if (!p) return DT_FAIL(DT_ERR_NOMEM, "tokenizer: out of memory (%zu ids)", cap);
    v->p = p;
    v->cap = cap;
    return DT_OK;
}

/* bpe() of word w (n bytes) in place of sym[0, n): returns the symbols left. */
static size_t dt__bpe_merge(const dt_bpe *bpe, const uint8_t *w, size_t n, int32_t *sym)
{
    for (size_t i = 0; i < n; i++) sym[i] = bpe->byte_id[w[i]];
    size_t m = n;
    while (m > 1) {
        uint32_t best = UINT32_MAX;
        int32_t a = -1, b = -1, merged = -1;
        for (size_t i = 0; i + 1 < m; i++) {
            const dt__pmap_slot *s = dt__pmap_find(&bpe->merges, sym[i], sym[i + 1]);
            if (s && s->rank < best) best = s->rank, a = sym[i], b = sym[i + 1], merged = s->id;
        }
        if (merged < 0) break;
        size_t j = 0;
        for (size_t i = 0; i < m;) {
            if (i + 1 < m && sym[i] == a && sym[i + 1] == b) sym[j++] = merged, i += 2;
            else sym[j++] = sym[i++];
        }
        m = j;
    }
    return m;
}

static void dt__bpe_cache_clear(dt_bpe *bpe)
{
    dt__smap_free(&bpe->cache);
    bpe->cache_words.n = 0;
    bpe->cache_n_ids = 0;
}

/* Remember word w's ids (best effort: a failed allocation only skips it). */
static void dt__bpe_cache_put(dt_bpe *bpe, const uint8_t *w, size_t n, uint64_t h, const int32_t *ids, size_t k)
{
    if (bpe->cache.n >= DT__BPE_CACHE_MAX) dt__bpe_cache_clear(bpe);
    if (k > bpe->cache_cap_ids - bpe->cache_n_ids) {
        size_t cap = bpe->cache_cap_ids ? 2 * bpe->cache_cap_ids : 4096;
        while (cap - bpe->cache_n_ids < k) cap *= 2;
        int32_t *p = realloc(bpe->cache_ids, cap * sizeof *p);
        if (!p) return;
        bpe->cache_ids = p;
        bpe->cache_cap_ids = cap;
    }
    const size_t off = bpe->cache_words.n;
    if (dt__bytes_put(&bpe->cache_words, w, n) != DT_OK) return;
    dt__smap_slot *s = dt__smap_add(&bpe->cache, h, (uint32_t)off, (uint32_t)n);
    if (!s) {
        bpe->cache_words.n = off;
        return;
    }
    memcpy(bpe->cache_ids + bpe->cache_n_ids, ids, k * sizeof *ids);
    s->a = (uint32_t)bpe->cache_n_ids;
    s->b = (uint32_t)k;
    bpe->cache_n_ids += k;
}

/* One pre-token's ids onto out; sym is scratch of at least n ids. */
static dt_status dt__bpe_word(dt_bpe *bpe, const uint8_t *w, size_t n, dt__ids *out, int32_t *sym)
{
    DT_CHECK(dt__ids_reserve(out, n));
    if (n == 1) {
        out->p[out->n++] = bpe->byte_id[w[0]];
        return DT_OK;
    }
    const int cacheable = n <= DT__BPE_CACHE_WORD;
    uint64_t h = 0;
    if (cacheable) {
        h = dt__bpe_hash(w, n);
        const dt__smap_slot *s = dt__smap_find(&bpe->cache, bpe->cache_words.p, w, (uint32_t)n, h);
        if (s) {
            memcpy(out->p + out->n, bpe->cache_ids + s->a, s->b * sizeof *out->p);
            out->n += s->b;
            return DT_OK;
        }
    }
    const size_t k = dt__bpe_merge(bpe, w, n, sym);
    memcpy(out->p + out->n, sym, k * sizeof *sym);
    out->n += k;
    if (cacheable) dt__bpe_cache_put(bpe, w, n, h, sym, k);
    return DT_OK;
}

/* The next "<|endoftext|>" in s[i, n), or n. */
static size_t dt__bpe_find_eot(const uint8_t *s, size_t n, size_t i)
{
    while (i + DT__BPE_EOT_LEN <= n) {
        const uint8_t *p = memchr(s + i, '<', n - DT__BPE_EOT_LEN + 1 - i);
        if (!p) break;
        i = (size_t)(p - s);
        if (!memcmp(p, dt__bpe_eot_text, DT__BPE_EOT_LEN)) return i;
        i++;
    }
    return n;
}

/* The pieces of s[0, n) (no end-of-text inside) onto out. */
static dt_status dt__bpe_stretch(dt_bpe *bpe, const uint8_t *s, size_t n, dt__ids *out, int32_t **sym, size_t *sym_cap)
{
    for (size_t i = 0; i < n;) {
        const size_t j = dt__bpe_pretok_next(s, n, i);
        if (j - i > *sym_cap) {
            int32_t *p = realloc(*sym, (j - i) * sizeof *p);
            if (!p) return DT_FAIL(DT_ERR_NOMEM, "tokenizer: out of memory (a word of %zu bytes)", j - i);
            *sym = p;
            *sym_cap = j - i;
        }
        DT_CHECK(dt__bpe_word(bpe, s + i, j - i, out, *sym));
        i = j;
    }
    return DT_OK;
}

dt_status dt_bpe_encode(dt_bpe *bpe, const void *text, size_t n, int32_t **ids, size_t *n_ids)
{
    *ids = NULL;
    *n_ids = 0;
    const uint8_t *s = text;
    dt__ids out = {0};
    size_t sym_cap = 256;
    int32_t *sym = malloc(sym_cap * sizeof *sym);
    dt_status st = sym ? dt__ids_reserve(&out, n / 4 + 16) : DT_FAIL(DT_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; st == DT_OK && i <= n;) {
        const size_t e = bpe->eot >= 0 ? dt__bpe_find_eot(s, n, i) : n;
        st = dt__bpe_stretch(bpe, s + i, e - i, &out, &sym, &sym_cap);
        if (st != DT_OK || e == n) break;
        st = dt__ids_reserve(&out, 1);
        if (st == DT_OK) out.p[out.n++] = bpe->eot;
        i = e + DT__BPE_EOT_LEN;
    }
    free(sym);
    if (st != DT_OK) {
        free(out.p);
        return st;
    }
    *ids = out.p;
    *n_ids = out.n;
    return DT_OK;
}

dt_status dt_bpe_decode(const dt_bpe *bpe, int32_t id, const uint8_t **bytes, size_t *n)
{
    if (id < 0 || id >= bpe->n_ids || bpe->tok_len[id] < 0)
        return DT_FAIL(DT_ERR_INVALID, "tokenizer %s: id %d is not in the vocabulary (expected a token's id below %d)",
                       bpe->dir, (int)id, (int)bpe->n_ids);
    *bytes = bpe->pool.p + bpe->tok_off[id];
    *n = (size_t)bpe->tok_len[id];
    return DT_OK;
}

/* ---- the object ---- */

dt_status dt_bpe_open(const char *dir, dt_bpe **out)
{
    *out = NULL;
    if (!dir || !dir[0]) return DT_FAIL(DT_ERR_INVALID, "--tokenizer '': expected a directory");
    dt_bpe *bpe = calloc(1, sizeof *bpe);
    if (!bpe || !(bpe->dir = strdup(dir))) {
        free(bpe);
        return DT_FAIL(DT_ERR_NOMEM, "--tokenizer %s: out of memory", dir);
    }
    bpe->eot = -1;
    for (int b = 0; b < 256; b++) bpe->byte_id[b] = -1;
    const dt_status st = dt__bpe_load(bpe);
    if (st != DT_OK) {
        dt_bpe_close(bpe);
        return st;
    }
    *out = bpe;
    return DT_OK;
}

void dt_bpe_close(dt_bpe *bpe)
{
    if (!bpe) return;
    dt__smap_free(&bpe->vocab);
    dt__pmap_free(&bpe->merges);
    dt__smap_free(&bpe->cache);
    free(bpe->cache_words.p);
    free(bpe->cache_ids);
    free(bpe->pool.p);
    free(bpe->tok_off);
    free(bpe->tok_len);
    free(bpe->dir);
    free(bpe);
}

int dt_bpe_vocab_size(const dt_bpe *bpe) { return (int)bpe->n_ids; }

int32_t dt_bpe_eot(const dt_bpe *bpe) { return bpe->eot; }

uint32_t dt_bpe_checksum(const dt_bpe *bpe) { return bpe->checksum; }
