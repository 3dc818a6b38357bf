#!/usr/bin/env bash
# test_cluster_faults.sh — the faults a real cluster has, on scripts/cluster.sh's nodes
# (stage 07's suite: they need its checkpoints, elastic restarts and straggler check):
# a node lost, a link taken down and left down, each recovered by an elastic restart on
# the node left, bitwise; and a link slowed mid-run, named by the ranks behind it.
# Without root or network namespaces every check says SKIP, with the reason.
BUILD=${1:-build}
CLUSTER_CHECKS=cluster.faults
. tests/cluster_test_lib.sh
cluster_test_begin cluster.node_lost_elastic cluster.link_down_elastic cluster.link_slowed_named

# Two faults that take a node away, each recovered by an elastic restart: node 1's
# every process killed after step 5, and killed again as soon as it starts there (the
# node is dead); or node 1's link taken down after step 5 and left down (the node is
# unreachable: its ranks, cut off from rank 0's rendezvous, give up first). The
# supervisor restarts; node 1 fails first again, so --elastic gives up its two slots and
# the job goes on, on node 0's 2 ranks, from the last checkpoint, resharded. It ends
# bitwise where "4 ranks to that checkpoint, then 2 resumed from it" ends (stage 07's
# s7.elastic, for a node).
s_node_gone() {  # s_node_gone CHECK killed|link_down
    local check=$1 d=$dir/$1 k rc=0 pid end t=(--preset tiny --steps 12 --batch 2 --lr 1e-3
        --warmup 0 --peak-tflops 1 --log-every 1)
    if ! "$BUILD/ddp_train" --help 2>&1 | grep -q -- '--elastic'; then
        echo "SKIP $check  this build has no stage 07 (--elastic, --ckpt-dir)"; return
    fi
    mkdir -p "$d"
    timeout -k 5 120 "$BUILD/ddp_train" --np 4 --nodes 2 --cluster "$CLUSTER_PREFIX" --timeout 4 "${t[@]}" \
        --ckpt-dir "$d/ck" --ckpt-every 2 --max-restarts 4 --elastic \
        --save-params "$d/out.safetensors" >"$d/run.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do grep -q 'step    5/' "$d/run.log" && break; sleep 0.05; done
    if [ "$2" = link_down ]; then
        bash scripts/cluster.sh exec 1 ip link set "${CLUSTER_PREFIX}n1" down
    else
        end=$((SECONDS + 60))
        while [ $SECONDS -lt $end ] && ! grep -q 'going on without' "$d/run.log"; do
            # shellcheck disable=SC2046  # the pids: words
            kill -KILL $(ip netns pids "$CLUSTER_PREFIX-node1") 2>/dev/null
            sleep 0.02
        done
    fi
    wait "$pid" || rc=$?
    bash scripts/cluster.sh exec 1 ip link set "${CLUSTER_PREFIX}n1" up
    k=$(grep -h -o 'resumed from [^ ]*step-[0-9]*' "$d/run.log" | tail -n 1 | grep -o '[0-9]*$')
    if [ -n "$k" ]; then
        k=$((10#$k))  # the reference: 4 ranks to step k (stopped as step k+1 begins), then 2
        "$BUILD/ddp_train" --np 4 "${t[@]}" --ckpt-dir "$d/ref" --ckpt-every 2 \
            --inject "kill,step=$((k + 1)),rank=0" >"$d/ref1.log" 2>&1
        "$BUILD/ddp_train" --np 2 "${t[@]}" --ckpt-dir "$d/ref" --resume \
            --save-params "$d/ref.safetensors" >"$d/ref2.log" 2>&1
    fi
    if [ "$rc" = 0 ] && grep -q 'supervisor: node 1 .* going on without it (--elastic), on 2 ranks in slots 0, 1' "$d/run.log" &&
       cmp -s "$d/out.safetensors" "$d/ref.safetensors"; then
        echo "PASS $check  node 1 ${2/_/ } after step 5, given up after $(grep -c '^supervisor: attempt' "$d/run.log") failed attempts; node 0's 2 ranks resumed from step $k, final weights bitwise those of 4 ranks to step $k then 2"
    else
        echo "FAIL $check  exit $rc, resumed from step ${k:-?}: $(grep -h -E 'supervisor|resumed' "$d/run.log" | tr '\n' ' ' | cut -c1-400)"
    fi
}
s_node_gone cluster.node_lost_elastic killed
s_node_gone cluster.link_down_elastic link_down

# A link slowed mid-run (node 1's, from 1 Gbit/s to 10 Mbit/s once step 8 is logged;
# the first slow step, over 5x the median of the first five, is when tc's change took hold):
# no rank computes slower, the ranks behind the link wait. Each rank watches how fast
# every peer's messages arrive (--straggler-factor, stage 07); the ones receiving across
# the link must name it within 5 steps of the first slow one. (A slowdown of ~100x
# against a factor of 3: no machine's noise decides this.)
s_link_slowed() {
    local log=$dir/link_slowed.log rc=0 pid
    if ! "$BUILD/ddp_train" --help 2>&1 | grep -q -- '--straggler-factor'; then
        echo "SKIP cluster.link_slowed_named  this build has no stage 07 (--straggler-factor)"; return
    fi
    bash scripts/cluster.sh rate 1gbit
    timeout -k 5 120 "$BUILD/ddp_train" --np 4 --nodes 2 --cluster "$CLUSTER_PREFIX" --timeout 30 --preset tiny \
        --steps 20 --batch 2 --lr 1e-3 --warmup 0 --log-every 1 --peak-tflops 1 \
        --straggler-factor 3 >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do grep -q 'step    8/' "$log" && break; sleep 0.05; done
    bash scripts/cluster.sh rate 10mbit 1
    wait "$pid" || rc=$?
    bash scripts/cluster.sh rate 1gbit
    local named at first base steps
    named=$(grep -m1 'slow link: .*across the link between the nodes.*the link between node [01] and node [01] is slow' "$log")
    at=$(grep -o 'step [0-9]*: slow link' <<<"$named" | grep -o '[0-9]*')
    steps=$(sed -n 's/.* step *\([0-9]*\)\/20 |.* | *\([0-9.]*\) ms |.*/\1 \2/p' "$log")
    base=$(head -n 5 <<<"$steps" | awk '{print $2}' | sort -n | sed -n 3p)  # the median of five
    first=$(awk -v b="${base:-0}" 'NR > 5 && $2 > 5 * b {print $1; exit}' <<<"$steps")
    if [ "$rc" = 0 ] && [ -n "$named" ] && [ -n "$first" ] && [ "$at" -le $((first + 5)) ]; then
        echo "PASS cluster.link_slowed_named  the first slow step $first; at step $at: $(sed 's/.*slow link: //' <<<"$named" | cut -c1-220)"
    else
        echo "FAIL cluster.link_slowed_named  exit $rc; first slow step ${first:-none}, named at step ${at:-never} (want within 5 steps): $(grep -m2 -E 'slow link|error' "$log" | cut -c1-300)"
    fi
}
s_link_slowed

cluster_test_end
