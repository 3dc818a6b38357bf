// test_collectives.c — every collective, every algorithm, against a serial sum.
//
//   test_collectives --np 5                          every collective (built-in launcher, shm)
//   test_collectives --np 3 --op reduce_scatter      one collective (what the grader runs)
//   test_collectives --np 3 --op allreduce --large   one message larger than the channel
//   test_collectives --np 4 --op all_to_all          the all-to-all, equal and uneven blocks
//   test_collectives --np 5 --strided                on two subgroups of the world
//   mpirun -np 3 test_collectives --transport mpi    over MPI (adds the MPI baseline)
//
// Data are small integers (|x| <= 8, at most 64 ranks' worth), so every partial
// sum is exact in fp32 and in bf16 (8 significant bits: integers up to 256) and
// results must equal the serial sum EXACTLY, whatever the order of additions.
// A second check uses random fp32 values: the sum of p values in any order is
// within (p-1) * 2^-24 relative of the exact sum per element, so we allow 1e-6
// on the whole vector (p <= 8). Counts include 0, 1 and primes; shards of
// uneven size therefore occur at every world size.
//
// --large sends one fp32 message whose every shard is larger than the transport's
// eager limit (comm_channel_bytes). Below that size a send completes into the channel
// without its receiver, so a ring that waits for its send before posting its
// receive still works; above it, two such neighbours wait for each other forever.
// The comm layer's timeout then ends the run with a diagnostic (keep --timeout short).
//
// --strided runs every collective on two subgroups instead of the world, as later
// stages do (a tensor-parallel group, a data-parallel one): tests/strided.h.
//
// Every rank checks its own result; rank 0 collects the verdicts over
// point-to-point messages (not the collectives under test) and prints one line
// per (collective, algorithm), naming the first wrong element: rank, message size,
// element, shard, what it holds, what it should hold. Fault flags (--kill-rank,
// --mismatch, --stall-rank) exist for tests/stage02.sh, which checks that failures
// are diagnosed, not hung.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "collectives.h"
#include "flags.h"
#include "strided.h"
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

// One rank's verdict on one (collective, algorithm): travels to rank 0 as bytes
// (every rank runs the same binary).
typedef struct {
    int64_t wrong;      // wrong elements over every count and dtype
    int64_t rand_bad;   // 1 if the random fp32 all-reduce was beyond 1e-6
    int64_t count;      // the first wrong element: the message's count ...
    int64_t index;      // ... the element ...
    int32_t dt;         // ... the dtype ...
    float got, want;    // ... what it held and what it should hold
    int32_t grank, gsize;  // this rank's place in the group it ran in
    // The ring's traffic (ALGO_RING only): the bytes this rank sent, and its share of
    // what the group must send in all, (p-1)·n elements per reduce-scatter or
    // all-gather and twice that per all-reduce, whatever shard each rank sends when.
    // The all-to-all's (hand-written ones): each rank's p-1 outgoing blocks, exactly.
    double sent, want_share;
    // The hierarchical all-reduce's (ALGO_HIER, on the world only): the bytes this rank
    // sent to ranks of its own node and to other nodes (comm_link_bytes: where they
    // went, whatever the phase), and its share of what they must be: with m nodes of
    // k ranks, 2m((k-1) n + n - s0) elements inside (a node's ring reduce-scatter and
    // all-gather, (k-1) n each, and its leader's gather and scatter of every shard but
    // its own s0 elements, s0 summed over the chunks of a pipelined one: about
    // 2m(k-1)(k+1)/k n) and 2(m-1) n across (the leaders' ring), summed over the ranks.
    double inside, inside_want, across, across_want;
} Verdict;

// The counter a collective's bytes land in: the dispatcher's (collectives.c opens
// one collective per call, which the ring's messages belong to).
static CollKind coll_kind(CollOp op) {
    return op == OP_ALLREDUCE ? COLL_ALLREDUCE : op == OP_REDUCE_SCATTER ? COLL_REDUCE_SCATTER
           : op == OP_ALL_GATHER ? COLL_ALLGATHER : op == OP_ALL_TO_ALL ? COLL_ALLTOALL
           : COLL_BROADCAST;
}

