// test_gpu_bf16.c — the CUDA backend's bf16 GEMMs on the tensor cores against the
// CPU (ctx->gemm_dtype = DT_BF16, stage 06's bf16 recipes): the linear layers'
// matmul and the attention's batched GEMMs; and, at the end, the attention without
// the (T,T) matrix (flash_attention_*), in fp32 and bf16. On inputs that are bf16 values both
// compute the same exact products, summed in fp32 in another order, so each check
// holds the two to a tolerance from that order (tol_bf16), and one feeds inputs
// that are not bf16 on purpose, to see that the bf16 path ran.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "test_gpu.h"

// ---------------------------------------------------------------- matmul in bf16
//
// ctx->gemm_dtype = DT_BF16 (stage 06's bf16 recipes): the CUDA backend reads the
// GEMM inputs as bf16 on the tensor cores. On inputs that are bf16 values (what the
// recipes guarantee) nothing is lost in the conversion, so the result is the CPU's
// sgemm (which ignores the field) and the fp32 cuBLAS path's, up to the order of the
// fp32 sums. Tolerance, norm-wise relative (check_rel), for an inner dimension K:
// 1e-6 sqrt(K). Why: a bf16 x bf16 product is exact in fp32 (8 + 8 significant bits),
// so only the sums differ; each fp32 add errs by at most u = 2^-24 = 6e-8 of the
// running sum, and errors of random sign grow like u sqrt(K). Tensor cores truncate
// instead of rounding when they add a block of products to the accumulator (Fasi et
// al. 2021, "Numerical behavior of NVIDIA tensor cores"), a bias of ~u/2 per block
// of (at least) 8 products: ~u K / 16, under 1e-6 sqrt(K) up to K ~ 7e4 (K here is
// at most 50257, the LM head's dinp). And an input that were NOT read exactly (a
// value rounded to bf16 on one side only errs by up to 2^-9 = 2e-3) stays far above
// it: the last check feeds fp32 values on purpose to see that the bf16 path ran.
static double tol_bf16(int K) { return 1e-6 * sqrt((double)K); }

// n normals rounded to bf16 on the host (f32_to_bf16, round to nearest even): the
// values the model's bf16 recipes hold.
static Buf buf_bf16(Env *e, size_t n, float std) {
    Buf b = buf_normal(e, n, 0.0f, std);
    float *h = b.host;
    for (size_t i = 0; i < n; i++) h[i] = bf16_to_f32(f32_to_bf16(h[i]));
    buf_upload(e, &b);
    return b;
}

// A second tensor with src's initial values (empty if src is).
static Buf buf_like(Env *e, const Buf *src) {
    if (!src->host) return (Buf){0};
    Buf b = buf_zero(e, src->bytes);
    memcpy(b.host, src->host, src->bytes);
    buf_upload(e, &b);
    return b;
}

// PASS when the GPU copies of a (bf16 GEMMs) and b (fp32 GEMMs) are within tol.
static void check_gpu_pair(Env *e, const char *what, const Buf *a, const Buf *b, double tol) {
    char name[128];
    snprintf(name, sizeof name, "%s[%s]", what, e->size);
    float *x = read_back(&e->gpu, a->g, a->bytes), *y = read_back(&e->gpu, b->g, b->bytes);
    check_rel(&e->ts, name, x, y, a->bytes / sizeof(float), tol);
    free(x), free(y);
}

static void gemm_dtype_both(Env *e, DType t) { e->cpu.gemm_dtype = t, e->gpu.gemm_dtype = t; }

