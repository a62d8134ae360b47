/* dtrain_mpi.c: dtrain under a launcher (mpirun): whether it is one, the
 * Open MPI settings a pipeline needs before MPI_Init, one rank reporting a
 * bad command line, and ending a multi-rank job after a failure. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "dtrain_prog.h"

/* Open MPI's shared memory sends a message above its eager limit (4 KiB)
 * only when the sender calls MPI again, i.e. after its next compute: the
 * stages would run one after the other. Raise the limit above an
 * activation and give the segment room for several in flight, unless the
 * user set them (read by MPI_Init). */
void dtrain_mpi_pipeline_env(const dt_train_config *cfg)
{
    char eager[32];
    const long long act = (long long)cfg->micro_batch_size * cfg->seq_length * cfg->model.hidden_size * 4;
    snprintf(eager, sizeof eager, "%lld", act + 4096);
    setenv("OMPI_MCA_btl_vader_eager_limit", eager, 0);
    setenv("OMPI_MCA_btl_vader_segment_size", "33554432", 0);
}

/* Exit status of a multi-rank job ended by dtrain_abort_job (mpirun passes
 * it on): a rank failed, or timed out waiting for a dead or hung one. */
#define DTRAIN_EXIT_ABORT 3

/* After a failure once the ranks work together, other ranks may be waiting
 * for this one (or this one timed out waiting for a dead or hung rank):
 * with more than one rank, end the whole job now (MPI_Abort through
 * dt_comm_abort) rather than wait in MPI_Finalize. The message is printed
 * first. Returns only for a single process. */
void dtrain_abort_job(dt_comm *comm)
{
    if (!comm || comm->size < 2) return;
    fflush(stdout);
    fflush(stderr);
    dt_comm_abort(comm, DTRAIN_EXIT_ABORT);
}

void dtrain_comm_end(dt_comm *comm)
{
    if (!comm) return;
    dt_comm_free(comm);
    if (dt_comm_finalize() != DT_OK) fprintf(stderr, PROG ": %s\n", dt_last_error());
}

/* Under mpirun every rank parses the same command line before MPI starts:
 * only rank 0 (by the launcher's environment) reports what is wrong with it,
 * so a bad flag is one line rather than one per rank. Returns the saved
 * stderr to give back to dtrain_restore_stderr, or -1 (nothing silenced). */
int dtrain_quiet_other_ranks(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    if (!r) r = getenv("PMIX_RANK");
    if (!r || atoi(r) == 0) return -1;
    fflush(stderr);
    int saved = dup(STDERR_FILENO), nul = open("/dev/null", O_WRONLY);
    if (saved >= 0 && nul >= 0 && dup2(nul, STDERR_FILENO) >= 0) {
        close(nul);
        return saved;
    }
    if (saved >= 0) close(saved);
    if (nul >= 0) close(nul);
    return -1;
}

/* A bad command line, seen before MPI starts: rank 0 prints it and exits,
 * and mpirun then ends the job. A silenced rank that exited first would end
 * it before rank 0's line got through (Open MPI kills the rest of the job at
 * the first non-zero exit, and their output with it): so a silenced rank
 * lingers until mpirun ends it, for a bounded time in case rank 0 somehow
 * saw no error. Returns status for rank 0 or a plain process. */
int dtrain_bad_command_line(int saved, int status)
{
    if (saved < 0) return status;
    struct timespec t = {10, 0}; /* at most; a signal ends it early */
    nanosleep(&t, NULL);
    return status;
}

void dtrain_restore_stderr(int saved)
{
    if (saved < 0) return;
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
}
