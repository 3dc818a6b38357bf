// comm_cuda.cu — collectives on GPU buffers: NCCL, and a ring over CUDA IPC.
//
// What is here (the API and its contract are in comm_cuda.h):
//   1. kernels: the elementwise add of the ring's reduce step (fp32, bf16);
//   2. waiting: every GPU wait polls an event with the comm timeout;
//   3. placement: which GPU each member uses, and so NCCL or CUDA IPC;
//   4. NCCL: the id over the host transport, then NCCL's collectives;
//   5. CUDA IPC: exported outboxes and the ring protocol (described there);
//   6. the public functions.
//
// Every piece of GPU work goes on the rank's one stream (the CUDA backend's), so
// it runs after the kernels that produced the data, with no extra sync; and
// every collective returns only when its result is complete (gpu_sync), so a
// rank that waits forever is always the host, in a loop that has a timeout.
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_bf16.h>

#include "comm_cuda.h"
#include "cuda_common.cuh"
#include "ops.h"
#include "timer.h"

// The Comm internals (the counters and the collective in progress).
extern "C" {
#include "comm_internal.h"
}

// ================================================================ 1. kernels

#define BLOCK 256
// Enough blocks to fill any current GPU several times over (an H100 holds 1056
// blocks of 256 threads at once); a grid-stride loop covers the rest.
static unsigned grid_for(size_t n) {
    size_t g = (n + BLOCK - 1) / BLOCK;
    return (unsigned)(g < 4096 ? g : 4096);
}
#define GRID_STRIDE(i, n)                                                   \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

// Element access in fp32 for both storage types. bf16 is the top half of an
// fp32, so widening is a shift (exact); narrowing rounds to nearest even, as
// f32_to_bf16 (dtype.c) does. The sum of two bf16 is therefore taken in fp32 and
// rounded once: bit for bit what reduce_sum_into does on the host.
__device__ __forceinline__ float load_f(const float *p) { return *p; }
__device__ __forceinline__ float load_f(const uint16_t *p) {
    return __uint_as_float((uint32_t)*p << 16);
}
__device__ __forceinline__ void store_f(float *p, float v) { *p = v; }
__device__ __forceinline__ void store_f(uint16_t *p, float v) {
    *p = __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// out[i] = a[i] + b[i]. out may be a (the final reduce step adds in place), so
// no __restrict__: each element is read before it is written, by one thread.
template <typename T> __global__ void add_kernel(T *out, const T *a, const T *b, size_t n) {
    GRID_STRIDE(i, n) store_f(out + i, load_f(a + i) + load_f(b + i));
}

// The same over 16-byte packs: one 128-bit load per operand moves 4 fp32 or 8
// bf16 at a time, which is what it takes to approach the memory bandwidth.
template <typename T> struct alignas(16) Pack16 { T v[16 / sizeof(T)]; };
template <typename T>
__global__ void add_pack_kernel(Pack16<T> *out, const Pack16<T> *a, const Pack16<T> *b,
                                size_t n) {
    GRID_STRIDE(i, n) {
        Pack16<T> x = a[i], y = b[i], z;
#pragma unroll
        for (int j = 0; j < (int)(16 / sizeof(T)); j++)
            store_f(&z.v[j], load_f(&x.v[j]) + load_f(&y.v[j]));
        out[i] = z;
    }
}

template <typename T>
static void add_scalar(T *out, const T *a, const T *b, size_t n, cudaStream_t s) {
    if (n == 0) return;
    add_kernel<T><<<grid_for(n), BLOCK, 0, s>>>(out, a, b, n);
    CUDA_CHECK_LAUNCH();
}

// A shard starts anywhere (shard_range splits at element, not 16-byte,
// boundaries), but the three operands sit at the same offset of buffers that
// cudaMalloc aligned to 256 bytes, so they share one misalignment. Then a few
// scalar elements up to the next 16-byte boundary, packs for the bulk, scalars
// for the tail. Operands misaligned differently take the scalar kernel alone.
template <typename T>
static void add_typed(T *out, const T *a, const T *b, size_t n, cudaStream_t s) {
    const size_t E = 16 / sizeof(T);
    uintptr_t mis = (uintptr_t)out % 16;
    if ((uintptr_t)a % 16 != mis || (uintptr_t)b % 16 != mis || mis % sizeof(T) != 0) {
        add_scalar(out, a, b, n, s);
        return;
    }
    size_t head = mis ? (16 - mis) / sizeof(T) : 0;
    if (head > n) head = n;
    size_t packs = (n - head) / E, tail = head + packs * E;
    add_scalar(out, a, b, head, s);
    if (packs) {
        add_pack_kernel<T><<<grid_for(packs), BLOCK, 0, s>>>(
            (Pack16<T> *)(out + head), (const Pack16<T> *)(a + head),
            (const Pack16<T> *)(b + head), packs);
        CUDA_CHECK_LAUNCH();
    }
    add_scalar(out + tail, a + tail, b + tail, n - tail, s);
}

// out = a + b over n elements of dt (fp32 or bf16), queued on stream s.
static void launch_add(void *out, const void *a, const void *b, size_t n, DType dt,
                       cudaStream_t s) {
    if (dt == DT_F32)
        add_typed((float *)out, (const float *)a, (const float *)b, n, s);
    else
        add_typed((uint16_t *)out, (const uint16_t *)a, (const uint16_t *)b, n, s);
}

static void copy_async(void *dst, const void *src, size_t bytes, cudaStream_t s) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
}

