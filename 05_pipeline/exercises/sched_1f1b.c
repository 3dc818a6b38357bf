// exercises/sched_1f1b.c — YOUR 1F1B schedule (part 1).   make grade-5 PART=one_f_one_b
// Stuck? make hint-5 PART=one_f_one_b   (tier 1 a nudge; TIER=2, 3 more)
//
// Read the lesson's §2, ../schedule.h (what a schedule is, the helpers) and
// ../schedule.c (the GPipe generator: the simplest example of filling one).
//
// THE CONTRACT of sched_1f1b(S): fill S->acts for every rank s = 0..S->p-1 with
// PipeDream-Flush's order for S->m micro-batches (one chunk per rank: chunk 0), the
// lesson's 1F1B: each rank starts a backward as soon as it can and then alternates
// one forward, one backward, each backward the oldest micro-batch not yet backwarded,
// so that
//   - the schedule is sound for every p and m (../checker.c, sched_check: every
//     micro-batch forwarded and backwarded once, in dependency order, sends matching
//     receives, no cycle of waits);
//   - it also finishes when each rank's messages run in the order they were posted, as
//     over NCCL (sched_check_serialized);
//   - rank s holds EXACTLY min(p - s, m) micro-batches at its peak
//     (sched_max_in_flight): more is GPipe's memory, fewer means the stages after it
//     idle while it waits.
//
// What you may use: pp_forward_with(S, s, mb, 0) and pp_backward_with(S, s, mb, 0)
// append a compute action with its receive just before it and its send just after.
//
// What the grader checks (tests/test_pp.c --checker, tests/stage05.sh): every schedule
// your generator makes for p 1-4, m 1-8 passes the checker with the in-flight counts
// above, and for p 1-8, m 1-16 finishes in posting order; the pipeline's message
// buffers stay bounded. ../sched_zb.c builds the zero-bubble schedule ZB-H1 from yours
// (each backward split in two, its weight pass deferred), so these checks include
// ZB-H1's (min(p, m) in flight), and the engine's zb-h1 runs run your order too.
// Pitfalls: a warm-up one short (still sound; the peak shows it); more micro-batches
// than there are (m < p); receives posted long before their compute (sound with
// independent messages, a deadlock in posting order).
#include "schedule.h"

void sched_1f1b(PPSchedule *S) {
    (void)S;
    // TODO(exercise)
}
