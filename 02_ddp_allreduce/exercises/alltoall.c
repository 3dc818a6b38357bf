// exercises/alltoall.c — YOUR all-to-all. `make grade-2` builds the stage with this
// file in place of ../alltoall.c and runs the same tests.
//   make grade-2 PART=pairwise_all_to_all
// Stuck? make hint-2 PART=pairwise_all_to_all   (tier 1 a nudge; TIER=2, 3 more)
//
// THE ALL-TO-ALL: every rank holds p blocks, block j meant for member j of group g;
// afterwards member j holds p blocks, block i being what member i meant for it. A
// transpose of the blocks across the ranks; nothing is summed. Ulysses attention
// (stage 04) and expert parallelism move their data with it.
//
// The pairwise exchange: p-1 steps; at step k (1 .. p-1) rank r sends its block for
// member r+k and receives member r-k's block for it (mod p). Every step pairs each
// sender with a different receiver, so no rank is sent two messages at once.
//
// The blocks may have any size, zero included (the "-v" all-to-all; MoE's tokens per
// expert are known only after routing): member j's block of send is send_counts[j]
// elements starting at element send_off[j]; the block from member i goes to
// recv + recv_off[i], recv_counts[i] elements. Element e of a dt buffer is at
// (unsigned char *)buf + e * dtype_size(dt). send and recv are different buffers.
//
// What you may use (comm.h, collectives.h, dtype.h):
//   CommRequest *comm_isend(c, g, peer, ptr, bytes);
//   CommRequest *comm_irecv(c, g, peer, ptr, bytes, RECV_COPY, dt);
//   comm_wait(c, reqs, n);   waits for (and frees) n requests.  memcpy (string.h).
//   r = g->rank, p = g->size: peers are member indices of g, not world ranks.
//
// What the grader checks (tests/test_collectives.c, coll.all_to_all.pairwise.*): every
// element of every block against where it must land, on 2, 3, 4, 5, 7, 8 ranks, 11
// counts, fp32 and bf16, blocks of uneven and zero sizes; on subgroups; blocks larger
// than the transport's eager limit; across two nodes; and the bytes each rank sent,
// which must be exactly its p-1 outgoing blocks (your own block is copied, never sent).
//
// Pitfalls: a send larger than the transport's eager limit (comm_channel_bytes)
// completes only once its receiver has posted the receive, and every rank is a sender;
// C's % of a negative number is negative.
#include <string.h>

#include "collectives.h"

void pairwise_all_to_all_v(Comm *c, Group *g, const void *send, const size_t *send_counts,
                           const size_t *send_off, void *recv, const size_t *recv_counts,
                           const size_t *recv_off, DType dt) {
    (void)c; (void)g; (void)send; (void)send_counts; (void)send_off; (void)recv;
    (void)recv_counts; (void)recv_off; (void)dt;
    // TODO(exercise): your own block, then p-1 pairwise steps.
}
