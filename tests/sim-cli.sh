#!/bin/sh
# sim-cli.sh: the dtsim program's command line, run by `make check` with
# DT_BUILDDIR (where ./dtsim is) and DT_SRCDIR set.
#
# Checks: dtsim --help, SUBCOMMAND --help and --version; every bad flag,
# value, sweep or config file exits 2 with exactly one stderr line
# `dtsim: ...` naming the flag or key (and nothing on stdout); `dtsim run`
# of a small pipelined scenario writes a trace that dt_trace_read accepts
# (read back as dtsim's --profile, and as --config) and a summary JSON with
# its keys; a single-rank simulated trace used as the profile predicts the
# same step time; `dtsim sweep` prints a table (text and CSV) with one row
# per combination; `dtsim validate` reads measured traces.
# POSIX sh; no skips: the binary is built by `make check` itself.

. "${DT_SRCDIR:-.}/tests/cli-lib.sh"
DTSIM=$BUILDDIR/dtsim
cli_init sim-cli.sh dtsim "$DTSIM"

# json_ok FILE: FILE parses as JSON (python3 when present; otherwise only non-empty)
json_ok() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null
    else
        [ -s "$1" ]
    fi
}

# number FILE KEY: the number after "KEY": on a line of FILE
number() { sed -n "s/^ *\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1" | head -n 1; }

# ---- --help and --version ------------------------------------------------------
run --help
# lists every flag, each with its default (switches say what happens without them) but --help and --version
expect_help --config --model --num-layers --hidden-size --num-attention-heads --seq-length --micro-batch-size \
    --global-batch-size --micro-batches --train-iters --tensor-model-parallel-size --pipeline-model-parallel-size \
    --data-parallel-size --pipeline-schedule --pipeline-split --allreduce --num-ps-servers \
    --use-distributed-optimizer --bucket-size-mb --allreduce-chunk-bytes --fp16 --bf16 --initial-loss-scale \
    --loss-scale-window --hysteresis --min-loss-scale --recompute-activations --recompute-granularity \
    --recompute-num-layers --slow-rank --no-vocab-parallel \
    --optimizer --hw --devices-per-node --cores-per-node --colocated --collectives --profile --grad-trace --trace \
    --summary --seed --help --version
grep -q -e '^  --no-scatter-gather-tensors-in-pipeline$' "$TMP/out" ||
    fail "--help does not list --no-scatter-gather-tensors-in-pipeline"
for word in 'dtsim run' 'dtsim sweep' 'dtsim validate' 'Exit status'; do
    grep -q -F "$word" "$TMP/out" || fail "--help does not mention '$word'"
done

run sweep --help
[ "$rc" -eq 0 ] || fail "sweep --help: exit $rc"
grep -q -e '^  --sweep ' "$TMP/out" || fail "sweep --help does not list --sweep"
grep -q -e '^  --csv ' "$TMP/out" || fail "sweep --help does not list --csv"
run validate --help
[ "$rc" -eq 0 ] || fail "validate --help: exit $rc"
for flag in --profile --hw --comm --devices-per-node --cores-per-node --colocated --skip; do
    grep -q -e "^  $flag " "$TMP/out" || fail "validate --help does not list $flag"
done
run run --help
[ "$rc" -eq 0 ] || fail "run --help: exit $rc"
grep -q -e '^  --trace ' "$TMP/out" || fail "run --help does not list --trace"
grep -q -e '^  --strict-memory ' "$TMP/out" || fail "run --help does not list --strict-memory"

run --version
[ "$rc" -eq 0 ] || fail "--version: exit $rc"
grep -q '^dtsim [0-9]' "$TMP/out" || fail "--version printed: $(cat "$TMP/out")"

