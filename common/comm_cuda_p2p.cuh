// comm_cuda_p2p.cuh — a point-to-point request on device buffers (comm_cuda.h's
// GpuRequest), shared by its two transports:
//
//   comm_cuda_p2p.cu       over CUDA IPC: an outbox per channel, READY / TAKEN
//                          control messages over the host transport;
//   comm_cuda_p2p_nccl.cu  over NCCL: ncclSend / ncclRecv in groups.
//
// The public functions (gpu_isend ... gpu_wait_first, in comm_cuda_p2p.cu) send a
// GpuComm whose algorithm is NCCL to the nccl_p2p_* functions below.
#pragma once
#include "comm_cuda_internal.cuh"

// ---- CUDA IPC's control messages (comm_cuda_p2p.cu's protocol)
enum { P2P_READY = 1, P2P_TAKEN = 2 };
typedef struct {
    uint32_t tag;               // P2P_READY or P2P_TAKEN
    uint32_t gen;               // READY: the outbox generation holding the message;
                                // TAKEN: the generation the receiver maps
    uint64_t seq;               // the message's number on its channel
    uint64_t bytes;
    cudaIpcMemHandle_t handle;  // READY: the outbox (a new generation is mapped from it)
} Ctl;

// A request's steps. A send: QUEUED (behind earlier sends to the peer), COPYING
// (into the outbox), ANNOUNCED (READY sent, TAKEN awaited). A receive: QUEUED
// (behind earlier receives, or READY awaited), COPYING (out of the peer's
// outbox), ACKING (TAKEN on its way). Then DONE.
enum { ST_QUEUED = 0, ST_COPYING, ST_ANNOUNCED, ST_ACKING, ST_DONE };

struct GpuRequest {
    int is_send, peer;         // peer: a member of the group
    unsigned char *buf;
    size_t bytes;
    uint64_t seq;              // its number on its channel
    int state;
    int taken;                 // a send: its TAKEN has arrived
    cudaEvent_t after;         // on the compute stream when it was posted
    cudaEvent_t copied;        // on the copy's stream after the copy
    CommRequest *ctl;          // its READY (send) or TAKEN (receive) until the host has sent it
    Ctl msg;                   // ... and that message (the host transport reads it until then)
    GpuRequest *next;          // the next request of its channel's queue
    int complete;
    struct NcclBatch *batch;   // over NCCL: the group it went out in (NULL: not yet)
};

// A new request, its event recorded on the compute stream: what it must come after
// (the kernels that wrote a send's buffer, or still read a receive's).
static inline GpuRequest *p2p_request(GpuComm *gc, int is_send, int peer, void *buf, size_t bytes,
                                      uint64_t seq) {
    GpuRequest *r = (GpuRequest *)calloc(1, sizeof *r);
    CHECK(r, "out of host memory");
    r->is_send = is_send;
    r->peer = peer;
    r->buf = (unsigned char *)buf;
    r->bytes = bytes;
    r->seq = seq;
    CUDA_CHECK(cudaEventCreateWithFlags(&r->after, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(r->after, ((CudaBackend *)gc->ctx->backend)->stream));
    return r;
}

// ---- over NCCL (comm_cuda_p2p_nccl.cu)

GpuRequest *nccl_p2p_post(GpuComm *gc, int is_send, int peer, void *buf, size_t bytes);
int nccl_p2p_test(GpuComm *gc, GpuRequest *r);
// Waits until the first `need` of reqs[0..n) are complete (the open group goes
// out first), then frees those.
void nccl_p2p_wait(GpuComm *gc, GpuRequest **reqs, int n, int need);
void nccl_p2p_prepare(GpuComm *gc);  // collective: connects each member to its ring neighbours
void nccl_p2p_free(GpuComm *gc);     // from nccl_free: nothing may be in flight
