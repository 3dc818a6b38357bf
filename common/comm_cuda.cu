// comm_cuda.cu — collectives on GPU buffers: the GpuComm object, waiting with a
// timeout, placement (NCCL or CUDA IPC), and the public API of comm_cuda.h,
// which dispatches to comm_cuda_nccl.cu or comm_cuda_ipc.cu.
//
//   1. the object's helpers: diagnostics, counters, control messages;
//   2. waiting: every GPU wait polls an event with the comm timeout;
//   3. placement: which GPU each member uses, and so NCCL or CUDA IPC;
//   4. the public functions.
//
// Which GPU a rank takes (gpu_pick_device) and whether ranks may share one are
// decided in cuda_probe.c, before any of this runs.
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm_cuda_internal.cuh"
#include "ops.h"
#include "timer.h"

// ================================================================ 1. the object's helpers

// "all-reduce #12 on group world (4 ranks, id 00000001)": what a diagnostic names.
void gc_where(const GpuComm *gc, char *buf, size_t n) {
    const Comm *c = gc->c;
    const Group *g = gc->g;
    if (c->cur_group == g)
        snprintf(buf, n, "%s #%llu on group %s (%d ranks, id %08x)", coll_name(c->cur_kind),
                 (unsigned long long)c->cur_seq, g->name, g->size, g->id);
    else
        snprintf(buf, n, "the set-up of the GPU communicator of group %s (%d ranks, id %08x)",
                 g->name, g->size, g->id);
}

// ---------------------------------------------------------------- counters
//
// The counters (comm.h) measure a collective's payload per kind, to be compared
// with the formulas (a ring all-reduce moves 2(p-1)/p n bytes per rank). GPU
// bytes never pass through comm_isend, so we add them here; the IPC ring's
// handshakes do pass through it, and are taken back out: they are control, not
// payload. Outside a collective (set-up) messages count as point-to-point, as
// they would for anyone else.
void gc_count_bytes(GpuComm *gc, size_t sent, size_t recv) {
    Comm *c = gc->c;
    CollKind k = c->cur_group == gc->g ? c->cur_kind : COLL_P2P;
    c->counters[k].bytes_sent += sent;
    c->counters[k].bytes_recv += recv;
}

static void uncount(GpuComm *gc, size_t sent, size_t recv) {
    Comm *c = gc->c;
    if (c->cur_group != gc->g) return;
    c->counters[c->cur_kind].bytes_sent -= sent;
    c->counters[c->cur_kind].bytes_recv -= recv;
}

// Host messages that are not payload (see above).
CommRequest *gc_ctl_isend(GpuComm *gc, int peer, const void *buf, size_t bytes) {
    CommRequest *r = comm_isend(gc->c, gc->g, peer, buf, bytes);
    uncount(gc, bytes, 0);
    return r;
}
CommRequest *gc_ctl_irecv(GpuComm *gc, int peer, void *buf, size_t bytes) {
    CommRequest *r = comm_irecv(gc->c, gc->g, peer, buf, bytes, RECV_COPY, DT_F32);
    uncount(gc, 0, bytes);
    return r;
}

// Every member's `bytes`-byte record, in member order, into all[]: member 0
// collects them and sends the table back. Small set-up messages, p <= 64.
void gc_host_allgather(GpuComm *gc, const void *mine, void *all, size_t bytes) {
    int p = gc->g->size, r = gc->g->rank;
    unsigned char *t = (unsigned char *)all;
    memcpy(t + (size_t)r * bytes, mine, bytes);
    if (p == 1) return;
    CommRequest *q[COMM_MAX_RANKS];
    if (r == 0) {
        for (int i = 1; i < p; i++) q[i - 1] = gc_ctl_irecv(gc, i, t + (size_t)i * bytes, bytes);
        comm_wait(gc->c, q, p - 1);
        for (int i = 1; i < p; i++) q[i - 1] = gc_ctl_isend(gc, i, t, (size_t)p * bytes);
        comm_wait(gc->c, q, p - 1);
    } else {
        q[0] = gc_ctl_isend(gc, 0, mine, bytes);
        comm_wait(gc->c, q, 1);
        q[0] = gc_ctl_irecv(gc, 0, t, (size_t)p * bytes);
        comm_wait(gc->c, q, 1);
    }
}