# ---- bad command lines: exit 2, one line naming the flag ------------------------
expect_usage_error "subcommand" 
expect_usage_error "'frobnicate'" frobnicate
expect_usage_error "--bogus" run --bogus 1
# dtsim fp8 (issue 39): what it learns from is required, read, and an FP8 run's
expect_usage_error "--trace: expected the real FP8 run" fp8
expect_usage_error "no such file" fp8 --trace /nonexistent-dtsim-fp8.json
expect_usage_error "--fp8-margin" fp8 --trace /nonexistent-dtsim-fp8.json --fp8-margin 99
expect_usage_error "stray" run stray
expect_usage_error "--help" run --help=yes
expect_usage_error "--train-iters" run --train-iters
expect_usage_error "--pipeline-model-parallel-size" run --pipeline-model-parallel-size 0
expect_usage_error "--pipeline-model-parallel-size 3" run --pipeline-model-parallel-size 3
expect_usage_error "--tensor-model-parallel-size 3" run --tensor-model-parallel-size 3
expect_usage_error "--data-parallel-size" run --data-parallel-size x
expect_usage_error "--micro-batch-size" run --micro-batch-size 0
expect_usage_error "--global-batch-size 100" run --global-batch-size 100
expect_usage_error "--data-parallel-size 2" run --micro-batch-size 4 --data-parallel-size 2 --global-batch-size 12
expect_usage_error "--micro-batches 3" run --micro-batches 3 --global-batch-size 256
expect_usage_error "--micro-batches" run --micro-batches 0
expect_usage_error "--devices-per-node" run --devices-per-node 0
expect_usage_error "--cores-per-node" run --cores-per-node 0
expect_usage_error "--cores-per-node with --tensor-model-parallel-size 4" run --cores-per-node 1 --devices-per-node 2 --tensor-model-parallel-size 4
expect_usage_error "--devices-per-node" validate --devices-per-node x
expect_usage_error "--train-iters" run --train-iters 0
expect_usage_error "--seq-length 100" run --seq-length 100
expect_usage_error "--hidden-size" run --hidden-size 30
expect_usage_error "--num-layers" run --num-layers 0
expect_usage_error "--vocab-size" run --vocab-size 1
expect_usage_error "--model" run --model huge
expect_usage_error "--optimizer" run --optimizer adam
expect_usage_error "--pipeline-schedule" run --pipeline-schedule zigzag
expect_usage_error "--pipeline-split" run --pipeline-split 1,x
expect_usage_error "--pipeline-split" run --pipeline-model-parallel-size 2 --pipeline-split 1,2
expect_usage_error "--pipeline-split needs" run --pipeline-split 1,1
expect_usage_error "--allreduce" run --allreduce butterfly
expect_usage_error "--num-ps-servers" run --num-ps-servers 2
expect_usage_error "--num-ps-servers" run --allreduce ps-sync --num-ps-servers 0
expect_usage_error "parameter server" run --allreduce ps-sync --pipeline-model-parallel-size 2
expect_usage_error "--use-distributed-optimizer" run --allreduce ps-sync --use-distributed-optimizer
expect_usage_error "--bucket-size-mb" run --bucket-size-mb -1
expect_usage_error "--allreduce-chunk-bytes" run --allreduce-chunk-bytes x
expect_usage_error "--fp16 and --bf16" run --fp16 --bf16
expect_usage_error "--hysteresis" run --bf16 --hysteresis 3
expect_usage_error "--initial-loss-scale" run --fp16 --initial-loss-scale 0
expect_usage_error "--min-loss-scale" run --fp16 --initial-loss-scale 2 --min-loss-scale 4
expect_usage_error "--loss-scale-window" run --fp16 --loss-scale-window 0
expect_usage_error "pipedream with --fp16: each stage updates on its own" run --fp16 --pipeline-model-parallel-size 2 \
    --pipeline-schedule pipedream
expect_usage_error "pipedream with tied embeddings: the first and last stages" run \
    --pipeline-model-parallel-size 2 --pipeline-schedule pipedream --tie-embeddings-and-output-weights
expect_usage_error "--tie-embeddings-and-output-weights: give one" run --tie-embeddings-and-output-weights \
    --untie-embeddings-and-output-weights
expect_usage_error "--recompute-granularity" run --recompute-granularity some
expect_usage_error "--recompute-num-layers needs --recompute-granularity full" run --recompute-num-layers 2
expect_usage_error "--recompute-num-layers 3: expected 1..2 (the number of layers)" run --recompute-granularity full \
    --recompute-num-layers 3
