// zero_step.c — the optimizer step of ZeRO-1/2/3, FSDP and HSDP, after the
// backward passes.
//
//   1. Finish the gradients: launch every bucket the hook did not (no overlap,
//      or not the last micro-batch) and wait for all. The reduce-scatters leave
//      each rank the sum of only its own blocks (in the flat buffer for ZeRO-1, in
//      gshard beyond: bucket_retire added them there).
//   2. The mean: divide by N. Each rank's loss is a mean over its own rows, so
//      the gradient of the global batch is the mean of the ranks' (stage 02).
//   3. The global norm, for clipping. A rank holds 1/N of the gradient, so its
//      sum of squares is 1/N of the norm's square: the partial sums are added
//      over the ranks (one fp64 all-reduce) before the square root. Clipping by
//      the local shard's norm alone would scale each shard differently.
//   4. AdamW on this rank's range(s) only: the optimizer state exists for them only.
//   5. ZeRO-1 and ZeRO-2 keep the whole weights: each rank updated its shard, so
//      the new weights are all-gathered over the partition's blocks. (Stage 3
//      keeps only the shard: the next forward gathers what it uses.)
#include <math.h>

#include "check.h"
#include "ops.h"
#include "sharded.h"

double sharded_step(Sharded *s) {
    GPT *g = s->g;
    Ctx *ctx = g->ctx;
    const ShardPlan *P = &s->plan;
    ShardKind kind = s->cfg.kind;
    float inv_n = 1.0f / (float)s->world->size;

    // 1. Every bucket launched, in order, and finished.
    buckets_finish(s);

    // 2. The mean, over what this rank owns: range i of the optimizer starts at
    // element at(i) of the shard buffers (ZeRO: one range, at 0; FSDP: one per unit).
    float *grads = kind == SH_ZERO1 ? g->grads + s->opt[0].begin : s->gshard;
    for (int i = 0; i < s->n_opt; i++)
        ctx->ops->scale(ctx, grads + (P->per_unit ? P->unit_base[i] : 0), inv_n,
                        s->opt[i].end - s->opt[i].begin);

    // 3. The norm over every rank's shard: partial sums of squares, added up.
    double sq = sharded_sum_squares(s, grads);
    async_allreduce(s->ac, s->dp, &sq, 1, DT_F64, ALGO_NAIVE, "all-reduce norm");
    double norm = sqrt(sq);

    // 4. AdamW on this rank's ranges.
    for (int i = 0; i < s->n_opt; i++) {
        AdamW *o = &s->opt[i];
        size_t at = P->per_unit ? P->unit_base[i] : 0;  // where range i starts in the shards
        float *p = s->pshard ? s->pshard + at : g->params + o->begin;
        adamw_step_at(o, g, p, grads + at, norm);
    }

    // 5. ZeRO-1/2: everyone's updated shards back into everyone's weights.
    // (weights_all_gather: all_gather_start on g->params over plan_blocks(P, 0,
    // n_params), then coll_wait; in bf16 on the wire when the recipe allows: units.c.)
    if (kind == SH_ZERO1 || kind == SH_ZERO2) weights_all_gather(s);
    return norm;
}
