// ops_cuda.cu — the CUDA backend: every GPT op of ops.h on one GPU, in fp32.
//
// Matrix multiplies go to cuBLAS in plain fp32 (no TF32), so results agree with
// the CPU backend (ops_cpu.c, the reference for every op here) to fp32 rounding;
// the linear layers' GEMMs read bf16 on the tensor cores when ctx->gemm_dtype
// says their inputs are bf16 values (ops_cuda_layers.cu), which loses nothing.
// Everything else is a small kernel in the style of llm.c (the layers are in
// ops_cuda_layers.cu and ops_cuda_attention.cu; this file has set-up, memory, the
// elementwise ops, AdamW and the ops table). Two rules shape them:
//
//  * Determinism. No float atomics: every sum is taken in an order fixed by the
//    shapes alone, so two runs give bitwise identical results (stage 07 relies
//    on it). Sums over many rows take two passes: per-block partial sums into a
//    workspace, then one fixed-order sum of the partials.
//  * One stream. All work is queued on the backend's stream, so ops run in the
//    order the model calls them and a workspace can be reused by the next op.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_probe.h"
#include "ops_cuda_internal.cuh"

// ---------------------------------------------------------------- workspace

// Device workspace of at least `bytes` in *buf (holding *have bytes), grown
// (never shrunk) on demand and charged to the ledger as workspace.
static void *grow_workspace(Ctx *ctx, void **buf, size_t *have, size_t bytes) {
    CudaBackend *be = backend(ctx);
    if (bytes <= *have) return *buf;
    CUDA_CHECK(cudaStreamSynchronize(be->stream));  // queued kernels may still use the old one
    if (*buf) {
        CUDA_CHECK(cudaFree(*buf));
        ledger_release(&ctx->ledger, MEM_WORKSPACE, *have);
        *buf = NULL, *have = 0;
    }
    size_t grown = bytes + bytes / 2;  // headroom: not one reallocation per call
    ledger_charge(&ctx->ledger, MEM_WORKSPACE, grown);
    CUDA_CHECK(cudaMalloc(buf, grown));
    *have = grown;
    return *buf;
}

void *cuda_scratch(Ctx *ctx, size_t bytes) {
    CudaBackend *be = backend(ctx);
    return grow_workspace(ctx, &be->scratch, &be->scratch_bytes, bytes);
}
void *cuda_gemm_scratch(Ctx *ctx, size_t bytes) {
    CudaBackend *be = backend(ctx);
    return grow_workspace(ctx, &be->gemm_scratch, &be->gemm_scratch_bytes, bytes);
}
void *cuda_lt_workspace(Ctx *ctx, size_t bytes, size_t *have) {
    CudaBackend *be = backend(ctx);
    void *p = grow_workspace(ctx, &be->lt_workspace, &be->lt_workspace_bytes, bytes);
    *have = be->lt_workspace_bytes;
    return p;
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
    double *partial = (double *)cuda_scratch(ctx, (SSQ_BLOCKS + 1) * sizeof(double)), host = 0.0;
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

// Makes GPU `dev` this thread's device and creates its context now (cudaFree(0)
// forces it where cudaSetDevice is lazy), so that a GPU which refuses this
// process fails here, with the reason: in exclusive-process mode a second
// process (another rank sharing the GPU) gets cudaErrorDevicesUnavailable.
static void claim_device(int dev) {
    const char *call = "cudaSetDevice";
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess) call = "cudaFree(0)", e = cudaFree(0);
    if (e == cudaSuccess) return;
    if (e == cudaErrorDevicesUnavailable) {
        int mode = -1;
        if (cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, dev) != cudaSuccess) mode = -1;
        DIE("CUDA error %s: GPU %d refuses this process: its compute mode is %s%s; give every "
            "rank its own GPU, or have an administrator set the default mode (nvidia-smi -c "
            "DEFAULT); this program never changes a GPU's settings", cudaGetErrorName(e), dev,
            cuda_compute_mode_name(mode),
            mode == cudaComputeModeExclusiveProcess
                ? " and another process (another rank?) already holds it"
                : "");
    }
    DIE("CUDA error %s: %s (in %s, creating the context on GPU %d)", cudaGetErrorName(e),
        cudaGetErrorString(e), call, dev);
}

