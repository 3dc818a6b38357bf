// test_precision.c — stage 06's numerical primitives: fp8, rounding to low precision
// in fp32 slots, stochastic rounding, dynamic loss scaling, fp8 delayed scaling.
//
// Every check is named mp.*; the grader's parts (06_mixed_precision/exercises/
// parts.txt) take the mp.sround.* and mp.scaler.* checks. The evidence:
//   fp8        every one of the 256 codes of each format against the value the
//              format's definition gives (computed here in double, not with
//              dtype.c's bit tricks), every finite value back to its code, and the
//              encoder against a brute-force nearest-value search, ties to even;
//   round_to   dtype_convert there and back, bit for bit, on millions of values;
//   sround     exact counts over all 65536 random numbers, then statistics over
//              65536 draws of the hash, then the phenomenon the lesson shows;
//   scaler     sequences of steps against traces worked out by hand.
// The statistical checks use fixed seeds, so each gives the same verdict on every
// run; their bounds (5 standard errors) are what a correct implementation meets
// with a probability of failure below 1e-6 per check for a random seed.
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "harness.h"
#include "ops.h"
#include "optim.h"
#include "precision.h"
#include "rng.h"

static int same_float(float a, float b) { return isnan(a) ? isnan(b) : float_bits(a) == float_bits(b); }

static Ctx cpu;  // the CPU backend, for the ops

// ---------------------------------------------------------------- fp8

typedef struct {
    const char *name;
    DType dt;
    int mbits, bias, has_inf;
    double max, min_normal, min_sub;  // the OCP table's values
    uint8_t (*enc)(float);
    float (*dec)(uint8_t);
} Fmt;
static const Fmt E4M3 = {"e4m3", DT_E4M3, 3, 7, 0, 448.0, 0x1p-6, 0x1p-9, f32_to_e4m3, e4m3_to_f32};
static const Fmt E5M2 = {"e5m2", DT_E5M2, 2, 15, 1, 57344.0, 0x1p-14, 0x1p-16, f32_to_e5m2,
                         e5m2_to_f32};

// The value of code c from the definition: (-1)^s 2^(e - bias) (1 + m/2^M), or for
// e = 0, (-1)^s 2^(1 - bias) (m/2^M). Returns 0 for a NaN code, 2 for an inf, 1 else.
static int ref_value(const Fmt *F, int c, double *v) {
    int s = c >> 7, e = (c & 0x7f) >> F->mbits, m = c & ((1 << F->mbits) - 1);
    int emax = 0x7f >> F->mbits, mmax = (1 << F->mbits) - 1;
    if (F->has_inf && e == emax) return m == 0 ? (*v = s ? -INFINITY : INFINITY, 2) : 0;
    if (!F->has_inf && e == emax && m == mmax) return 0;
    double frac = (double)m / (1 << F->mbits);
    double mag = e == 0 ? ldexp(frac, 1 - F->bias) : ldexp(1.0 + frac, e - F->bias);
    *v = s ? -mag : mag;
    return 1;
}

static void test_fp8_codes(TestState *ts, const Fmt *F) {
    char name[64];
    int bad = 0, finite = 0, nans = 0, back = 0;
    for (int c = 0; c < 256; c++) {
        double want;
        int kind = ref_value(F, c, &want);
        float got = F->dec((uint8_t)c);
        if (kind == 0) bad += !isnan(got), nans++;
        else bad += (double)got != want || !signbit(got) != !signbit(want);
        if (kind == 1) {
            finite++;
            back += F->enc(got) != c;  // every finite value re-encodes to its own code
        }
    }
    // The published figures: max, smallest normal, smallest subnormal (codes 0x7e or
    // 0x7b, 1 << mbits, 1), and a NaN (and for e5m2, inf) where the table puts it.
    uint8_t maxc = F->has_inf ? 0x7b : 0x7e;
    bad += F->dec(maxc) != F->max || F->dec((uint8_t)(0x80 | maxc)) != -F->max;
    bad += F->dec((uint8_t)(1 << F->mbits)) != F->min_normal || F->dec(1) != F->min_sub;
    bad += !isnan(F->dec(0x7f)) || !isnan(F->dec(0xff));
    if (F->has_inf) bad += F->dec(0x7c) != INFINITY || F->dec(0xfc) != -INFINITY;
    snprintf(name, sizeof name, "mp.fp8.%s.decode_all", F->name);
    test_report(ts, bad == 0, name, "256 codes: %d finite, %d NaN, %d wrong; max %g, min normal "
                "2^%d, min subnormal 2^%d", finite, nans, bad, F->max, (int)log2(F->min_normal),
                (int)log2(F->min_sub));
    snprintf(name, sizeof name, "mp.fp8.%s.reencode", F->name);
    test_report(ts, back == 0 && finite > 0, name,
                "%d of %d finite values re-encode to another code", back, finite);
}

