#!/bin/sh
# badinput.sh: the bad-input catalogue, run by `make check` with DT_BUILDDIR
# (where ./dtrain, ./dtsim, ./dtviz and ./dtbench are) and DT_SRCDIR set.
#
# Every program's inputs with invalid values, table-driven. A table row is
#   EXPECTED_EXIT | WORD_IN_MESSAGE | ARGS...
# (ARGS are read by the shell: quote '' for an empty value; $TMP is this
# run's scratch directory, $O an output directory that must stay empty).
# Each case runs under `timeout 30` and must: exit with EXPECTED_EXIT (2 for
# a bad command line or input, 1 for a documented run-time failure such as
# a missing --data file; docs/errors.md); not crash or hang (exit >= 124, a
# sanitizer report, an assertion); print exactly one line on stderr,
# starting "PROG: " or "PROG SUBCOMMAND: " and holding WORD; and leave $O
# empty (no partial --trace/--summary/--png/--save output). Under mpirun
# (the LAYOUT table: EXPECTED_EXIT | WORD | NP | ARGS) mpirun adds its own
# banner: exactly one "dtrain: " line (rank 0's) is required there.
#
# The numeric tables (FLAG | KIND | EXTRA...) expand to one case per invalid
# value: for every flag non-numeric 'abc', empty '', trailing junk '1x',
# '1e999', 'nan', 'inf' and a leading space; for integers (KIND i) also
# '2.5' and 2^66; for numbers (KIND f) 1e39 (beyond a float); EXTRA lists
# the values the flag's range excludes (negative, zero where invalid, too
# large).
#
# Tables here: dtrain flags and combinations; dtrain --data files; outputs
# over inputs; full disks and address-space limits (every program); dtrain
# layouts under mpirun -np 2..4 (ranks launched with different flags
# among them); dtrain checkpoints (--save/--load, --generate from them,
# links and FIFOs in a save directory) and --comm-timeout. In
# tests/badinput-tools.sh: dtsim flags, configs, traces (--config,
# --profile, --grad-trace), hardware files and absurd sizes; dtviz flags
# and traces; dtbench subcommands' flags and files. The machinery
# (one_case, table, ...) and the shared inputs are in
# tests/badinput-lib.sh. An unreadable (chmod 000) file is checked only
# when not running as root (root reads it anyway).
# POSIX sh. Skips (77) only if the build has no MPI: then the layouts are
# left out and the rest runs.
CATALOGUE=badinput.sh
. "${DT_SRCDIR:-.}/tests/badinput-lib.sh"

# ---- dtrain: numeric flags -----------------------------------------------------------
numeric dtrain "$DTRAIN" --train-iters 0 <<'EOF'
--num-layers | i | -1 0 1025
--hidden-size | i | -1 0 65537
--num-attention-heads | i | -1 0
--max-position-embeddings | i | -1 0 65537
--seq-length | i | -1 0
--task-digits | i | -1 0 10
--task-max-len | i | -1 0 65
--blobs-classes | i | -1 0 1 1025
--blobs-dims | i | -1 0 65537
--blobs-separation | f | -1 0
--bn-momentum | f | -1 1.5
--micro-batch-size | i | -1 0 2147483648
--global-batch-size | i | -1 0
--train-iters | i | -1
--seed | i | -1
--lr | f | -1
--min-lr | f | -1
--lr-warmup-iters | i | -1
--lr-decay-iters | i | -1
--weight-decay | f | -1
--adam-beta1 | f | -1 1
--adam-beta2 | f | -1 1
--adam-eps | f | -1 0
--sgd-momentum | f | -1 1
--lars-eta | f | -1 0
--lamb-gamma-l | f | -1
--lamb-gamma-u | f | -1 0
--clip-grad | f |
--base-batch-size | i | -1 0
--loss-scale | f | -1
--initial-loss-scale | f | -1 0
--loss-scale-window | i | -1 0
--hysteresis | i | -1 0
--min-loss-scale | f | -1 0
--recompute-num-layers | i | -1 0
--num-ps-servers | i | -1 0
--max-staleness | i | -1
--tensor-model-parallel-size | i | -1 0 65
--pipeline-model-parallel-size | i | -1 0 65
--virtual-pipeline-model-parallel-size | i | -1 0
--num-layers-per-virtual-pipeline-stage | i | -1 0
--allreduce-chunk-bytes | i | -1
--bucket-size-mb | f | -1 1048577 1e300
--zero-stage | i | -1 4
--threads | i | -1 1025
--log-interval | i | -1 0
--eval-interval | i | -1
--eval-iters | i | -1 0
EOF

