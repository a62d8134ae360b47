# figures.sh: tutorials/06-tensor-parallel's picture, sourced by
# docs/figures.sh (make figures) in a work directory of its own, with
# $DTRAIN $DTVIZ $MPIRUN step() and FIGDIR (this folder) defined.
#   tp.png  a real t = 2 run (2 ranks), 2% of it around the middle
#           (timeline): forwards and backwards with their f/g allreduces
# The same commands as the README's sections 2 and 3.
step "real run: t = 2, 4 blocks of width 128, 30 steps" \
    $MPIRUN -np 2 "$DTRAIN" --tensor-model-parallel-size 2 --num-layers 4 \
    --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 8 \
    --train-iters 30 --eval-interval 0 --eval-iters 2 --log-interval 10 --summary tp.json --trace tp-trace.json
step "tp.png" "$DTVIZ" tp-trace.json --zoom 0.5:0.52 --size 1400x400 --png "$FIGDIR/tp.png"
