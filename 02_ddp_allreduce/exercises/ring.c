// exercises/ring.c — YOUR ring collectives. `make grade-2` builds the stage with
// this file in place of ../ring.c and runs the same tests.
//
// The ring: the p ranks of group g stand in a circle; rank r sends to r+1 and
// receives from r-1 (mod p). r = g->rank and p = g->size: peers are member indices
// of g (comm.h), not world ranks (the tests also run your ring on subgroups). Cut the buffer into p shards with shard_range
// (collectives.h): shard s is elements [count*s/p, count*(s+1)/p). Each step,
// every rank sends one shard and receives one shard, all links busy at once.
//
// Tools (comm.h):
//   CommRequest *comm_isend(c, g, peer, ptr, bytes);
//   CommRequest *comm_irecv(c, g, peer, ptr, bytes, RECV_SUM or RECV_COPY, dt);
//       RECV_SUM adds the incoming elements into ptr (a reduction as the bytes
//       stream in); RECV_COPY overwrites.
//   comm_wait(c, reqs, n);   waits for (and frees) n requests.
// Post the send and the receive of a step together, then wait for both: if you
// wait for the send first, two neighbours can block each other.
// Byte offsets: element i of a dt buffer is at (unsigned char *)buf + i * dtype_size(dt).
// Remember C's % can be negative: use ((a % p) + p) % p.
#include "collectives.h"

// On return, rank r's shard r holds the sum over all ranks of shard r.
// Hint: p-1 steps. At step k send shard (r-k-1) to the right and receive shard
// (r-k-2) from the left with RECV_SUM. Why does rank r end up owning shard r?
void ring_reduce_scatter(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    (void)c; (void)g; (void)buf; (void)count; (void)dt;
    // TODO(exercise): the reduce-scatter ring.
}

// On entry rank r's shard r is valid; on return every shard is, on every rank.
// Hint: p-1 steps. At step k send shard (r-k) right, receive shard (r-k-1) from
// the left with RECV_COPY.
void ring_all_gather(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    (void)c; (void)g; (void)buf; (void)count; (void)dt;
    // TODO(exercise): the all-gather ring.
}

// All-reduce = reduce-scatter, then all-gather: 2(p-1) steps of n/p bytes.
void ring_allreduce(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    (void)c; (void)g; (void)buf; (void)count; (void)dt;
    // TODO(exercise): compose the two functions above. Call ring_reduce_scatter and
    // ring_all_gather directly, not the dispatchers reduce_scatter() / all_gather():
    // those open two more collectives, and the bytes would be counted as a
    // reduce-scatter and an all-gather instead of this all-reduce (the tests count them).
}
