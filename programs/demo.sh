#!/bin/sh
# demo.sh: the showcase that `make demo` runs, in four steps:
#   1. train: a 4-rank CPU run under mpirun, pipeline (p = 2 stages, 1F1B)
#      times data parallelism (d = 2, ring allreduce), on the built-in
#      addition task, with --trace;
#   2. calibrate: a single-rank profile of the same micro-batch;
#   3. predict: dtsim validate, which simulates the run from its
#      configuration and the profile only, and prints the error;
#   4. draw: dtviz renders a few steps of the real trace above the simulated
#      ones (timeline, headless PNG).
#
#   sh programs/demo.sh BUILDDIR SRCDIR [OUTDIR]     (OUTDIR: BUILDDIR/demo)
#   DEMO_ITERS=N  training steps (default 2500, dtrain's default)
#
# The 4 ranks need 4 cores to run one per core, as the simulator assumes
# by default. On a machine with fewer cores the ranks take turns: the demo
# then also runs the profile 4 times at once (a co-located profile) and
# predicts with the ranks sharing the machine's cores (dtsim
# --cores-per-node --colocated: k ranks computing at once run at the
# speed the co-located profile measured). POSIX sh.

set -eu
LC_ALL=C
export LC_ALL

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    echo "usage: demo.sh BUILDDIR SRCDIR [OUTDIR]" >&2
    exit 2