# ---- dtrain: values the parser takes but the configuration refuses --------------------
table dtrain "$DTRAIN" --train-iters 1 --eval-iters 1 <<'EOF'
2 | --use-distributed-optimizer is ZeRO stage 1 | --zero-stage 2 --use-distributed-optimizer
2 | --zero-stage 3: the GPT only | --zero-stage 3 --model mlp-bn --task blobs
2 | --zero-prefetch gathers stage 3's layers ahead | --zero-stage 2 --zero-prefetch
2 | too many tokens | --micro-batch-size 2147483647
2 | --seq-length 65536 | --seq-length 65536
2 | --num-attention-heads 2147483647 | --num-attention-heads 2147483647
2 | --lr-warmup-iters | --lr-warmup-iters 2147483647 --lr-decay-iters 10
2 | --global-batch-size 2147483647 | --global-batch-size 2147483647 --micro-batch-size 2
2 | --pipeline-split | --pipeline-split 1,x
2 | --pipeline-split | --pipeline-split 0,2
2 | --pipeline-split | --pipeline-split -1,3
2 | --pipeline-split | --pipeline-split ''
2 | --pipeline-split | --pipeline-split 99999999999999999999,1
2 | --num-layers-per-virtual-pipeline-stage 3 | --print-schedule --pipeline-model-parallel-size 2 --pipeline-schedule interleaved-1f1b --num-layers 8 --num-layers-per-virtual-pipeline-stage 3
2 | micro-batches per step 3 | --print-schedule --pipeline-model-parallel-size 2 --pipeline-schedule interleaved-1f1b --num-layers 4 --global-batch-size 3 --micro-batch-size 1
2 | zb-v places exactly 2 | --print-schedule --pipeline-model-parallel-size 2 --pipeline-schedule zb-v --num-layers 8 --virtual-pipeline-model-parallel-size 4
2 | --slow-rank | --slow-rank 1
2 | --slow-rank | --slow-rank x:10
2 | --slow-rank | --slow-rank 1:-5
2 | --slow-rank | --slow-rank 1:99999999999
2 | --slow-rank | --slow-rank ''
2 | --max-staleness | --max-staleness 3
2 | --num-ps-servers | --num-ps-servers 2
2 | --allreduce nccl | --allreduce nccl
2 | --loss-scale-window | --loss-scale-window 10
2 | --bn-momentum | --bn-momentum 0.5
2 | --num-attention-heads | --model mlp-bn --num-attention-heads 2
2 | --num-layers 1024 | --model mlp-bn --num-layers 1024
2 | --data | --model mlp-bn --data $TMP/150.txt
2 | --trace | --trace ''
2 | --summary | --summary ''
1 | cannot allocate | --hidden-size 65536 --num-layers 1024 --trace $O/t.json --summary $O/s.json
1 | cannot allocate | --hidden-size 65536 --num-attention-heads 1 --max-position-embeddings 65536 --seq-length 16384 --micro-batch-size 64 --trace $O/t.json
1 | $TMP/dir/no/t.json | --trace $TMP/dir/no/t.json --summary $O/s.json
1 | $TMP/dir/no/s.json | --summary $TMP/dir/no/s.json --trace $O/t.json
EOF

# ---- dtrain --data files ---------------------------------------------------------------
table dtrain "$DTRAIN" --train-iters 1 --eval-iters 1 --trace "$O/t.json" --summary "$O/s.json" <<'EOF'
1 | $TMP/missing.txt | --data $TMP/missing.txt
1 | $TMP/empty | --data $TMP/empty
1 | /dev/null | --data /dev/null
1 | /dev/zero: is a character device, expected a regular file | --data /dev/zero
1 | /dev/urandom: is a character device | --data /dev/urandom
1 | fifo: is a pipe (FIFO), expected a regular file | --data $TMP/fifo
1 | is a directory | --data $TMP/dir
1 | too short | --data $TMP/short.txt
1 | at least 161 bytes | --data $TMP/short.txt
1 | too short for --seq-length 64 | --data $TMP/150.txt --seq-length 64
EOF
# binary junk is text to a byte-level model (vocab 256): it trains (exit 0)
one_case dtrain 0 '' - "$DTRAIN" --train-iters 1 --eval-iters 1 --data "$TMP/junk.bin"
if [ "$(id -u)" -ne 0 ]; then
    one_case dtrain 1 "$TMP/noread.txt" - "$DTRAIN" --train-iters 1 --eval-iters 1 --data "$TMP/noread.txt" \
        --trace "$O/t.json"
