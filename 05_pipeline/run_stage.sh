#!/usr/bin/env bash
# run_stage.sh — stage 05's demo, benchmark, simulator and plots (`make stage-5` runs the
# tests first, then this). Everything runs build/pp_train on this machine's CPU: forked
# ranks over shared memory, small preset (4 layers: p <= 4, and p·v <= 4 interleaved),
# batch 2 per micro-batch. Outputs into $RESULTS/05_pipeline/ (RESULTS=runs by default:
# yours, untracked; results/ holds the course's own run: `make stage-5 RESULTS=results`).
#
#   1. Demo: 1F1B on 2 stages, 8 micro-batches, trains the small GPT (demo_1f1b.log).
#   2. Bubble against m at p = 2, every schedule, from the trace of each run's last step
#      (bubble_runs.txt, bubble.txt): beside the formula and build/pp_sim driven by the
#      same trace's per-action medians.
#   3. The targets (target.txt): the measured bubble within 10 % of (p-1)/m for GPipe and
#      1F1B at m = 8; 1F1B's peak activation memory at most p/m of GPipe's, per stage.
#   4. Peak activation memory per stage, p = 2 and 4, beside build/memcalc (memory.txt).
#   5. The simulator at p = 4 and 8, beyond this machine's cores (sim_bubble.txt).
#   6. Gantt charts (gantt/*.dat, gantt.txt): measured at p = 2, simulated at p = 2 and 4.
#   7. gnuplot (scripts/plot.sh): every figure labelled with the machine and the date.
#
# Timings on a shared VM are noisy: every round runs every configuration once (in an
# order that rotates from round to round); tables give the median over the rounds and
# the spread. QUICK=1 is a smoke run (one round, m = 2 and 8, short demo).
set -eu
cd "$(dirname "$0")/.."
. scripts/stage_lib.sh
stage_begin 05_pipeline '*.txt' '*.log' '*.png' 'gantt/*.dat' 'gantt/*.json'

# The small preset (as common/ and memcalc define it); B sequences per micro-batch.
L=4 C=256 NH=4 T=128 V=256 B=2 P=2 M=8
# target_rounds: the targets' configurations (m = M) run in more rounds than the
# others: one round's bubble moves by up to a third on this VM, and a verdict on
# the median of 7 still flips from run to run.
rounds=7 target_rounds=15 steps=3 demo_steps=20 ms="2 4 8 16" sim_ms="4 8 16 32 64"
if quick; then rounds=1 target_rounds=1 steps=2 demo_steps=4 ms="2 8" sim_ms="8 32"; fi
scheds=(gpipe 1f1b interleaved zb-h1)

