# figures.sh: tutorials/08-simulator's pictures, sourced by docs/figures.sh
# (make figures) in a work directory of its own, with $DTRAIN $DTSIM $DTVIZ
# $MPIRUN $SRCDIR, step() and FIGDIR defined. The commands are the README's.
T08_EAGER="OMPI_MCA_btl_vader_eager_limit=135168 OMPI_MCA_btl_vader_segment_size=33554432"
T08_MODEL="--num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --threads 1 --eval-interval 0 --eval-iters 1"
# A run disturbed by another process on this 2-core machine is predicted
# badly (README section 3); up to 5 tries, until dtsim validate's error is
# within 10%, so that the picture shows the model rather than the load.
t08_try=1
while :; do
    step "real run $t08_try: mpirun -np 2 dtrain, p = 2, 1f1b, m = 4, 20 steps" \
        env $T08_EAGER $MPIRUN -np 2 "$DTRAIN" --pipeline-model-parallel-size 2 $T08_MODEL \
        --global-batch-size 16 --train-iters 20 --trace real.json
    step "single-rank profile (dtrain --threads 1, 30 steps)" \
        "$DTRAIN" $T08_MODEL --global-batch-size 4 --train-iters 30 --trace profile.json
    step "its prediction: dtsim run --config real.rank0.json --profile profile.json" \
        "$DTSIM" run --config real.rank0.json --profile profile.json --hw "$SRCDIR/sim/hw/cpu-2core.json" --trace sim.json
    t08_err=$("$DTSIM" validate --profile profile.json --hw "$SRCDIR/sim/hw/cpu-2core.json" real.rank0.json |
        awk '/^t1 / { v = $10; sub(/%/, "", v); v += 0; print (v < 0 ? -v : v) }')
    echo "  dtsim validate: |error| $t08_err%"
    if awk -v e="${t08_err:-100}" 'BEGIN { exit !(e <= 10) }' || [ $t08_try -ge 5 ]; then break; fi
    t08_try=$((t08_try + 1))
    sleep 10
done
claim "real-vs-sim.png: dtsim validate's |error| of the run kept (%)" "$t08_err" 0 10
step "real-vs-sim.png" "$DTVIZ" real.json sim.json --zoom 0:0.3 --png "$FIGDIR/real-vs-sim.png"
# the README: the simulated steps repeat exactly (rank 0's optimizer steps
# equally spaced, to the nanosecond), the real ones wobble
t08_wobble() { spans 0:1 "$@" | awk -F'\t' '$1 == 0 && $2 == 2 { if (n++) { d = $4 - last; if (n == 2 || d > hi) hi = d
        if (n == 2 || d < lo) lo = d } last = $4 } END { if (n > 2) printf "%.6f", (hi - lo) / 1e6 }'; }
claim "real-vs-sim.png: simulated steps, longest - shortest (ms)" "$(t08_wobble sim.json)" 0 0.000001
claim "real-vs-sim.png: real steps, longest - shortest (ms)" "$(t08_wobble real.rank0.json real.rank1.json)" 0.001 100000
# ... and in both, stage 1 starts after stage 0's first forward (ms between;
# the real ranks' clocks are aligned as dtviz aligns them, on the end of
# step 0, which is right to a millisecond or so)
t08_start() { spans 0:1 "$@" | awk -F'\t' '$3 == "forward" && $6 == 0 && $7 == 0 && $1 == 0 && $5 > e0 { e0 = $5 }
        $3 == "forward" && $1 == 1 && (!n++ || $4 < s1) { s1 = $4 } END { printf "%.3f", (s1 - e0) / 1e6 }'; }
claim "real-vs-sim.png: rank 1's first forward after rank 0's first, real (ms)" "$(t08_start real.rank0.json real.rank1.json)" -1 100000
claim "real-vs-sim.png: the same, simulated (ms)" "$(t08_start sim.json)" 0 100000
step "real run: mpirun -np 4 dtrain, p = 2 x d = 2 on 2 cores, 20 steps" \
    env $T08_EAGER $MPIRUN -np 4 "$DTRAIN" --pipeline-model-parallel-size 2 $T08_MODEL \
    --global-batch-size 32 --train-iters 20 --trace pd.json
step "its prediction" \
    "$DTSIM" run --config pd.rank0.json --profile profile.json --hw "$SRCDIR/sim/hw/cpu-2core.json" --trace pdsim.json
step "contention.png" "$DTVIZ" pd.json pdsim.json --zoom 0:0.3 --size 1400x1100 --png "$FIGDIR/contention.png"
# what the text says of contention.png: the real boxes stretched, the two
# replicas of stage 0 (ranks 0 and 1) apart; in the simulation in lockstep
spans 0:0.3 pd.rank0.json pd.rank1.json pd.rank2.json pd.rank3.json >pd-win.spans
spans 0:0.3 pdsim.json >pdsim-win.spans
# the mean forward + backward box, in ms
t08_box() { awk -F'\t' '$3 == "forward" || $3 == "backward" { s += $5 - $4; n++ } END { if (n) printf "%.3f", s / n / 1e6 }' "$1"; }
# the largest |start on rank 0 - start on rank 1| of the same box, in ms
t08_apart() { awk -F'\t' '($3 == "forward" || $3 == "backward") && $1 <= 1 { k = $3 " " $6 " " $7 " " $8
        if ($1 == 0) a[k] = $4; else b[k] = $4 }
    END { m = -1; for (k in a) if (k in b) { d = a[k] - b[k]; if (d < 0) d = -d; if (d > m) m = d } if (m >= 0) printf "%.3f", m / 1e6 }' "$1"; }
claim "contention.png: mean real box / mean simulated box" "$(awk -v a="$(t08_box pd-win.spans)" -v b="$(t08_box pdsim-win.spans)" 'BEGIN { if (b > 0) printf "%.3f", a / b }')" 1.2 20
claim "contention.png: ranks 0 and 1 apart, real (ms, largest)" "$(t08_apart pd-win.spans)" 1 100000
claim "contention.png: ranks 0 and 1 apart, simulated (ms, largest)" "$(t08_apart pdsim-win.spans)" 0 0.001
