// exercises/zero_step.c — YOUR ZeRO step (part 2). `make grade-3 PART=zero_step`.
//
// After the backward passes of a step, for zero1, zero2, zero3, fsdp and hsdp
// (DDP's step is stage 02's, in sharded.c). Read ../sharded.h first: s->opt[i] are
// this rank's optimizer ranges (one for ZeRO: [r*S, (r+1)*S) cut at Ψ; one per unit
// for FSDP), and range i starts at element at(i) of the shard buffers:
// at(i) = s->plan.per_unit ? s->plan.unit_base[i] : 0.
#include <math.h>

#include "check.h"
#include "ops.h"
#include "sharded.h"

// Returns the global gradient norm.
// 1. Finish the gradients: buckets_finish(s) launches every bucket the hook did
//    not, in order, and retires them all. This rank's blocks now hold the sum over the ranks: in the flat
//    buffer for zero1 (g->grads + s->opt[0].begin), in s->gshard for the others.
// 2. The mean: scale each owned range by 1/N, N = s->world->size
//    (ctx->ops->scale(ctx, ptr, factor, elements)).
//    The runs with the naive collectives are checked against stage 02's DDP bit for
//    bit, so the order of operations must be DDP's: the sum over the ranks, then
//    the gradients divided by N, then the norm of the divided gradients (a norm
//    taken first and divided after is equal to rounding, not to the bit).
// 3. The global norm: a rank holds only its shard. sharded_sum_squares(s, grads)
//    gives this rank's sum of squares (a double); the norm is the square root of
//    the sum over the ranks of s->dp: async_allreduce(s->ac, s->dp, &x, 1, DT_F64,
//    ALGO_NAIVE, "norm"). (Why not the local shard's norm? Clipping would then
//    scale each shard by a different factor.)
// 4. AdamW on each range i: adamw_step_at(&s->opt[i], g, weights, grads + at(i),
//    norm), grads as in step 2 and the weights s->pshard + at(i) when the strategy
//    shards them (s->pshard != NULL), else g->params + s->opt[i].begin. (For FSDP,
//    at(i) is not 0 from the second unit on.)
// 5. zero1 and zero2 keep the whole weights: weights_all_gather(s) all-gathers them
//    over the partition's blocks (units.c: all_gather_start on g->params over
//    plan_blocks(&s->plan, 0, g->n_params, ...), then coll_wait) and, in a mixed
//    recipe, sends them as bf16 (stage 06's --param-comm: half the bytes). Call it
//    rather than writing the gather again. Stage 3 gathers before use.
double sharded_step(Sharded *s) {
    (void)s;
    // TODO(exercise)
    return 0;
}
