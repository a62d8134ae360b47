#!/bin/sh
# check.sh: runs tutorials/05-pipeline/README.md's commands and checks the
# outputs it quotes, within the ranges it states. Run by tests/tutorials.sh
# (make check), or alone: DT_BUILDDIR=build DT_SRCDIR=. sh check.sh
# TUTORIAL_QUICK changes nothing here: every run is already short.
# Timing lower bounds (1 ms, 0.1 ms, 0.1 s) only say a time was measured: the
# fused attention and the vectorized exp (2026-12-06) made steps 2x faster, and
# faster CPUs will go further; upper bounds still catch a hang or a slow path.
TUTORIAL_LIB=1
. "${DT_SRCDIR:-$(dirname "$0")/../..}/tests/tutorials.sh"
# Open MPI settings of the multi-rank tests, eager messages, $MPIRUN
tut_mpi

# 2. The schedules, printed.
tut_cmd gpipe ./dtrain --print-schedule --pipeline-model-parallel-size 4 --global-batch-size 6 --micro-batch-size 1 --pipeline-schedule gpipe
tut_line gpipe '^schedule gpipe: p=4 m=6 steps=1$'
tut_line gpipe '^stage 0: F0 F1 F2 F3 F4 F5 B0 B1 B2 B3 B4 B5 OPT$'
tut_line gpipe '^bubble fraction \(p-1\)/\(m\+p-1\) = 0\.3333$'
tut_cmd 1f1b ./dtrain --print-schedule --pipeline-model-parallel-size 4 --global-batch-size 6 --micro-batch-size 1 --pipeline-schedule 1f1b
tut_line 1f1b '^schedule 1f1b: p=4 m=6 steps=1$'
tut_line 1f1b '^stage 0: F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 OPT$'
tut_line 1f1b '^stage 3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 OPT$'
tut_line 1f1b '^bubble fraction \(p-1\)/\(m\+p-1\) = 0\.3333$'

# 3. A real 2-stage run.
tut_cmd pp mpirun --oversubscribe --allow-run-as-root -np 2 ./dtrain --pipeline-model-parallel-size 2 --pipeline-schedule 1f1b --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 32 --threads 1 --train-iters 10 --eval-interval 0 --eval-iters 1 --trace pp.json
tut_line pp 'schedule 1f1b, 8 micro-batches per step per pipeline$'
tut_line pp '^  rank 1: tensor 0, data 0, stage 1$'
tut_line pp '^trace: pp\.json$'
tut_file pp.rank0.json
tut_file pp.rank1.json
tut_cmd bub ./dtbench bubbles pp.rank0.json pp.rank1.json
tut_line bub '^pp\.rank0\.json stage=0 steps=10 mean_steps=9 bubble='
tut_line bub '^pp\.rank1\.json stage=1 steps=10 mean_steps=9 bubble='
b0=$(tut_num bub '^pp\.rank0\.json .* bubble=\([0-9.]*\) .*')
fb0=$(tut_num bub '^pp\.rank0\.json .* bubble_fb=\([0-9.]*\) .*')
fb1=$(tut_num bub '^pp\.rank1\.json .* bubble_fb=\([0-9.]*\) .*')
# A stage's own share moves with the load: a stage that another process
# slows idles the same time while its own work grows, so its share falls
# (CI read 0.0794, then 0.0431, for stage 0), and the other stage waits
# longer. With per-micro-batch times a and b (a >= b) the two shares are
# b/(m a + b) and 1 - m b/(m a + b); their mean is 1/(m+1) = 0.1111 when
# the stages are equal and grows with any imbalance, so the mean is what
# tells a real bubble from none (noise= is 0.01-0.02); the floor 0.08
# leaves a quarter below the formula for the stages' measuring windows.
# Each stage alone: 0.02-0.60. The ceiling of the mean is 0.45: with
# other processes busy on a 2-core machine the means read 0.13-0.30.
# Plain bubble= counts the optimizer's update as work, so it is the
# smaller of the two.
tut_range "stage 0 bubble, forward/backward only" "$fb0" 0.02 0.60
tut_range "stage 1 bubble, forward/backward only" "$fb1" 0.02 0.60
tut_range "mean of the stages' bubbles, forward/backward only" "$(awk -v a="$fb0" -v b="$fb1" 'BEGIN { printf "%.4f", (a + b) / 2 }')" 0.08 0.45
tut_range "stage 0 bubble_fb - bubble" "$(awk -v a="$fb0" -v b="$b0" 'BEGIN { printf "%.4f", a - b }')" 0 0.1
# stage 1 waits for stage 0 inside OPTIM_STEP: that wait is the trace's grad norm
# allreduce (comm), not optim_step, so its bubble too is bubble_fb less the update
b1=$(tut_num bub '^pp\.rank1\.json .* bubble=\([0-9.]*\) .*')
tut_range "stage 1 bubble_fb - bubble" "$(awk -v a="$fb1" -v b="$b1" 'BEGIN { printf "%.4f", a - b }')" 0 0.1
meas_ms=$(tut_num bub '^pp\.rank0\.json .* window_ms=\([0-9.]*\) .*')
tut_range "measured step time, stage 0 window (ms)" "$meas_ms" 1 2000

