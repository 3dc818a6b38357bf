// test_gpu_ops.c — the CUDA backend against the CPU backend, op by op: every op
// of the Ops table runs on the same random inputs on both backends, at the shape
// set main (test_gpu.c) passes in. Forward outputs compare within TOL_FWD,
// gradients within TOL_GRAD (why those: test_gpu.c's header); the vocabulary
// split's lookups, position sums and maxima, which add in the CPU's order, must
// match exactly. The gradients a backward adds to start non-zero, so one that
// overwrites them fails, and the GPU's deterministic reductions (dbias, dwte,
// dw, dwpe, sum_squares) run twice and must give the same bits. The low-precision
// ops (rounding, stochastic rounding, fp8 quantization) must give the CPU's bits.
// The bf16 GEMMs (ctx->gemm_dtype) are test_gpu_bf16.c's.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precision.h"
#include "test_gpu.h"

// ---------------------------------------------------------------- ops

void test_matmul(Env *e, const Dims *d) {
    int N = d->B * d->T, C = d->C;
    // The model's three kinds: with bias (c_attn), wide input and no dinp wanted,
    // and the LM head (OC = V, no bias; fewer rows to keep the CPU side quick).
    struct { const char *name; int N, C, OC, bias, want_dinp; } cases[] = {
        {"qkv", N, C, 3 * C, 1, 1},
        {"proj", N, 4 * C, C, 1, 0},
        {"lm_head", N < 256 ? N : 256, C, d->V, 0, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int n = cases[k].N, c = cases[k].C, oc = cases[k].OC;
        char what[64];
        Buf inp = buf_normal(e, (size_t)n * c, 0.0f, 1.0f);
        Buf w = buf_normal(e, (size_t)oc * c, 0.0f, 0.1f);
        Buf bias = cases[k].bias ? buf_normal(e, oc, 0.0f, 0.1f) : (Buf){0};
        Buf out = buf_zero(e, (size_t)n * oc * sizeof(float));
        for (int dev = 0; dev < 2; dev++) {
            Ctx *x = ctx_of(e, dev);
            x->ops->matmul_forward(x, on(&out, dev), on(&inp, dev), on(&w, dev), on(&bias, dev),
                                   n, c, oc);
        }
        snprintf(what, sizeof what, "matmul_forward.%s", cases[k].name);
        check_buf(e, what, &out, TOL_FWD);

        // Gradients start non-zero: the backward must add, not overwrite.
        Buf dout = buf_normal(e, (size_t)n * oc, 0.0f, 1.0f);
        Buf dinp = cases[k].want_dinp ? buf_normal(e, (size_t)n * c, 0.0f, 1.0f) : (Buf){0};
        Buf dw = buf_normal(e, (size_t)oc * c, 0.0f, 1.0f);
        Buf dbias = cases[k].bias ? buf_normal(e, oc, 0.0f, 1.0f) : (Buf){0};
        for (int dev = 0; dev < 2; dev++) {
            Ctx *x = ctx_of(e, dev);
            x->ops->matmul_backward(x, on(&dinp, dev), on(&dw, dev), on(&dbias, dev),
                                    on(&dout, dev), on(&inp, dev), on(&w, dev), n, c, oc);
        }
        if (cases[k].want_dinp) {
            snprintf(what, sizeof what, "matmul_backward.%s.dinp", cases[k].name);
            check_buf(e, what, &dinp, TOL_GRAD);
        }
        snprintf(what, sizeof what, "matmul_backward.%s.dw", cases[k].name);
        check_buf(e, what, &dw, TOL_GRAD);
        if (cases[k].bias) {
            snprintf(what, sizeof what, "matmul_backward.%s.dbias", cases[k].name);
            check_buf(e, what, &dbias, TOL_GRAD);
            void *first = read_back(&e->gpu, dbias.g, dbias.bytes);
            RERUN_GPU_SAME_BITS(e, "matmul_backward.dbias deterministic", dbias, first,
                                e->gpu.ops->matmul_backward(&e->gpu, dinp.g, dw.g, dbias.g,
                                                            dout.g, inp.g, w.g, n, c, oc));
            free(first);
        }
        Buf *all[] = {&inp, &w, &bias, &out, &dout, &dinp, &dw, &dbias};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i]->host) buf_free(e, all[i]);
    }
}

