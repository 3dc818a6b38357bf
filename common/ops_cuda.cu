// ops_cuda.cu — the CUDA backend: every GPT op of ops.h on one GPU, in fp32.
//
// Matrix multiplies go to cuBLAS in plain fp32 (no TF32), so results agree with
// the CPU backend (ops_cpu.c, the reference for every op here) to fp32 rounding.
// Everything else is a small kernel in the style of llm.c. Two rules shape them:
//
//  * Determinism. No float atomics: every sum is taken in an order fixed by the
//    shapes alone, so two runs give bitwise identical results (stage 07 relies
//    on it). Sums over many rows take two passes: per-block partial sums into a
//    workspace, then one fixed-order sum of the partials.
//  * One stream. All work is queued on the backend's stream, so ops run in the
//    order the model calls them and a workspace can be reused by the next op.
#include <math.h>
#include <stdlib.h>

#include "cuda_common.cuh"
#include "ops.h"

#define BLOCK 256                    // threads per block for elementwise and row kernels
#define WARPS_PER_BLOCK (BLOCK / 32)
// Grid-stride loop: thread i takes elements i, i + (threads in the grid), ...
#define GRID_STRIDE(i, n)                                                   \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)
// Row kernels give one warp to each row: these name the warp's row and lane.
#define WARP_ROW ((int)(blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32))
#define LANE ((int)(threadIdx.x % 32))

// ---------------------------------------------------------------- helpers

static CudaBackend *backend(Ctx *ctx) { return (CudaBackend *)ctx->backend; }
static cudaStream_t stream(Ctx *ctx) { return backend(ctx)->stream; }

// Grid for a grid-stride loop over n > 0 elements; 65536 blocks of 256 threads
// fill an H100 many times over, and the cap keeps the grid legal for any n.
static unsigned elem_grid(size_t n) {
    size_t g = (n + BLOCK - 1) / BLOCK;
    return (unsigned)(g < 65536 ? g : 65536);
}
static unsigned row_grid(size_t rows) {  // one warp per row
    return (unsigned)((rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK);
}

// Device workspace of at least `bytes`, grown (never shrunk) on demand and
// charged to the ledger as workspace.
static void *scratch(Ctx *ctx, size_t bytes) {
    CudaBackend *be = backend(ctx);
    if (bytes <= be->scratch_bytes) return be->scratch;
    CUDA_CHECK(cudaStreamSynchronize(be->stream));  // queued kernels may still use the old one
    if (be->scratch) {
        CUDA_CHECK(cudaFree(be->scratch));
        ledger_release(&ctx->ledger, MEM_WORKSPACE, be->scratch_bytes);
        be->scratch = NULL, be->scratch_bytes = 0;
    }
    size_t grown = bytes + bytes / 2;  // headroom: not one reallocation per call
    ledger_charge(&ctx->ledger, MEM_WORKSPACE, grown);
    CUDA_CHECK(cudaMalloc(&be->scratch, grown));
    be->scratch_bytes = grown;
    return be->scratch;
}

// Reductions. The xor butterfly leaves the result in every lane and combines
// the lanes in the same order on every run.
struct SumOp {
    template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op> __device__ T warp_reduce(T v, Op op) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));  // all 32 lanes take part
    return v;
}

// Reduction over the whole block (blockDim.x a multiple of 32, at most 1024);
// every thread gets the result. Every thread of the block must call it.
template <typename T, typename Op> __device__ T block_reduce(T v, Op op, T identity) {
    __shared__ T partial[32];
    int warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    v = warp_reduce(v, op);
    __syncthreads();  // a previous call may still be reading `partial`
    if (LANE == 0) partial[warp] = v;
    __syncthreads();
    v = LANE < nwarps ? partial[LANE] : identity;
    return warp_reduce(v, op);  // every warp reduces the partials itself
}

// ---------------------------------------------------------------- column sums
//
// db[c] += sum_n dout[n,c] and, when inp != NULL (layernorm), dw[c] += sum_n
// dout[n,c] * xhat[n,c] with xhat = (inp[n,c] - mean[n]) * rstd[n]. Serves the
// matmul bias gradient and the layernorm weight and bias gradients.
// Pass 1: a block of 32 columns x 8 row lanes sums one chunk of COLSUM_ROWS
// rows into part[chunk][c]. Pass 2: one thread per column adds the chunks in order.
#define COLSUM_ROWS 256

