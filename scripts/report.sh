#!/usr/bin/env bash
# report.sh — `make report`: every stage's headline numbers against its target, then
# every table in full and every figure, in $RESULTS/REPORT.md (runs/REPORT.md).
#
# Each stage comes from your own run where you made one (runs/NN_*/, "measured now")
# and otherwise from the course's committed run (results/NN_*/, "committed earlier"),
# and says which, with the date and the machine its run.info records. A run without
# run.info did not finish (the stage scripts write it last, before the plots), so the
# committed run stands in for it.
set -eu
cd "$(dirname "$0")/.."
. scripts/run_info.sh
now=${RESULTS%/}
committed=results
out=$now/REPORT.md
[ ! -e "$now" ] || [ -d "$now" ] || { echo "report: RESULTS=$now is a file: it must be a folder" >&2; exit 2; }
mkdir -p "$now"

# ---------------------------------------------------------------- helpers

# The folder a stage's numbers come from, and its label.
src_dir() {  # src_dir STAGE -> the folder, or nothing
    if [ -f "$now/$1/run.info" ]; then echo "$now/$1"
    elif [ -f "$committed/$1/run.info" ]; then echo "$committed/$1"; fi
}
is_now() { [ "$now" != "$committed" ] && case "$1" in "$now"/*) true ;; *) false ;; esac; }
label() {  # label DIR: "measured now" or "committed earlier", where, when, on what
    local when machine cmd load
    when=$(run_info "$1" date); machine=$(run_info "$1" machine); cmd=$(run_info "$1" command)
    load=$(run_info "$1" load); load=${load:+, load $load}
    if is_now "$1"; then
        echo "**measured now** (\`$1/\`, \`$cmd\`, $when, $machine$load)"
    else
        echo "**committed earlier** (\`$1/\`: the course's own run, \`$cmd\`, $when, $machine$load)"
    fi
}
short() {  # short DIR: the label for the summary table
    local quick=""
    case "$(run_info "$1" command)" in *QUICK=1*) quick=" (QUICK=1)" ;; esac
    if is_now "$1"; then echo "measured now$quick, $(run_info "$1" date)"
    else echo "committed earlier$quick, $(run_info "$1" date)"; fi
}
plain() { sed 's/\*\*//g; s/`//g'; }  # a label for HTML (a <summary> shows ** and ` as they are)
rel() { realpath -m --relative-to="$(dirname "$out")" "$1"; }  # a link relative to the report
verdict() { if [ "$1" = 1 ]; then echo "met"; else echo "**MISSED**"; fi; }
fence() { echo '```'; cat "$1"; [ -z "$(tail -c 1 "$1")" ] || echo; echo '```'; }

stage_title() {
    case "$1" in
        00_core) echo "Core: training throughput against PyTorch and the sgemm ceiling" ;;
        *) if [ -f "$1/README.md" ]; then sed -n '1s/^# *//p' "$1/README.md"; else echo "$1"; fi ;;
    esac
}
stage_cmd() { case "$1" in 00_core) echo "make bench-core" ;; *) echo "make stage-$((10#${1%%_*}))" ;; esac; }

