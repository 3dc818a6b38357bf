#!/usr/bin/env bash
# grade.sh — scores a stage's tests per part.
#
#   BUILD=build-ex bash scripts/grade.sh 2 [PART]     (what `make grade-2` runs)
#
# Runs the stage's suite (tests/run.sh stageNN) against the binaries in $BUILD and
# reads NN_*/exercises/parts.txt, whose lines are
#     <part>  <points>  <check-name prefix> [<prefix> ...]
# A part earns its points when every check whose name starts with one of its
# prefixes passed (and there was at least one). A check that crashed or timed out
# failed. With PART, only that part is shown. The last line is "score: S/T".
set -u
cd "$(dirname "$0")/.."
n=$(printf '%02d' "$((10#${1:?usage: grade.sh STAGE [PART]}))")
only=${2:-}
dir=$(ls -d "${n}"_* 2>/dev/null | head -n1)
parts="$dir/exercises/parts.txt"
[ -f "$parts" ] || { echo "grade: stage $n has no $parts"; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
BUILD=${BUILD:-build-ex} bash tests/run.sh "stage$n" >"$out" 2>&1
# The runner prefixes lines with "  [suite] "; keep "PASS name" / "FAIL name".
checks=$(sed -n 's/^ *\[[^]]*\] \(PASS\|FAIL\) \([^ ]*\).*/\1 \2/p' "$out")
total=0 score=0 shown=0
printf '%-26s %9s %9s\n' part checks score
while read -r part points prefixes; do
    case "$part" in ''|'#'*) continue ;; esac
    [ -n "$only" ] && [ "$only" != "$part" ] && continue
    shown=1
    pass=0 all=0
    while read -r verdict name; do
        [ -z "$name" ] && continue
        for p in $prefixes; do
            case "$name" in "$p"*) all=$((all + 1)); [ "$verdict" = PASS ] && pass=$((pass + 1)); break ;; esac
        done
    done <<<"$checks"
    got=0
    [ "$all" -gt 0 ] && [ "$pass" -eq "$all" ] && got=$points
    total=$((total + points)); score=$((score + got))
    printf '%-26s %4d/%-4d %4d/%-4d\n' "$part" "$pass" "$all" "$got" "$points"
    if [ "$got" -eq 0 ]; then   # show what failed, so the learner knows where to look
        grep -E "\] FAIL ($(echo $prefixes | sed 's/ /|/g'))" "$out" | head -n 5 | sed 's/^ */    /'
    fi
done <"$parts"
[ "$shown" -eq 1 ] || { echo "grade: no part named '$only' in $parts"; exit 2; }
echo "score: $score/$total"
