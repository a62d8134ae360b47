#!/bin/sh
# check.sh: runs tutorials/14-hf/README.md's commands and checks the
# outputs it quotes. Run by tests/tutorials.sh (make check), or alone:
# DT_BUILDDIR=build DT_SRCDIR=. sh tutorials/14-hf/check.sh
# TUTORIAL_QUICK changes nothing here: every command runs as printed.
# What is exact is matched exactly: the model's sizes, the tokenizer's 769
# tokens and its cache's name, the export's names and shapes, the token
# counts (while the docs the texts come from are the README's, see t14_text),
# and every round trip (cmp: byte-identical logits and files, the same
# text). Losses are compared with references from this same check (the
# text's unigram entropy, ln 769, the model's own val_loss in another
# layout, a fresh model's run), within ranges derived beside them.
# The commands that need the network or Python packages (numpy, torch,
# transformers, huggingface_hub) are recorded as not run, with a note.
# POSIX sh.
TUTORIAL_LIB=1
. "${DT_SRCDIR:-$(dirname "$0")/../..}/tests/tutorials.sh"

# The README's paths are those of a build inside the source tree: docs/,
# tools/ and tests/data/ (its note says to link them the same way)
ln -sf "$SRCDIR/docs" docs
ln -sf "$SRCDIR/tools" tools
mkdir -p tests && ln -sf "$SRCDIR/tests/data" tests/
BPE_CRC=0280e3e9 # tests/data/bpe-tiny's checksum: the caches' suffix
LN769=$(awk 'BEGIN { printf "%.4f", log(769) }')

# t14_not_run WHY LINE...: README command lines this machine cannot run
t14_not_run() {
    why=$1
    shift
    for l in "$@"; do
        echo "$l" >>"$TUT_LOG"
        echo "\$ $l   (not run: $why)"
    done
}
# t14_text NAME BYTES TOKENS: the data note of NAME.out. The texts are the
# source tree's docs, which change: the README's counts (BYTES, TOKENS)
# are checked exactly while the text has the README's BYTES; otherwise
# only that the note's count is the cache's (48-byte header, 2-byte ids)
# and below the byte count (a merge only joins)
t14_text() {
    b=$(tut_num "$1" '^data:  --data [^:]*: [0-9]* tokens from \([0-9]*\) bytes .*')
    k=$(tut_num "$1" '^data:  --data [^:]*: \([0-9]*\) tokens from .*')
    f=$(tut_num "$1" "^data:  --data [^:]*: .* in \\([^ ]*\\.tok-$BPE_CRC\\)\$")
    f=${f:-$(tut_num "$1" "^data:  --data [^:]*: .*read from the cache \\([^ ]*\\.tok-$BPE_CRC\\)\$")}
    [ -f "$f" ] || { tut_fail "$1: no token cache named in its data note"; return; }
    tut_range "$1: cache bytes minus 48 + 2 x tokens" "$(($(wc -c <"$f") - 48 - 2 * ${k:-0}))" 0 0
    tut_range "$1: tokens over bytes (below 1)" "$(awk -v k="$k" -v b="$b" 'BEGIN { printf "%.3f", (b > 0 ? k / b : 9) }')" 0.1 0.999
    if [ "$b" = "$2" ]; then
        tut_range "$1: tokens (the README's text, $2 bytes)" "$k" "$3" "$3"
    else
        echo "  (note: the docs changed since the README: $b bytes, not $2; its $3 tokens not checked)"
    fi
}
# t14_gen NAME: the generated text of NAME.out (the header lines dropped)
t14_gen() { grep -v '^generate: \|^logits: ' "$1.out" >"$1.txt"; }
t14_val() { tut_num "$1" '^final: val_loss \([0-9.]*\) .*'; }
# t14_sub A B: A - B to 4 decimals; t14_rel A B: tut_reldiff A B. Both print
# nothing when A or B is missing (a loss line not found), which tut_range
# then fails, instead of reading the missing number as 0
t14_sub() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "") printf "%.4f", a - b }'; }
t14_rel() { [ -n "$1" ] && [ -n "$2" ] && tut_reldiff "$1" "$2"; }

