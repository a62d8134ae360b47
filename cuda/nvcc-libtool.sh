#!/bin/sh
# nvcc-libtool.sh: runs nvcc as the compiler of `libtool --mode=compile`.
#
# libtool appends its C compiler's flags for position-independent objects
# (-fPIC -DPIC; -fno-common on some hosts) to the command it runs. nvcc
# rejects -fPIC as its own option, so each such host-compiler flag is passed
# on as `-Xcompiler FLAG`; -D, -o, -c and everything else reach nvcc as they
# are. (libtool itself consumes `-Xcompiler X` in its arguments, so host
# flags meant for nvcc are written `--compiler-options=X` in cuda/local.mk.)
# Usage:
#   libtool --tag=CC --mode=compile $(SHELL) nvcc-libtool.sh $(NVCC) FLAGS -c -o x.lo x.cu
# POSIX sh; the argument list is rebuilt in place with `set --`.
n=$#
while [ "$n" -gt 0 ]; do
    a=$1
    shift
    n=$((n - 1))
    case $a in
    -fPIC | -fpic | -fno-common) set -- "$@" -Xcompiler "$a" ;;
    *) set -- "$@" "$a" ;;
    esac
done
exec "$@"
