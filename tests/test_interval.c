// test_interval.c — stage 07's checkpoint interval: Young's and Daly's formulas against
// their published test vector, the failure simulation against its exact expectation and
// the first-order formula, and the cluster figures against their sources.
//
// Sources (docs/formulas.md §10): Young, CACM 17(9), 1974; Daly, FGCS 22(3), 2006 (the
// higher-order estimate); Kokolis et al., arXiv 2410.21680 (Meta's RSC clusters);
// Llama 3, arXiv 2407.21783, §3.3.4 and Table 5.
//
// The statistical checks state their tolerance. A run of horizon H sees n = H/M
// failures on average; each throws away X seconds, and the goodput is T/(T+C) of what
// is left: its spread is that of a compound Poisson sum, sd = T/τ · sqrt(n·E[X²]) / H,
// τ = T + C. X is the part of a segment done before the failure (no larger, in
// distribution, than uniform over [0, τ], nor than an exponential of mean M) plus the
// restart R: E[X²] <= s2 + 2·s1·R + R², s1 = min(τ/2, M), s2 = min(τ²/3, 2M²). (Over
// 3000 seeds of each case below, the measured spread was 0.97 to 0.43 times this: close
// where T << M, loose where a segment outlasts M.) Each check allows 5 of these.
#include <math.h>
#include <stdio.h>

#include "../07_fault_tolerance/young_daly.h"
#include "harness.h"

#define HOUR 3600.0
#define DAY 86400.0

// The goodput's standard deviation for n = horizon / M expected failures (see the top).
static double goodput_sigma(double C, double T, double R, double M, double horizon) {
    double tau = T + C, n = horizon / M;
    double s1 = fmin(tau / 2, M), s2 = fmin(tau * tau / 3, 2 * M * M);
    return T / tau * sqrt(n * (s2 + 2 * s1 * R + R * R)) / horizon;
}

// ---------------------------------------------------------------- the formulas

static void test_formulas(TestState *ts) {
    const double C = 60, M = 1.8 * HOUR;  // docs/formulas.md §10.3's test vector
    double y = young_interval(C, M), d = daly_interval(C, M), simple = sqrt(2 * C * M) - C;
    test_report(ts, near(y, 881.8, 0.05), "interval.young_vector",
                "C = 60 s, M = 1.8 h: young_interval = %.2f s (want 881.8)", y);
    test_report(ts, near(d, 842.3, 0.05), "interval.daly_vector",
                "Daly's higher-order form = %.2f s (want 842.3)", d);
    test_report(ts, near(simple, 821.8, 0.05) && near(d, 842.3, 0.05) && fabs(d - simple) > 10 &&
                    fabs(d - (sqrt(2 * C * M + C * C) - C)) > 10,
                "interval.daly_not_the_simple_forms",
                "daly_interval = %.2f s (want 842.3), not one of the simpler forms some software "
                "calls Daly's (%.2f s, %.2f s)",
                d, simple, sqrt(2 * C * M + C * C) - C);
    int ok = daly_interval(2 * M, M) == M && daly_interval(3 * M, M) == M &&
             daly_interval(100 * M, M) == M && daly_interval(1.99 * M, M) < M;
    test_report(ts, ok, "interval.daly_large_cost",
                "C >= 2M gives M (C = 2M, 3M, 100M); C = 1.99M gives %.3f M",
                daly_interval(1.99 * M, M) / M);
    // As C/M -> 0 the higher-order terms vanish: Daly -> Young.
    double r = daly_interval(1e-3, M) / young_interval(1e-3, M);
    test_report(ts, fabs(r - 1) < 1e-3, "interval.daly_to_young",
                "C = 1 ms, M = 1.8 h: Daly / Young = %.6f (want 1 within 1e-3)", r);
}

// ---------------------------------------------------------------- the simulation

