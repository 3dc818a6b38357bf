// exercises/sched_interleaved.c — YOUR interleaved 1F1B (part 3).
//   make grade-5 PART=interleaved
//
// Rank s holds v = S->v model chunks: virtual stages s, s + p, ..., s + (v-1)p
// (pp_vstage). Every rank walks the m·v (micro-batch, chunk) forwards in one
// fixed order — micro-batches in groups of p, each group through chunk 0, then
// chunk 1, ... — and the backwards in the same order with the chunks reversed:
//
//   forward number k:   chunk (k mod pv) / p,           micro-batch (k / pv)·p + k mod p
//   backward number k:  chunk v - 1 - (k mod pv) / p,   the same micro-batch
//
// Rank s warms up with (p - s - 1)·2 + (v - 1)·p forwards (at most m·v; all of
// them when m = p, as Megatron-LM does: the same bubble, a little more in flight),
// then alternates forward number warmup + i and backward number
// i, then runs the backwards left. Use pp_forward_with / pp_backward_with (they
// know which chunks are the first and last virtual stages) for the warm-up and
// the cool-down. A steady step sends its messages as Megatron-LM does, in one
// batch: its receives (the forward's input unless its chunk is the first virtual
// stage, the backward's gradient unless its chunk is the last) first, then the
// forward and the backward, then its sends (the forward's output, the backward's
// input gradient) — pp_push each. Posting them at each compute, as
// pp_forward_with does, is sound, but over NCCL (which runs each rank's messages
// in the order posted) it deadlocks once m > p. The checker must accept every
// schedule sched_build lets through (p >= 2, v >= 2, p divides m), and so must
// its NCCL simulation (sched_check_serialized).
#include "schedule.h"

void sched_interleaved(PPSchedule *S) {
    (void)S;
    // TODO(exercise)
}
