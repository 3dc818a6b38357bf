// dtype.c — element types and the float conversions between them.
//
// The float formats, as bit fields (sign | exponent | mantissa):
//
//   fp32  1 | 8 | 23   bias 127   max 3.4e38    smallest normal 2^-126
//   bf16  1 | 8 |  7   bias 127   max 3.4e38    (the top half of an fp32)
//   fp16  1 | 5 | 10   bias 15    max 65504     smallest normal 2^-14, subnormal 2^-24
//   e4m3  1 | 4 |  3   bias 7     max 448       smallest normal 2^-6,  subnormal 2^-9
//   e5m2  1 | 5 |  2   bias 15    max 57344     smallest normal 2^-14, subnormal 2^-16
//
// bf16 keeps fp32's exponent, so converting is dropping 16 mantissa bits with
// rounding. fp16 has a narrower exponent: large values overflow to inf, small ones
// become subnormal (fewer mantissa bits) or zero, and this is where loss scaling
// (stage 06) comes from. The fp8 formats are narrower still: with 18 (e4m3: 2^-9 to
// 2^8) or 32 (e5m2: 2^-16 to 2^15) binades in all, subnormals included, a tensor only
// fits after multiplying by a per-tensor scale.
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
    case DT_E4M3: return 1;
    case DT_E5M2: return 1;
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
    case DT_E4M3: return "e4m3";
    case DT_E5M2: return "e5m2";
    default: return "invalid";
    }
}

