#!/usr/bin/env bash
# plot.sh — draws a stage's figures from the data in one output folder, each figure
# labelled with the machine and the date in that folder's run.info. It measures
# nothing, so it also redraws the committed figures from the committed data:
#
#   bash scripts/plot.sh runs/02_ddp_allreduce       # what make stage-2 calls
#   bash scripts/plot.sh results/01_memory_wall      # maintainer: redraw the lesson's figures
set -eu
here=$PWD
cd "$(dirname "$0")/.."
. scripts/run_info.sh
[ $# -eq 1 ] || { echo "usage: bash scripts/plot.sh DIR   (e.g. runs/02_ddp_allreduce)" >&2; exit 2; }
dir=${1%/}
# DIR is where the caller is, not the repository root (cd runs; plot.sh 01_memory_wall
# means runs/01_memory_wall, not the stage's source folder).
case "$dir" in /*) ;; *) [ "$here" = "$PWD" ] || dir="$here/$dir" ;; esac
[ -d "$dir" ] || { echo "plot.sh: no folder $dir (run the stage first)" >&2; exit 1; }
[ -f "$dir/run.info" ] || {
    echo "plot.sh: $dir/run.info is missing: the figures must say which machine measured the" \
         "data and when (the stage scripts write it)" >&2; exit 1; }
if ! command -v gnuplot >/dev/null; then
    echo "gnuplot not found: data are in $dir, plots skipped (scripts/install-deps.sh installs it)"
    exit 0
fi
# Into gnuplot's single-quoted strings: drop any single quote.
machine=$(run_info "$dir" machine | tr -d "'")
day=$(run_info "$dir" date | tr -d "'")
vars="dir='$dir'; machine='${machine:-machine not recorded}'; run_date='${day:-date not recorded}'"

# A stage's two-level measurement (NN_*/two_levels.sh), where it ran: its own figure.
two_levels() {
    [ -f "$dir/two_levels.txt" ] || return 0
    gnuplot -e "dir='$dir'; what='${1//\'/}'" scripts/two_levels.gp  # (no quote inside gnuplot's)
}
case "$(basename "$dir")" in
    01_memory_wall)
        gnuplot -e "$vars" 01_memory_wall/plots.gp ;;
    02_ddp_allreduce)
        # The rank counts and MPI are whatever the sweep measured (QUICK=1: 2 ranks only).
        ranks=$(ls "$dir" | sed -n 's/^allreduce_ring_np\([0-9]*\)\.txt$/\1/p' | sort -n | tr '\n' ' ')
        ranks=${ranks% }
        [ -n "$ranks" ] || { echo "plot.sh: no allreduce_ring_np*.txt in $dir" >&2; exit 1; }
        mpi=0 hier=0 a2a=0
        ls "$dir"/allreduce_mpi_np*.txt >/dev/null 2>&1 && mpi=1
        [ -f "$dir/hierarchy.txt" ] && hier=1  # the two-level cluster's (where it could run)
        [ -f "$dir/alltoall_pairwise_np4.txt" ] && a2a=1
        # gnuplot's fit prints to stderr; keep it beside the data, show it on failure.
        gnuplot -e "$vars; ranks='$ranks'; mpi=$mpi; hier=$hier; a2a=$a2a" 02_ddp_allreduce/plots.gp 2>"$dir/fit.log" || {
            cat "$dir/fit.log" >&2; exit 1; } ;;
    03_bucketing_zero)
        two_levels "DDP, FSDP and HSDP on 2 nodes x 2 ranks: the link between the nodes decides"
        # The timelines are whatever configurations were traced, in the order they build up.
        traces=""
        for t in ddp-no-overlap ddp-overlap zero3 fsdp; do
            if [ -f "$dir/timelines/trace_$t.dat" ]; then traces="$traces $t"; fi
        done
        gnuplot -e "$vars; traces='${traces# }'" 03_bucketing_zero/plots.gp ;;
    04_tensor_parallel)
        two_levels "TP = 2 and DP = 2 on one node and across two: the TP all-reduces wait on the link"
        gnuplot -e "$vars" 04_tensor_parallel/plots.gp ;;
    05_pipeline)
        # The Gantt charts read gantt/*.dat (measured p = 2, simulated p = 2 and 4).
        two_levels "PP = 2 against TP = 2 across two nodes: the pipeline sends an activation, TP all-reduces"
        gnuplot -e "$vars" 05_pipeline/plots.gp ;;
    06_mixed_precision)
        gnuplot -e "$vars" 06_mixed_precision/plots.gp ;;
    07_fault_tolerance)
        gnuplot -e "$vars" 07_fault_tolerance/plots.gp
        gnuplot -e "$vars" 07_fault_tolerance/plots_interval.gp ;;
    *)
        echo "plot.sh: no figures are drawn for $(basename "$dir")"; exit 0 ;;
esac
echo "plots ($machine, $day): $(ls "$dir"/*.png | tr '\n' ' ')"
