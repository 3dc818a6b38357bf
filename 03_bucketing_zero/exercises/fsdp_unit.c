// exercises/fsdp_unit.c — YOUR FSDP unit (part 3). `make grade-3 PART=fsdp_unit`.
// Stuck? make hint-3 PART=fsdp_unit   (tier 1 a nudge; TIER=2, 3 more)
//
// Stage 3 (zero3, fsdp, hsdp) keeps only a shard of the weights. Before the model
// reads a group's weights, its unit must be whole; when nothing needs it soon, freed.
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
// What you may use (units.c): unit_gather_start(s, u) allocates unit u and starts its
// all-gather; unit_gather_wait(s, u) waits and points the unit's groups at it;
// unit_free(s, u) frees it (waiting first if it is still gathering).
// s->unit_state[u] is UNIT_FREE, UNIT_GATHERING or UNIT_READY.
#include "check.h"
#include "sharded.h"

// fsdp_on_use(s, group, need, at): use `at` needs the weights of `group` when
// need & GPT_NEED_PARAMS (its unit u = s->plan.unit_of[group]); otherwise none.
// On return:
// - unit u is READY (whole) when the use needs weights;
// - every other unit that is not FREE is needed by some use from s->use_op[at] up to
//   the horizon: with s->cfg.reshard and `at` in forward (at < s->fwd_uses), the end
//   of forward (a unit is freed after its forward and gathered again for its
//   backward); otherwise the end of the micro-batch (kept until its last use). Every
//   other unit is FREE;
// - with s->cfg.prefetch, the next unit the model will ask for after this use (the
//   unit of the first later use that needs weights and is not u) is at least
//   GATHERING: it travels while this unit computes. Without prefetch nothing is
//   gathered ahead (that is the memory --no-prefetch saves).
// Memory: at no moment may a unit that is no longer needed still be held while
// another is being gathered (the grader compares the peak with and without prefetch).
// What the grader checks (tests/stage03.sh, sharded.*): ZeRO-3, FSDP (units of 1, 2 and
// all groups, prefetch, reshard) and HSDP equal to DDP; memory at the peak, and a unit
// less without prefetch; the order in which units start travelling; the bytes (3Ψ with
// resharding, ZeRO-2's without).
// Pitfalls: counting from `at` rather than from the start of its op (the head's two
// groups); a unit used before its all-gather has finished; ignoring --no-reshard or
// --no-prefetch; a prefetch that looks at the next use only (with units of several
// groups that is mostly this unit again).
void fsdp_on_use(Sharded *s, int group, int need, int at) {
    (void)s; (void)group; (void)need; (void)at;
    // TODO(exercise)
}
