# figures.sh: tutorials/02-recomputation's pictures, sourced by
# docs/figures.sh (`make figures`; FIGURES=tutorials/02-recomputation for
# these alone), which defines $DTRAIN, $DTVIZ, $SIZE, step() and FIGDIR.
# The README's section 3 runs (none and full) and section 4's pictures:
#   timeline.png  a step of each run, none above full: the recompute boxes
#   memory.png    their activation memory (memory view)
R02="--threads 1 --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 16 --train-iters 30 --eval-interval 0 --eval-iters 1 --log-interval 10"
step "02: dtrain, 8 blocks, no recomputation" "$DTRAIN" $R02 --trace none.json --summary none-summary.json
step "02: dtrain, 8 blocks, full recomputation, K = 1" "$DTRAIN" $R02 --trace full.json --summary full-summary.json \
    --recompute-granularity full --recompute-num-layers 1
step "02: timeline.png" "$DTVIZ" none.json full.json --zoom 0.5:0.56 --size 1400x520 --png "$FIGDIR/timeline.png"
# what the text says of timeline.png: nearly two steps of each run in its
# window, and in full.json each block's recompute before its backward
spans 0.5:0.56 all=1 none.json >none-all.spans
spans 0.5:0.56 all=1 full.json >full-all.spans
. "$FIGDIR/claims.sh" # t02_steps, t02_late
for t02 in none full; do
    claim "timeline.png: mean steps in $t02.json's window" "$(t02_steps $t02-all.spans)" 1.4 2.2
done
claim "timeline.png: full.json's recompute spans that end after their block's backward starts" "$(t02_late full-all.spans)" 0 0
step "02: memory.png" "$DTVIZ" none.json full.json --view memory --size 1400x600 --png "$FIGDIR/memory.png"
