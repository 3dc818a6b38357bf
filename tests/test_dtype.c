// test_dtype.c — fp32 <-> bf16 / fp16 conversions, bit for bit.
//
// Three kinds of evidence:
//   1. known bit patterns, chosen at the edges: ties (round to even), the largest
//      finite values, overflow, subnormals, signed zero, inf, NaN;
//   2. exhaustive round trips: every one of the 65536 bf16 and fp16 bit patterns
//      goes to fp32 (exact) and back, and must come back unchanged (NaNs: still NaN,
//      quiet NaNs unchanged);
//   3. for fp16, an independent implementation: the compiler's _Float16 conversion
//      (libgcc or the F16C instruction), on millions of fp32 bit patterns.
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dtype.h"
#include "harness.h"
#include "rng.h"

typedef struct { uint32_t in; uint16_t out; const char *what; } Case;

static void test_known_bf16(TestState *ts) {
    static const Case cases[] = {
        {0x3f800000, 0x3f80, "1.0"},
        {0xc0000000, 0xc000, "-2.0"},
        {0x40490fdb, 0x4049, "pi rounds down"},
        {0x3eaaaaab, 0x3eab, "1/3 rounds up"},
        {0x3f808000, 0x3f80, "tie, kept part even: down"},
        {0x3f818000, 0x3f82, "tie, kept part odd: up"},
        {0x3f808001, 0x3f81, "just above tie: up"},
        {0x3f807fff, 0x3f80, "just below tie: down"},
        {0x7f7fffff, 0x7f80, "FLT_MAX rounds to inf"},
        {0x7f7f7fff, 0x7f7f, "largest value that stays finite"},
        {0x7f800000, 0x7f80, "+inf"},
        {0xff800000, 0xff80, "-inf"},
        {0x80000000, 0x8000, "-0"},
        {0x00000000, 0x0000, "+0"},
        {0x00000001, 0x0000, "smallest fp32 subnormal rounds to 0"},
        {0x00018000, 0x0002, "subnormal tie, odd: up"},
        {0x7fc00000, 0x7fc0, "quiet NaN"},
        {0xffc00000, 0xffc0, "negative quiet NaN keeps its sign"},
        {0x7f800001, 0x7fc0, "NaN with payload only in low bits stays NaN"},
        {0x7fffffff, 0x7fff, "NaN with all payload bits does not carry into inf"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = f32_to_bf16(float_from_bits(cases[i].in));
        if (got != cases[i].out) {
            if (bad++ < 5)
                printf("  f32_to_bf16(0x%08x) = 0x%04x, want 0x%04x (%s)\n", cases[i].in, got,
                       cases[i].out, cases[i].what);
        }
    }
    test_report(ts, bad == 0, "bf16_known_patterns", "%d of %zu wrong", bad,
                sizeof cases / sizeof cases[0]);
}

static void test_known_f16(TestState *ts) {
    static const Case cases[] = {
        {0x3f800000, 0x3c00, "1.0"},
        {0xc0000000, 0xc000, "-2.0"},
        {0x3f000000, 0x3800, "0.5"},
        {0x3eaaaaab, 0x3555, "1/3"},
        {0x477fe000, 0x7bff, "65504, the largest fp16"},
        {0x477fefff, 0x7bff, "just below 65520 stays finite"},
        {0x477ff000, 0x7c00, "65520 ties to even: inf"},
        {0x47800000, 0x7c00, "65536 overflows to inf"},
        {0xc77ff000, 0xfc00, "-65520 to -inf"},
        {0x7f7fffff, 0x7c00, "FLT_MAX to inf"},
        {0x7f800000, 0x7c00, "+inf"},
        {0xff800000, 0xfc00, "-inf"},
        {0x3f801000, 0x3c00, "1 + 2^-11: tie, even: down"},
        {0x3f803000, 0x3c02, "1 + 3*2^-11: tie, odd: up"},
        {0x38800000, 0x0400, "2^-14, smallest normal"},
        {0x387fc000, 0x03ff, "largest subnormal"},
        {0x387fe000, 0x0400, "tie between largest subnormal and smallest normal: up"},
        {0x33800000, 0x0001, "2^-24, smallest subnormal"},
        {0x33000000, 0x0000, "2^-25: tie, even: 0"},
        {0x33000001, 0x0001, "just above 2^-25: up"},
        {0x33c00000, 0x0002, "3*2^-25: tie, odd: up"},
        {0x34200000, 0x0002, "5*2^-25: tie, even: down"},
        {0x2edbe6ff, 0x0000, "1e-10 underflows to 0"},
        {0xb3000000, 0x8000, "-2^-25 to -0"},
        {0x80000000, 0x8000, "-0"},
        {0x00000001, 0x0000, "fp32 subnormal to 0"},
        {0x7fc00000, 0x7e00, "quiet NaN"},
        {0xffc00000, 0xfe00, "negative quiet NaN"},
        {0x7f800001, 0x7e00, "NaN with low payload stays NaN"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = f32_to_f16(float_from_bits(cases[i].in));
        if (got != cases[i].out) {
            if (bad++ < 5)
                printf("  f32_to_f16(0x%08x) = 0x%04x, want 0x%04x (%s)\n", cases[i].in, got,
                       cases[i].out, cases[i].what);
        }
    }
    test_report(ts, bad == 0, "f16_known_patterns", "%d of %zu wrong", bad,
                sizeof cases / sizeof cases[0]);

    // And the other direction, against values written out in decimal.
    struct { uint16_t h; float f; } back[] = {
        {0x3c00, 1.0f}, {0x7bff, 65504.0f}, {0x0001, 5.9604644775390625e-8f},
        {0x03ff, 6.097555160522461e-5f}, {0x0400, 6.103515625e-5f}, {0xc000, -2.0f},
        {0x3555, 0.333251953125f}, {0x8001, -5.9604644775390625e-8f},
    };
    bad = 0;
    for (size_t i = 0; i < sizeof back / sizeof back[0]; i++)
        if (float_bits(f16_to_f32(back[i].h)) != float_bits(back[i].f)) bad++;
    if (!(isinf(f16_to_f32(0x7c00)) && f16_to_f32(0x7c00) > 0)) bad++;
    if (!(isinf(f16_to_f32(0xfc00)) && f16_to_f32(0xfc00) < 0)) bad++;
    if (float_bits(f16_to_f32(0x8000)) != 0x80000000u) bad++;
    if (!isnan(f16_to_f32(0x7e00)) || !isnan(f16_to_f32(0x7c01))) bad++;
    test_report(ts, bad == 0, "f16_to_f32_known_values", "%d wrong", bad);
}

// Every 16-bit pattern: widen to fp32, narrow back. Widening is exact, so narrowing
// must return the same bits, except that a signalling NaN may come back quieted.
static void test_exhaustive_roundtrip(TestState *ts, const char *name, float (*widen)(uint16_t),
                                      uint16_t (*narrow)(float), uint16_t exp_mask,
                                      uint16_t quiet_bit) {
    int bad = 0, nans = 0;
    float prev = -INFINITY;
    int monotone_bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = widen((uint16_t)h);
        uint16_t back = narrow(f);
        int is_nan = (h & exp_mask) == exp_mask && (h & (0x7fffu & ~exp_mask)) != 0;
        int ok;
        if (is_nan) {
            nans++;
            int back_nan = (back & exp_mask) == exp_mask && (back & (0x7fffu & ~exp_mask)) != 0;
            ok = isnan(f) && back_nan && (back & 0x8000) == (h & 0x8000) &&
                 (!(h & quiet_bit) || back == h);
        } else {
            ok = !isnan(f) && back == h;
        }
        if (!ok && bad++ < 5)
            printf("  %s: 0x%04x -> %a -> 0x%04x\n", name, h, (double)f, back);
        // Positive patterns in increasing order are increasing values (up to inf).
        if (h <= exp_mask) {
            if (!(f > prev) && h != 0) monotone_bad++;
            prev = f;
        }
    }
    test_report(ts, bad == 0 && monotone_bad == 0, name,
                "65536 patterns (%d NaN), %d wrong, %d out of order", nans, bad, monotone_bad);
}

#ifdef __FLT16_MAX__
// The compiler's own fp32 -> fp16 conversion is an implementation we did not write.
// Compare on every fp32 exponent with random mantissas, plus the neighbourhood of
// every fp16 rounding boundary. NaNs are left out: payload conventions differ.
static void test_f16_vs_compiler(TestState *ts) {
    Rng r;
    rng_seed(&r, 7);
    long checked = 0;
    int bad = 0;
    for (int i = 0; i < 4000000; i++) {
        uint32_t u = (uint32_t)(rng_u64(&r) >> 32);
        float f = float_from_bits(u);
        if (isnan(f)) continue;
        _Float16 h = (_Float16)f;
        uint16_t want;
        memcpy(&want, &h, 2);
        uint16_t got = f32_to_f16(f);
        checked++;
        if (got != want && bad++ < 5) printf("  0x%08x: got 0x%04x, compiler 0x%04x\n", u, got, want);
    }
    // Values near each boundary: every fp16 midpoint and its fp32 neighbours.
    for (uint32_t h = 0; h < 0x7c00; h++) {
        float lo = f16_to_f32((uint16_t)h), hi = f16_to_f32((uint16_t)(h + 1));
        float mid = (float)(((double)lo + (double)hi) / 2);  // exact: fits in fp32
        for (int d = -1; d <= 1; d++) {
            for (int s = 0; s < 2; s++) {
                float f = float_from_bits((float_bits(mid) + (uint32_t)d) ^ (s ? 0x80000000u : 0));
                _Float16 c = (_Float16)f;
                uint16_t want;
                memcpy(&want, &c, 2);
                uint16_t got = f32_to_f16(f);
                checked++;
                if (got != want && bad++ < 5)
                    printf("  %a: got 0x%04x, compiler 0x%04x\n", (double)f, got, want);
            }
        }
    }
    test_report(ts, bad == 0, "f16_matches_compiler_Float16", "%ld values, %d differ", checked, bad);
}
#endif

// bf16 against a reference written differently: round via double arithmetic.
// bf16 keeps 8 significant bits; rounding x to 8 bits is nearbyint(x * 2^k) / 2^k for
// the right k, in the default round-to-nearest-even mode. Normal range only.
static void test_bf16_vs_arith(TestState *ts) {
    Rng r;
    rng_seed(&r, 11);
    int bad = 0, checked = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)(rng_u64(&r) >> 32);
        uint32_t e = (u >> 23) & 0xff;
        if (e == 0 || e >= 0xfe) continue;  // subnormals, the top binade (may overflow), inf/NaN
        float f = float_from_bits(u);
        int ex;
        frexp((double)f, &ex);                        // |f| = m * 2^ex, m in [0.5, 1)
        double scaled = ldexp((double)f, 8 - ex);     // 8 significant bits above the point
        double want = ldexp(nearbyint(scaled), ex - 8);
        float got = bf16_to_f32(f32_to_bf16(f));
        checked++;
        if ((double)got != want && bad++ < 5)
            printf("  0x%08x: got %a, want %a\n", u, (double)got, want);
    }
    test_report(ts, bad == 0, "bf16_matches_nearbyint_reference", "%d values, %d differ", checked,
                bad);
}

