#!/bin/sh
# device-check.sh: the GPU device check (issue 5), one run on one GPU.
#
#   tests/gpu/device-check.sh [OUTDIR]        (default: gpu-results)
#   tests/gpu/device-check.sh --summary-only [OUTDIR]   rewrite SUMMARY.md
#
# Configures the source tree this script belongs to with --with-cuda in a
# build directory of its own (out of tree: a temporary directory, or
# $DT_BUILD_DIR), builds with make -j$DT_JOBS (16), runs the CUDA and NCCL
# tests, `dtbench gelu`, `dtbench gemm --device cuda`, `dtbench train
# --device cuda --model gpt2-124m` with --bf16 and with --fp16 (a few
# steps), and one short `dtrain --device cuda --trace` run. Every step has
# its own timeout and its output in a file of OUTDIR; a failing step does
# not stop the others. OUTDIR/SUMMARY.md then lists each figure with its
# goal (PASS / BELOW) and each step with its status and exit code.
#
# Meant to finish in under 8 minutes on one H200: every step's timeout is
# cut to what is left of $DT_CHECK_BUDGET seconds (450) since the start, and
# a step with less than 15 s left is not started (recorded as such).
#
# Exit status: 0 when every step passed and every goal was met; 1 when a
# step failed, timed out, was skipped (77: no CUDA device or no CUDA build)
# or was not run; 3 when every step passed but a figure is BELOW its goal;
# 2 for a bad argument or an unusable OUTDIR.
#
# Environment: DT_JOBS (16), DT_CHECK_BUDGET (450), DT_BUILD_DIR (a build
# directory to use and keep; default a temporary one, removed at the end
# unless DT_KEEP_BUILD=1), DT_CUDA_ARCH (--with-cuda-arch; default the
# compute capability nvidia-smi reports, else configure's default), and
# DT_CONFIGURE_FLAGS (more configure flags). POSIX sh.

set -u
LC_ALL=C
export LC_ALL

# ---- SUMMARY.md: from OUT's files alone (also: --summary-only OUTDIR) -------
# value KEY FILE: the second field of the first line whose first is KEY
value() { awk -v k="$1" '$1 == k { print $2; exit }' "$OUT/$2" 2>/dev/null; }

