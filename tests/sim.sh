#!/bin/sh
# sim.sh: the simulator predicts real runs it has not seen (run by `make
# check` after bubble.sh; skipped without MPI).
#
# `dtbench simval --quick --repeats 1` runs, as a user would, the
# calibration (single-rank compute profiles of simval's model, width 96, 4
# blocks, T = 32, 1 thread, in fp32, bf16 and fp16; two and four copies of
# the fp32 one at once for the contention of 2 and 4 ranks on the 2 cores; `mpirun -np 2 dtbench allreduce --json`
# for the link) and then eleven real runs with traces, each measured once:
# on 2 ranks pipeline p = 2 1f1b m = 4, data-parallel ring d = 2, ps-sync
# (one worker, one server), 1f1b bf16, t = 2 fp16 (the embedding and LM
# head split by vocabulary rows, the default), t = 2 fp32 with them
# whole (--no-vocab-parallel), t = 2 with --sequence-parallel and c = 2
# (context parallelism, the ring); on 4 ranks t x p = 2 x 2 1f1b with the
# pipeline's sends scattered over the tensor ranks (the default), and with
# --sequence-parallel (each rank sends its own rows), and c x t = 2 x 2
# with the all-to-all (--cp-comm-type a2a).
# dts_validate predicts each from the calibration only (the run gives its
# configuration, never its durations).
#
# Checked: every run is predicted, and each run's |error| <= TOL (25%) in
# at least one of three attempts. On a quiet machine these five runs were
# predicted within -2.8% .. +4.1% of the median of 3 repeats, whose own
# spread was 3.3-10.7% (bench/README.md, `dtbench simval`, 2026-12-03): a
# single measurement may sit anywhere in that spread, and `make check`
# shares the 2 cores with a build or another test, which slows one rank
# of a run 2-7x (bubble.sh explains it) while the profiles were taken at a
# different moment; 25% is that spread twice plus the largest quiet error,
# with room for load. A systematic error (a configuration the simulator
# mis-models) fails all three attempts; so does anything failing
# outright. When some run is off in all three while the 1-minute load
# average is above the cores + 1.5 (other work competing: seen with four
# builds beside `make check`, errors of 31-68%), it is skipped (77) with
# that reason instead: a timing test cannot judge a prediction on a
# machine it does not have to itself.
TEST=sim.sh
. "${DT_SRCDIR:-.}/tests/mpi-lib.sh"
TOL=25
# Context parallelism's rows (cp2-m4, cp2-tp2-a2a-m4) are judged at
# TOL_CP = 40%: dtsim prices their attention at its FLOP share, but at
# simval's T = 32 a rank's chunks are 8 rows and the backend's chunk
# attention costs about 4 times that share on the CPU (18-19% of a block's
# time measured against 5% by FLOPs), which dtsim does not model yet, so
# these predictions run low: -3.3% .. -32.1% over 8 sessions on the 2-core
# AMD EPYC (docs/simulator.md, 2026-12-07). 40% is that largest error plus
# the 10% spread of a single measurement; a wrong exchange (a missing ring
# step, a size off by c) still fails it.
TOL_CP=40
out=$TMP/simval.out
die() { cat "$out"; fail "$*"; exit 1; }

