// collectives_v.c — the ring of stage 02 over blocks of any size, and the naive
// and MPI versions behind the same two calls.
#include "collectives_v.h"

#include "check.h"

void blocks_even(Blocks *b, size_t count, int p) {
    b->count = count;
    for (int i = 0; i < p; i++) shard_range(count, p, i, &b->lo[i], &b->hi[i]);
}

static int mod(int a, int p) { return ((a % p) + p) % p; }

static void check_blocks(const Group *g, const Blocks *b) {
    for (int i = 0; i < g->size; i++) {
        int tiles = b->lo[i] <= b->hi[i] && b->hi[i] <= b->count &&
                    b->lo[i] == (i ? b->hi[i - 1] : 0) && (i + 1 < g->size || b->hi[i] == b->count);
        CHECK(tiles, "blocks of %zu elements do not tile the buffer in member order (member %d: "
              "[%zu, %zu))", b->count, i, b->lo[i], b->hi[i]);
    }
}

// The ring of ring.c with block s = [lo[s], hi[s]): step k sends block r-k-1 to the
// right and adds block r-k-2 arriving from the left. An empty block is a message of
// zero bytes, so the steps stay in lockstep whatever the sizes.
static void ring_rs_v(Comm *c, Group *g, unsigned char *buf, const Blocks *b, DType dt) {
    int p = g->size, r = g->rank, right = mod(r + 1, p), left = mod(r - 1, p);
    size_t es = dtype_size(dt);
    for (int k = 0; k < p - 1; k++) {
        int s = mod(r - k - 1, p), t = mod(r - k - 2, p);
        CommRequest *q[2] = {
            comm_isend(c, g, right, buf + b->lo[s] * es, (b->hi[s] - b->lo[s]) * es),
            comm_irecv(c, g, left, buf + b->lo[t] * es, (b->hi[t] - b->lo[t]) * es, RECV_SUM, dt)};
        comm_wait(c, q, 2);
    }
}

static void ring_ag_v(Comm *c, Group *g, unsigned char *buf, const Blocks *b, DType dt) {
    int p = g->size, r = g->rank, right = mod(r + 1, p), left = mod(r - 1, p);
    size_t es = dtype_size(dt);
    for (int k = 0; k < p - 1; k++) {
        int s = mod(r - k, p), t = mod(r - k - 1, p);
        CommRequest *q[2] = {
            comm_isend(c, g, right, buf + b->lo[s] * es, (b->hi[s] - b->lo[s]) * es),
            comm_irecv(c, g, left, buf + b->lo[t] * es, (b->hi[t] - b->lo[t]) * es, RECV_COPY, dt)};
        comm_wait(c, q, 2);
    }
}

static _Noreturn void unsupported(const char *what, Algo a) {
    DIE("%s over blocks has no '%s' algorithm (choose ring, naive or mpi)", what, algo_name(a));
}

void reduce_scatter_v(Comm *c, Group *g, void *buf, const Blocks *b, DType dt, Algo a) {
    check_blocks(g, b);
    if (a == ALGO_NAIVE) {  // the whole buffer summed in member order: any block is then right
        allreduce(c, g, buf, b->count, dt, ALGO_NAIVE);
        return;
    }
    comm_coll_begin(c, g, COLL_REDUCE_SCATTER, b->count, dt);
    if (g->size > 1) switch (a) {
        case ALGO_RING: ring_rs_v(c, g, buf, b, dt); break;
        case ALGO_MPI:
            CHECK(mpi_reduce_scatter_v(c, g, buf, b->lo, b->hi, dt), "reduce-scatter: the MPI "
                  "baseline needs mpirun with --transport mpi (and a build with mpicc)");
            break;
        default: unsupported("reduce-scatter", a);
    }
    comm_coll_end(c);
}

void all_gather_v(Comm *c, Group *g, void *buf, const Blocks *b, DType dt, Algo a) {
    check_blocks(g, b);
    size_t es = dtype_size(dt);
    if (a == ALGO_NAIVE) {  // each owner sends its block to every other member in turn
        for (int i = 0; i < g->size; i++)
            if (b->hi[i] > b->lo[i])
                broadcast(c, g, (unsigned char *)buf + b->lo[i] * es, b->hi[i] - b->lo[i], dt, i,
                          ALGO_NAIVE);
        return;
    }
    comm_coll_begin(c, g, COLL_ALLGATHER, b->count, dt);
    if (g->size > 1) switch (a) {
        case ALGO_RING: ring_ag_v(c, g, buf, b, dt); break;
        case ALGO_MPI:
            CHECK(mpi_all_gather_v(c, g, buf, b->lo, b->hi, dt), "all-gather: the MPI baseline "
                  "needs mpirun with --transport mpi (and a build with mpicc)");
            break;
        default: unsupported("all-gather", a);
    }
    comm_coll_end(c);
}
