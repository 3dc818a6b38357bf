// test_ops.c — every CPU op: forward against a float64 reference, backward
// against central finite differences.
//
// Finite differences. For an op y = f(x) we take the scalar L = sum_i y_i r_i
// with fixed random r (accumulated in double), so dL/dx is exactly what the
// backward pass computes when handed dout = r. The numerical estimate is
// (L(x + h) - L(x - h)) / 2h per element, with h = 1e-2. Its error has two parts:
// truncation, O(h^2) ~ 1e-4 relative, and fp32 rounding of y, ~1e-7 |L| / h ~ 1e-5.
// Hence tolerance FD_TOL = 1e-3 on ||analytic - numeric|| / ||numeric||.
//
// Forward values are compared with straightforward float64 loops; fp32 ops with
// reductions of length <= 256 agree to ~1e-6 relative, so FWD_TOL = 1e-5.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "ops.h"
#include "rng.h"

#define FD_TOL 1e-3
#define FWD_TOL 1e-5
#define FD_H 1e-2f

static Ctx ctx;
static const Ops *o;
static Rng rng;

static float *randn(size_t n, float std) {
    float *x = xmalloc(n * sizeof(float));
    rng_fill_normal(&rng, x, n, 0.0f, std);
    return x;
}
static float *zeros(size_t n) { return xcalloc(n, sizeof(float)); }
static double dot(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

// The op under test, seen as "fill y from the current inputs".
typedef void (*Forward)(void *state, float *y);

// Numerical gradient of L = <y, r> with respect to every element of x.
static void fd_grad(Forward f, void *st, float *x, size_t nx, float *y, const float *r, size_t ny,
                    float *grad) {
    for (size_t i = 0; i < nx; i++) {
        float saved = x[i];
        x[i] = saved + FD_H;
        f(st, y);
        double lp = dot(y, r, ny);
        x[i] = saved - FD_H;
        f(st, y);
        double lm = dot(y, r, ny);
        x[i] = saved;
        grad[i] = (float)((lp - lm) / (2.0 * FD_H));
    }
}

// ---------------------------------------------------------------- matmul
typedef struct { float *inp, *w, *bias; int N, C, OC; } MM;
static void mm_f(void *s, float *y) {
    MM *m = s;
    o->matmul_forward(&ctx, y, m->inp, m->w, m->bias, m->N, m->C, m->OC);
}
static void test_matmul(TestState *ts) {
    MM m = {.N = 7, .C = 13, .OC = 5};
    m.inp = randn(m.N * m.C, 1); m.w = randn(m.OC * m.C, 1); m.bias = randn(m.OC, 1);
    size_t ny = m.N * m.OC;
    float *y = zeros(ny), *ref = zeros(ny), *r = randn(ny, 1);
    mm_f(&m, y);
    for (int n = 0; n < m.N; n++)
        for (int oc = 0; oc < m.OC; oc++) {
            double s = m.bias[oc];
            for (int c = 0; c < m.C; c++) s += (double)m.inp[n * m.C + c] * m.w[oc * m.C + c];
            ref[n * m.OC + oc] = (float)s;
        }
    check_rel(ts, "matmul.forward", y, ref, ny, FWD_TOL);
    float *di = zeros(m.N * m.C), *dw = zeros(m.OC * m.C), *db = zeros(m.OC);
    o->matmul_backward(&ctx, di, dw, db, r, m.inp, m.w, m.N, m.C, m.OC);
    float *num = zeros(m.N * m.C + m.OC * m.C);
    fd_grad(mm_f, &m, m.inp, m.N * m.C, y, r, ny, num);
    check_rel(ts, "matmul.backward.dinp", di, num, m.N * m.C, FD_TOL);
    fd_grad(mm_f, &m, m.w, m.OC * m.C, y, r, ny, num);
    check_rel(ts, "matmul.backward.dw", dw, num, m.OC * m.C, FD_TOL);
    fd_grad(mm_f, &m, m.bias, m.OC, y, r, ny, num);
    check_rel(ts, "matmul.backward.dbias", db, num, m.OC, FD_TOL);
    // += semantics: a second backward doubles every gradient.
    float *dw2 = xmalloc(m.OC * m.C * sizeof(float));
    memcpy(dw2, dw, m.OC * m.C * sizeof(float));
    o->matmul_backward(&ctx, NULL, dw2, NULL, r, m.inp, m.w, m.N, m.C, m.OC);
    for (int i = 0; i < m.OC * m.C; i++) dw[i] *= 2;
    check_rel(ts, "matmul.backward.accumulates", dw2, dw, m.OC * m.C, 1e-6);
    free(m.inp); free(m.w); free(m.bias); free(y); free(ref); free(r); free(di); free(dw);
    free(db); free(num); free(dw2);
}

// ---------------------------------------------------------------- embedding
typedef struct { float *wte, *wpe; int *tok; int B, T, C; } EMB;
static void emb_f(void *s, float *y) {
    EMB *e = s;
    o->embedding_forward(&ctx, y, e->tok, e->wte, e->wpe, e->B, e->T, e->C);
}
static void test_embedding(TestState *ts) {
    EMB e = {.B = 3, .T = 5, .C = 6};
    int V = 7;
    e.wte = randn(V * e.C, 1); e.wpe = randn(e.T * e.C, 1);
    e.tok = xmalloc(sizeof(int) * e.B * e.T);
    for (int i = 0; i < e.B * e.T; i++) e.tok[i] = (int)rng_below(&rng, 4);  // repeats on purpose
    size_t ny = e.B * e.T * e.C;
    float *y = zeros(ny), *r = randn(ny, 1), *num = zeros(V * e.C);
    float *dte = zeros(V * e.C), *dpe = zeros(e.T * e.C);
    o->embedding_backward(&ctx, dte, dpe, r, e.tok, e.tok, e.B, e.T, e.C);
    fd_grad(emb_f, &e, e.wte, V * e.C, y, r, ny, num);
    check_rel(ts, "embedding.backward.dwte", dte, num, V * e.C, FD_TOL);
    fd_grad(emb_f, &e, e.wpe, e.T * e.C, y, r, ny, num);
    check_rel(ts, "embedding.backward.dwpe", dpe, num, e.T * e.C, FD_TOL);
    free(e.wte); free(e.wpe); free(e.tok); free(y); free(r); free(num); free(dte); free(dpe);
}

// ---------------------------------------------------------------- layernorm
typedef struct { float *x, *w, *b, *mean, *rstd; int N, C; } LN;
static void ln_f(void *s, float *y) {
    LN *l = s;
    o->layernorm_forward(&ctx, y, l->mean, l->rstd, l->x, l->w, l->b, l->N, l->C);
}
static void test_layernorm(TestState *ts) {
    LN l = {.N = 5, .C = 11};
    l.x = randn(l.N * l.C, 1); l.w = randn(l.C, 1); l.b = randn(l.C, 1);
    l.mean = zeros(l.N); l.rstd = zeros(l.N);
    size_t ny = l.N * l.C;
    float *y = zeros(ny), *ref = zeros(ny), *r = randn(ny, 1), *num = zeros(ny);
    ln_f(&l, y);
    for (int n = 0; n < l.N; n++) {
        double m = 0, v = 0;
        for (int c = 0; c < l.C; c++) m += l.x[n * l.C + c];
        m /= l.C;
        for (int c = 0; c < l.C; c++) v += pow(l.x[n * l.C + c] - m, 2);
        v /= l.C;
        for (int c = 0; c < l.C; c++)
            ref[n * l.C + c] = (float)((l.x[n * l.C + c] - m) / sqrt(v + 1e-5) * l.w[c] + l.b[c]);
    }
    check_rel(ts, "layernorm.forward", y, ref, ny, FWD_TOL);
    float *dx = zeros(ny), *dw = zeros(l.C), *db = zeros(l.C);
    o->layernorm_backward(&ctx, dx, dw, db, r, l.x, l.w, l.mean, l.rstd, l.N, l.C);
    fd_grad(ln_f, &l, l.x, ny, y, r, ny, num);
    check_rel(ts, "layernorm.backward.dinp", dx, num, ny, FD_TOL);
    fd_grad(ln_f, &l, l.w, l.C, y, r, ny, num);
    check_rel(ts, "layernorm.backward.dw", dw, num, l.C, FD_TOL);
    fd_grad(ln_f, &l, l.b, l.C, y, r, ny, num);
    check_rel(ts, "layernorm.backward.db", db, num, l.C, FD_TOL);
    free(l.x); free(l.w); free(l.b); free(l.mean); free(l.rstd); free(y); free(ref); free(r);
    free(num); free(dx); free(dw); free(db);
}

// ---------------------------------------------------------------- attention
typedef struct { float *qkv, *att; int B, T, C, NH; } ATT;
static void att_f(void *s, float *y) {
    ATT *a = s;
    o->attention_forward(&ctx, y, a->att, a->qkv, a->B, a->T, a->C, a->NH, DT_F32);
}
static void test_attention(TestState *ts) {
    ATT a = {.B = 2, .T = 7, .C = 12, .NH = 3};
    int hs = a.C / a.NH;
    size_t nqkv = a.B * a.T * 3 * a.C, ny = a.B * a.T * a.C;
    a.qkv = randn(nqkv, 1);
    a.att = zeros(a.B * a.NH * a.T * a.T);
    float *y = zeros(ny), *ref = zeros(ny), *r = randn(ny, 1), *num = zeros(nqkv);
    att_f(&a, y);
    // float64 reference: softmax(q k^T / sqrt(hs)) over t2 <= t, times v.
    for (int b = 0; b < a.B; b++)
        for (int h = 0; h < a.NH; h++)
            for (int t = 0; t < a.T; t++) {
                const float *q = a.qkv + (b * a.T + t) * 3 * a.C + h * hs;
                double s[64], mx = -1e300, sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = a.qkv + (b * a.T + t2) * 3 * a.C + a.C + h * hs;
                    s[t2] = 0;
                    for (int i = 0; i < hs; i++) s[t2] += (double)q[i] * k[i];
                    s[t2] /= sqrt((double)hs);
                    if (s[t2] > mx) mx = s[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) sum += (s[t2] = exp(s[t2] - mx));
                for (int i = 0; i < hs; i++) {
                    double acc = 0;
                    for (int t2 = 0; t2 <= t; t2++)
                        acc += s[t2] / sum * a.qkv[(b * a.T + t2) * 3 * a.C + 2 * a.C + h * hs + i];
                    ref[(b * a.T + t) * a.C + h * hs + i] = (float)acc;
                }
            }
    check_rel(ts, "attention.forward", y, ref, ny, FWD_TOL);
    // the probabilities are causal: zero above the diagonal, rows sum to 1
    int causal_ok = 1;
    for (int bh = 0; bh < a.B * a.NH; bh++)
        for (int t = 0; t < a.T; t++) {
            double sum = 0;
            for (int t2 = 0; t2 < a.T; t2++) {
                float p = a.att[(bh * a.T + t) * a.T + t2];
                if (t2 > t && p != 0.0f) causal_ok = 0;
                sum += p;
            }
            if (fabs(sum - 1.0) > 1e-5) causal_ok = 0;
        }
    test_report(ts, causal_ok, "attention.causal_probabilities", "zero above diagonal, rows sum to 1");
    float *dqkv = zeros(nqkv), *scratch = zeros(a.B * a.NH * a.T * a.T);
    att_f(&a, y);
    o->attention_backward(&ctx, dqkv, scratch, r, a.qkv, a.att, a.B, a.T, a.C, a.NH, DT_F32);
    fd_grad(att_f, &a, a.qkv, nqkv, y, r, ny, num);
    check_rel(ts, "attention.backward.dqkv", dqkv, num, nqkv, FD_TOL);
    free(a.qkv); free(a.att); free(y); free(ref); free(r); free(num); free(dqkv); free(scratch);
}

// ---------------------------------------------------------------- GELU
typedef struct { float *x; size_t n; } GE;
static void gelu_f(void *s, float *y) { GE *g = s; o->gelu_forward(&ctx, y, g->x, g->n); }
static void test_gelu(TestState *ts) {
    GE g = {.n = 301};
    g.x = randn(g.n, 2);
    g.x[0] = 0; g.x[1] = 12; g.x[2] = -12; g.x[3] = 1e-4f;  // saturation and the origin
    float *y = zeros(g.n), *ref = zeros(g.n), *r = randn(g.n, 1), *num = zeros(g.n);
    gelu_f(&g, y);
    for (size_t i = 0; i < g.n; i++) {
        double x = g.x[i];
        ref[i] = (float)(0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))));
    }
    check_rel(ts, "gelu.forward", y, ref, g.n, FWD_TOL);
    float *dx = zeros(g.n);
    o->gelu_backward(&ctx, dx, g.x, r, g.n);
    fd_grad(gelu_f, &g, g.x, g.n, y, r, g.n, num);
    check_rel(ts, "gelu.backward", dx, num, g.n, FD_TOL);
    free(g.x); free(y); free(ref); free(r); free(num); free(dx);
}

