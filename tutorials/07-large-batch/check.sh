#!/bin/sh
# check.sh: runs tutorials/07-large-batch/README.md's commands and checks
# the outputs it quotes, within the ranges it states. Run by
# tests/tutorials.sh (make check), or alone:
# DT_BUILDDIR=build DT_SRCDIR=. sh tutorials/07-large-batch/check.sh
# TUTORIAL_QUICK=1 shortens the three long runs: `dtbench largebatch` to
# --steps 200 (instead of 1600) and the two LAMB runs to 50 steps (instead
# of 200); the accuracies they print then differ from the README's, so
# those are checked exactly only with TUTORIAL_QUICK=0.
TUTORIAL_LIB=1
. "${DT_SRCDIR:-$(dirname "$0")/../..}/tests/tutorials.sh"

full() { [ "$TUTORIAL_QUICK" != 1 ]; }

# 2. A batch of 512 on one CPU: 8 accumulated micro-batches of 64, LAMB.
tut_cmd lamb --quick "--train-iters 50" ./dtrain --threads 1 --optimizer lamb --micro-batch-size 64 --global-batch-size 512 --train-iters 200 --lr-scaling linear --base-batch-size 64 --log-interval 50 --trace lamb.json --summary lamb-summary.json
tut_line lamb '^batch: 512 sequences \(8 x 64 micro-batches\), 8192 tokens per step, '
tut_line lamb '^optim: lamb \(beta1 0\.9, beta2 0\.95, eps 1e-08, phi clipped to \[0, 10\]\), lr 0\.003 -> 0\.0001 cosine over '
tut_line lamb '^lr scaling: linear, global batch 512 / base 64 = x8: effective lr 0\.024 -> 0\.0008$'
tut_line lamb '^iter 1/[0-9]*  loss 5\.5694  lr '
tut_file lamb.json
if full; then
    tut_line lamb '^optim: .* cosine over 200 iters, warmup 20, weight decay 0\.1, clip 1$'
    tut_line lamb '^iter 1/200  loss 5\.5694  lr 1\.200e-03  grad_norm 5\.053  '
    tut_ref tut_line lamb '^iter 200/200  loss 0\.9512  lr 8\.018e-04  grad_norm 1\.394  '
    tut_ref tut_line lamb '^final: val_loss 1\.0148 accuracy 21\.38% \(7443 examples\) '
fi
lamb_s=$(tut_num lamb '^done: [0-9]* iterations in [0-9.]* s (\([0-9.]*\) s training).*')
lamb_it=$(tut_num lamb '^done: \([0-9]*\) iterations .*')
lamb_ms=$(awk -v s="$lamb_s" -v n="$lamb_it" 'BEGIN { if (n > 0) printf "%.1f", 1000 * s / n }')
tut_range "LAMB run: ms per step of 512 (training time / steps)" "$lamb_ms" 50 2000

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
if full; then
    tut_line bench '^# dtbench largebatch: tiny GPT on 2-digit addition \(the dtrain defaults\), 102400 samples per run;$'
    tut_ref tut_line bench '^adamw +64 +1600 none +0\.003 +0\.0931 +90\.66% '
    tut_ref tut_line bench '^adamw +512 +200 linear +0\.024 +1\.2836 +6\.83% '
    tut_ref tut_line bench '^adamw +512 +200 sqrt +0\.008485 +0\.8443 +25\.76% '
    tut_ref tut_line bench '^lars +512 +200 linear +16 +2\.1394 +0\.00% '
    tut_ref tut_line bench '^lamb +512 +200 linear +0\.024 +1\.0148 +21\.38% '
    tut_ref tut_line bench '^lamb +512 +200 sqrt +0\.008485 +1\.6696 +0\.59% '
fi
# the seconds column: equal samples take about equal time on one CPU
secs() { awk -v o="$1" -v b="$2" -v s="$3" '$1 == o && $2 == b && $4 == s { print $NF; exit }' bench.out; }
tut_range "dtbench: seconds, lamb 512 linear / adamw 64" "$(tut_ratio "$(secs lamb 512 linear)" "$(secs adamw 64 none)")" 0.5 2.0

# 4. The trust ratios in the trace.
tut_cmd trust awk -F'"' '/"trust\// { v = $0; sub(/.*"value":/, "", v); sub(/}.*/, "", v); if (!($4 in first)) first[$4] = v; last[$4] = v } END { for (k in first) printf "%-20s %8.4f %8.4f\n", k, first[k], last[k] }' lamb.json
sort trust.out
tut_range "trust: tensors" "$(wc -l <trust.out | tr -d ' ')" 11 11
tut_line trust '^trust/h\.0\.qkv\.w +0\.0201 '
tut_line trust '^trust/h\.0\.attproj\.w +0\.0099 '
tut_line trust '^trust/wte +0\.0890 '
tut_line trust '^trust/wpe +0\.0403 '
if full; then
    tut_ref tut_line trust '^trust/h\.0\.qkv\.w +0\.0201 +0\.1168$'
    tut_ref tut_line trust '^trust/h\.0\.attproj\.w +0\.0099 +0\.0506$'
    tut_ref tut_line trust '^trust/lm_head\.w +0\.0201 +1\.0216$'
    tut_ref tut_line trust '^trust/wte +0\.0890 +0\.4464$'
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
    tut_range "GPU LAMB val_loss (CPU 1.0148)" "$(tut_json gpu-lamb.json val_loss)" 0.95 1.08
fi

# Exercise: LAMB at twice the linear rule's LR.
tut_cmd ex --quick "--train-iters 50" ./dtrain --threads 1 --optimizer lamb --lr 0.006 --micro-batch-size 64 --global-batch-size 512 --train-iters 200 --lr-scaling linear --base-batch-size 64 --log-interval 50
tut_line ex '^lr scaling: linear, global batch 512 / base 64 = x8: effective lr 0\.048 -> 0\.0008$'
if full; then
    tut_ref tut_line ex '^final: val_loss 0\.8706 accuracy 24\.86% \(7443 examples\) '
    vl() { tut_num "$1" '^final: val_loss \([0-9.]*\) .*'; }
    tut_range "exercise: val_loss at lr 0.048 / at 0.024" "$(tut_ratio "$(vl ex)" "$(vl lamb)")" 0 0.99
fi

tut_finish
