# claims.sh: what tutorials/00-quickstart says of run.png, as tests over
# the spans a dtviz window shows (tests/trace-spans.awk output); sourced by
# check.sh (make check) and figures.sh (make figures), so both judge the
# picture by one definition.
# t00_steps SPANS: optimizer steps wholly inside the window
t00_steps() { awk -F'\t' '$3 == "optimizer" && $9 { n++ } END { print n + 0 }' "$1"; }
# t00_bf ALLSPANS: backward / forward time over the steps wholly shown
t00_bf() { awk -F'\t' '
    $3 == "optimizer" && $9 { whole[$6] = 1 }
    $3 == "forward" { f[$6] += $5 - $4 } $3 == "backward" { b[$6] += $5 - $4 }
    END { for (i in whole) { sf += f[i]; sb += b[i] } if (sf > 0) printf "%.2f", sb / sf }' "$1"; }