void test_embedding(Env *e, const Dims *d) {
    int B = d->B, T = d->T, C = d->C, V = d->V, N = B * T;
    Buf tok = buf_tokens(e, N, V);
    Buf wte = buf_normal(e, (size_t)V * C, 0.0f, 0.02f);
    Buf wpe = buf_normal(e, (size_t)T * C, 0.0f, 0.02f);
    Buf out = buf_zero(e, (size_t)N * C * sizeof(float));
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->embedding_forward(x, on(&out, dev), on(&tok, dev), on(&wte, dev), on(&wpe, dev), B,
                                  T, C);
    }
    check_buf(e, "embedding_forward", &out, TOL_FWD);

    Buf dout = buf_normal(e, (size_t)N * C, 0.0f, 1.0f);
    Buf dwte = buf_normal(e, (size_t)V * C, 0.0f, 1.0f);
    Buf dwpe = buf_normal(e, (size_t)T * C, 0.0f, 1.0f);
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->embedding_backward(x, on(&dwte, dev), on(&dwpe, dev), on(&dout, dev), on(&tok, dev),
                                   tok.host, B, T, C);
    }
    check_buf(e, "embedding_backward.dwte", &dwte, TOL_GRAD);
    check_buf(e, "embedding_backward.dwpe", &dwpe, TOL_GRAD);
    void *first = read_back(&e->gpu, dwte.g, dwte.bytes);
    RERUN_GPU_SAME_BITS(e, "embedding_backward.dwte deterministic", dwte, first,
                        e->gpu.ops->embedding_backward(&e->gpu, dwte.g, dwpe.g, dout.g, tok.g,
                                                       tok.host, B, T, C));
    free(first);
    Buf *all[] = {&tok, &wte, &wpe, &out, &dout, &dwte, &dwpe};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(e, all[i]);
}

void test_layernorm(Env *e, const Dims *d) {
    int N = d->B * d->T, C = d->C;
    Buf inp = buf_normal(e, (size_t)N * C, 0.5f, 2.0f);  // off-centre, wide: a real normalization
    Buf w = buf_normal(e, C, 1.0f, 0.1f), b = buf_normal(e, C, 0.0f, 0.1f);
    Buf out = buf_zero(e, (size_t)N * C * sizeof(float));
    Buf mean = buf_zero(e, (size_t)N * sizeof(float));
    Buf rstd = buf_zero(e, (size_t)N * sizeof(float));
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->layernorm_forward(x, on(&out, dev), on(&mean, dev), on(&rstd, dev), on(&inp, dev),
                                  on(&w, dev), on(&b, dev), N, C);
    }
    check_buf(e, "layernorm_forward.out", &out, TOL_FWD);
    check_buf(e, "layernorm_forward.mean", &mean, TOL_FWD);
    check_buf(e, "layernorm_forward.rstd", &rstd, TOL_FWD);

    Buf dout = buf_normal(e, (size_t)N * C, 0.0f, 1.0f);
    Buf dinp = buf_normal(e, (size_t)N * C, 0.0f, 1.0f);
    Buf dw = buf_normal(e, C, 0.0f, 1.0f), db = buf_normal(e, C, 0.0f, 1.0f);
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->layernorm_backward(x, on(&dinp, dev), on(&dw, dev), on(&db, dev), on(&dout, dev),
                                   on(&inp, dev), on(&w, dev), on(&mean, dev), on(&rstd, dev),
                                   N, C);
    }
    check_buf(e, "layernorm_backward.dinp", &dinp, TOL_GRAD);
    check_buf(e, "layernorm_backward.dw", &dw, TOL_GRAD);
    check_buf(e, "layernorm_backward.db", &db, TOL_GRAD);
    void *first = read_back(&e->gpu, dw.g, dw.bytes);
    RERUN_GPU_SAME_BITS(e, "layernorm_backward.dw deterministic", dw, first,
                        e->gpu.ops->layernorm_backward(&e->gpu, dinp.g, dw.g, db.g, dout.g, inp.g,
                                                       w.g, mean.g, rstd.g, N, C));
    free(first);
    Buf *all[] = {&inp, &w, &b, &out, &mean, &rstd, &dout, &dinp, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(e, all[i]);
}

