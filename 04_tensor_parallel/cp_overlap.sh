#!/usr/bin/env bash
# cp_overlap.sh — ring attention's overlap, measured: cp = 2 on one long sequence (the
# small preset, SEQ tokens, batch 1), the ring moving its blocks between blocks of
# compute (its default) or only while it waits for them (--no-overlap), with its two
# ranks on one node (shared memory) and on two nodes of a cluster on this machine
# (scripts/cluster.sh: network namespaces joined by a link shaped to RATE). run_stage.sh
# calls it:
#
#   bash 04_tensor_parallel/cp_overlap.sh OUT_DIR [RATE [SEQ]]     (default 200mbit 4096)
#
# Each run's last step is traced (cp_train --trace): OUT_DIR/timelines/cp_WHERE[_no_overlap]
# .json (Perfetto) and .dat (the plot's), and OUT_DIR/cp_overlap.txt holds the step time
# and each rank's time blocked on the ring's messages (the communication not hidden).
# Needs root and network namespaces: without them says why and exits 77.
set -eu
cd "$(dirname "$0")/.."
. scripts/stage_lib.sh
. scripts/cluster_lib.sh
two_levels_begin "$1" "${2:-200mbit}"
seq=${3:-4096}
mkdir -p "$out/timelines"
model=(--preset small --seq "$seq" --batch 1 --steps 3 --warmup 1 --peak-tflops 1 --log-every 1000000)
load0=$(load_now)
rows=""
for where in one two; do
    nodes=()
    [ "$where" = two ] && read -r -a nodes < <(cluster_flags)
    for mode in overlap no_overlap; do
        name=cp_$where$([ "$mode" = overlap ] || echo _no_overlap)
        flags=()
        [ "$mode" = overlap ] || flags=(--no-overlap)
        run "$tmp/$name.log" cp_train --np 2 --cp 2 "${model[@]}" "${nodes[@]}" "${flags[@]}" \
            --trace "$out/timelines/$name"
        rows+=$(awk -v W="$where" -v M="$mode" -v ms="$(kv "$tmp/$name.log" ms_per_step)" '
            /^OVERLAP / {for (i = 2; i <= NF; i++) {split($i, kv, "="); v[kv[1]] += kv[2]}; n++}
            END {printf "%s %s %.1f %.1f %.1f %.1f\n", W, M, ms, v["wait_ms"] / n, v["comm_ms"] / n,
                        100 * v["hidden_ms"] / v["comm_ms"]}' "$tmp/$name.log")$'\n'
        tail -n 1 <<<"${rows%$'\n'}"
    done
done
{
    echo "# ring attention, cp = 2 (zigzag), the small preset on one sequence of $seq tokens a step;"
    echo "# one: both ranks on one node (shared memory); two: one on each of 2 nodes, the link between"
    echo "# them shaped to ${rates%% *}. overlap: the ring moves its blocks between blocks of compute;"
    echo "# no_overlap: only while it waits. ms_per_step: the median of the steps after the first;"
    echo "# of the last step, per rank (the mean of the 2): wait_ms blocked on the ring's messages,"
    echo "# comm_ms from posting each message to seeing it complete, hidden_pct the share of that"
    echo "# spent computing. Timelines: timelines/cp_WHERE[_no_overlap].json (Perfetto)"
    echo "# measured on $(machine_desc), $(date -u +%Y-%m-%d); load $load0 at the start, $(load_now) at the end"
    echo "# where mode ms_per_step wait_ms comm_ms hidden_pct"
    printf '%s' "$rows"
} >"$out/cp_overlap.txt"
