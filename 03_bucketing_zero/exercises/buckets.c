// exercises/buckets.c — YOUR gradient buckets (part 1). `make grade-3 PART=buckets`.
// Stuck? make hint-3 PART=buckets   (tier 1 a nudge; TIER=2, 3 more)
//
// Read the lesson's §1, ../sharded.h (the Sharded state, the Buckets arrays) and
// ../buckets.c's neighbours: grad_reduce.c launches and retires a bucket
// (bucket_launch, bucket_retire); sharded.c calls the functions below. The model's
// layer groups are 0 (wte, wpe), 1..L (the blocks), L+1 (ln_f); group k's flat
// elements are [g->group_offset[k], g->group_offset[k+1]). Backward completes them in
// the order L+1, L, ..., 1, 0 — but group 0 is special: the LM head, tied to wte,
// writes into its gradient at the very start of backward, and the embedding adds the
// rest at the very end.
//
// What the grader checks (tests/test_sharded.c and tests/stage03.sh, sharded.*): the
// assignment itself (consecutive groups, none over the cap, none closed while the
// next group fits, buckets per unit); bucketed DDP and ZeRO equal to stage 02's DDP
// at 1-5 ranks, with several bucket sizes and gradient accumulation; the memory
// ledger, and ZeRO-2's buckets in flight bounded (8 layers, a bucket a group); the
// bytes sent.
#include "check.h"
#include "sharded.h"


// buckets_assign: fill s->buckets' n, of_group[grp], lo[b], hi[b] and groups[b], so that
// - bucket 0 is the one backward completes first, and the buckets are numbered in the
//   order backward completes them;
// - every bucket is a run of consecutive groups, [lo, hi) exactly their elements;
// - a bucket holds at most s->cfg.bucket_bytes (4 bytes per element), unless it is one
//   group larger than the cap (a group cannot be split); a bucket may reach the cap
//   exactly; and no bucket is closed while the next group would still fit in it.
//   bucket_bytes == 0 means one bucket per group;
// - FSDP and HSDP (s->plan.per_unit) reduce a unit at a time: there a bucket is
//   exactly the groups of one unit (s->plan.unit_of), whatever the cap.
// Pitfalls: a running size that outlives its bucket; a cap tested before the group is
// counted, or with < where it may be reached.
void buckets_assign(Sharded *s) {
    (void)s;
    // TODO(exercise)
}

// buckets_on_grad_ready, the gradient hook (arg is the Sharded): backward has just
// completed `group`'s gradients. A bucket is launched (bucket_launch(s, b)) at the
// moment its LAST group is complete, once per backward, and only when s->armed (the
// last micro-batch of the step). s->buckets.pending[b] counts the groups of b still
// missing; sharded.c resets it before every micro-batch.
// Pitfall: a launch before the bucket is complete lets the comm thread read gradients
// backward is still writing (the values come out right on a quiet machine).
void buckets_on_grad_ready(GPT *g, int group, void *arg) {
    (void)g; (void)group; (void)arg;
    // TODO(exercise)
}

// grads_need: called before backward writes `group`'s gradients. Only the strategies
// without a flat gradient buffer (sharded_grads(s): zero2/3, fsdp, hsdp) have work
// here. On return:
// - group's bucket b has a buffer, s->buckets.buf[b] (pool_get(s, elements, 1): zeroed,
//   since backward ADDS into gradients), and every group k of b has s->g->ggrads[k]
//   pointing at its place in it (element g->group_offset[k] of the flat layout is at
//   buf + (g->group_offset[k] - lo[b]));
// - a bucket keeps the buffer it got until it is retired: one that is being filled is
//   never given a new one, and never retired (only a launched bucket, task[q] != NULL,
//   may be; launched[q] stays set after a retire, task[q] does not);
// - memory is bounded: once a new buffer is made, fewer than MAX_IN_FLIGHT launched
//   buckets remain held (retired: bucket_retire). A bucket whose collectives are done
//   (coll_test(s->ac, ...) of task[q], and of replica[q] where HSDP launched one)
//   costs nothing to retire; one still running costs a wait, which the grader counts:
//   wait only when the bound forces it, and on the bucket that should finish first.
// Retiring is local work (a copy and a free); it may happen at different moments on
// different ranks. Starting a collective here could not.
// Pitfalls: which bucket gets a buffer before any of its groups is complete, and must
// keep it until the end of backward? A bound off by one (a whole layer more memory);
// a bound never enforced (ZeRO-2 then holds every bucket at once).
void grads_need(Sharded *s, int group) {
    (void)s; (void)group;
    // TODO(exercise)
}
