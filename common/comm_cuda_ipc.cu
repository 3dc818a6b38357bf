// comm_cuda_ipc.cu — the GPU collectives over CUDA IPC: several processes that
// share one GPU (the course's one-GPU simulation of N ranks; NCCL refuses two
// ranks on one GPU), or the GPUs of one machine with peer-to-peer access.
//
//   1. kernels: the elementwise add of the ring's reduce step (fp32, bf16);
//   2. the protocol: outboxes, handshakes, and why no shard is read half-written;
//   3. the collectives, each growing the outbox first when a message outgrows it.
#include <string.h>

#include <cuda_bf16.h>

#include "comm_cuda_internal.cuh"

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

// ================================================================ 2. the protocol
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
    gc_where(gc, w, sizeof w);
    DIE("ranks disagree in %s: this rank expects %s for step %u of %llu elements from member "
        "%d (world rank %d), which sent %s for step %u of %llu elements", w, ctl_name(want->tag),
        want->step, (unsigned long long)want->count, from, gc->g->ranks[from],
        ctl_name(got->tag), got->step, (unsigned long long)got->count);
}

// One handshake: send `out` to member `to`, receive the message `want` from
// member `from` (both posted before waiting, so a ring of them cannot deadlock).
static void ctl_exchange(GpuComm *gc, int to, Ctl out, int from, Ctl want) {
    Ctl got;
    CommRequest *q[2] = {gc_ctl_isend(gc, to, &out, sizeof out),
                         gc_ctl_irecv(gc, from, &got, sizeof got)};
    comm_wait(gc->c, q, 2);
    ctl_check(gc, from, &got, &want);
}

// Closes our mappings of the other members' outboxes. Our stream is idle (every
// collective ends with gc_sync), so no kernel of ours still reads them.
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
    gc_sync(gc, "clearing the CUDA IPC outbox", bytes);
    Rec mine, *all = (Rec *)calloc(p, sizeof(Rec));
    CHECK(all, "out of host memory");
    memset(&mine, 0, sizeof mine);
    CUDA_CHECK(cudaIpcGetMemHandle(&mine.h, gc->outbox));
    mine.bytes = bytes;
    gc_host_allgather(gc, &mine, all, sizeof mine);
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
    gc_host_allgather(gc, &mine, all, sizeof mine);
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

// ================================================================ 3. the collectives

// The two phases of the ring (the protocol above) over the blocks `sp` (even, or
// stage 03's); the outbox is large enough.
static void ring_reduce_scatter(GpuComm *gc, void *buf, size_t count, const Spans *sp, DType dt) {
    int p = gc->g->size, r = gc->g->rank, right = mod(r + 1, p), left = mod(r - 1, p);
    size_t es = dtype_size(dt), lo = sp->lo[mod(r - 1, p)], len = sp->len[mod(r - 1, p)];
    unsigned char *b = (unsigned char *)buf, *out = gc->outbox, *lout = gc->peer[left];
    copy_async(out + lo * es, b + lo * es, len * es, gc->stream);
    gc_sync(gc, "copying the first shard into the CUDA IPC outbox", len * es);
    for (int k = 0; k < p - 1; k++) {
        ctl_exchange(gc, right, Ctl{CTL_READY, (uint32_t)k, count}, left,
                     Ctl{CTL_READY, (uint32_t)k, count});
        size_t slen = sp->len[mod(r - k - 1, p)];  // what the right reads from us: s(k)
        lo = sp->lo[mod(r - k - 2, p)];
        len = sp->len[mod(r - k - 2, p)];
        unsigned char *dst = k < p - 2 ? out : b;
        launch_add(dst + lo * es, b + lo * es, lout + lo * es, len, dt, gc->stream);
        gc_sync(gc, "adding the left neighbour's shard (reduce-scatter)", len * es);
        gc_count_bytes(gc, slen * es, len * es);
    }
    ctl_exchange(gc, left, Ctl{CTL_DONE, (uint32_t)(p - 1), count}, right,
                 Ctl{CTL_DONE, (uint32_t)(p - 1), count});
}

