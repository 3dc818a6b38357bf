// test_collectives.c — every collective, every algorithm, against a serial sum.
//
//   test_collectives --np 5                   (built-in launcher, shm)
//   mpirun -np 3 test_collectives --transport mpi   (adds the MPI baseline)
//
// Data are small integers (|x| <= 8, at most 64 ranks' worth), so every partial
// sum is exact in fp32 and in bf16 (8 significant bits: integers up to 256) and
// results must equal the serial sum EXACTLY, whatever the order of additions.
// A second check uses random fp32 values: the sum of p values in any order is
// within (p-1) * 2^-24 relative of the exact sum per element, so we allow 1e-6
// on the whole vector (p <= 8). Counts include 0, 1 and primes; shards of
// uneven size therefore occur at every world size.
//
// Every rank checks its own result; rank 0 collects the failure counts over
// point-to-point messages (not the collectives under test) and prints one line
// per (collective, algorithm). Fault flags (--kill-rank, --mismatch) exist for
// tests/stage02.sh, which checks that failures are diagnosed, not hung.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "collectives.h"
#include "flags.h"
#include "rng.h"

static const size_t counts[] = {0, 1, 2, 3, 5, 7, 13, 97, 1000, 4099, 65537};
#define NCOUNTS (sizeof counts / sizeof counts[0])

static float value(int rank, size_t i) { return (float)((int)((i * 7 + rank * 13) % 17) - 8); }

static void fill(void *buf, DType dt, int rank, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = value(rank, i);
        if (dt == DT_F32) ((float *)buf)[i] = v;
        else ((uint16_t *)buf)[i] = f32_to_bf16(v);
    }
}
static float get(const void *buf, DType dt, size_t i) {
    return dt == DT_F32 ? ((const float *)buf)[i] : bf16_to_f32(((const uint16_t *)buf)[i]);
}

// Runs op with algorithm a on integer data; returns the number of wrong elements.
static long check_exact(Comm *c, Group *g, int op, Algo a, size_t n, DType dt) {
    int p = g->size, r = g->rank;
    void *buf = malloc(n * dtype_size(dt) + 4);
    fill(buf, dt, r, n);
    int root = p > 1 ? 1 : 0;  // not always rank 0
    run_collective(c, g, (CollOp)op, buf, n, dt, root, a);
    long wrong = 0;
    for (size_t i = 0; i < n; i++) {
        float want;
        if (collective_expected((CollOp)op, p, r, root, n, i, value, &want))
            wrong += get(buf, dt, i) != want;
    }
    free(buf);
    return wrong;
}

// All-reduce of random fp32 against the serial sum in double; 1 if out of tolerance.
static long check_random(Comm *c, Group *g, Algo a, size_t n) {
    float *buf = malloc(n * sizeof(float) + 4);
    double *want = calloc(n + 1, sizeof(double));
    for (int q = 0; q < g->size; q++) {
        Rng rng;
        rng_seed(&rng, 1000 + q);
        for (size_t i = 0; i < n; i++) {
            float v = (float)rng_normal(&rng);
            want[i] += v;
            if (q == g->rank) buf[i] = v;
        }
    }
    allreduce(c, g, buf, n, DT_F32, a);
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (buf[i] - want[i]) * (buf[i] - want[i]);
        den += want[i] * want[i];
    }
    free(buf);
    free(want);
    return den > 0 && !(sqrt(num / den) <= 1e-6);
}

static int supported(int op, Algo a) {
    if (a == ALGO_MPI || a == ALGO_NAIVE) return 1;
    if (a == ALGO_RING) return op != OP_BROADCAST;
    if (a == ALGO_RD) return op == OP_ALLREDUCE || op == OP_BROADCAST;
    return 0;
}

