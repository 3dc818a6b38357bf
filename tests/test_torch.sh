#!/usr/bin/env bash
# test_torch.sh — the whole model against PyTorch, same weights and inputs; and the
# mixture-of-experts layer alone.
# Two configurations: the tiny preset, and one whose every dimension is not a
# power of two (L=3, C=72, NH=6, T=13, V=97, B=3). Tolerances are stated and
# justified in tests/torch_gpt.py.
set -u -o pipefail
BUILD=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
"$BUILD/tests/gpt_dump" --layers 2 --width 64 --heads 4 --seq 32 --vocab 256 --batch 4 \
    --out "$dir/tiny.safetensors" || status=1
"${PY:-/usr/bin/python3}" tests/torch_gpt.py check "$dir/tiny.safetensors" | sed 's/torch\./torch.tiny./' || status=1
"$BUILD/tests/gpt_dump" --layers 3 --width 72 --heads 6 --seq 13 --vocab 97 --batch 3 \
    --out "$dir/odd.safetensors" || status=1
"${PY:-/usr/bin/python3}" tests/torch_gpt.py check "$dir/odd.safetensors" | sed 's/torch\./torch.odd./' || status=1
# The mixture-of-experts layer (common/moe.c) alone against PyTorch's autograd.
"$BUILD/tests/test_moe" --dump "$dir/moe.safetensors" || status=1
"${PY:-/usr/bin/python3}" tests/torch_moe.py "$dir/moe.safetensors" || status=1
# scripts/gpu_ceilings.py (scripts/gpu_check.sh item 12) runs on a GPU only when one
# is lent: a smoke run here, at small shapes on the CPU, keeps it from rotting.
out=$("${PY:-/usr/bin/python3}" scripts/gpu_ceilings.py --device cpu --tokens 64 --width 64 \
      --vocab 256 --iters 1 --attn 1,2,32,16 2>&1)
if [ "$(grep -c '^CEILING name=gemm_' <<<"$out")" = 5 ] && grep -q '^# the five GEMMs together' <<<"$out"; then
    echo "PASS torch.gpu_ceilings_smoke  $(grep -c '^CEILING' <<<"$out") ceilings measured on the CPU; $(grep '^# attention' <<<"$out" | cut -c3-)"
else
    echo "FAIL torch.gpu_ceilings_smoke  $(tail -n 3 <<<"$out" | tr '\n' ' ')"
fi
exit $status
