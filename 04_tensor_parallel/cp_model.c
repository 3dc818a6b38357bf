// cp_model.c — the GPT with its sequence split over a context-parallel group: the layer
// table the core calls (embedding and attention replaced, everything else token by token
// as it is; with TP, TP's layers), and the strategy the trainer runs (this rank's rows of
// each micro-batch, the gradients averaged over the dp x cp ranks holding the same
// pieces, AdamW).
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cp.h"
#include "ops.h"

// With TP, g->tp.arg is the TensorParallel its layers use, and this strategy its outer.
static CPTrain *state(GPT *g) {
    return g->tp.size > 1 ? ((TensorParallel *)g->tp.arg)->outer : g->tp.arg;
}

static CpRuns my_runs(const CPTrain *s, int T) {
    CpRuns r;
    CHECK(cp_runs(T, s->cp.group->size, s->cp.group->rank, s->cp.zigzag, &r) == 0,
          "context parallelism: %d tokens do not split over %d ranks", T, s->cp.group->size);
    return r;
}

// wte[token] + wpe[global position]: each run of this rank's rows is a run of positions,
// so the core's embedding runs once per (sequence, run) with wpe from the run's start.
// With TP, wte's lookup is the vocabulary-parallel one (each rank its ids, summed over
// the group) and the positions are added after it, run by run.
static void cp_embed_forward(GPT *g, float *out, const float *wte, const float *wpe, int B, int Tl) {
    CPTrain *s = state(g);
    CpRuns r = my_runs(s, Tl * s->cp.group->size);
    int C = g->cfg.n_embd, lo, valid, Vl = g->tp.size > 1 ? tp_vocab_range(g, &lo, &valid) : 0;
    if (g->tp.size > 1) {
        g->ctx->ops->embedding_lookup_forward(g->ctx, out, g->acts.tokens, wte, lo, Vl, B * Tl, C);
        tp_g_forward(g, out, out, B * Tl, C);
    }
    for (int b = 0; b < B; b++)
        for (int k = 0, row = 0; k < r.n; row += r.len[k++]) {
            size_t at = (size_t)b * Tl + row;
            if (g->tp.size > 1)
                g->ctx->ops->position_forward(g->ctx, out + at * C, wpe + (size_t)r.start[k] * C,
                                              0, r.len[k], r.len[k], C);
            else
                g->ctx->ops->embedding_forward(g->ctx, out + at * C, g->acts.tokens + at, wte,
                                               wpe + (size_t)r.start[k] * C, 1, r.len[k], C);
        }
}

static void cp_embed_backward(GPT *g, float *dwte, float *dwpe, const float *dout, int B, int Tl) {
    CPTrain *s = state(g);
    CpRuns r = my_runs(s, Tl * s->cp.group->size);
    int C = g->cfg.n_embd, lo, valid, Vl = g->tp.size > 1 ? tp_vocab_range(g, &lo, &valid) : 0;
    if (g->tp.size > 1)  // (every rank the whole gradient: g's backward is the identity)
        g->ctx->ops->embedding_lookup_backward(g->ctx, dwte, dout, g->acts.tokens,
                                               g->acts.host_tokens, lo, Vl, B * Tl, C);
    for (int b = 0; b < B; b++)
        for (int k = 0, row = 0; k < r.n; row += r.len[k++]) {
            size_t at = (size_t)b * Tl + row;
            if (g->tp.size > 1)
                g->ctx->ops->position_backward(g->ctx, dwpe + (size_t)r.start[k] * C,
                                               dout + at * C, 0, r.len[k], r.len[k], C);
            else
                g->ctx->ops->embedding_backward(g->ctx, dwte, dwpe + (size_t)r.start[k] * C,
                                                dout + at * C, g->acts.tokens + at,
                                                g->acts.host_tokens + at, 1, r.len[k], C);
        }
}

// This rank's heads: all of them, or with TP its NH/tp (qkv then holds 3C/tp columns).
static void cp_attention_forward(GPT *g, const LayerActs *a, int B, int Tl) {
    CPTrain *s = state(g);
    int T = Tl * s->cp.group->size, C = g->cfg.n_embd / g->tp.size, NH = g->cfg.n_head / g->tp.size;
    if (s->ulysses) ulysses_attention_forward(&s->cp, a->atty, a->lse, a->qkv, B, T, C, NH);
    else ring_attention_forward(&s->cp, a->atty, a->lse, a->qkv, B, T, C, NH);
}

static void cp_attention_backward(GPT *g, const LayerActs *a, int B, int Tl) {
    CPTrain *s = state(g);
    int T = Tl * s->cp.group->size, C = g->cfg.n_embd / g->tp.size, NH = g->cfg.n_head / g->tp.size;
    if (s->ulysses)
        ulysses_attention_backward(&s->cp, g->dqkv, g->datty, a->qkv, a->atty, a->lse, B, T, C, NH);
    else
        ring_attention_backward(&s->cp, g->dqkv, g->datty, a->qkv, a->atty, a->lse, B, T, C, NH);
}

