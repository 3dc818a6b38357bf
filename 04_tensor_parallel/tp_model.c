// tp_model.c — the GPT with its layers split over a tensor-parallel group: the
// table the core calls, the whole model gathered back, and the optimizer step of
// a dp x tp mesh (TP inside a group, stage 02's DDP across groups).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "tp.h"

static const GPTParallelOps tp_layers = {
    tp_column_forward, tp_column_backward, tp_row_forward,          tp_row_backward,
    tp_embed_forward,  tp_embed_backward,  tp_crossentropy_forward, tp_crossentropy_backward,
    NULL,              NULL,  // attention: the core's, on this rank's heads
};

const GPTParallelOps *tp_layer_ops(void) { return &tp_layers; }

void tp_install(GPT *g, TensorParallel *tp) {
    CHECK(tp->group->size == g->tp.size && tp->group->rank == g->tp.rank,
          "the model was laid out for rank %d of %d tensor-parallel ranks, the group is rank %d "
          "of %d", g->tp.rank, g->tp.size, tp->group->rank, tp->group->size);
    CHECK(!g->acts.buffer, "tp_install before gpt_alloc_acts (the activations depend on it)");
    g->tp.arg = tp;
    g->tp.sp = tp->sp && g->tp.size > 1;
    g->tp.ops = g->tp.size > 1 ? &tp_layers : NULL;  // one rank: the serial layers
}

void tp_gather(GPT *g, int grads, float *out) {
    TensorParallel *tp = g->tp.arg;
    Ctx *ctx = g->ctx;
    const float *src = grads ? g->grads : g->params;
    CHECK(src, "tp_gather: no %s buffer", grads ? "gradient" : "weight");
    int t = g->tp.size;
    size_t biggest = 0;
    for (int i = 0; i < g->n_slices; i++)
        if (g->slices[i].numel > biggest) biggest = g->slices[i].numel;
    float *pieces = malloc((size_t)t * biggest * sizeof(float) + 1);
    CHECK(pieces, "out of host memory gathering the weights");
    for (int i = 0; i < g->n_slices; i++) {
        const ParamSlice *s = &g->slices[i];
        if (s->split == SPLIT_NONE) {  // every rank has it whole
            ctx->ops->to_host(ctx, out + s->goffset, src + s->offset, s->numel * sizeof(float));
            continue;
        }
        // Every rank's piece (they are all the same size), then each into its place.
        ctx->ops->to_host(ctx, pieces + (size_t)g->tp.rank * s->numel, src + s->offset,
                          s->numel * sizeof(float));
        if (t > 1) all_gather(tp->comm, tp->group, pieces, (size_t)t * s->numel, DT_F32, tp->algo);
        for (int q = 0; q < t; q++)
            gpt_slice_copy(s, q, out + s->goffset, pieces + (size_t)q * s->numel, 0);
    }
    free(pieces);
}

// The slices a LayerNorm's weight and bias make (adjacent in the layout).
static int norm_slice(const GPT *g, int k) {
    int L = g->cfg.n_layer;
    if (k == 2 * L) return 2 + GPT_BLOCK_TENSORS * L;                       // ln_f
    return 2 + (k / 2) * GPT_BLOCK_TENSORS + (k % 2 ? GPT_LN2W : GPT_LN1W);  // ln_1, ln_2
}

void tp_reduce_norm_grads(GPT *g) {
    if (!g->tp.sp) return;
    for (int k = 0; k <= 2 * g->cfg.n_layer; k++) {
        const ParamSlice *w = &g->slices[norm_slice(g, k)];
        tp_allreduce(g, g->grads + w->offset, 2 * w->numel);  // weight and bias
        // Mixed precision: the backward left these unrounded (model_backward.c's
        // fire_hook): the total is rounded once, as one process rounds its own.
        if (g->prec.dtype != DT_F32 && w->numel)
            g->ctx->ops->round_to(g->ctx, g->grads + w->offset, 2 * w->numel, g->prec.dtype);
    }
}

