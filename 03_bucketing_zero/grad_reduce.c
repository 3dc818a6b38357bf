// grad_reduce.c — a bucket's collective, launched and retired.
//
// DDP and ZeRO-1 keep the flat gradient buffer: a bucket is a range of it,
// all-reduced (DDP) or reduce-scattered (ZeRO-1) in place. ZeRO-2 and beyond keep
// only their shard of the gradients: a bucket is a buffer of its own (buckets.c
// makes it when backward first writes into it), retired here once its
// reduce-scatter is done: this rank's block added into the shard, the buffer given
// back to the pool.
//
// With cfg.grad_wire = bf16 (stage 06) a bucket travels as a bf16 copy (ops->pack_half
// at launch): half the bytes, each addition of the ring summed in fp32 and rounded to
// bf16 (06_mixed_precision/README.md §5 measures what that costs); at retirement the
// part this rank keeps is decoded back into the bucket's fp32 buffer.
#include <stdio.h>

#include "check.h"
#include "ops.h"
#include "sharded.h"

int sharded_grads(const Sharded *s) { return s->cfg.kind >= SH_ZERO2; }

void bucket_launch(Sharded *s, int b) {
    Buckets *B = &s->buckets;
    CHECK(B->pending[b] == 0, "bucket %d launched while %d of its %d layer groups have not "
          "completed their gradients: it would send gradients still being computed", b,
          B->pending[b], B->groups[b]);
    CHECK(!B->launched[b], "bucket %d launched twice in one backward pass", b);
    s->launched_in_backward += s->in_backward;
    char label[40];
    snprintf(label, sizeof label, "%s bucket %d", s->cfg.kind == SH_DDP ? "all-reduce" :
             "reduce-scatter", b);
    size_t n = B->hi[b] - B->lo[b];
    float *buf = sharded_grads(s) ? B->buf[b] : s->g->grads + B->lo[b];
    CHECK(buf, "bucket %d has no gradient buffer", b);
    // What goes on the wire: the bucket itself, or its bf16 copy.
    DType dt = s->cfg.grad_wire;
    char *x = (char *)buf;
    if (dt == DT_BF16) {
        B->wire[b] = wire_get(s, n);
        s->g->ctx->ops->pack_half(s->g->ctx, B->wire[b], buf, n, DT_BF16);
        x = (char *)B->wire[b];
    }
    if (s->cfg.kind == SH_DDP) {
        B->task[b] = allreduce_start(s->ac, s->dp, x, n, dt, s->cfg.algo, label);
    } else {
        Blocks blk;
        plan_blocks(&s->plan, B->lo[b], B->hi[b], &blk, NULL);
        B->task[b] = reduce_scatter_start(s->ac, s->dp, x, &blk, dt, s->cfg.algo, label);
        // HSDP: the shard group summed its ranks; the replicas of this block (one per
        // group) add theirs, so every replica holds the sum over the whole world. It is
        // started here, right behind the reduce-scatter, not when the bucket is
        // retired: retiring happens whenever a rank finds the bucket done, a moment that
        // differs between ranks, and collectives must start in the same order everywhere.
        if (s->cfg.kind == SH_HSDP && s->replica_g.size > 1) {
            int r = s->plan.r;
            snprintf(label, sizeof label, "all-reduce replicas %d", b);
            B->replica[b] = allreduce_start(s->ac, &s->replica_g, x + blk.lo[r] * dtype_size(dt),
                                            blk.hi[r] - blk.lo[r], dt, s->cfg.algo, label);
        }
    }
    B->launched[b] = 1;
}

void buckets_finish(Sharded *s) {
    Buckets *B = &s->buckets;
    for (int b = 0; b < B->n; b++)
        if (!B->launched[b]) bucket_launch(s, b);
    for (int b = 0; b < B->n; b++) bucket_retire(s, b);
}

void bucket_retire(Sharded *s, int b) {
    Buckets *B = &s->buckets;
    CHECK(B->launched[b] || !B->buf[b], "bucket %d retired before it was launched: its gradients "
          "(%d of its %d groups still pending) would be lost", b, B->pending[b], B->groups[b]);
    if (s->in_backward && B->task[b] && !coll_test(s->ac, B->task[b])) {  // a wait, now
        int launched = 0;
        for (int q = 0; q < B->n; q++) launched += B->task[q] != NULL;
        s->early_waits += launched < MAX_IN_FLIGHT;
    }
    if (B->task[b]) {
        coll_wait(s->ac, B->task[b]);
        B->task[b] = NULL;
    }
    if (B->replica[b]) {
        coll_wait(s->ac, B->replica[b]);
        B->replica[b] = NULL;
    }
    Ctx *ctx = s->g->ctx;
    Blocks blk;
    size_t mine;
    plan_blocks(&s->plan, B->lo[b], B->hi[b], &blk, &mine);
    int r = s->plan.r;
    if (B->wire[b]) {  // decode what this rank keeps: DDP the whole sum, the others their block
        float *buf = sharded_grads(s) ? B->buf[b] : s->g->grads + B->lo[b];
        size_t lo = s->cfg.kind == SH_DDP ? 0 : blk.lo[r];
        size_t hi = s->cfg.kind == SH_DDP ? B->hi[b] - B->lo[b] : blk.hi[r];
        ctx->ops->unpack_half(ctx, buf + lo, B->wire[b] + lo, hi - lo, DT_BF16);
        wire_put(s, B->wire[b]);
        B->wire[b] = NULL;
    }
    if (!sharded_grads(s) || !B->buf[b]) return;
    size_t n = blk.hi[r] - blk.lo[r];
    float *block = B->buf[b] + blk.lo[r];
    // Micro-batches accumulate in the shard: the first one copies.
    if (s->micro == 0) ctx->ops->copy(ctx, s->gshard + mine, block, n * sizeof(float));
    else ctx->ops->accumulate(ctx, s->gshard + mine, block, 1.0f, n);
    pool_put(s, B->buf[b]);
    B->buf[b] = NULL;
    for (int grp = 0; grp < s->plan.groups; grp++)
        if (B->of_group[grp] == b) s->g->ggrads[grp] = NULL;
}
