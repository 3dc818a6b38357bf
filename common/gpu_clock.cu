// gpu_clock.cu — GPU times for timelines (comm_cuda.h: GpuClock).
//
// On a GPU the host queues work and moves on, so "now" on the host after
// queueing a forward is when it was queued, not when it ran: a Gantt chart of
// host times shows the host racing ahead, then waiting. CUDA events recorded
// on the compute stream fire when the GPU reaches them; cudaEventElapsedTime
// between two of them is GPU time (resolution about 0.5 us). To place them on
// the host's clock (now_seconds, which every rank of a machine shares, so the
// ranks line up in one trace) we need one event whose host time we know: the
// ORIGIN, recorded on an idle stream right after we note the host time, fires
// a launch latency later (microseconds). Mark i is then at
// origin_s + elapsed(origin, mark i).
#include <stdlib.h>

#include "comm_cuda_internal.cuh"
#include "timer.h"

struct GpuClock {
    cudaStream_t stream;  // the compute stream: a mark fires when the GPU reaches it
    cudaEvent_t origin;
    double origin_s;      // the origin's host time (see above)
    cudaEvent_t *ev;      // mark i; created once, reused by later rounds
    double *t;            // mark i in host seconds, once read
    int n, cap, made;     // marks this round, room, events created
    int read;             // gpu_clock_read has run since the last mark
};

// Polls ev (never cudaEventSynchronize: every wait in the course has a timeout).
static void await(cudaEvent_t ev, double timeout_s, const char *what) {
    double start = now_seconds();
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady)
            DIE("CUDA error %s (%s) while waiting for %s", cudaGetErrorName(e),
                cudaGetErrorString(e), what);
        (void)cudaGetLastError();  // "not ready" is an answer, not an error
        double now = now_seconds();
        if (now - start > timeout_s)
            DIE("timeout after %.1f s: the GPU has not finished %s", timeout_s, what);
        gc_backoff(now - start);
    }
}

extern "C" GpuClock *gpu_clock_new(Ctx *ctx) {
    CHECK(ctx->device == DEV_CUDA && ctx->backend, "gpu_clock_new needs a CUDA context");
    GpuClock *k = (GpuClock *)calloc(1, sizeof *k);
    CHECK(k, "out of host memory");
    k->stream = ((CudaBackend *)ctx->backend)->stream;
    CUDA_CHECK(cudaEventCreate(&k->origin));  // with timing (the default flags)
    return k;
}

extern "C" void gpu_clock_free(GpuClock *k) {
    if (!k) return;
    for (int i = 0; i < k->made; i++) CUDA_CHECK(cudaEventDestroy(k->ev[i]));
    CUDA_CHECK(cudaEventDestroy(k->origin));
    free(k->ev);
    free(k->t);
    free(k);
}

extern "C" void gpu_clock_start(GpuClock *k, double timeout_s) {
    // Drain the stream, so that the origin recorded next fires at once.
    CUDA_CHECK(cudaEventRecord(k->origin, k->stream));
    await(k->origin, timeout_s, "the work queued before the timeline's origin");
    k->origin_s = now_seconds();
    CUDA_CHECK(cudaEventRecord(k->origin, k->stream));
    k->n = 0;
    k->read = 0;
}

extern "C" int gpu_clock_mark(GpuClock *k) {
    if (k->n == k->cap) {
        int cap = k->cap ? 2 * k->cap : 256;
        cudaEvent_t *ev = (cudaEvent_t *)realloc(k->ev, cap * sizeof *ev);
        CHECK(ev, "out of host memory for %d GPU clock marks", cap);
        k->ev = ev;
        double *t = (double *)realloc(k->t, cap * sizeof *t);
        CHECK(t, "out of host memory for %d GPU clock marks", cap);
        k->t = t;
        k->cap = cap;
    }
    if (k->n == k->made) CUDA_CHECK(cudaEventCreate(&k->ev[k->made++]));
    CUDA_CHECK(cudaEventRecord(k->ev[k->n], k->stream));
    k->read = 0;
    return k->n++;
}

extern "C" void gpu_clock_read(GpuClock *k, double timeout_s) {
    if (k->n == 0) return;
    // Events on one stream fire in order: the last one fired means all have.
    await(k->ev[k->n - 1], timeout_s, "the work of the timeline's last mark");
    for (int i = 0; i < k->n; i++) {
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, k->origin, k->ev[i]));
        k->t[i] = k->origin_s + 1e-3 * ms;
    }
    k->read = 1;
}

extern "C" double gpu_clock_time(const GpuClock *k, int mark) {
    CHECK(k->read && mark >= 0 && mark < k->n, "gpu_clock_time: mark %d of %d%s", mark, k->n,
          k->read ? "" : " before gpu_clock_read");
    return k->t[mark];
}