else
    echo "skip: --data on a chmod 000 file: running as root, which reads it anyway"
fi

# ---- dtrain: an output that is an input (issue 34, D4) ---------------------------------------
# Refused at the start, exit 2, by device and inode: the same name, a hard
# link or a symbolic link to --data or to a file of --load's checkpoint
# (--trace, --summary), and --data among the names a save to --save
# replaces. Afterwards every input is as it was.
awk 'BEGIN { for (i = 0; i < 40; i++) print "the quick brown fox jumps over the lazy dog" }' >"$TMP/in.txt"
cp "$TMP/in.txt" "$TMP/in.copy"
ln "$TMP/in.txt" "$TMP/in-hard.txt"
ln -s in.txt "$TMP/in-sym.txt"
"$DTRAIN" --train-iters 1 --eval-iters 1 --micro-batch-size 4 --save "$TMP/inck" >"$TMP/setup.out" 2>&1 ||
    { cat "$TMP/setup.out" >&2; fail "dtrain --save (setup) failed"; }
cp -R "$TMP/inck" "$TMP/inck.copy"
ln -s inck/iter_00000001/manifest.json "$TMP/man-sym.json"
# not_input WORD ARGS...: dtrain ARGS is refused (exit 2, WORD) and leaves --data and the checkpoint unchanged
not_input() {
    ni_word=$1
    shift
    one_case dtrain 2 "$ni_word" - "$DTRAIN" --train-iters 1 --eval-iters 1 --micro-batch-size 4 "$@"
    cmp -s "$TMP/in.txt" "$TMP/in.copy" && [ "$TMP/in.txt" -ef "$TMP/in-hard.txt" ] ||
        fail "dtrain $*: changed or replaced --data $TMP/in.txt"
    diff -r "$TMP/inck" "$TMP/inck.copy" >/dev/null || fail "dtrain $*: changed the checkpoint $TMP/inck"
}
not_input "--trace $TMP/in.txt: is the same file as --data $TMP/in.txt" --data "$TMP/in.txt" --trace "$TMP/in.txt"
not_input "--trace $TMP/in-hard.txt: is the same file as --data" --data "$TMP/in.txt" --trace "$TMP/in-hard.txt"
not_input "--trace $TMP/in-sym.txt: is the same file as --data" --data "$TMP/in.txt" --trace "$TMP/in-sym.txt"
not_input "--summary $TMP/in-hard.txt: is the same file as --data" --data "$TMP/in.txt" --summary "$TMP/in-hard.txt"
not_input "--summary $TMP/in-sym.txt: is the same file as --data" --data "$TMP/in.txt" --summary "$TMP/in-sym.txt" \
    --trace "$O/t.json"
not_input "--trace $TMP/inck/latest: is the same file as --load" --load "$TMP/inck" --trace "$TMP/inck/latest"
not_input "manifest.json: is the same file as --load" --load "$TMP/inck" \
    --trace "$TMP/inck/iter_00000001/manifest.json"
not_input "--summary $TMP/man-sym.json: is the same file as --load" --load "$TMP/inck" --summary "$TMP/man-sym.json"
not_input "--trace $TMP/man-sym.json: is the same file as --load" --load "$TMP/inck/iter_00000001" \
    --trace "$TMP/man-sym.json"
not_input "--data $TMP/inck/latest: is in --save" --data "$TMP/inck/latest" --save "$TMP/inck"

# ---- output files on a full disk (/dev/full) and under a file size limit (ulimit -f) ------
# Every output is written whole or not at all (dt_file.h) and the programs
# ignore SIGXFSZ, so both are one line and exit 1, with nothing left in $O
# (neither the file nor its temporary).
if [ -w /dev/full ]; then
    table dtrain "$DTRAIN" --train-iters 1 --eval-iters 1 <<'EOF'
1 | --summary /dev/full: write failed (No space left on device) | --summary /dev/full --trace $O/t.json
1 | /dev/full: write failed: No space left on device | --trace /dev/full --summary $O/s.json
EOF
    # (dtsim writes its trace, whole, before the summary: no --trace with a failing --summary)
    table dtsim "$DTSIM" run <<'EOF'
