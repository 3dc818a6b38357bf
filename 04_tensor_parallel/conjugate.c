// conjugate.c — f and g, the two operators Megatron-LM builds tensor parallelism
// from (Shoeybi et al. 2019, §3), and the collectives under them.
//
// Split a linear layer's weight by output rows (column-parallel): every rank
// needs the whole input, and produces some of the output features. Split the
// next layer by input columns (row-parallel): every rank takes the features it
// already has, and produces a partial sum of the whole output. So an MLP costs
// one all-reduce forward (g, summing the partials) and one backward (f, summing
// the input gradient each rank's weights contributed). f and g are conjugate:
// each is the other's backward.
//
// Sequence parallelism (Korthikanti et al. 2022) notices that an all-reduce is a
// reduce-scatter followed by an all-gather, and moves the all-gather to the next
// layer's input: between g and f, the residual stream, the LayerNorms and the
// dropout see only N/t token rows on each rank. Same bytes on the wire, 1/t of
// those activations in memory.
#include "check.h"
#include "ops.h"
#include "timer.h"
#include "tp.h"

static TensorParallel *tp_of(GPT *g) { return g->tp.arg; }

// ---------------------------------------------------------------- collectives

static int on_gpu(const GPT *g, const TensorParallel *tp) {
    if (g->ctx->device != DEV_CUDA) return 0;
    CHECK(tp->gpu, "tensor parallelism on cuda needs a GpuComm for the tensor-parallel group");
    return 1;
}

// One collective over the group, on the GPU's buffers or the host's, timed.
static void tp_collective(GPT *g, CollOp op, float *buf, size_t n) {
    TensorParallel *tp = tp_of(g);
    double t0 = now_seconds();
    if (!on_gpu(g, tp)) run_collective(tp->comm, tp->group, op, buf, n, DT_F32, 0, tp->algo);
    else if (op == OP_ALLREDUCE) gpu_allreduce(tp->gpu, buf, n, DT_F32);
    else if (op == OP_ALL_GATHER) gpu_all_gather(tp->gpu, buf, n, DT_F32);
    else gpu_reduce_scatter(tp->gpu, buf, n, DT_F32);
    tp->comm_s += now_seconds() - t0;
}

void tp_allreduce(GPT *g, float *buf, size_t n) { tp_collective(g, OP_ALLREDUCE, buf, n); }
void tp_all_gather(GPT *g, float *buf, size_t n) { tp_collective(g, OP_ALL_GATHER, buf, n); }
void tp_reduce_scatter(GPT *g, float *buf, size_t n) { tp_collective(g, OP_REDUCE_SCATTER, buf, n); }

// With SP, rank r's N/t token rows are block r of the whole (N, C) tensor: the
// collectives' shard r, since t divides N (gpt_tp_error checks it).
static size_t my_rows_offset(const GPT *g, int N, int C) {
    return (size_t)g->tp.rank * (N / g->tp.size) * C;
}

// ---------------------------------------------------------------- f

const float *tp_f_forward(GPT *g, const float *x, int N, int C) {
    if (!g->tp.sp) return x;
    size_t rows = (size_t)(N / g->tp.size) * C;
    g->ctx->ops->copy(g->ctx, g->sp_full + my_rows_offset(g, N, C), x, rows * sizeof(float));
    tp_all_gather(g, g->sp_full, (size_t)N * C);
    return g->sp_full;
}

void tp_f_backward(GPT *g, float *dx, float *dfull, int N, int C) {
    if (!g->tp.sp) {
        CHECK(dx == dfull, "f backward without SP sums the gradient in place");
        tp_allreduce(g, dfull, (size_t)N * C);
        return;
    }
    tp_reduce_scatter(g, dfull, (size_t)N * C);
    size_t rows = (size_t)(N / g->tp.size) * C;
    g->ctx->ops->copy(g->ctx, dx, dfull + my_rows_offset(g, N, C), rows * sizeof(float));
}

// ---------------------------------------------------------------- g

float *tp_partial_buffer(GPT *g, float *out) { return g->tp.sp ? g->sp_full : out; }

void tp_g_forward(GPT *g, float *out, float *partial, int N, int C) {
    if (!g->tp.sp) {
        CHECK(out == partial, "g forward without SP sums the output in place");
        tp_allreduce(g, partial, (size_t)N * C);
        return;
    }
    tp_reduce_scatter(g, partial, (size_t)N * C);
    size_t rows = (size_t)(N / g->tp.size) * C;
    g->ctx->ops->copy(g->ctx, out, partial + my_rows_offset(g, N, C), rows * sizeof(float));
}

const float *tp_g_backward(GPT *g, const float *dout, int N, int C) {
    if (!g->tp.sp) return dout;
    size_t rows = (size_t)(N / g->tp.size) * C;
    g->ctx->ops->copy(g->ctx, g->sp_dfull + my_rows_offset(g, N, C), dout, rows * sizeof(float));
    tp_all_gather(g, g->sp_dfull, (size_t)N * C);
    return g->sp_dfull;
}
