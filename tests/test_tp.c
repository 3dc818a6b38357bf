// test_tp.c — stage 04 against one process: the layers, then the whole model.
//
//   test_tp --np 4 --tp 2 [--sp]          a 2 (dp) x 2 (tp) mesh
//
// Every rank also builds the single-process model (it is tiny) and compares. The
// model: L=2 C=48 NH=12 T=12 V=251, so heads split over t = 1, 2, 3, 4 and 251
// is divisible by none of 2, 3, 4 (the vocabulary is padded); B=2 rows per
// data-parallel rank, N = 24 tokens, which every t divides (SP needs it).
//
// Check names end in .tT[.sp][.dpD]:
// tp.init        each rank's initial weights are its pieces of the single-process
//                model's, bitwise, and gathering them gives the whole model back.
// tp.column      column-parallel linear (C -> 4C, the c_fc shape) forward and
//                backward against the serial matmul: out, dinp, dW, db.
// tp.row         row-parallel linear (4C -> C, the c_proj shape), the same.
// tp.attention   c_attn's pieces and attention on this rank's heads equal the
//                serial attention's output for those heads (q, k, v each split).
// tp.ce          vocabulary-parallel cross-entropy: losses and dlogits (t > 1).
// tp.logits      the model's logits and loss against one process (1e-5).
// tp.grads       every gathered gradient after one backward (1e-4).
// tp.bytes       bytes each rank sent in that forward + backward = the formula.
// tp.memory      the activation ledger = the stage-01 calculator (--tp, --sp).
// tp.train       the weights after 10 AdamW steps with clipping (1e-4).
// tp.replicated  LayerNorms, wpe and the c_proj biases bitwise equal on every TP rank.
//
// Tolerances: fp32 throughout. The split layers sum the same products in another
// order (partial matmuls added by the all-reduce; BLAS blocks differently for
// other shapes), so results differ from one process by rounding: ~1e-7 relative
// per op, growing through the layers; 1e-5 on logits and 1e-4 on gradients and
// trained weights are the tolerances the core meets against PyTorch.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "flags.h"
#include "harness.h"
#include "verdict.h"
#include "memory_model.h"
#include "opaque_device.h"
#include "ops.h"
#include "rng.h"
#include "tp.h"

#define SEED 7
#define STEPS 10

static GPTConfig test_config(void) { return (GPTConfig){2, 48, 12, 12, 251}; }

static void fill(float *x, size_t n, uint64_t seed, float scale) {
    Rng r;
    rng_seed(&r, seed);
    rng_fill_normal(&r, x, n, 0.0f, scale);
}
static double max_abs_diff(const float *a, const float *b, size_t n, size_t *at) {
    double worst = 0;
    *at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (worse(d, worst)) worst = d, *at = i;  // a NaN is the worst, and stays
    }
    return worst;
}
// Where element `at` of the whole model's flat layout lies: "h.1.attn.c_attn.weight[3,7]".
static const char *where(const GPT *whole, size_t at, char *buf, size_t n) {
    const ParamSlice *s = gpt_slice_at(whole, at);
    if (!s) snprintf(buf, n, "element %zu", at);
    else snprintf(buf, n, "%s[%zu,%zu]", s->name, (at - s->offset) / (size_t)s->cols,
                  (at - s->offset) % (size_t)s->cols);
    return buf;
}

// ---------------------------------------------------------------- the layers

typedef struct {
    Comm *c;
    TensorParallel tp;
    Ctx ctx;
    GPT g;
    int t, r, sp, N, B, T;
} Fixture;

static void fixture_init(Fixture *f, Comm *c, Group *tpg, int sp, int B) {
    memset(f, 0, sizeof *f);
    GPTConfig cfg = test_config();
    f->c = c;
    f->t = tpg->size;
    f->r = tpg->rank;
    f->sp = sp;
    f->B = B;
    f->T = cfg.seq_len;
    f->N = B * cfg.seq_len;
    ctx_init(&f->ctx, DEV_CPU, 1, 0);
    f->tp = (TensorParallel){.comm = c, .group = tpg, .algo = ALGO_RING, .sp = sp};
    gpt_init_tp(&f->g, &f->ctx, &cfg, SEED, f->t, f->r);
    tp_install(&f->g, &f->tp);
    f->g.tp.arg = &f->tp;  // the layer tests call the parallel layers even at t = 1
    gpt_alloc_grads(&f->g);
    gpt_alloc_acts(&f->g, B, cfg.seq_len);
}
static void fixture_free(Fixture *f) {
    gpt_free(&f->g);
    ctx_destroy(&f->ctx);
}