if [ -x ./dtviz ]; then
    tut_cmd viz ./dtviz pp.json --png pp.png
    tut_file pp.png
else
    echo "./dtviz pp.json --png pp.png" >>"$TUT_LOG"
    echo "  (this build has no dtviz: SDL2 missing; ./dtviz pp.json --png pp.png not run)"
fi

# 4. The simulator's prediction.
tut_cmd prof ./dtrain --threads 1 --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 4 --train-iters 30 --eval-interval 0 --eval-iters 1 --trace profile.json
tut_line prof '^trace: profile\.json$'
tut_file profile.json
tut_cmd sim ./dtsim run --config pp.rank0.json --profile profile.json
tut_line sim '^scenario: custom \(8 layers, width 128, 4 heads, vocab 256\), B=4 T=64 m=8 \(global batch 32\), 10 steps$'
tut_line sim '^layout:   t=1 p=2 d=1 \(2 ranks\), schedule 1f1b'
tut_line sim '^bubble per stage \(idle share of its step\), formula \(p-1\)/\(m\+p-1\) = 0\.1111:$'
sim_ms=$(tut_num sim '^step time \([0-9.]*\) ms.*')
tut_range "predicted step time (ms)" "$sim_ms" 1 1500
# The floor is 0.3: make check runs this beside another test on 2 cores,
# which slows the two ranks' run (measured here up to 640 ms a step with
# two busy processes beside it, against 285 quiet) more than the one-rank
# profile run taken at another moment; quiet, the ratio is 0.9-1.0.
tut_range "predicted / measured step time" "$(tut_ratio "$sim_ms" "$meas_ms")" 0.3 1.3
sb0=$(tut_num sim '^  stage 0: bubble \([0-9.]*\), .*')
tut_range "predicted stage 0 bubble" "$sb0" 0.05 0.25

# 5. PipeDream.
tut_cmd pd ./dtrain --print-schedule --pipeline-model-parallel-size 4 --global-batch-size 4 --micro-batch-size 1 --pipeline-schedule pipedream
tut_line pd '^schedule pipedream: p=4 m=4 steps=2$'
tut_line pd '^bubble fraction \(p-1\)/\(steps\*m\+p-1\) = 0\.0003 over 2500 steps \(filled and drained once per run\)$'
tut_line pd '^stage 0: F0@v0 F1@v0 F2@v0 F3@v0 B0@v0 OPT F4@v1 B1@v0 OPT F5@v2 B2@v0 OPT F6@v3 B3@v0 OPT F7@v4 B4@v1 OPT B5@v2 OPT B6@v3 OPT B7@v4 OPT$'
tut_line pd '^stage 3: F0@v0 B0@v0 OPT F1@v1 B1@v1 OPT'
# the text: on stage 0, three updates between micro-batch 4's forward and its backward
tut_range "stage 0: OPTs between F4 and B4" "$(sed -n 's/^stage 0: //p' pd.out |
    awk '{ for (i = 1; i <= NF; i++) { if ($i ~ /^F4@/) on = 1; else if ($i ~ /^B4@/) on = 0; else if (on && $i == "OPT") n++ } }
         END { print n + 0 }')" 3 3