# write_summary: OUT/SUMMARY.md from OUT/steps.tsv, env.txt and the outputs;
# sets STATUS_ALL (the exit status) and VERDICT.
write_summary() {
    steps=$OUT/steps.tsv
    nfail=$(awk -F '\t' '$2 != "ok"' "$steps" | wc -l | tr -d ' ')
    nsteps=$(wc -l <"$steps" | tr -d ' ')
    nbelow=$(cat "$OUT"/dtbench-*.txt 2>/dev/null | grep -c ' goal >= .* BELOW')
    secs=$(awk -F '\t' '$4 ~ /^[0-9]+$/ { s += $4 } END { print s + 0 }' "$steps")
    if [ "$nfail" -ne 0 ]; then
        VERDICT="FAILED: $nfail of $nsteps steps did not pass"
        STATUS_ALL=1
    elif [ "$nbelow" -ne 0 ]; then
        VERDICT="all $nsteps steps passed; $nbelow figure(s) BELOW goal"
        STATUS_ALL=3
    else
        VERDICT="PASSED: all $nsteps steps passed and every goal was met"
        STATUS_ALL=0
    fi
    nodev=$(cat "$OUT"/dtbench-gelu.txt "$OUT"/test-check_cuda.txt 2>/dev/null |
        grep -m1 -e 'no CUDA device' -e 'built without CUDA')
    others=$OUT/.others.tmp
    {
        for k in copy_f32 gelu_f32 copy_16bit gelu_f16 gelu_bf16; do
            awk -v k="$k" '$1 == k && NF >= 5 { printf "- %s: %s Gelem/s, %s GB/s%s (dtbench-gelu.txt)\n", $1, $4, $5,
                (NF >= 6 ? ", " $6 " of the copy" : ""); exit }' "$OUT/dtbench-gelu.txt" 2>/dev/null
        done
        for k in peak_gflops_fp32 peak_gflops_tf32 peak_gflops_bf16 peak_gflops_fp16; do
            v=$(value $k dtbench-gemm.txt)
            [ -n "$v" ] && echo "- $k: $v (dtbench-gemm.txt)"
        done
        for p in bf16 fp16; do
            f=dtbench-train-$p.txt
            tps=$(value tokens_per_second $f)
            [ -n "$tps" ] && echo "- gpt2-124m --$p: tokens_per_second $tps, achieved_gflops $(value achieved_gflops $f)," \
                "against the $(value peak_kind $f) peak_gflops $(value peak_gflops $f)," \
                "peak_activation_bytes $(value peak_activation_bytes $f) ($f)"
        done
        if [ -s "$OUT/dtrain-summary.json" ] && command -v jq >/dev/null 2>&1; then
            echo "- dtrain --device cuda (tiny on the add task, 300 iterations):" \
                "$(jq -r '"val_loss \(.val_loss), accuracy \(.accuracy), tokens_per_second \(.tokens_per_second)"' \
                    "$OUT/dtrain-summary.json" 2>/dev/null) (dtrain-summary.json; its trace: dtrain-trace.json)"
        fi
    } >"$others"
    {
        echo "# dtrain device check"
        echo
        echo "$(sed -n 's/^date: //p' "$OUT/env.txt"), steps ${secs} s in all." \
            "GPU: $(sed -n 's/^gpu: //p' "$OUT/env.txt")."
        echo "Source: $(sed -n 's/^source: //p' "$OUT/env.txt"). Build: $(sed -n 's/^build: //p' "$OUT/env.txt")."
        echo
        echo "**Result: $VERDICT.**"
        if [ -n "$nodev" ]; then
            echo
            echo "No GPU run happened: \`$nodev\`"
        fi
        echo
        echo "## Figures against the goals"
        echo
        echo "| figure | value | goal | verdict | from |"
        echo "|---|---|---|---|---|"
        for f in dtbench-gelu.txt dtbench-train-bf16.txt dtbench-train-fp16.txt; do
            if [ -f "$OUT/$f" ] && grep -q ' goal >= ' "$OUT/$f"; then
                awk -v f="$f" '/ goal >= / && ($6 == "PASS" || $6 == "BELOW") {
                    printf "| %s | %s | >= %s | %s | %s |\n", $1, $2, $5, $6, f }' "$OUT/$f"
            else
                echo "| (the figures of $f) | not measured | | | see Steps |"
            fi
        done
        echo
        echo "Other figures (no goal):"
        echo
        if [ -s "$others" ]; then cat "$others"; else echo "- none measured"; fi
        echo
        echo "## Steps"
        echo
        echo "| step | status | exit | seconds | output | note |"
        echo "|---|---|---|---|---|---|"
        awk -F '\t' '{ gsub(/\|/, "/", $6); printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }' "$steps"
        if [ "$nfail" -ne 0 ]; then
            echo
            printf 'Did not pass: %s.\n' "$(awk -F '\t' '$2 != "ok" { printf "%s%s (%s)", n++ ? ", " : "", $1, $2 }' "$steps")"
        fi
        echo
        echo "Every step's full output is in this folder (the file named in Steps); nvidia-smi.txt and env.txt" \
            "describe the machine."
    } >"$OUT/SUMMARY.md"
    rm -f "$others"
}

case ${1:-} in
-h | --help)
    sed -n '2,/^$/s/^# \{0,1\}//p' "$0"
    exit 0
    ;;
--summary-only)
    OUT=${2:-gpu-results}
    if [ ! -f "$OUT/steps.tsv" ] || [ ! -f "$OUT/env.txt" ]; then
        echo "device-check.sh: --summary-only: $OUT has no steps.tsv and env.txt of an earlier run" >&2
        exit 2
    fi
    write_summary
    echo "device-check.sh: $VERDICT (summary rewritten in $OUT/SUMMARY.md)"
    exit $STATUS_ALL
    ;;
