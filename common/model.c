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
#include "ops.h"

// Where slice i's weights and gradients are now (gparams / ggrads of its group).
static float *param_at(const GPT *g, int i) {
    const ParamSlice *s = &g->slices[i];
    return g->gparams[s->group] + (s->offset - g->group_offset[s->group]);
}
static float *grad_at(const GPT *g, int i) {
    const ParamSlice *s = &g->slices[i];
    return g->ggrads[s->group] + (s->offset - g->group_offset[s->group]);
}
// Slice index of tensor k of block l, and of the final layernorm's weight.
static int block_slice(int l, int k) { return 2 + l * GPT_BLOCK_TENSORS + k; }
static int lnf_slice(const GPT *g) { return 2 + GPT_BLOCK_TENSORS * g->cfg.n_layer; }

// Tells the strategy (if any) that a group's weights or gradients are about to be used.
static void use(GPT *g, int group, int need) {
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

void gpt_acts_alloc(GPT *g, GPTActs *a, int B, int T) {
    const GPTConfig *c = &g->cfg;
    CHECK(B >= 1 && T >= 1 && T <= c->seq_len, "batch %dx%d: need B >= 1 and 1 <= T <= %d", B,
          T, c->seq_len);
    char err[200];
    CHECK(gpt_tp_error(c, g->tp.size, g->tp.sp, B, T, err, sizeof err) == NULL, "%s", err);
    Shapes s = shapes(g, B, T);
    size_t C = s.C, Nl = s.Nl, BT = s.BT, Cl = s.Cl;
    // Saved per layer: ln1 C, stats 2, res_att C, ln2 C, stats 2, res_mlp C on the
    // residual stream's rows; qkv 3C, atty C, fch 4C, fch_gelu 4C (1/t of each)
    // on every token: 16C + 4 per token when t = 1, plus the attention matrix.
    // A pipeline stage saves its own layers only, the embedding's output (or the
    // input it received) always, and the head's tensors on the last stage.
    size_t per_layer = Nl * (4 * C + 4) + BT * 12 * Cl + s.att;
    size_t head = g->has_head ? Nl * (C + 2) + BT * s.Vl + BT + (s.t > 1 ? 2 * BT : 0) : 0;
    memset(a, 0, sizeof *a);
    a->B = B;
    a->T = T;
    a->floats = Nl * C + (size_t)(g->l1 - g->l0) * per_layer + head;
    a->buffer = mem_alloc(g->ctx, MEM_ACTIVATIONS, a->floats * sizeof(float));
    float *p = a->buffer;
#define TAKE(n) (p += (n), p - (n))
    a->encoded = TAKE(Nl * C);
    a->layers = calloc((size_t)c->n_layer, sizeof *a->layers);
    CHECK(a->layers, "out of host memory");
    for (int l = g->l0; l < g->l1; l++) {
        LayerActs *x = &a->layers[l];
        x->ln1 = TAKE(Nl * C); x->ln1_mean = TAKE(Nl); x->ln1_rstd = TAKE(Nl);
        x->qkv = TAKE(BT * 3 * Cl); x->atty = TAKE(BT * Cl); x->att = TAKE(s.att);
        x->res_att = TAKE(Nl * C);
        x->ln2 = TAKE(Nl * C); x->ln2_mean = TAKE(Nl); x->ln2_rstd = TAKE(Nl);
        x->fch = TAKE(BT * 4 * Cl); x->fch_gelu = TAKE(BT * 4 * Cl); x->res_mlp = TAKE(Nl * C);
    }
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
    g->B = B;
    g->T = T;
}

void gpt_free(GPT *g) {
    Ctx *ctx = g->ctx;
    gpt_acts_free(g, &g->acts);
    if (g->work_buffer) mem_free(ctx, MEM_WORKSPACE, g->work_buffer, g->work_floats * sizeof(float));
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
    g->ctx->ops->matmul_forward(g->ctx, out, inp, w, b, N, C, OC);
}
static void serial_linear_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                                   const float *inp, const float *w, int N, int C, int OC) {
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
static const GPTParallelOps *layers(const GPT *g) { return g->tp.ops ? g->tp.ops : &serial_layers; }
// Token rows of the residual stream on this rank: N/t with sequence parallelism.
static int stream_rows(const GPT *g, int N) { return g->tp.sp ? N / g->tp.size : N; }

// ---------------------------------------------------------------- forward

const float *gpt_layer_output(const GPT *g, int l) {
    return l < 0 ? g->acts.encoded : g->acts.layers[l].res_mlp;
}

void gpt_embed_forward(GPT *g, int B, int T) {
    use(g, 0, GPT_NEED_PARAMS);
    layers(g)->embed_forward(g, g->acts.encoded, param_at(g, 0), param_at(g, 1), B, T);
}

// Shapes in the blocks are this rank's: with tensor parallelism over t ranks each
// holds NH/t heads (C/t of the attention's width) and 4C/t of the MLP's.
void gpt_blocks_forward(GPT *g, const float *x, int l0, int l1, int B, int T) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    const GPTParallelOps *P = layers(g);
    int t = g->tp.size, C = g->cfg.n_embd, Cl = C / t, NHl = g->cfg.n_head / t, N = B * T;
    int Nl = stream_rows(g, N);
    size_t NC = (size_t)Nl * C;
    for (int l = l0; l < l1; l++) {
        LayerActs *a = &g->acts.layers[l];
        use(g, 1 + l, GPT_NEED_PARAMS);
#define W(k) param_at(g, block_slice(l, k))
        // attention branch: res_att = x + c_proj(attn(c_attn(ln_1(x))))
        o->layernorm_forward(ctx, a->ln1, a->ln1_mean, a->ln1_rstd, x, W(GPT_LN1W), W(GPT_LN1B),
                             Nl, C);
        P->column_forward(g, a->qkv, a->ln1, W(GPT_QKVW), W(GPT_QKVB), N, C, 3 * Cl);
        o->attention_forward(ctx, a->atty, a->att, a->qkv, B, T, Cl, NHl);
        P->row_forward(g, a->res_att, a->atty, W(GPT_ATTPROJW), W(GPT_ATTPROJB), N, Cl, C);
        o->accumulate(ctx, a->res_att, x, 1.0f, NC);
        // MLP branch: res_mlp = res_att + c_proj(gelu(c_fc(ln_2(res_att))))
        o->layernorm_forward(ctx, a->ln2, a->ln2_mean, a->ln2_rstd, a->res_att, W(GPT_LN2W),
                             W(GPT_LN2B), Nl, C);
        P->column_forward(g, a->fch, a->ln2, W(GPT_FCW), W(GPT_FCB), N, C, 4 * Cl);
        o->gelu_forward(ctx, a->fch_gelu, a->fch, (size_t)N * 4 * Cl);
        P->row_forward(g, a->res_mlp, a->fch_gelu, W(GPT_FCPROJW), W(GPT_FCPROJB), N, 4 * Cl, C);
        o->accumulate(ctx, a->res_mlp, a->res_att, 1.0f, NC);
#undef W
        x = a->res_mlp;
    }
}

