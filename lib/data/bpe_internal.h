/* bpe_internal.h: the byte-level BPE tokenizer's object and pieces shared
 * by its files (include/dt_bpe.h). Internal to the library.
 *
 *   bpe.c            the hash tables, GPT-2's bpe() merge loop, the word
 *                    cache, encode, decode
 *   bpe_load.c       vocab.json + merges.txt or tokenizer.json into a dt_bpe
 *   bpe_pretok.c     GPT-2's byte-to-unicode table and pre-tokenization
 *   unicode_class.c  letter / number / space classes (generated)
 *
 * Invariants of a dt_bpe once open: every token is a non-empty byte
 * string (the vocab's strings mapped back through byte-to-unicode), no two
 * tokens share an id or a string; ids lie in [0, n_ids) with tok_len < 0
 * marking an unused id; all 256 single bytes are tokens (byte_id), so any
 * byte string encodes; every merge (a, b) has a, b and their concatenation
 * in the vocab, its rank its line (or array index) among the merges. */
#ifndef DT_BPE_INTERNAL_H
#define DT_BPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dt_bpe.h"

/* ---- unicode_class.c ---- */
typedef enum dt__uc_class { DT__UC_OTHER = 0, DT__UC_LETTER, DT__UC_NUMBER, DT__UC_SPACE } dt__uc_class;
/* The class of code point c (any value; above U+10FFFF: other). */
dt__uc_class dt__uc_class_of(uint32_t c);

/* ---- bpe_pretok.c ---- */
/* GPT-2's bytes_to_unicode(): byte b is shown as code point
 * dt__bpe_byte_cp(b) (U+0021..U+00FF for printable Latin-1, U+0100..U+0143
 * for the other 68 bytes in order). */
uint32_t dt__bpe_byte_cp(uint8_t b);
/* The inverse: the byte shown as code point cp, or -1 when cp shows none. */
int dt__bpe_cp_byte(uint32_t cp);
/* The end (exclusive) of the pre-token that starts at byte i < n of s:
 * GPT-2's pattern matched at i (see bpe_pretok.c). Always > i. */
size_t dt__bpe_pretok_next(const uint8_t *s, size_t n, size_t i);

/* ---- bpe.c: hash tables (open addressing, linear probing; their
 * functions are bpe.c's own but dt__pmap_set) ---- */

/* Byte strings held in a caller's pool by offset -> two 32-bit values. */
typedef struct dt__smap_slot {
    uint64_t h;    /* hash of the key */
    uint32_t off;  /* key = pool[off, off+len) */
    uint32_t len;  /* UINT32_MAX: empty slot */
    uint32_t a, b; /* values */
} dt__smap_slot;

typedef struct dt__smap {
    dt__smap_slot *slot; /* (cap), cap a power of two, n <= cap/2 */
    size_t cap, n;
} dt__smap;

/* Pairs of token ids (a << 32 | b) -> the merge's rank and the merged id. */
typedef struct dt__pmap_slot {
    uint64_t key; /* UINT64_MAX: empty (ids are below 2^31) */
    uint32_t rank;
    int32_t id;
} dt__pmap_slot;

typedef struct dt__pmap {
    dt__pmap_slot *slot;
    size_t cap, n;
} dt__pmap;

/* Set (a, b) -> (rank, id), replacing an earlier rank (a repeated merge's
 * last line wins, as in GPT-2's dict and Hugging Face's map); NOMEM. */
dt_status dt__pmap_set(dt__pmap *m, int32_t a, int32_t b, uint32_t rank, int32_t id);

/* A growing byte buffer. */
typedef struct dt__bytes {
    uint8_t *p;
    size_t n, cap;
} dt__bytes;

struct dt_bpe {
    char *dir;
    int32_t n_ids;     /* max id + 1 */
    uint32_t *tok_off; /* (n_ids) into pool */
    int32_t *tok_len;  /* (n_ids) bytes; -1: no token has this id */
    dt__bytes pool;    /* token bytes */
    dt__smap vocab;    /* token bytes -> id (a) */
    int32_t byte_id[256];
    dt__pmap merges;
    size_t n_merges;   /* lines read, repeats included */
    int32_t eot;       /* id of "<|endoftext|>", or -1 */
    uint32_t checksum; /* see dt_bpe_checksum */
    /* the word cache: word bytes -> ids[a, a+b) of cache_ids */
    dt__smap cache;
    dt__bytes cache_words;
    int32_t *cache_ids;
    size_t cache_n_ids, cache_cap_ids;
};

/* bpe_load.c: fill bpe (dir set, everything else zero) from its files. */
dt_status dt__bpe_load(dt_bpe *bpe);
/* bpe.c: add a token (its bytes) with an id; refuses a repeat. */
dt_status dt__bpe_add_token(dt_bpe *bpe, const char *file, const uint8_t *s, uint32_t n, int32_t id);
/* The id of a token's bytes, or -1. */
int32_t dt__bpe_lookup(const dt_bpe *bpe, const uint8_t *s, size_t n);

#endif