static void test_convert(TestState *ts) {
    enum { N = 1000 };
    float src[N], back[N];
    uint16_t a[N], b[N];
    Rng r;
    rng_seed(&r, 3);
    rng_fill_normal(&r, src, N, 0.0f, 100.0f);
    src[0] = 1e6f;   // overflows fp16
    src[1] = -0.0f;
    src[2] = 1e-7f;  // fp16 subnormal
    int bad = 0;

    dtype_convert(a, DT_BF16, src, DT_F32, N);
    for (int i = 0; i < N; i++) bad += a[i] != f32_to_bf16(src[i]);
    dtype_convert(b, DT_F16, a, DT_BF16, N);  // bf16 -> fp16: one rounding, from the bf16 value
    for (int i = 0; i < N; i++) bad += b[i] != f32_to_f16(bf16_to_f32(a[i]));
    dtype_convert(back, DT_F32, b, DT_F16, N);
    for (int i = 0; i < N; i++) bad += float_bits(back[i]) != float_bits(f16_to_f32(b[i]));
    dtype_convert(a, DT_BF16, b, DT_F16, N);
    for (int i = 0; i < N; i++) bad += a[i] != f32_to_bf16(f16_to_f32(b[i]));
    dtype_convert(back, DT_F32, a, DT_BF16, N);
    for (int i = 0; i < N; i++) bad += float_bits(back[i]) != float_bits(bf16_to_f32(a[i]));
    float copy[N];
    dtype_convert(copy, DT_F32, src, DT_F32, N);
    bad += memcmp(copy, src, sizeof src) != 0;
    dtype_convert(copy, DT_F32, copy, DT_F32, N);  // same buffer, same dtype: a no-op
    bad += memcmp(copy, src, sizeof src) != 0;
    test_report(ts, bad == 0, "dtype_convert_all_pairs", "%d mismatches", bad);

    // int32 is not a float type: converting it must stop the program.
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        // Silence the child's expected error message.
        if (!freopen("/dev/null", "w", stderr)) _exit(99);
        int32_t ints[4] = {1, 2, 3, 4};
        float out[4];
        dtype_convert(out, DT_F32, ints, DT_I32, 4);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    test_report(ts, WIFEXITED(status) && WEXITSTATUS(status) == 1, "dtype_convert_int32_dies",
                "child exit status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static void test_names(TestState *ts) {
    int bad = 0;
    DType t;
    bad += dtype_size(DT_F32) != 4 || dtype_size(DT_BF16) != 2 || dtype_size(DT_F16) != 2 ||
           dtype_size(DT_I32) != 4 || dtype_size(DT_F64) != 8;
    bad += dtype_parse("float64", &t) != 0 || t != DT_F64;
    for (int i = 0; i < DT_COUNT; i++) {
        bad += dtype_parse(dtype_name((DType)i), &t) != 0 || t != (DType)i;
    }
    bad += dtype_parse("BF16", &t) != 0 || t != DT_BF16;
    bad += dtype_parse("float16", &t) != 0 || t != DT_F16;
    bad += dtype_parse("fp8", &t) == 0;
    bad += dtype_parse("", &t) == 0;
    test_report(ts, bad == 0, "dtype_names_and_parse", "%d wrong", bad);
}

int main(void) {
    TestState ts = {0};
    test_names(&ts);
    test_known_bf16(&ts);
    test_known_f16(&ts);
    test_exhaustive_roundtrip(&ts, "bf16_exhaustive_roundtrip", bf16_to_f32, f32_to_bf16, 0x7f80,
                              0x0040);
    test_exhaustive_roundtrip(&ts, "f16_exhaustive_roundtrip", f16_to_f32, f32_to_f16, 0x7c00,
                              0x0200);
#ifdef __FLT16_MAX__
    test_f16_vs_compiler(&ts);
#endif
    test_bf16_vs_arith(&ts);
    test_convert(&ts);
    return test_finish(&ts);
}