static void test_simulation(TestState *ts) {
    GoodputStats a, b, c;
    // Deterministic: same seed, same run, bit for bit; another seed, another run.
    double g1 = goodput_simulate(60, 6480, 842, 60, 1e7, 7, &a);
    double g2 = goodput_simulate(60, 6480, 842, 60, 1e7, 7, &b);
    double g3 = goodput_simulate(60, 6480, 842, 60, 1e7, 8, &c);
    test_report(ts, g1 == g2 && a.failures == b.failures && a.lost == b.lost && g3 != g1,
                "interval.sim_deterministic",
                "seed 7 twice: %.9f and %.9f (%ld failures each); seed 8: %.9f", g1, g2,
                a.failures, g3);

    // No failures (M far beyond the horizon): goodput is T/(T+C), to rounding.
    double T = 600, C = 60, H = 1000 * (T + C);
    double g = goodput_simulate(C, 1e30, T, 60, H, 1, &a);
    test_report(ts, fabs(g - T / (T + C)) < 1e-12 && a.failures == 0 && a.checkpoints == 1000,
                "interval.sim_no_failures",
                "T = 600 s, C = 60 s, 1000 segments: goodput %.12f (want T/(T+C) = %.12f), "
                "%ld failures, %ld checkpoints", g, T / (T + C), a.failures, a.checkpoints);

    // Bookkeeping: useful + checkpoints + lost + restarts fill the wall clock, but for
    // the last, unfinished segment, which is shorter than T + C.
    g = goodput_simulate(60, 6480, 842, 300, 1e8, 3, &a);
    double gap = a.wall - (a.useful + a.checkpoints * 60.0 + a.lost + a.restarting);
    test_report(ts, gap > -1e-9 * a.wall && gap < 842 + 60 && a.useful == a.checkpoints * 842.0,
                "interval.sim_accounting",
                "useful %.0f + checkpoints %.0f + lost %.0f + restarts %.0f = wall %.0f - %.1f s "
                "(the last, unfinished segment)", a.useful, a.checkpoints * 60.0, a.lost,
                a.restarting, a.wall, gap);

    // Free checkpoints and restarts: each failure loses half a segment on average, so
    // goodput ≈ 1 - T/(2M). The formula's next term is T²/(12M²) (the exact model's
    // expansion, T/M / (e^(T/M) - 1)); allowed on top of 5 sigma.
    double M = 6480;
    T = 0.02 * M;
    H = 1e5 * M;
    g = goodput_simulate(0, M, T, 0, H, 11, &a);
    double want = 1 - T / (2 * M), sig = goodput_sigma(0, T, 0, M, H);
    double tol = 5 * sig + T * T / (12 * M * M);
    test_report(ts, fabs(g - want) <= tol, "interval.sim_first_order_c0_r0",
                "C = R = 0, T = M/50, %ld failures: goodput %.6f, 1 - T/(2M) = %.6f, off by %.2e "
                "(tol %.2e = 5 sigma + T^2/(12M^2); sigma %.2e)", a.failures, g, want,
                fabs(g - want), tol, sig);

    // Against the exact expectation (goodput_model), where the first-order formula is
    // poor: long intervals, dear checkpoints, restarts that fail too.
    const struct { double C, M, T, R; } cs[] = {
        {60, 6480, 842.3, 60},      // the test vector, at Daly's interval
        {60, 6480, 3 * 6480, 60},   // T = 3M: most segments fail
        {600, 1000, 400, 500},      // C and R comparable to M
        {10, 828, 120, 120},        // 131,072 GPUs' projected MTBF
    };
    for (int i = 0; i < 4; i++) {
        H = 1e5 * cs[i].M;
        g = goodput_simulate(cs[i].C, cs[i].M, cs[i].T, cs[i].R, H, 100 + i, &a);
        want = goodput_model(cs[i].C, cs[i].M, cs[i].T, cs[i].R);
        sig = goodput_sigma(cs[i].C, cs[i].T, cs[i].R, cs[i].M, H);
        char name[64];
        snprintf(name, sizeof name, "interval.sim_model.%d", i);
        test_report(ts, fabs(g - want) <= 5 * sig, name,
                    "C %g M %g T %g R %g: simulated %.5f, model %.5f, off by %.2e (5 sigma = %.2e; "
                    "%ld failures; first order %.5f)", cs[i].C, cs[i].M, cs[i].T, cs[i].R, g,
                    want, fabs(g - want), 5 * sig, a.failures,
                    goodput_first_order(cs[i].C, cs[i].M, cs[i].T, cs[i].R));
    }
}

// ---------------------------------------------------------------- the optimum

