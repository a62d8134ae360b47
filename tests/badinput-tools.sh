#!/bin/sh
# badinput-tools.sh: the bad-input catalogue's second half: dtsim, dtviz
# and dtbench (their flags, configs, traces, hardware files, special files,
# outputs over inputs, control bytes), run by `make check` with DT_BUILDDIR
# and DT_SRCDIR. The first half and the rules every case follows (exit
# code, one stderr line naming the problem, no crash, hang or partial
# output) are in tests/badinput.sh; the machinery and shared inputs in
# tests/badinput-lib.sh.
CATALOGUE=badinput-tools.sh
. "${DT_SRCDIR:-.}/tests/badinput-lib.sh"

# ---- dtsim: numeric flags ----------------------------------------------------------------
numeric dtsim "$DTSIM" run <<'EOF'
--num-layers | i | -1 0 1025
--hidden-size | i | -1 0 65537
--num-attention-heads | i | -1 0
--max-position-embeddings | i | -1 0 65537
--vocab-size | i | -1 0 1 16777217
--seq-length | i | -1 0
--micro-batch-size | i | -1 0
--global-batch-size | i | -1 0
--micro-batches | i | -1 0
--train-iters | i | -1 0
--seed | i | -1
--loss-scale | f | -1
--initial-loss-scale | f | -1 0
--loss-scale-window | i | -1 0
--hysteresis | i | -1 0
--min-loss-scale | f | -1 0
--tensor-model-parallel-size | i | -1 0 1025
--pipeline-model-parallel-size | i | -1 0 1025
--data-parallel-size | i | -1 0 1048577
--num-ps-servers | i | -1 0
--bucket-size-mb | f | -1 1048577 1e300
--allreduce-chunk-bytes | i | -1
EOF
numeric dtsim "$DTSIM" validate --profile "$TMP/real.json" "$TMP/real.json" <<'EOF'
--skip | i | -1
EOF

