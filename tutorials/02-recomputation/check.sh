#!/bin/sh
# check.sh: runs tutorials/02-recomputation/README.md's commands and checks
# the outputs it quotes, within the ranges it states. Run by
# tests/tutorials.sh (make check), or alone:
# DT_BUILDDIR=build DT_SRCDIR=. sh tutorials/02-recomputation/check.sh
# TUTORIAL_QUICK=1 times 2 steps per row of `dtbench recompute` instead of 5.
# Timing lower bounds (1 ms, 0.1 ms, 0.1 s) only say a time was measured: the
# fused attention and the vectorized exp (2026-12-06) made steps 2x faster, and
# faster CPUs will go further; upper bounds still catch a hang or a slow path.
TUTORIAL_LIB=1
. "${DT_SRCDIR:-$(dirname "$0")/../..}/tests/tutorials.sh"

# 2. The memory/time table.
tut_cmd bench --quick "--steps 2" ./dtbench recompute --micro-batch-size 2 --seq-length 256
tut_line bench '^# dtbench recompute: --model small \(L=6, C=384\), B=2, T=256, 1 thread\(s\); forward \+ backward, 1 warm-up \+ '
tut_line bench '^# K = blocks per checkpointed group \(full\); sqrt\(L\) rounds down to 2$'
tut_line bench '^none +- +49410048 +1\.000 '
tut_line bench '^selective +- +49336320 +0\.999 '
tut_line bench '^full +1 +13389824 +0\.271 '
tut_line bench '^full +2 +18915328 +0\.383 '
tut_line bench '^full +6 +48881664 +0\.989 '
# the step-time ratio column (the last) of each row
brow() { awk -v g="$1" -v k="$2" '$1 == g && $2 == k { print $NF; exit }' bench.out; }
tut_range "dtbench: selective step time / none" "$(brow selective -)" 0.8 1.6
tut_range "dtbench: full K=1 step time / none" "$(brow full 1)" 0.7 3.0
tut_range "dtbench: full K=2 step time / none" "$(brow full 2)" 0.7 3.0
tut_range "dtbench: full K=6 step time / none" "$(brow full 6)" 0.7 3.0
tut_range "dtbench: none step time (ms)" "$(awk '$1 == "none" { print $5; exit }' bench.out)" 1 5000

# 3. Three real runs: none, selective, full.
tut_cmd none ./dtrain --threads 1 --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 16 --train-iters 30 --eval-interval 0 --eval-iters 1 --log-interval 10 --trace none.json --summary none-summary.json
tut_cmd sel ./dtrain --threads 1 --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 16 --train-iters 30 --eval-interval 0 --eval-iters 1 --log-interval 10 --trace sel.json --summary sel-summary.json --recompute-activations
tut_cmd full ./dtrain --threads 1 --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 16 --train-iters 30 --eval-interval 0 --eval-iters 1 --log-interval 10 --trace full.json --summary full-summary.json --recompute-granularity full --recompute-num-layers 1
tut_line sel '^memory: selective activation recomputation \(attention core: its log-sum-exp\)$'
tut_line full '^memory: full activation recomputation, checkpoint every 1 block$'
tut_line none '^done: 30 iterations in .* peak activation memory 42\.26 MiB$'
tut_line sel '^done: 30 iterations in .* peak activation memory 42\.13 MiB$'
tut_line full '^done: 30 iterations in .* peak activation memory 9\.53 MiB$'
tut_range "none-summary.json peak_activation_bytes" "$(tut_json none-summary.json peak_activation_bytes)" 44310528 44310528
tut_range "sel-summary.json peak_activation_bytes" "$(tut_json sel-summary.json peak_activation_bytes)" 44179456 44179456
tut_range "full-summary.json peak_activation_bytes" "$(tut_json full-summary.json peak_activation_bytes)" 9994240 9994240
# The losses the README quotes (5.6482 ... 1.9681, val_loss 1.9926,
# train_loss 1.96813070774078, param_probe -22.7965304784747) are the
# AVX-512 build's: every one depends on FP32 rounding (another build ends
# at train_loss 1.96812975406647), so they are not compared with this run.
# What is checked on every build: the claim of section 3 (the three modes
# agree bit for bit, below), the lines' shape, the schedule's lr (a pure
# function of the iteration in double arithmetic, lib/optim/lr.c: exact to
# the 4 printed digits everywhere) and what the losses must do.
for n in none sel full; do
    tut_line $n '^iter 1/30  loss [0-9.]+  lr 1\.000e-03  grad_norm [0-9.]+  '
    tut_line $n '^iter 30/30  loss [0-9.]+  lr 1\.098e-04  grad_norm [0-9.]+  '
    tut_line $n '^final: val_loss [0-9.]+ accuracy [0-9.]+% \(126 examples\) '
    tut_file $n.json
