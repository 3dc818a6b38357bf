// test_gpu_comm.c — the GPU collectives (comm_cuda.h) against a serial sum.
//
//   test_gpu_comm --np 3        (built-in launcher; ranks share GPUs round-robin)
//
// For each way of moving GPU buffers — our ring over CUDA IPC always, NCCL when
// every rank has a GPU of its own — and each collective, on counts 0, 1, 7,
// 4099 and 2^20, fp32 and bf16: every element must equal the serial sum EXACTLY.
// The data are small integers (|x| <= 8), so every partial sum is an integer of
// magnitude at most 8p and exact in fp32 and in bf16 (integers to 256), whatever
// the order of additions. Counts 7 and 4099 give uneven shards at every world
// size above 1 (and, for NCCL, the padded path).
//
// Then, for the IPC ring, two claims of comm_cuda.cu that tie it to the host
// ring of ring.c: on random fp32 and bf16 data its all-reduce is bit-identical
// to the host ring's (same shards, same order of additions, one rounding each),
// and it adds the same bytes to the counters (the handshakes are not payload).
// And NCCL's refusal of two ranks on one GPU: asking for NCCL with a shared GPU
// must give the IPC ring.
//
// Point to point on device buffers (gpu_isend / gpu_irecv over CUDA IPC, stage
// 05's pipeline messages), at 2 ranks and more: every rank sends to both
// neighbours at once, random bytes of sizes from 0 to past two growths of the
// outbox, posted before its receives (a send completes only once TAKEN, so this
// needs every request moved along while waiting); every message must arrive
// bitwise, in order, and the counters must hold the payload only.
//
// One line per (way, collective, property), printed by rank 0 after collecting
// the verdicts point to point (not through the collectives under test).
//
// Skipped (exit 77, which tests/run.sh counts as skipped) with no CUDA in the
// build, with no CUDA device, and when the ranks would share a GPU whose compute
// mode forbids it (exclusive-process: only one process may hold it; the test
// never changes the mode). A GPU that is there but broken is a FAIL, never a
// skip (common/cuda_probe.h). Where the IPC ring cannot connect the ranks' GPUs
// (a peer GPU hidden from a rank, no peer-to-peer path) its checks are skipped
// with the reason, and NCCL's still run.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collectives.h"
#include "comm_cuda.h"
#include "cuda_probe.h"
#include "flags.h"
#include "ops.h"
#include "rng.h"

static const size_t counts[] = {0, 1, 7, 4099, (size_t)1 << 20};
#define NCOUNTS (sizeof counts / sizeof counts[0])
#define MAXCOUNT ((size_t)1 << 20)

typedef struct {
    Comm *c;
    Group *g;
    Ctx *ctx;
    void *dev;   // device buffer of MAXCOUNT fp32
    void *host;  // host buffer of the same size
} Env;

static float value(int rank, size_t i) { return (float)((int)((i * 7 + rank * 13) % 17) - 8); }

static void put(void *buf, DType dt, size_t i, float v) {
    if (dt == DT_F32) ((float *)buf)[i] = v;
    else ((uint16_t *)buf)[i] = f32_to_bf16(v);
}
static float get(const void *buf, DType dt, size_t i) {
    return dt == DT_F32 ? ((const float *)buf)[i] : bf16_to_f32(((const uint16_t *)buf)[i]);
}

static void run(GpuComm *gc, int op, void *buf, size_t n, DType dt, int root) {
    switch (op) {
        case OP_ALLREDUCE: gpu_allreduce(gc, buf, n, dt); break;
        case OP_REDUCE_SCATTER: gpu_reduce_scatter(gc, buf, n, dt); break;
        case OP_ALL_GATHER: gpu_all_gather(gc, buf, n, dt); break;
        default: gpu_broadcast(gc, buf, n, dt, root); break;
    }
}

