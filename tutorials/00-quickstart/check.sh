#!/bin/sh
# check.sh: runs tutorials/00-quickstart/README.md's commands and checks the
# outputs it quotes, within the ranges it states. Run by tests/tutorials.sh
# (make check), or alone: DT_BUILDDIR=build DT_SRCDIR=. sh check.sh
# TUTORIAL_QUICK=1 runs the first ./dtrain for 600 iterations, not 2500.
# Timing lower bounds (1 ms, 0.1 ms, 0.1 s) only say a time was measured: the
# fused attention and the vectorized exp (2026-12-06) made steps 2x faster, and
# faster CPUs will go further; upper bounds still catch a hang or a slow path.
TUTORIAL_LIB=1
. "${DT_SRCDIR:-$(dirname "$0")/../..}/tests/tutorials.sh"

# 1. The main job: 2500 iterations (600 with TUTORIAL_QUICK=1), saved in ckpt.
tut_cmd main --quick "--train-iters 600" ./dtrain --save ckpt
tut_line main '^model: tiny, 2 layers, 4 heads, width 64, context 64, vocab 256, 136960 params'
tut_line main '^data:  task add \(operands of 1\.\.2 digits\)'
tut_line main '^eval  iter [0-9]+: val_loss [0-9.]+ accuracy [0-9.]+% \(1860 examples\)'
tut_line main '^final: val_loss [0-9.]+ accuracy [0-9.]+% \(1860 examples\) tokens/s [0-9]+$'
acc=$(tut_num main '^final: .* accuracy \([0-9.]*\)%.*')
# The accuracies depend on every FP32 rounding of the run, so they are held
# to ranges of behaviour, not to the README's digits. What the ranges are
# measured against: the default seed on the builds where it was measured
# (the README's AVX-512 machine; its AVX2 machine, final accuracy only;
# ./configure and --disable-native on this project's Intel Xeon with
# AVX-512 and AMX), and, as a far larger change than any rounding,
# --seed 1, 2, 3 (2 and 3 for 2500 iterations) on the Xeon:
#   600 iterations (quick): builds 51.83-54.57%; seeds 28.38-57.66%
#   2500: builds at 500 43-48.71%, at 1000 80.81-85%, final 97.90-99.68%;
#         seeds 25.56-48.34%, 57.58-77.41%, 92.48-94.97%
#   200 (section 3): builds 13.44%, all three; seeds 9.77-15.04%
if [ "$TUTORIAL_QUICK" = 1 ]; then
    # a run that has learnt something: 20% is far above the 0% of a model
    # that cannot add, and below every seed (28.38%); the check after
    # section 3 also wants it above that 200-iteration run
    tut_range "accuracy after 600 iterations (%)" "$acc" 20 100
else
    # has learnt to add: 90% leaves 7.9 points below the lowest build
    # (97.90%) and holds for the other seeds too (92.48%); the two evals
    # leave 10 points or more either side of every build's
    tut_range "final accuracy (%)" "$acc" 90 100
    tut_range "accuracy at iteration 500 (%)" "$(tut_num main '^eval  iter 500: .* accuracy \([0-9.]*\)%.*')" 30 60
    tut_range "accuracy at iteration 1000 (%)" "$(tut_num main '^eval  iter 1000: .* accuracy \([0-9.]*\)%.*')" 70 95
    tut_range "run time (s)" "$(tut_num main '^done: 2500 iterations in \([0-9.]*\) s.*')" 0.1 300
fi
tut_range "tokens/s" "$(tut_num main '^final: .* tokens\/s \([0-9]*\)$')" 10000 1000000

# What it learned: greedy generation from the checkpoint.
tut_cmd gen ./dtrain --load ckpt --generate 4 --prompt 53+74= --temperature 0
iters=2500
[ "$TUTORIAL_QUICK" = 1 ] && iters=600
tut_line gen "^generate: ckpt/$(printf 'iter_%08d' $iters) at iteration $iters \(tiny, task add, saved by 1 rank: single process\), context 16; prompt 6 bytes; temperature 0 \(greedy\), top-k 0 \(all\), seed 1337$"
# The answer is one greedy choice per byte of a model trained through
# 2500 (600) rounding-dependent steps: the full run wrote 127 on the
# builds above (AVX2, and both of the Xeon), the quick run 126 (AVX2, the
# Xeon's native build) or 124 (its generic one); no build is promised one,
# so only its form is checked: digits.
tut_line gen '^53\+74=[0-9]+$'

# 2. A first trace.
tut_cmd trace ./dtrain --train-iters 200 --trace run.json
tut_line trace '^trace: run\.json$'
tut_line trace '^done: 200 iterations in .* peak activation memory 13.14 MiB$'
tut_file run.json
tut_line trace '^final: val_loss [0-9.]+ accuracy [0-9.]+% '
acc200=$(tut_num trace '^final: .* accuracy \([0-9.]*\)%.*')
# 200 iterations are too few to add well: 13.44% on the builds, 9.77-15.04%
# with other seeds (see above); 5-30 leaves about 5 points and more
tut_range "accuracy after 200 iterations (%)" "$acc200" 5 30
if [ "$TUTORIAL_QUICK" = 1 ]; then
    # the quick run's 600 iterations learnt more than these 200: 38.4-41.1
    # points more on the builds, 13.7-42.6 with the other seeds
    tut_range "accuracy after 600 iterations minus after 200 (points)" \
        "$(awk -v a="$acc" -v b="$acc200" 'BEGIN { printf "%.2f", a - b }')" 5 100
