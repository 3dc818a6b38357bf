// test_rng.c — the generator is deterministic, matches the published algorithm,
// and its distributions are right within statistically justified bounds.
//
// The statistical checks use a fixed seed, so they are deterministic too; the
// bounds are set at about five standard errors (or a p-value of 1e-6), so that a
// correct generator passes with overwhelming probability for *any* seed, while a
// biased one (modulo bias, a wrong Box-Muller constant) fails by a wide margin.
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "rng.h"

// First outputs for seeds 0 and 42, computed by an independent Python transcription
// of splitmix64.c and xoshiro256starstar.c from prng.di.unimi.it. Any change to
// seeding or the generator changes every initialization in the course: this is
// the test that notices.
static void test_golden(TestState *ts) {
    static const struct { uint64_t seed, out[4]; } golden[] = {
        {0, {0x99ec5f36cb75f2b4ull, 0xbf6e1f784956452aull, 0x1a5f849d4933e6e0ull,
             0x6aa594f1262d2d2cull}},
        {42, {0x15780b2e0c2ec716ull, 0x6104d9866d113a7eull, 0xae17533239e499a1ull,
              0xecb8ad4703b360a1ull}},
    };
    int bad = 0;
    for (int g = 0; g < 2; g++) {
        Rng r;
        rng_seed(&r, golden[g].seed);
        for (int i = 0; i < 4; i++) {
            uint64_t v = rng_u64(&r);
            if (v != golden[g].out[i]) {
                bad++;
                printf("  seed %llu output %d: 0x%016llx, want 0x%016llx\n",
                       (unsigned long long)golden[g].seed, i, (unsigned long long)v,
                       (unsigned long long)golden[g].out[i]);
            }
        }
    }
    test_report(ts, bad == 0, "rng_golden_values", "%d of 8 differ from the reference", bad);
}

static void test_determinism(TestState *ts) {
    Rng a, b;
    rng_seed(&a, 1337);
    rng_seed(&b, 1337);
    int differ = 0;
    for (int i = 0; i < 100000; i++) differ += rng_u64(&a) != rng_u64(&b);
    float x[256], y[256];
    rng_seed(&a, 5);
    rng_seed(&b, 5);
    rng_fill_normal(&a, x, 256, 0.0f, 0.02f);
    rng_fill_normal(&b, y, 256, 0.0f, 0.02f);
    differ += memcmp(x, y, sizeof x) != 0;
    test_report(ts, differ == 0, "rng_same_seed_same_stream", "%d differences", differ);

    // Neighbouring seeds must give unrelated streams (splitmix64's job): no equal
    // outputs at the same position; for 64-bit values even one would be suspicious.
    rng_seed(&a, 1);
    rng_seed(&b, 2);
    int equal = 0;
    for (int i = 0; i < 100000; i++) equal += rng_u64(&a) == rng_u64(&b);
    test_report(ts, equal == 0, "rng_different_seeds_differ", "%d equal outputs in 100000", equal);
}

// Upper tail of the chi-squared distribution for an even number of degrees of
// freedom: P(X > x) = e^(-x/2) * sum_{k < dof/2} (x/2)^k / k!.
static double chi2_sf_even(double x, int dof) {
    double term = 1, sum = 0;
    for (int k = 0; k < dof / 2; k++) {
        if (k) term *= (x / 2) / k;
        sum += term;
    }
    return exp(-x / 2) * sum;
}

static double chi2(const long *count, int k, double expected) {
    double c = 0;
    for (int i = 0; i < k; i++) c += ((double)count[i] - expected) * ((double)count[i] - expected) / expected;
    return c;
}

