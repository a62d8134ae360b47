# mpi-lib.sh: what the multi-rank shell tests of dtrain share (dp.sh, ps.sh).
# Source it after setting TEST (the script's name, for messages):
#   checks that $DT_BUILDDIR/dtrain exists (exit 99 otherwise), skips the
#   test (exit 77) when the build has no MPI, fails (99) when mpirun is
#   missing; makes $TMP (removed on exit); sources mpi-env.sh; sets DTRAIN,
#   BUILDDIR, MPIRUN and failures=0; defines fail, key, jlist, close,
#   expect_error, mpi_run, same and field.
# POSIX sh.

set -u
LC_ALL=C
export LC_ALL
BUILDDIR=${DT_BUILDDIR:-.}
DTRAIN=$BUILDDIR/dtrain
[ -x "$DTRAIN" ] || { echo "$TEST: $DTRAIN not found (set DT_BUILDDIR)" >&2; exit 99; }
if ! "$BUILDDIR/tests/check_comm" --have-mpi 2>/dev/null | grep -q yes; then
    echo "$TEST: this build has no MPI: skipped"
    exit 77
fi
command -v mpirun >/dev/null 2>&1 || { echo "$TEST: MPI is built in but mpirun is missing" >&2; exit 99; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-$TEST.XXXXXX") || exit 99
trap 'rm -rf "$TMP"' EXIT HUP INT TERM
. "${DT_SRCDIR:-.}/tests/mpi-env.sh"
MPIRUN="mpirun --oversubscribe --allow-run-as-root"
failures=0

# fail MESSAGE: report and count a failure
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# key FILE NAME: the number after "NAME": in a summary
key() { sed -n "s/^ *\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1" | head -n 1; }
# jlist FILE KEY: the numbers of a summary's array KEY, space-separated
jlist() { sed -n "/\"$2\"/,/]/p" "$1" | tr -d ' \n' | sed 's/.*\[\(.*\)\].*/\1/' | tr ',' ' '; }

# close A B: |A - B| <= 1e-4 * max(|A|, |B|, 1e-3)
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); n = (b < 0 ? -b : b);
    if (n > m) m = n; if (m < 1e-3) m = 1e-3; exit !(d <= 1e-4 * m) }'; }

# mpi_run NAME NP ARGS...: mpirun -np NP dtrain ARGS (300 s at most), its
# summary in $TMP/NAME.json and output in $TMP/NAME.out; a failure is
# reported and returns 1
mpi_run() {
    name=$1 np=$2; shift 2
    if ! timeout 300 $MPIRUN -np "$np" "$DTRAIN" "$@" --summary "$TMP/$name.json" >"$TMP/$name.out" 2>&1; then
        fail "$name: exited non-zero:"; tail -n 20 "$TMP/$name.out" >&2
        return 1
    fi
}
# same NAME REF [close|exact|losses]: NAME's summary against REF's:
# train_loss, val_loss and param_probe (the weights' fingerprint) within
# 1e-4 relative (close, the default); exact: all three to the last digit;
# losses: the two losses to the last digit, param_probe within 1e-4
same() {
    ok=1
    for kk in train_loss val_loss param_probe; do
        a=$(key "$TMP/$2.json" $kk); b=$(key "$TMP/$1.json" $kk)
        case ${3:-close}:$kk in
        exact:* | losses:train_loss | losses:val_loss) [ -n "$a" ] && [ "$a" = "$b" ] ;;
        *) [ -n "$a" ] && [ -n "$b" ] && close "$a" "$b" ;;
        esac || { fail "$1: $kk $b, $2 $a (${3:-close})"; ok=0; }
    done
    [ $ok = 1 ] && echo "ok: $1 equals $2 (${3:-within 1e-4})"
}
# field FILE STAGE KEY: the value of KEY= on stage STAGE's line of
# `dtbench bubbles`
field() { sed -n "s/.* stage=$2 .* $3=\([-0-9.naif]*\).*/\1/p" "$1" | head -n 1; }

# expect_error WANT NP ARGS...: mpirun -np NP dtrain --train-iters 1 ARGS must
# fail with a message containing WANT
expect_error() {
    want=$1 np=$2; shift 2
    timeout 60 $MPIRUN -np "$np" "$DTRAIN" --train-iters 1 "$@" >"$TMP/err.out" 2>&1
    rc=$?
    if [ "$rc" = 0 ] || ! grep -q -- "$want" "$TMP/err.out"; then
        fail "dtrain $* (-np $np): expected a failure mentioning '$want', got exit $rc:"; cat "$TMP/err.out" >&2
    else
        echo "ok: $* (-np $np) fails: $(grep -m1 -- "$want" "$TMP/err.out")"
    fi
}
