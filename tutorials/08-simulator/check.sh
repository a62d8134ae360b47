#!/bin/sh
# check.sh: runs tutorials/08-simulator/README.md's commands and checks the
# outputs it quotes, within the ranges it states. Run by tests/tutorials.sh
# (make check), or alone: DT_BUILDDIR=build DT_SRCDIR=. sh check.sh
# TUTORIAL_QUICK=1 shortens two things: `./dtbench simval` runs with
# --quick (3 real runs instead of 14), and the 4-rank runs of sections 6
# and 7 train 10 steps instead of 20.
# Timing lower bounds (1 ms, 0.1 ms, 0.1 s) only say a time was measured: the
# fused attention and the vectorized exp (2026-12-06) made steps 2x faster, and
# faster CPUs will go further; upper bounds still catch a hang or a slow path.
TUTORIAL_LIB=1
. "${DT_SRCDIR:-$(dirname "$0")/../..}/tests/tutorials.sh"
# Open MPI settings of the multi-rank tests, eager messages, $MPIRUN
tut_mpi

# 2-3. A real run, a profile, the prediction and the comparison. A run or a
# profile that another process disturbed is predicted badly (section 3):
# when the error or the compute ratio leaves its range, the run and the
# profile are taken again, twice at most, and the last attempt is judged.
attempt=0
while :; do
    attempt=$((attempt + 1))
    tut_cmd real mpirun --oversubscribe --allow-run-as-root -np 2 ./dtrain --pipeline-model-parallel-size 2 --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 16 --threads 1 --train-iters 20 --eval-interval 0 --eval-iters 1 --trace real.json
    tut_cmd prof ./dtrain --threads 1 --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 4 --train-iters 30 --eval-interval 0 --eval-iters 1 --trace profile.json
    tut_cmd sim ./dtsim run --config real.rank0.json --profile profile.json --hw sim/hw/cpu-2core.json --trace sim.json
    tut_cmd val ./dtsim validate --profile profile.json --hw sim/hw/cpu-2core.json real.rank0.json
    err=$(tut_num val '^t1 p2 d1 1f1b m=4 *[0-9.]* ms *[0-9.]* ms *\([-+0-9.]*\)%.*')
    cm=$(awk '/^t1 p2 d1 1f1b m=4 / { print $12 }' val.out)
    cp=$(awk '/^t1 p2 d1 1f1b m=4 / { print $14 }' val.out)
    ratio=$(tut_ratio "$cm" "$cp")
    if awk -v e="$err" -v r="$ratio" 'BEGIN { exit !(e != "" && r != "" && e >= -75 && e <= 20 && r >= 0.7 && r <= 3) }' ||
        [ "$attempt" -ge 3 ]; then
        break
    fi
    echo "  attempt $attempt: error $err%, measured / predicted compute $ratio: a disturbed run or profile, again"
done
tut_line real '^parallel: grid t=1 x d=1 x p=2 .*schedule 1f1b, 4 micro-batches per step per pipeline$'
tut_line real '^trace: real\.json$'
tut_file real.rank0.json
tut_file real.rank1.json
tut_line prof '^trace: profile\.json$'
tut_file profile.json
tut_line sim '^scenario: custom \(4 layers, width 128, 4 heads, vocab 256\), B=4 T=64 m=4 \(global batch 16\), 20 steps$'
tut_line sim '^layout:   t=1 p=2 d=1 \(2 ranks\), schedule 1f1b, exchange ring, fp32$'
tut_line sim '^machine:  cpu-2core; cost: profile profile\.json$'
tut_line sim '^bubble per stage \(idle share of its step\), formula \(p-1\)/\(m\+p-1\) = 0\.2000:$'
sim_ms=$(tut_num sim '^step time \([0-9.]*\) ms.*')
# lower bounds only say a time was measured: the step got faster with the
# vectorized exp and the fused attention of 2026-12-06 (36.2 ms measured,
# 36.7 predicted on the 2-core Xeon, under the 40 ms these bounds had)
tut_range "predicted step time (ms)" "$sim_ms" 1 1000
sb0=$(tut_num sim '^  stage 0: bubble [0-9.]*, fwd.bwd-only \([0-9.]*\)$')
tut_range "predicted stage 0 bubble, forward/backward only" "$sb0" 0.15 0.40
tut_file sim.json
tut_line val '^t1 p2 d1 1f1b m=4 '
meas_ms=$(tut_num val '^t1 p2 d1 1f1b m=4 *\([0-9.]*\) ms.*')
pred_ms=$(tut_num val '^t1 p2 d1 1f1b m=4 *[0-9.]* ms *\([0-9.]*\) ms.*')
tut_range "measured step time (ms)" "$meas_ms" 1 1500
tut_range "validate's prediction - dtsim run's (ms)" "$(awk -v a="$pred_ms" -v b="$sim_ms" 'BEGIN { printf "%.3f", a - b }')" -0.01 0.01
tut_range "validate: error of the prediction (%)" "$err" -75 20
tut_range "validate: measured / predicted compute" "$ratio" 0.7 3