1 | --summary /dev/full: write failed (No space left on device) | --summary /dev/full
1 | /dev/full: write failed: No space left on device | --trace /dev/full --summary $O/s.json
EOF
fi
LIMITED='ulimit -f 1 && exec "$0" "$@"'
one_case dtrain 1 "write failed" - sh -c "$LIMITED" "$DTRAIN" --train-iters 2 --eval-iters 1 --trace "$O/t.json"
one_case dtrain 1 "--summary $O/s.json: write failed (File too large)" - sh -c "$LIMITED" "$DTRAIN" \
    --train-iters 2 --eval-iters 1 --summary "$O/s.json"
one_case dtsim 1 "write failed" - sh -c "$LIMITED" "$DTSIM" run --pipeline-model-parallel-size 2 \
    --micro-batches 4 --train-iters 2 --trace "$O/t.json"
one_case dtsim 1 "--summary $O/s.json: write failed (File too large)" - sh -c "$LIMITED" "$DTSIM" run \
    --summary "$O/s.json"
# under mpirun (issue 34, D11): the rank files of --trace outgrow a limit
# that lets their headers through; the rank that fails first ends the job
# (MPI_Abort, exit 3) and the others are ended by SIGTERM. None may leave
# its hidden temporary (.t.rank<r>.json.tmp.PID.N) in $O. Both ranks under
# the limit, then only rank 1 (rank 0 is ended mid-run). Every rank
# reports its own failure, and Open MPI may drop the line of a rank it
# ends: the check is the exit status and the abort, not the lines. The
# messages go over TCP: the limit would stop Open MPI's shared memory
# (ftruncate of its segment) at MPI_Init.
if [ "$HAVE_MPI" = 1 ]; then
    MPI_LIMITED='ulimit -f 12 && exec "$0" "$@"'
    for layout in both one; do
        cases=$((cases + 1))
        rm -rf "$O"
        mkdir -p "$O"
        set -- "$DTRAIN" --train-iters 6 --eval-iters 1 --trace "$O/t.json"
        if [ "$layout" = both ]; then
            OMPI_MCA_btl=self,tcp timeout 60 $MPIRUN -np 2 sh -c "$MPI_LIMITED" "$@" \
                >"$TMP/stdout" 2>"$TMP/stderr" </dev/null
        else
            OMPI_MCA_btl=self,tcp timeout 60 $MPIRUN -np 1 "$@" : -np 1 sh -c "$MPI_LIMITED" "$@" \
                >"$TMP/stdout" 2>"$TMP/stderr" </dev/null
        fi
        rc=$?
        what="dtrain under mpirun -np 2, ulimit -f on $layout rank(s), --trace"
        if [ "$rc" -ne 3 ]; then
            fail "$what: exit $rc, expected 3: $(head -c 400 "$TMP/stderr")"
        elif ! grep -q -e "^dtrain: .*writing the trace failed" -e "MPI_ABORT was invoked" "$TMP/stderr"; then
            fail "$what: neither a trace failure nor the abort on stderr: $(head -c 400 "$TMP/stderr")"
        elif [ -n "$(ls -A "$O")" ]; then
            fail "$what: left output behind after the failure: $(ls -A "$O")"
        else
            echo "ok: $what -> exit $rc, $O empty"
        fi
    done
fi

