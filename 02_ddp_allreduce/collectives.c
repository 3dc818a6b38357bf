// collectives.c — the naive and recursive-doubling collectives, and the
// dispatcher that picks an algorithm. The ring is in ring.c.
//
// Costs in the alpha-beta model (alpha per message, beta per byte, n bytes, p ranks):
//   naive all-reduce       2(p-1) alpha + 2(p-1) n beta   (the root is the bottleneck)
//   ring all-reduce        2(p-1) alpha + 2 (p-1)/p n beta (bandwidth-optimal)
//   recursive doubling     lg p (alpha + n beta)           (latency-optimal)
//   all-to-all (n bytes per rank, p blocks): (p-1) alpha + (p-1)/p n beta, naive or
//                          pairwise; they differ in who waits for whom (below)
//   hierarchical (k a node, m nodes): a ring reduce-scatter and all-gather inside the
//                          node plus a gather to its leader and a scatter back,
//                          2(k-1)/k n + 2(k-1)/k n bytes on the fast links; across, the
//                          leaders' ring: 2(m-1)/m n on each node's slow link, against
//                          the flat ring's 2(p-1)/p n; over two nodes pipelined in C
//                          chunks, about max(inside, across) instead of their sum
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collectives.h"

static const char *algo_names[ALGO_COUNT] = {"naive", "ring", "rd",  "mpi",
                                             "nccl",  "hier", "pairwise"};
const char *algo_name(Algo a) { return a < ALGO_COUNT ? algo_names[a] : "?"; }
int algo_parse(const char *s, Algo *out) {
    for (int a = 0; a < ALGO_COUNT; a++)
        if (strcmp(s, algo_names[a]) == 0) { *out = (Algo)a; return 0; }
    return -1;
}

Algo reduction_algo(Algo a) { return a == ALGO_NAIVE || a == ALGO_MPI ? a : ALGO_RING; }

void shard_range(size_t count, int n, int i, size_t *lo, size_t *hi) {
    // count*i/n without overflow for any count below 2^63 / 64.
    *lo = count / n * i + count % n * i / n;
    *hi = count / n * (i + 1) + count % n * (i + 1) / n;
}

static unsigned char *at(void *buf, size_t i, DType dt) {
    return (unsigned char *)buf + i * dtype_size(dt);
}

// ---------------------------------------------------------------- naive

// Rank 0 adds everyone's buffer into its own, in rank order (a fixed order, so
// the float result is reproducible), then sends the sum back to everyone.
static void naive_allreduce(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    size_t bytes = count * dtype_size(dt);
    if (g->rank == 0) {
        for (int r = 1; r < g->size; r++) {
            CommRequest *q = comm_irecv(c, g, r, buf, bytes, RECV_SUM, dt);
            comm_wait(c, &q, 1);
        }
        for (int r = 1; r < g->size; r++) comm_send(c, g, r, buf, bytes);
    } else {
        comm_send(c, g, 0, buf, bytes);
        comm_recv(c, g, 0, buf, bytes);
    }
}

static void naive_broadcast(Comm *c, Group *g, void *buf, size_t count, DType dt, int root) {
    size_t bytes = count * dtype_size(dt);
    if (g->rank == root) {
        for (int r = 0; r < g->size; r++)
            if (r != root) comm_send(c, g, r, buf, bytes);
    } else {
        comm_recv(c, g, root, buf, bytes);
    }
}

// Reduce-scatter as all-reduce then keep your shard; all-gather as everyone
// sending its shard to the root, then a broadcast. Simple, and p times the traffic.
static void naive_all_gather(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    size_t lo, hi;
    if (g->rank == 0) {
        for (int r = 1; r < g->size; r++) {
            shard_range(count, g->size, r, &lo, &hi);
            comm_recv(c, g, r, at(buf, lo, dt), (hi - lo) * dtype_size(dt));
        }
    } else {
        shard_range(count, g->size, g->rank, &lo, &hi);
        comm_send(c, g, 0, at(buf, lo, dt), (hi - lo) * dtype_size(dt));
    }
    naive_broadcast(c, g, buf, count, dt, 0);
}