// Accepts the course's names (dtype_name), PyTorch's ("float32", "bfloat16",
// "float16", "half", "int32", "float64", "float8_e4m3fn", "float8_e5m2") and
// safetensors' ("F32", "BF16", "F16", "I32", "F64", "F8_E4M3", "F8_E5M2"), in any
// case, so a flag value copied from any of those places works. Plain "fp8" is
// refused: it does not say which of the two formats.
int dtype_parse(const char *s, DType *out) {
    static const struct { const char *name; DType t; } names[] = {
        {"fp32", DT_F32},  {"f32", DT_F32},   {"float32", DT_F32},  {"float", DT_F32},
        {"bf16", DT_BF16}, {"bfloat16", DT_BF16},
        {"fp16", DT_F16},  {"f16", DT_F16},   {"float16", DT_F16},  {"half", DT_F16},
        {"int32", DT_I32}, {"i32", DT_I32},
        {"fp64", DT_F64},  {"f64", DT_F64},   {"float64", DT_F64},  {"double", DT_F64},
        {"e4m3", DT_E4M3}, {"fp8_e4m3", DT_E4M3}, {"float8_e4m3fn", DT_E4M3}, {"f8_e4m3", DT_E4M3},
        {"e5m2", DT_E5M2}, {"fp8_e5m2", DT_E5M2}, {"float8_e5m2", DT_E5M2},   {"f8_e5m2", DT_E5M2},
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
// fp8 (e4m3, e5m2)
//
// One encoder serves both formats; it is f32_to_f16's algorithm with the format's
// widths as parameters, plus saturation. mbits: mantissa bits; bias; max_bits: the
// fp32 bit pattern of the largest finite value; max_code: its fp8 code; has_inf:
// whether the top exponent is reserved for inf and NaN (e5m2, as in IEEE formats)
// or holds numbers (e4m3, which gains 256..448 and keeps one NaN code).

typedef struct { uint32_t mbits, bias, max_bits; uint8_t max_code; int has_inf; } Fp8Format;
static const Fp8Format E4M3 = {3, 7, 0x43e00000u /* 448 */, 0x7e, 0};
static const Fp8Format E5M2 = {2, 15, 0x47600000u /* 57344 */, 0x7b, 1};

static uint8_t f32_to_fp8(float f, const Fp8Format *F) {
    uint32_t u = f32_bits(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7fffffffu;
    // NaN: S.1111.111 is a NaN in both formats (E4M3's only one).
    if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
    // Saturation: anything above max, inf included, is max. Values up to half an
    // ulp above max would round to it anyway; beyond that, RNE would give the next
    // binade, which E4M3 spends on NaN and E5M2 on inf.
    if (a >= F->max_bits) return (uint8_t)(sign | F->max_code);

    uint32_t drop = 23 - F->mbits;  // fp32 mantissa bits the format does not keep
    if (a >= (127 + 1 - F->bias) << 23) {
        // Normal (>= 2^(1 - bias)). RNE on the dropped bits, as for bf16 and fp16;
        // a carry into the exponent is right, and cannot pass max (checked above:
        // a < max, and max is representable, so the nearest value is at most max).
        a += (1u << (drop - 1)) - 1u + ((a >> drop) & 1u);
        a -= (127 - F->bias) << 23;
        return (uint8_t)(sign | (a >> drop));
    }
    // Subnormal or zero: count units of the smallest subnormal, 2^(1 - bias - mbits).
    // |f| = m * 2^(e - 150) with m the 24-bit mantissa, so the count is
    // m * 2^(e - 151 + bias + mbits) = m >> (151 - bias - mbits - e).
    uint32_t e = a >> 23;
    // A shift above 24 leaves less than half a unit: zero (and a shift of 24 with
    // exactly half, m = 2^23, ties to the even 0 below). This includes fp32
    // subnormals and keeps the shift below 32.
    if (e + 24 < 151 - F->bias - F->mbits) return sign;
    uint32_t m = (a & 0x007fffffu) | 0x00800000u;
    uint32_t shift = 151 - F->bias - F->mbits - e;  // 24 - mbits .. 24
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    // q == 2^mbits (rounded up out of the subnormals) is the code of the smallest
    // normal: as for fp16, the encoding makes the carry right for free.
    return (uint8_t)(sign | q);
}

static float fp8_to_f32(uint8_t c, const Fp8Format *F) {
    uint32_t sign = (uint32_t)(c & 0x80u) << 24;
    uint32_t mmask = (1u << F->mbits) - 1u;
    uint32_t e = (c & 0x7fu) >> F->mbits, m = c & mmask;
    uint32_t emax = 0x7fu >> F->mbits;  // all exponent bits set
    if (e == emax && (F->has_inf || m == mmask)) {
        // E5M2's exponent 31 is inf (m == 0) or NaN, like fp16's; E4M3 keeps its
        // top exponent for numbers up to 448 and only S.1111.111 is NaN.
        if (m == 0) return f32_from_bits(sign | 0x7f800000u);
        return f32_from_bits(sign | 0x7fc00000u);  // no payload worth keeping in 2 bits
    }
    if (e == 0) {
        // Subnormal: m units of 2^(1 - bias - mbits); the product is exact (a small
        // integer times a power of two), and 0 keeps its sign through the multiply.
        float unit = f32_from_bits((127 + 1 - F->bias - F->mbits) << 23);
        float v = (float)m * unit;
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((e + 127 - F->bias) << 23) | (m << (23 - F->mbits)));
}

uint8_t f32_to_e4m3(float f) { return f32_to_fp8(f, &E4M3); }
float e4m3_to_f32(uint8_t c) { return fp8_to_f32(c, &E4M3); }
uint8_t f32_to_e5m2(float f) { return f32_to_fp8(f, &E5M2); }
float e5m2_to_f32(uint8_t c) { return fp8_to_f32(c, &E5M2); }

// ---------------------------------------------------------------------------------
// Bulk conversion

static float load_as_f32(const void *src, DType st, size_t i) {
    switch (st) {
    case DT_F32: return ((const float *)src)[i];
    case DT_BF16: return bf16_to_f32(((const uint16_t *)src)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t *)src)[i]);
    case DT_E4M3: return e4m3_to_f32(((const uint8_t *)src)[i]);
    case DT_E5M2: return e5m2_to_f32(((const uint8_t *)src)[i]);
    default: DIE("dtype_convert: cannot convert from %s", dtype_name(st));
    }
}

static void store_from_f32(void *dst, DType dt, size_t i, float v) {
    switch (dt) {
    case DT_F32: ((float *)dst)[i] = v; break;
    case DT_BF16: ((uint16_t *)dst)[i] = f32_to_bf16(v); break;
    case DT_F16: ((uint16_t *)dst)[i] = f32_to_f16(v); break;
    case DT_E4M3: ((uint8_t *)dst)[i] = f32_to_e4m3(v); break;
    case DT_E5M2: ((uint8_t *)dst)[i] = f32_to_e5m2(v); break;
    default: DIE("dtype_convert: cannot convert to %s", dtype_name(dt));
    }
}

// The types dtype_convert takes (fp64 is for statistics, not tensors: dtype.h).
static int is_float(DType t) {
    return t == DT_F32 || t == DT_BF16 || t == DT_F16 || t == DT_E4M3 || t == DT_E5M2;
}

void dtype_convert(void *dst, DType dt, const void *src, DType st, size_t n) {
    // Integers are token ids and indices, not numbers to round: converting them to
    // a float type is always a bug in the caller, so it is refused even for n == 0.
    CHECK(is_float(dt), "dtype_convert: cannot convert to %s (only fp32, bf16, fp16, e4m3, e5m2)",
          dtype_name(dt));
    CHECK(is_float(st), "dtype_convert: cannot convert from %s (only fp32, bf16, fp16, e4m3, e5m2)",
          dtype_name(st));
    if (n == 0) return;
    if (dt == st) {
        if (dst != src) memmove(dst, src, n * dtype_size(dt));
        return;
    }
    // Every conversion goes through fp32, which holds bf16, fp16 and fp8 exactly, so
    // bf16 <-> fp16 (or fp8) rounds once, at the store, as a direct conversion would.
    for (size_t i = 0; i < n; i++) store_from_f32(dst, dt, i, load_as_f32(src, st, i));
}
