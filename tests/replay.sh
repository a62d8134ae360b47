#!/bin/sh
# replay.sh: a trace's header carries the whole scenario, so `dtsim run
# --config TRACE` reproduces the run it came from (issue 21). Run by `make
# check` with DT_BUILDDIR and DT_SRCDIR; skipped (77) without MPI.
#
# A real ps-async run, 2 workers and 1 server, worker 1 sleeping 30 ms
# before each exchange (--slow-rank 1:30), 40 steps (about 2 s). Then:
#   1. its rank-0 trace header holds slow_rank 1, slow_ms 30, the resolved
#      threads and the machine (host, online cores, DT_CLUSTER verbatim);
#   2. dtsim run --config on it names the straggler in its scenario lines,
#      and its staleness max exceeds the prediction with the straggler
#      taken away by an explicit flag (--slow-rank 1:0: flags override the
#      header). Before the header had slow_rank the two were equal (max 1
#      with the cpu-2core roofline: the straggler was lost);
#   3. what dtsim does not model is one warning line on stderr: here the
#      emulated cluster; with --hw it is not named.
TEST=replay.sh
. "${DT_SRCDIR:-.}/tests/mpi-lib.sh"
SRCDIR=${DT_SRCDIR:-.}
DTSIM=$BUILDDIR/dtsim
CLUSTER='2 nodes, 1 Gb/s links, 50 us'

if ! DT_CLUSTER=$CLUSTER timeout 120 $MPIRUN -np 3 "$DTRAIN" --allreduce ps-async --micro-batch-size 16 \
        --train-iters 40 --eval-iters 1 --eval-interval 0 --log-interval 40 --slow-rank 1:30 \
        --trace "$TMP/ps.json" >"$TMP/run.out" 2>&1; then
    tail -n 20 "$TMP/run.out" >&2
    fail "the ps-async run failed"
    exit 1
fi
T=$TMP/ps.rank0.json

# 1. the header
head -n 1 "$T" >"$TMP/header"
for want in '"slow_rank":1,' '"slow_ms":30,' '"hang_rank":-1,' '"threads":[0-9]' '"threads_requested":' \
    '"machine":{"host":' '"online_cores":[0-9]' "\"cluster\":\"$CLUSTER\""; do
    grep -q "$want" "$TMP/header" || fail "the trace header lacks $want: $(cat "$TMP/header")"
done

# 2. the straggler, from the header alone, against the same run without it
stale() { sed -n 's/^parameter server: .* max \([0-9]*\)$/\1/p' "$1"; }
"$DTSIM" run --config "$T" --hw "$SRCDIR/sim/hw/cpu-2core.json" >"$TMP/sim.out" 2>"$TMP/sim.err" ||
    fail "dtsim run --config $T: $(cat "$TMP/sim.err")"
"$DTSIM" run --config "$T" --hw "$SRCDIR/sim/hw/cpu-2core.json" --slow-rank 1:0 >"$TMP/none.out" 2>&1 ||
    fail "dtsim run --config $T --slow-rank 1:0: $(cat "$TMP/none.out")"
grep -q '^straggler: rank 1 sleeps 30 ms before each exchange' "$TMP/sim.out" ||
    fail "dtsim does not name the header's straggler: $(cat "$TMP/sim.out")"
! grep -q '^straggler:' "$TMP/none.out" || fail "--slow-rank 1:0 did not override the header's straggler"
with=$(stale "$TMP/sim.out") without=$(stale "$TMP/none.out")
echo "staleness max: $with from the header, $without with --slow-rank 1:0"
if [ -z "$with" ] || [ -z "$without" ] || [ "$with" -le "$without" ]; then
    fail "staleness max from the header '$with' is not above the prediction without the straggler '$without'"
fi
[ -s "$TMP/sim.err" ] && fail "with --hw, dtsim warned: $(cat "$TMP/sim.err")"

# 3. one warning line naming the emulated cluster
"$DTSIM" run --config "$T" >"$TMP/warn.out" 2>"$TMP/warn.err" || fail "dtsim run --config $T failed"
n=$(wc -l <"$TMP/warn.err")
[ "$n" = 1 ] && grep -q "^dtsim: warning: .*ps.rank0.json records what dtsim does not model.*emulated cluster \"$CLUSTER\"" \
    "$TMP/warn.err" || fail "expected one warning line naming the cluster, got $n: $(cat "$TMP/warn.err")"

[ "$failures" = 0 ] || exit 1
echo "replay.sh: ok"
