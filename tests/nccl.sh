#!/bin/sh
# nccl.sh: the NCCL communicator (tests/check_nccl). Run by `make check`.
# One rank always: skipped (77) without a CUDA build or device, as
# check_nccl says. Then, when nvidia-smi lists more than one GPU and
# mpirun exists, one rank per GPU (at most 4); otherwise it says that the
# multi-rank run was skipped and why.
set -u
LC_ALL=C
export LC_ALL
BUILDDIR=${DT_BUILDDIR:-.}
CHECK=$BUILDDIR/tests/check_nccl
[ -x "$CHECK" ] || { echo "nccl.sh: $CHECK not found (set DT_BUILDDIR)" >&2; exit 99; }
timeout 300 "$CHECK"
rc=$?
[ $rc -eq 0 ] || exit $rc
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$gpus" -lt 2 ]; then
    echo "nccl.sh: multi-rank NCCL skipped: $gpus GPU visible (needs 2 or more)"
    exit 0
fi
command -v mpirun >/dev/null 2>&1 || { echo "nccl.sh: multi-rank NCCL skipped: no mpirun"; exit 0; }
. "${DT_SRCDIR:-.}/tests/mpi-env.sh"
n=$gpus; [ "$n" -gt 4 ] && n=4
timeout 300 mpirun --oversubscribe --allow-run-as-root -np "$n" "$CHECK"
