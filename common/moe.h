// moe.h — a mixture-of-experts feed-forward layer (Shazeer et al. 2017; GShard, Lepikhin
// et al. 2020; Switch, Fedus et al. 2021): in place of one MLP, E expert MLPs and a
// router that sends each token to k of them.
//
//   router   logits = x Wr^T (N, E), probs = softmax(logits); each token's k most
//            probable experts (ties to the lower index), their gates the probabilities
//            renormalised over those k (they sum to 1; so with k = 1 the gate is 1 and
//            the router learns from the two losses alone, where Switch gates by the
//            probability itself)
//   capacity an expert takes at most ceil(capacity N k / E) of the step's assignments,
//            in token order (capacity 0: no limit); the rest are dropped, counted, and
//            add nothing: a token all of whose experts dropped it leaves the layer as 0,
//            so the residual stream carries it on unchanged
//   experts  expert e's MLP, GELU(x W1_e^T + b1_e) W2_e^T + b2_e (width F), run once over
//            the tokens it kept (a grouped GEMM: one matmul per expert over its rows)
//   combine  out[n] = sum over token n's kept assignments of gate * expert output
//   losses   the load-balancing loss aux_weight * E * sum_e f_e P_e (f_e: the share of
//            the step's N k assignments the router gave expert e, before capacity; P_e:
//            the mean of probs[:, e]), which only P carries gradient through (Switch's
//            form); the router z-loss z_weight * mean_n logsumexp(logits_n)^2
//
// Weights, one flat slice of moe_num_params floats: Wr (E, C), then W1 (E, F, C), b1
// (E, F), W2 (E, C, F), b2 (E, C). The experts' matmuls go through ctx->ops (the core's
// sgemm); the routing, the gathers and the combine are this file's loops, on the host.
#pragma once
#include <stddef.h>

#include "ops.h"

typedef struct {
    int E;             // experts
    int k;             // experts a token is sent to, 1..E
    int F;             // each expert's hidden width
    float capacity;    // capacity factor (0: no limit)
    float aux_weight;  // the load-balancing loss's weight
    float z_weight;    // the router z-loss's weight (0: none)
} MoEConfig;

size_t moe_num_params(const MoEConfig *m, int C);
// The weights' pieces inside the flat slice w.
typedef struct { float *wr, *w1, *b1, *w2, *b2; } MoEWeights;
MoEWeights moe_weights(const MoEConfig *m, int C, float *w);

// One step's routing and what the backward needs, for N tokens (moe_acts_new; host).
// An assignment is (token n, choice j), index n k + j; kept ones are laid out grouped by
// expert, expert e's at rows offset[e] .. offset[e + 1) of xg, h, act, y, in token order.
typedef struct {
    int N, C;
    float *logits, *probs;   // (N, E)
    float *lse;              // (N) each token's log-sum-exp of its logits (the z-loss's)
    int *expert;             // (N k) the chosen experts, in falling probability
    float *gate;             // (N k) their renormalised gates
    int *row;                // (N k) the assignment's row in the grouped layout; -1: dropped
    int *offset;             // (E + 1)
    int *routed;             // (E) assignments the router gave each expert (before capacity)
    float *xg, *h, *act, *y; // (kept, C), (kept, F), (kept, F), (kept, C)
    int kept, dropped;       // assignments kept and dropped this step
    float aux, z;            // the two losses' values, weighted
} MoEActs;
MoEActs *moe_acts_new(const MoEConfig *m, int N, int C);
// The routing's fields alone (xg, h, act, y NULL): a layer whose experts run elsewhere.
MoEActs *moe_route_acts_new(const MoEConfig *m, int N, int C);
void moe_acts_free(MoEActs *a);

// out (N, C) = the layer on x (N, C); fills a. Returns aux + z, the caller adds it to
// the loss it minimises.
float moe_forward(Ctx *ctx, const MoEConfig *m, MoEActs *a, float *out, const float *x,
                  const float *w);
// dx (N, C) += the input's gradient, dw += the weights' (one flat slice, as w), given
// dout (N, C) and a from the forward; loss_scale: d(total loss)/d(aux + z), the factor
// the caller put on the layer's losses (1; 1/m over m accumulated micro-batches).
void moe_backward(Ctx *ctx, const MoEConfig *m, MoEActs *a, float *dx, float *dw,
                  const float *dout, const float *x, const float *w, float loss_scale);

// ---- the pieces, for a layer whose experts live on other ranks (expert parallelism) ----
// The router alone on a's N tokens: logits, probs, each token's k experts and gates (no
// capacity: row, offset, routed are not touched).
void moe_route(Ctx *ctx, const MoEConfig *m, MoEActs *a, const float *x, const float *w);
// Expert e's MLP over `rows` rows xg (C wide) into h, act (F wide) and y; its backward
// writes dxg and adds into e's pieces of dw (the layer's flat gradient, as w).
void moe_expert_forward(Ctx *ctx, const MoEConfig *m, int C, const float *w, int e, int rows,
                        const float *xg, float *h, float *act, float *y);
void moe_expert_backward(Ctx *ctx, const MoEConfig *m, int C, const float *w, float *dw, int e,
                         int rows, const float *dy, const float *xg, const float *h,
                         const float *act, float *dxg);
// The combine over a's assignments, assignment i at row row[i] of y (-1: dropped): out
// (N, C) = each token's sum of gate x y in choice order; its backward dgate[i] = dout[n] .
// y[row[i]] and dy[row[i]] = gate[i] dout[n] (dy may be y: each row is read before it is
// written; dropped: dgate 0); and dx[n] += dxg[row[i]], each token's share back.
void moe_combine(const MoEConfig *m, const MoEActs *a, const int *row, const float *y, float *out);
void moe_combine_backward(const MoEConfig *m, const MoEActs *a, const int *row, const float *dout,
                          const float *y, float *dy, float *dgate);
void moe_scatter_add(const MoEConfig *m, const MoEActs *a, const int *row, const float *dxg,
                     float *dx);
// dlogits (a's N, E) from the gates' gradient dgate (N k) and the two losses, whose
// f_e = routed[e] / (total k) and means are over `total` tokens (every rank's, when the
// step's tokens are spread over ranks: moe_backward passes a's own).
void moe_router_backward(const MoEConfig *m, const MoEActs *a, float *dlogits, const float *dgate,
                         const int *routed, int total, float loss_scale);
