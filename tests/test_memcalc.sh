#!/usr/bin/env bash
# test_memcalc.sh — stage 01 end to end: build/memcalc's command line (bad input is
# refused naming the flag; --json carries the keys other tools read), a few published
# figures through the command line, and the OOM at step zero of build/train on a
# simulated device, predicted by memcalc.
#
# Check names: cli01.* and oom.* test code that is not an exercise (they pass on the
# starters too and are not scored); bpp., zero., act., measured. belong to the parts
# of 01_memory_wall/exercises/parts.txt and fail on the pristine starters.
set -u
BUILD=${1:-build}
MC="$BUILD/memcalc"
TRAIN="$BUILD/train"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# expect_fail NAME PATTERN ARGS...: memcalc must exit 2 and name PATTERN on stderr.
expect_fail() {
    local name=$1 pattern=$2; shift 2
    "$MC" "$@" >"$dir/out" 2>"$dir/err"
    local rc=$?
    if [ "$rc" -eq 2 ] && grep -qF -- "$pattern" "$dir/err"; then
        echo "PASS cli01.rejects.$name  $(head -n1 "$dir/err")"
    else
        echo "FAIL cli01.rejects.$name  exit $rc (want 2), stderr: $(head -c 300 "$dir/err")"
    fi
}
expect_fail negative_layers      "--layers"   --layers -3
expect_fail negative_batch       "--micro-batch" --micro-batch -1
expect_fail heads_not_dividing   "--heads 5 does not divide --hidden 768" --heads 5
expect_fail tp_not_dividing      "--tp 5 does not divide --heads 12" --tp 5
expect_fail kv_not_dividing      "--kv-heads 5 does not divide --heads 32" --preset llama2-7b --kv-heads 5
expect_fail zero_stage_4         "--zero"     --zero 4
expect_fail unknown_preset       "--preset"   --preset gpt5
expect_fail unknown_recipe       "--recipe"   --recipe fp8
expect_fail pp_exceeds_layers    "--pp 13 exceeds --layers 12" --pp 13
expect_fail course_tp_not_dividing "--tp 3 does not divide --heads 4" --preset small --recipe course --tp 3
expect_fail course_stage_outside_pp "--stage 3 outside --pp 2" --preset small --recipe course --pp 2 --stage 3
expect_fail course_pp_exceeds_layers "--pp 5 exceeds --layers 4" --preset small --recipe course --pp 5
expect_fail stage_without_course "--stage needs --recipe course" --pp 2 --stage 1
expect_fail every_needs_full     "--recompute-every needs --recipe course --recompute full" --preset small --recipe course --recompute selective --recompute-every 2
expect_fail course_pp_sweep      "--sweep seq" --preset small --recipe course --pp 2 --sweep seq
expect_fail course_sp_without_tp "--sp needs --tp > 1" --preset small --recipe course --sp
expect_fail sp_without_tp "--sp needs --tp > 1" --preset gpt3-175b --sp
expect_fail course_sp_uneven_tokens "--tp 3" --preset small --hidden 96 --heads 6 --recipe course --tp 3 --sp
expect_fail course_llama         "--recipe course" --preset llama2-7b --recipe course
expect_fail bad_device_mem       "--device-mem" --device-mem 80XB
expect_fail unknown_flag         "--tpp"      --tpp 2
expect_fail sweep_without_arch   "--sweep"    --params 1e9 --sweep seq
expect_fail fp8_with_tp          "--precision fp8 with --tp" --recipe course --preset small --precision fp8 --tp 2
expect_fail fp8_with_zero3       "--precision fp8 with --zero 3" --recipe course --preset small --precision fp8 --zero 3 --dp 2

"$MC" --help >"$dir/help" 2>&1 && grep -q -- "--zero" "$dir/help" \
    && echo "PASS cli01.help  lists the flags" || echo "FAIL cli01.help"

