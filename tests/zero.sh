#!/bin/sh
# zero.sh: runs the ZeRO-1 suite, tests/check_zero, under mpirun with 1, 2,
# 3 and 4 ranks (run by `make check` with DT_BUILDDIR and DT_SRCDIR), through
# the runner of tests/comm.sh.
#
# Each run has a hard time limit (DT_COMM_TIMEOUT seconds, default 120),
# since a rank that fails early leaves its peers waiting for messages that
# never come. A failed or timed-out run prints which N it was and every
# rank's output (lines tagged [job,rank]). A run passes when mpirun exits 0
# and rank 0 reports 0 failures over N ranks (check_zero also checks it
# really got N ranks, so processes that each started alone as singletons
# fail instead of passing N times). Passing runs print rank 0's measured
# optimizer state per rank and its largest weight difference from ring data
# parallelism with clipping (the figures docs/zero.md quotes).
#
# Without MPI in the build (asked of check_zero itself, not guessed from
# PATH), the suite runs once without mpirun on the self communicator (one
# rank), and the script then exits 77 (skipped). With MPI but no mpirun, it
# fails.
#
# POSIX sh.
DT_RANKS_SUITE=zero
export DT_RANKS_SUITE
exec sh "${DT_SRCDIR:-.}/tests/comm.sh"
