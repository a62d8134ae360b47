# mpi-lib.sh: what the multi-rank shell tests of dtrain share (dp.sh, ps.sh).
# Source it after setting TEST (the script's name, for messages):
#   checks that $DT_BUILDDIR/dtrain exists (exit 99 otherwise), skips the
#   test (exit 77) when the build has no MPI, fails (99) when mpirun is
#   missing; makes $TMP (removed on exit); sources mpi-env.sh; sets DTRAIN,
#   BUILDDIR, MPIRUN and failures=0; defines fail, key, jlist, close,
#   expect_error, mpi_run, same, vs_serial and field.
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

# close A B [TOL]: |A - B| <= TOL * max(|A|, |B|, 1e-3), TOL 1e-4 unless
# given; the relative difference is kept in $TMP/reldiffs for close_report.
# The tolerances of the same-run references of dp.sh, pp.sh, tp.sh, zb.sh
# and faults.sh. The runs compared do the same arithmetic on the same rows
# and differ only in the order of FP32 additions (the allreduce's partial
# sums, accumulation per micro-batch or stage, the clipping norm summed
# over ranks). A sum of n terms then moves by about sqrt(n) u of the
# terms' magnitudes (u = 2^-24 = 6e-8; n <= a few hundred here: ~1e-6
# relative). The runs are short (4 steps, 10 at most), and AdamW's step
# lr m / (sqrt(v) + eps) has the size of lr whatever the gradient's, so a
# gradient off by 1e-6 relative moves its step by about as much: each
# weight moves ~steps lr 1e-6 ~ 1e-8 away, with signs that vary from
# element to element. The losses then differ by ~1e-6 relative, and
# param_probe (sum_i w_i u_i with |u_i| < 1, ~10 here) by about
# sqrt(N) 1e-8 ~ 5e-6 (N ~ 1.4e5-2.5e5 weights), 5e-7 relative: TOL 1e-4
# is 100-200x that. (An element whose gradient cancels to within its
# rounding could take a step differing by up to 2 lr, ~3e-4 of
# param_probe; in these 4-step runs every gradient is a sum of per-row
# terms far above its rounding, and no such step shows in the figures
# below, which stay at the sqrt(N) estimate.) Measured in both builds on the developers' machine (close_report
# prints the largest of each run): DP and PP 4e-7 .. 5.2e-6. Tensor
# parallelism (tp.sh, zb.sh's t x p cell: same NAME REF tp) adds a
# row-parallel layer's t partial products, each rounded, and perturbs the
# forward too: compose.sh's TOL_TP32 = 5e-4 there, measured up to 2e-5
# (zb.sh, t x p = 2 x 2) and 5e-5 (compose.sh, 4 blocks). What these
# tolerances reject: a wrong data split, weighting, clipping norm or shard
# moves every weight by a fraction of its step and these figures by 1e-2
# and more.
close() {
    awk -v a="$1" -v b="$2" -v t="${3:-1e-4}" -v w="${CLOSE_WHAT:-}" -v out="${TMP:-/tmp}/reldiffs" 'BEGIN {
        d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); n = (b < 0 ? -b : b); if (n > m) m = n; if (m < 1e-3) m = 1e-3
        printf "%.3g (%s vs %s%s, tolerance %s)\n", d / m, a, b, w == "" ? "" : ": " w, t >>out; exit !(d <= t * m) }'
}
# close_report: the largest relative difference close met (or nothing);
# all of them, one a line, in the file $DT_RELDIFFS when that is set
close_report() {
    [ -s "$TMP/reldiffs" ] || return 0
    [ -z "${DT_RELDIFFS:-}" ] || sort -g "$TMP/reldiffs" >"$DT_RELDIFFS"
    echo "$TEST: largest relative difference from a same-run reference: $(sort -g "$TMP/reldiffs" | tail -n 1)" \
        "($(wc -l <"$TMP/reldiffs") comparisons)"
}

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
# same NAME REF [close|tp|exact|losses]: NAME's summary against REF's:
# train_loss, val_loss and param_probe (the weights' fingerprint) within
# 1e-4 relative (close, the default); tp: within 5e-4 (tensor parallelism:
# see close); exact: all three to the last digit; losses: the two losses to
# the last digit, param_probe within 1e-4
same() {
    ok=1
    tol_=1e-4; [ "${3:-}" = tp ] && tol_=5e-4
    for kk in train_loss val_loss param_probe; do
        a=$(key "$TMP/$2.json" $kk); b=$(key "$TMP/$1.json" $kk)
        case ${3:-close}:$kk in
        exact:* | losses:train_loss | losses:val_loss) [ -n "$a" ] && [ "$a" = "$b" ] ;;
        *) CLOSE_WHAT="$1 $kk, $2"; [ -n "$a" ] && [ -n "$b" ] && close "$a" "$b" $tol_; r_=$?; CLOSE_WHAT=; [ $r_ = 0 ] ;;
        esac || { fail "$1: $kk $b, $2 $a (${3:-close})"; ok=0; }
    done
    [ $ok = 1 ] && echo "ok: $1 equals $2 ($([ "${3:-}" = tp ] && echo "within $tol_" || echo "${3:-within 1e-4}"))"
}
# vs_serial NAME PREC: NAME's summary against serial-PREC's (the caller
# made both): fp32 within tensor parallelism's 5e-4 (same ... tp, see
# close); bf16 and fp16 within compose.sh's 16-bit tolerance 1e-2 (each
# rounding of a stored tensor to 8 or 11 bits, 2^-9 and 2^-12 relative,
# falls on values that differ by FP32 ulps between the runs)
vs_serial() {
    if [ "$2" = fp32 ]; then same "$1" "serial-$2" tp; return 0; fi
    ok_=1
    for kk in train_loss val_loss param_probe; do
        CLOSE_WHAT="$1 $kk" close "$(key "$TMP/serial-$2.json" $kk)" "$(key "$TMP/$1.json" $kk)" 1e-2 ||
            { fail "$1: $kk $(key "$TMP/$1.json" $kk), serial $(key "$TMP/serial-$2.json" $kk)"; ok_=0; }
    done
    [ $ok_ = 1 ] && echo "ok: $1 equals serial-$2 (within 1e-2)"
    return 0
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