__global__ void colsum_partial_kernel(float *part_b, float *part_w, const float *dout,
                                      const float *inp, const float *mean, const float *rstd,
                                      int N, int C) {
    __shared__ float sb[8][32], sw[8][32];
    int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * 32 + tx;
    int r0 = blockIdx.y * COLSUM_ROWS, r1 = min(N, r0 + COLSUM_ROWS);
    float b = 0.0f, w = 0.0f;
    if (c < C) {
        for (int n = r0 + ty; n < r1; n += 8) {  // a warp reads 32 adjacent floats: coalesced
            float d = dout[(size_t)n * C + c];
            b += d;
            if (inp) w += d * ((inp[(size_t)n * C + c] - mean[n]) * rstd[n]);
        }
    }
    sb[ty][tx] = b;
    sw[ty][tx] = w;
    __syncthreads();  // every thread reaches it: no early return above
    if (ty == 0 && c < C) {
        for (int k = 1; k < 8; k++) b += sb[k][tx], w += sw[k][tx];
        part_b[(size_t)blockIdx.y * C + c] = b;
        if (inp) part_w[(size_t)blockIdx.y * C + c] = w;
    }
}

__global__ void colsum_finish_kernel(float *db, float *dw, const float *part_b,
                                     const float *part_w, int nchunks, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float b = 0.0f, w = 0.0f;
    for (int k = 0; k < nchunks; k++) {
        b += part_b[(size_t)k * C + c];
        if (dw) w += part_w[(size_t)k * C + c];
    }
    if (db) db[c] += b;
    if (dw) dw[c] += w;
}

// db or dw may be NULL (not wanted).
static void column_sums(Ctx *ctx, float *db, float *dw, const float *dout, const float *inp,
                        const float *mean, const float *rstd, int N, int C) {
    if ((!db && !dw) || N <= 0 || C <= 0) return;
    if (!dw) inp = NULL;  // plain column sums
    int nchunks = (N + COLSUM_ROWS - 1) / COLSUM_ROWS;
    float *part_b = (float *)scratch(ctx, 2 * (size_t)nchunks * C * sizeof(float));
    float *part_w = part_b + (size_t)nchunks * C;
    dim3 grid((C + 31) / 32, nchunks), block(32, 8);
    colsum_partial_kernel<<<grid, block, 0, stream(ctx)>>>(part_b, part_w, dout, inp, mean, rstd,
                                                           N, C);
    CUDA_CHECK_LAUNCH();
    colsum_finish_kernel<<<(C + BLOCK - 1) / BLOCK, BLOCK, 0, stream(ctx)>>>(
        db, inp ? dw : NULL, part_b, part_w, nchunks, C);
    CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------- matmul
//
// cuBLAS is column-major. A row-major (R x K) matrix with leading dimension ld
// is, to cuBLAS, its transpose: a column-major (K x R) matrix with the same ld.
// So we ask cuBLAS for out^T = w * inp^T (its view), which is out = inp @ w^T in
// ours: that is why the calls below look transposed against the formulas.

__global__ void add_bias_kernel(float *out, const float *bias, size_t n, int OC) {
    GRID_STRIDE(i, n) out[i] += bias[i % OC];
}

static void cuda_matmul_forward(Ctx *ctx, float *out, const float *inp, const float *w,
                                const float *bias, int N, int C, int OC) {
    const float one = 1.0f, zero = 0.0f;
    // out(N,OC) = inp(N,C) @ w(OC,C)^T
    CUBLAS_CHECK(cublasSgemm(backend(ctx)->cublas, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &one, w, C,
                             inp, C, &zero, out, OC));
    size_t n = (size_t)N * OC;
    if (bias && n) add_bias_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(out, bias, n, OC);
    CUDA_CHECK_LAUNCH();
}

static void cuda_matmul_backward(Ctx *ctx, float *dinp, float *dw, float *dbias,
                                 const float *dout, const float *inp, const float *w, int N,
                                 int C, int OC) {
    cublasHandle_t h = backend(ctx)->cublas;
    const float one = 1.0f;  // beta = 1: accumulate into the gradients
    if (dinp)  // dinp(N,C) += dout(N,OC) @ w(OC,C)
        CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, &one, w, C, dout, OC,
                                 &one, dinp, C));
    if (dw)  // dw(OC,C) += dout^T(OC,N) @ inp(N,C)
        CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, &one, inp, C, dout, OC,
                                 &one, dw, C));
    column_sums(ctx, dbias, NULL, dout, NULL, NULL, NULL, N, OC);
}

