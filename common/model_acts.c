// model_acts.c — what the forward pass saves for the backward pass: the layout of
// the activations per micro-batch, the gradient workspace, what recompute keeps
// (stage 06), and the mixed recipes' 2-byte storage of the saved tensors (stage 06).
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model.h"
#include "model_internal.h"
#include "ops.h"

// This rank's shapes. Serial: t = 1, every size the whole model's. Tensor
// parallel: the split widths (heads, MLP, vocabulary) are 1/t; with sequence
// parallelism the residual stream and the LayerNorms keep N/t token rows.
typedef struct { size_t t, C, Cl, Vl, BT, Nl, att, lse; } Shapes;
static Shapes shapes(const GPT *g, int B, int T) {
    const GPTConfig *c = &g->cfg;
    Shapes s;
    s.t = g->tp.size;
    s.C = c->n_embd;
    s.Cl = s.C / s.t;
    s.Vl = gpt_vocab_block(c, (int)s.t);
    s.BT = (size_t)B * T;
    s.Nl = g->tp.sp ? s.BT / s.t : s.BT;
    // The attention keeps its (T,T) probabilities, or with flash attention only each
    // query row's log-sum-exp.
    size_t rows = (size_t)B * (c->n_head / s.t) * T;
    s.att = g->flash_attention ? 0 : rows * T;
    s.lse = g->flash_attention ? rows : 0;
    return s;
}

// Per layer, per token row: ln1 C, stats 2, res_att C, ln2 C, stats 2, res_mlp C on
// the residual stream's rows; qkv 3C, atty C, fch 4C, fch_gelu 4C (1/t of each) on
// every token: 16C + 4 per token when t = 1, plus the attention matrix (or, flash,
// the log-sum-exp of its rows).
static size_t layer_floats(const Shapes *s) {
    return s->Nl * (4 * s->C + 4) + s->BT * 12 * s->Cl + s->att + s->lse;
}

// The mixed recipes keep a layer's saved tensors in 2 bytes a value (bf16 or fp16):
// every one of them was rounded to that type where it was written (gpt_round), so
// the 2-byte copy loses nothing. The layer computes in fp32 in one shared layer of
// buffers (g->remat, the window), as a GPU computes in registers: after the layer's
// forward the window is packed into the layer's 2-byte copy, and before its
// backward unpacked again. What stays fp32 in every layer: the LayerNorm statistics
// (never rounded: they are fp32 in every framework) and the layer's output res_mlp,
// the next layer's input (the residual stream, which a pipeline stage also sends).
// The head's tensors (ln_f, the logits the loss reads in fp32) stay fp32 too.
int gpt_acts_packed(const GPT *g) { return dtype_size(g->prec.dtype) == 2 && !g->acts_fp32; }
void gpt_set_acts_fp32(GPT *g, int on) {
    CHECK(!g->acts.buffer && !g->work_buffer, "gpt_set_acts_fp32 after the activations were "
          "allocated");
    g->acts_fp32 = on;
}
int gpt_layer_packed(const GPT *g, int l) {
    return gpt_acts_packed(g) && !gpt_layer_recomputed(g, l);
}

// A packed layer's 2-byte tensors, per token row: ln1, res_att, ln2 C each on the
// residual stream's rows; qkv 3C, atty C, fch 4C, fch_gelu 4C on every token; the
// attention matrix unless selective recompute drops it.
static size_t layer_packed_elems(const GPT *g, const Shapes *s) {
    return s->Nl * 3 * s->C + s->BT * 12 * s->Cl +
           (g->recompute == GPT_RECOMPUTE_SELECTIVE ? 0 : s->att);
}

// What layer l keeps in fp32 for its backward (gpt_set_recompute): a whole layer,
// all but the attention matrix, or only its output; a packed layer its statistics
// (the LayerNorms', and flash attention's log-sum-exp) and its output. Tensors it
// does not keep stay NULL.
static size_t layer_kept_floats(const GPT *g, const Shapes *s, int l) {
    if (gpt_layer_recomputed(g, l)) return s->Nl * s->C;
    if (gpt_layer_packed(g, l)) return s->Nl * (s->C + 4) + s->lse;
    return layer_floats(s) - (g->recompute == GPT_RECOMPUTE_SELECTIVE ? s->att : 0);
}

