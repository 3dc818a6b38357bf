#!/usr/bin/env bash
# run_stage.sh — stage 04's demo, benchmark sweep, predictions and plots (`make stage-4`
# runs the tests first, then this). Everything runs build/tp_train on this machine's
# CPU: forked ranks over shared memory, small preset, batch 4 per data-parallel rank.
# Outputs into $RESULTS/04_tensor_parallel/ (RESULTS=runs by default: yours, untracked;
# results/ holds the course's own run, which the lesson quotes: `make stage-4
# RESULTS=results` rewrites it).
#
#   1. Demo: TP = 2 with sequence parallelism trains the small GPT (demo_tp2_sp.log).
#   2. TP sweep: t = 1, 2, 4, without and with SP: step time, tokens/s, the share of
#      the step in TP collectives, the bytes each rank sends beside the formula, and
#      the peak memory per rank (tp_sweep.txt; the bytes term by term: tp_bytes.txt).
#   3. The target: TP = 2 on 2 ranks >= 1.6x the tokens/s of TP = 1 on one (target.txt).
#   4. Memory per rank against t: the ledger beside the stage-01 calculator (memory.txt).
#   5. Step time against t from the alpha-beta model: this CPU, with stage 02's fit,
#      beside the measurement (prediction_cpu.txt); a GPT-3-sized layer over NVLink and
#      over InfiniBand (prediction_links.txt): why TP stays inside a node.
#   6. Context parallelism's balance: ring attention's (query, key) pairs and the CPU
#      time of each rank's blocks, contiguous against zigzag, cp = 2 and 4, a sequence
#      of 4096 (build/bench_cp; cp_balance_np{2,4}.txt); and the GPT on one sequence of
#      2048 tokens: one rank against cp = 2 (ring zigzag and contiguous, Ulysses), step
#      time and each rank's memory (cp_train.txt); each rank's memory against the
#      sequence at cp = 1, 2, 4 beside the calculator, and the longest sequence that
#      trains under --device-mem 160 MB at each (cp_memory.txt, cp_fits.txt).
#   7. Where the machine can make a cluster (root, network namespaces): the ring's
#      overlap, cp = 2 on a sequence of 4096 with and without it, on one node and across
#      a 200 Mbit/s link (cp_overlap.sh: cp_overlap.txt, timelines/cp_*, cp_overlap.png);
#      TP, DP and CP on one node and across two (two_levels.sh: two_levels.txt).
#   8. gnuplot (scripts/plot.sh): every figure labelled with the machine and the date.
#
# Timings on a shared VM are noisy: the sweep is several rounds, every round runs every
# configuration once (in an order that rotates from round to round), and reports the
# median over the rounds of each run's median ms/step; min and max show the spread.
# QUICK=1 shortens everything (fewer rounds and steps) for a smoke run.
set -eu
cd "$(dirname "$0")/.."
. scripts/stage_lib.sh
stage_begin 04_tensor_parallel '*.txt' '*.log' '*.png'

# The small preset (as common/ and memcalc define it); N tokens per micro-batch.
L=4 C=256 NH=4 T=128 V=256 B=4
N=$((B * T))
rounds=5 steps=12 warmup=2 demo_steps=30
if quick; then rounds=2 steps=6 demo_steps=6; fi
configs=(tp1 tp2 tp4 tp2-sp tp4-sp)  # the tables' order: one series after the other