static void cuda_init(Ctx *ctx) {
    CudaBackend *be = (CudaBackend *)calloc(1, sizeof *be);
    CHECK(be, "out of host memory");
    claim_device(ctx->cuda_device);
    CUDA_CHECK(cudaStreamCreate(&be->stream));
    CUBLAS_CHECK(cublasCreate(&be->cublas));
    CUBLAS_CHECK(cublasSetStream(be->cublas, be->stream));
    // Plain fp32: TF32 would round GEMM inputs to 10 mantissa bits, and the CPU
    // comparison would need 1e-3 instead of 1e-5. No atomics: reproducible sums.
    CUBLAS_CHECK(cublasSetMathMode(be->cublas, CUBLAS_DEFAULT_MATH));
    CUBLAS_CHECK(cublasSetAtomicsMode(be->cublas, CUBLAS_ATOMICS_NOT_ALLOWED));
    CUBLAS_CHECK(cublasLtCreate(&be->lt));
    // The fp8 recipe's GEMMs: on the fp8 tensor cores through cuBLASLt (ops_cuda_fp8.cu;
    // checked against the fp32 GEMM on an H200, results/gpu/2026-11-26-h200), or with
    // COURSE_FP8_GEMM=fp32 the fp32 GEMM on the same fp8 values, as the CPU runs them.
    const char *f = getenv("COURSE_FP8_GEMM");
    CHECK(!f || strcmp(f, "fp32") == 0 || strcmp(f, "cublaslt") == 0,
          "COURSE_FP8_GEMM=%s: the fp8 recipe's GEMMs are cublaslt (the default) or fp32", f);
    be->fp8_lt = !f || strcmp(f, "cublaslt") == 0;
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
    if (be->gemm_scratch) {
        CUDA_CHECK(cudaFree(be->gemm_scratch));
        ledger_release(&ctx->ledger, MEM_WORKSPACE, be->gemm_scratch_bytes);
    }
    if (be->lt_workspace) {
        CUDA_CHECK(cudaFree(be->lt_workspace));
        ledger_release(&ctx->ledger, MEM_WORKSPACE, be->lt_workspace_bytes);
    }
    CUBLAS_CHECK(cublasLtDestroy(be->lt));
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
// Pinned: a device-to-host copy into it runs at the link's speed (a pageable
// destination goes through a staging buffer, at about half of it). Too much
// pinned memory starves the OS, so the caller falls back to malloc on NULL.
static void *cuda_host_alloc(Ctx *ctx, size_t bytes) {
    (void)ctx;
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError();  // not sticky: clear it
        return NULL;
    }
    return p;
}
static void cuda_host_free(Ctx *ctx, void *p) {
    (void)ctx;
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

// ---------------------------------------------------------------- the table

static const Ops ops_cuda = {
    .name = "cuda",
    .init = cuda_init, .destroy = cuda_destroy,
    .alloc = cuda_alloc, .free = cuda_free, .memset0 = cuda_memset0,
    .to_device = cuda_to_device, .to_host = cuda_to_host, .copy = cuda_copy,
    .host_alloc = cuda_host_alloc, .host_free = cuda_host_free,
    .synchronize = cuda_synchronize,
    .matmul_forward = cuda_matmul_forward, .matmul_backward = cuda_matmul_backward,
    .embedding_forward = cuda_embedding_forward, .embedding_backward = cuda_embedding_backward,
    .layernorm_forward = cuda_layernorm_forward, .layernorm_backward = cuda_layernorm_backward,
    .attention_forward = cuda_attention_forward, .attention_backward = cuda_attention_backward,
    .flash_attention_forward = cuda_flash_attention_forward,
    .flash_attention_backward = cuda_flash_attention_backward,
    .gelu_forward = cuda_gelu_forward, .gelu_backward = cuda_gelu_backward,
    .residual_forward = cuda_residual_forward, .accumulate = cuda_accumulate,
    .crossentropy_forward = cuda_crossentropy_forward,
    .crossentropy_backward = cuda_crossentropy_backward,
    .embedding_lookup_forward = cuda_embedding_lookup_forward,
    .embedding_lookup_backward = cuda_embedding_lookup_backward,
    .position_forward = cuda_position_forward, .position_backward = cuda_position_backward,
    .logits_max = cuda_logits_max, .logits_sumexp = cuda_logits_sumexp,
    .crossentropy_loss = cuda_crossentropy_loss,
    .crossentropy_backward_split = cuda_crossentropy_backward_split,
    .round_to = cuda_round_to, .round_stochastic_bf16 = cuda_round_stochastic_bf16,
    .quantize_fp8 = cuda_quantize_fp8,
    .matmul_fp8_forward = cuda_matmul_fp8_forward, .matmul_fp8_backward = cuda_matmul_fp8_backward,
    .pack_half = cuda_pack_half, .unpack_half = cuda_unpack_half,
    .adamw_update = cuda_adamw_update, .sum_squares = cuda_sum_squares, .scale = cuda_scale,
};

extern "C" const Ops *ops_cuda_table(void) { return &ops_cuda; }