// Rows of the residual stream this rank holds: all N, or its N/t with SP.
static const float *stream(const Fixture *f, const float *whole, int C) {
    return f->sp ? whole + (size_t)f->r * (f->N / f->t) * C : whole;
}
static int stream_rows(const Fixture *f) { return f->sp ? f->N / f->t : f->N; }

// Collectives only: the test's own reports travel point to point.
static unsigned long long total_sent(const Comm *c) {
    unsigned long long s = 0;
    const CommCounter *k = comm_counters(c);
    for (int i = COLL_P2P + 1; i < COLL_KINDS; i++) s += k[i].bytes_sent;
    return s;
}

// One linear layer both ways. column = 1: W (OC, C) split by rows; 0: W (OC, C)
// split by columns. Shapes are the whole layer's: (C -> OC).
// Also the bytes this rank sent, layer by layer, in units of (t-1)/t of the
// N x (stream width) activation (ring collectives: an all-reduce is 2 units, an
// all-gather or a reduce-scatter 1): column-parallel 2 (f's all-reduce of dinp),
// with SP 3 (the input gathered, gathered again in backward, dinp reduce-scattered);
// row-parallel 2 either way (g's all-reduce, or with SP its reduce-scatter and the
// all-gather of dout). A layer that gets the values right the long way (an
// all-reduce where SP wants a reduce-scatter) sends more.
static Verdict check_linear(Fixture *f, int column, int C, int OC) {
    const Ops *o = f->ctx.ops;
    int N = f->N, t = f->t, r = f->r, Cl = column ? C : C / t, OCl = column ? OC / t : OC;
    float *x = xcalloc(1, sizeof(float) * N * C), *w = xcalloc(1, sizeof(float) * OC * C);
    float *b = xcalloc(1, sizeof(float) * OC), *dout = xcalloc(1, sizeof(float) * N * OC);
    fill(x, (size_t)N * C, 11, 1.0f); fill(w, (size_t)OC * C, 12, 0.1f);
    fill(b, OC, 13, 0.1f); fill(dout, (size_t)N * OC, 14, 1.0f);
    // The serial layer.
    float *out = xcalloc(1, sizeof(float) * N * OC), *dx = xcalloc(1, sizeof(float) * N * C);
    float *dw = xcalloc(1, sizeof(float) * OC * C), *db = xcalloc(1, sizeof(float) * OC);
    // The weight gradients hold an earlier micro-batch's: the layers add to them.
    fill(dw, (size_t)OC * C, 15, 1.0f); fill(db, OC, 16, 1.0f);
    float *dw0 = xcalloc(1, sizeof(float) * OC * C), *db0 = xcalloc(1, sizeof(float) * OC);
    memcpy(dw0, dw, sizeof(float) * OC * C); memcpy(db0, db, sizeof(float) * OC);
    o->matmul_forward(&f->ctx, out, x, w, b, N, C, OC);
    o->matmul_backward(&f->ctx, dx, dw, db, dout, x, w, N, C, OC);
    // This rank's pieces.
    float *wp = xcalloc(1, sizeof(float) * OCl * Cl), *bp = xcalloc(1, sizeof(float) * OCl);
    float *xin = xcalloc(1, sizeof(float) * N * Cl), *dop = xcalloc(1, sizeof(float) * N * OCl);
    for (int i = 0; i < OCl; i++)
        for (int j = 0; j < Cl; j++)
            wp[(size_t)i * Cl + j] = column ? w[(size_t)(r * OCl + i) * C + j]
                                            : w[(size_t)i * C + r * Cl + j];
    for (int i = 0; i < OCl; i++) bp[i] = column ? b[r * OCl + i] : b[i];
    for (int n = 0; n < N; n++) {
        for (int j = 0; j < Cl; j++) xin[(size_t)n * Cl + j] = x[(size_t)n * C + (column ? j : r * Cl + j)];
        for (int i = 0; i < OCl; i++)
            dop[(size_t)n * OCl + i] = dout[(size_t)n * OC + (column ? r * OCl + i : i)];
    }
    int rows = stream_rows(f);
    // Column: the input and dinp are stream rows, out every row. Row: the input
    // and dinp every row (its features), out and dout stream rows.
    const float *in_here = column ? stream(f, xin, C) : xin;
    const float *dout_here = column ? dop : stream(f, dop, OC);
    float *got = xcalloc(1, sizeof(float) * N * OCl), *gdx = xcalloc(1, sizeof(float) * N * Cl);
    float *gdw = xcalloc(1, sizeof(float) * OCl * Cl), *gdb = xcalloc(1, sizeof(float) * OCl);
    for (int i = 0; i < OCl; i++) {  // this rank's pieces of the earlier gradients
        gdb[i] = db0[column ? r * OCl + i : i];
        for (int j = 0; j < Cl; j++)
            gdw[(size_t)i * Cl + j] = column ? dw0[(size_t)(r * OCl + i) * C + j]
                                             : dw0[(size_t)i * C + r * Cl + j];
    }
    // The input gradient is written, not added to: what the buffer held must not show
    // (NaN), nor what the column layer's full-width gradient buffer (SP) held.
    memset(gdx, 0xff, sizeof(float) * N * Cl);
    if (column && f->sp && f->g.sp_dfull) memset(f->g.sp_dfull, 0xff, sizeof(float) * N * C);
    comm_reset_counters(f->c);
    if (column) {
        tp_column_forward(&f->g, got, in_here, wp, bp, N, C, OCl);
        // In the model other layers' forwards reuse the gathered input's buffer before
        // this layer's backward: so must the backward gather its input again (with SP).
        if (f->sp && f->g.sp_full) memset(f->g.sp_full, 0xff, sizeof(float) * N * C);  // NaN
        tp_column_backward(&f->g, gdx, gdw, gdb, dout_here, in_here, wp, N, C, OCl);
    } else {
        tp_row_forward(&f->g, got, in_here, wp, bp, N, Cl, OC);
        tp_row_backward(&f->g, gdx, gdw, gdb, dout_here, in_here, wp, N, Cl, OC);
    }
    double sent = (double)total_sent(f->c), unit = 4.0 * (t - 1) / t * N * (column ? C : OC);
    int units = column && f->sp ? 3 : 2;
    Verdict v = {0};
    // The serial results, cut the same way.
    float *want_out = xcalloc(1, sizeof(float) * N * OCl), *want_dx = xcalloc(1, sizeof(float) * N * Cl);
    float *want_dw = xcalloc(1, sizeof(float) * OCl * Cl), *want_db = xcalloc(1, sizeof(float) * OCl);
    int out_rows = column ? N : rows, dx_rows = column ? rows : N;
    int out_row0 = column ? 0 : (f->sp ? r * rows : 0), dx_row0 = column ? (f->sp ? r * rows : 0) : 0;
    for (int n = 0; n < out_rows; n++)
        for (int i = 0; i < OCl; i++)
            want_out[(size_t)n * OCl + i] = out[(size_t)(out_row0 + n) * OC + (column ? r * OCl + i : i)];
    for (int n = 0; n < dx_rows; n++)
        for (int j = 0; j < Cl; j++)
            want_dx[(size_t)n * Cl + j] = dx[(size_t)(dx_row0 + n) * C + (column ? j : r * Cl + j)];
    for (int i = 0; i < OCl; i++) {
        want_db[i] = db[column ? r * OCl + i : i];
        for (int j = 0; j < Cl; j++)
            want_dw[(size_t)i * Cl + j] = column ? dw[(size_t)(r * OCl + i) * C + j]
                                                 : dw[(size_t)i * C + r * Cl + j];
    }
    struct { const char *what; const float *a, *b; size_t n; } parts[] = {
        {"out", got, want_out, (size_t)out_rows * OCl}, {"dinp", gdx, want_dx, (size_t)dx_rows * Cl},
        {"dW", gdw, want_dw, (size_t)OCl * Cl},         {"db", gdb, want_db, OCl},
    };
    snprintf(v.detail, sizeof v.detail, "all within rounding");
    for (int k = 0; k < 4; k++) {
        double e = rel_error(parts[k].a, parts[k].b, parts[k].n);
        if (!(e <= v.err)) {
            v.err = e;
            snprintf(v.detail, sizeof v.detail, "%s rel_err %.2e", parts[k].what, e);
        }
    }
    if (sent != units * unit) {
        v.bad = 1;
        snprintf(v.detail, sizeof v.detail, "values %s; but sent %.0f B in forward + backward, "
                 "want %d x %.0f B (%s%s: %d units of (t-1)/t x N x %d floats; %+.2f units)",
                 v.err <= 1e-5 ? "right" : "wrong", sent, units, unit,
                 column ? "column-parallel" : "row-parallel", f->sp ? " with SP" : "", units,
                 column ? C : OC, unit > 0 ? sent / unit - units : sent);
    }
    free(x); free(w); free(b); free(dout); free(out); free(dx); free(dw); free(db); free(wp);
    free(dw0); free(db0);
    free(bp); free(xin); free(dop); free(got); free(gdx); free(gdw); free(gdb); free(want_out);
    free(want_dx); free(want_dw); free(want_db);
    return v;
}