// ---------------------------------------------------------------- embedding

__global__ void embedding_forward_kernel(float *out, const int *tokens, const float *wte,
                                         const float *wpe, int T, int C, size_t n) {
    GRID_STRIDE(i, n) {
        size_t row = i / C;  // b*T + t
        int c = (int)(i % C), t = (int)(row % T);
        out[i] = wte[(size_t)tokens[row] * C + c] + wpe[(size_t)t * C + c];
    }
}

static void cuda_embedding_forward(Ctx *ctx, float *out, const int *tokens, const float *wte,
                                   const float *wpe, int B, int T, int C) {
    size_t n = (size_t)B * T * C;
    if (n)
        embedding_forward_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(out, tokens, wte, wpe,
                                                                          T, C, n);
    CUDA_CHECK_LAUNCH();
}

// dwpe[t,c] += dout[0,t,c] + dout[1,t,c] + ...: one thread per (t,c), b in order.
__global__ void dwpe_kernel(float *dwpe, const float *dout, int B, size_t TC) {
    GRID_STRIDE(i, TC) {
        float s = dwpe[i];
        for (int b = 0; b < B; b++) s += dout[b * TC + i];
        dwpe[i] = s;
    }
}

// One block per distinct token u: dwte[uniq[u]] += the dout rows at positions
// pos[off[u]], ..., pos[off[u+1]-1], increasing, so in the CPU's order.
__global__ void dwte_kernel(float *dwte, const float *dout, const int *uniq, const int *off,
                            const int *pos, int C) {
    int u = blockIdx.x;
    float *row = dwte + (size_t)uniq[u] * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float s = row[c];
        for (int i = off[u]; i < off[u + 1]; i++) s += dout[(size_t)pos[i] * C + c];
        row[c] = s;
    }
}

static void cuda_embedding_backward(Ctx *ctx, float *dwte, float *dwpe, const float *dout,
                                    const int *tokens, int B, int T, int C) {
    int N = B * T;
    if (N <= 0 || C <= 0) return;
    size_t TC = (size_t)T * C;
    if (dwpe) dwpe_kernel<<<elem_grid(TC), BLOCK, 0, stream(ctx)>>>(dwpe, dout, B, TC);
    CUDA_CHECK_LAUNCH();
    if (!dwte) return;
    // Positions that share a token would race on its dwte row. So the host groups
    // the positions by token (a counting sort over the token ids) and each
    // distinct token gets one block that sums its rows in a fixed order.
    size_t pack_n = 3 * (size_t)N + 1;  // uniq (<= N) | off (<= N+1) | pos (N)
    int *tok = (int *)malloc((size_t)N * sizeof(int)), *pack = (int *)malloc(pack_n * sizeof(int));
    CHECK(tok && pack, "out of host memory");
    CUDA_CHECK(cudaMemcpyAsync(tok, tokens, (size_t)N * sizeof(int), cudaMemcpyDeviceToHost,
                               stream(ctx)));
    CUDA_CHECK(cudaStreamSynchronize(stream(ctx)));
    int maxtok = 0;
    for (int n = 0; n < N; n++) {
        CHECK(tok[n] >= 0, "embedding_backward: negative token %d at position %d", tok[n], n);
        if (tok[n] > maxtok) maxtok = tok[n];
    }
    int *start = (int *)calloc((size_t)maxtok + 2, sizeof(int));  // first slot of token v in pos
    CHECK(start, "out of host memory");
    int *uniq = pack, *off = pack + N, *pos = pack + 2 * (size_t)N + 1, U = 0;
    for (int n = 0; n < N; n++) start[tok[n] + 1]++;                 // counts ...
    for (int v = 0; v <= maxtok; v++) start[v + 1] += start[v];      // ... to offsets
    for (int v = 0; v <= maxtok; v++)
        if (start[v + 1] > start[v]) uniq[U] = v, off[U] = start[v], U++;
    off[U] = N;
    for (int n = 0; n < N; n++) pos[start[tok[n]]++] = n;  // increasing n within each token
    int *dpack = (int *)scratch(ctx, pack_n * sizeof(int));
    // From pageable memory the copy is staged before the call returns: `pack`
    // may be freed right after.
    CUDA_CHECK(cudaMemcpyAsync(dpack, pack, pack_n * sizeof(int), cudaMemcpyHostToDevice,
                               stream(ctx)));
    dwte_kernel<<<U, 128, 0, stream(ctx)>>>(dwte, dout, dpack, dpack + N, dpack + 2 * (size_t)N + 1,
                                           C);
    CUDA_CHECK_LAUNCH();
    free(tok);
    free(start);
    free(pack);
}

