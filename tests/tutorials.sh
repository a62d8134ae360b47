#!/bin/sh
# tutorials.sh: runs every tutorial (tutorials/NN-name/check.sh next to its
# README.md) and reports per tutorial, so that the tutorials cannot drift
# from the code. Under make check, TUTORIAL_QUICK defaults to 1 (each
# tutorial's README says what that shortens); TUTORIAL_QUICK=0 runs the
# commands exactly as printed. TUTORIALS='00-quickstart ...' runs a subset;
# TUT_KEEP=DIR keeps the scratch directories in DIR.
#
# It is also the tutorials' library: a check.sh sets TUTORIAL_LIB=1 and
# sources this file, which then defines the helpers below and returns:
#   tut_cmd NAME [--quick "ARGS"] ./PROG ARGS...
#       runs the README's command ./PROG ARGS in the tutorial's scratch
#       directory ($TUT_DIR, holding links to the build's programs), with
#       ARGS appended when TUTORIAL_QUICK=1; stdout+stderr in NAME.out; a
#       non-zero exit fails the tutorial and stops it.
#   tut_fails NAME RC ./PROG ARGS...
#       a README command that must fail with exit status RC: run as
#       printed and recorded like tut_cmd's
#   tut_line NAME ERE          NAME.out has a line matching ERE
#   tut_num NAME SED-REGEX     prints the \1 of the first line matching
#   tut_range WHAT VALUE LO HI LO <= VALUE <= HI
#   tut_file PATH              PATH exists and is not empty
#   tut_gpu                    true when a usable CUDA device is present
#                              (a CUDA build whose tests/check_cuda --probe passes)
#   tut_gpu_cmd NAME ./PROG ARGS...
#       a GPU command (a line of a code block opened with ```sh gpu):
#       run as tut_cmd does when tut_gpu is true; otherwise it is only
#       recorded as skipped (the caller must then skip checks of NAME.out)
#   tut_mpi                    Open MPI settings of the multi-rank tests
#                              (tests/mpi-env.sh) plus eager messages
#                              (docs/pipeline.md), and $MPIRUN; exit 77 (skip)
#                              without mpirun
#   tut_json FILE KEY          the number after "KEY": in a summary file
#   tut_reldiff A B            |A - B| / max(|A|, |B|)
#   tut_spans OUT A:B TRACE... the spans `dtviz --zoom A:B` shows of TRACE's
#                              files, as numbers, into OUT
#                              (tests/trace-spans.awk): to check what a
#                              caption says of its picture
#   tut_ratio A B              A / B to 3 decimals (empty when B <= 0)
#   tut_pair REF RUN WHAT SED-REGEX TOL
#                              the \1 of SED-REGEX in RUN.out minus that in
#                              REF.out (two runs of the same check) within
#                              [-TOL, TOL]; fails when either is missing
#   tut_finish                 exit 0, or 1 after any failure
# A check holds on every correct build (docs/testing.md): a number that
# depends on FP32 rounding (a loss after many steps, an accuracy, an
# overflow's iteration) is compared with a run of the same check, or held
# to a range of behaviour whose derivation is written beside it; only
# exact things (headers, counts, bytes, schedules) are matched exactly.
# The scratch directory holds a link `sim` to the source tree's sim/, so the
# READMEs' `--hw sim/hw/X.json` (paths of an in-tree build) run as printed.
# Every command line of the README (a line in a code block starting with
# ./dtrain, ./dtsim, ./dtviz or ./dtbench; trailing "# comments" dropped,
# "\" continuations joined) must have been run through tut_cmd as printed.
# Lines of ```sh gpu blocks must have gone through tut_gpu_cmd: run where
# a GPU is present, listed as skipped (not run) where none is.
# POSIX sh.

set -u
LC_ALL=C
export LC_ALL
BUILDDIR=${DT_BUILDDIR:-.}
SRCDIR=${DT_SRCDIR:-.}
TUTORIAL_QUICK=${TUTORIAL_QUICK-1}
export TUTORIAL_QUICK

