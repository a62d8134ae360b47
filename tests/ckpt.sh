#!/bin/sh
# ckpt.sh: checkpoints and exact resume (docs/checkpoints.md), run by `make
# check`. Tiny model, a few steps per run.
#
# 1. Exact resume: for every layout, a run of N+M steps saving at N and at
#    the end (A), and a run resumed from A's checkpoint of step N saving its
#    end (B), must end bit-identical: every shard file of B's last
#    checkpoint equals A's byte for byte (weights, optimizer moments and
#    step, FP32 masters, loss-scaler state, iteration), the summaries agree
#    on param_probe, train_loss, iterations (and the loss scaler's counters),
#    and the log lines of steps N+1..N+M (loss, lr, grad_norm) are the same.
#    Layouts: one process (adamw; sgd; a first part with a smaller
#    --train-iters), --fp16 (the dynamic scaler skips step 1, grows in step 4
#    only if its clean-step count crossed the save after step 3, backs off in
#    step 5), --bf16, mlp-bn (BatchNorm statistics), and under mpirun: data
#    parallel (ring, 2 ranks), ZeRO-1 (fp32 and fp16, 2 ranks), ps-sync (2
#    workers, 1 server), pipeline gpipe and 1f1b (p = 2; 1f1b also with
#    --fp16, its scaler shared by the stages), tensor parallel (t = 2; also
#    bf16 with full recomputation), t x d = 2 x 2. ps-async is not deterministic run to run: it is
#    only checked to resume at the saved iteration and finish.
# 2. Refusals: pipedream with --save; a checkpoint of another model
#    (hidden_size 64 vs 32; an untied head loaded tied), of another world size,
#    a missing directory; before any step: a --save that is a file or under
#    one, a --summary in a missing directory, a save directory whose lock
#    another job holds (flock(1) on DIR/dtrain.lock); a --data file changed
#    since the save (and --allow-data-change resuming on it); under mpirun,
#    a refusal every rank finds alike (another world size, another layout)
#    is one "dtrain: " line per job, not one per rank.
# 3. The kill test: a run with --save-interval 1 is killed with SIGKILL at
#    random moments (during steps and during saves) KILLS times in a row,
#    restarting with --load each time; every restart must load a valid
#    checkpoint no older than one save interval before the last step the
#    killed run logged, and the run, once complete, must end byte-identical
#    to an uninterrupted one. CKPT_KILLS (default 15), CKPT_KILL_ITERS (80),
#    CKPT_KILL_MAX (0.35 s: the latest moment) and CKPT_SEED change it; a
#    longer run: CKPT_KILLS=200 CKPT_KILL_ITERS=1200 tests/ckpt.sh.
# 4. Readers during pruning (issue 34, D9): while a run saves every step
#    with --save-keep 1, READERS runs of --load --generate load from the
#    same directory one after another; every one must succeed (a reader
#    holds the checkpoint it chose with a shared flock, and pruning skips a
#    held checkpoint until the next save). CKPT_READERS (default 20).
# The multi-rank parts need MPI (skipped without it); the rest always runs.

TEST=ckpt.sh
BUILDDIR=${DT_BUILDDIR:-.}
if "$BUILDDIR/tests/check_comm" --have-mpi 2>/dev/null | grep -q yes; then
    HAVE_MPI=1
    . "${DT_SRCDIR:-.}/tests/mpi-lib.sh"
else
    HAVE_MPI=0
    set -u
    LC_ALL=C
    export LC_ALL
    DTRAIN=$BUILDDIR/dtrain
    [ -x "$DTRAIN" ] || { echo "$TEST: $DTRAIN not found (set DT_BUILDDIR)" >&2; exit 99; }
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-$TEST.XXXXXX") || exit 99
    trap 'rm -rf "$TMP"' EXIT HUP INT TERM
    failures=0
    fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
    key() { sed -n "s/^ *\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1" | head -n 1; }
    echo "$TEST: this build has no MPI: the multi-rank layouts are skipped"
fi
KILLS=${CKPT_KILLS:-15}

N=3 M=3
COMMON="--train-iters $((N + M)) --lr-decay-iters $((N + M)) --lr-warmup-iters 2 --eval-iters 1 --eval-interval 0 \
--log-interval 1 --threads 1"
GPT="--task add --task-digits 2 --seq-length 16"