# ---- dtsim: absurd sizes, configs, traces, hardware files --------------------------------
table dtsim "$DTSIM" run --trace "$O/t.json" --summary "$O/s.json" <<'EOF'
2 | too many tokens | --micro-batch-size 2147483647
2 | events | --train-iters 1000000000000
2 | expected 1..65536 per step and pipeline | --micro-batches 2147483647
2 | --global-batch-size 2147483647 gives 2147483647 micro-batches | --global-batch-size 2147483647 --micro-batch-size 1
2 | events | --micro-batches 65536 --train-iters 100000000
2 | events | --data-parallel-size 1048576
2 | events | --allreduce-chunk-bytes 1 --data-parallel-size 64
2 | events | --allreduce ps-sync --num-ps-servers 1000000
2 | years | --hidden-size 65536 --num-layers 1024
2 | --pipeline-split | --pipeline-model-parallel-size 2 --pipeline-split 1,99999999999999999999
2 | --slow-rank | --slow-rank 0:-1
# --config
2 | $TMP/missing.json | --config $TMP/missing.json
2 | $TMP/empty | --config $TMP/empty
2 | $TMP/dir | --config $TMP/dir
2 | junk.bin | --config $TMP/junk.bin
2 | syntax.json: line | --config $TMP/syntax.json
2 | JSON object | --config $TMP/array.json
2 | JSON object | --config $TMP/chrome-array.json
2 | "traceEvents": unknown key | --config $TMP/chrome.json
2 | "num_layers": expected an integer in 1..1024 | --config $TMP/c-layers.json
2 | "micro_batch_size": expected an integer >= 1 | --config $TMP/c-mb40.json
2 | "micro_batches" | --config $TMP/c-m40.json
2 | "micro_batch_size" | --config $TMP/c-neg.json
2 | "hidden_size" | --config $TMP/c-negsize.json
2 | "num_layers" | --config $TMP/c-float.json
2 | "hidden_size" | --config $TMP/c-str.json
2 | "use_distributed_optimizer" | --config $TMP/c-bool.json
2 | "num_layer": unknown key | --config $TMP/c-key.json
2 | duplicate | --config $TMP/c-dup.json
2 | events | --config $TMP/c-steps.json
2 | years | --config $TMP/c-time.json
2 | events | --config $TMP/c-ranks.json
2 | "hardware" | --config $TMP/c-hw.json
2 | "hardware" | --config $TMP/c-hwobj.json
2 | "pipeline_schedule" | --config $TMP/c-sched.json
2 | --pipeline-split | --config $TMP/c-split.json
2 | version | --config $TMP/c-trace-v2.json
2 | dtrain-trace | --config $TMP/c-trace-fmt.json
2 | version | --config $TMP/t-v2.json
2 | dtrain-trace | --config $TMP/t-fmt.json
2 | t-cut100.json: line | --config $TMP/t-cut100.json
2 | "num_layers": expected | --config $TMP/t-layers.json
2 | "micro_batch_size": expected | --config $TMP/t-mb40.json
# --profile
2 | $TMP/missing.json | --profile $TMP/missing.json
2 | $TMP/empty | --profile $TMP/empty
2 | $TMP/dir | --profile $TMP/dir
2 | junk.bin | --profile $TMP/junk.bin
2 | not a dtrain trace | --profile $TMP/chrome.json
2 | chrome-array.json | --profile $TMP/chrome-array.json
2 | version 2 | --profile $TMP/t-v2.json
2 | otherData.format | --profile $TMP/t-fmt.json
2 | t-cut.json | --profile $TMP/t-cut.json
2 | t-cut100.json | --profile $TMP/t-cut100.json
2 | missing "dur" | --profile $TMP/t-nodur.json
2 | negative | --profile $TMP/t-negdur.json
2 | int64 nanosecond range | --profile $TMP/t-hugets.json
2 | no embedding forward spans | --profile $TMP/t-nofwd.json
2 | otherData.config | --profile $TMP/t-nocfg.json
2 | t-layers.json | --profile $TMP/t-layers.json
2 | syntax.json | --profile $TMP/syntax.json
2 | "args.iter" is 4611686018427387904 | --profile $TMP/t-iter62.json
2 | "ts" is negative | --profile $TMP/t-negts.json
2 | past the largest time | --profile $TMP/t-tsdur.json
2 | "pid" is 1 | --profile $TMP/t-pid.json
2 | "tid" is 7 | --profile $TMP/t-tid.json
2 | "args.layer" is 9 | --profile $TMP/t-layer.json
# --grad-trace (fp16)
2 | $TMP/missing.json | --fp16 --grad-trace $TMP/missing.json
2 | junk.bin | --fp16 --grad-trace $TMP/junk.bin
2 | not a dtrain trace | --fp16 --grad-trace $TMP/chrome.json
2 | version 2 | --fp16 --grad-trace $TMP/t-v2.json
2 | t-cut.json | --fp16 --grad-trace $TMP/t-cut.json
2 | no grad_amax events | --fp16 --grad-trace $TMP/real.json
# --hw
2 | $TMP/missing.json | --hw $TMP/missing.json
2 | $TMP/empty | --hw $TMP/empty
2 | $TMP/dir | --hw $TMP/dir
2 | junk.bin | --hw $TMP/junk.bin
2 | hw-cut.json | --hw $TMP/hw-cut.json
2 | hw-fmt.json | --hw $TMP/hw-fmt.json
2 | hw-ver.json | --hw $TMP/hw-ver.json
2 | peak_flops | --hw $TMP/hw-neg.json
2 | bytes_per_ns | --hw $TMP/hw-zero-bw.json
2 | horizon | --hw $TMP/hw-slowflops.json
2 | horizon | --hw $TMP/hw-slowmem.json
2 | horizon | --hw $TMP/hw-tinyeff.json
2 | horizon | --hw $TMP/hw-slowbw.json --data-parallel-size 2
2 | "intra.alpha_ns": expected a number in [0, 2^60] | --hw $TMP/hw-alpha308.json --data-parallel-size 2
2 | "intra.alpha_ns" | --hw $TMP/hw-alpha63.json --data-parallel-size 2
2 | kernel_overhead_ns | --hw $TMP/hw-kov63.json
2 | efficiency | --hw $TMP/hw-str.json
2 | eficiency | --hw $TMP/hw-key.json
2 | intra | --hw $TMP/hw-nolink.json
2 | JSON object | --hw $TMP/array.json
2 | hw | --hw $TMP/real.json
EOF
table dtsim "$DTSIM" <<'EOF'
2 | --sweep | sweep --sweep micro-batches=1,99999999999999999999
2 | --sweep | sweep --sweep micro-batches=nan
2 | --sweep | sweep --sweep link-bandwidth-scale=1e999
2 | --sweep | sweep --sweep link-bandwidth-scale=-1
2 | --sweep | sweep --sweep data-parallel-size=
2 | --sweep | sweep --sweep micro-batches=2147483647 --train-iters 100
2 | junk.bin | validate --profile $TMP/junk.bin $TMP/real.json
2 | t-cut.json | validate --profile $TMP/real.json $TMP/t-cut.json
2 | missing.json | validate --profile $TMP/real.json $TMP/missing.json
2 | junk.bin | validate --profile $TMP/real.json --comm $TMP/junk.bin $TMP/real.json
2 | hw-fmt.json | validate --profile $TMP/real.json --hw $TMP/hw-fmt.json $TMP/real.json
2 | "args.iter" is 4611686018427387904 | validate --profile $TMP/real.json $TMP/t-iter62.json
2 | "args.iter" is 2147483647 | validate --profile $TMP/real.json $TMP/t-iter31.json
2 | "ts" is negative | validate --profile $TMP/real.json $TMP/t-negts.json
2 | past the largest time | validate --profile $TMP/real.json $TMP/t-tsdur.json
EOF

