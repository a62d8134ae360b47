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
# The vocabulary-parallel embedding and cross-entropy (the default with
# t > 1) and --no-vocab-parallel, on gpt2-124m's vocabulary of 50257 (odd:
# t = 2 and 4 split it unevenly, rows V*r/t..V*(r+1)/t), tied and untied,
# against the serial run within the tp tolerance (the head's statistics
# merged in another order than one process's sums: same class as the
# row-parallel partial products). Each rank's summary holds its rows of wte
# (rows * C * 4 bytes) and the LM head's FLOPs per token on the last stage
# (6 * rows * C); its trace has 3 vocabulary collectives per micro-batch
# (the embedding's allreduce, the statistics' all-gather, the head input
# gradient's allreduce), none without the split.
VOCAB="--model gpt2-124m --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 16 --train-iters 4 \
--lr-warmup-iters 1 --eval-iters 2 --eval-interval 0 --log-interval 4 --threads 1 --micro-batch-size 2 \
--global-batch-size 8"
V=50257 C=64
for tie in tied untied; do
    tflag=; [ $tie = untied ] && tflag=--untie-embeddings-and-output-weights
    if ! timeout 120 "$DTRAIN" $VOCAB $tflag --summary "$TMP/vserial-$tie.json" >"$TMP/vserial-$tie.out" 2>&1; then
        fail "vocab serial $tie:"; tail -n 20 "$TMP/vserial-$tie.out" >&2; continue
    fi
    for spec in 2:vp 4:vp 2:whole; do
        t=${spec%%:*} mode=${spec#*:} name=vocab-$tie-t${spec%%:*}-${spec#*:}
        vflag=; [ $mode = whole ] && vflag=--no-vocab-parallel
        if ! timeout 180 $MPIRUN -np $t "$DTRAIN" $VOCAB $tflag $vflag --tensor-model-parallel-size $t \
                --summary "$TMP/$name.json" --trace "$TMP/$name-trace.json" >"$TMP/$name.out" 2>&1; then
            fail "$name: exited non-zero:"; tail -n 20 "$TMP/$name.out" >&2; continue
        fi
        same $name vserial-$tie tp
        # rank 0's summary: its rows [0, V/t) (floor), their bytes, the head's FLOPs
        rows=$V; [ $mode = vp ] && rows=$((V / t))
        got=$(tr -d ' \n' <"$TMP/$name.json" | sed -n 's/.*"vocab_rows":\[\([0-9]*\),\([0-9]*\)\].*/\1 \2/p')
        [ "$got" = "0 $rows" ] || fail "$name: vocab_rows '$got', expected '0 $rows'"
        wb=$(key "$TMP/$name.json" wte_bytes) fl=$(key "$TMP/$name.json" lm_head_flops_per_token)
        [ "$wb" = $((rows * C * 4)) ] || fail "$name: wte_bytes $wb, expected $((rows * C * 4))"
        [ "$fl" = $((6 * rows * C)) ] || fail "$name: lm_head_flops_per_token $fl, expected $((6 * rows * C))"
        want=$((3 * 16)); [ $mode = whole ] && want=0 # 4 steps of 8 / 2 micro-batches
        for r in $(seq 0 $((t - 1))); do
            got=$(grep '"name":"tp vocab ' "$TMP/$name-trace.rank$r.json" | grep -c '"iter":[0-3][,}]')
            [ "$got" = "$want" ] || fail "$name: rank $r traced $got vocabulary collectives, expected $want"
        done
        echo "ok: $name: rows 0..$rows on rank 0, wte $wb bytes, $want vocabulary collectives per rank"
    done
done

# Scatter/gather of pipeline sends (t x p = 2 x 2, the default) against
# --no-scatter-gather-tensors-in-pipeline: the same bits (a message is
# reassembled exactly), in FP32 and bf16, and half the bytes on the link
# in every send_act span (B * T * C * 4 or 2 bytes whole).
for prec in fp32 bf16; do
    pflag=; [ $prec = bf16 ] && pflag=--bf16
    for sg in on off; do
        sflag=; [ $sg = off ] && sflag=--no-scatter-gather-tensors-in-pipeline
        if ! timeout 180 $MPIRUN -np 4 "$DTRAIN" $VOCAB $pflag $sflag --tensor-model-parallel-size 2 \
                --pipeline-model-parallel-size 2 --summary "$TMP/sg-$prec-$sg.json" --trace "$TMP/sg-$prec-$sg-trace.json" \
                >"$TMP/sg-$prec-$sg.out" 2>&1; then
            fail "sg-$prec-$sg: exited non-zero:"; tail -n 20 "$TMP/sg-$prec-$sg.out" >&2
        fi
    done
    same sg-$prec-on sg-$prec-off exact
    whole=$((2 * 16 * C * 4)); [ $prec = bf16 ] && whole=$((whole / 2))
    for sg in on off; do
        want=$whole; [ $sg = on ] && want=$((whole / 2))
        for r in 0 1; do
            got=$(grep '"name":"send_act' "$TMP/sg-$prec-$sg-trace.rank$r.json" | sed -n 's/.*"bytes":\([0-9]*\).*/\1/p' |
                sort -u | tr '\n' ' ')
            [ "$got" = "$want " ] || fail "sg-$prec-$sg: rank $r send_act bytes '$got', expected '$want'"
        done
    done
    echo "ok: sg-$prec: send_act $((whole / 2)) bytes per tensor rank with scatter/gather, $whole without"
done
expect_error "--no-vocab-parallel needs --tensor-model-parallel-size > 1" 1 --no-vocab-parallel
expect_error "--no-scatter-gather-tensors-in-pipeline needs" 2 --tensor-model-parallel-size 2 \
    --no-scatter-gather-tensors-in-pipeline
expect_error "--tensor-model-parallel-size 3 does not divide --num-attention-heads 4" 3 \
    --tensor-model-parallel-size 3

close_report
[ "$failures" -eq 0 ] || exit 1
echo "tp.sh: tensor parallelism equals the serial block and the serial run"