expect_usage_error "--recompute-num-layers" run --recompute-granularity full --recompute-num-layers 0
expect_usage_error "--slow-rank" run --slow-rank 1
expect_usage_error "--slow-rank 3" run --slow-rank 3:10
expect_usage_error "--seed" run --seed -1
expect_usage_error "--trace" run --trace ''
expect_usage_error "--summary" run --summary=
expect_usage_error "$TMP/no-hw.json" run --hw "$TMP/no-hw.json"
expect_usage_error "$TMP/no-profile.json" run --profile "$TMP/no-profile.json"
expect_usage_error "$TMP/no-config.json" run --config "$TMP/no-config.json"
expect_usage_error "--grad-trace" run --fp16 --grad-trace "$TMP/no-grads.json"
# the sweep's own flags
expect_usage_error "--sweep" sweep
expect_usage_error "--sweep" sweep --sweep
expect_usage_error "'foo=1'" sweep --sweep foo=1
expect_usage_error "micro-batches" sweep --sweep micro-batches=0,2
expect_usage_error "given twice" sweep --sweep micro-batches=1 --sweep micro-batches=2
expect_usage_error "at most 3" sweep --sweep micro-batches=1 --sweep data-parallel-size=1 \
    --sweep pipeline-schedule=gpipe --sweep link-bandwidth-scale=1
expect_usage_error "pipeline-schedule" sweep --sweep pipeline-schedule=gpipe,zig
expect_usage_error "link-bandwidth-scale" sweep --sweep link-bandwidth-scale=0
expect_usage_error "pipeline-model-parallel-size=4" sweep --sweep pipeline-model-parallel-size=1,4
expect_usage_error "--trace" sweep --sweep micro-batches=1 --trace "$TMP/x.json"
# validate
expect_usage_error "--profile" validate "$TMP/run.json"
expect_usage_error "measured traces" validate --profile "$TMP/p.json"
expect_usage_error "--skip" validate --profile "$TMP/p.json" --skip -1 "$TMP/run.json"
expect_usage_error "--bogus" validate --bogus x

# ---- bad config files: exit 2, one line naming the file and the key --------------
printf '{"pipeline_model_parallel_size": "2"}\n' >"$TMP/c-type.json"
expect_usage_error '"pipeline_model_parallel_size": expected an integer' run --config "$TMP/c-type.json"
expect_usage_error "c-type.json" run --config "$TMP/c-type.json"
printf '{"num_layer": 4}\n' >"$TMP/c-key.json"
expect_usage_error '"num_layer": unknown key' run --config "$TMP/c-key.json"
printf '{"num_layers": 4,\n' >"$TMP/c-syntax.json"
expect_usage_error "c-syntax.json: line" run --config "$TMP/c-syntax.json"
printf '{"global_batch_size": 100}\n' >"$TMP/c-batch.json"
expect_usage_error '"global_batch_size": 100' run --config "$TMP/c-batch.json"
printf '{"hardware": "%s/no-hw.json"}\n' "$TMP" >"$TMP/c-hw.json"
expect_usage_error '"hardware"' run --config "$TMP/c-hw.json"
printf '{"allreduce": "ring", "pipeline_schedule": 3}\n' >"$TMP/c-sched.json"
expect_usage_error '"pipeline_schedule"' run --config "$TMP/c-sched.json"
printf '{"model": "mlp-bn"}\n' >"$TMP/c-mlp.json"
expect_usage_error '"model"' run --config "$TMP/c-mlp.json"
printf '[1, 2]\n' >"$TMP/c-array.json"
expect_usage_error "JSON object" run --config "$TMP/c-array.json"
# valid config, then a flag that makes it inconsistent: the check names the flag
printf '{"pipeline_model_parallel_size": 2, "micro_batches": 4, "micro_batch_size": 8, "train_iters": 3}\n' \
    >"$TMP/c-pp.json"
expect_usage_error "pipedream-vsync with --fp16" run --config "$TMP/c-pp.json" --fp16 --pipeline-schedule pipedream-vsync

# ---- pipedream in steady state: no barrier at a step's end ------------------------
# (the issue's sweep: before, pipedream's bubble read 0.60 against 1f1b's 0.47 at
# m = 4, as its stages waited for each other at every step's loss allreduce; its
# stages now only fill and drain once per run, the formula (p-1)/(steps*m+p-1))
run sweep --num-layers 8 --pipeline-model-parallel-size 4 --micro-batch-size 16 --train-iters 20 \
    --sweep pipeline-schedule=1f1b,pipedream --sweep micro-batches=4
if [ "$rc" -ne 0 ]; then
    fail "sweep pipedream: exit $rc: $(cat "$TMP/err")"
