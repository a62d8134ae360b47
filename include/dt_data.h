/* dt_data.h: byte-level training data. Built-in synthetic tasks generated
 * deterministically from a seed, and plain text files.
 *
 * Tasks (vocabulary: 256 byte values):
 *   add     "123+4567=4690\n"  operands of 1..digits digits
 *   reverse "hello=olleh\n"    lower-case words of 1..max_len letters
 *   sort    "dbca=abcd\n"      lower-case words of 1..max_len letters
 * Examples are packed back to back into each sequence of T+1 bytes; the
 * targets of prompt positions (and of a final, truncated example) are -1
 * (ignored), the targets of the answer and its '\n' are the next byte. An
 * example is correct when every answer target is the argmax prediction
 * (teacher forcing; equal to exact match of greedy decoding, since each
 * step then sees the right prefix). The train and validation splits are
 * disjoint: an example belongs to validation iff a hash of its prompt says
 * so, so validation examples are never trained on.
 *
 * Text (--data FILE): the first 90% of the bytes train, the last 10%
 * validate; training windows start at seeded random offsets, validation
 * windows are consecutive. Every target counts; there is no accuracy.
 *
 * Tokenized text (--data FILE --tokenizer DIR): the file is encoded once
 * with GPT-2's byte-level BPE (dt_bpe.h) and everything above counts
 * tokens instead of bytes: the split is 90/10 of the tokens, windows are
 * T+1 tokens, the vocabulary is the tokenizer's. The ids are cached beside
 * the file as FILE.tok-XXXXXXXX (the tokenizer's checksum in hex), written
 * whole or not at all (dt_file.h), and reused while its header matches the
 * text's size and CRC32C and the tokenizer and its own checksums hold;
 * otherwise it is rebuilt. Where it cannot be written the ids are kept in
 * memory only; dt_data_note says which happened.
 *
 * Cache layout (little-endian): "DTTOKIDS", u32 version (1), u32 bytes per
 * id (2 when the vocabulary has at most 65536 ids, else 4), u64 text
 * bytes, u32 text CRC32C, u32 tokenizer checksum, u64 id count, u32 CRC32C
 * of the ids, u32 CRC32C of the 44 header bytes before it; then the ids. */
#ifndef DT_DATA_H
#define DT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_split { DT_SPLIT_TRAIN = 0, DT_SPLIT_VAL = 1 } dt_split;

typedef struct dt_data_config {
    const char *task; /* "add", "reverse", "sort"; ignored when path is set */
    const char *path; /* text file, or NULL */
    uint64_t seed;
    int digits;            /* add: maximum operand digits (default 3) */
    int max_len;           /* reverse/sort: maximum word length (default 8) */
    const char *tokenizer; /* a BPE directory (dt_bpe.h) for path, or NULL: bytes */
} dt_data_config;

typedef struct dt_dataset dt_dataset;

/* Open a dataset for sequences of length T (a text file's validation part,
 * the last 10%, must hold at least T+1 bytes, so the file needs about
 * 10*(T+1) bytes; tokens with a tokenizer). Errors name the task or file;
 * a tokenizer without a text file is refused. */
DT_API dt_status dt_data_open(const dt_data_config *cfg, int T, dt_dataset **out);
DT_API void dt_data_close(dt_dataset *ds);

DT_API int dt_data_vocab_size(const dt_dataset *ds); /* 256, or the tokenizer's */
DT_API int dt_data_has_accuracy(const dt_dataset *ds);
DT_API const char *dt_data_name(const dt_dataset *ds);
/* A text file's size and CRC32C (of the bytes read at open), for a
 * checkpoint to notice a changed file; DT_ERR_UNSUPPORTED for a task.
 * Tokenized, *crc32c continues the text's CRC32C over the tokenizer's
 * checksum (4 bytes, little-endian), so a change of either shows. */
DT_API dt_status dt_data_fingerprint(const dt_dataset *ds, uint64_t *bytes, uint32_t *crc32c);
/* What opening tokenized text did, one line to print ("--data F: N tokens
 * ...; read from the cache F.tok-...", "...; tokenized and cached in ...",
 * "...; tokenized in memory only, not cached: WHY" when the cache could
 * not be written), or NULL (bytes, tasks). */
DT_API const char *dt_data_note(const dt_dataset *ds);

/* Fill batch `index` of a split: tokens(B,T), targets(B,T), and, if not
 * NULL, example(B,T): the example number (0-based within the batch) that
 * each counted target belongs to, -1 elsewhere. Each split is a stream of
 * rows, row r drawn from (seed, split, r) alone; batch `index` holds rows
 * index*B .. index*B + B-1. So one batch of N*b rows equals N consecutive
 * batches of b rows (gradient accumulation sees the same data), and the
 * same (seed, split, index, B, T) always gives the same batch. Returns the number of complete
 * examples in *n_examples (may be NULL). */
DT_API dt_status dt_data_batch(const dt_dataset *ds, dt_split split, uint64_t index, int B, int T, int32_t *tokens,
                               int32_t *targets, int32_t *example, int *n_examples);

/* Exact-match accuracy support: given example ids and per-position
 * correctness of a batch, count examples whose every counted target was
 * correct. */
DT_API void dt_data_count_correct(const int32_t *example, const uint8_t *correct, int n_positions, int n_examples,
                                  int *n_correct);

#ifdef __cplusplus
}
#endif
#endif
