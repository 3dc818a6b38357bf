# shellcheck shell=bash
# gpu_check_perf.sh — item 12 of scripts/gpu_check.sh, sourced by it (it uses $B, $OUT,
# gpu_gate and fig): where GPT-2 124M's mixed-bf16 step goes on this GPU, the
# measurement each stage of the fast GPU path is judged by, before and after.
#
#   1. tokens/s and MFU at batch 8 x 1024 and at 32 sequences a step (--grad-accum 4),
#      the FLOP formula as the trainer prints it;
#   2. the step op by op (COURSE_OP_TIMING=1, common/ops_timed.h): ms per step of each
#      op, the device waited for around every op (so the sum exceeds the untimed step;
#      read the shares), and the time outside the ops;
#   3. the ceilings in the same run (scripts/gpu_ceilings.py): torch's bf16 GEMMs at the
#      model's five shapes, and its causal attention where torch has one;
#   4. --attention flash (ops_cuda_flash.cu, the first correct version): a small model's
#      10 fp32 steps on the GPU against the same on the CPU (1e-5), and GPT-2 124M's
#      tokens/s, MFU and activation peak with it at batch 8.

# The op table of a COURSE_OP_TIMING log: "op ms/step share" lines, largest first.
op_table() {  # op_table LOG STEPS
    awk -v steps="$2" '/^OPTIME/ {
            split($2, o, "="); split($3, c, "="); split($4, m, "=")
            name[++n] = o[2]; calls[n] = c[2]; ms[n] = m[2]; total += m[2]
        }
        END {
            for (i = 1; i <= n; i++)
                printf "%-28s %8.1f calls/step %9.3f ms/step %5.1f %%\n", name[i], calls[i] / steps,
                       ms[i] / steps, (total > 0 ? 100 * ms[i] / total : 0)
            printf "%-28s %8s            %9.3f ms/step\n", "(all ops)", "", total / steps
        }' "$1"
}

item_12() {
    gpu_gate
    local dir=$OUT/12.perf py=python3
    mkdir -p "$dir"
    [ -x .venv/bin/python3 ] && .venv/bin/python3 -c 'import torch' 2>/dev/null && py=.venv/bin/python3
    local model=(--preset gpt2-124m --device cuda --precision mixed-bf16 --batch 8 --log-every 1)
    echo "## 1. train gpt2-124m mixed-bf16: batch 8, then 32 sequences a step (accumulation 4)"
    timeout -k 5 100 "$B/train" "${model[@]}" --steps 10 --warmup 3 >"$dir/b8.log" 2>&1
    local rc8=$?
    timeout -k 5 120 "$B/train" "${model[@]}" --grad-accum 4 --steps 5 --warmup 2 >"$dir/b32.log" 2>&1
    local rc32=$?
    cat "$dir/b8.log" "$dir/b32.log"
    local m8 m32 ms8
    m8=$(sed -n 's/^RESULT.* mfu=\([0-9.]*\).*/\1/p' "$dir/b8.log")
    m32=$(sed -n 's/^RESULT.* mfu=\([0-9.]*\).*/\1/p' "$dir/b32.log")
    ms8=$(sed -n 's/^RESULT.* ms_per_step=\([0-9.]*\).*/\1/p' "$dir/b8.log")

    echo "## 2. the same, op by op (COURSE_OP_TIMING=1), 5 steps, the first included"
    COURSE_OP_TIMING=1 timeout -k 5 100 "$B/train" "${model[@]}" --steps 5 --warmup 1 \
        >"$dir/ops.log" 2>&1
    local rco=$?
    grep -E '^(model|precision|MFU|op timing)' "$dir/ops.log"
    op_table "$dir/ops.log" 5 | tee "$dir/ops_table.txt"
    local top
    top=$(head -n 3 "$dir/ops_table.txt" | awk '{printf "%s%s %.1f ms", sep, $1, $4; sep = ", "}')

    echo "## 3. ceilings: torch on this GPU ($py)"
    timeout -k 5 90 "$py" scripts/gpu_ceilings.py >"$dir/ceilings.log" 2>&1
    cat "$dir/ceilings.log"
    local gemm sdpa
    gemm=$(sed -n 's/^# the five GEMMs together: \(.*\)/\1/p' "$dir/ceilings.log")
    sdpa=$(sed -n 's/^CEILING name=sdpa_causal_fwd_bwd .*tflops=\([0-9.]*\).*/\1/p' "$dir/ceilings.log")

    echo "## 4. --attention flash: cuda = cpu on a small model, then gpt2-124m at batch 8"
    local small=(--layers 2 --width 128 --heads 2 --seq 160 --vocab 97 --batch 2 --steps 10
                 --lr 1e-3 --log-every 100 --warmup 0 --peak-tflops 1 --attention flash)
    "$B/train" "${small[@]}" --save-params "$dir/flash_cpu.safetensors" >"$dir/flash_cpu.log" 2>&1
    timeout -k 5 60 "$B/train" "${small[@]}" --device cuda --save-params "$dir/flash_cuda.safetensors" \
        >"$dir/flash_cuda.log" 2>&1
    local eq
    eq=$("$B/tests/compare_params" "$dir/flash_cuda.safetensors" "$dir/flash_cpu.safetensors" 1e-5 \
         flash.cuda_equals_cpu 2>&1 | tee -a "$dir/flash_cuda.log")
    echo "$eq"
    timeout -k 5 100 "$B/train" "${model[@]}" --attention flash --steps 10 --warmup 3 \
        >"$dir/b8_flash.log" 2>&1
    local rcf=$? mf msf
    cat "$dir/b8_flash.log"
    mf=$(sed -n 's/^RESULT.* mfu=\([0-9.]*\).*/\1/p' "$dir/b8_flash.log")
    msf=$(sed -n 's/^RESULT.* ms_per_step=\([0-9.]*\).*/\1/p' "$dir/b8_flash.log")

    fig "gpt2-124m mixed-bf16 MFU ${m8:-?} at B8 (${ms8:-?} ms/step), ${m32:-?} at 32 seq/step;" \
        "flash ${mf:-?} (${msf:-?} ms/step; ${eq:0:4} cuda=cpu); top ops: ${top:-?};" \
        "torch bf16 GEMMs ${gemm:-?}, SDPA fwd+bwd ${sdpa:-?} TFLOP/s"
    [ "$rc8" -eq 0 ] && [ "$rc32" -eq 0 ] && [ "$rco" -eq 0 ] && [ -n "$m8" ] && [ "$rcf" -eq 0 ] &&
        [ "${eq:0:4}" = PASS ]
}
