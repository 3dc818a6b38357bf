// exercises/sched_1f1b.c — YOUR 1F1B schedule (part 1).   make grade-5 PART=one_f_one_b
//
// Read ../schedule.h (what a schedule is, the helpers) and ../schedule.c (the
// GPipe generator: the simplest example of filling one). Fill S->acts for every
// rank s = 0..S->p-1 with PipeDream-Flush's order for S->m micro-batches (one
// chunk per rank: chunk 0):
//
//   warm-up    min(p - s - 1, m) forwards: the micro-batches that fill the
//              stages after this one;
//   steady     one forward (the next micro-batch), then one backward (the oldest
//              not yet backwarded), until every micro-batch has had its forward;
//   cool-down  the backwards left, oldest first.
//
// pp_forward_with(S, s, mb, 0) and pp_backward_with(S, s, mb, 0) append a compute
// action with the receive before it and the send after it. The checker
// (../checker.c) must accept your schedule for every p and m, also when each rank's
// messages run in the order posted (as over NCCL), and rank s must hold exactly
// min(p - s, m) micro-batches at its peak (sched_max_in_flight): fewer means a
// warm-up too short, and the stages after it idle.
//
// ../sched_zb.c builds the zero-bubble schedule ZB-H1 from yours (each backward
// split in two, its weight pass deferred), so this part's checks include ZB-H1's
// (min(p, m) in flight), and the engine's zb-h1 runs run your order too.
#include "schedule.h"

void sched_1f1b(PPSchedule *S) {
    (void)S;
    // TODO(exercise)
}