// The nearest code to x by search over the finite values, ties to the even code
// (whose mantissa ends in 0); beyond max, max (saturation). Independent of dtype.c.
static uint8_t ref_encode(const double *val, int nval, float x) {
    uint8_t sign = signbit(x) ? 0x80 : 0;
    double a = fabs((double)x);
    if (a >= val[nval - 1]) return (uint8_t)(sign | (nval - 1));
    int lo = 0, hi = nval - 1;  // val[lo] <= a < val[hi]
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (val[mid] <= a) lo = mid; else hi = mid;
    }
    double dlo = a - val[lo], dhi = val[hi] - a;
    int c = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
    return (uint8_t)(sign | c);
}

static void test_fp8_rounding(TestState *ts, const Fmt *F, Rng *rng) {
    char name[64];
    double val[128];  // the non-negative finite values, by code: increasing
    int nval = F->has_inf ? 0x7c : 0x7f;
    for (int c = 0; c < nval; c++) ref_value(F, c, &val[c]);

    // Midpoints between neighbours tie to the even code; a hair either side goes to
    // the nearer one. Every midpoint and its neighbours are exact in fp32.
    int bad = 0, n = 0;
    for (int c = 0; c + 1 < nval; c++) {
        float mid = (float)((val[c] + val[c + 1]) / 2);
        int even = c % 2 == 0 ? c : c + 1;
        for (int s = 0; s < 2; s++) {
            float sg = s ? -1.0f : 1.0f;
            uint8_t sb = s ? 0x80 : 0;
            bad += F->enc(sg * mid) != (sb | even);
            bad += F->enc(sg * nextafterf(mid, 0.0f)) != (sb | c);
            bad += F->enc(sg * nextafterf(mid, INFINITY)) != (sb | (c + 1));
            n += 3;
        }
    }
    snprintf(name, sizeof name, "mp.fp8.%s.midpoints_to_even", F->name);
    test_report(ts, bad == 0, name, "%d of %d midpoints (and their fp32 neighbours) wrong", bad, n);

    // 2^21 random values against the search: log-uniform over the whole range and
    // beyond (2^-8 of the smallest subnormal .. 4 max), plus raw bit patterns
    // (anything fp32 holds but NaN).
    bad = 0;
    int N = 1 << 21;
    for (int i = 0; i < N; i++) {
        float x;
        if (i % 2) {
            double lo = log2(F->min_sub) - 8, hi = log2(F->max) + 2;
            double lg = lo + rng_uniform(rng) * (hi - lo);
            x = (float)exp2(lg) * (rng_u64(rng) & 1 ? -1.0f : 1.0f);
        } else {
            do x = float_from_bits((uint32_t)rng_u64(rng)); while (isnan(x));
        }
        bad += F->enc(x) != ref_encode(val, nval, x);
    }
    snprintf(name, sizeof name, "mp.fp8.%s.nearest_even", F->name);
    test_report(ts, bad == 0, name, "%d of %d random values encode to another code than the "
                "nearest (ties to even)", bad, N);

    // Overflow saturates to +-max, inf included (dtype.h's choice for both formats).
    const float big[] = {nextafterf((float)F->max, INFINITY), (float)F->max * 1.5f, 1e30f, FLT_MAX,
                         INFINITY};
    uint8_t maxc = (uint8_t)(nval - 1);
    bad = 0;
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        bad += F->enc(big[i]) != maxc || F->enc(-big[i]) != (0x80 | maxc);
    snprintf(name, sizeof name, "mp.fp8.%s.saturate", F->name);
    test_report(ts, bad == 0, name, "%d of %zu overflowing values (to inf) not +-max (code 0x%02x)",
                bad, 2 * (sizeof big / sizeof big[0]), maxc);

    const uint32_t nan[] = {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0xffc00000u, 0xff800001u};
    bad = 0;
    for (size_t i = 0; i < sizeof nan / sizeof nan[0]; i++) {
        float back = F->dec(F->enc(float_from_bits(nan[i])));
        bad += !isnan(back) || !signbit(back) != !(nan[i] >> 31);
    }
    snprintf(name, sizeof name, "mp.fp8.%s.nan", F->name);
    test_report(ts, bad == 0, name, "%d of %zu NaNs not NaN (with their sign) after the round trip",
                bad, sizeof nan / sizeof nan[0]);
}

