#!/bin/sh
# soak.sh: a long parameter-server run whose memory must stay flat.
#
#   bench/soak.sh [STEPS [INTERVAL_S [BUILDDIR]]]     (defaults: 3000 5 .)
#
# Runs `mpirun -np 4 dtrain --allreduce ps-async` (3 workers, 1 server) on
# the tiny model for STEPS iterations, and every INTERVAL_S seconds reads
# the resident memory (VmRSS of /proc/PID/status) of each of the 4 ranks.
# Prints one line per sample (seconds, then each rank's RSS in MiB), then a
# table per rank: RSS at the first sample, at the middle, at the end, the
# growth from the start and the growth over the second half (after
# warm-up: buffers, the allocator's arenas and MPI's pools have settled
# by then). A leak grows without bound, so the second half is what counts:
# it must stay within 2 MiB per rank ("flat"), otherwise the script says
# GROWING and exits 1. Takes minutes (about 3 for 3000 steps on 2 cores);
# the samples are also written to soak.csv in the current directory
# (SOAK_CSV=path to change it). Run it alone on the machine: the 4 ranks
# busy-poll. POSIX sh; Linux (/proc).

set -u
STEPS=${1:-3000}
INTERVAL=${2:-5}
BUILDDIR=${3:-.}
SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
CSV=${SOAK_CSV:-soak.csv}
DTRAIN=$BUILDDIR/dtrain
[ -x "$DTRAIN" ] || { echo "soak.sh: $DTRAIN not found (third argument: the build directory)" >&2; exit 2; }
command -v mpirun >/dev/null 2>&1 || { echo "soak.sh: mpirun not found" >&2; exit 2; }
. "$SRCDIR/tests/mpi-env.sh"

LOG=$(mktemp "${TMPDIR:-/tmp}/soak-log.XXXXXX") || exit 1
mpirun --oversubscribe --allow-run-as-root -np 4 "$DTRAIN" --allreduce ps-async --num-ps-servers 1 \
    --train-iters "$STEPS" --micro-batch-size 64 --eval-interval 0 --eval-iters 1 --log-interval 500 \
    --threads 1 >"$LOG" 2>&1 &
MPI=$!
trap 'kill "$MPI" 2>/dev/null; rm -f "$LOG"' EXIT HUP INT TERM

# the dtrain processes under mpirun (any depth), one per rank: "RANK PID" lines
ranks() {
    pids=$MPI all=""
    while [ -n "$pids" ]; do
        next=""
        for p in $pids; do
            for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do next="$next $c"; done
        done
        all="$all $next"
        pids=$next
    done
    for p in $all; do
        [ "$(cat /proc/"$p"/comm 2>/dev/null)" = dtrain ] || continue
        r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
        [ -n "$r" ] && echo "$r $p"
    done | sort -n
}

# wait for the 4 ranks
i=0
while [ "$(ranks | wc -l)" -lt 4 ]; do
    sleep 1
    i=$((i + 1))
    kill -0 "$MPI" 2>/dev/null || { echo "soak.sh: the run ended early:" >&2; cat "$LOG" >&2; exit 1; }
    [ "$i" -lt 120 ] || { echo "soak.sh: the 4 ranks did not start" >&2; exit 1; }
done
RANKS=$(ranks)
echo "soak: $STEPS steps of tiny, ps-async, 3 workers + 1 server; VmRSS every $INTERVAL s (MiB)"
echo "$RANKS" | while read -r r p; do echo "  rank $r: pid $p"; done
echo "seconds,rank0,rank1,rank2,rank3" >"$CSV"
t0=$(date +%s)
while kill -0 "$MPI" 2>/dev/null; do
    line=$(($(date +%s) - t0))
    ok=1
    for p in $(echo "$RANKS" | awk '{ print $2 }'); do
        kb=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$p/status" 2>/dev/null)
        [ -n "$kb" ] || { ok=0; break; }
        line="$line,$(awk -v k="$kb" 'BEGIN { printf "%.2f", k / 1024 }')"
    done
    [ "$ok" = 1 ] || break # a rank has exited: the run is ending
    echo "$line" >>"$CSV"
    echo "$line" | tr ',' ' '
    sleep "$INTERVAL"
done
wait "$MPI"
rc=$?
trap 'rm -f "$LOG"' EXIT HUP INT TERM
grep -E '^(final|done|parallel):' "$LOG"
if [ "$rc" -ne 0 ]; then
    echo "soak.sh: the run failed (exit $rc):" >&2
    tail -n 20 "$LOG" >&2
    exit 1
fi
awk -F, 'NR > 1 { n++; for (r = 2; r <= 5; r++) v[n, r] = $r; t[n] = $1 }
END {
    if (n < 3) { print "soak.sh: fewer than 3 samples (a longer run or a shorter interval)" > "/dev/stderr"; exit 1 }
    mid = int((n + 1) / 2)
    printf "\n%-6s %10s %10s %10s %12s %14s\n", "rank", "start", "middle", "end", "growth", "2nd half"
    printf "%-6s %10s %10s %10s %12s %14s\n", "", "(" t[1] " s)", "(" t[mid] " s)", "(" t[n] " s)", "(MiB)", "(MiB)"
    bad = 0
    for (r = 2; r <= 5; r++) {
        g = v[n, r] - v[1, r]; h = v[n, r] - v[mid, r]
        printf "%-6d %10.2f %10.2f %10.2f %+12.2f %+14.2f\n", r - 2, v[1, r], v[mid, r], v[n, r], g, h
        if (h > 2.0) bad = 1
    }
    print (bad ? "GROWING: some rank gained more than 2 MiB over the second half" : "flat: no rank gained more than 2 MiB over the second half")
    exit bad
}' "$CSV"
