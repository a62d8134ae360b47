#!/bin/sh
# check.sh: runs tutorials/05-pipeline/README.md's commands and checks the
# outputs it quotes, within the ranges it states. Run by tests/tutorials.sh
# (make check), or alone: DT_BUILDDIR=build DT_SRCDIR=. sh check.sh
# TUTORIAL_QUICK changes nothing here: every run is already short.
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
tut_range "measured step time, stage 0 window (ms)" "$meas_ms" 100 2000

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
tut_range "predicted step time (ms)" "$sim_ms" 80 1500
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

# 8. On GPUs (run only where CUDA devices are present).
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
