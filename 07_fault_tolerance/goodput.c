// goodput.c — what a checkpoint interval buys, by simulation: failures drawn at
// random strike a run that computes T seconds and checkpoints C, over and over.
// Beside it the first-order goodput, the exact optimum of young_daly.c's model,
// and the failure rates of real clusters that the lesson's tables use.
#include <math.h>

#include "check.h"
#include "rng.h"
#include "young_daly.h"

// ---------------------------------------------------------------- the simulation

// A gap between failures of a Poisson process of mean M: exponential, by inversion.
// rng_uniform is in [0, 1), so log1p(-u) is finite.
static double next_gap(Rng *r, double M) {
    return -M * log1p(-rng_uniform(r));
}

// The run is a sequence of segments, T of compute then C of checkpoint; between two
// failures every segment completes, so the loop jumps over all of them at once and
// costs one iteration per failure, not per segment (a long horizon stays cheap).
double goodput_simulate(double C, double M, double T, double R, double horizon, uint64_t seed,
                        GoodputStats *out) {
    CHECK(C >= 0 && M > 0 && T > 0 && R >= 0 && horizon > 0,
          "goodput_simulate: need C >= 0, M > 0, T > 0, R >= 0, horizon > 0 (got %g %g %g %g %g)",
          C, M, T, R, horizon);
    Rng rng;
    rng_seed(&rng, seed);
    GoodputStats s = {.wall = horizon};
    const double seg = T + C;
    double t = 0;                      // wall clock; a segment begins at t
    double fail = next_gap(&rng, M);   // the next failure
    for (;;) {
        double stop = fail < horizon ? fail : horizon;
        double k = floor((stop - t) / seg);  // whole segments that end by `stop`
        if (k > 0) {
            s.useful += k * T;
            s.checkpoints += (long)k;
            t += k * seg;
        }
        // No failure before the horizon: the run ends inside a segment that no
        // checkpoint has saved yet; it is not counted as useful.
        if (fail >= horizon) break;
        // A failure inside the segment that began at t (in its compute or in its
        // checkpoint): all of that segment is lost.
        if (fail > t) s.lost += fail - t;
        s.failures++;
        t = fail;
        // The restart: R seconds, begun again by a failure that strikes during it
        // (the horizon may end it first: only the time before the horizon counts).
        for (;;) {
            fail = t + next_gap(&rng, M);
            if (fail >= t + R || fail >= horizon) {
                s.restarting += fmin(t + R, horizon) - t;
                t += R;
                break;
            }
            s.restarting += fail - t;
            s.failures++;
            t = fail;
        }
        if (t >= horizon) break;
    }
    if (out) *out = s;
    return s.useful / horizon;
}

// Expanding e^x ≈ 1 + x + x²/2 for x = τ/M and e^(R/M) ≈ 1 + R/M: a fraction
// T/(T+C) of the time computes, and each failure (1/M of them per second) costs half a
// segment plus the restart. To first order in C/T, T/M and R/M that is
// 1 - C/T - (T/2 + R)/M (C/(T+C) -> C/T and (T+C)/2 -> T/2 drop second-order terms);
// the product form below keeps the first factor exact, which matters when T is as
// small as C. It undershoots the exact form once T nears M (the plot shows by how much).
double goodput_first_order(double C, double M, double T, double R) {
    double g = T / (T + C) * (1.0 - ((T + C) / 2.0 + R) / M);
    return g > 0 ? g : 0;
}

// d/dT log goodput_model = 0 is T = M·(1 - e^(-(T+C)/M)): with u = T/M and c = C/M,
// h(u) = 1 - e^(-(u+c)) - u, which is positive at u = 0 (for C > 0), negative at
// u = 1 and decreasing in between: one root, a bisection finds it. Young's and Daly's
// formulas approximate this root (tests/test_interval.c: Daly's within a fraction of
// a percent at C << M).
double goodput_best_interval(double C, double M, double R, double *best_goodput) {
    double T = 0;
    if (C > 0) {
        double lo = 0, hi = 1, c = C / M;
        for (int i = 0; i < 200 && hi - lo > 1e-15; i++) {
            double u = 0.5 * (lo + hi);
            if (-expm1(-(u + c)) - u > 0) lo = u; else hi = u;
        }
        T = 0.5 * (lo + hi) * M;
    }
    // C = 0: checkpoints are free, the limit T -> 0 loses nothing but the restarts.
    if (best_goodput) *best_goodput = C > 0 ? goodput_model(C, M, T, R) : exp(-R / M);
    return T;
}

// ---------------------------------------------------------------- cluster-scale figures

#define HOUR 3600.0
#define DAY 86400.0

// The cited points (docs/formulas.md §10). Kokolis et al. (arXiv 2410.21680), Meta's RSC
// clusters: a job's mean time to failure measured at 8 and 1,024 GPUs, projected from
// the per-node failure rate at 16,384 and 131,072. Llama 3 (arXiv 2407.21783, §3.3.4,
// Table 5): 419 unexpected interruptions in 54 days on 16,384 H100s. The 47 planned
// ones are left out: a planned stop can checkpoint first and lose nothing.
static const ClusterPoint POINTS[] = {
    {8, 47.7 * DAY, "measured", "Kokolis et al. 2024, job MTTF at 8 GPUs, measured: 47.7 days"},
    {1024, 7.9 * HOUR, "measured", "Kokolis et al. 2024, job MTTF at 1,024 GPUs, measured: 7.9 h"},
    {16384, 1.8 * HOUR, "projected",
     "Kokolis et al. 2024, job MTTF at 16,384 GPUs, projected: 1.8 h"},
    {16384, 54.0 * DAY / 419.0, "llama3",
     "Llama 3 405B pre-training, 54 days / 419 unexpected interruptions: 3.09 h"},
    {131072, 0.23 * HOUR, "projected",
     "Kokolis et al. 2024, job MTTF at 131,072 GPUs, projected: 0.23 h"},
};

int cluster_points(const ClusterPoint **points) {
    *points = POINTS;
    return (int)(sizeof POINTS / sizeof POINTS[0]);
}

// 6.50 failures per 1000 node-days (RSC-1) and 8 GPUs a node: a job on N GPUs fails at
// N/8 · 0.0065 per day. This reproduces the projections (1.80 h at 16,384 GPUs, 0.225 h
// at 131,072) but not the measured 7.9 h at 1,024 GPUs (it gives 28.8 h): the small
// jobs' measured rate is not a 1/N extrapolation, so measured figures win where they exist.
double cluster_mtbf_projected(int gpus) {
    return DAY / (gpus / 8.0 * 6.50e-3);
}
