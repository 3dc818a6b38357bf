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

// This rank's shapes. Serial: t = 1, every size the whole model's. Tensor
// parallel: the split widths (heads, MLP, vocabulary) are 1/t; with sequence
// parallelism the residual stream and the LayerNorms keep N/t token rows.
typedef struct { size_t t, C, Cl, Vl, BT, Nl, att; } Shapes;
static Shapes shapes(const GPT *g, int B, int T) {
    const GPTConfig *c = &g->cfg;
    Shapes s;
    s.t = g->tp.size;
    s.C = c->n_embd;
    s.Cl = s.C / s.t;
    s.Vl = gpt_vocab_block(c, (int)s.t);
    s.BT = (size_t)B * T;
    s.Nl = g->tp.sp ? s.BT / s.t : s.BT;
    s.att = (size_t)B * (c->n_head / s.t) * T * T;
    return s;
}

// Per layer, per token row: ln1 C, stats 2, res_att C, ln2 C, stats 2, res_mlp C on
// the residual stream's rows; qkv 3C, atty C, fch 4C, fch_gelu 4C (1/t of each) on
// every token: 16C + 4 per token when t = 1, plus the attention matrix.
static size_t layer_floats(const Shapes *s) {
    return s->Nl * (4 * s->C + 4) + s->BT * 12 * s->Cl + s->att;
}

// What layer l keeps for its backward (gpt_set_recompute): a whole layer, all but
// the attention matrix, or only its output. Tensors it does not keep stay NULL.
static size_t layer_kept_floats(const GPT *g, const Shapes *s, int l) {
    if (gpt_layer_recomputed(g, l)) return s->Nl * s->C;
    return layer_floats(s) - (g->recompute == GPT_RECOMPUTE_SELECTIVE ? s->att : 0);
}

// Points the tensors of one layer into the buffer at *p (advancing it), those it keeps.
static void take_layer(LayerActs *x, float **p, const Shapes *s, int full, int att) {
    size_t C = s->C, Nl = s->Nl, BT = s->BT, Cl = s->Cl;
#define TAKE(n) (*p += (n), *p - (n))
    if (full) {
        x->ln1 = TAKE(Nl * C); x->ln1_mean = TAKE(Nl); x->ln1_rstd = TAKE(Nl);
        x->qkv = TAKE(BT * 3 * Cl); x->atty = TAKE(BT * Cl);
        x->att = att ? TAKE(s->att) : NULL;
        x->res_att = TAKE(Nl * C);
        x->ln2 = TAKE(Nl * C); x->ln2_mean = TAKE(Nl); x->ln2_rstd = TAKE(Nl);
        x->fch = TAKE(BT * 4 * Cl); x->fch_gelu = TAKE(BT * 4 * Cl);
    }
    x->res_mlp = TAKE(Nl * C);
#undef TAKE
}

void gpt_acts_alloc(GPT *g, GPTActs *a, int B, int T) {
    const GPTConfig *c = &g->cfg;
    CHECK(B >= 1 && T >= 1 && T <= c->seq_len, "batch %dx%d: need B >= 1 and 1 <= T <= %d", B,
          T, c->seq_len);
    char err[200];
    CHECK(gpt_tp_error(c, g->tp.size, g->tp.sp, B, T, err, sizeof err) == NULL, "%s", err);
    Shapes s = shapes(g, B, T);
    size_t C = s.C, Nl = s.Nl, BT = s.BT;
    // A pipeline stage saves its own layers only, the embedding's output (or the
    // input it received) always, and the head's tensors on the last stage.
    size_t head = g->has_head ? Nl * (C + 2) + BT * s.Vl + BT + (s.t > 1 ? 2 * BT : 0) : 0;
    memset(a, 0, sizeof *a);
    a->B = B;
    a->T = T;
    a->floats = Nl * C + head;
    for (int l = g->l0; l < g->l1; l++) a->floats += layer_kept_floats(g, &s, l);
    a->buffer = mem_alloc(g->ctx, MEM_ACTIVATIONS, a->floats * sizeof(float));
    float *p = a->buffer;
#define TAKE(n) (p += (n), p - (n))
    a->encoded = TAKE(Nl * C);
    a->layers = calloc((size_t)c->n_layer, sizeof *a->layers);
    CHECK(a->layers, "out of host memory");
    for (int l = g->l0; l < g->l1; l++)
        take_layer(&a->layers[l], &p, &s, !gpt_layer_recomputed(g, l),
                   g->recompute != GPT_RECOMPUTE_SELECTIVE);
    if (g->has_head) {
        a->lnf = TAKE(Nl * C); a->lnf_mean = TAKE(Nl); a->lnf_rstd = TAKE(Nl);
        a->logits = TAKE(BT * s.Vl); a->losses = TAKE(BT);
        a->vocab_stats = s.t > 1 ? TAKE(2 * BT) : NULL;
    }
#undef TAKE
    CHECK((size_t)(p - a->buffer) == a->floats, "activation layout mismatch");
    // Token ids live with the activations: they are inputs the backward pass needs.
    a->tokens = mem_alloc(g->ctx, MEM_ACTIVATIONS, BT * sizeof(int));
    a->targets = mem_alloc(g->ctx, MEM_ACTIVATIONS, BT * sizeof(int));
    a->host_tokens = calloc(BT, sizeof(int));
    CHECK(a->host_tokens, "out of host memory");
}

