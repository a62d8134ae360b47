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
step "real run: ps-async, 2 workers + 1 server, worker 1 slowed by 30 ms" \
    $MPIRUN -np 3 "$DTRAIN" --allreduce ps-async --micro-batch-size 16 \
    --train-iters 40 --eval-iters 1 --eval-interval 0 --slow-rank 1:30 --summary ps-async.json --trace ps.json
step "ps.png" "$DTVIZ" ps.json --view ring --png "$FIGDIR/ps.png"