# 1. Training on text with a BPE tokenizer.
cat docs/pipeline.md docs/tensor-parallel.md docs/zero.md > text.txt
echo 'cat docs/pipeline.md docs/tensor-parallel.md docs/zero.md > text.txt' >>"$TUT_LOG"
tut_cmd train ./dtrain --data text.txt --tokenizer tests/data/bpe-tiny --seq-length 32 --micro-batch-size 16 --train-iters 300 --lr 0.003 --log-interval 100 --eval-iters 4 --save ck
tut_line train '^model: tiny, 2 layers, 4 heads, width 64, context 64, vocab 769, 202624 params \(202\.6k\)$'
tut_line train '^data:  text file text\.txt, GPT-2 BPE from tests/data/bpe-tiny, seq length 32$'
tut_line train "^data:  --data text\\.txt: [0-9]+ tokens from [0-9]+ bytes \\(--tokenizer tests/data/bpe-tiny, vocabulary 769\\); tokenized and cached in text\\.txt\\.tok-$BPE_CRC\$"
t14_text train 67947 28758
# a fresh model's logits are near 0 (weights of std 0.02): its first loss
# is ln 769 = 6.645 give or take the batch (measured 6.6562)
tut_range "first loss minus ln 769" "$(t14_sub "$(tut_num train '^iter 1\/300  loss \([0-9.]*\) .*')" "$LN769")" -0.15 0.15
# the cache's ids: the unigram entropy, the loss of a model that knows only
# the tokens' frequencies
od -An -v -tu2 -j48 text.txt.tok-$BPE_CRC | tr -s ' ' '\n' | grep . | sort | uniq -c | awk '{ n += $1; c[NR] = $1 } END { for (i = 1; i <= NR; i++) h -= c[i] / n * log(c[i] / n); printf "%d tokens, %d distinct, unigram entropy %.4f nats\n", n, NR, h }' >unigram.out
echo "od -An -v -tu2 -j48 text.txt.tok-$BPE_CRC | ... (unigram entropy)" >>"$TUT_LOG"
cat unigram.out
H=$(tut_num unigram '.*unigram entropy \([0-9.]*\) nats$')
if [ "$(tut_num train '^data:  --data [^:]*: [0-9]* tokens from \([0-9]*\) bytes .*')" = 67947 ]; then
    tut_line unigram '^28758 tokens, 598 distinct, unigram entropy 5\.6483 nats$'
fi
# the trained model uses the context: its validation loss is below the
# unigram entropy (measured 3.7475 against 5.6483; 300 steps of another
# FP32 rounding move it by far less than the gap)
V1=$(t14_val train)
tut_range "val_loss ($V1) minus the unigram entropy ($H), below 0" "$(t14_sub "$V1" "$H")" -6 -0.5

# 2. Out: the export.
tut_cmd export ./dtrain --load ck --export-hf hf
tut_line export '^exported ck/iter_00000300 \(iteration 300; 2 layers, width 64, 4 heads, vocabulary 769, context 64, untied embeddings\) to hf/config\.json and hf/model\.safetensors; the tokenizer to hf/vocab\.json, hf/merges\.txt$'
for l in '"architectures": \[' '"GPT2LMHeadModel"' '"model_type": "gpt2",' '"vocab_size": 769,' '"n_positions": 64,' \
    '"n_embd": 64,' '"n_layer": 2,' '"n_head": 4,' '"activation_function": "gelu_new",' '"tie_word_embeddings": false,'; do
    grep -q "^ *$l\$" hf/config.json && echo "  ok: config.json: $l" || tut_fail "config.json: no line $l"
done
cmp -s hf/vocab.json tests/data/bpe-tiny/vocab.json && cmp -s hf/merges.txt tests/data/bpe-tiny/merges.txt &&
    echo "  ok: hf/vocab.json and hf/merges.txt are tests/data/bpe-tiny's" || tut_fail "the export's tokenizer files differ from bpe-tiny's"
