/* bench_interop.c: `dtbench interop`: what moving a model and its text in
 * and out of the Hugging Face formats costs (issue 40), each figure with
 * its reference measured in the same run:
 *   - a model (default gpt2-124m: 124M parameters, 498 MB of F32):
 *     GPT-2's seeded initialisation (the reference: what a run without
 *     --load-hf does), --export-hf's write (dt_gpt_export_hf) and
 *     --load-hf's read (dt_hf_open, the headers checked, then
 *     dt_gpt_init_weights_from: every tensor read, the Conv1D weights
 *     transposed); the import's weights are checked equal to the seeded
 *     model's, bit for bit. Seconds (best of --repeats), MB/s of the file,
 *     the ratio to the initialisation;
 *   - with --tokenizer DIR --data FILE (first): the text tokenized (dt_bpe_encode,
 *     MB/s and tokens/s, best of --repeats, a fresh tokenizer each so no
 *     word is cached from the run before) against opening the dataset
 *     from its token cache (dt_data_open, the second time): the cache's
 *     speed-up.
 * The export goes to a temporary directory, removed after. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtbench.h"

static double now_s(void) { return (double)dt_time_ns() * 1e-9; }

static void rm_dir(const char *dir)
{
    char p[4200];
    static const char *const files[] = {"model.safetensors", "config.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

static int bench_model(const char *model, int threads, int repeats)
{
    dt_gpt_config c;
    if (dt_gpt_config_preset(model, &c) != DT_OK) dtbench_die("interop");
    dt_backend *be = NULL;
    const dt_backend_options bo = {threads, -1};
    dtbench_check(dt_backend_create_with("cpu", &bo, &be), "interop: backend");
    dt_gpt *a = NULL, *b = NULL;
    dtbench_check(dt_gpt_create(&c, be, &a), "interop: model");
    dtbench_check(dt_gpt_create(&c, be, &b), "interop: model");
    char dir[] = "/tmp/dtbench-interop-XXXXXX";
    if (!mkdtemp(dir)) dtbench_die("interop: temporary directory");
    double t_init = 1e30, t_export = 1e30, t_import = 1e30;
    for (int r = 0; r < repeats; r++) {
        double t0 = now_s();
        dtbench_check(dt_gpt_init_weights(a, 1337), "interop: init");
        double t1 = now_s();
        if (t1 - t0 < t_init) t_init = t1 - t0;
        rm_dir(dir);
        t0 = now_s();
        dtbench_check(dt_gpt_export_hf(a, dir), "interop: export");
        t1 = now_s();
        if (t1 - t0 < t_export) t_export = t1 - t0;
        t0 = now_s();
        dt_hf_model *h = NULL;
        dtbench_check(dt_hf_open(dir, &h), "interop: --load-hf");
        const dt_gpt_init init = dt_hf_init(h);
        dtbench_check(dt_gpt_init_weights_from(b, &init), "interop: import");
        dt_hf_close(h);
        t1 = now_s();
        if (t1 - t0 < t_import) t_import = t1 - t0;
    }
    const size_t n = dt_gpt_layout(a)->numel;
    const int same = memcmp(dt_gpt_params(a), dt_gpt_params(b), n * sizeof(float)) == 0;
    char p[4200];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    struct stat sb;
    const double mb = stat(p, &sb) == 0 ? (double)sb.st_size / 1e6 : 0;
    rm_dir(dir);
    printf("# model %s: %zu parameters, model.safetensors %.1f MB (F32); best of %d; vs_init: seconds over the "
           "seeded initialisation's, same run\n",
           model, dt_gpt_config_num_params(&c), mb, repeats);
    printf("# %-22s %10s %10s %10s\n", "step", "seconds", "MB/s", "vs_init");
    printf("  %-22s %10.3f %10s %10.2f\n", "seeded init", t_init, "-", 1.0);
    printf("  %-22s %10.3f %10.0f %10.2f\n", "--export-hf (write)", t_export, mb / t_export, t_export / t_init);
    printf("  %-22s %10.3f %10.0f %10.2f\n", "--load-hf (read)", t_import, mb / t_import, t_import / t_init);
    printf("  import == seeded model, bit for bit: %s\n", same ? "yes" : "NO");
    dt_gpt_free(a);
    dt_gpt_free(b);
    dt_backend_destroy(be);
    return same ? 0 : 1;
}

static int bench_bpe(const char *tok, const char *data, int repeats)
{
    char *text = NULL;
    size_t n = 0;
    dtbench_check(dt_file_read_whole(data, "--data", 0, &text, &n), "interop");
    double t_enc = 1e30;
    size_t n_ids = 0;
    int vocab = 0;
    for (int r = 0; r < repeats; r++) {
        dt_bpe *bpe = NULL;
        dtbench_check(dt_bpe_open(tok, &bpe), "interop");
        vocab = dt_bpe_vocab_size(bpe);
        int32_t *ids = NULL;
        const double t0 = now_s();
        dtbench_check(dt_bpe_encode(bpe, text, n, &ids, &n_ids), "interop: encode");
        const double t1 = now_s();
        if (t1 - t0 < t_enc) t_enc = t1 - t0;
        free(ids);
        dt_bpe_close(bpe);
    }
    free(text);
    /* the dataset: once to make sure the cache exists, then timed from it */
    const dt_data_config dc = {.path = data, .tokenizer = tok, .seed = 1, .digits = 3, .max_len = 8};
    dt_dataset *ds = NULL;
    dtbench_check(dt_data_open(&dc, 8, &ds), "interop: dataset");
    dt_data_close(ds);
    double t_cache = 1e30;
    const char *note = NULL;
    for (int r = 0; r < repeats; r++) {
        const double t0 = now_s();
        dtbench_check(dt_data_open(&dc, 8, &ds), "interop: dataset");
        const double t1 = now_s();
        if (t1 - t0 < t_cache) t_cache = t1 - t0;
        if (r == repeats - 1) {
            note = dt_data_note(ds);
            printf("# %s\n", note ? note : "(no note)");
        }
        dt_data_close(ds);
    }
    printf("# --tokenizer %s (%d tokens) on --data %s: %zu bytes -> %zu tokens; best of %d; vs_encode: seconds "
           "over the encoding's, same run\n",
           tok, vocab, data, n, n_ids, repeats);
    printf("# %-22s %10s %10s %12s %10s\n", "step", "seconds", "MB/s", "tokens/s", "vs_encode");
    printf("  %-22s %10.4f %10.1f %12.0f %10.2f\n", "BPE encode", t_enc, (double)n / 1e6 / t_enc,
           (double)n_ids / t_enc, 1.0);
    printf("  %-22s %10.4f %10.1f %12.0f %10.3f\n", "open from the cache", t_cache, (double)n / 1e6 / t_cache,
           (double)n_ids / t_cache, t_cache / t_enc);
    return 0;
}