void test_attention(Env *e, const Dims *d) {
    int B = d->B, T = d->T, C = d->C, NH = d->NH;
    size_t BTC = (size_t)B * T * C, att_n = (size_t)B * NH * T * T;
    Buf qkv = buf_normal(e, 3 * BTC, 0.0f, 1.0f);
    Buf out = buf_zero(e, BTC * sizeof(float)), att = buf_zero(e, att_n * sizeof(float));
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->attention_forward(x, on(&out, dev), on(&att, dev), on(&qkv, dev), B, T, C, NH,
                                  DT_F32);
    }
    check_buf(e, "attention_forward.out", &out, TOL_FWD);
    check_buf(e, "attention_forward.att", &att, TOL_FWD);

    // Each backend's backward uses its own forward's att, as in the model.
    Buf dout = buf_normal(e, BTC, 0.0f, 1.0f), dqkv = buf_normal(e, 3 * BTC, 0.0f, 1.0f);
    Buf scratch = buf_zero(e, att_n * sizeof(float));
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->attention_backward(x, on(&dqkv, dev), on(&scratch, dev), on(&dout, dev),
                                   on(&qkv, dev), on(&att, dev), B, T, C, NH, DT_F32);
    }
    check_buf(e, "attention_backward.dqkv", &dqkv, TOL_GRAD);
    Buf *all[] = {&qkv, &out, &att, &dout, &dqkv, &scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(e, all[i]);
}

void test_elementwise(Env *e, const Dims *d) {
    size_t n = (size_t)d->B * d->T * 4 * d->C;  // the MLP's hidden activations
    Buf inp = buf_normal(e, n, 0.0f, 2.0f), out = buf_zero(e, n * sizeof(float));
    Buf dout = buf_normal(e, n, 0.0f, 1.0f), dinp = buf_normal(e, n, 0.0f, 1.0f);
    Buf y = buf_normal(e, n, 0.0f, 1.0f), s = buf_normal(e, n, 0.0f, 1.0f);
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->gelu_forward(x, on(&out, dev), on(&inp, dev), n);
        x->ops->gelu_backward(x, on(&dinp, dev), on(&inp, dev), on(&dout, dev), n);
    }
    check_buf(e, "gelu_forward", &out, TOL_FWD);
    check_buf(e, "gelu_backward", &dinp, TOL_GRAD);
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->residual_forward(x, on(&out, dev), on(&inp, dev), on(&dout, dev), n);
        x->ops->accumulate(x, on(&y, dev), on(&inp, dev), 0.37f, n);
        x->ops->scale(x, on(&s, dev), -1.7f, n);
    }
    check_buf(e, "residual_forward", &out, TOL_FWD);
    check_buf(e, "accumulate", &y, TOL_FWD);
    check_buf(e, "scale", &s, TOL_FWD);
    Buf *all[] = {&inp, &out, &dout, &dinp, &y, &s};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(e, all[i]);
}

void test_crossentropy(Env *e, const Dims *d) {
    int N = d->B * d->T, V = d->V;
    if (N > 256) N = 256;  // rows are independent; V is what matters here
    Buf logits = buf_normal(e, (size_t)N * V, 0.0f, 2.0f), targets = buf_tokens(e, N, V);
    Buf losses = buf_zero(e, (size_t)N * sizeof(float));
    Buf dlogits = buf_zero(e, logits.bytes);
    Buf inplace = buf_zero(e, logits.bytes);  // the model's use: dlogits written over the logits
    memcpy(inplace.host, logits.host, logits.bytes);
    buf_upload(e, &inplace);
    float dloss = 1.0f / N;
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->crossentropy_forward(x, on(&losses, dev), on(&logits, dev), on(&targets, dev), N,
                                     V);
        x->ops->crossentropy_backward(x, on(&dlogits, dev), on(&logits, dev), on(&targets, dev),
                                      dloss, N, V);
        x->ops->crossentropy_backward(x, on(&inplace, dev), on(&inplace, dev), on(&targets, dev),
                                      dloss, N, V);
    }
    check_buf(e, "crossentropy_forward", &losses, TOL_FWD);
    check_buf(e, "crossentropy_backward", &dlogits, TOL_GRAD);
    check_buf(e, "crossentropy_backward.in_place", &inplace, TOL_GRAD);
    Buf *all[] = {&logits, &targets, &losses, &dlogits, &inplace};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(e, all[i]);
}

