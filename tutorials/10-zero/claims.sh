# claims.sh: what tutorials/10-zero says of z3.png, as a test over the
# spans a dtviz window shows (tests/trace-spans.awk output); sourced by
# check.sh (make check) and figures.sh (make figures), so both judge the
# picture by one definition.
# all-gather last on the comm row before a block's (or the head's) backward,
# none right before the embedding's, and a reduce-scatter next after every
# backward (counts of those that are not)
t10_order() { awk -F'\t' '$1 == "window" { next }
    { n++; p[n] = $1; t[n] = $2; nm[n] = $3; s[n] = $4; e[n] = $5; ly[n] = $8; w[n] = $9 }
    END { for (i = 1; i <= n; i++) {
              if (!w[i] || t[i] != 0) continue
              if (nm[i] == "forward") { ok = 0
                  for (j = 1; j <= n; j++) if (p[j] == p[i] && nm[j] == "all-gather" && s[j] >= s[i] && s[j] <= e[i]) ok = 1
                  if (!ok) bad++ }
              if (nm[i] == "backward") { nx = 0; pv = 0
                  for (j = 1; j <= n; j++) if (p[j] == p[i] && t[j] == 1) {
                      if (s[j] >= e[i] && (!nx || s[j] < s[nx])) nx = j
                      if (e[j] <= s[i] && (!pv || e[j] > e[pv])) pv = j }
                  if (!nx || nm[nx] != "reduce-scatter") bad++
                  if (ly[i] >= 0 && (!pv || nm[pv] != "all-gather")) bad++
                  if (ly[i] < 0 && pv && nm[pv] == "all-gather") bad++ }
              shown++ }
          print (shown ? bad + 0 : -1) }' "$1"; }
