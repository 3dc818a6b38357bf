// test_gpu.c — the CUDA backend against the CPU backend: op by op, then the model.
// This file holds main, the buffer helpers (declared in test_gpu.h), the memory
// ops and the model; the op-by-op checks are in test_gpu_ops.c and test_gpu_fp8.c,
// linked into the same program.
//
// Every op of the Ops table (test_gpu_ops.c) runs on the same random inputs on
// both backends and the outputs are compared with harness.h's rel_error
// (||gpu - cpu|| / ||cpu||):
//   forward outputs  1e-5
//   gradients        1e-4
// Both backends compute in fp32 and cuBLAS runs without TF32, so what differs is
// the order of summation (cuBLAS and OpenBLAS tile the inner dimension
// differently; our GPU reductions are trees where the CPU sums in order) and
// last-ulp differences of exp/tanh. That leaves relative errors around 1e-7 for
// a forward op. Gradients go through more such sums and through cancellations
// (softmax and layernorm backward subtract nearly equal terms), hence 1e-4.
//
// Then the whole GPT: forward, backward and 10 AdamW steps on both backends, and
// two GPU runs that must agree bit for bit (no float atomics anywhere).
//
// --quick leaves out GPT-2's widths (the "gpt2" op shapes and the wide model):
// for compute-sanitizer, under which every kernel runs many times slower.
// --probe only says whether there is a usable GPU (tests/test_gpu_probe.sh).
//
// Exit status: 0 all passed, 1 some failed, 77 skipped (no CUDA in this build or
// no CUDA device), which tests/run.sh counts as skipped rather than passed. A
// GPU that is there but broken (any CUDA error at start-up other than "no
// device") is a failure, never a skip: see common/cuda_probe.h.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda_probe.h"
#include "flags.h"
#include "model.h"
#include "optim.h"
#include "test_gpu.h"

// Shape sets: small and odd (nothing a power of two, nothing a multiple of 32),
// and GPT-2 124M's widths at its full context.
static const Dims dims[] = {
    {"small", 3, 13, 72, 6, 97},
    {"odd", 5, 67, 200, 8, 1001},
    {"gpt2", 2, 1024, 768, 12, 50257},
};

// ---------------------------------------------------------------- buffers

void buf_upload(Env *e, Buf *b) {
    for (int dev = 0; dev < 2; dev++) {
        Ctx *x = ctx_of(e, dev);
        x->ops->to_device(x, on(b, dev), b->host, b->bytes);
    }
}

Buf buf_zero(Env *e, size_t bytes) {
    Buf b = {bytes, xmalloc(bytes), NULL, NULL};
    memset(b.host, 0, bytes);
    b.c = e->cpu.ops->alloc(&e->cpu, bytes);
    b.g = e->gpu.ops->alloc(&e->gpu, bytes);
    CHECK(b.c && b.g, "test allocation of %zu bytes failed", bytes);
    return b;
}

Buf buf_normal(Env *e, size_t n, float mean, float std) {
    Buf b = buf_zero(e, n * sizeof(float));
    rng_fill_normal(&e->rng, b.host, n, mean, std);
    buf_upload(e, &b);
    return b;
}

Buf buf_tokens(Env *e, size_t n, int V) {
    Buf b = buf_zero(e, n * sizeof(int));
    int *t = b.host;
    for (size_t i = 0; i < n; i++)
        t[i] = (int)rng_below(&e->rng, (i % 2 && V > 8) ? 8u : (uint32_t)V);
    buf_upload(e, &b);
    return b;
}

void buf_free(Env *e, Buf *b) {
    e->cpu.ops->free(&e->cpu, b->c);
    e->gpu.ops->free(&e->gpu, b->g);
    free(b->host);
    memset(b, 0, sizeof *b);
}

void *read_back(Ctx *x, const void *p, size_t bytes) {
    void *h = xmalloc(bytes);
    x->ops->to_host(x, h, p, bytes);
    return h;
}

void check_buf(Env *e, const char *what, const Buf *b, double tol) {
    char name[128];
    snprintf(name, sizeof name, "%s[%s]", what, e->size);
    float *c = read_back(&e->cpu, b->c, b->bytes), *g = read_back(&e->gpu, b->g, b->bytes);
    check_rel(&e->ts, name, g, c, b->bytes / sizeof(float), tol);
    free(c);
    free(g);
}

void check_same_bits(Env *e, const char *what, const void *a, const void *b, size_t bytes) {
    char name[128];
    snprintf(name, sizeof name, "%s[%s]", what, e->size);
    int same = memcmp(a, b, bytes) == 0;
    test_report(&e->ts, same, name, "%s (%zu bytes)", same ? "bitwise identical" : "DIFFERENT",
                bytes);
}

// ---------------------------------------------------------------- memory ops

