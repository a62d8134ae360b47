# trace-spans.awk: the spans a `dtviz --zoom A:B` picture shows, as numbers,
# so that a caption's claims about the picture can be checked against the
# trace it is drawn from (the tutorials' check.sh and figures.sh).
#
#   awk -v from=A -v to=B -f tests/trace-spans.awk [all=1] TRACE.rank0.json TRACE.rank1.json ...
#
# The files are one run's traces (a real run's rank files in rank order, or
# one dtsim trace); from and to default to 0 and 1. As dtviz does
# (viz/trace_model.c), the ranks' clocks are aligned on the end of step 0
# (the latest end of a span of iter 0 other than `evaluate`; every rank
# shifted onto rank 0's), the trace's extent runs from its first event to
# the last end, and the window is the part from..to of that extent.
# Prints, tab-separated, a first line
#   window  T0  T1  EXTENT              (ns)
# then one line per complete span ("ph":"X") that overlaps the window
# (with all=1: every complete span):
#   pid  tid  name  start  end  iter  micro_batch  layer  inside  step  version
# with times in ns after alignment, inside 1 when the span lies wholly in
# the window (else 0), step a collective's step, version a PipeDream
# weight version, and -1 for an arg the span lacks. POSIX awk.

function num(key,    s) {
    if (!match($0, "\"" key "\":-?[0-9][0-9.eE+-]*")) return -1
    s = substr($0, RSTART, RLENGTH)
    sub(/^"[a-z_]*":/, "", s)
    return s + 0
}
BEGIN { OFS = "\t"; if (from == "") from = 0; if (to == "") to = 1 }
FNR == 1 { file++; step0[file] = "" }
/"ph":"M"/ || !/"ph":/ { next }
{
    n++
    fi[n] = file
    if (match($0, /"name":"[^"]*"/)) nm[n] = substr($0, RSTART + 8, RLENGTH - 9); else nm[n] = ""
    ph = /"ph":"X"/
    x[n] = ph
    ts[n] = num("ts") * 1000
    en[n] = ts[n] + (ph ? num("dur") * 1000 : 0)
    pid[n] = num("pid"); tid[n] = num("tid")
    it[n] = num("iter"); mb[n] = num("micro_batch"); ly[n] = num("layer")
    st[n] = num("step"); ve[n] = num("version")
    if (ph && it[n] == 0 && nm[n] != "evaluate" && (step0[file] == "" || en[n] > step0[file])) step0[file] = en[n]
}
END {
    aligned = file == 1 || step0[1] != ""
    for (f = 1; f <= file; f++) shift[f] = (aligned && step0[f] != "" && step0[1] != "") ? step0[1] - step0[f] : 0
    first = 1
    for (i = 1; i <= n; i++) {
        ts[i] += shift[fi[i]]; en[i] += shift[fi[i]]
        if (first || ts[i] < tmin) tmin = ts[i]
        if (first || en[i] > tmax) tmax = en[i]
        first = 0
    }
    t0 = tmin + from * (tmax - tmin)
    t1 = tmin + to * (tmax - tmin)
    printf "window\t%.0f\t%.0f\t%.0f\n", t0, t1, tmax - tmin
    for (i = 1; i <= n; i++) {
        if (!x[i] || (!all && (en[i] < t0 || ts[i] > t1))) continue
        printf "%d\t%d\t%s\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\n", pid[i], tid[i], nm[i], ts[i], en[i], it[i], mb[i],
            ly[i], (ts[i] >= t0 && en[i] <= t1), st[i], ve[i]
    }
}
