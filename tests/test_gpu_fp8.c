// test_gpu_fp8.c — the fp8 recipe's GEMMs (ops->matmul_fp8_*) on the fp8 tensor
// cores through cuBLASLt (e->gpu_lt: a CUDA backend started with
// COURSE_FP8_GEMM=cublaslt), against the CPU's fp32 GEMM on the same fp8 values.
//
// The operands are what quantize_fp8 leaves (v = fp8(x·s)/s, with s = fp8_max/amax
// as delayed scaling picks it; not a power of two, so the division rounds). The
// GPU re-encodes them to fp8 exactly and multiplies the codes: every product is
// exact in fp32 (4 x 4 or 4 x 3 significant bits), so only the sums differ, and
// the scales, applied once at the end instead of to every operand. Tolerance,
// norm-wise: 2^-10 (1e-3). Why: fp32 sums alone would stay near 1e-6 sqrt(K)
// (test_matmul_bf16); Hopper's fp8 accumulator keeps fewer bits than fp32 (about
// 14, DeepSeek-V3 §3.3.2), which cuBLASLt offsets by promoting partial sums to fp32
// at intervals (fast accumulation off, its default). 2^-10 admits that and stays
// far below what a wrong path costs: operands not re-encoded exactly, a scale
// applied twice or not at all, a transposition gone wrong all err by 2^-5 (fp8's
// own rounding) or far more. The last checks prove each of the three GEMMs took the
// path: fp32 inputs that are not fp8 values come out ~2^-5 off through cuBLASLt,
// ~1e-7 through cuBLAS.
// Where the shapes are not cuBLASLt's (a dimension not a multiple of 16: the
// "small" and "odd" shape sets), the op must be the fp32 GEMM, held to test_matmul's
// tolerances; the "aligned" case takes cuBLASLt's path at every shape set, so that
// `test_gpu --quick` (compute-sanitizer) runs it too.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_gpu.h"

#define TOL_FP8 (1.0 / 1024)

// n normals quantized as the fp8 recipe does, with the scale delayed scaling would
// pick for them (*scale): the values on the host and both backends.
static Buf buf_fp8(Env *e, size_t n, float std, DType fmt, float *scale) {
    Buf b = buf_normal(e, n, 0.0f, std);
    float *h = b.host, amax = 0.0f;
    for (size_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(h[i]));
    *scale = (fmt == DT_E5M2 ? 57344.0f : 448.0f) / amax;
    e->cpu.ops->quantize_fp8(&e->cpu, h, n, fmt, *scale, &amax);  // the CPU's memory is the host's
    buf_upload(e, &b);
    return b;
}

// gpu_lt has a stream of its own: what e->gpu uploaded must have landed before it
// reads, and what it wrote before e->gpu reads back.
static void gpu_uploads_done(Env *e) { e->gpu.ops->synchronize(&e->gpu); }

// The GPU buffer's values after an op on gpu_lt.
static float *lt_result(Env *e, const Buf *b) {
    e->gpu_lt.ops->synchronize(&e->gpu_lt);
    return read_back(&e->gpu, b->g, b->bytes);
}

static void compare(Env *e, const char *what, const Buf *b, double tol) {
    char name[128];
    snprintf(name, sizeof name, "%s[%s]", what, e->size);
    float *c = read_back(&e->cpu, b->c, b->bytes), *g = lt_result(e, b);
    check_rel(&e->ts, name, g, c, b->bytes / sizeof(float), tol);
    free(c), free(g);
}

