// ops_cuda_fp8.cu — the fp8 recipe's GEMMs on the fp8 tensor cores, through cuBLASLt.
//
// 06_mixed_precision/fp8_linear.c hands each linear layer's operands over as
// quantize_fp8 left them: fp32 slots holding v = fp8(x·s)/s, with the tensor's scale
// s. Here they become fp8 codes again, q = fp8(v·s). That is exact: v·s is q to within two fp32
// roundings (2^-23 of q), far below half the gap between q and its fp8 neighbours
// (at least 2^-4 of q with 3 mantissa bits, 2^-3 with 2). cuBLASLt then multiplies
// the codes on the tensor cores, accumulating in fp32, and alpha = 1/(sx·sw) puts
// the scales back: the products the fp32 GEMM on the v's sums, summed in another
// order (and, on Hopper, with the accumulator's own rounding).
//
// Hopper's fp8 GEMMs take one layout only, "TN": both operands contiguous along the
// dimension the product sums over. The forward's out = x·w^T sums over C, along
// which x(N,C) and w(OC,C) are both stored: TN as they are. The input gradient
// dinp = dy·w sums over OC, and w is not contiguous along it; the weight gradient
// dw = dy^T·x sums over N, and neither is. So the backward also encodes w, x and dy
// transposed, as Transformer Engine's cast-transpose kernels do. E4M3 for x and w,
// E5M2 for dy: E5M2 x E5M2 is the one pairing fp8 GEMMs refuse, and no GEMM here
// has it.
//
// Used where every dimension is a multiple of 16 (cuBLASLt's rule for fp8 operands),
// unless COURSE_FP8_GEMM=fp32; otherwise the fp32 GEMM on the v's (ops_cuda_layers.cu's
// matmul). Checked against it on an H200 (results/gpu/2026-11-26-h200: test_gpu's
// matmul_fp8 checks, scripts/gpu_check.sh item 10).
#include <math.h>
#include <stdint.h>

#include <cuda_fp8.h>

#include "ops_cuda_internal.cuh"

// ---------------------------------------------------------------- encoding

// dst = the fp8 codes of src(R,K)·s, row-major: as stored (transpose = 0, R x K) or
// transposed (K x R). 32 x 32 tiles, 32 x 8 threads: a warp reads 32 consecutive
// floats of a row and, transposed, writes 32 consecutive codes of a column via
// shared memory. Saturating, as quantize_fp8 is (NaN stays NaN). The rows' tiles
// run along the grid's x (2^31 - 1 blocks: any N), the columns' along y (C, OC < 2^21).
__global__ void fp8_encode_kernel(__nv_fp8_storage_t *dst, const float *src, int R, int K,
                                  float s, __nv_fp8_interpretation_t fmt, int transpose) {
    __shared__ __nv_fp8_storage_t tile[32][33];  // 33: no bank conflicts on the way out
    int r0 = blockIdx.x * 32, k0 = blockIdx.y * 32, tx = threadIdx.x, ty = threadIdx.y;
    for (int i = ty; i < 32; i += 8) {
        int r = r0 + i, k = k0 + tx;
        if (r >= R || k >= K) continue;
        __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(src[(size_t)r * K + k] * s, __NV_SATFINITE,
                                                     fmt);
        if (transpose) tile[i][tx] = q;
        else dst[(size_t)r * K + k] = q;
    }
    if (!transpose) return;  // the same for the whole block: no thread skips the barrier alone
    __syncthreads();
    for (int i = ty; i < 32; i += 8) {
        int k = k0 + i, r = r0 + tx;
        if (k < K && r < R) dst[(size_t)k * R + r] = tile[tx][i];
    }
}

static const void *encode(Ctx *ctx, uint8_t *dst, const float *src, int R, int K, float s,
                          DType fmt, int transpose) {
    CHECK(K <= 65535 * 32, "fp8 encode: %d columns (at most %d)", K, 65535 * 32);
    dim3 grid((R + 31) / 32, (K + 31) / 32), block(32, 8);
    fp8_encode_kernel<<<grid, block, 0, stream(ctx)>>>(
        (__nv_fp8_storage_t *)dst, src, R, K, s, fmt == DT_E5M2 ? __NV_E5M2 : __NV_E4M3,
        transpose);
    CUDA_CHECK_LAUNCH();
    return dst;
}

// Codes of n values rounded up to 256 bytes: every operand starts aligned.
static size_t slot(size_t n) { return (n + 255) / 256 * 256; }

// ---------------------------------------------------------------- the GEMM

// The largest power of two (at most 256) that the address is a multiple of: what
// cuBLASLt may assume of a pointer's alignment (its heuristic otherwise assumes 256).
static uint32_t alignment(const void *p) {
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a != 0) a /= 2;
    return a;
}

static cudaDataType lt_type(DType t) { return t == DT_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3; }

