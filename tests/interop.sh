#!/bin/sh
# interop.sh: models in and out of the Hugging Face format (issue 40;
# docs/interop.md), run by `make check`. Everything here is exact, so
# every comparison is cmp or string equality, no tolerance:
#   - round trip: a model trained a few steps in one process, and on
#     2 ranks as p = 2 and t = 2 (skipped without MPI), is exported
#     (--export-hf) and imported (--load-hf): the prompt's logits
#     (--logits, one forward, float32) are byte-identical and greedy and
#     sampled generations identical. The import computes with the same
#     weights the checkpoint held, so the same forward gives the same
#     floats: any difference is a tensor mis-mapped, mis-transposed or
#     rounded on the way (an F32 export keeps every bit);
#   - the import shards as it loads: the export imported into p = 2,
#     t = 2, t x p = 2 x 2, d = 2 with ZeRO-1 and ZeRO-3, and a parameter
#     server, saved at iteration 0 (--train-iters 0 --save) and exported
#     again gives a byte-identical model.safetensors;
#   - --data with --tokenizer (tests/data/bpe-tiny, 769 tokens) trains:
#     the token cache is written, then read, the loss falls below the
#     uniform ln(769) = 6.645, and --generate decodes with the
#     tokenizer the checkpoint recorded: the same text as with
#     --tokenizer given, and as from its export;
#   - fine-tuning an import with --bf16 and full recomputation starts
#     from the imported model (its first loss near the import's val_loss,
#     measured in the same run, far below an untrained model's 6.6) and
#     lowers the validation loss; the fine-tuned checkpoint generates.
# Besides cmp and string equality, the losses are checked only against
# same-run references or bounds far from rounding (the uniform 6.645).
# POSIX sh.

. "${DT_SRCDIR:-.}/tests/cli-lib.sh"
DTRAIN=$BUILDDIR/dtrain
cli_init interop.sh dtrain "$DTRAIN"
BPE=$SRCDIR/tests/data/bpe-tiny

awk 'BEGIN { for (i = 0; i < 500; i++) printf "abcabd" }' >"$TMP/abd.txt" # 3000 bytes
# seq-length = max positions (16): the export's n_positions is the context of both generations
SMALL="--data $TMP/abd.txt --num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 16
    --max-position-embeddings 16 --micro-batch-size 8 --global-batch-size 8 --lr 0.01 --train-iters 40
    --log-interval 100 --eval-iters 1"
PROMPT=abcabdab

HAVE_MPI=0
if "$BUILDDIR/tests/check_comm" --have-mpi 2>/dev/null | grep -q yes && command -v mpirun >/dev/null 2>&1; then
    HAVE_MPI=1
    . "$SRCDIR/tests/mpi-env.sh"
    MPIRUN="mpirun --oversubscribe --allow-run-as-root"
fi

# gen NAME ARGS...: --generate's output (header dropped) in NAME.txt
gen() {
    g_name=$1
    shift
    "$DTRAIN" "$@" >"$TMP/$g_name.out" 2>"$TMP/$g_name.err" || fail "dtrain $*: $(cat "$TMP/$g_name.err")"
    grep -v '^generate: \|^logits: ' "$TMP/$g_name.out" >"$TMP/$g_name.txt"
}

# roundtrip NAME: checkpoint $TMP/ck-NAME exported, both generate alike
roundtrip() {
    r=$1
    "$DTRAIN" --load "$TMP/ck-$r" --export-hf "$TMP/hf-$r" >"$TMP/exp-$r.out" 2>&1 ||
        { fail "$r: --export-hf: $(cat "$TMP/exp-$r.out")"; return; }
    for s in "--temperature 0" "--temperature 1 --seed 5"; do
        # shellcheck disable=SC2086
        gen "a-$r" --load "$TMP/ck-$r" --generate 30 --prompt $PROMPT $s --logits "$TMP/a-$r.f32"
        # shellcheck disable=SC2086
        gen "b-$r" --load-hf "$TMP/hf-$r" --generate 30 --prompt $PROMPT $s --logits "$TMP/b-$r.f32"
        if cmp -s "$TMP/a-$r.f32" "$TMP/b-$r.f32" && cmp -s "$TMP/a-$r.txt" "$TMP/b-$r.txt" &&
            [ "$(wc -c <"$TMP/a-$r.f32")" -eq $((8 * 256 * 4)) ]; then
            echo "ok: $r: export -> import: logits byte-identical, the same text ($s): $(cat "$TMP/b-$r.txt")"
        else
            fail "$r ($s): checkpoint and export differ: $(cat "$TMP/a-$r.txt") vs $(cat "$TMP/b-$r.txt")"
        fi
    done
}