# launch NP ARGS...: dtrain alone (NP 1) or under mpirun
launch() {
    np=$1; shift
    if [ "$np" = 1 ]; then timeout 120 "$DTRAIN" "$@"; else timeout 120 $MPIRUN -np "$np" "$DTRAIN" "$@"; fi
}
# steps FILE: the log lines of steps N+1.. without the timing ("iter k/T loss X lr Y grad_norm Z ...")
steps() { sed -n 's/^\(iter [0-9]*\/[0-9]*  loss [^ ]*  lr [^ ]*  grad_norm [^ ]*\).*/\1/p' "$1" |
    awk -v n=$N '{ split($2, a, "/"); if (a[1] + 0 > n) print }'; }
sumkeys="param_probe train_loss iterations loss_scale skipped_steps loss_scale_backoffs"

# resume NAME NP ARGS...: A (N+M steps, saves at N and the end), B (from A's step N); compare
resume() {
    name=$1 np=$2; shift 2
    d=$TMP/$name
    if ! launch "$np" $COMMON "$@" --save "$d/A" --save-interval $N --summary "$d/A.json" >"$d.A.out" 2>&1; then
        fail "$name: the uninterrupted run failed:"; tail -n 5 "$d.A.out" >&2; return
    fi
    if ! launch "$np" $COMMON "$@" --load "$d/A/iter_0000000$N" --save "$d/B" --save-interval 100 \
            --summary "$d/B.json" >"$d.B.out" 2>&1; then
        fail "$name: the resumed run failed:"; tail -n 5 "$d.B.out" >&2; return
    fi
    ok=1 n=0
    for f in "$d/A/iter_0000000$((N + M))"/shard-*.bin; do
        n=$((n + 1))
        cmp -s "$f" "$d/B/iter_0000000$((N + M))/${f##*/}" || { fail "$name: ${f##*/} of the last checkpoint differs"; ok=0; }
    done
    for k in $sumkeys; do
        [ "$(key "$d/A.json" $k)" = "$(key "$d/B.json" $k)" ] ||
            { fail "$name: $k $(key "$d/B.json" $k) after resuming, $(key "$d/A.json" $k) uninterrupted"; ok=0; }
    done
    if [ "$(steps "$d.A.out")" != "$(steps "$d.B.out")" ] || [ -z "$(steps "$d.A.out")" ]; then
        fail "$name: the losses of steps $((N + 1))..$((N + M)) differ:"; steps "$d.A.out" >&2; steps "$d.B.out" >&2; ok=0
    fi
    [ $ok = 1 ] && echo "ok: $name resumes exactly ($n shard(s) byte-identical, param_probe $(key "$d/B.json" param_probe))"
}

# 1. one process
resume single 1 $GPT --micro-batch-size 8
resume sgd 1 $GPT --micro-batch-size 8 --optimizer sgd --lr 0.1
resume fp16 1 $GPT --micro-batch-size 8 --fp16 --initial-loss-scale 131072 --loss-scale-window 3 --hysteresis 1
if [ "$(key "$TMP/fp16/A.json" skipped_steps)" = 0 ] 2>/dev/null; then fail "fp16: no skipped step: the scaler state is not exercised"; fi
resume bf16 1 $GPT --micro-batch-size 8 --bf16
resume mlp-bn 1 --model mlp-bn --task blobs --micro-batch-size 16 --global-batch-size 32
# a first part run with a smaller --train-iters (it may change; the schedule may not)
d=$TMP/part
if launch 1 $COMMON $GPT --micro-batch-size 8 --train-iters $N --save "$d" >"$d.1.out" 2>&1 &&
   launch 1 $COMMON $GPT --micro-batch-size 8 --load "$d" --save "$d" --summary "$d.json" >"$d.2.out" 2>&1 &&
   grep -q "resume: loaded $d/iter_0000000$N at iteration $N" "$d.2.out"; then
    if cmp -s "$d/iter_0000000$((N + M))/shard-00000.bin" "$TMP/single/A/iter_0000000$((N + M))/shard-00000.bin"; then
        echo "ok: a run of $N steps continued to $((N + M)) by --load equals the uninterrupted run"
    else
        fail "part: the continued run differs from the uninterrupted one"
    fi
else
    fail "part: the runs failed:"; tail -n 5 "$d.1.out" "$d.2.out" >&2
