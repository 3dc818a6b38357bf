// interval.c — how often to checkpoint: Young/Daly beside a simulation with failures.
//
//   build/ckpt_interval --ckpt-cost 60 --mtbf 6480 --restart 60 > sweep.dat
//   build/ckpt_interval --ckpt-cost 60 --gpus 16384       # the job's MTBF from the cited figures
//   build/ckpt_interval --table > table.dat               # the same at cluster scale
//   build/ckpt_interval --table --ckpt-cost 4.2           # ... with a measured cost as well
//
// The sweep simulates the run (goodput.c: failures drawn at the MTBF, a failure
// losing the work since the last checkpoint and costing a restart) at intervals from
// 0.1 to 10 times Young's, log spaced, plus Young's and Daly's own, and marks the best.
// Every interval sees the same failure times (one seed): the curve's differences are
// then the intervals' and not the draws', which a flat optimum needs.
//
// --table: the optimal interval and the best goodput a job can reach at 8 to 131,072
// GPUs, for checkpoints of 10, 60 and 300 s, with the job MTBFs of Meta's RSC clusters
// (measured where measured, projected where projected) and of Llama 3's 54 days.
// Output: whitespace-separated columns under a '#' header (gnuplot reads them;
// 07_fault_tolerance/plots_interval.gp draws both), and a RESULT line.
#include <math.h>
#include <stdio.h>

#include "flags.h"
#include "young_daly.h"

#define MAX_POINTS 1024

typedef struct {
    double C, M, R;
    double failures;  // expected failures per simulated run: horizon = failures · M
    unsigned long long seed;
} Setup;

static double simulate(const Setup *s, double C, double M, double T, GoodputStats *st) {
    return goodput_simulate(C, M, T, s->R, s->failures * M, s->seed, st);
}

// ---------------------------------------------------------------- the sweep

static void sweep(const Setup *s, int points, const char *mtbf_from) {
    double young = young_interval(s->C, s->M), daly = daly_interval(s->C, s->M), best_g;
    double best_model_T = goodput_best_interval(s->C, s->M, s->R, &best_g);
    printf("# ckpt_interval: checkpoint cost C = %g s, MTBF M = %g s = %.3g h (%s),"
           " restart R = %g s\n", s->C, s->M, s->M / 3600, mtbf_from, s->R);
    printf("# Young = %.1f s; Daly (2006, higher order) = %.1f s;"
           " Young - C = %.1f s (not Daly's)\n", young, daly, young - s->C);
    printf("# the model's optimum (goodput.c: exact for this simulation): T = %.1f s,"
           " goodput %.5f\n", best_model_T, best_g);
    printf("# simulated: %g expected failures per interval (horizon %.4g s), seed %llu, the same"
           " failure times for every interval\n", s->failures, s->failures * s->M, s->seed);
    printf("# T_s T_over_young goodput_sim goodput_model goodput_first_order failures checkpoints"
           " mark\n");

    // The log-spaced intervals with Young's and Daly's merged in, in order.
    double T[MAX_POINTS + 2];
    int n = 0;
    double extra[2] = {daly < young ? daly : young, daly < young ? young : daly};
    int e = 0;
    for (int i = 0; i < points; i++) {
        double t = young * pow(10.0, -1.0 + 2.0 * i / (points - 1));
        while (e < 2 && extra[e] <= t) T[n++] = extra[e++];
        if (n == 0 || T[n - 1] != t) T[n++] = t;  // (Young's own is a point of an odd-sized sweep)
    }
    while (e < 2) T[n++] = extra[e++];

    double g[MAX_POINTS + 2];
    GoodputStats st[MAX_POINTS + 2];
    int best = 0;
    for (int i = 0; i < n; i++) {
        g[i] = simulate(s, s->C, s->M, T[i], &st[i]);
        if (g[i] > g[best]) best = i;
    }
    for (int i = 0; i < n; i++) {
        char mark[32];
        snprintf(mark, sizeof mark, "%s%s%s%s", T[i] == young ? "young" : "",
                 T[i] == daly ? (T[i] == young ? ",daly" : "daly") : "",
                 i == best && (T[i] == young || T[i] == daly) ? "," : "", i == best ? "best" : "");
        printf("%.2f %.4f %.5f %.5f %.5f %ld %ld %s\n", T[i], T[i] / young, g[i],
               goodput_model(s->C, s->M, T[i], s->R), goodput_first_order(s->C, s->M, T[i], s->R),
               st[i].failures, st[i].checkpoints, mark[0] ? mark : "-");
    }
    double gy = simulate(s, s->C, s->M, young, NULL), gd = simulate(s, s->C, s->M, daly, NULL);
    if (g[best] > 0)
        printf("# best simulated T = %.1f s (%.2f x Young), goodput %.5f; at Young %.5f, at Daly "
               "%.5f (%.3f %% and %.3f %% below the best)\n", T[best], T[best] / young, g[best], gy,
               gd, 100 * (g[best] - gy) / g[best], 100 * (g[best] - gd) / g[best]);
    else  // every segment fails before its checkpoint is written: nothing is ever kept
        printf("# no interval makes progress: a failure comes (every %g s on average) before a "
               "checkpoint (%g s) and the work before it are done; the goodput is 0 at every T\n",
               s->M, s->C);
    printf("RESULT ckpt_interval young_s=%.1f daly_s=%.1f best_T_s=%.1f best_goodput=%.5f"
           " goodput_young=%.5f goodput_daly=%.5f model_T_s=%.1f model_goodput=%.5f\n", young,
           daly, T[best], g[best], gy, gd, best_model_T, best_g);
}

