// test_mixed.c — stage 06's low-precision GEMMs against fp32, with bounds that come
// from the formats and the reduction length, and the fp8 recipe's linear layer
// against its definition.
//
// mp.ops.DT.matmul   out = round_DT(x_DT @ w_DT^T), the inputs rounded to DT (as the
//                    mixed recipes hold them), fp32 accumulation, the output rounded:
//                    every element within the bound below of the fp32 GEMM on the
//                    unrounded inputs. With u = DT's unit roundoff (half the gap at 1:
//                    2^-8 bf16, 8 significant bits; 2^-11 fp16, 11) and K the reduction
//                    length:
//                      |out - ref| <= (2u + u^2 + 2 K 2^-24) S + e T + u |ref| (1 + K 2^-24)
//                    S = sum_k |x_k| |w_k|: each product of rounded inputs is off by at
//                    most (2u + u^2) of |x_k w_k|, fp32's accumulation adds at most
//                    K 2^-24 S in each of the two GEMMs (Higham, Thm 3.1, to first
//                    order), and the output's rounding u |out|. Inputs below the
//                    smallest normal (fp16: 6.1e-5) round to a multiple of the smallest
//                    subnormal instead, an absolute error of at most e (2^-25 for fp16):
//                    T = sum_k (|x_k| + |w_k|) (1 + u) bounds what that adds. A result
//                    beyond the bound means an input was not rounded as the recipe says,
//                    or rounded twice.
// mp.ops.DT.matmul_tight  the rounding really happened: the mean error is at least
//                    0.02 u S. Independent roundings of the K products add up like a
//                    random walk, about u S / sqrt(K) (measured 0.09 u S at K = 96);
//                    without them only fp32's accumulation is left, about 2^-24 S, which
//                    is 1e-4 u S for bf16.
// mp.fp8.linear.forward / .backward   the fp8 recipe's linear layer (fp8_linear.c)
//                    gives bitwise the GEMM of x and w cast to E4M3 (dy to E5M2) with
//                    the scales of its amax histories: 1 at the first step (empty), then
//                    448 / amax (57344 / amax for dy) of the step before.
// mp.gemm_dtype.per_model  models of different recipes on one context: each one's
//                    forward and backward run with the context's GEMMs reading its own
//                    recipe's type (bf16 for mixed-bf16, fp32 for fp32 and fp8), not the
//                    type of whichever model set its precision last. (The CPU backend
//                    ignores the type; on the GPU a stale bf16 would round an fp32
//                    model's GEMM inputs.)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ctx.h"
#include "harness.h"
#include "model.h"
#include "model_internal.h"
#include "ops.h"
#include "precision.h"
#include "rng.h"

enum { N = 64, C = 96, OC = 80 };

static void fill(float *x, size_t n, uint64_t seed, float std) {
    Rng r;
    rng_seed(&r, seed);
    rng_fill_normal(&r, x, n, 0.0f, std);
}

static void test_matmul(TestState *ts, Ctx *ctx, DType dt, const char *name, double u,
                        double e) {
    const Ops *o = ctx->ops;
    float *x = xmalloc(sizeof(float) * N * C), *w = xmalloc(sizeof(float) * OC * C);
    float *xr = xmalloc(sizeof(float) * N * C), *wr = xmalloc(sizeof(float) * OC * C);
    float *ref = xmalloc(sizeof(float) * N * OC), *out = xmalloc(sizeof(float) * N * OC);
    fill(x, (size_t)N * C, 11, 1.0f);
    fill(w, (size_t)OC * C, 12, 0.05f);
    memcpy(xr, x, sizeof(float) * N * C);
    memcpy(wr, w, sizeof(float) * OC * C);
    o->round_to(ctx, xr, (size_t)N * C, dt);
    o->round_to(ctx, wr, (size_t)OC * C, dt);
    o->matmul_forward(ctx, ref, x, w, NULL, N, C, OC);
    o->matmul_forward(ctx, out, xr, wr, NULL, N, C, OC);
    o->round_to(ctx, out, (size_t)N * OC, dt);
    double acc = C * 0x1p-24, worst = 0, mean_ratio = 0;  // fp32 accumulation, K = C
    long over = 0;
    for (int n = 0; n < N; n++)
        for (int j = 0; j < OC; j++) {
            double S = 0, Tt = 0;
            for (int k = 0; k < C; k++) {
                S += fabs((double)x[n * C + k] * w[j * C + k]);
                Tt += (fabs((double)x[n * C + k]) + fabs((double)w[j * C + k])) * (1 + u);
            }
            double r = ref[n * OC + j], err = fabs((double)out[n * OC + j] - r);
            double bound = (2 * u + u * u + 2 * acc) * S + e * Tt + u * fabs(r) * (1 + acc);
            if (!(err <= bound)) over++;  // a NaN is over any bound
            worst = max_err(worst, err / bound);
            mean_ratio += err / (u * S) / (N * OC);
        }
    char check[64];
    snprintf(check, sizeof check, "mp.ops.%s.matmul", name);
    test_report(ts, over == 0, check, "%d x %d x %d: %ld elements beyond the bound; worst "
                "error %.2f of it (u = 2^%d, K = %d)", N, OC, C, over, worst,
                (int)lround(log2(u)), C);
    snprintf(check, sizeof check, "mp.ops.%s.matmul_tight", name);
    test_report(ts, mean_ratio >= 0.02, check, "mean |error| = %.3f u S (want >= 0.02: the "
                "inputs and output really were rounded)", mean_ratio);
    free(x); free(w); free(xr); free(wr); free(ref); free(out);
}

