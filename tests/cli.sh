#!/bin/sh
# cli.sh: the dtrain program's command line, run by `make check` with
# DT_BUILDDIR (where ./dtrain is) and DT_SRCDIR set.
#
# Checks: --help exits 0 and lists every flag; --version; each bad flag or
# value exits 2 with exactly one line on stderr naming the flag; a missing or
# empty --data file exits 1 naming the file; a short real run with
# --summary and --trace writes valid JSON (checked by a small JSON validator
# in awk, since python is not guaranteed on CI) with the expected keys.
# POSIX sh; no skips: the binary is built by `make check` itself.

. "${DT_SRCDIR:-.}/tests/cli-lib.sh"
DTRAIN=$BUILDDIR/dtrain
cli_init cli.sh dtrain "$DTRAIN"

# json_valid FILE: exit 0 if FILE holds exactly one valid JSON value (RFC 8259).
json_valid() {
    awk '
    function fail_at(why) { printf "invalid JSON at byte %d: %s\n", pos, why > "/dev/stderr"; bad = 1; exit 1 }
    function ws(   c) {
        while (pos <= n) {
            c = substr(s, pos, 1)
            if (c == " " || c == "\t" || c == "\n" || c == "\r") pos++
            else break
        }
    }
    function value(depth,   c) {
        if (depth > 64) fail_at("nested too deeply")
        ws()
        c = substr(s, pos, 1)
        if (c == "{") return object(depth)
        if (c == "[") return array(depth)
        if (c == "\"") return jstring()
        if (c == "-" || (c >= "0" && c <= "9")) return number()
        if (substr(s, pos, 4) == "true") { pos += 4; return 1 }
        if (substr(s, pos, 5) == "false") { pos += 5; return 1 }
        if (substr(s, pos, 4) == "null") { pos += 4; return 1 }
        fail_at("unexpected character")
    }
    function object(depth,   c) {
        pos++
        ws()
        if (substr(s, pos, 1) == "}") { pos++; return 1 }
        for (;;) {
            ws()
            if (substr(s, pos, 1) != "\"") fail_at("expected a key")
            jstring()
            ws()
            if (substr(s, pos, 1) != ":") fail_at("expected :")
            pos++
            value(depth + 1)
            ws()
            c = substr(s, pos, 1)
            if (c == ",") { pos++; continue }
            if (c == "}") { pos++; return 1 }
            fail_at("expected , or }")
        }
    }
    function array(depth,   c) {
        pos++
        ws()
        if (substr(s, pos, 1) == "]") { pos++; return 1 }
        for (;;) {
            value(depth + 1)
            ws()
            c = substr(s, pos, 1)
            if (c == ",") { pos++; continue }
            if (c == "]") { pos++; return 1 }
            fail_at("expected , or ]")
        }
    }
    function jstring(   c, e) {
        pos++
        for (;;) {
            if (pos > n) fail_at("unterminated string")
            c = substr(s, pos, 1)
            if (c == "\"") { pos++; return 1 }
            if (c == "\\") {
                e = substr(s, pos + 1, 1)
                if (index("\"\\/bfnrt", e) > 0) { pos += 2; continue }
                if (e == "u" && substr(s, pos + 2, 4) ~ /^[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]$/) {
                    pos += 6
                    continue
                }
                fail_at("bad escape")
            }
            if (c < " ") fail_at("control character in string")
            pos++
        }
    }
    function number() {
        if (!match(substr(s, pos, 64), /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/)) fail_at("bad number")
        pos += RLENGTH
        return 1
    }
    { s = s $0 "\n" }
    END {
        if (bad) exit 1
        n = length(s)
        pos = 1
        value(0)
        ws()
        if (pos <= n) fail_at("trailing characters")
        exit 0
    }' "$1"
}

# ---- --help and --version ----------------------------------------------------
run --help
# lists every flag, each with its default but --help and --version
expect_help --model --num-layers --hidden-size --num-attention-heads --seq-length --task --data \
    --micro-batch-size --global-batch-size --train-iters --lr --min-lr --lr-warmup-iters --lr-decay-iters \
    --lr-decay-style --weight-decay --adam-beta1 --adam-beta2 --adam-eps --sgd-momentum --clip-grad \
    --optimizer --seed --threads --log-interval --eval-interval --eval-iters --trace --summary --device \
    --task-digits --help --version

run --version
[ "$rc" -eq 0 ] || fail "--version: exit $rc"
grep -q '^dtrain [0-9]' "$TMP/out" || fail "--version printed: $(cat "$TMP/out")"

