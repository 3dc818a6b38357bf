// ops_cpu_precision.c — the CPU backend's low-precision ops (ops.h): rounding to
// bf16, fp16 and fp8 in fp32 slots, stochastic rounding, fp8 fake quantization, and
// the 2-byte storage of bf16 and fp16 values. Every loop is written so that gcc
// vectorises it, with the same bits as dtype.c's scalar conversions (test_precision
// checks them against each other).
#include <math.h>
#include <string.h>

#include "check.h"
#include "ops_cpu_internal.h"

// ---------------------------------------------------------------- low precision

// One value through fp16 and back with dtype.c's scalar conversion: round_to's
// fallback where the compiler has no F16C conversion.
static float through_f16(float v) { return f16_to_f32(f32_to_f16(v)); }

// fp8's round trip (f32_to_e4m3/e5m2 and back) in a form the compiler vectorises:
// the same bits, NaN as the decoder gives it (quiet, sign kept). Normal values: RNE
// on the dropped mantissa bits, as for bf16; below the smallest normal: a whole
// number of the smallest subnormal, to nearest even; above max
// (inf included): max, saturating.
typedef struct { uint32_t drop, min_normal, max_bits; float magic; } Fp8Round;
// magic: 2^23 of the smallest subnormal (2^-9, 2^-16), whose ulp is that subnormal.
static const Fp8Round FP8_E4M3 = {20, 0x3c800000u /* 2^-6 */, 0x43e00000u /* 448 */, 0x1p14f};
static const Fp8Round FP8_E5M2 = {21, 0x38800000u /* 2^-14 */, 0x47600000u /* 57344 */, 0x1p7f};

static inline float fp8_round(float y, Fp8Round R) {
    uint32_t u, out;
    memcpy(&u, &y, 4);
    uint32_t a = u & 0x7fffffffu, sign = u & 0x80000000u;
    uint32_t lsb = 1u << R.drop;
    uint32_t normal = (a + (lsb >> 1) - 1u + ((a >> R.drop) & 1u)) & ~(lsb - 1u);
    // Adding M = 2^23 units and taking it away again rounds to whole units, to
    // nearest even (IEEE addition; no -ffast-math here to fold it away).
    float sub = (fabsf(y) + R.magic) - R.magic;
    uint32_t subb;
    memcpy(&subb, &sub, 4);
    // Selects, not branches, so the loop vectorises.
    out = a >= R.min_normal ? normal : subb;
    out = a >= R.max_bits ? R.max_bits : out;
    out = a > 0x7f800000u ? 0x7fc00000u : out;
    out |= sign;
    float r;
    memcpy(&r, &out, 4);
    return r;
}

// f32_to_bf16's bits, in a form the compiler vectorises: round to nearest even on
// the 16 dropped bits; a NaN keeps its top bits and sets the quiet bit.
static inline uint32_t bf16_bits(uint32_t v) {
    uint32_t rne = (v + 0x7fffu + ((v >> 16) & 1u)) >> 16;
    uint32_t nan = (v | 0x00400000u) >> 16;
    return (v & 0x7fffffffu) > 0x7f800000u ? nan : rne;
}

void cpu_round_to(Ctx *ctx, float *x, size_t n, DType dt) {
    (void)ctx;
    CHECK(dt == DT_F32 || dt == DT_BF16 || dt == DT_F16 || dt == DT_E4M3 || dt == DT_E5M2,
          "round_to: %s is not a float type to round to", dtype_name(dt));
    if (dt == DT_F32) return;
    if (dt == DT_BF16) {
        // The hot case (mixed-bf16 rounds every tensor it writes): to bf16 and back.
        // (Bits through memcpy, not a uint32_t pointer: C's aliasing rules allow only
        // that, and the compiler makes it the same vector loop.)
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            u = bf16_bits(u) << 16;
            memcpy(&x[i], &u, 4);
        }
        return;
    }