float gpt_head_forward(GPT *g, const float *x, int B, int T, int has_targets) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    const GPTConfig *c = &g->cfg;
    int N = B * T, C = c->n_embd, L = c->n_layer, lnw = lnf_slice(g);
    int Vl = gpt_vocab_block(c, g->tp.size);
    use(g, L + 1, GPT_NEED_PARAMS);
    use(g, 0, GPT_NEED_PARAMS);  // the LM head is tied to wte (group 0)
    o->layernorm_forward(ctx, g->acts.lnf, g->acts.lnf_mean, g->acts.lnf_rstd, x, param_at(g, lnw),
                         param_at(g, lnw + 1), stream_rows(g, N), C);
    // The LM head is tied: logits = lnf @ wte^T, no bias (column-parallel over the
    // vocabulary when tensor parallel: each rank its block of the logits).
    layers(g)->column_forward(g, g->acts.logits, g->acts.lnf, param_at(g, 0), NULL, N, C, Vl);
    g->loss = 0.0f;
    if (has_targets) {
        layers(g)->crossentropy_forward(g, g->acts.losses, g->acts.logits, N);
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

// ---------------------------------------------------------------- backward

static void fire_hook(GPT *g, int group) {
    if (g->hook) g->hook(g, group, g->hook_arg);
}

void gpt_head_backward(GPT *g, const float *x, float *dx, float dloss_scale, int B, int T) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    const GPTParallelOps *P = layers(g);
    const GPTConfig *c = &g->cfg;
    int N = B * T, C = c->n_embd, L = c->n_layer, lnw = lnf_slice(g), Nl = stream_rows(g, N);
    int Vl = gpt_vocab_block(c, g->tp.size);
    use(g, L + 1, GPT_NEED_PARAMS | GPT_NEED_GRADS);
    // The tied weight: wte's gradient gets its first half here, its second in the
    // embedding's backward, so group 0's gradient is complete only at the very end.
    use(g, 0, GPT_NEED_PARAMS | GPT_NEED_GRADS);
    // The loss is the mean over N positions: each position's gradient is 1/N.
    // dlogits overwrite the logits in place (they are not needed afterwards).
    P->crossentropy_backward(g, g->acts.logits, g->acts.logits, dloss_scale / N, N);
    P->column_backward(g, g->dln, grad_at(g, 0), NULL, g->acts.logits, g->acts.lnf, param_at(g, 0), N, C,
                       Vl);
    o->memset0(ctx, dx, (size_t)Nl * C * sizeof(float));
    o->layernorm_backward(ctx, dx, grad_at(g, lnw), grad_at(g, lnw + 1), g->dln, x,
                          param_at(g, lnw), g->acts.lnf_mean, g->acts.lnf_rstd, Nl, C);
    fire_hook(g, L + 1);
}

