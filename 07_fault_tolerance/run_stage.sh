#!/usr/bin/env bash
# run_stage.sh — stage 07's benchmark and plots (`make stage-7` runs the tests first,
# then this). Everything runs on this machine's CPU and disk. Outputs into
# $RESULTS/07_fault_tolerance/ (RESULTS=runs by default: yours, untracked; results/
# holds the course's own run: `make stage-7 RESULTS=results`).
#
#   1. Checkpoint cost against model size (ckpt_cost.txt, ckpt_cost.dat): the state's
#      bytes, the snapshot (copy to host memory), the write (a shard, fsync'd), the
#      training's stall per checkpoint, synchronous and --ckpt-async, and the load;
#      sync against async at the small preset, an interval longer than the write
#      (ckpt_async_small.txt).
#   2. Recovery time (recovery.txt): a rank of 2 killed (and, separately, hung) under
#      the supervisor, from the fault to the first new step, split into detection,
#      cleanup, restart (processes, model), load and the first step: COURSE_EVENTS=1
#      timestamps from the fault, the launcher and the trainer.
#   3. The checkpoint interval (ckpt_interval.dat, ckpt_table.dat, interval.txt):
#      Young/Daly and simulated goodput for this machine's measured checkpoint cost
#      and recovery time at a 1-hour MTBF; and the cluster-scale table.
#   4. gnuplot (scripts/plot.sh): every figure labelled with the machine and the date.
#
# Timings on a shared VM are noisy: each size is saved 3 times in a run and the table
# gives medians. QUICK=1 is a smoke run.
set -eu
cd "$(dirname "$0")/.."
. scripts/stage_lib.sh
stage_begin 07_fault_tolerance '*.txt' '*.dat' '*.png' '*.log'

widths="128 256 512 768 1024" recovery_steps=12
if quick; then widths="128 256"; recovery_steps=6; fi

# ---------------------------------------------------------------- 1. checkpoint cost
{
    echo "# checkpoint cost against model size: 4 layers of width C, T=64, V=256, one process;"
    echo "# a checkpoint every 3 steps of 9 (medians of 3; async: of the first 2, the last"
    echo "# save waits for its write). stall = what training waited;"
    echo "# state = weights + AdamW's two moments (12 bytes per parameter, fp32)"
    printf '# %5s %10s %9s %11s %9s %10s %11s %9s\n' C params state_MB snapshot_ms write_ms stall_sync stall_async load_ms
} >"$out/ckpt_cost.dat"
for C in $widths; do
    m=(--layers 4 --width "$C" --heads 8 --seq 64 --vocab 256 --batch 2 --steps 9 --warmup 0
       --log-every 100 --peak-tflops 1 --ckpt-every 3 --ckpt-keep 1)
    rm -rf "$tmp/ck"
    run "$tmp/sync_$C.log" train "${m[@]}" --ckpt-dir "$tmp/ck"
    rm -rf "$tmp/ck"
    run "$tmp/async_$C.log" train "${m[@]}" --ckpt-dir "$tmp/ck" --ckpt-async
    run "$tmp/load_$C.log" train "${m[@]}" --ckpt-dir "$tmp/ck" --resume
    params=$(sed -n 's/.*| \([0-9]*\) params .*/\1/p' "$tmp/sync_$C.log" | head -n 1)
    state=$(sed -n 's/.*: \([0-9.]*\) MB from rank 0.*/\1/p' "$tmp/sync_$C.log" | head -n 1)
    snap=$(sed -n 's/.*snapshot \([0-9.]*\) ms.*/\1/p' "$tmp/sync_$C.log" | med)
    write=$(sed -n 's/.*write \([0-9.]*\) ms.*/\1/p' "$tmp/sync_$C.log" | med)
    ssync=$(sed -n 's/.*training stalled \([0-9.]*\) ms.*/\1/p' "$tmp/sync_$C.log" | med)
    # The async stalls of the saves training goes on after (the last one waits for
    # its write: nothing is left to overlap it with).
    grep 'checkpoint step' "$tmp/async_$C.log" | head -n 2 >"$tmp/async_mid_$C.log"
    sasync=$(sed -n 's/.*training stalled \([0-9.]*\) ms.*/\1/p' "$tmp/async_mid_$C.log" | med)
    load=$(sed -n 's/.*checkpoint loaded in \([0-9.]*\) ms.*/\1/p' "$tmp/load_$C.log" | head -n 1)
    printf '  %5d %10d %9.2f %11s %9s %10s %11s %9s\n' "$C" "$params" "$state" "$snap" "$write" \
        "$ssync" "$sasync" "$load" >>"$out/ckpt_cost.dat"
    cp "$tmp/sync_$C.log" "$out/ckpt_sync_C$C.log"
    cp "$tmp/async_$C.log" "$out/ckpt_async_C$C.log"
done
{
    echo "# Checkpoint cost on this machine's disk ($(df -h "$tmp" | awk 'NR == 2 {print $1}'))"
    cat "$out/ckpt_cost.dat"
} >"$out/ckpt_cost.txt"