// Counts a wrong element into v, remembering the first.
static void mark(Verdict *v, size_t n, size_t i, DType dt, float got, float want) {
    if (v->wrong++ == 0) {
        v->count = (int64_t)n;
        v->index = (int64_t)i;
        v->dt = dt;
        v->got = got;
        v->want = want;
    }
}

// Runs op with algorithm a on integer data; counts the wrong elements into v and
// remembers the first.
static void check_exact(Comm *c, Group *g, CollOp op, Algo a, size_t n, DType dt, Verdict *v) {
    int p = g->size, r = g->rank;
    v->grank = r, v->gsize = p;
    void *buf = xmalloc(n * dtype_size(dt) + 4);
    fill(buf, dt, r, n);
    int root = p > 1 ? 1 : 0;  // not always rank 0
    uint64_t before = comm_counters(c)[coll_kind(op)].bytes_sent;
    LinkBytes link0 = comm_link_bytes(c);
    run_collective(c, g, op, buf, n, dt, root, a);
    if (a == ALGO_HIER && g == comm_world(c)) {
        double e = (double)n * dtype_size(dt), nk = comm_node_size(c), m = p / nk;
        LinkBytes sent = link_bytes_since(comm_link_bytes(c), link0);
        v->inside += (double)sent.inside;
        v->across += (double)sent.across;
        v->across_want += 2 * (m - 1) * e / p;
        // The leader's own shard of each chunk: what its gather and scatter do not move.
        int chunks = hier_chunks(n, dt, (int)m);
        double mine = 0;
        for (int i = 0; i < chunks; i++) {
            size_t lo, hi, s_lo, s_hi;
            shard_range(n, chunks, i, &lo, &hi);
            shard_range(hi - lo, (int)nk, 0, &s_lo, &s_hi);
            mine += (double)(s_hi - s_lo) * dtype_size(dt);
        }
        v->inside_want += m * (2 * (nk - 1) * e + 2 * (e - mine)) / p;
    }
    if (a == ALGO_RING && op != OP_BROADCAST) {
        v->sent += (double)(comm_counters(c)[coll_kind(op)].bytes_sent - before);
        v->want_share += (op == OP_ALLREDUCE ? 2.0 : 1.0) * (p - 1) * n * dtype_size(dt) / p;
    }
    if (op == OP_ALL_TO_ALL && a != ALGO_MPI) {
        v->sent += (double)(comm_counters(c)[COLL_ALLTOALL].bytes_sent - before);
        v->want_share += (double)(p - 1) * (n / p) * dtype_size(dt);
    }
    for (size_t i = 0; i < n; i++) {
        float want;
        if (!collective_expected(op, p, r, root, n, i, value, &want)) continue;
        float got = get(buf, dt, i);
        if (got != want) mark(v, n, i, dt, got, want);
    }
    free(buf);
}

// Member `from`'s block for member `to` in all_to_all_v's check: sizes that differ per
// pair, empty ones included, about n elements.
static size_t vcount(int from, int to, size_t n) {
    return (size_t)(from + 2 * to) % 4 == n % 4 ? 0 : n * (size_t)((from + to) % 3 + 1) / 3 + (size_t)to;
}

// all_to_all_v with those blocks: each element must be the one its sender held at that
// place (value() of the sender's offset), every received element written (recv starts
// as NaNs), and the bytes sent exactly this rank's blocks for the others.
static void check_all_to_all_v(Comm *c, Group *g, Algo a, size_t n, DType dt, Verdict *v) {
    int p = g->size, r = g->rank;
    size_t es = dtype_size(dt), sc[COMM_MAX_RANKS], rc[COMM_MAX_RANKS], stot = 0, rtot = 0;
    for (int j = 0; j < p; j++) {
        sc[j] = vcount(r, j, n), rc[j] = vcount(j, r, n);
        stot += sc[j], rtot += rc[j];
    }
    void *send = xmalloc(stot * es + 4), *recv = xmalloc(rtot * es + 4);
    fill(send, dt, r, stot);
    memset(recv, 0xff, rtot * es);  // NaN in fp32 and bf16: equal to nothing
    uint64_t before = comm_counters(c)[COLL_ALLTOALL].bytes_sent;
    all_to_all_v(c, g, send, sc, recv, rc, dt, a);
    if (a != ALGO_MPI) {
        v->sent += (double)(comm_counters(c)[COLL_ALLTOALL].bytes_sent - before);
        v->want_share += (double)(stot - sc[r]) * es;
    }
    size_t at = 0;
    for (int i = 0; i < p; i++) {
        size_t off = 0;  // where member i's block for this rank starts in its send buffer
        for (int j = 0; j < r; j++) off += vcount(i, j, n);
        for (size_t e = 0; e < rc[i]; e++, at++) {
            float want = value(i, off + e), got = get(recv, dt, at);
            if (got != want) mark(v, rtot, at, dt, got, want);
        }
    }
    free(send);
    free(recv);
}