esac
if [ $# -gt 1 ]; then
    echo "device-check.sh: expected at most one argument (the output folder), got $#" >&2
    exit 2
fi

START=$(date +%s)
BUDGET=${DT_CHECK_BUDGET:-450}
JOBS=${DT_JOBS:-16}

SRC=$(cd "$(dirname "$0")/../.." && pwd) || exit 2
if [ ! -f "$SRC/configure.ac" ]; then
    echo "device-check.sh: $SRC does not look like the dtrain source tree (no configure.ac)" >&2
    exit 2
fi
OUT=${1:-gpu-results}
mkdir -p "$OUT" || { echo "device-check.sh: cannot create the output folder '$OUT'" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd) || exit 2
if [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
    echo "device-check.sh: note: $OUT is not empty; files of the same name are overwritten"
fi

if [ -n "${DT_BUILD_DIR:-}" ]; then
    BUILD=$DT_BUILD_DIR
    mkdir -p "$BUILD" || { echo "device-check.sh: cannot create DT_BUILD_DIR '$BUILD'" >&2; exit 2; }
    BUILD=$(cd "$BUILD" && pwd) || exit 2
    REMOVE_BUILD=0
else
    BUILD=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-device-check.XXXXXX") || {
        echo "device-check.sh: mktemp failed" >&2
        exit 2
    }
    REMOVE_BUILD=1
    [ "${DT_KEEP_BUILD:-0}" = 1 ] && REMOVE_BUILD=0
fi
cleanup() {
    if [ "$REMOVE_BUILD" = 1 ]; then rm -rf "$BUILD"; fi
}
trap cleanup EXIT
trap 'echo "device-check.sh: interrupted" >&2; exit 130' HUP INT TERM

STEPS=$OUT/steps.tsv # name, status, exit code, seconds, output file, note
: >"$STEPS"
BUILD_OK=0

elapsed() { echo $(($(date +%s) - START)); }

# record NAME STATUS RC SECONDS FILE NOTE
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" >>"$STEPS"
    printf '[%4ss] %-22s %-9s exit %-4s %4ss  %s%s\n' "$(elapsed)" "$1" "$2" "$3" "$4" "$5" "${6:+  ($6)}"
}

# execute LIMIT FILE CMD...: CMD's stdout and stderr into OUT/FILE under
# `timeout LIMIT` (cut to the budget left), from the current directory; sets
# RC and SECS. Returns 1 without starting CMD when under 15 s are left.
execute() {
    limit=$1 file=$2
    shift 2
    left=$((START + BUDGET - $(date +%s)))
    if [ "$left" -lt 15 ]; then
        echo "not run: the ${BUDGET} s budget of the whole check was used up" >"$OUT/$file"
        return 1
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    t0=$(date +%s)
    {
        echo "\$ $*"
        echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), timeout ${limit} s, in $(pwd)"
    } >"$OUT/$file"
    timeout -k 10 "$limit" "$@" >>"$OUT/$file" 2>&1
    RC=$?
    SECS=$(($(date +%s) - t0))
    return 0
}

# classify FILE: STATUS and NOTE from RC and the output in OUT/FILE
classify() {
    NOTE=
    case $RC in
    0) STATUS=ok ;;
    77)
        STATUS=SKIPPED
        NOTE=$(grep -v '^[$#]' "$OUT/$1" | grep -i -m1 -e 'cuda' -e 'skip' -e 'device' | cut -c1-200)
        ;;
    124 | 137) STATUS=TIMEOUT NOTE="killed after ${limit} s" ;;
    *)
        STATUS=FAILED
        NOTE=$(grep -v '^[$#]' "$OUT/$1" | grep -i -m1 -e 'error' -e 'fail' -e 'no cuda' -e '^dtbench' -e '^dtrain' |
            cut -c1-200)
        ;;
    esac
}

# run NAME LIMIT FILE CMD...: execute, classify, record; returns CMD's status
run() {
    rname=$1
    shift
    if ! execute "$@"; then
        record "$rname" NOT-RUN - 0 "$2" "time budget used up"
        return 1
    fi
    classify "$2"
    record "$rname" "$STATUS" "$RC" "$SECS" "$2" "$NOTE"
    return "$RC"
}

# not_run NAME FILE WHY
not_run() {
    echo "not run: $3" >"$OUT/$2"
    record "$1" "NOT-RUN" "-" 0 "$2" "$3"
}