# ---- out of memory under an address-space limit (ulimit -v) (issue 34, D3) ----------------
# OpenBLAS retries a failed allocation of a thread's work buffer for ever
# (its own threads' and each GEMM thread's), and exit() waits for its
# threads: the tiny model spun at 200% CPU after its header, gpt2-124m
# printed its line and never ended. Under each limit a program must end
# within the timeout with exit 0 (the limit was enough) or exit 1 and one
# line naming memory, with OPENBLAS_NUM_THREADS unset (a thread per core)
# and 2. A limit below what the dynamic loader maps ends in ld.so's own
# line and exit 127 before main (how low depends on the build: CUDA's
# libraries take 100 MB): skipped, but each program must meet some limit
# above it. The limits let gpt2-124m's own allocations fail (it needs
# about 2.6 GB). ASan reserves terabytes of shadow memory, so a sanitizer
# build skips these cases.
# oom_case PROG KB ARGS...: PROG ARGS under ulimit -v KB
oom_case() {
    o_prog=$1 o_kb=$2
    shift 2
    o_name=${o_prog##*/}
    cases=$((cases + 1))
    timeout 60 sh -c 'ulimit -v "$0" && exec "$@"' "$o_kb" "$o_prog" "$@" >"$TMP/stdout" 2>"$TMP/stderr" </dev/null
    rc=$?
    what="$o_name $* under ulimit -v $o_kb, OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS-unset}"
    msg=$(cat "$TMP/stderr")
    lines=$(wc -l <"$TMP/stderr" | tr -d ' ')
    if [ "$rc" = 127 ] && grep -q 'error while loading shared libraries' "$TMP/stderr"; then
        echo "ok: $what -> below what the loader maps (skipped)"
        return
    fi
    oom_met="$oom_met $o_name"
    if [ "$rc" = 0 ]; then
        echo "ok: $what -> exit 0 (enough)"
    elif [ "$rc" != 1 ]; then
        fail "$what: exit $rc, expected 0 or 1 (124: a hang): $(head -c 400 "$TMP/stderr")"
    elif [ "$lines" != 1 ]; then
        fail "$what: $lines lines on stderr, expected 1: $msg"
    else
        case $msg in
        "$o_name: "*memory*) echo "ok: $what -> $msg" ;;
        *) fail "$what: expected one line '$o_name: ...memory...': $msg" ;;
        esac
    fi
}
if [ -n "${DT_SANITIZERS:-}" ] || grep -q -a __asan_init "$DTRAIN"; then
    echo "ok: out of memory under ulimit -v: skipped (a sanitizer build reserves terabytes of address space)"
else
    oom_met=
    "$DTSIM" run --train-iters 2 --trace "$TMP/oom.json" >/dev/null 2>&1 || fail "dtsim run --trace oom.json failed"
    for obt in unset 2; do
        if [ "$obt" = unset ]; then unset OPENBLAS_NUM_THREADS; else OPENBLAS_NUM_THREADS=$obt && export OPENBLAS_NUM_THREADS; fi
        for kb in 250000 400000 600000 900000; do
            oom_case "$DTRAIN" $kb --train-iters 1 --eval-iters 1
        done
        for kb in 700000 1300000 1900000; do
            oom_case "$DTRAIN" $kb --model gpt2-124m --micro-batch-size 1 --train-iters 1 --eval-iters 1
        done
        for kb in 15000 40000 100000; do
            oom_case "$DTSIM" $kb run --model gpt2-124m
        done
        for kb in 350000 550000 750000; do
            oom_case "$DTBENCH" $kb gemm --threads 2
        done
        for kb in 700000 1300000; do
            oom_case "$DTBENCH" $kb train --model gpt2-124m --threads 2 --steps 1
        done
        if [ -x "$DTVIZ" ]; then
            unset DISPLAY WAYLAND_DISPLAY
            for kb in 28000 32000 40000; do
                oom_case "$DTVIZ" $kb "$TMP/oom.json" --png "$TMP/oom.png"
            done
        fi
    done
    unset OPENBLAS_NUM_THREADS
    oom_progs="dtrain dtsim dtbench"
    [ -x "$DTVIZ" ] && oom_progs="$oom_progs dtviz"
    for p in $oom_progs; do
        case " $oom_met " in
        *" $p "*) ;;
        *) fail "ulimit -v: every limit was below what the loader maps for $p: nothing was checked" ;;
        esac
    done
fi

# ---- dtrain: parallel layouts under mpirun ---------------------------------------------
if [ "$HAVE_MPI" = 1 ]; then
    mpi_table <<'EOF'
