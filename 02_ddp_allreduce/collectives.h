// collectives.h — collectives built from point-to-point messages, and the library
// baselines behind the same interface.
//
// Every collective takes a Group (comm.h), works in place on a flat buffer of
// `count` elements of type dt (fp32 or bf16; bf16 is summed in fp32 and rounded
// once per addition, as NCCL does), and sums. Sharded collectives split the
// buffer with shard_range: rank i owns elements [count*i/n, count*(i+1)/n), so
// any count works, not only multiples of the group size.
//
//   allreduce       every rank ends with the sum of everyone's buffer
//   reduce_scatter  rank i ends with the sum of everyone's shard i (in place, in
//                   its own shard; the rest of the buffer is scratch afterwards)
//   all_gather      rank i contributes its shard i; everyone ends with all shards
//   broadcast       everyone ends with the root's buffer
//   all_to_all      rank i's buffer is p blocks, block j for rank j; rank j ends with
//                   everyone's block j, rank i's in its block i (the blocks transposed
//                   across the ranks: a personalised exchange, nothing summed). Out of
//                   place; all_to_all_v gives each block its own size.
#pragma once
#include <stddef.h>

#include "comm.h"
#include "dtype.h"

typedef enum {
    ALGO_NAIVE = 0,  // everything through rank 0: reduce to the root, then broadcast
    ALGO_RING,       // ring: reduce-scatter then all-gather, 2(p-1) steps of n/p
    ALGO_RD,         // recursive doubling (binomial tree for broadcast): lg p steps
    ALGO_MPI,        // the MPI library's own (needs mpirun)
    ALGO_NCCL,       // NCCL (GPU buffers; see comm_cuda.h)
    ALGO_HIER,       // hierarchical all-reduce: reduced inside each node to its leader, the
                     // leaders' all-reduce across the nodes, back inside (nodes: comm_node_size)
    ALGO_PAIRWISE,   // all-to-all in p-1 steps, each a permutation: step k sends to r+k and
                     // receives from r-k (alltoall.c, the exercise)
    ALGO_COUNT
} Algo;

const char *algo_name(Algo a);  // "naive", "ring", "rd", "mpi", "nccl", "hier", "pairwise"
int algo_parse(const char *s, Algo *out);    // 0 on success

void shard_range(size_t count, int n, int i, size_t *lo, size_t *hi);
// The all-reduce (and all-gather) algorithm that goes with an all-to-all's: the ring for
// pairwise (which has no all-reduce of its name), naive and mpi themselves.
Algo reduction_algo(Algo all_to_all);

// The hierarchical all-reduce across two nodes is pipelined over chunks of about
// HIER_CHUNK_BYTES (at most HIER_MAX_CHUNKS; chunk i = shard_range(count, chunks, i)):
// how many for count elements of dt over `nodes` nodes (1 unless there are two).
#define HIER_CHUNK_BYTES ((size_t)1 << 20)
#define HIER_MAX_CHUNKS 64
int hier_chunks(size_t count, DType dt, int nodes);

void allreduce(Comm *c, Group *g, void *buf, size_t count, DType dt, Algo a);
void reduce_scatter(Comm *c, Group *g, void *buf, size_t count, DType dt, Algo a);
void all_gather(Comm *c, Group *g, void *buf, size_t count, DType dt, Algo a);
void broadcast(Comm *c, Group *g, void *buf, size_t count, DType dt, int root, Algo a);
// send: p blocks of `block` elements, block j for member j; recv (not send: out of
// place) receives block i from member i. MPI_Alltoall's sendcount = recvcount = block.
void all_to_all(Comm *c, Group *g, const void *send, void *recv, size_t block, DType dt, Algo a);
// Blocks of any size: send_counts[j] elements go to member j, recv_counts[i] come from
// member i, each buffer's blocks tiled in member order from its start. What member i
// sends this rank must be what this rank expects (recv_counts[i]): the messages' headers
// check it. naive, pairwise and mpi.
void all_to_all_v(Comm *c, Group *g, const void *send, const size_t *send_counts, void *recv,
                  const size_t *recv_counts, DType dt, Algo a);

// For tests and benchmarks that loop over the collectives.
typedef enum {
    OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALL_GATHER, OP_BROADCAST, OP_ALL_TO_ALL, OP_COUNT
} CollOp;
extern const char *const coll_op_names[OP_COUNT];  // "allreduce", "reduce_scatter", ...
// 1 if collective op has algorithm a on the host: naive and mpi all five, ring all but
// broadcast and all-to-all, rd the all-reduce and (a binomial tree) the broadcast, hier
// the all-reduce, pairwise the all-to-all.
int collective_has(CollOp op, Algo a);
const char *collective_algos(CollOp op);  // the names of those it has: "naive, ring, mpi"
// In place on buf's count elements; the all-to-all's blocks are count/p elements each
// (the last count % p elements left alone), sent from a copy of buf.
void run_collective(Comm *c, Group *g, CollOp op, void *buf, size_t count, DType dt, int root,
                    Algo a);
// The serial reference. If rank q's buffer held value(q, i) before collective op on
// p ranks, *want is what element i must hold afterwards on group rank `rank`.
// Returns 0 when element i is scratch there (reduce-scatter, outside rank's shard).
int collective_expected(CollOp op, int p, int rank, int root, size_t count, size_t i,
                        float (*value)(int rank, size_t i), float *want);

// The ring algorithms (ring.c — the exercise). They assume comm_coll_begin was
// called by the dispatcher above.
void ring_reduce_scatter(Comm *c, Group *g, void *buf, size_t count, DType dt);
void ring_all_gather(Comm *c, Group *g, void *buf, size_t count, DType dt);
void ring_allreduce(Comm *c, Group *g, void *buf, size_t count, DType dt);

// The pairwise all-to-all (alltoall.c — the exercise), under the dispatcher's
// comm_coll_begin. send_off[j] and recv_off[j]: where block j starts, in elements.
void pairwise_all_to_all_v(Comm *c, Group *g, const void *send, const size_t *send_counts,
                           const size_t *send_off, void *recv, const size_t *recv_counts,
                           const size_t *recv_off, DType dt);

// Library baselines (baseline_mpi.c). Return 0 when the library is not available
// in this run (not launched by mpirun, or built without MPI).
int mpi_allreduce(Comm *c, Group *g, void *buf, size_t count, DType dt);
int mpi_reduce_scatter(Comm *c, Group *g, void *buf, size_t count, DType dt);
int mpi_all_gather(Comm *c, Group *g, void *buf, size_t count, DType dt);
int mpi_broadcast(Comm *c, Group *g, void *buf, size_t count, DType dt, int root);
// With blocks of any size (stage 03's shards): member i's block is [lo[i], hi[i])
// of buf; the blocks tile the buffer in member order (empty blocks allowed).
int mpi_reduce_scatter_v(Comm *c, Group *g, void *buf, const size_t *lo, const size_t *hi,
                         DType dt);
int mpi_all_gather_v(Comm *c, Group *g, void *buf, const size_t *lo, const size_t *hi, DType dt);
int mpi_all_to_all_v(Comm *c, Group *g, const void *send, const size_t *send_counts, void *recv,
                     const size_t *recv_counts, DType dt);