echo "device-check.sh: source $SRC, build $BUILD, results $OUT, budget ${BUDGET} s"

# ---- the machine ---------------------------------------------------------
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host: $(uname -a)"
    echo "cpus: $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?')"
    if [ -d "$SRC/.git" ] && command -v git >/dev/null 2>&1; then
        echo "source: $(git -C "$SRC" rev-parse HEAD 2>/dev/null) ($(git -C "$SRC" status --porcelain 2>/dev/null | wc -l) files changed)"
    else
        echo "source: $SRC (not a git checkout)"
    fi
    if command -v nvcc >/dev/null 2>&1; then nvcc --version | tail -n 2; elif [ -x /usr/local/cuda/bin/nvcc ]; then /usr/local/cuda/bin/nvcc --version | tail -n 2; else echo "nvcc: not found on PATH or in /usr/local/cuda/bin"; fi
} >"$OUT/env.txt" 2>&1
GPU_LINE="nvidia-smi not found: no NVIDIA driver on this machine"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm,power.limit --format=csv \
        >>"$OUT/nvidia-smi.txt" 2>&1
    GPU_LINE=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
    [ -n "$GPU_LINE" ] || GPU_LINE="nvidia-smi failed: $(head -n 1 "$OUT/nvidia-smi.txt")"
    ARCH_GUESS=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
else
    echo "$GPU_LINE" >"$OUT/nvidia-smi.txt"
    ARCH_GUESS=
fi
echo "gpu: $GPU_LINE" >>"$OUT/env.txt"
echo "device-check.sh: gpu: $GPU_LINE"

# ---- configure and build -------------------------------------------------
cd "$BUILD" || exit 2
ARCH=${DT_CUDA_ARCH:-$ARCH_GUESS}
case $ARCH in
*[!0-9\ ]*) ARCH= ;; # not a list of compute capabilities: configure's default
esac
echo "build: \`configure --with-cuda${ARCH:+ --with-cuda-arch=$ARCH}${DT_CONFIGURE_FLAGS:+ $DT_CONFIGURE_FLAGS}\`," \
    "\`make -j$JOBS\` in $BUILD" >>"$OUT/env.txt"
if [ -f "$SRC/config.status" ]; then
    not_run configure configure.txt "the source tree $SRC is configured in place (config.status): run 'make distclean' there or use a fresh copy"
else
    ok=1
    if [ ! -x "$SRC/configure" ]; then
        if command -v autoreconf >/dev/null 2>&1; then
            (cd "$SRC" && run autoreconf 240 autoreconf.txt autoreconf -fi) || ok=0
        else
            not_run autoreconf autoreconf.txt "$SRC has no configure script and autoreconf is not installed: run ./bootstrap on a machine with autotools first"
            ok=0
        fi
    fi
    if [ "$ok" = 1 ]; then
        # shellcheck disable=SC2086 # DT_CONFIGURE_FLAGS is a list of words
        if run configure 240 configure.txt "$SRC/configure" --with-cuda ${ARCH:+"--with-cuda-arch=$ARCH"} \
            ${DT_CONFIGURE_FLAGS:-}; then
            if run build 360 build.txt make -j"$JOBS"; then
                BUILD_OK=1
            fi
        else
            [ -f config.log ] && cp config.log "$OUT/config.log"
            not_run build build.txt "configure failed (see configure.txt, config.log)"
        fi
    else
        not_run configure configure.txt "no configure script"
        not_run build build.txt "no configure script"
    fi
fi

# ---- the GPU tests (make check, one test at a time) -----------------------
GPU_TESTS=
if [ "$BUILD_OK" = 1 ]; then
    printf 'print-tests:\n\t@echo $(TESTS)\n' >"$BUILD/print-tests.mk"
    for t in $(make -s -f Makefile -f print-tests.mk print-tests 2>/dev/null); do
        case $t in
        *cuda* | *nccl* | *gpu*) GPU_TESTS="$GPU_TESTS $t" ;;
        esac
    done
    rm -f "$BUILD/print-tests.mk"
    [ -n "$GPU_TESTS" ] || GPU_TESTS=" tests/check_cuda tests/cuda.sh"
    # the test programs first, in parallel (make check would build them one test at a time)
    run build-tests 240 build-tests.txt make -j"$JOBS" check TESTS= || true
