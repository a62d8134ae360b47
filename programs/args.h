/* args.h: the small flag parser shared by dtrain and dtbench.
 *
 * A program describes its flags in a table of dt_arg (name, kind, where the
 * value goes, range, help) whose destinations already hold the defaults, then
 * calls dt_args_parse. Flags are long options only, given as `--flag value`
 * or `--flag=value`; a flag may repeat (the last one wins).
 *
 * Invariants: on a bad flag or value the parser prints exactly one line to
 * stderr, `PROG: --flag 'value': expected ...`, and returns DT_ARGS_ERROR;
 * the program then exits with status 2 (these helpers never exit
 * themselves). Help text prints each flag's default from its destination,
 * so the defaults are stated once, where the program sets them. */
#ifndef DT_ARGS_H
#define DT_ARGS_H

#include <stdint.h>
#include <stdio.h>

typedef enum dt_arg_kind {
    DT_ARG_SECTION = 0, /* not a flag: a heading in --help (name = heading) */
    DT_ARG_FLAG,        /* no value; sets *(int *)dest = 1 (--help, --version) */
    DT_ARG_INT,         /* int */
    DT_ARG_INT64,       /* int64_t */
    DT_ARG_UINT64,      /* uint64_t (seeds) */
    DT_ARG_FLOAT,       /* float */
    DT_ARG_DOUBLE,      /* double */
    DT_ARG_STRING,      /* const char * pointing into argv; never empty */
    DT_ARG_CHOICE       /* const char *, one of choices ("a|b|c") */
} dt_arg_kind;

/* Range options for numeric kinds (min and max are otherwise inclusive). */
enum {
    DT_ARG_HAS_MIN = 1 << 0,
    DT_ARG_HAS_MAX = 1 << 1,
    DT_ARG_MIN_EXCLUSIVE = 1 << 2, /* value > min */
    DT_ARG_MAX_EXCLUSIVE = 1 << 3  /* value < max */
};

typedef struct dt_arg {
    const char *name; /* "--micro-batch-size" (or a heading for DT_ARG_SECTION) */
    dt_arg_kind kind;
    void *dest;     /* holds the default before parsing */
    unsigned range; /* DT_ARG_HAS_MIN | ... */
    double min, max;
    const char *choices;      /* DT_ARG_CHOICE: "tiny|small|gpt2-124m" */
    const char *metavar;      /* shown in --help after the flag ("N", "FILE"); NULL: from kind */
    const char *help;         /* one line */
    const char *default_text; /* shown instead of the destination's value; NULL: the value */
    int given;                /* set by dt_args_parse: how many times the flag appeared */
} dt_arg;

enum { DT_ARGS_OK = 0, DT_ARGS_ERROR = -1 };

/* Parse argv[1..argc-1] into the table. Returns DT_ARGS_OK or, after
 * printing one line to stderr, DT_ARGS_ERROR (unknown flag, missing or bad
 * value, positional argument). */
int dt_args_parse(const char *prog, dt_arg *args, int n_args, int argc, char **argv);

/* The entry for a flag name, or NULL. */
dt_arg *dt_args_find(dt_arg *args, int n_args, const char *name);
/* Non-zero when the flag appeared on the command line. */
int dt_args_given(dt_arg *args, int n_args, const char *name);

/* Print "Usage: ..." then each section and flag with its default. */
void dt_args_print_help(FILE *f, const char *usage, const dt_arg *args, int n_args);

/* Single-value parsers for values the table cannot describe; on failure
 * they print `PROG: FLAG 'TEXT': expected ...` and return DT_ARGS_ERROR. */
int dt_args_parse_int64(const char *prog, const char *flag, const char *text, unsigned range, double min, double max,
                        int64_t *out);
int dt_args_parse_double(const char *prog, const char *flag, const char *text, unsigned range, double min, double max,
                         double *out);
/* "RANK:MS" (--slow-rank 1:20): a rank 0..1000000 and a delay of
 * 0..3600000 ms, both whole numbers. */
int dt_args_parse_rank_ms(const char *prog, const char *flag, const char *text, int *rank, int *ms);
/* "RANK:VALUE" in general: a rank 0..1000000 and a whole number VALUE in
 * min..max; unit names VALUE in the message ("MS", "ITER"), example is a
 * valid instance ("1:20"). */
int dt_args_parse_rank_value(const char *prog, const char *flag, const char *text, const char *unit,
                             const char *example, long min, long max, int *rank, int *value);
/* A comma-separated list of integers ("1,2,4,8"), each checked against the
 * range; at most max_count values. */
int dt_args_parse_int_list(const char *prog, const char *flag, const char *text, unsigned range, double min, double max,
                           int64_t *out, int max_count, int *count);

/* Leave a program that failed, after its one line: stdio flushed, then
 * _exit(status), not exit(), whose handlers include OpenBLAS's destructor,
 * which waits for its threads; one that could not map its work buffer
 * retries for ever, so an out-of-memory run never ended (issue 34, D3).
 * Under LeakSanitizer the leak check exit() would run runs first. */
void dt_args_exit_failed(int status) __attribute__((noreturn));

#endif
