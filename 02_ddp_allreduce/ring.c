// ring.c — ring reduce-scatter, all-gather and all-reduce.
//
// The p ranks of the group stand in a ring; rank r sends to r+1 and receives
// from r-1. The buffer is cut into p shards (shard_range). Every step moves one
// shard per rank, and every link carries traffic at the same time, so the time
// is 2(p-1) messages of n/p bytes: 2 (p-1)/p n bytes per rank, under 2n for any p.
// That is the bandwidth-optimal all-reduce, and why busbw (nccl-tests) multiplies
// algbw by 2(p-1)/p: it is the bandwidth each link actually sustained.
#include "collectives.h"

static int mod(int a, int p) { return ((a % p) + p) % p; }

// Byte range of shard s.
static void shard(size_t count, DType dt, int p, int s, size_t *off, size_t *bytes) {
    size_t lo, hi;
    shard_range(count, p, s, &lo, &hi);
    *off = lo * dtype_size(dt);
    *bytes = (hi - lo) * dtype_size(dt);
}

// After p-1 steps rank r holds the complete sum of shard r.
// Step k: send shard r-k-1 (which already holds k+1 contributions) to the right;
// receive shard r-k-2 from the left and ADD it into ours (the transport reduces as
// the bytes stream in). The shard sent at step k+1 is the one received at step k.
void ring_reduce_scatter(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    int p = g->size, r = g->rank, right = mod(r + 1, p), left = mod(r - 1, p);
    unsigned char *b = buf;
    for (int k = 0; k < p - 1; k++) {
        size_t so, sb, ro, rb;
        shard(count, dt, p, mod(r - k - 1, p), &so, &sb);
        shard(count, dt, p, mod(r - k - 2, p), &ro, &rb);
        CommRequest *q[2] = {comm_isend(c, g, right, b + so, sb),
                             comm_irecv(c, g, left, b + ro, rb, RECV_SUM, dt)};
        comm_wait(c, q, 2);
    }
}

// Rank r starts with shard r. Step k: send shard r-k (received at step k-1) to
// the right, receive shard r-k-1 from the left (a plain copy). After p-1 steps
// every rank has every shard.
void ring_all_gather(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    int p = g->size, r = g->rank, right = mod(r + 1, p), left = mod(r - 1, p);
    unsigned char *b = buf;
    for (int k = 0; k < p - 1; k++) {
        size_t so, sb, ro, rb;
        shard(count, dt, p, mod(r - k, p), &so, &sb);
        shard(count, dt, p, mod(r - k - 1, p), &ro, &rb);
        CommRequest *q[2] = {comm_isend(c, g, right, b + so, sb),
                             comm_irecv(c, g, left, b + ro, rb, RECV_COPY, dt)};
        comm_wait(c, q, 2);
    }
}

void ring_allreduce(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    ring_reduce_scatter(c, g, buf, count, dt);
    ring_all_gather(c, g, buf, count, dt);
}
