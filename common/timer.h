// timer.h — wall-clock time. CUDA work is asynchronous: synchronize the
// device (ctx->ops->synchronize) before reading the clock.
#pragma once
#include <time.h>

static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// CPU time this thread has run: the work it did, whether or not it shared its core
// (ranks that outnumber the cores wait their turn in wall-clock time, not in this).
static inline double thread_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
