#!/bin/sh
# cluster-check.sh: make check's run of `tests/cluster.sh check`, the
# emulated 2-node cluster (docs/cluster.md): bad flags, rank placement,
# shared memory inside a node, the ring's busbw across the shaped link
# against what the link carried for two TCP streams and against Open
# MPI's allreduce, both in the same run, and a 4-rank dtrain job across
# the nodes. Skipped (77) when not root or without network namespaces.
# DT_BUILDDIR and DT_SRCDIR as make check sets them. By hand,
# DT_CLUSTER_CHECK_FORCE_SLOW=1 slows the ring (256-byte chunks): the check
# must then fail. POSIX sh.
exec sh "${DT_SRCDIR:-$(dirname "$0")/..}/tests/cluster.sh" check
