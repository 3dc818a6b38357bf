// exercises/zero_step.c — YOUR ZeRO step (part 2). `make grade-3 PART=zero_step`.
// Stuck? make hint-3 PART=zero_step   (tier 1 a nudge; TIER=2, 3 more)
//
// After the backward passes of a step, for zero1, zero2, zero3, fsdp and hsdp (DDP's
// step is stage 02's, in sharded.c). Read the lesson's §2-3 and ../sharded.h first:
// s->opt[i] (i < s->n_opt) are this rank's optimizer ranges (one for ZeRO: [r*S,
// (r+1)*S) cut at Ψ; one per unit for FSDP), and range i starts at element at(i) of
// the shard buffers: at(i) = s->plan.per_unit ? s->plan.unit_base[i] : 0.
//
// Where the gradients are: while the step runs, the buckets the hook did not launch
// (no overlap, or not the last micro-batch) are still pending; once every bucket is
// finished, this rank's blocks hold the SUM over the ranks: in the flat buffer for
// zero1 (g->grads + s->opt[0].begin), in s->gshard for the others. The weights of a
// range: s->pshard + at(i) when the strategy shards them (s->pshard != NULL), else
// g->params + s->opt[i].begin.
//
// What you may use (in no particular order): adamw_step_at(&s->opt[i], g, weights,
// grads, norm) (optim.h); async_allreduce(s->ac, group, &x, 1, DT_F64, ALGO_NAIVE,
// "name"), after which x is the sum over the group; buckets_finish(s);
// ctx->ops->scale(ctx, ptr, factor, elements); sharded_sum_squares(s, grads) (this
// rank's sum of squares, a double); weights_all_gather(s) (units.c: the updated
// weights to every rank, in bf16 on the wire when the recipe allows it, stage 06's
// --param-comm).
#include <math.h>

#include "check.h"
#include "ops.h"
#include "sharded.h"

// sharded_step: returns the global gradient norm, the norm of the mean gradient over
// ALL the model's elements (the same number on every rank), after it has
// - made this rank's gradient blocks the MEAN over all s->world->size ranks (HSDP
//   too: its replicas are ranks of the mean);
// - taken AdamW's step on every range this rank owns, clipped by that global norm;
// - for zero1 and zero2, which keep the whole weights, left every rank with the whole
//   updated weights (stage 3 keeps only the shard: its forward gathers what it uses).
// Bit for bit: the runs with the naive collectives are compared with stage 02's DDP
// to the bit, so the order of operations must be DDP's: the sum over the ranks, then
// the division by N, then the norm of the divided gradients (a norm taken first and
// divided after is equal to rounding, not to the bit).
// What the grader checks (tests/stage03.sh, sharded.*): ZeRO-1/2 (and, with part 3,
// ZeRO-3, FSDP, HSDP) equal to DDP at 1-5 ranks, ring and naive, with accumulation;
// HSDP's gradient norm every step; memory = the stage-01 calculator; the bytes sent
// (a mixed-bf16 run sends its weights as bf16).
// Pitfalls: a norm or a mean over the wrong set of ranks. Which ranks hold different
// shards of the gradient, and which hold the same one (HSDP has both)? Every rank
// must clip by the same factor. An FSDP rank owns one range per unit: is each at its
// own place? ZeRO-1/2's weights must be whole on every rank afterwards, sent as
// the recipe sends them.
double sharded_step(Sharded *s) {
    (void)s;
    // TODO(exercise)
    return 0;
}
