#!/bin/sh
# bubble.sh: the pipeline bubble of real runs against (p-1)/(m+p-1) (run by
# `make check` after pp.sh; skipped without MPI).
#
# Configuration: p = 2 ranks (one per core), an equal-cost GPT (8 blocks
# split 4 + 4, width 128, T = 64, micro-batch 4, 1 thread per rank), gpipe
# and 1f1b, m = 4 and m = 8 micro-batches per step, 6 steps. Each rank's
# trace gives its stage's mean bubble over steps 2..6 (`dtbench bubbles`,
# include/dt_trace_stats.h) and its mean forward and backward times.
#
# Expected bubble: the formula f = (p-1)/(m+p-1) = 1/(m+1) (0.200 at m = 4,
# 0.111 at m = 8) holds for equal stages. The stages are equal only to
# within a few percent (stage 1 also holds the LM head and loss), and how
# much depends on the CPU, so each run is judged against the bubble its own
# stage costs imply: with c_s = forward + backward per micro-batch on stage
# s, the slower stage sets the pace and a step lasts W = m*max(c) + min(c)
# (gpipe: the faster stage's first forward or last backward, then m of the
# slower's; 1f1b the same on 2 stages), so stage s idles e_s = 1 - m c_s / W,
# which is f when c_0 = c_1. On the 2026-11-29 machine (c_1 / c_0 = 1.035)
# this gives 0.222 and 0.138 for stage 0, measured 0.219-0.234 and
# 0.139-0.150; on the AMD EPYC of 2026-12-02 c_1 / c_0 read 1.04-1.08 and
# stage 0 up to 0.279 at m = 4, which the bare formula failed (CI did).
# A disturbed stage also slows in its mean, and e_s follows it.
#
# What is checked, per run:
#   - stage 0's bubble (forward, backward and optim_step busy) and every
#     stage's bubble_fb (forward and backward busy) lie in [e - LOW, e + HIGH];
#     stage 1's bubble is not checked: with p > 1 its optim_step includes
#     waiting in the gradient-norm allreduce for stage 0's last backward
#     (lib/parallel/pipeline.c), so it reads about f * forward/(forward + backward),
#     ~0.4 f; bubble_fb does not count the optimizer step and matches e;
#   - the bubble shrinks with m: every stage's bubble_fb net of its run's
#     imbalance (measured - e + f) at m = 8 is below its value at m = 4.
#
# Measured on this project's 2-core machine (2026-11-29, 5 repeats of the 4
# runs while other sessions built and tested on it; quiet runs only):
#                     m = 4 (f 0.200)   m = 8 (f 0.111)
#   stage 0 bubble    0.219 .. 0.234    0.139 .. 0.150
#   stage 0 bubble_fb 0.226 .. 0.242    0.143 .. 0.155
#   stage 1 bubble_fb 0.201 .. 0.204    0.112 .. 0.118
#   stage 1 bubble    0.074 .. 0.078    0.042 .. 0.048  (not checked, above)
# gpipe and 1f1b agree within that spread. Stage 0 reads above f because
# the stages are equal only to within ~3.5%: stage 1 also holds the LM head
# and loss (vocabulary 256 x width 128, about a sixth of a block), so per
# micro-batch it takes forward 6.85 ms / backward 11.09 ms against stage 0's
# 6.62 / 10.71 ms, and stage 0 waits for it once per micro-batch. The test
# takes 4-6 s (4 dtrain runs; at most 20 with every repeat).
#
# Disturbed runs: two ranks on two cores leave nothing for another process;
# when one runs (a build, another test), some forwards take 2-7x longer and
# the bubble reads 0.2-0.4 at any m. `dtbench bubbles` prints `noise`, the
# share of forward/backward time above the median duration of its kind
# (0.002-0.027 in quiet runs, 0.11-0.37 in disturbed ones); a run with noise
# above NOISE_MAX = 0.05 on either stage is not judged but repeated, up to
# ATTEMPTS = 5 runs per configuration; a configuration never measured quietly
# is reported as SKIP, and the whole test exits 77 if none was.
#
# Tolerance: LOW = 0.04, HIGH = 0.07 (absolute, around e), wider above
# because residual noise (a late message, a short preemption) mostly adds
# idle time. On 2026-12-02, 12 quiet runs (3 of the test) read -0.029 ..
# +0.056 from e. It stays meaningful: a pipeline that does not overlap its
# stages reads 0.5, and with Open MPI's default 4 KiB shared-memory eager
# limit (below) gpipe read 0.36 at m = 4 and 0.33 at m = 8 -- far outside.
# The noise figure does not catch every disturbance, so a quiet run out of
# tolerance is repeated (up to ATTEMPTS runs in all) and the configuration
# passes on the first quiet run within it, fails when none is; the failure
# prints the measured value, e and the formula.
#
# MPI: the runtime sends activations with non-blocking sends and computes
# while they are in flight. Above Open MPI's eager limit a send only
# progresses when the sender next enters MPI, so stage 1 would receive
# micro-batch 0 only after stage 0's last forward. The activation messages
# here are 4 x 64 x 128 x 4 = 131072 bytes, so the eager limit is raised
# above that and the shared-memory segment enlarged to hold m of them
# (unless the environment sets them).

