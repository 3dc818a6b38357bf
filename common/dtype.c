// dtype.c — element types and the float conversions between them.
//
// The three float formats, as bit fields (sign | exponent | mantissa):
//
//   fp32  1 | 8 | 23   bias 127   max 3.4e38    smallest normal 2^-126
//   bf16  1 | 8 |  7   bias 127   max 3.4e38    (the top half of an fp32)
//   fp16  1 | 5 | 10   bias 15    max 65504     smallest normal 2^-14, subnormal 2^-24
//
// bf16 keeps fp32's exponent, so converting is dropping 16 mantissa bits with
// rounding. fp16 has a narrower exponent: large values overflow to inf, small ones
// become subnormal (fewer mantissa bits) or zero, and this is where loss scaling
// (stage 06) comes from.
//
// Rounding is to nearest, ties to even (RNE), the IEEE default and what GPUs do: a
// value exactly halfway between two representable ones goes to the one whose last
// mantissa bit is 0, so rounding errors do not drift in one direction on average.
//
// All bit manipulation goes through memcpy: reading a float's bits through a
// uint32_t pointer breaks C's aliasing rules, and memcpy compiles to a register move.
#include <string.h>
#include <strings.h>

#include "check.h"
#include "dtype.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

size_t dtype_size(DType t) {
    switch (t) {
    case DT_F32: return 4;
    case DT_BF16: return 2;
    case DT_F16: return 2;
    case DT_I32: return 4;
    case DT_F64: return 8;
    default: DIE("dtype_size: invalid dtype %d", (int)t);
    }
}

const char *dtype_name(DType t) {
    switch (t) {
    case DT_F32: return "fp32";
    case DT_BF16: return "bf16";
    case DT_F16: return "fp16";
    case DT_I32: return "int32";
    case DT_F64: return "fp64";
    default: return "invalid";
    }
}

// Accepts the course's names (dtype_name), PyTorch's ("float32", "bfloat16",
// "float16", "half", "int32", "float64") and safetensors' ("F32", "BF16", "F16",
// "I32", "F64"),
// in any case, so a flag value copied from any of those places works.
int dtype_parse(const char *s, DType *out) {
    static const struct { const char *name; DType t; } names[] = {
        {"fp32", DT_F32},  {"f32", DT_F32},   {"float32", DT_F32},  {"float", DT_F32},
        {"bf16", DT_BF16}, {"bfloat16", DT_BF16},
        {"fp16", DT_F16},  {"f16", DT_F16},   {"float16", DT_F16},  {"half", DT_F16},
        {"int32", DT_I32}, {"i32", DT_I32},
        {"fp64", DT_F64},  {"f64", DT_F64},   {"float64", DT_F64},  {"double", DT_F64},
    };
    if (!s) return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].t;
            return 0;
        }
    }
    return -1;
}

// ---------------------------------------------------------------------------------
// bf16

uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        // NaN. Rounding could carry a small payload into the exponent and turn the
        // NaN into inf, or truncation could drop every payload bit and leave inf.
        // Keep the sign and top payload bits and set the quiet bit (bit 6): still NaN.
        return (uint16_t)((u >> 16) | 0x0040u);
    }
    // RNE on the 16 bits we drop: add just under half (0x7fff), plus one more if
    // the lowest kept bit is 1. Exactly half then carries only when that makes the
    // kept part even. A carry out of the mantissa bumps the exponent, which is the
    // correct result, up to and including rounding the largest finite values to inf.
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return (uint16_t)(u >> 16);
}

float bf16_to_f32(uint16_t h) {
    // Exact: every bf16 is an fp32 with 16 zero mantissa bits appended.
    return f32_from_bits((uint32_t)h << 16);
}

// ---------------------------------------------------------------------------------
// fp16

