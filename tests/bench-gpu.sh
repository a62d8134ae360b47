#!/bin/sh
# bench-gpu.sh: `dtbench gelu`, the GPU benchmark's device handling (run by
# `make check` with DT_BUILDDIR set).
#
# Without a usable GPU (or in a build without CUDA) `dtbench gelu` must
# exit 1, and 77 with --skip-no-device, printing exactly one line on stderr
# that names the problem: "dtbench gelu: --device cuda: no CUDA device
# (cudaGetDeviceCount: ...)" or "... built without CUDA ...". With a GPU, a
# small `dtbench gelu` must run, pass its own correctness checks (exit 0)
# and print its goal lines (the figures themselves are judged by
# tests/gpu/device-check.sh, not here). POSIX sh.

set -u
LC_ALL=C
export LC_ALL

BUILDDIR=${DT_BUILDDIR:-.}
DTBENCH=$BUILDDIR/dtbench
if [ ! -x "$DTBENCH" ]; then
    echo "bench-gpu.sh: $DTBENCH not found or not executable (set DT_BUILDDIR)" >&2
    exit 99
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-bench-gpu.XXXXXX") || exit 99
trap 'rm -rf "$TMP"' EXIT HUP INT TERM

failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

timeout 300 "$DTBENCH" gelu --n 1048576 --skip-no-device >"$TMP/out" 2>"$TMP/err"
rc=$?

if [ "$rc" -eq 0 ]; then
    # a GPU: the run passed its correctness checks; its goal lines are there
    n=$(grep -cE ' goal >= .* (PASS|BELOW)' "$TMP/out")
    [ "$n" -eq 4 ] || fail "dtbench gelu on the GPU printed $n goal lines (expected 4): $(cat "$TMP/out")"
    grep -q '^# check gelu_f16 against gelu_f32: 0 of ' "$TMP/out" || fail "no passing f16 check line: $(cat "$TMP/out")"
    what="with a GPU: dtbench gelu --n 1048576 ran and checked its results"
else
    [ "$rc" -eq 77 ] || fail "dtbench gelu --skip-no-device exited $rc (expected 77 without a device); stderr: $(cat "$TMP/err")"
    lines=$(wc -l <"$TMP/err")
    [ "$lines" -eq 1 ] || fail "expected one line on stderr, got $lines: $(cat "$TMP/err")"
    if ! grep -q "^dtbench gelu: --device cuda: no CUDA device (cudaGetDeviceCount: .*)$" "$TMP/err" &&
        ! grep -q "^dtbench gelu: --device cuda: this dtrain was built without CUDA" "$TMP/err"; then
        fail "unexpected message: $(cat "$TMP/err")"
    fi
    [ -s "$TMP/out" ] && fail "unexpected output on stdout: $(cat "$TMP/out")"
    # without --skip-no-device: the same line, exit 1; the other GPU commands alike
    for cmd in "gelu" "gemm --device cuda" "train --device cuda --model tiny --bf16"; do
        # shellcheck disable=SC2086 # cmd is a list of words
        "$DTBENCH" $cmd >"$TMP/out2" 2>"$TMP/err2"
        rc2=$?
        [ "$rc2" -eq 1 ] || fail "dtbench $cmd without a device exited $rc2 (expected 1); stderr: $(cat "$TMP/err2")"
        name=${cmd%% *}
        grep -q "^dtbench $name: --device cuda: " "$TMP/err2" && [ "$(wc -l <"$TMP/err2")" -eq 1 ] ||
            fail "dtbench $cmd: expected one line 'dtbench $name: --device cuda: ...', got: $(cat "$TMP/err2")"
    done
    what="without a device: $(cat "$TMP/err") (exit 77 with --skip-no-device, 1 without; gemm and train alike)"
fi

if [ "$failures" -ne 0 ]; then
    echo "bench-gpu.sh: $failures failure(s)" >&2
    exit 1
fi
echo "bench-gpu.sh: $what"
exit 0
