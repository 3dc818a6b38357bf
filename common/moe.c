// moe.c — the mixture-of-experts layer (moe.h): routing, the grouped experts, the
// combine, the load-balancing and z losses, and the backward of each.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "moe.h"

size_t moe_num_params(const MoEConfig *m, int C) {
    size_t E = (size_t)m->E, F = (size_t)m->F;
    return E * C + E * (F * C + F + C * F + C);
}

MoEWeights moe_weights(const MoEConfig *m, int C, float *w) {
    size_t E = (size_t)m->E, F = (size_t)m->F;
    MoEWeights p;
    p.wr = w;
    p.w1 = p.wr + E * C;
    p.b1 = p.w1 + E * F * C;
    p.w2 = p.b1 + E * F;
    p.b2 = p.w2 + E * C * F;
    return p;
}

MoEActs *moe_route_acts_new(const MoEConfig *m, int N, int C) {
    CHECK(m->E >= 1 && m->k >= 1 && m->k <= m->E && m->F >= 1, "a mixture of experts needs "
          "E >= 1 experts, 1 <= k <= E of them a token and a width F >= 1 (E %d, k %d, F %d)",
          m->E, m->k, m->F);
    MoEActs *a = xcalloc(1, sizeof *a);
    size_t nk = (size_t)N * m->k;
    a->N = N, a->C = C;
    a->logits = xmalloc(sizeof(float) * N * m->E);
    a->probs = xmalloc(sizeof(float) * N * m->E);
    a->lse = xmalloc(sizeof(float) * N);
    a->expert = xmalloc(sizeof(int) * nk);
    a->gate = xmalloc(sizeof(float) * nk);
    a->row = xmalloc(sizeof(int) * nk);
    a->offset = xmalloc(sizeof(int) * (m->E + 1));
    a->routed = xmalloc(sizeof(int) * m->E);
    return a;
}

MoEActs *moe_acts_new(const MoEConfig *m, int N, int C) {
    MoEActs *a = moe_route_acts_new(m, N, C);
    size_t nk = (size_t)N * m->k;
    a->xg = xmalloc(sizeof(float) * nk * C);
    a->h = xmalloc(sizeof(float) * nk * m->F);
    a->act = xmalloc(sizeof(float) * nk * m->F);
    a->y = xmalloc(sizeof(float) * nk * C);
    return a;
}

void moe_acts_free(MoEActs *a) {
    if (!a) return;
    free(a->logits); free(a->probs); free(a->lse); free(a->expert); free(a->gate); free(a->row);
    free(a->offset); free(a->routed); free(a->xg); free(a->h); free(a->act); free(a->y);
    free(a);
}

// ---------------------------------------------------------------- routing

