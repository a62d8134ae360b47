#!/bin/sh
# zb.sh: the chunked and split-backward pipeline schedules of issue 22
# (interleaved-1f1b, zb-h1, zb-v) run for real under mpirun (run by `make
# check`; skipped without MPI). Oversubscribed on 2 cores, at most 4 ranks.
#
# 1. Equal to the serial run (training loss, validation loss and weights
#    fingerprint, as tests/pp.sh): 4 steps of 4 micro-batches,
#    - p = 2 (4 blocks: interleaved and zb-v put one on each of the 4
#      virtual stages) and p = 4 (8 blocks), FP32 with clipping: within
#      1e-4 relative. zb-h1 is 1f1b with every backward split into B and W
#      and the W's in micro-batch order, so it equals 1f1b to the last
#      digit; interleaved-1f1b and zb-v group other blocks on a rank, and
#      the squared gradient norm is summed per rank and then over the ranks
#      in float, so the clipping factor can differ in its last bit
#      (measured: fingerprints 4e-9 relative from 1f1b's at p = 2, 3e-9 at
#      p = 4);
#    - --bf16 and --fp16 with --clip-grad 0: the serial run's training and
#      validation loss to the last digit (the stages round as one process
#      does, stage.h; with clipping, one ulp of the clipping factor flips a
#      16-bit rounding now and then: zb-v bf16 read 9e-4 relative on the
#      fingerprint after 4 steps);
#    - selective and full recomputation: the runs without it, to the last
#      digit (B recomputes, W reads what B recomputed);
#    - tied embeddings (zb-v holds wte and the LM head's copy on device 0
#      and sums their gradients there): within 1e-4;
#    - p x d = 2 x 2 (zb-v): within 1e-4; t x p = 2 x 2 (zb-h1): within
#      5e-4, tensor parallelism's tolerance (close in tests/mpi-lib.sh;
#      measured 2e-5 in both builds);
#    - interleaved-1f1b with v = 3 chunks per stage (6 blocks): within
#      1e-4, and `dtsim run --config` of its trace simulates v = 3.
# 2. The bubble: p = 2 ranks, m = 4, 20 steps of bubble.sh's equal-cost
#    model (8 blocks of width 128, T = 64, micro-batch 4): the mean of the
#    two stages' bubble_fb (dtbench bubbles, forward, B and W busy) of each
#    new kind is below 1f1b's (formula 1/(m+1) = 0.2; ideal zb-h1
#    1/(3m+1) = 0.077, interleaved 1/(2m+1) = 0.11, zb-v about 0; the
#    stages' imbalance adds to each). Runs disturbed by other processes
#    (noise above NOISE_MAX, as bubble.sh, or the stages' compute per
#    instruction more than BALANCE_MAX apart, as tutorial 05's check) are
#    repeated, up to ATTEMPTS;
#    a kind never timed quietly is reported as SKIP.
# 3. The simulator's bubble: each quietly timed run (1f1b too) is predicted
#    by `dtsim run --config` from its trace's configuration and a serial
#    profile of the same model made with --pipeline-schedule zb-h1 (one
#    process: each layer's B and W traced apart, so W is costed as
#    measured, not by its FLOPs); every stage's predicted bubble_fb lies
#    within TOL_SIM = 0.05 of the measured one (the issue's bound). In two
#    quiet runs on 2026-12-03 the differences were at most 0.012 (1f1b), 0.012
#    (interleaved), 0.013 (zb-h1) and 0.023 (zb-v); with W costed by its
#    FLOPs (share 0.46 of a block's backward where the CPU measures 0.30)
#    zb-h1 and zb-v missed by up to 0.05. A miss is retried once with a
#    fresh profile (the profile may have been disturbed).

TEST=zb.sh
. "${DT_SRCDIR:-.}/tests/mpi-lib.sh"

