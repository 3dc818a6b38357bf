// model.c — the GPT: parameter layout, initialisation, forward and backward.
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
#include "rng.h"

// ---------------------------------------------------------------- config

int gpt_preset(const char *name, GPTConfig *out) {
    static const struct { const char *name; GPTConfig cfg; } presets[] = {
        {"tiny", {2, 64, 4, 32, 256}},          // tests: runs in milliseconds
        {"small", {4, 256, 4, 128, 256}},       // demos and bench-core: byte-level, 3.3M params
        {"gpt2-124m", {12, 768, 12, 1024, 50257}},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) { *out = presets[i].cfg; return 0; }
    return -1;
}

const char *gpt_preset_names(void) { return "tiny|small|gpt2-124m"; }

const char *gpt_config_error(const GPTConfig *c, char *buf, size_t n) {
    if (c->n_layer < 1) snprintf(buf, n, "--layers must be at least 1 (got %d)", c->n_layer);
    else if (c->n_embd < 1) snprintf(buf, n, "--width must be at least 1 (got %d)", c->n_embd);
    else if (c->n_head < 1) snprintf(buf, n, "--heads must be at least 1 (got %d)", c->n_head);
    else if (c->seq_len < 1) snprintf(buf, n, "--seq must be at least 1 (got %d)", c->seq_len);
    else if (c->vocab < 2) snprintf(buf, n, "--vocab must be at least 2 (got %d)", c->vocab);
    else if (c->n_embd % c->n_head != 0)
        snprintf(buf, n, "--heads %d does not divide --width %d (head size must be whole)",
                 c->n_head, c->n_embd);
    else return NULL;
    return buf;
}

// ---------------------------------------------------------------- layout

// The tensors of one block, in order: name suffix, rows, cols (in units of C), decay.
typedef struct { const char *name; int rows_c, cols_c, decay; } BlockTensor;
static const BlockTensor block_tensors[] = {
    {"ln_1.weight", 0, 1, 0},        {"ln_1.bias", 0, 1, 0},
    {"attn.c_attn.weight", 3, 1, 1}, {"attn.c_attn.bias", 0, 3, 0},
    {"attn.c_proj.weight", 1, 1, 1}, {"attn.c_proj.bias", 0, 1, 0},
    {"ln_2.weight", 0, 1, 0},        {"ln_2.bias", 0, 1, 0},
    {"mlp.c_fc.weight", 4, 1, 1},    {"mlp.c_fc.bias", 0, 4, 0},
    {"mlp.c_proj.weight", 1, 4, 1},  {"mlp.c_proj.bias", 0, 1, 0},
};
enum { LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB,
       NBLOCK };

int gpt_num_slices(const GPTConfig *c) { return 2 + NBLOCK * c->n_layer + 2; }

void gpt_fill_slices(const GPTConfig *c, ParamSlice *s) {
    size_t off = 0;
    int i = 0, C = c->n_embd, L = c->n_layer;
#define ADD(nm, r, cl, grp, dec)                                                    \
    do {                                                                          \
        snprintf(s[i].name, sizeof s[i].name, "%s", nm);                          \
        s[i].offset = off; s[i].rows = (r); s[i].cols = (cl);                     \
        s[i].numel = (size_t)(r) * (size_t)(cl); s[i].group = (grp); s[i].decay = (dec); \
        off += s[i].numel; i++;                                                   \
    } while (0)
    ADD("wte", c->vocab, C, 0, 1);
    ADD("wpe", c->seq_len, C, 0, 1);
    for (int l = 0; l < L; l++)
        for (int k = 0; k < NBLOCK; k++) {
            const BlockTensor *bt = &block_tensors[k];
            char nm[48];
            snprintf(nm, sizeof nm, "h.%d.%s", l, bt->name);
            int rows = bt->rows_c ? bt->rows_c * C : 1;
            ADD(nm, rows, bt->cols_c * C, 1 + l, bt->decay);
        }
    ADD("ln_f.weight", 1, C, L + 1, 0);
    ADD("ln_f.bias", 1, C, L + 1, 0);
#undef ADD
}

