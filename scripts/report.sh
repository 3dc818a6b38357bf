#!/usr/bin/env bash
# report.sh — `make report`: gathers every stage's measured tables and figures
# (what `make stage-N` wrote under results/) into results/REPORT.md, ready to paste
# into a report. Run the stages first; a stage without results is listed as such.
set -eu
cd "$(dirname "$0")/.."
out=results/REPORT.md
{
    echo "# Measured results"
    echo
    echo "Generated $(date -u +%Y-%m-%d) on $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)," \
         "$(getconf _NPROCESSORS_ONLN) cores. Each section comes from \`make stage-N\`."
    for d in results/*/; do
        stage=$(basename "$d")
        echo
        echo "## $stage"
        for f in "$d"*.txt; do
            [ -f "$f" ] || continue
            echo
            echo "### $(basename "$f")"
            echo '```'
            head -n 60 "$f"
            echo '```'
        done
        for f in "$d"*.png; do
            [ -f "$f" ] && echo && echo "![$(basename "$f" .png)]($stage/$(basename "$f"))"
        done
    done
} >"$out"
echo "report: $out ($(grep -c '^!\[' "$out") figures)"
