// sharded.c — the strategy the trainer calls: the model states built in the
// framework's order, the micro-batch bookkeeping, the hooks, the full weights
// on demand, and the timeline's compute spans.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "sharded.h"
#include "timer.h"

static const char *kind_names[SH_COUNT] = {"ddp", "zero1", "zero2", "zero3", "fsdp", "hsdp"};
const char *shard_kind_name(ShardKind k) { return k < SH_COUNT ? kind_names[k] : "?"; }
int shard_kind_parse(const char *str, ShardKind *out) {
    for (int k = 0; k < SH_COUNT; k++)
        if (strcmp(str, kind_names[k]) == 0) { *out = (ShardKind)k; return 0; }
    return -1;
}

double sharded_sum_squares(const Sharded *s, const float *shard) {
    Ctx *ctx = s->g->ctx;
    double sum = 0;  // the ranges in order, each summed by the backend in double
    for (int i = 0; i < s->n_opt; i++)
        sum += ctx->ops->sum_squares(ctx, shard + (s->plan.per_unit ? s->plan.unit_base[i] : 0),
                                     s->opt[i].end - s->opt[i].begin);
    return sum;
}

// ---------------------------------------------------------------- the buffer pool

float *pool_get(Sharded *s, size_t elems, int zero) {
    Ctx *ctx = s->g->ctx;
    int best = -1;  // the smallest free buffer that is large enough
    for (int i = 0; i < s->n_pool; i++)
        if (!s->pool[i].used && s->pool[i].elems >= elems &&
            (best < 0 || s->pool[i].elems < s->pool[best].elems))
            best = i;
    if (best < 0) {
        if (s->n_pool == s->cap_pool) {  // (a deep model without reshard holds every unit)
            s->cap_pool = s->cap_pool ? 2 * s->cap_pool : 16;
            s->pool = realloc(s->pool, (size_t)s->cap_pool * sizeof *s->pool);
            CHECK(s->pool, "out of host memory");
        }
        best = s->n_pool++;
        s->pool[best] = (PoolBuf){.buf = mem_alloc(ctx, MEM_COMM, elems * sizeof(float)),
                                  .elems = elems};  // comes zeroed
    } else {
        // On a GPU, kernels queued earlier may still read it: wait for them first.
        if (s->pool[best].released) gpu_event_sync(s->pool[best].released);
        s->pool[best].released = NULL;
        if (zero) ctx->ops->memset0(ctx, s->pool[best].buf, elems * sizeof(float));
    }
    s->pool[best].used = 1;
    return s->pool[best].buf;
}

uint16_t *wire_get(Sharded *s, size_t n) { return (uint16_t *)pool_get(s, (n + 1) / 2, 0); }
void wire_put(Sharded *s, uint16_t *w) { pool_put(s, (float *)w); }

void pool_put(Sharded *s, float *buf) {
    for (int i = 0; i < s->n_pool; i++)
        if (s->pool[i].buf == buf) {
            CHECK(s->pool[i].used, "a pool buffer given back twice");
            s->pool[i].used = 0;
            if (s->g->ctx->device == DEV_CUDA)
                s->pool[i].released = gpu_event_after_compute(s->g->ctx);
            return;
        }
    DIE("pool_put: %p is not a pool buffer", (void *)buf);
}

static void pool_free_all(Sharded *s) {
    for (int i = 0; i < s->n_pool; i++) {
        if (s->pool[i].released) gpu_event_sync(s->pool[i].released);
        mem_free(s->g->ctx, MEM_COMM, s->pool[i].buf, s->pool[i].elems * sizeof(float));
    }
    free(s->pool);
    s->pool = NULL;
    s->n_pool = s->cap_pool = 0;
}

// ---------------------------------------------------------------- hooks and timeline

// The compute between two hook calls is recorded as one span, named after the
// call that began it: "forward g3" after group 3's use in forward, "backward g3"
// after its use in backward. A span never covers a hook's own work (gathers,
// waits), which the hooks record themselves.
static void compute_span_end(Sharded *s) {
    if (s->tl && s->span_name[0])
        timeline_span(s->tl, TL_COMPUTE, s->span_name, s->span_t0, now_seconds());
    s->span_name[0] = 0;
}
static void compute_span_begin(Sharded *s, const char *what, int group) {
    snprintf(s->span_name, sizeof s->span_name, "%s g%d", what, group);
    s->span_t0 = now_seconds();
}

