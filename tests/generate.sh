#!/bin/sh
# generate.sh: `dtrain --load DIR --generate N` (dt_sample.h, run by `make
# check`). A small GPT (2 layers, width 32) trains 200 steps on a text made
# here, "abcabd" repeated, where the byte after "ab" depends on what came
# three bytes before; then, from its checkpoint:
#   - greedy (--temperature 0) continues "abcabdab" with "cabdabcabd..."
#     and "abcab" with "dabcab...": the learned pattern, which an untrained
#     or wrongly loaded model does not write (not a rounding-bound figure:
#     every byte of the pattern is determined by the 3 before it, and after
#     200 steps the model gives it a probability near 1 -- val_loss ~0.04,
#     a single ambiguous byte per 16 -- so the argmax leads the next
#     byte by far more than any rounding of the logits);
#   - the same seed twice gives the same text (temperature 1); --top-k 1 at
#     temperature 1 with another seed gives greedy's text; two seeds at
#     temperature 5 give different texts (40 bytes drawn from a flattened
#     distribution: equal by chance with a probability far below 1e-20);
#   - a prompt longer than the context (16) is cropped: it continues as its
#     last 16 bytes do, and the header says so;
#   - bad command lines exit 2 with one line naming the flag (--generate
#     without --load or --prompt, --prompt without --generate, a training
#     flag with --generate, a negative --temperature, --top-k above the
#     vocabulary of 256, an empty --prompt, --generate 0); a missing
#     checkpoint and an mlp-bn one exit 1 with one line.
# Under mpirun (skipped without MPI): a checkpoint of a 2-stage pipeline
# continues the pattern as the serial one does, and so do tensor-parallel
# ones, their slices put back together: t = 2 with the vocabulary split
# (untied, and tied trained 600 steps), t = 2 with --no-vocab-parallel,
# t x p = 2 x 2; ZeRO checkpoints, whose segments are joined back into
# whole tensors (lib/train/generate_zero.c): ZeRO-1 (FP32 and bf16), -2
# and -3 with d = 2, ZeRO-3 with p x d = 2 x 2 and ZeRO-2 with t x d =
# 2 x 2, each against the same layout trained without ZeRO: the same
# greedy text and a byte-identical --export-hf model.safetensors (why
# bit-equal, not merely close: at the block);
# --generate under mpirun -np 2 is refused, -np 1 runs.
# POSIX sh.

. "${DT_SRCDIR:-.}/tests/cli-lib.sh"
DTRAIN=$BUILDDIR/dtrain
cli_init generate.sh dtrain "$DTRAIN"

awk 'BEGIN { for (i = 0; i < 500; i++) printf "abcabd" }' >"$TMP/abd.txt" # 3000 bytes
SMALL="--data $TMP/abd.txt --num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 16
    --micro-batch-size 8 --global-batch-size 8 --lr 0.01 --train-iters 200 --log-interval 100 --eval-iters 1"
# shellcheck disable=SC2086
"$DTRAIN" $SMALL --save "$TMP/ck" >"$TMP/train.out" 2>&1 || { cat "$TMP/train.out" >&2; fail "training failed"; cli_finish; }

# gen NAME ARGS...: dtrain --generate ARGS; the header in NAME.head, the text in NAME.txt
gen() {
    g_name=$1
    shift
    "$DTRAIN" "$@" >"$TMP/$g_name.out" 2>"$TMP/$g_name.err"
    g_rc=$?
    [ "$g_rc" -eq 0 ] || fail "dtrain $*: exit $g_rc: $(cat "$TMP/$g_name.err")"
    [ -s "$TMP/$g_name.err" ] && fail "dtrain $*: wrote to stderr: $(cat "$TMP/$g_name.err")"
    head -n 1 "$TMP/$g_name.out" >"$TMP/$g_name.head"
    tail -n +2 "$TMP/$g_name.out" >"$TMP/$g_name.txt"
}
# expect_text NAME TEXT: NAME's text is exactly TEXT (one line)
expect_text() {
    got=$(cat "$TMP/$1.txt")
    [ "$got" = "$2" ] && echo "ok: $1: $got" || fail "$1: text '$got', expected '$2'"
}

