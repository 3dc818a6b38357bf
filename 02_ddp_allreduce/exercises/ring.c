// exercises/ring.c — YOUR ring collectives. `make grade-2` builds the stage with
// this file in place of ../ring.c and runs the same tests.
//   make grade-2 PART=ring_reduce_scatter | ring_all_gather | ring_allreduce
// Stuck on one? make hint-2 PART=<part>   (tier 1 a nudge; TIER=2, 3 more)
//
// THE RING: the p ranks of group g stand in a circle; rank r sends only to r+1 and
// receives only from r-1 (mod p). r = g->rank and p = g->size: peers are member
// indices of g (comm.h), not world ranks (the tests also run your ring on subgroups).
// The buffer (count elements of type dt, in place) is cut into p shards with
// shard_range (collectives.h): shard s is elements [count*s/p, count*(s+1)/p). Some
// shards may be empty (count < p, count = 0), and count need not divide by p.
// Every step of a ring, every rank sends one shard and receives one, all links busy
// at once: 2(p-1) messages of about n/p bytes for an all-reduce, under 2n per rank
// whatever p (the lesson's §2).
//
// What you may use (comm.h, collectives.h, dtype.h):
//   CommRequest *comm_isend(c, g, peer, ptr, bytes);
//   CommRequest *comm_irecv(c, g, peer, ptr, bytes, RECV_SUM or RECV_COPY, dt);
//       RECV_SUM adds the incoming elements into ptr (a reduction as the bytes
//       stream in); RECV_COPY overwrites.
//   comm_wait(c, reqs, n);   waits for (and frees) n requests.
//   shard_range(count, p, s, &lo, &hi);  dtype_size(dt)  (element i of a dt buffer
//   is at (unsigned char *)buf + i * dtype_size(dt)).
//
// What the grader checks (tests/test_collectives.c, coll.<op>.ring.*): your result
// against the serial sum on 2, 3, 4, 5, 7, 8 ranks, 11 counts from 0 to 65537, fp32
// and bf16; on subgroups of the world (the even ranks, the odd ones); one message
// larger than the transport's channel; the same ring over MPI; and the bytes each
// rank sent, which must be exactly a ring's: (p-1)/p of the buffer per phase.
//
// Pitfalls: a send larger than the channel does not complete until its receiver has
// posted the receive, and your neighbour is a sender too; C's % of a negative number
// is negative; the world's rank and size are not the group's.
#include "collectives.h"

// Reduce-scatter. On return, rank r's shard r holds the sum over all ranks of shard
// r (the other shards of the buffer are scratch: anything). Exactly p-1 shards sent
// per rank. The thinking part: which shard does rank r send, and which receive, at
// each step, so that the shard it completes last is its own?
void ring_reduce_scatter(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    (void)c; (void)g; (void)buf; (void)count; (void)dt;
    // TODO(exercise): the reduce-scatter ring.
}

// All-gather. On entry rank r's shard r is valid (the rest: anything); on return
// every shard is, on every rank, equal to its owner's, bit for bit. Exactly p-1
// shards sent per rank: no rank is sent a shard it already holds.
void ring_all_gather(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    (void)c; (void)g; (void)buf; (void)count; (void)dt;
    // TODO(exercise): the all-gather ring.
}

// All-reduce: on return every rank's whole buffer holds the element-wise sum over the
// ranks, in 2(p-1) steps of n/p bytes, built from the two functions above. Its bytes
// are counted as this one all-reduce's: the dispatchers reduce_scatter() and
// all_gather() would each open a collective of their own (and count its bytes there).
void ring_allreduce(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    (void)c; (void)g; (void)buf; (void)count; (void)dt;
    // TODO(exercise): from the two functions above (not the dispatchers: see above).
}