2 | 3 ranks are not a multiple of 2 | 3 | --tensor-model-parallel-size 2
2 | 3 ranks are not a multiple | 3 | --pipeline-model-parallel-size 2
2 | only 2 blocks | 4 | --pipeline-model-parallel-size 4
2 | only 3 blocks | 4 | --pipeline-model-parallel-size 4 --num-layers 3
2 | only 1 blocks | 2 | --pipeline-model-parallel-size 2 --num-layers 1
2 | the model has 4 | 3 | --pipeline-model-parallel-size 3 --num-layers 4 --pipeline-split 1,1,1
2 | expected 2 positive block counts | 2 | --pipeline-model-parallel-size 2 --pipeline-split 2
2 | --global-batch-size 12 | 2 | --micro-batch-size 4 --global-batch-size 12
2 | --global-batch-size 8 | 2 | --pipeline-model-parallel-size 2 --micro-batch-size 3 --global-batch-size 8
2 | --global-batch-size 6 | 4 | --tensor-model-parallel-size 2 --micro-batch-size 4 --global-batch-size 6
2 | does not divide --num-attention-heads 3 | 2 | --tensor-model-parallel-size 2 --num-attention-heads 3 --hidden-size 63
2 | does not divide --num-attention-heads 4 | 3 | --tensor-model-parallel-size 3
2 | does not divide --num-attention-heads 2 | 4 | --tensor-model-parallel-size 4 --num-attention-heads 2
2 | --use-distributed-optimizer | 3 | --allreduce ps-sync --use-distributed-optimizer
2 | --zero-stage 2 with --pipeline-schedule pipedream: not supported | 2 | --zero-stage 2 --pipeline-model-parallel-size 2 --pipeline-schedule pipedream
2 | --zero-prefetch with --tensor-model-parallel-size 2 | 2 | --zero-stage 3 --zero-prefetch --tensor-model-parallel-size 2
2 | --pipeline-schedule zb-v and tied embeddings | 2 | --zero-stage 3 --pipeline-model-parallel-size 2 --pipeline-schedule zb-v --tie-embeddings-and-output-weights --num-layers 4
2 | --zero-stage 3 shards over an allreduce group | 3 | --allreduce ps-sync --zero-stage 3
2 | at least 2 ranks | 1 | --allreduce ps-sync
2 | --num-ps-servers 2 | 2 | --allreduce ps-sync --num-ps-servers 2
2 | --num-ps-servers 3 | 3 | --allreduce ps-async --num-ps-servers 3
2 | --num-ps-servers 4 | 4 | --allreduce ps-async --num-ps-servers 4
2 | with a parameter server | 4 | --allreduce ps-sync --pipeline-model-parallel-size 2
2 | needs a multiple of 4 | 2 | --pipeline-model-parallel-size 2 --pipeline-schedule interleaved-1f1b --num-layers 6
2 | --pipeline-split: not with | 2 | --pipeline-model-parallel-size 2 --pipeline-schedule zb-v --num-layers 4 --pipeline-split 1,3
2 | --slow-rank 5 | 2 | --slow-rank 5:10
2 | --allreduce nccl | 2 | --allreduce nccl
2 | --lr | 3 | --lr -1
2 | --micro-batch-size | 4 | --micro-batch-size 0
1 | $TMP/missing.txt | 2 | --data $TMP/missing.txt --trace $O/t.json
EOF
    # a rank file of --trace (run.json -> run.rank1.json) that is --data (issue 34, D4)
    cp "$TMP/in.txt" "$TMP/run.rank1.json"
    one_case dtrain 2 "--trace $TMP/run.rank1.json: is the same file as --data" 2 "$DTRAIN" --train-iters 1 \
        --eval-iters 1 --data "$TMP/run.rank1.json" --trace "$TMP/run.json"
    cmp -s "$TMP/in.txt" "$TMP/run.rank1.json" || fail "mpirun -np 2 dtrain --trace run.json: overwrote run.rank1.json"
    # ranks launched with different flags (issue 34, D6): MPMD, rank 0 with
    # ARGS0 and rank 1 with ARGS1; one line (rank 0's) naming the first key
    # that differs, exit 2. Per-rank by design: --threads, the paths of
    # --data (the bytes count), --trace, --save, --load.
    # mpmd EXPECT WORD 'ARGS0' 'ARGS1'
    mpmd() {
        m_exp=$1 m_word=$(word_of "$2")
        eval "set -- $3 : -np 1 \"\$DTRAIN\" --train-iters 1 --eval-iters 1 $4"
        one_case dtrain "$m_exp" "$m_word" 1 "$DTRAIN" --train-iters 1 --eval-iters 1 "$@"
    }
    tr 'a-z' 'b-za' <"$TMP/in.txt" >"$TMP/in-other.txt" # the same size, other bytes
    mpmd 2 "rank 1's --seed 2 differs from rank 0's --seed 1" '--seed 1' '--seed 2'
    mpmd 2 "rank 1's --lr 0.02 differs from rank 0's --lr 0.01" '--lr 0.01' '--lr 0.02'
    mpmd 2 "rank 1's --hidden-size 32 differs from rank 0's --hidden-size 64" '--hidden-size 64' '--hidden-size 32'
    mpmd 2 "--data $TMP/in.txt: rank 1's file" '--data $TMP/in.txt' '--data $TMP/in-other.txt'
    mpmd 2 "rank 1's --trace (not given) differs" '--trace $O/t.json' ''
    mpmd 0 '' '--seed 5 --data $TMP/in.txt --threads 1' '--seed 5 --data $TMP/in-hard.txt --threads 2'