static void test_memory(Env *e) {
    size_t n = 1000003;
    Buf a = buf_normal(e, n, 0.0f, 1.0f), z = buf_zero(e, n * sizeof(float));
    Ctx *g = &e->gpu;
    float *back = read_back(g, a.g, a.bytes);
    test_report(&e->ts, memcmp(back, a.host, a.bytes) == 0, "to_device/to_host", "n %zu", n);
    free(back);
    float *fresh = read_back(g, z.g, z.bytes);  // alloc promises zero-filled memory
    int zero = 1;
    for (size_t i = 0; i < n; i++) zero &= fresh[i] == 0.0f;
    test_report(&e->ts, zero, "alloc zero-fills", "n %zu", n);
    free(fresh);
    g->ops->copy(g, z.g, a.g, a.bytes);
    back = read_back(g, z.g, z.bytes);
    test_report(&e->ts, memcmp(back, a.host, a.bytes) == 0, "copy device to device", "n %zu", n);
    free(back);
    g->ops->memset0(g, z.g, z.bytes);
    back = read_back(g, z.g, z.bytes);
    zero = 1;
    for (size_t i = 0; i < n; i++) zero &= back[i] == 0.0f;
    test_report(&e->ts, zero, "memset0", "n %zu", n);
    free(back);
    buf_free(e, &a);
    buf_free(e, &z);
}

// ---------------------------------------------------------------- the model

static void model_setup(GPT *g, Ctx *ctx, const GPTConfig *cfg, int B, int T) {
    gpt_init(g, ctx, cfg, 1337);
    gpt_alloc_grads(g);
    gpt_alloc_acts(g, B, T);
}

// `steps` AdamW steps on one batch (the loss must fall); losses[s] is the loss
// before step s.
static void model_train(GPT *g, const int *tokens, const int *targets, int B, int T, int steps,
                        float *losses) {
    AdamWConfig ac = adamw_default_config();
    AdamW opt;
    adamw_init(&opt, g, &ac, 0, g->n_params);
    for (int s = 0; s < steps; s++) {
        losses[s] = gpt_forward(g, tokens, targets, B, T);
        gpt_zero_grad(g);
        gpt_backward(g, 1.0f);
        adamw_step(&opt, g, grad_global_norm(g));
    }
    adamw_free(&opt, g);
}

static void test_model(Env *e, const char *name, const GPTConfig *cfg, int B, int T, int steps) {
    e->size = name;
    int V = cfg->vocab;
    size_t BT = (size_t)B * T;
    int *tokens = xmalloc(BT * sizeof(int)), *targets = xmalloc(BT * sizeof(int));
    for (size_t i = 0; i < BT; i++) {
        tokens[i] = (int)rng_below(&e->rng, (uint32_t)V);
        targets[i] = (int)rng_below(&e->rng, (uint32_t)V);
    }
    GPT gc, gg;
    model_setup(&gc, &e->cpu, cfg, B, T);
    model_setup(&gg, &e->gpu, cfg, B, T);
    size_t pbytes = gc.n_params * sizeof(float);
    float *pc = read_back(&e->cpu, gc.params, pbytes), *pg = read_back(&e->gpu, gg.params, pbytes);
    check_same_bits(e, "gpt_init same weights", pc, pg, pbytes);
    free(pc);
    free(pg);

    float lc = gpt_forward(&gc, tokens, targets, B, T);
    float lg = gpt_forward(&gg, tokens, targets, B, T);
    char what[128];
    size_t lbytes = BT * V * sizeof(float);
    float *c = read_back(&e->cpu, gc.acts.logits, lbytes), *g = read_back(&e->gpu, gg.acts.logits, lbytes);
    snprintf(what, sizeof what, "gpt_forward.logits[%s]", name);
    check_rel(&e->ts, what, g, c, BT * V, TOL_FWD);
    free(c);
    free(g);
    c = read_back(&e->cpu, gc.acts.losses, BT * sizeof(float));
    g = read_back(&e->gpu, gg.acts.losses, BT * sizeof(float));
    snprintf(what, sizeof what, "gpt_forward.losses[%s]", name);
    check_rel(&e->ts, what, g, c, BT, TOL_FWD);
    free(c);
    free(g);
    snprintf(what, sizeof what, "gpt_forward.loss[%s]", name);
    check_rel(&e->ts, what, &lg, &lc, 1, TOL_FWD);

    gpt_zero_grad(&gc);
    gpt_zero_grad(&gg);
    gpt_backward(&gc, 1.0f);
    gpt_backward(&gg, 1.0f);
    c = read_back(&e->cpu, gc.grads, pbytes);
    g = read_back(&e->gpu, gg.grads, pbytes);
    snprintf(what, sizeof what, "gpt_backward.grads[%s]", name);
    check_rel(&e->ts, what, g, c, gc.n_params, TOL_GRAD);
    free(c);
    free(g);
    gpt_free(&gc);
    gpt_free(&gg);

    if (steps > 0) {
        // Training from fresh models. Only the losses are compared: parameters whose
        // gradient is zero in exact arithmetic but rounding noise in fp32 (the key
        // biases: softmax ignores a constant added to a row) get Adam steps of size
        // ~lr in a noise-given direction, differently on each backend; the loss does
        // not depend on them.
        float *loss_c = xmalloc(steps * sizeof(float)), *loss_g = xmalloc(steps * sizeof(float));
        float *loss_g2 = xmalloc(steps * sizeof(float));
        model_setup(&gc, &e->cpu, cfg, B, T);
        model_train(&gc, tokens, targets, B, T, steps, loss_c);
        gpt_free(&gc);
        model_setup(&gg, &e->gpu, cfg, B, T);
        model_train(&gg, tokens, targets, B, T, steps, loss_g);
        float *p1 = read_back(&e->gpu, gg.params, pbytes);
        gpt_free(&gg);
        snprintf(what, sizeof what, "adamw_%d_steps.losses[%s]", steps, name);
        check_rel(&e->ts, what, loss_g, loss_c, steps, TOL_GRAD);
        printf("# losses cpu %.6f .. %.6f, cuda %.6f .. %.6f\n", loss_c[0], loss_c[steps - 1],
               loss_g[0], loss_g[steps - 1]);

        // The same GPU run again: bit for bit the same losses and weights.
        model_setup(&gg, &e->gpu, cfg, B, T);
        model_train(&gg, tokens, targets, B, T, steps, loss_g2);
        float *p2 = read_back(&e->gpu, gg.params, pbytes);
        gpt_free(&gg);
        check_same_bits(e, "cuda rerun: losses", loss_g, loss_g2, steps * sizeof(float));
        check_same_bits(e, "cuda rerun: weights", p1, p2, pbytes);
        free(p1);
        free(p2);
        free(loss_c);
        free(loss_g);
        free(loss_g2);
    }
    free(tokens);
    free(targets);
}

