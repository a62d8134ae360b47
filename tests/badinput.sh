#!/bin/sh
# badinput.sh: the bad-input catalogue, run by `make check` with DT_BUILDDIR
# (where ./dtrain, ./dtsim, ./dtviz and ./dtbench are) and DT_SRCDIR set.
#
# Every program's inputs with invalid values, table-driven. A table row is
#   EXPECTED_EXIT | WORD_IN_MESSAGE | ARGS...
# (ARGS are read by the shell: quote '' for an empty value; $TMP is this
# run's scratch directory, $O an output directory that must stay empty).
# Each case runs under `timeout 30` and must: exit with EXPECTED_EXIT (2 for
# a bad command line or input, 1 for a documented run-time failure such as
# a missing --data file; docs/errors.md); not crash or hang (exit >= 124, a
# sanitizer report, an assertion); print exactly one line on stderr,
# starting "PROG: " or "PROG SUBCOMMAND: " and holding WORD; and leave $O
# empty (no partial --trace/--summary/--png/--save output). Under mpirun
# (the LAYOUT table: EXPECTED_EXIT | WORD | NP | ARGS) mpirun adds its own
# banner: exactly one "dtrain: " line (rank 0's) is required there.
#
# The numeric tables (FLAG | KIND | EXTRA...) expand to one case per invalid
# value: for every flag non-numeric 'abc', empty '', trailing junk '1x',
# '1e999', 'nan', 'inf' and a leading space; for integers (KIND i) also
# '2.5' and 2^66; for numbers (KIND f) 1e39 (beyond a float); EXTRA lists
# the values the flag's range excludes (negative, zero where invalid, too
# large).
#
# Tables: dtrain flags and combinations; dtrain --data files; dtrain
# layouts under mpirun -np 2..4; dtrain checkpoints (--save/--load, and
# --generate from them) and --comm-timeout; dtsim flags, configs, traces
# (--config, --profile, --grad-trace), hardware files and absurd sizes;
# dtviz flags and traces; dtbench subcommands' flags and files. An unreadable (chmod 000) file is
# checked only when not running as root (root reads it anyway).
# POSIX sh. Skips (77) only if the build has no MPI: then the layouts are
# left out and the rest runs.

set -u
LC_ALL=C
export LC_ALL
BUILDDIR=${DT_BUILDDIR:-.}
SRCDIR=${DT_SRCDIR:-.}
for p in dtrain dtsim dtbench; do
    [ -x "$BUILDDIR/$p" ] || { echo "badinput.sh: $BUILDDIR/$p not found (set DT_BUILDDIR)" >&2; exit 99; }
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-badinput.XXXXXX") || exit 99
trap 'chmod -R u+rwx "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT HUP INT TERM
O=$TMP/out
failures=0
cases=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

HAVE_MPI=0
if "$BUILDDIR/tests/check_comm" --have-mpi 2>/dev/null | grep -q yes && command -v mpirun >/dev/null 2>&1; then
    HAVE_MPI=1
    . "$SRCDIR/tests/mpi-env.sh"
fi
MPIRUN="mpirun --oversubscribe --allow-run-as-root"

# what a crash leaves on stderr
CRASH_RE='AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|ThreadSanitizer|runtime error:|Assertion .* failed|Segmentation fault|core dumped|Signal: |signal [0-9]|MPI_ABORT'

# one_case NAME EXPECT WORD NP PROG ARGS...: run and check one case (NP: - for no mpirun)
one_case() {
    name=$1 expect=$2 word=$3 np=$4 prog=$5
    shift 5
    cases=$((cases + 1))
    rm -rf "$O"
    mkdir -p "$O"
    if [ "$np" = - ]; then
        timeout 30 "$prog" "$@" >"$TMP/stdout" 2>"$TMP/stderr" </dev/null
    else
        timeout 60 $MPIRUN -np "$np" "$prog" "$@" >"$TMP/stdout" 2>"$TMP/stderr" </dev/null
    fi
    rc=$?
    what="$name $* ${np#-}"
    if [ "$rc" -ge 124 ]; then
        fail "$what: exit $rc (a hang (124) or a crash): $(head -c 400 "$TMP/stderr")"
        return
    fi
    # ASan with allocator_may_return_null=1 (make check under --enable-sanitizers) warns when it returns
    # NULL for an impossible size: that is the clean path, not a crash report or a line of ours
    if grep -q 'WARNING: AddressSanitizer failed to allocate' "$TMP/stderr"; then
        grep -v 'WARNING: AddressSanitizer failed to allocate' "$TMP/stderr" >"$TMP/stderr.asan"
        mv "$TMP/stderr.asan" "$TMP/stderr"
    fi
    if grep -E -q "$CRASH_RE" "$TMP/stderr"; then
        fail "$what: crash report on stderr: $(grep -E "$CRASH_RE" "$TMP/stderr" | head -3)"
        return
    fi
    if [ "$rc" -ne "$expect" ]; then
        fail "$what: exit $rc, expected $expect (stderr: $(head -c 400 "$TMP/stderr"))"
        return
    fi
    if [ -n "$(ls -A "$O")" ]; then
        fail "$what: left output behind after the failure: $(ls -A "$O")"
        return
    fi
    [ "$expect" -eq 0 ] && { echo "ok: $what -> exit 0"; return; }
    if [ "$np" = - ]; then
        lines=$(wc -l <"$TMP/stderr" | tr -d ' ')
        msg=$(cat "$TMP/stderr")
        if [ "$lines" != 1 ]; then
            fail "$what: $lines lines on stderr, expected 1: $msg"
            return
        fi
        case $msg in
        "$name: "* | "$name "[a-z]*": "*) ;;
        *) fail "$what: stderr does not start with '$name: ': $msg"; return ;;
        esac
    else
        lines=$(grep -c "^$name: " "$TMP/stderr")
        msg=$(grep "^$name: " "$TMP/stderr")
        if [ "$lines" != 1 ]; then
            fail "$what: $lines '$name: ' lines on stderr, expected 1 (rank 0's): $(cat "$TMP/stderr")"
            return
        fi
    fi
    case $msg in
    *"$word"*) echo "ok: $what -> $msg" ;;
    *) fail "$what: stderr does not name '$word': $msg" ;;
    esac
}

# word_of TEXT: a table's WORD, trimmed, with $TMP and $O replaced
word_of() { printf '%s\n' "$1" | sed "s/^ *//; s/ *\$//; s|\\\$TMP|$TMP|g; s|\\\$O|$O|g"; }

