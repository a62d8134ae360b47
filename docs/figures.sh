#!/bin/sh
# figures.sh: regenerate every picture of the docs (`make figures` runs it).
#
#   sh docs/figures.sh BUILDDIR SRCDIR
#
# BUILDDIR holds the built ./dtrain, ./dtsim and ./dtviz; the PNGs go to
# SRCDIR/docs/figures/. Every picture comes from commands a reader can run:
# real runs of dtrain (2 ranks under mpirun with tests/mpi-env.sh's Open MPI
# settings), their simulations by dtsim, drawn headless by `dtviz --png`
# (no display needed: SDL_VIDEODRIVER and DISPLAY are not used). The work
# files go to a temporary directory, removed at the end (kept, and named,
# when a command fails). Takes a few minutes on a 2-core machine. After
# drawing a picture it checks what the text says of it (claim) against the
# numbers the picture is drawn from (tests/trace-spans.awk gives the spans a
# --zoom shows), so a caption cannot drift from its picture unnoticed.
#
# The figures:
#   pipeline-real-vs-sim.png  a real 2-rank 1f1b run (p = 2, m = 4) above its
#                             simulation from a single-rank profile (timeline)
#   pipeline-gpipe-vs-1f1b.png  simulated gpipe above 1f1b, p = 4, m = 8 (timeline)
#   memory-gpipe-vs-1f1b.png  the same two runs' memory per rank (memory view)
#   ring.png                  a simulated 4-rank ring allreduce (ring view), caught
#                             mid-way through step 1 (--time 0.846 of the trace)
#   pipedream-vsync.png       simulated PipeDream with vertical sync, p = 4, m = 4,
#                             zoomed in: each box says micro-batch and weight
#                             version, the same on every stage (timeline)
#   ps-async.png              a simulated parameter server with a slow worker,
#                             pushes and pulls and the staleness histogram (ring view)
#   cp-ring.png               a real 4-rank context-parallel run (p2p ring), caught in
#                             rank 0's second forward ring step of iteration 1 (cp view)
#   fp8-delayed-vs-tensorwise.png  two real FP8 runs (hybrid, --lr 0.01, 60 steps): delayed
#                             scaling above tensorwise, the tensor the delayed run saturates
#                             most, h.0.qkv.dy (fp8 view)
# POSIX sh.

set -eu
LC_ALL=C
export LC_ALL