fi

# 2. refusals
# expect WANT ARGS...: dtrain (one process) must fail with a message containing WANT
expect() {
    want=$1; shift
    timeout 60 "$DTRAIN" "$@" >"$TMP/err.out" 2>&1
    rc=$?
    if [ "$rc" = 0 ] || ! grep -q -- "$want" "$TMP/err.out"; then
        fail "dtrain $*: expected a failure mentioning '$want', got exit $rc:"; cat "$TMP/err.out" >&2
    else
        echo "ok: refused: $(grep -m1 -- "$want" "$TMP/err.out")"
    fi
}
expect "hidden_size 64 vs 32" $COMMON $GPT --micro-batch-size 8 --hidden-size 32 --load "$TMP/single/A"
expect "untie_embeddings_and_output_weights true vs false" $COMMON $GPT --micro-batch-size 8 \
    --tie-embeddings-and-output-weights --load "$TMP/single/A"
expect "no such directory" $COMMON $GPT --micro-batch-size 8 --load "$TMP/nowhere"
expect "lr_decay_iters 6 vs 9" $GPT --micro-batch-size 8 --lr-warmup-iters 2 --train-iters 9 --load "$TMP/single/A"
expect "--save-interval: needs --save" --save-interval 2
# expect_one WANT STATUS ARGS...: dtrain (one process) fails before any step with exit STATUS and
# exactly one stderr line containing WANT
expect_one() {
    want=$1 status=$2; shift 2
    timeout 60 "$DTRAIN" "$@" >"$TMP/one.out" 2>"$TMP/one.err"
    rc=$?
    if [ "$rc" != "$status" ] || [ "$(wc -l <"$TMP/one.err")" != 1 ] || ! grep -q -F -- "$want" "$TMP/one.err" ||
        grep -q '^iter ' "$TMP/one.out"; then
        fail "dtrain $*: expected exit $status and one line with '$want' before any step, got exit $rc:"
        cat "$TMP/one.err" "$TMP/one.out" >&2
    else
        echo "ok: refused at the start: exit $rc: $(cat "$TMP/one.err")"
    fi
}
# output paths are checked before any training (a --save that is a file, a --summary in no directory)
: >"$TMP/a-file"
expect_one "--save $TMP/a-file: exists and is not a directory" 1 $COMMON $GPT --micro-batch-size 8 --save "$TMP/a-file"
expect_one "--save $TMP/a-file/sub: $TMP/a-file is not a directory" 1 $COMMON $GPT --micro-batch-size 8 \
    --save "$TMP/a-file/sub"
expect_one "--summary $TMP/nowhere/s.json: directory $TMP/nowhere" 1 $COMMON $GPT --micro-batch-size 8 \
    --summary "$TMP/nowhere/s.json"
# --load after the --data file changed (same size, one byte): refused unless --allow-data-change
awk 'BEGIN { for (i = 0; i < 100; i++) print "the quick brown fox jumps over the lazy dog " i }' >"$TMP/d.txt"
DC="$COMMON --data $TMP/d.txt --seq-length 16 --micro-batch-size 8"
if launch 1 $DC --train-iters $N --save "$TMP/dck" >"$TMP/dck.out" 2>&1; then
    sed 's/lazy dog 7$/LAZY dog 7/' "$TMP/d.txt" >"$TMP/d2.txt" && mv "$TMP/d2.txt" "$TMP/d.txt"
    expect_one "--data $TMP/d.txt changed since the checkpoint" 1 $DC --load "$TMP/dck"
    if launch 1 $DC --load "$TMP/dck" --allow-data-change >"$TMP/dck.2.out" 2>&1 &&
        grep -q "resuming on it (--allow-data-change)" "$TMP/dck.2.out"; then
        echo "ok: --allow-data-change resumes on the changed file, with a warning"
    else
        fail "--allow-data-change:"; tail -n 5 "$TMP/dck.2.out" >&2
    fi
else
    fail "--data --save (setup):"; tail -n 5 "$TMP/dck.out" >&2
