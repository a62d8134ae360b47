#!/bin/sh
# check.sh: runs tutorials/11-composition/README.md's commands and checks the
# outputs it quotes, within the ranges it states. Run by tests/tutorials.sh
# (make check), or alone: DT_BUILDDIR=build DT_SRCDIR=. sh tutorials/11-composition/check.sh
# TUTORIAL_QUICK=1 (make check, at most 4 ranks): the README's 8-rank
# command runs with -np 4 (t = 2 x p = 2 x d = 1), and the checks of what
# depends on the rank count read the 4-rank figures (the README quotes
# both where they differ). TUTORIAL_QUICK=0 runs -np 8 as printed.
# Every other command runs as printed in both modes.
# Timing lower bounds (1 ms, 0.1 ms, 0.1 s) only say a time was measured: the
# fused attention and the vectorized exp (2026-12-06) made steps 2x faster, and
# faster CPUs will go further; upper bounds still catch a hang or a slow path.
TUTORIAL_LIB=1
. "${DT_SRCDIR:-$(dirname "$0")/../..}/tests/tutorials.sh"
# Open MPI settings of the multi-rank tests, eager messages, $MPIRUN
tut_mpi

if [ "$TUTORIAL_QUICK" = 1 ]; then
    NP=4 D=1
    echo "  (TUTORIAL_QUICK=1: the 8-rank run as -np 4, d = 1)"
else
    NP=8 D=2
fi

# 1. A refused combination: ZeRO-2 with PipeDream (4 ranks: p = 2 x d = 2).
tut_fails zero2 2 $MPIRUN -np 4 ./dtrain --pipeline-model-parallel-size 2 --pipeline-schedule pipedream --zero-stage 2 --num-layers 4
tut_line zero2 "^dtrain: --zero-stage 2 with --pipeline-schedule pipedream: not supported \(PipeDream stashes whole weight versions and updates every micro-batch; use gpipe, 1f1b, interleaved-1f1b, zb-h1 or zb-v\)$"
# one line: rank 0's (every rank refuses, rank 0 says why)
tut_range "zero2: lines starting dtrain:" "$(grep -c '^dtrain: ' zero2.out)" 1 1

# 2. The run and the serial run.
M="--bf16 --recompute-activations --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 16 --train-iters 4 --eval-interval 0 --eval-iters 2 --log-interval 1 --clip-grad 0 --threads 1"
tut_cmd run $MPIRUN -np $NP ./dtrain --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --use-distributed-optimizer --pipeline-schedule 1f1b $M --summary run-summary.json --trace run.json
tut_line run '^model: custom, 4 layers, 4 heads, width 128, context 64, vocab 256, 867072 params \(867\.1k\)$'
if [ "$D" = 2 ]; then
    tut_line run '^parallel: grid t=2 x d=2 x p=2 \(tensor, data, pipeline; rank = t_i \+ 2\*\(d_i \+ 2\*p_i\)\), schedule 1f1b, 2 micro-batches per step per pipeline$'
    tut_line run "^  ZeRO-1: each stage's \(tensor shard's\) optimizer state and FP32 masters sharded over its data-parallel group$"
    tut_line run '^  rank 0: tensor 0, data 0, stage 0$'
    tut_line run '^  rank 7: tensor 1, data 1, stage 1$'
else
    tut_line run '^parallel: grid t=2 x d=1 x p=2 \(tensor, data, pipeline; rank = t_i \+ 2\*\(d_i \+ 1\*p_i\)\), schedule 1f1b, 4 micro-batches per step per pipeline$'
    tut_line run '^  ZeRO-1: nothing to shard \(d = 1\)$'
fi
tut_line run '^precision: bf16 storage, FP32 master weights and accumulation, no loss scaling$'
tut_line run '^memory: selective activation recomputation \(attention core: its log-sum-exp\)$'
tut_line run '^iter 1/4  loss [0-9.]*  lr 3\.000e-03  grad_norm [0-9.]*  '
tut_file run.json
for r in $(seq 0 $((NP - 1))); do [ -s run.rank$r.json ] || tut_fail "run.rank$r.json missing"; done

tut_cmd serial ./dtrain --bf16 --recompute-activations --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 16 --train-iters 4 --eval-interval 0 --eval-iters 2 --log-interval 1 --clip-grad 0 --threads 1 --summary serial.json --trace prof.json
tut_file prof.json
# The losses and weights depend on how this machine rounds (the README's
# are from an AVX2 build), so the 3-D run is compared with this check's
# serial run, not with the README's digits.
# t11_loss RUN ITER: the printed loss at ITER
t11_loss() { tut_num "$1" "^iter $2\/4  loss \([0-9.]*\) .*"; }
# Iteration 1 is the forward of the same initial weights: the 3-D run adds
# its row-parallel partial products in another order (and rounds their sum
# to bf16 once), so the traced losses differ in the 6th digit (measured
# 1.0e-5 to 1.6e-5 over 5 roundings: the native and --disable-native
# builds, OpenBLAS's SkylakeX, Haswell and Sandybridge kernels), under a
# tenth of the printed 1e-4: the printed losses are at most one unit apart.
tut_range "iter 1 loss, 3-D run - serial run (printed)" "$(awk -v a="$(t11_loss run 1)" -v b="$(t11_loss serial 1)" 'BEGIN { if (a != "" && b != "") { d = a - b; printf "%.4f", d < 0 ? -d : d } }')" 0 0.0001
# and both runs train: 5.63 at step 1, 3.89 at step 4 on every build tried,
# a fall of 1.74, 1000 times the builds' spread of the step-4 loss (4e-4
# relative, 1.6e-3);
# the range asks for half of it at least
for f in run serial; do
    tut_range "$f: loss at step 1 - loss at step 4" "$(awk -v a="$(t11_loss $f 1)" -v b="$(t11_loss $f 4)" 'BEGIN { if (a != "" && b != "") printf "%.4f", a - b }')" 0.8 5
