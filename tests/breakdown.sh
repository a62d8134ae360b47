#!/bin/sh
# breakdown.sh: `dtsim analyze` (docs/breakdown.md) on real runs and on
# their simulations (run by `make check`; skipped without MPI). 2 ranks on
# 2 cores, a 4-block model of width 64: 1.3-3 s.
#
# Runs, 4 steps each, --skip 1:
#   dp    2-rank data parallelism with 0.05 MB gradient buckets (6 buckets
#         a step, allreduced while the backward goes on), m = 4 per rank;
#   1f1b  2-rank pipeline, m = 4 (bubble.sh's eager limit, so a stage
#         receives while the other computes);
# and each one's simulation, `dtsim run --config RUN.rank0.json --profile
# PROF --trace SIM`: the run's own configuration, the costs of a
# single-rank run of the model (3 steps). The test checks each breakdown
# against its own step, not the simulation against the run: on a shared
# 2-core machine the real times move with the load (2026-12-03, loaded:
# dp step 27-64 ms real, 41 simulated; 1f1b 36-58 ms real, 26 simulated,
# the real stages also idle 3-6 ms between steps, outside any span).
#
# Checked, on every rank of every run (from --csv, microseconds):
#   - compute + optimizer + comm exposed + waiting + idle = the step within
#     0.001 ms (the library's sum is exact in ns; the CSV rounds each of
#     the six to 1e-6 ms) and the text table's five percentages sum to 100
#     within 0.3 (each rounded to 0.1);
#   - dp: comm overlapped > 0 (real: summed over the ranks; a run where the
#     communication thread got no core before the backward ended is
#     repeated, up to ATTEMPTS; simulated: on every rank); no waiting;
#   - 1f1b: waiting > 0 on both stages, real and simulated; the bubble
#     column equals `dtbench bubbles`' for each real rank file (4 decimals),
#     and waiting <= the bubble's idle time per step (the bubble's idle is
#     waiting plus the stage's comm and grad norm in its window);
# and the real and simulated tables are printed side by side (--compare).
# Bad input: a missing trace and --compare with one run exit 2, one line.

TEST=breakdown.sh
. "${DT_SRCDIR:-.}/tests/mpi-lib.sh"

DTSIM=$BUILDDIR/dtsim
DTBENCH=$BUILDDIR/dtbench
[ -x "$DTSIM" ] && [ -x "$DTBENCH" ] || { echo "$TEST: dtsim or dtbench not found in $BUILDDIR" >&2; exit 99; }
: "${OMPI_MCA_btl_vader_eager_limit:=135168}"
: "${OMPI_MCA_btl_vader_segment_size:=33554432}"
export OMPI_MCA_btl_vader_eager_limit OMPI_MCA_btl_vader_segment_size

ATTEMPTS=3
MODEL="--num-layers 4 --hidden-size 64 --seq-length 32 --micro-batch-size 4 --threads 1 --train-iters 4 \
--lr-warmup-iters 1 --eval-iters 1 --eval-interval 0 --log-interval 100"

# run NAME ARGS...: a traced 2-rank run, its simulation and both analyses
run() {
    name=$1; shift
    rm -f "$TMP/$name".rank*.json
    if ! timeout 120 $MPIRUN -np 2 "$DTRAIN" $MODEL "$@" --trace "$TMP/$name.json" >"$TMP/$name.out" 2>&1; then
        fail "$name: dtrain exited non-zero:"; tail -n 20 "$TMP/$name.out" >&2; return 1
    fi
    if ! "$DTSIM" run --config "$TMP/$name.rank0.json" --profile "$TMP/prof.json" --trace "$TMP/$name.sim.json" \
            >"$TMP/$name.simout" 2>&1; then
        fail "$name: dtsim run --config:"; cat "$TMP/$name.simout" >&2; return 1
    fi
    for kind in real sim; do
        f="$TMP/$name.json"; [ $kind = sim ] && f="$TMP/$name.sim.json"
        if ! "$DTSIM" analyze --skip 1 --csv "$f" >"$TMP/$name.$kind.csv" 2>"$TMP/err" ||
                ! "$DTSIM" analyze --skip 1 "$f" >"$TMP/$name.$kind.txt" 2>>"$TMP/err"; then
            fail "$name: dtsim analyze $kind:"; cat "$TMP/err" >&2; return 1
        fi
    done
}

# sums NAME KIND: one line per rank whose categories miss the step
sums() {
    awk -F, 'NR > 1 { s = $9 + $10 + $11 + $12 + $13; d = s - $8; if (d < 0) d = -d
        if (d > 0.001) printf "rank %s: categories sum to %.6f ms, step %.6f ms\n", $4, s, $8 }' "$TMP/$1.$2.csv"
    # the text rows: five "N.N%" after the first "|", up to the second
    awk '/^[A-Z] +[0-9]+ / { split($0, p, "|"); n = split(p[2], w, " "); t = 0; k = 0
        for (i = 1; i <= n; i++) if (w[i] ~ /%$/) { t += substr(w[i], 1, length(w[i]) - 1); k++ }
        if (k != 5 || t < 99.7 || t > 100.3) printf "rank %s: %d percentages summing to %.1f\n", $2, k, t }' \
        "$TMP/$1.$2.txt"
}
# col NAME KIND RANK FIELD: a CSV field of a rank's row
col() { awk -F, -v r="$3" -v f="$4" 'NR > 1 && $4 == r { print $f }' "$TMP/$1.$2.csv"; }
check_sums() {
    bad=$(sums "$1" "$2")
    if [ -n "$bad" ]; then
        echo "$bad" | while read -r line; do fail "$1 $2: $line"; done
    else
        echo "ok: $1 $2: every rank's categories sum to its step ($(col "$1" "$2" 0 8) ms on rank 0)"
    fi
}