size_t gpt_num_params(const GPTConfig *c) {
    size_t C = c->n_embd;
    // per block: 2 layernorms (4C) + qkv (3C^2 + 3C) + proj (C^2 + C) + fc (4C^2 + 4C)
    // + fc proj (4C^2 + C) = 12C^2 + 13C
    return (size_t)c->vocab * C + (size_t)c->seq_len * C + c->n_layer * (12 * C * C + 13 * C) +
           2 * C;
}

double gpt_flops_per_token(const GPTConfig *c, int T) {
    // 6N for the weights (2 forward + 4 backward per parameter per token) plus
    // attention: 12 L H Q T (Q = head size), the PaLM / nanoGPT formula. N excludes
    // wpe, whose "multiply" is a lookup.
    double N = (double)gpt_num_params(c) - (double)c->seq_len * c->n_embd;
    double Q = (double)c->n_embd / c->n_head;
    return 6.0 * N + 12.0 * c->n_layer * c->n_head * Q * T;
}

void gpt_group_range(const GPT *g, int group, size_t *begin, size_t *end) {
    *begin = g->group_offset[group];
    *end = g->group_offset[group + 1];
}

const ParamSlice *gpt_find_slice(const GPT *g, const char *name) {
    for (int i = 0; i < g->n_slices; i++)
        if (strcmp(g->slices[i].name, name) == 0) return &g->slices[i];
    return NULL;
}

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
static int block_slice(int l, int k) { return 2 + l * NBLOCK + k; }
static int lnf_slice(const GPT *g) { return 2 + NBLOCK * g->cfg.n_layer; }

// Tells the strategy (if any) that a group's weights or gradients are about to be used.
static void use(GPT *g, int group, int need) {
    if (g->use_hook) g->use_hook(g, group, need, g->use_arg);
    CHECK(!(need & GPT_NEED_PARAMS) || g->gparams[group], "group %d's weights are not "
          "materialised (a sharded strategy must gather them in its use hook)", group);
    CHECK(!(need & GPT_NEED_GRADS) || g->ggrads[group], "group %d has no gradient buffer (call "
          "gpt_alloc_grads, or a sharded strategy must provide one in its use hook)", group);
}

// ---------------------------------------------------------------- set-up

void gpt_init_layout(GPT *g, Ctx *ctx, const GPTConfig *cfg) {
    char err[160];
    CHECK(gpt_config_error(cfg, err, sizeof err) == NULL, "%s", err);
    memset(g, 0, sizeof *g);
    g->cfg = *cfg;
    g->ctx = ctx;
    g->n_slices = gpt_num_slices(cfg);
    g->slices = calloc((size_t)g->n_slices, sizeof *g->slices);
    g->group_offset = calloc((size_t)cfg->n_layer + 3, sizeof *g->group_offset);
    g->gparams = calloc((size_t)cfg->n_layer + 2, sizeof *g->gparams);
    g->ggrads = calloc((size_t)cfg->n_layer + 2, sizeof *g->ggrads);
    CHECK(g->slices && g->group_offset && g->gparams && g->ggrads,
          "out of host memory for the slice table");
    gpt_fill_slices(cfg, g->slices);
    const ParamSlice *last = &g->slices[g->n_slices - 1];
    g->n_params = last->offset + last->numel;
    CHECK(g->n_params == gpt_num_params(cfg), "slice table disagrees with gpt_num_params");
    for (int i = g->n_slices - 1; i >= 0; i--) g->group_offset[g->slices[i].group] = g->slices[i].offset;
    g->group_offset[cfg->n_layer + 2] = g->n_params;
}