# ---- dtsim: special files, outputs over inputs, steps out of order, control bytes (issue 34) ----
cfg c-prof-fifo "{\"profile\": \"$TMP/fifo\"}"
cfg c-hw-fifo "{\"hardware\": \"$TMP/fifo\"}"
cfg c-hw-zero '{"hardware": "/dev/zero"}'
cfg c-grad-fifo "{\"grad_trace\": \"$TMP/fifo\", \"precision\": \"fp16\"}"
# D7: a pipeline trace with iterations 0 and 1 swapped, and one whose first forward span ends at the largest time
sed 's/"iter":0\([,}]\)/"iter":X\1/g; s/"iter":1\([,}]\)/"iter":0\1/g; s/"iter":X\([,}]\)/"iter":1\1/g' \
    "$TMP/pp.json" >"$TMP/t-swap.json"
awk '!done && /"name":"forward"/ && /"iter":0[,}]/ {
    sub(/"ts":[0-9.]*,"dur":[0-9.]*/, "\"ts\":9223372036854775.000,\"dur\":0.807"); done = 1 } { print }' \
    "$TMP/pp.json" >"$TMP/t-maxtime.json"
# machine.cluster over the format's 4096 bytes
C5000=$(awk 'BEGIN { for (i = 0; i < 5000; i++) printf "c" }')
sed "s/\"cluster\":null/\"cluster\":\"$C5000\"/; s/\"cluster\":\"[^\"]*\"/\"cluster\":\"$C5000\"/" "$TMP/real.json" \
    >"$TMP/t-cluster.json"