# train LOG ARGS...: one run of tp_train, its whole output in LOG (run: a failed run
# stops the script). (--peak-tflops 1: no 0.3 s sgemm measurement for an MFU nobody
# reads here.)
train() {
    local log=$1; shift
    run "$log" tp_train "$@" --preset small --batch "$B" --peak-tflops 1 --log-every 1000000
}
tsize() { local t=${1#tp}; echo "${t%-sp}"; }                     # tsize NAME -> t
is_sp() { case $1 in *-sp) echo 1 ;; *) echo 0 ;; esac; }         # is_sp NAME -> 0/1
args_of() { echo "--np $(tsize "$1") --tp $(tsize "$1")$([ "$(is_sp "$1")" = 1 ] && echo " --sp")"; }
# ranks LOG: "share sent_mean sent_min sent_max peak": the mean TPCOMM share over the
# ranks, their BYTES (mean, min, max), and the largest sum of a rank's MEM categories.
ranks() {
    awk '/^TPCOMM / {for (i = 2; i <= NF; i++) if ($i ~ /^share=/) {v = substr($i, 7); sub(/%$/, "", v); s += v; ns++}}
         /^BYTES / {split($3, kv, "="); b = kv[2] + 0; sum += b; nb++; if (nb == 1 || b < lo) lo = b; if (b > hi) hi = b}
         /^MEM / {m = 0; for (i = 3; i <= NF; i++) {split($i, kv, "="); m += kv[2]}; if (m > pk) pk = m}
         END {printf "%.2f %.1f %.0f %.0f %.0f\n", ns ? s / ns : 0, nb ? sum / nb : 0, lo, hi, pk}' "$1"
}
# colls T SP: the collectives of one step, "term op bytes count" (op: ar all-reduce, ag
# all-gather, rs reduce-scatter; bytes: the whole buffer), from tp_model.c, conjugate.c,
# linear.c, vocab_embed.c and vocab_ce.c. act: the (N, C) activations of f and g
# (without SP 2 all-reduces per layer forward and 2 backward, + the embedding's g and the
# LM head's f; with SP each splits in two, and backward gathers each column-parallel
# input again); ce: the loss's row maxima (all-gather of t x N) and sums (all-reduce of
# 2N); ln: SP's LayerNorm gradients (2L+1 all-reduces of weight + bias); norm: the
# gradient norm's all-reduce of one double.
colls() {
    [ "$1" -gt 1 ] || return 0
    if [ "$2" = 1 ]; then
        echo "act ag $((N * C * 4)) $((6 * L + 3))"; echo "act rs $((N * C * 4)) $((4 * L + 2))"
        echo "ln ar $((2 * C * 4)) $((2 * L + 1))"
    else
        echo "act ar $((N * C * 4)) $((4 * L + 2))"
    fi
    echo "ce ag $(($1 * N * 4)) 1"; echo "ce ar $((2 * N * 4)) 1"; echo "norm ar 8 1"
}
# bytes_terms T SP: "act ce ln norm total": bytes a rank sends per step, ring (mean over
# the ranks): an all-reduce 2(t-1)/t of its buffer, an all-gather or reduce-scatter (t-1)/t.
bytes_terms() {
    colls "$1" "$2" | awk -v t="$1" '{f = ($2 == "ar" ? 2 : 1) * (t - 1) / t; b[$1] += $4 * f * $3}
        END {printf "%.1f %.1f %.1f %.1f %.1f\n", b["act"], b["ce"], b["ln"], b["norm"],
                    b["act"] + b["ce"] + b["ln"] + b["norm"]}'
}

# ---------------------------------------------------------------- 1. demo
echo "== demo: TP = 2 with sequence parallelism, 2 ranks, small preset, CPU =="
demo "$out/demo_tp2_sp.log" tp_train --np 2 --tp 2 --sp --preset small --batch "$B" --steps "$demo_steps" \
    --lr 1e-3 --log-every 5 --peak-tflops 1

