// exercises/linear.c — YOUR column- and row-parallel linear layers (parts 1 and 2).
//   make grade-4 PART=column_linear      make grade-4 PART=row_linear
// Stuck on one? make hint-4 PART=<part>   (tier 1 a nudge; TIER=2, 3 more)
//
// Read the lesson's §1-2 and ../tp.h first (f and g, what each does with and without
// sequence parallelism), then ../conjugate.c (how they are built on the collectives).
// The model (common/model.c) calls these four functions for c_attn, c_fc (column)
// and the two c_proj (row); the LM head is column-parallel over the vocabulary.
//
// Shapes are this rank's: N token rows; C the local input width, OC the local
// output width; w is this rank's W_r, (OC, C). With SP (g->tp.sp) the residual stream
// on this rank has only N/t rows: f and g turn those into all N rows and back, so you
// need not count rows.
//
// THE CONTRACT (common/model.h, GPTParallelOps), for both layers: the forward writes
// out; the backward WRITES dinp and ACCUMULATES (+=) into dw and db (gradient
// accumulation: a step may run several micro-batches). Every result is what the
// serial layer y = x W^T + b gives for this rank's share, within fp32 rounding. b and
// db are NULL for the LM head (no bias).
//
// What you may use: the backend g->ctx->ops (ops.h): matmul_forward(ctx, out, inp, w,
// bias, N, C, OC) (bias may be NULL), matmul_backward(ctx, dinp, dw, dbias, dout, inp,
// w, N, C, OC) (it ACCUMULATES into dinp, dw and dbias; NULL dbias allowed),
// memset0(ctx, p, bytes); tp.h's tp_f_forward, tp_f_backward, tp_g_forward,
// tp_g_backward, tp_partial_buffer; g->sp_dfull (SP's full-width gradient scratch),
// g->tp.rank.
//
// What the grader checks (tests/test_tp.c): out, dinp, dW and db against the serial
// matmul (tp.column.*, tp.row.*) for t = 1..4, with and without SP, on DP x TP meshes;
// with vocab_ce, the whole model (logits, gradients, 10 training steps, the bytes each
// rank sends — counted against the formula in tests/test_tp.c — and the replicated
// tensors bitwise equal on every rank).
// Pitfalls: f and g swapped; a buffer matmul_backward adds into that still holds the
// previous layer's numbers; weight gradients overwritten instead of added to (right
// until gradient accumulation); the bias added more than once, or not kept replicated.
#include "ops.h"
#include "tp.h"

// Part 1: column-parallel. This rank holds W_r (OC, C): some OUTPUT features, and b_r.
// Forward: out = f(inp) @ W_r^T + b_r. Every rank needs the whole input.
void tp_column_forward(GPT *g, float *out, const float *inp, const float *w, const float *b,
                       int N, int C, int OC) {
    (void)g; (void)out; (void)inp; (void)w; (void)b; (void)N; (void)C; (void)OC;
    // TODO(exercise)
}

// Backward: dW_r and db_r from dout and the whole input; dinp, the gradient at this
// rank's (N/t rows with SP) input, is the SUM over the group of every rank's partial
// (W_r reaches only this rank's outputs): f's backward. With SP the gathered input
// was not kept (that is the memory SP saves), and the buffer the forward gathered it
// into has since held other layers' inputs.
void tp_column_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, int N, int C, int OC) {
    (void)g; (void)dinp; (void)dw; (void)db; (void)dout; (void)inp; (void)w; (void)N; (void)C;
    (void)OC;
    // TODO(exercise)
}

// Part 2: row-parallel. This rank holds W_r (OC, C): some INPUT features (the
// ones the column-parallel layer before it left here), and computes a partial sum
// of the whole output. Forward: out = g(inp @ W_r^T) + b, b replicated on every rank,
// in the sum exactly once. With SP, g's sum arrives as this rank's rows only (a
// reduce-scatter: the bytes are counted, and the right values at twice the bytes
// fail): the partial needs a full-width buffer of its own (tp_partial_buffer).
void tp_row_forward(GPT *g, float *out, const float *inp, const float *w, const float *b, int N,
                    int C, int OC) {
    (void)g; (void)out; (void)inp; (void)w; (void)b; (void)N; (void)C; (void)OC;
    // TODO(exercise)
}

// Backward: the layer's whole output gradient (g's backward) reached every rank's
// partial; from it dinp, dW_r and db as a serial layer would. db must come out the
// same on every rank: the bias is replicated and must stay so (tp.replicated, bitwise).
void tp_row_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                     const float *inp, const float *w, int N, int C, int OC) {
    (void)g; (void)dinp; (void)dw; (void)db; (void)dout; (void)inp; (void)w; (void)N; (void)C;
    (void)OC;
    // TODO(exercise)
}
