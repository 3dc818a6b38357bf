// ops_cuda_attention.cu — the CUDA backend's causal self-attention (ops.h's
// attention_forward / attention_backward): the scores, softmax and weighted sum as
// strided-batched cuBLAS GEMMs around two row kernels, in fp32, or with a bf16 recipe
// on bf16 copies on the tensor cores. (The other layers: ops_cuda_layers.cu.)
#include <math.h>

#include <cuda_bf16.h>

#include "cuda_round.cuh"
#include "ops_cuda_internal.cuh"

// ---------------------------------------------------------------- attention
//
// For batch b and head h, q, k and v are (T, hs) matrices inside qkv with row
// stride 3C, starting at columns h*hs, C + h*hs and 2C + h*hs. Consecutive heads
// are hs floats apart, so the NH heads of one batch element are one strided-
// batched GEMM; we loop over b. att(b,h) is a (T,T) block, blocks T*T apart.
//
// A low-precision recipe (rt bf16 or fp16; ops.h) rounds the two
// tensors the op makes and uses itself, the probabilities before att @ v and their
// gradient ds before the GEMMs of dq and dk, as the CPU does. In bf16 every operand
// of the six GEMMs is then a bf16 value, and all six read bf16 copies on the tensor
// cores (fp32 accumulation and output): the CPU's exact products, summed in fp32 in
// another order. The copies go into the backend's GEMM scratch, one stream.

