#!/bin/sh
# check.sh: runs tutorials/06-tensor-parallel/README.md's commands and
# checks the outputs it quotes, within the ranges it states. Run by
# tests/tutorials.sh (make check), or alone:
# DT_BUILDDIR=build DT_SRCDIR=. sh tutorials/06-tensor-parallel/check.sh
# TUTORIAL_QUICK changes nothing here: every run is already short.
# Timing lower bounds (1 ms, 0.1 ms, 0.1 s) only say a time was measured: the
# fused attention and the vectorized exp (2026-12-06) made steps 2x faster, and
# faster CPUs will go further; upper bounds still catch a hang or a slow path.
TUTORIAL_LIB=1
. "${DT_SRCDIR:-$(dirname "$0")/../..}/tests/tutorials.sh"
# Open MPI settings of the multi-rank tests, eager messages, $MPIRUN
tut_mpi

# 2. One process against t = 2.
tut_cmd serial ./dtrain --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 8 --train-iters 30 --eval-interval 0 --eval-iters 2 --log-interval 10 --threads 1 --summary serial.json --trace serial-trace.json
tut_cmd tp $MPIRUN -np 2 ./dtrain --tensor-model-parallel-size 2 --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 8 --train-iters 30 --eval-interval 0 --eval-iters 2 --log-interval 10 --summary tp.json --trace tp-trace.json
tut_line serial '^model: custom, 4 layers, 4 heads, width 128, context 64, vocab 256, 867072 params \(867\.1k\)$'
tut_line serial '^batch: 8 sequences \(2 x 4 micro-batches\), 512 tokens per step, 30 iterations$'
tut_line tp '^parallel: grid t=2 x d=1 x p=1 \(tensor, data, pipeline; rank = t_i \+ 2\*\(d_i \+ 1\*p_i\)\), schedule 1f1b, 2 micro-batches per step per pipeline$'
tut_line tp '^  rank 1: tensor 1, data 0, stage 0$'
# Both runs print the same iter 1 and iter 10 lines. Their values depend
# on this machine's FP32 rounding, so the t = 2 run is compared with the
# serial run of this check, not with the README's digits. Up to step 10
# the two runs differ only by a few float32 ulps (2^-24 ~ 6e-8 relative per
# op, summed in another order): their traced losses (full precision)
# differed by at most 5.6e-7 relative at steps 1-10 over the 10 pairs
# measured (t = 2 and 4; native and --disable-native builds; OpenBLAS's
# SkylakeX, Haswell and Sandybridge kernels, OPENBLAS_CORETYPE), and
# iteration 1 adds no training step to amplify them. Two values that
# differ by less than one unit of the last printed digit print at most one
# unit apart: loss (4 decimals) within 1e-4, grad_norm (3) within 1e-3.
# ITER FIELD UNIT: |serial - t = 2| of the printed FIELD at ITER, in units
t06_printed() { for n in serial tp; do
        sed -n "s/^iter $1\/30 .* $2 \([0-9.]*\) .*/\1/p" $n.out | head -n 1; done |
    awk -v u="$3" '{ v[NR] = $1 } END { if (NR == 2) { d = v[1] - v[2]; if (d < 0) d = -d; printf "%.1f", d / u } }'; }
tut_range "iter 1 loss, t = 2 - serial (units of 1e-4)" "$(t06_printed 1 loss 0.0001)" 0 1
tut_range "iter 1 grad_norm, t = 2 - serial (units of 1e-3)" "$(t06_printed 1 grad_norm 0.001)" 0 1
tut_range "iter 10 loss, t = 2 - serial (units of 1e-4)" "$(t06_printed 10 loss 0.0001)" 0 1
tut_line serial '^done: .* peak activation memory 5\.53 MiB$'
tut_line tp '^done: .* peak activation memory 3\.41 MiB$'
# The summaries after 30 steps. t = T sums each GEMM in another order than
# one process (a row-parallel layer's output is T partial sums added by the
# allreduce), and 30 AdamW steps amplify those last-bit differences to
# 1e-5..1e-3. The bound is measured, not derived from a formula: the
# largest relative difference from the serial run over the 10 pairs above
# was 2.4e-4 on the losses (val_loss, t = 2, Sandybridge kernels) and
# 1.0e-3 on param_probe (t = 4, this build's default); an AVX2 build on an
# AMD EPYC gave 1.7e-4, 2.2e-4 and 7.5e-4. The tolerances are about 10
# times those: losses T06_LOSS = 3e-3, param_probe T06_PROBE = 1e-2. They
# still fail a real change: the serial run at a 1% higher --lr moves the
# losses by 6e-3 and param_probe by 1.9e-2.
T06_LOSS=3e-3 T06_PROBE=1e-2
# t06_agree T FILE: FILE's summary against serial.json's
t06_agree() {
    for k in train_loss val_loss param_probe; do
        a=$(tut_json serial.json $k); b=$(tut_json "$2" $k)
        tol=$T06_LOSS; [ $k = param_probe ] && tol=$T06_PROBE
        echo "  $k: serial $a, t = $1 $b"
        tut_range "$k relative difference, t = $1 against the serial run" "$(tut_reldiff "$a" "$b")" 0 $tol
    done
}
t06_agree 2 tp.json

