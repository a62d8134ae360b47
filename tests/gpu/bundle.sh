#!/bin/sh
# bundle.sh: make gpu-bundle/, what tests/gpu/device-check.sh needs on a
# bare GPU image that has a compiler, the CUDA toolkit and Python but no
# autotools, OpenBLAS, jansson or Check (docs/cuda.md, "The device check").
#
#   tests/gpu/bundle.sh [DIR]          (default: gpu-bundle in the source tree)
#
# Run it here, on the development machine, from a bootstrapped tree (it
# needs ./configure and the Makefile.in files that ./bootstrap makes). DIR
# receives:
#   autotools.tar.gz  the generated build files (configure, Makefile.in,
#                     aclocal.m4, config.h.in, build-aux/, m4/), so the
#                     device builds the working tree without autotools;
#   debs/             Debian's packages of OpenBLAS, oneDNN, jansson, Check
#                     (and their libraries), and make, from `apt-get download`;
#                     the device unpacks them with dpkg-deb -x (or ar + tar)
#                     into a private prefix;
#   MANIFEST          what the bundle holds: the sha256 of every input of
#                     the generated files (the device check refuses a stale
#                     bundle with one line), each package's version, and the
#                     newest glibc symbol version its libraries and make need.
# DIR is made in a temporary folder beside it and renamed into place, so a
# failed run leaves the previous bundle (or none), never half of one.
# Exit status: 0 done, 1 a step failed (one line says which), 2 bad usage.
# POSIX sh.

set -u
LC_ALL=C
export LC_ALL

SRC=$(cd "$(dirname "$0")/../.." && pwd) || exit 2
case ${1:-} in
-h | --help)
    sed -n '2,/^$/s/^# \{0,1\}//p' "$0"
    exit 0
    ;;
esac
if [ $# -gt 1 ]; then
    echo "bundle.sh: expected at most one argument (the bundle folder), got $#" >&2
    exit 2
fi
DIR=${1:-$SRC/gpu-bundle}
# absolute: the steps below cd into the temporary folder made beside it
case $DIR in
/*) ;;
*) DIR=$(pwd)/$DIR ;;
esac
die() {
    echo "bundle.sh: $*" >&2
    exit 1
}

# The packages, by Debian name: the libraries and their headers, the
# libraries those need beyond libc and libgcc, and make (a bare image may
# lack it). dpkg -x ignores dependencies: the list is the closure, but for
# libgomp1 and libstdc++6 (oneDNN's), which come with the image's compiler.
PKGS="libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0 \
libdnnl2 libdnnl-dev ocl-icd-libopencl1 \
libjansson4 libjansson-dev check libsubunit0 libsubunit-dev make"

# The inputs of the generated files: a change to any of them after bundling
# makes the bundle stale (Makefile.in lists the sources to build).
inputs() {
    (cd "$SRC" && ls configure.ac Makefile.am */local.mk */*/local.mk dtrain.pc.in 2>/dev/null | sort)
}

for f in configure Makefile.in aclocal.m4 config.h.in build-aux/install-sh build-aux/ltmain.sh; do
    [ -e "$SRC/$f" ] || die "$SRC/$f is missing: run ./bootstrap first (the bundle carries its output)"
done
for f in $(inputs); do
    [ "$SRC/$f" -nt "$SRC/Makefile.in" ] && die "$SRC/$f is newer than Makefile.in: run ./bootstrap (or make) first"
done
command -v apt-get >/dev/null 2>&1 || die "apt-get not found: the packages come from Debian's archive"

PARENT=$(dirname "$DIR")
mkdir -p "$PARENT" || die "cannot create $PARENT"
TMP=$(mktemp -d "$PARENT/.gpu-bundle.XXXXXX") || die "mktemp in $PARENT failed"
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' HUP INT TERM

echo "bundle.sh: generated build files"
(cd "$SRC" && tar -czf "$TMP/autotools.tar.gz" configure Makefile.in aclocal.m4 config.h.in build-aux m4) ||
    die "tar of the generated files failed"

echo "bundle.sh: apt-get download $PKGS"
mkdir "$TMP/debs" || die "mkdir $TMP/debs failed"
# shellcheck disable=SC2086 # a list of package names
if ! (cd "$TMP/debs" && apt-get download -q $PKGS >"$TMP/apt.log" 2>&1); then
    if [ "$(id -u)" = 0 ]; then
        echo "bundle.sh: apt-get download failed; updating the package lists and trying again"
        apt-get update -qq >/dev/null 2>&1
        # shellcheck disable=SC2086
        (cd "$TMP/debs" && apt-get download -q $PKGS >"$TMP/apt.log" 2>&1) ||
            die "apt-get download failed: $(grep -m1 '^E:' "$TMP/apt.log")"
    else
        die "apt-get download failed: $(grep -m1 '^E:' "$TMP/apt.log") (as root it would update the lists)"
    fi
fi

echo "bundle.sh: MANIFEST"
# the newest GLIBC_x.y that a carried library or program needs, from its dynamic symbols
glibc_need() {
    x=$TMP/x
    rm -rf "$x" && mkdir "$x"
    for d in "$TMP"/debs/*.deb; do dpkg-deb -x "$d" "$x"; done
    { find "$x" -name '*.so*' -type f; find "$x/usr/bin" -type f 2>/dev/null; } | while read -r so; do
        objdump -T "$so" 2>/dev/null | grep -o 'GLIBC_[0-9.]*'
    done | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -u | tail -n 1
    rm -rf "$x"
}
{
    echo "# gpu-bundle: made by tests/gpu/bundle.sh on $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "source $(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "glibc $(glibc_need)"
    for d in "$TMP"/debs/*.deb; do
        echo "deb $(dpkg-deb -f "$d" Package) $(dpkg-deb -f "$d" Version) $(basename "$d")"
    done
    (cd "$SRC" && inputs | while read -r f; do echo "input $(sha256sum "$f")"; done)
} >"$TMP/MANIFEST" || die "writing MANIFEST failed"
n=$(grep -c '^deb ' "$TMP/MANIFEST")
[ "$n" -eq "$(echo $PKGS | wc -w)" ] || die "expected $(echo $PKGS | wc -w) packages, got $n (see $TMP/apt.log)"
rm -f "$TMP/apt.log"

rm -rf "$DIR.old"
[ -e "$DIR" ] && { mv "$DIR" "$DIR.old" || die "cannot move the old $DIR aside"; }
mv "$TMP" "$DIR" || die "cannot rename $TMP to $DIR"
rm -rf "$DIR.old"
trap - EXIT
echo "bundle.sh: $DIR: $(du -sh "$DIR" | cut -f1), $n packages, needs glibc >= $(sed -n 's/^glibc //p' "$DIR/MANIFEST")"