# Sequence parallelism, exactly (lib/parallel/sp.c): dtsim replays a real
# run's own configuration (its trace) and predicts every stage's peak
# activation bytes, the runtime's stage_peak_activation_bytes, to the byte
# (both count the same buffers; the arena's 16-float padding is not
# modelled, so each rank's B T / t = 16 rows are a multiple of 16), and
# runs the same tensor-group collectives, by name, in a step (the first
# after the warm-up) on each stage's first rank. Four cells of 4 blocks:
# t = 2 fp32; t = 2 bf16 selective; t x p = 2 x 2 1f1b with full
# recomputation in groups of 2; zb-h1 bf16 (W's all-gathers and
# LayerNorm sums). 5 s on the 2-core AMD EPYC.
DTSIM=$BUILDDIR/dtsim
SPRUN="--task add --task-digits 2 --seq-length 16 --num-layers 4 --train-iters 4 --lr-warmup-iters 1 \
--eval-iters 2 --eval-interval 0 --log-interval 4 --threads 1 --global-batch-size 8 --micro-batch-size 2"
# sim_peak TRACE PID: the largest "activations" of pid's memory counter
sim_peak() {
    grep -o "\"name\":\"memory\"[^}]*\"pid\":$2,[^}]*\"activations\":[0-9.]*" "$1" |
        sed 's/.*"activations"://' | awk 'BEGIN { m = 0 } { if ($1 + 0 > m) m = $1 + 0 } END { printf "%d", m }'
}
# tp_names TRACE PID: pid's tensor-group collectives of step 1, counted by name
# shellcheck disable=SC2317 # called through replay's NAMES
tp_names() {
    grep "\"cat\":\"tp\".*\"pid\":$2,.*\"iter\":1," "$1" | sed 's/^{"name":"\([^"]*\)".*/\1/' | sort | uniq -c |
        tr -s ' ' | tr '\n' ';'
}
# replay WHAT NAMES NAME NP FLAGS...: a real run of FLAGS on NP ranks, dtsim's replay of its trace; each
# stage's peak against the runtime's, and its first rank's collectives of step 1 (listed by NAMES)
replay() {
    what=$1 names=$2 name=$3 np=$4; shift 4
    # shellcheck disable=SC2086 # MPIRUN is a command and its flags
    if ! timeout 120 $MPIRUN -np "$np" "$DTRAIN" "$@" --summary "$TMP/$name.json" --trace "$TMP/$name-tr.json" \
            >"$TMP/$name.out" 2>&1; then
        fail "$what $name: dtrain exited non-zero:"; tail -n 5 "$TMP/$name.out" >&2; return 0
    fi
    if ! "$DTSIM" run --config "$TMP/$name-tr.rank0.json" --trace "$TMP/$name.sim.json" >"$TMP/$name.sim.out" 2>&1; then
        fail "$what $name: dtsim run:"; tail -n 5 "$TMP/$name.sim.out" >&2; return 0
    fi
    real=$(jlist "$TMP/$name.json" stage_peak_activation_bytes) st=0 pred="" cs=""
    per=$((np / $(echo "$real" | wc -w))) # ranks a stage
    for _ in $real; do
        pid=$((per * st))
        pred="$pred $(sim_peak "$TMP/$name.sim.json" $pid)"
        a=$($names "$TMP/$name-tr.rank$pid.json" $pid) b=$($names "$TMP/$name.sim.json" $pid)
        if [ -z "$a" ] || [ "$a" != "$b" ]; then
            fail "$what $name: stage $st's collectives in step 1: dtrain $a dtsim $b"
        fi
        cs="$cs stage $st:$a"
        st=$((st + 1))
    done
    if [ -n "$real" ] && [ "$real" = "${pred# }" ]; then
        echo "ok: $what $name: peaks $real bytes, dtsim the same; step 1's collectives,$cs"
    else
        fail "$what $name: stage peak activation bytes $real, dtsim predicts$pred"
    fi
}
# shellcheck disable=SC2086 # SPRUN is a list of flags
sp_cell() { name=$1 np=$2; shift 2; replay "sequence parallelism" tp_names "$name" "$np" $SPRUN \
    --tensor-model-parallel-size 2 --sequence-parallel "$@"; }
sp_cell sp-t2 2
sp_cell sp-t2-bf16-selective 2 --bf16 --recompute-granularity selective
sp_cell sp-t2p2-full 4 --pipeline-model-parallel-size 2 --recompute-granularity full --recompute-num-layers 2
sp_cell sp-t2p2-zbh1-bf16 4 --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1 --bf16

