#!/bin/sh
# check.sh: runs tutorials/03-mixed-precision/README.md's commands and
# checks the outputs it quotes, within the ranges it states. Run by
# tests/tutorials.sh (make check), or alone:
# DT_BUILDDIR=build DT_SRCDIR=. sh tutorials/03-mixed-precision/check.sh
# TUTORIAL_QUICK=1 runs `dtbench amp` with --steps 100 (not 1000) and the
# three runs of section 5 for 100 iterations (not 500).
TUTORIAL_LIB=1
. "${DT_SRCDIR:-$(dirname "$0")/../..}/tests/tutorials.sh"

# (the top-level keys come before "config")
# count NAME ERE: lines of NAME.out matching ERE
count() { grep -c -E -- "$2" "$1.out"; }
# viz NAME TRACE ARGS...: the README's dtviz command, where this build has dtviz
viz() {
    name=$1
    shift
    if [ -x ./dtviz ]; then
        tut_cmd "$name" ./dtviz "$@"
    else
        echo "./dtviz $*" >>"$TUT_LOG"
        echo "  (this build has no dtviz: SDL2 missing; ./dtviz $* not run)"
    fi
}

# 2. Underflow: dtbench amp (quick: 100 FP32 steps before the second measurement).
tut_cmd amp --quick "--steps 100" ./dtbench amp
tut_line amp '^# initial: 118336 parameter gradients non-zero in FP32, 142 \(0\.120%\) below 2\^-25 \(round to 0 in fp16\)$'
tut_ref tut_line amp '^initial +fp16 +1 +12 +0\.0101% +0\.000416$'
tut_ref tut_line amp '^initial +fp16 +256 +2 +0\.0017% +0\.000365$'
tut_ref tut_line amp '^initial +fp16 +65536 +0 +0\.0000% +0\.000365$'
tut_line amp '^initial +bf16 +1 +0 +0\.0000% +0\.00337$'
if [ "$TUTORIAL_QUICK" = 1 ]; then
    w=step100
else
    w=step1000
    tut_ref tut_line amp '^# step1000: 118336 parameter gradients non-zero in FP32, 6637 \(5\.609%\) below 2\^-25 '
    tut_ref tut_line amp '^step1000 +fp16 +1 +15753 +13\.3121% +0\.00653$'
    tut_ref tut_line amp '^step1000 +fp16 +256 +24 +0\.0203% +0\.0065$'
    tut_ref tut_line amp '^step1000 +fp16 +65536 +0 +0\.0000% +0\.00654$'
    tut_ref tut_line amp '^step1000 +bf16 +1 +0 +0\.0000% +0\.137$'
fi
u1=$(tut_num amp "^$w  *fp16  *1  *\([0-9]*\) .*")
u256=$(tut_num amp "^$w  *fp16  *256  *\([0-9]*\) .*")
u64k=$(tut_num amp "^$w  *fp16  *65536  *\([0-9]*\) .*")
ub=$(tut_num amp "^$w  *bf16  *1  *\([0-9]*\) .*")
tut_range "$w: fp16 underflows at scale 1 minus at scale 256" "$(awk -v a="$u1" -v b="$u256" 'BEGIN { print a - b }')" 1 1000000
tut_range "$w: fp16 underflows at scale 65536" "$u64k" 0 0
tut_range "$w: bf16 underflows" "$ub" 0 0
# bf16's rounding error above fp16's (at the scale where fp16 loses nothing):
# 21x on the READMEs' build, 5x on an AVX2 one (the weights after 1000 steps differ)
eb=$(tut_num amp "^$w  *bf16  *1 .* \([0-9.]*\)$")
e64k=$(tut_num amp "^$w  *fp16  *65536 .* \([0-9.]*\)$")
tut_range "$w: bf16's rel_l2_error / fp16's at 65536" "$(tut_ratio "$eb" "$e64k")" 2 50

# 3. Loss scaling: static, then dynamic from a scale far too high.
tut_cmd st1k ./dtrain --threads 1 --fp16 --loss-scale 1024 --train-iters 150 --eval-interval 0 --micro-batch-size 16 --global-batch-size 16
tut_line st1k '^precision: fp16 storage, FP32 master weights and accumulation, static loss scale 1024$'
tut_range "static 1024: overflow lines" "$(count st1k '^overflow: ')" 0 0
tut_line st1k '^final: val_loss 1\.4691 accuracy 3\.36% \(238 examples\) '
tut_line st1k '^iter 100/150  loss [0-9.]+  lr 1\.007e-03  '
tut_cmd st1m ./dtrain --threads 1 --fp16 --loss-scale 1048576 --train-iters 150 --eval-interval 0 --micro-batch-size 16 --global-batch-size 16
tut_range "static 2^20: overflow lines (every step)" "$(count st1m '^overflow: iteration [0-9]+ skipped at loss scale 1\.04858e\+06 ')" 150 150
tut_line st1m '^iter 100/150  loss 5\.5792  lr 2\.000e-04  grad_norm 0\.000  scale 1\.04858e\+06 skipped 100  '
tut_line st1m '^final: val_loss 5\.5739 accuracy 0\.00% \(238 examples\) '

