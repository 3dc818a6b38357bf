#!/usr/bin/env python3
"""gpu_ceilings.py: what this GPU does at GPT-2 124M's shapes, the ceilings MFU is read against.

    python3 scripts/gpu_ceilings.py                 on the GPU (scripts/gpu_check.sh item 12)
    python3 scripts/gpu_ceilings.py --device cpu --tokens 256 --vocab 1024 --iters 1
                                                    a smoke run (the CPU test suite)

Times, with torch on the same device, in bf16 with fp32 accumulation:
  - the five GEMMs of a GPT-2 124M layer and head at N = B*T rows (forward shapes:
    qkv C->3C, attention projection C->C, MLP C->4C and 4C->C, LM head C->V), in TFLOP/s;
  - causal attention (torch's scaled_dot_product_attention, a flash kernel where torch
    has one) forward and backward at B8 NH12 T1024 hs64, in TFLOP/s of the causal half
    (forward 2 GEMMs of 2*B*NH*T*T*hs/2 FLOPs each, backward 2.5x the forward).
One line per measurement, "CEILING name=... tflops=... ms=...", then a summary line.
The course's own kernels are measured by the trainer (RESULT lines) and COURSE_OP_TIMING.
"""
import argparse
import sys
import time


def timed(fn, iters, sync):
    fn()  # warm-up: kernel selection, allocations
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - t0) / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tokens", type=int, default=8 * 1024, help="N = B*T rows of the GEMMs")
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--attn", default="8,12,1024,64", help="B,NH,T,hs of the attention")
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"SKIP ceilings: torch cannot be imported ({e})")
        return 77
    if a.device == "cuda" and not torch.cuda.is_available():
        print("SKIP ceilings: torch sees no CUDA device")
        return 77
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    dt = torch.bfloat16
    name = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    print(f"# torch {torch.__version__} on {name}; bf16 operands, fp32 accumulation")
    N, C, V = a.tokens, a.width, a.vocab
    shapes = [("qkv", C, 3 * C), ("attproj", C, C), ("fc", C, 4 * C), ("fcproj", 4 * C, C),
              ("lm_head", C, V)]
    total_flop = total_s = 0.0
    for label, k, m in shapes:
        x = torch.randn(N, k, device=dev, dtype=dt)
        w = torch.randn(m, k, device=dev, dtype=dt)
        s = timed(lambda: x @ w.t(), a.iters, sync)
        flop = 2.0 * N * k * m
        total_flop, total_s = total_flop + flop, total_s + s
        print(f"CEILING name=gemm_{label} shape={N}x{k}x{m} tflops={flop / s / 1e12:.4g} "
              f"ms={1e3 * s:.3f}")
    print(f"# the five GEMMs together: {total_flop / total_s / 1e12:.4g} TFLOP/s")
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is None:  # torch < 2.0 (Debian 12's 1.13)
        print(f"# attention skipped: torch {torch.__version__} has no scaled_dot_product_attention")
        return 0
    B, NH, T, hs = (int(v) for v in a.attn.split(","))
    q, k, v = (torch.randn(B, NH, T, hs, device=dev, dtype=dt, requires_grad=True)
               for _ in range(3))
    fwd_flop = 2 * 2.0 * B * NH * T * T * hs / 2  # two GEMMs, the causal half
    s = timed(lambda: sdpa(q, k, v, is_causal=True), a.iters, sync)
    print(f"CEILING name=sdpa_causal_fwd shape=B{B}.NH{NH}.T{T}.hs{hs} "
          f"tflops={fwd_flop / s / 1e12:.4g} ms={1e3 * s:.3f}")
    out = sdpa(q, k, v, is_causal=True)
    g = torch.randn_like(out)
    s = timed(lambda: torch.autograd.grad(sdpa(q, k, v, is_causal=True), (q, k, v), g),
              a.iters, sync)
    print(f"CEILING name=sdpa_causal_fwd_bwd shape=B{B}.NH{NH}.T{T}.hs{hs} "
          f"tflops={3.5 * fwd_flop / s / 1e12:.4g} ms={1e3 * s:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