// The strided-batched GEMM of cublasSgemmStridedBatched's arguments, A and B bf16.
static void gemm_bf16_batched(Ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                              int k, float alpha, const __nv_bfloat16 *A, int lda, long long sa,
                              const __nv_bfloat16 *B, int ldb, long long sb, float beta, float *C,
                              int ldc, long long sc, int batch) {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(backend(ctx)->cublas, ta, tb, m, n, k, &alpha, A,
                                            CUDA_R_16BF, lda, sa, B, CUDA_R_16BF, ldb, sb, &beta,
                                            C, CUDA_R_32F, ldc, sc, batch, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
}

// One attention GEMM for every batch element: C_b = alpha op(A_b) op(B_b) + beta C_b,
// each operand's batch element b at per_b elements past the one before, the NH heads
// of each one strided batch. From the fp32 operands (f) or their bf16 copies (h, when
// both are given): the same call otherwise.
typedef struct {
    const float *f;              // the fp32 operand
    const __nv_bfloat16 *h;      // its bf16 copy, or NULL
    long long per_b;             // elements from one batch element's block to the next
    int ld;                      // leading dimension (row stride)
    long long per_head;          // elements from one head's matrix to the next
} AttOperand;
static void att_gemm(Ctx *ctx, int B, int NH, cublasOperation_t ta, cublasOperation_t tb, int m,
                     int n, int k, float alpha, AttOperand A, AttOperand Bo, float beta, float *C,
                     long long c_per_b, int ldc, long long c_per_head) {
    for (int b = 0; b < B; b++) {
        float *c = C + b * c_per_b;
        if (A.h && Bo.h)
            gemm_bf16_batched(ctx, ta, tb, m, n, k, alpha, A.h + b * A.per_b, A.ld, A.per_head,
                              Bo.h + b * Bo.per_b, Bo.ld, Bo.per_head, beta, c, ldc, c_per_head, NH);
        else
            CUBLAS_CHECK(cublasSgemmStridedBatched(backend(ctx)->cublas, ta, tb, m, n, k, &alpha,
                                                   A.f + b * A.per_b, A.ld, A.per_head,
                                                   Bo.f + b * Bo.per_b, Bo.ld, Bo.per_head, &beta,
                                                   c, ldc, c_per_head, NH));
    }
}

// The attention's tensors as GEMM operands. q, k, v: batch b at b*T*3C, head h at
// column h*hs, row stride 3C. att, ds: (T,T) blocks, batch b at b*NH*T*T. out, dy:
// batch b at b*T*C, head h at column h*hs, row stride C.
static AttOperand qkv_part(const float *qkv, const __nv_bfloat16 *qkvb, int part, int T, int C,
                           int hs) {
    return (AttOperand){qkv + part * C, qkvb ? qkvb + part * C : NULL, (long long)T * 3 * C,
                        3 * C, hs};
}
static AttOperand square(const float *x, const __nv_bfloat16 *xb, int T, int NH) {
    return (AttOperand){x, xb, (long long)NH * T * T, T, (long long)T * T};
}
static AttOperand rows_of(const float *x, const __nv_bfloat16 *xb, int T, int C, int hs) {
    return (AttOperand){x, xb, (long long)T * C, C, hs};
}

// rt checked on the host as round_to checks it (the CPU's stops the run there):
// through() would take any other type for fp32.
static void check_rt(DType rt) {
    CHECK(rt == DT_F32 || rt == DT_BF16 || rt == DT_F16 || rt == DT_E4M3 || rt == DT_E5M2,
          "attention: %s is not a float type to round to", dtype_name(rt));
}

// One warp per row of scores, in place: row t keeps columns 0..t (causal). Each
// probability is rounded to rt as it is written (the recipe's type; through() is
// ops->round_to's element) and, when `copy` is given (bf16), also stored there in
// bf16 for the att @ v GEMM: one pass where three (softmax, round, copy) were.
__global__ void causal_softmax_kernel(float *att, __nv_bfloat16 *copy, int rows, int T,
                                      DType rt) {
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
    for (int j = LANE; j < T; j += 32) {
        float p = j <= t ? through(a[j] * inv, rt) : 0.0f;
        a[j] = p;
        if (copy) copy[(size_t)row * T + j] = __float2bfloat16_rn(p);  // exact: p is bf16
    }
}

void cuda_attention_forward(Ctx *ctx, float *out, float *att, const float *qkv, int B,
                                   int T, int C, int NH, DType rt) {
    check_rt(rt);
    int hs = C / NH;
    size_t nq = (size_t)B * T * 3 * C, na = (size_t)B * NH * T * T, rows = (size_t)B * NH * T;
    const float scale = 1.0f / sqrtf((float)hs);
    __nv_bfloat16 *s = rt == DT_BF16 ? (__nv_bfloat16 *)cuda_gemm_scratch(
                           ctx, (cuda_bf16_slot(nq) + cuda_bf16_slot(na)) * sizeof(__nv_bfloat16)) : NULL;
    const __nv_bfloat16 *qkvb = s ? cuda_to_bf16(ctx, s, qkv, nq) : NULL;
    // att(T,T) = q k^T / sqrt(hs): the full square
    att_gemm(ctx, B, NH, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, scale, qkv_part(qkv, qkvb, 1, T, C, hs),
             qkv_part(qkv, qkvb, 0, T, C, hs), 0.0f, att, (long long)NH * T * T, T, (long long)T * T);
    __nv_bfloat16 *attb = s ? s + cuda_bf16_slot(nq) : NULL;  // att rounded, and its bf16 copy
    if (rows)
        causal_softmax_kernel<<<row_grid(rows), BLOCK, 0, stream(ctx)>>>(att, attb, (int)rows, T, rt);
    CUDA_CHECK_LAUNCH();
    // out(T,hs) = att(T,T) @ v(T,hs), head h at columns h*hs
    att_gemm(ctx, B, NH, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, qkv_part(qkv, qkvb, 2, T, C, hs),
             square(att, attb, T, NH), 0.0f, out, (long long)T * C, C, hs);
}

// Softmax backward, one warp per row, in place on datt:
// ds[t,j] = att[t,j] * (datt[t,j] - sum_i att[t,i] datt[t,i]) for j <= t, else 0,
// rounded to rt as it is written and, with `copy` (bf16), stored there in bf16 too.
__global__ void softmax_backward_kernel(float *ds, __nv_bfloat16 *copy, const float *att, int rows,
                                        int T, DType rt) {
    int row = WARP_ROW;
    if (row >= rows) return;
    int t = row % T;
    const float *p = att + (size_t)row * T;
    float *d = ds + (size_t)row * T;
    float dot = 0.0f;
    for (int j = LANE; j <= t; j += 32) dot += p[j] * d[j];
    dot = warp_reduce(dot, SumOp());
    for (int j = LANE; j < T; j += 32) {
        float v = j <= t ? through(p[j] * (d[j] - dot), rt) : 0.0f;
        d[j] = v;
        if (copy) copy[(size_t)row * T + j] = __float2bfloat16_rn(v);
    }
}

void cuda_attention_backward(Ctx *ctx, float *dqkv, float *ds, const float *dout,
                                    const float *qkv, const float *att, int B, int T, int C,
                                    int NH, DType rt) {
    check_rt(rt);
    int hs = C / NH;
    size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    size_t rows = (size_t)B * NH * T;
    long long TT = (long long)T * T, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    __nv_bfloat16 *s = rt == DT_BF16 ? (__nv_bfloat16 *)cuda_gemm_scratch(
        ctx, (cuda_bf16_slot(nq) + cuda_bf16_slot(ny) + cuda_bf16_slot(na)) *
                 sizeof(__nv_bfloat16)) : NULL;
    const __nv_bfloat16 *qkvb = s ? cuda_to_bf16(ctx, s, qkv, nq) : NULL;
    const __nv_bfloat16 *dyb = s ? cuda_to_bf16(ctx, s + cuda_bf16_slot(nq), dout, ny) : NULL;
    // att's copy, then ds's
    __nv_bfloat16 *sq = s ? s + cuda_bf16_slot(nq) + cuda_bf16_slot(ny) : NULL;
    const __nv_bfloat16 *attb = s ? cuda_to_bf16(ctx, sq, att, na) : NULL;
    // dv(T,hs) += att^T(T,T) @ dy(T,hs)
    att_gemm(ctx, B, NH, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, rows_of(dout, dyb, T, C, hs),
             square(att, attb, T, NH), 1.0f, dqkv + 2 * C, (long long)T * C3, (int)C3, hs);
    // datt(T,T) = dy(T,hs) @ v^T, into ds
    att_gemm(ctx, B, NH, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, 1.0f, qkv_part(qkv, qkvb, 2, T, C, hs),
             rows_of(dout, dyb, T, C, hs), 0.0f, ds, (long long)NH * TT, T, TT);
    // ds rounded, and its bf16 copy over att's (the dv GEMM above has read that: the
    // stream runs in order)
    __nv_bfloat16 *dsb = sq;
    if (rows)
        softmax_backward_kernel<<<row_grid(rows), BLOCK, 0, stream(ctx)>>>(ds, dsb, att, (int)rows,
                                                                           T, rt);
    CUDA_CHECK_LAUNCH();
    // dq(T,hs) += ds(T,T) @ k(T,hs) / sqrt(hs)
    att_gemm(ctx, B, NH, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, scale, qkv_part(qkv, qkvb, 1, T, C, hs),
             square(ds, dsb, T, NH), 1.0f, dqkv, (long long)T * C3, (int)C3, hs);
    // dk(T,hs) += ds^T(T,T) @ q(T,hs) / sqrt(hs)
    att_gemm(ctx, B, NH, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, scale, qkv_part(qkv, qkvb, 0, T, C, hs),
             square(ds, dsb, T, NH), 1.0f, dqkv + C, (long long)T * C3, (int)C3, hs);
}
