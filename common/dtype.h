// dtype.h — element types and their conversions.
//
// Training keeps fp32 master state; bf16 and fp16 appear as storage and
// communication types (stage 02's bf16 all-reduce, stage 06's mixed precision).
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
typedef enum { DT_F32 = 0, DT_BF16, DT_F16, DT_I32, DT_F64, DT_COUNT } DType;

size_t dtype_size(DType t);
const char *dtype_name(DType t);      // "fp32", "bf16", "fp16", "int32", "fp64"
int dtype_parse(const char *s, DType *out);  // 0 on success

uint16_t f32_to_bf16(float f);        // round to nearest even; NaN stays NaN
float bf16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);         // RNE; overflow -> inf; subnormals kept
float f16_to_f32(uint16_t h);

// Convert n elements between any two float dtypes (src and dst must not overlap
// unless they are the same buffer with the same dtype).
void dtype_convert(void *dst, DType dt, const void *src, DType st, size_t n);

#ifdef __cplusplus
}
#endif
