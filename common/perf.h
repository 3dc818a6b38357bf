// perf.h — the numbers every run reports: FLOPs, MFU, and the CPU's sgemm ceiling.
#pragma once
#include <stddef.h>

#include "comm.h"
#include "ctx.h"

// The median of n timings (sorts x in place): what every benchmark here reports.
double median(double *x, int n);

// Measured OpenBLAS sgemm rate (GFLOP/s) for an M x N x K product on `threads`
// threads: the median of several timed repetitions after one warm-up.
double sgemm_gflops(int M, int N, int K, int threads);
// The machine's practical peak for MFU on the CPU: sgemm on a large square (1024^3),
// its fastest repetition (sgemm_gflops reports the median).
double cpu_peak_gflops(int threads);

// The cores a CPU job's MFU peak may count: its ranks on this machine times the
// threads of each, but never more than the cores they may run on (oversubscribed
// ranks share cores; they do not add any). Arguments below 1 count as 1.
int usable_cores(int local_ranks, int threads, int cores);
// The cores this process may run on: its affinity mask (taskset, a launcher's
// binding), or the online count if the mask cannot be read.
int cores_available(void);

// The peak a job's MFU is quoted against, in FLOP/s, and how it was found (into how):
// on the CPU one core's sgemm rate (cpu_peak_gflops) times the cores the job's ranks
// on this machine may use (usable_cores), measured by rank 0 alone (the others get
// 0); on a GPU the H100's datasheet figure per GPU in use. c: the job's ranks (NULL:
// one process, world 1).
double mfu_peak(Device dev, const Comm *c, int rank, int world, int threads, char *how,
                size_t n);
