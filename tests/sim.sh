#!/bin/sh
# sim.sh: the simulator predicts real runs it has not seen (run by `make
# check` after bubble.sh; skipped without MPI).
#
# `dtbench simval --quick` runs, as a user would, a single-rank compute
# profile of the tiny model (1 thread), `mpirun -np 2 dtbench allreduce
# --json` for the links' fit, then three real 2-rank runs with traces:
# pipeline p = 2 1f1b m = 4, data-parallel ring d = 2, ps-sync (one worker,
# one server). dts_validate predicts each from the profile and the fit only
# (the run gives its configuration, never its durations) and prints
# measured vs predicted step time with the error.
#
# Checked: every run is predicted, and every |error| <= TOL (25%). The full
# matrix (`dtbench simval`, 14 runs, bench/README.md) measured a mean
# absolute error of 3.1-3.9% and at most 6.6-10.0% on a quiet machine; the
# tolerance is wider because `make check` may share the 2 cores with a
# build or another test, which slows one rank of a run 2-7x (bubble.sh
# explains it), while the profile was taken at a different moment. A
# disturbed attempt is retried, twice at most; the test fails when all three
# are off on a quiet machine, or when anything fails outright. When all
# three are off while the 1-minute load average is above the cores + 1.5
# (other work competing: seen with four builds beside `make check`, errors
# of 31-68%), it is skipped (77) with that reason instead: a timing test
# cannot judge a prediction on a machine it does not have to itself.
# Takes 3-5 s per attempt.
TEST=sim.sh
. "${DT_SRCDIR:-.}/tests/mpi-lib.sh"
TOL=25
out=$TMP/simval.out
die() { cat "$out"; fail "$*"; exit 1; }
# the machine's load: 1-minute load average above the cores + 1.5 means other
# work competes with the measured runs (the runs themselves add about 2)
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
busy=0
for attempt in 1 2 3; do
    load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
    if awk -v l="$load" -v c="$cores" 'BEGIN { exit !(l > c + 1.5) }'; then busy=1; fi
    "$BUILDDIR/dtbench" simval --quick --iters 20 >"$out" 2>&1 || die "dtbench simval --quick failed"
    n=$(grep -c '^\(t[0-9]\|dp \|ps-\)' "$out")
    [ "$n" -eq 3 ] || die "expected 3 predicted runs, got $n"
    # the error column: the field that ends in % (e.g. -2.6%)
    worst=$(grep '^\(t[0-9]\|dp \|ps-\)' "$out" | awk -v tol=$TOL '
        { for (i = 1; i <= NF; i++) if ($i ~ /^[-+][0-9.]+%$/) { e = $i; sub(/%/, "", e); e = e + 0; e = e < 0 ? -e : e;
                                                                 if (e > w) w = e } }
        END { printf "%.1f", w }')
    grep '^\(t[0-9]\|dp \|ps-\)\|mean absolute' "$out"
    if [ -n "${DT_SANITIZERS:-}" ]; then
        # ./configure --enable-sanitizers (docs/sanitizers.md): every run was made and predicted under ASan and
        # UBSan, but instrumented timings say nothing about the simulator: one attempt, not judged
        echo "sim.sh: sanitizer build: 3 runs predicted (largest |error| $worst%, not judged: instrumented timings)"
        exit 0
    fi
    if awk -v w="$worst" -v tol=$TOL 'BEGIN { exit !(w <= tol) }'; then
        echo "sim.sh: largest |error| $worst% <= $TOL% (attempt $attempt)"
        exit 0
    fi
    echo "sim.sh: largest |error| $worst% > $TOL% on attempt $attempt (a disturbed run?): again"
done
if [ "$busy" = 1 ]; then
    # a timing test cannot judge a prediction while other work takes the cores: say so, do not pass
    echo "sim.sh: every attempt was off by more than $TOL% while the machine was busy (1-minute load average"
    echo "sim.sh: above $cores + 1.5): the measured runs were disturbed, so the prediction was not judged: skipped"
    exit 77
fi
die "every attempt had a prediction off by more than $TOL%"