tut_cmd dyn ./dtrain --threads 1 --fp16 --initial-loss-scale 1048576 --loss-scale-window 20 --train-iters 150 --eval-interval 0 --micro-batch-size 16 --global-batch-size 16 --trace fp16.json
tut_line dyn '^precision: fp16 storage, FP32 master weights and accumulation, dynamic loss scale from 1\.04858e\+06 \(window 20, hysteresis 2, min 1\)$'
tut_line dyn '^overflow: iteration 1 skipped at loss scale 1\.04858e\+06 \(first inf/NaN gradient: lm_head\.w\)$'
tut_line dyn '^overflow: iteration 2 skipped at loss scale 1\.04858e\+06 \(first inf/NaN gradient: lm_head\.w\)$'
tut_line dyn '^overflow: iteration 3 skipped at loss scale 524288 \(first inf/NaN gradient: lm_head\.w\)$'
tut_line dyn '^overflow: iteration 4 skipped at loss scale 262144 \(first inf/NaN gradient: lm_head\.w\)$'
tut_line dyn '^overflow: iteration 5 skipped at loss scale 131072 \(first inf/NaN gradient: h\.1\.fcproj\.b\)$'
tut_ref tut_line dyn '^overflow: iteration 64 skipped at loss scale 262144 \(first inf/NaN gradient: lm_head\.w\)$'
tut_ref tut_line dyn '^overflow: iteration 65 skipped at loss scale 262144 \(first inf/NaN gradient: lm_head\.w\)$'
tut_ref tut_line dyn '^overflow: iteration 80 skipped at loss scale 131072 \(first inf/NaN gradient: wte\)$'
tut_ref tut_line dyn '^overflow: iteration 121 skipped at loss scale 262144 \(first inf/NaN gradient: lm_head\.w\)$'
tut_ref tut_line dyn '^overflow: iteration 131 skipped at loss scale 262144 \(first inf/NaN gradient: wte\)$'
tut_ref tut_line dyn '^overflow: iteration 133 skipped at loss scale 131072 \(first inf/NaN gradient: wpe\)$'
tut_line dyn '^iter 1/150  loss 5\.5856  lr 2\.000e-04  grad_norm 0\.000  scale 1\.04858e\+06 skipped 1  '
tut_ref tut_range "dynamic from 2^20: overflow lines" "$(count dyn '^overflow: ')" 11 11
tut_ref tut_line dyn '^iter 100/150  loss 1\.5747  lr 1\.265e-03  grad_norm 1\.133  scale 65536 skipped 8  '
tut_ref tut_line dyn '^final: val_loss 1\.4818 accuracy 2\.94% \(238 examples\) '
tut_file fp16.json
viz scale fp16.json --view scale --png scale.png
# the picture's triangles: the trace's overflow events
tut_ref tut_range "fp16.json: overflow events (the picture's triangles)" "$(grep -c '"name":"overflow ' fp16.json)" 11 11

