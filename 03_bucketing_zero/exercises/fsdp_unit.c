// exercises/fsdp_unit.c — YOUR FSDP unit (part 3). `make grade-3 PART=fsdp_unit`.
//
// Stage 3 (zero3, fsdp, hsdp) keeps only a shard of the weights. Before the model
// reads a group's weights, its unit must be whole; after its last use, freed.
// sharded.c calls fsdp_on_use at every use the model announces, numbered `at`
// within the micro-batch, in this order (s->use_seq[at] is the unit whose weights
// use `at` needs, -1 for "gradients only"):
//
//   forward   0, 1, ..., L, L+1, 0        (the LM head reuses wte: group 0)
//   backward  L+1, 0, L, ..., 1, then -1  (the embedding's backward needs no weights)
//
// s->use_op[at] is the first use of the op that use `at` belongs to: the head
// announces two groups (L+1 and 0) before it computes, so both must be whole then.
// s->fwd_uses is the number of forward uses; s->n_use the total.
//
// The tools (units.c): unit_gather_start(s, u) allocates unit u and starts its
// all-gather; unit_gather_wait(s, u) waits and points the unit's groups at it;
// unit_free(s, u) frees it (waiting first if it is still gathering).
// s->unit_state[u] is UNIT_FREE, UNIT_GATHERING or UNIT_READY.
#include "check.h"
#include "sharded.h"

// 1. Free every unit v (other than this use's) that is not FREE and that no use from
//    s->use_op[at] up to the horizon needs. The horizon: with s->cfg.reshard and
//    `at` in forward (at < s->fwd_uses), s->fwd_uses (a unit is freed after its
//    forward and gathered again for its backward; the head's two uses are the last
//    of forward, so its units, which backward reuses at once, are kept into it);
//    otherwise s->n_use (kept until its last use).
// 2. If this use needs weights (need & GPT_NEED_PARAMS; u = s->plan.unit_of[group]),
//    make unit u whole: start its gather if it is FREE, wait if it is GATHERING.
// 3. With s->cfg.prefetch, start the gather of the next unit the model will need
//    (the first use after `at` whose unit is >= 0 and not u), if it is FREE.
void fsdp_on_use(Sharded *s, int group, int need, int at) {
    (void)s; (void)group; (void)need; (void)at;
    // TODO(exercise)
}