// ---------------------------------------------------------------- layernorm
//
// One warp per row: 32 lanes striding over C (768 for GPT-2) are plenty, and
// warp shuffles need neither shared memory nor __syncthreads.

__global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp,
                                         const float *w, const float *b, int N, int C) {
    int row = WARP_ROW;
    if (row >= N) return;  // whole warps leave together
    const float *x = inp + (size_t)row * C;
    float *o = out + (size_t)row * C;
    float m = 0.0f, v = 0.0f;
    for (int c = LANE; c < C; c += 32) m += x[c];
    m = warp_reduce(m, SumOp()) / C;
    for (int c = LANE; c < C; c += 32) v += (x[c] - m) * (x[c] - m);  // no cancellation
    float s = 1.0f / sqrtf(warp_reduce(v, SumOp()) / C + 1e-5f);
    // A lane reads x[c] and then writes o[c] at the same c: safe even if out == inp.
    for (int c = LANE; c < C; c += 32) o[c] = (x[c] - m) * s * w[c] + b[c];
    if (LANE == 0 && mean) mean[row] = m;
    if (LANE == 0 && rstd) rstd[row] = s;
}

static void cuda_layernorm_forward(Ctx *ctx, float *out, float *mean, float *rstd,
                                   const float *inp, const float *w, const float *b, int N, int C) {
    if (N > 0)
        layernorm_forward_kernel<<<row_grid(N), BLOCK, 0, stream(ctx)>>>(out, mean, rstd, inp, w,
                                                                         b, N, C);
    CUDA_CHECK_LAUNCH();
}

// dx += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * w.
__global__ void layernorm_backward_kernel(float *dinp, const float *dout, const float *inp,
                                          const float *w, const float *mean, const float *rstd,
                                          int N, int C) {
    int row = WARP_ROW;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
    float *dx = dinp + (size_t)row * C;
    float m = mean[row], s = rstd[row], sum_d = 0.0f, sum_dx = 0.0f;
    for (int c = LANE; c < C; c += 32) {
        float xhat = (x[c] - m) * s, d = dy[c] * w[c];
        sum_d += d;
        sum_dx += d * xhat;
    }
    sum_d = warp_reduce(sum_d, SumOp()) / C;
    sum_dx = warp_reduce(sum_dx, SumOp()) / C;
    for (int c = LANE; c < C; c += 32) {
        float xhat = (x[c] - m) * s, d = dy[c] * w[c];
        dx[c] += s * (d - sum_d - xhat * sum_dx);
    }
}

static void cuda_layernorm_backward(Ctx *ctx, float *dinp, float *dw, float *db,
                                    const float *dout, const float *inp, const float *w,
                                    const float *mean, const float *rstd, int N, int C) {
    if (dinp && N > 0)  // dw, db below: sums over all N rows
        layernorm_backward_kernel<<<row_grid(N), BLOCK, 0, stream(ctx)>>>(dinp, dout, inp, w,
                                                                          mean, rstd, N, C);
    CUDA_CHECK_LAUNCH();
    column_sums(ctx, db, dw, dout, inp, mean, rstd, N, C);
}

// ---------------------------------------------------------------- attention
//
// For batch b and head h, q, k and v are (T, hs) matrices inside qkv with row
// stride 3C, starting at columns h*hs, C + h*hs and 2C + h*hs. Consecutive heads
// are hs floats apart, so the NH heads of one batch element are one strided-
// batched GEMM; we loop over b. att(b,h) is a (T,T) block, blocks T*T apart.