TEST=bubble.sh
. "${DT_SRCDIR:-.}/tests/mpi-lib.sh"

DTBENCH=$BUILDDIR/dtbench
[ -x "$DTBENCH" ] || { echo "$TEST: $DTBENCH not found" >&2; exit 99; }
: "${OMPI_MCA_btl_vader_eager_limit:=135168}"
: "${OMPI_MCA_btl_vader_segment_size:=33554432}"
export OMPI_MCA_btl_vader_eager_limit OMPI_MCA_btl_vader_segment_size

LOW=0.04
HIGH=0.07
NOISE_MAX=0.05
ATTEMPTS=5
MODEL="--num-layers 8 --hidden-size 128 --seq-length 64 --micro-batch-size 4 --threads 1 \
--lr-warmup-iters 1 --eval-iters 1 --eval-interval 0 --log-interval 100"
ITERS=6

# measure NAME SCHEDULE M: run ITERS steps, then $TMP/NAME.txt holds one line per stage
measure() {
    rm -f "$TMP/$1".rank*.json
    if ! timeout 300 $MPIRUN -np 2 "$DTRAIN" $MODEL --train-iters $ITERS --global-batch-size $((4 * $3)) \
            --pipeline-model-parallel-size 2 --pipeline-schedule "$2" --trace "$TMP/$1.json" \
            >"$TMP/$1.out" 2>&1; then
        fail "$1: dtrain exited non-zero:"; tail -n 20 "$TMP/$1.out" >&2
        return 1
    fi
    if ! "$DTBENCH" bubbles --skip 1 "$TMP/$1.rank0.json" "$TMP/$1.rank1.json" >"$TMP/$1.txt" 2>"$TMP/$1.err"; then
        fail "$1: dtbench bubbles:"; cat "$TMP/$1.err" >&2
        return 1
    fi
}
# (field FILE STAGE KEY: mpi-lib.sh)
# expect NAME M S: stage S's bubble the schedule implies for the run's own
# per-micro-batch costs c_s = forward_ms + backward_ms (see above); with M
# the micro-batches of the whole window, pipedream's run_fb (see below)
expect() {
    awk -v m="$2" -v s="$3" -v f0="$(field "$TMP/$1.txt" 0 forward_ms)" -v b0="$(field "$TMP/$1.txt" 0 backward_ms)" \
        -v f1="$(field "$TMP/$1.txt" 1 forward_ms)" -v b1="$(field "$TMP/$1.txt" 1 backward_ms)" 'BEGIN {
        c0 = f0 + b0; c1 = f1 + b1; hi = c0 > c1 ? c0 : c1; lo = c0 > c1 ? c1 : c0
        if (c0 <= 0 || c1 <= 0) exit 1
        printf "%.4f", 1 - m * (s == 0 ? c0 : c1) / (m * hi + lo) }'
}
# check NAME M: the figures of a run outside [e - LOW, e + HIGH], one per line
check() {
    for sk in 0:bubble 0:bubble_fb 1:bubble_fb; do
        st=${sk%%:*} key=${sk#*:}
        v=$(field "$TMP/$1.txt" $st $key)
        e=$(expect "$1" "$2" $st) || { echo "stage $st: no forward/backward times in the trace"; continue; }
        awk -v v="$v" -v e="$e" -v lo=$LOW -v hi=$HIGH 'BEGIN { exit !(v == "" || v < e - lo || v > e + hi) }' &&
            echo "stage $st $key $v, expected $e from the stages' costs (formula $F; allowed $LOW below, $HIGH above)"
    done
}

# disturbed NAME: non-empty when another process took the cores during the run
disturbed() {
    for s in 0 1; do
        v=$(field "$TMP/$1.txt" $s noise)
        awk -v v="$v" -v max=$NOISE_MAX 'BEGIN { exit !(v == "" || v > max) }' && echo "stage $s noise $v"
    done
}

measured=0 skipped=0
for k in gpipe 1f1b; do
    for m in 4 8; do
        F=$(awk -v m=$m 'BEGIN { printf "%.4f", 1 / (m + 1) }')
        name=$k-m$m
        attempt=0 quiet=0 result=
        while [ $attempt -lt $ATTEMPTS ]; do
            attempt=$((attempt + 1))
            measure "$name" $k $m || { result=error; break; }
            noisy=$(disturbed "$name")
            if [ -n "$noisy" ]; then
                echo "$name: attempt $attempt disturbed ($(echo $noisy)), repeating"
                continue
            fi
            quiet=$((quiet + 1))
            bad=$(check "$name" $m)
            if [ -z "$bad" ]; then
                result=ok; break
            fi
            result=fail
            [ $attempt -lt $ATTEMPTS ] &&
                echo "$name: attempt $attempt out of tolerance, repeating: $(echo "$bad" | head -n 1)"
        done
        case $result in
        ok)
            measured=$((measured + 1))
            echo "ok: $name: formula $F, expected $(expect "$name" $m 0) $(expect "$name" $m 1)," \
                 "stage 0 bubble $(field "$TMP/$name.txt" 0 bubble)," \
                 "bubble_fb $(field "$TMP/$name.txt" 0 bubble_fb) $(field "$TMP/$name.txt" 1 bubble_fb)" \
                 "(stage 1 bubble $(field "$TMP/$name.txt" 1 bubble); noise" \
                 "$(field "$TMP/$name.txt" 0 noise) $(field "$TMP/$name.txt" 1 noise))"
            cp "$TMP/$name.txt" "$TMP/$name.ok" ;;
        fail)
            measured=$((measured + 1))
            echo "$bad" | while read -r line; do echo "FAIL: $name: $line" >&2; done
            failures=$((failures + 1)) ;;
        error) ;;
        *)
            skipped=$((skipped + 1))
            echo "SKIP: $name: every one of $ATTEMPTS runs was disturbed by other processes (noise above $NOISE_MAX)" ;;
        esac
    done
    for s in 0 1; do
        [ -f "$TMP/$k-m4.ok" ] && [ -f "$TMP/$k-m8.ok" ] || continue
        # net of each run's own imbalance: measured - expected + formula
        cp "$TMP/$k-m4.ok" "$TMP/net4.txt"; cp "$TMP/$k-m8.ok" "$TMP/net8.txt"
        a=$(awk -v v="$(field "$TMP/net4.txt" $s bubble_fb)" -v e="$(expect net4 4 $s)" 'BEGIN { printf "%.4f", v - e + 1 / 5 }')
        b=$(awk -v v="$(field "$TMP/net8.txt" $s bubble_fb)" -v e="$(expect net8 8 $s)" 'BEGIN { printf "%.4f", v - e + 1 / 9 }')
        awk -v a="$a" -v b="$b" 'BEGIN { exit !(b < a) }' ||
            fail "$k: stage $s bubble_fb net of the stages' imbalance does not shrink with m: m=4 $a, m=8 $b"
    done