fi
for t in ${GPU_TESTS:- tests/check_cuda}; do
    base=$(basename "$t")
    file=test-$base.txt
    if [ "$BUILD_OK" != 1 ]; then
        not_run "$base" "$file" "the build failed"
        continue
    fi
    # Automake names the log tests/x.sh.log (no TEST_EXTENSIONS) or tests/x.log
    rm -f "$t.log" "$t.trs" "${t%.sh}.log" "${t%.sh}.trs"
    if ! execute 240 "$file" make check TESTS="$t"; then
        record "$base" NOT-RUN - 0 "$file" "time budget used up"
        continue
    fi
    log=$t.log trs=$t.trs
    [ -f "$trs" ] || log=${t%.sh}.log trs=${t%.sh}.trs
    [ -f "$log" ] && { echo "---- $log"; cat "$log"; } >>"$OUT/$file"
    # make check exits 0 on SKIP: the .trs file says what happened
    result=$(sed -n 's/^:test-result: //p' "$trs" 2>/dev/null | head -n 1)
    classify "$file"
    if [ "$RC" = 0 ]; then
        case $result in
        PASS) ;;
        SKIP)
            STATUS=SKIPPED RC=77
            NOTE=$(grep -v '^[$#]' "$log" 2>/dev/null | grep -i -m1 -e 'skip' -e 'cuda' -e 'device' | cut -c1-200)
            ;;
        *) STATUS=FAILED NOTE="test result '${result:-none}' (see $file)" ;;
        esac
    elif [ -n "$result" ]; then
        NOTE="test result $result${NOTE:+: $NOTE}"
    fi
    record "$base" "$STATUS" "$RC" "$SECS" "$file" "$NOTE"
done

# ---- benchmarks and a traced run ------------------------------------------
bench() { # bench NAME LIMIT FILE ARGS...
    name=$1 limit=$2 file=$3
    shift 3
    if [ "$BUILD_OK" != 1 ]; then not_run "$name" "$file" "the build failed"; return; fi
    run "$name" "$limit" "$file" "$@"
}
bench dtbench-gelu 120 dtbench-gelu.txt ./dtbench gelu --skip-no-device
bench dtbench-gemm 150 dtbench-gemm.txt ./dtbench gemm --device cuda --skip-no-device
bench train-bf16 180 dtbench-train-bf16.txt ./dtbench train --device cuda --model gpt2-124m --bf16 --steps 5 --warmup 2 \
    --skip-no-device
bench train-fp16 180 dtbench-train-fp16.txt ./dtbench train --device cuda --model gpt2-124m --fp16 --steps 5 --warmup 2 \
    --skip-no-device
rm -f "$OUT/dtrain-trace.json" "$OUT/dtrain-summary.json"
bench dtrain-trace 120 dtrain-trace.txt ./dtrain --device cuda --train-iters 300 --log-interval 50 --eval-iters 2 \
    --trace "$OUT/dtrain-trace.json" --summary "$OUT/dtrain-summary.json"
if [ -s "$OUT/dtrain-trace.json" ]; then
    if command -v python3 >/dev/null 2>&1; then
        run trace-json 60 trace-json.txt python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
print("valid JSON:", len(ev), "events;", len({e.get("name") for e in ev}), "distinct names")
' "$OUT/dtrain-trace.json"
    elif command -v jq >/dev/null 2>&1; then
        run trace-json 60 trace-json.txt jq -e 'if type == "object" then .traceEvents | length else length end' \
            "$OUT/dtrain-trace.json"
    else
        not_run trace-json trace-json.txt "neither python3 nor jq to parse the trace"
    fi
else
    not_run trace-json trace-json.txt "dtrain wrote no trace (see dtrain-trace.txt)"
fi

write_summary
echo "device-check.sh: $VERDICT"
echo "device-check.sh: summary in $OUT/SUMMARY.md"
exit $STATUS_ALL