static void test_fp8_dtype(TestState *ts) {
    int bad = 0;
    DType t;
    bad += dtype_size(DT_E4M3) != 1 || dtype_size(DT_E5M2) != 1;
    bad += strcmp(dtype_name(DT_E4M3), "e4m3") != 0 || strcmp(dtype_name(DT_E5M2), "e5m2") != 0;
    bad += dtype_parse("float8_e4m3fn", &t) != 0 || t != DT_E4M3;
    bad += dtype_parse("F8_E5M2", &t) != 0 || t != DT_E5M2;
    bad += dtype_parse("fp8", &t) == 0;  // ambiguous: which of the two?
    float src[1000], back[1000];
    uint8_t q[1000];
    for (int i = 0; i < 1000; i++) src[i] = (float)(i - 500) * 0.37f;
    for (int f = 0; f < 2; f++) {
        const Fmt *F = f ? &E5M2 : &E4M3;
        dtype_convert(q, F->dt, src, DT_F32, 1000);
        dtype_convert(back, DT_F32, q, F->dt, 1000);
        for (int i = 0; i < 1000; i++) bad += q[i] != F->enc(src[i]) || back[i] != F->dec(q[i]);
    }
    test_report(ts, bad == 0, "mp.fp8.dtype", "size, names, parse, dtype_convert: %d wrong", bad);
}

static void test_quantize(TestState *ts, const Fmt *F) {
    char name[64];
    // Scale 2^k is exact on values that fit: x = v / 2^k for every finite code value
    // v comes back unchanged, and the amax is the largest |x| (a negative one here).
    int bad = 0, n = 0;
    const int ks[] = {-7, 0, 5, 12};
    float x[256], want[256];
    for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
        float scale = ldexpf(1.0f, ks[j]);
        n = 0;
        for (int c = 0; c < 256; c++) {
            double v;
            if (ref_value(F, c, &v) == 1) x[n] = want[n] = (float)(v / scale), n++;
        }
        float amax = -1.0f;
        cpu.ops->quantize_fp8(&cpu, x, (size_t)n, F->dt, scale, &amax);
        for (int i = 0; i < n; i++) bad += float_bits(x[i]) != float_bits(want[i]);
        bad += amax != (float)(F->max / scale);
    }
    snprintf(name, sizeof name, "mp.fp8.quantize.%s.exact_pow2", F->name);
    test_report(ts, bad == 0, name, "scales 2^{-7,0,5,12} x %d values: %d wrong (values or amax)",
                n, bad);

    // Beyond the range the cast saturates (to max / scale); NaN stays NaN and does
    // not become the amax; the amax is of the input, before quantization.
    float y[] = {(float)F->max * 4, -1e6f, NAN, 0.1f};
    float amax = 0;
    cpu.ops->quantize_fp8(&cpu, y, 4, F->dt, 0.5f, &amax);
    bad = y[0] != (float)F->max * 2 || y[1] != (float)-F->max * 2 || !isnan(y[2]) || amax != 1e6f;
    bad += y[3] != F->dec(F->enc(0.05f)) * 2.0f;
    snprintf(name, sizeof name, "mp.fp8.quantize.%s.saturate_amax", F->name);
    test_report(ts, bad == 0, name, "scale 0.5: 4 max -> %g, -1e6 -> %g (want +-2 max), NaN -> %g, "
                "0.1 -> %g; amax %g (want 1e6)", y[0], y[1], y[2], y[3], amax);
}

// ---------------------------------------------------------------- round_to

