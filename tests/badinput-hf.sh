#!/bin/sh
# badinput-hf.sh: the bad-input catalogue for Hugging Face directories
# (dtrain --load-hf DIR: config.json and model.safetensors; issue 40), run
# by `make check` with DT_BUILDDIR and DT_SRCDIR set. The rules every case
# follows (exit status, one line on stderr naming the problem, no crash or
# hang, no output left in $O) are tests/badinput.sh's; the machinery is
# tests/badinput-lib.sh's.
#
# The inputs start from a real export (a tiny model, its starting weights
# saved and exported with --export-hf) and break one thing each: a key of
# config.json, the safetensors header (rewritten with sed, its length
# prefix recomputed), the data (truncated), or the directory's files. A
# file dtrain reads that is wrong is a run-time input failure: exit 1; a
# flag that contradicts --load-hf: exit 2. POSIX sh (od, dd, sed, printf).
CATALOGUE=badinput-hf.sh
. "${DT_SRCDIR:-.}/tests/badinput-lib.sh"
DTRAIN=$BUILDDIR/dtrain

"$DTRAIN" --train-iters 0 --eval-iters 1 --save "$TMP/ck" >"$TMP/setup.out" 2>&1 &&
    "$DTRAIN" --load "$TMP/ck" --export-hf "$TMP/hf" >>"$TMP/setup.out" 2>&1 || {
    echo "$CATALOGUE: setup failed: $(tail -2 "$TMP/setup.out")" >&2
    exit 99
}
# the good directory loads (the catalogue's cases differ from it in one thing)
one_case dtrain 0 "" - "$DTRAIN" --train-iters 1 --eval-iters 1 --load-hf "$TMP/hf"

# hdr_len FILE: the safetensors header length (8 bytes, little-endian)
hdr_len() {
    od -An -tu1 -N8 "$1" | awk '{ n = 0; for (i = NF; i >= 1; i--) n = n * 256 + $i; printf "%d\n", n }'
}
# le64 N: N as 8 little-endian bytes
le64() {
    le_v=$1 le_i=0
    while [ $le_i -lt 8 ]; do
        printf "\\$(printf %03o $((le_v % 256)))"
        le_v=$((le_v / 256)) le_i=$((le_i + 1))
    done
}
# variant NAME: a copy of the good directory, $TMP/NAME
variant() { rm -rf "$TMP/$1" && cp -R "$TMP/hf" "$TMP/$1"; }
# config NAME SED: config.json edited
config() { variant "$1" && sed "$2" "$TMP/hf/config.json" >"$TMP/$1/config.json"; }
# header NAME SED: model.safetensors with its header edited (the data kept)
header() {
    variant "$1"
    f=$TMP/hf/model.safetensors
    n=$(hdr_len "$f")
    dd if="$f" bs=1 skip=8 count="$n" 2>/dev/null | sed "$2" >"$TMP/$1.hdr"
    m=$(wc -c <"$TMP/$1.hdr" | tr -d ' ')
    { le64 "$m"; cat "$TMP/$1.hdr"; tail -c +$((9 + n)) "$f"; } >"$TMP/$1/model.safetensors"
}
# raw NAME LENGTH: model.safetensors with its length prefix replaced
raw() {
    variant "$1"
    f=$TMP/hf/model.safetensors
    { le64 "$2"; tail -c +9 "$f"; } >"$TMP/$1/model.safetensors"
}

C=transformer.h.0.attn.c_attn.weight
config model_type 's/"model_type": "gpt2"/"model_type": "gpt_neox"/'
config no_embd '/"n_embd"/d'
config heads 's/"n_head": [0-9]*/"n_head": 3/'
config act 's/"gelu_new"/"relu"/'
config eps 's/"layer_norm_epsilon": [0-9.e-]*/"layer_norm_epsilon": 1e-06/'
config inner 's/"n_inner": null/"n_inner": 100/'
config bylayer 's/"model_type"/"scale_attn_by_inverse_layer_idx": true, "model_type"/'
config notjson 's/}/,/'
config ctx 's/"model_type"/"n_ctx": 32, "model_type"/'
config vocab 's/"vocab_size": [0-9]*/"vocab_size": 300/'
config layers 's/"n_layer": [0-9]*/"n_layer": 3/'
config tied 's/"tie_word_embeddings": false/"tie_word_embeddings": true/'
variant noconfig && rm "$TMP/noconfig/config.json"
variant bin && mv "$TMP/bin/model.safetensors" "$TMP/bin/pytorch_model.bin"
variant sharded && mv "$TMP/sharded/model.safetensors" "$TMP/sharded/model-00001-of-00002.safetensors" &&
    echo '{"weight_map": {}}' >"$TMP/sharded/model.safetensors.index.json"
variant trunc && head -c 5000 "$TMP/hf/model.safetensors" >"$TMP/trunc/model.safetensors"
raw big 1099511627776
raw long 10000000
header dtype "s/\\(\"$C\":{[^}]*\"dtype\":\"\\)F32/\\1I64/"
header shape "s/\\(\"$C\":{[^}]*\"shape\":\\)\\[64,192\\]/\\1[192,64]/"
header missing "s/\"$C\"/\"transformer.h.0.attn.c_attn.weights\"/"
header extra 's/^{/{"transformer.h.0.mlp.extra":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},/'
header dup "s/\"transformer.h.0.attn.c_attn.bias\"/\"$C\"/"
header overlap 's/\[65536,66304\]/[65280,66048]/'
header notobj 's/.*/[1]/'

table dtrain "$DTRAIN" --train-iters 1 --eval-iters 1 --save '$O/ck' <<'EOF'
1 | model_type            | --load-hf $TMP/model_type
1 | n_embd                | --load-hf $TMP/no_embd
1 | not divisible         | --load-hf $TMP/heads
1 | activation_function   | --load-hf $TMP/act
1 | layer_norm_epsilon    | --load-hf $TMP/eps
1 | n_inner               | --load-hf $TMP/inner
1 | scale_attn_by_inverse | --load-hf $TMP/bylayer
1 | not JSON              | --load-hf $TMP/notjson
1 | n_ctx                 | --load-hf $TMP/ctx
1 | config.json           | --load-hf $TMP/noconfig
1 | shape                 | --load-hf $TMP/vocab
1 | transformer.h.2.      | --load-hf $TMP/layers
1 | lm_head.weight        | --load-hf $TMP/tied
1 | pytorch_model.bin     | --load-hf $TMP/bin
1 | sharded               | --load-hf $TMP/sharded
1 | truncated             | --load-hf $TMP/trunc
1 | at most               | --load-hf $TMP/big
1 | truncated             | --load-hf $TMP/long
1 | dtype                 | --load-hf $TMP/dtype
1 | shape                 | --load-hf $TMP/shape
1 | no tensor             | --load-hf $TMP/missing
1 | not part of           | --load-hf $TMP/extra
1 | duplicate             | --load-hf $TMP/dup
1 | overlap               | --load-hf $TMP/overlap
1 | JSON object           | --load-hf $TMP/notobj
1 | no such               | --load-hf $TMP/no-such-dir
2 | --model               | --load-hf $TMP/hf --model small
2 | --num-layers          | --load-hf $TMP/hf --num-layers 3
2 | --tie-embeddings      | --load-hf $TMP/hf --tie-embeddings-and-output-weights
2 | n_positions           | --load-hf $TMP/hf --seq-length 65
2 | mlp-bn                | --load-hf $TMP/hf --model mlp-bn --task blobs
EOF

echo "$CATALOGUE: $cases cases, $failures failure(s)"
[ "$failures" -eq 0 ] || exit 1
exit 0