// ---------------------------------------------------------------- the cluster table

// The largest checkpoint cost at which the best goodput still reaches `target`; 0 when
// even free checkpoints cannot (the restarts alone cost more). The best goodput falls
// as C grows, so a bisection finds it.
static double cost_for_goodput(double M, double R, double target) {
    double g;
    goodput_best_interval(0, M, R, &g);
    if (g < target) return 0;
    double lo = 0, hi = M;
    for (int i = 0; i < 200 && hi - lo > 1e-9 * M; i++) {
        double c = 0.5 * (lo + hi);
        goodput_best_interval(c, M, R, &g);
        if (g >= target) lo = c; else hi = c;
    }
    return lo;
}

static void table(const Setup *s, double measured_cost) {
    const ClusterPoint *P;
    int np = cluster_points(&P);
    double costs[4] = {10, 60, 300, measured_cost};
    int nc = measured_cost > 0 ? 4 : 3;
    printf("# ckpt_interval --table: the best checkpoint interval and goodput at cluster scale,"
           " restart R = %g s%s\n", s->R,
           s->R == 0 ? " (--restart: 0 gives the checkpoints' own bound)" : "");
    printf("# job MTBF (mtbf_source): measured = Kokolis et al. 2024 (Meta RSC), measured job MTTF;"
           " projected = their projection from 6.50 failures per 1000 node-days;\n");
    printf("#   llama3 = Llama 3 (2024) §3.3.4: 419 unexpected interruptions in 54 days on 16,384"
           " H100s. (The 1/N projection gives %.1f h at 1,024 GPUs: measured is %.1f h.)\n",
           cluster_mtbf_projected(1024) / 3600, 7.9);
    printf("# one block per checkpoint cost (gnuplot: index i), the llama3 rows in the last;"
           " goodput_sim: simulated at Daly's interval, %g expected failures, seed %llu\n",
           s->failures, s->seed);
    const char *hdr = "# gpus mtbf_s mtbf_h mtbf_source ckpt_s young_s daly_s best_T_s"
                      " best_goodput goodput_sim\n";
    int blocks = 0;  // gnuplot's data sets are separated by two blank lines
    for (int pass = 0; pass < 2; pass++) {  // pass 0: Kokolis's points, pass 1: Llama 3's
        for (int c = 0; c < nc; c++) {
            if (pass == 0 || c == 0) {
                if (pass)
                    printf("\n\n# index %d: llama3, every checkpoint cost\n%s", blocks, hdr);
                else
                    printf("%s# index %d: checkpoint cost %g s%s\n%s", blocks ? "\n\n" : "", blocks,
                           costs[c], c == 3 ? " (measured: --ckpt-cost)" : "", hdr);
                blocks++;
            }
            for (int i = 0; i < np; i++) {
                int llama = P[i].source[0] == 'l';
                if (llama != pass) continue;
                double C = costs[c], M = P[i].mtbf_s, g;
                double T = goodput_best_interval(C, M, s->R, &g);
                double daly = daly_interval(C, M);
                printf("%d %.0f %.3f %s %g %.1f %.1f %.1f %.5f %.5f\n", P[i].gpus, M, M / 3600,
                       P[i].source, C, young_interval(C, M), daly, T, g,
                       simulate(s, C, M, daly, NULL));
            }
        }
    }
    printf("# the largest checkpoint cost that still allows 90 %% goodput (restart R = %g s):\n",
           s->R);
    for (int i = 0; i < np; i++)
        printf("#   %6d GPUs (%s, MTBF %.2f h): C <= %.1f s\n", P[i].gpus, P[i].source,
               P[i].mtbf_s / 3600, cost_for_goodput(P[i].mtbf_s, s->R, 0.9));
    int k = 0;
    for (int i = 0; i < np; i++) if (P[i].gpus == 16384 && P[i].source[0] == 'p') k = i;
    printf("RESULT ckpt_table gpus=%d mtbf_s=%.0f", P[k].gpus, P[k].mtbf_s);
    for (int c = 0; c < nc; c++) {
        double g;
        goodput_best_interval(costs[c], P[k].mtbf_s, s->R, &g);
        printf(" goodput_c%g=%.5f", costs[c], g);
    }
    printf(" max_cost_for_90pct_s=%.1f\n", cost_for_goodput(P[k].mtbf_s, s->R, 0.9));
}

