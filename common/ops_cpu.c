// ops_cpu.c — the CPU backend: every GPT op, forward and backward, in plain C.
//
// Matrix multiplies go to OpenBLAS (cblas_sgemm); everything else is a simple
// loop written so that gcc -O3 vectorizes it (no libm calls in hot loops: see
// fastmath.h). The shape letters and the += convention are described in ops.h.
//
// Reductions (sums over a row) carry `#pragma omp simd reduction`: it lets the
// compiler keep several partial sums in vector lanes (-fopenmp-simd, no threads).
// The order is fixed at compile time, so results stay bitwise reproducible.
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fastmath.h"
#include "ops.h"
#include "ops_cpu_internal.h"

// ---------------------------------------------------------------- memory

static void *cpu_alloc(Ctx *ctx, size_t bytes) {
    (void)ctx;
    // 64-byte alignment: one cache line, one AVX-512 vector.
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (p) memset(p, 0, rounded);
    return p;
}
static void cpu_free(Ctx *ctx, void *p) { (void)ctx; free(p); }
static void *cpu_host_alloc(Ctx *ctx, size_t bytes) { (void)ctx; return malloc(bytes ? bytes : 1); }
static void cpu_memset0(Ctx *ctx, void *p, size_t bytes) { (void)ctx; memset(p, 0, bytes); }
static void cpu_memcpy(Ctx *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (bytes) memmove(dst, src, bytes);
}
static void cpu_synchronize(Ctx *ctx) { (void)ctx; }

static void cpu_init(Ctx *ctx) {
    // BLAS gets all of this rank's threads. With N ranks on one machine each
    // rank asks for 1, so ranks do not fight over cores.
    openblas_set_num_threads(ctx->threads);
}

// ---------------------------------------------------------------- matmul

static void matmul_forward(Ctx *ctx, float *out, const float *inp, const float *w,
                           const float *bias, int N, int C, int OC) {
    (void)ctx;
    // Start from the bias broadcast over rows and let sgemm add inp @ w^T (beta = 1):
    // one pass over `out` instead of a second one for the bias.
    if (bias) {
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, sizeof(float) * OC);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, w, C,
                bias ? 1.0f : 0.0f, out, OC);
}

static void matmul_backward(Ctx *ctx, float *dinp, float *dw, float *dbias,
                            const float *dout, const float *inp, const float *w,
                            int N, int C, int OC) {
    (void)ctx;
    if (dinp)  // dinp(N,C) += dout(N,OC) @ w(OC,C)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, w, C,
                    1.0f, dinp, C);
    if (dw)  // dw(OC,C) += dout^T(OC,N) @ inp(N,C)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C,
                    1.0f, dw, C);
    if (dbias) {  // column sums, rows in order: deterministic
        for (int n = 0; n < N; n++) {
            const float *row = dout + (size_t)n * OC;
            for (int o = 0; o < OC; o++) dbias[o] += row[o];
        }
    }
}

// The fp8 recipe's GEMMs: the operands hold fp8 values scaled back already
// (quantize_fp8: fp8(x·s)/s), so the fp32 GEMM computes what an fp8 tensor core
// does, to within fp32's rounding of those operands and the order of the sums; the
// scales are the CUDA backend's business (ops.h).
static void matmul_fp8_forward(Ctx *ctx, float *out, const float *inp, float sx, const float *w,
                               float sw, const float *bias, int N, int C, int OC) {
    (void)sx, (void)sw;
    matmul_forward(ctx, out, inp, w, bias, N, C, OC);
}
static void matmul_fp8_backward(Ctx *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                                float sdy, const float *inp, float sx, const float *w, float sw,
                                int N, int C, int OC) {
    (void)sdy, (void)sx, (void)sw;
    matmul_backward(ctx, dinp, dw, dbias, dout, inp, w, N, C, OC);
}

// ---------------------------------------------------------------- embedding

static void embedding_forward(Ctx *ctx, float *out, const int *tokens, const float *wte,
                              const float *wpe, int B, int T, int C) {
    (void)ctx;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *te = wte + (size_t)tokens[b * T + t] * C;
            const float *pe = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
        }
}

