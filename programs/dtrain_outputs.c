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
 * between hosts), so a problem every rank sees is one line per job. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "dtrain_prog.h"

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
