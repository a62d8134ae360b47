# figures.sh: tutorials/01-accumulation's picture, sourced by docs/figures.sh
# (`make figures`; FIGURES=tutorials/01-accumulation for this one alone), which
# defines $DTRAIN, $DTVIZ, step() and FIGDIR: section 2's two runs.
step "01: 1 x 128, 20 steps" "$DTRAIN" --train-iters 20 --micro-batch-size 128 --global-batch-size 128 \
    --summary big.json --trace big-trace.json
step "01: 8 x 16, 20 steps" "$DTRAIN" --train-iters 20 --micro-batch-size 16 --global-batch-size 128 \
    --summary acc.json --trace acc-trace.json
step "01: memory.png" "$DTVIZ" big-trace.json acc-trace.json --view memory --size 1400x600 --png "$FIGDIR/memory.png"
# the caption's peaks (13.14 and 1.64 MiB, check.sh checks the same on its
# runs): the activations the two panes draw, at their highest
t01_act() { sed -n 's/.*"name":"activation_bytes".*"value":\([0-9]*\)\..*/\1/p' "$1" | sort -n | tail -n 1; }
claim "memory.png: big-trace.json's activation_bytes at its highest" "$(t01_act big-trace.json)" 13778944 13778944
claim "memory.png: acc-trace.json's activation_bytes at its highest" "$(t01_act acc-trace.json)" 1722368 1722368