DTBENCH=$BUILDDIR/dtbench
[ -x "$DTBENCH" ] || { echo "$TEST: $DTBENCH not found" >&2; exit 99; }
: "${OMPI_MCA_btl_vader_eager_limit:=135168}"
: "${OMPI_MCA_btl_vader_segment_size:=33554432}"
export OMPI_MCA_btl_vader_eager_limit OMPI_MCA_btl_vader_segment_size

COMMON="--task add --task-digits 2 --seq-length 16 --train-iters 4 --lr-warmup-iters 1 --eval-iters 2 \
--eval-interval 0 --log-interval 4 --threads 1 --micro-batch-size 2 --global-batch-size 8"

# run NAME NP ARGS...: mpi_run with COMMON first (same, field: mpi-lib.sh)
run() { name=$1 np=$2; shift 2; mpi_run "$name" "$np" $COMMON "$@"; }

KINDS="zb-h1 interleaved-1f1b zb-v"
# 1. p = 2 and p = 4 against the serial run
run serial4 1 --num-layers 4 && run serial8 1 --num-layers 8
run p2-1f1b 2 --num-layers 4 --pipeline-model-parallel-size 2 --pipeline-schedule 1f1b
run p4-1f1b 4 --num-layers 8 --pipeline-model-parallel-size 4 --pipeline-schedule 1f1b
for k in $KINDS; do
    run p2-$k 2 --num-layers 4 --pipeline-model-parallel-size 2 --pipeline-schedule $k && same p2-$k serial4
    run p4-$k 4 --num-layers 8 --pipeline-model-parallel-size 4 --pipeline-schedule $k && same p4-$k serial8
done
same p2-zb-h1 p2-1f1b exact
same p4-zb-h1 p4-1f1b exact
# v = 3 chunks per stage: equal to the serial run, and the trace's config keeps v for dtsim
if run serial6 1 --num-layers 6 &&
   run p2-v3 2 --num-layers 6 --pipeline-model-parallel-size 2 --pipeline-schedule interleaved-1f1b \
       --virtual-pipeline-model-parallel-size 3 --trace "$TMP/v3.json"; then
    same p2-v3 serial6
    if "$BUILDDIR/dtsim" run --config "$TMP/v3.rank0.json" 2>&1 | grep -q "^3 model chunks per stage"; then
        echo "ok: dtsim run --config of the v = 3 run simulates 3 chunks per stage"
    else
        fail "dtsim run --config $TMP/v3.rank0.json does not simulate 3 chunks per stage"
    fi
fi

# 16-bit formats without clipping: the serial run's losses
for f in bf16 fp16; do
    run serial-$f 1 --num-layers 4 --$f --clip-grad 0 || continue
    for k in $KINDS; do
        [ $f = fp16 ] && [ $k != zb-v ] && continue # one kind is enough for the second format
        run p2-$f-$k 2 --num-layers 4 --pipeline-model-parallel-size 2 --pipeline-schedule $k --$f --clip-grad 0 &&
            same p2-$f-$k serial-$f losses
    done
done

# recomputation: the same as without
for k in $KINDS; do
    run p2-sel-$k 2 --num-layers 4 --pipeline-model-parallel-size 2 --pipeline-schedule $k --recompute-activations &&
        same p2-sel-$k p2-$k exact
done
run p2-full-zb-v 2 --num-layers 4 --pipeline-model-parallel-size 2 --pipeline-schedule zb-v \
    --recompute-granularity full --recompute-num-layers 1 && same p2-full-zb-v p2-zb-v exact

# tied embeddings, data and tensor parallelism
if run serial4-tie 1 --num-layers 4 --tie-embeddings-and-output-weights; then
    for k in zb-h1 zb-v; do
        run p2-tie-$k 2 --num-layers 4 --pipeline-model-parallel-size 2 --pipeline-schedule $k \
            --tie-embeddings-and-output-weights && same p2-tie-$k serial4-tie
    done