# 4. Side by side.
if [ -x ./dtviz ]; then
    tut_cmd viz ./dtviz real.json sim.json --zoom 0:0.3 --png real-vs-sim.png
    tut_file real-vs-sim.png
else
    echo "./dtviz real.json sim.json --zoom 0:0.3 --png real-vs-sim.png" >>"$TUT_LOG"
    echo "  (this build has no dtviz: SDL2 missing; not run)"
fi

# 5. What if: 1024 GPUs. Roofline costs: deterministic, exact lines.
BIG="--num-layers 32 --hidden-size 768 --num-attention-heads 12 --max-position-embeddings 1024 --seq-length 1024 --micro-batch-size 1"
tut_cmd h100 ./dtsim run $BIG --micro-batches 64 --pipeline-model-parallel-size 16 --data-parallel-size 64 --train-iters 2 --hw sim/hw/h100-ib.json
tut_line h100 '^scenario: custom \(32 layers, width 768, 12 heads, vocab 256\), B=1 T=1024 m=64 \(global batch 4096\), 2 steps$'
tut_line h100 '^layout:   t=1 p=16 d=64 \(1024 ranks\), schedule 1f1b, exchange ring, fp32$'
tut_line h100 '^step time 73\.029 ms \(rank 0: compute 33\.898, optimizer 0\.163, comm 20\.267 ms per step\)$'
tut_line h100 '^bubble per stage \(idle share of its step\), formula \(p-1\)/\(m\+p-1\) = 0\.1899:$'
tut_line h100 '^  stage 0: bubble 0\.3731, fwd/bwd-only 0\.3761$'
tut_line h100 '^  stage 1: bubble 0\.3878, fwd/bwd-only 0\.3906$'
tut_line h100 '^comm per step on rank 0: dp allreduce 2\.395 ms, pipeline waits 17\.872 ms, '
tut_line h100 '^peak memory 1241\.30 MiB \(rank 0\)$'
tut_cmd h200 ./dtsim run $BIG --micro-batches 64 --pipeline-model-parallel-size 16 --data-parallel-size 64 --train-iters 2 --hw sim/hw/h200-nvlink.json
tut_line h200 '^step time 62\.329 ms \(rank 0: compute 25\.127, optimizer 0\.114, comm 18\.386 ms per step\)$'
tut_line h200 '^  stage 0: bubble 0\.4214, fwd/bwd-only 0\.4240$'

# the same job in bf16: 16-bit activations between stages
tut_cmd h100bf ./dtsim run $BIG --micro-batches 64 --pipeline-model-parallel-size 16 --data-parallel-size 64 --train-iters 2 --hw sim/hw/h100-ib.json --bf16
tut_line h100bf '^layout:   t=1 p=16 d=64 \(1024 ranks\), schedule 1f1b, exchange ring, bf16$'
tut_line h100bf '^step time 68\.374 ms \(rank 0: compute 33\.898, optimizer 0\.163, comm 15\.611 ms per step\)$'
tut_line h100bf '^  stage 0: bubble 0\.3143, fwd/bwd-only 0\.3176$'
tut_line h100bf '^comm per step on rank 0: dp allreduce 2\.395 ms, pipeline waits 13\.216 ms, '

