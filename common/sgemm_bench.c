// sgemm_bench.c — OpenBLAS sgemm GFLOP/s on this machine: the ceiling that
// bench-core compares training throughput against.
//
//   build/sgemm_bench --threads 1 --width 256 --rows 2048
//
// Prints the rate for the square 1024^3 product and for the four GEMM shapes of
// a transformer layer of width C over `rows` tokens (qkv, attention projection,
// MLP up, MLP down), and their FLOP-weighted harmonic mean: the rate the model's
// own matrix multiplies could reach if nothing else took time.
#include <stdio.h>

#include "flags.h"
#include "perf.h"

int main(int argc, char **argv) {
    int threads = 1, C = 256, rows = 2048;
    Flag flags[] = {
        F_INT("--threads", &threads, 1, 1024, "BLAS threads"),
        F_INT("--width", &C, 1, 65536, "model width C"),
        F_INT("--rows", &rows, 1, 1 << 24, "tokens per batch B*T"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "sgemm_bench [flags]",
                "Measures OpenBLAS sgemm GFLOP/s.");
    double sq = sgemm_gflops(1024, 1024, 1024, threads);
    printf("sgemm %5d x %5d x %5d : %8.1f GFLOP/s\n", 1024, 1024, 1024, sq);
    // The layer's GEMMs, forward shapes (M = rows, N = out, K = in); FLOPs weights 3:1:4:4.
    int shapes[4][2] = {{3 * C, C}, {C, C}, {4 * C, C}, {C, 4 * C}};
    double flops = 0, secs = 0;
    for (int i = 0; i < 4; i++) {
        double r = sgemm_gflops(rows, shapes[i][0], shapes[i][1], threads);
        double f = 2.0 * rows * shapes[i][0] * shapes[i][1];
        flops += f;
        secs += f / (r * 1e9);
        printf("sgemm %5d x %5d x %5d : %8.1f GFLOP/s\n", rows, shapes[i][0], shapes[i][1], r);
    }
    printf("RESULT sgemm square_gflops=%.2f layer_gflops=%.2f threads=%d\n", sq, flops / secs * 1e-9,
           threads);
    return 0;
}
