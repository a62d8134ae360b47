# figures.sh: tutorials/11-composition's picture, sourced by docs/figures.sh
# (make figures) in a work directory of its own, with $DTRAIN $DTSIM $DTVIZ
# $MPIRUN step() and FIGDIR (this folder) defined.
#   compose.png  the breakdown view: the real t = 2 x p = 2 x d = 2 run
#                (8 ranks, bf16, selective recomputation, 1f1b, ZeRO-1)
#                above its dtsim prediction, to one scale
# The same commands as the README's sections 2, 4 and 5.
M="--bf16 --recompute-activations --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 \
--micro-batch-size 4 --global-batch-size 16 --train-iters 4 --eval-interval 0 --eval-iters 2 --log-interval 1 \
--clip-grad 0 --threads 1"
step "real run: t = 2 x p = 2 x d = 2, ZeRO-1, bf16, selective recomputation, 4 steps" \
    $MPIRUN -np 8 "$DTRAIN" --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
    --use-distributed-optimizer --pipeline-schedule 1f1b $M --summary run-summary.json --trace run.json
step "profile: the same model in one process" "$DTRAIN" $M --summary serial.json --trace prof.json
step "its simulation" "$DTSIM" run --config run.rank0.json --profile prof.json --hw "$SRCDIR/sim/hw/cpu-2core.json" \
    --devices-per-node 8 --cores-per-node 2 --trace sim.json
step "compose.png" "$DTVIZ" run.json sim.json --view breakdown --png "$FIGDIR/compose.png"
# the figures the README quotes for this picture's run (the means over ranks)
"$DTSIM" analyze --compare run.json sim.json >cmp.txt 2>&1 || { cat cmp.txt >&2; exit 1; }
claim "compose.png: measured step, mean over ranks (ms)" "$(awk '$1 == "A" && $2 == "mean" { print $3 }' cmp.txt)" 1 2000
claim "compose.png: predicted step (ms)" "$(awk '$1 == "B" && $2 == "mean" { print $3 }' cmp.txt)" 1 1000
