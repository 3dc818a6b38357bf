// perf.c — measuring the sgemm ceiling that CPU MFU is quoted against, counting the
// cores it may be multiplied by, and the peak of a job's MFU.
#include <cblas.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "cuda_probe.h"
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

// Times repeated M x N x K sgemms; returns the GFLOP/s of the median repetition
// and, in *best, of the fastest one.
static double sgemm_rates(int M, int N, int K, int threads, double *best) {
    // The caller's BLAS threads are put back afterwards: the trainer measures one
    // core's rate while its ranks compute on --threads.
    int before = openblas_get_num_threads();
    openblas_set_num_threads(threads);
    float *a = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)K * N);
    float *c = malloc(sizeof(float) * (size_t)M * N);
    CHECK(a && b && c, "sgemm_gflops: out of memory for %d x %d x %d matrices (%.3g GB)", M, N, K,
          4e-9 * ((double)M * K + (double)K * N + (double)M * N));
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
    double med = median(ts, reps);  // sorts: ts[0] is the fastest
    *best = flops / ts[0] * 1e-9;
    free(ts); free(a); free(b); free(c);
    openblas_set_num_threads(before);
    return flops / med * 1e-9;
}

double sgemm_gflops(int M, int N, int K, int threads) {
    double best;
    return sgemm_rates(M, N, K, threads, &best);
}

// A peak is what the core does undisturbed: the fastest repetition. On a shared
// machine another job can slow the median of a 0.3 s measurement by a third,
// and an MFU quoted against that would read above 100 %.
double cpu_peak_gflops(int threads) {
    double best;
    sgemm_rates(1024, 1024, 1024, threads, &best);
    return best;
}

int usable_cores(int local_ranks, int threads, int cores) {
    long want = (long)(local_ranks > 0 ? local_ranks : 1) * (threads > 0 ? threads : 1);
    long have = cores > 0 ? cores : 1;
    return (int)(want < have ? want : have);
}

int cores_available(void) {
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) == 0 && CPU_COUNT(&mask) > 0) return CPU_COUNT(&mask);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

// On the CPU: one core's sgemm rate, measured now, times the cores the job can use.
// Counting ranks instead would print MFU above 100 % as soon as ranks outnumber
// cores (3 ranks on 2 cores share 2 cores' FLOPs). Only rank 0 measures and prints;
// the others return 0.
double mfu_peak(Device dev, const Comm *c, int rank, int world, int threads, char *how,
                size_t n) {
    int local = c ? comm_local_size(c) : world;
    int machines = (world + local - 1) / local;  // assumed alike when a job spans several
    if (dev != DEV_CPU) {
        // Ranks that share a GPU share its peak: count the GPUs in use, not the ranks.
        CudaProbe pr;
        cuda_probe(&pr);
        int gpus = pr.devices > 0 && pr.devices < local ? pr.devices : local;
        snprintf(how, n, "= 989.4 TFLOP/s per GPU (H100 SXM dense bf16 datasheet; this fp32 path "
                 "cannot reach it) x %d GPU%s (%d rank%s on %d visible) x %d machine%s", gpus,
                 gpus == 1 ? "" : "s", local, local == 1 ? "" : "s", pr.devices, machines,
                 machines == 1 ? "" : "s");
        return 989.4e12 * gpus * machines;
    }
    if (rank != 0) {
        snprintf(how, n, "(measured by rank 0)");
        return 0;
    }
    int cores = c && comm_local_cores(c) > 0 ? comm_local_cores(c) : cores_available();
    int used = usable_cores(local, threads, cores);
    double core = cpu_peak_gflops(1);
    char many[64] = "";
    if (machines > 1) snprintf(many, sizeof many, " x %d machines", machines);
    snprintf(how, n, "= %.1f GFLOP/s per core (OpenBLAS sgemm 1024^3, 1 thread, best of ~0.3 s, "
             "now) x %d core%s (%d rank%s x %d thread%s on %d core%s)%s", core, used,
             used == 1 ? "" : "s", local, local == 1 ? "" : "s", threads, threads == 1 ? "" : "s",
             cores, cores == 1 ? "" : "s", many);
    return core * 1e9 * used * machines;
}
