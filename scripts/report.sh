#!/usr/bin/env bash
# report.sh — `make report`: every stage's headline numbers against its target, then
# every table in full and every figure, in $RESULTS/REPORT.md (runs/REPORT.md).
#
# Each stage comes from your own run where you made one (runs/NN_*/, "measured now")
# and otherwise from the course's committed run (results/NN_*/, "committed earlier"),
# and says which, with the date and the machine its run.info records. A run without
# run.info did not finish (the stage scripts write it last, before the plots), so the
# committed run stands in for it.
set -eu
cd "$(dirname "$0")/.."
. scripts/run_info.sh
now=${RESULTS%/}
committed=results
out=$now/REPORT.md
mkdir -p "$now"

# ---------------------------------------------------------------- helpers

# The folder a stage's numbers come from, and its label.
src_dir() {  # src_dir STAGE -> the folder, or nothing
    if [ -f "$now/$1/run.info" ]; then echo "$now/$1"
    elif [ -f "$committed/$1/run.info" ]; then echo "$committed/$1"; fi
}
is_now() { [ "$now" != "$committed" ] && case "$1" in "$now"/*) true ;; *) false ;; esac; }
label() {  # label DIR: "measured now" or "committed earlier", where, when, on what
    local when machine cmd
    when=$(run_info "$1" date); machine=$(run_info "$1" machine); cmd=$(run_info "$1" command)
    if is_now "$1"; then
        echo "**measured now** (\`$1/\`, \`$cmd\`, $when, $machine)"
    else
        echo "**committed earlier** (\`$1/\`: the course's own run, \`$cmd\`, $when, $machine)"
    fi
}
short() {  # short DIR: the label for the summary table
    local quick=""
    case "$(run_info "$1" command)" in *QUICK=1*) quick=" (QUICK=1)" ;; esac
    if is_now "$1"; then echo "measured now$quick, $(run_info "$1" date)"
    else echo "committed earlier$quick, $(run_info "$1" date)"; fi
}
plain() { sed 's/\*\*//g; s/`//g'; }  # a label for HTML (a <summary> shows ** and ` as they are)
rel() { realpath -m --relative-to="$(dirname "$out")" "$1"; }  # a link relative to the report
verdict() { if [ "$1" = 1 ]; then echo "met"; else echo "**MISSED**"; fi; }
fence() { echo '```'; cat "$1"; [ -z "$(tail -c 1 "$1")" ] || echo; echo '```'; }

stage_title() {
    case "$1" in
        00_core) echo "Core: training throughput against PyTorch and the sgemm ceiling" ;;
        *) if [ -f "$1/README.md" ]; then sed -n '1s/^# *//p' "$1/README.md"; else echo "$1"; fi ;;
    esac
}
stage_cmd() { case "$1" in 00_core) echo "make bench-core" ;; *) echo "make stage-$((10#${1%%_*}))" ;; esac; }

# What each table holds, and its units (the files' own headers are terse).
describe() {
    case "$1" in
        bench-core.txt) echo "Median tokens/s over 3 alternating rounds (ours, then PyTorch), GFLOP/s at 6N + 12LHQT FLOPs per token, and the share of OpenBLAS's sgemm rate on the model's own GEMM shapes." ;;
        measured.txt) echo "Per model and category: the calculator's prediction, the ledger's peak (human units and bytes), and the difference in %." ;;
        oom.txt) echo "The transcript of the OOM demonstration: the calculator on the real 70B, the calculator and the trainer on the 10⁻⁴ scale model." ;;
        allreduce_*_np*.txt) echo "nccl-tests columns: size (B), count (elements), type, redop, time per call (µs, median), algbw and busbw (GB/s), #wrong." ;;
        ring_vs_mpi.txt) echo "Every round of the alternating runs at ≥ 16 MiB, 2 ranks. Columns: algorithm, round, size (B), busbw (GB/s)." ;;
        ring_vs_mpi_summary.txt) echo "Median busbw (GB/s) of the rounds per size (B), and ring / MPI, the ratio of the medians." ;;
        alpha_beta.txt) echo "The alpha-beta model fitted to the ring's times: alpha in µs per message, beta in ns per byte (1/beta in GB/s)." ;;
        ddp_scaling.txt) echo "DDP on the small preset, batch 4 per rank: tokens/s of the whole job and ms per step (medians after 3 warm-up steps)." ;;
        ddp_demo.log) echo "The DDP demo's log: 4 ranks train the small GPT (loss, ms, tokens/s, MFU, memory per category)." ;;
        fit.log) echo "gnuplot's messages while fitting." ;;
        *.dat) echo "Plot data (columns as in its first lines)." ;;
        *) echo "" ;;
    esac
}