if [ "${TUTORIAL_LIB:-}" = 1 ]; then
    tut_failures=0
    tut_fail() {
        echo "FAIL: $*" >&2; tut_failures=$((tut_failures + 1))
        [ -n "${TUT_FAILS:-}" ] && echo "${TUT_NAME:-?}: $*" >>"$TUT_FAILS"
    }
    TUT_DIR=${TUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/dtrain-tutorial.XXXXXX")} || exit 99
    TUT_LOG=${TUT_LOG:-$TUT_DIR/commands.log}
    for p in dtrain dtsim dtviz dtbench; do
        [ -x "$BUILDDIR/$p" ] && ln -sf "$(cd "$BUILDDIR" && pwd)/$p" "$TUT_DIR/$p"
    done
    SRCDIR=$(cd "$SRCDIR" && pwd) || exit 99
    cd "$TUT_DIR" || exit 99
    [ -e sim ] || ln -s "$(cd "$SRCDIR" && pwd)/sim" sim
    tut_cmd() {
        name=$1; shift
        extra=
        if [ "$1" = --quick ]; then
            [ "$TUTORIAL_QUICK" = 1 ] && extra=$2
            shift 2
        fi
        echo "$*" >>"$TUT_LOG"
        echo "\$ $* $extra" | sed "s/ *$//"
        t0=$(date +%s.%N)
        # $extra is split into words on purpose
        "$@" $extra >"$name.out" 2>&1
        rc=$?
        # each command's wall time, for the READMEs' "took N s" figures
        echo "$(date +%s.%N) $t0 $name" | awk '{ printf "%.2f s  %s\n", $1 - $2, $3 }' >>"$TUT_LOG.times"
        if [ "$rc" -ne 0 ]; then
            tut_fail "$* $extra: exit $rc"
            tail -n 20 "$name.out" >&2
            tut_finish
        fi
    }
    tut_fails() {
        name=$1 want=$2
        shift 2
        echo "$*" >>"$TUT_LOG"
        echo "\$ $*   (expected to exit $want)"
        "$@" >"$name.out" 2>&1
        rc=$?
        if [ "$rc" = "$want" ]; then echo "  ok: exit $rc"; else tut_fail "$*: exit $rc, expected $want"; fi
    }
    tut_line() {
        if grep -E -q -- "$2" "$1.out"; then
            echo "  ok: $(grep -E -m1 -- "$2" "$1.out")"
        else
            tut_fail "$1: no line matching /$2/"
            tail -n 5 "$1.out" >&2
        fi
    }
    tut_num() { sed -n "s/$2/\1/p" "$1.out" | head -n 1; }
    tut_range() {
        if [ -n "$2" ] && awk -v v="$2" -v lo="$3" -v hi="$4" 'BEGIN { exit !(v + 0 >= lo + 0 && v + 0 <= hi + 0) }'; then
            echo "  ok: $1 = $2 (in [$3, $4])"
        else
            tut_fail "$1 = '$2', outside [$3, $4]"
        fi
    }
    tut_file() { [ -s "$1" ] && echo "  ok: $1 written" || tut_fail "$1 missing or empty"; }
    tut_gpu() {
        [ -n "${tut_has_gpu:-}" ] || {
            tut_has_gpu=no
            [ -x "$BUILDDIR/tests/check_cuda" ] && "$BUILDDIR/tests/check_cuda" --probe >/dev/null 2>&1 && tut_has_gpu=yes
        }
        [ "$tut_has_gpu" = yes ]
    }
    tut_gpu_cmd() {
        if tut_gpu; then
            tut_cmd "$@"
        else
            shift
            echo "$*" >>"$TUT_LOG.gpu-skipped"
            echo "\$ $*   (skipped: no CUDA device)"
        fi
    }
    tut_mpi() {
        # the file the READMEs source (`. ./mpi-env.sh` in the build directory)
        [ -f "$BUILDDIR/mpi-env.sh" ] || { tut_fail "$BUILDDIR/mpi-env.sh missing (make builds it)"; exit 1; }
        . "$BUILDDIR/mpi-env.sh"
        : "${OMPI_MCA_btl_vader_eager_limit:=135168}"
        : "${OMPI_MCA_btl_vader_segment_size:=33554432}"
        export OMPI_MCA_btl_vader_eager_limit OMPI_MCA_btl_vader_segment_size
        command -v mpirun >/dev/null 2>&1 || { echo "  (no mpirun: tutorial skipped)"; exit 77; }
        MPIRUN="mpirun --oversubscribe --allow-run-as-root"
    }
    tut_json() { sed -n "s/^ *\"$2\": \([-0-9.eE+]*\),*$/\1/p" "$1" | head -n 1; }
    tut_reldiff() {
        awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a; n = b < 0 ? -b : b
                                         if (n > m) m = n; printf "%.3g", (m > 0 ? d / m : 0) }'
    }
    tut_spans() {
        out=$1 w=$2
        shift 2
        awk -v from="${w%:*}" -v to="${w#*:}" -f "$SRCDIR/tests/trace-spans.awk" "$@" >"$out" ||
            tut_fail "trace-spans.awk $w $*: failed"
    }
    tut_ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b }'; }
    tut_pair() {
        a=$(tut_num "$1" "$4") b=$(tut_num "$2" "$4")
        tut_range "$3, $2 minus $1 ($b, $a)" \
            "$(awk -v a="$a" -v b="$b" 'BEGIN { if (a != "" && b != "") printf "%.4f", b - a }')" "-$5" "$5"
    }
    tut_finish() {
        [ "$tut_failures" = 0 ] && exit 0
        exit 1
    }
    return 0
fi