// ================================================================ the object

struct GpuComm {
    Comm *c;
    Group *g;
    Ctx *ctx;
    cudaStream_t stream;   // the CUDA backend's: ordered after the kernels that made the data
    cudaEvent_t ev;        // recorded after queued work and polled (gpu_sync)
    int device;
    GpuAlgo algo;
    int shared;            // two or more members on one GPU
    char desc[200];
    // CUDA IPC ring
    unsigned char *outbox;                  // ours: exported, read by the other members
    size_t outbox_bytes;
    unsigned char *peer[COMM_MAX_RANKS];    // member q's outbox, mapped here (NULL for us)
    // NCCL
    ncclComm_t nccl;
    unsigned char *pad;                     // layout staging for uneven shards (NCCL wants equal)
    size_t pad_bytes;
};

static int mod(int a, int p) { return ((a % p) + p) % p; }

// collectives.c's shard_range, repeated because common/ cannot call stage code:
// member i of n owns elements [count*i/n, count*(i+1)/n). tests/test_gpu_comm.c
// checks that the two agree.
static void shard_of(size_t count, int n, int i, size_t *lo, size_t *len) {
    size_t a = count / n * i + count % n * i / n;
    size_t b = count / n * (i + 1) + count % n * (i + 1) / n;
    *lo = a;
    *len = b - a;
}