# ---------------------------------------------------------------- 2. sweep
echo "== TP sweep: t = 1, 2, 4, without and with SP (small preset, batch $B, $cores cores) =="
raw=$out/tp_sweep_runs.txt
echo "# config round ms_per_step tokens_per_s tp_comm_share_pct sent_mean_B sent_min_B sent_max_B peak_B: every run of the TP sweep" >"$raw"
n=${#configs[@]}
for ((r = 1; r <= rounds; r++)); do
    printf '  round %d/%d:' "$r" "$rounds"
    for k in $(rotation $((r - 1)) "$n"); do
        name=${configs[$k]}
        log=$tmp/$name.log  # the last round's log stays: its MEM lines feed memory.txt
        # shellcheck disable=SC2046  # args: flags split on purpose
        train "$log" $(args_of "$name") --steps "$steps" --warmup "$warmup"
        echo "$name $r $(kv "$log" ms_per_step) $(kv "$log" tokens_per_s) $(ranks "$log")" >>"$raw"
        printf ' %s' "$name"
    done
    echo
done
# summary NAME: "runs ms_med ms_min ms_max tok_med tok_min tok_max share_med sent_mean
# sent_min sent_max peak" over the rounds (bytes and memory: the same every round).
summary() {
    awk -v x="$1" "$awk_med"'
        !/^#/ && $1 == x { k++; ms[k] = $3; tk[k] = $4; sh[k] = $5; rest = $6 " " $7 " " $8 " " $9
            if (k == 1 || $3 < mlo) mlo = $3; if ($3 > mhi) mhi = $3
            if (k == 1 || $4 < tlo) tlo = $4; if ($4 > thi) thi = $4 }
        END { a = med(ms, k); b = med(tk, k); c = med(sh, k); print k, a, mlo, mhi, b, tlo, thi, c, rest }' "$raw"
}
{
    echo "# TP over t ranks (--np t --tp t, no data parallelism), small preset (L=$L C=$C heads=$NH T=$T V=$V),"
    echo "# batch $B: N = $N tokens per step. $rounds rounds, interleaved; per run $steps steps, the median after $warmup"
    echo "# warm-up; the table: the median over the rounds (min, max: the spread of the rounds)."
    if [ "$cores" -lt 4 ]; then echo "# t = 4 runs 4 ranks on this machine's $cores cores: OVERSUBSCRIBED, the ranks take turns on the cores."; fi
    echo "# comm_%: the share of the step in TP collectives (TPCOMM: the last step against the median step; the"
    echo "# mean over the ranks, the median over the rounds). sent_B: bytes each rank sent in the last step (BYTES, the"
    echo "# mean over the ranks); formula_B: the ring's bytes for one micro-batch (tp_bytes.txt, term by term)."
    echo "# peak_MB: the sum of the ledger's peaks over its categories (MEM), the largest rank (MB = 1e6 bytes)."
    printf '%-8s %2s %2s %9s %8s %8s %9s %8s %8s %7s %11s %11s %7s %8s\n' "#config" "t" "sp" "ms/step" "ms_min" \
        "ms_max" "tokens/s" "tok_min" "tok_max" "comm_%" "sent_B" "formula_B" "bytes" "peak_MB"
    for name in "${configs[@]}"; do
        read -r _ ms mlo mhi tok tlo thi sh sent _ _ peak < <(summary "$name")
        f=$(bytes_terms "$(tsize "$name")" "$(is_sp "$name")" | awk '{print $5}')
        printf '%-8s %2d %2d %9.1f %8.1f %8.1f %9.0f %8.0f %8.0f %7.1f %11.0f %11.0f %7s %8.2f\n' "$name" \
            "$(tsize "$name")" "$(is_sp "$name")" "$ms" "$mlo" "$mhi" "$tok" "$tlo" "$thi" "$sh" "$sent" "$f" \
            "$(awk -v a="$sent" -v b="$f" 'BEGIN {print a == b ? "equal" : "DIFFERS"}')" \
            "$(awk -v p="$peak" 'BEGIN {print p / 1e6}')"
    done
} | tee "$out/tp_sweep.txt"
{
    echo "# Bytes each rank sends per step against the formula, term by term (ring, one micro-batch of N = $N"
    echo "# tokens, C = $C, L = $L, t ranks; an all-reduce sends 2(t-1)/t of its buffer, an all-gather or"
    echo "# reduce-scatter (t-1)/t; 4 bytes a float):"
    echo "#   act  (the f and g of every layer, the embedding, the LM head): no SP 4(t-1)/t x 2(4L+2)NC;"
    echo "#        SP 4(t-1)/t x (10L+5)NC: (6L+3) all-gathers, backward gathers each column-parallel input"
    echo "#        again, and (4L+2) reduce-scatters"
    echo "#   ce   (the vocabulary-parallel loss): 4(t-1)/t x (2 x 2N + tN): sums of 2N, row maxima of tN gathered"
    echo "#   ln   (SP only: the LayerNorm gradients, summed over the group): 4 x 2(t-1)/t x (2L+1) x 2C"
    echo "#   norm (the gradient norm's all-reduce of one double, count 1): 8 x 2(t-1)/t on average: the ring"
    echo "#        cuts 1 element into t shards of which one holds it, so each rank sends it 0, 1 or 2 times"
    echo "#        (t = 2: 8 bytes each; t = 4: 16, 16, 8, 8): the mean over the ranks matches, single ranks do not."
    echo "# measured: BYTES, the mean over the ranks (min, max); diff = mean - formula."
    printf '%-8s %2s %11s %11s %11s %11s %9s %8s %6s %11s %8s\n' "#config" "t" "mean_B" "min_B" "max_B" "act_B" \
        "ce_B" "ln_B" "norm_B" "formula_B" "diff_B"
    for name in "${configs[@]}"; do
        read -r _ _ _ _ _ _ _ _ sent lo hi _ < <(summary "$name")
        read -r a c l o f < <(bytes_terms "$(tsize "$name")" "$(is_sp "$name")")
        printf '%-8s %2d %11.1f %11.0f %11.0f %11.0f %9.0f %8.0f %6.0f %11.1f %+8.1f\n' "$name" "$(tsize "$name")" \
            "$sent" "$lo" "$hi" "$a" "$c" "$l" "$o" "$f" "$(awk -v a="$sent" -v b="$f" 'BEGIN {print a - b}')"
    done
} | tee "$out/tp_bytes.txt"

