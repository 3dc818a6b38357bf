#!/usr/bin/env bash
# hierarchy.sh — the flat ring against the hierarchical all-reduce on a two-level
# cluster on this machine (scripts/cluster.sh: nodes as network namespaces, their links
# shaped with tbf), each measured beside its alpha-beta prediction. run_stage.sh calls it:
#
#   bash 02_ddp_allreduce/hierarchy.sh OUT_DIR [RATE...]     (e.g. 1gbit 400mbit 100mbit)
#
# 1. alpha-beta of each class of link, fitted on 2 ranks: inside a node (shared memory)
#    and across two nodes (TCP over the shaped link, at each rate): t(n) = 2 alpha + n beta
#    for a 2-rank ring all-reduce (2 messages of n/2), least squares weighted by 1/t^2.
# 2. At 16 MiB, 2 nodes x 2 and 2 nodes x 4 ranks at every rate: the ring and
#    hier, each beside its prediction from those fits, and OpenMPI's MPI_Allreduce under
#    mpirun --hostfile across the same nodes (where there is an MPI):
#      ring  2(p-1) (alpha_x + n/p beta_x)          every step waits on its hop across nodes
#      hier  I_c + C max(I_c, X_c), pipelined over C chunks of n/C (collectives.h's
#            hier_chunks: 1 MiB each, at most 64), where for one chunk
#        I_c = 4(k-1) (alpha_i + n/(kC) beta_i)     reduce-scatter, gather to the leader,
#                                                   scatter, all-gather: in the node
#        X_c = 2(m-1) (alpha_x + n/(mC) beta_x)     the leaders' exchange across the nodes
#            (each chunk's exchange runs while the node scatters the one before and
#            gathers the one after; the first gather and the last scatter run alone)
#    (p = k m ranks, k a node, m nodes; x the link across, i the one inside, fitted with
#    the layout's p ranks on this machine: 8 ranks on 2 cores move shared memory 5x
#    slower than 2 do).
# Writes OUT_DIR/links_alpha_beta.txt and OUT_DIR/hierarchy.txt. Needs root and network
# namespaces: without them it says why and exits 77, having measured nothing.
set -eu
cd "$(dirname "$0")/.."
. scripts/run_info.sh
. scripts/cluster_lib.sh
out=$1; shift
rates=${*:-1gbit 400mbit 100mbit}
BUILD=${BUILD:-build}
tmp=$(mktemp -d)
first=${rates%% *}
rc=0
cluster_begin 2 "$first" "$tmp/up" || rc=$?
[ "$rc" = 0 ] || { cat "$tmp/up" >&2; exit "$rc"; }
bench() {  # bench NP NODES ALGO MIN MAX [ITERS]: "bytes microseconds" lines
    local np=$1 nodes=$2 algo=$3 min=$4 max=$5 iters=${6:-3} where=()
    [ "$nodes" -gt 1 ] && read -r -a where < <(cluster_flags)
    "$BUILD/bench_collectives" --np "$np" "${where[@]}" --algo "$algo" --min-bytes "$min" \
        --max-bytes "$max" --iters "$iters" --warmup 1 --timeout 120 | awk '!/^#/ {print $1, $5}'
}
{
    echo "# alpha-beta per class of link, fitted on a 2-rank ring all-reduce (t = 2 alpha + n beta),"
    echo "# sizes 64 KiB .. 4 MiB, least squares weighted by 1/t^2 (relative error); inside a node"
    echo "# also with all of a layout's p ranks on this machine's cores (intra-pP: a p-rank ring,"
    echo "# t = 2(p-1)(alpha + n/p beta)): more ranks than cores share them, and pay for it"
    echo "# link rate alpha_us beta_ns_per_B 1/beta_MB_per_s"
} >"$out/links_alpha_beta.txt"
# intra_fit P: "alpha_us beta_ns_per_B" of a P-rank ring on this machine.
intra_fit() {
    bench "$1" 1 ring 64KiB 4MiB | alpha_beta_fit |
        awk -v p="$1" '{printf "%.3f %.4f\n", $1 / (p - 1), $2 * p / (2 * (p - 1))}'
}
read -r ai bi < <(intra_fit 2)
printf 'intra shm %s %s %.1f\n' "$ai" "$bi" "$(awk -v b="$bi" 'BEGIN {print 1e3 / b}')" \
    >>"$out/links_alpha_beta.txt"
