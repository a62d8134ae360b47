# figures.sh: tutorials/00-quickstart's picture, sourced by docs/figures.sh
# (`make figures`; FIGURES=tutorials/00-quickstart for this one alone), which
# defines $DTRAIN, $DTVIZ, $SIZE, step() and FIGDIR. The README's commands.
step "00: dtrain --train-iters 200 --trace run.json" "$DTRAIN" --train-iters 200 --trace run.json
step "00: run.png" "$DTVIZ" run.json --zoom 0.5:0.515 --size 1400x420 --png "$FIGDIR/run.png"
# the caption's claims (check.sh checks the same on its own run)
spans 0.5:0.515 run.json >run.spans
spans 0.5:0.515 all=1 run.json >run-all.spans
claim "optimizer steps wholly in run.png's window" \
    "$(awk -F'\t' '$3 == "optimizer" && $9 { n++ } END { print n + 0 }' run.spans)" 2 4
claim "run.png: backward / forward time of the steps it shows" "$(awk -F'\t' '
    $3 == "optimizer" && $9 { whole[$6] = 1 }
    $3 == "forward" { f[$6] += $5 - $4 } $3 == "backward" { b[$6] += $5 - $4 }
    END { for (i in whole) { sf += f[i]; sb += b[i] } if (sf > 0) printf "%.2f", sb / sf }' run-all.spans)" 1.05 2.5