# 7. Vertical sync.
tut_cmd vs ./dtrain --print-schedule --pipeline-model-parallel-size 4 --global-batch-size 4 --micro-batch-size 1 --pipeline-schedule pipedream-vsync
tut_line vs '^schedule pipedream-vsync: p=4 m=4 steps=2$'
tut_line vs '^stage 0: F0@v0 F1@v0 F2@v0 F3@v0 B0@v0 OPT F4@v1 B1@v0 OPT F5@v2 B2@v0 OPT F6@v3 B3@v0 OPT F7@v4 B4@v1 OPT B5@v2 OPT B6@v3 OPT B7@v4 OPT$'
tut_line vs '^stage 3: F0@v0 B0@v0 OPT F1@v0 B1@v0 OPT F2@v0 B2@v0 OPT F3@v0 B3@v0 OPT F4@v1 B4@v1 OPT F5@v2 B5@v2 OPT F6@v3 B6@v3 OPT F7@v4 B7@v4 OPT$'

# 8. The family: 1F1B, interleaved, ZB-H1, ZB-V (tests/zb.sh's equal-cost model, p = 2, m = 4).
FAM="--num-layers 8 --global-batch-size 16 --micro-batch-size 4"
for k in 1f1b interleaved-1f1b zb-h1 zb-v; do
    tut_cmd "ps-$k" ./dtrain --print-schedule --pipeline-model-parallel-size 2 $FAM --pipeline-schedule $k
done
tut_line ps-1f1b '^stage 0: F0 F1 B0 F2 B1 F3 B2 B3 OPT$'
tut_line ps-1f1b '^stage 1: F0 B0 F1 B1 F2 B2 F3 B3 OPT$'
tut_line ps-1f1b '^bubble fraction \(p-1\)/\(m\+p-1\) = 0\.2000$'
tut_line ps-interleaved-1f1b '^schedule interleaved-1f1b: p=2 m=4 steps=1 v=2 \(stage r.s chunk c is virtual stage c\*p\+r\)$'
tut_line ps-interleaved-1f1b '^stage 0: F0\.0 F1\.0 F0\.1 F1\.1 F2\.0 B0\.1 F3\.0 B1\.1 F2\.1 B0\.0 F3\.1 B1\.0 B2\.1 B3\.1 B2\.0 B3\.0 OPT$'
tut_line ps-interleaved-1f1b '^stage 1: F0\.0 F1\.0 F0\.1 B0\.1 F1\.1 B1\.1 F2\.0 B0\.0 F3\.0 B1\.0 F2\.1 B2\.1 F3\.1 B3\.1 B2\.0 B3\.0 OPT$'
tut_line ps-interleaved-1f1b '^bubble fraction \(p-1\)/\(v\*m\+p-1\) = 0\.1111 with equal F, B and W \(1f1b: \(p-1\)/\(m\+p-1\) = 0\.2000\)$'
tut_line ps-zb-h1 '^stage 0: F0 F1 B0 W0 F2 B1 W1 F3 B2 W2 B3 W3 OPT$'
tut_line ps-zb-h1 '^stage 1: F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3 OPT$'
tut_line ps-zb-h1 '^bubble fraction I/\(3m\+I\), I = max\(p-1, 2p-m-1\) = 0\.0769 with equal F, B and W'
tut_line ps-zb-v '^schedule zb-v: p=2 m=4 steps=1 v=2 \(stage r.s chunk 0 is virtual stage r, chunk 1 is 2p-1-r\)$'
tut_line ps-zb-v '^stage 0: F0\.0 F1\.0 F2\.0 F0\.1 B0\.1 W0\.1 F1\.1 B1\.1 W1\.1 F3\.0 B0\.0 W0\.0 F2\.1 B2\.1 W2\.1 B1\.0 W1\.0 F3\.1 B3\.1 W3\.1 B2\.0 W2\.0 B3\.0 W3\.0 OPT$'
tut_line ps-zb-v '^stage 1: F0\.0 F0\.1 F1\.0 F1\.1 B0\.1 W0\.1 F2\.0 B0\.0 W0\.0 F2\.1 B1\.1 W1\.1 F3\.0 B1\.0 W1\.0 F3\.1 B2\.1 W2\.1 B2\.0 B3\.1 B3\.0 W2\.0 W3\.1 W3\.0 OPT$'
tut_line ps-zb-v '^bubble fraction I/\(6m\+I\), I = max\(p-1, 4p-2m-2\) = 0\.0400 with equal F, B and W'

# the real runs as the README prints them (its continuation lines joined)
for k in 1f1b interleaved-1f1b zb-h1 zb-v; do
    tut_cmd "m4-$k" mpirun --oversubscribe --allow-run-as-root -np 2 ./dtrain --pipeline-model-parallel-size 2 --pipeline-schedule $k --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 16 --threads 1 --train-iters 20 --eval-interval 0 --eval-iters 1 --trace m4-$k.json --summary m4-$k-sum.json
