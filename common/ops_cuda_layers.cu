// ops_cuda_layers.cu — the CUDA backend's layers: matmul (cuBLAS, fp32 or, when
// ctx->gemm_dtype says the inputs are bf16 values, bf16 on the tensor cores), the
// embedding, layernorm and cross-entropy kernels, each a forward and a backward (the
// attention: ops_cuda_attention.cu). The rules of ops_cuda.cu hold here: no float
// atomics (every sum in an order fixed by the shapes), and everything on the
// backend's one stream.
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include <cuda_bf16.h>

#include "ops_cuda_internal.cuh"

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
    float *part_b = (float *)cuda_scratch(ctx, 2 * (size_t)nchunks * C * sizeof(float));
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

// bf16 operands (ctx->gemm_dtype == DT_BF16). The caller promises (ctx.h) that every
// input holds a bf16 value, so the conversion below is exact, and a bf16 GEMM with
// an fp32 accumulator and fp32 output (CUBLAS_COMPUTE_32F) computes what
// cublasSgemm computes, exact products summed in fp32, only in another order: on an
// H100's tensor cores, at ~15x the fp32 rate (989 against 67 TFLOP/s dense). The
// operands are converted into a scratch of the backend's (cuda_gemm_scratch) on
// every call: weights change every step, and a copy moves 6 bytes per value, little
// beside the GEMM's 2 N C OC FLOPs at the model's sizes. Round to nearest even
// all the same: a value that is not bf16 (a broken promise) then errs by at most
// half a bf16 ulp, as the model's own rounding (ops->round_to) would.
__global__ void to_bf16_kernel(__nv_bfloat16 *dst, const float *src, size_t n) {
    GRID_STRIDE(i, n) dst[i] = __float2bfloat16_rn(src[i]);
}

// n bf16 values rounded up to 128 (256 bytes): each operand's slot in the scratch
// starts aligned, as cuBLAS's tensor-core kernels want their operands. (Shared with
// ops_cuda_attention.cu, as is cuda_to_bf16.)
size_t cuda_bf16_slot(size_t n) { return (n + 127) / 128 * 128; }

const __nv_bfloat16 *cuda_to_bf16(Ctx *ctx, __nv_bfloat16 *dst, const float *src, size_t n) {
    if (n) to_bf16_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(dst, src, n);
    CUDA_CHECK_LAUNCH();
    return dst;
}

// rows x cols fp32 values (row stride cols) into bf16 rows of stride ld >= cols. A
// matrix whose rows are a multiple of 8 bf16 values apart (16 bytes) has every row
// aligned as cuBLAS's sm90 tensor-core kernels want it; the LM head's gradient has
// V = 50257 columns, and with ld = V cuBLAS falls back to slower kernels (llm.c pads
// the vocabulary to 50304 for the same reason). The padding is never read: the GEMMs
// below take cols as their dimension and ld as the stride only.
__global__ void to_bf16_rows_kernel(__nv_bfloat16 *dst, const float *src, size_t rows, int cols,
                                    int ld) {
    GRID_STRIDE(i, rows * cols) dst[i / cols * ld + i % cols] = __float2bfloat16_rn(src[i]);
}

// The leading dimension of a bf16 copy of a matrix of cols columns: cols rounded up to 8.
static int bf16_ld(int cols) { return (cols + 7) / 8 * 8; }

static const __nv_bfloat16 *to_bf16_rows(Ctx *ctx, __nv_bfloat16 *dst, const float *src,
                                         size_t rows, int cols) {
    int ld = bf16_ld(cols);
    if (ld == cols) return cuda_to_bf16(ctx, dst, src, rows * cols);
    if (rows) to_bf16_rows_kernel<<<elem_grid(rows * cols), BLOCK, 0, stream(ctx)>>>(dst, src, rows,
                                                                                     cols, ld);
    CUDA_CHECK_LAUNCH();
    return dst;
}

