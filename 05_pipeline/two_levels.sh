#!/usr/bin/env bash
# two_levels.sh — which axis crosses the slow link, measured: the same 2 ranks as a
# 2-stage pipeline (1F1B) or as TP = 2, each with one rank on each of 2 nodes of a cluster
# on this machine (scripts/cluster.sh: network namespaces, a shaped link between them),
# beside the same run on one node and the alpha-beta prediction. run_stage.sh calls it:
#
#   bash 05_pipeline/two_levels.sh OUT_DIR [RATE...]      (default 1gbit 200mbit)
#
# The small preset, 4 micro-batches of 4 a step: the pipeline sends each micro-batch's
# activation forward and its gradient back once (b·s·h each), TP all-reduces b·s·h four
# times per layer and micro-batch. Writes OUT_DIR/two_levels.txt. Needs root and network
# namespaces: else says why and exits 77.
set -eu
cd "$(dirname "$0")/.."
. scripts/stage_lib.sh
. scripts/cluster_lib.sh
two_levels_begin "$@"
model="--preset small --batch 4 --grad-accum 4 --steps 5 --warmup 1 --peak-tflops 1 --log-every 1000000"
two_levels_table "$out" "$rates" "PP = 2 (1F1B) against TP = 2 on the same 2 ranks, both on one node or one on each of
2 nodes; the small preset (L=4 C=256 T=128 V=256), 4 micro-batches of 4 a step; ms per
step, the median of 4 after 1 warm-up step." \
    "pp2=pp_train --np 2 --pp 2 --schedule 1f1b $model" \
    "tp2=tp_train --np 2 --tp 2 $model"