// ---------------------------------------------------------------- cross-entropy
typedef struct { float *logits; int *tgt; int N, V; } CE;
static void ce_f(void *s, float *y) {
    CE *c = s;
    o->crossentropy_forward(&ctx, y, c->logits, c->tgt, c->N, c->V);
}
static void test_crossentropy(TestState *ts) {
    CE c = {.N = 6, .V = 19};
    c.logits = randn(c.N * c.V, 3);
    c.tgt = xmalloc(sizeof(int) * c.N);
    for (int i = 0; i < c.N; i++) c.tgt[i] = (int)rng_below(&rng, c.V);
    float *y = zeros(c.N), *ref = zeros(c.N), *num = zeros(c.N * c.V);
    ce_f(&c, y);
    for (int n = 0; n < c.N; n++) {
        double mx = -1e300, s = 0;
        for (int v = 0; v < c.V; v++) mx = fmax(mx, c.logits[n * c.V + v]);
        for (int v = 0; v < c.V; v++) s += exp(c.logits[n * c.V + v] - mx);
        ref[n] = (float)(log(s) + mx - c.logits[n * c.V + c.tgt[n]]);
    }
    check_rel(ts, "crossentropy.forward", y, ref, c.N, FWD_TOL);
    // The loss is a scalar per row: L = sum_n r_n loss_n; backward with dloss = 1
    // gives dL/dlogits for r = 1, so use r = 1 here.
    float *ones = xmalloc(sizeof(float) * c.N), *dl = zeros(c.N * c.V);
    for (int i = 0; i < c.N; i++) ones[i] = 1.0f;
    o->crossentropy_backward(&ctx, dl, c.logits, c.tgt, 1.0f, c.N, c.V);
    fd_grad(ce_f, &c, c.logits, c.N * c.V, y, ones, c.N, num);
    check_rel(ts, "crossentropy.backward", dl, num, c.N * c.V, FD_TOL);
    // in place: dlogits may overwrite the logits
    float *copy = xmalloc(sizeof(float) * c.N * c.V);
    memcpy(copy, c.logits, sizeof(float) * c.N * c.V);
    o->crossentropy_backward(&ctx, copy, copy, c.tgt, 1.0f, c.N, c.V);
    check_rel(ts, "crossentropy.backward.in_place", copy, dl, c.N * c.V, 0.0);
    free(c.logits); free(c.tgt); free(y); free(ref); free(num); free(ones); free(dl); free(copy);
}