# the layouts of 1024 GPUs at a global batch of 4096 sequences
for pd in 2:512:75.950:0.3986:0.1111 4:256:69.159:0.3277:0.1579 8:128:66.994:0.2998:0.1795 \
          16:64:68.374:0.3143:0.1899 32:32:73.989:0.3709:0.1950; do
    p=${pd%%:*}; r=${pd#*:}; d=${r%%:*}; r=${r#*:}; ms=${r%%:*}; r=${r#*:}; b=${r%%:*}; f=${r#*:}
    tut_cmd lay$p ./dtsim run $BIG --global-batch-size 4096 --pipeline-model-parallel-size $p --data-parallel-size $d --train-iters 2 --hw sim/hw/h100-ib.json --bf16
    tut_line lay$p "^layout:   t=1 p=$p d=$d \\(1024 ranks\\), schedule 1f1b, exchange ring, bf16\$"
    tut_line lay$p "^step time $(echo "$ms" | sed 's/\./\\./') ms "
    tut_line lay$p "^bubble per stage .* = $(echo "$f" | sed 's/\./\\./'):\$"
    tut_line lay$p "^  stage 0: bubble $(echo "$b" | sed 's/\./\\./'), "
done
tut_line lay2 'dp allreduce 18\.274 ms, '
tut_cmd sweep ./dtsim sweep $BIG --pipeline-model-parallel-size 8 --data-parallel-size 128 --train-iters 2 --hw sim/hw/h100-ib.json --sweep micro-batches=16,32,64 --sweep link-bandwidth-scale=0.5,1,4 --bf16
tut_line sweep '^ m  bw_scale     step_ms     bubble0  bubble_max     formula     comm_ms    peak_MiB$'
tut_line sweep '^16       0\.5      55\.179      0\.5322      0\.5378      0\.3043      19\.412      998\.67$'
tut_line sweep '^32         1      66\.994      0\.2998      0\.3081      0\.1795      14\.477      998\.67$'
tut_line sweep '^32         4      61\.912      0\.2174      0\.2267      0\.1795       9\.395      998\.67$'
tut_line sweep '^64         1     102\.454      0\.1963      0\.2058      0\.0986      16\.438      998\.67$'
tut_line sweep '^64         4      96\.051      0\.1297      0\.1401      0\.0986      10\.035      998\.67$'

# 6. How far to trust it: the validation matrix ...
tut_cmd simval --quick "--quick --repeats 1 --iters 20" ./dtbench simval
tut_line simval '^calibration \(the only inputs the simulator is fitted to\)'
tut_line simval '^validation \(never used for fitting\): [0-9]+ runs'
tut_line simval '^goal: mean \|error\| < 3% \([0-9.]+% over [0-9]+ runs: ratio [0-9.]+\) and none over 8% .*: (MET|NOT MET)$'
# the quick set grew to 11 with issue 38's SP and CP runs; the full set to 44 with the emulated cluster (root), 40 without
if [ "$TUTORIAL_QUICK" = 1 ]; then nruns=11; else nruns="4[04]"; fi
tut_line simval "over $nruns runs: ratio"
mae=$(tut_num simval '^goal: mean |error| < 3% (\([0-9.]*\)% over.*')
tut_range "simval: mean absolute error (%)" "$mae" 0 95
tut_range "simval: 1f1b-m4 measured step (ms)" "$(tut_num simval '^1f1b-m4  *pipeline  *\([0-9.]*\) ms.*')" 1 1000
tut_range "simval: ps-sync error (%)" "$(tut_num simval '^ps-sync  *parameter-server .* \([-+][0-9.]*\)% |.*')" -60 60
# ... and a run that breaks an assumption: 4 ranks on 2 cores. Its ratio
# to the prediction compares a contended run with a profile; when another
# process slowed the profile (or sped nothing up) the ratio falls below
# 1.2: the run and the profile are taken again, twice at most, and the
# last attempt is judged (as in sections 2-3).
attempt=0
while :; do
    attempt=$((attempt + 1))
    tut_cmd pd --quick "--train-iters 10" mpirun --oversubscribe --allow-run-as-root -np 4 ./dtrain --pipeline-model-parallel-size 2 --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 32 --threads 1 --train-iters 20 --eval-interval 0 --eval-iters 1 --trace pd.json
    tut_cmd pdval ./dtsim validate --profile profile.json --hw sim/hw/cpu-2core.json pd.rank0.json
    pd_meas=$(tut_num pdval '^t1 p2 d2 1f1b m=4 ring *\([0-9.]*\) ms.*')
    pd_pred=$(tut_num pdval '^t1 p2 d2 1f1b m=4 ring *[0-9.]* ms *\([0-9.]*\) ms.*')
    pd_ratio=$(tut_ratio "$pd_meas" "$pd_pred")
    if awk -v r="$pd_ratio" 'BEGIN { exit !(r != "" && r >= 1.2 && r <= 12) }' || [ "$attempt" -ge 3 ]; then
        break
    fi
    echo "  attempt $attempt: 4 ranks on 2 cores, measured / predicted $pd_ratio: a disturbed run or profile, again"
    tut_cmd prof ./dtrain --threads 1 --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 4 --train-iters 30 --eval-interval 0 --eval-iters 1 --trace profile.json
    # the 2-rank prediction from the new profile too, for the comparison below
    tut_cmd sim ./dtsim run --config real.rank0.json --profile profile.json --hw sim/hw/cpu-2core.json --trace sim.json
    sim_ms=$(tut_num sim '^step time \([0-9.]*\) ms.*')
done
tut_line pd '^parallel: grid t=1 x d=2 x p=2 .*schedule 1f1b, 4 micro-batches per step per pipeline$'
tut_line pdval '^t1 p2 d2 1f1b m=4 ring '
tut_range "4 ranks on 2 cores: measured / predicted step time" "$pd_ratio" 1.2 12
tut_range "4-rank prediction - 2-rank prediction (ms)" "$(awk -v a="$pd_pred" -v b="$sim_ms" 'BEGIN { printf "%.3f", a - b }')" 0 5
tut_cmd pdshare ./dtsim validate --profile profile.json --hw sim/hw/cpu-2core.json --devices-per-node 4 --cores-per-node 2 pd.rank0.json
pd_share=$(tut_num pdshare '^t1 p2 d2 1f1b m=4 ring *[0-9.]* ms *\([0-9.]*\) ms.*')
tut_range "shared cores: prediction / prediction without the flag" "$(tut_ratio "$pd_share" "$pd_pred")" 1.2 2.0
tut_range "shared cores: measured / predicted step time" "$(tut_ratio "$pd_meas" "$pd_share")" 0.7 4
tut_cmd pdsim ./dtsim run --config pd.rank0.json --profile profile.json --hw sim/hw/cpu-2core.json --trace pdsim.json
tut_line pdsim '^layout:   t=1 p=2 d=2 \(4 ranks\), schedule 1f1b, exchange ring, fp32$'
if [ -x ./dtviz ]; then
    tut_cmd pdviz ./dtviz pd.json pdsim.json --zoom 0:0.3 --size 1400x1100 --png contention.png
    tut_file contention.png
else
    echo "./dtviz pd.json pdsim.json --zoom 0:0.3 --size 1400x1100 --png contention.png" >>"$TUT_LOG"
fi
# what the text says of contention.png: the real boxes stretched, the two
# replicas of stage 0 (ranks 0 and 1) apart; in the simulation in lockstep
tut_spans pd-win.spans 0:0.3 pd.rank0.json pd.rank1.json pd.rank2.json pd.rank3.json
tut_spans pdsim-win.spans 0:0.3 pdsim.json
# the mean forward + backward box, in ms
t08_box() { awk -F'\t' '$3 == "forward" || $3 == "backward" { s += $5 - $4; n++ } END { if (n) printf "%.3f", s / n / 1e6 }' "$1"; }
# the largest |start on rank 0 - start on rank 1| of the same box, in ms
t08_apart() { awk -F'\t' '($3 == "forward" || $3 == "backward") && $1 <= 1 { k = $3 " " $6 " " $7 " " $8
        if ($1 == 0) a[k] = $4; else b[k] = $4 }
    END { m = -1; for (k in a) if (k in b) { d = a[k] - b[k]; if (d < 0) d = -d; if (d > m) m = d } if (m >= 0) printf "%.3f", m / 1e6 }' "$1"; }
tut_range "contention.png: mean real box / mean simulated box" "$(tut_ratio "$(t08_box pd-win.spans)" "$(t08_box pdsim-win.spans)")" 1.2 20
tut_range "contention.png: ranks 0 and 1 apart, real (ms, largest)" "$(t08_apart pd-win.spans)" 1 100000
tut_range "contention.png: ranks 0 and 1 apart, simulated (ms, largest)" "$(t08_apart pdsim-win.spans)" 0 0.001

# 7. Everything at once: t = 2 x p = 2, bf16, selective recomputation.
tut_cmd td --quick "--train-iters 10" mpirun --oversubscribe --allow-run-as-root -np 4 ./dtrain --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --bf16 --recompute-activations --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 16 --threads 1 --train-iters 20 --eval-interval 0 --eval-iters 1 --summary 3d-summary.json --trace 3d.json
tut_line td '^parallel: grid t=2 x d=1 x p=2 \(tensor, data, pipeline; rank = t_i \+ 2\*\(d_i \+ 1\*p_i\)\), schedule 1f1b, 4 micro-batches per step per pipeline$'
tut_line td '^  rank 3: tensor 1, data 0, stage 1$'
tut_line td '^precision: bf16 storage, FP32 master weights and accumulation, no loss scaling$'
tut_line td '^memory: selective activation recomputation \(attention core: its log-sum-exp\)$'
tut_line td 'peak activation memory 2\.77 MiB$'
tut_file 3d-summary.json
tut_cmd tdprof ./dtrain --threads 1 --num-layers 4 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 4 --train-iters 30 --eval-interval 0 --eval-iters 1 --bf16 --trace profile-bf16.json
tut_cmd tdsim ./dtsim run --config 3d.rank0.json --profile profile-bf16.json --hw sim/hw/cpu-2core.json --trace 3d-sim.json
tut_line tdsim '^layout:   t=2 p=2 d=1 \(4 ranks\), schedule 1f1b, exchange ring, bf16, selective recomputation$'
tut_file 3d-sim.json
# the stages' activation peaks: the runtime's summary against dtsim's memory counter (pids 0 and 2: tensor rank 0 of each stage)
td_real=$(sed -n '/"stage_peak_activation_bytes"/,/]/p' 3d-summary.json | tr -d ' \n' | sed 's/.*\[\(.*\)\].*/\1/' | tr ',' ' ')
td_sim=
for pid in 0 2; do
    td_sim="$td_sim $(grep -o "\"name\":\"memory\"[^}]*\"pid\":$pid,[^}]*\"activations\":[0-9.]*" 3d-sim.json |
        sed 's/.*"activations"://' | awk 'BEGIN { m = 0 } { if ($1 + 0 > m) m = $1 + 0 } END { printf "%d", m }')"