# FIGURES=tutorials/NN-name: only that tutorial's pictures (its figures.sh);
# FIGURES=docs: only docs/figures/
if [ $# -ne 2 ]; then
    echo "usage: figures.sh BUILDDIR SRCDIR" >&2
    exit 2
fi
BUILDDIR=$1
SRCDIR=$2
DTRAIN=$BUILDDIR/dtrain
DTSIM=$BUILDDIR/dtsim
DTVIZ=$BUILDDIR/dtviz
for p in "$DTRAIN" "$DTSIM" "$DTVIZ"; do
    [ -x "$p" ] || { echo "figures.sh: $p not found or not executable (build first: make)" >&2; exit 1; }
done
command -v mpirun >/dev/null 2>&1 || { echo "figures.sh: mpirun not found (the real 2-rank runs need it)" >&2; exit 1; }
OUT=$SRCDIR/docs/figures
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-figures.XXXXXX")
trap 'st=$?; if [ $st -eq 0 ]; then rm -rf "$WORK"; else echo "figures.sh: failed; work files kept in $WORK" >&2; fi' EXIT
. "$SRCDIR/tests/mpi-env.sh"
MPIRUN="mpirun --oversubscribe --allow-run-as-root"
# headless: no display is needed or used
unset DISPLAY WAYLAND_DISPLAY SDL_VIDEODRIVER || true
SIZE=1400x800
# the traces are named relative to $WORK, so the pictures' titles show short names
case $BUILDDIR in /*) ;; *) BUILDDIR=$(pwd)/$BUILDDIR ;; esac
case $SRCDIR in /*) ;; *) SRCDIR=$(pwd)/$SRCDIR ;; esac
case $OUT in /*) ;; *) OUT=$(pwd)/$OUT ;; esac
DTRAIN=$BUILDDIR/dtrain
DTSIM=$BUILDDIR/dtsim
DTVIZ=$BUILDDIR/dtviz
cd "$WORK"

# step MESSAGE COMMAND...: run COMMAND with its output in $WORK/log, say what it makes
step() {
    echo "  $1"
    shift
    if ! "$@" >"$WORK/log" 2>&1; then
        echo "figures.sh: failed: $*" >&2
        tail -n 20 "$WORK/log" >&2
        exit 1
    fi
}

# The captions' claims, checked against the numbers each picture is drawn
# from: a caption that no longer matches its picture fails `make figures`.
# spans A:B [all=1] TRACE...: the spans `dtviz --zoom A:B` shows (all=1:
#     every span), as tests/trace-spans.awk lists them: a "window T0 T1
#     EXTENT" line, then pid tid name start end iter micro_batch layer
#     inside step version, tab-separated, times in ns)
spans() {
    fig_w=$1
    shift
    awk -v from="${fig_w%:*}" -v to="${fig_w#*:}" -f "$SRCDIR/tests/trace-spans.awk" "$@"
}
# inrange VALUE LO HI: true when LO <= VALUE <= HI (VALUE not empty)
inrange() { [ -n "$1" ] && awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v + 0 >= lo + 0 && v + 0 <= hi + 0) }'; }
# claim WHAT VALUE LO HI: the caption's claim WHAT, as VALUE in [LO, HI]
claim() {
    if inrange "$2" "$3" "$4"; then
        echo "    claim: $1 = $2 (in [$3, $4])"
    else
        echo "figures.sh: the caption's claim does not hold: $1 = '$2', outside [$3, $4]" >&2
        exit 1
    fi
}
# retry FUNCTION: run FUNCTION (real runs, then a test of what they show) up
# to 5 times, 10 s apart, until it returns 0: runs that share a 2-core
# machine with other work show the load, not the model (tutorial 08)
retry() {
    fig_try=1
    until "$1"; do
        [ $fig_try -ge 5 ] && return 1
        fig_try=$((fig_try + 1))
        echo "  (the runs show another process's load: again in 10 s, try $fig_try of 5)"
        sleep 10
    done
}

if [ -z "${FIGURES:-}" ] || [ "$FIGURES" = docs ]; then
# ---- a real pipeline run and its simulation -----------------------------------
# 4 blocks of width 128, T = 64, micro-batches of 4, m = 4, one thread per rank
MODEL="--num-layers 4 --hidden-size 128 --seq-length 64 --micro-batch-size 4 --threads 1 --lr-warmup-iters 1 \
--eval-iters 1 --eval-interval 0 --log-interval 100"
# A run slowed by another process on the 2 cores is predicted badly
# (tutorials/08-simulator): the runs are taken again, up to 5 times, until
# dtsim validate's error is within 10%, so that the boxes line up
# (docs/viewer.md says so)
docs_real() {
    step "real run: mpirun -np 2 dtrain, pipeline p = 2, 1f1b, m = 4, 4 steps" \
        $MPIRUN -np 2 "$DTRAIN" $MODEL --global-batch-size 16 --train-iters 4 --pipeline-model-parallel-size 2 \
        --pipeline-schedule 1f1b --trace real.json
    step "single-rank profile for the simulator (dtrain, 3 steps)" \
        "$DTRAIN" $MODEL --global-batch-size 4 --train-iters 3 --trace profile.json
    docs_err=$("$DTSIM" validate --profile profile.json --hw "$SRCDIR/sim/hw/cpu-2core.json" real.rank0.json |
        awk '/^t1 / { v = $10; sub(/%/, "", v); v += 0; print (v < 0 ? -v : v) }')
    echo "  dtsim validate: |error| $docs_err%"
    inrange "$docs_err" 0 10
}
retry docs_real || :
claim "pipeline-real-vs-sim.png: |predicted - measured| / measured step time (%)" "$docs_err" 0 10
step "its simulation: dtsim run --config the real trace --profile --hw cpu-2core" \
    "$DTSIM" run --config real.rank0.json --profile profile.json \
    --hw "$SRCDIR/sim/hw/cpu-2core.json" --trace simulated.json
step "pipeline-real-vs-sim.png" \
    "$DTVIZ" real.json simulated.json --size $SIZE --png "$OUT/pipeline-real-vs-sim.png"

step "single-rank profile of the tiny model (dtrain, micro-batch 16, 6 steps)" \
    "$DTRAIN" --threads 1 --micro-batch-size 16 --global-batch-size 64 --train-iters 6 --eval-interval 0 \
    --trace profile-tiny.json

# ---- gpipe vs 1f1b (simulated) -------------------------------------------------
SIM="--num-layers 8 --pipeline-model-parallel-size 4 --micro-batches 8 --micro-batch-size 16 --train-iters 2"
step "dtsim: gpipe, p = 4, m = 8" "$DTSIM" run $SIM --pipeline-schedule gpipe --trace gpipe.json
cp "$WORK/log" gpipe.out
step "dtsim: 1f1b, p = 4, m = 8" "$DTSIM" run $SIM --pipeline-schedule 1f1b --trace 1f1b.json
cp "$WORK/log" 1f1b.out
step "pipeline-gpipe-vs-1f1b.png" \
    "$DTVIZ" gpipe.json 1f1b.json --size $SIZE --png "$OUT/pipeline-gpipe-vs-1f1b.png"
step "memory-gpipe-vs-1f1b.png" \
    "$DTVIZ" gpipe.json 1f1b.json --view memory --size $SIZE --png "$OUT/memory-gpipe-vs-1f1b.png"
# tutorials/05-pipeline's text: the same bubble per stage, above the formula's
# 3/11 on stage 0 (the last stage is the slowest); GPipe's stage 0 holds all
# 8 micro-batches' activations, 1F1B's 4
claim "stage 0 bubble (forward/backward only), gpipe - 1f1b" "$(cat gpipe.out 1f1b.out |
    sed -n 's/^  stage 0: .* fwd\/bwd-only \([0-9.]*\)$/\1/p' | awk 'NR == 1 { a = $1 } NR == 2 { print a - $1 }')" -0.005 0.005
claim "stage 0 bubble (forward/backward only), gpipe, less 3/11" \
    "$(sed -n 's/^  stage 0: .* fwd\/bwd-only \([0-9.]*\)$/\1/p' gpipe.out | awk '{ print $1 - 3 / 11 }')" 0.02 0.2
claim "gpipe: stage 0 bubble less stage 3's (the last stage is the slowest)" "$(sed -n \
    's/^  stage \([03]\): .* fwd\/bwd-only \([0-9.]*\)$/\2/p' gpipe.out | awk 'NR == 1 { a = $1 } NR == 2 { print a - $1 }')" 0.01 1
# the activations counter of each trace's rank 0 (stage 0), at its highest
claim "stage 0's peak activations, gpipe / 1f1b" "$(for f in gpipe.json 1f1b.json; do
    grep '"name":"memory".*"pid":0,' $f | sed 's/.*"activations":\([0-9.]*\).*/\1/' | sort -n | tail -n 1; done |
    awk 'NR == 1 { a = $1 } NR == 2 && $1 > 0 { printf "%.3f", a / $1 }')" 1.98 2.02