void gpt_blocks_backward(GPT *g, const float *x, float *dx, int l0, int l1, int B, int T) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    const GPTParallelOps *P = layers(g);
    int t = g->tp.size, C = g->cfg.n_embd, Cl = C / t, NHl = g->cfg.n_head / t, N = B * T;
    int Nl = stream_rows(g, N);
    size_t big = (size_t)N * 4 * Cl * sizeof(float);
    // dx enters as d(loss)/d(output of layer l1-1). Walking down, the residual
    // connections mean each layernorm_backward simply adds its branch into dx.
    for (int l = l1 - 1; l >= l0; l--) {
        LayerActs *a = &g->acts.layers[l];
        const float *xin = l == l0 ? x : g->acts.layers[l - 1].res_mlp;
        use(g, 1 + l, GPT_NEED_PARAMS | GPT_NEED_GRADS);
#define W(k) param_at(g, block_slice(l, k))
#define D(k) grad_at(g, block_slice(l, k))
        // MLP branch
        P->row_backward(g, g->dbig, D(GPT_FCPROJW), D(GPT_FCPROJB), dx, a->fch_gelu,
                        W(GPT_FCPROJW), N, 4 * Cl, C);
        o->memset0(ctx, g->dbig2, big);
        o->gelu_backward(ctx, g->dbig2, a->fch, g->dbig, (size_t)N * 4 * Cl);
        P->column_backward(g, g->dln, D(GPT_FCW), D(GPT_FCB), g->dbig2, a->ln2, W(GPT_FCW), N, C,
                           4 * Cl);
        o->layernorm_backward(ctx, dx, D(GPT_LN2W), D(GPT_LN2B), g->dln, a->res_att, W(GPT_LN2W),
                              a->ln2_mean, a->ln2_rstd, Nl, C);
        // attention branch
        P->row_backward(g, g->datty, D(GPT_ATTPROJW), D(GPT_ATTPROJB), dx, a->atty,
                        W(GPT_ATTPROJW), N, Cl, C);
        o->memset0(ctx, g->dqkv, (size_t)N * 3 * Cl * sizeof(float));
        o->attention_backward(ctx, g->dqkv, g->datt, g->datty, a->qkv, a->att, B, T, Cl, NHl);
        P->column_backward(g, g->dln, D(GPT_QKVW), D(GPT_QKVB), g->dqkv, a->ln1, W(GPT_QKVW), N,
                           C, 3 * Cl);
        o->layernorm_backward(ctx, dx, D(GPT_LN1W), D(GPT_LN1B), g->dln, xin, W(GPT_LN1W),
                              a->ln1_mean, a->ln1_rstd, Nl, C);
#undef W
#undef D
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
    int C = g->cfg.n_embd, NH = g->cfg.n_head, N = B * T;
    size_t NC = (size_t)N * C, bytes = NC * sizeof(float);
    for (int l = l1 - 1; l >= l0; l--) {
        LayerActs *a = &g->acts.layers[l];
        const float *xin = l == l0 ? x : g->acts.layers[l - 1].res_mlp;
        float *k = keep + (size_t)(l - l0) * NC * KEEP_PER_TOKEN;
        use(g, 1 + l, GPT_NEED_PARAMS);
#define W(i) param_at(g, block_slice(l, i))
        // The same calls as gpt_blocks_backward, without the weight gradients; each
        // gradient a weight needs is kept for the weight pass.
        o->copy(ctx, k + KEEP_FCPROJ * NC, dx, bytes);
        o->memset0(ctx, g->dbig, 4 * bytes);
        o->matmul_backward(ctx, g->dbig, NULL, NULL, dx, a->fch_gelu, W(GPT_FCPROJW), N, 4 * C, C);
        o->memset0(ctx, g->dbig2, 4 * bytes);
        o->gelu_backward(ctx, g->dbig2, a->fch, g->dbig, 4 * NC);
        o->copy(ctx, k + KEEP_FC * NC, g->dbig2, 4 * bytes);
        o->memset0(ctx, g->dln, bytes);
        o->matmul_backward(ctx, g->dln, NULL, NULL, g->dbig2, a->ln2, W(GPT_FCW), N, C, 4 * C);
        o->copy(ctx, k + KEEP_LN2 * NC, g->dln, bytes);
        o->layernorm_backward(ctx, dx, NULL, NULL, g->dln, a->res_att, W(GPT_LN2W), a->ln2_mean,
                              a->ln2_rstd, N, C);
        o->copy(ctx, k + KEEP_ATTPROJ * NC, dx, bytes);
        o->memset0(ctx, g->datty, bytes);
        o->matmul_backward(ctx, g->datty, NULL, NULL, dx, a->atty, W(GPT_ATTPROJW), N, C, C);
        o->memset0(ctx, g->dqkv, 3 * bytes);
        o->attention_backward(ctx, g->dqkv, g->datt, g->datty, a->qkv, a->att, B, T, C, NH);
        o->copy(ctx, k + KEEP_QKV * NC, g->dqkv, 3 * bytes);
        o->memset0(ctx, g->dln, bytes);
        o->matmul_backward(ctx, g->dln, NULL, NULL, g->dqkv, a->ln1, W(GPT_QKVW), N, C, 3 * C);
        o->copy(ctx, k + KEEP_LN1 * NC, g->dln, bytes);
        o->layernorm_backward(ctx, dx, NULL, NULL, g->dln, xin, W(GPT_LN1W), a->ln1_mean,
                              a->ln1_rstd, N, C);
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
        use(g, 1 + l, GPT_NEED_PARAMS | GPT_NEED_GRADS);
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
    use(g, 0, GPT_NEED_GRADS);
    layers(g)->embed_backward(g, grad_at(g, 0), grad_at(g, 1), dx, B, T);
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