// c_attn's pieces (q, k, v: this rank's heads of each) through attention give
// this rank's heads of the serial attention output: the layout is right.
static Verdict check_attention(Fixture *f) {
    const Ops *o = f->ctx.ops;
    GPTConfig cfg = test_config();
    int N = f->N, C = cfg.n_embd, NH = cfg.n_head, t = f->t, Cl = C / t;
    const ParamSlice *s = gpt_find_slice(&f->g, "h.0.attn.c_attn.weight");
    float *whole = xcalloc(1, sizeof(float) * 3 * C * C), *piece = xcalloc(1, sizeof(float) * s->numel);
    fill(whole, (size_t)3 * C * C, 21, 0.3f);
    gpt_slice_copy(s, f->r, whole, piece, 1);
    float *x = xcalloc(1, sizeof(float) * N * C);
    fill(x, (size_t)N * C, 22, 1.0f);
    float *qkv = xcalloc(1, sizeof(float) * N * 3 * C), *y = xcalloc(1, sizeof(float) * N * C);
    float *att = xcalloc(1, sizeof(float) * f->B * NH * f->T * f->T);
    o->matmul_forward(&f->ctx, qkv, x, whole, NULL, N, C, 3 * C);
    o->attention_forward(&f->ctx, y, att, qkv, f->B, f->T, C, NH, DT_F32);
    float *lq = xcalloc(1, sizeof(float) * N * 3 * Cl), *ly = xcalloc(1, sizeof(float) * N * Cl);
    o->matmul_forward(&f->ctx, lq, x, piece, NULL, N, C, 3 * Cl);
    o->attention_forward(&f->ctx, ly, att, lq, f->B, f->T, Cl, NH / t, DT_F32);
    float *want = xcalloc(1, sizeof(float) * N * Cl);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < Cl; j++) want[(size_t)n * Cl + j] = y[(size_t)n * C + f->r * Cl + j];
    Verdict v = {.err = rel_error(ly, want, (size_t)N * Cl)};
    snprintf(v.detail, sizeof v.detail, "heads %d..%d rel_err %.2e", f->r * NH / t,
             (f->r + 1) * NH / t - 1, v.err);
    free(whole); free(piece); free(x); free(qkv); free(y); free(att); free(lq); free(ly); free(want);
    return v;
}

