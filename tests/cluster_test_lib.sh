# shellcheck shell=bash
# cluster_test_lib.sh — what the suites that train across scripts/cluster.sh's nodes share
# (tests/test_cluster.sh, stage 02's; tests/test_cluster_faults.sh, stage 07's): sourced
# with BUILD set; gives
#
#   cluster_test_begin CHECK...   announces the checks (PLAN), makes this run's own
#                                 cluster (2 nodes, 1 Gbit/s): $up; without root or
#                                 namespaces every check says SKIP with the reason, exit 77
#   cluster_test_end              takes it down: $down
#   dir                           a scratch folder, removed at exit (with the cluster)
set -u
export CLUSTER_PREFIX=crst$$  # this run's own names (a run beside it cannot clash)
export CLUSTER_NET=10.213.$((($$ % 200) + 20))
dir=$(mktemp -d)
trap 'bash scripts/cluster.sh down >/dev/null 2>&1; rm -rf "$dir"' EXIT

# The first and last checks' names: cluster.up and cluster.down_leaves_nothing, with
# CLUSTER_CHECKS=x: x.up and x.down_leaves_nothing (each suite's own).
up=${CLUSTER_CHECKS:-cluster}.up down=${CLUSTER_CHECKS:-cluster}.down_leaves_nothing
cluster_test_begin() {
    local c rc=0 why
    for c in "$up" "$@" "$down"; do echo "PLAN $c"; done
    bash scripts/cluster.sh up --nodes 2 --inter 1gbit >"$dir/up" 2>&1 || rc=$?
    why=$(tail -n 1 "$dir/up")
    if [ "$rc" -eq 77 ]; then
        for c in "$up" "$@" "$down"; do echo "SKIP $c  $why"; done
        exit 77
    fi
    [ "$rc" = 0 ] || { echo "FAIL $up  $why"; exit 1; }
    echo "PASS $up  $why"
}

cluster_test_end() {
    local left links
    bash scripts/cluster.sh down >"$dir/down" 2>&1
    left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$CLUSTER_PREFIX-" | tr '\n' ' ')
    links=$(ip -o link show 2>/dev/null | grep -c "$CLUSTER_PREFIX" || true)
    if [ -z "$left" ] && [ "$links" = 0 ]; then
        echo "PASS $down  no $CLUSTER_PREFIX-* namespace left, no link of it in the host's namespace"
    else
        echo "FAIL $down  left: ${left:-no namespace}; $links links in the host's namespace"
    fi
}
