// exercises/buckets.c — YOUR gradient buckets (part 1). `make grade-3 PART=buckets`.
//
// Read ../sharded.h (the Sharded state, the Buckets arrays) and ../buckets.c's
// neighbours: grad_reduce.c launches and retires a bucket; sharded.c calls the
// functions below. The model's layer groups are 0 (wte, wpe), 1..L (the blocks),
// L+1 (ln_f); group k's flat elements are [g->group_offset[k], g->group_offset[k+1]).
// Backward completes them in the order L+1, L, ..., 1, 0.
#include "check.h"
#include "sharded.h"

#define MAX_IN_FLIGHT 2

// Fill s->buckets: of_group[grp], lo[b], hi[b], groups[b], and n.
// - Walk the groups in backward order (grp = P->groups - 1 down to 0): bucket 0
//   is the one backward completes first.
// - Add the group to the current bucket if the bucket's bytes plus the group's
//   (4 bytes per element) stay within s->cfg.bucket_bytes; otherwise start a new
//   bucket. bucket_bytes == 0 means one bucket per group. A group bigger than the
//   cap gets a bucket of its own (it cannot be split: buckets are whole groups).
// - FSDP and HSDP (s->plan.per_unit) reduce a unit at a time: a group joins the
//   current bucket exactly when it is in the same unit (P->unit_of) as the group
//   before it.
// - The groups of a bucket are consecutive, so its range is [lo, hi): hi from its
//   first group (the highest), lo from its last.
void buckets_assign(Sharded *s) {
    (void)s;
    // TODO(exercise)
}

// The gradient hook: backward has just completed `group`'s gradients.
// - Count it off its bucket (s->buckets.pending[b] counts the groups still missing;
//   sharded.c resets it before every micro-batch).
// - When the bucket's last group is in, and s->armed, launch it: bucket_launch(s, b).
//   Not before: the comm thread would read gradients that are still being written.
// - Think about group 0: the LM head (tied to wte) writes into it at the very start
//   of backward, and the embedding adds the rest at the very end. When is it done?
void buckets_on_grad_ready(GPT *g, int group, void *arg) {
    (void)g; (void)group; (void)arg;
    // TODO(exercise)
}

// Before backward writes `group`'s gradients. Only zero2/3, fsdp and hsdp keep no
// flat gradient buffer (sharded_grads(s)); for them:
// - if the group's bucket has no buffer (s->buckets.buf[b] == NULL), make one:
//   pool_get(s, elements, 1) (a zeroed buffer from the engine's pool: backward adds
//   into gradients, so they must start at zero), and
//   point every group k of the bucket at its place in it:
//   s->g->ggrads[k] = buf + (g->group_offset[k] - lo[b]);
// - but first make room: a launched bucket (task[q] != NULL) that is done
//   (coll_test of task[q], and of replica[q] when HSDP launched one) can be retired
//   (bucket_retire); and while MAX_IN_FLIGHT or more are in flight (task[q] !=
//   NULL: not launched[q], which stays set after a bucket is retired), retire the
//   oldest of them (lowest q with task[q] != NULL).
// - A bucket that already has a buffer is being filled: keep it. (Which bucket
//   gets a buffer before any of its groups is complete?)
void grads_need(Sharded *s, int group) {
    (void)s; (void)group;
    // TODO(exercise)
}
