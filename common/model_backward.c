// model_backward.c — the GPT's backward pass: the head, the blocks (in one pass,
// or in two for a zero-bubble pipeline), the embedding. Every backward accumulates
// into the gradients (ops.h's convention); the forward and the activations it
// saves are model.c's.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model.h"
#include "model_internal.h"
#include "ops.h"

// ---------------------------------------------------------------- backward

// 1 if slice i is a LayerNorm's weight or bias.
static int norm_slice(const GPT *g, int i) {
    int k = (i - 2) % GPT_BLOCK_TENSORS;
    if (i == lnf_slice(g) || i == lnf_slice(g) + 1) return 1;
    return i >= 2 && i < lnf_slice(g) &&
           (k == GPT_LN1W || k == GPT_LN1B || k == GPT_LN2W || k == GPT_LN2B);
}

// A group's gradients are complete for this micro-batch: round them to the
// recipe's dtype (mixed precision: the weight gradients are bf16 or fp16, summed
// in fp32 by the ops and rounded once per micro-batch), then tell the strategy.
// Two kinds of gradient are only parts of a sum when the backward ends, and are
// rounded once summed instead (rounding the parts here would round twice):
//   - with sequence parallelism, a rank's LayerNorm gradients cover its own rows
//     (tp_reduce_norm_grads, stage 04, adds the ranks' up and rounds the total);
//   - a pipeline stage holding the tied wte for one of its two uses (the embedding
//     on the first stage, the LM head on the last) has its part of wte's gradient
//     (pipe_sync_embedding, stage 05, adds the two and rounds the total).
static int partial_grad(const GPT *g, int i) {
    return (g->tp.sp && norm_slice(g, i)) || (i == 0 && g->has_embed != g->has_head);
}

static void fire_hook(GPT *g, int group) {
    float *d = g->ggrads[group];
    size_t lo = g->group_offset[group];
    int parts = g->tp.sp || (group == 0 && g->has_embed != g->has_head);
    if (d && !parts) gpt_round(g, d, g->group_offset[group + 1] - lo);  // the group at once
    for (int i = 0; d && parts && i < g->n_slices; i++) {
        const ParamSlice *s = &g->slices[i];
        if (s->group == group && s->numel && !partial_grad(g, i))
            gpt_round(g, d + (s->offset - lo), s->numel);
    }
    if (g->hook) g->hook(g, group, g->hook_arg);
}

void gpt_head_backward(GPT *g, const float *x, float *dx, float dloss_scale, int B, int T) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    const GPTParallelOps *P = gpt_layers(g);
    const GPTConfig *c = &g->cfg;
    int N = B * T, C = c->n_embd, L = c->n_layer, lnw = lnf_slice(g), Nl = gpt_stream_rows(g, N);
    int Vl = gpt_vocab_block(c, g->tp.size);
    gpt_use(g, L + 1, GPT_NEED_PARAMS | GPT_NEED_GRADS);
    // The tied weight: wte's gradient gets its first half here, its second in the
    // embedding's backward, so group 0's gradient is complete only at the very end.
    gpt_use(g, 0, GPT_NEED_PARAMS | GPT_NEED_GRADS);
    // The loss is the mean over N positions: each position's gradient is 1/N.
    // dlogits overwrite the logits in place (they are not needed afterwards).
    // fp16 scales the loss up (loss_scale) so small gradients do not flush to zero.
    P->crossentropy_backward(g, g->acts.logits, g->acts.logits,
                             dloss_scale * g->prec.loss_scale / N, N);
    gpt_round(g, g->acts.logits, (size_t)N * Vl);
    P->column_backward(g, g->dln, grad_at(g, 0), NULL, g->acts.logits, g->acts.lnf, param_at(g, 0), N, C,
                       Vl);
    gpt_round(g, g->dln, (size_t)Nl * C);
    o->memset0(ctx, dx, (size_t)Nl * C * sizeof(float));
    o->layernorm_backward(ctx, dx, grad_at(g, lnw), grad_at(g, lnw + 1), g->dln, x,
                          param_at(g, lnw), g->acts.lnf_mean, g->acts.lnf_rstd, Nl, C);
    gpt_round(g, dx, (size_t)Nl * C);
    fire_hook(g, L + 1);
}

