#!/usr/bin/env bash
# run_stage.sh — stage 06's benchmark and plots (`make stage-6` runs the tests first,
# then this). Everything runs on this machine's CPU, one process unless said.
# Outputs into $RESULTS/06_mixed_precision/ (RESULTS=runs by default: yours,
# untracked; results/ holds the course's own run: `make stage-6 RESULTS=results`).
#
#   1. Loss curves of every recipe on a text corpus the repository ships: its own
#      Markdown, byte-level (curves/*.dat, losses.txt), and the target: mixed-bf16's
#      final loss within 2 % of fp32's (target.txt).
#      The same at lr 1e-4 (losses_lowlr.txt), where pure bf16 stalls.
#   2. The loss-scale trace of the mixed-fp16 run (scale.dat): the scale grows after
#      every --loss-scale-window good steps and halves on each overflow.
#   3. Activation recompute: peak activation memory (the ledger) beside the stage-01
#      calculator, and the step time, per level (recompute.txt); and in mixed-bf16, the
#      layers' activations in 2 bytes beside fp32 slots (storage.txt).
#   4. Gradients in bf16: the error of a bf16 all-reduce against the world size, and
#      the bytes (comm_error.txt); the bytes each sharded strategy sends per step with
#      fp32 and with bf16 on the wire (wire_bytes.txt).
#   5. gnuplot (scripts/plot.sh): every figure labelled with the machine and the date.
#
# Timings on a shared VM are noisy: the recompute levels run in rounds, in an order that
# rotates, and the table gives the median over the rounds. QUICK=1 is a smoke run.
set -eu
cd "$(dirname "$0")/.."
. scripts/stage_lib.sh
stage_begin 06_mixed_precision '*.txt' '*.dat' '*.png' 'curves/*'

steps=300 window=50 rounds=3 rc_steps=8 nps="2 3 4 6 8"
if quick; then steps=20 window=5 rounds=1 rc_steps=3 nps="2 4"; fi
recipes=(fp32 mixed-bf16 mixed-fp16 bf16 bf16-sr fp8)
# The small preset (L=4 C=256 NH=4 T=128 V=256, 3.26M parameters), 4 sequences a step.
MODEL="--preset small --batch 4 --lr 1e-3 --warmup 2 --peak-tflops 0"

# curve LOG: "step loss mean" per step, mean = of the last 20 steps' losses (one step's
# loss is one batch's; the figures draw each step's loss and a median around it: plots.gp)
curve() {
    sed -n 's/^step *\([0-9]*\)\/[0-9]* | loss \([0-9.]*\) .*/\1 \2/p' "$1" |
        awk '{l[NR] = $2; s += $2; if (NR > 20) s -= l[NR - 20]; printf "%s %s %.4f\n", $1, $2, s / (NR < 20 ? NR : 20)}'
}

# ---------------------------------------------------------------- 1-2. loss curves
# The corpus: every Markdown file of the repository, in path order, as bytes.
corpus=$tmp/corpus.txt
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files '*.md' | LC_ALL=C sort | xargs cat >"$corpus"
else
    find . -name '*.md' -not -path './runs/*' | LC_ALL=C sort | xargs cat >"$corpus"
fi
csize=$(wc -c <"$corpus")
csha=$(sha256sum "$corpus" | cut -c1-16)
echo "stage 06: corpus = the repository's Markdown, $csize bytes (sha256 $csha...); $steps steps per recipe"
for r in "${recipes[@]}"; do
    extra=""
    [ "$r" = mixed-fp16 ] && extra="--loss-scale-window $window"
    echo "  loss curve: --precision $r $extra"
    run "$out/curves/$r.log" train $MODEL --steps "$steps" --log-every 1 --data "$corpus" \
        --precision "$r" $extra
    curve "$out/curves/$r.log" >"$out/curves/$r.dat"
done
# The same at lr 1e-4, where an update is below half a bf16 ulp of most weights: pure
# bf16 rounding to nearest loses it, stochastic rounding keeps it on average.
for r in fp32 mixed-bf16 bf16 bf16-sr; do
    echo "  loss curve at lr 1e-4: --precision $r"
    run "$out/curves/lowlr_$r.log" train $MODEL --lr 1e-4 --steps "$steps" --log-every 1 \
        --data "$corpus" --precision "$r"
    curve "$out/curves/lowlr_$r.log" >"$out/curves/lowlr_$r.dat"
done
sed -n 's/^step *\([0-9]*\)\/[0-9]* |.* | scale \([0-9.e+]*\)\(.*\)$/\1 \2 \3/p' \
    "$out/curves/mixed-fp16.log" | awk '{print $1, $2, ($3 == "overflow:" ? 1 : 0)}' >"$out/scale.dat"

