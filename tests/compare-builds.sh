#!/bin/sh
# compare-builds.sh OLD NEW: the same commands on two built trees, and
# their results compared. For restructurings that must not change
# behaviour: every layout's losses and log, summaries, checkpoint bytes,
# traces (up to timestamps) and dtsim's outputs must be identical.
#
#   git worktree add /tmp/old <commit> && (cd /tmp/old && ./bootstrap &&
#       ./configure && make -j2)
#   tests/compare-builds.sh /tmp/old .
#
# What is normalised away, and why: the log's throughput and ETA, the
# final line's seconds and tokens/s, the summary's tokens_per_second and
# elapsed_seconds, dtsim's own run time (wall_seconds, "events in X s"),
# the trace events' ts and dur (wall-clock times), the trace header's clock
# (sync id, offsets, start times: new every run) and dtrain.lock (host:pid);
# trace events are compared as a sorted multiset, since the comm thread's
# events interleave with the main thread's in a timing-dependent order.
# Measured traces that dtsim reads are made once, by OLD, so that both
# simulators read the same input. ps-async runs with one worker (with
# several, the order of pushes depends on timing).
#
# Issue 36 added the layer runner's cells (ZeRO-2/3 with 16 bits and
# recomputation, the zero-bubble profile and pipelines with recomputation,
# interleaving, tensor parallelism in bf16, a ZeRO-3 checkpoint) and
# ZeRO-2/3 on a pipeline and on tensor parallelism (which builds before
# 23f6d0d refuse).
#
# Exit 0 when every command's results agree, 1 with the differing
# command and a diff otherwise, 2 on bad usage.
set -u
if [ $# -ne 2 ] || [ ! -x "$1/dtrain" ] || [ ! -x "$2/dtrain" ]; then
    echo "usage: compare-builds.sh OLD_BUILD NEW_BUILD (each with ./dtrain, ./dtsim built)" >&2
    exit 2
fi
OLD=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/mpi-env.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dt-compare.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
MPI="mpirun --allow-run-as-root -np"

# name | command (run in a scratch folder; $B is the build's top folder)
CASES='
single|$B/dtrain --train-iters 30 --log-interval 5 --eval-interval 15 --summary s.json --trace t.json
accumulation|$B/dtrain --train-iters 20 --micro-batch-size 32 --global-batch-size 128 --log-interval 5 --summary s.json --trace t.json
recompute-selective|$B/dtrain --train-iters 20 --recompute-activations --log-interval 5 --summary s.json
recompute-full|$B/dtrain --train-iters 20 --recompute-granularity full --recompute-num-layers 1 --log-interval 5 --summary s.json --trace t.json
fp16|$B/dtrain --train-iters 30 --fp16 --initial-loss-scale 1e9 --loss-scale-window 5 --log-interval 5 --summary s.json --trace t.json
bf16|$B/dtrain --train-iters 20 --bf16 --log-interval 5 --summary s.json
lars|$B/dtrain --train-iters 20 --optimizer lars --lr 0.5 --log-interval 5 --summary s.json --trace t.json
lamb-sqrt|$B/dtrain --train-iters 20 --optimizer lamb --lr-scaling sqrt --base-batch-size 64 --log-interval 5 --summary s.json
skip-nonfinite|$B/dtrain --train-iters 10 --lr 1e30 --clip-grad 0 --skip-nonfinite --log-interval 1 --summary s.json
mlp-bn|$B/dtrain --model mlp-bn --task blobs --train-iters 40 --micro-batch-size 16 --global-batch-size 64 --bn-momentum-adjust --log-interval 10 --summary s.json
ring|$MPI 2 $B/dtrain --train-iters 20 --micro-batch-size 64 --log-interval 5 --summary s.json --trace t.json
tree|$MPI 2 $B/dtrain --train-iters 20 --micro-batch-size 64 --allreduce tree --log-interval 5 --summary s.json
mpi-allreduce|$MPI 2 $B/dtrain --train-iters 20 --micro-batch-size 64 --allreduce mpi --log-interval 5 --summary s.json
dp-nobuckets|$MPI 2 $B/dtrain --train-iters 20 --micro-batch-size 64 --bucket-size-mb 0 --log-interval 5 --summary s.json
dp-mlp-bn|$MPI 2 $B/dtrain --model mlp-bn --task blobs --train-iters 20 --micro-batch-size 16 --global-batch-size 64 --log-interval 5 --summary s.json
ps-sync|$MPI 3 $B/dtrain --train-iters 20 --micro-batch-size 64 --allreduce ps-sync --num-ps-servers 1 --log-interval 5 --summary s.json
ps-async|$MPI 2 $B/dtrain --train-iters 20 --allreduce ps-async --num-ps-servers 1 --log-interval 5 --summary s.json
zero|$MPI 2 $B/dtrain --train-iters 20 --micro-batch-size 64 --use-distributed-optimizer --log-interval 5 --summary s.json --trace t.json
zero-fp16|$MPI 2 $B/dtrain --train-iters 20 --micro-batch-size 64 --use-distributed-optimizer --fp16 --log-interval 5 --summary s.json
gpipe|$MPI 2 $B/dtrain --train-iters 10 --micro-batch-size 32 --pipeline-model-parallel-size 2 --pipeline-schedule gpipe --log-interval 5 --summary s.json
1f1b|$MPI 2 $B/dtrain --train-iters 10 --micro-batch-size 32 --pipeline-model-parallel-size 2 --log-interval 5 --summary s.json --trace t.json
pipedream|$MPI 2 $B/dtrain --train-iters 10 --micro-batch-size 32 --pipeline-model-parallel-size 2 --pipeline-schedule pipedream --log-interval 5 --summary s.json
vsync|$MPI 2 $B/dtrain --train-iters 10 --micro-batch-size 32 --pipeline-model-parallel-size 2 --pipeline-schedule pipedream-vsync --log-interval 5 --summary s.json
tp|$MPI 2 $B/dtrain --train-iters 10 --tensor-model-parallel-size 2 --log-interval 5 --summary s.json
tp-pp|$MPI 4 $B/dtrain --train-iters 6 --micro-batch-size 32 --num-layers 2 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --log-interval 2 --summary s.json
zero2|$MPI 2 $B/dtrain --train-iters 10 --micro-batch-size 64 --zero-stage 2 --log-interval 5 --summary s.json --trace t.json
zero3-bf16|$MPI 2 $B/dtrain --train-iters 10 --micro-batch-size 64 --zero-stage 3 --zero-prefetch --bf16 --recompute-activations --log-interval 5 --summary s.json
pp-zero3-tied|$MPI 4 $B/dtrain --train-iters 6 --micro-batch-size 16 --num-layers 2 --pipeline-model-parallel-size 2 --zero-stage 3 --tie-embeddings-and-output-weights --log-interval 2 --summary s.json
tp-zero2-bf16|$MPI 4 $B/dtrain --train-iters 6 --micro-batch-size 16 --tensor-model-parallel-size 2 --zero-stage 2 --bf16 --log-interval 2 --summary s.json
fp16-full|$B/dtrain --train-iters 10 --fp16 --recompute-granularity full --recompute-num-layers 1 --log-interval 5 --summary s.json
zb-profile|$B/dtrain --train-iters 5 --pipeline-schedule zb-h1 --bf16 --log-interval 1 --summary s.json --trace t.json
zb-h1-full|$MPI 2 $B/dtrain --train-iters 6 --micro-batch-size 32 --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1 --recompute-granularity full --recompute-num-layers 1 --bf16 --log-interval 2 --summary s.json
zb-v-selective|$MPI 2 $B/dtrain --train-iters 6 --micro-batch-size 32 --num-layers 4 --pipeline-model-parallel-size 2 --pipeline-schedule zb-v --recompute-activations --fp16 --log-interval 2 --summary s.json
interleaved|$MPI 2 $B/dtrain --train-iters 6 --micro-batch-size 16 --global-batch-size 64 --num-layers 4 --pipeline-model-parallel-size 2 --pipeline-schedule interleaved-1f1b --virtual-pipeline-model-parallel-size 2 --log-interval 2 --summary s.json
tp-bf16-selective|$MPI 2 $B/dtrain --train-iters 6 --tensor-model-parallel-size 2 --bf16 --recompute-activations --log-interval 2 --summary s.json
save-zero3|$MPI 2 $B/dtrain --train-iters 10 --micro-batch-size 64 --zero-stage 3 --save ck --save-interval 5 --log-interval 5
save|$B/dtrain --train-iters 20 --save ck --save-interval 10 --log-interval 5 --summary s.json
resume|$B/dtrain --train-iters 20 --save ck --save-interval 10 --log-interval 5 && rm -rf ck/iter_00000020 && printf iter_00000010 > ck/latest && $B/dtrain --train-iters 30 --load ck --log-interval 5 --summary s.json
save-dp-zero|$MPI 2 $B/dtrain --train-iters 10 --micro-batch-size 64 --use-distributed-optimizer --save ck --save-interval 5 --log-interval 5
save-pp|$MPI 2 $B/dtrain --train-iters 10 --micro-batch-size 32 --pipeline-model-parallel-size 2 --save ck --save-interval 5 --log-interval 5
save-ps|$MPI 3 $B/dtrain --train-iters 10 --micro-batch-size 64 --allreduce ps-sync --num-ps-servers 1 --save ck --save-interval 5 --log-interval 5
bad-input|$B/dtrain --pipeline-model-parallel-size 2 --pipeline-schedule pipedream --fp16; $B/dtrain --micro-batch-size 0; $B/dtsim run --hw /nonexistent.json
print-schedule|$B/dtrain --print-schedule --pipeline-model-parallel-size 4 --micro-batch-size 32 --pipeline-schedule pipedream-vsync
dtsim-run|$B/dtsim run --config $IN/profile.json --profile $IN/profile.json --micro-batch-size 32 --global-batch-size 128 --summary sim.json --trace simt.json
dtsim-run-pp|$B/dtsim run --config $IN/pp.rank0.json --profile $IN/profile.json --hw $HW/cpu-2core.json --trace simt.json
dtsim-big|$B/dtsim run --model gpt2-124m --micro-batch-size 16 --seq-length 1024 --bf16 --train-iters 3 --data-parallel-size 16 --allreduce nccl --hw $HW/h100-ib.json
dtsim-ps|$B/dtsim run --allreduce ps-async --num-ps-servers 1 --data-parallel-size 2 --micro-batch-size 16 --micro-batches 1 --train-iters 40 --slow-rank 1:30 --profile $IN/profile.json --hw $HW/cpu-2core.json --summary sim.json
dtsim-amp|$B/dtsim run --config $IN/fp16.json --grad-trace $IN/fp16.json --profile $IN/profile.json --seed 3
dtsim-sweep|$B/dtsim sweep --model gpt2-124m --micro-batch-size 4 --seq-length 1024 --pipeline-model-parallel-size 8 --data-parallel-size 128 --train-iters 2 --hw $HW/h100-ib.json --sweep micro-batches=16,32,64 --sweep link-bandwidth-scale=0.5,1,4
dtsim-validate|$B/dtsim validate --profile $IN/profile.json --hw $HW/cpu-2core.json $IN/pp.rank0.json
dtsim-validate-nodes|$B/dtsim validate --profile $IN/profile.json --hw $HW/cpu-2core.json --devices-per-node 2 --cores-per-node 2 $IN/pp.rank0.json
'

# Normalise a run's folder into one text: log, summaries, traces, checkpoint checksums.
normalise() { # DIR BUILD HW
    (cd "$1" && BDIR="$2" HWDIR="$3" python3 - <<'EOF'
import glob, hashlib, json, os, re
def log(t):
    t = re.sub(r'[0-9.]+[kM]? tok/s', 'X tok/s', t)
    t = re.sub(r'\beta [0-9:]+', 'eta X', t)
    t = re.sub(r'events in [0-9.]+ s', 'events in X s', t)
    t = re.sub(r'in [0-9.]+ s \([0-9.]+ s training\)', 'in X s', t)
    t = re.sub(r'tokens/s [0-9.]+', 'tokens/s X', t)
    t = t.replace(os.environ['HWDIR'], 'HW').replace(os.environ['BDIR'], 'BUILD').replace(os.getcwd(), 'DIR')
    return t
print(log(open('out.txt', errors='replace').read()))
for f in sorted(glob.glob('*.json')):
    try:
        d = json.load(open(f))
    except Exception as e:
        print(f, 'unreadable', e); continue
    if isinstance(d, dict) and 'traceEvents' in d:
        ev = []
        for e in d['traceEvents']:
            e = dict(e); e.pop('ts', None); e.pop('dur', None)
            ev.append(json.dumps(e, sort_keys=True))
        other = {k: v for k, v in d.items() if k != 'traceEvents'}
        # a run's clock: the ranks' sync id, offsets and start times differ every run
        od = other.get('otherData', {})
        for sect in (od.get('clock'), od.get('merge')):
            if isinstance(sect, dict):
                for k in ('sync_id', 'start_ns', 'error_ns', 'offset_ns'): sect.pop(k, None)
                for r in sect.get('ranks', []) if isinstance(sect.get('ranks'), list) else []:
                    if isinstance(r, dict):
                        for k in ('error_ns', 'offset_ns'): r.pop(k, None)
        print(f, 'trace', log(json.dumps(other, sort_keys=True)), len(ev), hashlib.sha256(log('\n'.join(sorted(ev))).encode()).hexdigest())
    else:
        if isinstance(d, dict):
            for k in ('tokens_per_second', 'elapsed_seconds', 'wall_seconds'): d.pop(k, None)
        print(f, log(json.dumps(d, sort_keys=True)))
for f in sorted(glob.glob('ck/**/*', recursive=True)):
    if os.path.isfile(f) and os.path.basename(f) != 'dtrain.lock': # the lock holds host:pid
        print(f, hashlib.sha256(open(f, 'rb').read()).hexdigest())
EOF
    )
}

# Inputs for dtsim, made once by OLD: a profile, a 2-stage pipeline trace, an fp16 run's gradients.
IN="$WORK/in"
mkdir -p "$IN"
(cd "$IN" &&
    "$OLD/dtrain" --train-iters 20 --micro-batch-size 32 --trace profile.json >/dev/null &&
    $MPI 2 "$OLD/dtrain" --train-iters 10 --micro-batch-size 32 --pipeline-model-parallel-size 2 --trace pp.json >/dev/null &&
    "$OLD/dtrain" --train-iters 30 --fp16 --loss-scale-window 5 --trace fp16.json >/dev/null) || {
    echo "compare-builds: making dtsim's inputs with $OLD failed" >&2
    exit 1
}

printf '%s\n' "$CASES" | while IFS='|' read -r name cmd; do
    [ -n "$name" ] || continue
    for side in old new; do
        B=$OLD
        [ "$side" = new ] && B=$NEW
        HW=$B/sim/hw # an out-of-tree build: the hardware files of the source tree
        [ -d "$HW" ] || HW=$(cd "$HERE/../sim/hw" && pwd)
        d="$WORK/$name/$side"
        mkdir -p "$d"
        (cd "$d" && eval "$cmd" </dev/null >out.txt 2>&1; echo "exit $?" >>out.txt)
        normalise "$d" "$B" "$(cd "$HW" && pwd)" >"$WORK/$name/$side.txt"
    done
    if cmp -s "$WORK/$name/old.txt" "$WORK/$name/new.txt"; then
        echo "same: $name"
    else
        echo "DIFFERENT: $name"
        diff "$WORK/$name/old.txt" "$WORK/$name/new.txt" | head -20
        echo x >>"$WORK/failed"
    fi
done
total=$(printf '%s\n' "$CASES" | grep -c '|')
bad=0
[ -f "$WORK/failed" ] && bad=$(wc -l <"$WORK/failed")
echo "compare-builds: $((total - bad)) of $total commands identical"
[ "$bad" -eq 0 ]
