// bench_cp.c — how evenly ring attention spreads causal work: contiguous chunks against
// zigzag, each rank's (query, key) pairs counted and its block computations timed.
//
//   build/bench_cp --np 4 --seq 2048                 both placements, ring attention
//   build/bench_cp --np 2 --seq 4096 --out f.txt     (rank 0 also writes the table)
//
// The time is the CPU time of each rank's block computations (forward and backward), the
// least of --repeat passes (interference only adds to it), not wall-clock: with more ranks than cores a rank's wall-clock time also holds the
// turns it waited for a core, which says nothing about its own work. Printed per rank,
// with the imbalance max/min - 1 (zigzag's target: <= 5 %; contiguous: about 2cp-1 x
// between the last rank and the first).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cp.h"
#include "flags.h"
#include "rng.h"
#include "timer.h"

typedef struct { double cpu_s, wall_s; long long pairs; } RankWork;

static RankWork run_once(Comm *c, Ctx *ctx, int zigzag, int B, int T, int C, int NH, int reps) {
    Group *g = comm_world(c);
    int Tl = T / g->size;
    size_t n3 = (size_t)B * Tl * 3 * C, n1 = (size_t)B * Tl * C;
    float *qkv = xmalloc(sizeof(float) * n3), *dout = xmalloc(sizeof(float) * n1);
    float *out = xmalloc(sizeof(float) * n1), *lse = xmalloc(sizeof(float) * (size_t)B * NH * Tl);
    float *dqkv = xcalloc(n3, sizeof(float));
    Rng rng;
    rng_seed(&rng, 99 + (uint64_t)g->rank);
    rng_fill_normal(&rng, qkv, n3, 0.0f, 1.0f);
    rng_fill_normal(&rng, dout, n1, 0.0f, 1.0f);
    ContextParallel cp = {.comm = c, .group = g, .zigzag = zigzag, .algo = ALGO_PAIRWISE,
                          .ctx = ctx, .overlap = 1};
    RankWork w = {1e30, 1e30, 0};
    for (int i = 0; i < reps; i++) {  // the least of the passes: interference only adds
        comm_barrier(c, g);
        double t0 = now_seconds(), c0 = cp.compute_s;
        cp.pairs = 0;
        ring_attention_forward(&cp, out, lse, qkv, B, T, C, NH);
        ring_attention_backward(&cp, dqkv, dout, qkv, out, lse, B, T, C, NH);
        double wall = now_seconds() - t0, cpu = cp.compute_s - c0;
        w.cpu_s = cpu < w.cpu_s ? cpu : w.cpu_s;
        w.wall_s = wall < w.wall_s ? wall : w.wall_s;
        w.pairs = cp.pairs;
    }
    free(qkv); free(dout); free(out); free(lse); free(dqkv);
    return w;
}

int main(int argc, char **argv) {
    int np = 2, T = 2048, B = 1, C = 384, NH = 6, reps = 3;
    const char *out_path = NULL;
    Flag flags[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "context-parallel ranks (built-in launcher)"),
        F_INT("--seq", &T, 2, 1 << 20, "sequence length (a multiple of 2 x --np)"),
        F_INT("--batch", &B, 1, 1024, "sequences"),
        F_INT("--hidden", &C, 1, 1 << 16, "model width C (q, k, v each C)"),
        F_INT("--heads", &NH, 1, 1024, "attention heads (must divide --hidden)"),
        F_INT("--repeat", &reps, 1, 1000, "forward + backward passes per placement"),
        F_STRING("--out", &out_path, "also write the table to this file (rank 0)"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "bench_cp [flags]",
                "Ring attention's work per rank, contiguous against zigzag.");
    if (C % NH) flags_fail("--heads %d does not divide --hidden %d", NH, C);
    if (T % (2 * np)) flags_fail("--seq %d is not a multiple of 2 x --np = %d (zigzag's chunks)", T,
                                 2 * np);
    CommConfig cc = {.np = np, .timeout_s = 600};
    Comm *c = comm_launch(&cc);
    Group *g = comm_world(c);
    Ctx ctx;
    ctx_init(&ctx, DEV_CPU, 1, 0);
    FILE *out = g->rank == 0 && out_path ? fopen(out_path, "w") : NULL;
    CHECK(g->rank != 0 || !out_path || out, "--out %s: cannot open for writing", out_path);
    char line[256];
    snprintf(line, sizeof line, "# ring attention, %d ranks, B %d x T %d, C %d, %d heads, "
             "forward + backward, the least of %d passes\n# placement rank pairs cpu_ms wall_ms\n", np,
             B, T, C, NH, reps);
    if (g->rank == 0) { fputs(line, stdout); if (out) fputs(line, out); }
    for (int z = 0; z < 2; z++) {
        RankWork w = run_once(c, &ctx, z, B, T, C, NH, reps), all[COMM_MAX_RANKS];
        if (g->rank) { comm_send(c, g, 0, &w, sizeof w); continue; }
        all[0] = w;
        for (int q = 1; q < np; q++) comm_recv(c, g, q, &all[q], sizeof all[q]);
        double lo = all[0].cpu_s, hi = lo;
        long long plo = all[0].pairs, phi = plo;
        for (int q = 0; q < np; q++) {
            snprintf(line, sizeof line, "%s %d %lld %.1f %.1f\n", z ? "zigzag" : "contiguous", q,
                     all[q].pairs, all[q].cpu_s * 1e3, all[q].wall_s * 1e3);
            fputs(line, stdout);
            if (out) fputs(line, out);
            lo = all[q].cpu_s < lo ? all[q].cpu_s : lo, hi = all[q].cpu_s > hi ? all[q].cpu_s : hi;
            plo = all[q].pairs < plo ? all[q].pairs : plo, phi = all[q].pairs > phi ? all[q].pairs : phi;
        }
        snprintf(line, sizeof line, "# %s: pairs max/min %.3f, cpu time max/min %.3f\n",
                 z ? "zigzag" : "contiguous", (double)phi / plo, hi / lo);
        fputs(line, stdout);
        if (out) fputs(line, out);
    }
    if (out) fclose(out);
    ctx_destroy(&ctx);
    comm_finalize(c);
    return 0;
}