else
    b1=$(awk '$1 == "1f1b" && $2 == 4 { print $4 }' "$TMP/out")
    bp=$(awk '$1 == "pipedream" && $2 == 4 { print $4 }' "$TMP/out")
    fp=$(awk '$1 == "pipedream" && $2 == 4 { print $6 }' "$TMP/out")
    awk -v a="$b1" -v b="$bp" 'BEGIN { exit !(a != "" && b != "" && b < a - 0.1) }' ||
        fail "sweep: pipedream's bubble $bp is not below 1f1b's $b1 by 0.1 at p = 4, m = 4"
    [ "$fp" = 0.0361 ] || fail "sweep: pipedream's formula '$fp', expected 3/(20*4+3) = 0.0361"
fi

# ---- the issue-22 schedules side by side (docs/pipeline-schedules.md) -------------
# equal blocks on 4 stages, m = 8: the formulas 3/11, 3/19 (v = 2), 3/27, 3/51, and
# the step times in the same order (the embedding and head make the stages unequal)
run sweep --num-layers 8 --pipeline-model-parallel-size 4 --micro-batches 8 --train-iters 3 \
    --sweep pipeline-schedule=1f1b,interleaved-1f1b,zb-h1,zb-v
if [ "$rc" -ne 0 ]; then
    fail "sweep zb: exit $rc: $(cat "$TMP/err")"
else
    f=$(awk '$1 ~ /^(1f1b|interleaved-1f1b|zb-h1|zb-v)$/ { printf "%s ", $5 }' "$TMP/out")
    [ "$f" = "0.2727 0.1579 0.1111 0.0588 " ] || fail "sweep zb: formulas '$f'"
    awk '$1 ~ /^(1f1b|interleaved-1f1b|zb-h1|zb-v)$/ { if (n++ && $2 >= last) bad = 1; last = $2 }
        END { exit bad || n != 4 }' "$TMP/out" || fail "sweep zb: step times not decreasing: $(cat "$TMP/out")"
fi
run sweep --num-layers 8 --pipeline-model-parallel-size 2 --micro-batches 8 --train-iters 2 \
    --virtual-pipeline-model-parallel-size 4 --sweep pipeline-schedule=1f1b,interleaved-1f1b
f=$(awk '$1 == "interleaved-1f1b" { print $5 }' "$TMP/out")
[ "$rc" -eq 0 ] && [ "$f" = 0.0303 ] || fail "sweep interleaved v=4: exit $rc, formula '$f' (1/33 = 0.0303)"
expect_usage_error "--num-layers 6" run --num-layers 6 --pipeline-model-parallel-size 2 --micro-batches 4 \
    --pipeline-schedule interleaved-1f1b
expect_usage_error "micro-batches per step 3" run --num-layers 4 --pipeline-model-parallel-size 2 \
    --micro-batches 3 --pipeline-schedule interleaved-1f1b
expect_usage_error "--virtual-pipeline-model-parallel-size 2" run --num-layers 4 --pipeline-model-parallel-size 2 \
    --pipeline-schedule zb-h1 --virtual-pipeline-model-parallel-size 2

# ---- a small pipelined run: trace and summary ------------------------------------
run run --config "$TMP/c-pp.json" --trace "$TMP/pp.json" --summary "$TMP/pp-summary.json"
if [ "$rc" -ne 0 ]; then
    fail "run: exit $rc: $(cat "$TMP/err")"