done
if [ "$(echo $td_real)" = "2906112 2058240" ] && [ "$(echo $td_sim)" = "$(echo $td_real)" ]; then
    echo "  ok: stage activation peaks, real $(echo $td_real), dtsim $(echo $td_sim)"
else
    tut_fail "stage activation peaks: real '$(echo $td_real)' (README: 2906112 2058240), dtsim '$(echo $td_sim)'"
fi
tut_cmd tdval ./dtsim validate --profile profile-bf16.json --hw sim/hw/cpu-2core.json 3d.rank0.json
tut_line tdval '^t2 p2 d1 1f1b m=4 '
td_err=$(tut_num tdval '^t2 p2 d1 1f1b m=4 *[0-9.]* ms *[0-9.]* ms *\([-+0-9.]*\)%.*')
tut_range "3-D run: error of the prediction (%)" "$td_err" -90 -20
td_cm=$(awk '/^t2 p2 d1 1f1b m=4 / { print $12 }' tdval.out)
td_cp=$(awk '/^t2 p2 d1 1f1b m=4 / { print $14 }' tdval.out)
tut_range "3-D run: measured / predicted compute" "$(tut_ratio "$td_cm" "$td_cp")" 1.3 4
TD="--num-layers 32 --hidden-size 768 --num-attention-heads 12 --max-position-embeddings 1024 --seq-length 1024 --micro-batch-size 1 --micro-batches 64 --tensor-model-parallel-size 4 --pipeline-model-parallel-size 16 --data-parallel-size 16 --bf16"
tut_cmd tdnone ./dtsim run $TD --train-iters 2 --hw sim/hw/h100-ib.json
tut_cmd tdsel ./dtsim run $TD --recompute-activations --train-iters 2 --hw sim/hw/h100-ib.json
tut_cmd tdfull ./dtsim run $TD --recompute-granularity full --train-iters 2 --hw sim/hw/h100-ib.json
tut_line tdnone '^step time 52\.322 ms '
tut_line tdnone '^peak memory 346\.73 MiB \(rank 0\)$'
tut_line tdsel '^step time 52\.322 ms '
tut_line tdsel '^peak memory 346\.35 MiB \(rank 0\)$'
tut_line tdfull '^step time 65\.045 ms '
tut_line tdfull '^peak memory 222\.85 MiB \(rank 0\)$'

