#!/bin/sh
# grid.sh: the process grid's communicators under mpirun with 1, 2, 3 and 4
# ranks (run by `make check` with DT_BUILDDIR and DT_SRCDIR): tests/check_grid
# through the runner of tests/comm.sh, which splits every layout t x d x p
# of the world into each kind of group (tensor, context, data, pipeline,
# ZeRO, tied embedding) and checks each rank's communicator against the
# grid's arithmetic. Without MPI in the build the suite runs once alone and
# the script exits 77 (skipped), as comm.sh does.
#
# POSIX sh.
DT_RANKS_SUITE=grid
export DT_RANKS_SUITE
exec sh "${DT_SRCDIR:-.}/tests/comm.sh"