// ---------------------------------------------------------------- the strategy

static void cp_build(GPT *g, Ctx *ctx, const GPTConfig *cfg, uint64_t seed, const AdamWConfig *oc,
                     void *arg) {
    CPTrain *s = arg;
    // Every rank the single process's weights (with TP, its pieces of them): no broadcast.
    gpt_init_tp(g, ctx, cfg, seed, s->tp.group->size, s->tp.group->rank);
    tp_install(g, &s->tp);  // (one rank: nothing; the serial layers)
    if (s->cp.group->size > 1) {  // (one rank: the core's flash attention)
        s->layers = g->tp.size > 1 ? *tp_layer_ops() : *gpt_serial_layers();
        s->layers.embed_forward = cp_embed_forward;
        s->layers.embed_backward = cp_embed_backward;
        s->layers.attention_forward = cp_attention_forward;
        s->layers.attention_backward = cp_attention_backward;
        g->tp.ops = &s->layers;
        if (g->tp.size == 1) g->tp.arg = s;
    }
    gpt_alloc_grads(g);
    adamw_init(&s->opt, g, oc, 0, g->n_params);
}

// The trainer hands every micro-batch of the step (B x T each); this rank runs its rows.
static float cp_run(GPT *g, const int *tokens, const int *targets, int B, int T, int m, void *arg) {
    CPTrain *s = arg;
    int p = s->cp.group->size, Tl = T / p;
    CpRuns r = my_runs(s, T);
    if (!s->B) {
        gpt_alloc_acts(g, B, Tl);
        s->tokens = xmalloc(sizeof(int) * (size_t)B * Tl);
        s->targets = xmalloc(sizeof(int) * (size_t)B * Tl);
        s->B = B;
    }
    gpt_zero_grad(g);
    if (s->cp.tl) timeline_clear(s->cp.tl);  // (--trace keeps the last step's)
    double loss = 0;
    for (int micro = 0; micro < m; micro++) {
        const int *tk = tokens + (size_t)micro * B * T, *tg = targets + (size_t)micro * B * T;
        for (int b = 0; b < B; b++)
            for (int k = 0, row = 0; k < r.n; row += r.len[k++]) {
                memcpy(s->tokens + (size_t)b * Tl + row, tk + (size_t)b * T + r.start[k],
                       sizeof(int) * r.len[k]);
                memcpy(s->targets + (size_t)b * Tl + row, tg + (size_t)b * T + r.start[k],
                       sizeof(int) * r.len[k]);
            }
        loss += gpt_forward(g, s->tokens, s->targets, B, Tl);
        gpt_backward(g, 1.0f / m);
    }
    // The mean over the sequences' every row, as one process computes it (the ranks'
    // rows are equal in number): what the trainer prints is then that loss.
    loss /= m * p;
    if (p > 1) allreduce(s->cp.comm, s->cp.group, &loss, 1, DT_F64, ALGO_RING);
    return (float)loss;
}

static double cp_step(GPT *g, void *arg) {
    CPTrain *s = arg;
    if (s->ddp.group->size > 1) ddp_sync_grads(&s->ddp, g);  // the mean over dp x cp
    double norm = g->tp.size > 1 ? tp_grad_norm(g) : grad_global_norm(g);
    adamw_step(&s->opt, g, norm);
    return norm;
}

static void cp_gather_params(GPT *g, float *out, void *arg) {
    (void)arg;
    if (g->tp.size > 1) tp_gather(g, 0, out);
    else g->ctx->ops->to_host(g->ctx, out, g->params, g->n_params * sizeof(float));
}

static void cp_destroy(GPT *g, void *arg) {
    CPTrain *s = arg;
    adamw_free(&s->opt, g);
    ddp_free(&s->ddp, g);
    free(s->tokens);
    free(s->targets);
}

void cp_train_init(CPTrain *s, Comm *c, Group *cp, Group *tp, Group *replicas, Algo algo,
                   int zigzag, int ulysses, Ctx *ctx) {
    memset(s, 0, sizeof *s);
    // TP's collectives and the gradients' mean go with the all-to-all's algorithm.
    s->tp = (TensorParallel){.comm = c, .group = tp, .algo = reduction_algo(algo), .outer = s};
    s->cp = (ContextParallel){.comm = c, .group = cp, .zigzag = zigzag, .algo = algo, .ctx = ctx,
                              .overlap = 1};
    s->ulysses = ulysses;
    ddp_init(&s->ddp, c, replicas, reduction_algo(algo));
    s->strategy = (TrainStrategy){.build = cp_build, .run_micro_batches = cp_run, .step = cp_step,
                                  .gather_params = cp_gather_params, .destroy = cp_destroy,
                                  .arg = s};
}