// After use `at`: is the next unit the model will need (the first later use of a
// unit other than this one's) on its way? fsdp_on_use's prefetch must have started it;
// one that looked only at the next use would start a unit of several groups late.
static void prefetch_audit(Sharded *s, int at) {
    int u = s->use_seq[at];
    for (int j = at + 1; j < s->n_use; j++) {
        int w = s->use_seq[j];
        if (w < 0 || w == u) continue;
        if (s->unit_state[w] == UNIT_FREE) s->prefetch_late++;
        return;
    }
}

static void on_use(GPT *g, int group, int need, void *arg) {
    (void)g;
    Sharded *s = arg;
    compute_span_end(s);
    int at = s->use_at++;
    if (need & GPT_NEED_GRADS) grads_need(s, group);
    if (s->pshard) {  // stage 3: the weights too
        fsdp_on_use(s, group, need, at);
        if (s->cfg.prefetch) prefetch_audit(s, at);
    }
    compute_span_begin(s, need & GPT_NEED_GRADS ? "backward" : "forward", group);
}

static void on_grad_ready(GPT *g, int group, void *arg) {
    Sharded *s = arg;
    compute_span_end(s);
    buckets_on_grad_ready(g, group, arg);
}

// The use() calls of one micro-batch (model.h), as the unit whose weights each
// needs (-1: gradients only).
static void build_use_seq(Sharded *s) {
    int L = s->g->cfg.n_layer, n = 0, *seq = s->use_seq, *op = s->use_op;
    const int *unit = s->plan.unit_of;
#define USE(grp, first) (op[n] = (first) ? n : n - 1, seq[n++] = (grp) < 0 ? -1 : unit[grp])
    for (int grp = 0; grp <= L; grp++) USE(grp, 1);  // forward: the embedding, the blocks
    USE(L + 1, 1);                                    // the head: ln_f (group L+1) ...
    USE(0, 0);                                        // ... and the tied wte, in one op
    s->fwd_uses = n;
    USE(L + 1, 1);                                    // backward: the head again
    USE(0, 0);
    for (int l = L; l >= 1; l--) USE(l, 1);           // the blocks
    USE(-1, 1);                                       // the embedding: gradients only
#undef USE
    s->n_use = n;
}

// ---------------------------------------------------------------- building

static void *zalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    CHECK(p, "out of host memory");
    return p;
}

// Weights, gradients, optimizer state: the order a framework allocates in, so a
// model that does not fit fails here, at step zero, in the category that overflows.
static void build(GPT *g, Ctx *ctx, const GPTConfig *cfg, uint64_t seed, const AdamWConfig *oc,
                  void *arg) {
    Sharded *s = arg;
    ShardKind kind = s->cfg.kind;
    s->g = g;
    int stage3 = kind >= SH_ZERO3;
    if (stage3) gpt_init_layout(g, ctx, cfg);
    else gpt_init(g, ctx, cfg, seed);
    plan_build(&s->plan, g, &s->cfg, s->dp->size, s->dp->rank);
    const ShardPlan *P = &s->plan;

    // The owned ranges: one for ZeRO ([r*S, (r+1)*S) cut at Ψ), one per unit for FSDP.
    s->n_opt = P->per_unit ? P->n_units : 1;
    size_t *lo = zalloc((size_t)s->n_opt, sizeof *lo), *hi = zalloc((size_t)s->n_opt, sizeof *hi);
    size_t *cap = zalloc((size_t)s->n_opt, sizeof *cap);
    if (kind == SH_DDP) {
        lo[0] = 0, hi[0] = g->n_params, cap[0] = g->n_params;
    } else if (!P->per_unit) {
        size_t a = (size_t)P->r * P->S, z = a + P->S;
        lo[0] = a < g->n_params ? a : g->n_params;
        hi[0] = z < g->n_params ? z : g->n_params;
        cap[0] = P->S;
    } else {
        for (int u = 0; u < P->n_units; u++) {
            Blocks blk;
            plan_blocks(P, P->unit_lo[u], P->unit_hi[u], &blk, NULL);
            lo[u] = P->unit_lo[u] + blk.lo[P->r];
            hi[u] = P->unit_lo[u] + blk.hi[P->r];
            cap[u] = ceil_div(P->unit_hi[u] - P->unit_lo[u], (size_t)P->p);
        }
    }
    if (stage3) {  // this rank's blocks of the initial weights, drawn as gpt_init draws them
        s->pshard = mem_alloc(ctx, MEM_PARAMS, P->shard_elems * sizeof(float));
        for (int i = 0; i < s->n_opt; i++) {
            float *host = zalloc(hi[i] - lo[i], sizeof(float));
            gpt_initial_params(g, seed, lo[i], hi[i], host);
            size_t at = P->per_unit ? P->unit_base[i] : 0;
            ctx->ops->to_device(ctx, s->pshard + at, host, (hi[i] - lo[i]) * sizeof(float));
            free(host);
        }
    }
    if (sharded_grads(s)) s->gshard = mem_alloc(ctx, MEM_GRADS, P->shard_elems * sizeof(float));
    else gpt_alloc_grads(g);
    s->opt = zalloc((size_t)s->n_opt, sizeof *s->opt);
    for (int i = 0; i < s->n_opt; i++) adamw_init_padded(&s->opt[i], g, oc, lo[i], hi[i], cap[i]);
    free(lo); free(hi); free(cap);

    int G = P->groups;
    Buckets *B = &s->buckets;
    B->of_group = zalloc((size_t)G, sizeof(int));
    B->lo = zalloc((size_t)G, sizeof(size_t));
    B->hi = zalloc((size_t)G, sizeof(size_t));
    B->groups = zalloc((size_t)G, sizeof(int));
    B->pending = zalloc((size_t)G, sizeof(int));
    B->launched = zalloc((size_t)G, sizeof(int));
    B->buf = zalloc((size_t)G, sizeof(float *));
    B->wire = zalloc((size_t)G, sizeof(uint16_t *));
    B->task = zalloc((size_t)G, sizeof(CollTask *));
    B->replica = zalloc((size_t)G, sizeof(CollTask *));
    buckets_assign(s);
    CHECK(B->n >= 1 && B->n <= G, "buckets_assign made %d buckets for %d layer groups", B->n, G);
    s->unit_buf = zalloc((size_t)P->n_units, sizeof(float *));
    s->unit_wire = zalloc((size_t)P->n_units, sizeof(uint16_t *));
    s->unit_task = zalloc((size_t)P->n_units, sizeof(CollTask *));
    s->unit_state = zalloc((size_t)P->n_units, sizeof(UnitState));
    s->use_seq = zalloc((size_t)2 * G + 4, sizeof(int));
    s->use_op = zalloc((size_t)2 * G + 4, sizeof(int));
    build_use_seq(s);
    g->hook = on_grad_ready;
    g->hook_arg = s;
    g->use_hook = on_use;
    g->use_arg = s;
}

