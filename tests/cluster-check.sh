#!/bin/sh
# cluster-check.sh: make check's run of `tests/cluster.sh check`, the
# emulated 2-node cluster (docs/cluster.md): bad flags, rank placement,
# shared memory inside a node, the shaped link's rate as the ring's busbw,
# and a 4-rank dtrain job across the nodes. Skipped (77) when not root or
# without network namespaces. DT_BUILDDIR and DT_SRCDIR as make check sets
# them. POSIX sh.
exec sh "${DT_SRCDIR:-$(dirname "$0")/..}/tests/cluster.sh" check