n=$(od -An -tu8 -N8 hf/model.safetensors | tr -d ' ')
echo 'od -An -tu8 -N8 hf/model.safetensors' >>"$TUT_LOG"
tut_range "safetensors header length" "$n" 2728 2728
# 202624 float32 parameters after the 8-byte length and the header
tut_range "model.safetensors bytes minus 8 + 2728 + 4 x 202624" "$(($(wc -c <hf/model.safetensors) - 8 - 2728 - 4 * 202624))" 0 0
head -c 2736 hf/model.safetensors | tail -c 2728 | tr '}' '\n' | sed -n 's/^,"\([^"]*\)":{.*"dtype":"\([^"]*\)".*"shape":\(\[[0-9,]*\]\).*/\1 \2 \3/p' >tensors.all
echo "head -c 2736 hf/model.safetensors | tail -c 2728 | ... (the tensors' names and shapes)" >>"$TUT_LOG"
grep -v 'h\.1\.' tensors.all >tensors.out
tut_range "tensors in model.safetensors" "$(wc -l <tensors.all | tr -d ' ')" 29 29
tut_range "tensors printed (layer 1's left out)" "$(wc -l <tensors.out | tr -d ' ')" 17 17
for l in 'lm_head.weight F32 \[769,64\]' 'transformer.h.0.attn.c_attn.bias F32 \[192\]' \
    'transformer.h.0.attn.c_attn.weight F32 \[64,192\]' 'transformer.h.0.attn.c_proj.weight F32 \[64,64\]' \
    'transformer.h.0.ln_1.weight F32 \[64\]' 'transformer.h.0.mlp.c_fc.weight F32 \[64,256\]' \
    'transformer.h.0.mlp.c_proj.weight F32 \[256,64\]' 'transformer.ln_f.bias F32 \[64\]' \
    'transformer.wpe.weight F32 \[64,64\]' 'transformer.wte.weight F32 \[769,64\]'; do
    tut_line tensors "^$l\$"
done

# 3. Back into dtrain: the export generates what the checkpoint does.
tut_cmd gen-ck ./dtrain --load ck --generate 30 --prompt Tensor --temperature 0 --logits ck.f32
tut_cmd gen-hf ./dtrain --load-hf hf --tokenizer hf --generate 30 --prompt Tensor --temperature 0 --logits hf.f32
tut_line gen-ck '^generate: ck/iter_00000300 at iteration 300 \(tiny, data text\.txt, saved by 1 rank: single process\), context 32, tokenizer GPT-2 BPE from tests/data/bpe-tiny \(769 tokens\); prompt 6 bytes = 2 tokens; temperature 0 \(greedy\), top-k 0 \(all\), seed 1337$'
tut_line gen-hf '^generate: hf at iteration 0 \(Hugging Face GPT-2: 2 layers, width 64, vocabulary 769\), context 64, tokenizer GPT-2 BPE from hf \(769 tokens\); prompt 6 bytes = 2 tokens; temperature 0 \(greedy\), top-k 0 \(all\), seed 1337$'
tut_line gen-hf '^logits: 2 tokens x 769 float32 \(little-endian\) in hf\.f32$'
# 2 tokens x 769 float32
tut_range "hf.f32 bytes" "$(wc -c <hf.f32 | tr -d ' ')" 6152 6152
echo 'cmp ck.f32 hf.f32 && echo identical' >>"$TUT_LOG"
cmp ck.f32 hf.f32 && echo "  ok: ck.f32 and hf.f32 identical" || tut_fail "the checkpoint's and the export's logits differ"
t14_gen gen-ck
t14_gen gen-hf
[ -s gen-ck.txt ] && cmp -s gen-ck.txt gen-hf.txt && echo "  ok: greedy: the same text" || tut_fail "greedy: the checkpoint's and the export's texts differ (or are empty)"
tut_cmd samp-ck ./dtrain --load ck --generate 30 --prompt Tensor --seed 7
tut_cmd samp-hf ./dtrain --load-hf hf --tokenizer hf --generate 30 --prompt Tensor --seed 7
t14_gen samp-ck
t14_gen samp-hf
[ -s samp-ck.txt ] && cmp -s samp-ck.txt samp-hf.txt && echo "  ok: sampled (seed 7): the same text" || tut_fail "seed 7: the checkpoint's and the export's texts differ (or are empty)"
# past the checkpoint's context (32 tokens) the two models see different
# windows (not in the README's commands: what its sentence says)
"$BUILDDIR/dtrain" --load ck --generate 60 --prompt Tensor --seed 7 >long-ck.out 2>&1 &&
    "$BUILDDIR/dtrain" --load-hf hf --tokenizer hf --generate 60 --prompt Tensor --seed 7 >long-hf.out 2>&1 ||
    tut_fail "60-token generations failed"
