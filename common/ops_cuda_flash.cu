// ops_cuda_flash.cu — the CUDA backend's attention without the T x T matrix (ops.h's
// flash_attention_forward / backward), the same tiles and order as the CPU's
// (ops_cpu_flash.c, flash_tiles.h).
//
// This first version is written for correctness, to be measured and then made fast:
// one thread per query row (forward, dQ) or key row (dK, dV), the tile of the other
// side in shared memory, fp32 FMAs on the CUDA cores. What it already removes is the
// (T,T) matrix: no att or datt in memory, no softmax kernels, no copies of them. The
// tensor-core version (mma.sync on bf16 tiles) replaces the inner loops next, tested
// against the same CPU twin.
//
// Deterministic without atomics: the backward is two kernels, (dK, dV) with a thread
// per key walking the query tiles in ascending order, and dQ with a thread per query
// walking the key tiles in ascending order: the orders of the CPU's loops.
#include <math.h>

#include "cuda_round.cuh"
#include "flash_tiles.h"
#include "ops_cuda_internal.cuh"

#define FLASH_MAX_HS 128  // the head sizes a thread's registers hold (GPT-2: 64)

// A head's q, k, v (row stride 3C) and the (b, h) the block works on.
struct FlashHead {
    const float *q, *k, *v;
    int T, hs, ld;
    float scale;
};
static __device__ FlashHead flash_head(const float *qkv, int T, int C, int NH) {
    int b = blockIdx.z, h = blockIdx.y, hs = C / NH;
    const float *q = qkv + (size_t)b * T * 3 * C + (size_t)h * hs;
    return FlashHead{q, q + C, q + 2 * C, T, hs, 3 * C, rsqrtf((float)hs)};
}

// Rows [r0, r0 + rows) of a (T, hs) slice with row stride ld into shared (rows, hs).
static __device__ void load_rows(float *dst, const float *src, int r0, int rows, int hs, int ld) {
    for (int e = threadIdx.x; e < rows * hs; e += blockDim.x)
        dst[e] = src[(size_t)(r0 + e / hs) * ld + e % hs];
}

// The two tiles of a step (K and V, or Q and dout), rows [r0, r0 + rows), into shared
// memory, once every thread is done with the step before. Every thread calls it.
static __device__ void load_step(float *a, const float *src_a, int ld_a, float *b,
                                 const float *src_b, int ld_b, int r0, int rows, int hs) {
    __syncthreads();
    load_rows(a, src_a, r0, rows, hs, ld_a);
    load_rows(b, src_b, r0, rows, hs, ld_b);
    __syncthreads();
}

// ---------------------------------------------------------------- forward

// Grid (query tiles, NH, B), FLASH_BR threads: thread r owns query row i0 + r.
// Shared: the key tile's K and V, FLASH_BC x hs each.
static __global__ void flash_forward_kernel(float *out, float *lse, const float *qkv, int T, int C,
                                            int NH, DType rt) {
    extern __shared__ float smem[];
    FlashHead x = flash_head(qkv, T, C, NH);
    int hs = x.hs, i0 = blockIdx.x * FLASH_BR, i = i0 + threadIdx.x;
    int valid = i < T;
    float *Ks = smem, *Vs = smem + FLASH_BC * hs;
    float q[FLASH_MAX_HS], o[FLASH_MAX_HS], s[FLASH_BC];
    for (int d = 0; d < hs; d++) q[d] = valid ? x.q[(size_t)i * x.ld + d] : 0.0f, o[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int j0 = 0; j0 < flash_key_end(i0, T); j0 += FLASH_BC) {
        int cols = flash_tile_cols(j0, T);
        load_step(Ks, x.k, x.ld, Vs, x.v, x.ld, j0, cols, hs);
        if (!valid) continue;
        int seen = flash_keys_seen(i, j0, cols);
        float mx = m;
        for (int c = 0; c < seen; c++) {
            float dot = 0.0f;
            for (int d = 0; d < hs; d++) dot += q[d] * Ks[c * hs + d];
            s[c] = dot * x.scale;
            mx = fmaxf(mx, s[c]);
        }
        float alpha = m == -INFINITY ? 0.0f : expf(m - mx), sum = 0.0f;
        for (int d = 0; d < hs; d++) o[d] *= alpha;
        for (int c = 0; c < seen; c++) {
            float p = through(expf(s[c] - mx), rt);
            sum += p;
            for (int d = 0; d < hs; d++) o[d] += p * Vs[c * hs + d];
        }
        l = l * alpha + sum;
        m = mx;
    }
    if (!valid) return;
    float *y = out + ((size_t)blockIdx.z * T + i) * C + (size_t)blockIdx.y * hs;
    for (int d = 0; d < hs; d++) y[d] = o[d] / l;
    lse[((size_t)blockIdx.z * NH + blockIdx.y) * T + i] = m + logf(l);
}

