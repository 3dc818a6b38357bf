// ops_cpu_flash.c — causal attention without the T x T matrix (FlashAttention-2's
// algorithm, Dao 2023), the CPU's version of ops.h's flash_attention_* pair.
//
// attention_forward (ops_cpu.c) writes every probability of the (T,T) square and
// keeps it for the backward: B*NH*T*T floats a layer, the activation that grows
// with T^2. Here the keys come in tiles of FLASH_BC. Each query row keeps a running
// maximum m and a running sum l of its exponentials; when a tile raises the maximum,
// what was summed so far is rescaled by exp(m_old - m_new) ("online softmax",
// Milakov and Gimelshein 2018). At the end out = O / l, and the row's log-sum-exp,
// lse = m + log l, is all that is kept: T floats a head instead of T*T.
//
// The backward recomputes each tile's probabilities from lse, P = exp(S - lse), and
// needs one more number per row, D = sum_d dout*out (= sum_j P_j dP_j): then
// dS = P * (dP - D). Tiles of keys in the outer loop, queries inside: dK and dV of a
// key tile are complete when its loop ends, and dQ of a query row sums over the key
// tiles in ascending order. A GPU kernel that splits the work into (dK, dV) over
// query tiles and dQ over key tiles, without float atomics, sums in the same order
// of tiles, so that the two differ only inside a tile (flash_tiles.h).
//
// A low-precision recipe (rt, ops.h) rounds what the GEMMs read: the forward's
// unnormalised probabilities P~ = rt(exp(S - m_new)) before P~ V, the backward's P
// and dS before theirs; l sums the rounded P~, so that O / l is their weighted mean.
// The output is not rounded here: the caller rounds it, as after attention_forward.
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fastmath.h"
#include "flash_tiles.h"
#include "ops.h"
#include "ops_cpu_internal.h"

typedef struct {
    const float *q, *k, *v;  // this head's (T, hs) slices, row stride 3C
    int T, hs, ld;           // ld = 3C
    float scale;             // 1 / sqrt(hs)
} Head;

static Head head_of(const float *qkv, int b, int h, int T, int C, int NH) {
    int hs = C / NH;
    const float *q = qkv + (size_t)b * T * 3 * C + (size_t)h * hs;
    return (Head){q, q + C, q + 2 * C, T, hs, 3 * C, 1.0f / sqrtf((float)hs)};
}

// S (rows x cols, row stride FLASH_BC) = scale * Q[i0..] K[j0..]^T.
static void tile_scores(const Head *x, float *S, int i0, int rows, int j0, int cols) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, x->hs, x->scale,
                x->q + (size_t)i0 * x->ld, x->ld, x->k + (size_t)j0 * x->ld, x->ld, 0.0f, S,
                FLASH_BC);
}

// One query tile of the forward: O (rows x hs) and the rows' m and l over every key
// tile it sees, then out and lse.
static void forward_query_tile(Ctx *ctx, const Head *x, float *out, int ldo, float *lse, int i0,
                               float *S, float *O, float *m, float *l, DType rt) {
    int rows = flash_tile_rows(i0, x->T), hs = x->hs;
    memset(O, 0, sizeof(float) * (size_t)rows * hs);
    for (int r = 0; r < rows; r++) m[r] = -INFINITY, l[r] = 0.0f;
    for (int j0 = 0; j0 < flash_key_end(i0, x->T); j0 += FLASH_BC) {
        int cols = flash_tile_cols(j0, x->T);
        tile_scores(x, S, i0, rows, j0, cols);
        for (int r = 0; r < rows; r++) {
            float *s = S + (size_t)r * FLASH_BC;
            int seen = flash_keys_seen(i0 + r, j0, cols);  // keys j0..j0+seen-1 <= the query
            float mx = m[r];
            for (int c = 0; c < seen; c++) mx = s[c] > mx ? s[c] : mx;
            float alpha = m[r] == -INFINITY ? 0.0f : fast_expf(m[r] - mx);
            for (int c = 0; c < cols; c++) s[c] = c < seen ? fast_expf(s[c] - mx) : 0.0f;
            if (rt != DT_F32) cpu_round_to(ctx, s, (size_t)seen, rt);
            float sum = 0.0f;
            for (int c = 0; c < seen; c++) sum += s[c];
            l[r] = l[r] * alpha + sum;
            m[r] = mx;
            for (int d = 0; d < hs; d++) O[(size_t)r * hs + d] *= alpha;
        }
        // O += P~ V (the tile's keys)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, cols, 1.0f, S, FLASH_BC,
                    x->v + (size_t)j0 * x->ld, x->ld, 1.0f, O, hs);
    }
    for (int r = 0; r < rows; r++) {
        float inv = 1.0f / l[r];
        for (int d = 0; d < hs; d++) out[(size_t)(i0 + r) * ldo + d] = O[(size_t)r * hs + d] * inv;
        lse[i0 + r] = m[r] + logf(l[r]);
    }
}

