// dtype.h — element types and their conversions.
//
// Training keeps fp32 master state; bf16 and fp16 appear as storage and
// communication types (stage 02's bf16 all-reduce, stage 06's mixed precision),
// and the two fp8 formats as the inputs of H100 tensor-core matmuls (stage 06).
// Conversions round to nearest, ties to even, exactly as the hardware does, so a
// bf16 value produced here is bit-identical to one produced by a GPU.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// fp64 is for statistics reduced across ranks (a sharded gradient norm's partial
// sums of squares), not for tensors: dtype_convert does not take it.
// New types go at the end: the values are indices (safetensors' names table).
typedef enum { DT_F32 = 0, DT_BF16, DT_F16, DT_I32, DT_F64, DT_E4M3, DT_E5M2, DT_COUNT } DType;

size_t dtype_size(DType t);
const char *dtype_name(DType t);  // "fp32", "bf16", "fp16", "int32", "fp64", "e4m3", "e5m2"
int dtype_parse(const char *s, DType *out);  // 0 on success

uint16_t f32_to_bf16(float f);        // round to nearest even; NaN stays NaN
float bf16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);         // RNE; overflow -> inf; subnormals kept
float f16_to_f32(uint16_t h);

// fp8, as the OCP 8-bit floating point specification and NVIDIA's H100 define it:
//   E4M3  1 | 4 | 3   bias 7    max 448     no inf; S.1111.111 is NaN
//   E5M2  1 | 5 | 2   bias 15   max 57344   IEEE-like: inf and NaN at exponent 31
// Round to nearest even, subnormals kept, and SATURATING: a value beyond the
// largest finite one, inf included, becomes +-max (as cuBLASLt's fp8 outputs and
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) do). E4M3 has no inf to go to;
// E5M2 has one, but an inf input saturates too (so does CUDA's __nv_fp8_e5m2(float),
// the cast Transformer Engine's kernels use): one rule for both formats, and an
// overflow in a scaled tensor costs a clipped value, not an inf in the matmul.
// NaN stays NaN (encoded S.1111.111 in both formats; every NaN code decodes to
// fp32's quiet NaN, with its sign).
#define E4M3_MAX 448.0f
#define E5M2_MAX 57344.0f
uint8_t f32_to_e4m3(float f);
float e4m3_to_f32(uint8_t c);
uint8_t f32_to_e5m2(float f);
float e5m2_to_f32(uint8_t c);

// Stochastic rounding's scalar rule (06_mixed_precision/sround.c): f rounded to
// bf16 with the 16 random bits r16, and the bits element `index` of the stream
// `seed` draws. The CPU backend applies it element by element; the CUDA backend
// computes its own twin of it (ops_cuda_precision.cu), which must give the same bits.
typedef struct {
    uint16_t (*round)(float f, uint32_t r16);
    uint32_t (*bits)(uint64_t seed, uint64_t index);
} SRoundRule;

// Convert n elements between any two float dtypes: fp32, bf16, fp16, e4m3, e5m2
// (src and dst must not overlap unless they are the same buffer with the same dtype).
void dtype_convert(void *dst, DType dt, const void *src, DType st, size_t n);

#ifdef __cplusplus
}
#endif
