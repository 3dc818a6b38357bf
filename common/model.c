// model.c — the GPT: initialisation, activations, forward and backward. (Where
// the weights live in the flat buffer: model_layout.c.)
//
// Read gpt_forward and gpt_backward first: each is a short list of calls into
// the backend (ctx->ops). Everything else is bookkeeping for the flat buffers.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model.h"
#include "model_internal.h"
#include "ops.h"

// Tells the strategy (if any) that a group's weights or gradients are about to be used.
void gpt_use(GPT *g, int group, int need) {
    gpt_claim_gemm(g);
    if (g->use_hook) g->use_hook(g, group, need, g->use_arg);
    CHECK(!(need & GPT_NEED_PARAMS) || g->gparams[group], "group %d's weights are not "
          "materialised (a sharded strategy must gather them in its use hook)", group);
    CHECK(!(need & GPT_NEED_GRADS) || g->ggrads[group], "group %d has no gradient buffer (call "
          "gpt_alloc_grads, or a sharded strategy must provide one in its use hook)", group);
}

// ---------------------------------------------------------------- set-up

void gpt_init(GPT *g, Ctx *ctx, const GPTConfig *cfg, uint64_t seed) {
    gpt_init_tp(g, ctx, cfg, seed, 1, 0);
}

void gpt_init_tp(GPT *g, Ctx *ctx, const GPTConfig *cfg, uint64_t seed, int tp, int tp_rank) {
    GPTPart part = gpt_whole(cfg);
    part.tp = tp;
    part.tp_rank = tp_rank;
    gpt_init_part(g, ctx, cfg, seed, &part);
}

void gpt_init_part(GPT *g, Ctx *ctx, const GPTConfig *cfg, uint64_t seed, const GPTPart *part) {
    gpt_init_layout_part(g, ctx, cfg, part);
    g->params = mem_alloc(ctx, MEM_PARAMS, g->n_params * sizeof(float));
    float *host = malloc(g->n_params * sizeof(float));
    CHECK(host, "out of host memory initialising %zu parameters", g->n_params);
    gpt_initial_params(g, seed, 0, g->n_params, host);
    ctx->ops->to_device(ctx, g->params, host, g->n_params * sizeof(float));
    free(host);
    for (int k = 0; k < cfg->n_layer + 2; k++)
        g->gparams[k] = gpt_group_held(g, k) ? g->params + g->group_offset[k] : NULL;
}

void gpt_alloc_grads(GPT *g) {
    if (!g->grads) g->grads = mem_alloc(g->ctx, MEM_GRADS, g->n_params * sizeof(float));
    for (int k = 0; k < g->cfg.n_layer + 2; k++)
        g->ggrads[k] = gpt_group_held(g, k) ? g->grads + g->group_offset[k] : NULL;
}

static const char *const recipe_names[PREC_COUNT] = {"fp32", "mixed-bf16", "mixed-fp16", "bf16",
                                                     "bf16-sr", "fp8"};
const char *gpt_recipe_name(GPTRecipe r) {
    return r >= 0 && r < PREC_COUNT ? recipe_names[r] : "?";
}
int gpt_recipe_parse(const char *s, GPTRecipe *r) {
    for (int i = 0; i < PREC_COUNT; i++)
        if (strcmp(s, recipe_names[i]) == 0) { *r = (GPTRecipe)i; return 0; }
    return -1;
}

const char *gpt_recipe_needs(GPTRecipe r) {
    return r == PREC_MIXED_FP16 ? "dynamic loss scaling" : r == PREC_BF16_SR ? "stochastic rounding"
           : r == PREC_FP8 ? "fp8 delayed scaling" : NULL;
}

int gpt_recipe_master(GPTRecipe r) {
    return r == PREC_MIXED_BF16 || r == PREC_MIXED_FP16 || r == PREC_FP8;
}

DType gpt_recipe_dtype(GPTRecipe r) {
    static const DType dtypes[PREC_COUNT] = {DT_F32, DT_BF16, DT_F16, DT_BF16, DT_BF16, DT_BF16};
    CHECK(r >= 0 && r < PREC_COUNT, "precision recipe %d", (int)r);
    return dtypes[r];
}

