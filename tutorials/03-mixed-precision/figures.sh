# figures.sh: tutorials/03-mixed-precision's pictures, sourced by
# docs/figures.sh (make figures) with $DTRAIN, $DTSIM, $DTVIZ, $SIZE, step()
# and FIGDIR (this folder) defined, in a work directory of its own. The
# commands are the README's (sections 3, 4 and 7). POSIX sh.
#   scale-overflow.png   fp16 from a loss scale of 2^20, window 20: overflows, halvings, growth
#   scale-collapse.png   fp16 at lr 0.5 without clipping: the scale collapses to its minimum
#   real-vs-sim.png      a real fp16 run's loss scale above dtsim's prediction from another run

step "real run: fp16 from loss scale 2^20, window 20, 150 steps" \
    "$DTRAIN" --threads 1 --fp16 --initial-loss-scale 1048576 --loss-scale-window 20 --train-iters 150 \
    --eval-interval 0 --micro-batch-size 16 --global-batch-size 16 --trace fp16.json
step "scale-overflow.png" "$DTVIZ" fp16.json --view scale --size $SIZE --png "$FIGDIR/scale-overflow.png"

step "real run: fp16 at lr 0.5 without clipping, 200 steps (the scale collapses)" \
    "$DTRAIN" --threads 1 --fp16 --lr 0.5 --clip-grad 0 --train-iters 200 --eval-interval 0 \
    --micro-batch-size 16 --global-batch-size 16 --log-interval 25 --trace collapse.json \
    --summary collapse-summary.json
step "scale-collapse.png" "$DTVIZ" collapse.json --view scale --size $SIZE --png "$FIGDIR/scale-collapse.png"

AMP="--threads 1 --fp16 --seq-length 32 --task-digits 3 --micro-batch-size 8 --global-batch-size 8 --train-iters 80 --lr-warmup-iters 2 --eval-iters 2 --eval-interval 0"
step "real run A (fit): seed 11, fp16 from 2^24, window 10" \
    "$DTRAIN" $AMP --seed 11 --initial-loss-scale 16777216 --trace a10.json --loss-scale-window 10
step "real run B (target): seed 12, fp16 from 2^20, window 10" \
    "$DTRAIN" $AMP --seed 12 --initial-loss-scale 1048576 --trace b10.json --summary b10-summary.json \
    --loss-scale-window 10
step "dtsim: predict run B from run A's gradients" \
    "$DTSIM" run --config b10.json --grad-trace a10.json --profile a10.json --trace sim10.json
step "real-vs-sim.png" "$DTVIZ" b10.json sim10.json --view scale --size $SIZE --png "$FIGDIR/real-vs-sim.png"