// build/ckpt_interval's sweep, and the exact model's optimum, beside the formulas.
static void test_sweep(TestState *ts, double C, double M, double R, double H, double young,
                       double daly) {
    // build/ckpt_interval's sweep: 41 intervals from 0.1 to 10 x Young's and Young's and
    // Daly's own, one seed for all (the same failure times: the differences are the
    // intervals').
    double bestT = 0, bestg = -1;
    for (int i = 0; i < 41; i++) {
        double T = young * pow(10.0, -1.0 + 2.0 * i / 40);
        double g = goodput_simulate(C, M, T, R, H, 1, NULL);
        if (g > bestg) bestg = g, bestT = T;
    }
    double gd = goodput_simulate(C, M, daly, R, H, 1, NULL);
    double gy = goodput_simulate(C, M, young, R, H, 1, NULL);
    if (gd > bestg) bestg = gd, bestT = daly;  // as build/ckpt_interval's sweep: both in it
    if (gy > bestg) bestg = gy, bestT = young;
    // The curve is flat near its top: compare goodputs, and the interval only loosely.
    test_report(ts, bestg - gd <= 0.005 * bestg && bestg - gy <= 0.005 * bestg,
                "interval.sweep_daly_near_best",
                "C 60 s, M 6480 s, R 60 s: the sweep's best %.5f at T = %.1f s; at Daly "
                "(%.1f s) %.5f, at Young %.5f (want within 0.5 %% of the best)", bestg, bestT,
                daly, gd, gy);
    test_report(ts, bestT > young / 2 && bestT < 2 * young, "interval.sweep_best_near_young",
                "the best interval %.1f s = %.2f x Young's (want within [0.5, 2])", bestT,
                bestT / young);

    // The exact model's optimum (a root, found by bisection): it is a maximum, and
    // Daly's formula lands much closer to it than Young's.
    double gbest, Tb = goodput_best_interval(C, M, R, &gbest);
    int ok = gbest > 0 && gbest >= goodput_model(C, M, 0.99 * Tb, R) &&
             gbest >= goodput_model(C, M, 1.01 * Tb, R);
    test_report(ts, ok && fabs(daly - Tb) < 0.005 * Tb && fabs(daly - Tb) < fabs(young - Tb),
                "interval.model_optimum",
                "exact optimum T = %.2f s (goodput %.5f); Daly %.2f s (%.3f %% off), Young %.2f s "
                "(%.3f %% off)", Tb, gbest, daly, 100 * fabs(daly - Tb) / Tb, young,
                100 * fabs(young - Tb) / Tb);
}

static void test_optimum(TestState *ts) {
    const double C = 60, M = 6480, R = 60, H = 1e5 * M;
    double young = young_interval(C, M), daly = daly_interval(C, M);
    // The simulation needs positive intervals: without them there is nothing to sweep.
    if (!(young > 0 && daly > 0 && isfinite(young) && isfinite(daly))) {
        const char *names[] = {"interval.sweep_daly_near_best", "interval.sweep_best_near_young",
                               "interval.model_optimum"};
        for (int i = 0; i < 3; i++)
            test_report(ts, 0, names[i], "young_interval(60, 6480) = %g, daly_interval = %g: an "
                        "interval must be a positive number of seconds", young, daly);
    } else {
        test_sweep(ts, C, M, R, H, young, daly);
    }
    double gbest, Tb = goodput_best_interval(C, M, R, &gbest);
    double g0, T0 = goodput_best_interval(C, M, 0, &g0);
    test_report(ts, T0 == Tb && g0 > 0 && fabs(gbest - g0 * exp(-R / M)) < 1e-12,
                "interval.restart_does_not_move_optimum",
                "the best interval is the same with a restart cost R as without (R = 0: T = %.2f s, "
                "goodput %.5f; R = 60 s: T = %.2f s, goodput %.5f; their ratio %.5f must not "
                "depend on T)",
                T0, g0, Tb, gbest, g0 > 0 ? gbest / g0 : 0.0);
    // Failures rarer than anything (M = 1e15 s): the goodput is the time not spent
    // checkpointing, T / (T + C) = 0.5 here. e^x - 1 for x = 2e-15 keeps one significant
    // digit of the difference; expm1 keeps them all.
    double rare = goodput_model(1, 1e15, 1, 0);
    test_report(ts, fabs(rare - 0.5) < 1e-9, "interval.goodput_rare_failures",
                "C = 1 s, T = 1 s, M = 1e15 s, R = 0: goodput %.12f (want T / (T + C) = 0.5 "
                "within 1e-9: e^x - 1 of a tiny x cancels; use expm1)", rare);
}