else
    echo "skip: the mpirun layouts (this build has no MPI)"
fi

# ---- dtrain: checkpoints and --comm-timeout (when this dtrain has them) ------------------
if "$DTRAIN" --help | grep -q -e '^  --comm-timeout '; then
    numeric dtrain "$DTRAIN" --train-iters 0 <<'EOF'
--comm-timeout | f | -1 1000000001
EOF
fi
if "$DTRAIN" --help | grep -q -e '^  --load '; then
    numeric dtrain "$DTRAIN" --train-iters 0 --save "$TMP/ck-never" <<'EOF'
--save-interval | i | -1 0
--save-keep | i | -1
EOF
    # a good checkpoint of the default tiny model, and damaged copies
    "$DTRAIN" --train-iters 2 --eval-iters 1 --save "$TMP/ck" >"$TMP/setup.out" 2>&1 ||
        { cat "$TMP/setup.out" >&2; fail "dtrain --save (setup) failed"; }
    "$DTRAIN" --train-iters 2 --eval-iters 1 --num-layers 3 --save "$TMP/ck3" >"$TMP/setup.out" 2>&1 ||
        { cat "$TMP/setup.out" >&2; fail "dtrain --num-layers 3 --save (setup) failed"; }
    it=$(ls -d "$TMP/ck"/iter_* 2>/dev/null | tail -n 1)
    big=$(ls -S "$it" 2>/dev/null | head -n 1)
    if [ -n "$it" ] && [ -n "$big" ]; then
        for kind in flip cut zero; do
            rm -rf "$TMP/ck-$kind"
            cp -R "$TMP/ck" "$TMP/ck-$kind"
            f=$TMP/ck-$kind/${it##*/}/$big
            size=$(wc -c <"$f" | tr -d ' ')
            case $kind in
            flip) printf 'XXXXXXXX' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null ;;
            cut) head -c $((size / 2)) "$TMP/ck/${it##*/}/$big" >"$f" ;;
            zero) : >"$f" ;;
            esac
        done
        table dtrain "$DTRAIN" --train-iters 3 --eval-iters 1 --trace "$O/t.json" --summary "$O/s.json" <<'EOF'
1 | $TMP/no-such-ck | --load $TMP/no-such-ck
1 | $TMP/empty | --load $TMP/empty
1 | $TMP/dir | --load $TMP/dir
1 | ck-flip | --load $TMP/ck-flip
1 | ck-cut | --load $TMP/ck-cut
1 | ck-zero | --load $TMP/ck-zero
1 | differ | --load $TMP/ck3
1 | differ | --load $TMP/ck --hidden-size 128 --num-attention-heads 4
EOF
        # --generate (sampling from the good checkpoint): its numbers, and what it cannot load
        numeric dtrain "$DTRAIN" --load "$TMP/ck" --generate 2 --prompt ab <<'EOF'
--generate | i | -1 0 1000001
--temperature | f | -1
--top-k | i | -1 257
EOF
        table dtrain "$DTRAIN" --generate 2 --prompt ab <<'EOF'
1 | $TMP/no-such-ck | --load $TMP/no-such-ck
1 | $TMP/empty | --load $TMP/empty
1 | ck-cut | --load $TMP/ck-cut
2 | --seq-length | --load $TMP/ck --seq-length 8
2 | --save | --load $TMP/ck --save $O/ck
EOF
    else
        fail "dtrain --save wrote no $TMP/ck/iter_*: $(ls -R "$TMP/ck" 2>&1 | head -5)"
    fi

