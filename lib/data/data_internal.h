/* data_internal.h: the dataset object shared by data_tasks.c (synthetic
 * tasks, and the public dt_data_* entry points that dispatch on the kind)
 * and data_text.c (text files). Internal to the library.
 *
 * Invariants: name is owned (heap copy); for DT__DATA_TEXT, bytes holds the
 * whole file (n_bytes > 0), bytes[0, n_train) is the training split and
 * bytes[n_train, n_bytes) the validation split, each at least T+1 bytes
 * for the T the dataset was opened with; task fields are unused for text. */
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
};

/* Stream ids mixed into the RNG seed with (seed, index), so the splits and
 * the kinds of data never share a random stream. */
#define DT__STREAM_TASK_TRAIN 0x7461736b74726e00ULL
#define DT__STREAM_TASK_VAL 0x7461736b76616c00ULL
#define DT__STREAM_TEXT_TRAIN 0x7465787474726e00ULL

/* data_text.c: read the file at path into ds (kind, bytes, splits). */
dt_status dt__data_text_open(dt_dataset *ds, const char *path, int T);
void dt__data_text_free(dt_dataset *ds);
/* Fill a (B,T) batch from the text; example (if not NULL) is all -1. */
dt_status dt__data_text_batch(const dt_dataset *ds, dt_split split, uint64_t index, int B, int T, int32_t *tokens,
                              int32_t *targets, int32_t *example);

#endif
