#!/bin/sh
# badvalues.sh: the value catalogue, run by `make check` with DT_BUILDDIR
# (where ./dtrain, ./dtsim, ./dtviz, ./dtbench and tests/json_mutate are)
# and DT_SRCDIR set. badinput.sh damages the structure of the inputs; this
# fuzzes their field VALUES: every numeric field of
#   traces     a real `dtrain --trace`, `dtsim run --trace` of a pipeline,
#              a data-parallel and a parameter-server layout, and rank 0's
#              events of the pipeline trace (what dtbench bubbles reads);
#   configs    dtsim scenarios (--config), as dtsim writes them;
#   hardware   the shipped sim/hw/*.json;
#   manifests  a dtrain checkpoint's manifest.json (dtrain --load), its
#              checksum line resealed (json_mutate reseal) so that the
#              value, not the checksum, is what the reader judges;
# set in turn to each of VALUES, as a raw token spliced into the file by
# tests/json_mutate (every other byte stays as written). Each kind of event
# gives its fields once (tests/json_mutate.c: one path per name/cat/ph and
# field, the first such event).
#
# VALUES: 0, -1, 1e308 (huge; the largest decade a double holds), 2^31,
# 2^62, 2^63-1, and three tokens JSON cannot hold: the bare words NaN and
# Infinity (jansson: "invalid token") and 1e999 (jansson: "real number
# overflow"). Those three must be refused by every reader that reads the
# field (MUSTFAIL below); the others may be accepted or refused.
#
# Each mutated file goes to the programs that read it (the consumers in
# the tables below). A case passes when: the exit is 0 or the program's
# input-error code (2 for dtsim and dtviz; 1 for dtbench bubbles, which
# reads its traces at run time, and for dtrain --load; docs/errors.md); nothing crashes or hangs
# (badinput.sh's CRASH_RE, `timeout`); on an error, stderr is exactly one
# line, starting with the program's name and naming the mutated file, and
# $O (where the --trace/--summary/--png outputs point) is left empty; on
# success the output was written. A summary prints the cases per program
# and the total. POSIX sh; never skips.

set -u
LC_ALL=C
export LC_ALL
BUILDDIR=${DT_BUILDDIR:-.}
SRCDIR=${DT_SRCDIR:-.}
for p in dtrain dtsim dtbench tests/json_mutate; do
    [ -x "$BUILDDIR/$p" ] || { echo "badvalues.sh: $BUILDDIR/$p not found (set DT_BUILDDIR)" >&2; exit 99; }
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-badvalues.XXXXXX") || exit 99
trap 'rm -rf "$TMP"' EXIT HUP INT TERM
O=$TMP/out
mkdir "$O" "$TMP/in"
failures=0
cases=0
HAVE_VIZ=1
n_dtrain=0 n_dtsim=0 n_dtviz=0 n_dtbench=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

DTRAIN=$BUILDDIR/dtrain
DTSIM=$BUILDDIR/dtsim
DTVIZ=$BUILDDIR/dtviz
DTBENCH=$BUILDDIR/dtbench
MUT=$BUILDDIR/tests/json_mutate
VALUES="0 -1 1e308 2147483648 4611686018427387904 9223372036854775807 NaN Infinity 1e999"
VERBOSE=${DT_BADVALUES_VERBOSE:-0}

# what a crash leaves on stderr (badinput.sh's CRASH_RE, as shell patterns)
is_crash() {
    case $1 in
    *AddressSanitizer* | *LeakSanitizer* | *UndefinedBehaviorSanitizer* | *ThreadSanitizer* | *"runtime error:"* | \
        *Assertion*failed* | *"Segmentation fault"* | *"core dumped"* | *"Signal: "* | *MPI_ABORT*) return 0 ;;
    esac
    return 1
}

