# figures.sh: tutorials/00-quickstart's picture, sourced by docs/figures.sh
# (`make figures`; FIGURES=tutorials/00-quickstart for this one alone), which
# defines $DTRAIN, $DTVIZ, $SIZE, step() and FIGDIR. The README's commands.
step "00: dtrain --train-iters 200 --trace run.json" "$DTRAIN" --train-iters 200 --trace run.json
step "00: run.png" "$DTVIZ" run.json --zoom 0.5:0.515 --size 1400x420 --png "$FIGDIR/run.png"
