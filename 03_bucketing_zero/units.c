// units.c — stage 3's weights: a unit gathered from its shards, and freed.
//
// A rank keeps only its block of each unit (pshard). Before the model uses any
// group of a unit, the unit is rebuilt in a buffer from the pool (MEM_COMM: it is
// the all-gather's receive buffer, and the working set the lesson accounts for):
// this rank's block copied in, the others' all-gathered. The model then finds the
// unit's groups there (gparams). Freeing it gives the buffer back to the pool and
// leaves the groups pointing nowhere, so a use without a gather is caught at once
// (model.c checks).
#include <stdio.h>

#include "check.h"
#include "ops.h"
#include "sharded.h"

void unit_gather_start(Sharded *s, int u) {
    CHECK(s->unit_state[u] == UNIT_FREE, "unit %d gathered twice", u);
    const ShardPlan *P = &s->plan;
    Ctx *ctx = s->g->ctx;
    size_t lo = P->unit_lo[u], hi = P->unit_hi[u], mine;
    Blocks blk;
    plan_blocks(P, lo, hi, &blk, &mine);
    float *buf = pool_get(s, hi - lo, 0);  // no zeroing: the gather writes every element
    size_t n = blk.hi[P->r] - blk.lo[P->r];
    ctx->ops->copy(ctx, buf + blk.lo[P->r], s->pshard + mine, n * sizeof(float));
    char label[40];
    snprintf(label, sizeof label, "all-gather unit %d", u);
    s->unit_buf[u] = buf;
    s->unit_task[u] = all_gather_start(s->ac, s->dp, buf, &blk, DT_F32, s->cfg.algo, label);
    s->unit_state[u] = UNIT_GATHERING;
}

void unit_gather_wait(Sharded *s, int u) {
    CHECK(s->unit_state[u] == UNIT_GATHERING, "unit %d waited for but not being gathered", u);
    coll_wait(s->ac, s->unit_task[u]);
    s->unit_task[u] = NULL;
    s->unit_state[u] = UNIT_READY;
    const GPT *g = s->g;
    for (int grp = 0; grp < s->plan.groups; grp++)
        if (s->plan.unit_of[grp] == u)
            s->g->gparams[grp] = s->unit_buf[u] + (g->group_offset[grp] - s->plan.unit_lo[u]);
}

void unit_free(Sharded *s, int u) {
    if (s->unit_state[u] == UNIT_FREE) return;
    if (s->unit_state[u] == UNIT_GATHERING) {  // its all-gather still writes into the buffer
        coll_wait(s->ac, s->unit_task[u]);
        s->unit_task[u] = NULL;
    }
    pool_put(s, s->unit_buf[u]);
    s->unit_buf[u] = NULL;
    s->unit_state[u] = UNIT_FREE;
    for (int grp = 0; grp < s->plan.groups; grp++)
        if (s->plan.unit_of[grp] == u) s->g->gparams[grp] = NULL;
}
