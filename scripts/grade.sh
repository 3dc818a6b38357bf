#!/usr/bin/env bash
# grade.sh — scores a stage's tests per part.
#
#   BUILD=build-ex bash scripts/grade.sh 2 [PART[,PART...]]   (`make grade-2 [PART=..]`)
#
# Reads NN_*/exercises/parts.txt, where each part declares the checks it must see:
#     <part> <points> <check> [<check> ...]      (continued on indented lines)
# A check may use bash's {a,b} to list variants; "mpi:" before it means "expected
# when this build has MPI and mpirun is installed". Then runs the stage's suite
# (tests/run.sh stageNN) on the binaries in $BUILD and, per part:
#   - every declared check that reported PASS counts;
#   - one that reported FAIL fails, and its line is shown (what, where, got, want);
#   - one that never reported fails too: its test crashed, hung or stopped early.
#     The tests announce their checks ("PLAN name"), so the test is named, with
#     how it ended and its last lines.
# A part earns its points only when every check passed (parts.txt says why). For
# each test that failed, the command that reruns it alone on this build is shown.
# The last line is "score: S/T"; the exit status is 0 only for full marks (of the
# parts named, with PART). GRADE_LOG=file keeps the suite's raw output there;
# ONLY=test,... runs only those tests of the suite (tests/run.sh; grade_check.sh
# uses it to run a mutant's tests alone).
#   bash scripts/grade.sh --list 2 [PART,...]   only print the checks the parts declare
set -u
cd "$(dirname "$0")/.."
list=0
[ "${1:-}" = --list ] && { list=1; shift; }
stage=${1:?usage: grade.sh [--list] STAGE [PART[,PART...]]}
n=$(printf '%02d' "$((10#$stage))")
only=${2:-}
BUILD=${BUILD:-build-ex}
dir=$(ls -d "${n}"_* 2>/dev/null | head -n1)
parts_file="$dir/exercises/parts.txt"
[ -n "$dir" ] && [ -f "$parts_file" ] || { echo "grade: stage $n has no exercises/parts.txt"; exit 2; }
[ -f "tests/stage$n.sh" ] || { echo "grade: stage $n has no tests/stage$n.sh"; exit 2; }

have_mpi=0
if command -v mpirun >/dev/null && [ -f "$BUILD/common/comm_mpi.o" ]; then have_mpi=1; fi