static void test_round_to(TestState *ts, Rng *rng) {
    // 4M values: raw bit patterns (every exponent, NaNs, infs, subnormals), values
    // near 1 at every scale fp16 and fp8 cover, and the specials.
    size_t n = (size_t)1 << 22;
    float *src = malloc(n * 4), *x = malloc(n * 4), *want = malloc(n * 4);
    uint32_t *h = malloc(n * 4);  // the low-precision copy: 4 bytes hold any dt
    uint16_t *pk = malloc(n * 2);
    const uint32_t specials[] = {0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                                 0xffffffffu, 0x7f7fffffu, 0x00000001u, 0x477ff000u, 0x43e80000u};
    for (size_t i = 0; i < n; i++) {
        if (i < sizeof specials / 4) src[i] = float_from_bits(specials[i]);
        else if (i % 2) src[i] = float_from_bits((uint32_t)rng_u64(rng));
        else src[i] = (float)(rng_normal(rng) * exp2((double)rng_below(rng, 60) - 30));
    }
    const DType dts[] = {DT_F32, DT_BF16, DT_F16, DT_E4M3, DT_E5M2};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        DType dt = dts[d];
        memcpy(x, src, n * 4);
        cpu.ops->round_to(&cpu, x, n, dt);
        dtype_convert(h, dt, src, DT_F32, n);
        dtype_convert(want, DT_F32, h, dt, n);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += float_bits(x[i]) != float_bits(want[i]);
        char name[64];
        snprintf(name, sizeof name, "mp.round_to.%s", dtype_name(dt));
        test_report(ts, bad == 0, name,
                    "%zu of %zu values differ from dtype_convert there and back "
                    "(bitwise, NaNs included)", bad, n);
        if (dt != DT_BF16 && dt != DT_F16) continue;
        // The 2-byte storage: pack_half gives dtype_convert's codes, of the raw values
        // and of the rounded ones (what the model packs), and unpack_half gives back
        // exactly round_to's values: packing a rounded tensor loses nothing.
        size_t bad_codes = 0, bad_back = 0;
        cpu.ops->pack_half(&cpu, pk, src, n, dt);
        for (size_t i = 0; i < n; i++) bad_codes += pk[i] != ((uint16_t *)h)[i];
        cpu.ops->pack_half(&cpu, pk, want, n, dt);
        cpu.ops->unpack_half(&cpu, x, pk, n, dt);
        for (size_t i = 0; i < n; i++) {
            bad_codes += pk[i] != ((uint16_t *)h)[i];
            bad_back += float_bits(x[i]) != float_bits(want[i]);
        }
        snprintf(name, sizeof name, "mp.pack_half.%s", dtype_name(dt));
        test_report(ts, bad_codes + bad_back == 0, name, "%zu codes differ from dtype_convert's, "
                    "%zu values not round_to's after pack and unpack (of %zu, bitwise)", bad_codes,
                    bad_back, n);
    }
    free(src), free(x), free(want), free(h), free(pk);
}

// ---------------------------------------------------------------- stochastic rounding

static float sr(float x, uint32_t r) { return bf16_to_f32(f32_to_bf16_stochastic(x, r)); }

