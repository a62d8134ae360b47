/* dtrain_generate.c: `dtrain --load DIR --generate N --prompt TEXT`: what
 * a checkpoint learned, as text (dt_sample.h: the distribution, the
 * cropping to the context; lib/train/generate.c: which checkpoints load).
 *
 * One process: under mpirun with more than one rank it is refused (rank 0
 * says so), with -np 1 it runs as without mpirun (MPI is never started).
 * The model and its data come from the checkpoint, so of dtrain's other
 * flags only --seed (the coins), --device and --threads apply; any other is
 * refused. The same checkpoint, prompt, flags, --device and --threads give
 * the same text.
 *
 * Output (stdout): one line `generate: ...` (the checkpoint, its model and
 * data, the context, the sampling), then the text, prompt first, streamed
 * as it is made, ending with a newline (added when the text has none).
 * Bytes are written as they are (the data's byte-level tokenizer), except
 * control characters other than newline and tab, written \xNN so that a
 * half-trained model cannot drive the terminal. Exit status as dtrain's: 2
 * for a bad command line (one line naming the flag), 1 for a checkpoint
 * that cannot be read or generated from. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain_prog.h"

#define GIVEN(flag) dt_args_given(args, n_args, flag)

/* The flags that mean something with --generate. */
static const char *const dtrain_gen_flags[] = {"--generate", "--prompt",  "--temperature", "--top-k",  "--load",
                                               "--load-hf",  "--tokenizer", "--logits",    "--seed",   "--device",
                                               "--threads",  NULL};

static int dtrain_gen_flag(const char *name)
{
    for (const char *const *f = dtrain_gen_flags; *f; f++)
        if (!strcmp(*f, name)) return 1;
    return 0;
}

/* The processes of the launcher's job (1 outside one). */
static long dtrain_gen_world(void)
{
    const char *s = getenv("OMPI_COMM_WORLD_SIZE");
    if (!s) s = getenv("PMI_SIZE");
    return s ? atol(s) : 1;
}

int dtrain_generate_flags(const dtrain_opts *o, dt_arg *args, int n_args)
{
    if (GIVEN("--export-hf")) {
        static const char *const ok[] = {"--export-hf", "--load", "--tokenizer", "--device", "--threads", NULL};
        for (int i = 0; i < n_args; i++) {
            if (args[i].kind == DT_ARG_SECTION || !args[i].given) continue;
            int fine = 0;
            for (const char *const *f = ok; *f; f++) fine |= !strcmp(*f, args[i].name);
            if (!fine) {
                fprintf(stderr,
                        PROG ": %s: not used with --export-hf (it takes --load, --tokenizer, --device, --threads)\n",
                        args[i].name);
                return 2;
            }
        }
        if (!o->load) {
            fprintf(stderr, PROG ": --export-hf: needs --load DIR (the checkpoint to export)\n");
            return 2;
        }
        if (dtrain_gen_world() > 1) {
            fprintf(stderr, PROG ": --export-hf: runs on one process (use mpirun -np 1, or no mpirun)\n");
            return 2;
        }
        return 0;
    }
    if (!GIVEN("--generate")) {
        static const char *const only[] = {"--prompt", "--temperature", "--top-k", "--logits", NULL};
        for (const char *const *f = only; *f; f++)
            if (GIVEN(*f)) {
                fprintf(stderr, PROG ": %s: needs --generate N (sampling from a checkpoint)\n", *f);
                return 2;
            }
        return 0;
    }
    for (int i = 0; i < n_args; i++)
        if (args[i].kind != DT_ARG_SECTION && args[i].given && !dtrain_gen_flag(args[i].name)) {
            fprintf(stderr,
                    PROG ": %s: not used with --generate (the model and its data come from the checkpoint; "
                         "--generate takes --load or --load-hf, --tokenizer, --prompt, --temperature, --top-k, "
                         "--logits, --seed, --device, --threads)\n",
                    args[i].name);
            return 2;
        }
    if (!o->load == !o->load_hf) {
        fprintf(stderr, PROG ": --generate: needs --load DIR (a checkpoint) or --load-hf DIR (a Hugging Face GPT-2), "
                             "one of them\n");
        return 2;
    }
    if (o->generate == 0 && !o->logits) {
        fprintf(stderr, PROG ": --generate 0: only with --logits FILE (nothing to write otherwise)\n");
        return 2;
    }
    if (!o->prompt) {
        fprintf(stderr, PROG ": --generate: needs --prompt TEXT (at least one byte: the model has no "
                             "start-of-text token)\n");
        return 2;
    }
    const long world = dtrain_gen_world();
    if (world > 1) {
        fprintf(stderr,
                PROG ": --generate: runs on one process; this job has %ld ranks (use mpirun -np 1, or no "
                     "mpirun)\n",
                world);
        return 2;
    }
    return 0;
}