# Final loss: the mean of the last 20 steps (one step's loss is one batch's: noisy).
last=$((steps < 20 ? steps : 20))
final() { tail -n "$last" "$out/curves/$1.dat" | awk '{s += $2} END {printf "%.4f", s / NR}'; }
f32=$(final fp32)
{
    printf '# recipe     final_loss  vs_fp32_%%  ms_per_step  tokens_per_s  mfu_%%   (final: mean of the last %d of %d steps; corpus %s B; ms: median after 2 warm-up steps)\n' \
        "$last" "$steps" "$csize"
    for r in "${recipes[@]}"; do
        l=$(final "$r")
        printf '%-12s %10s %+9.2f %12.2f %13.0f %6.1f\n' "$r" "$l" \
            "$(awk -v a="$l" -v b="$f32" 'BEGIN {print 100 * (a - b) / b}')" \
            "$(kv "$out/curves/$r.log" ms_per_step)" "$(kv "$out/curves/$r.log" tokens_per_s)" \
            "$(awk -v m="$(kv "$out/curves/$r.log" mfu)" 'BEGIN {print 100 * m}')"
    done
} >"$out/losses.txt"
{
    printf '# recipe     final_loss  vs_fp32_%%   (lr 1e-4; final: mean of the last %d of %d steps)\n' "$last" "$steps"
    f32l=$(final lowlr_fp32)
    for r in fp32 mixed-bf16 bf16 bf16-sr; do
        l=$(final "lowlr_$r")
        printf '%-12s %10s %+9.2f\n' "$r" "$l" "$(awk -v a="$l" -v b="$f32l" 'BEGIN {print 100 * (a - b) / b}')"
    done
} >"$out/losses_lowlr.txt"
lb=$(final mixed-bf16)
gap=$(awk -v a="$lb" -v b="$f32" 'BEGIN {d = 100 * (a - b) / b; print d < 0 ? -d : d}')
{
    echo "# target                                 measured  goal   result"
    printf 'mixed-bf16 final loss vs fp32 (%%)      %8.2f  <= 2   %s\n' "$gap" \
        "$(awk -v g="$gap" 'BEGIN {print g <= 2 ? "met" : "MISSED"}')"
} >"$out/target.txt"
overflows=$(awk '$3 == 1' "$out/scale.dat" | wc -l)
echo "  loss scale: $(grep -m1 'loss scale:' "$out/curves/mixed-fp16.log" | sed 's/^loss scale: //')"