// ---------------------------------------------------------------- recursive doubling

// All-reduce in lg p rounds: in round k, exchange the whole buffer with the rank
// whose index differs in bit k, and add. a + b == b + a exactly in IEEE floats,
// so both partners hold identical sums after every round. A group that is not a
// power of two first folds its extra ranks r >= p' into r - p', and gives them
// the result at the end.
static void rd_allreduce(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    size_t bytes = count * dtype_size(dt);
    int p = g->size, r = g->rank, p2 = 1;
    while (p2 * 2 <= p) p2 *= 2;
    if (r >= p2) {  // an extra rank: hand over, wait for the answer
        comm_send(c, g, r - p2, buf, bytes);
        comm_recv(c, g, r - p2, buf, bytes);
        return;
    }
    if (r + p2 < p) {
        CommRequest *q = comm_irecv(c, g, r + p2, buf, bytes, RECV_SUM, dt);
        comm_wait(c, &q, 1);
    }
    void *tmp = malloc(bytes ? bytes : 1);
    CHECK(tmp, "out of memory for a %zu-byte exchange buffer", bytes);
    for (int k = 1; k < p2; k <<= 1) {
        int partner = r ^ k;
        CommRequest *q[2] = {comm_isend(c, g, partner, buf, bytes),
                             comm_irecv(c, g, partner, tmp, bytes, RECV_COPY, dt)};
        comm_wait(c, q, 2);
        // Add in a fixed operand order (lower rank's partial first), so the two
        // partners compute the same rounding for bf16 too.
        if (partner < r) {
            reduce_sum_into(tmp, buf, count, dt);
            memcpy(buf, tmp, bytes);
        } else {
            reduce_sum_into(buf, tmp, count, dt);
        }
    }
    free(tmp);
    if (r + p2 < p) comm_send(c, g, r + p2, buf, bytes);
}

// Binomial-tree broadcast: in round k, every rank that has the data sends it to
// the rank 2^k further on (relative to the root): lg p rounds.
static void tree_broadcast(Comm *c, Group *g, void *buf, size_t count, DType dt, int root) {
    size_t bytes = count * dtype_size(dt);
    int p = g->size, rel = (g->rank - root + p) % p;
    int k = 1;
    while (k < p) k <<= 1;
    for (k >>= 1; k >= 1; k >>= 1) {
        if (rel % (2 * k) == 0 && rel + k < p) comm_send(c, g, (rel + k + root) % p, buf, bytes);
        else if (rel % (2 * k) == k) comm_recv(c, g, (rel - k + root) % p, buf, bytes);
    }
}

// ---------------------------------------------------------------- hierarchical

// The members of g on this rank's node (in g's order), and the members with this
// rank's place among them on every node (in node order). 0 when g's members are not
// spread evenly over the nodes it touches: then there is no hierarchy to follow.
static int hier_groups(Comm *c, Group *g, Group *node, Group *across) {
    int k = comm_node_size(c), me = comm_rank(c), mine = me / k, per[COMM_MAX_RANKS] = {0};
    int local[COMM_MAX_RANKS], n = 0, at_node = -1, others[COMM_MAX_RANKS], m = 0;
    for (int i = 0; i < g->size; i++) {
        int w = g->ranks[i], nd = w / k;
        if (nd == mine) {
            if (w == me) at_node = n;
            local[n++] = w;
        }
        per[nd]++;
    }
    for (int nd = 0; nd < comm_size(c) / k; nd++) {
        if (!per[nd]) continue;
        if (per[nd] != n) return 0;
        int seen = 0;  // member at_node of node nd, in g's order
        for (int i = 0; i < g->size; i++)
            if (g->ranks[i] / k == nd && seen++ == at_node) others[m++] = g->ranks[i];
    }
    comm_group_new(c, node, "hier.node", local, n);
    comm_group_new(c, across, "hier.across", others, m);
    return 1;
}