# ---------------------------------------------------------------- 3. target
echo "== target: TP = 2 on 2 ranks >= 1.6x the tokens/s of TP = 1 on one rank =="
{
    echo "# Target (a benchmark, not a test): TP = 2 on 2 ranks gives at least 1.6x the tokens/s of TP = 1 on one"
    echo "# rank, small preset, batch $B. ratio: tp2 (or tp2-sp) tokens/s / tp1's, within each round (per_round, in"
    echo "# round order); median: over the rounds, the verdict's; rounds_met: rounds whose ratio met it. tp2-sp: no target."
    printf '%-8s %9s %9s %7s %7s %7s %7s %8s %10s  %s\n' "#config" "tok/s" "tp1_tok/s" "median" "min" "max" \
        "target" "verdict" "rounds_met" "per_round"
    for name in tp2 tp2-sp; do
        awk -v x="$name" -v target="$([ "$name" = tp2 ] && echo 1.6 || echo -)" "$awk_med"'
            !/^#/ && $1 == x {a[$2] = $4} !/^#/ && $1 == "tp1" {b[$2] = $4}
            END {
                for (r = 1; r in a && r in b; r++) {
                    q[r] = a[r] / b[r]; ta[r] = a[r]; tb[r] = b[r]; s = s (r > 1 ? "," : "") sprintf("%.3f", q[r])
                    if (r == 1 || q[r] < lo) lo = q[r]; if (q[r] > hi) hi = q[r]; met += (q[r] >= target) }
                n = r - 1; m = med(q, n)
                none = target == "-"; ok = m >= target
                printf "%-8s %9.0f %9.0f %7.3f %7.3f %7.3f %7s %8s %10s  %s\n", x, med(ta, n), med(tb, n), m, lo, hi,
                       (none ? "-" : ">=" target), (none ? "-" : ok ? "met" : "MISSED"), (none ? "-" : met "/" n), s }' "$raw"
    done
} | tee "$out/target.txt"

# ---------------------------------------------------------------- 4. memory
echo "== memory per rank vs t: the ledger beside build/memcalc =="
calc() {  # calc T SP KEY: memcalc's per-rank bytes
    # shellcheck disable=SC2046
    memcalc_value "$3" --preset small --recipe course --micro-batch "$B" --tp "$1" $([ "$2" = 1 ] && echo --sp)
}
{
    echo "# Memory per rank against t, small preset, batch $B (bytes): the ledger's peaks, the largest rank (MEM lines"
    echo "# of the sweep's runs), beside build/memcalc --preset small --recipe course --micro-batch $B --tp t [--sp]."
    echo "# states = params + grads + optimizer (fp32 with AdamW: 16 bytes per parameter a rank holds);"
    echo "# total = activations + workspace + states + comm (the comm pool: 0 here, the collectives work in place)."
    echo "# match: every category equal (total: memcalc's bytes_total)."
    printf '%-8s %2s %2s %10s %10s %9s %9s %10s %10s %10s %10s %6s\n' "#config" "t" "sp" "act_B" "act_calc" "work_B" \
        "work_calc" "states_B" "states_calc" "total_B" "total_calc" "match"
    for name in "${configs[@]}"; do
        t=$(tsize "$name") sp=$(is_sp "$name") log=$tmp/$name.log
        act=$(mem "$log" activations) work=$(mem "$log" workspace) comm=$(mem "$log" comm)
        st=$(( $(mem "$log" params) + $(mem "$log" grads) + $(mem "$log" optimizer) ))
        cst=$(( $(calc "$t" "$sp" bytes_params) + $(calc "$t" "$sp" bytes_grads) + $(calc "$t" "$sp" bytes_optimizer) ))
        cact=$(calc "$t" "$sp" bytes_activations) cwork=$(calc "$t" "$sp" bytes_workspace)
        tot=$((act + work + st + comm)) ctot=$(calc "$t" "$sp" bytes_total)
        match=equal
        [ "$act $work $st $tot" = "$cact $cwork $cst $ctot" ] || match=DIFFERS
        printf '%-8s %2d %2d %10d %10d %9d %9d %10d %10d %10d %10d %6s\n' "$name" "$t" "$sp" "$act" "$cact" "$work" \
            "$cwork" "$st" "$cst" "$tot" "$ctot" "$match"
    done
} | tee "$out/memory.txt"

