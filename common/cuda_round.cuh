// cuda_round.cuh — the CUDA backend's twins of dtype.c's scalar conversions: a value
// rounded to bf16, fp16 or fp8 and back to fp32, bit for bit what the CPU gives
// (ops_cuda_precision.cu's ops use them, and the kernels that round what they write,
// such as the attention's softmax in ops_cuda_attention.cu). Device code only.
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "dtype.h"

// dtype.c's f32_to_bf16 and back, bit for bit: RNE on the 16 dropped bits; a NaN
// keeps its sign and top payload bits and gets the quiet bit.
static __device__ inline float bf16_round(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float((u & 0xffff0000u) | 0x00400000u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return __uint_as_float(u & 0xffff0000u);
}

// dtype.c's f32_to_f16 and back. The hardware conversion rounds to nearest even,
// keeps subnormals and overflows to inf, as dtype.c does; only NaN needs care:
// dtype.c keeps the sign and the top 10 payload bits and sets the quiet bit, where
// the hardware would give its canonical NaN.
static __device__ inline float f16_round(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float((u & 0xffffe000u) | 0x00400000u);
    return __half2float(__float2half_rn(f));
}

// dtype.c's f32_to_e4m3 / f32_to_e5m2 and back: CUDA's saturating cast (the same
// rounding and saturation, dtype.h), then fp8 -> fp16 -> fp32, both exact (every
// fp8 value is an fp16 value). A NaN decodes to the quiet NaN with its sign in
// dtype.c, while the hardware's NaN code has no sign: handled first.
static __device__ inline float fp8_round(float f, __nv_fp8_interpretation_t fmt) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float((u & 0x80000000u) | 0x7fc00000u);
    __nv_fp8_storage_t c = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, fmt);
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, fmt)));
}

static __device__ inline float through(float f, DType dt) {
    switch (dt) {
    case DT_BF16: return bf16_round(f);
    case DT_F16: return f16_round(f);
    case DT_E4M3: return fp8_round(f, __NV_E4M3);
    case DT_E5M2: return fp8_round(f, __NV_E5M2);
    default: return f;  // fp32 (the host checked dt)
    }
}