gen greedy --load "$TMP/ck" --generate 12 --prompt abcabdab --temperature 0
expect_text greedy abcabdabcabdabcabdab
grep -q -e "^generate: $TMP/ck/iter_00000200 at iteration 200 (custom, data $TMP/abd.txt, saved by 1 rank: single process), context 16; prompt 8 bytes; temperature 0 (greedy), top-k 0 (all), seed 1337$" "$TMP/greedy.head" ||
    fail "greedy: header '$(cat "$TMP/greedy.head")'"
gen greedy5 --load "$TMP/ck" --generate 10 --prompt abcab --temperature 0
expect_text greedy5 abcabdabcabdabc

# the seed: same seed, same text; top-k 1 is greedy whatever the seed
gen t1a --load "$TMP/ck" --generate 30 --prompt abcab --temperature 1 --seed 7
gen t1b --load "$TMP/ck" --generate 30 --prompt abcab --temperature 1 --seed 7
cmp -s "$TMP/t1a.out" "$TMP/t1b.out" && echo "ok: --seed 7 twice: the same text" ||
    fail "--seed 7 twice: different texts: $(cat "$TMP/t1a.txt") / $(cat "$TMP/t1b.txt")"
gen k1 --load "$TMP/ck" --generate 10 --prompt abcab --temperature 1 --top-k 1 --seed 8
cmp -s "$TMP/k1.txt" "$TMP/greedy5.txt" && echo "ok: --top-k 1 is greedy" ||
    fail "--top-k 1: '$(cat "$TMP/k1.txt")', greedy: '$(cat "$TMP/greedy5.txt")'"
gen hot1 --load "$TMP/ck" --generate 40 --prompt abcab --temperature 5 --seed 1
gen hot2 --load "$TMP/ck" --generate 40 --prompt abcab --temperature 5 --seed 2
cmp -s "$TMP/hot1.txt" "$TMP/hot2.txt" && fail "--temperature 5, seeds 1 and 2: the same text: $(cat "$TMP/hot1.txt")" ||
    echo "ok: --temperature 5: seeds 1 and 2 differ"

# a prompt longer than the context (16): only its last 16 bytes count
long=xyzxyzxyzxyzxyzxyzxyzxyzabcabdabcabdabca # 40 bytes, the last 16: abcabdabcabdabca
gen long --load "$TMP/ck" --generate 8 --prompt "$long" --temperature 0
gen tail --load "$TMP/ck" --generate 8 --prompt "${long#????????????????????????}" --temperature 0
[ "$(sed 's/^.*\(........\)$/\1/' "$TMP/long.txt")" = "$(sed 's/^.*\(........\)$/\1/' "$TMP/tail.txt")" ] &&
    echo "ok: a 40-byte prompt continues as its last 16 bytes: $(cat "$TMP/long.txt")" ||
    fail "cropping: '$(cat "$TMP/long.txt")' vs '$(cat "$TMP/tail.txt")'"
grep -q 'prompt 40 bytes, longer than the context: the model sees its last 16;' "$TMP/long.head" ||
    fail "long prompt header: $(cat "$TMP/long.head")"

# bad command lines: exit 2, one line naming the flag
expect_usage_error "needs --load DIR (a checkpoint) or --load-hf" --generate 5 --prompt ab
expect_usage_error "needs --prompt" --load "$TMP/ck" --generate 5
expect_usage_error "--prompt: needs --generate" --load "$TMP/ck" --prompt ab
expect_usage_error "--top-k: needs --generate" --top-k 3
expect_usage_error "--lr: not used with --generate" --load "$TMP/ck" --generate 5 --prompt ab --lr 0.1
expect_usage_error "--temperature '-1'" --load "$TMP/ck" --generate 5 --prompt ab --temperature -1
expect_usage_error "--top-k 257: expected 0..256" --load "$TMP/ck" --generate 5 --prompt ab --top-k 257
expect_usage_error "--prompt ''" --load "$TMP/ck" --generate 5 --prompt ''
expect_usage_error "--generate 0: only with --logits" --load "$TMP/ck" --generate 0 --prompt ab
# --export-hf (issue 40): its own flags only, a checkpoint required
expect_usage_error "--export-hf: needs --load" --export-hf "$TMP/hf"
expect_usage_error "--lr: not used with --export-hf" --load "$TMP/ck" --export-hf "$TMP/hf" --lr 0.1

