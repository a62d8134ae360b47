#!/bin/sh
# tp.sh: tensor parallelism of a block (tests/check_tp) under mpirun with
# t = 1, 2 and 4 ranks; each run's output is shown when it fails.
TEST=tp.sh
. "${DT_SRCDIR:-.}/tests/mpi-lib.sh"
for t in 1 2 4; do
    if timeout 120 $MPIRUN -np $t "$BUILDDIR/tests/check_tp" >"$TMP/tp$t.out" 2>&1 &&
       grep -q "t = $t: 0 failure" "$TMP/tp$t.out"; then
        echo "ok: t = $t"
    else
        fail "t = $t:"; cat "$TMP/tp$t.out" >&2
    fi
done
[ "$failures" -eq 0 ] || exit 1
echo "tp.sh: tensor-parallel blocks equal the serial block for t = 1, 2, 4"
