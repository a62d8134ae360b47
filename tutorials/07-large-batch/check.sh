#!/bin/sh
# check.sh: runs tutorials/07-large-batch/README.md's commands and checks
# the outputs it quotes, within the ranges it states. Run by
# tests/tutorials.sh (make check), or alone:
# DT_BUILDDIR=build DT_SRCDIR=. sh tutorials/07-large-batch/check.sh
# TUTORIAL_QUICK=1 shortens the three long runs: `dtbench largebatch` to
# --steps 200 (instead of 1600) and the two LAMB runs to 50 steps (instead
# of 200); the accuracies they print then differ from the README's, so
# those are checked only with TUTORIAL_QUICK=0.
# The losses, accuracies and trust ratios after training depend on how the
# CPU rounds FP32 (200 steps amplify a last-bit difference), so none is
# compared with the README's digits: the checks compare runs of this check
# with each other (exactly where they do the same arithmetic) and test the
# README's claims as inequalities between them. The margins below come
# from the full runs under up to 5 roundings: the README's AVX-512 build,
# its AVX2 build (the figures it quotes) and, on an Intel Xeon (AMX), the
# native and --disable-native builds and the native one with OpenBLAS's
# Haswell kernel (OPENBLAS_CORETYPE).
# Timing lower bounds (1 ms, 0.1 ms, 0.1 s) only say a time was measured: the
# fused attention and the vectorized exp (2026-12-06) made steps 2x faster, and
# faster CPUs will go further; upper bounds still catch a hang or a slow path.
TUTORIAL_LIB=1
. "${DT_SRCDIR:-$(dirname "$0")/../..}/tests/tutorials.sh"

full() { [ "$TUTORIAL_QUICK" != 1 ]; }

# 2. A batch of 512 on one CPU: 8 accumulated micro-batches of 64, LAMB.
tut_cmd lamb --quick "--train-iters 50" ./dtrain --threads 1 --optimizer lamb --micro-batch-size 64 --global-batch-size 512 --train-iters 200 --lr-scaling linear --base-batch-size 64 --log-interval 50 --trace lamb.json --summary lamb-summary.json
tut_line lamb '^batch: 512 sequences \(8 x 64 micro-batches\), 8192 tokens per step, '
tut_line lamb '^optim: lamb \(beta1 0\.9, beta2 0\.95, eps 1e-08, phi clipped to \[0, 10\]\), lr 0\.003 -> 0\.0001 cosine over '
tut_line lamb '^lr scaling: linear, global batch 512 / base 64 = x8: effective lr 0\.024 -> 0\.0008$'
tut_line lamb '^iter 1/[0-9]*  loss [0-9.]*  lr '
tut_file lamb.json
if full; then
    tut_line lamb '^optim: .* cosine over 200 iters, warmup 20, weight decay 0\.1, clip 1$'
    tut_line lamb '^iter 1/200  loss [0-9.]*  lr 1\.200e-03  grad_norm [0-9.]*  '
    tut_line lamb '^final: val_loss [0-9.]* accuracy [0-9.]*% \(7443 examples\) '
fi
lamb_s=$(tut_num lamb '^done: [0-9]* iterations in [0-9.]* s (\([0-9.]*\) s training).*')
lamb_it=$(tut_num lamb '^done: \([0-9]*\) iterations .*')
lamb_ms=$(awk -v s="$lamb_s" -v n="$lamb_it" 'BEGIN { if (n > 0) printf "%.1f", 1000 * s / n }')
tut_range "LAMB run: ms per step of 512 (training time / steps)" "$lamb_ms" 1 2000

