// linear.c — column-parallel and row-parallel linear layers (Megatron-LM).
//
// A linear layer y = x W^T + b with W of shape (OC, C), split over t ranks:
//
//   column-parallel  W by output rows: rank r holds W_r (OC/t, C) and b_r, and
//                    computes y_r = x W_r^T + b_r, its OC/t output features. It
//                    needs the whole input x: f before it.
//   row-parallel     W by input columns: rank r holds W_r (OC, C/t), takes the
//                    C/t input features the column-parallel layer left on it,
//                    and computes a partial sum x_r W_r^T of the whole output.
//                    g after it adds the partials; b is added once.
//
// So c_fc -> GELU -> c_proj needs no communication between the two matmuls (GELU
// is elementwise, each rank applies it to its own features), and the MLP costs
// one g forward and one f backward; attention likewise, with whole heads per rank.
//
// Shapes here are this rank's: N token rows (the residual stream's rows are N/t
// with SP: f and g deal with that), C the local input width, OC the local
// output width. Backward writes dinp and accumulates (+=) dw and db.
#include "ops.h"
#include "tp.h"

void tp_column_forward(GPT *g, float *out, const float *inp, const float *w, const float *b,
                       int N, int C, int OC) {
    const float *x = tp_f_forward(g, inp, N, C);  // the whole input on every rank
    g->ctx->ops->matmul_forward(g->ctx, out, x, w, b, N, C, OC);
}

void tp_column_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, int N, int C, int OC) {
    const Ops *o = g->ctx->ops;
    // With SP the gathered input was not kept (that is the memory SP saves): gather
    // it again for dW, as Megatron-LM does. Without SP f forward is free.
    const float *x = tp_f_forward(g, inp, N, C);
    float *dfull = g->tp.sp ? g->sp_dfull : dinp;
    o->memset0(g->ctx, dfull, (size_t)N * C * sizeof(float));
    o->matmul_backward(g->ctx, dfull, dw, db, dout, x, w, N, C, OC);
    // Each rank's W_r reaches only its outputs: its dx is a partial sum.
    tp_f_backward(g, dinp, dfull, N, C);
}

void tp_row_forward(GPT *g, float *out, const float *inp, const float *w, const float *b, int N,
                    int C, int OC) {
    float *partial = tp_partial_buffer(g, out);
    // The bias joins the sum once: member 0 adds it to its partial.
    const float *bias = g->tp.rank == 0 ? b : NULL;
    g->ctx->ops->matmul_forward(g->ctx, partial, inp, w, bias, N, C, OC);
    tp_g_forward(g, out, partial, N, OC);
}

void tp_row_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                     const float *inp, const float *w, int N, int C, int OC) {
    const Ops *o = g->ctx->ops;
    // The whole output gradient (gathered with SP): every rank's partial reached
    // every output. db from the whole gradient is the same on every rank, so the
    // replicated bias stays replicated without a reduction.
    const float *d = tp_g_backward(g, dout, N, OC);
    o->memset0(g->ctx, dinp, (size_t)N * C * sizeof(float));
    o->matmul_backward(g->ctx, dinp, dw, db, d, inp, w, N, C, OC);
}
