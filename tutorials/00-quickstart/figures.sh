# figures.sh: tutorials/00-quickstart's picture, sourced by docs/figures.sh
# (`make figures`; FIGURES=tutorials/00-quickstart for this one alone), which
# defines $DTRAIN, $DTVIZ, $SIZE, step() and FIGDIR. The README's commands.
step "00: dtrain --train-iters 200 --trace run.json" "$DTRAIN" --train-iters 200 --trace run.json
step "00: run.png" "$DTVIZ" run.json --zoom 0.5:0.515 --size 1400x420 --png "$FIGDIR/run.png"
# the caption's claims (check.sh checks the same on its own run)
spans 0.5:0.515 run.json >run.spans
spans 0.5:0.515 all=1 run.json >run-all.spans
. "$FIGDIR/claims.sh" # t00_steps, t00_bf
claim "optimizer steps wholly in run.png's window" "$(t00_steps run.spans)" 2 4
claim "run.png: backward / forward time of the steps it shows" "$(t00_bf run-all.spans)" 1.05 2.5