# ---------------------------------------------------------------- headline numbers

summary_core() {  # summary_core DIR
    local f=$1/bench-core.txt
    [ -f "$f" ] || { echo "| core | bench-core.txt missing | | | $(short "$1") |"; return; }
    local ours torch ratio ceil share
    ours=$(awk '$1 == "ours" {print $2}' "$f")
    torch=$(awk '$1 == "pytorch" {print $2}' "$f")
    ratio=$(awk '$1 == "ratio" {print $3}' "$f")
    ceil=$(sed -n 's/^sgemm ceiling.* \([0-9.]*\) GFLOP\/s;.*/\1/p' "$f")
    share=$(sed -n 's/.*ours reaches \([0-9.]*\)%.*/\1/p' "$f")
    echo "| core | tokens/s, ours vs PyTorch 1.13 (small preset, 1 thread) | $ours vs $torch = **${ratio}×** | ≥ 1.0× | $(verdict "$(awk -v r="$ratio" 'BEGIN {print (r >= 1.0)}')") | $(short "$1") |"
    echo "| core | share of the sgemm ceiling ($ceil GFLOP/s on the model's GEMM shapes) | **$share %** | ≥ 70 % | $(verdict "$(awk -v s="$share" 'BEGIN {print (s >= 70)}')") | $(short "$1") |"
}