static void micro_begin(GPT *g, int micro, int accum, void *arg) {
    Sharded *s = arg;
    Buckets *B = &s->buckets;
    s->in_backward = 0;
    if (micro == 0) {
        for (int b = 0; b < B->n; b++)
            CHECK(!B->task[b], "bucket %d is still in flight at the start of a step: the step "
                  "(zero_step.c's sharded_step) must finish every bucket (buckets_finish) "
                  "before it updates", b);
        // A mixed-precision recipe computes with weights of its dtype: gpt_set_precision
        // rounds the weights a model holds, but stage 3 holds shards, drawn in fp32
        // (build): round them once, before anything gathers them or copies them into
        // the optimizer's masters, as one process does. (Idempotent: a resumed run's
        // shards are rounded already.)
        if (s->pshard && !s->pshard_rounded) {
            g->ctx->ops->round_to(g->ctx, s->pshard, s->plan.shard_elems, g->prec.dtype);
            s->pshard_rounded = 1;
        }
        timeline_clear(s->tl);  // the timeline keeps the last step only
        s->step_start = comm_link_bytes(s->c);
        if (g->grads) gpt_zero_grad(g);
    } else if (sharded_grads(s)) {
        // No flat buffer to accumulate in: the previous micro-batch's buckets go
        // into the shard now (the hook launched them only with overlap).
        buckets_finish(s);
    }
    s->micro = micro;
    s->use_at = 0;
    // DDP and ZeRO-1 accumulate micro-batches in their full gradient buffer and
    // communicate after the last (the hook launches the buckets with overlap; without
    // it, all at once after backward, as stage 02). The sharded strategies reduce
    // every micro-batch's buckets as backward completes them, overlapped or not:
    // without the progress thread the collectives run in launch order when waited
    // for (grads_need retires the oldest), so a rank holds a few buckets, not all.
    s->armed = sharded_grads(s) || (s->cfg.overlap && micro == accum - 1);
    for (int b = 0; b < B->n; b++) {
        B->pending[b] = B->groups[b];
        B->launched[b] = 0;
    }
    s->span_name[0] = 0;
    s->in_backward = 1;  // (the forward first: it retires and launches no bucket)
}