fi
run p2d2-zb-v 4 --num-layers 4 --pipeline-model-parallel-size 2 --pipeline-schedule zb-v && same p2d2-zb-v serial4
run t2p2-zb-h1 4 --num-layers 4 --pipeline-model-parallel-size 2 --tensor-model-parallel-size 2 \
    --pipeline-schedule zb-h1 && same t2p2-zb-h1 serial4 tp

# 2. the bubble against 1f1b's
NOISE_MAX=0.05
BALANCE_MAX=0.15
ATTEMPTS=3
MODEL="--num-layers 8 --hidden-size 128 --seq-length 64 --micro-batch-size 4 --global-batch-size 16 --threads 1 \
--lr-warmup-iters 1 --eval-iters 1 --eval-interval 0 --log-interval 100 --train-iters 20"
# measure K: 20 steps of schedule K; a quiet run leaves $TMP/b-K.txt, a disturbed one returns 1
measure() {
    rm -f "$TMP/b-$1".rank*.json "$TMP/b-$1.txt"
    if ! timeout 300 $MPIRUN -np 2 "$DTRAIN" $MODEL --pipeline-model-parallel-size 2 --pipeline-schedule "$1" \
            --trace "$TMP/b-$1.json" >"$TMP/b-$1.out" 2>&1 ||
       ! "$DTBENCH" bubbles --skip 1 "$TMP/b-$1.rank0.json" "$TMP/b-$1.rank1.json" >"$TMP/b-$1.all" 2>&1; then
        fail "bubble run $1:"; tail -n 20 "$TMP/b-$1.out" "$TMP/b-$1.all" >&2
        return 2
    fi
    for s in 0 1; do
        awk -v v="$(field "$TMP/b-$1.all" $s noise)" -v max=$NOISE_MAX 'BEGIN { exit !(v == "" || v > max) }' &&
            return 1
    done
    # the stages' compute per instruction within BALANCE_MAX of each other:
    # a run can read a low noise while another process held one core all
    # along, and then one stage idles the other's slowness (measured on
    # 2026-12-03: interleaved 0.024 / 0.278 with noise under 0.05)
    awk -v f0="$(field "$TMP/b-$1.all" 0 forward_ms)" -v b0="$(field "$TMP/b-$1.all" 0 backward_ms)" \
        -v f1="$(field "$TMP/b-$1.all" 1 forward_ms)" -v b1="$(field "$TMP/b-$1.all" 1 backward_ms)" -v max=$BALANCE_MAX \
        'BEGIN { c0 = f0 + b0; c1 = f1 + b1; exit !(c0 <= 0 || c1 <= 0 || (c0 > c1 ? c0 / c1 : c1 / c0) > 1 + max) }' &&
        return 1
    mv "$TMP/b-$1.all" "$TMP/b-$1.txt"
}
# mean_fb K: the mean of the two stages' bubble_fb
mean_fb() {
    awk -v a="$(field "$TMP/b-$1.txt" 0 bubble_fb)" -v b="$(field "$TMP/b-$1.txt" 1 bubble_fb)" \
        'BEGIN { printf "%.4f", (a + b) / 2 }'
}
for k in 1f1b $KINDS; do
    [ $k = 1f1b ] || [ -f "$TMP/b-1f1b.txt" ] || break # nothing to compare with: spare the time
    attempt=0
    while [ $attempt -lt $ATTEMPTS ]; do
        attempt=$((attempt + 1))
        measure $k && break
        [ $? = 2 ] && break
        echo "$k: bubble run $attempt disturbed by other processes (noise $(field "$TMP/b-$k.all" 0 noise)" \
            "$(field "$TMP/b-$k.all" 1 noise); compute per instruction" \
            "$(awk -v f="$(field "$TMP/b-$k.all" 0 forward_ms)" -v b="$(field "$TMP/b-$k.all" 0 backward_ms)" 'BEGIN { print f + b }')" \
            "$(awk -v f="$(field "$TMP/b-$k.all" 1 forward_ms)" -v b="$(field "$TMP/b-$k.all" 1 backward_ms)" 'BEGIN { print f + b }') ms), repeating"
    done
