// comm_cuda_p2p_nccl.cu — point to point on device buffers over NCCL (comm_cuda.h's
// gpu_isend ... gpu_wait_first when the GpuComm chose NCCL: one process per GPU,
// on one machine or many). The pipeline's activations and gradients between
// machines go this way.
//
// NCCL's rules differ from our transports' in one way that matters. Our host
// channels and the CUDA IPC protocol move each message by itself: a send that
// waits for its receiver holds up nothing else. NCCL runs the operations of a
// communicator one after another, in the order each rank posted them; only the
// sends and receives of one group (ncclGroupStart ... ncclGroupEnd) progress
// together. So a send whose receive the peer has not posted yet holds up every
// message this rank posts after it, and two ranks that each send first and post
// the receive of the other's message later wait for each other forever.
//
// What is done here:
//   - gpu_isend / gpu_irecv only note the message: it joins this rank's OPEN GROUP
//     (with an event on the compute stream, after the kernels that wrote or still
//     read its buffer);
//   - the first wait (nccl_p2p_wait, which every gpu_wait* is) sends the open group
//     out: the NCCL stream waits for those events, then one ncclGroupStart, a
//     ncclSend / ncclRecv per message, ncclGroupEnd, and an event after it. gpu_test
//     never sends a group out: the pipeline's engine tests after every action,
//     and would cut the groups to single messages;
//   - a message is complete when its group's event has fired: the whole group.
//
// Whether a schedule can finish under these rules is a property of the schedule,
// which stage 05's checker decides before the run (sched_check_serialized: the
// engine's posting and waiting, with each rank's groups run in order): GPipe,
// 1F1B and ZB-H1 can; our interleaved 1F1B, whose ranks send activations ahead of
// the receives they post, cannot once m > p, and pp_train refuses it over NCCL.
// Megatron-LM's schedules are written for NCCL from the start: each step's sends
// and receives go out together, in one batch (batch_isend_irecv).
//
// Connections: NCCL connects two ranks for point to point at their first message,
// and both must be inside NCCL at once for that. nccl_p2p_prepare, which every
// member calls together before the first message, exchanges one byte with each
// ring neighbour (the members a pipeline talks to) in a single group.
//
// Sizes: NCCL requires a receive's count to equal its send's and cannot check it;
// the pipeline's messages are all one activation's size on both sides. A mismatch
// hangs or corrupts, and the wait's timeout names the message.
//
// Concurrent communicators: the pipeline group's NCCL communicator runs beside
// tensor parallelism's (the collectives inside a stage's compute). NCCL asks that
// communicators used at once see their operations in the same order on every rank,
// which the schedule's fixed order gives; it is what Megatron-LM does too.
#include <stdlib.h>
#include <string.h>

#include "comm_cuda_p2p.cuh"
#include "timer.h"

// One group sent out: its event fires when every message in it is done.
struct NcclBatch {
    cudaEvent_t done;
    int refs;  // requests still pointing at it
};

typedef struct {
    cudaStream_t stream;  // every group, in posting order
    GpuRequest **open;    // the open group: posted, not sent out
    int n_open, cap_open;
    uint64_t n_sends[COMM_MAX_RANKS], n_recvs[COMM_MAX_RANKS];  // per peer: numbers
} NcclP2P;

static NcclP2P *state(GpuComm *gc) {
    if (gc->nccl_p2p) return (NcclP2P *)gc->nccl_p2p;
    NcclP2P *s = (NcclP2P *)calloc(1, sizeof *s);
    CHECK(s, "out of host memory");
    CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    gc->nccl_p2p = s;
    return s;
}

static void describe(const GpuComm *gc, const GpuRequest *r, char *buf, size_t n) {
    const Group *g = gc->g;
    snprintf(buf, n, "point-to-point on GPU buffers on group %s (%d ranks, id %08x): %s message "
             "#%llu (%zu bytes) %s member %d (world rank %d) over NCCL; %s", g->name, g->size,
             g->id, r->is_send ? "sending" : "receiving", (unsigned long long)r->seq, r->bytes,
             r->is_send ? "to" : "from", r->peer, g->ranks[r->peer],
             r->complete ? "complete" : r->batch ? "its group is out; NCCL has not finished it: "
             "has the peer posted the matching message, and sent its own group out?"
                                                  : "still in this rank's open group");
}

