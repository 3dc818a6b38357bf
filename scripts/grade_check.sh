#!/usr/bin/env bash
# grade_check.sh — proves every stage's grader (`make grade-check`, part of `make check`).
#
# For each stage N with NN_*/exercises/parts.txt, graded through the same path a
# learner's code is (scripts/grade.sh), in the learner's own state: the stages before
# N built from their reference, stage N from the file under test, and no later stage
# linked at all (make UPTO=N; a later stage's starter or reference cannot change a
# score it is not part of, and step 0 proves it is not):
#   0. the graded programs hold no symbol of a later stage (nm over build-ex/'s
#      programs against the later stages' objects);
#   1. the reference scores full marks (make test ran each stage's suite on the
#      programs linked as make stage-N links them: scored from its log);
#   2. the pristine starters (build-ex/, UPTO=N EX=N) score 0, and fail cleanly: no
#      test crashed by a signal or ran into the runner's time limit;
#   3. every mutant in tests/mutants/stageNN/*.patch — a typical learner mistake,
#      as a patch to the reference solution — loses the marks of each part its
#      "# breaks:" line names, and the suite still finishes: no test ran into the
#      runner's time limit (a hang must be caught by the tests' own timeouts).
#      Only the tests that reported those parts' checks in the reference run are
#      run for a mutant (grade.sh with ONLY= and PART=): the rest cannot change.
#      And they stop as soon as each of those parts has a check that FAILED
#      (tests/run.sh's STOP_WHEN_CAUGHT). A part counts as caught when it scores
#      less than full marks: by a failing check, or by a check that never reported
#      (its test crashed or hung first), which grading counts as failed.
# Mutants are built in build-mut/, a copy of the tree and of build/ with the one
# patched file rebuilt (UPTO=N). build-ex/ starts as a copy of build/ (the same
# reference objects: only stage N's exercises are compiled). Prints one PASS/FAIL
# line per proof and "N passed, N failed". Before all that, every part of parts.txt
# has its hints, tiers 1 to 3 (scripts/hint.sh --check: grade.stageNN.hints).
#
#   bash scripts/grade_check.sh          every stage (build/ must be built)
#   bash scripts/grade_check.sh 2        stage 02 only
set -u
cd "$(dirname "$0")/.."
passed=0 failed=0
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
MUT_TIMEOUT=${MUT_TIMEOUT:-120}   # per test, for mutants: every hang must be caught sooner
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}  # make's jobs for the builds here

verdict() {  # verdict OK NAME DETAIL
    if [ "$1" = 1 ]; then echo "PASS $2  $3"; passed=$((passed + 1))
    else echo "FAIL $2  $3"; failed=$((failed + 1)); fi
}
# The score column of PART in grade.sh's output ("12/30"), or "" if absent.
part_score() { awk -v p="$1" '$1 == p && NF == 3 {print $3}' "$2"; }
# Tests that the runner killed at its time limit (a hang nothing else caught), and
# with "signal" also those that died of a signal.
runner_killed() {  # runner_killed LOG [signal]
    local what='timed out'
    [ "${2:-}" = signal ] && what='timed out|signal'
    grep -E "^ *\[[^]]*\] CRASH: status [0-9]+ \(($what)" "$1" | head -n 3
}

command -v patch >/dev/null || { echo "FAIL grade.mutants  the patch command is missing " \
    "(scripts/install-deps.sh installs it)"; exit 1; }

# The tests (runner names, comma-separated) that reported the checks of PARTS in
# the reference run's log.
tests_of() {  # tests_of NN "PART ..." REFERENCE_LOG
    local checks
    checks=$(BUILD=build bash scripts/grade.sh --list "$1" "${2// /,}")
    awk -v want=" $(echo $checks) " '
        match($0, /^ *\[[^]]*\] (PASS|FAIL) [^ ]+/) {
            split(substr($0, RSTART, RLENGTH), w, " ")
            test = w[1]; gsub(/^\[|\]$/, "", test)
            if (index(want, " " w[3] " ")) seen[test] = 1
        }
        END { sep = ""; for (t in seen) { printf "%s%s", sep, t; sep = "," } }' "$3"
}

# The mutant tree: sources and build/ copied once, mtimes kept, so that `make` in
# it rebuilds only what a patch touches.
make_mutant_tree() {
    rm -rf build-mut
    mkdir -p build-mut
    tar -cf - --exclude=./.git --exclude=./build --exclude='./build-*' --exclude=./runs \
        --exclude=./results . | tar -xf - -C build-mut
    cp -a build build-mut/build
}

