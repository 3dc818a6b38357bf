#!/usr/bin/env bash
# tests/run.sh — runs the test programs and counts their PASS/FAIL lines.
#
#   BUILD=build bash tests/run.sh              every suite
#   BUILD=build bash tests/run.sh core gpu     some suites: core, gpu, stage01, stage02, ...
#
# Each test prints one line per check: "PASS name ..." or "FAIL name ...".
# A program that crashes or times out without printing a FAIL counts as one
# failure, and any crash or timeout is reported as "CRASH" (the graders look for
# it). Exit status 77 means "skipped" (e.g. no GPU), counted separately.
# The last line is "N passed, N failed[, N skipped]"; exit status is non-zero
# on any failure. A stage's suite is the file tests/stageNN.sh, sourced here.
set -u
BUILD=${BUILD:-build}
export BUILD
cd "$(dirname "$0")/.."
PY=/usr/bin/python3                      # Debian's interpreter carries python3-torch
TIMEOUT=${TEST_TIMEOUT:-300}
passed=0 failed=0 skipped=0
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

run() {  # run NAME COMMAND...
    local name=$1; shift
    local out="$log/$name.out" rc
    # A shell function (from a stage's suite) runs in a child bash, under the timeout.
    if declare -F "$1" >/dev/null; then export -f "$1"; set -- bash -c '"$@"' _ "$@"; fi
    timeout -k 5 "$TIMEOUT" "$@" >"$out" 2>&1
    rc=$?
    local p f
    p=$(grep -c '^PASS ' "$out")
    f=$(grep -c '^FAIL ' "$out")
    grep -E '^(PASS|FAIL|SKIP) ' "$out" | sed "s/^/  [$name] /"
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
        grep -v -E '^(PASS|SKIP) ' "$out" | grep -v '^#' | tail -n 20 | sed 's/^/      /'
    fi
    passed=$((passed + p))
    failed=$((failed + f))
}

core() {
    for t in dtype rng ledger flags safetensors ops model; do
        run "$t" "$BUILD/tests/test_$t"
    done
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
    run gpu "$BUILD/tests/test_gpu"
    for n in 1 2 3 4; do run "gpu-comm-np$n" "$BUILD/tests/test_gpu_comm" --np "$n" --timeout 60; done
}

suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then
    suites=(core)
    for f in tests/stage[0-9][0-9].sh; do [ -f "$f" ] && suites+=("$(basename "$f" .sh)"); done
    suites+=(gpu)
fi
for s in "${suites[@]}"; do
    case "$s" in
        core) core ;;
        gpu) gpu ;;
        stage[0-9][0-9]) if [ -f "tests/$s.sh" ]; then source "tests/$s.sh"; else
                             echo "  [$s] FAIL: no tests/$s.sh"; failed=$((failed + 1)); fi ;;
        *) echo "run.sh: unknown suite $s"; exit 2 ;;
    esac
done

line="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && line="$line, $skipped skipped"
echo "$line"
[ "$failed" -eq 0 ]