fi
# a save directory held by another job (util-linux flock(1) on its lock file, as a lingering rank holds it)
if command -v flock >/dev/null 2>&1; then
    mkdir -p "$TMP/locked"
    echo "otherhost:4242" >"$TMP/locked/dtrain.lock"
    (flock -n 9 || exit 1; exec sleep 60) 9>>"$TMP/locked/dtrain.lock" &
    holder=$!
    sleep 0.5
    expect_one "--save $TMP/locked: in use by another job ($TMP/locked/dtrain.lock held by otherhost:4242)" 1 \
        $COMMON $GPT --micro-batch-size 8 --save "$TMP/locked"
    kill "$holder" 2>/dev/null
    wait "$holder" 2>/dev/null
    ls "$TMP/locked" | grep -q '^iter_' && fail "--save $TMP/locked: saved while another job held the lock"
else
    echo "skip: the save-directory lock: no flock(1)"
fi

# the multi-rank layouts
if [ "$HAVE_MPI" = 1 ]; then
    resume dp 2 $GPT --micro-batch-size 4 --global-batch-size 8
    resume zero 2 $GPT --micro-batch-size 4 --global-batch-size 8 --use-distributed-optimizer
    resume zero-fp16 2 $GPT --micro-batch-size 4 --global-batch-size 8 --use-distributed-optimizer --fp16 \
        --initial-loss-scale 131072 --loss-scale-window 3 --hysteresis 1
    resume zero2 2 $GPT --micro-batch-size 4 --global-batch-size 8 --zero-stage 2 --bucket-size-mb 0.05
    resume zero3-fp16 3 $GPT --micro-batch-size 4 --global-batch-size 12 --zero-stage 3 --fp16 \
        --initial-loss-scale 131072 --loss-scale-window 3 --hysteresis 1
    resume ps-sync 3 $GPT --micro-batch-size 4 --global-batch-size 8 --allreduce ps-sync
    resume gpipe 2 $GPT --micro-batch-size 2 --global-batch-size 8 --pipeline-model-parallel-size 2 --pipeline-schedule gpipe
    resume 1f1b 2 $GPT --micro-batch-size 2 --global-batch-size 8 --pipeline-model-parallel-size 2 --pipeline-schedule 1f1b
    resume 1f1b-fp16 2 $GPT --micro-batch-size 2 --global-batch-size 8 --pipeline-model-parallel-size 2 \
        --pipeline-schedule 1f1b --fp16 --initial-loss-scale 131072 --loss-scale-window 3 --hysteresis 1
    resume tp 2 $GPT --micro-batch-size 4 --global-batch-size 8 --tensor-model-parallel-size 2
    resume tp-bf16-full 2 $GPT --micro-batch-size 4 --global-batch-size 8 --tensor-model-parallel-size 2 --bf16 \
        --recompute-granularity full
    resume tp2dp2 4 $GPT --micro-batch-size 2 --global-batch-size 8 --tensor-model-parallel-size 2
    resume pp2dp2-zero-bf16 4 $GPT --micro-batch-size 2 --global-batch-size 8 --pipeline-model-parallel-size 2 \
        --use-distributed-optimizer --bf16
    # ZeRO-2/3 of each stage (tensor shard) over its data group (issue 36)
    resume pp2dp2-zero3-tied 4 $GPT --micro-batch-size 2 --global-batch-size 8 --pipeline-model-parallel-size 2 \
        --zero-stage 3 --tie-embeddings-and-output-weights
    resume tp2dp2-zero2-bf16 4 $GPT --micro-batch-size 2 --global-batch-size 8 --tensor-model-parallel-size 2 \
        --zero-stage 2 --bf16
    # ps-async: resumes at the saved iteration and trains to the end
    d=$TMP/async
    if launch 3 $COMMON $GPT --micro-batch-size 4 --global-batch-size 8 --allreduce ps-async --save "$d" --save-interval $N \
            >"$d.1.out" 2>&1 &&
       launch 3 $COMMON $GPT --micro-batch-size 4 --global-batch-size 8 --allreduce ps-async --load "$d/iter_0000000$N" \
            --summary "$d.json" >"$d.2.out" 2>&1 &&
       grep -q "resume: loaded .*iter_0000000$N at iteration $N" "$d.2.out" && [ "$(key "$d.json" iterations)" = $((N + M)) ]; then
        echo "ok: ps-async resumes at iteration $N and trains to $((N + M)) (train_loss $(key "$d.json" train_loss))"
    else
        fail "ps-async resume:"; tail -n 5 "$d.1.out" "$d.2.out" >&2
    fi
    expect_error "pipedream: not supported" 2 $COMMON $GPT --micro-batch-size 2 --global-batch-size 8 \
        --pipeline-model-parallel-size 2 --pipeline-schedule pipedream --save "$TMP/pd"
    expect_error "shard count differs from the world" 2 $COMMON $GPT --micro-batch-size 4 --global-batch-size 8 \
        --load "$TMP/single/A"
    # a refusal every rank finds alike is one line per job (rank 0's), not one per rank, and no hang:
    # dp's 2-rank checkpoint into 4 ranks, and into a tensor-parallel layout
    # once NP WANT ARGS...: mpirun -np NP dtrain ARGS fails within 60 s with exactly one "dtrain: " line holding WANT
    once() {
        np=$1 want=$2; shift 2
        timeout 60 $MPIRUN -np "$np" "$DTRAIN" "$@" >"$TMP/once.out" 2>"$TMP/once.err"
        rc=$?
        lines=$(grep -c '^dtrain: ' "$TMP/once.err")
        if [ "$rc" = 0 ] || [ "$rc" -ge 124 ] || [ "$lines" != 1 ] || ! grep -q -F -- "$want" "$TMP/once.err"; then
            fail "dtrain $* (-np $np): expected a failure with one 'dtrain: ' line holding '$want', got exit $rc, $lines:"
            cat "$TMP/once.err" >&2
        else
            echo "ok: -np $np: exit $rc, one line: $(grep '^dtrain: ' "$TMP/once.err")"
        fi
    }
    once 4 "2 shards (a world of 2 ranks), this run has 4 ranks" $COMMON $GPT --micro-batch-size 2 \
        --global-batch-size 8 --load "$TMP/dp/A/iter_0000000$N"
    once 2 "data_parallel_size 2 vs 1" $COMMON $GPT --micro-batch-size 4 --global-batch-size 8 \
        --tensor-model-parallel-size 2 --load "$TMP/dp/A/iter_0000000$N"
