// sched_zb.c — a zero-bubble schedule in the manner of ZB-H1 (Qi et al. 2023,
// "Zero Bubble Pipeline Parallelism", §3.1).
//
// 1F1B's backward does two things: the gradient at the stage's input, which the
// previous stage waits for, and the gradients of the stage's weights, which
// nobody waits for. Split them (B and W; common/model.h's two-pass backward):
// each stage sends its input gradient after B alone, so the gradients travel back
// up the pipeline a W sooner at every stage, and the W passes fill time the stage
// would otherwise spend waiting.
//
// This generator keeps 1F1B's warm-up and its bound on memory (rank s never
// holds more than min(p - s, m) micro-batches: a micro-batch's activations stay
// until its W): steady state F, B, W; in the cool-down, where no forward needs
// the memory, each W waits one B, running while the next gradient is on its way.
#include "schedule.h"

void sched_zb_h1(PPSchedule *S) {
    int p = S->p, m = S->m;
    for (int s = 0; s < p; s++) {
        int warmup = p - s - 1 < m ? p - s - 1 : m;
        for (int i = 0; i < warmup; i++) pp_forward_with(S, s, i, 0);
        for (int i = 0; i < m - warmup; i++) {
            pp_forward_with(S, s, warmup + i, 0);
            pp_backward_input_with(S, s, i, 0);
            pp_push(S, s, PP_BACKWARD_WEIGHT, i, 0);
        }
        for (int i = m - warmup; i < m; i++) {
            pp_backward_input_with(S, s, i, 0);
            if (i > m - warmup) pp_push(S, s, PP_BACKWARD_WEIGHT, i - 1, 0);
        }
        if (warmup > 0) pp_push(S, s, PP_BACKWARD_WEIGHT, m - 1, 0);
    }
}