# ---- a ring allreduce (simulated, 4 ranks) --------------------------------------
step "dtsim: data parallel d = 4, ring allreduce" \
    "$DTSIM" run --data-parallel-size 4 --allreduce ring --bucket-size-mb 0 --train-iters 2 --trace ring.json
step "ring.png" "$DTVIZ" ring.json --view ring --time 0.846 --size $SIZE --png "$OUT/ring.png"
# the text (tutorial 04, docs/viewer.md): at that moment ranks 0 and 2 are in
# their third reduce-scatter step, ranks 1 and 3 in their first all-gather step
spans 0.846:0.846 ring.json >ring.spans
claim "ring.png: ranks in reduce-scatter step 3 (0 and 2) and in all-gather step 1 (1 and 3)" \
    "$(awk -F'\t' '$3 == "reduce-scatter" && $10 == 2 && $1 % 2 == 0 { n++ }
                  $3 == "all-gather" && $10 == 0 && $1 % 2 == 1 { n++ } END { print n + 0 }' ring.spans)" 4 4

# ---- PipeDream with vertical sync, and an asynchronous parameter server (simulated) -----
step "dtsim: pipedream-vsync, p = 4, m = 4, 3 steps (profile costs)" \
    "$DTSIM" run --num-layers 4 --pipeline-model-parallel-size 4 --micro-batches 4 --micro-batch-size 16 \
    --train-iters 3 --pipeline-schedule pipedream-vsync --profile profile-tiny.json \
    --hw "$SRCDIR/sim/hw/cpu-2core.json" --trace vsync.json