void gpt_set_precision(GPT *g, GPTRecipe r, uint64_t seed) {
    // How the activations are stored (2 bytes or 4) is fixed when they are allocated.
    CHECK((!g->acts.buffer && !g->work_buffer) ||
              dtype_size(gpt_recipe_dtype(r)) == dtype_size(g->prec.dtype),
          "gpt_set_precision(%s) after the activations were allocated for %s", gpt_recipe_name(r),
          gpt_recipe_name((GPTRecipe)g->prec.recipe));
    g->prec.recipe = r;
    g->prec.dtype = gpt_recipe_dtype(r);
    g->prec.master = gpt_recipe_master(r);
    const GPTPlugins *pl = g->plugins;
    CHECK(r != PREC_BF16_SR || (pl && pl->sround.round && pl->sround.bits),
          "--precision bf16-sr needs its stochastic rounding (g->plugins: stage 06)");
    if (r == PREC_FP8) {
        CHECK(!g->tp.ops, "the fp8 recipe casts the serial linear layers: not with tensor "
              "parallelism");
        CHECK(pl && pl->fp8_enable, "--precision fp8 needs its scaled casts (g->plugins: stage 06)");
        pl->fp8_enable(g);
    }
    g->prec.stochastic = r == PREC_BF16_SR;
    g->prec.loss_scale = 1.0f;
    g->prec.seed = seed;
    // Every GEMM input is now a bf16 value (rounded where written): the backend may
    // read them as bf16 (the CUDA tensor cores; gpt_claim_gemm, again before each use).
    gpt_claim_gemm(g);
    // The weights the model computes with: the recipe's dtype from here on.
    if (g->params) gpt_round(g, g->params, g->n_params);
}

static const char *const recompute_names[] = {"none", "selective", "full"};
const char *gpt_recompute_name(GPTRecompute r) {
    return r >= GPT_RECOMPUTE_NONE && r <= GPT_RECOMPUTE_FULL ? recompute_names[r] : "?";
}
int gpt_recompute_parse(const char *s, GPTRecompute *r) {
    for (int i = 0; i <= GPT_RECOMPUTE_FULL; i++)
        if (strcmp(s, recompute_names[i]) == 0) { *r = (GPTRecompute)i; return 0; }
    return -1;
}

void gpt_free(GPT *g) {
    Ctx *ctx = g->ctx;
    gpt_acts_free(g, &g->acts);
    if (g->fp8) g->plugins->fp8_free(g);
    if (g->work_buffer && !g->scratch_borrowed)
        mem_free(ctx, MEM_WORKSPACE, g->work_buffer, g->work_floats * sizeof(float));
    if (g->remat_buffer && !g->scratch_borrowed)
        mem_free(ctx, MEM_ACTIVATIONS, g->remat_buffer, g->remat_floats * sizeof(float));
    if (g->grads) mem_free(ctx, MEM_GRADS, g->grads, g->n_params * sizeof(float));
    if (g->params) mem_free(ctx, MEM_PARAMS, g->params, g->n_params * sizeof(float));
    free(g->gparams);
    free(g->ggrads);
    free(g->slices);
    free(g->group_offset);
    memset(g, 0, sizeof *g);
}

// ---------------------------------------------------------------- the layers

// The serial layers: what a model on one device computes. Tensor parallelism
// (stage 04) replaces them with g->tp.ops, which wrap the same backend calls in
// its collectives.
static void serial_linear_forward(GPT *g, float *out, const float *inp, const float *w,
                                  const float *b, int N, int C, int OC) {
    if (g->fp8) {  // the fp8 recipe: the GEMM reads fp8 casts (its plugin)
        g->plugins->fp8_linear_forward(g, out, inp, w, b, N, C, OC);
        return;
    }
    g->ctx->ops->matmul_forward(g->ctx, out, inp, w, b, N, C, OC);
}
static void serial_linear_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                                   const float *inp, const float *w, int N, int C, int OC) {
    if (g->fp8) {
        g->plugins->fp8_linear_backward(g, dinp, dw, db, dout, inp, w, N, C, OC);
        return;
    }
    g->ctx->ops->memset0(g->ctx, dinp, (size_t)N * C * sizeof(float));
    g->ctx->ops->matmul_backward(g->ctx, dinp, dw, db, dout, inp, w, N, C, OC);
}
static void serial_embed_forward(GPT *g, float *out, const float *wte, const float *wpe, int B,
                                 int T) {
    g->ctx->ops->embedding_forward(g->ctx, out, g->acts.tokens, wte, wpe, B, T, g->cfg.n_embd);
}
static void serial_embed_backward(GPT *g, float *dwte, float *dwpe, const float *dout, int B,
                                  int T) {
    g->ctx->ops->embedding_backward(g->ctx, dwte, dwpe, dout, g->acts.tokens, g->acts.host_tokens, B, T,
                                    g->cfg.n_embd);
}
static void serial_ce_forward(GPT *g, float *losses, const float *logits, int N) {
    g->ctx->ops->crossentropy_forward(g->ctx, losses, logits, g->acts.targets, N, g->cfg.vocab);
}
static void serial_ce_backward(GPT *g, float *dlogits, const float *logits, float dloss, int N) {
    g->ctx->ops->crossentropy_backward(g->ctx, dlogits, logits, g->acts.targets, dloss, N, g->cfg.vocab);
}
static const GPTParallelOps serial_layers = {
    serial_linear_forward, serial_linear_backward, serial_linear_forward, serial_linear_backward,
    serial_embed_forward,  serial_embed_backward,  serial_ce_forward,     serial_ce_backward,
    NULL,                  NULL,  // attention: the core's op (gpt_attention_forward)
};
const GPTParallelOps *gpt_layers(const GPT *g) { return g->tp.ops ? g->tp.ops : &serial_layers; }
const GPTParallelOps *gpt_serial_layers(void) { return &serial_layers; }