# 3. The allreduces in the trace.
tut_cmd count sh -c 'for r in 0 1; do for k in f g; do echo "rank $r, $k: $(grep -c "\"name\":\"tp allreduce $k\"" tp-trace.rank$r.json) in all, $(grep "\"iter\":5," tp-trace.rank$r.json | grep -c "\"name\":\"tp allreduce $k\"") in step 6"; done; done'
for r in 0 1; do
    tut_line count "^rank $r, f: 480 in all, 16 in step 6$"
    tut_line count "^rank $r, g: 512 in all, 16 in step 6$"
done
if [ -x ./dtviz ]; then
    tut_cmd viz ./dtviz tp-trace.json --zoom 0.5:0.52 --size 1400x400 --png tp.png
    tut_file tp.png
else
    echo "./dtviz tp-trace.json --zoom 0.5:0.52 --size 1400x400 --png tp.png" >>"$TUT_LOG"
    echo "  (this build has no dtviz: SDL2 missing; ./dtviz tp-trace.json ... not run)"
fi
# 8 tp allreduces inside every forward and backward span of a SPANS file
# (all=1: of the whole run; a window of a run slowed by other processes on
# the 2 cores can hold no whole forward or backward)
t06_nested() { awk -F'\t' '$3 == "forward" || $3 == "backward" { n++; p[n] = $1; s[n] = $4; e[n] = $5 }
    $3 ~ /^tp allreduce / { m++; ap[m] = $1; as[m] = $4; ae[m] = $5 }
    END { for (i = 1; i <= n; i++) { c = 0; for (j = 1; j <= m; j++) if (ap[j] == p[i] && as[j] >= s[i] && ae[j] <= e[i]) c++
                                     if (c != 8) bad++ }
          print (n > 0 ? bad + 0 : -1) }' "$1"; }
# what the text says of tp.png: half a step or a little more, 8 allreduces in every forward and backward
tut_spans tp.spans 0.5:0.52 tp-trace.rank0.json tp-trace.rank1.json
tut_spans tp-all.spans 0.5:0.52 all=1 tp-trace.rank0.json tp-trace.rank1.json
tut_range "tp.png: mean steps in its window" "$(awk -F'\t' '$1 == "window" { w = $3 - $2 }
    $3 == "optim_step" && $1 == 0 { if (!n++) first = $4; last = $4 }
    END { if (n > 1 && w > 0) printf "%.2f", w / ((last - first) / (n - 1)) }' tp-all.spans)" 0.45 0.8
tut_range "forward and backward spans of the whole run without 8 tp allreduces inside" "$(t06_nested tp-all.spans)" 0 0

# 4. dtbench tp on 4 ranks.
tut_cmd bench $MPIRUN -np 4 ./dtbench tp
tut_line bench '^# dtbench tp: 4 rank\(s\), GPT 4 blocks, width 128, 4 heads, T = 64, micro-batch 4, 2 micro-batches per step and replica, 5 steps'
tut_line bench '^ +1 +4 +0 +0 +0 +0 '
tut_line bench '^ +2 +2 +32 +32 +4194304 +4194304 '
tut_line bench '^ +4 +1 +32 +32 +6291456 +6291456 '
s1=$(awk '$1 == 1 && $2 == 4 { print $8 }' bench.out); s2=$(awk '$1 == 2 && $2 == 2 { print $8 }' bench.out)
s4=$(awk '$1 == 4 && $2 == 1 { print $8 }' bench.out)
echo "  step ms: t=1 $s1, t=2 $s2, t=4 $s4"
for v in "$s1" "$s2" "$s4"; do tut_range "dtbench tp step (ms)" "$v" 1 1000; done
for t in 2 4; do
    tut_range "dtbench tp: t = $t allreduce share of the step (%)" "$(awk -v t=$t '$1 == t && $2 == 4 / t { sub(/%/, "", $7); print $7 }' bench.out)" 10 99
done

# 5. The simulator's prediction (tensor parallelism analytically).
tut_cmd sim ./dtsim run --config tp-trace.rank0.json --profile serial-trace.json --hw sim/hw/cpu-2core.json
tut_line sim '^scenario: custom \(4 layers, width 128, 4 heads, vocab 256\), B=4 T=64 m=2 \(global batch 8\), 30 steps$'
tut_line sim '^layout:   t=2 p=1 d=1 \(2 ranks\), schedule 1f1b, exchange ring, fp32$'
tpms=$(tut_num sim '^comm per step on rank 0: .* tp allreduce \([0-9.]*\) ms.*')
# the links' 36 x 15.8 + 2 x 2.2 us = 0.572 ms, plus the expected wait for the slower rank at each
# allreduce, from the profile's spread of block times: 0.91-0.95 ms in quiet runs on the 2-core Xeon,
# 3.31 in a --disable-native make -j2 check on the AMD EPYC (2026-12-07), whose serial profile ran
# beside other tests; the waits grow with that load, so the bound is the links' below and 10 ms
# above (a wait model off by an order of magnitude), not a figure of a quiet machine
tut_range "simulated tp allreduce per step (ms), the links' 0.572 and the waits" "$tpms" 0.57 10
tut_cmd val ./dtsim validate --profile serial-trace.json --hw sim/hw/cpu-2core.json tp-trace.rank0.json
tut_line val '^t2 p1 d1 1f1b m=2 '
vrow=$(grep '^t2 p1 d1 1f1b m=2 ' val.out | tr -d '|')
meas=$(echo "$vrow" | awk '{ print $6 }'); pred=$(echo "$vrow" | awk '{ print $8 }')
cm=$(echo "$vrow" | awk '{ print $11 }'); cp=$(echo "$vrow" | awk '{ print $13 }')
km=$(echo "$vrow" | awk '{ print $14 }'); kp=$(echo "$vrow" | awk '{ print $16 }')
echo "  step measured $meas predicted $pred; compute $cm / $cp; comm $km / $kp"
tut_range "measured t = 2 step (ms)" "$meas" 1 1000
tut_range "predicted t = 2 step (ms)" "$pred" 1 300
tut_range "predicted / measured step" "$(tut_ratio "$pred" "$meas")" 0.1 3
tut_range "predicted tp comm (ms)" "$kp" 0.57 10

# 6. GPU: one GPU, then t = 2 over NCCL (needs 2 GPUs).
tut_gpu_cmd gpu1 ./dtrain --device cuda --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 8 --train-iters 30 --eval-interval 0 --eval-iters 2 --log-interval 10 --summary gpu-serial.json
ngpu=0
tut_gpu && ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpu" -ge 2 ]; then
    tut_gpu_cmd gpu2 $MPIRUN -np 2 ./dtrain --device cuda --tensor-model-parallel-size 2 --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 8 --train-iters 30 --eval-interval 0 --eval-iters 2 --log-interval 10 --summary gpu-tp.json
    # two GPUs against one: the same amplified reordering as section 2's
    # CPU runs (cuBLAS sums in its own order), so the same tolerance
    tut_range "GPU train_loss relative difference, 1 GPU vs t = 2" "$(tut_reldiff "$(tut_json gpu-serial.json train_loss)" "$(tut_json gpu-tp.json train_loss)")" 0 $T06_LOSS
else
    echo "mpirun ... -np 2 ./dtrain --device cuda --tensor-model-parallel-size 2 ..." >>"$TUT_LOG.gpu-skipped"
    echo "  (fewer than 2 GPUs: the tensor-parallel GPU run is skipped)"
fi

# Exercise: t = 4.
tut_cmd ex $MPIRUN -np 4 ./dtrain --tensor-model-parallel-size 4 --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 8 --train-iters 30 --eval-interval 0 --eval-iters 2 --log-interval 10 --summary tp4.json --trace tp4-trace.json
tut_line ex '^parallel: grid t=4 x d=1 x p=1 '
tut_line ex '^done: .* peak activation memory 2\.35 MiB$'
# the tolerances of section 2 (they were measured on t = 4 too)
t06_agree 4 tp4.json
tut_cmd ex_count sh -c 'grep "\"iter\":5," tp4-trace.rank3.json | grep -c "\"name\":\"tp allreduce"'
tut_line ex_count '^32$'

tut_finish