# 4. A collapsing loss scale: lr 0.5 without clipping.
tut_cmd col ./dtrain --threads 1 --fp16 --lr 0.5 --clip-grad 0 --train-iters 200 --eval-interval 0 --micro-batch-size 16 --global-batch-size 16 --log-interval 25 --trace collapse.json --summary collapse-summary.json
tut_ref tut_line col '^overflow: iteration 38 skipped at loss scale 16384 \(first inf/NaN gradient: lm_head\.w\)$'
tut_ref tut_line col '^overflow: iteration 51 skipped at loss scale 2 \(first inf/NaN gradient: lm_head\.w\)$'
tut_ref tut_line col '^dtrain: warning: the loss scale is at its minimum \(1\) and gradients still overflow \(iteration [0-9]+, first in lm_head\.w\): fp16 cannot hold them; lower --lr, check the data, or use --bf16$'
tut_ref tut_line col '^iter 200/200  loss [0-9.]+  lr 4\.926e-01  grad_norm 0\.000  scale 1 skipped [0-9]+  '
tut_file collapse-summary.json
tut_ref tut_range "collapse: final loss_scale" "$(tut_json collapse-summary.json loss_scale)" 1 1
cs=$(tut_json collapse-summary.json skipped_steps)
tut_ref tut_range "collapse: skipped_steps (166 here)" "$cs" 100 200
tut_ref tut_range "collapse: loss_scale_backoffs (16 here)" "$(tut_json collapse-summary.json loss_scale_backoffs)" 16 16
tut_ref tut_range "collapse: loss_scale_at_min_overflows (149 here)" "$(tut_json collapse-summary.json loss_scale_at_min_overflows)" 100 200
tut_ref tut_range "collapse: val_loss (9.2000 here)" "$(tut_num col '^final: val_loss \([0-9.]*\) .*')" 5 20
viz colviz collapse.json --view scale --png collapse.png
tut_cmd col32 ./dtrain --threads 1 --lr 0.5 --clip-grad 0 --train-iters 200 --eval-interval 0 --micro-batch-size 16 --global-batch-size 16 --log-interval 25
tut_cmd colbf ./dtrain --threads 1 --bf16 --lr 0.5 --clip-grad 0 --train-iters 200 --eval-interval 0 --micro-batch-size 16 --global-batch-size 16 --log-interval 25
tut_ref tut_line col32 '^final: val_loss 2\.0728 accuracy 0\.00% \(238 examples\) '
tut_ref tut_line colbf '^final: val_loss 2\.0735 accuracy 0\.00% \(238 examples\) '
tut_range "lr 0.5, FP32: val_loss" "$(tut_num col32 '^final: val_loss \([0-9.]*\) .*')" 1.5 2.5
tut_range "lr 0.5, bf16: val_loss" "$(tut_num colbf '^final: val_loss \([0-9.]*\) .*')" 1.5 2.5
tut_ref tut_line col32 '^iter 25/200  loss 9\.8107  lr 4\.994e-01  grad_norm 16\.240  '
tut_cmd collr ./dtrain --threads 1 --fp16 --lr 0.05 --clip-grad 0 --train-iters 200 --eval-interval 0 --micro-batch-size 16 --global-batch-size 16 --log-interval 25
tut_ref tut_line collr '^iter 200/200  loss 1\.8572  lr 1\.608e-04  grad_norm 1\.295  scale 16384 skipped 3  '
tut_ref tut_line collr '^final: val_loss 1\.8685 accuracy 0\.00% \(238 examples\) '

# FP32's own NaN reporting, and --skip-nonfinite.
tut_fails nan 1 ./dtrain --threads 1 --lr 1e30 --clip-grad 0 --optimizer sgd --train-iters 5 --eval-interval 0 --micro-batch-size 16 --global-batch-size 16
tut_line nan '^dtrain: iteration 2: training loss is -?nan; forward: the output of layer h\.0 \(block 0 of 2\) is the first non-finite \(micro-batch 0\) \(diverged; try a lower --lr or --clip-grad, or --skip-nonfinite\)$'
tut_cmd nanskip ./dtrain --threads 1 --lr 1e30 --clip-grad 0 --optimizer sgd --train-iters 5 --eval-interval 0 --micro-batch-size 16 --global-batch-size 16 --skip-nonfinite
tut_line nanskip '^nonfinite: iteration 2 skipped \(forward: the output of layer h\.0 \(block 0 of 2\) is the first non-finite \(micro-batch 0\)\); 1 skipped so far$'
tut_line nanskip '^nonfinite: iteration 5 skipped \(.*\); 4 skipped so far$'
tut_fails nanfp16 2 ./dtrain --fp16 --skip-nonfinite
tut_line nanfp16 '^dtrain: --skip-nonfinite applies to FP32 training \(with --fp16 the loss scaler skips overflowing steps; --bf16: not supported\)$'

# 5. FP32, bf16 and fp16 on the same run (quick: 100 iterations, not 500).
for p in fp32 bf16 fp16; do
    case $p in fp32) f= ;; *) f=--$p ;; esac
    # shellcheck disable=SC2086 # $f is empty for FP32
    tut_cmd "cmp_$p" --quick "--train-iters 100" ./dtrain --threads 1 $f --train-iters 500 --eval-interval 0 --summary "$p-summary.json"
    tut_file "$p-summary.json"
