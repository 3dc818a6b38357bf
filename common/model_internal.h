// model_internal.h — what model.c (set-up, forward) and model_backward.c share:
// where a slice's weights and gradients are, and the strategy's hooks. Not for
// the stages: they see model.h only.
#pragma once
#include "model.h"
#include "ops.h"

// Where slice i's weights and gradients are now (gparams / ggrads of its group).
static inline float *param_at(const GPT *g, int i) {
    const ParamSlice *s = &g->slices[i];
    return g->gparams[s->group] + (s->offset - g->group_offset[s->group]);
}
static inline float *grad_at(const GPT *g, int i) {
    const ParamSlice *s = &g->slices[i];
    return g->ggrads[s->group] + (s->offset - g->group_offset[s->group]);
}
// Slice index of tensor k of block l, and of the final layernorm's weight.
static inline int block_slice(int l, int k) { return 2 + l * GPT_BLOCK_TENSORS + k; }
static inline int lnf_slice(const GPT *g) { return 2 + GPT_BLOCK_TENSORS * g->cfg.n_layer; }

// Tells the strategy (if any) that a group's weights or gradients are about to be
// used, and checks that they are there. Also claims the context's GEMMs for this
// model (gpt_claim_gemm).
void gpt_use(GPT *g, int group, int need);
// What the context's linear GEMMs read (ctx.h's gemm_dtype) is this model's recipe's:
// bf16 for the bf16 recipes but fp8, whose GEMMs read fp8(x s) / s with s =
// fp8_max / amax, not a power of two (up to 24 significant bits), and fp32 else (fp16
// has 11 significant bits to bf16's 8). Set by every model before it computes, so
// that models of different recipes can share a context.
static inline void gpt_claim_gemm(const GPT *g) {
    g->ctx->gemm_dtype =
        g->prec.dtype == DT_BF16 && g->prec.recipe != PREC_FP8 ? DT_BF16 : DT_F32;
}
// The layers: the serial ones, or tensor parallelism's (g->tp.ops).
const GPTParallelOps *gpt_layers(const GPT *g);
// Token rows of the residual stream on this rank: N/t with sequence parallelism.
static inline int gpt_stream_rows(const GPT *g, int N) { return g->tp.sp ? N / g->tp.size : N; }

// Rounds n values the model just wrote to the recipe's dtype (stage 06's emulation
// of low-precision storage; nothing in fp32).
static inline void gpt_round(const GPT *g, float *x, size_t n) {
    if (g->prec.dtype != DT_F32) g->ctx->ops->round_to(g->ctx, x, n, g->prec.dtype);
}

// A packed layer's tensors between its 2-byte copy in g->acts and the shared window
// (g->remat) the layer computes in: after its forward, and before its backward.
// Nothing to do for a layer that is not packed (gpt_layer_packed).
void gpt_pack_layer(GPT *g, int l, int B, int T);
void gpt_unpack_layer(GPT *g, int l, int B, int T);