# ---------------------------------------------------------------- 5. predictions
echo "== predicted step time vs t: the alpha-beta model =="
# ab T: "alpha_us beta_cache_ns beta_mem_ns source" for np = T from stage 02's fit
# (alpha_beta): source yours or course; "nan nan nan none" where neither has np = T.
ab() {
    local a c m f
    read -r a c m f < <(alpha_beta "$1") || { echo "nan nan nan none"; return; }
    echo "$a $c $m $([ "$f" -ef results/02_ddp_allreduce/alpha_beta.txt ] && echo course || echo yours)"
}
t1_ms=$(summary tp1 | awk '{print $2}')
{
    echo "# Predicted step time on this CPU ($cores cores): T(t) = T_compute(1) / min(t, cores) + comm(t), T_compute(1) the"
    echo "# measured TP = 1 median ($t1_ms ms), beside the measured median (tp_sweep.txt). comm(t): every collective of the"
    echo "# step (tp_bytes.txt), ring: all-reduce 2(t-1) alpha + 2(t-1)/t n beta, all-gather and reduce-scatter"
    echo "# (t-1) alpha + (t-1)/t n beta; n the whole buffer (here all < 2 MiB: beta in cache; from memory above)."
    echo "# alpha (us) and beta (ns/B): stage 02's ring fit for np = t; fit: yours = $RESULTS/02_ddp_allreduce/alpha_beta.txt,"
    echo "# course = results/02_ddp_allreduce/alpha_beta.txt (used where yours is missing or lacks np = t). No"
    echo "# overlap: TP's collectives sit between the matmuls that need their results."
    printf '%-8s %2s %2s %5s %10s %8s %12s %11s %9s %7s %8s %6s\n' "#config" "t" "sp" "cores" "compute_ms" "comm_ms" \
        "predicted_ms" "measured_ms" "meas/pred" "alpha" "beta" "fit"
    for name in "${configs[@]}"; do
        t=$(tsize "$name") sp=$(is_sp "$name")
        read -r al bc bm src < <(if [ "$t" -gt 1 ]; then ab "$t"; else echo "0 0 nan -"; fi)
        comm=$(colls "$t" "$sp" | awk -v t="$t" -v al="$al" -v bc="$bc" -v bm="$bm" '{
                k = $2 == "ar" ? 2 : 1; beta = ($3 >= 2097152 && bm != "nan") ? bm : bc
                us += $4 * (k * (t - 1) * al + k * (t - 1) / t * $3 * beta / 1000)} END {printf "%.3f\n", us / 1000}')
        awk -v n="$name" -v t="$t" -v sp="$sp" -v c="$cores" -v t1="$t1_ms" -v cm="$comm" -v al="$al" -v bc="$bc" \
            -v src="$src" -v ms="$(summary "$name" | awk '{print $2}')" 'BEGIN {
                k = t < c ? t : c; comp = t1 / k; p = comp + cm
                printf "%-8s %2d %2d %5d %10.2f %8.3f %12.2f %11.2f %9.3f %7s %8s %6s\n", n, t, sp, k, comp, cm, p, ms,
                       ms / p, (t > 1 ? al : "-"), (t > 1 ? bc : "-"), src }'
    done
} | tee "$out/prediction_cpu.txt"
{
    echo "# Predicted: one GPT-3-175B-sized layer (h = 12288, a = 96 heads, s = 2048, b = 1, bf16 activations: 2 bytes),"
    echo "# forward + backward of one micro-batch, split over t GPUs. ASSUMED, not measured (docs/formulas.md §7, §11):"
    echo "#   compute = 72 b s h^2 (1 + s/(6h)) FLOPs / t at 400 TFLOP/s sustained bf16 per GPU (an H100 SXM's dense"
    echo "#             peak is 989.4; 400 is ~40 % MFU), no recomputation;"
    echo "#   comm    = 4 ring all-reduces of b s h x 2 bytes = 50.3 MB (2 forward, 2 backward; Megatron, no SP),"
    echo "#             each 2(t-1) alpha + 2(t-1)/t n / bandwidth, none of it overlapped with compute;"
    echo "#   nvlink: an H100 node, NVLink 4: 450 GB/s each way, alpha 2 us (an HGX node has 8 GPUs: t > 8 over"
    echo "#           NVLink is hypothetical, a larger NVLink domain);"
    echo "#   ib:     across nodes, InfiniBand NDR 400 Gb/s = 50 GB/s each way per GPU, alpha 5 us."
    echo "# speedup = step(1) / step(t); efficiency = speedup / t; comm_% = comm / step. heads/t: TP splits whole"
    echo "# heads, so t must divide a = 96: t = 64 does not (1.5 heads each), that row is arithmetic only."
    printf '%-7s %3s %11s %9s %9s %8s %10s %7s %8s\n' "#link" "t" "compute_ms" "comm_ms" "step_ms" "speedup" \
        "efficiency" "comm_%" "heads/t"
    awk 'BEGIN {
        h = 12288; a = 96; s = 2048; b = 1; rate = 400e12
        F = 72 * b * s * h * h * (1 + s / (6 * h)); n = b * s * h * 2
        split("nvlink ib", name, " "); split("450e9 50e9", bw, " "); split("2e-6 5e-6", al, " ")
        for (i = 1; i <= 2; i++)
            for (t = 1; t <= 64; t *= 2) {
                comp = F / t / rate; comm = t > 1 ? 4 * (2 * (t - 1) * al[i] + 2 * (t - 1) / t * n / bw[i]) : 0
                if (t == 1) base = comp + comm
                step = comp + comm
                printf "%-7s %3d %11.3f %9.3f %9.3f %8.2f %10.3f %7.1f %8.4g\n", name[i], t, comp * 1e3, comm * 1e3,
                       step * 1e3, base / step, base / step / t, 100 * comm / step, a / t } }'
} | tee "$out/prediction_links.txt"