// ---------------------------------------------------------------- forward

const float *gpt_layer_output(const GPT *g, int l) {
    return l < 0 ? g->acts.encoded : g->acts.layers[l].res_mlp;
}

void gpt_embed_forward(GPT *g, int B, int T) {
    gpt_use(g, 0, GPT_NEED_PARAMS);
    gpt_layers(g)->embed_forward(g, g->acts.encoded, param_at(g, 0), param_at(g, 1), B, T);
    gpt_round(g, g->acts.encoded, (size_t)gpt_stream_rows(g, B * T) * g->cfg.n_embd);
}

// Where layer l's forward writes: its saved tensors, with what it does not keep
// in the shared recompute buffers (the attention matrix with SELECTIVE; all but
// the output with FULL).
static LayerActs forward_target(const GPT *g, int l) {
    LayerActs a = g->acts.layers[l];
    if (gpt_layer_recomputed(g, l)) {
        a = g->remat;
        a.res_mlp = g->acts.layers[l].res_mlp;
    } else if (g->recompute == GPT_RECOMPUTE_SELECTIVE) {
        a.att = g->remat.att;
    }
    return a;
}

void gpt_attention_forward(GPT *g, const LayerActs *a, int B, int T) {
    int t = g->tp.size, Cl = g->cfg.n_embd / t, NHl = g->cfg.n_head / t;
    // (att comes out rounded to the recipe's type: the op rounds it before att @ v.)
    if (gpt_layers(g)->attention_forward)
        gpt_layers(g)->attention_forward(g, a, B, T);
    else if (g->flash_attention)
        g->ctx->ops->flash_attention_forward(g->ctx, a->atty, a->lse, a->qkv, B, T, Cl, NHl,
                                             g->prec.dtype);
    else
        g->ctx->ops->attention_forward(g->ctx, a->atty, a->att, a->qkv, B, T, Cl, NHl,
                                       g->prec.dtype);
    gpt_round(g, a->atty, (size_t)B * T * Cl);
}

// Shapes in the blocks are this rank's: with tensor parallelism over t ranks each
// holds NH/t heads (C/t of the attention's width) and 4C/t of the MLP's.
void gpt_layer_forward(GPT *g, const LayerActs *a, const float *x, int l, int B, int T) {
    gpt_claim_gemm(g);  // called without gpt_use by the recompute and the tests
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    const GPTParallelOps *P = gpt_layers(g);
    int t = g->tp.size, C = g->cfg.n_embd, Cl = C / t, N = B * T;
    int Nl = gpt_stream_rows(g, N);
    size_t NC = (size_t)Nl * C;
#define W(k) param_at(g, block_slice(l, k))
    // attention branch: res_att = x + c_proj(attn(c_attn(ln_1(x))))
    // Mixed precision: each tensor is rounded to the recipe's dtype where it is
    // written (the LayerNorm statistics stay fp32, as in every framework); the ops
    // themselves compute and accumulate in fp32, as tensor cores do.
    size_t n3 = (size_t)N * 3 * Cl, n4 = (size_t)N * 4 * Cl;
    o->layernorm_forward(ctx, a->ln1, a->ln1_mean, a->ln1_rstd, x, W(GPT_LN1W), W(GPT_LN1B), Nl,
                         C);
    gpt_round(g, a->ln1, NC);
    P->column_forward(g, a->qkv, a->ln1, W(GPT_QKVW), W(GPT_QKVB), N, C, 3 * Cl);
    gpt_round(g, a->qkv, n3);
    gpt_attention_forward(g, a, B, T);
    P->row_forward(g, a->res_att, a->atty, W(GPT_ATTPROJW), W(GPT_ATTPROJB), N, Cl, C);
    o->accumulate(ctx, a->res_att, x, 1.0f, NC);
    gpt_round(g, a->res_att, NC);
    // MLP branch: res_mlp = res_att + c_proj(gelu(c_fc(ln_2(res_att))))
    o->layernorm_forward(ctx, a->ln2, a->ln2_mean, a->ln2_rstd, a->res_att, W(GPT_LN2W),
                         W(GPT_LN2B), Nl, C);
    gpt_round(g, a->ln2, NC);
    P->column_forward(g, a->fch, a->ln2, W(GPT_FCW), W(GPT_FCB), N, C, 4 * Cl);
    gpt_round(g, a->fch, n4);
    o->gelu_forward(ctx, a->fch_gelu, a->fch, n4);
    gpt_round(g, a->fch_gelu, n4);
    P->row_forward(g, a->res_mlp, a->fch_gelu, W(GPT_FCPROJW), W(GPT_FCPROJB), N, 4 * Cl, C);
    o->accumulate(ctx, a->res_mlp, a->res_att, 1.0f, NC);
    gpt_round(g, a->res_mlp, NC);
#undef W
}