// The vocabulary-parallel cross-entropy against crossentropy_forward/backward on
// the whole logits; the padding columns hold garbage that must not matter.
// The learner's loss on this rank's block of `logits` (N, V whole): losses (N) and
// dlogits (N, Vl) into the host buffers given. opaque: on the opaque device
// (opaque_device.h), where device memory read or written on the host gives wrong
// values, as it would crash a GPU run.
static void run_tp_ce(Fixture *f, const float *logits, const int *targets, int opaque,
                      float *losses, float *dlogits) {
    GPT *g = &f->g;
    int N = f->N, V = g->cfg.vocab, lo, valid;
    int Vl = tp_vocab_range(g, &lo, &valid);
    size_t n = (size_t)N * Vl;
    float *mine = xcalloc(1, sizeof(float) * n), *dev = xcalloc(1, sizeof(float) * (n + N));
    for (int r = 0; r < N; r++)
        for (int j = 0; j < Vl; j++)
            mine[(size_t)r * Vl + j] = j < valid ? logits[(size_t)r * V + lo + j] : 1e3f;
    OpaqueDevice od;
    if (opaque) opaque_begin(&od, &f->ctx, g->acts.targets, (size_t)N, V);
    const Ops *o = f->ctx.ops;
    o->to_device(&f->ctx, g->acts.targets, targets, sizeof(int) * N);
    o->to_device(&f->ctx, dev, mine, sizeof(float) * n);
    tp_crossentropy_forward(g, dev + n, dev, N);
    tp_crossentropy_backward(g, dev, dev, 1.0f / N, N);  // in place, as the model calls it
    o->to_host(&f->ctx, dlogits, dev, sizeof(float) * n);
    o->to_host(&f->ctx, losses, dev + n, sizeof(float) * N);
    if (opaque) opaque_end(&od, &f->ctx);
    free(mine); free(dev);
}

