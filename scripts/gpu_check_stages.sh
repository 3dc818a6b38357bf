# shellcheck shell=bash
# gpu_check_stages.sh — items 9 to 11 of scripts/gpu_check.sh (stages 05 to 07 on a
# GPU), sourced by it: they use its $B, $OUT, gpu_gate, fig and rel_err.

# Stage 05 on the GPU. The reference is the same pp_train on the CPU (the same
# schedule, mesh and micro-batches), so only the device differs.
item_9() {
    gpu_gate
    local dir=$OUT/9.pp tol=1e-5 bad=0 worst=0 err
    mkdir -p "$dir"
    local common=(--layers 4 --width 48 --heads 12 --seq 12 --vocab 251 --steps 5 --lr 1e-3
                  --log-every 100 --warmup 0 --batch 2 --grad-accum 4 --peak-tflops 1 --timeout 60)
    for spec in "2 gpipe" "2 1f1b" "2 zb-h1" "2 interleaved --chunks 2" "4 1f1b --zero1" \
                "4 1f1b --tp 2"; do
        read -r n sched more <<<"$spec"
        local tag="np${n}_$sched${more:+_$(echo "$more" | tr -d ' -')}" trace=()
        [ "$tag" = np2_1f1b ] && trace=(--trace "$dir/trace_1f1b")
        # shellcheck disable=SC2086  # more: extra flags, word-split on purpose
        "$B/pp_train" --np "$n" --pp 2 --schedule "$sched" $more "${common[@]}" \
            --save-params "$dir/cpu_$tag.safetensors" >"$dir/cpu_$tag.log" 2>&1
        # shellcheck disable=SC2086
        timeout -k 5 120 "$B/pp_train" --np "$n" --pp 2 --schedule "$sched" $more --device cuda \
            "${common[@]}" "${trace[@]}" --save-params "$dir/cuda_$tag.safetensors" >"$dir/cuda_$tag.log" 2>&1
        local rc=$?
        if [ "$rc" -ne 0 ] || [ ! -s "$dir/cuda_$tag.safetensors" ] || [ ! -s "$dir/cpu_$tag.safetensors" ]; then
            echo "FAIL pp.cuda.$tag  a run failed (cuda exit $rc):"; tail -n 5 "$dir/cuda_$tag.log"
            tail -n 2 "$dir/cpu_$tag.log"; bad=$((bad + 1)); continue
        fi
        grep -m1 'the pipeline group on GPUs' "$dir/cuda_$tag.log" | sed 's/^/# /'
        "$B/tests/compare_params" "$dir/cuda_$tag.safetensors" "$dir/cpu_$tag.safetensors" "$tol" \
            "pp.cuda_equals_cpu.$tag" | tee "$dir/cmp_$tag.txt"
        grep -q '^PASS' "$dir/cmp_$tag.txt" || bad=$((bad + 1))
        err=$(sed -n 's/.*rel_err \([^ ]*\).*/\1/p' "$dir/cmp_$tag.txt")
        worst=$(python3 -c "print(max(float('$worst'), float('${err:-inf}')))")
    done
    # The trace: both ranks' forwards and backwards, in GPU time (one stream per
    # rank runs one action at a time, so a rank's spans never overlap).
    local tr
    tr=$(python3 - "$dir/trace_1f1b.json" <<'PY' 2>&1
import json, sys
try:
    ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e["tid"] == 0]
except Exception as x:
    print(f"FAIL pp.cuda.trace  no trace: {x}"); sys.exit(0)
per = {}
for e in ev:
    per.setdefault(e["pid"], []).append(e)
want = {f"{k}{i}" for k in "FB" for i in range(4)}
ok = sorted(per) == [0, 1] and all(want <= {e["name"] for e in v} for v in per.values())
overlap = 0
for v in per.values():
    v.sort(key=lambda e: e["ts"])
    overlap += sum(b["ts"] < a["ts"] + a["dur"] - 1.0 for a, b in zip(v, v[1:]))
ok = ok and overlap == 0 and all(e["dur"] > 0 for e in ev)
t0 = min(e["ts"] for e in ev) if ev else 0
t1 = max(e["ts"] + e["dur"] for e in ev) if ev else 0
busy = [sum(e["dur"] for e in v) for v in per.values()]
bub = sum((t1 - t0 - b) / b for b in busy) / len(busy) if busy and min(busy) > 0 else float("nan")
print(f"{'PASS' if ok else 'FAIL'} pp.cuda.trace  ranks {sorted(per)}, {len(ev)} GPU-timed spans, "
      f"{overlap} overlapping on a rank; step {(t1 - t0) / 1e3:.3f} ms, bubble {bub:.3f} (1f1b p2 m4)")
PY
)
    echo "$tr"
    case "$tr" in PASS*) ;; *) bad=$((bad + 1)) ;; esac
    fig "worst rel_err $worst (tol $tol) over gpipe, 1f1b, zb-h1, interleaved, +ZeRO-1 dp2, +TP2 at" \
        "p=2 on cuda (CUDA IPC where ranks share a GPU, NCCL where each has its own); $bad failed; trace: ${tr#* pp.cuda.trace  }"
    [ "$bad" -eq 0 ]
}

