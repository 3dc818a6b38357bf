// test_precision.c — stage 06's numerical primitives: rounding to low precision in
// fp32 slots, stochastic rounding, dynamic loss scaling (fp8: test_fp8.c).
//
// Every check is named mp.*; the grader's parts (06_mixed_precision/exercises/
// parts.txt) take the mp.sround.* and mp.scaler.* checks. The evidence:
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

#include "check.h"
#include "dtype.h"
#include "harness.h"
#include "ops.h"
#include "optim.h"
#include "precision.h"
#include "rng.h"

// The rule the CPU backend applies element by element: your sround.c's.
static const SRoundRule RULE = {f32_to_bf16_stochastic, sround_bits};

static int same_float(float a, float b) { return isnan(a) ? isnan(b) : float_bits(a) == float_bits(b); }

static Ctx cpu;  // the CPU backend, for the ops

// ---------------------------------------------------------------- round_to

static void test_round_to(TestState *ts, Rng *rng) {
    // 4M values: raw bit patterns (every exponent, NaNs, infs, subnormals), values
    // near 1 at every scale fp16 and fp8 cover, and the specials.
    size_t n = (size_t)1 << 22;
    float *src = xmalloc(n * 4), *x = xmalloc(n * 4), *want = xmalloc(n * 4);
    uint32_t *h = xmalloc(n * 4);  // the low-precision copy: 4 bytes hold any dt
    uint16_t *pk = xmalloc(n * 2);
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
    char first[160] = "";  // the first wrong case, for the message
    for (int i = 0; i < N; i++) {
        uint32_t u;
        do u = (uint32_t)rng_u64(rng);  // finite, below the top binade (overflow: below)
        while ((u & 0x7f800000u) >= 0x7f000000u);
        float x = float_from_bits(u);
        uint32_t r = (uint32_t)rng_below(rng, 65536), t = u >> 16;
        uint32_t got = float_bits(sr(x, r)) >> 16, g0 = float_bits(sr(x, 0)) >> 16;
        uint32_t gmax = float_bits(sr(x, 0xffff)) >> 16, want_max = t + ((u & 0xffff) != 0);
        outside += got != t && got != t + 1;
        at0 += g0 != t;
        atmax += gmax != want_max;
        if (!first[0] && (got != t && got != t + 1))
            snprintf(first, sizeof first, "; first: x = 0x%08x, r16 = 0x%04x gave bf16 0x%04x, "
                     "want 0x%04x or 0x%04x", u, r, got, t, t + 1);
        else if (!first[0] && g0 != t)
            snprintf(first, sizeof first, "; first: x = 0x%08x, r16 = 0 gave bf16 0x%04x, want "
                     "0x%04x", u, g0, t);
        else if (!first[0] && gmax != want_max)
            snprintf(first, sizeof first, "; first: x = 0x%08x, r16 = 0xffff gave bf16 0x%04x, "
                     "want 0x%04x", u, gmax, want_max);
    }
    test_report(ts, outside + at0 + atmax == 0, "mp.sround.neighbours",
                "of %d random values: %d rounded outside their two bf16 neighbours, %d not "
                "truncated with r16 = 0, %d not rounded up with r16 = 0xffff%s", N, outside, at0,
                atmax, first);

    // Exactly unbiased: over all 65536 values of r16, the number that round up is
    // the discarded 16 bits d, so P(up) = d / 65536 exactly and E[result] = x.
    const uint32_t xs[] = {0x3f800001u, 0x3f808000u, 0x3f80ffffu, 0xbdcccccdu /* -0.1 */,
                           0x3f8099a0u, 0x00012345u /* fp32 subnormal */, 0x7f7e7654u};
    bad = 0;
    first[0] = 0;
    for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
        uint32_t up = 0;
        for (uint32_t r = 0; r < 65536; r++)
            up += float_bits(sr(float_from_bits(xs[k]), r)) >> 16 != xs[k] >> 16;
        bad += up != (xs[k] & 0xffff);
        if (up != (xs[k] & 0xffff) && !first[0])
            snprintf(first, sizeof first, "; first: x = 0x%08x rounds up for %u of the 65536 "
                     "r16, want %u (its low 16 bits)", xs[k], up, xs[k] & 0xffff);
    }
    test_report(ts, bad == 0, "mp.sround.up_count_exact",
                "%d of %zu values: the count of r16 in [0, 65536) that round up is not the "
                "discarded bits%s", bad, sizeof xs / sizeof xs[0], first);

    // Which r16 round up, not only how many: those >= 65536 - d, where adding r16 to
    // the discarded bits carries (precision.h). Another rule with the same count
    // (r16 < d) is as unbiased, but its bits are not the GPU twin's
    // (ops_cuda_precision.cu): a run would round differently on the two devices.
    bad = 0;
    first[0] = 0;
    for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
        uint32_t d = xs[k] & 0xffff, wrong = 0, at = 0;
        for (uint32_t r = 0; r < 65536; r++) {
            int up = float_bits(sr(float_from_bits(xs[k]), r)) >> 16 != xs[k] >> 16;
            if (up != (d > 0 && r >= 65536 - d) && !wrong++) at = r;
        }
        bad += wrong > 0;
        if (wrong && !first[0])
            snprintf(first, sizeof first, "; first: x = 0x%08x (d = %u) with r16 = %u rounds %s, "
                     "want %s (up exactly when r16 >= 65536 - d)", xs[k], d, at,
                     d > 0 && at >= 65536 - d ? "down" : "up",
                     d > 0 && at >= 65536 - d ? "up" : "down");
    }
    test_report(ts, bad == 0, "mp.sround.which_r16",
                "%d of %zu values round up for other r16 than those >= 65536 - d%s", bad,
                sizeof xs / sizeof xs[0], first);

    // The overflow edge: above the largest finite bf16 (0x7f7f), rounding up would
    // give inf; there the result is RNE's (inf only where RNE itself overflows).
    float max_bf16 = float_from_bits(0x7f7f0000u);
    float r1 = sr(float_from_bits(0x7f7fffffu), 0xffff), r0 = sr(float_from_bits(0x7f7fffffu), 0);
    const struct { int wrong; const char *what; } ov[] = {
        {sr(float_from_bits(0x7f7f0001u), 0xffff) != max_bf16,
         "x = 0x7f7f0001, r16 = 0xffff must give the largest bf16 0x7f7f (RNE does), not inf"},
        {sr(float_from_bits(0xff7f7fffu), 0xffff) != -max_bf16,
         "x = 0xff7f7fff, r16 = 0xffff must give -0x7f7f (RNE does), not -inf"},
        {r1 != INFINITY || r0 != max_bf16,
         "x = 0x7f7fffff (RNE: inf) must give inf with r16 = 0xffff (RNE's answer where rounding "
         "up overflows, as the GPU twin gives) and 0x7f7f with r16 = 0"},
        {sr(INFINITY, 0x1234) != INFINITY || sr(-INFINITY, 0xffff) != -INFINITY,
         "inf and -inf must stay as they are"},
        {!isnan(sr(NAN, 0xffff)) || !isnan(sr(float_from_bits(0x7f800001u), 0)),
         "NaN must stay NaN (also one whose payload is all in the low 16 bits)"},
        {!isnan(sr(float_from_bits(0x7fffffffu), 0x8000)) ||
             !isnan(sr(float_from_bits(0xffffffffu), 0x0001)) ||
             !isnan(sr(float_from_bits(0xff80ffffu), 0xffff)),
         "NaN must stay NaN, whatever its payload and sign (0x7fffffff with r16 = 0x8000 "
         "carries out of the exponent into zero if rounded like a number)"},
    };
    bad = 0;
    const char *why = "";
    for (size_t k = 0; k < sizeof ov / sizeof ov[0]; k++) {
        if (ov[k].wrong && !bad) why = ov[k].what;
        bad += ov[k].wrong;
    }
    test_report(ts, bad == 0, "mp.sround.overflow",
                "no inf RNE would not make; inf and NaN kept: %d wrong%s%s", bad, bad ? "; first: " : "",
                why);
}

