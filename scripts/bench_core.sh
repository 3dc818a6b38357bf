#!/usr/bin/env bash
# bench_core.sh — `make bench-core`: our training throughput against PyTorch's
# and against the sgemm ceiling, measured side by side in one run.
#
# Same model (the small preset: L=4 C=256 NH=4 T=128 V=256), same batch (B=8),
# same optimizer, one thread each. PyTorch's BLAS is the same OpenBLAS, whose own
# thread pool ignores torch.set_num_threads, hence OPENBLAS_NUM_THREADS=1.
# The two trainers alternate for ROUNDS rounds; each reports its median step, and
# we take the median over rounds. The sgemm ceiling is the FLOP-weighted rate of
# the model's own GEMM shapes (build/sgemm_bench).
#
# Writes $RESULTS/00_core/bench-core.txt: runs/ by default (yours, untracked);
# results/00_core holds the course's own run, which README.md quotes
# (`make bench-core RESULTS=results` rewrites it: maintainers only).
set -eu
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-30}
cd "$(dirname "$0")/.."
. scripts/run_info.sh
out=$RESULTS/00_core
mkdir -p "$out"
load_begin
rm -f "$out/run.info"  # written again once the numbers are in
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
field() { sed -n "s/.*$1=\([0-9.e+-]*\).*/\1/p"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

ours=() theirs=()
for r in $(seq "$ROUNDS"); do
    o=$("$BUILD/train" --preset small --batch 8 --threads 1 --steps "$STEPS" --warmup 5 \
        --log-every 100000 | grep '^RESULT train')
    t=$("${PY:-/usr/bin/python3}" tests/torch_gpt.py bench --layers 4 --width 256 --heads 4 --seq 128 \
        --vocab 256 --batch 8 --steps "$STEPS" --warmup 5 --threads 1 | grep '^RESULT torch')
    ours+=("$(echo "$o" | field tokens_per_s)")
    theirs+=("$(echo "$t" | field tokens_per_s)")
    echo "round $r: ours $(echo "$o" | field tokens_per_s) tok/s, torch $(echo "$t" | field tokens_per_s) tok/s"
done
sg=$("$BUILD/sgemm_bench" --threads 1 --width 256 --rows 1024 | tee /dev/stderr | grep '^RESULT sgemm')
ours_med=$(printf '%s\n' "${ours[@]}" | median)
torch_med=$(printf '%s\n' "${theirs[@]}" | median)
layer=$(echo "$sg" | field layer_gflops)
# FLOPs per token of the small preset, from the same formula train prints (6N + 12LHQT).
fpt=$("$BUILD/train" --preset small --steps 1 --peak-tflops 1 --log-every 100000 | \
      sed -n 's/.*with 6N + 12LHQT = \([0-9.]*\) MFLOP.*/\1/p')
{
    echo "bench-core $(date -u +%Y-%m-%d) on $(hostname): $(machine_desc); 1 thread each"
    echo "model: small preset (L=4 C=256 NH=4 T=128 V=256), batch 8, AdamW; $fpt MFLOP/token"
    awk -v o="$ours_med" -v t="$torch_med" -v f="$fpt" -v s="$layer" 'BEGIN {
        printf "ours     %9.1f tokens/s  %6.1f GFLOP/s\n", o, o * f / 1000
        printf "pytorch  %9.1f tokens/s  %6.1f GFLOP/s\n", t, t * f / 1000
        printf "ratio ours/pytorch      %5.2f   (target >= 1.00)\n", o / t
        printf "sgemm ceiling (layer GEMM shapes) %6.1f GFLOP/s; ours reaches %4.1f%% of it (target >= 70%%)\n", s, 100 * o * f / 1000 / s
    }'
} | tee "$out/bench-core.txt"
write_run_info "$out" "make bench-core"
echo
outputs_note "$out"