static void test_sround_exact(TestState *ts, Rng *rng) {
    // The hash: the values the GPU's twin must reproduce, and 16 bits, evenly
    // spread: chi-square over 256 buckets of 2^20 draws (255 degrees of freedom:
    // mean 255, sd 22.6; bound 255 + 5 sd).
    int bad = sround_bits(0, 0) != 0xe220 || sround_bits(1, 0) != 0x910a ||
              sround_bits(0, 1) != 0x6e78 || sround_bits(42, 1000) != 0x5566;
    static long hist[256];
    long draws = 1 << 20;
    for (long i = 0; i < draws; i++) {
        uint32_t r = sround_bits(7, (uint64_t)i);
        bad += r >= 65536;
        hist[r >> 8]++;
    }
    double chi2 = 0, expect = (double)draws / 256;
    for (int b = 0; b < 256; b++) chi2 += (hist[b] - expect) * (hist[b] - expect) / expect;
    test_report(ts, bad == 0 && chi2 < 255 + 5 * 22.6, "mp.sround.hash",
                "known values and range: %d wrong; chi2 %.1f over 256 buckets (bound %.0f)", bad,
                chi2, 255 + 5 * 22.6);

    // Values bf16 holds exactly come back unchanged for any r16: every code.
    const uint32_t rs[] = {0, 1, 0x7fff, 0x8000, 0xffff};
    bad = 0;
    for (uint32_t c = 0; c < 65536; c++) {
        float v = bf16_to_f32((uint16_t)c);
        for (size_t k = 0; k < 5; k++) bad += !same_float(sr(v, rs[k]), v);
    }
    test_report(ts, bad == 0, "mp.sround.representable",
                "%d of %d (bf16 value, r16) pairs changed (all 65536 codes incl. inf, NaN)", bad,
                65536 * 5);

    // The result is always one of the two neighbours (truncation or the next code
    // away from zero); r16 = 0 truncates, r16 = 0xffff rounds any remainder up.
    int outside = 0, at0 = 0, atmax = 0;
    int N = 1 << 20;
    for (int i = 0; i < N; i++) {
        uint32_t u;
        do u = (uint32_t)rng_u64(rng);  // finite, below the top binade (overflow: below)
        while ((u & 0x7f800000u) >= 0x7f000000u);
        float x = float_from_bits(u);
        uint32_t t = u >> 16, got = float_bits(sr(x, (uint32_t)rng_below(rng, 65536))) >> 16;
        outside += got != t && got != t + 1;
        at0 += float_bits(sr(x, 0)) >> 16 != t;
        atmax += float_bits(sr(x, 0xffff)) >> 16 != t + ((u & 0xffff) != 0);
    }
    test_report(ts, outside + at0 + atmax == 0, "mp.sround.neighbours",
                "of %d random values: %d rounded outside their two bf16 neighbours, %d not "
                "truncated with r16 = 0, %d not rounded up with r16 = 0xffff", N, outside, at0,
                atmax);

    // Exactly unbiased: over all 65536 values of r16, the number that round up is
    // the discarded 16 bits d, so P(up) = d / 65536 exactly and E[result] = x.
    const uint32_t xs[] = {0x3f800001u, 0x3f808000u, 0x3f80ffffu, 0xbdcccccdu /* -0.1 */,
                           0x3f8099a0u, 0x00012345u /* fp32 subnormal */, 0x7f7e7654u};
    bad = 0;
    for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
        uint32_t up = 0;
        for (uint32_t r = 0; r < 65536; r++)
            up += float_bits(sr(float_from_bits(xs[k]), r)) >> 16 != xs[k] >> 16;
        bad += up != (xs[k] & 0xffff);
    }
    test_report(ts, bad == 0, "mp.sround.up_count_exact",
                "%d of %zu values: the count of r16 in [0, 65536) that round up is not the "
                "discarded bits", bad, sizeof xs / sizeof xs[0]);

    // The overflow edge: above the largest finite bf16 (0x7f7f), rounding up would
    // give inf; only where RNE gives inf may the result be inf.
    float max_bf16 = float_from_bits(0x7f7f0000u);
    bad = sr(float_from_bits(0x7f7f0001u), 0xffff) != max_bf16;       // RNE: max
    bad += sr(float_from_bits(0xff7f7fffu), 0xffff) != -max_bf16;     // RNE: -max
    float r1 = sr(float_from_bits(0x7f7fffffu), 0xffff), r0 = sr(float_from_bits(0x7f7fffffu), 0);
    bad += (r1 != INFINITY && r1 != max_bf16) || r0 != max_bf16;  // RNE: inf, so either
    bad += sr(INFINITY, 0x1234) != INFINITY || sr(-INFINITY, 0xffff) != -INFINITY;
    bad += !isnan(sr(NAN, 0xffff)) || !isnan(sr(float_from_bits(0x7f800001u), 0));
    test_report(ts, bad == 0, "mp.sround.overflow",
                "no inf RNE would not make; inf and NaN kept: %d wrong", bad);
}

static void test_sround_op(TestState *ts) {
    // The op: element i takes sround_bits(seed, offset + i), so two calls on the two
    // halves (offsets 0 and n/2) are the one call, and a rerun is the same bits.
    size_t n = 100003;
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    for (size_t i = 0; i < n; i++) a[i] = 1.0f + (float)i * 0x1p-20f;
    memcpy(b, a, n * 4);
    memcpy(c, a, n * 4);
    int bad = 0;
    cpu.ops->round_stochastic_bf16(&cpu, a, n, 99, 5);
    cpu.ops->round_stochastic_bf16(&cpu, b, n / 2, 99, 5);
    cpu.ops->round_stochastic_bf16(&cpu, b + n / 2, n - n / 2, 99, 5 + n / 2);
    for (size_t i = 0; i < n; i++) bad += float_bits(a[i]) != float_bits(b[i]) ||
                                          float_bits(a[i]) != float_bits(sr(c[i], sround_bits(99, 5 + i)));
    test_report(ts, bad == 0, "mp.sround.deterministic",
                "%d of %zu elements differ between one call, two calls and the scalar routine",
                bad, n);

    // Other seeds, other roundings: for x halfway between neighbours (p = 1/2) two
    // independent roundings differ with probability 1/2; bound 5 s.e. (sqrt(1/4n)).
    for (size_t i = 0; i < n; i++) c[i] = float_from_bits(0x3f808000u);  // 1 + 2^-8: p = 1/2
    memcpy(a, c, n * 4);
    memcpy(b, c, n * 4);
    cpu.ops->round_stochastic_bf16(&cpu, a, n, 1, 0);
    cpu.ops->round_stochastic_bf16(&cpu, b, n, 2, 0);
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += a[i] != b[i];
    double frac = (double)diff / n, se = sqrt(0.25 / n);
    test_report(ts, fabs(frac - 0.5) <= 5 * se, "mp.sround.seeds_differ",
                "seeds 1 and 2 round %.4f of the values differently (want 0.5 +- %.4f)", frac,
                5 * se);
    // Consecutive steps' streams are unrelated: element i of step t + 1 does not draw
    // what element i + 1 drew at step t (chance alone: n / 65536 = 1.5 of them).
    size_t same = 0;
    for (size_t i = 0; i < n; i++)
        same += sround_bits(adamw_sround_seed(7, 3), i + 1) == sround_bits(adamw_sround_seed(7, 4), i);
    test_report(ts, same < 20, "mp.sround.steps_unrelated", "%zu of %zu draws shifted from the "
                "step before (chance: about 1.5)", same, n);
    free(a), free(b), free(c);
}

