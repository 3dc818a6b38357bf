// bench_collectives.c — time one collective over a range of sizes, printed in
// the columns of NVIDIA's nccl-tests so the numbers read like theirs:
//
//   size (B)  count  type  redop  time (us)  algbw (GB/s)  busbw (GB/s)  #wrong
//
//   algbw = size / time;  busbw = algbw * factor, the factor making the figure
//   comparable to a link's bandwidth: all-reduce 2(p-1)/p, reduce-scatter and
//   all-gather (p-1)/p (size = the whole buffer), broadcast 1.
//
//   build/bench_collectives --np 2 --op allreduce --algo ring --max-bytes 256M
//   mpirun -np 2 build/bench_collectives --transport mpi --algo mpi
//
// Time: every rank times `iters` back-to-back calls after warm-up; the reported
// time is the slowest rank's mean (a collective is done when its last rank is).
// The timed buffer holds zeros (repeated in-place sums of real data would grow
// to infinity; on a CPU the adds cost the same for any finite value). #wrong
// comes from a separate run on integer data checked against the exact sum.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collectives.h"
#include "flags.h"
#include "timer.h"

enum { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALL_GATHER, OP_BROADCAST };

static void run(Comm *c, Group *g, int op, void *buf, size_t n, DType dt, Algo a) {
    switch (op) {
        case OP_ALLREDUCE: allreduce(c, g, buf, n, dt, a); break;
        case OP_REDUCE_SCATTER: reduce_scatter(c, g, buf, n, dt, a); break;
        case OP_ALL_GATHER: all_gather(c, g, buf, n, dt, a); break;
        default: broadcast(c, g, buf, n, dt, 0, a); break;
    }
}

static float val(int rank, size_t i) { return (float)((int)((i * 5 + rank * 3) % 11) - 5); }

// One run on integer data (exact in fp32 and bf16); returns the wrong elements.
static long check(Comm *c, Group *g, int op, void *buf, size_t n, DType dt, Algo a) {
    int p = g->size, r = g->rank;
    for (size_t i = 0; i < n; i++) {
        if (dt == DT_F32) ((float *)buf)[i] = val(r, i);
        else ((uint16_t *)buf)[i] = f32_to_bf16(val(r, i));
    }
    run(c, g, op, buf, n, dt, a);
    size_t lo, hi;
    shard_range(n, p, r, &lo, &hi);
    long wrong = 0;
    for (size_t i = 0; i < n; i++) {
        float want = 0, got = dt == DT_F32 ? ((float *)buf)[i] : bf16_to_f32(((uint16_t *)buf)[i]);
        if (op == OP_ALLREDUCE || op == OP_REDUCE_SCATTER) {
            if (op == OP_REDUCE_SCATTER && (i < lo || i >= hi)) continue;
            for (int q = 0; q < p; q++) want += val(q, i);
        } else if (op == OP_BROADCAST) want = val(0, i);
        else {
            int owner = 0;
            for (int q = 0; q < p; q++) {
                size_t l, h;
                shard_range(n, p, q, &l, &h);
                if (i >= l && i < h) owner = q;
            }
            want = val(owner, i);
        }
        wrong += got != want;
    }
    return wrong;
}