# vcase PROG ERR MUSTFAIL FILE OUTPUT ARGS...: run one case (builtins only, but for the program).
# PROG: the program's name (its messages start with it); ERR: its input-error code; MUSTFAIL: 1 when
# the value cannot be accepted; FILE: the mutated file the message must name; OUTPUT: a file the
# program writes on success ('' none).
vcase() {
    v_prog=$1 v_err=$2 v_must=$3 v_file=$4 v_out=$5
    shift 5
    [ "$v_prog" = dtviz ] && [ "$HAVE_VIZ" = 0 ] && return
    cases=$((cases + 1))
    case $v_prog in
    dtrain) n_dtrain=$((n_dtrain + 1)) ;; dtsim) n_dtsim=$((n_dtsim + 1)) ;;
    dtviz) n_dtviz=$((n_dtviz + 1)) ;; dtbench) n_dtbench=$((n_dtbench + 1)) ;;
    esac
    timeout 30 "$@" >"$TMP/stdout" 2>"$TMP/stderr" </dev/null
    rc=$?
    v_lines=0 v_msg= v_all=
    while IFS= read -r v_line || [ -n "$v_line" ]; do
        # ASan with allocator_may_return_null=1 warns when it returns NULL: the clean path (badinput.sh)
        case $v_line in *'WARNING: AddressSanitizer failed to allocate'*) continue ;; esac
        v_lines=$((v_lines + 1))
        [ "$v_lines" = 1 ] && v_msg=$v_line
        v_all="$v_all$v_line
"
    done <"$TMP/stderr"
    what="[$CASE] ${*#"$BUILDDIR/"}"
    if [ "$rc" -ge 124 ]; then
        fail "$what: exit $rc (a hang (124) or a crash): $v_all"
    elif is_crash "$v_all"; then
        fail "$what: crash report on stderr: $v_all"
    elif [ "$rc" -ne 0 ] && [ "$rc" -ne "$v_err" ]; then
        fail "$what: exit $rc, expected 0 or $v_err: $v_all"
    elif [ "$rc" -eq 0 ] && [ "$v_must" = 1 ]; then
        fail "$what: exit 0: accepted a value JSON cannot hold"
    elif [ "$rc" -eq 0 ]; then
        if [ -n "$v_out" ] && [ ! -s "$v_out" ]; then
            fail "$what: exit 0 but wrote no $v_out"
        elif [ "$VERBOSE" = 1 ]; then
            echo "ok: $what -> 0"
        fi
    elif [ "$v_lines" != 1 ]; then
        fail "$what: $v_lines lines on stderr, expected 1: $v_all"
    else
        set -- "$O"/*
        case $v_msg in
        "$v_prog: "*"${v_file##*/}"* | "$v_prog "[a-z]*": "*"${v_file##*/}"*)
            if [ -e "$1" ]; then
                fail "$what: left output behind after the failure: $*"
            elif [ "$VERBOSE" = 1 ]; then
                echo "ok: $what -> $rc $v_msg"
            fi
            ;;
        *) fail "$what: stderr does not start with '$v_prog: ' and name ${v_file##*/}: $v_msg" ;;
        esac
    fi
    rm -rf "$O"
    mkdir "$O"
}

# Open findings, not run (each would hang until `timeout`): " INPUT:PATH=VALUE ..." (none now;
# global_batch_size 2^31 in dtrain's config, 2^28 micro-batches a step, ran for hours until the
# simulator refused more than DTS_MAX_MICRO).
KNOWN=" "
known=0