# Context parallelism, exactly (lib/parallel/cp.c): the same replay of a
# real run, every stage's peak activation bytes to the byte (each rank's
# B T / c rows of T 64, B 4: 128 or 64, multiples of the arena's 16), and
# the context and tensor groups' exchanges of step 1, by name and by the
# trace's "forward", on each stage's first rank. Four cells of 4 blocks
# on 2 or 4 ranks: c = 2 p2p fp32; c = 4 a2a with selective
# recomputation (the attention's exchanges again in B); c x t = 2 x 2
# with sequence parallelism, bf16, full recomputation; c x p = 2 x 2
# zb-h1 allgather. 10 s on the 2-core AMD EPYC.
CPRUN="--task add --task-digits 2 --seq-length 64 --num-layers 4 --train-iters 2 --eval-iters 1 --eval-interval 0 \
--log-interval 2 --threads 1 --micro-batch-size 4 --global-batch-size 16"
# cp_names TRACE PID: pid's context and tensor groups' exchanges of step 1, counted by name and direction
# shellcheck disable=SC2317 # called through replay's NAMES
cp_names() {
    grep "\"cat\":\"[ct]p\".*\"pid\":$2,.*\"iter\":1," "$1" |
        sed 's/^{"name":"\([^"]*\)".*"forward":\([0-9]\).*/\1 f\2/' | sort | uniq -c | tr -s ' ' | tr '\n' ';'
}
# shellcheck disable=SC2086 # CPRUN is a list of flags
cp_cell() { name=$1 np=$2; shift 2; replay "context parallelism" cp_names "$name" "$np" $CPRUN "$@"; }
cp_cell cp-c2 2 --context-parallel-size 2
cp_cell cp-c4-a2a-selective 4 --context-parallel-size 4 --cp-comm-type a2a --recompute-granularity selective
cp_cell cp-c2t2-sp-bf16-full 4 --context-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel --bf16 \
    --recompute-granularity full
cp_cell cp-c2p2-zbh1-allgather 4 --context-parallel-size 2 --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1 \
    --cp-comm-type allgather