// Runs op on integer data through the GPU; returns the number of wrong elements.
static long check_exact(Env *e, GpuComm *gc, int op, size_t n, DType dt) {
    int p = e->g->size, r = e->g->rank, root = p > 1 ? 1 : 0;  // not always rank 0
    size_t es = dtype_size(dt);
    for (size_t i = 0; i < n; i++) put(e->host, dt, i, value(r, i));
    e->ctx->ops->to_device(e->ctx, e->dev, e->host, n * es);
    run(gc, op, e->dev, n, dt, root);
    e->ctx->ops->to_host(e->ctx, e->host, e->dev, n * es);
    long wrong = 0;
    for (size_t i = 0; i < n; i++) {
        float want;
        if (collective_expected((CollOp)op, p, r, root, n, i, value, &want))
            wrong += get(e->host, dt, i) != want;
    }
    return wrong;
}

// Rank 0 adds up everyone's count of failures (point to point) and prints one
// line: "PASS|FAIL name  <total> <what>".
static void verdict(Env *e, const char *name, long bad, const char *what) {
    long total = bad;
    if (e->g->rank == 0) {
        for (int q = 1; q < e->g->size; q++) {
            comm_recv(e->c, e->g, q, &bad, sizeof bad);
            total += bad;
        }
        printf("%s %s  %ld %s\n", total == 0 ? "PASS" : "FAIL", name, total, what);
        fflush(stdout);
    } else {
        comm_send(e->c, e->g, 0, &bad, sizeof bad);
    }
}

static void test_exact(Env *e, GpuComm *gc, const char *way) {
    for (int op = 0; op < OP_COUNT; op++) {
        long wrong = 0;
        for (size_t k = 0; k < NCOUNTS; k++) {
            wrong += check_exact(e, gc, op, counts[k], DT_F32);
            wrong += check_exact(e, gc, op, counts[k], DT_BF16);
        }
        char name[96];
        snprintf(name, sizeof name, "gpu.%s.%s.np%d", way, coll_op_names[op], e->g->size);
        verdict(e, name, wrong, "wrong elements (counts 0, 1, 7, 4099, 2^20 x fp32/bf16, exact)");
    }
}

// The IPC ring against the host ring on random data: bits and counters.
static void test_ipc_equals_host_ring(Env *e, GpuComm *gc) {
    int p = e->g->size;
    size_t n = 4099;
    long differ = 0, counter_diff = 0;
    for (int d = 0; d < 2; d++) {
        DType dt = d ? DT_BF16 : DT_F32;
        size_t es = dtype_size(dt);
        Rng rng;
        rng_seed(&rng, 77 + (unsigned long long)e->g->rank);
        unsigned char *mine = xmalloc(n * es), *ring = xmalloc(n * es), *gpu = xmalloc(n * es);
        for (size_t i = 0; i < n; i++) put(mine, dt, i, (float)rng_normal(&rng));
        const CommCounter *k = comm_counters(e->c);
        memcpy(ring, mine, n * es);
        CommCounter before = k[COLL_ALLREDUCE];
        allreduce(e->c, e->g, ring, n, dt, ALGO_RING);
        CommCounter host_moved = {0, k[COLL_ALLREDUCE].bytes_sent - before.bytes_sent,
                                  k[COLL_ALLREDUCE].bytes_recv - before.bytes_recv};
        e->ctx->ops->to_device(e->ctx, e->dev, mine, n * es);
        before = k[COLL_ALLREDUCE];
        gpu_allreduce(gc, e->dev, n, dt);
        CommCounter gpu_moved = {0, k[COLL_ALLREDUCE].bytes_sent - before.bytes_sent,
                                 k[COLL_ALLREDUCE].bytes_recv - before.bytes_recv};
        e->ctx->ops->to_host(e->ctx, gpu, e->dev, n * es);
        differ += memcmp(gpu, ring, n * es) != 0;
        counter_diff += gpu_moved.bytes_sent != host_moved.bytes_sent ||
                        gpu_moved.bytes_recv != host_moved.bytes_recv;
        free(mine);
        free(ring);
        free(gpu);
    }
    char name[96];
    snprintf(name, sizeof name, "gpu.ipc.allreduce_bitwise_equals_host_ring.np%d", p);
    verdict(e, name, differ, "(rank, dtype) pairs differ (random fp32 and bf16, 4099 elements)");
    snprintf(name, sizeof name, "gpu.ipc.counters_equal_host_ring.np%d", p);
    verdict(e, name, counter_diff, "(rank, dtype) pairs count other bytes sent or received");
}