// The node's shards to its leader (member 0) or, back, from it: the leader posts all
// k-1 messages at once.
static void leader_shards(Comm *c, Group *node, void *buf, size_t count, DType dt, int gather) {
    int k = node->size, n = 0;
    size_t es = dtype_size(dt), lo, hi;
    CommRequest *q[COMM_MAX_RANKS];
    for (int s = node->rank ? node->rank : 1; s < (node->rank ? node->rank + 1 : k); s++) {
        shard_range(count, k, s, &lo, &hi);
        int peer = node->rank ? 0 : s, in = gather == !node->rank;  // this rank receives
        q[n++] = in ? comm_irecv(c, node, peer, at(buf, lo, dt), (hi - lo) * es, RECV_COPY, dt)
                    : comm_isend(c, node, peer, at(buf, lo, dt), (hi - lo) * es);
    }
    comm_wait(c, q, n);
}

int hier_chunks(size_t count, DType dt, int nodes) {
    size_t chunks = count * dtype_size(dt) / HIER_CHUNK_BYTES;
    return nodes != 2 || chunks < 1 ? 1 : chunks > HIER_MAX_CHUNKS ? HIER_MAX_CHUNKS : (int)chunks;
}

// Reduce-scatter inside the node, then the node's shards gathered to its leader (member 0).
static void hier_gather(Comm *c, Group *node, void *buf, size_t count, DType dt) {
    comm_coll_begin(c, node, COLL_REDUCE_SCATTER, count, dt);
    if (node->size > 1) ring_reduce_scatter(c, node, buf, count, dt);
    comm_coll_begin(c, node, COLL_REDUCE, count, dt);
    if (node->size > 1) leader_shards(c, node, buf, count, dt, 1);
}

// The leader's shards scattered back, then the all-gather inside the node.
static void hier_scatter(Comm *c, Group *node, void *buf, size_t count, DType dt) {
    comm_coll_begin(c, node, COLL_BROADCAST, count, dt);
    if (node->size > 1) leader_shards(c, node, buf, count, dt, 0);
    comm_coll_begin(c, node, COLL_ALLGATHER, count, dt);
    if (node->size > 1) ring_all_gather(c, node, buf, count, dt);
}

// Two leaders' exchange of one chunk: the whole chunk each way, posted and left moving
// (comm_progress_meanwhile) while the node works on the chunks beside it.
static void exchange_post(Comm *c, Group *across, void *chunk, void *tmp, size_t count, DType dt,
                          CommRequest *q[2]) {
    comm_coll_begin(c, across, COLL_ALLREDUCE, count, dt);
    q[0] = comm_isend(c, across, 1 - across->rank, chunk, count * dtype_size(dt));
    q[1] = comm_irecv(c, across, 1 - across->rank, tmp, count * dtype_size(dt), RECV_COPY, dt);
    comm_progress_meanwhile(c, q, 2);
}

// Waits for it, and adds the partner's chunk: a + b = b + a in IEEE arithmetic (bf16 too:
// added in fp32, rounded once), so both leaders hold the same bits.
static void exchange_finish(Comm *c, void *chunk, void *tmp, size_t count, DType dt,
                            CommRequest *q[2]) {
    comm_wait(c, q, 2);
    reduce_sum_into(chunk, tmp, count, dt);
}