// The vocabulary split (ops.h), block by block: V ids over 3 ranks of Vl =
// ceil(V/3). Blocks 0 (it holds the 8 ids half the tokens come from), 2 (padded:
// valid < Vl for every shape here) and 3, past the vocabulary: all padding, no
// token in it. Lookups, position sums and the scatter add the same terms in the
// same order as the CPU, and a max is exact: those compare with tolerance 0.
void test_vocab_split(Env *e, const Dims *d) {
    int T = d->T, C = d->C, V = d->V, N = d->B * T, Vl = (V + 2) / 3, r0 = 3, Nr = N - r0;
    int Nce = N < 256 ? N : 256;  // cross-entropy rows, as test_crossentropy
    char what[96];
    Buf tok = buf_tokens(e, N, V), targets = buf_tokens(e, Nce, V);
    Buf dout = buf_normal(e, (size_t)N * C, 0.0f, 1.0f), out = buf_zero(e, dout.bytes);
    Buf wpe = buf_normal(e, (size_t)T * C, 0.0f, 0.02f), dwpe = buf_normal(e, (size_t)T * C, 0, 1);
    for (int dev = 0; dev < 2; dev++) {  // rows r0.. of the batch: a shard off the T grid
        Ctx *x = ctx_of(e, dev);
        x->ops->position_forward(x, on(&out, dev), on(&wpe, dev), r0, Nr, T, C);
        x->ops->position_backward(x, on(&dwpe, dev), on(&dout, dev), r0, Nr, T, C);
    }
    check_buf(e, "vocab_split.position_forward", &out, 0.0);
    check_buf(e, "vocab_split.position_backward", &dwpe, 0.0);
    void *first = read_back(&e->gpu, dwpe.g, dwpe.bytes);
    RERUN_GPU_SAME_BITS(e, "vocab_split.position_backward deterministic", dwpe, first,
                        e->gpu.ops->position_backward(&e->gpu, dwpe.g, dout.g, r0, Nr, T, C));
    free(first);
    for (int r = 0; r < 4; r += 1 + (r == 0)) {  // blocks 0, 2, 3
        int lo = r * Vl, valid = V - lo < 0 ? 0 : V - lo < Vl ? V - lo : Vl;
        Buf wte = buf_normal(e, (size_t)Vl * C, 0.0f, 0.02f);
        Buf dwte = buf_normal(e, (size_t)Vl * C, 0.0f, 1.0f);  // non-zero: += is checked
        for (int dev = 0; dev < 2; dev++) {
            Ctx *x = ctx_of(e, dev);
            x->ops->embedding_lookup_forward(x, on(&out, dev), on(&tok, dev), on(&wte, dev), lo,
                                             Vl, N, C);
            x->ops->embedding_lookup_backward(x, on(&dwte, dev), on(&dout, dev), on(&tok, dev),
                                              tok.host, lo, Vl, N, C);
        }
        snprintf(what, sizeof what, "vocab_split.b%d.lookup_forward", r);
        check_buf(e, what, &out, 0.0);
        snprintf(what, sizeof what, "vocab_split.b%d.lookup_backward", r);
        check_buf(e, what, &dwte, 0.0);
        first = read_back(&e->gpu, dwte.g, dwte.bytes);
        snprintf(what, sizeof what, "vocab_split.b%d.lookup_backward deterministic", r);
        RERUN_GPU_SAME_BITS(e, what, dwte, first,
                            e->gpu.ops->embedding_lookup_backward(&e->gpu, dwte.g, dout.g, tok.g,
                                                                  tok.host, lo, Vl, N, C));
        free(first);

        // Logits(Nce,Vl) whose padding holds 1e3, never to be read. m and sumexp as
        // if another rank held a larger logit: this block's max + 0.5, and this
        // block's sum from that m, + 1.
        size_t nl = (size_t)Nce * Vl, nb = Nce * sizeof(float);
        Buf lg = buf_normal(e, nl, 0.0f, 2.0f), inplace = buf_zero(e, lg.bytes);
        Buf dlg = buf_zero(e, lg.bytes), m = buf_zero(e, nb), se = buf_zero(e, nb);
        Buf tl = buf_normal(e, Nce, 0.0f, 2.0f), losses = buf_zero(e, nb);
        Buf rowmax = buf_zero(e, nb), sumexp = buf_zero(e, nb), tlogit = buf_zero(e, nb);
        float *mh = m.host, *sh = se.host;
        for (int n = 0; n < Nce; n++) {
            float *x = (float *)lg.host + (size_t)n * Vl, mx = x[0];
            for (int v = valid; v < Vl; v++) x[v] = 1e3f;
            for (int v = 1; v < valid; v++) mx = x[v] > mx ? x[v] : mx;
            if (valid == 0) mx = 0.0f;
            double sum = 1.0;
            for (int v = 0; v < valid; v++) sum += exp((double)x[v] - (mx + 0.5f));
            mh[n] = mx + 0.5f, sh[n] = (float)sum;
        }
        memcpy(inplace.host, lg.host, lg.bytes);
        buf_upload(e, &lg), buf_upload(e, &inplace), buf_upload(e, &m), buf_upload(e, &se);
        float dloss = 1.0f / Nce;
        for (int dev = 0; dev < 2; dev++) {
            Ctx *x = ctx_of(e, dev);
            float *M = on(&m, dev), *S = on(&se, dev);
            int *Y = on(&targets, dev);
            x->ops->logits_max(x, on(&rowmax, dev), on(&lg, dev), Nce, Vl, valid);
            x->ops->logits_sumexp(x, on(&sumexp, dev), on(&tlogit, dev), on(&lg, dev), M, Y, lo,
                                  Nce, Vl, valid);
            x->ops->crossentropy_loss(x, on(&losses, dev), M, S, on(&tl, dev), Nce);
            x->ops->crossentropy_backward_split(x, on(&dlg, dev), on(&lg, dev), M, S, Y, lo, dloss,
                                                Nce, Vl, valid);
            x->ops->crossentropy_backward_split(x, on(&inplace, dev), on(&inplace, dev), M, S, Y,
                                                lo, dloss, Nce, Vl, valid);
        }
        // -inf (valid = 0) defeats a relative error: the maxima compare as bits.
        float *mc = read_back(&e->cpu, rowmax.c, nb), *mg = read_back(&e->gpu, rowmax.g, nb);
        snprintf(what, sizeof what, "vocab_split.b%d.logits_max", r);
        check_same_bits(e, what, mg, mc, nb);
        free(mc);
        free(mg);
        struct { const char *name; Buf *b; double tol; } res[] = {
            {"logits_sumexp.sumexp", &sumexp, TOL_FWD},
            {"logits_sumexp.tlogit", &tlogit, 0.0},
            {"crossentropy_loss", &losses, TOL_FWD},
            {"crossentropy_backward_split", &dlg, TOL_GRAD},
            {"crossentropy_backward_split.in_place", &inplace, TOL_GRAD},
        };
        for (int i = 0; i < 5; i++) {
            snprintf(what, sizeof what, "vocab_split.b%d.%s", r, res[i].name);
            check_buf(e, what, res[i].b, res[i].tol);
        }
        Buf *all[] = {&wte, &dwte, &lg, &inplace, &dlg, &m, &se, &tl, &losses, &rowmax, &sumexp,
                      &tlogit};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(e, all[i]);
    }
    Buf *all[] = {&tok, &targets, &dout, &out, &wpe, &dwpe};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(e, all[i]);
}