# 0. No symbol a later stage's objects define is in a program of build-ex/ (its
# executables: the drivers and the tests), which make UPTO=N linked.
check_alone() {  # check_alone NN
    local n=$1 later="" ours="build-ex/common build-ex/tests" s bins hits
    for s in [0-9][0-9]_*; do
        if [ "$((10#${s%%_*}))" -gt "$((10#$n))" ]; then later+=" build-ex/$s"; else ours+=" build-ex/$s"; fi
    done
    if [ -z "$later" ]; then
        verdict 1 "grade.stage$n.later_stages_absent" "no stage after $n"
        return
    fi
    # (a name the core or an earlier stage defines too, main say, is theirs)
    find $ours -name '*.o' -exec nm --defined-only {} + 2>/dev/null |
        awk '$2 ~ /^[TDR]$/ {print $3}' | sort -u >"$log/ours"
    find $later -name '*.o' -exec nm --defined-only {} + 2>/dev/null |
        awk '$2 ~ /^[TDR]$/ {print $3}' | sort -u | comm -23 - "$log/ours" >"$log/later"
    bins=$(make --no-print-directory -s UPTO="$n" EX="$n" BUILD=build-ex programs)
    # shellcheck disable=SC2086
    hits=$(nm --defined-only $bins 2>/dev/null | awk '$2 ~ /^[TDR]$/ {print $3}' | sort -u |
           comm -12 - "$log/later" | head -n 5 | tr '\n' ' ')
    local said="the graded programs hold no symbol of stages after $n"
    [ -n "$hits" ] && said="a graded program holds symbols of a later stage: $hits"
    verdict "$([ -z "$hits" ] && echo 1)" "grade.stage$n.later_stages_absent" "$said"
}

