// comm_error.c — what sending gradients as bf16 costs in accuracy, against the
// world size (stage 06; `make stage-6` sweeps --np).
//
//   build/mp_comm_error --np 4 [--count 1048576] [--seed 1]
//
// Every rank holds a gradient-like vector (normal, std 1e-3, its own seed), first
// rounded to bf16 (mixed-bf16 computes its gradients in bf16). Against the exact sum
// of those vectors (in double, every rank can compute it), the program measures:
//   fp32   the ring all-reduce of the vectors as fp32: p - 1 fp32 roundings
//   bf16   the ring all-reduce as bf16 (collectives.h: each addition in fp32, its
//          result rounded to bf16: p - 1 bf16 roundings)
//   ideal  the exact sum rounded to bf16 once: the best any bf16 result can be
// as relative errors ||got - exact|| / ||exact||, and the bytes rank 0 sent for each.
// One line, from rank 0:
//   COMMERR np=4 count=1048576 fp32=... bf16=... ideal=... bytes_fp32=... bytes_bf16=...
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collectives.h"
#include "flags.h"
#include "rng.h"

// Rank r's vector, as every rank can draw it: bf16 values in fp32 slots.
static void draw(float *x, size_t n, uint64_t seed, int r) {
    Rng g;
    rng_seed(&g, seed * 1000003u + (uint64_t)r);
    rng_fill_normal(&g, x, n, 0.0f, 1e-3f);
    for (size_t i = 0; i < n; i++) x[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

static double rel_err(const float *got, const double *exact, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = got[i] - exact[i];
        num += d * d;
        den += exact[i] * exact[i];
    }
    return sqrt(num / den);
}

int main(int argc, char **argv) {
    int np = 2, count = 1 << 20;
    unsigned long long seed = 1;
    double timeout = 60;
    Flag flags[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch on this machine"),
        F_INT("--count", &count, 1, 1 << 28, "gradient elements per rank"),
        F_U64("--seed", &seed, 0, 1.8e19, "seed of the vectors"),
        F_DOUBLE("--timeout", &timeout, 0.1, 86400, "seconds any wait may take"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "mp_comm_error [flags]",
                "The error of a bf16 gradient all-reduce against the world size.");
    CommConfig cc = {.np = np, .timeout_s = timeout};
    Comm *c = comm_launch(&cc);
    Group *world = comm_world(c);
    int rank = comm_rank(c), p = comm_size(c);
    size_t n = (size_t)count;
    float *mine = malloc(n * sizeof(float)), *x32 = malloc(n * sizeof(float));
    float *x16f = malloc(n * sizeof(float)), *ideal = malloc(n * sizeof(float));
    uint16_t *x16 = malloc(n * sizeof(uint16_t));
    double *exact = calloc(n, sizeof(double));
    CHECK(mine && x32 && x16f && ideal && x16 && exact, "out of memory for %zu elements", n);
    for (int r = 0; r < p; r++) {  // the exact sum, in double (exact for p <= 2^29 bf16 values)
        draw(x32, n, seed, r);
        for (size_t i = 0; i < n; i++) exact[i] += x32[i];
    }
    draw(mine, n, seed, rank);

    const CommCounter *k = comm_counters(c);
    memcpy(x32, mine, n * sizeof(float));
    uint64_t b0 = k[COLL_ALLREDUCE].bytes_sent;
    allreduce(c, world, x32, n, DT_F32, ALGO_RING);
    uint64_t b1 = k[COLL_ALLREDUCE].bytes_sent;
    dtype_convert(x16, DT_BF16, mine, DT_F32, n);  // exact: the values are bf16 already
    allreduce(c, world, x16, n, DT_BF16, ALGO_RING);
    uint64_t b2 = k[COLL_ALLREDUCE].bytes_sent;
    dtype_convert(x16f, DT_F32, x16, DT_BF16, n);
    for (size_t i = 0; i < n; i++) ideal[i] = bf16_to_f32(f32_to_bf16((float)exact[i]));

    if (rank == 0) {
        printf("COMMERR np=%d count=%zu fp32=%.4e bf16=%.4e ideal=%.4e bytes_fp32=%llu "
               "bytes_bf16=%llu\n", p, n, rel_err(x32, exact, n), rel_err(x16f, exact, n),
               rel_err(ideal, exact, n), (unsigned long long)(b1 - b0),
               (unsigned long long)(b2 - b1));
        fflush(stdout);
    }
    free(mine); free(x32); free(x16f); free(ideal); free(x16); free(exact);
    comm_finalize(c);
    return 0;
}