// All-reduce of random fp32 against the serial sum in double; 1 if out of tolerance.
static int64_t check_random(Comm *c, Group *g, Algo a, size_t n) {
    float *buf = xmalloc(n * sizeof(float) + 4);
    double *want = xcalloc(n + 1, sizeof(double));
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

// The large message: every shard at least a quarter larger than the channel
// (fp32), and a count no world size divides evenly.
static size_t large_count(const Comm *c, int p) {
    size_t chan = comm_channel_bytes(c);
    size_t shard = chan ? chan / 4 + chan / 16 : (size_t)1 << 20;  // 4 MiB when unknown
    return shard * (size_t)p + 7;
}

// Rank 0's line for one (collective, algorithm): the verdict, and where to look.
static void report(const char *name, CollOp op, int with_random, int p, const Verdict *all,
                   const char *what) {
    // (p: the world's ranks, whose verdicts these are; the shards are those of the
    // group the first wrong rank ran in.)
    int64_t wrong = 0, rand_bad = 0;
    int bad_ranks = 0, first = -1;
    for (int q = 0; q < p; q++) {
        wrong += all[q].wrong;
        rand_bad += all[q].rand_bad;
        if (all[q].wrong) {
            bad_ranks++;
            if (first < 0) first = q;
        }
    }
    double sent = 0, want = 0;  // the ring's bytes, every rank's together
    double in = 0, in_want = 0, across = 0, across_want = 0;  // the hierarchy's
    for (int q = 0; q < p; q++) {
        sent += all[q].sent, want += all[q].want_share;
        in += all[q].inside, in_want += all[q].inside_want;
        across += all[q].across, across_want += all[q].across_want;
    }
    int bytes_ok = fabs(sent - want) < 0.5;
    int hier_ok = fabs(in - in_want) < 0.5 && fabs(across - across_want) < 0.5;
    int ok = wrong == 0 && rand_bad == 0 && bytes_ok && hier_ok;
    printf("%s %s  %s: %lld wrong elements", ok ? "PASS" : "FAIL", name, what, (long long)wrong);
    if ((want > 0 || sent > 0) && op == OP_ALL_TO_ALL)
        printf("; the ranks sent %.0f bytes in all, %s each rank's p-1 blocks for the others%s",
               sent, bytes_ok ? "=" : "!=",
               bytes_ok ? "" : sent > want ? ": more (a rank's own block sent to itself? a block "
                                             "sent twice?)"
                                           : ": less (a block never sent?)");
    else if (want > 0 || sent > 0)
        printf("; the ranks sent %.0f bytes in all, %s a ring's (p-1)/p of each buffer per "
               "rank and phase%s", sent,
               bytes_ok ? "=" : "!=",
               bytes_ok ? "" : sent > want ? ": more than a ring's steps send (a step too many? "
                                             "or the all-reduce not made of your two phases?)"
                                           : ": less than a ring sends (the all-reduce's bytes "
                                             "counted elsewhere: call ring_reduce_scatter and "
                                             "ring_all_gather directly, not the dispatchers)");
    if (in_want > 0 || across_want > 0)
        printf("; inside the nodes %.0f bytes %s 2m((k-1)n + n - s0), across them %.0f %s 2(m-1)n "
               "(m nodes of k ranks)", in, fabs(in - in_want) < 0.5 ? "=" : "!=", across,
               fabs(across - across_want) < 0.5 ? "=" : "!=");
    if (first >= 0) printf(" on %d of %d ranks", bad_ranks, p);
    if (with_random) printf("; random fp32 %s 1e-6", rand_bad ? "beyond" : "within");
    if (first >= 0) {
        const Verdict *v = &all[first];
        size_t lo = 0, hi = 0, n = (size_t)v->count, i = (size_t)v->index;
        int shard = 0;
        for (int s = 0; s < v->gsize; s++) {
            shard_range(n, v->gsize, s, &lo, &hi);
            if (i >= lo && i < hi) { shard = s; break; }
        }
        float input = value(v->grank, i);
        printf(". First: rank %d", first);
        if (v->gsize != p) printf(" (member %d of its group of %d)", v->grank, v->gsize);
        if (op == OP_ALL_TO_ALL)  // blocks, not shards: the buffer's element and values
            printf(", %zu elements received (%s), element %zu: got %g, want %g", n,
                   dtype_name((DType)v->dt), i, v->got, v->want);
        else
            printf(", count %zu (%s), element %zu in shard %d [%zu, %zu): got %g, want %g", n,
                   dtype_name((DType)v->dt), i, shard, lo, hi, v->got, v->want);
        if (v->got == input) printf(" (= this rank's own input there: nothing arrived or was added)");
        else if (v->want != 0 && v->got == 2 * v->want) printf(" (twice the answer: added twice?)");
    }
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    int nodes = 1;
    const char *cluster = NULL;
    int np = 1, mismatch = 0, kill_rank = -1, kill_at = 0, stall_rank = -1, large = 0, strided = 0;
    int node_ranks = 0;
    double timeout = 30;
    const char *transport = "shm", *stores = "auto", *op_s = "all";
    Flag flags[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch (built-in launcher)"),
        F_NODES(&nodes, &cluster),
        F_DOUBLE("--timeout", &timeout, 0.1, 3600, "seconds any wait may take"),
        F_CHOICE("--transport", &transport, "shm|mpi|tcp", "host transport"),
        F_CHOICE("--shm-stores", &stores, "auto|cached|streaming", "how shm copies messages in "
                 "(auto streams only from 4 MiB, beyond the counts here: streaming tests that path)"),
        F_CHOICE("--op", &op_s, "all|allreduce|reduce_scatter|all_gather|broadcast|all_to_all",
                 "which collective to check"),
        F_BOOL("--large", &large, "one fp32 message whose shards exceed the transport's channel "
               "(catches a send waited for before its receive is posted)"),
        F_BOOL("--strided", &strided, "every collective on two subgroups, not the world: the "
               "even world ranks and the odd ones, each in descending order (needs --np >= 4)"),
        F_INT_SENTINEL("--node-ranks", &node_ranks, 1, COMM_MAX_RANKS, "0 = one node",
                       "ranks per node for the hierarchical all-reduce (COURSE_NODE_RANKS); only "
                       "'hier' then runs"),
        F_BOOL("--mismatch", &mismatch, "rank 1 calls all-reduce with one element more (must be reported)"),
        F_INT_SENTINEL("--kill-rank", &kill_rank, 0, COMM_MAX_RANKS - 1, "-1 = none",
                       "this rank kills itself ..."),
        F_INT_SENTINEL("--kill-at", &kill_at, 1, 1 << 30, "0 = unset",
                       "... at this world collective (sequence number)"),
        F_INT_SENTINEL("--stall-rank", &stall_rank, 0, COMM_MAX_RANKS - 1, "-1 = none",
                       "this rank never joins (others must time out)"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "test_collectives [flags]",
                "Checks every collective and algorithm against a serial sum.");
    if (node_ranks) {  // before the launch: the forked ranks inherit it
        char k[16];
        snprintf(k, sizeof k, "%d", node_ranks);
        setenv("COURSE_NODE_RANKS", k, 1);
    }
    CommConfig cc = {.np = np, .timeout_s = timeout, .nodes = nodes, .cluster = cluster};
    transport_parse(transport, &cc.transport);
    shm_stores_parse(stores, &cc.shm_stores);
    Comm *c = comm_launch(&cc);
    Group *world = comm_world(c);
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

    // The check name says what differs from the default run: the transport, the
    // shm store mode, the large message.
    char suffix[48] = "";
    if (comm_transport(c) != TRANSPORT_SHM)
        snprintf(suffix, sizeof suffix, ".%s", transport_name(comm_transport(c)));
    else if (cc.shm_stores != SHM_STORES_AUTO)
        snprintf(suffix, sizeof suffix, ".%s", stores);
    if (node_ranks)
        snprintf(suffix + strlen(suffix), sizeof suffix - strlen(suffix), ".nodes%d", node_ranks);
    else if (comm_node_size(c) < p)
        snprintf(suffix + strlen(suffix), sizeof suffix - strlen(suffix), ".%dnodes",
                 p / comm_node_size(c));
    // The group the collectives run in: the world, or this rank's strided subgroup.
    Group sub, *g = world;
    if (strided) {
        g = strided_group(c, &sub);
        snprintf(suffix + strlen(suffix), sizeof suffix - strlen(suffix), ".strided");
    }
    int with_mpi = comm_transport(c) == TRANSPORT_MPI;
    size_t big = large_count(c, g->size);
    // Announce the checks first (tests/run.sh): one that never reports, because a
    // rank crashed or hung, is then traced to this run.
    for (int pass = 0; pass < 2; pass++)
    for (int op = 0; op < OP_COUNT; op++) {
        if (strcmp(op_s, "all") != 0 && strcmp(op_s, coll_op_names[op]) != 0) continue;
        for (int a = 0; a < ALGO_COUNT; a++) {
            if (a == ALGO_NCCL || (a == ALGO_MPI && !with_mpi) || !collective_has((CollOp)op, (Algo)a) ||
                (a == ALGO_HIER && comm_node_size(c) == p) ||  // hier: given nodes
                (node_ranks && a != ALGO_HIER))                // --node-ranks: hier alone
                continue;
            char name[96];
            snprintf(name, sizeof name, "coll.%s.%s.%snp%d%s", coll_op_names[op],
                     algo_name((Algo)a), large ? "large." : "", p, suffix);
            if (pass == 0) {
                if (r == 0) printf("PLAN %s\n", name);
                continue;
            }
            fflush(stdout);
            Verdict mine = {0};
            char what[96];
            if (large) {
                check_exact(c, g, (CollOp)op, (Algo)a, big, DT_F32, &mine);
                snprintf(what, sizeof what, "one message of %zu fp32 (shards > the %zu-byte eager limit)",
                         big, comm_channel_bytes(c));
            } else {
                for (size_t k = 0; k < NCOUNTS; k++) {
                    check_exact(c, g, (CollOp)op, (Algo)a, counts[k], DT_F32, &mine);
                    check_exact(c, g, (CollOp)op, (Algo)a, counts[k], DT_BF16, &mine);
                    if (op != OP_ALL_TO_ALL) continue;
                    check_all_to_all_v(c, g, (Algo)a, counts[k], DT_F32, &mine);
                    check_all_to_all_v(c, g, (Algo)a, counts[k], DT_BF16, &mine);
                }
                // Across two nodes hier is pipelined over chunks of HIER_CHUNK_BYTES: three
                // and a ragged end, in fp32 and in bf16.
                size_t piped = 3 * HIER_CHUNK_BYTES / sizeof(float) + 5;
                int chunked = a == ALGO_HIER && g == world && hier_chunks(piped, DT_F32, p / comm_node_size(c)) > 1;
                if (chunked) {
                    check_exact(c, g, (CollOp)op, (Algo)a, piped, DT_F32, &mine);
                    check_exact(c, g, (CollOp)op, (Algo)a, 2 * piped, DT_BF16, &mine);
                }
                if (op == OP_ALLREDUCE) mine.rand_bad = check_random(c, g, (Algo)a, 4099);
                snprintf(what, sizeof what, "%zu counts x fp32/bf16%s, exact", NCOUNTS + chunked,
                         op == OP_ALL_TO_ALL ? ", equal and uneven blocks"
                         : chunked ? " (one count in 3 pipelined chunks)" : "");
            }
            // Verdicts travel by point-to-point, not by the collectives under test.
            if (r == 0) {
                Verdict all[COMM_MAX_RANKS];
                all[0] = mine;
                for (int q = 1; q < p; q++) comm_recv(c, world, q, &all[q], sizeof all[q]);
                report(name, (CollOp)op, op == OP_ALLREDUCE && !large, p, all, what);
            } else {
                comm_send(c, world, 0, &mine, sizeof mine);
            }
        }
    }
    comm_finalize(c);
    return 0;
}