// tokens are host memory here already: host_tokens (the same ids) is not needed.
static void embedding_backward(Ctx *ctx, float *dwte, float *dwpe, const float *dout,
                               const int *tokens, const int *host_tokens, int B, int T, int C) {
    (void)ctx, (void)host_tokens;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            float *te = dwte + (size_t)tokens[b * T + t] * C;
            float *pe = dwpe + (size_t)t * C;
            for (int c = 0; c < C; c++) { te[c] += d[c]; pe[c] += d[c]; }
        }
}

// ---------------------------------------------------------------- layernorm

static void layernorm_forward(Ctx *ctx, float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C) {
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        // Two passes (mean, then variance about the mean): no cancellation.
        float m = 0.0f;
#pragma omp simd reduction(+ : m)
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        float v = 0.0f;
#pragma omp simd reduction(+ : v)
        for (int c = 0; c < C; c++) { float d = x[c] - m; v += d * d; }
        v /= C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * w[c] + b[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

static void layernorm_backward(Ctx *ctx, float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, const float *mean,
                               const float *rstd, int N, int C) {
    (void)ctx;
    // With xhat = (x - mean) * rstd and y = xhat * w + b:
    //   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dxhat = dy * w.
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = dinp ? dinp + (size_t)n * C : NULL;
        float m = mean[n], s = rstd[n];
        float sum_d = 0.0f, sum_dx = 0.0f;
#pragma omp simd reduction(+ : sum_d, sum_dx)
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s, d = dy[c] * w[c];
            sum_d += d;
            sum_dx += d * xhat;
        }
        sum_d /= C;
        sum_dx /= C;
        // The three are independent sums: any of them may be left out (NULL), and
        // each comes out the same bits computed alone or together.
        if (dw)
            for (int c = 0; c < C; c++) dw[c] += dy[c] * ((x[c] - m) * s);
        if (db)
            for (int c = 0; c < C; c++) db[c] += dy[c];
        if (dinp)
            for (int c = 0; c < C; c++) {
                float xhat = (x[c] - m) * s, d = dy[c] * w[c];
                dx[c] += s * (d - sum_d - xhat * sum_dx);
            }
    }
}

// ---------------------------------------------------------------- attention

// Row t of a causal softmax: p[0..t] = softmax(s[0..t]), p[t+1..T) = 0.
static void causal_softmax_row(float *p, const float *s, int t, int T) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j <= t; j++) mx = s[j] > mx ? s[j] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j <= t; j++) { p[j] = fast_expf(s[j] - mx); sum += p[j]; }
    float inv = 1.0f / sum;
    for (int j = 0; j <= t; j++) p[j] *= inv;
    for (int j = t + 1; j < T; j++) p[j] = 0.0f;
}

static void attention_forward(Ctx *ctx, float *out, float *att, const float *qkv, int B, int T,
                              int C, int NH, DType rt) {
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + h * hs;  // (T,hs), row stride 3C
            const float *k = q + C, *v = q + 2 * C;
            float *a = att + ((size_t)b * NH + h) * T * T;       // (T,T)
            // scores = q k^T / sqrt(hs). The full square is computed and the upper
            // triangle discarded: one large GEMM beats T small ones.
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3,
                        0.0f, a, T);
            for (int t = 0; t < T; t++) causal_softmax_row(a + (size_t)t * T, a + (size_t)t * T, t, T);
            // A low-precision recipe's probabilities are its type before they are used
            // (ops.h: rt), as a bf16 softmax writes them.
            if (rt != DT_F32) cpu_round_to(ctx, a, (size_t)T * T, rt);
            // out_h = att @ v, written into columns h*hs.. of out (row stride C).
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, v, C3,
                        0.0f, out + (size_t)b * T * C + h * hs, C);
        }
}

static void attention_backward(Ctx *ctx, float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att, int B, int T, int C, int NH,
                               DType rt) {
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t off = (size_t)b * T * C3 + h * hs;
            const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
            const float *a = att + ((size_t)b * NH + h) * T * T;
            const float *dy = dout + (size_t)b * T * C + h * hs;
            float *ds = scratch + ((size_t)b * NH + h) * T * T;
            // dv += att^T dy
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, dy, C,
                        1.0f, dv, C3);
            // datt = dy v^T
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, C3,
                        0.0f, ds, T);
            // softmax backward, row by row: ds = att * (datt - sum_j att_j datt_j)
            for (int t = 0; t < T; t++) {
                const float *p = a + (size_t)t * T;
                float *d = ds + (size_t)t * T;
                float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                for (int j = 0; j <= t; j++) dot += p[j] * d[j];
                for (int j = 0; j <= t; j++) d[j] = p[j] * (d[j] - dot);
                for (int j = t + 1; j < T; j++) d[j] = 0.0f;
            }
            if (rt != DT_F32) cpu_round_to(ctx, ds, (size_t)T * T, rt);
            // dq += ds k / sqrt(hs);  dk += ds^T q / sqrt(hs)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, ds, T, k, C3,
                        1.0f, dq, C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, ds, T, q, C3,
                        1.0f, dk, C3);
        }
}