done
tut_cmd fambub ./dtbench bubbles m4-1f1b.rank0.json m4-1f1b.rank1.json m4-interleaved-1f1b.rank0.json m4-interleaved-1f1b.rank1.json m4-zb-h1.rank0.json m4-zb-h1.rank1.json m4-zb-v.rank0.json m4-zb-v.rank1.json
# fam_field K STAGE KEY: KEY= of run K's stage line
fam_field() { tut_num fambub "^m4-$1\.rank$2\.json stage=$2 steps=20 mean_steps=19 .* $3=\([-0-9.na]*\).*"; }
# Each stage's bubble_fb: 0-0.6 under any load (a slowed stage reads less,
# the other more, as in section 3). The README's ranges come from quiet
# runs; here only the mean of the two stages is held to a range, the
# README's plus about 0.05 either way, and only in a quiet run: noise <=
# 0.05 on both stages (the bound of tests/zb.sh, which repeats disturbed
# runs) and their compute per instruction (forward_ms + backward_ms)
# within 15% of each other. A run can read a low noise while another
# process holds one core all along: measured 0.372 / 0.099 (interleaved,
# rank 1's compute 44% longer) and 0.338 / 0.053 (zb-v); with both cores
# evenly slowed 5x, 1f1b read 0.276 / 0.188, mean 0.232 (compute 11%
# apart). Other runs are reported as disturbed and skipped.
: >quiet-means.txt
for kr in "1f1b 0.16 0.28" "interleaved-1f1b 0.09 0.19" "zb-h1 0.11 0.22" "zb-v 0.03 0.15"; do
    set -- $kr
    n0=$(fam_field $1 0 noise) n1=$(fam_field $1 1 noise)
    fb0=$(fam_field $1 0 bubble_fb) fb1=$(fam_field $1 1 bubble_fb)
    tut_range "$1 stage 0 bubble_fb (any load)" "$fb0" 0 0.6
    tut_range "$1 stage 1 bubble_fb (any load)" "$fb1" 0 0.6
    mean=$(awk -v a="$fb0" -v b="$fb1" 'BEGIN { printf "%.4f", (a + b) / 2 }')
    c0=$(awk -v f="$(fam_field $1 0 forward_ms)" -v b="$(fam_field $1 0 backward_ms)" 'BEGIN { print f + b }')
    c1=$(awk -v f="$(fam_field $1 1 forward_ms)" -v b="$(fam_field $1 1 backward_ms)" 'BEGIN { print f + b }')
    if awk -v a="$n0" -v b="$n1" -v c="$c0" -v d="$c1" 'BEGIN { m = c > d ? c : d
            exit !(a != "" && b != "" && a <= 0.05 && b <= 0.05 && m > 0 && (c - d) / m <= 0.15 && (d - c) / m <= 0.15) }'; then
        tut_range "$1 mean of the stages' bubble_fb (quiet run)" "$mean" $2 $3
        echo "$1 $mean" >>quiet-means.txt # compared with dtsim's below
    else
        echo "  ($1: noise $n0 / $n1, compute $c0 / $c1 ms: a disturbed run, its quiet range not checked)"
    fi
done
# peak saved activations per stage (the summaries): shapes only, exact
fam_peak() { tr -d ' \n' <"m4-$1-sum.json" | sed -n 's/.*"stage_peak_activation_bytes":\[\([0-9]*\),\([0-9]*\)\].*/\1 \2/p'; }
for kp in "1f1b 10813440 5670912" "interleaved-1f1b 13713408 8308736" "zb-h1 15138816 19992576" "zb-v 13568000 14204928"; do
    set -- $kp
    if [ "$(fam_peak $1)" = "$2 $3" ]; then echo "  ok: $1 peak activation bytes per stage $2 $3"
    else tut_fail "$1: peak activation bytes per stage '$(fam_peak $1)', the README says $2 $3"; fi
