#!/usr/bin/env bash
# test_cli.sh — the training driver end to end: bad input is rejected with a
# message naming what is wrong (before any work), the simulated device runs out
# of memory at step zero, and a run is reproducible from its seed.
set -u
BUILD=${1:-build}
TRAIN="$BUILD/train"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# expect_fail NAME EXIT_CODE PATTERN ARGS... : the run must exit with EXIT_CODE
# and print PATTERN (a fixed string) on stderr.
expect_fail() {
    local name=$1 want=$2 pattern=$3; shift 3
    "$TRAIN" "$@" >"$dir/out" 2>"$dir/err"
    local rc=$?
    if [ "$rc" -eq "$want" ] && grep -qF -- "$pattern" "$dir/err"; then
        echo "PASS cli.rejects.$name  exit $rc: $(head -c 160 "$dir/err" | head -n1)"
    else
        echo "FAIL cli.rejects.$name  exit $rc (want $want), stderr: $(head -c 300 "$dir/err")"
    fi
}

expect_fail heads_not_dividing_width 2 "--heads 5 does not divide --width 64" --preset tiny --heads 5
expect_fail zero_layers      2 "--layers"        --preset tiny --layers 0
expect_fail zero_width       2 "--width"         --preset tiny --width 0
expect_fail zero_batch       2 "--batch"         --preset tiny --batch 0
expect_fail negative_steps   2 "--steps"         --preset tiny --steps -3
expect_fail seq_not_number   2 "--seq"           --preset tiny --seq 12abc
expect_fail unknown_preset   2 "--preset"        --preset gpt5
expect_fail unknown_device   2 "--device"        --preset tiny --device tpu
expect_fail unknown_flag     2 "--lyers"         --preset tiny --lyers 3
expect_fail missing_value    2 "--batch"         --preset tiny --batch
expect_fail bad_device_mem   2 "--device-mem"    --preset tiny --device-mem 80XB
expect_fail missing_data     2 "/nonexistent/corpus.txt" --preset tiny --data /nonexistent/corpus.txt
expect_fail data_is_folder   2 "--data tests: not a readable file" --preset tiny --data tests
expect_fail save_params_dir  2 "the folder /nonexistent does not exist" --preset tiny --save-params /nonexistent/p.safetensors
expect_fail bad_inject       2 "--inject bogus" --preset tiny --inject bogus
expect_fail text_small_vocab 2 "--vocab"         --preset tiny --vocab 100 --data tests/test_cli.sh
expect_fail lr_out_of_range  2 "--lr"            --preset tiny --lr -1
# The OOM at step zero: 1 MB holds the tiny model's weights and gradients (0.47 MB
# each) but not its optimizer state; the error names the category and the bytes.
expect_fail oom_at_step_zero 1 "for optimizer" --preset tiny --device-mem 1MB --steps 1
if grep -q "step " "$dir/out"; then echo "FAIL cli.oom_before_first_step  a step ran"; \
else echo "PASS cli.oom_before_first_step  no step printed before the failure"; fi

"$TRAIN" --help >"$dir/help" 2>&1 && grep -q -- "--device-mem" "$dir/help" \
    && echo "PASS cli.help  lists the flags" || echo "FAIL cli.help"

# Same seed, same numbers: two runs print identical losses.
run() { "$TRAIN" --preset tiny --steps 4 --batch 2 --seed "$1" 2>&1 | grep -o 'loss [0-9.]*'; }
a=$(run 3); b=$(run 3); c=$(run 4)
[ -n "$a" ] && [ "$a" = "$b" ] && echo "PASS cli.same_seed_same_losses  $(echo $a | tr '\n' ' ')" \
    || echo "FAIL cli.same_seed_same_losses  '$a' vs '$b'"
[ "$a" != "$c" ] && echo "PASS cli.other_seed_other_losses" || echo "FAIL cli.other_seed_other_losses"

# Byte-level training on a text file the user names.
if "$TRAIN" --preset tiny --steps 3 --data README.md >"$dir/text" 2>&1 && grep -q "RESULT train" "$dir/text"; then
    echo "PASS cli.trains_on_text_file  $(grep -o 'data: [^|]*' "$dir/text")"
else
    echo "FAIL cli.trains_on_text_file  $(tail -n 3 "$dir/text")"
fi
exit 0