// ---------------------------------------------------------------- GELU

#define GELU_K 0.7978845608028654f  // sqrt(2/pi)

static void gelu_forward(Ctx *ctx, float *out, const float *inp, size_t n) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + fast_tanhf(GELU_K * (x + 0.044715f * x * x * x)));
    }
}

static void gelu_backward(Ctx *ctx, float *dinp, const float *inp, const float *dout, size_t n) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_K * (x + 0.044715f * x * x * x);
        float th = fast_tanhf(u);
        float sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += g * dout[i];
    }
}

// ---------------------------------------------------------------- elementwise

static void residual_forward(Ctx *ctx, float *out, const float *a, const float *b, size_t n) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}
static void accumulate(Ctx *ctx, float *y, const float *x, float alpha, size_t n) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) y[i] += alpha * x[i];
}
static void scale(Ctx *ctx, float *x, float s, size_t n) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

// ---------------------------------------------------------------- cross-entropy

// max and log(sum(exp(x - max))) of one row.
static void row_logsumexp(const float *x, int V, float *mx_out, float *lse_out) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int v = 0; v < V; v++) mx = x[v] > mx ? x[v] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; v++) sum += fast_expf(x[v] - mx);
    *mx_out = mx;
    *lse_out = logf(sum);
}

static void crossentropy_forward(Ctx *ctx, float *losses, const float *logits, const int *targets,
                                 int N, int V) {
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * V;
        float mx, lse;
        row_logsumexp(x, V, &mx, &lse);
        losses[n] = lse + mx - x[targets[n]];
    }
}

static void crossentropy_backward(Ctx *ctx, float *dlogits, const float *logits,
                                  const int *targets, float dloss, int N, int V) {
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * V;
        float *d = dlogits + (size_t)n * V;  // may alias x: each x[v] is read before d[v] is written
        float mx, lse;
        row_logsumexp(x, V, &mx, &lse);
        float shift = mx + lse;
        for (int v = 0; v < V; v++) d[v] = fast_expf(x[v] - shift) * dloss;
        d[targets[n]] -= dloss;
    }
}

// ---------------------------------------------------------------- the vocabulary split

static void embedding_lookup_forward(Ctx *ctx, float *out, const int *tokens, const float *wte,
                                     int vocab_lo, int Vl, int N, int C) {
    (void)ctx;
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * C;
        int id = tokens[n] - vocab_lo;
        if (id >= 0 && id < Vl) memcpy(o, wte + (size_t)id * C, (size_t)C * sizeof(float));
        else memset(o, 0, (size_t)C * sizeof(float));
    }
}

static void embedding_lookup_backward(Ctx *ctx, float *dwte, const float *dout, const int *tokens,
                                      const int *host_tokens, int vocab_lo, int Vl, int N, int C) {
    (void)ctx, (void)host_tokens;
    for (int n = 0; n < N; n++) {
        int id = tokens[n] - vocab_lo;
        if (id < 0 || id >= Vl) continue;
        const float *d = dout + (size_t)n * C;
        float *te = dwte + (size_t)id * C;
        for (int c = 0; c < C; c++) te[c] += d[c];
    }
}

static void position_forward(Ctx *ctx, float *out, const float *wpe, int row0, int N, int T,
                             int C) {
    (void)ctx;
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * C;
        const float *pe = wpe + (size_t)((row0 + n) % T) * C;
        for (int c = 0; c < C; c++) o[c] += pe[c];
    }
}

static void position_backward(Ctx *ctx, float *dwpe, const float *dout, int row0, int N, int T,
                              int C) {
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C;
        float *pe = dwpe + (size_t)((row0 + n) % T) * C;
        for (int c = 0; c < C; c++) pe[c] += d[c];
    }
}