# ---------------------------------------------------------------- 3. recompute
# 8 sequences of 128 tokens: the attention matrices are a fifth of the activations.
levels=("none" "selective" "full" "full --recompute-every 2")
for ((round = 0; round < rounds; round++)); do
    for k in $(rotation "$round" ${#levels[@]}); do
        lv=${levels[$k]}
        run "$tmp/rc.$k.$round.log" sharded_train --np 1 --strategy ddp --preset small --batch 8 \
            --steps "$rc_steps" --warmup 2 --peak-tflops 0 --log-every 1000 --recompute $lv
    done
done
{
    echo "# level              activations_B  calculator_B  saved_%  ms_per_step  min    max    slower_%   (small preset, batch 8 x 128; ms: median of $rounds rounds)"
    base_ms=""
    for ((k = 0; k < ${#levels[@]}; k++)); do
        lv=${levels[$k]}
        set -- $lv
        every=1; [ $# -gt 1 ] && every=$3
        act=$(sed -n 's/^MEM rank=0 .* activations=\([0-9]*\).*/\1/p' "$tmp/rc.$k.0.log")
        calc=$(memcalc_value bytes_activations --preset small --recipe course --micro-batch 8 --recompute "$1" \
               $([ "$every" != 1 ] && echo "--recompute-every $every"))
        read -r ms mn mx < <(for ((r = 0; r < rounds; r++)); do kv "$tmp/rc.$k.$r.log" ms_per_step; done | spread)
        [ -z "$base_ms" ] && base_ms=$ms && base_act=$act
        printf '%-20s %13s %13s %8.1f %12.1f %6.1f %6.1f %9.1f\n' "${lv/ --recompute-every /-every-}" \
            "$act" "$calc" "$(awk -v a="$act" -v b="$base_act" 'BEGIN {print 100 * (1 - a / b)}')" \
            "$ms" "$mn" "$mx" "$(awk -v a="$ms" -v b="$base_ms" 'BEGIN {print 100 * (a / b - 1)}')"
    done
} >"$out/recompute.txt"

# ---------------------------------------------------------------- 3b. 2-byte activations
# mixed-bf16 keeps each layer's saved tensors in 2 bytes (model_acts.c); --acts-fp32
# keeps the same numbers in fp32 slots. Memory and step time side by side, per level.
stores=("" "--acts-fp32")
slevels=("none" "selective" "full")
for ((round = 0; round < rounds; round++)); do
    for k in $(rotation "$round" 6); do
        run "$tmp/st.$k.$round.log" sharded_train --np 1 --strategy ddp --preset small --batch 8 \
            --steps "$rc_steps" --warmup 2 --peak-tflops 0 --log-every 1000 --precision mixed-bf16 \
            --recompute "${slevels[$((k / 2))]}" ${stores[$((k % 2))]}
    done
done
{
    echo "# level      storage     activations_B  calculator_B  ms_per_step  min    max     (mixed-bf16, small preset, batch 8 x 128; ms: median of $rounds rounds)"
    for ((k = 0; k < 6; k++)); do
        lv=${slevels[$((k / 2))]}
        act=$(sed -n 's/^MEM rank=0 .* activations=\([0-9]*\).*/\1/p' "$tmp/st.$k.0.log")
        calc=-
        [ $((k % 2)) = 0 ] && calc=$(memcalc_value bytes_activations --preset small --recipe course --micro-batch 8 \
            --precision mixed-bf16 --recompute "$lv")
        read -r ms mn mx < <(for ((r = 0; r < rounds; r++)); do kv "$tmp/st.$k.$r.log" ms_per_step; done | spread)
        printf '%-11s %-11s %13s %13s %12.1f %6.1f %6.1f\n' "$lv" \
            "$([ $((k % 2)) = 0 ] && echo 2-byte || echo fp32-slots)" "$act" "$calc" "$ms" "$mn" "$mx"
    done
} >"$out/storage.txt"

# ---------------------------------------------------------------- 4. gradients in bf16
{
    echo "# np  err_fp32    err_bf16    err_ideal   bf16/ideal  bytes_fp32  bytes_bf16   (rank 0's bytes; errors ||got - exact|| / ||exact||, 2^20 elements, std 1e-3, bf16 inputs)"
    for np in $nps; do
        l=$("$BUILD/mp_comm_error" --np "$np" | grep '^COMMERR')
        set -- $(sed -E 's/.*np=([^ ]+) count=[^ ]+ fp32=([^ ]+) bf16=([^ ]+) ideal=([^ ]+) bytes_fp32=([^ ]+) bytes_bf16=([^ ]+)/\1 \2 \3 \4 \5 \6/' <<<"$l")
        printf '%4s  %10s  %10s  %10s  %10.2f  %10s  %10s\n' "$1" "$2" "$3" "$4" \
            "$(awk -v a="$3" -v b="$4" 'BEGIN {print a / b}')" "$5" "$6"
    done
} >"$out/comm_error.txt"
wire_bytes() {  # the BYTES line of rank 0: one step of the small preset on 2 ranks, mixed-bf16
    "$BUILD/sharded_train" --np 2 --strategy "$1" --preset small --batch 1 --steps 1 --lr 1e-3 \
        --warmup 0 --peak-tflops 0 --precision mixed-bf16 --grad-comm "$2" --param-comm "$2" |
        sed -n 's/^BYTES rank=0 sent_per_step=\([0-9]*\).*/\1/p'
}
{
    echo "# strategy  bytes_fp32  bytes_bf16   (rank 0's bytes sent in one step: small preset, 2 ranks, mixed-bf16, --grad-comm/--param-comm fp32 vs auto)"
    for st in ddp zero1 zero2 zero3 fsdp; do
        printf '%-9s %11s %11s\n' "$st" "$(wire_bytes "$st" fp32)" "$(wire_bytes "$st" auto)"
    done
} >"$out/wire_bytes.txt"

# The logs' step lines are in the .dat files: keep each log's head and summary only.
for f in "$out"/curves/*.log; do
    { head -n 4 "$f"; echo "[... one line per step: curves/$(basename "$f" .log).dat ...]"
      sed -n '/^done:/,$p' "$f"; } >"$tmp/log" && mv "$tmp/log" "$f"
done
cat "$out/losses.txt" "$out/losses_lowlr.txt" "$out/target.txt" "$out/recompute.txt" "$out/storage.txt" \
    "$out/comm_error.txt" "$out/wire_bytes.txt"
echo "  $overflows overflow(s) in the mixed-fp16 run"
stage_end "make stage-6${QUICK:+ QUICK=$QUICK}"
