#!/bin/sh
# fp8-results.sh: what FP8 training does to training, against bf16 and
# FP32 on the same model, data and seed (issue 39, item 4).
#
#   sh bench/fp8-results.sh [BUILDDIR] [quick]
#
# Part 1, the tutorials' tasks (tiny model, `--task add` and `--task
# sort`, 1000 steps; quick: 40): FP32, bf16 and --fp8-format hybrid with
# each recipe: final training and validation loss, accuracy, the steps
# with saturated values and the shares of values saturated and flushed.
# Part 2, the `small` preset (6 blocks of width 384; micro-batch 4, T
# 128, 60 steps; quick: 10): the same five runs. Part 3, delayed scaling's
# knobs on the add task: --fp8-margin 0/1/4 and --fp8-amax-history-len
# 1/16/1024 with --fp8-amax-compute-algo max and most_recent.
# One line per run: every figure is read from its --summary.
BUILD=${1:-.}
QUICK=${2:-}
DTRAIN=$BUILD/dtrain
[ -x "$DTRAIN" ] || { echo "fp8-results.sh: $DTRAIN: not found (give the build directory)" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/fp8-results.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT HUP INT TERM
STEPS=1000 SMALL=60
[ "$QUICK" = quick ] && STEPS=40 SMALL=10

# fig FILE KEY [fp8]: a number from the summary (the fp8 object's with fp8)
fig() {
    if [ "${3:-}" = fp8 ]; then sed -n '/"fp8": {/,$p' "$1"; else cat "$1"; fi |
        sed -n "s/^ *\"$2\": *\([-0-9.eE+]*\).*/\1/p" | head -n 1
}
# run NAME FLAGS...: one run and its line
run() {
    name=$1; shift
    if ! "$DTRAIN" --threads 1 --log-interval 1000 "$@" --summary "$TMP/$name.json" >"$TMP/$name.out" 2>&1; then
        echo "fp8-results.sh: $name failed:" >&2; tail -n 5 "$TMP/$name.out" >&2; return 1
    fi
    s=$TMP/$name.json
    acc=$(fig "$s" accuracy)
    [ -n "$acc" ] && acc=$(printf '%.3f' "$acc")
    if grep -q '"fp8": {' "$s"; then
        v=$(fig "$s" values fp8)
        printf '%-34s %9.4f %9.4f %8s %7s/%-5s %10.3g %10.3g\n' "$name" "$(fig "$s" train_loss)" "$(fig "$s" val_loss)" \
            "${acc:--}" "$(fig "$s" steps_saturated fp8)" "$(fig "$s" steps fp8)" \
            "$(awk -v a="$(fig "$s" saturated fp8)" -v b="$v" 'BEGIN { print a / b }')" \
            "$(awk -v a="$(fig "$s" flushed fp8)" -v b="$v" 'BEGIN { print a / b }')"
    else
        printf '%-34s %9.4f %9.4f %8s %13s %10s %10s\n' "$name" "$(fig "$s" train_loss)" "$(fig "$s" val_loss)" \
            "${acc:--}" - - -
    fi
}
header() {
    echo "# $1"
    printf '# %-32s %9s %9s %8s %13s %10s %10s\n' run train_loss val_loss accuracy "sat steps" saturated flushed
}
five() { # five PREFIX FLAGS...
    p=$1; shift
    run "$p fp32" "$@"
    run "$p bf16" "$@" --bf16
    for r in delayed tensorwise blockwise; do run "$p fp8 $r" "$@" --fp8-format hybrid --fp8-recipe $r; done
}

header "the tutorials' tasks: tiny model, $STEPS steps, global batch 32, seed 1"
for task in add sort; do
    T=16; [ $task = sort ] && T=32
    five "$task" --task $task --seq-length $T --train-iters $STEPS --global-batch-size 32 --micro-batch-size 32 --eval-iters 10 \
        --eval-interval 0 --seed 1
done
header "--model small: micro-batch 4, T 128, $SMALL steps"
five small --model small --task sort --seq-length 128 --micro-batch-size 4 --global-batch-size 4 \
    --train-iters $SMALL --eval-iters 2 --eval-interval 0 --seed 1
header "delayed scaling's knobs: add task as above, hybrid"
for m in 0 1 4; do
    for h in 1 16 1024; do
        for a in max most_recent; do
            [ $h = 1 ] && [ $a = most_recent ] && continue # the same as max with one entry
            run "add delayed m$m h$h $a" --task add --seq-length 16 --train-iters $STEPS --global-batch-size 32 --micro-batch-size 32 \
                --eval-iters 10 --eval-interval 0 --seed 1 --fp8-format hybrid --fp8-margin $m \
                --fp8-amax-history-len $h --fp8-amax-compute-algo $a
        done
    done
done