double tp_grad_norm(GPT *g) {
    TensorParallel *tp = g->tp.arg;
    Ctx *ctx = g->ctx;
    double sq = 0;
    for (int i = 0; i < g->n_slices; i++) {
        const ParamSlice *s = &g->slices[i];
        // A replicated tensor is the same on every rank: count it on member 0 only.
        if (s->split == SPLIT_NONE && g->tp.rank != 0) continue;
        sq += ctx->ops->sum_squares(ctx, g->grads + s->offset, s->numel);
    }
    if (g->tp.size > 1) allreduce(tp->comm, tp->group, &sq, 1, DT_F64, tp->algo);
    return sqrt(sq);
}

// ---------------------------------------------------------------- the strategy

static void tp_build(GPT *g, Ctx *ctx, const GPTConfig *cfg, uint64_t seed, const AdamWConfig *oc,
                     void *arg) {
    TPTrain *s = arg;
    // Every rank draws the single-process model's weights and keeps its pieces:
    // the replicas of a dp group start identical without a broadcast.
    gpt_init_tp(g, ctx, cfg, seed, s->tp.group->size, s->tp.group->rank);
    tp_install(g, &s->tp);
    gpt_alloc_grads(g);
    adamw_init(&s->opt, g, oc, 0, g->n_params);
}

static void tp_micro_begin(GPT *g, int micro, int accum, void *arg) {
    (void)accum;
    TPTrain *s = arg;
    if (micro > 0) return;
    gpt_zero_grad(g);
    s->tp.comm_s = 0;
    s->step_start = comm_link_bytes(s->tp.comm);
}

static double tp_step(GPT *g, void *arg) {
    TPTrain *s = arg;
    tp_reduce_norm_grads(g);                              // SP only
    if (s->ddp.group->size > 1) ddp_sync_grads(&s->ddp, g);  // the mean over the replicas
    double norm = tp_grad_norm(g);
    adamw_step(&s->opt, g, norm);
    s->step_sent = link_bytes_since(comm_link_bytes(s->tp.comm), s->step_start);
    s->step_tp_s = s->tp.comm_s;
    return norm;
}

static void tp_gather_params(GPT *g, float *out, void *arg) {
    (void)arg;
    tp_gather(g, 0, out);
}

// For a checkpoint (stage 07): this rank's pieces of the weights and of AdamW's
// state; the replicas over dp hold the same and each saves a share. (What the
// tensor-parallel group replicates, LayerNorms and the like, is saved by its
// rank 0 alone: checkpoint.c.)
static void tp_state(GPT *g, TrainState *st, void *arg) {
    TPTrain *s = arg;
    int dp = s->ddp.group->size, r = s->ddp.group->rank;
    train_state_add(st, ST_PARAMS, g, 0, g->n_params, g->params, dp, r);
    train_state_add_opt(st, &s->opt, g, dp, r);
}

static void tp_destroy(GPT *g, void *arg) {
    TPTrain *s = arg;
    adamw_free(&s->opt, g);
    ddp_free(&s->ddp, g);
}

void tp_train_init(TPTrain *s, Comm *c, Group *tp_group, Group *dp_group, Algo algo, int sp,
                   GpuComm *gpu_tp, GpuComm *gpu_dp) {
    memset(s, 0, sizeof *s);
    s->tp = (TensorParallel){.comm = c, .group = tp_group, .algo = algo, .gpu = gpu_tp, .sp = sp};
    ddp_init(&s->ddp, c, dp_group, algo);
    s->ddp.gpu = gpu_dp;
    s->strategy = (TrainStrategy){.build = tp_build, .micro_begin = tp_micro_begin,
                                  .step = tp_step, .gather_params = tp_gather_params,
                                  .state = tp_state, .destroy = tp_destroy, .arg = s};
}