// The learner's losses and dlogits against the serial ones: the larger error, and
// the padding's gradients that are not 0 in *pad_bad.
static double ce_error(Fixture *f, const float *glosses, const float *gd, const float *losses,
                       const float *dl, int *pad_bad) {
    int N = f->N, V = f->g.cfg.vocab, lo, valid;
    int Vl = tp_vocab_range(&f->g, &lo, &valid);
    double ed = 0;
    *pad_bad = 0;
    for (int n = 0; n < N; n++)
        for (int j = 0; j < Vl; j++) {
            float got = gd[(size_t)n * Vl + j];
            if (j >= valid) *pad_bad += got != 0.0f;
            else ed = max_err(ed, fabs(got - dl[(size_t)n * V + lo + j]) * N);  // relative to 1/N
        }
    return max_err(rel_error(glosses, losses, N), ed);
}

static Verdict check_ce(Fixture *f) {
    const Ops *o = f->ctx.ops;
    GPT *g = &f->g;
    int N = f->N, V = g->cfg.vocab, lo, valid;
    int Vl = tp_vocab_range(g, &lo, &valid);
    float *logits = xcalloc(1, sizeof(float) * N * V), *dl = xcalloc(1, sizeof(float) * N * V);
    float *losses = xcalloc(1, sizeof(float) * N);
    fill(logits, (size_t)N * V, 31, 3.0f);
    // A confident row: one logit of 1000 (exp(89) already overflows fp32), in rank
    // n mod t's block of the vocabulary for row n: a shift by anything below the
    // row's max (one rank's, the mean of the ranks') overflows. And a hot row: row 1
    // raised by 200 everywhere, so every rank's maximum is large and a shift above
    // the max (the sum of the ranks' maxima) underflows every exponential to 0.
    // Only the row's max over every rank's block keeps the sums finite and nonzero.
    // And a cold row: row 2 lowered by 150 everywhere, every logit below zero: a max
    // that starts from 0 instead of from the logits shifts by 0, and exp(-150)
    // underflows to 0 in every column (a loss of inf).
    int block = gpt_vocab_block(&g->cfg, f->t);
    for (int n = 0; n < N; n++) {
        int col = (n % f->t) * block + 1 + n % 3;
        if (col < V && n != 2) logits[(size_t)n * V + col] = 1000.0f;
    }
    for (int j = 0; j < V; j++) logits[(size_t)1 * V + j] += 200.0f;
    for (int j = 0; j < V && N > 2; j++) logits[(size_t)2 * V + j] -= 150.0f;
    int *targets = xcalloc(1, sizeof(int) * N);
    Rng rng;
    rng_seed(&rng, 32);
    for (int n = 0; n < N; n++) targets[n] = (int)rng_below(&rng, (uint32_t)V);
    targets[0] = V - 1;  // the last id: in the padded block
    o->crossentropy_forward(&f->ctx, losses, logits, targets, N, V);
    o->crossentropy_backward(&f->ctx, dl, logits, targets, 1.0f / N, N, V);
    float *gd = xcalloc(1, sizeof(float) * N * Vl), *glosses = xcalloc(1, sizeof(float) * N);
    Verdict v = {0};
    int pad_bad, opaque_pad_bad;
    run_tp_ce(f, logits, targets, 0, glosses, gd);
    v.err = ce_error(f, glosses, gd, losses, dl, &pad_bad);
    run_tp_ce(f, logits, targets, 1, glosses, gd);
    double opaque_err = ce_error(f, glosses, gd, losses, dl, &opaque_pad_bad);
    v.bad = pad_bad + opaque_pad_bad;
    if (v.err <= 1e-6 && !pad_bad && (!(opaque_err <= 1e-6) || opaque_pad_bad))  // report()'s 1e-6
        snprintf(v.detail, sizeof v.detail, "right where the host may read device memory, wrong "
                 "(err %.1e) where it cannot (tests/opaque_device.h): a device buffer read or "
                 "written on the host, not through to_host/to_device?", opaque_err);
    else
        snprintf(v.detail, sizeof v.detail, "losses and dlogits x N max err %.2e, %d padding "
                 "gradients not 0 (ids %d..%d, %d real)", v.err, pad_bad, lo, lo + Vl - 1, valid);
    v.err = max_err(v.err, opaque_err);
    free(logits); free(dl); free(losses); free(targets); free(gd); free(glosses);
    return v;
}

// ---------------------------------------------------------------- the model

typedef struct { int *tokens, *targets; } Batch;