# train LOG ARGS...: one run of pp_train, its whole output in LOG (run: a failed run stops
# the script). (--peak-tflops 1: no sgemm measurement for an unread MFU.)
train() {
    local log=$1; shift
    run "$log" pp_train "$@" --preset small --batch "$B" --peak-tflops 1 --log-every 1000000
}
chunks() { [ "$1" = interleaved ] && echo 2 || echo 1; }  # chunks SCHED: v
# analyse DAT P V: from a trace of one step, "step_ms bubble wait_ms edge_ms gap_ms tF_ms
# tB_ms tW_ms tf tb tw idle imbalance". busy: a rank's compute spans less the waits inside
# them (a forward waits for its input inside its action, a backward for its gradient);
# step: the last end - the first start over the ranks. bubble = (step - busy_max) /
# busy_max: the step beyond the busiest rank's work, the pipeline's fill and drain (what
# the formulas count; build/pp_sim's bubble). idle = (step - busy) / busy, the mean of the
# ranks: the bubble and, when the stages differ, the faster ranks' waits for the slowest
# (imbalance = busy_max / busy_min - 1). The idle time (step - busy, the mean of the
# ranks) in three: wait_ms in waits for a message, edge_ms before a rank's first compute
# and after its last, gap_ms between its actions (posting, allocating a received
# micro-batch's activations).
# tf tb tw: pp_sim's lists, seconds, one a virtual stage (k = chunk·p + rank), the median
# of its spans; tF_ms...: per stage (all its chunks), the mean of the ranks. B of GPipe,
# 1F1B and interleaved is the fused backward (tB + tW; tW 0); zb-h1's B and W apart.
analyse() {
    awk -v p="$2" -v v="$3" "$awk_med"'
        function median(key,    n, i, a) {
            n = cnt[key]; if (!n) return 0
            for (i = 1; i <= n; i++) a[i] = val[key, i]
            return med(a, n) }
        /^#/ {next}
        {gsub(/"/, "", $5)}
        $2 == 0 {n++; r[n] = $1; t0[n] = $3; t1[n] = $4; nm[n] = $5; if (n == 1 || $3 < lo) lo = $3; if ($4 > hi) hi = $4
                 if (!($1 in first) || $3 < first[$1]) first[$1] = $3; if ($4 > last[$1]) last[$1] = $4}
        $2 == 2 {w++; wr[w] = $1; w0[w] = $3; w1[w] = $4}
        END {
            for (i = 1; i <= n; i++) {
                d = t1[i] - t0[i]
                for (j = 1; j <= w; j++) if (wr[j] == r[i]) {
                    a = w0[j] > t0[i] ? w0[j] : t0[i]; b = w1[j] < t1[i] ? w1[j] : t1[i]
                    if (b > a) { d -= b - a; wt[r[i]] += b - a } }
                busy[r[i]] += d; span[r[i]] += t1[i] - t0[i]
                c = index(nm[i], ".") ? substr(nm[i], index(nm[i], ".") + 1) : 0
                key = substr(nm[i], 1, 1) SUBSEP (c * p + r[i]); val[key, ++cnt[key]] = d }
            step = hi - lo
            for (s = 0; s < p; s++) {
                e = first[s] - lo + hi - last[s]
                if (s == 0 || busy[s] > bmax) bmax = busy[s]
                if (s == 0 || busy[s] < bmin) bmin = busy[s]
                idle += (step - busy[s]) / busy[s] / p; wait += wt[s] / p; edge += e / p; gap += (step - span[s] - e) / p }
            bub = (step - bmax) / bmax
            for (k = 0; k < p * v; k++) {
                f = median("F" SUBSEP k); b = median("B" SUBSEP k); x = median("W" SUBSEP k)
                F += f / p; Bk += b / p; W += x / p
                lf = lf (k ? "," : "") sprintf("%.6g", f / 1e3); lb = lb (k ? "," : "") sprintf("%.6g", b / 1e3)
                lw = lw (k ? "," : "") sprintf("%.6g", x / 1e3) }
            printf "%.3f %.5f %.3f %.3f %.3f %.3f %.3f %.3f %s %s %s %.5f %.5f\n", step, bub, wait, edge, gap, F, Bk, W,
                   lf, lb, lw, idle, bmax / bmin - 1 }' "$1"
}
# msg_s: "seconds file": one activation message (B·T·C floats) from stage 02's alpha-beta
# fit for np 2 (alpha_beta): alpha + n·beta in cache; "0 none" without one.
msg_bytes=$((B * T * C * 4))
msg_s() {
    local a c f
    read -r a c _ f < <(alpha_beta 2) || { echo "0 none"; return; }
    awk -v a="$a" -v c="$c" -v n="$msg_bytes" -v f="$f" 'BEGIN {printf "%.3g %s\n", a * 1e-6 + n * c * 1e-9, f}'
}
read -r msg msg_src < <(msg_s)

# ---------------------------------------------------------------- 1. demo
echo "== demo: 1F1B, 2 stages, 8 micro-batches of $B sequences, small preset, CPU =="
demo "$out/demo_1f1b.log" pp_train --np 2 --pp 2 --schedule 1f1b --grad-accum 8 --preset small --batch "$B" \
    --steps "$demo_steps" --lr 1e-3 --log-every 5 --peak-tflops 1

# ---------------------------------------------------------------- 2. bubble vs m at p = 2
echo "== bubble vs m at p = $P: ${scheds[*]}, m = $ms; $rounds round(s) ($target_rounds at m = $M), $cores cores =="
raw=$out/bubble_runs.txt
{
    echo "# Every run of the bubble sweep (p = $P, small preset, batch $B, $steps steps; the last step traced)."
    echo "# step_ms: the traced step's computes, first start to last end; busy: a rank's compute spans less the"
    echo "# waits inside them. bubble = (step - busy_max) / busy_max, the step beyond the busiest rank's work (the"
    echo "# fill and drain the formulas count); idle = (step - busy) / busy, the mean of the ranks (the bubble and"
    echo "# the faster rank's waits for the slower); imbalance = busy_max / busy_min - 1. The idle time (step - busy,"
    echo "# the mean of the ranks) in waits for a message (wait_ms), before a rank's first compute and after its"
    echo "# last (edge_ms), between its actions (gap_ms: posting, allocating received activations); tF/tB/tW_ms: per"
    echo "# stage (the mean of the ranks) the medians of the trace's F, B, W spans less waits (GPipe, 1F1B,"
    echo "# interleaved: B is the fused backward, tB + tW); sim, sim_idle: pp_sim driven by the trace's medians per"
    echo "# virtual stage, message $msg s; formula: pp_sim's formula with those times."
    printf '%-12s %3s %5s %9s %8s %8s %8s %7s %7s %7s %7s %8s %8s %8s %9s %8s\n' "#schedule" "m" "round" "step_ms" \
        "bubble" "wait_ms" "edge_ms" "gap_ms" "tF_ms" "tB_ms" "tW_ms" "sim" "formula" "idle" "imbalance" "sim_idle"
} >"$raw"
configs=()
for s in "${scheds[@]}"; do for m in $ms; do configs+=("$s:$m"); done; done
n=${#configs[@]}
for ((r = 1; r <= target_rounds || r <= rounds; r++)); do
    printf '  round %d/%d:' "$r" "$((target_rounds > rounds ? target_rounds : rounds))"
    for k in $(rotation $((r - 1)) "$n"); do
        c=${configs[$k]} s=${c%:*} m=${c#*:} v=$(chunks "${c%:*}")
        [ "$r" -le "$rounds" ] || [ "$m" = "$M" ] || continue
        log=$tmp/$s-m$m.log  # the last round's log and trace stay: memory and Gantt
        train "$log" --np "$P" --pp "$P" --schedule "$s" --chunks "$v" --grad-accum "$m" --steps "$steps" \
            --trace "$tmp/$s-m$m"
        read -r step bub wait edge gap F Bt W lf lb lw idle imb < <(analyse "$tmp/$s-m$m.dat" "$P" "$v")
        "$BUILD/pp_sim" --pp "$P" --schedule "$s" --chunks "$v" --microbatches "$m" --tf "$lf" --tb "$lb" \
            --tw "$lw" --msg "$msg" --gantt "$tmp/sim-$s-m$m.dat" >"$tmp/sim.out"
        printf '%-12s %3d %5d %9.2f %8.4f %8.2f %8.2f %7.2f %7.2f %7.2f %7.2f %8.4f %8.4f %8.4f %9.4f %8.4f\n' "$s" \
            "$m" "$r" "$step" "$bub" "$wait" "$edge" "$gap" "$F" "$Bt" "$W" "$(kv "$tmp/sim.out" bubble)" \
            "$(kv "$tmp/sim.out" formula)" "$idle" "$imb" "$(kv "$tmp/sim.out" idle)" >>"$raw"
        printf ' %s' "$c"
    done
    echo
done
col() { awk -v s="$1" -v m="$2" -v k="$3" '!/^#/ && $1 == s && $2 == m {print $k}' "$raw"; }  # col SCHED M COLUMN
{
    echo "# Bubble against the micro-batches m at p = $P ranks (each on its own core of $cores), small preset (L=$L C=$C"
    echo "# heads=$NH T=$T V=$V), batch $B."
    echo "# measured: from the trace of each run's last step (bubble_runs.txt); the median over the rounds ($rounds, and"
    echo "# $target_rounds at m = $M, the targets'), min and max the spread. bubble = (step - busy_max) / busy_max: the step beyond the busiest rank's work, the fill and"
    echo "# drain that the formulas count. formula: (p-1)/m for GPipe and 1F1B, (p-1)/(v m) interleaved (v = 2), ZB-H1's"
    echo "# (p-1)(tF+tB-tW)/(m(tF+tB+tW)) (Qi et al., with the measured tF, tB, tW; equal stages, tW <= min(tF, tB))."
    echo "# sim: build/pp_sim on the same schedule with the trace's per-virtual-stage medians (stages as unequal"
    echo "# as measured: the embedding and the head) and message $msg s (alpha + n beta, $msg_bytes B; fit: $msg_src)."
    echo "# meas/form, meas/sim: the ratios of the medians. tF/tB/tW_ms (tB fused, tW 0, except zb-h1), step_ms, and the"
    echo "# idle time split as in bubble_runs.txt (wait_ms, edge_ms, gap_ms): medians over the rounds. idle: the mean"
    echo "# rank's (step - busy) / busy, the bubble plus the faster rank's waits for the slower (imbalance = busy_max /"
    echo "# busy_min - 1, the stages' difference in that step); sim_idle: pp_sim's; medians over the rounds."
    printf '%-12s %3s %6s %7s %7s %7s %7s %9s %7s %8s %7s %7s %7s %8s %7s %7s %7s %7s %9s %8s\n' "#schedule" "m" \
        "rounds" "bubble" "min" "max" "formula" "meas/form" "sim" "meas/sim" "tF_ms" "tB_ms" "tW_ms" "step_ms" \
        "wait_ms" "edge_ms" "gap_ms" "idle" "imbalance" "sim_idle"
    for s in "${scheds[@]}"; do
        for m in $ms; do
            read -r b lo hi < <(col "$s" "$m" 5 | spread)
            f=$(col "$s" "$m" 13 | med) sm=$(col "$s" "$m" 12 | med)
            printf '%-12s %3d %6d %7.4f %7.4f %7.4f %7.4f %9.3f %7.4f %8.3f %7.2f %7.2f %7.2f %8.2f %7.2f %7.2f %7.2f %7.4f %9.4f %8.4f\n' \
                "$s" "$m" "$(col "$s" "$m" 5 | wc -l)" "$b" "$lo" "$hi" "$f" \
                "$(awk -v x="$b" -v y="$f" 'BEGIN {print x / y}')" "$sm" \
                "$(awk -v x="$b" -v y="$sm" 'BEGIN {print (y > 0 ? x / y : 0)}')" "$(col "$s" "$m" 9 | med)" \
                "$(col "$s" "$m" 10 | med)" "$(col "$s" "$m" 11 | med)" "$(col "$s" "$m" 4 | med)" \
                "$(col "$s" "$m" 6 | med)" "$(col "$s" "$m" 7 | med)" "$(col "$s" "$m" 8 | med)" \
                "$(col "$s" "$m" 14 | med)" "$(col "$s" "$m" 15 | med)" "$(col "$s" "$m" 16 | med)"
        done
    done
} | tee "$out/bubble.txt"

# ---------------------------------------------------------------- 4. memory (before the targets: they read it)
echo "== peak activation memory per stage, p = 2 and 4, m = $M: the ledger beside build/memcalc =="
for s in gpipe 1f1b zb-h1; do  # p = 4: 4 ranks on $cores cores (memory does not mind)
    train "$tmp/p4-$s.log" --np 4 --pp 4 --schedule "$s" --grad-accum "$M" --steps 1
done
calc() {  # calc P SCHED STAGE: memcalc's activations of that stage
    memcalc_value bytes_activations --preset small --recipe course --micro-batch "$B" --pp "$1" --schedule "$2" \
        --microbatches "$M" --stage "$3"
}
memline() {  # memline LOG STAGE KEY: a value of that stage's MEM line
    awk -v s="$2" -v k="$3" '/^MEM / {ok = 0; for (i = 2; i <= NF; i++) {split($i, kv, "="); f[kv[1]] = kv[2]}
        if (f["stage"] == s) print f[k]}' "$1"
}
{
    echo "# Peak activation memory per pipeline stage (bytes), small preset, batch $B, m = $M micro-batches: the ledger's"
    echo "# peak (the MEM lines; p = 2: the bubble sweep's last m = $M runs; p = 4: one step on 4 ranks, $cores cores:"
    echo "# oversubscribed, which memory does not mind) beside build/memcalc --preset small --recipe course --micro-batch"
    echo "# $B --pp p --schedule gpipe|1f1b --microbatches $M --stage s. in_flight: the most micro-batches the stage holds"
    echo "# (interleaved: (micro-batch, chunk) pairs). memcalc knows GPipe and 1F1B only: interleaved holds chunks of"
    echo "# v-times smaller stages, more of them in flight, and zb-h1 keeps each micro-batch's output gradients from B"
    echo "# to W besides (measured only). Activations include each micro-batch's embedding input on stage 0 and the"
    echo "# logits on the last. vs_gpipe: / GPipe's on the same stage; target (1F1B): at most p/m of GPipe's."
    echo "# p = 4 has no interleaved: p·v <= 4 layers."
    printf '%-3s %-12s %5s %9s %11s %11s %6s %9s %6s %7s\n' "#p" "schedule" "stage" "in_flight" "act_B" "memcalc_B" \
        "match" "vs_gpipe" "p/m" "target"
    for p in 2 4; do
        for s in "${scheds[@]}"; do
            if [ "$p" = 2 ]; then log=$tmp/$s-m$M.log glog=$tmp/gpipe-m$M.log; else log=$tmp/p4-$s.log glog=$tmp/p4-gpipe.log; fi
            [ -f "$log" ] || continue
            for ((st = 0; st < p; st++)); do
                act=$(memline "$log" "$st" activations) g=$(memline "$glog" "$st" activations)
                cal=- match=- tgt=- pm=-
                case $s in gpipe | 1f1b) cal=$(calc "$p" "$s" "$st"); match=equal; [ "$cal" = "$act" ] || match=DIFFERS ;; esac
                q=$(awk -v a="$act" -v b="$g" 'BEGIN {printf "%.4f", a / b}')
                if [ "$s" = 1f1b ]; then
                    pm=$(awk -v p="$p" -v m="$M" 'BEGIN {printf "%.4f", p / m}')
                    tgt=$(awk -v q="$q" -v x="$pm" 'BEGIN {print (q <= x + 1e-9 ? "met" : "MISSED")}')
                fi
                printf '%-3d %-12s %5d %9d %11d %11s %6s %9s %6s %7s\n' "$p" "$s" "$st" \
                    "$(memline "$log" "$st" in_flight)" "$act" "$cal" "$match" "$q" "$pm" "$tgt"
            done
        done
    done
} | tee "$out/memory.txt"

# ---------------------------------------------------------------- 3. targets
echo "== targets: the bubble within 10 % of its formula (every schedule, p = $P, m = $M); 1F1B's memory <= p/m GPipe's =="
{
    echo "# Targets (benchmarks, not tests). bubble: the measured bubble of each schedule at p = $P, m = $M, (step -"
    echo "# busy_max) / busy_max (bubble.txt), against its formula (equal stages, no message time): (p-1)/m ="
    echo "# $(awk -v p=$P -v m=$M 'BEGIN {print (p - 1) / m}') for GPipe and 1F1B, (p-1)/(v m) interleaved, ZB-H1's with the measured tF, tB, tW: measured /"
    echo "# formula in [0.9, 1.1]; measured: the median over the rounds (per_round: each round's ratio, rounds_met: how"
    echo "# many met it). memory: 1F1B's peak activations on each stage / GPipe's on the same stage (memory.txt) <= p/m."
    printf '%-7s %-16s %11s %11s %7s %11s %8s %10s  %s\n' "#target" "config" "measured" "reference" "ratio" "goal" \
        "verdict" "rounds_met" "per_round"
    for s in "${scheds[@]}"; do
        awk -v s="$s" -v m="$M" -v p="$P" "$awk_med"'
            !/^#/ && $1 == s && $2 == m {n++; b[n] = $5; fm[n] = $13; q[n] = $5 / $13; ok += (q[n] >= 0.9 && q[n] <= 1.1)
                                         pr = pr (n > 1 ? "," : "") sprintf("%.3f", q[n])}
            END {mb = med(b, n); f = med(fm, n); r = mb / f  # ZB-H1: the formula of each round'"'"'s times
                 printf "%-7s %-16s %11.4f %11.4f %7.3f %11s %8s %10s  %s\n", "bubble", s "-p" p "-m" m, mb, f, r,
                        "0.9..1.1", (r >= 0.9 && r <= 1.1) ? "met" : "MISSED", ok "/" n, pr}' "$raw"
    done
    awk '!/^#/ && $2 == "gpipe" {g[$1, $3] = $5}
         !/^#/ && $2 == "1f1b" {printf "%-7s %-16s %11d %11d %7.3f %11s %8s %10s  %s\n", "memory", "1f1b-p" $1 "-stage" $3,
                                $5, g[$1, $3], $8, "<=" $9, $10, "-", "-"}' "$out/memory.txt"
} | tee "$out/target.txt"