static void test_sround_unbiased(TestState *ts) {
    // K = 2^16 roundings of one x (elements 0..K-1: independent draws of the hash).
    // Each is lo + gap * Bernoulli(p), p = (x - lo) / gap, so the mean has standard
    // error gap * sqrt(p(1-p)/K) and the fraction rounded up sqrt(p(1-p)/K): both
    // must be within 5 of them. x: p from 1/32 to 0.7, an fp32 subnormal (the bf16
    // gap 2^-133), just below and just above a power of two, negative, near max.
    const float xs[] = {1.0f + 0x1p-12f, 1.0f + 0.3f * 0x1p-7f, -0.1f, 1e-40f,
                        2.0f - 0.3f * 0x1p-7f, 2.0f + 0.6f * 0x1p-6f, 3.0e38f, 7.7e-30f};
    const size_t K = 1 << 16;
    float *v = malloc(K * 4);
    int bad = 0;
    double worst = 0;
    for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
        float x = xs[k];
        double lo = bf16_to_f32((uint16_t)(float_bits(x) >> 16));          // towards zero
        double hi = bf16_to_f32((uint16_t)((float_bits(x) >> 16) + 1));    // away from zero
        double gap = hi - lo, p = ((double)x - lo) / gap;
        for (size_t i = 0; i < K; i++) v[i] = x;
        cpu.ops->round_stochastic_bf16(&cpu, v, K, 2024 + k, 0);
        double sum = 0;
        size_t up = 0;
        for (size_t i = 0; i < K; i++) sum += v[i], up += (double)v[i] == hi;
        double sd = sqrt(p * (1 - p) / K);
        double z_mean = fabs(sum / K - x) / (fabs(gap) * sd), z_up = fabs((double)up / K - p) / sd;
        bad += !(z_mean <= 5) || !(z_up <= 5);
        worst = fmax(worst, fmax(z_mean, z_up));
    }
    test_report(ts, bad == 0, "mp.sround.unbiased",
                "%zu values x %zu roundings: mean and fraction up within %.2f s.e. at worst "
                "(bound 5); %d outside", sizeof xs / sizeof xs[0], K, worst, bad);
    free(v);
}

static void test_sround_accumulation(TestState *ts) {
    // What the lesson shows: a bf16 weight w = 1 receiving 2^14 updates of 2^-12
    // (1/16 of its half ulp, 2^-8). Round-to-nearest rounds every w + 2^-12 back to
    // w: it stalls at 1. Stochastic rounding tracks the exact sum, 5: it is a
    // martingale around it, whose variance is the sum over the steps of
    // gap^2 p(1-p), accumulated along the way; the bound is 5 of its s.d.
    const float tiny = 0x1p-12f;
    const int steps = 1 << 14;
    float rne = 1.0f, w = 1.0f;
    double exact = 1.0, var = 0;
    for (int k = 0; k < steps; k++) {
        rne = bf16_to_f32(f32_to_bf16(rne + tiny));
        float s = w + tiny;  // exact in fp32: w has 8 significant bits, s at most 20
        double lo = bf16_to_f32((uint16_t)(float_bits(s) >> 16));
        double gap = bf16_to_f32((uint16_t)((float_bits(s) >> 16) + 1)) - lo, p = (s - lo) / gap;
        var += gap * gap * p * (1 - p);
        w = sr(s, sround_bits(11, (uint64_t)k));
        exact += tiny;
    }
    double err = fabs(w - exact), bound = 5 * sqrt(var);
    test_report(ts, rne == 1.0f && err <= bound, "mp.sround.accumulation",
                "1 + 2^14 x 2^-12 = %g: round-to-nearest %g (stalled), stochastic %g "
                "(|err| %.3f, bound 5 s.d. = %.3f)", exact, rne, w, err, bound);
}

