#!/bin/sh
# dry-run.sh: the device check in a bare image, on this GPU-less machine.
#
#   tests/gpu/dry-run.sh [ROOT]      (default: .dry-run in the source tree)
#
# Builds, once, a chroot that resembles the GPU machine's image: a minimal
# Debian (debootstrap --variant=minbase, plus gcc, g++ and python3, nothing
# else: no make, pkg-config, autotools, OpenBLAS, jansson, Check or MPI),
# the CUDA toolkit's folder copied in WITHOUT its NCCL, and NCCL as the
# Python wheel nvidia-nccl-cu13 (pip download, unpacked into the image's
# site-packages), as on the GPU machine. Then it copies the working tree
# as the device tool does (tracked and untracked-not-ignored files, plus
# gpu-bundle/, refreshed by `make gpu-bundle` as docs/cuda.md says) and runs
# tests/gpu/device-check.sh inside the chroot. Without a GPU the check must
# get through unpacking, configure and the build, and report every GPU
# step as NO-DEVICE: this script passes when its exit status is 4 and OUT
# holds at most 8 files. The results land in ROOT/out.
#
# Root only (chroot, mount); exits 77 otherwise. The image is kept in
# ROOT/image for the next run (rm -rf ROOT to start afresh). Environment:
# DT_JOBS (2), DT_CHECK_BUDGET (3000: a build on 2 cores is slower than on
# the GPU machine's 16), CUDA_SRC (/usr/local/cuda, resolved). The mirror
# is the one this machine's apt uses. POSIX sh.

set -u
LC_ALL=C
export LC_ALL

SRC=$(cd "$(dirname "$0")/../.." && pwd) || exit 2
case ${1:-} in -h | --help)
    sed -n '2,/^$/s/^# \{0,1\}//p' "$0"
    exit 0
    ;;
esac
ROOT=${1:-$SRC/.dry-run}
die() {
    echo "dry-run.sh: $*" >&2
    exit 1
}
if [ "$(id -u)" != 0 ]; then
    echo "dry-run.sh: SKIP: needs root (debootstrap, chroot, mount)"
    exit 77
fi
CUDA_SRC=$(cd "${CUDA_SRC:-/usr/local/cuda}" 2>/dev/null && pwd -P) || die "no CUDA toolkit at ${CUDA_SRC:-/usr/local/cuda}"
[ -x "$CUDA_SRC/bin/nvcc" ] || die "$CUDA_SRC/bin/nvcc not found"
IMG=$ROOT/image
mkdir -p "$ROOT/cache" || die "cannot create $ROOT"

# ---- the image, once -------------------------------------------------------
if [ ! -f "$IMG/.dtrain-image-done" ]; then
    command -v debootstrap >/dev/null 2>&1 || {
        echo "dry-run.sh: installing debootstrap"
        apt-get install -y -qq debootstrap >/dev/null 2>&1 || die "apt-get install debootstrap failed"
    }
    MIRROR=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
    [ -n "$MIRROR" ] || MIRROR=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
    [ -n "$MIRROR" ] || die "no Debian mirror in this machine's apt sources"
    SUITE=$(. /etc/os-release && echo "$VERSION_CODENAME")
    rm -rf "$IMG"
    echo "dry-run.sh: debootstrap --variant=minbase $SUITE (gcc, g++, python3)"
    debootstrap --variant=minbase --include=gcc,g++,python3 "$SUITE" "$IMG" "$MIRROR" \
        >"$ROOT/debootstrap.log" 2>&1 || die "debootstrap failed (see $ROOT/debootstrap.log)"
    for t in make pkg-config autoreconf mpicc; do
        chroot "$IMG" sh -c "command -v $t" >/dev/null 2>&1 && die "the image has $t; it should not"
    done
    echo "dry-run.sh: the CUDA toolkit from $CUDA_SRC, without NCCL"
    mkdir -p "$IMG/usr/local" || die "mkdir failed"
    # hard links where the file system allows (the image only reads them)
    cp -al "$CUDA_SRC" "$IMG/usr/local/cuda-toolkit" 2>/dev/null || cp -a "$CUDA_SRC" "$IMG/usr/local/cuda-toolkit" ||
        die "copying $CUDA_SRC failed"
    find "$IMG/usr/local/cuda-toolkit" -name '*nccl*' -exec rm -rf {} + 2>/dev/null
    ln -sfn cuda-toolkit "$IMG/usr/local/cuda"
    echo "dry-run.sh: NCCL as the Python wheel nvidia-nccl-cu13"
    ls "$ROOT"/cache/nvidia_nccl_cu13-*.whl >/dev/null 2>&1 ||
        pip download -q --no-deps -d "$ROOT/cache" nvidia-nccl-cu13 >"$ROOT/pip.log" 2>&1 ||
        die "pip download nvidia-nccl-cu13 failed (see $ROOT/pip.log)"
    SITE=$(chroot "$IMG" python3 -c 'import site; print(site.getsitepackages()[0])') || die "python3 in the image failed"
    mkdir -p "$IMG$SITE" || die "mkdir $IMG$SITE failed"
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
        "$(ls "$ROOT"/cache/nvidia_nccl_cu13-*.whl | head -n 1)" "$IMG$SITE" || die "unpacking the wheel failed"
    touch "$IMG/.dtrain-image-done"
fi

# ---- the working tree, as the device tool copies it -------------------------
# the bundle as docs/cuda.md tells a person to make it: make gpu-bundle in a
# tree configured in place
[ -f "$SRC/Makefile" ] || die "$SRC has no Makefile: run ./bootstrap && ./configure there first (docs/cuda.md)"
make -C "$SRC" gpu-bundle || die "make gpu-bundle failed"
rm -rf "$IMG/src" "$IMG/out" "$ROOT/out"
mkdir -p "$IMG/src" "$IMG/out" || die "mkdir failed"
(cd "$SRC" && git ls-files -co --exclude-standard | while read -r f; do [ -e "$f" ] && echo "$f"; done |
    tar -cf - -T - gpu-bundle) | tar -xf - -C "$IMG/src" || die "copying the working tree failed"

# ---- the check, inside ------------------------------------------------------
umount_all() {
    umount "$IMG/proc" 2>/dev/null
    umount "$IMG/dev" 2>/dev/null
}
trap umount_all EXIT
trap 'exit 130' HUP INT TERM
mount -t proc proc "$IMG/proc" || die "mount proc failed"
mount --bind /dev "$IMG/dev" || die "mount --bind /dev failed"
echo "dry-run.sh: tests/gpu/device-check.sh in the chroot $IMG"
t0=$(date +%s)
chroot "$IMG" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    TMPDIR=/tmp DT_JOBS="${DT_JOBS:-2}" DT_CHECK_BUDGET="${DT_CHECK_BUDGET:-3000}" DT_CUDA_ARCH=90 \
    sh /src/tests/gpu/device-check.sh /out
rc=$?
umount_all
cp -a "$IMG/out" "$ROOT/out"
n=$(find "$ROOT/out" -type f | wc -l)
echo "dry-run.sh: device-check.sh exited $rc after $(($(date +%s) - t0)) s; $n files in $ROOT/out"
[ "$n" -le 8 ] || die "$n files in OUT; the device tool returns at most 8"
[ "$rc" = 4 ] || die "expected exit 4 (the build passed, no GPU); got $rc: see $ROOT/out/SUMMARY.md"
echo "dry-run.sh: PASS: configure and build passed in the bare image; every GPU step reported no device"
