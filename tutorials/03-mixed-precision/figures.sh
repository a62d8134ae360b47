# figures.sh: tutorials/03-mixed-precision's pictures, sourced by
# docs/figures.sh (make figures) with $DTRAIN, $DTSIM, $DTVIZ, $SIZE, step()
# and FIGDIR (this folder) defined, in a work directory of its own. The
# commands are the README's (sections 3, 4 and 7). POSIX sh.
#   scale-overflow.png   fp16 from a loss scale of 2^20, window 20: overflows, halvings, growth
#   scale-collapse.png   fp16 at lr 2 without clipping: the scale collapses to its minimum
#   real-vs-sim.png      a real fp16 run's loss scale above dtsim's prediction from another run

# The runs' overflows depend on every FP32 rounding: redrawn on another
# machine or build they are other runs, so the claims below check what the
# README says of the pictures' shape on any build, and the README names the
# machine its quoted figures come from.
step "real run: fp16 from loss scale 2^20, window 20, 150 steps" \
    "$DTRAIN" --threads 1 --fp16 --initial-loss-scale 1048576 --loss-scale-window 20 --train-iters 150 \
    --eval-interval 0 --micro-batch-size 16 --global-batch-size 16 --trace fp16.json
step "scale-overflow.png" "$DTVIZ" fp16.json --view scale --size $SIZE --png "$FIGDIR/scale-overflow.png"
# the README: the overflows of its section 3, 4 to 20 on any build (check.sh's derivation)
claim "scale-overflow.png: overflows in the trace" "$(grep -c '"name":"overflow ' fp16.json)" 4 20

step "real run: fp16 at lr 2 without clipping, 200 steps (the scale collapses)" \
    "$DTRAIN" --threads 1 --fp16 --lr 2 --clip-grad 0 --train-iters 200 --eval-interval 0 \
    --micro-batch-size 16 --global-batch-size 16 --log-interval 25 --min-loss-scale-patience 0 \
    --trace collapse.json --summary collapse-summary.json
step "scale-collapse.png" "$DTVIZ" collapse.json --view scale --size $SIZE --png "$FIGDIR/scale-collapse.png"
# the banner: at the minimum within the first 100 steps (step 26 on the
# README's Xeon), 100-200 overflows there (174 there)
claim "scale-collapse.png: overflows at the minimum scale" "$(grep -c '"name":"overflow .*"at_min":1' collapse.json)" 100 200
claim "scale-collapse.png: the first step at the minimum (from 0)" "$(grep '"name":"overflow .*"at_min":1' collapse.json |
    head -n 1 | sed 's/.*"iter":\([0-9]*\),.*/\1/')" 0 99

AMP="--threads 1 --fp16 --seq-length 32 --task-digits 3 --micro-batch-size 8 --global-batch-size 8 --train-iters 80 --lr-warmup-iters 2 --eval-iters 2 --eval-interval 0"
step "real run A (fit): seed 11, fp16 from 2^24, window 10" \
    "$DTRAIN" $AMP --seed 11 --initial-loss-scale 16777216 --trace a10.json --loss-scale-window 10
step "real run B (target): seed 12, fp16 from 2^20, window 10" \
    "$DTRAIN" $AMP --seed 12 --initial-loss-scale 1048576 --trace b10.json --summary b10-summary.json \
    --loss-scale-window 10
step "dtsim: predict run B from run A's gradients" \
    "$DTSIM" run --config b10.json --grad-trace a10.json --profile a10.json --trace sim10.json
step "real-vs-sim.png" "$DTVIZ" b10.json sim10.json --view scale --size $SIZE --png "$FIGDIR/real-vs-sim.png"
# the README: both descend from 2^20 alike (the initial weights' first
# four overflows, the same on every build); later ones differ by build
t03_overflows() { grep '"name":"overflow' "$1" | sed 's/.*"iter":\([0-9]*\),"loss_scale":\([0-9]*\)\..*/\1:\2/' | head -n 4 | tr '\n' ' '; }
claim "real-vs-sim.png: run B's first four overflows ($(t03_overflows b10.json))" \
    "$(t03_overflows b10.json | grep -c '^0:1048576 1:1048576 2:524288 3:262144 $')" 1 1
claim "real-vs-sim.png: the draw's first four ($(t03_overflows sim10.json))" \
    "$(t03_overflows sim10.json | grep -c '^0:1048576 1:1048576 2:524288 3:262144 $')" 1 1