void test_matmul_bf16(Env *e, const Dims *d) {
    int N = d->B * d->T, C = d->C;
    struct { const char *name; int N, C, OC, bias, want_dinp; } cases[] = {  // test_matmul's
        {"qkv", N, C, 3 * C, 1, 1},
        {"proj", N, 4 * C, C, 1, 0},
        {"lm_head", N < 256 ? N : 256, C, d->V, 0, 1},
        // More rows than the padded forward's 1024-row chunk: a second, partial chunk
        // (ops_cuda_layers.cu's UNPAD_ROWS; the case above has one chunk only).
        {"lm_head_chunks", 1024 + 61, C, d->V, 0, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int n = cases[k].N, c = cases[k].C, oc = cases[k].OC;
        const char *cn = cases[k].name;
        char what[96];
        Buf inp = buf_bf16(e, (size_t)n * c, 1.0f), w = buf_bf16(e, (size_t)oc * c, 0.1f);
        Buf bias = cases[k].bias ? buf_normal(e, oc, 0.0f, 0.1f) : (Buf){0};  // added in fp32
        Buf out = buf_zero(e, (size_t)n * oc * sizeof(float)), out32 = buf_like(e, &out);
        gemm_dtype_both(e, DT_BF16);
        for (int dev = 0; dev < 2; dev++) {
            Ctx *x = ctx_of(e, dev);
            x->ops->matmul_forward(x, on(&out, dev), on(&inp, dev), on(&w, dev), on(&bias, dev),
                                   n, c, oc);
        }
        gemm_dtype_both(e, DT_F32);  // the same inputs through cublasSgemm
        e->gpu.ops->matmul_forward(&e->gpu, out32.g, inp.g, w.g, bias.g, n, c, oc);
        snprintf(what, sizeof what, "matmul_bf16_forward.%s", cn);
        check_buf(e, what, &out, tol_bf16(c));
        snprintf(what, sizeof what, "matmul_bf16_forward.%s vs fp32 cublas", cn);
        check_gpu_pair(e, what, &out, &out32, tol_bf16(c));

        // Gradients start non-zero (fp32, any values: the GEMMs add into them).
        Buf dout = buf_bf16(e, (size_t)n * oc, 1.0f);
        Buf dinp = cases[k].want_dinp ? buf_normal(e, (size_t)n * c, 0.0f, 1.0f) : (Buf){0};
        Buf dw = buf_normal(e, (size_t)oc * c, 0.0f, 1.0f);
        Buf dbias = cases[k].bias ? buf_normal(e, oc, 0.0f, 1.0f) : (Buf){0};
        Buf dinp32 = buf_like(e, &dinp), dw32 = buf_like(e, &dw), dbias32 = buf_like(e, &dbias);
        gemm_dtype_both(e, DT_BF16);
        for (int dev = 0; dev < 2; dev++) {
            Ctx *x = ctx_of(e, dev);
            x->ops->matmul_backward(x, on(&dinp, dev), on(&dw, dev), on(&dbias, dev),
                                    on(&dout, dev), on(&inp, dev), on(&w, dev), n, c, oc);
        }
        gemm_dtype_both(e, DT_F32);
        e->gpu.ops->matmul_backward(&e->gpu, dinp32.g, dw32.g, dbias32.g, dout.g, inp.g, w.g, n,
                                    c, oc);
        if (cases[k].want_dinp) {  // K = OC
            snprintf(what, sizeof what, "matmul_bf16_backward.%s.dinp", cn);
            check_buf(e, what, &dinp, tol_bf16(oc));
            snprintf(what, sizeof what, "matmul_bf16_backward.%s.dinp vs fp32 cublas", cn);
            check_gpu_pair(e, what, &dinp, &dinp32, tol_bf16(oc));
        }
        snprintf(what, sizeof what, "matmul_bf16_backward.%s.dw", cn);  // K = N
        check_buf(e, what, &dw, tol_bf16(n));
        snprintf(what, sizeof what, "matmul_bf16_backward.%s.dw vs fp32 cublas", cn);
        check_gpu_pair(e, what, &dw, &dw32, tol_bf16(n));
        if (cases[k].bias) {  // the bias sum is not a GEMM: the same bits either way
            float *b16 = read_back(&e->gpu, dbias.g, dbias.bytes);
            float *b32 = read_back(&e->gpu, dbias32.g, dbias32.bytes);
            snprintf(what, sizeof what, "matmul_bf16_backward.%s.dbias = fp32 path", cn);
            check_same_bits(e, what, b16, b32, dbias.bytes);
            free(b16), free(b32);
        }
        gemm_dtype_both(e, DT_BF16);  // no float atomics in the bf16 GEMMs either
        void *first = read_back(&e->gpu, dw.g, dw.bytes);
        RERUN_GPU_SAME_BITS(e, "matmul_bf16_backward.dw deterministic", dw, first,
                            e->gpu.ops->matmul_backward(&e->gpu, dinp.g, dw.g, dbias.g, dout.g,
                                                        inp.g, w.g, n, c, oc));
        free(first);

        if (k == 0) {  // fp32 inputs on purpose: the GEMM must read them rounded to bf16
            Buf xr = buf_normal(e, (size_t)n * c, 0.0f, 1.0f);
            for (int dev = 0; dev < 2; dev++) {
                Ctx *x = ctx_of(e, dev);
                x->ops->matmul_forward(x, on(&out, dev), on(&xr, dev), on(&w, dev), NULL, n, c,
                                       oc);
            }
            float *cc = read_back(&e->cpu, out.c, out.bytes);
            float *gg = read_back(&e->gpu, out.g, out.bytes);
            double err = rel_error(gg, cc, out.bytes / sizeof(float));
            snprintf(what, sizeof what, "matmul_bf16_forward.reads_bf16[%s]", e->size);
            test_report(&e->ts, err > 1e-4, what, "rel_err %.3e on fp32 inputs (want > 1e-4: "
                        "rounding them to bf16 errs ~1e-3; an fp32 GEMM ~1e-7)", err);
            free(cc), free(gg);
            buf_free(e, &xr);
        }
        gemm_dtype_both(e, DT_F32);
        Buf *all[] = {&inp, &w, &bias, &out, &out32, &dout, &dinp, &dw, &dbias, &dinp32, &dw32,
                      &dbias32};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i]->host) buf_free(e, all[i]);
    }
}