# ---------------------------------------------------------------- the declared parts
names=() points=() checks=()
add_words() {  # appends the expanded check names in "$@" to the last part
    local w cond expanded
    for w in "$@"; do
        cond=
        case "$w" in mpi:*) cond=mpi; w=${w#mpi:} ;; esac
        [[ "$w" =~ ^[A-Za-z0-9_.,{}+-]+$ ]] ||
            { echo "grade: $parts_file: bad check name '$w'"; exit 2; }
        [ "$cond" = mpi ] && [ "$have_mpi" = 0 ] && continue
        expanded=$(eval "printf '%s ' $w")
        checks[${#checks[@]} - 1]+="$expanded"
    done
}
while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in ''|'#'*) continue ;; esac
    # shellcheck disable=SC2086
    if [[ "$line" =~ ^[[:space:]] ]]; then
        [ ${#names[@]} -gt 0 ] || { echo "grade: $parts_file: continuation before any part"; exit 2; }
        add_words $line
    else
        set -- $line
        [ $# -ge 3 ] && [[ "$2" =~ ^[0-9]+$ ]] ||
            { echo "grade: $parts_file: expected '<part> <points> <checks...>': $line"; exit 2; }
        names+=("$1"); points+=("$2"); checks+=("")
        shift 2
        add_words "$@"
    fi
done <"$parts_file"
only=" ${only//,/ } "
for want in $only; do
    found=0
    for p in "${names[@]}"; do [ "$p" = "$want" ] && found=1; done
    [ "$found" = 1 ] || { echo "grade: stage $n has no part '$want'; its parts: ${names[*]}"; exit 2; }
done

if [ "$list" = 1 ]; then
    for i in "${!names[@]}"; do
        [ -n "${only// /}" ] && [[ "$only" != *" ${names[$i]} "* ]] && continue
        printf '%s\n' ${checks[$i]}
    done
    exit 0
fi

# ---------------------------------------------------------------- run the suite
out=$(mktemp)
trap 'rm -f "$out"' EXIT
what="the binaries in $BUILD/"
[ "$BUILD" = build-ex ] && what="build-ex/: your $dir/exercises/ in place of its reference, the stages before it the reference's, none after it"
if [ -n "${GRADE_FROM:-}" ]; then
    # A log of this suite that `make test` has just written (grade_check.sh checks
    # that nothing it ran has changed since): scored without running it again.
    [ -f "$GRADE_FROM" ] || { echo "grade: GRADE_FROM=$GRADE_FROM: no such file"; exit 2; }
    echo "grading $what; from $GRADE_FROM (make test's run of tests/stage$n.sh) ..."
    cp "$GRADE_FROM" "$out"
else
    echo "grading $what; running tests/stage$n.sh ..."
    SHOW_PLAN=1 BUILD=$BUILD bash tests/run.sh "stage$n" >"$out" 2>&1
fi
[ -n "${GRADE_LOG:-}" ] && cp "$out" "$GRADE_LOG"

declare -A verdict detail run_of planned abnormal rerun tail_of ungraded_fail graded
for i in "${!names[@]}"; do for c in ${checks[$i]}; do graded[$c]=1; done; done
# The runner prefixes every line of a test with "  [test] "; its indented lines
# below (its last output, when it failed) belong to the test named last.
current=
while IFS= read -r line; do
    if [[ "$line" =~ ^\ \ \[([^]]+)\]\ (.*)$ ]]; then
        current=${BASH_REMATCH[1]}
        rest=${BASH_REMATCH[2]}
        case "$rest" in
            PASS\ *|FAIL\ *)
                v=${rest%% *}; rest=${rest#* }; name=${rest%% *}
                d=${rest#"$name"}; d=${d#"${d%%[![:space:]]*}"}
                # A check that failed anywhere has failed (it may report once per rank).
                if [ "${verdict[$name]:-}" != FAIL ]; then
                    verdict[$name]=$v; detail[$name]=$d; run_of[$name]=$current
                fi
                # A failing check that no part grades (a reference run the graded
                # checks compare with, say) often explains why those failed.
                [ "$v" = FAIL ] && [ -z "${graded[$name]:-}" ] &&
                    ungraded_fail[$current]+="FAIL $name  ${d:0:400}"$'\n' ;;
            PLAN\ *) planned[${rest#PLAN }]=$current ;;
            CRASH:*) abnormal[$current]=${rest#CRASH: } ;;
            "FAIL: exited with status"*) r=${rest#FAIL: }; abnormal[$current]=${r%; last lines:} ;;
            "rerun alone: "*) rerun[$current]=${rest#rerun alone: } ;;
        esac
    elif [[ "$line" =~ ^\ \ \ \ \ \ (.*)$ ]] && [ -n "$current" ]; then
        tail_of[$current]+="${BASH_REMATCH[1]}"$'\n'
    fi
done <"$out"

# ---------------------------------------------------------------- score
# What is printed for a part is kept in `shown` too: the hint about earlier stages
# reads only what the learner can see.
say() { printf '%s\n' "$1"; shown+="$1"$'\n'; }
total=0 score=0 full=1
printf '%-22s %9s %9s\n' part checks score
for i in "${!names[@]}"; do
    part=${names[$i]}
    [ -n "${only// /}" ] && [[ "$only" != *" $part "* ]] && continue
    pass=0 all=0 problems=() runs=()
    for c in ${checks[$i]}; do
        all=$((all + 1))
        case "${verdict[$c]:-}" in
            PASS) pass=$((pass + 1)); continue ;;
            FAIL) problems+=("FAIL $c  ${detail[$c]:0:600}"); r=${run_of[$c]} ;;
            *)    r=${planned[$c]:-}
                  if [ -n "$r" ]; then problems+=("NEVER REPORTED $c  (its test, $r, ended first)")
                  else problems+=("NEVER REPORTED $c  (no test announced it: did one fail to start?)"); fi ;;
        esac
        [ -n "$r" ] && [[ " ${runs[*]} " != *" $r "* ]] && runs+=("$r")
    done
    got=0
    [ "$all" -gt 0 ] && [ "$pass" -eq "$all" ] && got=${points[$i]}
    [ "$got" -eq "${points[$i]}" ] || full=0
    total=$((total + points[i])); score=$((score + got))
    printf '%-22s %4d/%-4d %4d/%-4d\n' "$part" "$pass" "$all" "$got" "${points[$i]}"
    [ ${#problems[@]} -eq 0 ] && continue
    shown=
    for k in "${!problems[@]}"; do
        [ "$k" -ge 3 ] && { say "    ... and $(( ${#problems[@]} - 3 )) more"; break; }
        say "    ${problems[$k]}"
    done
    for k in "${!runs[@]}"; do
        [ "$k" -ge 2 ] && { more=$(( ${#runs[@]} - 2 )); say "    ... and $more more failing test$([ "$more" -gt 1 ] && echo s)"; break; }
        r=${runs[$k]} lines=
        if [ -n "${abnormal[$r]:-}" ]; then
            say "    test $r ended abnormally: ${abnormal[$r]}; its last lines:"
            lines=$(printf '%s' "${tail_of[$r]:-}" | grep -v -E '^(PASS|FAIL|PLAN) ' | tail -n 6 |
                    cut -c1-600 | sed 's/^/        /')
        elif printf '%s' "${tail_of[$r]:-}" | grep -q -v -E '^(PASS|FAIL|PLAN) |^$'; then
            say "    test $r said:"
            # its own words first: the launcher's lines ("rank 0 exited with status 1")
            # only when the test said nothing else
            lines=$(printf '%s' "${tail_of[$r]:-}" | grep -v -E '^(PASS|FAIL|PLAN) |^launcher: ' |
                    tail -n 4 | cut -c1-400 | sed 's/^/        /')
            [ -n "$lines" ] ||
                lines=$(printf '%s' "${tail_of[$r]:-}" | grep -v -E '^(PASS|FAIL|PLAN) ' | tail -n 4 |
                        cut -c1-400 | sed 's/^/        /')
        fi
        [ -n "$lines" ] && say "$lines"
        if [ -n "${ungraded_fail[$r]:-}" ]; then
            say "    test $r also failed (not graded, but it may be the cause):"
            # one line per check (each rank may report the same one)
            say "$(printf '%s' "${ungraded_fail[$r]}" | awk '!seen[$2]++' | head -n 2 | cut -c1-500 |
                   sed 's/^/        /')"
        fi
        [ -n "${rerun[$r]:-}" ] && say "    rerun alone: ${rerun[$r]}"
    done
    # Grading builds the stages before this one from their reference and leaves the
    # later ones out: a failure shown in an earlier stage's files is reference code
    # running on what this stage's files gave it.
    for st in $(printf '%s' "$shown" | grep -o '\b0[1-7]_[a-z_]*/' | sort -u | cut -c1-2); do
        if [ "$((10#$st))" -lt "$((10#$n))" ] && [[ " ${hinted:-} " != *" $st "* ]]; then
            hinted="${hinted:-} $st"
            echo "    note: the failure above shows in stage $st's code, which is the reference's" \
                 "here: what it was given comes from your stage $n files"
        fi
    done
done
if [ "$have_mpi" = 0 ] && grep -q 'mpi:' "$parts_file"; then
    echo "(checks over MPI not expected: no mpirun, or $BUILD was built without mpicc)"
fi
echo "score: $score/$total"
[ "$full" = 1 ]
