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
# and print PATTERN (a fixed string) on stderr. PROG=... runs another program.
expect_fail() {
    local name=$1 want=$2 pattern=$3; shift 3
    "${PROG:-$TRAIN}" "$@" >"$dir/out" 2>"$dir/err"
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
expect_fail missing_data     2 "$dir/missing/corpus.txt" --preset tiny --data "$dir/missing/corpus.txt"
expect_fail data_is_folder   2 "--data tests: not a readable file" --preset tiny --data tests
expect_fail save_params_dir  2 "the folder $dir/missing does not exist" --preset tiny --save-params "$dir/missing/p.safetensors"
expect_fail bad_inject       2 "--inject bogus" --preset tiny --inject bogus
expect_fail text_small_vocab 2 "--vocab"         --preset tiny --vocab 100 --data tests/test_cli.sh
expect_fail lr_out_of_range  2 "--lr"            --preset tiny --lr -1
# Output paths and checkpoint folders: refused before the run, not at its end.
expect_fail save_params_folder 2 "it exists and is not a regular file" --preset tiny --save-params tests
expect_fail save_params_empty 2 "--save-params: the file name is empty" --preset tiny --save-params ""
expect_fail ckpt_dir_is_a_file 2 "--ckpt-dir tests/test_cli.sh is not a folder" --preset tiny --ckpt-dir tests/test_cli.sh
"$TRAIN" --preset tiny --steps 2 --ckpt-dir "$dir/ck" >/dev/null 2>&1
expect_fail ckpt_dir_earlier_run 2 "already holds checkpoints (an earlier run's)" --preset tiny --ckpt-dir "$dir/ck"
expect_fail resume_one_checkpoint 2 "is one checkpoint (it holds manifest.json)" --preset tiny --resume --ckpt-dir "$dir/ck/step-00000002"
"$TRAIN" --preset tiny --steps 2 --ckpt-dir "$dir/ckd" --data README.md >/dev/null 2>&1
expect_fail resume_other_corpus 1 "was trained on --data README.md, $(stat -c %s README.md) bytes; this run reads test_cli.sh" --preset tiny --steps 3 --resume --ckpt-dir "$dir/ckd" --data tests/test_cli.sh
# Faults that could never strike as asked (the run would end as if none were).
expect_fail inject_ckpt_no_dir 2 "during=ckpt strikes a checkpoint: it needs --ckpt-dir" --preset tiny --inject kill,step=1,during=ckpt
expect_fail inject_no_save_there 2 "no checkpoint is saved at step 2 (--ckpt-every 3" --preset tiny --steps 6 --ckpt-dir "$dir/ck2" --ckpt-every 3 --inject kill,step=2,during=ckpt
expect_fail inject_attempt_never 2 "attempt 3 never comes" --preset tiny --inject kill,step=1,attempt=3
expect_fail inject_seed_word 2 "seed=abc is not a whole number" --preset tiny --inject kill,step=random,seed=abc
PROG=$BUILD/ddp_train expect_fail inject_rank_beyond 1 "rank=5 is not a number in [0, 1]" --np 2 --preset tiny --inject kill,step=1,rank=5
PROG=$BUILD/sharded_train expect_fail kill_rank_beyond 1 "--kill-rank 5: there are 2 ranks" --np 2 --preset tiny --kill-rank 5 --kill-at 1
PROG=$BUILD/sharded_train expect_fail kill_at_never 1 "--kill-at 100000 never came" --np 2 --preset tiny --steps 1 --kill-rank 1 --kill-at 100000
expect_fail ckpt_dir_empty 2 "--ckpt-dir: the folder name is empty" --preset tiny --ckpt-dir ""
expect_fail inject_random_no_save 2 "no checkpoint is saved at step 8, which step=random drew" --preset tiny --steps 10 --ckpt-dir "$dir/ck3" --ckpt-every 3 --inject corrupt,step=random
# ...but a kill that struck, and the restart that resumed past it, is a success.
if "$BUILD/sharded_train" --np 2 --preset tiny --steps 6 --ckpt-dir "$dir/ck4" --ckpt-every 2 --max-restarts 1 \
     --kill-rank 1 --kill-at 12 --timeout 5 >"$dir/restart.log" 2>&1 &&
   grep -q "the job finished after 1 restart" "$dir/restart.log"; then
    echo "PASS cli.kill_at_then_restart  killed at world collective 12, restarted, resumed, exit 0"
else
    echo "FAIL cli.kill_at_then_restart  $(grep -h -E 'error|supervisor' "$dir/restart.log" | tail -n 2 | tr '\n' ' ')"
fi
PROG=$BUILD/sharded_train expect_fail trace_unwritable 2 "--trace /proc/course-missing/t.json: the folder /proc/course-missing" --preset tiny --trace /proc/course-missing/t
PROG=$BUILD/bench_collectives expect_fail min_bytes_partial 2 "--min-bytes 6 is not a whole number of fp32 elements" --min-bytes 6
PROG=$BUILD/pp_sim expect_fail stage_time_nan 2 "--tf nan: one time in seconds" --tf nan
# A checkpoint that outlasts every failure: said in words, no NaN.
out=$("$BUILD/ckpt_interval" --ckpt-cost 1e9 --mtbf 0.001 2>&1)
if grep -q "no interval makes progress" <<<"$out" && ! grep -qi "nan" <<<"$out"; then
    echo "PASS cli.interval_no_progress  $(grep -m1 'no interval' <<<"$out" | cut -c1-120)"
else
    echo "FAIL cli.interval_no_progress  $(grep -m1 -i -E 'nan|best' <<<"$out" | cut -c1-200)"
fi
# The OOM at step zero: 1 MB holds the tiny model's weights and gradients (0.47 MB
# each) but not its optimizer state; the error names the category and the bytes.
expect_fail oom_at_step_zero 1 "for optimizer" --preset tiny --device-mem 1MB --steps 1
if grep -q "step " "$dir/out"; then echo "FAIL cli.oom_before_first_step  a step ran"; \
else echo "PASS cli.oom_before_first_step  no step printed before the failure"; fi
# Without --device-mem the CPU's limit is the machine's memory (here pretended to be
# 1 MB): a model larger fails at step zero instead of paging for hours.
COURSE_FAKE_HOST_MEM=1MB expect_fail oom_beyond_host_memory 1 "more than this machine's 1.00 MB of memory" --preset tiny --steps 1

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

# COURSE_OP_TIMING=1 (common/ops_timed.h): a table of where the time goes, op by op,
# with the same weights bit for bit. tiny: L = 2, so 4 GEMMs a layer and the head's
# make 9 matmul_forward calls a step; 2 attention_backward calls a step.
"$TRAIN" --preset tiny --steps 3 --save-params "$dir/plain.safetensors" >/dev/null 2>&1
COURSE_OP_TIMING=1 "$TRAIN" --preset tiny --steps 3 --save-params "$dir/timed.safetensors" \
    >"$dir/timed" 2>&1
mf=$(grep -o '^OPTIME op=matmul_forward calls=[0-9]*' "$dir/timed" | sed 's/.*=//')
ab=$(grep -o '^OPTIME op=attention_backward calls=[0-9]*' "$dir/timed" | sed 's/.*=//')
if [ "$mf" = 27 ] && [ "$ab" = 6 ] && grep -q 'op timing, rank 0' "$dir/timed" &&
   cmp -s "$dir/plain.safetensors" "$dir/timed.safetensors"; then
    echo "PASS cli.op_timing  3 steps: matmul_forward 27 calls, attention_backward 6; weights bitwise" \
         "those of the untimed run; $(grep -m1 -o '[0-9.]* s in [0-9]* calls of [0-9]* ops' "$dir/timed")"
else
    echo "FAIL cli.op_timing  matmul_forward ${mf:-no} calls (want 27), attention_backward ${ab:-no}" \
         "(want 6), weights $(cmp -s "$dir/plain.safetensors" "$dir/timed.safetensors" && echo bitwise ||
         echo differ); $(grep -m1 'op timing\|error' "$dir/timed")"
