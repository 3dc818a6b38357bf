#!/usr/bin/env bash
# tests/run.sh — runs the test programs and counts their PASS/FAIL lines.
#
#   BUILD=build bash tests/run.sh        the whole suite
#   BUILD=build bash tests/run.sh gpu    only the CUDA-vs-CPU tests
#
# Each test prints one line per check: "PASS name ..." or "FAIL name ...".
# A program that crashes or times out without printing a FAIL counts as one
# failure. Exit status 77 means "skipped" (e.g. no GPU), counted separately.
# The last line is "N passed, N failed[, N skipped]"; exit status is non-zero
# on any failure.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
PY=/usr/bin/python3                      # Debian's interpreter carries python3-torch
TIMEOUT=${TEST_TIMEOUT:-300}
passed=0 failed=0 skipped=0
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

run() {  # run NAME COMMAND...
    local name=$1; shift
    local out="$log/$name.out" rc
    timeout -k 5 "$TIMEOUT" "$@" >"$out" 2>&1
    rc=$?
    local p f
    p=$(grep -c '^PASS ' "$out")
    f=$(grep -c '^FAIL ' "$out")
    grep -E '^(PASS|FAIL|SKIP) ' "$out" | sed "s/^/  [$name] /"
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

if [ "${1:-}" = gpu ]; then
    run gpu "$BUILD/tests/test_gpu"
else
    for t in dtype rng ledger flags safetensors ops model; do
        run "$t" "$BUILD/tests/test_$t"
    done
    run cli bash tests/test_cli.sh "$BUILD"
    if "$PY" -c 'import torch' 2>/dev/null; then
        run torch bash tests/test_torch.sh "$BUILD"
    else
        echo "  [torch] FAIL: $PY cannot import torch (run scripts/install-deps.sh)"
        failed=$((failed + 1))
    fi
    run gpu "$BUILD/tests/test_gpu"
fi

line="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && line="$line, $skipped skipped"
echo "$line"
[ "$failed" -eq 0 ]
