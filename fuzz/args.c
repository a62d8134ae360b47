/* fuzz/args.c: libFuzzer harness for the command-line parser
 * (programs/args.c): the input is split at NUL bytes into argv[1..] (an
 * argument cannot hold a NUL, so this reaches every command line), parsed
 * against a table with every kind of flag (dtrain's shapes), then the
 * values that dtrain parses further (--slow-rank, --pipeline-split) go
 * through dt_args_parse_rank_ms and dt_args_parse_int_list as dtrain does,
 * and --help is printed. Parser errors go to stderr: run with
 * -close_fd_mask=2 (make fuzz does). Seeds: fuzz/corpus/args. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MIN1 (DT_ARG_HAS_MIN), 1, 0
#define MIN0 (DT_ARG_HAS_MIN), 0, 0
#define UNIT (DT_ARG_HAS_MIN | DT_ARG_HAS_MAX | DT_ARG_MAX_EXCLUSIVE), 0, 1
#define IN(lo, hi) (DT_ARG_HAS_MIN | DT_ARG_HAS_MAX), (lo), (hi)

static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    if (!devnull) devnull = fopen("/dev/null", "w");
    const char *model = "tiny", *data_file = NULL, *slow = NULL, *split = NULL, *trace = NULL;
    int layers = 2, heads = 4, mb = 128, help = 0, fp16 = 0, digits = 2;
    int64_t iters = 2500, log_iv = 100;
    uint64_t seed = 1234;
    float lr = 1e-3f, beta = 0.9f, bn = 0.1f;
    double clip = 1.0, sep = 4.0;
    dt_arg args[] = {
        {"Model", DT_ARG_SECTION, NULL, 0, 0, 0, NULL, NULL, NULL, NULL, 0},
        {"--model", DT_ARG_CHOICE, &model, 0, 0, 0, "tiny|small|gpt2-124m|mlp-bn", NULL, "model", NULL, 0},
        {"--num-layers", DT_ARG_INT, &layers, IN(1, 1024), NULL, "N", "blocks", NULL, 0},
        {"--num-attention-heads", DT_ARG_INT, &heads, MIN1, NULL, "N", "heads", NULL, 0},
        {"--task-digits", DT_ARG_INT, &digits, IN(1, 9), NULL, "N", "digits", NULL, 0},
        {"--data", DT_ARG_STRING, &data_file, 0, 0, 0, NULL, "FILE", "text file", NULL, 0},
        {"--micro-batch-size", DT_ARG_INT, &mb, MIN1, NULL, "N", "micro-batch", NULL, 0},
        {"--train-iters", DT_ARG_INT64, &iters, MIN0, NULL, "N", "steps", NULL, 0},
        {"--log-interval", DT_ARG_INT64, &log_iv, 0, 0, 0, NULL, "N", "log every", NULL, 0},
        {"--seed", DT_ARG_UINT64, &seed, 0, 0, 0, NULL, "N", "seed", NULL, 0},
        {"--lr", DT_ARG_FLOAT, &lr, DT_ARG_HAS_MIN | DT_ARG_MIN_EXCLUSIVE, 0, 0, NULL, "LR", "learning rate", NULL, 0},
        {"--adam-beta1", DT_ARG_FLOAT, &beta, UNIT, NULL, NULL, "beta1", NULL, 0},
        {"--bn-momentum", DT_ARG_FLOAT, &bn, IN(0, 1), NULL, "M", "momentum", NULL, 0},
        {"--clip-grad", DT_ARG_DOUBLE, &clip, MIN0, NULL, NULL, "clip", NULL, 0},
        {"--blobs-separation", DT_ARG_DOUBLE, &sep, DT_ARG_HAS_MAX | DT_ARG_MAX_EXCLUSIVE, 0, 100, NULL, NULL, "sep",
         NULL, 0},
        {"--fp16", DT_ARG_FLAG, &fp16, 0, 0, 0, NULL, NULL, "fp16", "fp32", 0},
        {"--slow-rank", DT_ARG_STRING, &slow, 0, 0, 0, NULL, "R:MS", "straggler", NULL, 0},
        {"--pipeline-split", DT_ARG_STRING, &split, 0, 0, 0, NULL, "LIST", "split", NULL, 0},
        {"--trace", DT_ARG_STRING, &trace, 0, 0, 0, NULL, "FILE", "trace", "none", 0},
        {"--help", DT_ARG_FLAG, &help, 0, 0, 0, NULL, NULL, "help", NULL, 0},
    };
    const int n_args = (int)(sizeof args / sizeof args[0]);

    /* argv: "dtrain" then the NUL-separated pieces (exact-size copies) */
    int argc = 1;
    for (size_t i = 0; i < size; i++) argc += data[i] == 0;
    argc += 1;
    char **argv = calloc((size_t)argc + 1, sizeof *argv);
    if (!argv) return 0;
    argv[0] = strdup("dtrain");
    int k = 1;
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i == size || data[i] == 0) {
            argv[k] = malloc(i - start + 1);
            memcpy(argv[k], data + start, i - start);
            argv[k][i - start] = '\0';
            k++;
            start = i + 1;
        }
    }
    argc = k;
    if (argc == 2 && argv[1][0] == '\0') argc = 1; /* the empty input: no arguments */

    if (dt_args_parse("dtrain", args, n_args, argc, argv) == DT_ARGS_OK) {
        int r, ms, count;
        int64_t list[64];
        if (slow) (void)dt_args_parse_rank_ms("dtrain", "--slow-rank", slow, &r, &ms);
        if (split) (void)dt_args_parse_int_list("dtrain", "--pipeline-split", split, IN(1, 100000), list, 64, &count);
        (void)dt_args_given(args, n_args, "--fp16");
        if (help && devnull) dt_args_print_help(devnull, "Usage: dtrain [flags]", args, n_args);
    }
    for (int i = 0; i < k; i++) free(argv[i]);
    free(argv);
    return 0;
}
