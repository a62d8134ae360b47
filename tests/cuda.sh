#!/bin/sh
# cuda.sh: `dtrain --device cuda` where CUDA cannot run (run by `make check`
# with DT_BUILDDIR set).
#
# Without a usable GPU (or in a build without CUDA) dtrain must exit 1 with
# exactly one line on stderr: "dtrain: --device cuda: no CUDA device
# (cudaGetDeviceCount: ...)" in a CUDA build, or "... built without CUDA
# ..." otherwise; it must not crash. Skipped (77), saying why, when a GPU is
# present (tests/check_cuda covers the backend then) or while dtrain's flag
# parser does not list cuda as a --device choice yet. POSIX sh.

set -u
LC_ALL=C
export LC_ALL

BUILDDIR=${DT_BUILDDIR:-.}
DTRAIN=$BUILDDIR/dtrain
if [ ! -x "$DTRAIN" ]; then
    echo "cuda.sh: $DTRAIN not found or not executable (set DT_BUILDDIR)" >&2
    exit 99
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-cuda.XXXXXX") || exit 99
trap 'rm -rf "$TMP"' EXIT HUP INT TERM

# A CUDA build asks tests/check_cuda whether a device is usable: the trainer
# does not run on the GPU yet, so with a device this test has nothing to do.
if [ -x "$BUILDDIR/tests/check_cuda" ] && "$BUILDDIR/tests/check_cuda" --probe >"$TMP/probe" 2>&1; then
    echo "SKIP: a CUDA device is present ($(cat "$TMP/probe")); tests/check_cuda covers the backend"
    exit 77
fi

"$DTRAIN" --device cuda --train-iters 1 --eval-iters 1 >"$TMP/out" 2>"$TMP/err"
rc=$?

if [ "$rc" -eq 2 ] && grep -q -- "--device 'cuda': expected one of" "$TMP/err"; then
    echo "SKIP: dtrain's --device flag does not accept cuda yet: $(cat "$TMP/err")"
    exit 77
fi
if [ "$rc" -eq 0 ]; then
    echo "SKIP: a CUDA device is present (dtrain --device cuda ran); tests/check_cuda covers the backend"
    exit 77
fi

failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

[ "$rc" -eq 1 ] || fail "dtrain --device cuda exited $rc (expected 1); stderr: $(cat "$TMP/err")"
lines=$(wc -l <"$TMP/err")
[ "$lines" -eq 1 ] || fail "expected one line on stderr, got $lines: $(cat "$TMP/err")"
if ! grep -q "^dtrain: --device cuda: no CUDA device (cudaGetDeviceCount: .*)$" "$TMP/err" &&
    ! grep -q "^dtrain: --device cuda: this dtrain was built without CUDA" "$TMP/err"; then
    fail "unexpected message: $(cat "$TMP/err")"
fi

if [ "$failures" -ne 0 ]; then
    echo "cuda.sh: $failures failure(s)" >&2
    exit 1
fi
echo "cuda.sh: dtrain --device cuda without a device: $(cat "$TMP/err")"
exit 0