void gpt_acts_free(GPT *g, GPTActs *a) {
    if (!a->buffer) return;
    size_t BT = (size_t)a->B * a->T;
    mem_free(g->ctx, MEM_ACTIVATIONS, a->buffer, a->floats * sizeof(float));
    mem_free(g->ctx, MEM_ACTIVATIONS, a->tokens, BT * sizeof(int));
    mem_free(g->ctx, MEM_ACTIVATIONS, a->targets, BT * sizeof(int));
    free(a->layers);
    free(a->host_tokens);
    memset(a, 0, sizeof *a);
}

void gpt_alloc_acts(GPT *g, int B, int T) {
    CHECK(!g->acts.buffer, "activations already allocated");
    gpt_acts_alloc(g, &g->acts, B, T);
    gpt_alloc_workspace(g, B, T);
}

void gpt_alloc_workspace(GPT *g, int B, int T) {
    CHECK(!g->work_buffer, "workspace already allocated");
    // Workspace: gradients of activations, reused by every layer in turn; with
    // tensor parallelism also the collectives' full-size buffers.
    Shapes s = shapes(g, B, T);
    size_t C = s.C, Nl = s.Nl, BT = s.BT, Cl = s.Cl;
    size_t sp_full = g->tp.sp ? BT * C : 0, vocab_work = s.t > 1 ? s.t * BT : 0;
    g->work_floats = 2 * Nl * C + BT * Cl + BT * 3 * Cl + 2 * BT * 4 * Cl + s.att + 2 * sp_full +
                     vocab_work;
    g->work_buffer = mem_alloc(g->ctx, MEM_WORKSPACE, g->work_floats * sizeof(float));
    float *p = g->work_buffer;
#define TAKE(n) (p += (n), p - (n))
    g->dres = TAKE(Nl * C); g->dln = TAKE(Nl * C); g->datty = TAKE(BT * Cl);
    g->dqkv = TAKE(BT * 3 * Cl); g->dbig = TAKE(BT * 4 * Cl); g->dbig2 = TAKE(BT * 4 * Cl);
    g->datt = TAKE(s.att);
    g->sp_full = sp_full ? TAKE(sp_full) : NULL;
    g->sp_dfull = sp_full ? TAKE(sp_full) : NULL;
    g->vocab_work = vocab_work ? TAKE(vocab_work) : NULL;
#undef TAKE
    CHECK((size_t)(p - g->work_buffer) == g->work_floats, "workspace layout mismatch");
    // What recompute rematerialises, one layer at a time, for every micro-batch in
    // flight: activations (the calculator counts them there), but one per model.
    int any_full = 0;
    for (int l = g->l0; l < g->l1; l++) any_full |= gpt_layer_recomputed(g, l);
    g->remat_floats = any_full ? layer_floats(&s)
                      : g->recompute == GPT_RECOMPUTE_SELECTIVE && g->l1 > g->l0 ? s.att : 0;
    if (g->remat_floats) {
        g->remat_buffer = mem_alloc(g->ctx, MEM_ACTIVATIONS, g->remat_floats * sizeof(float));
        p = g->remat_buffer;
        if (any_full) take_layer(&g->remat, &p, &s, 1, 1);
        else g->remat.att = p;
    }
    g->B = B;
    g->T = T;
}