void gpt_initial_params(const GPT *g, uint64_t seed, size_t lo, size_t hi, float *out) {
    CHECK(lo <= hi && hi <= g->n_params, "initial weights [%zu, %zu) outside the %zu params", lo,
          hi, g->n_params);
    // GPT-2 initialisation, drawn in slice order from one stream, so that every
    // device and every sharding starts from the same numbers. A shard still draws
    // the stream up to its end (one slice at a time), keeping only its part.
    size_t biggest = 0;  // scratch for one matrix at a time
    for (int i = 0; i < g->n_slices; i++)
        if (g->slices[i].rows > 1 && g->slices[i].numel > biggest) biggest = g->slices[i].numel;
    float *tmp = malloc(biggest * sizeof(float) + 1);
    CHECK(tmp, "out of host memory initialising the weights");
    Rng rng;
    rng_seed(&rng, seed);
    float resid_std = 0.02f / sqrtf(2.0f * g->cfg.n_layer);
    for (int i = 0; i < g->n_slices && g->slices[i].offset < hi; i++) {
        const ParamSlice *s = &g->slices[i];
        size_t end = s->offset + s->numel;
        size_t a = s->offset > lo ? s->offset : lo, b = end < hi ? end : hi;  // kept: [a, b)
        if (s->rows > 1) {  // a matrix: the stream moves on whether or not we keep it
            int resid = strstr(s->name, "c_proj.weight") != NULL;
            rng_fill_normal(&rng, tmp, s->numel, 0.0f, resid ? resid_std : 0.02f);
            if (a < b) memcpy(out + (a - lo), tmp + (a - s->offset), (b - a) * sizeof(float));
        } else {  // a vector: layernorm weights 1, every bias 0
            float v = strstr(s->name, "ln_") && strstr(s->name, ".weight") ? 1.0f : 0.0f;
            for (size_t j = a; j < b; j++) out[j - lo] = v;
        }
    }
    free(tmp);
}

void gpt_init(GPT *g, Ctx *ctx, const GPTConfig *cfg, uint64_t seed) {
    gpt_init_layout(g, ctx, cfg);
    g->params = mem_alloc(ctx, MEM_PARAMS, g->n_params * sizeof(float));
    float *host = malloc(g->n_params * sizeof(float));
    CHECK(host, "out of host memory initialising %zu parameters", g->n_params);
    gpt_initial_params(g, seed, 0, g->n_params, host);
    ctx->ops->to_device(ctx, g->params, host, g->n_params * sizeof(float));
    free(host);
    for (int k = 0; k < cfg->n_layer + 2; k++) g->gparams[k] = g->params + g->group_offset[k];
}

void gpt_alloc_grads(GPT *g) {
    if (!g->grads) g->grads = mem_alloc(g->ctx, MEM_GRADS, g->n_params * sizeof(float));
    for (int k = 0; k < g->cfg.n_layer + 2; k++) g->ggrads[k] = g->grads + g->group_offset[k];
}

void gpt_alloc_acts(GPT *g, int B, int T) {
    const GPTConfig *c = &g->cfg;
    CHECK(B >= 1 && T >= 1 && T <= c->seq_len, "batch %dx%d: need B >= 1 and 1 <= T <= %d", B,
          T, c->seq_len);
    CHECK(!g->act_buffer, "activations already allocated");
    size_t C = c->n_embd, NH = c->n_head, L = c->n_layer, V = c->vocab;
    size_t BT = (size_t)B * T, att = (size_t)B * NH * T * T;
    // Saved per layer: ln1 C, stats 2, qkv 3C, atty C, att, res_att C, ln2 C, stats 2,
    // fch 4C, fch_gelu 4C, res_mlp C  = 16C + 4 per token, plus the attention matrix.
    size_t per_layer = BT * (16 * C + 4) + att;
    g->act_floats = BT * C + L * per_layer + BT * (C + 2) + BT * V + BT;
    g->act_buffer = mem_alloc(g->ctx, MEM_ACTIVATIONS, g->act_floats * sizeof(float));
    float *p = g->act_buffer;
#define TAKE(n) (p += (n), p - (n))
    g->encoded = TAKE(BT * C);
    g->layers = calloc(L, sizeof *g->layers);
    CHECK(g->layers, "out of host memory");
    for (size_t l = 0; l < L; l++) {
        LayerActs *a = &g->layers[l];
        a->ln1 = TAKE(BT * C); a->ln1_mean = TAKE(BT); a->ln1_rstd = TAKE(BT);
        a->qkv = TAKE(BT * 3 * C); a->atty = TAKE(BT * C); a->att = TAKE(att);
        a->res_att = TAKE(BT * C);
        a->ln2 = TAKE(BT * C); a->ln2_mean = TAKE(BT); a->ln2_rstd = TAKE(BT);
        a->fch = TAKE(BT * 4 * C); a->fch_gelu = TAKE(BT * 4 * C); a->res_mlp = TAKE(BT * C);
    }
    g->lnf = TAKE(BT * C); g->lnf_mean = TAKE(BT); g->lnf_rstd = TAKE(BT);
    g->logits = TAKE(BT * V); g->losses = TAKE(BT);
    CHECK((size_t)(p - g->act_buffer) == g->act_floats, "activation layout mismatch");

    // Workspace: gradients of activations, reused by every layer in turn.
    g->work_floats = BT * C * 3 + BT * 3 * C + 2 * BT * 4 * C + att;
    g->work_buffer = mem_alloc(g->ctx, MEM_WORKSPACE, g->work_floats * sizeof(float));
    p = g->work_buffer;
    g->dres = TAKE(BT * C); g->dln = TAKE(BT * C); g->datty = TAKE(BT * C);
    g->dqkv = TAKE(BT * 3 * C); g->dbig = TAKE(BT * 4 * C); g->dbig2 = TAKE(BT * 4 * C);
    g->datt = TAKE(att);
#undef TAKE
    // Token ids live with the activations: they are inputs the backward pass needs.
    g->tokens = mem_alloc(g->ctx, MEM_ACTIVATIONS, BT * sizeof(int));
    g->targets = mem_alloc(g->ctx, MEM_ACTIVATIONS, BT * sizeof(int));
    g->host_tokens = calloc(BT, sizeof(int));
    CHECK(g->host_tokens, "out of host memory");
    g->B = B;
    g->T = T;
}