# ---------------------------------------------------------------- 5. the simulator beyond the cores
# Per-stage times at p stages: the whole model's per-micro-batch time measured at p = 2 (the sum of the
# stages = 2 x the per-stage mean of 1F1B's m = 8 runs, medians over the rounds), cut evenly into p.
echo "== the simulator at p = 4 and 8: bubble vs m (measured times, scaled) =="
tf2=$(col 1f1b "$M" 9 | med) tbw2=$(col 1f1b "$M" 10 | med)
wshare=$(awk -v b="$(col zb-h1 "$M" 10 | med)" -v w="$(col zb-h1 "$M" 11 | med)" 'BEGIN {printf "%.3f\n", w / (b + w)}')
stage_s() {  # stage_s P KIND: a stage's time at p stages, seconds (KIND f, b, w)
    awk -v p="$1" -v k="$2" -v f="$tf2" -v bw="$tbw2" -v ws="$wshare" -v P="$P" 'BEGIN {
        x = k == "f" ? f : k == "b" ? bw * (1 - ws) : bw * ws; printf "%.6g\n", x * P / p / 1e3 }'
}
{
    echo "# build/pp_sim at p = 4 and 8 ranks (more than this machine's $cores cores: simulated, not run). Per-stage times:"
    echo "# the measured model per micro-batch (1F1B, p = 2, m = $M: 2 stages x tF = $tf2 ms, x tB + tW = $tbw2 ms; the share of"
    echo "# W in the backward from zb-h1's B and W spans: $wshare) cut evenly into p stages (a deeper model's equal stages,"
    echo "# the embedding and head spread over them); interleaved: v = 2 chunks of half a stage; every message $msg s"
    echo "# (alpha + n beta of $msg_bytes B, the same at every p: per-stage compute shrinks, the message does not)."
    echo "# formula: (p-1)/m, (p-1)/(v m), ZB-H1's (p-1)(tF+tB-tW)/(m(tF+tB+tW)); interleaved needs m a multiple of p."
    printf '%-3s %-12s %2s %4s %9s %9s %9s %10s %9s %9s %9s\n' "#p" "schedule" "v" "m" "sim" "formula" "sim/form" \
        "step_ms" "tF_ms" "tB_ms" "tW_ms"
    for p in 4 8; do
        for s in "${scheds[@]}"; do
            for m in $sim_ms; do
                v=$(chunks "$s")
                [ "$s" != interleaved ] || [ $((m % p)) = 0 ] || continue
                f=$(stage_s "$p" f) b=$(stage_s "$p" b) w=$(stage_s "$p" w)
                "$BUILD/pp_sim" --pp "$p" --schedule "$s" --chunks "$v" --microbatches "$m" --tf "$f" --tb "$b" \
                    --tw "$w" --msg "$msg" --gantt "$tmp/sim-p$p-$s-m$m.dat" >"$tmp/sim.out"
                awk -v p="$p" -v s="$s" -v v="$v" -v m="$m" -v f="$f" -v b="$b" -v w="$w" \
                    -v x="$(kv "$tmp/sim.out" bubble)" -v y="$(kv "$tmp/sim.out" formula)" -v t="$(kv "$tmp/sim.out" step)" \
                    'BEGIN {printf "%-3d %-12s %2d %4d %9.4f %9.4f %9.3f %10.2f %9.3f %9.3f %9.3f\n", p, s, v, m, x, y,
                            x / y, t * 1e3, f * 1e3, b * 1e3, w * 1e3}'
            done
        done
    done
} | tee "$out/sim_bubble.txt"

