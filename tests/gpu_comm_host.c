// gpu_comm_host.c — a GpuComm stand-in on the host (gpu_comm_host.h).
#include "gpu_comm_host.h"

#include <stdlib.h>

#include "check.h"

struct GpuComm {  // this program's only GpuComm: the CUDA backend is never loaded
    Comm *c;
    Group *g;
};

GpuComm *gpu_comm_on_host(Comm *c, Group *g) {
    GpuComm *gc = xcalloc(1, sizeof *gc);
    gc->c = c;
    gc->g = g;
    return gc;
}

void gpu_comm_on_host_free(GpuComm *gc) { free(gc); }

// As on a GPU: NCCL's ring all-reduce, and a broadcast from `root` of the group.
void gpu_allreduce(GpuComm *gc, void *buf, size_t count, DType dt) {
    allreduce(gc->c, gc->g, buf, count, dt, ALGO_RING);
}

void gpu_broadcast(GpuComm *gc, void *buf, size_t count, DType dt, int root) {
    broadcast(gc->c, gc->g, buf, count, dt, root, ALGO_RD);
}