void gpt_free(GPT *g) {
    Ctx *ctx = g->ctx;
    size_t BT = (size_t)g->B * g->T;
    if (g->act_buffer) {
        mem_free(ctx, MEM_ACTIVATIONS, g->act_buffer, g->act_floats * sizeof(float));
        mem_free(ctx, MEM_WORKSPACE, g->work_buffer, g->work_floats * sizeof(float));
        mem_free(ctx, MEM_ACTIVATIONS, g->tokens, BT * sizeof(int));
        mem_free(ctx, MEM_ACTIVATIONS, g->targets, BT * sizeof(int));
    }
    if (g->grads) mem_free(ctx, MEM_GRADS, g->grads, g->n_params * sizeof(float));
    if (g->params) mem_free(ctx, MEM_PARAMS, g->params, g->n_params * sizeof(float));
    free(g->gparams);
    free(g->ggrads);
    free(g->layers);
    free(g->host_tokens);
    free(g->slices);
    free(g->group_offset);
    memset(g, 0, sizeof *g);
}

// ---------------------------------------------------------------- forward

const float *gpt_layer_output(const GPT *g, int l) {
    return l < 0 ? g->encoded : g->layers[l].res_mlp;
}

void gpt_embed_forward(GPT *g, int B, int T) {
    const Ops *o = g->ctx->ops;
    use(g, 0, GPT_NEED_PARAMS);
    o->embedding_forward(g->ctx, g->encoded, g->tokens, param_at(g, 0), param_at(g, 1), B, T,
                         g->cfg.n_embd);
}

void gpt_blocks_forward(GPT *g, const float *x, int l0, int l1, int B, int T) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    int C = g->cfg.n_embd, NH = g->cfg.n_head, N = B * T;
    size_t NC = (size_t)N * C;
    for (int l = l0; l < l1; l++) {
        LayerActs *a = &g->layers[l];
        use(g, 1 + l, GPT_NEED_PARAMS);
#define W(k) param_at(g, block_slice(l, k))
        // attention branch: res_att = x + c_proj(attn(c_attn(ln_1(x))))
        o->layernorm_forward(ctx, a->ln1, a->ln1_mean, a->ln1_rstd, x, W(LN1W), W(LN1B), N, C);
        o->matmul_forward(ctx, a->qkv, a->ln1, W(QKVW), W(QKVB), N, C, 3 * C);
        o->attention_forward(ctx, a->atty, a->att, a->qkv, B, T, C, NH);
        o->matmul_forward(ctx, a->res_att, a->atty, W(ATTPROJW), W(ATTPROJB), N, C, C);
        o->accumulate(ctx, a->res_att, x, 1.0f, NC);
        // MLP branch: res_mlp = res_att + c_proj(gelu(c_fc(ln_2(res_att))))
        o->layernorm_forward(ctx, a->ln2, a->ln2_mean, a->ln2_rstd, a->res_att, W(LN2W), W(LN2B),
                             N, C);
        o->matmul_forward(ctx, a->fch, a->ln2, W(FCW), W(FCB), N, C, 4 * C);
        o->gelu_forward(ctx, a->fch_gelu, a->fch, 4 * NC);
        o->matmul_forward(ctx, a->res_mlp, a->fch_gelu, W(FCPROJW), W(FCPROJB), N, 4 * C, C);
        o->accumulate(ctx, a->res_mlp, a->res_att, 1.0f, NC);
#undef W
        x = a->res_mlp;
    }
}

