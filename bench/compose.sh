#!/bin/sh
# compose.sh: step time and peak activation memory of composed techniques
# (docs/composition.md), each cell against its fp32, no-recomputation
# neighbour in the same layout, measured in the same run.
#
#   bench/compose.sh [REPEATS [BUILDDIR]]     (defaults: 3 .)
#
# Cells: layout {single, dp (2 ranks), 1f1b (p = 2), tp (t = 2)} x
# {fp32, bf16, fp16} x recompute {none, full}, a 4-block GPT of width 128
# (T = 64, 4 heads), micro-batch 4, global batch 16, 12 steps, 1 thread per
# rank. Each cell runs REPEATS times; the line shows the median tokens/s
# (the summary's, steps after the first) with the range, the largest
# stage's peak saved activations (MiB), and both as ratios to the layout's
# fp32/none cell. The timings depend on the machine: run it alone (the
# ranks busy-poll). POSIX sh.

set -u
REPEATS=${1:-3}
BUILDDIR=${2:-.}
SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
DTRAIN=$BUILDDIR/dtrain
[ -x "$DTRAIN" ] || { echo "compose.sh: $DTRAIN not found (second argument: the build directory)" >&2; exit 2; }
case $REPEATS in '' | *[!0-9]*) echo "compose.sh: REPEATS '$REPEATS': expected a positive integer" >&2; exit 2 ;; esac
[ "$REPEATS" -ge 1 ] || { echo "compose.sh: REPEATS 0: expected a positive integer" >&2; exit 2; }
command -v mpirun >/dev/null 2>&1 || { echo "compose.sh: mpirun not found" >&2; exit 2; }
. "$SRCDIR/tests/mpi-env.sh"
MPIRUN="mpirun --oversubscribe --allow-run-as-root"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-bench-compose.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT HUP INT TERM

MODEL="--num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 64 --micro-batch-size 4 \
--global-batch-size 16 --train-iters 12 --lr-warmup-iters 1 --eval-iters 1 --eval-interval 0 --log-interval 12 --threads 1"

key() { sed -n "s/^ *\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1" | head -n 1; }
# the largest stage's peak (the pipeline object), else the rank's own
peak() {
    v=$(sed -n '/"stage_peak_activation_bytes"/,/]/p' "$1" | tr -d ' \n' | sed 's/.*\[\(.*\)\].*/\1/' | tr ',' '\n' |
        sort -n | tail -n 1)
    [ -n "$v" ] || v=$(key "$1" peak_activation_bytes)
    echo "$v"
}

printf '%-6s %-5s %-5s %12s %20s %10s %8s %8s\n' layout prec rc "tokens/s" "(range)" "peak MiB" "x speed" "x peak"
for l in single dp 1f1b tp; do
    case $l in
    single) np=1 fl= ;;
    dp) np=2 fl="--allreduce ring" ;;
    1f1b) np=2 fl="--pipeline-model-parallel-size 2 --pipeline-schedule 1f1b" ;;
    tp) np=2 fl="--tensor-model-parallel-size 2" ;;
    esac
    base_tps= base_peak=
    for p in fp32 bf16 fp16; do
        pf=; [ $p = bf16 ] && pf=--bf16; [ $p = fp16 ] && pf=--fp16
        for r in none full; do
            rf=; [ $r = full ] && rf="--recompute-granularity full --recompute-num-layers 1"
            : >"$TMP/tps"
            pk=
            i=0
            while [ $i -lt "$REPEATS" ]; do
                i=$((i + 1))
                if ! $MPIRUN -np $np "$DTRAIN" $MODEL $pf $rf $fl --summary "$TMP/s.json" >"$TMP/out" 2>&1 </dev/null; then
                    echo "compose.sh: $l $p $r: dtrain failed:" >&2; tail -n 5 "$TMP/out" >&2; exit 1
                fi
                key "$TMP/s.json" tokens_per_second >>"$TMP/tps"
                pk=$(peak "$TMP/s.json")
            done
            stats=$(sort -n "$TMP/tps" | awk '{ v[NR] = $1 } END { printf "%.0f %.0f %.0f", v[int((NR + 1) / 2)], v[1], v[NR] }')
            med=${stats%% *}
            [ -z "$base_tps" ] && base_tps=$med base_peak=$pk
            printf '%-6s %-5s %-5s %12s %20s %10.2f %8.2f %8.2f\n' $l $p $r "$med" "($(echo "$stats" | cut -d' ' -f2)-$(echo "$stats" | cut -d' ' -f3))" \
                "$(awk -v b="$pk" 'BEGIN { print b / 1048576 }')" \
                "$(awk -v a="$med" -v b="$base_tps" 'BEGIN { print a / b }')" \
                "$(awk -v a="$pk" -v b="$base_peak" 'BEGIN { print a / b }')"
        done
    done
done