static void logits_max(Ctx *ctx, float *rowmax, const float *logits, int N, int Vl, int valid) {
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * Vl;
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int v = 0; v < valid; v++) mx = x[v] > mx ? x[v] : mx;
        rowmax[n] = mx;
    }
}

static void logits_sumexp(Ctx *ctx, float *sumexp, float *tlogit, const float *logits,
                          const float *m, const int *targets, int vocab_lo, int N, int Vl,
                          int valid) {
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * Vl;
        float sum = 0.0f, mx = m[n];
#pragma omp simd reduction(+ : sum)
        for (int v = 0; v < valid; v++) sum += fast_expf(x[v] - mx);
        sumexp[n] = sum;
        int id = targets[n] - vocab_lo;
        tlogit[n] = id >= 0 && id < valid ? x[id] : 0.0f;
    }
}

static void crossentropy_loss(Ctx *ctx, float *losses, const float *m, const float *sumexp,
                              const float *tlogit, int N) {
    (void)ctx;
    for (int n = 0; n < N; n++) losses[n] = logf(sumexp[n]) + m[n] - tlogit[n];
}

static void crossentropy_backward_split(Ctx *ctx, float *dlogits, const float *logits,
                                        const float *m, const float *sumexp, const int *targets,
                                        int vocab_lo, float dloss, int N, int Vl, int valid) {
    (void)ctx;
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * Vl;
        float *d = dlogits + (size_t)n * Vl;  // may alias x, as in crossentropy_backward
        float shift = m[n] + logf(sumexp[n]);
        for (int v = 0; v < valid; v++) d[v] = fast_expf(x[v] - shift) * dloss;
        for (int v = valid; v < Vl; v++) d[v] = 0.0f;
        int id = targets[n] - vocab_lo;
        if (id >= 0 && id < valid) d[id] -= dloss;
    }
}

// ---------------------------------------------------------------- optimizer

static void adamw_update(Ctx *ctx, float *p, const float *g, float *m, float *v, size_t n,
                         float lr, float beta1, float beta2, float eps, float weight_decay,
                         float grad_scale, int t) {
    (void)ctx;
    // The same operations, in the same order, as torch.optim.AdamW (1.13, single tensor).
    double bc1 = 1.0 - pow((double)beta1, t), bc2 = 1.0 - pow((double)beta2, t);
    float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    float decay = 1.0f - lr * weight_decay;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        p[i] *= decay;
        m[i] = m[i] * beta1 + gi * (1.0f - beta1);
        v[i] = v[i] * beta2 + gi * gi * (1.0f - beta2);
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] -= step_size * (m[i] / denom);
    }
}

static double sum_squares(Ctx *ctx, const float *x, size_t n) {
    (void)ctx;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

const Ops ops_cpu = {
    .name = "cpu",
    .init = cpu_init,
    .destroy = NULL,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset0 = cpu_memset0,
    .to_device = cpu_memcpy,
    .to_host = cpu_memcpy,
    .copy = cpu_memcpy,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_free,
    .synchronize = cpu_synchronize,
    .matmul_forward = matmul_forward,
    .matmul_backward = matmul_backward,
    .matmul_fp8_forward = matmul_fp8_forward,
    .matmul_fp8_backward = matmul_fp8_backward,
    .embedding_forward = embedding_forward,
    .embedding_backward = embedding_backward,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .flash_attention_forward = cpu_flash_attention_forward,
    .flash_attention_backward = cpu_flash_attention_backward,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .residual_forward = residual_forward,
    .accumulate = accumulate,
    .crossentropy_forward = crossentropy_forward,
    .crossentropy_backward = crossentropy_backward,
    .embedding_lookup_forward = embedding_lookup_forward,
    .embedding_lookup_backward = embedding_lookup_backward,
    .position_forward = position_forward,
    .position_backward = position_backward,
    .logits_max = logits_max,
    .logits_sumexp = logits_sumexp,
    .crossentropy_loss = crossentropy_loss,
    .crossentropy_backward_split = crossentropy_backward_split,
    .round_to = cpu_round_to,
    .round_stochastic_bf16 = cpu_round_stochastic_bf16,
    .quantize_fp8 = cpu_quantize_fp8,
    .pack_half = cpu_pack_half,
    .unpack_half = cpu_unpack_half,
    .adamw_update = adamw_update,
    .sum_squares = sum_squares,
    .scale = scale,
};