step "pipedream-vsync.png" \
    "$DTVIZ" vsync.json --zoom 0.45:0.8 --size 1400x520 --png "$OUT/pipedream-vsync.png"
# the text: every box's version is the same on every stage (micro-batch 8: v5)
spans 0:1 vsync.json >vsync.spans
claim "pipedream-vsync.png: micro-batches whose forwards and backwards differ in version across stages" \
    "$(awk -F'\t' '($3 == "forward" || $3 == "backward") && $7 >= 0 {
        if (($7 in v) && v[$7] != $11 && !($7 in bad)) { bad[$7] = 1; n++ } v[$7] = $11 } END { print n + 0 }' vsync.spans)" 0 0
claim "pipedream-vsync.png: micro-batch 8's version, on all 4 stages" "$(awk -F'\t' '$3 == "forward" && $7 == 8 {
        s[$1] = $11 } END { for (r in s) { n++; v = s[r] } print (n == 4 ? v : -1) }' vsync.spans)" 5 5
step "dtsim: ps-async, 3 workers + 1 server, worker 1 slowed by 30 ms" \
    "$DTSIM" run --allreduce ps-async --num-ps-servers 1 --data-parallel-size 3 --micro-batch-size 16 \
    --micro-batches 1 --train-iters 20 --slow-rank 1:30 --profile profile-tiny.json \
    --hw "$SRCDIR/sim/hw/cpu-2core.json" --trace ps.json
step "ps-async.png" "$DTVIZ" ps.json --view ring --time 0.6 --size 1400x700 --png "$OUT/ps-async.png"
# docs/viewer.md: at that moment the two fast workers are done (20 pushes
# each) and the slowed one, rank 1, is not
spans 0:0.6 ps.json >ps.spans
claim "ps-async.png: pushes ended by then, ranks 0 and 2" "$(awk -F'\t' 'NR == 1 { t1 = $3 }
    $3 == "push/pull" && $5 <= t1 && ($1 == 0 || $1 == 2) { n++ } END { print n + 0 }' ps.spans)" 40 40
claim "ps-async.png: pushes ended by then, rank 1 (slowed)" "$(awk -F'\t' 'NR == 1 { t1 = $3 }
    $3 == "push/pull" && $5 <= t1 && $1 == 1 { n++ } END { print n + 0 }' ps.spans)" 1 19

# ---- context parallelism: whose key/value block each rank holds (a real 4-rank run) -----
step "real run: mpirun -np 4 dtrain --context-parallel-size 4 (p2p ring), 2 steps" \
    $MPIRUN -np 4 "$DTRAIN" --context-parallel-size 4 --train-iters 2 --eval-iters 1 --trace cp.json
# the moment drawn: the middle of rank 0's second forward ring step (step 1) of iteration 1
spans 0:1 all=1 cp.json >cp.spans
cp_time=$(awk -F'\t' 'NR == 1 { t0 = $2; ext = $4 }
    NR > 1 && $1 == 0 && $3 == "cp ring step" && $6 == 1 && $10 == 1 && !done {
        printf "%.6f", (($4 + $5) / 2 - t0) / ext; done = 1 }' cp.spans)
step "cp-ring.png (--time $cp_time)" \
    "$DTVIZ" cp.json --view cp --time "$cp_time" --size $SIZE --png "$OUT/cp-ring.png"
# docs/viewer.md: at that moment rank 0 is in that step, the block arriving is
# rank 2's (from), and it computes with rank 3's: (0 - 1) mod 4
spans "$cp_time:$cp_time" cp.json >cp.now
claim "cp-ring.png: rank 0's ring step then (iteration 1, step index 1)" "$(awk -F'\t' '
    $1 == 0 && $3 == "cp ring step" && $6 == 1 { print $10 }' cp.now)" 1 1
claim "cp-ring.png: the block arriving at rank 0 in that step (from)" "$(grep '"name":"cp ring step"' cp.json |
    grep '"pid":0,' | grep '"iter":1,' | grep '"forward":1' | grep '"step":1\.*0*,' | head -n 1 |
    sed 's/.*"from":\([0-9]*\).*/\1/')" 2 2