# mutate INPUT VISITOR: for every numeric field of INPUT (json_mutate list) and every value, write the
# mutated copy to $M (named after INPUT) and call VISITOR PATH VALUE MUSTFAIL; INPUT itself (unmutated,
# PATH '-') first: every consumer must accept it.
mutate() {
    m_in=$1 m_visit=$2
    M=$TMP/in/${m_in##*/}
    CASE="${m_in##*/} as written"
    cp "$m_in" "$M"
    "$m_visit" - - 0
    "$MUT" list "$m_in" >"$TMP/paths" || { fail "json_mutate list $m_in"; return; }
    while IFS='	' read -r m_path m_class; do
        for m_v in $VALUES; do
            case $m_v in NaN | Infinity | 1e999) m_must=1 ;; *) m_must=0 ;; esac
            CASE="${m_in##*/} $m_path=$m_v"
            case $KNOWN in
            *" ${m_in##*/}:$m_path=$m_v "*)
                echo "known (not run): $CASE"
                known=$((known + 1))
                continue
                ;;
            esac
            "$MUT" set "$m_in" "$m_path" "$m_v" "$M" || { fail "json_mutate set $m_in $m_path $m_v"; continue; }
            "$m_visit" "$m_path" "$m_v" "$m_must"
        done
    done <"$TMP/paths"
}

# ---- inputs --------------------------------------------------------------------------------------
S=$TMP/src
mkdir "$S"
setup() { "$@" >"$TMP/setup.out" 2>&1 || { cat "$TMP/setup.out" >&2; fail "setup: $*"; }; }
setup "$DTRAIN" --train-iters 3 --micro-batch-size 8 --global-batch-size 16 --eval-iters 1 --eval-interval 0 \
    --threads 1 --trace "$S/real.json"
setup "$DTSIM" run --pipeline-model-parallel-size 2 --micro-batches 4 --train-iters 2 --trace "$S/pp.json"
setup "$DTSIM" run --data-parallel-size 2 --train-iters 2 --trace "$S/dp.json"
setup "$DTSIM" run --allreduce ps-sync --data-parallel-size 2 --train-iters 2 --trace "$S/ps.json"
# rank 0's events of the pipeline trace: dtbench bubbles reads one rank
awk 'NR == 1 { print; next } /^]}/ { sub(/,$/, "", last); if (last != "") print last; print; next }
     /"pid":0,/ { if (last != "") print last; last = $0 }' "$S/pp.json" >"$S/pp-rank0.json"
# dtsim's scenarios: the config of its traces, alone
for t in pp ps; do
    sed -n '1s/.*,"config":\(.*\)},"displayTimeUnit".*/\1/p' "$S/$t.json" >"$S/scenario-$t.json"
done

# ---- consumers -----------------------------------------------------------------------------------
# A trace's events are read by dtviz, dtsim validate (as a measured run) and, for a single-rank
# dtrain trace, dtsim run --profile; its header (otherData) also by dtsim run --config, which reads
# nothing after it. Of otherData.config, the trace reader range-checks and the viewer reads only
# TRACE_KEYS (and dtviz --view scale the loss scaler's keys): the others go to dtsim run --config
# alone, and only in dtrain's trace (a dtsim trace's config is scenario-*.json below, the same reader).
TRACE_KEYS=" num_layers train_iters tensor_model_parallel_size pipeline_model_parallel_size data_parallel_size \
num_ps_servers micro_batches global_batch_size micro_batch_size initial_loss_scale loss_scale loss_scale_window \
hysteresis min_loss_scale "
trace_consumers() { # PATH VALUE MUSTFAIL; $VIEW: dtviz's view for this trace; $CFG: all (dtrain's) or trace
    t_events=1
    case $1 in
    otherData.config.*)
        case $TRACE_KEYS in
        *" ${1#otherData.config.} "*) ;;
        *)
            [ "$CFG" = all ] || return 0
            t_events=0
            ;;
        esac
        ;;
    esac
    case $1 in
    - | otherData.*)
        vcase dtsim 2 "$3" "$M" "$O/t.json" "$DTSIM" run --config "$M" --train-iters 2 --trace "$O/t.json"
        ;;
    esac
    [ "$t_events" = 1 ] || return 0
    vcase dtviz 2 "$3" "$M" "$O/x.png" "$DTVIZ" "$M" --png "$O/x.png" --size 64x64 --view "$VIEW"
    vcase dtsim 2 "$3" "$M" '' "$DTSIM" validate --profile "$S/real.json" "$M"
    [ "$CFG" = all ] || return 0
    vcase dtsim 2 "$3" "$M" "$O/t.json" "$DTSIM" run --profile "$M" --train-iters 2 --trace "$O/t.json"
}
bubbles_consumers() {
    vcase dtbench 1 "$3" "$M" '' "$DTBENCH" bubbles "$M"
}
# a scenario: dtsim run --config (its train_iters is 2); dtsim sweep reads it too
scenario_consumers() {
    vcase dtsim 2 "$3" "$M" "$O/t.json" "$DTSIM" run --config "$M" --trace "$O/t.json" --summary "$O/s.json"
}
# a hardware file: a run with 4 data-parallel ranks over 2 nodes (intra and inter links), and a
# pipeline of 2 stages; dtsim validate --hw
hw_consumers() {
    vcase dtsim 2 "$3" "$M" "$O/t.json" "$DTSIM" run --hw "$M" --data-parallel-size 4 --train-iters 2 \
        --trace "$O/t.json"
    vcase dtsim 2 "$3" "$M" "$O/t.json" "$DTSIM" run --hw "$M" --pipeline-model-parallel-size 2 --micro-batches 2 \
        --train-iters 2 --trace "$O/t.json"
}

