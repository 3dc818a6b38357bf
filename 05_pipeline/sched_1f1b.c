// sched_1f1b.c — one forward, one backward (PipeDream-Flush; Narayanan et al.
// 2021, the default of Megatron-LM).
//
// GPipe's bubble comes from the pipeline filling and draining; 1F1B does not
// shrink that bubble, it bounds the memory: as soon as a rank could run a
// backward, it does, so it never holds more than the micro-batches still on
// their way down and back up the stages after it.
//
//   warm-up    rank s runs min(p - s - 1, m) forwards: the micro-batches that
//              fill the stages after it;
//   steady     then forward one, backward one (the oldest), until every
//              micro-batch has had its forward;
//   cool-down  the backwards left.
//
// Rank s therefore holds at most min(p - s, m) micro-batches' activations.
#include "schedule.h"

void sched_1f1b(PPSchedule *S) {
    int p = S->p, m = S->m;
    for (int s = 0; s < p; s++) {
        int warmup = p - s - 1 < m ? p - s - 1 : m;
        for (int i = 0; i < warmup; i++) pp_forward_with(S, s, i, 0);
        for (int i = 0; i < m - warmup; i++) {
            pp_forward_with(S, s, warmup + i, 0);
            pp_backward_with(S, s, i, 0);
        }
        for (int i = m - warmup; i < m; i++) pp_backward_with(S, s, i, 0);
    }
}