void test_optimizer(Env *e, const Dims *d) {
    size_t n = (size_t)d->V * d->C + 13;  // the size of wte, plus an odd tail
    Buf p = buf_normal(e, n, 0.0f, 1.0f), g = buf_normal(e, n, 0.0f, 1.0f);
    Buf m = buf_normal(e, n, 0.0f, 0.1f), v = buf_normal(e, n, 0.0f, 0.01f);
    float *vh = v.host;
    for (size_t i = 0; i < n; i++) vh[i] = fabsf(vh[i]);  // second moments are >= 0
    buf_upload(e, &v);
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->adamw_update(x, on(&p, dev), on(&g, dev), on(&m, dev), on(&v, dev), n, 1e-3f, 0.9f,
                             0.95f, 1e-8f, 0.1f, 0.5f, 3);
    }
    check_buf(e, "adamw_update.p", &p, TOL_FWD);
    check_buf(e, "adamw_update.m", &m, TOL_FWD);
    check_buf(e, "adamw_update.v", &v, TOL_FWD);

    // sum_squares: both accumulate in double, so they agree far below fp32 rounding.
    double sc = e->cpu.ops->sum_squares(&e->cpu, g.c, n);
    double sg = e->gpu.ops->sum_squares(&e->gpu, g.g, n);
    double sg2 = e->gpu.ops->sum_squares(&e->gpu, g.g, n);
    double err = fabs(sg - sc) / sc;
    char name[128];
    snprintf(name, sizeof name, "sum_squares[%s]", e->size);
    test_report(&e->ts, err <= 1e-10, name, "rel_err %.3e (tol 1e-10, n %zu)", err, n);
    check_same_bits(e, "sum_squares deterministic", &sg, &sg2, sizeof sg);
    Buf *all[] = {&p, &g, &m, &v};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(e, all[i]);
}