#if defined(__FLT16_MAX__) && defined(__F16C__)
    if (dt == DT_F16) {
        // The x86 F16C conversion (vcvtps2ph): IEEE round to nearest even, overflow to
        // inf, subnormals kept -- f32_to_f16's bits (test_precision checks every case).
#pragma omp simd
        for (size_t i = 0; i < n; i++) x[i] = (float)(_Float16)x[i];
        return;
    }
#endif
    if (dt == DT_E4M3 || dt == DT_E5M2) {
        const Fp8Round R = dt == DT_E4M3 ? FP8_E4M3 : FP8_E5M2;  // by value: no aliasing
#pragma omp simd
        for (size_t i = 0; i < n; i++) x[i] = fp8_round(x[i], R);
        return;
    }
    for (size_t i = 0; i < n; i++) x[i] = through_f16(x[i]);  // DT_F16 without F16C
}

void cpu_round_stochastic_bf16(Ctx *ctx, float *x, size_t n, uint64_t seed, uint64_t offset,
                               const SRoundRule *rule) {
    (void)ctx;
    CHECK(rule && rule->round && rule->bits, "stochastic rounding without its rule (SRoundRule)");
    // Element i draws its bits from (seed, offset + i), never from a stream: the
    // result does not depend on how the elements are split over threads or calls.
    for (size_t i = 0; i < n; i++)
        x[i] = bf16_to_f32(rule->round(x[i], rule->bits(seed, offset + i)));
}

void cpu_quantize_fp8(Ctx *ctx, float *x, size_t n, DType fmt, float scale, float *amax) {
    (void)ctx;
    CHECK(fmt == DT_E4M3 || fmt == DT_E5M2, "quantize_fp8: %s is not an fp8 format (e4m3, e5m2)",
          dtype_name(fmt));
    CHECK(scale > 0.0f && isfinite(scale), "quantize_fp8: scale %g (must be > 0 and finite)",
          (double)scale);
    // The amax is of the input, before quantization: the value the history records.
    // fmaxf ignores a NaN operand, so a NaN element does not become the amax.
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    *amax = m;
    // Divided by scale, not multiplied by a rounded 1/scale: the result is q / scale
    // correctly rounded (exact when scale is a power of two), one rounding fewer.
    const Fp8Round R = fmt == DT_E4M3 ? FP8_E4M3 : FP8_E5M2;
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float q = fp8_round(x[i] * scale, R) / scale;
        x[i] = x[i] != x[i] ? x[i] : q;  // a NaN stays as it is
    }
}

// ---------------------------------------------------------------- 2-byte storage

void cpu_pack_half(Ctx *ctx, uint16_t *dst, const float *src, size_t n, DType dt) {
    (void)ctx;
    CHECK(dt == DT_BF16 || dt == DT_F16, "pack_half: %s is not a 2-byte float type (bf16, fp16)",
          dtype_name(dt));
    if (dt == DT_BF16) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &src[i], 4);
            dst[i] = (uint16_t)bf16_bits(u);
        }
        return;
    }
#if defined(__FLT16_MAX__) && defined(__F16C__)
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        _Float16 h = (_Float16)src[i];  // vcvtps2ph: f32_to_f16's bits
        memcpy(&dst[i], &h, 2);
    }
#else
    for (size_t i = 0; i < n; i++) dst[i] = f32_to_f16(src[i]);
#endif
}

void cpu_unpack_half(Ctx *ctx, float *dst, const uint16_t *src, size_t n, DType dt) {
    (void)ctx;
    CHECK(dt == DT_BF16 || dt == DT_F16, "unpack_half: %s is not a 2-byte float type (bf16, fp16)",
          dtype_name(dt));
    if (dt == DT_BF16) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)src[i] << 16;  // a bf16 is the top half of its fp32
            memcpy(&dst[i], &u, 4);
        }
        return;
    }
#if defined(__FLT16_MAX__) && defined(__F16C__)
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        _Float16 h;
        memcpy(&h, &src[i], 2);
        dst[i] = (float)h;  // exact: every fp16 is an fp32
    }
#else
    for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32(src[i]);
#endif
}
