#!/usr/bin/env bash
# hint.sh — a hint for a part of a stage's exercises, one tier at a time.
#
#   bash scripts/hint.sh N PART [TIER]     (`make hint-N PART=x [TIER=k]`)
#   bash scripts/hint.sh                   the stages and their parts
#   bash scripts/hint.sh --check [N ...]   every part of parts.txt has its hints
#                                          (scripts/grade_check.sh runs it)
#
# The starters (NN_*/exercises/*.c) state each part's contract: what the function
# must do, its invariants, what the grader checks, the pitfalls. The steps live in
# NN_*/exercises/hints/<part>.md, in tiers, each a "## Hint K" section:
#   Hint 1   a nudge: which idea the part turns on;
#   Hint 2   the structure: the steps, in words;
#   Hint 3   near-solution pseudo-code.
# TIER (default 1) prints that tier alone and says how to ask for the next one. A
# stage or part that does not exist is refused, naming what does, with status 2.
set -u
cd "$(dirname "$0")/.." || exit 2

parts_of() {  # parts_of DIR: the part names its exercises/parts.txt declares, in order
    awk '/^[A-Za-z0-9_]/ {print $1}' "$1/exercises/parts.txt"
}
stage_dir() {  # stage_dir N: the stage's folder, if it has exercises
    local n d
    [[ "$1" =~ ^[0-9]+$ ]] || return 1
    n=$(printf '%02d' "$((10#$1))")
    d=$(ls -d "${n}"_*/ 2>/dev/null | head -n 1)
    d=${d%/}
    [ -n "$d" ] && [ -f "$d/exercises/parts.txt" ] && echo "$d"
}
stages_with_parts() {
    local f
    for f in [0-9][0-9]_*/exercises/parts.txt; do [ -f "$f" ] && echo "${f%%/*}"; done
}
tiers_of() {  # tiers_of FILE: the K of its "## Hint K" headings, in order
    sed -n 's/^## Hint \([0-9][0-9]*\)\b.*/\1/p' "$1"
}
usage() {
    echo "usage: make hint-N PART=name [TIER=k]   (bash scripts/hint.sh N PART [TIER])"
    echo "  tier 1 is a nudge, 2 the steps in words, 3 near-solution pseudo-code"
    local d
    for d in $(stages_with_parts); do
        echo "  make hint-$((10#${d%%_*})) PART=$(parts_of "$d" | paste -sd '|' -)"
    done
}

if [ "${1:-}" = --check ]; then
    shift
    stages=("$@")
    [ ${#stages[@]} -gt 0 ] || mapfile -t stages < <(stages_with_parts | cut -c1-2)
    bad_all=0
    for st in "${stages[@]}"; do
        dir=$(stage_dir "$st") || { echo "FAIL grade.hints.stage$st  no such stage with exercises"; bad_all=1; continue; }
        n=${dir%%_*} bad=""
        for part in $(parts_of "$dir"); do
            f="$dir/exercises/hints/$part.md"
            if [ ! -f "$f" ]; then bad+=" $part: no $f;"; continue; fi
            [ "$(tiers_of "$f" | paste -sd ' ' -)" = "1 2 3" ] ||
                bad+=" $part: tiers '$(tiers_of "$f" | paste -sd ' ' -)', want '1 2 3';"
            awk '/^## Hint/ {h = $3; next} h && NF {seen[h] = 1} END {exit !(seen[1] && seen[2] && seen[3])}' "$f" ||
                bad+=" $part: an empty tier;"
        done
        for f in "$dir"/exercises/hints/*.md; do  # no hints for a part that is gone
            [ -f "$f" ] || continue
            parts_of "$dir" | grep -qx "$(basename "$f" .md)" || bad+=" $(basename "$f"): no such part;"
        done
        if [ -z "$bad" ]; then echo "PASS grade.stage$n.hints  every part of $dir/exercises/parts.txt has hints/<part>.md, tiers 1-3"
        else echo "FAIL grade.stage$n.hints ${bad%;}"; bad_all=1; fi
    done
    exit "$bad_all"
fi

[ $# -eq 0 ] && { usage; exit 2; }
stage=$1 part=${2:-} tier=${3:-}
tier=${tier:-1}
dir=$(stage_dir "$stage") || {
    echo "hint: no stage '$stage' with exercises; stages: $(stages_with_parts | cut -c1-2 | sed 's/^0//' | paste -sd ' ' -)"
    exit 2
}
n=$((10#${dir%%_*}))
parts=$(parts_of "$dir" | paste -sd ' ' -)
if [ -z "$part" ]; then
    echo "hint: which part? make hint-$n PART=name, one of: $parts"
    exit 2
fi
if ! parts_of "$dir" | grep -qx -- "$part"; then
    echo "hint: stage $n has no part '$part'; its parts: $parts"
    exit 2
fi
file="$dir/exercises/hints/$part.md"
[ -f "$file" ] || { echo "hint: $file is missing (make grade-check checks that every part has one)"; exit 2; }
tiers=$(tiers_of "$file" | paste -sd ' ' -)
last=${tiers##* }
if [[ ! "$tier" =~ ^[0-9]+$ ]] || [[ " $tiers " != *" $((10#$tier)) "* ]]; then
    echo "hint: part $part has tiers $tiers, not '$tier'"
    exit 2
fi
tier=$((10#$tier))
src=$(awk '$1 == p {for (i = 2; i <= NF; i++) if ($i ~ /^\[/) {gsub(/[][]/, "", $i); print $i; exit}}' p="$part" "$dir/exercises/parts.txt")
echo "stage $n, part $part ($dir/exercises/${src//,/, }): hint $tier of $last"
echo
awk -v k="$tier" '/^## / {on = ($1 == "##" && $2 == "Hint" && $3 + 0 == k); next} on' "$file" |
    sed -e '/./,$!d' | sed -e ':a' -e '/^\n*$/{$d;N;ba' -e '}'
echo
if [ "$tier" -lt "$last" ]; then
    echo "Still stuck? make hint-$n PART=$part TIER=$((tier + 1))"
else
    echo "That is the last tier. The contract is in the starter; make grade-$n PART=$part checks it."
fi