static void ring_all_gather(GpuComm *gc, void *buf, size_t count, const Spans *sp, DType dt) {
    int p = gc->g->size, r = gc->g->rank, right = mod(r + 1, p), left = mod(r - 1, p);
    size_t es = dtype_size(dt), lo = sp->lo[r], len = sp->len[r];
    unsigned char *b = (unsigned char *)buf, *out = gc->outbox, *lout = gc->peer[left];
    copy_async(out + lo * es, b + lo * es, len * es, gc->stream);
    gc_sync(gc, "copying this rank's shard into the CUDA IPC outbox", len * es);
    for (int k = 0; k < p - 1; k++) {
        ctl_exchange(gc, right, Ctl{CTL_READY, (uint32_t)k, count}, left,
                     Ctl{CTL_READY, (uint32_t)k, count});
        size_t slen = sp->len[mod(r - k, p)];  // what the right reads from us: shard r-k
        lo = sp->lo[mod(r - k - 1, p)];
        len = sp->len[mod(r - k - 1, p)];
        copy_async(b + lo * es, lout + lo * es, len * es, gc->stream);
        // Pass it on from our own copy (a local read, even when the left's
        // outbox is on another GPU).
        if (k < p - 2) copy_async(out + lo * es, b + lo * es, len * es, gc->stream);
        gc_sync(gc, "copying the left neighbour's shard (all-gather)", len * es);
        gc_count_bytes(gc, slen * es, len * es);
    }
    ctl_exchange(gc, left, Ctl{CTL_DONE, (uint32_t)(p - 1), count}, right,
                 Ctl{CTL_DONE, (uint32_t)(p - 1), count});
}

void ipc_broadcast(GpuComm *gc, void *buf, size_t count, DType dt, int root) {
    int p = gc->g->size, r = gc->g->rank;
    size_t bytes = count * dtype_size(dt);
    ipc_reserve(gc, bytes, count);
    Ctl ready = {CTL_READY, 0, count}, done = {CTL_DONE, 0, count};
    if (r == root) {
        copy_async(gc->outbox, buf, bytes, gc->stream);
        gc_sync(gc, "copying the root's buffer into the CUDA IPC outbox", bytes);
        Ctl got[COMM_MAX_RANKS];
        CommRequest *q[2 * COMM_MAX_RANKS];
        int n = 0;
        for (int i = 0; i < p; i++)
            if (i != r) {
                q[n++] = gc_ctl_isend(gc, i, &ready, sizeof ready);
                q[n++] = gc_ctl_irecv(gc, i, &got[i], sizeof got[i]);
            }
        comm_wait(gc->c, q, n);
        for (int i = 0; i < p; i++)
            if (i != r) ctl_check(gc, i, &got[i], &done);
        gc_count_bytes(gc, (size_t)(p - 1) * bytes, 0);
    } else {
        Ctl got;
        CommRequest *q = gc_ctl_irecv(gc, root, &got, sizeof got);
        comm_wait(gc->c, &q, 1);
        ctl_check(gc, root, &got, &ready);
        copy_async(buf, gc->peer[root], bytes, gc->stream);
        gc_sync(gc, "copying the root's buffer (broadcast)", bytes);
        q = gc_ctl_isend(gc, root, &done, sizeof done);
        comm_wait(gc->c, &q, 1);
        gc_count_bytes(gc, 0, bytes);
    }
}

void ipc_allreduce(GpuComm *gc, void *buf, size_t count, DType dt) {
    Spans sp;
    spans_even(&sp, count, gc->g->size);
    ipc_reserve(gc, count * dtype_size(dt), count);
    ring_reduce_scatter(gc, buf, count, &sp, dt);
    ring_all_gather(gc, buf, count, &sp, dt);
}

void ipc_reduce_scatter_v(GpuComm *gc, void *buf, size_t count, const Spans *sp, DType dt) {
    ipc_reserve(gc, count * dtype_size(dt), count);
    ring_reduce_scatter(gc, buf, count, sp, dt);
}

void ipc_all_gather_v(GpuComm *gc, void *buf, size_t count, const Spans *sp, DType dt) {
    ipc_reserve(gc, count * dtype_size(dt), count);
    ring_all_gather(gc, buf, count, sp, dt);
}

void ipc_reduce_scatter(GpuComm *gc, void *buf, size_t count, DType dt) {
    Spans sp;
    spans_even(&sp, count, gc->g->size);
    ipc_reduce_scatter_v(gc, buf, count, &sp, dt);
}

void ipc_all_gather(GpuComm *gc, void *buf, size_t count, DType dt) {
    Spans sp;
    spans_even(&sp, count, gc->g->size);
    ipc_all_gather_v(gc, buf, count, &sp, dt);
}

// The first outbox: 2 MiB, grown on demand (ipc_reserve).
void ipc_init(GpuComm *gc) { ipc_map(gc, (size_t)2 << 20); }

void ipc_free(GpuComm *gc) {
    ipc_unmap(gc);
    p2p_unmap(gc);               // the point-to-point outboxes too (comm_cuda_p2p.cu)
    ipc_agree(gc, CTL_DONE, 0);  // everyone has unmapped ours: now they may go
    ipc_free_outbox(gc);
    p2p_free(gc);
}