// D(m,n) = alpha·A^T·B + beta·D in cuBLAS's column-major terms: A is k x m and B is
// k x n, fp8 codes with leading dimension k; D is fp32 with leading dimension m.
// Returns 0, having done nothing, when cuBLASLt has no algorithm for it.
static int lt_gemm(Ctx *ctx, int m, int n, int k, const void *A, DType ta, const void *B, DType tb,
                   float alpha, float beta, float *D) {
    CudaBackend *be = backend(ctx);
    size_t ws_bytes = 0;
    void *ws = cuda_lt_workspace(ctx, (size_t)32 << 20, &ws_bytes);  // Hopper's recommended 32 MiB
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulPreference_t pref;
    cublasOperation_t opA = CUBLAS_OP_T, opB = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB));
    // Partial sums promoted to fp32 at intervals (cuBLASLt's default, set to say so):
    // Hopper's fp8 accumulator alone keeps ~14 bits (test_gpu_fp8.c's tolerance).
    int8_t fast_accum = 0;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum,
                                                sizeof fast_accum));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, lt_type(ta), k, m, k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, lt_type(tb), k, n, k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
    uint32_t al[3] = {alignment(A), alignment(B), alignment(D)};
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], sizeof al[0]));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], sizeof al[1]));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], sizeof al[2]));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[2], sizeof al[2]));
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(be->lt, op, la, lb, ld, ld, pref, 1, &h,
                                                       &found);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0)  // C and D are the same matrix: beta = 1 adds
        CUBLAS_CHECK(cublasLtMatmul(be->lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &h.algo,
                                    ws, ws_bytes, stream(ctx)));
    else if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED &&
             st != CUBLAS_STATUS_ARCH_MISMATCH)  // no fp8 tensor cores (before sm_89): no algorithm
        CUBLAS_CHECK(st);  // anything but "no algorithm" is an error
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(op);
    return st == CUBLAS_STATUS_SUCCESS && found > 0;
}

// The fp8 path applies: asked for, the shapes fp8 GEMMs take, and an alpha that the
// scales leave a normal float (1 / (s1·s2), computed in double).
static int use_lt(Ctx *ctx, int N, int C, int OC, double alpha) {
    float a = (float)alpha;
    return backend(ctx)->fp8_lt && N > 0 && N % 16 == 0 && C % 16 == 0 && OC % 16 == 0 &&
           isnormal(a);
}

// ---------------------------------------------------------------- the ops

void cuda_matmul_fp8_forward(Ctx *ctx, float *out, const float *inp, float sx, const float *w,
                             float sw, const float *bias, int N, int C, int OC) {
    double alpha = 1.0 / ((double)sx * sw);
    if (use_lt(ctx, N, C, OC, alpha)) {
        size_t nx = (size_t)N * C, nw = (size_t)OC * C;
        uint8_t *s = (uint8_t *)cuda_gemm_scratch(ctx, slot(nx) + slot(nw));
        const void *xq = encode(ctx, s, inp, N, C, sx, DT_E4M3, 0);
        const void *wq = encode(ctx, s + slot(nx), w, OC, C, sw, DT_E4M3, 0);
        // out^T(OC,N) = w(OC,C)·x^T: A = w (C x OC column-major), B = x (C x N)
        if (lt_gemm(ctx, OC, N, C, wq, DT_E4M3, xq, DT_E4M3, (float)alpha, 0.0f, out)) {
            if (bias) cuda_add_bias(ctx, out, bias, N, OC);
            return;
        }
    }
    cuda_matmul_forward(ctx, out, inp, w, bias, N, C, OC);
}

void cuda_matmul_fp8_backward(Ctx *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                              float sdy, const float *inp, float sx, const float *w, float sw,
                              int N, int C, int OC) {
    double a_in = 1.0 / ((double)sdy * sw), a_w = 1.0 / ((double)sdy * sx);
    int lt_in = dinp && use_lt(ctx, N, C, OC, a_in), lt_w = dw && use_lt(ctx, N, C, OC, a_w);
    if (lt_in || lt_w) {
        size_t nd = (size_t)N * OC, nw = (size_t)OC * C, nx = (size_t)N * C;
        uint8_t *s = (uint8_t *)cuda_gemm_scratch(ctx, 2 * slot(nd) + slot(nw) + slot(nx));
        int done_in = 0, done_w = 0;
        if (lt_in) {  // dinp^T(C,N) += w^T·dy^T: A = w^T (OC x C column-major), B = dy (OC x N)
            const void *dq = encode(ctx, s, dout, N, OC, sdy, DT_E5M2, 0);
            const void *wt = encode(ctx, s + slot(nd), w, OC, C, sw, DT_E4M3, 1);
            done_in = lt_gemm(ctx, C, N, OC, wt, DT_E4M3, dq, DT_E5M2, (float)a_in, 1.0f, dinp);
        }
        if (lt_w) {  // dw^T(C,OC) += x^T·dy: A = x^T (N x C column-major), B = dy^T (N x OC)
            const void *dt = encode(ctx, s + slot(nd) + slot(nw), dout, N, OC, sdy, DT_E5M2, 1);
            const void *xt = encode(ctx, s + 2 * slot(nd) + slot(nw), inp, N, C, sx, DT_E4M3, 1);
            done_w = lt_gemm(ctx, C, OC, N, xt, DT_E4M3, dt, DT_E5M2, (float)a_w, 1.0f, dw);
        }
        // What cuBLASLt did not take (not asked, or no algorithm), the fp32 GEMM does;
        // the bias gradient is a column sum either way.
        cuda_matmul_backward(ctx, done_in ? NULL : dinp, done_w ? NULL : dw, dbias, dout, inp, w,
                             N, C, OC);
        return;
    }
    cuda_matmul_backward(ctx, dinp, dw, dbias, dout, inp, w, N, C, OC);
}
