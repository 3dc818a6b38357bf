// exercises/vocab_ce.c — YOUR vocabulary-parallel cross-entropy (part 3).
//   make grade-4 PART=vocab_ce
//
// Each rank holds logits(N, Vl) for its block of the vocabulary: ids [lo, lo+Vl),
// of which the first `valid` columns are real (tp_vocab_range(g, &lo, &valid)
// returns Vl; the last blocks are padded when t does not divide V, and the
// padding must never change the loss). The loss of row n needs three numbers,
// each a reduction over the whole group:
//
//   m[n]       the largest logit of the row over ALL V ids (the same m on every rank)
//   sumexp[n]  Σ exp(logit - m[n]) over all V ids
//   target[n]  the logit of targets[n], from the one rank that holds that id
//   loss[n]    = log(sumexp[n]) + m[n] - target[n]
//
// The backend (common/ops.h, "the vocabulary split over ranks"): logits_max,
// logits_sumexp, crossentropy_loss, crossentropy_backward_split; copy, to_host,
// to_device. The group's collectives (../tp.h): tp_all_gather, tp_allreduce (they
// sum; a max over t ranks = gather every rank's N maxima, take the largest).
// Buffers: g->acts.vocab_stats (2N floats: m, then sumexp; the backward reads them),
// g->vocab_work (t*N floats of scratch), g->acts.targets (device ids). All three are
// device memory under --device cuda: read or write them on the host only through
// to_host / to_device (the CPU grader cannot tell; a GPU run would crash).
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "ops.h"
#include "tp.h"

void tp_crossentropy_forward(GPT *g, float *losses, const float *logits, int N) {
    (void)g; (void)losses; (void)logits; (void)N;
    // TODO(exercise):
    //  1. m: this rank's row maxima into block r of vocab_work, all-gather, the max
    //     of the t values per row (on the host is fine: t*N floats) into vocab_stats.
    //  2. sumexp and target: logits_sumexp into vocab_work's first 2N floats, one
    //     all-reduce of the 2N, sumexp copied into vocab_stats + N.
    //  3. losses: crossentropy_loss.
}

void tp_crossentropy_backward(GPT *g, float *dlogits, const float *logits, float dloss, int N) {
    (void)g; (void)dlogits; (void)logits; (void)dloss; (void)N;
    // TODO(exercise): softmax - onehot on this rank's columns, from the saved m and
    // sumexp: no communication (crossentropy_backward_split).
}
