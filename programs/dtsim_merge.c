/* dtsim_merge.c: `dtsim merge`, the rank files of a multi-rank dtrain run
 * (run.rank0.json, run.rank1.json, ...) into one trace on one clock
 * (dt_trace_merge.h; docs/trace-format.md "Merged files"), for runs whose
 * merged file is missing (a run before minor version 1, a rank file copied
 * from another host, a run that ended early).
 *
 *   dtsim merge RUN.json                      RUN.rank<r>.json, r = 0, 1, ...
 *                                             while they exist (as many as
 *                                             rank 0's clock says) -> RUN.json
 *   dtsim merge --output OUT FILE [FILE...]   the given rank files -> OUT
 *
 * Exit status as the other subcommands': 2 for the inputs (a missing or
 * malformed file, files of different runs, two files of one rank), 1 when
 * the output cannot be written; one line on stderr naming the file. The
 * output is written whole or not at all. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dt_file.h"
#include "dtsim_prog.h"

enum { DTSIM_MERGE_MAX = 4096 };

static void dtsim_merge_usage(FILE *f)
{
    fputs("Usage: dtsim merge RUN.json\n"
          "       dtsim merge --output OUT FILE [FILE...]\n"
          "Merge the rank files of a multi-rank dtrain run (RUN.rank0.json, RUN.rank1.json, ...) into one\n"
          "trace with every rank on one clock and a flow from each pipeline send to its receive, as dtrain\n"
          "writes it at the end of the run (docs/trace-format.md, \"Merged files\"). Each rank file's\n"
          "otherData.clock aligns it; files without one (older runs) are aligned on the end of step 0.\n"
          "The first form finds RUN.rank<r>.json for r = 0, 1, ... and writes RUN.json.\n",
          f);
}

int dtsim_cmd_merge(int argc, char **argv)
{
    const char *out = NULL;
    const char **in = calloc(DTSIM_MERGE_MAX, sizeof *in);
    char(*found)[600] = NULL;
    int n = 0, rc = 0;
    if (!in) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            dtsim_merge_usage(stdout);
            goto done;
        } else if (!strcmp(a, "--output") || !strncmp(a, "--output=", 9)) {
            const char *v = a[8] == '=' ? a + 9 : i + 1 < argc ? argv[++i] : NULL;
            if (!v || !*v) {
                fprintf(stderr, PROG ": merge: --output: expected a file name\n");
                rc = 2;
                goto done;
            }
            out = v;
        } else if (!strncmp(a, "--", 2)) {
            fprintf(stderr, PROG ": merge: '%s': unknown flag (expected --output OUT and rank files)\n", a);
            rc = 2;
            goto done;
        } else if (n == DTSIM_MERGE_MAX) {
            fprintf(stderr, PROG ": merge: more than %d files\n", DTSIM_MERGE_MAX);
            rc = 2;
            goto done;
        } else {
            in[n++] = a;
        }
    }
    if (n == 0) {
        fprintf(stderr, PROG ": merge: expected RUN.json, or --output OUT and rank files (see dtsim merge --help)\n");
        rc = 2;
        goto done;
    }
    if (!out) { /* RUN.json: its rank files */
        const char *run = in[0];
        const size_t len = strlen(run);
        if (n > 1 || len <= 5 || strcmp(run + len - 5, ".json") != 0 || len > 500) {
            fprintf(stderr,
                    PROG ": merge: '%s': expected one RUN.json (its rank files RUN.rank<r>.json), or "
                         "--output OUT with the rank files\n",
                    n > 1 ? in[1] : run);
            rc = 2;
            goto done;
        }
        found = calloc(DTSIM_MERGE_MAX, sizeof *found);
        if (!found) {
            fprintf(stderr, PROG ": out of memory\n");
            rc = 1;
            goto done;
        }
        struct stat sb;
        n = 0;
        while (n < DTSIM_MERGE_MAX) {
            snprintf(found[n], sizeof found[n], "%.*s.rank%d.json", (int)(len - 5), run, n);
            if (stat(found[n], &sb) != 0) break;
            in[n] = found[n];
            n++;
        }
        if (n == 0) {
            fprintf(stderr,
                    PROG ": merge: %.*s.rank0.json: no such rank file (dtrain --trace %s under mpirun "
                         "writes them)\n",
                    (int)(len - 5), run, run);
            rc = 2;
            goto done;
        }
        /* rank 0's clock says how many ranks the run had: a rank file left by an earlier, larger run
         * under the same name is not one of them */
        dt_trace *h0 = NULL;
        if (dt_trace_read_header(in[0], &h0) == DT_OK && h0->clock.method[0]) {
            if (h0->clock.ranks > n) {
                fprintf(stderr, PROG ": merge: %s is rank 0 of %d ranks; only %d rank files found\n", in[0],
                        h0->clock.ranks, n);
                dt_trace_free(h0);
                rc = 2;
                goto done;
            }
            n = h0->clock.ranks;
        }
        dt_trace_free(h0);
        out = run;
    }
    for (int i = 0; i < n; i++) { /* the inputs first: their failures are exit 2, the output's 1 */
        dt_trace *h = NULL;
        if (!strcmp(in[i], out)) {
            fprintf(stderr, PROG ": merge: --output %s is also an input\n", out);
            rc = 2;
            goto done;
        }
        if (dt_file_check_not_input(out, "--output", in[i], "input") != DT_OK) { /* the same file by another name */
            fprintf(stderr, PROG ": merge: %s\n", dtsim_last_error());
            rc = 2;
            goto done;
        }
        if (dt_trace_read_header(in[i], &h) != DT_OK) {
            fprintf(stderr, PROG ": merge: %s\n", dtsim_last_error());
            rc = 2;
            goto done;
        }
        dt_trace_free(h);
    }
    dt_trace_merge_stats ms;
    const dt_status st = dt_trace_merge_files(out, in, n, &ms);
    if (st != DT_OK) {
        fprintf(stderr, PROG ": merge: %s\n", dtsim_last_error());
        rc = st == DT_ERR_INVALID || st == DT_ERR_FORMAT ? 2 : 1;
        goto done;
    }
    dt_trace *t = NULL;
    if (dt_trace_read_header(out, &t) == DT_OK) {
        char method[4 * sizeof t->merge.method];
        printf("merged %d rank files: %zu events, %zu of them flows; clock %s", ms.files, ms.events, ms.flows,
               dt_escape(t->merge.method, method, sizeof method));
        if (ms.max_error_ns >= 0) printf(", error at most %.3f us", ms.max_error_ns * 1e-3);
        printf("\ntrace: %s\n", out);
    }
    dt_trace_free(t);
done:
    free(in);
    free(found);
    return rc;
}