// Rounding in fp32 slots: the CUDA kernels call twins of the CPU's scalar routines
// (dtype.c, 06_mixed_precision/sround.c), so every result, NaNs included, and the
// fp8 amax must be the same bits. Inputs: normals at several scales (the fp8 range,
// fp16's subnormals and overflow), with specials at the front.
void test_low_precision(Env *e, const Dims *d) {
    size_t n = (size_t)d->B * d->T * d->C + 7;
    Buf src = buf_normal(e, n, 0.0f, 1.0f);
    float *h = src.host;
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3.0e38f, 1e-40f, 65520.0f,
                              448.0f, 464.0f, 61440.0f};
    for (size_t i = 0; i < n; i++) h[i] *= exp2f((float)(i % 41) - 20.0f);  // 2^-20 .. 2^20
    for (size_t i = 0; i < sizeof specials / sizeof specials[0] && i < n; i++) h[i] = specials[i];
    Buf x = buf_zero(e, src.bytes);
    char what[64];
    const DType dts[] = {DT_BF16, DT_F16, DT_E4M3, DT_E5M2};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        memcpy(x.host, src.host, src.bytes);
        buf_upload(e, &x);
        for (int dev = 0; dev < 2; dev++) {
            Ctx *xc = ctx_of(e, dev);
            xc->ops->round_to(xc, on(&x, dev), n, dts[k]);
        }
        float *c = read_back(&e->cpu, x.c, x.bytes), *g = read_back(&e->gpu, x.g, x.bytes);
        snprintf(what, sizeof what, "round_to.%s", dtype_name(dts[k]));
        check_same_bits(e, what, c, g, x.bytes);
        free(c), free(g);
    }
    memcpy(x.host, src.host, src.bytes);
    buf_upload(e, &x);
    for (int dev = 0; dev < 2; dev++) {
        Ctx *xc = ctx_of(e, dev);
        xc->ops->round_stochastic_bf16(xc, on(&x, dev), n, 1234, 99, &precision_plugins.sround);
    }
    float *c = read_back(&e->cpu, x.c, x.bytes), *g = read_back(&e->gpu, x.g, x.bytes);
    check_same_bits(e, "round_stochastic_bf16", c, g, x.bytes);
    free(c), free(g);
    for (int f = 0; f < 2; f++) {
        DType fmt = f ? DT_E5M2 : DT_E4M3;
        float amax[2], scale = f ? 3.0f : 0.375f;  // not powers of two: the division rounds
        memcpy(x.host, src.host, src.bytes);
        buf_upload(e, &x);
        for (int dev = 0; dev < 2; dev++) {
            Ctx *xc = ctx_of(e, dev);
            xc->ops->quantize_fp8(xc, on(&x, dev), n, fmt, scale, &amax[dev]);
        }
        c = read_back(&e->cpu, x.c, x.bytes), g = read_back(&e->gpu, x.g, x.bytes);
        snprintf(what, sizeof what, "quantize_fp8.%s", dtype_name(fmt));
        check_same_bits(e, what, c, g, x.bytes);
        snprintf(what, sizeof what, "quantize_fp8.%s.amax", dtype_name(fmt));
        check_same_bits(e, what, &amax[0], &amax[1], sizeof(float));
        free(c), free(g);
    }
    // The 2-byte storage: the codes (NaNs included) and the values unpacked from them.
    Buf y = buf_zero(e, n * sizeof(uint16_t));
    for (int k = 0; k < 2; k++) {
        DType dt = k ? DT_F16 : DT_BF16;
        for (int dev = 0; dev < 2; dev++) {
            Ctx *xc = ctx_of(e, dev);
            xc->ops->pack_half(xc, (uint16_t *)on(&y, dev), on(&src, dev), n, dt);
            xc->ops->unpack_half(xc, on(&x, dev), (const uint16_t *)on(&y, dev), n, dt);
        }
        c = read_back(&e->cpu, y.c, y.bytes), g = read_back(&e->gpu, y.g, y.bytes);
        snprintf(what, sizeof what, "pack_half.%s", dtype_name(dt));
        check_same_bits(e, what, c, g, y.bytes);
        free(c), free(g);
        c = read_back(&e->cpu, x.c, x.bytes), g = read_back(&e->gpu, x.g, x.bytes);
        snprintf(what, sizeof what, "unpack_half.%s", dtype_name(dt));
        check_same_bits(e, what, c, g, x.bytes);
        free(c), free(g);
    }
    buf_free(e, &y);
    buf_free(e, &src);
    buf_free(e, &x);
}
