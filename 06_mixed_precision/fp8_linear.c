// fp8_linear.c — the fp8 recipe's linear layers: every GEMM of the GPT reads fp8.
//
// The recipe is mixed-bf16 with one more step, as NVIDIA Transformer Engine does it
// on Hopper: each matmul's inputs are cast to fp8 just before the GEMM, which then
// accumulates in fp32. The forward's input x and weight w go to E4M3 (4 exponent
// bits, 3 mantissa: more precision, range ±448), the backward's output gradient dy
// to E5M2 (5 and 2: the range gradients need, ±57344). fp8 has so little range that
// every tensor needs its own scale: q = fp8(x * s), x ≈ q / s. The scale comes from
// the tensor's amax (max |x|) over the last steps ("delayed scaling", fp8.c): s = fp8_max / amax. This step's amaxes are recorded as
// the tensors are cast and go into the histories when the step ends
// (gpt_fp8_step_end), so the scales are fixed for a whole step: the backward's casts
// of x and w (it needs them for the weight gradient and the input gradient) are the
// forward's, bit for bit.
//
// On the CPU the casts are emulated (ops->quantize_fp8: the values fp8 can hold, in
// fp32 slots); the GEMM is the fp32 one on those values, which is what an fp8 tensor
// core computes, up to its accumulation order. The GEMMs get the scales too
// (ops->matmul_fp8_*): the CUDA backend runs them on the fp8 tensor cores through
// cuBLASLt (common/ops_cuda_fp8.cu; COURSE_FP8_GEMM=fp32: the fp32 GEMM, as the CPU).
// Serial layers only (one process, or data parallelism: each rank keeps its own
// scales, where Transformer Engine would all-reduce the amaxes over the
// data-parallel group). The model calls these through its plugins (precision_plugins,
// plugins.c): the core's serial linear layers hand their GEMMs over while g->fp8 is set.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "precision.h"

enum { FP8_X, FP8_W, FP8_DY, FP8_TENSORS };

// One linear layer, known by its weight: a scaling state per tensor it casts, and the
// scale and the running amax of the step under way.
typedef struct {
    const float *w;
    Fp8Scaling hist[FP8_TENSORS];
    float scale[FP8_TENSORS], amax[FP8_TENSORS];
} Fp8Linear;

struct GPTFp8 {
    Fp8Linear *lin;
    int n, cap, history;
    float *restored;         // gpt_fp8_restore's rows for layers not seen yet (NULL: none)
    int restored_layers;
    float *scratch;          // x, w and dy cast to fp8, in fp32 slots (MEM_WORKSPACE)
    size_t scratch_floats, nx, nw;
};

void gpt_fp8_enable(GPT *g) {
    CHECK(!g->fp8, "fp8 already enabled");
    g->fp8 = calloc(1, sizeof *g->fp8);
    CHECK(g->fp8, "out of host memory");
    g->fp8->history = GPT_FP8_HISTORY;
}

void gpt_fp8_free(GPT *g) {
    struct GPTFp8 *f = g->fp8;
    if (!f) return;
    for (int i = 0; i < f->n; i++)
        for (int k = 0; k < FP8_TENSORS; k++) fp8_scaling_free(&f->lin[i].hist[k]);
    if (f->scratch) mem_free(g->ctx, MEM_WORKSPACE, f->scratch, f->scratch_floats * sizeof(float));
    free(f->lin);
    free(f->restored);
    free(f);
    g->fp8 = NULL;
}

// One Fp8Scaling as a row of history + 2 floats: pos, filled, the ring as it lies
// (small integers and amaxes: a float holds each exactly, infinities included).
static void scaling_put(const Fp8Scaling *h, float *row) {
    row[0] = (float)h->pos;
    row[1] = (float)h->filled;
    memcpy(row + 2, h->history, (size_t)h->len * sizeof(float));
}

static void scaling_get(Fp8Scaling *h, const float *row) {
    h->pos = (int)row[0];
    h->filled = (int)row[1];
    memcpy(h->history, row + 2, (size_t)h->len * sizeof(float));
}