# ---- the catalogue -------------------------------------------------------------------------------
HAVE_VIZ=1
if [ -x "$DTVIZ" ]; then
    unset DISPLAY WAYLAND_DISPLAY
else
    HAVE_VIZ=0
    echo "badvalues.sh: no dtviz (built without SDL2): its cases are left out"
fi
CFG=all VIEW=memory mutate "$S/real.json" trace_consumers
CFG=trace VIEW=timeline mutate "$S/pp.json" trace_consumers
CFG=trace VIEW=ring mutate "$S/dp.json" trace_consumers
CFG=trace VIEW=ring mutate "$S/ps.json" trace_consumers
mutate "$S/pp-rank0.json" bubbles_consumers
mutate "$S/scenario-pp.json" scenario_consumers
mutate "$S/scenario-ps.json" scenario_consumers
for hw in "$SRCDIR"/sim/hw/*.json; do
    mutate "$hw" hw_consumers
done

# ---- checkpoint manifests (dtrain --load) ----------------------------------------------------------
# Every numeric field of a manifest.json (iteration, world_size, shards' sizes, the config; the layout
# object is a description the reader does not take) at every value, resealed, for dtrain --load (a
# run-time input: exit 1, docs/errors.md), with --trace/--summary into $O. DT_BADVALUES_CKPT=0 leaves it out.
if [ "${DT_BADVALUES_CKPT:-1}" = 1 ]; then
    # --lr-decay-iters fixed: by default it is --train-iters, which the resumed run raises
    setup "$DTRAIN" --train-iters 2 --lr-decay-iters 8 --eval-iters 1 --save "$S/ck"
    CK_IT=$(cd "$S/ck" && ls -d iter_* | tail -n 1)
    cp -R "$S/ck" "$TMP/ck"
    cp "$S/ck/$CK_IT/manifest.json" "$S/manifest.json"
    manifest_consumers() {
        cp "$M" "$TMP/ck/$CK_IT/manifest.json"
        "$MUT" reseal "$TMP/ck/$CK_IT/manifest.json" || fail "json_mutate reseal"
        vcase dtrain 1 "$3" "$TMP/ck" "$O/t.json" "$DTRAIN" --train-iters 3 --lr-decay-iters 8 --eval-iters 1 --load "$TMP/ck" \
            --trace "$O/t.json" --summary "$O/s.json"
    }
    mutate "$S/manifest.json" manifest_consumers
fi

echo "badvalues.sh: dtrain $n_dtrain, dtsim $n_dtsim, dtviz $n_dtviz, dtbench $n_dtbench cases"
echo "badvalues.sh: $cases cases, $failures failure(s), $known known finding(s) not run"
[ "$failures" -eq 0 ] || exit 1
exit 0