// cublasSgemm's C = A B + beta C with alpha 1 (same operations, sizes and leading
// dimensions), A and B in bf16, C in fp32, the products and sums in fp32.
static void gemm_bf16(Ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                      const __nv_bfloat16 *A, int lda, const __nv_bfloat16 *B, int ldb,
                      float beta, float *C, int ldc) {
    const float one = 1.0f;  // alpha and beta are floats: CUBLAS_COMPUTE_32F's scale type
    CUBLAS_CHECK(cublasGemmEx(backend(ctx)->cublas, ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B,
                              CUDA_R_16BF, ldb, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

static int gemm_reads_bf16(const Ctx *ctx) {
    CHECK(ctx->gemm_dtype == DT_F32 || ctx->gemm_dtype == DT_BF16,
          "matmul on cuda: ctx->gemm_dtype is %s (fp32 or bf16 only)", dtype_name(ctx->gemm_dtype));
    return ctx->gemm_dtype == DT_BF16;
}

// src's rows (ld floats apart) packed into dst (cols floats apart).
__global__ void unpad_rows_kernel(float *dst, const float *src, size_t rows, int cols, int ld) {
    GRID_STRIDE(i, rows * cols) dst[i] = src[i / cols * ld + i % cols];
}

void cuda_matmul_forward(Ctx *ctx, float *out, const float *inp, const float *w,
                                const float *bias, int N, int C, int OC) {
    const float one = 1.0f, zero = 0.0f;
    if (gemm_reads_bf16(ctx)) {  // the same GEMM as below, on bf16 copies
        size_t nw = (size_t)OC * C, ni = (size_t)N * C;
        __nv_bfloat16 *s = (__nv_bfloat16 *)cuda_gemm_scratch(
            ctx, (cuda_bf16_slot(nw) + cuda_bf16_slot(ni)) * sizeof(__nv_bfloat16));
        const __nv_bfloat16 *wb = cuda_to_bf16(ctx, s, w, nw);
        const __nv_bfloat16 *ib = cuda_to_bf16(ctx, s + cuda_bf16_slot(nw), inp, ni);
        int ldo = (OC + 3) / 4 * 4;
        if (ldo == OC) {
            gemm_bf16(ctx, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, wb, C, ib, C, zero, out, OC);  // as below
        } else {
            // out's rows must start 16 bytes apart for the tensor-core kernels too: when
            // OC is not a multiple of 4 floats (the LM head's V = 50257), the GEMM writes
            // the rows of a padded scratch, at most UNPAD_ROWS at a time (206 MB for GPT-2's
            // vocabulary; the workspace's growth keeps 50 % more), and a pass packs them
            // into out.
            enum { UNPAD_ROWS = 1024 };
            size_t chunk = N < UNPAD_ROWS ? (size_t)N : (size_t)UNPAD_ROWS;  // what one GEMM writes
            float *o = (float *)cuda_scratch(ctx, chunk * ldo * sizeof(float));
            for (int r0 = 0; r0 < N; r0 += UNPAD_ROWS) {
                int rows = N - r0 < UNPAD_ROWS ? N - r0 : UNPAD_ROWS;
                gemm_bf16(ctx, CUBLAS_OP_T, CUBLAS_OP_N, OC, rows, C, wb, C, ib + (size_t)r0 * C, C,
                          zero, o, ldo);
                size_t n = (size_t)rows * OC;
                unpad_rows_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(out + (size_t)r0 * OC, o,
                                                                           (size_t)rows, OC, ldo);
                CUDA_CHECK_LAUNCH();
            }
        }
    } else {
        // out(N,OC) = inp(N,C) @ w(OC,C)^T
        CUBLAS_CHECK(cublasSgemm(backend(ctx)->cublas, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &one, w,
                                 C, inp, C, &zero, out, OC));
    }
    if (bias) cuda_add_bias(ctx, out, bias, N, OC);
}

void cuda_add_bias(Ctx *ctx, float *out, const float *bias, int N, int OC) {
    size_t n = (size_t)N * OC;
    if (n) add_bias_kernel<<<elem_grid(n), BLOCK, 0, stream(ctx)>>>(out, bias, n, OC);
    CUDA_CHECK_LAUNCH();
}

void cuda_matmul_backward(Ctx *ctx, float *dinp, float *dw, float *dbias,
                                 const float *dout, const float *inp, const float *w, int N,
                                 int C, int OC) {
    cublasHandle_t h = backend(ctx)->cublas;
    const float one = 1.0f;  // beta = 1: accumulate into the gradients
    if (gemm_reads_bf16(ctx) && (dinp || dw)) {  // the same GEMMs as below, on bf16 copies
        // Only the operands a wanted gradient reads: dout always, w for dinp, inp for dw.
        // dout's copy has aligned rows (to_bf16_rows: the LM head's OC = V is odd).
        int ldd = bf16_ld(OC);
        size_t nd = (size_t)N * ldd, nw = dinp ? (size_t)OC * C : 0, ni = dw ? (size_t)N * C : 0;
        __nv_bfloat16 *s = (__nv_bfloat16 *)cuda_gemm_scratch(
            ctx, (cuda_bf16_slot(nd) + cuda_bf16_slot(nw) + cuda_bf16_slot(ni)) *
                     sizeof(__nv_bfloat16));
        const __nv_bfloat16 *doutb = to_bf16_rows(ctx, s, dout, (size_t)N, OC);
        if (dinp) {  // dinp(N,C) += dout(N,OC) @ w(OC,C)
            const __nv_bfloat16 *wb = cuda_to_bf16(ctx, s + cuda_bf16_slot(nd), w, nw);
            gemm_bf16(ctx, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, wb, C, doutb, ldd, one, dinp, C);
        }
        if (dw) {  // dw(OC,C) += dout^T(OC,N) @ inp(N,C)
            const __nv_bfloat16 *ib =
                cuda_to_bf16(ctx, s + cuda_bf16_slot(nd) + cuda_bf16_slot(nw), inp, ni);
            gemm_bf16(ctx, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, ib, C, doutb, ldd, one, dw, C);
        }
    } else {
        if (dinp)  // dinp(N,C) += dout(N,OC) @ w(OC,C)
            CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, &one, w, C, dout, OC,
                                     &one, dinp, C));
        if (dw)  // dw(OC,C) += dout^T(OC,N) @ inp(N,C)
            CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, &one, inp, C, dout, OC,
                                     &one, dw, C));
    }
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