# checkpoints it cannot use: exit 1, one line
# expect_fail WORD ARGS...: exit 1, one "dtrain: " line on stderr holding WORD
expect_fail() {
    word=$1
    shift
    run "$@"
    if [ "$rc" -ne 1 ] || [ "$(wc -l <"$TMP/err" | tr -d ' ')" != 1 ] || ! grep -q -F -e "dtrain: " "$TMP/err" ||
        ! grep -q -F -e "$word" "$TMP/err"; then
        fail "dtrain $*: exit $rc, expected 1 with one line naming '$word': $(cat "$TMP/err")"
    else
        echo "ok: dtrain $* -> $(cat "$TMP/err")"
    fi
}
expect_fail "$TMP/none" --load "$TMP/none" --generate 5 --prompt ab
expect_fail "$TMP/none" --load "$TMP/none" --export-hf "$TMP/hf"
"$DTRAIN" --model mlp-bn --train-iters 1 --eval-iters 1 --save "$TMP/ckm" >"$TMP/mlp.out" 2>&1 || fail "mlp-bn training failed"
expect_fail "mlp-bn" --load "$TMP/ckm" --generate 5 --prompt ab

# ---- checkpoints of other layouts, under mpirun --------------------------------
if "$BUILDDIR/tests/check_comm" --have-mpi 2>/dev/null | grep -q yes && command -v mpirun >/dev/null 2>&1; then
    . "$SRCDIR/tests/mpi-env.sh"
    MPIRUN="mpirun --oversubscribe --allow-run-as-root"
    # shellcheck disable=SC2086
    timeout 120 $MPIRUN -np 2 "$DTRAIN" $SMALL --pipeline-model-parallel-size 2 --save "$TMP/ckp" >"$TMP/pp.out" 2>&1 ||
        { cat "$TMP/pp.out" >&2; fail "pipeline training failed"; }
    gen pipe --load "$TMP/ckp" --generate 12 --prompt abcabdab --temperature 0
    expect_text pipe abcabdabcabdabcabdab
    grep -q 'saved by 2 ranks: pipeline/tensor parallel' "$TMP/pipe.head" || fail "pipe header: $(cat "$TMP/pipe.head")"
    for spec in 2:t2 2:t2-tied 2:t2-whole 4:t2p2; do
        np=${spec%%:*} name=${spec#*:}
        case $name in
        t2) fl="--tensor-model-parallel-size 2" ;;
        # tied, the model learns the pattern later: val_loss 0.23 after 200
        # and 400 steps, 0.03 after 600 (one process, this file's model)
        t2-tied) fl="--tensor-model-parallel-size 2 --tie-embeddings-and-output-weights --train-iters 600" ;;
        t2-whole) fl="--tensor-model-parallel-size 2 --no-vocab-parallel" ;;
        t2p2) fl="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2" ;;
        esac
        # shellcheck disable=SC2086
        timeout 180 $MPIRUN -np $np "$DTRAIN" $SMALL $fl --save "$TMP/ck-$name" >"$TMP/$name.out" 2>&1 ||
            { cat "$TMP/$name.out" >&2; fail "$name training failed"; continue; }
        gen $name --load "$TMP/ck-$name" --generate 12 --prompt abcabdab --temperature 0
        expect_text $name abcabdabcabdabcabdab
    done
    # ZeRO (issue 40). Each ZeRO checkpoint is compared with one of the same
    # layout and precision trained without ZeRO: greedy text and
    # --export-hf's model.safetensors, byte for byte. Training is bit-equal
    # here, so any misplaced segment shows: fp32 (or bf16, the FP32 masters
    # rounded alike in both), untied, --clip-grad 0 (the norm crosses the
    # ranks as a float, and no longer scales the update), d = 2 with one
    # micro-batch per rank (4 of a global 8). Then every gradient element is
    # summed over the ranks by one addition of two floats, and
    # a + b == b + a exactly, however a ring (the allreduce, ZeRO's
    # reduce-scatter, each unit's) cuts the buffer; no micro-batches
    # accumulate (ZeRO-2/3 add them after the ranks, plain data
    # parallelism before: docs/zero.md), and the update is elementwise,
    # the same on a segment as on the whole.
    # (With 2 micro-batches per rank, ZeRO-2/3's weights differed from the
    # same layout's without ZeRO by up to 0.03 after 200 steps, and a greedy
    # text can differ too: AdamW turns an ulp on a near-zero gradient
    # element into a step of up to lr.)
    ZD="--micro-batch-size 4 --clip-grad 0"
    # ztrain NAME NP FLAGS...: train on NP ranks into ck-NAME, then generate (NAME.txt) and export (hf-NAME)
    ztrain() {
        z_name=$1 z_np=$2
        shift 2
        # shellcheck disable=SC2086
        timeout 180 $MPIRUN -np "$z_np" "$DTRAIN" $SMALL $ZD "$@" --save "$TMP/ck-$z_name" >"$TMP/$z_name.out" 2>&1 ||
            { cat "$TMP/$z_name.out" >&2; fail "$z_name training failed"; return 1; }
        gen "$z_name" --load "$TMP/ck-$z_name" --generate 12 --prompt abcabdab --temperature 0
        "$DTRAIN" --load "$TMP/ck-$z_name" --export-hf "$TMP/hf-$z_name" >"$TMP/$z_name.hf" 2>&1 ||
            fail "$z_name: --export-hf: $(cat "$TMP/$z_name.hf")"
    }
    # zsame ZERO PLAIN KIND: ZERO's header names KIND; its text and model.safetensors are PLAIN's
    zsame() {
        grep -q "saved by [24] ranks: $3)" "$TMP/$1.head" || fail "$1 header: $(cat "$TMP/$1.head")"
        if cmp -s "$TMP/$1.txt" "$TMP/$2.txt" &&
            cmp -s "$TMP/hf-$1/model.safetensors" "$TMP/hf-$2/model.safetensors"; then
            echo "ok: $1: the text and model.safetensors of $2: $(cat "$TMP/$1.txt")"
        else
            fail "$1: text '$(cat "$TMP/$1.txt")', model.safetensors $(cmp "$TMP/hf-$1/model.safetensors" \
                "$TMP/hf-$2/model.safetensors" 2>&1); $2's: '$(cat "$TMP/$2.txt")'"
        fi
    }
    ztrain dp2 2 && expect_text dp2 abcabdabcabdabcabdab
    for z in 1 2 3; do
        ztrain zero$z 2 --zero-stage $z && zsame zero$z dp2 zero-$z
    done
    ztrain dp2-bf16 2 --bf16 && ztrain zero1-bf16 2 --bf16 --zero-stage 1 && zsame zero1-bf16 dp2-bf16 zero-1
    ztrain p2d2 4 --pipeline-model-parallel-size 2 && expect_text p2d2 abcabdabcabdabcabdab &&
        ztrain p2d2-zero3 4 --pipeline-model-parallel-size 2 --zero-stage 3 &&
        zsame p2d2-zero3 p2d2 "pipeline/tensor parallel"
    ztrain t2d2 4 --tensor-model-parallel-size 2 && expect_text t2d2 abcabdabcabdabcabdab &&
        ztrain t2d2-zero2 4 --tensor-model-parallel-size 2 --zero-stage 2 &&
        zsame t2d2-zero2 t2d2 "pipeline/tensor parallel"

    timeout 60 $MPIRUN -np 2 "$DTRAIN" --load "$TMP/ck" --generate 5 --prompt ab >"$TMP/np2.out" 2>&1
    rc=$?
    n=$(grep -c '^dtrain: ' "$TMP/np2.out")
    [ "$rc" -ne 0 ] && [ "$n" = 1 ] && grep -q 'dtrain: --generate: runs on one process; this job has 2 ranks' "$TMP/np2.out" &&
        echo "ok: mpirun -np 2 --generate refused: $(grep '^dtrain: ' "$TMP/np2.out")" ||
        fail "mpirun -np 2 --generate: exit $rc, $n 'dtrain: ' lines: $(cat "$TMP/np2.out")"
    timeout 60 $MPIRUN -np 1 "$DTRAIN" --load "$TMP/ck" --generate 10 --prompt abcab --temperature 0 >"$TMP/np1.out" 2>&1 ||
        fail "mpirun -np 1 --generate: $(cat "$TMP/np1.out")"
    [ "$(tail -n 1 "$TMP/np1.out")" = abcabdabcabdabc ] && echo "ok: mpirun -np 1 --generate runs" ||
        fail "mpirun -np 1 --generate: $(cat "$TMP/np1.out")"
else
    echo "generate.sh: this build has no MPI (or no mpirun): the pipeline, tensor-parallel and ZeRO checkpoints are skipped"
fi

cli_finish