float gpt_head_forward(GPT *g, const float *x, int B, int T, int has_targets) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    const GPTConfig *c = &g->cfg;
    int N = B * T, C = c->n_embd, V = c->vocab, L = c->n_layer, lnw = lnf_slice(g);
    use(g, L + 1, GPT_NEED_PARAMS);
    use(g, 0, GPT_NEED_PARAMS);  // the LM head is tied to wte (group 0)
    o->layernorm_forward(ctx, g->lnf, g->lnf_mean, g->lnf_rstd, x, param_at(g, lnw),
                         param_at(g, lnw + 1), N, C);
    // The LM head is tied: logits = lnf @ wte^T, no bias.
    o->matmul_forward(ctx, g->logits, g->lnf, param_at(g, 0), NULL, N, C, V);
    g->loss = 0.0f;
    if (has_targets) {
        o->crossentropy_forward(ctx, g->losses, g->logits, g->targets, N, V);
        float *host = malloc((size_t)N * sizeof(float));
        CHECK(host, "out of host memory");
        o->to_host(ctx, host, g->losses, (size_t)N * sizeof(float));
        double sum = 0;
        for (int i = 0; i < N; i++) sum += host[i];
        free(host);
        g->loss = (float)(sum / N);
    }
    return g->loss;
}

float gpt_forward(GPT *g, const int *tokens, const int *targets, int B, int T) {
    CHECK(g->act_buffer, "gpt_forward before gpt_alloc_acts");
    CHECK(B <= g->B && T <= g->T, "batch %dx%d exceeds the %dx%d the activations were sized for",
          B, T, g->B, g->T);
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
    memcpy(g->host_tokens, tokens, BT * sizeof(int));
    ctx->ops->to_device(ctx, g->tokens, tokens, BT * sizeof(int));
    if (targets) ctx->ops->to_device(ctx, g->targets, targets, BT * sizeof(int));
    g->last_B = B;
    g->last_T = T;
    gpt_embed_forward(g, B, T);
    gpt_blocks_forward(g, g->encoded, 0, c->n_layer, B, T);
    return gpt_head_forward(g, gpt_layer_output(g, c->n_layer - 1), B, T, targets != NULL);
}

// ---------------------------------------------------------------- backward

static void fire_hook(GPT *g, int group) {
    if (g->hook) g->hook(g, group, g->hook_arg);
}

void gpt_head_backward(GPT *g, const float *x, float *dx, float dloss_scale, int B, int T) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    const GPTConfig *c = &g->cfg;
    int N = B * T, C = c->n_embd, V = c->vocab, L = c->n_layer, lnw = lnf_slice(g);
    use(g, L + 1, GPT_NEED_PARAMS | GPT_NEED_GRADS);
    // The tied weight: wte's gradient gets its first half here, its second in the
    // embedding's backward, so group 0's gradient is complete only at the very end.
    use(g, 0, GPT_NEED_PARAMS | GPT_NEED_GRADS);
    // The loss is the mean over N positions: each position's gradient is 1/N.
    // dlogits overwrite the logits in place (they are not needed afterwards).
    o->crossentropy_backward(ctx, g->logits, g->logits, g->targets, dloss_scale / N, N, V);
    o->memset0(ctx, g->dln, (size_t)N * C * sizeof(float));
    o->matmul_backward(ctx, g->dln, grad_at(g, 0), NULL, g->logits, g->lnf, param_at(g, 0), N, C,
                       V);
    o->memset0(ctx, dx, (size_t)N * C * sizeof(float));
    o->layernorm_backward(ctx, dx, grad_at(g, lnw), grad_at(g, lnw + 1), g->dln, x,
                          param_at(g, lnw), g->lnf_mean, g->lnf_rstd, N, C);
    fire_hook(g, L + 1);
}