/* The text's bytes as the terminal should see them. */
static void dtrain_gen_put(unsigned char c)
{
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) printf("\\x%02x", c);
    else putchar(c);
}

typedef struct dtrain_gen_out {
    const dt_generator *g;
    unsigned char last;
} dtrain_gen_out;

static dt_status dtrain_gen_token(void *ctx, int32_t token)
{
    dtrain_gen_out *w = ctx;
    const uint8_t *b;
    size_t n;
    DT_CHECK(dt_generator_decode(w->g, token, &b, &n));
    for (size_t i = 0; i < n; i++) dtrain_gen_put(b[i]);
    if (n) w->last = b[n - 1];
    fflush(stdout);
    return DT_OK;
}

/* --logits FILE: the prompt's logits (its last `context` tokens, one
 * forward), float32 little-endian, one row of the model's vocabulary per
 * token: what tools/hf_compare.py reads. */
static dt_status dtrain_gen_logits(dt_gpt *m, const char *path, const int32_t *tokens, int n)
{
    const size_t V = (size_t)dt_gpt_config_of(m)->vocab_size;
    float *l = malloc((size_t)n * V * sizeof *l);
    if (!l) return DT_FAIL(DT_ERR_NOMEM, "--logits: out of memory for %d x %zu logits", n, V);
    dt_status st = dt_gpt_forward(m, tokens, NULL, 1, n, NULL);
    if (st == DT_OK) st = dt_gpt_logits(m, l);
    if (st == DT_OK) st = dt_file_write_whole(path, "--logits", l, (size_t)n * V * sizeof *l);
    free(l);
    return st;
}

int dtrain_generate(const dtrain_opts *o)
{
    const dt_generator_options go = {.dir = o->load,
                                     .hf_dir = o->load_hf,
                                     .tokenizer = o->tokenizer,
                                     .device = o->device,
                                     .threads = o->threads};
    const char *src = o->load ? o->load : o->load_hf;
    dt_generator *g = NULL;
    if (dt_generator_open(&go, &g) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        return 1;
    }
    const int vocab = dt_generator_vocab(g), context = dt_generator_context(g);
    if (dt_sample_check(o->temperature, o->top_k, vocab) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        dt_generator_free(g);
        return 2;
    }
    if (dt_generator_note(g)[0]) fprintf(stderr, PROG ": warning: --load %s: %s\n", src, dt_generator_note(g));
    const size_t n = strlen(o->prompt);
    int32_t *prompt = NULL;
    size_t nt = 0;
    if (dt_generator_encode(g, o->prompt, n, &prompt, &nt) != DT_OK || nt > (size_t)INT32_MAX - (size_t)o->generate) {
        fprintf(stderr, PROG ": --prompt: %s\n", prompt ? "too long" : dt_last_error());
        free(prompt);
        dt_generator_free(g);
        return prompt ? 2 : 1;
    }
    char crop[96] = "";
    if (nt > (size_t)context)
        snprintf(crop, sizeof crop, ", longer than the context: the model sees its last %d", context);
    char toks[64] = "", bpe[4200] = "";
    if (dt_generator_tokenizer_dir(g)) { /* bytes: a token is a byte, said as before */
        snprintf(toks, sizeof toks, " = %zu token%s", nt, nt == 1 ? "" : "s");
        snprintf(bpe, sizeof bpe, ", tokenizer GPT-2 BPE from %s (%d tokens)", dt_generator_tokenizer_dir(g), vocab);
    }
    printf("generate: %s at iteration %lld (%s), context %d%s; prompt %zu byte%s%s%s; temperature %g%s, top-k %d%s, "
           "seed %llu\n",
           dt_generator_path(g), (long long)dt_generator_iteration(g), dt_generator_describe(g), context, bpe, n,
           n == 1 ? "" : "s", toks, crop, (double)o->temperature, o->temperature == 0.0f ? " (greedy)" : "", o->top_k,
           o->top_k == 0 ? " (all)" : "", (unsigned long long)o->job.seed);
    dt_status st = DT_OK;
    if (o->logits) {
        const int seen = nt > (size_t)context ? context : (int)nt;
        st = dtrain_gen_logits(dt_generator_model(g), o->logits, prompt + (nt - (size_t)seen), seen);
        if (st == DT_OK)
            printf("logits: %d token%s x %d float32 (little-endian) in %s\n", seen, seen == 1 ? "" : "s",
                   dt_gpt_config_of(dt_generator_model(g))->vocab_size, o->logits);
    }
    for (size_t i = 0; st == DT_OK && i < n; i++) dtrain_gen_put((unsigned char)o->prompt[i]);
    dtrain_gen_out w = {.g = g, .last = n ? (unsigned char)o->prompt[n - 1] : 0};
    const dt_generate_config gc = {.n_new = o->generate,
                                   .context = context,
                                   .vocab = vocab,
                                   .temperature = o->temperature,
                                   .top_k = o->top_k,
                                   .seed = o->job.seed};
    if (st == DT_OK && o->generate > 0)
        st = dt_gpt_generate(dt_generator_model(g), &gc, prompt, (int)nt, NULL, dtrain_gen_token, &w);
    if (st == DT_OK && w.last != '\n') putchar('\n');
    fflush(stdout);
    if (st != DT_OK) fprintf(stderr, PROG ": %s\n", dt_last_error());
    free(prompt);
    dt_generator_free(g);
    return st == DT_OK ? 0 : 1;
}

