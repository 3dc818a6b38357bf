#!/usr/bin/env bash
# two_levels.sh — why tensor parallelism stays inside a node, measured: TP = 2 (and with
# SP) with its two ranks on one node and on two nodes of a cluster on this machine
# (scripts/cluster.sh: network namespaces, a shaped link between them), beside data
# parallelism on the same two ranks and the alpha-beta prediction. run_stage.sh calls it:
#
#   bash 04_tensor_parallel/two_levels.sh OUT_DIR [RATE...]      (default 1gbit 200mbit)
#
# The small preset, 16 sequences a step: TP's four all-reduces of b·s·h per layer
# (forward and backward) sit on the critical path and grow with the tokens of a step;
# DP's one all-reduce of the gradients per step (after backward in tp_train) does not.
# Context parallelism on the same two ranks: the ring passes K, V (and dK, dV) to its
# neighbour, (4 (cp-1)/cp + 2) b·s·h a layer; Ulysses' all-to-alls 12 (cp-1)/cp^2 b·s·h. Writes
# OUT_DIR/two_levels.txt. Needs root and network namespaces: else says why, exits 77.
set -eu
cd "$(dirname "$0")/.."
. scripts/stage_lib.sh
. scripts/cluster_lib.sh
two_levels_begin "$@"
model="--preset small --steps 6 --warmup 2 --peak-tflops 1 --log-every 1000000"
two_levels_table "$out" "$rates" "TP = 2, TP = 2 with SP, DP = 2 (tp_train --tp 1), and context parallelism cp = 2 (cp_train:
the ring, zigzag; Ulysses) on 2 ranks: both on one node, or one on each of 2 nodes; the small
preset (L=4 C=256 T=128 V=256), 16 sequences a step (TP and CP: --batch 16; DP: --batch 8
per rank); ms per step, the median of 4 after 2 warm-up steps." \
    "tp2=tp_train --np 2 --tp 2 --batch 16 $model" \
    "tp2-sp=tp_train --np 2 --tp 2 --sp --batch 16 $model" \
    "dp2=tp_train --np 2 --tp 1 --batch 8 $model" \
    "cp2-ring=cp_train --np 2 --cp 2 --batch 16 $model" \
    "cp2-ulysses=cp_train --np 2 --cp 2 --cp-attention ulysses --batch 16 $model"