done
# the README's arithmetic on them: interleaved over 1f1b per stage, zb-h1's bytes kept from B to W
set -- $(fam_peak 1f1b) $(fam_peak interleaved-1f1b) $(fam_peak zb-h1)
fam_eq() { if [ "$2" = "$3" ]; then echo "  ok: $1 = $2"; else tut_fail "$1 = $2, the README says $3"; fi; }
fam_eq "interleaved / 1f1b saved activations, stage 0" "$(awk -v a="$3" -v b="$1" 'BEGIN { printf "%.2f", a / b }')" 1.27
fam_eq "interleaved / 1f1b saved activations, stage 1" "$(awk -v a="$4" -v b="$2" 'BEGIN { printf "%.2f", a / b }')" 1.47
fam_eq "zb-h1 stage 0 above 1f1b's" "$(( $5 - $1 ))" 4325376
fam_eq "zb-h1 stage 1 above twice 1f1b's" "$(( $6 - 2 * $2 ))" 8650752
# sends per rank and step: the trace's send_act and send_grad spans (one event a line) over 20 steps
for kc in "1f1b 4 4" "interleaved-1f1b 12 12" "zb-h1 4 4" "zb-v 8 16"; do
    set -- $kc
    c0=$(( $(grep -c '"send_' "m4-$1.rank0.json") / 20 )) c1=$(( $(grep -c '"send_' "m4-$1.rank1.json") / 20 ))
    if [ "$c0 $c1" = "$2 $3" ]; then echo "  ok: $1 sends per step, rank 0 / rank 1: $c0 / $c1"
    else tut_fail "$1: sends per step $c0 / $c1, the README says $2 / $3"; fi
done
tut_cmd zbprof ./dtrain --threads 1 --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 16 --train-iters 6 --eval-interval 0 --eval-iters 1 --pipeline-schedule zb-h1 --trace profile-zb.json
tut_file profile-zb.json
# W's share of each layer's backward in the serial profile (steps 2-6): 0.26-0.32 in 40 rounds,
# 0.38-0.40 after the faster GELU and attention, 0.43-0.44 in 3 quiet runs since W also
# recomputes the LayerNorm and GELU outputs (2026-12-07); a loaded run reads either way, so
# the ceiling is 0.55: W's GEMMs are half the backward's and its elementwise passes fewer
# than B's (the README's command as printed)
awk -F'"dur":' '/"name":"backward_[bw]"/ && !/"iter":0,/ { split($2, a, ","); if (/backward_w/) w += a[1]; else b += a[1] } END { printf "W/(B+W) = %.2f\n", w / (b + w) }' profile-zb.json >wshare.out 2>&1
wshare=$(tut_num wshare '^W\/(B+W) = \([0-9.]*\)$')
tut_range "W / (B + W) in the profile" "$wshare" 0.15 0.55
# zb-h1's idle share from its own costs: (F + B - W) / (m (F + B + W) + F + B - W), stage 0's F and B + W
fh=$(fam_field zb-h1 0 forward_ms) bh=$(fam_field zb-h1 0 backward_ms)
# and interleaved's fill and drain, (F + B + W)/2, against zb-h1's idle F + B - W:
# -0.4 and -0.1 ms in two runs on 2026-12-06 (W 0.38-0.40 of B + W), about equal; -1.2 to
# -1.3 ms in 3 quiet runs on 2026-12-07 (W 0.43-0.44) and -2.6 once under load; held to
# 3 ms below (a step's F + B + W is 14 ms)
tut_range "zb-h1's idle F + B - W less interleaved's (F + B + W)/v, ms" "$(awk -v f="$fh" -v bw="$bh" -v w="$wshare" 'BEGIN { printf "%.1f", f + bw * (1 - 2 * w) - (f + bw) / 2 }')" -3 1000
tut_range "zb-h1's ideal with this run's F, B and W" "$(awk -v f="$fh" -v bw="$bh" -v w="$wshare" 'BEGIN { i = f + bw * (1 - 2 * w); printf "%.3f", i / (4 * (f + bw) + i) }')" 0.07 0.18
# the simulator from the profile: its costs, not the run's (any load; in 40 rounds 1f1b 0.22-0.24 /
# 0.20-0.21, interleaved 0.14-0.16 / 0.12, zb-h1 0.15-0.19 / 0.13-0.15, zb-v 0.03-0.06 / 0.07-0.08)
for kr in "1f1b 0.17 0.29 0.15 0.26" "interleaved-1f1b 0.09 0.21 0.06 0.18" "zb-h1 0.10 0.23 0.08 0.21" "zb-v 0.00 0.11 0.01 0.14"; do
    set -- $kr
    tut_cmd "zbsim-$1" ./dtsim run --config m4-$1.rank0.json --profile profile-zb.json
    tut_line "zbsim-$1" "^layout:   t=1 p=2 d=1 \(2 ranks\), schedule $1,"
    p0=$(tut_num "zbsim-$1" '^  stage 0: bubble [0-9.]*, fwd\/bwd-only \([0-9.]*\).*')
    p1=$(tut_num "zbsim-$1" '^  stage 1: bubble [0-9.]*, fwd\/bwd-only \([0-9.]*\).*')
    tut_range "$1 predicted stage 0 bubble_fb" "$p0" $2 $3
    tut_range "$1 predicted stage 1 bubble_fb" "$p1" $4 $5
    # a quiet run: the mean of its stages within 0.06 of the predicted mean (README: within 0.03)
    qm=$(sed -n "s/^$1 //p" quiet-means.txt)
    [ -n "$qm" ] && tut_range "$1 measured - predicted mean bubble_fb (quiet run)" \
        "$(awk -v m="$qm" -v a="$p0" -v b="$p1" 'BEGIN { printf "%.4f", m - (a + b) / 2 }')" -0.06 0.06
