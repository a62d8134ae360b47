/* comm_mpi_none.c: the MPI entry points of a build without MPI (configure
 * found none). Only "self" exists then; dt_comm_mpi_world says so plainly,
 * and dt_comm_finalize has nothing to finalise. Everything else about
 * communicators lives in comm.c, shared with comm_mpi.c. */
#include "comm_internal.h"

dt_status dt_comm_mpi_world(dt_comm **out)
{
    if (out) *out = NULL;
    return DT_FAIL(DT_ERR_UNSUPPORTED, "this dtrain was built without MPI (configure found no MPI; install "
                                       "libopenmpi-dev and re-run ./configure)");
}

dt_status dt_comm_finalize(void) { return DT_OK; }

int dt_comm_have_mpi(void) { return 0; }
