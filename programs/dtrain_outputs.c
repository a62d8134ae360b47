/* dtrain_outputs.c: dtrain's outputs checked before any work, so a bad
 * path fails at the start rather than after the last step: --summary's
 * directory exists and is writable and the path is not a directory;
 * --save is a directory or can be made one (mkdir -p); and rank 0, which
 * commits checkpoints, holds the save directory's lock for the job's life
 * (dt_checkpoint_lock_take), so the remains of a killed job and a restarted
 * one never save into the same directory together.
 *
 * Every rank checks; the ranks agree on the outcome (one allreduce), so all
 * of them stop together; rank 0 prints its message, and another rank
 * prints its own only when rank 0 found nothing wrong (a path that differs
 * between hosts), so a problem every rank sees is one line per job.
 *
 * Before that, on the command line (exit 2): no output may be one of the
 * run's inputs (dtrain_check_not_inputs). Outputs are --trace, under a
 * launcher its rank files (run.json -> run.rank<r>.json, as trace_hooks.c
 * names them), --summary, and the names a save writes in --save (latest,
 * dtrain.lock, iter_*); inputs are --data and the files of --load's
 * directory (DIR/latest, DIR/iter_X/manifest.json, the shards: two levels
 * down). Two paths are the same file when they have the same device and
 * inode (dt_file_check_not_input), so a hard link or a symbolic link to an
 * input is refused as the input itself. --save equal to --load is resuming,
 * not an overwrite: a save never changes the checkpoint it loaded. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dtrain_prog.h"

/* The most ranks whose trace files are checked, and the most entries of
 * --load's directory looked at: bounds, not limits of a real job. */
enum { DTRAIN_MAX_RANK_FILES = 4096, DTRAIN_MAX_LOAD_ENTRIES = 1000000 };

/* One output that exists: its name for messages and its file. */
typedef struct dtrain_out_file {
    const char *path, *what;
    char *own; /* path, when malloc'd here */
    struct stat sb;
} dtrain_out_file;

/* Appends path to outs if it names an existing regular file (a new file
 * cannot be an existing input; /dev/null as both overwrites nothing). */
static void dtrain_out_add(dtrain_out_file *outs, int *n, const char *path, const char *what, char *own)
{
    struct stat sb;
    if (!path || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        free(own);
        return;
    }
    outs[*n] = (dtrain_out_file){.path = path, .what = what, .own = own, .sb = sb};
    (*n)++;
}

/* Ranks of the job the launcher started (1 without one). */
static int dtrain_launched_ranks(void)
{
    const char *s = getenv("OMPI_COMM_WORLD_SIZE");
    if (!s) s = getenv("PMI_SIZE");
    const long n = s ? strtol(s, NULL, 10) : 1;
    return n < 1 ? 1 : n > DTRAIN_MAX_RANK_FILES ? DTRAIN_MAX_RANK_FILES : (int)n;
}

/* dt_file_check_not_input's refusal if path (an input) is one of outs. */
static dt_status dtrain_outs_vs(const dtrain_out_file *outs, int n, const char *path, const char *what)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return DT_OK;
    for (int i = 0; i < n; i++)
        if (outs[i].sb.st_dev == sb.st_dev && outs[i].sb.st_ino == sb.st_ino)
            DT_CHECK(dt_file_check_not_input(outs[i].path, outs[i].what, path, what));
    return DT_OK;
}

/* Every file of dir and of its subdirectories (depth levels) against outs. */
static dt_status dtrain_outs_vs_dir(const dtrain_out_file *outs, int n, const char *dir, int depth, long *seen)
{
    DIR *d = opendir(dir);
    if (!d) return DT_OK; /* the loader says what is wrong with it */
    dt_status st = DT_OK;
    struct dirent *e;
    while (st == DT_OK && (e = readdir(d)) && ++*seen < DTRAIN_MAX_LOAD_ENTRIES) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        const size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *p = malloc(len);
        if (!p) {
            st = DT_FAIL(DT_ERR_NOMEM, "--load %s: out of memory", dir);
            break;
        }
        snprintf(p, len, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            if (depth > 1) st = dtrain_outs_vs_dir(outs, n, p, depth - 1, seen);
        } else {
            st = dtrain_outs_vs(outs, n, p, "--load");
        }
        free(p);
    }
    closedir(d);
    return st;
}

/* --data is not a name a save in --save replaces: DIR/latest,
 * DIR/dtrain.lock, anything in DIR/iter_* (links followed). */