// One warp per row of scores, in place: row t keeps columns 0..t (causal).
__global__ void causal_softmax_kernel(float *att, int rows, int T) {
    int row = WARP_ROW;
    if (row >= rows) return;
    int t = row % T;
    float *a = att + (size_t)row * T;
    float mx = -INFINITY, sum = 0.0f;
    for (int j = LANE; j <= t; j += 32) mx = fmaxf(mx, a[j]);
    mx = warp_reduce(mx, MaxOp());  // subtracted before exp: nothing overflows
    for (int j = LANE; j <= t; j += 32) {
        a[j] = expf(a[j] - mx);  // each lane rewrites only the elements it read
        sum += a[j];
    }
    float inv = 1.0f / warp_reduce(sum, SumOp());
    for (int j = LANE; j < T; j += 32) a[j] = j <= t ? a[j] * inv : 0.0f;
}

static void cuda_attention_forward(Ctx *ctx, float *out, float *att, const float *qkv, int B,
                                   int T, int C, int NH) {
    cublasHandle_t h = backend(ctx)->cublas;
    int hs = C / NH, C3 = 3 * C;
    long long TT = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)hs), one = 1.0f, zero = 0.0f;
    for (int b = 0; b < B; b++) {  // att(T,T) = q k^T / sqrt(hs): the full square
        const float *q = qkv + (size_t)b * T * C3, *k = q + C;
        CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, &scale, k,
                                               C3, hs, q, C3, hs, &zero, att + b * NH * TT, T,
                                               TT, NH));
    }
    size_t rows = (size_t)B * NH * T;
    if (rows) causal_softmax_kernel<<<row_grid(rows), BLOCK, 0, stream(ctx)>>>(att, (int)rows, T);
    CUDA_CHECK_LAUNCH();
    for (int b = 0; b < B; b++) {  // out(T,hs) = att(T,T) @ v(T,hs), head h at columns h*hs
        const float *v = qkv + (size_t)b * T * C3 + 2 * C;
        CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, &one, v, C3,
                                               hs, att + b * NH * TT, T, TT, &zero,
                                               out + (size_t)b * T * C, C, hs, NH));
    }
}

// Softmax backward, one warp per row, in place on datt:
// ds[t,j] = att[t,j] * (datt[t,j] - sum_i att[t,i] datt[t,i]) for j <= t, else 0.
__global__ void softmax_backward_kernel(float *ds, const float *att, int rows, int T) {
    int row = WARP_ROW;
    if (row >= rows) return;
    int t = row % T;
    const float *p = att + (size_t)row * T;
    float *d = ds + (size_t)row * T;
    float dot = 0.0f;
    for (int j = LANE; j <= t; j += 32) dot += p[j] * d[j];
    dot = warp_reduce(dot, SumOp());
    for (int j = LANE; j < T; j += 32) d[j] = j <= t ? p[j] * (d[j] - dot) : 0.0f;
}

static void cuda_attention_backward(Ctx *ctx, float *dqkv, float *ds, const float *dout,
                                    const float *qkv, const float *att, int B, int T, int C,
                                    int NH) {
    cublasHandle_t h = backend(ctx)->cublas;
    int hs = C / NH, C3 = 3 * C;
    long long TT = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)hs), one = 1.0f, zero = 0.0f;
    for (int b = 0; b < B; b++) {
        size_t o = (size_t)b * T * C3;  // batch b in qkv and dqkv
        const float *dy = dout + (size_t)b * T * C;
        // dv(T,hs) += att^T(T,T) @ dy(T,hs)
        CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, &one, dy, C,
                                               hs, att + b * NH * TT, T, TT, &one,
                                               dqkv + o + 2 * C, C3, hs, NH));
        // datt(T,T) = dy(T,hs) @ v^T, into ds
        CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, &one,
                                               qkv + o + 2 * C, C3, hs, dy, C, hs, &zero,
                                               ds + b * NH * TT, T, TT, NH));
    }
    size_t rows = (size_t)B * NH * T;
    if (rows)
        softmax_backward_kernel<<<row_grid(rows), BLOCK, 0, stream(ctx)>>>(ds, att, (int)rows, T);
    CUDA_CHECK_LAUNCH();
    for (int b = 0; b < B; b++) {
        size_t o = (size_t)b * T * C3;
        // dq(T,hs) += ds(T,T) @ k(T,hs) / sqrt(hs)
        CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, &scale,
                                               qkv + o + C, C3, hs, ds + b * NH * TT, T, TT, &one,
                                               dqkv + o, C3, hs, NH));
        // dk(T,hs) += ds^T(T,T) @ q(T,hs) / sqrt(hs)
        CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, &scale,
                                               qkv + o, C3, hs, ds + b * NH * TT, T, TT, &one,
                                               dqkv + o + C, C3, hs, NH));
    }
}

