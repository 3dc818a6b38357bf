// ops_cuda_internal.cuh — what the parts of the CUDA backend share:
// ops_cuda.cu (set-up, memory, elementwise ops, the optimizer, the ops table),
// ops_cuda_layers.cu (the layers: matmul, embedding, layernorm, cross-entropy),
// ops_cuda_attention.cu, ops_cuda_split.cu (the vocabulary split) and
// ops_cuda_precision.cu (rounding to low precision, fp8 quantization) and
// ops_cuda_fp8.cu (the fp8 GEMMs through cuBLASLt). Launch geometry,
// the backend's stream and workspace, the deterministic warp and block
// reductions. Not for code outside the backend.
#pragma once
#include <cuda_bf16.h>

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

static inline CudaBackend *backend(Ctx *ctx) { return (CudaBackend *)ctx->backend; }
static inline cudaStream_t stream(Ctx *ctx) { return backend(ctx)->stream; }

// Grid for a grid-stride loop over n > 0 elements; 65536 blocks of 256 threads
// fill an H100 many times over, and the cap keeps the grid legal for any n.
static inline unsigned elem_grid(size_t n) {
    size_t g = (n + BLOCK - 1) / BLOCK;
    return (unsigned)(g < 65536 ? g : 65536);
}
static inline unsigned row_grid(size_t rows) {  // one warp per row
    return (unsigned)((rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK);
}

// Device workspace of at least `bytes` (ops_cuda.cu): grown on demand, charged to
// the ledger as workspace, shared by every op on the stream.
void *cuda_scratch(Ctx *ctx, size_t bytes);
// The same for the bf16 copies of the GEMM operands (CudaBackend.gemm_scratch).
void *cuda_gemm_scratch(Ctx *ctx, size_t bytes);
// The same for cuBLASLt's workspace (CudaBackend.lt_workspace); *have: its size.
void *cuda_lt_workspace(Ctx *ctx, size_t bytes, size_t *have);
// GEMM operands in bf16 (ops_cuda_layers.cu): n fp32 values (each a bf16 value: the
// caller's promise, ctx.h's gemm_dtype for the linear layers, the attention's rt for
// its own GEMMs) converted into dst, on the stream; and the
// slot an operand of n values takes in cuda_gemm_scratch (aligned to 256 bytes).
const __nv_bfloat16 *cuda_to_bf16(Ctx *ctx, __nv_bfloat16 *dst, const float *src, size_t n);
size_t cuda_bf16_slot(size_t n);

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

// The layers (ops_cuda_layers.cu, ops_cuda_attention.cu), as ops.h declares them.
void cuda_matmul_forward(Ctx *ctx, float *out, const float *inp, const float *w, const float *bias,
                         int N, int C, int OC);
void cuda_matmul_backward(Ctx *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                          const float *inp, const float *w, int N, int C, int OC);
void cuda_embedding_forward(Ctx *ctx, float *out, const int *tokens, const float *wte,
                            const float *wpe, int B, int T, int C);
void cuda_embedding_backward(Ctx *ctx, float *dwte, float *dwpe, const float *dout,
                             const int *tokens, const int *host_tokens, int B, int T, int C);
void cuda_layernorm_forward(Ctx *ctx, float *out, float *mean, float *rstd, const float *inp,
                            const float *w, const float *b, int N, int C);
void cuda_layernorm_backward(Ctx *ctx, float *dinp, float *dw, float *db, const float *dout,
                             const float *inp, const float *w, const float *mean, const float *rstd,
                             int N, int C);
void cuda_attention_forward(Ctx *ctx, float *out, float *att, const float *qkv, int B, int T, int C,
                            int NH, DType rt);
void cuda_attention_backward(Ctx *ctx, float *dqkv, float *ds, const float *dout, const float *qkv,
                             const float *att, int B, int T, int C, int NH, DType rt);
// ops_cuda_flash.cu: attention without the (T,T) matrix.
void cuda_flash_attention_forward(Ctx *ctx, float *out, float *lse, const float *qkv, int B, int T,
                                  int C, int NH, DType rt);
void cuda_flash_attention_backward(Ctx *ctx, float *dqkv, const float *dout, const float *qkv,
                                   const float *out, const float *lse, int B, int T, int C, int NH,
                                   DType rt);
void cuda_crossentropy_forward(Ctx *ctx, float *losses, const float *logits, const int *targets,
                               int N, int V);
void cuda_crossentropy_backward(Ctx *ctx, float *dlogits, const float *logits, const int *targets,
                                float dloss, int N, int V);
// out(N, OC) += bias, row by row (the matmul's bias, after its GEMM).
void cuda_add_bias(Ctx *ctx, float *out, const float *bias, int N, int OC);
// The embedding backward's deterministic scatter (ops_cuda_layers.cu), shared
// with the split lookup: dwte[id - vocab_lo] += dout[n] for the ids in
// [vocab_lo, vocab_lo + Vl), grouped by id on the host from host_tokens; other
// ids are skipped, or with `strict` stop the run naming `op`.
void cuda_dwte_grouped(Ctx *ctx, float *dwte, const float *dout, const int *host_tokens,
                       int vocab_lo, int Vl, int N, int C, int strict, const char *op);

// The vocabulary split (ops_cuda_split.cu), as ops.h declares it.
void cuda_embedding_lookup_forward(Ctx *ctx, float *out, const int *tokens, const float *wte,
                                   int vocab_lo, int Vl, int N, int C);
void cuda_embedding_lookup_backward(Ctx *ctx, float *dwte, const float *dout, const int *tokens,
                                    const int *host_tokens, int vocab_lo, int Vl, int N, int C);
void cuda_position_forward(Ctx *ctx, float *out, const float *wpe, int row0, int N, int T, int C);
void cuda_position_backward(Ctx *ctx, float *dwpe, const float *dout, int row0, int N, int T,
                            int C);
void cuda_logits_max(Ctx *ctx, float *rowmax, const float *logits, int N, int Vl, int valid);
void cuda_logits_sumexp(Ctx *ctx, float *sumexp, float *tlogit, const float *logits,
                        const float *m, const int *targets, int vocab_lo, int N, int Vl,
                        int valid);
void cuda_crossentropy_loss(Ctx *ctx, float *losses, const float *m, const float *sumexp,
                            const float *tlogit, int N);
void cuda_crossentropy_backward_split(Ctx *ctx, float *dlogits, const float *logits,
                                      const float *m, const float *sumexp, const int *targets,
                                      int vocab_lo, float dloss, int N, int Vl, int valid);

// Low precision in fp32 slots (ops_cuda_precision.cu), as ops.h declares it.
void cuda_round_to(Ctx *ctx, float *x, size_t n, DType dt);
void cuda_round_stochastic_bf16(Ctx *ctx, float *x, size_t n, uint64_t seed, uint64_t offset,
                                const SRoundRule *rule);
void cuda_quantize_fp8(Ctx *ctx, float *x, size_t n, DType fmt, float scale, float *amax);
void cuda_pack_half(Ctx *ctx, uint16_t *dst, const float *src, size_t n, DType dt);
void cuda_unpack_half(Ctx *ctx, float *dst, const uint16_t *src, size_t n, DType dt);

// The fp8 recipe's GEMMs (ops_cuda_fp8.cu), as ops.h declares them.
void cuda_matmul_fp8_forward(Ctx *ctx, float *out, const float *inp, float sx, const float *w,
                             float sw, const float *bias, int N, int C, int OC);
void cuda_matmul_fp8_backward(Ctx *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                              float sdy, const float *inp, float sx, const float *w, float sw,
                              int N, int C, int OC);
