# figures.sh: tutorials/09-gpus's picture, sourced by docs/figures.sh (make
# figures) in a work directory of its own, with $DTRAIN $DTVIZ $MPIRUN and
# step() and FIGDIR defined. The commands are the README's section 5 and 6.
printf 'localhost slots=2\n' >hosts
step "real run: mpirun -H localhost:2 -np 2 dtrain (shared memory), 50 steps" \
    $MPIRUN -H localhost:2 -np 2 "$DTRAIN" --train-iters 50 --eval-interval 0 --eval-iters 1 --trace sm.json
step "real run: mpirun --hostfile hosts -np 2 --mca btl self,tcp (TCP over loopback), 50 steps" \
    $MPIRUN --hostfile hosts -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo "$DTRAIN" \
    --train-iters 50 --eval-interval 0 --eval-iters 1 --trace tcp.json
step "sm-vs-tcp.png" "$DTVIZ" sm.json tcp.json --zoom 0:0.1 --png "$FIGDIR/sm-vs-tcp.png"
