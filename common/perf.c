// perf.c — measuring the sgemm ceiling that CPU MFU is quoted against.
#include <cblas.h>
#include <stdlib.h>

#include "check.h"
#include "perf.h"
#include "rng.h"
#include "timer.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median(double *x, int n) {
    qsort(x, n, sizeof(double), cmp_double);
    return x[n / 2];
}

double sgemm_gflops(int M, int N, int K, int threads) {
    openblas_set_num_threads(threads);
    float *a = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)K * N);
    float *c = malloc(sizeof(float) * (size_t)M * N);
    CHECK(a && b && c, "sgemm_gflops: out of memory");
    Rng r;
    rng_seed(&r, 42);  // random, not zeros: zeros can run faster than real data
    rng_fill_normal(&r, a, (size_t)M * K, 0, 1);
    rng_fill_normal(&r, b, (size_t)K * N, 0, 1);
    double flops = 2.0 * M * N * K;
    // Enough repetitions for ~0.3 s, at least 3.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, a, K, b, N, 0, c, N);
    double t0 = now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, a, K, b, N, 0, c, N);
    double once = now_seconds() - t0;
    int reps = (int)(0.3 / (once > 1e-6 ? once : 1e-6));
    reps = reps < 3 ? 3 : reps > 101 ? 101 : reps;
    double *ts = malloc(sizeof(double) * reps);
    CHECK(ts, "sgemm_gflops: out of memory");
    for (int i = 0; i < reps; i++) {
        t0 = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, a, K, b, N, 0, c, N);
        ts[i] = now_seconds() - t0;
    }
    double med = median(ts, reps);
    free(ts); free(a); free(b); free(c);
    return flops / med * 1e-9;
}

double cpu_peak_gflops(int threads) { return sgemm_gflops(1024, 1024, 1024, threads); }
