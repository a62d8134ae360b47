# figures.sh: tutorials/04-data-parallel's pictures, sourced by
# docs/figures.sh (make figures) in a work directory of its own, with
# $DTRAIN $DTVIZ $MPIRUN step() and FIGDIR (this folder) defined.
#   ring4.png  a real 4-rank ring allreduce at the end (ring view): every
#              rank sent 1.5 x S
#   ps.png     a real asynchronous parameter server, worker 1 slowed by
#              30 ms: workers, server and the staleness histogram (ring view)
# The same commands as the README's sections 3 and 6.
step "real run: 4-rank ring, 10 steps" \
    $MPIRUN -np 4 "$DTRAIN" --micro-batch-size 16 --global-batch-size 64 \
    --train-iters 10 --eval-interval 0 --eval-iters 1 --trace ring4.json
step "ring4.png" "$DTVIZ" ring4.json --view ring --png "$FIGDIR/ring4.png"
# the text of ring4.png: every rank sent 821760 bytes (802.5 KiB, 1.5 x S)
# in the last iteration (iter 9, counted from 0)
t04_sent() { grep '"iter":9,' ring4.rank$1.json | grep '"name":"reduce-scatter"\|"name":"all-gather"' |
    sed 's/.*"bytes":\([0-9]*\),.*/\1/' | awk '{ s += $1 } END { print s + 0 }'; }
for t04_r in 0 1 2 3; do
    claim "ring4.png: bytes rank $t04_r sent in the last iteration" "$(t04_sent $t04_r)" 821760 821760
done
step "real run: ps-async, 2 workers + 1 server, worker 1 slowed by 30 ms" \
    $MPIRUN -np 3 "$DTRAIN" --allreduce ps-async --micro-batch-size 16 \
    --train-iters 40 --eval-iters 1 --eval-interval 0 --slow-rank 1:30 --summary ps-async.json --trace ps.json
step "ps.png" "$DTVIZ" ps.json --view ring --png "$FIGDIR/ps.png"
# the README: worker 1's staleness sums to 40 (worker 0's pushes), and the
# mean is (40 + worker 0's sum) / 80, between 0.5 and 1 (check.sh checks the same)
t04_stal() { grep '"push/pull"' ps.rank$1.json | sed 's/.*"staleness":\([0-9]*\).*/\1/' | awk '{ s += $1 } END { print s + 0 }'; }
claim "ps.png: worker 1's staleness summed" "$(t04_stal 1)" 40 40
claim "ps.png: staleness mean" "$(sed -n 's/^ *"staleness_mean": \([-0-9.eE+]*\),*$/\1/p' ps-async.json)" 0.5 1
