#!/bin/sh
# cluster-rsh.sh: the remote-shell agent of tests/cluster.sh's emulated
# cluster (docs/cluster.md). Open MPI's rsh launcher calls it as it would
# call ssh:
#   cluster-rsh.sh [-options] HOST COMMAND...
# It runs COMMAND (joined by spaces and given to sh -c, as ssh gives it to
# the remote login shell) in the network namespace of the node whose
# address is HOST, read from the cluster's state file named by
# $DT_CLUSTER_STATE (set by `cluster.sh mpirun`). Unlike ssh, the command
# keeps this process's environment (the same machine); `mpirun -x VAR` is
# still what carries a variable to the ranks on a real cluster.
# POSIX sh.

PROG=cluster-rsh.sh
[ -n "${DT_CLUSTER_STATE:-}" ] && [ -r "$DT_CLUSTER_STATE" ] ||
    { echo "$PROG: DT_CLUSTER_STATE does not name a cluster state file (run through 'cluster.sh mpirun')" >&2; exit 255; }
# ssh-style options before the host (none are meaningful here)
while [ $# -gt 0 ]; do
    case $1 in
        -[1246AaCfGgKkMNnqsTtVXxYy]) shift ;;
        -?) shift; [ $# -gt 0 ] && shift ;; # an option with a value (-l user, -p port, ...)
        *) break ;;
    esac
done
[ $# -ge 2 ] || { echo "$PROG: expected HOST COMMAND..." >&2; exit 255; }
host=${1#*@}
shift
# the state file's lines "node_I=NAMESPACE ADDRESS"
ns=$(awk -v h="$host" -F'[= ]' '/^node_[0-9]+=/ && $3 == h { print $2; exit }' "$DT_CLUSTER_STATE")
[ -n "$ns" ] || { echo "$PROG: $host is not a node of the cluster in $DT_CLUSTER_STATE" >&2; exit 255; }
# a UTS namespace too: the node's own host name (Open MPI names its shared
# memory segments and session directories after it)
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$ns" "$*"
