#!/usr/bin/env bash
# stage.sh — `make stage-1`: the tests, the measured-vs-predicted table, the OOM at
# step zero, and the plots. Writes $RESULTS/01_memory_wall/: runs/ by default (yours,
# untracked); results/ holds the course's own run, which the lesson quotes
# (`make stage-1 RESULTS=results` rewrites it: maintainers only).
set -eu -o pipefail
cd "$(dirname "$0")/.."
. scripts/stage_lib.sh
stage_begin 01_memory_wall '*.png'  # the figures: drawn again from this run's data
machine=$(machine_desc)

echo "== stage 01 tests"
BUILD=$BUILD bash tests/run.sh stage01

echo
echo "== measured vs predicted (machine: $machine)"
{
    echo "# build/measure --suite full --threads 2 on $machine"
    "$BUILD/measure" --suite full --threads 2 --out "$out/measured.dat"
} | tee "$out/measured.txt"

echo
echo "== the OOM at step zero: the 70B on one 8-GPU node, scaled by 1e-4"
# 70B params -> a 7.02M-parameter GPT (L=10 C=240); 8 x 80 GB = 640 GB -> 64 MB.
# In both, 16 bytes/param is 1.75x the memory: weights and grads fit, AdamW's state does not.
MODEL=(--layers 10 --seq 64 --vocab 256 --heads 4)
{
    echo "\$ build/memcalc --params 70e9 --device-mem 640GB      # the real thing, on a pooled node"
    "$BUILD/memcalc" --params 70e9 --device-mem 640GB
    echo
    echo "\$ build/memcalc --preset small --hidden 240 ${MODEL[*]} --micro-batch 8 --recipe course --device-mem 64MB"
    "$BUILD/memcalc" --preset small --hidden 240 "${MODEL[@]}" --micro-batch 8 --recipe course --device-mem 64MB
    echo
    echo "\$ build/train --width 240 ${MODEL[*]} --device-mem 64MB"
    rc=0
    "$BUILD/train" --width 240 "${MODEL[@]}" --device-mem 64MB 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || { echo "unexpected: the run fit"; exit 1; }
    echo "(exit status $rc: it failed while constructing the optimizer, before the first step)"
    echo
    echo "\$ build/train --width 240 ${MODEL[*]} --device-mem 8MB     # one 80 GB card, scaled the same way"
    "$BUILD/train" --width 240 "${MODEL[@]}" --device-mem 8MB 2>&1 || true
} | sed 's/ (common\/[a-z_]*\.c:[0-9]*)$//' | tee "$out/oom.txt"

echo
echo "== plot data and plots"
"$BUILD/memcalc" --sweep breakdown >"$out/breakdown.dat"
"$BUILD/memcalc" --preset llama2-7b --sweep seq >"$out/act_vs_seq.dat"
stage_end "make stage-1"
echo
outputs_note "$out"
