// ops_cuda_precision.cu — the CUDA backend's low-precision ops (ops.h, "low
// precision in fp32 slots"): rounding to bf16, fp16 and fp8 and back, stochastic
// rounding to bf16, fp8 fake quantization with a per-tensor scale and its amax; and
// the 2-byte storage of bf16 and fp16 values (pack_half, unpack_half).
//
// ops_cpu.c is the reference, and here the bar is bitwise: every op gives the CPU's
// bits, NaNs included. The CPU's scalar routines are C (dtype.c, and
// 06_mixed_precision/sround.c, an exercise), so the kernels call __device__ twins
// of them: the same bit manipulations where the result depends on how they are
// written (NaN payloads, the stochastic rounding and its hash), CUDA's own
// conversions where IEEE fixes the answer (round to nearest even, fp16 subnormals,
// the fp8 saturating cast: cvt.rn.satfinite on sm_89 and later).
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>

#include "cuda_round.cuh"
#include "ops_cuda_internal.cuh"

// ---------------------------------------------------------------- scalar twins
// (bf16_round, f16_round, fp8_round and `through`, dtype.c's conversions: cuda_round.cuh)

// 06_mixed_precision/sround.c's sround_bits: number index of splitmix64's stream
// from seed, computed directly; the top 16 bits.
__device__ static uint32_t sround_bits_dev(uint64_t seed, uint64_t index) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (index + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (uint32_t)(z >> 48);
}

// 06_mixed_precision/sround.c's f32_to_bf16_stochastic, returned as the fp32 value:
// add the random bits to the 16 that bf16 drops and truncate; inf and NaN as RNE
// gives them; where the carry would make an inf that RNE does not, RNE's value.
__device__ static float bf16_stochastic(float f, uint32_t r16) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) >= 0x7f800000u) return bf16_round(f);
    uint32_t h = (u + r16) & 0xffff0000u;
    if ((h & 0x7fffffffu) == 0x7f800000u) return bf16_round(f);
    return __uint_as_float(h);
}

// ---------------------------------------------------------------- round_to

__global__ void round_to_kernel(float *x, size_t n, DType dt) {
    GRID_STRIDE(i, n) x[i] = through(x[i], dt);
}

