// vocab_embed.c — the vocabulary-parallel embedding (Megatron-LM's
// VocabParallelEmbedding).
//
// wte's V rows are split in t blocks of ceil(V/t) (the last ones padded with
// zero rows that no token id reaches). A rank looks up the tokens whose ids it
// holds and writes zeros for the others; since each id lives on exactly one
// rank, the sum over the group (g: an all-reduce, or with SP a reduce-scatter)
// is the whole lookup. The positions, replicated, are added once afterwards.
//
// The same wte is the LM head (tied): there it is a column-parallel layer over
// the vocabulary, each rank computing its block of the logits (model.c).
#include "ops.h"
#include "tp.h"

int tp_vocab_range(const GPT *g, int *lo, int *valid) {
    int Vl = gpt_vocab_block(&g->cfg, g->tp.size);
    *lo = g->tp.rank * Vl;
    int left = g->cfg.vocab - *lo;
    *valid = left < 0 ? 0 : left < Vl ? left : Vl;
    return Vl;
}

void tp_embed_forward(GPT *g, float *out, const float *wte, const float *wpe, int B, int T) {
    const Ops *o = g->ctx->ops;
    int N = B * T, C = g->cfg.n_embd, lo, valid;
    int Vl = tp_vocab_range(g, &lo, &valid);
    float *partial = tp_partial_buffer(g, out);
    o->embedding_lookup_forward(g->ctx, partial, g->acts.tokens, wte, lo, Vl, N, C);
    tp_g_forward(g, out, partial, N, C);
    // This rank's rows of the residual stream are token rows row0 .. row0 + rows.
    int rows = g->tp.sp ? N / g->tp.size : N, row0 = g->tp.sp ? g->tp.rank * rows : 0;
    o->position_forward(g->ctx, out, wpe, row0, rows, T, C);
}

void tp_embed_backward(GPT *g, float *dwte, float *dwpe, const float *dout, int B, int T) {
    const Ops *o = g->ctx->ops;
    int N = B * T, C = g->cfg.n_embd, lo, valid;
    int Vl = tp_vocab_range(g, &lo, &valid);
    // Every token's gradient (gathered with SP), each rank keeping its ids' rows.
    // wpe's gradient from the whole gradient too: the same on every rank.
    const float *d = tp_g_backward(g, dout, N, C);
    o->embedding_lookup_backward(g->ctx, dwte, d, g->acts.tokens, g->acts.host_tokens, lo, Vl, N, C);
    o->position_backward(g->ctx, dwpe, d, 0, N, T, C);
}