uint16_t f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;  // magnitude bits

    if (a > 0x7f800000u) {
        // NaN: keep the top 10 payload bits, force the quiet bit (bit 9) so that a
        // payload living only in the low bits does not become inf.
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x03ffu));
    }
    // 65520 (0x477ff000) is exactly halfway between 65504, the largest fp16, and
    // 65536, the next value the format would have if it had one. 65504's mantissa
    // is odd (all ones), so the tie rounds up: 65520 and above become inf. This
    // branch also maps fp32 inf to fp16 inf.
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);

    if (a >= 0x38800000u) {
        // Normal in fp16 (>= 2^-14). Round away the 13 extra mantissa bits (same
        // trick as bf16), then rebias the exponent from 127 to 15. A mantissa carry
        // may increment the exponent, which is right; the branch above ensured it
        // cannot reach 31.
        uint32_t lsb = (a >> 13) & 1u;
        a += 0x0fffu + lsb;
        a -= (uint32_t)(127 - 15) << 23;
        return (uint16_t)(sign | (a >> 13));
    }

    // Subnormal in fp16, or zero. The result counts units of 2^-24:
    //   |f| = m * 2^(e - 150)  with m the 24-bit mantissa including the hidden bit,
    //   |f| / 2^-24 = m * 2^(e - 126) = m >> (126 - e).
    uint32_t e = a >> 23;
    // Below 2^-25 (e < 102) the value is under half a unit: zero. This includes fp32
    // subnormals and zero, and keeps the shift below 32.
    if (e < 102) return sign;
    uint32_t m = (a & 0x007fffffu) | 0x00800000u;
    uint32_t shift = 126 - e;  // 14..24
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    // q == 0x400 (rounded up out of the subnormals) is the bit pattern of 2^-14,
    // the smallest normal: the encoding makes that carry correct for free.
    return (uint16_t)(sign | q);
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x03ffu;
    if (e == 0x1f) {
        // inf (m == 0) or NaN; the payload moves to the top of fp32's mantissa, so
        // the quiet bit stays the quiet bit and a NaN stays a NaN.
        return f32_from_bits(sign | 0x7f800000u | (m << 13));
    }
    if (e == 0) {
        if (m == 0) return f32_from_bits(sign);  // +-0
        // Subnormal: m * 2^-24. fp32 can represent it as a normal number: shift
        // the mantissa up until its leading 1 reaches the hidden-bit position (bit
        // 10), lowering the exponent by one per shift, from 2^-14 (biased 113).
        uint32_t exp = 113;
        while (!(m & 0x0400u)) {
            m <<= 1;
            exp--;
        }
        return f32_from_bits(sign | (exp << 23) | ((m & 0x03ffu) << 13));
    }
    return f32_from_bits(sign | ((e + (127 - 15)) << 23) | (m << 13));
}

// ---------------------------------------------------------------------------------
// Bulk conversion

static float load_as_f32(const void *src, DType st, size_t i) {
    switch (st) {
    case DT_F32: return ((const float *)src)[i];
    case DT_BF16: return bf16_to_f32(((const uint16_t *)src)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t *)src)[i]);
    default: DIE("dtype_convert: cannot convert from %s", dtype_name(st));
    }
}

static void store_from_f32(void *dst, DType dt, size_t i, float v) {
    switch (dt) {
    case DT_F32: ((float *)dst)[i] = v; break;
    case DT_BF16: ((uint16_t *)dst)[i] = f32_to_bf16(v); break;
    case DT_F16: ((uint16_t *)dst)[i] = f32_to_f16(v); break;
    default: DIE("dtype_convert: cannot convert to %s", dtype_name(dt));
    }
}

void dtype_convert(void *dst, DType dt, const void *src, DType st, size_t n) {
    // Integers are token ids and indices, not numbers to round: converting them to
    // a float type is always a bug in the caller, so it is refused even for n == 0.
    CHECK(dt == DT_F32 || dt == DT_BF16 || dt == DT_F16,
          "dtype_convert: cannot convert to %s (only fp32, bf16, fp16)", dtype_name(dt));
    CHECK(st == DT_F32 || st == DT_BF16 || st == DT_F16,
          "dtype_convert: cannot convert from %s (only fp32, bf16, fp16)", dtype_name(st));
    if (n == 0) return;
    if (dt == st) {
        if (dst != src) memmove(dst, src, n * dtype_size(dt));
        return;
    }
    // Every conversion goes through fp32, which holds bf16 and fp16 exactly, so
    // bf16 <-> fp16 rounds once, at the store, as a direct conversion would.
    for (size_t i = 0; i < n; i++) store_from_f32(dst, dt, i, load_as_f32(src, st, i));
}