int main(int argc, char **argv) {
    int quick = 0, probe_only = 0;
    Flag flags[] = {
        F_BOOL("--quick", &quick, "leave out GPT-2's widths (for compute-sanitizer)"),
        F_BOOL("--probe", &probe_only, "only say whether the GPU is usable (exit 0 ready, 77 "
               "none, 1 broken)"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "test_gpu [flags]",
                "Checks every op of the CUDA backend and the model against the CPU backend.");
    CudaProbe probe;
    cuda_probe(&probe);
    int gate = cuda_probe_gate(&probe, "gpu");
    if (gate || probe_only) {
        if (!gate) printf("# gpu: %s\n", probe.why);
        return gate;
    }
    static Env env;  // static: zero-initialised, and the Ctx structs are not small
    Env *e = &env;
    ctx_init(&e->cpu, DEV_CPU, 8, 0);
    // COURSE_FP8_GEMM is read when a CUDA backend starts: gpu runs the fp8 recipe's
    // GEMMs in fp32 (the CPU's sums, to 1e-5), gpu_lt on the fp8 tensor cores.
    const char *fp8_gemm = getenv("COURSE_FP8_GEMM");
    char saved[16] = "";
    if (fp8_gemm) snprintf(saved, sizeof saved, "%s", fp8_gemm);
    setenv("COURSE_FP8_GEMM", "fp32", 1);
    ctx_init(&e->gpu, DEV_CUDA, 1, 0);
    setenv("COURSE_FP8_GEMM", "cublaslt", 1);
    ctx_init(&e->gpu_lt, DEV_CUDA, 1, 0);
    if (fp8_gemm) setenv("COURSE_FP8_GEMM", saved, 1);
    else unsetenv("COURSE_FP8_GEMM");
    rng_seed(&e->rng, 42);
    printf("# backend %s against backend %s\n", e->gpu.ops->name, e->cpu.ops->name);

    test_memory(e);
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        const Dims *d = &dims[i];
        if (quick && strcmp(d->name, "gpt2") == 0) continue;
        e->size = d->name;
        printf("# ops at B=%d T=%d C=%d NH=%d V=%d\n", d->B, d->T, d->C, d->NH, d->V);
        test_matmul(e, d);
        test_matmul_bf16(e, d);
        test_matmul_fp8(e, d);
        test_embedding(e, d);
        test_layernorm(e, d);
        test_attention(e, d);
        test_attention_bf16(e, d);
        test_flash_attention(e, d);
        test_elementwise(e, d);
        test_crossentropy(e, d);
        test_vocab_split(e, d);
        test_optimizer(e, d);
        test_low_precision(e, d);
    }

    // A small model trained for 10 steps, and GPT-2 124M's widths for one step
    // (two layers, to keep the CPU side to seconds).
    GPTConfig small = {.n_layer = 2, .n_embd = 72, .n_head = 6, .seq_len = 16, .vocab = 97};
    GPTConfig wide = {.n_layer = 2, .n_embd = 768, .n_head = 12, .seq_len = 128, .vocab = 50257};
    test_model(e, "gpt-small", &small, 3, 13, 10);
    if (!quick) test_model(e, "gpt-wide", &wide, 2, 128, 0);

    ctx_destroy(&e->gpu_lt);
    ctx_destroy(&e->gpu);
    ctx_destroy(&e->cpu);
    return test_finish(&e->ts);
}
