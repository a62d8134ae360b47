#!/bin/sh
# fp16-overflow.sh: under --fp16 a non-finite loss is an overflow, in every
# layout (issue 33): the step is skipped, the scaler absorbs then backs off,
# the overflow line names the forward's layer, and the run goes on (exit 0).
#
# --lr 1e30 --clip-grad 0 --optimizer sgd: iteration 1's update makes the
# FP32 master weights about 1e26 or more, far above fp16's 65504, so from
# iteration 2 on every fp16 copy of the weights holds inf and every
# forward's loss is NaN, whatever the CPU's rounding: iterations 2-5 are
# 4 overflows. The scaler (default 65536, hysteresis 2) absorbs the first
# and halves on the next three: skipped_steps 4, loss_scale 8192 exactly
# (a state machine of counts). Every layout must print the one process's
# overflow lines word for word (the whole model's layer numbering), or, for
# ZeRO-3 (no whole model to re-run), say it did not re-run; and keep the
# one process's weights (param_probe within 2e-3, close16 below).
# Then --min-loss-scale-patience: at the minimum scale, N overflowing
# steps in a row stop the run with one line and exit 1.
# POSIX sh.
TEST=fp16-overflow.sh
. "${DT_SRCDIR:-.}/tests/mpi-lib.sh"

NAN="--task add --task-digits 2 --seq-length 16 --train-iters 5 --threads 1 --micro-batch-size 2 \
--global-batch-size 8 --lr 1e30 --clip-grad 0 --optimizer sgd --log-interval 1 --eval-interval 0 --eval-iters 1 --fp16"

# close16 A B: |A - B| <= 2e-3 * max(|A|, |B|). The probe is a weighted sum
# of the weights after iteration 1's update, lr x gradient: the gradient's
# activations are stored in fp16 (unit roundoff 2^-11 = 4.9e-4), and a
# tensor-parallel rank rounds its partial sums to fp16 before they are
# added, where one process rounds the whole sum once: elements differ by
# a few fp16 units. 2e-3 is 4 such units (t = 2 measured 1.3e-4 here);
# the sum over all weights only averages them.
close16() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); n = (b < 0 ? -b : b);
    if (n > m) m = n; exit !(d <= 2e-3 * m) }'; }
# num FILE KEY VALUE: the summary's KEY is the number VALUE
num() { awk -v a="$(key "$1" "$2")" -v b="$3" 'BEGIN { exit !(a != "" && a + 0 == b + 0) }'; }

# lines FILE: its overflow lines, -nan as nan
lines() { grep '^overflow: ' "$1" | sed 's/-nan/nan/'; }

"$DTRAIN" $NAN --summary "$TMP/one.json" >"$TMP/one.out" 2>&1
rc=$?
want=$(lines "$TMP/one.out")
probe=$(key "$TMP/one.json" param_probe)
n=$(echo "$want" | grep -c '^overflow: iteration [2-5] skipped at loss scale [0-9]* (non-finite loss; forward: the output of layer ')
if [ "$rc" != 0 ] || [ "$n" != 4 ] || ! num "$TMP/one.json" skipped_steps 4 ||
    ! num "$TMP/one.json" loss_scale 8192 || [ -z "$probe" ]; then
    fail "one process: exit $rc, $n overflow lines naming a layer, expected 0 and 4, skipped_steps 4, loss_scale 8192:"
    cat "$TMP/one.out" >&2
else
    echo "ok: one process: exit 0, 4 overflows, scale 8192: $(echo "$want" | tail -n 1)"
fi
for spec in 2:d2 2:zero1 2:zero3 2:t2 2:p2 2:p2-gpipe 4:t2-p2; do
    np=${spec%%:*} name=${spec#*:}
    case $name in
        d2) args="--allreduce ring" ;;
        zero1) args="--use-distributed-optimizer" ;;
        zero3) args="--zero-stage 3" ;;
        t2) args="--tensor-model-parallel-size 2" ;;
        p2) args="--pipeline-model-parallel-size 2" ;;
        p2-gpipe) args="--pipeline-model-parallel-size 2 --pipeline-schedule gpipe" ;;
        t2-p2) args="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2" ;;
    esac
    # shellcheck disable=SC2086 # word splitting wanted
    timeout 120 $MPIRUN -np "$np" "$DTRAIN" $NAN $args --summary "$TMP/$name.json" >"$TMP/$name.out" 2>&1
    rc=$?
    got=$(lines "$TMP/$name.out")
    [ "$name" = zero3 ] && want3=$(echo "$want" | sed 's/(non-finite loss; forward: .*)$/(non-finite loss; forward: not re-run (this layout keeps no whole model))/') || want3=$want
    p=$(key "$TMP/$name.json" param_probe)
    if [ "$rc" != 0 ] || [ "$got" != "$want3" ] || ! num "$TMP/$name.json" skipped_steps 4 ||
        ! num "$TMP/$name.json" loss_scale 8192 || [ -z "$p" ] || ! close16 "$p" "$probe"; then
        fail "$name: exit $rc, param_probe '$p' (one process '$probe'); expected 0, the one process's overflow lines:"
        echo "$want3" >&2
        echo "got:" >&2
        cat "$TMP/$name.out" >&2
    else
        echo "ok: $name: exit 0, the one process's 4 overflow lines, scale 8192 and weights"
    fi
done

# The minimum scale: from 4 with hysteresis 1, iterations 2-3 back off to
# 1, iterations 4-6 overflow at it (3 in a row = the patience): the run
# stops before iteration 7, exit 1, one line.
"$DTRAIN" $NAN --train-iters 10 --initial-loss-scale 4 --hysteresis 1 --min-loss-scale-patience 3 \
    >"$TMP/min.out" 2>&1
rc=$?
msg=$(grep '^dtrain: ' "$TMP/min.out" | grep -v warning)
if [ "$rc" != 1 ] || [ "$msg" != "dtrain: iteration 6: the loss scale sat at its minimum (1) for the last 3 steps and every one overflowed: fp16 cannot hold this run's values; stopping (lower --lr, check the data, or use --bf16; --min-loss-scale-patience 0 never stops)" ]; then
    fail "minimum scale: exit $rc, expected 1 and the stop line:"; cat "$TMP/min.out" >&2
else
    echo "ok: minimum scale: exit 1 after 3 overflows at scale 1: $msg"
fi
timeout 120 $MPIRUN -np 2 "$DTRAIN" $NAN --pipeline-model-parallel-size 2 --train-iters 10 --initial-loss-scale 4 \
    --hysteresis 1 --min-loss-scale-patience 3 >"$TMP/min-p2.out" 2>&1
rc=$?
got=$(grep '^dtrain: ' "$TMP/min-p2.out" | grep -v warning)
if [ "$rc" = 0 ] || [ "$got" != "$msg" ]; then
    fail "minimum scale, p = 2: exit $rc, expected non-zero and the one process's line once:"; cat "$TMP/min-p2.out" >&2
else
    echo "ok: minimum scale, p = 2: exit $rc, one line"
fi
# bad values
expect_error "--min-loss-scale-patience '-1': expected an integer >= 0" 1 --fp16 --min-loss-scale-patience -1
expect_error "--min-loss-scale-patience needs dynamic loss scaling (--fp16 without --loss-scale)" 1 --min-loss-scale-patience 5

[ "$failures" = 0 ] || exit 1
echo "fp16-overflow.sh: all passed"
