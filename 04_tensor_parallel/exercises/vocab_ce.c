// exercises/vocab_ce.c — YOUR vocabulary-parallel cross-entropy (part 3).
//   make grade-4 PART=vocab_ce
// Stuck? make hint-4 PART=vocab_ce   (tier 1 a nudge; TIER=2, 3 more)
//
// Read the lesson's §1 ("The vocabulary"). Each rank holds logits(N, Vl) for its block
// of the vocabulary: ids [lo, lo+Vl), of which the first `valid` columns are real
// (tp_vocab_range(g, &lo, &valid) returns Vl; the last blocks are padded when t does
// not divide V, and the padding must never change the loss). The loss of row n needs
// three numbers, each a reduction over the whole group:
//
//   m[n]       the largest logit of the row over ALL V ids (the same m on every rank)
//   sumexp[n]  Σ exp(logit - m[n]) over all V ids
//   target[n]  the logit of targets[n], from the one rank that holds that id
//   loss[n]    = log(sumexp[n]) + m[n] - target[n]
//
// THE CONTRACT
//   tp_crossentropy_forward(g, losses, logits, N): losses[n] as above on every rank
//     (within fp32 rounding of the serial cross-entropy), and m and sumexp left in
//     g->acts.vocab_stats (2N floats: m, then sumexp), where the backward reads them.
//   tp_crossentropy_backward(g, dlogits, logits, dloss, N): this rank's columns of
//     (softmax - onehot(target)) * dloss, 0 on the padding; no communication.
//   Every byte sent is counted (tp.bytes) against the formula in tests/test_tp.c:
//   the communication the lesson describes, and nothing more.
//
// What you may use: the backend (common/ops.h, "the vocabulary split over ranks"):
// logits_max, logits_sumexp, crossentropy_loss, crossentropy_backward_split; copy,
// to_host, to_device. The group's collectives (../tp.h): tp_all_gather, tp_allreduce
// (they SUM; there is no max). Buffers: g->acts.vocab_stats, g->vocab_work (t*N floats
// of scratch: at least 2N, as t >= 2 here), g->acts.targets (device ids). All three are device memory under
// --device cuda: read or write them on the host only through to_host / to_device (a
// GPU run would crash; the grader runs your code a second time on a CPU device whose
// memory the host cannot read: tests/opaque_device.h).
//
// What the grader checks (tests/test_tp.c, tests/stage04.sh): the losses and dlogits
// against the serial ones (tp.ce.*), then the whole model against one process (logits,
// gradients, 10 training steps, bytes, replicated tensors, the driver) for t = 2..4,
// with SP, on meshes; rows of negative logits, and confident rows whose largest logit
// lies on any rank.
// Pitfalls: each rank shifting by its own maximum; a maximum that misses a rank, starts
// from 0, or sums the ranks' maxima (any common shift cancels in exact arithmetic, so
// small logits pass; large ones overflow or underflow exp).
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "ops.h"
#include "tp.h"

void tp_crossentropy_forward(GPT *g, float *losses, const float *logits, int N) {
    (void)g; (void)losses; (void)logits; (void)N;
    // TODO(exercise)
}

void tp_crossentropy_backward(GPT *g, float *dlogits, const float *logits, float dloss, int N) {
    (void)g; (void)dlogits; (void)logits; (void)dloss; (void)N;
    // TODO(exercise): from the m and sumexp the forward kept; no communication.
}