# table NAME PROG [PREFIX...] < ROWS: run each row "EXPECT | WORD | ARGS" as PROG PREFIX ARGS
table() {
    t_name=$1 t_prog=$2
    shift 2
    t_prefix=$*
    while IFS='|' read -r t_exp t_word t_args; do
        case $t_exp in '' | '#'*) continue ;; esac
        t_exp=$(echo $t_exp)
        t_word=$(word_of "$t_word")
        eval "set -- $t_prefix $t_args"
        one_case "$t_name" "$t_exp" "$t_word" - "$t_prog" "$@"
    done
}

# mpi_table < ROWS: "EXPECT | WORD | NP | ARGS" as mpirun -np NP dtrain ARGS
mpi_table() {
    while IFS='|' read -r t_exp t_word t_np t_args; do
        case $t_exp in '' | '#'*) continue ;; esac
        t_exp=$(echo $t_exp)
        t_np=$(echo $t_np)
        t_word=$(word_of "$t_word")
        eval "set -- $t_args"
        one_case dtrain "$t_exp" "$t_word" "$t_np" "$BUILDDIR/dtrain" --train-iters 1 --eval-iters 1 "$@"
    done
}

# numeric NAME PROG [PREFIX...] < ROWS: "FLAG | KIND | EXTRA VALUES" -> one case per invalid value
numeric() {
    n_name=$1 n_prog=$2
    shift 2
    n_prefix=$*
    while IFS='|' read -r n_flag n_kind n_extra; do
        case $n_flag in '' | '#'*) continue ;; esac
        n_flag=$(echo $n_flag)
        n_kind=$(echo $n_kind)
        if [ "$n_kind" = i ]; then more="2.5 73786976294838206464"; else more="1e39"; fi
        for v in abc EMPTY 1x 1e999 nan inf SPACE7 $more $n_extra; do
            case $v in EMPTY) v= ;; SPACE7) v=' 7' ;; esac
            eval "set -- $n_prefix"
            one_case "$n_name" 2 "$n_flag" - "$n_prog" "$@" "$n_flag" "$v"
        done
    done
}

DTRAIN=$BUILDDIR/dtrain
DTSIM=$BUILDDIR/dtsim
DTVIZ=$BUILDDIR/dtviz
DTBENCH=$BUILDDIR/dtbench

# ---- inputs ----------------------------------------------------------------------
: >"$TMP/empty"
printf 'abc' >"$TMP/short.txt"
awk 'BEGIN { for (i = 0; i < 10; i++) print "the quick brown fox" }' >"$TMP/150.txt" # 200 bytes
head -c 4096 /dev/urandom >"$TMP/junk.bin" 2>/dev/null || awk 'BEGIN { for (i = 0; i < 4096; i++) printf "%c", 128 + i % 120 }' >"$TMP/junk.bin"
mkdir "$TMP/dir"
mkfifo "$TMP/fifo" # no writer: opening it for reading would block for ever
printf 'secret text for a file nobody may read, long enough for any sequence length.%.0s\n' 1 2 3 4 >"$TMP/noread.txt"
chmod 000 "$TMP/noread.txt"
printf '{"num_layers": 4,\n' >"$TMP/syntax.json"
printf '[1, 2, 3]\n' >"$TMP/array.json"
printf '{"traceEvents":[{"name":"x","ph":"X","ts":1,"dur":2,"pid":1,"tid":1}]}\n' >"$TMP/chrome.json"
printf '[{"name":"x","ph":"X","ts":1,"dur":2,"pid":1,"tid":1}]\n' >"$TMP/chrome-array.json"
# dtsim configs
cfg() { printf '%s\n' "$2" >"$TMP/$1.json"; }
cfg c-layers '{"num_layers": 1000000000000}'
cfg c-mb40 '{"micro_batch_size": 1099511627776}'
cfg c-m40 '{"micro_batches": 1099511627776}'
cfg c-neg '{"micro_batch_size": -4}'
cfg c-negsize '{"hidden_size": -64}'
cfg c-float '{"num_layers": 2.5}'
cfg c-str '{"hidden_size": "64"}'
cfg c-bool '{"use_distributed_optimizer": "yes"}'
cfg c-key '{"num_layer": 4}'
cfg c-dup '{"num_layers": 2, "num_layers": 3}'
cfg c-steps '{"train_iters": 1000000000000}'
cfg c-time '{"hidden_size": 65536, "num_layers": 1024, "train_iters": 2500}'
cfg c-ranks '{"data_parallel_size": 1048576}'
cfg c-hw '{"hardware": "/no/such/hw.json"}'
cfg c-hwobj '{"hardware": {"format": "dtsim-hw", "version": 1, "name": "x", "peak_flops": -1}}'
cfg c-sched '{"pipeline_schedule": "zigzag"}'
cfg c-split '{"pipeline_model_parallel_size": 2, "pipeline_split": [1, 5]}'
cfg c-trace-v2 '{"otherData": {"format": "dtrain-trace", "version": 2, "config": {"num_layers": 2}}, "traceEvents": []}'
cfg c-trace-fmt '{"otherData": {"format": "perfetto", "version": 1, "config": {"num_layers": 2}}, "traceEvents": []}'
# hardware files
HWREF=$SRCDIR/sim/hw/cpu-2core.json
cfg hw-fmt '{"format": "dtsim-config", "version": 1, "name": "x"}'
cfg hw-ver '{"format": "dtsim-hw", "version": 7, "name": "x"}'
cfg hw-neg "$(sed 's/"peak_flops": *[0-9.e+]*/"peak_flops": -1/' "$HWREF")"
cfg hw-zero-bw "$(sed 's/"bytes_per_ns": *[0-9.e+]*/"bytes_per_ns": 0/' "$HWREF")"
cfg hw-str "$(sed 's/"efficiency": *[0-9.e+]*/"efficiency": "high"/' "$HWREF")"
# issue 20, F2: absurd figures made durations overflow int64 (dts_engine_at's "scheduled in the past" assertion)
cfg hw-slowflops "$(sed 's/"peak_flops": *[0-9.e+]*/"peak_flops": 1e-3/' "$HWREF")"
cfg hw-slowmem "$(sed 's/"mem_bytes_per_s": *[0-9.e+]*/"mem_bytes_per_s": 1e-300/' "$HWREF")"
cfg hw-tinyeff "$(sed 's/"efficiency": *[0-9.e+]*/"efficiency": 1e-300/' "$HWREF")"
cfg hw-slowbw "$(sed 's/"bytes_per_ns": *[0-9.e+]*/"bytes_per_ns": 1e-300/' "$HWREF")"
cfg hw-alpha308 "$(sed 's/"alpha_ns": *[0-9.e+]*/"alpha_ns": 1e308/' "$HWREF")"
cfg hw-alpha63 "$(sed 's/"alpha_ns": *[0-9.e+]*/"alpha_ns": 9223372036854775807/' "$HWREF")"
cfg hw-kov63 "$(sed 's/"kernel_overhead_ns": *[0-9.e+]*/"kernel_overhead_ns": 9223372036854775807/' "$HWREF")"
cfg hw-key "$(sed 's/"efficiency"/"eficiency"/' "$HWREF")"
cfg hw-nolink "$(sed 's/"intra"/"intra_link"/' "$HWREF")"
head -c 200 "$HWREF" >"$TMP/hw-cut.json"
# traces: a real one from dtrain, a simulated one from dtsim, and damaged copies
"$DTRAIN" --train-iters 3 --micro-batch-size 8 --global-batch-size 16 --eval-iters 1 --eval-interval 0 --threads 1 \
    --trace "$TMP/real.json" >"$TMP/setup.out" 2>&1 || { cat "$TMP/setup.out" >&2; fail "dtrain --trace (setup) failed"; }