GpuRequest *nccl_p2p_post(GpuComm *gc, int is_send, int peer, void *buf, size_t bytes) {
    NcclP2P *s = state(gc);
    GpuRequest *r = p2p_request(gc, is_send, peer, buf, bytes,
                                is_send ? s->n_sends[peer]++ : s->n_recvs[peer]++);
    if (s->n_open == s->cap_open) {
        s->cap_open = s->cap_open ? 2 * s->cap_open : 16;
        s->open = (GpuRequest **)realloc(s->open, (size_t)s->cap_open * sizeof *s->open);
        CHECK(s->open, "out of host memory");
    }
    s->open[s->n_open++] = r;
    // Payload, as comm_isend / comm_irecv count theirs (and CUDA IPC's sends).
    gc_count_bytes(gc, is_send ? bytes : 0, is_send ? 0 : bytes);
    Comm *c = gc->c;
    if (is_send && (c->cur_group == gc->g ? c->cur_kind : COLL_P2P) == COLL_P2P)
        c->counters[COLL_P2P].calls++;
    return r;
}

// The open group goes out: one NCCL group on the p2p stream, after the compute
// each message waited for when it was posted.
static void send_out(GpuComm *gc, NcclP2P *s) {
    if (s->n_open == 0) return;
    struct NcclBatch *b = (struct NcclBatch *)calloc(1, sizeof *b);
    CHECK(b, "out of host memory");
    CUDA_CHECK(cudaEventCreateWithFlags(&b->done, cudaEventDisableTiming));
    for (int i = 0; i < s->n_open; i++) CUDA_CHECK(cudaStreamWaitEvent(s->stream, s->open[i]->after, 0));
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < s->n_open; i++) {
        GpuRequest *r = s->open[i];
        if (r->bytes == 0) continue;  // both ends skip it: the sizes agree
        if (r->is_send) NCCL_CHECK(ncclSend(r->buf, r->bytes, ncclUint8, r->peer, gc->nccl, s->stream));
        else NCCL_CHECK(ncclRecv(r->buf, r->bytes, ncclUint8, r->peer, gc->nccl, s->stream));
    }
    nccl_settle(gc, ncclGroupEnd(), "ncclGroupEnd (point to point)");
    CUDA_CHECK(cudaEventRecord(b->done, s->stream));
    for (int i = 0; i < s->n_open; i++) {
        s->open[i]->batch = b;
        b->refs++;
    }
    s->n_open = 0;
}

// 1 once r's group has finished; a CUDA or NCCL error ends the run.
static int done(GpuComm *gc, GpuRequest *r) {
    if (r->complete) return 1;
    if (!r->batch) return 0;
    cudaError_t e = cudaEventQuery(r->batch->done);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();  // an answer, not an error
        return 0;
    }
    if (e != cudaSuccess) {
        char d[480];
        describe(gc, r, d, sizeof d);
        DIE("CUDA error %s (%s) in %s", cudaGetErrorName(e), cudaGetErrorString(e), d);
    }
    r->complete = 1;
    return 1;
}

int nccl_p2p_test(GpuComm *gc, GpuRequest *r) { return done(gc, r); }

static void release(GpuRequest *r) {
    CUDA_CHECK(cudaEventDestroy(r->after));
    if (r->batch && --r->batch->refs == 0) {
        CUDA_CHECK(cudaEventDestroy(r->batch->done));
        free(r->batch);
    }
    free(r);
}