// Points the tensors of one layer into the buffer at *p (advancing it), those it keeps.
static void take_layer(LayerActs *x, float **p, const Shapes *s, int full, int att) {
    size_t C = s->C, Nl = s->Nl, BT = s->BT, Cl = s->Cl;
#define TAKE(n) (*p += (n), *p - (n))
    if (full) {
        x->ln1 = TAKE(Nl * C); x->ln1_mean = TAKE(Nl); x->ln1_rstd = TAKE(Nl);
        x->qkv = TAKE(BT * 3 * Cl); x->atty = TAKE(BT * Cl);
        x->att = att && s->att ? TAKE(s->att) : NULL;
        x->lse = s->lse ? TAKE(s->lse) : NULL;
        x->res_att = TAKE(Nl * C);
        x->ln2 = TAKE(Nl * C); x->ln2_mean = TAKE(Nl); x->ln2_rstd = TAKE(Nl);
        x->fch = TAKE(BT * 4 * Cl); x->fch_gelu = TAKE(BT * 4 * Cl);
    }
    x->res_mlp = TAKE(Nl * C);
#undef TAKE
}

// A packed layer: its 2-byte tensors are the window's (the backward unpacks them
// there), its statistics and output its own, in fp32 at *p.
static void take_packed_layer(const GPT *g, LayerActs *x, float **p, uint16_t **q,
                              const Shapes *s) {
    *x = g->remat;
    if (g->recompute == GPT_RECOMPUTE_SELECTIVE) x->att = NULL;  // recomputed, not kept
#define TAKE(n) (*p += (n), *p - (n))
    x->ln1_mean = TAKE(s->Nl); x->ln1_rstd = TAKE(s->Nl);
    x->ln2_mean = TAKE(s->Nl); x->ln2_rstd = TAKE(s->Nl);
    x->res_mlp = TAKE(s->Nl * s->C);
    x->lse = s->lse ? TAKE(s->lse) : NULL;  // not a value of the recipe's type: fp32
#undef TAKE
    x->packed = *q;
    *q += layer_packed_elems(g, s);
}

// The shared layer of buffers (g->remat): a whole layer where full recompute runs a
// layer again or packed layers compute; the attention matrix alone for selective
// recompute. One per model, whatever the micro-batches in flight, charged to
// activations (the calculator counts it there). Sized for the first batch shape
// the model allocates activations for; every later one must have it.
enum { WINDOW_NONE, WINDOW_ATT, WINDOW_LAYER };
static int window_kind(const GPT *g) {
    int kind = WINDOW_NONE;
    for (int l = g->l0; l < g->l1; l++)
        if (gpt_layer_recomputed(g, l) || gpt_layer_packed(g, l)) kind = WINDOW_LAYER;
    if (kind == WINDOW_NONE && g->recompute == GPT_RECOMPUTE_SELECTIVE && g->l1 > g->l0)
        kind = WINDOW_ATT;
    return kind;
}

static void alloc_window(GPT *g, int B, int T, int kind) {
    if (g->remat_B) {
        CHECK(B == g->remat_B && T == g->remat_T, "activations for a %dx%d batch: this model's "
              "shared layer was sized for %dx%d", B, T, g->remat_B, g->remat_T);
        return;
    }
    Shapes s = shapes(g, B, T);
    g->remat_floats = kind == WINDOW_LAYER ? layer_floats(&s) : kind == WINDOW_ATT ? s.att : 0;
    if (g->remat_floats) {
        g->remat_buffer = mem_alloc(g->ctx, MEM_ACTIVATIONS, g->remat_floats * sizeof(float));
        float *p = g->remat_buffer;
        if (kind == WINDOW_LAYER) take_layer(&g->remat, &p, &s, 1, 1);
        else g->remat.att = p;
    }
    g->remat_B = B;
    g->remat_T = T;
}