# 3. The table.
tut_cmd bench --quick "--steps 200" ./dtbench largebatch
tut_line bench '^# base batch 64 for [0-9]* iterations, 8x batch for [0-9]* iterations \(warm-up 10%, cosine decay\)$'
tut_line bench '^optim +batch +iters +scaling +peak_lr +val_loss +accuracy +seconds$'
tut_line bench '^adamw +64 +[0-9]+ none +0\.003 '
tut_line bench '^adamw +512 +[0-9]+ linear +0\.024 '
tut_line bench '^adamw +512 +[0-9]+ sqrt +0\.008485 '
tut_line bench '^lars +512 +[0-9]+ linear +16 '
tut_line bench '^lamb +512 +[0-9]+ linear +0\.024 '
tut_line bench '^lamb +512 +[0-9]+ sqrt +0\.008485 '
# COLUMN OPTIM BATCH SCALING: val_loss (6) or accuracy (7, without %) of a row
row() { awk -v c="$1" -v o="$2" -v b="$3" -v s="$4" '$1 == o && $2 == b && $4 == s { v = $c; sub(/%$/, "", v); print v; exit }' bench.out; }
# at least DIFF: A - B >= LO
t07_gap() { tut_range "$1" "$(awk -v a="$2" -v b="$3" 'BEGIN { if (a != "" && b != "") printf "%.4f", a - b }')" "$4" 1000; }
if full; then
    tut_line bench '^# dtbench largebatch: tiny GPT on 2-digit addition \(the dtrain defaults\), 102400 samples per run;$'
    # The lamb linear row is section 2's run: the same training in one
    # process, one thread, the same arithmetic: the same digits.
    tut_range "lamb linear row - section 2's run: val_loss" "$(awk -v a="$(row 6 lamb 512 linear)" -v b="$(tut_num lamb '^final: val_loss \([0-9.]*\) .*')" 'BEGIN { if (a != "" && b != "") print (a == b ? 0 : 1) }')" 0 0
    tut_range "lamb linear row - section 2's run: accuracy" "$(awk -v a="$(row 7 lamb 512 linear)" -v b="$(tut_num lamb '^final: .* accuracy \([0-9.]*\)% .*')" 'BEGIN { if (a != "" && b != "") print (a == b ? 0 : 1) }')" 0 0
    # The README's claims, as inequalities; over the 4 roundings with a
    # whole table (all but the AVX2 build) the rows
    # moved by up to 8.4 points of accuracy (adamw linear: 3.45-11.88%) and
    # 0.17 of val_loss (adamw linear: 1.28-1.45), so each margin asked is
    # well below the smallest gap measured and above that spread.
    # nothing at 512 comes near the base batch: measured 90.7-92.3% against
    # 25.9% at most (a gap of 65 points at least); asked: 30
    for r in "adamw linear" "adamw sqrt" "lars linear" "lamb linear" "lamb sqrt"; do
        set -- $r
        t07_gap "accuracy, adamw 64 - $1 512 $2 (points)" "$(row 7 adamw 64 none)" "$(row 7 $1 512 $2)" 30
    done
    # AdamW: x8 (linear) worse than x sqrt(8): val_loss 0.37-0.55 higher; asked: 0.1
    t07_gap "val_loss, adamw 512 linear - sqrt" "$(row 6 adamw 512 linear)" "$(row 6 adamw 512 sqrt)" 0.1
    # LAMB wants the large rate: sqrt 0.65-0.67 higher than linear; asked: 0.2
    t07_gap "val_loss, lamb 512 sqrt - linear" "$(row 6 lamb 512 sqrt)" "$(row 6 lamb 512 linear)" 0.2
    # LARS does not learn the task: its val_loss the highest of the six
    # (2.139 against 1.67 at most: a gap of 0.47; asked: 0.1), its accuracy
    # 0.00% on every build (asked: under 1%, at most 74 of 7443 answers)
    for r in "adamw 64 none" "adamw 512 linear" "adamw 512 sqrt" "lamb 512 linear" "lamb 512 sqrt"; do
        set -- $r
        t07_gap "val_loss, lars 512 linear - $1 $2 $3" "$(row 6 lars 512 linear)" "$(row 6 $1 $2 $3)" 0.1
    done
    tut_range "lars 512 linear: accuracy (%)" "$(row 7 lars 512 linear)" 0 1