/* The tokenizer's files (GPT-2's pair, else tokenizer.json) copied into
 * OUT beside the model, so that OUT is a whole Hugging Face directory. */
static dt_status dtrain_copy_tokenizer(const char *from, const char *to, char *what, size_t cap)
{
    static const char *const sets[2][3] = {{"vocab.json", "merges.txt", NULL}, {"tokenizer.json", NULL, NULL}};
    char src[4200], dst[4200];
    for (int k = 0; k < 2; k++) {
        snprintf(src, sizeof src, "%s/%s", from, sets[k][0]);
        if (access(src, R_OK) != 0) continue;
        what[0] = 0;
        for (int i = 0; sets[k][i]; i++) {
            char *buf = NULL;
            size_t n = 0;
            snprintf(src, sizeof src, "%s/%s", from, sets[k][i]);
            snprintf(dst, sizeof dst, "%s/%s", to, sets[k][i]);
            DT_CHECK(dt_file_read_whole(src, "--tokenizer", 0, &buf, &n));
            const dt_status st = dt_file_write_whole(dst, "--export-hf", buf, n);
            free(buf);
            DT_CHECK(st);
            const size_t at = strlen(what);
            snprintf(what + at, cap - at, "%s%s/%s", at ? ", " : "", to, sets[k][i]);
        }
        return DT_OK;
    }
    return DT_FAIL(DT_ERR_IO, "--tokenizer %s: neither vocab.json nor tokenizer.json to copy", from);
}

int dtrain_export_hf(const dtrain_opts *o)
{
    const dt_generator_options go = {.dir = o->load, .tokenizer = o->tokenizer, .device = o->device,
                                     .threads = o->threads};
    dt_generator *g = NULL;
    char tok[8500] = "";
    if (dt_generator_open(&go, &g) != DT_OK || dt_gpt_export_hf(dt_generator_model(g), o->export_hf) != DT_OK ||
        (dt_generator_tokenizer_dir(g) &&
         dtrain_copy_tokenizer(dt_generator_tokenizer_dir(g), o->export_hf, tok, sizeof tok) != DT_OK)) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        dt_generator_free(g);
        return 1;
    }
    const dt_gpt_config *c = dt_gpt_config_of(dt_generator_model(g));
    printf("exported %s (iteration %lld; %d layers, width %d, %d heads, vocabulary %d, context %d, %s embeddings) to "
           "%s/config.json and %s/model.safetensors%s%s\n",
           dt_generator_path(g), (long long)dt_generator_iteration(g), c->num_layers, c->hidden_size, c->num_heads,
           c->vocab_size, c->seq_len, c->tie_embeddings ? "tied" : "untied", o->export_hf, o->export_hf,
           tok[0] ? "; the tokenizer to " : "", tok);
    dt_generator_free(g);
    return 0;
}
