#!/usr/bin/env bash
# cluster_rsh.sh — OpenMPI's remote shell into scripts/cluster.sh's nodes: what ssh is to
# a real cluster. mpirun's rsh launcher (--mca plm_rsh_agent) calls it as
#
#   cluster_rsh.sh [ssh-style options] NODE COMMAND...
#
# with NODE a name of the hostfile, PREFIX-node<i> (CLUSTER_PREFIX, as cluster.sh names
# its namespaces); it runs COMMAND (OpenMPI's orted) inside that node's network
# namespace, in a UTS namespace of its own whose hostname is NODE, so that OpenMPI sees
# one host per node (it tells nodes apart by hostname) and uses shared memory only
# between the ranks of one node. Anything that is not one of the cluster's nodes is
# refused: it never reaches a real host.
set -eu
while [ $# -gt 0 ]; do  # options an rsh launcher may pass (-x: no X forwarding, ...)
    case $1 in -*) shift ;; *) break ;; esac
done
[ $# -ge 2 ] || { echo "cluster_rsh.sh: usage: cluster_rsh.sh NODE COMMAND..." >&2; exit 2; }
node=$1; shift
prefix=${CLUSTER_PREFIX:-crs}
case $node in
    "$prefix"-node[0-9]*) ;;
    *) echo "cluster_rsh.sh: '$node' is not a node of the cluster $prefix (want $prefix-node<i>)" >&2; exit 2 ;;
esac
ip netns list | awk '{print $1}' | grep -qx "$node" ||
    { echo "cluster_rsh.sh: no namespace $node (bash scripts/cluster.sh up first)" >&2; exit 2; }
# The command arrives as words an ssh would hand to a login shell: run it by sh -c.
exec ip netns exec "$node" unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "$node" "$@"
