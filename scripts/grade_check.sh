#!/usr/bin/env bash
# grade_check.sh — proves every stage's grader: graded through the same path, the
# reference (build/) scores full marks and the pristine exercises (build-ex/)
# score 0, failing cleanly: no crash, no hang (the runner's timeout would show).
set -u
cd "$(dirname "$0")/.."
status=0 passed=0 failed=0
for parts in [0-9][0-9]_*/exercises/parts.txt; do
    [ -f "$parts" ] || continue
    n=${parts%%_*}
    ref=$(BUILD=build bash scripts/grade.sh "$n" | tail -n1)
    ex_out=$(BUILD=build-ex bash scripts/grade.sh "$n")
    ex=$(echo "$ex_out" | tail -n1)
    full=$(echo "$ref" | sed -n 's/score: \([0-9]*\)\/\([0-9]*\)/\2/p')
    if [ "$ref" = "score: $full/$full" ] && [ -n "$full" ]; then
        echo "PASS grade.stage$n.reference_full_marks  $ref"; passed=$((passed + 1))
    else
        echo "FAIL grade.stage$n.reference_full_marks  $ref"; failed=$((failed + 1)); status=1
    fi
    if [ "$ex" = "score: 0/$full" ]; then
        echo "PASS grade.stage$n.starters_score_zero  $ex"; passed=$((passed + 1))
    else
        echo "FAIL grade.stage$n.starters_score_zero  $ex"; failed=$((failed + 1)); status=1
    fi
    # "Cleanly": no check may have died of a signal or a timeout in the starter build.
    if BUILD=build-ex bash tests/run.sh "stage$n" 2>&1 | grep -q '\] CRASH'; then
        echo "FAIL grade.stage$n.starters_fail_cleanly  a test crashed or hung"; failed=$((failed + 1)); status=1
    else
        echo "PASS grade.stage$n.starters_fail_cleanly"; passed=$((passed + 1))
    fi
done
echo "$passed passed, $failed failed"
exit $status