# What each table holds, and its units (the files' own headers are terse). describe
# NAME STAGE: a name two stages share is told apart by the stage.
describe() {
    case "$2/$1" in
        04_tensor_parallel/memory.txt) echo "Memory per rank against the tensor-parallel size t, without and with SP (small preset, batch 4): the ledger's activations, workspace, states (params + grads + optimizer) and total in bytes, each beside memcalc's prediction, and whether all are equal."; return ;;
        05_pipeline/memory.txt) echo "Peak activation memory per pipeline stage (bytes), p = 2 and 4, m = 8, every schedule: the ledger beside memcalc --pp p --schedule --stage s (GPipe and 1F1B; interleaved and zb-h1 measured only), the micro-batches in flight, the ratio to GPipe's on the same stage, and 1F1B's target (≤ p/m)."; return ;;
        06_mixed_precision/losses.txt) echo "Every recipe on the small preset, 300 steps (QUICK: 20) of batch 4 x 128 bytes of the course's Markdown, lr 1e-3: the final loss (mean of the last 20 steps), against fp32 (%), median ms per step, tokens/s and MFU against the measured sgemm peak (the mixed recipes pay for rounding every tensor they write: the CPU emulates bf16 in fp32 slots)."; return ;;
        06_mixed_precision/losses_lowlr.txt) echo "The same at lr 1e-4, where an AdamW update is below half a bf16 ulp of most weights: fp32, mixed-bf16, pure bf16 rounded to nearest and with stochastic rounding: final loss and against fp32 (%)."; return ;;
        06_mixed_precision/target.txt) echo "The target: mixed-bf16's final loss within 2 % of fp32's, met or MISSED."; return ;;
        06_mixed_precision/recompute.txt) echo "Activation recompute on the small preset, batch 8 x 128: peak activations from the ledger beside memcalc --recipe course --recompute (bytes), memory saved, median ms per step of the rounds (min, max) and the time added against none (%)."; return ;;
        06_mixed_precision/comm_error.txt) echo "An all-reduce of 2^20 bf16 gradients (std 1e-3) over p ranks: the relative error of the fp32 ring, of the bf16 ring (each addition rounded to bf16) and of the exact sum rounded once to bf16 (the best a bf16 result can be), their ratio, and the bytes rank 0 sent."; return ;;
        07_fault_tolerance/ckpt_cost.txt) echo "Checkpoints of one process on this machine's disk, 4 layers of width C (T 64, V 256), a checkpoint every 3 steps of 9: the state (weights + AdamW moments, MB), the snapshot to host memory, the shard's write (fsync'd), the training's stall per checkpoint synchronous and --ckpt-async, and the load (verified, read); milliseconds, medians."; return ;;
        07_fault_tolerance/recovery.txt) echo "A rank of 2 killed (hung) under the supervisor, small preset: milliseconds from the fault to the launcher noticing, to the other ranks gone, to the restarted job's load, to the load done, to the first new step, and the total."; return ;;
        07_fault_tolerance/interval.txt) echo "Young's and Daly's checkpoint intervals for this machine's measured checkpoint cost and recovery time at a 1-hour MTBF, and the best goodput the failure simulation finds."; return ;;
        05_pipeline/target.txt) echo "The targets: the measured bubble of every schedule at p = 2, m = 8 against its formula ((p−1)/m for GPipe and 1F1B; measured / formula in 0.9–1.1; the median of the rounds, each round's ratio), and 1F1B's peak activations per stage against GPipe's (≤ p/m), met or MISSED."; return ;;
    esac
    case "$1" in
        bench-core.txt) echo "Median tokens/s over 3 alternating rounds (ours, then PyTorch), GFLOP/s at 6N + 12LHQT FLOPs per token, and the share of OpenBLAS's sgemm rate on the model's own GEMM shapes." ;;
        measured.txt) echo "Per model and category: the calculator's prediction, the ledger's peak (human units and bytes), and the difference in %." ;;
        oom.txt) echo "The transcript of the OOM demonstration: the calculator on the real 70B, the calculator and the trainer on the 10⁻⁴ scale model." ;;
        allreduce_*_np*.txt) echo "nccl-tests columns: size (B), count (elements), type, redop, time per call (µs, median), algbw and busbw (GB/s), #wrong." ;;
        ring_vs_mpi.txt) echo "Every round of the alternating runs at ≥ 16 MiB, 2 ranks. Columns: algorithm, round, size (B), busbw (GB/s)." ;;
        ring_vs_mpi_summary.txt) echo "Median busbw (GB/s) of the rounds per size (B), and ring / MPI, the ratio of the medians." ;;
        alpha_beta.txt) echo "The alpha-beta model fitted to the ring's times: alpha in µs per message, beta in ns per byte (1/beta in GB/s)." ;;
        ddp_scaling.txt) echo "DDP on the small preset, batch 4 per rank: tokens/s of the whole job and ms per step (medians after 3 warm-up steps)." ;;
        ddp_demo.log) echo "The DDP demo's log: 4 ranks train the small GPT (loss, ms, tokens/s, MFU, memory per category)." ;;
        fit.log) echo "gnuplot's messages while fitting." ;;
        demo_zero2.log) echo "The stage-03 demo's log: ZeRO-2 on 4 ranks trains the small GPT (loss, ms, tokens/s, memory per category; every rank's MEM and BYTES lines)." ;;
        bucket_sweep.txt) echo "DDP on 2 ranks, bench model: ms per step against the gradient bucket size (MB = 10⁶ B), overlapped, beside --no-overlap (one all-reduce after backward); medians of the interleaved rounds, their min and max, tokens/s, the overlap % (communication time spent while computing), and the speed-up over no overlap." ;;
        bucket_sweep_runs.txt) echo "Every run of the bucket sweep: configuration, round, ms per step, tokens/s, overlap %, buckets per step." ;;
        strategies.txt) echo "Every strategy on 2 ranks, bench model: median ms per step (min, max of the rounds), tokens/s, overlap %, the ratio to overlapped DDP, the target, met or MISSED, and in how many rounds it was met." ;;
        strategies_runs.txt) echo "Every run of the strategy comparison: configuration, round, ms per step, tokens/s, overlap %, buckets per step." ;;
        timelines.txt) echo "One traced step per configuration, 2 ranks: ms per step, ms in collectives, of it hidden behind compute, overlap %. The traces, timelines/trace_*.json, open in https://ui.perfetto.dev." ;;
        memory.txt) echo "Memory per rank against N (small preset): the largest rank's params, grads and optimizer (bytes), their sum against the prediction (memcalc; FSDP: its padded formula), the difference in %, and the peak of the comm buffers." ;;
        bytes.txt) echo "Bytes each rank sent per step against N (small preset, ring): mean, min and max over the ranks, the formula 2Ψ(N−1)/N or (3Ψ − head)(N−1)/N in bytes, and measured / formula." ;;
        fsdp_units.txt) echo "FSDP on 2 ranks, bench model, --fsdp-unit-layers k: units, the peak of the comm buffers (gathered units + buckets) and of the sharded states (MB), median ms per step (min, max), overlap %." ;;
        fsdp_units_runs.txt) echo "Every run of the FSDP wrapping sweep: configuration, round, ms per step, tokens/s, overlap %, buckets per step." ;;
        demo_tp2_sp.log) echo "The stage-04 demo's log: TP = 2 with sequence parallelism on 2 ranks trains the small GPT (loss, ms, tokens/s, memory per category; every rank's MEM, BYTES and TPCOMM lines)." ;;
        tp_sweep.txt) echo "TP over t = 1, 2, 4 ranks, without and with SP, small preset: median ms per step and tokens/s of the interleaved rounds (min, max), the share of the step in TP collectives (%), the bytes each rank sent per step beside the ring formula, and the peak memory per rank (MB = 10⁶ B)." ;;
        tp_sweep_runs.txt) echo "Every run of the TP sweep: configuration, round, ms per step, tokens/s, TP comm share %, bytes sent per rank (mean, min, max), peak memory per rank (B)." ;;
        tp_bytes.txt) echo "Bytes each rank sent per step (mean, min, max over the ranks) beside the ring formula term by term: the activations' f and g, the vocabulary-parallel loss, SP's LayerNorm gradients, the gradient norm's one double; diff = mean − formula." ;;
        target.txt) echo "The target: TP = 2 on 2 ranks against TP = 1 on one, tokens/s; the ratio within each round, its median, min and max, met or MISSED on the median, and in how many rounds it was met (tp2-sp: for comparison)." ;;
        prediction_cpu.txt) echo "Step time on this CPU predicted by T(1)/min(t, cores) + the step's collectives in the alpha-beta model (stage 02's ring fit for np = t), beside the measured median: ms, and measured / predicted." ;;
        prediction_links.txt) echo "An illustration, not a measurement: one GPT-3-175B-sized layer split over t = 1..64 GPUs at an assumed 400 TFLOP/s, its 4 all-reduces over NVLink (450 GB/s, 2 µs) or InfiniBand NDR (50 GB/s, 5 µs): compute, communication and step ms, speed-up, efficiency, communication share." ;;
        demo_1f1b.log) echo "The stage-05 demo's log: 1F1B on 2 pipeline stages, 8 micro-batches of 2 sequences, trains the small GPT (loss, ms, tokens/s, memory per category; every rank's MEM line)." ;;
        bubble.txt) echo "The pipeline bubble, (step − busy) / busy of the busiest rank, against the micro-batches m at p = 2 for GPipe, 1F1B, interleaved (v = 2) and zb-h1, from the trace of each run's last step: median of the rounds (min, max), the formula, pp_sim on the trace's per-stage medians, the ratios, the per-stage times tF, tB, tW (ms) and where the idle time went (waits for messages, before the first and after the last compute, between actions); the mean rank's idle share, the stages' imbalance and pp_sim's idle." ;;
        bubble_runs.txt) echo "Every run of the bubble sweep: schedule, m, round, step (ms), bubble, idle in waits / at the edges / between actions (ms), tF, tB, tW (ms), pp_sim's bubble and the formula, the mean rank's idle share, the imbalance, pp_sim's idle." ;;
        sim_bubble.txt) echo "Simulated (build/pp_sim), not measured: the bubble at p = 4 and 8 against m for every schedule, the measured model cut into p equal stages, beside the formula; step (ms) and the per-stage times used." ;;
        gantt.txt) echo "The Gantt charts' data (gantt/*.dat): per schedule, measured at p = 2 and simulated at p = 2 and 4 (m = 8): step (ms) and bubble." ;;
        *.dat) echo "Plot data (columns as in its first lines)." ;;
        *) echo "" ;;
    esac
}