fi
if [ -n "${it:-}" ] && "$DTRAIN" --help | grep -q -e '^  --load '; then
    # Links in a save directory (issue 34, D1/D2): dtrain never writes, truncates or removes through a
    # symbolic link there. Each entry it would remove or replace (a failed save's iter_X.tmp, an iter_X
    # pruned by --save-keep or saved again, latest, dtrain.lock, latest's temporary) is made a link to a
    # victim: the run must refuse with one line naming the link (exit 1) and the victim must be intact.
    # A hard link as dtrain.lock would have its other name overwritten: refused too.
    # link_case NP ENTRY TARGET WORD ARGS...: SAVE/ENTRY -> TARGET, then dtrain --save SAVE ARGS
    link_case() {
        l_np=$1 l_entry=$2 l_target=$3 l_word=$4
        shift 4
        rm -rf "$TMP/victim" "$TMP/lsave" "$TMP/kept"
        mkdir -p "$TMP/victim" "$TMP/lsave"
        echo precious >"$TMP/victim/a"
        cp -R "$TMP/ck/${it##*/}" "$TMP/kept" # a real checkpoint stored elsewhere
        case $l_target in
        hard) ln "$TMP/victim/a" "$TMP/lsave/$l_entry" ;;
        *) ln -s "$l_target" "$TMP/lsave/$l_entry" ;;
        esac
        one_case dtrain 1 "$l_word" "$l_np" "$DTRAIN" --train-iters 2 --eval-iters 1 --save "$TMP/lsave" "$@"
        [ "$(cat "$TMP/victim/a" 2>/dev/null)" = precious ] ||
            fail "dtrain --save with $l_entry -> $l_target: the victim $TMP/victim/a was changed or removed"
        [ -s "$TMP/kept/manifest.json" ] && [ "$(ls "$TMP/kept" | wc -l)" -eq "$(ls "$TMP/ck/${it##*/}" | wc -l)" ] ||
            fail "dtrain --save with $l_entry -> $l_target: the checkpoint it links to ($TMP/kept) was changed"
    }
    link_case - iter_00000099.tmp ../victim "iter_00000099.tmp: is a symbolic link"
    link_case - iter_00000000 ../victim "iter_00000000: is a symbolic link" --save-keep 1
    link_case - iter_00000002 ../kept "iter_00000002: is a symbolic link"
    link_case - latest ../victim/a "latest: is a symbolic link"
    link_case - dtrain.lock ../victim/a "dtrain.lock: is a symbolic link"
    link_case - .latest.tmp.123.0 ../victim/a ".latest.tmp.123.0: is a symbolic link"
    link_case - dtrain.lock hard "a hard link"
    [ "$HAVE_MPI" = 1 ] && link_case 2 iter_00000099.tmp ../victim "iter_00000099.tmp: is a symbolic link"
    # --save naming a dangling link: said so, not "exists and is not a directory"
    ln -s "$TMP/no-such-dir" "$TMP/dangling"
    one_case dtrain 1 "symbolic link to a missing directory" - "$DTRAIN" --train-iters 1 --save "$TMP/dangling"
    # D8: the .latest.tmp.PID.N a killed commit left is removed by the next save
    rm -rf "$TMP/lsave" && mkdir "$TMP/lsave" && echo iter_0 >"$TMP/lsave/.latest.tmp.123.0"
    "$DTRAIN" --train-iters 1 --eval-iters 1 --save "$TMP/lsave" >"$TMP/setup.out" 2>&1 ||
        fail "dtrain --save into a directory with a stale .latest.tmp: $(tail -1 "$TMP/setup.out")"
    [ -e "$TMP/lsave/.latest.tmp.123.0" ] && fail "the next save left the stale $TMP/lsave/.latest.tmp.123.0"
    # D5: latest or manifest.json a FIFO: never waited on. A FIFO latest is skipped (the newest valid
    # checkpoint loads, exit 0); a checkpoint whose manifest is a FIFO is refused with one line.
    rm -rf "$TMP/fck" && cp -R "$TMP/ck" "$TMP/fck" && rm "$TMP/fck/latest" && mkfifo "$TMP/fck/latest"
    one_case dtrain 0 "" - "$DTRAIN" --train-iters 2 --eval-iters 1 --load "$TMP/fck"
    one_case dtrain 0 "" - "$DTRAIN" --generate 2 --prompt ab --load "$TMP/fck"
    rm "$TMP/fck/${it##*/}/manifest.json" && mkfifo "$TMP/fck/${it##*/}/manifest.json"
    one_case dtrain 1 "is a pipe (FIFO)" - "$DTRAIN" --train-iters 2 --eval-iters 1 --load "$TMP/fck/${it##*/}"
    one_case dtrain 1 "is a pipe (FIFO)" - "$DTRAIN" --generate 2 --prompt ab --load "$TMP/fck"
fi

echo "$CATALOGUE: $cases cases, $failures failure(s)"
[ "$failures" -eq 0 ] || exit 1
exit 0