fi
toks=$(tut_num trace '^final: .* tokens\/s \([0-9]*\)$')
step_ms=$(awk -v t="$toks" 'BEGIN { if (t > 0) printf "%.3f", 2048 / t * 1000 }')
tut_range "measured step time 2048 / tokens/s (ms)" "$step_ms" 1 200

if [ -x ./dtviz ]; then
    tut_cmd vizl ./dtviz run.json --png last.png
    tut_file last.png
    tut_cmd viz ./dtviz run.json --zoom 0:1 --png whole.png
    tut_file whole.png
    tut_cmd vizz ./dtviz run.json --zoom 0.5:0.515 --size 1400x420 --png run.png
    tut_file run.png
else
    echo "./dtviz run.json --png last.png" >>"$TUT_LOG"
    echo "./dtviz run.json --zoom 0:1 --png whole.png" >>"$TUT_LOG"
    echo "./dtviz run.json --zoom 0.5:0.515 --size 1400x420 --png run.png" >>"$TUT_LOG"
    echo "  (this build has no dtviz: SDL2 missing; the three ./dtviz commands not run)"
fi
tut_range "evaluate spans in run.json (the grey of whole.png)" "$(grep -c '"name":"evaluate"' run.json)" 1 1
# what the caption says of run.png, from the spans it shows
tut_spans run.spans 0.5:0.515 run.json
tut_spans run-all.spans 0.5:0.515 all=1 run.json
. "${DT_SRCDIR:-$(dirname "$0")/../..}/tutorials/00-quickstart/claims.sh" # t00_steps, t00_bf
tut_range "optimizer steps wholly in run.png's window" "$(t00_steps run.spans)" 2 4
tut_range "run.png: backward / forward time of the steps it shows" "$(t00_bf run-all.spans)" 1.05 2.5

# 3. The simulator's prediction from the trace.
tut_cmd sim ./dtsim run --config run.json --profile run.json
tut_line sim '^scenario: tiny \(2 layers, width 64, 4 heads, vocab 256\), B=128 T=16 m=1 \(global batch 128\), 200 steps$'
tut_line sim '^layout:   t=1 p=1 d=1 \(1 rank\)'
tut_line sim '^step time [0-9.]+ ms \(rank 0: compute [0-9.]+, optimizer [0-9.]+, comm 0\.000 ms per step\)$'
tut_line sim '^peak memory 15.23 MiB \(rank 0\)$'
sim_ms=$(tut_num sim '^step time \([0-9.]*\) ms.*')
ratio=$(tut_ratio "$sim_ms" "$step_ms")
tut_range "predicted / measured step time" "$ratio" 0.8 1.2

# 4. The exercise's answer.
# 5. On a GPU (run only where a CUDA device is present).
tut_gpu_cmd gmain ./dtrain --device cuda
tut_gpu_cmd gtrace ./dtrain --device cuda --train-iters 200 --trace gpu.json
tut_gpu_cmd gsim ./dtsim run --config gpu.json --profile gpu.json
if tut_gpu; then
    tut_range "GPU accuracy (%)" "$(tut_num gmain '^final: .* accuracy \([0-9.]*\)%.*')" 90 100
    tut_line gsim '^step time '
fi

tut_cmd ex_sim ./dtsim run --config run.json --profile run.json --micro-batch-size 32 --global-batch-size 128
tut_line ex_sim 'B=32 T=16 m=4 \(global batch 128\)'
tut_line ex_sim '^peak memory 5.38 MiB \(rank 0\)$'
ex_ms=$(tut_num ex_sim '^step time \([0-9.]*\) ms.*')
tut_range "predicted step time, m=4 / m=1" "$(tut_ratio "$ex_ms" "$sim_ms")" 0.95 1.05
tut_cmd ex ./dtrain --train-iters 200 --micro-batch-size 32 --global-batch-size 128
tut_line ex '^batch: 128 sequences \(4 x 32 micro-batches\)'
tut_line ex 'peak activation memory 3.29 MiB$'
tut_range "tokens/s, 4 x 32 / 1 x 128" "$(tut_ratio "$(tut_num ex '^final: .* tokens\/s \([0-9]*\)$')" "$toks")" 0.7 2.5
# The accumulated gradient is the same gradient: the two runs differ only
# in the order of their FP32 sums (4 partial sums of 32 rows scaled by 1/4
# against one of 128), as in tutorial 01. From the same initial weights
# the first step's loss and grad_norm agree to a few ulps (~1e-7), far
# below a printed unit (1e-4 of 5.57, 1e-3 of 5.06): one unit, the
# rounding of the print. After 200 steps the splits 1 x 128, 2 x 64,
# 4 x 32 and 8 x 16 printed the same val_loss 1.1302 and accuracy
# 13.44% in both builds on the Xeon; allowed are 2 units of val_loss
# (one for the print, one for growth: 1.8e-4 relative) and 5 of the
# 1860 answers (0.27 points). A wrong accumulation is far outside: a loss
# not divided by 4 makes the first grad_norm 4 times larger, and a 1%
# change of --lr alone moves this val_loss by 0.0276 (1.1302 -> 1.1026)
# and the accuracy by 0.81 points.
tut_pair trace ex "iteration 1 loss" '^iter 1\/200  loss \([0-9.]*\) .*' 0.0001
tut_pair trace ex "iteration 1 grad_norm" '^iter 1\/200  .* grad_norm \([0-9.]*\) .*' 0.001
tut_pair trace ex "final val_loss" '^final: val_loss \([0-9.]*\) .*' 0.0002
tut_pair trace ex "final accuracy (points)" '^final: .* accuracy \([0-9.]*\)%.*' 0.27

tut_finish
