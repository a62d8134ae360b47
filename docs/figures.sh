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
# when a command fails). Takes a few minutes on a 2-core machine.
#
# The figures:
#   pipeline-real-vs-sim.png  a real 2-rank 1f1b run (p = 2, m = 4) above its
#                             simulation from a single-rank profile (timeline)
#   pipeline-gpipe-vs-1f1b.png  simulated gpipe above 1f1b, p = 4, m = 8 (timeline)
#   memory-gpipe-vs-1f1b.png  the same two runs' memory per rank (memory view)
#   ring.png                  a simulated 4-rank ring allreduce (ring view), caught
#                             mid-way through step 1 (--time 0.846 of the trace)
#   loss-scale.png            a real fp16 run whose loss scale starts too high
#                             and overflows (loss-scale view)
#   pipedream-vsync.png       simulated PipeDream with vertical sync, p = 4, m = 4,
#                             zoomed in: each box says micro-batch and weight
#                             version, the same on every stage (timeline)
#   ps-async.png              a simulated parameter server with a slow worker,
#                             pushes and pulls and the staleness histogram (ring view)
# POSIX sh.

set -eu
LC_ALL=C
export LC_ALL

# FIGURES=tutorials/NN-name: only that tutorial's pictures (its figures.sh)
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

if [ -z "${FIGURES:-}" ]; then
# ---- a real pipeline run and its simulation -----------------------------------
# 4 blocks of width 128, T = 64, micro-batches of 4, m = 4, one thread per rank
MODEL="--num-layers 4 --hidden-size 128 --seq-length 64 --micro-batch-size 4 --threads 1 --lr-warmup-iters 1 \
--eval-iters 1 --eval-interval 0 --log-interval 100"
step "real run: mpirun -np 2 dtrain, pipeline p = 2, 1f1b, m = 4, 4 steps" \
    $MPIRUN -np 2 "$DTRAIN" $MODEL --global-batch-size 16 --train-iters 4 --pipeline-model-parallel-size 2 \
    --pipeline-schedule 1f1b --trace real.json
step "single-rank profile for the simulator (dtrain, 3 steps)" \
    "$DTRAIN" $MODEL --global-batch-size 4 --train-iters 3 --trace profile.json
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
step "dtsim: 1f1b, p = 4, m = 8" "$DTSIM" run $SIM --pipeline-schedule 1f1b --trace 1f1b.json
step "pipeline-gpipe-vs-1f1b.png" \
    "$DTVIZ" gpipe.json 1f1b.json --size $SIZE --png "$OUT/pipeline-gpipe-vs-1f1b.png"
step "memory-gpipe-vs-1f1b.png" \
    "$DTVIZ" gpipe.json 1f1b.json --view memory --size $SIZE --png "$OUT/memory-gpipe-vs-1f1b.png"

# ---- a ring allreduce (simulated, 4 ranks) --------------------------------------
step "dtsim: data parallel d = 4, ring allreduce" \
    "$DTSIM" run --data-parallel-size 4 --allreduce ring --bucket-size-mb 0 --train-iters 2 --trace ring.json
step "ring.png" "$DTVIZ" ring.json --view ring --time 0.846 --size $SIZE --png "$OUT/ring.png"

# ---- fp16 loss scaling with overflows (a real run) --------------------------------
step "real run: dtrain --fp16 --initial-loss-scale 1048576 --loss-scale-window 20, 150 steps" \
    "$DTRAIN" --fp16 --initial-loss-scale 1048576 --loss-scale-window 20 --train-iters 150 --eval-interval 0 \
    --micro-batch-size 16 --global-batch-size 16 --trace fp16.json
step "loss-scale.png" "$DTVIZ" fp16.json --view scale --size $SIZE --png "$OUT/loss-scale.png"

# ---- PipeDream with vertical sync, and an asynchronous parameter server (simulated) -----
step "dtsim: pipedream-vsync, p = 4, m = 4, 3 steps (profile costs)" \
    "$DTSIM" run --num-layers 4 --pipeline-model-parallel-size 4 --micro-batches 4 --micro-batch-size 16 \
    --train-iters 3 --pipeline-schedule pipedream-vsync --profile profile-tiny.json \
    --hw "$SRCDIR/sim/hw/cpu-2core.json" --trace vsync.json
step "pipedream-vsync.png" \
    "$DTVIZ" vsync.json --zoom 0.45:0.8 --size 1400x520 --png "$OUT/pipedream-vsync.png"
step "dtsim: ps-async, 3 workers + 1 server, worker 1 slowed by 30 ms" \
    "$DTSIM" run --allreduce ps-async --num-ps-servers 1 --data-parallel-size 3 --micro-batch-size 16 \
    --micro-batches 1 --train-iters 20 --slow-rank 1:30 --profile profile-tiny.json \
    --hw "$SRCDIR/sim/hw/cpu-2core.json" --trace ps.json
step "ps-async.png" "$DTVIZ" ps.json --view ring --time 0.6 --size 1400x700 --png "$OUT/ps-async.png"

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
