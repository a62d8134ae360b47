#!/bin/sh
# tp.sh: tensor parallelism: a block (tests/check_tp) under mpirun with
# t = 1, 2 and 4 ranks, then whole training runs (below); each failing run's
# output is shown.
TEST=tp.sh
. "${DT_SRCDIR:-.}/tests/mpi-lib.sh"
for t in 1 2 4; do
    if timeout 120 $MPIRUN -np $t "$BUILDDIR/tests/check_tp" >"$TMP/tp$t.out" 2>&1 &&
       grep -q "check_tp: mpi communicator, $t rank(s): 0 failure(s) over all ranks" "$TMP/tp$t.out"; then
        echo "ok: t = $t"
    else
        fail "t = $t:"; cat "$TMP/tp$t.out" >&2
    fi
done

# Whole runs: t = 2 and 4, t x d = 2 x 2 and t x p = 2 x 2 end with the serial run's
# training and validation loss and weights fingerprint (param_probe, added
# over the shards and stages) within 5e-4 relative (same ... tp: the
# row-parallel partial products; the derivation is at close in
# tests/mpi-lib.sh; AdamW, and SGD, whose
# steps show a wrong clipping norm), and every rank's trace has 2 forward and
# 2 backward tensor-parallel allreduces per block per micro-batch.
COMMON="--task add --task-digits 2 --seq-length 16 --train-iters 4 --lr-warmup-iters 1 --eval-iters 2 \
--eval-interval 0 --log-interval 4 --threads 1"
for opt in adamw sgd; do
    extra="--optimizer $opt"; [ $opt = sgd ] && extra="--optimizer sgd --lr 0.1"
    if ! timeout 120 "$DTRAIN" $COMMON $extra --micro-batch-size 8 --global-batch-size 8 \
            --summary "$TMP/serial-$opt.json" >"$TMP/serial-$opt.out" 2>&1; then
        fail "serial $opt:"; cat "$TMP/serial-$opt.out" >&2; continue
    fi
    for spec in 2:2:1 4:4:1 4:2:1 4:2:2; do
        n=${spec%%:*} rest=${spec#*:} t=${rest%%:*} p=${rest#*:}
        name=n$n-t$t-p$p-$opt
        if timeout 180 $MPIRUN -np $n "$DTRAIN" $COMMON $extra --micro-batch-size 2 --global-batch-size 8 \
                --tensor-model-parallel-size $t --pipeline-model-parallel-size $p --summary "$TMP/$name.json" \
                --trace "$TMP/$name-trace.json" >"$TMP/$name.out" 2>&1; then
            same $name serial-$opt tp
            # the summary's memory is this rank's shard: some, not all, of the model
            mw=$(key "$TMP/$name.json" master_weight_bytes); sw=$(key "$TMP/serial-$opt.json" master_weight_bytes)
            if [ -z "$mw" ] || [ -z "$sw" ] || [ "$mw" -le 0 ] || [ "$mw" -ge "$sw" ]; then
                fail "$name: master_weight_bytes '$mw', expected a shard of the serial run's $sw"
            fi
            # in the 4 training steps (iter 0-3; the evaluation after them has
            # its own forward allreduces): 2 blocks over p stages, 8 / (2 d)
            # micro-batches per step on each of the d = n / (t p) replicas
            d=$((n / (t * p)))
            want=$((4 * (2 / p) * (8 / (2 * d)) * 4))
            for r in $(seq 0 $((n - 1))); do
                got=$(grep '"name":"tp allreduce' "$TMP/$name-trace.rank$r.json" | grep -c '"iter":[0-3][,}]')
                [ "$got" = "$want" ] || fail "$name: rank $r traced $got tensor-parallel allreduces, expected $want"
            done
        else
            fail "$name: exited non-zero:"; tail -n 20 "$TMP/$name.out" >&2
        fi
    done
done
expect_error "--tensor-model-parallel-size 3 does not divide --num-attention-heads 4" 3 \
    --tensor-model-parallel-size 3

close_report
[ "$failures" -eq 0 ] || exit 1
echo "tp.sh: tensor parallelism equals the serial block and the serial run"