# ---------------------------------------------------------------- headline numbers

summary_core() {  # summary_core DIR
    local f=$1/bench-core.txt
    [ -f "$f" ] || { echo "| core | bench-core.txt missing | | | $(short "$1") |"; return; }
    local ours torch ratio ceil share
    ours=$(awk '$1 == "ours" {print $2}' "$f")
    torch=$(awk '$1 == "pytorch" {print $2}' "$f")
    ratio=$(awk '$1 == "ratio" {print $3}' "$f")
    ceil=$(sed -n 's/^sgemm ceiling.* \([0-9.]*\) GFLOP\/s;.*/\1/p' "$f")
    share=$(sed -n 's/.*ours reaches \([0-9.]*\)%.*/\1/p' "$f")
    echo "| core | tokens/s, ours vs PyTorch 1.13 (small preset, 1 thread) | $ours vs $torch = **${ratio}×** | ≥ 1.0× | $(verdict "$(awk -v r="$ratio" 'BEGIN {print (r >= 1.0)}')") | $(short "$1") |"
    echo "| core | share of the sgemm ceiling ($ceil GFLOP/s on the model's GEMM shapes) | **$share %** | ≥ 70 % | $(verdict "$(awk -v s="$share" 'BEGIN {print (s >= 70)}')") | $(short "$1") |"
}