// ================================================================ 2. waiting

// Spin for the first 20 us (the GPU is usually about to finish), then yield the
// core (ranks sharing a GPU may outnumber cores), and after 2 ms sleep 50 us.
void gc_backoff(double idle) {
    if (idle > 2e-3) {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    } else if (idle > 20e-6) {
        sched_yield();
    }
}

// Waits for event ev with the comm timeout, naming what the GPU was doing.
// cudaEventSynchronize would wait forever for a kernel that never ends (an NCCL
// kernel whose peer died spins on the GPU); polling lets us give up, say why,
// and exit, which the launcher then reports.
static void poll_event(GpuComm *gc, cudaEvent_t ev, double timeout_s, const char *what,
                       size_t bytes) {
    double start = now_seconds(), next_check = start + 0.1;
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady) {
            char w[160] = "a local measurement";
            if (gc) gc_where(gc, w, sizeof w);
            DIE("CUDA error %s (%s) while the GPU was %s (%zu bytes) in %s", cudaGetErrorName(e),
                cudaGetErrorString(e), what, bytes, w);
        }
        // "Not ready" is an answer, not an error; the runtime may still record it
        // as the thread's last error, where the next CUDA_CHECK_LAUNCH would see it.
        (void)cudaGetLastError();
        double now = now_seconds();
        if (now >= next_check) {
            next_check = now + 0.1;
            ncclResult_t st = ncclSuccess;
            if (gc && gc->nccl && ncclCommGetAsyncError(gc->nccl, &st) == ncclSuccess &&
                st != ncclSuccess && st != ncclInProgress)
                nccl_settle(gc, st, what);  // reports the error and exits
            if (now - start > timeout_s) {
                char w[160] = "a local measurement";
                if (gc) gc_where(gc, w, sizeof w);
                if (gc && gc->nccl) ncclCommAbort(gc->nccl);
                DIE("timeout after %.1f s in %s: the GPU has not finished %s (%zu bytes)%s",
                    timeout_s, w, what, bytes,
                    gc && gc->nccl ? "; NCCL kernels wait for every member: has one stopped?"
                                   : "");
            }
        }
        gc_backoff(now - start);
    }
}

// Everything queued on the rank's stream so far has run.
void gc_sync(GpuComm *gc, const char *what, size_t bytes) {
    CUDA_CHECK(cudaEventRecord(gc->ev, gc->stream));
    poll_event(gc, gc->ev, comm_timeout(gc->c), what, bytes);
}

// ================================================================ 3. placement

// What a member tells the others about its GPU. The UUID names one physical
// GPU everywhere; the PCI bus id names it on its host whatever the device
// numbering of each process (CUDA_VISIBLE_DEVICES may differ between ranks).
typedef struct {
    char host[64];
    char bus[32];
    char name[64];
    unsigned char uuid[16];
    int device;  // the ordinal in that rank's own numbering (for messages)
    int want;    // the GpuAlgo it asked for: every member must ask for the same
} DevInfo;

static int same_gpu(const DevInfo *a, const DevInfo *b) {
    return memcmp(a->uuid, b->uuid, sizeof a->uuid) == 0;
}

// IPC between different GPUs of one host: the peer's GPU must be visible here
// and reachable over P2P (NVLink or PCIe), or the mapped outbox is unreadable.
// 1 if member q's outbox will be readable from this rank; else 0, saying why.
static int peer_reachable(GpuComm *gc, const DevInfo *me, const DevInfo *peer, int q, char *why,
                          size_t n) {
    if (same_gpu(me, peer)) return 1;
    int dev = -1, ok = 0;
    if (cudaDeviceGetByPCIBusId(&dev, peer->bus) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, n, "CUDA IPC on group %s: member %d's GPU (%s, bus %s) is not visible to "
                 "member %d's process (is CUDA_VISIBLE_DEVICES different per rank?); use NCCL "
                 "instead", gc->g->name, q, peer->name, peer->bus, gc->g->rank);
        return 0;
    }
    CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, gc->device, dev));
    if (!ok)
        snprintf(why, n, "CUDA IPC on group %s: member %d's GPU %d (bus %s) cannot read member "
                 "%d's GPU %d (bus %s): no peer-to-peer path between them; use NCCL instead",
                 gc->g->name, gc->g->rank, gc->device, me->bus, q, dev, peer->bus);
    return ok;
}