int main(int argc, char **argv) {
    int np = 1, factor = 2;
    double timeout = 120;
    size_t min_bytes = 4, max_bytes = (size_t)1 << 28;
    const char *op_s = "allreduce", *algo_s = "ring", *dtype_s = "fp32", *transport = "shm";
    const char *out_path = NULL;
    Flag flags[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch (built-in launcher)"),
        F_CHOICE("--op", &op_s, "allreduce|reduce_scatter|all_gather|broadcast", "the collective"),
        F_CHOICE("--algo", &algo_s, "naive|ring|rd|mpi", "the algorithm (mpi: under mpirun)"),
        F_CHOICE("--dtype", &dtype_s, "fp32|bf16", "element type"),
        F_BYTES("--min-bytes", &min_bytes, 4, 1e12, "smallest size"),
        F_BYTES("--max-bytes", &max_bytes, 4, 1e12, "largest size"),
        F_INT("--factor", &factor, 2, 1024, "size multiplier between lines"),
        F_CHOICE("--transport", &transport, "shm|mpi|tcp", "host transport"),
        F_DOUBLE("--timeout", &timeout, 0.1, 86400, "seconds any wait may take"),
        F_STRING("--out", &out_path, "also write the table to this file (rank 0)"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "bench_collectives [flags]",
                "Times a collective over sizes; nccl-tests columns.");
    if (min_bytes > max_bytes) flags_fail("--min-bytes %zu exceeds --max-bytes %zu", min_bytes, max_bytes);
    int op = strcmp(op_s, "allreduce") == 0 ? OP_ALLREDUCE
           : strcmp(op_s, "reduce_scatter") == 0 ? OP_REDUCE_SCATTER
           : strcmp(op_s, "all_gather") == 0 ? OP_ALL_GATHER : OP_BROADCAST;
    Algo algo;
    algo_parse(algo_s, &algo);
    DType dt;
    dtype_parse(dtype_s, &dt);
    CommConfig cc = {.np = np, .timeout_s = timeout};
    transport_parse(transport, &cc.transport);
    Comm *c = comm_launch(&cc);
    Group *g = (Group *)comm_world(c);
    int p = g->size, r = g->rank;
    size_t es = dtype_size(dt);
    double bus = op == OP_ALLREDUCE ? 2.0 * (p - 1) / p
               : op == OP_BROADCAST ? 1.0 : (double)(p - 1) / p;
    FILE *out = NULL;
    if (r == 0 && out_path) {
        out = fopen(out_path, "w");
        CHECK(out, "--out %s: cannot open for writing", out_path);
    }
    char head[512];
    snprintf(head, sizeof head,
             "# %s, algorithm %s, %d ranks, transport %s, in place\n"
             "#%12s %12s %6s %6s %11s %8s %8s %7s\n#%12s %12s %6s %6s %11s %8s %8s %7s\n",
             op_s, algo_s, p, transport_name(comm_transport(c)), "size", "count", "type", "redop",
             "time", "algbw", "busbw", "#wrong", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
             "(GB/s)", "");
    if (r == 0) { fputs(head, stdout); if (out) fputs(head, out); }

    void *buf = calloc(max_bytes / es + p, es);
    CHECK(buf, "out of memory for a %zu-byte buffer", max_bytes);
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
        size_t n = bytes / es;
        // The same iteration count on every rank: ~0.1-0.3 s per size.
        int iters = (int)(2e7 / (bytes > 20000 ? bytes : 20000));
        iters = iters < 2 ? 2 : iters > 200 ? 200 : iters;
        memset(buf, 0, n * es);
        for (int i = 0; i < 2; i++) run(c, g, op, buf, n, dt, algo);  // warm-up
        comm_barrier(c, g);
        double t0 = now_seconds();
        for (int i = 0; i < iters; i++) run(c, g, op, buf, n, dt, algo);
        double mine[2] = {(now_seconds() - t0) / iters, 0};
        mine[1] = (double)check(c, g, op, buf, n, dt, algo);
        // Slowest rank's time and total #wrong, gathered point to point on rank 0.
        if (r == 0) {
            double worst = mine[0], wrong = mine[1], other[2];
            for (int q = 1; q < p; q++) {
                comm_recv(c, g, q, other, sizeof other);
                if (other[0] > worst) worst = other[0];
                wrong += other[1];
            }
            double algbw = bytes / worst * 1e-9;
            char line[256];
            snprintf(line, sizeof line, " %12zu %12zu %6s %6s %11.2f %8.3f %8.3f %7.0f\n",
                     n * es, n, dtype_name(dt), "sum", worst * 1e6, algbw, algbw * bus, wrong);
            fputs(line, stdout);
            fflush(stdout);
            if (out) fputs(line, out);
        } else {
            comm_send(c, g, 0, mine, sizeof mine);
        }
    }
    if (out) fclose(out);
    free(buf);
    comm_finalize(c);
    return 0;
}
