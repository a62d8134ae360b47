#!/bin/sh
# badinput-lib.sh: the bad-input catalogue's machinery and inputs, sourced
# by tests/badinput.sh (dtrain) and tests/badinput-tools.sh (dtsim, dtviz,
# dtbench); not a test itself. The rules every case follows are in
# badinput.sh's header. Defines: one_case, table, mpi_table, numeric,
# word_of, fail, the programs' paths, $TMP (removed at exit), $O, and the
# shared input files under $TMP; the caller sets CATALOGUE (its own name,
# for messages) before sourcing.

set -u
LC_ALL=C
export LC_ALL
BUILDDIR=${DT_BUILDDIR:-.}
SRCDIR=${DT_SRCDIR:-.}
for p in dtrain dtsim dtbench; do
    [ -x "$BUILDDIR/$p" ] || { echo "$CATALOGUE: $BUILDDIR/$p not found (set DT_BUILDDIR)" >&2; exit 99; }
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