// Step s's global batch of dp*B rows; data-parallel rank d trains on rows d*B...
static Batch make_batch(int rows, int T, int V, int step) {
    Batch b = {xcalloc(1, sizeof(int) * rows * T), xcalloc(1, sizeof(int) * rows * T)};
    Rng r;
    rng_seed(&r, 1000 + (uint64_t)step);
    for (int i = 0; i < rows * T; i++) {
        b.tokens[i] = (int)rng_below(&r, (uint32_t)V);
        b.targets[i] = (int)rng_below(&r, (uint32_t)V);
    }
    b.tokens[0] = V - 1;  // the padded block's last real id, on every step
    return b;
}

// Bytes a rank sends in one forward + backward (ring collectives, t | N and t | C):
// an all-reduce of n floats sends 2(t-1)/t n floats, an all-gather or a
// reduce-scatter (t-1)/t n. Without SP: 4 all-reduces of N*C per layer, one for
// the embedding (g) and one for the LM head's input gradient (f). With SP each
// becomes a reduce-scatter and an all-gather, plus the all-gathers that
// recompute a column-parallel layer's input in backward (2 per layer, 1 in the
// head). The cross-entropy: the N row maxima of each rank gathered, and one
// all-reduce of 2N (sums of exponentials, target logits).
static double bytes_formula(int L, int N, int C, int t, int sp) {
    double f = (double)(t - 1) / t, NC = (double)N * C;
    double halves = sp ? (10.0 * L + 5) * NC : 2.0 * (4.0 * L + 2) * NC;  // in units of f*n
    return 4.0 * f * (halves + 2.0 * 2 * N + (double)t * N);
}