// ---------------------------------------------------------------- attention in bf16
//
// rt = DT_BF16 (ops.h): the attention rounds its probabilities and their
// gradient to bf16 before its GEMMs read them, and the CUDA backend runs all six on
// the tensor cores. Both sides round the same way, but from scores that differ by the
// order of fp32 sums (~1e-7): an element that close to a rounding boundary takes the
// other bf16 neighbour on one side, 2^-8 of it away. A few in 10^5 elements do, so the
// probabilities, and what the GEMMs make of them, are held to TOL_FLIP, 1e-3
// norm-wise: it passes as long as under ~1.5 % of the elements flip (the expected
// share is ~3e-5), and anything computed wrong (a transpose, a stride, a head) errs
// by O(1). (rel_err's norm is the whole dqkv's, which starts non-zero: test_gpu_ops.c.)
#define TOL_FLIP 1e-3

// Every value the GPU left in b is one of dtype dt's (bf16 or fp16): a round trip
// through dt changes none of them.
static void check_values_of(Env *e, const char *name, const Buf *b, DType dt) {
    size_t n = b->bytes / sizeof(float), bad = 0;
    float *v = read_back(&e->gpu, b->g, b->bytes);
    for (size_t i = 0; i < n; i++)
        bad += v[i] != (dt == DT_BF16 ? bf16_to_f32(f32_to_bf16(v[i])) : f16_to_f32(f32_to_f16(v[i])));
    free(v);
    char what[96];
    snprintf(what, sizeof what, "%s[%s]", name, e->size);
    test_report(&e->ts, bad == 0, what, "%zu of %zu values are not %s values", bad, n,
                dtype_name(dt));
}

