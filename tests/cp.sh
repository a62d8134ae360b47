#!/bin/sh
# cp.sh: context parallelism (--context-parallel-size, --cp-comm-type;
# lib/parallel/cp.c): whole runs against the serial run in each exchange
# and with the other parallelisms, evaluation's accuracy, the exchanges in
# the trace, each rank's activation memory against the formula of
# docs/context-parallel.md to the byte, and the refusals; each failing
# run's output is shown.
TEST=cp.sh
. "${DT_SRCDIR:-.}/tests/mpi-lib.sh"

# Training runs end with the serial run's losses and weights fingerprint
# within tensor parallelism's 5e-4 (fp32; derived at close in
# tests/mpi-lib.sh): context parallelism computes each query's attention
# as chunk pairs merged by log-sum-exp, the same terms added in another
# order, and sums the gradients over the c x d ranks, data parallelism's
# reordering; with tensor parallelism its partial products too. Under
# --bf16 against the serial bf16 run within compose.sh's 16-bit tolerance,
# 1e-2 (a stored tensor's rounding to 8 bits, 2^-9, falls on values that
# differ by FP32 ulps between the runs). Measured up to 1.9e-6 (fp32) and
# 2.4e-4 (bf16).
COMMON="--task add --task-digits 2 --seq-length 16 --train-iters 4 --lr-warmup-iters 1 --eval-iters 2 \
--eval-interval 0 --log-interval 4 --threads 1 --global-batch-size 8"
for prec in fp32 bf16; do
    pflag=; [ $prec = bf16 ] && pflag=--bf16
    mpi_run serial-$prec 1 $COMMON $pflag --micro-batch-size 8 || continue
done
# cell N PRECISION FLAGS...: a run on N ranks against the serial one
cell() {
    n_=$1 prec_=$2; shift 2
    pflag=; [ $prec_ = bf16 ] && pflag=--bf16
    cname=cp-n$n_-$prec_-$(echo "$*" | sed 's/--context-parallel-size/c/; s/--cp-comm-type//' | tr -d ' -' | cut -c1-50)
    mpi_run "$cname" "$n_" $COMMON $pflag --micro-batch-size 2 "$@" --trace "$TMP/$cname-trace.json" || return 0
    vs_serial "$cname" $prec_
}
cell 2 fp32 --context-parallel-size 2
cell 2 fp32 --context-parallel-size 2 --cp-comm-type allgather
cell 2 fp32 --context-parallel-size 2 --cp-comm-type a2a
cell 4 fp32 --context-parallel-size 4
cell 4 fp32 --context-parallel-size 4 --cp-comm-type a2a --recompute-granularity selective
cell 4 bf16 --context-parallel-size 2 --cp-comm-type a2a --tensor-model-parallel-size 2
cell 4 fp32 --context-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel
cell 4 fp32 --context-parallel-size 2 --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1
cell 4 fp32 --context-parallel-size 2 --use-distributed-optimizer
cell 2 bf16 --context-parallel-size 2 --cp-comm-type allgather --recompute-granularity full