static double step(GPT *g, void *arg) {
    Sharded *s = arg;
    s->in_backward = 0;
    compute_span_end(s);
    // A unit still whole now would be stale after the update: its shard changes.
    for (int u = 0; u < s->plan.n_units; u++)
        CHECK(s->unit_state[u] == UNIT_FREE, "unit %d is still gathered after the backward pass "
              "(it must be freed after its last use)", u);
    double norm;
    if (s->cfg.kind == SH_DDP) {  // stage 02's step, the buckets finished first
        buckets_finish(s);
        g->ctx->ops->scale(g->ctx, g->grads, 1.0f / (float)s->world->size, g->n_params);
        norm = grad_global_norm(g);
        adamw_step(&s->opt[0], g, norm);
    } else {
        norm = sharded_step(s);
    }
    s->step_sent = link_bytes_since(comm_link_bytes(s->c), s->step_start);
    return norm;
}

// Every rank ends with the whole model's weights in `out` (host memory).
static void gather_params(GPT *g, float *out, void *arg) {
    Sharded *s = arg;
    Ctx *ctx = g->ctx;
    if (!s->pshard) {
        ctx->ops->to_host(ctx, out, g->params, g->n_params * sizeof(float));
        return;
    }
    for (int u = 0; u < s->plan.n_units; u++) {
        if (s->unit_state[u] == UNIT_FREE) unit_gather_start(s, u);
        if (s->unit_state[u] == UNIT_GATHERING) unit_gather_wait(s, u);
        size_t lo = s->plan.unit_lo[u], hi = s->plan.unit_hi[u];
        ctx->ops->to_host(ctx, out + lo, s->unit_buf[u], (hi - lo) * sizeof(float));
        unit_free(s, u);
    }
}

// For a checkpoint (stage 07): this rank's weights, moments and masters. ZeRO-3,
// FSDP and HSDP hold blocks of the weights (the optimizers' ranges); the others
// the whole weights, which every rank of the world holds alike. HSDP's shard
// groups hold the same blocks: each of the replicas saves its share.
static void state(GPT *g, TrainState *st, void *arg) {
    Sharded *s = arg;
    const ShardPlan *P = &s->plan;
    int hsdp = s->cfg.kind == SH_HSDP, ddp = s->cfg.kind == SH_DDP;
    int reps = hsdp ? s->replica_g.size : 1, rep = hsdp ? s->replica_g.rank : 0;
    if (s->pshard) {
        for (int i = 0; i < s->n_opt; i++)
            train_state_add(st, ST_PARAMS, g, s->opt[i].begin, s->opt[i].end,
                            s->pshard + (P->per_unit ? P->unit_base[i] : 0), reps, rep);
    } else {
        train_state_add(st, ST_PARAMS, g, 0, g->n_params, g->params, s->world->size, s->world->rank);
    }
    for (int i = 0; i < s->n_opt; i++)
        train_state_add_opt(st, &s->opt[i], g, ddp ? s->world->size : reps,
                            ddp ? s->world->rank : rep);
}

// The checkpoint's agreements go through the progress thread, which owns the Comm.
static void sum(float *buf, int n, void *arg) {
    Sharded *s = arg;
    async_allreduce(s->ac, s->world, buf, (size_t)n, DT_F32, s->cfg.algo, "checkpoint");
}

static void destroy(GPT *g, void *arg) {
    Sharded *s = arg;
    Ctx *ctx = g->ctx;
    for (int u = 0; u < s->plan.n_units; u++) unit_free(s, u);
    Buckets *B = &s->buckets;
    for (int b = 0; b < B->n; b++) {
        if (B->task[b]) coll_wait(s->ac, B->task[b]);
        if (B->replica[b]) coll_wait(s->ac, B->replica[b]);
    }
    pool_free_all(s);
    for (int i = 0; i < s->n_opt; i++) adamw_free(&s->opt[i], g);
    if (s->pshard) mem_free(ctx, MEM_PARAMS, s->pshard, s->plan.shard_elems * sizeof(float));
    if (s->gshard) mem_free(ctx, MEM_GRADS, s->gshard, s->plan.shard_elems * sizeof(float));
    s->pshard = s->gshard = NULL;
    free(s->opt); free(B->of_group); free(B->lo); free(B->hi); free(B->groups);
    free(B->pending); free(B->launched); free(B->buf); free(B->wire); free(B->task);
    free(B->replica);
    free(s->unit_buf); free(s->unit_wire); free(s->unit_task); free(s->unit_state); free(s->use_seq);
    free(s->use_op);
    memset(B, 0, sizeof *B);
    s->opt = NULL;
    plan_free(&s->plan);
    g->hook = NULL;
    g->use_hook = NULL;
}

// ---------------------------------------------------------------- the object

