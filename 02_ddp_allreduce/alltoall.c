// alltoall.c — the pairwise all-to-all.
//
// An all-to-all moves p(p-1) different blocks and sums nothing: each rank sends p-1
// of its p blocks (its own stays home) and receives p-1, (p-1)/p of its buffer each
// way, and no algorithm moves less. That is why nccl-tests' busbw for it is
// algbw (p-1)/p. What an algorithm chooses is the order. The pairwise exchange takes
// p-1 steps; at step k rank r sends its block for r+k and receives the block of r-k
// (mod p). Every step is a permutation: each rank sends to one rank and receives from
// one, so no link carries two messages and no receiver is queued on by the others, as
// it is when every rank posts everything at once (collectives.c's naive, whose first
// message from everyone goes to member 0).
//
// Stage 04's Ulysses attention swaps a sequence split for a head split with it, and an
// expert-parallel MoE sends each token to its expert's rank (the -v form: a count per
// peer, known only after routing).
#include <string.h>

#include "collectives.h"

static int mod(int a, int p) { return ((a % p) + p) % p; }

void pairwise_all_to_all_v(Comm *c, Group *g, const void *send, const size_t *send_counts,
                           const size_t *send_off, void *recv, const size_t *recv_counts,
                           const size_t *recv_off, DType dt) {
    size_t es = dtype_size(dt);
    int p = g->size, r = g->rank;
    const unsigned char *s = send;
    unsigned char *d = recv;
    memcpy(d + recv_off[r] * es, s + send_off[r] * es, send_counts[r] * es);  // no message
    for (int k = 1; k < p; k++) {
        int to = mod(r + k, p), from = mod(r - k, p);
        // The receive posted with the send: a send larger than the transport's channel
        // completes only once its receiver has posted, and every rank is a sender.
        CommRequest *q[2] = {
            comm_irecv(c, g, from, d + recv_off[from] * es, recv_counts[from] * es, RECV_COPY, dt),
            comm_isend(c, g, to, s + send_off[to] * es, send_counts[to] * es)};
        comm_wait(c, q, 2);
    }
}