void test_attention_bf16(Env *e, const Dims *d) {
    int B = d->B, T = d->T, C = d->C, NH = d->NH;
    size_t BTC = (size_t)B * T * C, att_n = (size_t)B * NH * T * T;
    char what[96];
    Buf qkv = buf_bf16(e, 3 * BTC, 1.0f), dout = buf_bf16(e, BTC, 1.0f);
    Buf out = buf_zero(e, BTC * sizeof(float)), att = buf_zero(e, att_n * sizeof(float));
    Buf dqkv = buf_normal(e, 3 * BTC, 0.0f, 1.0f), scratch = buf_zero(e, att_n * sizeof(float));
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->attention_forward(x, on(&out, dev), on(&att, dev), on(&qkv, dev), B, T, C, NH,
                                  DT_BF16);
    }
    check_buf(e, "attention_bf16_forward.out", &out, TOL_FLIP);
    check_buf(e, "attention_bf16_forward.att", &att, TOL_FLIP);
    // The bf16 GEMMs give the same bits run again (selective recompute relies on it).
    void *first = read_back(&e->gpu, att.g, att.bytes);
    RERUN_GPU_SAME_BITS(e, "attention_bf16_forward.att deterministic", att, first,
                        e->gpu.ops->attention_forward(&e->gpu, out.g, att.g, qkv.g, B, T, C, NH,
                                                      DT_BF16));
    free(first);
    // The op left att as bf16 values (what the backward's promise needs).
    check_values_of(e, "attention_bf16_forward.att_is_bf16", &att, DT_BF16);
    for (int dev = 0; dev < 2; dev++) {  // each side's own att, as in the model
        Ctx *x = ctx_of(e, dev);
        x->ops->attention_backward(x, on(&dqkv, dev), on(&scratch, dev), on(&dout, dev),
                                   on(&qkv, dev), on(&att, dev), B, T, C, NH, DT_BF16);
    }
    check_buf(e, "attention_bf16_backward.dqkv", &dqkv, TOL_FLIP);
    // Inputs that are not bf16 on purpose: the bf16 path rounds them (~2^-9 an
    // element); the CPU's fp32 sums do not. First qkv in the forward: its scores move
    // ~1e-3, its probabilities as much, far above the flips' ~3e-5...
    Buf qx = buf_normal(e, 3 * BTC, 0.0f, 1.0f), attx = buf_like(e, &att);
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->attention_forward(x, on(&out, dev), on(&attx, dev), on(&qx, dev), B, T, C, NH,
                                  DT_BF16);
    }
    float *ca = read_back(&e->cpu, attx.c, attx.bytes);
    float *ga = read_back(&e->gpu, attx.g, attx.bytes);
    double erra = rel_error(ga, ca, attx.bytes / sizeof(float));
    snprintf(what, sizeof what, "attention_bf16_forward.reads_bf16[%s]", e->size);
    test_report(&e->ts, erra > 2e-4, what, "rel_err %.3e of att on an fp32 qkv (want > 2e-4: "
                "rounding q and k to bf16 moves the scores ~1e-3; the flips ~3e-5)", erra);
    free(ca), free(ga);
    buf_free(e, &qx), buf_free(e, &attx);
    // ...then dout in the backward: dv moves ~2e-4 to 7e-4 of a dqkv that starts at
    // N(0,1); the flips of ds, sparse, ~1e-6 of it.
    Buf dx = buf_normal(e, BTC, 0.0f, 1.0f), d1 = buf_normal(e, 3 * BTC, 0.0f, 1.0f);
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->attention_backward(x, on(&d1, dev), on(&scratch, dev), on(&dx, dev),
                                   on(&qkv, dev), on(&att, dev), B, T, C, NH, DT_BF16);
    }
    float *cc = read_back(&e->cpu, d1.c, d1.bytes), *gg = read_back(&e->gpu, d1.g, d1.bytes);
    double err = rel_error(gg, cc, d1.bytes / sizeof(float));
    snprintf(what, sizeof what, "attention_bf16_backward.reads_bf16[%s]", e->size);
    test_report(&e->ts, err > 3e-5, what, "rel_err %.3e on an fp32 dout (want > 3e-5: rounding "
                "it to bf16 errs ~2e-4 to 7e-4; the flips of ds ~1e-6)", err);
    free(cc), free(gg);
    // rt = fp16 (mixed-fp16): the softmax kernels round to fp16 and write no bf16 copy
    // (copy == NULL); the GEMMs are fp32 on the rounded values. Flips now 2^-11 apart.
    Buf qh = buf_normal(e, 3 * BTC, 0.0f, 1.0f), atth = buf_like(e, &att);
    Buf dh = buf_normal(e, 3 * BTC, 0.0f, 1.0f);
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->attention_forward(x, on(&out, dev), on(&atth, dev), on(&qh, dev), B, T, C, NH,
                                  DT_F16);
        x->ops->attention_backward(x, on(&dh, dev), on(&scratch, dev), on(&dout, dev),
                                   on(&qh, dev), on(&atth, dev), B, T, C, NH, DT_F16);
    }
    check_buf(e, "attention_f16_forward.out", &out, TOL_FLIP);
    check_buf(e, "attention_f16_forward.att", &atth, TOL_FLIP);
    check_buf(e, "attention_f16_backward.dqkv", &dh, TOL_FLIP);
    check_values_of(e, "attention_f16_forward.att_is_f16", &atth, DT_F16);
    buf_free(e, &qh), buf_free(e, &atth), buf_free(e, &dh);
    Buf *all[] = {&qkv, &dout, &out, &att, &dqkv, &scratch, &dx, &d1};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(e, all[i]);
}