static void test_sround_op(TestState *ts) {
    // The op: element i takes sround_bits(seed, offset + i), so two calls on the two
    // halves (offsets 0 and n/2) are the one call, and a rerun is the same bits.
    size_t n = 100003;
    float *a = xmalloc(n * 4), *b = xmalloc(n * 4), *c = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) a[i] = 1.0f + (float)i * 0x1p-20f;
    memcpy(b, a, n * 4);
    memcpy(c, a, n * 4);
    int bad = 0;
    cpu.ops->round_stochastic_bf16(&cpu, a, n, 99, 5, &RULE);
    cpu.ops->round_stochastic_bf16(&cpu, b, n / 2, 99, 5, &RULE);
    cpu.ops->round_stochastic_bf16(&cpu, b + n / 2, n - n / 2, 99, 5 + n / 2, &RULE);
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
    cpu.ops->round_stochastic_bf16(&cpu, a, n, 1, 0, &RULE);
    cpu.ops->round_stochastic_bf16(&cpu, b, n, 2, 0, &RULE);
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
    float *v = xmalloc(K * 4);
    int bad = 0;
    double worst = 0;
    for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
        float x = xs[k];
        double lo = bf16_to_f32((uint16_t)(float_bits(x) >> 16));          // towards zero
        double hi = bf16_to_f32((uint16_t)((float_bits(x) >> 16) + 1));    // away from zero
        double gap = hi - lo, p = ((double)x - lo) / gap;
        for (size_t i = 0; i < K; i++) v[i] = x;
        cpu.ops->round_stochastic_bf16(&cpu, v, K, 2024 + k, 0, &RULE);
        double sum = 0;
        size_t up = 0;
        for (size_t i = 0; i < K; i++) sum += v[i], up += (double)v[i] == hi;
        double sd = sqrt(p * (1 - p) / K);
        double z_mean = fabs(sum / K - x) / (fabs(gap) * sd), z_up = fabs((double)up / K - p) / sd;
        bad += !(z_mean <= 5) || !(z_up <= 5);
        worst = max_err(worst, max_err(z_mean, z_up));
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
    // A scale that is not a power of two (--loss-scale takes any) lands between the
    // bounds' halvings: it is clamped to the bound, not left where it was.
    s = loss_scaler_default();
    s.scale = 2.0f;
    loss_scaler_update(&s, 1);
    applied = loss_scaler_update(&s, 1);
    ok = applied == 0 && s.scale == 1.0f && s.skipped == 2 && s.backoffs == 1;
    LossScaler s3 = loss_scaler_default();
    s3.scale = 3.0f;
    loss_scaler_update(&s3, 1);
    loss_scaler_update(&s3, 1);
    ok &= s3.scale == 1.0f && s3.backoffs == 2;
    test_report(ts, ok, "mp.scaler.min_clamp", "min 1, two overflows from 2: scale %g, skipped "
                "%ld, backoffs %ld (want 1, 2, 1); from 3: scale %g, backoffs %ld (want 1, 2: "
                "1.5, then clamped to 1)", s.scale, s.skipped, s.backoffs, s3.scale, s3.backoffs);
    s = loss_scaler_default();
    s.growth_interval = 1;
    s.max_scale = 262144.0f;  // 2^18: two growths from 2^16
    for (int i = 0; i < 4; i++) loss_scaler_update(&s, 0);
    ok = s.scale == 262144.0f && s.growths == 2 && s.good_steps == 0;
    s3 = loss_scaler_default();
    s3.growth_interval = 1;
    s3.scale = 12582912.0f;  // 3 x 2^22: doubling passes the default max, 2^24
    loss_scaler_update(&s3, 0);
    ok &= s3.scale == 16777216.0f && s3.growths == 1;
    test_report(ts, ok, "mp.scaler.max_clamp", "interval 1, max 2^18, 4 good steps from 2^16: "
                "scale %g, growths %ld (want 262144, 2); max 2^24, one good step from 3 x 2^22: "
                "scale %g, growths %ld (want 16777216, 1: clamped)", s.scale, s.growths,
                s3.scale, s3.growths);

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

    // Factors of the scaler's own, not 2 and 0.5 (a scaler written with those as
    // constants passes every check above): growth 4, backoff 0.125, interval 2.
    s = loss_scaler_default();
    s.scale = 1024.0f;
    s.growth_factor = 4.0f;
    s.backoff_factor = 0.125f;
    s.growth_interval = 2;
    float trace[5];
    const int inf_seq[5] = {0, 0, 1, 0, 0};  // grows at the 2nd, backs off, grows again
    for (int k = 0; k < 5; k++) loss_scaler_update(&s, inf_seq[k]), trace[k] = s.scale;
    ok = trace[0] == 1024.0f && trace[1] == 4096.0f && trace[2] == 512.0f && trace[3] == 512.0f &&
         trace[4] == 2048.0f && s.growths == 2 && s.backoffs == 1;
    test_report(ts, ok, "mp.scaler.own_factors", "growth 4, backoff 1/8, interval 2 from 1024, "
                "an overflow at the 3rd step: scales %g %g %g %g %g (want 1024 4096 512 512 2048), "
                "growths %ld, backoffs %ld", trace[0], trace[1], trace[2], trace[3], trace[4],
                s.growths, s.backoffs);
}

