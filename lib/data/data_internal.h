/* data_internal.h: the dataset object shared by data_tasks.c (synthetic
 * tasks, and the public dt_data_* entry points that dispatch on the kind)
 * and data_text.c (text files). Internal to the library.
 *
 * Invariants: name is owned (heap copy); for DT__DATA_TEXT, bytes holds the
 * whole file (n_bytes > 0), bytes[0, n_train) is the training split and
 * bytes[n_train, n_bytes) the validation split, each at least T+1 bytes
 * for the T the dataset was opened with; task fields are unused for text.
 * Tokenized text (ids != NULL) keeps n_bytes and crc32c of the file but
 * not its bytes (NULL): ids[0, n_ids) is the stream, n_train counts ids,
 * and the same T+1 rule holds in ids. */
#ifndef DT_DATA_INTERNAL_H
#define DT_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dt_data.h"

typedef enum dt__data_kind { DT__DATA_ADD = 0, DT__DATA_REVERSE, DT__DATA_SORT, DT__DATA_TEXT } dt__data_kind;

struct dt_dataset {
    dt__data_kind kind;
    char *name; /* task name, or the text file's path */
    uint64_t seed;
    int T; /* sequence length given at open */
    /* tasks */
    int digits;             /* add: operands have 1..digits digits */
    int max_len;            /* reverse/sort: words of 1..max_len letters */
    int max_example;        /* bytes of the longest possible example */
    uint64_t val_threshold; /* a prompt validates iff its hash is below this */
    /* text */
    uint8_t *bytes;
    size_t n_bytes;
    size_t n_train;  /* bytes[0, n_train) train; the rest validates */
    uint32_t crc32c; /* CRC32C of bytes[0, n_bytes) (dt_data_fingerprint) */
    /* tokenized text (data_tokens.c) */
    const void *ids; /* (n_ids) uint16 or uint32 by id_width, into ids_buf */
    void *ids_buf;   /* owned */
    size_t n_ids;
    int id_width;        /* 2 or 4 */
    int vocab;           /* the tokenizer's vocabulary size */
    uint32_t tok_crc32c; /* dt_bpe_checksum */
    char *note;          /* dt_data_note, owned */
};

/* Token k of tokenized text. */
static inline int32_t dt__data_id(const dt_dataset *ds, size_t k)
{
    return ds->id_width == 2 ? (int32_t)((const uint16_t *)ds->ids)[k] : (int32_t)((const uint32_t *)ds->ids)[k];
}

/* Stream ids mixed into the RNG seed with (seed, index), so the splits and
 * the kinds of data never share a random stream. */
#define DT__STREAM_TASK_TRAIN 0x7461736b74726e00ULL
#define DT__STREAM_TASK_VAL 0x7461736b76616c00ULL
#define DT__STREAM_TEXT_TRAIN 0x7465787474726e00ULL

/* data_text.c: read the file at path into ds (kind, bytes, splits),
 * tokenized with the BPE directory tokenizer unless it is NULL. */
dt_status dt__data_text_open(dt_dataset *ds, const char *path, const char *tokenizer, int T);
void dt__data_text_free(dt_dataset *ds);
/* Fill a (B,T) batch from the text; example (if not NULL) is all -1. */
dt_status dt__data_text_batch(const dt_dataset *ds, dt_split split, uint64_t index, int B, int T, int32_t *tokens,
                              int32_t *targets, int32_t *example);
/* data_tokens.c: ds->bytes (the file at path) into ids, through the cache
 * beside it; frees ds->bytes and sets the note. */
dt_status dt__data_tokens_open(dt_dataset *ds, const char *path, const char *tokenizer);
void dt__data_tokens_free(dt_dataset *ds);

#endif