done

# PipeDream in steady state. Its stages never flush between steps and do not
# wait for each other at a step's end: the last stage sends the step's loss
# to stage 0, which takes it a step later (lib/parallel/pipeline.c
# dt__pipe_report_loss). Over PD_ITERS = 20 steps of m = 4 the pipeline is
# filled once and drained once, so a stage's idle share over the whole run
# from step 2 on (run_fb: 1 - its forward and backward time / the window
# from the first instruction of step 2 to the last of the run) is
# e = 1 - M fb_s / (M max(c) + min(c)) with M = 19 x 4 micro-batches, fb_s
# its forward + backward and c_s that plus its optimizer step (one per
# micro-batch): the stages' imbalance and updates plus (p-1)/(M+p-1) = 0.013. Checked on every stage:
# pipedream's run_fb lies in [e - LOW, e + HIGH], and net of each run's
# imbalance (measured - expected + the formula) it is below 1f1b's at the
# same m by at least PD_MARGIN = 0.08 (1f1b flushes every step: 1/(m+1) =
# 0.2; pipedream 1/(M+1) = 0.013). The raw figures are not compared: the
# faster stage 0 idles 0.13-0.15 under pipedream from the imbalance and its
# per-micro-batch updates alone, against 0.19-0.23 under 1f1b. Before the barrier was removed a
# dtsim sweep gave pipedream a larger bubble than 1f1b (0.60 against 0.47 at
# p = 4); the figures of quiet runs are in docs/pipeline.md.
PD_ITERS=20
PD_MARGIN=0.08
# pd_expect NAME M S: stage S's run_fb for M micro-batches in the window; each
# stage also updates after every micro-batch (optim_ms), which is work that
# run_fb does not count: c_s = forward + backward + optim per micro-batch sets
# the pace, forward + backward the busy time
pd_expect() {
    awk -v M="$2" -v s="$3" -v f0="$(field "$TMP/$1.txt" 0 forward_ms)" -v b0="$(field "$TMP/$1.txt" 0 backward_ms)" \
        -v o0="$(field "$TMP/$1.txt" 0 optim_ms)" -v f1="$(field "$TMP/$1.txt" 1 forward_ms)" \
        -v b1="$(field "$TMP/$1.txt" 1 backward_ms)" -v o1="$(field "$TMP/$1.txt" 1 optim_ms)" 'BEGIN {
        c0 = f0 + b0 + o0; c1 = f1 + b1 + o1; hi = c0 > c1 ? c0 : c1; lo = c0 > c1 ? c1 : c0
        if (c0 <= 0 || c1 <= 0) exit 1
        printf "%.4f", 1 - M * (s == 0 ? f0 + b0 : f1 + b1) / (M * hi + lo) }'
}
# pd_check: pipedream's stages out of [e - LOW, e + HIGH], one line each
pd_check() {
    for s in 0 1; do
        b=$(field "$TMP/pd-pipedream.txt" $s run_fb)
        e=$(pd_expect pd-pipedream $PD_M $s) || { echo "stage $s: no forward/backward times in the trace"; continue; }
        awk -v b="$b" -v e="$e" -v lo=$LOW -v hi=$HIGH 'BEGIN { exit !(b == "" || b < e - lo || b > e + hi) }' &&
            echo "stage $s: run_fb $b over $PD_ITERS steps, expected $e (fill and drain once, the stages' imbalance; allowed $LOW below, $HIGH above)"
    done
}
ITERS=$PD_ITERS
PD_M=$(((PD_ITERS - 1) * 4))
pd_ok=0
for k in 1f1b pipedream; do
    attempt=0 result=
    while [ $attempt -lt $ATTEMPTS ]; do
        attempt=$((attempt + 1))
        measure "pd-$k" $k 4 || { result=error; break; }
        noisy=$(disturbed "pd-$k")
        if [ -n "$noisy" ]; then
            echo "pd-$k: attempt $attempt disturbed ($(echo $noisy)), repeating"
            continue
        fi
        [ $k = 1f1b ] && { result=ok; break; }
        bad=$(pd_check)
        [ -z "$bad" ] && { result=ok; break; }
        result=fail
        [ $attempt -lt $ATTEMPTS ] && echo "pd-$k: attempt $attempt out of tolerance, repeating: $(echo "$bad" | head -n 1)"
    done
    case $result in
    ok) pd_ok=$((pd_ok + 1)) ;;
    fail) echo "$bad" | while read -r line; do echo "FAIL: pipedream $line" >&2; done
        failures=$((failures + 1)) ;;
    esac