// The fp8 recipe's layer against its definition, at two steps (scale 1, then from the
// history of the first).
static void test_fp8_linear(TestState *ts, Ctx *ctx) {
    const Ops *o = ctx->ops;
    GPTConfig cfg = {.n_layer = 1, .n_embd = C, .n_head = 4, .seq_len = 8, .vocab = 64};
    GPT g;
    gpt_init(&g, ctx, &cfg, 3);
    g.plugins = &precision_plugins;
    gpt_set_precision(&g, PREC_FP8, 1);
    size_t nx = (size_t)N * C, nw = (size_t)OC * C, ny = (size_t)N * OC;
    float *x = xmalloc(sizeof(float) * nx), *w = xmalloc(sizeof(float) * nw);
    float *dy = xmalloc(sizeof(float) * ny), *q = xmalloc(sizeof(float) * (nx + nw + ny));
    float *out = xmalloc(sizeof(float) * ny), *want = xmalloc(sizeof(float) * ny);
    float *dx = xmalloc(sizeof(float) * nx), *dw = xcalloc(nw, sizeof(float));
    float *wdx = xmalloc(sizeof(float) * nx), *wdw = xcalloc(nw, sizeof(float));
    int fwd_ok = 1, bwd_ok = 1;
    float ax = 0, aw = 0, ag = 0;  // amaxes of the step before
    for (int step = 0; step < 2; step++) {
        fill(x, nx, 100 + step, 3.0f);
        fill(w, nw, 200 + step, 0.1f);
        fill(dy, ny, 300 + step, 1e-4f);
        float sx = step ? 448.0f / ax : 1.0f, sw = step ? 448.0f / aw : 1.0f;
        float sg = step ? 57344.0f / ag : 1.0f;
        float *xq = q, *wq = q + nx, *gq = q + nx + nw;
        memcpy(xq, x, sizeof(float) * nx);
        memcpy(wq, w, sizeof(float) * nw);
        memcpy(gq, dy, sizeof(float) * ny);
        o->quantize_fp8(ctx, xq, nx, DT_E4M3, sx, &ax);
        o->quantize_fp8(ctx, wq, nw, DT_E4M3, sw, &aw);
        o->quantize_fp8(ctx, gq, ny, DT_E5M2, sg, &ag);
        o->matmul_forward(ctx, want, xq, wq, NULL, N, C, OC);
        gpt_fp8_linear_forward(&g, out, x, w, NULL, N, C, OC);
        fwd_ok &= memcmp(out, want, sizeof(float) * ny) == 0;
        memset(wdx, 0, sizeof(float) * nx);
        o->matmul_backward(ctx, wdx, wdw, NULL, gq, xq, wq, N, C, OC);
        gpt_fp8_linear_backward(&g, dx, dw, NULL, dy, x, w, N, C, OC);
        bwd_ok &= memcmp(dx, wdx, sizeof(float) * nx) == 0 &&
                  memcmp(dw, wdw, sizeof(float) * nw) == 0;
        gpt_fp8_step_end(&g);  // this step's amaxes set the next step's scales
    }
    test_report(ts, fwd_ok, "mp.fp8.linear.forward", "2 steps (scales 1, then 448/amax): "
                "out = (x as e4m3) @ (w as e4m3)^T %s", fwd_ok ? "bitwise" : "differs");
    test_report(ts, bwd_ok && gpt_fp8_layers(&g) == 1, "mp.fp8.linear.backward",
                "dx, dw from dy as e5m2 (57344/amax) and the forward's casts: %s; %d layer "
                "tracked", bwd_ok ? "bitwise" : "differ", gpt_fp8_layers(&g));
    free(x); free(w); free(dy); free(q); free(out); free(want); free(dx); free(dw);
    free(wdx); free(wdw);
    gpt_free(&g);
}