// ---------------------------------------------------------------- the vocabulary split
//
// The pieces of a vocab-parallel embedding and cross-entropy (ops.h) against the
// fused ops, with V ids split over t ranks: rank r holds ids [r*Vl, r*Vl + valid_r),
// Vl = ceil(V/t), valid_r = clamp(V - r*Vl, 0, Vl). The last blocks are padded,
// and with enough ranks one is all padding.
static int split_width(int V, int t) { return (V + t - 1) / t; }
static int split_valid(int V, int t, int r) {
    int v = V - r * split_width(V, t), Vl = split_width(V, t);
    return v < 0 ? 0 : v > Vl ? Vl : v;
}
static void check_bits(TestState *ts, const char *name, const float *got, const float *want,
                       size_t n) {
    int same = memcmp(got, want, n * sizeof(float)) == 0;
    test_report(ts, same, name, "%s (n %zu)", same ? "bitwise identical" : "DIFFERENT", n);
}

// dwpe from position_backward over row shards [cut[s], cut[s+1]), each into its own
// buffer, the buffers summed on the host in shard order (as an all-reduce would).
static void position_backward_shards(float *sum, const float *dout, const int *cut, int nshards,
                                     int T, int C) {
    float *pe = zeros((size_t)T * C);
    memset(sum, 0, sizeof(float) * T * C);
    for (int s = 0; s < nshards; s++) {
        memset(pe, 0, sizeof(float) * T * C);
        o->position_backward(&ctx, pe, dout + (size_t)cut[s] * C, cut[s], cut[s + 1] - cut[s], T,
                             C);
        for (int i = 0; i < T * C; i++) sum[i] += pe[i];
    }
    free(pe);
}