static void flash_check(int C, int NH, const char *op) {
    CHECK(C % NH == 0 && C / NH <= FLASH_MAX_HS, "%s: head size %d exceeds the %d this kernel "
          "holds in registers", op, C / NH, FLASH_MAX_HS);
}

// Shared memory for two tiles of hs floats a row; above the default 48 KB, asked for.
template <typename K> static size_t flash_smem(K kernel, int hs) {
    size_t bytes = 2 * (size_t)FLASH_BC * hs * sizeof(float);
    if (bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes));
    return bytes;
}

void cuda_flash_attention_forward(Ctx *ctx, float *out, float *lse, const float *qkv, int B, int T,
                                  int C, int NH, DType rt) {
    flash_check(C, NH, "flash_attention_forward");
    dim3 grid((T + FLASH_BR - 1) / FLASH_BR, NH, B);
    size_t smem = flash_smem(flash_forward_kernel, C / NH);
    flash_forward_kernel<<<grid, FLASH_BR, smem, stream(ctx)>>>(out, lse, qkv, T, C, NH, rt);
    CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------- backward

// D = rowsum(dout * out), one thread per (b, h, row): (B*NH*T) values.
static __global__ void flash_rowdot_kernel(float *D, const float *dout, const float *out, int B,
                                           int T, int C, int NH) {
    int hs = C / NH;
    GRID_STRIDE(e, (size_t)B * NH * T) {
        size_t t = e % T, bh = e / T, b = bh / NH, h = bh % NH;
        const float *dy = dout + (b * T + t) * C + h * hs, *y = out + (b * T + t) * C + h * hs;
        float s = 0.0f;
        for (int d = 0; d < hs; d++) s += dy[d] * y[d];
        D[e] = s;
    }
}

// The probability and its gradient for query i and key j: p = rt(exp(s - lse_i)),
// ds = rt(p (dp - D_i)), s = scale q_i.k_j, dp = dout_i.v_j.
struct FlashGrad { float p, ds; };
static __device__ FlashGrad flash_grad(const float *q, const float *k, const float *dy,
                                       const float *v, int hs, float scale, float L, float Di,
                                       DType rt) {
    float s = 0.0f, dp = 0.0f;
    for (int d = 0; d < hs; d++) s += q[d] * k[d], dp += dy[d] * v[d];
    float p = through(expf(s * scale - L), rt);
    return FlashGrad{p, through(p * (dp - Di), rt)};
}

// Grid (key tiles, NH, B), FLASH_BC threads: thread c owns key row j0 + c and its dK,
// dV; the query tiles from the one holding j0 on, in ascending order. Shared: the
// query tile's Q and dout.
static __global__ void flash_dkdv_kernel(float *dqkv, const float *dout, const float *qkv,
                                         const float *lse, const float *D, int T, int C, int NH,
                                         DType rt) {
    extern __shared__ float smem[];
    FlashHead x = flash_head(qkv, T, C, NH);
    int hs = x.hs, j0 = blockIdx.x * FLASH_BC, j = j0 + threadIdx.x, valid = j < T;
    size_t bh = (size_t)blockIdx.z * NH + blockIdx.y;
    const float *dy = dout + (size_t)blockIdx.z * T * C + (size_t)blockIdx.y * hs;
    float *Qs = smem, *Ys = smem + FLASH_BR * hs;
    float k[FLASH_MAX_HS], v[FLASH_MAX_HS], dk[FLASH_MAX_HS], dv[FLASH_MAX_HS];
    for (int d = 0; d < hs; d++) {
        k[d] = valid ? x.k[(size_t)j * x.ld + d] : 0.0f;
        v[d] = valid ? x.v[(size_t)j * x.ld + d] : 0.0f;
        dk[d] = dv[d] = 0.0f;
    }
    for (int i0 = flash_query_start(j0); i0 < T; i0 += FLASH_BR) {
        int rows = flash_tile_rows(i0, T);
        load_step(Qs, x.q, x.ld, Ys, dy, C, i0, rows, hs);
        if (!valid) continue;
        for (int r = j > i0 ? j - i0 : 0; r < rows; r++) {  // the queries i >= j
            int i = i0 + r;
            FlashGrad g = flash_grad(Qs + r * hs, k, Ys + r * hs, v, hs, x.scale, lse[bh * T + i],
                                     D[bh * T + i], rt);
            for (int d = 0; d < hs; d++) {
                dv[d] += g.p * Ys[r * hs + d];
                dk[d] += g.ds * x.scale * Qs[r * hs + d];
            }
        }
    }
    if (!valid) return;
    float *g = dqkv + ((size_t)blockIdx.z * T + j) * 3 * C + (size_t)blockIdx.y * hs;
    for (int d = 0; d < hs; d++) g[C + d] += dk[d], g[2 * C + d] += dv[d];
}

// Grid (query tiles, NH, B), FLASH_BR threads: thread r owns query row i0 + r and its
// dQ; the key tiles in ascending order. Shared: the key tile's K and V.
static __global__ void flash_dq_kernel(float *dqkv, const float *dout, const float *qkv,
                                       const float *lse, const float *D, int T, int C, int NH,
                                       DType rt) {
    extern __shared__ float smem[];
    FlashHead x = flash_head(qkv, T, C, NH);
    int hs = x.hs, i0 = blockIdx.x * FLASH_BR, i = i0 + threadIdx.x, valid = i < T;
    size_t bh = (size_t)blockIdx.z * NH + blockIdx.y;
    float *Ks = smem, *Vs = smem + FLASH_BC * hs;
    float q[FLASH_MAX_HS], dy[FLASH_MAX_HS], dq[FLASH_MAX_HS];
    const float *y = dout + ((size_t)blockIdx.z * T + (valid ? i : 0)) * C + (size_t)blockIdx.y * hs;
    for (int d = 0; d < hs; d++) {
        q[d] = valid ? x.q[(size_t)i * x.ld + d] : 0.0f;
        dy[d] = valid ? y[d] : 0.0f;
        dq[d] = 0.0f;
    }
    float L = valid ? lse[bh * T + i] : 0.0f, Di = valid ? D[bh * T + i] : 0.0f;
    for (int j0 = 0; j0 < flash_key_end(i0, T); j0 += FLASH_BC) {
        int cols = flash_tile_cols(j0, T);
        load_step(Ks, x.k, x.ld, Vs, x.v, x.ld, j0, cols, hs);
        if (!valid) continue;
        for (int c = 0; c < flash_keys_seen(i, j0, cols); c++) {
            FlashGrad g = flash_grad(q, Ks + c * hs, dy, Vs + c * hs, hs, x.scale, L, Di, rt);
            for (int d = 0; d < hs; d++) dq[d] += g.ds * x.scale * Ks[c * hs + d];
        }
    }
    if (!valid) return;
    float *g = dqkv + ((size_t)blockIdx.z * T + i) * 3 * C + (size_t)blockIdx.y * hs;
    for (int d = 0; d < hs; d++) g[d] += dq[d];
}

void cuda_flash_attention_backward(Ctx *ctx, float *dqkv, const float *dout, const float *qkv,
                                   const float *out, const float *lse, int B, int T, int C, int NH,
                                   DType rt) {
    flash_check(C, NH, "flash_attention_backward");
    size_t rows = (size_t)B * NH * T;
    float *D = (float *)cuda_scratch(ctx, rows * sizeof(float));
    flash_rowdot_kernel<<<elem_grid(rows), BLOCK, 0, stream(ctx)>>>(D, dout, out, B, T, C, NH);
    CUDA_CHECK_LAUNCH();
    int key_tiles = (T + FLASH_BC - 1) / FLASH_BC, query_tiles = (T + FLASH_BR - 1) / FLASH_BR;
    int hs = C / NH;
    size_t smem = flash_smem(flash_dkdv_kernel, hs);
    flash_dkdv_kernel<<<dim3(key_tiles, NH, B), FLASH_BC, smem, stream(ctx)>>>(dqkv, dout, qkv, lse,
                                                                              D, T, C, NH, rt);
    CUDA_CHECK_LAUNCH();
    smem = flash_smem(flash_dq_kernel, hs);
    flash_dq_kernel<<<dim3(query_tiles, NH, B), FLASH_BR, smem, stream(ctx)>>>(dqkv, dout, qkv, lse,
                                                                              D, T, C, NH, rt);
    CUDA_CHECK_LAUNCH();
}
