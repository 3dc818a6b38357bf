// cp.h — context parallelism: the sequence cut over the cp ranks of a group, and
// attention computed a block of keys at a time so that no rank ever holds more than
// its own chunk of queries and one block of keys and values.
//
//   zigzag.c         which tokens each rank holds: contiguous chunks, or zigzag
//                    (rank i holds chunks i and 2cp-1-i: the same causal work on
//                    every rank)                                          (exercise)
//   softmax_merge.c  two partial softmax-weighted sums of the same queries over
//                    disjoint sets of keys, merged into the sum over both, by their
//                    log-sum-exps (the online softmax across ranks)       (exercise)
//   cp_attention.c   one (query run, key block) pair of causal attention, forward
//                    to a partial result, backward to its share of dQ, dK, dV
//   ring_attention.c the ring: each rank keeps its queries, the keys and values go
//                    round the cp ranks a block at a time (their gradients too, and
//                    home), every block merged in                         (exercise)
//   ring_steps.c     the ring's plumbing: its blocks, its messages in flight
//   ulysses.c        Ulysses: an all-to-all trades the split of the sequence for a split
//                    of the heads, attention runs whole on each rank's heads, and an
//                    all-to-all trades back
//
// Shapes: a head's queries, keys and values are rows of hs floats with a row stride
// (ld: 3C inside the GPT's fused qkv); a run of rows is a contiguous range of global
// positions [start, start + len) of the sequence. Causal: query i sees key j iff
// j <= i, in global positions, whichever ranks hold them.
#pragma once
#include <stddef.h>

#include "collectives.h"
#include "ctx.h"
#include "ddp.h"
#include "model.h"
#include "optim.h"
#include "timeline.h"
#include "tp.h"
#include "trainer.h"

// ---- which tokens a rank holds (zigzag.c) ----
typedef struct {
    int n;              // runs: 1 (contiguous) or 2 (zigzag)
    int start[2], len[2];
} CpRuns;
// The runs of rank `rank` of cp for a sequence of T tokens. Contiguous: one run of
// T/cp; zigzag: runs of T/(2cp) at chunks rank and 2cp-1-rank. Returns 0, or -1 when
// cp does not divide T so (cp for contiguous, 2cp for zigzag): refused, never padded
// silently.
int cp_runs(int T, int cp, int rank, int zigzag, CpRuns *out);
// The causal (query, key) pairs rank `rank` computes: sum over its queries of the keys
// at or before them. The work each rank does, to compare placements (cp_attention.c).
long long cp_causal_pairs(int T, int cp, int rank, int zigzag);

// ---- merging partial attention (softmax_merge.c) ----
// (out, lse) holds n rows: each row an output of hs floats, softmax-weighted over some
// keys (normalised: weights summing to 1), and lse the log of the sum of the exps of
// those scores; -INFINITY and an output of zeros when the row saw no key yet. Merge
// (out_b, lse_b), the same rows over other keys, into it: afterwards the row is the
// softmax-weighted sum over both sets, and lse = log(exp(lse) + exp(lse_b)), computed
// without overflow for any finite scores. ld_out, ld_b: the outputs' row strides.
void softmax_merge(float *out, float *lse, int ld_out, const float *out_b, const float *lse_b,
                   int ld_b, int n, int hs);

// ---- one block of causal attention (cp_attention.c) ----
typedef struct {
    const float *q, *k, *v;  // row 0 of each: global positions q0 and k0
    int ldq, ldk;            // row strides: of the queries, of the keys and the values
    int nq, nk, hs;          // query rows, key rows, head size
    int q0, k0;              // global positions of the first query and the first key
} CpBlock;
// The partial result of b's queries over b's keys, causal: out (nq rows, stride ldo)
// normalised over the keys each query sees, lse per row; a row that sees none gets
// zeros and -INFINITY. Blocks entirely in the future (k0 > the last query) are the
// caller's to skip: cp_block_sees says so. scratch: FLASH_BR x nk floats (the scores of
// a tile of queries; flash_tiles.h), twice that for the backward: the caller's, so that
// its ledger counts them.
void cp_block_forward(const CpBlock *b, float *out, int ldo, float *lse, float *scratch);
int cp_block_sees(const CpBlock *b);          // 1 if some query sees some key
long long cp_block_pairs(const CpBlock *b);   // the (query, key) pairs that see each other
// The backward of one block, given the queries' final lse (over all keys) and
// D = rowsum(dout * out) of their final output: adds the block's share into dq (nq
// rows, stride lddq), dk and dv (nk rows, stride lddk). dout: stride ldo.
void cp_block_backward(const CpBlock *b, const float *dout, int ldo, const float *lse,
                       const float *D, float *dq, int lddq, float *dk, float *dv, int lddk,
                       float *scratch);