// dqkv += the attention's input gradient from datty (g's workspace), by the algorithm
// its forward ran: from the saved (T,T) probabilities, or flash attention's tiles
// from the saved log-sum-exp and output.
static void attention_backward(GPT *g, const LayerActs *a, int B, int T, int C, int NH) {
    Ctx *ctx = g->ctx;
    if (gpt_layers(g)->attention_backward)
        gpt_layers(g)->attention_backward(g, a, B, T);
    else if (g->flash_attention)
        ctx->ops->flash_attention_backward(ctx, g->dqkv, g->datty, a->qkv, a->atty, a->lse, B, T,
                                           C, NH, g->prec.dtype);
    else
        ctx->ops->attention_backward(ctx, g->dqkv, g->datt, g->datty, a->qkv, a->att, B, T, C, NH,
                                     g->prec.dtype);
}

void gpt_layer_backward(GPT *g, const LayerActs *a, const float *x, float *dx, int l, int B,
                        int T) {
    gpt_claim_gemm(g);
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    const GPTParallelOps *P = gpt_layers(g);
    int t = g->tp.size, C = g->cfg.n_embd, Cl = C / t, NHl = g->cfg.n_head / t, N = B * T;
    int Nl = gpt_stream_rows(g, N);
    size_t big = (size_t)N * 4 * Cl * sizeof(float);
#define W(k) param_at(g, block_slice(l, k))
#define D(k) grad_at(g, block_slice(l, k))
    size_t NC = (size_t)Nl * C, n1 = (size_t)N * Cl, n4 = (size_t)N * 4 * Cl;
    // Mixed precision: every activation gradient is rounded where it is written.
    // MLP branch
    P->row_backward(g, g->dbig, D(GPT_FCPROJW), D(GPT_FCPROJB), dx, a->fch_gelu, W(GPT_FCPROJW),
                    N, 4 * Cl, C);
    gpt_round(g, g->dbig, n4);
    o->memset0(ctx, g->dbig2, big);
    o->gelu_backward(ctx, g->dbig2, a->fch, g->dbig, n4);
    gpt_round(g, g->dbig2, n4);
    P->column_backward(g, g->dln, D(GPT_FCW), D(GPT_FCB), g->dbig2, a->ln2, W(GPT_FCW), N, C,
                       4 * Cl);
    gpt_round(g, g->dln, NC);
    o->layernorm_backward(ctx, dx, D(GPT_LN2W), D(GPT_LN2B), g->dln, a->res_att, W(GPT_LN2W),
                          a->ln2_mean, a->ln2_rstd, Nl, C);
    gpt_round(g, dx, NC);
    // attention branch
    P->row_backward(g, g->datty, D(GPT_ATTPROJW), D(GPT_ATTPROJB), dx, a->atty, W(GPT_ATTPROJW),
                    N, Cl, C);
    gpt_round(g, g->datty, n1);
    o->memset0(ctx, g->dqkv, (size_t)N * 3 * Cl * sizeof(float));
    attention_backward(g, a, B, T, Cl, NHl);
    gpt_round(g, g->dqkv, 3 * n1);
    P->column_backward(g, g->dln, D(GPT_QKVW), D(GPT_QKVB), g->dqkv, a->ln1, W(GPT_QKVW), N, C,
                       3 * Cl);
    gpt_round(g, g->dln, NC);
    o->layernorm_backward(ctx, dx, D(GPT_LN1W), D(GPT_LN1B), g->dln, x, W(GPT_LN1W), a->ln1_mean,
                          a->ln1_rstd, Nl, C);
    gpt_round(g, dx, NC);
#undef W
#undef D
}

// What layer l's backward reads: the activations its forward saved, or where the
// model keeps less (g->recompute), those made whole again by the recompute plugin.
static LayerActs layer_acts(GPT *g, const float *x, int l, int B, int T) {
    if (g->recompute == GPT_RECOMPUTE_NONE) return g->acts.layers[l];
    return g->plugins->recompute_layer(g, x, l, B, T);
}