# json FILE KEY: the number (or word) after "KEY": in memcalc's one-line JSON (top level:
# the nested "fit" object is dropped first).
json() { sed -e 's/"fit": {[^}]*}/"fit": {}/' "$1" | sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" | tr -d '"'; }

"$MC" --preset gpt2-124m --json >"$dir/j" 2>&1
missing=""
for k in params bytes_params bytes_grads bytes_optimizer bytes_activations bytes_total fits; do
    [ -n "$(json "$dir/j" "$k")" ] || missing="$missing $k"
done
[ -z "$missing" ] && echo "PASS cli01.json_keys  $(head -c 160 "$dir/j")..." \
    || echo "FAIL cli01.json_keys  missing:$missing in $(head -c 300 "$dir/j")"

# 70B x 16 B = 1120 GB of model states (exact; no architecture, so no activations).
"$MC" --params 70e9 --recipe mixed-bf16 --json >"$dir/j" 2>&1
t=$(json "$dir/j" bytes_total)
[ "$t" = "1120000000000" ] && [ "$(json "$dir/j" bytes_optimizer)" = "840000000000" ] \
    && echo "PASS bpp.cli_70b_1120GB  bytes_total $t, optimizer $(json "$dir/j" bytes_optimizer)" \
    || echo "FAIL bpp.cli_70b_1120GB  bytes_total '$t' (want 1120000000000)"

# ZeRO Figure 1's last bar: 7.5B, ZeRO-3 over 64 GPUs = 16 x 7.5e9 / 64 = 1.875 GB exactly.
"$MC" --params 7.5e9 --zero 3 --dp 64 --json >"$dir/j" 2>&1
t=$(json "$dir/j" bytes_total)
[ "$t" = "1875000000" ] && echo "PASS zero.cli_figure1_zero3  bytes_total $t" \
    || echo "FAIL zero.cli_figure1_zero3  bytes_total '$t' (want 1875000000)"

# The smallest sharding: 70B of model states (1120 GB) on 80 GB cards. On 16 GPUs plain
# ZeRO-3 gives 70 GB each; on 8 GPUs no sharding brings 1120 GB under 8 x 80 = 640 GB.
"$MC" --params 70e9 --gpus 16 --json >"$dir/j" 2>&1
fit=$(sed -n 's/.*"fit": \({[^}]*}\).*/\1/p' "$dir/j")
[ "$fit" = '{"dp": 16, "tp": 1, "pp": 1, "zero": 3, "bytes_total": 70000000000}' ] \
    && echo "PASS zero.cli_smallest_sharding_16gpus  $fit" \
    || echo "FAIL zero.cli_smallest_sharding_16gpus  '$fit' (want DP 16, ZeRO-3, 70 GB)"
"$MC" --params 70e9 --gpus 8 --json >"$dir/j" 2>&1
fit=$(json "$dir/j" fit)
[ "$fit" = "null" ] && echo "PASS zero.cli_nothing_fits_8gpus  fit null" \
    || echo "FAIL zero.cli_nothing_fits_8gpus  fit '$fit' (want null: 1120 GB > 640 GB)"

# Korthikanti's test vector through the command line: GPT-3, TP 8 + SP + selective
# recompute = sbh x 34/8 = 106,954,752 bytes per layer.
"$MC" --preset gpt3-175b --tp 8 --sp --recompute selective --json >"$dir/j" 2>&1
t=$(json "$dir/j" bytes_act_per_layer)
[ "$t" = "106954752" ] && echo "PASS act.cli_gpt3_tp8_sp_selective  $t B per layer" \
    || echo "FAIL act.cli_gpt3_tp8_sp_selective  '$t' (want 106954752)"

# The course recipe on one of 2 tensor-parallel ranks with SP (stage 04's split), for the
# small preset (L 4, C 256, 4 heads, V 256, T 128) at micro-batch 1: N = 128 tokens, 64 per
# rank where SP splits them. Counted here per rank, in floats unless said:
#   activations  encoded 64C; per layer ln1, res_att, ln2, res_mlp 64C each, 2 x (mean,
#                rstd) 64 each, qkv, atty, fch, fch_gelu 128 x 12C/2, att 2 heads x T^2;
#                lnf 64C + 2 x 64; logits 128 x 256/2; losses 128; row max, sum 2 x 128;
#                then 4 bytes each, + int32 tokens and targets (128 each)
#   workspace    dres, dln 64C each; datty, dqkv, dbig, dbig2 128 x 12C/2; datt 2 x T^2;
#                SP gather and its gradient 2 x 128C; the row maxima of both ranks 2 x 128
#   params       wte 128 x C, wpe 128 x C, per layer (12C^2 + 7C)/2 + 6C, ln_f 2C
"$MC" --preset small --recipe course --tp 2 --sp --json >"$dir/j" 2>&1
want=$(awk 'BEGIN { C = 256; T = 128; N = 128; Nl = 64; L = 4
    layer = 4 * Nl * C + 4 * Nl + N * 12 * C / 2 + 2 * T * T
    printf "%.0f %.0f %.0f", 4 * (Nl * C + L * layer + Nl * C + 2 * Nl + N * 128 + N + 2 * N) + 8 * N,
        4 * (2 * Nl * C + N * 12 * C / 2 + 2 * T * T + 2 * N * C + 2 * N),
        128 * C + T * C + L * ((12 * C * C + 7 * C) / 2 + 6 * C) + 2 * C }')
read -r want_act want_ws want_pp <<<"$want"
got=$(json "$dir/j" bytes_activations)
[ "$got" = "$want_act" ] && [ "$(json "$dir/j" tp)" = 2 ] && [ "$(json "$dir/j" sp)" = true ] \
    && echo "PASS measured.cli_course_tp2_sp  bytes_activations $got per TP rank" \
    || echo "FAIL measured.cli_course_tp2_sp  bytes_activations '$got' (want $want_act), in $(head -c 300 "$dir/j")"
got_ws=$(json "$dir/j" bytes_workspace) got_pp=$(json "$dir/j" params_per_gpu)
[ "$got_ws" = "$want_ws" ] && [ "$got_pp" = "$want_pp" ] \
    && echo "PASS cli01.course_tp2_sp_workspace_params  bytes_workspace $got_ws, params_per_gpu $got_pp per TP rank" \
    || echo "FAIL cli01.course_tp2_sp_workspace_params  bytes_workspace '$got_ws' (want $want_ws), params_per_gpu '$got_pp' (want $want_pp)"

# The course recipe over 2 pipeline stages (stage 05), the second one: the small preset
# at micro-batch 1 (N = T = 128 tokens), 1F1B with m = 0 (= p = 2) micro-batches, so
# min(p - s, m) = 1 in flight on stage 1. Its layers 2 and 3, in floats:
#   activations  the received input NC; per layer 4NC + 4N + 12NC + 4 heads x T^2; the
#                head lnf NC + 2N, logits N x 256, losses N; x 4, + int32 tokens, targets
#   workspace    the same as one process: 14NC + 4T^2 (x 4)
#   params       2 x (12C^2 + 13C) + ln_f 2C + the copy of wte 256 x C (tied LM head)
"$MC" --preset small --recipe course --pp 2 --schedule 1f1b --stage 1 --json >"$dir/j" 2>&1
want=$(awk 'BEGIN { C = 256; T = 128; N = 128
    layer = 4 * N * C + 4 * N + 12 * N * C + 4 * T * T
    printf "%.0f %.0f %.0f", 4 * (N * C + 2 * layer + N * C + 2 * N + N * 256 + N) + 8 * N,
        4 * (14 * N * C + 4 * T * T), 2 * (12 * C * C + 13 * C) + 2 * C + 256 * C }')
read -r want_act want_ws want_pp <<<"$want"
got="$(json "$dir/j" bytes_activations) $(json "$dir/j" bytes_workspace) $(json "$dir/j" params_per_gpu)"
setup="stage $(json "$dir/j" stage), pp $(json "$dir/j" pp), $(json "$dir/j" schedule), m $(json "$dir/j" microbatches), in_flight $(json "$dir/j" in_flight), layers $(json "$dir/j" layers_per_stage)"
[ "$got" = "$want_act $want_ws $want_pp" ] && [ "$setup" = "stage 1, pp 2, 1f1b, m 2, in_flight 1, layers 2" ] \
    && echo "PASS cli01.course_pp2_1f1b_stage1  activations, workspace, params_per_gpu $got; $setup" \
    || echo "FAIL cli01.course_pp2_1f1b_stage1  got '$got' (want $want_act $want_ws $want_pp), '$setup' (want stage 1, pp 2, 1f1b, m 2, in_flight 1, layers 2), in $(head -c 400 "$dir/j")"
"$MC" --preset small --recipe course --pp 2 --stage 1 >"$dir/out" 2>&1
grep -q "stage 1 of 2" "$dir/out" && echo "PASS cli01.course_pp_names_the_stage  $(grep -m1 'stage 1 of 2' "$dir/out")" \
    || echo "FAIL cli01.course_pp_names_the_stage  no 'stage 1 of 2' in: $(head -c 400 "$dir/out")"

# ---------------------------------------------------------------- the OOM at step zero
# The 70B on one 8-GPU node, scaled by 1e-4: 70B -> a 7.02M-parameter GPT, 640 GB -> 64 MB.
# Weights and grads (28 MB each) fit, AdamW's moments do not: the run dies in adamw_init,
# before the first forward pass. memcalc predicts the same category.
OOM_MODEL=(--layers 10 --seq 64 --vocab 256 --heads 4)
"$MC" --preset small --hidden 240 "${OOM_MODEL[@]}" --recipe course --device-mem 64MB --json \
    >"$dir/j" 2>&1
first=$(json "$dir/j" first_oom)
[ "$first" = "optimizer" ] && [ "$(json "$dir/j" bytes_params)" = "28081920" ] \
    && echo "PASS measured.memcalc_predicts_oom_in_optimizer  first_oom $first, params $(json "$dir/j" bytes_params) B" \
    || echo "FAIL measured.memcalc_predicts_oom_in_optimizer  first_oom '$first' (want optimizer), params '$(json "$dir/j" bytes_params)' (want 28081920)"

"$TRAIN" --width 240 "${OOM_MODEL[@]}" --device-mem 64MB --steps 1 >"$dir/out" 2>"$dir/err"
rc=$?
if [ "$rc" -eq 1 ] && grep -q "out of memory on cpu: cannot allocate 28.08 MB for optimizer (held 56.16 MB: params 28.08 MB, grads 28.08 MB; allowed 64.00 MB)" "$dir/err"; then
    echo "PASS oom.fails_in_optimizer_construction  $(head -n1 "$dir/err")"
else
    echo "FAIL oom.fails_in_optimizer_construction  exit $rc, stderr: $(head -c 300 "$dir/err")"
fi
if grep -q "step " "$dir/out" "$dir/err"; then echo "FAIL oom.no_step_ran  a step was printed"
else echo "PASS oom.no_step_ran  no step line before the failure"; fi
# The same model on one card scaled the same way (80 GB -> 8 MB): not even the weights load.
"$TRAIN" --width 240 "${OOM_MODEL[@]}" --device-mem 8MB --steps 1 >"$dir/out" 2>"$dir/err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "cannot allocate 28.08 MB for params" "$dir/err" \
    && echo "PASS oom.one_card_fails_at_weights  $(head -n1 "$dir/err")" \
    || echo "FAIL oom.one_card_fails_at_weights  exit $rc, stderr: $(head -c 300 "$dir/err")"
exit 0
