// perf.h — the numbers every run reports: FLOPs, MFU, and the CPU's sgemm ceiling.
#pragma once

// The median of n timings (sorts x in place): what every benchmark here reports.
double median(double *x, int n);

// Measured OpenBLAS sgemm rate (GFLOP/s) for an M x N x K product on `threads`
// threads: the median of several timed repetitions after one warm-up.
double sgemm_gflops(int M, int N, int K, int threads);
// The machine's practical peak for MFU on the CPU: sgemm on a large square (1024^3).
double cpu_peak_gflops(int threads);
