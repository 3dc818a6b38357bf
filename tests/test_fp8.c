// test_fp8.c — stage 06's fp8: the formats and delayed scaling (the rest of the
// numerical primitives: test_precision.c). Every check is named mp.fp8.*; none is
// graded. The evidence: every one of the 256 codes of each format against the value
// the format's definition gives (computed here in double, not with dtype.c's bit
// tricks), every finite value back to its code, the encoder against a brute-force
// nearest-value search, ties to even; the quantize op; the amax history's scales.
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "harness.h"
#include "ops.h"
#include "precision.h"
#include "rng.h"

static Ctx cpu;  // the CPU backend, for the quantize op

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
    test_fp8_scaling(&ts);
    ctx_destroy(&cpu);
    return test_finish(&ts);
}
