#!/bin/sh
# trace-merge.sh: one trace for the whole job (issue 23; docs/trace-format.md
# "Merged files", "Flow events"), run by `make check`; skipped without MPI.
# Two 2-rank runs with --trace: a pipeline (p = 2, 1f1b, m = 4, 3 steps)
# and data parallelism (3 steps). For each:
# 1. the rank files stay and run.json is written next to them: read by the
#    project's own reader (dtbench flows: strict JSON, every field
#    range-checked), holding both ranks, its events the rank files' events
#    plus its flow events (2 per message);
# 2. flows: every id has exactly one start ('s', on the send) and one end
#    ('f', on the receive) on two ranks; the pipeline has 2 messages per
#    micro-batch (activation and gradient), so 2 * 3 * 4 = 24 pairs, data
#    parallelism none; no end is before its start by more than the two
#    ranks' clock alignment errors (the tolerance: each rank's measured
#    error_ns, half its shortest ping-pong with rank 0; on one host the
#    clocks are one, so this is the bound itself; measured ~0.6 us);
# 3. the consumers take it: dtsim run --config, dtsim validate (the
#    merged file's rank 0 measured as the rank file's), dtviz --png,
#    dtbench bubbles (one line per rank, each the rank file's figures);
# 4. dtsim merge of the rank files writes the same bytes as the run's own
#    merge; dtsim's own trace of the pipeline pairs its 24 flows too;
# 5. dtsim merge refuses the files of two runs (exit 2, one line, no
#    output file).
# About 2 s on 2 cores (5 mpirun-free dtsim/dtbench calls per run, 2 runs).

TEST=trace-merge.sh
. "${DT_SRCDIR:-.}/tests/mpi-lib.sh"

DTSIM=$BUILDDIR/dtsim
DTBENCH=$BUILDDIR/dtbench
DTVIZ=$BUILDDIR/dtviz
for p in "$DTSIM" "$DTBENCH"; do
    [ -x "$p" ] || { echo "$TEST: $p not found" >&2; exit 99; }
done

COMMON="--task add --task-digits 2 --seq-length 16 --train-iters 3 --lr-warmup-iters 1 --eval-iters 1 \
--eval-interval 0 --log-interval 3 --threads 1 --micro-batch-size 2"
STEPS=3 M=4

# field LINE KEY: the value of KEY=... in a dtbench line
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# check NAME ARGS...: mpirun -np 2 dtrain COMMON ARGS --trace $TMP/NAME/run.json, then 1.-3.
check() {
    name=$1; shift
    d=$TMP/$name
    mkdir "$d" || return 1
    if ! timeout 120 $MPIRUN -np 2 "$DTRAIN" $COMMON "$@" --trace "$d/run.json" >"$d/out" 2>&1; then
        fail "$name: exited non-zero:"; tail -n 20 "$d/out" >&2
        return 1
    fi
    for f in run.rank0.json run.rank1.json run.json; do
        [ -s "$d/$f" ] || fail "$name: $f missing"
    done
    ls "$d" | grep -q '^\.' && fail "$name: a temporary file was left: $(ls -a "$d")"
    if ! line=$("$DTBENCH" flows "$d/run.json" 2>"$d/flows.err"); then
        fail "$name: dtbench flows: $(cat "$d/flows.err") $line"
        return 1
    fi
    echo "$name: $line"
    r0=$("$DTBENCH" flows "$d/run.rank0.json") && r1=$("$DTBENCH" flows "$d/run.rank1.json") ||
        fail "$name: the rank files do not read"
    e0=$(field "$r0" events) e1=$(field "$r1" events)
    events=$(field "$line" events) flows=$(field "$line" flows) pairs=$(field "$line" pairs)
    [ "$(field "$line" ranks)" = 2 ] || fail "$name: run.json holds $(field "$line" ranks) ranks, expected 2"
    [ "$events" -eq $((e0 + e1 + flows)) ] ||
        fail "$name: run.json has $events events; the rank files $e0 + $e1, plus $flows flows"
    [ "$flows" -eq $((2 * pairs)) ] || fail "$name: $flows flow events for $pairs pairs"
    [ "$(field "$line" unpaired)" = 0 ] && [ "$(field "$line" early)" = 0 ] ||
        fail "$name: unpaired or early flows: $line"
    [ "$(field "$line" method)" = ping-pong ] && [ "$(field "$line" judged)" = "$pairs" ] ||
        fail "$name: not every pair judged against a ping-pong alignment: $line"
    [ "$pairs" -gt 0 ] && echo "$name: tolerance (the two ranks' alignment errors) $(field "$line" tolerance_us) us," \
        "smallest receive end - send start $(field "$line" min_lag_us) us"
    # 3. the consumers
    "$DTSIM" run --config "$d/run.json" >"$d/sim.out" 2>&1 || fail "$name: dtsim run --config: $(tail -n 1 "$d/sim.out")"
    "$DTSIM" validate --profile "$TMP/prof.json" "$d/run.json" "$d/run.rank0.json" >"$d/val.out" 2>&1 ||
        fail "$name: dtsim validate: $(tail -n 1 "$d/val.out")"
    a=$(grep ' ms .*|' "$d/val.out" | grep -v '^run ' | sed -n 1p) b=$(grep ' ms .*|' "$d/val.out" | grep -v '^run ' | sed -n 2p)
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "$name: validate: run.json '$a', run.rank0.json '$b'"
    if [ -x "$DTVIZ" ]; then
        "$DTVIZ" "$d/run.json" --png "$d/run.png" >"$d/viz.out" 2>&1 && [ -s "$d/run.png" ] ||
            fail "$name: dtviz --png: $(tail -n 1 "$d/viz.out")"
    fi
    # 4. the same merge from the files on disk
    mkdir "$d/again" && cp "$d"/run.rank*.json "$d/again/" &&
        "$DTSIM" merge "$d/again/run.json" >"$d/merge.out" 2>&1 || fail "$name: dtsim merge: $(tail -n 1 "$d/merge.out")"
    cmp -s "$d/run.json" "$d/again/run.json" || fail "$name: dtsim merge wrote other bytes than the run's merge"
    eval "${name}_pairs=\$pairs"
}

