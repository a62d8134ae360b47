#!/bin/sh
# comm.sh: runs the communicator suite, tests/check_comm (or check_$DT_RANKS_SUITE:
# zero.sh reuses it), under mpirun with
# 1, 2, 3 and 4 ranks (run by `make check` with DT_BUILDDIR and DT_SRCDIR).
#
# Each run has a hard time limit (DT_COMM_TIMEOUT seconds, default 120),
# since a rank that fails early leaves its peers waiting for messages that
# never come. A failed or timed-out run
# prints which N it was and every rank's output (lines tagged [job,rank]).
# A run passes when mpirun exits 0 and rank 0 reports 0 failures over N
# ranks (check_comm also checks it really got N ranks, so processes that
# each started alone as singletons fail instead of passing N times).
#
# Without MPI in the build (asked of check_comm itself, not guessed from
# PATH), the suite runs once without mpirun, testing the self backend, and
# the script then exits 77 (skipped). With MPI but no mpirun, it fails.
#
# Open MPI settings for CI containers: tests/mpi-env.sh.
# POSIX sh.

set -u
LC_ALL=C
export LC_ALL

BUILDDIR=${DT_BUILDDIR:-.}
# The suite: check_comm, or check_$DT_RANKS_SUITE for scripts that reuse
# this runner (zero.sh: check_zero).
NAME=${DT_RANKS_SUITE:-comm}
CHECK=$BUILDDIR/tests/check_$NAME
LIMIT=${DT_COMM_TIMEOUT:-120}
MPIRUN=${MPIRUN:-mpirun}

if [ ! -x "$CHECK" ]; then
    echo "$NAME.sh: $CHECK not found or not executable (set DT_BUILDDIR)" >&2
    exit 99
fi
if ! command -v timeout >/dev/null 2>&1; then
    echo "$NAME.sh: 'timeout' (coreutils) not found; it bounds each run" >&2
    exit 99
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-$NAME.XXXXXX") || exit 99
trap 'rm -rf "$TMP"' EXIT HUP INT TERM

# show FILE: the output of a run, indented
show() {
    sed 's/^/    | /' "$1" >&2
}

have=$("$CHECK" --have-mpi 2>"$TMP/err")
if [ $? -ne 0 ]; then
    echo "$NAME.sh: $CHECK --have-mpi failed:" >&2
    show "$TMP/err"
    exit 99
fi

if [ "$have" = no ]; then
    timeout -k 5 "$LIMIT" "$CHECK" >"$TMP/out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: check_$NAME without MPI (self backend): exit $rc$([ "$rc" -eq 124 ] && echo ", timed out after ${LIMIT}s")" >&2
        show "$TMP/out"
        exit 1
    fi
    cat "$TMP/out"
    echo "$NAME.sh: self backend passed; MPI runs skipped: this dtrain was built without MPI"
    exit 77
fi
if [ "$have" != yes ]; then
    echo "$NAME.sh: $CHECK --have-mpi printed '$have', expected yes or no" >&2
    exit 99
fi

if ! command -v "$MPIRUN" >/dev/null 2>&1; then
    echo "FAIL: this dtrain was built with MPI but '$MPIRUN' was not found (install openmpi-bin, or set MPIRUN)" >&2
    exit 1
fi

. "${DT_SRCDIR:-.}/tests/mpi-env.sh"

failures=0
for n in 1 2 3 4; do
    start=$(date +%s)
    DT_COMM_EXPECT_SIZE=$n
    export DT_COMM_EXPECT_SIZE
    timeout -k 10 "$LIMIT" "$MPIRUN" --oversubscribe --allow-run-as-root --tag-output -x DT_COMM_EXPECT_SIZE \
        -np "$n" "$CHECK" >"$TMP/out.$n" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "FAIL: check_$NAME with $n rank(s): timed out after ${LIMIT}s (a rank is waiting for a message or" \
            "barrier that never comes, usually after another rank's failure); output so far:" >&2
        show "$TMP/out.$n"
        failures=$((failures + 1))
    elif [ "$rc" -ne 0 ]; then
        echo "FAIL: check_$NAME with $n rank(s): mpirun exit $rc after ${secs}s; output:" >&2
        show "$TMP/out.$n"
        failures=$((failures + 1))
    elif ! grep -q "check_$NAME: mpi communicator, $n rank(s): 0 failure(s) over all ranks" "$TMP/out.$n"; then
        echo "FAIL: check_$NAME with $n rank(s): exit 0 but no summary of 0 failures over $n ranks; output:" >&2
        show "$TMP/out.$n"
        failures=$((failures + 1))
    else
        echo "$NAME.sh: check_$NAME with $n rank(s): ok (${secs}s)"
        # what rank 0 measured (figures the docs quote), besides its summary
        grep "^\[[0-9]*,0\]<stdout>: *check_$NAME: " "$TMP/out.$n" | grep -v "failure(s) over all ranks" |
            sed 's/^\[[^]]*\]<stdout>: *//'
    fi
done

if [ "$failures" -ne 0 ]; then
    echo "$NAME.sh: $failures of 4 runs failed" >&2
    exit 1
fi
exit 0
