#!/usr/bin/env bash
# two_levels.sh — what HSDP buys, measured: DDP, FSDP and HSDP (shard groups of 2 = the
# nodes) on 2 nodes x 2 ranks of a cluster on this machine (scripts/cluster.sh: network
# namespaces, shared memory inside a node, a shaped link between them), each beside the
# same run on one node and the alpha-beta prediction. run_stage.sh calls it:
#
#   bash 03_bucketing_zero/two_levels.sh OUT_DIR [RATE...]      (default 1gbit 200mbit)
#
# The bench model of run_stage.sh (9.56M parameters, 38 MB of fp32 gradients): a node's
# link carries, per step, DDP's ring crossing 2(p-1)/p of the gradients (1.5 x 38 MB),
# FSDP's two all-gathers and reduce-scatter over 4 ranks (2.25 x), HSDP only the
# all-reduce of each rank's shard across the replicas (1 x): it shards inside the node and
# replicates across. Writes OUT_DIR/two_levels.txt. Needs root and network namespaces:
# without them it says why and exits 77.
set -eu
cd "$(dirname "$0")/.."
. scripts/stage_lib.sh
. scripts/cluster_lib.sh
two_levels_begin "$@"
model=(--layers 12 --width 256 --heads 4 --seq 64 --vocab 256 --batch 1 --steps 8 --warmup 2
       --peak-tflops 1 --log-every 1000000)
two_levels_table "$out" "$rates" "DDP, FSDP and HSDP (--shard-size 2: a shard group per node) on 2 nodes x 2 ranks,
the bench model (L=12 C=256 T=64 V=256, batch 1 per rank: 38 MB of fp32 gradients);
ms per step, the median of 6 after 2 warm-up steps." \
    "ddp=sharded_train --np 4 --strategy ddp ${model[*]}" \
    "fsdp=sharded_train --np 4 --strategy fsdp ${model[*]}" \
    "hsdp=sharded_train --np 4 --strategy hsdp --shard-size 2 ${model[*]}"