# Synchronous against asynchronous saves where the interval is longer than the write:
# the small preset (39 MB of state), a checkpoint every 4 steps of 16. Every save's
# stall, in order (the last async save waits for its write: nothing is left to overlap).
m=(--preset small --batch 4 --steps 16 --warmup 0 --log-every 100 --peak-tflops 1 --ckpt-every 4
   --ckpt-keep 1)
for mode in sync async; do
    rm -rf "$tmp/ck"
    run "$out/ckpt_small_$mode.log" train "${m[@]}" --ckpt-dir "$tmp/ck" \
        $([ "$mode" = async ] && echo --ckpt-async)
done
{
    echo "# small preset, batch 4, a checkpoint every 4 steps of 16: what training waited per save (ms)"
    echo "# (ckpt_small_sync.log, ckpt_small_async.log; the last async save waits for its write)"
    for mode in sync async; do
        printf '%-6s %s  (median step %s ms)\n' "$mode" \
            "$(sed -n 's/.*training stalled \([0-9.]*\) ms.*/\1/p' "$out/ckpt_small_$mode.log" | tr '\n' ' ')" \
            "$(sed -n 's/.*median \([0-9.]*\) ms\/step.*/\1/p' "$out/ckpt_small_$mode.log" | head -n 1)"
    done
} >"$out/ckpt_async_small.txt"

# ---------------------------------------------------------------- 2. recovery time
# ev LOG NAME: the time of the first event NAME in LOG (or of the last, with "last")
ev() { grep -h "^EVENT $2 " "$1" | sed 's/.*t=//' | { if [ "${3:-}" = last ]; then tail -n 1; else head -n 1; fi; }; }
recovery() {  # recovery NAME FAULT TIMEOUT
    local name=$1 log="$out/recovery_$1.log"
    rm -rf "$tmp/rck"
    COURSE_EVENTS=1 run "$log" ddp_train --np 2 --preset small --batch 4 --steps "$recovery_steps" \
        --warmup 0 --log-every 100 --peak-tflops 1 --ckpt-dir "$tmp/rck" --ckpt-every 4 \
        --max-restarts 1 --inject "$2" --timeout "$3"
    local k d r ls ld f
    k=$(ev "$log" "$( [ "$name" = hang ] && echo hung || echo killed)")
    d=$(ev "$log" detected) r=$(ev "$log" restart) ls=$(ev "$log" load_start) ld=$(ev "$log" loaded)
    f=$(ev "$log" first_step last)
    awk -v n="$name" -v k="$k" -v d="$d" -v r="$r" -v ls="$ls" -v ld="$ld" -v f="$f" 'BEGIN {
        printf "  %-6s %10.1f %9.1f %9.1f %8.1f %11.1f %9.1f\n", n, 1e3 * (d - k), 1e3 * (r - d),
               1e3 * (ls - r), 1e3 * (ld - ls), 1e3 * (f - ld), 1e3 * (f - k) }'
}
{
    echo "# Recovery under the supervisor: ddp_train --np 2, small preset, a checkpoint every 4"
    echo "# steps; a rank killed (hung) as step 6 begins; milliseconds from the fault:"
    echo "#   detect  the launcher sees a rank fail (a kill: at once; a hang: the peer's"
    echo "#           --timeout 2 s expires, it exits with the diagnostic)"
    echo "#   cleanup the other ranks are gone (a hung one is killed after timeout + 2 s)"
    echo "#   restart new processes, the model built, up to the load"
    echo "#   load    the checkpoint verified and read;  step: the first new step"
    printf '# %-6s %10s %9s %9s %8s %11s %9s\n' fault detect_ms cleanup restart load first_step total
    recovery kill "kill,step=6,rank=1" 2
    recovery hang "hang,step=6,rank=1" 2
} >"$out/recovery.txt"

# ---------------------------------------------------------------- 3. the interval
# This machine's cost of a checkpoint of the largest model (its sync stall) and of a
# recovery (the kill's total), at an MTBF of one hour.
cost=$(awk '!/^#/ {c = $6} END {printf "%.3f", c / 1e3}' "$out/ckpt_cost.dat")
restart=$(awk '$1 == "kill" {printf "%.3f", $7 / 1e3}' "$out/recovery.txt")
run "$out/ckpt_interval.dat" ckpt_interval --ckpt-cost "$cost" --mtbf 3600 --restart "$restart"
run "$out/ckpt_table.dat" ckpt_interval --table --ckpt-cost "$cost"
{
    echo "# The interval for this machine: C = ${cost} s (the largest model's synchronous"
    echo "# checkpoint), R = ${restart} s (a killed rank's recovery), MTBF 3600 s"
    grep -E '^# (Young|the model|best)|^RESULT' "$out/ckpt_interval.dat"
} >"$out/interval.txt"

stage_end "make stage-7" "widths $widths, $recovery_steps recovery steps"
echo "stage 07: $out/ckpt_cost.txt, recovery.txt, interval.txt and the figures"
cat "$out/ckpt_cost.txt" "$out/ckpt_async_small.txt" "$out/recovery.txt" "$out/interval.txt"
