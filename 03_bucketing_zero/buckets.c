// buckets.c — gradient buckets, filled in the order backward completes them.
//
// One all-reduce per step (stage 02) must wait for the whole backward pass. But
// backward produces the gradients of the last layer group first: if those are
// sent while the earlier groups are still being computed, the communication
// hides behind the compute. So the groups are packed into buckets in backward
// order (PyTorch's DDP does the same, 25 MB by default), and each bucket is
// launched the moment its last group's gradients are complete.
//
// Why not one collective per group: every collective pays a latency (α in the
// α-β model, and a synchronisation of all ranks), so tiny buckets cost more than
// they hide. Why not one bucket: nothing would overlap. The sweep in
// run_stage.sh measures the trade.
//
// ZeRO-2 and beyond keep no flat gradient buffer: a bucket's buffer is made when
// backward first writes into it (grads_need) and freed when its reduce-scatter is
// done (grad_reduce.c). At most MAX_IN_FLIGHT launched buckets are kept, so a
// rank's gradient memory is its shard plus those and the ones being filled.
#include "check.h"
#include "sharded.h"


void buckets_assign(Sharded *s) {
    Buckets *B = &s->buckets;
    const GPT *g = s->g;
    const ShardPlan *P = &s->plan;
    int b = -1;
    size_t bytes = 0;
    for (int grp = P->groups - 1; grp >= 0; grp--) {  // backward order: L+1 first
        size_t size = (g->group_offset[grp + 1] - g->group_offset[grp]) * sizeof(float);
        int join;
        if (P->per_unit)  // FSDP reduces a unit's gradients together: bucket = unit
            join = b >= 0 && P->unit_of[grp] == P->unit_of[grp + 1];
        else
            join = b >= 0 && s->cfg.bucket_bytes > 0 && bytes + size <= s->cfg.bucket_bytes;
        if (!join) {
            b++;
            bytes = 0;
            B->hi[b] = g->group_offset[grp + 1];
            B->groups[b] = 0;
        }
        B->of_group[grp] = b;
        B->lo[b] = g->group_offset[grp];  // the groups are consecutive: lo moves down
        B->groups[b]++;
        bytes += size;
    }
    B->n = b + 1;
}

void buckets_on_grad_ready(GPT *g, int group, void *arg) {
    (void)g;
    Sharded *s = arg;
    Buckets *B = &s->buckets;
    int b = B->of_group[group];
    CHECK(B->pending[b] > 0, "group %d completed twice in one backward pass", group);
    // Launch only when the bucket's LAST group is done: its buffer is then final.
    // (The tied embedding's group 0 completes last of all: the LM head wrote the
    // first half of its gradient at the start of backward.)
    if (--B->pending[b] == 0 && s->armed) bucket_launch(s, b);
}

void grads_need(Sharded *s, int group) {
    Buckets *B = &s->buckets;
    int b = B->of_group[group];
    // The tied wte: the LM head writes group 0's gradient first, the embedding adds
    // the rest at the very end. The buffer made for the head must be the one the
    // embedding adds into: made once, never cleared in between.
    if (!sharded_grads(s) || B->buf[b]) return;
    // Room first: retire what has finished, then the oldest until few are in flight.
    int in_flight = 0;
    // (Retiring is local work only: a copy and a free. It may happen at different
    // moments on different ranks; starting a collective there could not.)
    for (int q = 0; q < B->n; q++)
        if (B->task[q] && coll_test(s->ac, B->task[q]) &&
            (!B->replica[q] || coll_test(s->ac, B->replica[q])))
            bucket_retire(s, q);
    for (int q = 0; q < B->n; q++) in_flight += B->task[q] != NULL;
    for (int q = 0; q < B->n && in_flight >= MAX_IN_FLIGHT; q++)
        if (B->task[q]) {
            bucket_retire(s, q);
            in_flight--;
        }
    B->buf[b] = pool_get(s, B->hi[b] - B->lo[b], 1);  // zeroed: backward adds into it
    for (int grp = 0; grp < s->plan.groups; grp++)
        if (B->of_group[grp] == b)
            s->g->ggrads[grp] = B->buf[b] + (s->g->group_offset[grp] - B->lo[b]);
}