# A mutant of an exercise file is graded as a learner's file would be: the patched
# reference copied into exercises/, the build taking that file alone from there (make
# EX_FILES), the stages before the reference's. It must cost the parts its "# breaks:"
# line names, and every other part of the same file must keep its marks (a part of
# another file cannot see it: its build has the reference). A mutant of another file
# (the core's, say) is built into the reference itself and must cost the parts named.
check_mutant() {  # check_mutant NN PATCH
    local n=$1 m=$2 name breaks file dir owners parts tests t t0 secs lost s got part stop=1
    name=$(basename "$m" .patch)
    breaks=$(sed -n 's/^# breaks: //p' "$m")
    file=$(sed -n 's|^+++ b/||p' "$m" | head -n 1)
    dir=$(ls -d "${n}"_*)
    [ -d build-mut ] || make_mutant_tree
    if ! patch -s -p1 -d build-mut <"$m"; then
        verdict 0 "grade.stage$n.mutant.$name" "the patch no longer applies to the reference"
        return
    fi
    local ex=() own="" starter="$log/starter"
    if [ "$(dirname "$file")" = "$dir" ] && [ -f "$dir/exercises/$(basename "$file")" ]; then
        ex=(EX="$((10#$n))" EX_FILES="$(basename "$file")")
        cp "build-mut/$dir/exercises/$(basename "$file")" "$starter"
        cp "build-mut/$file" "build-mut/$dir/exercises/$(basename "$file")"
        own=$(LIST_FILES=1 BUILD=build bash scripts/grade.sh --list "$n" |
              awk -v f="$(basename "$file")" '{for (i = 2; i <= NF; i++) if ($i == f) print $1}' | tr '\n' ' ')
    fi
    parts="$breaks"
    for part in $own; do [[ " $breaks " == *" $part "* ]] || { parts+=" $part"; stop=0; }; done
    tests=$(tests_of "$n" "$parts" "$log/ref")
    t0=$(date +%s)
    if ! make -C build-mut --no-print-directory -s -j"$JOBS" UPTO="$n" "${ex[@]}" BUILD=build all >"$log/make" 2>&1; then
        verdict 0 "grade.stage$n.mutant.$name" "does not build: $(tail -n 3 "$log/make")"
    else
        : >"$log/stop"
        for part in $breaks; do
            BUILD=build bash scripts/grade.sh --list "$n" "$part" | sed "s/^/$part /" >>"$log/stop"
        done
        # Stopped once every named part has failed a check; where another part of the
        # file must be seen to keep its marks, only the tests that report nothing but
        # parts already caught are left out (run.sh's TEST_PARTS).
        : >"$log/test_parts"
        if [ "$stop" = 0 ]; then
            for part in $parts; do
                for t in $(tests_of "$n" "$part" "$log/ref" | tr ',' ' '); do
                    echo "$t $part" >>"$log/test_parts"
                done
            done
        fi
        ONLY=$tests GRADE_LOG=$raw TEST_TIMEOUT=$MUT_TIMEOUT BUILD=build \
            STOP_WHEN_CAUGHT="$log/stop" TEST_PARTS=$([ "$stop" = 0 ] && echo "$log/test_parts") \
            bash build-mut/scripts/grade.sh "$n" "$(echo $parts | tr ' ' ',')" >"$out" 2>&1
        secs=$(( $(date +%s) - t0 ))
        lost="" s=1
        for part in $parts; do
            got=$(part_score "$part" "$out")
            if [ -z "$got" ]; then s=0; lost+=" $part: not in the grader's table;"
            elif [[ " $breaks " == *" $part "* ]]; then
                if [ "${got%%/*}" != 0 ]; then s=0; lost+=" $part: still $got;"
                else lost+=" $part ${got};"; fi
            elif [ "${got%%/*}" != "${got##*/}" ]; then s=0; lost+=" $part (same file, not named): lost, $got;"
            else lost+=" keeps $part $got;"; fi
        done
        killed=$(runner_killed "$raw")
        [ -n "$killed" ] && { s=0; lost+=" a test hung until the runner's limit: $killed"; }
        verdict "$s" "grade.stage$n.mutant.$name" "loses${lost%;} ($(tail -n 1 "$out"), ${secs}s)"
        [ "$s" = 1 ] || sed 's/^/    /' "$out" | head -n 30
    fi
    [ ${#ex[@]} -gt 0 ] && cp "$starter" "build-mut/$dir/exercises/$(basename "$file")"
    patch -s -R -p1 -d build-mut <"$m" || { rm -rf build-mut; }
}

check_stage() {  # check_stage NN
    local n=$1 out="$log/out" raw="$log/raw" total ref ex m t0 secs name breaks part s lost
    # 1. the reference. `make test` (make check's first step) has run this suite on
    # build/ and kept its log: it is scored from that log when nothing the run used
    # (binaries, tests, the stage's folder, the scripts) has changed since.
    local from="build/suite-logs/stage$n.log" dir newer=""
    dir=$(ls -d "${n}"_* | head -n 1)
    # (make test relinks the programs for every stage's suite: they are newer than its
    # log. What must not be newer is the code and the tests.)
    if [ -s "$from" ]; then
        newer=$(find common tests scripts "$dir" Makefile -type f -newer "$from" -print -quit)
    fi
    if [ -s "$from" ] && [ -z "$newer" ]; then
        GRADE_FROM=$from GRADE_LOG="$log/ref" BUILD=build bash scripts/grade.sh "$n" >"$out" 2>&1
    else  # the reference in the learner's state, built and run now
        make --no-print-directory -s -j"$JOBS" UPTO="$n" BUILD=build all >"$log/make" 2>&1 ||
            { verdict 0 "grade.stage$n.reference_full_marks" "make UPTO=$n: $(tail -n 3 "$log/make")"; return; }
        GRADE_LOG="$log/ref" BUILD=build bash scripts/grade.sh "$n" >"$out" 2>&1
    fi
    ref=$(tail -n 1 "$out")
    total=$(sed -n 's/^score: [0-9]*\/\([0-9]*\)$/\1/p' <<<"$ref")
    verdict "$([ -n "$total" ] && [ "$ref" = "score: $total/$total" ] && echo 1)" \
        "grade.stage$n.reference_full_marks" "$ref"
    [ "$ref" = "score: $total/$total" ] || sed 's/^/    /' "$out" | head -n 40
    # 2. the starters, stage N's alone (its exercises/), the stages before it the reference's
    make --no-print-directory -s -j"$JOBS" UPTO="$n" EX="$n" BUILD=build-ex all >"$log/make" 2>&1 ||
        { verdict 0 "grade.stage$n.starters_score_zero" "make UPTO=$n EX=$n: $(tail -n 3 "$log/make")"; return; }
    check_alone "$n"
    GRADE_LOG=$raw BUILD=build-ex bash scripts/grade.sh "$n" >"$out" 2>&1
    ex=$(tail -n 1 "$out")
    verdict "$([ "$ex" = "score: 0/$total" ] && echo 1)" "grade.stage$n.starters_score_zero" "$ex"
    local killed
    killed=$(runner_killed "$raw" signal)
    verdict "$([ -z "$killed" ] && echo 1)" "grade.stage$n.starters_fail_cleanly" \
        "${killed:-no test crashed by a signal or timed out}"
    # 3. the mutants
    for m in tests/mutants/stage"$n"/*.patch; do
        [ -f "$m" ] || continue
        check_mutant "$n" "$m"
    done
}

# Stages to check: the arguments (1 2 ...), or every stage with exercises.
stages=("$@")
if [ ${#stages[@]} -eq 0 ]; then
    for parts in [0-9][0-9]_*/exercises/parts.txt; do [ -f "$parts" ] && stages+=("${parts%%_*}"); done
fi
# Every part has its tiered hints (make hint-N PART=x; the starters state only the contract).
while read -r line; do
    case "$line" in PASS\ *) passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
    echo "$line"
done < <(bash scripts/hint.sh --check "${stages[@]}" 2>&1)
# build-ex/: the reference's objects, so that a stage's starters compile alone.
rm -rf build-ex && cp -a build build-ex
for st in "${stages[@]}"; do check_stage "$(printf '%02d' "$((10#$st))")"; done
rm -rf build-mut
# build/'s programs linked with every stage again, as `make` leaves them.
make --no-print-directory -s -j"$JOBS" BUILD=build all >/dev/null 2>&1 || echo "grade_check: make all failed"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
