#!/bin/sh
# published.sh: dtsim against published runs of real large jobs, with a
# hardware file written from spec sheets and fitted to none of them.
#
#   sh bench/published.sh [BUILDDIR]     (default: .; dtsim and the source's sim/hw)
#
# The runs: Megatron-LM's weak-scaling table of April 2021 (NVIDIA/Megatron-LM
# README at commit 50a4b5fa02, images/cases_april2021.png; Narayanan et al.,
# "Efficient Large-Scale Language Model Training on GPU Clusters Using
# Megatron-LM", arXiv 2104.04473): GPT models of 1.7 B to 1 T parameters,
# vocabulary 51,200, sequence 2048, on Selene (DGX A100 80GB nodes of 8),
# with each row's hidden size, layers, model-parallel size, GPUs, batch and
# achieved teraFLOP/s per GPU. The README states the FLOPs are measured end
# to end. What the table does not give, chosen here and not tuned:
#   - the split of the model-parallel size: t = min(8, size), p = size / t
#     (tensor parallelism inside a node of 8, as the paper does);
#   - heads: hidden / 128 (dtsim's attention cost does not depend on them);
#   - micro-batches of 1 sequence, 1F1B, bf16 (the paper's fp16 runs at the
#     same rate), full activation recomputation;
#   - the FLOPs per step by the paper's formula, recomputation included:
#     96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
# The published step time is that FLOP count over (teraFLOP/s per GPU x
# GPUs); dtsim's prediction gives its own teraFLOP/s per GPU the same way.
# Hardware: sim/hw/a100-ib.json (its "source" says where each figure comes
# from). Columns: dtsim's error against the published step; "whole", the
# error with the embedding and LM head whole on every tensor rank
# (--no-vocab-parallel), what the vocabulary split changes; stage 0's
# fwd/bwd-only bubble against the 1F1B formula (p-1)/(m+p-1).
BUILD=${1:-.}
DTSIM=$BUILD/dtsim
SRC=$(cd "$(dirname "$0")/.." && pwd)
HW=$SRC/sim/hw/a100-ib.json
[ -x "$DTSIM" ] || { echo "published.sh: $DTSIM: not found (give the build directory)" >&2; exit 1; }
# name hidden layers model-parallel GPUs batch published-TFLOP/s-per-GPU
ROWS='1.7B 2304 24 1 32 512 137
3.6B 3072 30 2 64 512 138
7.5B 4096 36 4 128 512 142
18B 6144 40 8 256 1024 135
39B 8192 48 16 512 1536 138
76B 10240 60 32 1024 1792 140
145B 12288 80 64 1536 2304 148
310B 16384 96 128 1920 2160 155
530B 20480 105 280 2520 2520 163
1T 25600 128 512 3072 3072 163'
printf '%-5s %-14s %5s %8s %9s %10s %8s %8s %8s %8s %8s\n' model "t x p x d" m "pub TF/s" "pub step" "dtsim step" "dtsim TF" error whole bubble0 formula
echo "$ROWS" | while read -r name C L mp n batch tf; do
    t=$mp; [ "$t" -gt 8 ] && t=8
    p=$((mp / t)) d=$((n / mp))
    m=$((batch / d))
    base="--num-layers $L --hidden-size $C --num-attention-heads $((C / 128)) --vocab-size 51200 --max-position-embeddings 2048
--seq-length 2048 --micro-batch-size 1 --micro-batches $m --tensor-model-parallel-size $t --pipeline-model-parallel-size $p
--data-parallel-size $d --bf16 --recompute-granularity full --train-iters 2 --hw $HW"
    # shellcheck disable=SC2086 # base is a list of flags
    out=$("$DTSIM" run $base 2>/dev/null) || { echo "published.sh: dtsim failed on $name" >&2; exit 1; }
    whole=
    # shellcheck disable=SC2086
    [ "$t" -gt 1 ] && whole=$("$DTSIM" run $base --no-vocab-parallel 2>/dev/null | sed -n 's/^step time \([0-9.]*\) ms.*/\1/p')
    step=$(echo "$out" | sed -n 's/^step time \([0-9.]*\) ms.*/\1/p')
    b0=-
    [ "$p" -gt 1 ] && b0=$(echo "$out" | sed -n 's/^  stage 0: bubble [0-9.]*, fwd\/bwd-only \([0-9.]*\)$/\1/p')
    awk -v name="$name" -v C="$C" -v L="$L" -v B="$batch" -v n="$n" -v tf="$tf" -v step="$step" -v whole="${whole:-0}" \
        -v grid="$t x $p x $d" -v m="$m" -v p="$p" -v b0="${b0:--}" 'BEGIN {
        s = 2048; V = 51200
        F = 96 * B * s * L * C * C * (1 + s / (6 * C) + V / (16 * L * C))
        pub = F / (tf * 1e12 * n); sim = step / 1e3
        w = whole > 0 ? sprintf("%+.1f%%", (whole / 1e3 / pub - 1) * 100) : "-"
        f = p > 1 ? sprintf("%.4f", (p - 1) / (m + p - 1)) : "-"
        printf "%-5s %-14s %5d %8d %8.2fs %9.2fs %8.0f %+7.1f%% %8s %8s %8s\n", name, grid, m, tf, pub, sim,
               F / sim / n / 1e12, (sim / pub - 1) * 100, w, b0, f }'
done