summary_01() {
    local m=$1/measured.txt o=$1/oom.txt
    if [ -f "$m" ]; then
        # rows "  <category> <pred> <unit> <meas> <unit> <bytes> <diff%>" of every model
        read -r models rows bad < <(awk '
            /^[^ ].*: L=/ {models++}
            $1 ~ /^(params|grads|optimizer|activations|workspace)$/ && $NF ~ /%$/ {
                rows++; if ($NF != "+0.00%" && $NF != "-0.00%") bad++ }
            END {print models + 0, rows + 0, bad + 0}' "$m")
        echo "| 01 | measured ledger vs the calculator's prediction, per category | $((rows - bad)) of $rows equal ($models models × 5 categories) | equal in every category | $(verdict "$([ "$bad" -eq 0 ] && [ "$rows" -gt 0 ] && echo 1 || echo 0)") | $(short "$1") |"
    fi
    if [ -f "$o" ]; then
        local line
        line=$(awk '/^\$ build\/train .*--device-mem 64MB/ {getline; print; exit}' "$o")
        echo "| 01 | the 10⁻⁴-scale 70B on a 64 MB \"node\" | ${line:-no trainer output} | out of memory at step zero, in the optimizer | $(verdict "$(echo "$line" | grep -q 'for optimizer' && echo 1 || echo 0)") | $(short "$1") |"
    fi
}

summary_02() {
    local s=$1/ring_vs_mpi_summary.txt d=$1/ddp_scaling.txt g=$1/ddp_demo.log
    if [ -f "$s" ]; then
        awk -v src="$(short "$1")" '
            $1 ~ /^[0-9]+$/ {n++; r = $5 + 0; if (n == 1 || r < lo) lo = r; if (n == 1 || r > hi) hi = r
                             sizes = sizes (n > 1 ? ", " : "") sprintf("%g MiB %.2f×", $1 / 1048576, r)}
            END {
                if (!n) { print "| 02 | ring vs MPI_Allreduce | no sizes in ring_vs_mpi_summary.txt | ring ≥ MPI | **MISSED** | " src " |"; exit }
                range = n > 1 ? sprintf("%.2f–%.2f×", lo, hi) : sprintf("%.2f×", lo)
                printf "| 02 | hand-written ring vs MPI_Allreduce, busbw at ≥ 16 MiB, 2 ranks (median of 5 rounds) | ring/MPI **%s** (%s) | ring ≥ MPI at every size | %s | %s |\n",
                       range, sizes, (lo >= 1 ? "met" : "**MISSED**"), src }' "$s"
    fi
    if [ -f "$d" ]; then
        awk -v src="$(short "$1")" '
            !/^#/ && NF >= 2 {n++; r[n] = $1; t[n] = $2; if ($1 == 1) base = $2}
            END {
                s = ""
                for (i = 1; i <= n; i++)
                    s = s (i > 1 ? "; " : "") sprintf("%d rank%s %.0f tok/s", r[i], r[i] == 1 ? "" : "s", t[i]) \
                        (base && r[i] > 1 ? sprintf(" (%.2f×)", t[i] / base) : "")
                printf "| 02 | DDP scaling, small preset, batch 4 per rank | %s | near N× while ranks ≤ cores; flat beyond (no pass/fail) | — | %s |\n", s, src }' "$d"
    fi
    if [ -f "$g" ]; then
        local loss
        loss=$(sed -n 's/.*done: loss \([0-9.]*\) -> \([0-9.]*\).*/\1 → \2/p' "$g" | head -n1)
        echo "| 02 | DDP demo, 4 ranks: loss (nats) | ${loss:-no summary line} | falls (uniform guess 5.55) | $(verdict "$(echo "$loss" | awk '{print ($3 + 0 > 0 && $3 < $1)}')") | $(short "$1") |"
    fi
}

summary_03() {
    local s=$1/strategies.txt b=$1/bucket_sweep.txt m=$1/memory.txt y=$1/bytes.txt g=$1/demo_zero2.log
    if [ -f "$s" ]; then
        # rows "config ms min max tok/s overlap vs_ddp target verdict rounds_met"
        awk -v src="$(short "$1")" '
            !/^#/ && NF >= 10 {ms[$1] = $2; r[$1] = $7; t[$1] = $8; v[$1] = $9; k[$1] = $10}
            function row(what, x, target) {
                if (!(x in ms)) { printf "| 03 | %s | not in strategies.txt | %s | **MISSED** | %s |\n", what, target, src; return }
                printf "| 03 | %s | %.1f ms vs DDP %.1f ms = **%.2f×** (met in %s rounds) | %s | %s | %s |\n",
                       what, ms[x], ms["ddp"], r[x], k[x], target, v[x] == "met" ? "met" : "**MISSED**", src }
            END {
                row("DDP without overlap (one all-reduce after backward) vs overlapped, 25 MB buckets; 2 ranks, bench model", "ddp-no-overlap", "overlapped faster (> 1.02×)")
                row("ZeRO-1 step time vs DDP", "zero1", "≤ 1.05×")
                row("ZeRO-2 step time vs DDP", "zero2", "≤ 1.05×")
                row("ZeRO-3 (prefetch) step time vs DDP", "zero3", "≤ 1.25×")
                row("FSDP (prefetch, a unit per layer group) step time vs DDP", "fsdp", "≤ 1.25×") }' "$s"
    fi
    if [ -f "$b" ]; then
        # rows "overlap|no-overlap bucket_MB buckets ms min max tok/s overlap% speedup"
        awk -v src="$(short "$1")" '
            !/^#/ && $1 == "no-overlap" {no = $4}
            !/^#/ && $1 == "overlap" {n++; if (n == 1 || $4 < best) {best = $4; mb = $2; ov = $8; sp = $9}}
            END {
                if (!n) exit
                printf "| 03 | DDP bucket size, 2 ranks, bench model: the fastest | %s MB: %.1f ms/step, overlap %.0f %%, vs %.1f ms without overlap (%.2f× faster) | a bucket size that overlaps beats none (no pass/fail) | — | %s |\n",
                       mb, best, ov, no, sp, src }' "$b"
    fi
    if [ -f "$m" ]; then
        local rows bad lo hi
        read -r rows bad lo hi < <(awk '!/^#/ && NF >= 9 {rows++; if ($8 != "+0.00" && $8 != "-0.00") bad++
                                                          if (rows == 1 || $2 < lo) lo = $2; if ($2 > hi) hi = $2}
                                        END {print rows + 0, bad + 0, lo + 0, hi + 0}' "$m")
        echo "| 03 | memory per rank (params + grads + optimizer; ddp, ZeRO-1/2/3, FSDP at N = $lo..$hi) vs memcalc (FSDP: its padded formula) | $((rows - bad)) of $rows equal | equal in every row | $(verdict "$([ "$bad" -eq 0 ] && [ "$rows" -gt 0 ] && echo 1 || echo 0)") | $(short "$1") |"
    fi
    if [ -f "$y" ]; then
        awk -v src="$(short "$1")" '
            !/^#/ && NF >= 7 && $6 > 0 {n++; d = $3 / $6 - 1; if (d < 0) d = -d; if (d > worst) worst = d}
            END {
                if (!n) exit
                printf "| 03 | bytes sent per rank per step vs 2Ψ(N−1)/N (ddp, ZeRO-1/2) and (3Ψ − head)(N−1)/N (ZeRO-3, FSDP) | %d rows, largest deviation %.2g %% | within 0.1 %% | %s | %s |\n",
                       n, 100 * worst, worst < 1e-3 ? "met" : "**MISSED**", src }' "$y"
    fi
    if [ -f "$g" ]; then
        local loss
        loss=$(sed -n 's/.*done: loss \([0-9.]*\) -> \([0-9.]*\).*/\1 → \2/p' "$g" | head -n1)
        echo "| 03 | ZeRO-2 demo, 4 ranks: loss (nats) | ${loss:-no summary line} | falls (uniform guess 5.55) | $(verdict "$(echo "$loss" | awk '{print ($3 + 0 > 0 && $3 < $1)}')") | $(short "$1") |"
    fi
}

summary_04() {
    local g=$1/target.txt y=$1/tp_bytes.txt m=$1/memory.txt s=$1/tp_sweep.txt k=$1/prediction_links.txt
    local d=$1/demo_tp2_sp.log
    if [ -f "$g" ]; then
        # rows "config tok/s tp1_tok/s median min max target verdict rounds_met per_round"
        awk -v src="$(short "$1")" '
            !/^#/ && $1 == "tp2" {n++; printf "| 04 | TP = 2 on 2 ranks vs TP = 1 on one: tokens/s, small preset, batch 4 (the median of the rounds'"'"' ratios) | %.0f vs %.0f tok/s = **%.2f×** (met in %s rounds) | ≥ 1.6× | %s | %s |\n", $2, $3, $4, $9, $8 == "met" ? "met" : "**MISSED**", src}
            END {if (!n) printf "| 04 | TP = 2 vs TP = 1 tokens/s | no tp2 row in target.txt | ≥ 1.6× | **MISSED** | %s |\n", src}' "$g"
    fi
    if [ -f "$y" ]; then
        # rows "config t mean min max act ce ln norm formula diff"
        awk -v src="$(short "$1")" '
            !/^#/ && NF >= 11 && $2 > 1 {n++; if ($11 + 0 == 0) ok++}
            END {if (!n) exit
                 printf "| 04 | bytes sent per rank per step (mean over the ranks) vs the ring formula, t = 2 and 4, without and with SP | %d of %d equal to the byte | equal | %s | %s |\n",
                        ok, n, ok == n ? "met" : "**MISSED**", src}' "$y"
    fi
    if [ -f "$m" ]; then
        local rows bad
        read -r rows bad < <(awk '!/^#/ && NF >= 12 {rows++; if ($12 != "equal") bad++} END {print rows + 0, bad + 0}' "$m")
        echo "| 04 | memory per rank (activations, workspace, states, total) vs memcalc, t = 1, 2, 4 without and with SP | $((rows - bad)) of $rows equal | equal in every row | $(verdict "$([ "$bad" -eq 0 ] && [ "$rows" -gt 0 ] && echo 1 || echo 0)") | $(short "$1") |"
    fi
    if [ -f "$s" ]; then
        awk -v src="$(short "$1")" '
            !/^#/ && NF >= 14 && $2 > 1 {x = x (x == "" ? "" : "; ") sprintf("%s %.1f %%", $1, $10)}
            END {if (x != "") printf "| 04 | share of the step in TP collectives (ranks beyond the cores: oversubscribed) | %s | small while ranks ≤ cores (no pass/fail) | — | %s |\n", x, src}' "$s"
    fi
    if [ -f "$k" ]; then
        awk -v src="$(short "$1")" '
            !/^#/ && $2 == 8 {sp[$1] = $6; c[$1] = $8}
            END {if ("nvlink" in sp && "ib" in sp) printf "| 04 | predicted (an illustration): a GPT-3-sized layer at t = 8, speed-up over one GPU | NVLink %.1f× (comm %.0f %%), InfiniBand %.1f× (comm %.0f %%) | TP inside a node (no pass/fail) | — | %s |\n", sp["nvlink"], c["nvlink"], sp["ib"], c["ib"], src}' "$k"
    fi
    if [ -f "$d" ]; then
        local loss
        loss=$(sed -n 's/.*done: loss \([0-9.]*\) -> \([0-9.]*\).*/\1 → \2/p' "$d" | head -n1)
        echo "| 04 | TP = 2 + SP demo, 2 ranks: loss (nats) | ${loss:-no summary line} | falls (uniform guess 5.55) | $(verdict "$(echo "$loss" | awk '{print ($3 + 0 > 0 && $3 < $1)}')") | $(short "$1") |"
    fi
}

summary_05() {
    local g=$1/target.txt b=$1/bubble.txt m=$1/memory.txt k=$1/sim_bubble.txt d=$1/demo_1f1b.log
    if [ -f "$g" ]; then
        # rows "target config measured reference ratio goal verdict rounds_met per_round"
        awk -v src="$(short "$1")" '
            !/^#/ && $1 == "bubble" {nb++; s = $2; sub(/-p[0-9]+-m[0-9]+$/, "", s)
                name = s == "gpipe" ? "GPipe" : s == "1f1b" ? "1F1B" : s == "zb-h1" ? "ZB-H1" : s
                printf "| 05 | pipeline bubble (step − busiest rank) / busiest, %s, p = 2, m = 8, against its formula %s (the median of the rounds) | %.3f = **%.2f×** the formula (met in %s rounds) | within 10 %% | %s | %s |\n",
                       name, $4, $3, $5, $8, $7 == "met" ? "met" : "**MISSED**", src}
            !/^#/ && $1 == "memory" {nm++; if ($7 != "met") bad++; x = x (x == "" ? "" : ", ") sprintf("%s %.3f", substr($2, 6), $5)}
            END {
                if (!nb) printf "| 05 | pipeline bubble vs (p−1)/m | no bubble rows in target.txt | within 10 %% | **MISSED** | %s |\n", src
                if (nm) printf "| 05 | 1F1B peak activations / GPipe'"'"'s, per stage (m = 8) | %s | ≤ p/m on every stage | %s | %s |\n",
                               x, bad ? "**MISSED**" : "met", src }' "$g"
    fi
    if [ -f "$b" ]; then
        # rows "schedule m rounds bubble min max formula meas/form sim meas/sim ..."
        awk -v src="$(short "$1")" '
            !/^#/ && $2 == 8 {x = x (x == "" ? "" : "; ") sprintf("%s %.3f (%.3f; %.3f)", $1, $4, $7, $9)}
            END {if (x != "") printf "| 05 | bubble at p = 2, m = 8: measured (formula; pp_sim on the measured stage times) | %s | near the formula; interleaved and zb-h1 below 1F1B (no pass/fail) | — | %s |\n", x, src}' "$b"
    fi
    if [ -f "$m" ]; then
        local rows bad
        read -r rows bad < <(awk '!/^#/ && NF >= 10 && $6 != "-" {rows++; if ($7 != "equal") bad++} END {print rows + 0, bad + 0}' "$m")
        echo "| 05 | peak activations per stage (GPipe, 1F1B; p = 2 and 4) vs memcalc --stage | $((rows - bad)) of $rows equal | equal in every row | $(verdict "$([ "$bad" -eq 0 ] && [ "$rows" -gt 0 ] && echo 1 || echo 0)") | $(short "$1") |"
    fi
    if [ -f "$k" ]; then
        awk -v src="$(short "$1")" '
            !/^#/ && $1 == 8 && $4 == 32 {b[$2] = $5; f[$2] = $6}
            END {n = split("gpipe 1f1b interleaved zb-h1", s, " ")
                 for (i = 1; i <= n; i++) if (s[i] in b) x = x (x == "" ? "" : "; ") sprintf("%s %.3f (%.3f)", s[i], b[s[i]], f[s[i]])
                 if (x != "") printf "| 05 | simulated (pp_sim), p = 8, m = 32, the measured model in 8 equal stages: bubble (formula) | %s | an illustration (no pass/fail) | — | %s |\n", x, src}' "$k"
    fi
    if [ -f "$d" ]; then
        local loss
        loss=$(sed -n 's/.*done: loss \([0-9.]*\) -> \([0-9.]*\).*/\1 → \2/p' "$d" | head -n1)
        echo "| 05 | 1F1B demo, 2 stages, 8 micro-batches: loss (nats) | ${loss:-no summary line} | falls (uniform guess 5.55) | $(verdict "$(echo "$loss" | awk '{print ($3 + 0 > 0 && $3 < $1)}')") | $(short "$1") |"
    fi
}

