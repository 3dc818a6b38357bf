// exercises/sched_interleaved.c — YOUR interleaved 1F1B (part 3).
//   make grade-5 PART=interleaved
// Stuck? make hint-5 PART=interleaved   (tier 1 a nudge; TIER=2, 3 more)
//
// Read the lesson's §3 (Megatron-LM's order, the warm-up, why a steady step's
// messages go in one batch) and its "Over NCCL" part, and ../schedule.h.
//
// Rank s holds v = S->v model chunks: virtual stages s, s + p, ..., s + (v-1)p
// (pp_vstage). Every rank walks the m·v (micro-batch, chunk) forwards in one fixed
// order — micro-batches in groups of p, each group through chunk 0, then chunk 1, ...
// — and the backwards in the same order with the chunks reversed. Which (micro-batch,
// chunk) is number k of each walk is yours to work out.
//
// THE CONTRACT of sched_interleaved(S): fill S->acts for every rank with Megatron-LM's
// interleaved 1F1B:
//   - rank s warms up with (p - s - 1)·2 + (v - 1)·p forwards (at most m·v; all of
//     them when m = p, as Megatron-LM does, though the formula there is sound too
//     and accepted: the same bubble, fewer activations), then alternates one forward (the next of
//     the walk) and one backward (the next of the backward walk), then runs the
//     backwards left;
//   - a steady step (one forward, one backward) posts its messages as Megatron-LM
//     does, in one batch: its receives first (the forward's input unless its chunk is
//     the first virtual stage, the backward's gradient unless its chunk is the last),
//     then the forward and the backward, then its sends (the forward's output, the
//     backward's input gradient). Warm-up and cool-down post each message at its
//     compute;
//   - the checker accepts every schedule sched_build lets through (p >= 2, v >= 2, p
//     divides m), and so does its NCCL simulation (sched_check_serialized), with the
//     micro-batches in flight that warm-up gives (no more).
//
// What you may use: pp_forward_with / pp_backward_with (they know which chunks are the
// first and last virtual stages), pp_push(S, s, op, mb, chunk), pp_is_first,
// pp_is_last.
//
// What the grader checks (tests/test_pp.c --checker, tests/stage05.sh): the checker
// and the serialized simulation; message buffers bounded; interleaved 1F1B against one
// process on 2-4 stages, with messages larger than the channel, on the 8-rank mesh;
// the driver.
// Pitfalls: a steady step that posts each message at its compute, as 1F1B does (sound,
// the same numbers over our transports, a deadlock over NCCL once m > p); a warm-up
// longer than Megatron-LM's (sound, more activations held).
#include "schedule.h"

void sched_interleaved(PPSchedule *S) {
    (void)S;
    // TODO(exercise)
}