else
    # the tiny model's head outweighs its blocks: only the warning on the stages' balance
    grep -v "^dtsim: warning: the stages' compute differs by" "$TMP/err" | grep -q . && fail "run wrote to stderr: $(cat "$TMP/err")"
    grep -q 'step time' "$TMP/out" || fail "run: no step time line: $(cat "$TMP/out")"
    grep -q "^trace: $TMP/pp.json" "$TMP/out" || fail "run: no trace line"
    grep -q "^summary: $TMP/pp-summary.json" "$TMP/out" || fail "run: no summary line"
    json_ok "$TMP/pp-summary.json" || fail "the summary is not valid JSON"
    for key in tool steps step_ms bubble bubble_formula peak_memory_bytes config; do
        grep -q "\"$key\"" "$TMP/pp-summary.json" || fail "summary has no key $key"
    done
    f=$(number "$TMP/pp-summary.json" bubble_formula)
    [ "$f" = 0.2 ] || fail "summary: bubble_formula '$f', expected 0.2 for p=2, m=4"
    json_ok "$TMP/pp.json" || fail "the trace is not valid JSON"
    for word in '"dtrain-trace"' '"tool":"dtsim"' '"traceEvents"' '"forward"' '"backward"'; do
        grep -q -F "$word" "$TMP/pp.json" || fail "trace has no $word"
    done
    # the trace's config is the scenario: it reads back as --config to the same run
    run run --config "$TMP/pp.json"
    if [ "$rc" -ne 0 ]; then
        fail "run --config TRACE: exit $rc: $(cat "$TMP/err")"
    else
        grep 'step time' "$TMP/out" >"$TMP/again.txt"
        "$DTSIM" run --config "$TMP/c-pp.json" 2>/dev/null | grep 'step time' >"$TMP/first.txt"
        cmp -s "$TMP/first.txt" "$TMP/again.txt" ||
            fail "run --config TRACE differs: $(cat "$TMP/first.txt") vs $(cat "$TMP/again.txt")"
    fi
    # --config reads a trace's header only (issue 20, F13: a 198 MB trace took 16.8 s and 3.3 GB):
    # the header line followed by a cut event and 16 MiB of garbage gives the same run, at once
    { head -n 2 "$TMP/pp.json"; printf '{"name":"forw'; head -c 16777216 /dev/zero | tr '\0' 'x'; } \
        >"$TMP/pp-tail.json"
    run run --config "$TMP/pp-tail.json"
    if [ "$rc" -ne 0 ]; then
        fail "run --config TRACE-WITH-GARBAGE-TAIL: exit $rc: $(cat "$TMP/err")"
    else
        grep 'step time' "$TMP/out" >"$TMP/tail.txt"
        cmp -s "$TMP/first.txt" "$TMP/tail.txt" ||
            fail "run --config (garbage tail) differs: $(cat "$TMP/first.txt") vs $(cat "$TMP/tail.txt")"
    fi
    # so does the summary (its "config")
    run run --config "$TMP/pp-summary.json" --train-iters 2
    [ "$rc" -eq 0 ] || fail "run --config SUMMARY: exit $rc: $(cat "$TMP/err")"
    # the same run twice writes the same bytes (a deterministic simulation)
    "$DTSIM" run --config "$TMP/c-pp.json" --trace "$TMP/pp2.json" >/dev/null 2>&1 ||
        fail "second run failed"
    cmp -s "$TMP/pp.json" "$TMP/pp2.json" || fail "two runs of one scenario wrote different traces"
fi

# a single-rank run's trace is read by dt_trace_read as a profile, and
# predicts its own step time
run run --micro-batch-size 8 --train-iters 3 --trace "$TMP/one.json"
[ "$rc" -eq 0 ] || fail "single-rank run: exit $rc: $(cat "$TMP/err")"
step1=$(grep 'step time' "$TMP/out" | sed 's/^step time \([0-9.]*\) ms.*/\1/')
run run --micro-batch-size 8 --train-iters 3 --profile "$TMP/one.json"
if [ "$rc" -ne 0 ]; then
    fail "run --profile (a simulated trace): exit $rc: $(cat "$TMP/err")"
else
    grep -q "cost: profile $TMP/one.json" "$TMP/out" || fail "run --profile: the cost line does not name the profile"
    step2=$(grep 'step time' "$TMP/out" | sed 's/^step time \([0-9.]*\) ms.*/\1/')
    [ -n "$step1" ] && [ "$step1" = "$step2" ] ||
        fail "the profile of a simulated run predicts '$step2' ms, the run took '$step1' ms"
fi
# --colocated: copies of the profile's own run fit no slowdown (a simulated run is exact), so the
# prediction is the same; a list of one, a missing --profile, another configuration are refused
run run --micro-batch-size 8 --train-iters 3 --profile "$TMP/one.json" --colocated "$TMP/one.json,$TMP/one.json" \
    --cores-per-node 2