# shellcheck disable=SC2086
"$DTRAIN" $SMALL --save "$TMP/ck-serial" >"$TMP/serial.out" 2>&1 || fail "training: $(tail -3 "$TMP/serial.out")"
roundtrip serial
if [ "$HAVE_MPI" = 1 ]; then
    for lay in "p2|--pipeline-model-parallel-size 2" "t2|--tensor-model-parallel-size 2"; do
        name=${lay%%|*} fl=${lay#*|}
        # shellcheck disable=SC2086
        timeout 180 $MPIRUN -np 2 "$DTRAIN" $SMALL $fl --save "$TMP/ck-$name" >"$TMP/$name.out" 2>&1 ||
            fail "$name training: $(tail -3 "$TMP/$name.out")"
        roundtrip "$name"
    done
fi

# ---- the import shards as it loads ---------------------------------------------------
HF=$TMP/hf-serial
# into LAYOUT on NP ranks, saved at iteration 0, exported: the same file
into() {
    i_name=$1 np=$2
    shift 2
    rm -rf "$TMP/ck0-$i_name" "$TMP/hf0-$i_name"
    if [ "$np" = 1 ]; then
        "$DTRAIN" --data "$TMP/abd.txt" --load-hf "$HF" --train-iters 0 --eval-iters 1 --save "$TMP/ck0-$i_name" "$@" \
            >"$TMP/i-$i_name.out" 2>&1
    else
        timeout 180 $MPIRUN -np "$np" "$DTRAIN" --data "$TMP/abd.txt" --load-hf "$HF" --train-iters 0 --eval-iters 1 \
            --micro-batch-size 4 --save "$TMP/ck0-$i_name" "$@" >"$TMP/i-$i_name.out" 2>&1
    fi || { fail "--load-hf into $i_name: $(tail -3 "$TMP/i-$i_name.out")"; return; }
    "$DTRAIN" --load "$TMP/ck0-$i_name" --export-hf "$TMP/hf0-$i_name" >/dev/null 2>"$TMP/i-$i_name.err" ||
        { fail "$i_name: export: $(cat "$TMP/i-$i_name.err")"; return; }
    cmp -s "$HF/model.safetensors" "$TMP/hf0-$i_name/model.safetensors" &&
        echo "ok: --load-hf into $i_name ($np rank(s)), saved, exported: model.safetensors byte-identical" ||
        fail "--load-hf into $i_name: the re-export differs from the import"
}
into one 1
if [ "$HAVE_MPI" = 1 ]; then
    into p2 2 --pipeline-model-parallel-size 2
    into t2 2 --tensor-model-parallel-size 2
    into t2xp2 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
    into zero1 2 --use-distributed-optimizer
    into zero3 2 --zero-stage 3
    into ps 3 --allreduce ps-sync --num-ps-servers 1
else
    echo "interop.sh: this build has no MPI (or no mpirun): the p = 2 and t = 2 round trips and imports are skipped"
fi

# ---- --data with --tokenizer ----------------------------------------------------------
cat "$SRCDIR"/docs/architecture.md "$SRCDIR"/docs/interop.md >"$TMP/text.txt"
TOK="--data $TMP/text.txt --tokenizer $BPE --seq-length 32 --micro-batch-size 16 --global-batch-size 16
    --train-iters 40 --lr 0.003 --log-interval 100 --eval-iters 2"
# shellcheck disable=SC2086
"$DTRAIN" $TOK --save "$TMP/ck-bpe" >"$TMP/bpe1.out" 2>&1 || fail "--tokenizer training: $(tail -3 "$TMP/bpe1.out")"
grep -q "^data:  --data $TMP/text.txt: [0-9]* tokens from [0-9]* bytes .*tokenized and cached in $TMP/text.txt.tok-" \
    "$TMP/bpe1.out" && echo "ok: $(grep '^data:  --data' "$TMP/bpe1.out")" || fail "no cache note: $(head -6 "$TMP/bpe1.out")"
grep -q "vocab 769," "$TMP/bpe1.out" || fail "tiny with --tokenizer: not the tokenizer's vocabulary: $(grep '^model' "$TMP/bpe1.out")"
loss=$(sed -n 's/^final: val_loss \([0-9.]*\) .*/\1/p' "$TMP/bpe1.out")
awk -v l="$loss" 'BEGIN { exit !(l > 0 && l < 6.0) }' && echo "ok: BPE training: val_loss $loss < 6.0 (uniform: 6.645)" ||
    fail "BPE training: val_loss '$loss', expected below 6.0"
# shellcheck disable=SC2086
"$DTRAIN" $TOK --train-iters 1 >"$TMP/bpe2.out" 2>&1 || fail "--tokenizer again: $(tail -3 "$TMP/bpe2.out")"
grep -q "read from the cache $TMP/text.txt.tok-" "$TMP/bpe2.out" && echo "ok: the second run reads the cache" ||
    fail "the second run did not read the cache: $(grep '^data' "$TMP/bpe2.out")"
gen bpe-a --load "$TMP/ck-bpe" --generate 20 --prompt "The pipeline" --temperature 0
gen bpe-b --load "$TMP/ck-bpe" --tokenizer "$BPE" --generate 20 --prompt "The pipeline" --temperature 0
grep -q "tokenizer GPT-2 BPE from $BPE (769 tokens); prompt 12 bytes = 3 tokens;" "$TMP/bpe-a.out" ||
    fail "--generate did not take the checkpoint's tokenizer: $(head -1 "$TMP/bpe-a.out")"
"$DTRAIN" --load "$TMP/ck-bpe" --export-hf "$TMP/hf-bpe" >"$TMP/bpe-exp.out" 2>&1 || fail "export: $(cat "$TMP/bpe-exp.out")"
[ -f "$TMP/hf-bpe/vocab.json" ] && [ -f "$TMP/hf-bpe/merges.txt" ] || fail "the export lacks the tokenizer's files"
gen bpe-c --load-hf "$TMP/hf-bpe" --tokenizer "$TMP/hf-bpe" --generate 20 --prompt "The pipeline" --temperature 0 \
    --logits "$TMP/bpe-c.f32"
# without --tokenizer a Hugging Face directory's own tokenizer files are used; --generate 0: the logits alone
gen bpe-d --load-hf "$TMP/hf-bpe" --generate 0 --prompt "The pipeline" --logits "$TMP/bpe-d.f32"
grep -q "tokenizer GPT-2 BPE from $TMP/hf-bpe (769 tokens)" "$TMP/bpe-d.out" && [ "$(cat "$TMP/bpe-d.txt")" = "The pipeline" ] &&
    cmp -s "$TMP/bpe-c.f32" "$TMP/bpe-d.f32" && echo "ok: --generate 0 --logits: the prompt's logits only, the directory's tokenizer" ||
    fail "--generate 0 --logits from the export: $(cat "$TMP/bpe-d.out")"
if cmp -s "$TMP/bpe-a.txt" "$TMP/bpe-b.txt" && cmp -s "$TMP/bpe-a.txt" "$TMP/bpe-c.txt"; then
    echo "ok: BPE generation, the same from the checkpoint, with --tokenizer and from the export: $(cat "$TMP/bpe-a.txt")"
else
    fail "BPE generations differ: '$(cat "$TMP/bpe-a.txt")' '$(cat "$TMP/bpe-b.txt")' '$(cat "$TMP/bpe-c.txt")'"
fi

# ---- fine-tuning an import: bf16, recomputation ------------------------------------
# shellcheck disable=SC2086
"$DTRAIN" --load-hf "$TMP/hf-bpe" $TOK --bf16 --recompute-granularity full --train-iters 40 --log-interval 1 \
    --save "$TMP/ck-ft" >"$TMP/ft.out" 2>&1 || fail "fine-tuning: $(tail -3 "$TMP/ft.out")"
first=$(sed -n 's/^iter 1\/40  loss \([0-9.]*\) .*/\1/p' "$TMP/ft.out")
ft=$(sed -n 's/^final: val_loss \([0-9.]*\) .*/\1/p' "$TMP/ft.out")
# the reference, same run: the import evaluated on the same validation batches before any step
# shellcheck disable=SC2086
"$DTRAIN" --load-hf "$TMP/hf-bpe" $TOK --bf16 --train-iters 0 >"$TMP/ft0.out" 2>&1 || fail "import eval: $(tail -3 "$TMP/ft0.out")"
ref=$(sed -n 's/^final: val_loss \([0-9.]*\) .*/\1/p' "$TMP/ft0.out")
# the import is the 40-step model, not a fresh one (6.6 at step 1): the first training loss is within 0.5 of
# its val_loss (a single batch against the validation mean: 0.11 apart here), and 40 steps lower the
# validation loss (by 0.36 here on the docs of 2026-12-07; 20 steps barely moved it, Adam's fresh moments
# first undoing some of what the import knew); another rounding of bf16 moves it by far less than the
# 0.05 required
awk -v f="$first" -v r="$ref" -v l="$ft" 'BEGIN { exit !(f > 0 && r > 0 && l > 0 && f < r + 0.5 && f > r - 0.5 && l < r - 0.05) }' &&
    echo "ok: fine-tuning the import in bf16 with recomputation: val_loss $ref -> $ft (first step's loss $first)" ||
    fail "fine-tuning: val_loss '$ref' -> '$ft', first loss '$first': expected to start near the import's and fall by 0.05"
gen ft --load "$TMP/ck-ft" --generate 10 --prompt "The pipeline" --temperature 0
[ -s "$TMP/ft.txt" ] || fail "no text from the fine-tuned checkpoint"

cli_finish