// Reduce-scatter inside the node, the node's shards gathered to its leader, the leaders'
// all-reduce of the whole buffer across the nodes, the shards scattered back, all-gather
// inside: each on its own group (so the headers say which link a message belongs to).
// Under the dispatcher's comm_coll_begin. One flow per node on the slow link: the k
// ranks of a node could each send their shard across at once (NCCL does, a network card
// per GPU), but these nodes have one link each, and k TCP flows through its shallow
// queue drop each other's packets (2 x 4 at 400 Mbit: 0.40-0.48 s a call against 0.36 s
// predicted, unevenly). The gather and the scatter move (k-1)/k n inside, at memory
// speed.
//
// Across two nodes the leaders' all-reduce is one exchange (recursive doubling's one
// round: the ring's bytes, without its half-way wait), and it is pipelined: the buffer
// cut into hier_chunks() chunks, chunk i crosses while the node scatters chunk i-1 and
// gathers chunk i+1, so the slow link is busy while the fast one works (as NCCL's
// channels pipeline their chunks). Time: about max(inside, across) instead of their sum.
// Across more nodes, the leaders' ring, unpipelined.
static void hier_allreduce(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    CHECK(comm_launch_mode(c) != LAUNCH_MPIRUN, "all-reduce 'hier' under mpirun: its groups would be new "
          "MPI communicators at every call; use --algo mpi (MPI's own is hierarchical) or ring");
    Group node, across;
    if (!hier_groups(c, g, &node, &across) || across.size == 1) {  // no hierarchy, or one node:
        ring_allreduce(c, g, buf, count, dt);                      // the ring is all there is
        return;
    }
    if (across.size > 2) {
        hier_gather(c, &node, buf, count, dt);
        if (node.rank == 0) {  // the leaders, one a node: `across` is theirs
            comm_coll_begin(c, &across, COLL_ALLREDUCE, count, dt);
            ring_allreduce(c, &across, buf, count, dt);
        }
        hier_scatter(c, &node, buf, count, dt);
        return;
    }
    int chunks = hier_chunks(count, dt, across.size);
    size_t lo = 0, hi = 0, prev_lo = 0, prev_hi = 0, es = dtype_size(dt);
    void *tmp = NULL;
    if (node.rank == 0) {
        size_t most = count / (size_t)chunks + 1;  // elements in the largest chunk
        tmp = malloc(most * es);
        CHECK(tmp, "out of memory for a %zu-element exchange buffer", most);
    }
    CommRequest *q[2];
    for (int i = 0; i <= chunks; i++) {
        if (i < chunks) {
            shard_range(count, chunks, i, &lo, &hi);
            hier_gather(c, &node, at(buf, lo, dt), hi - lo, dt);
        }
        if (node.rank == 0) {
            if (i > 0) exchange_finish(c, at(buf, prev_lo, dt), tmp, prev_hi - prev_lo, dt, q);
            if (i < chunks) exchange_post(c, &across, at(buf, lo, dt), tmp, hi - lo, dt, q);
        }
        if (i > 0) hier_scatter(c, &node, at(buf, prev_lo, dt), prev_hi - prev_lo, dt);
        prev_lo = lo, prev_hi = hi;
    }
    free(tmp);
}

// ---------------------------------------------------------------- all-to-all

// Every message posted at once, in member order, then one wait for all of them: the
// transport moves whichever can move. Every rank's first message goes to member 0 and
// its last to member p-1: all p-1 senders queue on one receiver at a time (the
// pairwise exchange in alltoall.c gives every step a different receiver to each).
static void naive_all_to_all_v(Comm *c, Group *g, const void *send, const size_t *send_counts,
                               const size_t *send_off, void *recv, const size_t *recv_counts,
                               const size_t *recv_off, DType dt) {
    size_t es = dtype_size(dt);
    int p = g->size, r = g->rank, n = 0;
    CommRequest **q = malloc(sizeof *q * 2 * (size_t)p);
    CHECK(q, "out of memory");
    for (int j = 0; j < p; j++)
        if (j != r) q[n++] = comm_irecv(c, g, j, at(recv, recv_off[j], dt), recv_counts[j] * es,
                                        RECV_COPY, dt);
    for (int j = 0; j < p; j++)
        if (j != r) q[n++] = comm_isend(c, g, j, (unsigned char *)send + send_off[j] * es,
                                        send_counts[j] * es);
    memcpy(at(recv, recv_off[r], dt), (const unsigned char *)send + send_off[r] * es,
           send_counts[r] * es);
    comm_wait(c, q, n);
    free(q);
}

static size_t tile(const size_t *counts, int p, size_t *off) {  // offsets; returns the total
    size_t total = 0;
    for (int j = 0; j < p; j++) off[j] = total, total += counts[j];
    return total;
}

// ---------------------------------------------------------------- dispatch