echo "== context parallelism: ring attention's work per rank, contiguous vs zigzag =="
cp_seq=4096; quick && cp_seq=1024
for n in 2 4; do
    load=$(load_now)
    "$BUILD/bench_cp" --np "$n" --seq "$cp_seq" --repeat 5 --out "$out/cp_balance_np$n.txt" |
        grep '^# [cz]' | sed "s/^# /   cp = $n, /"
    echo "# measured on $(machine_desc), $(date -u +%Y-%m-%d); load $load at the start, $(load_now) at the end" \
        >>"$out/cp_balance_np$n.txt"
done
cp_seq=2048 cp_steps=8; quick && cp_seq=512 cp_steps=4
{
    echo "# the small preset on one sequence of $cp_seq tokens a step (batch 1), $cp_steps steps, the"
    echo "# median ms of the steps after 2; activations and comm: rank 0's ledger peaks, bytes;"
    echo "# measured on $(machine_desc), $(date -u +%Y-%m-%d); load $(load_now) at the start"
    echo "# layout ms_per_step tokens_per_s activations comm"
} >"$out/cp_train.txt"
for cfg in "cp1 1 ring zigzag" "cp2-ring-zigzag 2 ring zigzag" "cp2-ring-contiguous 2 ring contiguous" \
           "cp2-ulysses 2 ulysses zigzag"; do
    read -r name n att lay <<<"$cfg"
    run "$tmp/$name.log" cp_train --np "$n" --cp "$n" --cp-attention "$att" --cp-layout "$lay" \
        --preset small --seq "$cp_seq" --batch 1 --steps "$cp_steps" --warmup 2 --peak-tflops 1 \
        --log-every 1000000
    awk -v L="$name" -v ms="$(kv "$tmp/$name.log" ms_per_step)" -v tps="$(kv "$tmp/$name.log" tokens_per_s)" \
        '/^MEM rank=0 / {for (i = 3; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]}}
         END {printf "%s %.1f %.1f %d %d\n", L, ms, tps, v["activations"], v["comm"]}' "$tmp/$name.log" |
        tee -a "$out/cp_train.txt" | sed 's/^/   /'