"$DTSIM" run --pipeline-model-parallel-size 2 --micro-batches 4 --train-iters 2 --trace "$TMP/pp.json" \
    >"$TMP/setup.out" 2>&1 || { cat "$TMP/setup.out" >&2; fail "dtsim run --trace (setup) failed"; }
sed 's/"version":1/"version":2/' "$TMP/real.json" >"$TMP/t-v2.json"
sed 's/"format":"dtrain-trace"/"format":"chrome"/' "$TMP/real.json" >"$TMP/t-fmt.json"
head -c 3000 "$TMP/real.json" >"$TMP/t-cut.json"
head -c 100 "$TMP/real.json" >"$TMP/t-cut100.json"
sed '5s/"dur":[0-9.]*,//' "$TMP/real.json" >"$TMP/t-nodur.json"
sed '5s/"dur":[0-9.]*/"dur":-5.000/' "$TMP/real.json" >"$TMP/t-negdur.json"
sed '5s/"ts":[0-9.]*/"ts":1e300/' "$TMP/real.json" >"$TMP/t-hugets.json"
sed 's/"forward"/"frward"/g' "$TMP/real.json" >"$TMP/t-nofwd.json"
sed 's/"config":{.*}},"displayTimeUnit"/"cfg":{}},"displayTimeUnit"/' "$TMP/real.json" >"$TMP/t-nocfg.json"
sed 's/"num_layers":2,/"num_layers":1000000000000,/' "$TMP/real.json" >"$TMP/t-layers.json"
sed 's/"micro_batch_size":8,/"micro_batch_size":1099511627776,/' "$TMP/real.json" >"$TMP/t-mb40.json"
# values outside the ranges of docs/trace-format.md "Ranges" (issue 20, F1: an iter of 2^62 overflowed a heap
# buffer in dtsim validate and dtviz; 2^31-1 made them try to fill 16 GiB)
sed 's/"iter":1\([,}]\)/"iter":4611686018427387904\1/g' "$TMP/real.json" >"$TMP/t-iter62.json"
sed 's/"iter":1\([,}]\)/"iter":2147483647\1/g' "$TMP/real.json" >"$TMP/t-iter31.json"
sed '5s/"ts":[0-9.]*/"ts":-0.001/' "$TMP/real.json" >"$TMP/t-negts.json"
sed '5s/"ts":[0-9.]*,"dur":[0-9.]*/"ts":9223372036854775.000,"dur":1.000/' "$TMP/real.json" >"$TMP/t-tsdur.json"
sed '5s/"pid":0/"pid":1/' "$TMP/real.json" >"$TMP/t-pid.json"
sed '5s/"tid":0/"tid":7/' "$TMP/real.json" >"$TMP/t-tid.json"
sed '5s/"layer":-1/"layer":9/' "$TMP/real.json" >"$TMP/t-layer.json"

# ---- dtrain: numeric flags -----------------------------------------------------------
numeric dtrain "$DTRAIN" --train-iters 0 <<'EOF'
--num-layers | i | -1 0 1025
--hidden-size | i | -1 0 65537
--num-attention-heads | i | -1 0
--max-position-embeddings | i | -1 0 65537
--seq-length | i | -1 0
--task-digits | i | -1 0 10
--task-max-len | i | -1 0 65
--blobs-classes | i | -1 0 1 1025
--blobs-dims | i | -1 0 65537
--blobs-separation | f | -1 0
--bn-momentum | f | -1 1.5
--micro-batch-size | i | -1 0 2147483648
--global-batch-size | i | -1 0
--train-iters | i | -1
--seed | i | -1
--lr | f | -1
--min-lr | f | -1
--lr-warmup-iters | i | -1
--lr-decay-iters | i | -1
--weight-decay | f | -1
--adam-beta1 | f | -1 1
--adam-beta2 | f | -1 1
--adam-eps | f | -1 0
--sgd-momentum | f | -1 1
--lars-eta | f | -1 0
--lamb-gamma-l | f | -1
--lamb-gamma-u | f | -1 0
--clip-grad | f |
--base-batch-size | i | -1 0
--loss-scale | f | -1
--initial-loss-scale | f | -1 0
--loss-scale-window | i | -1 0
--hysteresis | i | -1 0
--min-loss-scale | f | -1 0
--recompute-num-layers | i | -1 0
--num-ps-servers | i | -1 0
--max-staleness | i | -1
--tensor-model-parallel-size | i | -1 0 65
--pipeline-model-parallel-size | i | -1 0 65
--virtual-pipeline-model-parallel-size | i | -1 0
--num-layers-per-virtual-pipeline-stage | i | -1 0
--allreduce-chunk-bytes | i | -1
--bucket-size-mb | f | -1 1048577 1e300
--zero-stage | i | -1 4
--threads | i | -1 1025
--log-interval | i | -1 0
--eval-interval | i | -1
--eval-iters | i | -1 0
EOF

