// vocab_ce.c — the vocabulary-parallel cross-entropy (Megatron-LM's
// vocab_parallel_cross_entropy).
//
// Each rank holds logits(N, Vl) for its block of the vocabulary. Gathering the
// whole (N, V) logits would cost N·V floats per rank; the loss needs only three
// numbers per row, each a reduction over the group:
//
//   m       = max over all V logits          (every rank must shift by the same m)
//   sumexp  = Σ exp(logit - m) over all V
//   target  = the target's logit, from the one rank that holds that id
//   loss    = log(sumexp) + m - target
//
// Our collectives sum; a max over t ranks is an all-gather of every rank's N row
// maxima and a max over t values. The sums of exponentials and the target logits
// share one all-reduce of 2N floats. The backward needs no communication:
// dlogits = softmax - onehot, each rank its own columns, from m and sumexp kept
// from the forward (g->acts.vocab_stats).
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "ops.h"
#include "tp.h"

void tp_crossentropy_forward(GPT *g, float *losses, const float *logits, int N) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    int t = g->tp.size, r = g->tp.rank, lo, valid;
    int Vl = tp_vocab_range(g, &lo, &valid);
    float *m = g->acts.vocab_stats, *sumexp = g->acts.vocab_stats + N, *work = g->vocab_work;

    // 1. The row maxima over the whole vocabulary: each rank's, gathered, then the
    //    largest of the t (on the host: t*N floats, a few KB).
    o->logits_max(ctx, work + (size_t)r * N, logits, N, Vl, valid);
    tp_all_gather(g, work, (size_t)t * N);
    float *host = malloc((size_t)t * N * sizeof(float));
    CHECK(host, "out of host memory");
    o->to_host(ctx, host, work, (size_t)t * N * sizeof(float));
    for (int n = 0; n < N; n++)
        for (int q = 1; q < t; q++)
            if (host[(size_t)q * N + n] > host[n]) host[n] = host[(size_t)q * N + n];
    o->to_device(ctx, m, host, (size_t)N * sizeof(float));
    free(host);

    // 2. Σ exp(logit - m) over this rank's columns and the target logit where this
    //    rank holds it; one all-reduce sums both over the group.
    float *sums = work, *target = work + N;  // (2, N): the maxima are no longer needed
    o->logits_sumexp(ctx, sums, target, logits, m, g->acts.targets, lo, N, Vl, valid);
    tp_allreduce(g, sums, 2 * (size_t)N);
    o->copy(ctx, sumexp, sums, (size_t)N * sizeof(float));

    // 3. The loss of every row, the same on every rank.
    o->crossentropy_loss(ctx, losses, m, sumexp, target, N);
}

void tp_crossentropy_backward(GPT *g, float *dlogits, const float *logits, float dloss, int N) {
    int lo, valid;
    int Vl = tp_vocab_range(g, &lo, &valid);
    const float *m = g->acts.vocab_stats, *sumexp = g->acts.vocab_stats + N;
    g->ctx->ops->crossentropy_backward_split(g->ctx, dlogits, logits, m, sumexp, g->acts.targets, lo,
                                             dloss, N, Vl, valid);
}