// "all-reduce #12 on group world (4 ranks, id 00000001)": what a diagnostic names.
static void where(const GpuComm *gc, char *buf, size_t n) {
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
static void count_bytes(GpuComm *gc, size_t sent, size_t recv) {
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
static CommRequest *ctl_isend(GpuComm *gc, int peer, const void *buf, size_t bytes) {
    CommRequest *r = comm_isend(gc->c, gc->g, peer, buf, bytes);
    uncount(gc, bytes, 0);
    return r;
}
static CommRequest *ctl_irecv(GpuComm *gc, int peer, void *buf, size_t bytes) {
    CommRequest *r = comm_irecv(gc->c, gc->g, peer, buf, bytes, RECV_COPY, DT_F32);
    uncount(gc, 0, bytes);
    return r;
}

// Every member's `bytes`-byte record, in member order, into all[]: member 0
// collects them and sends the table back. Small set-up messages, p <= 64.
static void host_allgather(GpuComm *gc, const void *mine, void *all, size_t bytes) {
    int p = gc->g->size, r = gc->g->rank;
    unsigned char *t = (unsigned char *)all;
    memcpy(t + (size_t)r * bytes, mine, bytes);
    if (p == 1) return;
    CommRequest *q[COMM_MAX_RANKS];
    if (r == 0) {
        for (int i = 1; i < p; i++) q[i - 1] = ctl_irecv(gc, i, t + (size_t)i * bytes, bytes);
        comm_wait(gc->c, q, p - 1);
        for (int i = 1; i < p; i++) q[i - 1] = ctl_isend(gc, i, t, (size_t)p * bytes);
        comm_wait(gc->c, q, p - 1);
    } else {
        q[0] = ctl_isend(gc, 0, mine, bytes);
        comm_wait(gc->c, q, 1);
        q[0] = ctl_irecv(gc, 0, t, (size_t)p * bytes);
        comm_wait(gc->c, q, 1);
    }
}

// ================================================================ 2. waiting

// Spin for the first 20 us (the GPU is usually about to finish), then yield the
// core (ranks sharing a GPU may outnumber cores), and after 2 ms sleep 50 us.
static void backoff(double idle) {
    if (idle > 2e-3) {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    } else if (idle > 20e-6) {
        sched_yield();
    }
}

// Blocks until NCCL's state leaves "in progress". A nonblocking communicator
// (we make ours nonblocking so that nothing in NCCL can block without our
// timeout) returns ncclInProgress from its set-up and may from any call; the
// state must settle before the next call. r is what the call returned.
static void nccl_settle(GpuComm *gc, ncclResult_t r, const char *what) {
    double start = now_seconds();
    while (r == ncclInProgress) {
        double now = now_seconds();
        if (now - start > comm_timeout(gc->c)) {
            char w[160];
            where(gc, w, sizeof w);
            ncclCommAbort(gc->nccl);  // frees NCCL's threads; we are about to exit anyway
            DIE("timeout after %.1f s in %s: %s has not completed (did every member of the "
                "group reach it?)", comm_timeout(gc->c), w, what);
        }
        backoff(now - start);
        ncclResult_t q = ncclCommGetAsyncError(gc->nccl, &r);
        if (q != ncclSuccess) r = q;
    }
    if (r != ncclSuccess) {
        char w[160];
        where(gc, w, sizeof w);
        DIE("NCCL error %d in %s: %s failed: %s (%s)", (int)r, w, what, ncclGetErrorString(r),
            gc->nccl ? ncclGetLastError(gc->nccl) : "no communicator");
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
            if (gc) where(gc, w, sizeof w);
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
                if (gc) where(gc, w, sizeof w);
                if (gc && gc->nccl) ncclCommAbort(gc->nccl);
                DIE("timeout after %.1f s in %s: the GPU has not finished %s (%zu bytes)%s",
                    timeout_s, w, what, bytes,
                    gc && gc->nccl ? "; NCCL kernels wait for every member: has one stopped?"
                                   : "");
            }
        }
        backoff(now - start);
    }
}

// Everything queued on the rank's stream so far has run.
static void gpu_sync(GpuComm *gc, const char *what, size_t bytes) {
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
static void check_peer_access(GpuComm *gc, const DevInfo *me, const DevInfo *peer, int q) {
    if (same_gpu(me, peer)) return;
    int dev = -1, ok = 0;
    if (cudaDeviceGetByPCIBusId(&dev, peer->bus) != cudaSuccess) {
        (void)cudaGetLastError();
        DIE("CUDA IPC on group %s: member %d's GPU (%s, bus %s) is not visible to this process "
            "(is CUDA_VISIBLE_DEVICES different per rank?); use NCCL instead",
            gc->g->name, q, peer->name, peer->bus);
    }
    CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, gc->device, dev));
    CHECK(ok, "CUDA IPC on group %s: this rank's GPU %d (bus %s) cannot read member %d's GPU %d "
          "(bus %s): no peer-to-peer path between them; use NCCL instead", gc->g->name,
          gc->device, me->bus, q, dev, peer->bus);
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
        for (int q = 0; q < p; q++)
            if (q != r) check_peer_access(gc, &all[r], &all[q], q);
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

// ================================================================ 4. NCCL
//
// Member 0 of the group creates the unique id (it names a bootstrap socket on
// its host) and sends it to the others over the host transport; then every
// member joins with ncclCommInitRankConfig. NCCL's collectives need equal
// shards, so reduce-scatter and all-gather of a count that the group size does
// not divide go through a padded copy (shard_range's uneven shards placed at
// equal strides).