// ---------------------------------------------------------------- point to point

// Message k from `from` to `to` (world ranks), direction d: its size and bytes.
static const size_t p2p_sizes[] = {0, 4, 4099 * 4, (size_t)3 << 20, 1000, (size_t)5 << 20};
#define P2P_K ((int)(sizeof p2p_sizes / sizeof p2p_sizes[0]))
static void p2p_fill(unsigned char *b, size_t n, int from, int to, int d, int k) {
    Rng rng;
    rng_seed(&rng, 1000003ull * (unsigned long long)(from + 1) + 1009ull * (unsigned long long)to +
                       97ull * (unsigned long long)d + (unsigned long long)k);
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)rng_u64(&rng);
}

static void test_p2p(Env *e, GpuComm *gc, const char *how) {
    int p = e->g->size, r = e->g->rank, nbr[2] = {(r + 1) % p, (r + p - 1) % p};
    // [d][k]: direction d = 0 to the right / from the left, 1 the other way.
    void *out[2][P2P_K], *in[2][P2P_K];
    GpuRequest *req[4 * P2P_K];
    const CommCounter *cnt = comm_counters(e->c);
    CommCounter before = cnt[COLL_P2P];
    size_t sent = 0, got = 0;
    int n = 0;
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < P2P_K; k++) {
            size_t b = p2p_sizes[k];
            unsigned char *h = xmalloc(b + 1);
            p2p_fill(h, b, r, nbr[d], d, k);
            out[d][k] = mem_alloc(e->ctx, MEM_WORKSPACE, b);
            in[d][k] = mem_alloc(e->ctx, MEM_WORKSPACE, b);
            // Queued on the compute stream: the send must read after the upload, and
            // the receive must land after the clearing, or the bytes come out wrong.
            e->ctx->ops->to_device(e->ctx, out[d][k], h, b);
            e->ctx->ops->memset0(e->ctx, in[d][k], b);
            free(h);
            req[n++] = gpu_isend(gc, nbr[d], out[d][k], b);
            sent += b;
        }
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < P2P_K; k++) {
            req[n++] = gpu_irecv(gc, nbr[1 - d], in[d][k], p2p_sizes[k]);
            got += p2p_sizes[k];
        }
    // The last receive first (it can finish only after the others of its
    // channel): gpu_wait_first must move everything else along meanwhile.
    GpuRequest *last = req[n - 1];
    req[n - 1] = req[0];
    req[0] = last;
    gpu_wait_first(gc, req, n);
    gpu_wait(gc, req + 1, n - 1);
    long wrong = 0;
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < P2P_K; k++) {
            size_t b = p2p_sizes[k];
            unsigned char *h = xmalloc(b + 1), *want = xmalloc(b + 1);
            e->ctx->ops->to_host(e->ctx, h, in[d][k], b);
            // What the neighbour on side 1-d sent to us in its direction d.
            p2p_fill(want, b, nbr[1 - d], r, d, k);
            wrong += memcmp(h, want, b) != 0;
            free(h);
            free(want);
            mem_free(e->ctx, MEM_WORKSPACE, out[d][k], b);
            mem_free(e->ctx, MEM_WORKSPACE, in[d][k], b);
        }
    long counted = (cnt[COLL_P2P].bytes_sent - before.bytes_sent != sent) +
                   (cnt[COLL_P2P].bytes_recv - before.bytes_recv != got) +
                   (cnt[COLL_P2P].calls - before.calls != 2 * P2P_K);
    char name[96];
    snprintf(name, sizeof name, "gpu.p2p%s%s.bitwise.np%d", *how ? "." : "", how, p);
    verdict(e, name, wrong, "messages differ (each rank to both neighbours, 0 B to 5 MiB, random "
            "bytes, the outbox grown twice)");
    snprintf(name, sizeof name, "gpu.p2p%s%s.counters.np%d", *how ? "." : "", how, p);
    verdict(e, name, counted, "(rank, counter) pairs other than the payload (sent, received, "
            "sends)");
}