fi
# the seconds column: equal samples take about equal time on one CPU
secs() { awk -v o="$1" -v b="$2" -v s="$3" '$1 == o && $2 == b && $4 == s { print $NF; exit }' bench.out; }
tut_range "dtbench: seconds, lamb 512 linear / adamw 64" "$(tut_ratio "$(secs lamb 512 linear)" "$(secs adamw 64 none)")" 0.5 2.0

# 4. The trust ratios in the trace.
tut_cmd trust awk -F'"' '/"trust\// { v = $0; sub(/.*"value":/, "", v); sub(/}.*/, "", v); if (!($4 in first)) first[$4] = v; last[$4] = v } END { for (k in first) printf "%-20s %8.4f %8.4f\n", k, first[k], last[k] }' lamb.json
sort trust.out
tut_range "trust: tensors" "$(wc -l <trust.out | tr -d ' ')" 11 11
# Step 1's ratio is ||w|| / sqrt(entries the gradient touches), the
# initial weights' root mean square: the README derives it from the
# initialisation (std 0.02; 0.02/sqrt(2L) = 0.01 for the output
# projections; wpe 0.02 sqrt(64/16), 16 of 64 positions used; wte
# 0.02 sqrt(256/13), 13 byte values in the task). A sample of n entries
# has an RMS within about 1/sqrt(2n) of the std: 1.1% for the smallest
# matrix (4096), 2.5% for wte's 13 x 64 touched entries; rounding moves it
# by ~1e-6. Each is checked within 5% of the formula.
# NAME FORMULA: step 1's ratio of NAME / FORMULA
t07_first() { awk -v n="$1" -v f="$2" '$1 == n { printf "%.4f", $2 / f }' trust.out; }
tut_range "trust/h.0.qkv.w at step 1 / 0.02" "$(t07_first trust/h.0.qkv.w 0.02)" 0.95 1.05
tut_range "trust/lm_head.w at step 1 / 0.02" "$(t07_first trust/lm_head.w 0.02)" 0.95 1.05
tut_range "trust/h.0.attproj.w at step 1 / 0.01" "$(t07_first trust/h.0.attproj.w 0.01)" 0.95 1.05
tut_range "trust/wpe at step 1 / 0.02 sqrt(64/16)" "$(t07_first trust/wpe 0.04)" 0.95 1.05
tut_range "trust/wte at step 1 / 0.02 sqrt(256/13)" "$(t07_first trust/wte "$(awk 'BEGIN { print 0.02 * sqrt(256 / 13) }')")" 0.95 1.05
if full; then
    # By step 200 every ratio has grown (4.2 to 65 times over the 5
    # roundings; asked: 2), and lm_head.w's is the largest, 20-24 times
    # h.0.attproj.w's on the 4 roundings that show both (asked: the largest
    # of the 11, and at least 5 times).
    tut_range "trust: last / first, the smallest over the tensors" "$(awk '{ r = $3 / $2; if (NR == 1 || r < m) m = r } END { printf "%.2f", m }' trust.out)" 2 1000
    tut_range "trust: the tensor with the largest last ratio" "$(sort -k3,3g trust.out | tail -n 1 | awk '{ print ($1 == "trust/lm_head.w") }')" 1 1
    tut_range "trust: lm_head.w / h.0.attproj.w at step 200" "$(awk '$1 == "trust/lm_head.w" { a = $3 } $1 == "trust/h.0.attproj.w" { b = $3 } END { if (b > 0) printf "%.2f", a / b }' trust.out)" 5 1000
fi
tut_range "trust: steps traced per tensor" "$(grep -c '"trust/wte"' lamb.json)" "$lamb_it" "$lamb_it"

