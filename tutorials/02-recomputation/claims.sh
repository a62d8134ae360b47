# claims.sh: what tutorials/02-recomputation says of timeline.png, as tests
# over the spans a dtviz window shows (tests/trace-spans.awk output);
# sourced by check.sh (make check) and figures.sh (make figures), so both
# judge the picture by one definition.
# t02_steps SPANS: the mean number of steps in the window (window width
# over the mean distance between optimizer spans)
t02_steps() { awk -F'\t' '$1 == "window" { w = $3 - $2 }
    $3 == "optimizer" { if (!n++) first = $4; last = $4 }
    END { if (n > 1 && w > 0) printf "%.2f", w / ((last - first) / (n - 1)) }' "$1"; }
# t02_late SPANS: recompute spans that end after their block's backward
# starts (or have no backward): the text says each comes right before it
t02_late() { awk -F'\t' '
    $3 == "recompute" { r[$6 " " $7 " " $8] = $5 } $3 == "backward" && $8 >= 0 { b[$6 " " $7 " " $8] = $4 }
    END { for (k in r) if (!(k in b) || r[k] > b[k]) n++; print n + 0 }' "$1"; }