static void restore_layer(struct GPTFp8 *f, int i) {
    Fp8Linear *L = &f->lin[i];
    for (int k = 0; k < FP8_TENSORS; k++) {
        scaling_get(&L->hist[k], f->restored + ((size_t)i * FP8_TENSORS + k) * (f->history + 2));
        L->scale[k] = fp8_scale(&L->hist[k]);
        L->amax[k] = 0.0f;
    }
}

float *gpt_fp8_state(const GPT *g, int *rows, int *cols) {
    const struct GPTFp8 *f = g->fp8;
    *rows = 0, *cols = 0;
    if (!f) return NULL;
    // Layers a restore filled in that no forward has reached yet keep their rows.
    int n = f->n > f->restored_layers ? f->n : f->restored_layers;
    *rows = n * FP8_TENSORS, *cols = f->history + 2;
    float *out = calloc((size_t)*rows * (size_t)*cols + 1, sizeof(float));
    CHECK(out, "out of host memory");
    for (int i = 0; i < n; i++)
        for (int k = 0; k < FP8_TENSORS; k++) {
            float *row = out + ((size_t)i * FP8_TENSORS + k) * (size_t)*cols;
            if (i < f->n) scaling_put(&f->lin[i].hist[k], row);
            else memcpy(row, f->restored + ((size_t)i * FP8_TENSORS + k) * (size_t)*cols,
                        (size_t)*cols * sizeof(float));
        }
    return out;
}

int gpt_fp8_restore(GPT *g, const float *state, int rows, int cols, char *err, size_t errn) {
    struct GPTFp8 *f = g->fp8;
    CHECK(f, "gpt_fp8_restore: the model does not use fp8");
    if (cols != f->history + 2 || rows % FP8_TENSORS != 0) {
        snprintf(err, errn, "fp8 scaling state of %d x %d: this run keeps %d tensors x (history %d "
                 "+ 2) per layer (GPT_FP8_HISTORY)", rows, cols, FP8_TENSORS, f->history);
        return -1;
    }
    for (int r = 0; r < rows; r++) {
        const float *row = state + (size_t)r * cols;
        if (!(row[0] >= 0 && row[0] < f->history && row[0] == (int)row[0] && row[1] >= 0 &&
              row[1] <= f->history && row[1] == (int)row[1])) {
            snprintf(err, errn, "fp8 scaling state, row %d: position %g, filled %g out of range "
                     "for a history of %d", r, (double)row[0], (double)row[1], f->history);
            return -1;
        }
    }
    free(f->restored);
    f->restored_layers = rows / FP8_TENSORS;
    f->restored = malloc((size_t)rows * (size_t)cols * sizeof(float) + 1);
    CHECK(f->restored, "out of host memory");
    memcpy(f->restored, state, (size_t)rows * (size_t)cols * sizeof(float));
    // Layers are known by their first forward: those seen already take their rows
    // now, the others when they first appear (layer_of), in the same order.
    for (int i = 0; i < f->n && i < f->restored_layers; i++) restore_layer(f, i);
    return 0;
}

// The layer whose weight is w; a new one starts with scale 1 (an empty history).
static Fp8Linear *layer_of(struct GPTFp8 *f, const float *w) {
    for (int i = 0; i < f->n; i++)
        if (f->lin[i].w == w) return &f->lin[i];
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 16;
        f->lin = realloc(f->lin, (size_t)f->cap * sizeof *f->lin);
        CHECK(f->lin, "out of host memory");
    }
    Fp8Linear *L = &f->lin[f->n++];
    memset(L, 0, sizeof *L);
    L->w = w;
    static const DType fmt[FP8_TENSORS] = {DT_E4M3, DT_E4M3, DT_E5M2};
    for (int k = 0; k < FP8_TENSORS; k++) {
        fp8_scaling_init(&L->hist[k], f->history, fmt[k], 0.0f);
        L->scale[k] = fp8_scale(&L->hist[k]);
    }
    if (f->n - 1 < f->restored_layers) restore_layer(f, f->n - 1);  // a resumed run's
    return L;
}

