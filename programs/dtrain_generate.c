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

#include "dtrain_prog.h"

#define GIVEN(flag) dt_args_given(args, n_args, flag)

/* The flags that mean something with --generate. */
static const char *const dtrain_gen_flags[] = {"--generate", "--prompt", "--temperature", "--top-k", "--load",
                                               "--seed",     "--device", "--threads",     NULL};

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
        static const char *const ok[] = {"--export-hf", "--load", "--device", "--threads", NULL};
        for (int i = 0; i < n_args; i++) {
            if (args[i].kind == DT_ARG_SECTION || !args[i].given) continue;
            int fine = 0;
            for (const char *const *f = ok; *f; f++) fine |= !strcmp(*f, args[i].name);
            if (!fine) {
                fprintf(stderr, PROG ": %s: not used with --export-hf (it takes --load, --device, --threads)\n",
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
        static const char *const only[] = {"--prompt", "--temperature", "--top-k", NULL};
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
                         "--generate takes --load, --prompt, --temperature, --top-k, --seed, --device, --threads)\n",
                    args[i].name);
            return 2;
        }
    if (!o->load) {
        fprintf(stderr, PROG ": --generate: needs --load DIR (the checkpoint to sample from)\n");
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
    w->last = dt_generator_decode(w->g, token);
    dtrain_gen_put(w->last);
    fflush(stdout);
    return DT_OK;
}

int dtrain_generate(const dtrain_opts *o)
{
    const dt_generator_options go = {.dir = o->load, .device = o->device, .threads = o->threads};
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
    if (dt_generator_note(g)[0]) fprintf(stderr, PROG ": warning: --load %s: %s\n", o->load, dt_generator_note(g));
    const size_t n = strlen(o->prompt);
    int32_t *prompt = malloc(n * sizeof *prompt);
    if (!prompt || n > (size_t)INT32_MAX - (size_t)o->generate) {
        fprintf(stderr, PROG ": --prompt: %s\n", prompt ? "too long" : "out of memory");
        free(prompt);
        dt_generator_free(g);
        return prompt ? 2 : 1;
    }
    dt_generator_encode(g, o->prompt, n, prompt);
    char crop[96] = "";
    if (n > (size_t)context)
        snprintf(crop, sizeof crop, ", longer than the context: the model sees its last %d", context);
    printf("generate: %s at iteration %lld (%s), context %d; prompt %zu byte%s%s; temperature %g%s, top-k %d%s, "
           "seed %llu\n",
           dt_generator_path(g), (long long)dt_generator_iteration(g), dt_generator_describe(g), context, n,
           n == 1 ? "" : "s", crop, (double)o->temperature, o->temperature == 0.0f ? " (greedy)" : "", o->top_k,
           o->top_k == 0 ? " (all)" : "", (unsigned long long)o->job.seed);
    for (size_t i = 0; i < n; i++) dtrain_gen_put((unsigned char)o->prompt[i]);
    dtrain_gen_out w = {.g = g, .last = n ? (unsigned char)o->prompt[n - 1] : 0};
    const dt_generate_config gc = {.n_new = o->generate,
                                   .context = context,
                                   .vocab = vocab,
                                   .temperature = o->temperature,
                                   .top_k = o->top_k,
                                   .seed = o->job.seed};
    dt_status st = dt_gpt_generate(dt_generator_model(g), &gc, prompt, (int)n, NULL, dtrain_gen_token, &w);
    if (w.last != '\n') putchar('\n');
    fflush(stdout);
    if (st != DT_OK) fprintf(stderr, PROG ": %s\n", dt_last_error());
    free(prompt);
    dt_generator_free(g);
    return st == DT_OK ? 0 : 1;
}

int dtrain_export_hf(const dtrain_opts *o)
{
    const dt_generator_options go = {.dir = o->load, .device = o->device, .threads = o->threads};
    dt_generator *g = NULL;
    if (dt_generator_open(&go, &g) != DT_OK || dt_gpt_export_hf(dt_generator_model(g), o->export_hf) != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dt_last_error());
        dt_generator_free(g);
        return 1;
    }
    const dt_gpt_config *c = dt_gpt_config_of(dt_generator_model(g));
    printf("exported %s (iteration %lld; %d layers, width %d, %d heads, vocabulary %d, context %d, %s embeddings) to "
           "%s/config.json and %s/model.safetensors\n",
           dt_generator_path(g), (long long)dt_generator_iteration(g), c->num_layers, c->hidden_size, c->num_heads,
           c->vocab_size, c->seq_len, c->tie_embeddings ? "tied" : "untied", o->export_hf, o->export_hf);
    dt_generator_free(g);
    return 0;
}