void gpt_blocks_backward(GPT *g, const float *x, float *dx, int l0, int l1, int B, int T) {
    // dx enters as d(loss)/d(output of layer l1-1). Walking down, the residual
    // connections mean each layernorm_backward simply adds its branch into dx.
    for (int l = l1 - 1; l >= l0; l--) {
        const float *xin = l == l0 ? x : g->acts.layers[l - 1].res_mlp;
        gpt_use(g, 1 + l, GPT_NEED_PARAMS | GPT_NEED_GRADS);
        gpt_unpack_layer(g, l, B, T);  // the 2-byte copy, back
        LayerActs a = layer_acts(g, xin, l, B, T);  // and what the forward did not keep
        gpt_layer_backward(g, &a, xin, dx, l, B, T);
        fire_hook(g, 1 + l);
    }
}

// ---------------------------------------------------------------- the backward in two passes

// What the weight pass needs of each layer that the activations do not hold: the
// gradients at the outputs of its four matmuls and two LayerNorms, per token
// C (c_proj of the MLP) + 4C (c_fc) + C (ln_2) + C (c_proj of attention) + 3C
// (c_attn) + C (ln_1) = 11C, in that order.
enum { KEEP_FCPROJ = 0, KEEP_FC = 1, KEEP_LN2 = 5, KEEP_ATTPROJ = 6, KEEP_QKV = 7, KEEP_LN1 = 10,
       KEEP_PER_TOKEN = 11 };

size_t gpt_keep_floats(const GPT *g, int l0, int l1, int B, int T) {
    return (size_t)(l1 - l0) * B * T * KEEP_PER_TOKEN * g->cfg.n_embd;
}

void gpt_blocks_backward_input(GPT *g, const float *x, float *dx, int l0, int l1, int B, int T,
                               float *keep) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    CHECK(!g->tp.ops, "the two-pass backward runs without tensor parallelism");
    CHECK(!g->fp8, "the two-pass backward runs without the fp8 recipe");
    // The weight pass reads the layer's activations after the input pass of the
    // layers below: full recompute keeps one layer's at a time, so it cannot.
    CHECK(g->recompute != GPT_RECOMPUTE_FULL, "the two-pass backward needs the activations "
          "kept (recompute none or selective, not full)");
    int C = g->cfg.n_embd, NH = g->cfg.n_head, N = B * T;
    size_t NC = (size_t)N * C, bytes = NC * sizeof(float);
    for (int l = l1 - 1; l >= l0; l--) {
        const float *xin = l == l0 ? x : g->acts.layers[l - 1].res_mlp;
        float *k = keep + (size_t)(l - l0) * NC * KEEP_PER_TOKEN;
        gpt_use(g, 1 + l, GPT_NEED_PARAMS);
        gpt_unpack_layer(g, l, B, T);
        LayerActs ra = layer_acts(g, xin, l, B, T), *a = &ra;
#define W(i) param_at(g, block_slice(l, i))
        // The same calls as gpt_blocks_backward, without the weight gradients; each
        // gradient a weight needs is kept for the weight pass.
        // (Mixed precision rounds each gradient where the one-pass backward does.)
        o->copy(ctx, k + KEEP_FCPROJ * NC, dx, bytes);
        o->memset0(ctx, g->dbig, 4 * bytes);
        o->matmul_backward(ctx, g->dbig, NULL, NULL, dx, a->fch_gelu, W(GPT_FCPROJW), N, 4 * C, C);
        gpt_round(g, g->dbig, 4 * NC);
        o->memset0(ctx, g->dbig2, 4 * bytes);
        o->gelu_backward(ctx, g->dbig2, a->fch, g->dbig, 4 * NC);
        gpt_round(g, g->dbig2, 4 * NC);
        o->copy(ctx, k + KEEP_FC * NC, g->dbig2, 4 * bytes);
        o->memset0(ctx, g->dln, bytes);
        o->matmul_backward(ctx, g->dln, NULL, NULL, g->dbig2, a->ln2, W(GPT_FCW), N, C, 4 * C);
        gpt_round(g, g->dln, NC);
        o->copy(ctx, k + KEEP_LN2 * NC, g->dln, bytes);
        o->layernorm_backward(ctx, dx, NULL, NULL, g->dln, a->res_att, W(GPT_LN2W), a->ln2_mean,
                              a->ln2_rstd, N, C);
        gpt_round(g, dx, NC);
        o->copy(ctx, k + KEEP_ATTPROJ * NC, dx, bytes);
        o->memset0(ctx, g->datty, bytes);
        o->matmul_backward(ctx, g->datty, NULL, NULL, dx, a->atty, W(GPT_ATTPROJW), N, C, C);
        gpt_round(g, g->datty, NC);
        o->memset0(ctx, g->dqkv, 3 * bytes);
        attention_backward(g, a, B, T, C, NH);
        gpt_round(g, g->dqkv, 3 * NC);
        o->copy(ctx, k + KEEP_QKV * NC, g->dqkv, 3 * bytes);
        o->memset0(ctx, g->dln, bytes);
        o->matmul_backward(ctx, g->dln, NULL, NULL, g->dqkv, a->ln1, W(GPT_QKVW), N, C, 3 * C);
        gpt_round(g, g->dln, NC);
        o->copy(ctx, k + KEEP_LN1 * NC, g->dln, bytes);
        o->layernorm_backward(ctx, dx, NULL, NULL, g->dln, xin, W(GPT_LN1W), a->ln1_mean,
                              a->ln1_rstd, N, C);
        gpt_round(g, dx, NC);
#undef W
    }
}