static void test_split_embedding(TestState *ts) {
    enum { B = 3, T = 5, C = 6, V = 7, N = B * T, NT = 3 };  // blocks of 3, 3 and 1 ids
    int Vl = split_width(V, NT);
    size_t nd = (size_t)N * C, nw = (size_t)NT * Vl * C;
    float *wte = randn(nw, 1), *wpe = randn(T * C, 1), *zpe = zeros(T * C);  // rows V..: padding
    int tok[N];
    for (int i = 0; i < N; i++) tok[i] = (int)rng_below(&rng, V);  // 15 draws of 7: repeats
    tok[3] = V - 1;                                                 // the last block is used
    float *ref = zeros(nd), *out = zeros(nd), *sum = zeros(nd);

    // Unsplit: one block with every id, the whole batch from row 0. lookup copies
    // wte's row, position adds wpe's: the same one addition as embedding_forward.
    o->embedding_forward(&ctx, ref, tok, wte, wpe, B, T, C);
    o->embedding_lookup_forward(&ctx, out, tok, wte, 0, V, N, C);
    o->position_forward(&ctx, out, wpe, 0, N, T, C);
    check_bits(ts, "split.lookup+position.unsplit", out, ref, nd);
    // The rows in shards that start at row0 = 0, 4, 10 (not multiples of T).
    static const int cut[] = {0, 4, 10, 15}, cut2[] = {0, 5, 15};
    o->embedding_lookup_forward(&ctx, out, tok, wte, 0, V, N, C);
    for (int s = 0; s < 3; s++)
        o->position_forward(&ctx, out + (size_t)cut[s] * C, wpe, cut[s], cut[s + 1] - cut[s], T, C);
    check_bits(ts, "split.position_forward.row_shards", out, ref, nd);

    // Split over NT blocks: each row comes from exactly one block, the others give
    // zeros, and x + 0 = x: the sum equals embedding_forward's wte part (wpe = 0) exactly.
    o->embedding_forward(&ctx, ref, tok, wte, zpe, B, T, C);
    for (int r = 0; r < NT; r++) {
        o->embedding_lookup_forward(&ctx, out, tok, wte + (size_t)r * Vl * C, r * Vl, Vl, N, C);
        for (size_t i = 0; i < nd; i++) sum[i] += out[i];
    }
    check_bits(ts, "split.lookup.sum_over_blocks[t=3]", sum, ref, nd);

    // Backward. Block r gets a whole-vocabulary buffer, zeroed, at its rows: any
    // write outside rows [r*Vl, (r+1)*Vl) shows. A row's terms are added in
    // increasing n by both ops, and the other blocks add zeros: exact.
    float *dout = randn(nd, 1), *dwte = zeros(nw), *dwpe = zeros(T * C);
    float *blk = zeros(nw), *dsum = zeros(nw), *pe = zeros(T * C);
    o->embedding_backward(&ctx, dwte, dwpe, dout, tok, tok, B, T, C);
    int outside = 0;
    for (int r = 0; r < NT; r++) {
        memset(blk, 0, nw * sizeof(float));
        o->embedding_lookup_backward(&ctx, blk + (size_t)r * Vl * C, dout, tok, tok, r * Vl, Vl, N,
                                     C);
        for (size_t i = 0; i < nw; i++) {
            int row = (int)(i / C);
            if ((row < r * Vl || row >= (r + 1) * Vl) && blk[i] != 0.0f) outside++;
            dsum[i] += blk[i];
        }
    }
    test_report(ts, outside == 0, "split.lookup_backward.own_rows_only",
                "%d values written outside the block's rows", outside);
    check_bits(ts, "split.lookup_backward.sum_over_blocks[t=3]", dsum, dwte, nw);

    // position_backward over row shards. Into one buffer, shard after shard: every
    // dwpe row gets embedding_backward's terms in its order (b = 0, 1, 2): exact.
    for (int s = 0; s < 3; s++)
        o->position_backward(&ctx, pe, dout + (size_t)cut[s] * C, cut[s], cut[s + 1] - cut[s], T,
                             C);
    check_bits(ts, "split.position_backward.shards_accumulated", pe, dwpe, (size_t)T * C);
    // Each shard into its own buffer, summed on the host. Still exact when every
    // shard but the first to hold a position adds one term to it: cuts 0,4,10,15
    // (position 4: shard 1 sums rows 4 and 9, shard 2 adds row 14): same order.
    position_backward_shards(pe, dout, cut, 3, T, C);
    check_bits(ts, "split.position_backward.shards_summed.same_order", pe, dwpe, (size_t)T * C);
    // Cuts 0,5,15: shard 1 holds rows t+5 and t+10 of every position, so the host
    // computes d0 + (d5 + d10) where embedding_backward computes (d0 + d5) + d10.
    // Reassociated sums of 3 fp32 terms: a few ulp each, so 1e-6 relative.
    position_backward_shards(pe, dout, cut2, 2, T, C);
    check_rel(ts, "split.position_backward.shards_summed.reassociated", pe, dwpe, (size_t)T * C,
              1e-6);
    free(wte); free(wpe); free(zpe); free(ref); free(out); free(sum); free(dout); free(dwte);
    free(dwpe); free(blk); free(dsum); free(pe);
}