summary_06() {
    local g=$1/target.txt l=$1/losses.txt r=$1/recompute.txt c=$1/comm_error.txt
    if [ -f "$g" ]; then
        awk -v src="$(short "$1")" '!/^#/ && /mixed-bf16/ {
            printf "| 06 | mixed-bf16 final loss vs fp32 (%%, small preset, the course'"'"'s Markdown) | %s | ≤ 2 %% | %s | %s |\n",
                   $(NF - 3), $NF == "met" ? "met" : "**MISSED**", src}' "$g"
    fi
    if [ -f "$l" ]; then
        awk -v src="$(short "$1")" '!/^#/ {x = x (x == "" ? "" : "; ") sprintf("%s %s", $1, $2)}
            END {printf "| 06 | final loss per recipe at lr 1e-3 (mean of the last 20 steps) | %s | an illustration (no pass/fail) | — | %s |\n", x, src}' "$l"
    fi
    if [ -f "$1/losses_lowlr.txt" ]; then
        awk -v src="$(short "$1")" '!/^#/ && $1 != "fp32" {x = x (x == "" ? "" : "; ") sprintf("%s %+.2f %%", $1, $3)}
            END {printf "| 06 | at lr 1e-4, final loss against fp32: pure bf16 stalls, stochastic rounding does not | %s | an illustration (no pass/fail) | — | %s |\n", x, src}' "$1/losses_lowlr.txt"
    fi
    if [ -f "$r" ]; then
        local rows bad
        read -r rows bad < <(awk '!/^#/ {rows++; if ($2 != $3) bad++} END {print rows + 0, bad + 0}' "$r")
        echo "| 06 | peak activations per recompute level vs memcalc --recipe course --recompute | $((rows - bad)) of $rows equal | equal in every row | $(verdict "$([ "$bad" -eq 0 ] && [ "$rows" -gt 0 ] && echo 1 || echo 0)") | $(short "$1") |"
        awk -v src="$(short "$1")" '!/^#/ {x = x (x == "" ? "" : "; ") sprintf("%s −%.0f %% memory, %+.0f %% time", $1, $4, $8)}
            END {printf "| 06 | recompute: activations saved, step time added (small preset, batch 8) | %s | an illustration (no pass/fail) | — | %s |\n", x, src}' "$r"
    fi
    if [ -f "$c" ]; then
        awk -v src="$(short "$1")" '!/^#/ {x = x (x == "" ? "" : "; ") sprintf("p = %s: %s (%.2f× once-rounded)", $1, $3, $5)}
            END {printf "| 06 | bf16 gradient all-reduce: relative error against the world size (half the bytes of fp32) | %s | grows with p (no pass/fail) | — | %s |\n", x, src}' "$c"
    fi
}