void cuda_embedding_forward(Ctx *ctx, float *out, const int *tokens, const float *wte,
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

// dwte[id - vocab_lo] += dout[n] for every position n whose id (host_tokens[n])
// lies in [vocab_lo, vocab_lo + Vl); other ids are skipped, or, with `strict`,
// are an error (the unsplit embedding: every id must be a row). Shared by
// cuda_embedding_backward and cuda_embedding_lookup_backward (ops_cuda_split.cu).
// host_tokens is host memory: the model keeps the host copy of each batch, so no
// copy back from the GPU (and no wait for it) is needed here.
void cuda_dwte_grouped(Ctx *ctx, float *dwte, const float *dout, const int *host_tokens,
                       int vocab_lo, int Vl, int N, int C, int strict, const char *op) {
    if (N <= 0 || C <= 0 || Vl <= 0) return;
    CHECK(host_tokens, "%s on cuda: host_tokens is NULL (the host copy of the token ids is "
          "required)", op);
    // Positions that share a token would race on its dwte row. So the host groups
    // the positions by token (a counting sort over the row ids) and each
    // distinct token gets one block that sums its rows in a fixed order.
    size_t pack_n = 3 * (size_t)N + 1;  // uniq (<= N) | off (<= N+1) | pos (<= N)
    int *pack = (int *)malloc((pack_n + N) * sizeof(int));  // + row (N), host only
    CHECK(pack, "out of host memory");
    int *uniq = pack, *off = pack + N, *pos = pack + 2 * (size_t)N + 1, *row = pack + pack_n;
    int maxrow = -1, held = 0;  // the largest row hit; how many positions add a row
    for (int n = 0; n < N; n++) {
        long long r = (long long)host_tokens[n] - vocab_lo;
        row[n] = r >= 0 && r < Vl ? (int)r : -1;  // -1: not a row of this table
        CHECK(row[n] >= 0 || !strict, "%s: token %d at position %d is not a row of the table",
              op, host_tokens[n], n);
        if (row[n] > maxrow) maxrow = row[n];
        held += row[n] >= 0;
    }
    if (held == 0) {  // no id of this range in the batch: nothing to add (and no 0-block grid)
        free(pack);
        return;
    }
    int *start = (int *)calloc((size_t)maxrow + 2, sizeof(int));  // first slot of row v in pos
    CHECK(start, "out of host memory");
    int U = 0;
    for (int n = 0; n < N; n++)
        if (row[n] >= 0) start[row[n] + 1]++;                        // counts ...
    for (int v = 0; v <= maxrow; v++) start[v + 1] += start[v];      // ... to offsets
    for (int v = 0; v <= maxrow; v++)
        if (start[v + 1] > start[v]) uniq[U] = v, off[U] = start[v], U++;
    off[U] = held;
    for (int n = 0; n < N; n++)
        if (row[n] >= 0) pos[start[row[n]]++] = n;  // increasing n within each row
    int *dpack = (int *)cuda_scratch(ctx, pack_n * sizeof(int));
    // From pageable memory the copy is staged before the call returns: `pack`
    // may be freed right after.
    CUDA_CHECK(cudaMemcpyAsync(dpack, pack, pack_n * sizeof(int), cudaMemcpyHostToDevice,
                               stream(ctx)));
    dwte_kernel<<<U, 128, 0, stream(ctx)>>>(dwte, dout, dpack, dpack + N, dpack + 2 * (size_t)N + 1,
                                           C);
    CUDA_CHECK_LAUNCH();
    free(start);
    free(pack);
}

// host_tokens: the same ids as `tokens`, in host memory (see cuda_dwte_grouped).
void cuda_embedding_backward(Ctx *ctx, float *dwte, float *dwpe, const float *dout,
                                    const int *tokens, const int *host_tokens, int B, int T,
                                    int C) {
    (void)tokens;
    int N = B * T;
    if (N <= 0 || C <= 0) return;
    size_t TC = (size_t)T * C;
    if (dwpe) dwpe_kernel<<<elem_grid(TC), BLOCK, 0, stream(ctx)>>>(dwpe, dout, B, TC);
    CUDA_CHECK_LAUNCH();
    if (dwte) cuda_dwte_grouped(ctx, dwte, dout, host_tokens, 0, INT_MAX, N, C, 1,
                                "embedding_backward");
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

void cuda_layernorm_forward(Ctx *ctx, float *out, float *mean, float *rstd,
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

void cuda_layernorm_backward(Ctx *ctx, float *dinp, float *dw, float *db,
                                    const float *dout, const float *inp, const float *w,
                                    const float *mean, const float *rstd, int N, int C) {
    if (dinp && N > 0)  // dw, db below: sums over all N rows
        layernorm_backward_kernel<<<row_grid(N), BLOCK, 0, stream(ctx)>>>(dinp, dout, inp, w,
                                                                          mean, rstd, N, C);
    CUDA_CHECK_LAUNCH();
    column_sums(ctx, db, dw, dout, inp, mean, rstd, N, C);
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

void cuda_crossentropy_forward(Ctx *ctx, float *losses, const float *logits,
                                      const int *targets, int N, int V) {
    if (N > 0)
        crossentropy_forward_kernel<<<N, CE_BLOCK, 0, stream(ctx)>>>(losses, logits, targets, V);
    CUDA_CHECK_LAUNCH();
}
void cuda_crossentropy_backward(Ctx *ctx, float *dlogits, const float *logits,
                                       const int *targets, float dloss, int N, int V) {
    if (N > 0)
        crossentropy_backward_kernel<<<N, CE_BLOCK, 0, stream(ctx)>>>(dlogits, logits, targets,
                                                                     dloss, V);
    CUDA_CHECK_LAUNCH();
}
