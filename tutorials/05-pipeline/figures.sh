# figures.sh: tutorials/05-pipeline's picture, sourced by docs/figures.sh
# (`make figures`; FIGURES=tutorials/05-pipeline for this one alone), which
# defines $DTRAIN, $DTSIM, $DTVIZ, $MPIRUN, $SIZE, step() and FIGDIR: the
# README's real 2-rank 1f1b run above its simulation (sections 3-5), and
# about one step of section 8's real zb-v run (zb-v.png).
: "${OMPI_MCA_btl_vader_eager_limit:=135168}"
: "${OMPI_MCA_btl_vader_segment_size:=33554432}"
export OMPI_MCA_btl_vader_eager_limit OMPI_MCA_btl_vader_segment_size
T05="--num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --threads 1 --eval-interval 0 --eval-iters 1"
step "05: mpirun -np 2 dtrain, 1f1b, p = 2, m = 8, 10 steps" \
    $MPIRUN -np 2 "$DTRAIN" --pipeline-model-parallel-size 2 --pipeline-schedule 1f1b $T05 --global-batch-size 32 \
    --train-iters 10 --trace pp.json
step "05: the single-rank profile" "$DTRAIN" $T05 --global-batch-size 4 --train-iters 30 --trace profile.json
step "05: dtsim run --config pp.rank0.json --profile profile.json" \
    "$DTSIM" run --config pp.rank0.json --profile profile.json --trace sim.json
# steps 4-6 of the 10 real ones, above the first 3 simulated ones
step "05: pp-real.png, pp-sim.png" "$DTVIZ" pp.json --zoom 0.4:0.7 --size 1400x420 --png "$FIGDIR/pp-real.png"
step "05: pp-sim.png" "$DTVIZ" sim.json --zoom 0:0.3 --size 1400x420 --png "$FIGDIR/pp-sim.png"
# section 8: zb-v, p = 2, m = 4, 20 steps; about one step from the middle of the run
step "05: mpirun -np 2 dtrain, zb-v, p = 2, m = 4, 20 steps" \
    $MPIRUN -np 2 "$DTRAIN" --pipeline-model-parallel-size 2 --pipeline-schedule zb-v $T05 --global-batch-size 16 \
    --train-iters 20 --trace m4-zb-v.json
step "05: zb-v.png" "$DTVIZ" m4-zb-v.json --zoom 0.5:0.56 --size 1400x420 --png "$FIGDIR/zb-v.png"