// ---- ring attention (ring_attention.c) ----
typedef struct {
    Comm *comm;
    Group *group;   // the cp ranks, in ring order
    int zigzag;     // placement: zigzag.c's
    Algo algo;      // Ulysses' all-to-all (stage 02's: naive, pairwise or mpi)
    Ctx *ctx;       // Ulysses' attention: the core's flash attention on this context
    int overlap;    // the ring moves its messages between blocks of compute (else only
                    // in its waits: what --no-overlap measures against)
    Timeline *tl;   // the ring's compute, messages and waits (NULL: not recorded)
    double compute_s;  // the ring's block computations (cp_block_*, the merges), CPU seconds
                       // of this thread (+=): the ring's messages not included
    long long pairs;   // the ring's (query, key) pairs computed, forward (+=)
} ContextParallel;
// n floats the ledger counts (cp_attention.c): MEM_COMM for what travels between the
// ranks, MEM_WORKSPACE for scratch; on cp->ctx, freed with cp_buffer_free.
float *cp_buffer(ContextParallel *cp, MemCategory cat, size_t n);
void cp_buffer_free(ContextParallel *cp, MemCategory cat, float *p, size_t n);
// This rank's tokens of a T-token sequence: Tl = T / cp rows, its runs one after the
// other (cp_runs). qkv (B, Tl, 3C) the GPT's fused projections of those rows; out
// (B, Tl, C) and lse (B, NH, Tl) as the core's flash attention writes them for the whole
// sequence, restricted to these rows. Every rank of the group calls it.
void ring_attention_forward(ContextParallel *cp, float *out, float *lse, const float *qkv, int B,
                            int T, int C, int NH);
// dqkv (B, Tl, 3C) += the gradient of those rows' q, k and v: dq from this rank's
// queries against every block; dk, dv from every rank's queries against this rank's
// block, accumulated as the block goes round and sent home.
void ring_attention_backward(ContextParallel *cp, float *dqkv, const float *dout,
                             const float *qkv, const float *out, const float *lse, int B, int T,
                             int C, int NH);

// ---- Ulysses (ulysses.c) ----
// The same contract as the ring's, for NH heads that cp divides (refused otherwise,
// naming both); lse (B, NH, Tl floats) holds this rank's NH/cp heads over the whole
// sequence, (B, NH/cp, T), as its backward wants it.
void ulysses_attention_forward(ContextParallel *cp, float *out, float *lse, const float *qkv,
                               int B, int T, int C, int NH);
void ulysses_attention_backward(ContextParallel *cp, float *dqkv, const float *dout,
                                const float *qkv, const float *out, const float *lse, int B,
                                int T, int C, int NH);

// ---- the GPT over dp x cp x tp ranks (cp_model.c) ----
// Every rank holds the whole model, or with TP its tensor-parallel pieces (tp.h); the cp
// ranks of a group share each sequence, each its runs of tokens; the groups read
// different sequences. The layers run token by token on this rank's B x T/cp rows,
// with the position embeddings of their global positions and the ring's (or Ulysses')
// attention in place of the core's, on this rank's heads (all, or NH/tp with TP); the
// loss is the mean over this rank's rows, and the gradients are averaged over the dp x
// cp ranks that hold the same pieces (the cp ranks' rows are equal in number, so the
// mean of their means is the sequence's mean: the single process's gradient, as
// Megatron reduces over dp x cp).
typedef struct {
    ContextParallel cp;
    TensorParallel tp;     // the tensor-parallel group (size 1: none): CP x TP
    int ulysses;           // attention: Ulysses' all-to-all, else the ring
    GPTParallelOps layers; // the serial table with the embedding and attention replaced
    DDP ddp;               // the mean over the dp x cp ranks holding the same pieces
    AdamW opt;
    int *tokens, *targets; // this rank's rows of a micro-batch (B x T/cp)
    int B;                 // the activations' batch (0: not yet allocated)
    TrainStrategy strategy;
} CPTrain;
// cp: the context-parallel group (its ranks share a sequence); tp: the tensor-parallel
// group (size 1: none); replicas: the dp x cp ranks with this rank's tp rank, over which
// the gradients are averaged; algo: Ulysses' all-to-all.
void cp_train_init(CPTrain *s, Comm *c, Group *cp, Group *tp, Group *replicas, Algo algo,
                   int zigzag, int ulysses, Ctx *ctx);
