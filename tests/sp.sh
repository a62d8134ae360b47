#!/bin/sh
# sp.sh: Megatron sequence parallelism (--sequence-parallel, lib/parallel/sp.c):
# whole runs against the serial run, the activation memory it saves
# against tensor parallelism alone (the formula of docs/tensor-parallel.md,
# to the byte), its collectives in the trace, and its refusals; each
# failing run's output is shown.
TEST=sp.sh
. "${DT_SRCDIR:-.}/tests/mpi-lib.sh"

# Training runs end with the serial run's training and validation loss and
# weights fingerprint within tensor parallelism's tolerance (5e-4 relative,
# derived at close in tests/mpi-lib.sh; sequence parallelism sums the same
# row-parallel partial products, in a reduce-scatter instead of an
# allreduce, and each LayerNorm's gain and bias gradients in t parts; under
# --bf16/--fp16 against the serial run in the same precision, within
# compose.sh's 16-bit tolerance, 1e-2: each rounding of a stored tensor to
# 8 (bf16) or 11 (fp16) bits, 2^-9 = 2e-3 and 2^-12 = 2.4e-4 relative,
# falls on values that differ by FP32 rounding between the runs; measured
# 1.8e-3 for bf16, as tensor parallelism alone).
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
    cname=sp-n$n_-$prec_-$(echo "$*" | tr -d ' -' | cut -c1-60)
    mpi_run "$cname" "$n_" $COMMON $pflag --micro-batch-size 2 --sequence-parallel "$@" --trace "$TMP/$cname-trace.json" ||
        return 0
    vs_serial "$cname" $prec_
    grep -q '"sequence_parallel": true' "$TMP/$cname.json" || fail "$cname: the summary does not say sequence_parallel"
}
cell 2 fp32 --tensor-model-parallel-size 2
cell 2 fp32 --tensor-model-parallel-size 2 --recompute-granularity full
cell 2 bf16 --tensor-model-parallel-size 2 --recompute-activations
cell 4 fp32 --tensor-model-parallel-size 4 --untie-embeddings-and-output-weights
cell 4 fp32 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
cell 4 bf16 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1
cell 4 fp32 --tensor-model-parallel-size 2 --use-distributed-optimizer
cell 4 fp32 --tensor-model-parallel-size 2 --zero-stage 3

# Collectives: per block and micro-batch, 2 all-gathers and 2
# reduce-scatters forward, 4 all-gathers (the output gradients and W's
# LayerNorm outputs again), 2 reduce-scatters and 2 LayerNorm-gradient
# allreduces backward; the embedding 1 reduce-scatter and 1 all-gather,
# the head 1 all-gather, 1 reduce-scatter and 1 LayerNorm-gradient sum;
# no allreduce of f and g. 2 blocks, 4 steps of 4 micro-batches.
name=sp-n2-fp32-tensormodelparallelsize2
if [ -f "$TMP/$name-trace.rank1.json" ]; then
    L=2 mb=16
    for spec in "tp all-gather:$(((6 * L + 2) * mb))" "tp reduce-scatter:$(((4 * L + 2) * mb))" \
            "tp layernorm grad allreduce:$(((2 * L + 1) * mb))" "tp allreduce:0"; do
        ev=${spec%%:*} want=${spec#*:}
        for r in 0 1; do
            got=$(grep "\"name\":\"$ev" "$TMP/$name-trace.rank$r.json" | grep -c '"iter":[0-3][,}]')
            [ "$got" = "$want" ] || fail "$name: rank $r traced $got '$ev', expected $want"
        done
    done
    echo "ok: $name: per rank $(((6 * L + 2) * mb)) all-gathers, $(((4 * L + 2) * mb)) reduce-scatters," \
        "$(((2 * L + 1) * mb)) LayerNorm-gradient sums, no allreduce of f or g"
fi

# Memory: what sequence parallelism saves against tensor parallelism alone,
# in each rank's peak activation bytes (same runs but the flag), equals
# docs/tensor-parallel.md's formula to the byte. A micro-batch of N = 4 x 16
# tokens, n = N/t on a rank, D = N - n rows no longer held, C = 64, L = 2
# blocks (the sizes keep every tensor a multiple of the arena's 16-float
# alignment, so the formula needs no padding terms):
#   none, selective (FP32):  4 [L (2DC + 4D) + DC]
#     res2, out and the 4 LayerNorm statistics of each block, the embedding output
#   16-bit storage:          4 [L (DC + 4D) + DC/2 + DC + (2DC + 4D) + DC]
#     packed res2, out (2 bytes), the statistics (4), the last block's
#     output in FP32, the embedding output, one block's FP32 working set
#     and its unpacked input
#   full recomputation (K = 1, G = L groups): 4 [G DC + DC + K (2DC + 4D)]
#     the groups' outputs, the embedding output, one group's rebuilt blocks
MEM="--task add --task-digits 2 --seq-length 16 --train-iters 2 --eval-iters 1 --eval-interval 0 --log-interval 2 \
--threads 1 --micro-batch-size 4 --global-batch-size 8"
C=64 L=2 N=64
# mem T PRECISION RECOMPUTE: the two runs and the difference of their peaks
mem() {
    t_=$1 prec_=$2 rc_=$3
    pflag=; [ $prec_ = bf16 ] && pflag=--bf16
    rflag=; [ $rc_ != none ] && rflag="--recompute-granularity $rc_"
    m_=mem-t$t_-$prec_-$rc_
    mpi_run $m_-tp $t_ $MEM $pflag $rflag --tensor-model-parallel-size $t_ || return 0
    mpi_run $m_-sp $t_ $MEM $pflag $rflag --tensor-model-parallel-size $t_ --sequence-parallel || return 0
    D=$((N - N / t_))
    case $prec_:$rc_ in
    *:full) want=$((4 * (L * D * C + D * C + (2 * D * C + 4 * D)))) ;;
    fp32:*) want=$((4 * (L * (2 * D * C + 4 * D) + D * C))) ;;
    *) want=$((4 * (L * (D * C + 4 * D) + D * C / 2 + D * C + (2 * D * C + 4 * D) + D * C))) ;;
    esac
    a=$(jlist "$TMP/$m_-tp.json" stage_peak_activation_bytes) b=$(jlist "$TMP/$m_-sp.json" stage_peak_activation_bytes)
    if [ -n "$a" ] && [ -n "$b" ] && [ $((a - b)) = "$want" ]; then
        echo "ok: $m_: peak activation bytes $a tensor parallel, $b with sequence parallelism: $want saved, the formula's"
    else
        fail "$m_: peak activation bytes '$a' tensor parallel, '$b' with sequence parallelism:" \
            "saved $((${a:-0} - ${b:-0})), formula $want"
    fi
}
mem 2 fp32 none
mem 2 fp32 full
mem 2 bf16 selective
mem 4 fp32 selective
mem 4 bf16 none

expect_error "--sequence-parallel needs --tensor-model-parallel-size > 1" 1 --sequence-parallel
expect_error "--sequence-parallel needs the vocabulary split" 2 --tensor-model-parallel-size 2 --sequence-parallel \
    --no-vocab-parallel
expect_error "--sequence-parallel: --tensor-model-parallel-size 2 does not divide --seq-length 15" 2 \
    --tensor-model-parallel-size 2 --sequence-parallel --seq-length 15

close_report
[ "$failures" -eq 0 ] || exit 1
echo "sp.sh: sequence parallelism equals the serial run and saves what its formula says"