done
tut_line zbsim-zb-v '^bubble per stage \(idle share of its step\), formula I/\(6m\+I\), I = max\(p-1, 4p-2m-2\) = 0\.0400:$'
tut_line zbsim-zb-v '^scenario: custom \(8 layers, width 128, 4 heads, vocab 256\), B=4 T=64 m=4 \(global batch 16\), 20 steps$'
tut_line zbsim-zb-v '^2 model chunks per stage, backward split in B and W; peak memory per stage: 26\.17 25\.65 MiB$'
if [ -x ./dtviz ]; then
    tut_cmd zbviz ./dtviz m4-zb-v.json --zoom 0.5:0.56 --size 1400x420 --png zb-v.png
    tut_file zb-v.png
else
    echo "./dtviz m4-zb-v.json --zoom 0.5:0.56 --size 1400x420 --png zb-v.png" >>"$TUT_LOG"
    echo "  (this build has no dtviz: SDL2 missing; ./dtviz m4-zb-v.json ... --png zb-v.png not run)"
fi

# 9. On GPUs (run only where CUDA devices are present).
tut_gpu_cmd gsched ./dtrain --device cuda --print-schedule --pipeline-model-parallel-size 2 --global-batch-size 32 --micro-batch-size 4 --pipeline-schedule 1f1b
if tut_gpu && [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
    tut_cmd gpp $MPIRUN -np 2 ./dtrain --device cuda --pipeline-model-parallel-size 2 --pipeline-schedule 1f1b --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 32 --train-iters 10 --eval-interval 0 --eval-iters 1 --trace gpu-pp.json
    tut_cmd gbub ./dtbench bubbles gpu-pp.rank0.json gpu-pp.rank1.json
else
    echo "./dtbench bubbles gpu-pp.rank0.json gpu-pp.rank1.json" >>"$TUT_LOG.gpu-skipped"
    echo "  (skipped: the 2-rank GPU run needs 2 CUDA devices)"
fi

# Exercise: gpipe on the same run.
tut_cmd ex mpirun --oversubscribe --allow-run-as-root -np 2 ./dtrain --pipeline-model-parallel-size 2 --pipeline-schedule gpipe --num-layers 8 --hidden-size 128 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 32 --threads 1 --train-iters 10 --eval-interval 0 --eval-iters 1 --trace ex.json
tut_cmd ex_bub ./dtbench bubbles ex.rank0.json ex.rank1.json
exb0=$(tut_num ex_bub '^ex\.rank0\.json .* bubble_fb=\([0-9.]*\) .*')
exb1=$(tut_num ex_bub '^ex\.rank1\.json .* bubble_fb=\([0-9.]*\) .*')
# gpipe's bubble has the same formula: the same ranges as 1f1b's above
tut_range "gpipe stage 0 bubble, forward/backward only" "$exb0" 0.02 0.60
tut_range "gpipe mean of the stages' bubbles, forward/backward only" "$(awk -v a="$exb0" -v b="$exb1" 'BEGIN { printf "%.4f", (a + b) / 2 }')" 0.08 0.45
pk1=$(tut_num pp '^done: .* peak activation memory \([0-9.]*\) MiB$')
pk2=$(tut_num ex '^done: .* peak activation memory \([0-9.]*\) MiB$')
tut_range "peak activation memory, gpipe / 1f1b" "$(tut_ratio "$pk2" "$pk1")" 1.5 5

tut_finish
