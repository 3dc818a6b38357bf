#!/usr/bin/env bash
# run_stage.sh — stage 02's demo, benchmark sweep and plots (`make stage-2` runs the
# tests first, then this).
#
#   1. DDP demo: 4 ranks train the small GPT on the CPU.
#   2. Sweep: every all-reduce algorithm, and MPI_Allreduce under mpirun, from 4 B to
#      256 MiB on 2, 4 and 8 ranks; nccl-tests columns into $RESULTS/02_ddp_allreduce/
#      (RESULTS=runs by default: yours, untracked; results/ holds the course's own run,
#      which the lesson quotes: `make stage-2 RESULTS=results` rewrites it).
#   3. Ring vs MPI_Allreduce at >= 16 MiB on 2 ranks, alternating, 5 rounds, medians
#      (the target), beside the ring with ordinary (cached) stores: on a VM whose two
#      vCPUs the hypervisor moves between cache complexes, that one is fast or ~3x
#      slower from one second to the next. Medians over rounds, never one run.
#   4. All-to-all: naive, pairwise and MPI_Alltoall on 4 ranks, 4 KiB .. 64 MiB (files
#      alltoall_*_np4.txt); then pairwise vs MPI at >= 1 MiB, alternating, 3 rounds,
#      medians (alltoall_vs_mpi.txt: the target is >= 1.0x).
#   5. Two levels (hierarchy.sh, where root can make network namespaces): the flat ring
#      vs the hierarchical all-reduce across 2 nodes as the link between them slows,
#      each beside its alpha-beta prediction from the fitted links.
#   6. DDP tokens/s against the number of ranks.
#   7. gnuplot (scripts/plot.sh): busbw and time vs size; the alpha-beta fit vs the
#      measured ring; the two-level cluster; DDP scaling; each figure labelled with the
#      machine and the date.
# QUICK=1 shortens everything (fewer sizes and ranks) for a smoke run.
set -eu
cd "$(dirname "$0")/.."
. scripts/stage_lib.sh
# The sweep's files for the ranks a QUICK run skips go too: the plots read every one there.
stage_begin 02_ddp_allreduce 'allreduce_*_np*.txt' 'ring_vs_mpi*.txt' '*.png' hierarchy.txt \
    links_alpha_beta.txt 'alltoall_*.txt'
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Bind like our launcher does: one core per rank when they fit, nothing when oversubscribed.
mpirun_np() { local n=$1; shift
    if [ "$n" -le "$cores" ]; then mpirun --bind-to core -np "$n" "$@"
    else mpirun --oversubscribe --bind-to none -np "$n" "$@"; fi; }
have_mpi=0
command -v mpirun >/dev/null && [ -n "$(command -v mpicc)" ] && have_mpi=1
ranks="2 4 8"; max=256MiB; ddp_steps=30
if quick; then ranks="2"; max=16MiB; ddp_steps=6; fi

echo "== DDP demo: 4 ranks, small preset, CPU =="
"$BUILD/ddp_train" --np 4 --preset small --batch 4 --steps "$ddp_steps" --lr 1e-3 --log-every 5 \
    | tee "$out/ddp_demo.log"

echo "== sweep: all-reduce, 4 B .. $max =="
for n in $ranks; do
    for algo in naive ring rd; do
        "$BUILD/bench_collectives" --np "$n" --algo "$algo" --max-bytes "$max" \
            --out "$out/allreduce_${algo}_np$n.txt" >/dev/null
        echo "  $algo np$n: $(tail -n 1 "$out/allreduce_${algo}_np$n.txt" | awk '{print $7 " GB/s busbw at " $1 " B"}')"
    done
    if [ "$have_mpi" = 1 ]; then
        mpirun_np "$n" "$BUILD/bench_collectives" --transport mpi --algo mpi --max-bytes "$max" \
            --out "$out/allreduce_mpi_np$n.txt" >/dev/null
        echo "  mpi np$n: $(tail -n 1 "$out/allreduce_mpi_np$n.txt" | awk '{print $7 " GB/s busbw at " $1 " B"}')"
    fi
done

if [ "$have_mpi" = 1 ]; then
    echo "== target: hand-written ring vs MPI_Allreduce, 2 ranks, >= 16 MiB, alternating =="
    echo "   (ring: the default, streaming stores from 4 MiB; ring-cached: --shm-stores cached)"
    echo "# algorithm round size(B) busbw(GB/s): every round of the alternating ring vs MPI runs" \
        >"$out/ring_vs_mpi.txt"
    for round in 1 2 3 4 5; do
        for stores in auto cached; do
            name=ring; [ "$stores" = cached ] && name=ring-cached
            "$BUILD/bench_collectives" --np 2 --algo ring --shm-stores "$stores" --min-bytes 16MiB \
                --max-bytes "$max" | awk -v r=$round -v a=$name '!/^#/ {print a, r, $1, $7}' \
                >>"$out/ring_vs_mpi.txt"
        done
        mpirun_np 2 "$BUILD/bench_collectives" --transport mpi --algo mpi --min-bytes 16MiB \
            --max-bytes "$max" | awk -v r=$round '!/^#/ {print "mpi", r, $1, $7}' >>"$out/ring_vs_mpi.txt"
    done
    # median busbw per (algorithm, size) over the rounds, then the ratio per size
    awk '!/^#/ {v[$1" "$3] = v[$1" "$3] " " $4} END {for (k in v) print k, v[k]}' "$out/ring_vs_mpi.txt" |
        while read -r algo size runs; do
            # shellcheck disable=SC2086  # runs: one number a word
            printf '%s %s %s\n' "$algo" "$size" "$(printf '%s\n' $runs | med)"
        done | awk '
            $1 == "mpi" {m[$2] = $3} $1 == "ring" {r[$2] = $3} $1 == "ring-cached" {c[$2] = $3}
            END {printf "%12s %10s %12s %10s %11s\n", "size (B)", "ring", "ring-cached", "MPI",
                        "ring/MPI";
                 for (s in r) if (s in m) printf "%12d %10.3f %12.3f %10.3f %11.2f\n", s, r[s], c[s],
                                                 m[s], r[s] / m[s]}' |
        sort -k1,1n | { echo "# busbw in GB/s, the median of the 5 rounds; ring/MPI: the ratio of the medians"
                        cat; } | tee "$out/ring_vs_mpi_summary.txt"
