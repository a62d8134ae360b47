/* dt_bpe.h: GPT-2's byte-level BPE tokenizer (lib/data/bpe*.c), read from
 * the files Hugging Face ships with a model: DIR/vocab.json and
 * DIR/merges.txt, or DIR/tokenizer.json (its model.vocab and model.merges)
 * when that pair is absent.
 *
 * Encoding, as GPT-2's encoder.py and Hugging Face's GPT2Tokenizer:
 *   1. "<|endoftext|>", when the vocab has it, is cut out as its own id;
 *   2. each remaining stretch is split by GPT-2's pattern
 *        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      (matched by hand; \p{L}, \p{N} from Unicode 14.0, \s the White_Space
 *      property as the regex module has it);
 *   3. each piece, as bytes, is merged by bpe(): the adjacent pair with the
 *      lowest merge rank is merged everywhere (left to right) until no pair
 *      has a rank; the symbols are then the ids.
 * Input is raw bytes, not required to be UTF-8: a byte that does not begin
 * a well-formed UTF-8 character (RFC 3629: no overlong form, no surrogate,
 * at most U+10FFFF) counts as one character of neither letter, number nor
 * space. Every byte string encodes, and decoding its ids gives it back.
 *
 * Token strings in the files are in GPT-2's byte-to-unicode alphabet ("Ġ"
 * is the byte 0x20); dt_bpe_decode gives the bytes. A dt_bpe caches the
 * ids of words it has seen: dt_bpe_encode changes it, so one thread at a
 * time per dt_bpe (open one per thread to encode in parallel). */
#ifndef DT_BPE_H
#define DT_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_bpe dt_bpe;

/* Load DIR's tokenizer. Refused with one line naming the file and what
 * was expected: missing files, bad JSON, a token id that repeats, is
 * negative or is 2^31 - 1 or more, a token string not made of
 * byte-to-unicode characters, a byte with no token of its own (all 256
 * must be in the vocab), a merges line that is not two tokens, a merge
 * naming a token (or making one) the vocab lacks. */
DT_API dt_status dt_bpe_open(const char *dir, dt_bpe **out);
DT_API void dt_bpe_close(dt_bpe *bpe); /* NULL: nothing */

/* Max id + 1 (ids the vocab skips are valid nowhere). */
DT_API int dt_bpe_vocab_size(const dt_bpe *bpe);
/* The id of "<|endoftext|>", or -1 when the vocab has none. */
DT_API int32_t dt_bpe_eot(const dt_bpe *bpe);
/* CRC32C of what the tokenizer does, for caches of encoded text: every
 * id's bytes and the merges in rank order, under a version tag of the
 * pre-tokenizer. The same vocab and merges give the same checksum whether
 * read from vocab.json + merges.txt or tokenizer.json, however the JSON is
 * laid out. */
DT_API uint32_t dt_bpe_checksum(const dt_bpe *bpe);

/* Encode n bytes of text: *ids (malloc'd, never NULL on success; free it)
 * holds *n_ids ids. Fails only for memory. */
DT_API dt_status dt_bpe_encode(dt_bpe *bpe, const void *text, size_t n, int32_t **ids, size_t *n_ids);
/* The bytes of token id (*bytes points into bpe, valid until close);
 * DT_ERR_INVALID for an id outside the vocab. */
DT_API dt_status dt_bpe_decode(const dt_bpe *bpe, int32_t id, const uint8_t **bytes, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