fi

# 3. the kill test
K=$TMP/kill
KITERS=${CKPT_KILL_ITERS:-240}
KMAX=${CKPT_KILL_MAX:-0.35}
KARGS="--task add --task-digits 2 --seq-length 16 --micro-batch-size 32 --train-iters $KITERS --lr-warmup-iters 4 \
--eval-iters 1 --eval-interval 0 --log-interval 1 --threads 1 --save-interval 1 --save-keep 2"
# has_ckpt: the run's directory holds a checkpoint or latest (a restart then passes --load)
has_ckpt() { [ -f "$K/run/latest" ] || ls "$K/run" 2>/dev/null | grep -q '^iter_[0-9]*$'; }
# check_restart FILE LOADED: the restart (LOADED 1: with --load) against the steps logged before:
# at most one step (the save interval) lost
check_restart() {
    if [ "$2" = 1 ]; then
        got=$(sed -n 's/^resume: loaded .* at iteration \([0-9]*\)$/\1/p' "$1")
        [ -n "$got" ] || return 0 # killed before it had loaded: the next restart checks
    else
        got=0
    fi
    lost=$((logged - got))
    # lost <= 0: the checkpoint is at or ahead of the last logged step (a kill after a save and before
    # its log line, or during the final save and evaluation: nothing lost); more than 1: work beyond
    # the save interval was lost; beyond --train-iters: impossible
    if [ "$lost" -gt 1 ] || [ "$got" -gt "$KITERS" ]; then
        fail "kill test: $logged step(s) logged before, the restart resumes at iteration $got"
    else
        survived=$((survived + pending))
        [ "$lost" -gt "$lost_max" ] && lost_max=$lost
        [ "$lost" -lt 0 ] && echo "  restart after kill $i: resumed at $got, ahead of the $logged steps logged (nothing lost)"
        note=$(sed -n 's/.*warning: --load [^:]*: \(.*\)/\1/p' "$1" | head -n 1)
        [ -n "$note" ] && echo "  restart after kill $i: $note"
    fi
    pending=0
}
if ! timeout 120 "$DTRAIN" $KARGS --save "$K/ref" >"$K.ref.out" 2>&1; then
    fail "kill test: the uninterrupted run failed:"; tail -n 5 "$K.ref.out" >&2