done

tut_cmd sums grep -E '"(train_loss|val_loss|param_probe)"' serial.json run-summary.json
# The 3-D run's summary against the serial run's. A row-parallel layer's
# other order of additions flips a few bf16 roundings, which 4 steps
# amplify. How far is measured, not derived: over the 5 roundings above
# (4 and 8 ranks give the same numbers) the 3-D run differed from its
# serial run by up to 4.0e-4 on the losses and 2.8e-3 on param_probe, and
# two serial runs under different roundings by up to 1.8e-4 and 3.6e-3
# (the README's AVX2 build: 1.1e-4, 1.1e-4, 2.9e-4). The tolerances are
# 10 times the largest: losses T11_LOSS = 4e-3, param_probe T11_PROBE =
# 4e-2. (tests/compose.sh holds its own, smaller model to 5e-4 and 2e-2.)
T11_LOSS=4e-3 T11_PROBE=4e-2
for k in train_loss val_loss param_probe; do
    a=$(tut_json serial.json $k); b=$(tut_json run-summary.json $k)
    tol=$T11_LOSS; [ $k = param_probe ] && tol=$T11_PROBE
    tut_range "3-D run against the serial run: $k relative difference" "$(tut_reldiff "$a" "$b")" 0 $tol
done

# 3. The merged trace.
tut_cmd flows ./dtbench flows run.json
if [ "$D" = 2 ]; then
    tut_line flows '^run\.json ranks=8 events=1584 flows=128 pairs=64 unpaired=0 early=0 judged=64 '
else
    tut_line flows '^run\.json ranks=4 events=1528 flows=128 pairs=64 unpaired=0 early=0 judged=64 '
fi
tut_line flows ' method=ping-pong$'

# 4. The breakdown.
tut_cmd an ./dtsim analyze run.json
tut_line an "^A: run\.json \(dtrain, $NP ranks\), steps 1\.\.3$"
a_step=$(awk '$1 == "A" && $2 == "mean" { print $3 }' an.out)
# The lower bound only says a step was measured at all: how fast 4 ranks'
# bf16 step runs depends on the CPU's 16-bit units (46.6 ms on CI's AMX
# machine with oneDNN, 209-349 ms under load with the rounding emulation).
tut_range "measured step, mean over ranks (ms; 214-369 here on 8 ranks, 209-349 on 4)" "$a_step" 1 2000
tut_range "compute share of the step, mean (%; 61.1 here)" "$(awk '$1 == "A" && $2 == "mean" { sub(/%/, "", $6); print $6 }' an.out)" 20 95
tut_range "stage 0's bubble, rank 0 (0.43 here)" "$(awk '$1 == "A" && $2 == "0" { print $NF }' an.out)" 0.05 0.8

# 5. The prediction.
tut_cmd sim ./dtsim run --config run.rank0.json --profile prof.json --hw sim/hw/cpu-2core.json --devices-per-node 8 --cores-per-node 2 --trace sim.json
if [ "$D" = 2 ]; then
    tut_line sim '^layout:   t=2 p=2 d=2 \(8 ranks\), schedule 1f1b, exchange ring \+ ZeRO-1, bf16, selective recomputation$'
    tut_line sim '^peak memory 7\.13 MiB \(rank 0\)$'
else
    tut_line sim '^layout:   t=2 p=2 d=1 \(4 ranks\), schedule 1f1b, exchange ring \+ ZeRO-1, bf16, selective recomputation$'
fi
tut_file sim.json
tut_cmd cmp ./dtsim analyze --compare run.json sim.json
b_step=$(awk '$1 == "B" && $2 == "mean" { print $3 }' cmp.out)
tut_range "predicted step (ms; 90-170 here on 8 ranks, 98-153 on 4)" "$b_step" 1 1000
tut_range "prediction error (%; -54 to -64 here)" "$(awk -v a="$a_step" -v b="$b_step" 'BEGIN { if (a > 0) printf "%.1f", 100 * (b - a) / a }')" -90 30
if [ -x ./dtviz ]; then
    tut_cmd viz ./dtviz run.json sim.json --view breakdown --png compose.png
    tut_file compose.png
else
    echo "./dtviz run.json sim.json --view breakdown --png compose.png" >>"$TUT_LOG"
    echo "  (this build has no dtviz: SDL2 missing; ./dtviz run.json sim.json ... not run)"
fi

tut_finish