step3=$(grep 'step time' "$TMP/out" | sed 's/^step time \([0-9.]*\) ms.*/\1/')
[ "$rc" -eq 0 ] && [ "$step3" = "$step1" ] || fail "--colocated of the lone run itself: exit $rc, '$step3' ms vs '$step1'"
expect_usage_error "--colocated $TMP/one.json: expected 2 to 64" run --profile "$TMP/one.json" --colocated "$TMP/one.json"
expect_usage_error "--colocated: expected --profile" run --colocated "$TMP/one.json,$TMP/one.json"
run run --micro-batch-size 4 --train-iters 3 --trace "$TMP/other.json"
expect_usage_error "$TMP/other.json: not the lone profile's configuration" run --micro-batch-size 8 \
    --profile "$TMP/one.json" --colocated "$TMP/one.json,$TMP/other.json"
# a truncated trace is refused by the reader (exit 2, naming the file)
head -c 400 "$TMP/one.json" >"$TMP/cut.json"
expect_usage_error "$TMP/cut.json" run --micro-batch-size 8 --profile "$TMP/cut.json"

# validate: predict the runs from the single-rank profile
run validate --profile "$TMP/one.json" "$TMP/one.json" "$TMP/pp.json"
if [ "$rc" -ne 0 ]; then
    fail "validate: exit $rc: $(cat "$TMP/err")"
else
    grep -q 'measured' "$TMP/out" || fail "validate printed no table: $(cat "$TMP/out")"
fi

# a real dtrain run's trace: its config is the scenario, its spans the costs
if [ -x "$BUILDDIR/dtrain" ]; then
    "$BUILDDIR/dtrain" --train-iters 3 --micro-batch-size 8 --global-batch-size 16 --eval-iters 1 \
        --eval-interval 0 --threads 1 --trace "$TMP/real.json" >/dev/null 2>"$TMP/err" ||
        fail "dtrain --trace: $(cat "$TMP/err")"
    run run --config "$TMP/real.json" --profile "$TMP/real.json"
    if [ "$rc" -ne 0 ]; then
        fail "run --config/--profile of a dtrain trace: exit $rc: $(cat "$TMP/err")"
    else
        grep -q '^scenario: tiny .*B=8 T=16 m=2 (global batch 16), 3 steps' "$TMP/out" ||
            fail "run --config of a dtrain trace: not its scenario: $(head -n 1 "$TMP/out")"
    fi
    # dtrain's config keys are not a dtsim config's: flags still override them
    run run --config "$TMP/real.json" --micro-batches 4 --train-iters 1
    grep -q 'm=4 (global batch 32), 1 step$' "$TMP/out" || fail "flags over a dtrain config: $(head -n 1 "$TMP/out")"
else
    fail "$BUILDDIR/dtrain not found: the dtrain-trace checks did not run"
fi

# ---- --devices-per-node: 4 ranks on one node use its intra link, not the inter one ----
HW2=${DT_SRCDIR:-.}/sim/hw/cpu-2core.json
run run --data-parallel-size 4 --bucket-size-mb 0 --train-iters 2 --hw "$HW2"
two=$(sed -n 's/^comm per step on rank 0: dp allreduce \([0-9.]*\) ms.*/\1/p' "$TMP/out")
run run --data-parallel-size 4 --bucket-size-mb 0 --train-iters 2 --hw "$HW2" --devices-per-node 4
one=$(sed -n 's/^comm per step on rank 0: dp allreduce \([0-9.]*\) ms.*/\1/p' "$TMP/out")
# cpu-2core.json: 2 devices per node, intra 10.81 GB/s, inter 1.25 GB/s: one node is faster
if [ -z "$two" ] || [ -z "$one" ] || ! awk -v a="$one" -v b="$two" 'BEGIN { exit !(a > 0 && a < b) }'; then
    fail "--devices-per-node 4: dp allreduce '$one' ms, expected less than on 2 nodes ('$two' ms)"
fi

# ---- --collectives: one node (alike links), so the analytic ring is exactly the messages' ----
run run --data-parallel-size 4 --bucket-size-mb 0 --train-iters 2 --devices-per-node 4 --collectives messages
msg=$(sed -n 's/^comm per step on rank 0: dp allreduce \([0-9.]*\) ms.*/\1/p' "$TMP/out")
run run --data-parallel-size 4 --bucket-size-mb 0 --train-iters 2 --devices-per-node 4 --collectives analytic
ana=$(sed -n 's/^comm per step on rank 0: dp allreduce \([0-9.]*\) ms.*/\1/p' "$TMP/out")
[ -n "$msg" ] && [ "$msg" = "$ana" ] || fail "--collectives: dp allreduce '$ana' ms analytic, '$msg' ms as messages"
expect_usage_error "--collectives" run --collectives fast