// Room for the casts of the largest layer: x up to N x 4C (the MLP's c_proj), w up to
// max(4C x C, V x C) (the LM head is the tied wte), dy up to N x max(4C, V).
static void ensure_scratch(GPT *g, int N) {
    struct GPTFp8 *f = g->fp8;
    size_t C = (size_t)g->cfg.n_embd, V = (size_t)g->cfg.vocab, big = 4 * C > V ? 4 * C : V;
    size_t nx = (size_t)N * 4 * C, nw = big * C, nd = (size_t)N * big;
    if (f->scratch && nx <= f->nx) return;
    if (f->scratch) mem_free(g->ctx, MEM_WORKSPACE, f->scratch, f->scratch_floats * sizeof(float));
    f->nx = nx;
    f->nw = nw;
    f->scratch_floats = nx + nw + nd;
    f->scratch = mem_alloc(g->ctx, MEM_WORKSPACE, f->scratch_floats * sizeof(float));
}

// dst = src cast to fp8 with tensor k's scale of this step; its amax noted.
static const float *cast(GPT *g, Fp8Linear *L, int k, float *dst, const float *src, size_t n) {
    static const DType fmt[FP8_TENSORS] = {DT_E4M3, DT_E4M3, DT_E5M2};
    float amax = 0.0f;
    g->ctx->ops->copy(g->ctx, dst, src, n * sizeof(float));
    g->ctx->ops->quantize_fp8(g->ctx, dst, n, fmt[k], L->scale[k], &amax);
    if (amax > L->amax[k]) L->amax[k] = amax;
    return dst;
}

void gpt_fp8_linear_forward(GPT *g, float *out, const float *inp, const float *w, const float *b,
                            int N, int C, int OC) {
    struct GPTFp8 *f = g->fp8;
    ensure_scratch(g, N);
    Fp8Linear *L = layer_of(f, w);
    const float *xq = cast(g, L, FP8_X, f->scratch, inp, (size_t)N * C);
    const float *wq = cast(g, L, FP8_W, f->scratch + f->nx, w, (size_t)OC * C);
    g->ctx->ops->matmul_fp8_forward(g->ctx, out, xq, L->scale[FP8_X], wq, L->scale[FP8_W], b, N,
                                    C, OC);
}

void gpt_fp8_linear_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                             const float *inp, const float *w, int N, int C, int OC) {
    struct GPTFp8 *f = g->fp8;
    ensure_scratch(g, N);
    Fp8Linear *L = layer_of(f, w);
    // x and w again, with the step's scales: the forward's fp8 values exactly.
    const float *xq = cast(g, L, FP8_X, f->scratch, inp, (size_t)N * C);
    const float *wq = cast(g, L, FP8_W, f->scratch + f->nx, w, (size_t)OC * C);
    const float *dq = cast(g, L, FP8_DY, f->scratch + f->nx + f->nw, dout, (size_t)N * OC);
    g->ctx->ops->memset0(g->ctx, dinp, (size_t)N * C * sizeof(float));
    g->ctx->ops->matmul_fp8_backward(g->ctx, dinp, dw, db, dq, L->scale[FP8_DY], xq,
                                     L->scale[FP8_X], wq, L->scale[FP8_W], N, C, OC);
}

void gpt_fp8_step_end(GPT *g) {
    struct GPTFp8 *f = g->fp8;
    if (!f) return;
    for (int i = 0; i < f->n; i++)
        for (int k = 0; k < FP8_TENSORS; k++) {
            Fp8Linear *L = &f->lin[i];
            fp8_record(&L->hist[k], L->amax[k]);
            L->scale[k] = fp8_scale(&L->hist[k]);
            L->amax[k] = 0.0f;
        }
}

int gpt_fp8_layers(const GPT *g) { return g->fp8 ? g->fp8->n : 0; }