declare -A intra_a intra_b
for p in 4 8; do
    read -r "intra_a[$p]" "intra_b[$p]" < <(intra_fit "$p")
    printf 'intra-p%s shm %s %s %.1f\n' "$p" "${intra_a[$p]}" "${intra_b[$p]}" \
        "$(awk -v b="${intra_b[$p]}" 'BEGIN {print 1e3 / b}')" >>"$out/links_alpha_beta.txt"
done
load0=$(load_now)
{
    echo "# all-reduce of 16 MiB fp32 on 2 nodes joined by a link shaped to RATE (tbf, each"
    echo "# direction); inside a node shared memory (shm+tcp). Seconds per call, the median of 5;"
    echo "# pred: the alpha-beta prediction from links_alpha_beta.txt; err: (measured - pred) / pred"
    echo "# measured on $(machine_desc), $(date -u +%Y-%m-%d); load $load0 at the start"
    echo "# mpi: MPI_Allreduce under mpirun --hostfile across the same nodes (cluster.sh mpirun;"
    echo "# OpenMPI's shared memory inside a node, its TCP across; nan: no mpirun or no MPI build)"
    echo "# busbw: nccl-tests' bus bandwidth, 2(p-1)/p x 16 MiB / time, in MB/s (ring, hier, MPI)"
    echo "# layout rate rate_mbit ring_s ring_pred_s ring_err_pct hier_s hier_pred_s hier_err_pct hier_speedup mpi_s ring_busbw hier_busbw mpi_busbw"
} >"$out/hierarchy.txt"
n=16777216
for rate in $rates; do
    cluster_rate "$rate"
    read -r ax bx < <(bench 2 2 ring 64KiB 4MiB | alpha_beta_fit)
    printf 'inter %s %s %s %.1f\n' "$rate" "$ax" "$bx" "$(awk -v b="$bx" 'BEGIN {print 1e3 / b}')" \
        >>"$out/links_alpha_beta.txt"
    for layout in 2x2 2x4; do
        k=${layout#*x} m=${layout%x*}
        p=$((k * m))
        ring=$(bench "$p" "$m" ring "$n" "$n" 5 | awk '{print $2 / 1e6}')
        hier=$(bench "$p" "$m" hier "$n" "$n" 5 | awk '{print $2 / 1e6}')
        mpi=nan
        if command -v mpirun >/dev/null && [ -f "$BUILD/common/comm_mpi.o" ]; then
            mpi=$(bash scripts/cluster.sh mpirun -np "$p" "$BUILD/bench_collectives" --transport mpi \
                  --algo mpi --min-bytes "$n" --max-bytes "$n" --iters 5 --warmup 1 --timeout 120 |
                  awk '!/^#/ {print $5 / 1e6}')
        fi
        awk -v L="$layout" -v R="$rate" -v n="$n" -v p="$p" -v k="$k" -v m="$m" -v ai="${intra_a[$p]}" \
            -v bi="${intra_b[$p]}" -v ax="$ax" -v bx="$bx" -v ring="$ring" -v hier="$hier" -v mpi="$mpi" 'BEGIN {
            pr = 2 * (p - 1) * (ax * 1e-6 + n / p * bx * 1e-9)
            C = int(n / 1048576); if (C < 1) C = 1; if (C > 64) C = 64  # hier_chunks, 2 nodes
            Ic = 4 * (k - 1) * (ai * 1e-6 + n / (k * C) * bi * 1e-9)
            Xc = 2 * (m - 1) * (ax * 1e-6 + n / (m * C) * bx * 1e-9)
            ph = Ic + C * (Ic > Xc ? Ic : Xc)
            mbit = R + 0; if (R ~ /gbit$/) mbit *= 1000; else if (R ~ /kbit$/) mbit /= 1000
            bus = 2 * (p - 1) / p * n / 1e6  # MB moved per rank, nccl-tests style
            printf "%s %s %g %.3f %.3f %+.1f %.3f %.3f %+.1f %.2f %s %.1f %.1f %s\n", L, R, mbit, ring, pr,
                   100 * (ring - pr) / pr, hier, ph, 100 * (hier - ph) / ph, ring / hier,
                   mpi == "nan" ? "nan" : sprintf("%.3f", mpi), bus / ring, bus / hier,
                   mpi == "nan" ? "nan" : sprintf("%.1f", bus / mpi)}' >>"$out/hierarchy.txt"
        tail -n 1 "$out/hierarchy.txt"
    done
done
echo "# load $(load_now) at the end" >>"$out/hierarchy.txt"