static dt_status dtrain_data_vs_save(const char *data, const char *save)
{
    struct stat ss, sd;
    if (!data || !save || stat(save, &ss) != 0 || !S_ISDIR(ss.st_mode)) return DT_OK;
    char *real = realpath(data, NULL);
    if (!real) return DT_OK; /* missing: the loader says so */
    dt_status st = DT_OK;
    /* up to two levels: DIR/NAME and DIR/iter_X/NAME */
    for (int level = 0; level < 2 && st == DT_OK; level++) {
        char *slash = strrchr(real, '/');
        if (!slash || slash == real) break;
        const char *name = slash + 1;
        *slash = '\0';
        if (stat(real, &sd) != 0 || sd.st_dev != ss.st_dev || sd.st_ino != ss.st_ino) continue;
        const int written = level == 0 ? !strcmp(name, "latest") || !strcmp(name, "dtrain.lock") ||
                                             !strncmp(name, "iter_", 5) || !strncmp(name, ".latest", 7)
                                       : !strncmp(name, "iter_", 5);
        if (written)
            st = DT_FAIL(DT_ERR_INVALID,
                         "--data %s: is in --save %s's checkpoints, which a save replaces; an output may not "
                         "overwrite an input",
                         data, save);
    }
    free(real);
    return st;
}

/* Every output against every input. */
static dt_status dtrain_not_inputs(const dtrain_opts *o)
{
    const int ranks = dt_comm_launched() ? dtrain_launched_ranks() : 1;
    dtrain_out_file *outs = calloc((size_t)ranks + 2, sizeof *outs);
    if (!outs) return DT_FAIL(DT_ERR_NOMEM, "out of memory checking the outputs");
    int n = 0;
    const char *trace = o->job.trace;
    dtrain_out_add(outs, &n, trace, "--trace", NULL);
    dtrain_out_add(outs, &n, o->job.summary, "--summary", NULL);
    for (int r = 0; trace && ranks > 1 && r < ranks; r++) { /* run.json -> run.rank<r>.json */
        const size_t len = strlen(trace);
        const int dot = len > 5 && !strcmp(trace + len - 5, ".json") ? (int)len - 5 : (int)len;
        const size_t cap = len + 32;
        char *p = malloc(cap);
        if (p) snprintf(p, cap, "%.*s.rank%d%s", dot, trace, r, trace + dot);
        if (p) dtrain_out_add(outs, &n, p, "--trace", p);
    }
    dt_status st = DT_OK;
    if (o->data) st = dtrain_outs_vs(outs, n, o->data, "--data");
    long seen = 0;
    if (st == DT_OK && o->load) st = dtrain_outs_vs_dir(outs, n, o->load, 2, &seen);
    if (st == DT_OK) st = dtrain_data_vs_save(o->data, o->save);
    for (int i = 0; i < n; i++) free(outs[i].own);
    free(outs);
    return st;
}

int dtrain_check_not_inputs(const dtrain_opts *o)
{
    if (dtrain_not_inputs(o) == DT_OK) return 0;
    fprintf(stderr, PROG ": %s\n", dt_last_error());
    return 2;
}

/* Every rank learns whether any rank failed (the return value) and
 * whether rank 0 did (*rank0_failed). */
static int dtrain_outputs_agree(dt_comm *comm, int failed, int *rank0_failed)
{
    *rank0_failed = failed;
    if (!comm || comm->size < 2) return failed;
    float *f = calloc((size_t)comm->size, sizeof *f);
    if (!f) return 1;
    f[comm->rank] = failed ? 1.0f : 0.0f;
    int any = dt_comm_allreduce(comm, f, (size_t)comm->size, DT_ALLREDUCE_RING, NULL) != DT_OK;
    for (int r = 0; r < comm->size; r++) any |= f[r] != 0.0f;
    *rank0_failed = f[0] != 0.0f;
    free(f);
    return any;
}

int dtrain_prepare_outputs(const dtrain_opts *o, dt_comm *comm, int *lock_fd)
{
    *lock_fd = -1;
    const int rank = comm ? comm->rank : 0;
    dt_status st = DT_OK;
    if (o->save) st = dt_file_check_output_dir(o->save, "--save", 1);
    /* the lock makes DIR (mkdir -p), which may be where --summary goes */
    if (st == DT_OK && o->save && rank == 0) st = dt_checkpoint_lock_take(o->save, lock_fd);
    if (st == DT_OK && o->job.summary && rank == 0) st = dt_file_check_output(o->job.summary, "--summary");
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", st != DT_OK ? dt_last_error() : "");
    int rank0_failed = 0;
    if (!dtrain_outputs_agree(comm, st != DT_OK, &rank0_failed)) return 0;
    if (st != DT_OK && (rank == 0 || !rank0_failed)) fprintf(stderr, PROG ": %s\n", msg);
    dt_checkpoint_lock_release(*lock_fd);
    *lock_fd = -1;
    return 1;
}