// Attention without the (T,T) matrix (ops_cuda_flash.cu) against the CPU's
// (ops_cpu_flash.c): out, lse and dqkv (starting non-zero: the backward adds), in fp32
// within the forward's and gradients' tolerances; with rt = bf16 on bf16 inputs within
// TOL_FLIP (the two round the same numbers, summed in another order, and a rounding
// may land on the other side); the GPU's backward twice, the same bits (no atomics).
void test_flash_attention(Env *e, const Dims *d) {
    int B = d->B, T = d->T, C = d->C, NH = d->NH;
    size_t BTC = (size_t)B * T * C, nlse = (size_t)B * NH * T;
    char what[96];
    for (int bf16 = 0; bf16 < 2; bf16++) {
        DType rt = bf16 ? DT_BF16 : DT_F32;
        const char *tag = bf16 ? "flash_bf16" : "flash";
        Buf qkv = bf16 ? buf_bf16(e, 3 * BTC, 1.0f) : buf_normal(e, 3 * BTC, 0.0f, 1.0f);
        Buf dout = bf16 ? buf_bf16(e, BTC, 1.0f) : buf_normal(e, BTC, 0.0f, 1.0f);
        Buf out = buf_zero(e, BTC * sizeof(float)), lse = buf_zero(e, nlse * sizeof(float));
        Buf dqkv = buf_normal(e, 3 * BTC, 0.0f, 1.0f);
        for (int dev = 0; dev < 2; dev++) {
            Ctx *x = ctx_of(e, dev);
            x->ops->flash_attention_forward(x, on(&out, dev), on(&lse, dev), on(&qkv, dev), B, T, C,
                                            NH, rt);
        }
        snprintf(what, sizeof what, "%s_forward.out", tag);
        check_buf(e, what, &out, bf16 ? TOL_FLIP : TOL_FWD);
        snprintf(what, sizeof what, "%s_forward.lse", tag);
        check_buf(e, what, &lse, TOL_FWD);
        for (int dev = 0; dev < 2; dev++) {  // each side's own out and lse, as in a model
            Ctx *x = ctx_of(e, dev);
            x->ops->flash_attention_backward(x, on(&dqkv, dev), on(&dout, dev), on(&qkv, dev),
                                             on(&out, dev), on(&lse, dev), B, T, C, NH, rt);
        }
        snprintf(what, sizeof what, "%s_backward.dqkv", tag);
        check_buf(e, what, &dqkv, bf16 ? TOL_FLIP : TOL_GRAD);
        void *first = read_back(&e->gpu, dqkv.g, dqkv.bytes);
        snprintf(what, sizeof what, "%s_backward.dqkv deterministic", tag);
        RERUN_GPU_SAME_BITS(e, what, dqkv, first,
                            e->gpu.ops->flash_attention_backward(&e->gpu, dqkv.g, dout.g, qkv.g,
                                                                 out.g, lse.g, B, T, C, NH, rt));
        free(first);
        Buf *all[] = {&qkv, &dout, &out, &lse, &dqkv};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(e, all[i]);
    }
}