static void nccl_init(GpuComm *gc) {
    Group *g = gc->g;
    ncclUniqueId id;
    if (g->rank == 0) {
        NCCL_CHECK(ncclGetUniqueId(&id));
        for (int q = 1; q < g->size; q++) comm_send(gc->c, g, q, &id, sizeof id);
    } else {
        comm_recv(gc->c, g, 0, &id, sizeof id);
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;  // never block inside NCCL: we poll, with the timeout
    ncclResult_t r = ncclCommInitRankConfig(&gc->nccl, g->size, id, g->rank, &cfg);
    nccl_settle(gc, r, "ncclCommInitRankConfig");
}

static ncclDataType_t nccl_type(DType dt) { return dt == DT_F32 ? ncclFloat32 : ncclBfloat16; }

// Grow-only device staging for the padded layout, charged as MEM_COMM.
static unsigned char *nccl_staging(GpuComm *gc, size_t bytes) {
    if (bytes <= gc->pad_bytes) return gc->pad;
    if (gc->pad) {  // our stream is idle: every collective ends with gpu_sync
        CUDA_CHECK(cudaFree(gc->pad));
        ledger_release(&gc->ctx->ledger, MEM_COMM, gc->pad_bytes);
    }
    gc->pad = NULL;
    gc->pad_bytes = 0;
    ledger_charge(&gc->ctx->ledger, MEM_COMM, bytes);
    CUDA_CHECK(cudaMalloc((void **)&gc->pad, bytes));
    gc->pad_bytes = bytes;
    return gc->pad;
}

// The ring's per-rank traffic, which is what NCCL's ring moves (NCCL does not
// say what it moved; its tree algorithm moves the same for all-reduce).
static void nccl_count(GpuComm *gc, double factor, size_t bytes) {
    size_t b = (size_t)(factor * (double)bytes);
    count_bytes(gc, b, b);
}

static void nccl_allreduce(GpuComm *gc, void *buf, size_t count, DType dt) {
    int p = gc->g->size;
    size_t bytes = count * dtype_size(dt);
    if (count == 0) return;
    nccl_settle(gc, ncclAllReduce(buf, buf, count, nccl_type(dt), ncclSum, gc->nccl, gc->stream),
                "ncclAllReduce");
    gpu_sync(gc, "running ncclAllReduce", bytes);
    nccl_count(gc, 2.0 * (p - 1) / p, bytes);
}

static void nccl_reduce_scatter(GpuComm *gc, void *buf, size_t count, DType dt) {
    int p = gc->g->size, r = gc->g->rank;
    size_t es = dtype_size(dt), m = (count + p - 1) / p, lo, len;
    unsigned char *b = (unsigned char *)buf;
    if (count == 0) return;
    if (count % p == 0) {  // shard_range's shards are NCCL's: in place
        nccl_settle(gc, ncclReduceScatter(b, b + r * m * es, m, nccl_type(dt), ncclSum, gc->nccl,
                                          gc->stream), "ncclReduceScatter");
    } else {
        unsigned char *pad = nccl_staging(gc, m * p * es);
        for (int q = 0; q < p; q++) {  // shard q to offset q*m; the gaps are never read back
            shard_of(count, p, q, &lo, &len);
            copy_async(pad + q * m * es, b + lo * es, len * es, gc->stream);
        }
        nccl_settle(gc, ncclReduceScatter(pad, pad + r * m * es, m, nccl_type(dt), ncclSum,
                                          gc->nccl, gc->stream), "ncclReduceScatter");
        shard_of(count, p, r, &lo, &len);
        copy_async(b + lo * es, pad + r * m * es, len * es, gc->stream);
    }
    gpu_sync(gc, "running ncclReduceScatter", count * es);
    nccl_count(gc, (double)(p - 1) / p, count * es);
}

static void nccl_all_gather(GpuComm *gc, void *buf, size_t count, DType dt) {
    int p = gc->g->size, r = gc->g->rank;
    size_t es = dtype_size(dt), m = (count + p - 1) / p, lo, len;
    unsigned char *b = (unsigned char *)buf;
    if (count == 0) return;
    if (count % p == 0) {
        nccl_settle(gc, ncclAllGather(b + r * m * es, b, m, nccl_type(dt), gc->nccl, gc->stream),
                    "ncclAllGather");
    } else {
        unsigned char *pad = nccl_staging(gc, m * p * es);
        shard_of(count, p, r, &lo, &len);
        copy_async(pad + r * m * es, b + lo * es, len * es, gc->stream);
        nccl_settle(gc, ncclAllGather(pad + r * m * es, pad, m, nccl_type(dt), gc->nccl,
                                      gc->stream), "ncclAllGather");
        for (int q = 0; q < p; q++) {
            shard_of(count, p, q, &lo, &len);
            copy_async(b + lo * es, pad + q * m * es, len * es, gc->stream);
        }
    }
    gpu_sync(gc, "running ncclAllGather", count * es);
    nccl_count(gc, (double)(p - 1) / p, count * es);
}

static void nccl_broadcast(GpuComm *gc, void *buf, size_t count, DType dt, int root) {
    size_t bytes = count * dtype_size(dt);
    if (count == 0) return;
    nccl_settle(gc, ncclBroadcast(buf, buf, count, nccl_type(dt), root, gc->nccl, gc->stream),
                "ncclBroadcast");
    gpu_sync(gc, "running ncclBroadcast", bytes);
    // A pipelined chain: the root sends the buffer once, every other member receives it once.
    count_bytes(gc, gc->g->rank == root ? bytes : 0, gc->g->rank == root ? 0 : bytes);
}

// ================================================================ 5. CUDA IPC
//
// Every member owns an OUTBOX: a device buffer as large as the largest message
// so far, exported once with cudaIpcGetMemHandle and mapped by every other
// member with cudaIpcOpenMemHandle. The outbox mirrors the user's buffer: shard
// s lives at shard s's offset. Other members only ever READ our outbox, and
// nobody else ever touches our user buffer.
//
// Ring reduce-scatter (p members; right = r+1, left = r-1; s(k) = r-k-1 is the
// shard this rank passes on at step k, exactly as in ring.c):
//
//   outbox[s(0)] = buf[s(0)]; wait for the GPU
//   step k = 0 .. p-2:
//     send READY(k) to the right; receive READY(k) from the left
//         (READY(k) from the left: its outbox[t] for this step is complete)
//     t = r-k-2 (the shard the left passes on at step k; it is our s(k+1))
//     k < p-2:  outbox[t] = buf[t] + left.outbox[t]   (we pass it on at step k+1)
//     k = p-2:  buf[t]    = buf[t] + left.outbox[t]   (t = r: our finished shard)
//     wait for the GPU
//   send DONE to the left; receive DONE from the right
//
// Why no step reads a half-written shard: a member sends READY(k) only after
// the GPU has finished writing the shard that READY(k) announces (the wait for
// the GPU ends the previous step), and the reader starts its kernel only after
// receiving it. Host messages are ordered after kernel completion, and a
// completed kernel's writes are visible to every later reader of that memory,
// whichever process launched it.
//
// Why no shard is overwritten while being read: within one phase every member
// writes each outbox shard at most once (s(0), then s(1), ..., distinct), so a
// shard a neighbour reads is never rewritten in that phase. The next phase (the
// all-gather half of an all-reduce, or the next collective) rewrites shards; it
// starts only after DONE from the right, which the right sends after its last
// kernel — its last read of our outbox — has finished. (The left reads nothing
// of ours; we send it DONE about OUR reads of ITS outbox.)
//
// Ring all-gather is the same walk with copies: outbox[r] = buf[r]; at step k
// receive shard t = r-k-1 from the left's outbox into buf[t] and, except at
// the last step, into our outbox[t] for the right. Broadcast does not need a
// ring on one GPU: the root fills its outbox, tells everyone, and every member
// copies it out; DONE tells the root that its outbox is free again.
//
// Every handshake carries (kind, step, count) and is checked, so members that
// call with different sizes are told so before anyone reads a peer's memory.
//
// bf16 sums are rounded once per addition in the same order as ring.c's host
// ring (own partial + incoming), so the results are bit-identical to it.

enum { CTL_READY = 1, CTL_DONE, CTL_GROW };
static const char *ctl_name(uint32_t t) {
    return t == CTL_READY ? "READY" : t == CTL_DONE ? "DONE" : t == CTL_GROW ? "GROW" : "?";
}
typedef struct {
    uint32_t tag, step;
    uint64_t count;
} Ctl;

static void ctl_check(GpuComm *gc, int from, const Ctl *got, const Ctl *want) {
    if (got->tag == want->tag && got->step == want->step && got->count == want->count) return;
    char w[160];
    where(gc, w, sizeof w);
    DIE("ranks disagree in %s: this rank expects %s for step %u of %llu elements from member "
        "%d (world rank %d), which sent %s for step %u of %llu elements", w, ctl_name(want->tag),
        want->step, (unsigned long long)want->count, from, gc->g->ranks[from],
        ctl_name(got->tag), got->step, (unsigned long long)got->count);
}

// One handshake: send `out` to member `to`, receive the message `want` from
// member `from` (both posted before waiting, so a ring of them cannot deadlock).
static void ctl_exchange(GpuComm *gc, int to, Ctl out, int from, Ctl want) {
    Ctl got;
    CommRequest *q[2] = {ctl_isend(gc, to, &out, sizeof out),
                         ctl_irecv(gc, from, &got, sizeof got)};
    comm_wait(gc->c, q, 2);
    ctl_check(gc, from, &got, &want);
}

// Closes our mappings of the other members' outboxes. Our stream is idle (every
// collective ends with gpu_sync), so no kernel of ours still reads them.
static void ipc_unmap(GpuComm *gc) {
    for (int q = 0; q < gc->g->size; q++)
        if (gc->peer[q]) {
            CUDA_CHECK(cudaIpcCloseMemHandle(gc->peer[q]));
            gc->peer[q] = NULL;
        }
}

static void ipc_free_outbox(GpuComm *gc) {
    if (!gc->outbox) return;
    CUDA_CHECK(cudaFree(gc->outbox));
    ledger_release(&gc->ctx->ledger, MEM_COMM, gc->outbox_bytes);
    gc->outbox = NULL;
    gc->outbox_bytes = 0;
}

// Allocates and exports our outbox, and maps everyone else's. Collective.
static void ipc_map(GpuComm *gc, size_t bytes) {
    typedef struct {
        cudaIpcMemHandle_t h;
        uint64_t bytes;
    } Rec;
    int p = gc->g->size, r = gc->g->rank;
    ledger_charge(&gc->ctx->ledger, MEM_COMM, bytes);
    cudaError_t e = cudaMalloc((void **)&gc->outbox, bytes);
    if (e != cudaSuccess) {
        char want[32];
        format_bytes(bytes, want, sizeof want);
        DIE("out of memory on cuda:%d: cudaMalloc refused %s for the CUDA IPC outbox (%s)",
            gc->device, want, cudaGetErrorString(e));
    }
    gc->outbox_bytes = bytes;
    // Not needed for correctness (every byte read was written first), but a
    // fresh buffer that is read early should read zeros, not last run's data.
    CUDA_CHECK(cudaMemsetAsync(gc->outbox, 0, bytes, gc->stream));
    gpu_sync(gc, "clearing the CUDA IPC outbox", bytes);
    Rec mine, *all = (Rec *)calloc(p, sizeof(Rec));
    CHECK(all, "out of host memory");
    memset(&mine, 0, sizeof mine);
    CUDA_CHECK(cudaIpcGetMemHandle(&mine.h, gc->outbox));
    mine.bytes = bytes;
    host_allgather(gc, &mine, all, sizeof mine);
    for (int q = 0; q < p; q++) {
        if (q == r) continue;
        CHECK(all[q].bytes == bytes, "CUDA IPC on group %s: member %d's outbox holds %llu bytes, "
              "this rank's %zu (ranks disagree on the message size)", gc->g->name, q,
              (unsigned long long)all[q].bytes, bytes);
        // LazyEnablePeerAccess: when the outbox is on another GPU of this host,
        // enable P2P on first use. On the same GPU it changes nothing.
        CUDA_CHECK(cudaIpcOpenMemHandle((void **)&gc->peer[q], all[q].h,
                                        cudaIpcMemLazyEnablePeerAccess));
    }
    free(all);
}

// Every member, at the same point, agrees that all are there; with `count`
// checked equal. The barrier before freeing an outbox that others had mapped.
static void ipc_agree(GpuComm *gc, uint32_t tag, size_t count) {
    int p = gc->g->size;
    Ctl mine = {tag, 0, count}, *all = (Ctl *)calloc(p, sizeof(Ctl));
    CHECK(all, "out of host memory");
    host_allgather(gc, &mine, all, sizeof mine);
    for (int q = 0; q < p; q++) ctl_check(gc, q, &all[q], &mine);
    free(all);
}

// Makes the outbox hold `bytes`. Growing is collective: the members that call
// a collective call it with the same count, so all of them grow at the same
// call. Unmap everywhere, agree (nobody frees a buffer still mapped elsewhere:
// CUDA leaves that undefined), reallocate, exchange the new handles.
static void ipc_reserve(GpuComm *gc, size_t bytes, size_t count) {
    if (bytes <= gc->outbox_bytes) return;
    size_t chunk = (size_t)2 << 20;  // round up: a sweep of sizes grows a few times, not each call
    size_t want = (bytes + chunk - 1) / chunk * chunk;
    ipc_unmap(gc);
    ipc_agree(gc, CTL_GROW, count);
    ipc_free_outbox(gc);
    ipc_map(gc, want);
}

static void ipc_reduce_scatter(GpuComm *gc, void *buf, size_t count, DType dt) {
    int p = gc->g->size, r = gc->g->rank, right = mod(r + 1, p), left = mod(r - 1, p);
    size_t es = dtype_size(dt), lo, len;
    unsigned char *b = (unsigned char *)buf, *out = gc->outbox, *lout = gc->peer[left];
    shard_of(count, p, mod(r - 1, p), &lo, &len);
    copy_async(out + lo * es, b + lo * es, len * es, gc->stream);
    gpu_sync(gc, "copying the first shard into the CUDA IPC outbox", len * es);
    for (int k = 0; k < p - 1; k++) {
        ctl_exchange(gc, right, Ctl{CTL_READY, (uint32_t)k, count}, left,
                     Ctl{CTL_READY, (uint32_t)k, count});
        size_t slo, slen;  // what the right reads from us at this step: s(k)
        shard_of(count, p, mod(r - k - 1, p), &slo, &slen);
        shard_of(count, p, mod(r - k - 2, p), &lo, &len);
        unsigned char *dst = k < p - 2 ? out : b;
        launch_add(dst + lo * es, b + lo * es, lout + lo * es, len, dt, gc->stream);
        gpu_sync(gc, "adding the left neighbour's shard (reduce-scatter)", len * es);
        count_bytes(gc, slen * es, len * es);
    }
    ctl_exchange(gc, left, Ctl{CTL_DONE, (uint32_t)(p - 1), count}, right,
                 Ctl{CTL_DONE, (uint32_t)(p - 1), count});
}

static void ipc_all_gather(GpuComm *gc, void *buf, size_t count, DType dt) {
    int p = gc->g->size, r = gc->g->rank, right = mod(r + 1, p), left = mod(r - 1, p);
    size_t es = dtype_size(dt), lo, len;
    unsigned char *b = (unsigned char *)buf, *out = gc->outbox, *lout = gc->peer[left];
    shard_of(count, p, r, &lo, &len);
    copy_async(out + lo * es, b + lo * es, len * es, gc->stream);
    gpu_sync(gc, "copying this rank's shard into the CUDA IPC outbox", len * es);
    for (int k = 0; k < p - 1; k++) {
        ctl_exchange(gc, right, Ctl{CTL_READY, (uint32_t)k, count}, left,
                     Ctl{CTL_READY, (uint32_t)k, count});
        size_t slo, slen;  // what the right reads from us at this step: shard r-k
        shard_of(count, p, mod(r - k, p), &slo, &slen);
        shard_of(count, p, mod(r - k - 1, p), &lo, &len);
        copy_async(b + lo * es, lout + lo * es, len * es, gc->stream);
        // Pass it on from our own copy (a local read, even when the left's
        // outbox is on another GPU).
        if (k < p - 2) copy_async(out + lo * es, b + lo * es, len * es, gc->stream);
        gpu_sync(gc, "copying the left neighbour's shard (all-gather)", len * es);
        count_bytes(gc, slen * es, len * es);
    }
    ctl_exchange(gc, left, Ctl{CTL_DONE, (uint32_t)(p - 1), count}, right,
                 Ctl{CTL_DONE, (uint32_t)(p - 1), count});
}

static void ipc_broadcast(GpuComm *gc, void *buf, size_t count, DType dt, int root) {
    int p = gc->g->size, r = gc->g->rank;
    size_t bytes = count * dtype_size(dt);
    Ctl ready = {CTL_READY, 0, count}, done = {CTL_DONE, 0, count};
    if (r == root) {
        copy_async(gc->outbox, buf, bytes, gc->stream);
        gpu_sync(gc, "copying the root's buffer into the CUDA IPC outbox", bytes);
        Ctl got[COMM_MAX_RANKS];
        CommRequest *q[2 * COMM_MAX_RANKS];
        int n = 0;
        for (int i = 0; i < p; i++)
            if (i != r) {
                q[n++] = ctl_isend(gc, i, &ready, sizeof ready);
                q[n++] = ctl_irecv(gc, i, &got[i], sizeof got[i]);
            }
        comm_wait(gc->c, q, n);
        for (int i = 0; i < p; i++)
            if (i != r) ctl_check(gc, i, &got[i], &done);
        count_bytes(gc, (size_t)(p - 1) * bytes, 0);
    } else {
        Ctl got;
        CommRequest *q = ctl_irecv(gc, root, &got, sizeof got);
        comm_wait(gc->c, &q, 1);
        ctl_check(gc, root, &got, &ready);
        copy_async(buf, gc->peer[root], bytes, gc->stream);
        gpu_sync(gc, "copying the root's buffer (broadcast)", bytes);
        q = ctl_isend(gc, root, &done, sizeof done);
        comm_wait(gc->c, &q, 1);
        count_bytes(gc, 0, bytes);
    }
}

// ================================================================ 6. the API

extern "C" const char *gpu_algo_name(GpuAlgo a) {
    return a == GPU_NCCL ? "nccl" : a == GPU_IPC ? "ipc" : "auto";
}

extern "C" int gpu_probe_devices(void) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {  // the child initializes CUDA and reports through its exit status
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
        _exit(n > 255 ? 255 : n);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

extern "C" int gpu_pick_device(const Comm *c) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) (void)cudaGetLastError();
    CHECK(e == cudaSuccess && n > 0, "--device cuda: no CUDA device is visible to this process "
          "(%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    const char *v = getenv("LOCAL_RANK");
    if (!v || !*v) v = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int local = comm_rank(c);
    if (v && *v) {
        char *end;
        long x = strtol(v, &end, 10);
        CHECK(*end == '\0' && x >= 0 && x < 1 << 20, "local rank '%s' (LOCAL_RANK or "
              "OMPI_COMM_WORLD_LOCAL_RANK) is not a valid rank", v);
        local = (int)x;
    }
    return local % n;
}

extern "C" GpuComm *gpu_comm_new(Comm *c, Group *g, Ctx *ctx, GpuAlgo want) {
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
    host_allgather(gc, &mine, all, sizeof mine);
    choose(gc, all, want);
    free(all);

    if (gc->algo == GPU_NCCL) nccl_init(gc);
    else if (g->size > 1) ipc_map(gc, (size_t)2 << 20);  // grown on demand (ipc_reserve)
    if (g->rank == 0) log_info("GPU collectives on group %s: %s", g->name, gc->desc);
    return gc;
}

extern "C" void gpu_comm_free(GpuComm *gc) {
    if (!gc) return;
    if (gc->algo == GPU_IPC && gc->g->size > 1) {
        ipc_unmap(gc);
        ipc_agree(gc, CTL_DONE, 0);  // everyone has unmapped ours: now it may go
        ipc_free_outbox(gc);
    }
    if (gc->nccl) {
        nccl_settle(gc, ncclCommFinalize(gc->nccl), "ncclCommFinalize");
        NCCL_CHECK(ncclCommDestroy(gc->nccl));
        gc->nccl = NULL;
    }
    if (gc->pad) {
        CUDA_CHECK(cudaFree(gc->pad));
        ledger_release(&gc->ctx->ledger, MEM_COMM, gc->pad_bytes);
    }
    CUDA_CHECK(cudaEventDestroy(gc->ev));
    free(gc);
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
        ipc_reserve(gc, count * dtype_size(dt), count);
        ipc_reduce_scatter(gc, buf, count, dt);
        ipc_all_gather(gc, buf, count, dt);
    }
    comm_coll_end(gc->c);
}

extern "C" void gpu_reduce_scatter(GpuComm *gc, void *buf, size_t count, DType dt) {
    check_args(gc, buf, count, dt, "reduce-scatter");
    comm_coll_begin(gc->c, gc->g, COLL_REDUCE_SCATTER, count, dt);
    if (gc->algo == GPU_NCCL) {
        nccl_reduce_scatter(gc, buf, count, dt);
    } else if (gc->g->size > 1) {
        ipc_reserve(gc, count * dtype_size(dt), count);
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
        ipc_reserve(gc, count * dtype_size(dt), count);
        ipc_all_gather(gc, buf, count, dt);
    }
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
        ipc_reserve(gc, count * dtype_size(dt), count);
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