void test_matmul_fp8(Env *e, const Dims *d) {
    int N = d->B * d->T, C = d->C;
    struct { const char *name; int N, C, OC; } cases[] = {
        {"qkv", N, C, 3 * C}, {"proj", N, 4 * C, C}, {"aligned", 64, 96, 128}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int n = cases[k].N, c = cases[k].C, oc = cases[k].OC;
        int lt = n % 16 == 0 && c % 16 == 0 && oc % 16 == 0;  // cuBLASLt's fp8 shapes
        char what[96];
        float sx, sw, sdy;
        Buf inp = buf_fp8(e, (size_t)n * c, 1.0f, DT_E4M3, &sx);
        Buf w = buf_fp8(e, (size_t)oc * c, 0.02f, DT_E4M3, &sw);
        Buf bias = buf_normal(e, oc, 0.0f, 0.1f);
        Buf out = buf_zero(e, (size_t)n * oc * sizeof(float));
        Ctx *x[2] = {&e->cpu, &e->gpu_lt};
        // Where cuBLASLt does not take the shapes, the fp32 GEMM as test_matmul holds it.
        double tol_fwd = lt ? TOL_FP8 : TOL_FWD, tol_grad = lt ? TOL_FP8 : TOL_GRAD;
        gpu_uploads_done(e);
        for (int dev = 0; dev < 2; dev++)
            x[dev]->ops->matmul_fp8_forward(x[dev], on(&out, dev), on(&inp, dev), sx, on(&w, dev),
                                            sw, on(&bias, dev), n, c, oc);
        snprintf(what, sizeof what, "matmul_fp8_forward.%s.%s", cases[k].name,
                 lt ? "cublaslt" : "fp32_fallback");
        compare(e, what, &out, tol_fwd);

        Buf dout = buf_fp8(e, (size_t)n * oc, 1e-3f, DT_E5M2, &sdy);
        Buf dinp = buf_normal(e, (size_t)n * c, 0.0f, 1e-3f);  // non-zero: the GEMMs add
        Buf dw = buf_normal(e, (size_t)oc * c, 0.0f, 1e-3f);
        Buf dbias = buf_normal(e, oc, 0.0f, 1e-3f);
        gpu_uploads_done(e);
        for (int dev = 0; dev < 2; dev++)
            x[dev]->ops->matmul_fp8_backward(x[dev], on(&dinp, dev), on(&dw, dev), on(&dbias, dev),
                                             on(&dout, dev), sdy, on(&inp, dev), sx, on(&w, dev),
                                             sw, n, c, oc);
        snprintf(what, sizeof what, "matmul_fp8_backward.%s.dinp", cases[k].name);
        compare(e, what, &dinp, tol_grad);
        snprintf(what, sizeof what, "matmul_fp8_backward.%s.dw", cases[k].name);
        compare(e, what, &dw, tol_grad);
        snprintf(what, sizeof what, "matmul_fp8_backward.%s.dbias", cases[k].name);
        compare(e, what, &dbias, TOL_GRAD);  // a column sum, not a GEMM: fp32 either way

        if (lt) {  // fp32 inputs on purpose: each of the three GEMMs must read them as fp8
            Buf xr = buf_normal(e, (size_t)n * c, 0.0f, 1.0f);
            Buf dr = buf_normal(e, (size_t)n * oc, 0.0f, 1.0f);
            gpu_uploads_done(e);
            for (int dev = 0; dev < 2; dev++) {
                x[dev]->ops->matmul_fp8_forward(x[dev], on(&out, dev), on(&xr, dev), 1.0f,
                                                on(&w, dev), sw, NULL, n, c, oc);
                // dinp from dr (not E5M2 values) and w; dw from dr and xr (not E4M3).
                x[dev]->ops->matmul_fp8_backward(x[dev], on(&dinp, dev), on(&dw, dev), NULL,
                                                 on(&dr, dev), 1.0f, on(&xr, dev), 1.0f,
                                                 on(&w, dev), sw, n, c, oc);
            }
            const Buf *res[] = {&out, &dinp, &dw};
            const char *gemm[] = {"forward", "backward.dinp", "backward.dw"};
            for (int i = 0; i < 3; i++) {
                float *cc = read_back(&e->cpu, res[i]->c, res[i]->bytes), *gg = lt_result(e, res[i]);
                double err = rel_error(gg, cc, res[i]->bytes / sizeof(float));
                snprintf(what, sizeof what, "matmul_fp8_%s.%s.reads_fp8[%s]", gemm[i],
                         cases[k].name, e->size);
                test_report(&e->ts, err > 1e-3, what, "rel_err %.3e on inputs that are not fp8 "
                            "(want > 1e-3: encoding them errs ~2^-5; an fp32 GEMM ~1e-7)", err);
                free(cc), free(gg);
            }
            buf_free(e, &xr), buf_free(e, &dr);
        }
        Buf *all[] = {&inp, &w, &bias, &out, &dout, &dinp, &dw, &dbias};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(e, all[i]);
    }
}