void gpt_blocks_backward_weight(GPT *g, const float *x, int l0, int l1, int B, int T,
                                const float *keep) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    int C = g->cfg.n_embd, N = B * T;
    size_t NC = (size_t)N * C;
    for (int l = l1 - 1; l >= l0; l--) {
        LayerActs *a = &g->acts.layers[l];
        const float *xin = l == l0 ? x : g->acts.layers[l - 1].res_mlp;
        const float *k = keep + (size_t)(l - l0) * NC * KEEP_PER_TOKEN;
        gpt_use(g, 1 + l, GPT_NEED_PARAMS | GPT_NEED_GRADS);
        gpt_unpack_layer(g, l, B, T);  // the input pass's is gone
#define W(i) param_at(g, block_slice(l, i))
#define D(i) grad_at(g, block_slice(l, i))
        o->matmul_backward(ctx, NULL, D(GPT_FCPROJW), D(GPT_FCPROJB), k + KEEP_FCPROJ * NC,
                           a->fch_gelu, W(GPT_FCPROJW), N, 4 * C, C);
        o->matmul_backward(ctx, NULL, D(GPT_FCW), D(GPT_FCB), k + KEEP_FC * NC, a->ln2, W(GPT_FCW),
                           N, C, 4 * C);
        o->layernorm_backward(ctx, NULL, D(GPT_LN2W), D(GPT_LN2B), k + KEEP_LN2 * NC, a->res_att,
                              W(GPT_LN2W), a->ln2_mean, a->ln2_rstd, N, C);
        o->matmul_backward(ctx, NULL, D(GPT_ATTPROJW), D(GPT_ATTPROJB), k + KEEP_ATTPROJ * NC,
                           a->atty, W(GPT_ATTPROJW), N, C, C);
        o->matmul_backward(ctx, NULL, D(GPT_QKVW), D(GPT_QKVB), k + KEEP_QKV * NC, a->ln1,
                           W(GPT_QKVW), N, C, 3 * C);
        o->layernorm_backward(ctx, NULL, D(GPT_LN1W), D(GPT_LN1B), k + KEEP_LN1 * NC, xin,
                              W(GPT_LN1W), a->ln1_mean, a->ln1_rstd, N, C);
#undef W
#undef D
        fire_hook(g, 1 + l);
    }
}

void gpt_embed_backward(GPT *g, const float *dx, int B, int T) {
    gpt_use(g, 0, GPT_NEED_GRADS);
    gpt_layers(g)->embed_backward(g, grad_at(g, 0), grad_at(g, 1), dx, B, T);
    fire_hook(g, 0);
}

void gpt_backward(GPT *g, float dloss_scale) {
    CHECK(g->grads || g->use_hook, "gpt_backward before gpt_alloc_grads");
    CHECK(g->last_B > 0, "gpt_backward before a gpt_forward with targets");
    int B = g->last_B, T = g->last_T, L = g->cfg.n_layer;
    gpt_head_backward(g, gpt_layer_output(g, L - 1), g->dres, dloss_scale, B, T);
    gpt_blocks_backward(g, g->acts.encoded, g->dres, 0, L, B, T);
    gpt_embed_backward(g, g->dres, B, T);
}

void gpt_zero_grad(GPT *g) {
    CHECK(g->grads, "gpt_zero_grad: no flat gradient buffer (a sharded strategy zeroes its own)");
    g->ctx->ops->memset0(g->ctx, g->grads, g->n_params * sizeof(float));
}
