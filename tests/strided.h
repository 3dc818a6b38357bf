// strided.h — the subgroups `--strided` runs a test in (test_collectives, test_ddp):
// the even world ranks and the odd ones, each listing its members in descending
// order, as later stages run the collectives and DDP over a mesh's groups. A member's
// rank and its group's size are then not the world's: code that reads comm_rank or
// comm_size where it means g->rank and g->size fails there.
#pragma once
#include "check.h"
#include "comm.h"

// Builds this rank's subgroup into *sub and returns it (every rank calls it).
static inline Group *strided_group(Comm *c, Group *sub) {
    int p = comm_size(c), r = comm_rank(c), members[COMM_MAX_RANKS], n = 0;
    CHECK(p >= 4, "--strided needs --np 4 or more (two groups of at least two)");
    for (int q = p - 1; q >= 0; q--)
        if (q % 2 == r % 2) members[n++] = q;
    comm_group_new(c, sub, r % 2 ? "odd" : "even", members, n);
    return sub;
}