// ---------------------------------------------------------------- GELU, elementwise

#define GELU_K 0.7978845608028654f  // sqrt(2/pi)

__global__ void gelu_forward_kernel(float *out, const float *inp, size_t n) {
    GRID_STRIDE(i, n) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
    }
}

__global__ void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t n) {
    GRID_STRIDE(i, n) {
        float x = inp[i];
        float th = tanhf(GELU_K * (x + 0.044715f * x * x * x));
        float sech2 = 1.0f - th * th;  // tanh' = 1 - tanh^2
        float g = 0.5f * (1.0f + th) +
                  0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += g * dout[i];
    }
}

__global__ void residual_kernel(float *out, const float *a, const float *b, size_t n) {
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}
__global__ void accumulate_kernel(float *y, const float *x, float alpha, size_t n) {
    GRID_STRIDE(i, n) y[i] += alpha * x[i];
}
__global__ void scale_kernel(float *x, float s, size_t n) {
    GRID_STRIDE(i, n) x[i] *= s;
}

// A grid of zero blocks is a launch error, hence the `if (n)`.
static void cuda_gelu_forward(Ctx *ctx, float *out, const float *inp, size_t n) {
    if (n) gelu_forward_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(out, inp, n);
    CUDA_CHECK_LAUNCH();
}
static void cuda_gelu_backward(Ctx *ctx, float *dinp, const float *inp, const float *dout,
                               size_t n) {
    if (n) gelu_backward_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(dinp, inp, dout, n);
    CUDA_CHECK_LAUNCH();
}
static void cuda_residual_forward(Ctx *ctx, float *out, const float *a, const float *b,
                                  size_t n) {
    if (n) residual_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(out, a, b, n);
    CUDA_CHECK_LAUNCH();
}
static void cuda_accumulate(Ctx *ctx, float *y, const float *x, float alpha, size_t n) {
    if (n) accumulate_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(y, x, alpha, n);
    CUDA_CHECK_LAUNCH();
}
static void cuda_scale(Ctx *ctx, float *x, float s, size_t n) {
    if (n) scale_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(x, s, n);
    CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------- cross-entropy
//
// One block per row of V logits (V = 50257 for GPT-2: ~100 per thread).
#define CE_BLOCK 512

// Row max and log(sum(exp(x - max))), in every thread of the block.
__device__ void row_logsumexp(const float *x, int V, float *mx_out, float *lse_out) {
    float mx = -INFINITY, sum = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) mx = fmaxf(mx, x[i]);
    mx = block_reduce(mx, MaxOp(), -INFINITY);  // subtracted before exp: no overflow
    for (int i = threadIdx.x; i < V; i += blockDim.x) sum += expf(x[i] - mx);
    *mx_out = mx;
    *lse_out = logf(block_reduce(sum, SumOp(), 0.0f));
}

__global__ void crossentropy_forward_kernel(float *losses, const float *logits,
                                            const int *targets, int V) {
    const float *x = logits + (size_t)blockIdx.x * V;
    float mx, lse;
    row_logsumexp(x, V, &mx, &lse);
    int y = targets[blockIdx.x];
    // A target outside the vocabulary gives a NaN loss (visible), not a wild read.
    if (threadIdx.x == 0) losses[blockIdx.x] = (y >= 0 && y < V) ? lse + mx - x[y] : NAN;
}