// ---------------------------------------------------------------- loss scaler

static void test_scaler(TestState *ts) {
    LossScaler s = loss_scaler_default();
    int ok = s.scale == 65536.0f && s.growth_factor == 2.0f && s.backoff_factor == 0.5f &&
             s.growth_interval == 2000 && s.good_steps == 0 && s.steps == 0 && s.skipped == 0 &&
             s.growths == 0 && s.backoffs == 0 && s.min_scale <= 1.0f && s.max_scale >= 65536.0f;
    test_report(ts, ok, "mp.scaler.defaults", "scale %g growth %g backoff %g interval %d",
                s.scale, s.growth_factor, s.backoff_factor, s.growth_interval);

    // An overflow: the step is skipped, the scale halves, the streak restarts.
    s = loss_scaler_default();
    for (int i = 0; i < 5; i++) loss_scaler_update(&s, 0);
    int applied = loss_scaler_update(&s, 1);
    ok = applied == 0 && s.scale == 32768.0f && s.good_steps == 0 && s.skipped == 1 &&
         s.backoffs == 1 && s.steps == 6;
    test_report(ts, ok, "mp.scaler.backoff", "5 good steps then inf: applied %d, scale %g (want "
                "32768), good_steps %d, skipped %ld, backoffs %ld, steps %ld", applied, s.scale,
                s.good_steps, s.skipped, s.backoffs, s.steps);

    // Growth after exactly growth_interval good steps, not one before.
    s = loss_scaler_default();
    s.growth_interval = 5;
    int all_applied = 1;
    for (int i = 0; i < 4; i++) all_applied &= loss_scaler_update(&s, 0);
    float before = s.scale;
    all_applied &= loss_scaler_update(&s, 0);
    ok = all_applied && before == 65536.0f && s.scale == 131072.0f && s.good_steps == 0 &&
         s.growths == 1 && s.skipped == 0;
    test_report(ts, ok, "mp.scaler.growth", "interval 5: after 4 good steps %g, after 5 %g (want "
                "65536, 131072), good_steps %d, growths %ld", before, s.scale, s.good_steps,
                s.growths);

    // Clamps: never below min_scale (and that is no backoff), never above max_scale.
    s = loss_scaler_default();
    s.scale = 2.0f;
    loss_scaler_update(&s, 1);
    applied = loss_scaler_update(&s, 1);
    ok = applied == 0 && s.scale == 1.0f && s.skipped == 2 && s.backoffs == 1;
    test_report(ts, ok, "mp.scaler.min_clamp", "from 2 with min 1, two overflows: scale %g, "
                "skipped %ld, backoffs %ld (want 1, 2, 1)", s.scale, s.skipped, s.backoffs);
    s = loss_scaler_default();
    s.growth_interval = 1;
    s.max_scale = 262144.0f;  // 2^18: two growths from 2^16
    for (int i = 0; i < 4; i++) loss_scaler_update(&s, 0);
    ok = s.scale == 262144.0f && s.growths == 2 && s.good_steps == 0;
    test_report(ts, ok, "mp.scaler.max_clamp", "interval 1, max 2^18, 4 good steps: scale %g, "
                "growths %ld (want 262144, 2)", s.scale, s.growths);

    // 12 steps (0..11), interval 3, an overflow injected at step 6: the scale after
    // each step and the applied flags, worked out by hand. Growth at steps 2 and 5
    // (the 3rd and 6th good steps), backoff at 6, then the streak starts over and the
    // next growth comes 3 good steps later, at step 9.
    s = loss_scaler_default();
    s.growth_interval = 3;
    const float want[] = {1, 1, 2, 2, 2, 4, 2, 2, 2, 4, 4, 4};  // x 65536, after step k
    const int inf_at = 6;
    int step_ok = 0, last_bad = -1;
    for (int k = 0; k < 12; k++) {
        int a = loss_scaler_update(&s, k == inf_at);
        int good = a == (k != inf_at) && s.scale == want[k] * 65536.0f;
        step_ok += good;
        if (!good) last_bad = k;
    }
    ok = step_ok == 12 && s.steps == 12 && s.skipped == 1 && s.growths == 3 && s.backoffs == 1 &&
         s.good_steps == 2;
    test_report(ts, ok, "mp.scaler.injected_overflow", "interval 3, inf at step %d of 12: %d steps "
                "as traced (last wrong: %d); steps %ld skipped %ld growths %ld backoffs %ld "
                "good_steps %d", inf_at, step_ok, last_bad, s.steps, s.skipped, s.growths,
                s.backoffs, s.good_steps);
}