fi

# --attention flash (common/ops_cpu_flash.c): the same training to fp32 rounding, in
# less activation memory (tiny: 2 layers of 8 x 4 heads x 32 x 32 probabilities, 0.26
# MB, give way to 8 x 4 x 32 log-sum-exps each).
"$TRAIN" --preset tiny --steps 20 --save-params "$dir/mat.safetensors" >"$dir/mat" 2>&1
"$TRAIN" --preset tiny --steps 20 --attention flash --save-params "$dir/flash.safetensors" \
    >"$dir/flash" 2>&1
"$BUILD/tests/compare_params" "$dir/flash.safetensors" "$dir/mat.safetensors" 1e-5 \
    cli.flash_attention.weights_20_steps
acts() { awk '$1 == "activations" && NF == 5 {print $4 $5}' "$1" | tail -n 1; }
if grep -q '| flash attention' "$dir/flash" && [ "$(acts "$dir/flash")" = 2.51MB ] &&
   [ "$(acts "$dir/mat")" = 2.77MB ]; then
    echo "PASS cli.flash_attention.memory  peak activations $(acts "$dir/flash") with flash, $(acts "$dir/mat") without"
else
    echo "FAIL cli.flash_attention.memory  peak activations $(acts "$dir/flash") with flash (want 2.51MB)," \
         "$(acts "$dir/mat") without (want 2.77MB); $(grep -m1 'error' "$dir/flash")"
fi

# A launcher killed alone (kill PID, not the terminal's Ctrl-C, which signals the whole
# process group) takes its ranks with it: none trains on, orphaned.
# The ranks: processes whose command line holds the run's marker (from /proc, not
# pgrep: procps is not on every machine; the [3] keeps grep from finding itself).
marked() { grep -l -a -- '--seed.91827[3]' /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3 | tr '\n' ' '; }
"$BUILD/ddp_train" --np 2 --preset tiny --steps 100000 --seed 918273 >/dev/null 2>&1 &
launcher=$!
disown "$launcher"  # (its death is this test's doing: no "Killed" line from the shell)
for _ in $(seq 50); do [ "$(marked | wc -w)" -ge 3 ] && break; sleep 0.1; done
seen=$(marked | wc -w)  # the launcher and its 2 ranks, or the test proves nothing
kill -KILL "$launcher"
for _ in $(seq 50); do [ -z "$(marked)" ] && break; sleep 0.1; done
left=$(marked)
if [ "$seen" -lt 3 ]; then
    echo "FAIL cli.ranks_die_with_launcher  only $seen of the launcher and its 2 ranks started within 5 s"
    [ -n "$left" ] && kill -KILL $left 2>/dev/null
elif [ -n "$left" ]; then
    echo "FAIL cli.ranks_die_with_launcher  ranks still running 5 s after the launcher was killed: pids $left"
    kill -KILL $left 2>/dev/null
else
    echo "PASS cli.ranks_die_with_launcher  the launcher killed (SIGKILL), both ranks gone"
fi
exit 0
