#!/usr/bin/env bash
# cluster.sh — a cluster of N "nodes" on this one machine: each node a network
# namespace of its own, all joined through a bridge in a switch namespace, every node's
# link shaped to a chosen rate (tbf, both directions). Ranks started inside one node
# reach each other over its loopback or shared memory at memory speed; ranks on two
# nodes only over that link, as between the machines of a cluster.
#
#   bash scripts/cluster.sh up [--nodes N] [--inter RATE]   (2 nodes, 1gbit: tc's units)
#   bash scripts/cluster.sh exec NODE COMMAND...             run COMMAND inside node NODE
#   bash scripts/cluster.sh addr NODE                        node NODE's address
#   bash scripts/cluster.sh rate RATE [NODE]                 reshape every link (or NODE's)
#   bash scripts/cluster.sh mpirun -np N PROGRAM...          OpenMPI across the nodes
#   bash scripts/cluster.sh status
#   bash scripts/cluster.sh down                             remove everything it made
#
# Everything it makes carries its own names and addresses: namespaces
# $CLUSTER_PREFIX-switch and $CLUSTER_PREFIX-node0.., links ${CLUSTER_PREFIX}n<i> (in
# the node) and ${CLUSTER_PREFIX}s<i> (in the switch), addresses $CLUSTER_NET.<i+1>/24
# that exist only inside those namespaces (CLUSTER_PREFIX=crs, CLUSTER_NET=10.213.7 by
# default). The host's own interfaces, routes and namespace are never touched, and no
# packet leaves the namespaces it made. `down` removes every namespace with the prefix
# (their links go with them) after killing what still runs in them; `up` first removes
# a set-up an earlier run left behind, and removes its own half-made one if it fails.
# Needs root and network namespaces; without them it says why and exits 77 (skipped).
set -u
PREFIX=${CLUSTER_PREFIX:-crs}
NET=${CLUSTER_NET:-10.213.7}
SW=$PREFIX-switch

die() { echo "cluster.sh: $*" >&2; exit 1; }
skip() { echo "cluster.sh: cannot make a cluster here: $*" >&2; exit 77; }
node_ns() { echo "$PREFIX-node$1"; }
ours() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$PREFIX-(switch|node[0-9]+)$"; }

down() {
    local ns pids left
    for ns in $(ours); do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        # shellcheck disable=SC2086  # pids: a list
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    left=$(ours)
    [ -z "$left" ] || die "could not remove: $left"
}

# tbf for RATE on DEV inside namespace NS (a burst of 1 Mbit: ample above ~10 Mbit/s).
# The queue holds at most 5 ms of traffic: a switch's shallow buffer. A deep one (tbf's
# usual 100 ms) lets TCP fill it, and every message behind it waits: measured on 2 x 2 at
# 100 Mbit, the hierarchical all-reduce took 1.82 / 1.60 / 1.46 s at 100 / 20 / 5 ms of
# queue against its alpha-beta prediction of 1.44 s (the flat ring, one stream per link,
# unchanged).
shape() {  # shape NS DEV RATE
    ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst 1mbit latency 5ms
}

up() {
    local nodes=2 rate=1gbit i
    while [ $# -gt 0 ]; do
        case $1 in
            --nodes) nodes=$2; shift 2 ;;
            --inter) rate=$2; shift 2 ;;
            *) die "up: unknown flag '$1' (--nodes N, --inter RATE)" ;;
        esac
    done
    if ! [[ "$nodes" =~ ^[0-9]+$ ]] || [ "$nodes" -lt 1 ] || [ "$nodes" -gt 64 ]; then
        die "--nodes $nodes: want 1 to 64"
    fi
    [[ "$rate" =~ ^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$ ]] ||
        die "--inter $rate: a rate as tc writes it (200mbit, 1gbit, 50mbps)"
    [ "$(id -u)" -eq 0 ] || skip "it needs root (network namespaces and links)"
    if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
        skip "ip or tc is missing (iproute2)"
    fi
    [ -n "$(ours)" ] && { echo "cluster.sh: removing an earlier set-up: $(ours | tr '\n' ' ')"; down; }
    ip netns add "$SW" 2>/dev/null || skip "'ip netns add' failed: no network namespaces here"
    # What the kernel must have, tried in the switch namespace first: a missing feature
    # is a reason to skip, not a failure (a failure after these is this script's).
    local why=""
    if ! ip netns exec "$SW" ip link add "${PREFIX}pa" type veth peer name "${PREFIX}pb" 2>/dev/null; then
        why="the kernel makes no veth pairs"
    elif ! ip netns exec "$SW" ip link add "${PREFIX}pc" type bridge 2>/dev/null; then
        why="the kernel makes no bridges"
    elif ! shape "$SW" "${PREFIX}pa" 1gbit 2>/dev/null; then
        why="tc's tbf qdisc (rate shaping) is unavailable"
    fi
    ip netns exec "$SW" ip link del "${PREFIX}pa" 2>/dev/null
    ip netns exec "$SW" ip link del "${PREFIX}pc" 2>/dev/null
    [ -z "$why" ] || { down; skip "$why"; }
    trap 'down; exit 1' ERR
    set -E
    ip netns exec "$SW" ip link set lo up
    ip netns exec "$SW" ip link add "${PREFIX}br" type bridge
    ip netns exec "$SW" ip link set "${PREFIX}br" up
    for ((i = 0; i < nodes; i++)); do
        local ns n="${PREFIX}n$i" s="${PREFIX}s$i"
        ns=$(node_ns "$i")
        ip netns add "$ns"
        ip netns exec "$ns" ip link set lo up
        # A connection idle for a moment restarts from TCP's slow start by default: a
        # collective that leaves a link idle between its phases (the hierarchical
        # all-reduce's, inside the node) would pay a ramp-up on every call. Cluster
        # networks are tuned not to (net.ipv4.tcp_slow_start_after_idle, per namespace).
        ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_slow_start_after_idle=0 2>/dev/null || true
        # The pair is made inside the node, and one end moved to the switch: neither
        # end ever exists in the host's namespace.
        ip netns exec "$ns" ip link add "$n" type veth peer name "$s"
        ip netns exec "$ns" ip link set "$s" netns "$SW"
        ip netns exec "$ns" ip addr add "$NET.$((i + 1))/24" dev "$n"
        ip netns exec "$ns" ip link set "$n" up
        # TCP's retransmission timeout is at least 200 ms by default, a thousand round
        # trips here: when several flows leave one node at once and the shallow queue
        # drops a window's tail (TCP incast), each lost tail stalls its collective that
        # long. Measured on 2 x 4 at 100 Mbit: 12 timeouts in 7 hierarchical all-reduces,
        # 1.71 s a call against 1.41 s predicted. Cluster networks lower the floor (a
        # route attribute: only this node's route to the other nodes).
        ip netns exec "$ns" ip route replace "$NET.0/24" dev "$n" src "$NET.$((i + 1))" rto_min 10ms
        ip netns exec "$SW" ip link set "$s" master "${PREFIX}br"
        ip netns exec "$SW" ip link set "$s" up
        shape "$ns" "$n" "$rate"    # what the node sends
        shape "$SW" "$s" "$rate"    # what it receives
    done
    trap - ERR
    echo "cluster.sh: $nodes nodes ($PREFIX-node0..$((nodes - 1)), $NET.1..$nodes), each link $rate"
}