void cuda_round_to(Ctx *ctx, float *x, size_t n, DType dt) {
    CHECK(dt == DT_F32 || dt == DT_BF16 || dt == DT_F16 || dt == DT_E4M3 || dt == DT_E5M2,
          "round_to: %s is not a float type to round to", dtype_name(dt));
    if (dt == DT_F32 || n == 0) return;
    round_to_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(x, n, dt);
    CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------- stochastic rounding

// Element i takes the hash of (seed, offset + i): no state shared between threads,
// so the grid's shape cannot change a single bit.
__global__ void round_stochastic_kernel(float *x, size_t n, uint64_t seed, uint64_t offset) {
    GRID_STRIDE(i, n) x[i] = bf16_stochastic(x[i], sround_bits_dev(seed, offset + i));
}

void cuda_round_stochastic_bf16(Ctx *ctx, float *x, size_t n, uint64_t seed, uint64_t offset,
                                const SRoundRule *rule) {
    (void)rule;  // the kernel is its twin (above): the GPU cannot call a host function
    if (n == 0) return;
    round_stochastic_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(x, n, seed, offset);
    CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------- fp8 fake quantization

// One pass: each thread reads its elements, keeps the largest |x| it has seen, and
// writes them quantized; then the block's maximum goes to partial[block]. A
// maximum is exact and does not depend on the order it is taken in, so the amax
// is the CPU's whatever the grid (fmaxf ignores NaN on both).
__global__ void quantize_fp8_kernel(float *x, size_t n, DType fmt, float scale, float *partial) {
    __nv_fp8_interpretation_t f = fmt == DT_E5M2 ? __NV_E5M2 : __NV_E4M3;
    float m = 0.0f;
    GRID_STRIDE(i, n) {
        float v = x[i];
        m = fmaxf(m, fabsf(v));
        // Divided by scale, as on the CPU: IEEE division, the same bits.
        if (!isnan(v)) x[i] = fp8_round(v * scale, f) / scale;
    }
    m = block_reduce(m, MaxOp(), 0.0f);
    if (threadIdx.x == 0) partial[blockIdx.x] = m;
}

// partial[nblocks] = max of partial[0..nblocks); one block.
__global__ void max_partials_kernel(float *partial, int nblocks) {
    float m = 0.0f;
    for (int b = threadIdx.x; b < nblocks; b += blockDim.x) m = fmaxf(m, partial[b]);
    m = block_reduce(m, MaxOp(), 0.0f);
    if (threadIdx.x == 0) partial[nblocks] = m;
}

void cuda_quantize_fp8(Ctx *ctx, float *x, size_t n, DType fmt, float scale, float *amax) {
    CHECK(fmt == DT_E4M3 || fmt == DT_E5M2, "quantize_fp8: %s is not an fp8 format (e4m3, e5m2)",
          dtype_name(fmt));
    CHECK(scale > 0.0f && isfinite(scale), "quantize_fp8: scale %g (must be > 0 and finite)",
          (double)scale);
    *amax = 0.0f;
    if (n == 0) return;
    unsigned nblocks = elem_grid(n);
    float *partial = (float *)cuda_scratch(ctx, (nblocks + 1) * sizeof(float));
    quantize_fp8_kernel<<<nblocks, BLOCK, 0, stream(ctx)>>>(x, n, fmt, scale, partial);
    CUDA_CHECK_LAUNCH();
    max_partials_kernel<<<1, BLOCK, 0, stream(ctx)>>>(partial, (int)nblocks);
    CUDA_CHECK_LAUNCH();
    // The amax goes to the host's history (fp8_record): wait for it.
    CUDA_CHECK(cudaMemcpyAsync(amax, partial + nblocks, sizeof(float), cudaMemcpyDeviceToHost,
                               stream(ctx)));
    CUDA_CHECK(cudaStreamSynchronize(stream(ctx)));
}

// ---------------------------------------------------------------- 2-byte storage

// dtype.c's f32_to_bf16 / f32_to_f16 codes: the rounded fp32 value's bits (bf16: its
// top half; fp16: the hardware conversion, exact once rounded, but for NaN, which
// dtype.c encodes with its sign and top 10 payload bits and the quiet bit).
__global__ void pack_half_kernel(uint16_t *dst, const float *src, size_t n, DType dt) {
    GRID_STRIDE(i, n) {
        float f = src[i];
        uint32_t u = __float_as_uint(f);
        if (dt == DT_BF16) {
            dst[i] = (uint16_t)(__float_as_uint(bf16_round(f)) >> 16);
        } else if ((u & 0x7fffffffu) > 0x7f800000u) {
            dst[i] = (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu));
        } else {
            dst[i] = __half_as_ushort(__float2half_rn(f));
        }
    }
}

// Exact: every bf16 and fp16 is an fp32. (A NaN's payload: bf16 keeps every bit;
// fp16's widening keeps its sign and payload, as f16_to_f32 does.)
__global__ void unpack_half_kernel(float *dst, const uint16_t *src, size_t n, DType dt) {
    GRID_STRIDE(i, n) {
        uint16_t h = src[i];
        dst[i] = dt == DT_BF16 ? __uint_as_float((uint32_t)h << 16)
                               : __half2float(__ushort_as_half(h));
    }
}

void cuda_pack_half(Ctx *ctx, uint16_t *dst, const float *src, size_t n, DType dt) {
    CHECK(dt == DT_BF16 || dt == DT_F16, "pack_half: %s is not a 2-byte float type (bf16, fp16)",
          dtype_name(dt));
    if (n == 0) return;
    pack_half_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(dst, src, n, dt);
    CUDA_CHECK_LAUNCH();
}

void cuda_unpack_half(Ctx *ctx, float *dst, const uint16_t *src, size_t n, DType dt) {
    CHECK(dt == DT_BF16 || dt == DT_F16, "unpack_half: %s is not a 2-byte float type (bf16, fp16)",
          dtype_name(dt));
    if (n == 0) return;
    unpack_half_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(dst, src, n, dt);
    CUDA_CHECK_LAUNCH();
}