t14_gen long-ck
t14_gen long-hf
cmp -s long-ck.txt long-hf.txt && tut_fail "60 tokens: the texts are the same (the contexts should differ)" ||
    echo "  ok: 60 tokens (past the checkpoint's context of 32): the texts differ"

# 4. Into transformers: needs numpy, torch and transformers.
t14_not_run "needs numpy, torch and transformers" "pip install numpy torch transformers" \
    "python3 tools/hf_compare.py compare hf hf.f32 Tensor --tokenizer hf" \
    "python3 tools/hf_compare.py random rnd" \
    "./dtrain --load-hf rnd --generate 20 --prompt abc --logits rnd.f32" \
    "python3 tools/hf_compare.py compare rnd rnd.f32 abc"

# 5. In, sharded: the import into t = 2, saved and exported again.
if command -v mpirun >/dev/null 2>&1; then
    # Open MPI settings of the multi-rank tests, eager messages, $MPIRUN
    tut_mpi
    tut_cmd tp $MPIRUN -np 2 ./dtrain --load-hf hf --data text.txt --tokenizer hf --seq-length 32 --micro-batch-size 16 --eval-iters 4 --tensor-model-parallel-size 2 --train-iters 0 --save ck2
    tut_line tp '^init:  the weights from --load-hf hf \(config\.json, model\.safetensors\)$'
    tut_line tp "^data:  --data text\\.txt: [0-9]+ tokens from [0-9]+ bytes \\(--tokenizer hf, vocabulary 769\\); read from the cache text\\.txt\\.tok-$BPE_CRC\$"
    tut_line tp '^checkpoint: iteration 0 saved in ck2/iter_00000000$'
    t14_text tp 67947 28758
    # the same weights and data in another layout: a row-parallel layer sums
    # two partial products in FP32 (tests/compose.sh's class tp, fp32:
    # 5e-4 over 4 training steps; here no step: measured 0 to 4 digits)
    tut_range "t = 2 import: val_loss relative difference from the trained model's ($(t14_val tp), $V1)" \
        "$(t14_rel "$V1" "$(t14_val tp)")" 0 5e-4
    for s in shard-00000.bin shard-00001.bin; do tut_file ck2/iter_00000000/$s; done
    # the README's `ls`: those two shards and the manifest, nothing else
    echo 'ls ck2/iter_00000000' >>"$TUT_LOG"
    l=$(ls ck2/iter_00000000 | tr '\n' ' ')
    [ "$l" = "manifest.json shard-00000.bin shard-00001.bin " ] && echo "  ok: ck2/iter_00000000: $l" ||
        tut_fail "ck2/iter_00000000 holds '$l', not manifest.json shard-00000.bin shard-00001.bin"
    tut_cmd export2 ./dtrain --load ck2 --export-hf hf2
    echo 'cmp hf/model.safetensors hf2/model.safetensors && echo byte-identical' >>"$TUT_LOG"
    cmp hf/model.safetensors hf2/model.safetensors && echo "  ok: hf2/model.safetensors byte-identical" ||
        tut_fail "the t = 2 import's export differs from hf/model.safetensors"
else
    t14_not_run "no mpirun" "./dtrain --load ck2 --export-hf hf2"
fi

