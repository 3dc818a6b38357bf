// cp_attention.c — causal attention of a run of queries against one block of keys,
// the unit of work of ring attention (each rank holds its queries and computes on the
// key block it holds now while the next one travels).
//
// Forward: the block's scores S = Q K^T / sqrt(hs), masked by global position (key j
// seen by query i iff k0 + j <= q0 + i), softmax over the seen keys alone, and the
// output normalised over them with its lse = max + log(sum of exps): a partial result
// that softmax_merge combines with the other blocks'. Backward, given each query's
// final lse and D = rowsum(dout * out): the block's probabilities are recomputed as
// P = exp(S - lse) (the final softmax restricted to this block's keys), and
//   dV += P^T dout,  dS = P * (dout V^T - D),  dQ += dS K / sqrt(hs),  dK += dS^T Q / sqrt(hs)
// the flash backward (common/ops_cpu_flash.c) with the mask in global positions. The
// queries go FLASH_BR rows at a time, so the scores held are FLASH_BR x nk.
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cp.h"
#include "fastmath.h"
#include "flash_tiles.h"

// Keys of b that query row i (of b) sees: a prefix of the block, 0..nk.
static int keys_seen(const CpBlock *b, int i) {
    int n = b->q0 + i - b->k0 + 1;
    return n < 0 ? 0 : n > b->nk ? b->nk : n;
}

int cp_block_sees(const CpBlock *b) { return b->nq > 0 && b->nk > 0 && keys_seen(b, b->nq - 1) > 0; }

long long cp_causal_pairs(int T, int cp, int rank, int zigzag) {
    CpRuns r;
    if (cp_runs(T, cp, rank, zigzag, &r) != 0) return -1;
    long long pairs = 0;
    for (int k = 0; k < r.n; k++)
        for (int i = r.start[k]; i < r.start[k] + r.len[k]; i++) pairs += i + 1;
    return pairs;
}

long long cp_block_pairs(const CpBlock *b) {
    long long n = 0;
    for (int i = 0; i < b->nq; i++) n += keys_seen(b, i);
    return n;
}

// S (rows x nk, stride nk) = Q[i0 .. i0+rows) K^T / sqrt(hs).
static void scores(const CpBlock *b, float *S, int i0, int rows) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, b->nk, b->hs,
                1.0f / sqrtf((float)b->hs), b->q + (size_t)i0 * b->ldq, b->ldq, b->k, b->ldk, 0.0f,
                S, b->nk);
}

void cp_block_forward(const CpBlock *b, float *out, int ldo, float *lse, float *scratch) {
    float *S = scratch;
    for (int i0 = 0; i0 < b->nq; i0 += FLASH_BR) {
        int rows = b->nq - i0 < FLASH_BR ? b->nq - i0 : FLASH_BR;
        if (b->nk) scores(b, S, i0, rows);
        for (int r = 0; r < rows; r++) {  // S's row becomes the row's unnormalised P~
            float *s = S + (size_t)r * b->nk;
            int seen = keys_seen(b, i0 + r);
            float m = -INFINITY, l = 0.0f;
            for (int j = 0; j < seen; j++) m = s[j] > m ? s[j] : m;
            for (int j = 0; j < b->nk; j++) s[j] = j < seen ? fast_expf(s[j] - m) : 0.0f;
            for (int j = 0; j < seen; j++) l += s[j];
            for (int j = 0; j < seen; j++) s[j] /= l;
            lse[i0 + r] = seen ? m + logf(l) : -INFINITY;
        }
        float *o = out + (size_t)i0 * ldo;
        for (int r = 0; r < rows; r++) memset(o + (size_t)r * ldo, 0, sizeof(float) * b->hs);
        if (b->nk)  // O = P V (rows that saw nothing: P = 0, O = 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, b->hs, b->nk, 1.0f, S,
                        b->nk, b->v, b->ldk, 0.0f, o, ldo);
    }
}

void cp_block_backward(const CpBlock *b, const float *dout, int ldo, const float *lse,
                       const float *D, float *dq, int lddq, float *dk, float *dv, int lddk,
                       float *scratch) {
    if (!cp_block_sees(b)) return;
    float scale = 1.0f / sqrtf((float)b->hs);
    float *P = scratch, *dP = scratch + (size_t)FLASH_BR * b->nk;
    for (int i0 = 0; i0 < b->nq; i0 += FLASH_BR) {
        int rows = b->nq - i0 < FLASH_BR ? b->nq - i0 : FLASH_BR;
        if (keys_seen(b, i0 + rows - 1) == 0) continue;  // this tile sees none of the block
        scores(b, P, i0, rows);
        // dP = dout V^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, b->nk, b->hs, 1.0f,
                    dout + (size_t)i0 * ldo, ldo, b->v, b->ldk, 0.0f, dP, b->nk);
        for (int r = 0; r < rows; r++) {
            float *p = P + (size_t)r * b->nk, *dp = dP + (size_t)r * b->nk;
            int seen = keys_seen(b, i0 + r);
            float L = lse[i0 + r], Dr = D[i0 + r];
            for (int j = 0; j < b->nk; j++) p[j] = j < seen ? fast_expf(p[j] - L) : 0.0f;
            for (int j = 0; j < b->nk; j++) dp[j] = j < seen ? p[j] * (dp[j] - Dr) : 0.0f;
        }
        const float *q = b->q + (size_t)i0 * b->ldq;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, b->nk, b->hs, rows, 1.0f, P, b->nk,
                    dout + (size_t)i0 * ldo, ldo, 1.0f, dv, lddk);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, b->hs, b->nk, scale, dP,
                    b->nk, b->k, b->ldk, 1.0f, dq + (size_t)i0 * lddq, lddq);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, b->nk, b->hs, rows, scale, dP, b->nk,
                    q, b->ldq, 1.0f, dk, lddk);
    }
}

float *cp_buffer(ContextParallel *cp, MemCategory cat, size_t n) {
    return mem_alloc(cp->ctx, cat, n * sizeof(float));
}
void cp_buffer_free(ContextParallel *cp, MemCategory cat, float *p, size_t n) {
    mem_free(cp->ctx, cat, p, n * sizeof(float));
}