static void test_below(TestState *ts) {
    Rng r;
    rng_seed(&r, 99);
    enum { N = 700000 };

    // Small n: 7 buckets, 6 degrees of freedom.
    long c7[7] = {0};
    int out_of_range = 0;
    for (int i = 0; i < N; i++) {
        uint32_t v = rng_below(&r, 7);
        if (v >= 7) out_of_range++;
        else c7[v]++;
    }
    double x7 = chi2(c7, 7, N / 7.0), p7 = chi2_sf_even(x7, 6);
    test_report(ts, out_of_range == 0 && p7 > 1e-6, "rng_below_7_uniform",
                "chi2 %.2f (6 dof), p %.3g, %d out of range", x7, p7, out_of_range);

    // n = 3 * 2^30, where the naive methods are most biased. x % n gives [0, 2^30)
    // twice the probability of the rest: bucket by v / 2^30 sees 1/2, 1/4, 1/4.
    // Multiply-shift without rejection gives every third value two preimages:
    // bucket by v % 3 sees 1/2, 1/4, 1/4. Unbiased: 1/3 each in both.
    const uint32_t n = 3u << 30;
    long hi[3] = {0}, mod3[3] = {0};
    for (int i = 0; i < N; i++) {
        uint32_t v = rng_below(&r, n);
        if (v >= n) {
            out_of_range++;
            continue;
        }
        hi[v >> 30]++;
        mod3[v % 3]++;
    }
    double xh = chi2(hi, 3, N / 3.0), xm = chi2(mod3, 3, N / 3.0);
    double ph = chi2_sf_even(xh, 2), pm = chi2_sf_even(xm, 2);
    test_report(ts, out_of_range == 0 && ph > 1e-6 && pm > 1e-6, "rng_below_unbiased_large_n",
                "n=3*2^30: chi2 by range %.2f (p %.3g), by residue %.2f (p %.3g)", xh, ph, xm, pm);

    int bad = 0;
    for (int i = 0; i < 1000; i++) bad += rng_below(&r, 1) != 0;
    for (int i = 0; i < 1000; i++) bad += rng_below(&r, UINT32_MAX) >= UINT32_MAX;
    test_report(ts, bad == 0, "rng_below_edges", "n=1 and n=2^32-1: %d out of range", bad);

    // An empty range is a caller bug, not a value to make up.
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(99);
        rng_below(&r, 0);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    test_report(ts, WIFEXITED(status) && WEXITSTATUS(status) == 1, "rng_below_zero_dies",
                "child exit status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static void test_uniform(TestState *ts) {
    Rng r;
    rng_seed(&r, 2024);
    enum { N = 1000000 };
    double sum = 0;
    int bad = 0;
    for (int i = 0; i < N; i++) {
        double u = rng_uniform(&r);
        if (!(u >= 0 && u < 1)) bad++;
        double k = u * 0x1.0p53;  // 53-bit grid: k must be a whole number
        if (k != floor(k)) bad++;
        sum += u;
    }
    // Mean of N uniforms: 1/2 with standard error sqrt(1/12/N).
    double mean = sum / N, se = sqrt(1.0 / 12.0 / N);
    test_report(ts, bad == 0 && fabs(mean - 0.5) < 5 * se, "rng_uniform_range_and_mean",
                "mean %.5f (|dev| %.2f se), %d outside [0,1) or off the 2^-53 grid", mean,
                fabs(mean - 0.5) / se, bad);
}

static void test_normal(TestState *ts) {
    Rng r;
    rng_seed(&r, 31337);
    enum { N = 1000000 };
    double s1 = 0, s2 = 0, s4 = 0;
    long within1 = 0;
    int nonfinite = 0;
    for (int i = 0; i < N; i++) {
        double z = rng_normal(&r);
        if (!isfinite(z)) nonfinite++;
        s1 += z;
        s2 += z * z;
        s4 += z * z * z * z;
        within1 += fabs(z) < 1;
    }
    double mean = s1 / N, m2 = s2 / N, m4 = s4 / N, frac = (double)within1 / N;
    // Standard errors for N standard normals:
    //   mean: 1/sqrt(N); E[z^2] = 1: sqrt(Var z^2 / N) = sqrt(2/N);
    //   E[z^4] = 3: sqrt((E z^8 - 9) / N) = sqrt(96/N) (tails: a wrong transform
    //   that gets the variance right still misses this);
    //   P(|z| < 1) = 0.682689: sqrt(p(1-p)/N).
    const double p1 = 0.6826894921370859;
    double se_mean = 1 / sqrt((double)N), se_m2 = sqrt(2.0 / N), se_m4 = sqrt(96.0 / N),
           se_p = sqrt(p1 * (1 - p1) / N);
    int ok = nonfinite == 0 && fabs(mean) < 5 * se_mean && fabs(m2 - 1) < 5 * se_m2 &&
             fabs(m4 - 3) < 5 * se_m4 && fabs(frac - p1) < 5 * se_p;
    test_report(ts, ok, "rng_normal_moments",
                "mean %.4f (%.1f se), E[z^2] %.4f (%.1f se), E[z^4] %.3f (%.1f se), "
                "P(|z|<1) %.4f (%.1f se)",
                mean, fabs(mean) / se_mean, m2, fabs(m2 - 1) / se_m2, m4, fabs(m4 - 3) / se_m4,
                frac, fabs(frac - p1) / se_p);

    // rng_fill_normal is mean + std * rng_normal, element by element, same stream.
    enum { M = 200000 };
    static float x[M];
    Rng a, b;
    rng_seed(&a, 8);
    rng_seed(&b, 8);
    rng_fill_normal(&a, x, M, 3.0f, 2.0f);
    int mismatch = 0;
    double fs = 0, fss = 0;
    for (int i = 0; i < M; i++) {
        float want = (float)(3.0 + 2.0 * rng_normal(&b));
        mismatch += memcmp(&x[i], &want, sizeof want) != 0;
        fs += x[i];
        fss += ((double)x[i] - 3) * ((double)x[i] - 3);
    }
    double fmean = fs / M, fstd = sqrt(fss / M);
    // Standard error of the std estimate: std / sqrt(2M).
    int ok2 = mismatch == 0 && fabs(fmean - 3) < 5 * 2 / sqrt((double)M) &&
              fabs(fstd - 2) < 5 * 2 / sqrt(2.0 * M);
    test_report(ts, ok2, "rng_fill_normal_mean_std", "mean %.4f std %.4f, %d differ from rng_normal",
                fmean, fstd, mismatch);
}

int main(void) {
    TestState ts = {0};
    test_golden(&ts);
    test_determinism(&ts);
    test_below(&ts);
    test_uniform(&ts);
    test_normal(&ts);
    return test_finish(&ts);
}
