// collectives_v.h — reduce-scatter and all-gather over blocks of any size.
//
// Stage 02's collectives cut a buffer evenly (shard_range). Sharded training
// owns blocks that are not even. ZeRO's shards are ceil(Ψ/N)-element ranges of
// the whole flat buffer, so a gradient bucket holds part of one rank's shard, or
// of two, and nothing of the others'; FSDP cuts every unit evenly. Both are a
// table: member i owns elements [lo[i], hi[i]) of the buffer; the blocks tile it
// in member order and may be empty.
//
//   reduce_scatter_v  member i ends with the sum over members of its block i (the
//                     rest of its buffer is scratch afterwards)
//   all_gather_v      member i contributes block i; everyone ends with all blocks
//
// Each rank sends (count - |its block|) elements in the ring reduce-scatter and
// (count - |the next member's block|) in the ring all-gather: (N-1)/N of the
// buffer per collective when the blocks are even, as in stage 02.
#pragma once
#include <stddef.h>

#include "collectives.h"

typedef struct {
    size_t count;                        // elements in the buffer
    size_t lo[COMM_MAX_RANKS], hi[COMM_MAX_RANKS];
} Blocks;

void blocks_even(Blocks *b, size_t count, int p);  // stage 02's split (shard_range)

// Algorithms: ALGO_RING (ours, any blocks), ALGO_NAIVE (everything through member
// 0, in member order: the sums are bit for bit those of stage 02's naive
// all-reduce), ALGO_MPI (MPI_Reduce_scatter / MPI_Allgatherv, under mpirun).
void reduce_scatter_v(Comm *c, Group *g, void *buf, const Blocks *b, DType dt, Algo a);
void all_gather_v(Comm *c, Group *g, void *buf, const Blocks *b, DType dt, Algo a);