# ---- sweep: one row per combination ----------------------------------------------
run sweep --micro-batch-size 8 --train-iters 2 --sweep pipeline-model-parallel-size=1,2 --sweep micro-batches=1,4,8
if [ "$rc" -ne 0 ]; then
    fail "sweep: exit $rc: $(cat "$TMP/err")"
else
    grep -q 'step_ms' "$TMP/out" || fail "sweep: no header: $(cat "$TMP/out")"
    grep -q 'formula' "$TMP/out" || fail "sweep: no formula column"
    rows=$(grep -c '^ *[12]  *[148]  ' "$TMP/out")
    [ "$rows" -eq 6 ] || fail "sweep: $rows rows, expected 6: $(cat "$TMP/out")"
    grep -q '^ *2  *4  .* 0\.2000 ' "$TMP/out" || fail "sweep: no formula 0.2000 for p=2 m=4: $(cat "$TMP/out")"
fi
run sweep --csv --micro-batch-size 8 --train-iters 2 --sweep pipeline-schedule=gpipe,1f1b \
    --sweep link-bandwidth-scale=0.5,2 --pipeline-model-parallel-size 2 --micro-batches 4
if [ "$rc" -ne 0 ]; then
    fail "sweep --csv: exit $rc: $(cat "$TMP/err")"
else
    head -n 1 "$TMP/out" | grep -q '^schedule,bw_scale,step_ms,bubble0,bubble_max,formula,comm_ms,peak_MiB$' ||
        fail "sweep --csv: header: $(head -n 1 "$TMP/out")"
    [ "$(wc -l <"$TMP/out" | tr -d ' ')" -eq 5 ] || fail "sweep --csv: expected 5 lines: $(cat "$TMP/out")"
    n_fields=$(awk -F, '{ print NF }' "$TMP/out" | sort -u | tr -d '\n')
    [ "$n_fields" = 8 ] || fail "sweep --csv: rows of different widths: $(cat "$TMP/out")"
fi

# sweeping d under --global-batch-size keeps the global batch: m = G / (B d)
run sweep --micro-batch-size 8 --global-batch-size 64 --train-iters 2 --sweep data-parallel-size=1,2,4 \
    --pipeline-model-parallel-size 2
if [ "$rc" -ne 0 ]; then
    fail "sweep d with --global-batch-size: exit $rc: $(cat "$TMP/err")"
else
    for row in '1 0.1111' '2 0.2000' '4 0.3333'; do
        set -- $row
        grep -q "^ *$1  .* $2 " "$TMP/out" || fail "sweep d=$1 with --global-batch-size 64: formula $2 (m = 64 / (8 x $1)) missing: $(cat "$TMP/out")"
    done
fi
expect_usage_error "--data-parallel-size 3" sweep --micro-batch-size 8 --global-batch-size 64 --sweep data-parallel-size=1,3

# ---- at scale: memory capacity, the stages' balance, the tensor-parallel flags ----
# a device of 1 MB: every rank's predicted peak is over it (a warning line),
# --strict-memory refuses it (exit 2, one line); the summary names the ranks
sed 's/"mem_capacity_bytes": [0-9]*/"mem_capacity_bytes": 1000000/' "$SRCDIR/sim/hw/h100-ib.json" >"$TMP/small-mem.json"
run run --hw "$TMP/small-mem.json" --pipeline-model-parallel-size 2 --micro-batch-size 8 --micro-batches 4 \
    --train-iters 2 --summary "$TMP/mem.json"
[ "$rc" -eq 0 ] || fail "run over memory: exit $rc: $(cat "$TMP/err")"
[ "$(grep -c memory "$TMP/err")" -eq 1 ] && grep -q "^dtsim: warning: rank 0 (stage 0) peaks at .*mem_capacity_bytes 1000000.* 2 of 2 ranks over" "$TMP/err" ||
    fail "run over memory: expected one warning line naming rank 0, stage 0 and the capacity: $(cat "$TMP/err")"