int main(int argc, char **argv) {
    Setup s = {.R = 0, .failures = 1e5, .seed = 1};
    double C = 0, M = 0;
    int gpus = 0, points = 41, tab = 0;
    Flag flags[] = {
        F_DOUBLE_SENTINEL("--ckpt-cost", &C, 1e-6, 1e9, "0 = none",
                          "seconds one checkpoint stops training (needed unless --table)"),
        F_DOUBLE_SENTINEL("--mtbf", &M, 1e-3, 1e12, "0 = from --gpus",
                          "the job's mean time between failures, seconds"),
        F_INT_SENTINEL("--gpus", &gpus, 1, 1 << 24, "0 = none",
                       "the job's GPUs: its MTBF from the cited figures (goodput.c), or "
                       "their 1/N projection"),
        F_DOUBLE("--restart", &s.R, 0, 1e9,
                 "seconds a failure costs beyond the lost work (detect, restart, load)"),
        F_DOUBLE("--failures", &s.failures, 10, 1e8,
                 "expected failures per simulated run (the horizon is this x MTBF)"),
        F_U64("--seed", &s.seed, 0, 1e19, "the failure times' seed"),
        F_INT("--points", &points, 2, MAX_POINTS, "log-spaced intervals from 0.1 to 10 x Young's"),
        F_BOOL("--table", &tab, "the cluster-scale table instead of the sweep"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "ckpt_interval [flags]",
                "The checkpoint interval: Young's and Daly's formulas beside a simulation with "
                "failures drawn at the MTBF; --table: the same at 8 to 131,072 GPUs.");
    if (tab) {
        if (M > 0 || gpus > 0) flags_fail("--table takes its MTBFs from the cited figures: leave"
                                          " out --mtbf and --gpus");
        table(&s, C);
        return 0;
    }
    if (C <= 0) flags_fail("--ckpt-cost is needed (the seconds one checkpoint costs)");
    if ((M > 0) == (gpus > 0)) flags_fail("give one of --mtbf SECONDS or --gpus N");
    char from[160] = "given";
    if (gpus > 0) {
        const ClusterPoint *P;
        int np = cluster_points(&P);
        for (int i = 0; i < np && M == 0; i++)
            if (P[i].gpus == gpus) {
                M = P[i].mtbf_s;
                snprintf(from, sizeof from, "%s", P[i].what);
            }
        if (M == 0) {
            M = cluster_mtbf_projected(gpus);
            snprintf(from, sizeof from, "%d GPUs, projected as Kokolis et al. project: 6.50"
                     " failures per 1000 node-days; optimistic for small jobs (28.8 h at 1,024"
                     " GPUs, measured 7.9 h)", gpus);
        }
    }
    s.C = C;
    s.M = M;
    sweep(&s, points, from);
    return 0;
}