int main(void) {
    TestState ts = {0};
    // The checks the grader's parts take, announced (tests/run.sh): one that never
    // reports, because the program crashed first, is then traced to this test.
    static const char *graded[] = {
        "mp.sround.hash", "mp.sround.representable", "mp.sround.neighbours",
        "mp.sround.up_count_exact", "mp.sround.which_r16", "mp.sround.overflow",
        "mp.sround.deterministic",
        "mp.sround.seeds_differ", "mp.sround.unbiased", "mp.sround.accumulation",
        "mp.scaler.defaults", "mp.scaler.backoff", "mp.scaler.growth", "mp.scaler.min_clamp",
        "mp.scaler.max_clamp", "mp.scaler.injected_overflow", "mp.scaler.own_factors"};
    for (size_t i = 0; i < sizeof graded / sizeof graded[0]; i++) printf("PLAN %s\n", graded[i]);
    fflush(stdout);  // before any check: a crash in the first must not lose the plan
    Rng rng;
    rng_seed(&rng, 6);
    ctx_init(&cpu, DEV_CPU, 1, 0);
    test_round_to(&ts, &rng);
    test_sround_exact(&ts, &rng);
    test_sround_op(&ts);
    test_sround_unbiased(&ts);
    test_sround_accumulation(&ts);
    test_scaler(&ts);
    ctx_destroy(&cpu);
    return test_finish(&ts);
}