// Collective: can every member read every other member's outbox? Each member
// checks its own peers, then all exchange verdicts, so that all of them answer
// the same (a member that alone gave up would leave the others waiting for it).
// 1 if so; else 0 with the first failing member's reason in why.
static int ipc_reachable(GpuComm *gc, const DevInfo *all, char *why, size_t n) {
    typedef struct {
        int ok;
        char why[300];
    } Verdict;
    int p = gc->g->size, r = gc->g->rank;
    Verdict mine, *v = (Verdict *)calloc(p, sizeof(Verdict));
    CHECK(v, "out of host memory");
    memset(&mine, 0, sizeof mine);
    mine.ok = 1;
    for (int q = 0; q < p && mine.ok; q++)
        if (q != r) mine.ok = peer_reachable(gc, &all[r], &all[q], q, mine.why, sizeof mine.why);
    gc_host_allgather(gc, &mine, v, sizeof mine);
    int ok = 1;
    for (int q = 0; q < p && ok; q++)
        if (!v[q].ok) {
            ok = 0;
            snprintf(why, n, "%s", v[q].why);
        }
    free(v);
    return ok;
}

// Decides NCCL or IPC from everyone's DevInfo (the same table on every member,
// so every member decides the same) and writes the one-line description.
static void choose(GpuComm *gc, const DevInfo *all, GpuAlgo want) {
    const Group *g = gc->g;
    int p = g->size, r = g->rank;
    int a = -1, b = -1, other_host = -1, ngpus = 0;
    for (int i = 0; i < p; i++) {
        CHECK(all[i].want == (int)want, "ranks disagree: member %d of group %s asked for GPU "
              "collectives over %s, this rank for %s", i, g->name,
              gpu_algo_name((GpuAlgo)all[i].want), gpu_algo_name(want));
        if (strcmp(all[i].host, all[0].host) != 0 && other_host < 0) other_host = i;
        int first = 1;
        for (int j = 0; j < i; j++)
            if (same_gpu(&all[i], &all[j])) {
                first = 0;
                if (a < 0) a = j, b = i;
            }
        ngpus += first;
    }
    gc->shared = a >= 0;
    if (want == GPU_IPC || gc->shared) {
        gc->algo = GPU_IPC;
        if (gc->shared && want != GPU_IPC && r == 0) {
            // NCCL's rule, stated before NCCL would fail with "Duplicate GPU detected".
            // A warning when NCCL was asked for by name, news when it was "auto".
            char msg[400];
            snprintf(msg, sizeof msg, "group %s: members %d and %d share GPU %d (%s, bus %s on "
                     "%s); NCCL refuses two ranks on one GPU, so the GPU collectives use our "
                     "ring over CUDA IPC", g->name, a, b, all[a].device, all[a].name, all[a].bus,
                     all[a].host);
            if (want == GPU_NCCL) log_warn("%s", msg);
            else log_info("%s", msg);
        }
        if (other_host >= 0) {
            if (gc->shared)
                DIE("group %s: members %d and %d share a GPU on %s, which NCCL refuses, and the "
                    "group spans hosts (%s and %s), which CUDA IPC cannot: give every rank its "
                    "own GPU", g->name, a, b, all[a].host, all[0].host, all[other_host].host);
            DIE("group %s: CUDA IPC works between processes of one machine, but members 0 and %d "
                "run on %s and %s; use NCCL", g->name, other_host, all[0].host,
                all[other_host].host);
        }
        snprintf(gc->desc, sizeof gc->desc, "CUDA IPC ring, %d rank%s on %d GPU%s (%s)", p,
                 p == 1 ? "" : "s", ngpus, ngpus == 1 ? "" : "s", all[r].name);
    } else {
        gc->algo = GPU_NCCL;
        int v = 0;
        NCCL_CHECK(ncclGetVersion(&v));
        // Since 2.9 the code is major*10000 + minor*100 + patch.
        snprintf(gc->desc, sizeof gc->desc, "NCCL %d.%d.%d, %d rank%s on %d GPU%s (%s)",
                 v / 10000, v / 100 % 100, v % 100, p, p == 1 ? "" : "s", ngpus,
                 ngpus == 1 ? "" : "s", all[r].name);
    }
}