// dlogits may alias logits: every read of the row for the max and the sum ends
// at a block_reduce barrier, and afterwards each thread reads x[i] before it
// writes d[i], for its own i only.
__global__ void crossentropy_backward_kernel(float *dlogits, const float *logits,
                                             const int *targets, float dloss, int V) {
    const float *x = logits + (size_t)blockIdx.x * V;
    float *d = dlogits + (size_t)blockIdx.x * V;
    float mx, lse;
    row_logsumexp(x, V, &mx, &lse);
    int y = targets[blockIdx.x];
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float p = expf(x[i] - (mx + lse));  // softmax probability
        d[i] = i == y ? p * dloss - dloss : p * dloss;
    }
}

static void cuda_crossentropy_forward(Ctx *ctx, float *losses, const float *logits,
                                      const int *targets, int N, int V) {
    if (N > 0)
        crossentropy_forward_kernel<<<N, CE_BLOCK, 0, stream(ctx)>>>(losses, logits, targets, V);
    CUDA_CHECK_LAUNCH();
}
static void cuda_crossentropy_backward(Ctx *ctx, float *dlogits, const float *logits,
                                       const int *targets, float dloss, int N, int V) {
    if (N > 0)
        crossentropy_backward_kernel<<<N, CE_BLOCK, 0, stream(ctx)>>>(dlogits, logits, targets,
                                                                     dloss, V);
    CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------- optimizer

// torch.optim.AdamW's operations in its order, as ops_cpu.c.
__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n, float beta1,
                             float beta2, float eps, float decay, float grad_scale,
                             float step_size, float bc2_sqrt) {
    GRID_STRIDE(i, n) {
        float gi = g[i] * grad_scale;
        float mi = m[i] * beta1 + gi * (1.0f - beta1);
        float vi = v[i] * beta2 + gi * gi * (1.0f - beta2);
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = p[i] * decay - step_size * (mi / denom);
        m[i] = mi;
        v[i] = vi;
    }
}

static void cuda_adamw_update(Ctx *ctx, float *p, const float *g, float *m, float *v, size_t n,
                              float lr, float beta1, float beta2, float eps, float weight_decay,
                              float grad_scale, int t) {
    // Bias corrections 1 - beta^t in double on the host, as ops_cpu.c does.
    double bc1 = 1.0 - pow((double)beta1, t), bc2 = 1.0 - pow((double)beta2, t);
    float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    if (n)
        adamw_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(p, g, m, v, n, beta1, beta2, eps,
                                                              1.0f - lr * weight_decay, grad_scale,
                                                              step_size, bc2_sqrt);
    CUDA_CHECK_LAUNCH();
}

// Sum of squares in double, in two passes: a grid of at most SSQ_BLOCKS blocks
// writes one partial per block, then one block adds the partials.
#define SSQ_BLOCKS 1024

__global__ void sum_squares_kernel(double *partial, const float *x, size_t n) {
    double s = 0.0;
    GRID_STRIDE(i, n) s += (double)x[i] * (double)x[i];
    s = block_reduce(s, SumOp(), 0.0);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sum_partials_kernel(double *out, const double *partial, int nparts) {
    double s = 0.0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) s += partial[i];
    s = block_reduce(s, SumOp(), 0.0);
    if (threadIdx.x == 0) *out = s;
}

static double cuda_sum_squares(Ctx *ctx, const float *x, size_t n) {
    if (!n) return 0.0;
    unsigned grid = elem_grid(n) < SSQ_BLOCKS ? elem_grid(n) : SSQ_BLOCKS;
    double *partial = (double *)scratch(ctx, (SSQ_BLOCKS + 1) * sizeof(double)), host = 0.0;
    sum_squares_kernel<<<grid, BLOCK, 0, stream(ctx)>>>(partial, x, n);
    CUDA_CHECK_LAUNCH();
    sum_partials_kernel<<<1, 1024, 0, stream(ctx)>>>(partial + SSQ_BLOCKS, partial, (int)grid);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpyAsync(&host, partial + SSQ_BLOCKS, sizeof host, cudaMemcpyDeviceToHost,
                               stream(ctx)));
    CUDA_CHECK(cudaStreamSynchronize(stream(ctx)));
    return host;
}

// ---------------------------------------------------------------- set-up, memory