int dtbench_cmd_interop(int argc, char **argv)
{
    const char *model = "gpt2-124m", *tok = NULL, *data = NULL;
    int threads = 1, repeats = 3, help = 0;
    dt_arg args[] = {
        {.name = "--model", .kind = DT_ARG_STRING, .dest = &model, .metavar = "NAME",
         .help = "the model exported and imported (a preset)", .default_text = "gpt2-124m"},
        {.name = "--threads", .kind = DT_ARG_INT, .dest = &threads, .range = DT_ARG_HAS_MIN | DT_ARG_HAS_MAX,
         .min = 1, .max = 1024, .metavar = "N", .help = "CPU threads"},
        {.name = "--repeats", .kind = DT_ARG_INT, .dest = &repeats, .range = DT_ARG_HAS_MIN | DT_ARG_HAS_MAX,
         .min = 1, .max = 100, .metavar = "N", .help = "each figure is the best of N"},
        {.name = "--tokenizer", .kind = DT_ARG_STRING, .dest = &tok, .metavar = "DIR",
         .help = "with --data: a BPE tokenizer's directory", .default_text = "none"},
        {.name = "--data", .kind = DT_ARG_STRING, .dest = &data, .metavar = "FILE",
         .help = "with --tokenizer: a text file to tokenize", .default_text = "none"},
        {.name = "--help", .kind = DT_ARG_FLAG, .dest = &help, .help = "print this help and exit"},
    };
    const int n_args = (int)(sizeof args / sizeof args[0]);
    if (dt_args_parse("dtbench interop", args, n_args, argc, argv) != DT_ARGS_OK) return 2;
    if (help) {
        dt_args_print_help(stdout, "dtbench interop [--model NAME] [--repeats N] [--tokenizer DIR --data FILE]", args,
                           n_args);
        return 0;
    }
    if (!tok != !data) {
        fprintf(stderr, "dtbench interop: --tokenizer and --data go together\n");
        return 2;
    }
    /* the text first: a bad --tokenizer or --data is refused before any figure */
    if (tok && bench_bpe(tok, data, repeats) != 0) return 1;
    return bench_model(model, threads, repeats);
}
