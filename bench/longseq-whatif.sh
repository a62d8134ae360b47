#!/bin/sh
# longseq-whatif.sh: how long a sequence a GPT of 175 B parameters trains
# with on 1024 A100s of 80 GB, without sequence or context parallelism,
# with sequence parallelism, and with both, as dtsim predicts it.
#
#   sh bench/longseq-whatif.sh [BUILDDIR] [none|selective|full]
#
# (default: ., selective recomputation). The model is the Megatron-LM
# table's 175 B row as bench/published.sh runs its neighbours (96 blocks of
# width 12288, 96 heads, vocabulary 51,200, untied head), bf16, micro-
# batches of 1 sequence, 1F1B, the distributed optimizer (ZeRO-1 over the
# c x d ranks of each position, 8 in every layout), a global batch of 128
# sequences (tokens per step grow with T), on sim/hw/a100-ib.json (the
# published table's hardware, 80 GB a GPU). Layouts of 1024 GPUs:
# t = 8 (a node), p = 16, and c x d = 8. For each, T doubles from 2048
# while dtsim's --strict-memory accepts the scenario (every rank's
# predicted peak within mem_capacity_bytes); the largest that fits is
# printed with dtsim's step time, its exposed context-parallel exchange
# per step on rank 0 and the largest rank's peak memory. A T above
# 65536 cannot be asked: it is dtrain's --max-position-embeddings limit,
# so "65536+" means the limit fits. dtsim prices the exchanges as dtrain
# runs them (FP32 keys and values, the ring's gradient sends not hidden).
BUILD=${1:-.}
RC=${2:-selective}
DTSIM=$BUILD/dtsim
SRC=$(cd "$(dirname "$0")/.." && pwd)
HW=$SRC/sim/hw/a100-ib.json
[ -x "$DTSIM" ] || { echo "longseq-whatif.sh: $DTSIM: not found (give the build directory)" >&2; exit 1; }
case $RC in
none) rflag= ;;
selective | full) rflag="--recompute-granularity $RC" ;;
*) echo "longseq-whatif.sh: recomputation '$RC': expected none, selective or full" >&2; exit 1 ;;
esac
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
# sim LAYOUT-FLAGS T: 0 and the summary in $TMP/s.json when it fits, 2 when over memory
sim() {
    # shellcheck disable=SC2086 # flags are lists
    "$DTSIM" run --num-layers 96 --hidden-size 12288 --num-attention-heads 96 --vocab-size 51200 \
        --untie-embeddings-and-output-weights --max-position-embeddings "$2" --seq-length "$2" \
        --micro-batch-size 1 --global-batch-size 128 --tensor-model-parallel-size 8 \
        --pipeline-model-parallel-size 16 $1 --bf16 --use-distributed-optimizer $rflag --train-iters 2 \
        --hw "$HW" --strict-memory --summary "$TMP/s.json" >"$TMP/out" 2>&1
}
# key NAME: a number from the summary (the first occurrence)
key() { tr -d ' \n' <"$TMP/s.json" | sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p"; }
peak() { tr -d ' \n' <"$TMP/s.json" | sed -n 's/.*"peak_memory_bytes":\[\([0-9,]*\)\].*/\1/p' | tr ',' '\n' | sort -n | tail -n 1; }
echo "GPT 175B (96 x 12288, 96 heads), 1024 x A100 80GB (sim/hw/a100-ib.json), bf16, ZeRO-1, global batch 128,"
echo "recomputation: $RC; the longest power-of-two T that fits in 80 GB per GPU"
printf '%-14s %-20s %7s %10s %12s %10s %9s\n' layout "t x c x p x d" T "step (s)" "tokens/s/GPU" "cp (ms)" "peak GB"
for spec in "none:1:8:" "sp:1:8:--sequence-parallel" "sp+cp2:2:4:--sequence-parallel" \
    "sp+cp4:4:2:--sequence-parallel" "sp+cp8:8:1:--sequence-parallel"; do
    name=${spec%%:*} rest=${spec#*:}
    c=${rest%%:*} rest=${rest#*:}
    d=${rest%%:*} extra=${rest#*:}
    flags="--context-parallel-size $c --data-parallel-size $d $extra"
    T=2048 best='' line=''
    while [ "$T" -le 65536 ]; do
        sim "$flags" "$T"
        rc=$?
        [ $rc -eq 2 ] && grep -q "strict-memory" "$TMP/out" && break
        [ $rc -eq 0 ] || { cat "$TMP/out" >&2; echo "longseq-whatif.sh: dtsim failed on $name at T $T" >&2; exit 1; }
        best=$T
        step=$(key step_ms) cp=$(key cp_exchange) pk=$(peak)
        line=$(awk -v s="$step" -v T="$T" -v cp="$cp" -v pk="$pk" 'BEGIN {
            printf "%10.2f %12.0f %10.0f %9.1f", s / 1e3, 128 * T / (s / 1e3) / 1024, cp, pk / 1e9 }')
        T=$((T * 2))
    done
    shown=$best
    [ "$best" = 65536 ] && shown=65536+
    [ -n "$best" ] || { printf '%-14s %-20s %7s\n' "$name" "8 x $c x 16 x $d" "<2048"; continue; }
    printf '%-14s %-20s %7s %s\n' "$name" "8 x $c x 16 x $d" "$shown" "$line"
done