# ---- dtrain: values the parser takes but the configuration refuses --------------------
table dtrain "$DTRAIN" --train-iters 1 --eval-iters 1 <<'EOF'
2 | --use-distributed-optimizer is ZeRO stage 1 | --zero-stage 2 --use-distributed-optimizer
2 | --zero-stage 3 with tied embeddings | --zero-stage 3 --model gpt2-124m
2 | --zero-stage 2 with --recompute-granularity full | --zero-stage 2 --recompute-granularity full
2 | --zero-stage 3: the GPT only | --zero-stage 3 --model mlp-bn --task blobs
2 | --zero-stage 2: --optimizer lars | --zero-stage 2 --optimizer lars
2 | --zero-prefetch gathers stage 3's layers ahead | --zero-stage 2 --zero-prefetch
2 | too many tokens | --micro-batch-size 2147483647
2 | --seq-length 65536 | --seq-length 65536
2 | --num-attention-heads 2147483647 | --num-attention-heads 2147483647
2 | --lr-warmup-iters | --lr-warmup-iters 2147483647 --lr-decay-iters 10
2 | --global-batch-size 2147483647 | --global-batch-size 2147483647 --micro-batch-size 2
2 | --pipeline-split | --pipeline-split 1,x
2 | --pipeline-split | --pipeline-split 0,2
2 | --pipeline-split | --pipeline-split -1,3
2 | --pipeline-split | --pipeline-split ''
2 | --pipeline-split | --pipeline-split 99999999999999999999,1
2 | --num-layers-per-virtual-pipeline-stage 3 | --print-schedule --pipeline-model-parallel-size 2 --pipeline-schedule interleaved-1f1b --num-layers 8 --num-layers-per-virtual-pipeline-stage 3
2 | micro-batches per step 3 | --print-schedule --pipeline-model-parallel-size 2 --pipeline-schedule interleaved-1f1b --num-layers 4 --global-batch-size 3 --micro-batch-size 1
2 | zb-v places exactly 2 | --print-schedule --pipeline-model-parallel-size 2 --pipeline-schedule zb-v --num-layers 8 --virtual-pipeline-model-parallel-size 4
2 | --slow-rank | --slow-rank 1
2 | --slow-rank | --slow-rank x:10
2 | --slow-rank | --slow-rank 1:-5
2 | --slow-rank | --slow-rank 1:99999999999
2 | --slow-rank | --slow-rank ''
2 | --max-staleness | --max-staleness 3
2 | --num-ps-servers | --num-ps-servers 2
2 | --allreduce nccl | --allreduce nccl
2 | --loss-scale-window | --loss-scale-window 10
2 | --bn-momentum | --bn-momentum 0.5
2 | --num-attention-heads | --model mlp-bn --num-attention-heads 2
2 | --num-layers 1024 | --model mlp-bn --num-layers 1024
2 | --data | --model mlp-bn --data $TMP/150.txt
2 | --trace | --trace ''
2 | --summary | --summary ''
1 | cannot allocate | --hidden-size 65536 --num-layers 1024 --trace $O/t.json --summary $O/s.json
1 | cannot allocate | --hidden-size 65536 --num-attention-heads 1 --max-position-embeddings 65536 --seq-length 16384 --micro-batch-size 64 --trace $O/t.json
1 | $TMP/dir/no/t.json | --trace $TMP/dir/no/t.json --summary $O/s.json
1 | $TMP/dir/no/s.json | --summary $TMP/dir/no/s.json --trace $O/t.json
EOF

# ---- dtrain --data files ---------------------------------------------------------------
table dtrain "$DTRAIN" --train-iters 1 --eval-iters 1 --trace "$O/t.json" --summary "$O/s.json" <<'EOF'
1 | $TMP/missing.txt | --data $TMP/missing.txt
1 | $TMP/empty | --data $TMP/empty
1 | /dev/null | --data /dev/null
1 | /dev/zero: is a character device, expected a regular file | --data /dev/zero
1 | /dev/urandom: is a character device | --data /dev/urandom
1 | fifo: is a pipe (FIFO), expected a regular file | --data $TMP/fifo
1 | is a directory | --data $TMP/dir
1 | too short | --data $TMP/short.txt
1 | at least 161 bytes | --data $TMP/short.txt
1 | too short for --seq-length 64 | --data $TMP/150.txt --seq-length 64
EOF
# binary junk is text to a byte-level model (vocab 256): it trains (exit 0)
one_case dtrain 0 '' - "$DTRAIN" --train-iters 1 --eval-iters 1 --data "$TMP/junk.bin"
if [ "$(id -u)" -ne 0 ]; then
    one_case dtrain 1 "$TMP/noread.txt" - "$DTRAIN" --train-iters 1 --eval-iters 1 --data "$TMP/noread.txt" \
        --trace "$O/t.json"
else
    echo "skip: --data on a chmod 000 file: running as root, which reads it anyway"
fi

# ---- output files on a full disk (/dev/full) and under a file size limit (ulimit -f) ------
# Every output is written whole or not at all (dt_file.h) and the programs
# ignore SIGXFSZ, so both are one line and exit 1, with nothing left in $O
# (neither the file nor its temporary).
if [ -w /dev/full ]; then
    table dtrain "$DTRAIN" --train-iters 1 --eval-iters 1 <<'EOF'
1 | --summary /dev/full: write failed (No space left on device) | --summary /dev/full --trace $O/t.json
1 | /dev/full: write failed: No space left on device | --trace /dev/full --summary $O/s.json
EOF
    # (dtsim writes its trace, whole, before the summary: no --trace with a failing --summary)
    table dtsim "$DTSIM" run <<'EOF'
1 | --summary /dev/full: write failed (No space left on device) | --summary /dev/full
1 | /dev/full: write failed: No space left on device | --trace /dev/full --summary $O/s.json
EOF
fi
LIMITED='ulimit -f 1 && exec "$0" "$@"'
one_case dtrain 1 "write failed" - sh -c "$LIMITED" "$DTRAIN" --train-iters 2 --eval-iters 1 --trace "$O/t.json"
one_case dtrain 1 "--summary $O/s.json: write failed (File too large)" - sh -c "$LIMITED" "$DTRAIN" \
    --train-iters 2 --eval-iters 1 --summary "$O/s.json"
one_case dtsim 1 "write failed" - sh -c "$LIMITED" "$DTSIM" run --pipeline-model-parallel-size 2 \
    --micro-batches 4 --train-iters 2 --trace "$O/t.json"
one_case dtsim 1 "--summary $O/s.json: write failed (File too large)" - sh -c "$LIMITED" "$DTSIM" run \
    --summary "$O/s.json"

# ---- dtrain: parallel layouts under mpirun ---------------------------------------------
if [ "$HAVE_MPI" = 1 ]; then
    mpi_table <<'EOF'
