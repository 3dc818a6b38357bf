// sched_interleaved.c — interleaved 1F1B (Narayanan et al. 2021, §2.2).
//
// Each rank holds v model chunks instead of one contiguous block: rank s runs
// virtual stages s, s + p, ..., s + (v-1)p. A micro-batch crosses every rank v
// times, each time through a v-times shorter stage, so the pipeline fills and
// drains v times faster: the bubble shrinks to (p-1)/(v·m), for v times the
// point-to-point messages.
//
// Every rank walks the m·v (micro-batch, chunk) forwards in one fixed order:
// micro-batches in groups of p, each group through chunk 0, then chunk 1, ...
//   forward number k:  chunk (k mod pv) / p,  micro-batch (k / pv)·p + k mod p
// and the backwards in the same order with the chunks reversed. Rank s warms up
// with (p - s - 1)·2 + (v - 1)·p forwards (all m·v when m = p), then alternates
// one forward, one backward, then cools down: Megatron-LM's order.
//
// The messages of a steady step go as Megatron-LM sends them, in one batch: the
// step's two receives (the forward's input, the backward's gradient) before its
// forward and backward, its two sends (the forward's output, the backward's
// input gradient) after both. Over NCCL, which runs each rank's messages in the
// order posted, that is what lets the step finish: sending each output as soon as
// it exists, and posting each receive just before its compute, deadlocks once
// m > p (schedule.h's sched_check_serialized finds it). The price, one backward
// of delay on each activation, is what the warm-up's factor 2 absorbs: the
// bubble stays (p-1)/(v·m) (build/pp_sim).
#include "schedule.h"

static void kth(const PPSchedule *S, int k, int backward, int *mb, int *chunk) {
    int p = S->p, group = p * S->v;
    *chunk = (k % group) / p;
    if (backward) *chunk = S->v - 1 - *chunk;
    *mb = (k / group) * p + k % p;
}

void sched_interleaved(PPSchedule *S) {
    int p = S->p, total = S->m * S->v, mb, c;
    for (int s = 0; s < p; s++) {
        int warmup = S->m == p ? total : (p - s - 1) * 2 + (S->v - 1) * p;
        if (warmup > total) warmup = total;
        for (int k = 0; k < warmup; k++) {
            kth(S, k, 0, &mb, &c);
            pp_forward_with(S, s, mb, c);
        }
        for (int i = 0; i < total - warmup; i++) {  // a steady step, its messages batched
            int bmb, bc;
            kth(S, warmup + i, 0, &mb, &c);
            kth(S, i, 1, &bmb, &bc);
            if (!pp_is_first(S, s, c)) pp_push(S, s, PP_RECV_ACT, mb, c);
            if (!pp_is_last(S, s, bc)) pp_push(S, s, PP_RECV_GRAD, bmb, bc);
            pp_push(S, s, PP_FORWARD, mb, c);
            pp_push(S, s, PP_BACKWARD, bmb, bc);
            if (!pp_is_last(S, s, c)) pp_push(S, s, PP_SEND_ACT, mb, c);
            if (!pp_is_first(S, s, bc)) pp_push(S, s, PP_SEND_GRAD, bmb, bc);
        }
        for (int k = total - warmup; k < total; k++) {
            kth(S, k, 1, &mb, &c);
            pp_backward_with(S, s, mb, c);
        }
    }
}
