// bench_collectives.c — time one collective over a range of sizes, printed in
// the columns of NVIDIA's nccl-tests so the numbers read like theirs:
//
//   size (B)  count  type  redop  time (us)  algbw (GB/s)  busbw (GB/s)  #wrong
//
//   algbw = size / time;  busbw = algbw * factor, the factor making the figure
//   comparable to a link's bandwidth: all-reduce 2(p-1)/p, reduce-scatter,
//   all-gather and all-to-all (p-1)/p (size = the whole buffer), broadcast 1.
//   The all-to-all sends from a second buffer into the timed one (out of place, as
//   MPI_Alltoall is timed), in blocks of size/p.
//
//   build/bench_collectives --np 2 --op allreduce --algo ring --max-bytes 256M
//   build/bench_collectives --np 4 --op all_to_all --algo pairwise
//   mpirun -np 2 build/bench_collectives --transport mpi --algo mpi
//   build/bench_collectives --np 4 --device cuda --algo ring   # 4 ranks, GPU buffers, CUDA IPC
//   build/bench_collectives --np 8 --device cuda --algo nccl   # one GPU per rank (8 GPUs)
//
// With --device cuda the buffers live on the GPU and the collectives are
// comm_cuda.h's: --algo ring is our ring over CUDA IPC (ranks sharing a GPU, or
// the GPUs of one machine), --algo nccl is NCCL (one GPU per rank; ranks that
// share a GPU fall back to the IPC ring, and the header says so). Rank 0 first
// measures its GPU's copy bandwidth (cudaMemcpy device to device, bytes read +
// written), and an extra column gives busbw as a fraction of it: on one GPU
// shared by N ranks, that memory is the only "link" there is. Expect a small
// fraction: it carries every rank's traffic at once. Per rank and per shard of
// n/N bytes, a reduce-scatter step of the IPC ring reads two shards and writes
// one (3 n/N of memory traffic) and an all-gather step copies a shard in and on
// to the outbox (4 n/N); N ranks times N-1 steps of each make about 7(N-1) n
// for an all-reduce of n bytes, so busbw = 2(N-1)/N n / time can reach at most
// about 2/(7N) of the copy bandwidth (0.07 for 4 ranks).
//
// Time: every rank times each of `iters` back-to-back calls after warm-up; an
// iteration's time is its slowest rank's (a collective is done when its last
// rank is), and the reported time is the median over iterations (nccl-tests
// print the mean; on a shared VM one descheduled iteration would move a mean).
// The timed buffer holds zeros (repeated in-place sums of real data would grow
// to infinity; on a CPU the adds cost the same for any finite value). #wrong
// comes from a separate run on integer data checked against the exact sum.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collectives.h"
#include "comm_cuda.h"
#include "flags.h"
#include "ops.h"
#include "perf.h"
#include "timer.h"

// What is measured: a host collective (collectives.h) with algorithm `a`, or,
// when gpu is set, a GPU collective (comm_cuda.h) on device buffers of ctx.
typedef struct {
    Comm *c;
    Group *g;
    Algo a;
    GpuComm *gpu;
    Ctx *ctx;
    void *send;  // the all-to-all's source (host), as large as the timed buffer
} Target;

static void run(const Target *t, int op, void *buf, size_t n, DType dt) {
    if (t->gpu) switch (op) {
        case OP_ALLREDUCE: gpu_allreduce(t->gpu, buf, n, dt); break;
        case OP_REDUCE_SCATTER: gpu_reduce_scatter(t->gpu, buf, n, dt); break;
        case OP_ALL_GATHER: gpu_all_gather(t->gpu, buf, n, dt); break;
        default: gpu_broadcast(t->gpu, buf, n, dt, 0); break;
    }
    else if (op == OP_ALL_TO_ALL) all_to_all(t->c, t->g, t->send, buf, n / t->g->size, dt, t->a);
    else run_collective(t->c, t->g, (CollOp)op, buf, n, dt, 0, t->a);
}

static float val(int rank, size_t i) { return (float)((int)((i * 5 + rank * 3) % 11) - 5); }