done
compared=0
if [ ! -f "$TMP/b-1f1b.txt" ]; then
    echo "SKIP: the bubbles: 1f1b was never timed quietly"
else
    ref=$(mean_fb 1f1b)
    for k in $KINDS; do
        if [ ! -f "$TMP/b-$k.txt" ]; then
            echo "SKIP: $k's bubble: never timed quietly"
            continue
        fi
        b=$(mean_fb $k)
        detail="stages $(field "$TMP/b-$k.txt" 0 bubble_fb) $(field "$TMP/b-$k.txt" 1 bubble_fb)"
        compared=$((compared + 1))
        if awk -v b="$b" -v r="$ref" 'BEGIN { exit !(b < r) }'; then
            echo "ok: $k: mean bubble_fb $b ($detail) below 1f1b's $ref over 20 steps, p = 2, m = 4"
        else
            fail "$k: mean bubble_fb $b ($detail) not below 1f1b's $ref (p = 2, m = 4, 20 steps)"
        fi
    done
fi

# 3. the simulator's prediction of each quietly timed bubble
DTSIM=$BUILDDIR/dtsim
TOL_SIM=0.05
# simfield K STAGE: dtsim's predicted bubble_fb of STAGE for run K
simfield() { sed -n "s/^ *stage $2: bubble [0-9.]*, fwd\/bwd-only \([0-9.]*\).*/\1/p" "$TMP/sim-$1.txt"; }
# predict: every timed run against the simulator; prints the misses, returns their number (0..)
predict() {
    miss=0
    for k in 1f1b $KINDS; do
        [ -f "$TMP/b-$k.txt" ] || continue
        if ! "$DTSIM" run --config "$TMP/b-$k.rank0.json" --profile "$TMP/prof.json" --train-iters 20 \
                >"$TMP/sim-$k.txt" 2>&1; then
            miss=$((miss + 1)); echo "  $k: dtsim failed: $(tail -n 1 "$TMP/sim-$k.txt")"; continue
        fi
        for s in 0 1; do
            m=$(field "$TMP/b-$k.txt" $s bubble_fb) p=$(simfield $k $s)
            if awk -v m="$m" -v p="$p" -v t=$TOL_SIM 'BEGIN { d = m - p; exit !(p != "" && d <= t && -d <= t) }'; then
                echo "  $k stage $s: measured bubble_fb $m, predicted $p"
            else
                miss=$((miss + 1)); echo "  $k stage $s: measured bubble_fb $m, predicted ${p:-none}: MISS (tolerance $TOL_SIM)"
            fi
        done
    done
    return $miss
}
predicted=0
if [ -f "$TMP/b-1f1b.txt" ]; then
    for attempt in 1 2; do
        if ! timeout 300 $MPIRUN -np 1 "$DTRAIN" $MODEL --train-iters 6 --pipeline-schedule zb-h1 \
                --trace "$TMP/prof.json" >"$TMP/prof.out" 2>&1; then
            fail "profile run:"; tail -n 20 "$TMP/prof.out" >&2; break
        fi
        predict >"$TMP/predict.txt" && { predicted=1; break; }
        [ $attempt = 1 ] && echo "a prediction missed; profiling again:" && cat "$TMP/predict.txt"
    done
    cat "$TMP/predict.txt"
    if [ $predicted = 1 ]; then
        echo "ok: every timed bubble within $TOL_SIM of dtsim's prediction"
    else
        fail "dtsim's bubble is more than $TOL_SIM from the measured one (above)"
    fi
fi

close_report
[ "$failures" -eq 0 ] || { echo "zb.sh: $failures failure(s)" >&2; exit 1; }
echo "zb.sh: interleaved-1f1b, zb-h1 and zb-v equal the serial run; $compared of 3 bubbles timed quietly, each below 1f1b's$([ $predicted = 1 ] && echo ", each within $TOL_SIM of dtsim's")"
