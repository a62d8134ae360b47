/* data_text.c: training data from a plain text file (see dt_data.h), as
 * bytes or, with a tokenizer, as BPE ids (data_tokens.c makes them). The
 * whole file is read at open; the first 90% of its bytes (or ids) train
 * and the last 10% (rounded up) validate. What follows says bytes; with a
 * tokenizer read ids throughout.
 *
 * Invariants: both splits hold at least T+1 bytes (one window: T tokens and
 * the byte after the last one) for the T given at open, checked again for
 * the T of each batch. A training window is bytes[s, s+T] with s drawn from
 * the RNG seeded by (seed, DT__STREAM_TEXT_TRAIN, batch index), so a window
 * never reaches into validation. Validation windows step by T from the
 * start of the split (window k = row b of batch i, k = i*B + b, modulo the
 * number of whole windows), so consecutive batches cover the split once,
 * each byte predicted once, before wrapping. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_internal.h"
#include "dt_checkpoint.h" /* dt_crc32c */
#include "dt_file.h"
#include "dt_rng.h"

/* Smallest file whose validation split holds T+1 bytes: ceil(n/10) >= T+1
 * gives n = 10*T + 1, and the training split is then 9*T >= T+1 bytes. */
static size_t dt__text_min_bytes(int T) { return (size_t)10 * (size_t)T + 1; }

static void dt__text_split(size_t n, size_t *n_train) { *n_train = n - (n + 9) / 10; }

/* Only a regular file (dt_file_read_whole): a device (/dev/zero,
 * /dev/urandom) never ends and a FIFO with no writer blocks for ever. */
static dt_status dt__text_read(const char *path, uint8_t **out, size_t *out_n)
{
    char *buf = NULL;
    const dt_status st = dt_file_read_whole(path, "--data", 0, &buf, out_n);
    *out = (uint8_t *)buf;
    return st;
}

/* The length of the stream: bytes, or ids. */
static size_t dt__text_n(const dt_dataset *ds) { return ds->ids ? ds->n_ids : ds->n_bytes; }

/* Both splits must hold one window of T+1 bytes (or ids). */
static dt_status dt__text_check_len(const dt_dataset *ds, int T)
{
    const size_t n_val = dt__text_n(ds) - ds->n_train;
    if (n_val >= (size_t)T + 1 && ds->n_train >= (size_t)T + 1) return DT_OK;
    const char *unit = ds->ids ? "tokens" : "bytes", *what = ds->ids ? "text" : "file";
    return DT_FAIL(DT_ERR_FORMAT,
                   "--data %s: %zu %s is too short for --seq-length %d: the validation split (last 10%%) "
                   "must hold T+1 = %d %s, so the %s needs at least %zu %s",
                   ds->name, dt__text_n(ds), unit, T, T + 1, unit, what, dt__text_min_bytes(T), unit);
}

dt_status dt__data_text_open(dt_dataset *ds, const char *path, const char *tokenizer, int T)
{
    ds->kind = DT__DATA_TEXT;
    DT_CHECK(dt__text_read(path, &ds->bytes, &ds->n_bytes));
    if (ds->n_bytes == 0)
        return DT_FAIL(DT_ERR_FORMAT, "--data %s: file is empty (expected at least %zu bytes of text for T=%d)", path,
                       dt__text_min_bytes(T), T);
    ds->crc32c = dt_crc32c(ds->bytes, ds->n_bytes);
    if (tokenizer) DT_CHECK(dt__data_tokens_open(ds, path, tokenizer));
    dt__text_split(dt__text_n(ds), &ds->n_train);
    return dt__text_check_len(ds, T);
}

void dt__data_text_free(dt_dataset *ds)
{
    dt__data_tokens_free(ds);
    free(ds->bytes);
    ds->bytes = NULL;
    ds->n_bytes = ds->n_train = 0;
}

dt_status dt__data_text_batch(const dt_dataset *ds, dt_split split, uint64_t index, int B, int T, int32_t *tokens,
                              int32_t *targets, int32_t *example)
{
    DT_CHECK(dt__text_check_len(ds, T));
    size_t n_val = dt__text_n(ds) - ds->n_train;
    dt_rng rng;
    uint64_t n_windows = (n_val - 1) / (size_t)T; /* >= 1: n_val >= T+1 */
    for (int b = 0; b < B; b++) {
        size_t start;
        if (split == DT_SPLIT_TRAIN) {
            /* one stream per row of the whole run (see dt_data.h) */
            dt_rng_seed3(&rng, ds->seed, DT__STREAM_TEXT_TRAIN, index * (uint64_t)B + (uint64_t)b);
            start = (size_t)dt_rng_below(&rng, ds->n_train - (size_t)T); /* start + T <= n_train - 1 */
        } else {
            uint64_t k = (index * (uint64_t)B + (uint64_t)b) % n_windows;
            start = ds->n_train + (size_t)k * (size_t)T; /* start + T <= n_bytes - 1 */
        }
        int32_t *tok = tokens + (size_t)b * T, *tgt = targets + (size_t)b * T;
        if (ds->ids) {
            for (int t = 0; t < T; t++) {
                tok[t] = dt__data_id(ds, start + (size_t)t);
                tgt[t] = dt__data_id(ds, start + (size_t)t + 1);
            }
        } else {
            const uint8_t *w = ds->bytes + start;
            for (int t = 0; t < T; t++) {
                tok[t] = w[t];
                tgt[t] = w[t + 1];
            }
        }
        if (example)
            for (int t = 0; t < T; t++) example[(size_t)b * T + t] = -1;
    }
    return DT_OK;
}