2 | 3 ranks are not a multiple of 2 | 3 | --tensor-model-parallel-size 2
2 | 3 ranks are not a multiple | 3 | --pipeline-model-parallel-size 2
2 | only 2 blocks | 4 | --pipeline-model-parallel-size 4
2 | only 3 blocks | 4 | --pipeline-model-parallel-size 4 --num-layers 3
2 | only 1 blocks | 2 | --pipeline-model-parallel-size 2 --num-layers 1
2 | the model has 4 | 3 | --pipeline-model-parallel-size 3 --num-layers 4 --pipeline-split 1,1,1
2 | expected 2 positive block counts | 2 | --pipeline-model-parallel-size 2 --pipeline-split 2
2 | --global-batch-size 12 | 2 | --micro-batch-size 4 --global-batch-size 12
2 | --global-batch-size 8 | 2 | --pipeline-model-parallel-size 2 --micro-batch-size 3 --global-batch-size 8
2 | --global-batch-size 6 | 4 | --tensor-model-parallel-size 2 --micro-batch-size 4 --global-batch-size 6
2 | does not divide --num-attention-heads 3 | 2 | --tensor-model-parallel-size 2 --num-attention-heads 3 --hidden-size 63
2 | does not divide --num-attention-heads 4 | 3 | --tensor-model-parallel-size 3
2 | does not divide --num-attention-heads 2 | 4 | --tensor-model-parallel-size 4 --num-attention-heads 2
2 | --use-distributed-optimizer | 3 | --allreduce ps-sync --use-distributed-optimizer
2 | --zero-stage 2 with --pipeline-model-parallel-size 2 | 2 | --zero-stage 2 --pipeline-model-parallel-size 2
2 | --zero-stage 3 with --tensor-model-parallel-size 2 | 2 | --zero-stage 3 --tensor-model-parallel-size 2
2 | --zero-stage 3 shards over an allreduce group | 3 | --allreduce ps-sync --zero-stage 3
2 | at least 2 ranks | 1 | --allreduce ps-sync
2 | --num-ps-servers 2 | 2 | --allreduce ps-sync --num-ps-servers 2
2 | --num-ps-servers 3 | 3 | --allreduce ps-async --num-ps-servers 3
2 | --num-ps-servers 4 | 4 | --allreduce ps-async --num-ps-servers 4
2 | with a parameter server | 4 | --allreduce ps-sync --pipeline-model-parallel-size 2
2 | needs a multiple of 4 | 2 | --pipeline-model-parallel-size 2 --pipeline-schedule interleaved-1f1b --num-layers 6
2 | --pipeline-split: not with | 2 | --pipeline-model-parallel-size 2 --pipeline-schedule zb-v --num-layers 4 --pipeline-split 1,3
2 | --slow-rank 5 | 2 | --slow-rank 5:10
2 | --allreduce nccl | 2 | --allreduce nccl
2 | --lr | 3 | --lr -1
2 | --micro-batch-size | 4 | --micro-batch-size 0
1 | $TMP/missing.txt | 2 | --data $TMP/missing.txt --trace $O/t.json
EOF
else
    echo "skip: the mpirun layouts (this build has no MPI)"
fi

# ---- dtrain: checkpoints and --comm-timeout (when this dtrain has them) ------------------
if "$DTRAIN" --help | grep -q -e '^  --comm-timeout '; then
    numeric dtrain "$DTRAIN" --train-iters 0 <<'EOF'
--comm-timeout | f | -1 1000000001
EOF
fi
if "$DTRAIN" --help | grep -q -e '^  --load '; then
    numeric dtrain "$DTRAIN" --train-iters 0 --save "$TMP/ck-never" <<'EOF'
--save-interval | i | -1 0
--save-keep | i | -1
EOF
    # a good checkpoint of the default tiny model, and damaged copies
    "$DTRAIN" --train-iters 2 --eval-iters 1 --save "$TMP/ck" >"$TMP/setup.out" 2>&1 ||
        { cat "$TMP/setup.out" >&2; fail "dtrain --save (setup) failed"; }
    "$DTRAIN" --train-iters 2 --eval-iters 1 --num-layers 3 --save "$TMP/ck3" >"$TMP/setup.out" 2>&1 ||
        { cat "$TMP/setup.out" >&2; fail "dtrain --num-layers 3 --save (setup) failed"; }
    it=$(ls -d "$TMP/ck"/iter_* 2>/dev/null | tail -n 1)
    big=$(ls -S "$it" 2>/dev/null | head -n 1)
    if [ -n "$it" ] && [ -n "$big" ]; then
        for kind in flip cut zero; do
            rm -rf "$TMP/ck-$kind"
            cp -R "$TMP/ck" "$TMP/ck-$kind"
            f=$TMP/ck-$kind/${it##*/}/$big
            size=$(wc -c <"$f" | tr -d ' ')
            case $kind in
            flip) printf 'XXXXXXXX' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null ;;
            cut) head -c $((size / 2)) "$TMP/ck/${it##*/}/$big" >"$f" ;;
            zero) : >"$f" ;;
            esac
        done
        table dtrain "$DTRAIN" --train-iters 3 --eval-iters 1 --trace "$O/t.json" --summary "$O/s.json" <<'EOF'
1 | $TMP/no-such-ck | --load $TMP/no-such-ck
1 | $TMP/empty | --load $TMP/empty
1 | $TMP/dir | --load $TMP/dir
1 | ck-flip | --load $TMP/ck-flip
1 | ck-cut | --load $TMP/ck-cut
1 | ck-zero | --load $TMP/ck-zero
1 | differ | --load $TMP/ck3
1 | differ | --load $TMP/ck --hidden-size 128 --num-attention-heads 4
EOF
        # --generate (sampling from the good checkpoint): its numbers, and what it cannot load
        numeric dtrain "$DTRAIN" --load "$TMP/ck" --generate 2 --prompt ab <<'EOF'
--generate | i | -1 0 1000001
--temperature | f | -1
--top-k | i | -1 257
EOF
        table dtrain "$DTRAIN" --generate 2 --prompt ab <<'EOF'
1 | $TMP/no-such-ck | --load $TMP/no-such-ck
1 | $TMP/empty | --load $TMP/empty
1 | ck-cut | --load $TMP/ck-cut
2 | --seq-length | --load $TMP/ck --seq-length 8
2 | --save | --load $TMP/ck --save $O/ck
EOF
    else
        fail "dtrain --save wrote no $TMP/ck/iter_*: $(ls -R "$TMP/ck" 2>&1 | head -5)"
    fi

