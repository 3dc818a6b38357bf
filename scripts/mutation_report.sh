#!/usr/bin/env bash
# mutation_report.sh — the graders' mutation score, measured: mechanical mutants of
# every exercise file (universalmutator: operators, constants, off-by-ones, deleted
# statements), each graded as a learner's file is (its stage's stages before it the
# reference's, the file alone from exercises/: make EX_FILES), and a report per stage.
# A maintainer's command, not CI's: it takes minutes per file.
#
#   bash scripts/mutation_report.sh STAGE [SAMPLE [SEED]]    (default 30 mutants a file, seed 1)
#
# Needs build/ built and make test's log of the stage's suite (build/suite-logs), and
# universalmutator (pip install universalmutator). Writes docs/mutation/stageNN.md: per
# file and part, the mutants generated, sampled, stillborn (do not compile), killed
# (some part of the file lost marks) and survived, each survivor's diff with room for
# its verdict: equivalent (why) or the check that now kills it.
set -u
cd "$(dirname "$0")/.."
stage=${1:?usage: mutation_report.sh STAGE [SAMPLE [SEED]]}
n=$(printf '%02d' "$((10#$stage))")
sample=${2:-30} seed=${3:-1}
dir=$(ls -d "${n}"_* | head -n 1)
command -v mutate >/dev/null || { echo "mutation_report: universalmutator's mutate is missing (pip install universalmutator)"; exit 2; }
ref="build/suite-logs/stage$n.log"
[ -s "$ref" ] || { echo "mutation_report: no $ref: run make test first"; exit 2; }
tree=build-mutrep
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=docs/mutation/stage$n.md
mkdir -p docs/mutation

# The tree and build/ copied once, mtimes kept: a mutant rebuilds its one file.
rm -rf "$tree" && mkdir -p "$tree"
tar -cf - --exclude=./.git --exclude=./build --exclude='./build-*' --exclude=./runs \
    --exclude=./results --exclude=./docs . | tar -xf - -C "$tree"
cp -a build "$tree/build"

# The tests that report CHECKS' names in the reference log (comma-separated).
tests_of() {  # tests_of "CHECK..."
    awk -v want=" $1 " 'match($0, /^ *\[[^]]*\] (PASS|FAIL) [^ ]+/) {
            split(substr($0, RSTART, RLENGTH), w, " "); t = w[1]; gsub(/^\[|\]$/, "", t)
            if (index(want, " " w[3] " ")) seen[t] = 1 }
        END { s = ""; for (t in seen) { printf "%s%s", s, t; s = "," } }' "$ref"
}
# Only comments or layout changed (the same code once comments are stripped):
# equivalent by construction, not sampled.
stripped() { gcc -fpreprocessed -dD -E -P -x c "$1" 2>/dev/null | tr -d ' \t\n'; }
comment_only() {  # comment_only ORIG MUTANT
    [ "$(stripped "$1")" = "$(stripped "$2")" ]
}
# Does it compile (syntax and types, against the stage's headers)? A mutant that does
# not is stillborn: counted, not graded.
compiles() {  # compiles FILE
    gcc -std=c11 -D_GNU_SOURCE -fsyntax-only -Icommon $(for d in [0-9][0-9]_*; do echo "-I$d"; done) \
        -I"$dir" "$1" >/dev/null 2>&1
}
# A survivor whose every changed line is inside a CHECK(...) of the reference: an
# assertion (or its message), which fires on no correct run.
in_check_only() {  # in_check_only ORIG MUTANT
    local lines
    lines=$(diff "$1" "$2" | sed -n 's/^\([0-9]*\)\(,[0-9]*\)\?c.*/\1/p')
    [ -n "$lines" ] || return 1
    for l in $lines; do
        awk -v l="$l" 'NR <= l {if ($0 ~ /CHECK\(/) start = NR; if ($0 ~ /;[[:space:]]*(\/\/.*)?$/ && NR < l) start = 0}
                       END {exit !(start > 0)}' "$1" || return 1
    done
}