done
tut_line cmp_bf16 '^precision: bf16 storage, FP32 master weights and accumulation, no loss scaling$'
if [ "$TUTORIAL_QUICK" = 1 ]; then lo=1.0 hi=2.2 alo=0 ahi=10; else lo=0.45 hi=0.85 alo=30 ahi=65; fi
for p in fp32 bf16 fp16; do
    tut_range "$p: val_loss" "$(tut_json "$p-summary.json" val_loss)" $lo $hi
    tut_range "$p: accuracy (%)" "$(awk -v a="$(tut_json "$p-summary.json" accuracy)" 'BEGIN { printf "%.2f", 100 * a }')" $alo $ahi
done
d=$(awk -v a="$(tut_json bf16-summary.json val_loss)" -v b="$(tut_json fp32-summary.json val_loss)" 'BEGIN { printf "%.4f", a - b }')
tut_range "val_loss, bf16 minus FP32" "$d" -0.1 0.1
d=$(awk -v a="$(tut_json fp16-summary.json val_loss)" -v b="$(tut_json fp32-summary.json val_loss)" 'BEGIN { printf "%.4f", a - b }')
tut_range "val_loss, fp16 minus FP32" "$d" -0.1 0.1
tut_range "fp16: skipped_steps (2 here)" "$(tut_json fp16-summary.json skipped_steps)" 0 10
tut_range "bf16: skipped_steps" "$(tut_json bf16-summary.json skipped_steps)" 0 0
tut_line cmp_fp32 'peak activation memory 20\.08 MiB$'
tut_line cmp_bf16 'peak activation memory 18\.34 MiB$'
tut_line cmp_fp16 'peak activation memory 18\.34 MiB$'
if [ "$TUTORIAL_QUICK" != 1 ]; then
    tut_ref tut_line cmp_fp32 '^final: val_loss 0\.6091 accuracy 48\.12% \(1860 examples\) '
    tut_ref tut_line cmp_bf16 '^final: val_loss 0\.5786 accuracy 51\.45% \(1860 examples\) '
    tut_ref tut_line cmp_fp16 '^final: val_loss 0\.6553 accuracy 42\.20% \(1860 examples\) '
    tut_line cmp_fp16 '^iter 500/500  loss [0-9.]+  lr [0-9.e-]+  grad_norm [0-9.]+  scale 32768 skipped 2  '
fi

# 6. GPU: the half2 GELU and the overflow run on CUDA.
tut_gpu_cmd gelu ./dtbench gelu --device cuda
tut_gpu_cmd dyngpu ./dtrain --device cuda --fp16 --initial-loss-scale 1048576 --loss-scale-window 20 --train-iters 150 --eval-interval 0 --micro-batch-size 16 --global-batch-size 16 --trace fp16-gpu.json
if tut_gpu; then
    tut_range "dtbench gelu: goal lines" "$(count gelu ' goal >= .* (PASS|BELOW)')" 4 4
    tut_line gelu '^# check gelu_f16 against gelu_f32: 0 of '
    tut_line gelu '^# check gelu_bf16 against gelu_f32: 0 of '
    tut_line dyngpu '^overflow: iteration 1 skipped at loss scale 1\.04858e\+06 '
fi

# 7. The simulator: fit on run A, predict run B (window 1000, then 10).
tut_cmd a ./dtrain --threads 1 --fp16 --seq-length 32 --task-digits 3 --micro-batch-size 8 --global-batch-size 8 --train-iters 80 --lr-warmup-iters 2 --eval-iters 2 --eval-interval 0 --seed 11 --initial-loss-scale 16777216 --trace a.json
tut_cmd b ./dtrain --threads 1 --fp16 --seq-length 32 --task-digits 3 --micro-batch-size 8 --global-batch-size 8 --train-iters 80 --lr-warmup-iters 2 --eval-iters 2 --eval-interval 0 --seed 12 --initial-loss-scale 1048576 --trace b.json --summary b-summary.json
tut_line b '^overflow: iteration 5 skipped at loss scale 131072 \(first inf/NaN gradient: h\.1\.fcproj\.b\)$'
tut_range "run A: skipped steps (9 here)" "$(count a '^overflow: ')" 9 9
tut_range "run B: skipped steps" "$(tut_json b-summary.json skipped_steps)" 5 5
tut_range "run B: final loss scale" "$(tut_json b-summary.json loss_scale)" 65536 65536
tut_cmd simb ./dtsim run --config b.json --grad-trace a.json --profile a.json
tut_line simb '^layout:   t=1 p=1 d=1 \(1 rank\), schedule 1f1b, exchange ring, fp16$'
tut_line simb '^loss scale: 5 overflows, 5 skipped steps, final scale 65536$'