# ---------------------------------------------------------------- 6. Gantt charts
echo "== Gantt charts: measured p = 2 (the last round's m = $M traces), simulated p = 2 and 4 =="
[ -f "$tmp/sim-p4-1f1b-m$M.dat" ] || for s in "${scheds[@]}"; do  # m = $M may be outside sim_ms
    "$BUILD/pp_sim" --pp 4 --schedule "$s" --chunks "$(chunks "$s")" --microbatches "$M" --tf "$(stage_s 4 f)" \
        --tb "$(stage_s 4 b)" --tw "$(stage_s 4 w)" --msg "$msg" --gantt "$tmp/sim-p4-$s-m$M.dat" >/dev/null
done
{
    echo "# The Gantt charts' data (gantt/*.dat: rank, lane 0 compute / 2 waiting, t0_ms, t1_ms, name F3 B3 W3, with"
    echo "# chunks F3.1; a compute's span holds its wait). measured: pp_train --trace (.json: Perfetto), the last step of the last round's"
    echo "# m = $M run; sim: pp_sim with that trace's medians (p = 2) or the scaled times of sim_bubble.txt (p = 4: 4 ranks"
    echo "# would oversubscribe this machine's $cores cores, so it is simulated, not measured). bubble as in bubble.txt."
    printf '%-12s %-9s %2s %3s %2s %9s %8s  %s\n' "#schedule" "source" "p" "m" "v" "step_ms" "bubble" "file"
    for s in "${scheds[@]}"; do
        v=$(chunks "$s")
        cp "$tmp/$s-m$M.dat" "$out/gantt/measured_p2_$s.dat"
        cp "$tmp/$s-m$M.json" "$out/gantt/measured_p2_$s.json"  # opens in https://ui.perfetto.dev
        cp "$tmp/sim-$s-m$M.dat" "$out/gantt/sim_p2_$s.dat"
        cp "$tmp/sim-p4-$s-m$M.dat" "$out/gantt/sim_p4_$s.dat"
        for f in measured_p2 sim_p2 sim_p4; do
            p=${f#*_p}
            read -r step bub _ < <(analyse "$out/gantt/${f}_$s.dat" "$p" "$v")
            printf '%-12s %-9s %2d %3d %2d %9.2f %8.4f  %s\n' "$s" "${f%_p*}" "$p" "$M" "$v" "$step" "$bub" "gantt/${f}_$s.dat"
        done
    done
} | tee "$out/gantt.txt"

echo "== two levels: PP = 2 against TP = 2 with one rank on each of 2 nodes (scripts/cluster.sh) =="
echo "   config rate ms_one ms_two ms_pred err_% inside_MB across_MB"
two_levels 05_pipeline/two_levels.sh "1gbit 200mbit" 200mbit

stage_end "make stage-5" "$rounds round of $steps steps, m = ${ms// /,}"
echo
outputs_note "$out"