void gpt_acts_alloc(GPT *g, GPTActs *a, int B, int T) {
    const GPTConfig *c = &g->cfg;
    CHECK(B >= 1 && T >= 1 && T <= c->seq_len, "batch %dx%d: need B >= 1 and 1 <= T <= %d", B,
          T, c->seq_len);
    char err[200];
    CHECK(gpt_tp_error(c, g->tp.size, g->tp.sp, B, T, err, sizeof err) == NULL, "%s", err);
    alloc_window(g, B, T, window_kind(g));  // packed layers point into it
    Shapes s = shapes(g, B, T);
    size_t C = s.C, Nl = s.Nl, BT = s.BT;
    // A pipeline stage saves its own layers only, the embedding's output (or the
    // input it received) always, and the head's tensors on the last stage.
    size_t head = g->has_head ? Nl * (C + 2) + BT * s.Vl + BT + (s.t > 1 ? 2 * BT : 0) : 0;
    memset(a, 0, sizeof *a);
    a->B = B;
    a->T = T;
    a->floats = Nl * C + head;
    for (int l = g->l0; l < g->l1; l++) {
        a->floats += layer_kept_floats(g, &s, l);
        if (gpt_layer_packed(g, l)) a->packed_elems += layer_packed_elems(g, &s);
    }
    a->buffer = mem_alloc(g->ctx, MEM_ACTIVATIONS, a->floats * sizeof(float));
    if (a->packed_elems)
        a->packed = mem_alloc(g->ctx, MEM_ACTIVATIONS, a->packed_elems * sizeof(uint16_t));
    float *p = a->buffer;
    uint16_t *q = a->packed;
#define TAKE(n) (p += (n), p - (n))
    a->encoded = TAKE(Nl * C);
    a->layers = calloc((size_t)c->n_layer, sizeof *a->layers);
    CHECK(a->layers, "out of host memory");
    for (int l = g->l0; l < g->l1; l++) {
        if (gpt_layer_packed(g, l)) take_packed_layer(g, &a->layers[l], &p, &q, &s);
        else take_layer(&a->layers[l], &p, &s, !gpt_layer_recomputed(g, l),
                        g->recompute != GPT_RECOMPUTE_SELECTIVE);
    }
    if (g->has_head) {
        a->lnf = TAKE(Nl * C); a->lnf_mean = TAKE(Nl); a->lnf_rstd = TAKE(Nl);
        a->logits = TAKE(BT * s.Vl); a->losses = TAKE(BT);
        a->vocab_stats = s.t > 1 ? TAKE(2 * BT) : NULL;
    }
#undef TAKE
    CHECK((size_t)(p - a->buffer) == a->floats && (size_t)(q - a->packed) == a->packed_elems,
          "activation layout mismatch");
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
    if (a->packed)
        mem_free(g->ctx, MEM_ACTIVATIONS, a->packed, a->packed_elems * sizeof(uint16_t));
    mem_free(g->ctx, MEM_ACTIVATIONS, a->tokens, BT * sizeof(int));
    mem_free(g->ctx, MEM_ACTIVATIONS, a->targets, BT * sizeof(int));
    free(a->layers);
    free(a->host_tokens);
    memset(a, 0, sizeof *a);
}

// Between layer l's 2-byte copy (in g->acts) and the window, for a (B,T) batch no
// larger than the activations' (whose sizes place the tensors in the copy).
static void move_packed(GPT *g, int l, int B, int T, int pack) {
    Ctx *ctx = g->ctx;
    const LayerActs *x = &g->acts.layers[l];
    CHECK(x->packed, "layer %d has no 2-byte copy (not packed, or not this stage's)", l);
    Shapes sa = shapes(g, g->acts.B, g->acts.T), sb = shapes(g, B, T);
    float *t[] = {x->ln1, x->qkv, x->atty, x->res_att, x->ln2, x->fch, x->fch_gelu, x->att};
    size_t at[] = {sa.Nl * sa.C, sa.BT * 3 * sa.Cl, sa.BT * sa.Cl, sa.Nl * sa.C, sa.Nl * sa.C,
                   sa.BT * 4 * sa.Cl, sa.BT * 4 * sa.Cl, sa.att};
    size_t n[] = {sb.Nl * sb.C, sb.BT * 3 * sb.Cl, sb.BT * sb.Cl, sb.Nl * sb.C, sb.Nl * sb.C,
                  sb.BT * 4 * sb.Cl, sb.BT * 4 * sb.Cl, sb.att};
    uint16_t *q = x->packed;
    for (int i = 0; i < 8; q += at[i], i++) {
        if (!t[i] || !n[i]) continue;  // no attention matrix: selective recompute, flash
        if (pack) ctx->ops->pack_half(ctx, q, t[i], n[i], g->prec.dtype);
        else ctx->ops->unpack_half(ctx, t[i], q, n[i], g->prec.dtype);
    }
}
void gpt_pack_layer(GPT *g, int l, int B, int T) {
    if (gpt_layer_packed(g, l)) move_packed(g, l, B, T, 1);
}
void gpt_unpack_layer(GPT *g, int l, int B, int T) {
    if (gpt_layer_packed(g, l)) move_packed(g, l, B, T, 0);
}