# ---- bad flags and values: exit 2, one line naming the flag -----------------
expect_usage_error "the same file as --trace" --trace same.json --summary same.json
expect_usage_error --micro-batch-size --micro-batch-size 0
expect_usage_error "expected an integer >= 1" --micro-batch-size 0
expect_usage_error --micro-batch-size --micro-batch-size=abc
expect_usage_error --global-batch-size --global-batch-size 2.5
expect_usage_error --train-iters --train-iters -3
expect_usage_error --lr --lr -1
expect_usage_error --lr --lr=nan
expect_usage_error --lr --lr 1e-3x
expect_usage_error --min-lr --lr 0.001 --min-lr 0.01
expect_usage_error --model --model huge
expect_usage_error --task --task multiply
expect_usage_error --optimizer --optimizer adam
expect_usage_error --lr-decay-style --lr-decay-style exponential
expect_usage_error --adam-beta1 --adam-beta1 1
expect_usage_error --adam-beta2 --adam-beta2 -0.1
expect_usage_error --adam-eps --adam-eps 0
expect_usage_error --sgd-momentum --sgd-momentum 1.5
expect_usage_error --weight-decay --weight-decay -1
expect_usage_error --recompute-granularity --recompute-granularity partial
expect_usage_error --recompute-num-layers --recompute-num-layers 2
expect_usage_error --recompute-num-layers --recompute-granularity full --recompute-num-layers 9
expect_usage_error --lr-scaling --lr-scaling cubic
expect_usage_error --base-batch-size --base-batch-size 0
expect_usage_error --lars-eta --optimizer lars --lars-eta 0
expect_usage_error --lamb-gamma-u --optimizer lamb --lamb-gamma-u -1
expect_usage_error --bn-momentum --model mlp-bn --bn-momentum 1.5
expect_usage_error --bn-momentum-adjust --bn-momentum-adjust
expect_usage_error "--task blobs" --model mlp-bn --task add
expect_usage_error --blobs-classes --model mlp-bn --blobs-classes 1
expect_usage_error "--fp16 and --bf16" --fp16 --bf16
expect_usage_error --hysteresis --bf16 --hysteresis 3
expect_usage_error --initial-loss-scale --fp16 --initial-loss-scale 0
expect_usage_error --min-loss-scale --fp16 --initial-loss-scale 2 --min-loss-scale 4
expect_usage_error --fp16 --model mlp-bn --fp16
expect_usage_error --threads --threads -1
expect_usage_error --seed --seed -5
expect_usage_error --device --device tpu
expect_usage_error --num-layers --num-layers 0
expect_usage_error --hidden-size --hidden-size 30
expect_usage_error --seq-length --seq-length 0
expect_usage_error --seq-length --seq-length 100000
expect_usage_error --task-digits --task-digits 0
expect_usage_error --eval-iters --eval-iters 0
expect_usage_error --log-interval --log-interval 0
expect_usage_error --eval-interval --eval-interval -1
expect_usage_error --lr-warmup-iters --lr-warmup-iters x
expect_usage_error --data --data ''
expect_usage_error --summary --summary=
expect_usage_error "--bogus" --bogus 1
expect_usage_error "--train-iters" --train-iters
expect_usage_error "--lr" --lr --seed 1
expect_usage_error "--help" --help=yes
expect_usage_error "stray" stray
# inconsistent flags name both
expect_usage_error "--global-batch-size 10" --global-batch-size 10 --micro-batch-size 4
expect_usage_error "--micro-batch-size 4" --global-batch-size 10 --micro-batch-size 4
expect_usage_error "--num-attention-heads" --hidden-size 30 --num-attention-heads 4
expect_usage_error "--lr-warmup-iters" --lr-warmup-iters 100 --lr-decay-iters 10

# ---- missing or empty --data: exit 1 naming the file --------------------------
run --data "$TMP/no-such-file.txt" --train-iters 1
[ "$rc" -eq 1 ] || fail "--data missing file: exit $rc, expected 1"
grep -q -F "$TMP/no-such-file.txt" "$TMP/err" || fail "--data missing file: message does not name it: $(cat "$TMP/err")"
grep -q '^dtrain: ' "$TMP/err" || fail "--data missing file: message does not start with 'dtrain: '"

: >"$TMP/empty.txt"
run --data "$TMP/empty.txt" --train-iters 1
[ "$rc" -eq 1 ] || fail "--data empty file: exit $rc, expected 1"
grep -q -F "$TMP/empty.txt" "$TMP/err" || fail "--data empty file: message does not name it: $(cat "$TMP/err")"

# ---- a short real run ----------------------------------------------------------
run --train-iters=3 --seq-length 32 --micro-batch-size 4 --global-batch-size=8 --eval-iters 1 \
    --eval-interval 2 --log-interval 1 --threads 2 --summary "$TMP/summary.json" --trace="$TMP/trace.json"
if [ "$rc" -ne 0 ]; then
    fail "short run: exit $rc: $(cat "$TMP/err")"
else
    [ -s "$TMP/err" ] && fail "short run wrote to stderr (not a terminal): $(cat "$TMP/err")"
    grep -q '^model: ' "$TMP/out" || fail "short run: no model line"
    grep -q '^iter 3/3 ' "$TMP/out" || fail "short run: no log line for iteration 3"
    grep -q '^eval .*iter 2' "$TMP/out" || fail "short run: no evaluation at iteration 2"
    grep -q '^final: val_loss [0-9.]* accuracy [0-9.]*% ([0-9]* examples) tokens/s [0-9]' "$TMP/out" ||
        fail "short run: no final line: $(tail -n 3 "$TMP/out")"
    if json_valid "$TMP/summary.json"; then
        for key in train_loss val_loss accuracy tokens_per_second peak_activation_bytes iterations num_params \
            elapsed_seconds config micro_batch_size global_batch_size; do
            grep -q "\"$key\"" "$TMP/summary.json" || fail "summary has no key $key"
        done
        grep -q '"iterations": 3' "$TMP/summary.json" || fail "summary: iterations is not 3"
        grep -q '"global_batch_size": 8' "$TMP/summary.json" || fail "summary: --global-batch-size=8 not recorded"
    else
        fail "summary is not valid JSON"
    fi
    if json_valid "$TMP/trace.json"; then
        for word in '"traceEvents"' '"forward"' '"backward"' '"optimizer"' '"loss"' '"lr"' '"activation_bytes"' \
            '"thread_name"'; do
            grep -q "$word" "$TMP/trace.json" || fail "trace has no $word"
        done
    else
        fail "trace is not valid JSON"
    fi
fi

# the validator itself rejects broken JSON (so a pass above means something)
printf '{"a": [1, 2,]}\n' >"$TMP/bad.json"
json_valid "$TMP/bad.json" 2>/dev/null && fail "json_valid accepted a trailing comma"
printf '{"a": 1}\n' >"$TMP/good.json"
json_valid "$TMP/good.json" || fail "json_valid rejected valid JSON"

cli_finish
exit 0