void cpu_flash_attention_forward(Ctx *ctx, float *out, float *lse, const float *qkv, int B, int T,
                                 int C, int NH, DType rt) {
    int hs = C / NH;
    float *S = xmalloc(sizeof(float) * FLASH_BR * FLASH_BC);
    float *O = xmalloc(sizeof(float) * FLASH_BR * hs), *m = xmalloc(sizeof(float) * FLASH_BR);
    float *l = xmalloc(sizeof(float) * FLASH_BR);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            Head x = head_of(qkv, b, h, T, C, NH);
            float *o = out + (size_t)b * T * C + (size_t)h * hs, *L = lse + ((size_t)b * NH + h) * T;
            for (int i0 = 0; i0 < T; i0 += FLASH_BR)
                forward_query_tile(ctx, &x, o, C, L, i0, S, O, m, l, rt);
        }
    free(S); free(O); free(m); free(l);
}

// ---------------------------------------------------------------- backward

typedef struct {
    float *dq, *dk, *dv;       // this head's gradient slices, row stride 3C (+=)
    const float *dout, *out;   // (T, hs), row stride C
    const float *lse, *D;      // (T)
} HeadGrads;

// The (query tile i0, key tile j0) block of the backward.
static void backward_block(Ctx *ctx, const Head *x, const HeadGrads *g, int i0, int j0, float *P,
                           float *dP, DType rt) {
    int rows = flash_tile_rows(i0, x->T), cols = flash_tile_cols(j0, x->T), hs = x->hs;
    int C = x->ld / 3;
    tile_scores(x, P, i0, rows, j0, cols);
    // dP = dout_i V_j^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, hs, 1.0f,
                g->dout + (size_t)i0 * C, C, x->v + (size_t)j0 * x->ld, x->ld, 0.0f, dP, FLASH_BC);
    for (int r = 0; r < rows; r++) {
        float *p = P + (size_t)r * FLASH_BC, *dp = dP + (size_t)r * FLASH_BC;
        int seen = flash_keys_seen(i0 + r, j0, cols);
        float L = g->lse[i0 + r];
        for (int c = 0; c < cols; c++) p[c] = c < seen ? fast_expf(p[c] - L) : 0.0f;
        if (rt != DT_F32) cpu_round_to(ctx, p, (size_t)seen, rt);
        float Dr = g->D[i0 + r];
        for (int c = 0; c < cols; c++) dp[c] = c < seen ? p[c] * (dp[c] - Dr) : 0.0f;
        if (rt != DT_F32) cpu_round_to(ctx, dp, (size_t)seen, rt);
    }
    // dV_j += P^T dout_i;  dQ_i += scale dS K_j;  dK_j += scale dS^T Q_i
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, rows, 1.0f, P, FLASH_BC,
                g->dout + (size_t)i0 * C, C, 1.0f, g->dv + (size_t)j0 * x->ld, x->ld);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, cols, x->scale, dP, FLASH_BC,
                x->k + (size_t)j0 * x->ld, x->ld, 1.0f, g->dq + (size_t)i0 * x->ld, x->ld);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, rows, x->scale, dP, FLASH_BC,
                x->q + (size_t)i0 * x->ld, x->ld, 1.0f, g->dk + (size_t)j0 * x->ld, x->ld);
}

void cpu_flash_attention_backward(Ctx *ctx, float *dqkv, const float *dout, const float *qkv,
                                  const float *out, const float *lse, int B, int T, int C, int NH,
                                  DType rt) {
    int hs = C / NH;
    float *P = xmalloc(sizeof(float) * FLASH_BR * FLASH_BC);
    float *dP = xmalloc(sizeof(float) * FLASH_BR * FLASH_BC), *D = xmalloc(sizeof(float) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            Head x = head_of(qkv, b, h, T, C, NH);
            size_t off = (size_t)b * T * 3 * C + (size_t)h * hs, ho = (size_t)b * T * C + (size_t)h * hs;
            HeadGrads g = {dqkv + off, dqkv + off + C, dqkv + off + 2 * C, dout + ho, out + ho,
                           lse + ((size_t)b * NH + h) * T, D};
            for (int t = 0; t < T; t++) {  // D = rowsum(dout * out)
                float s = 0.0f;
                for (int d = 0; d < hs; d++) s += g.dout[(size_t)t * C + d] * g.out[(size_t)t * C + d];
                D[t] = s;
            }
            for (int j0 = 0; j0 < T; j0 += FLASH_BC)
                for (int i0 = flash_query_start(j0); i0 < T; i0 += FLASH_BR)
                    backward_block(ctx, &x, &g, i0, j0, P, dP, rt);
        }
    free(P); free(dP); free(D);
}
