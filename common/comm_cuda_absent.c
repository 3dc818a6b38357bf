// comm_cuda_absent.c — stands in for comm_cuda.cu (and comm_cuda_nccl.cu,
// comm_cuda_ipc.cu, comm_cuda_p2p.cu, gpu_clock.cu) in builds without nvcc.
//
// Everything that would need a GPU stops with the same advice ctx_init gives for
// --device cuda. (gpu_pick_device and gpu_check_launch are cuda_probe.c's, in
// every build: there the probe answers "this build has no CUDA".)
#include "check.h"
#include "comm_cuda.h"

#define NO_CUDA                                                                          \
    DIE("--device cuda: this build has no CUDA (nvcc was not found at build time; install " \
        "the CUDA toolkit or set CUDA_HOME, then rebuild)")

const char *gpu_algo_name(GpuAlgo a) {
    return a == GPU_NCCL ? "nccl" : a == GPU_IPC ? "ipc" : "auto";
}

GpuComm *gpu_comm_new(Comm *c, Group *g, Ctx *ctx, GpuAlgo want) {
    (void)c, (void)g, (void)ctx, (void)want;
    NO_CUDA;
}

GpuComm *gpu_comm_try(Comm *c, Group *g, Ctx *ctx, GpuAlgo want, char *why, size_t n) {
    (void)c, (void)g, (void)ctx, (void)want, (void)why, (void)n;
    NO_CUDA;
}

void gpu_comm_free(GpuComm *gc) { (void)gc; }  // only NULL can exist here

GpuAlgo gpu_comm_algo(const GpuComm *gc) {
    (void)gc;
    NO_CUDA;
}

int gpu_comm_shared(const GpuComm *gc) {
    (void)gc;
    NO_CUDA;
}

const char *gpu_comm_describe(const GpuComm *gc) {
    (void)gc;
    NO_CUDA;
}

void gpu_allreduce(GpuComm *gc, void *buf, size_t count, DType dt) {
    (void)gc, (void)buf, (void)count, (void)dt;
    NO_CUDA;
}

void gpu_reduce_scatter(GpuComm *gc, void *buf, size_t count, DType dt) {
    (void)gc, (void)buf, (void)count, (void)dt;
    NO_CUDA;
}

void gpu_all_gather(GpuComm *gc, void *buf, size_t count, DType dt) {
    (void)gc, (void)buf, (void)count, (void)dt;
    NO_CUDA;
}

void gpu_broadcast(GpuComm *gc, void *buf, size_t count, DType dt, int root) {
    (void)gc, (void)buf, (void)count, (void)dt, (void)root;
    NO_CUDA;
}

double gpu_copy_bandwidth(Ctx *ctx, size_t bytes) {
    (void)ctx, (void)bytes;
    NO_CUDA;
}

void gpu_reduce_scatter_v(GpuComm *gc, void *buf, size_t count, const size_t *lo,
                          const size_t *hi, DType dt) {
    (void)gc, (void)buf, (void)count, (void)lo, (void)hi, (void)dt;
    NO_CUDA;
}

void gpu_all_gather_v(GpuComm *gc, void *buf, size_t count, const size_t *lo, const size_t *hi,
                      DType dt) {
    (void)gc, (void)buf, (void)count, (void)lo, (void)hi, (void)dt;
    NO_CUDA;
}

void gpu_comm_own_stream(GpuComm *gc) {
    (void)gc;
    NO_CUDA;
}

void *gpu_event_after_compute(Ctx *ctx) {
    (void)ctx;
    NO_CUDA;
}

void gpu_comm_after(GpuComm *gc, void *event) {
    (void)gc, (void)event;
    NO_CUDA;
}

int gpu_is_device_pointer(const void *p) {
    (void)p;
    return 0;  // without CUDA there is no device memory
}

void gpu_event_sync(void *event) {
    (void)event;
    NO_CUDA;
}

GpuRequest *gpu_isend(GpuComm *gc, int peer, const void *buf, size_t bytes) {
    (void)gc, (void)peer, (void)buf, (void)bytes;
    NO_CUDA;
}

GpuRequest *gpu_irecv(GpuComm *gc, int peer, void *buf, size_t bytes) {
    (void)gc, (void)peer, (void)buf, (void)bytes;
    NO_CUDA;
}

int gpu_test(GpuComm *gc, GpuRequest *r) {
    (void)gc, (void)r;
    NO_CUDA;
}

void gpu_wait(GpuComm *gc, GpuRequest **reqs, int n) {
    (void)gc, (void)reqs, (void)n;
    NO_CUDA;
}

void gpu_wait_first(GpuComm *gc, GpuRequest **reqs, int n) {
    (void)gc, (void)reqs, (void)n;
    NO_CUDA;
}

void gpu_p2p_prepare(GpuComm *gc) {
    (void)gc;
    NO_CUDA;
}

GpuClock *gpu_clock_new(Ctx *ctx) {
    (void)ctx;
    NO_CUDA;
}

void gpu_clock_free(GpuClock *k) { (void)k; }  // only NULL can exist here

void gpu_clock_start(GpuClock *k, double timeout_s) {
    (void)k, (void)timeout_s;
    NO_CUDA;
}

int gpu_clock_mark(GpuClock *k) {
    (void)k;
    NO_CUDA;
}

void gpu_clock_read(GpuClock *k, double timeout_s) {
    (void)k, (void)timeout_s;
    NO_CUDA;
}

double gpu_clock_time(const GpuClock *k, int mark) {
    (void)k, (void)mark;
    NO_CUDA;
}
