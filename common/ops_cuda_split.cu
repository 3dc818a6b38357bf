// ops_cuda_split.cu — the CUDA backend's pieces of the vocabulary split (ops.h,
// "the vocabulary split over ranks"): the embedding lookup of the ids one rank
// holds, the position embedding over a range of rows, and the cross-entropy in
// parts (row max, sum of exponentials, loss, gradient) that the vocab-parallel
// code of stage 04 puts together around its collectives. ops_cpu.c is the
// reference for every op here. The rules of ops_cuda.cu hold: no float atomics
// (every sum in an order fixed by the shapes), everything on the backend's stream.
#include <math.h>

#include "ops_cuda_internal.cuh"

// ---------------------------------------------------------------- embedding lookup

// out[n,c] = wte[tokens[n] - vocab_lo, c] where this rank holds the id, else 0.
__global__ void lookup_forward_kernel(float *out, const int *tokens, const float *wte,
                                      int vocab_lo, int Vl, int C, size_t n) {
    GRID_STRIDE(i, n) {
        size_t row = i / C;
        int c = (int)(i % C);
        long long id = (long long)tokens[row] - vocab_lo;  // no overflow for any int id
        out[i] = id >= 0 && id < Vl ? wte[(size_t)id * C + c] : 0.0f;
    }
}

void cuda_embedding_lookup_forward(Ctx *ctx, float *out, const int *tokens, const float *wte,
                                   int vocab_lo, int Vl, int N, int C) {
    size_t n = (size_t)N * C;
    if (n)
        lookup_forward_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(out, tokens, wte, vocab_lo,
                                                                       Vl, C, n);
    CUDA_CHECK_LAUNCH();
}

// Positions that share an id would race on its row: the host groups them by id
// (cuda_dwte_grouped, ops_cuda_layers.cu, as for the unsplit embedding) and one
// block per id adds its rows in increasing n, the CPU's order. Ids this rank does
// not hold are skipped there.
void cuda_embedding_lookup_backward(Ctx *ctx, float *dwte, const float *dout, const int *tokens,
                                    const int *host_tokens, int vocab_lo, int Vl, int N, int C) {
    (void)tokens;
    cuda_dwte_grouped(ctx, dwte, dout, host_tokens, vocab_lo, Vl, N, C, 0,
                      "embedding_lookup_backward");
}

// ---------------------------------------------------------------- position embedding

// out[n,c] += wpe[(row0 + n) % T, c]
__global__ void position_forward_kernel(float *out, const float *wpe, int row0, int T, int C,
                                        size_t n) {
    GRID_STRIDE(i, n) {
        size_t row = i / C;
        int c = (int)(i % C), t = (int)((row0 + row) % T);
        out[i] += wpe[(size_t)t * C + c];
    }
}

void cuda_position_forward(Ctx *ctx, float *out, const float *wpe, int row0, int N, int T,
                           int C) {
    size_t n = (size_t)N * C;
    if (n)
        position_forward_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(out, wpe, row0, T, C, n);
    CUDA_CHECK_LAUNCH();
}

// One thread per (t, c): dwpe[t,c] += dout[n,c] over the rows n with
// (row0 + n) % T == t, i.e. n = n0, n0 + T, n0 + 2T, ... in increasing n: the
// CPU's order, so the same bits.
__global__ void position_backward_kernel(float *dwpe, const float *dout, int row0, int N, int T,
                                         int C) {
    GRID_STRIDE(i, (size_t)T * C) {
        int t = (int)(i / C), c = (int)(i % C);
        int n0 = ((t - row0 % T) % T + T) % T;  // the first row of position t
        float s = dwpe[i];
        for (int n = n0; n < N; n += T) s += dout[(size_t)n * C + c];
        dwpe[i] = s;
    }
}