# rate RATE [NODE]: every node's link (or NODE's) shaped to RATE from now on, both ways
# (a link slowed or sped up while ranks run).
set_rate() {
    local rate=$1 node=${2:-} ns i
    [[ "$rate" =~ ^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$ ]] ||
        die "rate $rate: a rate as tc writes it (200mbit, 1gbit, 50mbps)"
    for ns in $(ours | sort -V); do
        [ "$ns" = "$SW" ] && continue
        i=${ns##*node}
        [ -n "$node" ] && [ "$node" != "$i" ] && continue
        if ! shape "$ns" "${PREFIX}n$i" "$rate" || ! shape "$SW" "${PREFIX}s$i" "$rate"; then
            die "rate: cannot reshape node $i's link"
        fi
    done
}

# mpirun ARGS...: OpenMPI's mpirun across the nodes, as on a cluster with a hostfile:
# started inside node 0 (so that the nodes reach it), a hostfile of every node with
# N/nodes slots each (ranks filled node by node: 0..k-1 on node 0), the rsh launcher
# pointed at cluster_rsh.sh (ssh's part: it enters a node's namespace), OpenMPI's TCP
# kept to the cluster's subnet. Each node a hostname of its own (a UTS namespace), so
# OpenMPI uses shared memory inside a node and TCP across, as it would on real hosts.
run_mpirun() {
    local np=0 a nodes hosts here
    for ((a = 1; a <= $#; a++)); do
        case ${!a} in -np|-n|--np) a=$((a + 1)); np=${!a} ;; esac
    done
    [[ "$np" =~ ^[1-9][0-9]*$ ]] || die "mpirun: give -np N (the ranks, spread evenly over the nodes)"
    nodes=$(ours | grep -c -- '-node')
    [ "$nodes" -gt 0 ] || die "mpirun: no cluster $PREFIX is up"
    [ $((np % nodes)) = 0 ] || die "mpirun: -np $np does not divide over the $nodes nodes"
    here=$(cd "$(dirname "$0")" && pwd)
    hosts=$(mktemp)
    for ((a = 0; a < nodes; a++)); do echo "$(node_ns "$a") slots=$((np / nodes))"; done >"$hosts"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CLUSTER_PREFIX=$PREFIX
    ip netns exec "$(node_ns 0)" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$(node_ns 0)" \
        mpirun --hostfile "$hosts" --map-by slot --mca plm_rsh_agent "$here/cluster_rsh.sh" \
        --mca btl_tcp_if_include "$NET.0/24" --mca oob_tcp_if_include "$NET.0/24" "$@"
    local rc=$?
    rm -f "$hosts"
    return $rc
}

status() {
    local ns
    [ -n "$(ours)" ] || { echo "cluster.sh: no cluster ($PREFIX-*) is up"; return 1; }
    for ns in $(ours | sort -V); do
        [ "$ns" = "$SW" ] && continue
        ip netns exec "$ns" ip -o -4 addr show | awk -v ns="$ns" '$2 != "lo" {print ns, $2, $4}'
        ip netns exec "$ns" tc qdisc show | awk '$2 == "tbf" {print "   ", $0}'
    done
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
    up) up "$@" ;;
    down) down ;;
    status) status ;;
    exec)
        [ $# -ge 2 ] || die "exec NODE COMMAND..."
        node=$1; shift
        ip netns list | awk '{print $1}' | grep -qx "$(node_ns "$node")" || die "no node $node is up"
        exec ip netns exec "$(node_ns "$node")" "$@" ;;
    addr) [ $# -eq 1 ] || die "addr NODE"; echo "$NET.$(($1 + 1))" ;;
    rate) [ $# -ge 1 ] || die "rate RATE [NODE]"; set_rate "$@" ;;
    mpirun) run_mpirun "$@" ;;
    *) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