static void run_model_checks(TestState *ts, Comm *c, Group *tpg, Group *dpg, int sp, int B,
                             const char *tag) {
    GPTConfig cfg = test_config();
    int t = tpg->size, dp = dpg->size, d = dpg->rank, T = cfg.seq_len, V = cfg.vocab;
    int N = B * T, C = cfg.n_embd, L = cfg.n_layer;
    char name[96];
    // The single process: dp*B rows.
    Ctx rctx;
    ctx_init(&rctx, DEV_CPU, 1, 0);
    GPT ref;
    gpt_init(&ref, &rctx, &cfg, SEED);
    gpt_alloc_grads(&ref);
    gpt_alloc_acts(&ref, dp * B, T);
    AdamWConfig oc = adamw_default_config();
    oc.lr = 1e-3f;
    AdamW ropt;
    adamw_init(&ropt, &ref, &oc, 0, ref.n_params);
    // The mesh.
    Fixture f;
    fixture_init(&f, c, tpg, sp, B);
    GPT *g = &f.g;
    f.g.tp.ops = t > 1 ? f.g.tp.ops : NULL;  // (fixture_init kept tp_install's choice)
    DDP ddp;
    ddp_init(&ddp, c, dpg, ALGO_RING);
    AdamW opt;
    adamw_init(&opt, g, &oc, 0, g->n_params);
    size_t P = gpt_num_params(&cfg);
    float *whole = xcalloc(1, sizeof(float) * P), *want = xcalloc(1, sizeof(float) * P);

    // tp.memory: the ledger against the calculator.
    ModelSpec m = {.arch = ARCH_GPT, .layers = L, .hidden = C, .heads = cfg.n_head,
                   .kv_heads = cfg.n_head, .ffn = 4 * C, .vocab = V, .seq = T};
    double predicted = mm_course_act_bytes(&m, B, T, t, sp);
    Verdict v = {.err = fabs((double)f.ctx.ledger.peak[MEM_ACTIVATIONS] - predicted)};
    snprintf(v.detail, sizeof v.detail, "ledger %zu B, calculator %.0f B",
             f.ctx.ledger.peak[MEM_ACTIVATIONS], predicted);
    snprintf(name, sizeof name, "tp.memory.%s", tag);
    report(ts, c, name, v, 0, "activation bytes per rank = mm_course_act_bytes(--tp, --sp)");

    for (int step = 0; step < STEPS; step++) {
        Batch b = make_batch(dp * B, T, V, step);
        gpt_forward(&ref, b.tokens, b.targets, dp * B, T);
        gpt_zero_grad(g);
        comm_reset_counters(c);
        float loss = gpt_forward(g, b.tokens + (size_t)d * N, b.targets + (size_t)d * N, B, T);
        if (step == 0) {
            // tp.logits: this rank's vocabulary block of its rows, and the loss of its rows.
            int lo, valid, Vl = tp_vocab_range(g, &lo, &valid);
            double worst = 0, rl = 0;
            for (int n = 0; n < N; n++) {
                rl += ref.acts.losses[(size_t)d * N + n];
                for (int j = 0; j < valid; j++)
                    worst = max_err(worst, fabs(g->acts.logits[(size_t)n * Vl + j] -
                                             ref.acts.logits[((size_t)d * N + n) * V + lo + j]));
            }
            rl /= N;
            v = (Verdict){.err = max_err(worst, fabs(loss - rl))};
            snprintf(v.detail, sizeof v.detail, "logits max err %.2e, loss %.6f vs %.6f", worst,
                     loss, rl);
            snprintf(name, sizeof name, "tp.logits.%s", tag);
            report(ts, c, name, v, 1e-5, "logits and loss within 1e-5 of one process");
        }
        gpt_zero_grad(&ref);
        gpt_backward(&ref, 1.0f);  // (its dlogits overwrite its logits)
        gpt_backward(g, 1.0f);
        if (step == 0) {
            double sent = (double)total_sent(c), want_b = bytes_formula(L, N, C, t, sp);
            v = (Verdict){.err = fabs(sent - want_b)};
            snprintf(v.detail, sizeof v.detail, "sent %.0f B, formula %.0f B", sent, want_b);
            snprintf(name, sizeof name, "tp.bytes.%s", tag);
            report(ts, c, name, v, 0, "bytes sent in forward + backward = the formula");
        }
        tp_reduce_norm_grads(g);
        if (dp > 1) ddp_sync_grads(&ddp, g);
        if (step == 0) {
            tp_gather(g, 1, whole);
            rctx.ops->to_host(&rctx, want, ref.grads, P * sizeof(float));
            size_t at;
            v = (Verdict){.err = max_abs_diff(whole, want, P, &at)};
            char w[96];
            snprintf(v.detail, sizeof v.detail, "max |dgrad| %.2e at %s (got %.6g, want %.6g)",
                     v.err, where(&ref, at, w, sizeof w), whole[at], want[at]);
            snprintf(name, sizeof name, "tp.grads.%s", tag);
            report(ts, c, name, v, 1e-4, "every gathered gradient within 1e-4 of one process");
        }
        adamw_step(&ropt, &ref, grad_global_norm(&ref));
        adamw_step(&opt, g, tp_grad_norm(g));
        free(b.tokens);
        free(b.targets);
    }
    // tp.train: the whole model after STEPS steps.
    tp_gather(g, 0, whole);
    size_t at;
    v = (Verdict){.err = max_abs_diff(whole, ref.params, P, &at)};
    char w[96];
    snprintf(v.detail, sizeof v.detail, "max |dw| %.2e at %s", v.err, where(&ref, at, w, sizeof w));
    snprintf(name, sizeof name, "tp.train.%s", tag);
    report(ts, c, name, v, 1e-4, "weights after 10 AdamW steps within 1e-4 of one process");

    // tp.replicated: every replicated tensor the same bits on every TP rank: the
    // members send theirs to member 0, which compares.
    size_t nrep = 0;
    for (int i = 0; i < g->n_slices; i++) nrep += g->slices[i].split == SPLIT_NONE ? g->slices[i].numel : 0;
    float *rep = xcalloc(1, sizeof(float) * nrep), *other = xcalloc(1, sizeof(float) * nrep);
    size_t k = 0;
    for (int i = 0; i < g->n_slices; i++)
        if (g->slices[i].split == SPLIT_NONE) {
            memcpy(rep + k, g->params + g->slices[i].offset, g->slices[i].numel * sizeof(float));
            k += g->slices[i].numel;
        }
    v = (Verdict){0};
    snprintf(v.detail, sizeof v.detail, "%zu replicated weights identical", nrep);
    if (tpg->rank != 0) {
        comm_send(c, tpg, 0, rep, nrep * sizeof(float));
    } else {
        for (int q = 1; q < t; q++) {
            comm_recv(c, tpg, q, other, nrep * sizeof(float));
            for (size_t i = 0; i < nrep; i++) v.bad += memcmp(&rep[i], &other[i], sizeof(float)) != 0;
        }
        if (v.bad) snprintf(v.detail, sizeof v.detail, "%d replicated weights differ between TP "
                            "ranks", v.bad);
    }
    snprintf(name, sizeof name, "tp.replicated.%s", tag);
    report(ts, c, name, v, 0, "replicated weights bitwise equal on every TP rank after training");
    free(rep); free(other); free(whole); free(want);
    adamw_free(&opt, g);
    adamw_free(&ropt, &ref);
    fixture_free(&f);
    gpt_free(&ref);
    ctx_destroy(&rctx);
}