# the single-rank profile dtsim validate predicts from
"$DTRAIN" $COMMON --trace "$TMP/prof.json" >"$TMP/prof.out" 2>&1 || fail "profile run: $(tail -n 1 "$TMP/prof.out")"

pp_pairs= dp_pairs=
check pp --pipeline-model-parallel-size 2 --global-batch-size $((2 * M))
check dp
[ "$pp_pairs" = $((2 * STEPS * M)) ] || fail "pp: $pp_pairs flow pairs, expected 2 messages x $STEPS steps x $M = $((2 * STEPS * M))"
[ "$dp_pairs" = 0 ] || fail "dp: $dp_pairs flow pairs, expected none (no point-to-point messages traced)"
if [ -s "$TMP/pp/run.json" ]; then
    bl=$("$DTBENCH" bubbles "$TMP/pp/run.json" | grep ' rank=1 ' | cut -d' ' -f3-)
    br=$("$DTBENCH" bubbles "$TMP/pp/run.rank1.json" | cut -d' ' -f2-)
    [ -n "$bl" ] && [ "$bl" = "$br" ] || fail "dtbench bubbles: run.json rank 1 '$bl', run.rank1.json '$br'"
    # dtsim's own trace of the run's scenario: the same 24 messages, one clock
    "$DTSIM" run --config "$TMP/pp/run.json" --trace "$TMP/sim.json" >/dev/null 2>&1 || fail "dtsim run --trace failed"
    line=$("$DTBENCH" flows "$TMP/sim.json") || fail "dtsim's flows: $line"
    [ "$(field "$line" pairs)" = $((2 * STEPS * M)) ] || fail "dtsim's trace: $line"
    # 5. files of two runs
    "$DTSIM" merge --output "$TMP/mixed.json" "$TMP/pp/run.rank0.json" "$TMP/dp/run.rank1.json" >"$TMP/mixed.out" 2>&1
    rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l <"$TMP/mixed.out")" = 1 ] && grep -q "clocks of different runs" "$TMP/mixed.out" &&
        [ ! -e "$TMP/mixed.json" ] || fail "dtsim merge of two runs: exit $rc, $(cat "$TMP/mixed.out")"
fi

[ "$failures" -eq 0 ] || { echo "$TEST: $failures failure(s)" >&2; exit 1; }
echo "$TEST: ok"
