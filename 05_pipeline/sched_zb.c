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
// ZB-H1 is not a new order but 1F1B's, rewritten. So this file does not write
// one: it asks sched_1f1b.c for every rank's 1F1B actions (your schedule, when the
// exercises are built in: a mistake there shows here too) and changes two things:
//   - each backward becomes its input-gradient pass B, in the same place, with the
//     same receive before it and send after it;
//   - each W moves to where 1F1B idles. In 1F1B rank s waits s backwards at the end
//     of a step (the last gradients coming back down the pipeline after its own
//     are done): so on rank s each W runs s backwards after its B (micro-batch
//     i - s's W after micro-batch i's B, once that B's gradient is sent), and the
//     last s W passes fill that drain.
// Its B passes, no longer followed by their own W, send the gradients back a W
// sooner, and the ranks before it start their cool-down sooner. With tF = tB = tW
// and m >= p the step is 3m + p - 1 time units against 1F1B's 3m + 3(p - 1): the
// bubble (p-1)(tF+tB-tW) / (m(tF+tB+tW)), a third of 1F1B's (build/pp_sim
// reproduces it exactly while tW <= tF and tW <= tB: a longer W outgrows the idle
// time it is moved into; with m < p there are not enough W passes to fill it).
//
// The price is memory: a micro-batch's activations stay until its W, so rank s
// holds its 1F1B micro-batches plus the s whose W waits: min(p, m), as many as
// 1F1B's first stage, plus the output gradients each keeps from its B to its W: a
// higher peak than 1F1B's (05_pipeline/README.md §4 has the measured numbers).
#include "check.h"
#include "schedule.h"

// The first backward in rank s's list at or after action i (n[s] if none).
static int next_backward(const PPSchedule *F, int s, int i) {
    while (i < F->n[s] && F->acts[s][i].op != PP_BACKWARD) i++;
    return i;
}

// Rank s's actions of F (1F1B) into Z, each backward split. The W passes go in the
// order of their backwards, each s backwards behind: a queue, whose oldest entry
// runs once a B has sent its gradient (or, on the first stage, which sends none,
// once it is done) while more than s are held. Written as a queue rather than as
// "micro-batch i - s", no W can come before its B, whatever order F has: a
// mistake in F reaches the checker as the same mistake, not as a new one made here.
static void split_rank(PPSchedule *Z, const PPSchedule *F, int s) {
    int held = 0;                    // backwards split whose W is still to come
    int w = next_backward(F, s, 0);  // the oldest of them
    for (int i = 0; i < F->n[s]; i++) {
        PPAction a = F->acts[s][i];
        int backward = a.op == PP_BACKWARD;
        pp_push(Z, s, backward ? PP_BACKWARD_INPUT : a.op, a.mb, a.chunk);
        held += backward;
        int b_done = a.op == PP_SEND_GRAD || (backward && pp_is_first(F, s, a.chunk));
        if (b_done && held > s) {
            pp_push(Z, s, PP_BACKWARD_WEIGHT, F->acts[s][w].mb, F->acts[s][w].chunk);
            w = next_backward(F, s, w + 1);
            held--;
        }
    }
    for (; w < F->n[s]; w = next_backward(F, s, w + 1))  // the drain: the last s
        pp_push(Z, s, PP_BACKWARD_WEIGHT, F->acts[s][w].mb, F->acts[s][w].chunk);
}

void sched_zb_h1(PPSchedule *S) {
    char err[256];
    // The same layout sched_build has just let through for S, so 1F1B's too.
    PPSchedule *F = sched_build(SCHED_1F1B, S->p, S->m, S->v, err, sizeof err);
    CHECK(F, "zb-h1: %s", err);
    for (int s = 0; s < S->p; s++) split_rank(S, F, s);
    sched_free(F);
}