// NCCL asked for by name: what placement gave, then NCCL's collectives.
static void test_nccl(Env *e, GpuComm *nccl, int shared) {
    GpuAlgo got = gpu_comm_algo(nccl);
    char name[96];
    snprintf(name, sizeof name, "gpu.nccl.placement.np%d", e->g->size);
    if (e->g->rank == 0) {
        int ok = shared ? got == GPU_IPC : got == GPU_NCCL;
        printf("%s %s  ranks %s a GPU; asked for NCCL, got %s (%s)\n", ok ? "PASS" : "FAIL", name,
               shared ? "share" : "do not share", gpu_algo_name(got), gpu_comm_describe(nccl));
        fflush(stdout);
    }
    if (got == GPU_NCCL) {
        test_exact(e, nccl, "nccl");
        // Point to point over NCCL (comm_cuda_p2p_nccl.cu): the same messages as
        // over CUDA IPC, sent out as one group by the first wait.
        if (e->g->size > 1) {
            gpu_p2p_prepare(nccl);
            test_p2p(e, nccl, "nccl");
        }
    } else if (e->g->rank == 0) {
        printf("SKIP gpu.nccl.*.np%d: ranks share a GPU\n", e->g->size);
    }
}

int main(int argc, char **argv) {
    int np = 1;
    double timeout = 60;
    Flag flags[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch (built-in launcher)"),
        F_DOUBLE("--timeout", &timeout, 0.1, 3600, "seconds any wait may take"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "test_gpu_comm [flags]",
                "Checks the GPU collectives (CUDA IPC ring, NCCL) against a serial sum.");
    // Asked in a child process: CUDA must not be initialized before the fork below.
    CudaProbe probe;
    cuda_probe_forked(&probe);
    int gate = cuda_probe_gate(&probe, "gpu-comm");
    if (gate) return gate;
    char why[400];
    if (!cuda_probe_can_share(&probe, np, why, sizeof why)) {
        printf("SKIP gpu-comm: %s (the test never changes a GPU's compute mode)\n", why);
        return 77;
    }
    CommConfig cc = {.np = np, .timeout_s = timeout};
    Comm *c = comm_launch(&cc);
    Ctx ctx;
    ctx_init_device(&ctx, DEV_CUDA, gpu_pick_device(c), 1, 0);
    Env e = {.c = c, .g = comm_world(c), .ctx = &ctx};
    e.dev = mem_alloc(&ctx, MEM_WORKSPACE, MAXCOUNT * sizeof(float));
    e.host = xmalloc(MAXCOUNT * sizeof(float));

    // Collective: every rank gets the IPC ring, or every rank gets NULL.
    GpuComm *ipc = gpu_comm_try(c, e.g, &ctx, GPU_IPC, why, sizeof why);
    int shared = np > probe.devices;  // round-robin placement, as gpu_pick_device
    if (ipc) {
        test_exact(&e, ipc, "ipc");
        test_ipc_equals_host_ring(&e, ipc);
        if (np > 1) test_p2p(&e, ipc, "");
        shared = gpu_comm_shared(ipc);
        gpu_comm_free(ipc);
    } else if (e.g->rank == 0) {
        printf("SKIP gpu.ipc.*.np%d: %s\n", e.g->size, why);
        fflush(stdout);
    }

    // NCCL as asked for by name: on distinct GPUs it must be NCCL; on a shared
    // GPU it must be refused (and the IPC ring used), never a hang or a crash.
    GpuComm *nccl = gpu_comm_try(c, e.g, &ctx, GPU_NCCL, why, sizeof why);
    if (nccl) {
        test_nccl(&e, nccl, shared);
        gpu_comm_free(nccl);
    } else if (e.g->rank == 0) {  // shared GPUs: the IPC ring, which cannot connect them
        printf("SKIP gpu.nccl.*.np%d: %s\n", e.g->size, why);
    }

    mem_free(&ctx, MEM_WORKSPACE, e.dev, MAXCOUNT * sizeof(float));
    free(e.host);
    ctx_destroy(&ctx);
    comm_finalize(c);
    return 0;
}