fi

a2a_max=64MiB; quick && a2a_max=4MiB
echo "== all-to-all: naive, pairwise, MPI_Alltoall; 4 ranks, 4 KiB .. $a2a_max =="
for algo in naive pairwise; do
    "$BUILD/bench_collectives" --np 4 --op all_to_all --algo "$algo" --min-bytes 4KiB \
        --max-bytes "$a2a_max" --out "$out/alltoall_${algo}_np4.txt" >/dev/null
    echo "  $algo: $(tail -n 1 "$out/alltoall_${algo}_np4.txt" | awk '{print $7 " GB/s busbw at " $1 " B"}')"
done
if [ "$have_mpi" = 1 ]; then
    mpirun_np 4 "$BUILD/bench_collectives" --transport mpi --op all_to_all --algo mpi \
        --min-bytes 4KiB --max-bytes "$a2a_max" --out "$out/alltoall_mpi_np4.txt" >/dev/null
    echo "  mpi: $(tail -n 1 "$out/alltoall_mpi_np4.txt" | awk '{print $7 " GB/s busbw at " $1 " B"}')"
    echo "# pairwise all-to-all vs MPI_Alltoall, 4 ranks, alternating rounds: algorithm round size(B) busbw(GB/s)" \
        >"$out/alltoall_vs_mpi_runs.txt"
    for round in 1 2 3; do
        "$BUILD/bench_collectives" --np 4 --op all_to_all --algo pairwise --min-bytes 1MiB \
            --max-bytes "$a2a_max" --factor 4 | awk -v r=$round '!/^#/ {print "pairwise", r, $1, $7}' \
            >>"$out/alltoall_vs_mpi_runs.txt"
        mpirun_np 4 "$BUILD/bench_collectives" --transport mpi --op all_to_all --algo mpi \
            --min-bytes 1MiB --max-bytes "$a2a_max" --factor 4 |
            awk -v r=$round '!/^#/ {print "mpi", r, $1, $7}' >>"$out/alltoall_vs_mpi_runs.txt"
    done
    awk '!/^#/ {v[$1" "$3] = v[$1" "$3] " " $4} END {for (k in v) print k, v[k]}' \
        "$out/alltoall_vs_mpi_runs.txt" |
        while read -r algo size runs; do
            # shellcheck disable=SC2086  # runs: one number a word
            printf '%s %s %s\n' "$algo" "$size" "$(printf '%s\n' $runs | med)"
        done | awk '$1 == "mpi" {m[$2] = $3} $1 == "pairwise" {w[$2] = $3}
            END {printf "%12s %10s %10s %14s\n", "size (B)", "pairwise", "MPI", "pairwise/MPI";
                 for (s in w) if (s in m) printf "%12d %10.3f %10.3f %14.2f\n", s, w[s], m[s], w[s] / m[s]}' |
        sort -k1,1n | { echo "# all-to-all busbw in GB/s on 4 ranks, the median of 3 alternating rounds;"
                        echo "# measured on $(machine_desc), $(date -u +%Y-%m-%d); load $(load_now)"
                        cat; } | tee "$out/alltoall_vs_mpi.txt"
fi

echo "== two levels: flat ring vs hierarchical all-reduce across 2 nodes (scripts/cluster.sh) =="
echo "   layout rate rate_mbit ring_s ring_pred_s ring_err_% hier_s hier_pred_s hier_err_% speedup mpi_s busbw_MB/s(ring hier mpi)"
two_levels 02_ddp_allreduce/hierarchy.sh "1gbit 400mbit 100mbit" 400mbit
echo "== DDP scaling: tokens/s vs ranks (small preset, batch 4 per rank) =="
echo "# ranks tokens_per_s ms_per_step" >"$out/ddp_scaling.txt"
for n in 1 2 4; do
    line=$("$BUILD/ddp_train" --np "$n" --preset small --batch 4 --steps "$ddp_steps" --warmup 3 \
           --log-every 100000 | grep '^RESULT')
    tps=$(echo "$line" | sed 's/.*tokens_per_s=\([0-9.]*\).*/\1/')
    ms=$(echo "$line" | sed 's/.*ms_per_step=\([0-9.]*\).*/\1/')
    echo "$n $tps $ms" | tee -a "$out/ddp_scaling.txt"
done

stage_end "make stage-2" "2 ranks, up to 16 MiB, 6 DDP steps"
[ -f "$out/alpha_beta.txt" ] && grep -E '^(alpha|beta|np)' "$out/alpha_beta.txt" || true
echo
outputs_note "$out"