int collective_has(CollOp op, Algo a) {
    if (a == ALGO_NAIVE || a == ALGO_MPI) return 1;
    if (a == ALGO_PAIRWISE) return op == OP_ALL_TO_ALL;
    if (a == ALGO_RING) return op != OP_BROADCAST && op != OP_ALL_TO_ALL;
    if (a == ALGO_RD) return op == OP_ALLREDUCE || op == OP_BROADCAST;
    if (a == ALGO_HIER) return op == OP_ALLREDUCE;
    return 0;
}

const char *collective_algos(CollOp op) {
    static const char *const names[OP_COUNT] = {"naive, ring, rd, mpi, hier", "naive, ring, mpi",
                                                "naive, ring, mpi", "naive, rd, mpi",
                                                "naive, pairwise, mpi"};
    return op >= 0 && op < OP_COUNT ? names[op] : "?";
}

static _Noreturn void unsupported(const char *what, CollOp op, Algo a) {
    DIE("%s has no '%s' algorithm (it has %s)", what, algo_name(a), collective_algos(op));
}

static void library(int ok, const char *what) {
    CHECK(ok, "%s: the MPI baseline needs the job to be launched by mpirun with --transport mpi "
          "(and a build with mpicc)", what);
}

void allreduce(Comm *c, Group *g, void *buf, size_t count, DType dt, Algo a) {
    comm_coll_begin(c, g, COLL_ALLREDUCE, count, dt);
    if (g->size > 1) switch (a) {
        case ALGO_NAIVE: naive_allreduce(c, g, buf, count, dt); break;
        case ALGO_RING: ring_allreduce(c, g, buf, count, dt); break;
        case ALGO_RD: rd_allreduce(c, g, buf, count, dt); break;
        case ALGO_HIER: hier_allreduce(c, g, buf, count, dt); break;
        case ALGO_MPI: library(mpi_allreduce(c, g, buf, count, dt), "all-reduce"); break;
        default: unsupported("all-reduce", OP_ALLREDUCE, a);
    }
    comm_coll_end(c);
}

void reduce_scatter(Comm *c, Group *g, void *buf, size_t count, DType dt, Algo a) {
    comm_coll_begin(c, g, COLL_REDUCE_SCATTER, count, dt);
    if (g->size > 1) switch (a) {
        case ALGO_NAIVE: naive_allreduce(c, g, buf, count, dt); break;
        case ALGO_RING: ring_reduce_scatter(c, g, buf, count, dt); break;
        case ALGO_MPI: library(mpi_reduce_scatter(c, g, buf, count, dt), "reduce-scatter"); break;
        default: unsupported("reduce-scatter", OP_REDUCE_SCATTER, a);
    }
    comm_coll_end(c);
}

void all_gather(Comm *c, Group *g, void *buf, size_t count, DType dt, Algo a) {
    comm_coll_begin(c, g, COLL_ALLGATHER, count, dt);
    if (g->size > 1) switch (a) {
        case ALGO_NAIVE: naive_all_gather(c, g, buf, count, dt); break;
        case ALGO_RING: ring_all_gather(c, g, buf, count, dt); break;
        case ALGO_MPI: library(mpi_all_gather(c, g, buf, count, dt), "all-gather"); break;
        default: unsupported("all-gather", OP_ALL_GATHER, a);
    }
    comm_coll_end(c);
}

void broadcast(Comm *c, Group *g, void *buf, size_t count, DType dt, int root, Algo a) {
    CHECK(root >= 0 && root < g->size, "broadcast: root %d outside group %s of %d", root, g->name,
          g->size);
    comm_coll_begin(c, g, COLL_BROADCAST, count, dt);
    if (g->size > 1) switch (a) {
        case ALGO_NAIVE: naive_broadcast(c, g, buf, count, dt, root); break;
        case ALGO_RD: tree_broadcast(c, g, buf, count, dt, root); break;
        case ALGO_MPI: library(mpi_broadcast(c, g, buf, count, dt, root), "broadcast"); break;
        default: unsupported("broadcast", OP_BROADCAST, a);
    }
    comm_coll_end(c);
}

