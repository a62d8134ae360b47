/* dt_sample.h: text from a trained GPT. The sampler and the generation
 * loop (lib/model/sample.c) and a checkpoint loaded for generation on one
 * process (lib/train/generate.c); `dtrain --load DIR --generate N` is
 * their program.
 *
 * The distribution over the next token, from the logits l (V of them) of
 * the last position (Megatron-LM's and nanoGPT's semantics):
 *   temperature 0     greedy: the argmax (ties: the lowest token);
 *   temperature T > 0 p_i proportional to exp((l_i - max l) / T) over the
 *                     top_k largest logits, 0 elsewhere; top_k 0 keeps all.
 *                     Exactly top_k are kept, ties at the k-th broken
 *                     towards the lower token, so top_k 1 is greedy.
 * A draw takes one coin u, uniform in [0, 1), from dt_rng (seeded with the
 * seed alone: same seed, same coins) and returns the first token, in
 * vocabulary order, whose cumulative probability exceeds u (llm.c's
 * sample_mult). Greedy draws no coin.
 *
 * Generation has no KV cache: each new token runs the model's forward on
 * the last min(length, context) tokens of the text so far (B = 1), the
 * prompt included, and samples from the logits of the last position
 * (nanoGPT crops the same way). So a prompt longer than the context is
 * seen only by its last `context` tokens, and the first tokens of a longer
 * generation with the same seed are those of a shorter one. */
#ifndef DT_SAMPLE_H
#define DT_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "dt_gpt.h"
#include "dt_rng.h"
#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Check a temperature (finite, >= 0) and top_k (0..vocab); the message
 * names --temperature or --top-k. */
DT_API dt_status dt_sample_check(float temperature, int top_k, int vocab);

/* The distribution above: probs(V) from logits(V) (host memory). Fails
 * (DT_ERR_NUMERIC) on a NaN or infinite logit, naming the token. */
DT_API dt_status dt_sample_probs(const float *logits, int V, float temperature, int top_k, double *probs);
/* The first token whose cumulative probability exceeds coin (0 <= coin < 1),
 * among those with probs > 0; the last of them if rounding leaves the sum
 * at or below coin. */
DT_API int32_t dt_sample_pick(const double *probs, int V, double coin);
/* One draw: greedy, or a coin from rng and dt_sample_pick. probs(V) is
 * scratch. */
DT_API dt_status dt_sample_token(const float *logits, int V, float temperature, int top_k, dt_rng *rng, double *probs,
                                 int32_t *token);

typedef struct dt_generate_config {
    int n_new;         /* tokens to generate, >= 1 */
    int context;       /* the model sees at most the last `context` tokens (1..seq_len; 0: seq_len) */
    int vocab;         /* sample among tokens 0..vocab-1 (1..V; 0: V): the tokenizer's, when the model's is larger */
    float temperature; /* 0: greedy */
    int top_k;         /* 0: no truncation */
    uint64_t seed;     /* the coins' */
} dt_generate_config;

/* Called with each new token as it is made; a status other than DT_OK stops
 * the generation with that status. */
typedef dt_status (*dt_generate_fn)(void *ctx, int32_t token);

/* Continue prompt(n_prompt >= 1) by g->n_new tokens: out(n_new) (may be
 * NULL) gets them, and fn (may be NULL) sees each as it comes. Runs the
 * model's forward through its backend; the model's activations are those
 * of the last forward afterwards. */
DT_API dt_status dt_gpt_generate(dt_gpt *m, const dt_generate_config *g, const int32_t *prompt, int n_prompt,
                                 int32_t *out, dt_generate_fn fn, void *ctx);

/* ---- a checkpoint loaded for generation (lib/train/generate.c) ---------- */

/* A GPT rebuilt on one process from a checkpoint of any layout (one
 * process, data parallel, pipeline, tensor parallel, parameter server,
 * ZeRO; lib/train/generate.c says how), or from a Hugging Face GPT-2
 * directory; an mlp-bn checkpoint (no text) is refused in one line. The
 * tokenizer is the one named, else the checkpoint's data's (GPT-2's BPE
 * when it trained with --tokenizer, else bytes: a token is a byte). */
typedef struct dt_generator dt_generator;

typedef struct dt_generator_options {
    const char *dir;    /* as --load: a checkpoint, or a save directory (its latest valid one) */
    const char *hf_dir; /* instead of dir: a Hugging Face GPT-2 directory (--load-hf; dt_safetensors.h) */
    const char *tokenizer; /* GPT-2 BPE files (dt_bpe.h), or NULL: the checkpoint's, else bytes */
    const char *device; /* "cpu" (NULL) or "cuda" */
    int threads;        /* CPU threads; <= 0: the backend's default */
} dt_generator_options;

DT_API dt_status dt_generator_open(const dt_generator_options *o, dt_generator **out);
DT_API void dt_generator_free(dt_generator *g);
DT_API dt_gpt *dt_generator_model(dt_generator *g);
DT_API const char *dt_generator_path(const dt_generator *g); /* the checkpoint loaded */
/* What the search for the latest valid checkpoint skipped ("" if nothing). */
DT_API const char *dt_generator_note(const dt_generator *g);
DT_API int64_t dt_generator_iteration(const dt_generator *g);
/* The checkpoint's training sequence length: the context generation uses. */
DT_API int dt_generator_context(const dt_generator *g);
/* The tokenizer's vocabulary (256 bytes, or the BPE's): what is sampled. */
DT_API int dt_generator_vocab(const dt_generator *g);
/* "bytes" or "GPT-2 BPE"; the BPE's directory (NULL: bytes). */
DT_API const char *dt_generator_tokenizer(const dt_generator *g);
DT_API const char *dt_generator_tokenizer_dir(const dt_generator *g);
/* One line: the model, its data and the layout that saved it ("tiny, task
 * add, saved by 2 ranks: pipeline/tensor parallel"). */
DT_API const char *dt_generator_describe(const dt_generator *g);
/* The tokenizer: n bytes of text to *n_tokens tokens (*tokens malloc'd:
 * free it); a token back to its bytes (*bytes valid while g is). */
DT_API dt_status dt_generator_encode(dt_generator *g, const char *text, size_t n, int32_t **tokens, size_t *n_tokens);
DT_API dt_status dt_generator_decode(const dt_generator *g, int32_t token, const uint8_t **bytes, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