void moe_route(Ctx *ctx, const MoEConfig *m, MoEActs *a, const float *x, const float *w) {
    int E = m->E, k = m->k;
    ctx->ops->matmul_forward(ctx, a->logits, x, w, NULL, a->N, a->C, E);  // Wr: w's first E C
    for (int n = 0; n < a->N; n++) {
        const float *l = a->logits + (size_t)n * E;
        float *p = a->probs + (size_t)n * E, mx = -INFINITY, sum = 0.0f;
        for (int e = 0; e < E; e++) mx = l[e] > mx ? l[e] : mx;
        for (int e = 0; e < E; e++) sum += p[e] = expf(l[e] - mx);
        for (int e = 0; e < E; e++) p[e] /= sum;
        a->lse[n] = mx + logf(sum);
        int *ex = a->expert + (size_t)n * k;
        float chosen = 0.0f;
        for (int j = 0; j < k; j++) {  // the j-th largest not yet chosen
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= ex[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            ex[j] = best;
            chosen += p[best];
        }
        for (int j = 0; j < k; j++) a->gate[(size_t)n * k + j] = p[ex[j]] / chosen;
    }
}

// Capacity in token order, then the kept assignments grouped by expert (a counting
// sort: expert e's rows in token order).
static void place(const MoEConfig *m, MoEActs *a) {
    int E = m->E, k = m->k;
    size_t nk = (size_t)a->N * k;
    long cap = m->capacity > 0 ? (long)ceil((double)m->capacity * nk / E) : (long)nk;
    memset(a->routed, 0, sizeof(int) * E);
    int *kept = xcalloc((size_t)E, sizeof(int));
    for (size_t i = 0; i < nk; i++) {
        int e = a->expert[i];
        a->routed[e]++;
        a->row[i] = kept[e] < cap ? kept[e]++ : -1;  // for now its rank within its expert
    }
    a->offset[0] = 0;
    for (int e = 0; e < E; e++) a->offset[e + 1] = a->offset[e] + kept[e];
    a->kept = a->offset[E];
    a->dropped = (int)nk - a->kept;
    for (size_t i = 0; i < nk; i++)
        if (a->row[i] >= 0) a->row[i] += a->offset[a->expert[i]];
    free(kept);
}

// ---------------------------------------------------------------- forward

void moe_expert_forward(Ctx *ctx, const MoEConfig *m, int C, const float *w, int e, int rows,
                        const float *xg, float *h, float *act, float *y) {
    if (rows == 0) return;
    int F = m->F;
    MoEWeights p = moe_weights(m, C, (float *)w);
    ctx->ops->matmul_forward(ctx, h, xg, p.w1 + (size_t)e * F * C, p.b1 + (size_t)e * F, rows, C, F);
    ctx->ops->gelu_forward(ctx, act, h, (size_t)rows * F);
    ctx->ops->matmul_forward(ctx, y, act, p.w2 + (size_t)e * C * F, p.b2 + (size_t)e * C, rows, F, C);
}

// The two losses' values (weighted).
static void losses(const MoEConfig *m, MoEActs *a) {
    int E = m->E, N = a->N;
    double aux = 0, z = 0;
    for (int e = 0; e < E; e++) {
        double P = 0;
        for (int n = 0; n < N; n++) P += a->probs[(size_t)n * E + e];
        aux += (double)a->routed[e] / ((double)N * m->k) * (P / N);
    }
    for (int n = 0; n < N; n++) z += (double)a->lse[n] * a->lse[n] / N;
    a->aux = (float)(m->aux_weight * E * aux);
    a->z = (float)(m->z_weight * z);
}

float moe_forward(Ctx *ctx, const MoEConfig *m, MoEActs *a, float *out, const float *x,
                  const float *w) {
    int N = a->N, C = a->C, k = m->k;
    moe_route(ctx, m, a, x, w);
    place(m, a);
    for (size_t i = 0; i < (size_t)N * k; i++)  // gather: each kept assignment's token
        if (a->row[i] >= 0)
            memcpy(a->xg + (size_t)a->row[i] * C, x + (i / k) * C, sizeof(float) * C);
    for (int e = 0; e < m->E; e++) {
        size_t r0 = (size_t)a->offset[e];
        moe_expert_forward(ctx, m, C, w, e, a->offset[e + 1] - a->offset[e], a->xg + r0 * C,
                           a->h + r0 * m->F, a->act + r0 * m->F, a->y + r0 * C);
    }
    moe_combine(m, a, a->row, a->y, out);
    losses(m, a);
    return a->aux + a->z;
}

// ---------------------------------------------------------------- the combine

void moe_combine(const MoEConfig *m, const MoEActs *a, const int *row, const float *y, float *out) {
    int C = a->C, k = m->k;
    memset(out, 0, sizeof(float) * a->N * C);
    for (size_t i = 0; i < (size_t)a->N * k; i++) {  // per token, in choice order
        if (row[i] < 0) continue;
        const float *yr = y + (size_t)row[i] * C;
        float *o = out + (i / k) * C, g = a->gate[i];
        for (int c = 0; c < C; c++) o[c] += g * yr[c];
    }
}

void moe_combine_backward(const MoEConfig *m, const MoEActs *a, const int *row, const float *dout,
                          const float *y, float *dy, float *dgate) {
    int C = a->C, k = m->k;
    for (size_t i = 0; i < (size_t)a->N * k; i++) {  // out = sum g y: dg = dout . y, dy = g dout
        dgate[i] = 0.0f;
        if (row[i] < 0) continue;  // dropped: no output, no gradient
        const float *d = dout + (i / k) * C, *yr = y + (size_t)row[i] * C;
        float *dyr = dy + (size_t)row[i] * C, acc = 0.0f;
        for (int c = 0; c < C; c++) acc += d[c] * yr[c];
        for (int c = 0; c < C; c++) dyr[c] = a->gate[i] * d[c];
        dgate[i] = acc;
    }
}

void moe_scatter_add(const MoEConfig *m, const MoEActs *a, const int *row, const float *dxg,
                     float *dx) {
    int C = a->C, k = m->k;
    for (size_t i = 0; i < (size_t)a->N * k; i++)  // each token's share back, in choice order
        if (row[i] >= 0) {
            const float *g = dxg + (size_t)row[i] * C;
            float *d = dx + (i / k) * C;
            for (int c = 0; c < C; c++) d[c] += g[c];
        }
}

// ---------------------------------------------------------------- backward

void moe_expert_backward(Ctx *ctx, const MoEConfig *m, int C, const float *w, float *dw, int e,
                         int rows, const float *dy, const float *xg, const float *h,
                         const float *act, float *dxg) {
    if (rows == 0) return;
    int F = m->F;
    MoEWeights p = moe_weights(m, C, (float *)w), dp = moe_weights(m, C, dw);
    float *dact = xcalloc((size_t)rows * F, sizeof(float)), *dh = xcalloc((size_t)rows * F, sizeof(float));
    memset(dxg, 0, sizeof(float) * rows * C);
    ctx->ops->matmul_backward(ctx, dact, dp.w2 + (size_t)e * C * F, dp.b2 + (size_t)e * C, dy, act,
                              p.w2 + (size_t)e * C * F, rows, F, C);
    ctx->ops->gelu_backward(ctx, dh, h, dact, (size_t)rows * F);
    ctx->ops->matmul_backward(ctx, dxg, dp.w1 + (size_t)e * F * C, dp.b1 + (size_t)e * F, dh, xg,
                              p.w1 + (size_t)e * F * C, rows, C, F);
    free(dact);
    free(dh);
}

// dlogits (N, E) from the gates' gradient dgate (N k) and the two losses: through the
// renormalisation over each token's k (g_j = p_j / s, s the sum of the k chosen p:
// dp_i = (dg_i - sum_j dg_j g_j) / s), the load-balancing loss (d/dp[n,e] = w E f_e / N),
// then the softmax; the z-loss adds 2 w lse_n / N * p[n, e].
void moe_router_backward(const MoEConfig *m, const MoEActs *a, float *dlogits, const float *dgate,
                         const int *routed, int total, float loss_scale) {
    int E = m->E, k = m->k, N = a->N;
    float *dp = xmalloc(sizeof(float) * E);
    for (int n = 0; n < N; n++) {
        const float *p = a->probs + (size_t)n * E;
        const int *ex = a->expert + (size_t)n * k;
        const float *g = a->gate + (size_t)n * k, *dg = dgate + (size_t)n * k;
        float s = 0.0f, G = 0.0f, pdp = 0.0f;
        for (int j = 0; j < k; j++) s += p[ex[j]], G += dg[j] * g[j];
        for (int e = 0; e < E; e++)
            dp[e] = loss_scale * m->aux_weight * E * ((float)routed[e] / ((float)total * k)) / total;
        for (int j = 0; j < k; j++) dp[ex[j]] += (dg[j] - G) / s;
        for (int e = 0; e < E; e++) pdp += p[e] * dp[e];
        float zc = loss_scale * m->z_weight * 2.0f * a->lse[n] / total;
        for (int e = 0; e < E; e++) dlogits[(size_t)n * E + e] = p[e] * (dp[e] - pdp) + zc * p[e];
    }
    free(dp);
}

void moe_backward(Ctx *ctx, const MoEConfig *m, MoEActs *a, float *dx, float *dw,
                  const float *dout, const float *x, const float *w, float loss_scale) {
    int N = a->N, C = a->C, k = m->k;
    size_t nk = (size_t)N * k;
    MoEWeights p = moe_weights(m, C, (float *)w), dp = moe_weights(m, C, dw);
    float *dgate = xcalloc(nk, sizeof(float)), *dy = xmalloc(sizeof(float) * (a->kept + 1) * C);
    float *dxg = xmalloc(sizeof(float) * (a->kept + 1) * C);
    moe_combine_backward(m, a, a->row, dout, a->y, dy, dgate);
    for (int e = 0; e < m->E; e++) {
        size_t r0 = (size_t)a->offset[e], hf = r0 * m->F, hc = r0 * C;
        moe_expert_backward(ctx, m, C, w, dw, e, a->offset[e + 1] - a->offset[e], dy + hc, a->xg + hc,
                            a->h + hf, a->act + hf, dxg + hc);
    }
    moe_scatter_add(m, a, a->row, dxg, dx);
    float *dlogits = xmalloc(sizeof(float) * N * m->E);
    moe_router_backward(m, a, dlogits, dgate, a->routed, N, loss_scale);
    ctx->ops->matmul_backward(ctx, dx, dp.wr, NULL, dlogits, x, p.wr, N, C, m->E);
    free(dgate); free(dy); free(dxg); free(dlogits);
}
