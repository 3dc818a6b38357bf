#!/usr/bin/env bash
# tests/run.sh — runs the test programs and counts their PASS/FAIL lines.
#
#   BUILD=build bash tests/run.sh              every suite
#   BUILD=build bash tests/run.sh core gpu     some suites: core, gpu, stage01, stage02, ...
#   BUILD=build-ex ONLY=ddp-np3 bash tests/run.sh stage02    one test of a suite, by name
#
# Each test prints one line per check: "PASS name ..." or "FAIL name ...", and
# may announce the checks it is about to run ("PLAN name"): a check announced that
# never reports PASS, FAIL or SKIP counts as one failure.
# A program that crashes or times out without printing a FAIL counts as one
# failure, and any crash or timeout is reported as "CRASH" (the graders look for
# it). Exit status 77 means "skipped" (e.g. no GPU), counted separately. A test
# that fails also prints the command that reruns it alone ("rerun alone: ...").
# The last line is "N passed, N failed[, N skipped]"; exit status is non-zero
# on any failure. A stage's suite is the file tests/stageNN.sh, sourced here.
# SHOW_PLAN=1 passes the PLAN lines through (scripts/grade.sh reads them).
set -u
BUILD=${BUILD:-build}
export BUILD
cd "$(dirname "$0")/.."
# The Python the tests use must import torch and numpy (Debian's python3-torch, from
# scripts/install-deps.sh). PY=... chooses one; otherwise .venv/ (install-deps.sh's:
# Debian's, plus the safetensors package), /usr/bin/python3, or the first python3 on
# the PATH that has both (a GPU image keeps torch in its own venv).
if [ -z "${PY:-}" ]; then
    PY=/usr/bin/python3
    for c in "$PWD/.venv/bin/python3" /usr/bin/python3 $(type -ap python3); do
        "$c" -c 'import torch, numpy' 2>/dev/null && { PY=$c; break; }
    done