// One run on integer data (exact in fp32 and bf16); returns the wrong elements.
// host is where the data are written and checked: buf itself for host buffers,
// a host copy uploaded before and downloaded after the run for GPU buffers.
static long check(const Target *t, int op, void *buf, void *host, size_t n, DType dt) {
    int p = t->g->size, r = t->g->rank;
    for (size_t i = 0; i < n; i++) {
        if (dt == DT_F32) ((float *)host)[i] = val(r, i);
        else ((uint16_t *)host)[i] = f32_to_bf16(val(r, i));
    }
    if (op == OP_ALL_TO_ALL) memcpy(t->send, host, n * dtype_size(dt));  // the source
    if (t->gpu) t->ctx->ops->to_device(t->ctx, buf, host, n * dtype_size(dt));
    run(t, op, buf, n, dt);
    if (t->gpu) t->ctx->ops->to_host(t->ctx, host, buf, n * dtype_size(dt));
    long wrong = 0;
    for (size_t i = 0; i < n; i++) {
        float want, got = dt == DT_F32 ? ((float *)host)[i] : bf16_to_f32(((uint16_t *)host)[i]);
        if (collective_expected((CollOp)op, p, r, 0, n, i, val, &want)) wrong += got != want;
    }
    return wrong;
}

int main(int argc, char **argv) {
    int nodes = 1;
    const char *cluster = NULL;
    int np = 1, factor = 2, iters_flag = 0, warmup = 2;
    double timeout = 120;
    size_t min_bytes = 4, max_bytes = (size_t)1 << 28;
    const char *op_s = "allreduce", *algo_s = "ring", *dtype_s = "fp32", *transport = "shm";
    const char *out_path = NULL, *device_s = "cpu", *stores_s = "auto";
    Flag flags[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch (built-in launcher)"),
        F_NODES(&nodes, &cluster),
        F_CHOICE("--op", &op_s, "allreduce|reduce_scatter|all_gather|broadcast|all_to_all",
                 "the collective"),
        F_CHOICE("--algo", &algo_s, "naive|ring|rd|mpi|nccl|hier|pairwise", "the algorithm (mpi: "
                 "under mpirun; nccl: --device cuda)"),
        F_CHOICE("--device", &device_s, "cpu|cuda", "where the buffers live (cuda: --algo ring is "
                 "our ring over CUDA IPC, --algo nccl is NCCL)"),
        F_CHOICE("--dtype", &dtype_s, "fp32|bf16", "element type"),
        F_BYTES("--min-bytes", &min_bytes, 4, 1e12, "smallest size"),
        F_BYTES("--max-bytes", &max_bytes, 4, 1e12, "largest size"),
        F_INT("--factor", &factor, 2, 1024, "size multiplier between lines"),
        F_INT("--iters", &iters_flag, 0, 1000000, "timed calls per size (0: as many as take ~0.1-0.3 s)"),
        F_INT("--warmup", &warmup, 0, 1000, "untimed calls per size first"),
        F_CHOICE("--transport", &transport, "shm|mpi|tcp", "host transport"),
        F_CHOICE("--shm-stores", &stores_s, "auto|cached|streaming", "how shm copies a message in "
                 "(auto: streaming stores from 4 MiB; see common/comm_shm.c)"),
        F_DOUBLE("--timeout", &timeout, 0.1, 86400, "seconds any wait may take"),
        F_STRING("--out", &out_path, "also write the table to this file (rank 0)"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "bench_collectives [flags]",
                "Times a collective over sizes; nccl-tests columns.");
    if (min_bytes > max_bytes) flags_fail("--min-bytes %zu exceeds --max-bytes %zu", min_bytes, max_bytes);
    int op = 0;
    while (strcmp(op_s, coll_op_names[op]) != 0) op++;
    Algo algo;
    algo_parse(algo_s, &algo);
    DType dt;
    dtype_parse(dtype_s, &dt);
    if (min_bytes % dtype_size(dt))  // the sizes are whole elements: 6 B of fp32 would run 4
        flags_fail("--min-bytes %zu is not a whole number of %s elements (%zu bytes each)", min_bytes,
                   dtype_name(dt), dtype_size(dt));
    Device dev;
    device_parse(device_s, &dev);
    if (dev == DEV_CPU && algo == ALGO_NCCL) flags_fail("--algo nccl needs --device cuda");
    if (dev == DEV_CPU && !collective_has((CollOp)op, algo))
        flags_fail("--op %s has no --algo %s: it has %s", op_s, algo_s, collective_algos((CollOp)op));
    if (dev == DEV_CUDA && op == OP_ALL_TO_ALL)
        flags_fail("--op all_to_all runs on host buffers only (--device cpu)");
    if (dev == DEV_CUDA && algo != ALGO_RING && algo != ALGO_NCCL)
        flags_fail("--device cuda: --algo is ring (our ring over CUDA IPC) or nccl, not %s", algo_s);
    CommConfig cc = {.np = np, .timeout_s = timeout, .nodes = nodes, .cluster = cluster};
    transport_parse(transport, &cc.transport);
    shm_stores_parse(stores_s, &cc.shm_stores);
    if (dev == DEV_CUDA) gpu_check_launch(np);  // before the fork: once, not in every rank
    Comm *c = comm_launch(&cc);
    Group *g = comm_world(c);
    int p = g->size, r = g->rank;
    Ctx ctx;
    Target t = {.c = c, .g = g, .a = algo, .gpu = NULL, .ctx = &ctx};
    double copy_bw = 0;
    const size_t copy_bytes = (size_t)256 << 20;  // far beyond any L2 cache
    if (dev == DEV_CUDA) {  // CUDA only now, in each rank: it does not survive fork
        ctx_init_device(&ctx, DEV_CUDA, gpu_pick_device(c), 1, 0);
        t.gpu = gpu_comm_new(c, g, &ctx, algo == ALGO_NCCL ? GPU_NCCL : GPU_IPC);
        // Rank 0 alone: ranks sharing its GPU would compete for the bandwidth measured.
        if (r == 0) copy_bw = gpu_copy_bandwidth(&ctx, copy_bytes);
        comm_barrier(c, g);
    }
    size_t es = dtype_size(dt);
    double bus = op == OP_ALLREDUCE ? 2.0 * (p - 1) / p
               : op == OP_BROADCAST ? 1.0 : (double)(p - 1) / p;  // all-to-all: (p-1)/p
    FILE *out = NULL;
    if (r == 0 && out_path) {
        out = fopen(out_path, "w");
        CHECK(out, "--out %s: cannot open for writing", out_path);
    }
    char head[1024];
    if (!t.gpu) {
        snprintf(head, sizeof head,
                 "# %s, algorithm %s, %d ranks, transport %s%s%s, %s, median of %s\n"
                 "#%12s %12s %6s %6s %11s %8s %8s %7s\n#%12s %12s %6s %6s %11s %8s %8s %7s\n",
                 op_s, algo_s, p, transport_name(comm_transport(c)),
                 comm_transport(c) == TRANSPORT_SHM ? " with stores " : "",
                 comm_transport(c) == TRANSPORT_SHM ? stores_s : "",
                 op == OP_ALL_TO_ALL ? "out of place" : "in place", iters_flag > 0 ? "--iters calls" : "5-200 calls", "size", "count", "type",
                 "redop", "time", "algbw", "busbw", "#wrong", "(B)", "(elements)", "", "", "(us)",
                 "(GB/s)", "(GB/s)", "");
    } else {
        // The algorithm actually used: NCCL asked for by ranks sharing a GPU is the
        // IPC ring; the IPC broadcast is direct (everyone copies from the root).
        const char *used = gpu_comm_algo(t.gpu) == GPU_NCCL ? "nccl"
                         : op == OP_BROADCAST               ? "direct-ipc"
                                                            : "ring-ipc";
        snprintf(head, sizeof head,
                 "# %s, algorithm %s, %d ranks, transport %s, in place, GPU buffers: %s\n"
                 "# device copy bandwidth %.1f GB/s (rank 0's GPU: cudaMemcpy device to device of "
                 "%zu MiB, bytes read + written); busbw/copy = busbw as a fraction of it\n"
                 "#%12s %12s %6s %6s %11s %8s %8s %7s %10s\n"
                 "#%12s %12s %6s %6s %11s %8s %8s %7s %10s\n",
                 op_s, used, p, transport_name(comm_transport(c)), gpu_comm_describe(t.gpu),
                 copy_bw, copy_bytes >> 20, "size", "count", "type", "redop", "time", "algbw",
                 "busbw", "#wrong", "busbw/", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
                 "(GB/s)", "", "copy");
    }
    if (r == 0) { fputs(head, stdout); if (out) fputs(head, out); }

    // host: where check() writes and reads; the timed buffer itself on a GPU.
    void *host = calloc(max_bytes / es + p, es);
    CHECK(host, "out of memory for a %zu-byte buffer", max_bytes);
    void *buf = t.gpu ? mem_alloc(&ctx, MEM_WORKSPACE, (max_bytes / es + p) * es) : host;
    if (op == OP_ALL_TO_ALL) t.send = xcalloc(max_bytes / es + p, es);
    // Per size: each iteration's time on this rank, then the #wrong count.
    int max_iters = iters_flag > 0 ? iters_flag : 200;
    double *mine = malloc(sizeof(double) * (max_iters + 1)), *other = malloc(sizeof(double) * (max_iters + 1));
    CHECK(mine && other, "out of memory");
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
        size_t n = bytes / es;
        if (op == OP_ALL_TO_ALL) n = n / p * p;  // whole blocks: the elements that move
        // The same iteration count on every rank: ~0.1-0.3 s per size unless --iters.
        int iters = (int)(2e7 / (bytes > 20000 ? bytes : 20000));
        iters = iters < 5 ? 5 : iters > 200 ? 200 : iters;
        if (iters_flag > 0) iters = iters_flag;
        // A GPU collective returns when its result is complete, so the host clock
        // times it whole.
        if (t.gpu) ctx.ops->memset0(&ctx, buf, n * es);
        else memset(buf, 0, n * es);
        for (int i = 0; i < warmup; i++) run(&t, op, buf, n, dt);
        comm_barrier(c, g);
        for (int i = 0; i < iters; i++) {
            double t0 = now_seconds();
            run(&t, op, buf, n, dt);
            mine[i] = now_seconds() - t0;
        }
        mine[iters] = (double)check(&t, op, buf, host, n, dt);
        // Per iteration the slowest rank's time, and the total #wrong, gathered
        // point to point on rank 0.
        if (r == 0) {
            for (int q = 1; q < p; q++) {
                comm_recv(c, g, q, other, sizeof(double) * (iters + 1));
                for (int i = 0; i < iters; i++) mine[i] = other[i] > mine[i] ? other[i] : mine[i];
                mine[iters] += other[iters];
            }
            double wrong = mine[iters], worst = median(mine, iters);
            double algbw = (double)(n * es) / worst * 1e-9;  // the bytes moved: n whole elements
            char line[256];
            int len = snprintf(line, sizeof line, " %12zu %12zu %6s %6s %11.2f %8.3f %8.3f %7.0f",
                               n * es, n, dtype_name(dt), op == OP_ALL_TO_ALL ? "none" : "sum",
                               worst * 1e6, algbw, algbw * bus,
                               wrong);
            if (t.gpu) snprintf(line + len, sizeof line - len, " %10.3f\n", algbw * bus / copy_bw);
            else snprintf(line + len, sizeof line - len, "\n");
            fputs(line, stdout);
            fflush(stdout);
            if (out) fputs(line, out);
        } else {
            comm_send(c, g, 0, mine, sizeof(double) * (iters + 1));
        }
    }
    free(mine);
    free(other);
    if (out) fclose(out);
    if (t.gpu) {
        mem_free(&ctx, MEM_WORKSPACE, buf, (max_bytes / es + p) * es);
        gpu_comm_free(t.gpu);  // collective: every rank gets here
        ctx_destroy(&ctx);
    }
    free(host);
    free(t.send);
    comm_finalize(c);
    return 0;
}