fi
if [ -n "${it:-}" ] && "$DTRAIN" --help | grep -q -e '^  --load '; then
    # Links in a save directory (issue 34, D1/D2): dtrain never writes, truncates or removes through a
    # symbolic link there. Each entry it would remove or replace (a failed save's iter_X.tmp, an iter_X
    # pruned by --save-keep or saved again, latest, dtrain.lock, latest's temporary) is made a link to a
    # victim: the run must refuse with one line naming the link (exit 1) and the victim must be intact.
    # A hard link as dtrain.lock would have its other name overwritten: refused too.
    # link_case NP ENTRY TARGET WORD ARGS...: SAVE/ENTRY -> TARGET, then dtrain --save SAVE ARGS
    link_case() {
        l_np=$1 l_entry=$2 l_target=$3 l_word=$4
        shift 4
        rm -rf "$TMP/victim" "$TMP/lsave" "$TMP/kept"
        mkdir -p "$TMP/victim" "$TMP/lsave"
        echo precious >"$TMP/victim/a"
        cp -R "$TMP/ck/${it##*/}" "$TMP/kept" # a real checkpoint stored elsewhere
        case $l_target in
        hard) ln "$TMP/victim/a" "$TMP/lsave/$l_entry" ;;
        *) ln -s "$l_target" "$TMP/lsave/$l_entry" ;;
        esac
        one_case dtrain 1 "$l_word" "$l_np" "$DTRAIN" --train-iters 2 --eval-iters 1 --save "$TMP/lsave" "$@"
        [ "$(cat "$TMP/victim/a" 2>/dev/null)" = precious ] ||
            fail "dtrain --save with $l_entry -> $l_target: the victim $TMP/victim/a was changed or removed"
        [ -s "$TMP/kept/manifest.json" ] && [ "$(ls "$TMP/kept" | wc -l)" -eq "$(ls "$TMP/ck/${it##*/}" | wc -l)" ] ||
            fail "dtrain --save with $l_entry -> $l_target: the checkpoint it links to ($TMP/kept) was changed"
    }
    link_case - iter_00000099.tmp ../victim "iter_00000099.tmp: is a symbolic link"
    link_case - iter_00000000 ../victim "iter_00000000: is a symbolic link" --save-keep 1
    link_case - iter_00000002 ../kept "iter_00000002: is a symbolic link"
    link_case - latest ../victim/a "latest: is a symbolic link"
    link_case - dtrain.lock ../victim/a "dtrain.lock: is a symbolic link"
    link_case - .latest.tmp.123.0 ../victim/a ".latest.tmp.123.0: is a symbolic link"
    link_case - dtrain.lock hard "a hard link"
    [ "$HAVE_MPI" = 1 ] && link_case 2 iter_00000099.tmp ../victim "iter_00000099.tmp: is a symbolic link"
    # --save naming a dangling link: said so, not "exists and is not a directory"
    ln -s "$TMP/no-such-dir" "$TMP/dangling"
    one_case dtrain 1 "symbolic link to a missing directory" - "$DTRAIN" --train-iters 1 --save "$TMP/dangling"
    # D8: the .latest.tmp.PID.N a killed commit left is removed by the next save
    rm -rf "$TMP/lsave" && mkdir "$TMP/lsave" && echo iter_0 >"$TMP/lsave/.latest.tmp.123.0"
    "$DTRAIN" --train-iters 1 --eval-iters 1 --save "$TMP/lsave" >"$TMP/setup.out" 2>&1 ||
        fail "dtrain --save into a directory with a stale .latest.tmp: $(tail -1 "$TMP/setup.out")"
    [ -e "$TMP/lsave/.latest.tmp.123.0" ] && fail "the next save left the stale $TMP/lsave/.latest.tmp.123.0"
    # D5: latest or manifest.json a FIFO: never waited on. A FIFO latest is skipped (the newest valid
    # checkpoint loads, exit 0); a checkpoint whose manifest is a FIFO is refused with one line.
    rm -rf "$TMP/fck" && cp -R "$TMP/ck" "$TMP/fck" && rm "$TMP/fck/latest" && mkfifo "$TMP/fck/latest"
    one_case dtrain 0 "" - "$DTRAIN" --train-iters 2 --eval-iters 1 --load "$TMP/fck"
    one_case dtrain 0 "" - "$DTRAIN" --generate 2 --prompt ab --load "$TMP/fck"
    rm "$TMP/fck/${it##*/}/manifest.json" && mkfifo "$TMP/fck/${it##*/}/manifest.json"
    one_case dtrain 1 "is a pipe (FIFO)" - "$DTRAIN" --train-iters 2 --eval-iters 1 --load "$TMP/fck/${it##*/}"
    one_case dtrain 1 "is a pipe (FIFO)" - "$DTRAIN" --generate 2 --prompt ab --load "$TMP/fck"
fi

# ---- dtsim: numeric flags ----------------------------------------------------------------
numeric dtsim "$DTSIM" run <<'EOF'
--num-layers | i | -1 0 1025
--hidden-size | i | -1 0 65537
--num-attention-heads | i | -1 0
--max-position-embeddings | i | -1 0 65537
--vocab-size | i | -1 0 1 16777217
--seq-length | i | -1 0
--micro-batch-size | i | -1 0
--global-batch-size | i | -1 0
--micro-batches | i | -1 0
--train-iters | i | -1 0
--seed | i | -1
--loss-scale | f | -1
--initial-loss-scale | f | -1 0
--loss-scale-window | i | -1 0
--hysteresis | i | -1 0
--min-loss-scale | f | -1 0
--tensor-model-parallel-size | i | -1 0 1025
--pipeline-model-parallel-size | i | -1 0 1025
--data-parallel-size | i | -1 0 1048577
--num-ps-servers | i | -1 0
--bucket-size-mb | f | -1 1048577 1e300
--allreduce-chunk-bytes | i | -1
EOF
numeric dtsim "$DTSIM" validate --profile "$TMP/real.json" "$TMP/real.json" <<'EOF'
--skip | i | -1
EOF

# ---- dtsim: absurd sizes, configs, traces, hardware files --------------------------------
table dtsim "$DTSIM" run --trace "$O/t.json" --summary "$O/s.json" <<'EOF'
2 | too many tokens | --micro-batch-size 2147483647
2 | events | --train-iters 1000000000000
2 | expected 1..65536 per step and pipeline | --micro-batches 2147483647
2 | --global-batch-size 2147483647 gives 2147483647 micro-batches | --global-batch-size 2147483647 --micro-batch-size 1
2 | events | --micro-batches 65536 --train-iters 100000000
2 | events | --data-parallel-size 1048576
2 | events | --allreduce-chunk-bytes 1 --data-parallel-size 64
2 | events | --allreduce ps-sync --num-ps-servers 1000000
2 | years | --hidden-size 65536 --num-layers 1024
2 | --pipeline-split | --pipeline-model-parallel-size 2 --pipeline-split 1,99999999999999999999
2 | --slow-rank | --slow-rank 0:-1
# --config
2 | $TMP/missing.json | --config $TMP/missing.json
2 | $TMP/empty | --config $TMP/empty
2 | $TMP/dir | --config $TMP/dir
2 | junk.bin | --config $TMP/junk.bin
2 | syntax.json: line | --config $TMP/syntax.json
2 | JSON object | --config $TMP/array.json
2 | JSON object | --config $TMP/chrome-array.json
2 | "traceEvents": unknown key | --config $TMP/chrome.json
2 | "num_layers": expected an integer in 1..1024 | --config $TMP/c-layers.json
2 | "micro_batch_size": expected an integer >= 1 | --config $TMP/c-mb40.json
2 | "micro_batches" | --config $TMP/c-m40.json
2 | "micro_batch_size" | --config $TMP/c-neg.json
2 | "hidden_size" | --config $TMP/c-negsize.json
2 | "num_layers" | --config $TMP/c-float.json
2 | "hidden_size" | --config $TMP/c-str.json
2 | "use_distributed_optimizer" | --config $TMP/c-bool.json
2 | "num_layer": unknown key | --config $TMP/c-key.json
2 | duplicate | --config $TMP/c-dup.json
2 | events | --config $TMP/c-steps.json
2 | years | --config $TMP/c-time.json
2 | events | --config $TMP/c-ranks.json
2 | "hardware" | --config $TMP/c-hw.json
2 | "hardware" | --config $TMP/c-hwobj.json
2 | "pipeline_schedule" | --config $TMP/c-sched.json
2 | --pipeline-split | --config $TMP/c-split.json
2 | version | --config $TMP/c-trace-v2.json
2 | dtrain-trace | --config $TMP/c-trace-fmt.json
2 | version | --config $TMP/t-v2.json
2 | dtrain-trace | --config $TMP/t-fmt.json
2 | t-cut100.json: line | --config $TMP/t-cut100.json
2 | "num_layers": expected | --config $TMP/t-layers.json
2 | "micro_batch_size": expected | --config $TMP/t-mb40.json
# --profile
2 | $TMP/missing.json | --profile $TMP/missing.json
2 | $TMP/empty | --profile $TMP/empty
2 | $TMP/dir | --profile $TMP/dir
2 | junk.bin | --profile $TMP/junk.bin
2 | not a dtrain trace | --profile $TMP/chrome.json
2 | chrome-array.json | --profile $TMP/chrome-array.json
2 | version 2 | --profile $TMP/t-v2.json
2 | otherData.format | --profile $TMP/t-fmt.json
2 | t-cut.json | --profile $TMP/t-cut.json
2 | t-cut100.json | --profile $TMP/t-cut100.json
2 | missing "dur" | --profile $TMP/t-nodur.json
2 | negative | --profile $TMP/t-negdur.json
2 | int64 nanosecond range | --profile $TMP/t-hugets.json
2 | no embedding forward spans | --profile $TMP/t-nofwd.json
2 | otherData.config | --profile $TMP/t-nocfg.json
2 | t-layers.json | --profile $TMP/t-layers.json
2 | syntax.json | --profile $TMP/syntax.json
2 | "args.iter" is 4611686018427387904 | --profile $TMP/t-iter62.json
2 | "ts" is negative | --profile $TMP/t-negts.json
2 | past the largest time | --profile $TMP/t-tsdur.json
2 | "pid" is 1 | --profile $TMP/t-pid.json
2 | "tid" is 7 | --profile $TMP/t-tid.json
2 | "args.layer" is 9 | --profile $TMP/t-layer.json
# --grad-trace (fp16)
2 | $TMP/missing.json | --fp16 --grad-trace $TMP/missing.json
2 | junk.bin | --fp16 --grad-trace $TMP/junk.bin
2 | not a dtrain trace | --fp16 --grad-trace $TMP/chrome.json
2 | version 2 | --fp16 --grad-trace $TMP/t-v2.json
2 | t-cut.json | --fp16 --grad-trace $TMP/t-cut.json
2 | no grad_amax events | --fp16 --grad-trace $TMP/real.json
# --hw
2 | $TMP/missing.json | --hw $TMP/missing.json
2 | $TMP/empty | --hw $TMP/empty
2 | $TMP/dir | --hw $TMP/dir
2 | junk.bin | --hw $TMP/junk.bin
2 | hw-cut.json | --hw $TMP/hw-cut.json
2 | hw-fmt.json | --hw $TMP/hw-fmt.json
2 | hw-ver.json | --hw $TMP/hw-ver.json
2 | peak_flops | --hw $TMP/hw-neg.json
2 | bytes_per_ns | --hw $TMP/hw-zero-bw.json
2 | horizon | --hw $TMP/hw-slowflops.json
2 | horizon | --hw $TMP/hw-slowmem.json
2 | horizon | --hw $TMP/hw-tinyeff.json
2 | horizon | --hw $TMP/hw-slowbw.json --data-parallel-size 2
2 | "intra.alpha_ns": expected a number in [0, 2^60] | --hw $TMP/hw-alpha308.json --data-parallel-size 2
2 | "intra.alpha_ns" | --hw $TMP/hw-alpha63.json --data-parallel-size 2
2 | kernel_overhead_ns | --hw $TMP/hw-kov63.json
2 | efficiency | --hw $TMP/hw-str.json
2 | eficiency | --hw $TMP/hw-key.json
2 | intra | --hw $TMP/hw-nolink.json
2 | JSON object | --hw $TMP/array.json
2 | hw | --hw $TMP/real.json
EOF
table dtsim "$DTSIM" <<'EOF'
2 | --sweep | sweep --sweep micro-batches=1,99999999999999999999
2 | --sweep | sweep --sweep micro-batches=nan
2 | --sweep | sweep --sweep link-bandwidth-scale=1e999
2 | --sweep | sweep --sweep link-bandwidth-scale=-1
2 | --sweep | sweep --sweep data-parallel-size=
2 | --sweep | sweep --sweep micro-batches=2147483647 --train-iters 100
2 | junk.bin | validate --profile $TMP/junk.bin $TMP/real.json
2 | t-cut.json | validate --profile $TMP/real.json $TMP/t-cut.json
2 | missing.json | validate --profile $TMP/real.json $TMP/missing.json
2 | junk.bin | validate --profile $TMP/real.json --comm $TMP/junk.bin $TMP/real.json
2 | hw-fmt.json | validate --profile $TMP/real.json --hw $TMP/hw-fmt.json $TMP/real.json
2 | "args.iter" is 4611686018427387904 | validate --profile $TMP/real.json $TMP/t-iter62.json
2 | "args.iter" is 2147483647 | validate --profile $TMP/real.json $TMP/t-iter31.json
2 | "ts" is negative | validate --profile $TMP/real.json $TMP/t-negts.json
2 | past the largest time | validate --profile $TMP/real.json $TMP/t-tsdur.json
EOF

# ---- dtviz ---------------------------------------------------------------------------------
if [ -x "$DTVIZ" ]; then
    unset DISPLAY WAYLAND_DISPLAY
    numeric dtviz "$DTVIZ" "$TMP/pp.json" --png "$O/x.png" <<'EOF'
--time | f | -1 1.5
--fps | i | -1 0 241
--duration | f | -1 0 3601
--frame-count | i | -1 0 100001
EOF
    table dtviz "$DTVIZ" <<'EOF'
2 | --size | $TMP/pp.json --png $O/x.png --size 0x0
2 | --size | $TMP/pp.json --png $O/x.png --size -1400x800
2 | --size | $TMP/pp.json --png $O/x.png --size 99999999999x800
2 | --size | $TMP/pp.json --png $O/x.png --size 1400x800x
2 | --size | $TMP/pp.json --png $O/x.png --size ''
2 | --size | $TMP/pp.json --png $O/x.png --size 20000x800
2 | --zoom | $TMP/pp.json --png $O/x.png --zoom 0.6:0.4
2 | --zoom | $TMP/pp.json --png $O/x.png --zoom nan:1
2 | --zoom | $TMP/pp.json --png $O/x.png --zoom 0:1e999
2 | --zoom | $TMP/pp.json --png $O/x.png --zoom -0.5:0.5
2 | --zoom | $TMP/pp.json --png $O/x.png --zoom 0.2
2 | --png | $TMP/pp.json --png ''
2 | $TMP/missing.json | $TMP/missing.json --png $O/x.png
2 | $TMP/empty | $TMP/empty --png $O/x.png
2 | $TMP/dir | $TMP/dir --png $O/x.png
2 | junk.bin | $TMP/junk.bin --png $O/x.png
2 | not a dtrain trace | $TMP/chrome.json --png $O/x.png
2 | chrome-array.json | $TMP/chrome-array.json --png $O/x.png
2 | version 2 | $TMP/t-v2.json --png $O/x.png
2 | otherData.format | $TMP/t-fmt.json --png $O/x.png
2 | t-cut.json | $TMP/t-cut.json --png $O/x.png
2 | t-cut100.json | $TMP/t-cut100.json --png $O/x.png
2 | missing "dur" | $TMP/t-nodur.json --png $O/x.png
2 | negative | $TMP/t-negdur.json --png $O/x.png
2 | int64 nanosecond range | $TMP/t-hugets.json --png $O/x.png
2 | syntax.json | $TMP/syntax.json --png $O/x.png
2 | "args.iter" is 4611686018427387904 | $TMP/t-iter62.json --png $O/x.png
2 | "args.iter" is 2147483647 | $TMP/t-iter31.json --png $O/x.png
2 | "ts" is negative | $TMP/t-negts.json --png $O/x.png
2 | past the largest time | $TMP/t-tsdur.json --png $O/x.png
2 | "pid" is 1 | $TMP/t-pid.json --png $O/x.png
2 | "tid" is 7 | $TMP/t-tid.json --png $O/x.png
2 | junk.bin | $TMP/pp.json $TMP/junk.bin --png $O/x.png
2 | junk.bin | $TMP/pp.json $TMP/junk.bin --frames $O/frames --frame-count 2
2 | t-cut.json | $TMP/t-cut.json --frames $O/frames --frame-count 2
1 | $TMP/dir/no/x.png | $TMP/pp.json --png $TMP/dir/no/x.png
EOF
else
    echo "skip: dtviz (built without SDL2)"
fi

# ---- dtbench ----------------------------------------------------------------------------------
numeric dtbench "$DTBENCH" train --model tiny <<'EOF'
--threads | i | -1 0 1025
--micro-batch-size | i | -1 0
--seq-length | i | -1
--steps | i | -1 0
--warmup | i | -1
EOF
numeric dtbench "$DTBENCH" gelu <<'EOF'
--n | i | -1 0 4294967297
--iters | i | -1
EOF
numeric dtbench "$DTBENCH" allreduce <<'EOF'
--allreduce-chunk-bytes | i | -1
--min-bytes | i | -1 0 3 1073741825
--max-bytes | i | -1 0 3 1073741825
EOF
numeric dtbench "$DTBENCH" pipeline <<'EOF'
--pipeline-model-parallel-size | i | -1 65
--num-layers | i | -1 0 1025
--hidden-size | i | -1 0 3 65537
EOF
numeric dtbench "$DTBENCH" compose <<'EOF'
--repeats | i | -1 0 65
EOF
numeric dtbench "$DTBENCH" bubbles "$TMP/pp.json" <<'EOF'
--skip | i | -1 1000000001
EOF
table dtbench "$DTBENCH" <<'EOF'
2 | --seq-length 100 | train --model tiny --seq-length 100
2 | too many tokens | train --model tiny --micro-batch-size 100000000
2 | too many tokens | recompute --model tiny --micro-batch-size 2147483647
2 | --fp16 and --bf16 | train --fp16 --bf16
2 | --fp16 | gemm --fp16
2 | --device cuda | recompute --device cuda
2 | --device cpu | gelu --device cpu
2 | --pipeline-split | pipeline --pipeline-split 1,x
2 | --pipeline-split | pipeline --pipeline-split 0
2 | --pipeline-split | pipeline --pipeline-split ''
2 | unknown command | frobnicate
2 | run under mpirun -np 2 | compose
2 | --steps 1: expected at least 2 | compose --steps 1
2 | --bogus | train --bogus 1
2 | expected trace files | bubbles
2 | --skip | bubbles --skip
2 | unknown flag | bubbles --bogus $TMP/pp.json
1 | $TMP/missing.json | bubbles $TMP/missing.json
1 | junk.bin | bubbles $TMP/junk.bin
1 | t-cut.json | bubbles $TMP/t-cut.json
1 | not a dtrain trace | bubbles $TMP/chrome.json
EOF

echo "badinput.sh: $cases cases, $failures failure(s)"
[ "$failures" -eq 0 ] || exit 1
exit 0