void gpt_blocks_forward(GPT *g, const float *x, int l0, int l1, int B, int T) {
    for (int l = l0; l < l1; l++) {
        gpt_use(g, 1 + l, GPT_NEED_PARAMS);
        LayerActs a = forward_target(g, l);
        gpt_layer_forward(g, &a, x, l, B, T);
        gpt_pack_layer(g, l, B, T);
        x = g->acts.layers[l].res_mlp;
    }
}

float gpt_head_forward(GPT *g, const float *x, int B, int T, int has_targets) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    const GPTConfig *c = &g->cfg;
    int N = B * T, C = c->n_embd, L = c->n_layer, lnw = lnf_slice(g);
    int Vl = gpt_vocab_block(c, g->tp.size);
    gpt_use(g, L + 1, GPT_NEED_PARAMS);
    gpt_use(g, 0, GPT_NEED_PARAMS);  // the LM head is tied to wte (group 0)
    o->layernorm_forward(ctx, g->acts.lnf, g->acts.lnf_mean, g->acts.lnf_rstd, x, param_at(g, lnw),
                         param_at(g, lnw + 1), gpt_stream_rows(g, N), C);
    // The LM head is tied: logits = lnf @ wte^T, no bias (column-parallel over the
    // vocabulary when tensor parallel: each rank its block of the logits).
    gpt_round(g, g->acts.lnf, (size_t)gpt_stream_rows(g, N) * C);
    gpt_layers(g)->column_forward(g, g->acts.logits, g->acts.lnf, param_at(g, 0), NULL, N, C, Vl);
    gpt_round(g, g->acts.logits, (size_t)N * Vl);  // the loss itself is computed in fp32
    g->loss = 0.0f;
    if (has_targets) {
        gpt_layers(g)->crossentropy_forward(g, g->acts.losses, g->acts.logits, N);
        float *host = malloc((size_t)N * sizeof(float));
        CHECK(host, "out of host memory");
        o->to_host(ctx, host, g->acts.losses, (size_t)N * sizeof(float));
        double sum = 0;
        for (int i = 0; i < N; i++) sum += host[i];
        free(host);
        g->loss = (float)(sum / N);
    }
    return g->loss;
}

void gpt_set_batch(GPT *g, const int *tokens, const int *targets, int B, int T) {
    CHECK(g->acts.buffer, "a batch before the activations are allocated");
    CHECK(B <= g->acts.B && T <= g->acts.T, "batch %dx%d exceeds the %dx%d the activations were "
          "sized for", B, T, g->acts.B, g->acts.T);
    const GPTConfig *c = &g->cfg;
    size_t BT = (size_t)B * T;
    for (size_t i = 0; i < BT; i++) {
        CHECK(tokens[i] >= 0 && tokens[i] < c->vocab, "token %d at position %zu is outside the "
              "vocabulary [0, %d)", tokens[i], i, c->vocab);
        CHECK(!targets || (targets[i] >= 0 && targets[i] < c->vocab),
              "target %d at position %zu is outside the vocabulary [0, %d)", targets ? targets[i] : 0,
              i, c->vocab);
    }
    Ctx *ctx = g->ctx;
    memcpy(g->acts.host_tokens, tokens, BT * sizeof(int));
    ctx->ops->to_device(ctx, g->acts.tokens, tokens, BT * sizeof(int));
    if (targets) ctx->ops->to_device(ctx, g->acts.targets, targets, BT * sizeof(int));
    g->last_B = B;
    g->last_T = T;
}

float gpt_forward(GPT *g, const int *tokens, const int *targets, int B, int T) {
    CHECK(g->acts.buffer, "gpt_forward before gpt_alloc_acts");
    gpt_set_batch(g, tokens, targets, B, T);
    gpt_embed_forward(g, B, T);
    gpt_blocks_forward(g, g->acts.encoded, 0, g->cfg.n_layer, B, T);
    return gpt_head_forward(g, gpt_layer_output(g, g->cfg.n_layer - 1), B, T, targets != NULL);
}