find_nsys() {
    local c
    for c in "$(command -v nsys)" "$CUDA_HOME/bin/nsys" "$CUDA_HOME"/nsight-systems-*/bin/nsys \
             /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda*/bin/nsys; do
        [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return; }
    done
}

# Stage 06 on the GPU: the bf16 GEMMs against the CPU's emulation, recompute bitwise,
# and what the tensor cores buy (MFU, nsys).
item_10() {
    gpu_gate
    local dir=$OUT/10.mp bad=0 p lvl rc
    mkdir -p "$dir"
    # (a) mixed-bf16 on cuda = on the CPU within 2^-8 (||a - b|| / ||b||, tests/stage06.sh's
    # compose tolerance, for its reason): the GPU sums the same exact products in another
    # order, which moves some bf16 gradients by an ulp, hence some weights by one bf16 ulp
    # (2^-8 to 2^-7 of the value); 2^-8 norm-wise is half an ulp on average. And nearer the
    # CPU's mixed-bf16 run than its fp32 run: a GPU run that lost the recipe would not be.
    local tiny=(--preset tiny --steps 5 --batch 4 --lr 1e-3 --log-every 100 --warmup 0 --peak-tflops 1)
    for p in mixed-bf16 fp32; do
        "$B/train" "${tiny[@]}" --precision "$p" --save-params "$dir/cpu_$p.safetensors" \
            >"$dir/cpu_$p.log" 2>&1
    done
    timeout -k 5 30 "$B/train" "${tiny[@]}" --device cuda --precision mixed-bf16 \
        --save-params "$dir/cuda_mixed-bf16.safetensors" >"$dir/cuda_mixed-bf16.log" 2>&1
    rc=$?
    local e_mp="" e_fp="" verdict
    if [ "$rc" -eq 0 ] && [ -s "$dir/cuda_mixed-bf16.safetensors" ]; then
        e_mp=$(rel_err "$dir/cuda_mixed-bf16.safetensors" "$dir/cpu_mixed-bf16.safetensors")
        e_fp=$(rel_err "$dir/cuda_mixed-bf16.safetensors" "$dir/cpu_fp32.safetensors")
    else
        echo "## the cuda run failed (exit $rc):"; tail -n 5 "$dir/cuda_mixed-bf16.log"
    fi
    echo "#   cpu  $(grep '^RESULT' "$dir/cpu_mixed-bf16.log" | grep -o 'final_loss=[0-9.]*')," \
         "cuda $(grep '^RESULT' "$dir/cuda_mixed-bf16.log" | grep -o 'final_loss=[0-9.]*')"
    if [ -n "$e_mp" ] && [ -n "$e_fp" ] &&
       awk -v a="$e_mp" -v b="$e_fp" 'BEGIN { exit !(a <= 0.00390625 && a < b) }'; then verdict=PASS
    else verdict=FAIL bad=$((bad + 1)); fi
    echo "$verdict mp.cuda_equals_cpu.mixed-bf16  rel_err ${e_mp:-?} to the CPU's mixed-bf16" \
         "(tol 2^-8), ${e_fp:-?} to its fp32"

    # (b) Recompute on cuda: the same calls on the same inputs (cuBLAS without atomics is
    # deterministic), so the same bits.
    local rcres=""
    for p in fp32 mixed-bf16; do
        for lvl in none selective full; do
            timeout -k 5 30 "$B/train" "${tiny[@]}" --device cuda --precision "$p" --recompute "$lvl" \
                --save-params "$dir/rc_${p}_$lvl.safetensors" >"$dir/rc_${p}_$lvl.log" 2>&1 ||
                echo "## --precision $p --recompute $lvl failed: $(tail -n 1 "$dir/rc_${p}_$lvl.log")"
        done
        for lvl in selective full; do
            if [ -s "$dir/rc_${p}_none.safetensors" ] &&
               cmp -s "$dir/rc_${p}_$lvl.safetensors" "$dir/rc_${p}_none.safetensors"; then
                echo "PASS mp.cuda.recompute.$p.$lvl  weights bitwise those of --recompute none"
            else
                echo "FAIL mp.cuda.recompute.$p.$lvl  weights differ from --recompute none (or a run failed)"
                bad=$((bad + 1)) rcres="$rcres $p/$lvl"
            fi
        done
    done

    # (c) MFU of GPT-2 124M, fp32 against mixed-bf16 (both against the trainer's cuda
    # peak, 989.4 TFLOP/s: the H100's dense bf16; its fp32 peak without tensor cores
    # is 66.9). Batch 8 x 1024 tokens, 30 steps, the first 5 left out of the medians.
    local big=(--preset gpt2-124m --batch 8 --steps 30 --warmup 5 --log-every 5 --device cuda)
    declare -A tok mfu
    for p in fp32 mixed-bf16; do
        echo "## build/train --preset gpt2-124m --device cuda --precision $p"
        timeout -k 5 60 "$B/train" "${big[@]}" --precision "$p" >"$dir/gpt2_$p.log" 2>&1
        rc=$?
        grep -E '^(RESULT|step +(5|30)/)' "$dir/gpt2_$p.log"
        [ "$rc" -eq 0 ] || { echo "## exit $rc:"; tail -n 3 "$dir/gpt2_$p.log"; bad=$((bad + 1)); }
        tok[$p]=$(grep '^RESULT' "$dir/gpt2_$p.log" | grep -o 'tokens_per_s=[0-9.]*' | cut -d= -f2)
        mfu[$p]=$(grep '^RESULT' "$dir/gpt2_$p.log" | grep -o 'mfu=[0-9.]*' | cut -d= -f2)
    done
    local speed f32
    speed=$(awk -v a="${tok[mixed-bf16]:-0}" -v b="${tok[fp32]:-0}" \
            'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "?" }')
    f32=$(awk -v m="${mfu[fp32]:-0}" 'BEGIN { printf "%.1f%%", 100 * m * 989.4 / 66.9 }')

    # nsys: where the mixed-bf16 step's time goes (kernels, cuBLAS's bf16 GEMMs).
    local ns nsres
    ns=$(find_nsys)
    if [ "${GPU_CHECK_PROFILE:-1}" = 0 ]; then
        nsres="no profile (GPU_CHECK_PROFILE=0)"
    elif [ -z "$ns" ]; then
        # No nsys: Nsight Compute times every kernel of two steps (one metric, no
        # replay, caches and clocks as they are) and the kernels are summed by name.
        local ncu
        ncu=$(command -v ncu || ls "$CUDA_HOME"/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
        if [ -z "$ncu" ]; then
            nsres="neither nsys nor ncu found: no profile"
        else
            echo "## no nsys; $ncu: $("$ncu" --version 2>&1 | tail -n 1)"
            timeout -k 5 150 "$ncu" --csv --metrics gpu__time_duration.sum --cache-control none \
                --clock-control none --log-file "$dir/ncu_gpt2_mixed-bf16.csv" \
                "$B/train" --preset gpt2-124m --batch 8 --steps 2 --warmup 0 --log-every 1 \
                --device cuda --precision mixed-bf16 >"$dir/ncu_gpt2_mixed-bf16.txt" 2>&1
            rc=$?
            python3 scripts/kernel_summary.py "$dir/ncu_gpt2_mixed-bf16.csv" >"$dir/kernels.txt" 2>&1
            head -n 25 "$dir/kernels.txt" | cut -c1-200
            nsres="ncu exit $rc: $(sed -n 's/^# top: //p' "$dir/kernels.txt")"
        fi
        echo "## $nsres"
    else
        echo "## $ns: $("$ns" --version 2>&1 | head -n 1)"
        timeout -k 5 70 "$ns" profile --stats=true --force-overwrite=true --trace=cuda,nvtx \
            --sample=none --cpuctxsw=none -o "$dir/nsys_gpt2_mixed-bf16" \
            "$B/train" --preset gpt2-124m --batch 8 --steps 6 --warmup 2 --log-every 1 \
            --device cuda --precision mixed-bf16 >"$dir/nsys_gpt2_mixed-bf16.txt" 2>&1
        rc=$?
        # The kernel summary (gpukernsum in older nsys): its first rows into the log, the
        # top kernel and the share of the bf16 copies into the figure.
        local sum top conv
        sum=$(awk '/cuda_gpu_kern_sum|gpukernsum/ {on = 1} on && /^ *-+ / {rows = 1; next}
                   rows && NF == 0 {exit} rows {print}' "$dir/nsys_gpt2_mixed-bf16.txt")
        echo "$sum" | head -n 12 | cut -c1-220
        top=$(echo "$sum" | awk 'NR == 1 && NF >= 9 {n = $9; for (i = 10; i <= NF; i++) n = n " " $i;
                                  printf "%s%% %s", $1, substr(n, 1, 70)}')
        conv=$(echo "$sum" | awk '/to_bf16_kernel/ {s += $1} END {printf "%.1f%%", s}')
        nsres="nsys exit $rc: top kernel ${top:-?}; bf16 copies $conv of GPU time; $dir/nsys_*.nsys-rep"
    fi
    # (d) fp8 through cuBLASLt (the default: the GEMMs on the fp8 tensor cores;
    # ops_cuda_fp8.cu) against COURSE_FP8_GEMM=fp32, the fp32 GEMM on the same fp8 values.
    # Op by op the two agree within 2^-10 (test_gpu_fp8.c; ~1e-4 measured: Hopper's fp8
    # tensor cores add with fewer bits than fp32 even with FAST_ACCUM off). In training
    # each such difference can move an activation across an e4m3 rounding boundary (a
    # step of 2^-3), so two fp8 runs diverge far more than two bf16 runs: on an H200
    # (2026-11-26, 5 steps of the tiny model) cuBLASLt ended 7.5e-3 and 7.4e-3 from the
    # fp32 GEMMs (seeds 1, 2), and the fp32 GEMMs on the GPU vs on the CPU, which differ
    # only in summation order, already 1.5e-3 at seed 2; fp8 itself moved the weights
    # 1.7e-2 from the fp32 recipe. So the check is relative to that: a correct fp8 GEMM
    # perturbs training less than the fp8 format itself does (measured: 0.44 of it); a
    # wrong scale, layout or transpose lands far outside, and a run that quietly kept the
    # fp32 GEMMs would end bitwise on the default run, which rel_err > 0 refuses. And a
    # second run is bitwise the first (cuBLASLt's fp8 GEMMs are deterministic).
    local e_lt="" e_rec="" lt_tok="" det=no
    for g in fp32 cublaslt cublaslt2; do
        COURSE_FP8_GEMM=${g%2} timeout -k 5 30 "$B/train" "${tiny[@]}" --device cuda --precision fp8 \
            --save-params "$dir/fp8_$g.safetensors" >"$dir/fp8_$g.log" 2>&1 ||
            echo "## fp8 with COURSE_FP8_GEMM=${g%2} failed: $(tail -n 1 "$dir/fp8_$g.log")"
    done
    if [ -s "$dir/fp8_cublaslt.safetensors" ] && [ -s "$dir/fp8_fp32.safetensors" ]; then
        e_lt=$(rel_err "$dir/fp8_cublaslt.safetensors" "$dir/fp8_fp32.safetensors")
        e_rec=$(rel_err "$dir/fp8_fp32.safetensors" "$dir/cpu_fp32.safetensors")
        cmp -s "$dir/fp8_cublaslt.safetensors" "$dir/fp8_cublaslt2.safetensors" && det=yes
    fi
    if [ -n "$e_lt" ] && [ -n "$e_rec" ] && [ "$det" = yes ] &&
       awk -v a="$e_lt" -v r="$e_rec" 'BEGIN { exit !(a > 0 && a < r) }'; then
        echo "PASS mp.cuda.fp8_cublaslt  rel_err $e_lt to the fp32 GEMMs on fp8 values (below" \
             "fp8's own distance from the fp32 recipe, $e_rec); a rerun bitwise"
    else
        echo "FAIL mp.cuda.fp8_cublaslt  rel_err ${e_lt:-?} to the fp32 GEMMs on fp8 values (want > 0 and" \
             "below fp8's distance from the fp32 recipe, ${e_rec:-?}); rerun bitwise: $det"
        bad=$((bad + 1))
    fi
    for g in fp32 cublaslt; do
        COURSE_FP8_GEMM=$g timeout -k 5 60 "$B/train" "${big[@]}" --precision fp8 \
            >"$dir/gpt2_fp8_$g.log" 2>&1 || echo "## gpt2-124m fp8 ($g) failed"
        lt_tok="$lt_tok $g $(grep '^RESULT' "$dir/gpt2_fp8_$g.log" | grep -o 'tokens_per_s=[0-9.]*' | cut -d= -f2) tok/s"
    done
    echo "## gpt2-124m fp8:$lt_tok"
    fig "mixed-bf16 cuda vs cpu rel_err ${e_mp:-?} (tol 2^-8; ${e_fp:-?} to fp32);" \
        "fp8 cublaslt vs fp32 GEMMs rel_err ${e_lt:-?} (fp8 vs fp32 recipe ${e_rec:-?}); gpt2-124m fp8:$lt_tok;" \
        "recompute = none bitwise: ${rcres:+NOT for$rcres}${rcres:-4 of 4}; gpt2-124m B=8, MFU" \
        "of 989.4: fp32 ${tok[fp32]:-?} tok/s MFU ${mfu[fp32]:-?} ($f32 of fp32's 66.9)," \
        "mixed-bf16 ${tok[mixed-bf16]:-?} tok/s MFU ${mfu[mixed-bf16]:-?} ($speed fp32's tok/s); $nsres"
    [ "$bad" -eq 0 ]
}

# Stage 07 on the GPU: checkpoints of device state. A run killed at step 8 and
# resumed ends bitwise where the uninterrupted cuda run ends (one process; DDP,
# ZeRO-3 and a 2-stage pipeline over 2 ranks sharing the GPU; fp8's scales); a
# checkpoint written on the GPU loads on the CPU (the state is plain fp32
# rectangles) and that run ends within 1e-5 of the same run trained on the CPU
# throughout; async save's stall against sync's (the snapshot into pinned memory).
item_11() {
    gpu_gate
    local dir=$OUT/11.ft bad=0 res=""
    rm -rf "$dir" && mkdir -p "$dir"  # a checkpoint left by an earlier run would be resumed
    local m=(--layers 2 --width 64 --heads 4 --seq 32 --vocab 256 --steps 10 --lr 1e-3
             --log-every 100 --warmup 0 --peak-tflops 1)
    for spec in "train --batch 4" "ddp_train --np 2 --batch 2 --timeout 60" \
                "sharded_train --np 2 --strategy zero3 --batch 2 --timeout 60" \
                "pp_train --np 2 --pp 2 --batch 2 --grad-accum 2 --timeout 60" \
                "train --batch 4 --precision fp8"; do
        local tag bin args
        bin=${spec%% *} args=${spec#* } tag=$(echo "$spec" | tr -c 'a-z0-9\n' '_')
        # shellcheck disable=SC2086
        timeout -k 5 90 "$B/$bin" $args "${m[@]}" --device cuda --save-params "$dir/ref_$tag.safetensors" \
            >"$dir/ref_$tag.log" 2>&1
        rm -rf "$dir/ck_$tag"  # a new run needs an empty --ckpt-dir
        # shellcheck disable=SC2086
        timeout -k 5 90 "$B/$bin" $args "${m[@]}" --device cuda --ckpt-dir "$dir/ck_$tag" --ckpt-every 3 \
            --inject kill,step=8 >"$dir/kill_$tag.log" 2>&1
        # shellcheck disable=SC2086
        timeout -k 5 90 "$B/$bin" $args "${m[@]}" --device cuda --ckpt-dir "$dir/ck_$tag" --resume \
            --save-params "$dir/res_$tag.safetensors" >"$dir/res_$tag.log" 2>&1
        if grep -q 'resumed from .*step-00000006' "$dir/res_$tag.log" &&
           cmp -s "$dir/res_$tag.safetensors" "$dir/ref_$tag.safetensors"; then
            echo "PASS ft.cuda.resume_bitwise.$tag  $(grep -h -m1 -o 'resumed from [^ ]* (step [0-9]*)' "$dir/res_$tag.log")"
        else
            echo "FAIL ft.cuda.resume_bitwise.$tag  $(grep -h -m1 -iE 'error|resumed' "$dir"/*_"$tag".log)"
            bad=$((bad + 1)) res="$res $tag"
        fi
    done
    # A GPU checkpoint resumed on the CPU.
    local t=train___batch_4
    rm -rf "$dir/ck_cpu" && cp -r "$dir/ck_$t" "$dir/ck_cpu" && rm -rf "$dir/ck_cpu/step-00000010"
    "$B/train" --batch 4 "${m[@]}" --save-params "$dir/cpu_ref.safetensors" >"$dir/cpu_ref.log" 2>&1
    "$B/train" --batch 4 "${m[@]}" --ckpt-dir "$dir/ck_cpu" --resume --save-params "$dir/cpu_res.safetensors" \
        >"$dir/cpu_res.log" 2>&1
    "$B/tests/compare_params" "$dir/cpu_res.safetensors" "$dir/cpu_ref.safetensors" 1e-5 ft.cuda_ckpt_on_cpu |
        tee "$dir/cmp_cpu.txt"
    grep -q '^PASS' "$dir/cmp_cpu.txt" || bad=$((bad + 1))
    # (resumed, not trained from scratch: that would equal the reference trivially)
    grep -q 'resumed from .*step-00000006' "$dir/cpu_res.log" ||
        { echo "FAIL ft.cuda_ckpt_on_cpu.resumed  the CPU run did not resume from the cuda step-6 checkpoint"; bad=$((bad + 1)); }
    # Sync against async on gpt2-124m (FT_PRESET=...): the training's stall per checkpoint.
    local big=(--preset "${FT_PRESET:-gpt2-124m}" --batch 4 --steps 9 --warmup 0 --log-every 100 --device cuda --ckpt-every 3)
    rm -rf "$dir/big_sync" "$dir/big_async"  # new runs: empty --ckpt-dirs
    timeout -k 5 150 "$B/train" "${big[@]}" --ckpt-dir "$dir/big_sync" >"$dir/big_sync.log" 2>&1
    timeout -k 5 150 "$B/train" "${big[@]}" --ckpt-dir "$dir/big_async" --ckpt-async >"$dir/big_async.log" 2>&1
    grep -h 'checkpoint step' "$dir"/big_*.log
    local s a
    s=$(grep -h -m1 -o 'training stalled [0-9.]* ms' "$dir/big_sync.log" | head -n 1)
    a=$(grep -h -m1 -o 'training stalled [0-9.]* ms' "$dir/big_async.log" | head -n 1)
    fig "resume bitwise on cuda: ${res:+NOT for$res}${res:-5 of 5}; cuda checkpoint on cpu: " \
        "$(sed -n 's/.*rel_err \([^ ]*\).*/rel_err \1/p' "$dir/cmp_cpu.txt"); ${FT_PRESET:-gpt2-124m} step-3 checkpoint:" \
        "sync ${s:-?}, async ${a:-?}"
    [ "$bad" -eq 0 ]
}