summary_07() {
    local c=$1/ckpt_cost.txt r=$1/recovery.txt i=$1/interval.txt
    if [ -f "$c" ]; then
        awk -v src="$(short "$1")" '!/^#/ {l = $0} END {split(l, v, " ");
            printf "| 07 | checkpoint of %s MB (one process): training stalled, sync / async; write; load | %s / %s ms; %s ms; %s ms | an illustration (no pass/fail) | — | %s |\n",
                   v[3], v[6], v[7], v[5], v[8], src}' "$c"
    fi
    if [ -f "$r" ]; then
        awk -v src="$(short "$1")" '!/^#/ {x = x (x == "" ? "" : "; ") sprintf("%s %.0f ms (detect %.0f, load %.0f)", $1, $7, $2, $5)}
            END {printf "| 07 | recovery from a fault to the first new step (2 ranks, supervisor) | %s | an illustration (no pass/fail) | — | %s |\n", x, src}' "$r"
    fi
    if [ -f "$i" ]; then
        sed -n 's/^RESULT ckpt_interval young_s=\([0-9.]*\) daly_s=\([0-9.]*\) best_T_s=[0-9.]* best_goodput=\([0-9.]*\).*/\1 \2 \3/p' "$i" |
            awk -v src="$(short "$1")" '{printf "| 07 | checkpoint interval for the measured cost at a 1-hour MTBF: Young, Daly, best goodput | %s s, %s s, %s | an illustration (no pass/fail) | — | %s |\n", $1, $2, $3, src}'
    fi
}

