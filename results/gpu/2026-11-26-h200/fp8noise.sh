#!/usr/bin/env bash
# fp8 noise floors on the GPU: how far apart two fp8 runs end when only the order of summation differs.
B=build; D=/tmp/n; mkdir -p $D
t=(--preset tiny --steps 5 --batch 4 --lr 1e-3 --log-every 100 --warmup 0 --peak-tflops 1)
cmpw() { "$B/tests/compare_params" "$1" "$2" 1 x | sed -n 's/.*rel_err \([^ ]*\).*/\1/p'; }
for seed in 1 2; do
  s=(--seed $seed)
  $B/train "${t[@]}" "${s[@]}" --precision fp8 --save-params $D/cpu_fp8_$seed.st >/dev/null 2>&1
  $B/train "${t[@]}" "${s[@]}" --precision fp32 --save-params $D/cpu_fp32_$seed.st >/dev/null 2>&1
  for g in fp32 cublaslt; do COURSE_FP8_GEMM=$g $B/train "${t[@]}" "${s[@]}" --device cuda --precision fp8 --save-params $D/cuda_fp8_${g}_$seed.st >$D/cuda_$g.log 2>&1; done
  COURSE_FP8_GEMM=cublaslt $B/train "${t[@]}" "${s[@]}" --device cuda --precision fp8 --save-params $D/cuda_fp8_lt2_$seed.st >/dev/null 2>&1
  $B/train "${t[@]}" "${s[@]}" --device cuda --precision mixed-bf16 --save-params $D/cuda_mp_$seed.st >/dev/null 2>&1
  $B/train "${t[@]}" "${s[@]}" --precision mixed-bf16 --save-params $D/cpu_mp_$seed.st >/dev/null 2>&1
  echo "seed $seed: lt_vs_f32gemm $(cmpw $D/cuda_fp8_cublaslt_$seed.st $D/cuda_fp8_fp32_$seed.st)" \
       "cudaf32gemm_vs_cpu_fp8 $(cmpw $D/cuda_fp8_fp32_$seed.st $D/cpu_fp8_$seed.st)" \
       "lt_vs_cpu_fp8 $(cmpw $D/cuda_fp8_cublaslt_$seed.st $D/cpu_fp8_$seed.st)" \
       "lt_vs_cpu_fp32recipe $(cmpw $D/cuda_fp8_cublaslt_$seed.st $D/cpu_fp32_$seed.st)" \
       "cpu_fp8_vs_cpu_fp32 $(cmpw $D/cpu_fp8_$seed.st $D/cpu_fp32_$seed.st)" \
       "mp_cuda_vs_cpu $(cmpw $D/cuda_mp_$seed.st $D/cpu_mp_$seed.st)" \
       "lt_rerun_bitwise $(cmp -s $D/cuda_fp8_cublaslt_$seed.st $D/cuda_fp8_lt2_$seed.st && echo yes || echo no)"
done
grep RESULT $D/cuda_*.log