void cuda_position_backward(Ctx *ctx, float *dwpe, const float *dout, int row0, int N, int T,
                            int C) {
    size_t n = (size_t)T * C;
    if (n && N > 0)
        position_backward_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(dwpe, dout, row0, N, T,
                                                                          C);
    CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------- cross-entropy in parts
//
// One block per row of Vl logits, of which the first `valid` are real ids (the
// rest pad the vocabulary to a multiple of the ranks and are never read). The
// block reductions (ops_cuda_internal.cuh) combine the threads in a fixed tree.
#define SPLIT_BLOCK 512

// rowmax[n] = the largest valid logit of row n; -inf when valid = 0.
__global__ void logits_max_kernel(float *rowmax, const float *logits, int Vl, int valid) {
    const float *x = logits + (size_t)blockIdx.x * Vl;
    float mx = -INFINITY;
    for (int v = threadIdx.x; v < valid; v += blockDim.x) mx = fmaxf(mx, x[v]);
    mx = block_reduce(mx, MaxOp(), -INFINITY);
    if (threadIdx.x == 0) rowmax[blockIdx.x] = mx;
}

void cuda_logits_max(Ctx *ctx, float *rowmax, const float *logits, int N, int Vl, int valid) {
    if (N > 0)
        logits_max_kernel<<<N, SPLIT_BLOCK, 0, stream(ctx)>>>(rowmax, logits, Vl, valid);
    CUDA_CHECK_LAUNCH();
}

// sumexp[n] = sum over valid v of exp(x[v] - m[n]); tlogit[n] = x[targets[n] -
// vocab_lo] where this rank holds the target (and it is not padding), else 0.
__global__ void logits_sumexp_kernel(float *sumexp, float *tlogit, const float *logits,
                                     const float *m, const int *targets, int vocab_lo, int Vl,
                                     int valid) {
    int row = blockIdx.x;
    const float *x = logits + (size_t)row * Vl;
    float mx = m[row], sum = 0.0f;
    for (int v = threadIdx.x; v < valid; v += blockDim.x) sum += expf(x[v] - mx);
    sum = block_reduce(sum, SumOp(), 0.0f);
    if (threadIdx.x == 0) {
        long long id = (long long)targets[row] - vocab_lo;
        sumexp[row] = sum;
        tlogit[row] = id >= 0 && id < valid ? x[id] : 0.0f;
    }
}

void cuda_logits_sumexp(Ctx *ctx, float *sumexp, float *tlogit, const float *logits,
                        const float *m, const int *targets, int vocab_lo, int N, int Vl,
                        int valid) {
    if (N > 0)
        logits_sumexp_kernel<<<N, SPLIT_BLOCK, 0, stream(ctx)>>>(sumexp, tlogit, logits, m,
                                                                 targets, vocab_lo, Vl, valid);
    CUDA_CHECK_LAUNCH();
}

// losses[n] = log(sumexp[n]) + m[n] - tlogit[n], from the group-wide values.
__global__ void crossentropy_loss_kernel(float *losses, const float *m, const float *sumexp,
                                         const float *tlogit, size_t n) {
    GRID_STRIDE(i, n) losses[i] = logf(sumexp[i]) + m[i] - tlogit[i];
}

void cuda_crossentropy_loss(Ctx *ctx, float *losses, const float *m, const float *sumexp,
                            const float *tlogit, int N) {
    if (N > 0)
        crossentropy_loss_kernel<<<elem_grid(N), BLOCK, 0, stream(ctx)>>>(losses, m, sumexp,
                                                                          tlogit, (size_t)N);
    CUDA_CHECK_LAUNCH();
}

// d[n,v] = (exp(x - m - log(sumexp)) - [v is the target]) * dloss on the valid
// columns, 0 on the padding. No reduction: one thread per element. dlogits may
// alias logits: each thread reads x[i] before it writes d[i], for its own i only.
__global__ void crossentropy_backward_split_kernel(float *dlogits, const float *logits,
                                                   const float *m, const float *sumexp,
                                                   const int *targets, int vocab_lo, float dloss,
                                                   int Vl, int valid, size_t n) {
    GRID_STRIDE(i, n) {
        size_t row = i / Vl;
        int v = (int)(i % Vl);
        float d = 0.0f;
        if (v < valid) {
            float p = expf(logits[i] - (m[row] + logf(sumexp[row])));  // softmax probability
            d = (long long)targets[row] - vocab_lo == v ? p * dloss - dloss : p * dloss;
        }
        dlogits[i] = d;
    }
}

void cuda_crossentropy_backward_split(Ctx *ctx, float *dlogits, const float *logits,
                                      const float *m, const float *sumexp, const int *targets,
                                      int vocab_lo, float dloss, int N, int Vl, int valid) {
    size_t n = (size_t)N * Vl;
    if (n)
        crossentropy_backward_split_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(
            dlogits, logits, m, sumexp, targets, vocab_lo, dloss, Vl, valid, n);
    CUDA_CHECK_LAUNCH();
}