done
# Ranges (from none's run; sel and full are checked equal to it below),
# wide against rounding: rounding moves these numbers by ~1e-6, while the
# same run with --seed 1, 2, 3 (other weights and data, on the Intel Xeon)
# read 5.53-5.59 at iteration 1, ratios 0.35-0.36 and 0-0.81% accuracy.
# - iteration 1 is the untrained model, whose predictions over the 256
#   byte values are near uniform: loss about ln 256 = 5.545 (5.6482 in
#   the README), so 5.0-6.5;
# - the loss falls: iteration 30's is 0.348 of iteration 1's in the
#   README (1.9681 / 5.6482); at most 0.6 says it fell by 40% or more,
#   at least 0.1 (a loss near 0.56) that 30 steps have not learnt to add,
#   which the README says they cannot;
# - hence the accuracy: 0.00% (0 of 126 sums) in the README; at most 5%
#   (6 sums) leaves room for a stray right answer, far below the 13%
#   that tutorial 00 reaches after 200 steps.
l1=$(tut_num none '^iter 1\/30  loss \([0-9.]*\) .*')
l30=$(tut_num none '^iter 30\/30  loss \([0-9.]*\) .*')
tut_range "none: iteration 1 loss (untrained, about ln 256)" "$l1" 5.0 6.5
tut_range "none: iteration 30 loss / iteration 1 loss" "$(awk -v a="$l30" -v b="$l1" 'BEGIN { if (b > 0) printf "%.3f", a / b }')" 0.1 0.6
tut_range "none: final accuracy (%)" "$(tut_num none '^final: .* accuracy \([0-9.]*\)%.*')" 0 5
# the claim itself, on every build: the three modes give bit-identical
# results, so the tolerance is 0. The recomputed forward runs the same
# functions on the same inputs in the same order (one thread), so every
# rounding is the same; a mode that differed in the last bit would have
# computed something else.
for k in train_loss val_loss param_probe; do
    for n in sel full; do
        tut_range "$n-summary.json $k minus none's" "$(awk -v a="$(tut_json $n-summary.json $k)" -v b="$(tut_json none-summary.json $k)" 'BEGIN { print a - b }')" 0 0
    done
done
# every logged loss line identical (up to the tok/s and eta columns), and
# the final evaluation's (up to its tokens/s)
for n in sel full; do
    if [ "$(grep '^iter ' none.out | sed 's/  [0-9]* tok\/s.*//')" = "$(grep '^iter ' $n.out | sed 's/  [0-9]* tok\/s.*//')" ]; then
        echo "  ok: $n's iter lines equal none's"
    else
        tut_fail "$n's iter lines differ from none's"
    fi
    if [ "$(grep '^final: ' none.out | sed 's/ tokens\/s.*//')" = "$(grep '^final: ' $n.out | sed 's/ tokens\/s.*//')" ]; then
        echo "  ok: $n's final line equals none's"
    else
        tut_fail "$n's final line differs from none's"
    fi
done
# Step times of separate runs vary with the machine's load; inside one
# trace they do not: the blocks' spans summed per trace and name.
tut_cmd spans awk -F'"dur":' '/"layer":[0-7]}/ { split($2, d, ","); n = $1; sub(/.*"name":"/, "", n); sub(/".*/, "", n); ms[FILENAME " " n] += d[1] / 1000 } END { for (k in ms) printf "%s %.0f ms\n", k, ms[k] }' none.json sel.json full.json
sort spans.out
span() { awk -v k="$1 $2" '$1 " " $2 == k { print $3 }' spans.out; }
f_full=$(span full.json forward) b_full=$(span full.json backward) r_full=$(span full.json recompute)
f_sel=$(span sel.json forward) r_sel=$(span sel.json recompute)
tut_range "spans: lines" "$(wc -l <spans.out | tr -d ' ')" 8 8
tut_range "full.json: recompute / forward of the blocks" "$(tut_ratio "$r_full" "$f_full")" 0.75 1.35
tut_range "full.json: (forward + backward + recompute) / (forward + backward)" "$(tut_ratio "$((f_full + b_full + r_full))" "$((f_full + b_full))")" 1.2 1.55
tut_range "sel.json: recompute / forward of the blocks" "$(tut_ratio "$r_sel" "$f_sel")" 0.03 0.4
# the trace marks the recomputed forwards: 8 blocks x 30 steps
nre() { grep -c '"name":"recompute"' "$1"; }
tut_range "recompute spans in none.json" "$(nre none.json)" 0 0
tut_range "recompute spans in sel.json" "$(nre sel.json)" 240 240
tut_range "recompute spans in full.json" "$(nre full.json)" 240 240
# what the memory view draws: activations after each forward
actb() { sed -n 's/.*"name":"activation_bytes".*"value":\([0-9]*\)\..*/\1/p' "$1" | sort -u | tr '\n' ' ' | sed 's/ $//'; }
tut_range "none.json activation_bytes (every step)" "$(actb none.json)" 44310528 44310528
tut_range "full.json activation_bytes (every step)" "$(actb full.json)" 6299648 6299648