# ---- FP8 scaling: delayed against tensorwise (two real runs, one tensor) ----------
# The same run twice, one thread (the same numbers on every run of this
# machine), with a learning rate high enough for a gradient's amax to jump
# above what delayed scaling's history has seen
FP8="--fp8-format hybrid --lr 0.01 --seed 1337 --threads 1 --train-iters 60 --eval-interval 0 --eval-iters 1 \
--log-interval 100"
step "real run: dtrain --fp8-format hybrid --fp8-recipe delayed --lr 0.01, 60 steps" \
    "$DTRAIN" $FP8 --fp8-recipe delayed --trace fp8-delayed.json
step "the same run with --fp8-recipe tensorwise" "$DTRAIN" $FP8 --fp8-recipe tensorwise --trace fp8-tensorwise.json
step "fp8-delayed-vs-tensorwise.png" "$DTVIZ" fp8-delayed.json fp8-tensorwise.json --view fp8 --size 1400x1000 \
    --png "$OUT/fp8-delayed-vs-tensorwise.png"
# fp8 TRACE: each fp8 event as "tensor iter amax saturated values"
fp8() {
    grep -o '"name":"fp8 [^"]*"[^}]*}' "$1" | sed -n \
        's/^"name":"fp8 \([^"]*\)".*"iter":\([0-9]*\),.*"amax":\([^,]*\),.*"saturated":\([^,]*\),.*"values":\([^}]*\)}$/\1 \2 \3 \4 \5/p'
}
fp8 fp8-delayed.json >fp8-delayed.steps
fp8 fp8-tensorwise.json >fp8-tensorwise.steps
# docs/viewer.md: the view shows the delayed run's most saturated tensor, h.0.qkv.dy (both panes); its amax
# jumps above the window of every step before it in one step, which saturates a large share of its values;
# under tensorwise scaling no value of any tensor saturates
claim "fp8-delayed-vs-tensorwise.png: the delayed run's most saturated tensor is h.0.qkv.dy (1: yes)" "$(awk '
    { s[$1] += $4 } END { for (k in s) if (best == "" || s[k] > s[best] || (s[k] == s[best] && k < best)) best = k
    print (best == "h.0.qkv.dy" ? 1 : 0) }' fp8-delayed.steps)" 1 1
claim "fp8-delayed-vs-tensorwise.png: steps of h.0.qkv.dy with saturated values, delayed" "$(awk '
    $1 == "h.0.qkv.dy" && $4 > 0 { n++ } END { print n + 0 }' fp8-delayed.steps)" 1 2
claim "fp8-delayed-vs-tensorwise.png: h.0.qkv.dy's largest amax over the largest of the steps before it (x)" "$(awk '
    $1 == "h.0.qkv.dy" { if (m > 0 && $3 / m > r) r = $3 / m; if ($3 > m) m = $3 } END { printf "%.1f", r }' \
    fp8-delayed.steps)" 8 100000
claim "fp8-delayed-vs-tensorwise.png: that step's saturated share of its values (%)" "$(awk '
    $1 == "h.0.qkv.dy" && $4 > b { b = $4; v = $5 } END { printf "%.1f", 100 * b / v }' fp8-delayed.steps)" 5 50
claim "fp8-delayed-vs-tensorwise.png: saturated values of any tensor, tensorwise" "$(awk '
    { s += $4 } END { print s + 0 }' fp8-tensorwise.steps)" 0 0

fi

# ---- the tutorials' pictures ---------------------------------------------------
# Each tutorials/NN-name/figures.sh is sourced here, in its own work
# directory, with $DTRAIN, $DTSIM, $DTVIZ, $MPIRUN, $SIZE, $SRCDIR and step()
# defined and FIGDIR set to its tutorial's folder, where its PNGs go.
for f in "$SRCDIR"/tutorials/[0-9]*-*/figures.sh; do
    [ -f "$f" ] || continue
    FIGDIR=$(dirname "$f")
    tut=$(basename "$FIGDIR")
    case ${FIGURES:-} in "" | "tutorials/$tut" | "tutorials/$tut/") ;; *) continue ;; esac
    echo "tutorials/$tut"
    mkdir -p "$WORK/$tut"
    cd "$WORK/$tut"
    . "$f"
    cd "$WORK"
done

echo "figures.sh: wrote $(ls "$OUT"/*.png "$SRCDIR"/tutorials/*/*.png 2>/dev/null | wc -l | tr -d ' ') pictures to $OUT and tutorials/*/"