# the simulator's costs: one process, one micro-batch a step
if ! timeout 120 "$DTRAIN" $MODEL --train-iters 3 --trace "$TMP/prof.json" >"$TMP/prof.out" 2>&1; then
    echo "FAIL: the single-rank profile run:" >&2; tail -n 20 "$TMP/prof.out" >&2; exit 1
fi

# ---- data parallelism with bucketed overlap ----------------------------------
attempt=0
while [ $attempt -lt $ATTEMPTS ]; do
    attempt=$((attempt + 1))
    run dp --global-batch-size 32 --bucket-size-mb 0.05 || break
    ov=$(awk -F, 'NR > 1 { s += $14 } END { printf "%.6f", s }' "$TMP/dp.real.csv")
    awk -v v="$ov" 'BEGIN { exit !(v > 0) }' && break
    echo "dp: attempt $attempt: no communication overlapped the backward (the comm thread got no core), repeating"
done
if [ -f "$TMP/dp.sim.csv" ]; then
    check_sums dp real
    check_sums dp sim
    awk -v v="$ov" 'BEGIN { exit !(v > 0) }' && echo "ok: dp real: comm overlapped $ov ms per step (ranks summed)" ||
        fail "dp real: no communication overlapped compute in $ATTEMPTS runs"
    for r in 0 1; do
        o=$(col dp sim $r 14) w=$(col dp real $r 12)
        awk -v v="$o" 'BEGIN { exit !(v > 0) }' || fail "dp sim: rank $r: comm overlapped $o ms, expected > 0"
        [ "$w" = 0.000000 ] || fail "dp real: rank $r: waiting $w ms without a pipeline"
    done
    echo "ok: dp sim: comm overlapped $(col dp sim 0 14) ms per step on rank 0"
fi

# ---- 1f1b pipeline ------------------------------------------------------------
if run pp --global-batch-size 16 --pipeline-model-parallel-size 2 --pipeline-schedule 1f1b; then
    check_sums pp real
    check_sums pp sim
    for kind in real sim; do
        for r in 0 1; do
            w=$(col pp $kind $r 12) b=$(col pp $kind $r 16)
            awk -v w="$w" 'BEGIN { exit !(w > 0) }' || fail "pp $kind: stage $r: waiting $w ms, expected > 0"
            awk -v w="$w" -v b="$b" 'BEGIN { exit !(w <= b + 1e-6) }' ||
                fail "pp $kind: stage $r: waiting $w ms above the bubble's idle $b ms"
        done
        echo "ok: pp $kind: waiting $(col pp $kind 0 12) and $(col pp $kind 1 12) ms per step on the stages"
    done
    if "$DTBENCH" bubbles --skip 1 "$TMP/pp.rank0.json" "$TMP/pp.rank1.json" >"$TMP/pp.bub" 2>"$TMP/err"; then
        for r in 0 1; do
            want=$(sed -n "s/.* stage=$r .* bubble=\([0-9.]*\) .*/\1/p" "$TMP/pp.bub")
            got=$(col pp real $r 15)
            # the same figure printed twice: dtbench rounds the double to 4
            # decimals, the CSV to its own digits, so a value at a rounding
            # edge (0.32705) reads 0.3270 there and 0.3271 here: equal within
            # one unit of the 4th decimal
            [ -n "$want" ] && awk -v a="$want" -v b="$got" 'BEGIN { d = a - b; exit !(d <= 1e-4 && -d <= 1e-4) }' ||
                fail "pp: stage $r: bubble $got, dtbench bubbles says '$want'"
        done
        echo "ok: pp: bubbles as dtbench bubbles: $(col pp real 0 15) $(col pp real 1 15)"
    else
        fail "dtbench bubbles:"; cat "$TMP/err" >&2
    fi
fi

# ---- the real and simulated breakdowns, side by side ---------------------------
for name in dp pp; do
    [ -f "$TMP/$name.sim.json" ] || continue
    echo "== $name: real (A) vs simulated (B)"
    "$DTSIM" analyze --compare "$TMP/$name.json" "$TMP/$name.sim.json" || fail "$name: dtsim analyze --compare"
done

# ---- bad input -------------------------------------------------------------------
for args in "$TMP/none.json" "--compare $TMP/pp.sim.json" "--skip 9 $TMP/pp.sim.json"; do
    # shellcheck disable=SC2086
    "$DTSIM" analyze $args >"$TMP/o" 2>"$TMP/e"
    rc=$?
    if [ $rc -ne 2 ] || [ "$(wc -l <"$TMP/e")" -ne 1 ] || [ -s "$TMP/o" ]; then
        fail "dtsim analyze $args: exit $rc (expected 2, one line on stderr, nothing on stdout):"; cat "$TMP/e" >&2
    else
        echo "ok: dtsim analyze $args: $(cat "$TMP/e")"
    fi
done

[ "$failures" -eq 0 ] || { echo "$TEST: $failures failure(s)" >&2; exit 1; }
echo "$TEST: breakdowns of real and simulated runs agree with their steps"