# FP8 numerics (sim/fp8.c): `dtsim fp8` learns each FP8 tensor's values
# relative to its amax from one real run, A (hybrid, delayed, margin 0,
# history 16, max; 2 blocks, 30 steps), and predicts held-out runs of the
# same model, data and seed under other settings (margin 2; history 1
# most_recent; tensorwise; e4m3; blockwise), each from A only, against
# their summaries' counts. Under 1 s on the 2-core AMD EPYC. Checked:
#  - exactly: A's delayed scales recomputed from its amaxes are those it
#    used, for every tensor and step after the first (dt_fp8.h's rules,
#    lib/train/fp8_train.c's history); tensorwise and blockwise predicted
#    and measured with no value saturated;
#  - each run's saturated and flushed fractions of all its values: the
#    prediction p and the measurement m agree within a factor FP8_TOL = 2
#    after adding a floor to both, (p + e) / (m + e), e = 5e-5 for the
#    saturated fraction (about 540 of the 10.8 million values: a spike's
#    steps, below which fractions are not told apart) and 1e-6 for the
#    flushed one (about 11 values);
#  - each tensor with 100 or more flushed values predicted or measured:
#    (p + 1) / (m + 1) within FP8_TOL;
#  - blockwise's flushed share is an upper bound by construction (the
#    tensor's power-of-two scale is at most every tile's), so its run and
#    tensors are held to 1/FP8_TOL .. 2 FP8_TOL instead: measured 1.36
#    (the native build) and 2.17, a tensor 2.29 (the generic build, whose
#    other FP32 rounding moves the trajectory), on this machine.
# The tolerance: a held-out run's amaxes are not A's (its other rounding
# moves its trajectory as a new seed would), and another machine's bf16
# GEMM moves A's own the same way, so the model was measured on 15 seeds
# (90 held-out runs, docs/simulator.md "FP8 numerics", the 2-core AMD EPYC,
# 2026-12-07): the worst factors were 1.41 (saturated), 1.53 (flushed) and
# 1.48 (a tensor's flushed count); FP8_TOL = 2 is that with a third to
# spare. It rejects a wrong replay: with the margin ignored m2's saturated
# fraction is predicted at A's 8.7e-5 against 0 (factor 2.7), with the
# history ignored h1's at 8.7e-5 against 2.7e-4 (2.3), delayed scaling
# replayed as current scaling gives h1 0 (6.4), E4M3 gradients under hybrid
# flush hundreds of times the measured share (3.8e-3 against 1.7e-5).
FP8_TOL=2
FP8RUN="--task add --task-digits 2 --seq-length 16 --num-layers 2 --train-iters 30 --lr-warmup-iters 1 --eval-iters 1 \
--eval-interval 0 --log-interval 30 --threads 1 --global-batch-size 8 --micro-batch-size 8"
# fp8_run NAME FLAGS...: a real FP8 run with its trace and summary
fp8_run() {
    name=$1; shift
    # shellcheck disable=SC2086 # FP8RUN is a list of flags
    "$DTRAIN" $FP8RUN "$@" --trace "$TMP/fp8-$name.json" --summary "$TMP/fp8-$name.s.json" >"$TMP/fp8-$name.out" 2>&1 ||
        { fail "fp8 run $name: dtrain exited non-zero:"; tail -n 5 "$TMP/fp8-$name.out" >&2; }
}
fp8_run a --fp8-format hybrid --fp8-amax-history-len 16
fp8_run m2 --fp8-format hybrid --fp8-amax-history-len 16 --fp8-margin 2
fp8_run h1 --fp8-format hybrid --fp8-amax-history-len 1 --fp8-amax-compute-algo most_recent
fp8_run tw --fp8-format hybrid --fp8-recipe tensorwise
fp8_run e4 --fp8-format e4m3 --fp8-amax-history-len 16
fp8_run bw --fp8-format hybrid --fp8-recipe blockwise
if "$DTSIM" fp8 --trace "$TMP/fp8-a.json" >"$TMP/fp8-own.out" 2>&1; then
    scales=$(sed -n 's/^delayed scales recomputed from the amaxes: \([0-9]*\) of \([0-9]*\) equal.*/\1 \2/p' "$TMP/fp8-own.out")
    eq=${scales% *} total=${scales#* }
    if [ -n "$scales" ] && [ "$eq" = "$total" ] && [ "$total" -gt 0 ]; then
        echo "ok: fp8: run A's delayed scales replayed from its amaxes, $eq of $total equal"
    else
        fail "fp8: run A's delayed scales replayed from its amaxes: '$scales' equal (expected all)"
    fi
else
    fail "fp8: dtsim fp8 of run A:"; tail -n 5 "$TMP/fp8-own.out" >&2
fi
if "$DTSIM" fp8 --trace "$TMP/fp8-a.json" "$TMP/fp8-m2.s.json" "$TMP/fp8-h1.s.json" "$TMP/fp8-tw.s.json" \
        "$TMP/fp8-e4.s.json" "$TMP/fp8-bw.s.json" >"$TMP/fp8-val.out" 2>&1; then
    grep '^fp8 ' "$TMP/fp8-val.out" | sed "s|$TMP/fp8-||"
    n=$(grep -c '^fp8 .*: saturated fraction measured' "$TMP/fp8-val.out")
    [ "$n" -eq 5 ] || fail "fp8: expected 5 held-out runs compared, got $n"
    # each run's fractions, then its tensors' flushed counts
    bad=$(awk -v tol=$FP8_TOL '
        function f(p, m, e) { r = (p + e) / (m + e); return r < 1 ? 1 / r : r }
        { name = $2; sub(/.*\/fp8-/, "", name) }
        / saturated fraction measured / {
            for (i = 1; i <= NF; i++) {
                if ($i == "saturated") { ms = $(i + 3); ps = $(i + 5) }
                if ($i == "flushed") { mf = $(i + 3); pf = $(i + 5) }
            }
            if (f(ps, ms, 5e-5) > tol) printf "%s saturated %s predicted %s; ", name, ms, ps
            bw = name ~ /^bw\.s\.json:$/
            if (!bw && f(pf, mf, 1e-6) > tol) printf "%s flushed %s predicted %s; ", name, mf, pf
            rb = (pf + 1e-6) / (mf + 1e-6)
            if (bw && (rb < 1 / tol || rb > 2 * tol)) printf "%s flushed %s predicted %s (a bound: 1/%s..%s); ", name, mf, pf, tol, 2 * tol
            if ((name ~ /^(tw|bw)\.s\.json:$/) && (ms != 0 || ps != 0)) printf "%s saturated %s predicted %s (expected 0); ", name, ms, ps
        }
        / per tensor, / { t = name ~ /^bw\.s\.json:$/ ? 2 * tol : tol
            for (i = 1; i <= NF; i++) if ($i == "most") { x = $(i - 2); if (x > t) printf "%s a tensor flushed %s times off; ", name, x } }
    ' "$TMP/fp8-val.out")
    if [ -z "$bad" ]; then
        echo "ok: fp8: 5 held-out runs predicted from run A within a factor $FP8_TOL (fractions and tensors)"
    else
        fail "fp8: predictions beyond a factor $FP8_TOL: $bad"
    fi
else
    fail "fp8: dtsim fp8 validation:"; tail -n 5 "$TMP/fp8-val.out" >&2
fi
[ "$failures" = 0 ] || exit 1
# the machine's load: 1-minute load average above the cores + 1.5 means other
# work competes with the measured runs (the runs themselves add about 2)
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
busy=0
NRUNS=11
# bf16 predicted from an FP32 profile (issue 35): dtsim takes the GEMM rates
# of both precisions and the cost of bf16's own passes over the activations
# from a hardware file (peak_flops, peak_flops_bf16, bf16_pass_ns), all
# measured now on this machine by `dtbench gemm --threads 1` (a same-run
# reference: an AMX CPU gives ~4x, an AVX2-only one, without a bf16 kernel,
# ~1x; a --disable-native build's passes cost more than a native one's),
# profiles one FP32 run of a model whose GEMMs dominate (width 384, 2
# blocks, T = 256, B = 8, 1 thread) and predicts the same model's bf16 run,
# which is then measured. TOL16 = 35%: the profile's GEMMs are taken at the
# peak rate (the prediction errs high by what they ran below it, up to 15%:
# dtbench gemm's rates at the model's shapes are 0.85-0.97 of the peak),
# the passes are counted, not profiled (their cost in the model's loops
# differs from a 1M-float pass's, and the fused GELU passes count as free),
# plus a single measurement's spread (10%, above). Measured on the 2-core
# Xeon with AMX (2026-12-07, after the fused bf16 passes): native build
# -12.1% and +0.2% (+80.6% at FP32 speed in the second: the rates are what
# make it right); --disable-native build -23.9% (+4.9% at FP32 speed:
# there the generically compiled passes eat most of the GEMMs' gain, and
# a 1M-float pass underestimates them in the model's loops). Before the
# pass cost was modelled the generic build read -31% to -33%.
TOL16=35
bf16_ok=0
M16="--threads 1 --num-layers 2 --hidden-size 384 --num-attention-heads 6 --seq-length 256 --max-position-embeddings 256 --micro-batch-size 8 --global-batch-size 8 --train-iters 5 --eval-interval 0 --eval-iters 1 --log-interval 5"
# the bf16 run's prediction error (%) from the FP32 profile with hardware file $1
bf16_error() {
    "$BUILDDIR/dtsim" validate --profile "$TMP/f32.json" --hw "$1" "$TMP/b16.json" 2>&1 |
        awk '/^dp d1 ring m=1 / { for (i = 1; i <= NF; i++) if ($i ~ /^[-+][0-9.]+%$/) { sub(/%/, "", $i); print $i + 0 } }'
}
for attempt in 1 2 3; do
    "$BUILDDIR/dtbench" gemm --threads 1 >"$TMP/gemm.out" 2>&1 || { cat "$TMP/gemm.out"; fail "dtbench gemm failed"; exit 1; }
    p32=$(sed -n 's/^peak_gflops \([0-9.]*\)$/\1/p' "$TMP/gemm.out")
    p16=$(sed -n 's/^bf16_peak_gflops \([0-9.]*\)$/\1/p' "$TMP/gemm.out")
    pns=$(sed -n 's/^bf16_pass_ns \([0-9.]*\)$/\1/p' "$TMP/gemm.out")
    [ -n "$p32" ] && [ -n "$p16" ] && [ -n "$pns" ] ||
        { cat "$TMP/gemm.out"; fail "dtbench gemm printed no peak_gflops, bf16_peak_gflops or bf16_pass_ns"; exit 1; }
    sed "s/\"peak_flops\": *[0-9.e]*,/\"peak_flops\": ${p32}e9, \"peak_flops_bf16\": ${p16}e9, \"bf16_pass_ns\": $pns,/" \
        "${DT_SRCDIR:-.}/sim/hw/cpu-2core.json" >"$TMP/hw16.json"
    # shellcheck disable=SC2086 # M16 is a list of flags
    "$BUILDDIR/dtrain" $M16 --trace "$TMP/f32.json" >"$TMP/f32.out" 2>&1 || { cat "$TMP/f32.out"; fail "FP32 profile run failed"; exit 1; }
    # shellcheck disable=SC2086
    "$BUILDDIR/dtrain" $M16 --bf16 --trace "$TMP/b16.json" >"$TMP/b16.out" 2>&1 || { cat "$TMP/b16.out"; fail "bf16 run failed"; exit 1; }
    e_rate=$(bf16_error "$TMP/hw16.json")
    e_none=$(bf16_error "${DT_SRCDIR:-.}/sim/hw/cpu-2core.json")
    [ -n "$e_rate" ] && [ -n "$e_none" ] || fail "dtsim validate printed no error for the bf16 run"
    echo "sim.sh: bf16 from an FP32 profile, GEMM rates $p32 / $p16 GFLOP/s, passes $pns ns: error $e_rate% (at FP32 speed: $e_none%)"
    if awk -v a="$e_rate" -v t=$TOL16 'BEGIN { a = a < 0 ? -a : a; exit !(a <= t) }'; then
        bf16_ok=1
        break
    fi
    echo "sim.sh: attempt $attempt: bf16 prediction off by more than $TOL16%: again"
done
[ "$bf16_ok" = 1 ] || { load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
    fail "bf16 from an FP32 profile: error $e_rate% (at FP32 speed $e_none%) in every attempt (load $load)"; exit 1; }

# the rows of the table: a run's name, then its set and figures
ROWS='^\(1f1b-m4\|1f1b-m4-bf16\|dp-ring\|ps-sync\|tp2-m4-fp16\|tp2-m4-whole\|tp2-sp-m4\|tp2-pp2-1f1b-m4\|tp2-pp2-sp-1f1b-m4\|cp2-m4\|cp2-tp2-a2a-m4\) '
ok=" " # the rows (1..NRUNS) that were within TOL in some attempt
for attempt in 1 2 3; do
    load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
    if awk -v l="$load" -v c="$cores" 'BEGIN { exit !(l > c + 1.5) }'; then busy=1; fi
    "$BUILDDIR/dtbench" simval --quick --iters 20 --repeats 1 >"$out" 2>&1 || die "dtbench simval --quick failed"
    n=$(grep -c "$ROWS" "$out")
    [ "$n" -eq $NRUNS ] || die "expected $NRUNS predicted runs, got $n"
    # each row's |error|: the field that ends in % (e.g. -2.6%)
    errs=$(grep "$ROWS" "$out" | awk '
        { for (i = 1; i <= NF; i++) if ($i ~ /^[-+][0-9.]+%$/) { e = $i; sub(/%/, "", e); e = e + 0;
                                                                 printf "%.1f ", e < 0 ? -e : e } }')
    rownames=$(grep "$ROWS" "$out" | awk '{ printf "%s ", $1 }')
    grep "$ROWS\\|^goal: mean\\|^calibrat\\|^  hardware" "$out"
    if [ -n "${DT_SANITIZERS:-}" ]; then
        # ./configure --enable-sanitizers (docs/sanitizers.md): every run was made and predicted under ASan and
        # UBSan, but instrumented timings say nothing about the simulator: one attempt, not judged
        echo "sim.sh: sanitizer build: $NRUNS runs predicted (|errors| $errs%, not judged: instrumented timings)"
        exit 0
    fi
    k=0
    for e in $errs; do
        k=$((k + 1))
        tol=$TOL
        case " $(echo $rownames | cut -d' ' -f$k) " in *" cp"*) tol=$TOL_CP ;; esac
        if awk -v e="$e" -v tol=$tol 'BEGIN { exit !(e <= tol) }'; then
            case $ok in *" $k "*) ;; *) ok="$ok$k " ;; esac
        fi
    done
    left=
    k=0
    while [ $k -lt $NRUNS ]; do
        k=$((k + 1))
        case $ok in *" $k "*) ;; *) left="$left $k" ;; esac
    done
    if [ -z "$left" ]; then
        echo "sim.sh: every run's |error| <= $TOL% ($TOL_CP% for context parallelism) in some attempt (this attempt, $attempt: $errs%)"
        exit 0
    fi
    echo "sim.sh: attempt $attempt: |errors| $errs%; runs$left not yet within $TOL% (a disturbed run?): again"
done
if [ "$busy" = 1 ]; then
    # a timing test cannot judge a prediction while other work takes the cores: say so, do not pass
    echo "sim.sh: runs$left were off by more than $TOL% in every attempt while the machine was busy (1-minute load"
    echo "sim.sh: average above $cores + 1.5): the measured runs were disturbed, so the prediction was not judged: skipped"
    exit 77
fi
die "runs$left had a prediction off by more than $TOL% in every attempt"