[ -x "$BUILDDIR/dtrain" ] || { echo "tutorials.sh: $BUILDDIR/dtrain not found (set DT_BUILDDIR)" >&2; exit 99; }
# TUT_KEEP=DIR keeps every tutorial's scratch directory (its commands'
# outputs and traces) in DIR, to read the figures of a run afterwards
if [ -n "${TUT_KEEP:-}" ]; then
    TMP=$TUT_KEEP
    mkdir -p "$TMP" || { echo "tutorials.sh: TUT_KEEP=$TMP: cannot make the directory" >&2; exit 99; }
else
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-tutorials.XXXXXX") || exit 99
    trap 'rm -rf "$TMP"' EXIT HUP INT TERM
fi

# readme_commands README [gpu]: its program command lines, one per line
# (those of ```sh gpu blocks with "gpu", the others without)
readme_commands() {
    awk -v want="${2:-}" '/^```/ { code = !code; gpu = ($0 ~ /^```sh gpu/); next }
         code && (gpu ? "gpu" : "") != want { next }
         code { line = $0
                if (cont != "") { sub(/^ +/, "", line); line = cont " " line; cont = "" }
                if (line ~ /\\$/) { sub(/ *\\$/, "", line); cont = line; next }
                if (line !~ /^\.\/dt(rain|sim|viz|bench)( |$)/) next
                sub(/ +#.*$/, "", line); sub(/ +$/, "", line); gsub(/  +/, " ", line); print line }' "$1"
}

passed=0 failed=0 skipped=0
# every failure of every tutorial, repeated at the end of the log so that
# its tail (all a CI report may show) says what failed
TUT_FAILS=$TMP/failures
: >"$TUT_FAILS"
export TUT_FAILS
names=${TUTORIALS:-$(cd "$SRCDIR/tutorials" 2>/dev/null && ls -d [0-9]*-* 2>/dev/null)}
for name in $names; do
    dir=$SRCDIR/tutorials/$name
    if [ ! -f "$dir/README.md" ] || [ ! -f "$dir/check.sh" ]; then
        echo "FAIL: tutorials/$name: needs README.md and check.sh" >&2
        failed=$((failed + 1)); continue
    fi
    work=$TMP/$name
    mkdir -p "$work"
    start=$(date +%s)
    echo "=== tutorials/$name (TUTORIAL_QUICK=$TUTORIAL_QUICK)"
    TUT_NAME=$name TUT_DIR=$work TUT_LOG=$work/commands.log TUTORIAL_LIB=1 DT_BUILDDIR=$(cd "$BUILDDIR" && pwd) \
        DT_SRCDIR=$(cd "$SRCDIR" && pwd) sh "$dir/check.sh"
    rc=$?
    if [ "$rc" = 0 ]; then
        # every command the README prints was run as printed
        readme_commands "$dir/README.md" >"$TMP/want"
        sed 's/  */ /g' "$work/commands.log" >"$TMP/ran" 2>/dev/null || : >"$TMP/ran"
        while IFS= read -r c; do
            grep -F -x -q -- "$c" "$TMP/ran" || { echo "FAIL: tutorials/$name: README command not run by check.sh: $c" >&2; rc=1
                echo "$name: README command not run by check.sh: $c" >>"$TUT_FAILS"; }
        done <"$TMP/want"
        # GPU commands: run, or listed as skipped where there is no GPU
        readme_commands "$dir/README.md" gpu >"$TMP/want"
        sed 's/  */ /g' "$work/commands.log.gpu-skipped" >>"$TMP/ran" 2>/dev/null
        while IFS= read -r c; do
            grep -F -x -q -- "$c" "$TMP/ran" || { echo "FAIL: tutorials/$name: README GPU command neither run nor skipped by check.sh: $c" >&2; rc=1
                echo "$name: README GPU command neither run nor skipped: $c" >>"$TUT_FAILS"; }
        done <"$TMP/want"
        [ -s "$work/commands.log.gpu-skipped" ] &&
            echo "  ($(wc -l <"$work/commands.log.gpu-skipped" | tr -d ' ') GPU commands not run: no CUDA device)"
    fi
    secs=$(( $(date +%s) - start ))
    case $rc in
        0) echo "PASS: tutorials/$name (${secs} s)"; passed=$((passed + 1)) ;;
        77) echo "SKIP: tutorials/$name"; skipped=$((skipped + 1)) ;;
        *) echo "FAIL: tutorials/$name (exit $rc, ${secs} s)"; failed=$((failed + 1))
           grep -q "^$name: " "$TUT_FAILS" || echo "$name: exit $rc" >>"$TUT_FAILS" ;;
    esac
done
if [ -s "$TUT_FAILS" ]; then
    echo "tutorials: the failures again:"
    sed 's/^/  /' "$TUT_FAILS"
fi
echo "tutorials: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -gt 0 ] && exit 1
[ "$passed" = 0 ] && exit 77
exit 0
