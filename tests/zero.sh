#!/bin/sh
# zero.sh: runs the ZeRO suites under mpirun with 1, 2, 3 and 4 ranks (run
# by `make check` with DT_BUILDDIR and DT_SRCDIR), each through the runner
# of tests/comm.sh:
#   tests/check_zero         ZeRO-1, the sharded optimizer
#   tests/check_zero_stages  ZeRO-2 and 3: bytes against the formulas, the
#                            weights against data parallelism, checkpoints
#
# Each run has a hard time limit (DT_COMM_TIMEOUT seconds, default 120),
# since a rank that fails early leaves its peers waiting for messages that
# never come. A failed or timed-out run prints which N it was and every
# rank's output (lines tagged [job,rank]). A run passes when mpirun exits 0
# and rank 0 reports 0 failures over N ranks (the suites also check they
# really got N ranks, so processes that each started alone as singletons
# fail instead of passing N times). Passing runs print rank 0's measured
# figures: optimizer state per rank and the largest weight difference from
# ring data parallelism with clipping (ZeRO-1), and each stage's bytes,
# their ratio to the paper's formula and its weights against data
# parallelism (ZeRO-2/3; the figures docs/zero.md quotes).
#
# Without MPI in the build (asked of the suite itself, not guessed from
# PATH), each suite runs once without mpirun on the self communicator (one
# rank), and the script then exits 77 (skipped). With MPI but no mpirun, it
# fails.
#
# POSIX sh.
rc=0
for suite in zero zero_stages; do
    DT_RANKS_SUITE=$suite
    export DT_RANKS_SUITE
    sh "${DT_SRCDIR:-.}/tests/comm.sh"
    r=$?
    if [ "$r" -eq 77 ] && [ "$rc" -eq 0 ]; then rc=77
    elif [ "$r" -ne 0 ] && [ "$r" -ne 77 ]; then rc=$r
    fi
done
exit $rc