void gpt_alloc_acts(GPT *g, int B, int T) {
    CHECK(!g->acts.buffer, "activations already allocated");
    gpt_acts_alloc(g, &g->acts, B, T);
    gpt_alloc_workspace(g, B, T);
}

// Workspace: gradients of activations, reused by every layer in turn; with tensor
// parallelism also the collectives' full-size buffers. Then the shared layer.
static void alloc_workspace(GPT *g, int B, int T, int window) {
    CHECK(!g->work_buffer, "workspace already allocated");
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
    alloc_window(g, B, T, window);
    g->B = B;
    g->T = T;
}

void gpt_alloc_workspace(GPT *g, int B, int T) { alloc_workspace(g, B, T, window_kind(g)); }

void gpt_alloc_workspace_shared(GPT *const *models, int n, int B, int T) {
    CHECK(n >= 1, "gpt_alloc_workspace_shared: no models");
    GPT *owner = models[0];
    int kind = WINDOW_NONE;
    for (int i = 0; i < n; i++) {
        int k = window_kind(models[i]);
        kind = k > kind ? k : kind;
        CHECK(models[i]->tp.size == owner->tp.size && models[i]->tp.sp == owner->tp.sp &&
              models[i]->cfg.n_embd == owner->cfg.n_embd && models[i]->cfg.n_head == owner->cfg.n_head,
              "gpt_alloc_workspace_shared: model %d has other shapes than model 0", i);
    }
    alloc_workspace(owner, B, T, kind);
    for (int i = 1; i < n; i++) {
        GPT *g = models[i];
        CHECK(!g->work_buffer && !g->remat_B, "gpt_alloc_workspace_shared: model %d already has a "
              "workspace", i);
        // Every pointer into the owner's two buffers; the owner frees them.
        g->work_buffer = owner->work_buffer; g->work_floats = owner->work_floats;
        g->dres = owner->dres; g->dln = owner->dln; g->datty = owner->datty;
        g->dqkv = owner->dqkv; g->dbig = owner->dbig; g->dbig2 = owner->dbig2;
        g->datt = owner->datt; g->sp_full = owner->sp_full; g->sp_dfull = owner->sp_dfull;
        g->vocab_work = owner->vocab_work;
        g->remat = owner->remat;
        g->remat_buffer = owner->remat_buffer; g->remat_floats = owner->remat_floats;
        g->remat_B = owner->remat_B; g->remat_T = owner->remat_T;
        g->B = B;
        g->T = T;
        g->scratch_borrowed = 1;
    }
}

void gpt_set_flash_attention(GPT *g, int on) {
    CHECK(!g->acts.buffer && !g->work_buffer, "gpt_set_flash_attention after the activations "
          "were allocated");
    CHECK(!on || g->recompute != GPT_RECOMPUTE_SELECTIVE, "flash attention keeps no attention "
          "matrix for selective recompute to drop: use --recompute none or full with it");
    CHECK(!on || g->ctx->ops->flash_attention_forward, "flash attention: the %s backend has no "
          "flash_attention_forward", g->ctx->ops->name);
    g->flash_attention = on;
}

void gpt_set_recompute(GPT *g, GPTRecompute level, int every) {
    CHECK(!g->acts.buffer && !g->work_buffer, "gpt_set_recompute after the activations were "
          "allocated");
    CHECK(level >= GPT_RECOMPUTE_NONE && level <= GPT_RECOMPUTE_FULL && every >= 1,
          "recompute level %d every %d", (int)level, every);
    CHECK(level == GPT_RECOMPUTE_NONE || (g->plugins && g->plugins->recompute_layer),
          "recompute %d needs the recompute plugin (g->plugins: stage 06)", (int)level);
    CHECK(level != GPT_RECOMPUTE_SELECTIVE || !g->flash_attention, "selective recompute drops "
          "the attention matrix, which flash attention does not keep: use --recompute none or "
          "full with --attention flash");
    g->recompute = level;
    g->recompute_every = every;
}

int gpt_layer_recomputed(const GPT *g, int l) {
    int k = g->recompute_every > 0 ? g->recompute_every : 1;
    return g->recompute == GPT_RECOMPUTE_FULL && l % k == 0;
}
