// timer.h — wall-clock time. CUDA work is asynchronous: synchronize the
// device (ctx->ops->synchronize) before reading the clock.
#pragma once
#include <time.h>

static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