void gpt_set_recompute(GPT *g, GPTRecompute level, int every) {
    CHECK(!g->acts.buffer && !g->work_buffer, "gpt_set_recompute after the activations were "
          "allocated");
    CHECK(level >= GPT_RECOMPUTE_NONE && level <= GPT_RECOMPUTE_FULL && every >= 1,
          "recompute level %d every %d", (int)level, every);
    g->recompute = level;
    g->recompute_every = every;
}

int gpt_layer_recomputed(const GPT *g, int l) {
    int k = g->recompute_every > 0 ? g->recompute_every : 1;
    return g->recompute == GPT_RECOMPUTE_FULL && l % k == 0;
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

int gpt_recipe_master(GPTRecipe r) {
    return r == PREC_MIXED_BF16 || r == PREC_MIXED_FP16 || r == PREC_FP8;
}

DType gpt_recipe_dtype(GPTRecipe r) {
    static const DType dtypes[PREC_COUNT] = {DT_F32, DT_BF16, DT_F16, DT_BF16, DT_BF16, DT_BF16};
    CHECK(r >= 0 && r < PREC_COUNT, "precision recipe %d", (int)r);
    return dtypes[r];
}

void gpt_set_precision(GPT *g, GPTRecipe r, uint64_t seed) {
    g->prec.recipe = r;
    g->prec.dtype = gpt_recipe_dtype(r);
    g->prec.master = gpt_recipe_master(r);
    if (r == PREC_FP8) {
        CHECK(!g->tp.ops, "the fp8 recipe casts the serial linear layers: not with tensor "
              "parallelism");
        gpt_fp8_enable(g, GPT_FP8_HISTORY);
    }
    g->prec.stochastic = r == PREC_BF16_SR;
    g->prec.loss_scale = 1.0f;
    g->prec.seed = seed;
    // Every GEMM input is now a bf16 value (rounded where written): the backend may
    // read them as bf16 (ctx.h's gemm_dtype; the CUDA tensor cores). Not for fp16
    // (11 significant bits to bf16's 8), nor fp8, whose GEMMs read fp8(x s) / s with
    // s = fp8_max / amax, not a power of two: the quotient has up to 24 bits.
    g->ctx->gemm_dtype = g->prec.dtype == DT_BF16 && r != PREC_FP8 ? DT_BF16 : DT_F32;
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
    gpt_fp8_free(g);
    if (g->work_buffer) mem_free(ctx, MEM_WORKSPACE, g->work_buffer, g->work_floats * sizeof(float));
    if (g->remat_buffer)
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
    if (g->fp8) {  // the fp8 recipe: the GEMM reads fp8 casts (model_fp8.c)
        gpt_fp8_linear_forward(g, out, inp, w, b, N, C, OC);
        return;
    }
    g->ctx->ops->matmul_forward(g->ctx, out, inp, w, b, N, C, OC);
}
static void serial_linear_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                                   const float *inp, const float *w, int N, int C, int OC) {
    if (g->fp8) {
        gpt_fp8_linear_backward(g, dinp, dw, db, dout, inp, w, N, C, OC);
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
};
const GPTParallelOps *gpt_layers(const GPT *g) { return g->tp.ops ? g->tp.ops : &serial_layers; }

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
    g->ctx->ops->attention_forward(g->ctx, a->atty, a->att, a->qkv, B, T, Cl, NHl);
    gpt_round(g, a->att, (size_t)B * NHl * T * T);
    gpt_round(g, a->atty, (size_t)B * T * Cl);
}

// Shapes in the blocks are this rank's: with tensor parallelism over t ranks each
// holds NH/t heads (C/t of the attention's width) and 4C/t of the MLP's.
void gpt_layer_forward(GPT *g, const LayerActs *a, const float *x, int l, int B, int T) {
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