fi
export PY
TIMEOUT=${TEST_TIMEOUT:-300}
passed=0 failed=0 skipped=0 ran=0 suite=
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# The command that reruns test NAME alone, from the repository root.
rerun_command() {  # rerun_command NAME COMMAND...
    local name=$1; shift
    case "$1" in
        "$BUILD"/*) printf '%q ' "$@" | sed 's/ $//' ;;           # a program: run it yourself
        *) echo "BUILD=$BUILD ONLY=$name bash tests/run.sh $suite" ;;  # a function, a wrapper
    esac
}

# STOP_WHEN_CAUGHT=FILE (scripts/grade_check.sh, proving that a mutant is caught):
# FILE lists "PART CHECK" lines; once every PART has a CHECK that failed, the tests
# left are not run (their checks never report, which grading counts as failed).
caught_parts=" "
# (A check fails by a FAIL line, or by being announced (PLAN) and never reported: the
# test crashed or hung first, which grading counts as failed too.)
all_caught() {  # all_caught OUT: 0 once every part in $STOP_WHEN_CAUGHT has failed a check
    local part check
    while read -r part check; do
        [[ "$caught_parts" == *" $part "* ]] && continue
        awk -v c="$check" '$2 == c && $1 == "FAIL" {f = 1}
                           $2 == c && $1 == "PLAN" {planned = 1}
                           $2 == c && ($1 == "PASS" || $1 == "SKIP") {said = 1}
                           END {exit !(f || (planned && !said))}' "$1" && caught_parts+="$part "
    done <"$STOP_WHEN_CAUGHT"
    local want; want=$(cut -d' ' -f1 "$STOP_WHEN_CAUGHT" | sort -u)
    for part in $want; do [[ "$caught_parts" == *" $part "* ]] || return 1; done
    return 0
}

# With TEST_PARTS (a file of "TEST PART" lines: the parts each test reports checks of),
# a test is not run once every part it reports has failed a check (all_caught keeps
# the list): it could not change a score already short of full. The tests of a part
# that must be seen to keep its marks still run (scripts/grade_check.sh: the other
# parts of a mutant's file).
parts_caught() {  # parts_caught TEST: 0 when every part TEST reports has been caught
    [ -n "${TEST_PARTS:-}" ] || return 1
    local parts p
    parts=$(awk -v t="$1" '$1 == t {print $2}' "$TEST_PARTS")
    [ -n "$parts" ] || return 1
    for p in $parts; do [[ "$caught_parts" == *" $p "* ]] || return 1; done
    return 0
}

# A bad input refused as the course promises: COMMAND exits 2 with a message holding
# PATTERN (a fixed string), before any rank starts. Prints CHECK's PASS or FAIL line.
refused() {  # refused CHECK PATTERN COMMAND...
    local check=$1 pat=$2 out rc; shift 2
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" -eq 2 ] && grep -qF -- "$pat" <<<"$out" && ! grep -q '^\[rank' <<<"$out"; then
        echo "PASS $check  $(grep -m1 error <<<"$out" | cut -c1-200)"
    else
        echo "FAIL $check  want exit 2 and '$pat'; got exit $rc: $(head -c 300 <<<"$out")"
    fi
}
export -f refused

run() {  # run NAME COMMAND...
    local name=$1; shift
    if [ -n "${ONLY:-}" ] && ! [[ " ${ONLY//,/ } " == *" $name "* ]]; then return 0; fi
    [ -n "${caught:-}" ] && return 0
    parts_caught "$name" && return 0
    ran=$((ran + 1))
    local out="$log/$name.out" rc rerun
    rerun=$(rerun_command "$name" "$@")
    # A shell function (from a stage's suite) runs in a child bash, under the timeout.
    if declare -F "$1" >/dev/null; then export -f "$1"; set -- bash -c '"$@"' _ "$@"; fi
    local t0; t0=$(date +%s.%N)
    timeout -k 5 "$TIMEOUT" "$@" >"$out" 2>&1
    rc=$?
    echo "$name $(date +%s.%N) $t0" | awk '{printf "%s %.1f\n", $1, $2 - $3}' >>"$log/times"
    local p f silent
    p=$(grep -c '^PASS ' "$out")
    f=$(grep -c '^FAIL ' "$out")
    # Checks announced (PLAN) that never said PASS, FAIL or SKIP: each one has failed
    # (a wrapper that lost its program's exit status must not pass by saying nothing).
    # (a name may end in a colon: "SKIP name: why")
    silent=$(awk '{sub(/:$/, "", $2)}
                  $1 == "PLAN" {plan[$2] = 1; order[++n] = $2}
                  $1 == "PASS" || $1 == "FAIL" || $1 == "SKIP" {said[$2] = 1}
                  END {for (i = 1; i <= n; i++) if (!said[order[i]] && !seen[order[i]]++) print order[i]}' "$out")
    [ "$rc" -eq 77 ] && silent=
    # What the runner says of the test goes to stdout, and with SUITE_LOG_DIR into the
    # suite's log too (a brace group: the counters below stay in this shell).
    {
    grep -E "^(PASS|FAIL|SKIP$( [ "${SHOW_PLAN:-0}" = 1 ] && echo '|PLAN')) " "$out" | sed "s/^/  [$name] /"
    if [ "$rc" -eq 124 ] || [ "$rc" -gt 128 ]; then
        echo "  [$name] CRASH: status $rc ($( [ "$rc" -eq 124 ] && echo "timed out after ${TIMEOUT}s" || echo "signal $((rc - 128))"))"
    fi
    if [ "$rc" -eq 77 ]; then
        skipped=$((skipped + 1))
        echo "  [$name] skipped: $(grep -m1 '^SKIP' "$out" || echo 'exit 77')"
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "  [$name] FAIL: exited with status $rc without reporting a failing check; last lines:"
        tail -n 15 "$out" | sed 's/^/      /'
    elif [ "$f" -gt 0 ]; then
        grep -v -E '^(PASS|SKIP|PLAN) ' "$out" | grep -v '^#' | tail -n 20 | sed 's/^/      /'
    fi
    if [ -n "$silent" ]; then
        local n_silent; n_silent=$(wc -l <<<"$silent")
        f=$((f + n_silent))
        sed "s/^/  [$name] FAIL: never reported (announced, then no PASS or FAIL): /" <<<"$silent"
        [ "$rc" -eq 0 ] && [ "$n_silent" -gt 0 ] && { echo "      last lines:"; tail -n 8 "$out" | sed 's/^/      /'; }
    fi
    [ "$f" -gt 0 ] && echo "  [$name] rerun alone: $rerun"
    if [ -n "${STOP_WHEN_CAUGHT:-}" ] && [ "$f" -gt 0 ] && all_caught "$out" &&
       [ -z "${TEST_PARTS:-}" ]; then
        caught=1
        echo "run.sh: every part in $STOP_WHEN_CAUGHT has a failed check: the tests left are not run"
    fi
    } >"$log/said"
    cat "$log/said"
    [ -n "${suite_log:-}" ] && cat "$log/said" >>"$suite_log"
    passed=$((passed + p))
    failed=$((failed + f))
    return 0
}

# The suites' runs under mpirun (tests/mpirun.sh): only where mpirun exists and this
# build has the MPI transport.
mpi_built() { command -v mpirun >/dev/null && [ -f "$BUILD/common/comm_mpi.o" ]; }

core() {
    for t in dtype rng ledger flags json safetensors ops flash model moe; do
        run "$t" "$BUILD/tests/test_$t"
    done
    run extensions "$BUILD/tests/test_extensions"
    run layering bash tests/test_layering.sh "$BUILD"
    run cli bash tests/test_cli.sh "$BUILD"
    run transports bash tests/test_transports.sh "$BUILD"
    if "$PY" -c 'import torch' 2>/dev/null; then
        run torch bash tests/test_torch.sh "$BUILD"
    else
        echo "  [torch] FAIL: $PY cannot import torch (run scripts/install-deps.sh)"
        failed=$((failed + 1))
    fi
}
gpu() {
    # `make sanitize` builds these tests with AddressSanitizer. ASan's shadow-gap
    # protection takes address space the CUDA driver reserves (CUDA would report
    # out of memory at its first call), and LeakSanitizer would report the CUDA
    # libraries' own start-up allocations (tests/lsan_cuda.supp). Binaries built
    # without ASan ignore both variables.
    local cuda_asan=(env "ASAN_OPTIONS=protect_shadow_gap=0:fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
                     "LSAN_OPTIONS=suppressions=$PWD/tests/lsan_cuda.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}")
    # The probe itself: a broken GPU fails the suite, "no GPU" skips it. Its machine
    # check starts CUDA too, so it takes the same options.
    run gpu-probe "${cuda_asan[@]}" bash tests/test_gpu_probe.sh "$BUILD"
    run gpu "${cuda_asan[@]}" "$BUILD/tests/test_gpu"
    for n in 1 2 3 4; do
        run "gpu-comm-np$n" "${cuda_asan[@]}" "$BUILD/tests/test_gpu_comm" --np "$n" --timeout 60
    done
}

suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then
    suites=(core)
    for f in tests/stage[0-9][0-9].sh; do [ -f "$f" ] && suites+=("$(basename "$f" .sh)"); done
    suites+=(gpu)
fi
# STAGE_MAKE (make test): the make that built $BUILD. Each stage's suite then runs on
# the programs as that stage's learner has them, the stages up to it linked and no
# later one (make UPTO=N relinks them: the objects are the same); the core's and the
# GPU's on every stage. A stage that needs a later stage to pass fails here.
relink() {  # relink UPTO ("" = every stage)
    [ -n "${STAGE_MAKE:-}" ] || return 0
    $STAGE_MAKE --no-print-directory -s ${1:+UPTO=$1} BUILD="$BUILD" all >"$log/relink" 2>&1 ||
        { echo "  [relink] FAIL: make UPTO=${1:-all} failed:"; tail -n 5 "$log/relink"; failed=$((failed + 1)); }
}
for suite in "${suites[@]}"; do
    s=$suite
    case "$s" in stage[0-9][0-9]) relink $((10#${s#stage})) ;; *) relink "" ;; esac
    # SUITE_LOG_DIR (make test): each suite's lines, as scripts/grade.sh reads them, in
    # DIR/SUITE.log, so that grade_check.sh need not run the reference suites again.
    suite_log=
    if [ -n "${SUITE_LOG_DIR:-}" ]; then
        mkdir -p "$SUITE_LOG_DIR"
        suite_log="$SUITE_LOG_DIR/$suite.log"
        : >"$suite_log"
    fi
    case "$s" in
        core) core ;;
        gpu) gpu ;;
        stage[0-9][0-9]) if [ -f "tests/$s.sh" ]; then source "tests/$s.sh"; else
                             echo "  [$s] FAIL: no tests/$s.sh"; failed=$((failed + 1)); fi ;;
        *) echo "run.sh: unknown suite $s"; exit 2 ;;
    esac
done

if [ -n "${ONLY:-}" ] && [ "$ran" -eq 0 ]; then
    echo "run.sh: ONLY=$ONLY names no test of suite(s) ${suites[*]}"
    failed=$((failed + 1))
fi
# Where the time went (CI's budget is the whole `make check`): the slowest tests.
if [ -s "$log/times" ] && [ "$ran" -gt 1 ]; then
    echo "slowest: $(sort -k2 -g -r "$log/times" | head -n 8 | awk '{printf "%s%s %ss", (NR > 1 ? ", " : ""), $1, $2}')" \
         "(of $(awk '{s += $2} END {printf "%.0f", s}' "$log/times") s in $ran tests)"
fi
line="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && line="$line, $skipped skipped"
echo "$line"
[ "$failed" -eq 0 ]