# 4. Look at it.
if [ -x ./dtviz ]; then
    tut_cmd viz ./dtviz none.json full.json --zoom 0.5:0.56 --png timeline.png
    tut_cmd vizm ./dtviz none.json full.json --view memory --png memory.png
    tut_file timeline.png
    tut_file memory.png
else
    echo "./dtviz none.json full.json --zoom 0.5:0.56 --png timeline.png" >>"$TUT_LOG"
    echo "./dtviz none.json full.json --view memory --png memory.png" >>"$TUT_LOG"
    echo "  (this build has no dtviz: SDL2 missing; the dtviz commands not run)"
fi
# what the text says of timeline.png: nearly two steps of each run in its
# window, and in full.json each block's recompute before its backward
tut_spans none-all.spans 0.5:0.56 all=1 none.json
tut_spans full-all.spans 0.5:0.56 all=1 full.json
. "${DT_SRCDIR:-$(dirname "$0")/../..}/tutorials/02-recomputation/claims.sh" # t02_steps, t02_late
for t02 in none full; do
    tut_range "timeline.png: mean steps in $t02.json's window" "$(t02_steps $t02-all.spans)" 1.4 2.2
done
tut_range "timeline.png: full.json's recompute spans that end after their block's backward starts" "$(t02_late full-all.spans)" 0 0

# 5. The simulator.
tut_cmd val ./dtsim validate --profile none.json none.json sel.json full.json
vrow() { awk -v n="$1" -v f="$2" '/^dp d1 ring m=1 / { if (++i == n) { print $f; exit } }' val.out; }
tut_line val '^step time: mean absolute error '
tut_range "validate: rows" "$(grep -c '^dp d1 ring m=1 ' val.out)" 3 3
tut_range "validate: none predicted / measured (its own profile)" "$(tut_ratio "$(vrow 1 7)" "$(vrow 1 5)")" 0.999 1.001
tut_range "validate: selective predicted / none predicted (not modelled)" "$(tut_ratio "$(vrow 2 7)" "$(vrow 1 7)")" 1 1
tut_range "validate: full predicted / none predicted" "$(tut_ratio "$(vrow 3 7)" "$(vrow 1 7)")" 1.2 1.5
tut_range "validate: full predicted / measured" "$(tut_ratio "$(vrow 3 7)" "$(vrow 3 5)")" 0.5 1.6
tut_range "validate: none measured step (ms)" "$(vrow 1 5)" 1 2000
tut_cmd simn ./dtsim run --config none.json --profile none.json
tut_cmd simf ./dtsim run --config full.json --profile none.json
tut_line simf '^layout:   t=1 p=1 d=1 \(1 rank\), schedule 1f1b, exchange ring, fp32, full recomputation$'
tut_line simn '^peak memory 67\.59 MiB \(rank 0\)$'
tut_line simf '^peak memory 34\.86 MiB \(rank 0\)$'

# GPU: the same three runs on a CUDA device.
tut_gpu_cmd gnone ./dtrain --device cuda --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 16 --train-iters 30 --eval-interval 0 --eval-iters 1 --log-interval 10 --summary gpu-none.json
tut_gpu_cmd gsel ./dtrain --device cuda --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 16 --train-iters 30 --eval-interval 0 --eval-iters 1 --log-interval 10 --summary gpu-sel.json --recompute-activations
tut_gpu_cmd gfull ./dtrain --device cuda --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 16 --train-iters 30 --eval-interval 0 --eval-iters 1 --log-interval 10 --summary gpu-full.json --recompute-granularity full --recompute-num-layers 1
if tut_gpu; then
    tut_line gnone 'peak activation memory 42\.26 MiB$'
    tut_line gsel 'peak activation memory 42\.13 MiB$'
    tut_line gfull 'peak activation memory 9\.53 MiB$'
    for n in sel full; do
        tut_range "GPU $n train_loss = none's" "$(tut_json gpu-$n.json train_loss)" "$(tut_json gpu-none.json train_loss)" "$(tut_json gpu-none.json train_loss)"
        tut_range "GPU $n param_probe = none's" "$(tut_json gpu-$n.json param_probe)" "$(tut_json gpu-none.json param_probe)" "$(tut_json gpu-none.json param_probe)"
    done
fi

# Exercise: the best K for 64 blocks.
for k in 1 2 3 4 8; do
    tut_cmd ex$k ./dtrain --threads 1 --num-layers 64 --micro-batch-size 16 --train-iters 1 --eval-iters 1 --recompute-granularity full --recompute-num-layers $k
done
tut_cmd ex0 ./dtrain --threads 1 --num-layers 64 --micro-batch-size 16 --train-iters 1 --eval-iters 1
tut_line ex1 'peak activation memory 4\.70 MiB$'
tut_line ex2 'peak activation memory 3\.33 MiB$'
tut_line ex3 'peak activation memory 3\.27 MiB$'
tut_line ex4 'peak activation memory 3\.59 MiB$'
tut_line ex8 'peak activation memory 5\.62 MiB$'
tut_line ex0 'peak activation memory 40\.88 MiB$'

tut_finish