// ---------------------------------------------------------------- fp8 scaling

static void test_fp8_scaling(TestState *ts) {
    Fp8Scaling s;
    fp8_scaling_init(&s, 4, DT_E4M3, 0.0f);
    float empty = fp8_scale(&s);
    fp8_record(&s, 0.0f);
    fp8_record(&s, 0.0f);
    test_report(ts, empty == 1.0f && fp8_scale(&s) == 1.0f, "mp.fp8.scaling.empty_or_zero",
                "empty history %g, zeros %g (want 1, 1)", empty, fp8_scale(&s));
    fp8_scaling_free(&s);

    // scale = max / amax_max / 2^margin, in fp32 (Transformer Engine's order).
    fp8_scaling_init(&s, 8, DT_E4M3, 0.0f);
    fp8_record(&s, 1.0f);
    fp8_record(&s, 3.0f);
    fp8_record(&s, 2.0f);
    float m0 = fp8_scale(&s);
    s.margin = 1.0f;
    float m1 = fp8_scale(&s);
    s.fmt = DT_E5M2;
    float m2 = fp8_scale(&s);
    int ok = m0 == 448.0f / 3.0f && m1 == 448.0f / 3.0f / 2.0f && m2 == 57344.0f / 3.0f / 2.0f;
    test_report(ts, ok, "mp.fp8.scaling.formula", "history {1,3,2}: e4m3 %g, margin 1 %g, e5m2 "
                "margin 1 %g (want 448/3, 448/6, 57344/6)", m0, m1, m2);
    fp8_scaling_free(&s);

    // The window: len 3; a large amax leaves it after three more records.
    fp8_scaling_init(&s, 3, DT_E4M3, 0.0f);
    float seen[5];
    const float rec[] = {8.0f, 1.0f, 2.0f, 1.0f, 0.5f};
    for (int i = 0; i < 5; i++) fp8_record(&s, rec[i]), seen[i] = fp8_scale(&s);
    ok = seen[0] == 56.0f && seen[2] == 56.0f && seen[3] == 224.0f && seen[4] == 224.0f &&
         s.filled == 3;
    test_report(ts, ok, "mp.fp8.scaling.window", "len 3, amaxes 8 1 2 1 0.5: scales %g %g %g %g %g "
                "(want 56 56 56 224 224)", seen[0], seen[1], seen[2], seen[3], seen[4]);
    // An overflowed step's amax (inf, NaN) is ignored: the scale stays finite.
    fp8_record(&s, INFINITY);
    fp8_record(&s, NAN);
    float after = fp8_scale(&s);
    test_report(ts, after == 448.0f / 0.5f, "mp.fp8.scaling.nonfinite",
                "after inf and NaN amaxes: %g (want 896, from the finite 0.5)", after);
    fp8_scaling_free(&s);
}

int main(void) {
    TestState ts = {0};
    // The checks the grader's parts take, announced (tests/run.sh): one that never
    // reports, because the program crashed first, is then traced to this test.
    static const char *graded[] = {
        "mp.sround.hash", "mp.sround.representable", "mp.sround.neighbours",
        "mp.sround.up_count_exact", "mp.sround.overflow", "mp.sround.deterministic",
        "mp.sround.seeds_differ", "mp.sround.unbiased", "mp.sround.accumulation",
        "mp.scaler.defaults", "mp.scaler.backoff", "mp.scaler.growth", "mp.scaler.min_clamp",
        "mp.scaler.max_clamp", "mp.scaler.injected_overflow"};
    for (size_t i = 0; i < sizeof graded / sizeof graded[0]; i++) printf("PLAN %s\n", graded[i]);
    Rng rng;
    rng_seed(&rng, 6);
    ctx_init(&cpu, DEV_CPU, 1, 0);
    test_fp8_codes(&ts, &E4M3);
    test_fp8_codes(&ts, &E5M2);
    test_fp8_rounding(&ts, &E4M3, &rng);
    test_fp8_rounding(&ts, &E5M2, &rng);
    test_fp8_dtype(&ts);
    test_quantize(&ts, &E4M3);
    test_quantize(&ts, &E5M2);
    test_round_to(&ts, &rng);
    test_sround_exact(&ts, &rng);
    test_sround_op(&ts);
    test_sround_unbiased(&ts);
    test_sround_accumulation(&ts);
    test_scaler(&ts);
    test_fp8_scaling(&ts);
    ctx_destroy(&cpu);
    return test_finish(&ts);
}