done
if [ "$pd_ok" -eq 2 ]; then
    for s in 0 1; do
        a=$(field "$TMP/pd-1f1b.txt" $s run_fb) ea=$(expect pd-1f1b 4 $s)
        b=$(field "$TMP/pd-pipedream.txt" $s run_fb) eb=$(pd_expect pd-pipedream $PD_M $s)
        # net of each run's own imbalance (measured - expected + the schedule's formula)
        na=$(awk -v v="$a" -v e="$ea" 'BEGIN { printf "%.4f", v - e + 0.2 }')
        nb=$(awk -v v="$b" -v e="$eb" -v M=$PD_M 'BEGIN { printf "%.4f", v - e + 1 / (M + 1) }')
        if awk -v a="$na" -v b="$nb" -v d=$PD_MARGIN 'BEGIN { exit !(b > a - d) }'; then
            fail "pipedream stage $s: run_fb net of the stages' imbalance $nb is not below 1f1b's $na by $PD_MARGIN at m = 4 (measured $b and $a; a flush per step?)"
        else
            echo "ok: pipedream stage $s over $PD_ITERS steps, m = 4: run_fb $b (expected $eb; net $nb), 1f1b's $a (expected $ea; net $na)"
        fi
    done
elif [ "$failures" -eq 0 ]; then
    echo "SKIP: pipedream against 1f1b: the machine was too busy to time both quietly"
fi

if [ "$failures" -eq 0 ] && [ "$measured" -eq 0 ] && [ "$skipped" -gt 0 ]; then
    echo "bubble.sh: the machine was too busy to time any run: skipped"
    exit 77
fi
[ "$failures" -eq 0 ] || { echo "bubble.sh: $failures failure(s)" >&2; exit 1; }
echo "bubble.sh: gpipe and 1f1b bubbles are within -$LOW/+$HIGH of (p-1)/(m+p-1) corrected for the stages' costs, and shrink with m; pipedream's is the fill and drain of one run"