// ================================================================ 4. the API

// gpu_comm_new and gpu_comm_try: why == NULL exits where the other returns NULL.
static GpuComm *open_comm(Comm *c, Group *g, Ctx *ctx, GpuAlgo want, char *why, size_t why_n) {
    CHECK(ctx->device == DEV_CUDA && ctx->backend, "gpu_comm_new: the context is not a CUDA "
          "context (create it with ctx_init_device)");
    CHECK(g->size <= COMM_MAX_RANKS, "group %s: %d members", g->name, g->size);
    GpuComm *gc = (GpuComm *)calloc(1, sizeof *gc);
    CHECK(gc, "out of host memory");
    gc->c = c;
    gc->g = g;
    gc->ctx = ctx;
    gc->stream = ((CudaBackend *)ctx->backend)->stream;
    gc->device = ctx->cuda_device;
    CUDA_CHECK(cudaSetDevice(gc->device));
    CUDA_CHECK(cudaEventCreateWithFlags(&gc->ev, cudaEventDisableTiming));

    DevInfo mine, *all = (DevInfo *)calloc(g->size, sizeof(DevInfo));
    CHECK(all, "out of host memory");
    memset(&mine, 0, sizeof mine);
    if (gethostname(mine.host, sizeof mine.host - 1) != 0) snprintf(mine.host, 8, "unknown");
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, gc->device));
    memcpy(mine.uuid, prop.uuid.bytes, sizeof mine.uuid);
    snprintf(mine.name, sizeof mine.name, "%.63s", prop.name);  // the name can be 255 bytes
    CUDA_CHECK(cudaDeviceGetPCIBusId(mine.bus, sizeof mine.bus, gc->device));
    mine.device = gc->device;
    mine.want = (int)want;
    gc_host_allgather(gc, &mine, all, sizeof mine);
    choose(gc, all, want);
    char reason[300];
    int ok = gc->algo != GPU_IPC || g->size == 1 || ipc_reachable(gc, all, reason, sizeof reason);
    free(all);
    if (!ok) {
        CHECK(why, "%s", reason);
        snprintf(why, why_n, "%s", reason);
        CUDA_CHECK(cudaEventDestroy(gc->ev));
        free(gc);
        return NULL;
    }

    if (gc->algo == GPU_NCCL) nccl_init(gc);
    else if (g->size > 1) ipc_init(gc);
    if (g->rank == 0) log_info("GPU collectives on group %s: %s", g->name, gc->desc);
    return gc;
}

extern "C" GpuComm *gpu_comm_new(Comm *c, Group *g, Ctx *ctx, GpuAlgo want) {
    return open_comm(c, g, ctx, want, NULL, 0);
}

extern "C" GpuComm *gpu_comm_try(Comm *c, Group *g, Ctx *ctx, GpuAlgo want, char *why,
                                 size_t n) {
    CHECK(why && n > 0, "gpu_comm_try: no room for the reason");
    return open_comm(c, g, ctx, want, why, n);
}

extern "C" void gpu_comm_free(GpuComm *gc) {
    if (!gc) return;
    if (gc->algo == GPU_IPC && gc->g->size > 1) ipc_free(gc);
    nccl_free(gc);  // no-op unless NCCL was used
    CUDA_CHECK(cudaEventDestroy(gc->ev));
    if (gc->own_stream) CUDA_CHECK(cudaStreamDestroy(gc->stream));
    free(gc);
}