# D10: terminal control bytes (ESC [2J clears the screen) in what files hold
cfg hw-esc "$(sed 's/"name": *"[^"]*"/"name": "x\\u001b[2Jy"/' "$HWREF")"
cfg hw-esckey "$(sed 's/"efficiency"/"eff\\u001b[2Jiciency"/' "$HWREF")"
sed 's/"format":"dtrain-trace"/"format":"\\u001b[2J"/' "$TMP/real.json" >"$TMP/t-escfmt.json"
sed 's/"tool":"[^"]*"/"tool":"a\\u001b[2Jb"/' "$TMP/pp.json" >"$TMP/t-esctool.json"
ESC=$(printf '\033')
# no_raw_esc WHAT: the last case printed no raw ESC byte (on stdout or stderr)
no_raw_esc() { if grep -q "$ESC" "$TMP/stdout" "$TMP/stderr"; then fail "$1: a raw ESC byte on stdout or stderr"; fi; }
# D5: a FIFO (it would block) or a device (/dev/zero never ends) as any input file: one line, exit 2
table dtsim "$DTSIM" run --trace "$O/t.json" --summary "$O/s.json" <<'EOF'
2 | $TMP/fifo: is a pipe | --config $TMP/fifo
2 | /dev/zero: is a character device | --config /dev/zero
2 | $TMP/fifo: is a pipe | --profile $TMP/fifo
2 | /dev/zero: is a character device | --profile /dev/zero
2 | $TMP/fifo: is a pipe | --hw $TMP/fifo
2 | /dev/zero: is a character device | --hw /dev/zero
2 | --grad-trace $TMP/fifo: is a pipe | --fp16 --grad-trace $TMP/fifo
2 | "profile": $TMP/fifo: is a pipe | --config $TMP/c-prof-fifo.json
2 | "hardware": $TMP/fifo: is a pipe | --config $TMP/c-hw-fifo.json
2 | "hardware": /dev/zero: is a character device | --config $TMP/c-hw-zero.json
2 | grad_trace $TMP/fifo: is a pipe | --config $TMP/c-grad-fifo.json
2 | $TMP/fifo: is a pipe | --colocated $TMP/fifo,$TMP/real.json --profile $TMP/real.json
2 | machine.cluster is 5000 bytes | --config $TMP/t-cluster.json
EOF
table dtsim "$DTSIM" <<'EOF'
2 | /dev/zero: is a character device | analyze /dev/zero
2 | $TMP/fifo: is a pipe | analyze $TMP/fifo
2 | $TMP/fifo: is a pipe | validate --profile $TMP/fifo $TMP/real.json
2 | $TMP/fifo: is a pipe | validate --profile $TMP/real.json $TMP/fifo
2 | /dev/zero: is a character device | validate --profile $TMP/real.json --hw /dev/zero $TMP/real.json
2 | $TMP/fifo: is a pipe | validate --profile $TMP/real.json --comm $TMP/fifo $TMP/real.json
2 | $TMP/fifo: is a pipe | merge --output $O/m.json $TMP/fifo
# D7: steps out of time order (swapped iterations, a span to the largest time): refused, not a negative step
2 | rank 0: step 1 ends at | analyze $TMP/t-swap.json
2 | ends at 9223372036854775807 ns | analyze $TMP/t-maxtime.json
2 | rank 0: step 1 ends at | validate --profile $TMP/real.json $TMP/t-swap.json
# machine.cluster is at most 4096 bytes in a trace as in a config
2 | machine.cluster is 5000 bytes | analyze $TMP/t-cluster.json
EOF

# D4: an output that is an input (the same file by any name: device and inode) is refused at start, exit 2,
# and the input is left as it was
D=$TMP/d4
mkdir "$D" && cp "$TMP/real.json" "$D/prof.json" && cp "$TMP/real.json" "$D/run.rank0.json"
cp "$TMP/pp.json" "$D/pp.json" && ln "$D/pp.json" "$D/pp-link.json"
cp "$HWREF" "$D/hw.json" && ln "$D/hw.json" "$D/hw-link.json"
printf '{"num_layers": 2}\n' >"$D/c.json"
printf '{"hardware": "%s", "profile": "%s"}\n' "$D/hw.json" "$D/prof.json" >"$D/c-files.json"
# d4_case PROG WORD INPUT ARGS...: one_case (exit 2), then INPUT must be unchanged
d4_case() {
    d4_prog=$1 d4_word=$2 d4_in=$3 && shift 3
    cp "$d4_in" "$TMP/d4.orig"
    one_case "$(basename "$d4_prog")" 2 "$d4_word" - "$d4_prog" "$@"
    cmp -s "$d4_in" "$TMP/d4.orig" || fail "$(basename "$d4_prog") $*: changed its input $d4_in"
}
d4_case "$DTSIM" "--trace $D/c.json: is the same file as --config" "$D/c.json" run --config "$D/c.json" --trace "$D/c.json"
d4_case "$DTSIM" "the same file as --config" "$D/c.json" run --config "$D/c.json" --summary "$D/./c.json"
d4_case "$DTSIM" "the same file as --config" "$D/prof.json" run --config "$D/prof.json" --trace "$D/prof.json"
d4_case "$DTSIM" "the same file as --hw" "$D/hw.json" run --hw "$D/hw.json" --trace "$D/hw-link.json"
d4_case "$DTSIM" "the same file as --profile" "$D/prof.json" run --profile "$D/prof.json" --summary "$D/prof.json"
d4_case "$DTSIM" "the --config's profile" "$D/prof.json" run --config "$D/c-files.json" --trace "$D/prof.json"
d4_case "$DTSIM" "the --config's hardware" "$D/hw.json" run --config "$D/c-files.json" --summary "$D/hw.json"
d4_case "$DTSIM" "the same file as --grad-trace" "$D/prof.json" run --fp16 --grad-trace "$D/prof.json" --trace "$D/prof.json"
d4_case "$DTSIM" "--output $D/pp-link.json: is the same file" "$D/pp.json" merge --output "$D/pp-link.json" "$D/pp.json"

# D10: a hardware file's name is printed with its control bytes escaped (\x1b), never raw
one_case dtsim 0 '' - "$DTSIM" run --hw "$TMP/hw-esc.json" --train-iters 1
grep -q 'machine: *x\\x1b\[2Jy' "$TMP/stdout" || fail "dtsim run --hw hw-esc.json: the name not shown escaped"
no_raw_esc "dtsim run --hw hw-esc.json"
one_case dtsim 2 'eff\x1b[2Jiciency' - "$DTSIM" run --hw "$TMP/hw-esckey.json"
no_raw_esc "dtsim run --hw hw-esckey.json"
one_case dtsim 2 '"\x1b[2J"' - "$DTSIM" analyze "$TMP/t-escfmt.json"
no_raw_esc "dtsim analyze t-escfmt.json"
one_case dtsim 0 '' - "$DTSIM" analyze "$TMP/t-esctool.json"
no_raw_esc "dtsim analyze t-esctool.json"

# ---- dtviz ---------------------------------------------------------------------------------
if [ -x "$DTVIZ" ]; then
    unset DISPLAY WAYLAND_DISPLAY
    numeric dtviz "$DTVIZ" "$TMP/pp.json" --png "$O/x.png" <<'EOF'
--time | f | -1 1.5
--fps | i | -1 0 241
--duration | f | -1 0 3601
--frame-count | i | -1 0 100001
EOF
    table dtviz "$DTVIZ" <<'EOF'
2 | --size | $TMP/pp.json --png $O/x.png --size 0x0
2 | --size | $TMP/pp.json --png $O/x.png --size -1400x800
2 | --size | $TMP/pp.json --png $O/x.png --size 99999999999x800
2 | --size | $TMP/pp.json --png $O/x.png --size 1400x800x
2 | --size | $TMP/pp.json --png $O/x.png --size ''
2 | --size | $TMP/pp.json --png $O/x.png --size 20000x800
2 | --zoom | $TMP/pp.json --png $O/x.png --zoom 0.6:0.4
2 | --zoom | $TMP/pp.json --png $O/x.png --zoom nan:1
2 | --zoom | $TMP/pp.json --png $O/x.png --zoom 0:1e999
2 | --zoom | $TMP/pp.json --png $O/x.png --zoom -0.5:0.5
2 | --zoom | $TMP/pp.json --png $O/x.png --zoom 0.2
2 | --png | $TMP/pp.json --png ''
2 | $TMP/missing.json | $TMP/missing.json --png $O/x.png
2 | $TMP/empty | $TMP/empty --png $O/x.png
2 | $TMP/dir | $TMP/dir --png $O/x.png
2 | junk.bin | $TMP/junk.bin --png $O/x.png
2 | not a dtrain trace | $TMP/chrome.json --png $O/x.png
2 | chrome-array.json | $TMP/chrome-array.json --png $O/x.png
2 | version 2 | $TMP/t-v2.json --png $O/x.png
2 | otherData.format | $TMP/t-fmt.json --png $O/x.png
2 | t-cut.json | $TMP/t-cut.json --png $O/x.png
2 | t-cut100.json | $TMP/t-cut100.json --png $O/x.png
2 | missing "dur" | $TMP/t-nodur.json --png $O/x.png
2 | negative | $TMP/t-negdur.json --png $O/x.png
2 | int64 nanosecond range | $TMP/t-hugets.json --png $O/x.png
2 | syntax.json | $TMP/syntax.json --png $O/x.png
2 | "args.iter" is 4611686018427387904 | $TMP/t-iter62.json --png $O/x.png
2 | "args.iter" is 2147483647 | $TMP/t-iter31.json --png $O/x.png
2 | "ts" is negative | $TMP/t-negts.json --png $O/x.png
2 | past the largest time | $TMP/t-tsdur.json --png $O/x.png
2 | "pid" is 1 | $TMP/t-pid.json --png $O/x.png
2 | "tid" is 7 | $TMP/t-tid.json --png $O/x.png
2 | junk.bin | $TMP/pp.json $TMP/junk.bin --png $O/x.png
2 | junk.bin | $TMP/pp.json $TMP/junk.bin --frames $O/frames --frame-count 2
2 | t-cut.json | $TMP/t-cut.json --frames $O/frames --frame-count 2
1 | $TMP/dir/no/x.png | $TMP/pp.json --png $TMP/dir/no/x.png
EOF
    # issue 34: special files (D5), the cluster's cap, control bytes (D10), --png over an input (D4)
    table dtviz "$DTVIZ" <<'EOF'
2 | $TMP/fifo: is a pipe | $TMP/fifo --png $O/x.png
2 | /dev/zero: is a character device | /dev/zero --png $O/x.png
2 | $TMP/fifo: is a pipe | $TMP/pp.json $TMP/fifo --png $O/x.png
2 | $TMP/fifo: is a pipe | $TMP/fifo --frames $O/frames --frame-count 2
2 | machine.cluster is 5000 bytes | $TMP/t-cluster.json --png $O/x.png
EOF
    one_case dtviz 2 '"\x1b[2J"' - "$DTVIZ" "$TMP/t-escfmt.json" --png "$O/x.png"
    no_raw_esc "dtviz t-escfmt.json"
    d4_case "$DTVIZ" "--png $D/pp.json: is the same file as trace" "$D/pp.json" "$D/pp.json" --png "$D/pp.json"
    d4_case "$DTVIZ" "is the same file as trace" "$D/pp.json" "$D/pp.json" --png "$D/pp-link.json"
    d4_case "$DTVIZ" "is the same file as trace $D/run.rank0.json" "$D/run.rank0.json" "$D/run.json" \
        --png "$D/run.rank0.json"
    d4_case "$DTVIZ" "is the same file as --profile" "$D/prof.json" "$D/pp.json" --png "$D/prof.json" \
        --profile "$D/prof.json"
    d4_case "$DTVIZ" "is the same file as --hw" "$D/hw.json" "$D/pp.json" --png "$D/hw-link.json" --hw "$D/hw.json"
else
    echo "skip: dtviz (built without SDL2)"
fi

# ---- dtbench ----------------------------------------------------------------------------------
numeric dtbench "$DTBENCH" train --model tiny <<'EOF'
--threads | i | -1 0 1025
--micro-batch-size | i | -1 0
--seq-length | i | -1
--steps | i | -1 0
--warmup | i | -1
EOF
numeric dtbench "$DTBENCH" gelu <<'EOF'
--n | i | -1 0 4294967297
--iters | i | -1
EOF
numeric dtbench "$DTBENCH" allreduce <<'EOF'
--allreduce-chunk-bytes | i | -1
--min-bytes | i | -1 0 3 1073741825
--max-bytes | i | -1 0 3 1073741825
EOF
numeric dtbench "$DTBENCH" pipeline <<'EOF'
--pipeline-model-parallel-size | i | -1 65
--num-layers | i | -1 0 1025
--hidden-size | i | -1 0 3 65537
EOF
numeric dtbench "$DTBENCH" interop --model tiny <<'EOF'
--repeats | i | -1 0 101
--threads | i | -1 0 1025
EOF
numeric dtbench "$DTBENCH" compose <<'EOF'
--repeats | i | -1 0 65
EOF
numeric dtbench "$DTBENCH" bubbles "$TMP/pp.json" <<'EOF'
--skip | i | -1 1000000001
EOF
table dtbench "$DTBENCH" <<'EOF'
2 | --seq-length 100 | train --model tiny --seq-length 100
2 | too many tokens | train --model tiny --micro-batch-size 100000000
2 | too many tokens | recompute --model tiny --micro-batch-size 2147483647
2 | --fp16 and --bf16 | train --fp16 --bf16
2 | --fp16 | gemm --fp16
2 | --device cuda | recompute --device cuda
2 | --device cpu | gelu --device cpu
2 | --pipeline-split | pipeline --pipeline-split 1,x
2 | --pipeline-split | pipeline --pipeline-split 0
2 | --pipeline-split | pipeline --pipeline-split ''
2 | unknown command | frobnicate
2 | run under mpirun -np 2 | compose
2 | --steps 1: expected at least 2 | compose --steps 1
2 | --bogus | train --bogus 1
2 | go together | interop --model tiny --tokenizer $TMP
1 | unknown preset | interop --model nosuch
1 | --tokenizer $TMP/missing | interop --model tiny --tokenizer $TMP/missing --data $TMP/pp.json
2 | expected trace files | bubbles
2 | --skip | bubbles --skip
2 | unknown flag | bubbles --bogus $TMP/pp.json
1 | $TMP/missing.json | bubbles $TMP/missing.json
1 | junk.bin | bubbles $TMP/junk.bin
1 | t-cut.json | bubbles $TMP/t-cut.json
1 | not a dtrain trace | bubbles $TMP/chrome.json
EOF
# issue 34: special files as trace inputs (D5), control bytes in what a file holds (D10)
table dtbench "$DTBENCH" <<'EOF'
1 | $TMP/fifo: is a pipe | bubbles $TMP/fifo
1 | /dev/zero: is a character device | bubbles /dev/zero
1 | $TMP/fifo: is a pipe | flows $TMP/fifo
1 | /dev/zero: is a character device | flows /dev/zero
1 | machine.cluster is 5000 bytes | bubbles $TMP/t-cluster.json
EOF
one_case dtbench 1 '"\x1b[2J"' - "$DTBENCH" bubbles "$TMP/t-escfmt.json"
no_raw_esc "dtbench bubbles t-escfmt.json"

echo "$CATALOGUE: $cases cases, $failures failure(s)"
[ "$failures" -eq 0 ] || exit 1
exit 0