{
    echo "# Mechanical mutants of stage $n's exercise files"
    echo
    echo "\`bash scripts/mutation_report.sh $((10#$n)) $sample $seed\` on $(date -u '+%Y-%m-%d'),"
    echo "$(git rev-parse --short HEAD). Each mutant (universalmutator's C rules) of a reference"
    echo "file is graded as a learner's file would be (\`make EX=$((10#$n)) EX_FILES=<file>\`:"
    echo "the file alone from exercises/, the stages before this one the reference's), on the"
    echo "tests that report its parts' checks. Killed: some part of the file lost marks."
    echo
} >"$out"
total_k=0 total_s=0 total_b=0
for f in $(LIST_FILES=1 BUILD=build bash scripts/grade.sh --list "$n" | cut -d' ' -f2- | tr ' ' '\n' | sort -u); do
    parts=$(LIST_FILES=1 BUILD=build bash scripts/grade.sh --list "$n" |
            awk -v f="$f" '{for (i = 2; i <= NF; i++) if ($i == f) print $1}' | tr '\n' ' ')
    checks=$(BUILD=build bash scripts/grade.sh --list "$n" "$(echo $parts | tr ' ' ',')" | tr '\n' ' ')
    tests=$(tests_of "$checks")
    rm -rf "$work/m" && mkdir -p "$work/m"
    (cd "$work" && mutate "$OLDPWD/$dir/$f" c --noCheck --mutantDir m >/dev/null 2>&1)
    all=$(ls "$work/m" | wc -l)
    for m in "$work"/m/*; do comment_only "$dir/$f" "$m" && rm -f "$m"; done
    left=$(ls "$work/m" | wc -l)
    order=$(ls "$work/m" | sort | shuf --random-source=<(yes "$seed"))
    cp "$tree/$dir/exercises/$f" "$work/starter"
    k=0 s=0 b=0 tried=0 survivors=""
    : >"$work/stop"
    for p in $parts; do BUILD=build bash scripts/grade.sh --list "$n" "$p" | sed "s/^/$p /" >>"$work/stop"; done
    for m in $order; do
        [ "$tried" -ge "$sample" ] && break
        cp "$work/m/$m" "$work/$f"
        if ! compiles "$work/$f"; then b=$((b + 1)); continue; fi
        tried=$((tried + 1))
        cp "$work/m/$m" "$tree/$dir/exercises/$f"
        if ! make -C "$tree" --no-print-directory -s UPTO="$((10#$n))" EX="$((10#$n))" EX_FILES="$f" \
                BUILD=build all >"$work/make" 2>&1; then
            b=$((b + 1)); tried=$((tried - 1)); continue
        fi
        ONLY=$tests TEST_TIMEOUT=60 BUILD=build STOP_WHEN_CAUGHT="$work/stop" \
            bash "$tree/scripts/grade.sh" "$n" "$(echo $parts | tr ' ' ',')" >"$work/grade" 2>&1
        sc=$(sed -n 's/^score: //p' "$work/grade" | tail -n 1)
        if [ -n "$sc" ] && [ "${sc%/*}" = "${sc#*/}" ]; then
            s=$((s + 1))
            verdict="(to fill in)"
            in_check_only "$dir/$f" "$work/m/$m" &&
                verdict="equivalent: only an assertion of the reference's (a CHECK, or its message) changed, which fires on no correct run (classified by the script)"
            survivors+="### $m"$'\n\n'"Verdict: $verdict"$'\n\n```diff\n'"$(diff -u "$dir/$f" "$work/m/$m" | tail -n +3)"$'\n```\n\n'
        else
            k=$((k + 1))
        fi
        echo "  $f $m: ${sc:-no score}" >&2
    done
    cp "$work/starter" "$tree/$dir/exercises/$f"
    total_k=$((total_k + k)) total_s=$((total_s + s)) total_b=$((total_b + b))
    {
        echo "## $f (parts: $parts)"
        echo
        echo "| generated | not comments only | stillborn (drawn, not compiling) | graded | killed | survived |"
        echo "|---|---|---|---|---|---|"
        echo "| $all | $left | $b | $((k + s)) | $k | $s |"
        echo
        [ -n "$survivors" ] && printf '%s' "$survivors"
    } >>"$out"
done
{
    echo "## Total"
    echo
    echo "killed $total_k, survived $total_s, stillborn $total_b (mutation score of the compiled: $(awk -v k=$total_k -v s=$total_s 'BEGIN {printf "%.1f %%", (k + s) ? 100 * k / (k + s) : 0}'))"
} >>"$out"
rm -rf "$tree"
echo "mutation_report: $out (killed $total_k, survived $total_s, stillborn $total_b)"
