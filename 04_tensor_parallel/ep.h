// ep.h — expert parallelism: a mixture-of-experts layer (common/moe.h) whose E experts
// are split over the ep ranks of a group, E/ep each (rank r: experts r E/ep ..), while
// every rank routes its own tokens (the group is data parallel over tokens too).
//
//   route     each rank its tokens' k experts and gates (moe_route)
//   counts    every rank's assignments per expert, all-gathered (ep x E): from them every
//             rank works out the same capacity decisions the single process makes over
//             the step's tokens in rank order (an expert keeps its first capacity
//             assignments: rank 0's tokens first, then rank 1's, ...)
//   dispatch  the kept assignments' token rows by all-to-all-v to the experts' owners
//   experts   each owner runs its experts over the rows it received, every source's in
//             rank order (the single process's token order)
//   combine   the outputs back by the reverse all-to-all-v, each token's sum of gate x
//             output, as moe_forward's combine
//   losses    the load-balancing loss over the whole step: the routed counts are the
//             all-gathered ones, the mean probabilities all-reduced; the z-loss's sum too
//
// Backward: the outputs' gradients to the owners by the dispatch's all-to-all-v, the
// experts' backward there (their weights' gradients complete: every token they saw), the
// inputs' gradients back by the combine's; the router's gradient each rank's share,
// summed over the group. A rank reads only its experts' pieces of the weights.
//
// The loss these gradients are of is the whole step's: dout is d(loss)/d(out) of the
// step's total loss (not a mean over this rank's tokens alone), and the losses enter it
// once. The expert and router gradients come out summed over the group's tokens: a
// data-parallel mean over the same ranks must not reduce them again. Ranks may hold
// different numbers of tokens: the totals are the all-gathered counts'.
#pragma once
#include "collectives.h"
#include "moe.h"

typedef struct {
    Comm *comm;
    Group *group;    // the ep ranks
    Algo algo;       // the all-to-all's (pairwise, naive, mpi); the all-gather and the
                     // all-reduces take the ring, unless naive or mpi is asked
} ExpertParallel;

// One step's state on a rank, from the forward for the backward (ep_acts_new: host).
typedef struct {
    MoEActs *a;            // this rank's routing (logits, probs, expert, gate), N tokens;
                           // routed: the whole step's; dropped: this rank's
    int ep, El;            // ranks, experts a rank
    long tokens;           // the step's tokens over the group (the counts' sum / k)
    int *counts;           // (ep, E) assignments each rank's router gave each expert
    int *kept;             // (ep, E) of them kept (capacity)
    int *pos;              // (N k) an assignment's row in this rank's send buffer; -1 dropped
    size_t *send_rows, *recv_rows;  // (ep) rows to and from each rank
    size_t n_send, n_recv;
    float *send, *recv;    // (n_send, C), (n_recv, C): rows out and in, reused both ways
    float *xg, *h, *act, *y;  // this rank's experts' rows, grouped by expert then source
    int *order;            // (n_recv) xg's row r came from recv row order[r]
    float aux, z;
} EPActs;
EPActs *ep_acts_new(const ExpertParallel *ep, const MoEConfig *m, int N, int C);
void ep_acts_free(EPActs *s);

// moe_forward's contract on this rank's N tokens, the experts split over ep->group
// (E divisible by its size). Every rank of the group calls it. Returns aux + z of the
// whole step (the same on every rank).
float ep_moe_forward(Ctx *ctx, const ExpertParallel *ep, const MoEConfig *m, EPActs *s,
                     float *out, const float *x, const float *w);
// moe_backward's: dx += this rank's tokens' gradient; dw += this rank's experts' pieces
// and the router's (summed over the group: the whole step's). loss_scale as there.
void ep_moe_backward(Ctx *ctx, const ExpertParallel *ep, const MoEConfig *m, EPActs *s,
                     float *dx, float *dw, const float *dout, const float *x, const float *w,
                     float loss_scale);