// Block r of logits(N,V) as the rank holding it sees it: (N,Vl), the valid
// columns from the full logits, the padding filled with 1e3 (garbage that would
// dominate the max and the sum if it were read).
static void split_block(float *blk, const float *logits, int N, int V, int Vl, int lo, int valid) {
    for (int n = 0; n < N; n++)
        for (int v = 0; v < Vl; v++)
            blk[(size_t)n * Vl + v] = v < valid ? logits[(size_t)n * V + lo + v] : 1e3f;
}

// The cross-entropy of N rows over V ids split in t blocks, combined on the host as
// the parallel code combines it over ranks: m = max of the block maxima, sumexp =
// sum of the block sums, tlogit = sum of the block tlogits (one block holds the target).
static void split_ce_case(TestState *ts, int N, int V, int t) {
    int Vl = split_width(V, t);
    float dloss = 1.0f / N;
    float *logits = randn((size_t)N * V, 3), *loss_ref = zeros(N), *dl_ref = zeros((size_t)N * V);
    int *tgt = xmalloc(sizeof(int) * N);
    for (int n = 0; n < N; n++) tgt[n] = (int)rng_below(&rng, V);
    o->crossentropy_forward(&ctx, loss_ref, logits, tgt, N, V);
    o->crossentropy_backward(&ctx, dl_ref, logits, tgt, dloss, N, V);

    float *blk = zeros((size_t)N * Vl), *dblk = zeros((size_t)N * Vl), *dl = zeros((size_t)N * V);
    float *m = zeros(N), *se = zeros(N), *tl = zeros(N), *bm = zeros(N), *bse = zeros(N);
    float *btl = zeros(N), *mref = zeros(N), *loss = zeros(N);
    int empty_ok = 1, pad_nonzero = 0, inplace_same = 1;
    for (int n = 0; n < N; n++) {
        m[n] = mref[n] = -INFINITY;
        for (int v = 0; v < V; v++) mref[n] = fmaxf(mref[n], logits[(size_t)n * V + v]);
    }
    for (int r = 0; r < t; r++) {  // pass 1: the row maxima
        int lo = r * Vl, valid = split_valid(V, t, r);
        split_block(blk, logits, N, V, Vl, lo, valid);
        o->logits_max(&ctx, bm, blk, N, Vl, valid);
        for (int n = 0; n < N; n++) {
            m[n] = bm[n] > m[n] ? bm[n] : m[n];
            if (valid == 0) empty_ok &= bm[n] == -INFINITY;
        }
    }
    for (int r = 0; r < t; r++) {  // pass 2: sums and target logits, from the global max
        int lo = r * Vl, valid = split_valid(V, t, r);
        split_block(blk, logits, N, V, Vl, lo, valid);
        o->logits_sumexp(&ctx, bse, btl, blk, m, tgt, lo, N, Vl, valid);
        for (int n = 0; n < N; n++) {
            se[n] += bse[n], tl[n] += btl[n];
            if (valid == 0) empty_ok &= bse[n] == 0.0f && btl[n] == 0.0f;
        }
    }
    o->crossentropy_loss(&ctx, loss, m, se, tl, N);
    for (int r = 0; r < t; r++) {  // the gradient, block by block
        int lo = r * Vl, valid = split_valid(V, t, r);
        split_block(blk, logits, N, V, Vl, lo, valid);
        o->crossentropy_backward_split(&ctx, dblk, blk, m, se, tgt, lo, dloss, N, Vl, valid);
        for (int n = 0; n < N; n++)
            for (int v = 0; v < Vl; v++) {
                float d = dblk[(size_t)n * Vl + v];
                if (v < valid) dl[(size_t)n * V + lo + v] = d;
                else pad_nonzero += d != 0.0f;  // must be exactly 0, not just small
            }
        o->crossentropy_backward_split(&ctx, blk, blk, m, se, tgt, lo, dloss, N, Vl, valid);
        inplace_same &= memcmp(blk, dblk, sizeof(float) * N * Vl) == 0;
    }
    char name[96];
#define NAME(what) (snprintf(name, sizeof name, "split.ce.%s[V=%d,t=%d]", what, V, t), name)
    // The max of maxima is the max: exact. m is also what crossentropy_forward subtracts.
    check_bits(ts, NAME("max_of_block_maxima"), m, mref, N);
    // The loss differs from crossentropy_forward's only in the order in which
    // sumexp's <= V fp32 terms (each in (0, 1], one of them 1) are added: a few ulp
    // of sumexp, so of log(sumexp), and the loss is ~ log V: 1e-6 relative.
    check_rel(ts, NAME("loss"), loss, loss_ref, N, 1e-6);
    // Gradient: d = exp(x - shift) * dloss with shift = m + log(sumexp). The same
    // reordered sumexp moves log(sumexp) by <= V ulp-ish (~1e-6 at worst, ~1e-8
    // typically) and shift's rounding adds one ulp of |shift| < 16 (9.5e-7); with
    // p = exp(x - shift) <= 1, |dd| ~ p * dloss * dshift <= 2e-6 * dloss: the
    // tolerance, absolute (3.3e-7 here; padding and the target's -dloss are exact).
    double maxerr = 0, tol = 2e-6 * dloss;
    for (size_t i = 0; i < (size_t)N * V; i++)
        maxerr = max_err(maxerr, fabs((double)dl[i] - dl_ref[i]));
    test_report(ts, maxerr <= tol, NAME("backward"), "max abs err %.3e (tol %.1e, n %d)", maxerr,
                tol, N * V);
    test_report(ts, pad_nonzero == 0, NAME("backward.padding_zero"), "%d padding values not 0",
                pad_nonzero);
    test_report(ts, inplace_same, NAME("backward.in_place"), "%s",
                inplace_same ? "same bits as out of place" : "DIFFERENT");
    if (split_valid(V, t, t - 1) == 0)
        test_report(ts, empty_ok, NAME("all_padding_block"),
                    "rowmax -inf, sumexp 0, tlogit 0 for the block without ids");
#undef NAME
    free(logits); free(loss_ref); free(dl_ref); free(tgt); free(blk); free(dblk); free(dl);
    free(m); free(se); free(tl); free(bm); free(bse); free(btl); free(mref); free(loss);
}