summary_01() {
    local m=$1/measured.txt o=$1/oom.txt
    if [ -f "$m" ]; then
        # rows "  <category> <pred> <unit> <meas> <unit> <bytes> <diff%>" of every model
        read -r models rows bad < <(awk '
            /^[^ ].*: L=/ {models++}
            $1 ~ /^(params|grads|optimizer|activations|workspace)$/ && $NF ~ /%$/ {
                rows++; if ($NF != "+0.00%" && $NF != "-0.00%") bad++ }
            END {print models + 0, rows + 0, bad + 0}' "$m")
        echo "| 01 | measured ledger vs the calculator's prediction, per category | $((rows - bad)) of $rows equal ($models models × 5 categories) | equal in every category | $(verdict "$([ "$bad" -eq 0 ] && [ "$rows" -gt 0 ] && echo 1 || echo 0)") | $(short "$1") |"
    fi
    if [ -f "$o" ]; then
        local line
        line=$(awk '/^\$ build\/train .*--device-mem 64MB/ {getline; print; exit}' "$o")
        echo "| 01 | the 10⁻⁴-scale 70B on a 64 MB \"node\" | ${line:-no trainer output} | out of memory at step zero, in the optimizer | $(verdict "$(echo "$line" | grep -q 'for optimizer' && echo 1 || echo 0)") | $(short "$1") |"
    fi
}

summary_02() {
    local s=$1/ring_vs_mpi_summary.txt d=$1/ddp_scaling.txt g=$1/ddp_demo.log
    if [ -f "$s" ]; then
        awk -v src="$(short "$1")" '
            $1 ~ /^[0-9]+$/ {n++; r = $5 + 0; if (n == 1 || r < lo) lo = r; if (n == 1 || r > hi) hi = r
                             sizes = sizes (n > 1 ? ", " : "") sprintf("%g MiB %.2f×", $1 / 1048576, r)}
            END {
                if (!n) { print "| 02 | ring vs MPI_Allreduce | no sizes in ring_vs_mpi_summary.txt | ring ≥ MPI | **MISSED** | " src " |"; exit }
                range = n > 1 ? sprintf("%.2f–%.2f×", lo, hi) : sprintf("%.2f×", lo)
                printf "| 02 | hand-written ring vs MPI_Allreduce, busbw at ≥ 16 MiB, 2 ranks (median of 5 rounds) | ring/MPI **%s** (%s) | ring ≥ MPI at every size | %s | %s |\n",
                       range, sizes, (lo >= 1 ? "met" : "**MISSED**"), src }' "$s"
    fi
    if [ -f "$d" ]; then
        awk -v src="$(short "$1")" '
            !/^#/ && NF >= 2 {n++; r[n] = $1; t[n] = $2; if ($1 == 1) base = $2}
            END {
                s = ""
                for (i = 1; i <= n; i++)
                    s = s (i > 1 ? "; " : "") sprintf("%d rank%s %.0f tok/s", r[i], r[i] == 1 ? "" : "s", t[i]) \
                        (base && r[i] > 1 ? sprintf(" (%.2f×)", t[i] / base) : "")
                printf "| 02 | DDP scaling, small preset, batch 4 per rank | %s | near N× while ranks ≤ cores; flat beyond (no pass/fail) | — | %s |\n", s, src }' "$d"
    fi
    if [ -f "$g" ]; then
        local loss
        loss=$(sed -n 's/.*done: loss \([0-9.]*\) -> \([0-9.]*\).*/\1 → \2/p' "$g" | head -n1)
        echo "| 02 | DDP demo, 4 ranks: loss (nats) | ${loss:-no summary line} | falls (uniform guess 5.55) | $(verdict "$(echo "$loss" | awk '{print ($3 + 0 > 0 && $3 < $1)}')") | $(short "$1") |"
    fi
}

# ---------------------------------------------------------------- one stage in full

stage_section() {  # stage_section STAGE
    local st=$1 src f name
    src=$(src_dir "$st")
    echo
    echo "## $(stage_title "$st")"
    echo
    if [ -z "$src" ]; then
        echo "Not measured yet, and nothing committed: run \`$(stage_cmd "$st")\`."
        return
    fi
    echo "Source: $(label "$src")."
    if ! is_now "$src" && [ "$now" != "$committed" ]; then
        if [ -d "$now/$st" ]; then
            echo "Your run in \`$now/$st/\` has no run.info: it did not finish, so it is not shown."
        else
            echo "You have not run \`$(stage_cmd "$st")\` yet; these are the course's figures."
        fi
    fi
    if is_now "$src" && [ -f "$committed/$st/run.info" ]; then
        echo "The course's own run, which the lesson quotes, is in \`$committed/$st/\`" \
             "($(run_info "$committed/$st" date), $(run_info "$committed/$st" machine))."
    fi
    for f in "$src"/*.txt "$src"/*.log; do
        [ -f "$f" ] || continue
        name=$(basename "$f")
        [ "$name" = fit.log ] && [ ! -s "$f" ] && continue  # an empty fit log says nothing
        echo
        echo "### $name"
        echo
        echo "$(describe "$name") — $(label "$src")"
        echo
        fence "$f"
    done
    for f in "$src"/*.png; do
        [ -f "$f" ] || continue
        echo
        echo "### figure: $(basename "$f" .png)"
        echo
        echo "$(label "$src")"
        echo
        echo "![$(basename "$f" .png)]($(rel "$f"))"
    done
    for f in "$src"/*.dat; do
        [ -f "$f" ] || continue
        echo
        echo "<details><summary>plot data: $(basename "$f") — $(label "$src" | plain)</summary>"
        echo
        fence "$f"
        echo
        echo "</details>"
    done
}

# ---------------------------------------------------------------- the report

stages=$( { ls -d "$committed"/[0-9][0-9]_*/ "$now"/[0-9][0-9]_*/ 2>/dev/null || true; } |
          xargs -rn1 basename | sort -u)
{
    echo "# Measured results"
    echo
    echo "Generated $(date -u +%Y-%m-%d) on $(machine_desc) by \`make report\`."
    echo "Each stage comes from your own run where you made one: **measured now**, from"
    echo "\`$now/\`. A stage you have not run shows the course's own measured run, which the"
    echo "lessons quote: **committed earlier**, from \`$committed/\`. Each says its date and"
    echo "machine; numbers from different machines do not compare."
    echo
    echo "## Summary: headline numbers against the targets"
    echo
    echo "| stage | what | measured | target | | source |"
    echo "|---|---|---|---|---|---|"
    for st in $stages; do
        src=$(src_dir "$st")
        if [ -z "$src" ]; then
            echo "| $st | not measured yet | run \`$(stage_cmd "$st")\` | | | |"
            continue
        fi
        case "$st" in
            00_core) summary_core "$src" ;;
            01_memory_wall) summary_01 "$src" ;;
            02_ddp_allreduce) summary_02 "$src" ;;
            *) echo "| $st | (no headline numbers defined; see below) | | | | $(short "$src") |" ;;
        esac
    done
    echo
    echo "Sources:"
    echo
    for st in $stages; do
        src=$(src_dir "$st")
        [ -n "$src" ] && echo "- $st: $(label "$src")"
    done
    for st in $stages; do stage_section "$st"; done
} >"$out"
# Figure captions are the lines that start with the label.
figs=$(grep -c '^!\[' "$out" || true)
echo "report: $out: $(( $(grep -c '^### ' "$out") - figs )) tables, $figs figures" \
     "($(grep -c '^\*\*measured now\*\* (' "$out" || true) measured now," \
     "$(grep -c '^\*\*committed earlier\*\* (' "$out" || true) committed earlier)"