void gpt_blocks_backward(GPT *g, const float *x, float *dx, int l0, int l1, int B, int T) {
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    int C = g->cfg.n_embd, NH = g->cfg.n_head, N = B * T;
    size_t NC = (size_t)N * C, bytes = NC * sizeof(float);
    // dx enters as d(loss)/d(output of layer l1-1). Walking down, the residual
    // connections mean each layernorm_backward simply adds its branch into dx.
    for (int l = l1 - 1; l >= l0; l--) {
        LayerActs *a = &g->layers[l];
        const float *xin = l == l0 ? x : g->layers[l - 1].res_mlp;
        use(g, 1 + l, GPT_NEED_PARAMS | GPT_NEED_GRADS);
#define W(k) param_at(g, block_slice(l, k))
#define D(k) grad_at(g, block_slice(l, k))
        // MLP branch
        o->memset0(ctx, g->dbig, 4 * bytes);
        o->matmul_backward(ctx, g->dbig, D(FCPROJW), D(FCPROJB), dx, a->fch_gelu, W(FCPROJW), N,
                           4 * C, C);
        o->memset0(ctx, g->dbig2, 4 * bytes);
        o->gelu_backward(ctx, g->dbig2, a->fch, g->dbig, 4 * NC);
        o->memset0(ctx, g->dln, bytes);
        o->matmul_backward(ctx, g->dln, D(FCW), D(FCB), g->dbig2, a->ln2, W(FCW), N, C, 4 * C);
        o->layernorm_backward(ctx, dx, D(LN2W), D(LN2B), g->dln, a->res_att, W(LN2W), a->ln2_mean,
                              a->ln2_rstd, N, C);
        // attention branch
        o->memset0(ctx, g->datty, bytes);
        o->matmul_backward(ctx, g->datty, D(ATTPROJW), D(ATTPROJB), dx, a->atty, W(ATTPROJW), N, C,
                           C);
        o->memset0(ctx, g->dqkv, 3 * bytes);
        o->attention_backward(ctx, g->dqkv, g->datt, g->datty, a->qkv, a->att, B, T, C, NH);
        o->memset0(ctx, g->dln, bytes);
        o->matmul_backward(ctx, g->dln, D(QKVW), D(QKVB), g->dqkv, a->ln1, W(QKVW), N, C, 3 * C);
        o->layernorm_backward(ctx, dx, D(LN1W), D(LN1B), g->dln, xin, W(LN1W), a->ln1_mean,
                              a->ln1_rstd, N, C);
#undef W
#undef D
        fire_hook(g, 1 + l);
    }
}

void gpt_embed_backward(GPT *g, const float *dx, int B, int T) {
    Ctx *ctx = g->ctx;
    use(g, 0, GPT_NEED_GRADS);
    ctx->ops->embedding_backward(ctx, grad_at(g, 0), grad_at(g, 1), dx, g->tokens, g->host_tokens,
                                 B, T, g->cfg.n_embd);
    fire_hook(g, 0);
}

void gpt_backward(GPT *g, float dloss_scale) {
    CHECK(g->grads || g->use_hook, "gpt_backward before gpt_alloc_grads");
    CHECK(g->last_B > 0, "gpt_backward before a gpt_forward with targets");
    int B = g->last_B, T = g->last_T, L = g->cfg.n_layer;
    gpt_head_backward(g, gpt_layer_output(g, L - 1), g->dres, dloss_scale, B, T);
    gpt_blocks_backward(g, g->encoded, g->dres, 0, L, B, T);
    gpt_embed_backward(g, g->dres, B, T);
}

void gpt_zero_grad(GPT *g) {
    CHECK(g->grads, "gpt_zero_grad: no flat gradient buffer (a sharded strategy zeroes its own)");
    g->ctx->ops->memset0(g->ctx, g->grads, g->n_params * sizeof(float));
}