Sharded *sharded_new(Comm *c, Group *world, Ctx *ctx, const ShardConfig *cfg, Timeline *tl) {
    Sharded *s = zalloc(1, sizeof *s);
    s->cfg = *cfg;
    s->c = c;
    s->world = world;
    s->dp = world;
    s->tl = tl;
    if (cfg->kind == SH_DDP && !cfg->overlap)
        s->cfg.bucket_bytes = SIZE_MAX;  // no overlap: stage 02's one all-reduce of everything
    if (cfg->kind != SH_FSDP && cfg->kind != SH_HSDP) s->cfg.unit_layers = 1;
    if (cfg->kind == SH_HSDP) {
        // A 2-D mesh: shard groups of consecutive ranks; replica groups of the ranks
        // that hold the same block (the same index in their shard group).
        int n = world->size, k = cfg->shard_size > 0 ? cfg->shard_size : n;
        CHECK(n % k == 0, "--shard-size %d does not divide the %d ranks", k, n);
        int ranks[COMM_MAX_RANKS] = {0}, me = world->rank;
        for (int i = 0; i < k; i++) ranks[i] = me / k * k + i;
        comm_group_new(c, &s->shard_g, "shard", ranks, k);
        for (int i = 0; i < n / k; i++) ranks[i] = i * k + me % k;
        comm_group_new(c, &s->replica_g, "replica", ranks, n / k);
        s->dp = &s->shard_g;
    }
    // The GPU collectives are set up (collectives themselves) before the progress
    // thread takes the Comm.
    if (ctx->device == DEV_CUDA) {
        s->gpu_dp = gpu_comm_new(c, s->dp, ctx, GPU_AUTO);
        if (cfg->kind == SH_HSDP) s->gpu_replica = gpu_comm_new(c, &s->replica_g, ctx, GPU_AUTO);
        if (cfg->overlap) {
            gpu_comm_own_stream(s->gpu_dp);
            if (s->gpu_replica) gpu_comm_own_stream(s->gpu_replica);
        }
    }
    s->ac = async_comm_new(c, tl, cfg->overlap);
    if (s->gpu_dp) async_comm_use_gpu(s->ac, s->dp, s->gpu_dp, ctx);
    if (s->gpu_replica) async_comm_use_gpu(s->ac, &s->replica_g, s->gpu_replica, ctx);
    s->strategy = (TrainStrategy){.build = build, .micro_begin = micro_begin, .step = step,
                                  .gather_params = gather_params, .state = state, .sum = sum,
                                  .destroy = destroy, .arg = s};
    return s;
}

void sharded_free(Sharded *s) {
    if (!s) return;
    async_comm_free(s->ac);
    gpu_comm_free(s->gpu_replica);  // collectives again: the main thread has the Comm back
    gpu_comm_free(s->gpu_dp);
    free(s);
}

void sharded_describe(const Sharded *s, char *buf, size_t n) {
    static const char *names[SH_COUNT] = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3", "FSDP", "HSDP"};
    const ShardConfig *c = &s->cfg;
    char bucket[48], extra[128] = "";
    if (c->kind >= SH_FSDP) snprintf(bucket, sizeof bucket, "per unit");
    else if (c->bucket_bytes == SIZE_MAX) snprintf(bucket, sizeof bucket, "in one bucket");
    else if (c->bucket_bytes == 0) snprintf(bucket, sizeof bucket, "per layer group");
    else snprintf(bucket, sizeof bucket, "in buckets of %.2f MB", c->bucket_bytes / 1e6);
    if (c->kind >= SH_ZERO3)
        snprintf(extra, sizeof extra, "; weights gathered in units of %d group%s, %s%s",
                 c->unit_layers, c->unit_layers == 1 ? "" : "s",
                 c->prefetch ? "prefetched" : "not prefetched",
                 c->reshard ? ", resharded after forward" : ", kept from forward to backward");
    if (c->kind == SH_HSDP) {
        size_t len = strlen(extra);
        snprintf(extra + len, sizeof extra - len, "; shard groups of %d", s->shard_g.size);
    }
    if (c->grad_wire != DT_F32 || c->param_wire != DT_F32) {
        size_t len = strlen(extra);
        snprintf(extra + len, sizeof extra - len, "; on the wire: gradients %s, weights %s",
                 dtype_name(c->grad_wire), dtype_name(c->param_wire));
    }
    snprintf(buf, n, "%s over %d rank%s: %s %s %s, %s%s", names[c->kind], s->world->size,
             s->world->size == 1 ? "" : "s", algo_name(c->algo),
             c->kind == SH_DDP ? "all-reduce" : "reduce-scatter", bucket,
             c->overlap ? "overlapped" : "not overlapped", extra);
}
