# figures.sh: tutorials/10-zero's picture, sourced by docs/figures.sh (make
# figures) in a work directory of its own, with $DTRAIN $DTVIZ $MPIRUN
# step() and FIGDIR (this folder) defined.
#   z3.png  a real ZeRO-3 run on 4 ranks, 6% of it around the middle
#           (timeline): each layer's all-gathers before its forward and
#           backward, the reduce-scatters after, on every rank's comm row
# The same commands as the README's sections 2 and 4.
step "real run: --zero-stage 3, 4 ranks, 4 blocks of width 128, 20 steps" \
    $MPIRUN -np 4 "$DTRAIN" --zero-stage 3 --bf16 --clip-grad 0 --bucket-size-mb 0 --num-layers 4 \
    --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 8 \
    --train-iters 20 --eval-interval 0 --eval-iters 2 --log-interval 10 --summary z3.json --trace z3-trace.json
step "z3.png" "$DTVIZ" z3-trace.json --zoom 0.5:0.56 --size 1400x400 --png "$FIGDIR/z3.png"
# what the text says of z3.png: about one step; on every rank, every forward
# and backward in the window: an all-gather at the start of the forward, an
. "$FIGDIR/claims.sh" # t10_order
spans 0.5:0.56 all=1 z3-trace.rank0.json z3-trace.rank1.json z3-trace.rank2.json z3-trace.rank3.json >z3-all.spans
claim "z3.png: mean steps in its window" "$(awk -F'\t' '$1 == "window" { w = $3 - $2 }
    $3 == "optimizer" && $1 == 0 { if (!n++) first = $4; last = $4 }
    END { if (n > 1 && w > 0) printf "%.2f", w / ((last - first) / (n - 1)) }' z3-all.spans)" 0.8 1.6
claim "z3.png: forwards and backwards out of that order" "$(t10_order z3-all.spans)" 0 0