static void test_split_crossentropy(TestState *ts) {
    for (int t = 1; t <= 3; t++) split_ce_case(ts, 6, 19, t);  // 19 = 10+9, 7+7+5
    split_ce_case(ts, 6, 5, 4);  // blocks of 2: ids {0,1} {2,3} {4} {} (all padding)
}

// ---------------------------------------------------------------- optimizer
static void test_adamw(TestState *ts) {
    size_t n = 37;
    float *p = randn(n, 1), *g = randn(n, 1), *m = zeros(n), *v = zeros(n);
    double P[37], M[37] = {0}, Vv[37] = {0};
    for (size_t i = 0; i < n; i++) P[i] = p[i];
    float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
    for (int t = 1; t <= 3; t++) {
        o->adamw_update(&ctx, p, g, m, v, n, lr, b1, b2, eps, wd, gs, t);
        for (size_t i = 0; i < n; i++) {  // the textbook formula, in double
            double gi = (double)g[i] * gs;
            P[i] *= 1 - (double)lr * wd;
            M[i] = b1 * M[i] + (1 - b1) * gi;
            Vv[i] = b2 * Vv[i] + (1 - b2) * gi * gi;
            double mh = M[i] / (1 - pow(b1, t)), vh = Vv[i] / (1 - pow(b2, t));
            P[i] -= lr * mh / (sqrt(vh) + eps);
        }
    }
    float ref[37];
    for (size_t i = 0; i < n; i++) ref[i] = (float)P[i];
    check_rel(ts, "adamw.update", p, ref, n, 1e-6);
    double ss = o->sum_squares(&ctx, g, n), want = 0;
    for (size_t i = 0; i < n; i++) want += (double)g[i] * g[i];
    test_report(ts, fabs(ss - want) <= 1e-12 * want, "sum_squares", "%.17g vs %.17g", ss, want);
    free(p); free(g); free(m); free(v);
}

int main(void) {
    TestState ts = {0};
    ctx_init(&ctx, DEV_CPU, 1, 0);
    o = ctx.ops;
    rng_seed(&rng, 1234);
    test_matmul(&ts);
    test_embedding(&ts);
    test_layernorm(&ts);
    test_attention(&ts);
    test_gelu(&ts);
    test_crossentropy(&ts);
    test_split_embedding(&ts);
    test_split_crossentropy(&ts);
    test_adamw(&ts);
    ctx_destroy(&ctx);
    return test_finish(&ts);
}