grep -q '"over_memory": true' "$TMP/mem.json" || fail "run over memory: no \"over_memory\": true in the summary"
grep -q '"mem_capacity_bytes": 1000000' "$TMP/mem.json" || fail "run over memory: no mem_capacity_bytes in the summary"
tr -d ' \n' <"$TMP/mem.json" | grep -q '"over_memory_ranks":\[0,1\]' || fail "run over memory: over_memory_ranks is not [0, 1]"
rm -f "$TMP/mem.json"
run run --hw "$TMP/small-mem.json" --pipeline-model-parallel-size 2 --micro-batch-size 8 --micro-batches 4 \
    --train-iters 2 --strict-memory --summary "$TMP/mem.json"
[ "$rc" -eq 2 ] || fail "--strict-memory over memory: exit $rc, expected 2"
[ "$(wc -l <"$TMP/err" | tr -d ' ')" -eq 1 ] && grep -q "^dtsim: --strict-memory: rank 0 (stage 0) peaks at" "$TMP/err" ||
    fail "--strict-memory: expected one line: $(cat "$TMP/err")"
[ -e "$TMP/mem.json" ] && fail "--strict-memory wrote the summary of a refused scenario"
run run --pipeline-model-parallel-size 2 --micro-batch-size 8 --micro-batches 4 --train-iters 2 --strict-memory \
    --summary "$TMP/mem.json"
[ "$rc" -eq 0 ] && ! grep -q "memory" "$TMP/err" || fail "--strict-memory within memory: exit $rc: $(cat "$TMP/err")"
grep -q '"over_memory": false' "$TMP/mem.json" || fail "run within memory: no \"over_memory\": false in the summary"
# 3 blocks and the embedding against 1 block and the head: a warning naming both stages
run run --num-layers 4 --pipeline-model-parallel-size 2 --pipeline-split 3,1 --micro-batch-size 8 --micro-batches 4 \
    --train-iters 3 --hw "$SRCDIR/sim/hw/cpu-2core.json" --trace "$TMP/split.json"
[ "$rc" -eq 0 ] || fail "run --pipeline-split 3,1: exit $rc: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/err" | tr -d ' ')" -eq 1 ] && grep -q "^dtsim: warning: the stages' compute differs by .*(stage 0 .*, stage 1 " "$TMP/err" ||
    fail "run --pipeline-split 3,1: expected one warning line on the stages' compute: $(cat "$TMP/err")"
# dtsim analyze shows each stage's compute, and the ratio
run analyze "$TMP/split.json"
line=$(grep '^A: compute per step by stage' "$TMP/out")
ratio=$(echo "$line" | sed -n 's/.*most\/least \([0-9.]*\)$/\1/p')
[ -n "$ratio" ] && awk -v r="$ratio" 'BEGIN { exit !(r > 1.1) }' ||
    fail "analyze: no per-stage compute line with most/least > 1.1: $line"
run run --num-layers 4 --pipeline-model-parallel-size 2 --micro-batch-size 8 --micro-batches 4 --train-iters 2 \
    --hw "$SRCDIR/sim/hw/cpu-2core.json" --no-vocab-parallel --no-scatter-gather-tensors-in-pipeline \
    --tensor-model-parallel-size 2 --summary "$TMP/tp.json"
[ "$rc" -eq 0 ] || fail "run --no-vocab-parallel: exit $rc: $(cat "$TMP/err")"
grep -q '"vocab_parallel": false' "$TMP/tp.json" && grep -q '"scatter_gather_tensors_in_pipeline": false' "$TMP/tp.json" ||
    fail "run --no-vocab-parallel --no-scatter-gather-tensors-in-pipeline: the summary's config keeps them on"
# a "gemm_efficiency" table out of order is refused in one line naming the entry
sed 's/"devices_per_node": 8,/"devices_per_node": 8, "gemm_efficiency": [{"flops": 1e12, "efficiency": 0.7}, {"flops": 1e9, "efficiency": 0.4}],/' \
    "$SRCDIR/sim/hw/h100-ib.json" >"$TMP/bad-gemm.json"
expect_usage_error 'gemm_efficiency[1].flops' run --hw "$TMP/bad-gemm.json"
printf '{"vocab_parallel": 3}\n' >"$TMP/vp.json"
expect_usage_error '"vocab_parallel"' run --config "$TMP/vp.json"

cli_finish
echo "sim-cli.sh: all passed"
exit 0
