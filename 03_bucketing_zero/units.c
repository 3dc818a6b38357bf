// units.c — stage 3's weights: a unit gathered from its shards, and freed.
//
// A rank keeps only its block of each unit (pshard). Before the model uses any
// group of a unit, the unit is rebuilt in a buffer from the pool (MEM_COMM: it is
// the all-gather's receive buffer, and the working set the lesson accounts for):
// this rank's block copied in, the others' all-gathered. The model then finds the
// unit's groups there (gparams). Freeing it gives the buffer back to the pool and
// leaves the groups pointing nowhere, so a use without a gather is caught at once
// (model.c checks).
//
// With cfg.param_wire = bf16 (a mixed recipe's weights are bf16 values: stage 06)
// the gather moves 2 bytes a weight instead of 4 and loses nothing: this rank's
// block goes into a bf16 copy (ops->pack_half), the copy is all-gathered, and the
// whole unit decoded into its fp32 buffer at the wait.
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
    char label[40];
    snprintf(label, sizeof label, "all-gather unit %d", u);
    s->unit_buf[u] = buf;
    if (s->cfg.param_wire == DT_BF16) {
        uint16_t *w = s->unit_wire[u] = wire_get(s, hi - lo);
        ctx->ops->pack_half(ctx, w + blk.lo[P->r], s->pshard + mine, n, DT_BF16);
        s->unit_task[u] = all_gather_start(s->ac, s->dp, w, &blk, DT_BF16, s->cfg.algo, label);
    } else {
        ctx->ops->copy(ctx, buf + blk.lo[P->r], s->pshard + mine, n * sizeof(float));
        s->unit_task[u] = all_gather_start(s->ac, s->dp, buf, &blk, DT_F32, s->cfg.algo, label);
    }
    s->unit_state[u] = UNIT_GATHERING;
}

// A unit's bf16 copy, gathered: decoded into the unit's buffer, and given back.
static void unit_wire_done(Sharded *s, int u, int decode) {
    if (!s->unit_wire[u]) return;
    Ctx *ctx = s->g->ctx;
    if (decode)
        ctx->ops->unpack_half(ctx, s->unit_buf[u], s->unit_wire[u],
                              s->plan.unit_hi[u] - s->plan.unit_lo[u], DT_BF16);
    wire_put(s, s->unit_wire[u]);
    s->unit_wire[u] = NULL;
}

void unit_gather_wait(Sharded *s, int u) {
    CHECK(s->unit_state[u] == UNIT_GATHERING, "unit %d waited for but not being gathered", u);
    coll_wait(s->ac, s->unit_task[u]);
    s->unit_task[u] = NULL;
    unit_wire_done(s, u, 1);
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
        unit_wire_done(s, u, 0);
    }
    pool_put(s, s->unit_buf[u]);
    s->unit_buf[u] = NULL;
    s->unit_state[u] = UNIT_FREE;
    for (int grp = 0; grp < s->plan.groups; grp++)
        if (s->plan.unit_of[grp] == u) s->g->gparams[grp] = NULL;
}

void weights_all_gather(Sharded *s) {
    GPT *g = s->g;
    Ctx *ctx = g->ctx;
    const ShardPlan *P = &s->plan;
    Blocks blk;
    plan_blocks(P, 0, g->n_params, &blk, NULL);
    if (s->cfg.param_wire != DT_BF16) {
        coll_wait(s->ac, all_gather_start(s->ac, s->dp, g->params, &blk, DT_F32, s->cfg.algo,
                                          "all-gather weights"));
        return;
    }
    uint16_t *w = wire_get(s, g->n_params);
    size_t lo = blk.lo[P->r], n = blk.hi[P->r] - lo;
    ctx->ops->pack_half(ctx, w + lo, g->params + lo, n, DT_BF16);
    coll_wait(s->ac, all_gather_start(s->ac, s->dp, w, &blk, DT_BF16, s->cfg.algo,
                                      "all-gather weights"));
    ctx->ops->unpack_half(ctx, g->params, w, g->n_params, DT_BF16);
    wire_put(s, w);
}
