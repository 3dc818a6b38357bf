// exercises/linear.c — YOUR column- and row-parallel linear layers (parts 1 and 2).
//   make grade-4 PART=column_linear      make grade-4 PART=row_linear
//
// Read ../tp.h first (f and g, what each does with and without sequence
// parallelism), then ../conjugate.c (how they are built on the collectives).
// The model (common/model.c) calls these four functions for c_attn, c_fc (column)
// and the two c_proj (row); the LM head is column-parallel over the vocabulary.
//
// Shapes are this rank's: N token rows; C the local input width, OC the local
// output width. With SP (g->tp.sp) the residual stream on this rank has only N/t
// rows: f and g turn those into all N rows and back, so you need not count rows.
// The backend: g->ctx->ops->matmul_forward(ctx, out, inp, w, bias, N, C, OC),
// matmul_backward(ctx, dinp, dw, dbias, dout, inp, w, N, C, OC) (ACCUMULATES into
// dinp, dw and dbias: zero dinp first with memset0), memset0(ctx, p, bytes).
// Contract (common/model.h, GPTParallelOps): write dinp; accumulate dw and db.
// b and db are NULL for the LM head (no bias): matmul_forward and matmul_backward
// accept NULL there, so pass them on rather than adding the bias yourself.
#include "ops.h"
#include "tp.h"

// Part 1: column-parallel. This rank holds W_r (OC, C): some OUTPUT features.
// Forward: out = f(inp) @ W_r^T + b_r. Every rank needs the whole input.
void tp_column_forward(GPT *g, float *out, const float *inp, const float *w, const float *b,
                       int N, int C, int OC) {
    (void)g; (void)out; (void)inp; (void)w; (void)b; (void)N; (void)C; (void)OC;
    // TODO(exercise)
}

// Backward: dW_r and db_r from dout and the whole input; dinp is a PARTIAL sum
// (W_r reaches only this rank's outputs): f's backward sums it over the group.
// - With SP the whole input was not kept: get it again the way the forward did.
// - Where does the partial dinp go before f's backward? Without SP, dinp itself
//   (f sums in place); with SP, the full-width scratch g->sp_dfull (f
//   reduce-scatters it and writes this rank's rows into dinp).
void tp_column_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, int N, int C, int OC) {
    (void)g; (void)dinp; (void)dw; (void)db; (void)dout; (void)inp; (void)w; (void)N; (void)C;
    (void)OC;
    // TODO(exercise)
}

// Part 2: row-parallel. This rank holds W_r (OC, C): some INPUT features (the
// ones the column-parallel layer before it left here), and computes a partial sum
// of the whole output. Forward: out = g(inp @ W_r^T) + b.
// - The partial goes in tp_partial_buffer(g, out) (out itself without SP).
// - The bias must join the sum exactly once.
void tp_row_forward(GPT *g, float *out, const float *inp, const float *w, const float *b, int N,
                    int C, int OC) {
    (void)g; (void)out; (void)inp; (void)w; (void)b; (void)N; (void)C; (void)OC;
    // TODO(exercise)
}

// Backward: g's backward gives the whole output gradient (every rank's partial
// reached every output); then dinp, dW_r and db as a serial layer would. db comes
// out the same on every rank: the bias is replicated and must stay so.
void tp_row_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                     const float *inp, const float *w, int N, int C, int OC) {
    (void)g; (void)dinp; (void)dw; (void)db; (void)dout; (void)inp; (void)w; (void)N; (void)C;
    (void)OC;
    // TODO(exercise)
}
