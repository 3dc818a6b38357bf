#!/usr/bin/env bash
# test_cluster.sh — training across the "nodes" of scripts/cluster.sh (network
# namespaces on this machine, joined by shaped links): 2 nodes x 2 ranks started the
# way torchrun starts them (RANK, WORLD_SIZE, MASTER_ADDR = node 0's address), DDP over
# the TCP transport, against one process with the same global batch; then the cluster
# taken down, leaving no namespace or process behind. Without root or network
# namespaces every check says SKIP, with the reason.
set -u
BUILD=${1:-build}
export CLUSTER_PREFIX=crst$$  # this run's own names (a run beside it cannot clash)
export CLUSTER_NET=10.213.$((($$ % 200) + 20))
dir=$(mktemp -d)
trap 'bash scripts/cluster.sh down >/dev/null 2>&1; rm -rf "$dir"' EXIT
checks="cluster.up cluster.torchrun_ddp_2x2 cluster.down_leaves_nothing"
for c in $checks; do echo "PLAN $c"; done

if ! bash scripts/cluster.sh up --nodes 2 --inter 1gbit >"$dir/up" 2>&1; then
    rc=$?
    why=$(tail -n 1 "$dir/up")
    if [ "$rc" -eq 77 ]; then
        for c in $checks; do echo "SKIP $c: $why"; done
        exit 77
    fi
    echo "FAIL cluster.up  $why"
    exit 1
fi
echo "PASS cluster.up  $(tail -n 1 "$dir/up")"

# 2 ranks on each node; the link between the nodes is the only way from one to the other.
model=(--preset tiny --steps 5 --batch 2 --lr 1e-3 --log-every 100 --warmup 0 --peak-tflops 1)
port=$((20000 + $$ % 20000)) master=$(bash scripts/cluster.sh addr 0)
pids=()
for r in 0 1 2 3; do
    RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) MASTER_ADDR=$master MASTER_PORT=$port \
        bash scripts/cluster.sh exec $((r / 2)) "$BUILD/ddp_train" --transport tcp --timeout 30 \
        "${model[@]}" --save-params "$dir/ddp.safetensors" >"$dir/rank$r.log" 2>&1 &
    pids+=($!)
done
rcs=()
for p in "${pids[@]}"; do wait "$p"; rcs+=($?); done
"$BUILD/train" "${model[@]}" --batch 8 --save-params "$dir/one.safetensors" >"$dir/one.log" 2>&1
if [ "${rcs[*]}" = "0 0 0 0" ]; then
    "$BUILD/tests/compare_params" "$dir/ddp.safetensors" "$dir/one.safetensors" 1e-5 \
        cluster.torchrun_ddp_2x2 | sed 's/$/ (ranks 0,1 on node 0, 2,3 on node 1; TCP)/'
else
    echo "FAIL cluster.torchrun_ddp_2x2  exit codes ${rcs[*]}: $(grep -h -m1 -E 'error|killed' "$dir"/rank*.log | head -n 2)"
fi

bash scripts/cluster.sh down >"$dir/down" 2>&1
left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$CLUSTER_PREFIX-" | tr '\n' ' ')
links=$(ip -o link show 2>/dev/null | grep -c "$CLUSTER_PREFIX" || true)
if [ -z "$left" ] && [ "$links" = 0 ]; then
    echo "PASS cluster.down_leaves_nothing  no $CLUSTER_PREFIX-* namespace left, no link of it in the host's namespace"
else
    echo "FAIL cluster.down_leaves_nothing  left: ${left:-no namespace}; $links links in the host's namespace"
fi