extern "C" void gpu_comm_own_stream(GpuComm *gc) {
    if (gc->own_stream) return;
    // Non-blocking: it must not wait for the legacy default stream either.
    CUDA_CHECK(cudaStreamCreateWithFlags(&gc->stream, cudaStreamNonBlocking));
    gc->own_stream = 1;
}

extern "C" void *gpu_event_after_compute(Ctx *ctx) {
    CHECK(ctx->device == DEV_CUDA && ctx->backend, "gpu_event_after_compute needs a CUDA context");
    cudaEvent_t ev;
    CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(ev, ((CudaBackend *)ctx->backend)->stream));
    return (void *)ev;
}

extern "C" void gpu_comm_after(GpuComm *gc, void *event) {
    cudaEvent_t ev = (cudaEvent_t)event;
    CUDA_CHECK(cudaStreamWaitEvent(gc->stream, ev, 0));
    CUDA_CHECK(cudaEventDestroy(ev));  // legal while pending: freed once it has fired
}

extern "C" void gpu_event_sync(void *event) {
    cudaEvent_t ev = (cudaEvent_t)event;
    CUDA_CHECK(cudaEventSynchronize(ev));
    CUDA_CHECK(cudaEventDestroy(ev));
}

extern "C" int gpu_is_device_pointer(const void *p) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();  // host memory CUDA never saw: an answer, not an error
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

extern "C" GpuAlgo gpu_comm_algo(const GpuComm *gc) { return gc->algo; }
extern "C" int gpu_comm_shared(const GpuComm *gc) { return gc->shared; }
extern "C" const char *gpu_comm_describe(const GpuComm *gc) { return gc->desc; }

static void check_args(GpuComm *gc, const void *buf, size_t count, DType dt, const char *what) {
    CHECK(gc, "%s on GPU buffers: no GpuComm (gpu_comm_new)", what);
    CHECK(dt == DT_F32 || dt == DT_BF16, "%s on GPU buffers: %s elements are not supported "
          "(fp32 or bf16)", what, dtype_name(dt));
    CHECK(buf || count == 0, "%s on GPU buffers: NULL buffer of %zu elements", what, count);
}

extern "C" void gpu_allreduce(GpuComm *gc, void *buf, size_t count, DType dt) {
    check_args(gc, buf, count, dt, "all-reduce");
    comm_coll_begin(gc->c, gc->g, COLL_ALLREDUCE, count, dt);
    if (gc->algo == GPU_NCCL) {
        nccl_allreduce(gc, buf, count, dt);  // at one rank too: it exercises the NCCL path
    } else if (gc->g->size > 1) {
        ipc_allreduce(gc, buf, count, dt);
    }
    comm_coll_end(gc->c);
}

extern "C" void gpu_reduce_scatter(GpuComm *gc, void *buf, size_t count, DType dt) {
    check_args(gc, buf, count, dt, "reduce-scatter");
    comm_coll_begin(gc->c, gc->g, COLL_REDUCE_SCATTER, count, dt);
    if (gc->algo == GPU_NCCL) {
        nccl_reduce_scatter(gc, buf, count, dt);
    } else if (gc->g->size > 1) {
        ipc_reduce_scatter(gc, buf, count, dt);
    }
    comm_coll_end(gc->c);
}

extern "C" void gpu_all_gather(GpuComm *gc, void *buf, size_t count, DType dt) {
    check_args(gc, buf, count, dt, "all-gather");
    comm_coll_begin(gc->c, gc->g, COLL_ALLGATHER, count, dt);
    if (gc->algo == GPU_NCCL) {
        nccl_all_gather(gc, buf, count, dt);
    } else if (gc->g->size > 1) {
        ipc_all_gather(gc, buf, count, dt);
    }
    comm_coll_end(gc->c);
}