# 8. Thousands of GPUs: Megatron-LM's 1 T run (t 8 x p 64 x d 6, m 512) on a100-ib (deterministic: verbatim).
BIGT="--num-layers 128 --hidden-size 25600 --num-attention-heads 160 --vocab-size 51200 --max-position-embeddings 2048 --seq-length 2048 --micro-batch-size 1 --micro-batches 512 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 64 --data-parallel-size 6 --bf16 --recompute-granularity full --train-iters 2 --hw sim/hw/a100-ib.json"
tut_cmd tt ./dtsim run $BIGT --summary big.json
tut_line tt '^step time 116123\.545 ms \(rank 0: compute 97765\.348, optimizer 38\.574, comm 26683\.337 ms per step\)$'
tut_line tt '^  stage 0: bubble 0\.1573, fwd/bwd-only 0\.1577$'
tut_line tt '^  stage 1: bubble 0\.1634, fwd/bwd-only 0\.1637$'
tut_line tt '^  stage 63: bubble 0\.1103, fwd/bwd-only 0\.1106$'
tut_line tt '^peak memory 72301\.46 MiB \(rank 0\)$'
tut_range "1 T job: stage_compute_imbalance" "$(tut_json big.json stage_compute_imbalance)" 1.0635 1.0636
tut_cmd ttw ./dtsim run $BIGT --no-vocab-parallel
tut_line ttw '^dtsim: warning: rank 0 \(stage 0\) peaks at 89801\.46 MiB, more than the device.s memory'
tut_line ttw '^dtsim: warning: the stages. compute differs by 45\.4% '
tut_line ttw '^step time 154341\.016 ms '
tut_line ttw '^  stage 0: bubble 0\.3674, fwd/bwd-only 0\.3678$'

# Exercise: 512 and 2048 GPUs; the world allreduce's 2(n-1) alpha.
tut_cmd ex32 ./dtsim run $BIG --micro-batches 64 --pipeline-model-parallel-size 16 --data-parallel-size 32 --train-iters 2 --hw sim/hw/h100-ib.json
tut_cmd ex128 ./dtsim run $BIG --micro-batches 64 --pipeline-model-parallel-size 16 --data-parallel-size 128 --train-iters 2 --hw sim/hw/h100-ib.json
tut_line ex32 '^step time 64\.800 ms \(rank 0: compute 33\.898, optimizer 0\.163, comm 20\.229 ms per step\)$'
tut_line ex128 '^step time 89\.432 ms \(rank 0: compute 33\.898, optimizer 0\.163, comm 20\.286 ms per step\)$'

tut_finish