# 5. The simulator: time per sample at 64, at 512 by accumulation, at 512 over 8 ranks.
tut_cmd sim512 ./dtsim run --config lamb.json --profile lamb.json
tut_cmd sim64 ./dtsim run --config lamb.json --profile lamb.json --global-batch-size 64
tut_cmd simdp ./dtsim run --config lamb.json --profile lamb.json --data-parallel-size 8 --global-batch-size 512
tut_line sim512 '^scenario: tiny \(2 layers, width 64, 4 heads, vocab 256\), B=64 T=16 m=8 \(global batch 512\), '
tut_line sim64 '^scenario: tiny \(2 layers, width 64, 4 heads, vocab 256\), B=64 T=16 m=1 \(global batch 64\), '
tut_line simdp '^scenario: tiny \(2 layers, width 64, 4 heads, vocab 256\), B=64 T=16 m=1 \(global batch 512\), '
tut_line simdp '^layout:   t=1 p=1 d=8 \(8 ranks\), schedule 1f1b, exchange ring, fp32$'
st() { tut_num "$1" '^step time \([0-9.]*\) ms.*'; }
s512=$(st sim512) s64=$(st sim64) sdp=$(st simdp)
tut_range "predicted step, 512 accumulated / 64" "$(tut_ratio "$s512" "$s64")" 6.5 8.5
tut_range "predicted step, 512 over 8 ranks / 64" "$(tut_ratio "$sdp" "$s64")" 1.0 1.3
tut_range "predicted / measured step of 512 (accumulated)" "$(tut_ratio "$s512" "$lamb_ms")" 0.6 1.5

# 6. GPU.
tut_gpu_cmd glamb ./dtrain --device cuda --optimizer lamb --micro-batch-size 64 --global-batch-size 512 --train-iters 200 --lr-scaling linear --base-batch-size 64 --log-interval 50 --summary gpu-lamb.json
if tut_gpu && full; then
    # against section 2's CPU run: the GPU rounds every op otherwise, as a
    # build does; the CPU's val_loss spread over the 5 roundings was 1.7%
    # (0.9977-1.0148): 15% allows about 10 times that and still tells LAMB
    # at the linear rate (1.0) from the sqrt rate (1.67)
    tut_range "GPU LAMB val_loss against the CPU run's: relative difference" "$(tut_reldiff "$(tut_json gpu-lamb.json val_loss)" "$(tut_json lamb-summary.json val_loss)")" 0 0.15
fi

# Exercise: LAMB at twice the linear rule's LR.
tut_cmd ex --quick "--train-iters 50" ./dtrain --threads 1 --optimizer lamb --lr 0.006 --micro-batch-size 64 --global-batch-size 512 --train-iters 200 --lr-scaling linear --base-batch-size 64 --log-interval 50
tut_line ex '^lr scaling: linear, global batch 512 / base 64 = x8: effective lr 0\.048 -> 0\.0008$'
# Before the first update the lr plays no part: the exercise's iter 1 loss
# and grad_norm are section 2's, the same arithmetic, the same digits.
for f in loss grad_norm; do
    tut_range "iter 1 $f: exercise - section 2 (the same arithmetic)" "$(awk -v a="$(tut_num ex "^iter 1\/.* $f \([0-9.]*\) .*")" -v b="$(tut_num lamb "^iter 1\/.* $f \([0-9.]*\) .*")" 'BEGIN { if (a != "" && b != "") print (a == b ? 0 : 1) }')" 0 0
done
if full; then
    # "a lower val_loss than at 0.024": 0.86-0.97 times over the 5
    # roundings (the accuracy is not always higher: see the README)
    vl() { tut_num "$1" '^final: val_loss \([0-9.]*\) .*'; }
    tut_range "exercise: val_loss at lr 0.048 / at 0.024" "$(tut_ratio "$(vl ex)" "$(vl lamb)")" 0 0.999
fi

tut_finish