// ---------------------------------------------------------------- cluster figures

static const ClusterPoint *find(int gpus, const char *source) {
    const ClusterPoint *P;
    int n = cluster_points(&P);
    for (int i = 0; i < n; i++)
        if (P[i].gpus == gpus && strcmp(P[i].source, source) == 0) return &P[i];
    return NULL;
}

static void test_cluster(TestState *ts) {
    const struct { int gpus; const char *source; double mtbf_s; const char *cited; } want[] = {
        {8, "measured", 47.7 * DAY, "47.7 days"},
        {1024, "measured", 7.9 * HOUR, "7.9 h"},
        {16384, "projected", 1.8 * HOUR, "1.8 h"},
        {131072, "projected", 0.23 * HOUR, "0.23 h"},
        {16384, "llama3", 54 * DAY / 419, "54 days / 419 unexpected interruptions"},
    };
    for (int i = 0; i < 5; i++) {
        const ClusterPoint *p = find(want[i].gpus, want[i].source);
        char name[64];
        snprintf(name, sizeof name, "interval.cluster.%s_%d", want[i].source, want[i].gpus);
        test_report(ts, p && near(p->mtbf_s, want[i].mtbf_s, 1e-9 * want[i].mtbf_s), name,
                    "%d GPUs, %s: MTBF %.1f s (want %.1f s = %s)", want[i].gpus, want[i].source,
                    p ? p->mtbf_s : 0.0, want[i].mtbf_s, want[i].cited);
    }
    // Kokolis et al.'s projection: 6.50 failures per 1000 node-days, 8 GPUs a node.
    double p16 = cluster_mtbf_projected(16384) / HOUR, p131 = cluster_mtbf_projected(131072) / HOUR;
    double p1k = cluster_mtbf_projected(1024) / HOUR;
    test_report(ts, near(p16, 1.80, 0.005) && near(p131, 0.225, 0.0005) && near(p1k, 28.8, 0.05),
                "interval.cluster.projection",
                "24 h / (N/8 x 0.0065): %.3f h at 16,384, %.4f h at 131,072 (the cited 1.8 and "
                "0.23), %.1f h at 1,024 (measured: 7.9 h, not a 1/N law)", p16, p131, p1k);
    // Their claim: 90 % effective training time at about 12k GPUs needs ~10 s checkpoints.
    // This model (no restart cost) agrees on the order: 10 s clears 90 %, 60 s does not.
    double M12 = cluster_mtbf_projected(12288), g10, g60;
    goodput_best_interval(10, M12, 0, &g10);
    goodput_best_interval(60, M12, 0, &g60);
    test_report(ts, g10 >= 0.9 && g60 < 0.9, "interval.cluster.ten_seconds_at_12k",
                "12,288 GPUs (MTBF %.2f h, projected): best goodput %.4f with 10 s checkpoints, "
                "%.4f with 60 s", M12 / HOUR, g10, g60);
}

int main(void) {
    // The checks `make grade-7 PART=young_daly` scores (07_fault_tolerance/exercises/
    // parts.txt): announced, so that one a crash kept from reporting is named.
    printf("PLAN interval.young_vector\nPLAN interval.daly_vector\nPLAN interval.daly_large_cost\n"
           "PLAN interval.daly_not_the_simple_forms\nPLAN interval.daly_to_young\n"
           "PLAN interval.sim_model.0\nPLAN interval.sim_model.1\nPLAN interval.sim_model.2\n"
           "PLAN interval.sim_model.3\nPLAN interval.sweep_daly_near_best\n"
           "PLAN interval.sweep_best_near_young\nPLAN interval.model_optimum\n"
           "PLAN interval.restart_does_not_move_optimum\nPLAN interval.cluster.ten_seconds_at_12k\n"
           "PLAN interval.goodput_rare_failures\n");
    fflush(stdout);  // before any check: a crash in the first must not lose the plan
    TestState ts = {0};
    test_formulas(&ts);
    test_simulation(&ts);
    test_optimum(&ts);
    test_cluster(&ts);
    return test_finish(&ts);
}