// The blocks as Spans, checked: they must tile the buffer in member order.
static void spans_of(const GpuComm *gc, size_t count, const size_t *lo, const size_t *hi,
                     Spans *sp) {
    for (int i = 0; i < gc->g->size; i++) {
        CHECK(lo[i] <= hi[i] && hi[i] <= count && lo[i] == (i ? hi[i - 1] : 0) &&
              (i + 1 < gc->g->size || hi[i] == count), "GPU collective over blocks on group %s: "
              "member %d's block [%zu, %zu) does not tile %zu elements in member order",
              gc->g->name, i, lo[i], hi[i], count);
        sp->lo[i] = lo[i];
        sp->len[i] = hi[i] - lo[i];
    }
}

extern "C" void gpu_reduce_scatter_v(GpuComm *gc, void *buf, size_t count, const size_t *lo,
                                     const size_t *hi, DType dt) {
    check_args(gc, buf, count, dt, "reduce-scatter");
    Spans sp;
    spans_of(gc, count, lo, hi, &sp);
    comm_coll_begin(gc->c, gc->g, COLL_REDUCE_SCATTER, count, dt);
    if (gc->algo == GPU_NCCL) nccl_reduce_scatter_v(gc, buf, count, &sp, dt);
    else if (gc->g->size > 1) ipc_reduce_scatter_v(gc, buf, count, &sp, dt);
    comm_coll_end(gc->c);
}

extern "C" void gpu_all_gather_v(GpuComm *gc, void *buf, size_t count, const size_t *lo,
                                 const size_t *hi, DType dt) {
    check_args(gc, buf, count, dt, "all-gather");
    Spans sp;
    spans_of(gc, count, lo, hi, &sp);
    comm_coll_begin(gc->c, gc->g, COLL_ALLGATHER, count, dt);
    if (gc->algo == GPU_NCCL) nccl_all_gather_v(gc, buf, count, &sp, dt);
    else if (gc->g->size > 1) ipc_all_gather_v(gc, buf, count, &sp, dt);
    comm_coll_end(gc->c);
}

extern "C" void gpu_broadcast(GpuComm *gc, void *buf, size_t count, DType dt, int root) {
    check_args(gc, buf, count, dt, "broadcast");
    CHECK(root >= 0 && root < gc->g->size, "broadcast: root %d outside group %s of %d", root,
          gc->g->name, gc->g->size);
    comm_coll_begin(gc->c, gc->g, COLL_BROADCAST, count, dt);
    if (gc->algo == GPU_NCCL) {
        nccl_broadcast(gc, buf, count, dt, root);
    } else if (gc->g->size > 1) {
        ipc_broadcast(gc, buf, count, dt, root);
    }
    comm_coll_end(gc->c);
}

extern "C" double gpu_copy_bandwidth(Ctx *ctx, size_t bytes) {
    CHECK(ctx->device == DEV_CUDA && ctx->backend, "gpu_copy_bandwidth needs a CUDA context");
    cudaStream_t s = ((CudaBackend *)ctx->backend)->stream;
    const int reps = 20;
    void *src = mem_alloc(ctx, MEM_WORKSPACE, bytes), *dst = mem_alloc(ctx, MEM_WORKSPACE, bytes);
    cudaEvent_t t0, t1;
    CUDA_CHECK(cudaEventCreate(&t0));
    CUDA_CHECK(cudaEventCreate(&t1));
    copy_async(dst, src, bytes, s);  // warm-up: first-touch costs stay out of the timing
    CUDA_CHECK(cudaEventRecord(t0, s));
    for (int i = 0; i < reps; i++) copy_async(dst, src, bytes, s);
    CUDA_CHECK(cudaEventRecord(t1, s));
    poll_event(NULL, t1, 60.0, "timing device-to-device copies", bytes);
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    CUDA_CHECK(cudaEventDestroy(t0));
    CUDA_CHECK(cudaEventDestroy(t1));
    mem_free(ctx, MEM_WORKSPACE, dst, bytes);
    mem_free(ctx, MEM_WORKSPACE, src, bytes);
    // Each copy reads `bytes` and writes `bytes`.
    return ms > 0 ? 2.0 * (double)bytes * reps / (ms * 1e-3) * 1e-9 : 0.0;
}