tut_cmd a10 ./dtrain --threads 1 --fp16 --seq-length 32 --task-digits 3 --micro-batch-size 8 --global-batch-size 8 --train-iters 80 --lr-warmup-iters 2 --eval-iters 2 --eval-interval 0 --seed 11 --initial-loss-scale 16777216 --trace a10.json --loss-scale-window 10
tut_cmd b10 ./dtrain --threads 1 --fp16 --seq-length 32 --task-digits 3 --micro-batch-size 8 --global-batch-size 8 --train-iters 80 --lr-warmup-iters 2 --eval-iters 2 --eval-interval 0 --seed 12 --initial-loss-scale 1048576 --trace b10.json --summary b10-summary.json --loss-scale-window 10
rs=$(tut_json b10-summary.json skipped_steps)
tut_line b10 '^overflow: iteration 46 skipped at loss scale 1\.04858e\+06 '
tut_range "run B, window 10: skipped steps" "$rs" 10 10
tut_range "run B, window 10: final loss scale" "$(tut_json b10-summary.json loss_scale)" 524288 524288
tut_range "run B, window 10: backoffs" "$(tut_json b10-summary.json loss_scale_backoffs)" 7 7
tut_cmd sim10 ./dtsim run --config b10.json --grad-trace a10.json --profile a10.json --trace sim10.json
tut_line sim10 '^loss scale: 13 overflows, 13 skipped steps, final scale 131072$'
viz simviz b10.json sim10.json --view scale --png real-vs-sim.png
# the picture's text: the same five overflows from 2^20 to 2^16, then the
# real run's next at 2^20 at iteration 46 (iter 45 in the trace, counted
# from 0), the draw's at 2^18 at iteration 27
overflows() { grep '"name":"overflow' "$1" | sed 's/.*"iter":\([0-9]*\),"loss_scale":\([0-9]*\)\..*/\1:\2/' | head -n 6 | tr '\n' ' '; }
tut_ref tut_range "real-vs-sim.png: the first six overflows of run B, as printed: $(overflows b10.json)" \
    "$(overflows b10.json | grep -c '^0:1048576 1:1048576 2:524288 3:262144 4:131072 45:1048576 $')" 1 1
tut_ref tut_range "real-vs-sim.png: the first six of the draw, as printed: $(overflows sim10.json)" \
    "$(overflows sim10.json | grep -c '^0:1048576 1:1048576 2:524288 3:262144 4:131072 26:262144 $')" 1 1
# the 25 draws of the loop
s=1
: >seeds.txt
while [ $s -le 25 ]; do
    tut_cmd "seed$s" ./dtsim run --config b10.json --grad-trace a10.json --seed $s
    sed -n 's/^loss scale: .*, \([0-9]*\) skipped steps, final scale \([0-9]*\)$/\1 \2/p' "seed$s.out" >>seeds.txt
    s=$((s + 1))
done
echo "  skipped steps, final scale: count"
sort -n seeds.txt | uniq -c | sed 's/^/    /'
med=$(cut -d' ' -f1 seeds.txt | sort -n | sed -n 13p)
tut_range "median predicted skipped steps over seeds 1..25 (11 here)" "$med" 11 11
tut_range "median predicted minus real skipped steps" "$((med - rs))" -2 2
fmed=$(cut -d' ' -f2 seeds.txt | sort -n | sed -n 13p)
tut_range "median predicted final scale (2^18 here)" "$fmed" 262144 262144
for k in 9:2 10:4 11:7 12:10 13:2; do
    tut_range "draws predicting ${k%:*} skipped steps" "$(awk -v n="${k%:*}" '$1 == n' seeds.txt | wc -l | tr -d ' ')" "${k#*:}" "${k#*:}"
done
tut_range "seeds predicting 9..12 skipped steps" "$(awk '$1 >= 9 && $1 <= 12' seeds.txt | wc -l | tr -d ' ')" 20 25

# The exercise: hysteresis 1.
tut_cmd ex ./dtrain --threads 1 --fp16 --initial-loss-scale 1048576 --loss-scale-window 20 --hysteresis 1 --train-iters 150 --eval-interval 0 --micro-batch-size 16 --global-batch-size 16 --summary ex.json
tut_ref tut_line ex '^overflow: iteration 2 skipped at loss scale 524288 \(first inf/NaN gradient: lm_head\.w\)$'
tut_ref tut_range "hysteresis 1: skipped_steps" "$(tut_json ex.json skipped_steps)" 9 9
tut_ref tut_range "hysteresis 1: loss_scale_backoffs" "$(tut_json ex.json loss_scale_backoffs)" 9 9
tut_ref tut_range "hysteresis 1: final loss_scale" "$(tut_json ex.json loss_scale)" 131072 131072

tut_finish
