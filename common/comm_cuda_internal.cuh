// comm_cuda_internal.cuh — what the three parts of the GPU collectives share:
//
//   comm_cuda.cu       the GpuComm object, waiting with a timeout, placement
//                      (NCCL or CUDA IPC), and the public API, which dispatches;
//   comm_cuda_nccl.cu  NCCL: the id over the host transport, its collectives;
//   comm_cuda_ipc.cu   our ring over CUDA IPC: the add kernels, exported
//                      outboxes and the ring protocol (described there);
//   comm_cuda_p2p.cu   point to point over CUDA IPC: an outbox per peer,
//                      READY / TAKEN handshakes (described there);
//   comm_cuda_p2p_nccl.cu  point to point over NCCL, in groups (described there).
//
// Every piece of GPU work goes on the rank's one stream (the CUDA backend's), so
// it runs after the kernels that produced the data, with no extra sync; and
// every collective returns only when its result is complete (gc_sync), so a
// rank that waits forever is always the host, in a loop that has a timeout.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "comm_cuda.h"
#include "cuda_common.cuh"

// The Comm internals (the counters and the collective in progress).
extern "C" {
#include "comm_internal.h"
}

struct GpuComm {
    Comm *c;
    Group *g;
    Ctx *ctx;
    cudaStream_t stream;   // the CUDA backend's: ordered after the kernels that made the data;
                           // or, after gpu_comm_own_stream, a stream of its own
    int own_stream;        // 1: `stream` is ours (created and destroyed here)
    cudaEvent_t ev;        // recorded after queued work and polled (gc_sync)
    int device;
    GpuAlgo algo;
    int shared;            // two or more members on one GPU
    char desc[200];
    // CUDA IPC ring (comm_cuda_ipc.cu)
    unsigned char *outbox;                  // ours: exported, read by the other members
    size_t outbox_bytes;
    unsigned char *peer[COMM_MAX_RANKS];    // member q's outbox, mapped here (NULL for us)
    // point to point over CUDA IPC (comm_cuda_p2p.cu): created by the first message
    struct GpuP2P *p2p;
    // NCCL (comm_cuda_nccl.cu)
    ncclComm_t nccl;
    void *nccl_p2p;                         // point to point over NCCL (comm_cuda_p2p_nccl.cu)
    unsigned char *pad;                     // layout staging for uneven shards (NCCL wants equal)
    size_t pad_bytes;
};

static inline int mod(int a, int p) { return ((a % p) + p) % p; }

// collectives.c's shard_range, repeated because common/ cannot call stage code:
// member i of n owns elements [count*i/n, count*(i+1)/n). tests/test_gpu_comm.c
// checks that the two agree.
static inline void shard_of(size_t count, int n, int i, size_t *lo, size_t *len) {
    size_t a = count / n * i + count % n * i / n;
    size_t b = count / n * (i + 1) + count % n * (i + 1) / n;
    *lo = a;
    *len = b - a;
}

// Each member's block of a buffer: shard_of's even split, or stage 03's blocks
// of any size (the _v collectives). The blocks tile the buffer in member order.
typedef struct {
    size_t lo[COMM_MAX_RANKS], len[COMM_MAX_RANKS];
} Spans;

static inline void spans_even(Spans *s, size_t count, int p) {
    for (int i = 0; i < p; i++) shard_of(count, p, i, &s->lo[i], &s->len[i]);
}

static inline void copy_async(void *dst, const void *src, size_t bytes, cudaStream_t s) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
}

// ---- comm_cuda.cu

// "all-reduce #12 on group world (4 ranks, id 00000001)": what a diagnostic names.
void gc_where(const GpuComm *gc, char *buf, size_t n);
// Adds a collective's payload to the Comm's counters (GPU bytes never pass
// through comm_isend, so they are counted here).
void gc_count_bytes(GpuComm *gc, size_t sent, size_t recv);
// Host messages that are control, not payload: sent and received like any
// other, then taken back out of the counters.
CommRequest *gc_ctl_isend(GpuComm *gc, int peer, const void *buf, size_t bytes);
CommRequest *gc_ctl_irecv(GpuComm *gc, int peer, void *buf, size_t bytes);
// Every member's `bytes`-byte record, in member order, into all[] (set-up sized).
void gc_host_allgather(GpuComm *gc, const void *mine, void *all, size_t bytes);
// The wait of every host loop here: spin, then yield, then sleep (idle seconds).
void gc_backoff(double idle);
// Everything queued on the rank's stream so far has run, or the rank exits
// after the comm timeout naming `what`.
void gc_sync(GpuComm *gc, const char *what, size_t bytes);

// ---- comm_cuda_nccl.cu

void nccl_init(GpuComm *gc);
void nccl_free(GpuComm *gc);  // finalizes the communicator, frees the staging buffer
// Blocks until NCCL leaves "in progress" (with the timeout); exits on an error.
void nccl_settle(GpuComm *gc, ncclResult_t r, const char *what);
void nccl_allreduce(GpuComm *gc, void *buf, size_t count, DType dt);
void nccl_reduce_scatter(GpuComm *gc, void *buf, size_t count, DType dt);
void nccl_all_gather(GpuComm *gc, void *buf, size_t count, DType dt);
void nccl_broadcast(GpuComm *gc, void *buf, size_t count, DType dt, int root);
// Blocks of any size: one ncclReduce / ncclBroadcast per member, in one group call.
void nccl_reduce_scatter_v(GpuComm *gc, void *buf, size_t count, const Spans *s, DType dt);
void nccl_all_gather_v(GpuComm *gc, void *buf, size_t count, const Spans *s, DType dt);

// ---- comm_cuda_ipc.cu (groups of two or more members)

void ipc_init(GpuComm *gc);  // collective: exports our outbox, maps everyone else's
void ipc_free(GpuComm *gc);  // collective: unmaps, agrees, frees
void ipc_allreduce(GpuComm *gc, void *buf, size_t count, DType dt);
void ipc_reduce_scatter(GpuComm *gc, void *buf, size_t count, DType dt);
void ipc_all_gather(GpuComm *gc, void *buf, size_t count, DType dt);
void ipc_broadcast(GpuComm *gc, void *buf, size_t count, DType dt, int root);
void ipc_reduce_scatter_v(GpuComm *gc, void *buf, size_t count, const Spans *s, DType dt);
void ipc_all_gather_v(GpuComm *gc, void *buf, size_t count, const Spans *s, DType dt);

// ---- comm_cuda_p2p.cu (point to point; torn down by ipc_free)

// Closes our mappings of the peers' point-to-point outboxes (before the members
// agree that all mappings are gone), then frees ours, its streams and its state.
void p2p_unmap(GpuComm *gc);
void p2p_free(GpuComm *gc);
