#!/usr/bin/env bash
# grade.sh — scores a stage's tests per part.
#
#   BUILD=build-ex bash scripts/grade.sh 2 [PART[,PART...]]   (`make grade-2 [PART=..]`)
#
# Reads NN_*/exercises/parts.txt, where each part declares its files and the checks it
# must see:
#     <part> <points> [<file.c>,...] <check> [<check> ...]   (continued on indented lines)
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
# The last line is "score: S/T" (before it, when a part is not full, the line that
# points to the first such part's hints: make hint-N PART=name); the exit status is 0
# only for full marks (of the parts named, with PART). GRADE_LOG=file keeps the suite's raw
# output there: the first run's, then each isolated rerun's under a "====" line naming it;
# ONLY=test,... runs only those tests of the suite (tests/run.sh; grade_check.sh
# uses it to run a mutant's tests alone).
#
# Each part is graded in isolation (GRADE_ISOLATE=1, as make grade-N sets it): its
# checks are scored on a build with its own files from your exercises/ and the
# reference for every other file of the stage, so a mistake is charged to the file
# that holds it, and a later part can be graded before an earlier one is done. The
# suite first runs on all of your files (most parts pass or fail there as they would
# alone); each part that did not pass is then graded again on its own build (make
# EX_FILES=its files), running only the tests that report its checks.
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
names=() points=() checks=() files=()
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
        [ $# -ge 4 ] && [[ "$2" =~ ^[0-9]+$ ]] && [[ "$3" =~ ^\[[a-z0-9_,.]+\.c\]$ ]] ||
            { echo "grade: $parts_file: expected '<part> <points> [<file.c>,...] <checks...>': $line"; exit 2; }
        names+=("$1"); points+=("$2"); checks+=(""); f=${3#[}; files+=("${f%]}")
        for f in ${files[-1]//,/ }; do
            [ -f "$dir/$f" ] || { echo "grade: $parts_file: part $1's file $dir/$f does not exist"; exit 2; }
        done
        shift 3
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
        if [ "${LIST_FILES:-0}" = 1 ]; then echo "${names[$i]} ${files[$i]//,/ }"
        else printf '%s\n' ${checks[$i]}; fi
    done
    exit 0
fi

# ---------------------------------------------------------------- reading a run
declare -A verdict detail run_of planned abnormal rerun tail_of ungraded_fail graded seen
for i in "${!names[@]}"; do for c in ${checks[$i]}; do graded[$c]=1; done; done
# parse_log FILE [CHECKS...]: what the run in FILE said. The runner prefixes every
# line of a test with "  [test] "; its indented lines below (its last output, when it
# failed) belong to the test named last. With CHECKS (a part's run on its own build),
# those checks' verdicts and the tests FILE ran are read again, the rest kept.
parse_log() {
    local file=$1 current= line rest v name d r c
    shift
    for c in "$@"; do unset "verdict[$c]" "detail[$c]" "run_of[$c]" "planned[$c]"; done
    seen=()
    while IFS= read -r line; do
        if [[ "$line" =~ ^\ \ \[([^]]+)\]\ (.*)$ ]]; then
            current=${BASH_REMATCH[1]}
            rest=${BASH_REMATCH[2]}
            if [ -z "${seen[$current]:-}" ]; then  # a test run again: what it said before goes
                seen[$current]=1
                unset "abnormal[$current]" "rerun[$current]" "tail_of[$current]" "ungraded_fail[$current]"
            fi
            case "$rest" in
                PASS\ *|FAIL\ *)
                    v=${rest%% *}; rest=${rest#* }; name=${rest%% *}
                    d=${rest#"$name"}; d=${d#"${d%%[![:space:]]*}"}
                    # (with CHECKS, the others' verdicts are the first run's)
                    [ $# -gt 0 ] && [[ " $* " != *" $name "* ]] && [ -n "${graded[$name]:-}" ] && continue
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
    done <"$file"
}

# ---------------------------------------------------------------- scoring a part
# score_part I [PREFIX]: part I's row and what it failed, from what was read last, into
# got[I] and said[I]. PREFIX goes before the rerun commands (the part's own build).
declare -a got said
score_part() {
    local i=$1 prefix=${2:-} pass=0 all=0 problems=() runs=() c r k out lines more
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
    got[i]=0
    [ "$all" -gt 0 ] && [ "$pass" -eq "$all" ] && got[i]=${points[$i]}
    out=$(printf '%-22s %4d/%-4d %4d/%-4d' "${names[$i]}" "$pass" "$all" "${got[$i]}" "${points[$i]}")
    for k in "${!problems[@]}"; do
        [ "$k" -ge 3 ] && { out+=$'\n'"    ... and $(( ${#problems[@]} - 3 )) more"; break; }
        out+=$'\n'"    ${problems[$k]}"
    done
    for k in "${!runs[@]}"; do
        [ "$k" -ge 2 ] && { more=$(( ${#runs[@]} - 2 )); out+=$'\n'"    ... and $more more failing test$([ "$more" -gt 1 ] && echo s)"; break; }
        r=${runs[$k]} lines=
        if [ -n "${abnormal[$r]:-}" ]; then
            out+=$'\n'"    test $r ended abnormally: ${abnormal[$r]}; its last lines:"
            lines=$(printf '%s' "${tail_of[$r]:-}" | grep -v -E '^(PASS|FAIL|PLAN) ' | tail -n 6 |
                    cut -c1-600 | sed 's/^/        /')
        elif printf '%s' "${tail_of[$r]:-}" | grep -q -v -E '^(PASS|FAIL|PLAN) |^$'; then
            out+=$'\n'"    test $r said:"
            # its own words first: the launcher's lines ("rank 0 exited with status 1")
            # only when the test said nothing else
            lines=$(printf '%s' "${tail_of[$r]:-}" | grep -v -E '^(PASS|FAIL|PLAN) |^launcher: ' |
                    tail -n 4 | cut -c1-400 | sed 's/^/        /')
            [ -n "$lines" ] ||
                lines=$(printf '%s' "${tail_of[$r]:-}" | grep -v -E '^(PASS|FAIL|PLAN) ' | tail -n 4 |
                        cut -c1-400 | sed 's/^/        /')
        fi
        [ -n "$lines" ] && out+=$'\n'"$lines"
        if [ -n "${ungraded_fail[$r]:-}" ]; then
            out+=$'\n'"    test $r also failed (not graded, but it may be the cause):"
            # one line per check (each rank may report the same one)
            out+=$'\n'"$(printf '%s' "${ungraded_fail[$r]}" | awk '!seen[$2]++' | head -n 2 | cut -c1-500 |
                   sed 's/^/        /')"
        fi
        [ -n "${rerun[$r]:-}" ] && out+=$'\n'"    rerun alone: $prefix${rerun[$r]}"
    done
    # Grading builds the stages before this one from their reference and leaves the
    # later ones out: a failure shown in an earlier stage's files is reference code
    # running on what this stage's files gave it.
    local st hinted=
    for st in $(printf '%s' "$out" | grep -o '\b0[1-7]_[a-z_]*/' | sort -u | cut -c1-2); do
        if [ "$((10#$st))" -lt "$((10#$n))" ] && [[ " $hinted " != *" $st "* ]]; then
            hinted+=" $st"
            out+=$'\n'"    note: the failure above shows in stage $st's code, which is the reference's here: what it was given comes from your stage $n files"
        fi
    done
    said[i]=$out
}

wanted() { [ -z "${only// /}" ] || [[ "$only" == *" ${names[$1]} "* ]]; }  # wanted I

# ---------------------------------------------------------------- run the suite
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# run_suite LOG [ONLY]: the stage's suite on $BUILD's programs as they are now.
run_suite() { SHOW_PLAN=1 ONLY=${2:-${ONLY:-}} BUILD=$BUILD bash tests/run.sh "stage$n" >"$1" 2>&1; }
isolate=${GRADE_ISOLATE:-0}
what="the binaries in $BUILD/"
[ "$isolate" = 1 ] && what="each part on its own build in $BUILD/: its files from your $dir/exercises/, the reference for the rest of the stage and the stages before it, none after it"
if [ -n "${GRADE_FROM:-}" ]; then
    # A log of this suite that `make test` has just written (grade_check.sh checks
    # that nothing it ran has changed since): scored without running it again.
    [ -f "$GRADE_FROM" ] || { echo "grade: GRADE_FROM=$GRADE_FROM: no such file"; exit 2; }
    echo "grading $what; from $GRADE_FROM (make test's run of tests/stage$n.sh) ..."
    cp "$GRADE_FROM" "$out/all"
else
    echo "grading $what; running tests/stage$n.sh ..."
    run_suite "$out/all"
fi
[ -n "${GRADE_LOG:-}" ] && cp "$out/all" "$GRADE_LOG"
parse_log "$out/all"
for i in "${!names[@]}"; do wanted "$i" && score_part "$i"; done

# ---------------------------------------------------------------- each part alone
# relink FILES: $BUILD with only FILES of this stage from exercises/ (make EX_FILES).
relink() { make --no-print-directory -s -j"${JOBS:-$(nproc 2>/dev/null || echo 2)}" UPTO="$((10#$n))" EX="$((10#$n))" EX_FILES="$1" BUILD="$BUILD" all; }
# The tests that report a part's checks in the first run; "" when one of its checks
# was never heard of there (its test died before announcing it): then all of them.
tests_of_part() {  # tests_of_part I
    local c t list=" "
    for c in ${checks[$1]}; do
        t=${run_of[$c]:-${planned[$c]:-}}
        [ -z "$t" ] && { echo ""; return; }
        [[ "$list" == *" $t "* ]] || list+="$t "
    done
    list=${list# }; echo "${list// /,}" | sed 's/,$//'
}
declare -A done_files=()
all_files=$(for i in "${!names[@]}"; do echo "${files[$i]//,/ }"; done | tr ' ' '\n' | sort -u | tr '\n' ' ')
if [ "$isolate" = 1 ]; then
    for i in "${!names[@]}"; do
        wanted "$i" && [ "${got[$i]}" -ne "${points[$i]}" ] || continue
        fs=${files[$i]}
        [ -n "${done_files[$fs]:-}" ] && continue
        done_files[$fs]=1
        # the parts of these files that did not pass, and their tests
        redo=() tests=" " cks=()
        for k in "${!names[@]}"; do
            [ "${files[$k]}" = "$fs" ] && wanted "$k" && [ "${got[$k]}" -ne "${points[$k]}" ] || continue
            redo+=("$k"); cks+=(${checks[$k]})
            t=$(tests_of_part "$k"); [ -z "$t" ] && tests= ; [ -n "$tests" ] && tests+="${t//,/ } "
        done
        [ "$(echo "${fs//,/ }" | tr ' ' '\n' | sort | tr '\n' ' ')" = "$all_files" ] && continue  # = the first run
        tests=$(echo $tests | tr ' ' ','); [ -z "$tests" ] && tests=
        echo "  ... ${names[${redo[0]}]}$([ ${#redo[@]} -gt 1 ] && echo " and the other parts of ${fs//,/ }") again, on a build with only your ${fs//,/, } (the reference's other files)"
        if ! relink "${fs//,/ }" >"$out/make" 2>&1; then
            echo "grade: make EX_FILES=${fs//,/ } failed:"; tail -n 5 "$out/make"; exit 2
        fi
        run_suite "$out/part" "$tests"
        [ -n "${GRADE_LOG:-}" ] && { echo "==== ${names[${redo[0]}]} again, on a build with only your ${fs//,/, }"
                                    cat "$out/part"; } >>"$GRADE_LOG"
        parse_log "$out/part" "${cks[@]}"
        prefix="make -s UPTO=$((10#$n)) EX=$((10#$n)) EX_FILES='${fs//,/ }' BUILD=$BUILD all && "
        for k in "${redo[@]}"; do score_part "$k" "$prefix"; done
    done
    # $BUILD as make grade-N left it: every file of the stage yours.
    [ ${#done_files[@]} -gt 0 ] && relink "" >"$out/make" 2>&1
fi

# ---------------------------------------------------------------- score
total=0 score=0 full=1 stuck=
printf '%-22s %9s %9s\n' part checks score
for i in "${!names[@]}"; do
    wanted "$i" || continue
    printf '%s\n' "${said[$i]}"
    if [ "${got[$i]}" -ne "${points[$i]}" ]; then full=0; [ -n "$stuck" ] || stuck=${names[$i]}; fi
    total=$((total + points[i])); score=$((score + got[i]))
done
if [ "$have_mpi" = 0 ] && grep -q 'mpi:' "$parts_file"; then
    echo "(checks over MPI not expected: no mpirun, or $BUILD was built without mpicc)"
fi
# The first part not full: where its hints are (scripts/hint.sh; the starter has the
# contract). "score: S/T" stays the last line: grade_check.sh reads it.
[ -n "$stuck" ] && [ -f "$dir/exercises/hints/$stuck.md" ] &&
    echo "stuck? make hint-$((10#$n)) PART=$stuck   (a hint for the first part not full; TIER=2, 3 say more)"
echo "score: $score/$total"
[ "$full" = 1 ]
