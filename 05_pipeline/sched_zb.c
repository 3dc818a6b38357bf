// sched_zb.c — the zero-bubble schedule ZB-H1 (Qi et al. 2023,
// "Zero Bubble Pipeline Parallelism", §3.1).
//
// 1F1B's backward does two things: the gradient at the stage's input, which the
// previous stage waits for, and the gradients of the stage's weights, which
// nobody waits for. Split them (B and W; common/model.h's two-pass backward):
// each stage sends its input gradient after B alone, so the gradients travel back
// up the pipeline a W sooner at every stage, and the W passes fill time the stage
// would otherwise spend waiting.
//
// ZB-H1 is 1F1B's order with the backward split, and with the W passes moved to
// where 1F1B idles. In 1F1B rank s waits s backwards at the end of a step (the last
// gradients coming back down the pipeline after its own are done): so on rank s
// each W runs s micro-batches after its B (micro-batch i - s's W after micro-batch
// i's B), and the last s W passes fill that drain. Its B passes, no longer followed
// by their own W, send the gradients back a W sooner, and the ranks before it start
// their cool-down sooner. With tF = tB = tW and m >= p the step is 3m + p - 1 time
// units against 1F1B's 3m + 3(p - 1): the bubble (p-1)(tF+tB-tW) / (m(tF+tB+tW)),
// a third of 1F1B's (build/pp_sim reproduces it exactly while tW <= tF and tW <= tB:
// a longer W outgrows the idle time it is moved into; with m < p there are not
// enough W passes to fill it).
//
// The price is memory: a micro-batch's activations stay until its W, so rank s
// holds up to p - s + s = p micro-batches (min(p, m)), as many as 1F1B's first
// stage, plus the output gradients each keeps from its B to its W: a higher peak
// than 1F1B's (05_pipeline/README.md §4 has the measured numbers).
#include "schedule.h"

void sched_zb_h1(PPSchedule *S) {
    int p = S->p, m = S->m;
    for (int s = 0; s < p; s++) {
        int warmup = p - s - 1 < m ? p - s - 1 : m;
        int next_w = 0;  // the oldest micro-batch whose W is still to come
        for (int i = 0; i < warmup; i++) pp_forward_with(S, s, i, 0);
        for (int i = 0; i < m; i++) {
            if (warmup + i < m) pp_forward_with(S, s, warmup + i, 0);
            pp_backward_input_with(S, s, i, 0);
            // W of micro-batch i - s: rank s keeps s of them back for the end
            if (i - next_w >= s) pp_push(S, s, PP_BACKWARD_WEIGHT, next_w++, 0);
        }
        while (next_w < m) pp_push(S, s, PP_BACKWARD_WEIGHT, next_w++, 0);
    }
}