int main(int argc, char **argv) {
    int np = 1, tp = 1, sp = 0, B = 2;
    double timeout = 30;
    Flag flags[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch (built-in launcher)"),
        F_INT("--tp", &tp, 1, COMM_MAX_RANKS, "tensor-parallel ranks (must divide --np)"),
        F_BOOL("--sp", &sp, "sequence parallelism"),
        F_INT("--batch", &B, 1, 64, "rows per data-parallel rank"),
        F_DOUBLE("--timeout", &timeout, 0.1, 3600, "seconds any wait may take"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "test_tp [flags]",
                "Checks stage 04's tensor parallelism against one process.");
    if (np % tp) flags_fail("--tp %d does not divide --np %d", tp, np);
    GPTConfig cfg = test_config();
    char err[200];
    if (gpt_tp_error(&cfg, tp, sp, B, cfg.seq_len, err, sizeof err)) flags_fail("%s", err);
    CommConfig cc = {.np = np, .timeout_s = timeout};
    Comm *c = comm_launch(&cc);
    Group dpg, tpg, ppg;
    comm_mesh(c, comm_size(c) / tp, tp, 1, &dpg, &tpg, &ppg);
    TestState ts = {0};
    char tag[48], name[96];
    snprintf(tag, sizeof tag, "t%d%s", tp, sp ? ".sp" : "");
    if (dpg.size > 1) snprintf(tag + strlen(tag), sizeof tag - strlen(tag), ".dp%d", dpg.size);
    const char *checks[] = {"init", "column", "row", "attention", "ce", "memory", "logits",
                            "bytes", "grads", "train", "replicated"};
    if (comm_rank(c) == 0) {
        for (size_t k = 0; k < sizeof checks / sizeof *checks; k++)
            if (strcmp(checks[k], "ce") || tp > 1) printf("PLAN tp.%s.%s\n", checks[k], tag);
        fflush(stdout);
    }

    // tp.init: the pieces of the single-process model, and back.
    Fixture f;
    fixture_init(&f, c, &tpg, sp, B);
    {
        Ctx rctx;
        ctx_init(&rctx, DEV_CPU, 1, 0);
        GPT ref;
        gpt_init(&ref, &rctx, &cfg, SEED);
        size_t P = gpt_num_params(&cfg);
        float *whole = xcalloc(1, sizeof(float) * P), *piece = xcalloc(1, sizeof(float) * P);
        Verdict v = {0};
        for (int i = 0; i < f.g.n_slices; i++) {
            const ParamSlice *s = &f.g.slices[i];
            gpt_slice_copy(s, f.r, ref.params + s->goffset, piece, 1);
            v.bad += memcmp(piece, f.g.params + s->offset, s->numel * sizeof(float)) != 0;
        }
        tp_gather(&f.g, 0, whole);
        int back = memcmp(whole, ref.params, P * sizeof(float)) != 0;
        v.bad += back;
        snprintf(v.detail, sizeof v.detail, "%d of %d tensors differ from their piece of one "
                 "process's%s", v.bad - back, f.g.n_slices, back ? "; the gathered model differs" : "");
        snprintf(name, sizeof name, "tp.init.%s", tag);
        report(&ts, c, name, v, 0, "initial pieces = one process's, bitwise; gathered back whole");
        free(whole); free(piece);
        gpt_free(&ref);
        ctx_destroy(&rctx);
    }
    int C = cfg.n_embd;
    snprintf(name, sizeof name, "tp.column.%s", tag);
    report(&ts, c, name, check_linear(&f, 1, C, 4 * C), 1e-5, "column-parallel = serial (rel 1e-5)");
    snprintf(name, sizeof name, "tp.row.%s", tag);
    report(&ts, c, name, check_linear(&f, 0, 4 * C, C), 1e-5, "row-parallel = serial (rel 1e-5)");
    snprintf(name, sizeof name, "tp.attention.%s", tag);
    report(&ts, c, name, check_attention(&f), 1e-6, "this rank's heads of c_attn = serial's");
    if (tp > 1) {
        snprintf(name, sizeof name, "tp.ce.%s", tag);
        report(&ts, c, name, check_ce(&f), 1e-6, "vocab-parallel cross-entropy = serial");
    }
    fixture_free(&f);
    run_model_checks(&ts, c, &tpg, &dpg, sp, B, tag);
    int rc = comm_rank(c) == 0 ? test_finish(&ts) : 0;
    comm_finalize(c);
    return rc;
}