void nccl_p2p_wait(GpuComm *gc, GpuRequest **reqs, int n, int need) {
    (void)n;  // the others need no moving along: once out, NCCL moves them on the GPU
    NcclP2P *s = state(gc);
    send_out(gc, s);  // a wait: what was posted goes out now (see the top)
    double start = now_seconds(), next_check = start + 0.1;
    Comm *c = gc->c;
    for (;;) {
        int remaining = 0;
        for (int i = 0; i < need; i++) remaining += !done(gc, reqs[i]);
        if (remaining == 0) break;
        double now = now_seconds();
        gc_backoff(now - start);
        if (now < next_check) continue;
        next_check = now + 0.1;  // every 100 ms: NCCL's errors, the peers, the clock
        ncclResult_t async;
        NCCL_CHECK(ncclCommGetAsyncError(gc->nccl, &async));
        for (int i = 0; i < need; i++) {
            if (reqs[i]->complete) continue;
            char d[480];
            describe(gc, reqs[i], d, sizeof d);
            if (async != ncclSuccess && async != ncclInProgress)
                DIE("NCCL error %d (%s: %s) in %s", (int)async, ncclGetErrorString(async),
                    ncclGetLastError(gc->nccl), d);
            if (c->ops->peer_dead && c->ops->peer_dead(c, gc->g->ranks[reqs[i]->peer]))
                DIE("the peer's process has exited, in %s", d);
            if (now - start > comm_timeout(c))
                DIE("timeout after %.1f s in %s. Usual causes: the ranks posted different "
                    "messages (peers, sizes or order), a receive was never posted, or the peer "
                    "is stuck or dead", comm_timeout(c), d);
        }
    }
    for (int i = 0; i < need; i++) release(reqs[i]);
}

void nccl_p2p_prepare(GpuComm *gc) {
    const Group *g = gc->g;
    if (g->size < 2) return;
    NcclP2P *s = state(gc);
    CHECK(s->n_open == 0, "nccl_p2p_prepare on group %s after messages were posted", g->name);
    int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
    unsigned char *bytes;  // [0, 1] sent, [2, 3] received
    CUDA_CHECK(cudaMalloc((void **)&bytes, 4));
    CUDA_CHECK(cudaMemsetAsync(bytes, 1, 4, s->stream));
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(bytes, 1, ncclUint8, next, gc->nccl, s->stream));
    NCCL_CHECK(ncclRecv(bytes + 2, 1, ncclUint8, prev, gc->nccl, s->stream));
    if (prev != next) {  // two neighbours: both directions with each
        NCCL_CHECK(ncclSend(bytes + 1, 1, ncclUint8, prev, gc->nccl, s->stream));
        NCCL_CHECK(ncclRecv(bytes + 3, 1, ncclUint8, next, gc->nccl, s->stream));
    }
    nccl_settle(gc, ncclGroupEnd(), "ncclGroupEnd (connecting point to point)");
    cudaEvent_t ev;
    CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(ev, s->stream));
    double start = now_seconds();
    for (;;) {  // with the timeout, as every wait
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) break;
        CHECK(e == cudaErrorNotReady, "CUDA error %s connecting point to point on group %s",
              cudaGetErrorName(e), g->name);
        (void)cudaGetLastError();
        if (now_seconds() - start > comm_timeout(gc->c))
            DIE("timeout after %.1f s connecting point to point over NCCL on group %s: did every "
                "member call gpu_p2p_prepare?", comm_timeout(gc->c), g->name);
        gc_backoff(now_seconds() - start);
    }
    CUDA_CHECK(cudaEventDestroy(ev));
    CUDA_CHECK(cudaFree(bytes));
}

void nccl_p2p_free(GpuComm *gc) {
    NcclP2P *s = (NcclP2P *)gc->nccl_p2p;
    if (!s) return;
    CHECK(s->n_open == 0, "gpu_comm_free on group %s with %d point-to-point messages posted and "
          "never waited for", gc->g->name, s->n_open);
    CUDA_CHECK(cudaStreamSynchronize(s->stream));
    CUDA_CHECK(cudaStreamDestroy(s->stream));
    free(s->open);
    free(s);
    gc->nccl_p2p = NULL;
}