int main(int argc, char **argv) {
    int np = 1, mismatch = 0, kill_rank = -1, kill_at = 0, stall_rank = -1;
    double timeout = 30;
    const char *transport = "shm", *stores = "auto";
    Flag flags[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch (built-in launcher)"),
        F_DOUBLE("--timeout", &timeout, 0.1, 3600, "seconds any wait may take"),
        F_CHOICE("--transport", &transport, "shm|mpi|tcp", "host transport"),
        F_CHOICE("--shm-stores", &stores, "auto|cached|streaming", "how shm copies messages in "
                 "(auto streams only from 4 MiB, beyond the counts here: streaming tests that path)"),
        F_BOOL("--mismatch", &mismatch, "rank 1 calls all-reduce with one element more (must be reported)"),
        F_INT("--kill-rank", &kill_rank, 0, COMM_MAX_RANKS - 1, "this rank kills itself ..."),
        F_INT("--kill-at", &kill_at, 1, 1 << 30, "... at this world collective (sequence number)"),
        F_INT("--stall-rank", &stall_rank, 0, COMM_MAX_RANKS - 1, "this rank never joins (others must time out)"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "test_collectives [flags]",
                "Checks every collective and algorithm against a serial sum.");
    CommConfig cc = {.np = np, .timeout_s = timeout};
    transport_parse(transport, &cc.transport);
    shm_stores_parse(stores, &cc.shm_stores);
    Comm *c = comm_launch(&cc);
    Group *world = (Group *)comm_world(c);
    int p = comm_size(c), r = comm_rank(c);

    if (r == stall_rank) {  // a hung rank: alive, silent
        for (;;) pause();
    }
    if (mismatch || kill_rank >= 0 || stall_rank >= 0) {
        // Fault drills: all-reduce repeatedly; the injected fault must be diagnosed.
        // (The naive algorithm: the drill tests the comm layer, not the exercise.)
        if (kill_rank >= 0) comm_inject_kill(c, kill_rank, kill_at);
        float buf[1024] = {0};
        for (int i = 0; i < 20; i++)
            allreduce(c, world, buf, (mismatch && r == 1) ? 1001 : 1000, DT_F32, ALGO_NAIVE);
        comm_finalize(c);
        return 0;
    }

    int with_mpi = comm_transport(c) == TRANSPORT_MPI;
    for (int op = 0; op < OP_COUNT; op++)
        for (int a = 0; a < ALGO_COUNT; a++) {
            if (a == ALGO_NCCL || (a == ALGO_MPI && !with_mpi) || !supported(op, (Algo)a)) continue;
            long wrong = 0;
            for (size_t k = 0; k < NCOUNTS; k++) {
                wrong += check_exact(c, world, op, (Algo)a, counts[k], DT_F32);
                wrong += check_exact(c, world, op, (Algo)a, counts[k], DT_BF16);
            }
            long rand_bad = op == OP_ALLREDUCE ? check_random(c, world, (Algo)a, 4099) : 0;
            long mine[2] = {wrong, rand_bad}, total[2] = {wrong, rand_bad};
            // Verdicts travel by point-to-point, not by the collectives under test.
            if (r == 0) {
                for (int q = 1; q < p; q++) {
                    comm_recv(c, world, q, mine, sizeof mine);
                    total[0] += mine[0];
                    total[1] += mine[1];
                }
                char name[96];
                snprintf(name, sizeof name, "coll.%s.%s.np%d%s%s", coll_op_names[op],
                         algo_name((Algo)a), p, cc.shm_stores != SHM_STORES_AUTO ? "." : "",
                         cc.shm_stores != SHM_STORES_AUTO ? stores : "");
                int ok = total[0] == 0 && total[1] == 0;
                printf("%s %s  %zu counts x fp32/bf16 exact: %ld wrong elements%s\n",
                       ok ? "PASS" : "FAIL", name, NCOUNTS, total[0],
                       op == OP_ALLREDUCE ? (total[1] ? "; random fp32 beyond 1e-6"
                                                      : "; random fp32 within 1e-6") : "");
                fflush(stdout);
            } else {
                comm_send(c, world, 0, mine, sizeof mine);
            }
        }
    comm_finalize(c);
    return 0;
}