else
    seed=${CKPT_SEED:-$$}
    t_run=$(awk '/^done:/ { print $5 }' "$K.ref.out")
    # the moments: uniform in [10 ms, KMAX] after each start
    awk -v s="$seed" -v n="$KILLS" -v t="$KMAX" 'BEGIN { srand(s); for (i = 0; i < n; i++) printf "%.3f\n", 0.01 + rand() * (t - 0.01) }' \
        >"$K.moments"
    echo "kill test: $KILLS kills with SIGKILL, $KITERS steps saving every step (CKPT_SEED=$seed; the run alone: $t_run s)"
    survived=0 lost_max=0 pending=0 logged=0 i=0 late=0
    while read -r moment; do
        i=$((i + 1))
        set -- $KARGS --save "$K/run"
        loaded=0
        if has_ckpt; then set -- "$@" --load "$K/run"; loaded=1; fi
        "$DTRAIN" "$@" >"$K.$i.out" 2>&1 &
        pid=$!
        sleep "$moment"
        kill -9 "$pid" 2>/dev/null
        { wait "$pid"; } 2>/dev/null
        rc=$?
        if [ "$rc" != 137 ] && ! grep -q '^done:' "$K.$i.out"; then
            fail "kill test: run $i exited with $rc by itself:"; tail -n 5 "$K.$i.out" >&2
            break
        fi
        check_restart "$K.$i.out" $loaded
        l=$(sed -n 's/^iter \([0-9]*\)\/.*/\1/p' "$K.$i.out" | tail -n 1)
        [ -n "$l" ] && logged=$l
        if grep -q '^done:' "$K.$i.out"; then late=$((late + 1)); i=$((i - 1)); break; fi
        pending=$((pending + 1))
        echo "  kill $i at $moment s: last step logged $logged"
    done <"$K.moments"
    set -- $KARGS --save "$K/run"
    loaded=0
    if has_ckpt; then set -- "$@" --load "$K/run"; loaded=1; fi
    if ! timeout 120 "$DTRAIN" "$@" >"$K.final.out" 2>&1; then
        fail "kill test: the final run failed:"; tail -n 5 "$K.final.out" >&2
    else
        check_restart "$K.final.out" $loaded
        last=$(printf 'iter_%08d' "$KITERS")
        if cmp -s "$K/ref/$last/shard-00000.bin" "$K/run/$last/shard-00000.bin"; then
            echo "ok: kill test: $survived of $i kill(s) survived, at most $lost_max step(s) lost per kill (the save" \
                 "interval is 1); the completed run equals the uninterrupted one byte for byte"
            [ "$late" = 0 ] || echo "  (run $i had finished before its kill: raise CKPT_KILL_ITERS for more kills)"
        else
            fail "kill test: the final checkpoint differs from the uninterrupted run's"
        fi
    fi
fi

# 4. readers while a run prunes every step
R=$TMP/readers
READERS=${CKPT_READERS:-20}
timeout 300 "$DTRAIN" $COMMON $GPT --micro-batch-size 8 --train-iters 100000 --lr-decay-iters 100000 \
    --save-interval 1 --save-keep 1 --save "$R" >"$R.train.out" 2>&1 &
trainer=$!
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do [ -s "$R/latest" ] && break; sleep 0.5; done
failed_reads=0
i=0
while [ "$i" -lt "$READERS" ]; do
    i=$((i + 1))
    if ! timeout 60 "$DTRAIN" --load "$R" --generate 2 --prompt 12 >"$R.gen.out" 2>"$R.gen.err"; then
        failed_reads=$((failed_reads + 1))
        echo "  reader $i failed: $(head -c 300 "$R.gen.err")" >&2
    fi
done
kill "$trainer" 2>/dev/null
wait "$trainer" 2>/dev/null
saves=$(grep -c '^checkpoint: iteration' "$R.train.out")
if [ "$failed_reads" = 0 ] && [ "$saves" -gt "$READERS" ]; then
    echo "ok: readers: $READERS loads while $saves saves pruned with --save-keep 1, none failed"
elif [ "$failed_reads" = 0 ]; then
    fail "readers: only $saves saves during $READERS loads: the saving run did not run alongside ($(tail -n 2 "$R.train.out"))"
else
    fail "readers: $failed_reads of $READERS loads failed while a run saved with --save-keep 1"
fi

[ "$failures" = 0 ] || { echo "$TEST: $failures failure(s)" >&2; exit 1; }
echo "$TEST: all checks passed"