done
echo "== context parallelism: memory per rank against the sequence, and the longest that fits =="
cp_budget=160000000 cp_seqs=$(seq 512 512 8192)
cp_calc() {  # cp_calc KEY SEQ CP: stage 01's calculator, cp_train's recipe
    memcalc_value "$1" --recipe course --preset small --micro-batch 1 --seq "$2" --cp "$3"
}
{
    echo "# per-rank bytes of cp_train (the small preset, one sequence a step, fp32, AdamW; the ring)"
    echo "# against the sequence at cp = 1, 2, 4, from stage 01's calculator (memcalc --recipe course"
    echo "# --cp): every category, and the activations alone; a block per cp (gnuplot's index 0, 1, 2)"
    echo "# seq cp calc_bytes calc_activations"
    for n in 1 2 4; do
        for seq in $cp_seqs; do echo "$seq $n $(cp_calc bytes_total "$seq" "$n") $(cp_calc bytes_activations "$seq" "$n")"; done
        printf '\n\n'
    done
} >"$out/cp_memory.txt"
{
    echo "# the longest of the sequences above (multiples of 512) whose calculated bytes fit --device-mem"
    echo "# $cp_budget at each cp, trained one step under that budget: measured, the largest rank's ledger"
    echo "# (the sum of its peaks, the MEM line); and the next sequence, 512 longer, under the same"
    echo "# budget: refused (out of memory before the first step) or not"
    echo "# measured on $(machine_desc), $(date -u +%Y-%m-%d)"
    echo "# budget_bytes $cp_budget"
    echo "# cp seq calc_bytes measured_bytes next_seq next_refused"
} >"$out/cp_fits.txt"
for n in 1 2 4; do
    fit=0
    for seq in $cp_seqs; do [ "$(cp_calc bytes_total "$seq" "$n")" -le "$cp_budget" ] && fit=$seq; done
    run "$tmp/fit$n.log" cp_train --np "$n" --cp "$n" --preset small --seq "$fit" --batch 1 --steps 1 \
        --device-mem "$cp_budget" --log-every 1000000
    if "$BUILD/cp_train" --np "$n" --cp "$n" --preset small --seq $((fit + 512)) --batch 1 \
            --steps 1 --device-mem "$cp_budget" >"$tmp/next.log" 2>&1; then
        refused=no
    elif grep -q "out of memory" "$tmp/next.log"; then
        refused=yes
    else
        echo "$(basename "$0"): FAILED, and not for memory: cp_train --cp $n --seq $((fit + 512))" >&2
        tail -n 20 "$tmp/next.log" >&2
        exit 1
    fi
    awk -v n="$n" -v s="$fit" -v c="$(cp_calc bytes_total "$fit" "$n")" -v r="$refused" '
        /^MEM / {t = 0; for (i = 3; i <= NF; i++) {split($i, kv, "="); t += kv[2]}; if (t > m) m = t}
        END {printf "%d %d %d %d %d %s\n", n, s, c, m, s + 512, r}' "$tmp/fit$n.log" |
        tee -a "$out/cp_fits.txt" | sed 's/^/   cp seq calc measured next refused: /'
done
echo "== context parallelism: the ring's overlap, its ranks on one node and on two (scripts/cluster.sh) =="
echo "   where mode ms_per_step wait_ms comm_ms hidden_pct"
two_levels 04_tensor_parallel/cp_overlap.sh "200mbit 4096" "200mbit 2048"  # (rate, then sequence)
echo "== two levels: TP = 2 and DP = 2 with their ranks on one node or on two (scripts/cluster.sh) =="
echo "   config rate ms_one ms_two ms_pred err_% inside_MB across_MB"
two_levels 04_tensor_parallel/two_levels.sh "1gbit 200mbit" 200mbit

stage_end "make stage-4" "$rounds rounds of $steps steps"
echo
outputs_note "$out"