static void cuda_init(Ctx *ctx) {
    CudaBackend *be = (CudaBackend *)calloc(1, sizeof *be);
    CHECK(be, "out of host memory");
    CUDA_CHECK(cudaSetDevice(ctx->cuda_device));
    CUDA_CHECK(cudaStreamCreate(&be->stream));
    CUBLAS_CHECK(cublasCreate(&be->cublas));
    CUBLAS_CHECK(cublasSetStream(be->cublas, be->stream));
    // Plain fp32: TF32 would round GEMM inputs to 10 mantissa bits, and the CPU
    // comparison would need 1e-3 instead of 1e-5. No atomics: reproducible sums.
    CUBLAS_CHECK(cublasSetMathMode(be->cublas, CUBLAS_DEFAULT_MATH));
    CUBLAS_CHECK(cublasSetAtomicsMode(be->cublas, CUBLAS_ATOMICS_NOT_ALLOWED));
    ctx->backend = be;
}

static void cuda_destroy(Ctx *ctx) {
    CudaBackend *be = backend(ctx);
    if (!be) return;
    CUDA_CHECK(cudaStreamSynchronize(be->stream));
    if (be->scratch) {
        CUDA_CHECK(cudaFree(be->scratch));
        ledger_release(&ctx->ledger, MEM_WORKSPACE, be->scratch_bytes);
    }
    CUBLAS_CHECK(cublasDestroy(be->cublas));
    CUDA_CHECK(cudaStreamDestroy(be->stream));
    free(be);
    ctx->backend = NULL;
}

static void *cuda_alloc(Ctx *ctx, size_t bytes) {
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err == cudaErrorMemoryAllocation) {  // clear it: the caller reports the OOM
        (void)cudaGetLastError();
        return NULL;
    }
    CUDA_CHECK(err);
    // Zero-filled, and finished before we return: safe to use from any stream.
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream(ctx)));
    CUDA_CHECK(cudaStreamSynchronize(stream(ctx)));
    return p;
}

static void cuda_free(Ctx *ctx, void *p) {
    if (!p) return;
    CUDA_CHECK(cudaStreamSynchronize(stream(ctx)));  // no queued kernel may still use it
    CUDA_CHECK(cudaFree(p));
}

static void cuda_memset0(Ctx *ctx, void *p, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream(ctx)));
}
// From pageable host memory (malloc) the copy is staged before cudaMemcpyAsync
// returns, so the caller may reuse host_src at once.
static void cuda_to_device(Ctx *ctx, void *dst, const void *host_src, size_t bytes) {
    if (bytes)
        CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream(ctx)));
}

static void cuda_to_host(Ctx *ctx, void *host_dst, const void *src, size_t bytes) {
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream(ctx)));
    CUDA_CHECK(cudaStreamSynchronize(stream(ctx)));  // the caller reads host_dst next
}
static void cuda_copy(Ctx *ctx, void *dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream(ctx)));
}
static void cuda_synchronize(Ctx *ctx) { CUDA_CHECK(cudaStreamSynchronize(stream(ctx))); }

// ---------------------------------------------------------------- the table

static const Ops ops_cuda = {
    .name = "cuda",
    .init = cuda_init, .destroy = cuda_destroy,
    .alloc = cuda_alloc, .free = cuda_free, .memset0 = cuda_memset0,
    .to_device = cuda_to_device, .to_host = cuda_to_host, .copy = cuda_copy,
    .synchronize = cuda_synchronize,
    .matmul_forward = cuda_matmul_forward, .matmul_backward = cuda_matmul_backward,
    .embedding_forward = cuda_embedding_forward, .embedding_backward = cuda_embedding_backward,
    .layernorm_forward = cuda_layernorm_forward, .layernorm_backward = cuda_layernorm_backward,
    .attention_forward = cuda_attention_forward, .attention_backward = cuda_attention_backward,
    .gelu_forward = cuda_gelu_forward, .gelu_backward = cuda_gelu_backward,
    .residual_forward = cuda_residual_forward, .accumulate = cuda_accumulate,
    .crossentropy_forward = cuda_crossentropy_forward,
    .crossentropy_backward = cuda_crossentropy_backward,
    .adamw_update = cuda_adamw_update, .sum_squares = cuda_sum_squares, .scale = cuda_scale,
};

extern "C" const Ops *ops_cuda_table(void) { return &ops_cuda; }

extern "C" int cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // no driver or no device: an answer, not an error
        return 0;
    }
    return n;
}