# The exchanges in the trace, per rank, in the 4 training steps of 4
# micro-batches through 2 blocks: the ring's c - 1 steps forward and c
# backward (the last one taking each block's gradient home); Ulysses' 2
# all-to-alls forward (q, k, v in; the output back) and 4 backward (q, k,
# v, the output and its gradient in; the input's gradient back); the
# all-gather variant's one gather forward and a gather and a
# reduce-scatter backward.
exch() { grep "\"name\":\"$2" "$TMP/$1-trace.rank$3.json" | grep -c '"iter":[0-3][,}]'; }
blocks=2 mb=16
for spec in "cp-n2-fp32-c2:cp ring step:$((blocks * mb * (1 + 2)))" \
        "cp-n4-fp32-c4:cp ring step:$((blocks * mb * (3 + 4)))" \
        "cp-n2-fp32-c2a2a:cp all-to-all:$((blocks * mb * 6))" \
        "cp-n2-fp32-c2allgather:cp kv all-gather:$((blocks * mb * 2))" \
        "cp-n2-fp32-c2allgather:cp dkv reduce-scatter:$((blocks * mb))"; do
    run=${spec%%:*} rest=${spec#*:} ev=${rest%%:*} want=${rest#*:}
    [ -f "$TMP/$run-trace.rank0.json" ] || { fail "$run: no trace"; continue; }
    got=$(exch "$run" "$ev" 0)
    if [ "$got" = "$want" ]; then echo "ok: $run: $got '$ev' events on rank 0"; else
        fail "$run: rank 0 traced $got '$ev', expected $want"; fi
done

# Evaluation: accuracy needs whole sequences, so the context group
# gathers its per-position flags; a short run that learns 1-digit
# addition ends with the serial run's accuracy, example for example, and
# validation loss (within the fp32 tolerance above).
ACC="--task add --task-digits 1 --seq-length 16 --train-iters 150 --eval-iters 4 --eval-interval 0 \
--log-interval 150 --micro-batch-size 8 --global-batch-size 8 --threads 1"
if mpi_run acc-serial 1 $ACC && mpi_run acc-cp 2 $ACC --context-parallel-size 2 --cp-comm-type a2a; then
    a=$(key "$TMP/acc-serial.json" accuracy) b=$(key "$TMP/acc-cp.json" accuracy)
    if [ -n "$a" ] && [ "$a" = "$b" ] && awk -v a="$a" 'BEGIN { exit !(a > 0) }'; then
        echo "ok: accuracy $b with context parallelism, $a serial"
    else
        fail "accuracy '$b' with context parallelism, serial '$a' (expected equal and above 0)"
    fi
    CLOSE_WHAT="acc val_loss" close "$(key "$TMP/acc-serial.json" val_loss)" "$(key "$TMP/acc-cp.json" val_loss)" 5e-4 ||
        fail "acc: val_loss $(key "$TMP/acc-cp.json" val_loss), serial $(key "$TMP/acc-serial.json" val_loss)"
fi

# Memory: every per-token tensor holds the rank's N/c rows, so each rank's
# peak activation bytes are docs/context-parallel.md's formula with
# Nl = B T / c (here B 4, T 64, C 64, NH 4, L 2, V 256; multiples of the
# arena's 16-float alignment): FP32, no recomputation,
#   4 [Nl C + L Nl (10 C + 4 + NH) + Nl C + 2 Nl + Nl V]
# (the embedding output, the blocks, the head's LayerNorm output,
# statistics and logits); selective keeps one block's log-sum-exp
# (Nl NH) instead of L; full (K = 1) keeps each block's input (Nl C) and
# rebuilds one block at a time.
MEM="--task add --task-digits 2 --seq-length 64 --train-iters 1 --eval-iters 1 --eval-interval 0 --log-interval 1 \
--threads 1 --micro-batch-size 4 --global-batch-size 8"
C=64 NH=4 L=2 V=256
for c in 2 4; do
    for rc in none selective full; do
        rflag=; [ $rc != none ] && rflag="--recompute-granularity $rc"
        mpi_run mem-c$c-$rc $c $MEM $rflag --context-parallel-size $c || continue
        Nl=$((4 * 64 / c)) A=$((Nl * (10 * C + 4 + NH))) H=$((Nl * C + 2 * Nl + Nl * V)) E=$((Nl * C))
        case $rc in
        none) want=$((4 * (E + L * A + H))) ;;
        selective) want=$((4 * (E + L * (A - Nl * NH) + Nl * NH + H))) ;;
        full) want=$((4 * (E + L * Nl * C + H + A))) ;;
        esac
        got=$(jlist "$TMP/mem-c$c-$rc.json" stage_peak_activation_bytes)
        if [ "$got" = "$want" ]; then echo "ok: mem-c$c-$rc: peak activation bytes $got, the formula's"; else
            fail "mem-c$c-$rc: peak activation bytes '$got', formula $want"; fi
    done
done

# Checkpoints: a c = 2 x d = 2 run with ZeRO-1 (its state sharded over
# the 4 ranks of the gradient's group) saved at step 3, stopped at step 4
# (rank 0 hangs, the others time out), resumed to step 6: the uninterrupted
# run's losses and weights, bit for bit (the same arithmetic in the same
# order; tests/ckpt.sh's claim for the other layouts).
CK="--task add --task-digits 2 --seq-length 16 --micro-batch-size 2 --global-batch-size 8 --lr-warmup-iters 1 \
--eval-iters 1 --eval-interval 0 --threads 1 --train-iters 6 --context-parallel-size 2 --use-distributed-optimizer"
if mpi_run ck-full 4 $CK; then
    timeout 120 $MPIRUN -np 4 "$DTRAIN" $CK --save "$TMP/ck" --save-interval 3 --hang-rank 0:4 --comm-timeout 5 \
        >"$TMP/ck-stop.out" 2>&1
    [ -f "$TMP/ck/latest" ] || [ -d "$TMP/ck" ] || fail "ck: no checkpoint saved before the stop"
    if mpi_run ck-resumed 4 $CK --load "$TMP/ck"; then
        same ck-resumed ck-full exact
    fi
fi

expect_error "--context-parallel-size 2: --seq-length 6 does not split into 4 equal chunks" 2 \
    --context-parallel-size 2 --seq-length 6
expect_error "--cp-comm-type a2a: --context-parallel-size 2 does not divide the 3 attention heads" 2 \
    --context-parallel-size 2 --cp-comm-type a2a --num-attention-heads 3 --hidden-size 48
expect_error "--context-parallel-size 2: not with --pipeline-schedule pipedream" 4 --context-parallel-size 2 \
    --pipeline-model-parallel-size 2 --pipeline-schedule pipedream
expect_error "--cp-comm-type 'ring': expected" 2 --context-parallel-size 2 --cp-comm-type ring
expect_error "are not a multiple of 2" 1 --context-parallel-size 2

close_report
[ "$failures" -eq 0 ] || exit 1
echo "cp.sh: context parallelism equals the serial run and holds 1/c of its activations"