# 6. Fine-tuning the import on another text.
cat docs/fp8.md docs/checkpoints.md > text2.txt
echo 'cat docs/fp8.md docs/checkpoints.md > text2.txt' >>"$TUT_LOG"
tut_cmd before ./dtrain --load-hf hf --data text2.txt --tokenizer hf --seq-length 32 --micro-batch-size 16 --eval-iters 4 --train-iters 0
tut_line before "^data:  --data text2\\.txt: [0-9]+ tokens from [0-9]+ bytes \\(--tokenizer hf, vocabulary 769\\); tokenized and cached in text2\\.txt\\.tok-$BPE_CRC\$"
t14_text before 36676 16698
V0=$(t14_val before)
tut_cmd ft ./dtrain --load-hf hf --data text2.txt --tokenizer hf --seq-length 32 --micro-batch-size 16 --eval-iters 4 --train-iters 100 --lr 0.001 --log-interval 25 --bf16 --recompute-granularity full --save ft
tut_line ft '^model: hf, 2 layers, 4 heads, width 64, context 64, vocab 769, 202624 params \(202\.6k\)$'
tut_line ft '^precision: bf16 storage, FP32 master weights and accumulation, no loss scaling$'
tut_line ft '^memory: full activation recomputation, checkpoint every 1 block$'
tut_cmd fresh ./dtrain --data text2.txt --tokenizer hf --seq-length 32 --micro-batch-size 16 --eval-iters 4 --train-iters 100 --lr 0.001 --log-interval 25 --bf16 --recompute-granularity full
F1=$(tut_num ft '^iter 1\/100  loss \([0-9.]*\) .*') S1=$(tut_num fresh '^iter 1\/100  loss \([0-9.]*\) .*')
VF=$(t14_val ft) VS=$(t14_val fresh)
# the import's first loss is its loss on the new text (one batch of 512
# tokens against the 2048 of val_loss: within 15%; measured 0.0344, the
# difference over the larger), the
# fresh model's ln 769 (as in section 1)
tut_range "fine-tuning: first loss ($F1) relative difference from the import's val_loss ($V0)" "$(t14_rel "$F1" "$V0")" 0 0.15
tut_range "fresh: first loss minus ln 769" "$(t14_sub "$S1" "$LN769")" -0.15 0.15
# 100 steps lower the import's loss on the new text, and end below the
# same 100 steps from a fresh model (measured 4.3976 -> 4.1976; 5.6549)
tut_range "fine-tuned val_loss ($VF) minus the import's ($V0), below 0" "$(t14_sub "$VF" "$V0")" -6 -0.01
tut_range "fine-tuned val_loss ($VF) minus the fresh model's ($VS), below 0" "$(t14_sub "$VF" "$VS")" -6 -0.5
tut_cmd gen-before ./dtrain --load-hf hf --tokenizer hf --generate 30 --prompt Checkpoints --temperature 0
tut_cmd gen-ft ./dtrain --load ft --generate 30 --prompt Checkpoints --temperature 0
tut_line gen-ft '^generate: ft/iter_00000100 at iteration 100 \(hf, data text2\.txt, saved by 1 rank: single process\), context 32, tokenizer GPT-2 BPE from hf \(769 tokens\); prompt 11 bytes = 5 tokens; temperature 0 \(greedy\), top-k 0 \(all\), seed 1337$'
t14_gen gen-before
t14_gen gen-ft
[ -s gen-ft.txt ] && ! cmp -s gen-before.txt gen-ft.txt && echo "  ok: the fine-tuned model continues the prompt otherwise" ||
    tut_fail "the fine-tuned model's text is empty or the import's"
tut_cmd export-ft ./dtrain --load ft --export-hf ft-hf
tut_line export-ft '^exported ft/iter_00000100 \(iteration 100; 2 layers, width 64, 4 heads, vocabulary 769, context 64, untied embeddings\) to ft-hf/config\.json and ft-hf/model\.safetensors; the tokenizer to ft-hf/vocab\.json, ft-hf/merges\.txt$'

# 7. GPT-2 from the Hub: needs the network (and GPT-2's 124M parameters).
t14_not_run "needs the network and huggingface_hub" "pip install huggingface_hub" \
    "huggingface-cli download openai-community/gpt2 config.json model.safetensors vocab.json merges.txt --local-dir gpt2"
t14_not_run "needs gpt2/ from the Hub" \
    "./dtrain --load-hf gpt2 --tokenizer gpt2 --generate 30 --prompt Tensor --temperature 0 --logits gpt2.f32" \
    "python3 tools/hf_compare.py compare gpt2 gpt2.f32 Tensor --tokenizer gpt2" \
    "./dtrain --load-hf gpt2 --data text2.txt --tokenizer gpt2 --seq-length 256 --micro-batch-size 4 --global-batch-size 8 --train-iters 20 --lr 1e-4 --log-interval 1 --eval-iters 1 --bf16 --recompute-granularity full --save gpt2-ft" \
    "./dtrain --load gpt2-ft --generate 30 --prompt Tensor --temperature 0" \
    "./dtrain --load gpt2-ft --export-hf gpt2-ft-hf"

tut_finish