// Forward and backward of g, then what the context's GEMMs read.
static DType gemm_after(GPT *g, const int *tokens, int B, int T) {
    gpt_forward(g, tokens, tokens, B, T);
    DType fwd = g->ctx->gemm_dtype;
    gpt_zero_grad(g);
    gpt_backward(g, 1.0f);
    return fwd == g->ctx->gemm_dtype ? fwd : DT_COUNT;  // DT_COUNT: they differed
}

static void test_gemm_dtype_per_model(TestState *ts, Ctx *ctx) {
    GPTConfig cfg = {.n_layer = 1, .n_embd = 32, .n_head = 2, .seq_len = 8, .vocab = 64};
    GPTRecipe recipes[3] = {PREC_FP32, PREC_MIXED_BF16, PREC_FP8};
    const DType want[3] = {DT_F32, DT_BF16, DT_F32};
    GPT m[3];
    for (int i = 0; i < 3; i++) {  // all three built first: the fp8 model set its recipe last
        gpt_init(&m[i], ctx, &cfg, 5);
        m[i].plugins = &precision_plugins;
        gpt_set_precision(&m[i], recipes[i], 1);
        gpt_alloc_grads(&m[i]);
        gpt_alloc_acts(&m[i], 2, 8);
    }
    int tokens[16];
    for (int i = 0; i < 16; i++) tokens[i] = (i * 7) % 64;
    const int order[5] = {1, 0, 2, 1, 0};  // every change of recipe, both ways
    int ok = 1, bad = -1;
    DType got = DT_F32;
    for (int k = 0; k < 5 && ok; k++) {
        got = gemm_after(&m[order[k]], tokens, 2, 8);
        if (got != want[order[k]]) ok = 0, bad = order[k];
    }
    if (ok)
        test_report(ts, 1, "mp.gemm_dtype.per_model", "fp32, mixed-bf16, fp8 models on one "
                    "context, in turn: each computed with its own GEMM type");
    else
        test_report(ts, 0, "mp.gemm_dtype.per_model", "the %s model's forward/backward ran "
                    "with the context's GEMMs reading %s", gpt_recipe_name(recipes[bad]),
                    got == DT_COUNT ? "another type in backward than in forward" :
                    dtype_name(got));
    for (int i = 0; i < 3; i++) gpt_free(&m[i]);
}

int main(void) {
    TestState ts = {0, 0};
    Ctx ctx;
    ctx_init(&ctx, DEV_CPU, 1, 0);
    printf("PLAN mp.ops.bf16.matmul\nPLAN mp.ops.bf16.matmul_tight\nPLAN mp.ops.fp16.matmul\n"
           "PLAN mp.ops.fp16.matmul_tight\nPLAN mp.fp8.linear.forward\n"
           "PLAN mp.fp8.linear.backward\nPLAN mp.gemm_dtype.per_model\n");
    fflush(stdout);  // before any check: a crash in the first must not lose the plan
    test_matmul(&ts, &ctx, DT_BF16, "bf16", 0x1p-8, 0x1p-134);
    test_matmul(&ts, &ctx, DT_F16, "fp16", 0x1p-11, 0x1p-25);
    test_fp8_linear(&ts, &ctx);
    test_gemm_dtype_per_model(&ts, &ctx);
    ctx_destroy(&ctx);
    printf("%d passed, %d failed\n", ts.passed, ts.failed);
    return ts.failed ? 1 : 0;
}