void all_to_all_v(Comm *c, Group *g, const void *send, const size_t *send_counts, void *recv,
                  const size_t *recv_counts, DType dt, Algo a) {
    int p = g->size, r = g->rank;
    size_t send_off[COMM_MAX_RANKS], recv_off[COMM_MAX_RANKS];
    size_t total = tile(send_counts, p, send_off);
    tile(recv_counts, p, recv_off);
    CHECK(send_counts[r] == recv_counts[r], "all-to-all: member %d of %s sends itself %zu "
          "elements but expects %zu", r, g->name, send_counts[r], recv_counts[r]);
    comm_coll_begin(c, g, COLL_ALLTOALL, total, dt);
    if (p == 1) memcpy(recv, send, send_counts[0] * dtype_size(dt));
    else switch (a) {
        case ALGO_NAIVE:
            naive_all_to_all_v(c, g, send, send_counts, send_off, recv, recv_counts, recv_off, dt);
            break;
        case ALGO_PAIRWISE:
            pairwise_all_to_all_v(c, g, send, send_counts, send_off, recv, recv_counts, recv_off,
                                  dt);
            break;
        case ALGO_MPI:
            library(mpi_all_to_all_v(c, g, send, send_counts, recv, recv_counts, dt), "all-to-all");
            break;
        default: unsupported("all-to-all", OP_ALL_TO_ALL, a);
    }
    comm_coll_end(c);
}

void all_to_all(Comm *c, Group *g, const void *send, void *recv, size_t block, DType dt, Algo a) {
    size_t counts[COMM_MAX_RANKS];
    for (int j = 0; j < g->size; j++) counts[j] = block;
    all_to_all_v(c, g, send, counts, recv, counts, dt, a);
}

// ---------------------------------------------------------------- for tests

const char *const coll_op_names[OP_COUNT] = {"allreduce", "reduce_scatter", "all_gather",
                                             "broadcast", "all_to_all"};

void run_collective(Comm *c, Group *g, CollOp op, void *buf, size_t count, DType dt, int root,
                    Algo a) {
    switch (op) {
        case OP_ALLREDUCE: allreduce(c, g, buf, count, dt, a); break;
        case OP_REDUCE_SCATTER: reduce_scatter(c, g, buf, count, dt, a); break;
        case OP_ALL_GATHER: all_gather(c, g, buf, count, dt, a); break;
        case OP_ALL_TO_ALL: {
            size_t bytes = count / g->size * g->size * dtype_size(dt);
            void *send = malloc(bytes ? bytes : 1);
            CHECK(send, "out of memory for a %zu-byte all-to-all", bytes);
            memcpy(send, buf, bytes);
            all_to_all(c, g, send, buf, count / g->size, dt, a);
            free(send);
            break;
        }
        default: broadcast(c, g, buf, count, dt, root, a); break;
    }
}

int collective_expected(CollOp op, int p, int rank, int root, size_t count, size_t i,
                        float (*value)(int rank, size_t i), float *want) {
    size_t lo, hi;
    *want = 0;
    switch (op) {
        case OP_REDUCE_SCATTER:
            shard_range(count, p, rank, &lo, &hi);
            if (i < lo || i >= hi) return 0;
            __attribute__((fallthrough));  // inside the shard: the sum, as all-reduce
        case OP_ALLREDUCE:
            for (int q = 0; q < p; q++) *want += value(q, i);
            return 1;
        case OP_ALL_GATHER:  // element i comes from the rank whose shard holds it
            for (int q = 0; q < p; q++) {
                shard_range(count, p, q, &lo, &hi);
                if (i >= lo && i < hi) *want = value(q, i);
            }
            return 1;
        case OP_ALL_TO_ALL: {  // block j came from rank j: its block `rank`
            size_t b = count / p;
            *want = i < b * p ? value((int)(i / b), rank * b + i % b) : value(rank, i);
            return 1;
        }
        default:
            *want = value(root, i);
            return 1;
    }
}