# ---------------------------------------------------------------- one stage in full

stage_section() {  # stage_section STAGE
    local st=$1 src f name
    src=$(src_dir "$st")
    echo
    echo "## $(stage_title "$st")"
    echo
    if [ -z "$src" ]; then
        echo "Not measured yet, and nothing committed: run \`$(stage_cmd "$st")\`."
        return
    fi
    echo "Source: $(label "$src")."
    if ! is_now "$src" && [ "$now" != "$committed" ]; then
        if [ -d "$now/$st" ]; then
            echo "Your run in \`$now/$st/\` has no run.info: it did not finish, so it is not shown."
        else
            echo "You have not run \`$(stage_cmd "$st")\` yet; these are the course's figures."
        fi
    fi
    if is_now "$src" && [ -f "$committed/$st/run.info" ]; then
        echo "The course's own run, which the lesson quotes, is in \`$committed/$st/\`" \
             "($(run_info "$committed/$st" date), $(run_info "$committed/$st" machine))."
    fi
    for f in "$src"/*.txt "$src"/*.log; do
        [ -f "$f" ] || continue
        name=$(basename "$f")
        [ "$name" = fit.log ] && [ ! -s "$f" ] && continue  # an empty fit log says nothing
        echo
        echo "### $name"
        echo
        echo "$(describe "$name" "$st") — $(label "$src")"
        echo
        fence "$f"
    done
    for f in "$src"/*.png; do
        [ -f "$f" ] || continue
        echo
        echo "### figure: $(basename "$f" .png)"
        echo
        echo "$(label "$src")"
        echo
        echo "![$(basename "$f" .png)]($(rel "$f"))"
    done
    for f in "$src"/*.dat; do
        [ -f "$f" ] || continue
        echo
        echo "<details><summary>plot data: $(basename "$f") — $(label "$src" | plain)</summary>"
        echo
        fence "$f"
        echo
        echo "</details>"
    done
}

# ---------------------------------------------------------------- the report

stages=$( { ls -d "$committed"/[0-9][0-9]_*/ "$now"/[0-9][0-9]_*/ 2>/dev/null || true; } |
          xargs -rn1 basename | sort -u)
{
    echo "# Measured results"
    echo
    echo "Generated $(date -u +%Y-%m-%d) on $(machine_desc) by \`make report\`."
    echo "Each stage comes from your own run where you made one: **measured now**, from"
    echo "\`$now/\`. A stage you have not run shows the course's own measured run, which the"
    echo "lessons quote: **committed earlier**, from \`$committed/\`. Each says its date and"
    echo "machine; numbers from different machines do not compare."
    echo
    echo "## Summary: headline numbers against the targets"
    echo
    echo "| stage | what | measured | target | | source |"
    echo "|---|---|---|---|---|---|"
    for st in $stages; do
        src=$(src_dir "$st")
        if [ -z "$src" ]; then
            echo "| $st | not measured yet | run \`$(stage_cmd "$st")\` | | | |"
            continue
        fi
        case "$st" in
            00_core) summary_core "$src" ;;
            01_memory_wall) summary_01 "$src" ;;
            02_ddp_allreduce) summary_02 "$src" ;;
            03_bucketing_zero) summary_03 "$src" ;;
            04_tensor_parallel) summary_04 "$src" ;;
            05_pipeline) summary_05 "$src" ;;
            06_mixed_precision) summary_06 "$src" ;;
            07_fault_tolerance) summary_07 "$src" ;;
            *) echo "| $st | (no headline numbers defined; see below) | | | | $(short "$src") |" ;;
        esac
    done
    echo
    echo "Sources:"
    echo
    for st in $stages; do
        src=$(src_dir "$st")
        [ -n "$src" ] && echo "- $st: $(label "$src")"
    done
    for st in $stages; do stage_section "$st"; done
} >"$out"
# Figure captions are the lines that start with the label.
figs=$(grep -c '^!\[' "$out" || true)
echo "report: $out: $(( $(grep -c '^### ' "$out") - figs )) tables, $figs figures" \
     "($(grep -c '^\*\*measured now\*\* (' "$out" || true) measured now," \
     "$(grep -c '^\*\*committed earlier\*\* (' "$out" || true) committed earlier)"