fi
abs() { case $1 in /*) echo "$1" ;; *) echo "$(pwd)/$1" ;; esac; }
BUILDDIR=$(abs "$1")
SRCDIR=$(abs "$2")
OUT=$(abs "${3:-$BUILDDIR/demo}")
ITERS=${DEMO_ITERS:-2500}
case $ITERS in '' | *[!0-9]*) echo "demo.sh: DEMO_ITERS='$ITERS': expected a positive integer" >&2; exit 2 ;; esac
[ "$ITERS" -ge 10 ] || { echo "demo.sh: DEMO_ITERS=$ITERS: expected at least 10 steps" >&2; exit 2; }
for p in dtrain dtsim; do
    [ -x "$BUILDDIR/$p" ] || { echo "demo.sh: $BUILDDIR/$p not found or not executable (build first: make)" >&2; exit 1; }
done
command -v mpirun >/dev/null 2>&1 || { echo "demo.sh: mpirun not found (install openmpi-bin: ./bootstrap)" >&2; exit 1; }
NP=4
CORES=$(nproc 2>/dev/null || echo 1)
mkdir -p "$OUT"
cd "$OUT"
rm -f demo.rank*.json profile*.json sim.json timeline*.png ./*.log

# Open MPI settings of the multi-rank tests, plus eager messages (docs/pipeline.md)
. "$SRCDIR/tests/mpi-env.sh"
: "${OMPI_MCA_btl_vader_eager_limit:=135168}"
: "${OMPI_MCA_btl_vader_segment_size:=33554432}"
export OMPI_MCA_btl_vader_eager_limit OMPI_MCA_btl_vader_segment_size
HW=$SRCDIR/sim/hw/cpu-2core.json

# run LOG COMMAND...: run it with its output in LOG; on failure show the end of LOG
run() {
    log=$1
    shift
    if ! "$@" >"$log" 2>&1; then
        echo "demo.sh: failed: $*" >&2
        tail -n 15 "$log" >&2
        exit 1
    fi
}

# the same micro-batch in every run: 16 sequences, one thread per process
TRAIN="--micro-batch-size 16 --threads 1"
echo "== 1/4 train: 4 ranks = 2 pipeline stages (1f1b) x 2 data-parallel replicas (ring), $ITERS steps"
echo "   mpirun --oversubscribe -np $NP ./dtrain --pipeline-model-parallel-size 2 --pipeline-schedule 1f1b $TRAIN --global-batch-size 128 --train-iters $ITERS --trace demo.json"
run train.log mpirun --oversubscribe --allow-run-as-root -np $NP "$BUILDDIR/dtrain" --pipeline-model-parallel-size 2 \
    --pipeline-schedule 1f1b $TRAIN --global-batch-size 128 --train-iters "$ITERS" --trace demo.json
grep -E '^parallel:|^  rank |^done:|^final:' train.log | sed 's/^/   /'

echo "== 2/4 calibrate: a single-rank profile of the same micro-batch (30 steps)"
PROF="$TRAIN --global-batch-size 16 --train-iters 30 --eval-interval 0 --eval-iters 1"
run profile.log "$BUILDDIR/dtrain" $PROF --trace profile.json
echo "   ./dtrain $PROF --trace profile.json"
# fewer cores than ranks: the same profile $NP times at once (a co-located
# profile), from which dtsim fits how much slower $NP ranks sharing this
# machine compute than one alone (the hardware's "contention")
COLOC=
SHARE=
if [ "$CORES" -lt "$NP" ]; then
    echo "   and $NP copies at once (a co-located profile): ./dtrain $PROF --trace coloc-K.json &, K = 0..$((NP - 1))"
    pids=
    k=0
    while [ $k -lt $NP ]; do
        "$BUILDDIR/dtrain" $PROF --trace coloc-$k.json >coloc-$k.log 2>&1 &
        pids="$pids $!"
        COLOC="$COLOC${COLOC:+,}coloc-$k.json"
        k=$((k + 1))
    done
    for p in $pids; do
        wait "$p" || { echo "demo.sh: a co-located profile run failed (see $OUT/coloc-*.log)" >&2; exit 1; }
    done
    SHARE="--cores-per-node $CORES --colocated $COLOC"
fi
echo "== 3/4 predict: dtsim validate (the run's configuration and the profiles; never its durations)"
echo "   ./dtsim validate --profile profile.json --hw sim/hw/cpu-2core.json --devices-per-node $NP $SHARE demo.rank0.json" | sed 's/  */ /g'
run validate.log "$BUILDDIR/dtsim" validate --profile profile.json --hw "$HW" --devices-per-node $NP $SHARE demo.rank0.json
sed -n '/^run /,$p' validate.log | sed 's/^/   /'
err=$(sed -n 's/^t1 p2 d2 .* \([-+][0-9.]*%\) .*/\1/p' validate.log)
meas=$(sed -n 's/^t1 p2 d2 [^ ]* [^ ]* [^ ]* *\([0-9.]*\) ms .*/\1/p' validate.log)
pred=$(sed -n 's/^t1 p2 d2 [^ ]* [^ ]* [^ ]* *[0-9.]* ms *\([0-9.]*\) ms .*/\1/p' validate.log)

echo "== 4/4 draw: the real steps above the simulated ones"
# the simulation of the same run (sharing the cores if they are fewer than
# the ranks), 6 steps, drawn beside the real run's steps 2-7
run sim.log "$BUILDDIR/dtsim" run --config demo.rank0.json --profile profile.json --hw "$HW" --devices-per-node $NP \
    $SHARE --train-iters 6 --trace sim.json
pic=
if [ -x "$BUILDDIR/dtviz" ]; then
    zoom=$(awk -v n="$ITERS" 'BEGIN { printf "%.6f:%.6f", 2 / n, 7 / n }')
    echo "   ./dtsim run --config demo.rank0.json --profile profile.json --hw sim/hw/cpu-2core.json --devices-per-node $NP $SHARE --train-iters 6 --trace sim.json" | sed 's/\([^ ]\)  */\1 /g'
    echo "   ./dtviz demo.json --zoom $zoom --png timeline.png; ./dtviz sim.json --png timeline-sim.png"
    unset DISPLAY WAYLAND_DISPLAY SDL_VIDEODRIVER || true
    run viz.log "$BUILDDIR/dtviz" demo.json --zoom "$zoom" --size 1400x600 --png timeline.png
    run viz-sim.log "$BUILDDIR/dtviz" sim.json --size 1400x600 --png timeline-sim.png
    pic="$OUT/timeline.png (real) and $OUT/timeline-sim.png (simulated)"
else
    echo "   (no dtviz in this build: configure found no SDL2; no picture)"
fi

echo "== summary"
sed -n 's/^final: \(.*\) tokens\/s.*/   trained:   \1/p' train.log
if [ "$CORES" -lt "$NP" ]; then
    echo "   step time: measured $meas ms, predicted $pred ms (error $err; the $NP ranks sharing this machine's $CORES cores)"
else
    echo "   step time: measured $meas ms, predicted $pred ms (error $err; one core per rank)"
fi
echo "   trace:     $OUT/demo.json (demo.rank0.json .. demo.rank3.json; open in https://ui.perfetto.dev or ./dtviz)"
[ -n "$pic" ] && echo "   pictures:  $pic"
exit 0
