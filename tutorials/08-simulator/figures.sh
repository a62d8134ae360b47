# figures.sh: tutorials/08-simulator's pictures, sourced by docs/figures.sh
# (make figures) in a work directory of its own, with $DTRAIN $DTSIM $DTVIZ
# $MPIRUN $SRCDIR, step() and FIGDIR defined. The commands are the README's.
T08_EAGER="OMPI_MCA_btl_vader_eager_limit=135168 OMPI_MCA_btl_vader_segment_size=33554432"
T08_MODEL="--num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --threads 1 --eval-interval 0 --eval-iters 1"
# A run disturbed by another process on this 2-core machine is predicted
# badly (README section 3); up to 5 tries, until dtsim validate's error is
# within 10%, so that the picture shows the model rather than the load.
t08_try=1
while :; do
    step "real run $t08_try: mpirun -np 2 dtrain, p = 2, 1f1b, m = 4, 20 steps" \
        env $T08_EAGER $MPIRUN -np 2 "$DTRAIN" --pipeline-model-parallel-size 2 $T08_MODEL \
        --global-batch-size 16 --train-iters 20 --trace real.json
    step "single-rank profile (dtrain --threads 1, 30 steps)" \
        "$DTRAIN" $T08_MODEL --global-batch-size 4 --train-iters 30 --trace profile.json
    step "its prediction: dtsim run --config real.rank0.json --profile profile.json" \
        "$DTSIM" run --config real.rank0.json --profile profile.json --hw "$SRCDIR/sim/hw/cpu-2core.json" --trace sim.json
    t08_err=$("$DTSIM" validate --profile profile.json --hw "$SRCDIR/sim/hw/cpu-2core.json" real.rank0.json |
        awk '/^t1 / { v = $10; sub(/%/, "", v); v += 0; print (v < 0 ? -v : v) }')
    echo "  dtsim validate: |error| $t08_err%"
    if awk -v e="${t08_err:-100}" 'BEGIN { exit !(e <= 10) }' || [ $t08_try -ge 5 ]; then break; fi
    t08_try=$((t08_try + 1))
    sleep 10
done
step "real-vs-sim.png" "$DTVIZ" real.json sim.json --zoom 0:0.3 --png "$FIGDIR/real-vs-sim.png"
step "real run: mpirun -np 4 dtrain, p = 2 x d = 2 on 2 cores, 20 steps" \
    env $T08_EAGER $MPIRUN -np 4 "$DTRAIN" --pipeline-model-parallel-size 2 $T08_MODEL \
    --global-batch-size 32 --train-iters 20 --trace pd.json
step "its prediction" \
    "$DTSIM" run --config pd.rank0.json --profile profile.json --hw "$SRCDIR/sim/hw/cpu-2core.json" --trace pdsim.json
step "contention.png" "$DTVIZ" pd.json pdsim.json --zoom 0:0.3 --size 1400x1100 --png "$FIGDIR/contention.png"
